"""The dealing plan against the rule text: 621a.8(c),(d), 621a.9(1)-(9), 621a.11(i),(j),(k).

The expectations are written here from the sentences of the rules, not computed the way
controller/core/dealing.py computes them: each style is a literal table of the hands in dealing
order, tile by tile, next to the sentence it comes from (checked word for word against the rule
text where it is on the machine), and the positions come from a count written out as the text
words it. Every style x total 3..18 x bank (the dealer, or seats 1..6) is checked against the
table and against the invariants the text implies: 32 tiles, each dealt once, four to each of
the eight positions, each taken from the top of what lies on it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import run

from controller.core.dealing import (
    DealingPlan,
    Delivery,
    DeliveryStyle,
    StackTiles,
    dealing_plan,
    hands_in_dealing_order,
)
from controller.core.position import DEALER, Game, Position, starting_position
from controller.errors import ControllerError, GameRuleError

# 621a.8(c): "count counterclockwise around the table with the position of the dealer
# considered number one and continuing around the table with each betting position ... and the
# Dead Hand". The labels are those the `position` command prints.
COUNTERCLOCKWISE = (
    "dealer",
    "seat 1",
    "seat 2",
    "seat 3",
    "seat 4",
    "seat 5",
    "seat 6",
    "dead hand",
)
# The rule text, beside the repository (../shared/regulations).
REGULATION = (
    Path(__file__).resolve().parents[3] / "shared/regulations/pa-2011-proposed-ch621a-pai-gow.txt"
)
TOTALS = range(3, 19)  # three dice
BANKS: tuple[int | None, ...] = (None, 1, 2, 3, 4, 5, 6)


def counted_start(total: int, bank_seat: int | None) -> str:
    """The starting position counted one by one, as the dealer counts.

    621a.8(c): the dealer is number one. 621a.11(j): when a player banks, "the position of the
    bank considered number one and continuing around the table with each betting position,
    including the dealer, ... and the Dead Hand counted in order until the count matches the
    total of the three dice"."""
    here = COUNTERCLOCKWISE.index("dealer" if bank_seat is None else f"seat {bank_seat}")
    count = 1
    while count != total:
        here = (here + 1) % len(COUNTERCLOCKWISE)
        count += 1
    return COUNTERCLOCKWISE[here]


# Stacks are numbered 1..8 from the dealer's right: stack 1 is the first on the dealer's right,
# stack 8 the first on the dealer's left; as they lie when dealing begins. A tile is (stack,
# level), level 1 the stack's top tile and 4 its bottom tile. A hand is what one position
# receives, as (stack, levels) items in the order the dealer takes them.
Item = tuple[int, tuple[int, ...]]
Hand = list[Item]


def whole(stack: int) -> Item:
    """All four tiles of the stack."""
    return (stack, (1, 2, 3, 4))


def top(stack: int) -> Item:
    """The top two tiles (a pick four's first position)."""
    return (stack, (1, 2))


def bottom(stack: int) -> Item:
    """The two under them, "the four remaining tiles" of two stacks."""
    return (stack, (3, 4))


def tile(stack: int, level: int) -> Item:
    """One tile."""
    return (stack, (level,))


