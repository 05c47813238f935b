"""What the witness decides, table by table, from what arrives (no network here: the service
hands it each message, and publishes and acknowledges only after the store committed).

For each table whose key it was given it keeps the records in order and checks each one as
``verify-log --export`` checks a line (controller/audit/verify.py ``check_export_line``: an
export line and nothing else, its leaf canonical, every field what the leaf says), that it
chains (``prev`` is the hash of the record before), what it says where the verifier checks it
(the key of ``log_created``, each result recomputed from its dice and the paytables in force),
and any checkpoint the line carries (signed by the table's key, the root of the records up to
it). The Merkle tree grows with each leaf (a compact range), and the root after each record is
kept, so that a checkpoint of any size held is compared with the tree of the witness's own
leaves at that size: the consistency of a new checkpoint with the last one accepted is
recomputed from the leaves, never taken from the table.

A checkpoint (``paigow/v1/<table>/checkpoint``) signed by the table's key for its origin:

- smaller than the one cosigned: ROLLBACK (the table's log went back: an older copy of
  ``audit.db``, or a cut); the witness stops cosigning the table;
- of the size cosigned but another root, or of a size held whose root is not the root of the
  held records: FORK; it stops cosigning the table;
- of a size held, larger than the one cosigned, its root the held records' root: cosigned;
- of a size not yet held: kept (the latest one) until the records come; a gap not filled within
  ``gap_s``: GAP.

A record at a seq already held is a duplicate when it is the same record (dropped, as the
protocol's at-least-once delivery says). Another record there is a ROLLBACK when a cosigned
checkpoint covered that seq and the new record follows the held record before it (the table's
log went back to that point of the history the witness cosigned and went on: an older copy of
``audit.db``, the card swapped for an older image), else a FORK; either stops the cosigning.
A record that is not an export line, breaks the chain or says something the verifier refuses:
BAD_RECORD (dropped). A checkpoint whose signature does not verify with the table's key:
BAD_SIGNATURE. Nothing heard from a table for ``silence_s``: SILENCE. A table without a key:
UNKNOWN_TABLE, once; its messages are dropped.

A table the witness stopped cosigning stays stopped, across restarts, until an operator resets
it (``paigow-controller witness --reset-table T``): the witness then forgets its records and
takes the table's log as new, from record 1. The alerts stay recorded.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.audit.checks import ContentCheck, Entry, decode_entry
from controller.audit.log import GENESIS_PREV, origin_for
from controller.audit.verify import check_export_line
from controller.core import canonical
from controller.core.merkle import CompactRange, leaf_hash
from controller.core.note import (
    Checkpoint,
    NoteError,
    Signer,
    Verifier,
    cosign_note,
    open_checkpoint,
)
from controller.core.record_data import RecordDataError
from controller.core.records import RecordKind, StoredRecord
from controller.errors import LogIntegrityError
from controller.fleet.protocol import (
    ALERTS_TOPIC,
    MAX_RECORD_BYTES,
    Alert,
    AlertKind,
    Channel,
    ProtocolError,
    Status,
    decode_json,
    decode_note,
    parse_topic,
    topic,
)
from controller.witness.ports import FloorSink, NoFloor, Store, TableHead

log = logging.getLogger("paigow.witness")

DEFAULT_GAP_S = 120.0
DEFAULT_SILENCE_S = 900.0
MAX_PENDING_RECORDS = 4096  # records held in memory past a gap, per table
ALERT_REPEAT_S = 60.0  # the same alert for the same table at most this often (they are counted)
MAX_UNKNOWN_TABLES = 1000

Publish = Callable[[str, bytes, bool], None]  # topic, payload, retained


def rfc3339(moment: float) -> str:
    return (
        datetime.fromtimestamp(moment, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass
class _Pending:
    entry: Entry
    note: str | None
    line: dict[str, Any]


@dataclass
class TableState:
    """One table, in memory: its head (what the store holds), its tree, what waits past a
    gap, and its timers."""

    verifier: Verifier
    head: TableHead
    tree: CompactRange
    content: ContentCheck
    last_heard: float
    pending: dict[int, _Pending] = field(default_factory=dict)
    pending_checkpoint: tuple[Checkpoint, str] | None = None
    waiting_since: float | None = None
    gap_alerted: bool = False
    silence_alerted: bool = False
    alerted_at: dict[AlertKind, float] = field(default_factory=dict)


class Witness:
    """Every table's verification. Call :meth:`receive` for each message and :meth:`tick` now
    and then, inside ``store.transaction()``; then :meth:`flush` once the transaction
    committed: it publishes the cosignatures and alerts and tells the floor."""

    def __init__(
        self,
        store: Store,
        keys: dict[str, Verifier],
        cosigner: Signer,
        *,
        clock: Callable[[], float],
        publish: Publish,
        floor: FloorSink | None = None,
        gap_s: float = DEFAULT_GAP_S,
        silence_s: float = DEFAULT_SILENCE_S,
    ) -> None:
        self.store = store
        self.keys = dict(keys)
        self.cosigner = cosigner
        self.clock = clock
        self._publish = publish
        self.floor: FloorSink = NoFloor() if floor is None else floor
        self.gap_s = gap_s
        self.silence_s = silence_s
        self.refused: Counter[str] = Counter()  # what was dropped, by (table/channel: why)
        self._effects: list[Callable[[], None]] = []
        now = clock()
        heads = store.heads()
        self.tables = {t: self._load(t, v, heads.get(t), now) for t, v in self.keys.items()}
        self._unknown = {a.table for a in store.alerts() if a.kind is AlertKind.UNKNOWN_TABLE}

    def _load(
        self, table: str, verifier: Verifier, head: TableHead | None, now: float
    ) -> TableState:
        head = head or TableHead(table, last_hash=GENESIS_PREV)
        tree = CompactRange.from_bytes(head.size, head.tree)
        content = ContentCheck(verifier)
        config = self.store.last_leaf_of_kind(table, str(RecordKind.CONFIG_LOADED))
        if config is not None:  # the paytables in force, for the results to come
            row = StoredRecord(_seq_of(config), str(RecordKind.CONFIG_LOADED), config)
            content.check(decode_entry(row))
        return TableState(verifier, head, tree, content, last_heard=now)

    # --- what the service calls -----------------------------------------------------------

    def receive(self, topic_name: str, payload: bytes) -> None:
        """One message from the broker. Never raises for what a message says (it is refused,
        counted and logged, or it raises an alert); raises only when the store fails."""
        try:
            table, channel = parse_topic(topic_name)
        except ProtocolError as exc:
            self._refuse("-", str(exc))
            return
        state = self.tables.get(table)
        if state is None:
            self._unknown_table(table, channel)
            return
        if channel is Channel.RECORDS:
            self._record(table, state, payload)
        elif channel is Channel.CHECKPOINT:
            self._checkpoint(table, state, payload)
        elif channel is Channel.STATUS:
            self._status(table, state, payload)
        else:  # its own cosignatures, if a broker's ACL lets them come back: not an input
            self._refuse(f"{table}/{channel}", "not a topic the witness reads")

    def tick(self) -> None:
        """The timers: a gap not filled in ``gap_s``, a table silent for ``silence_s``."""
        now = self.clock()
        for table, state in self.tables.items():
            if state.head.halted:
                continue
            if (
                state.waiting_since is not None
                and not state.gap_alerted
                and now - state.waiting_since >= self.gap_s
            ):
                state.gap_alerted = True
                wanted = state.head.size + 1
                waiting = sorted(state.pending)
                cp = state.pending_checkpoint
                what = (
                    f"record {waiting[0]}"
                    if waiting
                    else f"the checkpoint of size {cp[0].size}"
                    if cp
                    else "records"
                )
                self._alert(
                    table,
                    state,
                    AlertKind.GAP,
                    f"records from {wanted} did not come within {self.gap_s:g} s (it holds"
                    f" {state.head.size}; {what} waits for them)",
                    wanted,
                )
            if not state.silence_alerted and now - state.last_heard >= self.silence_s:
                state.silence_alerted = True
                self._alert(
                    table,
                    state,
                    AlertKind.SILENCE,
                    f"nothing from the table since {rfc3339(state.last_heard)}"
                    f" ({self.silence_s:g} s)",
                    state.head.size,
                )

    def flush(self) -> None:
        """After the store committed: publish and tell the floor what the messages decided."""
        effects, self._effects = self._effects, []
        for effect in effects:
            effect()

    def discard(self) -> None:
        """The store did not commit: nothing it decided may be said."""
        self._effects = []

    def republish(self) -> None:
        """Every table's last cosignature again (retained: a broker that lost it, or a witness
        stopped before the broker had it, gets it back)."""
        for table, state in self.tables.items():
            if state.head.cosigned_note:
                self._effects.append(
                    functools.partial(
                        self._publish,
                        topic(table, Channel.COSIGNATURE),
                        state.head.cosigned_note.encode(),
                        True,
                    )
                )

    # --- records ------------------------------------------------------------------------

    def _goes_on_from(self, table: str, seq: int, line: dict[str, object]) -> bool:
        """Whether the record ``line`` at ``seq`` follows the held record ``seq - 1``."""
        if seq == 1:
            return True
        before = self.store.leaf(table, seq - 1)
        return before is not None and line.get("prev") == hashlib.sha256(before).hexdigest()

    def _record(self, table: str, state: TableState, payload: bytes) -> None:
        try:
            line = decode_json(payload, MAX_RECORD_BYTES, "record")
            entry, note = check_export_line(1, line)
        except (ProtocolError, LogIntegrityError) as exc:
            self._bad(table, state, AlertKind.BAD_RECORD, f"a record refused: {exc}", 0)
            return
        if state.head.halted:
            self.refused[f"{table}/records: stopped"] += 1
            return
        seq = entry.seq
        if seq <= state.head.size:
            held = self.store.leaf(table, seq)
            if held == entry.leaf:
                self._heard(state)
                self.refused[f"{table}/records: duplicate"] += 1
                return
            if seq <= state.head.cosigned_size and self._goes_on_from(table, seq, line):
                # the table's log went back to record seq - 1 of the history this witness
                # cosigned, and went on from there: an older copy of its log (a card swapped)
                self._halt(
                    table,
                    state,
                    AlertKind.ROLLBACK,
                    f"record {seq} is not the cosigned record {seq}: the log went back to record"
                    f" {seq - 1} (an older copy) and went on",
                    seq,
                )
                return
            self._halt(
                table,
                state,
                AlertKind.FORK,
                f"record {seq} is not the record {seq} already held (a fork, or the table's log"
                " replaced by another copy)",
                seq,
            )
            return
        self._heard(state)
        if seq > state.head.size + 1:
            if len(state.pending) >= MAX_PENDING_RECORDS and seq not in state.pending:
                self.refused[f"{table}/records: past the gap"] += 1
            else:
                state.pending[seq] = _Pending(entry, note, line)
            self._waiting(state)
            return
        if self._append(table, state, entry, note, line):
            while state.head.size + 1 in state.pending and not state.head.halted:
                nxt = state.pending.pop(state.head.size + 1)
                if not self._append(table, state, nxt.entry, nxt.note, nxt.line):
                    break
            state.pending = {s: p for s, p in state.pending.items() if s > state.head.size}
            cp = state.pending_checkpoint
            if cp is not None and cp[0].size <= state.head.size:
                state.pending_checkpoint = None
                self._decide(table, state, *cp)
            self._waiting(state)

    def _append(
        self, table: str, state: TableState, entry: Entry, note: str | None, line: dict[str, Any]
    ) -> bool:
        head = state.head
        if entry.prev != head.last_hash:
            self._bad(
                table,
                state,
                AlertKind.BAD_RECORD,
                f"record {entry.seq}: prev does not match the hash of record {head.size} held:"
                " it breaks the chain",
                entry.seq,
            )
            return False
        tree = CompactRange(state.tree.size, list(state.tree.hashes))
        tree.append_hash(leaf_hash(entry.leaf))
        root = tree.root()
        if note is not None:
            try:
                carried = open_checkpoint(note, state.verifier)
            except NoteError as exc:
                self._bad(
                    table,
                    state,
                    AlertKind.BAD_SIGNATURE,
                    f"record {entry.seq}: the checkpoint it carries does not verify with the"
                    f" table's key: {exc}",
                    entry.seq,
                )
                return False
            if (
                carried.origin != origin_for(table)
                or carried.size != entry.seq
                or carried.root_hash != root
            ):
                self._bad(
                    table,
                    state,
                    AlertKind.BAD_RECORD,
                    f"record {entry.seq}: the checkpoint it carries does not sign the records"
                    f" 1..{entry.seq} held",
                    entry.seq,
                )
                return False
        try:
            state.content.check(entry)
        except RecordDataError as exc:
            self._bad(table, state, AlertKind.BAD_RECORD, f"record {entry.seq}: {exc}", entry.seq)
            return False
        self.store.put_leaves(table, [(entry.seq, entry.kind, entry.leaf, root)])
        state.tree = tree
        head.size, head.last_hash, head.tree = entry.seq, entry.hash, tree.to_bytes()
        self.store.put_head(head)
        self._effects.append(lambda: self.floor.apply_record(table, line))
        return True

    # --- checkpoints --------------------------------------------------------------------

    def _checkpoint(self, table: str, state: TableState, payload: bytes) -> None:
        try:
            note = decode_note(payload, "checkpoint")
            checkpoint = open_checkpoint(note, state.verifier)
        except (ProtocolError, NoteError) as exc:
            self._bad(
                table,
                state,
                AlertKind.BAD_SIGNATURE,
                f"a checkpoint that does not verify with the table's key: {exc}",
                0,
            )
            return
        if checkpoint.origin != origin_for(table):
            self._bad(
                table,
                state,
                AlertKind.BAD_SIGNATURE,
                f"a checkpoint of {checkpoint.origin!r}, not of {origin_for(table)!r}",
                checkpoint.size,
            )
            return
        self._heard(state)
        if state.head.halted:
            self.refused[f"{table}/checkpoint: stopped"] += 1
            return
        if checkpoint.size > state.head.size and checkpoint.size >= state.head.cosigned_size:
            held = state.pending_checkpoint
            if held is None or held[0].size <= checkpoint.size:
                state.pending_checkpoint = (checkpoint, note)
            self._waiting(state)
            return
        self._decide(table, state, checkpoint, note)

    def _decide(self, table: str, state: TableState, checkpoint: Checkpoint, note: str) -> None:
        """A verified checkpoint of a size held (or smaller than the one cosigned)."""
        head, size = state.head, checkpoint.size
        if size < head.cosigned_size:
            held = self.store.root(table, size) if size else None
            how = (
                "the log cut back to an earlier state (an older copy)"
                if held == checkpoint.root_hash or size == 0
                else "and it is not the log held at that size either"
            )
            self._halt(
                table,
                state,
                AlertKind.ROLLBACK,
                f"a checkpoint of size {size} after the one of size {head.cosigned_size} was"
                f" cosigned: {how}",
                size,
            )
            return
        if size == head.cosigned_size:
            if checkpoint.root_hash != head.cosigned_root:
                self._halt(
                    table,
                    state,
                    AlertKind.FORK,
                    f"a checkpoint of size {size} with another root than the one cosigned",
                    size,
                )
            return  # the same checkpoint again (retained, or re-signed): cosigned already
        held = state.tree.root() if size == head.size else self.store.root(table, size)
        if held != checkpoint.root_hash:
            self._halt(
                table,
                state,
                AlertKind.FORK,
                f"the checkpoint of size {size} does not sign the records 1..{size} held (it"
                " does not extend the checkpoint accepted before)",
                size,
            )
            return
        timestamp = int(self.clock())
        cosigned = cosign_note(note, self.cosigner, timestamp)
        head.cosigned_size, head.cosigned_root, head.cosigned_note = (
            size,
            checkpoint.root_hash,
            cosigned,
        )
        self.store.put_head(head)
        self.store.add_cosignature(table, size, timestamp, cosigned)
        payload = cosigned.encode()
        self._effects.append(
            lambda: self._publish(topic(table, Channel.COSIGNATURE), payload, True)
        )
        self._effects.append(lambda: self.floor.apply_cosigned(table, size, timestamp))

    # --- status -------------------------------------------------------------------------

    def _status(self, table: str, state: TableState, payload: bytes) -> None:
        try:
            status = Status.decode(payload)
        except ProtocolError as exc:
            self._refuse(f"{table}/status", str(exc))
            return
        self._heard(state)
        self._effects.append(lambda: self.floor.apply_status(table, status))

    # --- alerts and bookkeeping ---------------------------------------------------------

    def _heard(self, state: TableState) -> None:
        state.last_heard = self.clock()
        state.silence_alerted = False

    def _waiting(self, state: TableState) -> None:
        if state.pending or state.pending_checkpoint is not None:
            if state.waiting_since is None:
                state.waiting_since = self.clock()
        else:
            state.waiting_since = None
            state.gap_alerted = False

    def _halt(self, table: str, state: TableState, kind: AlertKind, detail: str, size: int) -> None:
        state.head.halted = f"{kind}: {detail}"
        state.pending.clear()
        state.pending_checkpoint = None
        state.waiting_since = None
        self.store.put_head(state.head)
        self._alert(table, state, kind, detail + "; cosigning of this table stopped", size)

    def _bad(self, table: str, state: TableState, kind: AlertKind, detail: str, size: int) -> None:
        self.refused[f"{table}: {kind}"] += 1
        log.warning("%s: %s", table, detail[:300])
        self._alert(table, state, kind, detail, size)

    def _alert(
        self, table: str, state: TableState, kind: AlertKind, detail: str, size: int
    ) -> None:
        now = self.clock()
        last = state.alerted_at.get(kind)
        if last is not None and now - last < ALERT_REPEAT_S and kind not in _ALWAYS:
            self.refused[f"{table}: {kind} (alert not repeated)"] += 1
            return
        state.alerted_at[kind] = now
        self._raise(Alert(table, kind, detail, rfc3339(now), size))

    def _raise(self, alert: Alert) -> None:
        log.error("alert: %s %s: %s", alert.table, alert.kind, alert.detail[:300])
        self.store.add_alert(alert)
        payload = alert.encode()
        self._effects.append(lambda: self._publish(ALERTS_TOPIC, payload, False))
        self._effects.append(lambda: self.floor.apply_alert(alert))

    def _unknown_table(self, table: str, channel: Channel) -> None:
        self.refused[f"{table}: unknown table"] += 1
        if table in self._unknown or len(self._unknown) >= MAX_UNKNOWN_TABLES:
            return
        self._unknown.add(table)
        self._raise(
            Alert(
                table,
                AlertKind.UNKNOWN_TABLE,
                f"messages on {channel} from a table whose key the witness was not given"
                f" (no {table}.pub in its keys directory): dropped",
                rfc3339(self.clock()),
            )
        )

    def _refuse(self, where: str, why: str) -> None:
        self.refused[f"{where}: refused"] += 1
        log.warning("refused on %s: %s", where, why[:300])


_ALWAYS = frozenset({AlertKind.ROLLBACK, AlertKind.FORK})  # once each: the table then stops


def _seq_of(leaf: bytes) -> int:
    value = canonical.decode(leaf)
    assert isinstance(value, dict)
    return int(value["seq"])
