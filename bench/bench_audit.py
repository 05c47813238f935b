"""The audit log's append path: what one commit and one record cost, and where it goes.

    .venv/bin/python bench/bench_audit.py       # BENCH_AUDIT_ROUNDS=200

``AuditLog.commit`` is timed replaying the commits of real rounds: the steps of one round as the
control loop commits them (their records and stored contexts, taken from a log that
bench/loggen.py writes with the daemon's own code) into a fresh log, on a tmpfs (the CPU's
part: an fsync there costs nothing) and on this machine's disk (with the fsyncs). Each figure
is a median over the rounds. Beside them, in the same run: the per-record and per-commit cost
(commits of 1 and of 8 reading records: the slope and the intercept), and baselines for the
parts of a commit: the canonical encoding of a record, one Ed25519-signed checkpoint (every
commit signs the log's running checkpoint; a round's close signs its own too), and a bare
SQLite transaction inserting the same row into the same schema (WAL, synchronous=FULL).

The verify-log figures are bench_verify.py's; bytes and fsyncs per round are
bench_writes.py's; the whole path from the sensor to the feed is bench_latency.py's.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import loggen
from common import env_int, figure, median, note, title, tmpfs_dir

from controller.audit.log import AuditLog, connect
from controller.core import canonical
from controller.core.merkle import CompactRange
from controller.core.note import Checkpoint, sign_checkpoint
from controller.core.records import RecordKind
from controller.ports import Committed

Step = tuple[list[tuple[RecordKind, dict[str, Any]]], bytes | None]
SCRATCH = Path(__file__).parent / ".scratch"


def round_steps() -> list[Step]:
    """The commits of one round, as the control loop made them (bench/loggen.py)."""
    steps: list[Step] = []
    commit = AuditLog.commit

    def kept(
        log: AuditLog,
        entries: Sequence[tuple[RecordKind, Mapping[str, object]]],
        *,
        context: bytes | None = None,
    ) -> Committed:
        steps.append(
            ([(RecordKind(k), json.loads(canonical.encode(dict(d)))) for k, d in entries], context)
        )
        return commit(log, entries, context=context)

    with tempfile.TemporaryDirectory(prefix="bench-audit-", dir=SCRATCH) as tmp:
        AuditLog.commit = kept  # type: ignore[method-assign]
        try:
            loggen.generate(Path(tmp), 3)
        finally:
            AuditLog.commit = commit  # type: ignore[method-assign]

    def holding(kind: RecordKind) -> list[int]:
        return [i for i, step in enumerate(steps) if any(k == kind for k, _ in step[0])]

    first = holding(RecordKind.NO_MORE_BETS)[1]  # the second round: a round after a round
    last = min(i for i in holding(RecordKind.CLOSE) if i >= first)
    return steps[first : last + 1]


def step_name(step: Step) -> str:
    return "+".join(str(kind) for kind, _ in step[0])


def replay(directory: Path, steps: Sequence[Step], rounds: int) -> dict[str, list[float]]:
    """Commit the round's steps ``rounds`` times into a new log; microseconds per step."""
    timings: dict[str, list[float]] = {step_name(s): [] for s in steps}
    timings["round"] = []
    with AuditLog.open(directory) as log:
        for _ in range(rounds):
            round_ns = 0
            for step in steps:
                entries, context = step
                start = time.perf_counter_ns()
                log.commit(entries, context=context)
                elapsed = time.perf_counter_ns() - start
                round_ns += elapsed
                timings[step_name(step)].append(elapsed / 1000)
            timings["round"].append(round_ns / 1000)
    return timings


def per_record(directory: Path, reading: dict[str, Any], repeats: int) -> tuple[float, float]:
    """(per commit, per record) in microseconds: commits of 1 and of 8 reading records, taken
    in turn so that both see the same machine."""
    samples: dict[int, list[float]] = {1: [], 8: []}
    with AuditLog.open(directory) as log:
        for _ in range(repeats):
            for count, taken in samples.items():
                entries = [(RecordKind.READING, reading)] * count
                start = time.perf_counter_ns()
                log.commit(entries)
                taken.append((time.perf_counter_ns() - start) / 1000)
    one, eight = median(samples[1]), median(samples[8])
    slope = (eight - one) / 7
    return one - slope, slope


