"""Reading the audit log: read-only opens of a state directory's log (or a backup's file),
and the queries every reader shares (the records in order, the latest context, the checkpoints).
Nothing here writes; none of it needs the log's key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from controller.audit.store import (
    BY_KIND,
    DB_NAME,
    LATEST_CHECKPOINT,
    by_kind_since,
    connect_read_only,
    read_head,
    storage_error,
    storage_errors,
)
from controller.core.log_state import GENESIS_PREV
from controller.core.note import Checkpoint, checkpoint_note
from controller.core.records import StoredRecord
from controller.core.snapshot import unpack_context
from controller.errors import AuditLogError, LogDamagedError, LogIntegrityError, SnapshotError

__all__ = [
    "DB_NAME",
    "GENESIS_PREV",
    "connect_read_only",
    "holds",
    "indexed_from",
    "indexes_every_record",
    "newest_of",
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


MAX_SEQ_BOUND = 2**63 - 1  # above every seq SQLite can hold
# A row of the records table as SQLite gives it: (seq, kind, leaf), types unchecked.
Row = tuple[Any, Any, Any]


def newest_of(
    db: sqlite3.Connection, kinds: Collection[str], *, limit: int, within: int | None = None
) -> list[Row]:
    """The newest ``limit`` records of ``kinds`` (oldest first) among the last ``within``
    records (None: the whole live log), as (seq, kind, leaf) rows. Kinds that are all in
    ``by_kind`` (store.BY_KIND) are read through it, at a cost that does not grow with the log;
    a log from before it is looked through backwards for the records it has no row for (as
    any other kinds are: a look back that stops at the ``limit``-th found)."""
    names = sorted(set(kinds))
    if not names or limit <= 0:
        return []
    (size,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
    low = 0 if within is None else int(size) - within  # the records after it are looked at
    since = by_kind_since(db) if set(names) <= BY_KIND else None
    rows: list[Row] = []
    high = int(size)
    if since is not None:
        rows = _by_kind(db, names, limit=limit, low=low, high=high)
        high = min(high, since - 1)  # the records before the index are looked through
    if len(rows) < limit and high > low:
        marks = ",".join("?" * len(names))
        rows += db.execute(
            f"SELECT seq, kind, leaf FROM records WHERE kind IN ({marks})"  # noqa: S608 - only ? marks
            " AND seq > ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
            (*names, low, high, limit - len(rows)),
        ).fetchall()
    return rows[::-1]


def holds(db: sqlite3.Connection, kind: str, fragment: bytes) -> bool:
    """Whether a record of ``kind`` holds these bytes in its canonical text: through
    ``by_kind`` for its kinds (the records before it, in a log that had them, looked through
    as any other kind's are: the whole log)."""
    since = by_kind_since(db) if kind in BY_KIND else None
    if since is not None:
        row = db.execute(
            "SELECT 1 FROM by_kind b JOIN records r ON r.seq = b.seq"
            " WHERE b.kind = ? AND r.kind = ? AND instr(r.leaf, ?) > 0 LIMIT 1",
            (kind, kind, fragment),
        ).fetchone()
        if row is not None or since <= 1:
            return row is not None
    row = db.execute(
        "SELECT 1 FROM records WHERE kind = ? AND seq < ? AND instr(leaf, ?) > 0 LIMIT 1",
        (kind, since or MAX_SEQ_BOUND, fragment),
    ).fetchone()
    return row is not None


def indexed_from(db: sqlite3.Connection, kinds: Collection[str], start: int) -> list[Row]:
    """The records of ``kinds`` (all in store.BY_KIND) from ``start`` on, in order, through
    ``by_kind`` (a log that :func:`indexes_every_record`): as many reads as records found."""
    seqs: list[int] = []
    for name in sorted(set(kinds)):
        seqs += [
            seq
            for (seq,) in db.execute(
                "SELECT seq FROM by_kind WHERE kind = ? AND seq >= ?", (name, start)
            )
        ]
    rows: list[Row] = []
    for seq in sorted(seqs):
        row = db.execute("SELECT seq, kind, leaf FROM records WHERE seq = ?", (seq,)).fetchone()
        if row is not None and row[1] in kinds:
            rows.append(row)
    return rows


def indexes_every_record(db: sqlite3.Connection) -> bool:
    """Whether ``by_kind`` names every record of store.BY_KIND the live log holds: a log made
    with it, or one whose records from before it were all moved to the archive."""
    since = by_kind_since(db)
    if since is None:
        return False
    (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
    return first is None or since <= first


def _by_kind(
    db: sqlite3.Connection, names: list[str], *, limit: int, low: int, high: int
) -> list[Row]:
    """The newest ``limit`` records of ``names`` with ``low < seq <= high`` that ``by_kind``
    names, newest first; a row there whose record is gone (archived) or of another kind (a
    damaged log) is passed over for the one before it."""
    rows: list[Row] = []
    for name in names:
        found = 0
        for (seq,) in db.execute(
            "SELECT seq FROM by_kind WHERE kind = ? AND seq > ? AND seq <= ? ORDER BY seq DESC",
            (name, low, high),
        ):
            row = db.execute("SELECT seq, kind, leaf FROM records WHERE seq = ?", (seq,)).fetchone()
            if row is not None and row[1] == name:
                rows.append(row)
                found += 1
                if found == limit:
                    break
    rows.sort(key=lambda row: int(row[0]), reverse=True)
    return rows[:limit]


def read_latest_context(db: sqlite3.Connection, path: Path | str) -> tuple[int, bytes] | None:
    """The context stored with the last step committed to the log ``db`` reads (the head's; a
    log from before the head: its last record's), and its record's seq; None when none is.
    The context is the encoder's (``encode_context``): the head keeps it compressed, and it
    is inflated here (a log from before that keeps it as it is)."""
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
    try:  # the head keeps it compressed (controller/core/snapshot.py, pack_context)
        return int(seq), unpack_context(blob)
    except SnapshotError as exc:
        raise LogIntegrityError(int(seq), f"the stored context: {exc}") from None


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
        _check_records_table(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def _check_records_table(connection: sqlite3.Connection, path: Path) -> None:
    """That ``path`` is a log SQLite can read, at a cost that does not grow with the log: the
    schema parsed (its first statement does that), the records table there, its b-tree's root
    and first leaf (LIMIT 1) and, once seq is known to be its integer key, its last leaf
    (``max(seq)`` walks the rowid b-tree's right edge) read. A page damaged further in is
    found by whoever reads it (verify-log, export, a recall reaching back to it), as a record
    damaged there is; a full ``count(*)`` here read the whole table at every open."""
    try:
        connection.execute("SELECT 1 FROM records LIMIT 1").fetchone()
        columns = connection.execute("PRAGMA table_info(records)").fetchall()
    except sqlite3.Error as exc:
        raise storage_error(exc, f"cannot read {path}") from exc
    # (cid, name, type, notnull, default, pk): a schema whose text was altered so that seq is
    # no longer the table's integer key reads every seq as NULL, and a reader would find an
    # empty log where there is a damaged one
    if not any(c[1] == "seq" and str(c[2]).upper() == "INTEGER" and c[5] == 1 for c in columns):
        raise LogDamagedError(
            f"audit log: {path}: the records table's schema is damaged (seq is not its integer"
            " key): the log cannot be read by seq"
        )
    try:
        connection.execute("SELECT max(seq) FROM records").fetchone()
    except sqlite3.Error as exc:
        raise storage_error(exc, f"cannot read {path}") from exc
