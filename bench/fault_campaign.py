"""The fault campaign: the controller's own CLI under every fault a field unit meets, with
counts per kind of attack and whether every invariant held.

Not a benchmark: ``make bench`` runs only ``bench/bench_*.py``, and this script is not one of
them. It is run by hand before a release (some minutes with ``--quick``, longer without)::

    .venv/bin/python bench/fault_campaign.py --quick
    .venv/bin/python bench/fault_campaign.py --seed 1234

Kinds of attack, each against ``python -m controller`` (what ``paigow-controller`` runs):

(a) SIGKILL at a random moment of ``simulate --fast`` (shaker and RNG mode, the simulated
    wall clock sometimes moving hours per round), then a restart on the same state directory:
    verify-log passes, no round is decided twice (read back with ``export``), and every result
    the console showed is in the log with the same dice (or RNG number).
(b) A failed ``fdatasync`` (EIO) at its N-th call, for N over a range, in both modes (strace's
    fault injection, as tests/e2e/test_integrity.py does), and a full disk (ENOSPC on ``pwrite64``):
    the run may end with a fault, never with a traceback; afterwards verify-log passes, no
    round is decided twice, every result shown is in the log.
(c) One byte flipped in a copy of a small log's audit.db (seeded): each reader (verify-log,
    export, recall, dice-stats, meters) exits 0 or 1, never 70, never with a traceback; the
    script counts those that name the damaged record, and a flip that changed what export
    prints while verify-log still passed is a failure.
(d) Mutations of hw/config.example.toml (NaN, infinities, huge numbers, deep nesting, wrong
    types, equal ports, a relative state_dir, unknown keys, garbage bytes) through
    ``check-config``: exit 0 or 78, and on 78 one line naming the key.
(e) Bad command lines for every subcommand ``--help`` lists: exit 2 with one line.

Every child runs in its own session with a timeout (its group is killed when it passes), all
in a temporary directory removed at the end. The seed is printed; the same seed draws the same
attacks (the timing of a kill depends on the machine). Exit 1 if any invariant failed.

The console of ``simulate --fast`` prints progress every 50 rounds; the children here run the
same CLI with the console printing one line per round (``ConsoleDisplay`` with
``progress_every=0``), so that every result shown can be looked up in the log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CONFIG = ROOT / "hw" / "config.example.toml"
PYTHON = sys.executable
CLI = (PYTHON, "-m", "controller")
# The same CLI, its console printing a line per round (not progress every 50) so that what
# it showed can be checked against the log.
EVERY_ROUND = (
    "import sys\n"
    "from controller.display import console\n"
    "_init = console.ConsoleDisplay.__init__\n"
    "def _every_round(self, out, *, progress_every=0, total_rounds=0):\n"
    "    _init(self, out, progress_every=0, total_rounds=total_rounds)\n"
    "console.ConsoleDisplay.__init__ = _every_round\n"
    "from controller.cli import main\n"
    "raise SystemExit(main())\n"
)
SIMULATE = (PYTHON, "-c", EVERY_ROUND, "simulate")
STRACE = shutil.which("strace")
READERS = ("verify-log", "export", "recall", "dice-stats", "meters")
EX_SOFTWARE = 70
EX_CONFIG = 78
SHOWN = re.compile(r"^round\s+(\d+)\s+(?:dice R(\d) B(\d) B(\d)|RNG number\s+(\d+))", re.MULTILINE)
NAMES_RECORD = re.compile(r"\brecords?\b[^0-9\n]{0,12}\d+|\bseq\b[^0-9\n]{0,4}\d+", re.I)


@dataclass
class Proc:
    rc: int | None  # None: timed out (its process group was killed)
    out: str
    err: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.rc is None

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.out + self.err


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path,
    stdin: bytes = b"",
    kill_after: float | None = None,
) -> Proc:
    """Run ``argv`` in its own session; kill its group at ``timeout`` (then ``rc`` is None) or,
    with ``kill_after``, SIGKILL it then (``rc`` is the signal's negative number)."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            cwd=cwd,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"},
        )
        assert child.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            child.stdin.write(stdin)
        child.stdin.close()
        limit = timeout if kill_after is None else min(timeout, kill_after)
        rc: int | None
        try:
            rc = child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
            rc = -signal.SIGKILL if kill_after is not None and kill_after < timeout else None
        out.seek(0)
        err.seek(0)
        return Proc(
            rc,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            time.monotonic() - started,
        )


