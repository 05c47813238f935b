"""What the table's screens show, built from the context: bets open, bets closed, a no roll,
the draw, the result, a fault, a refusal. The rules decide; this module only words the data
each ``SHOW`` action carries (a display renders it). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.dealing import dealing_plan
from controller.core.dice_monitor import evaluate, p_values
from controller.core.evolve import replace
from controller.core.position import Game
from controller.core.result import bank_label
from controller.core.table_life import DICE_LIFE, TILES_LIFE, Life
from controller.core.table_types import (
    DICE_FAULTS,
    Action,
    ActionKind,
    Fault,
    Mode,
    Refusal,
    RoundContext,
    RoundSettings,
    Screen,
    State,
    round_fields,
    table_mode,
)
from controller.errors import BankRuleError, GameRuleError

S = State


def show(screen: Screen, **data: object) -> Action:
    return Action(ActionKind.SHOW, screen=screen, data=data)


def refused(code: Refusal, why: str) -> Action:
    """The one screen of a refusal: a key or button refused, nothing changed. It carries the
    stable ``code`` (a display words it for its readers) and ``why`` in the operator's words
    (the log, the supervisor's view)."""
    return show(Screen.REFUSED, code=str(code), reason=why)


def noting_the_void(actions: list[Action], voided: Mapping[str, object]) -> list[Action]:
    """The bets-open screen after a round's void says which round was void and why, so that
    a display that reads screens alone (the console) can say so too."""
    return [
        replace(a, data={**a.data, "voided": dict(voided)})
        if a.kind is ActionKind.SHOW and a.screen is Screen.READY
        else a
        for a in actions
    ]


def life_shown(
    life: Life, present: str | None, ctx: RoundContext, wall: int | None
) -> dict[str, object]:
    shown: dict[str, object] = {"set": present, "warning": life.notice(ctx, wall)}
    minutes = life.minutes_left(ctx, wall)
    if minutes is not None:  # the warning's figure, for the page's own words
        shown["minutes_left"] = minutes
    return shown


class Screens:
    """The screens of one step: the table's settings and the event's UTC milliseconds (the
    dice's and the tiles' warnings count in them)."""

    def __init__(self, settings: RoundSettings, wall: int | None = None) -> None:
        self.settings = settings
        self.wall = wall

    def mode(self, ctx: RoundContext) -> Mode:
        return table_mode(self.settings, ctx)

    def fault(self, ctx: RoundContext, faults: frozenset[Fault]) -> Action:
        """The fault screen; when every active fault is the dice's (the sensor, the motor) and
        this table may play with its RNG, it offers the switch (current 621a.6(a)(1))."""
        shown: dict[str, object] = {"faults": sorted(str(f) for f in faults)}
        if (
            Mode.RNG in self.settings.allowed_modes
            and self.mode(ctx) is not Mode.RNG
            and faults
            and faults <= DICE_FAULTS
        ):
            shown["fallback"] = str(Mode.RNG)
        return show(Screen.FAULT, **shown)

    def enter(self, ctx: RoundContext) -> list[Action]:
        """What to show (and do) on coming back to a resting state."""
        if ctx.state is S.IDLE:
            ready = show(
                Screen.READY,
                round=ctx.round_number,
                mode=str(self.mode(ctx)),
                **self.bank(ctx),
                **self.dice(ctx),
                **self.tiles(ctx),
                **self.stats(ctx),
                meters=ctx.meters.as_record(),  # the supervisor's view (never the players')
            )
            if self.mode(ctx) is Mode.RNG:
                # 621a.8(a)(1): the session's commitment is recorded and shown before bets
                # close, never inside a draw.
                return [Action(ActionKind.PREPARE_RNG, data={"round": ctx.round_number}), ready]
            return [ready]
        if ctx.state is S.ARMED:
            closed = {
                **round_fields(ctx),
                "mode": str(self.mode(ctx)),
                **self.style(ctx),
                **self.dice(ctx),
            }
            return [show(Screen.BETS_CLOSED, **closed)]
        if ctx.state is S.NO_ROLL:
            return [show(Screen.NO_ROLL, **round_fields(ctx), **self.dice(ctx))]
        if ctx.state is S.LOCKED:
            return [show(Screen.LOCKED, **round_fields(ctx))]
        if ctx.state is S.DRAWING:
            # DRAWING is shown, then the shell draws: it uses the recorded draw of this round and
            # attempt if there is one and never draws a second number for it (no secondary
            # selection); the number comes back as RNG_DRAWN.
            return [
                show(Screen.DRAWING, **round_fields(ctx), **self.style(ctx)),
                Action(ActionKind.DRAW_NUMBER, data=round_fields(ctx)),
            ]
        assert ctx.state is S.RESULT
        assert ctx.result is not None
        shown: dict[str, object] = {"result": ctx.result.as_record(), "mode": str(self.mode(ctx))}
        if ctx.correction is not None:
            shown["corrected"] = ctx.correction.as_record()  # N.J.A.C. 13:69E-1.28P(d)
        if self.settings.game is Game.TILES:
            # 621a.8(d), 621a.9: which stacks go where, for the dealer and surveillance
            plan = dealing_plan(self.settings.game, ctx.delivery_style, ctx.result.position)
            shown["dealing_plan"] = plan.as_record()
        if ctx.dice_alarm is not None and ctx.dice_alarm.round == ctx.round_number:
            shown.update(self.stats(ctx))  # the alarm this result raised, for the supervisor
        return [show(Screen.RESULT, **round_fields(ctx), **shown)]

    def bank(self, ctx: RoundContext) -> dict[str, object]:
        """The bank selected for the next round, and why the rules refuse it if they do."""
        shown: dict[str, object] = {"bank": bank_label(ctx.bank_seat)}
        if ctx.co_bank:
            shown["co_bank"] = True
        try:
            ctx.bank_history.check(ctx.bank_seat)
        except GameRuleError as exc:
            shown["bank_refused"] = str(exc)
            if isinstance(exc, BankRuleError) and exc.rule:  # for the page's own words
                shown["bank_refused_rule"] = {"rule": exc.rule, "seat": exc.seat}
        return shown

    def dice(self, ctx: RoundContext) -> dict[str, object]:
        """The dice set in the shaker and, from 23 hours on the table, the warning that it must
        be replaced (proposed 621a.5(c)), or that none is recorded; nothing in RNG mode, which
        uses no dice."""
        if self.mode(ctx) is Mode.RNG:
            return {}
        return {"dice": life_shown(DICE_LIFE, ctx.dice_set, ctx, self.wall)}

    def tiles(self, ctx: RoundContext) -> dict[str, object]:
        """The set of tiles in play and, from 11 hours, the warning that it must be changed
        (621a.3(e)), or that none is inspected (621a.6(a)); Pai Gow Poker has no tiles."""
        if self.settings.game is not Game.TILES:
            return {}
        return {"tiles": life_shown(TILES_LIFE, ctx.tiles_set, ctx, self.wall)}

    def stats(self, ctx: RoundContext) -> dict[str, object]:
        """Issue 15: the dice's counts over the shift (the players' statistics panel) and the
        set, and the monitor's state (the supervisor's view; never shown to players). Nothing in
        RNG mode. Only bets open carries it (a result does when it raised the alarm): the
        figures cost time that the path to a result does not have."""
        if self.mode(ctx) is Mode.RNG:
            return {}
        counts = ctx.dice_counts
        p = p_values(counts.set)
        monitor = {
            "rolls": counts.test.rolls,
            "tests": [f.as_record() for f in evaluate(counts.test)],
            "p_values": {str(t): None if v is None else f"{v:.4f}" for t, v in p.items()},
        }
        alarm_shown = None if ctx.dice_alarm is None else ctx.dice_alarm.as_record()
        return {
            "stats": {
                "shift": counts.shift.as_record(),
                "set": counts.set.as_record(),
                "monitor": monitor,
                "alarm": alarm_shown,
                "locks": self.settings.lock_on_dice_alarm,
            }
        }

    def shown_again(self, ctx: RoundContext) -> list[Action]:
        """The screen of a resting state shown again after a change it displays (bets open,
        bets closed, a no roll); nothing else of entering it is done again."""
        if ctx.state not in (S.IDLE, S.ARMED, S.NO_ROLL):
            return []
        return [a for a in self.enter(ctx) if a.kind is ActionKind.SHOW]

    def style(self, ctx: RoundContext) -> dict[str, object]:
        if self.settings.game is not Game.TILES:
            return {}
        return {"delivery_style": ctx.delivery_style.value}
