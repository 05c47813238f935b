"""Every command example in README.md and docs/*.md runs in a test.

The convention: a command example is a line starting with ``$ `` in a fenced ```` ```console ````
block; a line ending in ``\\`` goes on to the next, a here-document (``<<'EOF'``) to its end
marker; the other lines of the block are what the command prints. A trailing ``# exit N`` says
that the command exits N (0 otherwise).

Each example, in the order its document gives them, is either

- **run** here with ``bash`` in a copy of a sandbox made once for the module: simulated tables
  played with ``simulate --fast`` (``demo-state``, made by the Makefile's own ``demo`` command
  line, and the same table as ``/var/lib/paigow-controller``; an RNG table as
  ``copy-of-state``), ``hw/`` and ``tests/`` of this checkout, and ``.venv/bin`` on the PATH.
  On a table the default config is ``/etc/paigow-controller/config.toml`` and the reading
  commands' default state directory ``/var/lib/paigow-controller``; here a command that would
  read either is given the sandbox's (``--config``, ``--state-dir``), whose state directory is
  the simulated table's. The command must exit as stated; or

- **checked elsewhere**, when it needs root, a Raspberry Pi, systemd, apt or the network: it is
  in ``ELSEWHERE`` below, which names the test that runs it for real (the file exists and defines
  that test), and here its command line must be accepted: by ``paigow-controller``'s argument
  parser without running (``controller.cli.build_parser``), or for a script of this checkout, the
  script exists, passes ``bash -n`` and knows every ``--option`` the example gives it, or for a
  system program, it is installed and the line passes ``bash -n``.

The sandbox also holds ``auditor.key`` (the RNG table's escrow key: what the auditor's own key is
to a real table) and ``media/usb/`` (a USB stick); ``/var/lib/paigow-controller``,
``/etc/paigow-controller`` and ``/media/`` in an example are the sandbox's.

An example that is neither fails. So does an entry of ``ELSEWHERE`` that no example uses.
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.core.records import RecordKind

# Examples of commands that other work brings (a command or an option not yet on this branch):
# the exact command text as the document gives it (after ``$ ``). They are expected to fail
# here; one that passes fails the test, so that it is taken out. Emptied once that work is in.
PENDING: set[str] = set()
# Files the documents link to or name that other work brings (docs/faults.md is generated from
# the fault table by the status command's work). Emptied once that work is in.
PENDING_FILES: set[str] = set()
# Tests that ELSEWHERE names and other work brings. Emptied once that work is in.
PENDING_TESTS: set[str] = set()

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VENV_BIN = Path(sys.executable).parent
PROGRAM = "paigow-controller"
README_MAX_BYTES = 12 * 1024
# Places of a table's file system that the examples name: here, inside the sandbox.
SANDBOXED = ("/var/lib/paigow-controller", "/etc/paigow-controller", "/media/")

# What cannot run here, and the test that runs it for real. Each entry: a regular expression a
# whole example must match (``re.fullmatch``, after ``sudo``, ``sudo -u USER`` and variable
# assignments are taken off the front), and where it runs: a test (``tests/...py::name``) or
# ``CI`` for ``make test`` itself.
ELSEWHERE: list[tuple[str, str]] = [
    # the set-up: make test is the whole suite; make demo's command line makes this test's sandbox
    (r"make test( +#.*)?", "CI"),
    (r"make demo( +#.*)?", "tests/e2e/test_docs.py::sandbox_template"),
    (
        r"make systemtest",
        "tests/system/test_unit_under_systemd.py::test_install_starts_the_service_after_ready",
    ),
    (
        r"make lock( LOCK_ARGS=--upgrade)?( +#.*)?",
        "tests/e2e/test_packaging.py::test_the_locks_satisfy_pyproject",
    ),
    # the installer, the kiosk and the unit under a real systemd (tests/system, as root)
    (
        r"hw/install-raspberry-pi\.sh --rollback( +#.*)?",
        "tests/system/test_unit_under_systemd.py::test_rollback_returns_to_the_previous_release",
    ),
    (
        r"hw/install-raspberry-pi\.sh( +#.*)?",
        "tests/system/test_unit_under_systemd.py::test_install_starts_the_service_after_ready",
    ),
    (
        r"hw/install-raspberry-pi\.sh .*",
        "tests/system/test_unit_under_systemd.py::test_install_starts_the_service_after_ready",
    ),
    (r"\.venv/bin/python -m pip download .*", "tests/system/conftest.py::guest"),
    (
        r"hw/kiosk/setup-kiosk\.sh( +#.*)?",
        "tests/browser/test_kiosk.py::test_the_script_writes_the_unit_the_page_and_the_url_under_destdir",
    ),
    (
        r"systemctl (stop|start|restart|status) paigow-controller",
        "tests/system/test_unit_under_systemd.py::test_stop_is_clean_and_recorded",
    ),
    (
        r"(readlink /opt/paigow-controller/\S+ .*|systemctl (cat|is-active) paigow-controller\S*)",
        "tests/system/test_unit_under_systemd.py::test_rollback_returns_to_the_previous_release",
    ),
    (
        rf"{PROGRAM} verify-software",
        "tests/system/test_unit_under_systemd.py::"
        "test_one_byte_changed_in_the_installed_release_is_found",
    ),
    (
        r"(apt-get (clean|install --download-only .*)|mkdir -p wheels/debs && cp .*)",
        "tests/system/test_unit_under_systemd.py::"
        "test_a_tampered_release_is_repaired_by_running_the_installer_again",
    ),
    (
        r"journalctl -u paigow-(controller|kiosk)( .*)?",
        "tests/system/test_unit_under_systemd.py::test_journal_keeps_the_priorities",
    ),
    (
        r"systemctl restart paigow-kiosk",
        "tests/browser/test_kiosk.py::test_systemd_analyze_verifies_the_unit",
    ),
    # the table's status: a running controller (here none runs: it would say NOT RUNNING)
    (
        rf"{PROGRAM} status( --state-dir /var/lib/paigow-controller)?( --json)?",
        "tests/app/test_status.py::test_status_of_a_healthy_table_then_two_faults_then_stopped",
    ),
    # a restore on the table, as root, from a USB stick
    (
        rf"{PROGRAM} restore /media/.*",
        "tests/audit/test_audit_restore.py::test_the_drill_backup_restore_verify_play_on_verify",
    ),
    # on the table's hardware, as the paigow user
    (
        rf"{PROGRAM} commission --simulate .*",
        "tests/app/test_commission.py::"
        "test_a_walk_of_the_simulated_hardware_passes_and_is_recorded_as_simulated",
    ),
    (
        rf"{PROGRAM} commission .*",
        "tests/app/test_commission.py::test_a_full_walk_passes_every_step_and_is_recorded",
    ),
    # a table played for an hour at a person's pace, beside a person at the terminal
    (
        rf"{PROGRAM} simulate --rounds 500 --supervisor-key .*",
        "tests/e2e/test_bench_practice.py::"
        "test_with_the_key_held_on_a_persons_action_is_taken_and_names_the_employee",
    ),
    # building the fonts takes Debian's font packages; the stress test, minutes
    (
        r"scripts/build-fonts( --check)?",
        "tests/browser/test_display_fonts.py::"
        "test_every_character_the_pages_can_show_is_in_the_bundled_fonts",
    ),
    (
        r"\.venv/bin/python bench/stop_stress\.py .*",
        "tests/app/test_stop.py::"
        "test_sigterm_at_random_points_after_restarts_always_stops_cleanly_within_budget",
    ),
    (
        rf"{PROGRAM} selftest.*",
        "tests/app/test_appliance.py::test_selftest_passes_on_healthy_hardware",
    ),
    (
        rf"{PROGRAM} run --config /etc/paigow-controller/config\.toml",
        "tests/system/test_unit_under_systemd.py::test_install_starts_the_service_after_ready",
    ),
    # the service terminal: a running controller with the physical supervisor key on
    (
        rf"{PROGRAM} supervise .*",
        "tests/app/test_service_terminal.py::test_the_command_line_end_to_end",
    ),
    # the casino's server: the broker, the witness and its installer
    (
        r"hw/install-witness\.sh .*",
        "tests/e2e/test_install_witness.py::test_it_writes_what_it_says_with_their_modes",
    ),
    (
        r"systemctl (stop|start|restart) (paigow-witness|mosquitto)",
        "tests/e2e/test_install_witness.py::test_mosquitto_runs_on_what_it_installed",
    ),
    (rf"{PROGRAM} witness(-key)? .*", "tests/e2e/test_witness.py::test_the_commands"),
    (
        rf"{PROGRAM} export-key .* > /etc/paigow-witness/tables/\S+",
        "tests/e2e/test_fleet_tls_e2e.py::test_a_table_is_cosigned_over_the_shipped_broker",
    ),
    # a serial number only the CA's list gives
    (rf"{PROGRAM} fleet-ca revoke .*", "tests/app/test_fleet_pki.py::test_revoke_writes_the_crl"),
    (
        r"install -(o paigow -g paigow )?-m 0[0-9]{3} table-7/\S+ /etc/paigow-controller/\S+",
        "tests/e2e/test_fleet_tls_e2e.py::test_a_table_is_cosigned_over_the_shipped_broker",
    ),
    (
        r"systemd-creds encrypt .*",
        "tests/audit/test_audit_storage.py::test_the_key_comes_from_systemd_credentials_when_provided",
    ),
    # a cosigned note comes from a witness
    (
        r"go run tests/independent/cosignature\.go .*",
        "tests/audit/test_cosignature_independent.py::"
        "test_a_cosignature_over_a_note_with_an_extension_line_verifies_independently",
    ),
    # a copy of a table's card, mounted
    (
        rf"{PROGRAM} verify-software --root /mnt/\S+ .*",
        "tests/system/test_unit_under_systemd.py::"
        "test_one_byte_changed_in_the_installed_release_is_found",
    ),
]


@dataclass(frozen=True)
class Example:
    path: Path
    line: int
    command: str  # as the document gives it, continuation lines and here-documents included
    exit_code: int

    def __str__(self) -> str:
        name = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name
        return f"{name}:{self.line}: $ {self.command}"


_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
_HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")


def examples(path: Path, text: str | None = None) -> list[Example]:
    """The command examples of a Markdown document, in order."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).split("\n")
    found: list[Example] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if fence is None:
            if stripped.startswith("```"):
                fence = stripped[3:].strip() or "plain"
            i += 1
            continue
        if stripped.startswith("```"):
            fence = None
            i += 1
            continue
        if fence == "console" and stripped.startswith("$ "):
            start = i
            command = [stripped[2:]]
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i].strip())
            heredoc = _HEREDOC.search(command[0])
            if heredoc:
                while i + 1 < len(lines):
                    i += 1
                    command.append(lines[i])
                    if lines[i].strip() == heredoc.group(1):
                        break
            text_of = "\n".join(command)
            code = _EXIT.search(command[0] if heredoc else command[-1])
            found.append(Example(path, start + 1, text_of, int(code.group(1)) if code else 0))
        i += 1
    return found


