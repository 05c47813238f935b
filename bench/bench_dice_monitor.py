"""The dice fairness monitor (controller/core/dice_monitor.py) on simulated dice: how often fair
dice raise an alarm in a dice set's life, how soon a loaded die is flagged, and what the monitor
costs per roll (issue 15: a red die showing 6 with probability 0.25 flagged within 400 rolls in
at least 95 % of runs; fair dice alarm in fewer than 1 % of 24-hour dice sets of 1,000 rolls).

    .venv/bin/python bench/bench_dice_monitor.py
    # BENCH_SEED=1 BENCH_DICE_FAIR_SETS=5000 BENCH_DICE_LONG_SETS=5000
    # BENCH_DICE_LOADED_RUNS=5000 BENCH_DICE_CHECK_RUNS=200 BENCH_DICE_REPEATS=7
    # BENCH_DICE_LIMITS=0 leaves out the single-look bound (about 10 s)

Method. A dice set is rolled the way the appliance counts it: the counts of the test window
take each roll and ``alarm`` is asked; the set's first alarm, if any, is its roll number and the
test that raised it. The appliance asks after every roll; here ``alarm`` is asked only at the
rolls where an alarm is possible (a test's ln M rises by at most a known step a roll, RISE, so
after a look at which every test is k steps below its threshold the next k - 1 rolls are only
counted), which gives the same first alarms about five times sooner; the first figure checks
that on BENCH_DICE_CHECK_RUNS sets of each kind rolled both ways. Faces are drawn with
``random.Random`` from each die's face chances (cumulative weights): a simulation of dice, not
the table's RNG. A loaded die follows ``loaded_face_probabilities`` (the simulator's
``--dice-bias``: what the loaded face gains, its opposite loses first, the "pair" model), or
for comparison the "spread" model (the other five faces lose evenly). Each scenario draws from
its own generator, seeded from BENCH_SEED and the scenario's name, so one scenario's size does
not change another's draws. Beside each rate is its exact (Clopper-Pearson) one-sided 95 %
bound. Rolls to detection are nearest-rank percentiles over all runs, a run not flagged within
its rolls counting as later than any that was.

Under the spread model no monitor that does not know the loaded face reaches 95 % at 400 rolls
with a 1 % family-wise false alarm: the single-look bound of bench/dice_monitor_limits.py (the
best one-sided face statistic, looked at once, at roll 400, its threshold set by simulated fair
dice) is printed beside the monitor's rate; a monitor that looks after every roll pays for it
and stays below that bound. The cost per roll is the median over repeats of 1,000 fair rolls
through ``DiceCounts.after`` and ``alarm`` (what the appliance does per roll), in this process.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from common import env_int, figure, machine_load, median, note, percentile, title
from dice_monitor_limits import power

from controller.core import dice_monitor
from controller.core.dice import FACES, Roll
from controller.core.dice_monitor import (
    ALPHA,
    EMPTY,
    LOADED,
    DiceCounts,
    DiceTest,
    alarm,
    evaluate,
    loaded_face_probabilities,
    p_values,
)

SET_ROLLS = 1_000  # a 24-hour dice set at a busy table
LONG_ROLLS = 10_000  # a set kept ten times as long
DETECT_ROLLS = 400
GOAL_FALSE_ALARM = 0.01
GOAL_DETECTION = 0.95
FAIR = (1 / 6,) * 6


def spread_face_probabilities(face: int, probability: float) -> tuple[float, ...]:
    """The "spread" model: ``face`` at ``probability``, the other five equal."""
    chances = [(1 - probability) / 5] * 6
    chances[face - 1] = probability
    return tuple(chances)


@dataclass(frozen=True)
class Dice:
    """The three dice of a simulated set: the red die's face chances, and each blue die's."""

    name: str
    red: tuple[float, ...] = FAIR
    blue_1: tuple[float, ...] = FAIR
    blue_2: tuple[float, ...] = FAIR


@dataclass(frozen=True)
class Outcome:
    """A run's first alarm: the roll it came at and the test that raised it (or none)."""

    roll: int | None
    test: str | None


