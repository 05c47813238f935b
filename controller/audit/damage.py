"""Reading past a damaged record: what ``export``, ``recall``, ``dice-stats`` and ``meters``
do when a record of the log is not what was written (a flipped bit on the card, an edit).

Each record a reader takes is checked by itself with verify-log's own per-record check
(checks.py ``decode_fields``: canonical, its fields and nothing else, stored at its seq with its
kind, a time and an object of data), and, where the reader reads consecutive records, against
the hash chain: the next record's ``prev`` must be its hash, and a missing sequence number is a
record deleted. Which of two records the chain says was altered is told by the record after
them, as verify-log tells it. A damaged record is named (its seq and what is wrong), left out,
and the reader goes on with the rest; the command exits 1 at the end. verify-log stays the
check of the whole log (signatures, checkpoints, results recomputed): a reader only refuses to
build on a record that is not sound by itself or by its neighbours.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from controller.audit.checks import Entry, decode_fields
from controller.core import canonical
from controller.core.records import StoredRecord
from controller.errors import LogIntegrityError

MAX_NAMED = 100  # the damaged records a report lists by name (the rest are counted)


@dataclass
class Damage:
    """The damaged records a reader met and went past. ``strict``: the first one is raised
    instead (a caller that has no way to say it went past one)."""

    strict: bool = False
    on_found: Callable[[LogIntegrityError], None] | None = None
    found: list[LogIntegrityError] = field(default_factory=list)
    count: int = 0
    _named: set[int] = field(default_factory=set)  # each record once, however often read

    def note(self, exc: LogIntegrityError) -> None:
        if self.strict:
            raise exc
        if exc.record is not None:
            if exc.record in self._named:
                return
            self._named.add(exc.record)
        self.count += 1
        if len(self.found) < MAX_NAMED:
            self.found.append(exc)
        if self.on_found is not None:
            self.on_found(exc)

    def __bool__(self) -> bool:
        return self.count > 0

    def as_record(self) -> list[dict[str, Any]]:
        """The records named, for a report's ``damaged`` field."""
        return [{"record": exc.record, "error": str(exc)} for exc in self.found]


def sound_rows(
    rows: Iterable[StoredRecord], damage: Damage, *, chained: bool = True
) -> Iterator[StoredRecord]:
    """The rows that pass the per-record check (and, ``chained``: whose links to the records
    next to them hold), in order; each other one named in ``damage`` and left out. With
    ``chained`` the rows must be consecutive records (a gap is named as records deleted)."""
    window: deque[Entry] = deque()
    expected: int | None = None
    # A record of a shape met before is checked as verify-log checks it, without being
    # decoded (canonical.Shapes): the per-record check costs a match, not a JSON decode.
    shapes = canonical.Shapes()
    for row in rows:
        if chained and expected is not None and row.seq != expected:
            yield from _flush(window, damage)
            if row.seq > expected:
                damage.note(
                    LogIntegrityError(
                        expected, f"is missing (the next stored record is {row.seq}): deleted"
                    )
                )
        expected = row.seq + 1
        try:
            entry = decode_fields(row.seq, row.kind, row.leaf, shapes)
        except LogIntegrityError as exc:
            damage.note(exc)
            yield from _flush(window, damage)
            continue
        if not chained:
            yield row
            continue
        window.append(entry)
        if len(window) == 3:
            yield from _linked(window, damage)
    yield from _flush(window, damage)


def _linked(window: deque[Entry], damage: Damage) -> Iterator[StoredRecord]:
    """The first of three consecutive sound records, if the chain vouches for it."""
    cur, nxt, after = window[0], window[1], window[2]
    if nxt.prev == cur.hash:
        window.popleft()
        yield _row(cur)
    elif after.prev == nxt.hash:  # an intact nxt is vouched for by the one after it
        window.popleft()
        damage.note(
            LogIntegrityError(
                cur.seq, f"altered: its hash is not the prev record {nxt.seq} carries"
            )
        )
    else:
        window.popleft()
        window.popleft()
        yield _row(cur)
        damage.note(
            LogIntegrityError(
                nxt.seq,
                f"altered: its prev is not the hash of record {cur.seq}, and its hash is not"
                f" the prev record {after.seq} carries",
            )
        )


def _flush(window: deque[Entry], damage: Damage) -> Iterator[StoredRecord]:
    """The records left when no record after them can be read: a broken link between the
    last two names the first (the second may be the one altered: the message says so)."""
    while window:
        cur = window.popleft()
        if window and window[0].prev != cur.hash:
            damage.note(
                LogIntegrityError(
                    cur.seq,
                    f"its hash is not the prev record {window[0].seq} carries: one of the two"
                    " was altered",
                )
            )
            continue
        yield _row(cur)


def _row(entry: Entry) -> StoredRecord:
    return StoredRecord(entry.seq, entry.kind, entry.leaf)
