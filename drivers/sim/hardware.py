"""Simulated shaker and panel hardware on gpiozero's mock pins, for tests and ``simulate``.

Build it on a ``MockFactory(pin_class=SimPin)`` *before* the drivers: it claims the pins
with its own mock pin classes, which the drivers then receive from the factory.

* The motor pin (:class:`SimMotorPin`) reports every change to :class:`SimShaker`. Each stroke
  (the motor on, then off) makes the motion sensor pulse once as it ends: the crank's magnet
  has passed the hall sensor. The pulse is given on the thread that wrote the motor, before
  that write returns, so the count a driver reads once its pattern has ended holds every stroke
  of it however late any thread runs: a slow or loaded CPU makes a shake take longer, never
  makes it count fewer strokes (the simulation keeps its own time). The shake is over when the
  pattern's last stroke ends (or, for one cut short, when the motor has stayed off for
  ``CUT_REST_S``), and ``on_shake_end`` is called (the harness rolls the simulated dice there).
* Inputs (:class:`SimContactPin`) model a contact or an open-collector output to ground, on a
  line with a pull-up: closed reads low whatever the driver's pull, open reads the pull. So the
  lid switch and the tamper loop keep their state while the drivers set their pins up.
* :class:`ShakerFaults` injects the failures the driver must survive: fewer pulses than
  strokes, none at all, a motor driver failed on (the motion goes on after the cut, so only the
  driver's own watchdog reports it), the lid lifted mid-shake.
* :class:`SimPanel` presses and releases the keys with contact bounce and reads back the lamps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpiozero.pins.mock import MockPWMPin

from controller.core.config import PinsConfig, ShakerConfig
from controller.core.state import Screen
from controller.ports import SensorIdentity

log = logging.getLogger(__name__)


PIN_HISTORY = 256  # changes a simulated pin keeps (gpiozero's mock pins keep every one)
CUT_REST_S = 0.5  # the motor off this long mid-pattern: the shake was cut short, it is over


class SimPin(MockPWMPin):  # type: ignore[misc]  # gpiozero is untyped
    """gpiozero's mock PWM pin with a bounded history: its ``states`` list keeps the last
    ``PIN_HISTORY`` changes at most, so a simulation of any length runs in constant memory."""

    def _change_state(self, value: Any) -> bool:
        changed = bool(super()._change_state(value))
        if changed and len(self.states) > 2 * PIN_HISTORY:
            del self.states[:-PIN_HISTORY]
        return changed


class SimContactPin(SimPin):
    """An input line that a contact (or an open-collector sensor) can pull to ground."""

    def __init__(self, factory: Any, info: Any) -> None:
        self._pulled_low = False
        super().__init__(factory, info)

    def _set_pull(self, value: str) -> None:
        super()._set_pull(value)
        self._apply()

    def set_contact(self, closed: bool) -> None:
        """Close (pull to ground) or open the contact; the driver's callbacks fire at once."""
        self._pulled_low = closed
        self._apply()

    @property
    def is_contact_closed(self) -> bool:
        return self._pulled_low

    def _apply(self) -> None:
        if self._function != "input":
            return
        if self._pulled_low or self._pull == "down":
            self.drive_low()
        elif self._pull == "up":
            self.drive_high()


class SimMotorPin(SimPin):
    """The motor's PWM line; each change is reported to ``listener`` (on the writer's thread)."""

    def __init__(self, factory: Any, info: Any) -> None:
        self.listener: Callable[[float], None] | None = None
        super().__init__(factory, info)

    def _change_state(self, value: Any) -> bool:
        changed = bool(super()._change_state(value))
        listener = self.listener
        if changed and listener is not None:
            listener(float(value))
        return changed


@dataclass(frozen=True, slots=True)
class ShakerFaults:
    """Failures of the simulated shaker. The default is a healthy shaker."""

    max_pulses: int | None = None  # pulses per shake at most: 2 = too few, 0 = a dead sensor
    motor_keeps_running: bool = False  # the motor driver failed on: motion goes on after the cut
    run_on_ms: int = 5000  # how long such a motor goes on turning
    open_lid_after_pulses: int | None = None  # lifted as the stroke after this many pulses starts


