"""verify-log on every core: a long log split into runs of records checked side by side.

Each worker process takes a run of consecutive records and does everything that needs only
those records: it reads each leaf once, decodes it (canonical form, fields, sequence number),
checks the hash chain inside the run, hashes the Merkle leaf, verifies the signature of every
checkpoint signed in the run, and checks what each record says (the key of ``log_created``,
each result recomputed from its dice with the paytables in force). It hands back the leaf
hashes, the opened checkpoints, the records whose order matters (bets closed, results,
closes, voids, RNG records) and its first ``prev`` and last hash.

The parent joins the runs in order: the chain across each boundary, the Merkle tree grown by
every leaf hash and compared with every checkpoint's root, the round's shape and the RNG
replay over the records handed back, the consistency proof against a checkpoint kept
elsewhere, and the latest checkpoint, through the same :class:`LogVerifier` the sequential
path uses. The paytables in force at the start of a run come from the log's ``config_loaded``
records, read by the parent first; their leaves are checked against the hashes the workers
computed.

Anything a run finds wrong (or any failure of a worker) sends the whole log through the
sequential verifier, on the same snapshot: it names the record exactly as it always has, with
its look-ahead, so a report of tampering never depends on how the log was split.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.audit.checks import RNG_KINDS, check_content, decode_entry, open_signed
from controller.audit.log import GENESIS_PREV, connect_read_only, read_records
from controller.core import canonical
from controller.core.merkle import HASH_SIZE, leaf_hash
from controller.core.note import Checkpoint, Verifier
from controller.core.record_data import paytables_from_record
from controller.core.records import RecordKind
from controller.core.wagers import Paytable

if TYPE_CHECKING:
    from controller.audit.verify import LogVerifier, VerifyReport

RUN_RECORDS = 25_000  # records per unit of work: large enough to amortise, small to balance
MIN_RECORDS = 2 * RUN_RECORDS  # below this one process is as quick
_SHAPE_KINDS = frozenset(
    {RecordKind.NO_MORE_BETS, RecordKind.RESULT, RecordKind.CLOSE, RecordKind.VOID}
) | frozenset(RNG_KINDS)


class _Split(Exception):
    """A run or a boundary is not as it should be: verify sequentially to name the record."""


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class _Shared:
    """What every worker needs, given once when it starts."""

    path: Path
    verifier: Verifier
    configs: tuple[tuple[int, bytes], ...]  # (seq, leaf) of each config_loaded, in order


@dataclass(slots=True)
class _Run:
    """What one worker found in records ``start``..``stop``."""

    start: int
    stop: int
    first_prev: str = ""
    last_hash: str = ""
    hashed_leaves: bytes = b""
    checkpoints: dict[int, Checkpoint] = field(default_factory=dict)
    events: list[tuple[int, str, Mapping[str, Any]]] = field(default_factory=list)
    results: int = 0


@dataclass(slots=True)
class _WorkerState:
    """A worker's own: what it was given at start and its connection to the log."""

    shared: _Shared | None = None
    db: sqlite3.Connection | None = None


_WORKER = _WorkerState()


