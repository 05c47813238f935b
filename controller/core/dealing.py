"""The dealing plan: which tiles each position receives, in dealing order, for a delivery style.

After "no more bets" the bank may choose a style of delivery (621a.11(i)); when it does not,
the dealer uses the standard procedure of 621a.8(d). The plan says, for each of the eight
positions from the starting position on, which tiles of which stacks it receives, so that the
display can show the dealer and surveillance where each tile goes.

The eight stacks of four tiles are numbered 1..8 from the dealer's right, as they lie when the
dealing begins (after any cut of 621a.11(g)); a tile is named by its stack and its level, 1
the stack's top tile and 4 its bottom tile. Dragon Head and Phoenix Tail piles two stacks on
two others before it deals (621a.9(8),(9)); its tiles keep the names of the stacks they came
from.

Each style is written below as the dealer's takes, turn by turn: so many tiles from the top of
the pile lying at a stack's place. Dealing them from piles of tiles, top first, gives the plan;
so every tile is taken from the top of what is left, and a style that took a tile twice, or
left one behind, fails when this module is imported.

Within one position's delivery the tiles are listed in the order the dealer takes them, and a
stack's tiles top first. The rule text does not say in which order the dealer picks up the
tiles of one delivery, so this module takes the order in which the text counts the stacks: a
group of stacks on the dealer's right from the dealer's right (1, 2, 3, 4), a group on the
dealer's left from the dealer's left ("the first four stacks on the dealer's left" are 8, 7,
6, 5); where the text names one stack on each side together (Jung Quat's two centre stacks,
Chee Yee's two ears), the one it names first, on the dealer's right. Pin Say's diagonal tile
lies across the top of the three stacks it came to cover, so it is taken before them.

Tiles only: Pai Gow Poker deals cards and has no delivery styles.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from controller.core.position import Game, Position, table_cycle
from controller.errors import GameRuleError

STACKS = 8  # 32 tiles in eight stacks of four (621a.6(d))
LEVELS = 4  # level 1 is a stack's top tile, 4 its bottom tile
TILES_PER_POSITION = 4  # "the first four tiles" (621a.11(k)), "a stack of tiles" (621a.8(d))


class DeliveryStyle(StrEnum):
    """The standard procedure of 621a.8(d) and the nine styles of 621a.9.

    The values are written in audit records (621a.11(i)): never change one."""

    STANDARD = "standard"  # 621a.8(d); also when the bank chooses none (621a.11(i))
    HOUSE_WAY_LEFT = "house-way-left"  # 621a.9(1) House Way From the Left
    CUP_SAY_RIGHT = "cup-say-right"  # 621a.9(2) Cup Say (pick four) From the Right
    CUP_SAY_LEFT = "cup-say-left"  # 621a.9(3) Cup Say (pick four) From the Left
    JUNG_QUAT = "jung-quat"  # 621a.9(4) Jung Quat (take the heart)
    CHEE_YEE = "chee-yee"  # 621a.9(5) Chee Yee (chop the ears)
    PIN_SAY_RIGHT = "pin-say-right"  # 621a.9(6) Pin Say (slice four) From the Right
    PIN_SAY_LEFT = "pin-say-left"  # 621a.9(7) Pin Say (slice four) From the Left
    DRAGON_PHOENIX_RIGHT = "dragon-phoenix-right"  # 621a.9(8) Dragon Head and Phoenix Tail (R)
    DRAGON_PHOENIX_LEFT = "dragon-phoenix-left"  # 621a.9(9) Dragon Head and Phoenix Tail (L)

    @property
    def section(self) -> str:
        """The section of the rule text that describes this style."""
        return _SECTIONS[self][0]

    @property
    def rule_name(self) -> str:
        """The style's name as its section gives it."""
        return _SECTIONS[self][1]


