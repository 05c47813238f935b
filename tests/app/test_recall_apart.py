"""The RECALL screen's read of the log made apart from the control thread (issue 31): the table
takes its events while the log is read, the screen is shown once read if the table still
recalls that round, and a read that fails latches the fault it would have at once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from support import SUPERVISOR, ScreenLog, opening
from support.web import wait_until

from controller.app.adapters import NoShaker
from controller.app.loop import ControlLoop, Outcome, Ports
from controller.app.recall_reads import RecallReads
from controller.audit.log import AuditLog
from controller.core.config import Config
from controller.core.record_data import config_loaded_data
from controller.core.state import (
    Fault,
    NoMoreBets,
    Occurrence,
    Recall,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
)
from controller.errors import AuditLogError
from drivers.safety import FaultLatch

WAIT_S = 30  # a bound on liveness, never a measure of speed


class HeldLog:
    """The audit log, whose recall waits until the test releases it (or raises ``failure``),
    noting the thread it was read on."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log
        self.asked = threading.Event()
        self.release = threading.Event()
        self.read_on: list[str] = []
        self.failure: Exception | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)

    def recall(self, last: int) -> list[dict[str, Any]]:
        self.read_on.append(threading.current_thread().name)
        self.asked.set()
        assert self.release.wait(WAIT_S)
        if self.failure is not None:
            raise self.failure
        return self.log.recall(last)


class RunningTable:
    """The control loop, reading recall apart, in a thread of its own."""

    def __init__(self, state_dir: Path) -> None:
        self.audit = AuditLog.open(state_dir)
        self.log = HeldLog(self.audit)
        self.screens = ScreenLog()
        latch = FaultLatch()
        latch.register("lamps", self.screens.drive_safe)
        ports = Ports(
            log=self.log,  # type: ignore[arg-type]
            display=self.screens,
            panel=self.screens,  # type: ignore[arg-type]
            shaker=NoShaker(),
            latch=latch,
        )
        self.loop = ControlLoop(RoundMachine(RoundSettings()), ports, recall_apart=True)
        self.loop.power_on(config=config_loaded_data(Config()))
        for occ in opening(self.loop.clock()):
            self.loop.dispatch(occ)
        self.thread = threading.Thread(target=self.loop.run, name="control", daemon=True)
        self.thread.start()

    def submit(self, occ: Occurrence) -> Outcome:
        outcome = self.loop.submit(occ)
        assert outcome.wait_for_step(WAIT_S)
        return outcome

    def recall(self, back: int | None) -> Outcome:
        return self.submit(
            Recall(at=self.loop.clock(), supervisor=True, employee=SUPERVISOR, back=back)
        )

    def recalled(self) -> list[dict[str, object]]:
        return [data for screen, data, _ in self.screens.shown if screen is Screen.RECALL]

    def close(self) -> None:
        self.log.release.set()
        self.loop.stop()
        self.thread.join(WAIT_S)
        assert self.loop.recall_reads is not None
        self.loop.recall_reads.close()
        self.audit.close()


@pytest.fixture
def table(tmp_path: Path) -> Any:
    running = RunningTable(tmp_path)
    yield running
    running.close()


def test_the_table_takes_events_while_the_recall_is_read(table: RunningTable) -> None:
    entered = table.recall(1)
    assert entered.refused is None
    assert table.log.asked.wait(WAIT_S)
    # the log is being read: the control thread is free, and takes (and refuses) a key
    pressed = table.submit(NoMoreBets(at=table.loop.clock()))
    assert pressed.refused is not None
    assert "recall" in pressed.refused
    assert table.recalled() == []
    table.log.release.set()
    assert wait_until(lambda: table.recalled() != [])
    (shown,) = table.recalled()
    assert shown["back"] == 1
    assert shown["count"] == 1
    assert [game["round"] for game in shown["rounds"]] == [1]  # type: ignore[attr-defined]
    assert table.log.read_on == ["recall-reader"]


def test_a_recall_left_before_it_is_read_is_not_shown(table: RunningTable) -> None:
    table.recall(1)
    assert table.log.asked.wait(WAIT_S)
    left = table.recall(None)
    assert left.refused is None
    assert table.screens.shown[-1][0] is not Screen.RECALL
    reads = table.loop.recall_reads
    assert reads is not None
    table.log.release.set()
    assert wait_until(lambda: reads.answered == 1 and not reads.is_answer_waiting)
    table.submit(NoMoreBets(at=table.loop.clock()))  # the loop went round at least once more
    assert table.recalled() == []
    assert table.loop.machine.state is State.ARMED


def test_a_recall_that_cannot_read_the_log_latches_the_storage_fault(
    table: RunningTable,
) -> None:
    table.log.failure = AuditLogError("audit log: cannot read it")
    table.recall(1)
    table.log.release.set()
    assert wait_until(lambda: table.loop.machine.state is State.FAULT)
    assert Fault.STORAGE in table.loop.machine.context.active_faults
    assert table.recalled() == []


def test_only_the_newest_question_is_answered_and_close_ends_the_reader() -> None:
    woken = threading.Semaphore(0)
    reads = RecallReads(woken.release)
    gates = {1: threading.Event(), 3: threading.Event()}
    started = threading.Event()

    def held(back: int) -> Any:
        def read() -> list[dict[str, Any]]:
            started.set()
            assert gates[back].wait(WAIT_S)
            return [{"round": back}]

        return read

    reads.ask({"back": 1}, held(1))
    assert started.wait(WAIT_S)
    reads.ask({"back": 2}, held(2))  # asked while the first is read
    reads.ask({"back": 3}, held(3))  # replaces the one before, not yet read
    answers = []
    for back in (1, 3):
        gates[back].set()
        assert woken.acquire(timeout=WAIT_S)
        answers.append(reads.take())
    assert [(data["back"], rounds) for data, rounds in answers] == [  # type: ignore[misc]
        (1, [{"round": 1}]),
        (3, [{"round": 3}]),
    ]
    assert reads.answered == 2
    reads.close()
    assert reads.take() is None