# Each style's sentences, and the hands they give in dealing order (the starting position's
# first). Within a hand: the order the text counts the stacks, a group on the dealer's right
# from the right (1, 2, 3, 4), a group on the dealer's left from the left (8, 7, 6, 5); of one
# stack on each side named together, the one on the dealer's right (named first) first.
RULE_TEXT: dict[str, tuple[str, list[Hand]]] = {
    "standard": (
        # 621a.8(d)
        "The dealer shall deal the first stack of four tiles, starting from the right side of the"
        " eight stacks, to the starting position as determined in subsection (c) and, moving"
        " counterclockwise around the table, deal all other positions including the Dead Hand"
        " and the dealer a stack of tiles, regardless of whether there is a wager at the"
        " position.",
        [
            [whole(1)],
            [whole(2)],
            [whole(3)],
            [whole(4)],
            [whole(5)],
            [whole(6)],
            [whole(7)],
            [whole(8)],
        ],
    ),
    "house-way-left": (
        # 621a.9(1)
        "pushing forward the first stack of tiles on the dealer's left. The dealer shall deliver"
        " the stack pushed forward to the starting position. The remaining stacks of tiles shall"
        " be delivered from the dealer's left to right.",
        [
            [whole(8)],
            [whole(7)],
            [whole(6)],
            [whole(5)],
            [whole(4)],
            [whole(3)],
            [whole(2)],
            [whole(1)],
        ],
    ),
    "cup-say-right": (
        # 621a.9(2)
        "pushing forward the first two stacks of tiles on the dealer's right. The dealer shall"
        " deliver the top two tiles from each of the two stacks pushed forward to the starting"
        " position. The four remaining tiles pushed forward shall be delivered to the next"
        " position. The remaining stacks of tiles shall be delivered from the dealer's right to"
        " left in the same manner as the first two stacks.",
        [
            [top(1), top(2)],
            [bottom(1), bottom(2)],
            [top(3), top(4)],
            [bottom(3), bottom(4)],
            [top(5), top(6)],
            [bottom(5), bottom(6)],
            [top(7), top(8)],
            [bottom(7), bottom(8)],
        ],
    ),
    "cup-say-left": (
        # 621a.9(3)
        "pushing forward the first two stacks of tiles on the dealer's left. The dealer shall"
        " deliver the top two tiles from each of the two stacks pushed forward to the starting"
        " position. The four remaining tiles pushed forward shall be delivered to the next"
        " position. The remaining stacks of tiles shall be delivered from the dealer's left to"
        " right in the same manner as the first two stacks.",
        [
            [top(8), top(7)],
            [bottom(8), bottom(7)],
            [top(6), top(5)],
            [bottom(6), bottom(5)],
            [top(4), top(3)],
            [bottom(4), bottom(3)],
            [top(2), top(1)],
            [bottom(2), bottom(1)],
        ],
    ),
    "jung-quat": (
        # 621a.9(4)
        "pushing forward the fourth stack of tiles from the dealer's right and the fourth stack"
        " of tiles from the dealer's left (the two center stacks of the eight). The dealer shall"
        " deliver the top two tiles from each of the two stacks pushed forward to the starting"
        " position. The four remaining tiles pushed forward shall be delivered to the next"
        " position. The remaining stacks shall be pushed together and the two new center stacks"
        " shall be pushed forward and delivered in the same manner as the first two stacks. This"
        " procedure shall be repeated until all eight stacks of tiles have been delivered.",
        # 4 & 5 are the centre of 1..8; pushed together 1 2 3 6 7 8 -> 3 & 6; then 1 2 7 8 ->
        # 2 & 7; then 1 & 8.
        [
            [top(4), top(5)],
            [bottom(4), bottom(5)],
            [top(3), top(6)],
            [bottom(3), bottom(6)],
            [top(2), top(7)],
            [bottom(2), bottom(7)],
            [top(1), top(8)],
            [bottom(1), bottom(8)],
        ],
    ),
    "chee-yee": (
        # 621a.9(5)
        "pushing forward the first stack of tiles on the dealer's right and the first stack of"
        " tiles on the dealer's left. To deliver the tiles, the dealer shall center the two"
        " stacks pushed forward in front of the remaining stacks. The dealer shall deliver the"
        " top two tiles from each of the two centered stacks to the starting position. The four"
        " remaining tiles from the two centered stacks shall be delivered to the next position."
        " The dealer shall then center and deliver the first stack remaining on the dealer's"
        " right and the first stack remaining on the dealer's left in the same manner. This"
        " procedure shall be repeated until all eight stacks of tiles have been delivered.",
        # the ears 1 & 8; what remains is 2..7: 2 & 7; then 3..6: 3 & 6; then 4 & 5.
        [
            [top(1), top(8)],
            [bottom(1), bottom(8)],
            [top(2), top(7)],
            [bottom(2), bottom(7)],
            [top(3), top(6)],
            [bottom(3), bottom(6)],
            [top(4), top(5)],
            [bottom(4), bottom(5)],
        ],
    ),
    "pin-say-right": (
        # 621a.9(6)
        "removing the top tile of the first stack of tiles on the dealer's right and placing it"
        " diagonally across the top of the second, third and fourth stacks of tiles from the"
        " dealer's right. The dealer shall deliver the top tile from each of the first four"
        " stacks on the dealer's right to the starting position (the diagonal tile plus the three"
        " tiles it covers). The top tile from each of the first four stacks on the dealer's left"
        " shall be delivered to the next position. The top tile remaining on each of the first"
        " four stacks on the dealer's right shall be delivered to the third position and the top"
        " tile remaining on each of the first four stacks on the dealer's left shall be delivered"
        " to the fourth position. This procedure shall be repeated until four tiles have been"
        " delivered to all eight positions.",
        [
            [tile(1, 1), tile(2, 1), tile(3, 1), tile(4, 1)],  # the diagonal tile first
            [tile(8, 1), tile(7, 1), tile(6, 1), tile(5, 1)],
            [tile(1, 2), tile(2, 2), tile(3, 2), tile(4, 2)],  # "the top tile remaining"
            [tile(8, 2), tile(7, 2), tile(6, 2), tile(5, 2)],
            [tile(1, 3), tile(2, 3), tile(3, 3), tile(4, 3)],  # "repeated"
            [tile(8, 3), tile(7, 3), tile(6, 3), tile(5, 3)],
            [tile(1, 4), tile(2, 4), tile(3, 4), tile(4, 4)],
            [tile(8, 4), tile(7, 4), tile(6, 4), tile(5, 4)],
        ],
    ),
    "pin-say-left": (
        # 621a.9(7)
        "removing the top tile of the first stack of tiles on the dealer's left and placing it"
        " diagonally across the top of the second, third and fourth stacks of tiles from the"
        " dealer's left. The dealer shall deliver the top tile from each of the first four stacks"
        " on the dealer's left to the starting position (the diagonal tile plus the three tiles"
        " it covers). The top tile from each of the first four stacks on the dealer's right shall"
        " be delivered to the next position. The top tile remaining on each of the first four"
        " stacks on the dealer's left shall be delivered to the third position and the top tile"
        " remaining on each of the first four stacks on the dealer's right shall be delivered to"
        " the fourth position. This procedure shall be repeated until four tiles have been"
        " delivered to all eight positions.",
        [
            [tile(8, 1), tile(7, 1), tile(6, 1), tile(5, 1)],  # the diagonal tile first
            [tile(1, 1), tile(2, 1), tile(3, 1), tile(4, 1)],
            [tile(8, 2), tile(7, 2), tile(6, 2), tile(5, 2)],
            [tile(1, 2), tile(2, 2), tile(3, 2), tile(4, 2)],
            [tile(8, 3), tile(7, 3), tile(6, 3), tile(5, 3)],
            [tile(1, 3), tile(2, 3), tile(3, 3), tile(4, 3)],
            [tile(8, 4), tile(7, 4), tile(6, 4), tile(5, 4)],
            [tile(1, 4), tile(2, 4), tile(3, 4), tile(4, 4)],
        ],
    ),
    "dragon-phoenix-right": (
        # 621a.9(8)
        "placing all four tiles in the first and second stacks from the dealer's right directly"
        " on top of the four tiles in the third and fourth stacks from the dealer's right and"
        " then pushing forward the top two tiles in each of the eight-tile stacks that are"
        " created (forming the dragon head). The dealer shall deliver the four tiles pushed"
        " forward to the starting position. The top tile from each of the four stacks of four"
        " tiles to the dealer's left (the phoenix tail) shall be delivered to the next position."
        " The dealer shall deliver the top two tiles from each of the two stacks on the dealer's"
        " right to the third position and the top tile from each of the four stacks on the"
        " dealer's left to the fourth position. This procedure shall be repeated until four"
        " tiles have been delivered to all eight positions.",
        # The eight-tile stacks: stack 1 on stack 3, stack 2 on stack 4. Their top two tiles
        # are stacks 1 and 2's until those are gone, then stacks 3 and 4's.
        [
            [top(1), top(2)],
            [tile(8, 1), tile(7, 1), tile(6, 1), tile(5, 1)],
            [bottom(1), bottom(2)],
            [tile(8, 2), tile(7, 2), tile(6, 2), tile(5, 2)],
            [top(3), top(4)],
            [tile(8, 3), tile(7, 3), tile(6, 3), tile(5, 3)],
            [bottom(3), bottom(4)],
            [tile(8, 4), tile(7, 4), tile(6, 4), tile(5, 4)],
        ],
    ),
    "dragon-phoenix-left": (
        # 621a.9(9)
        "placing all four tiles in the first and second stacks from the dealer's left directly"
        " on top of the four tiles in the third and fourth stacks from the dealer's left and"
        " then pushing forward the top two tiles in each of the eight-tile stacks that are"
        " created (forming the dragon head). The dealer shall deliver the four tiles pushed"
        " forward to the starting position. The top tile from each of the four stacks of four"
        " tiles to the dealer's right (the phoenix tail) shall be delivered to the next position."
        " The dealer shall deliver the top two tiles from each of the two stacks on the dealer's"
        " left to the third position and the top tile from each of the four stacks on the"
        " dealer's right to the fourth position. This procedure shall be repeated until four"
        " tiles have been delivered to all eight positions.",
        # The eight-tile stacks: stack 8 on stack 6, stack 7 on stack 5.
        [
            [top(8), top(7)],
            [tile(1, 1), tile(2, 1), tile(3, 1), tile(4, 1)],
            [bottom(8), bottom(7)],
            [tile(1, 2), tile(2, 2), tile(3, 2), tile(4, 2)],
            [top(6), top(5)],
            [tile(1, 3), tile(2, 3), tile(3, 3), tile(4, 3)],
            [bottom(6), bottom(5)],
            [tile(1, 4), tile(2, 4), tile(3, 4), tile(4, 4)],
        ],
    ),
}

