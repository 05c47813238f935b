"""The bank and its style: the dealer's bank key (the next bank, 621a.11(b),(c)), the style
of delivery (621a.9, 621a.11(i)) and co-banking (621a.11(e), 645a.12(e)), and the shuffle that
starts a new game (621a.11(b)). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from controller.core.dealing import DeliveryStyle
from controller.core.evolve import replace
from controller.core.position import BETTING_POSITIONS, BankHistory, Game
from controller.core.records import RecordKind
from controller.core.table_events import (
    BankSeatKey,
    KeyEvent,
    Shuffled,
    StyleKey,
)
from controller.core.table_rules import (
    Refused,
    Rules,
    _record,
    live_only,
)
from controller.core.table_types import (
    Refusal,
    RoundContext,
    ShuffleReason,
    State,
    Step,
)
from controller.errors import GameRuleError

_T = TypeVar("_T")
_STANDARD = DeliveryStyle.STANDARD
S = State

NO_PLAYER_BANK = (
    "the casino's Rules Submission offers no player bank at this table (621a.11(a), 645a.12(a))"
)


def _after(choices: Sequence[_T], current: _T) -> _T:
    """What a key that steps through ``choices`` selects next, round and round."""
    return choices[(choices.index(current) + 1) % len(choices)]


class BankRules(Rules):
    """The bank's handlers: the bank key, the style key, the shuffle."""

    def bank_seat_key(self, ctx: RoundContext, occ: BankSeatKey) -> Step:
        """The dealer's bank key steps through the banks: the dealer, then seat 1..6. A seat
        the bank rules refuse (621a.11(b),(c); 645a.12) is shown with the reason, and "no more
        bets" is refused while it is selected. A table whose Rules Submission offers no player
        bank (621a.11(a), 645a.12(a)) has the dealer bank every round."""
        if not self.settings.player_bank:
            raise Refused(Refusal.NO_PLAYER_BANK, NO_PLAYER_BANK)
        banks: list[int | None] = [None, *range(1, BETTING_POSITIONS + 1)]
        ctx = replace(ctx, bank_seat=_after(banks, ctx.bank_seat), co_bank=False)
        return self._bank_selected(ctx, occ)

    def _bank_selected(self, ctx: RoundContext, occ: KeyEvent, **extra: object) -> Step:
        """The bank (and ``extra``: co-banking) as selected now: recorded, and shown."""
        shown = self.screens.bank(ctx)
        record = _record(
            RecordKind.BANK_SELECTED,
            round=ctx.round_number,
            bank=shown["bank"],
            refused=shown.get("bank_refused"),
            **extra,
            **self._who(ctx, occ),
        )
        return ctx, [record, *self.screens.enter(ctx)]

    def style_key(self, ctx: RoundContext, occ: StyleKey) -> Step:
        """621a.11(i): once "no more bets" is announced the bank may choose a style of delivery
        (621a.9) that the casino's Rules Submission allows, identified to surveillance before
        the shake (or the draw); none chosen is 621a.8(d). While bets are open the same key
        asks for co-banking (621a.11(e), 645a.12(e)); Pai Gow Poker has no styles."""
        if ctx.state is S.IDLE or self.settings.game is not Game.TILES:
            return self._co_bank(ctx, occ)
        if ctx.attempt != 1 or ctx.no_rolls:
            raise Refused(
                Refusal.STYLE_TOO_LATE,
                "the style of delivery is chosen before the first shake",
            )
        offered = [DeliveryStyle.STANDARD, *self.settings.styles]
        current = ctx.delivery_style if ctx.delivery_style in offered else _STANDARD
        chosen = _after(offered, current)
        if chosen is ctx.delivery_style:
            raise Refused(
                Refusal.NO_STYLE_OFFERED,
                "the casino's Rules Submission allows no style of delivery",
            )
        ctx = replace(ctx, delivery_style=chosen)
        record = _record(
            RecordKind.DELIVERY_STYLE,
            round=ctx.round_number,
            style=chosen.value,
            section=chosen.section,
            **self._who(ctx, occ),
        )
        return ctx, [record, *self.screens.enter(ctx)]

    def _co_bank(self, ctx: RoundContext, occ: StyleKey) -> Step:
        """621a.11(e), 645a.12(e): where the casino offers it, a player bank may ask to co-bank
        the round with the dealer (half the winning wagers each); chosen while bets are open,
        recorded and shown, and carried by "no more bets"."""
        if ctx.state is not S.IDLE:
            raise GameRuleError(
                "Pai Gow Poker has no delivery styles (621a.9 is for tiles); co-banking is"
                " chosen while bets are open (645a.12(e))"
            )
        if not self.settings.co_banking:
            if self.settings.game is Game.TILES:
                raise GameRuleError(
                    "the style of delivery is chosen after no more bets (621a.11(i)); this"
                    " table does not offer co-banking (621a.11(e))"
                )
            raise GameRuleError("this table does not offer co-banking (645a.12(e))")
        if ctx.bank_seat is None:
            raise Refused(
                Refusal.CO_BANK_NEEDS_PLAYER_BANK,
                "co-banking is for a player bank (621a.11(e), 645a.12(e))",
            )
        ctx = replace(ctx, co_bank=not ctx.co_bank)
        return self._bank_selected(ctx, occ, co_bank=ctx.co_bank)

    def shuffled(self, ctx: RoundContext, occ: Shuffled) -> Step:
        """621a.11(b), 645a.12(b): the dealer shuffled the tiles (or the cards) for a new game,
        by the key or at the terminal: no player banks its first round."""
        live_only(ctx, "a shuffle of the tiles")
        reason = occ.shuffle or ShuffleReason.NEW_GAME
        ctx = replace(ctx, bank_history=BankHistory.after_shuffle())
        if ctx.bank_seat is not None:  # a seat selected before: refused now, and shown so
            ctx = replace(ctx, co_bank=False)
        kind = RecordKind.TILES_SHUFFLED if self.settings.game is Game.TILES else RecordKind.SHUFFLE
        record = _record(kind, round=ctx.round_number, reason=str(reason), **self._who(ctx, occ))
        return ctx, [record, *self.screens.shown_again(ctx)]
