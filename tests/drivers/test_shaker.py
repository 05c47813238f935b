"""The shaker driver on gpiozero mock pins, with the simulated shaker mechanics behind them."""

from __future__ import annotations

import contextlib
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin
from gpiozero.pins.pi import PiPin

from controller.core.config import PinsConfig, ShakerConfig
from controller.core.state import MOTOR_GRACE_MS, Event, Fault, Occurrence
from controller.errors import ConfigError, ShakerError
from drivers.safety import FaultLatch
from drivers.shaker import MOTION_GRACE_S, GpioShaker, _ShakeRun
from drivers.sim.hardware import ShakerFaults, SimContactPin, SimMotorPin, SimShaker
from drivers.table_io import build_shaker

PINS = PinsConfig()
# 3 cycles of 200 ms (100 ms on at 0.8, 100 ms off); the driver cuts the motor at 1 s.
CONFIG = ShakerConfig(motor_max_ms=1000, shake_ms=600, amplitude=0.8, cycle_ms=200, debounce_ms=20)
HEALTHY = ShakerFaults()
WAIT = 3.0  # seconds: the longest any test waits for an event that must come


class Table:
    """A mock pin factory with the simulated shaker on it and the driver built on top."""

    def __init__(
        self,
        faults: ShakerFaults = HEALTHY,
        config: ShakerConfig = CONFIG,
        *,
        latch: FaultLatch | None = None,
        events: queue.Queue[Occurrence] | None = None,
        motor_pin_class: type[SimMotorPin] = SimMotorPin,
        motion_pin_class: type[SimContactPin] = SimContactPin,
        motion_grace_s: float = MOTION_GRACE_S,
        latched: bool = True,
    ):
        self.factory = MockFactory(pin_class=MockPWMPin)
        self.factory.pin(PINS.motor, pin_class=motor_pin_class)  # the simulator takes these
        self.factory.pin(PINS.motion_sensor, pin_class=motion_pin_class)
        self.events = events if events is not None else queue.Queue()
        self.latch = latch if latch is not None else FaultLatch()
        self.shake_ends = threading.Semaphore(0)
        self.sim = SimShaker(
            self.factory, PINS, config, faults=faults, on_shake_end=self.shake_ends.release
        )
        self.shaker = GpioShaker(
            self.events,
            motor_pin=PINS.motor,
            lid_pin=PINS.lid_switch,
            motion_pin=PINS.motion_sensor,
            tamper_pin=PINS.tamper_switch,
            config=config,
            pin_factory=self.factory,
            latch=self.latch if latched else None,
            motion_grace_s=motion_grace_s,
        )
        self.motor_pin = self.sim.motor_pin
        self.motion_pin = self.sim.motion_pin

    def next_event(self, timeout: float = WAIT) -> Occurrence:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no event within {timeout} s")

    def expect_quiet(self, within: float) -> None:
        """No event for ``within`` seconds (a bounded wait on the queue, not a sleep)."""
        try:
            occ = self.events.get(timeout=within)
        except queue.Empty:
            return
        pytest.fail(f"unexpected event {occ}")

    def close(self) -> None:
        self.shaker.close()
        self.sim.close()
        self.factory.close()


@pytest.fixture
def table() -> Iterator[Table]:
    t = Table()
    yield t
    t.close()


def shake_states(config: ShakerConfig, cycles: int) -> list[tuple[float, float]]:
    half = config.cycle_ms / 2000
    states: list[tuple[float, float]] = [(0.0, 0.0), (0.0, config.amplitude)]
    for i in range(cycles):
        states.append((half, 0.0))
        if i < cycles - 1:
            states.append((half, config.amplitude))
    return states


def assert_history(pin: MockPWMPin, expected: list[tuple[float, float]]) -> None:
    """The motor's writes, in order: the pattern is on and off, cycle by cycle. (Their timing
    is the pattern thread's and the machine's; it is measured in bench/, not asserted here.)"""
    assert [s.state for s in pin.states] == [v for _, v in expected]


def test_a_normal_shake_counts_every_cycle(table: Table) -> None:
    table.motor_pin.clear_states()
    table.shaker.start_shake()
    was_shaking = table.shaker.is_shaking
    assert was_shaking
    done = table.next_event()
    assert done.event is Event.SHAKE_DONE
    assert done.cycles == 3
    assert table.shake_ends.acquire(timeout=WAIT)  # the dice may now be read
    assert table.shaker.motor_value == 0.0
    assert not table.shaker.is_shaking
    assert_history(table.motor_pin, shake_states(CONFIG, 3))
    assert table.sim.pulses == 3
    # The watchdog at 1 s finds the motor off and still: nothing more is reported.
    table.expect_quiet(within=0.8)
    assert not table.latch.is_tripped


