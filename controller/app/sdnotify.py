"""sd_notify(3) in a few lines: tell systemd we are ready, alive, or stopping.

A datagram to the socket named by ``$NOTIFY_SOCKET`` (an abstract name when it starts with '@').
Without that variable (not under systemd, or in tests) every call is a no-op returning False.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from controller.core.digits import is_ascii_digits


def notify(message: str, *, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address or address[0] not in "/@":
        return False
    if address[0] == "@":
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(message.encode("utf-8"))
    return True


def watchdog_interval_s(*, environ: Mapping[str, str] | None = None) -> float | None:
    """Half of systemd's ``WatchdogSec=`` (``$WATCHDOG_USEC``), or None when there is none."""
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not is_ascii_digits(usec) or len(usec) > 18 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000
