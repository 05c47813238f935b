"""The whole State x Event product, each pair's outcome pinned: the state it leads to, or why it
is refused (the ``Refusal`` code on the refused screen, an ``IllegalTransition`` for a pair the
transition table does not hold, a ``GameRuleError`` for data the rules do not allow).

One table state by state, one line per event with the minimal valid data of its kind; a line
``(event, VARIANT)`` pins the same event with other data (the key missing, the terminal's
void, ...). Every event is built by ``occurrence`` and every state reached by ``table_in``:
nothing else here builds either. A refused pair changes nothing: the same context, no record.

To regenerate the table after a change of the rules (then read it, pair by pair):
``.venv/bin/python tests/core/test_state_refusals.py``."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import replace
from enum import Enum
from pathlib import Path

if __name__ == "__main__":  # run as a script: the helpers' folder, as conftest.py gives it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import COSIGNED, OPENED, SUPERVISOR

from controller.core.dice import DiceReading, DieColour, DieReading, Roll
from controller.core.software import SoftwareCheck, SoftwareResult
from controller.core.state import (
    TRANSITIONS,
    Action,
    ActionKind,
    ClockSync,
    CorrectionReason,
    Event,
    Fault,
    Mode,
    Occurrence,
    Refusal,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    VoidReason,
)
from controller.core.state import occurrence as event_of_kind
from controller.errors import GameRuleError, IllegalTransition

S, E, R = State, Event, Refusal

WALL = 1_764_500_000_000  # UTC milliseconds of some day in 2025
# a table at tiles with the player-activated shaker, that may switch to every mode and offers
# co-banking; two no rolls lock it
SETTINGS = RoundSettings(
    max_reshakes=2,
    settle_ms=1000,
    read_timeout_ms=2000,
    motor_max_ms=5000,
    modes=tuple(Mode),
    co_banking=True,
)


# --- the events: every one is built here --------------------------------------------------


def _die(colour: DieColour, face: int | None, x: int, *, flat: bool = True) -> DieReading:
    return DieReading(colour, face, flat, True, 99, (x, 20))


GOOD = DiceReading(
    (_die(DieColour.RED, 2, 10), _die(DieColour.BLUE, 3, 40), _die(DieColour.BLUE, 4, 70)),
    "ab" * 32,
)
TILTED = DiceReading(
    (
        _die(DieColour.RED, 1, 10),
        _die(DieColour.BLUE, None, 40, flat=False),
        _die(DieColour.BLUE, 2, 70),
    ),
    "cd" * 32,
)

VERIFIED = SoftwareCheck(SoftwareResult.OK, "1.0", manifest="ab" * 32, key="01020304", files=80)

# the supervisor at the service terminal: the key, the employee id, the wall clock
_TERMINAL: Mapping[str, object] = {"supervisor": True, "employee": SUPERVISOR, "wall": WALL}

# The minimal valid data of each event kind (an event not named here has none)
_MINIMAL: Mapping[Event, Mapping[str, object]] = {
    E.SHAKE_DONE: {"cycles": 3},
    E.READING: {"reading": GOOD},
    E.RNG_DRAWN: {"rng_number": 3},
    E.FAULT: {"fault": Fault.INTERNAL},
    E.SOFTWARE_CHECKED: {"software": VERIFIED},
    E.CLOCK_CHANGED: {"clock": ClockSync.SYNCHRONISED},
    E.COSIGNED: {"cosignature": COSIGNED},
    E.ROLLBACK_EVIDENCE: {"cosignature": {"witness": "w", "size": 90, "log_size": 40, "note": "n"}},
    E.DICE_REPLACED: _TERMINAL,
    E.DICE_KEPT: _TERMINAL,
    E.SHAKER_INSPECTED: _TERMINAL,
    E.RECALL: {**_TERMINAL, "back": 1},
    E.SERVICE_MODE: _TERMINAL,
    E.LAMP_TEST: _TERMINAL,
    E.MODE_SWITCH: {**_TERMINAL, "mode": Mode.RNG},
    E.TILES_INSPECTED: {**_TERMINAL, "tile_set": "T2", "dealer": "D7"},
    E.CORRECT_RESULT: {
        **_TERMINAL,
        "correction": CorrectionReason.MISREAD,
        "result_meant": (1, 1),  # the result ``table_in(S.RESULT)`` shows: round 1, attempt 1
        "dice_seen": Roll(6, (6, 6)),
    },
}


class Variant(Enum):
    """Other data for an event than its minimal valid data."""

    NO_KEY = "no_key"  # the supervisor's action without the supervisor key
    KEY = "key"  # the dealer's key turned with the supervisor key
    TERMINAL = "terminal"  # the supervisor's void at the terminal: a reason, the round
    LEAVE = "leave"  # recall: leave it
    DELAY = "delay"  # the shake's motor starts after a delay
    TOO_FEW = "too_few"  # fewer shake cycles than 621a.8(a)(2) counts
    TILTED_READ = "tilted"  # a reading that is no roll


NO_KEY, KEY, TERMINAL, LEAVE, DELAY, TOO_FEW, TILTED_READ = Variant

_VARIANTS: Mapping[Variant, Mapping[str, object]] = {
    NO_KEY: {"supervisor": False},
    KEY: {"supervisor": True},
    TERMINAL: {
        "supervisor": True,
        "employee": SUPERVISOR,
        "void_reason": VoidReason.WRONG_COUNT,
        "round_meant": 1,
    },
    LEAVE: {"back": None},
    DELAY: {"delay_ms": 500},
    TOO_FEW: {"cycles": 2},
    TILTED_READ: {"reading": TILTED},
}

# the variants worth pinning, by event (a variant of an event is pinned in every state the
# transition table lets the event through)
VARIANTS_OF: Mapping[Event, tuple[Variant, ...]] = {
    E.DICE_REPLACED: (NO_KEY,),
    E.DICE_KEPT: (NO_KEY,),
    E.SHAKER_INSPECTED: (NO_KEY,),
    E.RECALL: (NO_KEY, LEAVE),
    E.SERVICE_MODE: (NO_KEY,),
    E.LAMP_TEST: (NO_KEY,),
    E.MODE_SWITCH: (NO_KEY,),
    E.TILES_INSPECTED: (NO_KEY,),
    E.CORRECT_RESULT: (NO_KEY,),
    E.CLEAR_FAULT: (KEY,),
    E.VOID_ROUND: (TERMINAL,),
    E.SHAKE_PRESSED: (DELAY,),
    E.SHAKE_DONE: (TOO_FEW,),
    E.READING: (TILTED_READ,),
}


def occurrence(event: Event, at: int, variant: Variant | None = None) -> Occurrence:
    """``event`` at ``at`` with the minimal valid data of its kind, or with ``variant``'s."""
    data = {**_MINIMAL.get(event, {}), **(_VARIANTS[variant] if variant else {})}
    return event_of_kind(event, at=at, **data)


