"""The table page's clock (issue 16): whether the OS says the clock is synchronised, read from
adjtimex's answer (or systemd-timesyncd's flag where adjtimex is refused), kept 10 s."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from controller.display.clock import (
    STA_UNSYNC,
    TIME_ERROR,
    SystemClockStatus,
    is_synchronised_state,
    kernel_clock_state,
    page_clock,
    timesyncd_synchronised,
)

TIME_OK, TIME_INS, TIME_DEL, TIME_OOP, TIME_WAIT = 0, 1, 2, 3, 4
STA_PLL = 0x0001


class FakeKernel:
    """adjtimex as a test says it answers: (state, status), or an OSError."""

    def __init__(self, answer: tuple[int, int] | OSError) -> None:
        self.answer = answer
        self.calls = 0

    def __call__(self) -> tuple[int, int]:
        self.calls += 1
        if isinstance(self.answer, OSError):
            raise self.answer
        return self.answer


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("state", "status", "synchronised"),
    [
        (TIME_OK, STA_PLL, True),
        (TIME_INS, STA_PLL, True),  # a leap second announced: still kept by its source
        (TIME_DEL, 0, True),
        (TIME_OOP, 0, True),
        (TIME_WAIT, 0, True),
        (TIME_ERROR, STA_UNSYNC, False),  # what a box without a time source says
        (TIME_ERROR, STA_PLL, False),  # the kernel's estimated error is past 16 s
        (TIME_OK, STA_PLL | STA_UNSYNC, False),  # the daemon marked it unsynchronised
    ],
)
def test_adjtimex_answers_are_read(state: int, status: int, synchronised: bool) -> None:
    assert is_synchronised_state(state, status) is synchronised
    fake = FakeKernel((state, status))
    assert SystemClockStatus(kernel=fake).is_synchronised() is synchronised


def test_the_answer_is_kept_ten_seconds() -> None:
    kernel = FakeKernel((TIME_OK, 0))
    clock = FakeMonotonic()
    status = SystemClockStatus(kernel=kernel, monotonic=clock)
    assert status.is_synchronised() is True
    kernel.answer = (TIME_ERROR, STA_UNSYNC)
    clock.now += 9.9
    assert status.is_synchronised() is True  # kept
    assert kernel.calls == 1
    clock.now += 0.1
    assert status.is_synchronised() is False  # asked again
    assert kernel.calls == 2


def test_refused_adjtimex_asks_systemd_timesyncd(tmp_path: Path) -> None:
    """Under the service unit (ProtectClock=yes) adjtimex fails with EPERM: the answer is
    timesyncd's: its directory with its flag, without it, or no directory (cannot tell)."""
    timesync = tmp_path / "timesync"
    refused = FakeKernel(OSError(errno.EPERM, "Operation not permitted"))
    clock = FakeMonotonic()
    status = SystemClockStatus(kernel=refused, timesync_dir=timesync, monotonic=clock)
    assert status.is_synchronised() is None
    timesync.mkdir()
    clock.now += 10
    assert status.is_synchronised() is False
    (timesync / "synchronized").touch()
    clock.now += 10
    assert status.is_synchronised() is True
    assert timesyncd_synchronised(timesync) is True
    assert timesyncd_synchronised(tmp_path / "absent") is None


def test_on_this_machine_the_adapter_answers_without_raising() -> None:
    """The real adjtimex through ctypes (or its refusal): a bool or None, never an error."""
    answer = SystemClockStatus().is_synchronised()
    assert answer is None or isinstance(answer, bool)
    try:
        state, status = kernel_clock_state()
    except OSError:
        return  # refused here (a seccomp filter): the adapter said None or timesyncd's answer
    assert 0 <= state <= TIME_ERROR
    assert answer is is_synchronised_state(state, status)


def test_the_page_clock_is_utc_milliseconds_and_the_local_offset() -> None:
    now_ns = 1_700_000_000_123_456_789
    clock = page_clock(SystemClockStatus(kernel=FakeKernel((TIME_OK, 0))), now_ns=lambda: now_ns)
    assert clock == {
        "now_ms": 1_700_000_000_123,
        "tz_offset_min": time.localtime(1_700_000_000).tm_gmtoff // 60,
        "synchronised": True,
    }


@pytest.mark.parametrize(("tz", "offset"), [("UTC0", 0), ("CST-8", 480), ("NST+3:30", -210)])
def test_the_offset_follows_the_time_zone(
    monkeypatch: pytest.MonkeyPatch, tz: str, offset: int
) -> None:
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        clock = page_clock(SystemClockStatus(kernel=FakeKernel((TIME_OK, 0))))
        assert clock["tz_offset_min"] == offset
    finally:
        monkeypatch.undo()
        time.tzset()