def verify_in_parallel(
    db: sqlite3.Connection,
    path: Path,
    log: LogVerifier,
    size: int,
    *,
    workers: int,
) -> VerifyReport | None:
    """Verify records 1..``size`` of the log at ``path`` (``db`` holds the snapshot) with
    ``workers`` processes, feeding ``log``. ``None`` when a run found something wrong (the
    caller then verifies sequentially, on a fresh ``LogVerifier``). Records 1..``size`` never
    change once committed, so the workers' own connections read what ``db`` sees."""
    configs = tuple(
        (int(seq), bytes(leaf))
        for seq, leaf in db.execute(
            "SELECT seq, leaf FROM records WHERE kind = ? AND seq <= ? ORDER BY seq",
            (str(RecordKind.CONFIG_LOADED), size),
        )
    )
    config_leaves = {seq: leaf_hash(leaf) for seq, leaf in configs}
    notes = log.checkpoints
    tasks = [
        (a, b, {seq: notes[seq] for seq in range(a, b + 1) if seq in notes})
        for a, b in ((a, min(a + RUN_RECORDS - 1, size)) for a in range(1, size + 1, RUN_RECORDS))
    ]
    # Workers forked from a clean server process, not from this one: SQLite's state must not
    # cross a fork, and each worker gets only the notes of its own runs, from this snapshot.
    # A worker that dies breaks the pool (an exception here), it never hangs it.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    pool = ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=_start_worker,
        initargs=(str(path), str(log.verifier), configs),
    )
    try:
        prev, results = GENESIS_PREV, 0
        for run in _in_order(pool.map(_check_run, tasks)):
            if run.first_prev != prev:
                return None
            for offset in range(run.stop - run.start + 1):
                seq = run.start + offset
                hashed = run.hashed_leaves[offset * HASH_SIZE : (offset + 1) * HASH_SIZE]
                if seq in config_leaves and config_leaves[seq] != hashed:
                    return None  # the config read first is not the one in the chain
                log.grow(seq, hashed, run.checkpoints.get(seq))
            for seq, kind, data in run.events:
                log.shape(seq, kind, data)
            prev, results = run.last_hash, results + run.results
    except Exception:  # noqa: BLE001 - whatever went wrong, the sequential path names it
        return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # the runs not started are dropped
    log.resume_at(size, prev, results)
    return log.finish()


def _in_order(runs: Iterator[_Run | None]) -> Iterator[_Run]:
    for run in runs:
        if run is None:
            raise _Split
        yield run


def _start_worker(path: str, verifier: str, configs: tuple[tuple[int, bytes], ...]) -> None:
    _WORKER.shared = _Shared(Path(path), Verifier.parse(verifier), configs)


def _check_run(task: tuple[int, int, dict[int, str]]) -> _Run | None:
    """In a worker: records ``start``..``stop``; ``None`` if anything is wrong in them."""
    try:
        return _checked_run(*task)
    except Exception:  # noqa: BLE001 - the sequential path names what is wrong
        return None


def _checked_run(start: int, stop: int, notes: dict[int, str]) -> _Run:
    shared = _WORKER.shared
    assert shared is not None, "a worker runs only inside verify_in_parallel"
    if _WORKER.db is None:
        _WORKER.db = connect_read_only(shared.path)
    db = _WORKER.db
    run = _Run(start, stop)
    paytables = _paytables_before(shared.configs, start)
    hashes = bytearray()
    expected = start
    for row in read_records(db, start=start, stop=stop):
        if row.seq != expected:
            raise _Split
        expected += 1
        entry = decode_entry(row)
        if row.seq == start:
            run.first_prev = entry.prev
        elif entry.prev != run.last_hash:
            raise _Split
        run.last_hash = entry.hash
        hashes += leaf_hash(entry.leaf)
        note = notes.get(row.seq)
        if note is not None:
            run.checkpoints[row.seq] = open_signed(shared.verifier, row.seq, note, "checkpoint")
        paytables, result = check_content(shared.verifier, paytables, entry)
        run.results += result
        if entry.kind in RNG_KINDS:
            run.events.append((entry.seq, entry.kind, entry.data))
        elif entry.kind in _SHAPE_KINDS or entry.seq == 1:
            marks = {"round": entry.data.get("round"), "session": entry.data.get("session")}
            run.events.append((entry.seq, entry.kind, marks))
    if expected != stop + 1:
        raise _Split
    run.hashed_leaves = bytes(hashes)
    return run


def _paytables_before(
    configs: tuple[tuple[int, bytes], ...], start: int
) -> tuple[Paytable, ...] | None:
    """The paytables of the last ``config_loaded`` before record ``start``."""
    last = None
    for seq, leaf in configs:
        if seq >= start:
            break
        last = leaf
    if last is None:
        return None
    data = canonical.decode(last).get("data", {})
    if not isinstance(data, dict) or "paytables" not in data:
        raise _Split
    return paytables_from_record(data["paytables"])
