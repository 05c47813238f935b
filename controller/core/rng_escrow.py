"""The RNG's seed escrow: each session's seed material sealed to an auditor's X25519 key.

A session's entropy and nonce live in the controller's memory only. So that a power cut never
loses the means to prove a committed session, the seed is sealed at open to the auditor's
public key (``[rng] escrow_public_key``) and the sealed form is recorded in the session's
``rng_commit`` record, signed with the commitment it belongs to. Nobody on the box can open it
(the auditor's private key never comes near the table); the auditor opens the sessions a power
cut left unrevealed (``paigow-controller rng-reveal``) and ``verify-log --rng-reveals`` replays
them as it replays the sessions revealed in the log.

Pure: no I/O and no randomness. The ephemeral key pair of each session is made by the caller
(``controller/rng/session.py``, from the operating system's CSPRNG) and given here.

The construction (``x25519-hkdf-sha256-chacha20poly1305``), for an auditor who reimplements
it; ``‖`` is concatenation, every value is bytes::

    R     the auditor's X25519 public key (RFC 7748), 32 bytes. [rng] escrow_public_key is
          R in standard base64 with its padding (44 characters)
    e, E  an ephemeral X25519 key pair, fresh for each session: E = X25519(e, 9), 32 bytes
    ctx   ASCII "paigow-controller rng escrow v1 table=<table> session=<session>
          commitment=<commitment>" (one space between the parts; the table's name, the
          session's 16 hex digits and the commitment's 64 lowercase hex digits as recorded)
    Z     X25519(e, R), 32 bytes (an all-zero Z, a low-order R or E, is refused)
    K     HKDF-SHA256 (RFC 5869) of IKM = Z with salt = E ‖ R and info = ctx, 32 bytes
    A     E ‖ R ‖ ctx, the associated data
    P     entropy (32 bytes) ‖ nonce (16 bytes), the session's seed material
    C     ChaCha20-Poly1305 (RFC 8439) with key K, nonce 12 zero bytes, plaintext P and
          associated data A: 48 bytes of ciphertext then the 16-byte tag, 64 bytes

K is used for one message only (E is new for every session), so the all-zero AEAD nonce is
never repeated under a key. To open: Z = X25519(r, E) with the auditor's private key r, the
same K and A, decrypt C (the tag must verify), and SHA-256(entropy ‖ nonce ‖ personalization)
must be the recorded commitment (``controller.core.rng_replay``), the personalization being
``personalization_for(table, session)``.

The ``escrow`` object of an ``rng_commit`` record (bytes as lowercase hex)::

    algorithm   "x25519-hkdf-sha256-chacha20poly1305"
    recipient   64 hex: SHA-256(R), the auditor key's fingerprint
    ephemeral   64 hex: E
    ciphertext  128 hex: C
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from controller.core.drbg import MIN_ENTROPY_BYTES, MIN_NONCE_BYTES
from controller.errors import EscrowError

ESCROW_ALGORITHM = "x25519-hkdf-sha256-chacha20poly1305"
KEY_BYTES = 32
KEY_TEXT_CHARS = 44  # base64 of 32 bytes, with its padding
SEED_BYTES = MIN_ENTROPY_BYTES + MIN_NONCE_BYTES
TAG_BYTES = 16
CIPHERTEXT_BYTES = SEED_BYTES + TAG_BYTES
AEAD_NONCE = bytes(12)
ESCROW_FIELDS = frozenset({"algorithm", "recipient", "ephemeral", "ciphertext"})
FINGERPRINT_HEX = 64


@functools.cache
def _probe() -> X25519PrivateKey:
    """Any fixed scalar will do: X25519 clamps it to a multiple of 8, so its product with a
    low-order point is zero, which cryptography refuses. Made when first needed (importing the
    core loads no OpenSSL backend, and with it no thread machinery)."""
    return X25519PrivateKey.from_private_bytes(bytes(range(1, KEY_BYTES + 1)))


@dataclass(frozen=True, slots=True)
class EscrowKey:
    """The auditor's public key: what the seed is sealed to."""

    raw: bytes

    @property
    def text(self) -> str:
        """The config's form: standard base64 of the 32 bytes."""
        return base64.b64encode(self.raw).decode("ascii")

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the key's 32 bytes, lowercase hex: how a record names it."""
        return hashlib.sha256(self.raw).hexdigest()

    def __str__(self) -> str:
        return self.text


def parse_escrow_key(text: str) -> EscrowKey:
    """``[rng] escrow_public_key``: exactly the 44 characters of the key's standard base64,
    padding included, the one way that encoder writes it; never a low-order point."""
    if not isinstance(text, str) or len(text) != KEY_TEXT_CHARS or not text.isascii():
        raise EscrowError(
            f"an X25519 public key is {KEY_TEXT_CHARS} characters of base64"
            " (rng-escrow-key prints it)"
        )
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EscrowError("not base64") from None
    if len(raw) != KEY_BYTES or base64.b64encode(raw).decode("ascii") != text:
        raise EscrowError(f"not the base64 of {KEY_BYTES} bytes")
    _public_point(raw, "the key")
    return EscrowKey(raw)