@dataclass
class Kind:
    """The counts of one kind of attack and the invariants it broke."""

    name: str
    runs: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)

    @property
    def held(self) -> bool:
        return not self.failures


# --- the log, read back -------------------------------------------------------------------


def export_rows(state: Path, cwd: Path) -> tuple[Proc, list[dict[str, Any]]]:
    proc = run([*CLI, "export", "--state-dir", str(state)], timeout=120, cwd=cwd)
    rows = []
    if proc.rc == 0:
        rows = [json.loads(line) for line in proc.out.splitlines() if line.strip()]
    return proc, rows


def check_log(kind: Kind, label: str, state: Path, shown: Sequence[str], cwd: Path) -> None:
    """verify-log passes, no round is decided twice, every result shown is in the log."""
    verify = run([*CLI, "verify-log", "--state-dir", str(state)], timeout=180, cwd=cwd)
    if verify.rc != 0:
        kind.fail(f"{label}: verify-log exit {verify.rc}: {_last_line(verify)}")
    if verify.traceback:
        kind.fail(f"{label}: verify-log traceback")
    proc, rows = export_rows(state, cwd)
    if proc.rc != 0:
        kind.fail(f"{label}: export exit {proc.rc}: {_last_line(proc)}")
        return
    results = [r["data"] for r in rows if r["kind"] == "result"]
    decided = Counter((d.get("round"), d.get("attempt")) for d in results)
    twice = [key for key, n in decided.items() if n > 1]
    if twice:
        kind.fail(f"{label}: decided twice (round, attempt) {twice}")
    voided = Counter(r["data"].get("round") for r in rows if r["kind"] == "result_voided")
    per_round = Counter(d.get("round") for d in results)
    over = [rnd for rnd, n in per_round.items() if n - voided.get(rnd, 0) > 1]
    if over:
        kind.fail(f"{label}: more than one standing result in rounds {over}")
    kind.counts["results in the logs"] += len(results)
    logged = {_result_key(d) for d in results}
    for text in shown:
        for match in SHOWN.finditer(text):
            kind.counts["results shown"] += 1
            rnd = int(match[1])
            key = (
                (rnd, int(match[2]), (int(match[3]), int(match[4])))
                if match[2] is not None
                else (rnd, int(match[5]))
            )
            if key not in logged:
                kind.fail(f"{label}: shown but not in the log: {match[0]!r}")


def has_records(state: Path) -> bool:
    """Whether ``state`` holds a log with its table of records (a failed creation may leave
    an audit.db without one)."""
    if not (state / "audit.db").exists():
        return False
    with tempfile.TemporaryDirectory() as scratch:  # a copy: the state stays as it was
        for name in ("audit.db", "audit.db-wal"):
            if (state / name).exists():
                shutil.copy2(state / name, Path(scratch) / name)
        try:
            with contextlib.closing(sqlite3.connect(Path(scratch) / "audit.db")) as con:
                found = con.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records'"
                ).fetchone()
        except sqlite3.Error:
            return False
    return found is not None


def _result_key(data: dict[str, Any]) -> tuple[Any, ...]:
    dice = data.get("dice")
    if isinstance(dice, dict) and "red" in dice and data.get("game") is not None:
        blue = dice.get("blue") or [None, None]
        return (data.get("round"), dice["red"], (blue[0], blue[1]))
    return (data.get("round"), data.get("count"))


def _last_line(proc: Proc) -> str:
    lines = (proc.err or proc.out).strip().splitlines()
    return lines[-1][:200] if lines else "(nothing said)"


def child_ok(kind: Kind, label: str, proc: Proc, *, allowed: Sequence[int | None]) -> None:
    kind.counts[f"exit {proc.rc if proc.rc is not None else 'timeout'}"] += 1
    if proc.traceback:
        kind.fail(f"{label}: traceback: {_last_line(proc)}")
    if proc.rc not in allowed:
        kind.fail(f"{label}: exit {proc.rc}: {_last_line(proc)}")


# --- (a) SIGKILL, then a restart ------------------------------------------------------------


