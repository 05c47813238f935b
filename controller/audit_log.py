"""The tamper-evident audit log: SQLite in the state directory, one record per event.

Write-ahead: :meth:`AuditLog.append` returns only once the record's transaction is committed
with ``synchronous=FULL`` (fsync of the WAL), so nothing is shown before it is durable.

Each record (a leaf) is the canonical encoding (controller/canonical.py) of
``{"seq", "kind", "time", "prev", "data"}``: ``seq`` counts from 1, ``prev`` is the hex SHA-256
of the previous leaf (64 zeros for the first), ``time`` is UTC wall-clock time as a string.
The leaves form an RFC 6962 Merkle tree (controller/merkle.py); after each ``close`` or
``void`` record, and on demand, a C2SP checkpoint of the tree is signed with the log's Ed25519
key (controller/note.py) in the same transaction. The ``checkpoints`` row of size 0 holds the
latest checkpoint, re-signed at every append, so that the newest records are signed too.

Storage failures never lose what is recorded: a full disk raises :class:`StorageFull`, any other
failure :class:`AuditLogError`; the transaction is rolled back and the caller starts no round.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller import canonical
from controller.errors import AuditLogError, StorageFull
from controller.merkle import CompactRange
from controller.note import Checkpoint, NoteError, Signer, sign_checkpoint
from controller.records import RecordKind

DB_NAME = "audit.db"
KEY_FILE = "audit-log.key"  # also the name of the systemd credential (LoadCredential=)
FORMAT = "paigow-audit-log/1"
GENESIS_PREV = "0" * 64
DEFAULT_KEY_NAME = "paigow-controller"
LATEST_CHECKPOINT = 0  # the checkpoints row re-signed at every append (the log's whole size)
CHECKPOINT_AFTER: frozenset[RecordKind] = frozenset({RecordKind.CLOSE, RecordKind.VOID})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    leaf BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
"""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_hash(leaf: bytes) -> str:
    """The hex SHA-256 of a leaf: what the next record carries as ``prev``."""
    return hashlib.sha256(leaf).hexdigest()


def _storage_error(exc: BaseException, doing: str) -> AuditLogError:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_FULL:
        return StorageFull(f"audit log: {doing}: storage is full ({exc})")
    if isinstance(exc, OSError) and exc.errno is not None and exc.errno == 28:  # ENOSPC
        return StorageFull(f"audit log: {doing}: storage is full ({exc})")
    return AuditLogError(f"audit log: {doing}: {exc}")


def connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection with the log's settings: WAL, synchronous=FULL, explicit transactions."""
    try:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _storage_error(exc, f"cannot open {path}") from exc
    try:
        if not read_only:
            mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise AuditLogError(f"audit log: {path}: cannot use WAL mode (got {mode})")
        connection.execute("PRAGMA synchronous=FULL")
        if read_only:
            connection.execute("PRAGMA query_only=1")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        connection.close()
        raise _storage_error(exc, f"cannot open {path}") from exc
    return connection


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One row as stored: the leaf bytes are the record; ``kind`` is an index copy of it."""

    seq: int
    kind: str
    leaf: bytes

    def entry(self) -> dict[str, Any]:
        value = canonical.decode(self.leaf)
        if not isinstance(value, dict):
            raise canonical.EncodingError("a record is a JSON object")
        return value

    @property
    def data(self) -> dict[str, Any]:
        """The event's data (decoded from the leaf; verify-log checks the leaf itself)."""
        data = self.entry()["data"]
        if not isinstance(data, dict):
            raise canonical.EncodingError("a record's data is a JSON object")
        return data


# --- the signing key --------------------------------------------------------------------


def load_or_create_signer(state_dir: Path, *, name: str = DEFAULT_KEY_NAME) -> Signer:
    """The log's signing key: from systemd's credentials directory when it provides one, else
    ``audit-log.key`` in the state directory, created (mode 0600) on first start."""
    credentials = os.environ.get("CREDENTIALS_DIRECTORY")
    if credentials:
        provided = Path(credentials) / KEY_FILE
        if provided.exists():
            return _read_signer(provided, check_mode=False)
    path = state_dir / KEY_FILE
    if path.exists():
        return _read_signer(path, check_mode=True)
    signer = Signer.generate(name)
    temporary = state_dir / f".{KEY_FILE}.{os.getpid()}"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, f"{signer}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)  # never replaces a key another process just made
        except FileExistsError:
            return _read_signer(path, check_mode=True)
        _fsync_dir(state_dir)
    except OSError as exc:
        raise _storage_error(exc, f"cannot create the signing key {path}") from exc
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return signer


