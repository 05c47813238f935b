"""The command line: stable JSON, exit 2 on a bad argument, exit 78 on a bad config."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import run

from controller.cli import COMMANDS, build_parser

EXAMPLE = Path(__file__).resolve().parents[2] / "hw" / "config.example.toml"


def test_position(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "position", "--game", "tiles", "--total", "15")
    assert code == 0
    assert json.loads(out) == {"game": "tiles", "total": 15, "bank": "dealer", "label": "seat 6"}
    code, out, _ = run(capsys, "position", "--game", "tiles", "--total", "9")
    assert json.loads(out)["label"] == "dealer"
    code, out, _ = run(capsys, "position", "--game", "poker", "--total", "5", "--bank-seat", "3")
    assert json.loads(out) == {"game": "poker", "total": 5, "bank": "seat 3", "label": "dealer"}
    code, out, _ = run(capsys, "position", "--game", "tiles", "--total", "16")
    assert json.loads(out)["label"] == "dead hand"


def test_wagers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "wagers", "--dice", "6,2,1")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["dice", "total", "sum", "match", "beat_it", "payouts"]
    assert doc["dice"] == {"red": 6, "blue": [2, 1]}
    assert doc["total"] == 9
    assert doc["sum"] == {"8-16-17": False, "3-8-9": True, "pair": False, "series": False}
    assert doc["match"] == {"1": 1, "2": 1, "3": 0, "4": 0, "5": 0, "6": 1}
    assert doc["beat_it"] == {"red": True, "any": True}
    assert doc["payouts"]["B"]["pays"] == "2 to 1"
    assert doc["payouts"]["A"]["wins"] is False


def test_wagers_with_a_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[paytables.M]\nwager = "match"\npays = { two = "2 to 1", three = "12 to 1" }\n'
    )
    code, out, _ = run(capsys, "wagers", "--dice", "4,4,2", "--config", str(config))
    assert code == 0
    assert json.loads(out)["payouts"]["M"]["by_value"]["4"]["pays"] == "2 to 1"


def test_paytables_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "paytables", "--config", str(EXAMPLE))
    assert code == 0
    doc = json.loads(out)
    assert doc["outcomes"] == 216
    a, b = doc["paytables"]
    assert (a["name"], a["hits"], a["house_edge"]) == ("A", 30, "1/18")
    assert (b["name"], b["hits"], b["house_edge"]) == ("B", 47, "5/108")


@pytest.mark.parametrize(
    "argv",
    [
        ["wagers", "--dice", "0,1,2"],
        ["wagers", "--dice", "7,1,2"],
        ["wagers", "--dice", "1,2"],
        ["wagers", "--dice", "1,2,3,4"],
        ["wagers", "--dice", "a,b,c"],
        ["position", "--game", "tiles", "--total", "2"],
        ["position", "--game", "tiles", "--total", "19"],
        ["position", "--game", "tiles", "--total", "9", "--bank-seat", "7"],
        ["position", "--game", "craps", "--total", "9"],
        ["position", "--game", "tiles"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("paigow-controller: ")
    assert "Traceback" not in err


def test_a_bad_config_exits_78_naming_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[round]\nmin_shake_cycles = 2\n")
    code, out, err = run(capsys, "paytables", "--config", str(config))
    assert code == 78
    assert out == ""
    assert "round.min_shake_cycles" in err


def test_the_installed_entry_point_behaves_the_same() -> None:
    """Through a real process: exit code 2, one line, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "position", "--game", "tiles", "--total", "19"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    ok = subprocess.run(
        [sys.executable, "-m", "controller", "position", "--game", "tiles", "--total", "9"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(ok.stdout)["label"] == "dealer"


def test_check_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "check-config", "--config", str(EXAMPLE))
    assert code == 0
    assert json.loads(out)["paytables"] == ["A", "B"]
    bad = tmp_path / "c.toml"
    bad.write_text('[sensor]\nurl = "/dev/x"\nspeed = 9600\n')
    code, out, err = run(capsys, "check-config", "--config", str(bad))
    assert (code, out) == (78, "")
    assert "sensor.speed" in err


# --- bounds: every option of every command, fed garbage -----------------------------------------

ARABIC_INDIC_THREE = "\u0663"  # isdecimal() is True: int() takes it
SUPERSCRIPT_TWO = "\u00b2"  # isdigit() is True: int() refuses it
GARBAGE = [
    "",
    "x",
    "-1",
    "+1",
    " 1",
    "1_0",
    "0x10",
    "1e3",
    "1.5",
    "99999999999999999999999",
    "9" * 5000,  # past int()'s 4300-digit limit
    SUPERSCRIPT_TWO,
    ARABIC_INDIC_THREE,
    "\u0967\u0968",  # Devanagari 12
    "\uff17",  # fullwidth 7
    "a\nb",
    "\udcff",  # a non-UTF-8 byte of argv, as Python decodes it
    "x" * 300,  # one name longer than NAME_MAX
    "9" * 100_000,
    "x" * 100_000,
]
# Arguments that fail after the option under test has been checked ({missing}: a config file
# that does not exist, exit 78), so that nothing starts even if the garbage were accepted.
FAIL_LATER: dict[str, list[str]] = {
    "position": ["--game", "tiles", "--total", "9"],
    "deal-plan": ["--style", "standard", "--total", "9"],
    "wagers": ["--dice", "1,2,3"],
    "simulate": ["--config", "{missing}"],
    "selftest": ["--config", "{missing}"],
    "rng-replay": ["--log", "{empty}"],
    "verify-log": ["--state-dir", "{dir}"],
    "recall": ["--state-dir", "{dir}"],
    "export": ["--state-dir", "{dir}"],
    "backup": ["--state-dir", "{dir}", "{missing}"],
    "export-key": ["--state-dir", "{dir}"],
    "checkpoint": ["--state-dir", "{dir}"],
    "init": ["--config", "{missing}"],
    "verify-software": ["--config", "{missing}"],
    "manifest": ["--release-key", "{missing}", "--out", "{missing}"],
    "release-key": ["--out", "{empty}", "--name", "not a name"],  # {empty} is never replaced
    "witness": ["--state-dir", "{dir}", "--keys", "{missing}", "--db", "{missing}"],
    "witness-key": ["--state-dir", "{empty}", "--name", "not a name"],
    "rng-reveal": ["--escrow-key", "{missing}", "--state-dir", "{dir}"],
    "fleet-ca": ["issue", "--dir", "{missing}", "--table", "t", "--out", "{missing}"],
}
# Options that name a new file, never replacing one: every garbage value that can be a file's
# name is made to exist first, so that the command refuses it.
NEW_FILE_OPTIONS = {("rng-escrow-key", "--out")}


def options_of_every_command() -> list[tuple[str, str]]:
    """(command, option) for every option that takes a value, as the parser declares them."""
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if action.option_strings and action.nargs != 0:
                found.append((name, action.option_strings[0]))
    return found


def test_the_fuzz_covers_every_command() -> None:
    assert {name for name, _ in options_of_every_command()} == {c.name for c in COMMANDS}


pytestmark = pytest.mark.usefixtures("logging_restored")


@pytest.mark.parametrize(("command", "option"), options_of_every_command())
def test_every_option_refuses_garbage_in_one_line(
    command: str,
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # relative garbage names nothing that exists
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "state").mkdir()
    places = {
        "{missing}": str(tmp_path / "missing.toml"),
        "{empty}": str(tmp_path / "empty.jsonl"),
        "{dir}": str(tmp_path / "state"),
    }
    base = [places.get(arg, arg) for arg in FAIL_LATER.get(command, [])]
    if option in base:
        del base[base.index(option) : base.index(option) + 2]
    if (command, option) in NEW_FILE_OPTIONS:
        for value in GARBAGE:
            with contextlib.suppress(OSError, ValueError, UnicodeEncodeError):
                (tmp_path / value).touch()
    problems = []
    for value in GARBAGE:
        code, out, err = run(capsys, command, *base, option, value)
        one_line = err.count("\n") == 1 and err.endswith("\n") and len(err) < 1000
        if not (
            code in (1, 2, 78)
            and out == ""
            and one_line
            and err.startswith("paigow-controller: ")
            and "Traceback" not in err
        ):
            problems.append(
                f"{value[:30]!r}: exit {code}, stdout {out[:80]!r}, stderr {err[:300]!r}"
            )
    assert problems == [], f"{command} {option}"


@pytest.mark.parametrize(
    "argv",
    [
        ["position", "--game", "tiles", "--total", ARABIC_INDIC_THREE * 2],
        ["position", "--game", "tiles", "--total", "1_5"],
        ["position", "--game", "tiles", "--total", "9", "--bank-seat", ARABIC_INDIC_THREE],
        ["wagers", "--dice", f"{ARABIC_INDIC_THREE},1,2"],
        ["rng-stream", "--bytes", ARABIC_INDIC_THREE],
        ["rng-stream", "--bytes", "99999999999999999999999"],
        ["recall", "--last", ARABIC_INDIC_THREE],
        ["recall", "--round", ARABIC_INDIC_THREE],
        ["simulate", "--rounds", ARABIC_INDIC_THREE, "--config", "/nonexistent/c.toml"],
        ["simulate", "--seed", "\uff17", "--config", "/nonexistent/c.toml"],
        ["simulate", "--faults", "tilted=\u0660.\u0665", "--config", "/nonexistent/c.toml"],
        ["simulate", "--faults", "tilted=nan", "--config", "/nonexistent/c.toml"],
    ],
)
def test_numbers_in_other_scripts_are_bad_arguments(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "whole number" in err or "needs a probability" in err


def test_a_message_that_quotes_an_argument_stays_on_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "check-config", "--config", f"{tmp_path}/a\nb")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    code, out, err = run(capsys, "position", "--game", "tiles", "--total", "9", "a\nb")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1  # "unrecognized arguments" quotes argv as it is


def cli(*argv: str | bytes) -> list[str | bytes]:
    return [sys.executable, "-m", "controller", *argv]


def capped_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a child whose address space is capped at 1 GiB, with a timeout: a
    command that reads without bound fails there instead of taking the machine."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from controller.cli import main\n"
        f"raise SystemExit(main({list(argv)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["position", "--game", "tiles", "--total", ARABIC_INDIC_THREE],
        ["check-config", "--config", "a\nb"],
        ["simulate", "--rounds", "1" + "0" * 30, "--config", "/nonexistent/c.toml"],
        ["rng-stream", "--bytes", SUPERSCRIPT_TWO],
        ["export", "--state-dir", "x" * 100_000],
        ["recall", "--since", "2026-11-30 14:00" + "0" * 100_000],
        ["recall", "--until", "2026-11-30 14:00:\u0663\u0663"],
    ],
)
def test_bad_arguments_through_a_real_process(argv: list[str]) -> None:
    proc = subprocess.run(cli(*argv), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_a_byte_that_is_not_utf8_in_argv_is_a_bad_argument() -> None:
    proc = subprocess.run(
        cli("position", "--game", "tiles", "--total", b"\xff"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count(b"\n") == 1


@pytest.mark.parametrize("command", ["check-config", "run", "selftest", "simulate", "paytables"])
def test_a_config_that_never_ends_is_refused_in_bounded_memory(command: str) -> None:
    proc = capped_cli(command, "--config", "/dev/zero")
    assert proc.returncode == 78, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1
    assert "config: file: /dev/zero is larger than" in proc.stderr


# --- bounds: a failed start-up is one line and an exit code ------------------------------------


def test_simulate_with_a_state_directory_that_cannot_be_made_fails_in_one_line(
    tmp_path: Path,
) -> None:
    """Start-up fails (the audit log cannot be created) before the crew has started."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    proc = subprocess.run(
        cli(
            "simulate", "--rounds", "1", "--fast", "--faults", "none", "--state-dir", f"{a_file}/x"
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "cannot join thread" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert str(a_file) in proc.stderr


def test_simulate_refuses_a_state_directory_that_is_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    proc = subprocess.run(
        cli("simulate", "--rounds", "1", "--fast", "--state-dir", str(a_file)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "is not a directory" in proc.stderr


def test_run_with_its_port_taken_fails_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "config.toml"
        config.write_text(
            f'[storage]\nstate_dir = "{tmp_path / "state"}"\n[display]\nhttp_port = {port}\n'
        )
        proc = subprocess.run(
            cli("run", "--config", str(config)),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("<3>")]
    assert len(errors) == 1, proc.stderr
    assert f"127.0.0.1:{port}" in errors[0]


def test_selftest_names_every_failure_in_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    config = tmp_path / "config.toml"
    config.write_text(f'[sensor]\nurl = "{tmp_path}/no-such-port"\ntimeout_ms = 100\nretries = 0\n')
    proc = subprocess.run(
        cli("selftest", "--config", str(config), "--state-dir", f"{a_file}/state"),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPIOZERO_PIN_FACTORY": "mock"},
        check=False,
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert not report["checks"]["keys"]["ok"]
    assert not report["checks"]["sensor"]["ok"]
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "keys failed" in proc.stderr
    assert "sensor failed" in proc.stderr
