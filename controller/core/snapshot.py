"""The round's context as the audit log keeps it: encoded with the records of every step and
decoded at power on, so that recovery starts from exactly what the control loop had when its
last step became durable, and the core's own ``POWER_ON`` rule decides what happens next (one
rules engine: nothing here decides anything). Pure: no I/O.

The encoding is canonical JSON (controller/core/canonical.py). Only what outlives a power cut is
kept: the lid's position, the deadlines and a read in progress are not (the hardware reports
the lid again, and a shake in progress is void at power on). The decoder accepts only what the
encoder writes: an unknown or missing key, a wrong type or a value out of range is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from controller.core import canonical
from controller.core.dealing import DeliveryStyle
from controller.core.dice import FACES, Roll, Verdict
from controller.core.dice_monitor import DiceAlarm, DiceWindows
from controller.core.meters import Meters
from controller.core.position import BETTING_POSITIONS, BankHistory
from controller.core.record_data import result_as_recorded, roll_of
from controller.core.state import (
    Correction,
    CorrectionReason,
    Fault,
    Mode,
    RoundContext,
    State,
    check_dice_set_id,
    check_employee_id,
)
from controller.errors import (
    EncodingError,
    GameRuleError,
    MetersError,
    RecordDataError,
    SnapshotError,
)

# 2: the delivery style and the shake's delay (issue 14), read from version 1 as standard
# and 0; 3: the dice set and when it was put in, the mode the supervisor switched to and
# service mode, and co-banking, read from versions 1 and 2 as not recorded, the configured mode,
# live play and no co-bank; 4: the dice monitor's counts and its alarm (issue 15), read from the
# earlier versions as no roll counted and no alarm; 5: the table's time (and the wall clock's
# last reading), the dice's and the tiles' table time, the tiles in play, the dealer on shift,
# a correction of the result shown and the meters, read from the earlier versions as no table
# time (a set's age then comes from the wall clock), no tiles inspected, no dealer, no
# correction and no meter counted.
VERSION = 5
DICE_COUNTS_SINCE = 4  # the first version that keeps the dice monitor's counts
MAX_SNAPSHOT_BYTES = 64 * 1024
_T = TypeVar("_T")
_D = TypeVar("_D")

_MAX_COUNT = 2**53  # rounds, attempts and no rolls are far below JSON's exact integers

_KEYS = frozenset(
    {
        "v",
        "state",
        "round",
        "attempt",
        "no_rolls",
        "bank_seat",
        "bank_history",
        "round_open",
        "running",
        "sensor_present",
        "secured",
        "previous_roll",
        "faults",
        "resume",
        "result",
    }
)
_KEYS_V1 = _KEYS
_KEYS_V2 = _KEYS | {"style", "shake_delay"}
# Version 3's keys are written only when they differ from their default (null, or false for
# co_bank): the context is rewritten with every commit, and kept short it needs fewer pages.
_OPTIONAL_V3 = {"dice_set": None, "dice_since": None, "mode": None, "service_round": None}
_OPTIONAL_V3_FALSE = {"co_bank"}
_KEYS_V3 = _KEYS_V2 | set(_OPTIONAL_V3) | _OPTIONAL_V3_FALSE
_OPTIONAL_V4 = {"dice_counts": None, "dice_alarm": None}
_KEYS_V4 = _KEYS_V3 | set(_OPTIONAL_V4)
_OPTIONAL_V5 = {
    "dice_since_table": None,
    "tiles_set": None,
    "tiles_since": None,
    "tiles_since_table": None,
    "table_ms": None,
    "last_wall": None,
    "dealer": None,
    "correction": None,
    "meters": None,
}
_KEYS_V5 = _KEYS_V4 | set(_OPTIONAL_V5)
_KEYS_OF = {1: _KEYS_V1, 2: _KEYS_V2, 3: _KEYS_V3, 4: _KEYS_V4, 5: _KEYS_V5}


def encode_context(ctx: RoundContext) -> bytes:
    return canonical.encode(
        {
            **_written_if_set(ctx),
            "v": VERSION,
            "state": str(ctx.state),
            "round": ctx.round_number,
            "attempt": ctx.attempt,
            "no_rolls": ctx.no_rolls,
            "bank_seat": ctx.bank_seat,
            "bank_history": [
                ctx.bank_history.rounds_since_shuffle,
                ctx.bank_history.last_bank_seat,
            ],
            "round_open": ctx.is_round_open,
            "running": ctx.is_running,
            "sensor_present": ctx.is_sensor_present,
            "secured": ctx.is_secured,
            "previous_roll": _previous_record(ctx.previous_roll),
            "faults": sorted(str(f) for f in ctx.active_faults),
            "resume": None if ctx.resume_state is None else str(ctx.resume_state),
            "result": None if ctx.result is None else ctx.result.as_record(),
            "style": ctx.delivery_style.value,
            "shake_delay": ctx.shake_delay_ms,
        }
    )


# The log's head row keeps the context compressed (issue 31: at 625 bytes or more, the
# dice monitor's counts and a result took the row past what a 512-byte page holds, about 477
# bytes, and every commit rewrote an overflow page, the freelist and the header page): zlib
# (RFC 1950) with a preset dictionary, a context in the result state with the rarer keys in
# front, so that the keys and the common values cost a few bits each. A context of 600 to
# 1,221 bytes is stored in 140 to 269 (40 simulated rounds, seed 5). The stream's header
# names the dictionary (its Adler-32) and its trailer checks what it inflates to: a damaged
# stored context is refused, never read as another. NEVER change these bytes: the stored
# contexts of every log need them; a better dictionary is another constant, told apart by its
# Adler-32.
PACK_DICTIONARY = (
    b'"co_bank":true,"correction":{"employee":"","reason":"","was":null},"dealer":"",'
    b'"dice_alarm":{"kind":"","rolls":0},"mode":"service","service_round":1,'
    b'"faults":["dice_alarm","log_rollback","sensor","shaker","storage","tamper"],'
    b'"resume":"armed","state":"fault",'
    b'{"attempt":1,"bank_history":[55,null],"bank_seat":null,"dice_counts":"11,10,6,11,10,8;'
    b'12,27,16,15,28,14;0,1,1,1,2,8,6,7,12,7,5,2,1,3,0,0|=|=","dice_set":"1",'
    b'"dice_since":1796309538687,"dice_since_table":48,"faults":[],"last_wall":1796309544822,'
    b'"meters":{"games":55,"power_ups":1},"no_rolls":0,"previous_roll":{"dice":{"blue":[2,4],'
    b'"red":2},"positions":[[153,16],[174,40],[102,170]]},"result":{"bank":"dealer","count":8,'
    b'"dice":{"blue":[2,4],"red":2},"game":"tiles","payouts":{"A":{"condition":"8-16-17",'
    b'"outcome":"8","pays":"3 to 1","wager":"sum","wins":true},"B":{"condition":"3-8-9",'
    b'"outcome":"8","pays":"4 to 1","wager":"sum","wins":true}},"starting_position":'
    b'"dead hand","total":8,"wagers":{"beat_it":{"any":false,"red":false},"match":{"1":0,'
    b'"2":2,"3":0,"4":1,"5":0,"6":0},"sum":{"3-8-9":true,"8-16-17":true,"pair":true,'
    b'"series":false}}},"resume":null,"round":56,"round_open":true,"running":true,'
    b'"secured":true,"sensor_present":true,"shake_delay":2,"state":"result","style":'
    b'"standard","table_ms":6225,"tiles_set":"T-1","tiles_since":1796309538708,'
    b'"tiles_since_table":66,"v":5}'
)
_PACK_LEVEL = 6  # level 9 stores the same contexts in as many bytes, a little slower
# A 4 KiB window holds the dictionary and a context, and the smallest hash table finds their
# matches as well as the default (the same bytes stored): the compressor's state is some
# 20 KiB, not zlib's default 256, whose allocation, on the commit's path, costs a fresh
# mapping of memory each time (a commit's packing: 190 us with the default, 70 with this).
# Inflating takes any window up to 32 KiB: the contexts packed either way read the same.
_PACK_WINDOW_BITS = 12
_PACK_MEMORY_LEVEL = 2


def pack_context(blob: bytes) -> bytes:
    """An encoded context as the log's head row keeps it: compressed (see PACK_DICTIONARY)."""
    packer = zlib.compressobj(
        _PACK_LEVEL, zlib.DEFLATED, _PACK_WINDOW_BITS, _PACK_MEMORY_LEVEL, zdict=PACK_DICTIONARY
    )
    return packer.compress(blob) + packer.flush()