def test_amplitude_and_length_come_from_the_config() -> None:
    config = ShakerConfig(
        motor_max_ms=1500, shake_ms=1000, amplitude=0.5, cycle_ms=250, debounce_ms=20
    )
    t = Table(config=config)
    try:
        t.motor_pin.clear_states()
        t.shaker.start_shake()
        done = t.next_event()
        assert (done.event, done.cycles) == (Event.SHAKE_DONE, 4)
        assert_history(t.motor_pin, shake_states(config, 4))
    finally:
        t.close()


def test_lid_opened_mid_shake_stops_the_motor_at_once() -> None:
    t = Table(ShakerFaults(open_lid_after_pulses=1))
    try:
        t.motor_pin.clear_states()
        t.shaker.start_shake()
        opened = t.next_event()
        assert opened.event is Event.LID_OPENED
        assert t.shaker.motor_value == 0.0
        # The lid lifted as the second stroke began: the motor cut in that stroke, the rest
        # of the pattern never run.
        assert_history(t.motor_pin, [(0.0, 0.0), (0.0, 0.8), (0.1, 0.0), (0.2, 0.8), (0.2, 0.0)])
        t.expect_quiet(within=0.8)  # the void shake reports no SHAKE_DONE
        assert not t.shaker.is_shaking
        t.sim.close_lid()
        assert t.next_event().event is Event.LID_CLOSED
    finally:
        t.close()


@pytest.mark.parametrize("pulses", [2, 0])
def test_fewer_than_three_pulses_are_reported_as_counted(pulses: int) -> None:
    t = Table(ShakerFaults(max_pulses=pulses))
    try:
        t.motor_pin.clear_states()
        t.shaker.start_shake()
        done = t.next_event()
        assert (done.event, done.cycles) == (Event.SHAKE_DONE, pulses)
        assert_history(t.motor_pin, shake_states(CONFIG, 3))  # the motor ran its pattern
    finally:
        t.close()


