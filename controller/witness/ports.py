"""The witness's seams, on one page: where it keeps what it accepted (:class:`Store`), and what
it tells the floor's dashboard (:class:`FloorSink`).

Both are called from the witness's one control thread only (service.py). A FloorSink that a
dashboard reads from another thread does its own locking (controller/witness/floor.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from controller.fleet.protocol import Alert, Status

# --- the floor --------------------------------------------------------------------------------


class FloorSink(Protocol):
    """What the witness learns, as it accepts it: a record verified and kept (its export line,
    already checked), a table's status, a checkpoint cosigned (its size, and the cosignature's
    time, POSIX seconds), an alert raised."""

    def apply_record(self, table: str, line: dict[str, Any]) -> None: ...

    def apply_status(self, table: str, status: Status) -> None: ...

    def apply_cosigned(self, table: str, size: int, time: int) -> None: ...

    def apply_alert(self, alert: Alert) -> None: ...


class NoFloor:
    """No dashboard: everything is dropped."""

    def apply_record(self, table: str, line: dict[str, Any]) -> None:
        return None

    def apply_status(self, table: str, status: Status) -> None:
        return None

    def apply_cosigned(self, table: str, size: int, time: int) -> None:
        return None

    def apply_alert(self, alert: Alert) -> None:
        return None


# --- the store --------------------------------------------------------------------------------


@dataclass
class TableHead:
    """What the witness holds of one table: ``size`` records (the hash of the last, the Merkle
    tree's compact range), the last checkpoint it cosigned (0: none yet) and whether it stopped
    cosigning the table (a rollback or a fork: ``halted`` says why) until an operator resets it."""

    table: str
    size: int = 0
    last_hash: str = "0" * 64
    tree: bytes = b""  # CompactRange.to_bytes() of the ``size`` leaves
    cosigned_size: int = 0
    cosigned_root: bytes = b""
    cosigned_note: str = ""  # the cosigned note as published
    halted: str = ""  # "" while it cosigns


class Store(Protocol):
    """Durable, one writer. Every write happens inside ``transaction()``, which commits when the
    block ends (or rolls back on an exception); reads inside it see its writes. After a failed
    commit the store is not trusted again: the witness stops, and its next start reads what is
    really there (PostgreSQL's lesson from fsync failures)."""

    def transaction(self) -> AbstractContextManager[None]: ...

    def heads(self) -> dict[str, TableHead]: ...

    def put_head(self, head: TableHead) -> None: ...

    def put_leaves(self, table: str, rows: Sequence[tuple[int, str, bytes, bytes]]) -> None:
        """(seq, kind, leaf, root of the tree of records 1..seq) for each new record."""
        ...

    def leaf(self, table: str, seq: int) -> bytes | None: ...

    def root(self, table: str, size: int) -> bytes | None:
        """The root of the tree of the table's first ``size`` records, if held."""
        ...

    def last_leaf_of_kind(self, table: str, kind: str) -> bytes | None: ...

    def leaves(self, table: str, start: int = 1) -> Iterator[tuple[int, bytes]]: ...

    def add_cosignature(self, table: str, size: int, timestamp: int, note: str) -> None: ...

    def add_alert(self, alert: Alert) -> None: ...

    def alerts(self, table: str | None = None) -> list[Alert]: ...

    def reset_table(self, table: str, time: str, reason: str) -> TableHead | None:
        """Forget what is held of ``table`` (its records, tree and cosigned checkpoint; its
        alerts and cosignatures stay), recording the reset; the head it had, or None."""
        ...

    def close(self) -> None: ...
