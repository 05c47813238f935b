"""The player-activated dice shaker on gpiozero: motor, lid switch, motion sensor, tamper loop.

Implements :class:`controller.ports.Shaker`. Safety lives here, not in the control thread:

* The motor's safe value is off (duty 0). ``stop``, ``drive_safe``, ``close`` and the fault latch
  put it there; all are idempotent and safe from any thread and from a signal handler.
* A shake runs only with the lid closed and the shaker secured. The pattern (``cycle_ms`` per
  cycle: on at ``amplitude`` for half, off for half; ``shake_ms // cycle_ms`` cycles, at least 3,
  621a.8(a)(2)) runs on its own thread and ends the shake itself, counting the motion sensor's
  pulses; ``SHAKE_DONE`` carries the count. The control thread need not do anything to stop it.
* The shaker's one watchdog thread (started by the first shake) cuts the motor at
  ``motor_max_ms`` after a shake's start if the pattern has not ended (a hung or starved thread),
  and reports a motor still turning then (the motion sensor still pulsing after the cut: a motor
  driver failed on). Either is ``MOTOR_OVERRUN`` and trips the fault latch.
* The lid opening during a shake cuts the motor on its first edge (621a.11(i): the shake is void)
  and reports ``LID_OPENED``; lid changes are always reported. The tamper loop breaking (the
  shaker removed or tilted, N.J.A.C. 13:69E-1.16A) cuts the motor, reports ``TAMPER`` and trips
  the latch, whether shaking or idle. An input handler that fails trips the latch too.

The motion count does not depend on how soon Python sees an edge. On a Pi, gpiozero's lgpio
factory delivers edges on its own callback thread, stamped by the kernel (``CLOCK_MONOTONIC``,
the clock of the factory's ``ticks()``); a mock pin stamps them with the factory's clock when it
is driven. Each shake has a motion window in those ticks, from just before its first motor-on
write to the pattern's end (after the last cycle's off half), and an edge counts for the shake
whose window holds its own timestamp, however late its callback runs; one stamped before or
after the window never counts. At the pattern's end the motor is off for good at once; the
pattern thread then waits, holding no lock and at most ``motion_grace_s``, until the count is
settled, and ``SHAKE_DONE`` carries it:

* the pattern's cycles are counted: a later pulse could not change what 621a.8(a)(2) asks (at
  least three complete cycles, ``[round] min_shake_cycles`` of them), so nothing is waited for;
* or an edge stamped after the window has been delivered. That proves the window complete:
  the callback thread delivers a pin's edges in timestamp order (lgpio sorts its reports before
  it emits them; mock pins deliver on the driving thread), so none of the window's edges is
  still on its way;
* or neither within ``motion_grace_s`` (``MOTION_GRACE_S``) of the window's end. This is the
  one assumption left: an edge inside the window reaches Python within that grace. A callback
  thread later than that makes the count short (a "too few cycles" no roll, and a warning
  naming the late pulse in the log), never too high: an edge counts only for the shake whose
  window was open at its timestamp.

The shake is in progress (``is_shaking``) until ``SHAKE_DONE``: a stop, a trip, the lid or the
tamper loop meanwhile voids it, as during the pattern. The watchdog's "still turning" check too
goes by the edges' timestamps (one within 1.5 cycles of the check), so a shake's pulses
delivered late are not taken for a motor running on; a run-on edge whose callback comes after
the check is not seen by that check.

Locks, in the order of :mod:`drivers`: ``_lock`` (the shaker's state), then ``_watch`` (the
watchdog's deadline), then ``_motor_lock``, a re-entrant leaf lock that guards every write of the
motor pin together with the shake's ``ended``, ``void`` and ``reported`` flags, the safe epoch,
the motion window and the count; under it nothing is called but the pin write and the factory's
tick arithmetic (``ticks_diff``; the factory's clock is read outside it). The motion edge's
callback takes only this lock, on whichever thread delivers it. Once a shake has ended it can
never energise the motor again, whoever ended it, and after ``close`` nothing writes the pin.
``drive_safe`` (the latch's handler) takes only ``_motor_lock``. ``drive_safe`` and ``stop`` move
the safe epoch on: a shake commanded before that (even one whose ``start_shake`` a signal handler
interrupted) never energises the motor. The latch is read without its lock and tripped only
while holding none of the shaker's locks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gpiozero import DigitalInputDevice, PWMOutputDevice

from controller.core.config import ShakerConfig
from controller.core.state import Event, Fault, occurrence
from controller.errors import OutputsLatched, ShakerError
from controller.ports import EventSink
from drivers.debounce import DebouncedInput, debounced_input, monotonic_ms
from drivers.safety import FaultLatch, SignalSafeFlag

log = logging.getLogger(__name__)

MOTOR_SAFE_VALUE = 0.0  # the motor's safe value: off
MOTOR_PWM_HZ = 1000
# How long the end of a shake waits for motion edges still on their way to Python (see above).
# lgpio's callback thread normally runs within milliseconds; a second's half is a machine in
# trouble, and the shake is then reported with what was counted (too few: a no roll). Below the
# core's backstop (MOTOR_GRACE_MS after the motor's limit), so SHAKE_DONE always comes first.
MOTION_GRACE_S = 0.5
# Pin factory ticks are opaque and may wrap (gpiozero compares them only through ticks_diff,
# never negative for a wrapping clock): two ticks further apart than this are not compared.
_TICKS_HORIZON_S = 600.0
_JOIN_S = 2.0  # how long ``close`` waits for the watchdog thread to finish a check

Place = Literal["before", "inside", "after"]  # a motion edge's stamp against a shake's window


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
    """One shake: the pattern thread, the watchdog and the motion count share it. Its window,
    count and flags change only under the motor lock, and its flags never back."""

    number: int
    epoch: int  # the shaker's safe epoch when the shake was commanded
    watch_until: float = 0.0  # time.monotonic() at which the watchdog checks the motor
    wake: SignalSafeFlag = field(default_factory=SignalSafeFlag)  # wakes the pattern thread
    settled: SignalSafeFlag = field(default_factory=SignalSafeFlag)  # the count is final, or void
    start_tick: Any = None  # the motion window, in the pin factory's ticks: its start...
    end_tick: Any = None  # ...and its end (None while the pattern runs)
    cycles: int = 0  # motion edges stamped inside the window
    ended: bool = False  # the motor is off for good
    void: bool = False  # ended before its count was reported: no SHAKE_DONE (set with ``ended``)
    reported: bool = False  # SHAKE_DONE given
    overdue: bool = False  # the pattern found its motor limit passed (set with ``ended``)

    @property
    def is_open(self) -> bool:
        """Neither reported nor void: the shake is in progress."""
        return not (self.void or self.reported)


class MotionSensor(DigitalInputDevice):  # type: ignore[misc]  # gpiozero is untyped
    """The hall sensor (open collector, active low), each activation given to ``when_pulse``
    with its edge's own timestamp: gpiozero's ``when_activated`` carries none, but the pin's
    edge callback does, and ``_fire_events`` receives it. A ``when_pulse`` that raises is given
    to ``on_error``, never to the pin library's thread."""

    def __init__(
        self,
        pin: int | str,
        *,
        when_pulse: Callable[[Any], None],
        on_error: Callable[[str, Exception], None],
        pin_factory: Any,
    ) -> None:
        self._when_pulse: Callable[[Any], None] | None = when_pulse
        self._on_error = on_error
        super().__init__(pin, pull_up=True, pin_factory=pin_factory)

    def _fire_events(self, ticks: Any, new_active: bool) -> None:
        was_active = self._last_active
        super()._fire_events(ticks, new_active)
        handler = self._when_pulse
        if handler is None or was_active is not False or not new_active:
            return
        try:
            handler(ticks)
        except Exception as exc:  # the pin library's thread must live on
            log.exception("motion pulse handler failed")
            self._on_error("motion", exc)

    def close(self) -> None:
        self._when_pulse = None  # an edge still on its way is dropped
        super().close()


