"""What every family of the table's rules shares: the records, the latch of a fault, a no
roll, the result, the next round, who did it, and the one way a handler refuses (``Refused``,
turned into the refused screen by ``step``). The families (play in ``state``, the bank, the
faults, the supervisor, service mode, power) are subclasses of ``Rules``. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from controller.core.dealing import DeliveryStyle
from controller.core.dice import NoRollReason, ReadProgress, Roll
from controller.core.dice_monitor import DiceAlarm, alarm
from controller.core.evolve import replace
from controller.core.position import BankHistory
from controller.core.records import RecordKind
from controller.core.result import RoundResult
from controller.core.screens import Screens, show
from controller.core.software import SoftwareCheck, SoftwareIdentity
from controller.core.table_events import KeyEvent, Occurrence, RngInterrupted
from controller.core.table_life import DICE_LIFE, check_employee_id
from controller.core.table_types import (
    Action,
    ActionKind,
    Fault,
    Mode,
    Refusal,
    RoundContext,
    RoundSettings,
    Screen,
    State,
    Step,
    VoidReason,
    round_fields,
    table_mode,
)
from controller.errors import GameRuleError

_T = TypeVar("_T")
S = State
# a shake in progress: void if the table stops or a fault latches in it
SHAKE_IN_PROGRESS = (S.WAITING, S.SHAKING, S.SETTLING, S.READING)


class Refused(Exception):
    """A handler refuses a key or button: nothing changes. Raised only inside a handler and
    caught once, by ``step``, which shows it (``screens.refused``): never leaves the core."""

    def __init__(self, code: Refusal, why: str) -> None:
        super().__init__(why)
        self.code = code
        self.why = why


def _check(kind: RecordKind, data: Mapping[str, object]) -> None:
    # The schemas are loaded with the first record made (45 declared kinds and their checks),
    # not by every command that imports the core and writes none (verify-log, status, recall).
    from controller.core import record_schema  # noqa: PLC0415

    record_schema.check(kind, data)


def _record(kind: RecordKind, **data: object) -> Action:
    """A record to write, of the shape its kind's schema gives (record_schema.check)."""
    _check(kind, data)
    return Action(ActionKind.RECORD, record=kind, data=data)


def _record_may_wait(kind: RecordKind, **data: object) -> Action:
    _check(kind, data)
    return Action(ActionKind.RECORD, record=kind, data=data, may_wait=True)


def next_round(ctx: RoundContext) -> RoundContext:
    """The context once a round is closed or voided: bets open for the next round number, a
    fresh attempt, and the bank history moved on (621a.11(c): no two banks in a row). A test
    round of service mode is no round of the game: the live bank history stays as it was."""
    is_test = ctx.service_round is not None
    return replace(
        ctx,
        state=S.IDLE,
        round_number=ctx.round_number + 1,
        attempt=1,
        no_rolls=0,
        bank_history=ctx.bank_history if is_test else ctx.bank_history.after_round(ctx.bank_seat),
        bank_seat=None,
        co_bank=False,
        delivery_style=DeliveryStyle.STANDARD,
        deadline=None,
        read_progress=ReadProgress(),
        result=None,
        correction=None,
    )


def live_only(ctx: RoundContext, what: str) -> None:
    """A live event of the table (it changes the live game: the bank rules, the RNG session)
    is not taken in service mode, whose records are test records."""
    if ctx.service_round is not None:
        raise GameRuleError(f"{what} is a live event: leave service mode first")


def need_employee(occ: KeyEvent) -> str:
    """Every action of a person at the service terminal names who did it."""
    if occ.employee is None:
        raise GameRuleError(f"{occ.event} names the employee who does it")
    check_employee_id(occ.employee)
    return occ.employee


def need(value: _T | None, occ: Occurrence) -> _T:
    if value is None:
        raise GameRuleError(f"event {occ.event} lacks its data")
    return value


