"""The audit log's SQLite store: its file, its schema, its connections, its storage errors.

The writer's connection (:func:`connect`) uses WAL with ``synchronous=FULL`` and explicit
transactions; a reader's (:func:`connect_read_only`) cannot write, and works on read-only media.
A new log has 512-byte pages (issue 13): a commit writes its few small rows to the WAL rather than
whole 4 KiB pages. SQLite's errors become :class:`AuditLogError` (a full disk
:class:`StorageFull`, a damaged file :class:`LogDamagedError`). Besides the records, their
checkpoints, the log's identity (``meta``) and its head, ``by_kind`` indexes the records of the
rare kinds whose newest are looked up (:data:`BY_KIND`; issue 31: nothing at start grows with
the log); it is not signed, and verify-log does not read it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from controller.core.records import RecordKind
from controller.errors import AuditLogError, LogDamagedError, LogIntegrityError, StorageFull

DB_NAME = "audit.db"
FORMAT = "paigow-audit-log/1"
LATEST_CHECKPOINT = 0  # a log from before the running checkpoint was kept with its last row
PAGE_SIZE = 512

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    leaf BLOB NOT NULL,
    context BLOB,
    frontier BLOB,
    note TEXT
);
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    context_seq INTEGER,
    context BLOB,
    root BLOB NOT NULL,
    signature BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS by_kind (
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (kind, seq)
) WITHOUT ROWID;
"""

# The kinds whose newest records are looked up (the display's RNG commitment, cosignature,
# corrections and voids; the start's RNG sessions and program identity; the status), and are
# rare, or of RNG rounds only: each record of one of them also goes in ``by_kind`` in its
# commit (one small row), so that a look-up reads an index, never the log backwards. The
# records of every round are not kept there (a look back to the newest of them stops within
# a round or two).
BY_KIND: frozenset[str] = frozenset(
    {
        RecordKind.RNG_COMMIT,
        RecordKind.RNG_DRAW,  # one an RNG round; the start reads its sessions' back
        RecordKind.RNG_REVEAL,
        RecordKind.RNG_INTERRUPTED,
        RecordKind.COSIGNED,
        RecordKind.SOFTWARE_CHECK,
        RecordKind.RESULT_CORRECTED,
        RecordKind.VOID,
        RecordKind.RESULT_VOIDED,
        RecordKind.CONFIG_LOADED,
        RecordKind.POWER_ON,
        RecordKind.CLOCK_STATUS,
        RecordKind.ROLLBACK_EVIDENCE,
    }
)
# ``by_kind``'s row of this (no record's) kind holds the first seq it keeps: 1 for a log made
# with it, the next record's for a log that had records before it (those are looked for in
# the records themselves, as before).
BY_KIND_SINCE = ""
# The records a log from before ``by_kind`` has indexed at its first open (its newest): the
# longest bounded look back of the readers (the display's SEARCH_BACK, status's LOOK_BACK).
BY_KIND_BACKFILL = 100_000


def storage_error(exc: BaseException, doing: str) -> AuditLogError:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_FULL:
        return StorageFull(f"audit log: {doing}: storage is full ({exc})")
    if isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return LogDamagedError(f"audit log: {doing}: the database is damaged ({exc})")
    if isinstance(exc, OSError) and exc.errno is not None and exc.errno == 28:  # ENOSPC
        return StorageFull(f"audit log: {doing}: storage is full ({exc})")
    return AuditLogError(f"audit log: {doing}: {exc}")


@contextlib.contextmanager
def storage_errors(doing: str) -> Iterator[None]:
    """SQLite's errors inside as :class:`AuditLogError` (a damaged database as
    :class:`LogDamagedError`): a reader's one line, never an internal error."""
    try:
        yield
    except sqlite3.Error as exc:
        raise storage_error(exc, doing) from exc


def connect(path: Path) -> sqlite3.Connection:
    """The writer's connection: WAL, synchronous=FULL, explicit transactions."""
    try:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise storage_error(exc, f"cannot open {path}") from exc
    try:
        # A new log's pages are small: each commit rewrites its last pages in the WAL, and
        # smaller pages mean fewer bytes written to the card per record (issue 13). An
        # existing log keeps the page size it was created with.
        connection.execute(f"PRAGMA page_size={PAGE_SIZE}")
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise AuditLogError(f"audit log: {path}: cannot use WAL mode (got {mode})")
        connection.execute("PRAGMA synchronous=FULL")
        # The writer checkpoints the WAL itself, after a commit has been handed on (see
        # AuditLog._checkpoint_wal), never inside a commit the table is waiting for.
        connection.execute("PRAGMA wal_autocheckpoint=0")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        connection.close()
        raise storage_error(exc, f"cannot open {path}") from exc
    except UnicodeDecodeError as exc:  # SQLite's message quotes a schema that is not UTF-8
        connection.close()
        raise LogDamagedError(
            f"audit log: cannot open {path}: the database is damaged (its schema is not UTF-8 text)"
        ) from exc
    return connection


