"""What any dice fairness monitor can reach, before one is built (issue 15's goals).

    .venv/bin/python bench/dice_monitor_limits.py      # BENCH_SEED=7

The goals ask that a red die showing 6 with probability 0.25 be flagged within 400 rolls in at
least 95 % of runs, while fair dice raise an alarm in fewer than 1 % of 1,000-roll dice sets.
A monitor does not know which face is loaded: it watches the six faces of the red die and of
the blue dice pooled. This prints the power of the best one-sided statistic (the largest
z-score of a face count over its expected count) with a single look at roll 400, its
threshold set for a 1 % family-wise false alarm by simulated fair dice. A single look has no
penalty for looking again and again, so these are upper bounds for a sequential monitor.
"""

from __future__ import annotations

import math
import os
import random

P0 = 1 / 6
ROLLS = 400
FAIR_RUNS = 4000
LOADED_RUNS = 2000


def max_z(counts: list[int], n: int) -> float:
    sd = math.sqrt(n * P0 * (1 - P0))
    return max((c - n * P0) / sd for c in counts)


def look(rng: random.Random, p6: float, *, blue: bool) -> float:
    """The largest face z-score at roll ROLLS (red, and the blue dice pooled if ``blue``)."""
    red, blues = [0] * 6, [0] * 6
    for _ in range(ROLLS):
        red[5 if rng.random() < p6 else rng.randrange(5)] += 1
        if blue:
            blues[rng.randrange(6)] += 1
            blues[rng.randrange(6)] += 1
    best = max_z(red, ROLLS)
    return max(best, max_z(blues, 2 * ROLLS)) if blue else best


def power(rng: random.Random, *, blue: bool) -> tuple[float, float]:
    fair = sorted(look(rng, P0, blue=blue) for _ in range(FAIR_RUNS))
    threshold = fair[int(0.99 * FAIR_RUNS)]
    hits = sum(look(rng, 0.25, blue=blue) >= threshold for _ in range(LOADED_RUNS))
    return threshold, hits / LOADED_RUNS


def main() -> None:
    seed = int(os.environ.get("BENCH_SEED", "7"))
    rng = random.Random(seed)  # a simulation of dice, not the table's RNG
    print(
        f"dice monitor limits: one look at roll {ROLLS}, 1 % family-wise false alarm (seed {seed})"
    )
    for blue, what in ((True, "red and blue pooled, 12 face counts"), (False, "red alone, 6")):
        threshold, share = power(rng, blue=blue)
        print(f"  {what:40s} threshold z {threshold:5.2f}  power {share:6.1%}  goal >= 95 %")


if __name__ == "__main__":
    main()
