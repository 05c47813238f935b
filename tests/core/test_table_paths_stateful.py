"""The pure round machine driven by hypothesis through random sequences of every kind of event
the core takes: the play of a round (the lid, bets closed, the shake, time, readings good,
tilted, unreadable and disagreeing, the RNG's draws), the bank and its style, the supervisor
(mode switches, corrections, voids, shift changes, dice replaced or kept, recall, inspections),
service mode, faults of every kind and their clearing by whoever presses the key, the dice
monitor's alarms of each test, and the controller's life (power on, shutdown, the table's time,
program verification, the clock, the witness).

After every step:
- every record is of its kind's shape (``record_schema.check``) and reads back through
  ``record_schema.read`` from its canonical bytes, as a reader of the log reads it;
- the machine refuses only in its documented ways: a refused screen with nothing changed, or
  ``IllegalTransition`` / ``GameRuleError`` with the context as it was; anything else fails;
- no round is decided twice (N.J.A.C. 13:69E-1.28G, no secondary selection): one ``result``
  per live round, ever, nothing shaken, read or drawn for a round once decided, and at most one
  ``result_corrected``, following the result of the same round and attempt, never an RNG's;
- a result is in the records before any screen shows it, as recorded (or corrected);
- the live round number never goes backwards, nor jumps;
- the table is in FAULT exactly when a fault is active, and the context as the log keeps it
  (``snapshot``) reads back as it is.

The walks of a new seed each run keep these; the walks of one fixed seed are asserted to reach
every kind of record the core emits (each run prints what it reached, with the figure). The
seed is printed; ``TABLE_PATHS_SEED=<n>`` replays a run.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from support import COSIGNED, DEALER, FLOORPERSON, OPENED, SUPERVISOR, TECHNICIAN
from support.table import TILTED, good_reading

from controller.core import canonical, record_schema
from controller.core.config import Config
from controller.core.dice import DiceReading, DieColour, DieReading, ReadProgress, Roll
from controller.core.dice_monitor import DiceCounts, DiceWindows, alarm
from controller.core.position import Game, table_cycle
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.software import (
    Change,
    Difference,
    SoftwareCheck,
    SoftwareResult,
)
from controller.core.state import (
    HOUR_MS,
    Action,
    ActionKind,
    ClockSync,
    CorrectionReason,
    Event,
    Fault,
    Mode,
    RngMode,
    RoundContext,
    RoundMachine,
    RoundSettings,
    Screen,
    ShuffleReason,
    State,
    VoidReason,
    decide_ahead,
    occurrence,
    step,
)
from controller.core.table_life import DICE_LIFE, TILES_LIFE
from controller.errors import GameRuleError, IllegalTransition

SEED = int(os.environ.get("TABLE_PATHS_SEED", random.randrange(2**32)))
EXAMPLES = int(os.environ.get("TABLE_PATHS_EXAMPLES", "50"))
COVERING_SEED, COVERING_EXAMPLES = 2, 200  # walks that reach every kind (a fixed draw)
STEPS = 80
WALL = 1_764_500_000_000  # UTC milliseconds at the table clock's zero

# --- what the core can emit ----------------------------------------------------------------

CORE = Path(__file__).resolve().parents[2] / "controller" / "core"
# ``result_voided`` is named by the core only to be turned into a test record in service mode:
# no rule makes one any more (a result is corrected or its round void, never decided again)
NEVER_MADE = frozenset({RecordKind.RESULT_VOIDED})


def emitted_by_the_core() -> frozenset[RecordKind]:
    """Every kind of record the round machine's rules name (the daemon's own, the RNG's and the
    log's, are made elsewhere)."""
    sources = [CORE / "state.py", *sorted(CORE.glob("table_*.py"))]
    named = {
        RecordKind[name]
        for source in sources
        for name in re.findall(r"RecordKind\.([A-Z_]+)", source.read_text(encoding="utf-8"))
    }
    return frozenset(named - NEVER_MADE)


# --- the dice ------------------------------------------------------------------------------


def primed(rolls: itertools.cycle[Roll] | Any) -> tuple[DiceCounts, Roll]:
    """The counts of the rolls before the one that raises the monitor's alarm, and that roll:
    a context primed so, one more such result raises it (19 sixes on the red die, 118 totals
    of twelve: too many for a random walk to play)."""
    counts = DiceCounts()
    for roll in rolls:
        if alarm(counts.after(roll)) is not None:
            return counts, roll
        counts = counts.after(roll)
    raise AssertionError("no alarm")  # pragma: no cover


