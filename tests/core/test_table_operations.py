"""The supervisor's actions in the core: the dice's 24 hours on the table (proposed 621a.5(c)),
the end-of-day shaker inspection (N.J.A.C. 13:69E-1.16A), the mode switch (current 621a.6(a)),
service mode (9 NYCRR 5319.58) and co-banking (621a.11(e), 645a.12(e)). Corrections and round
voids are tests/core/test_corrections.py's; the tiles and the table's time
tests/core/test_table_life.py's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.table import OPENED, SETTINGS, WALL, Table, good_reading

from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import (
    DICE_LIFE_MS,
    DICE_WARNING_MS,
    ActionKind,
    Event,
    Mode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
)
from controller.errors import GameRuleError

MIN = 60_000
SUPERVISOR = "S1021"
NO_DICE = replace(OPENED, dice_set=None, dice_since_table=None)  # the tiles inspected only


def replaced(t: Table, wall: int, dice_set: str | None = None) -> Table:
    t.send(Event.DICE_REPLACED, supervisor=True, wall=wall, dice_set=dice_set, employee=SUPERVISOR)
    return t


def dice_shown(t: Table, screen: Screen) -> object:
    return t.shown(screen).data["dice"]


# --- the dice's 24 hours -----------------------------------------------------------------------


def test_a_replacement_is_recorded_with_its_id_the_time_and_who_and_shown() -> None:
    t = Table(context=NO_DICE)
    t.send(Event.LID_CLOSED)
    replaced(t, WALL, "A-7")
    record = next(a for a in t.actions if a.record is RecordKind.DICE_REPLACED)
    assert record.data == {
        "round": 1,
        "dice_set": "A-7",
        "previous": None,
        "previous_age_ms": None,
        "wall_ms": WALL,
        "table_ms": 10,  # the table's own time: the second event after the first
        "employee": SUPERVISOR,
    }
    assert dice_shown(t, Screen.READY) == {"set": "A-7", "warning": None}
    assert (t.machine.context.dice_set, t.machine.context.dice_since) == ("A-7", WALL)
    replaced(t, WALL + 5 * MIN)
    record = next(a for a in t.actions if a.record is RecordKind.DICE_REPLACED)
    assert (record.data["previous"], record.data["previous_age_ms"]) == ("A-7", 5 * MIN)
    assert record.data["dice_set"] == "1"  # a named set is followed by number 1


@pytest.mark.parametrize(("current", "following"), [(None, "1"), ("1", "2"), ("41", "42")])
def test_the_next_number_follows_a_numbered_set(current: str | None, following: str) -> None:
    t = Table(context=NO_DICE)
    if current is not None:
        replaced(t, WALL, current)
    replaced(t, WALL + MIN)
    assert t.machine.context.dice_set == following


@pytest.mark.parametrize("bad", ["", "x" * 17, "a b", "é", "a/b", "1\n"])
def test_a_dice_set_id_is_short_plain_ascii(bad: str) -> None:
    t = Table()
    before = t.machine.context
    with pytest.raises(GameRuleError, match="dice set id"):
        replaced(t, WALL, bad)
    assert t.machine.context is before


def test_only_the_supervisor_replaces_the_dice_and_names_who() -> None:
    t = Table(context=NO_DICE)
    t.send(Event.DICE_REPLACED, wall=WALL, dice_set="2", employee=SUPERVISOR)
    assert t.screens() == [Screen.REFUSED]
    assert t.machine.context.dice_set is None
    with pytest.raises(GameRuleError, match="names the employee"):
        t.send(Event.DICE_REPLACED, supervisor=True, wall=WALL, dice_set="2")
    with pytest.raises(GameRuleError, match="employee id"):
        t.send(Event.DICE_REPLACED, supervisor=True, wall=WALL, dice_set="2", employee="S 1")
    assert t.machine.context.dice_set is None


@pytest.mark.parametrize(
    ("age", "warning", "shakes"),
    [
        (0, None, True),
        (DICE_WARNING_MS - 1, None, True),
        (DICE_WARNING_MS, "within 60 min", True),
        (DICE_LIFE_MS - MIN, "within 1 min", True),
        (DICE_LIFE_MS - 1, "within 1 min", True),
        (DICE_LIFE_MS, "24 hours", False),
        (3 * DICE_LIFE_MS, "24 hours", False),
    ],
)
def test_the_display_warns_from_23_hours_and_no_shake_starts_at_24(
    age: int, warning: str | None, shakes: bool
) -> None:
    t = replaced(Table(), WALL, "5")
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL + age)
    shown = dice_shown(t, Screen.BETS_CLOSED)
    assert isinstance(shown, dict)
    assert shown["set"] == "5"
    if warning is None:
        assert shown["warning"] is None
    else:
        assert warning in shown["warning"]
        assert "621a.5(c)" in shown["warning"]
    t.send(Event.SHAKE_PRESSED, wall=WALL + age)
    if shakes:
        assert t.state is State.SHAKING
        return
    assert t.state is State.ARMED
    assert t.screens() == [Screen.REFUSED]
    assert "replaces them" in str(t.shown(Screen.REFUSED).data["reason"])
    assert ActionKind.START_SHAKE not in t.kinds()
    replaced(t, WALL + age + MIN)  # the supervisor puts in a new set: the shake starts
    assert dice_shown(t, Screen.BETS_CLOSED) == {"set": "6", "warning": None}
    t.send(Event.SHAKE_PRESSED, wall=WALL + age + 2 * MIN)
    assert t.state is State.SHAKING


def test_a_manual_shaker_is_not_read_with_dice_past_24_hours() -> None:
    t = replaced(Table(replace(SETTINGS, mode=Mode.MANUAL)), WALL)
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.DICE_SET, wall=WALL + DICE_LIFE_MS)
    assert (t.state, t.screens()) == (State.ARMED, [Screen.REFUSED])
    t.send(Event.DICE_SET, wall=WALL + DICE_LIFE_MS - 1)
    assert t.state is State.READING


def test_rng_mode_shows_and_checks_no_dice() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG), context=NO_DICE)
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL + 2 * DICE_LIFE_MS)
    assert t.state is State.ARMED
    assert "dice" not in t.shown(Screen.BETS_CLOSED).data
    t.send(Event.DICE_SET, wall=WALL + 2 * DICE_LIFE_MS)
    assert t.state is State.DRAWING
    assert "dice" not in t.shown(Screen.DRAWING).data


def test_the_dice_clock_survives_a_restart() -> None:
    t = replaced(Table(), WALL, "9")
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    stored = decode_context(encode_context(t.machine.context))
    after = Table()
    after.machine = RoundMachine(SETTINGS, stored)
    after.send(Event.POWER_ON, wall=WALL + DICE_LIFE_MS)
    after.send(Event.LID_CLOSED)
    after.send(Event.SHAKE_PRESSED, wall=WALL + DICE_LIFE_MS)
    assert (after.state, after.screens()) == (State.ARMED, [Screen.REFUSED])


def test_a_clock_set_back_never_lengthens_the_dice_life() -> None:
    t = replaced(Table(), WALL, "2")
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS, wall=WALL - DICE_LIFE_MS)  # the clock set back a day
    assert dice_shown(t, Screen.BETS_CLOSED) == {"set": "2", "warning": None}
    t.send(Event.TICK, advance=DICE_LIFE_MS)  # a day of the table's own time
    t.send(Event.SHAKE_PRESSED, wall=WALL - DICE_LIFE_MS)
    assert (t.state, t.screens()) == (State.ARMED, [Screen.REFUSED])
    assert "24 hours" in str(t.shown(Screen.REFUSED).data["reason"])


# --- the shaker's inspection ---------------------------------------------------------------------


def test_the_end_of_day_inspection_is_a_supervisor_record() -> None:
    t = Table()
    t.send(Event.SHAKER_INSPECTED, wall=WALL, detail="cup and lid intact", employee=SUPERVISOR)
    assert t.screens() == [Screen.REFUSED]
    t.send(
        Event.SHAKER_INSPECTED,
        supervisor=True,
        wall=WALL,
        detail="cup and lid intact",
        employee=SUPERVISOR,
        uid=1001,
    )
    record = next(a for a in t.actions if a.record is RecordKind.SUPERVISOR_ACTION)
    assert record.data == {
        "round": 1,
        "action": "shaker_inspected",
        "detail": "cup and lid intact",
        "wall_ms": WALL,
        "employee": SUPERVISOR,
        "uid": 1001,
    }
    assert t.state is State.IDLE


# --- the mode switch ---------------------------------------------------------------------------

SWITCHING = replace(SETTINGS, modes=(Mode.RNG, Mode.MANUAL))


def switch(t: Table, mode: Mode, *, supervisor: bool = True) -> Table:
    t.send(Event.MODE_SWITCH, supervisor=supervisor, mode=mode, employee=SUPERVISOR)
    return t


def test_between_rounds_the_supervisor_switches_to_the_rng_and_back() -> None:
    t = Table(SWITCHING)
    t.send(Event.LID_CLOSED)
    switch(t, Mode.RNG)
    changed = next(a for a in t.actions if a.record is RecordKind.MODE_CHANGED)
    assert changed.data == {
        "round": 1,
        "previous": "shaker",
        "mode": "rng",
        "cleared": [],
        "employee": SUPERVISOR,
    }
    # 621a.8(a)(1): the session is committed and shown before the bets close
    assert t.kinds() == [ActionKind.RECORD, ActionKind.PREPARE_RNG, ActionKind.SHOW]
    assert t.shown(Screen.READY).data["mode"] == "rng"
    assert "dice" not in t.shown(Screen.READY).data
    t.send(Event.NO_MORE_BETS)
    assert t.state is State.ARMED  # 621a.11(i): the style of delivery before the draw
    assert next(a for a in t.actions if a.record is RecordKind.NO_MORE_BETS).data["mode"] == "rng"
    t.send(Event.DICE_SET)
    assert t.state is State.DRAWING
    t.send(Event.RNG_DRAWN, rng_number=4)
    t.send(Event.CLOSE_ROUND)
    switch(t, Mode.SHAKER)
    assert ActionKind.CLOSE_RNG in t.kinds()  # the session is revealed on leaving
    assert ActionKind.PREPARE_RNG not in t.kinds()
    assert t.shown(Screen.READY).data["mode"] == "shaker"
    t.send(Event.NO_MORE_BETS)
    assert t.state is State.ARMED


def test_a_switch_needs_the_key_an_allowed_mode_another_mode_and_the_sensor() -> None:
    t = Table(SWITCHING)
    before = t.machine.context
    assert switch(t, Mode.RNG, supervisor=False).screens() == [Screen.REFUSED]
    assert switch(t, Mode.SHAKER).screens() == [Screen.REFUSED]  # already in it
    with pytest.raises(GameRuleError, match="not allowed"):
        switch(Table(), Mode.RNG)  # no [table] modes: no switch
    assert t.machine.context is before
    t.send(Event.SENSOR_LOST)
    t.send(Event.SENSOR_BACK)
    switch(t, Mode.RNG)
    t.send(Event.SENSOR_LOST)  # an RNG table notes it, plays on
    assert switch(t, Mode.MANUAL).screens() == [Screen.REFUSED]
    assert "sensor" in str(t.shown(Screen.REFUSED).data["reason"])


def test_a_sensor_fault_offers_the_rng_and_one_action_switches_the_table_to_it() -> None:
    t = Table(SWITCHING).to_reading()
    t.send(Event.SENSOR_TIMEOUT)
    assert t.shown(Screen.FAULT).data == {"faults": ["sensor_timeout"], "fallback": "rng"}
    switch(t, Mode.RNG)
    # the round whose bets closed under the shaker is void; the next opens with the RNG
    assert t.records() == [
        RecordKind.VOID,
        RecordKind.MODE_CHANGED,
        RecordKind.ROUND_OPENED,
    ]
    changed = next(a for a in t.actions if a.record is RecordKind.MODE_CHANGED)
    assert changed.data["cleared"] == ["sensor_timeout"]
    assert changed.data["round"] == 2
    ctx = t.machine.context
    assert (ctx.state, ctx.round_number, ctx.active_faults) == (State.IDLE, 2, frozenset())
    assert ActionKind.PREPARE_RNG in t.kinds()
    t.send(Event.NO_MORE_BETS)
    assert t.state is State.ARMED


def test_a_fault_the_rng_cannot_do_without_stays_after_the_switch() -> None:
    t = Table(SWITCHING)
    t.send(Event.LID_CLOSED)
    t.send(Event.SENSOR_LOST)
    t.send(Event.TAMPER)
    assert "fallback" not in t.shown(Screen.FAULT).data  # a tamper is not the dice's
    switch(t, Mode.RNG)
    ctx = t.machine.context
    assert ctx.state is State.FAULT
    assert {str(f) for f in ctx.active_faults} == {"tamper"}
    assert t.shown(Screen.FAULT).data == {"faults": ["tamper"]}
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.IDLE
    assert ActionKind.PREPARE_RNG in t.kinds()


def test_a_result_stands_when_the_table_falls_back_after_it() -> None:
    t = Table(SWITCHING).to_result()
    result = t.machine.context.result
    t.send(Event.MOTOR_OVERRUN)
    switch(t, Mode.RNG)
    assert RecordKind.VOID not in t.records()
    assert (t.state, t.machine.context.result) == (State.RESULT, result)
    t.send(Event.CLOSE_ROUND)
    assert ActionKind.PREPARE_RNG in t.kinds()


def test_out_of_a_fault_only_the_rng_is_offered_and_only_where_allowed() -> None:
    t = Table(SWITCHING).to_reading()
    t.send(Event.SENSOR_TIMEOUT)
    assert switch(t, Mode.MANUAL).screens() == [Screen.REFUSED]
    plain = Table().to_reading()
    plain.send(Event.SENSOR_TIMEOUT)
    assert plain.shown(Screen.FAULT).data == {"faults": ["sensor_timeout"]}


def test_the_mode_switched_to_survives_a_restart_while_the_table_allows_it() -> None:
    t = switch(Table(SWITCHING), Mode.RNG)
    stored = decode_context(encode_context(t.machine.context))
    again = Table(SWITCHING)
    again.machine = RoundMachine(SWITCHING, stored)
    again.send(Event.POWER_ON)
    assert again.shown(Screen.READY).data["mode"] == "rng"
    narrowed = Table()  # the configuration no longer allows the RNG: the configured mode
    narrowed.machine = RoundMachine(SETTINGS, stored)
    narrowed.send(Event.POWER_ON)
    assert narrowed.shown(Screen.READY).data["mode"] == "shaker"


# --- service mode ------------------------------------------------------------------------------


def service(t: Table, *, supervisor: bool = True) -> Table:
    t.send(Event.SERVICE_MODE, supervisor=supervisor, employee="T0042")
    return t


def test_service_mode_is_entered_with_the_key_and_lights_every_lamp() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    assert service(t, supervisor=False).screens() == [Screen.REFUSED]
    service(t)
    assert t.records() == [RecordKind.SERVICE_MODE]
    assert t.actions[0].data == {"round": 1, "entered": True, "employee": "T0042"}
    assert t.shown(Screen.READY).data["service"] is True
    assert t.kinds()[-1] is ActionKind.LAMP_TEST
    t.send(Event.LAMP_TEST, employee="T0042")
    assert t.screens() == [Screen.REFUSED]  # the key is needed for each test
    t.send(Event.LAMP_TEST, supervisor=True, employee="T0042")
    assert t.kinds() == [ActionKind.LAMP_TEST]


def test_a_test_round_is_recorded_as_test_records_only_and_leaving_reopens_the_live_round() -> None:
    t = service(Table())
    t.to_result(good_reading(6, 6, 6))
    assert t.shown(Screen.RESULT).data["service"] is True
    assert t.records() == [RecordKind.SERVICE_TEST, RecordKind.SERVICE_TEST]
    assert [a.data["record"] for a in t.actions if a.kind is ActionKind.RECORD] == [
        "reading",
        "result",
    ]
    t.send(Event.CLOSE_ROUND)  # the next test round
    assert t.records() == [RecordKind.SERVICE_TEST, RecordKind.SERVICE_TEST]
    assert t.shown(Screen.READY).data == {**t.shown(Screen.READY).data, "service": True}
    service(t)  # leave
    left = next(a for a in t.actions if a.record is RecordKind.SERVICE_MODE)
    assert left.data == {"round": 1, "entered": False, "test_rounds": 1, "state": "idle"}
    ready = t.shown(Screen.READY)
    assert (ready.data["round"], "service" in ready.data) == (1, False)
    assert (t.machine.context.round_number, t.machine.context.service_round) == (1, None)
    t.send(Event.NO_MORE_BETS)
    assert t.records() == [RecordKind.NO_MORE_BETS]  # live again


def test_a_round_in_play_is_void_when_service_mode_is_entered() -> None:
    t = Table().to_armed()
    service(t)
    assert t.records() == [RecordKind.VOID, RecordKind.ROUND_OPENED, RecordKind.SERVICE_MODE]
    assert t.machine.context.service_round == 2
    decided = Table().to_result()
    assert service(decided).screens() == [Screen.REFUSED]  # the dealer closes it first
    shaking = Table().to_shaking()
    assert service(shaking).screens() == [Screen.REFUSED]


def test_in_service_mode_the_dice_are_read_as_they_lie_whatever_their_age() -> None:
    t = replaced(Table(), WALL)
    t.send(Event.LID_CLOSED)
    service(t)
    t.send(Event.NO_MORE_BETS, wall=WALL + 2 * DICE_LIFE_MS)
    t.send(Event.DICE_SET, wall=WALL + 2 * DICE_LIFE_MS)  # read without shaking
    assert t.state is State.READING


def test_service_mode_never_touches_the_rng() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG))
    t.send(Event.LID_CLOSED)
    service(t)
    assert ActionKind.PREPARE_RNG not in t.kinds()
    with pytest.raises(GameRuleError, match="service mode"):
        t.send(Event.NO_MORE_BETS)
    service(t)
    assert ActionKind.PREPARE_RNG in t.kinds()  # live again: a session for the next bets


def test_a_fault_in_service_mode_stays_when_it_is_left() -> None:
    t = service(Table()).to_shaking()
    t.send(Event.MOTOR_OVERRUN)
    assert t.shown(Screen.FAULT).data["service"] is True
    service(t)
    ctx = t.machine.context
    assert (ctx.state, ctx.resume_state, ctx.service_round) == (State.FAULT, State.IDLE, None)
    assert ActionKind.STOP_MOTOR in t.kinds()
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert (t.state, t.machine.context.round_number) == (State.IDLE, 1)


def test_service_mode_survives_a_restart() -> None:
    t = service(Table()).to_shaking()
    stored = decode_context(encode_context(t.machine.context))
    again = Table()
    again.machine = RoundMachine(SETTINGS, stored)
    again.send(Event.POWER_ON)
    assert again.records()[0] is RecordKind.POWER_ON
    assert RecordKind.INTERRUPTED not in again.records()  # a test shake: a test record
    assert all(a.data.get("service") for a in again.actions if a.kind is ActionKind.SHOW)
    recovery = next(a for a in again.actions if a.record is RecordKind.RECOVERY)
    assert recovery.data["service"] is True  # its round is a test round's number


def test_test_rounds_do_not_count_for_the_live_bank_rules() -> None:
    """621a.11(b),(c): a test round is no round of the game; the first live round after a
    shuffle is still the first after service mode, and a seat that banked a test round may
    bank the next live one."""
    t = Table()
    t.send(Event.LID_CLOSED)
    t.send(Event.SHUFFLED)
    service(t)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)  # a test round played
    service(t)  # leave
    assert t.machine.context.bank_history.rounds_since_shuffle == 0
    t.send(Event.BANK_SEAT_KEY)  # seat 1
    assert "first round after a shuffle" in t.shown(Screen.READY).data["bank_refused"]
    with pytest.raises(GameRuleError, match="first round after a shuffle"):
        t.send(Event.NO_MORE_BETS)
    played = Table()
    played.to_armed()
    played.send(Event.VOID_ROUND)  # round 1 played: seats may bank round 2
    history = played.machine.context.bank_history
    service(played)
    for _ in range(2):
        played.send(Event.BANK_SEAT_KEY)
        played.send(Event.NO_MORE_BETS)  # a test round banked by seat 1
        played.send(Event.VOID_ROUND)
    service(played)
    assert played.machine.context.bank_history == history


# --- co-banking (Pai Gow Poker) and the bank on the lamp ---------------------------------------

POKER = replace(SETTINGS, game=Game.POKER, co_banking=True)


def poker_with_a_player_bank(settings: RoundSettings = POKER) -> Table:
    t = Table(settings)
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)  # a round played: seats may bank now (645a.12(b))
    t.send(Event.BANK_SEAT_KEY)
    t.send(Event.BANK_SEAT_KEY)  # seat 2
    return t


def test_a_player_bank_co_banks_with_the_dealer_and_no_more_bets_carries_it() -> None:
    t = poker_with_a_player_bank()
    t.send(Event.STYLE_KEY)
    record = next(a for a in t.actions if a.record is RecordKind.BANK_SELECTED)
    assert record.data == {
        "round": 2,
        "bank": "seat 2",
        "refused": None,
        "co_bank": True,
        "employee": None,  # a panel key, no dealer signed on
    }
    assert t.shown(Screen.READY).data["co_bank"] is True
    t.send(Event.NO_MORE_BETS)
    closed = next(a for a in t.actions if a.record is RecordKind.NO_MORE_BETS)
    assert (closed.data["bank"], closed.data["co_bank"]) == ("seat 2", True)


def test_co_banking_is_switched_off_again_and_follows_the_bank() -> None:
    t = poker_with_a_player_bank()
    t.send(Event.STYLE_KEY)
    t.send(Event.STYLE_KEY)
    assert "co_bank" not in t.shown(Screen.READY).data
    t.send(Event.STYLE_KEY)
    t.send(Event.BANK_SEAT_KEY)  # another bank: asked again
    assert t.machine.context.co_bank is False
    t.send(Event.NO_MORE_BETS)
    closed = next(a for a in t.actions if a.record is RecordKind.NO_MORE_BETS)
    assert "co_bank" not in closed.data


def test_co_banking_needs_a_player_bank_a_table_that_offers_it_and_bets_open() -> None:
    t = Table(POKER)
    t.send(Event.STYLE_KEY)  # the dealer banks
    assert t.screens() == [Screen.REFUSED]
    plain = poker_with_a_player_bank(replace(POKER, co_banking=False))
    with pytest.raises(GameRuleError, match="does not offer co-banking"):
        plain.send(Event.STYLE_KEY)
    armed = poker_with_a_player_bank()
    armed.send(Event.NO_MORE_BETS)
    with pytest.raises(GameRuleError, match=r"645a\.12"):
        armed.send(Event.STYLE_KEY)


def test_the_next_round_starts_without_co_banking() -> None:
    t = poker_with_a_player_bank()
    t.send(Event.STYLE_KEY)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)
    assert t.machine.context.co_bank is False


def test_tiles_have_no_co_banking_and_the_style_waits_for_no_more_bets() -> None:
    t = Table()
    with pytest.raises(GameRuleError, match=r"621a\.11"):
        t.send(Event.STYLE_KEY)


def test_leaving_service_mode_drops_co_banking_with_the_bank() -> None:
    t = poker_with_a_player_bank()
    t.send(Event.STYLE_KEY)  # seat 2 co-banks
    service(t)
    service(t)  # leave: bets open again with the dealer's bank
    assert (t.machine.context.bank_seat, t.machine.context.co_bank) == (None, False)
    assert "co_bank" not in t.shown(Screen.READY).data


@pytest.mark.parametrize("event", [Event.SHIFT_CHANGE, Event.SHUFFLED])
def test_live_events_wait_until_service_mode_is_left(event: Event) -> None:
    t = service(Table(replace(SETTINGS, mode=Mode.RNG)))
    before = t.machine.context
    with pytest.raises(GameRuleError, match="leave service mode first"):
        t.send(event)
    assert t.machine.context is before
    service(t)
    t.send(event)
    assert t.records()[0] in (RecordKind.SHIFT_CHANGE, RecordKind.TILES_SHUFFLED)
