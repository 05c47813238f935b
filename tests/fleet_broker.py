"""A real MQTT broker for the fleet tests: Debian's mosquitto on a free loopback port, with its
own config, persistence and log in the test's directory. ``stop``/``start`` restart it on the
same port (its persistence keeps retained messages and queued QoS 1 messages, as a broker in a
casino's server room would), ``kill`` ends it without a word."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.config = directory / "mosquitto.conf"
        self.log = directory / "mosquitto.log"

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 10.0) -> None:
        self.config.write_text(
            # as root it would change to the mosquitto user, who may not write here
            f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "set_tcp_nodelay true\n"  # as README, "The witness", advises for a casino's broker
            "persistence true\n"
            f"persistence_location {self.directory}/\n"
            "autosave_interval 1\n"
            "max_queued_messages 0\n"  # no limit: a table's backlog is never dropped
            f"log_dest file {self.log}\n"
            "log_type error\nlog_type warning\nlog_type notice\n"
        )
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mosquitto exited {self.process.returncode}: {self.tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.02)
        raise RuntimeError(f"mosquitto did not listen on {self.port}: {self.tail()}")

    def stop(self) -> None:
        """An orderly stop (SIGTERM: it saves its persistence)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def tail(self, lines: int = 10) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A running broker; stopped at the end whatever the test did to it."""
    b = Broker(tmp_path / "broker")
    b.start()
    try:
        yield b
    finally:
        b.kill()
