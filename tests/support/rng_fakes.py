"""An in-memory audit log for the RNG tests (the daemon wires the real SQLite log), and the
tests' auditor: the X25519 key each session's seed is sealed to."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from controller.core.drbg import HmacDrbg
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.rng_escrow import escrow_key_of
from controller.core.rng_replay import (
    ALGORITHM,
    commitment_of,
    draw_outcome,
    personalization_for,
    round_identity,
)
from controller.core.state import RngMode
from controller.errors import AuditLogError
from controller.ports import AuditLog
from controller.rng.session import RngSessionManager

# The tests' auditor (a fixed key: tests only). AUDITOR_KEY is what [rng] escrow_public_key
# holds (AUDITOR_KEY.text), AUDITOR what rng-reveal --escrow-key opens the seals with.
AUDITOR = X25519PrivateKey.from_private_bytes(hashlib.sha256(b"the tests' auditor").digest())
AUDITOR_KEY = escrow_key_of(AUDITOR)
OTHER_AUDITOR = X25519PrivateKey.from_private_bytes(hashlib.sha256(b"another auditor").digest())


class MemoryLog:
    """Keeps (seq, kind, data) in order. Each record goes through JSON and back, floats
    refused, so that what the RNG records is JSON-safe as the real log requires."""

    def __init__(self) -> None:
        self.records: list[tuple[int, str, dict[str, Any]]] = []
        self.fail_on: RecordKind | None = None

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        if kind is self.fail_on:
            raise AuditLogError(f"simulated failure appending {kind}")
        text = json.dumps(dict(data), sort_keys=True, allow_nan=False)
        decoded = json.loads(text, parse_float=_no_float)
        seq = len(self.records) + 1
        self.records.append((seq, str(kind), decoded))
        return seq

    def close(self) -> None:
        pass

    def of_kind(self, kind: RecordKind) -> list[tuple[int, str, dict[str, Any]]]:
        return [r for r in self.records if r[1] == kind]

    def text(self) -> str:
        return json.dumps(self.records)


def _no_float(text: str) -> float:
    raise AssertionError(f"a float in a record: {text}")


def manager(
    state_dir: Path,
    log: MemoryLog | AuditLog,
    *,
    mode: RngMode = RngMode.POSITION,
    game: Game = Game.TILES,
    max_rounds: int = 500,
    table: str = "table-7",
    **kwargs: Any,
) -> RngSessionManager:
    kwargs.setdefault("escrow", AUDITOR_KEY)
    if isinstance(log, MemoryLog):
        kwargs.setdefault("records", list(log.records))
    return RngSessionManager(
        state_dir=state_dir,
        log=log,
        table=table,
        game=game,
        mode=mode,
        max_rounds=max_rounds,
        **kwargs,
    )


def counter_source(seed: bytes = b"test") -> Callable[[int], bytes]:
    """A deterministic stand-in for the OS (tests only): distinct, reproducible bytes."""
    calls = 0

    def source(n_bytes: int) -> bytes:
        nonlocal calls
        calls += 1
        return hashlib.shake_256(seed + calls.to_bytes(8, "big")).digest(n_bytes)

    return source


class RecordingSource:
    """``counter_source`` that keeps what it gave. Each open takes, in order, the entropy (32
    bytes), the nonce (16), the session id (8) and the escrow's ephemeral key (32)."""

    def __init__(self, seed: bytes = b"recorded") -> None:
        self._source = counter_source(seed)
        self.given: list[bytes] = []

    def __call__(self, n_bytes: int) -> bytes:
        data = self._source(n_bytes)
        self.given.append(data)
        return data

    def seeds(self) -> list[tuple[bytes, bytes]]:
        """(entropy, nonce) of every session opened with it."""
        given = self.given
        return [
            (given[i], given[i + 1])
            for i in range(len(given) - 1)
            if len(given[i]) == 32 and len(given[i + 1]) == 16
        ]


def legacy_session(
    state_dir: Path,
    log: MemoryLog | AuditLog,
    *,
    rounds: range = range(1, 4),
    table: str = "table-7",
) -> str:
    """A session as an older version left it at a power cut: committed without an escrow,
    drawn for ``rounds``, its seed in the 0600 file rng-seed-<session>.json."""
    entropy, nonce, session = os.urandom(32), os.urandom(16), os.urandom(8).hex()
    personalization = personalization_for(table, session)
    commitment = commitment_of(entropy, nonce, personalization)
    log.append(
        RecordKind.RNG_COMMIT,
        {
            "session": session,
            "table": table,
            "game": "tiles",
            "mode": "position",
            "positions": 8,
            "max_rounds": 500,
            "algorithm": ALGORITHM,
            "commitment": commitment,
        },
    )
    drbg = HmacDrbg(entropy, nonce, personalization)
    for round_number in rounds:
        identity = round_identity(table, session, round_number, 1)
        number = draw_outcome(drbg, RngMode.POSITION, 8, identity)
        log.append(
            RecordKind.RNG_DRAW,
            {
                "session": session,
                "round": round_number,
                "attempt": 1,
                "mode": "position",
                "number": number,
            },
        )
    seed_file = {
        "format": 1,
        "session": session,
        "table": table,
        "entropy": entropy.hex(),
        "nonce": nonce.hex(),
        "personalization": personalization.hex(),
        "commitment": commitment,
    }
    path = state_dir / f"rng-seed-{session}.json"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(seed_file, file, sort_keys=True)
    return session
