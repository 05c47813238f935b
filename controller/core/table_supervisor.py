"""What the supervisor (or the floorperson) does: the dice replaced or kept, the tiles
inspected, a new shift, game recall, the shaker's inspection, a result corrected, the mode
switched, a round voided. Pure: no I/O."""

from __future__ import annotations

from controller.core.dice import Roll
from controller.core.evolve import replace
from controller.core.position import BankHistory, Game
from controller.core.records import RecordKind
from controller.core.result import result_of_roll
from controller.core.screens import noting_the_void, show
from controller.core.table_events import (
    CorrectResult,
    DiceKept,
    DiceReplaced,
    ModeSwitch,
    Recall,
    ShakerInspected,
    ShiftChange,
    TilesInspected,
    VoidRound,
)
from controller.core.table_life import DICE_LIFE, TILES_LIFE, check_dice_set_id, check_employee_id
from controller.core.table_rules import (
    Refused,
    Rules,
    _record,
    live_only,
    need,
    need_employee,
    next_round,
)
from controller.core.table_types import (
    DICE_FAULTS,
    RECALL_DEPTH,
    Action,
    ActionKind,
    Correction,
    Mode,
    Refusal,
    RoundContext,
    Screen,
    State,
    Step,
    VoidReason,
)
from controller.errors import GameRuleError

S = State
# the dealer's void key, before any dice are at rest (after: the supervisor, with a reason)
DEALER_VOIDS = (S.ARMED, S.NO_ROLL, S.WAITING, S.SHAKING, S.DRAWING)


def _same_dice(one: Roll, other: Roll) -> bool:
    """The same three dice: the red die alike and the two blue alike in either order."""
    return one.red == other.red and sorted(one.blue) == sorted(other.blue)


def _next_dice_set(current: str | None) -> str:
    """The next number after a numbered set; "1" after none or a named one."""
    if current is not None and current.isascii() and current.isdigit():
        return str(int(current) + 1)
    return "1"


