"""controller/core/note.py's cosignatures (C2SP tlog-cosignature v1): the body of the note as
given is cosigned, extension lines included, byte for byte; a body that is not a canonical
checkpoint is refused, never rebuilt from its fields; a known answer from a fixed key, so that
another implementation can be checked against the same bytes."""

from __future__ import annotations

import base64
import hashlib

import pytest

from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    NoteError,
    Signer,
    checkpoint_body,
    cosign_note,
    open_checkpoint,
    open_cosignature,
    sign_note,
    signed_by,
)

ROOT = hashlib.sha256(b"root").digest()
LOG = Signer("casino.example/paigow/table-7", hashlib.sha256(b"log").digest())
WITNESS = Signer("witness.casino/w1", hashlib.sha256(b"witness").digest(), ALG_COSIGNATURE_V1)


def test_a_note_with_an_extension_line_is_cosigned_as_given() -> None:
    body = Checkpoint(LOG.name, 42, ROOT).text() + "casino.example/ext seen-by=pit-3\n"
    note = sign_note(body, LOG)
    cosigned = cosign_note(note, WITNESS, 1_796_000_000)
    assert cosigned.startswith(note)
    assert open_checkpoint(cosigned, LOG.verifier) == Checkpoint(LOG.name, 42, ROOT)
    assert open_cosignature(cosigned, WITNESS.verifier).timestamp == 1_796_000_000
    # the plain construction: key ID (0x04) || u64 time || Ed25519 over header, time, body
    name, encoded = cosigned.splitlines()[-1].split(" ")[1:]
    raw = base64.b64decode(encoded)
    assert name == WITNESS.name
    assert (
        raw[:4]
        == hashlib.sha256(b"witness.casino/w1\n\x04" + WITNESS.verifier.public_key).digest()[:4]
    )
    assert int.from_bytes(raw[4:12], "big") == 1_796_000_000
    message = b"cosignature/v1\ntime 1796000000\n" + body.encode()
    assert WITNESS.verifier.verify(message, raw[12:])
    # the same checkpoint without its extension line is another message
    assert not WITNESS.verifier.verify(
        b"cosignature/v1\ntime 1796000000\n" + Checkpoint(LOG.name, 42, ROOT).text().encode(),
        raw[12:],
    )


def test_the_known_answer() -> None:
    """Ed25519 is deterministic: these are the bytes any C2SP tlog-cosignature v1
    implementation makes for this cosigner key (seed SHA-256("witness")), time and body."""
    assert (
        str(WITNESS.verifier)
        == "witness.casino/w1+ba143ae1+BGG3op9v3HIXXDPBmFc/0CioJHhGCXc+pyvvFPlBZdYO"
    )
    body = (
        "casino.example/paigow/table-7\n42\nSBNJTRN+FjG7owHVrKtue7eqdM4RhdRWVl71HXN2d7I=\n"
        "extension line\n"
    )
    line = cosign_note(sign_note(body, LOG), WITNESS, 1_796_000_000).splitlines()[-1]
    assert line == (
        "— witness.casino/w1 uhQ64QAAAABrDMkACPkhLjGrYNp1juIn9kVSj1QgPmbu+WR2qksCuL+IqVwFuBm1Cl"
        "cA5VVBC+B5pJ5SBLKh5YxfCkHrId80ZLQdBA=="
    )


@pytest.mark.parametrize(
    "body",
    [
        f"{LOG.name}\n042\n{base64.b64encode(ROOT).decode()}\n",  # a leading zero
        f"{LOG.name}\n42\n{base64.b64encode(ROOT).decode()[:-2]}R=\n",  # padding bits set
        f"{LOG.name}\n42\n{base64.b64encode(ROOT[:31]).decode()}\n",  # not 32 bytes
        f"{LOG.name}\n-1\n{base64.b64encode(ROOT).decode()}\n",
        f"\n42\n{base64.b64encode(ROOT).decode()}\n",  # no origin
    ],
)
def test_a_body_that_is_not_canonical_is_refused(body: str) -> None:
    note = f"{body}\n— {LOG.name} {base64.b64encode(b'12345' * 10).decode()}\n"
    with pytest.raises(NoteError):
        checkpoint_body(note)
    with pytest.raises(NoteError):
        cosign_note(note, WITNESS, 1)


def test_signed_by_keeps_only_the_logs_own_signature_lines() -> None:
    body = Checkpoint(LOG.name, 7, ROOT).text()
    other = Signer("someone.else/x", hashlib.sha256(b"x").digest())
    note = sign_note(body, other)
    both = note + sign_note(body, LOG).splitlines(keepends=True)[-1]
    kept = signed_by(both, LOG.verifier)
    assert kept == sign_note(body, LOG)
    with pytest.raises(NoteError):
        signed_by(note, LOG.verifier)
