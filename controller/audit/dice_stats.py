"""The dice statistics an auditor reads from the log alone (``paigow-controller dice-stats``).

The counts are made again from the records, not taken from the controller's stored context,
with the monitor's own pure pieces (``controller.core.dice_monitor``): a ``result`` of a round
whose bets closed in a dice mode (the ``no_more_bets`` record says the mode) counts its three
dice; an RNG round's result (its virtual dice, in ``dice`` mode) never counts, nor does a test
round of service mode (``service_test``); ``dice_replaced`` starts the set and the test again,
the supervisor's ``dice_kept`` the test, ``shift_change`` the shift. A result corrected to the
dice as they lie (``result_corrected``, N.J.A.C. 13:69E-1.28P(d)) stays counted with the dice
as read, as the core counts it: the monitor watches what the sensor read, and the correction
is the supervisor's, not a roll. (In a log written before corrections a voided result and the
one decided again both count: both were rolled and read.) Each ``dice_alarm`` record is checked
against the counts made here:
the alarm's figures must be what the test gives on them. Every start's ``recovery`` record says
where the controller's counts stood: the counts made here must be the same; the first one of a
log older than the monitor says where counting began (``counted_from``), and the counts start
from it. Where the log holds its latest context at its last record, the counts made here must
equal the context's (``context_agrees``; None when that context predates the monitor).

On a log that keeps totals (controller/audit/totals.py), the counts start from the newest
row's dice state (a :class:`DiceFold`, the writer's own fold of the records up to it) and only
the records after it are read, while the live log starts at its first record (after retention
moved records to the archive, every record of the live log is read, as on a log from before
the totals). The rows are not signed: verify-log makes the states again from the records and
names a row that is not their count (totals_check.py, in its one pass); a record damaged before the
newest row is named by verify-log, not here. Each record read is checked (by its shape, as
verify-log checks it, and against the hash chain); only the kinds the counts use are decoded.

Works on a copy (read-only connection, read-only media), while the controller appends. Given a
:class:`~controller.audit.damage.Damage`, a damaged record, or one the monitor cannot read, is
named there and left out of the counts, and the rest is counted; without one, the first is
raised as :class:`LogIntegrityError`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.audit import totals
from controller.audit.damage import Damage, sound_rows
from controller.audit.reader import open_for_reading, read_latest_context, read_records
from controller.core import canonical
from controller.core.dice import Roll
from controller.core.dice_monitor import (
    EMPTY,
    TOTALS,
    DiceCounts,
    DiceTest,
    DiceWindows,
    Window,
    alarm,
    evaluate,
    p_values,
)
from controller.core.record_schema import read_lenient_fields
from controller.core.records import RecordKind
from controller.core.snapshot import DICE_COUNTS_SINCE, decode_context
from controller.errors import EncodingError, GameRuleError, LogIntegrityError, SnapshotError

_DICE_MODES = frozenset({"shaker", "manual"})


_ENDS_A_WINDOW = frozenset(
    {RecordKind.DICE_REPLACED, RecordKind.SUPERVISOR_ACTION, RecordKind.SHIFT_CHANGE}
)
# the kinds whose data the counts read (every other record is only checked as sound)
READ_KINDS = frozenset(
    {RecordKind.RECOVERY, RecordKind.NO_MORE_BETS, RecordKind.RESULT, RecordKind.DICE_ALARM}
    | _ENDS_A_WINDOW
)


def dice_stats(state_dir: Path, window: Window, *, damage: Damage | None = None) -> dict[str, Any]:
    """The counts over ``window``, each colour's chi-square p-value, the monitor's figures on
    its test window, whether an alarm stands at the end of the log, and the alarms recorded
    in ``window``."""
    damage = Damage(strict=True) if damage is None else damage
    db = open_for_reading(state_dir)
    try:
        db.execute("BEGIN")  # one snapshot of a log the controller may be appending to
        start = _from_totals(db)
        tally, last = (DiceTally(), 0) if start is None else (DiceTally(start[1]), start[0])
        for row in sound_rows(read_records(db, start=last + 1, on_bad=damage.note), damage):
            last = row.seq
            if row.kind not in READ_KINDS:
                continue  # no part in the counts: checked (above), never decoded
            try:
                tally.take(row.seq, row.kind, row.entry()["data"])
            except LogIntegrityError as exc:
                damage.note(exc)
        fold = tally.fold()
        (stored,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
        last = max(last, int(stored))
        try:
            agrees = _context_agrees(db, last, fold.windows)
        except LogIntegrityError as exc:  # the head row
            damage.note(exc)
            agrees = None
        db.execute("COMMIT")
    finally:
        db.close()
    windows = fold.windows
    counts = fold.everything if window is Window.ALL else windows.window(window)
    p = p_values(counts)
    return {
        "window": str(window),
        "rolls": counts.rolls,
        "alarm": fold.standing is not None,
        "dice": {
            "red": {"counts": _faces(counts.red), "p_value": p[DiceTest.RED]},
            "blue": {"counts": _faces(counts.blue), "p_value": p[DiceTest.BLUE]},
        },
        "total": {
            "counts": {str(t): n for t, n in zip(TOTALS, counts.total, strict=True)},
            "p_value": p[DiceTest.TOTAL],
        },
        "monitor": {
            "rolls": windows.test.rolls,
            "tests": [f.as_record() for f in evaluate(windows.test)],
            "standing": _alarm(fold.standing),
        },
        "alarms": [_alarm(a) for a in fold.alarms_in(window)],
        "records": last,
        "counted_from": fold.counted_from,
        "context_agrees": agrees,
        **({"damaged": damage.as_record()} if damage else {}),
    }


def _from_totals(db: sqlite3.Connection) -> tuple[int, DiceFold] | None:
    """The newest dice state kept in the totals (controller/audit/totals.py) and its seq,
    when the live log still starts at its first record (the counts are the live log's: once
    retention moved records to the archive, they are made from its records again); else
    None."""
    (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
    if first != 1:
        return None
    (size,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
    try:
        row = totals.latest_dice(db, int(size))
        return None if row is None else (row[0], DiceFold.decode(row[1]))
    except (LogIntegrityError, EncodingError, ValueError, KeyError, TypeError, sqlite3.Error):
        return None  # a row that is not one: the records are counted (verify-log names it)


# an alarm as the report gives it: its record's seq, its round, its figures, its rolls
_ALARM_KEYS = ("seq", "round", "test", "log_e", "threshold", "face", "rolls")
_Alarm = tuple[Any, ...]


def _alarm(values: _Alarm | None) -> dict[str, Any] | None:
    return None if values is None else dict(zip(_ALARM_KEYS, values, strict=True))


def _fields(kind: str, data: Mapping[str, Any], names: tuple[str, ...]) -> list[Any]:
    """The fields ``names`` of a record, each through its kind's schema's test of its type
    (controller/core/record_schema.py), without making the whole record (the dataclass of a
    result, its wagers and all, was most of what counting cost verify-log): the first must be
    there (KeyError), the others read None where they are not. Every caller has checked the
    record's shape (the writer, the readers, verify-log)."""
    values = read_lenient_fields(kind, data, names)
    if values[0] is None:
        raise KeyError(names[0])
    return values


