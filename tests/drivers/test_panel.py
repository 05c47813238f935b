"""The panel driver on gpiozero mock pins: debounced keys, the supervisor switch, the lamps."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin
from support.web import wait_until

from controller.core.config import PinsConfig, ShakerConfig
from controller.core.state import Event, Fault, Occurrence, Screen, ShakePressed, occurrence
from drivers.panel import FLASH_S, STATUS_COLOURS, GpioPanel
from drivers.safety import FaultLatch
from drivers.sim.hardware import SimPanel
from drivers.table_io import build_panel

PINS = PinsConfig()
CONFIG = ShakerConfig(debounce_ms=20)
WAIT = 3.0
QUIET = 0.15  # several debounce periods: long enough for a wrongly accepted bounce to show


class Desk:
    def __init__(
        self,
        *,
        shake_button_enabled: bool = True,
        events: queue.Queue[Occurrence] | None = None,
    ) -> None:
        self.factory = MockFactory(pin_class=MockPWMPin)
        self.events = events if events is not None else queue.Queue()
        self.latch = FaultLatch()
        self.sim = SimPanel(self.factory, PINS)
        self.clock_ms = 1000
        self.panel = build_panel(
            PINS,
            CONFIG,
            self.events,
            latch=self.latch,
            pin_factory=self.factory,
            shake_button_enabled=shake_button_enabled,
            clock=lambda: self.clock_ms,
        )

    def next_event(self, timeout: float = WAIT) -> Occurrence:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no event within {timeout} s")

    def expect_quiet(self, within: float = QUIET) -> None:
        try:
            occ = self.events.get(timeout=within)
        except queue.Empty:
            return
        pytest.fail(f"unexpected event {occ}")

    def tap(self, key: str) -> Occurrence:
        """A real press: bouncing contact, held, released with bounce."""
        self.sim.press(key)
        occ = self.next_event()
        self.sim.release(key)
        self.expect_quiet(within=0.06)  # the release settles and gives nothing
        return occ

    def close(self) -> None:
        self.panel.close()
        self.factory.close()


@pytest.fixture
def desk() -> Iterator[Desk]:
    d = Desk()
    yield d
    d.close()


def test_a_bouncing_press_gives_one_event(desk: Desk) -> None:
    desk.sim.press("shake_button", bounces=6)
    occ = desk.next_event()
    assert occ == ShakePressed(at=1000)
    desk.expect_quiet()
    # The contact really did chatter: the driver saw every edge and accepted one press.
    assert len(desk.sim.keys["shake_button"].states) >= 13


def test_a_held_button_gives_one_event(desk: Desk) -> None:
    desk.sim.press("shake_button")
    assert desk.next_event().event is Event.SHAKE_PRESSED
    desk.expect_quiet(within=0.4)  # held
    desk.sim.release("shake_button")
    desk.expect_quiet()


def test_a_spike_shorter_than_the_debounce_is_ignored(desk: Desk) -> None:
    desk.sim.press("shake_button", bounces=0)
    desk.sim.release("shake_button", bounces=0)
    desk.expect_quiet()


def test_mashing_gives_one_event_per_press(desk: Desk) -> None:
    for _ in range(5):
        assert desk.tap("shake_button").event is Event.SHAKE_PRESSED
    desk.expect_quiet()


@pytest.mark.parametrize(
    ("key", "event"),
    [
        ("key_no_more_bets", Event.NO_MORE_BETS),
        ("key_close_round", Event.CLOSE_ROUND),
        ("key_void_round", Event.VOID_ROUND),
        ("key_clear_fault", Event.CLEAR_FAULT),
        ("key_dice_set", Event.DICE_SET),
        ("key_bank_seat", Event.BANK_SEAT_KEY),
        ("key_style", Event.STYLE_KEY),
        ("key_shift_change", Event.SHIFT_CHANGE),
    ],
)
def test_dealer_keys_and_the_supervisor_switch(desk: Desk, key: str, event: Event) -> None:
    assert desk.tap(key) == occurrence(event, at=1000, supervisor=False)
    desk.sim.turn_supervisor_key(True)
    desk.expect_quiet()  # the key switch itself sends nothing
    # Accepted once its settle thread has run (late on a loaded machine): wait for it.
    assert wait_until(lambda: desk.panel.is_supervisor_key_on, WAIT), "the supervisor key is not on"
    desk.clock_ms = 2000
    assert desk.tap(key) == occurrence(event, at=2000, supervisor=True)
    desk.sim.turn_supervisor_key(False)
    desk.expect_quiet()
    assert wait_until(lambda: not desk.panel.is_supervisor_key_on, WAIT), "the key is still on"
    assert desk.tap(key).supervisor is False


def test_presses_from_another_thread_arrive(desk: Desk) -> None:
    """Real pins call back on the pin library's thread, not the caller's."""
    worker = threading.Thread(target=desk.sim.press, args=("key_no_more_bets",))
    worker.start()
    worker.join(WAIT)
    assert desk.next_event().event is Event.NO_MORE_BETS


def lamp_values(desk: Desk) -> tuple[int, int, int, int]:
    s = desk.sim
    return (int(s.is_shake_lamp_on), *s.status_colour)


@pytest.mark.parametrize("screen", [s for s in Screen if s is not Screen.REFUSED])
def test_the_lamps_follow_the_screen(desk: Desk, screen: Screen) -> None:
    desk.panel.show_status(screen)
    invited = screen in (Screen.BETS_CLOSED, Screen.NO_ROLL)
    assert lamp_values(desk) == (int(invited), *STATUS_COLOURS[screen])


def test_bets_open_with_a_player_bank_is_cyan(desk: Desk) -> None:
    desk.panel.show_status(Screen.READY, player_bank=True)
    assert lamp_values(desk) == (0, 0, 1, 1)  # green and blue: a player banks
    desk.panel.show_status(Screen.READY)
    assert lamp_values(desk) == (0, 0, 1, 0)
    desk.panel.show_status(Screen.BETS_CLOSED, player_bank=True)  # only while bets are open
    assert lamp_values(desk) == (1, *STATUS_COLOURS[Screen.BETS_CLOSED])


def test_the_lamp_test_lights_every_lamp_until_the_next_screen_but_never_when_latched(
    desk: Desk,
) -> None:
    desk.panel.show_status(Screen.READY)
    desk.panel.lamp_test()
    assert lamp_values(desk) == (1, 1, 1, 1)
    desk.panel.show_status(Screen.READY)
    assert lamp_values(desk) == (0, 0, 1, 0)
    assert desk.latch.trip("tamper")
    desk.panel.lamp_test()
    assert lamp_values(desk) == (0, 1, 0, 0)  # safe: shake lamp off, status red


def wait_for_lamps(desk: Desk, values: tuple[int, int, int, int]) -> None:
    deadline = time.monotonic() + WAIT
    while lamp_values(desk) != values:
        if time.monotonic() > deadline:
            pytest.fail(f"the lamps never showed {values}; they show {lamp_values(desk)}")
        time.sleep(0.005)


def test_a_dice_alarm_flashes_magenta_over_the_screens_colour_until_safe(desk: Desk) -> None:
    desk.panel.show_status(Screen.READY, dice_alarm=True)
    wait_for_lamps(desk, (0, 1, 0, 1))  # magenta: the supervisor's colour
    wait_for_lamps(desk, (0, 0, 1, 0))  # and the screen's own: bets open
    desk.panel.show_status(Screen.BETS_CLOSED, dice_alarm=True)
    wait_for_lamps(desk, (1, 1, 0, 1))  # the shake lamp stays lit through the flash
    wait_for_lamps(desk, (1, 0, 0, 1))
    desk.panel.show_status(Screen.READY)  # the alarm cleared: the lamp is steady again
    wait_for_lamps(desk, (0, 0, 1, 0))
    time.sleep(2.5 * FLASH_S)  # longer than a flash's half period: none came
    assert lamp_values(desk) == (0, 0, 1, 0)
    desk.panel.show_status(Screen.READY, dice_alarm=True)
    assert desk.latch.trip("tamper")  # the latch stops the flash: red, and red it stays
    assert lamp_values(desk) == (0, 1, 0, 0)
    time.sleep(2.5 * FLASH_S)
    assert lamp_values(desk) == (0, 1, 0, 0)


def test_lamp_histories(desk: Desk) -> None:
    red, green = desk.sim.lamp_pin("lamp_red"), desk.sim.lamp_pin("lamp_green")
    shake = desk.sim.lamp_pin("shake_button_lamp")
    for pin in (red, green, shake):
        pin.clear_states()
    for screen in (Screen.READY, Screen.BETS_CLOSED, Screen.REFUSED, Screen.SHAKING):
        desk.panel.show_status(screen)
    desk.panel.show_status(Screen.NO_ROLL)
    shake.assert_states([False, True, False, True])
    green.assert_states([False, True, False, True])  # ready, (blue), no roll = yellow
    red.assert_states([False, True])
    assert [s.state for s in shake.states] == [0, 1, 0, 1]
    assert desk.panel.screen is Screen.NO_ROLL


def test_refused_keeps_the_lamps(desk: Desk) -> None:
    desk.panel.show_status(Screen.BETS_CLOSED)
    before = lamp_values(desk)
    desk.panel.show_status(Screen.REFUSED)
    assert lamp_values(desk) == before


def test_without_a_player_shaker_the_button_is_dark_and_silent() -> None:
    d = Desk(shake_button_enabled=False)
    try:
        d.panel.show_status(Screen.BETS_CLOSED)
        assert not d.sim.is_shake_lamp_on
        d.sim.press("shake_button")
        d.expect_quiet()
    finally:
        d.close()


def test_safe_state_and_the_latch(desk: Desk) -> None:
    desk.panel.show_status(Screen.BETS_CLOSED)
    assert desk.latch.trip("tamper")
    assert lamp_values(desk) == (0, 1, 0, 0)  # shake lamp off, status red
    desk.panel.show_status(Screen.NO_ROLL)  # outputs stay safe while latched
    assert lamp_values(desk) == (0, 1, 0, 0)
    desk.latch.reset()
    desk.panel.show_status(Screen.NO_ROLL)
    assert lamp_values(desk) == (1, 1, 1, 0)


def test_close_twice_releases_everything(desk: Desk) -> None:
    desk.panel.show_status(Screen.RESULT)
    desk.panel.close()
    desk.panel.close()
    desk.panel.drive_safe()
    desk.panel.show_status(Screen.READY)
    assert lamp_values(desk) == (0, 0, 0, 0)
    assert "panel.lamps" not in desk.latch.outputs
    desk.sim.press("key_close_round")
    desk.expect_quiet()


def test_context_manager() -> None:
    factory = MockFactory(pin_class=MockPWMPin)
    sim = SimPanel(factory, PINS)
    events: queue.Queue[Occurrence] = queue.Queue()
    with build_panel(PINS, CONFIG, events, pin_factory=factory) as panel:
        assert isinstance(panel, GpioPanel)
        panel.show_status(Screen.FAULT)
        assert sim.status_colour == (1, 0, 0)
    assert sim.status_colour == (0, 0, 0)
    factory.close()


class FailingSink(queue.Queue[Occurrence]):
    """The control thread's queue, failing once on one kind of event."""

    def __init__(self, fail_on: Event) -> None:
        super().__init__()
        self.fail_on: Event | None = fail_on

    def put(self, item: Occurrence, block: bool = True, timeout: float | None = None) -> None:
        if item.event is self.fail_on:
            self.fail_on = None
            raise RuntimeError(f"queue refused {item.event}")
        super().put(item, block, timeout)


