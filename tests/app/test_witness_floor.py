"""The floor's fold (controller/witness/floor.py): what a floor supervisor sees of each table,
from the records, statuses, cosignatures and alerts the witness hands it.

Fed with the export lines of one real ``simulate`` run (made once for the module), with small
tables walked exhaustively against a plain count, and with hypothesis (junk never raises; a
stateful walk keeps the games per hour, the faults and the alert list to a model). The
witness's clock is injected; nothing waits on the real one."""

from __future__ import annotations

import ast
import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from controller.fleet.protocol import Alert, AlertKind, Presence, Status
from controller.witness import floor as floor_module
from controller.witness.floor import (
    MAX_ALERTS,
    WINDOW_MS,
    Floor,
    FloorFold,
    FloorSettings,
    corrected_summary,
    result_summary,
    time_ms,
    void_summary,
)
from controller.witness.ports import SEVERITY, StoredAlert, Unconfirmed

SEED = 7
START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
T0 = START.timestamp()  # the witness's clock at the start of each test


def at(seconds: float) -> str:
    """The table's time ``seconds`` after START, as a record writes it."""
    moment = START + timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Lines:
    """Export lines of one table, numbered in order."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, t: float, **data: Any) -> dict[str, Any]:
        self.seq += 1
        return {"seq": self.seq, "kind": kind, "time": at(t), "data": data, "prev": "", "hash": ""}


def online(t: float, screen: str = "ready", faults: tuple[str, ...] = ()) -> Status:
    return Status(Presence.ONLINE, screen, "shaker", 1, faults, at(t))


def result(lines: Lines, t: float, number: int, attempt: int = 1) -> dict[str, Any]:
    return lines(
        "result",
        t,
        round=number,
        attempt=attempt,
        game="tiles",
        bank="dealer",
        count=9,
        total=9,
        starting_position="dealer",
        dice={"red": 1, "blue": [2, 6]},
        wagers={
            "sum": {"3-8-9": True, "8-16-17": False, "pair": False, "series": False},
            "match": {"1": 1, "2": 1, "3": 0, "4": 0, "5": 0, "6": 1},
            "beat_it": {"any": True, "red": False},
        },
        payouts={"B": {"wins": True, "outcome": "9", "pays": "2 to 1"}, "A": {"wins": False}},
    )


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """One real run's export lines: 30 rounds on simulated hardware with faults by chance."""
    state = tmp_path_factory.mktemp("floor-sim")
    command = [sys.executable, "-m", "controller"]
    common = {"capture_output": True, "text": True, "timeout": 90, "check": True}
    subprocess.run(
        [
            *command,
            "simulate",
            "--fast",
            "--rounds",
            "30",
            "--seed",
            str(SEED),
            "--state-dir",
            str(state),
        ],
        **common,  # type: ignore[call-overload]
    )
    out = subprocess.run([*command, "export", "--state-dir", str(state)], **common)  # type: ignore[call-overload]
    return [json.loads(line) for line in out.stdout.splitlines()]


def counted_rounds(lines: list[dict[str, Any]]) -> int:
    """A plain count of the rounds closed with a result (the module docstring's definition): a
    correction leaves its result standing; a void, or (older logs) a voided result, does not."""
    pending: tuple[int, int] | None = None
    closed = 0
    for line in lines:
        data = line["data"]
        if line["kind"] == "result":
            pending = (data["round"], data["attempt"])
        elif line["kind"] == "void" or (
            line["kind"] == "result_voided" and pending == (data["round"], data["attempt"])
        ):
            pending = None
        elif line["kind"] == "close":
            closed += pending is not None and pending[0] == data["round"]
            pending = None
    return closed


# --- a real run ---------------------------------------------------------------------------------


