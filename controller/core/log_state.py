"""The audit log's state, the Go tlog way: what a commit appends, computed without storage.

Given the log's head (its origin, its Merkle tree as a compact range, the hash of its last leaf,
where the last frontier was kept), :func:`append` turns one step's events into the rows to
store, the checkpoints to keep and the new head. Nothing here reads a clock, a file or a key:
the time is given, and so is the function that signs a checkpoint (the writer's key,
controller/audit/log.py). The writer stores what this returns in one transaction.

A leaf is the canonical encoding (controller/core/canonical.py) of ``{"seq", "kind", "time",
"prev", "data"}``: ``seq`` counts from 1, ``prev`` is the hex SHA-256 of the previous leaf (64
zeros for the first). After each ``close`` or ``void`` the tree's checkpoint is signed and kept
(a round's checkpoint, also the anchor). The running checkpoint, signed at every commit, signs
the whole log; every ``frontier_every`` records (or at the first commit of a log that keeps no
frontier) it is kept with the tree's frontier, from which a start rebuilds the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controller.core import canonical
from controller.core.merkle import CompactRange
from controller.core.note import Checkpoint, checkpoint_note
from controller.core.records import RecordKind, StoredRecord, record_hash
from controller.errors import AuditLogError, EncodingError

GENESIS_PREV = "0" * 64
CHECKPOINT_AFTER: frozenset[RecordKind] = frozenset({RecordKind.CLOSE, RecordKind.VOID})

Sign = Callable[[Checkpoint], bytes]


@dataclass(frozen=True)
class LogHead:
    """The log as committed: its origin, its tree (``size`` leaves, as the compact range's
    ``hashes``), the hash of its last leaf (``prev`` of the next), and the size of the last
    checkpoint kept with its frontier (None: none is kept yet, one is with the next append)."""

    origin: str
    size: int = 0
    hashes: tuple[bytes, ...] = ()
    prev: str = GENESIS_PREV
    frontier_size: int | None = 0

    @classmethod
    def of_tree(
        cls, origin: str, tree: CompactRange, prev: str, frontier_size: int | None
    ) -> LogHead:
        return cls(origin, tree.size, tuple(tree.hashes), prev, frontier_size)

    def tree(self) -> CompactRange:
        """A tree of its own (appending to it leaves the head as it is)."""
        return CompactRange(self.size, list(self.hashes))

    def checkpoint(self, tree: CompactRange | None = None) -> Checkpoint:
        """The checkpoint of ``tree`` (the head's own by default) under this log's origin."""
        tree = self.tree() if tree is None else tree
        return Checkpoint(self.origin, tree.size, tree.root())


@dataclass(frozen=True)
class KeptCheckpoint:
    """A signed checkpoint to keep: its size, its note, and the tree's frontier at it (None for
    a round's checkpoint kept without one)."""

    size: int
    note: str
    frontier: bytes | None = None


@dataclass(frozen=True)
class Appended:
    """What one commit stores: its ``rows``, the ``checkpoints`` to keep, the running
    checkpoint (``root``, ``signature`` and its ``note``), the anchor to write (the last round
    checkpoint's note and tree, if a round closed) and the log's new ``head``."""

    rows: tuple[StoredRecord, ...]
    checkpoints: tuple[KeptCheckpoint, ...]
    root: bytes
    signature: bytes
    note: str
    anchor: tuple[str, tuple[bytes, ...]] | None
    head: LogHead

    @property
    def frontier_kept(self) -> bool:
        return bool(self.checkpoints) and self.checkpoints[-1].frontier is not None


class Prepared(tuple[RecordKind, Mapping[str, object]]):
    """A record checked against its kind's schema, its data encoded, before its commit: the
    records of a step decided ahead (the result decided at the first of the agreeing readings,
    controller/app/committer.py), whose commit then only stamps, chains and signs them. It
    unpacks as ``(kind, data)``, as any entry does; ``data_text`` is the canonical encoding of
    ``data``, which must not change after :func:`prepare` (a step's actions never do)."""

    data_text: bytes

    def __new__(
        cls, kind: RecordKind, data: Mapping[str, object], data_text: bytes, key: object = None
    ) -> Prepared:
        if key is not _ONLY_PREPARE:  # no way past the schema check but prepare's
            raise TypeError("a Prepared record is made by log_state.prepare")
        prepared = super().__new__(cls, (kind, data))
        prepared.data_text = data_text
        return prepared


_ONLY_PREPARE = object()


Entry = tuple[RecordKind, Mapping[str, object]]  # or a Prepared one


def prepare(kind: RecordKind | str, data: Mapping[str, object]) -> Prepared:
    """``data`` checked against its kind's schema and encoded, as :func:`append` does for an
    entry that is not prepared (:class:`RecordShapeError` or :class:`AuditLogError` if not)."""
    # loaded with the first record written, not by every command that reads the log
    from controller.core import record_schema  # noqa: PLC0415

    kind = RecordKind(kind)
    record_schema.check(kind, data)
    return Prepared(kind, data, _data_text(kind, data), _ONLY_PREPARE)


def _data_text(kind: RecordKind, data: Mapping[str, object]) -> bytes:
    try:
        return canonical.encode(dict(data))
    except EncodingError as exc:
        raise AuditLogError(f"audit log: a {kind} record cannot be encoded: {exc}") from exc


def leaf_of(seq: int, kind: RecordKind, time: str, prev: str, data_text: bytes) -> bytes:
    """The leaf of a record whose data is encoded already (``data_text``): the canonical
    encoding of ``{"seq", "kind", "time", "prev", "data"}``, its members in the order of their
    keys' code points (data, kind, prev, seq, time), each written as canonical writes it."""
    if not -canonical.MAX_SAFE_INTEGER <= seq <= canonical.MAX_SAFE_INTEGER:
        raise AuditLogError(f"audit log: sequence number {seq} cannot be encoded")
    try:
        names = canonical.encode(str(kind)), canonical.encode(prev), canonical.encode(time)
    except EncodingError as exc:
        raise AuditLogError(f"audit log: a {kind} record cannot be encoded: {exc}") from exc
    return b"".join(
        (
            b'{"data":',
            data_text,
            b',"kind":',
            names[0],
            b',"prev":',
            names[1],
            b',"seq":',
            b"%d" % seq,
            b',"time":',
            names[2],
            b"}",
        )
    )


def append(
    head: LogHead,
    entries: Sequence[Entry],
    *,
    time: str,
    sign: Sign,
    frontier_every: int,
) -> Appended:
    """The records of one step appended to the log at ``head``, all stamped ``time``: their
    rows, the round checkpoints of the ``close`` and ``void`` among them, the running
    checkpoint (signed once: that of a round's close when it ends the commit) and the head
    after them. ``sign`` signs a checkpoint with the log's key."""
    if not entries:
        raise ValueError("a commit records at least one event")
    tree, prev = head.tree(), head.prev
    rows: list[StoredRecord] = []
    kept: list[KeptCheckpoint] = []
    anchor: tuple[str, tuple[bytes, ...]] | None = None
    signature = b""
    for entry in entries:
        # Every record is written through its kind's schema, whoever made it (the core's
        # handlers, the RNG, commissioning, the appliance's own), here or ahead (prepare): the
        # log is the one way in.
        prepared = entry if type(entry) is Prepared else prepare(*entry)
        kind = prepared[0]
        seq = tree.size + 1
        encoded = leaf_of(seq, kind, time, prev, prepared.data_text)
        tree.append(encoded)
        prev = record_hash(encoded)
        rows.append(StoredRecord(seq, str(kind), encoded))
        if kind in CHECKPOINT_AFTER:
            closed = head.checkpoint(tree)
            signature = sign(closed)
            kept.append(KeptCheckpoint(seq, checkpoint_note(closed, head.origin, signature)))
            anchor = (kept[-1].note, tuple(tree.hashes))
    running = head.checkpoint(tree)
    if not kept or kept[-1].size != tree.size:
        signature = sign(running)
    note = checkpoint_note(running, head.origin, signature)
    frontier_size = head.frontier_size
    if frontier_size is None or tree.size - frontier_size >= frontier_every:
        if kept and kept[-1].size == tree.size:
            kept.pop()
        kept.append(KeptCheckpoint(tree.size, note, tree.to_bytes()))
        frontier_size = tree.size
    new_head = LogHead.of_tree(head.origin, tree, prev, frontier_size)
    return Appended(tuple(rows), tuple(kept), running.root_hash, signature, note, anchor, new_head)


def start(origin: str, key: str, *, time: str, sign: Sign) -> Appended:
    """A new log's first record, ``log_created``, naming its origin and verifier ``key``; its
    running checkpoint signs it, and no frontier is kept (a start reads its one leaf)."""
    created = {"origin": origin, "key": key}
    return append(
        LogHead(origin), [(RecordKind.LOG_CREATED, created)], time=time, sign=sign, frontier_every=2
    )