# --- the states: every one is reached here ------------------------------------------------


class _Walk:
    """A machine driven by real events, with its clock."""

    def __init__(self, settings: RoundSettings) -> None:
        self.machine = RoundMachine(settings, OPENED)
        self.now = 0

    def send(self, event: Event, variant: Variant | None = None, advance: int = 10) -> _Walk:
        self.now += advance
        self.machine.handle(occurrence(event, self.now, variant))
        return self


def table_in(state: State) -> RoundMachine:
    """A machine in ``state``, reached by real events as a table plays (tests/test_state.py's
    ``reach``): the shaker at tiles, and the RNG for its draw; a fault is the tamper loop."""
    rng = state is S.DRAWING
    walk = _Walk(replace(SETTINGS, mode=Mode.RNG) if rng else SETTINGS).send(E.LID_CLOSED)
    if state is not S.IDLE:
        walk.send(E.NO_MORE_BETS)
    if rng:
        walk.send(E.DICE_SET)  # 621a.11(i): the style of delivery settled, the RNG draws
    elif state is S.FAULT:
        walk.send(E.TAMPER)
    elif state is S.WAITING:
        walk.send(E.SHAKE_PRESSED, DELAY)
    elif state not in (S.IDLE, S.ARMED):
        walk.send(E.SHAKE_PRESSED)
        if state is not S.SHAKING:
            walk.send(E.SHAKE_DONE)
        if state not in (S.SHAKING, S.SETTLING):
            walk.send(E.TICK, advance=SETTINGS.settle_ms)
        if state is S.RESULT:
            walk.send(E.READING).send(E.READING)
        if state in (S.NO_ROLL, S.LOCKED):
            walk.send(E.READING, TILTED_READ)
        if state is S.LOCKED:
            walk.send(E.SHAKE_PRESSED).send(E.SHAKE_DONE, TOO_FEW)
    assert walk.machine.state is state, f"{state} reached {walk.machine.state}"
    return walk.machine


