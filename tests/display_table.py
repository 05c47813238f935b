"""A table that writes the audit log and shows screens the way the daemon does: each record is
committed through the real SQLite audit log before the screen that follows it is shown."""

from __future__ import annotations

from pathlib import Path

from controller.audit.log import AuditLog
from controller.core.config import DisplayConfig
from controller.core.dice import NoRollReason, Roll
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.result import result_of_number, result_of_roll
from controller.core.state import Screen
from controller.core.wagers import sum_paytable_a, sum_paytable_b
from controller.display.log_reader import SqliteLogReader
from controller.display.server import DisplayServer

PAYTABLES = (sum_paytable_a(), sum_paytable_b())


def start_display(log: AuditLog, *, http_port: int = 0, **options: object) -> DisplayServer:
    config = DisplayConfig(host="127.0.0.1", http_port=http_port, feed_port=0)
    server = DisplayServer(config, SqliteLogReader.of(log), table="table-1", **options)  # type: ignore[arg-type]
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

    def close(self) -> None:
        if self.display is not None:
            self.display.close()
        self.log.close()