@dataclass(frozen=True, slots=True)
class DiceFold:
    """The counts made from the records up to one: the windows the table keeps, the counts
    since the log began, the mode of the round whose bets closed last, the alarm standing,
    the alarms recorded (the report gives those of its window: since the log began, the last
    ``since_set`` of them since the set was put in, the last ``since_shift`` since the shift
    began) and the first start that said where its counts stood. The writer keeps it in the
    totals; the reader and verify-log (controller/audit/totals_check.py) make it again, all with
    :meth:`take` alone."""

    windows: DiceWindows = DiceWindows()
    everything: DiceCounts = EMPTY
    mode: tuple[int, str] | None = None
    standing: _Alarm | None = None
    alarms: tuple[_Alarm, ...] = ()
    since_set: int = 0
    since_shift: int = 0
    counted_from: int | None = None

    def alarms_in(self, window: Window) -> tuple[_Alarm, ...]:
        kept = {Window.SET: self.since_set, Window.SHIFT: self.since_shift}.get(window)
        return self.alarms if kept is None else self.alarms[len(self.alarms) - kept :]

    def take(self, seq: int, kind: str, data: Mapping[str, Any]) -> DiceFold:
        """This fold with one record counted (:meth:`DiceTally.take`, where the rules are);
        :class:`LogIntegrityError` for a record the monitor cannot read, or whose figures are
        not the counts' (the fold unchanged)."""
        tally = DiceTally(self)
        tally.take(seq, kind, data)
        return tally.fold()

    def encode(self) -> bytes:
        """The fold as a totals row keeps it (canonical JSON)."""
        return canonical.encode(
            {
                "windows": self.windows.as_record(),
                "everything": self.everything.as_record(),
                "mode": None if self.mode is None else list(self.mode),
                "standing": None if self.standing is None else list(self.standing),
                "alarms": [list(a) for a in self.alarms],
                "since_set": self.since_set,
                "since_shift": self.since_shift,
                "counted_from": self.counted_from,
            }
        )

    @classmethod
    def decode(cls, blob: object) -> DiceFold:
        """What :meth:`encode` wrote; ValueError (KeyError, TypeError) for anything else."""
        value = canonical.decode(blob) if isinstance(blob, bytes) else None
        if not isinstance(value, dict):
            raise ValueError("a dice state is an object")
        mode, standing, alarms = value["mode"], value["standing"], value["alarms"]
        fold = cls(
            windows=DiceWindows.from_record(value["windows"]),
            everything=DiceCounts.from_record(value["everything"]),
            mode=None if mode is None else (int(mode[0]), str(mode[1])),
            standing=None if standing is None else tuple(standing),
            alarms=tuple(tuple(a) for a in alarms),
            since_set=int(value["since_set"]),
            since_shift=int(value["since_shift"]),
            counted_from=value["counted_from"],
        )
        lengths = {len(a) for a in (*fold.alarms, fold.standing or _ALARM_KEYS)}
        if lengths != {len(_ALARM_KEYS)} or fold.encode() != blob:
            raise ValueError("a dice state is kept as it is written")
        return fold