def kills(rng: random.Random, work: Path, count: int, rounds: int) -> Kind:
    kind = Kind("(a) SIGKILL + restart")
    # how long a whole run takes on this machine now, per mode: a kill lands within it
    expected_s: dict[str, float] = {}
    for mode in ("shaker", "rng"):
        where = ("--state-dir", str(work / f"timed-{mode}"))
        timed = run(
            [*SIMULATE, "--fast", "--mode", mode, "--rounds", str(rounds), *where],
            timeout=300,
            cwd=work,
        )
        child_ok(kind, f"a whole run ({mode})", timed, allowed=(0,))
        expected_s[mode] = timed.seconds
        kind.counts[f"a whole {mode} run, seconds"] = round(timed.seconds)
        shutil.rmtree(work / f"timed-{mode}", ignore_errors=True)
    for i in range(count):
        mode = ("shaker", "rng")[i % 2]
        state = work / f"kill-{i}"
        argv = [
            *SIMULATE,
            "--fast",
            *("--mode", mode),
            *("--rounds", str(rounds)),
            *("--seed", str(rng.randrange(1, 10**6))),
            *("--state-dir", str(state)),
        ]
        if rng.random() < 0.3:
            argv += ["--table-minutes-per-round", str(rng.choice((7, 90, 600)))]
            kind.counts["wall clock moved"] += 1
        at = rng.uniform(0.1, 1.0) * expected_s[mode]
        first = run(argv, timeout=300, cwd=work, kill_after=at)
        kind.runs += 1
        kind.counts[f"{mode} runs"] += 1
        label = f"kill {i} ({mode}, at {at:.1f} s)"
        if first.rc == -signal.SIGKILL:
            kind.counts["killed"] += 1
        elif first.rc == 0:
            expected_s[mode] *= 0.9  # the run ended first (the machine is faster now)
            kind.counts["ended before the kill"] += 1
        else:
            child_ok(kind, label, first, allowed=(0,))
        if first.traceback:
            kind.fail(f"{label}: traceback: {_last_line(first)}")
        if not (state / "audit.db").exists():
            kind.counts["killed before the log existed"] += 1
        # the restart on the same state directory, on a good machine
        again = run(
            [*SIMULATE, "--fast", *("--mode", mode), "--rounds", "2", "--state-dir", str(state)],
            timeout=300,
            cwd=work,
        )
        child_ok(kind, f"{label}, restart", again, allowed=(0,))
        check_log(kind, label, state, (first.out, again.out), work)
        shutil.rmtree(state, ignore_errors=True)
    return kind


# --- (b) storage faults under strace ---------------------------------------------------------


def storage_faults(
    work: Path, name: str, inject: str, whens: Sequence[int], modes: Sequence[str]
) -> Kind:
    kind = Kind(name)
    if STRACE is None:
        kind.fail("strace is not installed (scripts/install-system-deps)")
        return kind
    for mode in modes:
        for when in whens:
            state = work / f"{mode}-{when}"
            # As tests/e2e/test_integrity.py does: the control thread is the main thread and makes
            # every commit, so strace follows it alone (no -f): the other threads (a shake's
            # pattern, the simulated motor's limit) run untraced at their own pace. It is the
            # N-th of the control thread's calls that fails.
            syscall = inject.partition(":")[0]
            proc = run(
                [
                    STRACE,
                    *("-qq", "-o", "/dev/null", "-e", f"trace={syscall}"),
                    *("-e", f"inject={inject}:when={when}"),
                    *SIMULATE,
                    *("--fast", "--plain-rounds", "--faults", "none", "--rounds", "2"),
                    *("--mode", mode, "--state-dir", str(state)),
                ],
                timeout=120,  # as the test's: a run that takes longer has hung
                cwd=work,
            )
            kind.runs += 1
            label = f"{name} {mode} when={when}"
            # a failed commit may end the run with a fault (exit 1): never a traceback
            child_ok(kind, label, proc, allowed=(0, 1))
            if "not recorded:" in proc.err:
                kind.counts["a commit failed"] += 1
            if proc.out.count("FAULT ") > 20:
                kind.counts["a fault recurring (more than 20 shown)"] += 1
            if has_records(state):
                check_log(kind, label, state, (proc.out,), work)
            else:  # the log's creation itself failed: the next start must make it
                kind.counts["the log's creation failed"] += 1
            # the next start, the disk good again, takes the log as the fault left it
            again = run(
                [*SIMULATE, "--fast", "--rounds", "2", "--mode", mode, "--state-dir", str(state)],
                timeout=300,
                cwd=work,
            )
            child_ok(kind, f"{label}, restart", again, allowed=(0,))
            check_log(kind, f"{label}, restart", state, (proc.out, again.out), work)
            shutil.rmtree(state, ignore_errors=True)
    return kind


