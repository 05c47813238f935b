"""An in-memory audit log for the RNG tests (the daemon wires the real SQLite log)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.state import RngMode
from controller.errors import AuditLogError
from controller.rng.session import RngSessionManager


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
    log: MemoryLog,
    *,
    mode: RngMode = RngMode.POSITION,
    game: Game = Game.TILES,
    max_rounds: int = 500,
    **kwargs: Any,
) -> RngSessionManager:
    return RngSessionManager(
        state_dir=state_dir,
        log=log,
        table="table-7",
        game=game,
        mode=mode,
        max_rounds=max_rounds,
        records=list(log.records),
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