def unpack_context(stored: bytes) -> bytes:
    """The encoded context a stored one holds: a packed one inflated (checked), one stored
    as it is (canonical JSON, an object: ``{``, as logs kept it before) returned as it is.
    :class:`SnapshotError` for a packed one that is damaged or too large."""
    if stored[:1] == b"{":
        return stored
    unpacker = zlib.decompressobj(zdict=PACK_DICTIONARY)
    try:
        blob = unpacker.decompress(stored, MAX_SNAPSHOT_BYTES + 1)
    except zlib.error as exc:
        raise SnapshotError(f"a packed context snapshot is damaged ({exc})") from None
    if len(blob) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError("a packed context snapshot inflates past the largest allowed")
    if not unpacker.eof or unpacker.unused_data:
        raise SnapshotError("a packed context snapshot is damaged (its length)")
    return blob


def _previous_record(previous: Verdict | None) -> dict[str, Any] | None:
    """The previous roll's dice and where they lay (None: no roll of dice before)."""
    if previous is None or previous.roll is None:
        return None
    return {
        "dice": previous.roll.as_record(),
        "positions": [None if p is None else list(p) for p in previous.positions],
    }


def _written_if_set(ctx: RoundContext) -> dict[str, Any]:
    """The optional keys (version 3 on) that differ from their default: only these are
    written (the context is rewritten with every commit: kept short, it needs fewer pages)."""
    optional = {
        "dice_set": ctx.dice_set,
        "dice_since": ctx.dice_since,
        "mode": None if ctx.mode is None else str(ctx.mode),
        "service_round": ctx.service_round,
        "co_bank": ctx.co_bank or None,
        "dice_counts": None if ctx.dice_counts.is_empty else ctx.dice_counts.as_text(),
        "dice_alarm": None if ctx.dice_alarm is None else ctx.dice_alarm.as_record(),
        "dice_since_table": ctx.dice_since_table,
        "tiles_set": ctx.tiles_set,
        "tiles_since": ctx.tiles_since,
        "tiles_since_table": ctx.tiles_since_table,
        "table_ms": ctx.table_ms or None,
        "last_wall": ctx.last_wall,
        "dealer": ctx.dealer,
        "correction": None if ctx.correction is None else ctx.correction.as_record(),
        "meters": None if ctx.meters.is_empty else ctx.meters.as_stored(),
    }
    return {key: value for key, value in optional.items() if value is not None}


