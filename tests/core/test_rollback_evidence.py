"""A ``rollback_evidence`` record is what it claims: a checkpoint this log's own key signed,
cosigned by the witness it names, of the size, root and time it says. verify-log checks it, so
that nobody but the two keys' holders could have put such a record in the log."""

from __future__ import annotations

import base64
import hashlib

import pytest

from controller.core.merkle import CompactRange, leaf_hash
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    Signer,
    cosign_note,
    sign_checkpoint,
)
from controller.core.record_data import RecordDataError, check_rollback_evidence

LOG = Signer.generate("casino.example/paigow/table-7")
WITNESS = Signer.generate("witness.casino.example", ALG_COSIGNATURE_V1)


def evidence(log: Signer = LOG, witness: Signer = WITNESS) -> dict[str, object]:
    tree = CompactRange(0, [])
    for n in range(90):
        tree.append_hash(leaf_hash(f"record {n}".encode()))
    checkpoint = Checkpoint(log.name, 90, tree.root())
    note = cosign_note(sign_checkpoint(checkpoint, log), witness, 1_764_600_000)
    return {
        "round": 12,
        "witness": witness.name,
        "witness_key": str(witness.verifier),
        "note": note,
        "size": 90,
        "root": base64.b64encode(checkpoint.root_hash).decode(),
        "timestamp": 1_764_600_000,
        "log_size": 40,
    }


def test_genuine_evidence_verifies() -> None:
    check_rollback_evidence(evidence(), log_key=LOG.verifier)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"size": 91}, "not its note's"),
        ({"timestamp": 1}, "not its note's"),
        ({"root": base64.b64encode(hashlib.sha256(b"x").digest()).decode()}, "not its note's"),
        ({"witness": "another.witness"}, "not its note's"),
        ({"log_size": -1}, "whole numbers"),
        ({"note": 7}, "text"),
        ({"extra": 1}, "rollback_evidence record has"),
    ],
)
def test_evidence_that_is_not_its_note_is_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(RecordDataError, match=message):
        check_rollback_evidence({**evidence(), **change}, log_key=LOG.verifier)


def test_evidence_signed_by_another_log_or_witness_key_is_refused() -> None:
    other = Signer.generate("casino.example/paigow/table-7")  # the same name, another key
    with pytest.raises(RecordDataError, match="does not verify"):
        check_rollback_evidence(evidence(log=other), log_key=LOG.verifier)
    forged = evidence()
    another_witness = Signer.generate("witness.casino.example", ALG_COSIGNATURE_V1)
    forged["witness_key"] = str(another_witness.verifier)  # names a key that did not cosign
    with pytest.raises(RecordDataError, match="does not verify"):
        check_rollback_evidence(forged, log_key=LOG.verifier)
    altered = evidence()
    altered["note"] = str(altered["note"]).replace("\n90\n", "\n91\n")
    with pytest.raises(RecordDataError, match="does not verify"):
        check_rollback_evidence(altered, log_key=LOG.verifier)
