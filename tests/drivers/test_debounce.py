"""The debounced input on gpiozero mock pins: one settle thread per input, errors reported."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gpiozero import DigitalInputDevice
from gpiozero.pins.mock import MockFactory, MockPWMPin

from drivers.debounce import DebouncedInput, debounced_input
from drivers.sim.hardware import SimContactPin

PIN = 5
DEBOUNCE_S = 0.02
WAIT = 3.0
QUIET = 0.15  # several debounce periods: long enough for a wrong change (or wake-up) to show


class Contact:
    """A contact to ground on a mock pin, read by a debounced input."""

    def __init__(self, *, immediate: bool | None = None, report_errors: bool = True) -> None:
        self.factory = MockFactory(pin_class=MockPWMPin)
        self.pin: SimContactPin = self.factory.pin(PIN, pin_class=SimContactPin)
        self.changes: queue.Queue[bool] = queue.Queue()
        self.errors: queue.Queue[tuple[str, Exception]] = queue.Queue()
        self.on_error: Callable[[str, Exception], None] = lambda n, e: self.errors.put((n, e))
        self.fail_on: bool | None = None  # the handler raises on this value
        extra: dict[str, Any] = {}
        if report_errors:
            extra["on_error"] = self._error
        self.input = debounced_input(
            "key",
            PIN,
            self._changed,
            pin_factory=self.factory,
            debounce_s=DEBOUNCE_S,
            immediate=immediate,
            **extra,
        )

    def _error(self, name: str, exc: Exception) -> None:
        self.on_error(name, exc)  # looked up at each call: a test may replace it

    def _changed(self, value: bool) -> None:
        if value is self.fail_on:
            raise RuntimeError(f"handler broke on {value}")
        self.changes.put(value)

    def next_change(self) -> bool:
        try:
            return self.changes.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail(f"no change within {WAIT} s")

    def expect_no_change(self, within: float = QUIET) -> None:
        try:
            value = self.changes.get(timeout=within)
        except queue.Empty:
            return
        pytest.fail(f"unexpected change to {value}")

    def chatter(self, edges: int) -> None:
        """``edges`` changes of the contact, each on the caller's thread (as MockPin does)."""
        for i in range(edges):
            self.pin.set_contact(i % 2 == 0)

    def close(self) -> None:
        self.input.close()
        self.factory.close()


@pytest.fixture
def contact() -> Iterator[Contact]:
    c = Contact()
    yield c
    c.close()


def settle_threads(name: str = "debounce-key") -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_a_press_and_a_release_each_give_one_change(contact: Contact) -> None:
    contact.pin.set_contact(True)
    assert contact.next_change() is True
    contact.expect_no_change()
    assert contact.input.is_active
    contact.pin.set_contact(False)
    assert contact.next_change() is False


def test_many_edges_start_no_thread_and_leave_none_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """One settle thread per input for its whole life, not a timer thread per edge."""
    contact = Contact(report_errors=False)
    try:
        check_edges_start_no_thread(contact, monkeypatch)
    finally:
        contact.close()


def check_edges_start_no_thread(contact: Contact, monkeypatch: pytest.MonkeyPatch) -> None:
    contact.pin.set_contact(True)  # the first edge starts the input's settle thread
    assert contact.next_change() is True
    settlers = settle_threads()
    live = threading.active_count()
    started: list[str] = []
    real_start = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    contact.chatter(1001)  # ends closed: no change
    contact.chatter(1000)  # ends open
    assert contact.next_change() is False
    contact.expect_no_change()
    assert started == []
    assert threading.active_count() <= live
    assert settle_threads() == settlers
    assert len(settlers) == 1


def test_an_idle_input_blocks_without_waking(contact: Contact) -> None:
    assert contact.input.wakeups == 0  # no edge yet: no thread at all
    assert settle_threads() == []
    contact.chatter(5)
    assert contact.next_change() is True
    woken = contact.input.wakeups
    contact.expect_no_change(within=3 * QUIET)  # idle: nothing changes, nothing wakes
    assert contact.input.wakeups == woken


def test_a_failing_handler_is_reported_and_the_input_goes_on(contact: Contact) -> None:
    contact.fail_on = True
    contact.pin.set_contact(True)
    name, exc = contact.errors.get(timeout=WAIT)
    assert name == "key"
    assert "handler broke on True" in str(exc)
    assert contact.input.is_active  # the change itself was taken
    contact.pin.set_contact(False)  # the settle thread survived its handler's failure
    assert contact.next_change() is False
    assert contact.errors.empty()


def test_a_failing_handler_on_the_first_edge_is_reported_on_the_edge_thread() -> None:
    c = Contact(immediate=False)
    try:
        c.pin.set_contact(True)
        assert c.next_change() is True
        c.fail_on = False
        edge_thread = threading.current_thread()
        reported_on: list[threading.Thread] = []
        c.on_error = lambda name, exc: reported_on.append(threading.current_thread())
        c.pin.set_contact(False)  # taken on this first edge, on this thread
        assert reported_on == [edge_thread]
        assert not c.input.is_active
    finally:
        c.close()


def test_an_error_handler_that_raises_is_contained(contact: Contact) -> None:
    def broken(name: str, exc: Exception) -> None:
        raise OSError("the latch is gone too")

    contact.on_error = broken
    contact.fail_on = True
    contact.pin.set_contact(True)
    contact.expect_no_change()
    contact.fail_on = None
    contact.pin.set_contact(False)
    assert contact.next_change() is False


def test_close_ends_the_settle_thread_and_stops_reporting(contact: Contact) -> None:
    contact.pin.set_contact(True)
    assert contact.next_change() is True
    [settler] = settle_threads()
    contact.pin.set_contact(False)  # a settle pending at close
    contact.input.close()
    contact.input.close()
    assert not settler.is_alive()
    contact.expect_no_change()


def test_debounce_must_be_positive_and_the_pin_is_released() -> None:
    factory = MockFactory(pin_class=MockPWMPin)
    with pytest.raises(ValueError, match="positive"):
        debounced_input("key", PIN, lambda v: None, pin_factory=factory, debounce_s=0)
    device = DigitalInputDevice(PIN, pull_up=True, pin_factory=factory)  # free again
    with pytest.raises(ValueError, match="positive"):
        DebouncedInput("key", device, lambda v: None, debounce_s=-1)
    device.close()
    factory.close()
