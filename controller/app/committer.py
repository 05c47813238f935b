"""Write-ahead for the control loop: a step's records reach the audit log before the step is
adopted, and a failed commit leaves the table where the log says it is.

**Batching.** A ``RECORD`` that ``may_wait`` (``controller.core.state.Action``) waits for the next
step that must commit and shares its transaction: records that may not wait, and every step that
shakes for the RNG, closes its session or anchors (``AFTER_DURABLE``: they record or sign what
the log holds), make every waiting record durable first, in order, with the step's own last.

**A failed commit** (the PostgreSQL lesson: after a failed commit the connection is not
trusted): the step is not adopted, nor are the steps whose records waited for it. What the batch
held is added to what failed commits lost (``Unrecorded``), the log is reopened and read as it
really is, and the storage fault is to be taken from the context of the last commit, or, when
the failed commit reached the disk after all (the log holds more records than were
acknowledged), from the context the log holds. Where the lid is, is the hardware's: the step's
word on it stands. The fault's own step is adopted whatever its commit does; once its records
are durable, the losses it names are forgotten.

**Prepared ahead.** The records of a step decided ahead (the loop's ``decide_ahead``: the result
decided at the first of the agreeing readings) are checked and encoded while the sensor reads
again (``prepare``), and so is a record when it waits; the commit that takes them (the very
records the core made: the decided actions are the objects decided ahead) then only stamps,
chains, signs and writes them. A record that cannot be prepared is committed as it is, and the
log refuses it there, as it would have. What the log left of its last commit for later (its
running totals: ``SettlesLater``) it does then too.

A commit the log refuses before writing anything (a record its schema refuses, a context that
cannot be encoded: a bug, not the storage) is taken the same way, as an internal fault.

The committer decides nothing about the round: the loop steps the core with the storage fault
(``Lost``) and carries out what it returns (``commit_fault``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from controller.core.log_state import Prepared, prepare
from controller.core.record_data import Unrecorded
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import Action, ActionKind, Fault, RoundContext
from controller.errors import AuditLogError, SnapshotError
from controller.ports import AuditLog, Committed, SettlesLater

log = logging.getLogger("paigow.daemon")

Record = tuple[RecordKind, Mapping[str, object]]

# Actions that may only run once every record before them is durable: they record themselves
# (the RNG's draws and sessions) or sign what the log holds (the anchor).
AFTER_DURABLE = frozenset(
    {ActionKind.DRAW_NUMBER, ActionKind.PREPARE_RNG, ActionKind.CLOSE_RNG, ActionKind.REANCHOR}
)


@dataclass(frozen=True, slots=True)
class Stored:
    """The step may be adopted. ``durable``: its records are in the log (or it had none);
    ``records``: its own records that this commit made durable, as (kind, sequence number);
    ``anchor_error``: the records are durable, but the anchor after them could not be kept."""

    durable: bool
    records: tuple[tuple[RecordKind, int], ...] = ()
    anchor_error: str | None = None


_WAITED = Stored(durable=False)  # every record of the step may wait: they wait
_NOTHING_TO_RECORD = Stored(durable=True)


@dataclass(frozen=True, slots=True)
class Lost:
    """The commit failed: the step is not adopted. The machine takes the storage ``fault``
    (with ``detail``, naming what was lost) from ``base``."""

    base: RoundContext
    fault: Fault
    detail: str


class Committer:
    """The loop's write-ahead: ``commit_step`` for every step, ``commit_fault`` for the step
    that latches the storage fault a ``Lost`` asked for. ``store`` returns the audit log in use
    (read at each commit); ``durable`` is the context the log holds at the start."""

    def __init__(self, store: Callable[[], AuditLog], durable: RoundContext) -> None:
        self._store = store
        self.last_seq: int | None = None  # the last record made durable
        self.is_storage_failed = False  # from a failed commit until the next one succeeds
        self._waiting: list[Record] = []  # records that may wait, not yet committed
        # the records of the step decided ahead, prepared, by the identity of their data
        self._ahead: dict[int, Prepared] = {}
        self._durable = durable  # the context stored with the last commit
        # what failed commits lost, until a storage fault naming it is durable
        self._unrecorded = Unrecorded()

    @property
    def waiting(self) -> tuple[Record, ...]:
        """The records that wait for the next step that must commit."""
        return tuple(self._waiting)

    def commit_step(
        self, before: RoundContext, after: RoundContext, actions: Sequence[Action]
    ) -> Stored | Lost:
        """The records of the step from ``before`` to ``after``, with the records that waited
        and ``after`` in one transaction; or, if they all may wait, kept for the next."""
        records = [self._take_prepared(record) for record in records_of(actions)]
        self._ahead = {}
        must_commit = _must_commit(actions)
        if records and not must_commit:
            # durable with the next step that must commit; prepared meanwhile
            self._waiting.extend(_prepared(record) for record in records)
            return _WAITED
        if not (records or (must_commit and self._waiting)):
            return _NOTHING_TO_RECORD
        batch = self._take_batch(records)
        try:
            committed = self._store().commit(batch, context=encode_context(after))
        except AuditLogError as exc:
            self._unrecorded = self._unrecorded.add(batch)
            return self._lost(before, exc, lid=after.is_lid_closed)
        except Exception as exc:  # noqa: BLE001 - what the log refuses to write is a bug
            self._unrecorded = self._unrecorded.add(batch)
            return self._refused(exc, lid=after.is_lid_closed)
        return self._stored(after, records, committed)

    def commit_fault(self, after: RoundContext, actions: Sequence[Action]) -> Stored:
        """The records of the step that latched the storage fault. It is adopted even if they
        cannot be recorded either (``durable`` False); once they are durable, the losses its
        fault names are forgotten."""
        records = records_of(actions)
        self._ahead = {}
        stored = Stored(durable=not records)
        if records or (_must_commit(actions) and self._waiting):
            batch = self._take_batch(records)
            try:
                committed = self._store().commit(batch, context=encode_context(after))
            except Exception as exc:  # noqa: BLE001 - the fault's step is adopted whatever
                self._unrecorded = self._unrecorded.add(batch)
                log.error("the fault could not be recorded either: %s", exc)
            else:
                stored = self._stored(after, records, committed)
        if stored.durable:
            self._unrecorded = Unrecorded()  # the fault that names the losses is durable
        return stored

    def prepare(self, actions: Sequence[Action]) -> int:
        """The records of a step decided ahead, checked and encoded before its event comes
        (see the module's docstring); those of any step before replaced. Returns how many
        were prepared."""
        prepared = [_prepared(record) for record in records_of(actions)]
        self._ahead = {id(r[1]): r for r in prepared if isinstance(r, Prepared)}
        store = self._store()
        if isinstance(store, SettlesLater):  # what the last commit left, done while we wait
            store.settle()
        return len(self._ahead)

    def settle_between_rounds(self) -> None:
        """The log's upkeep left from its commits (``SettlesLater``), done between rounds."""
        store = self._store()
        if isinstance(store, SettlesLater):
            store.settle_between_rounds()

    def _take_prepared(self, record: Record) -> Record:
        """The record prepared ahead for this very record, if there is one."""
        ahead = self._ahead.get(id(record[1]))
        if ahead is None or ahead[1] is not record[1] or ahead[0] != record[0]:
            return record
        return ahead

    def _take_batch(self, records: Sequence[Record]) -> list[Record]:
        batch, self._waiting = [*self._waiting, *records], []
        return batch

    def _stored(
        self, after: RoundContext, records: Sequence[Record], committed: Committed
    ) -> Stored:
        self._durable = after
        self.last_seq = committed.seqs[-1]
        self.is_storage_failed = False
        # the step's own records are the last of the batch (those that waited come first)
        own = committed.seqs[len(committed.seqs) - len(records) :] if records else []
        return Stored(
            durable=True,
            records=tuple((kind, seq) for (kind, _), seq in zip(records, own, strict=True)),
            anchor_error=committed.anchor_error,
        )

    def _lost(self, before: RoundContext, exc: AuditLogError, *, lid: bool) -> Lost:
        """The fault names what was lost since the last storage fault recorded: the records'
        kinds and rounds, and any result decided and so discarded."""
        lost = self._unrecorded.describe()
        log.error("audit log failed: %s; not recorded: %s", exc, lost)
        self.is_storage_failed = True
        # a lid record lost with the commit does not move the lid back
        base = replace(self._durable, is_lid_closed=lid)
        detail = f"{exc}; not recorded: {lost}"
        try:
            reopened = self._store().reopen()
        except AuditLogError as again:
            detail += f"; reopening failed: {again}"
        else:
            if reopened.size != reopened.acknowledged:
                # the failed commit may have reached the disk: a result in it is not discarded
                detail = (
                    f"{exc}; not recorded: {self._unrecorded.describe(discarded=False)}"
                    f"; the log holds {reopened.size} records where {reopened.acknowledged}"
                    " were acknowledged: it is taken as it is"
                )
                base = self._context_in_log(before, lid=lid)
                log.error("%s", detail)
        return Lost(base=base, fault=Fault(exc.fault), detail=detail)

    def _refused(self, exc: Exception, *, lid: bool) -> Lost:
        """A commit the log refused before writing (a record or a context it cannot take: a
        bug, not the storage, which stays trusted): as a failed commit, nothing of the step or
        of those whose records waited for it is adopted, and the internal fault names what
        was not recorded."""
        lost = self._unrecorded.describe()
        log.error("the audit log refused a commit: %s; not recorded: %s", exc, lost)
        base = replace(self._durable, is_lid_closed=lid)
        return Lost(base=base, fault=Fault.INTERNAL, detail=f"{exc}; not recorded: {lost}")

    def _context_in_log(self, before: RoundContext, *, lid: bool) -> RoundContext:
        try:
            stored = self._store().latest_context()
            if stored is None:
                return before
            ctx = decode_context(stored[1])
        except (AuditLogError, SnapshotError) as exc:
            log.error("the context in the log cannot be read: %s", exc)
            return before
        return replace(ctx, is_lid_closed=lid)


def records_of(actions: Iterable[Action]) -> list[Record]:
    """The records a step's actions make, in order."""
    return [
        (action.record, action.data)
        for action in actions
        if action.kind is ActionKind.RECORD and action.record is not None
    ]


def _prepared(record: Record) -> Record:
    """``record`` checked and encoded for its commit, or as it is where it cannot be: its
    commit then refuses it, as it refuses any record it cannot take."""
    if isinstance(record, Prepared):
        return record
    try:
        return prepare(*record)
    except Exception:  # noqa: BLE001 - refused by the commit, where refusals are handled
        return record


def _must_commit(actions: Iterable[Action]) -> bool:
    """Whether the step makes every waiting record durable: a record that may not wait, or an
    action that must come after the log (``AFTER_DURABLE``)."""
    return any(
        (a.kind is ActionKind.RECORD and not a.may_wait) or a.kind in AFTER_DURABLE for a in actions
    )
