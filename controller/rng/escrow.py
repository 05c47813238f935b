"""The auditor's escrow key on disk, and the seal made when a session opens.

The seal itself, and its opening, are pure (``controller.core.rng_escrow``, where the
construction is stated); what is here needs the operating system: the ephemeral key of each
session (from the same CSPRNG as the session's seed), and the auditor's key file, made by
``paigow-controller rng-escrow-key`` (PKCS #8 PEM, as ``openssl pkey`` reads it; mode 0600,
never replaced) and read by ``rng-reveal``. ``simulate`` makes a throwaway key beside its log
when its config names none.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)

from controller.core.rng_escrow import KEY_BYTES, EscrowKey, SealedSeed, escrow_key_of, seal_seed
from controller.errors import EscrowError, TooLarge
from controller.files import read_capped, write_new

ESCROW_KEY_MODE = 0o600
MAX_KEY_FILE_BYTES = 4096  # a PEM X25519 key is 119 bytes
THROWAWAY_KEY_NAME = "auditor-throwaway.key"


def seal_session_seed(
    recipient: EscrowKey,
    *,
    table: str,
    session: str,
    commitment: str,
    entropy: bytes,
    nonce: bytes,
    random_bytes: Callable[[int], bytes],
) -> SealedSeed:
    """The seed sealed to the auditor with a fresh ephemeral key, dropped once used."""
    ephemeral = X25519PrivateKey.from_private_bytes(random_bytes(KEY_BYTES))
    return seal_seed(
        ephemeral,
        recipient,
        table=table,
        session=session,
        commitment=commitment,
        entropy=entropy,
        nonce=nonce,
    )


def create_escrow_key(path: Path) -> EscrowKey:
    """A new auditor key pair: the private key in a new file ``path`` (mode 0600, never
    replacing one); the public key returned, for ``[rng] escrow_public_key``."""
    private = X25519PrivateKey.generate()
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    try:
        write_new(path, pem, ESCROW_KEY_MODE, replace=False)
    except FileExistsError:
        raise EscrowError(f"{path} exists: a key file is never replaced") from None
    except OSError as exc:
        raise EscrowError(f"cannot write {path}: {exc.strerror or exc}") from None
    return escrow_key_of(private)


def read_escrow_key(path: Path) -> X25519PrivateKey:
    """The auditor's private key from its file (readable by its owner only)."""
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise EscrowError(f"{path} must be readable by its owner only (0600)")
        data = read_capped(path, MAX_KEY_FILE_BYTES)
    except TooLarge:
        raise EscrowError(f"{path} is larger than a key file") from None
    except OSError as exc:
        raise EscrowError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL in the name
        raise EscrowError(f"cannot read {path}: {exc}") from None
    try:
        private = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:  # not PEM, or a key with a password
        raise EscrowError(f"{path} is not an auditor key (PKCS #8 PEM): {exc}") from None
    if not isinstance(private, X25519PrivateKey):
        raise EscrowError(f"{path} holds a key of another kind, not X25519")
    return private


def throwaway_escrow_key(state_dir: Path) -> tuple[Path, EscrowKey]:
    """The simulation's auditor key beside its log: the one made before in this state
    directory, or a new one. Never for a real table: its private key is on the box."""
    path = state_dir / THROWAWAY_KEY_NAME
    if path.exists():
        return path, escrow_key_of(read_escrow_key(path))
    state_dir.mkdir(parents=True, exist_ok=True)
    return path, create_escrow_key(path)
