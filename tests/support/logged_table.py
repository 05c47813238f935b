"""A table whose round state machine writes into a real audit log, with no control loop: each
step's records are committed with the context after it, as the daemon commits them (the
records that may wait are not held back: every step is its own commit). The hardware, the
crew and the RNG are the test's events; a drawn RNG number comes back as the test says.

For the audit side's tests (verify-log, meters, recall): the records are the core's own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.audit.log import AuditLog
from controller.core.config import Config
from controller.core.dice import DiceReading, DieColour, DieReading, Roll
from controller.core.record_data import config_loaded_data
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import (
    Action,
    ActionKind,
    CorrectionReason,
    Event,
    Mode,
    RngMode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    VoidReason,
    occurrence,
)

WALL = 1_764_500_000_000  # UTC milliseconds of a day in 2025: the events' wall clock
SUPERVISOR = "S100"
DEALER = "D7"


def reading(faces: tuple[int, int, int], *, flat: bool = True, shift: int = 0) -> DiceReading:
    """The sensor's reading of the dice (the middle one on its edge unless ``flat``), moved
    by ``shift`` (dice in the same places as the last roll's are a no roll)."""
    dice = tuple(
        DieReading(
            DieColour.RED if i == 0 else DieColour.BLUE,
            face,
            flat or i != 1,
            True,
            97,
            (20 + 30 * i + 25 * (shift % 4), 40 + 30 * (shift % 3)),
        )
        for i, face in enumerate(faces)
    )
    return DiceReading(dice, "ab" * 32)


class LoggedTable:
    """The machine and the log; ``send`` one event, its records committed."""

    def __init__(
        self,
        state_dir: Path,
        *,
        settings: RoundSettings | None = None,
        config: Config | None = None,
    ) -> None:
        self.config = config or Config()
        self.settings = settings or self.config.round_settings()
        self.log = AuditLog.open(state_dir)
        stored = self.log.latest_context()  # a table started again takes up its log's context
        self.machine = RoundMachine(
            self.settings, None if stored is None else decode_context(stored[1])
        )
        self.at = 0
        self.shakes = 0
        self.actions: list[Action] = []

    @property
    def state(self) -> State:
        return self.machine.state

    def send(self, event: Event, advance: int = 10, **data: Any) -> list[Action]:
        self.at += advance
        occ = occurrence(event, at=self.at, wall=WALL + self.at, **data)
        self.actions = self.machine.handle(occ)
        entries = [
            (a.record, a.data)
            for a in self.actions
            if a.kind is ActionKind.RECORD and a.record is not None
        ]
        if entries:
            self.log.commit(entries, context=encode_context(self.machine.context))
        return self.actions

    def refused(self) -> bool:
        return any(a.screen is Screen.REFUSED for a in self.actions)

    # --- the table's day ---------------------------------------------------------------------

    def open(self) -> LoggedTable:
        """Power on, the lid closed, a dice set put in (proposed 621a.5(c)) and a set of tiles
        inspected (621a.6(a)) if none is."""
        self.send(Event.POWER_ON, config=config_loaded_data(self.config))
        self.send(Event.LID_CLOSED)
        if self.machine.context.dice_set is None:
            self.send(Event.DICE_REPLACED, supervisor=True, employee=SUPERVISOR, dice_set="D1")
        if self.machine.context.tiles_set is None:
            self.send(
                Event.TILES_INSPECTED,
                supervisor=True,
                employee=SUPERVISOR,
                tile_set="T1",
                dealer=DEALER,
            )
        return self

    def to_result(self, faces: tuple[int, int, int] = (3, 4, 5), *, tilted: int = 0) -> None:
        """Bets closed, shaken, read: the result shown (after ``tilted`` no rolls)."""
        self.send(Event.NO_MORE_BETS)
        for shake in range(tilted + 1):
            self.send(Event.SHAKE_PRESSED)
            self.send(Event.SHAKE_DONE, advance=3000, cycles=4)
            self.send(Event.TICK, advance=self.settings.settle_ms)
            self.shakes += 1
            shown = reading(faces, flat=shake == tilted, shift=self.shakes)
            self.send(Event.READING, reading=shown)
            if self.state is State.READING:
                self.send(Event.READING, reading=shown)
        assert self.state is State.RESULT, self.state

    def play(self, faces: tuple[int, int, int] = (3, 4, 5), *, tilted: int = 0) -> None:
        self.to_result(faces, tilted=tilted)
        self.send(Event.CLOSE_ROUND)

    def correct(
        self, seen: tuple[int, int, int], reason: CorrectionReason = CorrectionReason.MISREAD
    ) -> None:
        ctx = self.machine.context
        self.send(
            Event.CORRECT_RESULT,
            supervisor=True,
            employee=SUPERVISOR,
            correction=reason,
            dice_seen=Roll(seen[0], (seen[1], seen[2])),
            result_meant=(ctx.round_number, ctx.attempt),
            detail="seat 3 disputed the total",
        )

    def void(self, reason: VoidReason = VoidReason.DEALER_ERROR) -> None:
        self.send(
            Event.VOID_ROUND,
            supervisor=True,
            void_reason=reason,
            employee=SUPERVISOR,
            round_meant=self.machine.context.round_number,
            detail="tiles dealt to the wrong seats",
        )

    def service_round(self, faces: tuple[int, int, int] = (1, 1, 1)) -> None:
        """Into service mode, one test round played, out of it (9 NYCRR 5319.58)."""
        self.send(Event.SERVICE_MODE, supervisor=True, employee=SUPERVISOR)
        self.play(faces)
        self.send(Event.SERVICE_MODE, supervisor=True, employee=SUPERVISOR)

    def rng_round(self, faces: tuple[int, int, int] = (2, 2, 6)) -> None:
        """A round of the RNG's three virtual dice (the table switched to the RNG before)."""
        self.send(Event.NO_MORE_BETS)
        self.send(Event.DICE_SET)  # 621a.11(i): the style settled, the RNG draws
        assert self.state is State.DRAWING, self.state
        self.send(Event.RNG_DRAWN, roll=Roll(faces[0], (faces[1], faces[2])))
        self.send(Event.CLOSE_ROUND)

    def switch_to(self, mode: Mode) -> None:
        self.send(Event.MODE_SWITCH, supervisor=True, employee=SUPERVISOR, mode=mode)

    def close(self) -> None:
        if self.machine.context.is_running:
            self.send(Event.SHUTDOWN)
        self.log.close()


def rng_dice_settings(config: Config | None = None) -> RoundSettings:
    """A table that may switch to its RNG's three virtual dice (current 621a.6(a))."""
    settings = (config or Config()).round_settings()
    return replace(settings, modes=(Mode.RNG,), rng_mode=RngMode.DICE)
