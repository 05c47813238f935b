"""Shared by the display server's tests: a fake log and clock, raw HTTP clients, waits."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Collection
from typing import Any

import pytest

from controller.core.records import StoredRecord
from controller.ports import LoggedCheckpoint

WAIT_S = 20.0  # the most any condition below is waited for; a hang fails the test


class EmptyLog:
    """A ``LogReader`` over an empty audit log: what these tests show needs nothing from it."""

    def size(self) -> int:
        return 0

    def records_after(self, seq: int, *, limit: int) -> list[StoredRecord]:
        return []

    def latest_of(self, kinds: Collection[str], *, limit: int) -> list[StoredRecord]:
        return []

    def latest_checkpoint(self) -> LoggedCheckpoint | None:
        return None


def wait_until(condition: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    """Wait for ``condition`` to hold, looking every 10 ms, for at most ``timeout``."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return True
        pause.wait(0.01)
    return condition()


def handler_threads() -> int:
    """Clients being served now, by any socketserver in this process (one thread each)."""
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset, the way a client that crashes or is unplugged goes."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def assert_no_traceback(err: str, caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in err
    assert "Traceback" not in caplog.text
    assert all(record.exc_info is None for record in caplog.records)


# A client of the network, not the box's own address (127.0.0.1: the kiosk's, with slots of
# its own): any 127.0.0.x address connects over the loopback on Linux.
NETWORK = "127.0.0.2"


def connect(
    address: tuple[str, int], *, source: str | None = None, rcvbuf: int | None = None
) -> socket.socket:
    """A connection to ``address``, from ``source`` if given (127.0.0.1 if not)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            sock.bind((source, 0))
        sock.settimeout(5)
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def request(
    address: tuple[str, int],
    head: bytes,
    *,
    rcvbuf: int | None = None,
    source: str | None = None,
) -> socket.socket:
    sock = connect(address, source=source, rcvbuf=rcvbuf)
    sock.sendall(head)
    return sock


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: table", *headers, "", ""]
    return "\r\n".join(lines).encode("latin-1")


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


class Stream:
    """The page's event stream on a raw socket, read event by event."""

    def __init__(
        self, address: tuple[str, int], head: bytes = get("/events"), *, source: str | None = None
    ) -> None:
        self.sock = request(address, head, source=source)
        self.buffer = b""

    def status(self) -> bytes:
        head = self._until(b"\r\n\r\n")
        return head.split(b"\r\n", 1)[0]

    def event(self) -> tuple[str, dict[str, Any]]:
        """The next event that carries data (``retry:`` alone is skipped)."""
        while True:
            block = self._until(b"\n\n").decode()
            fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            if "data" in fields:
                return fields.get("event", "message"), json.loads(fields["data"])

    def _until(self, mark: bytes) -> bytes:
        while mark not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the stream"
            self.buffer += chunk
        block, self.buffer = self.buffer.split(mark, 1)
        return block

    def until_snapshot(self) -> dict[str, Any]:
        assert self.status().startswith(b"HTTP/1.0 200")
        while True:
            name, data = self.event()
            if name == "snapshot":
                return data

    def close(self) -> None:
        self.sock.close()


KIOSK = "127.0.0.1"  # the kiosk's browser, on the box itself (hw/kiosk: KIOSK_URL)


def flood_sources(count: int, spread: str) -> list[str]:
    """Where ``count`` idle clients come from: one address, or one address each."""
    if spread == "one address":
        return [NETWORK] * count
    return [f"127.0.{2 + i // 250}.{2 + i % 250}" for i in range(count)]


class StepClock:
    """The servers' monotonic clock, moved by the test; counts how often it is read."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.reads = 0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.reads += 1
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds

    def advance_until(self, condition: Callable[[], bool], *, limit: float) -> bool:
        """Advance a second at a time, each once the clients were looked at, until
        ``condition`` holds (True) or ``limit`` seconds have passed (False). A stuck client's
        host may still take a last segment a moment after the first look found it behind (a
        delayed acknowledgement): its bound runs from then."""
        for _ in range(int(limit)):
            self.advance(1)
            if wait_until(condition, timeout=0.5) or (self.wait_for_reads(100) and condition()):
                return True
        return condition()

    def wait_for_reads(self, count: int) -> bool:
        """Wait until the clock was read ``count`` more times (the clients were looked at)."""
        with self._lock:
            target = self.reads + count
        return wait_until(lambda: self.reads >= target)
