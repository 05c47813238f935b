"""What the table's publisher and the witness share to reach the broker: the credentials file,
the TLS context, and a socket that sends at once.

A client's small messages (a PUBACK, a cosignature, a checkpoint) would otherwise wait in the
kernel for the peer's delayed acknowledgement of the one before (Nagle's algorithm meeting
delayed ACKs: some 40 ms each time on Linux); ``send_at_once`` sets ``TCP_NODELAY`` on every
socket paho opens. (mosquitto's ``set_tcp_nodelay true`` does the same for the broker's side;
README, "The witness".)
"""

from __future__ import annotations

import socket
import ssl
import stat
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from controller.errors import FleetError, TooLarge
from controller.files import read_capped

MAX_CREDENTIALS_BYTES = 1024


def read_credentials(path: Path) -> tuple[str, str]:
    """User name and password: a file of exactly two lines that only its owner may read
    (0600 or 0400); :class:`FleetError` otherwise."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise FleetError(
                f"{path} is readable by group or others (mode {mode:04o}): it must be 0600 or 0400"
            )
        raw = read_capped(path, MAX_CREDENTIALS_BYTES)
    except TooLarge:
        raise FleetError(f"{path} is larger than {MAX_CREDENTIALS_BYTES} bytes") from None
    except OSError as exc:
        raise FleetError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FleetError(f"{path} is not UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != 2 or not lines[0] or not all(line.isprintable() for line in lines):
        raise FleetError(f"{path} must be two lines, the user name and the password")
    return lines[0], lines[1]


def tls_context(ca_file: str, cert_file: str = "", key_file: str = "") -> ssl.SSLContext:
    """The broker is checked against ``ca_file`` (its host name too); the client shows its
    certificate when one is given."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if cert_file:
            context.load_cert_chain(cert_file, key_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise FleetError(f"the broker's TLS files cannot be used: {exc}") from None
    return context


def send_at_once(client: mqtt.Client) -> None:
    """Every socket ``client`` opens sends without waiting (TCP_NODELAY)."""

    def opened(client: mqtt.Client, userdata: Any, sock: Any) -> None:
        if isinstance(sock, socket.socket | ssl.SSLSocket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    client.on_socket_open = opened
