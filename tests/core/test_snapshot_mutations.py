"""The context decoder against mutated snapshots (hypothesis): whatever a torn page, a bad
sector or a hand-edited log makes of a version 3 context, decoding it either gives a context
that encodes back to the very same bytes (one encoding per context), or raises SnapshotError;
never another exception, which would stop the controller's start with a traceback instead of
naming the log."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core import canonical
from controller.core.dealing import DeliveryStyle
from controller.core.dice import Roll, Verdict
from controller.core.dice_monitor import DiceAlarm, DiceTest, DiceWindows
from controller.core.position import BankHistory, Game
from controller.core.result import result_of_roll
from controller.core.snapshot import SnapshotError, decode_context, encode_context
from controller.core.state import Fault, Mode, RoundContext, RoundSettings, State

PAYTABLES = RoundSettings().paytables

_SEATS = st.one_of(st.none(), st.integers(1, 6))
_FACES = st.integers(1, 6)


@st.composite
def contexts(draw: st.DrawFn) -> RoundContext:
    faults = draw(st.frozensets(st.sampled_from(list(Fault)), max_size=3))
    state = (
        State.FAULT if faults else draw(st.sampled_from([s for s in State if s is not State.FAULT]))
    )
    resume = (
        draw(st.sampled_from([None, State.IDLE, State.ARMED, State.RESULT])) if faults else None
    )
    bank_seat = draw(_SEATS)
    roll = Roll(draw(_FACES), (draw(_FACES), draw(_FACES)))
    shows_result = State.RESULT in (state, resume)
    round_number = draw(st.integers(1, 10**6))
    return RoundContext(
        state=state,
        round_number=round_number,
        attempt=draw(st.integers(1, 50)),
        no_rolls=draw(st.integers(0, 9)),
        bank_seat=bank_seat,
        bank_history=BankHistory(draw(st.integers(0, 99)), draw(_SEATS)),
        is_round_open=draw(st.booleans()),
        is_running=draw(st.booleans()),
        is_sensor_present=draw(st.booleans()),
        is_secured=draw(st.booleans()),
        previous_roll=draw(st.sampled_from([None, Verdict(roll, None, ((1, 2), None, (-3, 4)))])),
        active_faults=faults,
        resume_state=resume,
        result=result_of_roll(
            draw(st.sampled_from(list(_games()))), roll, bank_seat=bank_seat, paytables=PAYTABLES
        )
        if shows_result
        else None,
        delivery_style=draw(st.sampled_from(list(DeliveryStyle))),
        shake_delay_ms=draw(st.integers(0, 1000)),
        dice_set=draw(st.sampled_from([None, "1", "A-7", "x" * 16])),
        dice_since=draw(st.one_of(st.none(), st.integers(0, 2**45))),
        mode=draw(st.sampled_from([None, *Mode])),
        service_round=draw(st.one_of(st.none(), st.integers(1, round_number))),
        co_bank=draw(st.booleans()),
        dice_counts=draw(_dice_windows()),
        dice_alarm=draw(
            st.just(_ALARM) if Fault.DICE_ALARM in faults else st.sampled_from([None, _ALARM])
        ),
    )


_ALARM = DiceAlarm(DiceTest.RED, 6, "5.412", "5.298", 310, 290)


@st.composite
def _dice_windows(draw: st.DrawFn) -> DiceWindows:
    """The windows as the core makes them: rolls counted, a shift changed, dice replaced or
    kept, in any order."""
    windows = DiceWindows()
    for _ in range(draw(st.integers(0, 30))):
        how = draw(st.sampled_from(["roll", "roll", "roll", "shift", "replaced", "kept"]))
        if how == "roll":
            windows = windows.after(Roll(draw(_FACES), (draw(_FACES), draw(_FACES))))
        elif how == "shift":
            windows = windows.new_shift()
        elif how == "replaced":
            windows = windows.replaced()
        else:
            windows = windows.kept()
    return windows


def _games() -> list[Game]:
    return list(Game)


_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53) + 1, 2**53 - 1),
        st.text(max_size=6),
        st.sampled_from(["idle", "result", "fault", "rng", "A-7", "tamper", "standard"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _check(blob: bytes) -> None:
    try:
        ctx = decode_context(blob)
    except SnapshotError:
        return
    if json.loads(blob).get("v") == 3:
        assert encode_context(ctx) == blob


@given(contexts())
@settings(max_examples=300, deadline=None)
def test_every_context_reads_back_as_itself(ctx: RoundContext) -> None:
    blob = encode_context(ctx)
    assert decode_context(blob) == ctx
    assert encode_context(decode_context(blob)) == blob


@given(contexts(), st.data())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_mutated_member_is_refused_or_reads_back_as_itself(
    ctx: RoundContext, data: st.DataObject
) -> None:
    raw = json.loads(encode_context(ctx))
    how = data.draw(st.sampled_from(["set", "delete", "add", "nested"]))
    key = data.draw(st.sampled_from(sorted(raw)))
    if how == "set":
        raw[key] = data.draw(_JSON)
    elif how == "delete":
        del raw[key]
    elif how == "add":
        raw[
            data.draw(
                st.sampled_from(
                    [
                        "dice_set",
                        "dice_since",
                        "mode",
                        "service_round",
                        "co_bank",
                        "dice_counts",
                        "dice_alarm",
                        "x",
                    ]
                )
            )
        ] = data.draw(_JSON)
    else:
        value = raw[key]
        if isinstance(value, dict) and value:
            value[data.draw(st.sampled_from(sorted(value)))] = data.draw(_JSON)
        elif isinstance(value, list) and value:
            value[data.draw(st.integers(0, len(value) - 1))] = data.draw(_JSON)
        else:
            raw[key] = [value]
    _check(canonical.encode(raw))


@given(contexts(), st.data())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_mutated_byte_is_refused_or_reads_back_as_itself(
    ctx: RoundContext, data: st.DataObject
) -> None:
    blob = bytearray(encode_context(ctx))
    at = data.draw(st.integers(0, len(blob) - 1))
    how = data.draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
    if how == "flip":
        blob[at] ^= 1 << data.draw(st.integers(0, 7))
    elif how == "delete":
        del blob[at]
    elif how == "insert":
        blob.insert(at, data.draw(st.integers(0, 255)))
    else:
        del blob[at:]
    try:
        decode_context(bytes(blob))
    except SnapshotError:
        return
    value = json.loads(bytes(blob))
    if value.get("v") == 3:
        assert encode_context(decode_context(bytes(blob))) == bytes(blob)


@given(contexts(), st.data())
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_mutated_result_is_refused_or_reads_back_as_itself(
    ctx: RoundContext, data: st.DataObject
) -> None:
    """The result a context shows again is exactly the one its encoder wrote: a field the
    decoder would recompute (the total, the starting position), a field too many or too few,
    is refused rather than silently put right."""
    raw = json.loads(encode_context(ctx))
    result = raw["result"]
    if result is None:
        return
    key = data.draw(st.sampled_from([*sorted(result), "extra"]))
    if data.draw(st.booleans()) and key in result:
        del result[key]
    else:
        result[key] = data.draw(_JSON)
    _check(canonical.encode(raw))
