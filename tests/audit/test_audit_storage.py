"""Full or broken storage: the append fails loudly, nothing recorded is lost, the log verifies."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.audit_writer import _to_layout_before_the_head
from support.killed_log import kill_writing, records_in_the_database_file
from support.records import valid

from controller.audit import log as audit_log
from controller.audit.log import (
    DB_NAME,
    KEY_FILE,
    AuditLog,
    connect_read_only,
    create_signer,
    load_signer,
    read_latest_checkpoint,
    read_records,
)
from controller.audit.verify import verify_state_dir
from controller.cli import main
from controller.core.dice import Roll
from controller.core.meters import Meters
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.result import result_of_roll
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import RoundContext, State
from controller.core.wagers import sum_paytable_a
from controller.errors import (
    AuditLogError,
    LogDamagedError,
    LogIdentityError,
    LogIntegrityError,
    StorageFull,
)


def test_a_full_database_raises_storage_full_and_keeps_every_record(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path, max_page_count=12)
    appended = log.size  # the log_created record
    full: StorageFull | None = None
    for n in range(10_000):
        try:
            log.append(RecordKind.READING, _padded_reading(n + 1))
        except StorageFull as exc:
            full = exc
            break
        appended += 1
    assert full is not None
    assert appended > 1
    assert log.size == appended
    with pytest.raises(AuditLogError):  # refused until reopened: never silently dropped
        log.append(RecordKind.VOID, valid(RecordKind.VOID, round=1))
    assert log.reopen().size == appended
    with pytest.raises(StorageFull):  # still full: the same record is still refused
        log.append(RecordKind.READING, _padded_reading(1))
    log.close()
    verifier = _verifier(tmp_path)
    assert verify_state_dir(tmp_path, verifier).records == appended
    again = AuditLog.open(tmp_path)  # room again (no page limit): the log goes on
    assert again.size == appended
    again.append(RecordKind.VOID, valid(RecordKind.VOID, round=1))
    again.close()
    assert verify_state_dir(tmp_path, verifier).records == appended + 1


def test_a_corrupt_database_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog.open(tmp_path)
    log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
    log.close()
    db = tmp_path / DB_NAME
    db.write_bytes(b"this is not an SQLite database" * 200)
    for suffix in ("-wal", "-shm"):  # kept at a close: the WAL's pages would be read instead
        db.with_name(db.name + suffix).unlink()
    with pytest.raises(AuditLogError, match="not a database"):
        AuditLog.open(tmp_path)
    assert main(["verify-log", "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "not a database" in err
    assert "Traceback" not in err


def test_a_read_only_connection_refuses_to_append(tmp_path: Path) -> None:
    """A read-only file system: SQLite answers SQLITE_READONLY; the append raises."""
    log = AuditLog.open(tmp_path)
    log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
    log._db.execute("PRAGMA query_only=1")  # what a read-only mount looks like to the writer
    with pytest.raises(AuditLogError) as caught:
        log.append(RecordKind.VOID, valid(RecordKind.VOID, round=1))
    assert not isinstance(caught.value, StorageFull)
    assert log.size == 2
    assert log.is_poisoned
    log.close()


def test_floats_are_refused_not_recorded(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path)
    with pytest.raises(AuditLogError, match="float"):
        log.append(RecordKind.READING, valid(RecordKind.READING, dice=[0.97]))
    assert log.size == 1
    assert not log.is_poisoned  # nothing was written: the log goes on
    log.close()


def _padded_reading(round_number: int) -> dict[str, Any]:
    """A reading of some 400 bytes, to fill a small database in few records."""
    return valid(RecordKind.READING, round=round_number, image_digest="ab" * 32, verdict="x" * 300)


def _verifier(state: Path):  # type: ignore[no-untyped-def]
    signer = load_signer(state)
    assert signer is not None
    return signer.verifier


def test_the_key_is_created_once_with_mode_0600_and_never_replaced(tmp_path: Path) -> None:
    assert load_signer(tmp_path) is None
    first = create_signer(tmp_path, "paigow-controller/t1")
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
    assert _verifier(tmp_path) == first.verifier
    with pytest.raises(LogIdentityError, match="never replaced"):
        create_signer(tmp_path, "paigow-controller/t1")
    assert _verifier(tmp_path) == first.verifier
    os.chmod(tmp_path / KEY_FILE, 0o644)
    with pytest.raises(AuditLogError, match="0600"):
        load_signer(tmp_path)


def test_the_key_comes_from_systemd_credentials_when_provided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    provided = create_signer(credentials, "paigow-controller/table-1")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    state = tmp_path / "state"
    state.mkdir()
    assert _verifier(state) == provided.verifier
    log = AuditLog.open(state)
    assert log.signer is not None
    assert log.signer.verifier == provided.verifier
    log.close()
    assert not (state / KEY_FILE).exists()


def test_recall_shows_the_last_rounds_with_their_readings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog.open(tmp_path)
    for n in range(1, 13):
        log.append(RecordKind.ROUND_OPENED, valid(RecordKind.ROUND_OPENED, round=n))
        log.append(RecordKind.READING, valid(RecordKind.READING, round=n, verdict="valid"))
        log.append(RecordKind.VOID, valid(RecordKind.VOID, round=n))
    log.close()
    assert main(["recall", "--state-dir", str(tmp_path)]) == 0
    rounds = json.loads(capsys.readouterr().out)["rounds"]
    assert [r["round"] for r in rounds] == list(range(3, 13))
    assert all(any(rec["kind"] == "reading" for rec in r["records"]) for r in rounds)
    assert main(["recall", "--state-dir", str(tmp_path), "--last", "0"]) == 2
    assert main(["recall", "--state-dir", str(tmp_path), "--last", "x"]) == 2


def test_export_writes_one_json_line_per_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog.open(tmp_path)
    log.append(RecordKind.ROUND_OPENED, valid(RecordKind.ROUND_OPENED, round=1))
    log.append(RecordKind.VOID, valid(RecordKind.VOID, round=1))
    log.close()
    assert main(["export", "--state-dir", str(tmp_path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3]
    assert lines[0]["kind"] == "log_created"
    assert lines[2]["prev"] == lines[1]["hash"]
    assert "checkpoint" in lines[2]
    assert {"seq", "kind", "time", "data", "prev", "hash", "leaf_hash", "leaf"} <= set(lines[0])


def test_recent_records_start_at_the_nth_newest_mark_and_contains_finds_a_fragment(
    tmp_path: Path,
) -> None:
    """What a start reads of the RNG's records: from the ``count``-th newest commitment on,
    only the kinds asked for; every record if there are fewer marks."""
    log = AuditLog.open(tmp_path)
    commits = []
    for n in range(5):
        commits.append(
            log.append(RecordKind.RNG_COMMIT, valid(RecordKind.RNG_COMMIT, session=f"s{n}"))
        )
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        log.append(RecordKind.RNG_REVEAL, valid(RecordKind.RNG_REVEAL, session=f"s{n}"))
    kinds = {RecordKind.RNG_COMMIT, RecordKind.RNG_REVEAL}
    recent = log.recent_records(kinds, since_kind=RecordKind.RNG_COMMIT, count=3)
    assert [r.seq for r in recent] == [
        commits[2],
        commits[2] + 2,
        commits[3],
        commits[3] + 2,
        commits[4],
        commits[4] + 2,
    ]
    assert {r.kind for r in recent} == kinds
    assert recent[0].data == valid(RecordKind.RNG_COMMIT, session="s2")
    every = log.recent_records(kinds, since_kind=RecordKind.RNG_COMMIT, count=9)
    assert every[0].seq == commits[0]
    assert len(every) == 10
    assert log.contains(RecordKind.RNG_REVEAL, b'"session":"s0"')
    assert not log.contains(RecordKind.RNG_COMMIT, b'"session":"s9"')
    assert not log.contains(RecordKind.POWER_ON, b'"session":"s0"')
    log.close()


def test_a_log_kept_before_the_head_row_is_read_and_carried_on(tmp_path: Path) -> None:
    """A log written by an earlier version (no head row) opens with its tail, its context and
    its running checkpoint; the next commit moves them to the head, and it verifies."""
    log = AuditLog.open(tmp_path)
    power_on = valid(RecordKind.POWER_ON)
    log.commit([(RecordKind.POWER_ON, power_on)], context=b"first")
    void = valid(RecordKind.VOID, round=1)
    log.commit([(RecordKind.VOID, void), (RecordKind.POWER_ON, power_on)], context=b"second")
    log.append(RecordKind.POWER_ON, power_on)  # no context
    size, root = log.size, log._tree.root()
    log.close()
    _to_layout_before_the_head(tmp_path, log._tree.to_bytes())
    old = AuditLog.open(tmp_path)
    assert (old.size, old._tree.root()) == (size, root)
    assert old.latest_context() == (size - 1, b"second")
    assert old.check_anchor() is None
    old.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="shutdown"))
    assert old.latest_context() == (size - 1, b"second")
    old.commit([(RecordKind.VOID, valid(RecordKind.VOID, round=2))], context=b"third")
    assert old.latest_context() == (size + 2, b"third")
    assert old.check_anchor() is None
    old.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        assert db.execute("SELECT count(*) FROM records WHERE note IS NOT NULL").fetchone() == (0,)
        # the first commit after the upgrade kept a checkpoint with its frontier to start from
        kept = db.execute("SELECT max(size) FROM checkpoints WHERE frontier IS NOT NULL")
        assert kept.fetchone() == (size + 1,)
    again = AuditLog.open(tmp_path)
    assert again.size == size + 2
    assert again.check_anchor() is None
    again.close()
    signer = load_signer(tmp_path)
    assert signer is not None
    assert verify_state_dir(tmp_path, signer.verifier).records == size + 2


def test_the_head_names_the_last_record_so_a_cut_log_is_seen(tmp_path: Path) -> None:
    """Records cut from the end (at a commit boundary) leave the head naming a record that is
    no longer there: the log is seen to be cut, at start (no frontier) and by verify-log."""
    log = AuditLog.open(tmp_path)
    for n in range(3):
        log.commit([(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))], context=b"c%d" % n)
    size = log.size
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("DELETE FROM records WHERE seq = ?", (size,))
        assert read_latest_checkpoint(db) is None
    with pytest.raises(LogDamagedError, match=f"record {size}: .* its head signs {size}: records"):
        AuditLog.open(tmp_path)


def test_the_writer_copies_the_wal_into_the_database_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Automatic checkpoints are off (they would run inside a commit the table waits for): the
    writer copies the WAL into the database once it holds about CHECKPOINT_PAGES pages, between
    rounds (``settle_between_rounds``), where no screen waits for it; or after the commit that
    takes it to OVERDUE times that, for a table that is never between rounds."""
    sizes = {}
    for pages, settled in ((10**6, True), (40, True), (40, False)):
        monkeypatch.setattr(audit_log, "CHECKPOINT_PAGES", pages)
        state = tmp_path / f"{pages}-{settled}"
        log = AuditLog.open(state)
        assert log._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        most = 0
        for _ in range(30):
            log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
            most = max(most, log._wal_pages)
            if settled:
                log.settle_between_rounds()
                assert log._wal_pages < pages
        assert most < pages * audit_log.OVERDUE
        sizes[pages, settled] = (state / DB_NAME).stat().st_size
        log.close()
    assert sizes[10**6, True] < 4 * audit_log.PAGE_SIZE  # nothing copied yet: all in the WAL
    assert sizes[40, True] > 30 * 100  # the records are in the database file
    assert sizes[40, False] > 20 * 100  # and without a rest, once overdue