# --- (c) byte flips -----------------------------------------------------------------------


def byte_flips(rng: random.Random, work: Path, count: int) -> Kind:
    kind = Kind("(c) byte flips")
    pristine = work / "flip-pristine"
    made = run(
        [*CLI, "simulate", "--fast", "--rounds", "4", "--seed", "3", "--state-dir", str(pristine)],
        timeout=300,
        cwd=work,
    )
    if made.rc != 0:
        kind.fail(f"the small log was not made: exit {made.rc}: {_last_line(made)}")
        return kind
    original_export = export_rows(pristine, work)[1]
    db = (pristine / "audit.db").read_bytes()
    for i in range(count):
        copy = work / f"flip-{i}"
        shutil.copytree(pristine, copy)
        offset = rng.randrange(len(db))
        bit = 1 << rng.randrange(8)
        damaged = bytearray(db)
        damaged[offset] ^= bit
        (copy / "audit.db").write_bytes(bytes(damaged))
        kind.runs += 1
        said: dict[str, Proc] = {}
        for reader in READERS:
            proc = run([*CLI, reader, "--state-dir", str(copy)], timeout=120, cwd=work)
            said[reader] = proc
            label = f"flip {i} (offset {offset}, bit {bit:#04x}) {reader}"
            kind.counts[f"{reader} exit {proc.rc if proc.rc is not None else 'timeout'}"] += 1
            if proc.traceback:
                kind.fail(f"{label}: traceback: {_last_line(proc)}")
            if proc.rc not in (0, 1):
                kind.fail(f"{label}: exit {proc.rc}: {_last_line(proc)}")
            if proc.rc == 1 and NAMES_RECORD.search(proc.err + proc.out[-2000:]):
                kind.counts[f"{reader} named the record"] += 1
        exported = said["export"]
        if exported.rc == 0 and said["verify-log"].rc == 0:
            rows = [json.loads(line) for line in exported.out.splitlines() if line.strip()]
            if rows != original_export:
                kind.fail(f"flip {i} (offset {offset}): export changed, verify-log passed")
            else:
                kind.counts["flip changed nothing read"] += 1
        shutil.rmtree(copy, ignore_errors=True)
    return kind


# --- (d) config fuzz ----------------------------------------------------------------------


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is JSON's for these
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Raw):
        return value.text
    raise TypeError(type(value))


@dataclass(frozen=True)
class Raw:
    """TOML text written as it is (a nesting no dict holds)."""

    text: str


def _toml(config: dict[str, Any]) -> str:
    lines = []
    for section, table in config.items():
        if not isinstance(table, dict):
            lines.append(f"{section} = {_toml_value(table)}")
            continue
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"


def _mutations(rng: random.Random, base: dict[str, Any]) -> Iterator[tuple[str, str | None, bytes]]:
    """(what, the key that must be named or None, the file's bytes)."""
    keys = [(s, k) for s, t in base.items() if isinstance(t, dict) for k in t]
    odd_values: list[tuple[str, object]] = [
        ("nan", float("nan")),
        ("inf", float("inf")),
        ("-inf", float("-inf")),
        ("huge", 10**30),
        ("4000 digits", int("9" * 4000)),
        ("past 2**63", 2**63),
        ("negative", -(10**9)),
        ("string", "x" * rng.randrange(1, 300)),
        ("float", 0.5),
        ("bool", True),
        ("list", [1, "a"]),
        ("table", {"a": 1}),
        ("empty string", ""),
        ("nul in string", "a\u0000b"),
    ]
    while True:
        choice = rng.randrange(10)
        config = json.loads(json.dumps(base))
        if choice <= 4:  # a key set to an odd value
            section, key = rng.choice(keys)
            what, value = rng.choice(odd_values)
            if value == config[section][key] and type(value) is type(config[section][key]):
                continue
            config[section][key] = value
            yield f"{section}.{key} = {what}", f"{section}.{key}", _toml(config).encode()
        elif choice == 5:  # the page and the feed on one port
            port = rng.randrange(1024, 65536)
            config["display"]["http_port"] = config["display"]["feed_port"] = port
            yield "equal ports", "display.feed_port", _toml(config).encode()
        elif choice == 6:
            config["storage"]["state_dir"] = rng.choice(("var/lib/x", ".", "..", "state"))
            yield "relative state_dir", "storage.state_dir", _toml(config).encode()
        elif choice == 7:  # an unknown key, in a section or a section of its own
            section = rng.choice([*(s for s, _ in keys), "bogus_section"])
            config.setdefault(section, {})["bogus_key_" + str(rng.randrange(100))] = 1
            yield f"unknown key in [{section}]", section, _toml(config).encode()
        elif choice == 8 and rng.random() < 0.3:  # refused for the file as a whole
            section, key = rng.choice(keys)
            config[section][key] = Raw("[" * 3000 + "]" * 3000)
            yield f"{section}.{key} = deep nesting", None, _toml(config).encode()
        elif choice == 8:  # garbage bytes somewhere in the file
            text = bytearray(_toml(config).encode())
            for _ in range(rng.randrange(1, 8)):
                text[rng.randrange(len(text))] = rng.randrange(256)
            yield "garbage bytes", None, bytes(text)
        else:  # a file of nothing but garbage, or cut short
            text = _toml(config).encode()
            if rng.random() < 0.5:
                yield "cut short", None, text[: rng.randrange(len(text))]
            else:
                yield "random bytes", None, rng.randbytes(rng.randrange(1, 4096))


