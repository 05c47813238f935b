"""Practice on the bench: ``simulate --supervisor-key`` (a person's ``supervise`` at a
simulated table's terminal, taken with the key on and refused with it off).

Each simulated table runs in a process of its own (``python -m controller simulate``), in a
state directory whose socket path fits sockaddr_un; the test waits for its first progress
line (the table opened and played fifty rounds: its terminal is up), acts at the terminal as
the supervisor would, then stops it with SIGTERM and reads the log back.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import simulate_argv

from controller.audit.recall import export_lines
from controller.cli import main

pytestmark = [pytest.mark.usefixtures("logging_restored"), pytest.mark.slow]

ATTEMPTS = 200  # a table between shakes takes the action; one mid-shake refuses it by state
STOP_S = 60.0  # the most a stop waits (never reached)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose socket path fits sockaddr_un (107 bytes), whatever tmp_path's length."""
    path = Path(tempfile.mkdtemp(prefix="pgbp-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


class SimulatedTable:
    """``simulate`` in a process of its own, until stopped."""

    def __init__(self, state: Path, *extra: str) -> None:
        argv = simulate_argv(state, 1_000_000, "--plain-rounds", *extra)
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.lines: list[str] = []

    def wait_until_playing(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith("progress:"):
                return
        raise AssertionError(f"the simulation ended before it played: {self.lines}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=STOP_S)
        self.lines += out.splitlines(keepends=True)
        return self.process.wait()


def supervise(state: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """A supervisor's action at the simulated table's terminal, tried again while the table
    refuses it only for the state it is in (mid-shake); the exit code and stderr."""
    for _ in range(ATTEMPTS):
        code = main(["supervise", *argv, "--state-dir", str(state)])
        err = capsys.readouterr().err
        if code != 1 or "not allowed in state" not in err:
            return code, err
    raise AssertionError(f"refused by state {ATTEMPTS} times: {err}")


def employees(state: Path, kind: str) -> list[object]:
    return [line["data"].get("employee") for line in export_lines(state) if line["kind"] == kind]


def test_with_the_key_held_on_a_persons_action_is_taken_and_names_the_employee(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = short_dir / "s"
    table = SimulatedTable(state, "--supervisor-key", "on")
    try:
        table.wait_until_playing()
        assert "supervisor key: held on for the run" in "".join(table.lines)
        code, err = supervise(
            state, capsys, "dice-replaced", "--id", "B-0417", "--employee", "S7777"
        )
    finally:
        stopped = table.stop()
    assert (code, err) == (0, "")
    assert stopped == 0, table.lines
    replaced = [line["data"] for line in export_lines(state) if line["kind"] == "dice_replaced"]
    mine = [r for r in replaced if r.get("employee") == "S7777"]
    assert [r["dice_set"] for r in mine] == ["B-0417"]
    assert main(["verify-log", "--state-dir", str(state)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_with_the_key_held_off_a_persons_action_is_refused_and_nothing_recorded(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = short_dir / "s"
    # the table opened first (its dice and tiles recorded by the crew's supervisor, key auto)
    opened = subprocess.run(simulate_argv(state, 1), capture_output=True, text=True, check=False)
    assert opened.returncode == 0, opened.stdout
    table = SimulatedTable(state, "--supervisor-key", "off")
    try:
        table.wait_until_playing()
        code, err = supervise(state, capsys, "dice-replaced", "--employee", "S8888")
    finally:
        stopped = table.stop()
    assert code == 1
    assert err == (
        "paigow-controller: refused by the table: replacing the dice needs the supervisor key\n"
    )
    assert stopped == 0, table.lines
    assert "S8888" not in employees(state, "dice_replaced")
    assert main(["verify-log", "--state-dir", str(state)]) == 0


def test_a_table_that_needs_its_supervisor_with_the_key_held_off_stops_saying_so(
    short_dir: Path,
) -> None:
    """A new table's first dice set is the supervisor's: with the key held off the run ends
    (exit 1) naming what the supervisor could not do, instead of waiting for ever."""
    state = short_dir / "s"
    argv = simulate_argv(state, 5, "--supervisor-key", "off")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=STOP_S, check=False)
    assert done.returncode == 1, done.stdout
    assert (
        "stopped: the table needs its supervisor (dice_replaced) but the simulated supervisor"
        " key is held off (--supervisor-key off)\n"
    ) in done.stdout
    assert main(["verify-log", "--state-dir", str(state)]) == 0


def test_the_key_switch_takes_auto_on_or_off_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--supervisor-key", "maybe"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--supervisor-key" in line
