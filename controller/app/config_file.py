"""The config file: read with a size cap, then validated by the core (controller/core/config.py).

A config is a few kB. Anything larger, or a device or a pipe that yields more (``/dev/zero``),
is a :class:`ConfigError` naming ``file`` (exit 78), not a process that grows until the kernel
kills it.

What only this machine can say is checked where a technician asks (``check-config``,
``selftest``, ``commission``: ``on_this_machine=True``): ``[display] host`` is an address the
table's display and feed can listen on here (a loopback or any-address, or one this machine
holds); a name must resolve, to such addresses only. The check binds a socket to port 0 and
sends nothing. ``run`` does not refuse it with 78: at boot the service starts after
``network.target``, before DHCP may have given the address, and a refusal with 78 is never
restarted; there the display's bind fails (exit 1) and systemd tries again.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from pathlib import Path

from controller.core.config import Config, config_from_bytes
from controller.core.digits import quoted
from controller.errors import ConfigError, TooLarge
from controller.files import read_capped

DEFAULT_PATH = Path("/etc/paigow-controller/config.toml")
MAX_FILE_BYTES = 1 << 20


def load_config(
    path: Path, *, escrow_required: bool = True, on_this_machine: bool = False
) -> Config:
    """Read and validate ``path``. Raises :class:`ConfigError` naming the offending key.
    ``escrow_required=False`` (``simulate``): RNG mode without ``rng.escrow_public_key``.
    ``on_this_machine=True``: also ``[display] host`` (:func:`listen_address_problem`)."""
    try:
        data = read_capped(path, MAX_FILE_BYTES)
    except TooLarge:
        raise ConfigError("file", f"{path} is larger than {MAX_FILE_BYTES} bytes") from None
    except OSError as exc:
        raise ConfigError("file", f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # a path with a NUL byte in it
        raise ConfigError("file", f"cannot read {quoted(str(path))}: {exc}") from exc
    config = config_from_bytes(data, source=str(path), escrow_required=escrow_required)
    if on_this_machine:
        problem = listen_address_problem(config.display.host)
        if problem is not None:
            raise ConfigError("display.host", problem)
    return config


def listen_address_problem(host: str) -> str | None:
    """Why the display could not listen on ``host`` here, or None. A name is resolved as the
    servers will resolve it; every address it gives must be a loopback or any-address, or one
    this machine holds (a socket binds to it, port 0: nothing is sent, no port is taken)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"{quoted(host)} does not resolve: {reason}"
    for family, kind, proto, _, sockaddr in found:
        address = str(sockaddr[0])
        if _is_loopback_or_any(address):
            continue
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind((address, 0, *sockaddr[2:]))
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"{quoted(host)} ({address}) is not an address of this machine"
            return f"cannot listen on {quoted(host)} ({address}): {exc.strerror or exc}"
    return None


def _is_loopback_or_any(address: str) -> bool:
    try:
        parsed = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:  # pragma: no cover - getaddrinfo gives numeric addresses
        return False
    return parsed.is_loopback or parsed.is_unspecified
