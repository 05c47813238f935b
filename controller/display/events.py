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
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from controller.core import canonical
from controller.core.dice import NoRollReason
from controller.core.digits import MAX_SEQ, NumberError, parse_bounded_int
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import Screen
from controller.ports import LoggedCheckpoint

TREND_LENGTH = 20  # the trend board: the last 20 results

# Records that the page can show again when it catches up from the log.
REPLAYED_KINDS = frozenset(
    {
        RecordKind.ROUND_OPENED,
        RecordKind.NO_MORE_BETS,
        RecordKind.NO_ROLL,
        RecordKind.RESULT,
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
    screen: Screen | str, data: Mapping[str, object], event_id: EventId, *, round_number: int | None
) -> dict[str, Any]:
    """One screen as the page receives it."""
    body = jsonable(data)
    if str(screen) == Screen.NO_ROLL and "reason" in body and "words" not in body:
        body["words"] = _plain_words(body["reason"])
    return {
        "id": str(event_id),
        "seq": event_id.seq,
        "screen": str(screen),
        "round": _int(data.get("round")) or round_number,
        "data": body,
    }


def _plain_words(reason: object) -> str:
    try:
        return NoRollReason(str(reason)).plain_words
    except ValueError:
        return str(reason).replace("_", " ")


def trend_entry(
    seq: int, round_number: int | None, result: Mapping[str, Any], attempt: object = None
) -> dict[str, Any]:
    """One cell of the trend board: the result of ``attempt`` of a round (a round whose result
    was voided has a cell for each)."""
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
    round_number = _int(data.get("round"))
    shown: dict[str, Any] = {"round": round_number}
    if kind is RecordKind.RESULT:
        screen = Screen.RESULT
        shown.update(attempt=data.get("attempt"), result=_result_fields(data))
    elif kind is RecordKind.NO_ROLL:
        screen = Screen.NO_ROLL
        shown.update(attempt=data.get("attempt"), reason=data.get("reason"))
    elif kind is RecordKind.FAULT:
        screen = Screen.FAULT
        shown.update(faults=[data.get("fault")], detail=data.get("detail"))
    elif kind is RecordKind.RESHAKE_LIMIT:
        screen = Screen.LOCKED
        shown.update(no_rolls=data.get("no_rolls"))
    elif kind is RecordKind.NO_MORE_BETS:
        screen = Screen.BETS_CLOSED
    elif kind is RecordKind.RESULT_VOIDED:  # N.J.A.C. 13:69E-1.28P: the round is played again
        screen = Screen.BETS_CLOSED
        attempt = _int(data.get("attempt"))
        shown.update(attempt=None if attempt is None else attempt + 1, voided=data.get("reason"))
    elif kind is RecordKind.ROUND_OPENED:
        screen = Screen.READY
    elif kind is RecordKind.RNG_COMMIT:
        shown = {"commitment": data.get("commitment"), "rng_session": data.get("session")}
        return {**screen_event("commitment", shown, EventId(record.seq), round_number=None)}
    else:  # VOID: there is no void screen; the page marks the round void on its trend board
        shown["void"] = True
        return screen_event("void", shown, EventId(record.seq), round_number=round_number)
    return screen_event(screen, shown, EventId(record.seq), round_number=round_number)


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
    is_result = record.kind == RecordKind.RESULT
    return {
        "type": "record",
        "seq": record.seq,
        "kind": record.kind,
        "time": entry.get("time"),
        "round": _int(data.get("round")),
        "attempt": _int(data.get("attempt")),
        "dice": data.get("dice") if is_result else None,
        "total": data.get("total") if is_result else None,
        "count": data.get("count") if is_result else None,
        "starting_position": data.get("starting_position") if is_result else None,
        "data": data,
        "hash": record.hash,
        "prev": entry.get("prev"),
        "leaf": record.leaf.decode("utf-8"),
        "checkpoint": checkpoint_json(checkpoint),
    }


def checkpoint_json(checkpoint: LoggedCheckpoint | None) -> dict[str, Any] | None:
    return None if checkpoint is None else {"size": checkpoint.size, "note": checkpoint.note}