# a refusal by key: "config: <section>.<key>...: why" (controller.errors.ConfigError)
_CONFIG_KEY = re.compile(r"config: [A-Za-z0-9_]+(\.[^:\s]+)*: ")


def _is_toml(data: bytes) -> bool:
    try:
        tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return False
    return True


def config_fuzz(rng: random.Random, work: Path, count: int) -> Kind:
    kind = Kind("(d) config fuzz")
    base = tomllib.loads(EXAMPLE_CONFIG.read_text(encoding="utf-8"))
    path = work / "fuzz.toml"
    path.write_text(_toml(base), encoding="utf-8")
    baseline = run([*CLI, "check-config", "--config", str(path)], timeout=60, cwd=work)
    if baseline.rc != 0:
        kind.fail(f"the example, rewritten, is refused: {_last_line(baseline)}")
    mutations = _mutations(rng, base)
    for i in range(count):
        what, key, data = next(mutations)
        path.write_bytes(data)
        proc = run([*CLI, "check-config", "--config", str(path)], timeout=60, cwd=work)
        kind.runs += 1
        label = f"config {i} ({what})"
        child_ok(kind, label, proc, allowed=(0, EX_CONFIG))
        if proc.rc == EX_CONFIG:
            lines = [line for line in proc.err.splitlines() if line.strip()]
            if len(lines) != 1:
                kind.fail(f"{label}: {len(lines)} lines on stderr: {proc.err[:300]!r}")
            elif key is not None and key.rpartition(".")[2] not in lines[0]:
                kind.fail(f"{label}: does not name {key}: {lines[0][:200]!r}")
            elif key is None and _is_toml(data) and not _CONFIG_KEY.search(lines[0]):
                # garbage that still parses (a key renamed, say): refused by the key it names
                kind.fail(f"{label}: does not name a key: {lines[0][:200]!r}")
            elif key is None and not _is_toml(data) and path.name not in lines[0]:
                kind.fail(f"{label}: does not name the file: {lines[0][:200]!r}")
            else:
                kind.counts["refused naming the key or the file"] += 1
    return kind


# --- (e) bad command lines ----------------------------------------------------------------


def _subcommands(work: Path) -> list[str]:
    proc = run([*CLI, "--help"], timeout=60, cwd=work)
    return re.findall(r"^    ([a-z][a-z-]+)", proc.out, re.MULTILINE)


def _options(command: str, work: Path) -> list[str]:
    proc = run([*CLI, command, "--help"], timeout=60, cwd=work)
    found = re.findall(r"^\s+(--[a-z][a-z0-9-]*)", proc.out, re.MULTILINE)
    return [o for o in dict.fromkeys(found) if o not in ("--help", "--version")]


