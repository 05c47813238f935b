"""How long dice and tiles may stay on the table (proposed 621a.5(c): 24 hours for the dice;
621a.3(e): the tiles changed at least every 12 hours), in the table's time, and the checks of
the ids a person types for them. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.table_types import (
    DICE_LIFE_MS,
    DICE_WARNING_MS,
    MAX_DICE_SET_ID,
    MAX_EMPLOYEE_ID,
    TILE_LIFE_MS,
    TILE_WARNING_MS,
    Refusal,
    RoundContext,
)
from controller.errors import GameRuleError


def age_of(table_ms: int, since_table: int | None, since_wall: int | None, wall: int | None) -> int:
    """How long something has been on the table: the table's time since it was put in, and
    never less than the wall clock says (either may be unknown: a set recorded by an older
    version has no table time, an event without a wall clock has no wall time; with both
    unknown it counts as expired: dice and tiles life fails closed)."""
    ages = []
    if since_table is not None:
        ages.append(max(0, table_ms - since_table))
    if since_wall is not None and wall is not None:
        ages.append(max(0, wall - since_wall))
    return max(ages) if ages else _EXPIRED


_EXPIRED = 2**62  # an age past any life


@dataclass(frozen=True, slots=True)
class Life:
    """A limit on how long a thing stays on the table: the dice in the shaker (proposed
    621a.5(c): 24 hours) or a set of tiles (621a.3(e): changed at least every 12 hours)."""

    life_ms: int
    warning_ms: int
    missing: str  # the refusal when none is recorded
    expired: str  # the refusal once its life is over
    warning: str  # the warning before, with {minutes}
    missing_code: Refusal
    expired_code: Refusal

    def age(self, ctx: RoundContext, wall: int | None) -> int | None:
        """None when nothing is recorded."""
        since_table, since_wall, present = self._of(ctx)
        if present is None:
            return None
        return age_of(ctx.table_ms, since_table, since_wall, wall)

    def _of(self, ctx: RoundContext) -> tuple[int | None, int | None, str | None]:
        if self is DICE_LIFE:
            return ctx.dice_since_table, ctx.dice_since, ctx.dice_set
        return ctx.tiles_since_table, ctx.tiles_since, ctx.tiles_set

    def minutes_left(self, ctx: RoundContext, wall: int | None) -> int | None:
        """From the warning on, the minutes left (0: its life is over); None before."""
        age = self.age(ctx, wall)
        if age is None or age < self.warning_ms:
            return None
        return max(0, -(-(self.life_ms - age) // 60_000))

    def notice(self, ctx: RoundContext, wall: int | None) -> str | None:
        """What the screens say: none recorded, over, or the warning; None while fine."""
        if self.age(ctx, wall) is None:
            return self.missing
        minutes = self.minutes_left(ctx, wall)
        if minutes is None:
            return None
        return self.expired if minutes == 0 else self.warning.format(minutes=minutes)

    def refusal(self, ctx: RoundContext, wall: int | None) -> tuple[Refusal, str] | None:
        """Why play may not go on with it (None: it may): none recorded, or its life over."""
        age = self.age(ctx, wall)
        if age is None:
            return self.missing_code, self.missing
        return (self.expired_code, self.expired) if age >= self.life_ms else None


DICE_LIFE = Life(
    DICE_LIFE_MS,
    DICE_WARNING_MS,
    missing="no dice set is recorded in the shaker: the supervisor records the dice put in",
    expired="the dice have been on the table 24 hours: the supervisor replaces them (621a.5(c))",
    warning="replace the dice within {minutes} min: 24 hours on the table (621a.5(c))",
    missing_code=Refusal.DICE_MISSING,
    expired_code=Refusal.DICE_EXPIRED,
)
TILES_LIFE = Life(
    TILE_LIFE_MS,
    TILE_WARNING_MS,
    missing=(
        "no set of tiles is inspected at this table: the dealer inspects one and the"
        " floorperson verifies it (621a.6(a))"
    ),
    expired="the tiles have been in play 12 hours: change them (621a.3(e))",
    warning="change the tiles within {minutes} min: 12 hours in play (621a.3(e))",
    missing_code=Refusal.TILES_MISSING,
    expired_code=Refusal.TILES_EXPIRED,
)


def check_dice_set_id(dice_set: str, *, what: str = "a dice set id") -> None:
    """A dice set's (or a tile set's) id: 1..16 ASCII letters, digits or "-" (it is shown and
    recorded)."""
    if not (
        0 < len(dice_set) <= MAX_DICE_SET_ID
        and dice_set.isascii()
        and all(c.isalnum() or c == "-" for c in dice_set)
    ):
        raise GameRuleError(
            f"{what} is 1 to {MAX_DICE_SET_ID} letters, digits or '-', not {dice_set[:20]!r}"
        )


def check_employee_id(employee: str) -> None:
    """An employee id: 1..16 ASCII letters and digits (it is recorded and shown)."""
    if not (0 < len(employee) <= MAX_EMPLOYEE_ID and employee.isascii() and employee.isalnum()):
        raise GameRuleError(
            f"an employee id is 1 to {MAX_EMPLOYEE_ID} ASCII letters and digits, not"
            f" {employee[:20]!r}"
        )
