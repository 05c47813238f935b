"""C2SP signed notes with Ed25519, and C2SP tlog checkpoints. Pure: no I/O.

A signed note (https://c2sp.org/signed-note) is UTF-8 text ending in a newline, a blank
line, then one signature line per signer: ``— <key name> <base64(key ID || signature)>``.
The key ID is the first four bytes of SHA-256(key name || 0x0A || 0x01 || public key), 0x01
naming Ed25519. A verifier key is written ``<name>+<key ID in hex>+<base64(0x01 || public key)>``
and a signer key, as Go's ``golang.org/x/mod/sumdb/note`` writes it,
``PRIVATE+KEY+<name>+<key ID in hex>+<base64(0x01 || Ed25519 seed)>``.

A checkpoint (https://c2sp.org/tlog-checkpoint) is the note text ``<origin>\\n<tree size>\\n
<base64(root hash)>\\n``, then any extension lines; parsed strictly (a size in decimal without
leading zeros, the root in canonical base64, every line non-empty).

A cosignature (https://c2sp.org/tlog-cosignature, cosignature/v1) is a witness's note signature
on a checkpoint: its key ID is computed with the algorithm byte 0x04 instead of 0x01, and the
line carries ``key ID || u64 timestamp (big-endian) || Ed25519 signature`` of
``cosignature/v1\\ntime <timestamp>\\n`` followed by the checkpoint note's body byte for
byte, extension lines included (:func:`cosign_note` cosigns the body it is given, never one
rebuilt from the parsed fields). A cosigner's verifier key is written as any other, with 0x04
before the public key.
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

from controller.core.digits import MAX_SEQ, is_ascii_digits, parse_bounded_int
from controller.errors import NoteError, NumberError

ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04  # C2SP tlog-cosignature: an Ed25519 cosigner's key
COSIGNATURE_HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = 2**63 - 1
SIGNATURE_DASH = "\u2014"  # an em dash, as the format requires
MAX_SIGNATURES = 100


def _is_key_name(name: str) -> bool:
    # Printable without spaces: no character str.isprintable() accepts is a space but " ".
    return bool(name) and name.isprintable() and " " not in name and "+" not in name


def key_id(name: str, public_key: bytes, alg: int = ALG_ED25519) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([alg]) + public_key).digest()[:4]


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError(f"{text!r} is not base64") from exc


@dataclass(frozen=True)
class Verifier:
    """A signer's public key: a log's (0x01) or a cosigner's (``alg`` 0x04)."""

    name: str
    public_key: bytes
    alg: int = ALG_ED25519

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key, self.alg)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([self.alg]) + self.public_key).decode()
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
    def parse(cls, text: str, alg: int = ALG_ED25519) -> Verifier:
        """A verifier key ``name+keyid+base64`` of the algorithm ``alg``; refuses every
        mangled form."""
        parts = text.strip().split("+", 2)  # base64 may hold '+'
        if len(parts) != 3:
            raise NoteError(f"a verifier key is name+keyid+base64(0x{alg:02x} || public key)")
        name, hex_id, encoded = parts
        if not _is_key_name(name) or len(hex_id) != 8 or hex_id != hex_id.lower():
            raise NoteError("malformed verifier key")
        try:
            wanted_id = bytes.fromhex(hex_id)
        except ValueError as exc:
            raise NoteError("malformed verifier key ID") from exc
        raw = _b64decode(encoded)
        if len(raw) != 33 or raw[0] != alg:
            kind = "cosigner" if alg == ALG_COSIGNATURE_V1 else "Ed25519"
            raise NoteError(f"not an {kind} verifier key")
        verifier = cls(name, raw[1:], alg)
        if verifier.key_id != wanted_id:
            raise NoteError("verifier key ID does not match its name and key")
        return verifier


