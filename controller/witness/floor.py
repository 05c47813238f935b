"""The floor dashboard's view of every table, folded from what the witness has verified.

The witness calls the methods of its ``FloorSink`` (``controller/witness/ports.py``) for every
record it accepted (under a signed checkpoint), the records beyond the checkpoint
(unconfirmed), every signed status, every cosignature and every alert raised, cleared or
acknowledged; :class:`Floor` implements them. At its start the witness replays what its store
holds into them, before the first message. It keeps, per table, what a floor supervisor looks
at: whether it is connected, its screen and mode, games per hour, the last result, the open
faults, the dice monitor's alarm, the log's size (the records the witness accepted and cosigned:
anchored), the records beyond it (unconfirmed, with the latest result among them), when it was
last heard from; and one list of alerts, the witness's and the floor's own, the open ones by
severity then newest first, the closed ones (cleared, or acknowledged by a named user) after.

For the witness::

    floor = Floor(clock=time.time, settings=FloorSettings(min_games_per_hour=10))
    witness = Witness(..., floor=floor)  # apply_record/unconfirmed/status/cosigned/alert
    dashboard = DashboardServer(floor, host="127.0.0.1", port=8090)   # controller/witness/dashboard
    dashboard.start()
    ...
    dashboard.close()

Definitions (the README's "The floor dashboard" says the same):

- **Games per hour**: the rounds closed with a result (a ``close`` record for a round whose
  latest ``result`` was not voided since) whose ``close`` record's time falls in the 60
  minutes up to the table's time now. A result corrected (``result_corrected``) is still its
  round's one result; a round void (``void``) is closed by no ``close``. The table's time now
  is the latest time the table itself wrote (a record's or a status's ``time``), moved on by
  the witness's clock since that time arrived, and never back: a table that stops sending is
  still counted down. Only that last hour's close times are kept (at most ``MAX_CLOSES``).
  Service test rounds (``service_test``) and voided rounds never count.
- **Last result**: the table's latest ``result``; the corrected result in its place when a
  ``result_corrected`` follows it (N.J.A.C. 13:69E-1.28P(d): marked ``corrected``, with the
  dice first read, why and who); a ``void`` makes the round void (621a.12(c),(e): every
  wager returned, no result: the round shown as ``void``, whatever result it had). In the
  logs of older versions a ``result_voided`` marks that result ``voided`` (its round was
  played again, and its next ``result`` follows).
- **Alerts**: the witness's (``device offline``, ``biased dice``, a rollback, a fork, ...:
  each with its number, severity, plain words, when it was raised, cleared and acknowledged,
  and by whom) and one the floor derives here, ``games per hour too low`` (info) while the
  table is online, open (no open fault, not locked, not in service mode) and has been so for
  the whole last hour (a table just opened, or back from a fault, is given the hour), and its
  games per hour are below ``min_games_per_hour`` (0: never); it clears itself and is not
  acknowledged. An alert is open until it is cleared or acknowledged.
- **Alerting**: a table is shown as alerting while an open alert names it.
- **Times** are shown in the witness's zone (``FloorSettings.zone``: the CLI gives its local
  zone, ``TZ``), as ``2026-12-01 09:11:05 CET``.

:class:`FloorFold` is the fold itself: pure (no I/O, no threads, no clock: the witness's time
``now``, UNIX seconds, is an argument), and it never raises on what a table sent. Every value
it shows is copied from a checked field, bounded in length; the page escapes it as text.
:class:`Floor` wraps it for threads: one lock, a version counter, a condition that an event
stream waits on (``wait_for_change``), ``refresh`` for the passing of time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import controller.core.record_schema as schema
from controller.core.record_schema import read_lenient
from controller.core.records import RecordKind
from controller.fleet.protocol import (
    MAX_DETAIL_CHARS,
    AlertKind,
    Presence,
    Status,
    is_table_name,
)
from controller.witness.ports import SEVERITY_RANK, Severity, StoredAlert, Unconfirmed

WINDOW_MS = 60 * 60 * 1000  # games per hour: the last 60 minutes of the table's time
MAX_CLOSES = 4096  # close times kept per table (more than a table can play in an hour)
MAX_TABLES = 512  # tables shown; a record or status of one more is not shown
MAX_ALERTS = 200  # closed alerts kept in the list, newest first
MAX_OPEN_ALERTS = 1000  # open alerts kept (the witness raises one of a kind per table)
MAX_TEXT = 200  # a short text from a table (a fault's name, a screen, a mode, a dice set)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# screens where the table is not open for play
_STOPPED_SCREENS = frozenset({"fault", "locked"})
_NOTICE_SCREENS = frozenset({"refused"})  # over the screen shown (controller/display/hub.py)
_SUM_CONDITIONS = ("8-16-17", "3-8-9", "pair", "series")


class FloorAlertKind(StrEnum):
    """The alerts the floor derives itself (the witness's are ``protocol.AlertKind``)."""

    GAMES_PER_HOUR_LOW = "games_per_hour_low"


ALERT_WORDS: Mapping[str, str] = {
    AlertKind.DEVICE_OFFLINE: "device offline",
    FloorAlertKind.GAMES_PER_HOUR_LOW: "games per hour too low",
    AlertKind.BIASED_DICE: "biased dice",
    AlertKind.ROLLBACK: "log rolled back",
    AlertKind.FORK: "log forked",
    AlertKind.GAP: "records missing",
    AlertKind.BAD_SIGNATURE: "checkpoint not signed by the table",
    AlertKind.BAD_RECORD: "bad record",
    AlertKind.SILENCE: "table silent",
    AlertKind.UNKNOWN_TABLE: "unknown table",
}


@dataclass(frozen=True, slots=True)
class FloorSettings:
    """``min_games_per_hour``: below it an open table is alerted (0: never); ``zone``: the
    witness's time zone, times are shown in it."""

    min_games_per_hour: int = 10
    zone: tzinfo = UTC

    def __post_init__(self) -> None:
        if not 0 <= self.min_games_per_hour <= MAX_CLOSES:
            raise ValueError(f"min_games_per_hour is 0 to {MAX_CLOSES}")


# --- reading what a table sent, never raising ---------------------------------------------------


def _int(value: object, *, low: int = 0) -> int | None:
    return value if type(value) is int and low <= value < 2**63 else None


def _text(value: object, limit: int = MAX_TEXT) -> str | None:
    """A printable string, cut to ``limit`` characters; None for anything else."""
    if not isinstance(value, str):
        return None
    cut = value[:limit]
    return cut if cut.isprintable() else "".join(c if c.isprintable() else "?" for c in cut)


def time_ms(text: object) -> int | None:
    """UNIX milliseconds of an RFC 3339 time with its offset (``2026-12-01T08:11:00.811Z``);
    None for anything else."""
    if not isinstance(text, str) or not 10 <= len(text) <= 40:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def rfc3339(now: float) -> str:
    """The witness's time ``now`` (UNIX seconds) as the records write it."""
    moment = datetime.fromtimestamp(now, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def local_text(moment: object, zone: tzinfo) -> str:
    """An RFC 3339 time (or UNIX seconds) in the witness's zone, as a pit boss reads it:
    ``2026-12-01 09:11:05 CET``; "" for anything else."""
    if isinstance(moment, str):
        ms = time_ms(moment)
        if ms is None:
            return ""
        seconds = ms / 1000
    elif isinstance(moment, int | float) and 0 <= moment < 2**40:
        seconds = float(moment)
    else:
        return ""
    shown = datetime.fromtimestamp(seconds, UTC).astimezone(zone)
    return shown.strftime("%Y-%m-%d %H:%M:%S ") + (shown.tzname() or "")


def zone_view(now: float, zone: tzinfo) -> dict[str, Any]:
    """The witness's zone now: its name and offset from UTC (the page's clock)."""
    shown = datetime.fromtimestamp(now, UTC).astimezone(zone)
    offset = shown.utcoffset() or timedelta(0)
    return {"name": shown.tzname() or "", "offset_ms": offset // timedelta(milliseconds=1)}


def unconfirmed_summary(line: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The latest result, correction or void among the unconfirmed records, as a last result
    is shown, marked unconfirmed."""
    if not isinstance(line, Mapping):
        return None
    seq, kind, data = _int(line.get("seq"), low=1), line.get("kind"), line.get("data")
    time = _text(line.get("time"), 40) or ""
    if seq is None or not isinstance(data, Mapping):
        return None
    shown: dict[str, Any] | None
    summary = _SUMMARIES.get(kind) if isinstance(kind, str) else None
    shown = None if summary is None else summary(seq, time, data)
    if shown is not None:
        shown["unconfirmed"] = True
    return shown


def result_summary(seq: int, time: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """What the floor shows of a ``result`` record: the round, the dice (or the RNG's number),
    the starting position, the bank and the side wagers' outcomes in a few words."""
    result = read_lenient(schema.Result, data)
    shown = _dice_of(result.dice)
    return {
        "seq": seq,
        "time": time,
        "round": _int(result.round),
        "attempt": _int(result.attempt),
        "game": _text(result.game, 16),
        "bank": _text(result.bank, 32),
        "starting_position": _text(result.starting_position, 32),
        "count": _int(result.count),
        "total": _int(result.total),
        "dice": shown,
        "rng": shown is None,  # a result without dice is the RNG's number (count)
        "wagers": _wagers_lines(result),
        "voided": None,  # older logs: this result voided, its round played again (the reason)
        "corrected": None,  # this result is a correction's: the dice read, why, who
        "void": None,  # the round is void: no result (why, who, whether reshuffled)
    }


def _dice_of(value: object) -> dict[str, Any] | None:
    """``{red, blue: [b1, b2]}`` of whole numbers, as a record writes dice; None otherwise."""
    if not isinstance(value, Mapping):
        return None
    red, blue = _int(value.get("red")), value.get("blue")
    if red is None or not isinstance(blue, list) or len(blue) != 2:
        return None
    blues = [_int(b) for b in blue]
    return {"red": red, "blue": blues} if all(b is not None for b in blues) else None


def corrected_summary(seq: int, time: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the floor shows of a ``result_corrected`` record: its corrected result as a
    ``result`` is shown, marked with the dice first read, the reason and the employee; None
    for a record without its result."""
    corrected = read_lenient(schema.ResultCorrected, data)
    result: object = corrected.result  # None when absent or not an object
    if not isinstance(result, Mapping):
        return None
    shown = result_summary(
        seq, time, {**result, "round": corrected.round, "attempt": corrected.attempt}
    )
    shown["corrected"] = {
        "dice_read": _dice_of(corrected.dice_read),
        "reason": _text(corrected.reason, 32),
        "employee": _text(corrected.employee, 32),
    }
    return shown


def void_summary(seq: int, time: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """What the floor shows of a round void (a ``void`` record): the round, why, who, and that
    every wager was returned; no result."""
    void = read_lenient(schema.Void, data)
    shown = result_summary(seq, time, {"round": void.round, "attempt": void.attempt})
    shown.update(dice=None, rng=False, wagers=[])
    shown["void"] = {
        "reason": _text(void.reason, 32),
        "employee": _text(void.employee, 32),
        "state": _text(void.state, 32),
        "reshuffle": void.reshuffle is True,
        "wagers": "returned",
    }
    return shown


def wagers_summary(data: Mapping[str, Any]) -> list[str]:
    """The side wagers of a result in a few lines: the Sum conditions met, the paytables that
    pay, how many dice show each number (Match), Beat It."""
    return _wagers_lines(read_lenient(schema.Result, data))


def _wagers_lines(result: schema.Result) -> list[str]:
    wagers = result.wagers
    if wagers is None:
        return []
    lines = _sum_lines(wagers.get("sum"))
    if result.payouts is not None:
        lines += _paytable_lines(result.payouts)
    lines += _match_lines(wagers.get("match")) + _beat_it_lines(wagers.get("beat_it"))
    return lines


def _sum_lines(sums: object) -> list[str]:
    if not isinstance(sums, Mapping):
        return []
    met = [c for c in _SUM_CONDITIONS if sums.get(c) is True]
    return ["Sum: " + (", ".join(met) if met else "none")]


def _paytable_lines(payouts: Mapping[Any, Any]) -> list[str]:
    lines = []
    for name in sorted(p for p in payouts if isinstance(p, str))[:8]:
        paid = payouts[name]
        if isinstance(paid, Mapping) and paid.get("wins") is True:
            outcome, pays = _text(paid.get("outcome"), 16), _text(paid.get("pays"), 32)
            lines.append(f"Paytable {_text(name, 16)}: {outcome} pays {pays}")
    return lines


def _match_lines(match: object) -> list[str]:
    if not isinstance(match, Mapping):
        return []
    shown = [
        f"{face}×{count}"
        for face in "123456"
        if (count := _int(match.get(face))) is not None and count > 0
    ]
    return ["Match: " + (" ".join(shown) or "none")]


def _beat_it_lines(beat_it: object) -> list[str]:
    if not isinstance(beat_it, Mapping):
        return []
    won = [c for c in ("red", "any") if beat_it.get(c) is True]
    return ["Beat It: " + (", ".join(won) if won else "none")]


_SUMMARIES: dict[str, Callable[[int, str, Mapping[str, Any]], dict[str, Any] | None]] = {
    RecordKind.RESULT: result_summary,
    RecordKind.RESULT_CORRECTED: corrected_summary,
    RecordKind.VOID: void_summary,
}


def _alarm_of(seq: int, time: str, data: Mapping[str, Any]) -> dict[str, Any]:
    alarm = read_lenient(schema.DiceAlarm, data)
    return {
        "seq": seq,
        "time": time,
        "round": _int(alarm.round),
        "test": _text(alarm.test, 16),
        "face": _int(alarm.face),
        "log_e": _text(alarm.log_e, 16),
        "threshold": _text(alarm.threshold, 16),
        "rolls": _int(alarm.rolls),
        "dice_set": _text(alarm.dice_set, 64),
        "locks": alarm.locks is True,
    }


def _round_of(kind: str, data: Mapping[str, Any]) -> int | None:
    """The round a record of a known kind names (its schema's ``round``), if it does."""
    cls = schema.schema_of(kind)
    return None if cls is None else _int(getattr(read_lenient(cls, data), "round", None))


def _names(value: object) -> set[str]:
    """A list of fault names (each a table-name-like word), as a set; junk is left out."""
    if not isinstance(value, list):
        return set()
    return {v for v in value[:64] if isinstance(v, str) and is_table_name(v)}


# --- each kind's part in a table's view (controller/core/record_schema.py: their fields) ------


@dataclass(frozen=True, slots=True)
class _Seen:
    """A record as the fold takes it: its number, time, the table's moment and its data."""

    seq: int
    time: str
    moment: int | None
    data: Mapping[str, Any]

    def read(self, cls: type[_R]) -> _R:
        """The record's fields as its kind's schema gives them, read leniently."""
        return read_lenient(cls, self.data)


_R = TypeVar("_R", bound=schema.Record)


def _mode_now(state: _Table, mode: object, game: object) -> None:
    """The mode and game now, where a record says them."""
    if shown := _text(mode, 16):
        state.mode = shown
    if shown := _text(game, 16):
        state.game = shown


def _take_config(state: _Table, seen: _Seen) -> None:
    config = seen.read(schema.ConfigLoaded)
    _mode_now(state, config.mode, config.game)


def _take_bets_closed(state: _Table, seen: _Seen) -> None:
    _mode_now(state, seen.read(schema.NoMoreBets).mode, None)


def _take_mode_changed(state: _Table, seen: _Seen) -> None:
    changed = seen.read(schema.ModeChanged)
    _mode_now(state, changed.mode, None)
    state.faults -= _names(changed.cleared)  # a switch to the RNG out of a fault


def _take_recovery(state: _Table, seen: _Seen) -> None:
    # a start: the faults the context kept
    state.faults = _names(seen.read(schema.Recovery).faults)


def _take_fault(state: _Table, seen: _Seen) -> None:
    state.faults |= _names([seen.read(schema.FaultRecord).fault])


def _take_fault_cleared(state: _Table, seen: _Seen) -> None:
    state.faults -= _names(seen.read(schema.FaultCleared).faults)


def _take_dice_alarm(state: _Table, seen: _Seen) -> None:
    """Issue 15: the dice monitor's alarm, until the supervisor acts."""
    state.dice_alarm = _alarm_of(seen.seq, seen.time, seen.data)


def _take_dice_replaced(state: _Table, seen: _Seen) -> None:
    _dice_alarm_ended(state)
    state.dice_set = _text(seen.read(schema.DiceReplaced).dice_set, 64)


def _take_supervisor_action(state: _Table, seen: _Seen) -> None:
    if seen.read(schema.SupervisorAction).action == "dice_kept":
        _dice_alarm_ended(state)


def _dice_alarm_ended(state: _Table) -> None:
    state.dice_alarm = None
    state.faults.discard("dice_alarm")


def _take_service_mode(state: _Table, seen: _Seen) -> None:
    state.service = seen.read(schema.ServiceMode).entered is True


def _take_result(state: _Table, seen: _Seen) -> None:
    state.last_result = result_summary(seen.seq, seen.time, seen.data)
    result = seen.read(schema.Result)
    state.pending = (_int(result.round), _int(result.attempt))


def _take_corrected(state: _Table, seen: _Seen) -> None:
    """N.J.A.C. 13:69E-1.28P(d): the result corrected to the dice as they lie."""
    corrected = corrected_summary(seen.seq, seen.time, seen.data)
    if corrected is not None:
        state.last_result = corrected


def _take_result_voided(state: _Table, seen: _Seen) -> None:
    """Older logs: that attempt voided, its round played again."""
    voided = seen.read(schema.ResultVoided)
    key = (_int(voided.round), _int(voided.attempt))
    last = state.last_result
    if last is not None and (last["round"], last["attempt"]) == key:
        last["voided"] = _text(voided.reason, 32) or "voided"
    if state.pending == key:
        state.pending = None


def _take_void(state: _Table, seen: _Seen) -> None:
    """621a.12(c),(e): the whole round void, no result."""
    if seen.read(schema.Void).service is not True:
        state.last_result = void_summary(seen.seq, seen.time, seen.data)
    state.pending = None


def _take_close(state: _Table, seen: _Seen) -> None:
    if state.pending is not None and state.pending[0] == _int(seen.read(schema.Close).round):
        closed = seen.moment if seen.moment is not None else state.latest_ms
        if closed is not None:
            state.closes.append(closed)
    state.pending = None


def _count_games(state: _Table, table_now: int | None) -> None:
    """The closes within the last hour of the table's time, and since when it is open."""
    if table_now is not None:
        while state.closes and state.closes[0] <= table_now - WINDOW_MS:
            state.closes.popleft()
        state.games_per_hour = sum(1 for t in state.closes if t <= table_now)
    if not state.is_open():
        state.open_since_ms = None
    elif state.open_since_ms is None:
        state.open_since_ms = table_now


def _slow_for_an_hour(state: _Table, table_now: int | None, least: int) -> bool:
    """Open for an hour of the table's time with fewer than ``least`` games in it."""
    return (
        table_now is not None
        and state.open_since_ms is not None
        and table_now - state.open_since_ms >= WINDOW_MS
        and state.games_per_hour < least
    )


_TAKES: dict[str, Callable[[_Table, _Seen], None]] = {
    RecordKind.CONFIG_LOADED: _take_config,
    RecordKind.MODE_CHANGED: _take_mode_changed,
    RecordKind.NO_MORE_BETS: _take_bets_closed,
    RecordKind.RECOVERY: _take_recovery,
    RecordKind.FAULT: _take_fault,
    RecordKind.FAULT_CLEARED: _take_fault_cleared,
    RecordKind.DICE_ALARM: _take_dice_alarm,
    RecordKind.DICE_REPLACED: _take_dice_replaced,
    RecordKind.SUPERVISOR_ACTION: _take_supervisor_action,
    RecordKind.SERVICE_MODE: _take_service_mode,
    RecordKind.RESULT: _take_result,
    RecordKind.RESULT_CORRECTED: _take_corrected,
    RecordKind.RESULT_VOIDED: _take_result_voided,
    RecordKind.VOID: _take_void,
    RecordKind.CLOSE: _take_close,
}


# --- the fold ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Table:
    name: str
    version: int = 0
    presence: str = "unknown"
    screen: str = ""
    mode: str = ""
    game: str = ""
    round: int | None = None
    service: bool = False
    faults: set[str] = field(default_factory=set)
    dice_alarm: dict[str, Any] | None = None
    dice_set: str | None = None
    last_result: dict[str, Any] | None = None
    pending: tuple[int | None, int | None] | None = None  # (round, attempt) of a result
    closes: deque[int] = field(default_factory=lambda: deque(maxlen=MAX_CLOSES))
    games_per_hour: int = 0
    log_size: int = 0
    anchored_size: int = 0
    anchored_time: str = ""
    last_seen: str = ""  # the table's own latest time, as it wrote it
    latest_ms: int | None = None
    latest_at: float = 0.0  # the witness's time when ``latest_ms`` arrived
    now_ms: int | None = None  # the table's time now, as last estimated (never goes back)
    received_at: float | None = None  # the witness's time of the table's last message
    open_since_ms: int | None = None
    active: dict[str, str] = field(default_factory=dict)  # standing floor alerts: detail
    notices: dict[str, str] = field(default_factory=dict)  # their kind: the alert's key
    open_alerts: dict[str, dict[str, Any]] = field(default_factory=dict)  # by key
    unconfirmed: dict[str, Any] | None = None
    alerting: bool = False

    def table_now(self, now: float) -> int | None:
        """The table's time now: its latest own time, moved on by the witness's clock since
        that arrived; never back (a record that comes late does not bring back a close that
        had left the hour)."""
        if self.latest_ms is None:
            return None
        estimate = self.latest_ms + int(max(0.0, now - self.latest_at) * 1000)
        self.now_ms = estimate if self.now_ms is None else max(self.now_ms, estimate)
        return self.now_ms

    def saw(self, time: str, now: float) -> int | None:
        moment = time_ms(time)
        if moment is not None and (self.latest_ms is None or moment >= self.latest_ms):
            self.latest_ms, self.latest_at, self.last_seen = moment, now, time
        self.received_at = now
        return moment

    def is_open(self) -> bool:
        return (
            self.presence == "online"
            and not self.faults
            and self.screen not in _STOPPED_SCREENS
            and not self.service
        )

    def view(self, settings: FloorSettings) -> dict[str, Any]:
        shown = sorted(self.open_alerts.values(), key=_alert_order)
        witness = [a for a in shown if a["source"] == "witness"]
        return {
            "table": self.name,
            "version": self.version,
            "presence": self.presence,
            "screen": self.screen,
            "mode": self.mode,
            "game": self.game,
            "round": self.round,
            "service": self.service,
            "games_per_hour": self.games_per_hour,
            "min_games_per_hour": settings.min_games_per_hour,
            "last_result": None if self.last_result is None else dict(self.last_result),
            "faults": sorted(self.faults),
            "dice_alarm": None if self.dice_alarm is None else dict(self.dice_alarm),
            "dice_set": self.dice_set,
            "log_size": self.log_size,
            "anchored_size": self.anchored_size,
            "anchored_time": self.anchored_time,
            "anchored_local": local_text(self.anchored_time, settings.zone),
            "unconfirmed": None if self.unconfirmed is None else dict(self.unconfirmed),
            "last_seen": self.last_seen,
            "last_seen_local": local_text(self.last_seen, settings.zone),
            "received_ms": None if self.received_at is None else int(self.received_at * 1000),
            "alerts": [
                {
                    k: a[k]
                    for k in ("key", "kind", "words", "severity", "detail", "time_local", "source")
                }
                for a in shown
            ],
            "witness_alert": None
            if not witness
            else {k: witness[0][k] for k in ("kind", "words", "detail", "time", "severity")},
            "alerting": self.alerting,
        }


class FloorFold:
    """Every table's view and the alert list, folded from the witness's calls (pure). Each
    method returns whether anything shown changed; ``version`` counts the changes, and each
    table and alert carries the version it last changed at, so that a stream sends only what
    changed (:meth:`changes_since`)."""

    def __init__(self, settings: FloorSettings | None = None) -> None:
        self.settings = settings or FloorSettings()
        self.version = 0
        self._tables: dict[str, _Table] = {}
        self._alerts: dict[str, dict[str, Any]] = {}  # by key: "w<number>", "f<number>"
        self._evicted = 0  # the version when an alert last left the list
        self.notices = 0  # the floor's own alerts raised

    # --- the witness's calls -----------------------------------------------------------------

    def record(self, table: str, line: object, now: float) -> bool:
        if not isinstance(line, Mapping):
            return False
        seq = _int(line.get("seq"), low=1)
        kind = line.get("kind")
        time = _text(line.get("time"), 40) or ""
        data = line.get("data")
        if seq is None or not isinstance(kind, str) or not isinstance(data, Mapping):
            return False
        state = self._table(table)
        if state is None:
            return False
        state.log_size = max(state.log_size, seq)
        moment = state.saw(time, now)
        number = _round_of(kind, data)
        if number is not None and kind != RecordKind.SERVICE_TEST:
            state.round = number
        self._take(state, seq=seq, kind=kind, time=time, moment=moment, data=data)
        self._derive(state, now)
        return self._changed(state)

    def status(self, table: str, status: Status, now: float) -> bool:
        state = self._table(table)
        if state is None:
            return False
        state.saw(status.time, now)
        state.presence = str(status.presence)
        # An offline status (the broker's will, set when the table connected) says nothing of
        # the screen: the last one shown stays. A refused key is a notice over the screen, and
        # game recall a past round: neither says which faults are open.
        if status.presence is Presence.ONLINE and status.screen not in _NOTICE_SCREENS:
            state.screen = _text(status.screen, 64) or ""
            if status.mode:
                state.mode = _text(status.mode, 16) or ""
            if status.round:
                state.round = status.round
            if status.screen != "recall":
                state.faults = _names(list(status.faults))
        self._derive(state, now)
        return self._changed(state)

    def cosigned(self, table: str, size: int, time: int, now: float) -> bool:
        """A checkpoint of ``size`` records cosigned at ``time`` (the cosignature's timestamp,
        POSIX seconds)."""
        state = self._tables.get(table)
        if state is None or _int(size) is None:
            return False
        state.anchored_size = size
        stamp = _int(time)
        state.anchored_time = "" if stamp is None or stamp > 2**40 else rfc3339(stamp)
        self._derive(state, now)
        return self._changed(state)

    def unconfirmed(self, table: str, unconfirmed: Unconfirmed, now: float) -> bool:
        """The table's records beyond its last signed checkpoint (0 of them: none)."""
        state = self._tables.get(table) if not unconfirmed.count else self._table(table)
        if state is None:
            return False
        shown = None
        if unconfirmed.count:
            shown = {
                "count": unconfirmed.count,
                "first": unconfirmed.first,
                "last": unconfirmed.last,
                "contested": unconfirmed.contested,
                "result": unconfirmed_summary(unconfirmed.result),
            }
        if shown == state.unconfirmed:
            return False
        state.unconfirmed = shown
        return self._changed(state)

    def alert(self, stored: StoredAlert, now: float) -> bool:
        """An alert of the witness, raised, cleared or acknowledged (the whole of it)."""
        alert = stored.alert
        key = f"w{stored.id}"
        entry = self._put_alert(
            key,
            id=stored.id,
            table=_text(alert.table, 32) or "",
            kind=str(alert.kind),
            severity=str(stored.severity),
            detail=_text(alert.detail, MAX_DETAIL_CHARS) or "",
            time=_text(alert.time, 40) or "",
            size=_int(alert.size) or 0,
            source="witness",
            cleared=_text(stored.cleared, 40) or "",
            acked_by=_text(stored.acked_by, 64) or "",
            acked_at=_text(stored.acked_at, 40) or "",
        )
        state = self._tables.get(alert.table)
        if state is not None:  # an alert names a table; it does not make one
            self._file(state, entry)
            self._derive(state, now)
            self._changed(state)
        return True

    def _file(self, state: _Table, entry: dict[str, Any]) -> None:
        if entry["open"]:
            state.open_alerts[entry["key"]] = entry
        else:
            state.open_alerts.pop(entry["key"], None)

    def refresh(self, now: float) -> bool:
        """Time has passed: games per hour, the alerts that depend on them, the hold of a
        witness alert."""
        changed = False
        for state in self._tables.values():
            before = self._shown(state)
            self._derive(state, now)
            if self._shown(state) != before:
                changed = self._changed(state) or changed
        return changed

    # --- what is shown -----------------------------------------------------------------------

    def snapshot(self, now: float) -> dict[str, Any]:
        return {
            "version": self.version,
            "now_ms": int(now * 1000),
            "settings": {
                "min_games_per_hour": self.settings.min_games_per_hour,
                "window_minutes": WINDOW_MS // 60000,
            },
            "zone": zone_view(now, self.settings.zone),
            "tables": [t.view(self.settings) for _, t in sorted(self._tables.items())],
            "alerts": [dict(a) for a in self._listed(open_ones=True)],
            "closed": [dict(a) for a in self._listed(open_ones=False)],
        }

    def _listed(self, *, open_ones: bool) -> list[dict[str, Any]]:
        """The open alerts by severity, then newest first; or the closed ones, the most
        recently closed first."""
        if open_ones:
            return sorted((a for a in self._alerts.values() if a["open"]), key=_alert_order)
        closed = [a for a in self._alerts.values() if not a["open"]]
        return sorted(closed, key=lambda a: a["version"], reverse=True)

    def changes_since(self, version: int, now: float) -> dict[str, Any] | None:
        """The tables changed and the alerts added or changed after ``version`` (a page puts
        each in its place by its ``key``), or None when alerts changed since have left the
        bounded list already (send a snapshot)."""
        if self._evicted > version:
            return None
        return {
            "version": self.version,
            "now_ms": int(now * 1000),
            "tables": [
                t.view(self.settings)
                for _, t in sorted(self._tables.items())
                if t.version > version
            ],
            "zone": zone_view(now, self.settings.zone),
            "alerts": [dict(a) for a in self._alerts.values() if a["version"] > version],
        }

    def table(self, name: str) -> dict[str, Any] | None:
        state = self._tables.get(name)
        return None if state is None else state.view(self.settings)

    # --- the fold's steps --------------------------------------------------------------------

    def _table(self, name: str) -> _Table | None:
        state = self._tables.get(name)
        if state is not None:
            return state
        if not isinstance(name, str) or not is_table_name(name):
            return None
        if len(self._tables) >= MAX_TABLES:
            return None
        state = self._tables[name] = _Table(name)
        return state

    def _take(
        self,
        state: _Table,
        *,
        seq: int,
        kind: str,
        time: str,
        moment: int | None,
        data: Mapping[str, Any],
    ) -> None:
        """One record's part in the view (record_schema.py gives each kind's fields; the
        witness reads a table's lines leniently: a field of another type is left out)."""
        take = _TAKES.get(kind)
        if take is not None:
            take(state, _Seen(seq, time, moment, data))

    def _derive(self, state: _Table, now: float) -> None:
        """Games per hour and the floor alerts, at the table's time now."""
        table_now = state.table_now(now)
        _count_games(state, table_now)
        wanted: dict[str, str] = {}
        least = self.settings.min_games_per_hour
        if least > 0 and _slow_for_an_hour(state, table_now, least):
            wanted[FloorAlertKind.GAMES_PER_HOUR_LOW] = (
                f"{state.games_per_hour} games in the last hour, fewer than {least}"
            )
        for kind in sorted(set(state.active) | set(wanted)):
            if kind in wanted and kind not in state.active:
                self._raise_notice(state, kind, wanted[kind], now)
            elif kind not in wanted:
                self._clear_notice(state, kind, now)
        state.active = wanted
        state.alerting = bool(state.open_alerts)

    def _raise_notice(self, state: _Table, kind: str, detail: str, now: float) -> None:
        """A floor alert of the witness's own, raised."""
        self.notices += 1
        key = f"f{self.notices}"
        state.notices[kind] = key
        entry = self._put_alert(
            key,
            id=None,
            table=state.name,
            kind=kind,
            severity=str(Severity.INFO),
            detail=detail,
            time=rfc3339(now),
            size=0,
            source="floor",
        )
        self._file(state, entry)

    def _clear_notice(self, state: _Table, kind: str, now: float) -> None:
        known = self._alerts.get(state.notices.pop(kind, ""))
        if known is not None:
            entry = self._put_alert(known["key"], **{**_fields(known), "cleared": rfc3339(now)})
            self._file(state, entry)

    def _put_alert(
        self,
        key: str,
        *,
        id: int | None,
        table: str,
        kind: str,
        severity: str,
        detail: str,
        time: str,
        size: int,
        source: str,
        cleared: str = "",
        acked_by: str = "",
        acked_at: str = "",
    ) -> dict[str, Any]:
        """An alert added to the list, or changed there (cleared, acknowledged)."""
        zone = self.settings.zone
        self.version += 1
        entry = {
            "key": key,
            "id": id,
            "number": self.version,
            "version": self.version,
            "table": table,
            "kind": kind,
            "words": ALERT_WORDS.get(kind, kind.replace("_", " ")),
            "severity": severity if severity in SEVERITY_RANK else str(Severity.INFO),
            "detail": detail,
            "time": time,
            "time_local": local_text(time, zone),
            "size": size,
            "source": source,
            "cleared": bool(cleared),
            "cleared_at": cleared,
            "cleared_local": local_text(cleared, zone),
            "acked_by": acked_by,
            "acked_at": acked_at,
            "acked_local": local_text(acked_at, zone),
            "ackable": id is not None and not acked_by,
            "open": not cleared and not acked_by,
        }
        self._alerts.pop(key, None)
        self._alerts[key] = entry
        self._bound_alerts()
        return entry

    def _bound_alerts(self) -> None:
        """At most MAX_OPEN_ALERTS open and MAX_ALERTS closed: the oldest changed go."""
        for is_open, most in ((True, MAX_OPEN_ALERTS), (False, MAX_ALERTS)):
            listed = [a for a in self._alerts.values() if a["open"] is is_open]
            for entry in listed[: max(0, len(listed) - most)]:
                del self._alerts[entry["key"]]
                state = self._tables.get(entry["table"])
                if state is not None:
                    state.open_alerts.pop(entry["key"], None)
                self._evicted = self.version

    def _changed(self, state: _Table) -> bool:
        self.version += 1
        state.version = self.version
        return True

    @staticmethod
    def _shown(state: _Table) -> tuple[object, ...]:
        return (state.games_per_hour, tuple(sorted(state.active.items())), state.alerting)


def _alert_order(entry: Mapping[str, Any]) -> tuple[int, int, int]:
    """Severity first (critical, warning, info), then the newest first."""
    rank = SEVERITY_RANK.get(entry["severity"], 9)
    return (rank, -(time_ms(entry["time"]) or 0), -entry["number"])


def _fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    names = ("id", "table", "kind", "severity", "detail", "time", "size", "source")
    return {**{n: entry[n] for n in names}, "acked_by": entry["acked_by"],
            "acked_at": entry["acked_at"], "cleared": entry["cleared_at"]}  # fmt: skip


class Floor:
    """The ``FloorSink`` the witness calls, over a :class:`FloorFold`, for threads: the
    witness's threads apply, the dashboard's streams read and wait. ``clock`` is the witness's
    time (UNIX seconds; ``time.time``), asked under the lock at each call. Nothing here blocks
    on a client: a stream copies what it sends under the lock and sends it outside."""

    def __init__(
        self, *, clock: Callable[[], float], settings: FloorSettings | None = None
    ) -> None:
        self._clock = clock
        self._fold = FloorFold(settings)
        self._cond = threading.Condition()

    @property
    def settings(self) -> FloorSettings:
        return self._fold.settings

    # --- FloorSink ---------------------------------------------------------------------------

    def apply_record(self, table: str, line: dict[str, Any]) -> None:
        with self._cond:
            if self._fold.record(table, line, self._clock()):
                self._cond.notify_all()

    def apply_status(self, table: str, status: Status) -> None:
        with self._cond:
            if self._fold.status(table, status, self._clock()):
                self._cond.notify_all()

    def apply_cosigned(self, table: str, size: int, time: int) -> None:
        with self._cond:
            if self._fold.cosigned(table, size, time, self._clock()):
                self._cond.notify_all()

    def apply_unconfirmed(self, table: str, unconfirmed: Unconfirmed) -> None:
        with self._cond:
            if self._fold.unconfirmed(table, unconfirmed, self._clock()):
                self._cond.notify_all()

    def apply_alert(self, alert: StoredAlert) -> None:
        with self._cond:
            if self._fold.alert(alert, self._clock()):
                self._cond.notify_all()

    # --- for the dashboard -------------------------------------------------------------------

    def refresh(self) -> None:
        """Time has passed (the dashboard calls this every few seconds)."""
        with self._cond:
            if self._fold.refresh(self._clock()):
                self._cond.notify_all()

    @property
    def version(self) -> int:
        with self._cond:
            return self._fold.version

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return self._fold.snapshot(self._clock())

    def changes_since(self, version: int) -> dict[str, Any] | None:
        with self._cond:
            return self._fold.changes_since(version, self._clock())

    def table(self, name: str) -> dict[str, Any] | None:
        with self._cond:
            return self._fold.table(name)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def wait_for_change(
        self, version: int, timeout: float, *, is_stopped: Callable[[], bool] = lambda: False
    ) -> bool:
        """Wait until the version passes ``version`` (True), ``is_stopped()`` or ``timeout``."""
        with self._cond:
            return self._cond.wait_for(
                lambda: is_stopped() or self._fold.version > version, timeout
            ) and (self._fold.version > version)

    def wake(self) -> None:
        """Wake every waiting stream (a server closing)."""
        with self._cond:
            self._cond.notify_all()


if TYPE_CHECKING:  # mypy checks that a Floor is the witness's FloorSink (ports.py)
    from controller.witness.ports import FloorSink

    _FLOOR_IS_A_SINK: type[FloorSink] = Floor
