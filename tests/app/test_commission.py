"""``paigow-controller commission``: the technician's walk on gpiozero's MockFactory pins (the
simulated shaker and panel behind them) and the simulated dice sensor on a real pty, answered
from a scripted stdin while a technician thread works the keys, the lid and the tamper loop
as each step asks; the report printed and recorded, verify-log passing after it.

The technician reacts to what the walk prints (the prompts go to stderr, here a stream that
tells the thread what was written), never to a sleep; the walk's waits for the hardware run on
an injected clock where a test needs one to run out.
"""

from __future__ import annotations

import io
import itertools
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory

from controller.app.commission import Console, Settings, commission
from controller.app.config_file import load_config
from controller.app.instance_lock import InstanceLock
from controller.audit.log import AuditLog
from controller.audit.recall import export_lines
from controller.cli import main
from controller.cli.render import commission_report, record_text
from controller.core import commissioning as walk
from controller.core.commissioning import Outcome, Verdict
from controller.core.record_data import RecordDataError
from controller.core.records import RecordKind
from drivers.sim.hardware import SimPanel, SimShaker
from drivers.sim.sensor import SimulatedSensor

pytestmark = pytest.mark.usefixtures("logging_restored")

WAIT_S = 10.0  # the most a technician's action waits for the walk to see it (never reached)

FAST = """\
[table]
name = "t9"
[shaker]
debounce_ms = 5
shake_ms = 300
cycle_ms = 50
motor_max_ms = 500
"""
# 6 cycles of 50 ms for the 3 the rules ask (621a.8(a)(2)): a simulated pulse that fires late
# on a busy machine (each is a timer) still leaves the walk's count at or above the minimum


class Screen(io.TextIOBase):
    """The technician's terminal (the walk's stderr): what was written, and a wait for a
    phrase to appear. ``on_write`` sees each write on the walk's thread."""

    def __init__(self) -> None:
        self._text = ""
        self._changed = threading.Condition()
        self.on_write: Callable[[str], None] | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._changed:
            self._text += text
            self._changed.notify_all()
        if self.on_write is not None:
            self.on_write(text)
        return len(text)

    @property
    def text(self) -> str:
        return self._text

    def wait_for(self, phrase: str, *, after: int) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: phrase in self._text[after:], WAIT_S)


@dataclass
class Table:
    """A table on the bench: config, mock pins behind the simulated shaker and panel, the
    simulated sensor, and the technician's screen."""

    config_file: Path
    state_dir: Path
    shaker: SimShaker
    panel: SimPanel
    sensor: SimulatedSensor
    screen: Screen

    def argv(self, *more: str) -> list[str]:
        return [
            *("commission", "--config", str(self.config_file), "--technician", "J. Rivera #4411"),
            *("--state-dir", str(self.state_dir), "--sensor-url", self.sensor.url),
            "--json",
            *more,
        ]


@pytest.fixture
def table(tmp_path: Path, factory: MockFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Table]:
    config_file = tmp_path / "config.toml"
    config_file.write_text(FAST)
    config = load_config(config_file)
    AuditLog.open(tmp_path / "state", origin="paigow-controller/t9").close()  # what init makes
    monkeypatch.setattr(Device, "pin_factory", factory)  # what run's default finds on a Pi
    shaker = SimShaker(factory, config.pins, config.shaker)
    panel = SimPanel(factory, config.pins)
    screen = Screen()
    with SimulatedSensor(seed=5) as sensor:
        try:
            yield Table(config_file, tmp_path / "state", shaker, panel, sensor, screen)
        finally:
            shaker.close()


