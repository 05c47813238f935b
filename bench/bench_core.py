"""The pure core's cost per round, against baselines measured in the same run.

Prints medians over repeats: one full dice round through the state machine (no roll, reshake,
two reads, result, close), and the side-wager outcomes of one roll against a lookup in a table
precomputed over the 216 outcomes (the cheapest possible answer).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from controller.core.dice import DiceReading, DieColour, DieReading
from controller.core.state import (
    CloseRound,
    LidClosed,
    NoMoreBets,
    ReadingTaken,
    RoundContext,
    RoundMachine,
    RoundSettings,
    ShakeDone,
    ShakePressed,
    State,
    Tick,
)
from controller.core.wagers import all_rolls, outcomes


def reading(red: int, b1: int, b2: int, shift: int) -> DiceReading:
    dice = (
        DieReading(DieColour.RED, red, True, True, 99, (10 + shift, 10)),
        DieReading(DieColour.BLUE, b1, True, True, 99, (40 + shift, 10)),
        DieReading(DieColour.BLUE, b2, True, True, 99, (70 + shift, 10)),
    )
    return DiceReading(dice, "00" * 32)


TILTED = DiceReading(
    (
        DieReading(DieColour.RED, 1, True, True, 99, (10, 10)),
        DieReading(DieColour.BLUE, None, False, True, 99, (40, 10)),
        DieReading(DieColour.BLUE, 2, True, True, 99, (70, 10)),
    ),
    "11" * 32,
)


def one_round(machine: RoundMachine, n: int) -> None:
    at = n * 100_000
    r = reading(1 + n % 6, 1 + (n // 6) % 6, 1 + (n // 36) % 6, n % 50)
    for occ in (
        NoMoreBets(at=at),
        ShakePressed(at=at + 1),
        ShakeDone(at=at + 3000, cycles=4),
        Tick(at=at + 5000),
        ReadingTaken(at=at + 5100, reading=TILTED),
        ShakePressed(at=at + 6000),
        ShakeDone(at=at + 9000, cycles=4),
        Tick(at=at + 11000),
        ReadingTaken(at=at + 11100, reading=r),
        ReadingTaken(at=at + 11200, reading=r),
        CloseRound(at=at + 20000),
    ):
        machine.handle(occ)


def median_per_call(fn: Callable[[int], None], calls: int, repeats: int = 7) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for i in range(calls):
            fn(i)
        samples.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(samples)


# A table plays only once it is opened: a dice set in the shaker (proposed 621a.5(c)) and a set
# of tiles inspected and verified (621a.6(a)), both put in at the table's time 0.
OPENED = RoundContext(dice_set="1", dice_since_table=0, tiles_set="T1", tiles_since_table=0)


def main() -> None:
    machine = RoundMachine(RoundSettings(), OPENED)
    machine.handle(LidClosed(at=0))
    first = machine.context.round_number
    one_round(machine, 299)  # as the timed rounds play it (the last of a repeat), not refused
    if machine.state is not State.IDLE or machine.context.round_number != first + 1:
        raise SystemExit(
            f"bench_core: the scripted round did not close (state {machine.state.value},"
            f" round {machine.context.round_number} after {first}): the script is out of date"
        )
    round_ns = median_per_call(lambda n: one_round(machine, n), 300)
    if machine.context.round_number != first + 1 + 7 * 300:
        raise SystemExit("bench_core: a timed round did not close: the script is out of date")
    rolls = all_rolls()
    table = {r.faces: outcomes(r) for r in rolls}
    lookup_ns = median_per_call(lambda n: table.get(rolls[n % 216].faces), 20_000)
    wagers_ns = median_per_call(lambda n: outcomes(rolls[n % 216]), 20_000)
    print(f"core: one dice round (11 events, 1 no roll)  median {round_ns / 1000:9.1f} us")
    print(f"core: rounds per second on one core          {1e9 / round_ns:11.0f}")
    print(f"wagers: outcomes of one roll                 median {wagers_ns:9.0f} ns")
    print(f"wagers: baseline lookup in a 216-entry table median {lookup_ns:9.0f} ns")
    print(f"wagers: computed / lookup ratio              {wagers_ns / lookup_ns:11.1f}x")


if __name__ == "__main__":
    main()
