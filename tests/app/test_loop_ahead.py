"""The control loop decides a reading ahead (the core's ``decide_ahead``) before it asks the
sensor to read again, and gives that decision to the step of the next reading; a decision that
fails is logged and the reading stepped without it. The real audit log, a manual table."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import ScreenLog, opening
from support.table import good_reading

from controller.app import loop as loop_module
from controller.app import simulate
from controller.app.adapters import NoShaker
from controller.app.loop import ControlLoop, Ports
from controller.audit import log as audit_log
from controller.audit.log import AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.core.config import Config
from controller.core.log_state import Prepared
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.state import (
    Decided,
    Event,
    Mode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    occurrence,
)
from drivers.safety import FaultLatch


class Sensor:
    """The dice sensor's port: notes each read asked for, in order with the loop's steps."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def request_read(self, *, round_number: int, attempt: int) -> None:
        self.seen.append("read asked")


class PreparingScreens(ScreenLog):
    """A display that makes screens ready ahead (``PreparesScreens``): notes what it was
    given to prepare, and each screen shown with whether it is the very data last prepared."""

    def __init__(self, seen: list[str], *, fails: bool = False) -> None:
        super().__init__()
        self.seen = seen
        self.fails = fails
        self.prepared: list[tuple[Screen, Mapping[str, object]]] = []
        self.taken: list[tuple[Screen, bool]] = []

    def prepare(self, screen: Screen, data: Mapping[str, object]) -> None:
        self.seen.append(f"prepared {screen}")
        if self.fails:
            raise RuntimeError("a bug preparing a screen")
        self.prepared.append((screen, data))

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        taken = bool(self.prepared) and self.prepared[-1] == (screen, data)
        self.taken.append((screen, taken and self.prepared[-1][1] is data))
        super().show(screen, data, seq=seq)


class ManualTable:
    def __init__(self, state_dir: Path, seen: list[str], screens: ScreenLog | None = None) -> None:
        self.log = AuditLog.open(state_dir)
        self.screens = ScreenLog() if screens is None else screens
        latch = FaultLatch()
        ports = Ports(
            log=self.log,
            display=self.screens,
            panel=self.screens,
            shaker=NoShaker(),
            latch=latch,
            sensor=Sensor(seen),  # type: ignore[arg-type]
        )
        self.at = 0
        self.loop = ControlLoop(
            RoundMachine(RoundSettings(mode=Mode.MANUAL)), ports, clock=lambda: self.at
        )
        self.loop.power_on(config=config_loaded_data(Config()))
        for occ in opening(self.at):
            self.loop.dispatch(occ)

    def send(self, event: Event, **data: object) -> None:
        self.at += 100
        self.loop.dispatch(occurrence(event, at=self.at, **data))

    def play(self, *readings: Any) -> None:
        self.send(Event.NO_MORE_BETS)
        self.send(Event.DICE_SET)  # 621a.6(a)(2): the manual shaker set on the reader
        for reading in readings:
            self.send(Event.READING, reading=reading)

    def results(self) -> list[dict[str, Any]]:
        return [dict(d) for screen, d, _ in self.screens.shown if screen is Screen.RESULT]


def test_the_decision_is_made_before_the_second_read_and_taken_by_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    made: list[Decided] = []
    given: list[Decided | None] = []

    real_decide, real_step = loop_module.decide_ahead, loop_module.step

    def deciding(settings: RoundSettings, ctx: Any) -> Decided | None:
        decided = real_decide(settings, ctx)
        if decided is not None:
            seen.append("decided")
            made.append(decided)
        return decided

    def stepping(settings: RoundSettings, ctx: Any, occ: Any, *, ahead: Any = None) -> Any:
        if occ.event is Event.READING:
            given.append(ahead)
        return real_step(settings, ctx, occ, ahead=ahead)

    monkeypatch.setattr(loop_module, "decide_ahead", deciding)
    monkeypatch.setattr(loop_module, "step", stepping)
    table = ManualTable(tmp_path, seen)
    table.play(good_reading(2, 3, 4), good_reading(2, 3, 4, shift=1))
    assert seen == ["read asked", "decided", "read asked"]
    assert given == [None, made[0]]  # the deciding reading's step was given the decision
    [result] = table.results()
    assert result["round"] == 1
    table.log.close()


def test_a_decision_that_fails_is_logged_and_the_reading_decides_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def failing(settings: RoundSettings, ctx: Any) -> Decided | None:
        raise RuntimeError("a bug deciding ahead")

    plain = ManualTable(tmp_path / "plain", [])
    plain.play(good_reading(5, 1, 6), good_reading(5, 1, 6, shift=1))
    monkeypatch.setattr(loop_module, "decide_ahead", failing)
    table = ManualTable(tmp_path / "failing", [])
    with caplog.at_level(logging.ERROR, logger="paigow.daemon"):
        table.play(good_reading(5, 1, 6), good_reading(5, 1, 6, shift=1))
    assert "internal error deciding ahead" in caplog.text
    assert table.results() == plain.results()
    assert table.loop.is_healthy
    for t in (plain, table):
        t.log.close()


