"""Debounced digital inputs, the same on real pins and on gpiozero's mock pins.

gpiozero's ``bounce_time`` is done by the pin library on a Pi (lgpio) but not at all by
``MockPin``, so the drivers debounce in software: the behaviour the tests see is the behaviour
of the table. A change is accepted once the input has been steady for ``debounce_s`` (a bouncing
contact or a short spike gives nothing, a held button one change). A safety-relevant direction
(the lid opening, the tamper loop breaking) may be taken on its first edge instead, so the motor
is cut at once; the settle check afterwards still reports the input's true final state.

Edge callbacks arrive on the thread that changed the pin (a test's, with ``MockPin``) or on the
pin library's thread (real pins). Each input has one settle thread, started by its first edge
and kept until ``close``: an edge moves its deadline and wakes it, and while nothing happens it
blocks without a timeout (no timer per edge, no periodic wake-ups). A lock orders edges and
settle checks, and ``on_change`` is called under it, so it must be quick: drivers only enqueue
events there, cut the motor or trip the fault latch. This lock is first in the lock order of
:mod:`drivers`.

A handler that raises must not kill the pin's thread, nor pass unnoticed: the exception is
logged and given to ``on_error``, which the drivers wire to the fault latch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gpiozero import DigitalInputDevice

from controller.ports import monotonic_ms

__all__ = ["DebouncedInput", "InputErrorHandler", "debounced_input", "monotonic_ms"]

log = logging.getLogger(__name__)

InputErrorHandler = Callable[[str, Exception], None]  # (the input's name, what its handler raised)

_JOIN_S = 2.0  # how long ``close`` waits for the settle thread to finish a handler


class DebouncedInput:
    """A gpiozero digital input whose changes of ``is_active`` reach ``on_change`` debounced.

    ``device`` is a gpiozero ``DigitalInputDevice`` (or ``Button``) created without
    ``bounce_time``; this class takes over its ``when_activated`` / ``when_deactivated``.
    ``immediate`` names the value (``True`` = active, ``False`` = inactive) taken on its first
    edge; ``None`` debounces both directions. ``on_error`` is told when ``on_change`` raises.
    """

    def __init__(
        self,
        name: str,
        device: Any,
        on_change: Callable[[bool], None],
        *,
        debounce_s: float,
        immediate: bool | None = None,
        on_error: InputErrorHandler | None = None,
    ) -> None:
        if debounce_s <= 0:
            raise ValueError("debounce_s must be positive")
        self.name = name
        self._device = device
        self._on_change = on_change
        self._on_error = on_error
        self._debounce_s = debounce_s
        self._immediate = immediate
        self._lock = threading.RLock()
        self._settle = threading.Condition(self._lock)
        self._deadline: float | None = None  # when the input will have been steady long enough
        self._closed = False
        self._wakeups = 0
        self._stable = self._read()
        self._thread: threading.Thread | None = None  # started by the first edge
        device.when_activated = self._edge
        device.when_deactivated = self._edge

    @property
    def is_active(self) -> bool:
        """The debounced state. Read without the lock (a bool read is atomic) so that a driver
        may ask while holding its own lock, which the change handler also takes."""
        return self._stable

    @property
    def wakeups(self) -> int:
        """How often the settle thread has woken: once per settle at most, never while idle."""
        return self._wakeups

    def close(self) -> None:
        """Stop reporting and release the pin. May be called twice, from any thread."""
        if not self._stop_thread():
            return
        try:
            self._device.when_activated = None
            self._device.when_deactivated = None
        finally:
            self._device.close()

    def _stop_thread(self) -> bool:
        """The settle thread told to end and waited for; ``False`` if it already was."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            self._settle.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_S)
            if thread.is_alive():
                log.warning("input %s: the settle thread is still in its handler", self.name)
        return True

    def _read(self) -> bool:
        return bool(self._device.is_active)

    def _edge(self) -> None:
        with self._lock:
            if self._closed:
                return
            raw = self._read()
            if self._immediate is not None and raw is self._immediate and raw != self._stable:
                self._accept(raw)
            self._deadline = time.monotonic() + self._debounce_s
            if self._thread is not None:
                self._settle.notify()
                return
            thread = threading.Thread(
                target=self._settle_loop, name=f"debounce-{self.name}", daemon=True
            )
            try:
                thread.start()
            except RuntimeError as exc:  # no thread to be had: the next edge tries again
                log.exception("input %s: no settle thread", self.name)
                self._report(exc)
                return
            self._thread = thread

    def _settle_loop(self) -> None:
        with self._lock:
            while not self._closed:
                try:
                    self._settle_step()
                except Exception as exc:  # a pin that cannot be read: report it, keep running
                    log.exception("input %s: settle check failed", self.name)
                    self._report(exc)

    def _settle_step(self) -> None:
        """Under the lock: wait for the deadline (or, idle, for an edge), then check."""
        deadline = self._deadline
        if deadline is None:
            self._settle.wait()
            self._wakeups += 1
            return
        remaining = deadline - time.monotonic()
        if remaining > 0:
            self._settle.wait(remaining)
            self._wakeups += 1
            return
        self._deadline = None
        raw = self._read()
        if raw != self._stable:
            self._accept(raw)

    def _accept(self, value: bool) -> None:
        self._stable = value
        try:
            self._on_change(value)
        except Exception as exc:  # a callback error must not kill the pin's thread
            log.exception("input %s: handler failed", self.name)
            self._report(exc)

    def _report(self, exc: Exception) -> None:
        if self._on_error is None:
            return
        try:
            self._on_error(self.name, exc)
        except Exception:  # nor may the error handler's
            log.exception("input %s: error handler failed", self.name)


def debounced_input(
    name: str,
    pin: int | str,
    on_change: Callable[[bool], None],
    *,
    pin_factory: Any,
    debounce_s: float,
    immediate: bool | None = None,
    on_error: InputErrorHandler | None = None,
) -> DebouncedInput:
    """A contact to ground on ``pin`` (internal pull-up, active low), debounced. The gpiozero
    device is closed again if the debouncer cannot be set up."""
    device = DigitalInputDevice(pin, pull_up=True, pin_factory=pin_factory)
    try:
        return DebouncedInput(
            name,
            device,
            on_change,
            debounce_s=debounce_s,
            immediate=immediate,
            on_error=on_error,
        )
    except BaseException:
        device.close()
        raise