def decode_context(blob: bytes) -> RoundContext:
    """The context ``encode_context`` wrote; :class:`SnapshotError` for anything else."""
    raw = _snapshot(blob)
    try:
        ctx = _context(raw, raw["v"])
    except (ValueError, TypeError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"context snapshot: {exc}") from exc
    _check_consistent(ctx, raw)
    return ctx


def _snapshot(blob: bytes) -> dict[str, Any]:
    """The snapshot's object, once its size, encoding, version and keys are the encoder's."""
    if len(blob) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"a context snapshot of {len(blob)} bytes is too large")
    try:
        raw = canonical.decode(blob)
    except EncodingError as exc:
        raise SnapshotError(f"not a canonical context snapshot: {exc}") from exc
    if not isinstance(raw, dict):
        raise SnapshotError("a context snapshot has exactly the keys the encoder writes")
    version = raw.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version not in _KEYS_OF:
        raise SnapshotError(f"context snapshot version {version!r} is not 1 to {VERSION}")
    keys = set(raw)
    required = _KEYS_V2 if version >= 3 else _KEYS_OF[version]
    if not required <= keys <= _KEYS_OF[version]:
        raise SnapshotError("a context snapshot has exactly the keys the encoder writes")
    optional = (*_OPTIONAL_V3, *_OPTIONAL_V4, *_OPTIONAL_V5)
    if any(raw.get(key, 0) is None for key in optional) or raw.get("co_bank", True) is False:
        raise SnapshotError("a context snapshot writes an optional key only when it is set")
    return raw


