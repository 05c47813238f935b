"""The result feed for table-management systems: JSON lines over TCP, read from the audit log.

Wire format (documented in hw/result-feed.md):

- On connect the client may send one request line within ``REQUEST_WAIT_S``:
  ``{"from": N}`` or ``FROM N`` — send every record from sequence number N on (N >= 1).
  Without a request the client receives the records committed after it connected.
- The server then writes one JSON object per line (UTF-8, ``\\n``-terminated):
  ``{"type": "record", "seq", "kind", "time", "round", "attempt", "dice", "total", "count",
  "starting_position", "data", "hash", "prev", "leaf", "checkpoint"}`` for each committed
  record in sequence order, without gaps; ``{"type": "heartbeat", "size", "checkpoint"}`` when
  nothing was sent for ``heartbeat_s``; ``{"type": "error", "error"}`` before closing on a bad
  request.

The feed is the log itself, so a client that reconnects with ``from`` = last seq + 1 receives
exactly the records it missed, and can check each ``hash`` (SHA-256 of ``leaf``) and the chain
(``prev``) and the signed checkpoint.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
from typing import Any

from controller.display_events import checkpoint_json, feed_line
from controller.display_hub import DisplayHub
from controller.display_log import LogReader
from controller.errors import AuditLogError

log = logging.getLogger("paigow.feed")

REQUEST_WAIT_S = 0.5
REQUEST_MAX_BYTES = 200
SEND_TIMEOUT_S = 10.0  # a client that does not read for this long is dropped
BATCH = 256


class FeedRequestError(ValueError):
    """A request line that is neither ``{"from": N}`` nor ``FROM N``."""


def parse_request(line: bytes) -> int | None:
    """The first sequence number asked for, or None for an empty line (live records only)."""
    text = line.decode("utf-8", errors="strict").strip()
    if not text:
        return None
    value: Any
    if text.startswith("{"):
        try:
            request = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FeedRequestError(f"not JSON: {exc.msg}") from exc
        if not isinstance(request, dict) or set(request) != {"from"}:
            raise FeedRequestError('expected {"from": N}')
        value = request["from"]
    else:
        word, _, rest = text.partition(" ")
        if word.upper() != "FROM" or not rest.strip().isdigit():
            raise FeedRequestError("expected FROM N")
        value = int(rest.strip())
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FeedRequestError("N must be a whole number from 1")
    return value


class FeedServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        hub: DisplayHub,
        log_reader: LogReader,
        *,
        heartbeat_s: float = 1.0,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.hub = hub
        self.log_reader = log_reader
        self.heartbeat_s = heartbeat_s
        super().__init__(address, _FeedHandler)


class _FeedHandler(socketserver.BaseRequestHandler):
    server: FeedServer
    request: socket.socket

    def handle(self) -> None:
        feed = self.server
        sock = self.request
        try:
            live_from = feed.log_reader.size() + 1
            try:
                asked = parse_request(self._request_line(sock))
            except (FeedRequestError, UnicodeDecodeError) as exc:
                self._send(sock, [{"type": "error", "error": f"bad request: {exc}"}])
                return
            self._stream(sock, live_from if asked is None else asked)
        except (OSError, AuditLogError) as exc:  # the client went away, or the log failed
            log.info("feed client %s: %s", self.client_address, exc)

    def _request_line(self, sock: socket.socket) -> bytes:
        sock.settimeout(REQUEST_WAIT_S)
        line = b""
        try:
            while b"\n" not in line and len(line) <= REQUEST_MAX_BYTES:
                chunk = sock.recv(REQUEST_MAX_BYTES)
                if not chunk:
                    break
                line += chunk
        except TimeoutError:
            pass
        if len(line) > REQUEST_MAX_BYTES:
            raise FeedRequestError("request line too long")
        return line.partition(b"\n")[0]

    def _stream(self, sock: socket.socket, next_seq: int) -> None:
        feed = self.server
        hub = feed.hub
        version = hub.log_version
        sock.settimeout(SEND_TIMEOUT_S)
        while not hub.is_closed():
            records = feed.log_reader.records_after(next_seq - 1, limit=BATCH)
            if records:
                checkpoint = feed.log_reader.latest_checkpoint()
                self._send(sock, [feed_line(r, checkpoint) for r in records])
                next_seq = records[-1].seq + 1
                continue
            new_version = hub.wait_log(version, feed.heartbeat_s)
            if new_version == version and not hub.is_closed():
                checkpoint = feed.log_reader.latest_checkpoint()
                size = feed.log_reader.size()
                heartbeat = {"type": "heartbeat", "size": size}
                self._send(sock, [{**heartbeat, "checkpoint": checkpoint_json(checkpoint)}])
            version = new_version

    @staticmethod
    def _send(sock: socket.socket, lines: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        sock.sendall(data.encode("utf-8"))
