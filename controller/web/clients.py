"""What the web servers know of a client: whether it reads, and where it comes from.

Whether a client reads is measured by what it has not taken, not by whether a send waited. A
client that connects and never reads does not make a send wait for long: its kernel's receive
buffer and the server's send buffer take what is sent (the page's heartbeats, a hundred bytes a
second, take many minutes to fill them). So :class:`UnreadWatch` looks at the bytes still in the
socket's send queue (Linux's ``SIOCOUTQ``: not yet taken by the client's host), the server's own
backlog for the client, and the bytes the client has taken so far (``TCP_INFO``'s
``tcpi_bytes_acked``). A client that, with bytes unsent, takes nothing more for the bound is
dropped (:class:`ClientNotReading`), whether or not a send waited. Each server keeps its
sockets' send buffer small (``SO_SNDBUF``), so what a client does not take stays counted as
unsent rather than in a buffer that grows to megabytes.

A client's source is its address; an IPv6 address counts by its /64 (one host is given a /64).
The box's own address (``127.0.0.1``, ``::1``) is the kiosk's, and a forwarder the site runs on
the box: it has slots of its own and no per-address cap (see ``capped.CappedServer``). The other
loopback addresses (``127.0.0.2`` ...) are sources like any other: nothing on the box uses them.
"""

from __future__ import annotations

import array
import fcntl
import ipaddress
import socket
import struct
from collections.abc import Callable

from controller.errors import ClientNotReading

# The longest a send to a client waits before its backlog is looked at again (the bound itself
# is the server's ``send_timeout_s``).
SEND_SLICE_S = 0.25
_TCP_INFO = getattr(socket, "TCP_INFO", None)
_OUTQ = 0x5411  # SIOCOUTQ (TIOCOUTQ on Linux): bytes in a TCP socket's send queue not yet acked
_BYTES_ACKED = 120  # the offset of tcpi_bytes_acked (u64) in struct tcp_info (Linux >= 4.1)
_BOX = frozenset({"127.0.0.1", "::1"})


def kernel_queue(sock: socket.socket) -> tuple[int, int] | None:
    """(bytes in ``sock``'s send queue the client has not taken, bytes it has taken in all),
    or None where the system does not say (not Linux, not TCP, closed)."""
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _BYTES_ACKED + 8)
        queued = array.array("i", [0])
        fcntl.ioctl(sock.fileno(), _OUTQ, queued)
    except (OSError, ValueError):
        return None
    if len(info) < _BYTES_ACKED + 8:
        return None
    return queued[0], struct.unpack_from("=Q", info, _BYTES_ACKED)[0]


class UnreadWatch:
    """Whether the client on ``sock`` takes what it is sent within ``bound_s`` (on ``clock``).

    :meth:`check` raises :class:`ClientNotReading` when, with bytes unsent, the client has
    taken nothing more for ``bound_s``. A client that reads, however slowly, takes something
    within the bound: the kernel tells the server of what it read as its receive window
    reopens, in steps of at least a segment, so one that reads a byte now and then is seen
    taking nothing. Not thread-safe: one thread checks at a time (the client's own, holding
    the hub's lock while the client is live)."""

    __slots__ = ("__weakref__", "_bound_s", "_clock", "_is_closing", "_since", "_sock", "_taken")

    def __init__(
        self,
        sock: socket.socket,
        *,
        bound_s: float,
        clock: Callable[[], float],
        is_closing: Callable[[], bool] = lambda: False,
    ) -> None:
        self._sock = sock
        self._bound_s = bound_s
        self._clock = clock
        self._is_closing = is_closing  # the server stops: a send that waits ends
        self._taken: int | None = None  # what it had taken when last seen taking, if behind
        self._since = 0.0  # since when it has taken nothing more, with bytes unsent

    @property
    def is_behind(self) -> bool:
        """Whether the last look found bytes the client had not taken."""
        return self._taken is not None

    def check(self, pending: int = 0) -> None:
        """Look at what the client has not taken (``pending``: the server's own backlog for it,
        not handed to the socket yet); raise if it has been behind for the bound."""
        now = self._clock()
        queue = kernel_queue(self._sock)
        if queue is None:  # the system does not say: only the server's own backlog counts
            unsent, taken = pending, -pending  # taking: the backlog shrinks
        else:
            unsent, taken = queue[0] + pending, queue[1]
        if unsent == 0:
            self._taken = None
            return
        if self._taken is None or taken > self._taken:
            self._taken = taken
            self._since = now
            return
        if now - self._since >= self._bound_s:
            raise ClientNotReading(
                f"{unsent} bytes not taken: nothing read for {self._bound_s:g} s"
            )

    def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of ``data`` (the socket's timeout is the slice between looks), looking at
        what is unsent while a send waits and once it is done."""
        view = memoryview(data).cast("B")
        while view:
            try:
                sent = self._sock.send(view)
            except TimeoutError:
                sent = 0
            view = view[sent:]
            if view:
                if self._is_closing():
                    raise ConnectionAbortedError("the server is closing")
                self.check(len(view))
        self.check()


def source_of(client_address: object) -> str:
    """The source a client's connections count against: its IPv4 address (an IPv4-mapped IPv6
    address is the IPv4 one), its IPv6 address's /64, the box's own address as itself."""
    try:
        host = str(client_address[0])  # type: ignore[index]
        address = ipaddress.ip_address(host.partition("%")[0])
    except (TypeError, IndexError, ValueError):
        return str(client_address)
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        if str(address) in _BOX:
            return str(address)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def is_the_box(source: str) -> bool:
    """Whether ``source`` (see :func:`source_of`) is the box's own address: the kiosk's."""
    return source in _BOX
