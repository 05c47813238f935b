"""Faults: the sensor, the motor, the tamper loop, the program verification, the clock, the
witness's cosignatures and the evidence of a rollback; each latches its fault (every output
safe) or is recorded, and ``clear_fault`` clears them by one table. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from controller.core.evolve import replace
from controller.core.faults import Clearing, clearing_of
from controller.core.records import RecordKind
from controller.core.table_events import (
    ClearFault,
    ClockChanged,
    FaultRaised,
    MotorOverran,
    RollbackEvidence,
    Secured,
    SensorBack,
    SensorLost,
    SensorTimedOut,
    SoftwareChecked,
    Tampered,
    WitnessCosigned,
)
from controller.core.table_rules import (
    Refused,
    Rules,
    _record,
    _record_may_wait,
)
from controller.core.table_types import (
    Action,
    ActionKind,
    Fault,
    Mode,
    Refusal,
    RoundContext,
    State,
    Step,
)
from controller.errors import GameRuleError

S = State


class FaultRules(Rules):
    """The handlers of faults, and their clearing."""

    def _sensor_fault(
        self, ctx: RoundContext, occ: SensorTimedOut | SensorLost, fault: Fault
    ) -> Step:
        note = _record(RecordKind.SENSOR, fault=str(fault), detail=occ.detail)
        if self._mode(ctx) is Mode.RNG or fault in ctx.active_faults:
            return ctx, [note]  # the RNG table does not need the sensor; a repeat adds nothing
        ctx, actions = self._latch(ctx, fault, occ.detail)
        return ctx, [note, *actions]

    def sensor_timeout(self, ctx: RoundContext, occ: SensorTimedOut) -> Step:
        return self._sensor_fault(ctx, occ, Fault.SENSOR_TIMEOUT)

    def sensor_lost(self, ctx: RoundContext, occ: SensorLost) -> Step:
        ctx = replace(ctx, is_sensor_present=False)
        return self._sensor_fault(ctx, occ, Fault.SENSOR_LOST)

    def sensor_back(self, ctx: RoundContext, occ: SensorBack) -> Step:
        ctx = replace(ctx, is_sensor_present=True)
        return ctx, [_record(RecordKind.SENSOR, present=True, detail=occ.detail)]

    def motor_overrun(self, ctx: RoundContext, occ: MotorOverran) -> Step:
        return self._latch(ctx, Fault.MOTOR_OVERRUN, occ.detail)

    def tamper(self, ctx: RoundContext, occ: Tampered) -> Step:
        """N.J.A.C. 13:69E-1.16A: the shaker is secured to the table; removed or tilted latches.
        The loop's opening is recorded (and counted), whatever the state."""
        opened = [] if not ctx.is_secured else [self._tamper_loop(ctx, closed=False)]
        ctx, actions = self._latch(replace(ctx, is_secured=False), Fault.TAMPER, occ.detail)
        return ctx, [*opened, *actions]

    def secured(self, ctx: RoundContext, occ: Secured) -> Step:
        """The tamper loop closed again: recorded; the fault stays until cleared."""
        if ctx.is_secured:
            return ctx, []
        return replace(ctx, is_secured=True), [self._tamper_loop(ctx, closed=True)]

    def _tamper_loop(self, ctx: RoundContext, *, closed: bool) -> Action:
        return _record(
            RecordKind.TAMPER_LOOP, round=ctx.round_number, closed=closed, state=str(ctx.state)
        )

    def fault(self, ctx: RoundContext, occ: FaultRaised) -> Step:
        if occ.fault is Fault.DICE_ALARM:
            # issue 15: the alarm latches by the dice monitor's test, with the alarm it clears
            # by; latched bare, it would leave a context no start could read (snapshot.py)
            raise GameRuleError("a dice alarm is raised by the dice monitor, not by an event")
        return self._latch(ctx, occ.fault, occ.detail)

    def software_checked(self, ctx: RoundContext, occ: SoftwareChecked) -> Step:
        """Program verification, periodically (N.J.A.C. 13:69E-1.28H, 9 NYCRR 5319.14, AGCO 22
        as the issue cites them): every check is recorded; a failed one latches the
        ``software_identity`` fault, which the supervisor clears once a check has passed."""
        check = occ.software
        ctx = replace(ctx, is_software_verified=not check.is_fault)
        records = self._software_records(ctx, check, occ.software_before, reason="periodic")
        if not check.is_fault or Fault.SOFTWARE_IDENTITY in ctx.active_faults:
            return ctx, records
        ctx, latched = self._latch(ctx, Fault.SOFTWARE_IDENTITY, check.summary())
        return ctx, [*records, *latched]

    def clock_changed(self, ctx: RoundContext, occ: ClockChanged) -> Step:
        """The OS's clock became synchronised to its time source, or stopped being: recorded
        once per change (the shell asks now and then, and sends only a change)."""
        clock = occ.clock
        return ctx, [_record(RecordKind.CLOCK_STATUS, round=ctx.round_number, clock=str(clock))]

    def cosigned(self, ctx: RoundContext, occ: WitnessCosigned) -> Step:
        """The witness vouched for the log up to a round's close (the shell sends one per round
        close, controller/fleet): recorded in any state, nothing else changes. It may wait for
        the next step's transaction: nothing shown depends on it."""
        data = occ.cosignature
        return ctx, [_record_may_wait(RecordKind.COSIGNED, **{**data, "round": ctx.round_number})]

    def rollback_evidence(self, ctx: RoundContext, occ: RollbackEvidence) -> Step:
        """The witness cosigned a checkpoint of this log, signed by this log's own key, that
        this log no longer holds: a size larger than the log, or another root at that size.
        The log went back (an older copy of it, a card swapped): the cosignature is recorded as
        the evidence (``rollback_evidence``: the cosigned note as it came, and what the log
        holds) and ``log_rollback`` latches, as when the anchor outside the log disagrees; the
        supervisor clears it, accepting the log as it is (its checkpoint the new anchor)."""
        data = occ.cosignature
        record = _record(RecordKind.ROLLBACK_EVIDENCE, **{**data, "round": ctx.round_number})
        if Fault.LOG_ROLLBACK in ctx.active_faults:
            return ctx, [record]
        size, held = data.get("size"), data.get("log_size")
        why = f"the witness cosigned this log at {size} records; it holds {held}"
        ctx, latched = self._latch(ctx, Fault.LOG_ROLLBACK, why)
        return ctx, [record, *latched]

    def clear_fault(self, ctx: RoundContext, occ: ClearFault) -> Step:
        """CLEAR FAULT (the dealer's key, the supervisor key, or the service terminal): every
        active fault that this key may clear and whose cause is gone, by ``CLEARING``; the
        reshake limit (LOCKED) by the row ``reshake_limit`` of controller/core/faults.py."""
        if ctx.state is S.LOCKED:
            return self._clear_reshake_limit(ctx, occ)
        clearable = frozenset(f for f in ctx.active_faults if may_clear(f, ctx, occ))
        if not clearable:
            raise Refused(*why_not_cleared(ctx, occ))
        remaining = ctx.active_faults - clearable
        why = {"note": occ.detail} if any(f.needs_reason for f in clearable) else {}
        record = _record(
            RecordKind.FAULT_CLEARED,
            round=ctx.round_number,
            faults=sorted(str(f) for f in clearable),
            supervisor=occ.supervisor,
            **self._who(ctx, occ),
            **why,
        )
        ctx = replace(ctx, active_faults=frozenset(remaining))
        # The supervisor accepts the log as it is: its checkpoint becomes the new anchor.
        accepted = {Fault.LOG_ROLLBACK, Fault.ANCHOR_MISSING}
        reanchor = [Action(ActionKind.REANCHOR)] if accepted & clearable else []
        if remaining:
            return ctx, [record, *reanchor, self.screens.fault(ctx, frozenset(remaining))]
        ctx, actions = self._resume(ctx)
        return ctx, [record, *reanchor, *actions]

    def _clear_reshake_limit(self, ctx: RoundContext, occ: ClearFault) -> Step:
        if not CLEARING[clearing_of("reshake_limit")](occ):
            raise Refused(
                Refusal.SUPERVISOR_KEY, "the reshake limit is cleared with the supervisor key"
            )
        ctx = replace(ctx, state=S.ARMED, no_rolls=0)
        record = _record(
            RecordKind.SUPERVISOR_ACTION,
            **self._round(ctx),
            action="clear_reshake_limit",
            **self._who(ctx, occ),
        )
        return ctx, [record, *self.screens.enter(ctx)]


