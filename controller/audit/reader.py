"""Reading the audit log: read-only opens of a state directory's log (or a backup's file),
and the queries every reader shares (the records in order, the latest context, the checkpoints).
Nothing here writes; none of it needs the log's key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from controller.audit.store import (
    DB_NAME,
    LATEST_CHECKPOINT,
    connect_read_only,
    read_head,
    storage_error,
    storage_errors,
)
from controller.core.log_state import GENESIS_PREV
from controller.core.note import Checkpoint, checkpoint_note
from controller.core.records import StoredRecord
from controller.errors import AuditLogError, LogDamagedError, LogIntegrityError

__all__ = [
    "DB_NAME",
    "GENESIS_PREV",
    "connect_read_only",
    "open_for_reading",
    "open_log_file",
    "peek_identity",
    "read_checkpoints",
    "read_latest_checkpoint",
    "read_latest_context",
    "read_records",
    "storage_errors",
]


def peek_identity(path: Path) -> tuple[str, str] | None:
    """The origin and key id a log at ``path`` records, or None when it holds no records."""
    if not path.exists():
        return None
    db = connect_read_only(path)
    try:
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
        (count,) = db.execute("SELECT count(*) FROM (SELECT 1 FROM records LIMIT 1)").fetchone()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    if not count:
        return None
    origin = bytes(meta.get("origin", b"?")).decode("utf-8", "replace")
    key_id = bytes(meta.get("key_id", b"unknown")).decode("ascii", "replace")
    return origin, key_id


def read_records(
    db: sqlite3.Connection,
    *,
    start: int = 1,
    stop: int | None = None,
    on_bad: Callable[[LogIntegrityError], None] | None = None,
) -> Iterator[StoredRecord]:
    """The stored records from ``start`` (to ``stop``), in order. A row that is not a stored
    record raises :class:`LogIntegrityError`, or, given ``on_bad``, is handed to it and left
    out (a reader that goes past a damaged record, controller/audit/damage.py)."""
    query = "SELECT seq, kind, leaf FROM records WHERE seq >= ?"
    params: tuple[int, ...] = (start,)
    if stop is not None:
        query += " AND seq <= ?"
        params = (start, stop)
    try:
        for seq, kind, leaf in db.execute(query + " ORDER BY seq", params):
            bad = None
            if not isinstance(seq, int) or not isinstance(kind, str):
                bad = LogIntegrityError(
                    seq if isinstance(seq, int) else None,
                    f"a row has a sequence number {seq!r} and a kind {kind!r}",
                )
            elif not isinstance(leaf, bytes):
                bad = LogIntegrityError(seq, f"its leaf is stored as {type(leaf).__name__}")
            if bad is None:
                yield StoredRecord(seq, kind, leaf)
            elif on_bad is None:
                raise bad
            else:
                on_bad(bad)
    except sqlite3.Error as exc:
        raise storage_error(exc, "cannot read the records") from exc


def read_latest_context(db: sqlite3.Connection, path: Path | str) -> tuple[int, bytes] | None:
    """The context stored with the last step committed to the log ``db`` reads (the head's; a
    log from before the head: its last record's), and its record's seq; None when none is."""
    try:
        head = read_head(db)
        row: tuple[object, object] | None = (
            (head[3], head[4])
            if head is not None
            else db.execute(
                "SELECT seq, context FROM records WHERE context IS NOT NULL"
                " ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        )
    except sqlite3.Error as exc:
        raise storage_error(exc, f"cannot read {path}") from exc
    if row is None or not isinstance(row[0], int):
        return None
    seq, blob = row[0], row[1]
    if not isinstance(blob, bytes):
        raise LogIntegrityError(int(seq), "the stored context is not bytes")
    return int(seq), blob


def read_latest_checkpoint(db: sqlite3.Connection) -> str | None:
    """The signed checkpoint of the whole log: kept in the head row, re-signed with every
    commit (a log from before the head keeps it with its last record, an older one in the
    ``checkpoints`` row of size 0). None when it does not name the last record: the log was
    cut back."""
    try:
        head = read_head(db)
        if head is not None:
            last = db.execute("SELECT max(seq) FROM records").fetchone()
            if last is None or last[0] != head[0]:
                return None
            origin = db.execute("SELECT value FROM meta WHERE name = 'origin'").fetchone()
            name = "" if origin is None else bytes(origin[0]).decode("utf-8", "replace")
            return checkpoint_note(Checkpoint(name, head[0], head[2]), name, head[1])
        row = db.execute("SELECT note FROM records ORDER BY seq DESC LIMIT 1").fetchone()
        if row is not None and row[0] is not None:
            return str(row[0])
        if (
            row is not None
            and db.execute("SELECT 1 FROM records WHERE note IS NOT NULL LIMIT 1").fetchone()
        ):
            return None  # a newer log whose last record lost its checkpoint
        legacy = db.execute(
            "SELECT note FROM checkpoints WHERE size = ?", (LATEST_CHECKPOINT,)
        ).fetchone()
    except sqlite3.Error as exc:
        raise storage_error(exc, "cannot read the latest checkpoint") from exc
    return None if legacy is None else str(legacy[0])


def read_checkpoints(db: sqlite3.Connection) -> dict[int, str]:
    try:
        rows = db.execute("SELECT size, note FROM checkpoints WHERE size > 0").fetchall()
    except sqlite3.Error as exc:
        raise storage_error(exc, "cannot read the checkpoints") from exc
    checkpoints = {}
    for size, note in rows:
        if not isinstance(size, int) or not isinstance(note, str):
            raise LogIntegrityError(None, f"a checkpoint row ({size!r}) is not a size and a note")
        checkpoints[size] = note
    return checkpoints


def open_for_reading(state_dir: Path | str) -> sqlite3.Connection:
    """A read-only connection to the log in ``state_dir`` (verify, recall, export): no lock,
    no write, and it works on read-only media."""
    return open_log_file(Path(state_dir) / DB_NAME)


def open_log_file(path: Path) -> sqlite3.Connection:
    """A read-only connection to the log in the file ``path``: a state directory's
    ``audit.db``, or a backup of it (``paigow-controller backup``)."""
    try:
        is_file = path.is_file()
    except OSError as exc:  # a name too long, a loop of links
        raise AuditLogError(f"audit log: {path}: {exc.strerror or exc}") from None
    if not is_file:
        raise AuditLogError(f"audit log: no log at {path}")
    connection = connect_read_only(path)
    try:
        connection.execute("SELECT count(*) FROM records").fetchone()
        columns = connection.execute("PRAGMA table_info(records)").fetchall()
    except sqlite3.Error as exc:
        connection.close()
        raise storage_error(exc, f"cannot read {path}") from exc
    # (cid, name, type, notnull, default, pk): a schema whose text was altered so that seq is
    # no longer the table's integer key reads every seq as NULL, and a reader would find an
    # empty log where there is a damaged one
    if not any(c[1] == "seq" and str(c[2]).upper() == "INTEGER" and c[5] == 1 for c in columns):
        connection.close()
        raise LogDamagedError(
            f"audit log: {path}: the records table's schema is damaged (seq is not its integer"
            " key): the log cannot be read by seq"
        )
    return connection
