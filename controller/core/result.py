"""A round's result: the number that decides the starting position, and the side wagers.

Used by the round state machine, by the command line, and by log verification, which
recomputes every recorded result from its dice (so there is one place that decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.core.dice import Roll
from controller.core.position import Game, Position, starting_position
from controller.core.wagers import Paytable, WagerOutcomes, outcomes, payouts


@dataclass(frozen=True, slots=True)
class RoundResult:
    """``roll`` is None only for an RNG draw in ``position`` mode, where ``count`` is the number
    the RNG selected; otherwise ``count`` is the dice total. ``wagers`` is None where no dice
    side wager is settled: current 621a.5(e)(2)-(4) define Sum, Match and Beat It on the dice in
    the manual or player-activated shaker, so an RNG's virtual dice settle none."""

    game: Game
    count: int
    bank_seat: int | None
    position: Position
    roll: Roll | None
    wagers: WagerOutcomes | None
    payouts: dict[str, dict[str, object]]

    def as_record(self) -> dict[str, object]:
        record: dict[str, object] = {
            "game": str(self.game),
            "count": self.count,
            "bank": bank_label(self.bank_seat),
            "starting_position": self.position.label,
        }
        if self.roll is not None:
            record["dice"] = self.roll.as_record()
            record["total"] = self.roll.total
        if self.wagers is not None:
            record["wagers"] = self.wagers.as_record()
            record["payouts"] = self.payouts
        return record


def bank_label(bank_seat: int | None) -> str:
    """How a record and the display name the bank: the dealer, or the banking seat."""
    return "dealer" if bank_seat is None else f"seat {bank_seat}"


def result_of_roll(
    game: Game,
    roll: Roll,
    *,
    bank_seat: int | None,
    paytables: Sequence[Paytable],
    settles_wagers: bool = True,
) -> RoundResult:
    """Current 621a.6(b),(c): the dice settle the side wagers, and their total sets the count.
    ``settles_wagers`` False: the RNG's virtual dice (current 621a.5(e)(2)-(4): the side
    wagers are the physical dice's), which set the count and nothing else."""
    position = starting_position(game, roll.total, bank_seat=bank_seat)
    if not settles_wagers:
        return RoundResult(game, roll.total, bank_seat, position, roll, None, {})
    wagers = outcomes(roll)
    return RoundResult(
        game, roll.total, bank_seat, position, roll, wagers, payouts(wagers, paytables)
    )


def result_of_number(game: Game, number: int, *, bank_seat: int | None) -> RoundResult:
    """621a.8(a)(1): the RNG "selects and displays a number", counted like a dice total."""
    position = starting_position(game, number, bank_seat=bank_seat)
    return RoundResult(game, number, bank_seat, position, None, None, {})
