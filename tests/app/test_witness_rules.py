"""The witness's rules (controller/witness/tables.py, fleet-v2.md), fed message by message as its
service feeds it (one store transaction per batch, then what it decided published), on logs the
audit log itself makes (tests/support/witness.py ``SmallTable``: a casino's origin, times the
test sets) and a real SQLite store: what an anonymous client of the broker can send (a replayed
checkpoint, a record re-numbered, a forged status, a flood of candidates) is stale or dropped
and counted, never an alert; two signed trees that disagree are evidence, named rollback or fork
by the records' signed times; nothing is held in memory alone across a restart."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support.witness import (
    SCHEMA_1,
    T0,
    FakeClock,
    Fed,
    SmallTable,
    TableLog,
    keys_of,
    renumbered,
    status_note,
)

from controller.audit.recall import export_line
from controller.core import canonical
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    Signer,
    cosign_note,
    open_checkpoint,
    open_cosignature,
    sign_note,
    unverified_checkpoint,
)
from controller.core.records import StoredRecord
from controller.fleet.protocol import END_OF_CONNECTION, AlertKind, Channel, Presence, topic
from controller.witness.chains import MAX_PER_SEQ, Candidates
from controller.witness.floor import Floor
from controller.witness.ports import CandidateRow, Severity
from controller.witness.store import SqliteStore
from controller.witness.tables import dice_words, rfc3339

TABLE = "table-7"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SqliteStore(tmp_path / "witness.db")
    yield s
    s.close()


def forgery(after: dict[str, Any], n: int) -> dict[str, Any]:
    """A round opened record of no one, following ``after``: the n-th of a flood."""
    value = canonical.decode(after["leaf"].encode())
    assert isinstance(value, dict)
    value = {**value, "seq": after["seq"] + 1, "prev": after["hash"], "kind": "round_opened"}
    value["data"] = {"round": 1000 + n}
    leaf = canonical.encode(value)
    return export_line(StoredRecord(value["seq"], "round_opened", leaf), None)


def cosigned_sizes(fed: Fed, log: TableLog) -> list[int]:
    sizes = []
    for note in fed.cosigned(log.table):
        cosigned = open_cosignature(note, fed.cosigner.verifier)
        assert open_checkpoint(note, log.key) == cosigned.checkpoint
        sizes.append(cosigned.checkpoint.size)
    return sizes


def head(fed: Fed, table: str = TABLE) -> Any:
    return fed.store.heads()[table]


# --- the common case --------------------------------------------------------------------------


def test_each_checkpoint_is_cosigned_once_and_its_copy_on_the_topic_is_stale(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(3).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    assert cosigned_sizes(fed, log) == [seq for seq, _ in log.checkpoints()]
    assert fed.alerts() == []
    assert (head(fed).size, head(fed).cosigned_size) == (log.size, log.size)
    assert fed.refused(f"{TABLE}/checkpoint: stale") == len(log.checkpoints())
    assert store.candidates() == {}  # every record accepted, none left waiting
    # the origin is the key's name (a casino's), not paigow-controller/<table>
    assert unverified_checkpoint(fed.cosigned(TABLE)[-1]).origin == "casino.example/paigow/table-7"
    fed.send(log, log.lines[:3])  # a resend: duplicates
    assert fed.refused(f"{TABLE}/records: duplicate") == 3


# --- stale checkpoints ----------------------------------------------------------------------


def test_a_replayed_older_checkpoint_is_stale_not_a_rollback(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(3).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    stale = fed.refused(f"{TABLE}/checkpoint: stale")
    for _, note in log.checkpoints():  # anyone on the broker can publish them again
        fed.checkpoint(TABLE, note)
    assert fed.refused(f"{TABLE}/checkpoint: stale") == stale + len(log.checkpoints())
    assert fed.alerts() == []
    assert not head(fed).halted
    # a restarted witness takes the broker's old retained checkpoint as stale too
    fed.start()
    fed.checkpoint(TABLE, log.checkpoints()[0][1])
    assert fed.alerts() == []
    assert not head(fed).halted


def test_an_older_copy_put_back_but_not_played_on_is_stale(
    tmp_path: Path, store: SqliteStore
) -> None:
    """Its records are the cosigned ones and its checkpoints the older ones: nothing signed
    disagrees (the table itself sees the cosignature larger than its log)."""
    table = SmallTable(tmp_path / "t").play(1)
    early = table.copy(tmp_path / "early").log()
    log = table.play(2).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    fed.send(early)
    assert fed.alerts() == []
    assert not head(fed).halted


# --- candidates ---------------------------------------------------------------------------------


def test_a_renumbered_record_published_anonymously_is_dropped_not_a_fork(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(3).log()
    fed = Fed(store, keys_of(log))
    first = log.checkpoints()[0][0]  # the first round, cosigned
    fed.send(log, log.lines[:first])
    forged = renumbered(log.lines[first - 1], log.lines[1])  # seq first + 1, the right prev
    fed.send(log, [forged])
    assert head(fed).size == first  # a candidate, not a fact
    assert [r.seq for r in store.candidates()[TABLE]] == [first + 1]
    fed.send(log, log.lines[first:])  # the table's own record beside it, and the rest
    assert cosigned_sizes(fed, log)[-1] == log.size
    assert fed.alerts() == []
    assert fed.refused(f"{TABLE}: unconfirmed records dropped") == 1
    assert store.candidates() == {}


def test_candidates_at_one_seq_are_bounded_and_the_signed_root_decides(
    tmp_path: Path, store: SqliteStore
) -> None:
    """A flood of forged records at the next seqs (each a chain of its own, by prev) costs a
    bounded store and bounded walks; the table's records, coming last, are still taken."""
    log = SmallTable(tmp_path / "t").play(3).log()
    fed = Fed(store, keys_of(log))
    first = log.checkpoints()[0][0]
    fed.send(log, log.lines[:first])
    after = log.lines[first - 1]
    for n in range(3 * MAX_PER_SEQ):  # 12 forgeries at first + 1, each a chain of 5
        chain = [forgery(after, n)]
        for k in range(4):
            chain.append(forgery(chain[-1], 100 * n + k))
        fed.send(log, chain)
    held = store.candidates()[TABLE]
    assert max(sum(1 for r in held if r.seq == s) for s in {r.seq for r in held}) <= MAX_PER_SEQ
    assert fed.refused(f"{TABLE}: candidates evicted (bounds)") == 2 * MAX_PER_SEQ * 5
    fed.send(log, log.lines[first:])
    assert cosigned_sizes(fed, log)[-1] == log.size
    assert fed.alerts() == []
    # each checkpoint walked back from at most MAX_PER_SEQ candidates at its size
    walks = fed.refused(f"{TABLE}: chain walks")
    assert walks <= MAX_PER_SEQ * 2 * len(log.checkpoints())
    assert fed.refused(f"{TABLE}: chain walk steps") <= walks * log.size


