"""Debounced digital inputs, the same on real pins and on gpiozero's mock pins.

gpiozero's ``bounce_time`` is done by the pin library on a Pi (lgpio) but not at all by
``MockPin``, so the drivers debounce in software: the behaviour the tests see is the behaviour
of the table. A change is accepted once the input has been steady for ``debounce_s`` (a bouncing
contact or a short spike gives nothing, a held button one change). A safety-relevant direction
(the lid opening, the tamper loop breaking) may be taken on its first edge instead, so the motor
is cut at once; the settle check afterwards still reports the input's true final state.

Edge callbacks arrive on the thread that changed the pin (a test's, with ``MockPin``) or on the
pin library's thread (real pins); the settle check runs on a timer thread. A lock orders them,
and ``on_change`` is called under it, so it must be quick: drivers only enqueue events there or
cut the motor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from gpiozero import DigitalInputDevice

from controller.clock import monotonic_ms

__all__ = ["DebouncedInput", "debounced_input", "monotonic_ms"]

log = logging.getLogger(__name__)


class DebouncedInput:
    """A gpiozero digital input whose changes of ``is_active`` reach ``on_change`` debounced.

    ``device`` is a gpiozero ``DigitalInputDevice`` (or ``Button``) created without
    ``bounce_time``; this class takes over its ``when_activated`` / ``when_deactivated``.
    ``immediate`` names the value (``True`` = active, ``False`` = inactive) taken on its first
    edge; ``None`` debounces both directions.
    """

    def __init__(
        self,
        name: str,
        device: Any,
        on_change: Callable[[bool], None],
        *,
        debounce_s: float,
        immediate: bool | None = None,
    ) -> None:
        if debounce_s <= 0:
            raise ValueError("debounce_s must be positive")
        self.name = name
        self._device = device
        self._on_change = on_change
        self._debounce_s = debounce_s
        self._immediate = immediate
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self._stable = self._read()
        device.when_activated = self._edge
        device.when_deactivated = self._edge

    @property
    def is_active(self) -> bool:
        """The debounced state. Read without the lock (a bool read is atomic) so that a driver
        may ask while holding its own lock, which the change handler also takes."""
        return self._stable

    @property
    def raw_is_active(self) -> bool:
        return self._read()

    def close(self) -> None:
        """Stop reporting and release the pin. May be called twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        try:
            self._device.when_activated = None
            self._device.when_deactivated = None
        finally:
            self._device.close()

    def _read(self) -> bool:
        return bool(self._device.is_active)

    def _edge(self) -> None:
        with self._lock:
            if self._closed:
                return
            raw = self._read()
            if self._immediate is not None and raw is self._immediate and raw != self._stable:
                self._accept(raw)
            self._arm_settle()

    def _arm_settle(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        timer = threading.Timer(self._debounce_s, self._settle)
        timer.name = f"debounce-{self.name}"
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _settle(self) -> None:
        with self._lock:
            if self._closed or threading.current_thread() is not self._timer:
                return  # closed, or superseded by a later edge
            self._timer = None
            raw = self._read()
            if raw != self._stable:
                self._accept(raw)

    def _accept(self, value: bool) -> None:
        self._stable = value
        try:
            self._on_change(value)
        except Exception:  # a callback error must not kill the pin's thread
            log.exception("input %s: handler failed", self.name)


def debounced_input(
    name: str,
    pin: int | str,
    on_change: Callable[[bool], None],
    *,
    pin_factory: Any,
    debounce_s: float,
    immediate: bool | None = None,
) -> DebouncedInput:
    """A contact to ground on ``pin`` (internal pull-up, active low), debounced. The gpiozero
    device is closed again if the debouncer cannot be set up."""
    device = DigitalInputDevice(pin, pull_up=True, pin_factory=pin_factory)
    try:
        return DebouncedInput(name, device, on_change, debounce_s=debounce_s, immediate=immediate)
    except BaseException:
        device.close()
        raise
