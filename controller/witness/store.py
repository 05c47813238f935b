"""Where the witness keeps what it accepted: every table's records (its leaves, with the Merkle
root after each), its head (size, last hash, compact range, the checkpoint it cosigned and
whether it stopped cosigning), the cosignatures it published, the alerts it raised and the
operators' resets. The same schema in SQLite (``witness.db`` in the state directory: WAL,
``synchronous=FULL``, one writer) or PostgreSQL (``--db postgresql://...``, for a casino that
keeps its records there).

One writer: the witness's state directory is locked (``witness.lock``, an ``flock`` the kernel
releases when the process dies) whichever store it uses. A failed commit is not retried on the
same connection: the store raises :class:`WitnessStoreError`, the witness stops, and its next
start reads what the database really holds.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from controller.errors import InstanceLocked, WitnessStoreError
from controller.files import LockHeld, PidLock
from controller.fleet.protocol import Alert, AlertKind
from controller.witness.ports import Store, TableHead

DB_NAME = "witness.db"
LOCK_NAME = "witness.lock"
SCHEMA_VERSION = "1"

# {blob} and {serial} differ between SQLite and PostgreSQL; nothing else does.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS witness_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS heads (
    table_name TEXT PRIMARY KEY,
    size BIGINT NOT NULL,
    last_hash TEXT NOT NULL,
    tree {blob} NOT NULL,
    cosigned_size BIGINT NOT NULL,
    cosigned_root {blob} NOT NULL,
    cosigned_note TEXT NOT NULL,
    halted TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS leaves (
    table_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    leaf {blob} NOT NULL,
    root {blob} NOT NULL,
    PRIMARY KEY (table_name, seq)
);
CREATE TABLE IF NOT EXISTS cosignatures (
    table_name TEXT NOT NULL,
    size BIGINT NOT NULL,
    timestamp BIGINT NOT NULL,
    note TEXT NOT NULL,
    PRIMARY KEY (table_name, size)
);
CREATE TABLE IF NOT EXISTS alerts (
    id {serial} PRIMARY KEY,
    table_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    time TEXT NOT NULL,
    size BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS resets (
    id {serial} PRIMARY KEY,
    table_name TEXT NOT NULL,
    time TEXT NOT NULL,
    reason TEXT NOT NULL,
    size BIGINT NOT NULL,
    cosigned_size BIGINT NOT NULL,
    halted TEXT NOT NULL
)
"""


class _SqlStore:
    """The queries, written once with ``?`` placeholders; a subclass runs them."""

    placeholder = "?"

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _q(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self._execute(self._q(sql), params).fetchall())

    def _run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._execute(self._q(sql), params)

    def heads(self) -> dict[str, TableHead]:
        rows = self._rows(
            "SELECT table_name, size, last_hash, tree, cosigned_size, cosigned_root,"
            " cosigned_note, halted FROM heads"
        )
        return {
            str(r[0]): TableHead(
                str(r[0]), int(r[1]), str(r[2]), bytes(r[3]), int(r[4]), bytes(r[5]), r[6], r[7]
            )
            for r in rows
        }

    def put_head(self, head: TableHead) -> None:
        self._run("DELETE FROM heads WHERE table_name = ?", (head.table,))
        self._run(
            "INSERT INTO heads (table_name, size, last_hash, tree, cosigned_size, cosigned_root,"
            " cosigned_note, halted) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                head.table,
                head.size,
                head.last_hash,
                head.tree,
                head.cosigned_size,
                head.cosigned_root,
                head.cosigned_note,
                head.halted,
            ),
        )

    def put_leaves(self, table: str, rows: Sequence[tuple[int, str, bytes, bytes]]) -> None:
        for seq, kind, leaf, root in rows:
            self._run(
                "INSERT INTO leaves (table_name, seq, kind, leaf, root) VALUES (?, ?, ?, ?, ?)",
                (table, seq, kind, leaf, root),
            )

    def leaf(self, table: str, seq: int) -> bytes | None:
        rows = self._rows("SELECT leaf FROM leaves WHERE table_name = ? AND seq = ?", (table, seq))
        return bytes(rows[0][0]) if rows else None

    def root(self, table: str, size: int) -> bytes | None:
        rows = self._rows("SELECT root FROM leaves WHERE table_name = ? AND seq = ?", (table, size))
        return bytes(rows[0][0]) if rows else None

    def last_leaf_of_kind(self, table: str, kind: str) -> bytes | None:
        rows = self._rows(
            "SELECT leaf FROM leaves WHERE table_name = ? AND kind = ? ORDER BY seq DESC LIMIT 1",
            (table, kind),
        )
        return bytes(rows[0][0]) if rows else None

    def leaves(self, table: str, start: int = 1) -> Iterator[tuple[int, bytes]]:
        batch = 1024
        while True:
            rows = self._rows(
                "SELECT seq, leaf FROM leaves WHERE table_name = ? AND seq >= ?"
                " ORDER BY seq LIMIT ?",
                (table, start, batch),
            )
            for seq, leaf in rows:
                yield int(seq), bytes(leaf)
            if len(rows) < batch:
                return
            start = int(rows[-1][0]) + 1

    def add_cosignature(self, table: str, size: int, timestamp: int, note: str) -> None:
        self._run("DELETE FROM cosignatures WHERE table_name = ? AND size = ?", (table, size))
        self._run(
            "INSERT INTO cosignatures (table_name, size, timestamp, note) VALUES (?, ?, ?, ?)",
            (table, size, timestamp, note),
        )

    def add_alert(self, alert: Alert) -> None:
        self._run(
            "INSERT INTO alerts (table_name, kind, detail, time, size) VALUES (?, ?, ?, ?, ?)",
            (alert.table, str(alert.kind), alert.detail, alert.time, alert.size),
        )

    def alerts(self, table: str | None = None) -> list[Alert]:
        if table is None:
            rows = self._rows("SELECT table_name, kind, detail, time, size FROM alerts ORDER BY id")
        else:
            rows = self._rows(
                "SELECT table_name, kind, detail, time, size FROM alerts WHERE table_name = ?"
                " ORDER BY id",
                (table,),
            )
        return [Alert(r[0], AlertKind(r[1]), r[2], r[3], int(r[4])) for r in rows]

    def reset_table(self, table: str, time: str, reason: str) -> TableHead | None:
        head = self.heads().get(table)
        self._run(
            "INSERT INTO resets (table_name, time, reason, size, cosigned_size, halted)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                table,
                time,
                reason,
                0 if head is None else head.size,
                0 if head is None else head.cosigned_size,
                "" if head is None else head.halted,
            ),
        )
        self._run("DELETE FROM leaves WHERE table_name = ?", (table,))
        self._run("DELETE FROM heads WHERE table_name = ?", (table,))
        return head

    def resets(self, table: str) -> list[tuple[str, str, int]]:
        """(time, reason, size held) of each reset of ``table``."""
        rows = self._rows(
            "SELECT time, reason, size FROM resets WHERE table_name = ? ORDER BY id", (table,)
        )
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def _check_version(self) -> None:
        rows = self._rows("SELECT value FROM witness_meta WHERE name = 'schema'")
        if not rows:
            self._run(
                "INSERT INTO witness_meta (name, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
            )
        elif rows[0][0] != SCHEMA_VERSION:
            raise WitnessStoreError(f"the witness's store has schema {rows[0][0]!r}, not 1")


