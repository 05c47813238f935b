"""Faults that come back are one fault: the pure policy (held with a back-off, counted, and at
the limit a restart), then the control loop that applies it (the clear refused while held, the
count on the fault screen, the watchdog no longer fed, and why recorded)."""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest
from support import SUPERVISOR, opening
from support.rng_fakes import AUDITOR_KEY

from controller.app.adapters import NoShaker
from controller.app.loop import ControlLoop, Ports
from controller.audit.log import AuditLog
from controller.audit.recall import export_lines
from controller.core.config import Config
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.recurrence import RecurrencePolicy, Recurrences
from controller.core.state import (
    Event,
    Fault,
    Mode,
    RngMode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    Tick,
    occurrence,
)
from controller.display.console import ConsoleDisplay
from controller.rng.session import RngPort, RngSessionManager
from drivers.safety import FaultLatch

NONE: frozenset[Fault] = frozenset()
DISK = frozenset({Fault.STORAGE})
POLICY = RecurrencePolicy(window_ms=60_000, first_hold_ms=5_000, max_hold_ms=40_000)


def cycle(rec: Recurrences, raised: int, cleared: int) -> Recurrences:
    """The storage fault raised at ``raised``, cleared at ``cleared``."""
    return rec.observe(NONE, DISK, raised).observe(DISK, NONE, cleared)


# --- the policy -------------------------------------------------------------------------------


def test_a_fault_raised_once_is_not_held_and_not_counted() -> None:
    rec = Recurrences(POLICY).observe(NONE, DISK, 1_000)
    assert rec.held(DISK, 1_000) == {}
    assert rec.returns(DISK) == {}
    assert rec.refusal(DISK, 1_000) is None
    assert rec.shown(DISK, 1_000) == {}


def test_a_fault_back_within_the_window_is_held_and_counted() -> None:
    rec = cycle(Recurrences(POLICY), 0, 10_000)
    rec = rec.observe(NONE, DISK, 69_999)  # 59.999 s after its clear: it came back
    assert rec.returns(DISK) == {Fault.STORAGE: 1}
    assert rec.held(DISK, 69_999) == {Fault.STORAGE: 5_000}
    assert rec.held(DISK, 74_998) == {Fault.STORAGE: 1}
    assert rec.held(DISK, 74_999) == {}  # the hold is over; still counted
    assert rec.shown(DISK, 74_998) == {"returns": {"storage": 1}, "held_s": {"storage": 1}}
    assert rec.shown(DISK, 74_999) == {"returns": {"storage": 1}}
    why = rec.refusal(DISK, 70_000)
    assert why is not None
    assert "storage came back within 60 s of its clear (1 in a row)" in why
    assert "held 5 s more" in why


def test_a_fault_back_after_the_window_starts_again() -> None:
    rec = cycle(Recurrences(POLICY), 0, 10_000)
    rec = rec.observe(NONE, DISK, 70_001)  # a minute and a millisecond: a new fault
    assert rec.returns(DISK) == {}
    assert rec.held(DISK, 70_001) == {}


def test_the_hold_doubles_with_each_return_up_to_its_cap() -> None:
    rec = Recurrences(POLICY)
    at, holds = 0, []
    for _ in range(6):
        rec = rec.observe(NONE, DISK, at)
        holds.append(rec.held(DISK, at).get(Fault.STORAGE, 0))
        at += holds[-1] + 1_000  # cleared a second after its hold
        rec = rec.observe(DISK, NONE, at)
        at += 1_000  # and back a second later
    assert holds == [0, 5_000, 10_000, 20_000, 40_000, 40_000]


def test_at_the_limit_of_returns_a_restart_is_due_naming_the_fault() -> None:
    policy = RecurrencePolicy(restart_after=3)
    rec = Recurrences(policy)
    at = 0
    for returns in range(4):
        assert rec.restart_reason() is None
        rec = rec.observe(NONE, DISK, at)
        assert rec.returns(DISK).get(Fault.STORAGE, 0) == returns
        at += policy.max_hold_ms
        rec = rec.observe(DISK, NONE, at)
        at += 1
    why = rec.restart_reason()
    assert why is not None
    assert why.startswith("storage came back 3 times in a row")
    assert "watchdog" in why