def _context(raw: Mapping[str, Any], version: int) -> RoundContext:
    """Each field read in the order the encoder's version added it; an optional key (version 3
    on) absent is its default."""
    state = State(_str(raw, "state"))
    resume = None if raw["resume"] is None else State(_str(raw, "resume"))
    faults = frozenset(Fault(_str_item(f)) for f in _list(raw, "faults"))
    history = _list(raw, "bank_history")
    if len(history) != 2:
        raise SnapshotError("bank_history is [rounds since shuffle, last bank seat]")
    return RoundContext(
        state=state,
        round_number=_count(raw, "round", low=1),
        attempt=_count(raw, "attempt", low=1),
        no_rolls=_count(raw, "no_rolls", low=0),
        bank_seat=_seat(raw["bank_seat"]),
        bank_history=BankHistory(_whole(history[0], low=0), _seat(history[1])),
        is_round_open=_bool(raw, "round_open"),
        is_running=_bool(raw, "running"),
        is_sensor_present=_bool(raw, "sensor_present"),
        is_secured=_bool(raw, "secured"),
        previous_roll=_previous(raw["previous_roll"]),
        active_faults=faults,
        resume_state=resume,
        result=None if raw["result"] is None else _result(raw["result"]),
        # version 2: the delivery style and the shake's delay
        delivery_style=DeliveryStyle(_str(raw, "style"))
        if version != 1
        else DeliveryStyle.STANDARD,
        shake_delay_ms=_count(raw, "shake_delay", low=0) if version != 1 else 0,
        # version 3: the dice set, the mode switched to, service mode and co-banking
        dice_set=_if_set(raw, "dice_set", _dice_set, None),
        dice_since=_count_if_set(raw, "dice_since", low=0, absent=None),
        mode=_if_set(raw, "mode", lambda value: Mode(_str_item(value)), None),
        service_round=_count_if_set(raw, "service_round", low=1, absent=None),
        co_bank=_bool(raw, "co_bank") if "co_bank" in raw else False,
        # version 4: the dice monitor's counts and its alarm
        dice_counts=_if_set(raw, "dice_counts", DiceWindows.from_text, DiceWindows()),
        dice_alarm=_if_set(raw, "dice_alarm", DiceAlarm.from_record, None),
        # version 5: the table's time, the tiles, the dealer, a correction and the meters
        dice_since_table=_signed(raw, "dice_since_table"),
        tiles_set=_if_set(raw, "tiles_set", _dice_set, None),
        tiles_since=_count_if_set(raw, "tiles_since", low=0, absent=None),
        tiles_since_table=_signed(raw, "tiles_since_table"),
        table_ms=_count_if_set(raw, "table_ms", low=1, absent=0),
        last_wall=_count_if_set(raw, "last_wall", low=0, absent=None),
        dealer=_if_set(raw, "dealer", _employee, None),
        correction=_if_set(raw, "correction", _correction, None),
        meters=_if_set(raw, "meters", _meters, Meters()),
    )


def _check_consistent(ctx: RoundContext, raw: Mapping[str, Any]) -> None:
    """Refuse a context no step of the core leaves (each field may be right on its own)."""
    shown = ctx.resume_state if ctx.state is State.FAULT else None
    if (State.RESULT in (ctx.state, shown)) != (ctx.result is not None):
        raise SnapshotError("a context holds a result exactly in RESULT (or a fault over it)")
    if ctx.service_round is not None and ctx.service_round > ctx.round_number:
        raise SnapshotError("service mode returns to a round after the one in play")
    if "dice_counts" in raw and ctx.dice_counts.is_empty:
        raise SnapshotError("a context snapshot writes the dice counts only once a roll counted")
    if Fault.DICE_ALARM in ctx.active_faults and ctx.dice_alarm is None:
        raise SnapshotError("a dice alarm fault without the dice alarm")
    if (ctx.state is State.FAULT) != bool(ctx.active_faults):
        raise SnapshotError("a context is in FAULT exactly when a fault is active")
    if ctx.correction is not None and (ctx.result is None or ctx.result.wagers is None):
        raise SnapshotError("a correction goes with a result of the dice it corrected")
    if (ctx.tiles_set is None) != (ctx.tiles_since_table is None):
        raise SnapshotError("a tile set is kept with the table's time it was inspected at")


def _if_set(raw: Mapping[str, Any], key: str, read: Callable[[Any], _T], absent: _D) -> _T | _D:
    """An optional key's value, read; ``absent`` when the encoder did not write it."""
    return read(raw[key]) if key in raw else absent


def _count_if_set(raw: Mapping[str, Any], key: str, *, low: int, absent: _D) -> int | _D:
    """An optional count (a refusal names its key); ``absent`` when it is not written."""
    return _count(raw, key, low=low) if key in raw else absent


