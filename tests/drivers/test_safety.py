"""The fault latch: every output safe, once, whatever one handler does."""

from __future__ import annotations

import logging
import queue
import signal
import sys
import threading
import traceback
from collections.abc import Callable

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.core.config import Config, PinsConfig, ShakerConfig
from controller.core.state import Event, Occurrence, Screen
from drivers.safety import FaultLatch
from drivers.sim.hardware import SimPanel, SimShaker
from drivers.table_io import build_panel, build_shaker, build_table_io

WAIT = 3.0


def counter(calls: list[str], name: str) -> Callable[[], None]:
    return lambda: calls.append(name)


def test_trip_drives_every_output_once() -> None:
    latch = FaultLatch()
    calls: list[str] = []
    for name in ("motor", "lamp", "buzzer"):
        latch.register(name, counter(calls, name))
    assert not latch.is_tripped
    assert latch.trip("tamper") is True
    assert latch.trip("motor overrun") is False
    assert calls == ["motor", "lamp", "buzzer"]
    assert latch.reason == "tamper"
    assert latch.wait_for_trip(0)


def test_one_raising_handler_does_not_stop_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    latch = FaultLatch()
    calls: list[str] = []

    def broken() -> None:
        calls.append("broken")
        raise OSError("GPIO write failed")

    latch.register("first", counter(calls, "first"))
    latch.register("broken", broken)
    latch.register("last", counter(calls, "last"))
    with caplog.at_level(logging.ERROR, logger="drivers.safety"):
        assert latch.trip("sensor")
    assert calls == ["first", "broken", "last"]
    assert "output broken could not be driven to its safe value" in caplog.text
    assert "GPIO write failed" in caplog.text


def test_concurrent_trips_drive_each_output_once() -> None:
    latch = FaultLatch()
    calls: list[str] = []
    entered = threading.Event()
    go_on = threading.Event()

    def slow() -> None:
        calls.append("slow")
        entered.set()
        go_on.wait(WAIT)

    latch.register("slow", slow)
    latch.register("fast", counter(calls, "fast"))
    results: list[bool] = []
    first = threading.Thread(target=lambda: results.append(latch.trip("watchdog")))
    first.start()
    assert entered.wait(WAIT)
    others = [
        threading.Thread(target=lambda: results.append(latch.trip("tamper"))) for _ in range(8)
    ]
    for t in others:
        t.start()
    go_on.set()
    for t in [first, *others]:
        t.join(WAIT)
    assert sorted(results) == [False] * 8 + [True]
    assert calls == ["slow", "fast"]
    assert latch.reason == "watchdog"


def test_a_handler_may_trip_again_without_deadlock() -> None:
    latch = FaultLatch()
    calls: list[str] = []
    latch.register("reentrant", lambda: calls.append(str(latch.trip("again"))))
    assert latch.trip("first")
    assert calls == ["False"]


def test_register_while_tripped_drives_safe_at_once_and_reset_rearms() -> None:
    latch = FaultLatch()
    calls: list[str] = []
    latch.trip("storage")
    latch.register("late", counter(calls, "late"))
    assert calls == ["late"]
    latch.reset()
    assert not latch.is_tripped
    assert latch.reason is None
    assert latch.trip("tamper")
    assert calls == ["late", "late"]


def test_register_twice_is_refused_and_unregister_forgets() -> None:
    latch = FaultLatch()
    calls: list[str] = []
    latch.register("motor", counter(calls, "motor"))
    with pytest.raises(ValueError, match="motor"):
        latch.register("motor", counter(calls, "other"))
    latch.unregister("motor")
    latch.unregister("motor")
    latch.trip("x")
    assert calls == []
    assert latch.outputs == ()


def test_drive_all_safe_does_not_latch() -> None:
    latch = FaultLatch()
    calls: list[str] = []
    latch.register("motor", counter(calls, "motor"))
    latch.drive_all_safe()
    latch.drive_all_safe()
    assert calls == ["motor", "motor"]
    assert not latch.is_tripped


