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
  the bytes it has not taken, controller/web/clients.py). At most ``MAX_CLIENTS`` clients,
  ``MAX_CLIENTS_PER_ADDRESS`` of them from one address, and ``LOCAL_SLOTS`` more that only the
  box's own address takes.

The feed is the log itself, so a client that reconnects with ``from`` = last seq + 1 receives
exactly the records it missed, and can check each ``hash`` (SHA-256 of ``leaf``) and the chain
(``prev``) and the signed checkpoint.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import time
from collections.abc import Callable
from typing import Any

from controller.core.digits import MAX_SEQ, parse_bounded_int
from controller.display.events import feed_line
from controller.display.hub import DisplayHub
from controller.errors import AuditLogError, FeedRequestError, NumberError
from controller.ports import LogReader
from controller.web.capped import CappedServer, ClientLimits, client_text
from controller.web.clients import SEND_SLICE_S

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


class FeedServer(CappedServer):
    name = "feed"
    logger = log

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
            log.info("feed client %s dropped: %s", client_text(self.client_address), exc)

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
