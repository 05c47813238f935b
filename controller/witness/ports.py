"""The witness's seams, on one page: where it keeps what it holds (:class:`Store`), and what it
tells the floor's dashboard (:class:`FloorSink`); the alerts as it keeps them
(:class:`StoredAlert`, with their severity, fleet-v2.md "Alerts a pit boss can act on").

Both are called from the witness's one control thread only (service.py). A FloorSink that a
dashboard reads from another thread does its own locking (controller/witness/floor.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from controller.fleet.protocol import Alert, AlertKind, Status

# --- alerts -----------------------------------------------------------------------------------


class Severity(StrEnum):
    CRITICAL = "critical"  # the log itself is in doubt: act now
    WARNING = "warning"  # something to look at on the floor
    INFO = "info"  # for the record


SEVERITY: Mapping[AlertKind, Severity] = {
    AlertKind.ROLLBACK: Severity.CRITICAL,
    AlertKind.FORK: Severity.CRITICAL,
    AlertKind.BAD_SIGNATURE: Severity.CRITICAL,
    AlertKind.BAD_RECORD: Severity.CRITICAL,  # a record under the table's signature refused
    AlertKind.GAP: Severity.WARNING,
    AlertKind.SILENCE: Severity.WARNING,
    AlertKind.DEVICE_OFFLINE: Severity.WARNING,
    AlertKind.BIASED_DICE: Severity.WARNING,
    AlertKind.UNKNOWN_TABLE: Severity.INFO,
}
SEVERITY_RANK: Mapping[str, int] = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
# Alerts whose condition ends by itself (the records came, the table was heard again, it is
# back online, the dice were replaced or kept): the witness marks them cleared. The others
# stand until a named user acknowledges them.
CLEARING_KINDS = frozenset(
    {AlertKind.GAP, AlertKind.SILENCE, AlertKind.DEVICE_OFFLINE, AlertKind.BIASED_DICE}
)


@dataclass(frozen=True, slots=True)
class StoredAlert:
    """An alert as the store keeps it: its number (``POST /alerts/<id>/ack``), its severity,
    when its condition ended (``cleared``) and who acknowledged it and when. Times are RFC
    3339 UTC, the witness's clock; "" for not yet."""

    id: int
    alert: Alert
    severity: Severity
    cleared: str = ""
    acked_by: str = ""
    acked_at: str = ""

    @property
    def is_open(self) -> bool:
        return not self.cleared and not self.acked_by

    @property
    def is_standing(self) -> bool:
        """While it stands no other of its kind is raised for its table: one that clears by
        itself until it clears, any other until it is acknowledged."""
        if self.alert.kind in CLEARING_KINDS:
            return not self.cleared
        return self.is_open