def test_the_wal_is_kept_across_a_restart_and_not_grown_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop keeps the WAL (the same file, its size; what it held copied into the database and
    the WAL begun again), and the commits after the next open write it from its beginning, in
    the file as it is: it does not grow (a WAL written anew grows, and each synced growth is a
    journal write of the file system). A reader of the stopped log reads every record."""
    monkeypatch.setattr(audit_log, "CHECKPOINT_PAGES", 10**6)  # the WAL copied only at a start
    wal = tmp_path / f"{DB_NAME}-wal"
    with AuditLog.open(tmp_path) as log:
        for _ in range(40):
            log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        before = wal.stat()
    kept = wal.stat()
    assert (kept.st_ino, kept.st_size) == (before.st_ino, before.st_size)
    assert kept.st_size > 40 * audit_log.PAGE_SIZE  # the file as the records' frames grew it
    assert (tmp_path / DB_NAME).stat().st_size > 40 * 100  # copied into the database at the stop
    reader = connect_read_only(tmp_path / DB_NAME)
    try:
        assert sum(1 for _ in read_records(reader)) == 41
    finally:
        reader.close()
    with AuditLog.open(tmp_path) as log:
        assert log.size == 41
        for _ in range(20):
            log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        grown = wal.stat()
    assert (grown.st_ino, grown.st_size) == (kept.st_ino, kept.st_size)  # written over, in place
    with AuditLog.open(tmp_path) as log:
        assert log.size == 61
        assert log.check_anchor() is None
        assert log.signer is not None
        verifier = log.signer.verifier
    assert verify_state_dir(tmp_path, verifier).records == 61  # the kept WAL read as the log


def test_a_read_only_close_neither_copies_nor_deletes_the_wal(tmp_path: Path) -> None:
    """What SQLite does not document and the kept WAL relies on (store.close_keeping_wal's
    reader closes last; status reads a stopped log in place: app/status.quiet_connection):
    a read-only connection (``mode=ro``) that is the last to close neither copies the WAL
    into the database nor deletes the WAL or its ``-shm``, even where the process may write
    them (the tests' user, root or the files' owner). Here the WAL holds records the
    database file does not (a writer killed), so a checkpoint would change the database
    file. Should a new SQLite fail this, the WAL is deleted after a full checkpoint as it
    was before it was kept: nothing is lost, but the writes a kept WAL saves are (and
    status would delete files in the state directory): look at both places again."""
    kill_writing(tmp_path, 5)
    AuditLog.open(tmp_path).close()  # a stop: the WAL kept
    kill_writing(tmp_path, 30)  # then rounds, and the power cut
    db = tmp_path / DB_NAME
    wal, shm = db.with_name(f"{DB_NAME}-wal"), db.with_name(f"{DB_NAME}-shm")
    assert records_in_the_database_file(tmp_path) == 6  # the newer 30 are in the WAL only
    names = sorted(p.name for p in tmp_path.iterdir())
    database, written = db.read_bytes(), wal.read_bytes()
    version = f"SQLite {sqlite3.sqlite_version}"
    for opened in (
        lambda: sqlite3.connect(db.absolute().as_uri() + "?mode=ro", uri=True),
        lambda: connect_read_only(db),
    ):
        reader = opened()
        assert reader.execute("SELECT count(*) FROM records").fetchone()[0] == 36
        reader.close()
        assert sorted(p.name for p in tmp_path.iterdir()) == names, version  # none deleted
        assert db.read_bytes() == database, version  # nothing copied into the database
        assert wal.read_bytes() == written, version
        assert shm.is_file(), version
    with AuditLog.open(tmp_path) as log:  # the next start has every record
        assert log.size == 36


def test_a_start_rebuilds_the_tree_from_the_last_kept_frontier_and_the_leaves_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a round's close, a checkpoint with its frontier is still kept every
    FRONTIER_EVERY records, so a start reads a bounded tail; a head whose root is not the
    tree's is refused."""
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", 10)
    log = AuditLog.open(tmp_path)
    for _ in range(34):
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
    size, root = log.size, log._tree.root()
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        kept = [r[0] for r in db.execute("SELECT size FROM checkpoints WHERE frontier NOT NULL")]
    assert kept == [10, 20, 30]
    read: list[int] = []
    original = audit_log.read_records

    def counted(
        db: sqlite3.Connection, *, start: int = 1, stop: int | None = None, **options: Any
    ) -> Any:
        read.append(start)
        return original(db, start=start, stop=stop, **options)

    monkeypatch.setattr(audit_log, "read_records", counted)
    again = AuditLog.open(tmp_path)
    assert (again.size, again._tree.root()) == (size, root)
    assert read == [31]
    again.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("UPDATE head SET root = ?", (bytes(32),))
    with pytest.raises(LogDamagedError, match=r"the log's head row is damaged \(its signature\)"):
        AuditLog.open(tmp_path)


