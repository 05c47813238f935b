"""What the table page and the result feed say, built from screens and from log records.

Pure: no I/O. The server (controller/display/server.py) decides when to send; this module
decides what. Every message is plain JSON (the page renders it with ``textContent``; nothing
from a record is ever interpreted as markup).

Event ids are the audit log's sequence numbers: a screen shown after record ``seq`` has the id
``"seq"``; further screens shown before the next record (a shake starting, a reading requested)
are ``"seq.1"``, ``"seq.2"``, ... so that a page reconnecting with ``Last-Event-ID`` is given
exactly what it has not seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import controller.core.record_schema as schema
from controller.core import canonical
from controller.core.dice import NoRollReason
from controller.core.digits import MAX_SEQ, parse_bounded_int
from controller.core.record_schema import read_lenient, read_lenient_fields
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import Refusal, Screen
from controller.errors import NumberError
from controller.ports import LoggedCheckpoint

TREND_LENGTH = 20  # the trend board: the last 20 results
INTERVENTIONS = 6  # the supervisor's view: the last corrections and voids, with who
_MAX_NOTE = 120  # a person's note on a record, as the core bounds it

# Records that the page can show again when it catches up from the log.
REPLAYED_KINDS = frozenset(
    {
        RecordKind.ROUND_OPENED,
        RecordKind.NO_MORE_BETS,
        RecordKind.NO_ROLL,
        RecordKind.RESULT,
        RecordKind.RESULT_CORRECTED,
        RecordKind.VOID,
        RecordKind.RESULT_VOIDED,
        RecordKind.FAULT,
        RecordKind.RESHAKE_LIMIT,
        RecordKind.RNG_COMMIT,
    }
)


@dataclass(frozen=True, slots=True, order=True)
class EventId:
    seq: int  # the log's sequence number of the last record before the screen (0: none yet)
    index: int = 0  # screens shown since that record, before this one

    def __str__(self) -> str:
        return str(self.seq) if self.index == 0 else f"{self.seq}.{self.index}"

    @classmethod
    def parse(cls, text: str | None) -> EventId | None:
        """``"41"`` or ``"41.2"`` (ASCII digits, each part at most MAX_SEQ); anything else is
        None (the client is treated as new)."""
        if not text or len(text) > 40:
            return None
        head, dot, tail = text.strip().partition(".")
        try:
            seq = parse_bounded_int(head, high=MAX_SEQ, what="event id")
            index = parse_bounded_int(tail, high=MAX_SEQ, what="event id") if dot else 0
        except NumberError:
            return None
        return cls(seq, index)

    def next_for(self, seq: int | None) -> EventId:
        """The id of the next screen, shown after record ``seq``."""
        seq = 0 if seq is None else seq
        return EventId(seq, self.index + 1) if seq == self.seq else EventId(seq)


_DUMPS = json.JSONEncoder(separators=(",", ":")).encode
_ROUND_TRIP = json.JSONDecoder().decode


def jsonable(value: object) -> Any:
    """The data of a screen as plain JSON values (enums as their value, tuples as lists).

    Data of the types records are made of (``canonical``'s plain values: the screens' usual
    case, a result's included) go through the json module's C encoder and decoder, which give
    the same values as the walk below, in a fraction of its time (on the path to the page)."""
    if canonical.is_plain(value):
        return _ROUND_TRIP(_DUMPS(value))
    return _jsonable(value)


def _jsonable(value: object) -> Any:
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, set | frozenset) else items
    return str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def commitment_of(data: Mapping[str, object], seq: int | None) -> dict[str, Any] | None:
    """The RNG session's commitment if the screen carries one: ``commitment`` (a string, or
    ``{session, commitment}``), or ``rng_commitment`` with ``rng_session``."""
    raw = data.get("commitment")
    session = data.get("rng_session")
    if isinstance(raw, Mapping):
        session = raw.get("session", session)
        raw = raw.get("commitment")
    if raw is None:
        raw = data.get("rng_commitment")
    if not isinstance(raw, str) or not raw:
        return None
    return {"commitment": raw, "session": None if session is None else str(session), "seq": seq}


def anchor_of(data: Mapping[str, object]) -> dict[str, Any] | None:
    """How far the witness anchors the log, for the board: the size it cosigned, when (its
    timestamp, POSIX seconds) and its name; from a ``cosigned`` record or the fleet publisher.
    None for data that does not say it."""
    size, timestamp, witness = data.get("size"), data.get("timestamp"), data.get("witness")
    if _int(size) is None or _int(timestamp) is None or not isinstance(witness, str):
        return None
    return {"size": size, "timestamp": timestamp, "witness": witness[:100]}


def screen_event(
    screen: Screen | str,
    data: Mapping[str, object],
    event_id: EventId,
    *,
    round_number: int | None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One screen as the page receives it; ``body``: its data as :func:`screen_body` made it
    beforehand (a screen prepared ahead, ``PreparedScreen``)."""
    if body is None:
        body = screen_body(screen, data)
    return {
        "id": str(event_id),
        "seq": event_id.seq,
        "screen": str(screen),
        "round": _int(data.get("round")) or round_number,
        "data": body,
    }


