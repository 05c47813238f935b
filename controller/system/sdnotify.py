"""sd_notify(3) in a few lines: tell systemd we are ready, alive, or stopping.

A datagram to the socket named by ``$NOTIFY_SOCKET`` (an abstract name when it starts with '@').
Without that variable (not under systemd, or in tests) every call is a no-op returning False.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

from controller.core.digits import is_ascii_digits

log = logging.getLogger("paigow.sdnotify")


# The most a message waits for room in the socket's queue: the control thread sends them, and a
# receiver that does not read (systemd stalled, a test's socket left unread) must never hold it.
SEND_WAIT_S = 0.5


def notify(
    message: str, *, environ: Mapping[str, str] | None = None, wait_s: float = SEND_WAIT_S
) -> bool:
    """Send ``message``; False when there is no socket to tell or its queue stayed full for
    ``wait_s`` (0: never wait; a ``STATUS=`` alone is worth no wait, the next one says it all).
    A message not taken is logged and dropped, never retried on the caller's time."""
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address or address[0] not in "/@":
        return False
    if address[0] == "@":
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(wait_s if wait_s > 0 else 0.0)
        try:
            sock.connect(address)
            sock.send(message.encode("utf-8"))
        except (BlockingIOError, TimeoutError):
            first = message.split("\n", 1)[0][:60]
            log.warning(
                "systemd's notify socket took no message for %.1f s: %s dropped", wait_s, first
            )
            return False
    return True


def watchdog_interval_s(*, environ: Mapping[str, str] | None = None) -> float | None:
    """Half of systemd's ``WatchdogSec=`` (``$WATCHDOG_USEC``), or None when there is none."""
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not is_ascii_digits(usec) or len(usec) > 18 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000