def test_the_table_latch_drives_every_real_output_safe_even_past_a_failure() -> None:
    """The motor, the shake lamp and the status lamp, on mock pins, with a broken output first."""
    config = Config(
        shaker=ShakerConfig(
            motor_max_ms=2000, shake_ms=1200, amplitude=0.8, cycle_ms=400, debounce_ms=20
        ),
        pins=PinsConfig(),
    )
    factory = MockFactory(pin_class=MockPWMPin)
    sim_shaker = SimShaker(factory, config.pins, config.shaker)
    sim_panel = SimPanel(factory, config.pins)
    events: queue.Queue[Occurrence] = queue.Queue()
    table = build_table_io(config, events, pin_factory=factory)
    try:
        assert table.shaker is not None
        table.latch.unregister("shaker.motor")
        table.latch.unregister("panel.lamps")

        def broken() -> None:
            raise OSError("relay board not answering")

        table.latch.register("relay board", broken)  # first in line, and it fails
        table.latch.register("shaker.motor", table.shaker.drive_safe)
        table.latch.register("panel.lamps", table.panel.drive_safe)

        table.panel.show_status(Screen.BETS_CLOSED)
        table.shaker.start_shake()
        assert sim_shaker.wait_for_motor(running=True, timeout=WAIT)
        motor = sim_shaker.motor_pin
        shake_lamp = sim_panel.lamp_pin("shake_button_lamp")
        red, blue = sim_panel.lamp_pin("lamp_red"), sim_panel.lamp_pin("lamp_blue")
        for pin in (motor, shake_lamp, red, blue):
            pin.clear_states()

        assert table.latch.trip("test fault")

        motor.assert_states([0.8, 0.0])
        shake_lamp.assert_states([True, False])
        red.assert_states([False, True])
        blue.assert_states([True, False])
        assert [len(p.states) for p in (motor, shake_lamp, red, blue)] == [2, 2, 2, 2]
        assert sim_panel.status_colour == (1, 0, 0)
        assert not sim_panel.is_shake_lamp_on
        assert sim_shaker.motor_value == 0.0
        try:
            occ = events.get(timeout=1.5)
        except queue.Empty:
            occ = None
        assert occ is None, "a shake stopped by the latch reports no SHAKE_DONE"
    finally:
        table.close()
        table.close()
        sim_shaker.close()
        factory.close()
    assert motor.state == 0.0


def test_an_rng_table_has_no_shaker() -> None:
    from controller.core.config import TableConfig
    from controller.core.state import Mode

    factory = MockFactory(pin_class=MockPWMPin)
    sim_panel = SimPanel(factory, PinsConfig())
    events: queue.Queue[Occurrence] = queue.Queue()
    with build_table_io(
        Config(table=TableConfig(mode=Mode.RNG)), events, pin_factory=factory
    ) as table:
        assert table.shaker is None
        assert table.latch.outputs == ("panel.lamps",)
        table.panel.show_status(Screen.BETS_CLOSED)
        assert not sim_panel.is_shake_lamp_on
    factory.close()


def test_handlers_run_outside_the_latch_lock() -> None:
    """While a handler drives its output, any other thread may use the latch: the latch holds
    no lock while it calls out, so a handler may wait on a thread that does."""
    latch = FaultLatch()
    served = threading.Event()
    seen: list[object] = []

    def other_thread() -> None:
        seen.append(latch.reason)
        latch.register("late", lambda: seen.append("late driven"))
        latch.unregister("late")
        seen.append(latch.outputs)
        served.set()

    def handler() -> None:
        threading.Thread(target=other_thread).start()
        seen.append(served.wait(WAIT))

    latch.register("motor", handler)
    assert latch.trip("first")
    assert seen == ["first", "late driven", ("motor",), True]


def test_a_trip_on_the_main_thread_never_waits_for_another_threads_drive() -> None:
    """Signal handlers run on the main thread, perhaps inside a lock a running handler needs:
    a trip there drives the outputs itself rather than wait for the trip in progress."""
    latch = FaultLatch()
    calls: list[str] = []
    entered = threading.Event()
    go_on = threading.Event()
    finished = threading.Event()

    def slow() -> None:
        calls.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            entered.set()
            go_on.wait(WAIT)
            finished.set()

    latch.register("slow", slow)
    latch.register("fast", counter(calls, "fast"))
    watchdog = threading.Thread(target=latch.trip, args=("watchdog",), name="watchdog", daemon=True)
    watchdog.start()
    try:
        assert entered.wait(WAIT)
        assert latch.trip("shutdown: SIGTERM") is False
        assert not finished.is_set(), "the main thread waited for the other thread's drive"
        assert calls == ["watchdog", "MainThread", "fast"]
    finally:
        go_on.set()
        watchdog.join(WAIT)
    assert calls == ["watchdog", "MainThread", "fast", "fast"]
    assert latch.reason == "watchdog"


def test_wait_for_trip_and_reset_rearm() -> None:
    latch = FaultLatch()
    assert not latch.wait_for_trip(0)
    waiter = threading.Thread(target=lambda: seen.append(latch.wait_for_trip(WAIT)))
    seen: list[bool] = []
    waiter.start()
    latch.trip("tamper")
    waiter.join(WAIT)
    assert seen == [True]
    latch.reset()
    assert not latch.wait_for_trip(0.01)
    assert latch.trip("again")
    assert latch.wait_for_trip(0)


