"""verify-log on every core: a long log split into runs of records checked side by side.

Each worker process takes a run of consecutive records and does everything that needs only
those records, reading them (and the checkpoints signed in them) from the database itself: it
decodes each leaf once (canonical form, fields, sequence number), checks the hash chain inside
the run, hashes the Merkle leaves and builds every perfect subtree above them, verifies the
signature of every checkpoint signed in the run, and checks what each record says (the key of
``log_created``, each result and each correction's result recomputed from its dice with the
paytables in force, a void's reason, every employee id) and the shape of the rounds from the
run's first ``no_more_bets`` or ``void`` on. It hands back little: its first ``prev`` and last
hash, the roots of the few aligned subtrees that make up the run, for each checkpoint the root
it signs and the root of the run's leaves below it, the records before the run's first round
boundary whose shape depends on the records before the run (the fields the shape reads), its
RNG records, the rounds' shape at its end, and the records the running totals count (the fields
they read: totals_check.py ``counted_data``), which the parent folds (it folds alone: the totals
at a row depend on every record before it).

A run holds ``RUN_RECORDS`` records, a power of two, and starts after a multiple of it: the
root of the tree at a checkpoint inside the run is then the fold of the tree's compact range at
the run's start (the parent's) over the root the worker computed for the run's leaves up to the
checkpoint (RFC 6962: the split of a size into powers of two is its binary form). Runs of other
sizes (the tests split logs everywhere) hand back the subtrees instead, which the parent joins.

The parent joins the runs in order: the chain across each boundary, the Merkle tree grown by
each run's subtrees, every checkpoint's root, the round's shape and the RNG replay over the
records handed back, the seam of the rounds' shape (``RoundShape.then``: the first bets closed
in a run come after the last before it, so that no round's bets close twice and no round is
decided twice across a boundary), the consistency proof against a checkpoint kept elsewhere,
and the latest checkpoint, through the same :class:`LogVerifier` the sequential path uses.
The paytables in force at the start of a run come from the log's ``config_loaded`` records,
which the parent finds while the first run is checked; each worker hands back the ones in its
run, which must be those.

Anything a run finds wrong (or any failure of a worker) sends the whole log through the
sequential verifier, on the same snapshot: it names the record exactly as it always has, with
its look-ahead, so a report of tampering never depends on how the log was split.
"""

from __future__ import annotations

import hashlib
import itertools
import multiprocessing
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from controller.audit.checks import (
    CONTENT_KINDS,
    RNG_KINDS,
    ROUND_KINDS,
    ContentCheck,
    Entry,
    RoundShape,
    decode_fields,
    open_signed,
    shape_data,
)
from controller.audit.store import BY_KIND, connect_read_only
from controller.audit.totals_check import KINDS as TOTALS_KINDS
from controller.audit.totals_check import counted_data
from controller.core import canonical
from controller.core.log_state import GENESIS_PREV
from controller.core.merkle import CompactRange, Subtrees
from controller.core.note import Checkpoint, Verifier
from controller.core.record_data import paytables_from_record
from controller.core.records import RecordKind
from controller.core.wagers import Paytable

Report_co = TypeVar("Report_co", covariant=True)


class JoinedVerifier(Protocol[Report_co]):
    """What the parent process joins the workers' runs into: the streaming verifier
    (controller/audit/verify.py's ``LogVerifier``), whose ``finish`` gives the report."""

    verifier: Verifier

    @property
    def tree(self) -> CompactRange: ...

    @property
    def rounds(self) -> RoundShape: ...

    def proof_boundaries(self) -> list[int]: ...

    def checkpoints_signed(self, seq: int, origin: str, count: int) -> None: ...

    def grow_by_subtrees(self, subtrees: Sequence[tuple[int, bytes]]) -> None: ...

    def shape(self, seq: int, kind: str, data: Mapping[str, Any]) -> None: ...

    def adopt_rounds(self, rounds: RoundShape) -> None: ...

    def resume_at(self, size: int, last_hash: str, results: int) -> None: ...

    def finish(self) -> Report_co: ...


RUN_RECORDS = 1 << 15  # records per unit of work: a power of two (see above), ~1 s of work
MIN_RECORDS = 2 * RUN_RECORDS  # below this one process is as quick
MAX_CONFIGS_KEPT = 8  # paytables (and results computed with them) a worker keeps between runs
_SHAPE_KINDS = ROUND_KINDS | RNG_KINDS
_STARTS_A_ROUND = frozenset({RecordKind.NO_MORE_BETS, RecordKind.VOID})
_RECORDS = "SELECT seq, kind, leaf FROM records WHERE seq BETWEEN ? AND ? ORDER BY seq"
_NOTES = "SELECT size, note FROM checkpoints WHERE size BETWEEN ? AND ?"
_CONFIGS = "SELECT seq, leaf FROM records WHERE kind = ? AND seq <= ? ORDER BY seq"


