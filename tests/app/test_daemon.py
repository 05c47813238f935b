"""The control loop with the real audit log and the real fault latch: write-ahead, full storage,
refused keys, and the latch re-armed once a fault is cleared."""

from __future__ import annotations

import gc
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import ScreenLog, opening
from support.rng_fakes import AUDITOR_KEY

from controller.app.adapters import NoShaker
from controller.app.loop import IDLE_COLLECTION_MIN, ControlLoop, Ports
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.core.config import Config
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.state import (
    DiceSet,
    Event,
    Fault,
    Mode,
    NoMoreBets,
    RngMode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    occurrence,
)
from controller.errors import OutputsLatched
from controller.ports import Shaker
from controller.rng.session import RngPort, RngSessionManager
from drivers.safety import FaultLatch


class Table:
    def __init__(
        self,
        state_dir: Path,
        *,
        max_page_count: int | None = None,
        mode: Mode = Mode.RNG,
        shaker: Shaker | None = None,
    ) -> None:
        state_dir.mkdir(exist_ok=True)
        self.log = AuditLog.open(state_dir, max_page_count=max_page_count)
        self.screens = ScreenLog()
        self.latch = FaultLatch()
        self.latch.register("lamps", self.screens.drive_safe)
        settings = RoundSettings(mode=mode)
        rng = RngSessionManager(
            state_dir=state_dir,
            log=self.log,
            table="t1",
            game=Game.TILES,
            mode=RngMode.POSITION,
            max_rounds=1000,
            records=[(r.seq, r.kind, r.data) for r in self.log.records()],
            escrow=AUDITOR_KEY,
        )
        ports = Ports(
            log=self.log,
            display=self.screens,
            panel=self.screens,
            shaker=NoShaker() if shaker is None else shaker,
            latch=self.latch,
            rng=RngPort(rng),
        )
        self.at = 0
        self.loop = ControlLoop(RoundMachine(settings), ports, clock=lambda: self.at)
        self.loop.power_on(config=config_loaded_data(Config()))
        for occ in opening(self.at):
            self.loop.dispatch(occ)

    def send(self, event: Event, **data: object) -> None:
        self.at += 100
        self.loop.dispatch(occurrence(event, at=self.at, **data))

    def round(self) -> None:
        self.send(Event.NO_MORE_BETS)
        self.send(Event.DICE_SET)  # 621a.11(i): the style settled, 621a.8(a)(1): the RNG draws
        self.send(Event.CLOSE_ROUND)


def committed_results(state_dir: Path) -> set[int]:
    db = sqlite3.connect(f"file:{state_dir / DB_NAME}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT seq FROM records WHERE kind = 'result'").fetchall()
    finally:
        db.close()
    return {int(seq) for (seq,) in rows}


def test_a_result_is_shown_only_after_it_is_committed(tmp_path: Path) -> None:
    table = Table(tmp_path)
    table.round()
    results = [(data, seq) for screen, data, seq in table.screens.shown if screen is Screen.RESULT]
    assert len(results) == 1
    _, seq = results[0]
    assert seq in committed_results(tmp_path)  # the screen names its committed record
    table.log.close()


def test_full_storage_stops_new_rounds_shows_a_fault_and_loses_nothing(tmp_path: Path) -> None:
    table = Table(tmp_path, max_page_count=40)
    for _ in range(400):
        table.round()
        # the commit that found the storage full failed; the fault record after it may still
        # fit in the last page, or not: either way the storage fault is latched
        if Fault.STORAGE in table.loop.machine.context.active_faults:
            break
    else:
        pytest.fail("the page limit was never reached")
    # the storage fault is latched and shown; the outputs went safe
    assert table.loop.machine.state.value == "fault"
    assert Fault.STORAGE in table.loop.machine.context.active_faults
    assert table.latch.is_tripped
    assert any(screen is Screen.FAULT for screen, _, _ in table.screens.shown)
    # write-ahead: every result ever shown names a committed result record
    committed = committed_results(tmp_path)
    shown = [seq for screen, data, seq in table.screens.shown if screen is Screen.RESULT]
    assert all(seq in committed for seq in shown)
    # no new round starts
    shown_before = len(table.screens.shown)
    table.send(Event.NO_MORE_BETS)
    assert table.loop.machine.state.value == "fault"
    assert table.screens.shown[shown_before][0] is Screen.REFUSED
    table.log.close()
    # nothing already recorded is lost: the log verifies
    signer = load_signer(tmp_path)
    assert signer is not None
    report = verify_state_dir(tmp_path, signer.verifier)
    assert report.records >= 10


def test_an_operator_key_at_the_wrong_time_is_refused_on_the_display(tmp_path: Path) -> None:
    table = Table(tmp_path)
    table.send(Event.CLOSE_ROUND)
    screen, data, _ = table.screens.shown[-1]
    assert screen is Screen.REFUSED
    assert "close_round" in str(data["reason"])
    assert table.loop.machine.state.value == "idle"
    table.log.close()


