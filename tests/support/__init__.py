"""What many tests need of a table: one place (the tests' own, not the product's).

A table plays only once it is opened: a dice set recorded in the shaker (proposed 621a.5(c)) and,
at tiles, a set of tiles inspected and verified (621a.6(a)). ``OPENED`` is such a context, for a
machine made by hand; ``opening`` the events that open a table run by the loop, for a log that
starts empty."""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from controller.audit.recall import export_lines
from controller.cli import main
from controller.core.state import (
    DiceReplaced,
    Occurrence,
    RoundContext,
    Screen,
    TilesInspected,
)

SUPERVISOR = "S1021"  # the employee ids the tests' people act with
DEALER = "D2207"
FLOORPERSON = "F0310"
TECHNICIAN = "T0042"

# both put in at the table's time 0
OPENED = RoundContext(dice_set="1", dice_since_table=0, tiles_set="T1", tiles_since_table=0)


# a cosigned record's data but its round, as record_data.cosigned_data makes it
COSIGNED = {
    "witness": "w",
    "witness_key": "w+01+key",
    "size": 3,
    "root": "cm9vdA==",
    "timestamp": 1,
    "signature": "c2ln",
    "close": 2,
}


def opening(at: int) -> list[Occurrence]:
    """The supervisor records the dice in the shaker, the floorperson verifies the tiles the
    dealer inspected (both with the supervisor key)."""
    return [
        DiceReplaced(at=at, supervisor=True, employee=SUPERVISOR, dice_set="1"),
        TilesInspected(
            at=at,
            supervisor=True,
            employee=FLOORPERSON,
            tile_set="T1",
            dealer=DEALER,
        ),
    ]


def simulate_argv(state: Path, rounds: int, *extra: str) -> list[str]:
    """The daemon's own command line for ``rounds`` rounds played as fast as the rules allow,
    with no fault injected, into the log in ``state``."""
    return [
        sys.executable,
        "-m",
        "controller",
        "simulate",
        "--fast",
        "--rounds",
        str(rounds),
        "--faults",
        "none",
        "--state-dir",
        str(state),
        *extra,
    ]


def what_happened(state: Path) -> tuple[list[tuple[object, ...]], list[str]]:
    """The results (round, dice, starting position) and the kinds of every record that says
    something went wrong."""
    lines = list(export_lines(state))
    results = [
        (line["data"]["round"], line["data"]["dice"], line["data"]["starting_position"])
        for line in lines
        if line["kind"] == "result"
    ]
    wrong = {"no_roll", "fault", "reshake_limit"}
    return results, [line["kind"] for line in lines if line["kind"] in wrong]


class ScreenLog:
    """The table display and the panel's lamps as the dealer sees them: what was shown."""

    def __init__(self) -> None:
        self.shown: list[tuple[Screen, dict[str, object], int | None]] = []
        self.lamps: list[Screen] = []

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        self.shown.append((screen, dict(data), seq))

    def show_status(
        self, screen: Screen, *, player_bank: bool = False, dice_alarm: bool = False
    ) -> None:
        self.lamps.append(screen)

    def drive_safe(self) -> None:
        self.lamps.append(Screen.FAULT)

    def close(self) -> None:
        return None


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


class Terminal(io.StringIO):
    """stdout as a terminal: what a person running the command sees."""

    def isatty(self) -> bool:
        return True


def run_shown(
    capsys: pytest.CaptureFixture[str], *argv: str, terminal: bool = False
) -> tuple[int, str, str]:
    """The command in this process: exit code, stdout (the terminal's, if ``terminal``), stderr."""
    screen, captured = Terminal(), sys.stdout
    if terminal:
        sys.stdout = screen
    try:
        code = main(list(argv))
    finally:
        sys.stdout = captured
    out, err = capsys.readouterr()
    return code, screen.getvalue() if terminal else out, err
