"""The seed's escrow: sealed to the auditor's X25519 key in the commitment, opened only with
that key, and the construction re-derived here from its documented steps with cryptography's
primitives alone; the auditor's key file and the config's key, read strictly."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from support.rng_fakes import (
    AUDITOR,
    AUDITOR_KEY,
    OTHER_AUDITOR,
    MemoryLog,
    RecordingSource,
    manager,
)

from controller.core.config import parse_config
from controller.core.records import RecordKind
from controller.core.rng_escrow import (
    ESCROW_ALGORITHM,
    SealedSeed,
    escrow_key_of,
    open_sealed_seed,
    parse_escrow_key,
)
from controller.errors import ConfigError, EscrowError
from controller.rng.escrow import create_escrow_key, read_escrow_key, throwaway_escrow_key


def committed(tmp_path: Path) -> tuple[dict[str, Any], bytes, bytes]:
    """A session's commitment record, and the entropy and nonce it was opened with."""
    log = MemoryLog()
    source = RecordingSource()
    manager(tmp_path, log, entropy_source=source).open()
    [(_, kind, data)] = log.records
    assert kind == RecordKind.RNG_COMMIT
    [(entropy, nonce)] = source.seeds()
    return data, entropy, nonce


def opened(data: dict[str, Any], private: X25519PrivateKey = AUDITOR) -> tuple[bytes, bytes]:
    return open_sealed_seed(
        private,
        SealedSeed.from_record(data["escrow"]),
        table=data["table"],
        session=data["session"],
        commitment=data["commitment"],
    )


def flipped(text: str, at: int) -> str:
    return text[:at] + ("1" if text[at] == "0" else "0") + text[at + 1 :]


# --- the construction, step by step ---------------------------------------------------------


def test_the_documented_construction_opens_the_seal_independently(tmp_path: Path) -> None:
    """controller/core/rng_escrow.py's docstring, done again with cryptography's primitives:
    Z = X25519(r, E); K = HKDF-SHA256(Z, salt E ‖ R, info ctx); ChaCha20-Poly1305(K, 12 zero
    bytes, aad E ‖ R ‖ ctx) decrypts C to entropy ‖ nonce."""
    data, entropy, nonce = committed(tmp_path)
    escrow = data["escrow"]
    assert escrow["algorithm"] == "x25519-hkdf-sha256-chacha20poly1305"
    r = AUDITOR
    recipient = r.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert escrow["recipient"] == hashlib.sha256(recipient).hexdigest()
    ephemeral = bytes.fromhex(escrow["ephemeral"])
    ciphertext = bytes.fromhex(escrow["ciphertext"])
    assert len(ephemeral) == 32
    assert len(ciphertext) == 48 + 16
    ctx = (
        f"paigow-controller rng escrow v1 table={data['table']} session={data['session']}"
        f" commitment={data['commitment']}"
    ).encode("ascii")
    shared = r.exchange(X25519PublicKey.from_public_bytes(ephemeral))
    key = HKDF(hashes.SHA256(), 32, salt=ephemeral + recipient, info=ctx).derive(shared)
    seed = ChaCha20Poly1305(key).decrypt(bytes(12), ciphertext, ephemeral + recipient + ctx)
    assert seed == entropy + nonce
    pers = f"paigow-controller rng v1 table={data['table']} session={data['session']}"
    commitment = hashlib.sha256(entropy + nonce + pers.encode()).hexdigest()
    assert commitment == data["commitment"]
    assert opened(data) == (entropy, nonce)


def test_each_session_has_its_own_ephemeral_key(tmp_path: Path) -> None:
    log = MemoryLog()
    rng = manager(tmp_path, log)
    for _ in range(3):
        rng.open()
        rng.close()
    ephemerals = {d["escrow"]["ephemeral"] for _, k, d in log.of_kind(RecordKind.RNG_COMMIT)}
    assert len(ephemerals) == 3


def test_the_seal_opens_with_the_auditors_key_only(tmp_path: Path) -> None:
    data, entropy, nonce = committed(tmp_path)
    assert opened(data) == (entropy, nonce)
    with pytest.raises(EscrowError, match="another auditor key"):
        opened(data, OTHER_AUDITOR)
    # The record changed to name the other key: the seal still does not open with it.
    other = escrow_key_of(OTHER_AUDITOR).fingerprint
    renamed = {**data, "escrow": {**data["escrow"], "recipient": other}}
    with pytest.raises(EscrowError, match="does not open"):
        opened(renamed, OTHER_AUDITOR)


@pytest.mark.parametrize(
    ("field", "at"),
    [("ciphertext", 0), ("ciphertext", 95), ("ciphertext", 127), ("ephemeral", 10)],
)
def test_a_flipped_byte_of_the_seal_does_not_open(tmp_path: Path, field: str, at: int) -> None:
    data, _, _ = committed(tmp_path)
    escrow = {**data["escrow"], field: flipped(data["escrow"][field], at)}
    with pytest.raises(EscrowError):
        opened({**data, "escrow": escrow})


@pytest.mark.parametrize("field", ["table", "session", "commitment"])
def test_a_seal_moved_to_another_table_session_or_commitment_does_not_open(
    tmp_path: Path, field: str
) -> None:
    data, _, _ = committed(tmp_path)
    moved = {**data, field: "table-8" if field == "table" else flipped(data[field], 3)}
    with pytest.raises(EscrowError, match="does not open"):
        opened(moved)


