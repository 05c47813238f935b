"""What the witness's tests share: real logs made by ``simulate`` (each table's export lines and
its log key), a witness fed directly as its service feeds it (one store transaction per batch,
then what it decided published), and signed statuses as a table publishes them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.audit.log import AuditLog, load_signer
from controller.audit.recall import export_line, export_lines
from controller.core import canonical
from controller.core.note import ALG_COSIGNATURE_V1, Signer, Verifier
from controller.core.records import RecordKind, StoredRecord
from controller.fleet.protocol import (
    ALERTS_TOPIC,
    Alert,
    Channel,
    Presence,
    SignedStatus,
    Status,
    encode_record,
    open_alert,
    sign_status,
    topic,
)
from controller.witness.ports import FloorSink, NoFloor, Store
from controller.witness.tables import Witness

ROOT = Path(__file__).resolve().parents[2]
GAP_S = 60.0
SILENCE_S = 600.0
T0 = 1_796_000_000.0


@dataclass(frozen=True)
class TableLog:
    table: str
    lines: list[dict[str, Any]]
    signer: Signer  # the table's log key (it signs checkpoints and statuses)

    @property
    def key(self) -> Verifier:
        return self.signer.verifier

    @property
    def latest(self) -> str:
        note = self.lines[-1]["checkpoint"]
        assert isinstance(note, str)
        return note

    @property
    def size(self) -> int:
        return len(self.lines)

    def checkpoints(self) -> list[tuple[int, str]]:
        return [(line["seq"], line["checkpoint"]) for line in self.lines if "checkpoint" in line]

    def without_checkpoints(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in line.items() if k != "checkpoint"} for line in self.lines]


def simulate(state_dir: Path, rounds: int, config: Path | None = None) -> None:
    argv = ["simulate", "--fast", "--plain-rounds", "--faults", "none"]
    argv += ["--rounds", str(rounds), "--state-dir", str(state_dir)]
    if config is not None:
        argv += ["--config", str(config)]
    subprocess.run(
        [sys.executable, "-m", "controller", *argv],
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
    )


def read_log(table: str, state_dir: Path) -> TableLog:
    signer = load_signer(state_dir)
    assert signer is not None
    return TableLog(table, list(export_lines(state_dir)), signer)


@dataclass(frozen=True)
class Logs:
    one: TableLog  # table-1: 3 rounds
    early: TableLog  # table-1 as it was after its first round (an older copy of audit.db)
    forked: TableLog  # that older copy, played on after `one` had played (a rollback)
    parallel: TableLog  # that older copy, played on before `one` played on (a fork)
    two: TableLog  # table-2: 2 rounds


def make_logs(base: Path) -> Logs:
    one, early, forked, parallel, two = (
        base / n for n in ("one", "early", "forked", "parallel", "two")
    )
    simulate(one, 1)
    shutil.copytree(one, early)
    shutil.copytree(one, parallel)
    simulate(parallel, 1)  # the other copy plays first: its records are older than one's
    simulate(one, 2)
    shutil.copytree(early, forked)
    simulate(forked, 1)
    config = base / "table-2.toml"
    config.write_text('[table]\nname = "table-2"\n')
    simulate(two, 2, config)
    return Logs(
        read_log("table-1", one),
        read_log("table-1", early),
        read_log("table-1", forked),
        read_log("table-1", parallel),
        read_log("table-2", two),
    )


class SmallTable:
    """A table's log made by the audit log itself, quickly: rounds of ``round_opened`` and
    ``close`` (a signed checkpoint at each close), at the times the test says (``at``, UNIX
    seconds, one second more for each record). Its origin, and its key's name, is a casino's
    (``[fleet] origin``), not ``paigow-controller/<table>``."""

    def __init__(self, state_dir: Path, table: str = "table-7", *, at: float = T0) -> None:
        self.state_dir, self.table, self.at = state_dir, table, at
        self.origin = f"casino.example/paigow/{table}"
        self.rounds = 0

    def _now(self) -> str:
        self.at += 1
        return (
            datetime.fromtimestamp(self.at, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )

    def play(self, rounds: int, *, at: float | None = None) -> SmallTable:
        if at is not None:
            self.at = at
        log = AuditLog.open(self.state_dir, origin=self.origin, clock=self._now)
        try:
            for _ in range(rounds):
                self.rounds += 1
                for kind in (RecordKind.ROUND_OPENED, RecordKind.CLOSE):
                    log.commit([(kind, {"round": self.rounds})])
        finally:
            log.close()
        return self

    def copy(self, state_dir: Path) -> SmallTable:
        shutil.copytree(self.state_dir, state_dir)
        other = SmallTable(state_dir, self.table, at=self.at)
        other.rounds = self.rounds
        return other

    def log(self) -> TableLog:
        return read_log(self.table, self.state_dir)


def keys_of(*logs: TableLog) -> dict[str, Verifier]:
    return {log.table: log.key for log in logs}


def status_note(
    log: TableLog,
    connection: int,
    seq: int,
    presence: Presence = Presence.ONLINE,
    screen: str = "ready",
    *,
    signer: Signer | None = None,
) -> bytes:
    status = Status(presence, screen, "shaker", 1, (), "2026-12-01T08:00:00.000Z")
    return sign_status(SignedStatus(log.table, connection, seq, status), signer or log.signer)


@dataclass
class FakeClock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


@dataclass
class Fed:
    """A witness fed as its service feeds it: each call one batch, in one transaction, then
    what it decided said (published here, and to its floor)."""

    store: Store
    keys: dict[str, Verifier]
    cosigner: Signer = field(
        default_factory=lambda: Signer.generate("witness.test/w1", ALG_COSIGNATURE_V1)
    )
    alert_key: Signer | None = None
    clock: FakeClock = field(default_factory=FakeClock)
    floor: FloorSink = field(default_factory=NoFloor)
    published: list[tuple[str, bytes, bool]] = field(default_factory=list)
    witness: Witness = field(init=False)

    def __post_init__(self) -> None:
        if self.alert_key is None:
            self.alert_key = Signer.generate(self.cosigner.name)
        self.start()

    def start(self) -> Witness:
        """A witness (again) on the store: as a restart does."""
        assert self.alert_key is not None
        self.witness = Witness(
            self.store,
            self.keys,
            self.cosigner,
            alert_key=self.alert_key,
            clock=self.clock,
            publish=lambda t, p, r: self.published.append((t, p, r)),
            floor=self.floor,
            gap_s=GAP_S,
            silence_s=SILENCE_S,
        )
        self.witness.flush()
        return self.witness

    def batch(self, messages: list[tuple[str, bytes]]) -> None:
        try:
            with self.store.transaction():
                for name, payload in messages:
                    self.witness.receive(name, payload)
                self.witness.tick()
        except BaseException:
            self.witness.discard()
            raise
        self.witness.flush()

    def send(self, log: TableLog, lines: list[dict[str, Any]] | None = None) -> None:
        """Records one by one, each checkpoint a line carries after it on the checkpoint
        topic too, as the publisher does."""
        for line in log.lines if lines is None else lines:
            messages = [(topic(log.table, Channel.RECORDS), encode_record(line))]
            if "checkpoint" in line:
                messages.append((topic(log.table, Channel.CHECKPOINT), line["checkpoint"].encode()))
            self.batch(messages)

    def checkpoint(self, table: str, note: str) -> None:
        self.batch([(topic(table, Channel.CHECKPOINT), note.encode())])

    def status(self, log: TableLog, payload: bytes) -> None:
        self.batch([(topic(log.table, Channel.STATUS), payload)])

    def tick(self, seconds: float = 0.0) -> None:
        self.clock.now += seconds
        self.batch([])

    def acknowledge(self, alert_id: int, user: str) -> Any:
        with self.store.transaction():
            result = self.witness.acknowledge(alert_id, user)
        self.witness.flush()
        return result

    def alerts(self) -> list[Alert]:
        """The alerts published, each opened with the witness's alert key."""
        assert self.alert_key is not None
        return [
            open_alert(p, self.alert_key.verifier)
            for t, p, _ in self.published
            if t == ALERTS_TOPIC
        ]

    def cosigned(self, table: str) -> list[str]:
        name = topic(table, Channel.COSIGNATURE)
        return [p.decode() for t, p, _ in self.published if t == name]

    @property
    def refused(self) -> Callable[[str], int]:
        return lambda key: self.witness.refused[key]