def close_keeping_wal(connection: sqlite3.Connection, path: Path) -> None:
    """Close the writer's connection without copying the WAL into the database or deleting
    it (issue 31): the last connection to close a WAL database normally does both, and the
    next start's WAL then grows anew from nothing, each commit's growth a file system journal
    write of its own on the card. A read-only connection to the log is opened first and is
    the last to close: while it is open the writer's close is not the last (it copies nothing,
    deletes nothing), and a read-only connection cannot copy or delete the WAL when it
    closes. What is in the WAL stays there, durable (every commit synced it); the next open
    reads it, and the writer copies it into the database then (``AuditLog``'s open). Failing
    to open that reader, the writer is closed as before.

    First the WAL is copied into the database, as the close did, and, all of it copied, begun
    again by one small commit (the schema's user_version written as it is): so what the WAL
    holds at the next open is that commit, and a reader of the stopped log (or the next
    start) recovers a frame or two from it, not the pages of the last 800 rounds.

    What this relies on. SQLite documents that only the last connection to close a WAL
    database checkpoints it and deletes the WAL (it takes an EXCLUSIVE lock on the database
    first: https://www.sqlite.org/walformat.html), so the writer's close, the reader still
    open, does neither. It does not document what the reader's close does, last: a
    ``mode=ro`` connection holds the database file open read-only, the unix VFS's EXCLUSIVE
    lock is a ``fcntl`` write lock, and POSIX refuses one on a descriptor not open for
    writing (EBADF), so that close neither checkpoints nor deletes the WAL (SQLite 3.40.1,
    Debian bookworm's; ``status`` relies on the same: controller/app/status.py). A test pins
    it (tests/audit/test_audit_storage.py,
    ``test_a_read_only_close_neither_copies_nor_deletes_the_wal``). Python 3.11's sqlite3
    offers no documented way instead (SQLITE_FCNTL_PERSIST_WAL is a file control it does not
    expose; SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE comes with Connection.setconfig in 3.12). Were
    it to change, nothing is lost: SQLite deletes a WAL only after a checkpoint that copied
    all of it into the database and synced it, as every stop did before the WAL was kept;
    only the writes the kept WAL saves would go."""
    with contextlib.suppress(sqlite3.Error):
        row = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if row is not None and int(row[0]) == 0 and int(row[1]) == int(row[2]) > 0:
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(f"PRAGMA user_version = {int(version)}")
                connection.execute("COMMIT")
            except sqlite3.Error:
                connection.execute("ROLLBACK")
                raise
    holder: sqlite3.Connection | None = None
    with contextlib.suppress(sqlite3.Error, OSError):
        holder = open_uri(Path(path).absolute().as_uri() + "?mode=ro")  # opens the WAL too
    try:
        with contextlib.suppress(sqlite3.Error):
            connection.close()
    finally:
        if holder is not None:
            with contextlib.suppress(sqlite3.Error):
                holder.close()


class _ReadConnection(sqlite3.Connection):
    """A read-only connection; may own a private copy of the log (read-only media)."""

    scratch: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.scratch is not None:
                self.scratch.cleanup()
                self.scratch = None


