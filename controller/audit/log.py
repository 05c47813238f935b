"""The tamper-evident audit log: SQLite in the state directory, one record per event.

This module is the writer, :class:`AuditLog`. What a commit appends (leaves, tree, checkpoints)
is computed without storage in controller/core/log_state.py; the SQLite file, its schema and
connections are controller/audit/store.py, the key and origin controller/audit/keys.py, the
read-only queries controller/audit/reader.py, the anchor controller/audit/anchor.py. The
names readers imported from here before that split are still importable from here.

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
import sqlite3
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.audit import totals
from controller.audit.anchor import (
    ANCHOR_FILE,
    Anchor,
    AnchorFile,
    AnchorFinding,
    copy_path,
)
from controller.audit.damage import Damage, sound_rows
from controller.audit.dice_stats import READ_KINDS, DiceFold
from controller.audit.keys import (
    DEFAULT_ORIGIN,
    KEY_FILE,
    MAX_KEY_FILE_BYTES,
    _read_signer,
    configured_origin,
    create_signer,
    load_signer,
    origin_for,
    require_origin,
)
from controller.audit.reader import (
    holds,
    indexed_from,
    indexes_every_record,
    newest_of,
    open_for_reading,
    open_log_file,
    peek_identity,
    read_checkpoints,
    read_latest_checkpoint,
    read_latest_context,
    read_records,
)
from controller.audit.store import (
    BY_KIND,
    DB_NAME,
    FORMAT,
    LATEST_CHECKPOINT,
    PAGE_SIZE,
    Head,
    close_keeping_wal,
    connect,
    connect_read_only,
    create_schema,
    drop_cached_pages,
    read_head,
    storage_error,
    storage_errors,
)
from controller.core import log_state
from controller.core.log_state import CHECKPOINT_AFTER, GENESIS_PREV, Appended, LogHead
from controller.core.merkle import CompactRange
from controller.core.meters import Meters
from controller.core.note import (
    Checkpoint,
    Signer,
    checkpoint_signature,
    open_checkpoint,
    sign_checkpoint,
)
from controller.core.records import RecordKind, StoredRecord, record_hash
from controller.core.snapshot import pack_context
from controller.core.state import Fault
from controller.errors import (
    AuditLogError,
    EncodingError,
    LogDamagedError,
    LogIdentityError,
    LogIntegrityError,
    NoteError,
)
from controller.ports import Committed, LoggedCheckpoint, Reopened

# The names readers and tools have imported from here since before the log was split into
# the store, the keys and the readers: kept importable from here.
__all__ = [
    "CHECKPOINT_AFTER",
    "CHECKPOINT_PAGES",
    "DB_NAME",
    "DEFAULT_ORIGIN",
    "FORMAT",
    "FRONTIER_EVERY",
    "GENESIS_PREV",
    "KEY_FILE",
    "LATEST_CHECKPOINT",
    "MAX_KEY_FILE_BYTES",
    "PAGE_SIZE",
    "AuditLog",
    "_read_signer",
    "configured_origin",
    "connect",
    "connect_read_only",
    "create_signer",
    "load_signer",
    "open_for_reading",
    "open_log_file",
    "origin_for",
    "peek_identity",
    "read_checkpoints",
    "read_latest_checkpoint",
    "read_latest_context",
    "read_records",
    "require_origin",
    "storage_errors",
    "utc_now",
]

log = logging.getLogger("paigow.audit")

# Copy the WAL into the database once it holds about this many pages (8 MiB at 512-byte
# pages, some 800 rounds), between rounds: each copy costs two syncs (the WAL's and the
# database's), so the fewer the better per round, and a reader seldom has more than this (never
# more than OVERDUE times it) to look through.
CHECKPOINT_PAGES = 16384
# A WAL that reaches OVERDUE times CHECKPOINT_PAGES (a table that is never between rounds, where
# the copy is made: ``settle_between_rounds``) is copied after the commit that took it there.
OVERDUE = 2
# A signed checkpoint is kept with the Merkle frontier every this many records (some 600
# rounds): a start rebuilds the tree from the last one and the leaves after it (a few ms).
FRONTIER_EVERY = 4096


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
        self._legacy_context: tuple[Any, Any] | None = None  # its newest context (seq, blob)
        # The meters of the records 1..size, for the totals rows (audit/totals.py); None:
        # this log keeps none (a log from before them).
        self._totals: Meters | None = None
        # a commit's records not counted into the totals yet: counted at the next commit or
        # checkpoint, off the path from the sensor's frame to the result on the display
        self._uncounted: list[StoredRecord] = []
        self._dice: DiceFold | None = None  # the dice statistics' state there, likewise
        # the records after the last frontier kept, read at open to rebuild the tree: (the
        # frontier's size, its records), until the total is counted
        self._tail: tuple[int, list[StoredRecord]] = (-1, [])
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
                self._copy_wal()
                self._transaction(self._create)
            self._load_tail()
            if locked is None:
                self._load_totals()
        except BaseException as exc:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            if isinstance(exc, LogDamagedError) and locked_error is LogDamagedError:
                return  # read only, and SQLite cannot read it: nothing is read back
            raise

    def _copy_wal(self) -> None:
        """Copy the WAL's pages into the database (a passive checkpoint: readers are not
        waited for; what they still need stays in the WAL for the next one) and count what is
        left in it. At the open: the WAL is kept across a restart (store.close_keeping_wal),
        and what it holds is copied first, so that it starts again at its beginning, in the
        file as it is (no growth). :class:`AuditLogError` if it fails."""
        try:
            row = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            raise storage_error(exc, f"cannot checkpoint {self.path}") from exc
        self._wal_pages = max(0, int(row[1]) - int(row[2])) if row is not None else 0

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
            raise storage_error(exc, f"cannot create {directory}") from exc
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
            raise storage_error(exc, f"cannot write {self.path}") from exc
        return result

    def _create(self, db: sqlite3.Connection) -> None:
        """The schema where absent; a new log gets its identity and its first record, an
        existing one must be of this origin and this key."""
        create_schema(db)
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
        totals.create(db, new_log="format" not in meta, no_dice=DiceFold().encode())
        if "format" not in meta:
            self._start_log(db)
        else:
            self._check_identity(db, meta)

    def _key_id(self) -> bytes:
        assert self.signer is not None
        return self.signer.verifier.key_id.hex().encode()

    def _start_log(self, db: sqlite3.Connection) -> None:
        assert self.signer is not None
        db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT.encode(),))
        db.execute("INSERT INTO meta VALUES ('origin', ?)", (self.origin.encode(),))
        db.execute("INSERT INTO meta VALUES ('key_id', ?)", (self._key_id(),))
        if self.signer.name != self.origin:
            raise LogIdentityError(
                f"audit log: the key is named {self.signer.name!r}, not {self.origin!r}"
            )
        first = log_state.start(
            self.origin, str(self.signer.verifier), time=self._clock(), sign=self._sign
        )
        (row,) = first.rows
        db.execute("INSERT INTO records VALUES (1, ?, ?, NULL, NULL, NULL)", (row.kind, row.leaf))
        db.execute(
            "INSERT INTO head VALUES (1, 1, NULL, NULL, ?, ?)", (first.root, first.signature)
        )

    def _check_identity(self, db: sqlite3.Connection, meta: dict[str, Any]) -> None:
        assert self.signer is not None
        if bytes(meta["format"]) != FORMAT.encode():
            raise AuditLogError(f"audit log: {self.path} is not a {FORMAT} database")
        origin = bytes(meta.get("origin", b"")).decode("utf-8", "replace")
        if origin != self.origin:
            raise LogIdentityError(
                f"audit log: {self.path} is the log of {origin!r}, not of {self.origin!r}"
            )
        if "key_id" not in meta:  # a log from before key ids were kept
            db.execute("INSERT INTO meta VALUES ('key_id', ?)", (self._key_id(),))
        elif bytes(meta["key_id"]) != self._key_id():
            raise LogIdentityError(
                f"audit log: the signing key {self.signer.verifier.key_id.hex()} is not the key"
                f" {bytes(meta['key_id']).decode('ascii', 'replace')} this log was created with"
            )

    def _load_tail(self) -> None:
        """The chain's last hash and the Merkle tree, from what is committed: the frontier of
        the last checkpoint that keeps one, and the leaves after it (at most a round, or
        FRONTIER_EVERY records). A log from before the head row keeps the frontier with its
        last record (earlier, in its meta row): what its first commit needs to move to the
        head is read here, once."""
        try:
            last, head, frontier, origin = self._read_tail(self._db)
        except sqlite3.Error as exc:
            raise storage_error(exc, f"cannot read {self.path}") from exc
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

    def _load_totals(self) -> None:
        """The meters' running total at the last record: the newest totals row (kept with
        the last checkpoint that keeps the frontier) and the records after it, those the tree
        is rebuilt from; or none, for a log that keeps none."""
        self._totals, self._dice = None, None
        self._uncounted = []  # the records as the log holds them are counted here
        size = self._tree.size
        try:
            found = totals.latest(self._db, size)
            if found is None or size - found[0] > 2 * FRONTIER_EVERY:
                return  # (a writer that stopped keeping them: not counted back at a start)
            seq, meters = found
            after, tail = self._tail
            rows = tail if after == seq else list(read_records(self._db, start=seq + 1, stop=size))
            if [row.seq for row in rows] != list(range(seq + 1, size + 1)):
                return  # records missing after the row: counted by the readers, not here
            self._totals = totals.fold(meters, rows)
            # the dice state of the same row (none when the writer met a record it could not
            # count: then none is kept from here either)
            dice = self._db.execute("SELECT dice FROM totals WHERE size = ?", (seq,)).fetchone()
            if dice is not None and dice[0] is not None:
                try:
                    self._dice = _dice_fold(DiceFold.decode(dice[0]), rows)
                except (EncodingError, ValueError, KeyError, TypeError) as exc:
                    log.warning("audit log: the dice states are not kept from here: %s", exc)
        except (sqlite3.Error, LogIntegrityError, EncodingError) as exc:
            log.warning("audit log: the meters' totals are not kept from here: %s", exc)
        finally:
            self._tail = (-1, [])

    def _read_tail(self, db: sqlite3.Connection) -> tuple[Any, Head | None, Any, Any]:
        """The last record (seq, leaf, frontier), the head row, the frontier of the whole
        tree as stored (empty when it cannot be trusted) and the origin's meta row."""
        last = db.execute(
            "SELECT seq, leaf, frontier FROM records ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        try:
            head = read_head(db)
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
        else:
            self._legacy_context = db.execute(
                "SELECT seq, context FROM records WHERE context IS NOT NULL"
                " ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            if frontier is None:
                row = db.execute("SELECT value FROM meta WHERE name = 'frontier'").fetchone()
                frontier = b"" if row is None else row[0]
        origin = db.execute("SELECT value FROM meta WHERE name = 'origin'").fetchone()
        return last, head, frontier, origin

    def _damage(self, size: int, head: Head | None) -> LogDamagedError:
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
        tail = list(read_records(db, start=tree.size + 1, stop=size))
        for record in tail:
            tree.append(record.leaf)
        self._tail = (self._frontier_size, tail)  # counted again for the meters' total
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
        head = LogHead.of_tree(
            self.origin, self._tree, self._prev, None if self._legacy_head else self._frontier_size
        )
        appended = log_state.append(
            head, entries, time=self._clock(), sign=self._sign, frontier_every=FRONTIER_EVERY
        )
        # The running totals count a commit's records before its transaction only when it
        # keeps them (with the checkpoint that keeps the frontier: a start reads the records
        # after it for the tree, and counts the same ones for the total); else later (the next
        # commit, or ``settle`` while the sensor reads again), off the path from the sensor's
        # frame to the result on the feed and the page.
        self._count_uncounted()
        keeps_total = appended.head.frontier_size != self._frontier_size
        folded = self._folded(appended.rows) if keeps_total else None
        try:
            total = None
            if folded is not None and folded[0] is not None:
                kept = None if folded[1] is None else folded[1].encode()
                total = (appended.head.size, totals.encode(folded[0]), kept)
            self._transaction(lambda db: self._store(db, appended, context, total))
        except AuditLogError as exc:
            self._poison(str(exc))
            raise
        after = appended.head
        self._tree, self._prev = after.tree(), after.prev
        self._legacy_head = False
        self._frontier_size = after.frontier_size or 0
        self._tell(appended)
        if folded is None:
            self._uncounted = list(appended.rows)
        else:
            self._totals, self._dice = folded
        anchor_error = None if appended.anchor is None else self._write_anchor(*appended.anchor)
        # A commit writes its new rows' pages (a record and its overflow page), the page before
        # them, the tree's parent page, the head and the database's header; a checkpoint is a
        # page of its own.
        self._wal_pages += 3 + 2 * len(appended.rows) + len(appended.checkpoints)
        if self._wal_pages >= CHECKPOINT_PAGES * OVERDUE:  # (a table never between rounds)
            self._checkpoint_wal()
        return Committed([row.seq for row in appended.rows], anchor_error)

    def _folded(self, rows: Sequence[StoredRecord]) -> tuple[Meters | None, DiceFold | None]:
        """The running meters and dice statistics with ``rows`` counted (None where either
        is not kept)."""
        running = None if self._totals is None else _meters_fold(self._totals, rows)
        dice = None if self._dice is None else _dice_fold(self._dice, rows)
        return running, dice

    def settle(self) -> None:
        """The last commit's records counted into the running totals (``SettlesLater``)."""
        self._count_uncounted()

    def settle_between_rounds(self) -> None:
        """The running totals, and the WAL copied into the database once it holds some
        ``CHECKPOINT_PAGES`` pages (:meth:`_checkpoint_wal`): between rounds, so that no
        screen waits for the copy (``SettlesLater``). Nothing for a log that takes no commit."""
        self._count_uncounted()
        if (
            self._wal_pages >= CHECKPOINT_PAGES
            and self.locked is None
            and self._poisoned is None
            and self._connection is not None
        ):
            self._checkpoint_wal()

    def _count_uncounted(self) -> None:
        """The last commit's records counted into the running totals, if they are not yet
        (at the next commit, checkpoint or :meth:`settle`). They are durable: whatever the
        count raises is logged, never a commit's failure (no total is kept from there, as
        where a record cannot be counted)."""
        rows, self._uncounted = self._uncounted, []
        if not rows:
            return
        try:
            self._totals, self._dice = self._folded(rows)
        except Exception:
            log.exception("audit log: the running totals could not count a commit")
            self._totals, self._dice = None, None

    def _sign(self, checkpoint: Checkpoint) -> bytes:
        assert self.signer is not None
        return checkpoint_signature(checkpoint, self.signer)

    def _store(
        self,
        db: sqlite3.Connection,
        appended: Appended,
        context: bytes | None,
        total: tuple[int, bytes, bytes | None] | None = None,
    ) -> None:
        """One commit's rows, checkpoints and head (and the meters' total at its last
        record, when it keeps the frontier), inside its transaction."""
        db.executemany(
            "INSERT INTO records VALUES (?, ?, ?, NULL, NULL, NULL)",
            [(row.seq, row.kind, row.leaf) for row in appended.rows],
        )
        if total is not None:
            db.execute("INSERT OR REPLACE INTO totals VALUES (?, ?, ?)", total)
        kept = [(row.kind, row.seq) for row in appended.rows if row.kind in BY_KIND]
        if kept:  # the rare kinds looked up by their newest, indexed (store.BY_KIND)
            db.executemany("INSERT INTO by_kind VALUES (?, ?)", kept)
        if appended.checkpoints:
            db.executemany(
                "INSERT OR REPLACE INTO checkpoints (size, note, frontier) VALUES (?, ?, ?)",
                [(kept.size, kept.note, kept.frontier) for kept in appended.checkpoints],
            )
        size = appended.head.size
        context_seq = size if context is not None else None
        if context is not None:  # compressed, to keep the head row in its page (snapshot.py)
            context = pack_context(context)
        # The head (one small row, one page) keeps the context after this step and the
        # running checkpoint (the tree's root and its signature): written in place with
        # every commit, it names the last record, so a log cut back to an earlier commit
        # is seen to be cut, and the newest records are signed.
        if not self._legacy_head:
            db.execute(
                "UPDATE head SET size = ?, context_seq = coalesce(?, context_seq),"
                " context = coalesce(?, context), root = ?, signature = ? WHERE id = 1",
                (size, context_seq, context, appended.root, appended.signature),
            )
            return
        # A log from before the head: its last record kept all this (read at open).
        stored = (None, None) if self._legacy_context is None else self._legacy_context
        previous = appended.rows[0].seq - 1
        db.execute("UPDATE records SET frontier = NULL, note = NULL WHERE seq = ?", (previous,))
        db.execute(
            "INSERT INTO head VALUES (1, ?, coalesce(?, ?), coalesce(?, ?), ?, ?)",
            (size, context_seq, stored[0], context, stored[1], appended.root, appended.signature),
        )

    def _tell(self, appended: Appended) -> None:
        """The listener told of a durable commit; its failure is logged, never the commit's."""
        if self.on_commit is None:
            return
        try:
            self.on_commit(list(appended.rows), LoggedCheckpoint(appended.head.size, appended.note))
        except Exception:
            log.exception("audit log: a commit's listener failed")

    def _checkpoint_wal(self) -> None:
        """The WAL copied into the database after a commit (:meth:`_copy_wal`). Every record
        is already durable in the WAL, so a failure loses nothing; but a failed sync may have
        let the kernel drop pages, so the log is not trusted again until :meth:`reopen`, as
        after a failed commit: the next commit reports it."""
        try:
            self._copy_wal()
        except AuditLogError as exc:
            log.error("%s", exc)
            self._poison(str(exc))

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
            # the meters' totals of the records dropped (the newest rows are what is read)
            db.execute("DELETE FROM totals WHERE size <= ?", (stop,))
            db.executemany(  # by the index's key: the rows of the records dropped only
                "DELETE FROM by_kind WHERE kind = ? AND seq <= ?",
                [(kind, stop) for kind in sorted(BY_KIND)],
            )
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
        drop_cached_pages(self.path)
        self._connection = connect(self.path)
        try:
            if self._max_page_count is not None:
                self._connection.execute(f"PRAGMA max_page_count={int(self._max_page_count)}")
            self._load_tail()
            self._load_totals()
        except BaseException:
            self._connection.close()
            self._connection = None
            raise
        self._poisoned = None
        return Reopened(acknowledged, self._tree.size)

    def latest_context(self) -> tuple[int, bytes] | None:
        """The context stored with the last step that was committed (as ``commit`` was given
        it), and its record's seq."""
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
        # a checkpoint kept with the frontier has its totals row, as a commit's has (verify-log
        # names a frontier kept without one: audit/totals_check.py)
        self._count_uncounted()
        total = None
        if self._totals is not None:
            dice = None if self._dice is None else self._dice.encode()
            total = (tree.size, totals.encode(self._totals), dice)

        def keep(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR IGNORE INTO checkpoints (size, note, frontier) VALUES (?, ?, ?)",
                (tree.size, note, tree.to_bytes()),
            )
            kept = db.execute(
                "SELECT frontier IS NOT NULL FROM checkpoints WHERE size = ?", (tree.size,)
            ).fetchone()
            if total is not None and kept is not None and kept[0]:  # (one kept without it)
                db.execute("INSERT OR IGNORE INTO totals VALUES (?, ?, ?)", total)

        try:
            self._transaction(keep)
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
        kept = self._read_anchors(places)
        if isinstance(kept, AnchorFinding):
            return kept
        if not kept:
            return self._no_anchor(places)
        best = max(kept, key=lambda k: k[2].size)
        problem = self._extends(best[1], best[2]) or _disagreement(kept, best)
        if problem is not None:
            return AnchorFinding(Fault.LOG_ROLLBACK, problem)
        return _bring_up_to_date(places, kept, best)

    def _read_anchors(self, places: list[AnchorFile]) -> list[_KeptAnchor] | AnchorFinding:
        """Each place's anchor that exists, with its checkpoint verified with the log's key;
        or the fault of the first that cannot be read or does not verify."""
        kept: list[_KeptAnchor] = []
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
        return kept

    def _no_anchor(self, places: list[AnchorFile]) -> AnchorFinding | None:
        """No anchor anywhere: a fault once a round was closed (its commit wrote one)."""
        if places and self._has_closed_rounds():
            where = " nor ".join(str(p.path) for p in places)
            return AnchorFinding(
                Fault.ANCHOR_MISSING,
                f"the log has closed rounds but no anchor: {where} is missing (deleted?);"
                " a rollback cannot be checked",
            )
        return None

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
        of them if there are fewer): what the RNG needs at start, without reading the log.
        When the log's index of these kinds (store.BY_KIND) names all there are, they are read
        through it, and "all" is from the oldest ``since_kind``: the records told (an RNG
        session's draws and reveal) follow the one they belong to (its commitment)."""
        if self._connection is None and self.locked is not None:
            return []
        names = sorted(kinds)
        marks = ",".join("?" * len(names))
        try:
            rows = newest_of(self._db, {since_kind}, limit=count)
            indexed = {since_kind, *names} <= BY_KIND and indexes_every_record(self._db)
            start = 1  # fewer than ``count``: all of them
            if len(rows) == count or indexed:
                start = int(rows[0][0]) if rows else self.size + 1
            found = (
                indexed_from(self._db, names, start)
                if indexed
                else self._db.execute(
                    f"SELECT seq, kind, leaf FROM records WHERE seq >= ? AND kind IN ({marks})"  # noqa: S608 - only ? marks
                    " ORDER BY seq",
                    (start, *names),
                ).fetchall()
            )
        except sqlite3.Error as exc:
            raise storage_error(exc, f"cannot read {self.path}") from exc
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
            rows = newest_of(self._db, {kind}, limit=1, within=within)
        except sqlite3.Error as exc:
            raise storage_error(exc, f"cannot read {self.path}") from exc
        if not rows:
            return None
        seq, found, leaf = rows[0]
        readable = self._readable([StoredRecord(int(seq), str(found), bytes(leaf))])
        return readable[0] if readable else None

    def contains(self, kind: str, fragment: bytes) -> bool:
        """Whether a record of ``kind`` holds these bytes in its canonical text (a rare look-up
        of an old RNG session by its id)."""
        if self._connection is None and self.locked is not None:
            return False
        try:
            return holds(self._db, kind, fragment)
        except sqlite3.Error as exc:
            raise storage_error(exc, f"cannot read {self.path}") from exc

    def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            if self.locked is None and self._poisoned is None:
                close_keeping_wal(connection, self.path)
            else:
                with contextlib.suppress(sqlite3.Error):
                    connection.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# An anchor's place, what it holds, and the checkpoint it keeps (verified).
_KeptAnchor = tuple[AnchorFile, Anchor, Checkpoint]


def _meters_fold(meters: Meters, rows: Sequence[StoredRecord]) -> Meters | None:
    """``meters`` with ``rows`` counted, or None at a record that cannot be (none of the
    writer's own): no total is kept from there, and the commit goes on."""
    try:
        return totals.fold(meters, rows)
    except LogIntegrityError:
        return None


def _dice_fold(fold: DiceFold, rows: Sequence[StoredRecord]) -> DiceFold | None:
    """``fold`` with ``rows`` counted as dice-stats counts them, or None at a record it cannot
    count: no state is kept from there (dice-stats counts the records, and names it)."""
    try:
        for row in rows:
            if row.kind in READ_KINDS:
                fold = fold.take(row.seq, row.kind, totals.data_of(row))
    except LogIntegrityError:
        return None
    return fold


def _disagreement(kept: list[_KeptAnchor], best: _KeptAnchor) -> str | None:
    """Two places whose anchors sign different logs of the same size, or None."""
    source, _, checkpoint = best
    for place, _, other in kept:
        if other.size == checkpoint.size and other.root_hash != checkpoint.root_hash:
            return (
                f"the anchors {source.path} and {place.path} sign different logs of"
                f" {checkpoint.size} records"
            )
    return None


def _bring_up_to_date(
    places: list[AnchorFile], kept: list[_KeptAnchor], best: _KeptAnchor
) -> AnchorFinding | None:
    """Each place missing the anchor, or holding one behind ``best``, rewritten from it: a
    finding saying so (``rewritten``), or the storage fault of the first that fails."""
    source, anchor, checkpoint = best
    held = {id(place): other.size for place, _, other in kept}
    behind = [p for p in places if held.get(id(p), -1) < checkpoint.size]
    if not behind:
        return None
    said = []
    for place in behind:
        try:
            place.write(anchor.note, anchor.hashes)
        except AuditLogError as exc:
            return AnchorFinding(Fault.STORAGE, str(exc))
        was = held.get(id(place))
        said.append(f"{place.path} ({'missing' if was is None else f'at {was} records'})")
    return AnchorFinding(
        rewritten=f"the anchor at {', '.join(said)} rewritten from {source.path}"
        f" ({checkpoint.size} records)"
    )