def test_a_hung_pattern_is_cut_by_the_watchdog_at_the_motor_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nobody calls stop(): the thread that should end the shake hangs with the motor on."""
    release = threading.Event()

    def hung_pattern(self: GpioShaker, run: object) -> None:
        self._motor.value = 0.8
        release.wait(WAIT * 2)

    monkeypatch.setattr(GpioShaker, "_run_pattern", hung_pattern)
    t = Table()
    try:
        t.motor_pin.clear_states()
        t.shaker.start_shake()
        overrun = t.next_event()
        assert overrun.event is Event.MOTOR_OVERRUN
        assert "maximum run time" in overrun.detail
        assert_history(t.motor_pin, [(0.0, 0.0), (0.0, 0.8), (1.0, 0.0)])
        assert t.latch.is_tripped
        with pytest.raises(ShakerError, match="latched"):
            t.shaker.start_shake()
    finally:
        release.set()
        t.close()


def test_a_motor_that_keeps_running_after_the_cut_is_an_overrun() -> None:
    t = Table(ShakerFaults(motor_keeps_running=True, run_on_ms=2000))
    try:
        t.shaker.start_shake()
        done = t.next_event()
        assert done.event is Event.SHAKE_DONE
        overrun = t.next_event()
        assert overrun.event is Event.MOTOR_OVERRUN
        assert "still turning" in overrun.detail
        assert t.shaker.motor_value == 0.0
        assert t.latch.is_tripped
    finally:
        t.close()


def test_tamper_while_idle_latches_and_refuses_shakes(table: Table) -> None:
    table.sim.remove()
    tamper = table.next_event()
    assert tamper.event is Event.TAMPER
    assert table.latch.is_tripped
    assert not table.shaker.is_secured
    table.motor_pin.clear_states()
    with pytest.raises(ShakerError):
        table.shaker.start_shake()
    table.latch.reset()  # even re-armed, a shaker not secured does not shake
    table.shaker.start_shake()
    assert table.next_event().event is Event.TAMPER
    assert_history(table.motor_pin, [(0.0, 0.0)])


def test_the_tamper_loop_closing_again_is_reported(table: Table) -> None:
    table.sim.remove()
    assert table.next_event().event is Event.TAMPER
    table.sim.secure()
    assert table.next_event().event is Event.SECURED
    assert table.shaker.is_secured
    assert table.latch.is_tripped  # the fault stays latched until a supervisor clears it


def test_tamper_while_shaking_cuts_the_motor(table: Table) -> None:
    table.motor_pin.clear_states()
    table.shaker.start_shake()
    assert table.sim.wait_for_pulses(1, timeout=WAIT)
    table.sim.remove()
    assert table.shaker.motor_value == 0.0
    assert table.next_event().event is Event.TAMPER
    assert table.latch.is_tripped
    table.expect_quiet(within=0.8)  # no SHAKE_DONE for a shake cut short
    assert [s.state for s in table.motor_pin.states] == [0.0, 0.8, 0.0]


def test_lid_changes_are_reported_once_through_bounce(table: Table) -> None:
    table.sim.open_lid(bounces=4)
    assert table.next_event().event is Event.LID_OPENED
    table.sim.close_lid(bounces=4)
    assert table.next_event().event is Event.LID_CLOSED
    table.expect_quiet(within=0.1)
    assert table.shaker.is_lid_closed


def test_no_shake_with_the_lid_open(table: Table) -> None:
    table.sim.open_lid()
    assert table.next_event().event is Event.LID_OPENED
    table.motor_pin.clear_states()
    table.shaker.start_shake()
    refused = table.next_event()
    assert refused.event is Event.LID_OPENED
    assert "refused" in refused.detail
    assert_history(table.motor_pin, [(0.0, 0.0)])


def test_stop_and_drive_safe_end_a_shake_without_shake_done(table: Table) -> None:
    table.shaker.start_shake()
    assert table.sim.wait_for_motor(running=True, timeout=WAIT)
    table.shaker.stop()
    assert table.shaker.motor_value == 0.0
    table.expect_quiet(within=0.8)
    table.shaker.start_shake()
    assert table.sim.wait_for_motor(running=True, timeout=WAIT)
    worker = threading.Thread(target=table.shaker.drive_safe)  # as from a signal handler
    worker.start()
    worker.join(WAIT)
    assert table.shaker.motor_value == 0.0
    table.expect_quiet(within=0.8)


def test_the_fault_latch_stops_a_shake(table: Table) -> None:
    table.shaker.start_shake()
    assert table.sim.wait_for_motor(running=True, timeout=WAIT)
    assert table.latch.trip("sensor fault")
    assert table.shaker.motor_value == 0.0
    table.expect_quiet(within=0.8)


def test_a_second_shake_has_its_own_watchdog(table: Table) -> None:
    """The first shake's watchdog must not judge the second shake's motion."""
    table.shaker.start_shake()
    assert table.next_event().event is Event.SHAKE_DONE
    table.shaker.start_shake()
    assert table.next_event().event is Event.SHAKE_DONE
    table.expect_quiet(within=1.2)
    assert not table.latch.is_tripped


def test_start_shake_while_shaking_is_ignored(table: Table) -> None:
    table.shaker.start_shake()
    table.shaker.start_shake()
    done = table.next_event()
    assert (done.event, done.cycles) == (Event.SHAKE_DONE, 3)
    table.expect_quiet(within=0.3)


def test_report_inputs_tells_the_core_the_lid_state(table: Table) -> None:
    table.shaker.report_inputs()
    assert table.next_event().event is Event.LID_CLOSED
    table.expect_quiet(within=0.05)


def test_an_open_tamper_loop_at_start_up_is_reported_and_latched() -> None:
    t = Table()
    try:
        t.sim.remove()
        assert t.next_event().event is Event.TAMPER
        t.latch.reset()
        t.shaker.report_inputs()
        kinds = [t.next_event().event, t.next_event().event]
        assert kinds == [Event.LID_CLOSED, Event.TAMPER]
        assert t.latch.is_tripped
    finally:
        t.close()


def test_a_pattern_that_raises_becomes_a_fault_event(monkeypatch: pytest.MonkeyPatch) -> None:
    t = Table()
    try:
        original = t.shaker._drive
        calls = {"n": 0}

        def failing_drive(run: object, value: float) -> bool:
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError("PWM write failed")
            return original(run, value)  # type: ignore[arg-type]

        monkeypatch.setattr(t.shaker, "_drive", failing_drive)
        t.shaker.start_shake()
        fault = t.next_event()
        assert (fault.event, fault.fault) == (Event.FAULT, Fault.INTERNAL)
        assert "PWM write failed" in fault.detail
        assert t.shaker.motor_value == 0.0
        assert t.latch.is_tripped
    finally:
        t.close()


def test_close_twice_and_safe_calls_after_close(table: Table) -> None:
    table.shaker.start_shake()
    assert table.sim.wait_for_motor(running=True, timeout=WAIT)
    table.shaker.close()
    table.shaker.close()
    table.shaker.drive_safe()
    table.shaker.stop()
    assert table.motor_pin.state == 0.0
    with pytest.raises(ShakerError):
        table.shaker.start_shake()
    assert "shaker.motor" not in table.latch.outputs
    table.expect_quiet(within=1.2)  # neither the pattern nor the watchdog speaks after close


def test_context_manager_closes() -> None:
    factory = MockFactory(pin_class=MockPWMPin)
    events: queue.Queue[Occurrence] = queue.Queue()
    with build_shaker(PINS, CONFIG, events, pin_factory=factory) as shaker:
        assert shaker.motor_value == 0.0
    with pytest.raises(ShakerError):
        shaker.start_shake()
    factory.close()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"shake_ms": 500, "cycle_ms": 200}, "shaker.shake_ms"),  # 2 cycles
        ({"motor_max_ms": 600}, "shaker.motor_max_ms"),  # no margin after the shake
    ],
)
def test_a_pattern_against_the_rules_is_refused(change: dict[str, int], key: str) -> None:
    factory = MockFactory(pin_class=MockPWMPin)
    with pytest.raises(ConfigError) as err:
        build_shaker(PINS, replace(CONFIG, **change), queue.Queue(), pin_factory=factory)
    assert err.value.key == key
    factory.close()


# --- locks, threads and failures -------------------------------------------------------------

FAST = ShakerConfig(motor_max_ms=250, shake_ms=150, amplitude=0.8, cycle_ms=50, debounce_ms=5)


@pytest.fixture
def thread_errors() -> Iterator[list[str]]:
    """Exceptions that escape any thread during the test; the test fails on any."""
    errors: list[str] = []
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        errors.append(f"{name}: {args.exc_type.__name__}: {args.exc_value}")

    threading.excepthook = hook
    yield errors
    threading.excepthook = previous
    assert errors == []


class SeenLatch(FaultLatch):
    """A latch that tells when the control thread asks it whether it is tripped."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()

    @property
    def is_tripped(self) -> bool:
        if threading.current_thread().name == "control":
            self.asked.set()
        return super().is_tripped


