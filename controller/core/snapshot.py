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

from collections.abc import Mapping
from typing import Any

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
    previous = None
    if ctx.previous_roll is not None and ctx.previous_roll.roll is not None:
        previous = {
            "dice": ctx.previous_roll.roll.as_record(),
            "positions": [None if p is None else list(p) for p in ctx.previous_roll.positions],
        }
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
    return canonical.encode(
        {
            **{key: value for key, value in optional.items() if value is not None},
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
            "previous_roll": previous,
            "faults": sorted(str(f) for f in ctx.active_faults),
            "resume": None if ctx.resume_state is None else str(ctx.resume_state),
            "result": None if ctx.result is None else ctx.result.as_record(),
            "style": ctx.delivery_style.value,
            "shake_delay": ctx.shake_delay_ms,
        }
    )


def decode_context(blob: bytes) -> RoundContext:
    """The context ``encode_context`` wrote; :class:`SnapshotError` for anything else."""
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
    try:
        state = State(_str(raw, "state"))
        resume = None if raw["resume"] is None else State(_str(raw, "resume"))
        faults = frozenset(Fault(_str_item(f)) for f in _list(raw, "faults"))
        history = _list(raw, "bank_history")
        if len(history) != 2:
            raise SnapshotError("bank_history is [rounds since shuffle, last bank seat]")
        ctx = RoundContext(
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
            delivery_style=DeliveryStyle(_str(raw, "style"))
            if version != 1
            else DeliveryStyle.STANDARD,
            shake_delay_ms=_count(raw, "shake_delay", low=0) if version != 1 else 0,
            dice_set=_dice_set(raw["dice_set"]) if "dice_set" in raw else None,
            dice_since=_count(raw, "dice_since", low=0) if "dice_since" in raw else None,
            mode=Mode(_str(raw, "mode")) if "mode" in raw else None,
            service_round=_count(raw, "service_round", low=1) if "service_round" in raw else None,
            co_bank=_bool(raw, "co_bank") if "co_bank" in raw else False,
            dice_counts=DiceWindows.from_text(raw["dice_counts"])
            if "dice_counts" in raw
            else DiceWindows(),
            dice_alarm=DiceAlarm.from_record(raw["dice_alarm"]) if "dice_alarm" in raw else None,
            dice_since_table=_signed(raw, "dice_since_table"),
            tiles_set=_dice_set(raw["tiles_set"]) if "tiles_set" in raw else None,
            tiles_since=_count(raw, "tiles_since", low=0) if "tiles_since" in raw else None,
            tiles_since_table=_signed(raw, "tiles_since_table"),
            table_ms=_count(raw, "table_ms", low=1) if "table_ms" in raw else 0,
            last_wall=_count(raw, "last_wall", low=0) if "last_wall" in raw else None,
            dealer=_employee(raw["dealer"]) if "dealer" in raw else None,
            correction=_correction(raw["correction"]) if "correction" in raw else None,
            meters=_meters(raw["meters"]) if "meters" in raw else Meters(),
        )
    except (ValueError, TypeError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"context snapshot: {exc}") from exc
    shows_result = State.RESULT in (state, resume if state is State.FAULT else None)
    if shows_result != (ctx.result is not None):
        raise SnapshotError("a context holds a result exactly in RESULT (or a fault over it)")
    if ctx.service_round is not None and ctx.service_round > ctx.round_number:
        raise SnapshotError("service mode returns to a round after the one in play")
    if "dice_counts" in raw and ctx.dice_counts.is_empty:
        raise SnapshotError("a context snapshot writes the dice counts only once a roll counted")
    if Fault.DICE_ALARM in faults and ctx.dice_alarm is None:
        raise SnapshotError("a dice alarm fault without the dice alarm")
    if (state is State.FAULT) != bool(faults):
        raise SnapshotError("a context is in FAULT exactly when a fault is active")
    if ctx.correction is not None and (ctx.result is None or ctx.result.wagers is None):
        raise SnapshotError("a correction goes with a result of the dice it corrected")
    if (ctx.tiles_set is None) != (ctx.tiles_since_table is None):
        raise SnapshotError("a tile set is kept with the table's time it was inspected at")
    return ctx


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
    dice, positions = value["dice"], value["positions"]
    if not isinstance(dice, dict) or set(dice) != {"red", "blue"}:
        raise SnapshotError("previous_roll dice are {red, blue}")
    blue = dice["blue"]
    if not isinstance(blue, list) or len(blue) != 2:
        raise SnapshotError("previous_roll has two blue dice")
    faces = (dice["red"], *blue)
    if not all(isinstance(f, int) and not isinstance(f, bool) and f in FACES for f in faces):
        raise SnapshotError("previous_roll faces are 1..6")
    if not isinstance(positions, list) or len(positions) > 3:
        raise SnapshotError("previous_roll positions are up to three places")
    places: list[tuple[int, int] | None] = []
    for place in positions:
        if place is None:
            places.append(None)
            continue
        if not (isinstance(place, list) and len(place) == 2):
            raise SnapshotError("a die's place is [x, y]")
        x, y = (_whole(v, low=-_MAX_COUNT) for v in place)
        places.append((x, y))
    return Verdict(Roll(faces[0], (faces[1], faces[2])), None, tuple(places))


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