def test_the_latch_is_rearmed_when_the_fault_is_cleared(tmp_path: Path) -> None:
    table = Table(tmp_path)
    table.send(Event.FAULT, fault=Fault.SENSOR_TIMEOUT)
    assert table.latch.is_tripped
    table.send(Event.CLEAR_FAULT)
    assert not table.latch.is_tripped
    assert table.loop.machine.state.value == "idle"
    kinds = [record.kind for record in table.log.records()]
    assert kinds[-2:] == [RecordKind.FAULT, RecordKind.FAULT_CLEARED]
    table.log.close()


class LatchedShaker(NoShaker):
    """The shaker as the driver answers when its latch tripped after the step was decided
    (a motor overrun whose event is still on its way to the control thread)."""

    def __init__(self) -> None:
        self.asked = 0

    def start_shake(self) -> None:
        self.asked += 1
        raise OutputsLatched("outputs are latched safe: motor_overrun: motor still turning")


def test_a_shake_refused_by_the_latch_is_not_a_fault_of_its_own(tmp_path: Path) -> None:
    """The fault that tripped the latch is recorded by its own event, once; the refusal adds
    no internal fault (a surveillance officer would read it as a second failure)."""
    shaker = LatchedShaker()
    table = Table(tmp_path, mode=Mode.SHAKER, shaker=shaker)
    table.send(Event.LID_CLOSED)
    table.send(Event.NO_MORE_BETS)
    table.send(Event.SHAKE_PRESSED, delay_ms=0)
    assert shaker.asked == 1
    assert table.loop.machine.state.value == "shaking"
    table.send(Event.MOTOR_OVERRUN, detail="motor still turning")
    assert table.loop.machine.state.value == "fault"
    faults = [r.data["fault"] for r in table.log.records() if r.kind == RecordKind.FAULT]
    assert faults == ["motor_overrun"]
    table.log.close()


def test_the_loop_collects_garbage_when_idle_on_its_own_thread(tmp_path: Path) -> None:
    """With ``collect_garbage_when_idle`` the collector runs on the control thread once no
    event has come for a moment (not within a step), and the loop still takes events."""
    table = Table(tmp_path)
    table.loop.collect_garbage_when_idle = True
    runner = threading.Thread(target=table.loop.run, name="control")
    collected = threading.Event()

    def seen(phase: str, info: Mapping[str, object]) -> None:
        if phase == "stop" and threading.current_thread() is runner:
            collected.set()

    shown_result = threading.Event()
    show = table.screens.show

    def show_and_tell(screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        show(screen, data, seq=seq)
        if screen is Screen.RESULT:
            shown_result.set()

    table.screens.show = show_and_tell  # type: ignore[method-assign]
    was_enabled = gc.isenabled()
    gc.disable()  # only the loop collects here
    gc.callbacks.append(seen)
    try:
        for _ in range(2 * IDLE_COLLECTION_MIN):
            cycle: list[object] = []
            cycle.append(cycle)
        runner.start()
        assert collected.wait(5)
        table.loop.events.put(NoMoreBets(at=table.at))
        table.loop.events.put(DiceSet(at=table.at))
        assert shown_result.wait(5)  # the RNG draws at once: the round's result
        table.loop.stop()
        runner.join(timeout=5)
        assert not runner.is_alive()
    finally:
        gc.callbacks.remove(seen)
        if was_enabled:
            gc.enable()
        table.loop.stop()
        table.log.close()


def test_a_commit_the_log_refuses_latches_an_internal_fault_and_the_loop_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit the log refuses before writing (a record its schema refuses: a bug) never
    escapes the loop: nothing of the step is adopted or shown, the internal fault that names
    what was not recorded is durable, and systemd's watchdog is no longer fed."""
    table = Table(tmp_path)
    real_commit = table.log.commit
    refusals = iter([True])

    def refusing(entries: Any, *, context: bytes | None = None) -> Any:
        if next(refusals, False):
            raise ValueError("a record its schema refuses")
        return real_commit(entries, context=context)

    monkeypatch.setattr(table.log, "commit", refusing)
    table.send(Event.NO_MORE_BETS)
    table.send(Event.DICE_SET)  # the draw comes after the log: its commit is refused
    assert table.loop.machine.context.state is State.FAULT
    assert Fault.INTERNAL in table.loop.machine.context.active_faults
    assert not table.loop.is_healthy
    assert not [s for s, _, _ in table.screens.shown if s is Screen.RESULT]
    faults = [r.data for r in table.log.records() if r.kind == RecordKind.FAULT]
    assert faults[-1]["fault"] == "internal"
    assert "a record its schema refuses; not recorded: no_more_bets" in str(faults[-1]["detail"])
    table.log.close()