def test_start_shake_while_a_trip_drives_the_outputs_does_not_deadlock() -> None:
    """The trip drives a first output while the control thread, inside start_shake and
    holding the shaker's lock, asks the latch why it is latched: one lock order, no deadlock."""
    latch = SeenLatch()
    entered, go_on = threading.Event(), threading.Event()

    def relay_board() -> None:  # the first output: the trip is under way while it runs
        entered.set()
        go_on.wait(WAIT)

    latch.register("relay board", relay_board)
    t = Table(latch=latch)
    refused: list[str] = []

    def control() -> None:
        try:
            t.shaker.start_shake()
        except ShakerError as exc:
            refused.append(str(exc))

    tripper = threading.Thread(target=latch.trip, args=("watchdog",), name="tripper", daemon=True)
    controller = threading.Thread(target=control, name="control", daemon=True)
    tripper.start()
    assert entered.wait(WAIT)
    controller.start()
    assert latch.asked.wait(WAIT)  # inside start_shake, the shaker's lock held
    go_on.set()  # the trip goes on to the shaker's output
    tripper.join(WAIT)
    controller.join(WAIT)
    if tripper.is_alive() or controller.is_alive():
        pytest.fail("deadlock between the fault latch and the shaker")  # (threads leak)
    assert refused == ["outputs are latched safe: watchdog"]
    assert t.shaker.motor_value == 0.0
    t.close()


class StallingMotorPin(SimMotorPin):
    """The motor's PWM line, where one chosen write stalls (a PWM driver not answering) until
    released."""

    def __init__(self, factory: Any, info: Any) -> None:
        super().__init__(factory, info)
        self.stall_when: Callable[[str, float], bool] = lambda thread, value: False
        self.stalled = threading.Event()
        self.release = threading.Event()

    def _change_state(self, value: Any) -> bool:
        if self.stall_when(threading.current_thread().name, float(value)):
            self.stall_when = lambda thread, value: False  # once
            self.stalled.set()
            self.release.wait(WAIT)
        return bool(super()._change_state(value))


def shake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("shake-")]