@pytest.mark.parametrize(
    "change",
    [
        {"algorithm": "x25519-hkdf-sha256-aesgcm"},
        {"recipient": "AB" * 32},
        {"ephemeral": "00" * 31},
        {"ephemeral": "00" * 32},  # a point of low order
        {"ciphertext": "00" * 63},
        {"extra": 1},
    ],
)
def test_a_malformed_escrow_is_refused(tmp_path: Path, change: dict[str, object]) -> None:
    data, _, _ = committed(tmp_path)
    with pytest.raises(EscrowError):
        SealedSeed.from_record({**data["escrow"], **change})
    with pytest.raises(EscrowError):
        SealedSeed.from_record("not an object")


def test_the_escrow_names_its_algorithm_and_round_trips(tmp_path: Path) -> None:
    data, _, _ = committed(tmp_path)
    sealed = SealedSeed.from_record(data["escrow"])
    assert sealed.as_record() == data["escrow"]
    assert data["escrow"]["algorithm"] == ESCROW_ALGORITHM


# --- the auditor's public key in the config ---------------------------------------------------


def test_the_public_key_is_read_strictly() -> None:
    text = AUDITOR_KEY.text
    assert len(text) == 44
    assert parse_escrow_key(text) == AUDITOR_KEY
    raw = AUDITOR_KEY.raw
    bad = [
        "",
        text[:-1],
        text + "=",
        " " + text[1:],
        text.replace("=", ""),
        base64.urlsafe_b64encode(bytes([0xFB]) * 32).decode(),  # - and _
        base64.b64encode(raw + b"\x00").decode(),
        base64.b64encode(bytes(32)).decode(),  # low order
        base64.b64encode(b"\x01" + bytes(31)).decode(),  # low order
        AUDITOR_KEY.fingerprint,  # hex, not the key
        text[:-2] + chr(ord(text[-2]) + 1) + "=",  # non-canonical last digit
        "é" * 44,
    ]
    for value in bad:
        with pytest.raises(EscrowError):
            parse_escrow_key(value)


def test_a_bad_key_in_the_config_names_rng_escrow_public_key() -> None:
    with pytest.raises(ConfigError, match=r"rng\.escrow_public_key") as caught:
        parse_config({"rng": {"escrow_public_key": "AAAA"}})
    assert caught.value.key == "rng.escrow_public_key"
    config = parse_config(
        {"table": {"mode": "rng"}, "rng": {"escrow_public_key": AUDITOR_KEY.text}}
    )
    assert config.rng.escrow_public_key == AUDITOR_KEY.text


@pytest.mark.parametrize(
    "table", [{"mode": "rng"}, {"modes": ["rng"]}, {"mode": "manual", "modes": ["shaker", "rng"]}]
)
def test_rng_mode_without_an_escrow_key_is_refused(table: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"table": table})
    assert caught.value.key == "rng.escrow_public_key"
    assert parse_config({"table": table}, escrow_required=False).rng.escrow_public_key == ""
    assert parse_config({"table": {"modes": ["manual"]}}).rng.escrow_public_key == ""


# --- the auditor's key file -----------------------------------------------------------------


def test_the_key_file_is_made_0600_never_replaced_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "auditor.key"
    old_umask = os.umask(0)
    try:
        public = create_escrow_key(path)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert escrow_key_of(read_escrow_key(path)) == public
    assert parse_escrow_key(public.text) == public
    before = path.read_bytes()
    with pytest.raises(EscrowError, match="never replaced"):
        create_escrow_key(path)
    assert path.read_bytes() == before


def test_a_key_file_that_is_not_the_auditors_is_refused(tmp_path: Path) -> None:
    readable = tmp_path / "readable.key"
    create_escrow_key(readable)
    readable.chmod(0o640)
    with pytest.raises(EscrowError, match="owner only"):
        read_escrow_key(readable)
    ed25519 = tmp_path / "ed25519.key"
    ed25519.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
        )
    )
    ed25519.chmod(0o600)
    with pytest.raises(EscrowError, match="not X25519"):
        read_escrow_key(ed25519)
    junk = tmp_path / "junk.key"
    junk.write_bytes(b"not a key\n")
    junk.chmod(0o600)
    with pytest.raises(EscrowError, match="not an auditor key"):
        read_escrow_key(junk)
    with pytest.raises(EscrowError, match="cannot read"):
        read_escrow_key(tmp_path / "missing.key")


def test_the_throwaway_key_is_made_once_beside_the_log(tmp_path: Path) -> None:
    path, key = throwaway_escrow_key(tmp_path / "state")
    assert path.parent == tmp_path / "state"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert throwaway_escrow_key(tmp_path / "state") == (path, key)


# --- the daemon's memory --------------------------------------------------------------------


def test_the_daemon_can_make_itself_undumpable() -> None:
    code = (
        "from controller.app.hardening import is_dumpable, make_undumpable\n"
        "assert is_dumpable()\n"
        "make_undumpable()\n"
        "assert not is_dumpable()\n"
        "import os\n"
        "print(os.stat(f'/proc/{os.getpid()}/mem').st_uid)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == 0  # /proc/PID/mem now belongs to root, not the service's user


def test_run_makes_itself_undumpable_before_anything_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.app import hardening
    from controller.cli import main

    calls: list[str] = []
    monkeypatch.setattr(hardening, "make_undumpable", lambda: calls.append("undumpable"))
    assert main(["run", "--config", str(tmp_path / "missing.toml")]) == 78  # then the config
    assert calls == ["undumpable"]

    def refused() -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(hardening, "make_undumpable", refused)
    capsys.readouterr()
    assert main(["run", "--config", str(tmp_path / "missing.toml")]) == 1
    err = capsys.readouterr().err
    assert "cannot keep the memory from being dumped" in err
    assert err.count("\n") == 1


def test_the_unit_allows_no_core_file() -> None:
    unit = Path(__file__).resolve().parents[2] / "systemd" / "paigow-controller.service"
    assert "LimitCORE=0" in unit.read_text().splitlines()
