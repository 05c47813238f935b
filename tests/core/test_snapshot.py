"""The stored round context: what the encoder writes is read back, contexts of versions 1 (before
the delivery style), 2 (before the dice set) and 4 (before the table's time, the tiles, the
dealer, corrections and the meters) are still read, and anything else is refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from controller.core import canonical
from controller.core.dealing import DeliveryStyle
from controller.core.dice import Roll
from controller.core.meters import Meters
from controller.core.position import Game
from controller.core.result import result_of_roll
from controller.core.snapshot import (
    MAX_SNAPSHOT_BYTES,
    SnapshotError,
    decode_context,
    encode_context,
    pack_context,
    unpack_context,
)
from controller.core.state import Correction, CorrectionReason, Mode, RoundContext, State
from controller.core.wagers import sum_paytable_a


def _raw(ctx: RoundContext) -> dict[str, object]:
    value = json.loads(encode_context(ctx))
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize("style", list(DeliveryStyle))
def test_a_context_with_its_style_reads_back(style: DeliveryStyle) -> None:
    ctx = replace(
        RoundContext(), state=State.SHAKING, round_number=7, delivery_style=style, shake_delay_ms=9
    )
    assert decode_context(encode_context(ctx)) == ctx


def test_a_context_with_its_dice_set_and_mode_reads_back() -> None:
    ctx = replace(
        RoundContext(),
        round_number=9,
        dice_set="A-17",
        dice_since=1_764_000_000_000,
        mode=Mode.RNG,
        service_round=7,
        bank_seat=2,
        co_bank=True,
    )
    assert decode_context(encode_context(ctx)) == ctx


def _in_result() -> RoundContext:
    """A context as large as a round's makes it: a result, a correction, the dice set, the
    tiles, the dealer, the meters."""
    result = result_of_roll(
        Game.TILES, Roll(6, (2, 5)), bank_seat=None, paytables=[sum_paytable_a()]
    )
    return replace(
        RoundContext(),
        state=State.RESULT,
        round_number=12,
        result=result,
        correction=Correction(Roll(1, (2, 5)), CorrectionReason.MISREAD, "S1021"),
        dice_set="4",
        dice_since=1_764_000_000_000,
        dice_since_table=-3_600_000,  # put in before the table kept its time
        tiles_set="T-9",
        tiles_since=1_764_000_100_000,
        tiles_since_table=86_400_000,
        table_ms=90_000_000,
        last_wall=1_764_000_200_000,
        dealer="D2207",
        meters=Meters(games=11, no_rolls={"not_flat": 2}, corrections=1, power_ups=3),
    )


def test_a_context_with_its_time_tiles_dealer_correction_and_meters_reads_back() -> None:
    ctx = _in_result()
    assert decode_context(encode_context(ctx)) == ctx


@pytest.mark.parametrize("ctx", [RoundContext(), _in_result()], ids=["new", "result"])
def test_a_packed_context_inflates_to_the_same_bytes_in_a_fraction_of_them(
    ctx: RoundContext,
) -> None:
    """The head row keeps the context packed: what it inflates to is the encoder's bytes,
    and it fits the head's page with room (a 512-byte page holds about 477 bytes of a row)."""
    blob = encode_context(ctx)
    packed = pack_context(blob)
    assert unpack_context(packed) == blob
    assert len(packed) <= 240 < len(blob) or len(packed) < len(blob) <= 240, (
        len(packed),
        len(blob),
    )


def test_a_context_stored_before_packing_reads_as_it_is() -> None:
    blob = encode_context(_in_result())
    assert unpack_context(blob) is blob


def test_a_bit_flipped_in_a_packed_context_is_refused_or_changes_nothing() -> None:
    """Zlib's check of what it inflates (and of the dictionary, in its header): a damaged
    stored context is refused, never read as another context (a flip in a bit deflate does
    not use inflates to the same bytes)."""
    blob = encode_context(_in_result())
    packed = pack_context(blob)
    refused = 0
    for i in range(len(packed)):
        for bit in range(8):
            damaged = bytearray(packed)
            damaged[i] ^= 1 << bit
            try:
                read = decode_context(unpack_context(bytes(damaged)))
            except SnapshotError:
                refused += 1
                continue
            assert read == _in_result(), (i, bit)
    assert refused >= 8 * len(packed) - 8


