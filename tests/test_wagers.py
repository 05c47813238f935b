"""Dice side wagers: Sum, Match, Beat It (current 621a.5(e)(2)-(4); 645c.2)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.dice import Roll
from controller.wagers import (
    BeatItCondition,
    Odds,
    Paytable,
    SumCondition,
    Wager,
    all_rolls,
    beat_it_margin,
    outcomes,
    payouts,
    paytable_figures,
    sum_paytable_a,
    sum_paytable_b,
)

faces = st.integers(1, 6)
rolls = st.builds(lambda r, b1, b2: Roll(r, (b1, b2)), faces, faces, faces)


def roll(red: int, blue1: int, blue2: int) -> Roll:
    return Roll(red, (blue1, blue2))


# --- the rule text's own examples -------------------------------------------------------------


def test_beat_it_red_example() -> None:
    # 621a.5(e)(4)(i): red 6, blue 2 and 1 (total 3) wins.
    assert outcomes(roll(6, 2, 1)).beat_it[BeatItCondition.RED]


def test_beat_it_any_example() -> None:
    # 621a.5(e)(4)(ii): 5, 1 and 1: 5 - (1 + 1) = 3 wins.
    assert outcomes(roll(5, 1, 1)).beat_it[BeatItCondition.ANY]
    assert outcomes(roll(1, 5, 1)).beat_it[BeatItCondition.ANY]


def test_match_example() -> None:
    # 621a.5(e)(3): a Match on 1 wins if two or three dice show a 1.
    assert outcomes(roll(1, 1, 4)).match[1] == 2
    assert outcomes(roll(1, 1, 1)).match[1] == 3
    assert outcomes(roll(1, 2, 4)).match[1] == 1


def test_series_examples() -> None:
    # 621a.5(e)(2)(iv): "such as a 1, 2 and 3, or 3, 4 and 5"
    assert outcomes(roll(1, 2, 3)).sum[SumCondition.SERIES]
    assert outcomes(roll(5, 3, 4)).sum[SumCondition.SERIES]
    assert not outcomes(roll(1, 2, 4)).sum[SumCondition.SERIES]
    assert not outcomes(roll(1, 1, 2)).sum[SumCondition.SERIES]


@pytest.mark.parametrize("total", [8, 16, 17])
def test_sum_8_16_17(total: int) -> None:
    matching = [r for r in all_rolls() if r.total == total]
    assert all(outcomes(r).sum[SumCondition.TOTAL_8_16_17] for r in matching)


@pytest.mark.parametrize("total", [3, 8, 9])
def test_sum_3_8_9(total: int) -> None:
    matching = [r for r in all_rolls() if r.total == total]
    assert all(outcomes(r).sum[SumCondition.TOTAL_3_8_9] for r in matching)


def test_pair_needs_at_least_two_matching() -> None:
    assert outcomes(roll(2, 2, 5)).sum[SumCondition.PAIR]
    assert outcomes(roll(6, 6, 6)).sum[SumCondition.PAIR]
    assert not outcomes(roll(2, 3, 5)).sum[SumCondition.PAIR]


def test_beat_it_any_window_is_one_to_four() -> None:
    assert outcomes(roll(6, 1, 1)).beat_it[BeatItCondition.ANY]  # 6 - (1 + 1) = 4
    assert beat_it_margin((6, 1, 1)) == 4
    assert beat_it_margin((3, 1, 1)) == 1
    assert beat_it_margin((2, 1, 1)) == 0
    assert not outcomes(roll(2, 1, 1)).beat_it[BeatItCondition.ANY]


# --- counts over the 216 outcomes (independent of the implementation) ---------------------


def test_counts_over_all_outcomes() -> None:
    results = [outcomes(r) for r in all_rolls()]
    assert len(results) == 216
    assert sum(r.sum[SumCondition.TOTAL_8_16_17] for r in results) == 21 + 6 + 3
    assert sum(r.sum[SumCondition.TOTAL_3_8_9] for r in results) == 1 + 21 + 25
    assert sum(r.sum[SumCondition.PAIR] for r in results) == 216 - 6 * 5 * 4
    assert sum(r.sum[SumCondition.SERIES] for r in results) == 4 * 6
    # red >= b1 + b2: for red r, pairs of blues with sum <= r
    expected_red = sum(1 for r, b1, b2 in itertools.product(range(1, 7), repeat=3) if r >= b1 + b2)
    assert sum(r.beat_it[BeatItCondition.RED] for r in results) == expected_red == 35


@given(rolls)
def test_match_counts_add_up_to_three(r: Roll) -> None:
    counts = outcomes(r).match
    assert sum(counts.values()) == 3
    assert set(counts) == set(range(1, 7))


@given(rolls)
def test_outcomes_agree_with_a_second_reading_of_the_rule(r: Roll) -> None:
    faces_ = list(r.faces)
    total = sum(faces_)
    o = outcomes(r)
    assert o.sum[SumCondition.TOTAL_8_16_17] == (total in {8, 16, 17})
    assert o.sum[SumCondition.TOTAL_3_8_9] == (total in {3, 8, 9})
    assert o.sum[SumCondition.PAIR] == (len(set(faces_)) < 3)
    ordered = sorted(faces_)
    assert o.sum[SumCondition.SERIES] == (ordered[1] == ordered[0] + 1 == ordered[2] - 1)
    assert o.beat_it[BeatItCondition.RED] == (r.red >= r.blue[0] + r.blue[1])
    any_beats = any(1 <= faces_[i] - (total - faces_[i]) <= 4 for i in range(3))
    assert o.beat_it[BeatItCondition.ANY] == any_beats


@given(rolls)
def test_blue_order_does_not_matter(r: Roll) -> None:
    swapped = Roll(r.red, (r.blue[1], r.blue[0]))
    assert outcomes(r).sum == outcomes(swapped).sum
    assert outcomes(r).beat_it == outcomes(swapped).beat_it


# --- paytables -------------------------------------------------------------------------------


def test_sum_paytable_a_pays_as_645c2g() -> None:
    table = sum_paytable_a()
    assert table.settle(outcomes(roll(6, 6, 5))) == Odds(25)  # 17
    assert table.settle(outcomes(roll(6, 5, 5))) == Odds(6)  # 16
    assert table.settle(outcomes(roll(2, 3, 3))) == Odds(3)  # 8
    assert table.settle(outcomes(roll(2, 3, 4))) is None  # 9


def test_sum_paytable_b_pays_as_645c2g() -> None:
    table = sum_paytable_b()
    assert table.settle(outcomes(roll(1, 1, 1))) == Odds(25)  # 3
    assert table.settle(outcomes(roll(2, 3, 3))) == Odds(4)  # 8
    assert table.settle(outcomes(roll(2, 3, 4))) == Odds(2)  # 9
    assert table.settle(outcomes(roll(6, 6, 6))) is None


def test_exact_figures_of_the_shipped_paytables() -> None:
    a = paytable_figures(sum_paytable_a())
    assert a.hits == 30
    assert a.hit_frequency == Fraction(30, 216)
    # (25*3 + 6*6 + 3*21 - 186) / 216 = -12/216
    assert a.house_edge == Fraction(12, 216)
    b = paytable_figures(sum_paytable_b())
    assert b.hits == 47
    # (25*1 + 4*21 + 2*25 - 169) / 216 = -10/216
    assert b.house_edge == Fraction(10, 216)
    report = a.as_report()
    assert report["hit_frequency"] == "5/36"
    assert report["house_edge_percent"] == "5.5556"


def test_match_paytable_settles_each_value() -> None:
    table = Paytable("M", Wager.MATCH, None, {"two": Odds(2), "three": Odds(12)})
    settled = payouts(outcomes(roll(4, 4, 2)), [table])["M"]
    by_value = settled["by_value"]
    assert isinstance(by_value, dict)
    assert by_value["4"] == {"wins": True, "outcome": "two", "pays": "2 to 1"}
    assert by_value["2"] == {"wins": False, "outcome": None, "pays": None}
    figures = paytable_figures(table)
    # P(exactly two 1s) = 15/216, P(three) = 1/216
    assert figures.hits == 16
    assert figures.house_edge == Fraction(200 - 30 - 12, 216)


def test_possible_keys() -> None:
    assert sum_paytable_a().possible_keys() == {"8", "16", "17"}
    pair = Paytable("P", Wager.SUM, str(SumCondition.PAIR), {})
    assert pair.possible_keys() == {"pair", "triple"}
    assert Paytable("M", Wager.MATCH, None, {}).possible_keys() == {"two", "three"}
    beat = Paytable("X", Wager.BEAT_IT, str(BeatItCondition.ANY), {})
    assert beat.possible_keys() == {"win"}
