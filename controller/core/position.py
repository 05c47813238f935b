"""Who receives the first stack: the starting position, and the player-bank rules.

Pure: no I/O. The count and the bank rules come from the rule texts in shared/regulations.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from controller.errors import BankRuleError, GameRuleError

BETTING_POSITIONS = 6


class Game(StrEnum):
    TILES = "tiles"  # Pai Gow, 621a
    POKER = "poker"  # Pai Gow Poker, 645a


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A place at the table: the dealer (index 0), seat 1..6, or the Dead Hand (index 7)."""

    index: int

    @property
    def label(self) -> str:
        if self.index == 0:
            return "dealer"
        if self.index == BETTING_POSITIONS + 1:
            return "dead hand"
        return f"seat {self.index}"

    @property
    def is_dead_hand(self) -> bool:
        return self.index == BETTING_POSITIONS + 1


DEALER = Position(0)
DEAD_HAND = Position(BETTING_POSITIONS + 1)


def seat(number: int) -> Position:
    """Betting position ``number`` (1..6), counted counterclockwise from the dealer."""
    if not 1 <= number <= BETTING_POSITIONS:
        raise GameRuleError(f"seat {number} is not 1..{BETTING_POSITIONS}")
    return Position(number)


def table_cycle(game: Game) -> tuple[Position, ...]:
    """The positions in counterclockwise order, starting at the dealer.

    621a.8(c) (current 621a.6(c)): the dealer, each betting position whether or not it holds a
    wager, and the Dead Hand: a cycle of 8 for tiles. Pai Gow Poker has no Dead Hand: 7.
    """
    seats = tuple(Position(i) for i in range(1, BETTING_POSITIONS + 1))
    if game is Game.TILES:
        return (DEALER, *seats, DEAD_HAND)
    return (DEALER, *seats)


def starting_position(game: Game, count: int, *, bank_seat: int | None = None) -> Position:
    """The position that receives the first stack for a dice total or an RNG number.

    621a.8(c): count counterclockwise with the dealer as number one until the count equals the
    number (total 9 -> the dealer; 15 -> the sixth betting position).
    621a.11(j) / 645a.12: when a player banks, the bank's position is number one and the count
    goes on around the table, the dealer (and for tiles the Dead Hand) included.
    """
    if count < 1:
        raise GameRuleError(f"count {count} is below 1")
    cycle = table_cycle(game)
    first = 0 if bank_seat is None else seat(bank_seat).index
    return cycle[(first + count - 1) % len(cycle)]


@dataclass(frozen=True, slots=True)
class BankHistory:
    """What the bank rules need to know about past rounds since the last shuffle."""

    rounds_since_shuffle: int = 0
    last_bank_seat: int | None = None

    def check(self, bank_seat: int | None) -> None:
        """Refuse a bank selection that 621a.11(b),(c) / 645a.12(b),(c) forbid."""
        if bank_seat is None:
            return
        seat(bank_seat)
        # 621a.11(b), 645a.12(b): no player banks the first round after a shuffle.
        if self.rounds_since_shuffle == 0:
            raise BankRuleError(
                f"seat {bank_seat} may not bank the first round after a shuffle (621a.11(b))",
                rule="after_shuffle",
                seat=bank_seat,
            )
        # 621a.11(c), 645a.12(c): no player banks two consecutive rounds.
        if self.last_bank_seat == bank_seat:
            raise BankRuleError(
                f"seat {bank_seat} banked the previous round and may not bank two in a row"
                " (621a.11(c))",
                rule="twice_in_a_row",
                seat=bank_seat,
            )

    def after_round(self, bank_seat: int | None) -> BankHistory:
        """The history once a round with ``bank_seat`` has been played (closed or voided)."""
        return BankHistory(self.rounds_since_shuffle + 1, bank_seat)

    @staticmethod
    def after_shuffle() -> BankHistory:
        return BankHistory()
