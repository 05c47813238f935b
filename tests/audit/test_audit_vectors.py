"""External vectors: RFC 6962 roots (transparency-dev/merkle) and a C2SP signed note
(golang.org/x/mod sumdb/note); and the canonical encoding's rules."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from controller.core import canonical, merkle, note

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
PINNED = {  # the vendored files, as published (see vectors/README.md)
    "rfc6962_merkle.json": "0edf73da3d1ed858c44121329a851ff9d3e6fa646ff27a0e53a31c88f5578cba",
    "signed_note.json": "b44b47e7c74555cd6d01e0b5a63cda5df94c5625ea573220073d9a9b5368d843",
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_vendored_vectors_are_the_published_files(name: str) -> None:
    assert hashlib.sha256((VECTORS / name).read_bytes()).hexdigest() == PINNED[name]


def _merkle() -> dict[str, list]:  # type: ignore[type-arg]
    return json.loads((VECTORS / "rfc6962_merkle.json").read_text())


def _note() -> dict[str, str]:
    return json.loads((VECTORS / "signed_note.json").read_text())


def test_rfc6962_roots_of_every_size_reproduce() -> None:
    v = _merkle()
    leaves = [bytes.fromhex(h) for h in v["leaf_inputs_hex"]]
    for size, expected in enumerate(v["root_hashes_hex"]):
        assert merkle.root(leaves[:size]).hex() == expected
        compact = merkle.CompactRange()
        for leaf in leaves[:size]:
            compact.append(leaf)
        assert compact.root().hex() == expected
        again = merkle.CompactRange.from_bytes(size, compact.to_bytes())
        assert again.root().hex() == expected


def test_rfc6962_leaf_and_node_hashes_reproduce() -> None:
    v = _merkle()
    leaves = [bytes.fromhex(h) for h in v["leaf_inputs_hex"]]
    level = [merkle.leaf_hash(leaf) for leaf in leaves]
    for expected in v["node_hashes_hex"]:
        assert [h.hex() for h in level] == expected
        level = [merkle.node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]


def test_inclusion_proofs_lead_to_the_root() -> None:
    leaves = [bytes([i]) * i for i in range(13)]
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    for size in range(1, len(leaves) + 1):
        expected = merkle.root(leaves[:size])
        for index in range(size):
            proof = merkle.inclusion_proof(index, hashes[:size])
            got = merkle.root_from_inclusion_proof(index, size, hashes[index], proof)
            assert got == expected
            wrong = merkle.root_from_inclusion_proof(index, size, merkle.leaf_hash(b"x"), proof)
            assert wrong != expected


def test_go_note_signer_and_verifier_keys_and_signature_reproduce() -> None:
    v = _note()
    signer = note.Signer.parse(v["signer_key"])
    assert str(signer) == v["signer_key"]
    assert str(signer.verifier) == v["verifier_key"]
    assert note.sign_note(v["text"], signer) == v["signed"]
    verifier = note.Verifier.parse(v["verifier_key"])
    assert note.open_note(v["signed"], verifier) == v["text"]


def test_go_note_with_two_signatures_opens_with_either_key() -> None:
    v = _note()
    both = v["signed"] + v["other_signature_line"]
    for key in (v["verifier_key"], v["other_verifier_key"]):
        assert note.open_note(both, note.Verifier.parse(key)) == v["text"]


def test_mangled_verifier_keys_are_refused() -> None:
    key = _note()["verifier_key"]
    for i in range(len(key)):
        mangled = key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :]
        with pytest.raises(note.NoteError):
            note.Verifier.parse(mangled)
    with pytest.raises(note.NoteError):
        note.Verifier.parse(key[:-4])


def test_a_note_signed_by_another_key_or_altered_does_not_open() -> None:
    v = _note()
    other = note.Verifier.parse(v["other_verifier_key"])
    with pytest.raises(note.NoteError, match="no signature by key EnochRoot"):
        note.open_note(v["signed"], other)
    verifier = note.Verifier.parse(v["verifier_key"])
    altered = v["signed"].replace("cryptography", "cryptographY")
    with pytest.raises(note.NoteError, match="invalid signature"):
        note.open_note(altered, verifier)


def test_checkpoint_round_trip() -> None:
    signer = note.Signer.generate("example.com/log")
    checkpoint = note.Checkpoint("example.com/log", 8, merkle.EMPTY_ROOT)
    signed = note.sign_checkpoint(checkpoint, signer)
    assert signed.startswith("example.com/log\n8\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n")
    assert note.open_checkpoint(signed, signer.verifier) == checkpoint


def test_canonical_encoding_is_sorted_compact_utf8() -> None:
    value = {"b": [1, None, True], "a": "é\n", "c": {"z": 0, "y": -3}}
    data = canonical.encode(value)
    assert data == '{"a":"é\\n","b":[1,null,true],"c":{"y":-3,"z":0}}'.encode()
    assert canonical.decode(data) == value


@pytest.mark.parametrize(
    "bad", [1.5, float("nan"), {1: "x"}, 2**53, b"bytes", {"x": {"y": [0.0]}}, "\ud800"]
)
def test_canonical_encoding_refuses_what_has_no_single_form(bad: object) -> None:
    with pytest.raises(canonical.EncodingError):
        canonical.encode(bad)


@pytest.mark.parametrize(
    "bad",
    [b'{"b":1,"a":2}', b'{"a": 1}', b'{"a":1.0}', b'{"a":1,"a":1}', b"\xff", b'{"a":"\\u00e9"}'],
)
def test_canonical_decoding_refuses_non_canonical_bytes(bad: bytes) -> None:
    with pytest.raises(canonical.EncodingError):
        canonical.decode(bad)


@pytest.mark.parametrize(
    "bad",
    [
        b'{"a":9007199254740992}',
        b'{"a":-9007199254740992}',
        b'{"a":[0,{"b":12345678901234567890}]}',
        b'{"a":"x","b":90071992547409910}',
    ],
)
def test_canonical_decoding_refuses_integers_beyond_2_to_the_53(bad: bytes) -> None:
    with pytest.raises(canonical.EncodingError, match="outside"):
        canonical.decode(bad)


def test_canonical_decoding_keeps_the_largest_integers_and_long_digit_strings() -> None:
    data = b'{"a":9007199254740991,"b":-9007199254740991,"c":"12345678901234567890"}'
    assert canonical.decode(data) == {
        "a": 2**53 - 1,
        "b": -(2**53 - 1),
        "c": "12345678901234567890",
    }