_TWELVES = [c for c in itertools.product(range(1, 7), repeat=3) if sum(c) == 12]
PRIMED = {
    "red": primed(Roll(6, (1 + k % 6, 1 + (k + 3) % 6)) for k in itertools.count()),
    "blue": primed(Roll(1 + k % 6, (6, 1 + (k + 2) % 6)) for k in itertools.count()),
    "total": primed(Roll(r, (a, b)) for r, a, b in itertools.cycle(_TWELVES)),
}


def reading_of(roll: Roll, shift: int) -> DiceReading:
    return good_reading(roll.red, roll.blue[0], roll.blue[1], shift=shift)


def _die(colour: DieColour, face: int | None, x: int, confidence: int = 99) -> DieReading:
    return DieReading(colour, face, True, True, confidence, (x, 20))


BAD_READINGS = {
    "tilted": TILTED,
    "unreadable": DiceReading(
        (
            _die(DieColour.RED, None, 10),
            _die(DieColour.BLUE, 3, 40),
            _die(DieColour.BLUE, 4, 70),
        ),
        "ef" * 32,
    ),
    "low_confidence": DiceReading(
        (
            _die(DieColour.RED, 2, 10, confidence=20),
            _die(DieColour.BLUE, 3, 40),
            _die(DieColour.BLUE, 4, 70),
        ),
        "01" * 32,
    ),
    "missing_die": DiceReading(
        (_die(DieColour.RED, 2, 10), _die(DieColour.BLUE, 3, 40)),
        "23" * 32,
    ),
    "wrong_colours": DiceReading(
        (
            _die(DieColour.BLUE, 2, 10),
            _die(DieColour.BLUE, 3, 40),
            _die(DieColour.BLUE, 4, 70),
        ),
        "45" * 32,
    ),
    "die_out": DiceReading(
        (
            DieReading(DieColour.RED, 2, True, False, 99, (10, 20)),
            _die(DieColour.BLUE, 3, 40),
            _die(DieColour.BLUE, 4, 70),
        ),
        "67" * 32,
    ),
}

FACES = st.tuples(*[st.integers(1, 6)] * 3).map(lambda f: Roll(f[0], (f[1], f[2])))

# --- the shell's data ------------------------------------------------------------------------

VERIFIED = SoftwareCheck(SoftwareResult.OK, "1.0", manifest="ab" * 32, key="01020304", files=80)
UPGRADED = replace(VERIFIED, version="1.1", manifest="cd" * 32)
MISMATCH = replace(
    VERIFIED,
    result=SoftwareResult.MISMATCH,
    differences=(Difference("controller/core/state.py", Change.CHANGED),),
)
ROLLED_BACK = {"witness": "w", "size": 90, "log_size": 40, "note": "n"}
# Faults as events: the hardware's, and those the shell raises (a dice alarm too: refused,
# the monitor raises it); those only a restart clears come late in a walk (``LATE``)
HARDWARE = [Event.SENSOR_TIMEOUT, Event.SENSOR_LOST, Event.MOTOR_OVERRUN, Event.TAMPER]
RAISED = [f for f in Fault if not f.needs_restart]
LATE = 40

# what the context keeps across a power cut (snapshot.py): the rest is per run
NOT_KEPT = {
    "is_lid_closed": False,
    "deadline": None,
    "read_progress": ReadProgress(),
    "last_at": None,
    "recall": None,
    "is_software_verified": True,
}

# reached in this run: kinds of record, and finer labels (a supervisor's action, a fault, ...)
REACHED: Counter[str] = Counter()