@pytest.mark.slow  # the module's simulate run
def test_a_real_run_folds_into_the_view_a_supervisor_reads(export: list[dict[str, Any]]) -> None:
    clock = Clock()
    floor = Floor(clock=clock)
    first = time_ms(export[0]["time"])
    assert first is not None
    clock.now = first / 1000
    floor.apply_status("table-1", online(0))
    for line in export:
        floor.apply_record("table-1", line)
    view = floor.table("table-1")
    assert view is not None
    results = [line for line in export if line["kind"] == "result"]
    assert view["games_per_hour"] == counted_rounds(export) > 20  # a run lasts seconds
    last = results[-1]
    summary = {
        "result": result_summary,
        "result_corrected": corrected_summary,
        "void": void_summary,
    }
    ends = [line for line in export if line["kind"] in summary]
    end = ends[-1]  # the run's last result, its correction, or its round's void
    assert view["last_result"] == summary[end["kind"]](end["seq"], end["time"], end["data"])
    if end is last:
        assert view["last_result"]["dice"] == last["data"]["dice"]
    if end["kind"] != "void":
        assert view["last_result"]["wagers"][0].startswith("Sum: ")
    assert view["log_size"] == export[-1]["seq"]
    assert view["last_seen"] == export[-1]["time"]
    assert view["mode"] == "shaker"
    assert view["game"] == "tiles"
    assert view["dice_alarm"] is None
    assert view["service"] is False  # the run's service mode was left
    json.dumps(floor.snapshot())  # all JSON


def test_the_same_lines_again_change_nothing_shown(export: list[dict[str, Any]]) -> None:
    """At-least-once delivery: the witness drops duplicates, but a replay does no harm here."""
    fold = FloorFold()
    for line in export:
        fold.record("table-1", line, T0)
    once = fold.table("table-1")
    assert once is not None
    fold.record("table-1", export[-1], T0)
    again = fold.table("table-1")
    assert again is not None
    assert {**once, "version": 0} == {**again, "version": 0}


# --- games per hour -----------------------------------------------------------------------------

EVENTS = ("result", "corrected", "voided", "void", "close")


def feed(fold: FloorFold, events: tuple[str, ...]) -> list[dict[str, Any]]:
    lines = Lines()
    sent: list[dict[str, Any]] = []
    number, attempt = 1, 1
    for step, event in enumerate(events):
        t = float(step)
        if event == "result":
            sent.append(result(lines, t, number, attempt))
        elif event == "corrected":
            sent.append(correction(lines, t, number, attempt))
        elif event == "voided":
            sent.append(lines("result_voided", t, round=number, attempt=attempt, reason="misread"))
            attempt += 1
        elif event == "void":
            sent.append(void(lines, t, number))
            number, attempt = number + 1, 1
        else:
            sent.append(lines("close", t, round=number))
            number, attempt = number + 1, 1
        fold.record("t", sent[-1], T0)
    return sent


def test_every_small_table_counts_the_rounds_closed_with_a_result() -> None:
    """Exhaustive: every sequence of up to five results, corrections, voided results (older
    logs), voids and closes."""
    walked = 0
    for length in range(6):
        for events in itertools.product(EVENTS, repeat=length):
            fold = FloorFold()
            sent = feed(fold, events)
            view = fold.table("t")
            expected = counted_rounds(sent)
            assert (view["games_per_hour"] if view else 0) == expected, events
            walked += 1
    assert walked == sum(len(EVENTS) ** n for n in range(6))


def test_games_per_hour_counts_the_last_hour_of_the_tables_own_time() -> None:
    clock = Clock()
    floor = Floor(clock=clock, settings=FloorSettings(min_games_per_hour=0))
    lines = Lines()
    floor.apply_status("t", online(0))
    for number in range(1, 4):  # closes at 10, 20 and 30 minutes, each arriving at once
        clock.now = T0 + number * 600
        floor.apply_record("t", result(lines, number * 600 - 1, number))
        floor.apply_record("t", lines("close", number * 600, round=number))
    assert floor.table("t")["games_per_hour"] == 3  # type: ignore[index]
    clock.now = T0 + 70 * 60  # the table silent for 40 minutes: its time moves on all the same
    floor.refresh()
    assert floor.table("t")["games_per_hour"] == 2  # type: ignore[index]
    clock.now = T0 + 80 * 60
    floor.refresh()
    assert floor.table("t")["games_per_hour"] == 1  # type: ignore[index]  # the 30 min close
    clock.now = T0 + 91 * 60
    floor.refresh()
    assert floor.table("t")["games_per_hour"] == 0  # type: ignore[index]