# The most one roll can raise each test's ln M: the log of a mean of likelihood ratios rises by
# at most the largest rise of one of them, and no alternative gives a face more than LOADED
# against 1/6 (the blue test sees two faces a roll; the total's tilt is largest at 3 and 18, and
# its ln Z is >= 0 by Jensen's inequality).
RISE = {
    DiceTest.RED: math.log(6 * LOADED),
    DiceTest.BLUE: 2 * math.log(6 * LOADED),
    DiceTest.TOTAL: 7.5 * dice_monitor._TILT,
}


def roll_set(rng: random.Random, dice: Dice, rolls: int, *, every_roll: bool = False) -> Outcome:
    """One dice set of ``rolls`` rolls through the monitor, to its first alarm.

    The appliance asks ``alarm`` after every roll (``every_roll``). The same first alarm comes
    sooner by asking only at the rolls where one is possible: after a look at which every
    test is at least ``k`` rises (RISE) below its threshold, the next ``k - 1`` rolls are only
    counted. ``main`` checks that both ways give the same outcomes."""
    reds = rng.choices(FACES, cum_weights=list(accumulate(dice.red)), k=rolls)
    blues_1 = rng.choices(FACES, cum_weights=list(accumulate(dice.blue_1)), k=rolls)
    blues_2 = rng.choices(FACES, cum_weights=list(accumulate(dice.blue_2)), k=rolls)
    faces = zip(reds, blues_1, blues_2, strict=True)
    if every_roll:
        counts = EMPTY
        for n, (red, blue_1, blue_2) in enumerate(faces, 1):
            counts = counts.after(Roll(red, (blue_1, blue_2)))
            raised = alarm(counts)
            if raised is not None:
                return Outcome(n, str(raised.test))
        return Outcome(None, None)
    red_counts, blue_counts, total_counts = [0] * 6, [0] * 6, [0] * 16
    look_at = 1
    for n, (red, blue_1, blue_2) in enumerate(faces, 1):
        red_counts[red - 1] += 1
        blue_counts[blue_1 - 1] += 1
        blue_counts[blue_2 - 1] += 1
        total_counts[red + blue_1 + blue_2 - 3] += 1
        if n < look_at:
            continue
        counts = DiceCounts(tuple(red_counts), tuple(blue_counts), tuple(total_counts))
        raised = alarm(counts)
        if raised is not None:
            return Outcome(n, str(raised.test))
        # rolls that cannot alarm: j * rise < threshold - log_e (less a margin for rounding)
        quiet = min(
            math.ceil((f.threshold - f.log_e) / RISE[f.test] - 1e-9) - 1 for f in evaluate(counts)
        )
        look_at = n + max(0, quiet) + 1
    return Outcome(None, None)


def run_many(
    seed: int, dice: Dice, runs: int, rolls: int, *, every_roll: bool = False
) -> list[Outcome]:
    rng = random.Random(f"{seed}/{dice.name}/{rolls}")  # str seeds are hashed the same each run
    return [roll_set(rng, dice, rolls, every_roll=every_roll) for _ in range(runs)]


def skipping_check(seed: int, runs: int) -> None:
    """Looking only where an alarm is possible finds the first alarms a look after every roll
    finds (the appliance's way), on fair sets and on loaded runs."""
    started = time.perf_counter()
    pair = loaded_face_probabilities(6, 0.25)
    same = alarms = 0
    for dice, rolls in (
        (Dice("check fair"), SET_ROLLS),
        (Dice("check red 6 0.25 pair", red=pair), DETECT_ROLLS),
        (Dice("check blue 6 0.25 pair", blue_1=pair), DETECT_ROLLS),
    ):
        sparse = run_many(seed, dice, runs, rolls)
        every = run_many(seed, dice, runs, rolls, every_roll=True)
        same += sum(a == b for a, b in zip(sparse, every, strict=True))
        alarms += sum(o.roll is not None for o in every)
    figure(
        "looks where an alarm is possible = every roll",
        f"{same} of {3 * runs} runs",
        "all",
        same == 3 * runs,
    )
    note(
        f"{runs} fair sets, {runs} red and {runs} blue loaded runs, {alarms} alarms among them;"
        f" {time.perf_counter() - started:.0f} s"
    )


