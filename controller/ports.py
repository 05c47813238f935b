"""The ports between the daemon and the world, as Protocols.

Each has a real implementation (``drivers/`` for hardware, ``controller/`` for storage and the
display) and a simulated one behind the same interface, chosen by configuration. Adapters never
call into the core: they put :class:`~controller.state.Occurrence` events on the control
thread's queue (``EventSink``) and the one control thread carries out the core's actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from controller.records import RecordKind
from controller.state import Occurrence, Screen


class EventSink(Protocol):
    """Where adapters put events; ``queue.Queue`` is one. Must be safe from any thread."""

    def put(self, item: Occurrence) -> None: ...


@dataclass(frozen=True, slots=True)
class SensorIdentity:
    """What the dice sensor says of itself in the version handshake."""

    model: str
    firmware: str
    serial_number: str
    protocol_version: int


class DiceSensor(Protocol):
    """The optical dice sensor. ``request_read`` returns at once; a ``READING`` event follows,
    or ``SENSOR_TIMEOUT`` after the driver's retries; ``SENSOR_LOST`` / ``SENSOR_BACK`` report
    the line going away and coming back."""

    def open(self) -> SensorIdentity: ...

    def request_read(self, *, round_number: int, attempt: int) -> None: ...

    def close(self) -> None: ...


class Shaker(Protocol):
    """The player-activated shaker. ``start_shake`` runs one shake pattern (only with the lid
    closed); ``SHAKE_DONE`` with the motion sensor's cycle count follows, or ``LID_OPENED`` /
    ``MOTOR_OVERRUN``. The driver itself cuts the motor at its maximum run time."""

    def start_shake(self) -> None: ...

    def stop(self) -> None: ...

    def drive_safe(self) -> None: ...

    def close(self) -> None: ...


class Panel(Protocol):
    """The dealer's keys, the supervisor key switch, the shake-button lamp and the status lamp.
    Key presses arrive as events; the lamps follow what the core shows."""

    def show_status(self, screen: Screen) -> None: ...

    def drive_safe(self) -> None: ...

    def close(self) -> None: ...


class AuditLog(Protocol):
    """The tamper-evident log. ``append`` returns the record's sequence number once the record
    is durable (write-ahead: nothing is shown before it is recorded)."""

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int: ...

    def close(self) -> None: ...


class TableDisplay(Protocol):
    """The table display and the machine feed. ``seq`` is the sequence number of the record
    that made the screen, so that a reconnecting client can catch up from the log."""

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None: ...

    def close(self) -> None: ...
