"""The witness's cosignature checked by an independent implementation: a Go program written from
the C2SP specifications with Go's standard library only (tests/independent/cosignature.go),
over a checkpoint note that carries an extension line (c2sp.org/tlog-cosignature: the
cosigned message is the whole body as received, extension lines included)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from controller.core.note import ALG_COSIGNATURE_V1, Signer, cosign_note, sign_note

GO = shutil.which("go") or "/usr/lib/go-1.19/bin/go"
PROGRAM = Path(__file__).resolve().parents[1] / "independent" / "cosignature.go"
ORIGIN = "casino.example/paigow/table-7"
ROOT = base64.b64encode(hashlib.sha256(b"the tree of 1234 records").digest()).decode()


def go_check(
    tmp_path: Path, note: str, log: Signer, witness: Signer
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "note"
    path.write_text(note)
    env = {**os.environ, "GOCACHE": str(tmp_path / "go-cache"), "GOPATH": str(tmp_path / "go")}
    return subprocess.run(
        [GO, "run", str(PROGRAM), str(path), str(log.verifier), str(witness.verifier)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture
def keys() -> tuple[Signer, Signer]:
    if not Path(GO).exists():
        pytest.fail("go is not installed: scripts/install-system-deps installs golang-go")
    return Signer.generate(ORIGIN), Signer.generate("witness.casino.example", ALG_COSIGNATURE_V1)


@pytest.mark.slow
def test_a_cosignature_over_a_note_with_an_extension_line_verifies_independently(
    tmp_path: Path, keys: tuple[Signer, Signer]
) -> None:
    log, witness = keys
    body = f"{ORIGIN}\n1234\n{ROOT}\nan extension line the log adds\n"
    received = sign_note(body, log)
    cosigned = cosign_note(received, witness, 1_764_600_000)
    assert cosigned.startswith(received)  # the note as received, the cosignature line after
    done = go_check(tmp_path, cosigned, log, witness)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ok origin={ORIGIN} size=1234 timestamp=1764600000 extensions=1"


@pytest.mark.slow
def test_the_independent_check_refuses_a_cosignature_of_another_body(
    tmp_path: Path, keys: tuple[Signer, Signer]
) -> None:
    """The check can fail: the extension line changed after the witness cosigned."""
    log, witness = keys
    received = sign_note(f"{ORIGIN}\n1234\n{ROOT}\nan extension line\n", log)
    cosigned = cosign_note(received, witness, 1_764_600_000)
    altered = cosigned.replace("an extension line", "another extension")
    done = go_check(tmp_path, altered, log, witness)
    assert done.returncode == 1
    assert "does not verify" in done.stderr