@seed(SEED)
class TablePaths(RuleBasedStateMachine):
    """One table, from power on, through whatever happens at it."""

    results = Bundle("results")  # (round, attempt) of results shown, live or stale
    rounds = Bundle("rounds")  # round numbers once in play

    def __init__(self) -> None:
        super().__init__()
        self.machine = RoundMachine(RoundSettings())
        self.now = 0
        self.steps = 0
        self.shift = 0
        self.trigger: Roll | None = None
        self.live_round = 1
        self.decided: dict[int, dict[str, Any]] = {}  # live round: its result record
        self.corrected: set[int] = set()
        self.bets_mode: dict[int, str] = {}
        self.test_results: set[tuple[int, int]] = set()  # this service session's

    # --- the table set up ---------------------------------------------------------------------

    @initialize(
        target=rounds,
        game=st.sampled_from(list(Game)),
        mode=st.sampled_from(list(Mode)),
        rng_mode=st.sampled_from(list(RngMode)),
        co_banking=st.booleans(),
        locks=st.booleans(),
        max_reshakes=st.integers(1, 3),
        dice=st.sampled_from([None, "red", "blue", "total"]),
        opened=st.sampled_from([True, True, True, False]),
    )
    def table_set_up(
        self,
        *,
        game: Game,
        mode: Mode,
        rng_mode: RngMode,
        co_banking: bool,
        locks: bool,
        max_reshakes: int,
        dice: str | None,
        opened: bool,
    ) -> int:
        """A table that may switch to every mode; its dice on the table, their counts one roll
        short of an alarm (``dice``), or (not ``opened``) nothing recorded yet."""
        self.settings = RoundSettings(
            game=game,
            mode=mode,
            modes=tuple(m for m in Mode if m is not mode),
            rng_mode=rng_mode,
            co_banking=co_banking,
            lock_on_dice_alarm=locks,
            max_reshakes=max_reshakes,
            settle_ms=100,
            read_timeout_ms=500,
            motor_max_ms=1000,
        )
        context = OPENED if opened else RoundContext()
        if dice is not None:
            counts, self.trigger = PRIMED[dice]
            context = replace(context, dice_counts=DiceWindows(counts, counts, counts))
        self.machine = RoundMachine(self.settings, context)
        self.send(Event.POWER_ON, config=config_loaded_data(Config()), software=VERIFIED)
        self.send(Event.LID_CLOSED)
        return self.live_round

    # --- the shell ----------------------------------------------------------------------------

    def send(
        self, event: Event, *, advance: int = 10, wall: bool = True, **data: object
    ) -> list[Action]:
        self.now += advance
        self.steps += 1
        occ = occurrence(event, at=self.now, wall=WALL + self.now if wall else None, **data)
        before = self.machine.context
        ahead = decide_ahead(self.settings, before)
        try:
            actions = self.machine.handle(occ)
            if ahead is not None:  # the loop's decision made ahead changes nothing
                assert step(self.settings, before, occ, ahead=ahead) == (
                    self.machine.context,
                    actions,
                ), "the step differs with the decision made ahead"
        except (IllegalTransition, GameRuleError) as refused:
            # refused on purpose (not in the table, or data the rules do not allow): unchanged
            assert self.machine.context is before, f"{event} refused, the context changed"
            REACHED[f"raised {type(refused).__name__}"] += 1
            return []
        self.took(before, actions)
        return actions

    def took(self, before: RoundContext, actions: list[Action]) -> None:
        """The invariants of one step's actions, in the order the shell carries them out."""
        after = self.machine.context
        refusals = [a for a in actions if a.screen is Screen.REFUSED]
        if refusals:
            assert actions == refusals[:1], f"a refusal with more: {actions}"
            assert after is before, "a refusal changed the context"
            REACHED[f"refused {refusals[0].data['code']}"] += 1
            return
        in_service = before.service_round is not None and after.service_round is not None
        for action in actions:
            if action.kind is ActionKind.RECORD:
                assert action.record is not None
                self.recorded(action.record, action.data, in_service=in_service)
            elif action.kind is ActionKind.SHOW and action.screen is Screen.RESULT:
                self.shown(action.data, in_service=in_service or after.service_round is not None)
            elif action.kind is ActionKind.DRAW_NUMBER:
                assert action.data["round"] not in self.decided or in_service, "drawn again"
        live = after.round_number if after.service_round is None else after.service_round
        assert self.live_round <= live <= self.live_round + 1, f"round {self.live_round}->{live}"
        if after.service_round is None:
            self.test_results.clear()
        self.live_round = live

    def recorded(self, kind: RecordKind, data: Any, *, in_service: bool) -> None:
        record_schema.check(kind, data)
        stored = canonical.decode(canonical.encode(dict(data)))
        read = record_schema.read(record_schema.SCHEMAS[kind], stored)
        assert read.KIND is kind
        REACHED[str(kind)] += 1
        if kind is RecordKind.SERVICE_TEST:
            REACHED[f"service_test {stored['record']}"] += 1
            if stored["record"] == "result":
                key = (stored["round"], stored["attempt"])
                assert key not in self.test_results, f"test round {key} decided twice"
                self.test_results.add(key)
            return
        for label in ("action", "fault", "reason", "test"):
            if label in stored and isinstance(stored[label], str):
                REACHED[f"{kind} {stored[label]}"] += 1
        if kind is RecordKind.DICE_ALARM:
            # issue 15: the totals' test points at no face; the faces' tests at one
            assert (stored["face"] is None) == (stored["test"] == "total"), stored
        if kind is RecordKind.FAULT_CLEARED:
            for fault in stored["faults"]:
                REACHED[f"fault_cleared {fault}"] += 1
        round_number = stored.get("round")
        if in_service or not isinstance(round_number, int):
            return
        decided = self.decided.get(round_number)
        if kind is RecordKind.NO_MORE_BETS:
            assert decided is None, f"bets closed again on round {round_number}, decided"
            self.bets_mode[round_number] = stored["mode"]
        elif kind in (RecordKind.SHAKE, RecordKind.READING, RecordKind.NO_ROLL):
            assert decided is None, f"a {kind} of round {round_number}, decided already"
        elif kind is RecordKind.RESULT:
            assert decided is None, f"round {round_number} decided twice"
            self.decided[round_number] = stored
        elif kind is RecordKind.RESULT_CORRECTED:
            assert decided is not None, f"round {round_number} corrected, never decided"
            assert decided["attempt"] == stored["attempt"]
            assert round_number not in self.corrected, f"round {round_number} corrected twice"
            assert self.bets_mode.get(round_number) != "rng", "an RNG result corrected"
            assert stored["dice_read"] == decided["dice"]
            self.corrected.add(round_number)
            decided["corrected"] = stored["result"]

    def shown(self, data: Any, *, in_service: bool) -> None:
        """A result is shown only once it is recorded, as it is recorded (or corrected)."""
        key = (data["round"], data["attempt"])
        if in_service:
            assert key in self.test_results, f"test result {key} shown before its record"
            return
        decided = self.decided.get(key[0])
        assert decided is not None, f"result {key} shown before its record"
        assert decided["attempt"] == key[1]
        shown = canonical.decode(canonical.encode(data["result"]))
        if "corrected" in data:
            assert shown == decided["corrected"]
        else:
            assert shown == {k: v for k, v in decided.items() if k not in ("round", "attempt")}

    def ctx(self) -> RoundContext:
        return self.machine.context

    def in_(self, *states: State) -> bool:
        return self.machine.state in states

    # --- the play of a round ------------------------------------------------------------------

    @rule(closed=st.booleans())
    def lid(self, closed: bool) -> None:
        self.send(Event.LID_CLOSED if closed else Event.LID_OPENED)

    @rule(target=rounds, bank_seat=st.sampled_from([None, None, None, 1, 4]))
    def no_more_bets(self, bank_seat: int | None) -> int:
        self.send(Event.NO_MORE_BETS, bank_seat=bank_seat)
        return self.ctx().round_number

    @rule(delay=st.sampled_from([None, 0, 300]))
    def shake_pressed(self, delay: int | None) -> None:
        self.send(Event.SHAKE_PRESSED, delay_ms=delay)

    @rule(cycles=st.integers(1, 5))
    def shake_done(self, cycles: int) -> None:
        self.send(Event.SHAKE_DONE, cycles=cycles)

    @rule(
        target=rounds,
        moves=st.integers(1, 8),
        faces=FACES,
        loaded=st.booleans(),
        cycles=st.sampled_from([1, 4, 4, 4, 4]),
        closes=st.booleans(),
    )
    def play_on(self, moves: int, faces: Roll, loaded: bool, cycles: int, closes: bool) -> int:
        """What the crew does next, ``moves`` times: the round played on from where it stands
        (a fault seen to, bets closed, the shake, the reading, the draw, the close). One rule
        among some forty that disturb it: without it few walks would reach a result."""
        for _ in range(moves):
            ctx = self.ctx()
            if ctx.recall is not None:
                self.send(Event.RECALL, supervisor=True, employee=SUPERVISOR)
            elif ctx.state is State.IDLE:
                self.dice_and_tiles_seen_to()
                self.bets_close()
            elif ctx.state in (State.ARMED, State.NO_ROLL):
                if not closes and ctx.attempt == 1 and self.settings.game is Game.TILES:
                    self.send(Event.STYLE_KEY)  # 621a.11(i): the bank chooses a style
                self.a_whole_shake(delay=0, cycles=cycles)
            elif ctx.state in (State.WAITING, State.SETTLING):
                self.send(Event.TICK, advance=1_000)
            elif ctx.state is State.SHAKING:
                self.send(Event.SHAKE_DONE, cycles=cycles)
            elif ctx.state is State.READING:
                self.the_dice_read(faces=faces, loaded=loaded, moved=True)
            elif ctx.state is State.DRAWING:
                self.send(Event.RNG_DRAWN, rng_number=1 + faces.total % 8, roll=faces)
            elif ctx.state is State.RESULT and closes:
                self.send(Event.CLOSE_ROUND)
            elif ctx.state in (State.FAULT, State.LOCKED):
                self.the_causes_removed_and_cleared()
            if self.ctx() == ctx:
                break
        return self.ctx().round_number

    # the crew plays on about as often as something disturbs the round (hypothesis picks among
    # the rules alike): the same rule under two more names
    @rule(
        target=rounds,
        moves=st.integers(1, 8),
        faces=FACES,
        loaded=st.booleans(),
        cycles=st.sampled_from([1, 4]),
    )
    def plays_on(self, moves: int, faces: Roll, loaded: bool, cycles: int) -> int:
        return self.play_on(moves=moves, faces=faces, loaded=loaded, cycles=cycles, closes=True)

    @rule(target=rounds, moves=st.integers(1, 8), faces=FACES, loaded=st.booleans())
    def and_on(self, moves: int, faces: Roll, loaded: bool) -> int:
        return self.play_on(moves=moves, faces=faces, loaded=loaded, cycles=4, closes=False)

    def dice_and_tiles_seen_to(self) -> None:
        """The supervisor replaces dice missing or spent, the floorperson verifies a new set of
        tiles (621a.5(c) proposed, 621a.6(a), 621a.3(e))."""
        wall = WALL + self.now
        if DICE_LIFE.refusal(self.ctx(), wall) is not None:
            self.send(Event.DICE_REPLACED, supervisor=True, employee=SUPERVISOR)
        if self.settings.game is Game.TILES and TILES_LIFE.refusal(self.ctx(), wall):
            self.tiles_inspected(supervisor=True, tile_set="T4")

    @precondition(lambda self: self.in_(State.IDLE) and self.ctx().recall is None)
    @rule(target=rounds)
    def bets_close(self) -> int:
        """The lid closed and no more bets, on the bank selected."""
        self.send(Event.LID_CLOSED)
        self.send(Event.NO_MORE_BETS)
        return self.ctx().round_number

    @precondition(lambda self: self.in_(State.ARMED, State.NO_ROLL))
    @rule(delay=st.sampled_from([0, 300]), cycles=st.sampled_from([1, 4, 4, 4]))
    def a_whole_shake(self, delay: int, cycles: int) -> None:
        """The lid closed, the button, the motor, the pattern and the dice at rest; in manual
        mode the shaker set on the reader; with the RNG at tiles, the style settled."""
        self.send(Event.LID_CLOSED)
        if self.machine.settings.mode is not Mode.SHAKER or self.ctx().mode is not None:
            self.send(Event.DICE_SET)
            if self.in_(State.READING, State.DRAWING):
                return
        self.send(Event.SHAKE_PRESSED, delay_ms=delay)
        self.send(Event.TICK, advance=delay)
        self.send(Event.SHAKE_DONE, cycles=cycles, advance=500)
        self.send(Event.TICK, advance=self.settings.settle_ms)

    @rule()
    def dice_set(self) -> None:
        self.send(Event.DICE_SET)

    @rule(advance=st.sampled_from([10, 100, 600, 2_500, 60_000]))
    def tick(self, advance: int) -> None:
        self.send(Event.TICK, advance=advance)

    @rule(hours=st.integers(1, 13))
    def hours_pass(self, hours: int) -> None:
        """The dice's 24 hours and the tiles' 12 go by (their warnings, then their end)."""
        self.send(Event.TICK, advance=hours * HOUR_MS)

    @precondition(lambda self: self.in_(State.READING))
    @rule(faces=FACES, loaded=st.booleans(), moved=st.booleans())
    def the_dice_read(self, faces: Roll, loaded: bool, moved: bool) -> None:
        """Two agreeing readings of the dice (those that raise the alarm, if primed); the dice
        moved since the last roll, or not (a no roll)."""
        roll = self.trigger if loaded and self.trigger is not None else faces
        self.shift = (self.shift + 5) % 20 if moved else self.shift
        reading = reading_of(roll, self.shift)
        self.send(Event.READING, reading=reading)
        self.send(Event.READING, reading=reading)

    @rule(
        faces=FACES,
        how=st.sampled_from(["good", "disagreeing", *BAD_READINGS]),
        shift=st.integers(0, 3),
    )
    def a_reading(self, faces: Roll, how: str, shift: int) -> None:
        """One reading: good, one that disagrees with the last, or one of no roll."""
        if how == "good":
            reading = reading_of(faces, 5 * shift)
        elif how == "disagreeing":
            other = Roll(faces.red % 6 + 1, faces.blue)
            reading = reading_of(other, 5 * shift)
        else:
            reading = BAD_READINGS[how]
        self.send(Event.READING, reading=reading)

    @rule(number=st.integers(0, 40), faces=FACES)
    def rng_drawn(self, number: int, faces: Roll) -> None:
        self.send(Event.RNG_DRAWN, rng_number=number, roll=faces)

    @precondition(lambda self: self.in_(State.DRAWING))
    @rule(data=st.data())
    def the_rng_draws(self, data: st.DataObject) -> None:
        positions = len(table_cycle(self.settings.game))
        number = data.draw(st.integers(1, positions))
        self.send(Event.RNG_DRAWN, rng_number=number, roll=data.draw(FACES))

    @rule()
    def rng_interrupted(self) -> None:
        self.send(Event.RNG_INTERRUPTED, detail="the session ended with a restart")

    @precondition(lambda self: self.in_(State.RESULT) and self.ctx().recall is None)
    @rule()
    def the_round_closed(self) -> None:
        self.send(Event.CLOSE_ROUND)

    @rule(target=results)
    def close_round(self) -> tuple[int, int]:
        ctx = self.ctx()
        self.send(Event.CLOSE_ROUND)
        return ctx.round_number, ctx.attempt

    @precondition(lambda self: self.in_(State.RESULT))
    @rule(target=results)
    def the_result_shown(self) -> tuple[int, int]:
        """The result the supervisor sees (to name in a correction)."""
        return self.ctx().round_number, self.ctx().attempt

    # --- the bank and its style -----------------------------------------------------------------

    @rule()
    def bank_seat_key(self) -> None:
        self.send(Event.BANK_SEAT_KEY)

    @rule()
    def style_key(self) -> None:
        self.send(Event.STYLE_KEY)

    @rule(terminal=st.booleans(), reason=st.sampled_from(list(ShuffleReason)))
    def shuffled(self, terminal: bool, reason: ShuffleReason) -> None:
        if terminal:
            self.send(Event.SHUFFLED, employee=DEALER, shuffle=reason)
        else:
            self.send(Event.SHUFFLED)

    # --- the supervisor -------------------------------------------------------------------------

    @rule(mode=st.sampled_from(list(Mode)), supervisor=st.booleans())
    def mode_switch(self, mode: Mode, supervisor: bool) -> None:
        self.send(Event.MODE_SWITCH, supervisor=supervisor, mode=mode, employee=SUPERVISOR)

    @rule(
        meant=results,
        supervisor=st.sampled_from([True, True, False]),
        reason=st.sampled_from(list(CorrectionReason)),
        faces=FACES,
    )
    def correct_result(
        self, meant: tuple[int, int], supervisor: bool, reason: CorrectionReason, faces: Roll
    ) -> None:
        """N.J.A.C. 13:69E-1.28P(d): the result named corrected to the dice seen (a stale
        name corrects nothing)."""
        self.send(
            Event.CORRECT_RESULT,
            supervisor=supervisor,
            employee=SUPERVISOR,
            correction=reason,
            dice_seen=faces,
            result_meant=meant,
            detail="surveillance",
        )

    @precondition(lambda self: self.in_(State.RESULT))
    @rule(reason=st.sampled_from(list(CorrectionReason)), faces=FACES)
    def the_result_shown_corrected(self, reason: CorrectionReason, faces: Roll) -> None:
        ctx = self.ctx()
        self.correct_result(
            meant=(ctx.round_number, ctx.attempt), supervisor=True, reason=reason, faces=faces
        )

    @rule()
    def dealer_voids(self) -> None:
        self.send(Event.VOID_ROUND)

    @rule(
        meant=rounds,
        supervisor=st.sampled_from([True, True, False]),
        reason=st.sampled_from([r for r in VoidReason if r.is_typed]),
    )
    def supervisor_voids(self, meant: int, supervisor: bool, reason: VoidReason) -> None:
        self.send(
            Event.VOID_ROUND,
            supervisor=supervisor,
            employee=SUPERVISOR,
            void_reason=reason,
            round_meant=meant,
            detail="as the pit saw it",
        )

    @precondition(lambda self: self.in_(State.RESULT, State.LOCKED, State.READING, State.FAULT))
    @rule(reason=st.sampled_from([r for r in VoidReason if r.is_typed]))
    def the_round_in_play_voided(self, reason: VoidReason) -> None:
        self.send(
            Event.VOID_ROUND,
            supervisor=True,
            employee=SUPERVISOR,
            void_reason=reason,
            round_meant=self.ctx().round_number,
        )

    @rule(signed_on=st.booleans())
    def shift_change(self, signed_on: bool) -> None:
        self.send(Event.SHIFT_CHANGE, employee=DEALER if signed_on else None)

    @rule(supervisor=st.sampled_from([True, True, False]), dice_set=st.sampled_from([None, "A-1"]))
    def dice_replaced(self, supervisor: bool, dice_set: str | None) -> None:
        self.send(
            Event.DICE_REPLACED, supervisor=supervisor, employee=SUPERVISOR, dice_set=dice_set
        )

    @rule(supervisor=st.sampled_from([True, True, False]))
    def dice_kept(self, supervisor: bool) -> None:
        self.send(Event.DICE_KEPT, supervisor=supervisor, employee=SUPERVISOR, detail="weighed")

    @rule(supervisor=st.sampled_from([True, True, False]), back=st.sampled_from([None, 1, 2, 12]))
    def recall(self, supervisor: bool, back: int | None) -> None:
        self.send(Event.RECALL, supervisor=supervisor, employee=SUPERVISOR, back=back)

    @rule(supervisor=st.booleans())
    def shaker_inspected(self, supervisor: bool) -> None:
        self.send(
            Event.SHAKER_INSPECTED, supervisor=supervisor, employee=SUPERVISOR, detail="intact"
        )

    @rule(supervisor=st.sampled_from([True, True, False]), tile_set=st.sampled_from(["T2", "T3"]))
    def tiles_inspected(self, supervisor: bool, tile_set: str) -> None:
        self.send(
            Event.TILES_INSPECTED,
            supervisor=supervisor,
            employee=FLOORPERSON,
            tile_set=tile_set,
            dealer=DEALER,
        )

    # --- service mode ---------------------------------------------------------------------------

    @rule(supervisor=st.sampled_from([True, True, False]))
    def service_mode(self, supervisor: bool) -> None:
        self.send(Event.SERVICE_MODE, supervisor=supervisor, employee=TECHNICIAN)

    @rule(supervisor=st.booleans())
    def lamp_test(self, supervisor: bool) -> None:
        self.send(Event.LAMP_TEST, supervisor=supervisor, employee=TECHNICIAN)

    # --- faults ---------------------------------------------------------------------------------

    @rule(what=st.sampled_from([*HARDWARE, *RAISED, "software", *["rollback"] * 3]))
    def a_fault(self, what: Event | Fault | str) -> None:
        """A fault of any kind: the hardware's, one the shell raises, the program verification
        failed, the witness's evidence of a rollback (one rule: faults latch, and a walk spent
        in them reaches nothing else)."""
        if isinstance(what, Fault):
            self.send(Event.FAULT, fault=what, detail="injected")
        elif isinstance(what, Event):
            self.send(what, detail="injected")
        elif what == "software":
            self.send(Event.SOFTWARE_CHECKED, software=MISMATCH, software_before=VERIFIED.identity)
        else:
            self.send(Event.ROLLBACK_EVIDENCE, cosignature=ROLLED_BACK)

    @precondition(lambda self: self.steps >= LATE)
    @rule(fault=st.sampled_from([Fault.LOG_DAMAGED, Fault.LOG_IDENTITY]))
    def a_fault_only_a_restart_clears(self, fault: Fault) -> None:
        """Late in a walk: nothing the core takes clears it."""
        self.send(Event.FAULT, fault=fault, detail="injected")

    @precondition(lambda self: self.ctx().is_secured)
    @rule()
    def the_shaker_lifted(self) -> None:
        """The tamper loop opened (N.J.A.C. 13:69E-1.16A), a rule of its own: its record is made
        only while the shaker is secured, which the walks of other faults seldom leave it."""
        self.send(Event.TAMPER, detail="lifted")

    @rule(event=st.sampled_from([Event.SENSOR_BACK, Event.SECURED]))
    def cause_gone(self, event: Event) -> None:
        self.send(event)

    @rule(check=st.sampled_from([VERIFIED, UPGRADED]), known=st.booleans())
    def software_checked(self, check: SoftwareCheck, known: bool) -> None:
        before = VERIFIED.identity if known else None
        self.send(Event.SOFTWARE_CHECKED, software=check, software_before=before)

    @rule(clock=st.sampled_from(list(ClockSync)))
    def clock_changed(self, clock: ClockSync) -> None:
        self.send(Event.CLOCK_CHANGED, clock=clock)

    @rule()
    def cosigned(self) -> None:
        self.send(Event.COSIGNED, cosignature=COSIGNED)

    @rule(
        who=st.sampled_from(["dealer", "supervisor", "terminal", "terminal without a note"]),
    )
    def clear_fault(self, who: str) -> None:
        """CLEAR FAULT by the dealer's key, the supervisor key, or at the terminal."""
        if who == "dealer":
            self.send(Event.CLEAR_FAULT)
        elif who == "supervisor":
            self.send(Event.CLEAR_FAULT, supervisor=True)
        else:
            note = "" if who.endswith("note") else "anchor copy lost in a card swap"
            self.send(Event.CLEAR_FAULT, supervisor=True, employee=SUPERVISOR, detail=note)

    @precondition(lambda self: self.in_(State.FAULT, State.LOCKED))
    @rule()
    def the_causes_removed_and_cleared(self) -> None:
        """What a crew does about a fault: the sensor and the shaker back, a good check of the
        software, the dice seen to (a dice alarm), and CLEAR FAULT at the terminal."""
        if self.ctx().recall is not None:
            self.send(Event.RECALL, supervisor=True, employee=SUPERVISOR)
        self.send(Event.SENSOR_BACK)
        self.send(Event.SECURED)
        if not self.ctx().is_software_verified:
            self.send(Event.SOFTWARE_CHECKED, software=VERIFIED)
        if self.ctx().dice_alarm is not None:
            self.send(Event.DICE_KEPT, supervisor=True, employee=SUPERVISOR, detail="weighed")
        self.send(Event.CLEAR_FAULT, supervisor=True, employee=SUPERVISOR, detail="repaired")

    # --- the controller's life ------------------------------------------------------------------

    @rule(
        config=st.booleans(),
        fault=st.sampled_from([None] * 4 + [Fault.LOG_ROLLBACK, Fault.ANCHOR_MISSING]),
        check=st.sampled_from([None, VERIFIED, VERIFIED, UPGRADED, MISMATCH]),
        clock=st.sampled_from([None, *ClockSync]),
        anchor=st.sampled_from(["", "primary"]),
        orderly=st.booleans(),
    )
    def restart(
        self,
        *,
        config: bool,
        fault: Fault | None,
        check: SoftwareCheck | None,
        clock: ClockSync | None,
        anchor: str,
        orderly: bool,
    ) -> None:
        """The controller stops (in order, or the power goes) and starts from the context its
        log holds (as the snapshot keeps it)."""
        if orderly:
            self.send(Event.SHUTDOWN)
        kept = decode_context(encode_context(self.ctx()))
        self.machine = RoundMachine(self.settings, kept)
        self.send(
            Event.POWER_ON,
            advance=5_000,
            config=config_loaded_data(Config()) if config else None,
            fault=fault,
            detail="found at start" if fault else "",
            software=check,
            software_before=VERIFIED.identity,
            clock=clock,
            anchor=anchor,
        )

    @rule()
    def table_time(self) -> None:
        self.send(Event.TABLE_TIME)

    # --- always ---------------------------------------------------------------------------------

    @invariant()
    def fault_state_is_an_active_fault(self) -> None:
        ctx = self.machine.context
        REACHED[f"state {ctx.state}"] += 1
        assert (ctx.state is State.FAULT) == bool(ctx.active_faults), (ctx.state, ctx.active_faults)

    @invariant()
    def the_context_reads_back_as_kept(self) -> None:
        ctx = self.machine.context
        assert decode_context(encode_context(ctx)) == replace(ctx, **NOT_KEPT)


