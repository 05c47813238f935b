"""No outcome the rules do not allow, in the core: a result is corrected to the dice as they lie
and never decided again (N.J.A.C. 13:69E-1.28P(d), 1.28G: no secondary selection), or the whole
round is void with every wager returned (621a.12(c),(e)); the dealer's void key only before any
dice are at rest; every action names who did it; the meters count what happened.

Each test is written from the rule text: the expected figures are the text's (621a.8(c): a
total of 9 starts at the dealer, 15 at the sixth position; Sum paytable A of 645c.2(g)), not
the code's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.table import OPENED, SETTINGS, TILTED, Table, good_reading

from controller.core.config import Config
from controller.core.dice import Roll
from controller.core.meters import Meters, counted
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import (
    ActionKind,
    CorrectionReason,
    Event,
    Mode,
    RngMode,
    RoundMachine,
    Screen,
    State,
    VoidReason,
)
from controller.errors import BankRuleError, GameRuleError

SUPERVISOR = "S1021"
DEALER = "D2207"


def correct(
    t: Table,
    seen: Roll,
    *,
    meant: tuple[int, int] = (1, 1),
    reason: CorrectionReason = CorrectionReason.MISREAD,
    supervisor: bool = True,
    employee: str | None = SUPERVISOR,
) -> Table:
    t.send(
        Event.CORRECT_RESULT,
        supervisor=supervisor,
        employee=employee,
        result_meant=meant,
        dice_seen=seen,
        correction=reason,
        detail="seat 3 asked",
    )
    return t


def void(
    t: Table,
    reason: VoidReason = VoidReason.TILE_EXPOSED,
    *,
    round_meant: int = 1,
    supervisor: bool = True,
    employee: str | None = SUPERVISOR,
) -> Table:
    t.send(
        Event.VOID_ROUND,
        supervisor=supervisor,
        employee=employee,
        void_reason=reason,
        round_meant=round_meant,
        detail="surveillance saw it",
    )
    return t


def recorded(t: Table, kind: RecordKind) -> dict[str, object]:
    return dict(next(a for a in t.actions if a.record is kind).data)


# --- corrections to the dice as they lie ---------------------------------------------------


def test_a_misread_is_corrected_to_the_dice_as_they_lie_and_the_round_keeps_its_one_result() -> (
    None
):
    # read: red 1, blue 2 and 5, total 8 (Sum paytable A pays 8 at 3 to 1; the count of 8
    # starts at the Dead Hand); seen: red 6, total 13 (no Sum win; the count starts at seat 4)
    t = Table().to_result(good_reading(1, 2, 5))
    read = recorded(t, RecordKind.RESULT)
    assert read["total"] == 8
    assert read["starting_position"] == "dead hand"
    paid = read["payouts"]["A"]  # type: ignore[index]
    assert (paid["wins"], paid["outcome"], paid["pays"]) == (True, "8", "3 to 1")
    correct(t, Roll(6, (2, 5)))
    assert t.records() == [RecordKind.RESULT_CORRECTED]  # no second result, no new attempt
    data = recorded(t, RecordKind.RESULT_CORRECTED)
    assert {k: data[k] for k in ("round", "attempt", "dice_read", "dice_seen", "reason")} == {
        "round": 1,
        "attempt": 1,
        "dice_read": {"red": 1, "blue": [2, 5]},
        "dice_seen": {"red": 6, "blue": [2, 5]},
        "reason": "misread",
    }
    assert (data["employee"], data["note"]) == (SUPERVISOR, "seat 3 asked")
    result = data["result"]
    assert isinstance(result, dict)
    assert (result["total"], result["starting_position"]) == (13, "seat 4")
    assert result["payouts"]["A"]["wins"] is False  # wagers settle on the dice seen
    ctx = t.machine.context
    assert (ctx.state, ctx.round_number, ctx.attempt) == (State.RESULT, 1, 1)
    shown = t.shown(Screen.RESULT).data
    assert shown["result"] == result
    assert shown["corrected"] == {
        "dice_read": {"red": 1, "blue": [2, 5]},
        "reason": "misread",
        "employee": SUPERVISOR,
    }
    t.send(Event.CLOSE_ROUND)
    assert t.machine.context.round_number == 2
    assert t.machine.context.correction is None


def test_the_rule_texts_starting_positions_follow_the_dice_seen() -> None:
    # 621a.8(c)(1),(2): a total of 9 starts at the dealer, 15 at the sixth betting position
    t = Table().to_result(good_reading(3, 3, 3))
    correct(t, Roll(5, (5, 5)))
    assert recorded(t, RecordKind.RESULT_CORRECTED)["result"]["starting_position"] == "seat 6"  # type: ignore[index]
    t = Table().to_result(good_reading(5, 5, 5))
    correct(t, Roll(3, (3, 3)))
    assert recorded(t, RecordKind.RESULT_CORRECTED)["result"]["starting_position"] == "dealer"  # type: ignore[index]


def test_a_correction_needs_the_supervisor_key_and_an_employee_id() -> None:
    t = Table().to_result()
    before = t.machine.context
    assert correct(t, Roll(6, (6, 6)), supervisor=False).screens() == [Screen.REFUSED]
    with pytest.raises(GameRuleError, match="names the employee"):
        correct(t, Roll(6, (6, 6)), employee=None)
    with pytest.raises(GameRuleError, match="employee id"):
        correct(t, Roll(6, (6, 6)), employee="S-1")
    with pytest.raises(GameRuleError, match="employee id"):
        correct(t, Roll(6, (6, 6)), employee="S" * 17)
    assert t.machine.context is before


def test_a_correction_names_the_result_shown_and_is_made_once() -> None:
    t = Table().to_result(good_reading(1, 2, 5))
    before = t.machine.context
    correct(t, Roll(6, (2, 5)), meant=(1, 2))
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    assert "not the result shown" in str(t.shown(Screen.REFUSED).data["reason"])
    correct(t, Roll(6, (2, 5)))
    after = t.machine.context
    correct(t, Roll(4, (2, 5)))  # a second correction: void the round if the first was wrong
    assert (t.machine.context, t.screens()) == (after, [Screen.REFUSED])
    assert "void the round" in str(t.shown(Screen.REFUSED).data["reason"])


def test_the_dice_read_again_in_another_order_are_nothing_to_correct() -> None:
    t = Table().to_result(good_reading(2, 3, 4))
    before = t.machine.context
    correct(t, Roll(2, (4, 3)))  # the same dice, the blue ones named the other way round
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    correct(t, Roll(3, (2, 4)))  # the red die differs: a correction
    assert t.records() == [RecordKind.RESULT_CORRECTED]


@pytest.mark.parametrize("rng_mode", list(RngMode))
def test_an_rng_result_is_never_corrected_nor_redrawn(rng_mode: RngMode) -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG, rng_mode=rng_mode))
    t.send(Event.NO_MORE_BETS)
    t.send(Event.DICE_SET)
    if rng_mode is RngMode.DICE:
        t.send(Event.RNG_DRAWN, roll=Roll(1, (2, 5)))
    else:
        t.send(Event.RNG_DRAWN, rng_number=3)
    before = t.machine.context
    correct(t, Roll(6, (2, 5)))
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    assert "never corrected or redrawn" in str(t.shown(Screen.REFUSED).data["reason"])
    assert ActionKind.DRAW_NUMBER not in t.kinds()


def test_a_test_round_of_service_mode_is_not_corrected() -> None:
    t = Table()
    t.send(Event.SERVICE_MODE, supervisor=True, employee="T0042")
    t.to_result(good_reading(1, 2, 5))
    correct(t, Roll(6, (2, 5)))
    assert t.screens() == [Screen.REFUSED]


def test_a_corrected_result_is_shown_again_corrected_after_a_restart() -> None:
    t = Table().to_result(good_reading(1, 2, 5))
    correct(t, Roll(6, (2, 5)))
    stored = decode_context(encode_context(t.machine.context))
    again = Table()
    again.machine = RoundMachine(SETTINGS, stored)
    again.send(Event.POWER_ON, config=config_loaded_data(Config()))
    shown = again.shown(Screen.RESULT).data
    assert shown["result"]["total"] == 13  # type: ignore[index]
    assert shown["corrected"]["dice_read"] == {"red": 1, "blue": [2, 5]}  # type: ignore[index]
    assert RecordKind.RESULT not in again.records()


def test_every_correction_reason_is_recorded_as_itself() -> None:
    for reason in CorrectionReason:
        t = correct(Table().to_result(good_reading(1, 2, 5)), Roll(6, (2, 5)), reason=reason)
        assert recorded(t, RecordKind.RESULT_CORRECTED)["reason"] == reason.value


# --- the whole round void (621a.12(c),(e)) -------------------------------------------------


@pytest.mark.parametrize("where", ["armed", "no_roll", "waiting", "shaking"])
def test_the_dealer_voids_the_round_before_any_dice_are_at_rest(where: str) -> None:
    t = Table()
    t.to_armed()
    if where == "no_roll":
        t.send(Event.SHAKE_PRESSED)
        t.send(Event.SHAKE_DONE, advance=3000, cycles=1)
    elif where == "waiting":
        t.send(Event.SHAKE_PRESSED, delay_ms=500)
    elif where == "shaking":
        t.send(Event.SHAKE_PRESSED)
    assert t.state.value == where
    t.send(Event.VOID_ROUND)
    assert t.state is State.IDLE
    assert t.kinds()[0] is ActionKind.STOP_MOTOR
    data = recorded(t, RecordKind.VOID)
    del data["attempt"]  # the shake's (a no roll moved it on)
    assert data == {
        "round": 1,
        "state": where,
        "reason": "dealer_key",
        "wagers": "returned",
        "reshuffle": False,
        "note": "",
        "employee": None,
    }


@pytest.mark.parametrize("where", ["settling", "reading", "result", "locked"])
def test_once_the_dice_rest_only_the_supervisor_voids_the_round_with_a_reason(where: str) -> None:
    t = Table()
    if where == "settling":
        t.to_settling()
    elif where == "reading":
        t.to_reading()
    elif where == "result":
        t.to_result()
    else:
        t.to_reading()
        t.read(TILTED)
        t.send(Event.SHAKE_PRESSED)
        t.send(Event.SHAKE_DONE, advance=3000, cycles=1)  # the reshake limit (2)
    assert t.state.value == where
    before = t.machine.context
    t.send(Event.VOID_ROUND)  # the dealer's key
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    t.send(Event.VOID_ROUND, supervisor=True)  # the key switch names no reason
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    void(t, VoidReason.DEALER_ERROR, supervisor=False)
    assert t.machine.context is before
    void(t, VoidReason.DEALER_ERROR)
    assert t.state is State.IDLE
    assert recorded(t, RecordKind.VOID)["reason"] == "dealer_error"


def test_a_void_over_a_result_ends_the_round_without_a_result_and_returns_every_wager() -> None:
    t = Table().to_result(good_reading(1, 2, 5))
    void(t, VoidReason.WRONG_COUNT)
    assert t.records() == [RecordKind.VOID, RecordKind.ROUND_OPENED]
    data = recorded(t, RecordKind.VOID)
    assert data == {
        "round": 1,
        "attempt": 1,
        "state": "result",
        "reason": "wrong_count",
        "wagers": "returned",
        "reshuffle": True,  # 621a.12(c): "the dealer shall reshuffle the tiles"
        "note": "surveillance saw it",
        "employee": SUPERVISOR,
    }
    ctx = t.machine.context
    assert (ctx.state, ctx.round_number, ctx.result) == (State.IDLE, 2, None)
    assert t.screens() == [Screen.READY]


@pytest.mark.parametrize("reason", [r for r in VoidReason if r.is_typed])
def test_a_void_that_reshuffles_starts_a_new_game_without_a_player_bank(reason: VoidReason) -> None:
    t = Table()
    t.to_result()
    t.send(Event.CLOSE_ROUND)  # a round played: seats may bank now
    t.to_result()
    void(t, reason, round_meant=2)
    if reason.reshuffles:  # 621a.12(c),(e), then 621a.11(b)
        with pytest.raises(BankRuleError, match="first round after a shuffle"):
            t.send(Event.NO_MORE_BETS, bank_seat=3)
    else:
        t.send(Event.NO_MORE_BETS, bank_seat=3)
        assert t.state is State.ARMED


def test_a_void_names_its_round_so_a_repeated_one_voids_nothing_more() -> None:
    t = void(Table().to_result(), VoidReason.TILE_EXPOSED)
    t.to_result()
    before = t.machine.context
    void(t, VoidReason.TILE_EXPOSED)  # round 1 again, while round 2 is in play
    assert (t.machine.context, t.screens()) == (before, [Screen.REFUSED])
    assert "not the round in play" in str(t.shown(Screen.REFUSED).data["reason"])


def test_the_tables_own_reasons_are_never_typed() -> None:
    t = Table().to_result()
    for reason in VoidReason:
        if not reason.is_typed:
            with pytest.raises(GameRuleError, match="own reason"):
                void(t, reason)


def test_a_void_over_a_fault_keeps_the_fault_and_one_with_bets_open_is_refused() -> None:
    t = Table().to_reading()
    t.send(Event.TAMPER)
    void(t, VoidReason.EQUIPMENT)
    assert t.state is State.FAULT
    assert t.machine.context.round_number == 2
    void(t, VoidReason.EQUIPMENT, round_meant=2)  # the next round's bets are open
    assert t.screens() == [Screen.REFUSED]


def test_an_rng_round_whose_session_ended_with_a_restart_is_void() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG))
    t.send(Event.NO_MORE_BETS)
    t.send(Event.DICE_SET)
    assert t.state is State.DRAWING
    t.send(Event.RNG_INTERRUPTED, detail="the session ended with the power")
    data = recorded(t, RecordKind.VOID)
    assert (data["reason"], data["wagers"], data["employee"]) == (
        "rng_interrupted",
        "returned",
        None,
    )
    assert t.state is State.IDLE
    # the next round's session is committed when its bets open (621a.8(a)(1))
    assert t.kinds()[-2:] == [ActionKind.PREPARE_RNG, ActionKind.SHOW]


# --- who did it --------------------------------------------------------------------------


def test_the_dealers_keys_name_the_dealer_signed_on_and_terminal_actions_their_account() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    assert recorded(t, RecordKind.NO_MORE_BETS)["employee"] is None  # nobody signed on
    t.send(Event.VOID_ROUND)
    t.send(Event.SHIFT_CHANGE, employee=DEALER, uid=1002)
    assert recorded(t, RecordKind.SHIFT_CHANGE) == {"round": 2, "dealer": DEALER, "uid": 1002}
    t.send(Event.BANK_SEAT_KEY)
    assert recorded(t, RecordKind.BANK_SELECTED)["employee"] == DEALER
    t.send(Event.BANK_SEAT_KEY)
    t.send(Event.NO_MORE_BETS)
    assert recorded(t, RecordKind.NO_MORE_BETS)["employee"] == DEALER
    t.send(Event.STYLE_KEY)
    assert recorded(t, RecordKind.DELIVERY_STYLE)["employee"] == DEALER
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, advance=3000, cycles=4)
    t.send(Event.TICK, advance=SETTINGS.settle_ms)
    t.read(good_reading()).read(good_reading())
    t.send(Event.CLOSE_ROUND)
    assert recorded(t, RecordKind.CLOSE) == {"round": 2, "employee": DEALER}
    t.send(Event.SHIFT_CHANGE)  # the panel's key: the next dealer has not signed on yet
    t.send(Event.SHUFFLED)
    assert recorded(t, RecordKind.TILES_SHUFFLED)["employee"] is None


# --- the meters ------------------------------------------------------------------------------


class RecordingTable(Table):
    """A table that keeps every record it was given, in order."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.log: list[tuple[RecordKind, dict[str, object]]] = []

    def send(self, event: Event, advance: int = 10, **data: object) -> list:  # type: ignore[type-arg]
        actions = super().send(event, advance, **data)
        self.log.extend((a.record, dict(a.data)) for a in actions if a.record is not None)
        return actions