def bad_command_lines(rng: random.Random, work: Path, count: int) -> Kind:
    kind = Kind("(e) bad command lines")
    commands = _subcommands(work)
    if len(commands) < 10:
        kind.fail(f"--help lists {len(commands)} subcommands")
        return kind
    options = {command: _options(command, work) for command in commands}
    bad_values = ["abc", "٣", "９", "", "0x1g", "1e999999", "-", "\x7f", "9" * 5000, "nan"]
    for i in range(count):
        command = commands[i % len(commands)]
        argv: list[str] = [command]
        for _ in range(rng.randrange(0, 3)):
            if options[command]:
                argv += [rng.choice(options[command]), rng.choice(bad_values)]
        # always an option no command takes, so that nothing runs whatever the rest says (a
        # bare word could be a command's positional argument: backup's destination)
        argv.append(
            "--"
            + rng.choice(
                (
                    "no-such-option",
                    rng.randbytes(6).hex(),
                    "".join(chr(rng.randrange(0x21, 0x2FFF)) for _ in range(rng.randrange(1, 40))),
                    "\u202e" + "x" * 20,
                )
            )
        )
        if rng.random() < 0.3:
            rng.shuffle(argv)  # the command itself moved: still a bad command line
        proc = run([*CLI, *argv], timeout=60, cwd=work)
        kind.runs += 1
        label = f"argv {i} {argv!r:.120}"
        child_ok(kind, label, proc, allowed=(2,))
        lines = [line for line in proc.err.splitlines() if line.strip()]
        if proc.rc == 2 and len(lines) != 1:
            kind.fail(f"{label}: {len(lines)} lines on stderr: {proc.err[:300]!r}")
    kind.counts["subcommands"] = len(commands)
    return kind


# --- the campaign -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    kills: int
    kill_rounds: int
    eio_whens: range
    enospc_whens: range
    flips: int
    configs: int
    argvs: int


QUICK = Sizes(8, 6, range(8, 31, 2), range(5, 230, 45), 12, 40, 60)
FULL = Sizes(250, 8, range(1, 81), range(1, 240, 3), 150, 230, 1268)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: some minutes")
    parser.add_argument("--seed", type=int, default=None, help="the campaign's seed")
    parser.add_argument(
        "--only", default="abcde", help="the kinds to run, e.g. 'cd' (default: abcde)"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    sizes = QUICK if args.quick else FULL
    print(f"fault campaign, seed {seed} ({'quick' if args.quick else 'full'})", flush=True)
    kinds: list[Kind] = []
    work = Path(tempfile.mkdtemp(prefix="paigow-campaign-"))
    started = time.monotonic()
    steps: list[tuple[str, Callable[[random.Random], Kind]]] = [
        ("a", lambda r: kills(r, work, sizes.kills, sizes.kill_rounds)),
        (
            "b",
            lambda r: storage_faults(
                work, "(b) EIO on fdatasync", "fdatasync:error=EIO", sizes.eio_whens, MODES
            ),
        ),
        (
            "b",
            lambda r: storage_faults(
                work, "(b) full disk: ENOSPC", "pwrite64:error=ENOSPC", sizes.enospc_whens, MODES
            ),
        ),
        ("c", lambda r: byte_flips(r, work, sizes.flips)),
        ("d", lambda r: config_fuzz(r, work, sizes.configs)),
        ("e", lambda r: bad_command_lines(r, work, sizes.argvs)),
    ]
    try:
        for letter, step in steps:
            if letter not in args.only:
                continue
            # each kind draws from its own generator: one kind's count does not move another's
            kind = step(random.Random(f"{seed}-{letter}-{len(kinds)}"))
            kinds.append(kind)
            print(
                f"  {kind.name}: {kind.runs} runs, {'held' if kind.held else 'FAILED'}"
                f" ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    except KeyboardInterrupt:
        print("interrupted: the summary of the kinds done so far", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _summary(kinds, seed)
    return 0 if all(kind.held for kind in kinds) else 1


MODES = ("shaker", "rng")


def _summary(kinds: Sequence[Kind], seed: int) -> None:
    print(f"\nsummary (seed {seed})")
    print(f"{'kind':<28} {'runs':>6}  invariants")
    for kind in kinds:
        print(f"{kind.name:<28} {kind.runs:>6}  {'held' if kind.held else 'FAILED'}")
        for what, n in sorted(kind.counts.items()):
            print(f"    {what}: {n}")
        for failure in kind.failures[:20]:
            print(f"    FAILED: {failure}")
        if len(kind.failures) > 20:
            print(f"    ... and {len(kind.failures) - 20} more failures")


if __name__ == "__main__":
    sys.exit(main())