def test_a_fault_that_stays_cleared_is_forgotten() -> None:
    rec = cycle(Recurrences(POLICY), 0, 1_000)
    rec = cycle(rec, 2_000, 9_000)  # came back once
    assert Fault.STORAGE in rec.faults
    # another fault's step, more than a window after the clear: the storage fault is forgotten
    rec = rec.observe(NONE, frozenset({Fault.TAMPER}), 70_000)
    assert set(rec.faults) == {Fault.TAMPER}


def test_a_round_decided_since_the_clear_means_the_fault_did_not_come_straight_back() -> None:
    rec = cycle(Recurrences(POLICY), 0, 1_000)
    rec = cycle(rec, 2_000, 9_000)  # came back once
    rec = rec.round_decided(NONE)  # then the table played a round
    rec = rec.observe(NONE, DISK, 10_000)
    assert rec.returns(DISK) == {}
    assert rec.held(DISK, 10_000) == {}
    # a fault active while a round is decided (one the RNG plays without) keeps its count
    rec = cycle(rec, 11_000, 12_000).observe(NONE, DISK, 13_000)
    assert rec.round_decided(DISK).returns(DISK) == {Fault.STORAGE: 1}


def test_faults_are_counted_each_on_its_own() -> None:
    both = frozenset({Fault.STORAGE, Fault.RNG_FAILURE})
    rec = Recurrences(POLICY).observe(NONE, both, 0).observe(both, NONE, 1_000)
    rec = rec.observe(NONE, DISK, 2_000)  # only the storage came back
    assert rec.returns(both) == {Fault.STORAGE: 1}
    assert set(rec.held(both, 2_000)) == {Fault.STORAGE}


def test_the_policy_refuses_what_cannot_be_a_policy() -> None:
    with pytest.raises(ValueError, match="positive"):
        RecurrencePolicy(restart_after=0)
    with pytest.raises(ValueError, match="shorter"):
        RecurrencePolicy(first_hold_ms=10_000, max_hold_ms=5_000)


# --- the control loop ---------------------------------------------------------------------------


class Screens:
    def __init__(self) -> None:
        self.shown: list[tuple[Screen, dict[str, object]]] = []

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        self.shown.append((screen, dict(data)))

    def show_status(
        self, screen: Screen, *, player_bank: bool = False, dice_alarm: bool = False
    ) -> None:
        return None

    def close(self) -> None:
        return None

    def last(self, screen: Screen) -> dict[str, object]:
        return next(data for shown, data in reversed(self.shown) if shown is screen)


class Table:
    """An RNG table on the real log and the real loop, its clock in the test's hands."""

    def __init__(self, state_dir: Path, policy: RecurrencePolicy) -> None:
        self.log = AuditLog.open(state_dir)
        self.screens = Screens()
        rng = RngSessionManager(
            state_dir=state_dir,
            log=self.log,
            table="t1",
            game=Game.TILES,
            mode=RngMode.POSITION,
            max_rounds=1000,
            records=[],
            escrow=AUDITOR_KEY,
        )
        ports = Ports(
            log=self.log,
            display=self.screens,
            panel=self.screens,
            shaker=NoShaker(),
            latch=FaultLatch(),
            rng=RngPort(rng),
        )
        self.at = 0
        self.alive: list[str | None] = []  # the loop's restart reason at each watchdog ping
        self.loop = ControlLoop(
            RoundMachine(RoundSettings(mode=Mode.RNG)),
            ports,
            clock=lambda: self.at,
            recurrence=policy,
            alive_every_s=0.001,
            on_alive=lambda: self.alive.append(self.loop.restart_reason),
        )
        self.loop.power_on(config=config_loaded_data(Config()))
        for occ in opening(self.at):
            self.loop.dispatch(occ)

    def send(self, event: Event, **data: object) -> None:
        self.at += 100
        self.loop.dispatch(occurrence(event, at=self.at, **data))

    def fail(self) -> None:
        self.send(Event.FAULT, fault=Fault.RNG_FAILURE, detail="the RNG failed its self-test")

    def clear(self) -> None:
        self.send(Event.CLEAR_FAULT, supervisor=True, employee=SUPERVISOR)