def test_the_deciding_commit_takes_the_records_prepared_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result's records are checked and encoded at the first reading (the waiting reading
    when it waits, the decided ones with the decision): the deciding commit gets those very
    records, prepared, and writes the same log as without them."""
    committed: list[list[Any]] = []

    def table_of(directory: Path) -> ManualTable:
        table = ManualTable(directory, [])
        real_commit = table.log.commit

        def commit(entries: Any, **kwargs: Any) -> Any:
            committed.append(list(entries))
            return real_commit(entries, **kwargs)

        monkeypatch.setattr(table.log, "commit", commit)
        committed.clear()
        return table

    table = table_of(tmp_path / "ahead")
    table.play(good_reading(2, 3, 4), good_reading(2, 3, 4, shift=1))
    deciding = next(batch for batch in committed if RecordKind.RESULT in [e[0] for e in batch])
    kinds = [(str(entry[0]), isinstance(entry, Prepared)) for entry in deciding]
    # the first reading waited (prepared as it waited), the second is the frame's own, the
    # result was decided ahead
    assert kinds == [("reading", True), ("reading", False), ("result", True)]
    ahead_leaves = [r.leaf for r in table.log.records()]

    monkeypatch.setattr(loop_module, "decide_ahead", lambda settings, ctx: None)
    plain = table_of(tmp_path / "plain")
    plain.play(good_reading(2, 3, 4), good_reading(2, 3, 4, shift=1))
    deciding = next(batch for batch in committed if RecordKind.RESULT in [e[0] for e in batch])
    assert [isinstance(entry, Prepared) for entry in deciding] == [True, False, False]
    # the same readings and result (the logs differ in their keys and wall clocks)
    assert _records(ahead_leaves) == _records([r.leaf for r in plain.log.records()])
    for t in (table, plain):
        t.log.close()


def test_the_result_decided_ahead_is_made_ready_by_the_display_and_shown_as_that_data(
    tmp_path: Path,
) -> None:
    """The display makes the decided result's screen ready before the second read is asked
    for; the deciding step shows that very data (its body is then only sent)."""
    seen: list[str] = []
    screens = PreparingScreens(seen)
    table = ManualTable(tmp_path, seen, screens)
    table.play(good_reading(2, 3, 4), good_reading(2, 3, 4, shift=1))
    assert seen == ["read asked", "prepared result", "read asked"]
    assert (Screen.RESULT, True) in screens.taken
    assert [screen for screen, taken in screens.taken if taken] == [Screen.RESULT]
    [result] = table.results()
    assert result["round"] == 1
    table.log.close()


def test_a_result_prepared_for_a_reading_that_disagrees_is_not_shown(tmp_path: Path) -> None:
    """The second reading reads other dice: its step decides without the decision made
    ahead, and the result shown is not the one the display made ready."""
    screens = PreparingScreens([])
    table = ManualTable(tmp_path, [], screens)
    table.play(good_reading(2, 3, 4), good_reading(5, 1, 6), good_reading(5, 1, 6, shift=1))
    [(_, first), *_] = screens.prepared
    [result] = table.results()
    assert result["result"] != first["result"]
    assert (Screen.RESULT, True) in screens.taken  # the agreeing pair's, prepared in turn
    table.log.close()


def test_a_display_that_fails_to_prepare_is_logged_and_shows_the_result_as_it_comes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = ManualTable(tmp_path / "plain", [])
    plain.play(good_reading(5, 1, 6), good_reading(5, 1, 6, shift=1))
    screens = PreparingScreens([], fails=True)
    table = ManualTable(tmp_path / "failing", [], screens)
    with caplog.at_level(logging.ERROR, logger="paigow.daemon"):
        table.play(good_reading(5, 1, 6), good_reading(5, 1, 6, shift=1))
    assert "internal error preparing result" in caplog.text
    assert [r["result"] for r in table.results()] == [r["result"] for r in plain.results()]
    assert table.loop.is_healthy
    for t in (plain, table):
        t.log.close()


def _records(leaves: list[bytes]) -> list[tuple[str, Any]]:
    entries = map(json.loads, leaves)
    return [(e["kind"], e["data"]) for e in entries if e["kind"] in ("reading", "result")]


def test_the_wal_is_copied_between_rounds_never_on_a_commits_way_to_the_display(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the WAL's copy due every few rounds, a simulated table (the real loop, the real
    log) makes each copy between rounds, bets open and no event waiting, none after a commit;
    the log verifies."""
    monkeypatch.setattr(audit_log, "CHECKPOINT_PAGES", 150)
    copies: list[tuple[str, State]] = []
    between = [False]
    real_copy, real_settle = AuditLog._checkpoint_wal, AuditLog.settle_between_rounds
    loops: list[ControlLoop] = []
    real_init = ControlLoop.__init__

    def init(self: ControlLoop, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        loops.append(self)

    def copy(self: AuditLog) -> None:
        where = "between rounds" if between[0] else "after a commit"
        copies.append((where, loops[-1].machine.state))
        real_copy(self)

    def settle(self: AuditLog) -> None:
        between[0] = True
        try:
            real_settle(self)
        finally:
            between[0] = False

    monkeypatch.setattr(ControlLoop, "__init__", init)
    monkeypatch.setattr(AuditLog, "_checkpoint_wal", copy)
    monkeypatch.setattr(AuditLog, "settle_between_rounds", settle)
    out = io.StringIO()
    state = tmp_path / "state"
    code = simulate.run_simulation(
        Config(), rounds=12, seed=3, fast=True, faults={}, state_dir=state, out=out
    )
    assert code == 0, out.getvalue()
    assert len(copies) >= 3, copies
    assert set(copies) == {("between rounds", State.IDLE)}
    signer = load_signer(state)
    assert signer is not None
    verify_state_dir(state, signer.verifier, workers=1)