def _words(command: str) -> list[str]:
    """The command's words up to the first shell operator, comments dropped, and ``sudo``,
    ``sudo -u USER`` and variable assignments taken off the front."""
    first = command.split("\n", maxsplit=1)[0] if _HEREDOC.search(command) else command
    lexer = shlex.shlex(first.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for word in lexer:
        if word and set(word) <= set("|&;<>()"):
            break
        words.append(word)
    while words:
        if words[0] == "sudo":
            words = words[3:] if words[1:2] == ["-u"] else words[1:]
        elif re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            words = words[1:]
        else:
            break
    return words


def _program_words(words: list[str]) -> list[str] | None:
    """The arguments after ``paigow-controller`` (however it is reached), or None."""
    if words and (words[0] == PROGRAM or words[0].endswith(f"/bin/{PROGRAM}")):
        return words[1:]
    return None


def _bare(example: Example) -> str:
    """The example's first line as ELSEWHERE matches it: its comment, ``sudo``, ``sudo -u USER``
    and variable assignments taken off, ``paigow-controller`` however it is reached."""
    bare = re.sub(r" +#.*$", "", example.command.split("\n", maxsplit=1)[0])
    bare = re.sub(r"^(sudo( -u \S+)? +)?([A-Z_]+=\S* +)*", "", bare)
    return re.sub(rf"^\S*/bin/{PROGRAM}\b", PROGRAM, bare)


def _runs_in(example: Example) -> tuple[str, str] | None:
    """The entry of ELSEWHERE the example matches (the first), if any."""
    bare = _bare(example)
    return next(((p, r) for p, r in ELSEWHERE if re.fullmatch(p, bare)), None)


def elsewhere(example: Example) -> str | None:
    """Where the example runs for real, if it cannot run here."""
    entry = _runs_in(example)
    return entry[1] if entry else None


def parse_only(arguments: list[str]) -> str | None:
    """Whether ``paigow-controller``'s argument parser accepts the arguments (nothing runs):
    None, or what it said."""
    from controller.cli import _BY_NAME, build_parser

    chosen = next((a for a in arguments if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in _BY_NAME else "")
    said = io.StringIO()
    try:
        with redirect_stderr(said), redirect_stdout(io.StringIO()):
            parser.parse_args(arguments)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return said.getvalue().strip() or f"exit {exc.code}"
    return None


def check_elsewhere(example: Example) -> str | None:
    """An example that runs elsewhere: its command line is accepted here. None, or why not."""
    words = _words(example.command)
    program = _program_words(words)
    if program is not None:
        return parse_only(program)
    if re.fullmatch(r"\S*python3?", words[0]) and len(words) > 2 and words[1] == "-m":
        found = importlib.util.find_spec(words[2].split(".")[0])
        return None if found is not None else f"{words[0]} -m {words[2]}: no such module"
    if re.fullmatch(r"\S*python3?", words[0]) and len(words) > 1:
        script = ROOT / words[1]
        if not script.is_file():
            return f"{words[1]}: no such script in the checkout"
        text = script.read_text(encoding="utf-8")
        try:
            compile(text, str(script), "exec")
        except SyntaxError as exc:
            return f"{words[1]}: {exc}"
        unknown = [w for w in words[2:] if w.startswith("--") and w.split("=")[0] not in text]
        return f"{words[1]} knows no {unknown}" if unknown else None
    if words[0] == "make":
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        targets = [w for w in words[1:] if "=" not in w]
        missing = [t for t in targets if not re.search(rf"^{re.escape(t)}:", makefile, re.M)]
        return f"no Makefile target {missing}" if missing else None
    if "/" in words[0] and not words[0].startswith("/"):
        script = ROOT / words[0]
        if not script.is_file():
            return f"{words[0]}: no such script in the checkout"
        syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        if syntax.returncode != 0:
            return f"bash -n {words[0]}: {syntax.stderr.strip()}"
        text = script.read_text(encoding="utf-8")
        unknown = [w for w in words[1:] if w.startswith("--") and w.split("=")[0] not in text]
        return f"{words[0]} knows no {unknown}" if unknown else None
    if shutil.which(words[0]) is None and words[0] not in ("systemd-creds", "journalctl"):
        return f"{words[0]}: not a program installed here"
    syntax = subprocess.run(["bash", "-n", "-c", example.command], capture_output=True, text=True)
    return f"bash -n: {syntax.stderr.strip()}" if syntax.returncode != 0 else None


# --- the sandbox -----------------------------------------------------------------------------


def _demo_command() -> list[str]:
    """The Makefile's ``demo`` command line, fast and without the page (nothing to look at)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "the Makefile has a demo target"
    line = recipe.group(1).replace("\\\n", " ").replace("$(BIN)", str(VENV_BIN)).strip()
    return [w for w in shlex.split(line) if w != "--web-display"] + ["--fast"]


@pytest.fixture(scope="module")
def sandbox_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Simulated tables to run the examples against, played once for the module."""
    base = tmp_path_factory.mktemp("docs-sandbox")
    for name in ("hw", "tests", "controller", "drivers"):
        (base / name).symlink_to(ROOT / name)
    (base / ".venv").mkdir()
    (base / ".venv" / "bin").symlink_to(VENV_BIN)
    plays = [
        subprocess.Popen(
            _demo_command(), cwd=base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ),
        subprocess.Popen(
            [
                str(VENV_BIN / PROGRAM),
                "simulate",
                "--fast",
                "--mode",
                "rng",
                "--rounds",
                "4",
                "--state-dir",
                "copy-of-state",
            ],
            cwd=base,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ),
    ]
    for play in plays:
        output, _ = play.communicate()
        assert play.returncode == 0, output
    # the auditor's escrow key of the RNG table (simulate sealed its seeds to a throwaway one)
    shutil.copy2(base / "copy-of-state/auditor-throwaway.key", base / "auditor.key")
    (base / "media/usb").mkdir(parents=True)
    (base / "docs").mkdir()
    table = base / "var/lib/paigow-controller"
    table.parent.mkdir(parents=True)
    table.symlink_to(base / "demo-state")
    config = base / "etc/paigow-controller/config.toml"
    config.parent.mkdir(parents=True)
    example = (ROOT / "hw/config.example.toml").read_text(encoding="utf-8")
    config.write_text(
        re.sub(r'^state_dir = ".*"', f'state_dir = "{table}"', example, count=1, flags=re.M),
        encoding="utf-8",
    )
    return base


@dataclass
class Sandbox:
    root: Path

    def run(self, example: Example) -> str | None:
        """Runs the example; None, or what went wrong."""
        if example.command.startswith("sudo "):
            return "runs as root, not here: ELSEWHERE must name the test that runs it"
        words = _words(example.command)
        program = _program_words(words)
        command = example.command
        for path in SANDBOXED:
            command = command.replace(path, f"{self.root}{path}")
        if program is not None:
            said = parse_only(program)
            if said is not None:
                return f"the parser refuses it: {said}"
            defaults = _table_defaults(program, self.root)
            if defaults:
                command = re.sub(
                    rf"(\S*{PROGRAM}\s+{re.escape(program[0])})",
                    lambda m: f"{m.group(1)} {shlex.join(defaults)}",
                    command,
                    count=1,
                )
        env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        done = subprocess.run(
            ["bash", "-c", "set -o pipefail\n" + command],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if done.returncode != example.exit_code:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            return f"exit {done.returncode}, not {example.exit_code}: " + " | ".join(tail)
        return None


def _table_defaults(arguments: list[str], root: Path) -> list[str]:
    """What a command finds on a table by default and here must be told: the config
    (``/etc/paigow-controller/config.toml``) or the state directory (``/var/lib/...``)."""
    from controller.app.config_file import DEFAULT_PATH
    from controller.cli import _BY_NAME, build_parser

    if not arguments or arguments[0] not in _BY_NAME or "--help" in arguments:
        return []
    with redirect_stderr(io.StringIO()):
        parsed = build_parser(arguments[0]).parse_args(arguments)
    given = {a.split("=")[0] for a in arguments}
    if given & {"--state-dir", "--db", "--export", "--log"}:
        return []
    if getattr(parsed, "config", None) == str(DEFAULT_PATH):
        return ["--config", f"{root}{DEFAULT_PATH}"]
    if hasattr(parsed, "state_dir") and parsed.state_dir is None:
        return ["--state-dir", f"{root}/var/lib/paigow-controller"]
    return []


@pytest.fixture
def sandbox(sandbox_template: Path, tmp_path: Path) -> Sandbox:
    root = tmp_path / "sandbox"
    shutil.copytree(sandbox_template, root, symlinks=True)
    table = root / "var/lib/paigow-controller"
    table.unlink()
    table.symlink_to(root / "demo-state")
    config = root / "etc/paigow-controller/config.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace(str(sandbox_template), str(root)),
        encoding="utf-8",
    )
    return Sandbox(root)


def failures(docs: list[Example], sandbox: Sandbox) -> Iterator[str]:
    """What is wrong with each example, in the document's order."""
    for example in docs:
        runs_in = elsewhere(example)
        wrong = check_elsewhere(example) if runs_in is not None else sandbox.run(example)
        pending = example.command in PENDING
        if pending and wrong is None:
            yield f"{example}\n    passes now: take it out of PENDING"
        elif wrong is not None and not pending:
            yield f"{example}\n    {wrong}"


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_example_runs_or_is_checked_where_it_runs(
    doc: Path, sandbox: Sandbox
) -> None:
    found = examples(doc)
    wrong = list(failures(found, sandbox))
    assert not wrong, "\n".join(wrong)


def test_each_example_checked_elsewhere_names_a_test_that_exists() -> None:
    every = [e for doc in DOCS for e in examples(doc)]
    used = {_runs_in(e) for e in every}
    for pattern, runs_in in ELSEWHERE:
        assert (pattern, runs_in) in used, f"no example needs {pattern!r}: take it out of ELSEWHERE"
        if runs_in == "CI":
            continue
        file, _, name = runs_in.partition("::")
        source = (ROOT / file).read_text(encoding="utf-8") if (ROOT / file).exists() else ""
        found = re.search(rf"^def {re.escape(name)}\(", source, re.M) is not None
        if runs_in in PENDING_TESTS:
            assert not found, f"{runs_in} is here now: take it out of PENDING_TESTS"
        else:
            assert found, f"{runs_in}: no such test"


def test_a_wrong_example_fails(sandbox: Sandbox, tmp_path: Path) -> None:
    """The checks can fail: a command the program refuses, one that fails when it runs, a
    script's unknown option, a script that does not exist, and a command that is neither
    runnable here nor named in ELSEWHERE."""
    doc = tmp_path / "wrong.md"
    text = "\n".join(
        [
            "```console",
            "$ paigow-controller verify-log --state-dir demo-state --no-such-option",
            "$ paigow-controller verify-log --state-dir no-such-state",
            "$ paigow-controller recall --state-dir demo-state --round 9999  # exit 3",
            "$ sudo hw/install-raspberry-pi.sh --no-such-flag",
            "$ sudo hw/no-such-installer.sh",
            "$ sudo -u paigow paigow-controller supervise void-rounds --round 4 --employee S1",
            "$ sudo reboot-the-table now",
            "$ paigow-controller verify-log --state-dir demo-state",
            "```",
        ]
    )
    doc.write_text(text, encoding="utf-8")
    found = examples(doc)
    assert len(found) == 8
    wrong = list(failures(found, sandbox))
    assert len(wrong) == 7, "\n".join(wrong)
    assert "the parser refuses it" in wrong[0]
    assert "exit 1, not 0" in wrong[1] or "exit 2, not 0" in wrong[1]
    assert ", not 3" in wrong[2]
    assert "knows no ['--no-such-flag']" in wrong[3]
    assert "runs as root" in wrong[4]
    assert "invalid choice: 'void-rounds'" in wrong[5]
    assert "runs as root" in wrong[6]


def test_every_subcommand_has_an_example() -> None:
    from controller.cli import COMMANDS

    every = [e for doc in DOCS for e in examples(doc)]
    shown = {words[0] for e in every if (words := _program_words(_words(e.command)))}
    missing = [c.name for c in COMMANDS if c.name not in shown]
    assert not missing, f"no command example of {missing} in README.md or docs/"


def test_the_readme_is_short_and_maps_every_guide() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) <= README_MAX_BYTES
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{guide.name})" in readme, f"the README's map has no {guide.name}"