class GpioShaker:
    """The shaker on gpiozero devices. ``pin_factory=None`` takes gpiozero's default (lgpio on a
    Pi); tests and the simulator pass ``MockFactory(pin_class=MockPWMPin)``.

    Inputs are wired active low with pull-ups (hw/pinout.md): the lid switch closes to ground
    when the lid is closed, the tamper loop is closed to ground while the shaker is secured, the
    motion sensor (open-collector hall sensor) pulls low once per shake cycle. A broken wire thus
    reads as lid open and as tampered.

    ``motion_grace_s``: how long the end of a shake waits at most for motion edges still on
    their way (the module's docstring); tests change it, the product keeps ``MOTION_GRACE_S``.
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
        motion_grace_s: float = MOTION_GRACE_S,
    ) -> None:
        self._pattern = ShakePattern.from_config(config)
        self._motion_grace_s = motion_grace_s
        self._sink = sink
        self._clock = clock
        self._latch = latch
        self._lock = threading.RLock()  # the shaker's state
        self._closed = False
        self._run: _ShakeRun | None = None  # the latest shake (ended or not)
        self._prior: _ShakeRun | None = None  # the one before it (its late pulses are logged)
        self._runs = 0
        self._last_motion_tick: Any = None  # the latest motion edge's timestamp
        # The leaf lock of every motor write; re-entrant for a signal handler's drive_safe.
        self._motor_lock = threading.RLock()
        self._motor_closed = False
        self._safe_epoch = 0
        # The watchdog: one thread from the first shake to close, told each shake's deadline.
        self._watch = threading.Condition(threading.Lock())
        self._watched: _ShakeRun | None = None
        self._watch_stopped = False
        self._watchdog: threading.Thread | None = None
        debounce_s = config.debounce_ms / 1000
        self._inputs: list[DebouncedInput] = []
        self._motion: MotionSensor | None = None
        self._motor: Any = PWMOutputDevice(
            motor_pin,
            initial_value=MOTOR_SAFE_VALUE,
            frequency=MOTOR_PWM_HZ,
            pin_factory=pin_factory,
        )
        factory = self._motor.pin_factory  # gpiozero's default one if none was given
        self._ticks: Callable[[], Any] = factory.ticks
        self._ticks_diff: Callable[[Any, Any], float] = factory.ticks_diff
        try:
            self._lid = self._input(
                "lid", lid_pin, pin_factory, self._lid_changed, debounce_s, immediate=False
            )
            self._secured = self._input(
                "tamper", tamper_pin, pin_factory, self._tamper_changed, debounce_s, immediate=False
            )
            # The hall sensor gives clean edges: each activation is one cycle, no debounce.
            self._motion = MotionSensor(
                motion_pin,
                when_pulse=self._motion_edge,
                on_error=self._motion_failed,
                pin_factory=pin_factory,
            )
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
            on_error=self._input_failed,
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
        """From ``start_shake`` until ``SHAKE_DONE``, or until the shake is cut short."""
        run = self._run
        return run is not None and run.is_open

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
        epoch = self._safe_epoch  # first: a drive_safe from here on ends this shake
        with self._lock:
            if self._closed:
                raise ShakerError("the shaker is closed")
            if self._latch is not None and self._latch.is_tripped:
                raise OutputsLatched(f"outputs are latched safe: {self._latch.reason}")
            if self.is_shaking:
                log.warning("start_shake while shaking: ignored")
                return
            if not self._secured.is_active:
                self._emit(Event.TAMPER, detail="shake refused: shaker not secured")
                return
            if not self._lid.is_active:
                self._emit(Event.LID_OPENED, detail="shake refused: lid open")
                return
            run = _ShakeRun(self._runs + 1, epoch)
            self._arm_watchdog(run)  # first: a shake never runs unwatched
            self._runs = run.number
            with self._motor_lock:
                self._prior, self._run = self._run, run
        thread = threading.Thread(
            target=self._run_pattern, args=(run,), name=f"shake-{run.number}", daemon=True
        )
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had: the shake never began (void)
            with self._motor_lock:
                self._end(run)
            raise ShakerError(f"the shake could not start: {exc}") from exc

    def stop(self) -> None:
        """Stop the motor; a shake in progress ends without ``SHAKE_DONE``."""
        self._cut_now("stopped")

    def drive_safe(self) -> None:
        """The motor to its safe value (off) at once; from any thread, any number of times, from
        a signal handler too. It takes only the motor's leaf lock, held by others just for a pin
        write, so a stuck holder of the shaker's lock cannot delay it."""
        self._cut_now("driven safe")

    def close(self) -> None:
        """Motor off, watchdog stopped, pins released. May be called twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._cut_now("closed")
        finally:
            self._stop_watchdog()
            if self._latch is not None:
                self._latch.unregister("shaker.motor")
            self._release_devices()

    def __enter__(self) -> GpioShaker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the motor (every write under the motor lock) -----------------------------------------

    def _write_motor(self, value: float) -> None:
        """Under the motor lock. After close the pin is released: nothing is written."""
        if not self._motor_closed:
            self._motor.value = value

    def _end(self, run: _ShakeRun | None, *, completed: bool = False) -> None:
        """Under the motor lock: the shake over for good, then the motor off. Void (never
        reported) unless its pattern ``completed`` it, or it was reported already."""
        if run is not None:
            run.ended = True
            if not completed and not run.reported:
                run.void = True
                run.settled.set()
            run.wake.set()
        self._write_motor(MOTOR_SAFE_VALUE)

    def _cut_now(self, why: str) -> None:
        """The motor off; a shake in progress, or one being commanded, ends without
        ``SHAKE_DONE``."""
        with self._motor_lock:
            self._safe_epoch += 1
            run = self._run
            was_running = run is not None and run.is_open
            self._end(run)
        if was_running and run is not None:
            log.info("shake %d ended: %s (%d cycles counted)", run.number, why, run.cycles)

    def _drive(self, run: _ShakeRun, value: float) -> bool:
        """One step of the pattern; ``False`` once the shake has ended (it then stays off). The
        first energising step opens the motion window (its start read just before the lock)."""
        start = self._ticks() if value > 0 and run.start_tick is None else None
        with self._motor_lock:
            if run.ended or run.epoch != self._safe_epoch or self._is_latched():
                self._end(run)
                return False
            if time.monotonic() < run.watch_until:
                if run.start_tick is None:
                    run.start_tick = start
                self._write_motor(value)
                return True
            # Past the motor limit and the watchdog not yet here (a stalled write let it fall
            # behind): the pattern ends the shake itself and reports the overrun once.
            run.overdue = True
            self._end(run)
        reason = f"motor cut at its maximum run time ({self._max_ms()} ms)"
        log.error("%s", reason)
        self._latch_fault(Event.MOTOR_OVERRUN, reason)
        return False

    def _is_latched(self) -> bool:
        return self._latch is not None and self._latch.is_tripped

    # --- the shake ---------------------------------------------------------------------------

    def _run_pattern(self, run: _ShakeRun) -> None:
        """The pattern thread: on/off cycles, then ``SHAKE_DONE`` with the motion count
        (621a.8(a)(2): at least three complete cycles, which the core checks)."""
        p = self._pattern
        start = time.monotonic()

        def wait_until(offset_s: float) -> bool:
            # Against the pattern's start, so that a late wake-up does not lengthen the shake.
            return run.wake.wait(max(0.0, start + offset_s - time.monotonic()))

        try:
            for k in range(p.cycles):
                cycle_start = k * p.cycle_s
                if not self._drive(run, p.amplitude) or wait_until(cycle_start + p.on_s):
                    return
                if not self._drive(run, MOTOR_SAFE_VALUE) or wait_until(cycle_start + p.cycle_s):
                    return
            self._finish(run)
        except Exception as exc:  # the thread's failure becomes an event
            log.exception("shake %d: pattern failed", run.number)
            self._pattern_failed(run, f"shake pattern failed: {exc!r}")

    def _finish(self, run: _ShakeRun) -> None:
        """The pattern has run its course: the motion window closes and the motor is off for
        good, then ``SHAKE_DONE`` once the count is settled (the module's docstring says when),
        unless the shake was voided meanwhile."""
        end = self._ticks()  # outside the motor lock: a factory's clock may be a call away
        with self._motor_lock:
            if run.ended:
                return  # cut short: void
            run.end_tick = end
            self._end(run, completed=True)
        run.settled.wait(self._motion_grace_s)  # holding no lock; bounded
        with self._lock:
            with self._motor_lock:
                if not run.is_open:
                    return  # voided while its count settled
                run.reported = True
                cycles, settled = run.cycles, run.settled.is_set()
            if not settled:
                log.warning(
                    "shake %d: %d motion pulses for %d cycles, and no more within %.3f s",
                    run.number,
                    cycles,
                    self._pattern.cycles,
                    self._motion_grace_s,
                )
            self._emit(Event.SHAKE_DONE, cycles=cycles)

    def _pattern_failed(self, run: _ShakeRun, reason: str) -> None:
        """The pattern thread raised: motor off, the fault reported and latched."""
        try:
            with self._motor_lock:
                self._end(run)
        except Exception:  # the latch drives it safe once more below
            log.exception("shake %d: the motor could not be cut", run.number)
        finally:
            self._latch_fault(Event.FAULT, reason, fault=Fault.INTERNAL)

    # --- the watchdog ------------------------------------------------------------------------

    def _arm_watchdog(self, run: _ShakeRun) -> None:
        """Under the shaker's lock: the watchdog guards ``run`` now (a newer shake replaces an
        older one, which has ended). The first shake starts the watchdog's thread."""
        if self._watchdog is None:
            watchdog = threading.Thread(
                target=self._watch_motor, name="motor-watchdog", daemon=True
            )
            watchdog.start()  # raises before the shake has started: no shake goes unwatched
            self._watchdog = watchdog
        with self._watch:
            run.watch_until = time.monotonic() + self._pattern.motor_max_s
            self._watched = run
            self._watch.notify()

    def _stop_watchdog(self) -> None:
        with self._watch:
            self._watch_stopped = True
            self._watch.notify()
        thread = self._watchdog
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_S)
            if thread.is_alive():
                log.warning("the motor watchdog is still finishing a check")

    def _watch_motor(self) -> None:
        """The watchdog thread: sleeps until the guarded shake's deadline (without a timeout
        while no shake is guarded), then checks the motor."""
        while True:
            with self._watch:
                while True:
                    if self._watch_stopped:
                        return
                    run = self._watched
                    if run is None:
                        self._watch.wait()
                        continue
                    remaining = run.watch_until - time.monotonic()
                    if remaining <= 0:
                        break
                    self._watch.wait(remaining)
                self._watched = None
            try:
                self._motor_deadline(run)
            except Exception as exc:  # the watchdog must outlive any failure
                log.exception("motor watchdog check failed")
                self._latch_fault(Event.FAULT, f"motor watchdog failed: {exc!r}", Fault.INTERNAL)

    def _motor_deadline(self, run: _ShakeRun) -> None:
        """``motor_max_ms`` after the start: the motor must be off and still by now."""
        with self._motor_lock:
            if self._motor_closed:
                return
            if run.overdue:
                return  # the pattern thread cut the motor at this deadline and reported it
            overran = not run.ended
            if overran:  # the pattern did not end in time: cut the motor regardless
                self._end(run)
        if overran:
            reason = f"motor cut at its maximum run time ({self._max_ms()} ms)"
        elif run.number == self._runs and self._is_still_turning():
            reason = f"motor still turning {self._max_ms()} ms after the shake started"
        else:
            return  # off and still, or a newer shake (with its own deadline) has begun
        if self._closed:
            return
        log.error("%s", reason)
        self._latch_fault(Event.MOTOR_OVERRUN, reason)

    def _max_ms(self) -> int:
        return round(self._pattern.motor_max_s * 1000)

    def _is_still_turning(self) -> bool:
        """A motion edge stamped within 1.5 cycles of now (the edge's time, not its callback's)."""
        last = self._last_motion_tick
        if last is None:
            return False
        ago = self._elapsed_s(last, self._ticks())
        return ago is not None and ago < self._pattern.cycle_s * 1.5

    def _elapsed_s(self, earlier: Any, later: Any) -> float | None:
        """Seconds from ``earlier`` to ``later`` (pin factory ticks); None unless ``later`` is
        at or after ``earlier``, within ``_TICKS_HORIZON_S``."""
        seconds = float(self._ticks_diff(later, earlier))
        return seconds if 0.0 <= seconds <= _TICKS_HORIZON_S else None

    # --- inputs (any thread) -----------------------------------------------------------------

    def _motion_edge(self, ticks: Any) -> None:
        """One motion pulse, stamped ``ticks``, on whichever thread delivers it and however
        late: it counts for the latest shake if its window holds the stamp. Under the motor lock
        (a leaf), not the shaker's: it may come from the thread that is writing the motor."""
        with self._motor_lock:
            self._last_motion_tick = ticks
            run = self._run
            if run is not None and not run.void:
                where = self._place(run, ticks)
                if where == "inside" and not run.reported:
                    run.cycles += 1
                    if run.cycles >= self._pattern.cycles:
                        run.settled.set()  # no later pulse could change the verdict
                    return
                if where == "after":
                    # Edges come in timestamp order: every edge of the window is in by now.
                    run.settled.set()
            late = self._reported_window(ticks)
        if late is not None:
            log.warning("shake %d: a motion pulse delivered after its report, not counted", late)
        else:
            log.debug("motion pulse outside a shake's window")

    def _reported_window(self, ticks: Any) -> int | None:
        """Under the motor lock: the number of the reported shake (of the latest two) whose
        window holds ``ticks``: its pulse came too late to count."""
        for run in (self._run, self._prior):
            if run is not None and run.reported and self._place(run, ticks) == "inside":
                return run.number
        return None

    def _place(self, run: _ShakeRun, ticks: Any) -> Place:
        """Under the motor lock: where ``ticks`` falls against ``run``'s motion window:
        ``before`` it (or before the motor was first energised), ``inside`` or ``after``."""
        if run.start_tick is None or self._elapsed_s(run.start_tick, ticks) is None:
            return "before"
        if run.end_tick is None:
            return "inside"
        after = self._elapsed_s(run.end_tick, ticks)
        return "after" if after is not None and after > 0 else "inside"

    def _motion_failed(self, name: str, exc: Exception) -> None:
        """The motion handler raised (a pulse may be lost): the table stops safe, from a thread
        of its own, since the thread that delivered the edge may hold the motor lock (a mock
        pin driven from a motor write) and the latch is tripped holding none of our locks."""
        try:
            threading.Thread(
                target=self._input_failed, args=(name, exc), name="motion-failed", daemon=True
            ).start()
        except RuntimeError:  # no thread to be had: the count stays short, a no roll at worst
            log.exception("the motion handler's failure could not be reported")

    def _lid_changed(self, is_closed: bool) -> None:
        with self._lock:
            if self._closed:
                return
            if not is_closed and self.is_shaking:
                # 621a.11(i): the lid lifted during the shake voids it; the motor stops first.
                self._cut_now("lid opened")
            self._emit(Event.LID_CLOSED if is_closed else Event.LID_OPENED)

    def _tamper_changed(self, is_secured: bool) -> None:
        with self._lock:
            if self._closed:
                return
            if is_secured:
                log.warning("tamper loop closed again (the fault stays until cleared)")
                self._emit(Event.SECURED)
                return
        try:
            self._cut_now("tamper")
        finally:  # latched even if the cut failed: the latch drives the motor once more
            self._latch_fault(Event.TAMPER, "shaker removed or tilted")

    def _input_failed(self, name: str, exc: Exception) -> None:
        """An input's handler raised: its event may be lost, so the table stops safe."""
        self._latch_fault(
            Event.FAULT, f"{name} input handler failed: {exc!r}", fault=Fault.INTERNAL
        )

    def _latch_fault(self, event: Event, reason: str, fault: Fault | None = None) -> None:
        """Holding none of the shaker's locks: every output safe first, then the control
        thread told."""
        try:
            if self._latch is not None:
                self._latch.trip(f"{event}: {reason}")
        finally:
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
            occurrence(event, at=self._clock(), cycles=cycles, fault=fault, detail=detail)
        )

    def _release_devices(self) -> None:
        for debounced in self._inputs:
            try:
                debounced.close()
            except Exception:  # release the rest regardless
                log.exception("closing input %s failed", debounced.name)
        self._inputs.clear()
        if self._motion is not None:
            self._motion.close()
            self._motion = None
        with self._motor_lock:
            try:
                self._write_motor(MOTOR_SAFE_VALUE)
            finally:
                self._motor_closed = True
        self._motor.close()