class SimShaker:
    """The shaker's mechanics behind the motor, motion, lid and tamper pins."""

    def __init__(
        self,
        factory: Any,
        pins: PinsConfig,
        config: ShakerConfig,
        *,
        faults: ShakerFaults = ShakerFaults(),
        on_shake_end: Callable[[], None] | None = None,
        pulse_ms: int = 5,
        lid_closed: bool = True,
        secured: bool = True,
    ) -> None:
        self.faults = faults
        self.on_shake_end = on_shake_end
        self._cycle_s = config.cycle_ms / 1000
        self._cycles = config.cycles
        self._pulse_s = pulse_ms / 1000  # a pulse of a motor that runs on after the cut
        self._lock = threading.Condition(threading.RLock())
        self._closed = False
        self._in_shake = False
        self._shake_pulses = 0
        self._shake_strokes = 0
        self._pulses = 0
        self._shakes = 0
        self._motor_on = False
        self._timers: set[threading.Timer] = set()
        self._end_timer: threading.Timer | None = None
        self._run_on_until = 0.0
        self._run_on_thread: threading.Thread | None = None
        self.motor_pin: SimMotorPin = factory.pin(pins.motor, pin_class=SimMotorPin)
        self.motion_pin: SimContactPin = factory.pin(pins.motion_sensor, pin_class=SimContactPin)
        self.lid_pin: SimContactPin = factory.pin(pins.lid_switch, pin_class=SimContactPin)
        self.tamper_pin: SimContactPin = factory.pin(pins.tamper_switch, pin_class=SimContactPin)
        self.lid_pin.set_contact(lid_closed)
        self.tamper_pin.set_contact(secured)
        self.motor_pin.listener = self._motor_changed

    # --- what a test or the harness does -------------------------------------------------------

    @property
    def motor_value(self) -> float:
        return float(self.motor_pin.state)

    @property
    def pulses(self) -> int:
        """Motion pulses given since the simulator was built."""
        with self._lock:
            return self._pulses

    @property
    def shakes(self) -> int:
        """Shakes that have ended (the motor off for a whole cycle)."""
        with self._lock:
            return self._shakes

    def wait_for_pulses(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` pulses have been given in all."""
        with self._lock:
            return self._lock.wait_for(lambda: self._pulses >= count, timeout)

    def wait_for_motor(self, *, running: bool, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._motor_on is running, timeout)

    def open_lid(self, *, bounces: int = 0) -> None:
        _bounce(self.lid_pin, closed=False, bounces=bounces)

    def close_lid(self, *, bounces: int = 0) -> None:
        _bounce(self.lid_pin, closed=True, bounces=bounces)

    def remove(self) -> None:
        """The shaker lifted off its mount or tilted: the tamper loop opens."""
        self.tamper_pin.set_contact(False)

    def secure(self) -> None:
        self.tamper_pin.set_contact(True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self.motor_pin.listener = None
            timers = [*self._timers, *([self._end_timer] if self._end_timer else [])]
            self._timers.clear()
            self._end_timer = None
            self._run_on_until = 0.0
            self._lock.notify_all()
        for timer in timers:
            timer.cancel()
        thread = self._run_on_thread
        if thread is not None:
            thread.join(timeout=2)

    def __enter__(self) -> SimShaker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the mechanics -----------------------------------------------------------------------

    def _motor_changed(self, value: float) -> None:
        """On the thread that wrote the motor (the driver's pattern thread, under its motor
        lock): the stroke's pulse is given here, outside this simulator's lock."""
        pulse = lift = landed = False
        with self._lock:
            if self._closed:
                return
            was_on, self._motor_on = self._motor_on, value > 0
            self._lock.notify_all()
            if self._motor_on and not was_on:
                if not self._in_shake:
                    self._in_shake = True
                    self._shake_pulses = 0
                    self._shake_strokes = 0
                self._shake_strokes += 1
                lid_after = self.faults.open_lid_after_pulses
                lift = lid_after is not None and self._shake_pulses == lid_after
                if self._end_timer is not None:
                    self._end_timer.cancel()
                    self._timers.discard(self._end_timer)  # a cancelled timer never runs
                    self._end_timer = None
            elif was_on and not self._motor_on:
                pulse = self._stroke_ends()
                # The dice come to rest with the pattern's last stroke (here, before the driver
                # can report the shake done); after any other stroke the shake is over once the
                # motor has stayed off for a cycle and CUT_REST_S at least (a shake cut short),
                # a rest no stroke of a pattern waits, however slowly its thread runs.
                landed = self._shake_strokes >= self._cycles
                if not landed:
                    rest_s = max(self._cycle_s, CUT_REST_S)
                    self._end_timer = self._start_timer(rest_s, self._shake_over)
                if self.faults.motor_keeps_running and self._run_on_thread is None:
                    self._run_on_until = time.monotonic() + self.faults.run_on_ms / 1000
                    thread = threading.Thread(target=self._run_on, name="sim-run-on", daemon=True)
                    self._run_on_thread = thread
                    thread.start()
        if pulse:
            self._pulse()
        if landed:
            self._shake_over()
        if lift:
            # Not on the writer's thread: the driver takes its shaker lock for a lid change,
            # which a thread holding its motor lock must not (the drivers' lock order).
            self._later(0.0, self.open_lid)

    def _stroke_ends(self) -> bool:
        """Under the lock: whether the stroke that ends now passes the magnet by the sensor."""
        limit = self.faults.max_pulses
        if limit is not None and self._shake_pulses >= limit:
            return False
        self._shake_pulses += 1
        return True

    def _pulse(self, held_s: float = 0.0) -> None:
        """The hall sensor pulls its line low while the magnet passes, ``held_s`` (0: its two
        edges at once, on the thread that wrote the motor; the driver counts the first)."""
        self.motion_pin.set_contact(True)
        if held_s:
            time.sleep(held_s)
        self.motion_pin.set_contact(False)
        with self._lock:
            self._pulses += 1
            self._lock.notify_all()

    def _run_on(self) -> None:
        """A motor driver failed on: the shaker goes on moving whatever the PWM line says."""
        while True:
            with self._lock:
                if not self._is_running_on():
                    self._run_on_thread = None
                    return
                self._lock.wait(self._cycle_s)
                if not self._is_running_on():
                    self._run_on_thread = None
                    return
            self._pulse(self._pulse_s)

    def _is_running_on(self) -> bool:
        return not self._closed and time.monotonic() < self._run_on_until

    def _shake_over(self) -> None:
        with self._lock:
            if self._closed or self._motor_on or not self._in_shake:
                return
            self._in_shake = False
            self._end_timer = None
            self._shakes += 1
            self._lock.notify_all()
            hook = self.on_shake_end
        if hook is not None:
            try:
                hook()
            except Exception:
                log.exception("on_shake_end hook failed")

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        self._start_timer(delay, action)

    def _start_timer(self, delay: float, action: Callable[[], None]) -> threading.Timer:
        def run() -> None:
            with self._lock:
                self._timers.discard(timer)
            action()

        timer = threading.Timer(delay, run)
        timer.daemon = True
        self._timers.add(timer)
        timer.start()
        return timer


# The panel's inputs, by the names of PinsConfig.
PANEL_KEYS = (
    "shake_button",
    "key_no_more_bets",
    "key_close_round",
    "key_void_round",
    "key_clear_fault",
    "key_dice_set",
    "key_bank_seat",
    "key_style",
    "key_shift_change",
    "key_shuffle",
    "supervisor_key",
)


class SimPanel:
    """The dealer's keys and the player's button, pressed with contact bounce; lamps read back."""

    def __init__(self, factory: Any, pins: PinsConfig, *, bounce_gap_ms: float = 1.0) -> None:
        self._gap_s = bounce_gap_ms / 1000
        self.keys: Mapping[str, SimContactPin] = {
            name: factory.pin(getattr(pins, name), pin_class=SimContactPin) for name in PANEL_KEYS
        }
        self._lamps = {
            name: factory.pin(getattr(pins, name))
            for name in ("shake_button_lamp", "lamp_red", "lamp_green", "lamp_blue")
        }

    def press(self, key: str, *, bounces: int = 3) -> None:
        """Close the key's contact, bouncing ``bounces`` times first (a millisecond apart)."""
        _bounce(self.keys[key], closed=True, bounces=bounces, gap_s=self._gap_s)

    def release(self, key: str, *, bounces: int = 3) -> None:
        _bounce(self.keys[key], closed=False, bounces=bounces, gap_s=self._gap_s)

    def turn_supervisor_key(self, on: bool) -> None:
        """The key switch has a clean detent: no bounce."""
        self.keys["supervisor_key"].set_contact(on)

    def lamp_pin(self, name: str) -> Any:
        """The mock pin of ``shake_button_lamp``, ``lamp_red``, ``lamp_green`` or ``lamp_blue``."""
        return self._lamps[name]

    @property
    def is_shake_lamp_on(self) -> bool:
        return bool(self._lamps["shake_button_lamp"].state)

    @property
    def status_colour(self) -> tuple[int, int, int]:
        r, g, b = (int(bool(self._lamps[n].state)) for n in ("lamp_red", "lamp_green", "lamp_blue"))
        return r, g, b


def _bounce(pin: SimContactPin, *, closed: bool, bounces: int, gap_s: float = 0.001) -> None:
    """A mechanical contact changing state: it chatters ``bounces`` times, then settles."""
    for _ in range(bounces):
        pin.set_contact(closed)
        time.sleep(gap_s)
        pin.set_contact(not closed)
        time.sleep(gap_s)
    pin.set_contact(closed)


class StillTable:
    """Every hardware port of the table standing still: the display, the panel, the shaker,
    the fault latch and the dice sensor, each call accepted and nothing done. For driving the
    control loop with scripted events (tests, log generators); a subclass keeps what it
    watches (the screens shown, the trips)."""

    IDENTITY = SensorIdentity("still", "0", "0", 1)

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        return None

    def show_status(
        self, screen: Screen, *, player_bank: bool = False, dice_alarm: bool = False
    ) -> None:
        return None

    def lamp_test(self) -> None:
        return None

    def start_shake(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def drive_safe(self) -> None:
        return None

    def trip(self, reason: str) -> bool:
        return True

    def reset(self) -> None:
        return None

    def open(self) -> SensorIdentity:
        return self.IDENTITY

    def request_read(self, *, round_number: int, attempt: int) -> None:
        return None

    def close(self) -> None:
        return None
