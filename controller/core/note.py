"""C2SP signed notes with Ed25519, and C2SP tlog checkpoints. Pure: no I/O.

A signed note (https://c2sp.org/signed-note) is UTF-8 text ending in a newline, a blank
line, then one signature line per signer: ``— <key name> <base64(key ID || signature)>``.
The key ID is the first four bytes of SHA-256(key name || 0x0A || 0x01 || public key), 0x01
naming Ed25519. A verifier key is written ``<name>+<key ID in hex>+<base64(0x01 || public key)>``
and a signer key, as Go's ``golang.org/x/mod/sumdb/note`` writes it,
``PRIVATE+KEY+<name>+<key ID in hex>+<base64(0x01 || Ed25519 seed)>``.

A checkpoint (https://c2sp.org/tlog-checkpoint) is the note text ``<origin>\\n<tree size>\\n
<base64(root hash)>\\n``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from controller.core.digits import MAX_SEQ, NumberError, is_ascii_digits, parse_bounded_int

ALG_ED25519 = 0x01
SIGNATURE_DASH = "\u2014"  # an em dash, as the format requires
MAX_SIGNATURES = 100


class NoteError(ValueError):
    """A malformed key, note or checkpoint, or a signature that does not verify."""


def _is_key_name(name: str) -> bool:
    # Printable without spaces: no character str.isprintable() accepts is a space but " ".
    return bool(name) and name.isprintable() and " " not in name and "+" not in name


def key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_key).digest()[:4]


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError(f"{text!r} is not base64") from exc


@dataclass(frozen=True)
class Verifier:
    name: str
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([ALG_ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    @functools.cached_property
    def _public_key(self) -> Ed25519PublicKey:
        """Built once per verifier (a verifier checks every checkpoint of a log)."""
        return Ed25519PublicKey.from_public_bytes(self.public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            self._public_key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    @classmethod
    def parse(cls, text: str) -> Verifier:
        """A verifier key ``name+keyid+base64``; refuses every mangled form."""
        parts = text.strip().split("+", 2)  # base64 may hold '+'
        if len(parts) != 3:
            raise NoteError("a verifier key is name+keyid+base64(0x01 || public key)")
        name, hex_id, encoded = parts
        if not _is_key_name(name) or len(hex_id) != 8 or hex_id != hex_id.lower():
            raise NoteError("malformed verifier key")
        try:
            wanted_id = bytes.fromhex(hex_id)
        except ValueError as exc:
            raise NoteError("malformed verifier key ID") from exc
        raw = _b64decode(encoded)
        if len(raw) != 33 or raw[0] != ALG_ED25519:
            raise NoteError("not an Ed25519 verifier key")
        verifier = cls(name, raw[1:])
        if verifier.key_id != wanted_id:
            raise NoteError("verifier key ID does not match its name and key")
        return verifier


@dataclass(frozen=True)
class Signer:
    name: str
    seed: bytes  # the 32-byte Ed25519 private key

    def __post_init__(self) -> None:
        if not _is_key_name(self.name):
            raise NoteError(f"{self.name!r} is not a key name (no spaces, no '+')")
        if len(self.seed) != 32:
            raise NoteError("an Ed25519 private key is 32 bytes")

    @classmethod
    def generate(cls, name: str) -> Signer:
        key = Ed25519PrivateKey.generate()
        seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(name, seed)

    @functools.cached_property
    def _private_key(self) -> Ed25519PrivateKey:
        """Built once per signer (the log signs with every commit)."""
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    @functools.cached_property
    def verifier(self) -> Verifier:
        public = self._private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return Verifier(self.name, public)

    def sign(self, message: bytes) -> bytes:
        return self._private_key.sign(message)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([ALG_ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{encoded}"

    def __repr__(self) -> str:  # never print the private key by accident
        return f"Signer({self.name!r})"

    @classmethod
    def parse(cls, text: str) -> Signer:
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
            raise NoteError("a signer key is PRIVATE+KEY+name+keyid+base64(0x01 || seed)")
        raw = _b64decode(parts[4])
        if len(raw) != 33 or raw[0] != ALG_ED25519:
            raise NoteError("not an Ed25519 signer key")
        signer = cls(parts[2], raw[1:])
        if signer.verifier.key_id.hex() != parts[3]:
            raise NoteError("signer key ID does not match its name and key")
        return signer


_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f\u2028\u2029]")  # all but the newline


def _check_text(text: str) -> None:
    if not text.endswith("\n") or "\n\n" in text or text.startswith("\n"):
        raise NoteError("note text must be non-empty lines, each ending in a newline")
    if _CONTROL.search(text):
        raise NoteError("note text has a control character")


def sign_note(text: str, signer: Signer) -> str:
    """The signed note: ``text``, a blank line and the signature line."""
    _check_text(text)
    return _with_signature(text, signer.name, _signature(text, signer))


def _signature(text: str, signer: Signer) -> bytes:
    """What a signature line carries: key ID || Ed25519 signature of the text."""
    return signer.verifier.key_id + signer.sign(text.encode("utf-8"))


def _with_signature(text: str, name: str, signature: bytes) -> str:
    return f"{text}\n{SIGNATURE_DASH} {name} {base64.b64encode(signature).decode()}\n"


def open_note(note: str, verifier: Verifier) -> str:
    """The text of ``note`` once a signature by ``verifier`` verifies; :class:`NoteError`
    otherwise (including when no signature line is by this key)."""
    text, sep, signatures = note.rpartition("\n\n")
    if not sep:
        raise NoteError("malformed note: no blank line before the signatures")
    text += "\n"
    _check_text(text)
    lines = signatures.split("\n")
    if lines[-1] != "" or len(lines) < 2:
        raise NoteError("malformed note: signatures must end in a newline")
    lines = lines[:-1]
    if len(lines) > MAX_SIGNATURES:
        raise NoteError("malformed note: too many signatures")
    matched = False
    for line in lines:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != SIGNATURE_DASH or not _is_key_name(parts[1]):
            raise NoteError("malformed note: bad signature line")
        raw = _b64decode(parts[2])
        if len(raw) < 5:
            raise NoteError("malformed note: short signature")
        if parts[1] != verifier.name or raw[:4] != verifier.key_id:
            continue
        matched = True
        if not verifier.verify(text.encode("utf-8"), raw[4:]):
            raise NoteError(f"invalid signature for key {verifier.name}+{verifier.key_id.hex()}")
    if not matched:
        raise NoteError(f"no signature by key {verifier.name}+{verifier.key_id.hex()}")
    return text


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root_hash: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root_hash).decode()}\n"

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "":
            raise NoteError("a checkpoint has an origin, a size and a root hash line")
        origin, size_text, root_text = lines[0], lines[1], lines[2]
        no_leading_zero = size_text == "0" or not size_text.startswith("0")
        if not origin or not is_ascii_digits(size_text) or not no_leading_zero:
            raise NoteError("malformed checkpoint origin or size")
        try:
            size = parse_bounded_int(size_text, high=MAX_SEQ, what="checkpoint size")
        except NumberError as exc:
            raise NoteError(f"malformed checkpoint: {exc}") from None
        root_hash = _b64decode(root_text)
        if len(root_hash) != 32:
            raise NoteError("a checkpoint root hash is 32 bytes")
        return cls(origin, size, root_hash)


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> str:
    return sign_note(checkpoint.text(), signer)


def checkpoint_signature(checkpoint: Checkpoint, signer: Signer) -> bytes:
    """The signature sign_checkpoint puts in its note: key ID || Ed25519 signature."""
    return _signature(checkpoint.text(), signer)


def checkpoint_note(checkpoint: Checkpoint, name: str, signature: bytes) -> str:
    """The note sign_checkpoint writes, from its one signature (key ID || signature): a log
    keeps the bytes and rebuilds the text. Unverified: open_checkpoint checks it."""
    return _with_signature(checkpoint.text(), name, signature)


def open_checkpoint(note: str, verifier: Verifier) -> Checkpoint:
    return Checkpoint.parse(open_note(note, verifier))