def test_the_meters_count_what_the_records_say_happened() -> None:
    t = RecordingTable(replace(SETTINGS, max_reshakes=5))
    t.send(Event.POWER_ON, config=config_loaded_data(Config()))
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, cycles=1)  # too few cycles: a no roll
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.LID_OPENED)  # a no roll, and a lid opening
    t.send(Event.LID_CLOSED)
    t.send(Event.VOID_ROUND)  # the dealer's void
    t.send(Event.LID_OPENED)  # outside any shake: still counted
    t.send(Event.LID_CLOSED)
    t.send(Event.TAMPER)
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    t.to_result(good_reading(1, 2, 5))
    correct(t, Roll(6, (2, 5)), meant=(2, 1))
    t.send(Event.CLOSE_ROUND)
    t.send(Event.SERVICE_MODE, supervisor=True, employee="T0042")
    meters = t.machine.context.meters
    zero = Meters().as_record()
    assert meters.as_record() == {
        **zero,
        "games": 1,
        "no_rolls": {**zero["no_rolls"], "too_few_cycles": 1, "lid_opened": 1},  # type: ignore[dict-item]
        "corrections": 1,
        "round_voids": 1,
        "lid_openings": 2,
        "tamper": 1,
        "power_ups": 1,
        "service_mode": 1,
    }
    # the log's own count (paigow-controller meters) agrees with the table's
    recount = Meters()
    for kind, data in t.log:
        recount = counted(recount, kind, data)
    assert recount == meters


