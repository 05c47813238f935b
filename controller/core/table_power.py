"""The controller's life: power on (what the log holds taken up again), an orderly stop,
and the table's time noted in the log. Pure: no I/O."""

from __future__ import annotations

from controller.core.dice import ReadProgress
from controller.core.evolve import replace
from controller.core.records import RecordKind
from controller.core.table_events import (
    PowerOn,
    Shutdown,
    TableTime,
)
from controller.core.table_rules import (
    SHAKE_IN_PROGRESS,
    Rules,
    _record,
)
from controller.core.table_types import (
    Action,
    ActionKind,
    Fault,
    Mode,
    RoundContext,
    State,
    Step,
)

S = State


class PowerRules(Rules):
    """Power on, shutdown and the table's time."""

    def table_time(self, ctx: RoundContext, occ: TableTime) -> Step:
        """The table's time, kept in the log now and then so that dice and tile life survive
        a power cut however long the table stood idle (the loop sends this periodically)."""
        record = _record(
            RecordKind.TABLE_TIME, round=ctx.round_number, table_ms=ctx.table_ms, wall_ms=self.wall
        )
        return ctx, [record]

    def power_on(self, ctx: RoundContext, occ: PowerOn) -> Step:
        """The first step after power on, from the context the log holds (AGCO 5.1: an
        interrupted game is kept until recovered; AGCO 11.1: an error persists across a power
        cycle until it is cleared).

        A committed result is shown again, never re-drawn or re-read; a shake (or a reading)
        without a committed result is void and the player shakes again (the next attempt); a
        pending RNG draw is taken up again: the shell uses the number recorded for it, and
        without one the round is void (``RNG_INTERRUPTED``: its session ended with the power);
        a fault stays active with every output safe. ``occ.fault`` is a fault the shell found
        while opening the log (a log rolled back behind its anchor): it latches last.

        ``occ.software`` is the program verification at start: recorded (``software_check``,
        and ``software_changed`` when the software differs from the last check's), and a
        failure latches ``software_identity``. ``occ.clock`` says whether the OS's clock is
        synchronised: ``power_on`` carries it, so that a reader knows whether to trust the
        records' times."""
        previous = _previous_run(ctx)
        actions = self._started(occ, previous)
        software_fault = None
        if occ.software is not None:
            # program verification at start (and a change since the last check recorded)
            ctx = replace(ctx, is_software_verified=not occ.software.is_fault)
            actions.extend(
                self._software_records(ctx, occ.software, occ.software_before, reason="power_on")
            )
            if occ.software.is_fault and Fault.SOFTWARE_IDENTITY not in ctx.active_faults:
                software_fault = occ.software.summary()
        ctx = _taken_up(ctx, occ)
        if not ctx.is_round_open:
            actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
            ctx = replace(ctx, is_round_open=True)
        ctx, voided = self._shake_voided(ctx, actions)
        if ctx.state is S.NO_ROLL and ctx.no_rolls >= self.settings.max_reshakes:
            # The reshake limit was lowered in the configuration since the last no roll.
            actions.append(
                _record(RecordKind.RESHAKE_LIMIT, round=ctx.round_number, no_rolls=ctx.no_rolls)
            )
            ctx = replace(ctx, state=S.LOCKED)
        actions.append(
            _record(
                RecordKind.RECOVERY,
                **self._round(ctx),
                state=str(ctx.state),
                interrupted=previous == "interrupted",
                faults=sorted(str(f) for f in ctx.active_faults),
                voided_attempt=voided,
                # issue 15: where the dice monitor stands, so that a reader of the log alone can
                # check its own counts at every start (and knows where counting began on a log
                # older than the monitor)
                dice_counts=ctx.dice_counts.as_record(),
            )
        )
        found = [] if software_fault is None else [(Fault.SOFTWARE_IDENTITY, software_fault)]
        if occ.fault is not None:
            found.append((occ.fault, occ.detail))
        return self._shown_at_start(ctx, actions, found)

    def _started(self, occ: PowerOn, previous: str) -> list[Action]:
        """``power_on`` (how the last run ended, what runs, the clock, the anchor) and the
        configuration loaded."""
        started: dict[str, object] = {"previous": previous}
        if occ.software is not None:  # what runs, compared at the next start
            started["software"] = occ.software.identity.as_record()
        if occ.clock is not None:  # whether the times of the records come from a kept clock
            started["clock"] = str(occ.clock)
        if occ.anchor:  # a copy of the anchor rewritten from the other (audit/anchor.py)
            started["anchor"] = occ.anchor
        actions = [_record(RecordKind.POWER_ON, **started)]
        if occ.config is not None:
            actions.append(_record(RecordKind.CONFIG_LOADED, **occ.config))
        return actions

    def _shake_voided(
        self, ctx: RoundContext, actions: list[Action]
    ) -> tuple[RoundContext, int | None]:
        """A shake in progress when the power went is void: the player shakes again (the next
        attempt). Returns the attempt voided, if any."""
        if ctx.state not in SHAKE_IN_PROGRESS:
            return ctx, None
        actions.append(
            _record(
                RecordKind.INTERRUPTED,
                **self._round(ctx),
                state=str(ctx.state),
                reason="power_on",
            )
        )
        return replace(ctx, state=S.ARMED, attempt=ctx.attempt + 1), ctx.attempt

    def _shown_at_start(
        self, ctx: RoundContext, actions: list[Action], found: list[tuple[Fault, str]]
    ) -> Step:
        """The faults found at start latch last; a fault the log holds keeps every output
        safe; else the table shows where it stands."""
        if found:
            for fault, detail in found:
                ctx, latched = self._latch(ctx, fault, detail)
                actions.extend(a for a in latched if a.kind is not ActionKind.SHOW)
            return ctx, [*actions, self.screens.fault(ctx, ctx.active_faults)]
        if ctx.state is S.FAULT:
            faults = sorted(str(f) for f in ctx.active_faults)
            return ctx, [
                *actions,
                Action(ActionKind.STOP_MOTOR),
                Action(ActionKind.SAFE_STATE, data={"fault": ",".join(faults)}),
                self.screens.fault(ctx, ctx.active_faults),
            ]
        return ctx, [*actions, *self.screens.enter(ctx)]

    def shutdown(self, ctx: RoundContext, occ: Shutdown) -> Step:
        """An orderly stop: the motor off, a round in play recorded as interrupted (a shake in
        progress is void), the RNG session revealed (its seed lives in memory only: a round
        whose bets closed under it without a number recorded is void after the restart)."""
        actions = [Action(ActionKind.STOP_MOTOR)]
        if ctx.state is not S.IDLE:
            actions.append(
                _record(
                    RecordKind.INTERRUPTED,
                    **self._round(ctx),
                    state=str(ctx.state),
                    reason="shutdown",
                )
            )
        if ctx.state in SHAKE_IN_PROGRESS:
            ctx = replace(ctx, state=S.ARMED, attempt=ctx.attempt + 1, deadline=None)
        if self._mode(ctx) is Mode.RNG:
            actions.append(Action(ActionKind.CLOSE_RNG))
        actions.append(_record(RecordKind.SHUTDOWN, round=ctx.round_number))
        return replace(ctx, is_running=False), actions


def _previous_run(ctx: RoundContext) -> str:
    """How the last run ended, as the log says."""
    if ctx.is_running:
        return "interrupted"
    return "shutdown" if ctx.is_round_open else "first start"


def _taken_up(ctx: RoundContext, occ: PowerOn) -> RoundContext:
    """The context a run starts from: running, the lid taken as open until the switch says,
    no deadline, no read in progress, no recall."""
    ctx = replace(
        ctx,
        is_running=True,
        is_lid_closed=False,
        deadline=None,
        read_progress=ReadProgress(),
        recall=None,
    )
    if ctx.dice_since is not None and ctx.dice_since_table is None and occ.wall is not None:
        # a set recorded before the table kept its time: from now on in the table's time
        since = ctx.table_ms - max(0, occ.wall - ctx.dice_since)
        ctx = replace(ctx, dice_since_table=since)
    return ctx
