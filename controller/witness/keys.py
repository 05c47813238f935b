"""The witness's keys: its own cosigner key (``witness.key`` in its state directory, mode 0600,
C2SP cosignature/v1: algorithm 0x04), its alert key (``alerts.key`` beside it, 0600, Ed25519:
algorithm 0x01, under the cosigner key's name: it signs the alerts it publishes, fleet-v2.md
"The signed alert"), and every table's verifier key, one file per table in the keys directory:
``<table>.pub`` holding the line ``paigow-controller export-key`` prints.

A table's origin is its key's name (``[fleet] origin``, e.g. ``casino.example/paigow/table-7``,
or ``paigow-controller/<table>`` for a log made before origins were configured): the witness
takes it from the key file, never from the table's name. Two files with one key name or one
key are refused (a checkpoint of one table would pass for the other's)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

from controller.core.note import ALG_COSIGNATURE_V1, ALG_ED25519, Signer, Verifier
from controller.errors import ConfigError, NoteError, TooLarge
from controller.files import read_capped, write_new
from controller.fleet.protocol import is_table_name

KEY_FILE = "witness.key"
ALERT_KEY_FILE = "alerts.key"
MAX_ORIGIN_CHARS = 100  # fleet-v2.md, "Origins"
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
    return _make(path, state_dir, Signer.generate(name or default_name(), ALG_COSIGNATURE_V1))


def load_or_create_alert_key(state_dir: Path, cosigner: Signer) -> tuple[Signer, bool]:
    """The key the witness signs its alerts with (``alerts.key``, Ed25519, the cosigner key's
    name), made (0600) at the first start; and whether it was made now. Never replaced."""
    path = state_dir / ALERT_KEY_FILE
    if path.exists():
        signer = read_key(path, ALG_ED25519)
        if signer.name != cosigner.name:
            raise ConfigError(str(path), f"holds the key {signer.name!r}, not {cosigner.name!r}")
        return signer, False
    return _make(path, state_dir, Signer.generate(cosigner.name, ALG_ED25519))


def _make(path: Path, state_dir: Path, signer: Signer) -> tuple[Signer, bool]:
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_new(path, f"{signer}\n".encode(), 0o600, replace=False)
    except FileExistsError:  # made by another process meanwhile: take that one
        return read_key(path, signer.alg), False
    except OSError as exc:
        raise ConfigError(str(path), f"cannot write the witness's key: {exc.strerror}") from None
    return signer, True


def read_key(path: Path, alg: int = ALG_COSIGNATURE_V1) -> Signer:
    what = "cosigner" if alg == ALG_COSIGNATURE_V1 else "alert"
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise ConfigError(str(path), "must be readable by its owner only (chmod 0600)")
        raw = read_capped(path, MAX_KEY_FILE_BYTES)
        return Signer.parse(raw.decode("ascii"), alg)
    except (OSError, TooLarge, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the witness's key: {exc}") from None
    except NoteError as exc:
        raise ConfigError(str(path), f"not a witness's {what} key: {exc}") from None


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
    keys: dict[str, Verifier] = {}
    names: dict[str, str] = {}
    public: dict[bytes, str] = {}
    for path in paths:
        table = path.name[: -len(KEY_SUFFIX)]
        if not is_table_name(table):
            raise ConfigError(str(path), "the name is not <table>.pub (1-32 of A-Z a-z 0-9 - _)")
        verifier = read_table_key(path)
        other = names.get(verifier.name) or public.get(verifier.public_key)
        if other is not None:
            raise ConfigError(
                str(path), f"is the key of {other} too (each table has its own key and origin)"
            )
        keys[table] = verifier
        names[verifier.name] = public[verifier.public_key] = table
    return keys


def read_table_key(path: Path) -> Verifier:
    """A table's verifier key; its name is the table's origin (ASCII, at most 100
    characters, no space or '+')."""
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
    if len(verifier.name) > MAX_ORIGIN_CHARS:
        raise ConfigError(str(path), f"the key's name (the origin) is over {MAX_ORIGIN_CHARS}")
    return verifier