def test_the_candidates_index_evicts_the_oldest_and_refuses_what_cannot_fit() -> None:
    rows = [CandidateRow(s, f"{s:064x}", "", "k", b"", s, 10, 0.0) for s in range(1, 11)]
    index = Candidates(per_seq=2, per_table=5, max_bytes=45)
    gone = [g.seq for row in rows for g in index.add(row)]
    assert gone == [1, 2, 3, 4, 5, 6]  # 45 bytes hold 4 of 10; the oldest go first
    assert [c.seq for c in index] == [7, 8, 9, 10]
    assert index.bytes == 40
    assert index.add(CandidateRow(11, "f" * 64, "", "k", b"", 11, 46, 0.0))[0].seq == 11
    same = [CandidateRow(12, f"{n:064x}", "", "k", b"", 20 + n, 1, 0.0) for n in range(3)]
    index = Candidates(per_seq=2)
    assert [g.arrival for row in same for g in index.add(row)] == [20]  # the first at 12 went


def test_a_gap_then_a_witness_restart_loses_nothing(tmp_path: Path, store: SqliteStore) -> None:
    log = SmallTable(tmp_path / "t").play(3).log()
    fed = Fed(store, keys_of(log))
    first = log.checkpoints()[0][0]
    missing = first + 2
    fed.send(log, [line for line in log.lines if line["seq"] != missing])
    assert head(fed).size == first
    assert head(fed).pending_note == log.latest  # the newest checkpoint waits, in the store
    waiting = sorted(r.seq for r in store.candidates()[TABLE])
    assert waiting == [s for s in range(first + 1, log.size + 1) if s != missing]
    fed.tick(60)
    assert [a.kind for a in fed.alerts()] == [AlertKind.GAP]
    store.close()  # the witness stops; a new one reads the store
    fed.store = SqliteStore(tmp_path / "witness.db")
    fed.start()
    fed.send(log, [log.lines[missing - 1]])
    assert head(fed).size == log.size
    assert cosigned_sizes(fed, log)[-1] == log.size
    gap = fed.store.alerts(TABLE)[0]
    assert (gap.alert.kind, bool(gap.cleared)) == (AlertKind.GAP, True)
    fed.store.close()