def _read_signer(path: Path, *, check_mode: bool) -> Signer:
    try:
        if check_mode and stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise AuditLogError(f"audit log: {path} must be readable by its owner only (0600)")
        text = path.read_text(encoding="ascii")
        return Signer.parse(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditLogError(f"audit log: cannot read the signing key {path}: {exc}") from exc
    except NoteError as exc:
        raise AuditLogError(f"audit log: {path} is not a signing key: {exc}") from exc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the log ------------------------------------------------------------------------------


class AuditLog:
    """The audit log of one table (implements ``controller.ports.AuditLog``).

    Not thread-safe by design: the daemon's one control thread owns it.
    ``max_page_count`` caps the database (SQLite pages) so that the log cannot fill the disk.
    """

    def __init__(
        self,
        path: Path,
        signer: Signer,
        *,
        clock: Callable[[], str] = utc_now,
        max_page_count: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.signer = signer
        self.origin = signer.name
        self._clock = clock
        self._connection: sqlite3.Connection | None = connect(self.path)
        try:
            if max_page_count is not None:
                self._connection.execute(f"PRAGMA max_page_count={int(max_page_count)}")
            self._transaction(self._create)
            self._load_tail()
        except BaseException:
            self._connection.close()
            self._connection = None
            raise

    @classmethod
    def open(
        cls, state_dir: Path | str, *, key_name: str = DEFAULT_KEY_NAME, **options: Any
    ) -> AuditLog:
        """The log in ``state_dir`` (created with its key on first start)."""
        directory = Path(state_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _storage_error(exc, f"cannot create {directory}") from exc
        signer = load_or_create_signer(directory, name=key_name)
        return cls(directory / DB_NAME, signer, **options)

    # --- transactions ---------------------------------------------------------------------

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            raise AuditLogError("audit log: closed")
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
        row = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT.encode(),))
            db.execute("INSERT INTO meta VALUES ('origin', ?)", (self.origin.encode(),))
            db.execute("INSERT INTO meta VALUES ('frontier', ?)", (b"",))
        elif bytes(row[0]) != FORMAT.encode():
            raise AuditLogError(f"audit log: {self.path} is not a {FORMAT} database")

    def _load_tail(self) -> None:
        """The chain's last hash and the Merkle frontier, from what is committed."""
        try:
            db = self._db
            last = db.execute("SELECT seq, leaf FROM records ORDER BY seq DESC LIMIT 1").fetchone()
            frontier = db.execute("SELECT value FROM meta WHERE name = 'frontier'").fetchone()
            origin = db.execute("SELECT value FROM meta WHERE name = 'origin'").fetchone()
        except sqlite3.Error as exc:
            raise _storage_error(exc, f"cannot read {self.path}") from exc
        if origin is None or bytes(origin[0]).decode() != self.origin:
            raise AuditLogError(
                f"audit log: {self.path} was signed by another key name than {self.origin!r}"
            )
        size = 0 if last is None else int(last[0])
        try:
            self._tree = CompactRange.from_bytes(size, bytes(frontier[0]))
        except (ValueError, TypeError) as exc:
            raise AuditLogError(f"audit log: {self.path}: Merkle frontier is damaged") from exc
        self._prev = GENESIS_PREV if last is None else record_hash(bytes(last[1]))

    @property
    def size(self) -> int:
        """How many records are committed (the sequence number of the last)."""
        return self._tree.size

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        """Record one event; returns its sequence number once it is durable."""
        kind = RecordKind(kind)
        seq = self._tree.size + 1
        entry = {
            "seq": seq,
            "kind": str(kind),
            "time": self._clock(),
            "prev": self._prev,
            "data": dict(data),
        }
        try:
            leaf = canonical.encode(entry)
        except canonical.EncodingError as exc:
            raise AuditLogError(f"audit log: a {kind} record cannot be encoded: {exc}") from exc
        tree = CompactRange(self._tree.size, list(self._tree.hashes))
        tree.append(leaf)
        latest = self._signed(tree)
        note = latest if kind in CHECKPOINT_AFTER else None

        def write(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO records VALUES (?, ?, ?)", (seq, str(kind), leaf))
            db.execute("UPDATE meta SET value = ? WHERE name = 'frontier'", (tree.to_bytes(),))
            db.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?)", (LATEST_CHECKPOINT, latest)
            )
            if note is not None:
                db.execute("INSERT INTO checkpoints VALUES (?, ?)", (seq, note))

        try:
            self._transaction(write)
        except AuditLogError:
            self._resync()
            raise
        self._tree = tree
        self._prev = record_hash(leaf)
        return seq

    def checkpoint(self) -> int:
        """Sign a checkpoint of the log as it is now (if not signed yet); returns its size."""
        tree = self._tree
        if tree.size == 0:
            return 0
        note = self._signed(tree)
        self._transaction(
            lambda db: db.execute(
                "INSERT OR IGNORE INTO checkpoints VALUES (?, ?)", (tree.size, note)
            )
        )
        return tree.size

    def _signed(self, tree: CompactRange) -> str:
        return sign_checkpoint(Checkpoint(self.origin, tree.size, tree.root()), self.signer)

    def _resync(self) -> None:
        with contextlib.suppress(AuditLogError):
            self._load_tail()

    def records(self, *, start: int = 1) -> Iterator[StoredRecord]:
        return read_records(self._db, start=start)

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- reading ------------------------------------------------------------------------------


def read_records(
    db: sqlite3.Connection, *, start: int = 1, stop: int | None = None
) -> Iterator[StoredRecord]:
    query = "SELECT seq, kind, leaf FROM records WHERE seq >= ?"
    params: tuple[int, ...] = (start,)
    if stop is not None:
        query += " AND seq <= ?"
        params = (start, stop)
    try:
        for seq, kind, leaf in db.execute(query + " ORDER BY seq", params):
            yield StoredRecord(int(seq), str(kind), bytes(leaf))
    except sqlite3.Error as exc:
        raise _storage_error(exc, "cannot read the records") from exc


def read_checkpoints(db: sqlite3.Connection) -> dict[int, str]:
    try:
        return {
            int(size): str(note) for size, note in db.execute("SELECT size, note FROM checkpoints")
        }
    except sqlite3.Error as exc:
        raise _storage_error(exc, "cannot read the checkpoints") from exc


def open_for_reading(state_dir: Path | str) -> sqlite3.Connection:
    """A query-only connection to the log in ``state_dir`` (verify, recall, export)."""
    path = Path(state_dir) / DB_NAME
    if not path.exists():
        raise AuditLogError(f"audit log: no log at {path}")
    connection = connect(path, read_only=True)
    try:
        connection.execute("SELECT count(*) FROM records").fetchone()
    except sqlite3.Error as exc:
        connection.close()
        raise _storage_error(exc, f"cannot read {path}") from exc
    return connection
