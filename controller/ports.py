"""The ports between the daemon and the world, as Protocols.

Each has a real implementation (``drivers/`` for hardware, ``controller/`` for storage and the
display) and a simulated one behind the same interface, chosen by configuration. Adapters never
call into the core: they put :class:`~controller.core.state.Occurrence` events on the control
thread's queue (``EventSink``) and the one control thread carries out the core's actions.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from controller.core.dice import Roll
from controller.core.records import RecordKind, StoredRecord
from controller.core.software import SoftwareCheck
from controller.core.state import Occurrence, Screen


def monotonic_ms() -> int:
    """The table's event clock: whole milliseconds of the monotonic clock. The core never reads
    a clock; every adapter stamps its events (``Occurrence.at``) with this one (or the one a
    test injects), so that deadlines in the round state machine compare like with like."""
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    """UTC milliseconds of the wall clock: when an event happened as people count time (the
    dice's 24 hours on the table survive a restart). The control loop stamps events with it
    (``Occurrence.wall``); a test or the simulator injects its own."""
    return time.time_ns() // 1_000_000


class ClockStatus(Protocol):
    """Whether the operating system says its clock is synchronised to a time source (the
    table page shows "clock not synchronised" when it is not, issue 16): True, False, or
    None when it cannot tell. Safe from any thread; quick (an answer kept for a few seconds,
    never a subprocess)."""

    def is_synchronised(self) -> bool | None: ...


class ProgramVerification(Protocol):
    """The installed software checked against its release's signed manifest
    (``controller/software/check.py``): never raises, whatever it found is the result. Called
    on the control thread, at start and between rounds; bounded (milliseconds)."""

    def check(self) -> SoftwareCheck: ...


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

    def show_status(
        self, screen: Screen, *, player_bank: bool = False, dice_alarm: bool = False
    ) -> None:
        """The lamps for ``screen``; ``player_bank``: a player banks the next round (the
        status lamp shows it while bets are open); ``dice_alarm``: the dice monitor's alarm
        stands (the status lamp flashes the supervisor's colour, issue 15)."""
        ...

    def lamp_test(self) -> None:
        """Service mode: every lamp lit until the next screen (none while the latch is
        tripped)."""
        ...

    def drive_safe(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Committed:
    """What a commit made durable, and whether the anchor after it could be kept."""

    seqs: list[int]
    anchor_error: str | None = None


@dataclass(frozen=True, slots=True)
class Reopened:
    """The log's size as the writer had acknowledged it, and as the reopened file has it."""

    acknowledged: int
    size: int


@runtime_checkable
class SettlesLater(Protocol):
    """A log that leaves some of a commit's own upkeep (never its records: they are durable
    when the commit returns) for when no one waits for a screen. Neither method raises."""

    def settle(self) -> None:
        """The cheap part (the running totals), while the table waits for the sensor to read
        again (a result decided ahead): not on the deciding commit's way to the display."""
        ...

    def settle_between_rounds(self) -> None:
        """All of it, the WAL's copy into the database included (megabytes and a sync: long
        on a Pi's storage), between rounds, when no event waits."""
        ...


class AuditLog(Protocol):
    """The tamper-evident log. ``commit`` records the events of one step in one transaction
    and returns once they are durable (write-ahead: nothing is shown before it is recorded),
    with the round's context after the step stored beside them. After a failed commit the log
    takes no more until ``reopen`` has read its true tail."""

    @property
    def next_seq(self) -> int: ...

    def commit(
        self,
        entries: Sequence[tuple[RecordKind, Mapping[str, object]]],
        *,
        context: bytes | None = None,
    ) -> Committed: ...

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int: ...

    def reopen(self) -> Reopened: ...

    def latest_context(self) -> tuple[int, bytes] | None: ...

    def reanchor(self) -> int: ...

    def recall(self, last: int) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class RngDraws(Protocol):
    """The RNG of 621a.8(a)(1). ``prepare`` makes sure a committed session with rounds left is
    open (when bets open); ``draw`` records the number before it returns it, and returns the
    number already recorded for (round, attempt) instead of drawing a second one; ``close``
    reveals the session's seed (an orderly stop)."""

    def prepare(self) -> None: ...

    def draw(self, *, round_number: int, attempt: int) -> int | Roll: ...

    def close(self, reason: str) -> None: ...


class FaultLatch(Protocol):
    """Drives every output to its safe value, once per fault; ``reset`` re-arms it."""

    def trip(self, reason: str) -> bool: ...

    def reset(self) -> None: ...


class TableDisplay(Protocol):
    """The table display and the machine feed. ``seq`` is the sequence number of the record
    that made the screen, so that a reconnecting client can catch up from the log."""

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class PreparesScreens(Protocol):
    """A display that can make a screen ready before it is shown (a result decided ahead,
    while the sensor reads again): the next ``show`` of that very ``data`` then only sends
    it. What it prepared and is not shown is dropped at the next ``prepare`` or ``show``."""

    def prepare(self, screen: Screen, data: Mapping[str, object]) -> None: ...


@dataclass(frozen=True, slots=True)
class LoggedCheckpoint:
    """A signed C2SP checkpoint of the first ``size`` records (the note's text)."""

    size: int
    note: str


class LogReader(Protocol):
    """Read access to the audit log for the display and the feed, safe from any thread."""

    def size(self) -> int:
        """The sequence number of the last committed record (0 for an empty log)."""
        ...

    def records_after(self, seq: int, *, limit: int) -> list[StoredRecord]:
        """Up to ``limit`` records with a sequence number above ``seq``, oldest first."""
        ...

    def latest_of(self, kinds: Collection[str], *, limit: int) -> list[StoredRecord]:
        """The newest ``limit`` records of these kinds, oldest first."""
        ...

    def latest_checkpoint(self) -> LoggedCheckpoint | None: ...
