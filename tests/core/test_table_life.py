"""What the table stands on, failing closed: the dice in the shaker (proposed 621a.5(c): at most
24 hours on the table), the tiles (621a.6(a): inspected and verified at the table; 621a.3(e):
changed at least every 12 hours), the table's own time they are counted in, the shuffle that
starts a new game (621a.11(b)), the casino's Rules Submission (621a.9, 621a.11(a),(e)), and the
RNG round by the rule text (621a.11(i), current 621a.5(e)(2)-(4))."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.table import OPENED, SETTINGS, WALL, Table, good_reading

from controller.core.dealing import DeliveryStyle
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import (
    DICE_LIFE_MS,
    HOUR_MS,
    TILE_LIFE_MS,
    TILE_WARNING_MS,
    ActionKind,
    Event,
    Mode,
    PowerOn,
    RoundContext,
    RoundMachine,
    RoundSettings,
    Screen,
    ShuffleReason,
    State,
    Tick,
    advance_table_time,
)
from controller.errors import BankRuleError, ConfigError, GameRuleError

FLOOR = "F0310"
DEALER = "D2207"
NOTHING = RoundContext()  # a table never opened: no dice, no tiles


def inspect_tiles(
    t: Table, tile_set: str = "T-2", *, wall: int = WALL, dealer: str = DEALER, **data: object
) -> Table:
    t.send(
        Event.TILES_INSPECTED,
        supervisor=True,
        employee=FLOOR,
        tile_set=tile_set,
        dealer=dealer,
        wall=wall,
        **data,
    )
    return t


# --- the dice fail closed ----------------------------------------------------------------


def test_no_dice_set_recorded_refuses_the_shake_until_one_is() -> None:
    t = Table(context=replace(OPENED, dice_set=None, dice_since_table=None))
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL)
    assert t.shown(Screen.BETS_CLOSED).data["dice"] == {  # type: ignore[comparison-overlap]
        "set": None,
        "warning": (
            "no dice set is recorded in the shaker: the supervisor records the dice put in"
        ),
    }
    t.send(Event.SHAKE_PRESSED, wall=WALL + 1000 * HOUR_MS)  # any time later
    assert (t.state, t.screens()) == (State.ARMED, [Screen.REFUSED])
    assert ActionKind.START_SHAKE not in t.kinds()
    t.send(Event.DICE_REPLACED, supervisor=True, employee="S1021", wall=WALL)
    t.send(Event.SHAKE_PRESSED, wall=WALL)
    assert t.state is State.SHAKING


def test_a_manual_shaker_is_not_read_without_a_dice_set() -> None:
    t = Table(replace(SETTINGS, mode=Mode.MANUAL), context=replace(OPENED, dice_set=None))
    t.send(Event.NO_MORE_BETS)
    t.send(Event.DICE_SET, wall=WALL)
    assert (t.state, t.screens()) == (State.ARMED, [Screen.REFUSED])


def test_a_set_recorded_by_an_older_version_is_counted_in_the_tables_time_from_power_on() -> None:
    older = replace(
        RoundContext(), dice_set="3", dice_since=WALL, tiles_set="T", tiles_since_table=0
    )
    t = Table(context=older)
    t.send(Event.POWER_ON, wall=WALL + HOUR_MS)
    assert t.machine.context.dice_since_table == t.machine.context.table_ms - HOUR_MS
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)  # no wall clock now: the table's time says an hour
    t.send(Event.TICK, advance=DICE_LIFE_MS - HOUR_MS)
    t.send(Event.SHAKE_PRESSED, wall=WALL)  # the wall clock set back: the table's time rules
    assert (t.state, t.screens()) == (State.ARMED, [Screen.REFUSED])


# --- the table's time ------------------------------------------------------------------------


def test_the_tables_time_moves_with_the_monotonic_clock_and_never_back() -> None:
    ctx = RoundContext()
    ctx = advance_table_time(ctx, PowerOn(at=5_000, wall=WALL))
    assert (ctx.table_ms, ctx.last_at, ctx.last_wall) == (0, 5_000, WALL)
    ctx = advance_table_time(ctx, Tick(at=65_000))
    assert ctx.table_ms == 60_000
    ctx = advance_table_time(ctx, Tick(at=64_000))  # a late event
    assert (ctx.table_ms, ctx.last_at) == (60_000, 65_000)


def test_while_off_the_table_counts_what_the_wall_clock_says_passed_never_less_than_zero() -> None:
    ctx = replace(RoundContext(), table_ms=7_000, last_wall=WALL, last_at=123)
    later = advance_table_time(ctx, PowerOn(at=10, wall=WALL + 3 * HOUR_MS))
    assert (later.table_ms, later.last_at) == (7_000 + 3 * HOUR_MS, 10)
    back = advance_table_time(ctx, PowerOn(at=10, wall=WALL - 3 * HOUR_MS))
    assert back.table_ms == 7_000  # a clock set back while off counts as nothing


def test_the_tables_time_is_kept_in_the_log_across_a_restart() -> None:
    t = Table()
    t.send(Event.POWER_ON, wall=WALL)
    t.send(Event.TICK, advance=20 * HOUR_MS)
    inspect_tiles(t)  # fresh tiles: the dice's life is what this test is about
    t.send(Event.TABLE_TIME, wall=WALL)  # the clock stood still: the table's time did not
    record = next(a for a in t.actions if a.record is RecordKind.TABLE_TIME)
    assert record.data == {"round": 1, "table_ms": 20 * HOUR_MS + 20, "wall_ms": WALL}
    stored = decode_context(encode_context(t.machine.context))
    again = Table()
    again.machine = RoundMachine(SETTINGS, stored)
    again.send(Event.POWER_ON, wall=WALL)  # and none passed while off
    again.send(Event.LID_CLOSED)
    again.send(Event.NO_MORE_BETS, wall=WALL)
    again.send(Event.TICK, advance=4 * HOUR_MS)
    again.send(Event.SHAKE_PRESSED, wall=WALL)
    assert (again.state, again.screens()) == (State.ARMED, [Screen.REFUSED])  # 24 hours up


# --- the tiles ---------------------------------------------------------------------------------


def test_no_round_is_dealt_from_tiles_nobody_inspected() -> None:
    t = Table(context=replace(OPENED, tiles_set=None, tiles_since_table=None))
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL)
    assert (t.state, t.screens()) == (State.IDLE, [Screen.REFUSED])
    assert "621a.6(a)" in str(t.shown(Screen.REFUSED).data["reason"])
    inspect_tiles(t)
    t.send(Event.NO_MORE_BETS, wall=WALL)
    assert t.state is State.ARMED


def test_the_inspection_is_verified_by_the_floorperson_with_the_key_and_recorded() -> None:
    t = Table(context=replace(OPENED, tiles_set="T-1", tiles_since=WALL - HOUR_MS))
    before = t.machine.context
    t.send(Event.TILES_INSPECTED, employee=FLOOR, tile_set="T-2", dealer=DEALER, wall=WALL)
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    with pytest.raises(GameRuleError, match="employee id"):
        inspect_tiles(t, dealer="D 1")
    with pytest.raises(GameRuleError, match="tile set id"):
        inspect_tiles(t, "T/2")
    inspect_tiles(t, uid=1003)
    record = next(a for a in t.actions if a.record is RecordKind.TILES_INSPECTED)
    assert record.data == {
        "round": 1,
        "tile_set": "T-2",
        "dealer": DEALER,
        "employee": FLOOR,
        "previous": "T-1",
        "previous_age_ms": HOUR_MS,
        "wall_ms": WALL,
        "table_ms": t.machine.context.table_ms,
        "uid": 1003,
    }
    ctx = t.machine.context
    assert (ctx.tiles_set, ctx.tiles_since, ctx.tiles_since_table) == ("T-2", WALL, ctx.table_ms)
    assert t.shown(Screen.READY).data["tiles"] == {"set": "T-2", "warning": None}


def test_a_new_set_of_tiles_is_a_new_game_without_a_player_bank() -> None:
    t = Table().to_result()
    t.send(Event.CLOSE_ROUND)
    inspect_tiles(t)
    with pytest.raises(BankRuleError, match="first round after a shuffle"):
        t.send(Event.NO_MORE_BETS, bank_seat=2)


@pytest.mark.parametrize(
    ("age", "warning", "deals"),
    [
        (0, None, True),
        (TILE_WARNING_MS - 1, None, True),
        (TILE_WARNING_MS, "within 60 min", True),
        (TILE_LIFE_MS - 1, "within 1 min", True),
        (TILE_LIFE_MS, "in play 12 hours", False),
    ],
)
def test_the_tiles_are_changed_every_12_hours(age: int, warning: str | None, deals: bool) -> None:
    t = inspect_tiles(Table())
    t.send(Event.LID_CLOSED, wall=WALL + age)
    t.send(Event.SHIFT_CHANGE, wall=WALL + age)  # shows bets open again, with the tiles
    shown = t.shown(Screen.READY).data["tiles"]
    assert isinstance(shown, dict)
    if warning is None:
        assert shown["warning"] is None
    else:
        assert warning in shown["warning"]
    t.send(Event.NO_MORE_BETS, wall=WALL + age)
    assert (t.state is State.ARMED) is deals
    if not deals:
        assert "621a.3(e)" in str(t.shown(Screen.REFUSED).data["reason"])


def test_a_poker_table_has_no_tiles_to_inspect() -> None:
    t = Table(replace(SETTINGS, game=Game.POKER), context=replace(OPENED, tiles_set=None))
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL)
    assert t.state is State.ARMED
    assert "tiles" not in t.shown(Screen.BETS_CLOSED).data


def test_service_mode_tests_without_tiles() -> None:
    t = Table(context=replace(OPENED, tiles_set=None, tiles_since_table=None))
    t.send(Event.SERVICE_MODE, supervisor=True, employee="T0042")
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL)
    assert t.state is State.ARMED


# --- the shuffle -----------------------------------------------------------------------------


def test_the_dealers_shuffle_key_and_the_terminal_record_a_new_game() -> None:
    t = Table().to_result()
    t.send(Event.CLOSE_ROUND)  # a round played: seats may bank
    t.send(Event.SHUFFLED)  # the panel's key
    assert next(a for a in t.actions if a.record is RecordKind.TILES_SHUFFLED).data == {
        "round": 2,
        "reason": "new_game",
        "employee": None,
    }
    with pytest.raises(BankRuleError):
        t.send(Event.NO_MORE_BETS, bank_seat=1)  # 621a.11(b)
    t.send(Event.SHUFFLED, employee=DEALER, shuffle=ShuffleReason.REMIX, uid=1002)
    assert next(a for a in t.actions if a.record is RecordKind.TILES_SHUFFLED).data == {
        "round": 2,
        "reason": "remix",
        "employee": DEALER,
        "uid": 1002,
    }


# --- the Rules Submission --------------------------------------------------------------------


def test_the_style_key_offers_only_the_styles_the_casino_allows() -> None:
    allowed = (DeliveryStyle.JUNG_QUAT, DeliveryStyle.HOUSE_WAY_LEFT)
    t = Table(replace(SETTINGS, styles=allowed)).to_armed()
    chosen = []
    for _ in range(3):
        t.send(Event.STYLE_KEY)
        chosen.append(t.machine.context.delivery_style)
    assert chosen == [DeliveryStyle.JUNG_QUAT, DeliveryStyle.HOUSE_WAY_LEFT, DeliveryStyle.STANDARD]
    none = Table(replace(SETTINGS, styles=())).to_armed()
    none.send(Event.STYLE_KEY)
    assert none.screens() == [Screen.REFUSED]
    assert none.machine.context.delivery_style is DeliveryStyle.STANDARD


def test_a_table_without_player_banks_has_the_dealer_bank_every_round() -> None:
    t = Table(replace(SETTINGS, player_bank=False)).to_result()
    t.send(Event.CLOSE_ROUND)
    t.send(Event.BANK_SEAT_KEY)
    assert t.screens() == [Screen.REFUSED]
    assert "621a.11(a)" in str(t.shown(Screen.REFUSED).data["reason"])
    with pytest.raises(GameRuleError, match="no player bank"):
        t.send(Event.NO_MORE_BETS, bank_seat=2)


def test_co_banking_at_tiles_goes_with_the_player_bank_that_asked_for_it() -> None:
    # 621a.11(e): the bank requests it while bets are open; carried by "no more bets"
    t = Table(replace(SETTINGS, co_banking=True)).to_result()
    t.send(Event.CLOSE_ROUND)
    t.send(Event.STYLE_KEY)  # the dealer banks: co-banking is a player bank's
    assert t.screens() == [Screen.REFUSED]
    t.send(Event.BANK_SEAT_KEY)
    t.send(Event.STYLE_KEY)
    record = next(a for a in t.actions if a.record is RecordKind.BANK_SELECTED)
    assert (record.data["bank"], record.data["co_bank"]) == ("seat 1", True)
    t.send(Event.NO_MORE_BETS)
    assert next(a for a in t.actions if a.record is RecordKind.NO_MORE_BETS).data["co_bank"]
    t.send(Event.STYLE_KEY)  # after "no more bets" the key is the style of delivery's again
    assert t.machine.context.delivery_style is not DeliveryStyle.STANDARD


def test_co_banking_without_a_player_bank_is_refused_by_the_settings() -> None:
    with pytest.raises(ConfigError, match=r"rules\.co_banking"):
        RoundSettings(co_banking=True, player_bank=False)


# --- an RNG round by the rule text -------------------------------------------------------------


def test_an_rng_round_at_tiles_chooses_its_style_after_no_more_bets_and_before_the_draw() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG), context=NOTHING)
    t.send(Event.TILES_INSPECTED, supervisor=True, employee=FLOOR, tile_set="T", dealer=DEALER)
    t.send(Event.NO_MORE_BETS)
    assert t.state is State.ARMED
    assert ActionKind.DRAW_NUMBER not in t.kinds()  # 621a.11(i): no draw before the style
    assert t.shown(Screen.BETS_CLOSED).data["mode"] == "rng"
    t.send(Event.STYLE_KEY)
    style = next(a for a in t.actions if a.record is RecordKind.DELIVERY_STYLE).data["style"]
    t.send(Event.DICE_SET)  # the dealer: the style settled, draw
    assert t.state is State.DRAWING
    assert t.shown(Screen.DRAWING).data["delivery_style"] == style
    t.send(Event.RNG_DRAWN, rng_number=1)
    result = next(a for a in t.actions if a.record is RecordKind.RESULT).data
    assert "wagers" not in result
    assert t.shown(Screen.RESULT).data["dealing_plan"]["style"] == style  # type: ignore[index]


def test_a_dice_round_still_settles_its_side_wagers() -> None:
    t = Table().to_result(good_reading(6, 5, 5))
    result = next(a for a in t.actions if a.record is RecordKind.RESULT).data
    assert result["wagers"]["sum"]["8-16-17"] is True  # type: ignore[index]  # total 16
    assert t.shown(Screen.RESULT).data["mode"] == "shaker"
