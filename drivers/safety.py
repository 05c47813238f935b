"""The one fault latch: every output of the table, driven to its safe value at once.

Modelled on Klipper's ``invoke_shutdown``: each output registers a handler that drives it to the
safe value it declares (motor off, shake lamp off, status lamp red). ``trip`` runs every handler
once per fault, each guarded, so that one failing output cannot keep the others energised; a
failure is logged and the rest go on. ``trip`` is idempotent and safe from any thread (a gpiozero
callback, the motor watchdog, the control thread) and from a signal handler; a second trip while
latched adds nothing. The control thread calls ``reset`` once the core has cleared the fault.

The latch's lock guards only its own bookkeeping: the latch marks itself tripped under it, then
calls each handler outside it, so a handler may take its driver's locks in any thread without a
lock-order cycle (the order is written down in :mod:`drivers`). ``is_tripped`` and ``reason`` are
read without the lock.

When ``trip`` returns, every output has been driven safe, with two exceptions on the thread that
is itself driving them (a handler that trips again, or a signal handler that interrupted a
handler): those return ``False`` at once and the drive completes when control returns to it. A
trip from another thread while the first trip's handlers run waits for them, except on the main
thread: Python runs signal handlers there, between any two bytecodes, so the main thread may
hold a lock that the running handler needs. It drives the outputs itself instead (every handler
is idempotent) and never waits for another thread here. So a handler must not wait for another
thread that may trip the latch. The latch logs only after the outputs are driven, and a log
that fails (a signal handler's write to a stream its own thread was writing) is dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

log = logging.getLogger(__name__)


def _log(level: int, message: str, *args: object, exc_info: bool = False) -> None:
    """Logging never stops the latch. From a signal handler the log stream may be in the middle
    of a write on the same thread, and the re-entered write raises (``RuntimeError``)."""
    with contextlib.suppress(Exception):
        log.log(level, message, *args, exc_info=exc_info)


class SignalSafeFlag:
    """A flag set once and waited for, which a signal handler may set.

    ``threading.Event.set`` takes the lock of the event's condition: a signal handler that sets
    an event while its own thread was inside that event's ``set`` or ``wait`` deadlocks. Here
    ``set`` is one C call (releasing a lock), which a signal handler cannot interrupt.
    """

    __slots__ = ("_gate", "_is_set")

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()  # closed: waiters block on it until ``set`` opens it
        self._is_set = False

    def is_set(self) -> bool:
        return self._is_set

    def set(self) -> None:
        self._is_set = True
        with contextlib.suppress(RuntimeError):  # already open
            self._gate.release()

    def wait(self, timeout: float | None = None) -> bool:
        """``True`` once set; ``False`` if ``timeout`` seconds passed first."""
        if self._is_set:
            return True
        if timeout is None:
            opened = self._gate.acquire()
        elif timeout <= 0:
            opened = self._gate.acquire(blocking=False)
        else:
            opened = self._gate.acquire(timeout=timeout)
        if opened:
            with contextlib.suppress(RuntimeError):  # opened again by a second set()
                self._gate.release()  # leave it open for the next waiter
        return self._is_set


@dataclass(frozen=True, slots=True)
class SafeOutput:
    """One registered output: its name (for the log) and the handler that drives it safe."""

    name: str
    drive_safe: Callable[[], None]


@dataclass(frozen=True, slots=True, eq=False)
class _Fault:
    """One trip: why, which outputs it drives, which thread drives them and when it is done."""

    reason: str
    outputs: tuple[SafeOutput, ...]
    driver: int  # the thread that drives the outputs
    done: SignalSafeFlag


@dataclass(frozen=True, slots=True, eq=False)
class _State:
    """The latch's state, replaced as a whole (one store) so that every read sees a whole one."""

    fault: _Fault | None  # None while armed
    tripped: SignalSafeFlag  # set by the trip that ends this arming


