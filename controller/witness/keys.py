"""The witness's keys: its own cosigner key (``witness.key`` in its state directory, mode 0600,
C2SP cosignature/v1: algorithm 0x04), and every table's verifier key, one file per table in the
keys directory: ``<table>.pub`` holding the line ``paigow-controller export-key`` prints. A
table signs as the origin ``paigow-controller/<table>``, which is also its key's name, so the
file's name, the key's name and the checkpoints' origin must all agree."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

from controller.audit.log import origin_for
from controller.core.note import ALG_COSIGNATURE_V1, NoteError, Signer, Verifier
from controller.errors import ConfigError
from controller.files import TooLarge, read_capped, write_new
from controller.fleet.protocol import is_table_name

KEY_FILE = "witness.key"
KEY_SUFFIX = ".pub"
MAX_KEY_FILE_BYTES = 1024
MAX_TABLES = 1000


def default_name() -> str:
    """The cosigner key's name: ``paigow-witness/<host name>`` (printable, no space or '+')."""
    host = "".join(c for c in socket.gethostname() if c.isascii() and (c.isalnum() or c in "-."))
    return f"paigow-witness/{host or 'witness'}"


def load_or_create_key(state_dir: Path, name: str | None = None) -> tuple[Signer, bool]:
    """The witness's cosigner key, made (0600) when there is none yet; and whether it was
    made now. A key that exists is never replaced; one group- or world-readable, or not a
    cosigner key, is a configuration error naming the file."""
    path = state_dir / KEY_FILE
    if path.exists():
        signer = read_key(path)
        if name is not None and name != signer.name:
            raise ConfigError(str(path), f"holds the key {signer.name!r}, not {name!r}")
        return signer, False
    signer = Signer.generate(name or default_name(), ALG_COSIGNATURE_V1)
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_new(path, f"{signer}\n".encode(), 0o600, replace=False)
    except FileExistsError:  # made by another process meanwhile: take that one
        return read_key(path), False
    except OSError as exc:
        raise ConfigError(str(path), f"cannot write the witness's key: {exc.strerror}") from None
    return signer, True


def read_key(path: Path) -> Signer:
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise ConfigError(str(path), "must be readable by its owner only (chmod 0600)")
        raw = read_capped(path, MAX_KEY_FILE_BYTES)
        return Signer.parse(raw.decode("ascii"), ALG_COSIGNATURE_V1)
    except (OSError, TooLarge, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the witness's key: {exc}") from None
    except NoteError as exc:
        raise ConfigError(str(path), f"not a witness's cosigner key: {exc}") from None


def load_table_keys(directory: Path) -> dict[str, Verifier]:
    """Each table's verifier key from ``<table>.pub`` in ``directory``. Other files are not
    looked at; a ``.pub`` file that is not a table's key is a configuration error naming it."""
    try:
        paths = sorted(p for p in directory.iterdir() if p.name.endswith(KEY_SUFFIX))
    except OSError as exc:
        raise ConfigError(
            str(directory), f"cannot read the keys directory: {exc.strerror}"
        ) from None
    if len(paths) > MAX_TABLES:
        raise ConfigError(str(directory), f"more than {MAX_TABLES} table keys")
    keys = {}
    for path in paths:
        table = path.name[: -len(KEY_SUFFIX)]
        if not is_table_name(table):
            raise ConfigError(str(path), "the name is not <table>.pub (1-32 of A-Z a-z 0-9 - _)")
        keys[table] = read_table_key(path, table)
    return keys


def read_table_key(path: Path, table: str) -> Verifier:
    try:
        raw = read_capped(path, MAX_KEY_FILE_BYTES)
        text = raw.decode("ascii").strip()
        if "\n" in text:
            raise ConfigError(str(path), "holds more than one line")
        verifier = Verifier.parse(text)
    except (OSError, TooLarge, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the table's key: {exc}") from None
    except NoteError as exc:
        raise ConfigError(
            str(path), f"not a table's verifier key (paigow-controller export-key): {exc}"
        ) from None
    if verifier.name != origin_for(table):
        raise ConfigError(
            str(path), f"is the key of {verifier.name!r}, not of {origin_for(table)!r}"
        )
    return verifier
