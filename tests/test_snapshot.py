"""The stored round context: what the encoder writes is read back, contexts of versions 1 (before
the delivery style) and 2 (before the dice set) are still read, and anything else is refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from controller.core import canonical
from controller.core.dealing import DeliveryStyle
from controller.core.snapshot import SnapshotError, decode_context, encode_context
from controller.core.state import Mode, RoundContext, State


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
        ({"v": 5}, "version"),
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