def _never(occ: ClearFault) -> bool:
    return False


def _with_note(occ: ClearFault) -> bool:
    return occ.supervisor and occ.employee is not None and bool(occ.detail.strip())


# Who may clear a fault with CLEAR FAULT, by how controller/core/faults.py says it is cleared.
CLEARING: Mapping[Clearing, Callable[[ClearFault], bool]] = {
    Clearing.DEALER_KEY: lambda occ: True,
    Clearing.SUPERVISOR_KEY: lambda occ: occ.supervisor,
    Clearing.SUPERVISOR_NOTE: _with_note,  # at the terminal: the key, who, and why
    Clearing.DICE_ACTION: _never,  # the dice replaced, or inspected and kept
    Clearing.TERMINAL_RECORD: _never,  # a record at the terminal (not a fault of the core)
    Clearing.RESTART: _never,  # a technician's repair, then a restart
    Clearing.ITSELF: _never,  # a notice, not a fault of the core
}

# What a fault's cause must be before it clears (a fault not named: nothing).
CAUSE_GONE: Mapping[Fault, Callable[[RoundContext], bool]] = {
    Fault.SENSOR_LOST: lambda ctx: ctx.is_sensor_present,
    Fault.TAMPER: lambda ctx: ctx.is_secured,  # the shaker secured again
    Fault.SOFTWARE_IDENTITY: lambda ctx: ctx.is_software_verified,  # a check passed since
}