def upper_bound(hits: int, runs: int, confidence: float = 0.95) -> float:
    """The exact one-sided upper confidence bound of a binomial rate (Clopper-Pearson)."""
    if hits >= runs:
        return 1.0

    def cdf(p: float) -> float:  # P(X <= hits) for X ~ Binomial(runs, p)
        return math.fsum(
            math.exp(
                math.lgamma(runs + 1)
                - math.lgamma(i + 1)
                - math.lgamma(runs - i + 1)
                + i * math.log(p)
                + (runs - i) * math.log1p(-p)
            )
            for i in range(hits + 1)
        )

    low, high = hits / runs, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) > 1 - confidence else (low, middle)
    return high


def by_test(outcomes: Sequence[Outcome]) -> str:
    tests = Counter(o.test for o in outcomes if o.test is not None)
    return ", ".join(f"{test} {n}" for test, n in sorted(tests.items())) or "none"


def false_alarms(seed: int, sets: int, rolls: int) -> None:
    started = time.perf_counter()
    outcomes = run_many(seed, Dice("fair"), sets, rolls)
    alarms = sum(o.roll is not None for o in outcomes)
    rate = alarms / sets
    figure(
        f"false alarms, fair dice, {rolls:,}-roll sets",
        f"{rate:.2%}",
        f"< {GOAL_FALSE_ALARM:.0%}",
        rate < GOAL_FALSE_ALARM,
    )
    at = [o.roll for o in outcomes if o.roll is not None]
    when = f"median roll {median(at):.0f}, last {max(at)}" if at else "none"
    if at and rolls > SET_ROLLS:
        when += f"; {sum(n <= SET_ROLLS for n in at)} by roll {SET_ROLLS:,}"
    note(
        f"{alarms} of {sets:,} sets (by test: {by_test(outcomes)}; {when});"
        f" 95 % upper bound {upper_bound(alarms, sets):.2%}; Ville's bound {ALPHA:.1%} for any"
        f" length; {time.perf_counter() - started:.0f} s"
    )


def detection(seed: int, dice: Dice, what: str, runs: int, *, goal: bool, extra: str = "") -> float:
    started = time.perf_counter()
    outcomes = run_many(seed, dice, runs, DETECT_ROLLS)
    flagged = sum(o.roll is not None for o in outcomes)
    rate = flagged / runs
    if goal:
        figure(what, f"{rate:.1%}", f">= {GOAL_DETECTION:.0%}", rate >= GOAL_DETECTION)
    else:
        figure(what, f"{rate:.1%}")
    later = DETECT_ROLLS + 1  # a run not flagged within DETECT_ROLLS: later than any that was
    rolls = [o.roll if o.roll is not None else later for o in outcomes]

    def at(fraction: float) -> str:
        value = percentile(rolls, fraction)
        return f"> {DETECT_ROLLS}" if value == later else f"{value:.0f}"

    low = 1 - upper_bound(runs - flagged, runs)
    note(
        f"{flagged:,} of {runs:,} runs (by test: {by_test(outcomes)}); 95 % lower bound"
        f" {low:.1%}; rolls to detection: median {at(0.5)}, 95th percentile {at(0.95)};"
        f" {time.perf_counter() - started:.0f} s"
    )
    if extra:
        note(extra)
    return rate


def single_look_bounds(seed: int) -> str:
    """bench/dice_monitor_limits.py's single look at roll 400 under the spread model."""
    rng = random.Random(seed)
    _, red_alone = power(rng, blue=False)
    _, pooled = power(rng, blue=True)
    return (
        f"single-look bound at roll {DETECT_ROLLS} (bench/dice_monitor_limits.py, seed {seed}):"
        f" red alone {red_alone:.1%}, red and blue pooled {pooled:.1%}"
    )


