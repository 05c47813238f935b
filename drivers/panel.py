"""The player's shake button and the dealer's panel on gpiozero, with the lamps.

Implements :class:`controller.ports.Panel`. Each key is debounced in software
(:mod:`drivers.debounce`): a bouncing or held key gives one event per press, and a player mashing
the shake button gives one ``SHAKE_PRESSED`` per real press, which the core ignores while a shake
is under way. Key events carry ``supervisor=True`` while the supervisor key switch is on. The
callbacks only put :class:`~controller.core.state.Occurrence` events on the sink.

Outputs and their safe values: the shake-button lamp off (nobody is invited to shake), the status
lamp red (the table is in fault). The lamps follow ``show_status``.

Locks, in the order of :mod:`drivers`: each key's debounce lock, then ``_lock``, a re-entrant leaf
lock held only around the lamp writes (the key handlers never take it). ``drive_safe``, the fault
latch's handler, takes only that lock, so it is safe from a signal handler that interrupted
``show_status``; ``show_status`` checks the latch and the safe epoch again after writing, so lamps
that a ``drive_safe`` put safe in the meantime end safe. A key handler that raises trips the latch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpiozero import LED, RGBLED, GPIODeviceClosed

from controller.core.state import Event, Fault, FaultRaised, Screen, occurrence
from controller.ports import EventSink
from drivers.debounce import DebouncedInput, debounced_input, monotonic_ms
from drivers.safety import FaultLatch

log = logging.getLogger(__name__)

Colour = tuple[int, int, int]
OFF: Colour = (0, 0, 0)
RED: Colour = (1, 0, 0)
GREEN: Colour = (0, 1, 0)
BLUE: Colour = (0, 0, 1)
YELLOW: Colour = (1, 1, 0)
MAGENTA: Colour = (1, 0, 1)
WHITE: Colour = (1, 1, 1)
CYAN: Colour = (0, 1, 1)  # bets open, a player banks

STATUS_SAFE_COLOUR = RED  # the status lamp's safe value: fault
SHAKE_LAMP_SAFE = False  # the shake lamp's safe value: off

# What the status lamp shows for each screen (hw/pinout.md). REFUSED is a passing notice on the
# display: the lamp keeps its colour.
STATUS_COLOURS: Mapping[Screen, Colour] = {
    Screen.READY: GREEN,  # bets open
    Screen.BETS_CLOSED: BLUE,  # waiting for the shake
    Screen.SHAKING: BLUE,
    Screen.SETTLING: BLUE,
    Screen.READING: BLUE,
    Screen.DRAWING: BLUE,
    Screen.RESULT: WHITE,
    Screen.NO_ROLL: YELLOW,  # reshake
    Screen.FAULT: RED,
    Screen.LOCKED: MAGENTA,  # reshake limit: the supervisor key clears it
    Screen.RECALL: MAGENTA,  # game recall: the supervisor holds the table
}
FLASH_S = 0.5  # a dice alarm: the status lamp's colour and magenta, half a second each

SUPERVISOR_KEY = "supervisor_key"
LAMP_NAMES = ("shake_button_lamp", "lamp_red", "lamp_green", "lamp_blue")
# Told of every debounced change of every key and of the supervisor key switch (its name in
# PanelPins, pressed or on): commissioning watches the releases and the key switch too, which
# give no event. Called under the key's debounce lock: it must only enqueue.
KeyObserver = Callable[[str, bool], None]

# The screens on which the player may press the shake button: its lamp is lit.
SHAKE_INVITED: frozenset[Screen] = frozenset({Screen.BETS_CLOSED, Screen.NO_ROLL})


@dataclass(frozen=True, slots=True)
class PanelPins:
    """BCM numbers (or gpiozero pin names) of the panel; see hw/pinout.md."""

    shake_button: int | str
    shake_button_lamp: int | str
    key_no_more_bets: int | str
    key_close_round: int | str
    key_void_round: int | str
    key_clear_fault: int | str
    key_dice_set: int | str
    key_bank_seat: int | str
    key_style: int | str
    key_shift_change: int | str
    key_shuffle: int | str
    supervisor_key: int | str
    lamp_red: int | str
    lamp_green: int | str
    lamp_blue: int | str


class GpioPanel:
    """The panel on gpiozero devices. ``pin_factory=None`` takes gpiozero's default.

    Every key and the key switch close to ground (internal pull-ups, active low): a broken wire
    reads as not pressed and as supervisor key off. Lamps are driven active high through a
    transistor or LED driver. ``shake_button_enabled=False`` (manual or RNG mode) keeps the shake
    lamp dark and the button silent.
    """

    def __init__(
        self,
        sink: EventSink,
        *,
        pins: PanelPins,
        debounce_ms: int,
        pin_factory: Any = None,
        latch: FaultLatch | None = None,
        shake_button_enabled: bool = True,
        clock: Callable[[], int] = monotonic_ms,
        on_key_change: KeyObserver | None = None,
    ) -> None:
        self._sink = sink
        self._on_key_change = on_key_change
        self._clock = clock
        self._latch = latch
        self._shake_enabled = shake_button_enabled
        self._lock = threading.RLock()  # leaf: the lamps; re-entrant for a signal handler
        self._closed = False
        self._safe_epoch = 0  # moved on by every drive_safe
        self._screen: Screen | None = None
        self._inputs: list[DebouncedInput] = []
        self._shake_lamp: Any = None
        self._status_lamp: Any = None
        self._pin_factory = pin_factory
        self._debounce_s = debounce_ms / 1000
        try:
            self._shake_lamp = LED(
                pins.shake_button_lamp, initial_value=SHAKE_LAMP_SAFE, pin_factory=pin_factory
            )
            self._status_lamp = RGBLED(
                pins.lamp_red,
                pins.lamp_green,
                pins.lamp_blue,
                pwm=False,
                initial_value=OFF,
                pin_factory=pin_factory,
            )
            self._supervisor = self._key(SUPERVISOR_KEY, pins.supervisor_key, None)
            keys: list[tuple[str, int | str, Event]] = [
                ("key_no_more_bets", pins.key_no_more_bets, Event.NO_MORE_BETS),
                ("key_close_round", pins.key_close_round, Event.CLOSE_ROUND),
                ("key_void_round", pins.key_void_round, Event.VOID_ROUND),
                ("key_clear_fault", pins.key_clear_fault, Event.CLEAR_FAULT),
                ("key_dice_set", pins.key_dice_set, Event.DICE_SET),
                ("key_bank_seat", pins.key_bank_seat, Event.BANK_SEAT_KEY),
                ("key_style", pins.key_style, Event.STYLE_KEY),
                ("key_shift_change", pins.key_shift_change, Event.SHIFT_CHANGE),
                ("key_shuffle", pins.key_shuffle, Event.SHUFFLED),
                ("shake_button", pins.shake_button, Event.SHAKE_PRESSED),
            ]
            for name, pin, event in keys:
                self._key(name, pin, event)
        except BaseException:
            self._release_devices()
            raise
        if latch is not None:
            latch.register("panel.lamps", self.drive_safe)

    def _key(self, name: str, pin: int | str, event: Event | None) -> DebouncedInput:
        debounced = debounced_input(
            name,
            pin,
            self._on_key(name, event),
            pin_factory=self._pin_factory,
            debounce_s=self._debounce_s,
            on_error=self._key_failed,
        )
        self._inputs.append(debounced)
        return debounced

    # --- the port ----------------------------------------------------------------------------

    @property
    def is_supervisor_key_on(self) -> bool:
        return self._supervisor.is_active

    def is_pressed(self, name: str) -> bool:
        """The debounced state of a key by its name in PanelPins (the supervisor key: on)."""
        for debounced in self._inputs:
            if debounced.name == name:
                return debounced.is_active
        raise KeyError(name)

    @property
    def screen(self) -> Screen | None:
        """The last screen shown (``REFUSED`` notices excluded)."""
        return self._screen

    def show_status(
        self, screen: Screen, *, player_bank: bool = False, dice_alarm: bool = False
    ) -> None:
        """The lamps follow the core's screen; while bets are open the status lamp is cyan
        instead of green when a player banks the next round (621a.11, 645a.12). While a dice
        alarm stands (issue 15) the status lamp flashes magenta, the supervisor's colour, over
        the screen's colour: a sign for the pit, no words for the players. While the latch is
        tripped they stay safe."""
        epoch = self._safe_epoch  # first: a drive_safe from here on leaves the lamps safe
        with self._lock:
            if self._closed:
                return
            if screen is Screen.REFUSED:
                return
            self._screen = screen
            if not self._is_latched():
                invited = self._shake_enabled and screen in SHAKE_INVITED
                colour = STATUS_COLOURS[screen]
                if screen is Screen.READY and player_bank:
                    colour = CYAN
                self._write(invited, colour)
                if dice_alarm and colour != MAGENTA:
                    self._flash(colour)
                if epoch == self._safe_epoch and not self._is_latched():
                    return
            # Latched, or driven safe while this call ran (a signal handler on this thread).
            self._write(SHAKE_LAMP_SAFE, STATUS_SAFE_COLOUR)

    def lamp_test(self) -> None:
        """Service mode (9 NYCRR 5319.58): every lamp lit, the status lamp's three colours and
        the shake button's, until the next screen; nothing while the latch is tripped."""
        epoch = self._safe_epoch
        with self._lock:
            if self._closed or self._is_latched():
                return
            self._write(True, WHITE)
            if epoch != self._safe_epoch or self._is_latched():
                self._write(SHAKE_LAMP_SAFE, STATUS_SAFE_COLOUR)

    def light_only(self, lamp: str | None) -> None:
        """Commissioning: ``lamp`` (one of LAMP_NAMES) lit and every other lamp dark, so that
        a technician can check each channel and its wiring by eye; None: all dark. Nothing
        while the latch is tripped (the lamps stay at their safe values)."""
        if lamp is not None and lamp not in LAMP_NAMES:
            raise ValueError(f"no lamp {lamp!r}")
        colour: Colour = (
            int(lamp == "lamp_red"),
            int(lamp == "lamp_green"),
            int(lamp == "lamp_blue"),
        )
        epoch = self._safe_epoch
        with self._lock:
            if self._closed or self._is_latched():
                return
            self._write(lamp == "shake_button_lamp", colour)
            if epoch != self._safe_epoch or self._is_latched():
                self._write(SHAKE_LAMP_SAFE, STATUS_SAFE_COLOUR)

    def drive_safe(self) -> None:
        """Shake lamp off, status lamp red; from any thread, any number of times, from a
        signal handler too."""
        with self._lock:
            self._safe_epoch += 1
            if self._closed:
                return
            self._write(SHAKE_LAMP_SAFE, STATUS_SAFE_COLOUR)

    def close(self) -> None:
        """Lamps off, pins released. May be called twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._latch is not None:
            self._latch.unregister("panel.lamps")
        self._release_devices()

    def __enter__(self) -> GpioPanel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------

    def _is_latched(self) -> bool:
        return self._latch is not None and self._latch.is_tripped

    def _key_failed(self, name: str, exc: Exception) -> None:
        """A key's handler raised: its press may be lost, so the table stops safe. Called
        holding none of the panel's locks (only the key's own)."""
        reason = f"{name} key handler failed: {exc!r}"
        try:
            if self._latch is not None:
                self._latch.trip(f"{Event.FAULT}: {reason}")
        finally:
            self._sink.put(FaultRaised(at=self._clock(), fault=Fault.INTERNAL, detail=reason))

    def _write(self, shake_lamp: bool, colour: Colour) -> None:
        """Both lamps, each guarded: one failing does not keep the other from its value."""
        try:
            with contextlib.suppress(GPIODeviceClosed):
                self._shake_lamp.value = shake_lamp
        finally:
            with contextlib.suppress(GPIODeviceClosed):
                self._status_lamp.value = colour

    def _flash(self, colour: Colour) -> None:
        """The status lamp alternates ``colour`` with magenta (gpiozero's blink thread; a later
        write of the lamp, ``drive_safe``'s too, stops it)."""
        with contextlib.suppress(GPIODeviceClosed):
            self._status_lamp.blink(
                on_time=FLASH_S, off_time=FLASH_S, on_color=colour, off_color=MAGENTA
            )

    def _on_key(self, name: str, event: Event | None) -> Callable[[bool], None]:
        def changed(is_pressed: bool) -> None:
            observer = self._on_key_change
            if observer is not None and not self._closed:
                observer(name, is_pressed)
            if not is_pressed or event is None or self._closed:
                return
            if event is Event.SHAKE_PRESSED and not self._shake_enabled:
                return
            supervisor = self._supervisor.is_active
            self._sink.put(occurrence(event, at=self._clock(), supervisor=supervisor))

        return changed

    def _release_devices(self) -> None:
        for debounced in self._inputs:
            try:
                debounced.close()
            except Exception:  # release the rest regardless
                log.exception("closing key %s failed", debounced.name)
        self._inputs.clear()
        for lamp in (self._shake_lamp, self._status_lamp):
            if lamp is None:
                continue
            try:
                lamp.off()
            except Exception:  # release the pin regardless
                log.exception("turning a lamp off failed")
            finally:
                lamp.close()
