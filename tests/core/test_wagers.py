"""Dice side wagers: Sum, Match, Beat It (current 621a.5(e)(2)-(4); 645c.2)."""

from __future__ import annotations

import hashlib
import itertools
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.dice import Roll
from controller.core.wagers import (
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


# --- every one of the 216 rolls, from a table written from the rule text ---------------------

TABLE = Path(__file__).resolve().parents[1] / "vectors" / "dice_side_wagers_216.txt"
TABLE_SHA256 = "84964c87ebb013529cce28d742227e81837c93fbfd1bb723f08785384f37f7b8"


def _table_rows() -> list[list[str]]:
    lines = TABLE.read_text(encoding="ascii").splitlines()
    return [line.split() for line in lines if not line.startswith("#")][1:]


def test_the_table_is_the_reviewed_one() -> None:
    assert hashlib.sha256(TABLE.read_bytes()).hexdigest() == TABLE_SHA256
    rows = _table_rows()
    assert len(rows) == 216
    assert {(int(r[0]), int(r[1]), int(r[2])) for r in rows} == set(
        itertools.product(range(1, 7), repeat=3)
    )


@pytest.mark.parametrize("row", _table_rows(), ids=lambda r: "-".join(r[:3]))
def test_every_roll_settles_as_the_table_says(row: list[str]) -> None:
    red, blue1, blue2, total = (int(v) for v in row[:4])
    flags = [v == "Y" for v in row[4:10]]
    matched = set() if row[10] == "-" else {int(v) for v in row[10].split(",")}
    o = outcomes(roll(red, blue1, blue2))
    assert roll(red, blue1, blue2).total == total
    assert [
        o.sum[SumCondition.TOTAL_8_16_17],
        o.sum[SumCondition.TOTAL_3_8_9],
        o.sum[SumCondition.PAIR],
        o.sum[SumCondition.SERIES],
        o.beat_it[BeatItCondition.RED],
        o.beat_it[BeatItCondition.ANY],
    ] == flags
    assert {value for value, count in o.match.items() if count >= 2} == matched


@given(rolls)
def test_match_counts_add_up_to_three(r: Roll) -> None:
    counts = outcomes(r).match
    assert sum(counts.values()) == 3
    assert set(counts) == set(range(1, 7))


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
