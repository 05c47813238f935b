"""The drivers' threads raced against each other, and the latch tripped at every bytecode.

Two kinds of test live here:

* **Interrupted at every bytecode.** The appliance trips the fault latch from a SIGTERM handler,
  which Python runs on the control thread between any two bytecodes of whatever that thread is
  doing. ``interrupted_at`` runs a driver call under ``sys.settrace`` and trips the latch before
  its k-th bytecode, for every k, on the same thread, inside whatever locks the call holds then.
  Every such trip must complete and leave the outputs safe for good.
* **Stress.** ``trip``, ``start_shake``, the watchdog firing and ``close`` raced with real threads
  (gpiozero mock pins, motor limits of a few milliseconds so the watchdog really fires), at least
  ``ITERATIONS`` times per kind of race, each round under a timeout: a deadlock fails the test
  with every thread's stack, it never hangs it. The invariant, checked every round: after a
  trip returns the motor is off and stays off until ``reset``, and no thread raises.

The stress rounds run in two worker processes (one per core; the GIL would otherwise put every
thread on one), each this file run as a script; ``RACE_SEED`` replays a seed and
``RACE_ITERATIONS`` changes the count (5,000 per kind in ``make test``; a soak before a release
runs more, e.g. ``RACE_ITERATIONS=100000``). A round of ``close`` cannot reuse its shaker: each
builds one (gpiozero's devices) and starts its two threads, about 1.5 ms of CPU, so the rounds of
that kind take the longest (see the durations pytest prints).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import random
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.core.config import PinsConfig, ShakerConfig
from controller.core.state import Event, Occurrence, Screen
from controller.errors import ShakerError
from drivers.panel import GpioPanel
from drivers.safety import FaultLatch
from drivers.shaker import GpioShaker
from drivers.sim.hardware import SimContactPin
from drivers.table_io import build_panel

PINS = PinsConfig()
ITERATIONS = int(os.environ.get("RACE_ITERATIONS", "5000"))  # per kind of race, in total
WORKERS = 2
JOIN_S = 30.0  # a round not finished in this long is a deadlock (a loaded machine is slow)
SLOW = ShakerConfig(motor_max_ms=400, shake_ms=150, cycle_ms=50, amplitude=0.8, debounce_ms=5)
# 3 cycles of 1 ms (on for 0 ms: on, then off at once) and the watchdog at 4 ms.
FAST = ShakerConfig(motor_max_ms=4, shake_ms=3, cycle_ms=1, amplitude=0.8, debounce_ms=1)
# A stuck pattern's shake, ended only by the stop or trip under test: its motor limit outlasts
# the test, so that a pattern thread starved past 400 ms on a loaded machine is not cut by its own
# overrun check before it ever turns the motor on (the watchdog is raced in the stress tests).
STUCK = ShakerConfig(
    motor_max_ms=int(8 * JOIN_S * 1000), shake_ms=150, cycle_ms=50, amplitude=0.8, debounce_ms=5
)
SAFE_LAMPS = (0, 1, 0, 0)  # shake lamp off, status red


class Deadlock(BaseException):
    """A round did not finish in time (a BaseException: no driver's guard may swallow it)."""


def thread_stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame))}"
        for ident, frame in sys._current_frames().items()
    )


def join_all(threads: list[threading.Thread], what: str) -> None:
    """Join every thread in ``threads`` within ``JOIN_S``, those added while joining too. A
    pattern thread adds itself when it first runs, which on a loaded machine can come after the
    shake that started it has returned and after a pass over the list: such a thread is joined
    in the next pass, where it used to be reported stuck at once, long before ``JOIN_S``."""
    deadline = time.monotonic() + JOIN_S
    while True:
        for t in list(threads):
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in threads if t.is_alive()]
        if not stuck:
            return
        if time.monotonic() >= deadline:
            raise Deadlock(f"{what}: {stuck} still running after {JOIN_S} s\n{thread_stacks()}")