def test_a_shake_the_watchdog_ended_never_energises_the_motor_again() -> None:
    """The pattern thread stalls in a motor write at the motor limit. The watchdog ends the
    shake; once it has, nothing turns the motor on again (no latch here: the driver alone)."""
    t = Table(config=FAST, motor_pin_class=StallingMotorPin, latched=False)
    pin = t.motor_pin
    assert isinstance(pin, StallingMotorPin)
    try:
        pin.stall_when = lambda thread, value: thread.startswith("shake-") and value > 0
        deadline_reached = threading.Event()
        check = t.shaker._motor_deadline

        def watchdog_check(run: Any) -> None:
            deadline_reached.set()  # the watchdog is at the shake's deadline...
            check(run)  # ...and cuts the motor once the stalled write lets it

        t.shaker._motor_deadline = watchdog_check  # type: ignore[method-assign]
        t.shaker.start_shake()
        assert pin.stalled.wait(WAIT)
        assert deadline_reached.wait(WAIT)
        pin.release.set()
        overrun = t.next_event()
        assert overrun.event is Event.MOTOR_OVERRUN
        cut_at = len(pin.states)
        for thread in shake_threads():
            thread.join(WAIT)
        after = [s.state for s in pin.states[cut_at:]]
        assert after == [], f"the motor was driven to {after} after the watchdog ended the shake"
        assert pin.state == 0.0
        assert not t.shaker.is_shaking
    finally:
        pin.release.set()
        t.close()


def test_a_pattern_behind_its_motor_limit_ends_the_shake_itself() -> None:
    """The pattern's write stalls past the motor limit and the watchdog, held back, is not there
    yet: the pattern's next step finds the limit passed, cuts the motor and reports the overrun
    itself; the watchdog's late check reports nothing more."""
    t = Table(config=FAST, motor_pin_class=StallingMotorPin, latched=False)
    pin = t.motor_pin
    assert isinstance(pin, StallingMotorPin)
    try:
        pin.stall_when = lambda thread, value: thread.startswith("shake-") and value > 0
        at_deadline = threading.Event()
        go_on = threading.Event()
        check = t.shaker._motor_deadline

        def held_back_check(run: Any) -> None:
            at_deadline.set()
            go_on.wait(WAIT)
            check(run)

        t.shaker._motor_deadline = held_back_check  # type: ignore[method-assign]
        t.shaker.start_shake()
        assert pin.stalled.wait(WAIT)
        assert at_deadline.wait(WAIT)
        stalled_at = len(pin.states)
        pin.release.set()
        overrun = t.next_event()
        assert overrun.event is Event.MOTOR_OVERRUN
        assert not t.shaker.is_shaking
        go_on.set()
        for thread in shake_threads():
            thread.join(WAIT)
        t.shaker._stop_watchdog()
        assert t.events.empty(), "the overrun was reported twice"
        # The stalled write itself lands first; nothing may turn the motor on after it.
        energised = [s.state for s in pin.states[stalled_at + 1 :] if s.state > 0]
        assert energised == [], f"the motor was driven to {energised} past its limit"
        assert pin.state == 0.0
    finally:
        pin.release.set()
        t.close()


def test_close_while_the_watchdog_cuts_the_motor_writes_nothing_after_close(
    monkeypatch: pytest.MonkeyPatch, thread_errors: list[str]
) -> None:
    """The pattern thread hangs holding the shaker's lock with the motor on; the watchdog's cut
    is slow (its write stalls); close() comes meanwhile. After close() returns no thread
    writes the pin, and none raises."""
    hang = threading.Event()

    def pattern_hung_in_its_lock(self: GpioShaker, run: object) -> None:
        with self._lock:
            self._motor.value = 0.8
            hang.wait(WAIT)

    monkeypatch.setattr(GpioShaker, "_run_pattern", pattern_hung_in_its_lock)
    t = Table(config=FAST, motor_pin_class=StallingMotorPin)
    pin = t.motor_pin
    assert isinstance(pin, StallingMotorPin)
    writes_after_close: list[tuple[str, float]] = []
    closed = threading.Event()
    watched = pin.listener

    def listener(value: float) -> None:
        if closed.is_set():
            writes_after_close.append((threading.current_thread().name, value))
        if watched is not None:
            watched(value)

    pin.listener = listener
    try:
        pin.stall_when = lambda thread, value: thread.startswith("motor-watchdog")
        t.shaker.start_shake()
        assert pin.stalled.wait(WAIT)  # the watchdog is cutting the motor, slowly
        hang.set()  # the pattern thread lets go of the shaker's lock

        def close() -> None:
            t.shaker.close()
            closed.set()

        closer = threading.Thread(target=close, name="closer", daemon=True)
        closer.start()
        closer.join(0.3)  # close may have to wait for the watchdog's write
        pin.release.set()
        closer.join(WAIT)
        assert closed.is_set(), "close() did not return"
        for thread in [*shake_threads(), *watchdog_threads()]:
            thread.join(WAIT)
        t.sim.close()  # (a later write would also have reached the simulator's listener)
        assert writes_after_close == []
        assert pin.state == 0.0
        assert thread_errors == []
    finally:
        hang.set()
        pin.release.set()
        t.close()


def watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("motor-watchdog")]