def test_a_fault_that_comes_back_is_held_shown_counted_and_cleared_after_its_hold(
    tmp_path: Path,
) -> None:
    table = Table(tmp_path, RecurrencePolicy(first_hold_ms=5_000))
    table.fail()
    table.clear()
    assert table.loop.machine.state is State.IDLE  # the first time, cleared at once
    table.fail()  # straight back
    shown = table.screens.last(Screen.FAULT)
    assert shown["returns"] == {"rng_failure": 1}
    assert shown["held_s"] == {"rng_failure": 5}
    table.clear()  # within its hold: refused, the fault stays (not shown as cleared)
    assert table.loop.machine.state is State.FAULT
    refused = table.screens.shown[-1]
    assert refused[0] is Screen.REFUSED
    assert "rng_failure came back within 60 s" in str(refused[1]["reason"])
    table.at += 5_000  # the hold is over
    table.clear()
    assert table.loop.machine.state is State.IDLE
    table.log.close()
    kinds = [r["kind"] for r in export_lines(tmp_path)]
    assert kinds.count("fault") == 2
    assert kinds.count("fault_cleared") == 2  # the refused clear changed nothing


def test_after_k_returns_the_watchdog_is_no_longer_fed_and_why_is_recorded(
    tmp_path: Path,
) -> None:
    policy = RecurrencePolicy(first_hold_ms=1_000, max_hold_ms=1_000, restart_after=3)
    table = Table(tmp_path, policy)
    runner = threading.Thread(target=table.loop.run, daemon=True)
    for _ in range(4):  # raised, then back three times
        table.fail()
        table.at += policy.max_hold_ms
        table.clear()
    assert table.loop.restart_reason is not None
    assert not table.loop.is_healthy
    assert table.loop.machine.state is State.FAULT  # the internal fault, latched
    table.at += policy.max_hold_ms
    table.clear()  # no key clears what the restart awaits
    assert table.loop.machine.state is State.FAULT
    assert "systemd restarts" in str(table.screens.shown[-1][1]["reason"])
    assert table.screens.last(Screen.FAULT)["restart"] == table.loop.restart_reason
    # the loop runs: it no longer tells systemd it is alive
    done = table.loop.submit(Tick(at=table.at))
    runner.start()
    assert done.wait_for_step(timeout=30)
    table.loop.stop()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert table.alive == []
    table.log.close()
    details = [r["data"]["detail"] for r in export_lines(tmp_path) if r["kind"] == "fault"]
    assert details[-1].startswith("rng_failure came back 3 times in a row")
    assert "systemd restarts" in details[-1]


def test_a_fault_cleared_and_raised_after_a_round_played_is_not_held(tmp_path: Path) -> None:
    table = Table(tmp_path, RecurrencePolicy())
    table.fail()
    table.clear()
    table.send(Event.NO_MORE_BETS)
    table.send(Event.DICE_SET)  # 621a.8(a)(1): the RNG draws; the round is decided
    assert table.loop.machine.state is State.RESULT
    table.send(Event.CLOSE_ROUND)
    table.fail()
    assert "returns" not in table.screens.last(Screen.FAULT)
    table.clear()
    assert table.loop.machine.state is State.IDLE
    table.log.close()


def test_a_healthy_loop_feeds_the_watchdog(tmp_path: Path) -> None:
    """The same run as above without returns: the watchdog is fed (the test above can fail)."""
    table = Table(tmp_path, RecurrencePolicy())
    runner = threading.Thread(target=table.loop.run, daemon=True)
    done = table.loop.submit(Tick(at=table.at))
    runner.start()
    assert done.wait_for_step(timeout=30)
    table.loop.stop()
    runner.join(timeout=30)
    assert table.alive
    assert set(table.alive) == {None}
    table.log.close()


def test_the_console_counts_a_fault_that_came_back() -> None:
    out = io.StringIO()
    console = ConsoleDisplay(out)
    console.show(Screen.FAULT, {"faults": ["storage"]}, seq=None)
    console.show(Screen.FAULT, {"faults": ["storage"], "returns": {"storage": 2}}, seq=None)
    assert out.getvalue().splitlines() == [
        "  FAULT storage",
        "  FAULT storage (came back: storage 2 in a row)",
    ]
