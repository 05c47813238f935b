"""A table that writes the audit log and shows screens the way the daemon does: each record is
committed through the real SQLite audit log before the screen that follows it is shown.

:class:`Table` writes each record by hand, in the shape the core writes it; :class:`CoreTable`
plays through the round state machine itself (controller/core/state.py), committing each
step's records and then showing its screens as the control loop does."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.audit.log import AuditLog
from controller.core.config import DisplayConfig, Language, LimitsConfig
from controller.core.dealing import DeliveryStyle
from controller.core.dice import DiceReading, DieColour, DieReading, NoRollReason, Roll
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.result import result_of_number, result_of_roll
from controller.core.snapshot import encode_context
from controller.core.state import (
    RECALL_DEPTH,
    Action,
    ActionKind,
    CorrectionReason,
    Event,
    RoundContext,
    RoundMachine,
    RoundSettings,
    Screen,
    VoidReason,
    occurrence,
)
from controller.core.wagers import Paytable, sum_paytable_a, sum_paytable_b
from controller.display.log_reader import SqliteLogReader
from controller.display.server import DisplayServer
from controller.errors import GameRuleError, IllegalTransition
from support.records import valid

PAYTABLES = (sum_paytable_a(), sum_paytable_b())
# A table opened for play: a dice set in the shaker (proposed 621a.5(c)) and a set of tiles
# inspected (621a.6(a)), both put in at the table's time 0 (as tests/core/test_state.py's OPENED)
OPENED = RoundContext(dice_set="1", dice_since_table=0, tiles_set="T1", tiles_since_table=0)
WALL = 1_764_500_000_000  # UTC milliseconds of some day in 2025
SUPERVISOR = "S100"  # the employee id the supervisor types at the service terminal


class FixedClockStatus:
    """A ``ClockStatus`` that says what the test wants (the page shows its clock, and says
    when it is not synchronised), counting the questions."""

    def __init__(self, synchronised: bool | None = True) -> None:
        self.synchronised = synchronised
        self.asked = 0

    def is_synchronised(self) -> bool | None:
        self.asked += 1
        return self.synchronised


def start_display(
    log: AuditLog,
    *,
    http_port: int = 0,
    stats_panel: bool = True,
    languages: Sequence[str] = ("en",),
    brand: str = "",
    limits: LimitsConfig | None = None,
    paytables: Sequence[Paytable] = (),
    synchronised: bool | None = True,
    **options: object,
) -> DisplayServer:
    """The display server as the appliance starts it; by default in English alone (the
    texts the tests read), with no brand or limits and a synchronised clock."""
    config = DisplayConfig(
        host="127.0.0.1",
        http_port=http_port,
        feed_port=0,
        stats_panel=stats_panel,
        languages=tuple(Language(language) for language in languages),
        brand=brand,
    )
    server = DisplayServer(
        config,
        SqliteLogReader.of(log),
        table="table-1",
        limits=limits,
        paytables=paytables,
        clock_status=FixedClockStatus(synchronised),
        **options,  # type: ignore[arg-type]
    )
    log.on_commit = server.committed  # as the appliance wires them
    return server


# An RNG session's commitment and a draw of it, as the display reads them (their id and
# commitment, the number drawn): what the display does not show is the least the schema takes.
RNG_COMMIT = valid(
    RecordKind.RNG_COMMIT, session="s-0001", table="table-1", mode="position", commitment="ab" * 32
)


def rng_draw(round_number: int, number: int) -> dict[str, Any]:
    return valid(
        RecordKind.RNG_DRAW,
        session="s-0001",
        round=round_number,
        attempt=1,
        mode="position",
        number=number,
    )


class Table:
    def __init__(self, state_dir: Path) -> None:
        self.log = AuditLog.open(state_dir)
        self.display: DisplayServer | None = None
        self.last_seq: int | None = None
        self.round = 1

    def record(self, kind: RecordKind, **data: object) -> int:
        self.last_seq = self.log.append(kind, data)
        return self.last_seq

    def show(self, screen: Screen, **data: object) -> None:
        if self.display is not None:
            self.display.show(screen, data, seq=self.last_seq)

    def open_round(self) -> None:
        self.record(RecordKind.ROUND_OPENED, round=self.round)
        self.show(Screen.READY, round=self.round)

    def result(self, red: int, blue: tuple[int, int], *, bank_seat: int | None = None) -> int:
        roll = Roll(red, blue)
        result = result_of_roll(Game.TILES, roll, bank_seat=bank_seat, paytables=PAYTABLES)
        seq = self.record(RecordKind.RESULT, round=self.round, attempt=1, **result.as_record())
        self.show(Screen.RESULT, round=self.round, attempt=1, result=result.as_record())
        return seq

    def rng_result(self, number: int) -> int:
        result = result_of_number(Game.TILES, number, bank_seat=None)
        seq = self.record(RecordKind.RESULT, round=self.round, attempt=1, **result.as_record())
        self.show(Screen.RESULT, round=self.round, attempt=1, result=result.as_record())
        return seq

    def no_roll(self, reason: NoRollReason, *, attempt: int = 1) -> int:
        seq = self.record(RecordKind.NO_ROLL, round=self.round, attempt=attempt, reason=str(reason))
        self.show(
            Screen.NO_ROLL,
            round=self.round,
            attempt=attempt + 1,
            reason=str(reason),
            words=reason.plain_words,
        )
        return seq

    def close_round(self) -> None:
        self.record(RecordKind.CLOSE, round=self.round)
        self.round += 1
        self.open_round()

    def play_round(self, red: int, blue: tuple[int, int]) -> int:
        seq = self.result(red, blue)
        self.close_round()
        return seq

    def recorded_round(
        self,
        red: int,
        blue: tuple[int, int],
        *,
        bank_seat: int | None = None,
        style: DeliveryStyle | None = None,
        no_rolls: Sequence[NoRollReason] = (),
        corrected: tuple[int, tuple[int, int]] | None = None,
        void: VoidReason | None = None,
        close: bool = True,
    ) -> dict[str, Any]:
        """A whole round of the player-activated shaker, each record in the shape the core
        writes it (controller/core/state.py): the bank chosen, bets closed, the delivery style,
        a shake and two agreeing readings per attempt, a no roll for each of ``no_rolls`` (its
        reading shows why), then the result of ``red`` and ``blue``; with ``corrected`` (red,
        blue) the sensor read those dice instead and the supervisor corrected the result to
        ``red`` and ``blue`` (a misread, N.J.A.C. 13:69E-1.28P(d)). Then, with ``void``, the
        round is void for that reason (621a.12(c),(e)) and the next opens; else, with
        ``close``, the round closed and the next opened. Returns the result that stands (the
        corrected one), with round and attempt."""
        number = self.round
        bank = "dealer" if bank_seat is None else f"seat {bank_seat}"
        if bank_seat is not None:
            self.record(RecordKind.BANK_SELECTED, round=number, bank=bank, refused=None)
        self.record(RecordKind.NO_MORE_BETS, round=number, bank=bank, mode="shaker")
        self.show(Screen.BETS_CLOSED, round=number, attempt=1, mode="shaker")
        if style is not None:
            self.record(
                RecordKind.DELIVERY_STYLE,
                round=number,
                style=style.value,
                section=style.section,
                employee=None,
            )
        attempt = 1
        for reason in no_rolls:
            self._shake(attempt)
            self._reading(attempt, red, blue, verdict=str(reason))
            self.no_roll(reason, attempt=attempt)
            attempt += 1
        if corrected is None:
            result = self._decided(attempt, red, blue, bank_seat=bank_seat)
        else:
            self._decided(attempt, *corrected, bank_seat=bank_seat)
            result = self.correct(red, blue, read=corrected, bank_seat=bank_seat)
        if void is not None:
            self.void_round(void, state="result")
        elif close:
            self.close_round()
        return result

    def correct(
        self,
        red: int,
        blue: tuple[int, int],
        *,
        read: tuple[int, tuple[int, int]],
        bank_seat: int | None = None,
        reason: CorrectionReason = CorrectionReason.MISREAD,
        attempt: int = 1,
    ) -> dict[str, Any]:
        """The supervisor corrects the result shown to the dice as they lie, ``red`` and
        ``blue`` (the sensor read ``read``): the correction recorded, the result shown again
        corrected. Returns the corrected result, with round and attempt."""
        result = result_of_roll(
            Game.TILES, Roll(red, blue), bank_seat=bank_seat, paytables=PAYTABLES
        ).as_record()
        dice_read = {"red": read[0], "blue": list(read[1])}
        self.record(
            RecordKind.RESULT_CORRECTED,
            round=self.round,
            attempt=attempt,
            dice_read=dice_read,
            dice_seen={"red": red, "blue": list(blue)},
            reason=str(reason),
            employee=SUPERVISOR,
            note="",
            result=result,
        )
        self.show(
            Screen.RESULT,
            round=self.round,
            attempt=attempt,
            mode="shaker",
            result=result,
            corrected={"dice_read": dice_read, "reason": str(reason), "employee": SUPERVISOR},
        )
        return {"round": self.round, "attempt": attempt, **result}

    def void_round(self, reason: VoidReason, *, state: str = "armed", attempt: int = 1) -> int:
        """The whole round void (621a.12(c),(e)): every wager returned, no result; the next
        round's bets open. Returns the void's sequence number."""
        seq = self.record(
            RecordKind.VOID,
            round=self.round,
            attempt=attempt,
            state=state,
            reason=str(reason),
            wagers="returned",
            reshuffle=reason.reshuffles,
            note="",
            employee=SUPERVISOR if reason.is_typed else None,
        )
        self.round += 1
        self.open_round()
        return seq

    def old_voided_result(self, attempt: int = 1, reason: str = "misread") -> int:
        """A result voided and its round to be played again, as versions before corrections
        wrote it (logs in the field hold them; nothing writes them now)."""
        return self.record(
            RecordKind.RESULT_VOIDED,
            round=self.round,
            attempt=attempt,
            reason=reason,
            detail="the dice show other faces",
        )

    def _shake(self, attempt: int) -> None:
        self.record(RecordKind.SHAKE, round=self.round, attempt=attempt, cycles=4, delay_ms=612)

    def _reading(
        self,
        attempt: int,
        red: int,
        blue: tuple[int, int],
        *,
        verdict: str = "valid",
    ) -> None:
        """Two agreeing reads decide; a no roll's reading shows its reason on the red die."""
        red_die = die("red", red, (40 + red, 20))
        if verdict == NoRollReason.NOT_FLAT:
            red_die["flat"] = False
        elif verdict == NoRollReason.DIE_OUT:
            red_die["inside"] = False
        elif verdict == NoRollReason.LOW_CONFIDENCE:
            red_die["confidence"] = 41
        dice = [red_die, die("blue", blue[0], (130, 19 + blue[0])), die("blue", blue[1], (87, 79))]
        digest = hashlib.sha256(f"{self.round}/{attempt}/{self.last_seq}".encode()).hexdigest()
        self.record(
            RecordKind.READING,
            round=self.round,
            attempt=attempt,
            image_digest=digest,
            dice=dice,
            verdict=verdict,
        )

    def _decided(
        self, attempt: int, red: int, blue: tuple[int, int], *, bank_seat: int | None
    ) -> dict[str, Any]:
        self._shake(attempt)
        self._reading(attempt, red, blue)
        self._reading(attempt, red, blue)  # K = 2 agreeing reads
        result = result_of_roll(
            Game.TILES, Roll(red, blue), bank_seat=bank_seat, paytables=PAYTABLES
        ).as_record()
        self.record(RecordKind.RESULT, round=self.round, attempt=attempt, **result)
        self.show(Screen.RESULT, round=self.round, attempt=attempt, mode="shaker", result=result)
        return {"round": self.round, "attempt": attempt, **result}

    def close(self) -> None:
        if self.display is not None:
            self.display.close()
        self.log.close()


