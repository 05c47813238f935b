"""The control loop's write-ahead on its own (controller/app/committer.py): records that may wait
share the next durable step's transaction, and a failed commit at any point leaves the table
where the log says it is, with a storage fault that names what was lost. The store is a small
audit log that fails on command (it takes no more after a failed commit until it is reopened,
as the real one), and the real log with a page limit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.records import valid

from controller.app.committer import Committer, Lost, Stored
from controller.audit.log import AuditLog as SqliteLog
from controller.core.log_state import Prepared
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import Action, ActionKind, Fault, RoundContext, State
from controller.errors import AuditLogError
from controller.ports import AuditLog, Committed, Reopened

Entry = tuple[RecordKind, Mapping[str, object]]


class Store:
    """An audit log in memory that fails on command: ``fail`` the next commit, its records
    ``written`` to the disk all the same or not; ``reopen_fails``; an ``anchor_error`` after
    each commit. After a failed commit it takes nothing until ``reopen``."""

    def __init__(self) -> None:
        self.records: list[Entry] = []
        self.contexts: list[bytes] = []  # the context stored with each commit
        self.transactions: list[list[Entry]] = []
        self.acknowledged = 0
        self.fail: str | None = None  # "unwritten" or "written": the next commit fails
        self.fail_at: tuple[int, str] | None = None  # (n, how): the n-th commit fails
        self.calls = 0
        self.reopen_fails = False
        self.anchor_error: str | None = None
        self.is_poisoned = False

    @property
    def next_seq(self) -> int:
        return len(self.records) + 1

    def commit(self, entries: Sequence[Entry], *, context: bytes | None = None) -> Committed:
        if self.is_poisoned:
            raise AuditLogError("audit log: not reopened since the last failure")
        self.calls += 1
        how, self.fail = self.fail, None
        if self.fail_at is not None and self.fail_at[0] == self.calls:
            how = self.fail_at[1]
        if how != "unwritten":
            first = self.next_seq
            self.records.extend(entries)
            self.transactions.append(list(entries))
            if context is not None:
                self.contexts.append(context)
        if how is not None:
            self.is_poisoned = True
            raise AuditLogError(f"audit log: cannot write audit.db: {how} (injected)")
        self.acknowledged = len(self.records)
        seqs = list(range(first, self.next_seq))
        return Committed(seqs=seqs, anchor_error=self.anchor_error)

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        return self.commit([(kind, data)]).seqs[0]

    def reopen(self) -> Reopened:
        if self.reopen_fails:
            raise AuditLogError("audit log: cannot open audit.db (injected)")
        self.is_poisoned = False
        reopened = Reopened(acknowledged=self.acknowledged, size=len(self.records))
        self.acknowledged = len(self.records)
        return reopened

    def latest_context(self) -> tuple[int, bytes] | None:
        return (len(self.records), self.contexts[-1]) if self.contexts else None

    def reanchor(self) -> int:
        return len(self.records)

    def recall(self, last: int) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        pass

    def kinds(self) -> list[str]:
        return [str(kind) for kind, _ in self.records]


def record(kind: RecordKind, *, may_wait: bool = False, **data: object) -> Action:
    return Action(ActionKind.RECORD, record=kind, data=data, may_wait=may_wait)


def context(round_number: int, state: State = State.IDLE, **fields: Any) -> RoundContext:
    return replace(RoundContext(), round_number=round_number, state=state, **fields)


START = context(1)
BETS_CLOSED = context(2, State.WAITING)
READING = context(2, State.READING, attempt=1)
SETTLED = context(2, State.SETTLING, attempt=2)
FAULTED = context(1, State.FAULT, active_faults=frozenset({Fault.STORAGE}))

NO_MORE_BETS = record(RecordKind.NO_MORE_BETS, may_wait=True, round=2)
WAITING_READ = record(RecordKind.READING, may_wait=True, round=2, attempt=1)
DECIDED = record(RecordKind.RESULT, round=2, attempt=1)
FAULT_RECORD = record(RecordKind.FAULT, fault="storage")


def committer(store: AuditLog, durable: RoundContext = START) -> Committer:
    return Committer(lambda: store, durable)


def test_a_step_s_records_are_durable_with_its_context_before_it_is_adopted() -> None:
    store = Store()
    stored = committer(store).commit_step(START, BETS_CLOSED, [DECIDED])
    assert stored == Stored(durable=True, records=((RecordKind.RESULT, 1),))
    assert store.kinds() == ["result"]
    assert decode_context(store.contexts[-1]) == BETS_CLOSED


def test_records_that_may_wait_share_the_transaction_of_the_next_durable_step() -> None:
    store = Store()
    writer = committer(store)
    assert writer.commit_step(START, BETS_CLOSED, [NO_MORE_BETS]) == Stored(durable=False)
    assert writer.commit_step(BETS_CLOSED, READING, [WAITING_READ]) == Stored(durable=False)
    assert store.records == []  # nothing written yet: nothing of them is shown as durable
    assert len(writer.waiting) == 2
    stored = writer.commit_step(READING, SETTLED, [DECIDED])
    # one transaction, those that waited first; the step notes only its own record
    assert store.transactions == [_entries(NO_MORE_BETS, WAITING_READ, DECIDED)]
    assert stored == Stored(durable=True, records=((RecordKind.RESULT, 3),))
    assert writer.last_seq == 3
    assert writer.waiting == ()
    assert decode_context(store.contexts[-1]) == SETTLED


@pytest.mark.parametrize(
    "kind", [ActionKind.DRAW_NUMBER, ActionKind.PREPARE_RNG, ActionKind.CLOSE_RNG]
)
def test_an_action_that_comes_after_the_log_makes_the_waiting_records_durable(
    kind: ActionKind,
) -> None:
    store = Store()
    writer = committer(store)
    writer.commit_step(START, BETS_CLOSED, [NO_MORE_BETS])
    stored = writer.commit_step(BETS_CLOSED, READING, [Action(kind)])
    assert stored == Stored(durable=True)  # no record of its own
    assert store.kinds() == ["no_more_bets"]
    assert decode_context(store.contexts[-1]) == READING


def test_a_step_without_records_commits_nothing() -> None:
    store = Store()
    writer = committer(store)
    assert writer.commit_step(START, START, [Action(ActionKind.LAMP_TEST)]) == Stored(True)
    assert writer.commit_step(START, START, [Action(ActionKind.REANCHOR)]) == Stored(True)
    assert store.transactions == []


def test_an_anchor_that_could_not_be_kept_is_told_with_the_durable_records() -> None:
    store = Store()
    store.anchor_error = "the anchor file cannot be written"
    stored = committer(store).commit_step(START, BETS_CLOSED, [DECIDED])
    assert stored.durable
    assert stored.anchor_error == "the anchor file cannot be written"


def test_a_failed_commit_leaves_the_table_where_the_log_says_it_is() -> None:
    store = Store()
    writer = committer(store)
    writer.commit_step(START, BETS_CLOSED, [NO_MORE_BETS])
    writer.commit_step(BETS_CLOSED, READING, [WAITING_READ])
    store.fail = "unwritten"
    lost = writer.commit_step(READING, replace(SETTLED, is_lid_closed=True), [DECIDED])
    # neither the step nor those whose records waited for it: the context of the last commit
    # (the start), the lid where the hardware said it is
    assert isinstance(lost, Lost)
    assert lost.base == replace(START, is_lid_closed=True)
    assert lost.fault is Fault.STORAGE
    assert lost.detail == (
        "audit log: cannot write audit.db: unwritten (injected); not recorded: no_more_bets,"
        " reading, result in round 2; a result was decided and discarded (round 2 attempt 1)"
    )
    assert writer.is_storage_failed
    assert writer.waiting == ()
    assert store.records == []
    assert not store.is_poisoned  # reopened: the fault's step may be recorded


def test_a_failed_commit_that_reached_the_disk_is_taken_as_the_log_holds_it() -> None:
    store = Store()
    writer = committer(store)
    writer.commit_step(START, BETS_CLOSED, [DECIDED])
    store.fail = "written"
    lost = writer.commit_step(BETS_CLOSED, SETTLED, [record(RecordKind.RESULT, round=3)])
    assert isinstance(lost, Lost)
    assert lost.base == SETTLED  # what the log holds, not what was acknowledged
    assert lost.detail == (
        "audit log: cannot write audit.db: written (injected); not recorded: result in round 3;"
        " a result was decided (round 3); the log holds 2 records where 1 were acknowledged:"
        " it is taken as it is"
    )


def test_a_log_that_cannot_be_reopened_is_named_in_the_fault() -> None:
    store = Store()
    writer = committer(store)
    store.fail = "unwritten"
    store.reopen_fails = True
    lost = writer.commit_step(START, BETS_CLOSED, [record(RecordKind.CLOSE, round=1)])
    assert isinstance(lost, Lost)
    assert lost.base == START
    assert lost.detail.endswith(
        "not recorded: close in round 1; no result among them;"
        " reopening failed: audit log: cannot open audit.db (injected)"
    )
    # the fault's own step cannot be recorded either, and is adopted all the same
    assert writer.commit_fault(FAULTED, [FAULT_RECORD]) == Stored(durable=False)
    assert writer.is_storage_failed


def test_the_storage_fault_names_every_loss_until_it_is_recorded() -> None:
    store = Store()
    writer = committer(store)
    store.fail = "unwritten"
    first = writer.commit_step(READING, SETTLED, [DECIDED])
    assert isinstance(first, Lost)
    store.fail = "unwritten"  # the fault's own record fails too
    assert writer.commit_fault(FAULTED, [FAULT_RECORD]) == Stored(durable=False)
    store.reopen()
    store.fail = "unwritten"  # and the next step's
    second = writer.commit_step(FAULTED, START, [record(RecordKind.FAULT_CLEARED)])
    assert isinstance(second, Lost)
    assert second.detail.endswith(
        "not recorded: result in round 2; fault, fault_cleared; a result was decided and"
        " discarded (round 2 attempt 1)"
    )
    # the fault that names them is durable: they are forgotten
    stored = writer.commit_fault(FAULTED, [FAULT_RECORD])
    assert stored == Stored(durable=True, records=((RecordKind.FAULT, 1),))
    assert not writer.is_storage_failed
    assert store.kinds() == ["fault"]
    store.fail = "unwritten"
    third = writer.commit_step(FAULTED, START, [record(RecordKind.FAULT_CLEARED)])
    assert isinstance(third, Lost)
    assert "not recorded: fault_cleared; no result among them" in third.detail


def test_a_failure_at_any_commit_never_puts_the_table_ahead_of_the_log() -> None:
    """A round's steps, the commit of each failing in turn (its records written or not): what
    the committer reports durable is in the log, and the fault is taken from the context the
    log holds (the last acknowledged one when the failed commit did not reach the disk)."""
    steps: list[tuple[RoundContext, list[Action]]] = [
        (context(1, State.IDLE, is_running=True), [record(RecordKind.POWER_ON)]),
        (BETS_CLOSED, [NO_MORE_BETS]),
        (context(2, State.READING), [Action(ActionKind.DRAW_NUMBER)]),
        (context(2, State.READING, attempt=2), [WAITING_READ]),
        (SETTLED, [DECIDED]),
        (context(3), [record(RecordKind.CLOSE, round=2)]),
    ]
    for failing in (1, 2, 3, 4):  # power on, the draw, the result, the close
        for how in ("unwritten", "written"):
            store = Store()
            store.fail_at = (failing, how)
            writer = committer(store)
            before = START
            for after, actions in steps:
                outcome = writer.commit_step(before, after, actions)
                if isinstance(outcome, Lost):
                    held = decode_context(store.contexts[-1]) if store.contexts else START
                    assert outcome.base == held, (failing, how)
                    assert writer.is_storage_failed
                    break
                for kind, seq in outcome.records:
                    assert store.records[seq - 1][0] is kind  # durable, where it says
                if outcome.durable:
                    assert decode_context(store.contexts[-1]) == after
                before = after
            else:
                pytest.fail(f"commit {failing} never failed ({how})")
            assert store.calls == failing


def test_the_real_log_at_its_page_limit_fails_a_commit_and_takes_the_fault(
    tmp_path: Path,
) -> None:
    log = SqliteLog.open(tmp_path, max_page_count=60)
    try:
        writer = committer(log)
        decided = record(RecordKind.RESULT, **valid(RecordKind.RESULT, round=2, attempt=1))
        assert writer.commit_step(START, BETS_CLOSED, [decided]).durable
        padded = valid(RecordKind.RESULT, round=3, attempt=1, payouts={"note": "x" * 400_000})
        too_big = record(RecordKind.RESULT, **padded)
        lost = writer.commit_step(BETS_CLOSED, SETTLED, [too_big])
        assert isinstance(lost, Lost)
        assert lost.base == BETS_CLOSED  # the last commit's
        assert "not recorded: result in round 3; a result was decided and discarded" in (
            lost.detail
        )
        fault = record(RecordKind.FAULT, **valid(RecordKind.FAULT, fault="storage"))
        stored = writer.commit_fault(FAULTED, [fault])
        assert stored.durable  # the log was reopened: the small fault record fits
        assert [kind for kind, _ in stored.records] == [RecordKind.FAULT]
        assert log.latest_context() == (stored.records[0][1], encode_context(FAULTED))
    finally:
        log.close()


def _entries(*actions: Action) -> list[Entry]:
    return [(a.record, a.data) for a in actions if a.record is not None]


def test_a_record_the_real_log_refuses_is_an_internal_fault_that_names_what_was_lost(
    tmp_path: Path,
) -> None:
    """A record its schema refuses (a bug: the core checks what it makes, but the log is the
    one way in): nothing of the step, nor of the records that waited for it, is adopted or
    dropped unnamed; the log stays trusted and takes the fault that names them."""
    log = SqliteLog.open(tmp_path)
    try:
        writer = committer(log)
        first = record(RecordKind.NO_MORE_BETS, **valid(RecordKind.NO_MORE_BETS, round=2))
        assert writer.commit_step(START, BETS_CLOSED, [first]).durable
        waiting = replace(
            record(RecordKind.READING, **valid(RecordKind.READING, round=2, attempt=1)),
            may_wait=True,
        )
        assert writer.commit_step(BETS_CLOSED, READING, [waiting]) == Stored(durable=False)
        shapeless = record(RecordKind.RESULT, round=2, attempt=1)  # none of a result's fields
        lost = writer.commit_step(READING, replace(SETTLED, is_lid_closed=True), [shapeless])
        assert isinstance(lost, Lost)
        assert lost.fault is Fault.INTERNAL
        assert lost.base == replace(BETS_CLOSED, is_lid_closed=True)  # the last durable
        assert lost.detail.startswith("a result record lacks its game")
        assert lost.detail.endswith(
            "not recorded: reading, result in round 2; a result was decided and discarded"
            " (round 2 attempt 1)"
        )
        assert not writer.is_storage_failed  # the storage is not at fault
        assert writer.waiting == ()
        assert log.size == 2  # log_created, no_more_bets
        fault = record(RecordKind.FAULT, **valid(RecordKind.FAULT, detail=lost.detail))
        stored = writer.commit_fault(FAULTED, [fault])
        assert stored == Stored(durable=True, records=((RecordKind.FAULT, 3),))
    finally:
        log.close()


def test_a_fault_step_the_log_refuses_is_adopted_not_durable() -> None:
    class Refusing(Store):
        def commit(self, entries: Sequence[Entry], *, context: bytes | None = None) -> Committed:
            raise ValueError("a record the schema refuses")

    writer = committer(Refusing())
    assert writer.commit_fault(FAULTED, [FAULT_RECORD]) == Stored(durable=False)


# --- records prepared ahead (Committer.prepare) -----------------------------------------------


def test_the_records_of_a_step_decided_ahead_are_committed_as_prepared() -> None:
    """The decided step's very records reach the log prepared (checked and encoded ahead), and
    so does a record that waited; an equal record that is not the same object, a record that
    cannot be prepared, and one prepared for a step before, go as they are."""
    store = Store()
    c = committer(store, READING)
    waited = Action(
        ActionKind.RECORD,
        record=RecordKind.LID,
        data=valid(RecordKind.LID, round=2),
        may_wait=True,
    )
    assert c.commit_step(READING, READING, [waited]) == Stored(durable=False)
    [pending] = c.waiting
    assert isinstance(pending, Prepared)
    assert pending[1] is waited.data
    result = Action(ActionKind.RECORD, record=RecordKind.CLOSE, data=valid(RecordKind.CLOSE))
    assert c.prepare([result, DECIDED]) == 1  # DECIDED holds no result's fields: not prepared
    c.commit_step(READING, SETTLED, [result, DECIDED])
    batch = store.transactions[-1]
    assert [isinstance(entry, Prepared) for entry in batch] == [True, True, False]
    assert batch[0] is pending
    assert batch[1][1] is result.data
    assert [kind for kind, _ in batch] == [RecordKind.LID, RecordKind.CLOSE, RecordKind.RESULT]

    c.prepare([result])
    equal = replace(result, data=dict(result.data))  # the same record, not the one prepared
    c.commit_step(SETTLED, SETTLED, [equal])
    assert not isinstance(store.transactions[-1][0], Prepared)
    c.commit_step(SETTLED, SETTLED, [result])  # prepared for a step before: taken afresh
    assert not isinstance(store.transactions[-1][0], Prepared)