def test_a_key_handler_that_raises_trips_the_latch() -> None:
    """A press that cannot reach the control thread is lost: the table stops safe."""
    d = Desk(events=FailingSink(Event.NO_MORE_BETS))
    try:
        d.panel.show_status(Screen.READY)
        d.sim.press("key_no_more_bets")
        fault = d.next_event()
        assert (fault.event, fault.fault) == (Event.FAULT, Fault.INTERNAL)
        assert "key_no_more_bets key handler failed" in fault.detail
        assert d.latch.is_tripped
        assert lamp_values(d) == (0, 1, 0, 0)
        d.sim.release("key_no_more_bets")
        d.expect_quiet(within=0.06)  # the release settles
        assert d.tap("key_no_more_bets").event is Event.NO_MORE_BETS  # the key still works
    finally:
        d.close()


def test_every_key_has_at_most_one_settle_thread(desk: Desk) -> None:
    for _ in range(3):
        desk.tap("shake_button")
    names = [t.name for t in threading.enumerate() if t.name.startswith("debounce-")]
    assert names.count("debounce-shake_button") == 1
    desk.panel.close()
    assert [t for t in threading.enumerate() if t.name.startswith("debounce-")] == []


def test_light_only_lights_one_channel_and_never_when_latched(desk: Desk) -> None:
    """Commissioning lights each lamp alone, so a swapped or dead channel shows."""
    expected = {
        "shake_button_lamp": (True, (0, 0, 0)),
        "lamp_red": (False, (1, 0, 0)),
        "lamp_green": (False, (0, 1, 0)),
        "lamp_blue": (False, (0, 0, 1)),
    }
    for lamp, (shake_lamp, colour) in expected.items():
        desk.panel.light_only(lamp)
        assert (desk.sim.is_shake_lamp_on, desk.sim.status_colour) == (shake_lamp, colour)
    desk.panel.light_only(None)
    assert (desk.sim.is_shake_lamp_on, desk.sim.status_colour) == (False, (0, 0, 0))
    with pytest.raises(ValueError, match="no lamp"):
        desk.panel.light_only("lamp_purple")
    desk.latch.trip("test")
    desk.panel.light_only("lamp_green")
    assert (desk.sim.is_shake_lamp_on, desk.sim.status_colour) == (False, (1, 0, 0))  # safe


def test_a_key_observer_sees_presses_releases_and_the_key_switch() -> None:
    factory = MockFactory(pin_class=MockPWMPin)
    seen: queue.Queue[tuple[str, bool]] = queue.Queue()
    sim = SimPanel(factory, PINS)
    panel = build_panel(
        PINS,
        CONFIG,
        queue.Queue(),
        pin_factory=factory,
        on_key_change=lambda name, state: seen.put((name, state)),
    )
    try:
        sim.press("key_style")
        assert seen.get(timeout=WAIT) == ("key_style", True)
        assert panel.is_pressed("key_style")
        sim.release("key_style")
        assert seen.get(timeout=WAIT) == ("key_style", False)
        sim.turn_supervisor_key(True)
        assert seen.get(timeout=WAIT) == ("supervisor_key", True)
        assert panel.is_pressed("supervisor_key")
    finally:
        panel.close()
        factory.close()
