"""The optical dice sensor on a serial line (``hw/dice-sensor-protocol.md``), through pyserial.

The port is given by URL and opened with :func:`serial.serial_for_url`, so a device
(``/dev/ttyAMA0``), a udev symlink (``/dev/paigow-dice``), ``socket://host:port`` and a
pseudo-terminal all work the same way.

One reader thread owns the reading side of the port. It matches replies to the one request in
flight by sequence number (a late or duplicated reply is ignored), retries a request that got
no valid reply in time with a new sequence number, notices the line going away, reopens it with
a growing delay and repeats the handshake. Everything it learns goes on the injected
:class:`~controller.ports.EventSink` as an :class:`~controller.core.state.Occurrence`; an
exception in the thread becomes an event too, never a silent death.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from types import TracebackType

import serial

from controller.core.config import SensorConfig
from controller.core.dice import DiceReading
from controller.core.sensor_protocol import (
    PROTOCOL_VERSION,
    SEQ_MODULO,
    FaultReport,
    FrameParser,
    Hello,
    Identity,
    Reading,
    ReadNow,
    Refused,
    Reply,
    Request,
    SensorFault,
    Status,
    StatusRequest,
    encode,
)
from controller.core.state import (
    Event,
    Fault,
    FaultRaised,
    Occurrence,
    ReadingTaken,
    SensorTimedOut,
    occurrence,
)
from controller.errors import (
    SensorDisconnected,
    SensorError,
    SensorHardwareFault,
    SensorTimeout,
    SensorVersionError,
)
from controller.ports import EventSink, SensorIdentity, monotonic_ms

log = logging.getLogger(__name__)

_REPLY_TO: dict[type[Request], tuple[type[Reply], ...]] = {
    Hello: (Identity, Refused),
    ReadNow: (Reading, FaultReport, Refused),
    StatusRequest: (Status, Refused),
}
_MAX_QUEUED = 8  # requests waiting behind the one in flight
# No request for this long: the reader sleeps until a byte comes, a request is sent or the
# driver closes (each cancels its read), instead of waking every timeout_s (idle CPU).
IDLE_AFTER_S = 5.0


def firmware_major_is(major: int) -> Callable[[str], bool]:
    """The default firmware approval: the major version this protocol document describes."""

    def approve(firmware: str) -> bool:
        return firmware.split(".", 1)[0] == str(major)

    return approve


class _Waiter:
    """A blocking caller's slot for one reply."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: Reply | None = None
        self.error: SensorError | None = None

    def resolve(self, reply: Reply) -> None:
        self.reply = reply
        self.done.set()

    def fail(self, error: SensorError) -> None:
        self.error = error
        self.done.set()

    def result(self, timeout: float) -> Reply:
        if not self.done.wait(timeout):
            raise SensorTimeout(f"no reply from the dice sensor within {timeout:.2f} s")
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        return self.reply


@dataclass(slots=True)
class _Request:
    kind: type[Request]
    tries_left: int
    waiter: _Waiter | None
    detail: str
    seq: int = -1
    deadline: float = 0.0


@dataclass(slots=True)
class SensorStats:
    """Counters for the technician's status page and the tests."""

    requests_sent: int = 0
    retries: int = 0
    replies_ignored: int = 0  # late (old sequence), duplicated, or of the wrong type
    timeouts: int = 0
    disconnects: int = 0
    reconnects: int = 0
    write_timeouts: int = 0  # a frame the port did not take in time; its request is retried