class SqliteStore(_SqlStore):
    """``witness.db`` in the witness's state directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA.format(blob="BLOB", serial="INTEGER"))
            with self.transaction():
                self._check_version()
        except sqlite3.Error as exc:
            raise WitnessStoreError(f"witness store {path}: {exc}") from None
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
        self._broken = False

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self._db.execute(sql, tuple(params))
        except sqlite3.Error as exc:
            raise WitnessStoreError(f"witness store {self.path}: {exc}") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self, "_broken", False):
            raise WitnessStoreError(f"witness store {self.path}: a commit failed; restart")
        self._execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._broken = True
            raise WitnessStoreError(f"witness store {self.path}: commit failed: {exc}") from None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()


class PostgresStore(_SqlStore):
    """The same tables in a PostgreSQL database (psycopg 3, the extra ``postgres``)."""

    placeholder = "%s"

    def __init__(self, url: str) -> None:
        try:
            import psycopg  # noqa: PLC0415 - only a witness given --db postgresql:// needs it
        except ImportError:
            raise WitnessStoreError(
                "--db postgresql:// needs psycopg (pip install 'paigow-controller[postgres]')"
            ) from None
        self._psycopg = psycopg
        self.where = _redacted(url)
        self._broken = False
        try:
            self._db = psycopg.connect(url, autocommit=True, connect_timeout=10)
            with self._db.transaction():
                # One witness per database: a second one waits here, then finds the lock held.
                row = self._db.execute("SELECT pg_try_advisory_lock(1718184818)").fetchone()
                if row is None or not row[0]:
                    raise InstanceLocked(f"another witness is using {self.where}")
                for statement in _SCHEMA.format(blob="BYTEA", serial="BIGSERIAL").split(";"):
                    self._db.execute(statement)
                self._check_version()
        except psycopg.Error as exc:
            raise WitnessStoreError(f"witness store {self.where}: {_first_line(exc)}") from None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            return self._db.execute(sql, tuple(params))
        except self._psycopg.Error as exc:
            raise WitnessStoreError(f"witness store {self.where}: {_first_line(exc)}") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._broken:
            raise WitnessStoreError(f"witness store {self.where}: a commit failed; restart")
        try:
            with self._db.transaction():
                yield
        except self._psycopg.Error as exc:
            self._broken = True
            raise WitnessStoreError(f"witness store {self.where}: {_first_line(exc)}") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.close()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _redacted(url: str) -> str:
    """A database URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.partition(":")[0]
        return f"{scheme}://{user}@{host}"
    return url


def open_store(state_dir: Path, db: str | None = None) -> Store:
    """SQLite in ``state_dir`` unless ``db`` is a ``postgresql://`` (or ``postgres://``) URL."""
    if db:
        return PostgresStore(db)
    return SqliteStore(state_dir / DB_NAME)


class StateLock:
    """The witness's state directory, for one witness at a time (``witness.lock``)."""

    def __init__(self, state_dir: Path) -> None:
        path = state_dir / LOCK_NAME
        try:
            self._lock = PidLock.acquire(path)
        except LockHeld as held:
            raise InstanceLocked(
                f"another witness (PID {held.holder}) is running on {state_dir}"
            ) from None
        except OSError as exc:
            raise WitnessStoreError(f"cannot lock {path}: {exc.strerror or exc}") from None

    def release(self) -> None:
        self._lock.release()