def walk(machine: type[TablePaths], examples: int) -> None:
    """``examples`` walks of ``STEPS`` events each, then what they reached, printed."""
    REACHED.clear()
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,  # the printed seed replays a run
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(f"record kinds reached: {len(reached_kinds())} of {len(emitted_by_the_core())}")
    for label, count in sorted(REACHED.items()):
        print(f"  {count:7d}  {label}")


def reached_kinds() -> set[RecordKind]:
    return {k for k in emitted_by_the_core() if REACHED[str(k)]}


def test_random_paths_through_the_table_keep_every_invariant() -> None:
    """Walks of a new seed each run (printed): every invariant above, after every step."""
    print(f"TABLE_PATHS_SEED={SEED} replays this run")
    walk(TablePaths, EXAMPLES)
    assert REACHED[str(RecordKind.RESULT)] > 0, "no walk reached a result"


@seed(COVERING_SEED)
class CoveringPaths(TablePaths):
    """The walks of one seed that reach every kind of record the core emits: a rare kind
    (a tamper loop, a shuffle, rollback evidence) is not reached by every seed's walks in the
    time a test may take, and a test of coverage must not pass or fail by the draw."""


def test_the_walks_reach_every_kind_of_record_the_core_emits() -> None:
    """That the walks above go where the records are made: every kind the core's rules name,
    and a dice alarm of each of the monitor's tests (the totals' names no face)."""
    walk(CoveringPaths, COVERING_EXAMPLES)
    kinds = emitted_by_the_core()
    assert reached_kinds() == kinds, f"never reached: {sorted(kinds - reached_kinds())}"
    alarms = {t for t in ("red", "blue", "total") if REACHED[f"dice_alarm {t}"]}
    assert alarms == {"red", "blue", "total"}, f"dice alarms reached: {sorted(alarms)}"