class SignalRaisingSink(queue.Queue[Occurrence]):
    """Raises SIGUSR1 on this thread when the lid's event is put: the handler runs right then,
    while the shaker's lid handler holds the shaker's locks (as SIGTERM may, at any bytecode)."""

    def __init__(self, before_signal: Callable[[], None]) -> None:
        super().__init__()
        self._before_signal = before_signal
        self.armed = True

    def put(self, item: Occurrence, block: bool = True, timeout: float | None = None) -> None:
        if self.armed and item.event is Event.LID_OPENED:
            self.armed = False
            self._before_signal()
            signal.raise_signal(signal.SIGUSR1)
        super().put(item, block, timeout)


class Stuck(BaseException):
    """Raised in the main thread by the deadlock alarm (not an Exception: no guard eats it)."""


def test_sigterm_trips_the_latch_inside_a_driver_lock_while_another_trip_runs() -> None:
    """The control (main) thread is inside the shaker's lid handler, holding its locks; the
    watchdog's trip is driving the outputs on another thread; SIGTERM arrives. The handler's
    trip completes, every output ends safe, and neither thread deadlocks."""
    config = Config(pins=PinsConfig())
    factory = MockFactory(pin_class=MockPWMPin)
    sim_shaker = SimShaker(factory, config.pins, config.shaker)
    sim_panel = SimPanel(factory, config.pins)
    latch = FaultLatch()
    entered = threading.Event()
    go_on = threading.Event()

    def first_output() -> None:  # registered first: the watchdog's trip waits here
        if threading.current_thread() is not threading.main_thread():
            entered.set()
            go_on.wait(WAIT)

    latch.register("relay board", first_output)
    events = SignalRaisingSink(before_signal=go_on.set)
    shaker = build_shaker(config.pins, config.shaker, events, latch=latch, pin_factory=factory)
    panel = build_panel(config.pins, config.shaker, events, latch=latch, pin_factory=factory)
    panel.show_status(Screen.BETS_CLOSED)
    handled: list[bool] = []
    returned = threading.Event()
    main = threading.main_thread().ident
    assert main == threading.get_ident()

    def on_sigterm(signum: int, frame: object) -> None:
        handled.append(latch.trip("shutdown: SIGTERM"))
        returned.set()

    def alarm() -> None:
        if not returned.wait(WAIT) and main is not None:
            signal.pthread_kill(main, signal.SIGUSR2)

    def on_alarm(signum: int, frame: object) -> None:
        raise Stuck(f"the SIGTERM handler's trip did not return\n{all_stacks()}")

    previous = signal.signal(signal.SIGUSR1, on_sigterm), signal.signal(signal.SIGUSR2, on_alarm)
    watchdog = threading.Thread(
        target=latch.trip, args=("motor overrun",), name="watchdog", daemon=True
    )
    try:
        watchdog.start()
        assert entered.wait(WAIT)
        threading.Thread(target=alarm, daemon=True).start()
        try:
            sim_shaker.open_lid()  # on this thread: the lid handler runs here, under its locks
        except Stuck as stuck:
            pytest.fail(f"deadlock: {stuck}")
        watchdog.join(WAIT)
        assert not watchdog.is_alive(), "the watchdog's trip deadlocked"
        assert handled == [False]  # the watchdog's trip latched the fault first
        assert latch.reason == "motor overrun"
        assert sim_shaker.motor_value == 0.0
        assert sim_panel.status_colour == (1, 0, 0)
        assert not sim_panel.is_shake_lamp_on
    finally:
        signal.signal(signal.SIGUSR1, previous[0])
        signal.signal(signal.SIGUSR2, previous[1])
        go_on.set()
        if not watchdog.is_alive():
            panel.close()
            shaker.close()
            sim_shaker.close()
            factory.close()


def all_stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame))}"
        for ident, frame in sys._current_frames().items()
    )


class RaisingHandler(logging.Handler):
    """A log stream that fails, as a signal handler's write to a stream its own thread was in
    the middle of writing does (``RuntimeError: reentrant call``)."""

    def handle(self, record: logging.LogRecord) -> bool:
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")


def test_a_log_that_fails_does_not_stop_a_trip() -> None:
    latch = FaultLatch()
    calls: list[str] = []

    def broken() -> None:
        raise OSError("relay board not answering")  # its log line fails too

    latch.register("motor", counter(calls, "motor"))
    latch.register("broken", broken)
    latch.register("lamp", counter(calls, "lamp"))
    logger = logging.getLogger("drivers.safety")
    handler = RaisingHandler()
    logger.addHandler(handler)
    try:
        assert latch.trip("shutdown: SIGTERM") is True
        assert calls == ["motor", "lamp"]
        assert latch.trip("again") is False
        latch.reset()
        assert not latch.is_tripped
    finally:
        logger.removeHandler(handler)