class _Split(Exception):
    """A run or a boundary is not as it should be: verify sequentially to name the record."""


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class _Task:
    """Records ``start``..``stop``, checked from the ``config_loaded`` record (seq, leaf) in
    force before ``start``; ``cuts``: leaf indices in the run that no subtree handed back may
    cross (the ranges of a consistency proof)."""

    start: int
    stop: int
    config: tuple[int, bytes] | None
    cuts: tuple[int, ...] = ()


@dataclass(slots=True)
class _Run:
    """What one worker found in records ``start``..``stop``."""

    start: int
    stop: int
    first_prev: str = ""
    last_hash: str = ""
    subtrees: list[tuple[int, bytes]] = field(default_factory=list)  # (level, root) in order
    # (signed root, root of the run's leaves below the checkpoint): the run is aligned
    roots: list[tuple[bytes, bytes]] = field(default_factory=list)
    # (seq, signed root, the run's leaves below the checkpoint as subtrees): it is not
    spread_roots: list[tuple[int, bytes, list[tuple[int, bytes]]]] = field(default_factory=list)
    origin: tuple[int, str] | None = None  # (seq, origin) of the run's first checkpoint
    configs: list[tuple[int, bytes]] = field(default_factory=list)  # config_loaded (seq, leaf)
    events: list[tuple[int, str, Any]] = field(default_factory=list)  # before a round starts
    rounds: RoundShape | None = None  # the round's shape at the end, once a round started
    rng: list[tuple[int, str, Any, tuple[object, int] | None]] = field(default_factory=list)
    results: int = 0
    indexed: list[tuple[int, str]] = field(default_factory=list)  # store.BY_KIND's (seq, kind)
    # the records the running totals count (seq, kind, the fields of its data they read):
    # totals_check.KINDS, and counted_data
    counted: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)


@dataclass(slots=True)
class _WorkerState:
    """A worker's own: what it was given at start and its connection to the log."""

    path: Path | None = None
    verifier: Verifier | None = None
    db: sqlite3.Connection | None = None
    shapes: canonical.Shapes = field(default_factory=canonical.Shapes)
    # the paytables of a config_loaded record (seq, leaf) and the results computed with them
    paytables: dict[
        tuple[int, bytes] | None,
        tuple[tuple[Paytable, ...] | None, dict[tuple[object, ...], dict[str, Any]]],
    ] = field(default_factory=dict)


_WORKER = _WorkerState()


def verify_in_parallel(
    db: sqlite3.Connection,
    path: Path,
    log: JoinedVerifier[Report_co],
    size: int,
    *,
    workers: int,
    index: Callable[[int, str], None] | None = None,
    totals: Callable[[int, str, Mapping[str, Any]], None] | None = None,
) -> Report_co | None:
    """Verify records 1..``size`` of the log at ``path`` (``db`` holds the snapshot) with
    ``workers`` processes, feeding ``log`` (made without the checkpoints: the workers read
    them). ``None`` when a run found something wrong (the caller then verifies sequentially,
    on a fresh ``LogVerifier``). Records 1..``size`` and their checkpoints never change once
    committed, so the workers' own connections read what ``db`` sees. ``index`` is handed
    each record of store.BY_KIND's kinds (seq, kind), in order (audit/index_check.py);
    ``totals`` each record of the kinds the running totals count (seq, kind, data), in order
    (audit/totals_check.py)."""
    (signed_beyond,) = db.execute("SELECT max(size) FROM checkpoints").fetchone()
    if signed_beyond is not None and signed_beyond > size:
        return None  # a checkpoint of records the log does not hold: named sequentially
    bounds = [(a, min(a + RUN_RECORDS - 1, size)) for a in range(1, size + 1, RUN_RECORDS)]
    edges = log.proof_boundaries()

    def task(start: int, stop: int, config: tuple[int, bytes] | None) -> _Task:
        return _Task(start, stop, config, tuple(e for e in edges if start - 1 < e < stop))

    # The config_loaded records are found by a scan of the whole table (their kind has no
    # index): in a thread, on a connection of its own, while the first run is checked (it
    # needs none from before it).
    finder = ThreadPoolExecutor(1)
    found = finder.submit(_find_configs, path, size)
    # Workers forked from a clean server process, not from this one: SQLite's state must not
    # cross a fork. A worker that dies breaks the pool (an exception here), it never hangs it.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    pool = ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=_start_worker,
        initargs=(str(path), str(log.verifier)),
    )
    try:
        runs: list[Future[_Run | None]] = [pool.submit(_check_run, task(*bounds[0], None))]
        configs = found.result()
        for start, stop in bounds[1:]:
            before = [config for config in configs if config[0] < start]
            runs.append(pool.submit(_check_run, task(start, stop, before[-1] if before else None)))
        prev, results, seen = GENESIS_PREV, 0, []
        for future in runs:
            run = future.result()
            if run is None or run.first_prev != prev:
                return None
            _join(log, run)
            _hand_back(run, index, totals)
            seen += run.configs
            prev, results = run.last_hash, results + run.results
        if seen != configs:
            return None  # the config_loaded records read first are not those in the chain
    except Exception:  # noqa: BLE001 - whatever went wrong, the sequential path names it
        return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # the runs not started are dropped
        finder.shutdown(wait=True)
    log.resume_at(size, prev, results)
    return log.finish()


