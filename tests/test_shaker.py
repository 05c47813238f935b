"""The shaker driver on gpiozero mock pins, with the simulated shaker mechanics behind them."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.config import PinsConfig, ShakerConfig
from controller.errors import ConfigError, ShakerError
from controller.state import Event, Fault, Occurrence
from drivers.safety import FaultLatch
from drivers.shaker import GpioShaker
from drivers.sim_hardware import ShakerFaults, SimShaker
from drivers.table_io import build_shaker

PINS = PinsConfig()
# 3 cycles of 200 ms (100 ms on at 0.8, 100 ms off); the driver cuts the motor at 1 s.
CONFIG = ShakerConfig(motor_max_ms=1000, shake_ms=600, amplitude=0.8, cycle_ms=200, debounce_ms=20)
HEALTHY = ShakerFaults()
WAIT = 3.0  # seconds: the longest any test waits for an event that must come


class Table:
    """A mock pin factory with the simulated shaker on it and the driver built on top."""

    def __init__(self, faults: ShakerFaults = HEALTHY, config: ShakerConfig = CONFIG):
        self.factory = MockFactory(pin_class=MockPWMPin)
        self.events: queue.Queue[Occurrence] = queue.Queue()
        self.latch = FaultLatch()
        self.shake_ends = threading.Semaphore(0)
        self.sim = SimShaker(
            self.factory, PINS, config, faults=faults, on_shake_end=self.shake_ends.release
        )
        self.shaker = build_shaker(
            PINS, config, self.events, latch=self.latch, pin_factory=self.factory
        )
        self.motor_pin = self.sim.motor_pin

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
    """gpiozero's assertion zips the lists: check the length too, or a short history passes."""
    assert [s.state for s in pin.states] == [v for _, v in expected]
    try:
        pin.assert_states_and_times(expected)
    except AssertionError:
        pytest.fail(f"expected {expected}, got {pin.states}")


def test_a_normal_shake_counts_every_cycle(table: Table) -> None:
    table.motor_pin.clear_states()
    table.shaker.start_shake()
    assert table.shaker.is_shaking
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
        # Cut within the first on-half: at the first pulse (50 ms stroke + 5 ms pulse).
        assert_history(t.motor_pin, [(0.0, 0.0), (0.0, 0.8), (0.055, 0.0)])
        assert t.motor_pin.states[-1].timestamp < 0.1
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