def _regular_files(*paths: Path) -> None:
    """Each of ``paths`` that exists is a regular file: SQLite (and a copy) opening a FIFO put
    in a database's place would wait for a writer for ever."""
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue  # absent (or unreadable): SQLite says so when it opens it
        if not stat.S_ISREG(mode):
            raise AuditLogError(f"audit log: {path} is not a regular file")


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write: ``mode=ro``. On read-only media, where SQLite cannot
    make the WAL's shared-memory file, a log without WAL content is opened ``immutable``, and
    one with WAL content is read from a private copy (``immutable`` would not see the WAL)."""
    path = Path(path).absolute()
    _regular_files(path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))
    try:
        return open_uri(path.as_uri() + "?mode=ro")
    except sqlite3.Error as exc:
        first = exc
    except UnicodeDecodeError as exc:  # SQLite's message quotes a schema that is not UTF-8
        raise LogDamagedError(
            f"audit log: cannot open {path} for reading: the database is damaged (its schema"
            " is not UTF-8 text)"
        ) from exc
    wal = path.with_name(path.name + "-wal")
    try:
        has_wal = wal.exists() and wal.stat().st_size > 0
        if not has_wal:
            return open_uri(path.as_uri() + "?immutable=1")
        scratch = tempfile.TemporaryDirectory(prefix="paigow-log-")
        try:
            copy = Path(scratch.name) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            connection = open_uri(copy.as_uri(), wal_ok=True)
        except BaseException:
            scratch.cleanup()
            raise
        connection.scratch = scratch
        return connection
    except (sqlite3.Error, OSError) as exc:
        raise storage_error(exc, f"cannot open {path} for reading ({first})") from exc


def open_uri(uri: str, *, wal_ok: bool = False) -> _ReadConnection:
    """A connection to the database ``uri`` names (``mode=ro``, ``immutable=1``, ...), its
    schema read, so that a file that is no database fails here (closed then); ``wal_ok``: a
    private copy with its WAL, made read-only by ``query_only``."""
    connection = sqlite3.connect(
        uri, uri=True, isolation_level=None, check_same_thread=False, factory=_ReadConnection
    )
    assert isinstance(connection, _ReadConnection)
    try:
        if wal_ok:
            connection.execute("PRAGMA query_only=1")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (sqlite3.Error, UnicodeDecodeError):
        connection.close()
        raise
    return connection


def drop_cached_pages(path: Path) -> None:
    """Ask the kernel to drop the log's clean cached pages, so that what is read next comes
    from the device (pages it could not write may have been marked clean after an error)."""
    for name in (path, path.with_name(path.name + "-wal")):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


# The head row: size, signature, root, context's seq, context.
Head = tuple[int, bytes, bytes, int | None, object]


def read_head(db: sqlite3.Connection) -> Head | None:
    """The head row: (size, signature, root, context's seq, context), or None for a log from
    before it."""
    try:
        row = db.execute(
            "SELECT size, signature, root, context_seq, context FROM head WHERE id = 1"
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    if row is None:
        return None
    size, signature, root, context_seq, context = row
    if not isinstance(size, int) or not isinstance(signature, bytes) or not isinstance(root, bytes):
        raise LogIntegrityError(None, "the log's head row is damaged")
    if context_seq is not None and not isinstance(context_seq, int):
        raise LogIntegrityError(None, "the log's head row is damaged")
    return size, signature, root, context_seq, context


def create_schema(db: sqlite3.Connection) -> None:
    """The tables, made where absent, and the columns a log from before them lacks."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    columns = {row[1] for row in db.execute("PRAGMA table_info(records)")}
    for column, kind in (("context", "BLOB"), ("frontier", "BLOB"), ("note", "TEXT")):
        if column not in columns:  # a log from before these were kept with the records
            db.execute(f"ALTER TABLE records ADD COLUMN {column} {kind}")
    if "frontier" not in {row[1] for row in db.execute("PRAGMA table_info(checkpoints)")}:
        db.execute("ALTER TABLE checkpoints ADD COLUMN frontier BLOB")
    if db.execute("SELECT 1 FROM by_kind WHERE kind = ?", (BY_KIND_SINCE,)).fetchone() is None:
        _index_the_newest(db)


def _index_the_newest(db: sqlite3.Connection) -> None:
    """``by_kind`` made for a log that had records before it: the last BY_KIND_BACKFILL of
    them indexed now (one look through them, as every start made before), so that the
    bounded look backs are answered by the index from this start on; older records are looked
    for the old way. A new log: nothing to index, from its first record."""
    (size,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
    since = max(1, int(size) + 1 - BY_KIND_BACKFILL)
    kinds = sorted(BY_KIND)
    db.execute(
        "INSERT INTO by_kind SELECT kind, seq FROM records"  # noqa: S608 - only ? marks
        f" WHERE seq >= ? AND kind IN ({','.join('?' * len(kinds))})",
        (since, *kinds),
    )
    db.execute("INSERT INTO by_kind VALUES (?, ?)", (BY_KIND_SINCE, since))


def by_kind_since(db: sqlite3.Connection) -> int | None:
    """The first seq ``by_kind`` keeps the records of :data:`BY_KIND` from, or None when the
    log does not keep it (a log from before it, read only)."""
    try:
        row = db.execute(
            "SELECT seq FROM by_kind WHERE kind = ? ORDER BY seq LIMIT 1", (BY_KIND_SINCE,)
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return row[0] if row is not None and type(row[0]) is int else None
