"""The check of the log's index ``by_kind`` (controller/audit/store.py) against the records
``paigow-controller verify-log`` reads: the index is not signed, and the start finds the newest
RNG commitment, cosignature, correction and the like through it, so a row deleted or altered
would have it find an older one. From the index's first seq (``by_kind_since``) on, every
record of a kind in store.BY_KIND must have exactly its (kind, seq) row, and every row must
name a record of that kind and seq in the live log. Retention (controller/audit/log.py's
drop) deletes the rows of the records it drops in the same commit, so no row may name a
record before the live log's first.

One pass: the verifier hands each live record's (seq, kind) over in order, as it reads it
anyway; the rows of each kind are read through the index's key (kind, seq) alongside, one
cursor a kind. The first thing wrong is kept and raised by :meth:`ByKindCheck.finish`, after
the records themselves verified (a record altered is named as such, not as its row).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from controller.audit.store import BY_KIND, BY_KIND_SINCE, by_kind_since
from controller.errors import LogIntegrityError

_NO_ROW = -1


class ByKindCheck:
    """Feed :meth:`see` every record of the live log in order, then call :meth:`finish`."""

    def __init__(self, db: sqlite3.Connection | Any, first: int, stop: int) -> None:
        """``db``: the snapshot verified; ``first``..``stop``: the live log's records."""
        self._db = db
        self._since = by_kind_since(db)
        self._first = first
        self._stop = stop
        self._rows: dict[str, Iterator[tuple[int]]] = {}
        self._head: dict[str, int] = {}  # each kind's next row not matched yet (_NO_ROW: none)
        self._finding: LogIntegrityError | None = None

    def see(self, seq: int, kind: str) -> None:
        if self._since is None or self._finding is not None or kind not in BY_KIND:
            return
        if seq < self._since:
            return  # a log from before by_kind: those records are looked for in the records
        row = self._next(kind)
        if row != _NO_ROW and row < seq:
            self._extra(kind, row)
        elif row == seq:
            self._head[kind] = self._advance(kind)
        else:
            self._found(seq, f"is a {kind} record without its by_kind row ({kind!r}, {seq})")

    def finish(self) -> None:
        """Raise the first thing found wrong, then look at the rows no record was matched
        with: those after the last record of their kind, and those of kinds not indexed."""
        if self._since is None:
            return
        if self._finding is None:
            for kind in sorted(BY_KIND):
                row = self._next(kind)
                if row != _NO_ROW:
                    self._extra(kind, row)
                    break
        if self._finding is None:
            self._unknown_kinds()
        if self._finding is not None:
            raise self._finding

    def _next(self, kind: str) -> int:
        if kind not in self._rows:
            self._rows[kind] = iter(
                self._db.execute("SELECT seq FROM by_kind WHERE kind = ? ORDER BY seq", (kind,))
            )
            self._head[kind] = self._advance(kind)
        return self._head[kind]

    def _advance(self, kind: str) -> int:
        row = next(self._rows[kind], None)
        if row is None:
            return _NO_ROW
        seq = row[0]
        if type(seq) is not int:
            self._found(None, f"by_kind has a row ({kind!r}, {seq!r}) that names no seq")
            return _NO_ROW
        return seq

    def _extra(self, kind: str, seq: int) -> None:
        """A row that no record of its kind was matched with."""
        found = None
        if self._first <= seq <= self._stop:
            found = self._db.execute("SELECT kind FROM records WHERE seq = ?", (seq,)).fetchone()
        if found is None:  # (a record retention moved to the archive has its row dropped)
            self._found(
                seq,
                f"is named by by_kind as a {kind} record, but the live log holds no record {seq}",
            )
        elif found[0] != kind:
            self._found(
                seq, f"is named by by_kind as a {kind} record, but it is a {found[0]} record"
            )
        else:  # its kind, before the index's first seq
            self._found(
                seq,
                f"has a by_kind row ({kind!r}, {seq}) before the index's first seq {self._since}",
            )

    def _unknown_kinds(self) -> None:
        """A row of a kind the index does not keep: one look-up a kind, through the key."""
        kind = ""
        while True:
            row = self._db.execute(
                "SELECT kind, seq FROM by_kind WHERE kind > ? ORDER BY kind, seq LIMIT 1", (kind,)
            ).fetchone()
            if row is None:
                return
            kind, seq = row
            if kind not in BY_KIND and kind != BY_KIND_SINCE:
                where = seq if type(seq) is int else None
                self._found(
                    where, f"is named by by_kind as a {kind!r} record, a kind it does not index"
                )
                return

    def _found(self, seq: int | None, message: str) -> None:
        if self._finding is None:
            self._finding = LogIntegrityError(seq, message)