_SECTIONS = {
    DeliveryStyle.STANDARD: ("621a.8(d)", "the standard procedure"),
    DeliveryStyle.HOUSE_WAY_LEFT: ("621a.9(1)", "House Way From the Left"),
    DeliveryStyle.CUP_SAY_RIGHT: ("621a.9(2)", "Cup Say (pick four) From the Right"),
    DeliveryStyle.CUP_SAY_LEFT: ("621a.9(3)", "Cup Say (pick four) From the Left"),
    DeliveryStyle.JUNG_QUAT: ("621a.9(4)", "Jung Quat (take the heart)"),
    DeliveryStyle.CHEE_YEE: ("621a.9(5)", "Chee Yee (chop the ears)"),
    DeliveryStyle.PIN_SAY_RIGHT: ("621a.9(6)", "Pin Say (slice four) From the Right"),
    DeliveryStyle.PIN_SAY_LEFT: ("621a.9(7)", "Pin Say (slice four) From the Left"),
    DeliveryStyle.DRAGON_PHOENIX_RIGHT: (
        "621a.9(8)",
        "Dragon Head and Phoenix Tail From the Right",
    ),
    DeliveryStyle.DRAGON_PHOENIX_LEFT: ("621a.9(9)", "Dragon Head and Phoenix Tail From the Left"),
}


def _is_int(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool)


@dataclass(frozen=True, slots=True)
class StackTiles:
    """Tiles of one stack: stack ``stack`` (1..8 from the dealer's right) at ``levels``
    (1 its top tile .. 4 its bottom tile), distinct and top first."""

    stack: int
    levels: tuple[int, ...]

    def __post_init__(self) -> None:
        if not _is_int(self.stack) or not 1 <= self.stack <= STACKS:
            raise GameRuleError(f"stack {self.stack!r} is not 1..{STACKS}")
        if not isinstance(self.levels, tuple) or not self.levels:
            raise GameRuleError(f"stack {self.stack}: no levels ({self.levels!r})")
        for level in self.levels:
            if not _is_int(level) or not 1 <= level <= LEVELS:
                raise GameRuleError(f"stack {self.stack}: level {level!r} is not 1..{LEVELS}")
        if any(a >= b for a, b in zip(self.levels, self.levels[1:], strict=False)):
            raise GameRuleError(
                f"stack {self.stack}: levels {list(self.levels)} are not distinct and top first"
            )

    def as_record(self) -> dict[str, object]:
        return {"stack": self.stack, "levels": list(self.levels)}


@dataclass(frozen=True, slots=True)
class Delivery:
    """The four tiles one position receives, in the order the dealer takes them."""

    position: Position
    tiles: tuple[StackTiles, ...]

    def __post_init__(self) -> None:
        count = sum(len(t.levels) for t in self.tiles)
        if count != TILES_PER_POSITION:
            raise GameRuleError(
                f"{self.position.label}: {count} tiles, not {TILES_PER_POSITION} (621a.11(k))"
            )

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
            "section": self.style.section,
            "starting_position": self.starting_position.label,
            "plan": [d.as_record() for d in self.deliveries],
        }


# --- the styles, as the dealer's takes ---------------------------------------------------------

# One take: (where, count), the top ``count`` tiles of the pile lying at stack ``where``'s place.
Take = tuple[int, int]
Turn = tuple[Take, ...]  # what one position receives
Hands = tuple[tuple[StackTiles, ...], ...]

_FIRST_FOUR_RIGHT = (1, 2, 3, 4)  # "the first four stacks on the dealer's right"
_FIRST_FOUR_LEFT = (8, 7, 6, 5)  # "the first four stacks on the dealer's left"
_RIGHT_TO_LEFT = _FIRST_FOUR_RIGHT + tuple(reversed(_FIRST_FOUR_LEFT))


def _mirror(stack: int) -> int:
    """The stack at the same place counted from the dealer's other side."""
    return STACKS + 1 - stack


def _mirrored(turns: Sequence[Turn]) -> list[Turn]:
    """A style "From the Left": its style "From the Right" with right and left exchanged, as
    621a.9(1),(3),(7),(9) are worded from 621a.8(d) and 621a.9(2),(6),(8)."""
    return [tuple((_mirror(where), count) for where, count in turn) for turn in turns]