SECTIONS = {
    "standard": "621a.8(d)",
    "house-way-left": "621a.9(1)",
    "cup-say-right": "621a.9(2)",
    "cup-say-left": "621a.9(3)",
    "jung-quat": "621a.9(4)",
    "chee-yee": "621a.9(5)",
    "pin-say-right": "621a.9(6)",
    "pin-say-left": "621a.9(7)",
    "dragon-phoenix-right": "621a.9(8)",
    "dragon-phoenix-left": "621a.9(9)",
}

# The sentences above, reduced to what a reader checks first.
FIRST_TO_THE_STARTING_POSITION = {
    "standard": [whole(1)],  # "starting from the right side"
    "house-way-left": [whole(8)],  # "the first stack of tiles on the dealer's left"
    "cup-say-right": [top(1), top(2)],  # "the first two stacks ... on the dealer's right"
    "cup-say-left": [top(8), top(7)],  # "the first two stacks ... on the dealer's left"
    "jung-quat": [top(4), top(5)],  # "the fourth stack ... from the dealer's right and ... left"
    "chee-yee": [top(1), top(8)],  # "the first stack ... on the dealer's right and ... left"
    # "the diagonal tile plus the three tiles it covers"
    "pin-say-right": [tile(1, 1), tile(2, 1), tile(3, 1), tile(4, 1)],
    "pin-say-left": [tile(8, 1), tile(7, 1), tile(6, 1), tile(5, 1)],
    # "the top two tiles in each of the eight-tile stacks"
    "dragon-phoenix-right": [top(1), top(2)],
    "dragon-phoenix-left": [top(8), top(7)],
}
# The two stacks each pick-four takes, in turn (621a.9(2)-(5)).
PICK_FOUR_PAIRS = {
    "cup-say-right": [{1, 2}, {3, 4}, {5, 6}, {7, 8}],  # "from the dealer's right to left"
    "cup-say-left": [{8, 7}, {6, 5}, {4, 3}, {2, 1}],  # "from the dealer's left to right"
    "jung-quat": [{4, 5}, {3, 6}, {2, 7}, {1, 8}],  # "the two new center stacks"
    "chee-yee": [{1, 8}, {2, 7}, {3, 6}, {4, 5}],  # "the first stack remaining on ... right"
}
# Pin Say and Dragon Head and Phoenix Tail: the stacks each of the first four positions' tiles
# come from; "this procedure shall be repeated" for the last four.
FIRST_FOUR = {
    "pin-say-right": [{1, 2, 3, 4}, {8, 7, 6, 5}, {1, 2, 3, 4}, {8, 7, 6, 5}],
    "pin-say-left": [{8, 7, 6, 5}, {1, 2, 3, 4}, {8, 7, 6, 5}, {1, 2, 3, 4}],
    "dragon-phoenix-right": [{1, 2}, {8, 7, 6, 5}, {1, 2}, {8, 7, 6, 5}],
    "dragon-phoenix-left": [{8, 7}, {1, 2, 3, 4}, {8, 7}, {1, 2, 3, 4}],
}

