"""HMAC_DRBG (SP 800-90A Rev. 1 §10.1.2), its self-tests, and unbiased scaling."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.core.dice import Roll
from controller.core.drbg import (
    DICE_OUTCOMES,
    MAX_REJECTIONS,
    MAX_REQUEST_BYTES,
    HmacDrbg,
    bound_source,
    known_answer_test,
    number_in_range,
    roll_of_outcome,
    uniform_below,
    virtual_roll,
)
from controller.errors import RngError, RngSelfTestFailure

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
NPM_FILE = VECTORS / "hmac_drbg_sha256_nist_no_reseed.json"
NPM_SHA256 = "5179177ba49720ff9b2a9263ebcbbe375833fe87a60ef8fd760b13ad0ca13f2e"
COUNT0_FILE = VECTORS / "hmac_drbg_sha256_nist_count0.json"
COUNT0_SHA256 = "e8d0247b710b7ea2d0919e75151b9aeb8764ebf63449f596162eb75a6ac067fe"

ENTROPY = bytes(range(32))
NONCE = bytes(range(32, 48))


def _load(path: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(path.read_text())
    return data


NPM_VECTORS = _load(NPM_FILE)
COUNT0_VECTORS = _load(COUNT0_FILE)


# --- NIST CAVP vectors ----------------------------------------------------------------------


def test_the_vendored_npm_vectors_are_the_published_file() -> None:
    assert hashlib.sha256(NPM_FILE.read_bytes()).hexdigest() == NPM_SHA256
    assert hashlib.sha256(COUNT0_FILE.read_bytes()).hexdigest() == COUNT0_SHA256
    assert len(NPM_VECTORS) == 30
    assert len(COUNT0_VECTORS) == 9


@pytest.mark.parametrize("vector", NPM_VECTORS, ids=lambda v: f"no_reseed-{v['name']}")
def test_cavp_no_reseed_vectors_from_npm_reproduce(vector: dict[str, Any]) -> None:
    drbg = HmacDrbg(
        bytes.fromhex(vector["entropy"]),
        bytes.fromhex(vector["nonce"]),
        bytes.fromhex(vector["pers"] or ""),
    )
    expected = bytes.fromhex(vector["expected"])
    returned = b""
    for additional in vector["add"]:
        returned = drbg.generate(len(expected), bytes.fromhex(additional or ""))
    assert returned == expected


@pytest.mark.parametrize(
    "vector", COUNT0_VECTORS, ids=lambda v: f"{v['file'].split('/')[0]}-{v['group'][-60:]}"
)
def test_cavp_count0_vectors_with_personalization_input_and_reseed_reproduce(
    vector: dict[str, Any],
) -> None:
    h = bytes.fromhex
    drbg = HmacDrbg(h(vector["entropy"]), h(vector["nonce"]), h(vector["personalization"]))
    if "entropy_reseed" in vector:
        drbg.reseed(h(vector["entropy_reseed"]), h(vector["additional_input_reseed"]))
    expected = h(vector["returned_bits"])
    returned = b""
    for index, additional in enumerate(vector["additional_input"]):
        if "entropy_prediction_resistance" in vector:
            # §9.3.1 step 7: with prediction resistance, reseed with the input, then generate.
            drbg.reseed(h(vector["entropy_prediction_resistance"][index]), h(additional))
            returned = drbg.generate(len(expected))
        else:
            returned = drbg.generate(len(expected), h(additional))
    assert returned == expected


# --- limits of SP 800-90A Table 2 -----------------------------------------------------------


def test_instantiation_needs_256_bits_of_entropy_and_a_128_bit_nonce() -> None:
    with pytest.raises(RngError, match="entropy"):
        HmacDrbg(ENTROPY[:31], NONCE)
    with pytest.raises(RngError, match="nonce"):
        HmacDrbg(ENTROPY, NONCE[:15])
    with pytest.raises(RngError, match="entropy"):
        HmacDrbg(ENTROPY, NONCE).reseed(ENTROPY[:31])


def test_a_request_is_1_to_2_to_the_19_bits() -> None:
    drbg = HmacDrbg(ENTROPY, NONCE)
    assert len(drbg.generate(MAX_REQUEST_BYTES)) == MAX_REQUEST_BYTES == 65536
    assert len(drbg.generate(1)) == 1
    for size in (0, MAX_REQUEST_BYTES + 1):
        with pytest.raises(RngError, match="request"):
            drbg.generate(size)


def test_generate_refuses_past_the_reseed_interval_until_reseeded() -> None:
    drbg = HmacDrbg(ENTROPY, NONCE, reseed_interval=3)
    for _ in range(3):
        drbg.generate(8)
    with pytest.raises(RngError, match="reseed"):
        drbg.generate(8)
    drbg.reseed(bytes(reversed(ENTROPY)))
    drbg.generate(8)
    with pytest.raises(RngError, match="reseed interval"):
        HmacDrbg(ENTROPY, NONCE, reseed_interval=(1 << 48) + 1)


def test_output_depends_on_personalization_and_additional_input() -> None:
    def first(personalization: bytes, additional: bytes) -> bytes:
        return HmacDrbg(ENTROPY, NONCE, personalization).generate(32, additional)

    assert first(b"", b"") != first(b"table-1", b"")
    assert first(b"", b"") != first(b"", b"round 1")
    assert first(b"", b"round 1") != first(b"", b"round 2")
    assert first(b"t", b"r") == first(b"t", b"r")


def test_repr_never_shows_the_working_state() -> None:
    drbg = HmacDrbg(ENTROPY, NONCE)
    text = repr(drbg)
    assert drbg._key.hex() not in text
    assert drbg._value.hex() not in text
    assert "reseed_counter=1" in text


# --- self-tests -----------------------------------------------------------------------------


class _FlippedBit(HmacDrbg):
    """An implementation with one wrong bit in every HMAC: the KAT must catch it."""

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        digest = super()._hmac(key, message)
        return bytes([digest[0] ^ 1]) + digest[1:]


class _StuckOutput(HmacDrbg):
    """An implementation whose output blocks repeat once instantiated (a stuck generator)."""

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        if hasattr(self, "_previous_block"):
            return b"\x5a" * 32
        return super()._hmac(key, message)


def test_known_answer_test_passes_on_this_implementation() -> None:
    known_answer_test()


def test_known_answer_test_fails_on_a_wrong_implementation() -> None:
    with pytest.raises(RngSelfTestFailure, match="known-answer"):
        known_answer_test(_FlippedBit)


def test_continuous_test_fails_on_two_identical_consecutive_blocks() -> None:
    drbg = _StuckOutput(ENTROPY, NONCE)
    with pytest.raises(RngSelfTestFailure, match="continuous"):
        drbg.generate(64)  # two blocks in one request


def test_continuous_test_spans_requests_and_the_instance_stays_failed() -> None:
    drbg = _StuckOutput(ENTROPY, NONCE)
    drbg.generate(1)
    with pytest.raises(RngSelfTestFailure, match="continuous"):
        drbg.generate(1)
    with pytest.raises(RngSelfTestFailure):
        drbg.generate(1)
    with pytest.raises(RngSelfTestFailure):
        drbg.reseed(ENTROPY)


def test_known_answer_test_reports_a_stuck_generator_as_a_self_test_failure() -> None:
    with pytest.raises(RngSelfTestFailure):
        known_answer_test(_StuckOutput)


# --- scaling: exhaustive proofs of exact uniformity ------------------------------------------


class _Exhausted(Exception):
    """The stub source was asked for more bytes than it was given: the value was rejected."""


def _one_shot(data: bytes) -> Iterator[bytes]:
    yield data


def _scale_once(n: int, data: bytes) -> int | None:
    """Scale ``data`` as the first and only request; None when the scaler rejects it."""
    chunks = _one_shot(data)

    def source(n_bytes: int) -> bytes:
        assert n_bytes == len(data), "the scaler asked for a different width"
        try:
            return next(chunks)
        except StopIteration:
            raise _Exhausted from None

    try:
        return uniform_below(n, source)
    except _Exhausted:
        return None


@pytest.mark.parametrize("n", range(2, 257))
def test_every_byte_value_maps_to_each_of_n_values_equally_often(n: int) -> None:
    # Every one of the 256 equally probable bytes, once: the accepted values must be spread
    # exactly evenly over 0..n-1, and the rest rejected (and redrawn, never folded back).
    counts = Counter(_scale_once(n, bytes([b])) for b in range(256))
    rejected = counts.pop(None, 0)
    assert sorted(counts) == list(range(n))
    assert len(set(counts.values())) == 1
    per_value = counts[0]
    assert per_value * n + rejected == 256
    assert rejected < 128  # the mask keeps acceptance above one half


@pytest.mark.parametrize("n", [257, 1000, 4097, 65535, 65536])
def test_every_two_byte_value_maps_to_each_of_n_values_equally_often(n: int) -> None:
    counts = Counter(_scale_once(n, b.to_bytes(2, "big")) for b in range(65536))
    rejected = counts.pop(None, 0)
    assert sorted(counts) == list(range(n))
    assert len(set(counts.values())) == 1
    assert rejected < 32768


def test_a_rejected_value_is_redrawn_not_folded() -> None:
    feed = iter([bytes([7]), bytes([7]), bytes([3])])  # 7 is out of range for n = 7

    def source(n_bytes: int) -> bytes:
        return next(feed)

    assert uniform_below(7, source) == 3


def test_a_generator_that_is_always_rejected_is_a_self_test_failure() -> None:
    calls = 0

    def source(n_bytes: int) -> bytes:
        nonlocal calls
        calls += 1
        return b"\xff"

    with pytest.raises(RngSelfTestFailure, match="rejections"):
        uniform_below(7, source)
    assert calls == MAX_REJECTIONS


def test_number_in_range_counts_from_one_and_a_range_of_one_needs_no_bytes() -> None:
    def no_bytes(n_bytes: int) -> bytes:
        raise AssertionError("a range of one value needs no randomness")

    assert uniform_below(1, no_bytes) == 0
    assert number_in_range(8, lambda _: bytes([0])) == 1
    assert number_in_range(8, lambda _: bytes([7])) == 8
    with pytest.raises(RngError):
        uniform_below(0, no_bytes)


def test_the_216_dice_outcomes_are_each_roll_exactly_once() -> None:
    rolls = [roll_of_outcome(v) for v in range(DICE_OUTCOMES)]
    assert len(set(rolls)) == 216
    every_roll = {
        Roll(r, (b1, b2)) for r in range(1, 7) for b1 in range(1, 7) for b2 in range(1, 7)
    }
    assert set(rolls) == every_roll
    assert roll_of_outcome(0) == Roll(1, (1, 1))
    assert roll_of_outcome(215) == Roll(6, (6, 6))
    for bad in (-1, 216):
        with pytest.raises(RngError):
            roll_of_outcome(bad)


def test_each_virtual_die_is_exactly_uniform_over_every_byte() -> None:
    rolls = [
        r for r in (_scale_once(DICE_OUTCOMES, bytes([b])) for b in range(256)) if r is not None
    ]
    assert len(rolls) == 216
    for die in range(3):
        faces = Counter(roll_of_outcome(v).faces[die] for v in rolls)
        assert faces == dict.fromkeys(range(1, 7), 36)


def test_virtual_roll_and_bound_source_draw_from_the_drbg_with_the_round_identity() -> None:
    a = HmacDrbg(ENTROPY, NONCE)
    b = HmacDrbg(ENTROPY, NONCE)
    rolls_a = [virtual_roll(bound_source(a, f"round {i}".encode())) for i in range(50)]
    rolls_b = [virtual_roll(bound_source(b, f"round {i}".encode())) for i in range(50)]
    assert rolls_a == rolls_b
    c = HmacDrbg(ENTROPY, NONCE)
    rolls_c = [virtual_roll(bound_source(c, f"round {i + 1}".encode())) for i in range(50)]
    assert rolls_c != rolls_a