def test_a_service_test_round_never_counts() -> None:
    fold = FloorFold()
    lines = Lines()
    fold.record("t", lines("service_mode", 0, round=5, entered=True), T0)
    fold.record("t", lines("service_test", 1, round=5, record="result", dice={"red": 1}), T0)
    fold.record("t", lines("service_test", 2, round=5, record="close"), T0)
    view = fold.table("t")
    assert view is not None
    assert (view["games_per_hour"], view["service"], view["last_result"]) == (0, True, None)


# --- floor alerts -------------------------------------------------------------------------------


def alerts(floor: Floor) -> list[tuple[str, str, bool]]:
    """The open alerts (by severity, then newest first), then the closed ones."""
    snapshot = floor.snapshot()
    return [(a["table"], a["kind"], a["cleared"]) for a in snapshot["alerts"] + snapshot["closed"]]


def stored(number: int, table: str, kind: AlertKind, detail: str, t: float, **kw: Any) -> Any:
    """An alert as the witness keeps it (its number, its kind's severity)."""
    return StoredAlert(number, Alert(table, kind, detail, at(t), 0), SEVERITY[kind], **kw)


def test_an_offline_table_is_said_offline_and_the_witness_alerts_it() -> None:
    clock = Clock()
    floor = Floor(clock=clock)
    floor.apply_status("t", online(0))
    floor.apply_status("t", online(1, "fault", ("tamper",)))
    floor.apply_status("t", Status(Presence.OFFLINE, "", "", 0, (), at(5)))  # the will
    view = floor.table("t")
    assert view is not None
    assert view["presence"] == "offline"
    assert (view["screen"], view["faults"]) == ("fault", ["tamper"])  # as it was left
    offline = stored(1, "t", AlertKind.DEVICE_OFFLINE, "t is offline", 5)
    floor.apply_alert(offline)
    view = floor.table("t")
    assert view is not None
    assert view["alerting"] is True
    assert [(a["words"], a["severity"]) for a in view["alerts"]] == [("device offline", "warning")]
    floor.apply_status("t", online(9))
    floor.apply_alert(replace(offline, cleared=at(9)))  # the witness: back online
    assert alerts(floor) == [("t", "device_offline", True)]
    assert floor.table("t")["alerting"] is False  # type: ignore[index]
    closed = floor.snapshot()["closed"][0]
    assert closed["cleared_local"] == "2026-12-01 08:00:09 UTC"


def test_the_dice_alarm_stands_on_the_card_until_the_dice_are_replaced_or_kept() -> None:
    floor = Floor(clock=Clock())
    lines = Lines()
    alarm = {"round": 40, "test": "red", "face": 6, "log_e": "6.100", "threshold": "5.521"}
    for clearing in (
        lines("dice_replaced", 3, round=41, dice_set="2", previous="1"),
        lines("supervisor_action", 3, round=41, action="dice_kept", detail="inspected"),
    ):
        floor.apply_record("t", lines("dice_alarm", 1, **alarm, locks=True, rolls=40))
        floor.apply_record("t", lines("fault", 2, round=41, fault="dice_alarm", detail=""))
        view = floor.table("t")
        assert view is not None
        assert view["dice_alarm"]["test"] == "red"
        assert view["faults"] == ["dice_alarm"]
        floor.apply_record("t", clearing)
        view = floor.table("t")
        assert view is not None
        assert (view["dice_alarm"], view["faults"]) == (None, [])
    assert alerts(floor) == []  # the alert is the witness's (controller/witness/tables.py)


