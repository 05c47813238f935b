"""The tamper-evident audit log: SQLite in the state directory, one record per event.

Write-ahead: :meth:`AuditLog.commit` writes the records of one step of the control loop in one
transaction and returns only once it is committed with ``synchronous=FULL`` (fsync of the WAL),
so nothing is shown before it is durable. The same transaction rewrites the log's head, one
small row: the round's context as it is after that step (controller/core/snapshot.py), outside
the hashed leaves (recovery starts from it), and the running checkpoint (the tree's root and its
signature; the note's text is rebuilt from them).

Each record (a leaf) is the canonical encoding (controller/core/canonical.py) of
``{"seq", "kind", "time", "prev", "data"}``: ``seq`` counts from 1, ``prev`` is the hex SHA-256
of the previous leaf (64 zeros for the first), ``time`` is UTC wall-clock time as a string.
The leaves form an RFC 6962 Merkle tree (controller/core/merkle.py); after each ``close`` or
``void`` record, and on demand, a C2SP checkpoint of the tree is signed with the log's Ed25519
key (controller/core/note.py) in the same transaction, kept in ``checkpoints`` and outside the
database as the log's anchor (controller/audit/anchor.py). Every FRONTIER_EVERY records a
checkpoint is kept with the tree's frontier too: a start rebuilds the tree from the last one and
the leaves after it. The head's running checkpoint, re-signed at every commit, signs
the newest records too, and names the last record: a log cut back to an earlier commit is seen
to be cut.

Writes (issue 13): a new log has 512-byte pages, so that a commit writes its few small rows to
the WAL rather than whole 4 KiB pages (a record spills into an overflow page of its own), and
the writer copies the WAL into the database itself, every CHECKPOINT_PAGES pages, after the
commit was handed on, never inside it. Logs written before the head row (the context with each
step's last record, the frontier and running checkpoint with the last record; earlier, the
``checkpoints`` row of size 0) are read as they are and move to the head with their next commit.

Identity: the log signs as its origin, also the key's name: ``[fleet] origin`` when set (a
globally unique name), else ``paigow-controller/<table>``. The first record, ``log_created``,
names the origin and the verifier key, and the key's id is kept in the database: every start
checks that the key it was given is that key. A missing or other key is
:class:`LogIdentityError`, never a new key; only the first start on an empty state directory
(or ``paigow-controller init``) creates one.

Storage failures never lose what is recorded and never leave the log half-trusted. A full disk
raises :class:`StorageFull`, any other failure :class:`AuditLogError`. After a failed commit the
connection is not trusted again (PostgreSQL's lesson from fsync failures: the kernel may have
dropped the pages it could not write, and SQLite keeps WAL frames written before a failed sync):
no further commit is taken until :meth:`reopen` has opened the file afresh and read what is
really there, which may include the records of the commit reported failed. The control loop
reconciles with that.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.audit.anchor import (
    ANCHOR_FILE,
    Anchor,
    AnchorFile,
    AnchorFinding,
    copy_path,
)
from controller.audit.damage import Damage, sound_rows
from controller.core import canonical
from controller.core.merkle import CompactRange
from controller.core.note import (
    Checkpoint,
    Signer,
    checkpoint_note,
    checkpoint_signature,
    open_checkpoint,
    sign_checkpoint,
)
from controller.core.records import RecordKind, StoredRecord, record_hash
from controller.core.state import Fault
from controller.errors import (
    AuditLogError,
    ConfigError,
    EncodingError,
    LogDamagedError,
    LogIdentityError,
    LogIntegrityError,
    NoteError,
    StorageFull,
)
from controller.files import write_new
from controller.ports import Committed, LoggedCheckpoint, Reopened

if TYPE_CHECKING:
    from controller.core.config import Config

log = logging.getLogger("paigow.audit")

DB_NAME = "audit.db"
KEY_FILE = "audit-log.key"  # also the name of the systemd credential (LoadCredential=)
FORMAT = "paigow-audit-log/1"
GENESIS_PREV = "0" * 64
LATEST_CHECKPOINT = 0  # a log from before the running checkpoint was kept with its last row
CHECKPOINT_AFTER: frozenset[RecordKind] = frozenset({RecordKind.CLOSE, RecordKind.VOID})
MAX_KEY_FILE_BYTES = 4096
PAGE_SIZE = 512
# Copy the WAL into the database once it holds about this many pages (8 MiB at 512-byte
# pages, some 800 rounds): each copy costs two syncs (the WAL's and the database's), so the
# fewer the better per round, and a reader never has more than this to look through.
CHECKPOINT_PAGES = 16384
# A signed checkpoint is kept with the Merkle frontier every this many records (some 600
# rounds): a start rebuilds the tree from the last one and the leaves after it (a few ms).
FRONTIER_EVERY = 4096

_SCHEMA = """
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
"""


def origin_for(table: str) -> str:
    """The origin (C2SP tlog-checkpoint) and key name a table's new log gets when ``[fleet]
    origin`` is not set: one per table name (a casino's names are not unique across casinos;
    ``[fleet] origin`` is)."""
    return f"paigow-controller/{table}"


DEFAULT_ORIGIN = origin_for("table-1")


def configured_origin(config: Config) -> str:
    """The origin a new log of this configuration gets, and the one its log must have when
    ``[fleet] origin`` is set (:func:`require_origin`)."""
    return config.fleet.origin or origin_for(config.table.name)


def require_origin(state_dir: Path, config: Config) -> None:
    """With ``[fleet] origin`` set, the log in ``state_dir`` (if it holds one) must be of that
    origin: a log is never renamed (its checkpoints and every copy of its key name it), so the
    configuration is what is wrong. :class:`ConfigError` naming ``fleet.origin`` otherwise.
    Unset, the log is opened as before (a log of another origin is then a LogIdentityError)."""
    wanted = config.fleet.origin
    if not wanted:
        return
    recorded = peek_identity(Path(state_dir) / DB_NAME)
    if recorded is not None and recorded[0] != wanted:
        raise ConfigError(
            "fleet.origin",
            f"the log's origin is {recorded[0]!r}, not {wanted!r}: a log keeps the origin it"
            " was made with (set [fleet] origin to it, or make a new state directory)",
        )


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _storage_error(exc: BaseException, doing: str) -> AuditLogError:
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
        raise _storage_error(exc, doing) from exc


def connect(path: Path) -> sqlite3.Connection:
    """The writer's connection: WAL, synchronous=FULL, explicit transactions."""
    try:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _storage_error(exc, f"cannot open {path}") from exc
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
        raise _storage_error(exc, f"cannot open {path}") from exc
    except UnicodeDecodeError as exc:  # SQLite's message quotes a schema that is not UTF-8
        connection.close()
        raise LogDamagedError(
            f"audit log: cannot open {path}: the database is damaged (its schema is not UTF-8 text)"
        ) from exc
    return connection


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
        return _open_uri(path.as_uri() + "?mode=ro")
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
            return _open_uri(path.as_uri() + "?immutable=1")
        scratch = tempfile.TemporaryDirectory(prefix="paigow-log-")
        try:
            copy = Path(scratch.name) / path.name
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            connection = _open_uri(copy.as_uri(), wal_ok=True)
        except BaseException:
            scratch.cleanup()
            raise
        connection.scratch = scratch
        return connection
    except (sqlite3.Error, OSError) as exc:
        raise _storage_error(exc, f"cannot open {path} for reading ({first})") from exc


