"""The config file: read with a size cap, then validated by the core (controller/core/config.py).

A config is a few kB. Anything larger, or a device or a pipe that yields more (``/dev/zero``),
is a :class:`ConfigError` naming ``file`` (exit 78), not a process that grows until the kernel
kills it.
"""

from __future__ import annotations

from pathlib import Path

from controller.core.config import Config, config_from_bytes
from controller.core.digits import quoted
from controller.errors import ConfigError
from controller.files import TooLarge, read_capped

DEFAULT_PATH = Path("/etc/paigow-controller/config.toml")
MAX_FILE_BYTES = 1 << 20


def load_config(path: Path, *, escrow_required: bool = True) -> Config:
    """Read and validate ``path``. Raises :class:`ConfigError` naming the offending key.
    ``escrow_required=False`` (``simulate``): RNG mode without ``rng.escrow_public_key``."""
    try:
        data = read_capped(path, MAX_FILE_BYTES)
    except TooLarge:
        raise ConfigError("file", f"{path} is larger than {MAX_FILE_BYTES} bytes") from None
    except OSError as exc:
        raise ConfigError("file", f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # a path with a NUL byte in it
        raise ConfigError("file", f"cannot read {quoted(str(path))}: {exc}") from exc
    return config_from_bytes(data, source=str(path), escrow_required=escrow_required)
