"""A reading's decision made ahead (``decide_ahead``, ``step``'s ``ahead``): the step from the
sensor's frame to the result is the same with it as without it, for every roll, whether the
reading agrees or not, whatever happened in between; and it is taken when it applies.

The loop decides ahead while the sensor reads again (controller/app/loop.py), so that the frame
that decides only has its reading checked (issue 31: frame -> display within 1 ms)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.table import SETTINGS, Table

from controller.core.dice import DiceReading, DieColour, DieReading, ReadPolicy
from controller.core.position import Game
from controller.core.state import (
    ActionKind,
    Decided,
    Event,
    ReadingTaken,
    RoundContext,
    RoundSettings,
    State,
    decide_ahead,
    occurrence,
    step,
)
from controller.errors import GameRuleError

ROLLS = [(r, b1, b2) for r in range(1, 7) for b1 in range(1, 7) for b2 in range(1, 7)]


def reading(faces: tuple[int, int, int], *, shift: int = 0, confidence: int = 99) -> DiceReading:
    """The dice as the sensor sees them: ``shift`` moves them, the image is another."""
    red, b1, b2 = faces
    dice = tuple(
        DieReading(colour, face, True, True, confidence, (x + shift, 20))
        for colour, face, x in (
            (DieColour.RED, red, 10),
            (DieColour.BLUE, b1, 40),
            (DieColour.BLUE, b2, 70),
        )
    )
    return DiceReading(dice, f"{shift:02x}" * 32)


def after_first_reading(faces: tuple[int, int, int], rules: RoundSettings = SETTINGS) -> Table:
    table = Table(rules).to_reading()
    table.read(reading(faces))
    assert table.state is State.READING
    return table


def decided_after_first_reading(
    faces: tuple[int, int, int],
) -> tuple[Table, RoundContext, Decided]:
    """The table after a first reading of ``faces``, its context and the decision ahead."""
    table = after_first_reading(faces)
    ahead = decide_ahead(SETTINGS, table.machine.context)
    assert ahead is not None
    return table, table.machine.context, ahead


def both_ways(
    rules: RoundSettings, ctx: RoundContext, occ: ReadingTaken, ahead: Decided | None
) -> tuple[object, object]:
    return step(rules, ctx, occ), step(rules, ctx, occ, ahead=ahead)


def decided_actions_taken(actions: list[object], ahead: Decided) -> bool:
    """Whether the step's actions after the reading's own record are the ahead's objects."""
    return all(a is b for a, b in zip(actions[1:], ahead.step[1], strict=True))


@pytest.mark.parametrize("faces", ROLLS)
def test_every_roll_decided_ahead_is_the_step_an_agreeing_reading_takes(
    faces: tuple[int, int, int],
) -> None:
    table, ctx, ahead = decided_after_first_reading(faces)
    # the dice moved a little, another image, another confidence: the same roll
    second = reading(faces, shift=1, confidence=95)
    occ = ReadingTaken(at=table.now + 137, reading=second)
    plain, quick = both_ways(SETTINGS, ctx, occ, ahead)
    assert quick == plain
    after, actions = quick  # type: ignore[misc]
    assert after.state is State.RESULT
    assert after.previous_roll.positions[0] == (11, 20)  # the deciding reading's, not the first's
    assert after.table_ms == ctx.table_ms + 137
    assert actions[0].record.value == "reading"
    assert actions[0].data["image_digest"] == second.image_digest
    assert decided_actions_taken(actions, ahead)


@pytest.mark.parametrize("faces", ROLLS[::7])
def test_a_reading_that_disagrees_is_stepped_as_without_the_decision(
    faces: tuple[int, int, int],
) -> None:
    table, ctx, ahead = decided_after_first_reading(faces)
    other = (faces[0] % 6 + 1, faces[1], faces[2])
    occ = ReadingTaken(at=table.now + 50, reading=reading(other))
    plain, quick = both_ways(SETTINGS, ctx, occ, ahead)
    assert quick == plain
    assert quick[0].state is State.READING  # type: ignore[index]  # the streak starts again