def test_games_per_hour_too_low_only_after_an_open_hour() -> None:
    clock = Clock()
    floor = Floor(clock=clock, settings=FloorSettings(min_games_per_hour=2))
    floor.apply_status("t", online(0))
    clock.now = T0 + 59 * 60
    floor.refresh()
    assert alerts(floor) == []  # not an hour open yet
    clock.now = T0 + 60 * 60
    floor.refresh()
    view = floor.table("t")
    assert view is not None
    assert view["alerts"][0]["words"] == "games per hour too low"
    assert view["alerts"][0]["detail"] == "0 games in the last hour, fewer than 2"
    assert view["alerts"][0]["severity"] == "info"
    floor.apply_status("t", online(3601, screen="fault", faults=("sensor_lost",)))
    assert alerts(floor) == [("t", "games_per_hour_low", True)]  # a fault is not a slow table
    floor.apply_status("t", online(3602))
    clock.now = T0 + 2 * 3600 + 1
    floor.refresh()
    assert alerts(floor)[0] == ("t", "games_per_hour_low", False)  # another whole hour
    assert floor.snapshot()["alerts"][0]["ackable"] is False  # it clears by itself


def test_an_open_alert_marks_its_table_until_it_is_acknowledged_or_cleared() -> None:
    clock = Clock()
    zone = ZoneInfo("Europe/Paris")
    floor = Floor(clock=clock, settings=FloorSettings(min_games_per_hour=0, zone=zone))
    floor.apply_status("t", online(0))
    fork = stored(7, "t", AlertKind.FORK, "two logs at 12", 1)
    floor.apply_alert(fork)
    floor.apply_alert(stored(8, "nowhere", AlertKind.UNKNOWN_TABLE, "no key", 2))
    floor.apply_alert(stored(9, "t", AlertKind.GAP, "records missing", 3))
    view = floor.table("t")
    assert view is not None
    assert view["alerting"] is True
    assert view["witness_alert"]["words"] == "log forked"  # the most severe first
    assert floor.table("nowhere") is None  # an alert does not make a table
    shown = floor.snapshot()["alerts"]
    assert [(a["id"], a["severity"]) for a in shown] == [
        (7, "critical"), (9, "warning"), (8, "info"),
    ]  # fmt: skip
    assert shown[0]["time_local"] == "2026-12-01 09:00:01 CET"  # the witness's zone
    assert shown[0]["ackable"] is True
    clock.now = T0 + 3600 * 5
    floor.refresh()
    assert floor.table("t")["alerting"] is True  # type: ignore[index]  # no hold: it stands
    floor.apply_alert(replace(fork, acked_by="S100 Pat", acked_at=at(60)))
    floor.apply_alert(replace(stored(9, "t", AlertKind.GAP, "records missing", 3), cleared=at(70)))
    assert floor.table("t")["alerting"] is False  # type: ignore[index]
    closed = floor.snapshot()["closed"]
    assert [(a["id"], a["acked_by"], a["acked_local"]) for a in closed] == [
        (9, "", ""), (7, "S100 Pat", "2026-12-01 09:01:00 CET"),
    ]  # fmt: skip


def test_the_alert_list_is_bounded_and_a_stream_behind_it_gets_a_snapshot() -> None:
    fold = FloorFold()
    fold.status("t", online(0), T0)
    start = fold.version
    for n in range(MAX_ALERTS + 5):
        gap = stored(n + 1, "t", AlertKind.GAP, f"gap {n}", n)
        fold.alert(gap, T0)
        fold.alert(replace(gap, cleared=at(n)), T0)
    snapshot = fold.snapshot(T0)
    assert snapshot["alerts"] == []
    closed = snapshot["closed"]
    assert len(closed) == MAX_ALERTS
    assert closed[0]["detail"] == f"gap {MAX_ALERTS + 4}"
    assert [a["number"] for a in closed] == sorted((a["number"] for a in closed), reverse=True)
    assert fold.changes_since(start, T0) is None  # it holds alerts gone from the list
    before = fold.version
    fold.alert(stored(999, "t", AlertKind.FORK, "the last", 999), T0)
    recent = fold.changes_since(before, T0)
    assert recent is not None
    assert [a["detail"] for a in recent["alerts"]] == ["the last"]


