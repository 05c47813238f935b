"""The round state machine: the whole State x Event product, and each rule's behaviour."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

import pytest
from support import COSIGNED
from support.table import SETTINGS, TILTED, WALL, Table, good_reading

from controller.core.config import Config
from controller.core.dice import NoRollReason, Roll
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.software import (
    Change,
    Difference,
    SoftwareCheck,
    SoftwareIdentity,
    SoftwareResult,
)
from controller.core.state import (
    EVENT_TYPES,
    MOTOR_GRACE_MS,
    TRANSITIONS,
    ActionKind,
    ClockSync,
    CorrectionReason,
    Event,
    Fault,
    KeyEvent,
    Mode,
    Occurrence,
    RngMode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    VoidReason,
    occurrence,
)
from controller.errors import BankRuleError, ConfigError, GameRuleError, IllegalTransition

# --- the whole product --------------------------------------------------------------------


def reach(mode: Mode, state: State, game: Game = Game.TILES) -> RoundMachine | None:
    """A machine in ``state`` reached by real events in ``mode`` (at a table of ``game`` that
    may switch to every other mode and offers co-banking), or None if unreachable."""
    settings = replace(SETTINGS, mode=mode, modes=tuple(Mode), game=game, co_banking=True)
    t = Table(settings)
    t.send(Event.LID_CLOSED)
    if state is State.IDLE:
        return t.machine
    t.send(Event.NO_MORE_BETS)
    if mode is Mode.RNG:
        if state is State.ARMED and game is Game.TILES:
            return t.machine  # 621a.11(i): the style of delivery before the draw
        if game is Game.TILES:
            t.send(Event.DICE_SET)
        if state is State.DRAWING:
            return t.machine
        if state is State.RESULT:
            t.send(Event.RNG_DRAWN, rng_number=3)
            return t.machine
        if state is State.FAULT:
            t.send(Event.TAMPER)
            return t.machine
        return None
    if state is State.ARMED:
        return t.machine
    if state is State.FAULT:
        t.send(Event.TAMPER)
        return t.machine
    if mode is Mode.SHAKER:
        if state is State.WAITING:
            t.send(Event.SHAKE_PRESSED, delay_ms=500)
            return t.machine
        t.send(Event.SHAKE_PRESSED)
        if state is State.SHAKING:
            return t.machine
        t.send(Event.SHAKE_DONE, cycles=3)
        if state is State.SETTLING:
            return t.machine
        t.send(Event.TICK, advance=SETTINGS.settle_ms)
    else:
        t.send(Event.DICE_SET)
    if state is State.READING:
        return t.machine
    if state is State.RESULT:
        t.read(good_reading()).read(good_reading())
        return t.machine
    if state is State.NO_ROLL:
        t.read(TILTED)
        return t.machine
    if state is State.LOCKED:
        t.read(TILTED)
        t.send(Event.DICE_SET if mode is Mode.MANUAL else Event.SHAKE_PRESSED)
        t.send(Event.SHAKE_DONE, cycles=1) if mode is Mode.SHAKER else t.read(TILTED)
        return t.machine
    return None


def occurrences(event: Event, at: int) -> Iterator[Occurrence]:
    """Representative data for each event, with and without the supervisor key."""
    data: dict[str, object] = {}
    if event is Event.READING:
        data["reading"] = good_reading()
    if event is Event.SHAKE_DONE:
        data["cycles"] = 3
    if event is Event.RNG_DRAWN:
        data["rng_number"] = 5
        data["roll"] = Roll(1, (2, 3))
    if event is Event.FAULT:
        data["fault"] = Fault.INTERNAL
    if event is Event.CORRECT_RESULT:
        data["correction"] = CorrectionReason.MISREAD
        data["result_meant"] = (1, 1)  # the result the walk reaches: round 1, attempt 1
        data["dice_seen"] = Roll(6, (6, 6))
        data["employee"] = "S100"
    if event is Event.VOID_ROUND:
        yield occurrence(
            event,
            at=at,
            supervisor=True,
            void_reason=VoidReason.WRONG_COUNT,
            round_meant=1,
            employee="S100",
        )
    if event is Event.TILES_INSPECTED:
        data.update(tile_set="T2", dealer="D7", employee="S100")
    if event is Event.RNG_INTERRUPTED:
        data["detail"] = "the session ended with a restart"
    if event in _BY_AN_EMPLOYEE:
        data["employee"] = "S100"
    if event is Event.CLOCK_CHANGED:
        data["clock"] = ClockSync.SYNCHRONISED
    if event is Event.COSIGNED:
        data["cosignature"] = COSIGNED
    if event is Event.ROLLBACK_EVIDENCE:
        data["cosignature"] = {"witness": "w", "size": 90, "log_size": 40, "note": "n"}
    if event is Event.SOFTWARE_CHECKED:
        yield occurrence(event, at=at, software=MISMATCH)
        data["software"] = VERIFIED
    if event is Event.SHAKE_PRESSED:
        yield occurrence(event, at=at, delay_ms=400)
    if event is Event.DICE_REPLACED:
        yield occurrence(event, at=at, supervisor=True, wall=WALL, dice_set="B-2", employee="S100")
    if event is Event.MODE_SWITCH:
        for mode in Mode:
            yield occurrence(event, at=at, supervisor=True, wall=WALL, mode=mode, employee="S100")
        data["mode"] = Mode.RNG  # a mode switch always names its mode
    # the supervisor key is a key's (a person's) to turn: the table's own events have none
    keys = (False, True) if issubclass(EVENT_TYPES[event], KeyEvent) else (False,)
    for supervisor in keys:
        yield occurrence(event, at=at, supervisor=supervisor, **data)
        yield occurrence(event, at=at, supervisor=supervisor, wall=WALL, **data)


# the supervisor's actions at the service terminal, which always name who does them
_BY_AN_EMPLOYEE = frozenset(
    {
        Event.DICE_REPLACED,
        Event.DICE_KEPT,
        Event.SHAKER_INSPECTED,
        Event.MODE_SWITCH,
        Event.SERVICE_MODE,
        Event.RECALL,
        Event.LAMP_TEST,
    }
)


VERIFIED = SoftwareCheck(SoftwareResult.OK, "1.0", manifest="ab" * 32, key="01020304", files=80)
MISMATCH = replace(
    VERIFIED,
    result=SoftwareResult.MISMATCH,
    differences=(Difference("controller/core/state.py", Change.CHANGED),),
)


REACHABLE = [
    (g, m, s) for g, m, s in itertools.product(Game, Mode, State) if reach(m, s, g) is not None
]


def test_every_state_is_reachable_in_some_mode() -> None:
    for game in Game:
        assert {s for g, _, s in REACHABLE if g is game} == set(State)


@pytest.mark.parametrize(
    ("game", "mode", "state"), REACHABLE, ids=[f"{g}-{m}-{s}" for g, m, s in REACHABLE]
)
@pytest.mark.parametrize("event", list(Event))
def test_every_state_event_pair(game: Game, mode: Mode, state: State, event: Event) -> None:
    machine = reach(mode, state, game)
    assert machine is not None
    assert machine.state is state
    for occ in occurrences(event, at=machine.context.deadline or 100_000):
        probe = RoundMachine(machine.settings, machine.context)
        before = probe.context
        allowed = TRANSITIONS.get((state, event))
        if allowed is None:
            with pytest.raises(IllegalTransition) as raised:
                probe.handle(occ)
            assert str(state) in str(raised.value)
            assert str(event) in str(raised.value)
            assert probe.context is before
            continue
        try:
            probe.handle(occ)
        except (IllegalTransition, GameRuleError):
            assert probe.context is before  # refused on purpose (mode or data): unchanged
            continue
        assert probe.state in allowed, f"{state} --{event}--> {probe.state}"


def test_every_table_entry_is_taken_by_some_mode() -> None:
    """No dead rows: each (state, event) in the table moves somewhere in at least one mode."""
    taken: set[tuple[State, Event]] = set()
    for (game, mode, state), event in itertools.product(REACHABLE, Event):
        machine = reach(mode, state, game)
        if machine is None or (state, event) not in TRANSITIONS:
            continue
        for occ in occurrences(event, at=machine.context.deadline or 100_000):
            probe = RoundMachine(machine.settings, machine.context)
            try:
                probe.handle(occ)
            except (IllegalTransition, GameRuleError):
                continue
            taken.add((state, event))
    assert set(TRANSITIONS) - taken == set()


def test_illegal_pair_names_both_and_keeps_the_state() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    before = t.machine.context
    with pytest.raises(IllegalTransition, match=r"close_round.*idle"):
        t.send(Event.CLOSE_ROUND)
    assert t.machine.context is before


# --- the player-activated shaker ------------------------------------------------------------


def test_a_normal_round() -> None:
    t = Table()
    t.to_armed()
    assert t.state is State.ARMED
    assert t.records() == [RecordKind.NO_MORE_BETS]
    t.send(Event.SHAKE_PRESSED)
    assert t.state is State.SHAKING
    assert t.kinds()[0] is ActionKind.START_SHAKE
    t.send(Event.SHAKE_DONE, advance=3000, cycles=3)
    assert t.state is State.SETTLING
    assert t.records() == [RecordKind.SHAKE]
    assert t.actions[1].data["cycles"] == 3
    t.send(Event.TICK, advance=999)
    assert t.state is State.SETTLING
    t.send(Event.TICK, advance=1)
    assert t.state is State.READING
    assert ActionKind.REQUEST_READ in t.kinds()
    t.read(good_reading(6, 2, 1))
    assert t.state is State.READING  # K = 2
    assert ActionKind.REQUEST_READ in t.kinds()
    t.read(good_reading(6, 2, 1))
    assert t.state is State.RESULT
    record = next(a for a in t.actions if a.record is RecordKind.RESULT)
    assert record.data["total"] == 9
    assert record.data["starting_position"] == "dealer"  # 621a.8(c)(1)
    assert record.data["dice"] == {"red": 6, "blue": [2, 1]}
    wagers = record.data["wagers"]
    assert isinstance(wagers, dict)
    assert wagers["beat_it"] == {"red": True, "any": True}
    t.send(Event.CLOSE_ROUND)
    assert t.state is State.IDLE
    assert t.records() == [RecordKind.CLOSE, RecordKind.ROUND_OPENED]
    assert t.machine.context.round_number == 2


def test_the_result_is_recorded_before_it_is_shown() -> None:
    t = Table().to_result()
    kinds = [(a.kind, a.record or a.screen) for a in t.actions]
    assert kinds.index((ActionKind.RECORD, RecordKind.RESULT)) < kinds.index(
        (ActionKind.SHOW, Screen.RESULT)
    )


def test_shaking_needs_the_lid_closed() -> None:
    t = Table()
    t.send(Event.NO_MORE_BETS)
    t.send(Event.SHAKE_PRESSED)
    assert t.state is State.ARMED
    assert t.screens() == [Screen.REFUSED]
    assert ActionKind.START_SHAKE not in t.kinds()
    t.send(Event.LID_CLOSED)
    t.send(Event.SHAKE_PRESSED)
    assert t.state is State.SHAKING


@pytest.mark.parametrize("path", ["to_shaking", "to_settling", "to_reading"])
def test_lid_opened_during_a_shake_voids_it(path: str) -> None:
    t = Table()
    getattr(t, path)()
    t.send(Event.LID_OPENED)
    assert t.state is State.NO_ROLL
    assert t.kinds()[0] is ActionKind.STOP_MOTOR
    no_roll = next(a for a in t.actions if a.record is RecordKind.NO_ROLL)
    assert no_roll.data["reason"] == "lid_opened"
    # the player reshakes once the lid is closed again
    t.send(Event.SHAKE_PRESSED)
    assert t.state is State.NO_ROLL
    t.send(Event.LID_CLOSED)
    t.send(Event.SHAKE_PRESSED)
    assert t.state is State.SHAKING
    assert t.machine.context.attempt == 2


def test_too_few_shake_cycles_is_a_reshake() -> None:
    t = Table().to_shaking()
    t.send(Event.SHAKE_DONE, cycles=2)
    assert t.state is State.NO_ROLL
    assert t.shown(Screen.NO_ROLL).data["reason"] == "too_few_cycles"


def test_min_shake_cycles_is_never_below_three() -> None:
    with pytest.raises(ConfigError, match="min_shake_cycles"):
        RoundSettings(min_shake_cycles=2)
    t = Table(replace(SETTINGS, min_shake_cycles=5)).to_shaking()
    t.send(Event.SHAKE_DONE, cycles=4)
    assert t.state is State.NO_ROLL


def test_button_mashing_during_a_shake_does_nothing() -> None:
    t = Table().to_shaking()
    before = t.machine.context
    for _ in range(5):
        t.send(Event.SHAKE_PRESSED, advance=0)
        assert t.actions == []
    assert t.machine.context == before


def test_a_no_roll_reading_is_recorded_and_reshaken() -> None:
    t = Table().to_reading()
    t.read(TILTED)
    assert t.state is State.NO_ROLL
    assert t.records() == [RecordKind.READING, RecordKind.NO_ROLL]
    assert t.shown(Screen.NO_ROLL).data["words"] == "a die is not flat"


def test_reshake_limit_locks_until_the_supervisor_clears() -> None:
    t = Table().to_reading()
    t.read(TILTED)
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, cycles=1)
    assert t.state is State.LOCKED
    assert RecordKind.RESHAKE_LIMIT in t.records()
    t.send(Event.CLEAR_FAULT)
    assert t.state is State.LOCKED
    assert t.screens() == [Screen.REFUSED]
    t.send(Event.VOID_ROUND)
    assert t.state is State.LOCKED
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.ARMED
    assert t.records() == [RecordKind.SUPERVISOR_ACTION]
    assert t.machine.context.no_rolls == 0


def test_dice_that_did_not_move_are_a_no_roll() -> None:
    t = Table().to_result(good_reading(shift=0))
    t.send(Event.CLOSE_ROUND)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, cycles=3)
    t.send(Event.TICK, advance=SETTINGS.settle_ms)
    t.read(good_reading(shift=1))
    t.read(good_reading(shift=1))
    assert t.state is State.NO_ROLL
    assert t.shown(Screen.NO_ROLL).data["reason"] == "dice_did_not_move"


# --- faults ---------------------------------------------------------------------------------


def test_motor_overrun_latches_and_needs_the_supervisor() -> None:
    t = Table().to_shaking()
    t.send(Event.MOTOR_OVERRUN)
    assert t.state is State.FAULT
    assert t.kinds()[:2] == [ActionKind.STOP_MOTOR, ActionKind.SAFE_STATE]
    t.send(Event.CLEAR_FAULT)
    assert t.state is State.FAULT
    assert t.screens() == [Screen.REFUSED]
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.ARMED  # the shake was void: shake again
    assert t.machine.context.attempt == 2


def test_the_core_backstops_a_shake_that_never_ends() -> None:
    t = Table().to_shaking()
    t.send(Event.TICK, advance=SETTINGS.motor_max_ms + MOTOR_GRACE_MS - 20)
    assert t.state is State.SHAKING
    t.send(Event.TICK, advance=20)
    assert t.state is State.FAULT
    fault = next(a for a in t.actions if a.record is RecordKind.FAULT)
    assert fault.data["fault"] == "motor_overrun"


def test_no_reading_in_time_is_a_sensor_fault_the_dealer_clears() -> None:
    t = Table().to_reading()
    t.send(Event.TICK, advance=SETTINGS.read_timeout_ms)
    assert t.state is State.FAULT
    t.send(Event.CLEAR_FAULT)
    assert t.state is State.ARMED


def test_sensor_lost_stays_until_it_is_back() -> None:
    t = Table().to_reading()
    t.send(Event.SENSOR_LOST)
    assert t.state is State.FAULT
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.FAULT
    assert t.screens() == [Screen.REFUSED]
    t.send(Event.SENSOR_BACK)
    t.send(Event.CLEAR_FAULT)
    assert t.state is State.ARMED


@pytest.mark.parametrize("path", ["to_armed", "to_shaking", "to_reading", "to_result"])
def test_tamper_latches_from_anywhere(path: str) -> None:
    t = Table()
    getattr(t, path)()
    before = t.state
    t.send(Event.TAMPER, detail="shaker tilted")
    assert t.state is State.FAULT
    assert ActionKind.SAFE_STATE in t.kinds()
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    expected = State.ARMED if before in (State.SHAKING, State.READING) else before
    assert t.state is expected


def test_tamper_while_idle() -> None:
    t = Table()
    t.send(Event.TAMPER)
    assert t.state is State.FAULT
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.IDLE


def test_tamper_is_not_cleared_while_the_shaker_is_still_loose() -> None:
    t = Table().to_armed()
    t.send(Event.TAMPER)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.FAULT
    assert t.screens() == [Screen.REFUSED]
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.ARMED


def test_faults_accumulate_and_clear_by_who_may() -> None:
    t = Table().to_armed()
    t.send(Event.SENSOR_TIMEOUT)
    t.send(Event.TAMPER)
    assert t.machine.context.active_faults == {Fault.SENSOR_TIMEOUT, Fault.TAMPER}
    t.send(Event.CLEAR_FAULT)  # the dealer clears the sensor fault only
    assert t.state is State.FAULT
    assert t.machine.context.active_faults == {Fault.TAMPER}
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.ARMED


def test_a_fault_after_the_result_shows_the_result_again_once_cleared() -> None:
    t = Table().to_result()
    t.send(Event.FAULT, fault=Fault.STORAGE)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.RESULT
    assert t.screens() == [Screen.RESULT]
    assert RecordKind.RESULT not in t.records()  # shown again, not decided again


# --- void and close ---------------------------------------------------------------------------


def test_void_after_a_result_needs_the_supervisor_at_the_terminal() -> None:
    t = Table().to_result()
    t.send(Event.VOID_ROUND)  # the dealer's key: the dice are read
    assert t.state is State.RESULT
    assert t.screens() == [Screen.REFUSED]
    t.send(Event.VOID_ROUND, supervisor=True)  # the key switch alone names no reason
    assert t.state is State.RESULT
    t.send(
        Event.VOID_ROUND,
        supervisor=True,
        void_reason=VoidReason.TILE_EXPOSED,
        round_meant=1,
        employee="S100",
    )
    assert t.state is State.IDLE
    assert t.records() == [RecordKind.VOID, RecordKind.ROUND_OPENED]


def test_the_dealer_may_void_a_round_in_play_and_the_motor_stops() -> None:
    t = Table().to_shaking()
    t.send(Event.VOID_ROUND)
    assert t.state is State.IDLE
    assert t.kinds()[0] is ActionKind.STOP_MOTOR


def test_void_during_a_fault_keeps_the_fault() -> None:
    t = Table().to_armed()
    t.send(Event.TAMPER)
    t.send(Event.VOID_ROUND)  # the dealer's key does not reach over a fault
    assert t.machine.context.round_number == 1
    t.send(
        Event.VOID_ROUND,
        supervisor=True,
        void_reason=VoidReason.EQUIPMENT,
        round_meant=1,
        employee="S100",
    )
    assert t.state is State.FAULT
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.IDLE
    assert t.machine.context.round_number == 2


# --- bank rules -----------------------------------------------------------------------------


def test_bank_rules_are_enforced_at_no_more_bets() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    before = t.machine.context
    with pytest.raises(BankRuleError):
        t.send(Event.NO_MORE_BETS, bank_seat=2)  # 621a.11(b): first round after a shuffle
    assert t.machine.context is before
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)
    t.send(Event.NO_MORE_BETS, bank_seat=2)
    assert t.state is State.ARMED
    t.send(Event.VOID_ROUND)
    with pytest.raises(BankRuleError):
        t.send(Event.NO_MORE_BETS, bank_seat=2)  # 621a.11(c): not two rounds in a row
    t.send(Event.NO_MORE_BETS, bank_seat=3)
    assert t.state is State.ARMED


def test_the_bank_seat_counts_first() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)
    t.send(Event.NO_MORE_BETS, bank_seat=3)
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, cycles=3)
    t.send(Event.TICK, advance=SETTINGS.settle_ms)
    t.read(good_reading(1, 1, 3)).read(good_reading(1, 1, 3))  # total 5
    result = next(a for a in t.actions if a.record is RecordKind.RESULT)
    assert result.data["bank"] == "seat 3"
    assert result.data["starting_position"] == "dead hand"  # 621a.11(j)


def test_a_shuffle_resets_the_bank_rules() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)
    t.send(Event.SHUFFLED)
    assert t.records() == [RecordKind.TILES_SHUFFLED]
    assert t.actions[0].data == {"round": 2, "reason": "new_game", "employee": None}
    with pytest.raises(BankRuleError):
        t.send(Event.NO_MORE_BETS, bank_seat=1)


# --- manual shaker and RNG ------------------------------------------------------------------


def test_manual_shaker_reads_when_the_dealer_sets_it() -> None:
    t = Table(replace(SETTINGS, mode=Mode.MANUAL))
    t.send(Event.NO_MORE_BETS)
    t.send(Event.SHAKE_PRESSED)  # no player button in manual mode
    assert t.state is State.ARMED
    t.send(Event.DICE_SET)
    assert t.state is State.READING
    t.send(Event.LID_OPENED)  # the dealer uncovers it on purpose (621a.8(a)(2))
    assert t.state is State.READING
    t.read(good_reading()).read(good_reading())
    assert t.state is State.RESULT


def test_dice_set_is_refused_outside_manual_mode() -> None:
    t = Table().to_armed()
    with pytest.raises(IllegalTransition):
        t.send(Event.DICE_SET)
    assert t.state is State.ARMED


def test_rng_position_mode() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG))
    t.send(Event.NO_MORE_BETS)
    assert t.state is State.ARMED  # 621a.11(i): the style of delivery, then the draw
    t.send(Event.DICE_SET)
    assert t.state is State.DRAWING
    draw = next(a for a in t.actions if a.kind is ActionKind.DRAW_NUMBER)
    assert draw.data == {"round": 1, "attempt": 1}
    with pytest.raises(GameRuleError):
        t.send(Event.RNG_DRAWN, rng_number=9)  # tiles: 1..8
    assert t.state is State.DRAWING
    t.send(Event.RNG_DRAWN, rng_number=7)
    assert t.state is State.RESULT
    result = next(a for a in t.actions if a.record is RecordKind.RESULT)
    assert result.data["starting_position"] == "seat 6"
    assert "dice" not in result.data


def test_rng_dice_mode_counts_the_total_and_settles_no_side_wager() -> None:
    # current 621a.5(e)(2)-(4): Sum, Match and Beat It are the physical dice's
    settings = replace(SETTINGS, mode=Mode.RNG, rng_mode=RngMode.DICE, game=Game.POKER)
    t = Table(settings)
    t.send(Event.NO_MORE_BETS)
    assert t.state is State.DRAWING  # Pai Gow Poker: no style of delivery to choose first
    t.send(Event.RNG_DRAWN, roll=Roll(5, (1, 1)))
    result = next(a for a in t.actions if a.record is RecordKind.RESULT)
    assert result.data["total"] == 7
    assert result.data["starting_position"] == "seat 6"
    assert result.data["dice"] == {"red": 5, "blue": [1, 1]}
    assert "wagers" not in result.data
    assert "payouts" not in result.data
    assert "wagers" not in t.shown(Screen.RESULT).data["result"]  # type: ignore[operator]


def test_an_interrupted_draw_is_resumed_not_replaced() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG))
    t.send(Event.NO_MORE_BETS)
    t.send(Event.DICE_SET)
    t.send(Event.FAULT, fault=Fault.RNG_FAILURE)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.DRAWING
    draw = next(a for a in t.actions if a.kind is ActionKind.DRAW_NUMBER)
    assert draw.data == {"round": 1, "attempt": 1}  # same round and attempt: shown again


def test_the_sensor_does_not_matter_to_an_rng_table() -> None:
    t = Table(replace(SETTINGS, mode=Mode.RNG))
    t.send(Event.SENSOR_LOST)
    assert t.state is State.IDLE
    assert t.records() == [RecordKind.SENSOR]


def test_the_first_power_on_opens_the_first_round() -> None:
    t = Table()
    t.send(Event.POWER_ON, config={**config_loaded_data(Config()), "sha256": "ab" * 32})
    assert t.records() == [
        RecordKind.POWER_ON,
        RecordKind.CONFIG_LOADED,
        RecordKind.ROUND_OPENED,
        RecordKind.RECOVERY,
    ]
    assert t.actions[0].data == {"previous": "first start"}
    assert t.screens() == [Screen.READY]
    assert t.machine.context.is_running
    assert t.machine.context.is_round_open


# --- program verification and the clock ----------------------------------------------------


def test_power_on_records_the_software_check_and_the_clock() -> None:
    t = Table()
    t.send(Event.POWER_ON, software=VERIFIED, clock=ClockSync.UNSYNCHRONISED)
    assert t.records() == [
        RecordKind.POWER_ON,
        RecordKind.SOFTWARE_CHECK,
        RecordKind.ROUND_OPENED,
        RecordKind.RECOVERY,
    ]
    assert t.actions[0].data == {
        "previous": "first start",
        "software": {"version": "1.0", "manifest": "ab" * 32},
        "clock": "unsynchronised",
    }
    check = next(a for a in t.actions if a.record is RecordKind.SOFTWARE_CHECK)
    assert check.data["reason"] == "power_on"
    assert check.data["result"] == "ok"
    assert check.data["key"] == "01020304"
    assert t.state is State.IDLE


def test_a_mismatch_at_power_on_is_a_fault_only_the_supervisor_clears_once_verified() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    t.send(Event.POWER_ON, software=MISMATCH)
    assert t.state is State.FAULT
    assert t.machine.context.active_faults == {Fault.SOFTWARE_IDENTITY}
    check = next(a for a in t.actions if a.record is RecordKind.SOFTWARE_CHECK)
    assert check.data["differ"] == ["changed: controller/core/state.py"]
    fault = next(a for a in t.actions if a.record is RecordKind.FAULT)
    assert "changed: controller/core/state.py" in str(fault.data["detail"])
    assert ActionKind.SAFE_STATE in t.kinds()
    assert t.screens() == [Screen.FAULT]
    t.send(Event.CLEAR_FAULT)  # the dealer's key
    assert t.state is State.FAULT
    t.send(Event.CLEAR_FAULT, supervisor=True)  # the files still differ
    assert t.state is State.FAULT
    assert "signed manifest" in str(t.shown(Screen.REFUSED).data["reason"])
    t.send(Event.SOFTWARE_CHECKED, software=VERIFIED)  # the release reinstalled
    assert t.state is State.FAULT  # still, until the supervisor clears it
    assert t.records() == [RecordKind.SOFTWARE_CHECK]
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.IDLE
    assert t.records() == [RecordKind.FAULT_CLEARED]


def test_a_software_fault_stays_across_a_power_cycle_until_cleared() -> None:
    t = Table()
    t.send(Event.POWER_ON, software=MISMATCH)
    after = power_on(t.machine, software=VERIFIED)
    assert after.state is State.FAULT
    assert Fault.SOFTWARE_IDENTITY in after.machine.context.active_faults
    assert RecordKind.FAULT not in after.records()  # latched already: not a second fault
    after.send(Event.CLEAR_FAULT, supervisor=True)
    assert after.state is State.IDLE


@pytest.mark.parametrize(
    ("required", "faults"), [(False, set()), (True, {Fault.SOFTWARE_IDENTITY})]
)
def test_no_manifest_is_unverified_or_a_fault_as_configured(
    required: bool, faults: set[Fault]
) -> None:
    unverified = SoftwareCheck(
        SoftwareResult.NO_MANIFEST, "1.0", detail="no manifest at /x", required=required
    )
    t = Table()
    t.send(Event.POWER_ON, software=unverified)
    assert t.machine.context.active_faults == faults
    check = next(a for a in t.actions if a.record is RecordKind.SOFTWARE_CHECK)
    assert check.data["result"] == "no_manifest"
    assert check.data["required"] is required


def test_a_changed_version_or_manifest_is_recorded_as_a_software_change() -> None:
    before = SoftwareIdentity("0.9", "cd" * 32)
    t = Table()
    t.send(Event.POWER_ON, software=VERIFIED, software_before=before)
    changed = next(a for a in t.actions if a.record is RecordKind.SOFTWARE_CHANGED)
    assert changed.data == {
        "round": 1,
        "previous": {"version": "0.9", "manifest": "cd" * 32},
        "now": {"version": "1.0", "manifest": "ab" * 32},
    }
    same = Table()
    same.send(Event.POWER_ON, software=VERIFIED, software_before=VERIFIED.identity)
    assert RecordKind.SOFTWARE_CHANGED not in same.records()
    # found by a periodic check too (files replaced while the controller runs)
    t.send(Event.SOFTWARE_CHECKED, software=MISMATCH, software_before=before)
    assert t.records()[:2] == [RecordKind.SOFTWARE_CHECK, RecordKind.SOFTWARE_CHANGED]


def test_a_periodic_mismatch_latches_once() -> None:
    t = running()
    t.send(Event.SOFTWARE_CHECKED, software=MISMATCH)
    assert t.state is State.FAULT
    assert t.records() == [RecordKind.SOFTWARE_CHECK, RecordKind.FAULT]
    t.send(Event.SOFTWARE_CHECKED, software=MISMATCH)
    assert t.records() == [RecordKind.SOFTWARE_CHECK]  # recorded, not latched again


def test_a_periodic_mismatch_in_a_shake_voids_it_and_latches() -> None:
    t = running().to_settling()
    attempt = t.machine.context.attempt
    t.send(Event.SOFTWARE_CHECKED, software=MISMATCH)
    assert t.state is State.FAULT
    assert t.machine.context.attempt == attempt + 1
    assert ActionKind.STOP_MOTOR in t.kinds()


def test_both_a_rolled_back_log_and_a_mismatch_latch_with_one_fault_screen() -> None:
    t = Table()
    t.send(Event.POWER_ON, software=MISMATCH, fault=Fault.LOG_ROLLBACK, detail="rolled back")
    assert t.machine.context.active_faults == {Fault.SOFTWARE_IDENTITY, Fault.LOG_ROLLBACK}
    assert t.records().count(RecordKind.FAULT) == 2
    assert t.screens() == [Screen.FAULT]


def test_a_change_of_the_clock_is_recorded() -> None:
    t = running()
    t.send(Event.CLOCK_CHANGED, clock=ClockSync.SYNCHRONISED)
    assert t.records() == [RecordKind.CLOCK_STATUS]
    assert t.actions[0].data == {"round": 1, "clock": "synchronised"}
    assert t.state is State.IDLE


def power_on(machine: RoundMachine, **data: object) -> Table:
    """The same context, as the log holds it, taken up by a new machine after a power cut."""
    t = Table(machine.settings)
    t.machine = RoundMachine(machine.settings, machine.context)
    t.send(Event.POWER_ON, **data)
    return t


def running(settings: RoundSettings = SETTINGS) -> Table:
    t = Table(settings)
    t.send(Event.POWER_ON)
    return t


@pytest.mark.parametrize("path", ["to_settling", "to_reading"])
def test_a_shake_in_progress_at_a_power_cut_is_void_and_reshaken(path: str) -> None:
    t = running()
    getattr(t, path)()
    attempt = t.machine.context.attempt
    after = power_on(t.machine)
    assert after.actions[0].data == {"previous": "interrupted"}
    assert after.records() == [RecordKind.POWER_ON, RecordKind.INTERRUPTED, RecordKind.RECOVERY]
    assert after.state is State.ARMED
    assert after.machine.context.attempt == attempt + 1
    recovery = next(a for a in after.actions if a.record is RecordKind.RECOVERY)
    assert recovery.data["voided_attempt"] == attempt
    assert after.screens() == [Screen.BETS_CLOSED]


def test_a_committed_result_is_shown_again_never_decided_again() -> None:
    t = running().to_result(good_reading(5, 5, 1))
    result = t.machine.context.result
    after = power_on(t.machine)
    assert after.state is State.RESULT
    assert after.machine.context.result == result
    assert RecordKind.RESULT not in after.records()
    assert after.shown(Screen.RESULT).data["result"] == result.as_record()  # type: ignore[union-attr]


def test_a_fault_persists_across_a_power_cycle_with_outputs_safe() -> None:
    t = running().to_armed()
    t.send(Event.MOTOR_OVERRUN)
    after = power_on(t.machine)
    assert after.state is State.FAULT
    kinds = after.kinds()
    assert ActionKind.SAFE_STATE in kinds
    assert kinds.index(ActionKind.STOP_MOTOR) < kinds.index(ActionKind.SHOW)
    assert after.screens() == [Screen.FAULT]


def test_a_rolled_back_log_is_a_supervisor_fault_whose_clear_reanchors() -> None:
    t = running()
    after = power_on(t.machine, fault=Fault.LOG_ROLLBACK, detail="rolled back")
    assert after.state is State.FAULT
    after.send(Event.CLEAR_FAULT)
    assert after.screens() == [Screen.REFUSED]
    after.send(Event.CLEAR_FAULT, supervisor=True)
    assert after.state is State.IDLE
    assert after.kinds().index(ActionKind.REANCHOR) > 0
    assert after.records() == [RecordKind.FAULT_CLEARED]


def test_a_missing_anchor_is_cleared_only_at_the_terminal_naming_who_and_why() -> None:
    """Issue 28: a log with closed rounds and no anchor latches anchor_missing; the table plays
    no round until a supervisor at the service terminal clears it with an employee id and a
    note saying why (recorded); that clear re-anchors the log as it is."""
    t = running()
    after = power_on(t.machine, fault=Fault.ANCHOR_MISSING, detail="log-anchor is missing")
    assert after.state is State.FAULT
    fault = next(a for a in after.actions if a.record is RecordKind.FAULT)
    assert fault.data["fault"] == "anchor_missing"
    assert ActionKind.SAFE_STATE in after.kinds()
    with pytest.raises(IllegalTransition):  # no play (the loop shows it refused)
        after.send(Event.NO_MORE_BETS)
    assert after.state is State.FAULT
    after.send(Event.CLEAR_FAULT)  # the dealer's key
    assert after.state is State.FAULT
    after.send(Event.CLEAR_FAULT, supervisor=True)  # the panel's supervisor key: no who, no why
    assert after.state is State.FAULT
    assert "note saying why" in after.shown(Screen.REFUSED).data["reason"]
    after.send(Event.CLEAR_FAULT, supervisor=True, employee="T0042")  # who, but not why
    assert after.state is State.FAULT
    assert after.records() == []
    after.send(Event.CLEAR_FAULT, supervisor=True, employee="T0042", detail="   ")
    assert after.state is State.FAULT
    after.send(Event.CLEAR_FAULT, employee="T0042", detail="card repaired")  # no key
    assert after.state is State.FAULT
    after.send(Event.CLEAR_FAULT, supervisor=True, employee="T0042", detail="card repaired")
    assert after.state is State.IDLE
    assert after.records() == [RecordKind.FAULT_CLEARED]
    cleared = after.actions[0].data
    assert cleared["faults"] == ["anchor_missing"]
    assert (cleared["employee"], cleared["note"]) == ("T0042", "card repaired")
    assert cleared["supervisor"] is True
    assert ActionKind.REANCHOR in after.kinds()


def test_the_panel_key_clears_a_rollback_beside_a_missing_anchor_but_not_the_anchor() -> None:
    t = running()
    after = power_on(t.machine, fault=Fault.ANCHOR_MISSING, detail="gone")
    evidence = {"witness": "w", "size": 9, "log_size": 4, "note": "n"}
    after.send(Event.ROLLBACK_EVIDENCE, cosignature=evidence)
    assert after.machine.context.active_faults == {Fault.ANCHOR_MISSING, Fault.LOG_ROLLBACK}
    after.send(Event.CLEAR_FAULT, supervisor=True)
    assert after.machine.context.active_faults == {Fault.ANCHOR_MISSING}
    assert after.state is State.FAULT
    assert "note" not in after.actions[0].data


def test_a_rewritten_anchor_is_recorded_in_power_on() -> None:
    t = running()
    after = power_on(t.machine, anchor="the anchor at /x (missing) rewritten from /y (9 records)")
    assert after.actions[0].record is RecordKind.POWER_ON
    assert after.actions[0].data["anchor"].startswith("the anchor at /x (missing)")
    assert after.state is State.IDLE


def test_the_witness_cosignature_of_a_longer_log_is_recorded_and_latches_a_rollback() -> None:
    t = running()
    evidence = {"witness": "w", "size": 90, "log_size": 40, "note": "the note as it came"}
    t.send(Event.ROLLBACK_EVIDENCE, cosignature=evidence)
    assert t.records() == [RecordKind.ROLLBACK_EVIDENCE, RecordKind.FAULT]
    assert t.actions[0].data == {**evidence, "round": 1}
    assert t.machine.context.active_faults == {Fault.LOG_ROLLBACK}
    assert ActionKind.SAFE_STATE in t.kinds()
    t.send(Event.ROLLBACK_EVIDENCE, cosignature=evidence)  # again: recorded, latched once
    assert t.records() == [RecordKind.ROLLBACK_EVIDENCE]
    t.send(Event.CLEAR_FAULT, supervisor=True)  # the supervisor accepts the log as it is
    assert t.state is State.IDLE
    assert ActionKind.REANCHOR in t.kinds()


def test_a_log_identity_fault_is_never_cleared_by_a_key() -> None:
    t = running()
    t.send(Event.FAULT, fault=Fault.LOG_IDENTITY, detail="key missing")
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.FAULT
    assert "restart" in t.shown(Screen.REFUSED).data["reason"]


def test_shutdown_voids_a_shake_in_progress_and_marks_the_stop() -> None:
    t = running().to_reading()
    attempt = t.machine.context.attempt
    t.send(Event.SHUTDOWN)
    assert t.records() == [RecordKind.INTERRUPTED, RecordKind.SHUTDOWN]
    assert t.state is State.ARMED
    assert t.machine.context.attempt == attempt + 1
    after = power_on(t.machine)
    assert after.actions[0].data == {"previous": "shutdown"}
    assert RecordKind.INTERRUPTED not in after.records()  # already recorded, once


def test_rng_sessions_are_prepared_when_bets_open_and_revealed_at_every_stop() -> None:
    rng = replace(SETTINGS, mode=Mode.RNG)
    t = running(rng)
    assert t.kinds()[-2:] == [ActionKind.PREPARE_RNG, ActionKind.SHOW]
    t.send(Event.NO_MORE_BETS)
    t.send(Event.DICE_SET)
    # DRAWING is shown before the number is drawn; the number comes back as its own event.
    assert t.kinds()[-2:] == [ActionKind.SHOW, ActionKind.DRAW_NUMBER]
    t.send(Event.SHUTDOWN)
    assert ActionKind.CLOSE_RNG in t.kinds()  # the seed lives in memory: revealed now
    after = power_on(t.machine)
    # the shell draws again: the number recorded for this round and attempt, if there is one
    assert after.kinds()[-2:] == [ActionKind.SHOW, ActionKind.DRAW_NUMBER]
    after.send(Event.RNG_DRAWN, rng_number=4)
    after.send(Event.CLOSE_ROUND)
    assert after.kinds()[-2:] == [ActionKind.PREPARE_RNG, ActionKind.SHOW]
    after.send(Event.SHUTDOWN)
    assert ActionKind.CLOSE_RNG in after.kinds()


def test_a_reading_lacking_its_data_is_refused() -> None:
    t = Table().to_reading()
    before = t.machine.context
    with pytest.raises(GameRuleError, match="lacks"):
        t.send(Event.READING)
    assert t.machine.context is before


def test_no_roll_reasons_reach_the_display_in_plain_words() -> None:
    t = Table().to_reading()
    t.read(TILTED)
    shown = t.shown(Screen.NO_ROLL)
    assert shown.data["reason"] == NoRollReason.NOT_FLAT.value


# --- issue 14: the bank key, the delivery style, the shift change ---------------------------


def test_the_bank_key_steps_through_the_banks_and_shows_what_the_rules_refuse() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    banks = []
    for _ in range(7):
        t.send(Event.BANK_SEAT_KEY)
        assert t.records() == [RecordKind.BANK_SELECTED]
        ready = t.shown(Screen.READY)
        banks.append(ready.data["bank"])
        # 621a.11(b): no player banks the first round after a shuffle
        assert ("bank_refused" in ready.data) == (ready.data["bank"] != "dealer")
        assert "621a.11(b)" in str(ready.data.get("bank_refused", "621a.11(b)"))
    assert banks == [f"seat {n}" for n in range(1, 7)] + ["dealer"]
    t.send(Event.BANK_SEAT_KEY)  # seat 1, refused: no more bets is refused with the reason
    before = t.machine.context
    with pytest.raises(BankRuleError, match=r"621a\.11"):
        t.send(Event.NO_MORE_BETS)
    assert t.machine.context is before


def test_no_more_bets_takes_the_bank_selected_on_the_panel() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    t.send(Event.NO_MORE_BETS)
    t.send(Event.VOID_ROUND)  # a round played: seats may bank now
    for _ in range(3):
        t.send(Event.BANK_SEAT_KEY)
    shown = dict(t.shown(Screen.READY).data)
    assert shown.pop("stats")["shift"]["red"] == [0] * 6  # no roll counted: the round was void
    assert shown.pop("meters")["round_voids"] == 1  # the void of this very step counted
    assert shown == {
        "round": 2,
        "mode": "shaker",
        "bank": "seat 3",
        "dice": {"set": "1", "warning": None},
        "tiles": {"set": "T1", "warning": None},
    }
    t.send(Event.NO_MORE_BETS)
    record = next(a for a in t.actions if a.record is RecordKind.NO_MORE_BETS)
    assert record.data["bank"] == "seat 3"
    assert t.machine.context.bank_seat == 3
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, advance=3000, cycles=3)
    t.send(Event.TICK, advance=SETTINGS.settle_ms)
    t.read(good_reading(1, 1, 1)).read(good_reading(1, 1, 1))
    result = next(a for a in t.actions if a.record is RecordKind.RESULT)
    # 621a.11(j): the bank's seat is number one; a total of 3 is the second seat after it
    assert result.data["starting_position"] == "seat 5"
    t.send(Event.CLOSE_ROUND)
    assert t.machine.context.bank_seat is None  # the next round starts with the dealer
    assert t.shown(Screen.READY).data["bank"] == "dealer"
    t.to_armed()
    with pytest.raises(IllegalTransition):
        t.send(Event.BANK_SEAT_KEY)  # bets are closed: the bank is chosen before


def test_the_style_key_steps_through_the_styles_before_the_first_shake() -> None:
    t = Table().to_armed()
    assert t.shown(Screen.BETS_CLOSED).data["delivery_style"] == "standard"
    seen = []
    for _ in range(10):
        t.send(Event.STYLE_KEY)
        assert t.records() == [RecordKind.DELIVERY_STYLE]
        record = t.actions[0]
        seen.append((record.data["style"], record.data["section"]))
        assert t.shown(Screen.BETS_CLOSED).data["delivery_style"] == record.data["style"]
    assert seen == [
        ("house-way-left", "621a.9(1)"),
        ("cup-say-right", "621a.9(2)"),
        ("cup-say-left", "621a.9(3)"),
        ("jung-quat", "621a.9(4)"),
        ("chee-yee", "621a.9(5)"),
        ("pin-say-right", "621a.9(6)"),
        ("pin-say-left", "621a.9(7)"),
        ("dragon-phoenix-right", "621a.9(8)"),
        ("dragon-phoenix-left", "621a.9(9)"),
        ("standard", "621a.8(d)"),
    ]
    t.send(Event.STYLE_KEY)
    t.send(Event.STYLE_KEY)  # cup say from the right
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, advance=3000, cycles=1)  # a no roll: the style stays
    assert t.state is State.NO_ROLL
    with pytest.raises(IllegalTransition):
        t.send(Event.STYLE_KEY)
    t.send(Event.SHAKE_PRESSED)
    t.send(Event.SHAKE_DONE, advance=3000, cycles=3)
    t.send(Event.TICK, advance=SETTINGS.settle_ms)
    t.read(good_reading(6, 2, 1)).read(good_reading(6, 2, 1))  # 9: the dealer first
    plan = t.shown(Screen.RESULT).data["dealing_plan"]
    assert isinstance(plan, dict)
    assert plan["style"] == "cup-say-right"
    assert plan["starting_position"] == "dealer"
    assert plan["plan"][0] == {
        "position": "dealer",
        "tiles": [{"stack": 1, "levels": [1, 2]}, {"stack": 2, "levels": [1, 2]}],
    }
    assert plan["plan"][1]["tiles"] == [
        {"stack": 1, "levels": [3, 4]},
        {"stack": 2, "levels": [3, 4]},
    ]
    t.send(Event.CLOSE_ROUND)
    assert t.machine.context.delivery_style.value == "standard"


def test_a_style_after_a_fault_resumed_past_the_first_attempt_is_refused() -> None:
    t = Table().to_shaking()
    t.send(Event.TAMPER)
    t.send(Event.SECURED)
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.ARMED
    t.send(Event.STYLE_KEY)
    assert t.screens() == [Screen.REFUSED]
    assert t.records() == []


def test_pai_gow_poker_has_no_delivery_styles() -> None:
    t = Table(replace(SETTINGS, game=Game.POKER)).to_armed()
    assert "delivery_style" not in t.shown(Screen.BETS_CLOSED).data
    before = t.machine.context
    with pytest.raises(GameRuleError, match=r"621a\.9"):
        t.send(Event.STYLE_KEY)
    assert t.machine.context is before


@pytest.mark.parametrize("mode", [Mode.SHAKER, Mode.RNG])
def test_a_shift_change_is_recorded_and_rotates_the_rng_session(mode: Mode) -> None:
    t = Table(replace(SETTINGS, mode=mode))
    t.send(Event.SHIFT_CHANGE)
    assert t.records() == [RecordKind.SHIFT_CHANGE]
    if mode is Mode.RNG:
        # the session is revealed, then a new one committed and shown before bets close
        assert t.kinds()[1:] == [ActionKind.CLOSE_RNG, ActionKind.PREPARE_RNG, ActionKind.SHOW]
        assert t.actions[1].data == {"reason": "shift_change"}
    else:
        assert t.kinds()[1:] == [ActionKind.SHOW]
    t.to_armed()
    with pytest.raises(IllegalTransition):
        t.send(Event.SHIFT_CHANGE)


# --- issue 14: a random delay before the motor starts ----------------------------------------


def test_the_motor_starts_after_the_delay_the_shell_drew_and_the_shake_records_it() -> None:
    t = Table().to_armed()
    t.send(Event.SHAKE_PRESSED, delay_ms=700)
    assert t.state is State.WAITING
    assert t.screens() == [Screen.SHAKING]  # the press is answered at once
    assert ActionKind.START_SHAKE not in t.kinds()
    assert t.machine.context.deadline == t.now + 700
    t.send(Event.SHAKE_PRESSED)  # mashing while waiting changes nothing (10 ms later)
    assert (t.state, t.actions) == (State.WAITING, [])
    t.send(Event.TICK, advance=689)
    assert (t.state, t.actions) == (State.WAITING, [])
    t.send(Event.TICK, advance=1)
    assert t.state is State.SHAKING
    assert t.kinds() == [ActionKind.START_SHAKE]
    assert t.machine.context.deadline == t.now + SETTINGS.motor_max_ms + MOTOR_GRACE_MS
    t.send(Event.SHAKE_DONE, advance=3000, cycles=3)
    shake = next(a for a in t.actions if a.record is RecordKind.SHAKE)
    assert shake.data == {"round": 1, "attempt": 1, "cycles": 3, "delay_ms": 700}


def test_no_delay_starts_the_motor_at_once() -> None:
    t = Table().to_armed()
    t.send(Event.SHAKE_PRESSED, delay_ms=0)
    assert t.state is State.SHAKING
    assert t.kinds() == [ActionKind.START_SHAKE, ActionKind.SHOW]
    with pytest.raises(GameRuleError):
        Table().to_armed().send(Event.SHAKE_PRESSED, delay_ms=-1)


def test_a_lid_opened_or_a_power_cut_while_waiting_is_a_reshake() -> None:
    t = Table().to_armed()
    t.send(Event.SHAKE_PRESSED, delay_ms=500)
    t.send(Event.LID_OPENED)
    assert t.state is State.NO_ROLL  # 621a.11(i): covered again and reshaken
    assert ActionKind.START_SHAKE not in t.kinds()
    t = Table().to_armed()
    t.send(Event.SHAKE_PRESSED, delay_ms=500)
    t.send(Event.POWER_ON)
    assert t.state is State.ARMED
    assert RecordKind.INTERRUPTED in t.records()