# A tally's counts: one list of the four windows' counts (the set's, the shift's, the test's,
# the log's whole life), each the red die's six faces, the blue dice's six, the totals 3..18
_BLUE, _TOTAL, _WIDTH = 6, 12, 28
_SET, _SHIFT, _TEST, _EVERYTHING = 0, _WIDTH, 2 * _WIDTH, 3 * _WIDTH
_WINDOWS = (_SET, _SHIFT, _TEST, _EVERYTHING)
_NO_COUNTS = [0] * _WIDTH
_BETS_FIELDS = ("round", "mode")
_RESULT_FIELDS = ("round", "dice")
_ALARM_FIGURES = ("test", "log_e", "threshold", "face")
# the fields of each kind's data that the counts read, and nothing else: verify-log's workers
# hand back only these (controller/audit/totals_check.py ``counted_data``)
READ_FIELDS: dict[str, tuple[str, ...]] = {
    RecordKind.RECOVERY: ("dice_counts",),
    RecordKind.NO_MORE_BETS: _BETS_FIELDS,
    RecordKind.RESULT: _RESULT_FIELDS,
    RecordKind.DICE_ALARM: (*_ALARM_FIGURES, "counts", "round", "rolls"),
    RecordKind.DICE_REPLACED: (),
    RecordKind.SUPERVISOR_ACTION: ("action",),
    RecordKind.SHIFT_CHANGE: (),
}


class DiceTally:
    """A :class:`DiceFold` being made, and the one place its rules are: the same state, with
    the four windows' counts in one list of numbers counted in place. ``DiceFold.take`` is a
    tally of one record; a reader that counts many (dice-stats, verify-log's check of the
    totals: 40,000 records on a log of 20,000 rounds) counts them into one tally and makes the
    fold where it needs one (:meth:`fold`), not a new frozen fold of four windows for each
    record (that was most of what the totals' check cost verify-log)."""

    __slots__ = (
        "alarms",
        "counted_from",
        "counts",
        "mode",
        "since_set",
        "since_shift",
        "standing",
    )

    def __init__(self, fold: DiceFold | None = None) -> None:
        """The tally at ``fold`` (none: at no record)."""
        start = DiceFold() if fold is None else fold
        windows, everything = start.windows, start.everything
        self.counts = [
            *(n for c in (windows.set, windows.shift, windows.test) for n in _listed(c)),
            *_listed(everything),
        ]
        self.mode = start.mode
        self.standing = start.standing
        self.alarms = list(start.alarms)
        self.since_set = start.since_set
        self.since_shift = start.since_shift
        self.counted_from = start.counted_from

    def fold(self) -> DiceFold:
        """The fold the records counted so far make."""
        return DiceFold(
            windows=self._windows(),
            everything=self._counts(_EVERYTHING),
            mode=self.mode,
            standing=self.standing,
            alarms=tuple(self.alarms),
            since_set=self.since_set,
            since_shift=self.since_shift,
            counted_from=self.counted_from,
        )

    def take(self, seq: int, kind: str, data: Mapping[str, Any]) -> None:
        """One record counted (its data read through its kind's schema,
        controller/core/record_schema.py; only the fields of :data:`READ_FIELDS`);
        :class:`LogIntegrityError` for a record the monitor cannot read, or whose figures are
        not the counts' (the tally unchanged)."""
        try:
            if kind == RecordKind.RECOVERY:
                self._started(seq, data)
            else:
                self._take(seq, kind, data)
        except (KeyError, TypeError, ValueError, GameRuleError) as exc:
            raise LogIntegrityError(
                seq, f"a {kind} record the monitor cannot read: {exc}"
            ) from None

    def _take(self, seq: int, kind: str, data: Mapping[str, Any]) -> None:
        if kind == RecordKind.RESULT:
            self._result(data)
        elif kind == RecordKind.NO_MORE_BETS:
            number, mode = _fields(kind, data, _BETS_FIELDS)
            if mode is None:
                raise KeyError("mode")  # a log from before the modes: no dice known to count
            # a round's result follows its own no_more_bets (verify-log checks it)
            self.mode = (number, mode)
        elif kind == RecordKind.DICE_ALARM:
            self.standing = _checked_alarm(seq, data, self._counts(_TEST))
            self.alarms.append(self.standing)
            self.since_set += 1
            self.since_shift += 1
        elif kind == RecordKind.DICE_REPLACED:
            self._restart(_SET, _TEST)
            self.standing, self.since_set = None, 0
        elif kind == RecordKind.SHIFT_CHANGE:
            self._restart(_SHIFT)
            self.since_shift = 0
        elif kind == RecordKind.SUPERVISOR_ACTION and data.get("action") == "dice_kept":
            self._restart(_TEST)
            self.standing = None

    def _result(self, data: Mapping[str, Any]) -> None:
        """A result of a round whose bets closed in a dice mode counts its dice in every
        window (as ``DiceWindows.after`` and ``DiceCounts.after`` count a roll)."""
        number, dice = _fields(RecordKind.RESULT, data, _RESULT_FIELDS)
        mode = self.mode[1] if self.mode is not None and self.mode[0] == number else None
        if mode not in _DICE_MODES or dice is None:
            return
        roll = Roll(dice["red"], (dice["blue"][0], dice["blue"][1]))
        blue = roll.blue
        faces = (roll.red - 1, _BLUE + blue[0] - 1, _BLUE + blue[1] - 1, _TOTAL + roll.total - 3)
        counts = self.counts  # every place found before any is counted
        for window in _WINDOWS:
            for face in faces:
                counts[window + face] += 1

    def _started(self, seq: int, data: Mapping[str, Any]) -> None:
        windows, self.counted_from = _started(seq, data, self._windows(), self.counted_from)
        self.counts[_SET:_EVERYTHING] = [
            n for c in (windows.set, windows.shift, windows.test) for n in _listed(c)
        ]

    def _restart(self, *windows: int) -> None:
        for window in windows:
            self.counts[window : window + _WIDTH] = _NO_COUNTS

    def _counts(self, window: int) -> DiceCounts:
        counts = self.counts
        return DiceCounts(
            tuple(counts[window : window + _BLUE]),
            tuple(counts[window + _BLUE : window + _TOTAL]),
            tuple(counts[window + _TOTAL : window + _WIDTH]),
        )

    def _windows(self) -> DiceWindows:
        return DiceWindows(self._counts(_SET), self._counts(_SHIFT), self._counts(_TEST))


