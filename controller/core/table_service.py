"""9 NYCRR 5319.58: service mode, its test rounds and its lamp test. Pure: no I/O."""

from __future__ import annotations

from controller.core.dealing import DeliveryStyle
from controller.core.dice import ReadProgress
from controller.core.evolve import replace
from controller.core.records import RecordKind
from controller.core.table_events import (
    LampTest,
    ServiceMode,
)
from controller.core.table_rules import (
    SHAKE_IN_PROGRESS,
    Refused,
    Rules,
    _record,
    need_employee,
    next_round,
)
from controller.core.table_types import (
    Action,
    ActionKind,
    Refusal,
    RoundContext,
    State,
    Step,
    VoidReason,
)

S = State

_TEST_RECORDS = frozenset(
    {
        RecordKind.ROUND_OPENED,
        RecordKind.NO_MORE_BETS,
        RecordKind.SHUFFLE,
        RecordKind.TILES_SHUFFLED,
        RecordKind.SHAKE,
        RecordKind.READING,
        RecordKind.NO_ROLL,
        RecordKind.RESULT,
        RecordKind.VOID,
        RecordKind.RESULT_VOIDED,
        RecordKind.CLOSE,
        RecordKind.RESHAKE_LIMIT,
        RecordKind.BANK_SELECTED,
        RecordKind.DELIVERY_STYLE,
        RecordKind.SHIFT_CHANGE,
        RecordKind.INTERRUPTED,
    }
)
NOT_IN_SERVICE = frozenset({ActionKind.PREPARE_RNG, ActionKind.CLOSE_RNG, ActionKind.DRAW_NUMBER})


def in_service(action: Action) -> Action:
    """An action of a step taken in service mode: a game record becomes a ``service_test``
    record naming it; another record with a round (a fault, a recovery) and a screen say
    SERVICE."""
    if action.kind is ActionKind.SHOW:
        return replace(action, data={**action.data, "service": True})
    if action.kind is ActionKind.RECORD and action.record in _TEST_RECORDS:
        assert action.record is not None
        return replace(
            action,
            record=RecordKind.SERVICE_TEST,
            data={"record": str(action.record), **action.data},
        )
    if action.kind is ActionKind.RECORD and "round" in action.data:
        # a live record (a fault, a recovery, a shutdown) made in service mode: its round is a
        # test round's number, and says so
        return replace(action, data={**action.data, "service": True})
    return action


class ServiceRules(Rules):
    """Service mode: entered and left with the supervisor key; the lamp test."""

    def service_mode(self, ctx: RoundContext, occ: ServiceMode) -> Step:
        """9 NYCRR 5319.58: service mode, with the supervisor key. Entered with bets open (a
        round in play without a result is void first); every screen says SERVICE; the rounds
        played in it are test rounds, recorded as ``service_test`` (never a live result, never
        a live record on the feed), so the technician can fire the shaker, read the dice and
        light every lamp. Leaving it, from any state, returns to bets open of the live round (or
        to the fault, if one is active)."""
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "service mode needs the supervisor key")
        employee = need_employee(occ)
        if ctx.service_round is not None:
            return self._leave_service(ctx, occ)
        if ctx.state is S.RESULT:
            raise Refused(Refusal.ROUND_NOT_CLOSED, "close the round before service mode")
        if ctx.state in (S.FAULT, *SHAKE_IN_PROGRESS, S.DRAWING):
            raise Refused(
                Refusal.NOT_BETWEEN_SHAKES,
                "service mode is entered with bets open, or between shakes",
            )
        actions: list[Action] = []
        if ctx.state is not S.IDLE:  # bets closed, no result: the round is void
            actions.append(self._void_record(ctx, VoidReason.SERVICE_MODE, occ))
            ctx = replace(next_round(ctx), is_round_open=True)
            actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
        actions.append(
            _record(
                RecordKind.SERVICE_MODE,
                round=ctx.round_number,
                entered=True,
                employee=employee,
                **self._uid(occ),
            )
        )
        ctx = replace(ctx, service_round=ctx.round_number)
        shown = [in_service(a) for a in self.screens.enter(ctx) if a.kind is ActionKind.SHOW]
        return ctx, [*actions, *shown, Action(ActionKind.LAMP_TEST)]

    def _leave_service(self, ctx: RoundContext, occ: ServiceMode) -> Step:
        assert ctx.service_round is not None
        tests = ctx.round_number - ctx.service_round
        actions = [
            Action(ActionKind.STOP_MOTOR),
            _record(
                RecordKind.SERVICE_MODE,
                round=ctx.service_round,
                entered=False,
                test_rounds=tests,
                state=str(ctx.state),
            ),
        ]
        ctx = replace(
            ctx,
            state=S.FAULT if ctx.active_faults else S.IDLE,
            resume_state=S.IDLE if ctx.active_faults else None,
            round_number=ctx.service_round,
            service_round=None,
            attempt=1,
            no_rolls=0,
            bank_seat=None,
            co_bank=False,
            delivery_style=DeliveryStyle.STANDARD,
            deadline=None,
            read_progress=ReadProgress(),
            result=None,
        )
        if ctx.active_faults:
            return ctx, [*actions, self.screens.fault(ctx, ctx.active_faults)]
        return ctx, [*actions, *self.screens.enter(ctx)]

    def lamp_test(self, ctx: RoundContext, occ: LampTest) -> Step:
        if not occ.supervisor:
            raise Refused(Refusal.SUPERVISOR_KEY, "the lamp test needs the supervisor key")
        if ctx.service_round is None:
            raise Refused(Refusal.NOT_IN_SERVICE_MODE, "the lamp test is part of service mode")
        return ctx, [Action(ActionKind.LAMP_TEST)]