# --- evidence: rollback and fork --------------------------------------------------------------


def test_two_copies_diverging_at_the_head_are_a_fork(tmp_path: Path, store: SqliteStore) -> None:
    """Both copies go on from the same record at the same time: their records interleave."""
    table = SmallTable(tmp_path / "t").play(1)
    other = table.copy(tmp_path / "other")
    log = table.play(2, at=T0 + 100).log()
    parallel = other.play(2, at=T0 + 101).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    fed.send(parallel)
    kinds = [a.kind for a in fed.alerts()]
    assert kinds == [AlertKind.FORK]
    fork = fed.alerts()[0]
    assert fork.size == 4  # round 1 is records 1..3: the two logs part at record 4
    assert "two copies" in fork.detail
    assert head(fed).halted.startswith("fork")
    before = len(fed.cosigned(TABLE))
    fed.send(log)  # nothing more is cosigned until the reset
    assert len(fed.cosigned(TABLE)) == before
    assert [a.severity for a in store.alerts(TABLE)] == [Severity.CRITICAL]


def test_an_older_copy_restored_and_played_on_is_a_rollback(
    tmp_path: Path, store: SqliteStore
) -> None:
    table = SmallTable(tmp_path / "t").play(1)
    older = table.copy(tmp_path / "older")
    log = table.play(2).log()
    rolled = older.play(2, at=table.at + 100).log()  # played on later, from the copy
    fed = Fed(store, keys_of(log))
    fed.send(log)
    fed.send(rolled)
    assert [a.kind for a in fed.alerts()] == [AlertKind.ROLLBACK]
    alert = fed.alerts()[0]
    assert alert.size == 4  # round 1 is records 1..3: the other log parts at record 4
    assert "older copy" in alert.detail
    assert "--reset-table table-7" in alert.detail


def test_a_rollback_whose_first_checkpoint_is_past_the_cosigned_size(
    tmp_path: Path, store: SqliteStore
) -> None:
    """The branch's records and a checkpoint larger than the cosigned size: its root is that
    of the accepted records up to the branch point and the branch (fleet-v2.md: M > N with a
    chain that contradicts the accepted records)."""
    table = SmallTable(tmp_path / "t").play(1)
    older = table.copy(tmp_path / "older")
    log = table.play(1).log()
    rolled = older.play(3, at=table.at + 100).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    assert rolled.size > log.size
    fed.send(rolled, rolled.without_checkpoints())  # records alone: candidates, no alert
    assert fed.alerts() == []
    fed.checkpoint(TABLE, rolled.latest)
    assert [(a.kind, a.size) for a in fed.alerts()] == [(AlertKind.ROLLBACK, 4)]


def test_two_signed_checkpoints_of_one_size_with_two_roots_are_evidence(
    tmp_path: Path, store: SqliteStore
) -> None:
    """Whether the records of either have come or not: the table's key signed two trees."""
    log = SmallTable(tmp_path / "t").play(2).log()
    checkpoint = unverified_checkpoint(log.latest)
    other = sign_note(Checkpoint(checkpoint.origin, checkpoint.size, bytes(32)).text(), log.signer)
    for records in (log.without_checkpoints(), log.without_checkpoints()[:-1]):
        with store.transaction():
            store.reset_table(TABLE, "2026-12-01T10:00:00Z", "test")
        fed = Fed(store, keys_of(log))
        fed.send(log, records)
        fed.checkpoint(TABLE, other)  # waits: no chain gives its root
        assert fed.alerts() == []
        fed.checkpoint(TABLE, log.latest)
        assert [a.kind for a in fed.alerts()] == [AlertKind.FORK]
        assert head(fed).halted.startswith("fork")