class SupervisorRules(Rules):
    """The supervisor's handlers (and the floorperson's, and a shift's)."""

    def shift_change(self, ctx: RoundContext, occ: ShiftChange) -> Step:
        """A new dealer shift: from the panel's key (the new dealer not named yet), or signed on
        at the service terminal with the dealer's employee id, which the records of the dealer's
        keys carry from then on. In RNG mode the session is revealed and a new one committed,
        shown before the new shift's first bets close (621a.8(a)(1))."""
        live_only(ctx, "a shift change")
        if occ.employee is not None:
            check_employee_id(occ.employee)
        ctx = replace(ctx, dice_counts=ctx.dice_counts.new_shift(), dealer=occ.employee)
        record = _record(
            RecordKind.SHIFT_CHANGE, round=ctx.round_number, dealer=occ.employee, **self._uid(occ)
        )
        actions = [record]
        if self._mode(ctx) is Mode.RNG:
            actions.append(Action(ActionKind.CLOSE_RNG, data={"reason": "shift_change"}))
        return ctx, [*actions, *self.screens.enter(ctx)]

    def tiles_inspected(self, ctx: RoundContext, occ: TilesInspected) -> Step:
        """621a.6(a): a set of tiles received at the table is sorted and inspected by the dealer
        and the inspection verified by the floorperson (the supervisor key, the floorperson's
        employee id); its 12 hours (621a.3(e)) start, and it is a new game (621a.11(b))."""
        if self.settings.game is not Game.TILES:
            raise GameRuleError("Pai Gow Poker has no tiles")
        live_only(ctx, "a tile inspection")
        if not occ.supervisor:
            raise Refused(
                Refusal.SUPERVISOR_KEY,
                "the floorperson verifies the inspection with the supervisor key",
            )
        employee = need_employee(occ)
        tile_set = occ.tile_set
        check_dice_set_id(tile_set, what="a tile set id")
        dealer = occ.dealer
        check_employee_id(dealer)
        record = _record(
            RecordKind.TILES_INSPECTED,
            round=ctx.round_number,
            tile_set=tile_set,
            dealer=dealer,
            employee=employee,
            previous=ctx.tiles_set,
            previous_age_ms=TILES_LIFE.age(ctx, self.wall),
            wall_ms=self.wall,
            table_ms=ctx.table_ms,
            **self._uid(occ),
        )
        ctx = replace(
            ctx,
            tiles_set=tile_set,
            tiles_since=self.wall,
            tiles_since_table=ctx.table_ms,
            bank_history=BankHistory.after_shuffle(),
        )
        return ctx, [record, *self.screens.shown_again(ctx)]

    def dice_replaced(self, ctx: RoundContext, occ: DiceReplaced) -> Step:
        """Proposed 621a.5(c): a new dice set, its id typed at the service terminal or the
        next number; the 24 hours start again, in the table's time. Between shakes, with the
        supervisor key and the supervisor's employee id."""
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "replacing the dice needs the supervisor key")
        employee = need_employee(occ)
        wall = need(occ.wall, occ)
        dice_set = occ.dice_set if occ.dice_set is not None else _next_dice_set(ctx.dice_set)
        check_dice_set_id(dice_set)
        alarm_cleared = (
            {} if ctx.dice_alarm is None else {"alarm_cleared": str(ctx.dice_alarm.test)}
        )
        record = _record(
            RecordKind.DICE_REPLACED,
            round=ctx.round_number,
            dice_set=dice_set,
            previous=ctx.dice_set,
            previous_age_ms=DICE_LIFE.age(ctx, wall),
            wall_ms=wall,
            table_ms=ctx.table_ms,
            employee=employee,
            **self._uid(occ),
            **alarm_cleared,
        )
        counts = ctx.dice_counts.replaced()
        ctx = replace(
            ctx,
            dice_set=dice_set,
            dice_since=wall,
            dice_since_table=ctx.table_ms,
            dice_counts=counts,
        )
        return self._dice_acted(ctx, record)

    def dice_kept(self, ctx: RoundContext, occ: DiceKept) -> Step:
        """Issue 15: after a dice alarm the supervisor inspected the dice and keeps them (the
        note says what was checked); the monitor's test starts again on them."""
        if not occ.supervisor:
            raise Refused(
                Refusal.SUPERVISOR_KEY,
                "keeping the dice after an alarm needs the supervisor key",
            )
        employee = need_employee(occ)
        if ctx.dice_alarm is None:
            raise Refused(Refusal.NOTHING_TO_CLEAR, "there is no dice alarm to clear")
        record = _record(
            RecordKind.SUPERVISOR_ACTION,
            round=ctx.round_number,
            action="dice_kept",
            detail=occ.detail,
            alarm=ctx.dice_alarm.as_record(),
            counts=ctx.dice_counts.test.as_record(),
            wall_ms=need(occ.wall, occ),
            employee=employee,
            **self._uid(occ),
        )
        ctx = replace(ctx, dice_counts=ctx.dice_counts.kept())
        return self._dice_acted(ctx, record)

    def recall(self, ctx: RoundContext, occ: Recall) -> Step:
        """AGCO 13.1.1: with the supervisor key the display recalls one of the last rounds
        (``back`` 1 is the newest, the round in play), clearly marked; it steps through them,
        and leaving shows where the table was. Nothing changes in the round meanwhile (see
        ``step``); a fault ends it. Entering and leaving are recorded, with who."""
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "game recall needs the supervisor key")
        employee = need_employee(occ)
        who = {"employee": employee, **self._uid(occ)}
        if occ.back is None:
            if ctx.recall is None:
                raise Refused(Refusal.NOT_RECALLING, "the display is not recalling a round")
            ctx = replace(ctx, recall=None)
            left = _record(
                RecordKind.SUPERVISOR_ACTION, round=ctx.round_number, action="recall_left", **who
            )
            if ctx.state is S.FAULT:
                return ctx, [left, self.screens.fault(ctx, ctx.active_faults)]
            return ctx, [left, *self.screens.shown_again(ctx)]
        deepest = min(RECALL_DEPTH, ctx.round_number)
        if not 1 <= occ.back <= deepest:
            raise GameRuleError(f"recall goes back 1 to {deepest} rounds, not {occ.back}")
        actions = []
        if ctx.recall is None:
            actions.append(
                _record(
                    RecordKind.SUPERVISOR_ACTION,
                    round=ctx.round_number,
                    action="recall_entered",
                    **who,
                )
            )
        ctx = replace(ctx, recall=occ.back)
        return ctx, [*actions, show(Screen.RECALL, round=ctx.round_number, back=occ.back)]

    def shaker_inspected(self, ctx: RoundContext, occ: ShakerInspected) -> Step:
        """N.J.A.C. 13:69E-1.16A: the shaker's end-of-day inspection, by the supervisor."""
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "the shaker inspection needs the supervisor key")
        record = _record(
            RecordKind.SUPERVISOR_ACTION,
            round=ctx.round_number,
            action="shaker_inspected",
            detail=occ.detail,
            wall_ms=need(occ.wall, occ),
            employee=need_employee(occ),
            **self._uid(occ),
        )
        return ctx, [record]

    def correct_result(self, ctx: RoundContext, occ: CorrectResult) -> Step:
        """N.J.A.C. 13:69E-1.28P(d): the supervisor corrects a result to the dice as they lie
        (a misread, a patron's complaint, surveillance's review), with the supervisor key, a
        reason and an employee id. Never a re-roll and never a redraw (N.J.A.C. 13:69E-1.28G:
        no secondary selection): the round keeps its one ``result``; ``result_corrected``
        follows it with the dice read and the dice seen, and the wagers settle on the dice
        seen. The dealer deals from the corrected count; once tiles went to the wrong
        positions the remedy is the round's void (621a.12(c)). An RNG result is never
        corrected: the RNG's number is the selection (N.J.A.C. 13:69E-1.28G)."""
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "correcting a result needs the supervisor key")
        employee = need_employee(occ)
        reason = occ.correction
        seen = occ.dice_seen
        meant = occ.result_meant
        read = self._check_correction(ctx, meant, seen)
        corrected = result_of_roll(
            self.settings.game,
            seen,
            bank_seat=ctx.bank_seat,
            paytables=self.settings.paytables,
        )
        correction = Correction(read, reason, employee)
        record = _record(
            RecordKind.RESULT_CORRECTED,
            **self._round(ctx),
            dice_read=read.as_record(),
            dice_seen=seen.as_record(),
            reason=str(reason),
            employee=employee,
            note=occ.detail,
            result=corrected.as_record(),
            **self._uid(occ),
        )
        ctx = replace(ctx, result=corrected, correction=correction)
        return ctx, [record, *self.screens.enter(ctx)]

    def _check_correction(self, ctx: RoundContext, meant: tuple[int, int], seen: Roll) -> Roll:
        """The dice the result shown was read from, once this correction may be made: the
        result meant is the one shown, a live round's, from the dice, not corrected yet, and
        the dice seen differ from them."""
        result = ctx.result
        assert result is not None
        if meant != (ctx.round_number, ctx.attempt):
            # a command repeated, or two supervisors at once, never corrects another result
            raise Refused(
                Refusal.NOT_THE_RESULT_SHOWN,
                f"round {meant[0]} attempt {meant[1]} is not the result shown (round"
                f" {ctx.round_number} attempt {ctx.attempt}): nothing corrected",
            )
        if ctx.service_round is not None:
            raise Refused(
                Refusal.TEST_ROUND, "a test round of service mode has no wagers to correct"
            )
        if self._mode(ctx) is Mode.RNG or result.roll is None or result.wagers is None:
            raise Refused(
                Refusal.RNG_RESULT_STANDS,
                "an RNG result is never corrected or redrawn (N.J.A.C. 13:69E-1.28G); void"
                " the round if it cannot stand",
            )
        if ctx.correction is not None:
            raise Refused(
                Refusal.CORRECTED_ALREADY,
                "this result was corrected already: void the round if the correction is wrong",
            )
        if _same_dice(seen, result.roll):
            raise Refused(
                Refusal.NOTHING_TO_CORRECT,
                "the dice seen are the dice read: nothing to correct",
            )
        return result.roll

    def mode_switch(self, ctx: RoundContext, occ: ModeSwitch) -> Step:
        """Current 621a.6(a): the supervisor switches between the modes this table allows,
        between rounds; and out of a fault of the dice (the sensor, the motor) to the RNG, which
        needs neither. Leaving RNG mode reveals its session; entering it commits one, shown
        before the next bets close (621a.8(a)(1)). A round whose bets closed under the old mode
        is void (its RNG commitment, or its dice, belong to the old one)."""
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "switching the mode needs the supervisor key")
        employee = need_employee(occ)
        if ctx.service_round is not None:
            raise Refused(Refusal.IN_SERVICE_MODE, "leave service mode to switch the mode")
        to = occ.mode
        current = self._mode(ctx)
        self._check_switch(ctx, to, current)
        cleared = ctx.active_faults & DICE_FAULTS if ctx.state is S.FAULT else frozenset()
        actions: list[Action] = []
        resume = ctx.resume_state
        in_play = ctx.state is S.FAULT and resume not in (None, S.IDLE, S.RESULT)
        if in_play:
            actions.append(
                self._void_record(
                    ctx, VoidReason.MODE_SWITCH, occ, state=resume, note=f"mode switch to {to}"
                )
            )
        actions.append(
            _record(
                RecordKind.MODE_CHANGED,
                round=ctx.round_number + 1 if in_play else ctx.round_number,
                previous=str(current),
                mode=str(to),
                cleared=sorted(str(f) for f in cleared),
                employee=employee,
                **self._uid(occ),
            )
        )
        if current is Mode.RNG:
            actions.append(Action(ActionKind.CLOSE_RNG, data={"reason": "mode_switch"}))
        ctx = replace(ctx, mode=to, active_faults=ctx.active_faults - cleared)
        if in_play:
            ctx = replace(next_round(ctx), is_round_open=True, state=S.FAULT, resume_state=S.IDLE)
            actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
        if ctx.state is S.IDLE:
            return ctx, [*actions, *self.screens.enter(ctx)]
        if ctx.active_faults:  # what the RNG cannot do without stays (a tamper, the log)
            return ctx, [*actions, self.screens.fault(ctx, ctx.active_faults)]
        ctx, resumed = self._resume(ctx)
        return ctx, [*actions, *resumed]

    def _check_switch(self, ctx: RoundContext, to: Mode, current: Mode) -> None:
        """The switch to ``to`` may be made: this table allows it, the table is not in it,
        the dice sensor answers for a mode with dice, and out of a fault only to the RNG."""
        if to not in self.settings.allowed_modes:
            raise GameRuleError(f"{to} mode is not allowed at this table ([table] modes)")
        if to is current:
            raise Refused(Refusal.MODE_ALREADY, f"the table is already in {to} mode")
        if to is not Mode.RNG and not ctx.is_sensor_present:
            raise Refused(Refusal.SENSOR_NOT_CONNECTED, "the dice sensor is not connected")
        if ctx.state is S.FAULT and to is not Mode.RNG:
            raise Refused(
                Refusal.RNG_ONLY_IN_FAULT, "out of a fault the table switches to the RNG only"
            )

    def void_round(self, ctx: RoundContext, occ: VoidRound) -> Step:
        """621a.12(c),(e): all hands void, every wager returned, and the round ends without a
        result (it is never played again: the next round opens). The dealer's void key does
        it only before any dice are at rest (bets closed, a shake, a no roll, the RNG's
        draw); from then on, and over a result, a fault or a locked table, the supervisor
        does it at the service terminal with the supervisor key, a reason and an employee id,
        naming the round. A void for a wrong count or an exposed tile reshuffles the tiles:
        the next round is a new game's first (621a.11(b))."""
        if occ.void_reason is None:
            if ctx.state not in DEALER_VOIDS:
                raise Refused(
                    Refusal.VOID_AT_TERMINAL,
                    "the dice are at rest: the supervisor voids the round at the service"
                    " terminal, with a reason",
                )
            reason = VoidReason.DEALER_KEY
        else:
            if not occ.supervisor:
                raise Refused(Refusal.SUPERVISOR_KEY, "voiding a round needs the supervisor key")
            need_employee(occ)
            reason = occ.void_reason
            if not reason.is_typed:
                raise GameRuleError(f"{reason} is the table's own reason for a void")
            meant = need(occ.round_meant, occ)
            if meant != ctx.round_number:
                raise Refused(
                    Refusal.NOT_THE_ROUND_IN_PLAY,
                    f"round {meant} is not the round in play (round {ctx.round_number}):"
                    " nothing voided",
                )
        if ctx.state is S.FAULT and ctx.resume_state in (None, S.IDLE):
            raise Refused(Refusal.NO_ROUND_IN_PLAY, "no round is in play: its bets are open")
        voided = {"round": ctx.round_number, "reason": str(reason)}
        actions = [Action(ActionKind.STOP_MOTOR), self._void_record(ctx, reason, occ)]
        if ctx.state is S.FAULT:
            # The round is void; the fault stays until cleared (AGCO 11.1). What the next round
            # shows (and prepares) waits for the clear.
            ctx, opened = self._open_next_round(ctx, actions, reshuffled=reason.reshuffles)
            opened = [a for a in opened if a.kind in (ActionKind.STOP_MOTOR, ActionKind.RECORD)]
            return replace(ctx, state=S.FAULT, resume_state=S.IDLE), opened
        ctx, opened = self._open_next_round(ctx, actions, reshuffled=reason.reshuffles)
        return ctx, noting_the_void(opened, voided)