def _hand_back(
    run: _Run,
    index: Callable[[int, str], None] | None,
    totals: Callable[[int, str, Mapping[str, Any]], None] | None,
) -> None:
    """A run's records of the indexed kinds to ``index``, and of the counted kinds to
    ``totals``, in order (``verify_in_parallel``)."""
    if index is not None:
        for seq, kind in run.indexed:
            index(seq, kind)
    if totals is not None:
        for seq, kind, data in run.counted:
            totals(seq, kind, data)


def _find_configs(path: Path, size: int) -> list[tuple[int, bytes]]:
    db = connect_read_only(path)
    try:
        rows = db.execute(_CONFIGS, (str(RecordKind.CONFIG_LOADED), size)).fetchall()
    finally:
        db.close()
    return [(int(seq), bytes(leaf)) for seq, leaf in rows]


def _join(log: JoinedVerifier[object], run: _Run) -> None:
    """The parent's part of a run: its checkpoints' roots over the tree before it, the tree
    grown by it, the order-dependent checks of the records it handed back."""
    tree = log.tree
    if tree.size != run.start - 1:
        raise _Split
    sha256 = hashlib.sha256
    lefts = [b"\x01" + left for left in reversed(tree.hashes)]
    for signed, local_root in run.roots:
        node = local_root
        for left in lefts:
            node = sha256(left + node).digest()
        if node != signed:
            raise _Split
    for _seq, signed, subtrees in run.spread_roots:
        joined = CompactRange(tree.size, list(tree.hashes))
        for level, subtree in subtrees:
            joined.append_subtree(level, subtree)
        if joined.root() != signed:
            raise _Split
    if run.origin is not None:
        seq, origin = run.origin
        log.checkpoints_signed(seq, origin, len(run.roots) + len(run.spread_roots))
    log.grow_by_subtrees(run.subtrees)
    for seq, kind, data in run.events:
        log.shape(seq, kind, data)
    if run.rounds is not None:
        before = log.rounds
        for seq, kind, data, bets_closed in run.rng:
            log.adopt_rounds(RoundShape(bets_closed))  # as it was at that record
            log.shape(seq, kind, data)
        log.adopt_rounds(before.then(run.rounds))  # the seam: the rounds' numbers only grow


def _start_worker(path: str, verifier: str) -> None:
    _WORKER.path = Path(path)
    _WORKER.verifier = Verifier.parse(verifier)


def _check_run(task: _Task) -> _Run | None:
    """In a worker: records ``start``..``stop``; ``None`` if anything is wrong in them."""
    try:
        return _checked_run(task)
    except Exception:  # noqa: BLE001 - the sequential path names what is wrong
        return None


def _checked_run(task: _Task) -> _Run:
    """Records ``start``..``stop`` read, chained, hashed and checked; :class:`_Split` when
    anything is not as it should be."""
    verifier = _WORKER.verifier
    assert verifier is not None, "a worker runs only inside verify_in_parallel"
    db, shapes = _worker_db(), _WORKER.shapes
    start, stop = task.start, task.stop
    run = _Run(start, stop)
    notes = _notes(db, start, stop)
    content = _content_check(task.config, verifier)
    opened: list[tuple[int, Checkpoint]] = []
    hashed: list[bytes] = []
    sha256 = hashlib.sha256
    expected, last = start, None
    for seq, kind, leaf in db.execute(_RECORDS, (start, stop)):
        if seq != expected or type(kind) is not str or type(leaf) is not bytes:
            raise _Split
        expected += 1
        entry = decode_fields(seq, kind, leaf, shapes)
        if last is None:
            run.first_prev = entry.prev
        elif entry.prev != last:
            raise _Split
        last = entry.hash
        hashed.append(sha256(b"\x00" + leaf).digest())
        note = notes.get(seq)
        if note is not None:
            opened.append((seq, open_signed(verifier, seq, note, "checkpoint")))
        if kind in _NOTED or seq == 1:
            _note(run, content, entry, leaf)
    if last is None or expected != stop + 1:
        raise _Split
    run.last_hash = last
    _subtrees(run, Subtrees(start - 1, hashed), opened, task.cuts)
    return run


