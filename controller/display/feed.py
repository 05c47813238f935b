"""The result feed for table-management systems: JSON lines over TCP, read from the audit log.

Wire format (documented in hw/result-feed.md):

- On connect the client may send one request line within ``REQUEST_WAIT_S``:
  ``{"from": N}`` or ``FROM N`` — send every record from sequence number N on
  (1 <= N <= 2**63 - 1; in ``FROM N``, N is ASCII digits).
  Without a request the client receives the records committed after it connected.
- The server then writes one JSON object per line (UTF-8, ``\\n``-terminated):
  ``{"type": "record", "seq", "kind", "time", "round", "attempt", "dice", "total", "count",
  "starting_position", "data", "hash", "prev", "leaf", "checkpoint"}`` for each committed
  record in sequence order, without gaps; ``{"type": "heartbeat", "size", "checkpoint"}`` when
  nothing was sent for ``heartbeat_s``; ``{"type": "error", "error"}`` before closing on a bad
  request, or at once to a client over the cap of ``MAX_CLIENTS``.
- A client that leaves what was sent untaken for ``SEND_TIMEOUT_S`` is dropped (measured by
  the bytes it has not taken, controller/display/clients.py). At most ``MAX_CLIENTS`` clients,
  ``MAX_CLIENTS_PER_ADDRESS`` of them from one address, and ``LOCAL_SLOTS`` more that only the
  box's own address takes.

The feed is the log itself, so a client that reconnects with ``from`` = last seq + 1 receives
exactly the records it missed, and can check each ``hash`` (SHA-256 of ``leaf``) and the chain
(``prev``) and the signed checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import socket
import socketserver
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.core.digits import MAX_SEQ, parse_bounded_int
from controller.display.clients import SEND_SLICE_S, UnreadWatch, is_the_box, source_of
from controller.display.events import feed_line
from controller.display.hub import DisplayHub
from controller.errors import AuditLogError, FeedRequestError, NumberError
from controller.ports import LogReader

log = logging.getLogger("paigow.feed")

REQUEST_WAIT_S = 0.5  # in all, however slowly the request line arrives
REQUEST_MAX_BYTES = 200
# The bounds are constants, not [display] keys: they protect the box, and no site needs others
# (a table-management system holds one or two connections; a forwarder on the box, many).
SEND_TIMEOUT_S = 10.0  # a client that leaves what it was sent untaken this long is dropped
MAX_CLIENTS = 16  # at once, but for the box's own slots; more are refused with an error line
MAX_CLIENTS_PER_ADDRESS = 4  # from one source (an IPv6 /64): one cannot take every slot
LOCAL_SLOTS = 4  # more, for the box's own address only (127.0.0.1, ::1)
SEND_BUFFER_BYTES = 32 * 1024  # SO_SNDBUF (Linux doubles it): what is not taken stays unsent
BATCH = 256


def parse_request(line: bytes) -> int | None:
    """The first sequence number asked for, or None for an empty line (live records only)."""
    text = line.decode("utf-8", errors="strict").strip()
    if not text:
        return None
    value: Any
    if text.startswith("{"):
        try:
            request = json.loads(text, parse_constant=_not_a_number)
        except json.JSONDecodeError as exc:
            raise FeedRequestError(f"not JSON: {exc.msg}") from exc
        except ValueError as exc:  # NaN, Infinity
            raise FeedRequestError(f"not JSON: {exc}") from exc
        if not isinstance(request, dict) or set(request) != {"from"}:
            raise FeedRequestError('expected {"from": N}')
        value = request["from"]
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SEQ:
            raise FeedRequestError(f"N must be a whole number 1..{MAX_SEQ}")
        return value
    word, _, rest = text.partition(" ")
    if word.upper() != "FROM":
        raise FeedRequestError("expected FROM N")
    try:
        return parse_bounded_int(rest.strip(), low=1, high=MAX_SEQ, what="N")
    except NumberError as exc:
        raise FeedRequestError(f"expected FROM N: {exc}") from None


def _not_a_number(word: str) -> Any:
    raise ValueError(f"{word} is not a number")


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Bounds on one server's clients: how many at once (``max_clients``), how many of them
    from one source (``per_address``; None: no such cap), how many more only the box's own
    address may take (``reserved``: the kiosk's), how long the request may take to arrive, how
    long a client may leave what it was sent untaken before it is dropped
    (``send_timeout_s``, clients.UnreadWatch), and the sockets' send buffer (``send_buffer``,
    bytes; None: the system's, which grows to megabytes)."""

    max_clients: int
    request_timeout_s: float
    send_timeout_s: float
    per_address: int | None = None
    reserved: int = 0
    send_buffer: int | None = None