@contextmanager
def thread_errors() -> Iterator[list[str]]:
    """Every exception that escapes any thread while inside, as text."""
    errors: list[str] = []
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else "?"
        detail = "".join(traceback.format_exception(args.exc_value))
        errors.append(f"{name}: {detail}")

    threading.excepthook = hook
    try:
        yield errors
    finally:
        threading.excepthook = previous


def contacts_closed(factory: Any) -> None:
    """The lid closed and the shaker secured, as contacts to ground (no simulator needed)."""
    for pin in (PINS.lid_switch, PINS.tamper_switch):
        factory.pin(pin, pin_class=SimContactPin).set_contact(True)


def lamps(factory: Any) -> tuple[int, int, int, int]:
    """The shake lamp and the status lamp's red, green and blue, as 0 or 1."""
    shake, red, green, blue = (
        int(bool(factory.pin(pin).state))
        for pin in (PINS.shake_button_lamp, PINS.lamp_red, PINS.lamp_green, PINS.lamp_blue)
    )
    return shake, red, green, blue


@pytest.fixture(autouse=True)
def no_thread_raises() -> Iterator[None]:
    """Every test here fails if an exception escapes any thread (a pattern, the watchdog...)."""
    with thread_errors() as errors:
        yield
    assert errors == []


class PatternThreads:
    """A shaker class whose pattern threads are kept (to be joined after each round). With
    ``stuck`` the pattern energises the motor and then hangs (a hung or starved thread) until
    ``unstick`` is set: only the watchdog, a trip or a stop ends the shake."""

    def __init__(self, *, stuck: bool) -> None:
        self.threads: list[threading.Thread] = []
        self.unstick = threading.Event()
        threads, unstick = self.threads, self.unstick

        class Recorded(GpioShaker):
            def _run_pattern(self, run: Any) -> None:
                threads.append(threading.current_thread())
                if not stuck:
                    super()._run_pattern(run)
                elif self._drive(run, self.pattern.amplitude):
                    unstick.wait(JOIN_S)

        self.shaker_class: type[GpioShaker] = Recorded

    def join(self) -> None:
        """The hung patterns let go (the shake is over by now), every pattern thread joined, so
        that a late motor write would show."""
        self.unstick.set()
        join_all(self.threads, "pattern thread")
        self.threads.clear()
        self.unstick.clear()


# --- interrupted at every bytecode ----------------------------------------------------------


