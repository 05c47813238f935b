"""sd_notify over a real AF_UNIX datagram socket, as systemd's $NOTIFY_SOCKET."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from controller.system.sdnotify import notify, watchdog_interval_s


def test_notify_sends_to_a_path_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(5)
        assert notify("READY=1", environ={"NOTIFY_SOCKET": str(path)})
        assert server.recv(100) == b"READY=1"


def test_notify_sends_to_an_abstract_socket() -> None:
    name = f"paigow-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        assert notify("WATCHDOG=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert server.recv(100) == b"WATCHDOG=1"


def test_without_systemd_it_does_nothing() -> None:
    assert not notify("READY=1", environ={})
    assert not notify("READY=1", environ={"NOTIFY_SOCKET": "relative"})


def test_watchdog_interval_is_half_of_watchdog_sec() -> None:
    pid = str(os.getpid())
    env = {"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": pid}
    assert watchdog_interval_s(environ=env) == 5.0
    assert watchdog_interval_s(environ={"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval_s(environ={}) is None


def test_a_receiver_that_never_reads_never_holds_the_sender(tmp_path: Path) -> None:
    """systemd stalled (or a socket nobody reads): once its queue is full a message is dropped,
    at once for a STATUS= (wait_s=0) and after the bounded wait for the rest, and the sender
    goes on; what was queued is what the receiver reads later."""
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        env = {"NOTIFY_SOCKET": str(path)}
        sent = 0
        while notify(f"STATUS=line {sent}", environ=env, wait_s=0):
            sent += 1
            assert sent < 1_000_000, "the queue never filled"
        assert sent > 0
        assert not notify("WATCHDOG=1", environ=env, wait_s=0.01)  # full: dropped, not held
        server.settimeout(5)
        assert server.recv(4096) == b"STATUS=line 0"
        assert notify("READY=1", environ=env)  # room again: taken
