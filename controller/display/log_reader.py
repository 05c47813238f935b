"""What the table display and the result feed read back from the audit log.

The display is written to by the control thread (``show``) but catches clients up from the log:
a page that reconnects, or a table-management system that asks for the records it missed.
``controller.ports.LogReader`` is the little it needs; :class:`SqliteLogReader` implements it
over the audit log's SQLite database with its own read-only connections, so the readers never
touch the control thread's connection (``controller.audit.log.AuditLog`` is not thread-safe by
design) and WAL lets them read while the log is written.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

from controller.audit.log import (
    DB_NAME,
    AuditLog,
    connect_read_only,
    read_latest_checkpoint,
    read_records,
)
from controller.audit.reader import newest_of
from controller.core.digits import MAX_SEQ, parse_bounded_int
from controller.core.records import StoredRecord
from controller.errors import AuditLogError, NumberError
from controller.ports import LoggedCheckpoint

SEARCH_BACK = 100_000  # ``latest_of`` looks no further back than this many records


class SqliteLogReader:
    """``LogReader`` over the audit log's database file, with read-only connections kept open
    in a small pool (a connection is not shared by two threads at once), so that a client
    catching up costs a query, not an open."""

    def __init__(self, path: Path | str, *, pool: int = 4) -> None:
        self.path = Path(path)
        self._idle: list[sqlite3.Connection] = []
        self._pool = pool
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def of(cls, log: AuditLog) -> SqliteLogReader:
        return cls(log.path)

    @classmethod
    def in_state_dir(cls, state_dir: Path | str) -> SqliteLogReader:
        return cls(Path(state_dir) / DB_NAME)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._idle.pop() if self._idle else None
        if db is None:
            if not self.path.exists():
                raise AuditLogError(f"audit log: no log at {self.path}")
            db = connect_read_only(self.path)
        healthy = False
        try:
            yield db
            healthy = True
        except sqlite3.Error as exc:
            raise AuditLogError(f"audit log: cannot read {self.path}: {exc}") from exc
        finally:
            with self._lock:
                keep = healthy and not self._closed and len(self._idle) < self._pool
                if keep:
                    self._idle.append(db)
            if not keep:
                db.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for db in idle:
            db.close()

    def size(self) -> int:
        with self._db() as db:
            (last,) = db.execute("SELECT max(seq) FROM records").fetchone()
        return 0 if last is None else int(last)

    def records_after(self, seq: int, *, limit: int) -> list[StoredRecord]:
        """Up to ``limit`` records from ``seq + 1`` on; from the live log's first when the
        records asked for were moved to the archive (retention, controller/audit/archive.py):
        a client catching up then sees the sequence numbers jump, and never waits on records
        the live log no longer holds."""
        with self._db() as db:
            (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
            start = seq + 1 if first is None else max(seq + 1, int(first))
            return list(read_records(db, start=start, stop=start + limit - 1))

    def latest_of(self, kinds: Collection[str], *, limit: int) -> list[StoredRecord]:
        names = sorted(kinds)
        if not names or limit <= 0:
            return []
        # The rare kinds through the log's index of them; others (a round's) by walking the
        # primary key backwards to the ``limit``-th found, no further back than SEARCH_BACK
        # records (a table that never drew has no RNG commitment)
        with self._db() as db:
            rows = newest_of(db, names, limit=limit, within=SEARCH_BACK)
        return [StoredRecord(int(s), str(k), bytes(leaf)) for s, k, leaf in rows]

    def latest_checkpoint(self) -> LoggedCheckpoint | None:
        """The signed checkpoint of the whole log (kept with its last record)."""
        with self._db() as db:
            note = read_latest_checkpoint(db)
        size = None if note is None else _tree_size(note)
        return None if note is None or size is None else LoggedCheckpoint(size, note)


def _tree_size(note: str) -> int | None:
    """C2SP tlog-checkpoint: the note's body is origin, tree size, root hash, one a line."""
    lines = note.split("\n")
    if len(lines) < 3:
        return None
    try:
        return parse_bounded_int(lines[1], high=MAX_SEQ, what="checkpoint size")
    except NumberError:
        return None