# How the tiles lie when dealing begins, each pile top first, as the physical order a plan
# must respect: a tile is taken only once every tile above it is gone. Every stack is a pile
# of its own, levels 1..4, except that 621a.9(8),(9) pile two stacks on two others first (the
# one on the dealer's right on the third from the right, as they lie), and that 621a.9(6),(7)
# lay the top tile of the first stack across the top of the next three (a tile above three).
PILED = {
    "dragon-phoenix-right": {1: 3, 2: 4},  # stack 1 on stack 3, stack 2 on stack 4
    "dragon-phoenix-left": {8: 6, 7: 5},
}
DIAGONAL = {
    "pin-say-right": ((1, 1), [2, 3, 4]),  # the diagonal tile, and the stacks it covers
    "pin-say-left": ((8, 1), [7, 6, 5]),
}


ALL_TILES = [(s, level) for s in range(1, 9) for level in (1, 2, 3, 4)]  # 8 x 4 = 32


def tiles_above(style: str) -> dict[tuple[int, int], set[tuple[int, int]]]:
    """For each tile, the tiles lying above it when dealing begins."""
    piles = {s: [(s, level) for level in (1, 2, 3, 4)] for s in range(1, 9)}
    for upper, lower in PILED.get(style, {}).items():
        piles[lower] = piles.pop(upper) + piles[lower]
    above: dict[tuple[int, int], set[tuple[int, int]]] = {}
    for pile in piles.values():
        for depth, t in enumerate(pile):
            above[t] = set(pile[:depth])
    if style in DIAGONAL:
        laid, covered = DIAGONAL[style]
        for s in covered:
            for level in (1, 2, 3, 4):
                above[(s, level)].add(laid)
    return above


def test_every_style_has_a_rule_text() -> None:
    assert [s.value for s in DeliveryStyle] == list(RULE_TEXT)
    assert set(RULE_TEXT) == set(FIRST_TO_THE_STARTING_POSITION) == set(SECTIONS)


def section_text(text: str, section: str) -> str:
    """The words of ``section`` ("621a.9(5)") in the rule text: the line that begins "(5) "
    under the heading "§ 621a.9." (the text gives each subsection a line of its own)."""
    part, sub = section[:-1].split("(")
    lines = text.splitlines()
    heading = next(n for n, line in enumerate(lines) if line.startswith(f"§ {part}."))
    for line in lines[heading + 1 :]:
        if line.startswith("§ "):
            break
        if line.startswith(f"({sub}) "):
            return " ".join(line.split())
    raise AssertionError(f"no {section} in the rule text")


