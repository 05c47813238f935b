"""Where the witness keeps what it holds: every table's accepted records (its leaves, with the
Merkle root after each), the candidates no signed checkpoint covers yet, its head (size, last
hash, compact range, the checkpoint it cosigned and whether it stopped cosigning, the
checkpoint that waits for its records, when the table was last heard from, its last signed
status), the cosignatures it published (each with the compact range at its size), the alerts
it raised (severity, when cleared, who acknowledged them and when) and the operators' resets.
The same schema in SQLite (``witness.db`` in the state directory: WAL, ``synchronous=FULL``,
one writer) or PostgreSQL (``--db postgresql://...``, for a casino that keeps its records
there).

Schema 2 (``witness_meta``'s ``schema``). A store of schema 1 is migrated in place, in one
transaction, when it is opened: the new columns are added with their defaults (no status
taken yet, never heard: the silence clock starts at that start, no waiting checkpoint), the
candidates table and the indexes are made, each alert gets its kind's severity, and the gap
and silence alerts of schema 1 are marked cleared at the migration (their conditions were
never followed to an end). Schema 1 kept as facts the records past the last cosigned
checkpoint; the witness (tables.py) puts those back among the candidates at its next start,
where the table's next signed checkpoint decides them.

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from controller.errors import InstanceLocked, LockHeld, WitnessStoreError
from controller.files import PidLock
from controller.fleet.protocol import Alert, AlertKind
from controller.witness.ports import (
    SEVERITY,
    CandidateRow,
    Severity,
    Store,
    StoredAlert,
    TableHead,
)

DB_NAME = "witness.db"
LOCK_NAME = "witness.lock"
SCHEMA_VERSION = "2"

# {blob}, {serial} and {empty} differ between SQLite and PostgreSQL; nothing else does.
_META = """
CREATE TABLE IF NOT EXISTS witness_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
)"""

_TABLES = [
    """CREATE TABLE IF NOT EXISTS heads (
    table_name TEXT PRIMARY KEY,
    size BIGINT NOT NULL,
    last_hash TEXT NOT NULL,
    tree {blob} NOT NULL,
    cosigned_size BIGINT NOT NULL,
    cosigned_root {blob} NOT NULL,
    cosigned_note TEXT NOT NULL,
    halted TEXT NOT NULL,
    pending_note TEXT NOT NULL DEFAULT '',
    pending_since_ms BIGINT NOT NULL DEFAULT 0,
    last_heard_ms BIGINT NOT NULL DEFAULT 0,
    status_connection BIGINT NOT NULL DEFAULT -1,
    status_seq BIGINT NOT NULL DEFAULT 0,
    status_note TEXT NOT NULL DEFAULT ''
)""",
    """CREATE TABLE IF NOT EXISTS leaves (
    table_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    leaf {blob} NOT NULL,
    root {blob} NOT NULL,
    PRIMARY KEY (table_name, seq)
)""",
    """CREATE TABLE IF NOT EXISTS cosignatures (
    table_name TEXT NOT NULL,
    size BIGINT NOT NULL,
    timestamp BIGINT NOT NULL,
    note TEXT NOT NULL,
    tree {blob} NOT NULL DEFAULT {empty},
    PRIMARY KEY (table_name, size)
)""",
    """CREATE TABLE IF NOT EXISTS alerts (
    id {serial} PRIMARY KEY,
    table_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    time TEXT NOT NULL,
    size BIGINT NOT NULL,
    severity TEXT NOT NULL DEFAULT 'warning',
    cleared TEXT NOT NULL DEFAULT '',
    acked_by TEXT NOT NULL DEFAULT '',
    acked_at TEXT NOT NULL DEFAULT ''
)""",
    """CREATE TABLE IF NOT EXISTS resets (
    id {serial} PRIMARY KEY,
    table_name TEXT NOT NULL,
    time TEXT NOT NULL,
    reason TEXT NOT NULL,
    size BIGINT NOT NULL,
    cosigned_size BIGINT NOT NULL,
    halted TEXT NOT NULL
)""",
]

# Schema 2 beyond schema 1 (made by _TABLES in a new store, added by _MIGRATE_1 in an old one).
_NEW_IN_2 = [
    """CREATE TABLE IF NOT EXISTS candidates (
    table_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL,
    prev TEXT NOT NULL,
    kind TEXT NOT NULL,
    leaf {blob} NOT NULL,
    leaf_hash {blob} NOT NULL,
    note TEXT NOT NULL,
    arrival BIGINT NOT NULL,
    received_ms BIGINT NOT NULL,
    PRIMARY KEY (table_name, seq, hash)
)""",
    "CREATE INDEX IF NOT EXISTS leaves_by_kind ON leaves (table_name, kind, seq)",
    "CREATE INDEX IF NOT EXISTS alerts_standing ON alerts (cleared, acked_by)",
    "CREATE INDEX IF NOT EXISTS alerts_by_table ON alerts (table_name, kind)",
]

_MIGRATE_1 = [
    "ALTER TABLE heads ADD COLUMN pending_note TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE heads ADD COLUMN pending_since_ms BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE heads ADD COLUMN last_heard_ms BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE heads ADD COLUMN status_connection BIGINT NOT NULL DEFAULT -1",
    "ALTER TABLE heads ADD COLUMN status_seq BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE heads ADD COLUMN status_note TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE cosignatures ADD COLUMN tree {blob} NOT NULL DEFAULT {empty}",
    "ALTER TABLE alerts ADD COLUMN severity TEXT NOT NULL DEFAULT 'warning'",
    "ALTER TABLE alerts ADD COLUMN cleared TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE alerts ADD COLUMN acked_by TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE alerts ADD COLUMN acked_at TEXT NOT NULL DEFAULT ''",
]

_SELECT_HEADS = (
    "SELECT table_name, size, last_hash, tree, cosigned_size, cosigned_root, cosigned_note,"
    " halted, pending_note, pending_since_ms, last_heard_ms, status_connection, status_seq,"
    " status_note FROM heads"
)
_INSERT_HEAD = (
    "INSERT INTO heads (table_name, size, last_hash, tree, cosigned_size, cosigned_root,"
    " cosigned_note, halted, pending_note, pending_since_ms, last_heard_ms, status_connection,"
    " status_seq, status_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_ALERTS = (
    "SELECT id, table_name, kind, detail, time, size, severity, cleared, acked_by, acked_at"
    " FROM alerts"
)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _alert(row: Sequence[Any]) -> StoredAlert:
    alert = Alert(str(row[1]), AlertKind(row[2]), str(row[3]), str(row[4]), int(row[5]))
    return StoredAlert(int(row[0]), alert, Severity(row[6]), str(row[7]), str(row[8]), str(row[9]))


class _SqlStore:
    """The queries, written once with ``?`` placeholders; a subclass runs them."""

    placeholder = "?"
    dialect: ClassVar[dict[str, str]] = {}

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _q(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self._execute(self._q(sql), params).fetchall())

    def _run(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._execute(self._q(sql), params)

    # --- the schema --------------------------------------------------------------------------

    def _make_schema(self) -> None:
        """Inside a transaction: a new store made at schema 2, one of schema 1 migrated."""
        self._run(_META)
        rows = self._rows("SELECT value FROM witness_meta WHERE name = 'schema'")
        version = rows[0][0] if rows else None
        if version not in (None, "1", SCHEMA_VERSION):
            raise WitnessStoreError(
                f"the witness's store has schema {version!r}, not {SCHEMA_VERSION}"
            )
        if version == "1":
            self._migrate_from_1()
        for statement in (*_TABLES, *_NEW_IN_2):
            self._run(statement.format(**self.dialect))
        if version is None:
            self._run(
                "INSERT INTO witness_meta (name, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
            )

    def _migrate_from_1(self) -> None:
        for statement in _MIGRATE_1:
            self._run(statement.format(**self.dialect))
        for kind, severity in SEVERITY.items():
            self._run("UPDATE alerts SET severity = ? WHERE kind = ?", (str(severity), str(kind)))
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self._run(
            "UPDATE alerts SET cleared = ? WHERE kind IN (?, ?)",
            (now, str(AlertKind.GAP), str(AlertKind.SILENCE)),
        )
        self._run("UPDATE witness_meta SET value = ? WHERE name = 'schema'", (SCHEMA_VERSION,))

    # --- heads -------------------------------------------------------------------------------

    def heads(self) -> dict[str, TableHead]:
        rows = self._rows(_SELECT_HEADS)
        return {
            str(r[0]): TableHead(
                str(r[0]),
                int(r[1]),
                str(r[2]),
                bytes(r[3]),
                int(r[4]),
                bytes(r[5]),
                str(r[6]),
                str(r[7]),
                str(r[8]),
                int(r[9]) / 1000,
                int(r[10]) / 1000,
                int(r[11]),
                int(r[12]),
                str(r[13]),
            )
            for r in rows
        }

    def put_head(self, head: TableHead) -> None:
        self._run("DELETE FROM heads WHERE table_name = ?", (head.table,))
        self._run(
            _INSERT_HEAD,
            (
                head.table,
                head.size,
                head.last_hash,
                head.tree,
                head.cosigned_size,
                head.cosigned_root,
                head.cosigned_note,
                head.halted,
                head.pending_note,
                _ms(head.pending_since),
                _ms(head.last_heard),
                head.status_connection,
                head.status_seq,
                head.status_note,
            ),
        )

    # --- accepted records --------------------------------------------------------------------

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

    def rows(self, table: str, start: int, stop: int) -> list[tuple[int, str, bytes]]:
        rows = self._rows(
            "SELECT seq, kind, leaf FROM leaves WHERE table_name = ? AND seq >= ? AND seq <= ?"
            " ORDER BY seq",
            (table, start, stop),
        )
        return [(int(r[0]), str(r[1]), bytes(r[2])) for r in rows]

    def drop_leaves_after(self, table: str, size: int) -> None:
        self._run("DELETE FROM leaves WHERE table_name = ? AND seq > ?", (table, size))

    # --- candidates --------------------------------------------------------------------------

    def add_candidate(self, table: str, row: CandidateRow, leaf: bytes, note: str) -> None:
        self._run(
            "INSERT INTO candidates (table_name, seq, hash, prev, kind, leaf, leaf_hash, note,"
            " arrival, received_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                table,
                row.seq,
                row.hash,
                row.prev,
                row.kind,
                leaf,
                row.leaf_hash,
                note,
                row.arrival,
                _ms(row.received),
            ),
        )

    def drop_candidates(self, table: str, keys: Sequence[tuple[int, str]]) -> None:
        for seq, hash_ in keys:
            self._run(
                "DELETE FROM candidates WHERE table_name = ? AND seq = ? AND hash = ?",
                (table, seq, hash_),
            )

    def drop_candidates_between(self, table: str, low: int, high: int) -> None:
        self._run(
            "DELETE FROM candidates WHERE table_name = ? AND seq >= ? AND seq <= ?",
            (table, low, high),
        )

    def candidate(self, table: str, seq: int, hash: str) -> tuple[bytes, str] | None:
        rows = self._rows(
            "SELECT leaf, note FROM candidates WHERE table_name = ? AND seq = ? AND hash = ?",
            (table, seq, hash),
        )
        return (bytes(rows[0][0]), str(rows[0][1])) if rows else None

    def candidates(self) -> dict[str, list[CandidateRow]]:
        rows = self._rows(
            "SELECT table_name, seq, hash, prev, kind, leaf_hash, arrival,"
            " length(leaf) + length(note), received_ms FROM candidates ORDER BY arrival"
        )
        held: dict[str, list[CandidateRow]] = {}
        for r in rows:
            row = CandidateRow(
                int(r[1]), str(r[2]), str(r[3]), str(r[4]), bytes(r[5]), int(r[6]), int(r[7]),
                int(r[8]) / 1000,
            )  # fmt: skip
            held.setdefault(str(r[0]), []).append(row)
        return held

    # --- cosignatures ------------------------------------------------------------------------

    def add_cosignature(
        self, table: str, size: int, timestamp: int, note: str, tree: bytes = b""
    ) -> None:
        self._run("DELETE FROM cosignatures WHERE table_name = ? AND size = ?", (table, size))
        self._run(
            "INSERT INTO cosignatures (table_name, size, timestamp, note, tree)"
            " VALUES (?, ?, ?, ?, ?)",
            (table, size, timestamp, note, tree),
        )

    def last_cosignature(self, table: str) -> tuple[int, int, str] | None:
        rows = self._rows(
            "SELECT size, timestamp, note FROM cosignatures WHERE table_name = ?"
            " ORDER BY size DESC LIMIT 1",
            (table,),
        )
        return (int(rows[0][0]), int(rows[0][1]), str(rows[0][2])) if rows else None

    def tree_at_or_below(self, table: str, size: int) -> tuple[int, bytes] | None:
        rows = self._rows(
            "SELECT size, tree FROM cosignatures WHERE table_name = ? AND size <= ?"
            " AND size > 0 AND length(tree) > 0 ORDER BY size DESC LIMIT 1",
            (table, size),
        )
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    # --- alerts ------------------------------------------------------------------------------

    def add_alert(self, alert: Alert, severity: Severity) -> StoredAlert:
        rows = self._rows(
            "INSERT INTO alerts (table_name, kind, detail, time, size, severity)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (alert.table, str(alert.kind), alert.detail, alert.time, alert.size, str(severity)),
        )
        return StoredAlert(int(rows[0][0]), alert, severity)

    def alerts(self, table: str | None = None) -> list[StoredAlert]:
        if table is None:
            rows = self._rows(_SELECT_ALERTS + " ORDER BY id")
        else:
            rows = self._rows(_SELECT_ALERTS + " WHERE table_name = ? ORDER BY id", (table,))
        return [_alert(r) for r in rows]

    def standing_alerts(self) -> list[StoredAlert]:
        rows = self._rows(_SELECT_ALERTS + " WHERE cleared = '' ORDER BY id")
        return [_alert(r) for r in rows]

    def recent_alerts(self, closed: int) -> list[StoredAlert]:
        open_rows = self._rows(_SELECT_ALERTS + " WHERE cleared = '' AND acked_by = '' ORDER BY id")
        closed_rows = self._rows(
            _SELECT_ALERTS + " WHERE cleared <> '' OR acked_by <> '' ORDER BY id DESC LIMIT ?",
            (closed,),
        )
        return sorted((_alert(r) for r in open_rows + closed_rows), key=lambda a: a.id)

    def alert_tables(self, kind: AlertKind) -> set[str]:
        rows = self._rows("SELECT DISTINCT table_name FROM alerts WHERE kind = ?", (str(kind),))
        return {str(r[0]) for r in rows}

    def clear_alert(self, alert_id: int, time: str) -> None:
        self._run("UPDATE alerts SET cleared = ? WHERE id = ? AND cleared = ''", (time, alert_id))

    def ack_alert(self, alert_id: int, user: str, time: str) -> StoredAlert | None:
        self._run(
            "UPDATE alerts SET acked_by = ?, acked_at = ? WHERE id = ? AND acked_by = ''",
            (user, time, alert_id),
        )
        rows = self._rows(_SELECT_ALERTS + " WHERE id = ?", (alert_id,))
        return _alert(rows[0]) if rows else None

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
        self._run("DELETE FROM candidates WHERE table_name = ?", (table,))
        self._run("DELETE FROM heads WHERE table_name = ?", (table,))
        if head is not None:  # the table's status and its silence clock are not its log's
            kept = TableHead(
                table,
                last_heard=head.last_heard,
                status_connection=head.status_connection,
                status_seq=head.status_seq,
                status_note=head.status_note,
            )
            self.put_head(kept)
        return head


class SqliteStore(_SqlStore):
    """``witness.db`` in the witness's state directory."""

    dialect: ClassVar[dict[str, str]] = {"blob": "BLOB", "serial": "INTEGER", "empty": "X''"}

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._broken = False
            with self.transaction():
                self._make_schema()
        except sqlite3.Error as exc:
            raise WitnessStoreError(f"witness store {path}: {exc}") from None
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)

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
    dialect: ClassVar[dict[str, str]] = {
        "blob": "BYTEA",
        "serial": "BIGSERIAL",
        "empty": "'\\x'::bytea",
    }

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
                self._make_schema()
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