def test_the_unconfirmed_records_are_shown_apart_from_the_facts() -> None:
    fold = FloorFold()
    lines = Lines()
    fold.record("t", lines("round_opened", 0, round=3), T0)
    line = result(lines, 1, 3)
    fold.unconfirmed("t", Unconfirmed(1, 2, 2, line), T0)
    view = fold.table("t")
    assert view is not None
    assert view["last_result"] is None  # not a fact yet
    assert view["unconfirmed"]["count"] == 1
    assert view["unconfirmed"]["result"]["unconfirmed"] is True
    assert view["unconfirmed"]["result"]["round"] == 3
    fold.record("t", line, T0)  # a checkpoint signed it
    fold.unconfirmed("t", Unconfirmed(), T0)
    view = fold.table("t")
    assert view is not None
    assert (view["last_result"]["round"], view["unconfirmed"]) == (3, None)


def test_faults_open_and_close_as_the_table_records_them() -> None:
    fold = FloorFold()
    lines = Lines()
    fold.record("t", lines("fault", 0, round=1, fault="tamper", detail=""), T0)
    fold.record("t", lines("fault", 1, round=1, fault="sensor_lost", detail=""), T0)
    assert fold.table("t")["faults"] == ["sensor_lost", "tamper"]  # type: ignore[index]
    fold.record("t", lines("fault_cleared", 2, round=1, faults=["tamper"]), T0)
    assert fold.table("t")["faults"] == ["sensor_lost"]  # type: ignore[index]
    fold.record("t", lines("mode_changed", 3, round=2, mode="rng", cleared=["sensor_lost"]), T0)
    assert fold.table("t")["faults"] == []  # type: ignore[index]
    assert fold.table("t")["mode"] == "rng"  # type: ignore[index]
    fold.record("t", lines("recovery", 4, round=2, faults=["storage"]), T0)  # a start says
    assert fold.table("t")["faults"] == ["storage"]  # type: ignore[index]


def correction(lines: Lines, t: float, number: int, attempt: int = 1) -> dict[str, Any]:
    """A ``result_corrected`` record as the core writes it: the dice read 1, 2 6; seen 1, 2 2."""
    return lines(
        "result_corrected",
        t,
        round=number,
        attempt=attempt,
        dice_read={"red": 1, "blue": [2, 6]},
        dice_seen={"red": 1, "blue": [2, 2]},
        reason="misread",
        employee="S100",
        note="",
        result={
            "game": "tiles",
            "bank": "dealer",
            "count": 5,
            "total": 5,
            "starting_position": "seat 4",
            "dice": {"red": 1, "blue": [2, 2]},
            "wagers": {
                "sum": {"3-8-9": False, "8-16-17": False, "pair": True, "series": False},
                "match": {"1": 1, "2": 2, "3": 0, "4": 0, "5": 0, "6": 0},
                "beat_it": {"any": False, "red": False},
            },
            "payouts": {},
        },
    )


def void(lines: Lines, t: float, number: int, reason: str = "tile_exposed") -> dict[str, Any]:
    """A ``void`` record as the core writes it: the whole round, every wager returned."""
    return lines(
        "void",
        t,
        round=number,
        attempt=1,
        state="result",
        reason=reason,
        wagers="returned",
        reshuffle=reason in ("wrong_count", "tile_exposed"),
        note="",
        employee="S100",
    )