def test_a_packed_context_that_inflates_past_the_limit_is_refused() -> None:
    packed = pack_context(b"{" + b" " * MAX_SNAPSHOT_BYTES)
    assert len(packed) < 1024
    with pytest.raises(SnapshotError, match="largest allowed"):
        unpack_context(packed)
    with pytest.raises(SnapshotError, match="length"):
        unpack_context(pack_context(b"{}") + b"\0")


def test_a_version_4_context_is_read_with_no_table_time_tiles_or_meters() -> None:
    raw = _raw(replace(RoundContext(), round_number=6, dice_set="3", dice_since=1_764_000_000_000))
    assert not {"table_ms", "tiles_set", "dealer", "meters", "correction"} & set(raw)
    raw["v"] = 4
    ctx = decode_context(canonical.encode(raw))
    assert (ctx.table_ms, ctx.tiles_set, ctx.dealer, ctx.meters) == (0, None, None, Meters())
    assert (ctx.dice_set, ctx.dice_since, ctx.dice_since_table) == ("3", 1_764_000_000_000, None)


def test_a_version_2_context_is_read_with_no_dice_set_recorded() -> None:
    raw = _raw(replace(RoundContext(), round_number=4, delivery_style=DeliveryStyle.JUNG_QUAT))
    assert not {"dice_set", "dice_since", "mode", "service_round", "co_bank"} & set(raw)
    raw["v"] = 2
    ctx = decode_context(canonical.encode(raw))
    assert (ctx.dice_set, ctx.dice_since) == (None, None)
    assert (ctx.round_number, ctx.delivery_style) == (4, DeliveryStyle.JUNG_QUAT)


def test_a_version_1_context_is_read_with_the_standard_style() -> None:
    raw = _raw(replace(RoundContext(), round_number=3, bank_seat=2))
    del raw["style"], raw["shake_delay"]
    raw["v"] = 1
    ctx = decode_context(canonical.encode(raw))
    assert ctx.delivery_style is DeliveryStyle.STANDARD
    assert (ctx.round_number, ctx.bank_seat) == (3, 2)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"v": 6}, "version"),
        ({"v": 4, "table_ms": 5}, "keys"),  # a version 4 context has no table time
        ({"table_ms": 0}, "table_ms"),  # written only when it is not 0
        ({"table_ms": None}, "only when it is set"),
        ({"dealer": "D 1"}, "employee id"),
        ({"tiles_set": "T1"}, "table's time"),  # a tile set without when it was inspected
        ({"meters": {}}, "meters"),
        ({"meters": {"games": 0}}, "meters"),
        ({"meters": {"games": True}}, "meters"),
        ({"meters": {"no_rolls": {"sneezed": 1}}}, "meters"),
        ({"meters": {"jackpots": 1}}, "meters"),
        ({"correction": {"dice_read": {"red": 1, "blue": [2, 3]}}}, "correction"),
        ({"v": 3, "dice_alarm": None}, "keys"),  # a version 3 context has no dice monitor
        ({"v": 0}, "version"),
        ({"v": True}, "version"),
        ({"v": 1}, "keys"),  # a version 1 context has no style
        ({"v": 2, "dice_set": "4"}, "keys"),  # a version 2 context has no dice set
        ({"dice_set": None}, "only when it is set"),  # one encoding per context
        ({"co_bank": False}, "only when it is set"),
        ({"dice_set": ""}, "dice set id"),
        ({"dice_set": "x" * 17}, "dice set id"),
        ({"dice_set": "a b"}, "dice set id"),
        ({"dice_set": 7}, "not a string"),
        ({"dice_since": -1}, "dice_since"),
        ({"dice_since": "1"}, "dice_since"),
        ({"mode": "dice"}, "dice"),
        ({"mode": 1}, "not a string"),
        ({"service_round": 0}, "service_round"),
        ({"service_round": 2}, "service mode returns"),
        ({"co_bank": 1}, "co_bank"),
        ({"style": "pin-say"}, "pin-say"),  # 621a.9(6),(7) are pin-say-right, pin-say-left
        ({"style": 4}, "not a string"),
        ({"shake_delay": -1}, "shake_delay"),
    ],
)
def test_anything_the_encoder_cannot_have_written_is_refused(
    change: dict[str, object], message: str
) -> None:
    raw = {**_raw(RoundContext()), **change}
    with pytest.raises(SnapshotError, match=message):
        decode_context(canonical.encode(raw))


def test_a_version_2_context_without_its_style_is_refused() -> None:
    raw = _raw(RoundContext())
    del raw["style"]
    with pytest.raises(SnapshotError, match="keys"):
        decode_context(canonical.encode(raw))