def screen_body(screen: Screen | str, data: Mapping[str, object]) -> dict[str, Any]:
    """A screen's data as the page receives it: plain JSON values, and a no roll's reason in
    plain words."""
    body: dict[str, Any] = jsonable(data)
    if str(screen) == Screen.NO_ROLL and "reason" in body and "words" not in body:
        body["words"] = _plain_words(body["reason"])
    return body


@dataclass(frozen=True, slots=True)
class PreparedScreen:
    """A screen's bodies made before it is shown (a result decided ahead, while the sensor
    reads again): :func:`screen_body` of ``data`` and the players' copy of it. Taken only for
    the very ``data`` object it was made of, and the same screen (:meth:`is_for`)."""

    screen: Screen
    data: Mapping[str, object]
    body: dict[str, Any]
    players: dict[str, Any]

    @classmethod
    def of(cls, screen: Screen, data: Mapping[str, object]) -> PreparedScreen:
        body = screen_body(screen, data)
        return cls(screen, data, body, players_data(str(screen), body))

    def is_for(self, screen: Screen, data: Mapping[str, object]) -> bool:
        return self.data is data and self.screen is screen


def _plain_words(reason: object) -> str:
    try:
        return NoRollReason(str(reason)).plain_words
    except ValueError:
        return str(reason).replace("_", " ")


def trend_entry(
    seq: int,
    round_number: int | None,
    result: Mapping[str, Any],
    attempt: object = None,
    *,
    corrected: bool = False,
) -> dict[str, Any]:
    """One cell of the trend board: the result of ``attempt`` of a round; ``corrected``: the
    result corrected to the dice as they lie (N.J.A.C. 13:69E-1.28P(d)), which stands in the
    place of the one first read. ``void`` is a cell that is no result: a result voided in
    the logs of older versions (a round played again has a cell for each attempt), or a round
    void (``wagers_returned``, :func:`void_entry`)."""
    return {
        "seq": seq,
        "round": round_number,
        "attempt": _int(attempt),
        "count": _int(result.get("count")),
        "total": _int(result.get("total")),
        "dice": result.get("dice"),
        "starting_position": result.get("starting_position"),
        "bank": result.get("bank"),
        "void": False,
        "corrected": corrected,
        "wagers_returned": False,
    }


def void_entry(seq: int, round_number: int | None) -> dict[str, Any]:
    """The trend board's cell of a round void (621a.12(c),(e)): every wager returned and no
    result, so it shows none (not the dice nor the first hand of a result it may have had)."""
    return {
        "seq": seq,
        "round": round_number,
        "attempt": None,
        "count": None,
        "total": None,
        "dice": None,
        "starting_position": None,
        "bank": None,
        "void": True,
        "corrected": False,
        "wagers_returned": True,
    }


_RESULT_FIELDS = ("count", "total", "dice", "starting_position", "bank")


