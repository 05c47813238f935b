"""The check of the running totals (controller/audit/totals.py) against the records
``paigow-controller verify-log`` reads: the rows are not signed, and ``meters`` and
``dice-stats`` start from the newest of them, so a row altered would have them print numbers
the records do not give.

One pass, as index_check.py checks ``by_kind``: the verifier hands over each record it has
decoded (the archive's first, then the live log's), in order, and the records of the kinds the
totals count are counted here with the writer's own functions (controller/core/meters.py
``counted``, dice_stats.py ``DiceFold.take``); as the pass crosses a row's size the row must
hold that count: its meters in their canonical form, and its dice state (or none, once the
fold met a record it cannot count, as the writer keeps none from there). The rows are read
through their key alongside, one cursor, never a second pass over the records.

Which rows there must be: the writer keeps one with each commit that keeps the Merkle frontier
(the checkpoints kept with a frontier), from the log's creation (the row at size 0) on. So a
row at a size where no checkpoint keeps the frontier is extra, a checkpoint kept with its
frontier, from the first row the live log holds on, without its row is one deleted, and a log
that starts at its first record and holds rows must hold the creation's. Retention's
checkpoint at an archive's end (``exempt``) is kept by the drop, not by a commit: it has no row
of its own. A log from before the totals (no table, or no row) is not checked: its reports are
counted from its records.

The first thing wrong is kept and raised by :meth:`TotalsCheck.finish`, after the records
themselves verified (a record altered is named as such, not as the row after it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any

from controller.audit import totals
from controller.audit.dice_stats import READ_FIELDS, READ_KINDS, DiceTally
from controller.core.meters import Meters, counted
from controller.errors import LogIntegrityError

# the kinds the totals count (every other record leaves them as they are)
KINDS = frozenset(str(kind) for kind in totals.METER_KINDS | READ_KINDS)
# the fields of a record's data that the meters' count reads (controller/core/meters.py
# ``counted``): a no roll's reason, whether the lid opened, the tamper loop closed, service
# mode was entered; the other kinds it counts by their kind alone
_METER_FIELDS = {
    "no_roll": ("reason",),
    "lid": ("opened",),
    "tamper_loop": ("closed",),
    "service_mode": ("entered",),
}
# what the totals read of each kind's data, and nothing else (``counted_data``)
FIELDS: dict[str, tuple[str, ...]] = {
    kind: (*_METER_FIELDS.get(kind, ()), *READ_FIELDS.get(kind, ())) for kind in KINDS
}
_END = None
_NEVER = float("inf")  # no row or frontier left to hold: nothing is due


class TotalsCheck:
    """Feed :meth:`see` every record of the log from its first, in order (the records of
    :data:`KINDS` count, the others may be left out), then call :meth:`finish`."""

    def __init__(
        self,
        db: sqlite3.Connection | Any,
        *,
        first: int,
        exempt: frozenset[int] = frozenset(),
    ) -> None:
        """``db``: the snapshot verified; ``first``: the live log's first record;
        ``exempt``: the archives' ends (their checkpoints are retention's)."""
        self._finding: LogIntegrityError | None = None
        self._exempt = exempt
        self._meters = Meters()
        self._dice: DiceTally | None = DiceTally()
        self._started = False  # a row met: from here on, each frontier kept has its row
        self._rows = _cursor(db, "SELECT size, meters, dice FROM totals ORDER BY size")
        self._row: tuple[Any, ...] | None = self._next_row()
        self._active = self._row is not None  # a log from before the totals has no row
        self._frontiers = _cursor(
            db, "SELECT size FROM checkpoints WHERE frontier IS NOT NULL ORDER BY size"
        )
        self._frontier: int | None = self._next_frontier() if self._active else _END
        if self._active and first <= 1 and self._row is not None and self._row[0] != 0:
            self._found(
                None, "the totals lack the row of the log's creation (size 0): rows deleted"
            )
        self._due: int | float = _NEVER  # the size of the next row or frontier to hold
        self._scheduled()

    @property
    def active(self) -> bool:
        """Whether the log keeps totals to check (and nothing was found wrong yet)."""
        return self._active and self._finding is None

    def see(self, seq: int, kind: str, data: Mapping[str, Any]) -> None:
        """Record ``seq`` of ``kind`` (its data ``data``, or only its :data:`FIELDS`: what
        ``counted_data`` keeps), after every record before it."""
        if kind not in KINDS or self._finding is not None or not self._active:
            return
        if seq > self._due:  # a row or a frontier kept before this record: held first
            self._hold(seq - 1)
        if kind in totals.METER_KINDS:
            self._meters = counted(self._meters, kind, data)
        if self._dice is not None and kind in READ_KINDS:
            try:
                self._dice.take(seq, kind, data)
            except LogIntegrityError:
                self._dice = None  # the writer keeps no dice state past it either

    def finish(self, size: int) -> None:
        """The rows up to the log's last record ``size`` held against the count, then any
        beyond it; raise the first thing found wrong."""
        if self.active:
            self._hold(size)
        if self.active and self._row is not None:
            self._found(_seq(self._row[0]), "has a row of the totals beyond the log's end")
        if self._finding is not None:
            raise self._finding

    def _hold(self, upto: int) -> None:
        """Every row and every frontier kept at ``upto`` or before, against the count as it
        stands (no record counted since them)."""
        while self.active:
            row, frontier = self._row, self._frontier
            at_row = row is not None and type(row[0]) is int and row[0] <= upto
            if row is not None and type(row[0]) is not int:
                self._found(None, f"the totals have a row at {row[0]!r}, not a size")
                return
            if at_row and row is not None and (frontier is None or row[0] <= frontier):
                self._held(row, kept=row[0] == frontier)
                if row[0] == frontier:
                    self._frontier = self._next_frontier()
                self._row = self._next_row()
                self._started = True
            elif frontier is not None and frontier <= upto:
                if self._started and frontier not in self._exempt:
                    self._found(
                        frontier,
                        "is kept with the Merkle frontier, without its row of the totals:"
                        " a row deleted",
                    )
                self._frontier = self._next_frontier()
            else:
                self._scheduled()
                return

    def _scheduled(self) -> None:
        """When :meth:`see` must next hold the rows: at the next row's or frontier's size."""
        sizes = [
            at if type(at) is int else -1  # a row not at a size: named at the next record
            for at in (None if self._row is None else self._row[0], self._frontier)
            if at is not None
        ]
        self._due = min(sizes, default=_NEVER)

    def _held(self, row: tuple[Any, ...], *, kept: bool) -> None:
        size, meters, dice = row
        if not kept and size != 0 and size not in self._exempt:
            self._found(size, "has a row of the totals where no commit kept the frontier")
        elif meters != totals.encode(self._meters):
            self._found(size, "its row of the meters' totals is not the count of the records")
        elif dice != (None if self._dice is None else self._dice.fold().encode()):
            self._found(size, "its row's dice state is not the counts of the records")

    def _next_row(self) -> tuple[Any, ...] | None:
        row = next(self._rows, None)
        return None if row is None else tuple(row)

    def _next_frontier(self) -> int | None:
        row = next(self._frontiers, None)
        if row is None:
            return _END
        if type(row[0]) is not int:
            self._found(None, f"a checkpoint kept with the frontier is at {row[0]!r}")
            return _END
        return int(row[0])

    def _found(self, seq: int | None, message: str) -> None:
        if self._finding is None:
            self._finding = LogIntegrityError(seq, message)


def counted_data(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """What the totals read of a record of ``kind`` whose data is ``data``: its :data:`FIELDS`
    (the parallel verifier's workers hand back these, not the whole data: parallel.py)."""
    return {name: data[name] for name in FIELDS.get(kind, ()) if name in data}


def _seq(value: object) -> int | None:
    return value if type(value) is int else None


def _cursor(db: sqlite3.Connection | Any, query: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query``; none when the log has no totals table (a log from before)."""
    try:
        return iter(db.execute(query))
    except sqlite3.OperationalError as exc:
        if "no such" in str(exc):  # table, or column
            return iter(())
        raise
