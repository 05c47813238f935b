"""The ``TableDisplay`` the control loop talks to when there are several: the web display, the
console, and observers (the simulated crew). One failing display does not starve the others."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from controller.core.state import Screen
from controller.ports import PreparesScreens, TableDisplay

log = logging.getLogger("paigow.display")


class DisplayFanout:
    """Hands each screen to every display; one failing display does not starve the others."""

    def __init__(
        self,
        displays: Sequence[TableDisplay],
        *,
        observers: Sequence[Callable[[Screen, Mapping[str, object]], None]] = (),
    ) -> None:
        self.displays = list(displays)
        self.observers = list(observers)

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        for display in self.displays:
            try:
                display.show(screen, data, seq=seq)
            except Exception:
                log.exception("a display failed to show %s", screen)
        for observer in self.observers:
            observer(screen, data)

    def prepare(self, screen: Screen, data: Mapping[str, object]) -> None:
        """The displays that can make a screen ready before it is shown (``PreparesScreens``)
        do so; one that fails is logged, and shows the screen as any other when it comes."""
        for display in self.displays:
            if isinstance(display, PreparesScreens):
                try:
                    display.prepare(screen, data)
                except Exception:
                    log.exception("a display failed to prepare %s", screen)

    def close(self) -> None:
        for display in self.displays:
            try:
                display.close()
            except Exception:
                log.exception("a display failed to close")