def renumbered(after: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """``source``'s record re-numbered to follow ``after``: the right seq and the right
    ``prev``, a well-formed export line that no key signed."""
    value = canonical.decode(source["leaf"].encode())
    assert isinstance(value, dict)
    value["seq"], value["prev"] = after["seq"] + 1, after["hash"]
    leaf = canonical.encode(value)
    return export_line(StoredRecord(value["seq"], value["kind"], leaf), None)


SCHEMA_1 = """
CREATE TABLE witness_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE heads (table_name TEXT PRIMARY KEY, size BIGINT NOT NULL, last_hash TEXT NOT NULL,
    tree BLOB NOT NULL, cosigned_size BIGINT NOT NULL, cosigned_root BLOB NOT NULL,
    cosigned_note TEXT NOT NULL, halted TEXT NOT NULL);
CREATE TABLE leaves (table_name TEXT NOT NULL, seq BIGINT NOT NULL, kind TEXT NOT NULL,
    leaf BLOB NOT NULL, root BLOB NOT NULL, PRIMARY KEY (table_name, seq));
CREATE TABLE cosignatures (table_name TEXT NOT NULL, size BIGINT NOT NULL,
    timestamp BIGINT NOT NULL, note TEXT NOT NULL, PRIMARY KEY (table_name, size));
CREATE TABLE alerts (id INTEGER PRIMARY KEY, table_name TEXT NOT NULL, kind TEXT NOT NULL,
    detail TEXT NOT NULL, time TEXT NOT NULL, size BIGINT NOT NULL);
CREATE TABLE resets (id INTEGER PRIMARY KEY, table_name TEXT NOT NULL, time TEXT NOT NULL,
    reason TEXT NOT NULL, size BIGINT NOT NULL, cosigned_size BIGINT NOT NULL,
    halted TEXT NOT NULL);
INSERT INTO witness_meta VALUES ('schema', '1');
"""
