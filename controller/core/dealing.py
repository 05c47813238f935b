"""The dealing plan: which tiles each position receives, in dealing order, for a delivery style.

After "no more bets" the bank may choose a style of delivery (621a.11(i)); when it does not,
the dealer uses the standard procedure of 621a.8(d). The plan says, for each of the eight
positions from the starting position on, which stacks, or which halves of which stacks, it
receives, so that the display can show the dealer and surveillance where each stack goes.

The eight stacks of four tiles are numbered 1..8 from the dealer's right, as they lie when the
dealing begins (after any cut of 621a.11(g)). A pick-four style splits a stack in two: "top",
its top two tiles, and "bottom", the two under them. Within one position the tiles are listed
in the order the stacks were pushed forward (from the side the style starts at; for Jung
Quat, the stack nearer the dealer's right first).

Tiles only: Pai Gow Poker deals cards and has no delivery styles.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from controller.core.position import Game, Position, table_cycle
from controller.errors import GameRuleError

STACKS = 8  # 32 tiles in eight stacks of four (621a.6)


class DeliveryStyle(StrEnum):
    """The standard procedure of 621a.8(d) and the styles 621a.9(1)-(4) the table offers."""

    STANDARD = "standard"  # 621a.8(d); also when the bank chooses none (621a.11(i))
    HOUSE_WAY_LEFT = "house-way-left"  # 621a.9(1) House Way From the Left
    CUP_SAY_RIGHT = "cup-say-right"  # 621a.9(2) Cup Say (pick four) From the Right
    CUP_SAY_LEFT = "cup-say-left"  # 621a.9(3) Cup Say (pick four) From the Left
    JUNG_QUAT = "jung-quat"  # 621a.9(4) Jung Quat (take the heart)

    @property
    def section(self) -> str:
        """The section of the rule text that describes this style."""
        return _SECTIONS[self]


_SECTIONS = {
    DeliveryStyle.STANDARD: "621a.8(d)",
    DeliveryStyle.HOUSE_WAY_LEFT: "621a.9(1)",
    DeliveryStyle.CUP_SAY_RIGHT: "621a.9(2)",
    DeliveryStyle.CUP_SAY_LEFT: "621a.9(3)",
    DeliveryStyle.JUNG_QUAT: "621a.9(4)",
}


class Part(StrEnum):
    """What of a stack a position receives: all four tiles, or two of them."""

    WHOLE = "whole"
    TOP = "top"  # the top two tiles of the stack
    BOTTOM = "bottom"  # the two tiles under them

    @property
    def tiles(self) -> int:
        return 4 if self is Part.WHOLE else 2


@dataclass(frozen=True, slots=True)
class StackPart:
    """Stack ``stack`` (1..8 from the dealer's right), or its top or bottom half."""

    stack: int
    part: Part

    def __post_init__(self) -> None:
        if not 1 <= self.stack <= STACKS:
            raise GameRuleError(f"stack {self.stack} is not 1..{STACKS}")

    def as_record(self) -> dict[str, object]:
        return {"stack": self.stack, "part": self.part.value}


@dataclass(frozen=True, slots=True)
class Delivery:
    """The four tiles one position receives."""

    position: Position
    tiles: tuple[StackPart, ...]

    def as_record(self) -> dict[str, object]:
        return {"position": self.position.label, "tiles": [t.as_record() for t in self.tiles]}


@dataclass(frozen=True, slots=True)
class DealingPlan:
    """Every position of the table in dealing order, each with the tiles it receives."""

    style: DeliveryStyle
    starting_position: Position
    deliveries: tuple[Delivery, ...]

    def as_record(self) -> dict[str, object]:
        return {
            "style": self.style.value,
            "starting_position": self.starting_position.label,
            "plan": [d.as_record() for d in self.deliveries],
        }


_RIGHT_TO_LEFT = tuple(range(1, STACKS + 1))
_LEFT_TO_RIGHT = tuple(reversed(_RIGHT_TO_LEFT))


def _whole(stacks: Iterable[int]) -> tuple[tuple[StackPart, ...], ...]:
    return tuple((StackPart(stack, Part.WHOLE),) for stack in stacks)


def _pick_four(pairs: Iterable[tuple[int, int]]) -> tuple[tuple[StackPart, ...], ...]:
    """621a.9(2)-(4): "the top two tiles from each of the two stacks pushed forward" to one
    position, "the four remaining tiles pushed forward" to the next."""
    hands: list[tuple[StackPart, ...]] = []
    for first, second in pairs:
        hands.append((StackPart(first, Part.TOP), StackPart(second, Part.TOP)))
        hands.append((StackPart(first, Part.BOTTOM), StackPart(second, Part.BOTTOM)))
    return tuple(hands)


def _side_by_side(stacks: tuple[int, ...]) -> list[tuple[int, int]]:
    """The stacks two at a time, in the order given: the first two, then the next two, ..."""
    return [(stacks[i], stacks[i + 1]) for i in range(0, len(stacks), 2)]


def _centres(stacks: tuple[int, ...]) -> list[tuple[int, int]]:
    """621a.9(4): the two centre stacks, then, the rest pushed together, the two new centre
    stacks, until none is left."""
    remaining = list(stacks)
    pairs = []
    while remaining:
        middle = len(remaining) // 2
        pairs.append((remaining[middle - 1], remaining[middle]))
        del remaining[middle - 1 : middle + 1]
    return pairs


def hands_in_dealing_order(style: DeliveryStyle) -> tuple[tuple[StackPart, ...], ...]:
    """The eight hands of four tiles of ``style``, the starting position's first."""
    if style is DeliveryStyle.STANDARD:
        # 621a.8(d): the first stack "starting from the right side of the eight stacks" to the
        # starting position, then one stack to each position in turn.
        return _whole(_RIGHT_TO_LEFT)
    if style is DeliveryStyle.HOUSE_WAY_LEFT:
        # 621a.9(1): the first stack on the dealer's left to the starting position, "the
        # remaining stacks ... from the dealer's left to right".
        return _whole(_LEFT_TO_RIGHT)
    if style is DeliveryStyle.CUP_SAY_RIGHT:
        # 621a.9(2): the first two stacks on the dealer's right, tops to the starting position,
        # bottoms to the next; the rest "from the dealer's right to left in the same manner".
        return _pick_four(_side_by_side(_RIGHT_TO_LEFT))
    if style is DeliveryStyle.CUP_SAY_LEFT:
        # 621a.9(3): the same from the dealer's left, the rest from left to right.
        return _pick_four(_side_by_side(_LEFT_TO_RIGHT))
    # 621a.9(4): the two centre stacks (the fourth from the right and the fourth from the
    # left), tops to the starting position, bottoms to the next; then the new centre stacks.
    return _pick_four(_centres(_RIGHT_TO_LEFT))


def dealing_plan(game: Game, style: DeliveryStyle, start: Position) -> DealingPlan:
    """The plan for ``style`` from the starting position ``start`` (see starting_position).

    621a.8(d), 621a.11(k): the first four tiles to the starting position, then, moving
    counterclockwise, every other position, the Dead Hand and the dealer included, whether or
    not it holds a wager: eight positions, four tiles each.
    """
    if game is not Game.TILES:
        raise GameRuleError(
            f"{game.value}: delivery styles and the dealing plan are for Pai Gow tiles only"
            " (621a.8(d), 621a.9); Pai Gow Poker has none"
        )
    cycle = table_cycle(game)
    if start not in cycle:
        raise GameRuleError(f"position {start.index} is not a position of the tiles table")
    first = cycle.index(start)
    order = cycle[first:] + cycle[:first]
    hands = hands_in_dealing_order(style)
    return DealingPlan(
        style=style,
        starting_position=start,
        deliveries=tuple(Delivery(p, hand) for p, hand in zip(order, hands, strict=True)),
    )
