"""The table's meters, counted again from the log alone (``paigow-controller meters``).

Each record is counted with the one function the round state machine counts its own records
with (controller/core/meters.py ``counted``): games closed, no rolls by reason, corrections,
round voids, lid openings, tamper-loop openings, power-ups and entries into service mode. The
records moved to the archive (controller/audit/archive.py) are read first, as ``export`` reads
them: the meters are the table's whole life. With ``since``, only the records whose time (UTC,
as the log wrote it) is at or after it count.

Without ``since``, the recount is compared with the meters the table itself keeps: those of
the latest context snapshot (controller/core/snapshot.py, ``RoundContext.meters``) against the
records up to the one it was stored with (``context_agrees``; None when that context is from
before the table kept meters, snapshot version 5). The table counts from the first start of a
version that keeps them, so on a log begun by an older version the two differ by what the
older one recorded; the stored meters are in the report (``context_meters``) to read both.

Without ``since``, on a log that keeps the meters' running totals (controller/audit/totals.py),
the count starts from the newest row at the stored context's record or before it (the meters
of the records up to it), and counts only the records after it (some log.FRONTIER_EVERY at
most, while the table commits its context): its cost does not grow with the log. The rows are
not signed; verify-log counts the records again in its one pass and names a row that is not
their count (controller/audit/totals_check.py). A record damaged before the row is named by
verify-log, not here.
With ``since``, or on a log from before the totals, every record is read, as below.

Read-only (a read-only connection, read-only media, a copy of the state directory), in one
snapshot of a log the controller may be appending to. Given a
:class:`~controller.audit.damage.Damage`, a damaged record is named there and not counted, and
the rest is counted (every record read is checked by itself and against the hash chain,
whatever its kind, as ``export`` checks it); without one, the first is raised.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.audit import totals
from controller.audit.archive import archive_paths
from controller.audit.damage import Damage, sound_rows
from controller.audit.reader import open_for_reading, read_latest_context
from controller.audit.store import connect_read_only
from controller.core.meters import Meters, counted
from controller.core.records import StoredRecord
from controller.core.snapshot import decode_context
from controller.errors import AuditLogError, LogIntegrityError, SnapshotError

METERS_SINCE = 5  # the first context snapshot version that keeps the meters
# Every record, not only the kinds counted: each is checked by itself and against the hash
# chain, so that a damaged record is named whatever its kind (a kind altered in its column to
# one not counted would otherwise go uncounted and unnamed).
_SELECT = "SELECT seq, kind, leaf FROM records WHERE seq > ? ORDER BY seq"


def meters_report(
    state_dir: Path, *, since: datetime | None = None, damage: Damage | None = None
) -> dict[str, Any]:
    """The meters of the log in ``state_dir`` (from ``since`` on, an aware time), and, counted
    from the first record, whether the table's own stored meters agree."""
    damage = Damage(strict=True) if damage is None else damage
    db = open_for_reading(state_dir)
    try:
        db.execute("BEGIN")  # one snapshot of the live log
        stored = _stored_context(db, Path(state_dir), damage)
        stored_at = None if stored is None else stored[0]
        counts = None if since is not None else _from_totals(state_dir, db, damage, stored_at)
        if counts is None:
            counts = _count(state_dir, db, damage, since, stored_at)
        meters, at_context, size = counts
        (last,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
        db.execute("COMMIT")
    finally:
        db.close()
    context = None if stored is None or since is not None else _context_meters(stored, damage)
    return {
        **meters.as_record(),
        "since": None if since is None else since.isoformat(timespec="seconds"),
        "records": max(size, int(last)),
        "context_seq": None if since is not None else stored_at,
        "context_meters": None if context is None else context.as_record(),
        "context_agrees": None if context is None else context == at_context,
        **({"damaged": damage.as_record()} if damage else {}),
    }


def _stored_context(
    db: sqlite3.Connection, state_dir: Path, damage: Damage
) -> tuple[int, bytes] | None:
    """The context stored with the last step (seq, blob), or None; a damaged head row is
    noted, and the meters are counted without the stored ones."""
    try:
        return read_latest_context(db, state_dir)
    except LogIntegrityError as exc:
        damage.note(exc)
        return None


def _count(
    state_dir: Path,
    db: sqlite3.Connection,
    damage: Damage,
    since: datetime | None,
    stored_at: int | None,
) -> tuple[Meters, Meters, int]:
    """The meters of the records from ``since`` on, the meters as they were at the stored
    context's record (``stored_at``), and the last record's seq."""
    meters, at_context, size = Meters(), Meters(), 0
    for seq, kind, data, time in _records(state_dir, db, damage):
        size = max(size, seq)
        if since is not None and not _in_period(seq, time, since, damage):
            continue
        meters = counted(meters, kind, data)
        if stored_at is not None and seq <= stored_at:
            at_context = meters
    return meters, at_context, size


def _from_totals(
    state_dir: Path, db: sqlite3.Connection, damage: Damage, stored_at: int | None
) -> tuple[Meters, Meters, int] | None:
    """``_count``'s answer (without ``since``) from the newest totals row (at the stored
    context's record or before it, so that the meters at the context are counted too) and the
    records after it (controller/audit/totals.py); None when the log keeps no row to start
    from: a log from before them, a row damaged, or records between the row and the live
    log's first (in the archive only)."""
    # (two queries: SQLite finds a min or a max alone through the key, not both in one)
    (size,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
    (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
    try:
        found = totals.latest(db, int(size) if stored_at is None else min(int(size), stored_at))
    except LogIntegrityError:
        return None  # the records are counted instead (verify-log names the row)
    if found is None or first is None or first > found[0] + 1:
        return None
    seq, meters = found
    at_context, last = meters, seq
    try:
        for number, kind, data, _ in _rows(db, seq, state_dir, damage):
            last = max(last, number)
            meters = counted(meters, kind, data)
            if stored_at is not None and number <= stored_at:
                at_context = meters
    except sqlite3.Error as exc:
        raise AuditLogError(f"audit log: cannot read {state_dir}: {exc}") from None
    return meters, at_context, last


def _in_period(seq: int, time: object, since: datetime, damage: Damage) -> bool:
    """Whether a record's time is ``since`` or later (a time that is not a date-time with its
    zone is noted as damage, and the record is not counted)."""
    moment = _moment(time)
    if moment is None:
        damage.note(LogIntegrityError(seq, f"its time {time!r} is not a date-time with its zone"))
        return False
    return moment >= since


def _context_meters(stored: tuple[int, bytes], damage: Damage) -> Meters | None:
    try:
        return _stored_meters(stored[1])
    except LogIntegrityError as exc:
        damage.note(exc)
        return None


def _records(
    state_dir: Path, db: sqlite3.Connection, damage: Damage
) -> Iterator[tuple[int, str, dict[str, Any], object]]:
    """(seq, kind, data, time) of every record of a kind the meters count: the archive's
    first, then the live log's after them."""
    archived = 0
    for path in archive_paths(state_dir):
        archive = connect_read_only(path)
        try:
            for row in _rows(archive, archived, path, damage):
                archived = max(archived, row[0])
                yield row
            (top,) = archive.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
            archived = max(archived, int(top))
        except sqlite3.Error as exc:
            raise AuditLogError(f"audit log: cannot read the archive {path}: {exc}") from None
        finally:
            archive.close()
    try:
        yield from _rows(db, archived, state_dir, damage)
    except sqlite3.Error as exc:
        raise AuditLogError(f"audit log: cannot read {state_dir}: {exc}") from None


def _rows(
    db: sqlite3.Connection, after: int, where: Path, damage: Damage
) -> Iterator[tuple[int, str, dict[str, Any], object]]:
    def stored() -> Iterator[StoredRecord]:
        for seq, kind, leaf in db.execute(_SELECT, (after,)):
            if type(seq) is not int or type(kind) is not str or type(leaf) is not bytes:
                number = seq if type(seq) is int else None
                damage.note(LogIntegrityError(number, f"a row of {where} is not a stored record"))
                continue
            yield StoredRecord(seq, kind, leaf)

    for row in sound_rows(stored(), damage):
        if row.kind in totals.METER_KINDS:
            entry = row.entry()  # sound: canonical, with its time and its data
            yield row.seq, row.kind, entry["data"], entry["time"]


def _moment(time: object) -> datetime | None:
    """The record's time, or None when it is not a date-time with its zone."""
    try:
        moment = datetime.fromisoformat(time) if isinstance(time, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        return None
    return moment


def _stored_meters(blob: bytes) -> Meters | None:
    """The meters the table stored in its context; None for a context from before them."""
    try:
        version = json.loads(blob)["v"]
        if type(version) is not int or version < METERS_SINCE:
            return None
        return decode_context(blob).meters
    except RecursionError:  # [[[[... nests too deep: no context the table stores does
        raise LogIntegrityError(
            None, "the stored context cannot be read: nested too deep"
        ) from None
    except (SnapshotError, ValueError, KeyError, TypeError) as exc:
        raise LogIntegrityError(None, f"the stored context cannot be read: {exc}") from None