def test_the_screen_a_step_shows_counts_that_steps_records() -> None:
    t = Table().to_result()
    t.send(Event.CLOSE_ROUND)
    assert t.shown(Screen.READY).data["meters"]["games"] == 1  # type: ignore[index]
    assert t.machine.context.meters.games == 1


def test_a_test_round_of_service_mode_counts_as_no_game() -> None:
    t = Table()
    t.send(Event.SERVICE_MODE, supervisor=True, employee="T0042")
    t.to_result()
    t.send(Event.CLOSE_ROUND)
    assert t.machine.context.meters.games == 0
    assert t.machine.context.meters.service_mode == 1


def test_tiles_need_pai_gow_and_a_poker_table_records_its_shuffle_as_such() -> None:
    t = Table(replace(SETTINGS, game=Game.POKER), context=OPENED)
    t.send(Event.SHUFFLED)
    assert t.records() == [RecordKind.SHUFFLE]
    with pytest.raises(GameRuleError, match="no tiles"):
        t.send(
            Event.TILES_INSPECTED, supervisor=True, employee="F0310", tile_set="T", dealer=DEALER
        )


def test_the_console_says_a_round_was_void_and_a_result_corrected() -> None:
    """What ``simulate`` and ``make demo`` print: a line per round, and after a void or a
    correction a line saying so (the console reads the screens alone)."""
    import io

    from controller.display.console import ConsoleDisplay

    out = io.StringIO()
    console = ConsoleDisplay(out)
    t = Table().to_result(good_reading(1, 2, 5))
    screens = [a for a in t.actions if a.kind is ActionKind.SHOW]
    correct(t, Roll(6, (2, 5)))
    screens += [a for a in t.actions if a.kind is ActionKind.SHOW]
    t.send(Event.CLOSE_ROUND)
    t.to_result()
    void(t, VoidReason.WRONG_COUNT, round_meant=2)
    screens += [a for a in t.actions if a.kind is ActionKind.SHOW]
    for action in screens:
        assert action.screen is not None
        console.show(action.screen, action.data, seq=None)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("round    1  dice R1 B2 B5  total  8")
    assert lines[1].startswith("  corrected: round    1  dice R6 B2 B5  total 13")
    assert lines[-1] == "  round 2 void (wrong_count): every wager returned"
    assert t.shown(Screen.READY).data["voided"] == {"round": 2, "reason": "wrong_count"}