def test_the_auditor_guide_gives_every_record_kind() -> None:
    guide = (ROOT / "docs/auditor.md").read_text(encoding="utf-8")
    missing = [k.value for k in RecordKind if f"| `{k.value}` |" not in guide]
    assert not missing, f"docs/auditor.md has no row for {missing}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Files the installer puts into the installed package, never in the checkout.
INSTALLED_ONLY = {"controller/MANIFEST.json", "controller/release.pub"}
_PATH = re.compile(
    r"`((?:controller|drivers|hw|tests|scripts|systemd|bench|requirements)/[^`\s]*)`"
)


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a document's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_and_path_the_documents_name_exists() -> None:
    wrong = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if target.startswith(("http://", "https://")):
                continue
            file, _, anchor = target.partition("#")
            linked = (doc.parent / file) if file else doc
            pending = linked.resolve().relative_to(ROOT).as_posix() in PENDING_FILES
            if pending and linked.exists():
                wrong.append(f"{linked.name} exists now: take it out of PENDING_FILES")
            if not linked.exists():
                if not pending:
                    wrong.append(f"{doc.name}: link to {target}: no such file")
                continue
            if anchor and anchor not in _anchors(linked.read_text(encoding="utf-8")):
                wrong.append(f"{doc.name}: link to {target}: no such heading")
        for named in _PATH.findall(text):
            path = named.rstrip(".,:;")
            if any(c in path for c in "<*{") or path in INSTALLED_ONLY:
                continue
            if path in PENDING_FILES and (ROOT / path).exists():
                wrong.append(f"{path} exists now: take it out of PENDING_FILES")
            elif path not in PENDING_FILES and not (ROOT / path).exists():
                wrong.append(f"{doc.name}: names {path}: no such file")
    assert not wrong, "\n".join(dict.fromkeys(wrong))
