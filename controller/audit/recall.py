"""Reading the log back: game recall (AGCO 13.1.1) of the last rounds, of the rounds between
two times, or of one round (in the live log or, once retention moved it, in the archive
files); the records outside rounds, by sequence number or kind (a commissioning before the
first round, a shift change), across the archives and the live log; and the export auditors
take away.

An archive file (controller/audit/archive.py) is believed only once verified: the chain of
signed notes (each note's signature with the log's verifier key, each following the one
before), and its records against its note: consecutive from its first to its last, each
carrying the hash of the one before (``prev``), and the RFC 6962 root of them, after the tree
before its first, the root its note signs (:func:`verified_archive_rows`).

Both read the log with a read-only connection (no lock; read-only media work) in one snapshot,
while the daemon may be appending. Given a :class:`~controller.audit.damage.Damage`, a damaged
record is named there and left out, and the rest is read (controller/audit/damage.py); without
one, the first is raised as :class:`LogIntegrityError`.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterator, Set
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.audit.archive import (
    ARCHIVE_DIR,
    Archive,
    archive_paths,
    archived_records,
    read_chain,
)
from controller.audit.checks import decode_entry
from controller.audit.damage import Damage, sound_rows
from controller.audit.reader import (
    DB_NAME,
    GENESIS_PREV,
    connect_read_only,
    open_for_reading,
    read_latest_checkpoint,
    read_records,
    storage_errors,
)
from controller.audit.store import storage_error
from controller.core.merkle import CompactRange, leaf_hash
from controller.core.note import Verifier
from controller.core.record_schema import RecordShapeError, RoundOpened, read
from controller.core.records import RecordKind, StoredRecord
from controller.errors import ArchiveError, AuditLogError, LogIntegrityError

DEFAULT_RECALL = 10  # AGCO 13.1.1: the current game and at least the 9 before it
MAX_RECORDS = 1000  # records one recall of records shows at most (--seq A-B, --kind --last)


def recall(
    state_dir: Path, *, last: int = DEFAULT_RECALL, damage: Damage | None = None
) -> list[dict[str, Any]]:
    """The last ``last`` rounds, oldest first, each with its records (readings included) and
    its outcome: the result, void, or still in play. The test rounds of service mode are not
    games: their records (``service_test``, and those marked ``service``) are left out, since a
    test round's number is the number the live round after it takes again."""
    damage = _damage(damage)
    db = open_for_reading(state_dir)
    try:
        starts = db.execute(
            "SELECT seq FROM records WHERE kind = ? ORDER BY seq DESC LIMIT ?",
            (str(RecordKind.ROUND_OPENED), last),
        ).fetchall()
        first = starts[-1][0] if starts else 1
        if type(first) is not int:  # a damaged row, or a damaged schema: read from the start
            damage.note(LogIntegrityError(None, f"a round_opened row's seq is {first!r}"))
            first = 1
        return _rounds(db, start=first, damage=damage)[-last:]
    finally:
        db.close()