class Technician:
    """Works the hardware each input step asks for, on a thread of its own, once the walk says
    it is waiting; rolls the dice before each reading (the walk asks for Enter first)."""

    def __init__(self, table: Table, *, readings: int, skip: frozenset[str] = frozenset()) -> None:
        self.table = table
        self.steps = walk.plan(has_shaker=True, has_sensor=True, readings=readings)
        self.skip = skip
        self.step: walk.Step | None = None
        self.threads: list[threading.Thread] = []
        self.failures: list[str] = []
        table.screen.on_write = self.saw

    def answers(self) -> str:
        """The lines the technician types, one per question, in the walk's order."""
        lines = []
        for step in self.steps:
            if step.name in self.skip:
                lines.append("s")
            elif step.kind is walk.StepKind.LAMP:
                lines.append("y")
            elif step.kind is walk.StepKind.READING:
                lines += ["", "y"]
            elif step.kind is not walk.StepKind.SENSOR:
                lines.append("")
        return "".join(f"{line}\n" for line in lines)

    def saw(self, text: str) -> None:
        if text.startswith("\n[") and "/" in text:
            self.step = self.steps[int(text[2 : text.index("/")]) - 1]
        elif "Press Enter to read" in text:
            self.table.sensor.roll()  # the dice shaken between readings
        elif "waiting up to" in text and self.step is not None:
            mark = len(self.table.screen.text)
            thread = threading.Thread(target=self.work, args=(self.step, mark), daemon=True)
            thread.start()
            self.threads.append(thread)

    def work(self, step: walk.Step, mark: int) -> None:
        table, target = self.table, step.target
        first = step.expect[0]
        actions: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {
            walk.LID: (table.shaker.open_lid, table.shaker.close_lid),
            walk.TAMPER: (table.shaker.remove, table.shaker.secure),
            walk.SUPERVISOR_KEY: (
                lambda: table.panel.turn_supervisor_key(True),
                lambda: table.panel.turn_supervisor_key(False),
            ),
        }
        do, undo = actions.get(
            target, (lambda: table.panel.press(target), lambda: table.panel.release(target))
        )
        do()
        if not table.screen.wait_for(f"seen: {walk.state_word(target, first)}", after=mark):
            self.failures.append(f"{step.name}: the walk never saw {first}")
        undo()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(WAIT_S)
        assert self.failures == []


def run_cli(
    table: Table,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answers: str,
    *more: str,
) -> tuple[int, dict[str, Any]]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(answers))
    monkeypatch.setattr(sys, "stderr", table.screen)  # after capsys took it
    code = main(table.argv(*more))
    out = capsys.readouterr().out
    return code, json.loads(out)


