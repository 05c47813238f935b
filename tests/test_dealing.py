"""The dealing plan against the rule text: 621a.8(c),(d), 621a.9(1)-(4), 621a.11(i),(j),(k).

The expectations are written here from the sentences of the rules, not computed the way
controller/core/dealing.py computes them: each style is a literal table of the hands in dealing
order, next to the sentence it comes from, and the positions come from a count written out as
the text words it. Every style x total 3..18 x bank (the dealer, or seats 1..6) is checked
against the table and against the invariants the text implies.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter

import pytest
from test_cli import run

from controller.core.dealing import DealingPlan, DeliveryStyle, dealing_plan
from controller.core.position import Game, Position, starting_position
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
# stack 8 the first on the dealer's left. A hand is what one position receives, as
# (stack, part) pairs; within a hand the stacks are listed in the order they were pushed
# forward (from the side the style starts at).
def whole(stack: int) -> tuple[int, str]:
    return (stack, "whole")


def top(stack: int) -> tuple[int, str]:
    return (stack, "top")


def bottom(stack: int) -> tuple[int, str]:
    return (stack, "bottom")


Hand = list[tuple[int, str]]

# Each style's sentences, and the hands they give in dealing order (the starting position's first).
RULE_TEXT: dict[str, tuple[str, list[Hand]]] = {
    "standard": (
        # 621a.8(d)
        "The dealer shall deal the first stack of four tiles, starting from the right side of the"
        " eight stacks, to the starting position and, moving counterclockwise around the table,"
        " deal all other positions including the Dead Hand and the dealer a stack of tiles",
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
}

# The sentences above, reduced to what a reader checks first.
FIRST_TO_THE_STARTING_POSITION = {
    "standard": [whole(1)],  # "starting from the right side"
    "house-way-left": [whole(8)],  # "the first stack of tiles on the dealer's left"
    "cup-say-right": [top(1), top(2)],  # "the first two stacks ... on the dealer's right"
    "cup-say-left": [top(8), top(7)],  # "the first two stacks ... on the dealer's left"
    "jung-quat": [top(4), top(5)],  # "the fourth stack ... from the dealer's right and ... left"
}
# The two stacks each pick-four takes, in turn (621a.9(2)-(4)).
PICK_FOUR_PAIRS = {
    "cup-say-right": [{1, 2}, {3, 4}, {5, 6}, {7, 8}],  # "from the dealer's right to left"
    "cup-say-left": [{8, 7}, {6, 5}, {4, 3}, {2, 1}],  # "from the dealer's left to right"
    "jung-quat": [{4, 5}, {3, 6}, {2, 7}, {1, 8}],  # "the two new center stacks"
}
TILES_IN = {"whole": 4, "top": 2, "bottom": 2}


def test_every_style_of_the_issue_has_a_rule_text() -> None:
    assert [s.value for s in DeliveryStyle] == list(RULE_TEXT)
    assert set(RULE_TEXT) == set(FIRST_TO_THE_STARTING_POSITION)


def test_the_tables_agree_with_their_summaries() -> None:
    """The two ways the sentences were written down say the same thing."""
    for name, (_, hands) in RULE_TEXT.items():
        assert hands[0] == FIRST_TO_THE_STARTING_POSITION[name]
    for name, pairs in PICK_FOUR_PAIRS.items():
        hands = RULE_TEXT[name][1]
        for n, pair in enumerate(pairs):
            assert {s for s, _ in hands[2 * n]} == pair
            assert {s for s, _ in hands[2 * n + 1]} == pair


def plan_of(style: str, total: int, bank_seat: int | None) -> DealingPlan:
    start = starting_position(Game.TILES, total, bank_seat=bank_seat)
    return dealing_plan(Game.TILES, DeliveryStyle(style), start)


def hands_of(plan: DealingPlan) -> list[Hand]:
    return [[(t.stack, t.part.value) for t in d.tiles] for d in plan.deliveries]


def expected_record(style: str, total: int, bank_seat: int | None) -> dict[str, object]:
    """The JSON the issue asks for, from the count and the rule text alone."""
    start = counted_start(total, bank_seat)
    first = COUNTERCLOCKWISE.index(start)
    # 621a.8(d), 621a.11(k): "moving counterclockwise around the table, deal all other
    # positions including the Dead Hand and the dealer".
    order = [COUNTERCLOCKWISE[(first + k) % 8] for k in range(8)]
    return {
        "style": style,
        "starting_position": start,
        "plan": [
            {"position": p, "tiles": [{"stack": s, "part": part} for s, part in hand]}
            for p, hand in zip(order, RULE_TEXT[style][1], strict=True)
        ],
    }


@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_every_total_and_bank_agrees_with_the_rule_text(style: str) -> None:
    for total in TOTALS:
        for bank_seat in BANKS:
            plan = plan_of(style, total, bank_seat)
            assert plan.as_record() == expected_record(style, total, bank_seat), (total, bank_seat)


@pytest.mark.parametrize("style", list(RULE_TEXT))
def test_invariants_of_every_plan(style: str) -> None:
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
                assert sum(TILES_IN[t.part.value] for t in delivery.tiles) == 4
            # All 32 tiles delivered once: every half of every stack exactly once.
            halves: Counter[tuple[int, str]] = Counter()
            for delivery in plan.deliveries:
                for t in delivery.tiles:
                    parts = ("top", "bottom") if t.part.value == "whole" else (t.part.value,)
                    halves.update((t.stack, part) for part in parts)
            assert halves == Counter({(s, p): 1 for s in range(1, 9) for p in ("top", "bottom")})


@pytest.mark.parametrize("style", list(PICK_FOUR_PAIRS))
def test_a_pick_four_gives_the_tops_first_and_the_bottoms_to_the_next_position(
    style: str,
) -> None:
    """621a.9(2)-(4): "the top two tiles from each of the two stacks pushed forward to the
    starting position. The four remaining tiles pushed forward ... to the next position"."""
    hands = hands_of(plan_of(style, 9, None))
    for n in range(4):
        tops, bottoms = hands[2 * n], hands[2 * n + 1]
        assert {p for _, p in tops} == {"top"}
        assert {p for _, p in bottoms} == {"bottom"}
        assert [s for s, _ in tops] == [s for s, _ in bottoms]


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
def test_the_bank_seat_is_number_one(bank_seat: int, total: int, first: str) -> None:
    plan = plan_of("jung-quat", total, bank_seat)
    assert plan.starting_position.label == first
    assert hands_of(plan)[0] == [top(4), top(5)]


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
    ]


# --- the command line ---------------------------------------------------------------------------


def test_deal_plan_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "deal-plan", "--style", "cup-say-left", "--total", "15")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert list(doc) == ["style", "starting_position", "plan"]
    assert doc["style"] == "cup-say-left"
    assert doc["starting_position"] == "seat 6"
    assert doc["plan"][0] == {
        "position": "seat 6",
        "tiles": [{"stack": 8, "part": "top"}, {"stack": 7, "part": "top"}],
    }
    assert doc["plan"][1] == {
        "position": "dead hand",
        "tiles": [{"stack": 8, "part": "bottom"}, {"stack": 7, "part": "bottom"}],
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
            assert list(tile) == ["stack", "part"]


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
        ["--style", "chee-yee", "--total", "9"],  # 621a.9(5): not offered
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
    for style in RULE_TEXT:
        assert style in out


def test_a_rule_error_is_a_controller_error() -> None:
    with pytest.raises(ControllerError):
        dealing_plan(Game.POKER, DeliveryStyle.STANDARD, Position(1))
