"""What the witness decides, table by table, from what arrives (no network here: the service
hands it each message, and publishes and acknowledges only after the store committed). The
rules are fleet-v2.md's; nothing from the network is believed unless the table's key signed it.

**Records are candidates until a signed checkpoint covers them.** Each record (an export line,
checked as ``verify-log --export`` checks a line: controller/audit/verify.py
``check_export_line``) is kept in the store as a candidate, beside any other record at its seq
(controller/witness/chains.py: at most 4 per seq, 4096 and 32 MiB per table, the oldest going
first). A line that is not an export line is refused and counted, never an alert: it is not
signed. A record already accepted, or already a candidate, is a duplicate (delivery is at least
once). A candidate becomes an accepted record when a verified checkpoint (the checkpoint
topic's, or one an export line carries) of size ``M`` has the root of the accepted records
followed by a chain of candidates up to ``M`` (each ``prev`` the hash of the one before); the
verifier's checks on each record (the key of ``log_created``, each result recomputed from its
dice and the paytables in force, ...) run then, in log order, and a record under the table's
signature that they refuse is BAD_RECORD (nothing past it is accepted). The other candidates
at those seqs are dropped and counted (``unconfirmed records dropped``), never an alert.

**A checkpoint** signed by the table's key for its origin (the key's name: ``<keys>/<table>.pub``),
of size ``M``, the witness having accepted and cosigned ``N`` records:

- ``M > N`` and a chain of candidates from record ``N`` gives its root: those records are
  accepted and the checkpoint cosigned (its note body as received, C2SP tlog-cosignature);
- ``M > N`` and no chain gives it yet: it waits (the newest one; in the store) for its
  records; not completed within ``gap_s``: GAP (cleared when it is cosigned);
- ``M <= N`` and its root is the witness's root at ``M``: stale (a replayed checkpoint, a
  broker's old retained one): counted, nothing else;
- ``M <= N`` and another root, or ``M > N`` and a chain that branches off the accepted
  records before ``N`` gives its root, or two waiting checkpoints of one size with two roots:
  evidence that the table's key signed two trees that disagree. ROLLBACK when the branch
  starts before the cosigned size and each of its records after the branch point is later
  (its signed ``time``) than every accepted record after that point (an older copy of the log
  put back and played on); FORK otherwise (two copies played, or the other tree's records not
  held). Either stops the cosigning of the table.

**A status** is taken when it is signed by the table's key (``open_status``), names the table
and its ``(connection, seq)`` is greater than the last one taken (kept in the store); else it is
stale or refused, counted. Offline: DEVICE_OFFLINE (cleared by the next online status).
A ``dice_alarm`` record accepted: BIASED_DICE (cleared by ``dice_replaced`` or the supervisor's
``dice_kept``). A checkpoint whose signature does not verify with the table's key:
BAD_SIGNATURE. A table without a key: UNKNOWN_TABLE, once; its messages are dropped.

**Silence** is on the witness's own clock: the last time something signed moved on (records
accepted, a new checkpoint, a newer online status), kept in the store; nothing such for
``silence_s``: SILENCE (cleared when the table is heard again). A candidate counts only once a
checkpoint accepts it (a forged record never keeps a dead table looking alive), a stale
checkpoint or status not at all, an offline status not at all.

An alert of a kind that stands for a table is not raised again for it (counted): one that
clears by itself until it clears, the others until a named user acknowledges them. A table the
witness stopped cosigning stays stopped, across restarts, until an operator resets it
(``paigow-controller witness --reset-table T``): the witness then forgets its records and
candidates and takes the table's log as new, from record 1. The alerts stay recorded.

Nothing lives in memory alone: the candidates, the waiting checkpoint, the status order, the
silence clock and the standing alerts are in the store; what is in memory (the chains' index,
trees already computed, the last records' decoded entries) is rebuilt from it at start.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from controller.audit.checks import ContentCheck, Entry, decode_entry
from controller.audit.log import GENESIS_PREV
from controller.audit.recall import export_line
from controller.audit.verify import check_export_line
from controller.core import canonical
from controller.core.merkle import EMPTY_ROOT, CompactRange, leaf_hash
from controller.core.note import (
    Checkpoint,
    Signer,
    Verifier,
    cosign_note,
    open_checkpoint,
    signed_by,
)
from controller.core.records import RecordKind, StoredRecord
from controller.errors import LogIntegrityError, NoteError, ProtocolError, RecordDataError
from controller.fleet.protocol import (
    ALERTS_TOPIC,
    END_OF_CONNECTION,
    MAX_DETAIL_CHARS,
    MAX_RECORD_BYTES,
    Alert,
    AlertKind,
    Channel,
    Presence,
    decode_json,
    decode_note,
    open_status,
    parse_topic,
    sign_alert,
    topic,
)
from controller.witness.chains import Candidates, Walk, provisional, walk
from controller.witness.ports import (
    SEVERITY,
    CandidateRow,
    FloorSink,
    NoFloor,
    Store,
    StoredAlert,
    TableHead,
    Unconfirmed,
)

log = logging.getLogger("paigow.witness")

DEFAULT_GAP_S = 120.0
DEFAULT_SILENCE_S = 900.0
MAX_UNKNOWN_TABLES = 1000
RECENT_ENTRIES = 32  # decoded candidates kept in memory per table (the rest read back)
MEMO_TREES = 16  # trees after candidates kept per table, for a search decided again
REBUILD_RECORDS = 512  # accepted records replayed into the dashboard at start, per table
REBUILD_KINDS = (  # and the latest of these before them (what a card shows stands on them)
    RecordKind.CONFIG_LOADED,
    RecordKind.RECOVERY,
    RecordKind.MODE_CHANGED,
    RecordKind.SERVICE_MODE,
    RecordKind.DICE_ALARM,
    RecordKind.DICE_REPLACED,
)
RECENT_CLOSED_ALERTS = 200  # cleared or acknowledged alerts shown after a restart
_RESULT_KINDS = frozenset({"result", "result_corrected", "void"})

Publish = Callable[[str, bytes, bool], None]  # topic, payload, retained


def rfc3339(moment: float) -> str:
    return (
        datetime.fromtimestamp(moment, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return f"{seconds:.0f} s"
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def _copy(tree: CompactRange) -> CompactRange:
    return CompactRange(tree.size, list(tree.hashes))


@dataclass
class TableState:
    """One table: its head (what the store holds), its tree of accepted records, the
    verifier's state at its head, its candidates, the checkpoint that waits (opened) and where
    its chains stop, its standing alerts; and what is only a cache of the store."""

    verifier: Verifier
    head: TableHead
    tree: CompactRange
    content: ContentCheck
    candidates: Candidates
    pending: Checkpoint | None = None
    breaks: set[tuple[int, str]] = field(default_factory=set)
    standing: dict[AlertKind, StoredAlert] = field(default_factory=dict)
    recent: OrderedDict[str, tuple[Entry, dict[str, Any]]] = field(default_factory=OrderedDict)
    memo: OrderedDict[str, CompactRange] = field(default_factory=OrderedDict)
    tip: list[CandidateRow] = field(default_factory=list)  # the chain on from the head
    contested: bool = False
    shown: Unconfirmed = field(default_factory=Unconfirmed)
    dirty: bool = False


class Witness:
    """Every table's verification. Call :meth:`receive` for each message, :meth:`tick` now and
    then and :meth:`acknowledge` for a user's acknowledgement, inside ``store.transaction()``;
    then :meth:`flush` once the transaction committed: it publishes the cosignatures and
    alerts (signed with ``alert_key``) and tells the floor. At construction it reads the store
    and tells the floor what it holds (before the first message)."""

    def __init__(
        self,
        store: Store,
        keys: dict[str, Verifier],
        cosigner: Signer,
        *,
        alert_key: Signer,
        clock: Callable[[], float],
        publish: Publish,
        floor: FloorSink | None = None,
        gap_s: float = DEFAULT_GAP_S,
        silence_s: float = DEFAULT_SILENCE_S,
    ) -> None:
        self.store = store
        self.keys = dict(keys)
        self.cosigner = cosigner
        self.alert_key = alert_key
        self.clock = clock
        self._publish = publish
        self.floor: FloorSink = NoFloor() if floor is None else floor
        self.gap_s = gap_s
        self.silence_s = silence_s
        # what was dropped or counted, by "table/channel: why" (and the chains' walks)
        self.refused: Counter[str] = Counter()
        self._effects: list[Callable[[], None]] = []
        now = clock()
        heads = store.heads()
        held = store.candidates()
        standing: dict[str, list[StoredAlert]] = {}
        for stored in store.standing_alerts():
            standing.setdefault(stored.alert.table, []).append(stored)
        self._arrival = 1 + max((r.arrival for rows in held.values() for r in rows), default=0)
        self.tables: dict[str, TableState] = {}
        with store.transaction():
            for table, verifier in self.keys.items():
                state = self._load(table, verifier, heads.get(table), held.get(table, []), now)
                state.standing = {a.alert.kind: a for a in standing.get(table, []) if a.is_standing}
                self.tables[table] = state
                if state.pending is not None:  # where its chains stop (or it completes now)
                    self._decide(table, state, state.pending, state.head.pending_note)
                self._save(state)
        self._unknown = store.alert_tables(AlertKind.UNKNOWN_TABLE)
        self._show_stored()

    # --- loading ------------------------------------------------------------------------

    def _load(
        self,
        table: str,
        verifier: Verifier,
        head: TableHead | None,
        rows: list[CandidateRow],
        now: float,
    ) -> TableState:
        fresh = head is None
        head = head or TableHead(table, last_hash=GENESIS_PREV)
        state = TableState(
            verifier, head, CompactRange(), ContentCheck(verifier), Candidates(), dirty=fresh
        )
        if head.last_heard <= 0:  # never heard (or a store of schema 1): counting starts now
            head.last_heard = now
            state.dirty = True
        for row in rows:
            state.candidates.add(row)
        if head.size > head.cosigned_size:
            self._demote(table, state)
        try:
            state.tree = CompactRange.from_bytes(head.size, head.tree)
        except ValueError:
            state.tree = self._tree_from_leaves(table, head.size)
            head.tree = state.tree.to_bytes()
            state.dirty = True
        state.content = self._content_at_head(table, verifier)
        if head.pending_note:
            try:
                state.pending = open_checkpoint(head.pending_note, verifier)
            except NoteError:
                head.pending_note, state.dirty = "", True
        self._retip(table, state)
        return state

    def _demote(self, table: str, state: TableState) -> None:
        """A store of schema 1 kept as facts the records past its last cosigned checkpoint:
        they go back to being candidates, for the table's next signed checkpoint to decide."""
        head = state.head
        rows = self.store.rows(table, head.cosigned_size + 1, head.size)
        for seq, kind, leaf in rows:
            entry = decode_entry(StoredRecord(seq, kind, leaf))
            self._keep(table, state, entry, None, export_line(StoredRecord(seq, kind, leaf), None))
        self.store.drop_leaves_after(table, head.cosigned_size)
        head.size = head.cosigned_size
        before = self.store.leaf(table, head.size) if head.size else None
        head.last_hash = GENESIS_PREV if before is None else hashlib.sha256(before).hexdigest()
        tree = self._tree_from_leaves(table, head.size)
        head.tree = tree.to_bytes()
        last = self.store.last_cosignature(table)
        if last is not None and last[0] == head.size:
            self.store.add_cosignature(table, last[0], last[1], last[2], head.tree)
        state.dirty = True
        log.info("%s: %d records past the cosigned %d are candidates again", table, len(rows),
                 head.size)  # fmt: skip

    def _tree_from_leaves(self, table: str, size: int, start: int = 0) -> CompactRange:
        tree = CompactRange()
        if start:
            found = self.store.tree_at_or_below(table, start)
            if found is not None:
                tree = CompactRange.from_bytes(*found)
        for seq, leaf in self.store.leaves(table, tree.size + 1):
            if seq > size:
                break
            tree.append(leaf)
        if tree.size != size:
            raise LogIntegrityError(size, f"{table}: the store does not hold records 1..{size}")
        return tree

    def _content_at_head(self, table: str, verifier: Verifier) -> ContentCheck:
        content = ContentCheck(verifier)
        config = self.store.last_leaf_of_kind(table, str(RecordKind.CONFIG_LOADED))
        if config is not None:  # the paytables in force, for the results to come
            row = StoredRecord(_seq_of(config), str(RecordKind.CONFIG_LOADED), config)
            content.check(decode_entry(row))
        return content

    def _show_stored(self) -> None:
        """The dashboard as the store holds it: each table's last accepted records, its
        cosignature, status and unconfirmed records; the open alerts and the last closed."""
        for table, state in self.tables.items():
            head = state.head
            for line in self._stored_lines(table, head.size):
                self.floor.apply_record(table, line)
            last = self.store.last_cosignature(table)
            if last is not None:
                self.floor.apply_cosigned(table, last[0], last[1])
            if head.status_note:
                try:
                    signed = open_status(head.status_note.encode(), state.verifier, table)
                    self.floor.apply_status(table, signed.status)
                except ProtocolError:
                    pass
            self.floor.apply_unconfirmed(table, state.shown)
        for stored in self.store.recent_alerts(RECENT_CLOSED_ALERTS):
            self.floor.apply_alert(stored)

    def _stored_lines(self, table: str, size: int) -> list[dict[str, Any]]:
        if not size:
            return []
        start = max(1, size - REBUILD_RECORDS + 1)
        earlier = []
        for kind in REBUILD_KINDS:
            leaf = self.store.last_leaf_of_kind(table, str(kind))
            if leaf is not None and (seq := _seq_of(leaf)) < start:
                earlier.append((seq, str(kind), leaf))
        rows = sorted(earlier) + self.store.rows(table, start, size)
        return [export_line(StoredRecord(seq, kind, leaf), None) for seq, kind, leaf in rows]

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
        self._save(state)

    def tick(self) -> None:
        """The timers, on the witness's clock: a checkpoint that waited ``gap_s`` for its
        records, a table not heard from for ``silence_s``."""
        now = self.clock()
        for table, state in self.tables.items():
            head = state.head
            if head.halted:
                continue
            if state.pending is not None and now - head.pending_since >= self.gap_s:
                cp = state.pending
                self._raise(
                    table,
                    state,
                    AlertKind.GAP,
                    f"{table} signed its log at {cp.size} records"
                    f" {_duration(now - head.pending_since)} ago, and the records"
                    f" {head.size + 1} to {cp.size} have not all come (the witness holds"
                    f" {head.size}). The table sends them again by itself when it sees the"
                    " witness behind; if this stays, check its connection.",
                    cp.size,
                )
            if now - head.last_heard >= self.silence_s:
                self._raise(
                    table,
                    state,
                    AlertKind.SILENCE,
                    f"nothing signed from {table} for {_duration(now - head.last_heard)} (no"
                    " record, checkpoint or online status): check the table and its network.",
                    head.size,
                )
            self._save(state)

    def acknowledge(self, alert_id: int, user: str) -> tuple[StoredAlert | None, bool]:
        """A named user acknowledged an alert (the dashboard's ``POST /alerts/<id>/ack``): the
        alert as it is now (None: no such alert), and whether this acknowledgement is the one
        recorded (False: someone had acknowledged it before)."""
        when = rfc3339(self.clock())
        stored = self.store.ack_alert(alert_id, user, when)
        if stored is None:
            return None, False
        state = self.tables.get(stored.alert.table)
        kind = stored.alert.kind
        if state is not None and not stored.is_standing:
            held = state.standing.get(kind)
            if held is not None and held.id == stored.id:
                del state.standing[kind]  # the next of its kind is an alert again
        self._effects.append(functools.partial(self.floor.apply_alert, stored))
        log.info("alert %d (%s %s) acknowledged by %s", alert_id, stored.alert.table, kind,
                 stored.acked_by)  # fmt: skip
        return stored, stored.acked_at == when and stored.acked_by == user

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

    def _record(self, table: str, state: TableState, payload: bytes) -> None:
        try:
            line = decode_json(payload, MAX_RECORD_BYTES, "record")
            entry, note = check_export_line(1, line)
        except (ProtocolError, LogIntegrityError) as exc:
            self._refuse(f"{table}/records", f"not an export line: {exc}")
            return
        if state.head.halted:
            self.refused[f"{table}/records: stopped"] += 1
            return
        carried = None
        if note is not None:
            carried = self._open_checkpoint(table, state, note, f"carried by record {entry.seq}")
            if carried is None:
                return
        row = None
        if self._is_held(table, state, entry):
            self.refused[f"{table}/records: duplicate"] += 1
        else:
            row = self._keep(table, state, entry, note, line)
        if carried is not None:
            if carried.size != entry.seq:
                self.refused[f"{table}/records: its checkpoint is not of its seq"] += 1
            self._decide(table, state, carried, note or "")
        pending = state.pending
        # only the record a chain of the waiting checkpoint stopped at, or another candidate
        # at its size, can complete it
        if (
            row is not None
            and pending is not None
            and pending != carried
            and not state.head.halted
            and ((row.seq, row.hash) in state.breaks or row.seq == pending.size)
        ):
            self._decide(table, state, pending, state.head.pending_note)

    def _is_held(self, table: str, state: TableState, entry: Entry) -> bool:
        if state.candidates.get(entry.hash) is not None:
            return True
        return entry.seq <= state.head.size and self.store.leaf(table, entry.seq) == entry.leaf

    def _keep(
        self,
        table: str,
        state: TableState,
        entry: Entry,
        note: str | None,
        line: dict[str, Any],
    ) -> CandidateRow | None:
        """``entry`` as a candidate, in the store; what had to go for it, dropped (counted)."""
        row = CandidateRow(
            entry.seq,
            entry.hash,
            entry.prev,
            entry.kind,
            leaf_hash(entry.leaf),
            self._arrival,
            len(entry.leaf) + len((note or "").encode()),
            self.clock(),
        )
        gone = state.candidates.add(row)
        if row in gone:
            self._refuse(f"{table}/records", f"record {row.seq}: larger than the candidates' bound")
            return None
        self._arrival += 1
        self.store.add_candidate(table, row, entry.leaf, note or "")
        state.recent[row.hash] = (entry, line)
        while len(state.recent) > RECENT_ENTRIES:
            state.recent.popitem(last=False)
        if gone:
            self._forget(table, state, gone)
            self.refused[f"{table}: candidates evicted (bounds)"] += len(gone)
            self._retip(table, state)
        else:
            self._extend_tip(table, state, row)
        return row

    def _forget(
        self,
        table: str,
        state: TableState,
        gone: list[CandidateRow],
        *,
        through: tuple[int, int] | None = None,
    ) -> None:
        """``gone`` dropped (``through``: they are every candidate at those seqs)."""
        if through is not None:
            self.store.drop_candidates_between(table, *through)
        else:
            self.store.drop_candidates(table, [(c.seq, c.hash) for c in gone])
        for candidate in gone:
            state.candidates.remove(candidate.hash)
            state.recent.pop(candidate.hash, None)
        state.memo.clear()

    def _entry(
        self, table: str, state: TableState, candidate: CandidateRow
    ) -> tuple[Entry, dict[str, Any]]:
        cached = state.recent.get(candidate.hash)
        if cached is not None:
            return cached
        held = self.store.candidate(table, candidate.seq, candidate.hash)
        if held is None:
            raise LogIntegrityError(candidate.seq, f"{table}: a candidate the store lost")
        row = StoredRecord(candidate.seq, candidate.kind, held[0])
        return decode_entry(row), export_line(row, held[1] or None)

    # --- the unconfirmed records: the chain on from the accepted head ----------------------

    def _extend_tip(self, table: str, state: TableState, row: CandidateRow) -> None:
        last_seq, last_hash = (
            (state.tip[-1].seq, state.tip[-1].hash)
            if state.tip
            else (state.head.size, state.head.last_hash)
        )
        if row.seq == last_seq + 1 and row.prev == last_hash:
            state.tip.append(row)
            if state.candidates.at(row.seq + 1):  # it fills a gap: those after it follow
                more, contested = provisional(state.candidates, row.seq, row.hash)
                state.tip += more
                state.contested = state.contested or contested
        elif state.tip and state.tip[0].seq <= row.seq <= last_seq:
            before = (
                state.tip[row.seq - state.tip[0].seq - 1] if row.seq > state.tip[0].seq else None
            )
            wanted = state.head.last_hash if before is None else before.hash
            state.contested = state.contested or row.prev == wanted
        self._show_unconfirmed(table, state)

    def _retip(self, table: str, state: TableState) -> None:
        state.tip, state.contested = provisional(
            state.candidates, state.head.size, state.head.last_hash
        )
        self._show_unconfirmed(table, state)

    def _show_unconfirmed(self, table: str, state: TableState) -> None:
        result = None
        for candidate in reversed(state.tip):
            if candidate.kind in _RESULT_KINDS:
                shown = state.shown.result
                if shown is not None and shown.get("hash") == candidate.hash:
                    result = shown
                else:
                    result = self._entry(table, state, candidate)[1]
                break
        tip = state.tip
        value = Unconfirmed(
            len(tip), tip[0].seq if tip else 0, tip[-1].seq if tip else 0, result,
            state.contested and bool(tip),
        )  # fmt: skip
        if value != state.shown:
            state.shown = value
            self._effects.append(functools.partial(self.floor.apply_unconfirmed, table, value))

    # --- checkpoints --------------------------------------------------------------------

    def _checkpoint(self, table: str, state: TableState, payload: bytes) -> None:
        try:
            note = decode_note(payload, "checkpoint")
        except ProtocolError as exc:
            self._bad_signature(table, state, f"a checkpoint that is not a signed note ({exc})", 0)
            return
        where = f"on {topic(table, Channel.CHECKPOINT)}"
        checkpoint = self._open_checkpoint(table, state, note, where)
        if checkpoint is None:
            return
        if state.head.halted:
            self.refused[f"{table}/checkpoint: stopped"] += 1
            return
        self._decide(table, state, checkpoint, note)

    def _open_checkpoint(
        self, table: str, state: TableState, note: str, where: str
    ) -> Checkpoint | None:
        """The checkpoint of ``note`` once the table's key signed it for its origin (a
        canonical body: ``open_checkpoint`` parses strictly); else BAD_SIGNATURE."""
        try:
            checkpoint = open_checkpoint(note, state.verifier)
        except NoteError as exc:
            self._bad_signature(
                table,
                state,
                f"a checkpoint {where} that its key did not sign, or not a canonical one ({exc})",
                0,
            )
            return None
        if checkpoint.origin != state.verifier.name:
            self._bad_signature(
                table,
                state,
                f"a checkpoint {where} of the origin {checkpoint.origin!r}, signed by its key,"
                f" which is the key of {state.verifier.name!r}",
                checkpoint.size,
            )
            return None
        return checkpoint

    def _root_at(self, table: str, state: TableState, size: int) -> bytes | None:
        if size == state.head.size:
            return state.tree.root()
        return EMPTY_ROOT if size == 0 else self.store.root(table, size)

    def _accepted_hash(self, table: str, state: TableState, seq: int) -> str | None:
        if seq == state.head.size:
            return state.head.last_hash
        if seq == 0:
            return GENESIS_PREV
        leaf = self.store.leaf(table, seq)
        return None if leaf is None else hashlib.sha256(leaf).hexdigest()

    def _walk(self, table: str, state: TableState, end: CandidateRow, *, memo: bool) -> Walk:
        found = walk(
            state.candidates,
            end,
            state.head.size,
            functools.partial(self._accepted_hash, table, state),
            state.memo if memo else (),
        )
        self.refused[f"{table}: chain walks"] += 1
        self.refused[f"{table}: chain walk steps"] += len(found.chain)
        return found

    def _tree_at(self, table: str, state: TableState, size: int) -> CompactRange:
        """The tree of the first ``size`` accepted records."""
        if size == state.head.size:
            return _copy(state.tree)
        return self._tree_from_leaves(table, size, start=size)

    def _tree_of(
        self, table: str, state: TableState, found: Walk, roots: list[bytes] | None = None
    ) -> CompactRange:
        """The tree after the chain of ``found`` (which reached an anchor or a memo), and into
        ``roots`` the root after each of its records; the trees after its last two records
        are kept for a search decided again."""
        if found.memo is not None:
            tree = _copy(state.memo[found.memo])
        else:
            assert found.anchor is not None
            tree = self._tree_at(table, state, found.anchor)
        last = len(found.chain) - 1
        for i, candidate in enumerate(found.chain):
            tree.append_hash(candidate.leaf_hash)
            if roots is not None:
                roots.append(tree.root())
            if i >= last - 1:
                state.memo[candidate.hash] = _copy(tree)
        while len(state.memo) > MEMO_TREES:
            state.memo.popitem(last=False)
        return tree

    def _decide(self, table: str, state: TableState, checkpoint: Checkpoint, note: str) -> None:
        """A verified checkpoint of the table (fleet-v2.md, "Checkpoints: stale, consistent,
        or evidence"): stale; else the chain of held records it signs, accepted from the head
        or evidence from a branch; else, its records not held, evidence or a wait for them."""
        head, size = state.head, checkpoint.size
        if size <= head.size and self._root_at(table, state, size) == checkpoint.root_hash:
            self.refused[f"{table}/checkpoint: stale"] += 1
            return
        breaks: set[tuple[int, str]] = set()
        for end in state.candidates.at(size):
            if self._signed_chain(table, state, checkpoint, note, end=end, breaks=breaks):
                return
        self._without_its_records(table, state, checkpoint, note, breaks)

    def _signed_chain(
        self,
        table: str,
        state: TableState,
        checkpoint: Checkpoint,
        note: str,
        *,
        end: CandidateRow,
        breaks: set[tuple[int, str]],
    ) -> bool:
        """Whether the held records that end at ``end`` make the tree ``checkpoint`` signs:
        then accepted (a chain on from the head) or evidence (a branch from an older size).
        A chain broken by a record not held adds the missing one to ``breaks``."""
        head = state.head
        found = self._walk(table, state, end, memo=True)
        if found.missing is not None:
            breaks.add(found.missing)
            return False
        # the common case: a chain on from the head, the roots of the records to accept
        roots: list[bytes] | None = [] if found.anchor == head.size else None
        tree = self._tree_of(table, state, found, roots)
        if tree.root() != checkpoint.root_hash:
            return False
        if found.memo is not None:  # the whole chain, for its records
            found = self._walk(table, state, end, memo=False)
            if found.missing is not None:
                breaks.add(found.missing)
                return False
        assert found.anchor is not None
        if found.anchor != head.size:
            self._evidence(table, state, checkpoint, found)
            return True
        if roots is None:  # it went through a memo: the roots from the head
            roots = []
            tree = self._tree_of(table, state, found, roots)
        self._accept(table, state, found.chain, checkpoint, note, tree=tree, roots=roots)
        return True

    def _without_its_records(
        self,
        table: str,
        state: TableState,
        checkpoint: Checkpoint,
        note: str,
        breaks: set[tuple[int, str]],
    ) -> None:
        """A checkpoint no held chain makes: another tree at a size cosigned or at the size
        waited for is evidence; a newer one waits for its records (``breaks``: those missing)."""
        head, size = state.head, checkpoint.size
        if size <= head.size:  # another tree at a size cosigned, its records not held
            self._evidence(table, state, checkpoint, None)
            return
        pending = state.pending
        if pending is not None and pending.size == size:
            if pending.root_hash != checkpoint.root_hash:
                self._evidence(table, state, checkpoint, None, also=pending)
            else:
                state.breaks = breaks
            return
        if pending is None or pending.size < size:  # the newest waits for its records
            state.pending, state.breaks = checkpoint, breaks
            if pending is None:
                head.pending_since = self.clock()
            head.pending_note = note
            self._heard(table, state)

    def _accept(
        self,
        table: str,
        state: TableState,
        chain: tuple[CandidateRow, ...],
        checkpoint: Checkpoint,
        note: str,
        *,
        tree: CompactRange,
        roots: list[bytes],
    ) -> None:
        """The chain is the log up to ``checkpoint`` (``tree`` after it, ``roots`` after each
        of its records): its records checked in order by the verifier, accepted, and the
        checkpoint cosigned."""
        head = state.head
        rows: list[tuple[int, str, bytes, bytes]] = []
        lines: list[dict[str, Any]] = []
        entries: list[Entry] = []
        for candidate, root in zip(chain, roots, strict=True):
            entry, line = self._entry(table, state, candidate)
            try:
                state.content.check(entry)
            except RecordDataError as exc:
                state.content = self._content_at_head(table, state.verifier)
                self._forget(table, state, [candidate])
                self._retip(table, state)
                self._raise(
                    table,
                    state,
                    AlertKind.BAD_RECORD,
                    f"record {candidate.seq} of {table} ({candidate.kind}), under a checkpoint"
                    f" its key signed, is refused by the verifier: {exc}. The witness cosigns"
                    f" nothing past record {candidate.seq - 1} until it is dealt with.",
                    candidate.seq,
                )
                return
            rows.append((entry.seq, entry.kind, entry.leaf, root))
            lines.append(line)
            entries.append(entry)
        self.store.put_leaves(table, rows)
        accepted = {c.hash for c in chain}
        others = [
            c for c in state.candidates.between(head.size + 1, checkpoint.size)
            if c.hash not in accepted
        ]  # fmt: skip
        self._forget(table, state, [*chain, *others], through=(head.size + 1, checkpoint.size))
        if others:
            self.refused[f"{table}: unconfirmed records dropped"] += len(others)
        head.size, head.last_hash, head.tree = checkpoint.size, chain[-1].hash, tree.to_bytes()
        state.tree = tree
        self._cosign(table, state, checkpoint, note)
        self._heard(table, state)
        for line in lines:
            self._effects.append(functools.partial(self.floor.apply_record, table, line))
        for entry in entries:
            self._watch_dice(table, state, entry)
        pending = state.pending
        if pending is not None and pending.size <= checkpoint.size:
            state.pending, state.breaks, head.pending_note = None, set(), ""
            self._clear(state, AlertKind.GAP)
            if self._root_at(table, state, pending.size) != pending.root_hash:
                self._retip(table, state)  # it waited for another tree than the one signed now
                self._evidence(table, state, pending, None, also=checkpoint)
                return
        self._retip(table, state)
        if state.pending is not None:  # a newer one may go on from here
            self._decide(table, state, state.pending, head.pending_note)

    def _cosign(self, table: str, state: TableState, checkpoint: Checkpoint, note: str) -> None:
        """C2SP tlog-cosignature: the body as received (extension lines included) and the
        table's own signature lines, and the witness's cosignature line on that body."""
        head, size = state.head, checkpoint.size
        timestamp = int(self.clock())
        cosigned = cosign_note(signed_by(note, state.verifier), self.cosigner, timestamp)
        head.cosigned_size, head.cosigned_root, head.cosigned_note = (
            size,
            checkpoint.root_hash,
            cosigned,
        )
        self.store.add_cosignature(table, size, timestamp, cosigned, head.tree)
        payload = cosigned.encode()
        self._effects.append(
            lambda: self._publish(topic(table, Channel.COSIGNATURE), payload, True)
        )
        self._effects.append(lambda: self.floor.apply_cosigned(table, size, timestamp))

    def _evidence(
        self,
        table: str,
        state: TableState,
        checkpoint: Checkpoint,
        found: Walk | None,
        *,
        also: Checkpoint | None = None,
    ) -> None:
        """Two signed trees that disagree: named, and the table's cosigning stopped. From
        a branch whose records are held (``found``), a rollback when each of them was written
        after every record cosigned past the branch, else a fork."""
        head = state.head
        if found is None or found.anchor is None:
            self._fork_unheld(table, state, checkpoint, also)
            return
        branch = found.anchor
        theirs = [_time_ms(self._entry(table, state, c)[0].leaf) for c in found.chain]
        ours = [_time_ms(leaf) for _, leaf in self.store.leaves(table, branch + 1)]
        if branch < head.cosigned_size and _written_after(theirs, ours):
            self._halt(
                table,
                state,
                AlertKind.ROLLBACK,
                f"{table}'s log went back: from record {branch + 1} it is not the log the"
                f" witness cosigned up to record {head.cosigned_size}, and each of its records"
                " from there was written after all the cosigned ones. An older copy of the"
                " table's log (its card, or audit.db) was put back and played on.",
                branch + 1,
            )
        else:
            self._halt(
                table,
                state,
                AlertKind.FORK,
                f"{table}'s key signed two different logs that part at record {branch + 1},"
                " and the records after that were written at the same time on both: two"
                " copies of the table's log were played.",
                branch + 1,
            )

    def _fork_unheld(
        self, table: str, state: TableState, checkpoint: Checkpoint, also: Checkpoint | None
    ) -> None:
        """A signed tree that contradicts the log cosigned (or ``also``, another signed tree),
        its records not held: a fork, since nothing shows the log went back."""
        other = (
            f"another checkpoint of {also.size} records"
            if also is not None
            else f"the log it cosigned up to {state.head.size}"
        )
        self._halt(
            table,
            state,
            AlertKind.FORK,
            f"{table}'s key signed a checkpoint of {checkpoint.size} records that"
            f" contradicts {other}: two different logs. The witness does not hold the"
            " records of the other one, so it cannot show that the log went back to an"
            " older copy: a fork (two copies of the table's log).",
            checkpoint.size,
        )

    # --- status and what the records say -------------------------------------------------

    def _status(self, table: str, state: TableState, payload: bytes) -> None:
        try:
            signed = open_status(payload, state.verifier, table)
        except ProtocolError as exc:
            self._refuse(f"{table}/status", str(exc))
            return
        head = state.head
        if signed.order <= head.status_order:  # a replayed or retained older one
            self.refused[f"{table}/status: stale"] += 1
            return
        head.status_connection, head.status_seq = signed.order
        head.status_note = payload.decode("utf-8")
        state.dirty = True
        status = signed.status
        if status.presence is Presence.ONLINE:
            self._heard(table, state)
            self._clear(state, AlertKind.DEVICE_OFFLINE)
        else:  # an offline status never resets the silence clock
            how = (
                f"the broker published its last will: its connection {signed.connection} ended"
                if signed.seq == END_OF_CONNECTION
                else f"it said it is stopping (connection {signed.connection})"
            )
            self._raise(
                table,
                state,
                AlertKind.DEVICE_OFFLINE,
                f"{table} is offline: {how}. Check the table's controller and its network.",
                head.size,
            )
        self._effects.append(functools.partial(self.floor.apply_status, table, status))

    def _watch_dice(self, table: str, state: TableState, entry: Entry) -> None:
        """The dice monitor's alarm (issue 15), from the records accepted."""
        if entry.kind == RecordKind.DICE_ALARM:
            self._raise(table, state, AlertKind.BIASED_DICE, dice_words(table, entry.data),
                        entry.seq)  # fmt: skip
        elif entry.kind == RecordKind.DICE_REPLACED or (
            entry.kind == RecordKind.SUPERVISOR_ACTION and entry.data.get("action") == "dice_kept"
        ):
            self._clear(state, AlertKind.BIASED_DICE)

    # --- alerts and bookkeeping ---------------------------------------------------------

    def _heard(self, table: str, state: TableState) -> None:
        state.head.last_heard = self.clock()
        state.dirty = True
        self._clear(state, AlertKind.SILENCE)

    def _save(self, state: TableState) -> None:
        if state.dirty:
            self.store.put_head(state.head)
            state.dirty = False

    def _halt(self, table: str, state: TableState, kind: AlertKind, detail: str, size: int) -> None:
        state.head.halted = f"{kind}: {detail}"
        state.head.pending_note = ""
        state.pending, state.breaks = None, set()
        state.dirty = True
        self._clear(state, AlertKind.GAP)
        self._raise(
            table,
            state,
            kind,
            f"{detail} Cosigning of {table} stopped until an operator resets it"
            f" (paigow-controller witness --reset-table {table}).",
            size,
        )

    def _bad_signature(self, table: str, state: TableState, detail: str, size: int) -> None:
        self.refused[f"{table}: {AlertKind.BAD_SIGNATURE}"] += 1
        log.warning("%s: %s", table, detail[:300])
        self._raise(
            table,
            state,
            AlertKind.BAD_SIGNATURE,
            f"{table}: {detail}. Someone other than the table published it, or the table signs"
            f" with another key than {table}.pub: check the table's key.",
            size,
        )

    def _raise(
        self, table: str, state: TableState | None, kind: AlertKind, detail: str, size: int
    ) -> None:
        if state is not None and kind in state.standing and kind not in _ONCE_PER_HALT:
            self.refused[f"{table}: {kind} (alert standing)"] += 1
            return
        alert = Alert(table, kind, detail[:MAX_DETAIL_CHARS], rfc3339(self.clock()), size)
        stored = self.store.add_alert(alert, SEVERITY[kind])
        if state is not None:
            state.standing[kind] = stored
        log.error("alert %d: %s %s: %s", stored.id, table, kind, alert.detail[:300])
        payload = sign_alert(alert, self.alert_key)
        self._effects.append(lambda: self._publish(ALERTS_TOPIC, payload, False))
        self._effects.append(functools.partial(self.floor.apply_alert, stored))

    def _clear(self, state: TableState, kind: AlertKind) -> None:
        stored = state.standing.pop(kind, None)
        if stored is None:
            return
        when = rfc3339(self.clock())
        self.store.clear_alert(stored.id, when)
        self._effects.append(
            functools.partial(self.floor.apply_alert, replace(stored, cleared=when))
        )

    def _unknown_table(self, table: str, channel: Channel) -> None:
        self.refused[f"{table}: unknown table"] += 1
        if table in self._unknown or len(self._unknown) >= MAX_UNKNOWN_TABLES:
            return
        self._unknown.add(table)
        self._raise(
            table,
            None,
            AlertKind.UNKNOWN_TABLE,
            f"messages on {channel} from a table {table} whose key the witness was not given"
            f" (no {table}.pub in its keys directory): dropped.",
            0,
        )

    def _refuse(self, where: str, why: str) -> None:
        self.refused[f"{where}: refused"] += 1
        log.warning("refused on %s: %s", where, why[:300])