def test_one_watchdog_thread_guards_every_shake(monkeypatch: pytest.MonkeyPatch) -> None:
    t = Table(config=FAST)
    try:
        t.shaker.start_shake()  # the first shake starts the shaker's watchdog thread
        assert t.next_event().event is Event.SHAKE_DONE
        [watchdog] = watchdog_threads()
        started: list[str] = []
        real_start = threading.Thread.start

        def counting_start(self: threading.Thread) -> None:
            started.append(self.name)
            real_start(self)

        monkeypatch.setattr(threading.Thread, "start", counting_start)
        for _ in range(4):
            t.shaker.start_shake()
            assert t.next_event().event is Event.SHAKE_DONE
        timers = [n for n in started if n.startswith(("motor-watchdog", "debounce-"))]
        assert timers == []  # no timer thread per shake (the simulator's own are not counted)
        assert watchdog_threads() == [watchdog]
        assert not t.latch.is_tripped
    finally:
        t.close()
    assert not watchdog.is_alive()  # close ends it


class FailingSink(queue.Queue[Occurrence]):
    """The control thread's queue, failing once on one kind of event."""

    def __init__(self, fail_on: Event) -> None:
        super().__init__()
        self.fail_on: Event | None = fail_on

    def put(self, item: Occurrence, block: bool = True, timeout: float | None = None) -> None:
        if item.event is self.fail_on:
            self.fail_on = None
            raise RuntimeError(f"queue refused {item.event}")
        super().put(item, block, timeout)


def test_a_lid_handler_that_raises_trips_the_latch() -> None:
    t = Table(events=FailingSink(Event.LID_OPENED))
    try:
        t.sim.open_lid()  # the LID_OPENED event is lost: the table must not go on regardless
        fault = t.next_event()
        assert (fault.event, fault.fault) == (Event.FAULT, Fault.INTERNAL)
        assert "lid input handler failed" in fault.detail
        assert "queue refused" in fault.detail
        assert t.latch.is_tripped
        t.sim.close_lid()  # the input's thread lives on
        assert t.next_event().event is Event.LID_CLOSED
    finally:
        t.close()


class BrokenMotorPin(SimMotorPin):
    """A motor line whose writes fail while ``broken`` (a PWM driver gone)."""

    broken = False

    def _change_state(self, value: Any) -> bool:
        if self.broken:
            raise OSError("PWM driver not answering")
        return bool(super()._change_state(value))


def test_a_tamper_whose_motor_cut_fails_still_trips_the_latch() -> None:
    t = Table(motor_pin_class=BrokenMotorPin)
    pin = t.motor_pin
    assert isinstance(pin, BrokenMotorPin)
    try:
        pin.broken = True
        t.sim.remove()
        assert t.next_event().event is Event.TAMPER
        assert t.latch.is_tripped
        assert t.latch.reason is not None
        assert "shaker removed or tilted" in t.latch.reason
    finally:
        pin.broken = False
        t.close()


# --- motion edges delivered late (a pin library's callback thread running behind) -----------

# The shake of FAST, its motor limit twelve cycles long: the watchdog's check comes nine cycles
# after the pattern's end.
LATE = replace(FAST, motor_max_ms=600)
NEVER_S = 10 * WAIT  # a grace no test waits out: an event that comes came by proof, not by it


class HeldEdgePin(SimContactPin):
    """The motion sensor's line on a pin library whose callback thread runs behind: each edge
    is stamped when it happens (as the kernel stamps it) and queued, and one delivery thread
    hands the edges to the driver, in order, only once ``release`` is set."""

    def __init__(self, factory: Any, info: Any) -> None:
        self.release = threading.Event()
        self.delivered = threading.Semaphore(0)  # one per edge handed over
        self._held: queue.Queue[tuple[float, bool] | None] = queue.Queue()
        super().__init__(factory, info)
        self._thread = threading.Thread(target=self._deliver, name="held-edges", daemon=True)
        self._thread.start()

    def _call_when_changed(self) -> None:
        self._held.put((self._last_change, self._state))  # stamped now, delivered later

    def _deliver(self) -> None:
        while (edge := self._held.get()) is not None:
            self.release.wait()
            with self._when_changed_lock:  # the driver may be letting go of the pin
                if self._when_changed is not None:
                    PiPin._call_when_changed(self, *edge)  # gpiozero's own delivery, late
            self.delivered.release()

    def wait_delivered(self, edges: int) -> bool:
        return all(self.delivered.acquire(timeout=WAIT) for _ in range(edges))

    def close(self) -> None:
        self._held.put(None)
        self.release.set()
        super().close()


def pulse(pin: SimContactPin) -> None:
    """One pulse of the hall sensor that no stroke of the pattern made (the shaker knocked)."""
    pin.set_contact(True)
    pin.set_contact(False)


