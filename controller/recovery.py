"""Recovery after a crash or a power cut: the round state machine's context rebuilt from the
audit log, and what the shell must do before it takes the next event. Pure: no I/O.

The rules (AGCO 5.1: an interrupted selection is kept until full recovery; AGCO 11.1: an error
persists across a power cycle until cleared):

- a committed result is shown again, never re-drawn or re-read;
- a shake (or a reading) without a committed result is void: an ``interrupted`` record says
  so and the player shakes again (the next attempt);
- an RNG draw recorded for the current round and attempt is used again, never re-drawn;
- a fault that was active stays active, outputs safe, until it is cleared;
- the round number, the attempt and the bank history continue;
- a ``power_on`` record notes the interruption and a ``recovery`` record what was done.

The shell carries out :attr:`Recovery.actions` in order, exactly like the state machine's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from controller.audit_records import RecordDataError, bank_seat_of, result_as_recorded
from controller.dice import DieColour, ReadProgress, Verdict
from controller.errors import LogIntegrityError
from controller.position import BankHistory
from controller.records import RecordKind as K
from controller.state import (
    Action,
    ActionKind,
    Fault,
    Mode,
    RoundContext,
    RoundSettings,
    Screen,
    State,
    next_round,
)

_SHAKE_IN_PROGRESS = (State.SHAKING, State.SETTLING, State.READING)


@dataclass(frozen=True, slots=True)
class Recovery:
    context: RoundContext
    actions: list[Action]
    was_interrupted: bool  # the previous run ended without a shutdown record
    voided_attempt: int | None = None  # the shake that was in progress, now void
    result_seq: int | None = None  # the committed result shown again
    rng_draw: Mapping[str, Any] | None = None  # the recorded draw to use again (DRAWING)
    rng_draw_seq: int | None = None
    last_seq: int = 0
    notes: list[str] = field(default_factory=list)


def _record(kind: K, **data: object) -> Action:
    return Action(ActionKind.RECORD, record=kind, data=data)


def _show(screen: Screen, **data: object) -> Action:
    return Action(ActionKind.SHOW, screen=screen, data=data)


class _Fold:
    """The context as the records leave it (what the state machine had when it wrote them)."""

    def __init__(self, settings: RoundSettings) -> None:
        self.settings = settings
        self.ctx = RoundContext()
        self.opened = False  # a round_opened record for ctx.round_number exists
        self.shutdown = True  # an empty log is a first start, not an interruption
        self.last_valid_positions: tuple[tuple[int, int] | None, ...] = ()
        self.result_seq: int | None = None
        self.draw: tuple[int, Mapping[str, Any]] | None = None
        self.last_seq = 0

    def apply(self, seq: int, kind: str, data: Mapping[str, Any]) -> None:
        self.last_seq = seq
        ctx = self.ctx
        self.shutdown = kind == K.SHUTDOWN
        if kind == K.ROUND_OPENED:
            self.ctx = replace(ctx, round_number=_int(data, "round"))
            self.opened = True
        elif kind == K.SHUFFLE:
            self.ctx = replace(ctx, bank_history=BankHistory.after_shuffle())
        elif kind == K.NO_MORE_BETS:
            mode = data.get("mode", str(self.settings.mode))
            state = State.DRAWING if mode == Mode.RNG else State.ARMED
            self.ctx = replace(
                ctx,
                state=state,
                bank_seat=bank_seat_of(data.get("bank", "dealer")),
                attempt=1,
                no_rolls=0,
                result=None,
            )
            self.draw = None
        elif kind == K.SHAKE:
            self.ctx = replace(ctx, state=State.READING, attempt=_int(data, "attempt"))
        elif kind == K.READING:
            if data.get("verdict") == "valid":
                self.last_valid_positions = _positions(data.get("dice"))
        elif kind == K.NO_ROLL:
            self.ctx = replace(
                ctx,
                state=State.NO_ROLL,
                no_rolls=ctx.no_rolls + 1,
                attempt=_int(data, "attempt") + 1,
                read_progress=ReadProgress(),
            )
        elif kind == K.RESHAKE_LIMIT:
            self.ctx = replace(ctx, state=State.LOCKED)
        elif kind == K.INTERRUPTED:
            if ctx.state in _SHAKE_IN_PROGRESS:
                self.ctx = replace(ctx, state=State.ARMED, attempt=_int(data, "attempt") + 1)
        elif kind == K.RNG_DRAW:
            if "round" in data and "attempt" in data:
                self.draw = (seq, data)
        elif kind == K.RESULT:
            result = result_as_recorded(data)
            previous = ctx.previous_roll
            if result.roll is not None:
                previous = Verdict(result.roll, None, self.last_valid_positions)
            self.ctx = replace(
                ctx,
                state=State.RESULT,
                result=result,
                previous_roll=previous,
                attempt=_int(data, "attempt"),
            )
            self.result_seq = seq
        elif kind in (K.CLOSE, K.VOID):
            self._end_round(kind)
        elif kind == K.FAULT:
            self._fault(data)
        elif kind == K.FAULT_CLEARED:
            cleared = {Fault(f) for f in data.get("faults", [])}
            remaining = ctx.active_faults - cleared
            ctx = replace(ctx, active_faults=frozenset(remaining))
            if not remaining and ctx.state is State.FAULT:
                ctx = replace(ctx, state=ctx.resume_state or State.IDLE, resume_state=None)
            self.ctx = ctx
        elif kind == K.SUPERVISOR_ACTION:
            if data.get("action") == "clear_reshake_limit" and ctx.state is State.LOCKED:
                self.ctx = replace(ctx, state=State.ARMED, no_rolls=0)
        elif kind == K.SENSOR:
            if data.get("present") is True:
                self.ctx = replace(ctx, is_sensor_present=True)
            elif data.get("fault") == Fault.SENSOR_LOST:
                self.ctx = replace(ctx, is_sensor_present=False)

    def _end_round(self, kind: str) -> None:
        ctx = next_round(self.ctx)
        if self.ctx.state is State.FAULT:  # voided during a fault: the fault stays
            ctx = replace(ctx, state=State.FAULT, resume_state=State.IDLE)
        self.ctx = ctx
        self.opened = False
        self.result_seq = None
        self.draw = None

    def _fault(self, data: Mapping[str, Any]) -> None:
        ctx = self.ctx
        fault = Fault(str(data.get("fault")))
        try:
            was = State(str(data.get("state", ctx.state)))
        except ValueError:
            was = ctx.state
        if ctx.state is State.FAULT:
            resume = ctx.resume_state
        elif was in _SHAKE_IN_PROGRESS:
            resume = State.ARMED
        else:
            resume = was
        attempt = _int(data, "attempt") if "attempt" in data else ctx.attempt
        if was in _SHAKE_IN_PROGRESS and ctx.state is not State.FAULT:
            attempt += 1
        self.ctx = replace(
            ctx,
            state=State.FAULT,
            active_faults=ctx.active_faults | {fault},
            resume_state=resume,
            attempt=attempt,
            deadline=None,
            read_progress=ReadProgress(),
        )


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordDataError(f"{key} must be a whole number")
    return value


def _positions(raw: object) -> tuple[tuple[int, int] | None, ...]:
    """Red first, then the blues in the order read (as judge_reading orders a valid roll)."""
    if not isinstance(raw, list):
        return ()

    def place(die: Mapping[str, Any]) -> tuple[int, int] | None:
        p = die.get("position")
        return (p[0], p[1]) if isinstance(p, list) and len(p) == 2 else None

    dice = [d for d in raw if isinstance(d, dict)]
    red = [place(d) for d in dice if d.get("colour") == DieColour.RED]
    blue = [place(d) for d in dice if d.get("colour") == DieColour.BLUE]
    return (*red, *blue) if len(red) == 1 and len(blue) == 2 else ()


def recover(
    records: Iterable[tuple[int, str, Mapping[str, Any]]], settings: RoundSettings
) -> Recovery:
    """The context and the actions to resume from the log's ``(seq, kind, data)`` records.

    Raises :class:`LogIntegrityError` naming a record whose data cannot be understood."""
    fold = _Fold(settings)
    seq = 0
    for seq, kind, data in records:
        try:
            fold.apply(seq, kind, data)
        except (RecordDataError, ValueError, KeyError) as exc:
            raise LogIntegrityError(seq, f"recovery cannot read this {kind} record: {exc}") from exc
    ctx = fold.ctx
    interrupted = not fold.shutdown
    actions: list[Action] = [
        _record(
            K.POWER_ON,
            previous=("interrupted" if interrupted else "shutdown") if seq else "first start",
            last_seq=seq,
        )
    ]
    notes: list[str] = []
    voided: int | None = None
    round_data = {"round": ctx.round_number, "attempt": ctx.attempt}

    if not fold.opened and ctx.state in (State.IDLE, State.FAULT):
        # The round before was closed (or this is the first start) but the next was not opened.
        actions.append(_record(K.ROUND_OPENED, round=ctx.round_number))
        notes.append(f"opened round {ctx.round_number}")
    if ctx.state in _SHAKE_IN_PROGRESS:
        # A shake without a committed result is void; the player shakes again.
        voided = ctx.attempt
        actions.append(
            _record(K.INTERRUPTED, **round_data, state=str(ctx.state), reason="power_on")
        )
        ctx = replace(ctx, state=State.ARMED, attempt=ctx.attempt + 1, read_progress=ReadProgress())
        notes.append(f"round {ctx.round_number} attempt {voided}: shake void, reshake")
    if ctx.state is State.NO_ROLL and ctx.no_rolls >= settings.max_reshakes:
        actions.append(_record(K.RESHAKE_LIMIT, round=ctx.round_number, no_rolls=ctx.no_rolls))
        ctx = replace(ctx, state=State.LOCKED)
    ctx = replace(ctx, deadline=None, is_lid_closed=False)

    draw = None
    draw_seq = None
    if (
        fold.draw is not None
        and fold.draw[1].get("round") == ctx.round_number
        and fold.draw[1].get("attempt") == ctx.attempt
        and ctx.state is State.DRAWING
    ):
        draw_seq, draw = fold.draw
        notes.append(f"RNG draw of record {draw_seq} is used again")

    summary: dict[str, object] = {
        **{"round": ctx.round_number, "attempt": ctx.attempt},
        "state": str(ctx.state),
        "interrupted": interrupted,
        "faults": sorted(str(f) for f in ctx.active_faults),
        "voided_attempt": voided,
        "result_seq": fold.result_seq if ctx.state is State.RESULT else None,
        "rng_draw_seq": draw_seq,
    }
    actions.append(_record(K.RECOVERY, **summary))
    actions.extend(_resume_actions(ctx))
    return Recovery(
        context=ctx,
        actions=actions,
        was_interrupted=interrupted and seq > 0,
        voided_attempt=voided,
        result_seq=fold.result_seq if ctx.state is State.RESULT else None,
        rng_draw=draw,
        rng_draw_seq=draw_seq,
        last_seq=seq,
        notes=notes,
    )


def _resume_actions(ctx: RoundContext) -> list[Action]:
    round_data = {"round": ctx.round_number, "attempt": ctx.attempt}
    if ctx.state is State.FAULT:
        # AGCO 11.1: the fault persists across the power cycle until it is cleared.
        faults = sorted(str(f) for f in ctx.active_faults)
        return [
            Action(ActionKind.STOP_MOTOR),
            Action(ActionKind.SAFE_STATE, data={"fault": ",".join(faults)}),
            _show(Screen.FAULT, faults=faults),
        ]
    if ctx.state is State.RESULT:
        assert ctx.result is not None
        return [_show(Screen.RESULT, **round_data, result=ctx.result.as_record())]
    if ctx.state is State.DRAWING:
        return [Action(ActionKind.DRAW_NUMBER, data=round_data), _show(Screen.DRAWING)]
    if ctx.state is State.ARMED:
        return [_show(Screen.BETS_CLOSED, **round_data)]
    if ctx.state is State.NO_ROLL:
        return [_show(Screen.NO_ROLL, **round_data)]
    if ctx.state is State.LOCKED:
        return [_show(Screen.LOCKED, **round_data)]
    return [_show(Screen.READY, round=ctx.round_number)]
