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

Every record of the live log is read and checked (by its shape, as verify-log checks it, and
against the hash chain); only the kinds the counts use are decoded. Its cost still grows with
the live log: unlike the meters' sum, the fold here (the windows a start, a new set or a new
shift begins, the alarms of the window asked for, the counts each start took up and is checked
against) would need its whole state kept beside the records to start from a summary.

Works on a copy (read-only connection, read-only media), while the controller appends. Given a
:class:`~controller.audit.damage.Damage`, a damaged record, or one the monitor cannot read, is
named there and left out of the counts, and the rest is counted; without one, the first is
raised as :class:`LogIntegrityError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.audit.damage import Damage, sound_rows
from controller.audit.log import open_for_reading, read_latest_context, read_records
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
from controller.core.record_schema import NoMoreBets, Result, read
from controller.core.records import RecordKind
from controller.core.snapshot import DICE_COUNTS_SINCE, decode_context
from controller.errors import GameRuleError, LogIntegrityError, SnapshotError

_DICE_MODES = frozenset({"shaker", "manual"})


def dice_stats(state_dir: Path, window: Window, *, damage: Damage | None = None) -> dict[str, Any]:
    """The counts over ``window``, each colour's chi-square p-value, the monitor's figures on
    its test window, whether an alarm stands at the end of the log, and the alarms recorded
    in ``window``."""
    damage = Damage(strict=True) if damage is None else damage
    db = open_for_reading(state_dir)
    try:
        db.execute("BEGIN")  # one snapshot of a log the controller may be appending to
        windows = DiceWindows()
        everything = EMPTY  # since the log began: the log's own window
        modes: dict[int, str] = {}  # the mode of the round whose bets closed last
        standing: dict[str, Any] | None = None
        alarms: list[dict[str, Any]] = []
        last = 0
        counted_from: int | None = None  # the first start that said where its counts stood
        for row in sound_rows(read_records(db, on_bad=damage.note), damage):
            last = row.seq
            if row.kind not in _READ:
                continue  # no part in the counts: checked (above), never decoded
            if row.kind == RecordKind.RECOVERY:
                try:
                    windows, counted_from = _started(
                        row.seq, row.entry()["data"], windows, counted_from
                    )
                except LogIntegrityError as exc:
                    damage.note(exc)
                continue
            try:
                windows, everything, standing, alarms = _take(
                    row.kind,
                    row.entry()["data"],
                    row.seq,
                    window=window,
                    fold=(windows, everything, standing, alarms),
                    modes=modes,
                )
            except (KeyError, TypeError, ValueError, GameRuleError) as exc:
                damage.note(
                    LogIntegrityError(
                        row.seq, f"a {row.kind} record the monitor cannot read: {exc}"
                    )
                )
            except LogIntegrityError as exc:
                damage.note(exc)
        (stored,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
        last = max(last, int(stored))
        try:
            agrees = _context_agrees(db, last, windows)
        except LogIntegrityError as exc:  # the head row
            damage.note(exc)
            agrees = None
        db.execute("COMMIT")
    finally:
        db.close()
    counts = everything if window is Window.ALL else windows.window(window)
    p = p_values(counts)
    return {
        "window": str(window),
        "rolls": counts.rolls,
        "alarm": standing is not None,
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
            "standing": standing,
        },
        "alarms": alarms,
        "records": last,
        "counted_from": counted_from,
        "context_agrees": agrees,
        **({"damaged": damage.as_record()} if damage else {}),
    }


# the windows the table keeps, the counts since the log began, the alarm standing, the alarms
_Fold = tuple[DiceWindows, DiceCounts, dict[str, Any] | None, list[dict[str, Any]]]


def _take(
    kind: str,
    data: Mapping[str, Any],
    seq: int,
    *,
    window: Window,
    fold: _Fold,
    modes: dict[int, str],
) -> _Fold:
    """One record's part in the counts (and in the alarms), its data read through its kind's
    schema (controller/core/record_schema.py)."""
    windows, everything, standing, alarms = fold
    if kind == RecordKind.NO_MORE_BETS:
        bets = read(NoMoreBets, data)
        if bets.mode is None:
            raise KeyError("mode")  # a log from before the modes: no dice known to count
        modes.clear()  # a round's result follows its own no_more_bets (verify-log checks it)
        modes[bets.round] = bets.mode
    elif kind == RecordKind.RESULT:
        result = read(Result, data)
        if modes.get(result.round) in _DICE_MODES and result.dice is not None:
            roll = Roll(result.dice["red"], (result.dice["blue"][0], result.dice["blue"][1]))
            windows, everything = windows.after(roll), everything.after(roll)
    elif kind == RecordKind.DICE_ALARM:
        standing = _checked_alarm(seq, data, windows.test)
        alarms = [*alarms, standing]
    elif kind in _ENDS_A_WINDOW:
        windows, standing, alarms = _window_ended(kind, data, window, (windows, standing, alarms))
    return windows, everything, standing, alarms


_ENDS_A_WINDOW = frozenset(
    {RecordKind.DICE_REPLACED, RecordKind.SUPERVISOR_ACTION, RecordKind.SHIFT_CHANGE}
)
# the kinds whose data the counts read (every other record is only checked as sound)
_READ = frozenset(
    {RecordKind.RECOVERY, RecordKind.NO_MORE_BETS, RecordKind.RESULT, RecordKind.DICE_ALARM}
    | _ENDS_A_WINDOW
)


def _window_ended(
    kind: str,
    data: Mapping[str, Any],
    window: Window,
    now: tuple[DiceWindows, dict[str, Any] | None, list[dict[str, Any]]],
) -> tuple[DiceWindows, dict[str, Any] | None, list[dict[str, Any]]]:
    """A new set of dice, the dice kept after an alarm, a new shift: the windows they end."""
    windows, standing, alarms = now
    if kind == RecordKind.DICE_REPLACED:
        return windows.replaced(), None, [] if window is Window.SET else alarms
    if kind == RecordKind.SHIFT_CHANGE:
        return windows.new_shift(), standing, [] if window is Window.SHIFT else alarms
    if data.get("action") == "dice_kept":
        return windows.kept(), None, alarms
    return windows, standing, alarms


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


def _checked_alarm(seq: int, data: Mapping[str, Any], test_counts: DiceCounts) -> dict[str, Any]:
    """The alarm as recorded, which must be what the monitor's test gives on the counts made
    from the records before it."""
    figure = alarm(test_counts)
    expected = None if figure is None else figure.as_record()
    recorded = {k: data.get(k) for k in ("test", "log_e", "threshold", "face")}
    if expected != recorded or data.get("counts") != test_counts.as_record():
        raise LogIntegrityError(
            seq,
            "the dice alarm is not what the monitor's test gives on the rolls recorded before it",
        )
    return {"seq": seq, "round": data.get("round"), **recorded, "rolls": data.get("rolls")}


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