def test_a_corrected_result_is_the_last_result_marked_corrected() -> None:
    """N.J.A.C. 13:69E-1.28P(d): the corrected result stands in the place of the one first
    read, with the dice read, why and who; it is still the round's one result."""
    fold = FloorFold()
    lines = Lines()
    fold.record("t", result(lines, 0, 3), T0)
    sent = correction(lines, 1, 3)
    fold.record("t", sent, T0)
    shown = fold.table("t")["last_result"]  # type: ignore[index]
    assert shown == corrected_summary(sent["seq"], sent["time"], sent["data"])
    assert (shown["round"], shown["attempt"], shown["total"]) == (3, 1, 5)
    assert shown["dice"] == {"red": 1, "blue": [2, 2]}
    assert shown["starting_position"] == "seat 4"
    assert shown["wagers"][0] == "Sum: pair"
    assert shown["corrected"] == {
        "dice_read": {"red": 1, "blue": [2, 6]},
        "reason": "misread",
        "employee": "S100",
    }
    assert (shown["voided"], shown["void"]) == (None, None)
    fold.record("t", lines("close", 2, round=3), T0)
    assert fold.table("t")["games_per_hour"] == 1  # type: ignore[index]


def test_a_void_makes_the_round_void_not_its_result() -> None:
    """621a.12(c),(e): a round void after its result shows no result of it; a round void
    before one is the table's latest round all the same; neither is a game."""
    fold = FloorFold()
    lines = Lines()
    fold.record("t", result(lines, 0, 3), T0)
    sent = void(lines, 1, 3)
    fold.record("t", sent, T0)
    shown = fold.table("t")["last_result"]  # type: ignore[index]
    assert shown == void_summary(sent["seq"], sent["time"], sent["data"])
    assert (shown["round"], shown["dice"], shown["total"], shown["wagers"]) == (3, None, None, [])
    assert shown["void"] == {
        "reason": "tile_exposed",
        "employee": "S100",
        "state": "result",
        "reshuffle": True,
        "wagers": "returned",
    }
    fold.record("t", lines("void", 2, round=4, state="armed", reason="dealer_key"), T0)
    shown = fold.table("t")["last_result"]  # type: ignore[index]
    assert (shown["round"], shown["void"]["reason"], shown["void"]["employee"]) == (
        4,
        "dealer_key",
        None,
    )
    assert fold.table("t")["games_per_hour"] == 0  # type: ignore[index]


def test_a_voided_result_of_an_older_log_stays_shown_marked_voided() -> None:
    fold = FloorFold()
    lines = Lines()
    fold.record("t", result(lines, 0, 3), T0)
    fold.record("t", lines("result_voided", 1, round=3, attempt=1, reason="misread"), T0)
    shown = fold.table("t")["last_result"]  # type: ignore[index]
    assert (shown["round"], shown["voided"]) == (3, "misread")
    assert shown["wagers"] == ["Sum: 3-8-9", "Paytable B: 9 pays 2 to 1", "Match: 1×1 2×1 6×1",
                               "Beat It: any"]  # fmt: skip


# --- junk, threads ------------------------------------------------------------------------------

SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
JSON = (
    SCALAR
    | st.lists(SCALAR, max_size=4)
    | st.dictionaries(st.text(max_size=8), SCALAR | st.lists(SCALAR, max_size=3), max_size=4)
)
KINDS = st.sampled_from(
    ["result", "close", "void", "result_voided", "result_corrected", "fault", "fault_cleared",
     "dice_alarm",
     "dice_replaced", "supervisor_action", "recovery", "mode_changed", "config_loaded",
     "service_mode", "x"]
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"seq": st.integers(-3, 2**64) | JSON, "kind": KINDS | JSON, "time": st.text() | JSON},
            optional={"data": st.dictionaries(st.sampled_from(
                ["round", "attempt", "fault", "faults", "dice", "wagers", "payouts", "mode",
                 "cleared", "entered", "action", "test", "face", "reason", "result",
                 "dice_read", "employee", "state"]), JSON | st.fixed_dictionaries(
                     {"dice": JSON, "wagers": JSON, "round": JSON}), max_size=6)},
        ),
        max_size=12,
    )
)  # fmt: skip
def test_junk_from_a_table_never_raises_and_stays_json(lines: list[dict[str, Any]]) -> None:
    fold = FloorFold()
    for line in lines:
        fold.record("t", line, T0)
        fold.record("bad name!", line, T0)
    fold.refresh(T0 + 7200)
    assert fold.table("bad name!") is None
    json.dumps(fold.snapshot(T0), allow_nan=False)


