"""The core alone on simulated dice: what ``make demo`` shows until the appliance runs it.

A scripted table: the dealer closes bets, the player presses shake, simulated dice land (now
and then tilted, out of the tray, or too few shake cycles), and the round state machine decides.
The dice here come from a seeded ``random.Random``: a demo, never the product's RNG.
"""

from __future__ import annotations

import hashlib
import random
from typing import TextIO

from controller.dice import DiceReading, DieColour, DieReading
from controller.state import (
    Action,
    ActionKind,
    Event,
    Occurrence,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
)


def _simulated_reading(rng: random.Random, shake: int) -> DiceReading:
    faces = [rng.randint(1, 6) for _ in range(3)]
    colours = [DieColour.RED, DieColour.BLUE, DieColour.BLUE]
    flat = [True, True, True]
    inside = [True, True, True]
    luck = rng.random()
    if luck < 0.08:
        flat[rng.randrange(3)] = False  # leaning against the wall of the tray
    elif luck < 0.12:
        inside[rng.randrange(3)] = False
    dice = tuple(
        DieReading(
            colour=colours[i],
            face=faces[i] if flat[i] else None,
            is_flat=flat[i],
            is_inside=inside[i],
            confidence=95,
            position=(20 + 30 * i + rng.randint(0, 9), 40 + rng.randint(0, 30)),
        )
        for i in range(3)
    )
    digest = hashlib.sha256(f"demo image {shake} {faces}".encode()).hexdigest()
    return DiceReading(dice, digest)


def run_demo(*, rounds: int, seed: int, out: TextIO) -> int:
    rng = random.Random(seed)  # noqa: S311 - simulated dice for a demo, not the product RNG
    machine = RoundMachine(RoundSettings())
    clock = 0
    shakes = 0

    def run(occ: Occurrence) -> list[Action]:
        actions = machine.handle(occ)
        for action in actions:
            if action.kind is ActionKind.SHOW and action.screen is Screen.NO_ROLL:
                out.write(f"  no roll: {action.data.get('words')} - reshake\n")
            elif action.kind is ActionKind.SHOW and action.screen is Screen.RESULT:
                out.write(_result_line(action.data))
        return actions

    def state() -> State:
        return machine.state  # read afresh: each run() moves it on

    machine.handle(Occurrence(Event.LID_CLOSED, at=clock))
    for _ in range(rounds):
        run(Occurrence(Event.NO_MORE_BETS, at=clock))
        out.write(f"round {machine.context.round_number}: no more bets\n")
        while state() is not State.RESULT:
            if state() is State.LOCKED:
                out.write("  reshake limit reached: supervisor key clears it\n")
                run(Occurrence(Event.CLEAR_FAULT, at=clock, supervisor=True))
            shakes += 1
            clock += 100
            run(Occurrence(Event.SHAKE_PRESSED, at=clock))
            cycles = 2 if rng.random() < 0.04 else 3 + rng.randrange(3)
            clock += 3000
            run(Occurrence(Event.SHAKE_DONE, at=clock, cycles=cycles))
            if state() is not State.SETTLING:
                continue
            clock += 2000
            run(Occurrence(Event.TICK, at=clock))
            reading = _simulated_reading(rng, shakes)
            while state() is State.READING:
                clock += 150
                run(Occurrence(Event.READING, at=clock, reading=reading))
        clock += 1000
        run(Occurrence(Event.CLOSE_ROUND, at=clock))
    return 0


def _result_line(data: object) -> str:
    assert isinstance(data, dict)
    result = data["result"]
    dice = result["dice"]
    wagers = result["wagers"]
    sums = ", ".join(k for k, v in wagers["sum"].items() if v) or "none"
    matches = ", ".join(f"{k}x{v}" for k, v in wagers["match"].items() if v >= 2) or "none"
    beat = ", ".join(k for k, v in wagers["beat_it"].items() if v) or "none"
    return (
        f"  dice red {dice['red']} blue {dice['blue'][0]},{dice['blue'][1]}"
        f"  total {result['total']:>2}  first stack: {result['starting_position']}"
        f"  | sum: {sums}; match: {matches}; beat it: {beat}\n"
    )