def records(state_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    with AuditLog.open(state_dir, origin="paigow-controller/t9") as log:
        return [(r.kind, r.data) for r in log.records()]


# --- the walk ------------------------------------------------------------------------------------


def test_a_full_walk_passes_every_step_and_is_recorded(
    table: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    technician = Technician(table, readings=2)
    code, report = run_cli(
        table, capsys, monkeypatch, technician.answers(), "--readings", "2", "--step-timeout", "9"
    )
    technician.join()
    assert code == 0, table.screen.text
    assert report["outcome"] == "completed"
    assert report["passed"] is True
    assert report["technician"] == "J. Rivera #4411"
    assert [s["step"] for s in report["steps"]] == [s.name for s in technician.steps]
    assert {s["verdict"] for s in report["steps"]} == {"pass"}, report["steps"]
    assert report["counts"]["pass"] == len(technician.steps)
    motor = next(s for s in report["steps"] if s["step"] == "shaker.motor")
    assert motor["detail"]["cycles"] >= 3  # 621a.8(a)(2)
    assert motor["detail"]["motor_off"] is True
    assert report["sensor"]["model"] == "OptiDice-3"
    assert report["sensor"]["serial_number"] == "SIM-0001"
    reading = next(s for s in report["steps"] if s["step"] == "sensor.reading.1")
    assert len(reading["detail"]["dice"]) == 3
    assert "red" in reading["observed"]
    assert "flat" in reading["observed"]
    assert report["outputs_safe"] == ["panel.lamps", "shaker.motor"]
    assert table.shaker.motor_value == 0
    # recorded: the same report, signed and chained in the table's log
    kinds_and_data = records(table.state_dir)
    assert kinds_and_data[-1][0] == RecordKind.COMMISSIONING
    recorded = kinds_and_data[-1][1]
    assert recorded["steps"] == report["steps"]
    assert len(kinds_and_data) == report["record"]
    # verify-log checks it (signature, chain, and its verdict against its steps); export shows it
    assert main(["verify-log", "--state-dir", str(table.state_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    exported = [line["kind"] for line in export_lines(table.state_dir)]
    assert exported[-1] == "commissioning"
    # the technician saw what to do at each step
    screen = table.screen.text
    assert "Press the dealer's NO MORE BETS key once and release it." in screen
    assert "seen: released" in screen
    assert "seen: open (tampered)" in screen


def test_a_lid_that_never_opens_fails_after_the_timeout(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lid's step waits --step-timeout on the walk's clock (here one that runs 7 s a
    look), then fails naming what it did not see; the steps the technician skipped are skipped,
    the walk completes, and it has not passed."""
    config = load_config(table.config_file)
    steps = walk.plan(has_shaker=True, has_sensor=True, readings=0)
    answers = "".join("\n" if step.name == "shaker.lid" else "s\n" for step in steps)
    console = Console(io.StringIO(answers), table.screen, timeout_s=WAIT_S)
    ticks = itertools.count(step=7.0)
    settings = Settings(
        technician="JR", state_dir=table.state_dir, readings=0, sensor_url=table.sensor.url
    )
    report = commission(config, settings, console, clock=lambda: float(next(ticks)))
    verdicts = {step["step"]: step for step in report["steps"]}
    lid = verdicts.pop("shaker.lid")
    assert lid["verdict"] == "fail"
    assert (
        "closed at the start; seen: no change; not seen open then closed within 30 s"
        in (lid["observed"])
    )
    assert verdicts.pop("sensor.handshake")["verdict"] == "pass"
    assert {step["verdict"] for step in verdicts.values()} == {"skipped"}
    assert report["outcome"] == "completed"
    assert report["passed"] is False
    assert report["counts"] == {"pass": 1, "fail": 1, "skipped": len(steps) - 2, "not_run": 0}
    assert records(table.state_dir)[-1][1]["passed"] is False


def test_every_step_skipped_but_the_sensor_passes_exits_0(
    table: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    technician = Technician(
        table,
        readings=1,
        skip=frozenset(s.name for s in walk.plan(has_shaker=True, has_sensor=True, readings=1)),
    )
    code, report = run_cli(table, capsys, monkeypatch, technician.answers(), "--readings", "1")
    assert code == 0
    assert report["passed"] is True
    assert report["counts"]["skipped"] == len(technician.steps) - 1
    assert table.shaker.shakes == 0  # a skipped motor step never runs the motor


def test_ctrl_c_while_the_motor_runs_leaves_every_output_safe(
    table: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT while the motor turns: the handler drives every output safe at once, the walk
    ends with the rest not run, the report is printed and recorded, exit 130."""
    steps = walk.plan(has_shaker=True, has_sensor=True, readings=1)
    motor_at = next(i for i, step in enumerate(steps) if step.name == "shaker.motor")
    skip = frozenset(step.name for step in steps[:motor_at])
    technician = Technician(table, readings=1, skip=skip)
    sent = threading.Event()

    def interrupt() -> None:
        if table.shaker.wait_for_motor(running=True, timeout=WAIT_S):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)  # Ctrl-C
            sent.set()

    interrupter = threading.Thread(target=interrupt, daemon=True)

    def watch(text: str) -> None:
        technician.saw(text)
        if "the driver cuts it at" in text:
            interrupter.start()

    table.screen.on_write = watch
    code, report = run_cli(table, capsys, monkeypatch, technician.answers(), "--readings", "1")
    interrupter.join(WAIT_S)
    assert sent.is_set(), table.screen.text
    assert code == 130
    assert table.shaker.motor_value == 0
    assert not table.shaker.wait_for_motor(running=True, timeout=0.05)
    assert report["outcome"] == "interrupted"
    assert report["passed"] is False
    verdicts = [step["verdict"] for step in report["steps"]]
    assert verdicts[motor_at:] == ["not_run"] * (len(steps) - motor_at)
    assert verdicts[:motor_at] == ["skipped"] * motor_at
    assert report["outputs_safe"] == ["panel.lamps", "shaker.motor"]
    assert records(table.state_dir)[-1][1]["outcome"] == "interrupted"
    assert "interrupted" in table.screen.text.splitlines()[-1]
    assert "Traceback" not in table.screen.text
    assert main(["verify-log", "--state-dir", str(table.state_dir)]) == 0


def test_input_that_ends_abandons_the_walk_safely(
    table: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, report = run_cli(table, capsys, monkeypatch, "y\n")
    assert code == 1
    assert report["outcome"] == "abandoned"
    assert report["ended"] == "the technician's input ended"
    assert report["steps"][0]["verdict"] == "pass"
    assert {step["verdict"] for step in report["steps"][1:]} == {"not_run"}
    assert records(table.state_dir)[-1][0] == RecordKind.COMMISSIONING


def test_it_refuses_to_run_beside_the_controller(
    table: Table, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = InstanceLock.acquire(table.state_dir)  # what run holds for its life
    try:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        monkeypatch.setattr(sys, "stderr", table.screen)
        code = main(table.argv())
    finally:
        lock.release()
    assert code == 1
    assert capsys.readouterr().out == ""
    said = table.screen.text.splitlines()
    assert len(said) == 1, said
    assert "another controller (PID" in said[0]
    assert "stop the controller first" in said[0]
    assert records(table.state_dir)[-1][0] == RecordKind.LOG_CREATED  # nothing recorded


@pytest.mark.parametrize(
    "more",
    [
        ("--technician", ""),
        ("--technician", "J\x1b[2JR"),
        ("--technician", "x" * 65),
        ("--technician", " JR"),
        ("--technician", "Jos\u00e9"),
        ("--readings", "101"),
        ("--readings", "\u0663"),
        ("--step-timeout", "0"),
        ("--answer-timeout", "3601"),
        ("--no-such-option",),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    more: tuple[str, ...], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["commission", "--technician", "JR", "--state-dir", str(tmp_path), *more]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err


def test_the_technician_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["commission"]) == 2
    assert "--technician" in capsys.readouterr().err


def test_a_bad_config_exits_78_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "config.toml"
    bad.write_text("[shaker]\ncycle_ms = 1\n")
    assert main(["commission", "--technician", "JR", "--config", str(bad)]) == 78
    assert "shaker.cycle_ms" in capsys.readouterr().err


# --- never a log, a key or a state directory of its own ----------------------------------------


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("simulate", [False, True])
def test_a_missing_state_directory_is_one_line_exit_2_and_nothing_appears(
    simulate: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "state"
    argv = ["commission", "--technician", "JR", "--state-dir", str(missing)]
    assert main([*argv, *(["--simulate"] if simulate else [])]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"paigow-controller: --state-dir {missing} is no directory: commission never makes the"
        f" log; make it first: paigow-controller init --state-dir {missing}, or the"
        " controller's first start"
    ]
    assert _files(tmp_path) == []


def test_a_config_naming_a_missing_state_directory_exits_78(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[storage]\nstate_dir = "{tmp_path / "gone"}"\n')
    assert main(["commission", "--technician", "JR", "--config", str(config)]) == 78
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("paigow-controller: config: storage.state_dir: ")
    assert _files(tmp_path) == ["config.toml"]


def test_a_state_directory_without_a_log_is_exit_1_and_no_key_or_log_appears(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "state"
    empty.mkdir()
    argv = ["commission", "--technician", "JR", "--state-dir", str(empty), "--simulate"]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"paigow-controller: commission: no audit log in {empty}: commission never makes one;"
        f" make it first: paigow-controller init --state-dir {empty}, or the controller's"
        " first start"
    ]
    assert _files(tmp_path) == ["state"]


def test_a_log_without_its_key_is_exit_1_and_no_key_appears(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    state = tmp_path / "state"
    AuditLog.open(state, origin="paigow-controller/t9").close()
    (state / "audit-log.key").unlink()
    before = _files(tmp_path)
    argv = ["commission", "--technician", "JR", "--state-dir", str(state), "--simulate"]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "the log's signing key is missing" in line
    assert _files(tmp_path) == before


def test_simulate_needs_a_state_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["commission", "--technician", "JR", "--simulate"]) == 2
    assert "--simulate needs --state-dir" in capsys.readouterr().err


def test_a_walk_of_the_simulated_hardware_passes_and_is_recorded_as_simulated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """commission --simulate: the walk works simulate's hardware itself (keys, lid, tamper
    loop, the key switch, the dice); the technician only answers. Every step passes, the lamps
    and the tray are said, and the record says simulated; verify-log passes."""
    state = tmp_path / "state"
    config_file = tmp_path / "config.toml"
    config_file.write_text(FAST)
    AuditLog.open(state, origin="paigow-controller/t9").close()
    steps = walk.plan(has_shaker=True, has_sensor=True, readings=2)
    answers = []
    for step in steps:
        if step.kind is walk.StepKind.LAMP:
            answers.append("y")
        elif step.kind is walk.StepKind.READING:
            answers += ["", "y"]
        elif step.kind is not walk.StepKind.SENSOR:
            answers.append("")
    screen = Screen()
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{a}\n" for a in answers)))
    monkeypatch.setattr(sys, "stderr", screen)
    argv = ["commission", "--simulate", "--state-dir", str(state), "--technician", "JR"]
    code = main([*argv, "--config", str(config_file), "--readings", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, screen.text
    assert {s["verdict"] for s in report["steps"]} == {"pass"}, report["steps"]
    assert [s["step"] for s in report["steps"]] == [s.name for s in steps]
    assert report["simulated"] is True
    assert "(simulated: lamp_red is lit)" in screen.text
    assert "(simulated tray: red " in screen.text
    kind, data = records(state)[-1]
    assert kind == RecordKind.COMMISSIONING
    assert data["simulated"] is True
    assert main(["verify-log", "--state-dir", str(state)]) == 0
    capsys.readouterr()
    # recall reaches it, though no round was ever played (a record outside rounds)
    assert main(["recall", "--state-dir", str(state), "--kind", "commissioning", "--json"]) == 0
    (recalled,) = json.loads(capsys.readouterr().out)["records"]
    assert recalled["seq"] == report["record"]
    assert recalled["round"] is None
    assert recalled["data"]["technician"] == "JR"


# --- the pure parts ------------------------------------------------------------------------------


def test_an_input_passes_only_on_a_change_and_back() -> None:
    key = walk.plan(has_shaker=False, has_sensor=False, readings=0)[3]
    assert key.target == "key_no_more_bets"
    assert walk.judge_input(key, initial=False, changes=[True, False], timeout_s=5).verdict is (
        Verdict.PASS
    )
    stuck = walk.judge_input(key, initial=True, changes=[False], timeout_s=5)
    assert stuck.verdict is Verdict.FAIL  # a key stuck pressed, released once: no press seen
    assert stuck.observed.startswith("pressed at the start; seen: released; not seen")


def test_a_motor_that_counts_too_few_pulses_fails_naming_the_rule() -> None:
    motor = next(
        s
        for s in walk.plan(has_shaker=True, has_sensor=False, readings=0)
        if s.kind.value == "motor"
    )
    few = walk.judge_motor(motor, walk.MotorObservation(cycles=2), pattern_cycles=7, min_cycles=3)
    assert few.verdict is Verdict.FAIL
    assert "621a.8(a)(2)" in few.observed
    overrun = walk.judge_motor(
        motor,
        walk.MotorObservation(cycles=7, faults=("motor_overrun: motor still turning",)),
        pattern_cycles=7,
        min_cycles=3,
    )
    assert overrun.verdict is Verdict.FAIL
    assert (
        walk.judge_motor(
            motor, walk.MotorObservation(cycles=7), pattern_cycles=7, min_cycles=3
        ).verdict
        is Verdict.PASS
    )


def test_verify_log_refuses_a_record_whose_verdict_is_not_its_steps() -> None:
    steps = walk.plan(has_shaker=False, has_sensor=False, readings=0)
    results = [walk.StepResult(steps[0], Verdict.FAIL, "dark"), walk.skipped(steps[1])]
    doc = walk.report(
        table="t9",
        technician="JR",
        outcome=Outcome.COMPLETED,
        results=results,
        sensor=None,
        config_sha256="0" * 64,
        step_timeout_s=30,
        readings=0,
        outputs_safe=["panel.lamps"],
    )
    walk.check_record(doc)
    with pytest.raises(RecordDataError, match="passed"):
        walk.check_record({**doc, "passed": True})
    with pytest.raises(RecordDataError, match="counts"):
        walk.check_record({**doc, "counts": {**doc["counts"], "fail": 0}})
    with pytest.raises(RecordDataError, match="technician"):
        walk.check_record({**doc, "technician": "\x1b[2J"})
    text = commission_report({**doc, "record": 7})
    assert text.startswith("commissioning of table t9: FAILED (1 of 2 steps)")
    assert "audit log record 7" in text
    assert record_text("commissioning", doc) == (
        "by JR: completed, NOT passed (1 FAIL, 1 skipped); failed: lamp.lamp_red"
    )