def interrupted_at(call: Callable[[], object], at: int, interrupt: Callable[[], None]) -> bool:
    """Run ``call`` on this thread and run ``interrupt`` before its ``at``-th bytecode (counted
    over every frame it enters), as a signal handler would be; ``False`` if it had fewer."""
    count = 0
    fired = False

    def on_opcode(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count, fired
        if event == "opcode":
            if count == at:
                fired = True
                interrupt()  # tracing is off inside the trace function: not traced itself
            count += 1
        return on_opcode

    def on_call(frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        return on_opcode

    sys.settrace(on_call)
    try:
        call()
    except ShakerError:
        pass  # start_shake refused: latched
    finally:
        sys.settrace(None)
    return fired


def every_bytecode(
    setup: Callable[[], None],
    call: Callable[[], object],
    interrupt: Callable[[], None],
    check: Callable[[int], None],
) -> int:
    """``call`` interrupted before each of its bytecodes in turn, on a worker thread (so that a
    deadlock fails, not hangs), ``check`` after each; returns how many bytecodes it had."""
    failure: list[BaseException] = []
    points = [0]

    def run() -> None:
        try:
            at = 0
            while True:
                setup()
                if not interrupted_at(call, at, interrupt):
                    break
                check(at)
                at += 1
            points[0] = at
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=run, name="control", daemon=True)
    worker.start()
    worker.join(4 * JOIN_S)
    if worker.is_alive():
        pytest.fail(f"deadlock: a trip from inside the call did not complete\n{thread_stacks()}")
    if failure:
        raise failure[0]
    assert points[0] > 20
    return points[0]


class MotorPin(MockPWMPin):  # type: ignore[misc]  # gpiozero is untyped
    """The motor's PWM pin; ``running`` is set when it turns on (waited for, never polled).

    Only the pattern thread turns the motor on, never the interrupted control thread: the pin
    touches no ``threading.Event`` when it is turned off, where a re-entered write could find
    the event's lock taken by its own thread."""

    def __init__(self, factory: Any, info: Any) -> None:
        self.running = threading.Event()
        super().__init__(factory, info)

    def _change_state(self, value: Any) -> bool:
        changed = bool(super()._change_state(value))
        if value:
            self.running.set()
        return changed


def motor_pin(factory: Any) -> MotorPin:
    pin: MotorPin = factory.pin(PINS.motor, pin_class=MotorPin)
    return pin


class Bench:
    """A shaker and a panel on one latch, on mock pins, for the bytecode tests."""

    def __init__(self, *, stuck: bool = False) -> None:
        self.factory = MockFactory(pin_class=MockPWMPin)
        self.events: queue.Queue[Occurrence] = queue.Queue()
        self.latch = FaultLatch()
        contacts_closed(self.factory)
        self.motor = motor_pin(self.factory)
        self.patterns = PatternThreads(stuck=stuck)
        self.shaker = self.patterns.shaker_class(
            self.events,
            motor_pin=PINS.motor,
            lid_pin=PINS.lid_switch,
            motion_pin=PINS.motion_sensor,
            tamper_pin=PINS.tamper_switch,
            config=STUCK if stuck else SLOW,
            pin_factory=self.factory,
            latch=self.latch,
        )
        self.panel: GpioPanel = build_panel(
            PINS, SLOW, self.events, latch=self.latch, pin_factory=self.factory
        )
        self.after_trip: int | None = None  # the motor's history length when the trip returned
        self.trips: list[bool] = []
        self.violations: list[str] = []

    def trip(self, reason: str = "shutdown: SIGTERM") -> None:
        """What the SIGTERM handler does; the motor must be off when it returns. (Recorded, not
        raised: an exception here would surface inside the driver code it interrupted.)"""
        self.trips.append(self.latch.trip(reason))
        self.after_trip = len(self.motor.states)
        if self.motor.state != 0:
            self.violations.append(f"the motor is at {self.motor.state} after a trip returned")

    def settle(self) -> None:
        self.patterns.join()

    def assert_motor_stayed_off(self) -> None:
        assert self.violations == []
        assert self.after_trip is not None, "the trip did not run"
        later = [s.state for s in self.motor.states[self.after_trip :]]
        assert later == [0.0] * len(later), f"motor written {later} after the trip returned"

    def rearm(self) -> None:
        self.settle()
        self.latch.reset()
        self.shaker.stop()
        self.motor.clear_states()
        self.after_trip = None
        self.trips.clear()
        while not self.events.empty():
            self.events.get_nowait()

    def close(self) -> None:
        """Close everything, unless a deadlocked thread holds the drivers' locks: then the
        devices are left (the test has failed already), so that the run does not hang."""
        if any(t.name == "control" for t in threading.enumerate()):
            return
        self.settle()
        self.panel.close()
        self.shaker.close()
        self.factory.close()


@pytest.fixture
def bench() -> Iterator[Bench]:
    b = Bench()
    yield b
    b.close()


def test_a_trip_at_any_bytecode_of_start_shake_keeps_the_motor_off(bench: Bench) -> None:
    def check(at: int) -> None:
        bench.settle()
        assert bench.latch.is_tripped
        bench.assert_motor_stayed_off()

    points = every_bytecode(bench.rearm, bench.shaker.start_shake, bench.trip, check)
    print(f"start_shake interrupted at each of its {points} bytecodes")


@pytest.mark.parametrize("method", ["stop", "drive_safe"])
def test_a_trip_at_any_bytecode_of_stopping_a_shake_keeps_the_motor_off(method: str) -> None:
    bench = Bench(stuck=True)
    try:
        check_stopping(bench, method)
    finally:
        bench.close()


def check_stopping(bench: Bench, method: str) -> None:
    def setup() -> None:
        bench.rearm()
        bench.motor.running.clear()
        bench.shaker.start_shake()
        assert bench.motor.running.wait(JOIN_S)  # on until the shake is ended

    def check(at: int) -> None:
        bench.settle()
        bench.assert_motor_stayed_off()

    points = every_bytecode(setup, getattr(bench.shaker, method), bench.trip, check)
    print(f"{method} interrupted at each of its {points} bytecodes")


def test_a_trip_at_any_bytecode_of_show_status_leaves_the_lamps_safe(bench: Bench) -> None:
    def setup() -> None:
        bench.rearm()
        bench.panel.show_status(Screen.READY)

    def check(at: int) -> None:
        assert bench.violations == []
        assert bench.latch.is_tripped
        assert lamps(bench.factory) == SAFE_LAMPS, f"lamps not safe (trip at bytecode {at})"

    points = every_bytecode(
        setup, lambda: bench.panel.show_status(Screen.BETS_CLOSED), bench.trip, check
    )
    print(f"show_status interrupted at each of its {points} bytecodes")


def test_a_trip_at_any_bytecode_of_a_trip_latches_once(bench: Bench) -> None:
    outer: list[bool] = []

    def call() -> None:
        outer.append(bench.latch.trip("watchdog"))

    def check(at: int) -> None:
        assert sorted([*outer, *bench.trips]) == [False, True], f"trip at bytecode {at}"
        assert bench.latch.reason in ("watchdog", "shutdown: SIGTERM")
        assert lamps(bench.factory) == SAFE_LAMPS
        outer.clear()

    def setup() -> None:
        bench.rearm()
        outer.clear()

    points = every_bytecode(setup, call, bench.trip, check)
    print(f"trip interrupted at each of its {points} bytecodes")


def test_a_trip_at_any_bytecode_of_reset_is_never_lost(bench: Bench) -> None:
    """A trip that says it latched the fault has: the reset it interrupted does not undo it."""

    def setup() -> None:
        bench.rearm()
        bench.latch.trip("sensor fault")

    def check(at: int) -> None:
        [latched] = bench.trips
        assert bench.latch.is_tripped is latched, f"trip at bytecode {at} of reset"
        if latched:
            assert bench.latch.reason == "shutdown: SIGTERM"

    points = every_bytecode(setup, bench.latch.reset, bench.trip, check)
    print(f"reset interrupted at each of its {points} bytecodes")


# --- stress: real threads raced, every round under a timeout ------------------------------------

SPIN = 200  # the most busy-loop turns a racer waits before it acts (a few microseconds)
LANES = 16  # tables raced side by side where a round must wait for the watchdog


def spin(turns: int) -> None:
    for _ in range(turns):
        pass


def jitter(seconds: float) -> None:
    """Lets the racers go near the watchdog's deadline: a delay that places them there, not a
    wait for something to happen."""
    time.sleep(seconds)


class Racers:
    """Threads that each run one action per round, released together. A round that has not
    finished within ``JOIN_S`` is a deadlock: it raises, it never hangs."""

    def __init__(self, count: int, name: str) -> None:
        self._go = [threading.Lock() for _ in range(count)]
        self._done = [threading.Lock() for _ in range(count)]
        for lock in (*self._go, *self._done):
            lock.acquire()
        self._actions: list[Callable[[], None]] = [lambda: None] * count
        self._stopping = False
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._serve, args=(i,), name=f"{name}-{i}", daemon=True)
            for i in range(count)
        ]
        for t in self._threads:
            t.start()

    def _serve(self, i: int) -> None:
        while True:
            self._go[i].acquire()
            if self._stopping:
                return
            try:
                self._actions[i]()
            except BaseException:  # recorded: an exception must not escape a racer unseen
                self.errors.append(f"{threading.current_thread().name}: {traceback.format_exc()}")
            finally:
                self._done[i].release()

    def round(self, *actions: Callable[[], None]) -> None:
        assert len(actions) == len(self._threads)
        self._actions[:] = actions
        for go in self._go:
            go.release()
        deadline = time.monotonic() + JOIN_S
        for done in self._done:
            if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise Deadlock(f"a round did not finish in {JOIN_S} s\n{thread_stacks()}")
        if self.errors:
            raise AssertionError(self.errors[0])

    def close(self) -> None:
        self._stopping = True
        for go in self._go:
            go.release()
        join_all(self._threads, "racers")


