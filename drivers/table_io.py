"""Builds the table's GPIO drivers from the configuration, around one fault latch.

``pin_factory=None`` lets gpiozero choose its default (lgpio on a Raspberry Pi, or what
``GPIOZERO_PIN_FACTORY`` names); the simulator passes a ``MockFactory(pin_class=MockPWMPin)``
with :mod:`drivers.sim.hardware` built on it first. Nothing here assumes mock pins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpiozero.exc import BadPinFactory, GPIOZeroError

from controller.core.config import Config, PinsConfig, ShakerConfig
from controller.core.state import Mode
from controller.errors import HardwareError
from controller.ports import EventSink
from drivers.debounce import monotonic_ms
from drivers.panel import GpioPanel, KeyObserver, PanelPins
from drivers.safety import FaultLatch
from drivers.shaker import GpioShaker

log = logging.getLogger(__name__)


def panel_pins(pins: PinsConfig) -> PanelPins:
    return PanelPins(
        shake_button=pins.shake_button,
        shake_button_lamp=pins.shake_button_lamp,
        key_no_more_bets=pins.key_no_more_bets,
        key_close_round=pins.key_close_round,
        key_void_round=pins.key_void_round,
        key_clear_fault=pins.key_clear_fault,
        key_dice_set=pins.key_dice_set,
        key_bank_seat=pins.key_bank_seat,
        key_style=pins.key_style,
        key_shift_change=pins.key_shift_change,
        key_shuffle=pins.key_shuffle,
        supervisor_key=pins.supervisor_key,
        lamp_red=pins.lamp_red,
        lamp_green=pins.lamp_green,
        lamp_blue=pins.lamp_blue,
    )


def build_shaker(
    pins: PinsConfig,
    config: ShakerConfig,
    sink: EventSink,
    *,
    latch: FaultLatch | None = None,
    pin_factory: Any = None,
    clock: Callable[[], int] = monotonic_ms,
) -> GpioShaker:
    return GpioShaker(
        sink,
        motor_pin=pins.motor,
        lid_pin=pins.lid_switch,
        motion_pin=pins.motion_sensor,
        tamper_pin=pins.tamper_switch,
        config=config,
        pin_factory=pin_factory,
        latch=latch,
        clock=clock,
    )


def build_panel(
    pins: PinsConfig,
    config: ShakerConfig,
    sink: EventSink,
    *,
    latch: FaultLatch | None = None,
    pin_factory: Any = None,
    shake_button_enabled: bool = True,
    clock: Callable[[], int] = monotonic_ms,
    on_key_change: KeyObserver | None = None,
) -> GpioPanel:
    return GpioPanel(
        sink,
        pins=panel_pins(pins),
        debounce_ms=config.debounce_ms,
        pin_factory=pin_factory,
        latch=latch,
        shake_button_enabled=shake_button_enabled,
        clock=clock,
        on_key_change=on_key_change,
    )


@dataclass(slots=True)
class TableIO:
    """The latch and the drivers registered with it. ``shaker`` is ``None`` unless the table
    runs the player-activated shaker (621a.6(a)(3))."""

    latch: FaultLatch
    panel: GpioPanel
    shaker: GpioShaker | None

    def drive_safe(self) -> None:
        """Every output to its safe value without latching a fault (SIGTERM, shutdown)."""
        self.latch.drive_all_safe()

    def close(self) -> None:
        """Outputs safe, then every driver closed, each guarded. May be called twice."""
        self.latch.drive_all_safe()
        for name, driver in (("shaker", self.shaker), ("panel", self.panel)):
            if driver is None:
                continue
            try:
                driver.close()
            except Exception:
                log.exception("closing the %s failed", name)

    def __enter__(self) -> TableIO:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_table_io(
    config: Config,
    sink: EventSink,
    *,
    pin_factory: Any = None,
    clock: Callable[[], int] = monotonic_ms,
    on_key_change: KeyObserver | None = None,
) -> TableIO:
    """The table's GPIO drivers. A board whose pins cannot be claimed (no pin factory, a pin
    in use) raises :class:`HardwareError` saying so, never gpiozero's own exception.
    ``on_key_change`` is told of every key's debounced change (commissioning)."""
    try:
        return _build_table_io(
            config, sink, pin_factory=pin_factory, clock=clock, on_key_change=on_key_change
        )
    except GPIOZeroError as exc:
        hint = ""
        if isinstance(exc, BadPinFactory):
            hint = " (on a Raspberry Pi: apt-get install python3-lgpio)"
        raise HardwareError(f"GPIO pins unavailable: {exc}{hint}") from exc


def _build_table_io(
    config: Config,
    sink: EventSink,
    *,
    pin_factory: Any,
    clock: Callable[[], int],
    on_key_change: KeyObserver | None,
) -> TableIO:
    latch = FaultLatch()
    is_shaker_table = Mode.SHAKER in (config.table.mode, *config.table.modes)
    shaker = None
    if is_shaker_table:
        shaker = build_shaker(
            config.pins, config.shaker, sink, latch=latch, pin_factory=pin_factory, clock=clock
        )
    try:
        panel = build_panel(
            config.pins,
            config.shaker,
            sink,
            latch=latch,
            pin_factory=pin_factory,
            shake_button_enabled=is_shaker_table,
            clock=clock,
            on_key_change=on_key_change,
        )
    except BaseException:
        if shaker is not None:
            shaker.close()
        raise
    return TableIO(latch=latch, panel=panel, shaker=shaker)
