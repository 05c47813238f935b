"""Starting position and bank rules (621a.8(c), 621a.11(b),(c),(j), 645a.12)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.position import (
    DEAD_HAND,
    DEALER,
    BankHistory,
    Game,
    Position,
    seat,
    starting_position,
    table_cycle,
)
from controller.errors import BankRuleError, GameRuleError


def test_regulation_example_total_nine_is_the_dealer() -> None:
    # 621a.8(c)(1): "If the dice total nine, the dealer would receive the first stack."
    assert starting_position(Game.TILES, 9) == DEALER


def test_regulation_example_total_fifteen_is_the_sixth_position() -> None:
    # 621a.8(c)(2): "If the dice total 15, the sixth wagering position would receive ..."
    assert starting_position(Game.TILES, 15) == seat(6)


def test_tiles_count_goes_dealer_seats_then_dead_hand() -> None:
    labels = [starting_position(Game.TILES, n).label for n in range(1, 9)]
    assert labels == ["dealer", *(f"seat {i}" for i in range(1, 7)), "dead hand"]


def test_poker_has_no_dead_hand() -> None:
    labels = [starting_position(Game.POKER, n).label for n in range(1, 8)]
    assert labels == ["dealer", *(f"seat {i}" for i in range(1, 7))]
    assert all(not starting_position(Game.POKER, n).is_dead_hand for n in range(3, 19))


@pytest.mark.parametrize(
    ("total", "label"),
    [(3, "seat 2"), (8, "dead hand"), (10, "seat 1"), (16, "dead hand"), (17, "dealer"),
     (18, "seat 1")],
)  # fmt: skip
def test_tiles_totals(total: int, label: str) -> None:
    assert starting_position(Game.TILES, total).label == label


@pytest.mark.parametrize(
    ("total", "label"),
    [(3, "seat 2"), (7, "seat 6"), (8, "dealer"), (14, "seat 6"), (15, "dealer")],
)
def test_poker_totals(total: int, label: str) -> None:
    assert starting_position(Game.POKER, total).label == label


def test_bank_is_number_one_and_the_count_includes_the_dealer() -> None:
    # 621a.11(j): the bank's position is number one, the dealer and Dead Hand counted in order.
    assert starting_position(Game.TILES, 1, bank_seat=3) == seat(3)
    assert starting_position(Game.TILES, 5, bank_seat=3) == DEAD_HAND
    assert starting_position(Game.TILES, 6, bank_seat=3) == DEALER
    assert starting_position(Game.TILES, 9, bank_seat=3) == seat(3)
    # 645a.12: Pai Gow Poker, no Dead Hand.
    assert starting_position(Game.POKER, 5, bank_seat=3) == DEALER


@given(st.sampled_from(list(Game)), st.integers(3, 18), st.none() | st.integers(1, 6))
def test_each_total_lands_on_exactly_one_position(
    game: Game, total: int, bank_seat: int | None
) -> None:
    position = starting_position(game, total, bank_seat=bank_seat)
    assert [p for p in table_cycle(game) if p == position] == [position]


@given(st.sampled_from(list(Game)), st.integers(1, 200), st.none() | st.integers(1, 6))
def test_the_count_has_the_period_of_the_cycle(
    game: Game, count: int, bank_seat: int | None
) -> None:
    period = len(table_cycle(game))
    assert period == (8 if game is Game.TILES else 7)
    assert starting_position(game, count, bank_seat=bank_seat) == starting_position(
        game, count + period, bank_seat=bank_seat
    )


@given(st.sampled_from(list(Game)), st.none() | st.integers(1, 6))
def test_one_full_cycle_visits_every_position_once(game: Game, bank_seat: int | None) -> None:
    cycle = table_cycle(game)
    visited = [starting_position(game, n, bank_seat=bank_seat) for n in range(1, len(cycle) + 1)]
    assert sorted(visited) == sorted(cycle)


@given(st.integers(1, 6), st.integers(1, 50))
def test_a_bank_shifts_the_count_by_its_seat(bank_seat: int, count: int) -> None:
    cycle = table_cycle(Game.TILES)
    shifted = starting_position(Game.TILES, count + bank_seat, bank_seat=None)
    assert starting_position(Game.TILES, count, bank_seat=bank_seat) == shifted
    assert shifted in cycle


def test_counts_below_one_and_bad_seats_are_refused() -> None:
    with pytest.raises(GameRuleError):
        starting_position(Game.TILES, 0)
    with pytest.raises(GameRuleError, match="seat 7"):
        starting_position(Game.TILES, 9, bank_seat=7)
    with pytest.raises(GameRuleError):
        seat(0)


def test_labels() -> None:
    assert Position(0).label == "dealer"
    assert Position(7).label == "dead hand"
    assert seat(4).label == "seat 4"


class TestBankRules:
    def test_no_player_banks_the_first_round_after_a_shuffle(self) -> None:
        # 621a.11(b), 645a.12(b)
        with pytest.raises(BankRuleError, match="first round after a shuffle"):
            BankHistory.after_shuffle().check(2)

    def test_the_dealer_may_bank_the_first_round(self) -> None:
        BankHistory.after_shuffle().check(None)

    def test_no_player_banks_two_consecutive_rounds(self) -> None:
        # 621a.11(c), 645a.12(c)
        history = BankHistory.after_shuffle().after_round(None).after_round(4)
        with pytest.raises(BankRuleError, match="two in a row"):
            history.check(4)
        history.check(5)

    def test_a_player_may_bank_again_after_a_round_between(self) -> None:
        history = BankHistory.after_shuffle().after_round(None).after_round(4).after_round(None)
        history.check(4)

    def test_a_shuffle_starts_the_rules_again(self) -> None:
        history = BankHistory.after_shuffle().after_round(None)
        history.check(1)
        with pytest.raises(BankRuleError):
            BankHistory.after_shuffle().check(1)

    def test_bank_rule_errors_are_value_errors(self) -> None:
        with pytest.raises(ValueError, match="bank"):
            BankHistory().check(1)