def _signed(raw: Mapping[str, Any], key: str) -> int | None:
    """A table time that may lie before the table's first (a set older than the table's
    time, recorded by an older version)."""
    if key not in raw:
        return None
    try:
        return _whole(raw[key], low=-_MAX_COUNT)
    except SnapshotError as exc:
        raise SnapshotError(f"{key}: {exc}") from None


def _employee(value: object) -> str:
    try:
        check_employee_id(_str_item(value))
    except GameRuleError as exc:
        raise SnapshotError(str(exc)) from None
    return str(value)


def _correction(value: object) -> Correction:
    if not isinstance(value, dict) or set(value) != {"dice_read", "reason", "employee"}:
        raise SnapshotError("a correction is {dice_read, reason, employee}")
    try:
        read = roll_of(value["dice_read"])
        reason = CorrectionReason(_str_item(value["reason"]))
    except (RecordDataError, GameRuleError, ValueError) as exc:
        raise SnapshotError(f"correction: {exc}") from None
    return Correction(read, reason, _employee(value["employee"]))


def _meters(value: object) -> Meters:
    try:
        return Meters.from_stored(value)
    except MetersError as exc:
        raise SnapshotError(f"meters: {exc}") from None


def _str(raw: Mapping[str, Any], key: str) -> str:
    return _str_item(raw[key])


def _str_item(value: object) -> str:
    if not isinstance(value, str):
        raise SnapshotError(f"{value!r} is not a string")
    return value


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw[key]
    if not isinstance(value, list):
        raise SnapshotError(f"{key} is not a list")
    return value


def _bool(raw: Mapping[str, Any], key: str) -> bool:
    value = raw[key]
    if not isinstance(value, bool):
        raise SnapshotError(f"{key} is not true or false")
    return value


def _whole(value: object, *, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= _MAX_COUNT:
        raise SnapshotError(f"{value!r} is not a whole number from {low}")
    return value


def _count(raw: Mapping[str, Any], key: str, *, low: int) -> int:
    try:
        return _whole(raw[key], low=low)
    except SnapshotError as exc:
        raise SnapshotError(f"{key}: {exc}") from None


def _seat(value: object) -> int | None:
    if value is None:
        return None
    seat = _whole(value, low=1)
    if seat > BETTING_POSITIONS:
        raise SnapshotError(f"bank seat {seat} is not 1..{BETTING_POSITIONS}")
    return seat


def _dice_set(value: object) -> str | None:
    if value is None:
        return None
    try:
        check_dice_set_id(_str_item(value))
    except GameRuleError as exc:
        raise SnapshotError(str(exc)) from None
    return str(value)


def _previous(value: object) -> Verdict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"dice", "positions"}:
        raise SnapshotError("previous_roll is {dice, positions}")
    roll = _previous_dice(value["dice"])
    positions = value["positions"]
    if not isinstance(positions, list) or len(positions) > 3:
        raise SnapshotError("previous_roll positions are up to three places")
    return Verdict(roll, None, tuple(_place(place) for place in positions))


def _previous_dice(dice: object) -> Roll:
    if not isinstance(dice, dict) or set(dice) != {"red", "blue"}:
        raise SnapshotError("previous_roll dice are {red, blue}")
    blue = dice["blue"]
    if not isinstance(blue, list) or len(blue) != 2:
        raise SnapshotError("previous_roll has two blue dice")
    faces = (dice["red"], *blue)
    if not all(isinstance(f, int) and not isinstance(f, bool) and f in FACES for f in faces):
        raise SnapshotError("previous_roll faces are 1..6")
    return Roll(faces[0], (faces[1], faces[2]))


def _place(place: object) -> tuple[int, int] | None:
    """Where a die lay, [x, y] (None: not seen)."""
    if place is None:
        return None
    if not (isinstance(place, list) and len(place) == 2):
        raise SnapshotError("a die's place is [x, y]")
    x, y = (_whole(v, low=-_MAX_COUNT) for v in place)
    return (x, y)


def _result(value: object) -> Any:
    if not isinstance(value, dict):
        raise SnapshotError("result is an object")
    try:
        result = result_as_recorded(value)
    except RecordDataError as exc:
        raise SnapshotError(f"result: {exc}") from exc
    # what the decoder would compute again (the count, the total, the starting position) must
    # be what the encoder wrote, with no field more or less: one encoding per context
    if canonical.normalized(result.as_record()) != value:
        raise SnapshotError("result: not the fields its dice (or number) give")
    return result