def _open_uri(uri: str, *, wal_ok: bool = False) -> _ReadConnection:
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


# --- the signing key --------------------------------------------------------------------


def load_signer(state_dir: Path) -> Signer | None:
    """The log's signing key: from systemd's credentials directory when it provides one, else
    ``audit-log.key`` in the state directory; None when there is none. Never creates one."""
    credentials = os.environ.get("CREDENTIALS_DIRECTORY")
    if credentials:
        provided = Path(credentials) / KEY_FILE
        if provided.exists():
            return _read_signer(provided, check_mode=False)
    path = Path(state_dir) / KEY_FILE
    if path.exists():
        return _read_signer(path, check_mode=True)
    return None


def create_signer(state_dir: Path, origin: str) -> Signer:
    """A new signing key in ``audit-log.key`` (mode 0600), for a new log only. Refuses to
    replace a key that exists."""
    state_dir = Path(state_dir)
    signer = Signer.generate(origin)
    path = state_dir / KEY_FILE
    try:
        write_new(path, f"{signer}\n".encode(), 0o600, replace=False)  # never replaces a key
    except FileExistsError:
        raise LogIdentityError(f"audit log: {path} exists: a key is never replaced") from None
    except OSError as exc:
        raise _storage_error(exc, f"cannot create the signing key {path}") from exc
    return signer


def _read_signer(path: Path, *, check_mode: bool) -> Signer:
    try:
        if check_mode and stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise LogIdentityError(f"audit log: {path} must be readable by its owner only (0600)")
        with path.open("rb") as file:
            raw = file.read(MAX_KEY_FILE_BYTES + 1)
        if len(raw) > MAX_KEY_FILE_BYTES:
            raise LogIdentityError(f"audit log: {path} is too large to be a signing key")
        return Signer.parse(raw.decode("ascii"))
    except (OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, LogIdentityError):
            raise
        raise LogIdentityError(f"audit log: cannot read the signing key {path}: {exc}") from exc
    except NoteError as exc:
        raise LogIdentityError(f"audit log: {path} is not a signing key: {exc}") from exc


# --- the log ------------------------------------------------------------------------------