# --- the outcomes -------------------------------------------------------------------------


class Refused(Enum):
    """A pair refused by an exception (the context is left as it was)."""

    ILLEGAL = "IllegalTransition"  # not in the transition table (or not in this mode)
    RULE_ERROR = "GameRuleError"  # data or a setting the rules do not allow


ILLEGAL, RULE_ERROR = Refused

Outcome = State | Refusal | Refused
Key = Event | tuple[Event, Variant]


def _pairs() -> Iterator[tuple[State, Key]]:
    """Every (state, event) and each pinned variant of an event the table lets through."""
    for state in State:
        for event in Event:
            yield state, event
            if (state, event) in TRANSITIONS:
                for variant in VARIANTS_OF.get(event, ()):
                    yield state, (event, variant)


def observe(state: State, key: Key) -> tuple[Outcome, str]:
    """What the machine in ``state`` does with the event: its outcome, and what is wrong with
    it if anything (a refused pair that changed the context or recorded)."""
    event, variant = key if isinstance(key, tuple) else (key, None)
    machine = table_in(state)
    before = machine.context
    occ = occurrence(event, before.deadline or 100_000, variant)
    try:
        actions = machine.handle(occ)
    except IllegalTransition:
        return ILLEGAL, "" if machine.context is before else "the context changed"
    except GameRuleError:
        return RULE_ERROR, "" if machine.context is before else "the context changed"
    refused = [a for a in actions if a.screen is Screen.REFUSED]
    if not refused:
        return machine.state, ""
    return Refusal(refused[0].data["code"]), _changed(before, machine, actions)


def _changed(before: object, machine: RoundMachine, actions: list[Action]) -> str:
    problems = []
    if machine.context != before:
        problems.append(f"the context changed to {machine.context}")
    records = [str(a.record) for a in actions if a.kind is ActionKind.RECORD]
    if records:
        problems.append(f"it recorded {records}")
    return "; ".join(problems)


# --- the table ----------------------------------------------------------------------------

# As the machine does it now, read pair by pair against TRANSITIONS and the rules; a comment
# marks a pair whose outcome that reading questions (kept as it is: the product decides).