def test_a_reset_table_is_taken_as_new(tmp_path: Path, store: SqliteStore) -> None:
    table = SmallTable(tmp_path / "t").play(1)
    older = table.copy(tmp_path / "older")
    log = table.play(2).log()
    rolled = older.play(2, at=table.at + 100).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    fed.send(rolled)
    with store.transaction():
        store.reset_table(TABLE, "2026-12-01T10:00:00Z", "test")
    fed.start()
    fed.send(rolled)
    assert cosigned_sizes(fed, rolled)[-1] == rolled.size
    assert [a.alert.kind for a in store.alerts(TABLE)] == [AlertKind.ROLLBACK]


# --- C2SP: the body as received ----------------------------------------------------------------


def test_a_checkpoint_with_an_extension_line_is_cosigned_as_received(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(2).log()
    fed = Fed(store, keys_of(log))
    fed.send(log, log.without_checkpoints())
    checkpoint = unverified_checkpoint(log.latest)
    body = checkpoint.text() + "casino.example/extension 1\n"
    note = sign_note(body, log.signer)
    fed.checkpoint(TABLE, note)
    cosigned = fed.cosigned(TABLE)[-1]
    assert cosigned.startswith(note)  # the note as received, then the cosignature line
    assert cosigned.count("\n— ") == 2
    opened = open_cosignature(cosigned, fed.cosigner.verifier)
    assert opened.checkpoint == checkpoint
    # the signed message is the body as received, extension line included
    raw = base64.b64decode(cosigned.splitlines()[-1].split(" ")[2])
    message = f"cosignature/v1\ntime {opened.timestamp}\n{body}".encode()
    assert fed.cosigner.verifier.verify(message, raw[12:])


def test_a_checkpoint_body_that_is_not_canonical_is_refused(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(1).log()
    fed = Fed(store, keys_of(log))
    fed.send(log, log.without_checkpoints())
    checkpoint = unverified_checkpoint(log.latest)
    root = base64.b64encode(checkpoint.root_hash).decode()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(root[-2]) | 1]  # its two padding bits not zero
    mangled = root[:-2] + last + "="  # the same 32 bytes, another text
    assert base64.b64decode(mangled) == checkpoint.root_hash
    note = sign_note(f"{checkpoint.origin}\n{checkpoint.size}\n{mangled}\n", log.signer)
    fed.checkpoint(TABLE, note)
    assert fed.cosigned(TABLE) == []
    assert [a.kind for a in fed.alerts()] == [AlertKind.BAD_SIGNATURE]


def test_a_checkpoint_of_another_origin_is_refused(tmp_path: Path, store: SqliteStore) -> None:
    log = SmallTable(tmp_path / "t").play(1).log()
    fed = Fed(store, keys_of(log))
    fed.send(log, log.without_checkpoints())
    checkpoint = unverified_checkpoint(log.latest)
    other = Checkpoint(f"paigow-controller/{TABLE}", checkpoint.size, checkpoint.root_hash)
    fed.checkpoint(TABLE, sign_note(other.text(), log.signer))
    assert fed.cosigned(TABLE) == []
    assert "origin 'paigow-controller/table-7'" in fed.alerts()[0].detail


# --- statuses and silence ---------------------------------------------------------------------


def test_statuses_signed_newer_only_and_kept_across_a_restart(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(1).log()
    fed = Fed(store, keys_of(log))
    fed.status(log, status_note(log, 3, 2))
    assert head(fed).status_order == (3, 2)
    fed.status(log, status_note(log, 3, 1))  # a replayed older one
    fed.status(log, status_note(log, 2, 9))
    assert fed.refused(f"{TABLE}/status: stale") == 2
    impostor = Signer.generate(log.key.name)
    fed.status(log, status_note(log, 4, 1, signer=impostor))  # a forged one
    fed.status(log, b'{"status": "online", "screen": "ready"}')  # protocol v1's plain JSON
    assert fed.refused(f"{TABLE}/status: refused") == 2
    assert head(fed).status_order == (3, 2)
    assert fed.alerts() == []
    fed.status(log, status_note(log, 3, END_OF_CONNECTION, Presence.OFFLINE, ""))  # the will
    offline = fed.alerts()[-1]
    assert offline.kind is AlertKind.DEVICE_OFFLINE
    assert "last will" in offline.detail
    fed.start()  # the order is the store's
    fed.status(log, status_note(log, 3, 5))
    assert fed.refused(f"{TABLE}/status: stale") == 1
    fed.status(log, status_note(log, 4, 1))
    assert store.alerts(TABLE)[-1].cleared  # back online


def test_silence_is_judged_on_the_witness_clock_across_a_restart(
    tmp_path: Path, store: SqliteStore
) -> None:
    log = SmallTable(tmp_path / "t").play(2).log()
    fed = Fed(store, keys_of(log))
    fed.send(log)
    fed.tick(500)
    fed.status(log, status_note(log, 1, END_OF_CONNECTION, Presence.OFFLINE, ""))  # no reset
    fed.checkpoint(TABLE, log.checkpoints()[0][1])  # stale: no reset either
    fed.send(log, [renumbered(log.lines[-1], log.lines[1])])  # a candidate: no reset
    fed.start()  # a restart does not start the count again
    fed.tick(99)
    assert AlertKind.SILENCE not in [a.kind for a in fed.alerts()]
    fed.tick(1)
    assert [a.kind for a in fed.alerts()].count(AlertKind.SILENCE) == 1
    fed.start()
    fed.tick(1000)
    assert [a.kind for a in fed.alerts()].count(AlertKind.SILENCE) == 1  # it stands
    fed.status(log, status_note(log, 2, 1))
    silence = [a for a in store.alerts(TABLE) if a.alert.kind is AlertKind.SILENCE]
    assert silence[0].cleared


def test_the_dashboard_after_a_restart_is_the_one_before(
    tmp_path: Path, store: SqliteStore
) -> None:
    """Rebuilt from the store before the first message: the cards (records accepted, the
    cosignature, the signed status, the unconfirmed records) and the alerts."""
    log = SmallTable(tmp_path / "t").play(3).log()
    clock = FakeClock()
    before = Floor(clock=clock)
    fed = Fed(store, keys_of(log), clock=clock, floor=before)
    fed.send(log, log.lines[:-1])  # the last round's close not yet: its opening unconfirmed
    fed.status(log, status_note(log, 4, 2, screen="bets_open"))
    fed.batch([(topic("table-9", Channel.STATUS), b"{}")])
    after = Floor(clock=clock)
    fed.floor = after
    fed.start()
    shown = ("presence", "screen", "log_size", "anchored_size", "anchored_time", "unconfirmed",
             "round", "alerting", "alerts")  # fmt: skip
    old, new = before.table(TABLE), after.table(TABLE)
    assert old is not None
    assert new is not None
    assert {k: new[k] for k in shown} == {k: old[k] for k in shown}
    assert new["unconfirmed"]["count"] == 1  # the round opened; its close is the last record
    assert [a["kind"] for a in after.snapshot()["alerts"]] == ["unknown_table"]


# --- alerts: acknowledged by a named user -----------------------------------------------------


def test_an_alert_is_acknowledged_by_a_named_user_once(tmp_path: Path, store: SqliteStore) -> None:
    log = SmallTable(tmp_path / "t").play(1).log()
    fed = Fed(store, keys_of(log))
    fed.batch([(topic("table-9", Channel.RECORDS), b"{}")])
    impostor = Signer.generate(log.key.name)
    forged = sign_note(unverified_checkpoint(log.latest).text(), impostor)
    fed.checkpoint(TABLE, forged)
    fed.checkpoint(TABLE, forged)  # it stands: not raised again
    assert [a.kind for a in fed.alerts()] == [AlertKind.UNKNOWN_TABLE, AlertKind.BAD_SIGNATURE]
    bad = store.alerts(TABLE)[0]
    fed.clock.now += 30
    stored, recorded = fed.acknowledge(bad.id, "S100 Pat")
    assert recorded
    assert (stored.acked_by, stored.acked_at) == ("S100 Pat", rfc3339(T0 + 30))
    again, recorded = fed.acknowledge(bad.id, "S200")
    assert not recorded
    assert again.acked_by == "S100 Pat"
    assert fed.acknowledge(999, "S100") == (None, False)
    fed.checkpoint(TABLE, forged)  # acknowledged: the next one is an alert again
    assert [a.kind for a in fed.alerts()].count(AlertKind.BAD_SIGNATURE) == 2


def test_dice_words_say_what_a_pit_boss_reads() -> None:
    counts = {"red": [20, 25, 30, 28, 21, 56], "blue": [60] * 6, "total": [0] * 16}
    data = {"test": "red", "face": 6, "rolls": 180, "counts": counts, "round": 41, "locks": True,
            "log_e": "9.210", "threshold": "6.908"}  # fmt: skip
    words = dice_words("table-7", data)
    assert words.startswith("dice on table-7 look loaded: red 6 seen 31 % of 180 rolls")
    assert "the table locks after the round" in words
    blue = dice_words("t", {**data, "test": "blue", "face": 2, "locks": False})
    assert "blue 2 seen 17 % of 360 blue dice (180 rolls)" in blue
    total = dice_words("t", {**data, "test": "total", "face": None})
    assert "totals of the three dice are off after 180 rolls" in total


# --- the store of schema 1 ----------------------------------------------------------------------


def schema_1_store(path: Path, log: TableLog, cosigned: int, held: int, witness: Signer) -> None:
    """A witness of schema 1 that cosigned ``cosigned`` records and held ``held`` (the records
    past the checkpoint were facts to it), with a fork and a gap alert."""
    from controller.core.merkle import CompactRange, leaf_hash

    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)
    tree = CompactRange()
    for line in log.lines[:held]:
        tree.append_hash(leaf_hash(line["leaf"].encode()))
        db.execute(
            "INSERT INTO leaves VALUES (?, ?, ?, ?, ?)",
            (log.table, line["seq"], line["kind"], line["leaf"].encode(), tree.root()),
        )
    root = unverified_checkpoint(log.lines[cosigned - 1]["checkpoint"]).root_hash
    db.execute(
        "INSERT INTO heads VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (log.table, held, log.lines[held - 1]["hash"], tree.to_bytes(), cosigned, root,
         cosign_note(log.lines[cosigned - 1]["checkpoint"], witness, 1), ""),
    )  # fmt: skip
    db.execute("INSERT INTO cosignatures VALUES (?, ?, ?, ?)", (log.table, cosigned, 1, "n"))
    for kind in ("fork", "gap"):
        db.execute(
            "INSERT INTO alerts (table_name, kind, detail, time, size) VALUES (?, ?, ?, ?, ?)",
            (log.table, kind, "then", "2026-11-30T08:00:00.000Z", 1),
        )
    db.commit()
    db.close()