class AuditLog:
    """The audit log of one table (implements ``controller.ports.AuditLog``).

    Not thread-safe by design: the daemon's one control thread owns it.
    ``max_page_count`` caps the database (SQLite pages) so that the log cannot fill the disk.
    A log opened with ``locked`` (its identity could not be established, or its tail is
    damaged) reads but records nothing: every commit raises ``locked_error`` (by default
    :class:`LogIdentityError`) with that reason. A locked log whose tree cannot be rebuilt
    keeps the size it holds and leaves out of what it reads back any record that is not sound
    by itself (controller/audit/damage.py).
    """

    def __init__(
        self,
        path: Path,
        signer: Signer | None,
        *,
        origin: str | None = None,
        clock: Callable[[], str] = utc_now,
        max_page_count: int | None = None,
        anchor: AnchorFile | None = None,
        anchor_copy: AnchorFile | None = None,
        locked: str | None = None,
        locked_error: Callable[[str], AuditLogError] = LogIdentityError,
    ) -> None:
        if signer is None and locked is None:
            raise LogIdentityError("audit log: no signing key")
        self.path = Path(path)
        self.signer = signer
        self.origin = origin or (signer.name if signer is not None else DEFAULT_ORIGIN)
        self.locked = locked
        self._locked_error = locked_error
        self._stored_size: int | None = None  # locked, with a tree that cannot be rebuilt
        self._clock = clock
        self._anchor = anchor
        self._anchor_copy = anchor_copy if anchor is not None else None
        self._max_page_count = max_page_count
        self._poisoned: str | None = None
        self._tree = CompactRange()
        self._prev = GENESIS_PREV
        self._connection: sqlite3.Connection | None = None
        self._wal_pages = 0  # an estimate of the pages written to the WAL since its last copy
        self._frontier_size = 0  # the size of the last checkpoint kept with its frontier
        self._legacy_head = False  # a log from before the head row, until its next commit
        # Told of every commit once it is durable, on the control thread (the display's hub):
        # it must only update memory. A failure there is logged, never the commit's.
        self.on_commit: Callable[[list[StoredRecord], LoggedCheckpoint], None] | None = None
        if locked is not None and not self.path.exists():
            return  # nothing to read; nothing may be written
        try:
            self._connection = connect(self.path)
            if max_page_count is not None:
                self._connection.execute(f"PRAGMA max_page_count={int(max_page_count)}")
            if locked is None:
                self._transaction(self._create)
            self._load_tail()
        except BaseException as exc:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            if isinstance(exc, LogDamagedError) and locked_error is LogDamagedError:
                return  # read only, and SQLite cannot read it: nothing is read back
            raise

    def recall(self, last: int) -> list[dict[str, Any]]:
        """The last ``last`` live rounds as game recall reads them (AGCO 13.1.1), through a
        read-only connection of its own: the display's RECALL screen. A damaged record is
        left out and named in the journal (``paigow-controller recall`` names it too)."""
        from controller.audit.recall import recall  # noqa: PLC0415 - recall imports this module

        def named(exc: LogIntegrityError) -> None:
            log.error("recall: damaged: %s", exc)

        with storage_errors(f"cannot read {self.path}"):
            return recall(self.path.parent, last=last, damage=Damage(on_found=named))

    @classmethod
    def open(
        cls,
        state_dir: Path | str,
        *,
        origin: str | None = None,
        anchor_copy_dir: Path | str | None = None,
        **options: Any,
    ) -> AuditLog:
        """The log in ``state_dir``. On an empty directory (the first start) the key and the
        log are created; otherwise the key must be the log's own (:class:`LogIdentityError`).
        ``anchor_copy_dir``: a second place for the log's anchor ([storage] anchor_copy_dir;
        never created here: a mount that failed must not become a directory on the card)."""
        directory = Path(state_dir)
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise _storage_error(exc, f"cannot create {directory}") from exc
        signer = load_signer(directory)
        path = directory / DB_NAME
        if signer is None:
            recorded = peek_identity(path)
            if recorded is not None:
                raise LogIdentityError(
                    f"audit log: the signing key of {recorded[0]} (key id {recorded[1]}) is"
                    f" missing: restore {directory / KEY_FILE} or its systemd credential"
                )
            signer = create_signer(directory, origin or DEFAULT_ORIGIN)
        anchor = AnchorFile(directory / ANCHOR_FILE)
        copy = None
        if anchor_copy_dir is not None:
            copy = AnchorFile(copy_path(Path(anchor_copy_dir), signer.verifier.key_id))
        return cls(path, signer, origin=origin, anchor=anchor, anchor_copy=copy, **options)

    @classmethod
    def open_locked(cls, state_dir: Path | str, reason: str, **options: Any) -> AuditLog:
        """The log in ``state_dir`` for reading only, while its identity is in doubt (or,
        with ``locked_error=LogDamagedError``, while its tail is damaged)."""
        directory = Path(state_dir)
        return cls(directory / DB_NAME, None, locked=reason, **options)

    # --- transactions ---------------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise AuditLogError(f"audit log: {self.path} is not open")
        return self._connection

    def _transaction(self, body: Callable[[sqlite3.Connection], Any]) -> Any:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = body(db)
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"cannot write {self.path}") from exc
        return result

    def _create(self, db: sqlite3.Connection) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        columns = {row[1] for row in db.execute("PRAGMA table_info(records)")}
        for column, kind in (("context", "BLOB"), ("frontier", "BLOB"), ("note", "TEXT")):
            if column not in columns:  # a log from before these were kept with the records
                db.execute(f"ALTER TABLE records ADD COLUMN {column} {kind}")
        if "frontier" not in {row[1] for row in db.execute("PRAGMA table_info(checkpoints)")}:
            db.execute("ALTER TABLE checkpoints ADD COLUMN frontier BLOB")
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
        assert self.signer is not None
        key_id = self.signer.verifier.key_id.hex().encode()
        if "format" not in meta:
            db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT.encode(),))
            db.execute("INSERT INTO meta VALUES ('origin', ?)", (self.origin.encode(),))
            db.execute("INSERT INTO meta VALUES ('key_id', ?)", (key_id,))
            if self.signer.name != self.origin:
                raise LogIdentityError(
                    f"audit log: the key is named {self.signer.name!r}, not {self.origin!r}"
                )
            entry = {
                "seq": 1,
                "kind": str(RecordKind.LOG_CREATED),
                "time": self._clock(),
                "prev": GENESIS_PREV,
                "data": {"origin": self.origin, "key": str(self.signer.verifier)},
            }
            leaf = canonical.encode(entry)
            tree = CompactRange()
            tree.append(leaf)
            db.execute(
                "INSERT INTO records VALUES (1, ?, ?, NULL, NULL, NULL)", (entry["kind"], leaf)
            )
            db.execute(
                "INSERT INTO head VALUES (1, 1, NULL, NULL, ?, ?)",
                (tree.root(), self._signature(tree)),
            )
            return
        if bytes(meta["format"]) != FORMAT.encode():
            raise AuditLogError(f"audit log: {self.path} is not a {FORMAT} database")
        origin = bytes(meta.get("origin", b"")).decode("utf-8", "replace")
        if origin != self.origin:
            raise LogIdentityError(
                f"audit log: {self.path} is the log of {origin!r}, not of {self.origin!r}"
            )
        if "key_id" not in meta:  # a log from before key ids were kept
            db.execute("INSERT INTO meta VALUES ('key_id', ?)", (key_id,))
        elif bytes(meta["key_id"]) != key_id:
            raise LogIdentityError(
                f"audit log: the signing key {self.signer.verifier.key_id.hex()} is not the key"
                f" {bytes(meta['key_id']).decode('ascii', 'replace')} this log was created with"
            )

    def _load_tail(self) -> None:
        """The chain's last hash and the Merkle tree, from what is committed: the frontier of
        the last checkpoint that keeps one, and the leaves after it (at most a round, or
        FRONTIER_EVERY records). A log from before the head row keeps the frontier with its
        last record (earlier, in its meta row)."""
        try:
            db = self._db
            last = db.execute(
                "SELECT seq, leaf, frontier FROM records ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            try:
                head = _read_head(db)
            except LogIntegrityError as exc:
                if self.locked is None:
                    raise LogDamagedError(f"audit log: {self.path}: {exc}", exc.record) from exc
                head = None  # read only: the records are read as they are
            self._legacy_head = head is None
            frontier = None if last is None else last[2]
            if head is not None:
                # The head is written with every commit: a log whose last record is not the
                # head's was cut or added to without the controller: no frontier is trusted.
                frontier = b""
                if last is not None and head[0] == last[0]:
                    frontier = self._tree_from_checkpoints(db, int(last[0]), head[2])
            elif frontier is None:
                row = db.execute("SELECT value FROM meta WHERE name = 'frontier'").fetchone()
                frontier = b"" if row is None else row[0]
            origin = db.execute("SELECT value FROM meta WHERE name = 'origin'").fetchone()
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"cannot read {self.path}") from exc
        if origin is None:
            if last is None and self.locked is not None:
                return  # an empty file: nothing recorded yet
            raise AuditLogError(f"audit log: {self.path} has no origin")
        self.origin = bytes(origin[0]).decode("utf-8", "replace")
        size = 0 if last is None else int(last[0])
        try:
            if last is not None and not isinstance(last[1], bytes):
                raise ValueError("the last leaf is not stored as bytes")
            self._tree = CompactRange.from_bytes(size, bytes(frontier))
        except (ValueError, TypeError) as exc:
            if self.locked is None:
                raise self._damage(size, head) from exc
            self._tree, self._stored_size = CompactRange(), size  # read only: as it is stored
            self._prev = GENESIS_PREV
            return
        self._prev = GENESIS_PREV if last is None else record_hash(bytes(last[1]))

    def _damage(
        self, size: int, head: tuple[int, bytes, bytes, int | None, object] | None
    ) -> LogDamagedError:
        """Why the tree of the log's ``size`` records cannot be rebuilt, naming the damaged
        record where one is: each record after the last kept frontier checked by itself and
        against the chain (controller/audit/damage.py, verify-log's own checks), then the
        head's signature, then the kept frontier against its signed checkpoint."""
        where = f"audit log: {self.path}"
        if head is None:
            return LogDamagedError(
                f"{where}: the Merkle frontier kept with the last record is damaged"
            )
        if head[0] != size:
            first = min(head[0], size) + 1
            return LogDamagedError(
                f"{where}: record {first}: the log holds {size} records but its head signs"
                f" {head[0]}: records were removed or added without the controller",
                first,
            )
        damage = Damage()
        try:
            # from the record the frontier ends at: the first record after it is checked
            # against it (its prev), as every later one is against the one before
            rows = read_records(
                self._db, start=max(1, self._frontier_size), stop=size, on_bad=damage.note
            )
            for _row in sound_rows(rows, damage):
                pass
            if damage.found:
                first_bad = min(damage.found, key=lambda exc: exc.record or 0)
                return LogDamagedError(f"{where}: {first_bad}", first_bad.record)
            assert self.signer is not None
            signed = Checkpoint(self.origin, size, head[2])
            if checkpoint_signature(signed, self.signer) != head[1]:
                return LogDamagedError(f"{where}: the log's head row is damaged (its signature)")
            if self._frontier_size and not self._frontier_is_signed(self._frontier_size):
                return LogDamagedError(
                    f"{where}: the Merkle frontier kept at record {self._frontier_size} is"
                    " damaged (its signed checkpoint says another tree)"
                )
        except (AuditLogError, sqlite3.Error) as exc:
            return LogDamagedError(f"{where}: its last records cannot be read: {exc}")
        return LogDamagedError(
            f"{where}: record {size}: altered: the log's signed head does not cover it", size
        )

    def _frontier_is_signed(self, size: int) -> bool:
        """Whether the frontier kept with the checkpoint at ``size`` is the tree it signs."""
        row = self._db.execute(
            "SELECT note, frontier FROM checkpoints WHERE size = ?", (size,)
        ).fetchone()
        assert self.signer is not None
        try:
            checkpoint = open_checkpoint(str(row[0]), self.signer.verifier)
            tree = CompactRange.from_bytes(size, bytes(row[1]))
        except (NoteError, ValueError, TypeError):
            return False
        return checkpoint.size == size and checkpoint.root_hash == tree.root()

    def _tree_from_checkpoints(self, db: sqlite3.Connection, size: int, root: bytes) -> bytes:
        """The frontier of the first ``size`` records: the last kept checkpoint's, extended by
        the leaves after it; empty (damaged) when its root is not the head's."""
        row = db.execute(
            "SELECT size, frontier FROM checkpoints WHERE frontier IS NOT NULL AND size <= ?"
            " ORDER BY size DESC LIMIT 1",
            (size,),
        ).fetchone()
        self._frontier_size = 0 if row is None else int(row[0])
        try:
            tree = CompactRange() if row is None else CompactRange.from_bytes(row[0], row[1])
        except (ValueError, TypeError):
            return b""
        for record in read_records(db, start=tree.size + 1, stop=size):
            tree.append(record.leaf)
        return tree.to_bytes() if tree.size == size and tree.root() == root else b""

    @property
    def size(self) -> int:
        """How many records are committed (the sequence number of the last)."""
        return self._tree.size if self._stored_size is None else self._stored_size

    @property
    def next_seq(self) -> int:
        return self.size + 1

    def _check_writable(self) -> None:
        if self.locked is not None:
            raise self._locked_error(self.locked)
        if self._poisoned is not None:
            raise AuditLogError(
                f"audit log: not written since a commit failed ({self._poisoned});"
                " it must be reopened first"
            )

    def commit(
        self,
        entries: Sequence[tuple[RecordKind, Mapping[str, object]]],
        *,
        context: bytes | None = None,
    ) -> Committed:
        """Record the events of one step in one transaction; ``context`` (the round's context
        after the step), the Merkle frontier and a signed checkpoint of the whole log go to
        the head. A ``close`` or ``void`` also gets its round checkpoint, kept in
        ``checkpoints`` and in the anchor. Returns once every record is durable."""
        self._check_writable()
        if not entries:
            raise ValueError("a commit records at least one event")
        assert self.signer is not None
        tree = CompactRange(self._tree.size, list(self._tree.hashes))
        prev = self._prev
        rows: list[tuple[int, str, bytes, bytes | None, bytes | None, str | None]] = []
        notes: list[tuple[int, str, bytes | None]] = []  # checkpoints: size, note, frontier
        anchor: tuple[str, tuple[bytes, ...]] | None = None
        now = self._clock()
        for raw_kind, data in entries:
            kind = RecordKind(raw_kind)
            seq = tree.size + 1
            entry = {"seq": seq, "kind": str(kind), "time": now, "prev": prev, "data": dict(data)}
            try:
                leaf = canonical.encode(entry)
            except EncodingError as exc:
                raise AuditLogError(f"audit log: a {kind} record cannot be encoded: {exc}") from exc
            tree.append(leaf)
            prev = record_hash(leaf)
            rows.append((seq, str(kind), leaf, None, None, None))  # context etc.: the head
            if kind in CHECKPOINT_AFTER:
                closed = self._checkpoint_of(tree)
                signature = checkpoint_signature(closed, self.signer)
                note = checkpoint_note(closed, self.origin, signature)
                notes.append((seq, note, None))
                anchor = (note, tuple(tree.hashes))
        # The running checkpoint: signed once, that of a round's close if it ends the commit.
        # The tree's root is computed once for the signature, the note and the head.
        latest_checkpoint = self._checkpoint_of(tree)
        root = latest_checkpoint.root_hash
        if not notes or notes[-1][0] != tree.size:
            signature = checkpoint_signature(latest_checkpoint, self.signer)
        latest = checkpoint_note(latest_checkpoint, self.origin, signature)
        keep_frontier = tree.size - self._frontier_size >= FRONTIER_EVERY or self._legacy_head
        if keep_frontier:
            if notes and notes[-1][0] == tree.size:
                notes.pop()
            notes.append((tree.size, latest, tree.to_bytes()))
        head = (tree.size, tree.size if context is not None else None, context)
        previous = self._tree.size

        def write(db: sqlite3.Connection) -> None:
            db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)", rows)
            if notes:
                db.executemany(
                    "INSERT OR REPLACE INTO checkpoints (size, note, frontier) VALUES (?, ?, ?)",
                    notes,
                )
            # The head (one small row, one page) keeps the context after this step and the
            # running checkpoint (the tree's root and its signature): written in place with
            # every commit, it names the last record, so a log cut back to an earlier commit
            # is seen to be cut, and the newest records are signed.
            if not self._legacy_head:
                db.execute(
                    "UPDATE head SET size = ?, context_seq = coalesce(?, context_seq),"
                    " context = coalesce(?, context), root = ?, signature = ? WHERE id = 1",
                    (*head, root, signature),
                )
                return
            # A log from before the head: its last record kept all this.
            row = db.execute(
                "SELECT seq, context FROM records WHERE context IS NOT NULL"
                " ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            stored = (None, None) if row is None else (row[0], row[1])
            db.execute("UPDATE records SET frontier = NULL, note = NULL WHERE seq = ?", (previous,))
            db.execute(
                "INSERT INTO head VALUES (1, ?, coalesce(?, ?), coalesce(?, ?), ?, ?)",
                (tree.size, head[1], stored[0], context, stored[1], root, signature),
            )

        try:
            self._transaction(write)
        except AuditLogError as exc:
            self._poison(str(exc))
            raise
        self._tree = tree
        self._prev = prev
        self._legacy_head = False
        if keep_frontier:
            self._frontier_size = tree.size
        if self.on_commit is not None:
            try:
                self.on_commit(
                    [StoredRecord(row[0], row[1], row[2]) for row in rows],
                    LoggedCheckpoint(tree.size, latest),
                )
            except Exception:
                log.exception("audit log: a commit's listener failed")
        anchor_error = None
        if anchor is not None:
            anchor_error = self._write_anchor(*anchor)
        # A commit writes its new rows' pages (a record and its overflow page), the page before
        # them, the tree's parent page, the head and the database's header; a checkpoint is a
        # page of its own.
        self._wal_pages += 3 + 2 * len(rows) + len(notes)
        if self._wal_pages >= CHECKPOINT_PAGES:
            self._checkpoint_wal()
        return Committed([row[0] for row in rows], anchor_error)

    def _checkpoint_wal(self) -> None:
        """Copy the WAL's pages into the database (a passive checkpoint: readers are not
        waited for; what they still need stays in the WAL for the next one). Every record is
        already durable in the WAL, so a failure loses nothing; but a failed sync may have let
        the kernel drop pages, so the log is not trusted again until :meth:`reopen`, as after
        a failed commit: the next commit reports it."""
        try:
            row = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            reason = str(_storage_error(exc, f"cannot checkpoint {self.path}"))
            log.error("%s", reason)
            self._poison(reason)
            return
        written, copied = (int(row[1]), int(row[2])) if row is not None else (0, 0)
        self._wal_pages = max(0, written - copied)

    def drop_archived(
        self, span: tuple[int, int], frontier: bytes, note: str, *, chunk: int
    ) -> int:
        """Delete the oldest records, up to ``through``, at most ``chunk`` of them, in one
        transaction: records an archive holds (``span``: its first and last, ``through``) and
        was read back from (controller/audit/archive.py); none before its first. The same
        transaction keeps the checkpoint at ``through`` (``note``) with the tree's compact
        range there (``frontier``), from which a start rebuilds the tree; both are checked
        against the log's key first. Returns how many records up to ``through`` the log
        still holds."""
        self._check_writable()
        assert self.signer is not None
        archived_from, through = span
        if self._legacy_head or not 0 < archived_from <= through < self._tree.size:
            raise AuditLogError(f"audit log: records up to {through} cannot be dropped")
        try:
            signed = open_checkpoint(note, self.signer.verifier)
            tree = CompactRange.from_bytes(through, frontier)
        except (NoteError, ValueError) as exc:
            raise AuditLogError(
                f"audit log: not dropped: the archive's end is damaged ({exc})"
            ) from None
        if signed.size != through or signed.root_hash != tree.root():
            raise AuditLogError("audit log: not dropped: the archive's tree is not the signed one")

        def drop(db: sqlite3.Connection) -> int:
            (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
            if first is None or first > through:
                return 0
            if first < archived_from:  # rolled back: nothing written, nothing to distrust
                raise ValueError(
                    f"audit log: not dropped: record {first} is not in the archive, which"
                    f" starts at {archived_from}"
                )
            stop = min(through, int(first) + chunk - 1)
            db.execute(
                "INSERT INTO checkpoints (size, note, frontier) VALUES (?, ?, ?)"
                " ON CONFLICT (size) DO UPDATE SET frontier = excluded.frontier",
                (through, note, frontier),
            )
            db.execute(
                "DELETE FROM checkpoints WHERE size > 0 AND size <= ? AND size <> ?",
                (stop, through),
            )
            db.execute("DELETE FROM records WHERE seq <= ?", (stop,))
            return through - stop

        try:
            remaining: int = self._transaction(drop)
        except ValueError as exc:
            raise AuditLogError(str(exc)) from None
        except AuditLogError as exc:
            self._poison(str(exc))
            raise
        # Each record deleted frees its page and overflow page (written to the WAL as free
        # pages); the WAL is copied into the database as after commits.
        self._wal_pages += 3 + 2 * chunk
        if self._wal_pages >= CHECKPOINT_PAGES:
            self._checkpoint_wal()
        return remaining

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        """Record one event on its own; returns its sequence number once it is durable."""
        return self.commit([(kind, data)]).seqs[0]

    def _poison(self, reason: str) -> None:
        """After a failed commit: close the connection; nothing more until :meth:`reopen`."""
        self._poisoned = reason
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    @property
    def is_poisoned(self) -> bool:
        return self._poisoned is not None

    def reopen(self) -> Reopened:
        """Open the file afresh after a failed commit and read its true tail. The size may be
        above what was acknowledged (a commit reported failed was written after all)."""
        acknowledged = self._tree.size
        if self.locked is not None:
            return Reopened(acknowledged, acknowledged)
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()
        _drop_cached_pages(self.path)
        self._connection = connect(self.path)
        try:
            if self._max_page_count is not None:
                self._connection.execute(f"PRAGMA max_page_count={int(self._max_page_count)}")
            self._load_tail()
        except BaseException:
            self._connection.close()
            self._connection = None
            raise
        self._poisoned = None
        return Reopened(acknowledged, self._tree.size)

    def latest_context(self) -> tuple[int, bytes] | None:
        """The context stored with the last step that was committed, and its record's seq."""
        if self._connection is None and self.locked is not None:
            return None
        return read_latest_context(self._db, self.path)

    # --- checkpoints and the anchor ----------------------------------------------------------

    def checkpoint(self) -> int:
        """Sign a checkpoint of the log as it is now (if not signed yet); returns its size."""
        self._check_writable()
        tree = self._tree
        if tree.size == 0:
            return 0
        note = self._signed(tree)
        try:
            self._transaction(
                lambda db: db.execute(
                    "INSERT OR IGNORE INTO checkpoints (size, note, frontier) VALUES (?, ?, ?)",
                    (tree.size, note, tree.to_bytes()),
                )
            )
        except AuditLogError as exc:
            self._poison(str(exc))
            raise
        return tree.size

    def reanchor(self) -> int:
        """Keep the log as it is now as its anchor (a supervisor accepted a rolled-back log).
        Returns the anchored size."""
        self._check_writable()
        if self._anchor is None or self._tree.size == 0:
            return 0
        size = self.checkpoint()
        error = self._write_anchor(self._signed(self._tree), tuple(self._tree.hashes))
        if error is not None:
            raise AuditLogError(error)
        return size

    def _anchor_places(self) -> list[AnchorFile]:
        return [f for f in (self._anchor, self._anchor_copy) if f is not None]

    def _write_anchor(self, note: str, hashes: tuple[bytes, ...]) -> str | None:
        """The anchor written in each of its places, each tried; what failed, or None."""
        errors = []
        for place in self._anchor_places():
            try:
                place.write(note, hashes)
            except AuditLogError as exc:
                errors.append(str(exc))
        return "; ".join(errors) or None

    def check_anchor(self) -> AnchorFinding | None:
        """None when the log is what this controller signed: its running checkpoint signs the
        whole log with the log's key, and the log extends its anchor (if it has one yet: a
        log with closed rounds has one, ``anchor_missing`` otherwise). A place of the anchor
        missing or behind the other is rewritten from the one that proves more, which the
        log is checked against (``rewritten`` says so, to be recorded). Otherwise the fault."""
        if self.signer is None:
            return None
        tail = self._check_tail()
        if tail is not None:
            return AnchorFinding(Fault.LOG_ROLLBACK, tail)
        places = self._anchor_places()
        kept: list[tuple[AnchorFile, Anchor, Checkpoint]] = []
        for place in places:
            try:
                anchor = place.read()
            except AuditLogError as exc:
                return AnchorFinding(Fault.LOG_ROLLBACK, str(exc))
            if anchor is None:
                continue
            opened = self._open_anchor(anchor, place)
            if isinstance(opened, str):
                return AnchorFinding(Fault.LOG_ROLLBACK, opened)
            kept.append((place, anchor, opened))
        if not kept:
            if places and self._has_closed_rounds():
                where = " nor ".join(str(p.path) for p in places)
                return AnchorFinding(
                    Fault.ANCHOR_MISSING,
                    f"the log has closed rounds but no anchor: {where} is missing (deleted?);"
                    " a rollback cannot be checked",
                )
            return None
        source, best, checkpoint = max(kept, key=lambda k: k[2].size)
        problem = self._extends(best, checkpoint)
        if problem is not None:
            return AnchorFinding(Fault.LOG_ROLLBACK, problem)
        for place, _, other in kept:
            if other.size == checkpoint.size and other.root_hash != checkpoint.root_hash:
                return AnchorFinding(
                    Fault.LOG_ROLLBACK,
                    f"the anchors {source.path} and {place.path} sign different logs of"
                    f" {checkpoint.size} records",
                )
        held = {id(place): other.size for place, _, other in kept}
        behind = [p for p in places if held.get(id(p), -1) < checkpoint.size]
        if not behind:
            return None
        said = []
        for place in behind:
            try:
                place.write(best.note, best.hashes)
            except AuditLogError as exc:
                return AnchorFinding(Fault.STORAGE, str(exc))
            was = held.get(id(place))
            said.append(f"{place.path} ({'missing' if was is None else f'at {was} records'})")
        return AnchorFinding(
            rewritten=f"the anchor at {', '.join(said)} rewritten from {source.path}"
            f" ({checkpoint.size} records)"
        )

    def _has_closed_rounds(self) -> bool:
        """Whether a round was closed or void in the log (each keeps a checkpoint, and its
        commit wrote the anchor): the checkpoints, one per round, are looked through until
        the first, never the records."""
        row = self._db.execute(
            "SELECT 1 FROM checkpoints c JOIN records r ON r.seq = c.size"
            " WHERE c.size > 0 AND r.kind IN (?, ?) LIMIT 1",
            tuple(str(k) for k in sorted(CHECKPOINT_AFTER)),
        ).fetchone()
        return row is not None

    def _open_anchor(self, anchor: Anchor, place: AnchorFile) -> Checkpoint | str:
        """The checkpoint an anchor keeps, verified with the log's key, or what is wrong."""
        assert self.signer is not None
        try:
            checkpoint = open_checkpoint(anchor.note, self.signer.verifier)
        except NoteError as exc:
            return f"the log's anchor {place.path} does not verify with the log's key: {exc}"
        if checkpoint.origin != self.origin:
            return f"the log's anchor is of {checkpoint.origin!r}, not {self.origin!r}"
        try:
            tree = anchor.tree(checkpoint.size)
        except ValueError:
            return f"the log's anchor {place.path} is damaged"
        if tree.root() != checkpoint.root_hash:
            return f"the log's anchor {place.path} is damaged (its tree is not the one it signs)"
        return checkpoint

    def _extends(self, anchor: Anchor, checkpoint: Checkpoint) -> str | None:
        """None when the log extends the anchor's checkpoint: at least as many records, and
        its tree is the anchor's with more leaves (only the records after it are read)."""
        tree = anchor.tree(checkpoint.size)
        if self.size < checkpoint.size:
            return (
                f"the log holds {self.size} records but the checkpoint it published signs"
                f" {checkpoint.size}: it was rolled back"
            )
        for row in read_records(self._db, start=checkpoint.size + 1):
            tree.append(row.leaf)
        if tree.root() != self._tree.root():
            return (
                f"the log's first {checkpoint.size} records are not the ones its published"
                " checkpoint signs: the log was replaced or forked"
            )
        return None

    def _check_tail(self) -> str | None:
        """Records appended without the key (the log edited while the controller was off)
        would be chained but not signed: the running checkpoint must sign them all."""
        if self.size == 0:
            return None
        note = read_latest_checkpoint(self._db)
        if note is None:
            return "the log's last records carry no signed checkpoint"
        assert self.signer is not None
        try:
            checkpoint = open_checkpoint(note, self.signer.verifier)
        except NoteError as exc:
            return f"the log's latest checkpoint does not verify with its key: {exc}"
        if checkpoint.size != self.size or checkpoint.root_hash != self._tree.root():
            return (
                f"the log holds {self.size} records but its latest signed checkpoint signs"
                f" {checkpoint.size}: records were added, removed or changed without the key"
            )
        return None

    def _checkpoint_of(self, tree: CompactRange) -> Checkpoint:
        return Checkpoint(self.origin, tree.size, tree.root())

    def _signed(self, tree: CompactRange) -> str:
        assert self.signer is not None
        return sign_checkpoint(self._checkpoint_of(tree), self.signer)

    def _signature(self, tree: CompactRange) -> bytes:
        assert self.signer is not None
        return checkpoint_signature(self._checkpoint_of(tree), self.signer)

    def records(self, *, start: int = 1) -> Iterator[StoredRecord]:
        return read_records(self._db, start=start)

    def recent_records(
        self, kinds: Collection[str], *, since_kind: str, count: int
    ) -> list[StoredRecord]:
        """The records of ``kinds`` from the ``count``-th newest ``since_kind`` record on (all
        of them if there are fewer): what the RNG needs at start, without reading the log."""
        if self._connection is None and self.locked is not None:
            return []
        names = sorted(kinds)
        marks = ",".join("?" * len(names))
        try:
            rows = self._db.execute(
                "SELECT seq FROM records WHERE kind = ? ORDER BY seq DESC LIMIT ?",
                (since_kind, count),
            ).fetchall()
            start = int(rows[-1][0]) if len(rows) == count else 1
            found = self._db.execute(
                f"SELECT seq, kind, leaf FROM records WHERE seq >= ? AND kind IN ({marks})"  # noqa: S608 - only ? marks
                " ORDER BY seq",
                (start, *names),
            ).fetchall()
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"cannot read {self.path}") from exc
        return self._readable([StoredRecord(int(s), str(k), bytes(leaf)) for s, k, leaf in found])

    def _readable(self, rows: list[StoredRecord]) -> list[StoredRecord]:
        """The rows, less those not sound by themselves when the log is read only (its tail may
        be damaged): what the controller reads back at start never stops it starting."""
        if self.locked is None:
            return rows
        return list(sound_rows(rows, Damage(), chained=False))

    def last_record(self, kind: str, *, within: int) -> StoredRecord | None:
        """The newest record of ``kind`` among the last ``within`` records, or None: a look
        back bounded whatever the log's length (the records have no index by kind)."""
        if self._connection is None and self.locked is not None:
            return None
        try:
            row = self._db.execute(
                "SELECT seq, kind, leaf FROM records WHERE seq > ? AND kind = ?"
                " ORDER BY seq DESC LIMIT 1",
                (self.size - within, kind),
            ).fetchone()
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"cannot read {self.path}") from exc
        if row is None:
            return None
        readable = self._readable([StoredRecord(int(row[0]), str(row[1]), bytes(row[2]))])
        return readable[0] if readable else None

    def contains(self, kind: str, fragment: bytes) -> bool:
        """Whether a record of ``kind`` holds these bytes in its canonical text (a rare look-up
        of an old RNG session by its id)."""
        if self._connection is None and self.locked is not None:
            return False
        try:
            row = self._db.execute(
                "SELECT 1 FROM records WHERE kind = ? AND instr(leaf, ?) > 0 LIMIT 1",
                (kind, fragment),
            ).fetchone()
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"cannot read {self.path}") from exc
        return row is not None

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_cached_pages(path: Path) -> None:
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