def die(colour: str, face: int, position: tuple[int, int]) -> dict[str, Any]:
    """One die of a reading, as ``controller.core.state._die_record`` writes it."""
    return {
        "colour": colour,
        "face": face,
        "flat": True,
        "inside": True,
        "confidence": 90 + face,
        "position": list(position),
    }


class CoreTable:
    """A table played through the round state machine itself, with no hardware and no control
    loop: each step's records are committed through the real audit log in one transaction
    with the next context, and only then its screens shown (write-ahead), as the control loop
    does (controller/app/loop.py); a recall's round comes from the log as the loop reads it.
    The table's clock starts at ``WALL``; every event carries it."""

    def __init__(
        self,
        state_dir: Path,
        settings: RoundSettings | None = None,
        context: RoundContext = OPENED,
        **display: Any,
    ) -> None:
        self.log = AuditLog.open(state_dir)
        self.display = start_display(self.log, **display)
        self.machine = RoundMachine(settings or RoundSettings(settle_ms=10), context)
        self.at = 0
        self.last_seq: int | None = None
        self.actions: list[Action] = []

    def send(self, event: Event, advance: int = 10, **data: Any) -> list[Action]:
        self.at += advance
        occ = occurrence(event, at=self.at, wall=WALL + self.at, **data)
        before = self.machine.context
        actions = self.machine.handle(occ)
        records = [(a.record, a.data) for a in actions if a.kind is ActionKind.RECORD and a.record]
        if records:
            try:
                committed = self.log.commit(records, context=encode_context(self.machine.context))
            except BaseException:
                self.machine.context = before
                raise
            self.last_seq = committed.seqs[-1]
        for action in actions:
            if action.kind is ActionKind.SHOW and action.screen is not None:
                shown = dict(action.data)
                if action.screen is Screen.RECALL:
                    rounds = self.log.recall(RECALL_DEPTH)
                    back = int(shown["back"])  # type: ignore[call-overload]
                    chosen = [rounds[-back]] if 1 <= back <= len(rounds) else []
                    shown.update(count=len(rounds), rounds=chosen)
                self.display.show(action.screen, shown, seq=self.last_seq)
        self.actions = actions
        return actions

    def press(self, event: Event, **data: Any) -> list[Action]:
        """A key pressed as the control loop takes it (controller/app/loop.py ``_step``): an
        event the state machine does not take now, or a rule refuses, is shown as a refused
        key's notice with the operator's words and the event, nothing recorded."""
        try:
            return self.send(event, **data)
        except (IllegalTransition, GameRuleError) as exc:
            self.display.show(
                Screen.REFUSED, {"reason": str(exc), "event": str(event)}, seq=self.last_seq
            )
            return []

    def shown(self, screen: Screen) -> dict[str, Any]:
        """The data of ``screen`` as the last step showed it."""
        return dict(next(a.data for a in self.actions if a.screen is screen))

    def start(self) -> None:
        """Power on, the shaker's lid closed: bets open for the first round."""
        self.send(Event.POWER_ON)
        self.send(Event.LID_CLOSED)

    def shake(self, red: int, blue: tuple[int, int], *, bank_seat: int | None = None) -> None:
        """Bets closed, a shake, and two agreeing readings of ``red`` and ``blue``: a result."""
        self.send(Event.NO_MORE_BETS, **({} if bank_seat is None else {"bank_seat": bank_seat}))
        self.send(Event.SHAKE_PRESSED, delay_ms=0)
        self.send(Event.SHAKE_DONE, cycles=4)
        self.send(Event.TICK, advance=self.machine.settings.settle_ms)
        for _ in range(2):
            self.send(Event.READING, reading=reading(red, blue))

    def correct(
        self,
        red: int,
        blue: tuple[int, int],
        reason: CorrectionReason = CorrectionReason.MISREAD,
    ) -> None:
        """The supervisor corrects the result shown to the dice as they lie."""
        ctx = self.machine.context
        self.send(
            Event.CORRECT_RESULT,
            supervisor=True,
            employee=SUPERVISOR,
            correction=reason,
            result_meant=(ctx.round_number, ctx.attempt),
            dice_seen=Roll(red, blue),
        )

    def void(self, reason: VoidReason) -> None:
        """The supervisor voids the round in play at the service terminal."""
        self.send(
            Event.VOID_ROUND,
            supervisor=True,
            employee=SUPERVISOR,
            void_reason=reason,
            round_meant=self.machine.context.round_number,
        )

    def close(self) -> None:
        self.display.close()
        self.log.close()


def reading(red: int, blue: tuple[int, int]) -> DiceReading:
    """The sensor's reading of three flat dice inside the shaker."""
    colours = (DieColour.RED, DieColour.BLUE, DieColour.BLUE)
    faces = (red, *blue)
    return DiceReading(
        tuple(
            DieReading(colour, face, True, True, 95, (20 + 30 * i, 40))
            for i, (colour, face) in enumerate(zip(colours, faces, strict=True))
        ),
        "ab" * 32,
    )