class SerialDiceSensor:
    """The :class:`~controller.ports.DiceSensor` on a serial line.

    Events: ``READING`` (``reading=``) for each :meth:`request_read`, or ``SENSOR_TIMEOUT``
    after the retries; ``FAULT`` with ``Fault.SENSOR_HARDWARE`` when the sensor reports its
    camera, lighting or lens failed; ``SENSOR_LOST`` when the line goes away and
    ``SENSOR_BACK`` when it is back and the handshake passed again; ``FAULT`` with
    ``Fault.INTERNAL`` if the reader thread meets an error it did not expect (it then reopens
    the line and carries on).
    """

    def __init__(
        self,
        url: str,
        events: EventSink,
        *,
        baudrate: int = 115200,
        timeout_s: float = 0.5,
        retries: int = 3,
        approve_firmware: Callable[[str], bool] | Collection[str] | None = None,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        poll_s: float = 0.02,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.url = url
        self._events = events
        self._baudrate = baudrate
        self._timeout_s = timeout_s
        self._retries = retries
        if approve_firmware is None:
            self._approve: Callable[[str], bool] = firmware_major_is(1)
        elif callable(approve_firmware):
            self._approve = approve_firmware
        else:
            approved = frozenset(approve_firmware)
            self._approve = approved.__contains__
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._backoff_s = backoff_initial_s
        self._poll_s = poll_s
        self._clock = clock
        self._lock = threading.Lock()
        self._port: serial.SerialBase | None = None
        self._parser = FrameParser()
        self._pending: _Request | None = None
        self._queue: deque[_Request] = deque()
        self._seq = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._is_lost = False
        self._closed = False
        self._active_until = 0.0  # monotonic: the reader waits at most timeout_s till then
        self._is_waiting_idle = False  # the reader's read waits for a byte only
        self.identity: SensorIdentity | None = None
        self.stats = SensorStats()

    @classmethod
    def from_config(
        cls, config: SensorConfig, events: EventSink, **options: object
    ) -> SerialDiceSensor:
        return cls(
            config.url,
            events,
            baudrate=config.baudrate,
            timeout_s=config.timeout_ms / 1000,
            retries=config.retries,
            **options,  # type: ignore[arg-type]
        )

    # --- the port's life -------------------------------------------------------------------

    def open(self) -> SensorIdentity:
        """Open the port, do the version handshake (blocking), start the reader thread.

        Raises :class:`SensorTimeout` when the sensor does not answer, :class:`SensorVersionError`
        when its firmware is not approved, :class:`SensorDisconnected` when the port will not open.
        """
        if self._thread is not None:
            raise SensorError("the dice sensor is already open")
        try:
            self._connect()
            identity = self._handshake()
        except BaseException as exc:
            self._drop_port()
            self._fail_all(SensorDisconnected("the handshake failed"))
            if isinstance(exc, (serial.SerialException, OSError)) and not isinstance(
                exc, SensorError
            ):
                raise SensorDisconnected(f"the handshake on {self.url} failed: {exc}") from exc
            raise
        self._thread = threading.Thread(target=self._run, name="dice-sensor-reader", daemon=True)
        self._thread.start()
        return identity

    def close(self) -> None:
        """Stop the reader thread and close the port. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        with self._lock:
            self._is_waiting_idle = True  # whatever it waits for: the reader sees the close
            self._cancel_read_locked()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(2.0, 5 * self._poll_s))
        self._drop_port()
        self._fail_all(SensorDisconnected("the dice sensor driver was closed"))

    def __enter__(self) -> SerialDiceSensor:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def is_connected(self) -> bool:
        return self._port is not None and not self._is_lost

    # --- requests --------------------------------------------------------------------------

    def request_read(self, *, round_number: int, attempt: int) -> None:
        """Ask for a reading; returns at once. ``READING`` or ``SENSOR_TIMEOUT`` follows."""
        detail = f"round {round_number} attempt {attempt}"
        if self._closed or self._is_lost or self._port is None:
            self._emit(Event.SENSOR_LOST, detail=f"read requested ({detail}) while not connected")
            return
        self._submit(_Request(ReadNow, self._retries, None, detail))

    def read_once(self, timeout: float | None = None) -> DiceReading:
        """Blocking read for the self-test; emits no event. Raises :class:`SensorTimeout`,
        :class:`SensorHardwareFault`, :class:`SensorDisconnected`."""
        reply = self._call(ReadNow, timeout)
        if isinstance(reply, FaultReport):
            raise SensorHardwareFault(f"dice sensor reports {_faults_text(reply.faults)}")
        if not isinstance(reply, Reading):
            raise SensorError(f"dice sensor refused the read: {reply}")
        return reply.to_dice_reading()

    def status(self, timeout: float | None = None) -> frozenset[SensorFault]:
        """Blocking status request: the hardware faults the sensor reports (empty: healthy)."""
        reply = self._call(StatusRequest, timeout)
        if not isinstance(reply, Status):
            raise SensorError(f"dice sensor refused the status request: {reply}")
        return reply.faults

    def _call(self, kind: type[Request], timeout: float | None) -> Reply:
        if self._closed or self._port is None or self._is_lost:
            raise SensorDisconnected("the dice sensor is not connected")
        waiter = _Waiter()
        self._submit(_Request(kind, self._retries, waiter, f"{kind.__name__} (blocking)"))
        return waiter.result(self._total_wait() if timeout is None else timeout)

    def _total_wait(self) -> float:
        return self._timeout_s * (self._retries + 1) + 1.0

    def _submit(self, request: _Request) -> None:
        with self._lock:
            if len(self._queue) >= _MAX_QUEUED:
                raise SensorError("too many dice sensor requests waiting")
            self._queue.append(request)
            try:
                self._send_next_locked()
            except (serial.SerialException, OSError) as exc:
                # The reader thread will meet the same failure on its next read and report it.
                log.warning("dice sensor: write failed: %s", exc)

    # --- the reader thread -----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self._port is None:
                    self._reconnect()
                else:
                    self._service()
            except (serial.SerialException, OSError) as exc:
                if isinstance(exc, SensorError) and not isinstance(exc, SensorDisconnected):
                    log.error("dice sensor: %s", exc)
                self._lose(f"{type(exc).__name__}: {exc}")
            except Exception as exc:  # the reader thread never dies silently: this becomes an event
                log.exception("dice sensor reader: unexpected error")
                self._emit(Event.FAULT, fault=Fault.INTERNAL, detail=f"dice sensor reader: {exc!r}")
                self._lose(f"unexpected error: {exc!r}")
                self._stopping.wait(self._backoff_s)

    def _service(self) -> None:
        """One turn: read what the line has, match replies, handle the deadline."""
        port = self._port
        if port is None:
            return
        self._set_read_timeout(port)
        data = port.read(1)
        if data:
            waiting: int = getattr(port, "in_waiting", 0)
            if waiting:
                data += port.read(min(waiting, 4096))
        frames = self._parser.feed(data) if data else []
        events: list[Occurrence] = []
        with self._lock:
            for frame in frames:
                self._on_frame_locked(frame, events)
            self._check_deadline_locked(events)
            self._send_next_locked()
        for event in events:
            self._events.put(event)

    def _set_read_timeout(self, port: serial.SerialBase) -> None:
        """Block until a byte comes or the request in flight is due: no polling. While a
        round reads, a wake-up every ``timeout_s`` at most; idle (no request for
        ``IDLE_AFTER_S``) on a port whose read can be cancelled, none: the next request, or
        ``close``, cancels the read."""
        with self._lock:
            request = self._pending
            now = time.monotonic()
            wait: float | None = self._timeout_s
            if request is not None:
                wait = min(self._timeout_s, max(0.001, request.deadline - now))
            elif now >= self._active_until and _can_cancel_read(port):
                wait = None
            self._is_waiting_idle = wait is None
        current = port.timeout
        if wait is None or current is None:
            if current != wait:
                port.timeout = wait
        elif abs(current - wait) > 0.002:
            port.timeout = wait

    def _cancel_read_locked(self) -> None:
        """Wake the reader from an idle read (it then sees the request, or the close)."""
        port = self._port
        if self._is_waiting_idle and port is not None:
            self._is_waiting_idle = False
            cancel = getattr(port, "cancel_read", None)  # the port checked it has one
            try:
                if callable(cancel):
                    cancel()
            except (serial.SerialException, OSError) as exc:
                log.debug("dice sensor: cannot cancel the read: %s", exc)

    def _connect(self) -> None:
        try:
            port = serial.serial_for_url(
                self.url,
                baudrate=self._baudrate,
                timeout=self._poll_s,
                write_timeout=self._timeout_s,
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise SensorDisconnected(f"cannot open {self.url}: {exc}") from exc
        _assert_modem_lines(port)
        try:
            port.reset_input_buffer()
        except (serial.SerialException, OSError):
            log.debug("dice sensor: the port cannot discard its input")
        with self._lock:
            self._parser.reset()
            self._port = port

    def _handshake(self) -> SensorIdentity:
        """Send ``HI`` and wait for an approved ``ID``, servicing the line in this thread."""
        waiter = _Waiter()
        with self._lock:
            self._queue.appendleft(_Request(Hello, self._retries, waiter, "handshake"))
            self._send_next_locked()
        deadline = time.monotonic() + self._total_wait()
        while not waiter.done.is_set():
            if self._stopping.is_set() or time.monotonic() > deadline:
                raise SensorDisconnected("handshake abandoned")
            self._service()
        reply = waiter.result(0)
        if not isinstance(reply, Identity):
            raise SensorError(f"dice sensor refused the handshake: {reply}")
        if not self._approve(reply.firmware):
            raise SensorVersionError(
                f"dice sensor {reply.model} {reply.serial_number} runs firmware {reply.firmware},"
                " which is not approved for this table"
            )
        identity = SensorIdentity(
            model=reply.model,
            firmware=reply.firmware,
            serial_number=reply.serial_number,
            protocol_version=PROTOCOL_VERSION,
        )
        if self.identity is not None and identity != self.identity:
            log.warning("dice sensor changed: was %s, now %s", self.identity, identity)
        self.identity = identity
        return identity

    def _reconnect(self) -> None:
        if self._stopping.wait(self._backoff_s):
            return
        self._backoff_s = min(self._backoff_s * 2, self._backoff_max_s)
        self._connect()
        identity = self._handshake()
        self._backoff_s = self._backoff_initial_s
        self._is_lost = False
        self.stats.reconnects += 1
        log.info("dice sensor back: %s", identity)
        self._emit(
            Event.SENSOR_BACK,
            detail=f"{identity.model} {identity.serial_number} firmware {identity.firmware}",
        )

    def _lose(self, reason: str) -> None:
        """The line failed: drop the port and every request in flight, report it once."""
        self._drop_port()
        self._fail_all(SensorDisconnected(f"dice sensor lost: {reason}"))
        if self._stopping.is_set() or self._is_lost:
            return
        self._is_lost = True
        self.stats.disconnects += 1
        log.error("dice sensor lost: %s", reason)
        self._emit(Event.SENSOR_LOST, detail=reason)

    def _drop_port(self) -> None:
        with self._lock:
            port, self._port = self._port, None
            self._parser.reset()
        if port is not None:
            try:
                port.close()
            except (serial.SerialException, OSError) as exc:
                log.debug("dice sensor: closing the port: %s", exc)

    def _fail_all(self, error: SensorError) -> None:
        with self._lock:
            requests = list(self._queue)
            if self._pending is not None:
                requests.append(self._pending)
            self._queue.clear()
            self._pending = None
        for request in requests:
            if request.waiter is not None:
                request.waiter.fail(error)

    # --- matching replies to requests (called with the lock held) --------------------------

    def _send_next_locked(self) -> None:
        if self._pending is None and self._queue and self._port is not None:
            request = self._queue.popleft()
            self._pending = request
            self._transmit_locked(request)

    def _transmit_locked(self, request: _Request) -> None:
        self._seq = (self._seq + 1) % SEQ_MODULO
        request.seq = self._seq
        request.deadline = time.monotonic() + self._timeout_s
        self._active_until = request.deadline + IDLE_AFTER_S
        self._cancel_read_locked()
        self.stats.requests_sent += 1
        port = self._port
        if port is None:
            raise SensorDisconnected("the dice sensor port is closed")
        try:
            port.write(encode(request.kind(request.seq)))
        except serial.SerialTimeoutException as exc:
            # pyserial measures its write timeout around the whole call, so a busy scheduler
            # can time out a frame that was in fact sent. Either way the request keeps its
            # deadline: its reply is used if it comes, else it is retried (DS1 section 3) and,
            # after the retries, ends in SENSOR_TIMEOUT like any unanswered request.
            self.stats.write_timeouts += 1
            log.warning(
                "dice sensor: %s of %s timed out: %s", request.kind.__name__, request.detail, exc
            )

    def _on_frame_locked(self, frame: object, events: list[Occurrence]) -> None:
        request = self._pending
        seq = getattr(frame, "seq", None)
        if request is None or seq != request.seq or not isinstance(frame, _REPLY_TO[request.kind]):
            # DS1 section 3: a late reply (older sequence), a duplicate, or a reply that does
            # not answer the request in flight is never used.
            self.stats.replies_ignored += 1
            log.debug("dice sensor: ignored %s", frame)
            return
        if isinstance(frame, Refused) and request.tries_left > 0:
            request.tries_left -= 1
            self.stats.retries += 1
            self._transmit_locked(request)
            return
        self._pending = None
        if request.waiter is not None:
            request.waiter.resolve(frame)
            return
        at = self._now()
        if isinstance(frame, Reading):
            events.append(
                ReadingTaken(at=at, reading=frame.to_dice_reading(), detail=request.detail)
            )
        elif isinstance(frame, FaultReport):
            events.append(
                FaultRaised(
                    at=at,
                    fault=Fault.SENSOR_HARDWARE,
                    detail=f"dice sensor reports {_faults_text(frame.faults)}",
                )
            )
        else:
            self.stats.timeouts += 1
            events.append(SensorTimedOut(at=at, detail=f"{request.detail}: refused ({frame})"))

    def _check_deadline_locked(self, events: list[Occurrence]) -> None:
        request = self._pending
        if request is None or time.monotonic() < request.deadline:
            return
        if request.tries_left > 0:
            request.tries_left -= 1
            self.stats.retries += 1
            log.info("dice sensor: no valid reply to %s, retrying", request.detail)
            self._transmit_locked(request)  # a new sequence number: DS1 section 3
            return
        self._pending = None
        self.stats.timeouts += 1
        if request.waiter is not None:
            request.waiter.fail(SensorTimeout(f"dice sensor: no valid reply to {request.detail}"))
        elif request.kind is ReadNow:
            events.append(
                SensorTimedOut(
                    at=self._now(),
                    detail=f"{request.detail}: no valid reply after {self._retries} retries"
                    f" ({self._parser.last_rejection or 'nothing received'})",
                )
            )

    # --- helpers ---------------------------------------------------------------------------

    def _now(self) -> int:
        return self._clock() if self._clock is not None else monotonic_ms()

    def _emit(self, event: Event, *, fault: Fault | None = None, detail: str = "") -> None:
        self._events.put(occurrence(event, at=self._now(), fault=fault, detail=detail))

    @property
    def rejections(self) -> dict[str, int]:
        """Frames the parser dropped, by reason."""
        return {str(reason): count for reason, count in self._parser.rejections.items()}


def _can_cancel_read(port: serial.SerialBase) -> bool:
    """pyserial's POSIX ports (and loop://) can cancel a read from another thread; a
    socket:// port cannot, so its reader keeps waking every ``timeout_s`` to see a close."""
    return callable(getattr(port, "cancel_read", None))


def _faults_text(faults: Collection[SensorFault]) -> str:
    return "+".join(sorted(f.value for f in faults)) or "no fault"


def _assert_modem_lines(port: serial.SerialBase) -> None:
    """Assert DTR and RTS ("host present"); a pty or a three-wire UART has no modem lines and
    raises on them, which is fine."""
    for line in ("dtr", "rts"):
        try:
            setattr(port, line, True)
        except (serial.SerialException, OSError, ValueError, NotImplementedError) as exc:
            log.debug("dice sensor port has no %s line: %s", line.upper(), exc)