def _whole_stacks(stacks: Iterable[int]) -> list[Turn]:
    """621a.8(d), 621a.9(1): a stack of four tiles to each position in turn."""
    return [((stack, LEVELS),) for stack in stacks]


def _pick_four(pairs: Iterable[tuple[int, int]]) -> list[Turn]:
    """621a.9(2)-(5): "the top two tiles from each of the two stacks pushed forward" to one
    position, "the four remaining tiles" to the next."""
    turns: list[Turn] = []
    for first, second in pairs:
        turns += [((first, 2), (second, 2)), ((first, 2), (second, 2))]
    return turns


def _side_by_side(stacks: Sequence[int]) -> list[tuple[int, int]]:
    """The stacks two at a time, in the order given: the first two, then the next two, ..."""
    return [(stacks[i], stacks[i + 1]) for i in range(0, len(stacks), 2)]


def _centres(stacks: Sequence[int]) -> list[tuple[int, int]]:
    """621a.9(4): the two centre stacks, then, the rest pushed together, the two new centre
    stacks, until none is left."""
    remaining = list(stacks)
    pairs = []
    while remaining:
        middle = len(remaining) // 2
        pairs.append((remaining[middle - 1], remaining[middle]))
        del remaining[middle - 1 : middle + 1]
    return pairs