class Rules:
    """What the handlers share. Each handler returns the next context and the actions;
    ``step`` checks the result against ``TRANSITIONS``."""

    def __init__(self, settings: RoundSettings, wall: int | None = None) -> None:
        self.settings = settings
        self.wall = wall  # the event's UTC milliseconds, when the shell gave them
        self.screens = Screens(settings, wall)

    def _mode(self, ctx: RoundContext) -> Mode:
        return table_mode(self.settings, ctx)

    def _round(self, ctx: RoundContext) -> dict[str, object]:
        return round_fields(ctx)

    def _who(self, ctx: RoundContext, occ: KeyEvent | RngInterrupted) -> dict[str, object]:
        """Who did it: the employee id typed at the service terminal, else (a key of the
        dealer's panel, or the table itself) the dealer signed on for the shift, None when
        none is; and the operating system's account of a terminal command."""
        if not isinstance(occ, KeyEvent):
            return {"employee": ctx.dealer}
        if occ.employee is not None:
            check_employee_id(occ.employee)
        who: dict[str, object] = {
            "employee": occ.employee if occ.employee is not None else ctx.dealer
        }
        return {**who, **self._uid(occ)}

    def _uid(self, occ: KeyEvent) -> dict[str, object]:
        return {} if occ.uid is None else {"uid": occ.uid}

    def _no_roll(self, ctx: RoundContext, reason: NoRollReason) -> Step:
        """The shake or the reading does not count: reshake, or lock at the limit."""
        actions = [_record(RecordKind.NO_ROLL, **self._round(ctx), reason=str(reason))]
        no_rolls = ctx.no_rolls + 1
        ctx = replace(
            ctx,
            no_rolls=no_rolls,
            attempt=ctx.attempt + 1,
            deadline=None,
            read_progress=ReadProgress(),
        )
        if no_rolls >= self.settings.max_reshakes:
            actions.append(
                _record(RecordKind.RESHAKE_LIMIT, round=ctx.round_number, no_rolls=no_rolls)
            )
            actions.append(show(Screen.LOCKED, reason=str(reason), no_rolls=no_rolls))
            return replace(ctx, state=S.LOCKED), actions
        actions.append(
            show(
                Screen.NO_ROLL,
                **self._round(ctx),  # the next attempt, as bets closed again shows it
                reason=str(reason),
                words=reason.plain_words,
                **self.screens.dice(ctx),
            )
        )
        return replace(ctx, state=S.NO_ROLL), actions

    def _latch(self, ctx: RoundContext, fault: Fault, detail: str) -> Step:
        """One fault latch: motor off, every output safe, the fault recorded and shown."""
        if ctx.state is S.FAULT:
            resume = ctx.resume_state
        elif ctx.state in SHAKE_IN_PROGRESS:
            resume = S.ARMED  # the shake is void; the player shakes again once cleared
        else:
            resume = ctx.state
        attempt = ctx.attempt + 1 if ctx.state in SHAKE_IN_PROGRESS else ctx.attempt
        faults = ctx.active_faults | {fault}
        actions = [
            Action(ActionKind.STOP_MOTOR),
            Action(ActionKind.SAFE_STATE, data={"fault": str(fault)}),
            _record(
                RecordKind.FAULT,
                **self._round(ctx),
                fault=str(fault),
                detail=detail,
                state=str(ctx.state),
            ),
        ]
        ctx = replace(
            ctx,
            state=S.FAULT,
            recall=None,
            active_faults=faults,
            resume_state=resume,
            attempt=attempt,
            deadline=None,
            read_progress=ReadProgress(),
        )
        return ctx, [*actions, self.screens.fault(ctx, faults)]

    def _resume(self, ctx: RoundContext) -> Step:
        state = ctx.resume_state or S.IDLE
        ctx = replace(ctx, state=state, resume_state=None)
        return ctx, self.screens.enter(ctx)

    def _count_roll(self, ctx: RoundContext, roll: Roll) -> Step:
        """Issue 15: a result read from the dice is counted, and the monitor's test run on the
        counts since the dice were put in (or kept). A new alarm is recorded with the result;
        play goes on, or the table locks after the round (``lock_on_dice_alarm``). A test round
        of service mode is not counted: it is not a roll of the game."""
        if ctx.service_round is not None:
            return ctx, []
        counts = ctx.dice_counts.after(roll)
        ctx = replace(ctx, dice_counts=counts)
        figure = None if ctx.dice_alarm is not None else alarm(counts.test)
        if figure is None:
            return ctx, []
        raised = DiceAlarm.raised(figure, round_number=ctx.round_number, rolls=counts.test.rolls)
        record = _record(
            RecordKind.DICE_ALARM,
            **self._round(ctx),
            **figure.as_record(),
            rolls=counts.test.rolls,
            counts=counts.test.as_record(),
            dice_set=ctx.dice_set,
            locks=self.settings.lock_on_dice_alarm,
        )
        return replace(ctx, dice_alarm=raised), [record]

    def _locks_on_alarm(self, ctx: RoundContext) -> bool:
        return (
            self.settings.lock_on_dice_alarm
            and ctx.dice_alarm is not None
            and Fault.DICE_ALARM not in ctx.active_faults
            and ctx.service_round is None
            and self._mode(ctx) is not Mode.RNG
        )

    def _dice_acted(self, ctx: RoundContext, record: Action) -> Step:
        """The supervisor replaced the dice, or kept them after an inspection: the alarm (and
        the fault it locked the table with) is cleared; a table locked by it alone resumes."""
        faults = ctx.active_faults - {Fault.DICE_ALARM}
        ctx = replace(ctx, dice_alarm=None, active_faults=faults)
        if ctx.state is not S.FAULT:
            return ctx, [record, *self.screens.shown_again(ctx)]
        if faults:
            return ctx, [record, self.screens.fault(ctx, faults)]
        ctx, actions = self._resume(ctx)
        return ctx, [record, *actions]

    def _check_dice(self, ctx: RoundContext) -> None:
        """Proposed 621a.5(c), failing closed: no shake (nor a manual read) without a dice set
        recorded, nor with dice 24 hours on the table. Service mode tests with any dice."""
        if ctx.service_round is not None:
            return
        why = DICE_LIFE.refusal(ctx, self.wall)
        if why is not None:
            raise Refused(*why)

    def _open_next_round(
        self, ctx: RoundContext, actions: list[Action], *, reshuffled: bool = False
    ) -> Step:
        """Bets open for the next round. ``reshuffled``: the round ended in a reshuffle
        (621a.12(c),(e)), so the next is a new game's first (621a.11(b))."""
        ctx = replace(next_round(ctx), is_round_open=True)
        if reshuffled and ctx.service_round is None:
            ctx = replace(ctx, bank_history=BankHistory.after_shuffle())
        actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
        if self._locks_on_alarm(ctx):
            # issue 15: bets do not open on dice the monitor found loaded
            assert ctx.dice_alarm is not None
            why = f"dice alarm ({ctx.dice_alarm.test}): replace the dice, or inspect and keep them"
            ctx, latched = self._latch(ctx, Fault.DICE_ALARM, why)
            return ctx, [*actions, *latched]
        return ctx, [*actions, *self.screens.enter(ctx)]

    def _result(self, ctx: RoundContext, result: RoundResult) -> Step:
        ctx = replace(ctx, state=S.RESULT, result=result, deadline=None, correction=None)
        record = _record(RecordKind.RESULT, **self._round(ctx), **result.as_record())
        return ctx, [record, *self.screens.enter(ctx)]

    def _settles_wagers(self, ctx: RoundContext) -> bool:
        """Current 621a.5(e)(2)-(4): Sum, Match and Beat It are "based on the value of the dice
        in the manual or player-activated Pai Gow shaker": never on the RNG's."""
        return self._mode(ctx) is not Mode.RNG

    def _void_record(
        self,
        ctx: RoundContext,
        reason: VoidReason,
        occ: KeyEvent | RngInterrupted,
        *,
        state: State | None = None,
        note: str = "",
    ) -> Action:
        """The record of the whole round void (621a.12(c),(e)): where the round stood, why,
        who, that every wager is returned, and whether the tiles are reshuffled (a new game)."""
        return _record(
            RecordKind.VOID,
            **self._round(ctx),
            state=str(ctx.state if state is None else state),
            reason=str(reason),
            wagers="returned",
            reshuffle=reason.reshuffles,
            note=note or occ.detail,
            **self._who(ctx, occ),
        )

    def _software_records(
        self,
        ctx: RoundContext,
        check: SoftwareCheck,
        before: SoftwareIdentity | None,
        *,
        reason: str,
    ) -> list[Action]:
        """The check's record, and ``software_changed`` when the version that runs or the
        manifest's digest differs from the last check's (``before``): the log keeps the
        software's changes, as the issue asks."""
        record = _record(
            RecordKind.SOFTWARE_CHECK, round=ctx.round_number, reason=reason, **check.as_record()
        )
        now = check.identity
        if before is None or before == now:
            return [record]
        changed = _record(
            RecordKind.SOFTWARE_CHANGED,
            round=ctx.round_number,
            previous=before.as_record(),
            now=now.as_record(),
        )
        return [record, changed]