class TrendBoard:
    """The trend board: the cells of the last ``TREND_LENGTH`` rounds, oldest first, each
    kept serialised as well (a message of the page's stream is joined from them).

    A result is a cell, and a result shown again (a restart, a fault cleared) the same cell.
    A correction puts the corrected result in its result's cell, marked corrected. A round
    void makes the cell of its result (or a new cell, where it had none) VOID, wagers
    returned: never a result. In the logs of older versions a result voided (its round played
    again) keeps its cell, marked void, beside the next attempt's. Pure: no I/O."""

    def __init__(self, encode: Any = None) -> None:
        self._encode = encode or _DUMPS
        self._cells: list[dict[str, Any]] = []
        self._json: list[str] = []

    @property
    def cells(self) -> list[dict[str, Any]]:
        """A copy of the cells, oldest first."""
        return [dict(c) for c in self._cells]

    @property
    def json(self) -> list[str]:
        """Each cell serialised, oldest first."""
        return list(self._json)

    def add(self, cell: Mapping[str, Any]) -> None:
        """A cell as it was made (the board as the log has it, at start), after the others."""
        self._cells.append(dict(cell))
        self._json.append(self._encode(self._cells[-1]))
        if len(self._cells) > TREND_LENGTH:
            del self._cells[0], self._json[0]

    def result(self, cell: Mapping[str, Any]) -> bool:
        """A result's cell (``trend_entry``); True when the board changed."""
        key = (cell.get("round"), cell.get("attempt"))
        for index, known in enumerate(self._cells):
            same = known.get("seq") == cell.get("seq") or (
                key[1] is not None and (known.get("round"), known.get("attempt")) == key
            )
            if known.get("wagers_returned") and known.get("round") == key[0]:
                return False  # the round is void: nothing shows it as a result
            if not same:
                continue
            if not cell.get("corrected") or known.get("void") or _shown_alike(known, cell):
                return False
            self._put(index, cell)
            return True
        self.add(cell)
        return True

    def record(self, kind: str, seq: int, data: Mapping[str, Any]) -> bool:
        """A record of the log that the board shows: a ``result``, a ``result_corrected``, a
        ``void`` or (older logs) a ``result_voided`` (record_schema.py gives their fields);
        True when the board changed."""
        step = _TREND_STEPS.get(kind)
        if step is None:
            return False
        take, schema_of = step
        fields = read_lenient(schema_of, data)
        return take(self, seq, _int(fields.round), _int(fields.attempt), data)

    def _take_result(
        self, seq: int, number: int | None, attempt: int | None, data: Mapping[str, Any]
    ) -> bool:
        return self.result(trend_entry(seq, number, data, attempt))

    def _take_corrected(
        self, seq: int, number: int | None, attempt: int | None, data: Mapping[str, Any]
    ) -> bool:
        result: object = read_lenient(schema.ResultCorrected, data).result  # None: absent
        if not isinstance(result, Mapping):
            return False
        return self.result(trend_entry(seq, number, result, attempt, corrected=True))

    def _take_result_voided(
        self, seq: int, number: int | None, attempt: int | None, data: Mapping[str, Any]
    ) -> bool:
        """Older logs: that attempt voided, its round played again."""
        changed = False
        for index, cell in enumerate(self._cells):
            if (
                cell["round"] == number
                and not cell["void"]
                and (attempt is None or cell.get("attempt") == attempt)
            ):
                self._put(index, {**cell, "void": True})
                changed = True
        return changed

    def _take_void(
        self, seq: int, number: int | None, attempt: int | None, data: Mapping[str, Any]
    ) -> bool:
        """The whole round void: its cell (its result's, else a new one) VOID."""
        if read_lenient(schema.Void, data).service is True:
            return False
        if any(c.get("wagers_returned") and c["round"] == number for c in self._cells):
            return False
        standing = [i for i, c in enumerate(self._cells) if c["round"] == number]
        standing = [i for i in standing if not self._cells[i]["void"]] or standing
        if standing:
            self._put(standing[-1], void_entry(seq, number))
        else:
            self.add(void_entry(seq, number))
        return True

    def _put(self, index: int, cell: Mapping[str, Any]) -> None:
        self._cells[index] = dict(cell)
        self._json[index] = self._encode(self._cells[index])


