"""The running totals kept beside the records, so that ``paigow-controller meters`` and
``dice-stats`` do not read the whole log (issue 31: a report's cost does not grow with the log
beyond what it reports). Each row keeps the meters' total described below and, in ``dice``,
dice-stats' state at the same record (controller/audit/dice_stats.py ``DiceFold``, made by
the writer with the reader's own fold, and checked by verify-log the same way).

``totals(size, meters, dice)`` holds the meters of the records 1..size (the archived ones too),
counted with the one function the round state machine and the meters report count with
(controller/core/meters.py ``counted``), at each checkpoint kept with the Merkle frontier (one
every log.FRONTIER_EVERY records). The writer keeps them: it folds each record of a commit into
the running total and, in a commit that keeps the frontier, writes the total at its last
record in the same transaction as the records (one small row). A start counts the records
after the last row: the ones it reads to rebuild the tree anyway. A log is given totals when
it is created: a log from before them has none, and its meters are counted from its records,
as before (counting its whole life at a start would make that start grow with the log).
Retention deletes the rows of the records it drops (up to the live log's new first).

The records stay the source of truth: the totals are not signed, and verify-log counts the
records again in its one pass over them and checks every row against the count as it crosses
the row's size (controller/audit/totals_check.py), as it checks ``by_kind``. The meters report
reads the newest row and counts only the records after it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from controller.core import canonical
from controller.core.meters import METER_NAMES, Meters, counted
from controller.core.records import RecordKind, StoredRecord
from controller.errors import EncodingError, LogIntegrityError

# the records ``counted`` counts (any other leaves the meters as they are)
METER_KINDS = frozenset(
    str(kind)
    for kind in (
        RecordKind.CLOSE,
        RecordKind.NO_ROLL,
        RecordKind.RESULT_CORRECTED,
        RecordKind.VOID,
        RecordKind.LID,
        RecordKind.TAMPER_LOOP,
        RecordKind.POWER_ON,
        RecordKind.SERVICE_MODE,
    )
)

# ``dice``: the dice statistics' state at the row (controller/audit/dice_stats.py DiceFold), or
# NULL once the writer met a record it could not count (the readers count from the last one)
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS totals (size INTEGER PRIMARY KEY, meters BLOB NOT NULL, dice BLOB)"
)


def encode(meters: Meters) -> bytes:
    """A total as its row keeps it: every meter, in canonical JSON (a no roll's reason as
    recorded, known to this version or not)."""
    value = {name: getattr(meters, name) for name in METER_NAMES}
    value["no_rolls"] = dict(sorted(meters.no_rolls.items()))
    return canonical.encode(value)


def decode(seq: int, blob: object) -> Meters:
    """The total a row keeps; :class:`LogIntegrityError` naming the row when it is not one."""
    try:
        value = canonical.decode(blob) if isinstance(blob, bytes) else None
    except EncodingError:
        value = None
    if (
        isinstance(value, dict)
        and set(value) == set(METER_NAMES)
        and all(_count(value[name]) for name in METER_NAMES if name != "no_rolls")
        and isinstance(value["no_rolls"], dict)
        and all(_count(n) for n in value["no_rolls"].values())
    ):
        return Meters(**value)
    raise LogIntegrityError(seq, "its row of the meters' totals is not a total")


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def fold(meters: Meters, rows: Iterable[StoredRecord]) -> Meters:
    """``meters`` with ``rows`` (records as written, sound) counted."""
    for row in rows:
        if row.kind in METER_KINDS:
            meters = counted(meters, row.kind, data_of(row))
    return meters


def data_of(row: StoredRecord) -> Mapping[str, object]:
    try:
        data = canonical.decode(row.leaf)["data"]
    except (EncodingError, KeyError, TypeError):
        data = None
    if not isinstance(data, dict):
        raise LogIntegrityError(row.seq, "is not a record with data to count")
    return data


def create(db: sqlite3.Connection, *, new_log: bool, no_dice: bytes) -> None:
    """The table, made where absent; a new log's first row (nothing counted before its first
    record; ``no_dice``: the dice state of no record). A log from before the table keeps none:
    its meters are counted from its records."""
    db.execute(SCHEMA)
    if new_log:
        db.execute("INSERT OR IGNORE INTO totals VALUES (0, ?, ?)", (encode(Meters()), no_dice))


def latest_dice(db: sqlite3.Connection, at_most: int) -> tuple[int, bytes] | None:
    """The newest dice state at ``at_most`` or before (seq, its bytes), or None."""
    try:
        row = db.execute(
            "SELECT size, dice FROM totals WHERE size <= ? AND dice IS NOT NULL"
            " ORDER BY size DESC LIMIT 1",
            (at_most,),
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such" in str(exc):  # table, or column
            return None
        raise
    if row is None or type(row[0]) is not int or type(row[1]) is not bytes:
        return None
    return row[0], row[1]


def latest(db: sqlite3.Connection, at_most: int) -> tuple[int, Meters] | None:
    """The newest row at ``at_most`` or before (seq, total), or None: the log keeps none."""
    try:
        row = db.execute(
            "SELECT size, meters FROM totals WHERE size <= ? ORDER BY size DESC LIMIT 1", (at_most,)
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such" in str(exc):  # table, or column
            return None
        raise
    if row is None or type(row[0]) is not int:
        return None
    return row[0], decode(row[0], row[1])