# --- the floor --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """A table's records beyond its last signed checkpoint, as they chain on from it (the
    earliest received at each seq): ``count`` of them, seqs ``first``..``last``; the export
    line of the latest result, correction or void among them (None: none); ``contested``
    when another record came at one of those seqs (only a signed checkpoint will say which
    is the log)."""

    count: int = 0
    first: int = 0
    last: int = 0
    result: dict[str, Any] | None = None
    contested: bool = False


class FloorSink(Protocol):
    """What the witness learns, as it holds it: a record accepted (its export line, already
    checked, under a signed checkpoint), the records beyond the checkpoint (unconfirmed), a
    table's signed status, a checkpoint cosigned (its size, and the cosignature's time, POSIX
    seconds), an alert raised, cleared or acknowledged (the whole alert each time)."""

    def apply_record(self, table: str, line: dict[str, Any]) -> None: ...

    def apply_unconfirmed(self, table: str, unconfirmed: Unconfirmed) -> None: ...

    def apply_status(self, table: str, status: Status) -> None: ...

    def apply_cosigned(self, table: str, size: int, time: int) -> None: ...

    def apply_alert(self, alert: StoredAlert) -> None: ...


class NoFloor:
    """No dashboard: everything is dropped."""

    def apply_record(self, table: str, line: dict[str, Any]) -> None:
        return None

    def apply_unconfirmed(self, table: str, unconfirmed: Unconfirmed) -> None:
        return None

    def apply_status(self, table: str, status: Status) -> None:
        return None

    def apply_cosigned(self, table: str, size: int, time: int) -> None:
        return None

    def apply_alert(self, alert: StoredAlert) -> None:
        return None


# --- the store --------------------------------------------------------------------------------


@dataclass
class TableHead:
    """What the witness holds of one table: ``size`` records accepted (the hash of the last,
    the Merkle tree's compact range), the last checkpoint it cosigned (0: none yet; the
    accepted records are the cosigned ones), whether it stopped cosigning the table (a
    rollback or a fork: ``halted`` says why) until an operator resets it; the newest verified
    checkpoint that waits for its records (``pending_note``, since ``pending_since``); when
    the table was last heard from (the witness's clock, POSIX seconds: a signed thing that
    moved); and the last signed status taken (its connection, seq and note)."""

    table: str
    size: int = 0
    last_hash: str = "0" * 64
    tree: bytes = b""  # CompactRange.to_bytes() of the ``size`` leaves
    cosigned_size: int = 0
    cosigned_root: bytes = b""
    cosigned_note: str = ""  # the cosigned note as published
    halted: str = ""  # "" while it cosigns
    pending_note: str = ""
    pending_since: float = 0.0
    last_heard: float = 0.0
    status_connection: int = -1  # -1: no status taken yet
    status_seq: int = 0
    status_note: str = ""

    @property
    def status_order(self) -> tuple[int, int]:
        return (self.status_connection, self.status_seq)


@dataclass(frozen=True, slots=True)
class CandidateRow:
    """A record kept as a candidate (its leaf and the checkpoint note it carried are read
    apart): seq, its hash (the next record's ``prev``), its ``prev``, kind, RFC 6962 leaf
    hash, the order it arrived in, its bytes, and when (the witness's clock)."""

    seq: int
    hash: str
    prev: str
    kind: str
    leaf_hash: bytes
    arrival: int
    size: int
    received: float


class Store(Protocol):
    """Durable, one writer. Every write happens inside ``transaction()``, which commits when the
    block ends (or rolls back on an exception); reads inside it see its writes. After a failed
    commit the store is not trusted again: the witness stops, and its next start reads what is
    really there (PostgreSQL's lesson from fsync failures)."""

    def transaction(self) -> AbstractContextManager[None]: ...

    def heads(self) -> dict[str, TableHead]: ...

    def put_head(self, head: TableHead) -> None: ...

    # accepted records

    def put_leaves(self, table: str, rows: Sequence[tuple[int, str, bytes, bytes]]) -> None:
        """(seq, kind, leaf, root of the tree of records 1..seq) for each new record."""
        ...

    def leaf(self, table: str, seq: int) -> bytes | None: ...

    def root(self, table: str, size: int) -> bytes | None:
        """The root of the tree of the table's first ``size`` records, if held."""
        ...

    def last_leaf_of_kind(self, table: str, kind: str) -> bytes | None: ...

    def leaves(self, table: str, start: int = 1) -> Iterator[tuple[int, bytes]]: ...

    def rows(self, table: str, start: int, stop: int) -> list[tuple[int, str, bytes]]:
        """(seq, kind, leaf) of the accepted records ``start``..``stop``."""
        ...

    def drop_leaves_after(self, table: str, size: int) -> None:
        """Forget the accepted records after ``size`` (a store of schema 1 held records no
        signed checkpoint covered: they go back to being candidates)."""
        ...

    # candidates

    def add_candidate(self, table: str, row: CandidateRow, leaf: bytes, note: str) -> None: ...

    def drop_candidates(self, table: str, keys: Sequence[tuple[int, str]]) -> None:
        """Forget the candidates (seq, hash)."""
        ...

    def drop_candidates_between(self, table: str, low: int, high: int) -> None:
        """Forget every candidate at seqs ``low``..``high``."""
        ...

    def candidate(self, table: str, seq: int, hash: str) -> tuple[bytes, str] | None:
        """A candidate's leaf and the checkpoint note it carried ("" none)."""
        ...

    def candidates(self) -> dict[str, list[CandidateRow]]:
        """Every table's candidates, in the order they arrived."""
        ...

    # cosignatures

    def add_cosignature(
        self, table: str, size: int, timestamp: int, note: str, tree: bytes = b""
    ) -> None:
        """The cosigned note published, and the compact range of the tree at ``size``."""
        ...

    def last_cosignature(self, table: str) -> tuple[int, int, str] | None:
        """(size, timestamp, note) of the table's latest cosignature."""
        ...

    def tree_at_or_below(self, table: str, size: int) -> tuple[int, bytes] | None:
        """(size, compact range) kept with the largest cosignature of at most ``size``."""
        ...

    # alerts

    def add_alert(self, alert: Alert, severity: Severity) -> StoredAlert: ...

    def alerts(self, table: str | None = None) -> list[StoredAlert]: ...

    def standing_alerts(self) -> list[StoredAlert]:
        """Every alert not cleared (the witness keeps those that stand)."""
        ...

    def recent_alerts(self, closed: int) -> list[StoredAlert]:
        """Every open alert and the last ``closed`` cleared or acknowledged ones, by id."""
        ...

    def alert_tables(self, kind: AlertKind) -> set[str]: ...

    def clear_alert(self, alert_id: int, time: str) -> None: ...

    def ack_alert(self, alert_id: int, user: str, time: str) -> StoredAlert | None:
        """Record that ``user`` acknowledged the alert at ``time`` (the first one only); the
        alert as it is now, or None when there is no such alert."""
        ...

    def reset_table(self, table: str, time: str, reason: str) -> TableHead | None:
        """Forget what is held of ``table``'s log (its records, candidates, tree and cosigned
        checkpoint; its alerts, cosignatures, status and silence clock stay), recording the
        reset; the head it had, or None."""
        ...

    def close(self) -> None: ...
