"""Shared by the core's tests: a table driven through the round machine, its readings."""

from __future__ import annotations

from controller.core.dice import DiceReading, DieColour, DieReading
from controller.core.records import RecordKind
from controller.core.state import (
    Action,
    ActionKind,
    Event,
    RoundContext,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    occurrence,
)
from support import OPENED

WALL = 1_764_500_000_000  # UTC milliseconds of some day in 2025


SETTINGS = RoundSettings(max_reshakes=2, settle_ms=1000, read_timeout_ms=2000, motor_max_ms=5000)


def die(colour: DieColour, face: int | None, x: int, *, flat: bool = True) -> DieReading:
    return DieReading(colour, face, flat, True, 99, (x, 20))


def good_reading(red: int = 2, b1: int = 3, b2: int = 4, shift: int = 0) -> DiceReading:
    return DiceReading(
        (
            die(DieColour.RED, red, 10 + shift),
            die(DieColour.BLUE, b1, 40 + shift),
            die(DieColour.BLUE, b2, 70 + shift),
        ),
        "ab" * 32,
    )


TILTED = DiceReading(
    (
        die(DieColour.RED, 1, 10),
        die(DieColour.BLUE, None, 40, flat=False),
        die(DieColour.BLUE, 2, 70),
    ),
    "cd" * 32,
)


class Table:
    """A machine with a clock, for scripting rounds."""

    def __init__(self, settings: RoundSettings = SETTINGS, context: RoundContext = OPENED) -> None:
        self.machine = RoundMachine(settings, context)
        self.now = 0
        self.actions: list[Action] = []

    @property
    def state(self) -> State:
        return self.machine.state

    def send(self, event: Event, advance: int = 10, **data: object) -> list[Action]:
        self.now += advance
        occ = occurrence(event, at=self.now, **data)
        self.actions = self.machine.handle(occ)
        return self.actions

    def kinds(self) -> list[ActionKind]:
        return [a.kind for a in self.actions]

    def records(self) -> list[RecordKind | None]:
        return [a.record for a in self.actions if a.kind is ActionKind.RECORD]

    def screens(self) -> list[Screen | None]:
        return [a.screen for a in self.actions if a.kind is ActionKind.SHOW]

    def shown(self, screen: Screen) -> Action:
        return next(a for a in self.actions if a.screen is screen)

    # --- paths -----------------------------------------------------------------------------

    def to_armed(self, **data: object) -> Table:
        self.send(Event.LID_CLOSED)
        self.send(Event.NO_MORE_BETS, **data)
        return self

    def to_shaking(self) -> Table:
        self.to_armed()
        self.send(Event.SHAKE_PRESSED)
        return self

    def to_settling(self) -> Table:
        self.to_shaking()
        self.send(Event.SHAKE_DONE, advance=3000, cycles=4)
        return self

    def to_reading(self) -> Table:
        self.to_settling()
        self.send(Event.TICK, advance=SETTINGS.settle_ms)
        return self

    def read(self, reading: DiceReading) -> Table:
        self.send(Event.READING, reading=reading)
        return self

    def to_result(self, reading: DiceReading | None = None) -> Table:
        self.to_reading()
        r = reading or good_reading()
        self.read(r)
        self.read(r)
        return self