# --- reading ------------------------------------------------------------------------------


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
        raise _storage_error(exc, "cannot read the records") from exc


def _read_head(db: sqlite3.Connection) -> tuple[int, bytes, bytes, int | None, object] | None:
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


def read_latest_context(db: sqlite3.Connection, path: Path | str) -> tuple[int, bytes] | None:
    """The context stored with the last step committed to the log ``db`` reads (the head's; a
    log from before the head: its last record's), and its record's seq; None when none is."""
    try:
        head = _read_head(db)
        row: tuple[object, object] | None = (
            (head[3], head[4])
            if head is not None
            else db.execute(
                "SELECT seq, context FROM records WHERE context IS NOT NULL"
                " ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        )
    except sqlite3.Error as exc:
        raise _storage_error(exc, f"cannot read {path}") from exc
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
        head = _read_head(db)
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
        raise _storage_error(exc, "cannot read the latest checkpoint") from exc
    return None if legacy is None else str(legacy[0])


def read_checkpoints(db: sqlite3.Connection) -> dict[int, str]:
    try:
        rows = db.execute("SELECT size, note FROM checkpoints WHERE size > 0").fetchall()
    except sqlite3.Error as exc:
        raise _storage_error(exc, "cannot read the checkpoints") from exc
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
        raise _storage_error(exc, f"cannot read {path}") from exc
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