class _FailingCheckpoints:
    """The writer's connection, except that copying the WAL fails (as a failed sync would)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def execute(self, sql: str, *args: Any) -> Any:
        if "wal_checkpoint" in sql:
            raise sqlite3.OperationalError("disk I/O error")
        return self.connection.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self.connection.executemany(sql, *args)

    def close(self) -> None:
        self.connection.close()


def test_a_failed_wal_copy_loses_nothing_and_the_log_is_reopened_before_the_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "CHECKPOINT_PAGES", 10)
    log = AuditLog.open(tmp_path)
    assert log._connection is not None
    log._connection = _FailingCheckpoints(log._connection)  # type: ignore[assignment]
    seqs = [log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON)) for _ in range(2)]
    assert not log.is_poisoned  # past 10 pages: the copy is made between rounds
    log.settle_between_rounds()
    assert log.is_poisoned  # the copy failed
    with pytest.raises(AuditLogError, match="checkpoint"):
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
    reopened = log.reopen()
    assert (reopened.acknowledged, reopened.size) == (seqs[-1], seqs[-1])
    assert log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON)) == seqs[-1] + 1
    log.close()
    signer = load_signer(tmp_path)
    assert signer is not None
    assert verify_state_dir(tmp_path, signer.verifier).records == seqs[-1] + 1


def test_the_head_keeps_a_rounds_context_packed_in_its_page(tmp_path: Path) -> None:
    """The head row, rewritten with every commit, keeps the context compressed: a round's
    largest (a result, the dice monitor's counts, the meters) stays in the row's page, with no
    overflow page for the commit to rewrite; it reads back as the encoder wrote it, and a head
    row kept before (the context as it is) still reads."""
    ctx = replace(
        RoundContext(),
        state=State.RESULT,
        round_number=12,
        result=result_of_roll(
            Game.TILES, Roll(6, (2, 5)), bank_seat=None, paytables=[sum_paytable_a()]
        ),
        dice_set="4",
        dice_since=1_764_000_000_000,
        tiles_set="T-9",
        tiles_since=1_764_000_100_000,
        tiles_since_table=86_400_000,
        table_ms=90_000_000,
        last_wall=1_764_000_200_000,
        meters=Meters(games=11, no_rolls={"not_flat": 2}, power_ups=3),
    )
    blob = encode_context(ctx)
    assert len(blob) > 800  # more than a 512-byte page holds
    log = AuditLog.open(tmp_path)
    log.commit([(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))], context=blob)
    assert log.latest_context() == (log.size, blob)
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        pages = db.execute("SELECT pagetype FROM dbstat WHERE name = 'head'").fetchall()
        assert pages == [("leaf",)]
        (stored,) = db.execute("SELECT context FROM head").fetchone()
        assert len(stored) < len(blob) // 3
        db.execute("UPDATE head SET context = ?", (blob,))  # as a log kept it before
    again = AuditLog.open(tmp_path)
    assert again.latest_context() == (again.size, blob)
    assert decode_context(again.latest_context()[1]) == ctx  # type: ignore[index]
    again.close()


def test_a_damaged_packed_context_is_named_with_its_record(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path)
    log.commit([(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))], context=b'{"v":5}')
    size = log.size
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        (stored,) = db.execute("SELECT context FROM head").fetchone()
        db.execute("UPDATE head SET context = ?", (stored[:-1] + bytes([stored[-1] ^ 1]),))
    again = AuditLog.open(tmp_path)
    with pytest.raises(LogIntegrityError, match="the stored context: a packed context") as caught:
        again.latest_context()
    assert caught.value.record == size
    again.close()
