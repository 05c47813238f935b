"""The round state machine: its transition table, ``step`` and the play of a round.

Pure: no I/O and no clock reads. Time comes in as event data (``Occurrence.at``, in
milliseconds of a monotonic clock chosen by the shell). Each transition returns the actions the
shell must carry out, in order: a ``RECORD`` always comes before the ``SHOW`` of the same fact,
so that a result is in the log before any display shows it.

``TRANSITIONS[(state, event)]`` names the states an event may lead to; a pair that is not in
the table raises :class:`IllegalTransition` and leaves the state as it was. The handlers are
grouped by family: the play of a round here, the bank (``table_bank``), faults
(``table_faults``), the supervisor (``table_supervisor``), service mode (``table_service``)
and power (``table_power``), on what they share (``table_rules``); the screens' data is built
in ``screens``, the vocabulary (every enum and the context) is ``table_types``, re-exported
here. A handler refuses one way: it raises ``Refused``, which ``step`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controller.core.dice import (
    DieReading,
    NoRollReason,
    ReadProgress,
    Roll,
    Verdict,
    next_read,
)
from controller.core.evolve import replace
from controller.core.meters import counted
from controller.core.position import Game, table_cycle
from controller.core.records import RecordKind
from controller.core.result import bank_label, result_of_number, result_of_roll
from controller.core.screens import noting_the_void, refused, show
from controller.core.table_bank import NO_PLAYER_BANK, BankRules
from controller.core.table_events import (
    EVENT_TYPES,
    BankSeatKey,
    ClearFault,
    ClockChanged,
    CloseRound,
    CorrectResult,
    DiceKept,
    DiceReplaced,
    DiceSet,
    FaultRaised,
    KeyEvent,
    LampTest,
    LidClosed,
    LidOpened,
    ModeSwitch,
    MotorOverran,
    NoMoreBets,
    Occurrence,
    PowerOn,
    ReadingTaken,
    Recall,
    RngDrawn,
    RngInterrupted,
    RollbackEvidence,
    Secured,
    SensorBack,
    SensorLost,
    SensorTimedOut,
    ServiceMode,
    ShakeDone,
    ShakePressed,
    ShakerInspected,
    ShiftChange,
    Shuffled,
    Shutdown,
    SoftwareChecked,
    StyleKey,
    TableTime,
    Tampered,
    Tick,
    TilesInspected,
    VoidRound,
    WitnessCosigned,
    occurrence,
)
from controller.core.table_faults import FaultRules
from controller.core.table_life import (
    DICE_LIFE,
    TILES_LIFE,
    age_of,
    check_dice_set_id,
    check_employee_id,
)
from controller.core.table_power import PowerRules
from controller.core.table_rules import (
    SHAKE_IN_PROGRESS,
    Refused,
    _record,
    _record_may_wait,
    need,
    next_round,
)
from controller.core.table_service import NOT_IN_SERVICE, ServiceRules, in_service
from controller.core.table_supervisor import SupervisorRules
from controller.core.table_types import (
    DICE_FAULTS,
    DICE_LIFE_MS,
    DICE_WARNING_MS,
    HOUR_MS,
    MAX_DICE_SET_ID,
    MAX_EMPLOYEE_ID,
    MAX_NOTE_CHARS,
    MIN_SHAKE_CYCLES,
    MOTOR_GRACE_MS,
    RECALL_DEPTH,
    TILE_LIFE_MS,
    TILE_WARNING_MS,
    Action,
    ActionKind,
    ClockSync,
    Correction,
    CorrectionReason,
    Event,
    Fault,
    Mode,
    Refusal,
    RngMode,
    RoundContext,
    RoundSettings,
    Screen,
    ShuffleReason,
    State,
    Step,
    VoidReason,
)
from controller.errors import GameRuleError, IllegalTransition

__all__ = [
    "DICE_FAULTS",
    "DICE_LIFE",
    "DICE_LIFE_MS",
    "DICE_WARNING_MS",
    "EVENT_TYPES",
    "HOUR_MS",
    "MAX_DICE_SET_ID",
    "MAX_EMPLOYEE_ID",
    "MAX_NOTE_CHARS",
    "MIN_SHAKE_CYCLES",
    "MOTOR_GRACE_MS",
    "RECALL_DEPTH",
    "TILES_LIFE",
    "TILE_LIFE_MS",
    "TILE_WARNING_MS",
    "TRANSITIONS",
    "Action",
    "ActionKind",
    "BankSeatKey",
    "ClearFault",
    "ClockChanged",
    "ClockSync",
    "CloseRound",
    "CorrectResult",
    "Correction",
    "CorrectionReason",
    "Decided",
    "DiceKept",
    "DiceReplaced",
    "DiceSet",
    "Event",
    "Fault",
    "FaultRaised",
    "KeyEvent",
    "LampTest",
    "LidClosed",
    "LidOpened",
    "Mode",
    "ModeSwitch",
    "MotorOverran",
    "NoMoreBets",
    "Occurrence",
    "PowerOn",
    "ReadingTaken",
    "Recall",
    "Refusal",
    "RngDrawn",
    "RngInterrupted",
    "RngMode",
    "RollbackEvidence",
    "RoundContext",
    "RoundMachine",
    "RoundSettings",
    "Screen",
    "Secured",
    "SensorBack",
    "SensorLost",
    "SensorTimedOut",
    "ServiceMode",
    "ShakeDone",
    "ShakePressed",
    "ShakerInspected",
    "ShiftChange",
    "ShuffleReason",
    "Shuffled",
    "Shutdown",
    "SoftwareChecked",
    "State",
    "Step",
    "StyleKey",
    "TableTime",
    "Tampered",
    "Tick",
    "TilesInspected",
    "VoidReason",
    "VoidRound",
    "WitnessCosigned",
    "advance_table_time",
    "age_of",
    "check_dice_set_id",
    "check_employee_id",
    "decide_ahead",
    "next_round",
    "occurrence",
    "step",
]

S, E = State, Event
_ALL = tuple(State)
_ROUND_IN_PLAY = (S.ARMED, S.NO_ROLL, S.WAITING, S.SHAKING, S.SETTLING, S.READING)
_RESUMABLE = (S.IDLE, S.ARMED, S.NO_ROLL, S.DRAWING, S.RESULT, S.LOCKED)


def _each(
    states: Sequence[State], event: Event, *targets: State
) -> dict[tuple[State, Event], frozenset[State]]:
    """Rows for one event in several states: to ``targets``, or (none given) staying put."""
    return {(s, event): frozenset(targets or (s,)) for s in states}


def _each_same_or(
    states: Sequence[State], event: Event, *others: State
) -> dict[tuple[State, Event], frozenset[State]]:
    """Rows for one event in several states: staying put, or to one of ``others``."""
    return {(s, event): frozenset((s, *others)) for s in states}


TRANSITIONS: Mapping[tuple[State, Event], frozenset[State]] = {
    # bets open
    (S.IDLE, E.NO_MORE_BETS): frozenset({S.IDLE, S.ARMED, S.DRAWING}),  # IDLE: tiles refused
    (S.IDLE, E.SHUFFLED): frozenset({S.IDLE}),
    (S.IDLE, E.TILES_INSPECTED): frozenset({S.IDLE}),
    (S.IDLE, E.BANK_SEAT_KEY): frozenset({S.IDLE}),
    (S.IDLE, E.SHIFT_CHANGE): frozenset({S.IDLE}),
    (S.ARMED, E.STYLE_KEY): frozenset({S.ARMED}),
    (S.IDLE, E.STYLE_KEY): frozenset({S.IDLE}),  # Pai Gow Poker: co-banking (645a.12(e))
    # the dice and the shaker (supervisor): between shakes, in any state that starts none
    **_each((S.IDLE, S.ARMED, S.NO_ROLL, S.RESULT, S.LOCKED), E.DICE_REPLACED),
    **_each((S.IDLE, S.ARMED, S.NO_ROLL, S.RESULT, S.LOCKED), E.DICE_KEPT),
    # a dice alarm that locked the table is cleared by what the supervisor does with the dice
    (S.FAULT, E.DICE_REPLACED): frozenset({S.FAULT, *_RESUMABLE}),
    (S.FAULT, E.DICE_KEPT): frozenset({S.FAULT, *_RESUMABLE}),
    # AGCO 13.1.1: game recall, with bets open or in a fault; the table waits
    **_each((S.IDLE, S.FAULT), E.RECALL),
    **_each((S.IDLE, S.FAULT), E.SHAKER_INSPECTED),
    # current 621a.6(a): the mode changes between rounds, or (to the RNG) out of a dice fault
    (S.IDLE, E.MODE_SWITCH): frozenset({S.IDLE}),
    (S.FAULT, E.MODE_SWITCH): frozenset({S.FAULT, S.IDLE, S.RESULT}),
    # 9 NYCRR 5319.58: service mode, entered with bets open or from a fault, left from anywhere
    **_each_same_or(_ALL, E.SERVICE_MODE, S.IDLE, S.FAULT),
    **_each(_ALL, E.LAMP_TEST),
    # the shake; pressing the button outside a shake does nothing (no mashing)
    **_each_same_or((S.ARMED, S.NO_ROLL), E.SHAKE_PRESSED, S.WAITING, S.SHAKING),
    **_each(
        (
            S.IDLE,
            S.WAITING,
            S.SHAKING,
            S.SETTLING,
            S.READING,
            S.DRAWING,
            S.RESULT,
            S.FAULT,
            S.LOCKED,
        ),
        E.SHAKE_PRESSED,
    ),
    (S.SHAKING, E.SHAKE_DONE): frozenset({S.SETTLING, S.NO_ROLL, S.LOCKED}),
    **_each_same_or((S.ARMED, S.NO_ROLL), E.DICE_SET, S.READING),
    (S.ARMED, E.DICE_SET): frozenset({S.ARMED, S.READING, S.DRAWING}),  # RNG at tiles: draw
    # time
    **_each(_ALL, E.TICK),
    (S.WAITING, E.TICK): frozenset({S.WAITING, S.SHAKING}),
    (S.SHAKING, E.TICK): frozenset({S.SHAKING, S.FAULT}),
    (S.SETTLING, E.TICK): frozenset({S.SETTLING, S.READING}),
    (S.READING, E.TICK): frozenset({S.READING, S.FAULT}),
    # the reading
    (S.READING, E.READING): frozenset({S.READING, S.RESULT, S.NO_ROLL, S.LOCKED}),
    (S.DRAWING, E.RNG_DRAWN): frozenset({S.RESULT}),
    # the session committed before the bets closed ended with a restart: the round is void
    (S.DRAWING, E.RNG_INTERRUPTED): frozenset({S.IDLE, S.FAULT}),
    # the lid: opening it voids a shake in progress (621a.11(i): cover and reshake)
    **_each_same_or(SHAKE_IN_PROGRESS, E.LID_OPENED, S.NO_ROLL, S.LOCKED),
    **_each((S.IDLE, S.ARMED, S.NO_ROLL, S.DRAWING, S.RESULT, S.FAULT, S.LOCKED), E.LID_OPENED),
    **_each(_ALL, E.LID_CLOSED),
    # the sensor: a fault in the dice modes, a note in RNG mode
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.SENSOR_TIMEOUT, S.FAULT),
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.SENSOR_LOST, S.FAULT),
    **_each((S.FAULT,), E.SENSOR_TIMEOUT),
    **_each((S.FAULT,), E.SENSOR_LOST),
    **_each(_ALL, E.SENSOR_BACK),
    # faults latch from anywhere
    **_each(_ALL, E.MOTOR_OVERRUN, S.FAULT),
    **_each(_ALL, E.TAMPER, S.FAULT),
    **_each(_ALL, E.SECURED),
    **_each(_ALL, E.FAULT, S.FAULT),
    # program verification: recorded from any state; a failed check latches its fault
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.SOFTWARE_CHECKED, S.FAULT),
    **_each((S.FAULT,), E.SOFTWARE_CHECKED),
    **_each(_ALL, E.CLOCK_CHANGED),
    **_each(_ALL, E.COSIGNED),
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.ROLLBACK_EVIDENCE, S.FAULT),
    **_each((S.FAULT,), E.ROLLBACK_EVIDENCE),
    **_each(_ALL, E.TABLE_TIME),
    (S.FAULT, E.CLEAR_FAULT): frozenset({S.FAULT, *_RESUMABLE}),
    (S.LOCKED, E.CLEAR_FAULT): frozenset({S.LOCKED, S.ARMED}),
    # the end of the round
    (S.RESULT, E.CLOSE_ROUND): frozenset({S.IDLE, S.FAULT}),  # FAULT: a dice alarm locks
    # N.J.A.C. 13:69E-1.28P(d): the supervisor corrects a result to the dice as they lie
    (S.RESULT, E.CORRECT_RESULT): frozenset({S.RESULT}),
    # 621a.12(c),(e): the whole round void, every wager returned; the dealer's key only before
    # any dice are at rest, else the supervisor at the terminal (a reason, an employee id)
    **_each_same_or((*_ROUND_IN_PLAY, S.DRAWING), E.VOID_ROUND, S.IDLE, S.FAULT),
    **_each_same_or((S.RESULT, S.LOCKED), E.VOID_ROUND, S.IDLE, S.FAULT),
    (S.FAULT, E.VOID_ROUND): frozenset({S.FAULT}),  # the round is void, the fault stays
    # the controller's life: what its log holds is taken up again, a shake in progress is void
    **_each_same_or((S.IDLE, S.ARMED, S.DRAWING, S.RESULT, S.LOCKED, S.FAULT), E.POWER_ON, S.FAULT),
    **_each(SHAKE_IN_PROGRESS, E.POWER_ON, S.ARMED, S.FAULT),
    (S.NO_ROLL, E.POWER_ON): frozenset({S.NO_ROLL, S.LOCKED, S.FAULT}),
    **_each(tuple(s for s in _ALL if s not in SHAKE_IN_PROGRESS), E.SHUTDOWN),
    **_each(SHAKE_IN_PROGRESS, E.SHUTDOWN, S.ARMED),
}


def advance_table_time(ctx: RoundContext, occ: Occurrence) -> RoundContext:
    """The table's time once ``occ`` happened: the monotonic clock's step since the last event
    of this run (never backwards), and the event's wall clock noted. POWER_ON starts a run:
    what the wall clock says passed while the table was off counts (nothing if it went
    back), and the monotonic clock is taken up from the event."""
    table_ms = ctx.table_ms
    if occ.event is Event.POWER_ON:
        if occ.wall is not None and ctx.last_wall is not None:
            table_ms += max(0, occ.wall - ctx.last_wall)
    elif ctx.last_at is not None:
        table_ms += max(0, occ.at - ctx.last_at)
    last_at = occ.at if ctx.last_at is None or occ.at > ctx.last_at else ctx.last_at
    if occ.event is Event.POWER_ON:
        last_at = occ.at
    last_wall = ctx.last_wall if occ.wall is None else occ.wall
    if (table_ms, last_at, last_wall) == (ctx.table_ms, ctx.last_at, ctx.last_wall):
        return ctx
    return replace(ctx, table_ms=table_ms, last_at=last_at, last_wall=last_wall)


class _Rules(BankRules, FaultRules, SupervisorRules, ServiceRules, PowerRules):
    """Every handler: the play of a round here, the other families by inheritance."""

    ahead: Decided | None = None  # a reading's decision made ahead (``step``'s ``ahead``)

    def no_more_bets(self, ctx: RoundContext, occ: NoMoreBets) -> Step:
        # The bank is the one selected on the panel while bets were open (the event may name
        # one itself, as a table-management system would).
        if ctx.service_round is not None and self._mode(ctx) is Mode.RNG:
            raise GameRuleError("service mode tests the dice: the RNG draws no test numbers")
        if ctx.service_round is None and self.settings.game is Game.TILES:
            # 621a.6(a), 621a.3(e): a round is dealt only from an inspected set, at most 12 hours
            why = TILES_LIFE.refusal(ctx, self.wall)
            if why is not None:
                raise Refused(*why)
        bank_seat = occ.bank_seat if occ.bank_seat is not None else ctx.bank_seat
        if bank_seat is not None and not self.settings.player_bank:
            raise GameRuleError(NO_PLAYER_BANK)
        ctx.bank_history.check(bank_seat)  # 621a.11(b),(c): raises, state unchanged
        # co-banking goes with the player bank it was asked for (621a.11(e), 645a.12(e))
        is_co_bank = ctx.co_bank and bank_seat is not None and bank_seat == ctx.bank_seat
        ctx = replace(ctx, bank_seat=bank_seat, co_bank=is_co_bank, attempt=1, no_rolls=0)
        co_bank = {"co_bank": True} if is_co_bank else {}
        # The record may wait for the end of the shake: BETS_CLOSED shows no decision, and a
        # power cut before it is durable leaves the table with bets open, no shake recorded.
        record = _record_may_wait(
            RecordKind.NO_MORE_BETS,
            round=ctx.round_number,
            bank=bank_label(bank_seat),
            mode=str(self._mode(ctx)),
            **co_bank,
            **self._who(ctx, occ),
        )
        if self._mode(ctx) is Mode.RNG and self.settings.game is not Game.TILES:
            # 621a.8(a)(1): the RNG automatically selects a number once bets are closed (Pai
            # Gow Poker has no delivery style to choose first).
            ctx = replace(ctx, state=S.DRAWING)
        else:
            # 621a.11(i): at tiles the bank may choose a style of delivery first, with the
            # dice as with the RNG; the dealer's dice-set key then has the RNG draw.
            ctx = replace(ctx, state=S.ARMED)
        return ctx, [record, *self.screens.enter(ctx)]

    def shake_pressed(self, ctx: RoundContext, occ: ShakePressed) -> Step:
        if ctx.state not in (S.ARMED, S.NO_ROLL) or self._mode(ctx) is not Mode.SHAKER:
            return ctx, []  # mashing, or a button that does nothing in this mode
        if not ctx.is_lid_closed:
            raise Refused(Refusal.LID_OPEN, "close the lid to shake")
        self._check_dice(ctx)
        # Issue 14: the motor starts after a random delay the shell drew from the OS CSPRNG,
        # so that the moment a player presses cannot time the dice; it goes in the shake's
        # record. The screen answers the press at once.
        delay = occ.delay_ms or 0
        if delay < 0:
            raise GameRuleError(f"a shake delay of {delay} ms")
        shown = show(Screen.SHAKING, **self._round(ctx))
        if delay:
            ctx = replace(ctx, state=S.WAITING, deadline=occ.at + delay, shake_delay_ms=delay)
            return ctx, [shown]
        ctx, start = self._start_motor(replace(ctx, shake_delay_ms=0), occ)
        return ctx, [*start, shown]

    def _start_motor(self, ctx: RoundContext, occ: Occurrence) -> Step:
        deadline = occ.at + self.settings.motor_max_ms + MOTOR_GRACE_MS
        ctx = replace(ctx, state=S.SHAKING, deadline=deadline)
        return ctx, [Action(ActionKind.START_SHAKE, data=self._round(ctx))]

    def shake_done(self, ctx: RoundContext, occ: ShakeDone) -> Step:
        cycles = occ.cycles
        actions = [
            Action(ActionKind.STOP_MOTOR),
            _record(
                RecordKind.SHAKE, **self._round(ctx), cycles=cycles, delay_ms=ctx.shake_delay_ms
            ),
        ]
        # 621a.8(a)(2): a shake counts only with at least three complete shake cycles.
        if cycles < self.settings.min_shake_cycles:
            ctx, more = self._no_roll(ctx, NoRollReason.TOO_FEW_CYCLES)
            return ctx, actions + more
        ctx = replace(ctx, state=S.SETTLING, deadline=occ.at + self.settings.settle_ms)
        return ctx, [*actions, show(Screen.SETTLING, **self._round(ctx))]

    def dice_set(self, ctx: RoundContext, occ: DiceSet) -> Step:
        if self._mode(ctx) is Mode.RNG and ctx.state is S.ARMED:
            # 621a.11(i): the style of delivery settled, the RNG selects the number (621a.8(a)(1))
            ctx = replace(ctx, state=S.DRAWING)
            return ctx, self.screens.enter(ctx)
        if self._mode(ctx) is not Mode.MANUAL and ctx.service_round is None:
            raise IllegalTransition(ctx.state, occ.event)  # service mode reads them as they lie
        self._check_dice(ctx)
        # 621a.6(a)(2): the dealer shook the manual shaker and set it uncovered on the reader.
        return self._start_reading(ctx, occ, [_record(RecordKind.SHAKE, **self._round(ctx))])

    def _start_reading(self, ctx: RoundContext, occ: Occurrence, actions: list[Action]) -> Step:
        ctx = replace(
            ctx,
            state=S.READING,
            deadline=occ.at + self.settings.read_timeout_ms,
            read_progress=ReadProgress(),
        )
        return ctx, [
            *actions,
            Action(ActionKind.REQUEST_READ, data=self._round(ctx)),
            show(Screen.READING, **self._round(ctx)),
        ]

    def tick(self, ctx: RoundContext, occ: Tick) -> Step:
        if ctx.deadline is None or occ.at < ctx.deadline:
            return ctx, []
        if ctx.state is S.WAITING:
            return self._start_motor(ctx, occ)
        if ctx.state is S.SHAKING:
            return self._latch(ctx, Fault.MOTOR_OVERRUN, "shake did not end in time")
        if ctx.state is S.SETTLING:
            return self._start_reading(ctx, occ, [])
        if ctx.state is S.READING:
            return self._latch(ctx, Fault.SENSOR_TIMEOUT, "no reading in time")
        return replace(ctx, deadline=None), []

    def reading(self, ctx: RoundContext, occ: ReadingTaken) -> Step:
        reading = occ.reading
        step = next_read(
            ctx.read_progress,
            reading,
            policy=self.settings.read_policy,
            previous_roll=ctx.previous_roll,
        )
        verdict = step.verdict
        fields = {
            "image_digest": reading.image_digest,
            "dice": [_die_record(d) for d in reading.dice],
            "verdict": str(verdict.no_roll_reason) if verdict.no_roll_reason else "valid",
        }
        record = _record(RecordKind.READING, **self._round(ctx), **fields)
        if step.needs_another_read:
            # The reading waits for the one that decides: the result (or no roll) and every
            # reading behind it become durable in one transaction, before anything is shown.
            record = _record_may_wait(RecordKind.READING, **self._round(ctx), **fields)
            ctx = replace(
                ctx, read_progress=step.progress, deadline=occ.at + self.settings.read_timeout_ms
            )
            return ctx, [record, Action(ActionKind.REQUEST_READ, data=self._round(ctx))]
        if step.no_roll_reason is not None:
            ctx, actions = self._no_roll(ctx, step.no_roll_reason)
            return ctx, [record, *actions]
        assert step.roll is not None
        ctx, actions = self._decided(ctx, step.roll, verdict)
        return ctx, [record, *actions]

    def _decided(self, ctx: RoundContext, roll: Roll, verdict: Verdict) -> Step:
        """What a reading that decides ``roll`` (its ``verdict``) does but for its own record:
        the result, the dice monitor's count, the screens. Decided on the context without its
        table time (``_timeless``), so that it is the same step whenever the reading comes;
        taken from ``ahead`` when that was decided on the same."""
        timeless = _timeless(ctx)
        ahead = self.ahead
        if (
            ahead is not None
            and ahead.settings is self.settings
            and ahead.wall == self.wall
            and ahead.roll == roll
            and ahead.basis == timeless
        ):
            decided, actions = ahead.step
        else:
            decided, actions = self._decide(timeless, roll)
        kept = replace(
            decided,
            table_ms=ctx.table_ms,
            last_at=ctx.last_at,
            last_wall=ctx.last_wall,
            previous_roll=verdict,  # where the dice lay at this reading (dice_did_not_move)
        )
        return kept, list(actions)

    def _decide(self, ctx: RoundContext, roll: Roll) -> Step:
        result = result_of_roll(
            self.settings.game,
            roll,
            bank_seat=ctx.bank_seat,
            paytables=self.settings.paytables,
            settles_wagers=self._settles_wagers(ctx),
        )
        ctx, raised = self._count_roll(ctx, roll)
        ctx, actions = self._result(ctx, result)
        return ctx, [actions[0], *raised, *actions[1:]]

    def rng_drawn(self, ctx: RoundContext, occ: RngDrawn) -> Step:
        game = self.settings.game
        if self.settings.rng_mode is RngMode.DICE:
            # three virtual dice: their total counts; they settle no side wager (current
            # 621a.5(e)(2)-(4) are the physical dice's)
            roll = need(occ.roll, occ)
            result = result_of_roll(
                game, roll, bank_seat=ctx.bank_seat, paytables=(), settles_wagers=False
            )
        else:
            number = need(occ.rng_number, occ)
            positions = len(table_cycle(game))
            if not 1 <= number <= positions:
                raise GameRuleError(f"RNG number {number} is not 1..{positions}")
            result = result_of_number(game, number, bank_seat=ctx.bank_seat)
        return self._result(ctx, result)

    def lid_opened(self, ctx: RoundContext, occ: LidOpened) -> Step:
        """Every opening of the lid is recorded, in a round or not (the meters count them).
        In the player-activated shaker it voids a shake in progress (621a.11(i): cover and
        reshake); in manual mode the dealer uncovers the shaker on purpose."""
        if not ctx.is_lid_closed:
            return ctx, []  # no change (the switch reported again)
        ctx = replace(ctx, is_lid_closed=False)
        record = _record(RecordKind.LID, round=ctx.round_number, opened=True, state=str(ctx.state))
        if ctx.state in SHAKE_IN_PROGRESS and self._mode(ctx) is Mode.SHAKER:
            ctx, actions = self._no_roll(ctx, NoRollReason.LID_OPENED)
            return ctx, [Action(ActionKind.STOP_MOTOR), record, *actions]
        return ctx, [record]

    def lid_closed(self, ctx: RoundContext, occ: LidClosed) -> Step:
        if ctx.is_lid_closed:
            return ctx, []
        record = _record(RecordKind.LID, round=ctx.round_number, opened=False, state=str(ctx.state))
        return replace(ctx, is_lid_closed=True), [record]

    def close_round(self, ctx: RoundContext, occ: CloseRound) -> Step:
        record = _record(RecordKind.CLOSE, round=ctx.round_number, **self._who(ctx, occ))
        return self._open_next_round(ctx, [record])

    def rng_interrupted(self, ctx: RoundContext, occ: RngInterrupted) -> Step:
        """The RNG cannot draw for this round: the session committed before its bets closed
        ended with a restart (its seed is gone with the process; its escrow is the auditor's).
        A number from a session committed after the bets closed would be a selection the
        players could not have seen committed (621a.8(a)(1)), so the round is void, every wager
        returned, and the next round's session is committed when its bets open."""
        voided = {"round": ctx.round_number, "reason": str(VoidReason.RNG_INTERRUPTED)}
        actions = [self._void_record(ctx, VoidReason.RNG_INTERRUPTED, occ, note=occ.detail)]
        ctx, opened = self._open_next_round(ctx, actions)
        return ctx, noting_the_void(opened, voided)


def _die_record(die: DieReading) -> dict[str, object]:
    return {
        "colour": str(die.colour),
        "face": die.face,
        "flat": die.is_flat,
        "inside": die.is_inside,
        "confidence": die.confidence,
        "position": None if die.position is None else list(die.position),
    }


# each handler takes its own kind of event (``Occurrence`` is their union)
_HANDLERS: Mapping[Event, Callable[..., Step]] = {
    E.NO_MORE_BETS: _Rules.no_more_bets,
    E.SHUFFLED: _Rules.shuffled,
    E.SHAKE_PRESSED: _Rules.shake_pressed,
    E.SHAKE_DONE: _Rules.shake_done,
    E.DICE_SET: _Rules.dice_set,
    E.TICK: _Rules.tick,
    E.READING: _Rules.reading,
    E.SENSOR_TIMEOUT: _Rules.sensor_timeout,
    E.SENSOR_LOST: _Rules.sensor_lost,
    E.SENSOR_BACK: _Rules.sensor_back,
    E.RNG_DRAWN: _Rules.rng_drawn,
    E.LID_OPENED: _Rules.lid_opened,
    E.LID_CLOSED: _Rules.lid_closed,
    E.MOTOR_OVERRUN: _Rules.motor_overrun,
    E.TAMPER: _Rules.tamper,
    E.SECURED: _Rules.secured,
    E.FAULT: _Rules.fault,
    E.CLOSE_ROUND: _Rules.close_round,
    E.VOID_ROUND: _Rules.void_round,
    E.CLEAR_FAULT: _Rules.clear_fault,
    E.POWER_ON: _Rules.power_on,
    E.SHUTDOWN: _Rules.shutdown,
    E.BANK_SEAT_KEY: _Rules.bank_seat_key,
    E.STYLE_KEY: _Rules.style_key,
    E.SHIFT_CHANGE: _Rules.shift_change,
    E.DICE_REPLACED: _Rules.dice_replaced,
    E.SHAKER_INSPECTED: _Rules.shaker_inspected,
    E.CORRECT_RESULT: _Rules.correct_result,
    E.TILES_INSPECTED: _Rules.tiles_inspected,
    E.RNG_INTERRUPTED: _Rules.rng_interrupted,
    E.TABLE_TIME: _Rules.table_time,
    E.MODE_SWITCH: _Rules.mode_switch,
    E.SERVICE_MODE: _Rules.service_mode,
    E.LAMP_TEST: _Rules.lamp_test,
    E.DICE_KEPT: _Rules.dice_kept,
    E.RECALL: _Rules.recall,
    E.SOFTWARE_CHECKED: _Rules.software_checked,
    E.CLOCK_CHANGED: _Rules.clock_changed,
    E.COSIGNED: _Rules.cosigned,
    E.ROLLBACK_EVIDENCE: _Rules.rollback_evidence,
}


@dataclass(frozen=True, slots=True)
class Decided:
    """A reading's decision made ahead (:func:`decide_ahead`): what a reading that agrees on
    ``roll`` does on ``basis`` (a context without its table time) under ``settings``."""

    settings: RoundSettings
    wall: int | None
    basis: RoundContext
    roll: Roll
    step: Step


def decide_ahead(settings: RoundSettings, ctx: RoundContext) -> Decided | None:
    """While the sensor reads again: the decision of a reading that agrees with the streak,
    if one more agreeing reading makes a roll (``ReadPolicy.reads_to_agree``), else None.
    The shell gives it to :func:`step` with the next reading, so that the step from the
    sensor's frame to the result on the display does no more than check the reading and take
    it; a reading that does not agree, or anything else that happens meanwhile, is stepped as
    if there were none. Deciding ahead never decides: the roll is the agreeing readings'
    (621a.8(a)(2); the result is recorded before it is shown, as always)."""
    streak = ctx.read_progress.streak
    if (
        ctx.state is not S.READING
        or len(streak) != settings.read_policy.reads_to_agree - 1
        or not streak
        or streak[-1].roll is None
    ):
        return None
    roll = streak[-1].roll
    timeless = _timeless(ctx)
    return Decided(settings, None, timeless, roll, _Rules(settings)._decide(timeless, roll))


def _timeless(ctx: RoundContext) -> RoundContext:
    """``ctx`` without the table's time: a reading's decision does not depend on when it came."""
    return replace(ctx, table_ms=0, last_at=None, last_wall=None)


def step(
    settings: RoundSettings, ctx: RoundContext, occ: Occurrence, *, ahead: Decided | None = None
) -> Step:
    """The pure transition function: the next context and the actions for the shell.
    ``ahead``: a reading's decision made before the reading came (:func:`decide_ahead`); the
    step is the same with it or without it, only quicker when the reading agrees with it."""
    allowed = TRANSITIONS.get((ctx.state, occ.event))
    if allowed is None:
        raise IllegalTransition(ctx.state, occ.event)
    if ctx.recall is not None and occ.event in _WAIT_IN_RECALL:
        why = "leave recall first: nothing changes in the round meanwhile"
        return ctx, [refused(Refusal.IN_RECALL, why)]
    advanced = advance_table_time(ctx, occ)
    rules = _Rules(settings, occ.wall)
    rules.ahead = ahead
    try:
        new_ctx, actions = _HANDLERS[occ.event](rules, advanced, occ)
    except Refused as refusal:  # the one way a handler refuses: nothing changes
        new_ctx, actions = advanced, [refused(refusal.code, refusal.why)]
    if new_ctx is advanced and not any(a.kind is ActionKind.RECORD for a in actions):
        # nothing changed but the time (a refusal, a tick): the context stays as it was, its
        # time counted from the same instant by the next event that changes it
        new_ctx = ctx
    if new_ctx.state not in allowed:  # pragma: no cover - a bug in this file
        raise AssertionError(f"{ctx.state} --{occ.event}--> {new_ctx.state} is not in the table")
    if ctx.service_round is not None and new_ctx.service_round is not None:
        actions = [a for a in (in_service(a) for a in actions) if a.kind not in NOT_IN_SERVICE]
    return _metered(new_ctx, actions)


def _metered(ctx: RoundContext, actions: list[Action]) -> Step:
    """The meters with this step's records counted; a screen built in this step shows them."""
    meters = ctx.meters
    for action in actions:
        if action.kind is ActionKind.RECORD and action.record is not None:
            meters = counted(meters, action.record, action.data)
    if meters is ctx.meters:
        return ctx, actions
    shown = meters.as_record()
    return replace(ctx, meters=meters), [
        replace(a, data={**a.data, "meters": shown})
        if a.kind is ActionKind.SHOW and "meters" in a.data
        else a
        for a in actions
    ]


# AGCO 13.1.1: what the dealer, the supervisor and the players do waits while the display
# recalls a past round (faults still latch, and end the recall).
_WAIT_IN_RECALL = frozenset(
    {
        E.NO_MORE_BETS,
        E.SHUFFLED,
        E.SHAKE_PRESSED,
        E.DICE_SET,
        E.CLOSE_ROUND,
        E.VOID_ROUND,
        E.CLEAR_FAULT,
        E.BANK_SEAT_KEY,
        E.STYLE_KEY,
        E.SHIFT_CHANGE,
        E.DICE_REPLACED,
        E.SHAKER_INSPECTED,
        E.CORRECT_RESULT,
        E.TILES_INSPECTED,
        E.MODE_SWITCH,
        E.SERVICE_MODE,
        E.LAMP_TEST,
        E.DICE_KEPT,
    }
)


# 9 NYCRR 5319.58: in service mode the records of the game are test records, and the RNG is
# not touched (no session prepared, revealed or drawn from).
class RoundMachine:
    """The state machine with its context; the daemon's control thread owns one."""

    def __init__(self, settings: RoundSettings, context: RoundContext | None = None) -> None:
        self.settings = settings
        self.context = context or RoundContext()

    @property
    def state(self) -> State:
        return self.context.state

    def handle(self, occ: Occurrence) -> list[Action]:
        """Apply one event. On any error the context is left exactly as it was."""
        self.context, actions = step(self.settings, self.context, occ)
        return actions