class Lane:
    """One table (a latch and a shaker on its own mock pins) for the watchdog's races."""

    def __init__(self, number: int, *, stuck: bool, racers: int) -> None:
        self.factory = MockFactory(pin_class=MockPWMPin)
        contacts_closed(self.factory)
        self.motor = motor_pin(self.factory)
        self.latch = FaultLatch()
        self.events: queue.Queue[Occurrence] = queue.Queue()
        self.after_trip: int | None = None
        self.violations: list[str] = []
        self.shaker: GpioShaker | None = None
        self.racers = Racers(racers, f"lane-{number}")
        self.patterns = PatternThreads(stuck=stuck)

    def build(self) -> GpioShaker:
        """A shaker on the lane's pins (half the lanes' patterns hang)."""
        self.shaker = self.patterns.shaker_class(
            self.events,
            motor_pin=PINS.motor,
            lid_pin=PINS.lid_switch,
            motion_pin=PINS.motion_sensor,
            tamper_pin=PINS.tamper_switch,
            config=FAST,
            pin_factory=self.factory,
            latch=self.latch,
        )
        return self.shaker

    def trip(self, turns: int) -> None:
        spin(turns)
        self.latch.trip("sensor fault")
        self.after_trip = len(self.motor.states)
        if self.motor.state != 0:
            self.violations.append(f"motor at {self.motor.state} after a trip returned")

    def start(self, turns: int) -> None:
        spin(turns)
        assert self.shaker is not None
        with contextlib.suppress(ShakerError):  # latched or closed: refused, as it must be
            self.shaker.start_shake()

    def finish_round(self, tally: dict[str, int]) -> None:
        """After the racers: wait for the fault and the pattern threads; check; re-arm."""
        if not self.latch.wait_for_trip(JOIN_S):
            raise Deadlock(f"the latch did not trip within {JOIN_S} s\n{thread_stacks()}")
        self.patterns.join()
        assert self.violations == [], self.violations[0]
        assert self.motor.state == 0, "the motor is on after the round"
        assert self.after_trip is not None
        later = [s.state for s in self.motor.states[self.after_trip :]]
        assert later == [0.0] * len(later), f"motor written {later} after a trip returned"
        while not self.events.empty():
            if self.events.get_nowait().event is Event.MOTOR_OVERRUN:
                tally["watchdog cut the motor"] += 1
        tally["rounds"] += 1
        self.latch.reset()
        self.motor.clear_states()
        self.after_trip = None

    def close(self) -> None:
        self.racers.close()
        if self.shaker is not None:
            self.shaker.close()
        self.factory.close()