def recall_between(
    state_dir: Path,
    *,
    since: datetime | None,
    until: datetime | None,
    last: int,
    damage: Damage | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The rounds that opened at or after ``since`` and before ``until`` (aware times; None:
    no bound), as ``recall`` gives them: the last ``last`` of them, and how many there are.
    A round's time is its ``round_opened`` record's, as the log wrote it (UTC). Memory is
    bounded by ``last``, however long the log."""
    damage = _damage(damage)
    db = open_for_reading(state_dir)
    try:
        db.execute("BEGIN")  # one snapshot of a log the controller may be appending to
        kept: deque[tuple[int, int]] = deque(maxlen=last)
        found = 0
        after: int | None = None  # the first opening after the last one kept
        for seq, number, moment in _openings(db, damage):
            if (since is None or moment >= since) and (until is None or moment < until):
                kept.append((seq, number))
                found += 1
                after = None
            elif kept and after is None:
                after = seq
        games = []
        if kept:
            numbers = {number for _, number in kept}
            stop = None if after is None else after - 1
            games = _rounds(db, start=kept[0][0], stop=stop, numbers=numbers, damage=damage)
        db.execute("COMMIT")
        return games, found
    finally:
        db.close()


def recall_round(
    state_dir: Path, number: int, *, damage: Damage | None = None
) -> dict[str, Any] | None:
    """Round ``number`` as ``recall`` gives it, or None when the log holds no such round."""
    damage = _damage(damage)
    db = open_for_reading(state_dir)
    try:
        db.execute("BEGIN")
        first: int | None = None
        after: int | None = None  # the first opening after the round's last one
        for seq, opened, _ in _openings(db, damage):
            if opened == number:
                first = seq if first is None else first
                after = None
            elif first is not None and after is None:
                after = seq
        games = []
        if first is not None:
            stop = None if after is None else after - 1
            games = _rounds(db, start=first, stop=stop, numbers={number}, damage=damage)
        db.execute("COMMIT")
        return games[0] if games else None
    finally:
        db.close()


def _damage(damage: Damage | None) -> Damage:
    return Damage(strict=True) if damage is None else damage


def _openings(db: sqlite3.Connection, damage: Damage) -> Iterator[tuple[int, int, datetime]]:
    """Each live round's opening, in the log's order: its record's sequence number, the
    round, the time (UTC)."""
    rows = db.execute(
        "SELECT seq, kind, leaf FROM records WHERE kind = ? ORDER BY seq",
        (str(RecordKind.ROUND_OPENED),),
    )
    stored = (StoredRecord(*row) for row in rows)  # read_records' types are checked below
    for row in sound_rows(_typed(stored, damage), damage, chained=False):
        entry = row.entry()
        try:
            opened = read(RoundOpened, entry["data"])
        except RecordShapeError:
            continue  # no round's opening: nothing recalls it
        if opened.service:
            continue
        try:
            moment = datetime.fromisoformat(entry["time"])
        except (TypeError, ValueError):
            damage.note(LogIntegrityError(row.seq, "a round's opening time is not a date-time"))
            continue
        if moment.tzinfo is None:
            damage.note(LogIntegrityError(row.seq, "a round's opening time names no zone"))
            continue
        yield row.seq, opened.round, moment


def _typed(rows: Iterator[StoredRecord], damage: Damage) -> Iterator[StoredRecord]:
    """The rows whose seq is a number and whose leaf is bytes, as ``read_records`` has them."""
    for row in rows:
        if type(row.seq) is not int or type(row.kind) is not str or type(row.leaf) is not bytes:
            seq = row.seq if type(row.seq) is int else None
            damage.note(LogIntegrityError(seq, "a row is not a stored record"))
            continue
        yield row


def _rounds(
    db: sqlite3.Connection,
    *,
    start: int,
    stop: int | None = None,
    numbers: Set[int] | None = None,
    damage: Damage,
) -> list[dict[str, Any]]:
    """The rounds whose records lie in ``start..stop`` (those in ``numbers`` only, if given),
    oldest first."""
    rows = read_records(db, start=start, stop=stop, on_bad=damage.note)
    return _games(sound_rows(rows, damage), numbers)


_OUTCOMES: dict[str, str] = {
    RecordKind.RESULT: "result",
    RecordKind.VOID: "void",
    RecordKind.CLOSE: "closed",
}


def _games(rows: Iterator[StoredRecord], numbers: Set[int] | None) -> list[dict[str, Any]]:
    """The rounds of ``rows`` (sound records, in order), oldest first."""
    rounds: dict[int, dict[str, Any]] = {}
    for row in rows:
        entry = row.entry()
        data = entry["data"]
        number = data.get("round")
        if not isinstance(number, int) or row.kind == RecordKind.SERVICE_TEST:
            continue
        if data.get("service") is True or (numbers is not None and number not in numbers):
            continue
        game = rounds.setdefault(
            number, {"round": number, "outcome": "in play", "result": None, "records": []}
        )
        game["records"].append(
            {"seq": row.seq, "kind": row.kind, "time": entry["time"], "data": data}
        )
        if row.kind == RecordKind.RESULT:
            game["result"] = data
        game["outcome"] = _OUTCOMES.get(row.kind, game["outcome"])
    return [rounds[n] for n in sorted(rounds)]


# --- the archives, and the records outside rounds -----------------------------------------------


def verified_chain(state_dir: Path, verifier: Verifier | None) -> list[Archive]:
    """The archive files of ``state_dir``, their signed notes verified and chained (none: an
    empty list). Without the verifier key, archives are not believed: an error saying so."""
    chain: list[Archive] = []
    if archive_paths(state_dir):
        if verifier is None:
            raise AuditLogError(
                "recall: the archive files are read only once verified with the log's verifier"
                " key: pass --key FILE (what export-key prints)"
            )
        try:
            chain = read_chain(state_dir, verifier)
        except ArchiveError as exc:
            raise LogIntegrityError(None, str(exc)) from None
    return chain


def check_no_gap(state_dir: Path, chain: list[Archive], low: int, high: int | None) -> None:
    """The live log starts where the archive files end: records between them missing (an
    archive file removed, or the whole archive/) and asked for (``low``..``high``) are an
    error naming them, never an empty answer."""
    archived = chain[-1].last if chain else 0
    db = open_for_reading(state_dir)
    try:
        with storage_errors(f"cannot read {Path(state_dir) / DB_NAME}"):
            (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
    finally:
        db.close()
    if not isinstance(first, int) or first <= archived + 1:
        return
    if first - 1 < low or (high is not None and archived + 1 > high):
        return  # what was asked for lies outside the gap
    ends = f"the archive files end at record {archived}" if chain else "there are no archive files"
    raise LogIntegrityError(
        None,
        f"records {archived + 1}..{first - 1} are missing: the log starts at record {first}"
        f" and {ends} (an archive file removed from {Path(state_dir) / ARCHIVE_DIR}?)",
    )


def verified_archive_rows(archive: Archive, previous_hash: str | None) -> list[StoredRecord]:
    """The records of ``archive``, once they are what its signed note says: consecutive from
    its first to its last, each canonical and carrying the hash of the one before
    (``previous_hash``: the previous archive's last record's, or None when not read; the first
    archive's first record carries the genesis), and the RFC 6962 root of them, after the tree
    before its first, the root the note signs. :class:`LogIntegrityError` naming the record."""
    tree = CompactRange.from_bytes(archive.first - 1, archive.start_frontier)
    rows: list[StoredRecord] = []
    expected_prev = GENESIS_PREV if archive.first == 1 else previous_hash
    for row in archived_records(archive):
        if row.seq != archive.first + len(rows):
            raise LogIntegrityError(
                archive.first + len(rows), f"is missing from the archive {archive.path}"
            )
        entry = decode_entry(row)
        if expected_prev is not None and entry.prev != expected_prev:
            raise LogIntegrityError(
                row.seq, f"does not carry the hash of the record before it ({archive.path})"
            )
        expected_prev = entry.hash
        tree.append(row.leaf)
        rows.append(row)
        if row.seq > archive.last:
            break
    if not rows or rows[-1].seq != archive.last or tree.root() != archive.root:
        raise LogIntegrityError(
            archive.last, f"the archive {archive.path} is not the records its signed note signs"
        )
    return rows


def archived_round(
    state_dir: Path, number: int, *, verifier: Verifier | None
) -> dict[str, Any] | None:
    """Round ``number`` from the archive files (newest first, each verified before it is
    read), as ``recall`` gives it, with the archive named; None when none holds it."""
    chain = verified_chain(state_dir, verifier)
    for archive in reversed(chain):
        games = _games(iter(verified_archive_rows(archive, None)), {number})
        if games:
            return {**games[0], "archive": archive.path.name}
    check_no_gap(state_dir, chain, 1, None)  # not found: it may be among records missing
    return None


def recall_records(
    state_dir: Path,
    *,
    verifier: Verifier | None,
    seqs: tuple[int, int] | None = None,
    kinds: Set[str] | None = None,
    last: int = DEFAULT_RECALL,
    damage: Damage | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Records by sequence number (``seqs``, both ends included) and/or kind (``kinds``),
    across the archive files (verified first) and the live log, oldest first: the last
    ``last`` of those found, and how many were found. Each says where it was read (an archive
    file's name, or ``log``). Memory is bounded by ``last``."""
    damage = _damage(damage)
    low, high = seqs if seqs is not None else (1, None)
    kept: deque[dict[str, Any]] = deque(maxlen=last)
    found = 0

    def take(row: StoredRecord, where: str) -> None:
        nonlocal found
        if kinds is not None and row.kind not in kinds:
            return
        entry = row.entry()
        found += 1
        kept.append(
            {
                "seq": row.seq,
                "kind": row.kind,
                "time": entry["time"],
                "round": entry["data"].get("round"),
                "data": entry["data"],
                "from": where,
            }
        )

    archived = 0
    previous: str | None = None
    chain = verified_chain(state_dir, verifier)
    check_no_gap(state_dir, chain, low, high)
    for archive in chain:
        if archive.last < low or (high is not None and archive.first > high):
            previous = None  # not read: the next one's first link is not checked
            archived = archive.last
            continue
        rows = verified_archive_rows(archive, previous)
        previous = rows[-1].hash
        archived = archive.last
        for row in rows:
            if row.seq >= low and (high is None or row.seq <= high):
                take(row, f"archive/{archive.path.name}")
    if high is None or high > archived:
        db = open_for_reading(state_dir)
        try:
            db.execute("BEGIN")
            live = read_records(db, start=max(low, archived + 1), stop=high, on_bad=damage.note)
            for row in sound_rows(live, damage, chained=False):
                take(row, "log")
            db.execute("COMMIT")
        finally:
            db.close()
    return list(kept), found


def export_lines(state_dir: Path, *, damage: Damage | None = None) -> Iterator[dict[str, Any]]:
    """One object per record: the record's fields, its leaf as stored (the canonical text), its
    SHA-256 (the next record's ``prev``), its RFC 6962 leaf hash, and the signed checkpoint made
    at it, if any (the latest one with the last record). The records moved to the archive
    (controller/audit/archive.py) come first: the export is the whole log. A damaged record
    has no line (it has no fields to give): ``damage`` names it.

    It streams, in memory that does not grow with the log: the records are read in the order
    of their integer key through one cursor, and the checkpoints kept with them through a
    second one, in the same order, taken up as the records reach them (:class:`_Notes`);
    nothing holds all of either."""
    damage = _damage(damage)
    db = open_for_reading(state_dir)
    try:
        db.execute("BEGIN")
        try:
            _check_checkpoints(db)
            checkpoints = _Notes(db, "SELECT size, note FROM checkpoints WHERE size > 0")
        except LogIntegrityError as exc:  # a malformed row: the records are exported without
            damage.note(exc)  # the checkpoints kept with them (verify-log names it too)
            checkpoints = _Notes(None, "")
        try:
            latest = read_latest_checkpoint(db)
        except LogIntegrityError as exc:  # the head row: the records are exported without it
            damage.note(exc)
            latest = None
        size = int(db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0])
        archived = 0
        for path in archive_paths(state_dir):
            archive = connect_read_only(path)
            try:
                notes = _Notes(archive, "SELECT size, note FROM checkpoints")
                rows = read_records(archive, start=archived + 1, on_bad=damage.note)
                for row in sound_rows(rows, damage):
                    yield export_line(row, notes.at(row.seq))
                (top,) = archive.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
                archived = max(archived, int(top))
            except sqlite3.Error as exc:
                raise AuditLogError(f"audit log: cannot read the archive {path}: {exc}") from None
            finally:
                archive.close()
        rows = read_records(db, start=archived + 1, stop=size, on_bad=damage.note)
        for row in sound_rows(rows, damage):
            note = checkpoints.at(row.seq) or (latest if row.seq == size else None)
            yield export_line(row, note)
        db.execute("COMMIT")
    finally:
        db.close()


def _check_checkpoints(db: sqlite3.Connection) -> None:
    """What ``read_checkpoints`` checks of every row (a size and a note), asked of SQLite so
    that no row is held: the first one that is not, as :class:`LogIntegrityError`."""
    try:
        bad = db.execute(
            "SELECT size, note FROM checkpoints WHERE size > 0"
            " AND (typeof(size) != 'integer' OR typeof(note) != 'text') ORDER BY size LIMIT 1"
        ).fetchone()
    except sqlite3.Error as exc:
        raise storage_error(exc, "cannot read the checkpoints") from exc
    if bad is not None:
        raise LogIntegrityError(None, f"a checkpoint row ({bad[0]!r}) is not a size and a note")


class _Notes:
    """The checkpoint notes of one log file, read in the order of their sizes (the table's
    integer key) as the records reach them: ``at(seq)`` is the note kept at record ``seq``,
    or None; the seqs asked for must rise. One row is held at a time."""

    def __init__(self, db: sqlite3.Connection | None, query: str) -> None:
        self._rows: Iterator[tuple[Any, Any]] = (
            iter(()) if db is None else db.execute(query + " ORDER BY size")
        )
        self._next: tuple[Any, Any] | None = next(self._rows, None)

    def at(self, seq: int) -> str | None:
        while self._next is not None and self._next[0] < seq:
            self._next = next(self._rows, None)
        if self._next is None or self._next[0] != seq:
            return None
        return self._next[1]  # type: ignore[no-any-return]


def export_line(row: StoredRecord, checkpoint: str | None) -> dict[str, Any]:
    """The export's line of one record (``verify-log --export`` expects exactly this)."""
    entry = row.entry()
    line = {
        "seq": row.seq,
        "kind": row.kind,
        "time": entry["time"],
        "data": entry["data"],
        "prev": entry["prev"],
        "hash": row.hash,
        "leaf_hash": leaf_hash(row.leaf).hex(),
        "leaf": row.leaf.decode("utf-8"),
    }
    if checkpoint is not None:
        line["checkpoint"] = checkpoint
    return line