def _listed(counts: DiceCounts) -> tuple[int, ...]:
    return (*counts.red, *counts.blue, *counts.total)


def _started(
    seq: int, data: Mapping[str, Any], windows: DiceWindows, counted_from: int | None
) -> tuple[DiceWindows, int | None]:
    """A start: the controller's counts as it took them up. They are the counts made here from
    the records before; on a log older than the monitor, its first start says where counting
    began (the counts before it were never kept)."""
    raw = data.get("dice_counts")
    if raw is None:
        return windows, counted_from  # a controller from before the monitor
    try:
        stood = DiceWindows.from_record(raw)
    except ValueError as exc:
        raise LogIntegrityError(seq, f"the dice counts of a start: {exc}") from None
    if counted_from is None:
        return stood, seq
    if stood != windows:
        raise LogIntegrityError(
            seq, "the dice counts the controller took up at this start are not its records'"
        )
    return windows, counted_from


def _faces(counts: tuple[int, ...]) -> dict[str, int]:
    return {str(face): n for face, n in enumerate(counts, start=1)}


def _checked_alarm(seq: int, data: Mapping[str, Any], test_counts: DiceCounts) -> _Alarm:
    """The alarm as recorded, which must be what the monitor's test gives on the counts made
    from the records before it."""
    figure = alarm(test_counts)
    expected = None if figure is None else figure.as_record()
    recorded = {k: data.get(k) for k in _ALARM_FIGURES}
    if expected != recorded or data.get("counts") != test_counts.as_record():
        raise LogIntegrityError(
            seq,
            "the dice alarm is not what the monitor's test gives on the rolls recorded before it",
        )
    return (seq, data.get("round"), *recorded.values(), data.get("rolls"))


def _context_agrees(db: Any, last: int, windows: DiceWindows) -> bool | None:
    """Whether the context stored with the last record (the head's; a log from before the
    head: its last record's) holds the counts made here."""
    stored = read_latest_context(db, "the log")
    if stored is None or stored[0] != last:
        return None
    try:
        version = json.loads(stored[1])["v"]
        if not isinstance(version, int) or version < DICE_COUNTS_SINCE:
            return None  # a context from before the monitor: it holds no counts to compare
        return bool(decode_context(stored[1]).dice_counts == windows)
    except (SnapshotError, ValueError, KeyError, TypeError, RecursionError):
        return False