def test_a_store_of_schema_1_is_migrated_and_its_unsigned_records_go_back_to_candidates(
    tmp_path: Path,
) -> None:
    log = SmallTable(tmp_path / "t").play(3).log()
    first = log.checkpoints()[0][0]
    path = tmp_path / "witness.db"
    cosigner = Signer.generate("witness.test/w1", ALG_COSIGNATURE_V1)
    schema_1_store(path, log, first, first + 2, cosigner)
    store = SqliteStore(path)
    try:
        assert store._rows("SELECT value FROM witness_meta")[0][0] == "2"
        alerts = store.alerts(TABLE)
        assert [(a.severity, bool(a.cleared)) for a in alerts] == [
            (Severity.CRITICAL, False),  # the fork stands until acknowledged
            (Severity.WARNING, True),  # the gap of schema 1: cleared at the migration
        ]
        fed = Fed(store, keys_of(log), cosigner)
        assert head(fed).size == first  # only what a signed checkpoint covered
        assert sorted(r.seq for r in store.candidates()[TABLE]) == [first + 1, first + 2]
        fed.send(log, log.lines[first + 2 :])
        assert cosigned_sizes(fed, log)[-1] == log.size
        assert store.leaf(TABLE, first + 1) == log.lines[first]["leaf"].encode()
    finally:
        store.close()
    again = SqliteStore(path)  # opened again: schema 2, nothing to do
    again.close()