EXPECTED: Mapping[State, Mapping[Key, Outcome]] = {
    S.IDLE: {
        E.NO_MORE_BETS: S.ARMED,
        E.SHUFFLED: S.IDLE,
        E.SHAKE_PRESSED: S.IDLE,
        (E.SHAKE_PRESSED, DELAY): S.IDLE,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.IDLE,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.IDLE,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.IDLE,
        E.LID_CLOSED: S.IDLE,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.IDLE,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: ILLEGAL,  # in a fault with bets open: NO_ROUND_IN_PLAY
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.IDLE,
        E.SHUTDOWN: S.IDLE,
        E.BANK_SEAT_KEY: S.IDLE,
        E.STYLE_KEY: R.CO_BANK_NEEDS_PLAYER_BANK,
        E.SHIFT_CHANGE: S.IDLE,
        E.DICE_REPLACED: S.IDLE,
        (E.DICE_REPLACED, NO_KEY): R.SUPERVISOR_KEY,
        E.SHAKER_INSPECTED: S.IDLE,
        (E.SHAKER_INSPECTED, NO_KEY): R.SUPERVISOR_KEY,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: S.IDLE,
        (E.TILES_INSPECTED, NO_KEY): R.SUPERVISOR_KEY,
        E.MODE_SWITCH: S.IDLE,
        (E.MODE_SWITCH, NO_KEY): R.SUPERVISOR_KEY,
        E.SERVICE_MODE: S.IDLE,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: R.NOTHING_TO_CLEAR,
        (E.DICE_KEPT, NO_KEY): R.SUPERVISOR_KEY,
        E.RECALL: S.IDLE,
        (E.RECALL, NO_KEY): R.SUPERVISOR_KEY,
        (E.RECALL, LEAVE): R.NOT_RECALLING,
        E.SOFTWARE_CHECKED: S.IDLE,
        E.CLOCK_CHANGED: S.IDLE,
        E.COSIGNED: S.IDLE,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.IDLE,
    },
    S.ARMED: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.SHAKING,
        (E.SHAKE_PRESSED, DELAY): S.WAITING,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,  # in the table: the handler raises
        E.TICK: S.ARMED,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.ARMED,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.ARMED,
        E.LID_CLOSED: S.ARMED,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.ARMED,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: S.IDLE,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.ARMED,
        E.SHUTDOWN: S.ARMED,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: S.ARMED,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: S.ARMED,
        (E.DICE_REPLACED, NO_KEY): R.SUPERVISOR_KEY,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: S.IDLE,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: R.NOTHING_TO_CLEAR,
        (E.DICE_KEPT, NO_KEY): R.SUPERVISOR_KEY,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.ARMED,
        E.CLOCK_CHANGED: S.ARMED,
        E.COSIGNED: S.ARMED,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.ARMED,
    },
    S.WAITING: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.WAITING,
        (E.SHAKE_PRESSED, DELAY): S.WAITING,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.SHAKING,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.WAITING,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.NO_ROLL,
        E.LID_CLOSED: S.WAITING,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.WAITING,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: S.IDLE,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.ARMED,
        E.SHUTDOWN: S.ARMED,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: ILLEGAL,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: R.NOT_BETWEEN_SHAKES,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: ILLEGAL,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.WAITING,
        E.CLOCK_CHANGED: S.WAITING,
        E.COSIGNED: S.WAITING,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.WAITING,
    },
    S.SHAKING: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.SHAKING,
        (E.SHAKE_PRESSED, DELAY): S.SHAKING,
        E.SHAKE_DONE: S.SETTLING,
        (E.SHAKE_DONE, TOO_FEW): S.NO_ROLL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.FAULT,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.SHAKING,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.NO_ROLL,
        E.LID_CLOSED: S.SHAKING,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.SHAKING,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: S.IDLE,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.ARMED,
        E.SHUTDOWN: S.ARMED,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: ILLEGAL,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: R.NOT_BETWEEN_SHAKES,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: ILLEGAL,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.SHAKING,
        E.CLOCK_CHANGED: S.SHAKING,
        E.COSIGNED: S.SHAKING,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.SHAKING,
    },
    S.SETTLING: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.SETTLING,
        (E.SHAKE_PRESSED, DELAY): S.SETTLING,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.READING,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.SETTLING,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.NO_ROLL,
        E.LID_CLOSED: S.SETTLING,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.SETTLING,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: R.VOID_AT_TERMINAL,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.ARMED,
        E.SHUTDOWN: S.ARMED,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: ILLEGAL,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: R.NOT_BETWEEN_SHAKES,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: ILLEGAL,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.SETTLING,
        E.CLOCK_CHANGED: S.SETTLING,
        E.COSIGNED: S.SETTLING,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.SETTLING,
    },
    S.READING: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.READING,
        (E.SHAKE_PRESSED, DELAY): S.READING,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.FAULT,
        E.READING: S.READING,
        (E.READING, TILTED_READ): S.NO_ROLL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.READING,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.NO_ROLL,
        E.LID_CLOSED: S.READING,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.READING,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: R.VOID_AT_TERMINAL,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.ARMED,
        E.SHUTDOWN: S.ARMED,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: ILLEGAL,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: R.NOT_BETWEEN_SHAKES,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: ILLEGAL,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.READING,
        E.CLOCK_CHANGED: S.READING,
        E.COSIGNED: S.READING,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.READING,
    },
    S.DRAWING: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.DRAWING,
        (E.SHAKE_PRESSED, DELAY): S.DRAWING,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.DRAWING,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.DRAWING,
        E.SENSOR_LOST: S.DRAWING,
        E.SENSOR_BACK: S.DRAWING,
        E.RNG_DRAWN: S.RESULT,
        E.LID_OPENED: S.DRAWING,
        E.LID_CLOSED: S.DRAWING,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.DRAWING,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: S.IDLE,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.DRAWING,
        E.SHUTDOWN: S.DRAWING,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: ILLEGAL,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: R.NOT_BETWEEN_SHAKES,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: ILLEGAL,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.DRAWING,
        E.CLOCK_CHANGED: S.DRAWING,
        E.COSIGNED: S.DRAWING,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: S.IDLE,
        E.TABLE_TIME: S.DRAWING,
    },
    S.RESULT: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.RESULT,
        (E.SHAKE_PRESSED, DELAY): S.RESULT,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.RESULT,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.RESULT,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.RESULT,
        E.LID_CLOSED: S.RESULT,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.RESULT,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: S.IDLE,
        E.VOID_ROUND: R.VOID_AT_TERMINAL,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.RESULT,
        E.SHUTDOWN: S.RESULT,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: S.RESULT,  # the dice a correction reads, replaced
        (E.DICE_REPLACED, NO_KEY): R.SUPERVISOR_KEY,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: S.RESULT,
        (E.CORRECT_RESULT, NO_KEY): R.SUPERVISOR_KEY,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: R.ROUND_NOT_CLOSED,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: R.NOTHING_TO_CLEAR,
        (E.DICE_KEPT, NO_KEY): R.SUPERVISOR_KEY,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.RESULT,
        E.CLOCK_CHANGED: S.RESULT,
        E.COSIGNED: S.RESULT,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.RESULT,
    },
    S.NO_ROLL: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.SHAKING,
        (E.SHAKE_PRESSED, DELAY): S.WAITING,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.NO_ROLL,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.NO_ROLL,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.NO_ROLL,
        E.LID_CLOSED: S.NO_ROLL,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.NO_ROLL,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: S.IDLE,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: ILLEGAL,
        E.POWER_ON: S.NO_ROLL,
        E.SHUTDOWN: S.NO_ROLL,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: S.NO_ROLL,
        (E.DICE_REPLACED, NO_KEY): R.SUPERVISOR_KEY,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: S.IDLE,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: R.NOTHING_TO_CLEAR,
        (E.DICE_KEPT, NO_KEY): R.SUPERVISOR_KEY,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.NO_ROLL,
        E.CLOCK_CHANGED: S.NO_ROLL,
        E.COSIGNED: S.NO_ROLL,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.NO_ROLL,
    },
    S.FAULT: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.FAULT,
        (E.SHAKE_PRESSED, DELAY): S.FAULT,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.FAULT,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.FAULT,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.FAULT,
        E.LID_CLOSED: S.FAULT,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,  # latched (and recorded) again
        E.SECURED: S.FAULT,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: R.VOID_AT_TERMINAL,
        (E.VOID_ROUND, TERMINAL): S.FAULT,
        E.CLEAR_FAULT: R.FAULT_NOT_CLEARED,
        (E.CLEAR_FAULT, KEY): R.FAULT_NOT_CLEARED,
        E.POWER_ON: S.FAULT,
        E.SHUTDOWN: S.FAULT,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: S.FAULT,
        (E.DICE_REPLACED, NO_KEY): R.SUPERVISOR_KEY,
        E.SHAKER_INSPECTED: S.FAULT,
        (E.SHAKER_INSPECTED, NO_KEY): R.SUPERVISOR_KEY,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: S.FAULT,
        (E.MODE_SWITCH, NO_KEY): R.SUPERVISOR_KEY,
        E.SERVICE_MODE: R.NOT_BETWEEN_SHAKES,  # TRANSITIONS' comment: entered from a fault
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: R.NOTHING_TO_CLEAR,
        (E.DICE_KEPT, NO_KEY): R.SUPERVISOR_KEY,
        E.RECALL: S.FAULT,
        (E.RECALL, NO_KEY): R.SUPERVISOR_KEY,
        (E.RECALL, LEAVE): R.NOT_RECALLING,
        E.SOFTWARE_CHECKED: S.FAULT,
        E.CLOCK_CHANGED: S.FAULT,
        E.COSIGNED: S.FAULT,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.FAULT,
    },
    S.LOCKED: {
        E.NO_MORE_BETS: ILLEGAL,
        E.SHUFFLED: ILLEGAL,
        E.SHAKE_PRESSED: S.LOCKED,
        (E.SHAKE_PRESSED, DELAY): S.LOCKED,
        E.SHAKE_DONE: ILLEGAL,
        E.DICE_SET: ILLEGAL,
        E.TICK: S.LOCKED,
        E.READING: ILLEGAL,
        E.SENSOR_TIMEOUT: S.FAULT,
        E.SENSOR_LOST: S.FAULT,
        E.SENSOR_BACK: S.LOCKED,
        E.RNG_DRAWN: ILLEGAL,
        E.LID_OPENED: S.LOCKED,
        E.LID_CLOSED: S.LOCKED,
        E.MOTOR_OVERRUN: S.FAULT,
        E.TAMPER: S.FAULT,
        E.SECURED: S.LOCKED,
        E.FAULT: S.FAULT,
        E.CLOSE_ROUND: ILLEGAL,
        E.VOID_ROUND: R.VOID_AT_TERMINAL,
        (E.VOID_ROUND, TERMINAL): S.IDLE,
        E.CLEAR_FAULT: R.SUPERVISOR_KEY,
        (E.CLEAR_FAULT, KEY): S.ARMED,
        E.POWER_ON: S.LOCKED,
        E.SHUTDOWN: S.LOCKED,
        E.BANK_SEAT_KEY: ILLEGAL,
        E.STYLE_KEY: ILLEGAL,
        E.SHIFT_CHANGE: ILLEGAL,
        E.DICE_REPLACED: S.LOCKED,
        (E.DICE_REPLACED, NO_KEY): R.SUPERVISOR_KEY,
        E.SHAKER_INSPECTED: ILLEGAL,
        E.CORRECT_RESULT: ILLEGAL,
        E.TILES_INSPECTED: ILLEGAL,
        E.MODE_SWITCH: ILLEGAL,
        E.SERVICE_MODE: S.IDLE,
        (E.SERVICE_MODE, NO_KEY): R.SUPERVISOR_KEY,
        E.LAMP_TEST: R.NOT_IN_SERVICE_MODE,
        (E.LAMP_TEST, NO_KEY): R.SUPERVISOR_KEY,
        E.DICE_KEPT: R.NOTHING_TO_CLEAR,
        (E.DICE_KEPT, NO_KEY): R.SUPERVISOR_KEY,
        E.RECALL: ILLEGAL,
        E.SOFTWARE_CHECKED: S.LOCKED,
        E.CLOCK_CHANGED: S.LOCKED,
        E.COSIGNED: S.LOCKED,
        E.ROLLBACK_EVIDENCE: S.FAULT,
        E.RNG_INTERRUPTED: ILLEGAL,
        E.TABLE_TIME: S.LOCKED,
    },
}