def test_the_sentences_quoted_are_those_of_the_regulation() -> None:
    """Each style's sentences above are, word for word, in the subsection its section names."""
    if not REGULATION.exists():
        pytest.skip(f"{REGULATION} is not on this machine")
    text = REGULATION.read_text(encoding="utf-8")
    for name, (sentences, _) in RULE_TEXT.items():
        assert sentences in section_text(text, SECTIONS[name]), name


def test_the_tables_agree_with_their_summaries() -> None:
    """The ways the sentences were written down say the same thing."""
    for name, (_, hands) in RULE_TEXT.items():
        assert hands[0] == FIRST_TO_THE_STARTING_POSITION[name]
    for name, pairs in PICK_FOUR_PAIRS.items():
        hands = RULE_TEXT[name][1]
        for n, pair in enumerate(pairs):
            assert [t for _, t in hands[2 * n]] == [(1, 2), (1, 2)]  # "the top two tiles"
            assert [t for _, t in hands[2 * n + 1]] == [(3, 4), (3, 4)]  # "the four remaining"
            assert {s for s, _ in hands[2 * n]} == pair
            assert {s for s, _ in hands[2 * n + 1]} == pair
    for name, sides in FIRST_FOUR.items():
        hands = RULE_TEXT[name][1]
        assert [{s for s, _ in hand} for hand in hands[:4]] == sides
    for name in ("pin-say-right", "pin-say-left"):
        hands = RULE_TEXT[name][1]
        for n, hand in enumerate(hands):
            # "repeated": the same stacks, a tile lower each time round
            assert [s for s, _ in hand] == [s for s, _ in hands[n % 2]]
            assert {t for _, t in hand} == {(n // 2 + 1,)}
    for name, under in (("dragon-phoenix-right", [3, 4]), ("dragon-phoenix-left", [6, 5])):
        hands = RULE_TEXT[name][1]
        for n in (1, 3, 5, 7):  # the phoenix tail, a tile lower each time
            assert [s for s, _ in hands[n]] == [s for s, _ in hands[1]]
            assert {t for _, t in hands[n]} == {(n // 2 + 1,)}
        # the dragon head, repeated: the stacks that were under the first two
        assert [s for s, _ in hands[4]] == [s for s, _ in hands[6]] == under
        assert [t for _, t in hands[4]] == [(1, 2), (1, 2)]
        assert [t for _, t in hands[6]] == [(3, 4), (3, 4)]


def plan_of(style: str, total: int, bank_seat: int | None) -> DealingPlan:
    start = starting_position(Game.TILES, total, bank_seat=bank_seat)
    return dealing_plan(Game.TILES, DeliveryStyle(style), start)


def hands_of(plan: DealingPlan) -> list[Hand]:
    return [[(t.stack, t.levels) for t in d.tiles] for d in plan.deliveries]


def expected_record(style: str, total: int, bank_seat: int | None) -> dict[str, object]:
    """The JSON of the plan, from the count and the rule text alone."""
    start = counted_start(total, bank_seat)
    first = COUNTERCLOCKWISE.index(start)
    # 621a.8(d), 621a.11(k): "moving counterclockwise around the table, deal all other
    # positions including the Dead Hand and the dealer".
    order = [COUNTERCLOCKWISE[(first + k) % 8] for k in range(8)]
    return {
        "style": style,
        "section": SECTIONS[style],
        "starting_position": start,
        "plan": [
            {
                "position": p,
                "tiles": [{"stack": s, "levels": list(levels)} for s, levels in hand],
            }
            for p, hand in zip(order, RULE_TEXT[style][1], strict=True)
        ],
    }


@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_every_total_and_bank_agrees_with_the_rule_text(style: str) -> None:
    for total in TOTALS:
        for bank_seat in BANKS:
            plan = plan_of(style, total, bank_seat)
            assert plan.as_record() == expected_record(style, total, bank_seat), (total, bank_seat)


def taking_order(plan: DealingPlan) -> list[tuple[int, int]]:
    """Every tile of the plan, (stack, level), in the order the dealer takes it: position by
    position, and within one the items in order, each item's levels top first."""
    return [(t.stack, level) for d in plan.deliveries for t in d.tiles for level in t.levels]


@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_invariants_of_every_plan(style: str) -> None:
    above = tiles_above(style)
    for total in TOTALS:
        for bank_seat in BANKS:
            plan = plan_of(style, total, bank_seat)
            labels = [d.position.label for d in plan.deliveries]
            # Eight positions, each once, counterclockwise from the starting position.
            assert plan.starting_position.label == counted_start(total, bank_seat)
            assert labels[0] == plan.starting_position.label
            assert sorted(labels) == sorted(COUNTERCLOCKWISE)
            for here, after in itertools.pairwise(labels):
                assert COUNTERCLOCKWISE.index(after) == (COUNTERCLOCKWISE.index(here) + 1) % 8
            # Regardless of wagers, the dealer and the Dead Hand are dealt (621a.8(d)).
            assert "dealer" in labels
            assert "dead hand" in labels
            # Four tiles to each position.
            for delivery in plan.deliveries:
                assert sum(len(t.levels) for t in delivery.tiles) == 4
                # one item per stack within a delivery
                assert len({t.stack for t in delivery.tiles}) == len(delivery.tiles)
            # All 32 tiles delivered, each exactly once.
            taken = taking_order(plan)
            assert Counter(taken) == Counter(ALL_TILES)
            # From the top down: no tile is taken while one above it is still there (for
            # Dragon Head, stack 1's tiles lie above stack 3's; for Pin Say, the diagonal
            # tile above the three stacks it covers).
            gone: set[tuple[int, int]] = set()
            for t in taken:
                assert above[t] <= gone, (t, sorted(above[t] - gone))
                gone.add(t)


def test_the_physical_order_checked_is_the_rule_text_s() -> None:
    """What test_invariants_of_every_plan holds the plans to, stated tile by tile."""
    right = tiles_above("dragon-phoenix-right")
    assert right[(3, 1)] == {(1, 1), (1, 2), (1, 3), (1, 4)}  # stack 1 "directly on top" of 3
    assert right[(4, 2)] == {(2, 1), (2, 2), (2, 3), (2, 4), (4, 1)}
    assert right[(5, 3)] == {(5, 1), (5, 2)}  # the phoenix tail: stacks of four tiles
    left = tiles_above("dragon-phoenix-left")
    assert left[(6, 1)] == {(8, 1), (8, 2), (8, 3), (8, 4)}
    assert left[(5, 1)] == {(7, 1), (7, 2), (7, 3), (7, 4)}
    assert tiles_above("pin-say-right")[(2, 1)] == {(1, 1)}  # "placing it diagonally across"
    assert tiles_above("pin-say-right")[(1, 2)] == {(1, 1)}
    assert tiles_above("pin-say-left")[(5, 1)] == {(8, 1)}
    assert tiles_above("standard")[(1, 4)] == {(1, 1), (1, 2), (1, 3)}


@pytest.mark.parametrize("style", list(PICK_FOUR_PAIRS))
def test_a_pick_four_gives_the_tops_first_and_the_bottoms_to_the_next_position(
    style: str,
) -> None:
    """621a.9(2)-(5): "the top two tiles from each of the two stacks pushed forward to the
    starting position. The four remaining tiles pushed forward ... to the next position"."""
    hands = hands_of(plan_of(style, 9, None))
    for n in range(4):
        tops, bottoms = hands[2 * n], hands[2 * n + 1]
        assert {levels for _, levels in tops} == {(1, 2)}
        assert {levels for _, levels in bottoms} == {(3, 4)}
        assert [s for s, _ in tops] == [s for s, _ in bottoms]


@pytest.mark.parametrize("style", ["pin-say-right", "pin-say-left"])
def test_a_pin_say_gives_one_tile_of_each_of_four_stacks(style: str) -> None:
    """621a.9(6),(7): "the top tile from each of the first four stacks on the dealer's right",
    then "on the dealer's left", a tile lower each time round; the diagonal tile first."""
    hands = hands_of(plan_of(style, 9, None))
    near, far = (
        ([1, 2, 3, 4], [8, 7, 6, 5]) if style.endswith("right") else ([8, 7, 6, 5], [1, 2, 3, 4])
    )
    for n, hand in enumerate(hands):
        assert [s for s, _ in hand] == (near if n % 2 == 0 else far)
        assert [levels for _, levels in hand] == [(n // 2 + 1,)] * 4


def test_the_examples_of_621a_8_c() -> None:
    """ "(1) If the dice total nine, the dealer would receive the first stack of four tiles.
    (2) If the dice total 15, the sixth wagering position would receive the first stack"."""
    for style in RULE_TEXT:
        nine = plan_of(style, 9, None).deliveries[0]
        assert nine.position.label == "dealer"
        fifteen = plan_of(style, 15, None).deliveries[0]
        assert fifteen.position.label == "seat 6"
    standard = plan_of("standard", 9, None).deliveries[0]
    assert hands_of(plan_of("standard", 9, None))[0] == [whole(1)]
    assert standard.position.label == "dealer"


@pytest.mark.parametrize(
    ("bank_seat", "total", "first"),
    [
        # 621a.11(j): the bank is number one, "including the dealer" and "the Dead Hand".
        (3, 3, "seat 5"),
        (6, 3, "dealer"),  # seat 6 is one, the Dead Hand two, the dealer three
        (6, 2 + 8, "dead hand"),
        (1, 9, "seat 1"),  # once round the table of eight
        (5, 18, "seat 6"),
    ],
)
@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_the_bank_seat_is_number_one(bank_seat: int, total: int, first: str, style: str) -> None:
    plan = plan_of(style, total, bank_seat)
    assert plan.starting_position.label == first
    assert hands_of(plan)[0] == FIRST_TO_THE_STARTING_POSITION[style]
    assert plan.deliveries[0].position.label == first


@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_the_same_total_with_and_without_a_player_bank(style: str) -> None:
    """The same hands in the same order; only the position they start at moves. Total 5 is
    seat 4 when the dealer banks (621a.8(c): the dealer one, seats 1, 2, 3, 4), seat 6 when
    seat 2 banks (621a.11(j): seat 2 one, seats 3, 4, 5, 6); then counterclockwise."""
    dealer = plan_of(style, 5, None)
    seat_2 = plan_of(style, 5, 2)
    assert [d.position.label for d in dealer.deliveries] == [
        "seat 4",
        "seat 5",
        "seat 6",
        "dead hand",
        "dealer",
        "seat 1",
        "seat 2",
        "seat 3",
    ]
    assert [d.position.label for d in seat_2.deliveries] == [
        "seat 6",
        "dead hand",
        "dealer",
        "seat 1",
        "seat 2",
        "seat 3",
        "seat 4",
        "seat 5",
    ]
    assert hands_of(dealer) == hands_of(seat_2) == RULE_TEXT[style][1]


@pytest.mark.parametrize("style", list(DeliveryStyle))
def test_pai_gow_poker_has_no_delivery_styles(style: DeliveryStyle) -> None:
    with pytest.raises(GameRuleError, match="Pai Gow Poker"):
        dealing_plan(Game.POKER, style, Position(0))


def test_a_position_not_at_the_tiles_table_is_refused() -> None:
    with pytest.raises(GameRuleError):
        dealing_plan(Game.TILES, DeliveryStyle.STANDARD, Position(8))


def test_the_plan_is_immutable() -> None:
    plan = plan_of("cup-say-left", 4, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.style = DeliveryStyle.STANDARD  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.deliveries[0].tiles[0].stack = 3  # type: ignore[misc]
    assert isinstance(plan.deliveries, tuple)
    assert isinstance(plan.deliveries[0].tiles, tuple)


def test_each_style_names_its_section() -> None:
    assert [s.section for s in DeliveryStyle] == [
        "621a.8(d)",
        "621a.9(1)",
        "621a.9(2)",
        "621a.9(3)",
        "621a.9(4)",
        "621a.9(5)",
        "621a.9(6)",
        "621a.9(7)",
        "621a.9(8)",
        "621a.9(9)",
    ]
    assert {s.value: s.section for s in DeliveryStyle} == SECTIONS


def test_the_values_in_audit_records_are_unchanged() -> None:
    """621a.11(i): the style chosen is recorded by its value; old records must still read."""
    assert [s.value for s in DeliveryStyle][:5] == [
        "standard",
        "house-way-left",
        "cup-say-right",
        "cup-say-left",
        "jung-quat",
    ]


def test_hands_in_dealing_order_is_the_plan_from_any_start() -> None:
    for style in DeliveryStyle:
        hands = [[(t.stack, t.levels) for t in hand] for hand in hands_in_dealing_order(style)]
        assert hands == RULE_TEXT[style.value][1]


# --- tiles of a stack ---------------------------------------------------------------------------


@given(
    stack=st.integers(min_value=-2, max_value=11),
    levels=st.lists(st.integers(min_value=-1, max_value=6), max_size=6),
)
def test_stack_tiles_hold_a_stack_and_its_levels_top_first(stack: int, levels: list[int]) -> None:
    """A stack 1..8 and levels 1..4, at least one, distinct and increasing; anything else is
    refused, never stored."""
    valid = (
        1 <= stack <= 8
        and len(levels) > 0
        and all(1 <= n <= 4 for n in levels)
        and all(a < b for a, b in itertools.pairwise(levels))
    )
    if valid:
        t = StackTiles(stack, tuple(levels))
        assert t.as_record() == {"stack": stack, "levels": levels}
    else:
        with pytest.raises(GameRuleError):
            StackTiles(stack, tuple(levels))


@pytest.mark.parametrize(
    ("stack", "levels"),
    [(True, (1,)), (1, (True,)), (1.0, (1,)), (1, [1, 2]), ("1", (1,)), (1, (2, 1)), (1, (2, 2))],
)
def test_stack_tiles_refuse_what_is_not_a_stack_and_levels(stack: Any, levels: Any) -> None:
    with pytest.raises(GameRuleError):
        StackTiles(stack, levels)


@given(
    items=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=8),
            st.sets(st.integers(min_value=1, max_value=4), min_size=1),
        ),
        max_size=5,
    )
)
def test_a_delivery_is_four_tiles(items: list[tuple[int, set[int]]]) -> None:
    """621a.11(k): "the first four tiles" to each position; a delivery of any other number
    is refused."""
    tiles = tuple(StackTiles(s, tuple(sorted(levels))) for s, levels in items)
    if sum(len(levels) for _, levels in items) == 4:
        assert Delivery(DEALER, tiles).tiles == tiles
    else:
        with pytest.raises(GameRuleError, match=r"621a\.11\(k\)"):
            Delivery(DEALER, tiles)


# --- the command line ---------------------------------------------------------------------------


def test_deal_plan_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "deal-plan", "--style", "cup-say-left", "--total", "15")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert list(doc) == ["style", "section", "starting_position", "plan"]
    assert doc["style"] == "cup-say-left"
    assert doc["section"] == "621a.9(3)"
    assert doc["starting_position"] == "seat 6"
    assert doc["plan"][0] == {
        "position": "seat 6",
        "tiles": [{"stack": 8, "levels": [1, 2]}, {"stack": 7, "levels": [1, 2]}],
    }
    assert doc["plan"][1] == {
        "position": "dead hand",
        "tiles": [{"stack": 8, "levels": [3, 4]}, {"stack": 7, "levels": [3, 4]}],
    }
    assert [d["position"] for d in doc["plan"]] == [
        "seat 6",
        "dead hand",
        "dealer",
        "seat 1",
        "seat 2",
        "seat 3",
        "seat 4",
        "seat 5",
    ]
    for delivery in doc["plan"]:
        assert list(delivery) == ["position", "tiles"]
        for tile in delivery["tiles"]:
            assert list(tile) == ["stack", "levels"]


def test_deal_plan_prints_a_new_style_tile_by_tile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "deal-plan", "--style", "dragon-phoenix-right", "--total", "4", "--bank-seat", "6"
    )
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["section"] == "621a.9(8)"
    assert doc["starting_position"] == "seat 1"  # seat 6, the Dead Hand, the dealer, seat 1
    assert doc["plan"][:2] == [
        {
            "position": "seat 1",
            "tiles": [{"stack": 1, "levels": [1, 2]}, {"stack": 2, "levels": [1, 2]}],
        },
        {
            "position": "seat 2",
            "tiles": [{"stack": s, "levels": [1]} for s in (8, 7, 6, 5)],
        },
    ]


@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_deal_plan_for_every_total_and_bank(capsys: pytest.CaptureFixture[str], style: str) -> None:
    for total in TOTALS:
        for bank_seat in BANKS:
            bank = [] if bank_seat is None else ["--bank-seat", str(bank_seat)]
            code, out, _ = run(capsys, "deal-plan", "--style", style, "--total", str(total), *bank)
            assert code == 0
            assert json.loads(out) == expected_record(style, total, bank_seat), (total, bank_seat)


def test_deal_plan_labels_are_those_of_position(capsys: pytest.CaptureFixture[str]) -> None:
    for total in TOTALS:
        _, out, _ = run(capsys, "position", "--game", "tiles", "--total", str(total))
        label = json.loads(out)["label"]
        _, out, _ = run(capsys, "deal-plan", "--style", "standard", "--total", str(total))
        assert json.loads(out)["starting_position"] == label


@pytest.mark.parametrize(
    "argv",
    [
        ["--style", "dragon-phoenix", "--total", "9"],  # which side?
        ["--style", "pin-say", "--total", "9"],
        ["--style", "chee yee", "--total", "9"],
        ["--style", "621a.9(5)", "--total", "9"],
        ["--style", "", "--total", "9"],
        ["--style", "STANDARD", "--total", "9"],
        ["--total", "9"],
        ["--style", "standard"],
        ["--style", "standard", "--total", "2"],
        ["--style", "standard", "--total", "19"],
        ["--style", "standard", "--total", "0"],
        ["--style", "standard", "--total", "\u0663"],  # ARABIC-INDIC DIGIT THREE
        ["--style", "standard", "--total", "1_5"],
        ["--style", "standard", "--total", "9" * 5000],
        ["--style", "standard", "--total", "9", "--bank-seat", "0"],
        ["--style", "standard", "--total", "9", "--bank-seat", "7"],
        ["--style", "standard", "--total", "9", "--bank-seat", "\u00b2"],
        ["--style", "standard", "--total", "9", "--game", "poker"],
        ["--style", "standard", "--total", "9", "a\nb"],
    ],
)
def test_deal_plan_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, "deal-plan", *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.endswith("\n")
    assert err.startswith("paigow-controller: ")
    assert "Traceback" not in err


def test_deal_plan_help_describes_and_gives_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "deal-plan", "--help")
    assert code == 0
    assert "621a.9" in out
    assert "621a.8(d)" in out
    assert "paigow-controller deal-plan --style" in out
    assert '"levels"' in out
    lines = out.splitlines()
    for style, section in SECTIONS.items():
        # each style on a line of its own with its section
        assert any(line.split()[:2] == [style, section] for line in lines if line.strip()), style


def test_a_rule_error_is_a_controller_error() -> None:
    with pytest.raises(ControllerError):
        dealing_plan(Game.POKER, DeliveryStyle.STANDARD, Position(1))
