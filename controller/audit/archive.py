"""Retention: the oldest whole rounds of the audit log move to signed archive files.

With ``[storage] retain_rounds`` and/or ``retain_days`` the live log keeps the rounds either
limit asks for (and always the newest ``MIN_RETAIN_ROUNDS``); the whole rounds before them, up
to a round's ``close`` or ``void`` (each has its signed checkpoint), go to the next file of
``archive/`` in the state directory, ``00000001.db``, ``00000002.db``, ...: a small SQLite file
holding the records (the leaves as the log stored them), the checkpoints signed in them (the
one at its end included), the Merkle tree's compact range before its first record and after its
last, and a note signed with the log's key that names the archive's number, its first and last
record, the tree's root at its last and the SHA-256 of the previous archive's note: a chain.

The order makes a crash at any point lose nothing:

1. ``prepare`` (any thread; it reads the live log through a read-only connection of its own
   and never writes it): the archive is written to a temporary file, fsynced, renamed into
   place, the directory fsynced; then read back from the device and checked: its note's
   signature and chain, its records byte for byte against the live log's, and the root of its
   records against the signed checkpoint at its end.
2. ``drop_step`` (the control thread, which owns the writer): at most ``DROP_CHUNK`` archived
   records are deleted from the live log per step, in one transaction that first keeps the
   compact range at the archive's end with its checkpoint (the live log's tree starts there).

A crash before 2 leaves the records in both places (verify-log checks that the two agree; the
next ``prepare`` reads the archive back again and the drops carry on), a crash in 1 leaves a
temporary file, removed next time. An archive that does not read back while the live log still
holds all of its records is set aside (``.rejected``) and written again.

What the live log cannot give up (its integrity machinery, controller/audit/log.py): the start
rebuilds the tree from the last checkpoint kept with its compact range and the records after it
(so the archive's end keeps one), the anchor must not be older than the cut (it is read, and
the cut never passes it), and the RNG takes up its sessions from the records of the last three
``rng_commit`` (the cut stays before them). Read from the live log only: ``recall`` (the newest
rounds) and ``dice-stats --window all`` (what is live); ``export`` and ``meters`` read the
archive first (the whole log).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from controller.audit.anchor import ANCHOR_FILE, AnchorFile
from controller.audit.reader import newest_of, read_records
from controller.audit.store import DB_NAME, connect_read_only, drop_cached_pages, storage_error
from controller.core.config import MIN_RETAIN_ROUNDS
from controller.core.digits import parse_bounded_int
from controller.core.merkle import CompactRange
from controller.core.note import Signer, Verifier, open_checkpoint, open_note, sign_note
from controller.core.records import RecordKind, StoredRecord
from controller.errors import ArchiveError, AuditLogError, LogIntegrityError, NoteError, NumberError
from controller.files import fsync_dir, fsync_file

log = logging.getLogger("paigow.audit")


class LiveLog(Protocol):
    """What retention needs of the live log (controller/audit/log.py's ``AuditLog``)."""

    @property
    def size(self) -> int: ...

    def drop_archived(
        self, span: tuple[int, int], frontier: bytes, note: str, *, chunk: int
    ) -> int: ...


ARCHIVE_DIR = "archive"
ARCHIVE_FORMAT = "paigow-audit-archive/1"
MAX_ARCHIVE_RECORDS = 1 << 16  # records per archive file (some 6,000 rounds, about 20 MB)
# Records deleted from the live log per step of the control thread: one transaction and its
# fsync, a median of 20 ms here (bench/bench_backup.py, 1,024 records cost the same); a key
# pressed meanwhile waits that long. The WAL is copied into the database as after commits.
DROP_CHUNK = 256
NO_PREVIOUS = "0" * 64
_NAME = re.compile(r"^[0-9]{8}\.db$")
_ENDS_A_ROUND = (str(RecordKind.CLOSE), str(RecordKind.VOID))
_SCHEMA = """
CREATE TABLE records (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, leaf BLOB NOT NULL);
CREATE TABLE checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE archive (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    note TEXT NOT NULL,
    start_frontier BLOB NOT NULL,
    end_frontier BLOB NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Archive:
    """One archive file, its signed note checked (not yet its records)."""

    path: Path
    index: int
    first: int
    last: int
    root: bytes
    previous: str  # the SHA-256 (hex) of the previous archive's note
    note: str
    start_frontier: bytes
    end_frontier: bytes

    @property
    def note_hash(self) -> str:
        return hashlib.sha256(self.note.encode("utf-8")).hexdigest()


def archive_dir(state_dir: Path | str) -> Path:
    return Path(state_dir) / ARCHIVE_DIR


def archive_paths(state_dir: Path | str) -> list[Path]:
    """The archive files of a state directory, in order (temporary and rejected ones left out)."""
    return archive_files(archive_dir(state_dir))


def archive_files(directory: Path) -> list[Path]:
    """The archive files in ``directory`` (a state directory's ``archive/``, or a copy of it
    taken away with a backup), in order."""
    try:
        names = sorted(entry.name for entry in os.scandir(directory) if _NAME.match(entry.name))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise storage_error(exc, f"cannot read {directory}") from exc
    return [directory / name for name in names]


def _note_text(origin: str, index: int, span: tuple[int, int], root: bytes, prev: str) -> str:
    encoded = base64.b64encode(root).decode()
    first, last = span
    return f"{ARCHIVE_FORMAT}\n{origin}\n{index}\n{first}\n{last}\n{encoded}\n{prev}\n"


def read_archive(path: Path, verifier: Verifier) -> Archive:
    """The archive at ``path`` with its note's signature checked (:class:`ArchiveError`)."""
    note, start, end = _archive_row(path)
    try:
        lines, archive = _opened_note(path, note, verifier, start, end)
    except (NoteError, NumberError, ValueError) as exc:
        raise ArchiveError(f"audit log: archive {path}: its note does not verify: {exc}") from None
    if lines[1] != verifier.name:
        raise ArchiveError(f"audit log: archive {path} is of {lines[1]!r}, not {verifier.name!r}")
    return archive


def _archive_row(path: Path) -> tuple[str, bytes, bytes]:
    """The archive's signed note and the tree's frontiers at its start and end."""
    try:
        db = connect_read_only(path)
    except AuditLogError as exc:
        raise ArchiveError(f"audit log: archive {path}: {exc}") from None
    try:
        row = db.execute("SELECT note, start_frontier, end_frontier FROM archive").fetchone()
    except sqlite3.Error as exc:
        raise ArchiveError(f"audit log: archive {path} is not an archive ({exc})") from None
    finally:
        db.close()
    if row is None or not isinstance(row[0], str) or not all(isinstance(f, bytes) for f in row[1:]):
        raise ArchiveError(f"audit log: archive {path} has no signed note")
    return row[0], row[1], row[2]


def _opened_note(
    path: Path, note: str, verifier: Verifier, start: bytes, end: bytes
) -> tuple[list[str], Archive]:
    """The note's lines, verified with ``verifier``, and the archive they describe (its
    frontiers read); NoteError, NumberError or ValueError when it is not an archive's."""
    text = open_note(note, verifier)
    lines = text.split("\n")
    if len(lines) != 8 or lines[0] != ARCHIVE_FORMAT or lines[7] != "":
        raise NoteError("not an archive's note")
    index, first, last = (
        parse_bounded_int(lines[i], low=1, high=2**53, what="a number") for i in (2, 3, 4)
    )
    root = base64.b64decode(lines[5], validate=True)
    if len(root) != 32 or not re.fullmatch("[0-9a-f]{64}", lines[6]) or last < first:
        raise NoteError("a field is malformed")
    archive = Archive(path, index, first, last, root, lines[6], note, start, end)
    CompactRange.from_bytes(first - 1, start)
    CompactRange.from_bytes(last, end)
    return lines, archive


def read_chain(
    state_dir: Path | str, verifier: Verifier, *, directory: Path | None = None
) -> list[Archive]:
    """Every archive of ``state_dir`` (or in ``directory``, a copy of its ``archive/``), each
    note verified and chained to the one before: its number, its first record (the last
    one's next) and the previous note's hash."""
    chain: list[Archive] = []
    paths = archive_paths(state_dir) if directory is None else archive_files(directory)
    for path in paths:
        archive = read_archive(path, verifier)
        previous = chain[-1] if chain else None
        expected = (
            (1, 1, NO_PREVIOUS, b"")
            if previous is None
            else (previous.index + 1, previous.last + 1, previous.note_hash, previous.end_frontier)
        )
        found = (archive.index, archive.first, archive.previous, archive.start_frontier)
        if found != expected or path.name != f"{archive.index:08d}.db":
            raise ArchiveError(
                f"audit log: archive {path} does not follow the one before it (number, first"
                " record, the previous note's hash or its tree): the archive chain is broken"
            )
        chain.append(archive)
    return chain


def archived_records(archive: Archive) -> Iterator[StoredRecord]:
    """The records of an archive, in order (its checks are the verifier's)."""
    db = connect_read_only(archive.path)
    try:
        yield from read_records(db)
    finally:
        db.close()


def archived_checkpoints(archive: Archive) -> dict[int, str]:
    db = connect_read_only(archive.path)
    try:
        rows = db.execute("SELECT size, note FROM checkpoints").fetchall()
    except sqlite3.Error as exc:
        raise ArchiveError(f"audit log: archive {archive.path}: {exc}") from None
    finally:
        db.close()
    notes = {}
    for size, note in rows:
        if not isinstance(size, int) or not isinstance(note, str):
            raise LogIntegrityError(None, f"archive {archive.path}: a checkpoint row is damaged")
        notes[size] = note
    return notes


# --- retention -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Policy:
    retain_rounds: int = 0
    retain_days: int = 0

    @property
    def is_on(self) -> bool:
        return self.retain_rounds > 0 or self.retain_days > 0


class Retention:
    """Moves the oldest whole rounds beyond ``policy`` to the archive (see the module's
    docstring). ``prepare`` runs anywhere (a thread of its own in the appliance), ``drop_step``
    on the thread that owns the log's writer. ``now`` gives UTC time; ``fail_at`` is for tests
    (it is called with the name of each step before it is taken)."""

    def __init__(
        self,
        state_dir: Path | str,
        signer: Signer,
        policy: Policy,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        fail_at: Callable[[str], None] = lambda step: None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.signer = signer
        self.policy = policy
        self._now = now
        self._fail_at = fail_at
        self.ready: Archive | None = None  # read back; its records may be dropped

    # --- step 1 ---------------------------------------------------------------------------

    def prepare(self) -> Archive | None:
        """An archive, read back, of the next records to drop from the live log, or None when
        the policy asks for nothing. Sets ``ready``."""
        self.ready = None
        if not self.policy.is_on:
            return None
        directory = archive_dir(self.state_dir)
        for pattern in (".*.tmp", ".*.tmp-journal"):  # a crash while one was written
            for stale in directory.glob(pattern) if directory.is_dir() else []:
                with contextlib.suppress(OSError):
                    stale.unlink()
        chain = read_chain(self.state_dir, self.signer.verifier)
        live = connect_read_only(self.state_dir / DB_NAME)
        try:
            live.execute("BEGIN")
            first, size = live.execute("SELECT min(seq), max(seq) FROM records").fetchone()
            if first is None:
                return None
            last = chain[-1] if chain else None
            if last is not None and last.last >= first:  # its drops were cut short
                self._read_back(last, live)
                self.ready = last
                return last
            if (last.last if last is not None else 0) + 1 != first:
                raise ArchiveError(
                    f"audit log: the live log starts at record {first} but the archive ends at"
                    f" {0 if last is None else last.last}"
                )
            cut = self._cut(live, int(first), int(size))
            if cut is None:
                return None
            archive = self._write(live, chain, int(first), cut)
            try:
                self._read_back(archive, live)
            except ArchiveError:
                self._fail_at("reject")
                os.replace(archive.path, archive.path.with_name(archive.path.name + ".rejected"))
                raise
            self.ready = archive
            return archive
        except sqlite3.Error as exc:
            raise storage_error(exc, "retention: cannot read the live log") from exc
        finally:
            live.close()

    def _cut(self, live: sqlite3.Connection, first: int, size: int) -> int | None:
        """The last record to archive: a round's close or void, with ``retain_rounds`` rounds
        (at least MIN_RETAIN_ROUNDS) after it, older than ``retain_days``, not past the anchor
        nor into the RNG's last three sessions, at most MAX_ARCHIVE_RECORDS on."""
        keep = max(self.policy.retain_rounds, MIN_RETAIN_ROUNDS)
        row = live.execute(
            "SELECT c.size FROM checkpoints c JOIN records r ON r.seq = c.size"
            " WHERE r.kind IN (?, ?) ORDER BY c.size DESC LIMIT 1 OFFSET ?",
            (*_ENDS_A_ROUND, keep),
        ).fetchone()
        if row is None:
            return None
        bound = min(int(row[0]), size - 1, first + MAX_ARCHIVE_RECORDS - 1)
        anchor = AnchorFile(self.state_dir / ANCHOR_FILE).read()
        if anchor is None:
            return None  # nothing published outside the log yet: nothing leaves it
        bound = min(bound, open_checkpoint(anchor.note, self.signer.verifier).size)
        sessions = newest_of(live, {RecordKind.RNG_COMMIT}, limit=3)  # through by_kind
        if sessions:
            bound = min(bound, min(int(s[0]) for s in sessions) - 1)
        cutoff = None
        if self.policy.retain_days:
            moment = self._now() - timedelta(days=self.policy.retain_days)
            cutoff = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for (seq,) in live.execute(
            "SELECT c.size FROM checkpoints c JOIN records r ON r.seq = c.size"
            " WHERE r.kind IN (?, ?) AND c.size BETWEEN ? AND ? ORDER BY c.size DESC",
            (*_ENDS_A_ROUND, first, bound),
        ):
            if cutoff is None:
                return int(seq)
            (leaf,) = live.execute("SELECT leaf FROM records WHERE seq = ?", (seq,)).fetchone()
            stored = StoredRecord(int(seq), "", bytes(leaf)).entry().get("time")
            if isinstance(stored, str) and stored < cutoff:
                return int(seq)
        return None

    def _write(
        self, live: sqlite3.Connection, chain: list[Archive], first: int, cut: int
    ) -> Archive:
        directory = archive_dir(self.state_dir)
        if not directory.is_dir():
            directory.mkdir(mode=0o700)
            fsync_dir(self.state_dir)
        previous = chain[-1] if chain else None
        index = 1 if previous is None else previous.index + 1
        start = b"" if previous is None else previous.end_frontier
        path = directory / f"{index:08d}.db"
        temporary = directory / f".{path.name}.tmp"
        tree = CompactRange.from_bytes(first - 1, start)
        self._fail_at("write")
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.executescript(_SCHEMA)
            db.execute("BEGIN")
            for row in read_records(live, start=first, stop=cut):
                db.execute("INSERT INTO records VALUES (?, ?, ?)", (row.seq, row.kind, row.leaf))
                tree.append(row.leaf)
            notes = live.execute(
                "SELECT size, note FROM checkpoints WHERE size BETWEEN ? AND ?", (first, cut)
            ).fetchall()
            db.executemany("INSERT INTO checkpoints VALUES (?, ?)", notes)
            closing = dict(notes).get(cut)
            signed = open_checkpoint(str(closing), self.signer.verifier) if closing else None
            if tree.size != cut or signed is None or signed.root_hash != tree.root():
                raise ArchiveError(
                    f"audit log: records {first}..{cut} are not the ones the checkpoint at"
                    f" {cut} signs: nothing archived"
                )
            text = _note_text(self.signer.name, index, (first, cut), tree.root(), _prev(previous))
            db.execute(
                "INSERT INTO archive VALUES (1, ?, ?, ?)",
                (sign_note(text, self.signer), start, tree.to_bytes()),
            )
            db.execute("COMMIT")
        except BaseException:
            db.close()
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        db.close()
        self._fail_at("fsync")
        fsync_file(temporary)
        self._fail_at("rename")
        os.link(temporary, path)  # never replaces an archive
        temporary.unlink()
        self._fail_at("fsync-dir")
        fsync_dir(directory)
        self._fail_at("read-back")
        return read_archive(path, self.signer.verifier)

    def _read_back(self, archive: Archive, live: sqlite3.Connection) -> None:
        """The archive as the device holds it: every record, the chain's root and the signed
        checkpoint at its end; the records the live log still holds are byte for byte its."""
        drop_cached_pages(archive.path)
        archive = read_archive(archive.path, self.signer.verifier)
        tree = CompactRange.from_bytes(archive.first - 1, archive.start_frontier)
        expected = archive.first
        remaining = read_records(live, start=archive.first, stop=archive.last)
        held = next(remaining, None)
        for row in archived_records(archive):
            if row.seq != expected:
                raise ArchiveError(f"audit log: archive {archive.path} lacks record {expected}")
            expected += 1
            tree.append(row.leaf)
            if held is not None and held.seq == row.seq:
                if held.leaf != row.leaf:
                    raise ArchiveError(
                        f"audit log: archive {archive.path}: record {row.seq} is not the live log's"
                    )
                held = next(remaining, None)
        if held is not None:
            raise ArchiveError(f"audit log: archive {archive.path} lacks record {held.seq}")
        closing = archived_checkpoints(archive).get(archive.last)
        try:
            signed = open_checkpoint(str(closing), self.signer.verifier)
        except NoteError:
            signed = None
        if (
            expected != archive.last + 1
            or tree.root() != archive.root
            or tree.to_bytes() != archive.end_frontier
            or signed is None
            or signed.root_hash != archive.root
        ):
            raise ArchiveError(
                f"audit log: archive {archive.path} does not read back as written (its records,"
                " its root or its checkpoint)"
            )

    # --- step 2 ---------------------------------------------------------------------------

    def drop_step(self, audit: LiveLog) -> int:
        """Delete at most DROP_CHUNK records of the archive ``prepare`` read back from the
        live log (the writer's connection, in one transaction). Returns how many of its records
        the live log still holds; 0 when it is done (``ready`` is cleared)."""
        archive = self.ready
        if archive is None:
            return 0
        self._fail_at("drop")
        note = archived_checkpoints(archive)[archive.last]
        span = (archive.first, archive.last)
        remaining = audit.drop_archived(span, archive.end_frontier, note, chunk=DROP_CHUNK)
        if remaining == 0:
            self.ready = None
            log.info(
                "audit log: records %d..%d are in %s and no longer in the live log",
                archive.first,
                archive.last,
                archive.path,
            )
        return remaining

    def run_until_done(self, audit: LiveLog) -> int:
        """Every step at once (a test, an operator's command): archives and drops until the
        policy is met; returns how many archives it made or finished."""
        done = 0
        while self.prepare() is not None:
            while self.drop_step(audit):
                pass
            done += 1
        return done


def _prev(previous: Archive | None) -> str:
    return NO_PREVIOUS if previous is None else previous.note_hash


# --- in the appliance ----------------------------------------------------------------------------

ASK_EVERY_RECORDS = 256  # the live log grew by this much (some 25 rounds): look again


class RetentionWorker:
    """Retention in the running controller: ``prepare`` on a thread of its own (it reads the
    live log through its own read-only connection and writes only archive files), and one
    ``drop_step`` at a time on the control thread when it calls ``between_rounds`` (the
    table's bets are open and no event waits: no result is pending, nothing is being shown).
    The two never run at once: ``_busy`` is set while the thread prepares."""

    def __init__(self, retention: Retention, audit: LiveLog) -> None:
        self.retention = retention
        self.audit = audit
        self._lock = threading.Lock()  # a leaf: nothing is called while it is held
        self._busy = False
        self._stopping = False
        self._asked_at: int | None = None
        self._wanted = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paigow-retention", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, *, timeout: float = 30.0) -> None:
        """Stop the thread; an archive it is still preparing after ``timeout`` (the stop's
        budget) is left to it, a daemon: only its temporary file is written, and the next
        ``prepare`` removes it."""
        self._stopping = True
        self._wanted.set()
        self._thread.join(timeout=timeout)

    def between_rounds(self) -> None:
        """On the control thread: one bounded step. Never raises."""
        with self._lock:
            if self._busy:
                return
        if self.retention.ready is not None:
            try:
                if self.retention.drop_step(self.audit) == 0:
                    self._asked_at = None  # done: look for the next archive at once
            except Exception as exc:  # noqa: BLE001 - logged; the records are in both places
                self.retention.ready = None
                log.error("audit log: retention: %s", exc)
            return
        size = self.audit.size
        if self._asked_at is not None and size - self._asked_at < ASK_EVERY_RECORDS:
            return
        self._asked_at = size
        with self._lock:
            self._busy = True
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                return
            try:
                self.retention.prepare()
            except Exception as exc:  # noqa: BLE001 - logged; nothing is dropped without it
                log.error("audit log: retention: %s", exc)
            finally:
                with self._lock:
                    self._busy = False