def race_trip_and_start(rounds: int, rng: random.Random) -> dict[str, int]:
    """``trip`` against ``start_shake`` and ``show_status`` on one reused table: the pattern's
    first motor write and the lamps race the trip's cut."""
    tally = {"rounds": 0, "shakes started": 0, "refused (latched)": 0}
    bench = Bench()
    racers = Racers(3, "trip-start")
    turns = [0, 0, 0]

    def trip() -> None:
        spin(turns[0])
        bench.trip("sensor fault")

    def start() -> None:
        spin(turns[1])
        try:
            bench.shaker.start_shake()
            tally["shakes started"] += 1
        except ShakerError:
            tally["refused (latched)"] += 1

    def show() -> None:
        spin(turns[2])
        bench.panel.show_status(Screen.BETS_CLOSED)

    try:
        for _ in range(rounds):
            turns[:] = [rng.randrange(SPIN) for _ in range(3)]
            bench.panel.show_status(Screen.READY)
            racers.round(trip, start, show)
            assert bench.latch.is_tripped
            bench.settle()
            bench.assert_motor_stayed_off()
            assert lamps(bench.factory) == SAFE_LAMPS, "lamps not safe after a trip"
            tally["rounds"] += 1
            bench.rearm()
    finally:
        racers.close()
        bench.close()
    return tally


