"""Issue 15 in the core: the dice monitor's counts and alarm as the round state machine keeps,
records and clears them, and game recall on the display (AGCO 13.1.1)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from support.table import SETTINGS, Table, good_reading

from controller.core.dice_monitor import DiceWindows
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import (
    RECALL_DEPTH,
    ActionKind,
    Event,
    Fault,
    Mode,
    RoundSettings,
    Screen,
    State,
)
from controller.errors import GameRuleError, IllegalTransition

WALL = 1_800_000_000_000
LOCKS = replace(SETTINGS, lock_on_dice_alarm=True)


def play(t: Table, red: int, n: int) -> None:
    """``n`` rounds whose red die shows ``red`` and whose blue dice go round the faces."""
    for _ in range(n):
        k = t.machine.context.round_number
        t.to_result(good_reading(red, 1 + k % 6, 1 + (k + 3) % 6, shift=5 * (k % 2)))
        assert t.state is State.RESULT, t.actions
        t.send(Event.CLOSE_ROUND)


def until_alarm(t: Table) -> int:
    """Sixes on the red die until the alarm; the round that raised it."""
    for _ in range(60):
        k = t.machine.context.round_number
        t.to_result(good_reading(6, 1 + k % 6, 1 + (k + 3) % 6, shift=5 * (k % 2)))
        if RecordKind.DICE_ALARM in t.records():
            return k
        t.send(Event.CLOSE_ROUND)
    raise AssertionError("no alarm after 60 sixes")


def test_each_result_read_from_the_dice_is_counted_in_every_window() -> None:
    t = Table()
    play(t, 2, 3)
    counts = t.machine.context.dice_counts
    assert counts.set == counts.shift == counts.test
    assert counts.set.red == (0, 3, 0, 0, 0, 0)
    assert counts.set.rolls == 3
    assert sum(counts.set.blue) == 6
    stats = t.shown(Screen.READY).data["stats"]
    assert stats["shift"]["red"] == [0, 3, 0, 0, 0, 0]
    assert stats["alarm"] is None
    assert stats["locks"] is False
    assert [f["test"] for f in stats["monitor"]["tests"]] == ["red", "blue", "total"]


def test_a_loaded_red_die_raises_one_alarm_recorded_with_its_result_and_play_goes_on() -> None:
    t = Table()
    alarm_round = until_alarm(t)
    assert alarm_round == 19  # ln(1.5) per six: 19 sixes pass ln(1/0.004) + ln(12/2)
    kinds = t.kinds()
    records = t.records()
    assert records[-2:] == [RecordKind.RESULT, RecordKind.DICE_ALARM]
    # recorded before the result is shown, and the result's screen carries it for the pit
    assert kinds.index(ActionKind.SHOW) > max(
        i for i, k in enumerate(kinds) if k is ActionKind.RECORD
    )
    alarm = next(a for a in t.actions if a.record is RecordKind.DICE_ALARM).data
    assert (alarm["test"], alarm["face"], alarm["rolls"], alarm["locks"]) == ("red", 6, 19, False)
    assert alarm["counts"]["red"] == [0, 0, 0, 0, 0, 19]
    shown = t.shown(Screen.RESULT).data["stats"]
    assert shown["alarm"]["round"] == alarm_round
    t.send(Event.CLOSE_ROUND)
    assert t.state is State.IDLE  # play continues
    play(t, 6, 3)
    assert RecordKind.DICE_ALARM not in t.records()  # one alarm until the supervisor acts
    assert t.shown(Screen.READY).data["stats"]["alarm"]["round"] == alarm_round


def test_an_alarm_of_the_totals_test_names_no_face_and_is_recorded() -> None:
    """Totals of 12 every round, each of the 25 ways in turn (every face of each colour): the
    totals' test raises the alarm, which points at no face, and its record is written (its
    face null, as the schema of dice_alarm says) with the result, and play goes on."""
    twelves = [c for c in itertools.product(range(1, 7), repeat=3) if sum(c) == 12]
    t = Table()
    for k, (red, blue_1, blue_2) in enumerate(twelves * 6):
        t.to_result(good_reading(red, blue_1, blue_2, shift=5 * (k % 2)))
        assert t.state is State.RESULT, t.actions
        if RecordKind.DICE_ALARM in t.records():
            break
        t.send(Event.CLOSE_ROUND)
    else:
        raise AssertionError("no alarm after 150 totals of 12")
    assert t.records()[-2:] == [RecordKind.RESULT, RecordKind.DICE_ALARM]
    alarm = next(a for a in t.actions if a.record is RecordKind.DICE_ALARM).data
    assert (alarm["test"], alarm["face"]) == ("total", None)
    t.send(Event.CLOSE_ROUND)
    assert t.state is State.IDLE


def test_the_table_locks_after_the_round_when_configured_and_only_the_dice_clear_it() -> None:
    t = Table(LOCKS)
    until_alarm(t)
    assert t.state is State.RESULT  # the result stands and is shown
    t.send(Event.CLOSE_ROUND)
    assert t.state is State.FAULT
    assert t.machine.context.active_faults == {Fault.DICE_ALARM}
    assert t.records() == [RecordKind.CLOSE, RecordKind.ROUND_OPENED, RecordKind.FAULT]
    assert Screen.READY not in t.screens()
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.FAULT
    assert "replacing the dice" in t.shown(Screen.REFUSED).data["reason"]
    t.send(Event.DICE_KEPT, wall=WALL, employee="S1021")  # no key
    assert t.state is State.FAULT
    t.send(
        Event.DICE_KEPT,
        supervisor=True,
        employee="S1021",
        wall=WALL,
        detail="weighed: within tolerance",
    )
    assert t.state is State.IDLE
    kept = next(a for a in t.actions if a.record is RecordKind.SUPERVISOR_ACTION).data
    assert kept["action"] == "dice_kept"
    assert kept["alarm"]["test"] == "red"
    ctx = t.machine.context
    assert ctx.dice_alarm is None
    assert ctx.dice_counts.test.rolls == 0
    assert ctx.dice_counts.set.rolls == 19  # the set's counts stay: the same dice


def test_dice_replaced_clears_the_alarm_and_starts_the_set_again() -> None:
    t = Table(LOCKS)
    until_alarm(t)
    t.send(Event.CLOSE_ROUND)
    t.send(Event.DICE_REPLACED, supervisor=True, employee="S1021", wall=WALL)
    assert t.state is State.IDLE
    record = next(a for a in t.actions if a.record is RecordKind.DICE_REPLACED).data
    assert record["alarm_cleared"] == "red"
    counts = t.machine.context.dice_counts
    assert counts.set.rolls == counts.test.rolls == 0
    assert counts.shift.rolls == 19


def test_a_dice_alarm_stays_with_another_fault_until_both_are_cleared() -> None:
    t = Table(LOCKS)
    until_alarm(t)
    t.send(Event.CLOSE_ROUND)
    t.send(Event.TAMPER)
    t.send(Event.SECURED)
    t.send(Event.DICE_REPLACED, supervisor=True, employee="S1021", wall=WALL)
    assert t.state is State.FAULT
    assert t.machine.context.active_faults == {Fault.TAMPER}
    t.send(Event.CLEAR_FAULT, supervisor=True)
    assert t.state is State.IDLE


def test_keeping_the_dice_needs_an_alarm() -> None:
    t = Table()
    t.send(Event.DICE_KEPT, supervisor=True, employee="S1021", wall=WALL)
    assert t.shown(Screen.REFUSED).data["reason"] == "there is no dice alarm to clear"
    assert t.records() == []


def test_a_shift_change_starts_the_shift_window_only() -> None:
    t = Table()
    play(t, 3, 2)
    t.send(Event.SHIFT_CHANGE)
    counts = t.machine.context.dice_counts
    assert counts.shift.rolls == 0
    assert counts.set.rolls == counts.test.rolls == 2


def test_rng_results_and_service_test_rounds_are_not_counted() -> None:
    rng = Table(replace(SETTINGS, mode=Mode.RNG))
    rng.send(Event.NO_MORE_BETS)
    rng.send(Event.DICE_SET)  # the style settled: the RNG draws
    rng.send(Event.RNG_DRAWN, rng_number=3)
    rng.send(Event.CLOSE_ROUND)
    assert rng.machine.context.dice_counts == DiceWindows()
    assert "stats" not in rng.shown(Screen.READY).data  # RNG mode uses no dice
    t = Table()
    t.send(Event.SERVICE_MODE, supervisor=True, employee="S1021")
    t.to_result()
    t.send(Event.CLOSE_ROUND)
    assert t.machine.context.dice_counts == DiceWindows()


def test_the_counts_and_the_alarm_survive_a_power_cut() -> None:
    t = Table(LOCKS)
    until_alarm(t)
    t.send(Event.CLOSE_ROUND)
    ctx = decode_context(encode_context(t.machine.context))
    assert ctx.dice_counts == t.machine.context.dice_counts
    assert ctx.dice_alarm == t.machine.context.dice_alarm
    t.machine.context = ctx
    t.send(Event.POWER_ON)
    assert t.state is State.FAULT
    assert Fault.DICE_ALARM in t.machine.context.active_faults


# --- game recall (AGCO 13.1.1) ---------------------------------------------------------------


def recalled(t: Table, back: int | None) -> None:
    t.send(Event.RECALL, supervisor=True, employee="S1021", back=back)


def test_recall_needs_the_supervisor_key() -> None:
    t = Table()
    t.send(Event.RECALL, back=1, employee="S1021")
    assert t.machine.context.recall is None
    assert "supervisor" in t.shown(Screen.REFUSED).data["reason"]


def test_recall_steps_back_records_entering_and_leaving_and_returns_to_the_table() -> None:
    t = Table()
    play(t, 2, 12)
    recalled(t, 1)
    assert t.records() == [RecordKind.SUPERVISOR_ACTION]
    assert t.shown(Screen.RECALL).data == {"round": 13, "back": 1}
    for back in range(2, RECALL_DEPTH + 1):
        recalled(t, back)
        assert t.records() == []  # stepping is a view: nothing more to record
        assert t.shown(Screen.RECALL).data["back"] == back
    with pytest.raises(GameRuleError, match="1 to 11"):
        recalled(t, RECALL_DEPTH + 1)
    recalled(t, None)
    assert t.machine.context.recall is None
    assert [a.data["action"] for a in t.actions if a.record] == ["recall_left"]
    assert t.screens() == [Screen.READY]


def test_nothing_changes_in_the_round_while_the_display_recalls() -> None:
    t = Table()
    t.send(Event.LID_CLOSED)
    recalled(t, 1)
    before = t.machine.context
    for event in (Event.NO_MORE_BETS, Event.BANK_SEAT_KEY, Event.SHIFT_CHANGE, Event.SHUFFLED):
        t.send(event)
        assert t.screens() == [Screen.REFUSED]
        assert t.records() == []
        assert t.machine.context == before
    t.send(Event.DICE_REPLACED, supervisor=True, employee="S1021", wall=WALL)
    assert t.machine.context == before


def test_a_fault_ends_recall_and_recall_works_in_a_fault() -> None:
    t = Table()
    recalled(t, 1)
    t.send(Event.TAMPER)
    assert t.state is State.FAULT
    assert t.machine.context.recall is None
    recalled(t, 1)
    assert t.state is State.FAULT
    assert t.machine.context.recall == 1
    recalled(t, None)
    assert t.screens() == [Screen.FAULT]


def test_recall_is_not_taken_with_a_round_in_play() -> None:
    t = Table()
    t.to_armed()
    with pytest.raises(IllegalTransition):
        recalled(t, 1)


def test_leaving_recall_in_rng_mode_prepares_nothing_again() -> None:
    t = Table(RoundSettings(mode=Mode.RNG))
    recalled(t, 1)
    recalled(t, None)
    assert ActionKind.PREPARE_RNG not in t.kinds()
    assert t.screens() == [Screen.READY]


def test_power_on_leaves_recall() -> None:
    t = Table()
    recalled(t, 1)
    t.send(Event.POWER_ON)
    assert t.machine.context.recall is None


def test_a_dice_alarm_is_never_raised_as_an_event_of_the_shell() -> None:
    """Found by tests/core/test_table_paths_stateful.py: FAULT naming ``dice_alarm`` latched it
    with no alarm of the monitor behind it, a context the snapshot refuses (so the next start
    could not read the log's). The alarm latches by the monitor's test only: such an event is
    refused and nothing changes."""
    t = Table()
    before = t.machine.context
    with pytest.raises(GameRuleError, match="dice monitor"):
        t.send(Event.FAULT, fault=Fault.DICE_ALARM)
    assert t.machine.context is before