def _ears(stacks: Sequence[int]) -> list[tuple[int, int]]:
    """621a.9(5): the first stack on the dealer's right and the first on the dealer's left,
    then "the first stack remaining on the dealer's right and the first stack remaining on the
    dealer's left", until none is left."""
    return [(stacks[i], stacks[-1 - i]) for i in range(len(stacks) // 2)]


def _slice_four() -> list[Turn]:
    """621a.9(6): the top tile of each of the first four stacks on the dealer's right (the
    diagonal tile, from stack 1, and the three it covers), then the top tile of each of the
    first four on the dealer's left; "repeated until four tiles have been delivered to all
    eight positions", a level lower each time."""
    turns: list[Turn] = []
    for _ in range(LEVELS):
        turns.append(tuple((stack, 1) for stack in _FIRST_FOUR_RIGHT))
        turns.append(tuple((stack, 1) for stack in _FIRST_FOUR_LEFT))
    return turns


# 621a.9(8): "placing all four tiles in the first and second stacks from the dealer's right
# directly on top of the four tiles in the third and fourth stacks": stack 1 on stack 3 and
# stack 2 on stack 4 (the two moved as they lie). Which goes on which changes no position's
# tiles, only the order of one delivery's two stacks, since each head takes from both piles.
_DRAGON_PILED = {1: 3, 2: 4}


def _dragon_phoenix() -> list[Turn]:
    """621a.9(8): the top two tiles of each eight-tile stack (the dragon head), then the top
    tile of each of the four stacks on the dealer's left (the phoenix tail); repeated until
    each position has four tiles: the head from stacks 1 and 2 twice, then from stacks 3 and 4
    twice, the tail a level lower each time."""
    head = ((3, 2), (4, 2))  # the eight-tile stacks lie where stacks 3 and 4 lay
    tail = tuple((stack, 1) for stack in _FIRST_FOUR_LEFT)
    return [head, tail] * LEVELS


_TURNS: dict[DeliveryStyle, list[Turn]] = {
    # 621a.8(d): the first stack "starting from the right side of the eight stacks" to the
    # starting position, then one stack to each position in turn.
    DeliveryStyle.STANDARD: _whole_stacks(_RIGHT_TO_LEFT),
    # 621a.9(1): the first stack on the dealer's left to the starting position, "the remaining
    # stacks ... from the dealer's left to right".
    DeliveryStyle.HOUSE_WAY_LEFT: _mirrored(_whole_stacks(_RIGHT_TO_LEFT)),
    # 621a.9(2): the first two stacks on the dealer's right, tops to the starting position,
    # bottoms to the next; the rest "from the dealer's right to left in the same manner".
    DeliveryStyle.CUP_SAY_RIGHT: _pick_four(_side_by_side(_RIGHT_TO_LEFT)),
    # 621a.9(3): the same from the dealer's left, the rest from left to right.
    DeliveryStyle.CUP_SAY_LEFT: _mirrored(_pick_four(_side_by_side(_RIGHT_TO_LEFT))),
    # 621a.9(4): the two centre stacks (the fourth from the right and the fourth from the
    # left), tops to the starting position, bottoms to the next; then the new centre stacks.
    DeliveryStyle.JUNG_QUAT: _pick_four(_centres(_RIGHT_TO_LEFT)),
    # 621a.9(5): the two ears (stacks 1 and 8) centred, tops to the starting position, bottoms
    # to the next; then stacks 2 and 7, 3 and 6, 4 and 5.
    DeliveryStyle.CHEE_YEE: _pick_four(_ears(_RIGHT_TO_LEFT)),
    # 621a.9(6), (7)
    DeliveryStyle.PIN_SAY_RIGHT: _slice_four(),
    DeliveryStyle.PIN_SAY_LEFT: _mirrored(_slice_four()),
    # 621a.9(8), (9)
    DeliveryStyle.DRAGON_PHOENIX_RIGHT: _dragon_phoenix(),
    DeliveryStyle.DRAGON_PHOENIX_LEFT: _mirrored(_dragon_phoenix()),
}

_PILED: dict[DeliveryStyle, Mapping[int, int]] = {
    DeliveryStyle.DRAGON_PHOENIX_RIGHT: _DRAGON_PILED,
    DeliveryStyle.DRAGON_PHOENIX_LEFT: {
        _mirror(above): _mirror(below) for above, below in _DRAGON_PILED.items()
    },  # 621a.9(9): stack 8 on stack 6, stack 7 on stack 5
}


def _deal(style: DeliveryStyle, turns: Sequence[Turn], piled: Mapping[int, int]) -> Hands:
    """The tiles the takes of ``turns`` give, each taken from the top of a pile.

    ``piled`` maps a stack to the stack it is placed on before dealing (621a.9(8),(9)). A
    take from a pile with too few tiles, or a tile left over, is an error in the style."""
    piles = {
        stack: [(stack, level) for level in range(1, LEVELS + 1)] for stack in range(1, STACKS + 1)
    }
    for above, below in piled.items():
        piles[below] = piles.pop(above) + piles[below]
    hands: list[tuple[StackTiles, ...]] = []
    for turn in turns:
        taken: list[tuple[int, int]] = []
        for where, count in turn:
            pile = piles.get(where, [])
            if len(pile) < count:
                raise GameRuleError(f"{style.value}: no {count} tiles left at stack {where}")
            taken += pile[:count]
            del pile[:count]
        hands.append(_by_stack(taken))
    if len(hands) != STACKS or any(piles.values()):
        raise GameRuleError(f"{style.value}: not every tile is dealt, once, to eight positions")
    return tuple(hands)


def _by_stack(taken: Sequence[tuple[int, int]]) -> tuple[StackTiles, ...]:
    """(stack, level) tiles in the order taken, each run of one stack's tiles as one item."""
    items: list[StackTiles] = []
    run: list[int] = []
    for i, (stack, level) in enumerate(taken):
        run.append(level)
        if i + 1 == len(taken) or taken[i + 1][0] != stack:
            items.append(StackTiles(stack, tuple(run)))
            run = []
    return tuple(items)


_HANDS: dict[DeliveryStyle, Hands] = {
    style: _deal(style, _TURNS[style], _PILED.get(style, {})) for style in DeliveryStyle
}


def hands_in_dealing_order(style: DeliveryStyle) -> Hands:
    """The eight hands of four tiles of ``style``, the starting position's first."""
    return _HANDS[style]


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