def test_a_waiting_stream_wakes_on_a_change_from_another_thread() -> None:
    floor = Floor(clock=Clock())
    version = floor.version
    woke = threading.Event()

    def wait() -> None:
        if floor.wait_for_change(version, timeout=20):
            woke.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    floor.apply_status("t", online(0))
    waiter.join(timeout=20)
    assert woke.is_set()
    assert not floor.wait_for_change(floor.version, timeout=0.01)


# --- a stateful walk ----------------------------------------------------------------------------


class FloorWalk(RuleBasedStateMachine):
    """Results, voids, closes, faults and the passing of time, in any order, on two tables;
    the fold keeps to a model that keeps every close time."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.floor = Floor(clock=self.clock, settings=FloorSettings(min_games_per_hour=0))
        self.lines = {"a": Lines(), "b": Lines()}
        self.t = {"a": 0.0, "b": 0.0}  # each table's time, seconds after START
        self.pending: dict[str, tuple[int, int] | None] = {"a": None, "b": None}
        self.round = {"a": 1, "b": 1}
        self.closes: dict[str, list[float]] = {"a": [], "b": []}
        self.faults: dict[str, set[str]] = {"a": set(), "b": set()}
        self.seen_version = 0
        self.table_now: dict[str, int] = {}  # the model's estimate of each table's time now

    def _send(self, table: str, kind: str, **data: Any) -> None:
        self.floor.apply_record(table, self.lines[table](kind, self.t[table], **data))

    @rule(table=st.sampled_from("ab"), seconds=st.integers(1, 1800))
    def time_passes(self, table: str, seconds: int) -> None:
        self.t[table] += seconds
        self.clock.now = T0 + max(self.t.values())
        self._send(table, "shake", round=self.round[table], attempt=1)

    @rule(table=st.sampled_from("ab"))
    def a_result(self, table: str) -> None:
        self.floor.apply_record(table, result(self.lines[table], self.t[table], self.round[table]))
        self.pending[table] = (self.round[table], 1)

    @rule(table=st.sampled_from("ab"))
    def corrected(self, table: str) -> None:
        self.floor.apply_record(
            table, correction(self.lines[table], self.t[table], self.round[table])
        )

    @rule(table=st.sampled_from("ab"))
    def voided(self, table: str) -> None:
        self._send(table, "result_voided", round=self.round[table], attempt=1, reason="misread")
        if self.pending[table] == (self.round[table], 1):
            self.pending[table] = None

    @rule(table=st.sampled_from("ab"), kind=st.sampled_from(["close", "void"]))
    def ends(self, table: str, kind: str) -> None:
        self._send(table, kind, round=self.round[table])
        if kind == "close" and self.pending[table] is not None:
            self.closes[table].append(self.t[table])
        self.pending[table] = None
        self.round[table] += 1

    @rule(table=st.sampled_from("ab"), fault=st.sampled_from(["tamper", "x"]), on=st.booleans())
    def fault(self, table: str, fault: str, on: bool) -> None:
        if on:
            self._send(table, "fault", round=self.round[table], fault=fault, detail="")
            self.faults[table].add(fault)
        else:
            self._send(table, "fault_cleared", round=self.round[table], faults=[fault])
            self.faults[table].discard(fault)

    @rule(seconds=st.integers(1, 4000))
    def the_witness_waits(self, seconds: int) -> None:
        self.clock.now += seconds
        self.floor.refresh()

    @invariant()
    def keeps_to_the_model(self) -> None:
        self.floor.refresh()
        snapshot = self.floor.snapshot()
        for view in snapshot["tables"]:
            table = view["table"]
            latest = time_ms(view["last_seen"])
            assert latest is not None
            received = view["received_ms"] / 1000  # when the latest time came, in this walk
            estimate = latest + max(0, int((self.clock.now - received) * 1000))
            now_ms = self.table_now[table] = max(self.table_now.get(table, estimate), estimate)
            expected = sum(
                1 for t in self.closes[table] if now_ms - WINDOW_MS < int(t * 1000) + int(T0 * 1000)
            )
            assert view["games_per_hour"] == expected
            assert set(view["faults"]) == self.faults[table]
        numbers = [a["number"] for a in snapshot["alerts"]]
        assert numbers == sorted(numbers, reverse=True)  # all info: the newest first
        assert snapshot["version"] >= self.seen_version
        self.seen_version = snapshot["version"]
        json.dumps(snapshot, allow_nan=False)


TestFloorWalk = FloorWalk.TestCase
TestFloorWalk.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_the_module_is_pure_apart_from_its_lock() -> None:
    """No I/O and no clock read: the fold's module imports threading for the wrapper only."""
    tree = ast.parse(Path(floor_module.__file__).read_text())
    imported = {
        name.split(".")[0] if not name.startswith("controller") else name
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import)
            else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        )
    }  # fmt: skip
    allowed = {"__future__", "threading", "collections", "dataclasses", "datetime", "enum"}
    own = {"controller.fleet.protocol", "controller.witness.ports", "controller.core.records"}
    own.add("controller.core.record_schema")  # pure: the records' fields, read leniently
    assert imported <= allowed | {"typing"} | own, imported
    called = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    assert not called & {"open", "now", "time", "monotonic", "utcnow", "today"}, called