def cost_per_roll(seed: int, repeats: int) -> None:
    rng = random.Random(f"{seed}/cost")
    rolls = [Roll(rng.choice(FACES), (rng.choice(FACES), rng.choice(FACES))) for _ in range(1000)]
    filled: list[DiceCounts] = []
    counts = EMPTY
    for roll in rolls:
        counts = counts.after(roll)
        filled.append(counts)

    def timed(work: Callable[[], None]) -> float:
        timings = []
        for _ in range(repeats):
            start = time.perf_counter()
            work()
            timings.append(time.perf_counter() - start)
        return median(timings) / len(rolls) * 1e6

    def monitor() -> None:
        counts = EMPTY
        for roll in rolls:
            counts = counts.after(roll)
            alarm(counts)

    def counting() -> None:
        counts = EMPTY
        for roll in rolls:
            counts = counts.after(roll)

    def alarms() -> None:
        for counts in filled:
            alarm(counts)

    def evaluations() -> None:
        for counts in filled:
            evaluate(counts)

    def pictures() -> None:
        for counts in filled:
            p_values(counts)

    figure("monitor per roll (after + alarm)", f"{timed(monitor):.2f} µs")
    figure("  DiceCounts.after", f"{timed(counting):.2f} µs")
    figure("  alarm", f"{timed(alarms):.2f} µs")
    figure("  evaluate (the three figures shown)", f"{timed(evaluations):.2f} µs")
    figure("  p_values (Pearson, for display)", f"{timed(pictures):.2f} µs")
    note(f"median of {repeats} repeats of 1,000 fair rolls, counts up to 1,000 rolls")


def main() -> None:
    started = time.perf_counter()
    seed = env_int("BENCH_SEED", 1, low=0)
    fair_sets = env_int("BENCH_DICE_FAIR_SETS", 5000)
    long_sets = env_int("BENCH_DICE_LONG_SETS", 5000)
    loaded_runs = env_int("BENCH_DICE_LOADED_RUNS", 5000)
    limits = env_int("BENCH_DICE_LIMITS", 1, low=0)
    check_runs = env_int("BENCH_DICE_CHECK_RUNS", 200, low=0)
    repeats = env_int("BENCH_DICE_REPEATS", 7)
    title(
        f"dice monitor: {fair_sets:,} fair sets of {SET_ROLLS:,} rolls, {long_sets:,} of"
        f" {LONG_ROLLS:,}, {loaded_runs:,} loaded runs of {DETECT_ROLLS} rolls per scenario"
        f" (seed {seed})"
    )
    note(machine_load())
    note(
        f"BENCH_SEED={seed} BENCH_DICE_FAIR_SETS={fair_sets} BENCH_DICE_LONG_SETS={long_sets}"
        f" BENCH_DICE_LOADED_RUNS={loaded_runs} BENCH_DICE_LIMITS={limits}"
        f" BENCH_DICE_CHECK_RUNS={check_runs}"
        f" .venv/bin/python bench/bench_dice_monitor.py"
    )
    if check_runs:
        skipping_check(seed, check_runs)
    false_alarms(seed, fair_sets, SET_ROLLS)
    false_alarms(seed, long_sets, LONG_ROLLS)
    pair = loaded_face_probabilities(6, 0.25)
    detection(
        seed,
        Dice("red 6 0.25 pair", red=pair),
        "red 6 at 0.25 (pair), within 400",
        loaded_runs,
        goal=True,
    )
    bound = single_look_bounds(seed) if limits else "single-look bound not run"
    detection(
        seed,
        Dice("red 6 0.25 spread", red=spread_face_probabilities(6, 0.25)),
        "red 6 at 0.25 (spread), within 400",
        loaded_runs,
        goal=False,
        extra=f"not a goal: {bound}",
    )
    detection(
        seed,
        Dice("blue 6 0.25 pair", blue_1=pair),
        "one blue 6 at 0.25 (pair), within 400",
        loaded_runs,
        goal=False,
    )
    for probability in (0.22, 0.30):
        detection(
            seed,
            Dice(f"red 6 {probability} pair", red=loaded_face_probabilities(6, probability)),
            f"red 6 at {probability:.2f} (pair), within 400",
            loaded_runs,
            goal=False,
        )
    cost_per_roll(seed, repeats)
    note(f"took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