# the kinds a run hands more of back
_NOTED = CONTENT_KINDS | _SHAPE_KINDS | BY_KIND | TOTALS_KINDS


def _note(run: _Run, content: ContentCheck, entry: Entry, leaf: bytes) -> None:
    """What a run hands back of a record beyond its hash: its results checked, the
    ``config_loaded`` records, the rounds' shape, the records of store.BY_KIND's kinds."""
    seq, kind = entry.seq, entry.kind
    if kind in CONTENT_KINDS:
        run.results += content.check(entry)
        if kind == RecordKind.CONFIG_LOADED:
            run.configs.append((seq, leaf))
    if kind in _SHAPE_KINDS or seq == 1:
        _shape(run, seq, kind, entry.data)
    if kind in BY_KIND:
        run.indexed.append((seq, kind))
    if kind in TOTALS_KINDS:
        run.counted.append((seq, kind, counted_data(kind, entry.data)))


def _worker_db() -> sqlite3.Connection:
    """The worker's own connection to the log, opened at its first run."""
    if _WORKER.db is None:
        assert _WORKER.path is not None, "a worker runs only inside verify_in_parallel"
        _WORKER.db = connect_read_only(_WORKER.path)
    return _WORKER.db


def _notes(db: sqlite3.Connection, start: int, stop: int) -> dict[int, str]:
    """The checkpoints signed at records ``start``..``stop``, by size."""
    notes = {}
    for seq, note in db.execute(_NOTES, (start, stop)):
        if type(note) is not str:
            raise _Split  # the sequential path reads the checkpoints and names it
        notes[seq] = note
    return notes


def _content_check(config: tuple[int, bytes] | None, verifier: Verifier) -> ContentCheck:
    """The results' check under the paytables of ``config``, with what the worker already
    computed under them (a few configurations are kept between runs)."""
    known = _WORKER.paytables.get(config)
    if known is None:
        if len(_WORKER.paytables) >= MAX_CONFIGS_KEPT:
            _WORKER.paytables.clear()
        known = _WORKER.paytables[config] = (_paytables_of(config), {})
    return ContentCheck(verifier, known[0], expected=known[1])


def _shape(run: _Run, seq: int, kind: str, data: Any) -> None:
    """A record that bears on the rounds' shape: before the run's first round starts it is
    handed back to the parent (which knows the round it falls in), from then on it is fed
    to the run's own shape (an RNG record with the bets closed state it was recorded in)."""
    rounds = run.rounds
    if rounds is not None and kind in RNG_KINDS:
        run.rng.append((seq, kind, data, rounds.bets_closed))
    elif rounds is not None or (kind in _STARTS_A_ROUND and seq != 1):
        if rounds is None:
            rounds = run.rounds = RoundShape()
        rounds.feed(seq, kind, data)
    elif kind in RNG_KINDS:
        run.events.append((seq, kind, data))
    else:
        run.events.append((seq, kind, shape_data(data)))


def _subtrees(
    run: _Run, tree: Subtrees, opened: list[tuple[int, Checkpoint]], cuts: tuple[int, ...]
) -> None:
    """The run's leaves as aligned subtrees, and each checkpoint's part of its root."""
    base = run.start - 1
    edges = [base, *cuts, run.stop]
    run.subtrees = [node for a, b in itertools.pairwise(edges) for node in tree.nodes(a, b)]
    aligned = base & -base if base else run.stop  # a fold over the parent's tree is its root
    origin = None
    for seq, checkpoint in opened:
        if checkpoint.size != seq:
            raise _Split
        if origin is None:
            origin = checkpoint.origin
            run.origin = (seq, origin)
        elif checkpoint.origin != origin:
            raise _Split
        if seq - base <= aligned:
            run.roots.append((checkpoint.root_hash, tree.local_root(seq)))
        else:
            run.spread_roots.append((seq, checkpoint.root_hash, tree.nodes(base, seq)))


def _paytables_of(config: tuple[int, bytes] | None) -> tuple[Paytable, ...] | None:
    """The paytables of the ``config_loaded`` record (seq, leaf) in force, if any."""
    if config is None:
        return None
    data = canonical.decode(config[1]).get("data", {})
    if not isinstance(data, dict) or "paytables" not in data:
        raise _Split
    return paytables_from_record(data["paytables"])
