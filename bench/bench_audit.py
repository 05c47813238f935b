"""Audit log figures: records appended per second (each durable: synchronous=FULL, fsync) against
two baselines in the same run (SQLite synchronous=NORMAL, and a plain file append + fsync), and
verification throughput in rounds per second on logs of 10^5 rounds (10^6 with --million).

    .venv/bin/python bench/bench_audit.py [--appends N] [--rounds N] [--million]

The large logs are built fast (one transaction, no fsync per record) with the same encoding,
chain, Merkle tree and one signed checkpoint per round as the daemon writes.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from controller.audit.log import (
    DB_NAME,
    GENESIS_PREV,
    LATEST_CHECKPOINT,
    AuditLog,
    load_or_create_signer,
)
from controller.audit.verify import verify_state_dir
from controller.core import canonical
from controller.core.config import Config
from controller.core.dice import Roll
from controller.core.merkle import CompactRange
from controller.core.note import Checkpoint, sign_checkpoint
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind as K
from controller.core.records import record_hash
from controller.core.result import result_of_roll

READING = {
    "round": 1,
    "attempt": 1,
    "image_digest": "5e" * 32,
    "verdict": "valid",
    "dice": [
        {
            "colour": "red",
            "face": 3,
            "flat": True,
            "inside": True,
            "confidence": 97,
            "position": [20, 40],
        },
        {
            "colour": "blue",
            "face": 5,
            "flat": True,
            "inside": True,
            "confidence": 96,
            "position": [50, 44],
        },
        {
            "colour": "blue",
            "face": 1,
            "flat": True,
            "inside": True,
            "confidence": 98,
            "position": [80, 61],
        },
    ],
}


def appends_per_second(n: int, synchronous: str) -> float:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        log = AuditLog.open(tmp)
        log._db.execute(f"PRAGMA synchronous={synchronous}")
        start = time.perf_counter()
        for _ in range(n):
            log.append(K.READING, READING)
        elapsed = time.perf_counter() - start
        log.close()
    return n / elapsed


def file_appends_per_second(n: int) -> float:
    line = canonical.encode(READING) + b"\n"
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        fd = os.open(Path(tmp) / "plain.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        start = time.perf_counter()
        for _ in range(n):
            os.write(fd, line)
            os.fsync(fd)
        elapsed = time.perf_counter() - start
        os.close(fd)
    return n / elapsed


def build_log(state: Path, rounds: int) -> int:
    """A log of ``rounds`` rounds (7 records each) written in one transaction."""
    signer = load_or_create_signer(state)
    AuditLog(state / DB_NAME, signer).close()
    db = sqlite3.connect(state / DB_NAME, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    db.execute("BEGIN")
    tree = CompactRange()
    prev = GENESIS_PREV
    config = Config()
    rows: list[tuple[int, str, bytes]] = []
    notes: list[tuple[int, str]] = []

    def add(kind: K, data: dict[str, object]) -> None:
        nonlocal prev
        seq = tree.size + 1
        entry = {
            "seq": seq,
            "kind": str(kind),
            "time": "2025-01-01T00:00:00.000Z",
            "prev": prev,
            "data": data,
        }
        leaf = canonical.encode(entry)
        tree.append(leaf)
        prev = record_hash(leaf)
        rows.append((seq, str(kind), leaf))
        if kind in (K.CLOSE,):
            notes.append((seq, sign_checkpoint(Checkpoint(signer.name, seq, tree.root()), signer)))
        if len(rows) >= 50_000:
            flush()

    def flush() -> None:
        db.executemany("INSERT INTO records VALUES (?, ?, ?)", rows)
        db.executemany("INSERT INTO checkpoints VALUES (?, ?)", notes)
        rows.clear()
        notes.clear()

    add(K.CONFIG_LOADED, config_loaded_data(config))
    for n in range(1, rounds + 1):
        red, b1, b2 = (n % 6) + 1, (n // 6 % 6) + 1, (n // 36 % 6) + 1
        result = result_of_roll(
            Game.TILES, Roll(red, (b1, b2)), bank_seat=None, paytables=config.paytables
        )
        add(K.ROUND_OPENED, {"round": n})
        add(K.NO_MORE_BETS, {"round": n, "bank": "dealer", "mode": "shaker"})
        add(K.SHAKE, {"round": n, "attempt": 1, "cycles": 5})
        add(K.READING, {**READING, "round": n})
        add(K.READING, {**READING, "round": n})
        add(K.RESULT, {"round": n, "attempt": 1, **result.as_record()})
        add(K.CLOSE, {"round": n})
    flush()
    latest = sign_checkpoint(Checkpoint(signer.name, tree.size, tree.root()), signer)
    db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?)", (LATEST_CHECKPOINT, latest))
    db.execute("UPDATE meta SET value = ? WHERE name = 'frontier'", (tree.to_bytes(),))
    db.execute("COMMIT")
    db.close()
    return tree.size


def verify_rounds_per_second(rounds: int) -> None:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        state = Path(tmp)
        start = time.perf_counter()
        records = build_log(state, rounds)
        built = time.perf_counter() - start
        verifier = load_or_create_signer(state).verifier
        start = time.perf_counter()
        report = verify_state_dir(state, verifier)
        elapsed = time.perf_counter() - start
        assert report.records == records
        assert report.results == rounds
        print(
            f"verify {rounds:>9,} rounds ({records:,} records, {report.checkpoints:,} checkpoints):"
            f" {rounds / elapsed:,.0f} rounds/s, {records / elapsed:,.0f} records/s"
            f" ({elapsed:.1f} s; built in {built:.1f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--million", action="store_true", help="also verify 10^6 rounds (minutes)")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"full": [], "normal": [], "file": []}
    for _ in range(args.repeats):
        figures["full"].append(appends_per_second(args.appends, "FULL"))
        figures["normal"].append(appends_per_second(args.appends, "NORMAL"))
        figures["file"].append(file_appends_per_second(args.appends))
    full, normal, plain = (statistics.median(figures[k]) for k in ("full", "normal", "file"))
    print(f"append (median of {args.repeats} x {args.appends}):")
    print(f"  audit log, synchronous=FULL (the product): {full:,.0f} records/s")
    print(
        f"  baseline, synchronous=NORMAL (no fsync per commit): {normal:,.0f} records/s"
        f" (FULL is {full / normal:.2f}x)"
    )
    print(
        f"  baseline, plain file append + fsync: {plain:,.0f} records/s"
        f" (FULL is {full / plain:.2f}x)"
    )
    verify_rounds_per_second(args.rounds)
    if args.million:
        verify_rounds_per_second(1_000_000)


if __name__ == "__main__":
    main()
