"""Whether a client takes what it is sent, over real loopback sockets, on an injected clock.

A client that never reads is dropped by what it has not taken, not by whether a send waited;
one that reads, however slowly, is not. Where a client comes from: its address, an IPv6
address's /64, the box's own address apart.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from controller.errors import ClientNotReading
from controller.web import clients as display_clients
from controller.web.clients import UnreadWatch, is_the_box, kernel_queue, source_of

BOUND_S = 10.0


class Clock:
    """Monotonic seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the server's side, with a small send buffer; a client with a small receive buffer)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(listener.getsockname())
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    yield server, client
    server.close()
    client.close()


def fill(sock: socket.socket) -> int:
    """Send until the socket's buffers take no more; how much was sent."""
    sock.setblocking(False)
    sent = 0
    try:
        while True:
            sent += sock.send(b"x" * 4096)
    except BlockingIOError:
        pass
    sock.settimeout(0.05)
    return sent


def settle(sock: socket.socket) -> None:
    """Wait until the client's host takes no more (its last acknowledgement may be delayed):
    the taken count the same over ten looks 50 ms apart, within 30 s."""
    pause = threading.Event()
    same = 0
    last = taken(sock)
    for _ in range(600):
        pause.wait(0.05)
        now = taken(sock)
        same = same + 1 if now == last else 0
        last = now
        if same >= 10:
            return
    raise AssertionError("the client's host kept taking")


def test_the_kernel_says_what_the_client_has_not_taken(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, _ = pair
    assert kernel_queue(server) == (0, 0)
    sent = fill(server)
    queue = kernel_queue(server)
    assert queue is not None
    unsent, taken = queue
    assert unsent > 0
    assert unsent + taken == sent


def test_a_client_that_takes_nothing_is_dropped_after_the_bound_not_before(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, _ = pair
    clock = Clock()
    watch = UnreadWatch(server, bound_s=BOUND_S, clock=clock)
    watch.check()
    assert not watch.is_behind
    fill(server)
    settle(server)
    watch.check()
    assert watch.is_behind
    clock.now += BOUND_S - 0.5
    watch.check()  # behind, but not for the bound yet
    clock.now += 0.5
    with pytest.raises(ClientNotReading, match="nothing read for 10 s"):
        watch.check()


def test_a_blocked_send_ends_at_the_bound(pair: tuple[socket.socket, socket.socket]) -> None:
    """send_all looks at the backlog between slices: the clock, not the send, decides."""
    server, _ = pair
    clock = Clock()
    looks = [0]

    def ticking() -> float:
        looks[0] += 1
        clock.now += 1.0  # each look, a second later
        return clock.now

    watch = UnreadWatch(server, bound_s=BOUND_S, clock=ticking)
    server.settimeout(0.01)
    with pytest.raises(ClientNotReading):
        watch.send_all(b"x" * (1 << 20))
    assert looks[0] >= BOUND_S  # not before the bound (the first looks may see it take some)


def taken(sock: socket.socket) -> int:
    queue = kernel_queue(sock)
    assert queue is not None
    return queue[1]


def test_a_client_that_reads_slowly_is_not_dropped(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Behind all the time, but taking some each time it is looked at: never dropped."""
    server, client = pair
    clock = Clock()
    watch = UnreadWatch(server, bound_s=BOUND_S, clock=clock)
    for _ in range(30):
        fill(server)
        watch.check()
        assert watch.is_behind
        before = taken(server)
        client.settimeout(5)
        assert client.recv(65536)  # reads some, seconds apart
        clock.now += BOUND_S / 3
        pause = threading.Event()
        for _ in range(3000):  # until its host's window update reaches the server (30 s)
            if taken(server) > before:
                break
            pause.wait(0.01)
    while True:  # then it reads everything: not behind any more
        fill(server)
        client.settimeout(0.2)
        try:
            while client.recv(65536):
                pass
        except TimeoutError:
            pass
        watch.check()
        if not watch.is_behind:
            break


def test_without_the_kernels_figures_a_backlog_that_does_not_shrink_is_dropped(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(display_clients, "kernel_queue", lambda sock: None)
    server, _ = pair
    clock = Clock()
    watch = UnreadWatch(server, bound_s=BOUND_S, clock=clock)
    watch.check(0)
    assert not watch.is_behind
    watch.check(500)
    clock.now += BOUND_S
    watch.check(400)  # it shrank: the client takes
    clock.now += BOUND_S - 1
    watch.check(400)
    clock.now += 1
    with pytest.raises(ClientNotReading):
        watch.check(400)


@pytest.mark.parametrize(
    ("address", "source"),
    [
        (("192.0.2.7", 5000), "192.0.2.7"),
        (("::ffff:192.0.2.7", 5000, 0, 0), "192.0.2.7"),
        (("2001:db8:1:2:aaaa::1", 5000, 0, 0), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:bbbb::9", 5001, 0, 0), "2001:db8:1:2::/64"),  # the same host's /64
        (("fe80::1%eth0", 5000, 0, 2), "fe80::/64"),
        (("127.0.0.1", 5000), "127.0.0.1"),
        (("::1", 5000, 0, 0), "::1"),
        (("::ffff:127.0.0.1", 5000, 0, 0), "127.0.0.1"),
        (("127.0.0.2", 5000), "127.0.0.2"),
        ("not an address", "not an address"),
    ],
)
def test_a_clients_source_is_its_address_or_its_ipv6_64(address: object, source: str) -> None:
    assert source_of(address) == source


def test_only_the_boxs_own_address_is_the_kiosks() -> None:
    assert is_the_box("127.0.0.1")
    assert is_the_box("::1")
    assert not is_the_box("127.0.0.2")  # loopback, but nothing on the box uses it
    assert not is_the_box("192.0.2.7")