def _any_cleared_by(ctx: RoundContext, clearing: Clearing) -> bool:
    return any(f.clearing is clearing for f in ctx.active_faults)


# Why nothing was cleared: the first row that holds gives the refusal's code and words.
NOT_CLEARED: tuple[tuple[Callable[[RoundContext, ClearFault], bool], Refusal, str], ...] = (
    (
        lambda ctx, occ: Fault.LOG_DAMAGED in ctx.active_faults,
        Refusal.FAULT_NEEDS_RESTART,
        "restore the damaged audit log from a backup, then restart",
    ),
    (
        lambda ctx, occ: _any_cleared_by(ctx, Clearing.RESTART),
        Refusal.FAULT_NEEDS_RESTART,
        "restore the log's own signing key, then restart",
    ),
    (
        lambda ctx, occ: (
            Fault.SOFTWARE_IDENTITY in ctx.active_faults and not ctx.is_software_verified
        ),
        Refusal.FAULT_NEEDS_RESTART,
        "the software does not match its signed manifest: reinstall the release"
        " and restart (paigow-controller verify-software says what differs)",
    ),
    (
        lambda ctx, occ: _any_cleared_by(ctx, Clearing.DICE_ACTION),
        Refusal.FAULT_NEEDS_DICE_ACTION,
        "a dice alarm is cleared by replacing the dice or keeping them after"
        " inspection (supervisor)",
    ),
    (
        lambda ctx, occ: occ.supervisor and _any_cleared_by(ctx, Clearing.SUPERVISOR_NOTE),
        Refusal.FAULT_NEEDS_TERMINAL,
        "a missing anchor is cleared at the service terminal with the supervisor"
        " key, the employee id and a note saying why",
    ),
    (
        lambda ctx, occ: True,
        Refusal.FAULT_NOT_CLEARED,
        "this fault needs the supervisor key or its cause removed",
    ),
)


def may_clear(fault: Fault, ctx: RoundContext, occ: ClearFault) -> bool:
    """This CLEAR FAULT clears ``fault``: the one who pressed it may, and its cause is gone."""
    cause_gone = CAUSE_GONE.get(fault)
    return CLEARING[fault.clearing](occ) and (cause_gone is None or cause_gone(ctx))


def why_not_cleared(ctx: RoundContext, occ: ClearFault) -> tuple[Refusal, str]:
    return next((code, why) for holds, code, why in NOT_CLEARED if holds(ctx, occ))
