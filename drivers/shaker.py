"""The player-activated dice shaker on gpiozero: motor, lid switch, motion sensor, tamper loop.

Implements :class:`controller.ports.Shaker`. Safety lives here, not in the control thread:

* The motor's safe value is off (duty 0). ``stop``, ``drive_safe``, ``close`` and the fault latch
  put it there; all are idempotent and safe from any thread (the daemon's SIGTERM handler too).
* A shake runs only with the lid closed and the shaker secured. The pattern (``cycle_ms`` per
  cycle: on at ``amplitude`` for half, off for half; ``shake_ms // cycle_ms`` cycles, at least 3,
  621a.8(a)(2)) runs on its own thread and ends the shake itself, counting the motion sensor's
  pulses; ``SHAKE_DONE`` carries the count. The control thread need not do anything to stop it.
* A watchdog timer armed with every shake cuts the motor at ``motor_max_ms`` if the pattern has
  not ended (a hung or starved thread), and reports a motor still turning then (the motion sensor
  still pulsing after the cut: a motor driver failed on). Either is ``MOTOR_OVERRUN`` and trips
  the fault latch.
* The lid opening during a shake cuts the motor on its first edge (621a.11(i): the shake is void)
  and reports ``LID_OPENED``; lid changes are always reported. The tamper loop breaking (the
  shaker removed or tilted, N.J.A.C. 13:69E-1.16A) cuts the motor, reports ``TAMPER`` and trips
  the latch, whether shaking or idle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpiozero import DigitalInputDevice, GPIODeviceClosed, PWMOutputDevice

from controller.config import ShakerConfig
from controller.errors import ShakerError
from controller.ports import EventSink
from controller.state import Event, Fault, Occurrence
from drivers.debounce import DebouncedInput, debounced_input, monotonic_ms
from drivers.safety import FaultLatch

log = logging.getLogger(__name__)

MOTOR_SAFE_VALUE = 0.0  # the motor's safe value: off
MOTOR_PWM_HZ = 1000
_WATCHDOG_LOCK_WAIT_S = 0.2  # the watchdog cuts the motor even if it cannot get the lock


@dataclass(frozen=True, slots=True)
class ShakePattern:
    """What one shake does, checked against the rules and the motor limit."""

    cycles: int
    on_s: float
    off_s: float
    amplitude: float
    motor_max_s: float

    @classmethod
    def from_config(cls, config: ShakerConfig) -> ShakePattern:
        # ShakerConfig itself refuses fewer than 3 cycles (621a.8(a)(2)) and a motor limit
        # shorter than the pattern, so a pattern made here is always a legal one.
        on_ms = config.cycle_ms // 2
        return cls(
            cycles=config.cycles,
            on_s=on_ms / 1000,
            off_s=(config.cycle_ms - on_ms) / 1000,
            amplitude=config.amplitude,
            motor_max_s=config.motor_max_ms / 1000,
        )

    @property
    def cycle_s(self) -> float:
        return self.on_s + self.off_s


@dataclass(eq=False, slots=True)
class _ShakeRun:
    """One shake: the pattern thread, the watchdog and the motion count share it."""

    number: int
    stop: threading.Event = field(default_factory=threading.Event)
    cycles: int = 0
    ended: bool = False


class GpioShaker:
    """The shaker on gpiozero devices. ``pin_factory=None`` takes gpiozero's default (lgpio on a
    Pi); tests and the simulator pass ``MockFactory(pin_class=MockPWMPin)``.

    Inputs are wired active low with pull-ups (hw/pinout.md): the lid switch closes to ground
    when the lid is closed, the tamper loop is closed to ground while the shaker is secured, the
    motion sensor (open-collector hall sensor) pulls low once per shake cycle. A broken wire thus
    reads as lid open and as tampered.
    """

    def __init__(
        self,
        sink: EventSink,
        *,
        motor_pin: int | str,
        lid_pin: int | str,
        motion_pin: int | str,
        tamper_pin: int | str,
        config: ShakerConfig,
        pin_factory: Any = None,
        latch: FaultLatch | None = None,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._pattern = ShakePattern.from_config(config)
        self._sink = sink
        self._clock = clock
        self._latch = latch
        self._lock = threading.RLock()
        self._closed = False
        self._run: _ShakeRun | None = None  # the shake in progress
        self._watched: _ShakeRun | None = None  # the shake the watchdog guards
        self._watchdog: threading.Timer | None = None
        self._runs = 0
        self._last_motion_ns: int | None = None
        debounce_s = config.debounce_ms / 1000
        self._inputs: list[DebouncedInput] = []
        self._motion: Any = None
        self._motor: Any = PWMOutputDevice(
            motor_pin,
            initial_value=MOTOR_SAFE_VALUE,
            frequency=MOTOR_PWM_HZ,
            pin_factory=pin_factory,
        )
        try:
            self._lid = self._input(
                "lid", lid_pin, pin_factory, self._lid_changed, debounce_s, immediate=False
            )
            self._secured = self._input(
                "tamper", tamper_pin, pin_factory, self._tamper_changed, debounce_s, immediate=False
            )
            # The hall sensor gives clean edges: each activation is one cycle, no debounce.
            self._motion = DigitalInputDevice(motion_pin, pull_up=True, pin_factory=pin_factory)
            self._motion.when_activated = self._motion_pulse
        except BaseException:
            self._release_devices()
            raise
        if latch is not None:
            latch.register("shaker.motor", self.drive_safe)

    def _input(
        self,
        name: str,
        pin: int | str,
        pin_factory: Any,
        on_change: Callable[[bool], None],
        debounce_s: float,
        *,
        immediate: bool,
    ) -> DebouncedInput:
        debounced = debounced_input(
            name,
            pin,
            on_change,
            pin_factory=pin_factory,
            debounce_s=debounce_s,
            immediate=immediate,
        )
        self._inputs.append(debounced)
        return debounced

    # --- the port ----------------------------------------------------------------------------

    @property
    def is_lid_closed(self) -> bool:
        return self._lid.is_active

    @property
    def is_secured(self) -> bool:
        return self._secured.is_active

    @property
    def is_shaking(self) -> bool:
        with self._lock:
            return self._run is not None

    @property
    def motor_value(self) -> float:
        return float(self._motor.value)

    @property
    def pattern(self) -> ShakePattern:
        return self._pattern

    def report_inputs(self) -> None:
        """Tell the control thread the lid's state, and the tamper loop's if it is open. Called
        once at start-up so the core does not begin from assumptions."""
        self._emit(Event.LID_CLOSED if self._lid.is_active else Event.LID_OPENED)
        if not self._secured.is_active:
            self._latch_fault(Event.TAMPER, "tamper loop open at start-up")

    def start_shake(self) -> None:
        """Start one shake pattern and return at once. Refused with an event, not run, while
        the lid is open (``LID_OPENED``) or the shaker is not secured (``TAMPER``)."""
        with self._lock:
            if self._closed:
                raise ShakerError("the shaker is closed")
            if self._latch is not None and self._latch.is_tripped:
                raise ShakerError(f"outputs are latched safe: {self._latch.reason}")
            if self._run is not None:
                log.warning("start_shake while shaking: ignored")
                return
            if not self._secured.is_active:
                self._emit(Event.TAMPER, detail="shake refused: shaker not secured")
                return
            if not self._lid.is_active:
                self._emit(Event.LID_OPENED, detail="shake refused: lid open")
                return
            self._runs += 1
            run = _ShakeRun(self._runs)
            self._run = run
            self._arm_watchdog(run)
            thread = threading.Thread(
                target=self._run_pattern, args=(run,), name=f"shake-{run.number}", daemon=True
            )
            thread.start()

    def stop(self) -> None:
        """Stop the motor; a shake in progress ends without ``SHAKE_DONE``."""
        with self._lock:
            if not self._closed:
                self._abort("stopped")

    def drive_safe(self) -> None:
        """The motor to its safe value (off) at once; from any thread, any number of times.
        The motor is written before the lock is taken, so a stuck lock holder cannot delay it."""
        try:
            self._motor.value = MOTOR_SAFE_VALUE
        except GPIODeviceClosed:
            return  # closed: the pin is released and the motor driver's pull-down holds it off
        with self._lock:
            if not self._closed:
                self._abort("driven safe")

    def close(self) -> None:
        """Motor off, watchdog cancelled, pins released. May be called twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._abort("closed")
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None
            self._watched = None
        if self._latch is not None:
            self._latch.unregister("shaker.motor")
        self._release_devices()

    def __enter__(self) -> GpioShaker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the shake ---------------------------------------------------------------------------

    def _run_pattern(self, run: _ShakeRun) -> None:
        """The pattern thread: on/off cycles, then ``SHAKE_DONE`` with the motion count."""
        p = self._pattern
        start = time.monotonic()

        def wait_until(offset_s: float) -> bool:
            # Against the pattern's start, so that a late wake-up does not lengthen the shake.
            return run.stop.wait(max(0.0, start + offset_s - time.monotonic()))

        try:
            for k in range(p.cycles):
                cycle_start = k * p.cycle_s
                if not self._drive(run, p.amplitude) or wait_until(cycle_start + p.on_s):
                    return
                if not self._drive(run, MOTOR_SAFE_VALUE) or wait_until(cycle_start + p.cycle_s):
                    return
            with self._lock:
                if run.ended:
                    return
                self._end(run)
                self._emit(Event.SHAKE_DONE, cycles=run.cycles)
        except Exception as exc:  # the thread's failure becomes an event
            log.exception("shake %d: pattern failed", run.number)
            self._pattern_failed(run, f"shake pattern failed: {exc!r}")

    def _pattern_failed(self, run: _ShakeRun, reason: str) -> None:
        """The pattern thread raised: motor off, the fault reported and latched."""
        try:
            self._motor.value = MOTOR_SAFE_VALUE
        finally:
            with self._lock:
                if self._run is run:
                    self._run = None
                run.ended = True
                run.stop.set()
            self._latch_fault(Event.FAULT, reason, fault=Fault.INTERNAL)

    def _drive(self, run: _ShakeRun, value: float) -> bool:
        with self._lock:
            if run.ended:
                return False
            self._motor.value = value
            return True

    def _end(self, run: _ShakeRun) -> None:
        """Under the lock: the motor off and the run over (the watchdog still guards it)."""
        run.ended = True
        run.stop.set()
        self._motor.value = MOTOR_SAFE_VALUE
        if self._run is run:
            self._run = None

    def _abort(self, why: str) -> None:
        """Under the lock: the motor off; a run in progress ends without ``SHAKE_DONE``."""
        self._motor.value = MOTOR_SAFE_VALUE
        run = self._run
        if run is not None and not run.ended:
            log.info("shake %d ended: %s (%d cycles counted)", run.number, why, run.cycles)
            self._end(run)

    def _arm_watchdog(self, run: _ShakeRun) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watched = run
        timer = threading.Timer(self._pattern.motor_max_s, self._watchdog_fired, args=(run,))
        timer.name = f"motor-watchdog-{run.number}"
        timer.daemon = True
        self._watchdog = timer
        timer.start()

    def _watchdog_fired(self, run: _ShakeRun) -> None:
        """``motor_max_ms`` after the start: the motor must be off and still by now."""
        locked = self._lock.acquire(timeout=_WATCHDOG_LOCK_WAIT_S)
        try:
            if locked and (self._closed or self._watched is not run):
                return  # closed, or a newer shake has its own watchdog
            if not locked or not run.ended:
                # The pattern did not end in time (or holds the lock): cut the motor regardless.
                self._motor.value = MOTOR_SAFE_VALUE
                if locked:
                    self._end(run)
                reason = f"motor cut at its maximum run time ({self._max_ms()} ms)"
            elif self._is_still_turning():
                reason = f"motor still turning {self._max_ms()} ms after the shake started"
            else:
                return
            self._motor.value = MOTOR_SAFE_VALUE
        finally:
            if locked:
                self._lock.release()
        log.error("%s", reason)
        self._latch_fault(Event.MOTOR_OVERRUN, reason)

    def _max_ms(self) -> int:
        return round(self._pattern.motor_max_s * 1000)

    def _is_still_turning(self) -> bool:
        last = self._last_motion_ns
        window_ns = int(self._pattern.cycle_s * 1.5 * 1e9)
        return last is not None and time.monotonic_ns() - last < window_ns

    # --- inputs (any thread) -----------------------------------------------------------------

    def _motion_pulse(self) -> None:
        with self._lock:
            self._last_motion_ns = time.monotonic_ns()
            run = self._run
            if run is not None and not run.ended:
                run.cycles += 1
            else:
                log.debug("motion pulse outside a shake")

    def _lid_changed(self, is_closed: bool) -> None:
        with self._lock:
            if self._closed:
                return
            if not is_closed and self._run is not None:
                # 621a.11(i): the lid lifted during the shake voids it; the motor stops first.
                self._abort("lid opened")
            self._emit(Event.LID_CLOSED if is_closed else Event.LID_OPENED)

    def _tamper_changed(self, is_secured: bool) -> None:
        with self._lock:
            if self._closed:
                return
            if is_secured:
                log.warning("tamper loop closed again (the fault stays until cleared)")
                self._emit(Event.SECURED)
                return
            self._abort("tamper")
        self._latch_fault(Event.TAMPER, "shaker removed or tilted")

    def _latch_fault(self, event: Event, reason: str, *, fault: Fault | None = None) -> None:
        """Outside the lock: every output safe first, then the control thread told."""
        if self._latch is not None:
            self._latch.trip(f"{event}: {reason}")
        self._emit(event, fault=fault, detail=reason)

    def _emit(
        self,
        event: Event,
        *,
        cycles: int | None = None,
        fault: Fault | None = None,
        detail: str = "",
    ) -> None:
        self._sink.put(
            Occurrence(event, at=self._clock(), cycles=cycles, fault=fault, detail=detail)
        )

    def _release_devices(self) -> None:
        for debounced in self._inputs:
            try:
                debounced.close()
            except Exception:  # release the rest regardless
                log.exception("closing input %s failed", debounced.name)
        self._inputs.clear()
        if self._motion is not None:
            self._motion.when_activated = None
            self._motion.close()
            self._motion = None
        try:
            self._motor.value = MOTOR_SAFE_VALUE
        finally:
            self._motor.close()