def race_in_lanes(
    rounds: int,
    rng: random.Random,
    play: Callable[[Lane, random.Random, dict[str, int]], None],
    racers: int,
) -> dict[str, int]:
    """``play`` rounds on ``LANES`` tables side by side (a round waits for the watchdog)."""
    keys = ("rounds", "watchdog cut the motor")
    tally = dict.fromkeys(keys, 0)
    tally_lock = threading.Lock()
    failures: list[BaseException] = []
    lanes = [Lane(n, stuck=n % 2 == 0, racers=racers) for n in range(LANES)]
    seeds = [rng.randrange(2**32) for _ in lanes]
    shares = [rounds // LANES + (n < rounds % LANES) for n in range(LANES)]

    def run(lane: Lane, share: int, seed: int) -> None:
        lane_rng = random.Random(seed)
        lane_tally = dict.fromkeys(keys, 0)
        try:
            for _ in range(share):
                if failures:
                    return
                play(lane, lane_rng, lane_tally)
        except BaseException as exc:
            failures.append(exc)
        finally:
            with tally_lock:
                for key, n in lane_tally.items():
                    tally[key] += n

    threads = [
        threading.Thread(target=run, args=args, name=f"lane-{n}", daemon=True)
        for n, args in enumerate(zip(lanes, shares, seeds, strict=True))
    ]
    for t in threads:
        t.start()
    # a bound on a deadlock, not a measure of speed: half a second a round on a loaded machine
    deadline = time.monotonic() + JOIN_S + max(shares) * 0.5
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        raise Deadlock(f"a lane did not finish\n{thread_stacks()}")
    if failures:
        raise failures[0]
    for lane in lanes:
        lane.close()
    return tally


def play_watchdog_round(lane: Lane, rng: random.Random, tally: dict[str, int]) -> None:
    """The watchdog fires 4 ms into the shake; a trip and a second ``start_shake`` are let go
    around then. Half the lanes' patterns hang (the watchdog must cut), half end in time."""
    shaker = lane.shaker if lane.shaker is not None else lane.build()
    try:
        shaker.start_shake()
    except ShakerError:
        # On a loaded machine the previous round's watchdog may check its shake after the
        # round re-armed the latch (the motor still turning then is a fault, rightly): that
        # trip is the previous round's. Re-arm again; this round's shake must then start.
        lane.latch.reset()
        shaker.start_shake()
    jitter(rng.uniform(0.0025, 0.0045))
    turns = [rng.randrange(SPIN) for _ in range(2)]
    lane.racers.round(lambda: lane.trip(turns[0]), lambda: lane.start(turns[1]))
    lane.finish_round(tally)


def play_close_round(lane: Lane, rng: random.Random, tally: dict[str, int]) -> None:
    """A fresh shaker with its shake under way; ``close``, a trip and a second
    ``start_shake`` are let go around the watchdog's deadline (4 ms). After ``close`` returns
    nothing writes the motor, no thread raises, and the latch has forgotten the shaker."""
    shaker = lane.build()
    shaker.start_shake()
    jitter(rng.uniform(0.0025, 0.0045))
    turns = [rng.randrange(SPIN) for _ in range(3)]
    history_at_close: list[int] = []

    def close() -> None:
        spin(turns[0])
        shaker.close()
        history_at_close.append(len(lane.motor.states))

    lane.racers.round(close, lambda: lane.trip(turns[1]), lambda: lane.start(turns[2]))
    lane.patterns.join()
    [at_close] = history_at_close
    written = [s.state for s in lane.motor.states[at_close:]]
    assert written == [], f"the motor was written {written} after close returned"
    assert "shaker.motor" not in lane.latch.outputs
    lane.finish_round(tally)
    lane.shaker = None


Race = Callable[[int, random.Random], dict[str, int]]

# Each kind of race, and the interpreter's thread switch interval its workers run with (the
# default is 5 ms): short enough that threads are preempted inside the drivers' methods, not
# only where they block, which is where these races happen; no shorter than that needs.
RACES: dict[str, tuple[Race, float]] = {
    "trip x start_shake": (race_trip_and_start, 1e-5),
    "watchdog x trip x start_shake": (
        lambda n, rng: race_in_lanes(n, rng, play_watchdog_round, 2),
        1e-4,
    ),
    "close x watchdog x trip x start_shake": (
        lambda n, rng: race_in_lanes(n, rng, play_close_round, 3),
        1e-3,
    ),
}
SEED = int(os.environ.get("RACE_SEED", random.SystemRandom().randrange(2**32)))


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(RACES))
def test_races(kind: str) -> None:
    """``ITERATIONS`` rounds of one kind of race, shared by ``WORKERS`` processes."""
    seeds = [SEED + n for n in range(WORKERS)]
    print(f"race {kind!r}: seeds {seeds} (RACE_SEED={SEED} replays)")
    shares = [ITERATIONS // WORKERS + (n < ITERATIONS % WORKERS) for n in range(WORKERS)]
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, kind, str(share), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for share, seed in zip(shares, seeds, strict=True)
    ]
    reports = []
    for worker in workers:
        try:
            # A deadlock fails within the worker, a round at a time (Racers.round); this bound
            # only stops a worker that stopped itself from failing: a loaded machine (the suite's
            # other workers beside) takes its time over the rounds' real waits
            out, err = worker.communicate(timeout=800)
        except subprocess.TimeoutExpired:
            for w in workers:
                w.kill()
            pytest.fail(f"a {kind!r} worker hung (its own timeouts should have ended it)")
        lines = out.strip().splitlines()
        assert lines, f"a worker died: {err[-3000:]}"
        reports.append(json.loads(lines[-1]))
    for report in reports:
        assert report["failure"] is None, f"seed {report['seed']}: {report['failure']}"
        assert report["thread_errors"] == [], f"seed {report['seed']}: a thread raised"
    total: dict[str, int] = {}
    for report in reports:
        for key, n in report["tally"].items():
            total[key] = total.get(key, 0) + n
    print(f"race {kind!r}: {total}")
    assert total["rounds"] >= ITERATIONS


def race_worker(kind: str, rounds: int, seed: int) -> None:
    """One worker process: its share of the rounds, one JSON line of results on stdout."""
    # Every log call made, as on the table (it widens the windows the races aim at), but kept.
    logging.basicConfig(level=logging.DEBUG, handlers=[logging.NullHandler()], force=True)
    race, switch_s = RACES[kind]
    sys.setswitchinterval(switch_s)
    failure = None
    tally: dict[str, int] = {}
    with thread_errors() as errors:
        try:
            tally = race(rounds, random.Random(seed))
        except BaseException:
            failure = traceback.format_exc()
    report = {"seed": seed, "tally": tally, "failure": failure, "thread_errors": errors}
    print(json.dumps(report), flush=True)
    os._exit(0)  # a deadlocked thread (the failure says so) must not keep the process alive


if __name__ == "__main__":
    race_worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