def held_table(faults: ShakerFaults = HEALTHY) -> tuple[Table, HeldEdgePin]:
    t = Table(faults, config=LATE, motion_pin_class=HeldEdgePin, motion_grace_s=NEVER_S)
    assert isinstance(t.motion_pin, HeldEdgePin)
    return t, t.motion_pin


def test_a_callback_thread_far_behind_still_gets_every_pulse_counted() -> None:
    """No edge reaches the driver until the watchdog's check at the motor limit, nine cycles
    after the pattern's end: the shake is reported then, with every pulse counted by its own
    timestamp, and the watchdog does not take the late pulses for a motor still turning."""
    t, pin = held_table()
    try:
        check = t.shaker._motor_deadline
        handed_over: list[bool] = []
        checked = threading.Event()

        def deliver_then_check(run: Any) -> None:
            pin.release.set()  # the callback thread catches up just before the check
            handed_over.append(pin.wait_delivered(6))
            check(run)
            checked.set()

        t.shaker._motor_deadline = deliver_then_check  # type: ignore[method-assign]
        t.shaker.start_shake()
        done = t.next_event()
        assert (done.event, done.cycles) == (Event.SHAKE_DONE, 3)
        assert pin.release.is_set()  # reported only once the held pulses were let go
        assert t.sim.pulses == 3
        assert checked.wait(WAIT)
        assert handed_over == [True]
        t.expect_quiet(within=0.3)  # the check found the motor still: no MOTOR_OVERRUN
        assert not t.latch.is_tripped
        assert not t.shaker.is_shaking
    finally:
        t.close()


def test_a_pulse_outside_the_shake_is_not_counted_however_late_it_comes() -> None:
    """Two strokes pulse (a sensor losing one); one pulse before the shake and one after its
    window are delivered with them, late. Only the two inside count, and the one after the
    window proves the count complete: SHAKE_DONE comes without the grace waited out."""
    t, pin = held_table(ShakerFaults(max_pulses=2))
    try:
        closed = threading.Event()
        end = t.shaker._end

        def spied_end(run: Any, *, completed: bool = False) -> None:
            end(run, completed=completed)
            if completed:
                closed.set()  # the pattern has closed the shake's motion window

        t.shaker._end = spied_end  # type: ignore[method-assign]
        pulse(pin)  # before the shake
        t.shaker.start_shake()
        assert closed.wait(WAIT)
        pulse(pin)  # after the window
        t.expect_quiet(within=0.1)  # nothing delivered yet: nothing reported
        assert t.shaker.is_shaking  # the shake is not over until its count is
        pin.release.set()
        done = t.next_event()
        assert (done.event, done.cycles) == (Event.SHAKE_DONE, 2)
        assert t.sim.pulses == 2
    finally:
        t.close()