@dataclass(frozen=True)
class Signer:
    name: str
    seed: bytes  # the 32-byte Ed25519 private key
    alg: int = ALG_ED25519  # ALG_COSIGNATURE_V1 for a witness's cosigning key

    def __post_init__(self) -> None:
        if not _is_key_name(self.name):
            raise NoteError(f"{self.name!r} is not a key name (no spaces, no '+')")
        if len(self.seed) != 32:
            raise NoteError("an Ed25519 private key is 32 bytes")

    @classmethod
    def generate(cls, name: str, alg: int = ALG_ED25519) -> Signer:
        key = Ed25519PrivateKey.generate()
        seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(name, seed, alg)

    @functools.cached_property
    def _private_key(self) -> Ed25519PrivateKey:
        """Built once per signer (the log signs with every commit)."""
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    @functools.cached_property
    def verifier(self) -> Verifier:
        public = self._private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return Verifier(self.name, public, self.alg)

    def sign(self, message: bytes) -> bytes:
        return self._private_key.sign(message)

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([self.alg]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{encoded}"

    def __repr__(self) -> str:  # never print the private key by accident
        return f"Signer({self.name!r})"

    @classmethod
    def parse(cls, text: str, alg: int = ALG_ED25519) -> Signer:
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
            raise NoteError(f"a signer key is PRIVATE+KEY+name+keyid+base64(0x{alg:02x} || seed)")
        raw = _b64decode(parts[4])
        if len(raw) != 33 or raw[0] != alg:
            kind = "cosigner" if alg == ALG_COSIGNATURE_V1 else "Ed25519"
            raise NoteError(f"not an {kind} signer key")
        signer = cls(parts[2], raw[1:], alg)
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
        if base64.b64encode(root_hash).decode() != root_text:  # one text per root (C2SP)
            raise NoteError("a checkpoint root hash is in canonical base64")
        return cls(origin, size, root_hash)


def unverified_checkpoint(note: str) -> Checkpoint:
    """The checkpoint a signed note's text says, its signatures not checked
    (:func:`open_checkpoint` checks them); :class:`NoteError` when it says none."""
    text, sep, _ = note.rpartition("\n\n")
    if not sep:
        raise NoteError("malformed note: no blank line before the signatures")
    return Checkpoint.parse(text + "\n")


def checkpoint_size(note: str) -> int | None:
    """The tree size a signed checkpoint's text says (signatures unchecked), or None."""
    try:
        return unverified_checkpoint(note).size
    except NoteError:
        return None


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


# --- C2SP tlog-cosignature (cosignature/v1) -------------------------------------------------


def _cosigned_message(body: str, timestamp: int) -> bytes:
    """What a cosigner signs (C2SP tlog-cosignature, cosignature/v1): the header, the time
    line, then the checkpoint's note body byte for byte, extension lines included."""
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{body}".encode()


def note_body(note: str) -> str:
    """The text of a signed note (everything before the blank line, with its last newline),
    its signatures not checked; :class:`NoteError` when it is not a note's text."""
    text, sep, _ = note.rpartition("\n\n")
    if not sep:
        raise NoteError("malformed note: no blank line before the signatures")
    text += "\n"
    _check_text(text)
    return text


def checkpoint_body(note: str) -> str:
    """The body of a signed checkpoint, once it is a canonical one (C2SP tlog-checkpoint: the
    origin, the size in decimal, the root hash in base64, then extension lines, each line
    non-empty and ending in a newline); :class:`NoteError` otherwise."""
    body = note_body(note)
    Checkpoint.parse(body)
    return body


def cosignature_on(body: str, cosigner: Signer, timestamp: int) -> str:
    """The cosigner's signature line on a checkpoint body as given (``checkpoint_body``),
    newline included: ``— <name> base64(key ID || u64 timestamp (big-endian) || Ed25519
    signature of cosignature/v1 || "time <timestamp>" || body)``."""
    if cosigner.alg != ALG_COSIGNATURE_V1:
        raise NoteError("a cosignature needs a cosigner key (algorithm 0x04)")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteError("a cosignature's timestamp is 0 to 2^63 - 1")
    signature = cosigner.sign(_cosigned_message(body, timestamp))
    raw = cosigner.verifier.key_id + timestamp.to_bytes(8, "big") + signature
    return f"{SIGNATURE_DASH} {cosigner.name} {base64.b64encode(raw).decode()}\n"


def cosign_note(note: str, cosigner: Signer, timestamp: int) -> str:
    """``note`` (a signed checkpoint, its signatures not checked here) as given, with the
    cosignature line on its body as given added after its signatures; a body that is not a
    canonical checkpoint is refused (:class:`NoteError`), never rebuilt."""
    if not note.endswith("\n"):
        raise NoteError("malformed note: signatures must end in a newline")
    return note + cosignature_on(checkpoint_body(note), cosigner, timestamp)


def signed_by(note: str, verifier: Verifier) -> str:
    """``note`` with only the signature lines of ``verifier`` (its name and key ID), each as
    given: the body and the log's own signatures, without anyone else's (a witness publishes
    those with its cosignature line). Signatures not checked here (:func:`open_note`)."""
    body = note_body(note)
    lines = note[len(body) + 1 :].split("\n")
    if lines[-1] != "" or len(lines) < 2:
        raise NoteError("malformed note: signatures must end in a newline")
    kept = []
    for line in lines[:-1]:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != SIGNATURE_DASH:
            raise NoteError("malformed note: bad signature line")
        if parts[1] == verifier.name and _b64decode(parts[2])[:4] == verifier.key_id:
            kept.append(line + "\n")
    if not kept:
        raise NoteError(f"no signature by key {verifier.name}+{verifier.key_id.hex()}")
    return body + "\n" + "".join(kept)


@dataclass(frozen=True)
class Cosigned:
    """A checkpoint a cosigner vouched for, and when (its timestamp, POSIX seconds)."""

    checkpoint: Checkpoint
    timestamp: int


def open_cosignature(note: str, cosigner: Verifier) -> Cosigned:
    """The checkpoint of ``note`` and the timestamp of ``cosigner``'s cosignature on it, once
    that cosignature verifies; :class:`NoteError` otherwise. (The log's own signature is
    checked apart, with :func:`open_checkpoint`.)"""
    if cosigner.alg != ALG_COSIGNATURE_V1:
        raise NoteError("not a cosigner key (algorithm 0x04)")
    text, sep, signatures = note.rpartition("\n\n")
    if not sep:
        raise NoteError("malformed note: no blank line before the signatures")
    text += "\n"
    _check_text(text)
    checkpoint = Checkpoint.parse(text)
    lines = signatures.split("\n")
    if lines[-1] != "" or len(lines) < 2 or len(lines) > MAX_SIGNATURES + 1:
        raise NoteError("malformed note: signatures must end in a newline")
    for line in lines[:-1]:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != SIGNATURE_DASH or not _is_key_name(parts[1]):
            raise NoteError("malformed note: bad signature line")
        raw = _b64decode(parts[2])
        if parts[1] != cosigner.name or raw[:4] != cosigner.key_id:
            continue
        if len(raw) != 4 + 8 + 64:
            raise NoteError("malformed cosignature: key ID, timestamp and signature")
        timestamp = int.from_bytes(raw[4:12], "big")
        if timestamp > MAX_TIMESTAMP:
            raise NoteError("a cosignature's timestamp is above 2^63 - 1")
        if not cosigner.verify(_cosigned_message(text, timestamp), raw[12:]):
            raise NoteError(f"invalid cosignature by {cosigner.name}+{cosigner.key_id.hex()}")
        return Cosigned(checkpoint, timestamp)
    raise NoteError(f"no cosignature by {cosigner.name}+{cosigner.key_id.hex()}")
