"""A table that writes the audit log and shows screens the way the daemon does: each record is
committed through the real SQLite audit log before the screen that follows it is shown."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.audit.log import AuditLog
from controller.core.config import DisplayConfig, Language, LimitsConfig
from controller.core.dealing import DeliveryStyle
from controller.core.dice import NoRollReason, Roll
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.result import result_of_number, result_of_roll
from controller.core.state import Screen
from controller.core.wagers import Paytable, sum_paytable_a, sum_paytable_b
from controller.display.log_reader import SqliteLogReader
from controller.display.server import DisplayServer

PAYTABLES = (sum_paytable_a(), sum_paytable_b())


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
        voided: tuple[int, tuple[int, int]] | None = None,
        close: bool = True,
    ) -> dict[str, Any]:
        """A whole round of the player-activated shaker, each record in the shape the core
        writes it (controller/core/state.py): the bank chosen, bets closed, the delivery style,
        a shake and two agreeing readings per attempt, a no roll for each of ``no_rolls``
        (its reading shows why), with ``voided`` (red, blue) a result of those dice voided
        (misread), then the result of ``red`` and ``blue``; then, with ``close``, the round
        closed and the next opened. Returns the result that stands, with round and attempt."""
        number = self.round
        bank = "dealer" if bank_seat is None else f"seat {bank_seat}"
        if bank_seat is not None:
            self.record(RecordKind.BANK_SELECTED, round=number, bank=bank, refused=None)
        self.record(RecordKind.NO_MORE_BETS, round=number, bank=bank, mode="shaker")
        self.show(Screen.BETS_CLOSED, round=number, attempt=1)
        if style is not None:
            self.record(
                RecordKind.DELIVERY_STYLE, round=number, style=style.value, section=style.section
            )
        attempt = 1
        for reason in no_rolls:
            self._shake(attempt)
            self._reading(attempt, red, blue, verdict=str(reason))
            self.no_roll(reason, attempt=attempt)
            attempt += 1
        if voided is not None:
            self._decided(attempt, *voided, bank_seat=bank_seat)
            self.record(
                RecordKind.RESULT_VOIDED,
                round=number,
                attempt=attempt,
                reason="misread",
                detail="the dice show other faces",
            )
            attempt += 1
        result = self._decided(attempt, red, blue, bank_seat=bank_seat)
        if close:
            self.close_round()
        return result

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
        self.show(Screen.RESULT, round=self.round, attempt=attempt, result=result)
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