# --- the tests ----------------------------------------------------------------------------


def test_the_table_covers_every_state_and_event_exactly() -> None:
    """A new state, event or variant fails here until its outcome is pinned."""
    pinned = {(state, key) for state, keys in EXPECTED.items() for key in keys}
    wanted = set(_pairs())
    missing = [f"{_key_literal(k)} in S.{s.name}" for s, k in _pairs() if (s, k) not in pinned]
    assert not missing, f"pairs the table does not pin: {missing}"
    extra = [f"{_key_literal(k)} in {s}" for s, k in pinned - wanted]
    assert not extra, f"pinned pairs of no state, event or variant the table lets through: {extra}"


def test_each_pair_has_its_pinned_outcome() -> None:
    wrong = []
    for state, key in _pairs():
        pair = f"{_key_literal(key)} in S.{state.name}"
        expected = EXPECTED.get(state, {}).get(key)
        actual, problem = observe(state, key)
        if actual != expected:
            pinned = "nothing" if expected is None else _literal(expected)
            wrong.append(f"{pair}: expected {pinned}, actual {_literal(actual)}")
        elif problem:
            wrong.append(f"{pair}: refused ({_literal(actual)}), but {problem}")
    assert not wrong, "\n".join(["pairs whose outcome is not the one pinned:", *wrong])


def _literal(outcome: Outcome) -> str:
    if isinstance(outcome, State):
        return f"S.{outcome.name}"
    if isinstance(outcome, Refusal):
        return f"R.{outcome.name}"
    return outcome.name


def _key_literal(key: Key) -> str:
    if isinstance(key, tuple):
        return f"(E.{key[0].name}, {key[1].name})"
    return f"E.{key.name}"


def main() -> None:
    """Print the table as the machine has it now (its literal, to paste above)."""
    print("EXPECTED: Mapping[State, Mapping[Key, Outcome]] = {")
    state = None
    for pair_state, key in _pairs():
        if pair_state is not state:
            if state is not None:
                print("    },")
            state = pair_state
            print(f"    S.{state.name}: {{")
        outcome, problem = observe(pair_state, key)
        note = f"  # {problem}" if problem else ""
        print(f"        {_key_literal(key)}: {_literal(outcome)},{note}")
    print("    },")
    print("}")


if __name__ == "__main__":
    main()