_TrendRecord = schema.Result | schema.ResultCorrected | schema.ResultVoided | schema.Void
# Each kind the board shows: its step, and its schema (record_schema.py), read leniently.
_TREND_STEPS: dict[
    str,
    tuple[
        Callable[[TrendBoard, int, int | None, int | None, Mapping[str, Any]], bool],
        type[_TrendRecord],
    ],
] = {
    RecordKind.RESULT: (TrendBoard._take_result, schema.Result),
    RecordKind.RESULT_CORRECTED: (TrendBoard._take_corrected, schema.ResultCorrected),
    RecordKind.RESULT_VOIDED: (TrendBoard._take_result_voided, schema.ResultVoided),
    RecordKind.VOID: (TrendBoard._take_void, schema.Void),
}


def _shown_alike(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("corrected") == b.get("corrected") and all(
        a.get(k) == b.get(k) for k in _RESULT_FIELDS
    )


def _note(value: object) -> str | None:
    return value[:_MAX_NOTE] if isinstance(value, str) and value else None


def intervention_of(
    kind: str, seq: int, time: object, data: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A result corrected (N.J.A.C. 13:69E-1.28P(d)) or a round voided (621a.12(c),(e)) as the
    supervisor's view lists it: which round, why, and who (the employee id the record names);
    None for any other record."""
    if kind == RecordKind.RESULT_CORRECTED:
        corrected = read_lenient(schema.ResultCorrected, data)
        if corrected.service is True:
            return None
        result: object = corrected.result  # None: absent
        total = result.get("total") if isinstance(result, Mapping) else None
        return {
            "kind": "correction",
            **_intervention(seq, time, corrected, _note(corrected.note)),
            "dice_read": corrected.dice_read,
            "dice_seen": corrected.dice_seen,
            "total": _int(total),
        }
    if kind == RecordKind.VOID:
        void = read_lenient(schema.Void, data)
        if void.service is True:
            return None
        return {
            "kind": "void",
            **_intervention(seq, time, void, _note(void.note) or _note(void.detail)),
            "state": _note(void.state),
            "reshuffle": void.reshuffle is True,
        }
    return None


def _intervention(
    seq: int, time: object, record: schema.ResultCorrected | schema.Void, note: str | None
) -> dict[str, Any]:
    """What a correction and a void both show: which round, why, who, the words given."""
    return {
        "seq": seq,
        "time": time if isinstance(time, str) else None,
        "round": _int(record.round),
        "attempt": _int(record.attempt),
        "reason": _note(record.reason),
        "employee": _note(record.employee),
        "note": note,
    }


def _result_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("round", "attempt")}


def replay_event(record: StoredRecord) -> dict[str, Any] | None:
    """A past record as the page would have seen it, or None for records it does not show."""
    if record.kind not in REPLAYED_KINDS:
        return None
    data = record.entry().get("data", {})
    if not isinstance(data, dict):
        return None
    kind = RecordKind(record.kind)
    if kind is RecordKind.RNG_COMMIT:
        commit = read_lenient(schema.RngCommit, data)
        said = {"commitment": commit.commitment, "rng_session": commit.session}
        return {**screen_event("commitment", said, EventId(record.seq), round_number=None)}
    screen, number, more = _REPLAYS[kind](data)
    round_number = _int(number)
    shown = {"round": round_number, **more}
    return screen_event(screen, shown, EventId(record.seq), round_number=round_number)


_Replay = tuple[Screen | str, object, dict[str, Any]]  # the screen, the round, what it shows


def _replay_result(data: Mapping[str, Any]) -> _Replay:
    result = read_lenient(schema.Result, data)
    return Screen.RESULT, result.round, {"attempt": result.attempt, "result": _result_fields(data)}


def _replay_corrected(data: Mapping[str, Any]) -> _Replay:
    """N.J.A.C. 13:69E-1.28P(d): the result shown again, corrected."""
    fixed = read_lenient(schema.ResultCorrected, data)
    corrected = {"dice_read": fixed.dice_read, "reason": fixed.reason, "employee": fixed.employee}
    shown = {"attempt": fixed.attempt, "result": fixed.result, "corrected": corrected}
    return Screen.RESULT, fixed.round, shown


def _replay_no_roll(data: Mapping[str, Any]) -> _Replay:
    no_roll = read_lenient(schema.NoRoll, data)
    return Screen.NO_ROLL, no_roll.round, {"attempt": no_roll.attempt, "reason": no_roll.reason}


def _replay_fault(data: Mapping[str, Any]) -> _Replay:
    fault = read_lenient(schema.FaultRecord, data)
    return Screen.FAULT, fault.round, {"faults": [fault.fault], "detail": fault.detail}


def _replay_reshake_limit(data: Mapping[str, Any]) -> _Replay:
    limit = read_lenient(schema.ReshakeLimit, data)
    return Screen.LOCKED, limit.round, {"no_rolls": limit.no_rolls}


def _replay_bets_closed(data: Mapping[str, Any]) -> _Replay:
    return Screen.BETS_CLOSED, read_lenient(schema.NoMoreBets, data).round, {}


def _replay_result_voided(data: Mapping[str, Any]) -> _Replay:
    """Older logs: a result voided, its round played again."""
    voided = read_lenient(schema.ResultVoided, data)
    attempt = _int(voided.attempt)
    shown = {"attempt": None if attempt is None else attempt + 1, "voided": voided.reason}
    return Screen.BETS_CLOSED, voided.round, shown


def _replay_round_opened(data: Mapping[str, Any]) -> _Replay:
    return Screen.READY, read_lenient(schema.RoundOpened, data).round, {}


def _replay_void(data: Mapping[str, Any]) -> _Replay:
    """There is no void screen: the page marks the round void on its trend board."""
    void = read_lenient(schema.Void, data)
    return "void", void.round, {"void": True, "reason": void.reason, "wagers": void.wagers}


_REPLAYS: dict[RecordKind, Callable[[Mapping[str, Any]], _Replay]] = {
    RecordKind.RESULT: _replay_result,
    RecordKind.RESULT_CORRECTED: _replay_corrected,
    RecordKind.NO_ROLL: _replay_no_roll,
    RecordKind.FAULT: _replay_fault,
    RecordKind.RESHAKE_LIMIT: _replay_reshake_limit,
    RecordKind.NO_MORE_BETS: _replay_bets_closed,
    RecordKind.RESULT_VOIDED: _replay_result_voided,
    RecordKind.ROUND_OPENED: _replay_round_opened,
    RecordKind.VOID: _replay_void,
}


def feed_line(record: StoredRecord, checkpoint: LoggedCheckpoint | None) -> dict[str, Any]:
    """One line of the result feed: every committed record, in order, with its hash.

    ``leaf`` is the record's canonical text: SHA-256 of its UTF-8 bytes is ``hash``, and the
    next record's ``prev``; the leaves are the Merkle tree that ``checkpoint`` signs. A record
    read back from the log is decoded strictly (``canonical.decode``)."""
    return _feed_line(record, record.entry(), checkpoint)


def committed_feed_line(record: StoredRecord, checkpoint: LoggedCheckpoint) -> dict[str, Any]:
    """``feed_line`` for a record this process has just committed (the log's ``on_commit``):
    its leaf is the encoding the log made of it a moment ago, not bytes read back, so it is
    parsed without the strict check that every byte is canonical (a third of the cost, on the
    path from the sensor's frame to the feed)."""
    entry = json.loads(record.leaf)
    return _feed_line(record, entry if isinstance(entry, dict) else {}, checkpoint)


def _feed_line(
    record: StoredRecord, entry: dict[str, Any], checkpoint: LoggedCheckpoint | None
) -> dict[str, Any]:
    data = entry.get("data", {})
    data = data if isinstance(data, dict) else {}
    return {
        "type": "record",
        "seq": record.seq,
        "kind": record.kind,
        "time": entry.get("time"),
        **_feed_fields(record.kind, data),
        "data": data,
        "hash": record.hash,
        "prev": entry.get("prev"),
        "leaf": record.leaf.decode("utf-8"),
        "checkpoint": checkpoint_json(checkpoint),
    }


def _feed_fields(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """What a feed line says of its record (read leniently through its kind's schema): its
    round and attempt, and a result's, or a correction's (the result corrected to the dice as
    they lie), dice, total, count and starting position."""
    number, attempt, corrected = read_lenient_fields(kind, data, _FEED_FIELDS)
    result: Mapping[str, Any] | None = data if kind == RecordKind.RESULT else None
    if kind == RecordKind.RESULT_CORRECTED and isinstance(corrected, Mapping):
        result = corrected
    shown = (
        [None] * len(_FEED_RESULT)
        if result is None
        else read_lenient_fields(RecordKind.RESULT, result, _FEED_RESULT)
    )
    return {
        "round": _int(number),
        "attempt": _int(attempt),
        **dict(zip(_FEED_RESULT, shown, strict=True)),
    }


_FEED_FIELDS = ("round", "attempt", "result")
_FEED_RESULT = ("dice", "total", "count", "starting_position")


def checkpoint_json(checkpoint: LoggedCheckpoint | None) -> dict[str, Any] | None:
    return None if checkpoint is None else {"size": checkpoint.size, "note": checkpoint.note}


# --- what the players' page is sent ----------------------------------------------------------
# The players' page (``/``, its stream ``/table/events``) is sent only what it shows: nothing
# that is the supervisor's or surveillance's alone reaches it, whatever its script does. A
# refused key is a player-facing code (the operator's words, with the state, the event and the
# rule, stay in the log and the supervisor's stream); the dice's statistics are the shift's
# counts without the monitor's evidence or its alarm; the dice and the tiles only say whether
# they stop play (not their warnings); a fault is named in the players' words, by kind (never
# the dice alarm, a log's or the software's internals); no meters, no corrections' or voids'
# who and why, no employee id, no note, no detail.

# The players' message for each refusal (messages.json: "refused.<code>").
PLAYER_REFUSALS: Mapping[Refusal, str] = {
    Refusal.LID_OPEN: "close_lid",
    Refusal.DICE_MISSING: "not_ready",
    Refusal.DICE_EXPIRED: "not_ready",
    Refusal.TILES_MISSING: "not_ready",
    Refusal.TILES_EXPIRED: "not_ready",
    Refusal.FAULT_NEEDS_RESTART: "not_ready",
    Refusal.FAULT_NEEDS_DICE_ACTION: "not_ready",
    Refusal.FAULT_NEEDS_TERMINAL: "not_ready",
    Refusal.FAULT_NOT_CLEARED: "not_ready",
    Refusal.NO_PLAYER_BANK: "bank",
    Refusal.CO_BANK_NEEDS_PLAYER_BANK: "bank",
    Refusal.STYLE_TOO_LATE: "style",
    Refusal.NO_STYLE_OFFERED: "style",
    Refusal.IN_RECALL: "recall",
    **dict.fromkeys(
        (
            Refusal.SUPERVISOR_KEY,
            Refusal.NOTHING_TO_CLEAR,
            Refusal.NOT_RECALLING,
            Refusal.NOT_THE_RESULT_SHOWN,
            Refusal.TEST_ROUND,
            Refusal.RNG_RESULT_STANDS,
            Refusal.CORRECTED_ALREADY,
            Refusal.NOTHING_TO_CORRECT,
            Refusal.IN_SERVICE_MODE,
            Refusal.NOT_IN_SERVICE_MODE,
            Refusal.MODE_ALREADY,
            Refusal.SENSOR_NOT_CONNECTED,
            Refusal.RNG_ONLY_IN_FAULT,
            Refusal.ROUND_NOT_CLOSED,
            Refusal.NOT_BETWEEN_SHAKES,
            Refusal.VOID_AT_TERMINAL,
            Refusal.NOT_THE_ROUND_IN_PLAY,
            Refusal.NO_ROUND_IN_PLAY,
        ),
        "no_change",
    ),
}
PLAYER_REFUSAL_OTHER = "no_change"  # a key the state machine does not take now (no code)

# The players' words for a fault, by kind (messages.json: "player_fault.<kind>").
PLAYER_FAULTS: Mapping[str, str] = {
    "tamper": "shaker",
    "motor_overrun": "shaker",
    "sensor_timeout": "dice_reader",
    "sensor_lost": "dice_reader",
    "sensor_hardware": "dice_reader",
    "rng_failure": "rng",
}
PLAYER_FAULT_OTHER = "table"  # any other: the table's own systems (the dice alarm among them)

# Fields never sent to the players' page, at any depth of a screen's data.
_SUPERVISOR_FIELDS = frozenset(
    {
        "employee",
        "uid",
        "note",
        "detail",
        "alarm",
        "alarm_cleared",
        "log_e",
        "threshold",
        "restart",
        "returns",
        "meters",
        "warning",
        "monitor",
        "section",  # a rule's number (a dealing plan's, a style's): surveillance reads it
        "state",  # the state machine's name of where the table was (a void's, a fault's)
    }
)
# A recall's records that are never on the players' page: the monitor's alarm (issue 15).
_SUPERVISOR_KINDS = frozenset({RecordKind.DICE_ALARM})
# The records of a recalled round the players' page is sent (AGCO 13.1.1: the round as played);
# not the supervisor's actions, the dice or tiles put in, the table's own housekeeping.
_PLAYERS_RECALL_KINDS = frozenset(
    {
        RecordKind.ROUND_OPENED,
        RecordKind.NO_MORE_BETS,
        RecordKind.SHUFFLE,
        RecordKind.TILES_SHUFFLED,
        RecordKind.BANK_SELECTED,
        RecordKind.DELIVERY_STYLE,
        RecordKind.SHAKE,
        RecordKind.READING,
        RecordKind.NO_ROLL,
        RecordKind.RESULT,
        RecordKind.RESULT_CORRECTED,
        RecordKind.RESULT_VOIDED,
        RecordKind.VOID,
        RecordKind.CLOSE,
        RecordKind.RESHAKE_LIMIT,
        RecordKind.FAULT,
        RecordKind.FAULT_CLEARED,
        RecordKind.LID,
        RecordKind.RNG_DRAW,
        RecordKind.RNG_COMMIT,
        RecordKind.RNG_REVEAL,
    }
)


def player_refusal(data: Mapping[str, Any]) -> str:
    """The players' message code of a refused key's screen data."""
    try:
        return PLAYER_REFUSALS[Refusal(str(data.get("code")))]
    except ValueError:
        return PLAYER_REFUSAL_OTHER


def _stops(life: object) -> dict[str, bool] | None:
    """The dice or the tiles as the players' page needs them: whether they stop play (none
    recorded, or their life over)."""
    if not isinstance(life, Mapping):
        return None
    return {"stops": life.get("set") is None or life.get("minutes_left") == 0}


def _players_stats(stats: object) -> dict[str, Any] | None:
    shift = stats.get("shift") if isinstance(stats, Mapping) else None
    return {"shift": shift} if isinstance(shift, Mapping) else None


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _SUPERVISOR_FIELDS}
    if isinstance(value, list):
        return [
            _strip(v)
            for v in value
            if not (isinstance(v, dict) and v.get("kind") in _SUPERVISOR_KINDS)
        ]
    return value


def _fault_kinds(faults: object) -> list[str]:
    kinds = [PLAYER_FAULTS.get(str(f), PLAYER_FAULT_OTHER) for f in _listed(faults)]
    return list(dict.fromkeys(kinds))  # each kind once


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def _players_record(record: object) -> dict[str, Any] | None:
    """A record of a recalled round as the players' page is sent it, or None for one of the
    supervisor's (see ``_PLAYERS_RECALL_KINDS``)."""
    if not isinstance(record, Mapping) or record.get("kind") not in _PLAYERS_RECALL_KINDS:
        return None
    shown: dict[str, Any] = _strip(dict(record))
    data = shown.get("data")
    if isinstance(data, dict):
        if "fault" in data:
            data["fault"] = _fault_kinds(data["fault"])[0]
        if "faults" in data:
            data["faults"] = _fault_kinds(data["faults"])
        if isinstance(data.get("refused"), str):  # the bank rule's words: refused, and no more
            data["refused"] = True
    return shown


def _players_recall(rounds: object) -> list[Any]:
    shown: list[Any] = []
    for game in _listed(rounds):
        if not isinstance(game, Mapping):
            continue
        records = [_players_record(r) for r in _listed(game.get("records", []))]
        kept = {k: v for k, v in game.items() if k != "records"}
        shown.append({**_strip(kept), "records": [r for r in records if r is not None]})
    return shown


def players_data(screen: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """A screen's data as the players' page is sent it (see above)."""
    if screen == Screen.REFUSED:
        return {"code": player_refusal(data)}
    if screen == Screen.RECALL and "rounds" in data:
        data = {**data, "rounds": _players_recall(data["rounds"])}
    # a result is the game's outcome, the players' own: not walked (on the path to the page)
    shown: dict[str, Any] = {
        k: v if k == "result" else _strip(v) for k, v in data.items() if k not in _SUPERVISOR_FIELDS
    }
    for key in ("dice", "tiles"):
        if key in shown:
            shown[key] = _stops(data[key])
    if "stats" in shown:
        shown["stats"] = _players_stats(data["stats"])
    if "bank_refused" in shown:
        shown["bank_refused"] = data["bank_refused"] is not None
    if isinstance(shown.get("faults"), list):
        shown["faults"] = _fault_kinds(shown["faults"])
    if isinstance(shown.get("corrected"), dict):  # the dice first read; not why, nor who
        shown["corrected"] = {"dice_read": shown["corrected"].get("dice_read")}
    if isinstance(shown.get("voided"), dict):
        shown["voided"] = {k: shown["voided"].get(k) for k in ("round", "reason")}
    return shown


def for_players(
    payload: Mapping[str, Any], *, players: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A message of the page's stream (a screen, a notice, a replay, a board) as the players'
    page is sent it: its screen's data filtered, no corrections' or voids' list. ``players``:
    its data's players' copy made beforehand (``PreparedScreen``)."""
    shown = {k: v for k, v in payload.items() if k != "interventions"}
    if players is not None:
        shown["data"] = players
    elif isinstance(payload.get("data"), Mapping):
        shown["data"] = players_data(str(payload.get("screen")), payload["data"])
    if "interventions" in payload:
        shown["interventions"] = []
    return shown


def players_view(view: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot's view as the players' page is sent it."""
    shown = for_players(view)
    if isinstance(view.get("current"), Mapping):
        shown["current"] = for_players(view["current"])
    for key in ("dice", "tiles"):
        if key in shown:
            shown[key] = _stops(view[key])
    if "stats" in shown:
        shown["stats"] = _players_stats(view["stats"])
    shown.pop("meters", None)
    return shown


class ShiftTally:
    """The shift's counts of the dice as the players' statistics panel shows them, brought up
    to date with every result. The core's counts come with bets open (its figures cost time on
    the path to a result); each result of the dice shown after them (not a test round of
    service mode, not the RNG's) is added here, once per round and attempt, until the next
    counts replace them. Pure: no I/O."""

    def __init__(self) -> None:
        self._shift: dict[str, list[int]] | None = None
        self._counted: set[tuple[object, object]] = set()

    @property
    def shift(self) -> dict[str, list[int]] | None:
        return None if self._shift is None else {k: list(v) for k, v in self._shift.items()}

    def counts(self, shift: object, *, key: tuple[object, object] | None = None) -> None:
        """The core's counts (``key``: the result they came with, counted in them already)."""
        sizes = {"red": 6, "blue": 6, "total": 16}
        shown = {k: shift.get(k) if isinstance(shift, Mapping) else None for k in sizes}
        counts = {k: v for k, v in shown.items() if isinstance(v, list) and _is_counts(v, sizes[k])}
        if len(counts) != len(sizes):
            self._shift = None
            return
        self._shift = {k: list(v) for k, v in counts.items()}
        self._counted = set() if key is None else {key}

    def result(self, key: tuple[object, object], result: Mapping[str, Any]) -> bool:
        """A result of the dice shown; True when the counts changed."""
        dice = result.get("dice")
        if self._shift is None or key in self._counted or not isinstance(dice, Mapping):
            return False
        red, blue = dice.get("red"), dice.get("blue")
        if not isinstance(red, int) or not _is_face(red) or not isinstance(blue, list):
            return False
        if len(blue) != 2 or not all(_is_face(b) for b in blue):
            return False
        self._counted.add(key)
        self._shift["red"][red - 1] += 1
        for face in blue:
            self._shift["blue"][face - 1] += 1
        self._shift["total"][red + sum(blue) - 3] += 1
        return True


def _is_counts(value: object, size: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == size
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)
    )


def _is_face(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 6