def timed_us(work: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        work()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return median(samples)


def sqlite_transaction_us(directory: Path, leaf: bytes, repeats: int) -> float:
    """A bare transaction inserting one row of the records table (WAL, synchronous=FULL)."""
    db = connect(directory / "bare.db")
    db.execute(
        "CREATE TABLE records (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, leaf BLOB NOT NULL,"
        " context BLOB, frontier BLOB, note TEXT)"
    )
    seq = 0

    def insert() -> None:
        nonlocal seq
        seq += 1
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO records VALUES (?, 'reading', ?, NULL, NULL, NULL)", (seq, leaf))
        db.execute("COMMIT")

    try:
        return timed_us(insert, repeats)
    finally:
        db.close()


def measure(where: str, directory: Path, steps: Sequence[Step], rounds: int) -> None:
    timings = replay(directory / "replay", steps, rounds)
    title(f"  on {where} ({directory}), median of {rounds} rounds:")
    figure("one round's commits, in all", f"{median(timings['round']):,.0f} us")
    for step in steps:
        name = step_name(step)
        figure(f"  commit {name}"[:48], f"{median(timings[name]):,.0f} us")
    reading = next(data for kind, data in steps[-2][0] if kind == RecordKind.READING)
    per_commit, per_record_us = per_record(directory / "records", reading, 3 * rounds)
    figure("per commit (intercept, 1 vs 8 records)", f"{per_commit:,.0f} us")
    figure("per record (slope)", f"{per_record_us:,.0f} us")
    leaf = canonical.encode({"seq": 1, "kind": "reading", "data": reading})
    bare = sqlite_transaction_us(directory, leaf, rounds)
    figure("baseline: bare SQLite insert transaction", f"{bare:,.0f} us")
    figure("  per commit / bare transaction", f"{per_commit / bare:.1f}x")


def main() -> None:
    rounds = env_int("BENCH_AUDIT_ROUNDS", 200)
    SCRATCH.mkdir(exist_ok=True)
    title("audit log: AuditLog.commit replaying the commits of a round")
    steps = round_steps()
    note(
        f"a round is {len(steps)} commits of {sum(len(s[0]) for s in steps)} records: "
        + ", ".join(step_name(s) for s in steps)
    )
    reading = next(data for kind, data in steps[-2][0] if kind == RecordKind.READING)
    entry = {"seq": 1, "kind": "reading", "time": "2025-01-01T00:00:00.000Z", "data": reading}
    encode_us = timed_us(lambda: canonical.encode(entry), 2000)
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp, AuditLog.open(Path(tmp)) as log:
        signer = log.signer
        assert signer is not None
        tree = CompactRange()
        for n in range(1000):
            tree.append(str(n).encode())
        sign_us = timed_us(
            lambda: sign_checkpoint(Checkpoint(signer.name, tree.size, tree.root()), signer), 500
        )
        root_us = timed_us(tree.root, 2000)
    figure("canonical encoding of a reading record", f"{encode_us:,.1f} us")
    figure("Merkle root of the compact range (1,000 leaves)", f"{root_us:,.1f} us")
    figure("one signed checkpoint (root, note, Ed25519)", f"{sign_us:,.1f} us")
    base = tmpfs_dir()
    if base is not None:
        with tempfile.TemporaryDirectory(prefix="bench-audit-", dir=base) as tmp:
            measure("a tmpfs, no fsync cost", Path(tmp), steps, rounds)
    else:
        note("no tmpfs found: the CPU-only figures are left out")
    with tempfile.TemporaryDirectory(prefix="bench-audit-", dir=SCRATCH) as tmp:
        measure("this machine's disk, fsync included", Path(tmp), steps, rounds)


if __name__ == "__main__":
    main()