class CappedServer(socketserver.ThreadingTCPServer):
    """A TCP server with a thread per client, at most ``limits.max_clients`` of them, at most
    ``limits.per_address`` from one source (clients.source_of), and ``limits.reserved`` more
    that only the box's own address (the kiosk) takes, before any other slot: so clients that
    hold their connections without reading, however many and from however many addresses,
    never keep the kiosk out, and one address never takes every slot. The box's own address
    has no per-address cap (a forwarder the site runs on the box brings many clients).

    A client over a cap is refused at once (:meth:`refusal`, then closed) with one log line.
    A client that goes away, or is dropped for not reading, costs one log line, never a
    traceback (socketserver's ``handle_error`` prints one to stderr). ``clock`` is what the
    clients' unread bounds are measured on (tests inject one).
    """

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 64  # a burst of connections waits to be refused, not for a SYN retry
    name = "server"
    logger = log

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[socketserver.BaseRequestHandler],
        limits: ClientLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.limits = limits
        self.clock = clock
        self._clients = 0
        self._by_source: Counter[str] = Counter()  # general slots taken, by source
        self._reserved_taken = 0
        self._slot_of: dict[int, tuple[str, bool]] = {}  # id(request) -> (source, reserved)
        self._watches: weakref.WeakSet[UnreadWatch] = weakref.WeakSet()
        self._clients_changed = threading.Condition()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        # Before the socket: socketserver's __init__ calls server_close when it cannot listen.
        self._wake_read, self._wake_write = os.pipe()
        super().__init__(address, handler)

    @property
    def address(self) -> tuple[str, int]:
        """The host and port it listens on (the port the system chose for port 0)."""
        host, port = self.server_address[:2]
        return str(host), int(port)

    @property
    def clients(self) -> int:
        """Clients being served now."""
        with self._clients_changed:
            return self._clients

    def wait_for_clients(self, count: int, timeout: float) -> bool:
        """Wait until exactly ``count`` clients are being served; False on timeout."""
        with self._clients_changed:
            return self._clients_changed.wait_for(lambda: self._clients == count, timeout)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """socketserver's loop without its poll: it sleeps until a client connects or
        :meth:`shutdown` writes to its pipe, where socketserver wakes every ``poll_interval``
        (ignored) to look for a shutdown (issue 13: a daemon idle at a small part of a core).
        Shut down before it started (its thread was slow to run), it returns at once."""
        self._stopped.clear()
        try:
            if self._stopping.is_set():
                return
            with selectors.PollSelector() as selector:
                try:
                    selector.register(self, selectors.EVENT_READ)
                    selector.register(self._wake_read, selectors.EVENT_READ)
                except (ValueError, OSError):
                    if self._stopping.is_set():  # closed under it as it started
                        return
                    raise
                while not self._stopping.is_set():
                    ready = selector.select()
                    if self._stopping.is_set():
                        break
                    if any(key.fileobj is self for key, _ in ready):
                        self._accept_one()
                    self.service_actions()
        finally:
            self._stopped.set()

    def _accept_one(self) -> None:
        """One connection, handled as socketserver's ``_handle_request_noblock`` does."""
        try:
            request, client_address = self.get_request()
        except OSError:
            return
        if not self.verify_request(request, client_address):
            self.shutdown_request(request)
            return
        try:
            self.process_request(request, client_address)
        except Exception:  # noqa: BLE001 - one log line for the client (handle_error)
            self.handle_error(request, client_address)
            self.shutdown_request(request)
        except BaseException:
            self.shutdown_request(request)
            raise

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait until it has returned (at once if it is not
        running; once stopped, it does not start again)."""
        self.shut_down_within(None)

    def shut_down_within(self, timeout: float | None) -> bool:
        """:meth:`shutdown`, waiting at most ``timeout``: whether it has returned."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        return self._stopped.wait(timeout)

    def server_close(self) -> None:
        super().server_close()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_read = self._wake_write = -1

    @property
    def clients_behind(self) -> int:
        """Clients whose last look found bytes they had not taken (for surveillance and
        tests: a client behind for ``limits.send_timeout_s`` is dropped)."""
        with self._clients_changed:
            watches = list(self._watches)
        return sum(watch.is_behind for watch in watches)

    def clients_from(self, source: str) -> int:
        """Clients from ``source`` (clients.source_of) in the general slots now."""
        with self._clients_changed:
            return self._by_source[source]

    def _take_slot(self, request: Any, source: str) -> str | None:
        """A slot for a client from ``source`` (counted), or why there is none."""
        limits = self.limits
        with self._clients_changed:
            reserved = is_the_box(source) and self._reserved_taken < limits.reserved
            if not reserved:
                general = self._clients - self._reserved_taken
                if general >= limits.max_clients:
                    return f"{limits.max_clients} clients already"
                if (
                    limits.per_address is not None
                    and not is_the_box(source)
                    and self._by_source[source] >= limits.per_address
                ):
                    return f"{limits.per_address} clients from {source} already"
                self._by_source[source] += 1
            else:
                self._reserved_taken += 1
            self._clients += 1
            self._slot_of[id(request)] = (source, reserved)
            self._clients_changed.notify_all()
            return None

    def _give_back(self, request: Any) -> None:
        with self._clients_changed:
            slot = self._slot_of.pop(id(request), None)
            if slot is None:
                return
            source, reserved = slot
            if reserved:
                self._reserved_taken -= 1
            else:
                self._by_source[source] -= 1
                if not self._by_source[source]:
                    del self._by_source[source]
            self._clients -= 1
            self._clients_changed.notify_all()

    def process_request(self, request: Any, client_address: Any) -> None:
        refused = self._take_slot(request, source_of(client_address))
        if refused is not None:
            self.logger.warning("%s: %s; refused %s", self.name, refused, _address(client_address))
            with contextlib.suppress(OSError):
                request.setblocking(False)  # the refusal never waits on the client
                request.send(self.refusal())
            self.shutdown_request(request)
            return
        with contextlib.suppress(OSError):  # what is sent goes at once (no Nagle delay)
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.limits.send_buffer is not None:
            with contextlib.suppress(OSError):  # what a client does not take stays unsent
                request.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.send_buffer)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._give_back(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._give_back(request)

    def unread_watch(self, sock: socket.socket) -> UnreadWatch:
        """The watch on whether the client on ``sock`` takes what it is sent; the socket's
        timeout becomes the slice between two looks at its backlog."""
        sock.settimeout(SEND_SLICE_S)
        watch = UnreadWatch(
            sock,
            bound_s=self.limits.send_timeout_s,
            clock=self.clock,
            is_closing=self._stopping.is_set,
        )
        with self._clients_changed:
            self._watches.add(watch)
        return watch

    def refusal(self) -> bytes:
        """What a client over the cap receives before the connection closes."""
        return b""

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            self.logger.info("%s client %s dropped: %s", self.name, _address(client_address), exc)
        else:
            self.logger.warning(
                "%s client %s: %s: %s",
                self.name,
                _address(client_address),
                type(exc).__name__,
                exc,
            )


def _address(client_address: Any) -> str:
    try:
        host, port = client_address[:2]
    except (TypeError, ValueError):
        return str(client_address)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class FeedServer(CappedServer):
    name = "feed"

    def __init__(
        self,
        address: tuple[str, int],
        hub: DisplayHub,
        log_reader: LogReader,
        *,
        heartbeat_s: float = 1.0,
        limits: ClientLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hub = hub
        self.log_reader = log_reader
        self.heartbeat_s = heartbeat_s
        if limits is None:
            limits = ClientLimits(
                MAX_CLIENTS,
                REQUEST_WAIT_S,
                SEND_TIMEOUT_S,
                per_address=MAX_CLIENTS_PER_ADDRESS,
                reserved=LOCAL_SLOTS,
                send_buffer=SEND_BUFFER_BYTES,
            )
        super().__init__(address, _FeedHandler, limits, clock=clock)

    def refusal(self) -> bytes:
        return _lines([{"type": "error", "error": "too many clients"}])


class _FeedHandler(socketserver.BaseRequestHandler):
    server: FeedServer
    request: socket.socket

    def handle(self) -> None:
        feed = self.server
        sock = self.request
        try:
            live_from = feed.hub.size + 1
            try:
                asked = parse_request(self._request_line(sock))
            except (FeedRequestError, UnicodeDecodeError) as exc:
                watch = feed.unread_watch(sock)
                watch.send_all(_lines([{"type": "error", "error": f"bad request: {exc}"}]))
                return
            self._stream(sock, live_from if asked is None else asked)
        except (OSError, AuditLogError) as exc:  # the client went away, or the log failed
            log.info("feed client %s dropped: %s", _address(self.client_address), exc)

    def _request_line(self, sock: socket.socket) -> bytes:
        """The request line, if one arrives within the request wait (in all: a client that
        sends a byte at a time does not hold the wait open)."""
        deadline = time.monotonic() + self.server.limits.request_timeout_s
        line = b""
        try:
            while b"\n" not in line and len(line) <= REQUEST_MAX_BYTES:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                sock.settimeout(remaining)
                chunk = sock.recv(REQUEST_MAX_BYTES + 1 - len(line))
                if not chunk:
                    break
                line += chunk
        except TimeoutError:
            pass
        if len(line.partition(b"\n")[0]) > REQUEST_MAX_BYTES:
            raise FeedRequestError("request line too long")
        return line.partition(b"\n")[0]

    def _stream(self, sock: socket.socket, next_seq: int) -> None:
        """Records from ``next_seq`` on: the hub's lines (serialised when they were committed)
        while the client keeps up, sent by the control thread itself once it is up to date
        (a live client), the log (read-only) for a client further behind. A client that
        leaves what it was sent untaken for the bound is dropped, live or not."""
        feed = self.server
        hub = feed.hub
        watch = feed.unread_watch(sock)
        while not hub.is_closed():
            lines = hub.lines_from(next_seq)
            if lines is None:
                records = feed.log_reader.records_after(next_seq - 1, limit=BATCH)
                if records:
                    checkpoint = feed.log_reader.latest_checkpoint()
                    watch.send_all(_lines([feed_line(r, checkpoint) for r in records]))
                    next_seq = records[-1].seq + 1
                    continue
                lines = []
            if lines:
                watch.send_all(b"".join(lines))
                next_seq += len(lines)
                continue
            client = hub.go_live_feed(sock, next_seq)
            if client is not None:  # up to date: the control thread sends to it from now on
                try:
                    hub.stay_live(client, lambda: feed.heartbeat_s, check=watch.check)
                finally:
                    sock.settimeout(SEND_SLICE_S)
                if client.error is not None:
                    raise client.error
                watch.send_all(client.backlog)
                next_seq = client.position
                continue
            if not hub.wait_lines(next_seq, feed.heartbeat_s) and not hub.is_closed():
                watch.send_all(_lines([hub.heartbeat()]))


def _lines(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