@pytest.fixture(autouse=True)
def _no_threads_left() -> Iterator[None]:
    before = threading.active_count()
    yield
    assert threading.active_count() <= before


def test_a_cosignature_anchors_the_log_to_its_size() -> None:
    floor = Floor(clock=Clock())
    lines = Lines()
    for _ in range(5):
        floor.apply_record("t", lines("shake", 0, round=1, attempt=1))
    floor.apply_cosigned("t", 4, int(T0) + 90)  # the cosignature's time, POSIX seconds
    floor.apply_cosigned("nowhere", 4, int(T0))  # a table not seen: nothing to show
    view = floor.table("t")
    assert view is not None
    assert (view["log_size"], view["anchored_size"]) == (5, 4)
    assert view["anchored_time"] == "2026-12-01T08:01:30.000Z"
    assert floor.table("nowhere") is None


def test_a_floor_is_the_sink_the_witness_calls() -> None:
    """The same methods and parameters as controller/witness/ports.py's FloorSink (mypy checks
    the types: floor.py assigns Floor to a ``type[FloorSink]``)."""
    import inspect

    from controller.witness.ports import FloorSink

    for name in (
        "apply_record", "apply_unconfirmed", "apply_status", "apply_cosigned", "apply_alert",
    ):  # fmt: skip
        theirs = inspect.signature(getattr(FloorSink, name))
        mine = inspect.signature(getattr(Floor, name))
        assert list(mine.parameters) == list(theirs.parameters), name
        assert str(mine) == str(theirs), name


def test_a_refused_key_or_a_recall_does_not_close_the_open_faults() -> None:
    fold = FloorFold()
    fold.status("t", online(0, "fault", ("tamper",)), T0)
    fold.status("t", online(1, "refused"), T0)  # a key refused: a notice over the fault
    fold.status("t", online(2, "recall"), T0)  # the supervisor looks at a past round
    view = fold.table("t")
    assert view is not None
    assert (view["screen"], view["faults"]) == ("recall", ["tamper"])
    fold.status("t", online(3, "ready"), T0)  # cleared: the table says so
    assert fold.table("t")["faults"] == []  # type: ignore[index]