def test_a_decision_made_before_something_else_happened_is_not_taken() -> None:
    table = after_first_reading((3, 5, 6))
    ahead = decide_ahead(SETTINGS, table.machine.context)
    assert ahead is not None
    # the context the reading comes to is not the one decided on (a bank seat, say)
    ctx = replace(table.machine.context, bank_seat=3)
    assert ctx.bank_seat != ahead.basis.bank_seat
    occ = ReadingTaken(at=table.now + 50, reading=reading((3, 5, 6), shift=2))
    plain, quick = both_ways(SETTINGS, ctx, occ, ahead)
    assert quick == plain
    assert not decided_actions_taken(quick[1], ahead)  # type: ignore[index]


def test_a_decision_under_other_rules_is_not_taken() -> None:
    table = after_first_reading((1, 1, 1))
    ctx = table.machine.context
    ahead = decide_ahead(SETTINGS, ctx)
    assert ahead is not None
    tiles = replace(SETTINGS, game=Game.POKER if SETTINGS.game is Game.TILES else Game.TILES)
    occ = ReadingTaken(at=table.now + 50, reading=reading((1, 1, 1)))
    plain, quick = both_ways(tiles, ctx, occ, ahead)
    assert quick == plain
    assert not decided_actions_taken(quick[1], ahead)  # type: ignore[index]


def test_there_is_a_decision_ahead_only_one_agreeing_reading_before_a_roll() -> None:
    table = Table().to_reading()
    assert decide_ahead(SETTINGS, table.machine.context) is None  # nothing read yet
    three = replace(SETTINGS, read_policy=ReadPolicy(reads_to_agree=3))
    table = after_first_reading((2, 2, 4), three)
    assert decide_ahead(three, table.machine.context) is None  # two more to agree
    table.read(reading((2, 2, 4), shift=1))
    assert decide_ahead(three, table.machine.context) is not None
    tilted = Table().to_reading()
    tilted.read(reading((2, 2, 4)))
    tilted.send(Event.LID_OPENED)  # the shake is void: no reading is awaited
    assert decide_ahead(SETTINGS, tilted.machine.context) is None


def test_a_decision_ahead_records_nothing_and_changes_nothing() -> None:
    table = after_first_reading((6, 6, 6))
    ctx = table.machine.context
    ahead = decide_ahead(SETTINGS, ctx)
    assert ahead is not None
    assert table.machine.context is ctx
    assert ahead.step[1][0].kind is ActionKind.RECORD  # the result, unrecorded


CASES = st.fixed_dictionaries(
    {
        "first": st.tuples(*[st.integers(1, 6)] * 3),
        "second": st.tuples(*[st.integers(1, 6)] * 3),
        "agree": st.booleans(),
        "shift": st.integers(-2, 2),
        "confidence": st.integers(0, 100),
        "gap": st.integers(0, 10_000),
        "bank_keys": st.integers(0, 3),
        "game": st.sampled_from(list(Game)),
        "wall": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None)
@given(case=CASES)
def test_with_or_without_the_decision_ahead_the_step_is_the_same(case: dict[str, Any]) -> None:
    """Any roll, a reading that agrees or not, moved, of any confidence, any time later, any
    bank and game, with or without the wall clock."""
    rules = replace(SETTINGS, game=case["game"])
    table = Table(rules)
    for _ in range(case["bank_keys"]):
        table.send(Event.BANK_SEAT_KEY)
    try:
        table.to_reading()
    except GameRuleError:
        assume(False)  # a bank the rules refuse for this round: no round to read
    table.read(reading(case["first"]))
    ctx = table.machine.context
    ahead = decide_ahead(rules, ctx)
    faces = case["first"] if case["agree"] else case["second"]
    seen = reading(faces, shift=case["shift"], confidence=case["confidence"])
    occ = occurrence(
        Event.READING,
        at=table.now + case["gap"],
        wall=1_764_500_000_000 if case["wall"] else None,
        reading=seen,
    )
    assert isinstance(occ, ReadingTaken)
    plain, quick = both_ways(rules, ctx, occ, ahead)
    assert quick == plain