def test_a_callback_thread_later_than_the_grace_makes_the_count_short_never_long(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The edges stay held past the grace: the shake is reported with what arrived (none, a no
    roll for the core), the late pulses are logged, and they count for no later shake."""
    t = Table(config=LATE, motion_pin_class=HeldEdgePin, motion_grace_s=0.05)
    pin = t.motion_pin
    assert isinstance(pin, HeldEdgePin)
    try:
        t.shaker.start_shake()
        done = t.next_event()
        assert (done.event, done.cycles) == (Event.SHAKE_DONE, 0)
        assert not t.shaker.is_shaking
        # The next shake begins before the first one's pulses arrive; it waits for its own.
        t.shaker._motion_grace_s = NEVER_S
        t.shaker.start_shake()
        assert t.shake_ends.acquire(timeout=WAIT)
        assert t.shake_ends.acquire(timeout=WAIT)  # the second pattern's strokes all made
        with caplog.at_level("WARNING", logger="drivers.shaker"):
            pin.release.set()  # the first shake's pulses, then the second's
            second = t.next_event()
            assert pin.wait_delivered(12)
        assert (second.event, second.cycles) == (Event.SHAKE_DONE, 3)  # its own three only
        late = [r.getMessage() for r in caplog.records if "after its report" in r.getMessage()]
        assert late == ["shake 1: a motion pulse delivered after its report, not counted"] * 3
    finally:
        t.close()


def test_a_motion_handler_that_raises_trips_the_latch_not_the_pin_thread() -> None:
    t = Table()
    try:
        motion = t.shaker._motion
        assert motion is not None

        def failing(ticks: Any) -> None:
            raise ValueError("tick arithmetic failed")

        motion._when_pulse = failing
        pulse(t.motion_pin)  # the thread that delivered the edge goes on
        fault = t.next_event()
        assert (fault.event, fault.fault) == (Event.FAULT, Fault.INTERNAL)
        assert "motion input handler failed" in fault.detail
        assert "tick arithmetic failed" in fault.detail
        assert t.latch.is_tripped
    finally:
        t.close()


WRAP = 2**32  # pigpio's ticks: microseconds in 32 bits, wrapping every 71.6 minutes


class WrappingTicksFactory(MockFactory):
    """A factory whose ticks wrap as pigpio's do, compared by a ``ticks_diff`` that is never
    negative (gpiozero's contract for a wrapping clock)."""

    @staticmethod
    def ticks_diff(later: int, earlier: int) -> float:
        return ((later - earlier) % WRAP) / 1e6


def test_the_motion_window_holds_across_a_wrapping_tick_counter() -> None:
    """A window across the wrap holds what is inside it; an edge stamped just before the
    window is before it, not 71 minutes after it (which would close the count too early)."""
    factory = WrappingTicksFactory(pin_class=MockPWMPin)
    shaker = build_shaker(PINS, CONFIG, queue.Queue(), pin_factory=factory)
    try:
        run = _ShakeRun(1, 0, start_tick=WRAP - 1000)  # 1 ms before the wrap
        assert shaker._place(run, WRAP - 2000) == "before"
        assert shaker._place(run, 10) == "inside"  # the window still open
        run.end_tick = 500_000  # closed 0.5 s after the wrap
        assert [shaker._place(run, t) for t in (WRAP - 2000, WRAP - 10, 10, 500_000)] == [
            "before",
            "inside",
            "inside",
            "inside",
        ]
        assert shaker._place(run, 500_001) == "after"
    finally:
        shaker.close()
        factory.close()


def test_the_wait_for_late_pulses_ends_before_the_cores_backstop() -> None:
    """The pattern ends by the motor's limit and waits at most MOTION_GRACE_S more: SHAKE_DONE
    is sent before the core, MOTOR_GRACE_MS after that limit, takes the shake for hung."""
    assert MOTION_GRACE_S * 1000 < MOTOR_GRACE_MS


# Shakes of 3 cycles of 10 ms; the watchdog's check at 1 s finds the pumped edges still coming.
RACE = ShakerConfig(motor_max_ms=1000, shake_ms=30, cycle_ms=10, amplitude=0.8, debounce_ms=1)
RACE_ROUNDS = 60


def test_edges_from_a_callback_thread_race_the_end_of_every_shake(
    thread_errors: list[str],
) -> None:
    """A thread pours motion edges in (as lgpio's callback thread would, at any moment) while
    shakes end by themselves, are stopped or are cut by a trip, and the watchdog trips the
    latch for the motion it sees: every shake ends within its bound, no handler fails, no
    thread raises, and the motor is off at the end."""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    t = Table(config=RACE, motion_grace_s=0.02)
    pumping = threading.Event()
    pumping.set()
    seen: list[Occurrence] = []
    failures: list[str] = []

    def pump() -> None:
        while pumping.is_set():
            pulse(t.motion_pin)

    def play() -> None:
        for _ in range(RACE_ROUNDS):
            t.latch.reset()
            try:
                t.shaker.start_shake()
            except ShakerError:
                continue  # latched again already (the watchdog saw the pumped motion)
            action = rng.choice(("done", "stop", "trip"))
            time.sleep(rng.random() * 0.04)  # places the cut anywhere in the shake or after it
            if action == "stop":
                t.shaker.stop()
            elif action == "trip":
                t.latch.trip("race")
            deadline = time.monotonic() + WAIT
            while t.shaker.is_shaking:
                if time.monotonic() > deadline:
                    failures.append(f"a shake did not end ({action})")
                    return
                with contextlib.suppress(queue.Empty):
                    seen.append(t.events.get(timeout=0.01))

    pumper = threading.Thread(target=pump, name="edge-pump", daemon=True)
    player = threading.Thread(target=play, name="control", daemon=True)
    pumper.start()
    player.start()
    player.join(10 * WAIT)  # the rounds take a few seconds; a deadlock, for ever
    pumping.clear()
    pumper.join(WAIT)
    if player.is_alive() or pumper.is_alive() or failures:
        pytest.fail(f"deadlock: {failures or 'a thread hung'}")  # (threads leak, unclosed)
    t.close()
    while not t.events.empty():
        seen.append(t.events.get_nowait())
    failed = [o for o in seen if o.event is Event.FAULT]
    assert failed == [], f"a handler failed: {failed[0]}"
    assert any(o.event is Event.SHAKE_DONE for o in seen)
    assert t.motor_pin.state == 0.0