class FaultLatch:
    """Holds every output's safe handler and drives them all safe, once per fault."""

    def __init__(self) -> None:
        # Re-entrant: a signal handler may trip the latch while its thread is inside a method
        # that holds this lock. It is held only for the bookkeeping below, never around a call
        # to a handler (except in that interrupted case, see ``trip``).
        self._lock = threading.RLock()
        self._outputs: Mapping[str, SafeOutput] = MappingProxyType({})  # replaced, never changed
        self._state = _State(None, SignalSafeFlag())
        # While this thread, holding the lock, is between reading and replacing ``_state``:
        # "trip" or "reset". A trip that finds it set was re-entered from a signal handler.
        self._changing: str | None = None
        self._deferred: list[str] = []  # such trips' reasons, latched once the change is done
        self._local = threading.local()  # .driving: the outputs this thread is driving now

    @property
    def is_tripped(self) -> bool:
        return self._state.fault is not None

    @property
    def reason(self) -> str | None:
        """Why the latch tripped (the first reason), or ``None`` while armed."""
        fault = self._state.fault
        return None if fault is None else fault.reason

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self._outputs)

    def register(self, name: str, drive_safe: Callable[[], None]) -> None:
        """Add an output. Registered while latched, it is driven safe at once."""
        with self._lock:
            if name in self._outputs:
                raise ValueError(f"output {name!r} is already registered")
            output = SafeOutput(name, drive_safe)
            self._outputs = MappingProxyType({**self._outputs, name: output})
        # Checked after the output is in the map: a trip in between drives it either way.
        if self.is_tripped:
            self._drive((output,))

    def unregister(self, name: str) -> None:
        """Remove an output (its driver is closing); unknown names are ignored."""
        with self._lock:
            if name in self._outputs:
                rest = {key: out for key, out in self._outputs.items() if key != name}
                self._outputs = MappingProxyType(rest)

    def trip(self, reason: str) -> bool:
        """Drive every output safe. Returns ``True`` for the trip that latched the fault, ``False``
        if the latch was already tripped (the outputs were driven safe then and stay so)."""
        with self._lock:
            interrupted = self._changing
            if interrupted is not None:
                # This thread was interrupted (a signal handler) between reading and replacing
                # the state: drive the outputs now, latch the fault once that change is done.
                self._deferred.append(reason)
                self._drive(tuple(self._outputs.values()))
                return interrupted == "reset"  # after a reset, this trip is the one that latches
            fault, first = self._latch(reason)
        if first:
            try:
                self._drive(fault.outputs)
            finally:
                fault.done.set()
            _log(logging.ERROR, "fault latch tripped: %s", reason)  # the outputs first
            return True
        _log(logging.DEBUG, "fault latch already tripped (%s); also: %s", fault.reason, reason)
        if fault.driver == threading.get_ident() or fault.done.is_set():
            return False
        if threading.current_thread() is threading.main_thread():
            self._drive(fault.outputs)  # never wait here: see the module's docstring
        else:
            fault.done.wait()
        return False

    def drive_all_safe(self) -> None:
        """Drive every output safe without latching (process shutdown, SIGTERM)."""
        self._drive(tuple(self._outputs.values()))

    def reset(self) -> None:
        """Re-arm after the fault is cleared; the outputs stay safe until commanded."""
        with self._lock:
            self._changing = "reset"
            try:
                state = self._state
                if state.fault is not None:
                    self._state = _State(None, SignalSafeFlag())
            finally:
                self._changing = None
            self._latch_deferred()
        if state.fault is not None:
            _log(logging.WARNING, "fault latch reset (was: %s)", state.fault.reason)

    def wait_for_trip(self, timeout: float | None = None) -> bool:
        state = self._state
        if state.fault is not None:
            return True
        return state.tripped.wait(timeout)

    def _latch(self, reason: str) -> tuple[_Fault, bool]:
        """Under the lock: the fault in force, and whether this call latched it."""
        self._changing = "trip"
        try:
            state = self._state
            if state.fault is not None:
                return state.fault, False
            fault = _Fault(
                reason,
                tuple(self._outputs.values()),
                threading.get_ident(),
                SignalSafeFlag(),
            )
            self._state = _State(fault, state.tripped)
            state.tripped.set()
        finally:
            self._changing = None
        self._latch_deferred()
        return fault, True

    def _latch_deferred(self) -> None:
        """Under the lock: latch the trips that interrupted a change (their caller has driven
        the outputs already)."""
        while self._deferred:
            reason = self._deferred.pop(0)
            fault, first = self._latch(reason)
            if first:
                fault.done.set()
                _log(logging.ERROR, "fault latch tripped: %s", reason)

    def _drive(self, outputs: tuple[SafeOutput, ...]) -> None:
        driving: set[str] = self._local.__dict__.setdefault("driving", set())
        for output in outputs:
            if output.name in driving:
                continue  # this thread is inside that handler: it completes when we return
            driving.add(output.name)
            try:
                output.drive_safe()
            except Exception:  # one output failing must not stop the others
                with contextlib.suppress(Exception):  # nor the log failing (see _log)
                    log.exception("output %s could not be driven to its safe value", output.name)
            finally:
                driving.discard(output.name)
