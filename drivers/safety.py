"""The one fault latch: every output of the table, driven to its safe value at once.

Modelled on Klipper's ``invoke_shutdown``: each output registers a handler that drives it to the
safe value it declares (motor off, shake lamp off, status lamp red). ``trip`` runs every handler
once, each guarded, so that one failing output cannot keep the others energised; a failure is
logged and the rest go on. ``trip`` is idempotent and safe from any thread (a gpiozero callback,
the motor watchdog, a signal handler, the control thread); a second trip while latched adds
nothing. The control thread calls ``reset`` once the core has cleared the fault.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SafeOutput:
    """One registered output: its name (for the log) and the handler that drives it safe."""

    name: str
    drive_safe: Callable[[], None]


class FaultLatch:
    """Holds every output's safe handler and drives them all safe, once per fault."""

    def __init__(self) -> None:
        # Re-entrant: a handler that trips the latch again (or registers) must not deadlock.
        self._lock = threading.RLock()
        self._outputs: dict[str, SafeOutput] = {}
        self._reason: str | None = None
        self._tripped = threading.Event()

    @property
    def is_tripped(self) -> bool:
        return self._tripped.is_set()

    @property
    def reason(self) -> str | None:
        """Why the latch tripped (the first reason), or ``None`` while armed."""
        with self._lock:
            return self._reason

    @property
    def outputs(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._outputs)

    def register(self, name: str, drive_safe: Callable[[], None]) -> None:
        """Add an output. Registered while latched, it is driven safe at once."""
        with self._lock:
            if name in self._outputs:
                raise ValueError(f"output {name!r} is already registered")
            output = SafeOutput(name, drive_safe)
            self._outputs[name] = output
            if self._tripped.is_set():
                self._drive(output)

    def unregister(self, name: str) -> None:
        """Remove an output (its driver is closing); unknown names are ignored."""
        with self._lock:
            self._outputs.pop(name, None)

    def trip(self, reason: str) -> bool:
        """Drive every output safe. Returns ``True`` for the trip that did it, ``False`` if the
        latch was already tripped (the outputs were driven safe then and stay so)."""
        with self._lock:
            if self._tripped.is_set():
                log.debug("fault latch already tripped (%s); also: %s", self._reason, reason)
                return False
            self._reason = reason
            self._tripped.set()
            log.error("fault latch tripped: %s", reason)
            for output in tuple(self._outputs.values()):
                self._drive(output)
            return True

    def drive_all_safe(self) -> None:
        """Drive every output safe without latching (process shutdown, SIGTERM)."""
        with self._lock:
            for output in tuple(self._outputs.values()):
                self._drive(output)

    def reset(self) -> None:
        """Re-arm after the fault is cleared; the outputs stay safe until commanded."""
        with self._lock:
            if self._tripped.is_set():
                log.warning("fault latch reset (was: %s)", self._reason)
            self._reason = None
            self._tripped.clear()

    def wait_for_trip(self, timeout: float | None = None) -> bool:
        return self._tripped.wait(timeout)

    @staticmethod
    def _drive(output: SafeOutput) -> None:
        try:
            output.drive_safe()
        except Exception:  # one output failing must not stop the others
            log.exception("output %s could not be driven to its safe value", output.name)
