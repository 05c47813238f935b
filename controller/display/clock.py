"""The table page's clock (issue 16): the box's time, its local offset from UTC, and whether the
operating system says the clock is synchronised to a time source.

:class:`SystemClockStatus` is the ``ClockStatus`` port. It asks the kernel with ``adjtimex(2)``
(``modes`` 0: it reads and changes nothing) through ctypes, never a subprocess: the call
returns ``TIME_ERROR`` and the status word carries ``STA_UNSYNC`` while no time source
disciplines the clock (the kernel also sets them once its estimated error passes 16 s).

The service unit's ``ProtectClock=yes`` and ``SystemCallFilter=~@privileged`` refuse adjtimex
itself (EPERM: a seccomp filter cannot see that the call only reads). The answer then comes
from systemd-timesyncd, Raspberry Pi OS's time service: its run-time directory
``/run/systemd/timesync`` exists while it runs, and ``synchronized`` in it is touched at each
synchronisation. Neither source: None, "cannot tell". An answer is kept ``ttl_s`` (10 s):
the page's heartbeat asks every second.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.ports import ClockStatus

log = logging.getLogger("paigow.display")

TIME_ERROR = 5  # adjtimex's clock state: not synchronised
STA_UNSYNC = 0x0040  # the status bit: not synchronised
TIMESYNC_DIR = Path("/run/systemd/timesync")  # systemd-timesyncd's RuntimeDirectory=
CLOCK_STATUS_TTL_S = 10.0

KernelClock = Callable[[], tuple[int, int]]


class _Timex(ctypes.Structure):
    """``struct timex`` of <sys/timex.h> (the ``long`` fields are the C library's ``long``,
    as its ``adjtimex`` symbol has them), with room to spare after the reserved words."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time_sec", ctypes.c_long),
        ("time_usec", ctypes.c_long),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("reserved", ctypes.c_int * 11),
        ("slack", ctypes.c_byte * 128),
    ]


@functools.cache
def _libc_adjtimex() -> Any:
    """This process's C library's ``adjtimex``, looked up once."""
    try:
        function = ctypes.CDLL(None, use_errno=True).adjtimex
    except (OSError, AttributeError) as exc:
        raise OSError(errno.ENOSYS, f"no adjtimex in the C library: {exc}") from None
    function.argtypes = [ctypes.POINTER(_Timex)]
    function.restype = ctypes.c_int
    return function


def kernel_clock_state() -> tuple[int, int]:
    """``adjtimex(2)`` with ``modes`` 0: the clock state it returns and the status word.
    Raises OSError when the call fails (EPERM under a seccomp filter)."""
    adjtimex = _libc_adjtimex()
    timex = _Timex()  # zeroed: modes 0
    state = adjtimex(ctypes.byref(timex))
    if state == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(state), int(timex.status)


def is_synchronised_state(state: int, status: int) -> bool:
    """adjtimex's answer read: ``TIME_ERROR`` or ``STA_UNSYNC`` is a clock that no time
    source keeps; any other state (OK, a leap second pending or in progress) is kept."""
    return state != TIME_ERROR and not status & STA_UNSYNC


def timesyncd_synchronised(directory: Path = TIMESYNC_DIR) -> bool | None:
    """systemd-timesyncd's answer: its directory with ``synchronized`` in it, True; without,
    False (running, not synchronised since it started); no directory, None (not running)."""
    try:
        (directory / "synchronized").stat()
        return True
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        return False if directory.is_dir() else None
    except OSError:
        return None


class SystemClockStatus:
    """The ``ClockStatus`` port over the kernel (and systemd-timesyncd where the kernel's
    answer is refused), each answer kept ``ttl_s``. ``kernel`` and ``monotonic`` are injected
    by tests."""

    def __init__(
        self,
        *,
        ttl_s: float = CLOCK_STATUS_TTL_S,
        kernel: KernelClock = kernel_clock_state,
        timesync_dir: Path = TIMESYNC_DIR,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._kernel = kernel
        self._timesync_dir = timesync_dir
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._answer: bool | None = None
        self._asked_at: float | None = None
        self._said_why = False

    def is_synchronised(self) -> bool | None:
        with self._lock:
            now = self._monotonic()
            if self._asked_at is None or now - self._asked_at >= self._ttl_s:
                self._answer = self._ask()
                self._asked_at = now
            return self._answer

    def _ask(self) -> bool | None:
        try:
            state, status = self._kernel()
        except OSError as exc:
            if not self._said_why:  # once: it will not change while the process runs
                self._said_why = True
                log.info("clock status: adjtimex refused (%s); asking systemd-timesyncd", exc)
            return timesyncd_synchronised(self._timesync_dir)
        return is_synchronised_state(state, status)


def page_clock(
    status: ClockStatus, *, now_ns: Callable[[], int] = time.time_ns
) -> dict[str, int | bool | None]:
    """What the page is told of the time: UTC milliseconds now, the local offset from UTC in
    minutes (the box's time zone, daylight saving time included), whether it is synchronised."""
    now = now_ns()
    offset_s = time.localtime(now // 1_000_000_000).tm_gmtoff
    return {
        "now_ms": now // 1_000_000,
        "tz_offset_min": offset_s // 60,
        "synchronised": status.is_synchronised(),
    }
