"""No-roll detection from readings (621a.12(a),(b)) and K agreeing reads."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.dice import (
    DiceReading,
    DieColour,
    DieReading,
    NoRollReason,
    ReadPolicy,
    ReadProgress,
    Roll,
    judge_reading,
    next_read,
)
from controller.errors import GameRuleError

RED, BLUE, OTHER = DieColour.RED, DieColour.BLUE, DieColour.OTHER


def die(
    colour: DieColour = BLUE,
    face: int | None = 1,
    *,
    flat: bool = True,
    inside: bool = True,
    confidence: int = 99,
    position: tuple[int, int] | None = None,
) -> DieReading:
    return DieReading(colour, face, flat, inside, confidence, position)


def reading(*dice: DieReading) -> DiceReading:
    return DiceReading(tuple(dice), "0" * 64)


def good(red: int = 3, b1: int = 4, b2: int = 5, *, at: int = 0) -> DiceReading:
    return reading(
        die(RED, red, position=(10 + at, 10)),
        die(BLUE, b1, position=(40 + at, 12)),
        die(BLUE, b2, position=(70 + at, 14)),
    )


POLICY = ReadPolicy(reads_to_agree=2, min_confidence=80, position_tolerance_mm=3)


def reason(r: DiceReading) -> NoRollReason | None:
    return judge_reading(r, min_confidence=80).no_roll_reason


def test_a_valid_reading_is_a_roll_with_red_first() -> None:
    verdict = judge_reading(reading(die(BLUE, 2), die(RED, 6), die(BLUE, 1)), min_confidence=80)
    assert verdict.roll == Roll(6, (2, 1))
    assert verdict.no_roll_reason is None


def test_not_flat_is_a_no_roll() -> None:
    # 621a.12(a)
    assert reason(reading(die(RED, 3), die(BLUE, None, flat=False), die(BLUE, 2))) == (
        NoRollReason.NOT_FLAT
    )


def test_die_out_is_a_no_roll() -> None:
    # 621a.12(b): one die out, even with three inside otherwise
    assert reason(reading(die(RED, 3), die(BLUE, 2), die(BLUE, 5, inside=False))) == (
        NoRollReason.DIE_OUT
    )


@pytest.mark.parametrize(
    ("dice", "expected"),
    [
        ((die(RED, 3), die(BLUE, 2)), NoRollReason.MISSING_DIE),
        ((), NoRollReason.MISSING_DIE),
        ((die(RED, 3), die(BLUE, 2), die(BLUE, 2), die(OTHER, None)), NoRollReason.EXTRA_DIE),
        ((die(RED, 3), die(RED, 2), die(BLUE, 2)), NoRollReason.WRONG_COLOURS),
        ((die(BLUE, 3), die(BLUE, 2), die(BLUE, 2)), NoRollReason.WRONG_COLOURS),
        ((die(RED, 3), die(OTHER, 2), die(BLUE, 2)), NoRollReason.WRONG_COLOURS),
        ((die(RED, 3), die(BLUE, None), die(BLUE, 2)), NoRollReason.UNREADABLE),
        ((die(RED, 3), die(BLUE, 1, confidence=79), die(BLUE, 2)), NoRollReason.LOW_CONFIDENCE),
    ],
)
def test_each_reason(dice: tuple[DieReading, ...], expected: NoRollReason) -> None:
    assert reason(reading(*dice)) is expected


def test_confidence_at_the_threshold_counts() -> None:
    assert reason(reading(die(RED, 3), die(BLUE, 1, confidence=80), die(BLUE, 2))) is None


def test_die_fields_are_checked() -> None:
    with pytest.raises(GameRuleError):
        die(face=7)
    with pytest.raises(GameRuleError):
        die(confidence=101)
    with pytest.raises(GameRuleError):
        Roll(0, (1, 1))


def test_every_reason_has_plain_words() -> None:
    for r in NoRollReason:
        assert r.plain_words
        assert r.plain_words[0].islower()


dice_strategy = st.builds(
    DieReading,
    st.sampled_from(list(DieColour)),
    st.none() | st.integers(1, 6),
    st.booleans(),
    st.booleans(),
    st.integers(0, 100),
    st.none() | st.tuples(st.integers(0, 200), st.integers(0, 200)),
)


@given(st.lists(dice_strategy, max_size=6))
def test_valid_only_when_exactly_three_flat_inside_one_red_two_blue(
    dice: list[DieReading],
) -> None:
    verdict = judge_reading(reading(*dice), min_confidence=80)
    is_valid = (
        len(dice) == 3
        and all(d.is_inside and d.is_flat and d.face is not None for d in dice)
        and sorted(d.colour for d in dice) == sorted([RED, BLUE, BLUE])
        and all(d.confidence >= 80 for d in dice)
    )
    assert verdict.is_valid == is_valid
    assert (verdict.roll is None) == (verdict.no_roll_reason is not None)
    if verdict.roll is not None:
        red = next(d for d in dice if d.colour is RED)
        assert verdict.roll.red == red.face


# --- K consecutive agreeing reads -------------------------------------------------------------


def test_two_agreeing_reads_make_a_roll() -> None:
    first = next_read(ReadProgress(), good(), policy=POLICY, previous_roll=None)
    assert first.needs_another_read
    second = next_read(first.progress, good(at=1), policy=POLICY, previous_roll=None)
    assert second.roll == Roll(3, (4, 5))


def test_one_read_is_enough_when_configured() -> None:
    policy = replace(POLICY, reads_to_agree=1)
    assert next_read(ReadProgress(), good(), policy=policy, previous_roll=None).roll is not None


def test_disagreement_reads_again_then_no_roll() -> None:
    first = next_read(ReadProgress(), good(3, 4, 5), policy=POLICY, previous_roll=None)
    second = next_read(first.progress, good(3, 4, 6), policy=POLICY, previous_roll=None)
    assert second.needs_another_read  # disagreement: read again
    third = next_read(second.progress, good(3, 4, 5), policy=POLICY, previous_roll=None)
    assert third.no_roll_reason is NoRollReason.READS_DISAGREE


def test_after_one_disagreement_two_agreeing_reads_still_count() -> None:
    first = next_read(ReadProgress(), good(3, 4, 5), policy=POLICY, previous_roll=None)
    second = next_read(first.progress, good(3, 4, 6), policy=POLICY, previous_roll=None)
    third = next_read(second.progress, good(3, 4, 6), policy=POLICY, previous_roll=None)
    assert third.roll == Roll(3, (4, 6))


def test_blues_swapping_places_between_reads_still_agree() -> None:
    a = reading(die(RED, 3, position=(10, 10)), die(BLUE, 4, position=(40, 10)),
                die(BLUE, 5, position=(70, 10)))  # fmt: skip
    b = reading(die(BLUE, 5, position=(70, 10)), die(RED, 3, position=(10, 10)),
                die(BLUE, 4, position=(40, 10)))  # fmt: skip
    first = next_read(ReadProgress(), a, policy=POLICY, previous_roll=None)
    assert next_read(first.progress, b, policy=POLICY, previous_roll=None).roll is not None


def test_a_die_that_moved_between_reads_is_a_disagreement() -> None:
    first = next_read(ReadProgress(), good(at=0), policy=POLICY, previous_roll=None)
    second = next_read(first.progress, good(at=20), policy=POLICY, previous_roll=None)
    assert second.needs_another_read
    assert second.progress.reread_used


def test_an_invalid_read_is_a_no_roll_at_once() -> None:
    tilted = reading(die(RED, 3), die(BLUE, None, flat=False), die(BLUE, 2))
    step = next_read(ReadProgress(), tilted, policy=POLICY, previous_roll=None)
    assert step.no_roll_reason is NoRollReason.NOT_FLAT


def test_same_faces_in_the_same_places_as_the_last_roll_did_not_move() -> None:
    first = next_read(ReadProgress(), good(), policy=POLICY, previous_roll=None)
    last = next_read(first.progress, good(), policy=POLICY, previous_roll=None)
    assert last.roll is not None
    again = next_read(ReadProgress(), good(at=1), policy=POLICY, previous_roll=last.verdict)
    again = next_read(again.progress, good(at=1), policy=POLICY, previous_roll=last.verdict)
    assert again.no_roll_reason is NoRollReason.DICE_DID_NOT_MOVE


def test_same_faces_in_other_places_is_a_new_roll() -> None:
    first = next_read(ReadProgress(), good(), policy=POLICY, previous_roll=None)
    last = next_read(first.progress, good(), policy=POLICY, previous_roll=None)
    moved = next_read(ReadProgress(), good(at=30), policy=POLICY, previous_roll=last.verdict)
    moved = next_read(moved.progress, good(at=30), policy=POLICY, previous_roll=last.verdict)
    assert moved.roll == Roll(3, (4, 5))


def test_without_positions_a_repeat_of_the_faces_is_a_roll() -> None:
    no_pos = reading(die(RED, 3), die(BLUE, 4), die(BLUE, 5))
    first = next_read(ReadProgress(), no_pos, policy=POLICY, previous_roll=None)
    last = next_read(first.progress, no_pos, policy=POLICY, previous_roll=None)
    again = next_read(ReadProgress(), no_pos, policy=POLICY, previous_roll=last.verdict)
    again = next_read(again.progress, no_pos, policy=POLICY, previous_roll=last.verdict)
    assert again.roll == Roll(3, (4, 5))
