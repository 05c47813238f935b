"""The dice side wagers: Sum, Match and Beat It (current 621a.5(e)(2)-(4); 645c.2).

Outcomes come from the rule text alone. Payouts come from named paytables that the casino
configures; the software ships only Sum paytables A and B of 645c.2(g) and never invents a payout.
Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from controller.core.dice import FACES, Roll

SERIES = ({1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6})


class Wager(StrEnum):
    SUM = "sum"
    MATCH = "match"
    BEAT_IT = "beat_it"


class SumCondition(StrEnum):
    TOTAL_8_16_17 = "8-16-17"  # 621a.5(e)(2)(i)
    TOTAL_3_8_9 = "3-8-9"  # 621a.5(e)(2)(ii)
    PAIR = "pair"  # 621a.5(e)(2)(iii): at least two dice match
    SERIES = "series"  # 621a.5(e)(2)(iv): the three dice form a series


class BeatItCondition(StrEnum):
    RED = "red"  # 621a.5(e)(4)(i): red >= the sum of the two blue dice
    ANY = "any"  # 621a.5(e)(4)(ii): any one die beats the sum of the other two by 1 to 4


@dataclass(frozen=True, slots=True)
class WagerOutcomes:
    """What the rule text says of one roll, before any paytable."""

    roll: Roll
    sum: Mapping[SumCondition, bool]
    match: Mapping[int, int]  # value -> how many dice show it
    beat_it: Mapping[BeatItCondition, bool]

    @property
    def total(self) -> int:
        return self.roll.total

    def as_record(self) -> dict[str, object]:
        return {
            "sum": {str(c): v for c, v in self.sum.items()},
            "match": {str(v): n for v, n in self.match.items()},
            "beat_it": {str(c): v for c, v in self.beat_it.items()},
        }


def beat_it_margin(faces: Iterable[int]) -> int:
    """The largest amount by which one die exceeds the sum of the other two (may be <= 0)."""
    values = list(faces)
    total = sum(values)
    return max(2 * face - total for face in values)


def outcomes(roll: Roll) -> WagerOutcomes:
    faces = roll.faces
    total = roll.total
    counts = {value: faces.count(value) for value in FACES}
    sum_outcomes = {
        SumCondition.TOTAL_8_16_17: total in (8, 16, 17),
        SumCondition.TOTAL_3_8_9: total in (3, 8, 9),
        SumCondition.PAIR: max(counts.values()) >= 2,
        SumCondition.SERIES: set(faces) in SERIES,
    }
    margin = beat_it_margin(faces)
    beat_it = {
        BeatItCondition.RED: roll.red >= roll.blue[0] + roll.blue[1],
        BeatItCondition.ANY: 1 <= margin <= 4,
    }
    return WagerOutcomes(roll, sum_outcomes, counts, beat_it)


# --- paytables ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Odds:
    """A payout of ``win`` to ``stake`` ("25 to 1")."""

    win: int
    stake: int = 1

    def __str__(self) -> str:
        return f"{self.win} to {self.stake}"

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.win, self.stake)


@dataclass(frozen=True, slots=True)
class Paytable:
    """A named paytable. ``pays`` maps an outcome key to its odds; keys by wager:

    - sum ``8-16-17`` / ``3-8-9``: the winning totals ("8", "16", "17" / "3", "8", "9");
    - sum ``pair``: "pair" (exactly two match) and "triple" (all three match);
    - sum ``series``: "series";
    - match: "two" and "three" (how many dice show the player's value);
    - beat_it ``red`` / ``any``: "win".
    A winning outcome whose key has no odds in the table is refused by the config loader.
    """

    name: str
    wager: Wager
    condition: str | None
    pays: Mapping[str, Odds]

    def outcome_key(self, result: WagerOutcomes, *, match_value: int | None = None) -> str | None:
        """The key of the winning outcome for this table, or None when the wager loses."""
        if self.wager is Wager.SUM:
            condition = SumCondition(str(self.condition))
            if not result.sum[condition]:
                return None
            if condition is SumCondition.PAIR:
                return "triple" if max(result.match.values()) == 3 else "pair"
            if condition is SumCondition.SERIES:
                return "series"
            return str(result.total)
        if self.wager is Wager.MATCH:
            if match_value is None:
                raise ValueError("a match paytable needs the player's value")
            return {2: "two", 3: "three"}.get(result.match[match_value])
        return "win" if result.beat_it[BeatItCondition(str(self.condition))] else None

    def possible_keys(self) -> frozenset[str]:
        """Every key an outcome of this table can have (for the config loader)."""
        keys: set[str] = set()
        for faces in itertools.product(FACES, repeat=3):
            result = outcomes(Roll(faces[0], (faces[1], faces[2])))
            for value in FACES if self.wager is Wager.MATCH else (None,):
                key = self.outcome_key(result, match_value=value)
                if key is not None:
                    keys.add(key)
        return frozenset(keys)

    def settle(self, result: WagerOutcomes, *, match_value: int | None = None) -> Odds | None:
        key = self.outcome_key(result, match_value=match_value)
        return None if key is None else self.pays[key]


def sum_paytable_a() -> Paytable:
    """645c.2(g) Sum Paytable A: 17 pays 25 to 1, 16 pays 6 to 1, 8 pays 3 to 1."""
    return Paytable(
        "A", Wager.SUM, SumCondition.TOTAL_8_16_17, {"17": Odds(25), "16": Odds(6), "8": Odds(3)}
    )


def sum_paytable_b() -> Paytable:
    """645c.2(g) Sum Paytable B: 3 pays 25 to 1, 8 pays 4 to 1, 9 pays 2 to 1."""
    return Paytable(
        "B", Wager.SUM, SumCondition.TOTAL_3_8_9, {"3": Odds(25), "8": Odds(4), "9": Odds(2)}
    )


def payouts(result: WagerOutcomes, paytables: Iterable[Paytable]) -> dict[str, dict[str, object]]:
    """Each configured paytable's settlement of one roll, keyed by the table's name.

    A match table is settled for each value the player may pick ("1".."6")."""
    settled: dict[str, dict[str, object]] = {}
    for table in paytables:
        if table.wager is Wager.MATCH:
            by_value: dict[str, object] = {}
            for value in FACES:
                odds = table.settle(result, match_value=value)
                by_value[str(value)] = _settlement(table, odds, match_value=value, result=result)
            settled[table.name] = {"wager": str(table.wager), "by_value": by_value}
        else:
            odds = table.settle(result)
            settled[table.name] = {
                "wager": str(table.wager),
                "condition": table.condition,
                **_settlement(table, odds, match_value=None, result=result),
            }
    return settled


def _settlement(
    table: Paytable, odds: Odds | None, *, match_value: int | None, result: WagerOutcomes
) -> dict[str, object]:
    return {
        "wins": odds is not None,
        "outcome": table.outcome_key(result, match_value=match_value),
        "pays": None if odds is None else str(odds),
    }


# --- exact report over the 216 outcomes ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class PaytableFigures:
    name: str
    wager: Wager
    condition: str | None
    hits: int  # winning outcomes of the 216
    hit_frequency: Fraction
    house_edge: Fraction  # the casino's expected gain per unit wagered

    def as_report(self) -> dict[str, object]:
        return {
            "name": self.name,
            "wager": str(self.wager),
            "condition": self.condition,
            "hits": self.hits,
            "hit_frequency": str(self.hit_frequency),
            "hit_frequency_percent": _percent(self.hit_frequency),
            "house_edge": str(self.house_edge),
            "house_edge_percent": _percent(self.house_edge),
        }


def _percent(value: Fraction, places: int = 4) -> str:
    """A fraction as a percentage rounded half-even to ``places`` decimals, exactly."""
    scaled = round(value * 100 * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, frac = divmod(abs(scaled), 10**places)
    return f"{sign}{whole}.{frac:0{places}d}"


def all_rolls() -> list[Roll]:
    """The 216 equally likely (red, blue, blue) outcomes."""
    return [Roll(r, (b1, b2)) for r, b1, b2 in itertools.product(FACES, repeat=3)]


def paytable_figures(table: Paytable) -> PaytableFigures:
    """Exact hit frequency and house edge over the 216 outcomes. A match table is figured for
    one picked value (every value gives the same figures by symmetry)."""
    rolls = all_rolls()
    wins = 0
    player_return = Fraction(0)
    for roll in rolls:
        odds = table.settle(outcomes(roll), match_value=1)
        if odds is None:
            player_return -= 1
        else:
            wins += 1
            player_return += odds.ratio
    n = len(rolls)
    return PaytableFigures(
        table.name, table.wager, table.condition, wins, Fraction(wins, n), -player_return / n
    )