def escrow_key_of(private: X25519PrivateKey) -> EscrowKey:
    """The public key of an auditor's private key."""
    return EscrowKey(private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def _public_point(raw: bytes, what: str) -> X25519PublicKey:
    """An X25519 public key that is not of low order (with one, every shared secret is 0)."""
    try:
        point = X25519PublicKey.from_public_bytes(raw)
        _probe().exchange(point)
    except ValueError:
        raise EscrowError(f"{what} is a point of low order, not a usable X25519 key") from None
    return point


def escrow_context(table: str, session: str, commitment: str) -> bytes:
    """``ctx``: the table, the session and the commitment the seal belongs to."""
    text = (
        f"paigow-controller rng escrow v1 table={table} session={session} commitment={commitment}"
    )
    if not text.isascii():
        raise EscrowError("the table, session or commitment is not ASCII")
    return text.encode("ascii")


def escrow_aead_key(shared: bytes, ephemeral: bytes, recipient: bytes, context: bytes) -> bytes:
    """``K`` = HKDF-SHA256(IKM = Z, salt = E ‖ R, info = ctx), 32 bytes."""
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=ephemeral + recipient, info=context
    ).derive(shared)


def escrow_associated_data(ephemeral: bytes, recipient: bytes, context: bytes) -> bytes:
    """``A`` = E ‖ R ‖ ctx."""
    return ephemeral + recipient + context


@dataclass(frozen=True, slots=True)
class SealedSeed:
    """A session's seed material sealed to the auditor's key (the ``escrow`` of its
    ``rng_commit`` record)."""

    recipient: str  # the auditor key's fingerprint
    ephemeral: bytes
    ciphertext: bytes

    def as_record(self) -> dict[str, object]:
        return {
            "algorithm": ESCROW_ALGORITHM,
            "recipient": self.recipient,
            "ephemeral": self.ephemeral.hex(),
            "ciphertext": self.ciphertext.hex(),
        }

    @classmethod
    def from_record(cls, value: object) -> SealedSeed:
        """The ``escrow`` object exactly as :meth:`as_record` writes it, or
        :class:`EscrowError` saying what is wrong."""
        if not isinstance(value, Mapping) or set(value) != ESCROW_FIELDS:
            raise EscrowError(f"escrow is not an object of {', '.join(sorted(ESCROW_FIELDS))}")
        if value["algorithm"] != ESCROW_ALGORITHM:
            raise EscrowError(f"escrow algorithm is not {ESCROW_ALGORITHM}")
        recipient = _hex(value["recipient"], "escrow recipient", FINGERPRINT_HEX // 2).hex()
        ephemeral = _hex(value["ephemeral"], "escrow ephemeral key", KEY_BYTES)
        ciphertext = _hex(value["ciphertext"], "escrow ciphertext", CIPHERTEXT_BYTES)
        _public_point(ephemeral, "the escrow's ephemeral key")
        return cls(recipient, ephemeral, ciphertext)


def _hex(value: object, what: str, n_bytes: int) -> bytes:
    if (
        not isinstance(value, str)
        or len(value) != 2 * n_bytes
        or not all(c in "0123456789abcdef" for c in value)
    ):
        raise EscrowError(f"{what} is not {n_bytes} bytes of lowercase hex")
    return bytes.fromhex(value)


def seal_seed(
    ephemeral: X25519PrivateKey,
    recipient: EscrowKey,
    *,
    table: str,
    session: str,
    commitment: str,
    entropy: bytes,
    nonce: bytes,
) -> SealedSeed:
    """Seal ``entropy ‖ nonce`` to ``recipient`` with the session's fresh ephemeral key (made by
    the caller, used once, then dropped: it opens the seal as well as the auditor's key)."""
    if len(entropy) != MIN_ENTROPY_BYTES or len(nonce) != MIN_NONCE_BYTES:
        raise EscrowError("the seed material has the wrong length")
    public = escrow_key_of(ephemeral).raw
    shared = ephemeral.exchange(_public_point(recipient.raw, "the auditor's key"))
    context = escrow_context(table, session, commitment)
    key = escrow_aead_key(shared, public, recipient.raw, context)
    aad = escrow_associated_data(public, recipient.raw, context)
    ciphertext = ChaCha20Poly1305(key).encrypt(AEAD_NONCE, entropy + nonce, aad)
    return SealedSeed(recipient.fingerprint, public, ciphertext)


def open_sealed_seed(
    private: X25519PrivateKey,
    sealed: SealedSeed,
    *,
    table: str,
    session: str,
    commitment: str,
) -> tuple[bytes, bytes]:
    """``(entropy, nonce)`` from a seal, with the auditor's private key. Raises
    :class:`EscrowError` when the seal is for another key, or does not open (altered, or moved
    to another table, session or commitment). The caller checks the seed against the
    commitment (``rng_replay``), as it checks any reveal."""
    recipient = escrow_key_of(private)
    if not hmac.compare_digest(recipient.fingerprint, sealed.recipient):
        raise EscrowError(
            f"sealed to another auditor key (fingerprint {sealed.recipient[:16]}…), not to"
            f" this one ({recipient.fingerprint[:16]}…)"
        )
    try:
        shared = private.exchange(X25519PublicKey.from_public_bytes(sealed.ephemeral))
    except ValueError:
        raise EscrowError("the escrow's ephemeral key is of low order") from None
    context = escrow_context(table, session, commitment)
    key = escrow_aead_key(shared, sealed.ephemeral, recipient.raw, context)
    aad = escrow_associated_data(sealed.ephemeral, recipient.raw, context)
    try:
        seed = ChaCha20Poly1305(key).decrypt(AEAD_NONCE, sealed.ciphertext, aad)
    except InvalidTag:
        raise EscrowError(
            "the sealed seed does not open: altered, or not sealed for this table, session"
            " and commitment"
        ) from None
    if len(seed) != SEED_BYTES:  # pragma: no cover - the tag covers the length
        raise EscrowError("the sealed seed has the wrong length")
    return seed[:MIN_ENTROPY_BYTES], seed[MIN_ENTROPY_BYTES:]