# raised once each time the table's cosigning stops (it stays stopped until a reset)
_ONCE_PER_HALT = frozenset({AlertKind.ROLLBACK, AlertKind.FORK})


def dice_words(table: str, data: Any) -> str:
    """What a pit boss reads of a ``dice_alarm`` record: which die, which face, how often in
    how many rolls, e.g. "dice on table-7 look loaded: red 6 seen 31 % of 180 rolls"."""
    test, face, rolls = data.get("test"), data.get("face"), data.get("rolls")
    counts = data.get("counts") if isinstance(data.get("counts"), dict) else {}
    rolls = rolls if type(rolls) is int and rolls > 0 else 0
    seen = ""
    if test in ("red", "blue") and type(face) is int and 1 <= face <= 6 and rolls:
        faces = counts.get(test)
        dice = rolls if test == "red" else 2 * rolls
        if isinstance(faces, list) and len(faces) == 6 and type(faces[face - 1]) is int:
            share = round(100 * faces[face - 1] / dice)
            what = f"{dice} rolls" if test == "red" else f"{dice} blue dice ({rolls} rolls)"
            seen = f"dice on {table} look loaded: {test} {face} seen {share} % of {what}"
    if not seen:
        seen = (
            f"dice on {table} look loaded: the totals of the three dice are off after"
            f" {rolls} rolls (evidence {data.get('log_e')} over the alarm's"
            f" {data.get('threshold')})"
        )
    then = "; the table locks after the round" if data.get("locks") is True else ""
    return f"{seen} (round {data.get('round')}{then}). Replace the dice, or inspect and keep them."


def _seq_of(leaf: bytes) -> int:
    value = canonical.decode(leaf)
    assert isinstance(value, dict)
    return int(value["seq"])


def _time_ms(leaf: bytes) -> int | None:
    """The signed ``time`` of a record's leaf, UNIX milliseconds (None if it has none)."""
    value = canonical.decode(leaf)
    text = value.get("time") if isinstance(value, dict) else None
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def _written_after(theirs: list[int | None], ours: list[int | None]) -> bool:
    """Whether every record of ``theirs`` was written after every one of ``ours``: both held,
    each with its time."""
    their_times = [t for t in theirs if t is not None]
    our_times = [t for t in ours if t is not None]
    if len(their_times) != len(theirs) or len(our_times) != len(ours):
        return False
    return bool(their_times and our_times) and min(their_times) > max(our_times)
