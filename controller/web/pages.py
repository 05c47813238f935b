"""The HTTP side of the web servers: what the table display's page server
(controller/display/server.py) and the witness's floor dashboard (controller/witness/dashboard.py)
both serve with, on a :class:`~controller.web.capped.CappedServer`.

A client over the cap gets a plain 503 (:class:`HttpCappedServer`); a request's line and
headers are read within a time and a size in all (:class:`RequestReader`); what is written
goes through the client's unread watch (:class:`WatchedWriter`); a page's files come from its
package's ``assets`` folder (:func:`load_assets`); a server that cannot listen says where it
tried (:func:`listening_on`).
"""

from __future__ import annotations

import contextlib
import io
import socket
import time
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from controller.web.capped import CappedServer
from controller.web.clients import UnreadWatch


def load_assets(
    package: str, assets: Mapping[str, tuple[str, str]]
) -> dict[str, tuple[bytes, str]]:
    """A page's files from ``package``'s ``assets`` folder: path -> (bytes, content type)."""
    folder = resources.files(package) / "assets"
    return {path: ((folder / name).read_bytes(), kind) for path, (name, kind) in assets.items()}


class HttpCappedServer(CappedServer):
    """A page server's capped server: a client over the cap gets a plain 503."""

    def refusal(self) -> bytes:
        body = b"too many clients\n"
        return (
            b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


class RequestReader(io.RawIOBase):
    """The reading side of a page connection: the request line and headers must arrive within
    ``timeout_s`` in all (a client that sends part of them and stalls, or dribbles a byte at a
    time, is dropped) and ``max_bytes``; past that the stream reads as ended. Each read leaves
    the socket's timeout at ``send_timeout_s`` for the writes that follow. ``is_cut``: the
    request reached ``max_bytes`` (what was read of it may be incomplete)."""

    def __init__(
        self, sock: socket.socket, *, timeout_s: float, max_bytes: int, send_timeout_s: float
    ) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = time.monotonic() + timeout_s
        self._left = max_bytes
        self._send_timeout_s = send_timeout_s

    def readable(self) -> bool:
        return True

    @property
    def is_cut(self) -> bool:
        return self._left <= 0

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request did not arrive in time")
        view = memoryview(buffer).cast("B")[: self._left]
        self._sock.settimeout(remaining)
        try:
            count = self._sock.recv_into(view)
        finally:
            self._sock.settimeout(self._send_timeout_s)
        self._left -= count
        return count


class WatchedWriter(io.BufferedIOBase):
    """The writing side of a page connection: every write goes through the client's
    :class:`UnreadWatch` (socketserver's writer, but for the watch)."""

    def __init__(self, watch: UnreadWatch) -> None:
        super().__init__()
        self._watch = watch

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._watch.send_all(data)
        with memoryview(data) as view:
            return view.nbytes


@contextlib.contextmanager
def listening_on(what: str, host: str, port: int) -> Iterator[None]:
    """A server that cannot listen says where it tried (the port taken, the host unknown)."""
    try:
        yield
    except OSError as exc:
        message = f"{what} cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise OSError(exc.errno, message) from exc
