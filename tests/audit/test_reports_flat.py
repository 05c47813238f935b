"""The floor's reports and the auditor's export on a long log (issue 31): ``meters`` and
``dice-stats`` read as many bytes of the log at 20,000 records as at 1,000 (they start from
the newest row of the totals, controller/audit/totals.py, and count the records after it);
``export`` streams, in memory that does not grow with the log; the totals are written by the
writer with the checkpoints that keep the frontier, carried across a restart, give the report
the records give, and are checked by verify-log against the records (a row altered is named).

Bytes are counted as in test_log_flat.py (``rchar`` of /proc/self/io), memory with
tracemalloc's peak; no clock is looked at.
"""

from __future__ import annotations

import importlib.util
import itertools
import sqlite3
import tracemalloc
from pathlib import Path

import pytest
from support.reads import PROC_IO, read_cost
from support.records import log_of_rounds, valid

from controller.audit import log as audit_log
from controller.audit.dice_stats import DiceFold, dice_stats
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.meters import meters_report
from controller.audit.reader import open_for_reading, read_records
from controller.audit.recall import export_lines
from controller.audit.totals_check import TotalsCheck
from controller.audit.verify import verify_state_dir
from controller.core.dice_monitor import Window
from controller.core.records import RecordKind
from controller.errors import LogIntegrityError

SMALL, LARGE = 1_000, 20_000  # records
ROUNDS_PER_COMMIT = 20
GROWTH = 1.3  # the b-trees a level or two deeper (as test_log_flat.py allows)
LOGGEN = Path(__file__).parents[2] / "bench" / "loggen.py"


def _round(number: int) -> list[tuple[RecordKind, dict[str, object]]]:
    return [
        (RecordKind.ROUND_OPENED, valid(RecordKind.ROUND_OPENED, round=number)),
        (RecordKind.NO_MORE_BETS, valid(RecordKind.NO_MORE_BETS, round=number)),
        (RecordKind.LID, valid(RecordKind.LID, opened=number % 3 == 0)),
        (RecordKind.NO_ROLL, valid(RecordKind.NO_ROLL, round=number, reason="not_flat")),
        (RecordKind.RESULT, valid(RecordKind.RESULT, round=number)),
        (RecordKind.CLOSE, valid(RecordKind.CLOSE, round=number)),
    ]


def _log(state: Path, records: int) -> Path:
    start = [(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))]
    return log_of_rounds(state, records, start, _round, rounds_per_commit=ROUNDS_PER_COMMIT)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as patch:
        # The totals are kept with the checkpoints that keep the frontier (one every
        # FRONTIER_EVERY records): kept at every commit here, so that both logs end at one
        # (as test_log_flat.py has them for the start's reads).
        patch.setattr(audit_log, "FRONTIER_EVERY", 6 * ROUNDS_PER_COMMIT)
        return _log(base / "small", SMALL), _log(base / "large", LARGE)


def _meters(state: Path) -> None:
    report = meters_report(state)
    assert report["context_agrees"] is None  # no context stored by these commits
    assert report["games"] > 0


@pytest.mark.skipif(not PROC_IO.exists(), reason="no /proc/self/io to count reads")
def test_meters_reads_no_more_of_a_long_log(logs: tuple[Path, Path]) -> None:
    small, large = logs
    _meters(small)  # the modules' first use is not counted
    costs = [read_cost(_meters, small), read_cost(_meters, large)]
    print(f"meters: bytes read at {SMALL} and {LARGE} records: {costs}")
    assert costs[1] <= costs[0] * GROWTH, costs


def _without_totals(state: Path, target: Path) -> Path:
    target.mkdir()
    for name in state.iterdir():
        (target / name.name).write_bytes(name.read_bytes())
    with sqlite3.connect(target / DB_NAME) as db:
        db.execute("DROP TABLE totals")
    db.close()
    return target


@pytest.mark.skipif(not PROC_IO.exists(), reason="no /proc/self/io to count reads")
def test_the_measure_sees_meters_count_a_log_without_totals(
    logs: tuple[Path, Path], tmp_path: Path
) -> None:
    """A log from before the totals is counted from its records, as before: the same report,
    and bytes read that grow with the log (the measure can fail)."""
    small, large = logs
    bare = [_without_totals(small, tmp_path / "small"), _without_totals(large, tmp_path / "large")]
    assert meters_report(bare[1]) == meters_report(large)
    costs = [read_cost(_meters, bare[0]), read_cost(_meters, bare[1])]
    assert costs[1] > costs[0] * 5, costs


def _export_peak(state: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        lines = sum(1 for _ in export_lines(state))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return lines, peak


def test_export_streams_in_memory_that_does_not_grow_with_the_log(
    logs: tuple[Path, Path],
) -> None:
    small, large = logs
    _export_peak(small)  # the modules' first use is not counted
    (n_small, peak_small), (n_large, peak_large) = _export_peak(small), _export_peak(large)
    print(f"export: peak bytes at {n_small} and {n_large} records: {peak_small}, {peak_large}")
    assert n_large > 15 * n_small
    assert peak_large <= peak_small * GROWTH, (peak_small, peak_large)


def test_the_totals_are_written_with_the_frontier_and_are_the_count(
    logs: tuple[Path, Path],
) -> None:
    _, large = logs
    with sqlite3.connect(large / DB_NAME) as db:
        seqs = [seq for (seq,) in db.execute("SELECT size FROM totals ORDER BY size")]
        (size,) = db.execute("SELECT max(seq) FROM records").fetchone()
    db.close()
    assert seqs[0] == 0
    assert seqs[-1] == size
    assert all(b - a <= 6 * ROUNDS_PER_COMMIT for a, b in itertools.pairwise(seqs[1:]))
    _totals_checked(large)


def test_the_totals_are_carried_across_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", 100)
    log = AuditLog.open(tmp_path)
    number = 1
    while log.size < 250:
        log.commit(_round(number))
        number += 1
    log.close()
    log = AuditLog.open(tmp_path)  # the total after the last row counted again at open
    while log.size < 500:
        log.commit(_round(number))
        number += 1
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        (rows,) = db.execute("SELECT count(*) FROM totals").fetchone()
    db.close()
    assert rows >= 5
    report = meters_report(tmp_path)
    assert report["games"] == number - 1
    bare = _without_totals(tmp_path, tmp_path.parent / f"{tmp_path.name}-bare")
    assert report == meters_report(bare)
    _totals_checked(tmp_path)


def test_a_commit_that_keeps_no_totals_counts_its_records_at_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off the path from the sensor's frame to the feed and the page: a commit that writes no
    totals row leaves its records to be counted at the next commit; one that writes a row
    counts them first, for its transaction. The totals come out the count either way."""
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", 100)
    log = AuditLog.open(tmp_path)
    counted_when_told: list[bool] = []
    counted = [0]
    fold = audit_log._meters_fold

    def counting(meters: object, rows: object) -> object:
        counted[0] += 1
        return fold(meters, rows)  # type: ignore[arg-type]

    def told(rows: object, checkpoint: object) -> None:
        counted_when_told.append(counted[0] == commits[0])

    monkeypatch.setattr(audit_log, "_meters_fold", counting)
    log.on_commit = told
    commits = [0]
    number = 1
    while log.size < 250:
        commits[0] += 1
        log.commit(_round(number))
        number += 1
    log.close()
    assert counted[0] == commits[0] - 1  # each once; the last commit's wait for the next
    # two commits crossed a frontier of 100 records: counted before they were told
    assert counted_when_told.count(True) == 2, counted_when_told
    assert meters_report(tmp_path)["games"] == number - 1
    _totals_checked(tmp_path)


def test_a_count_that_fails_after_the_commit_is_logged_and_the_commit_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = AuditLog.open(tmp_path)
    log.commit(_round(1))

    def broken(meters: object, rows: object) -> object:
        raise RuntimeError("a bug in the count")

    log.commit(_round(2))
    monkeypatch.setattr(audit_log, "_meters_fold", broken)
    committed = log.commit(_round(3))  # counts round 2's records first: they fail
    assert committed.seqs == list(range(14, 20))  # durable: the count's failure is not its
    assert "the running totals could not count a commit" in caplog.text
    monkeypatch.undo()
    log.commit(_round(4))
    log.close()
    assert meters_report(tmp_path)["games"] == 4  # the records count, from the records


def _totals_checked(state: Path) -> None:
    """verify-log's check of the totals (totals_check.py) over a log of records it would not
    take as a table's (these logs' rounds are made by hand): fed every record, as it is."""
    db = open_for_reading(state)
    try:
        check = TotalsCheck(db, first=1)
        assert check.active
        size = 0
        for row in read_records(db):
            check.see(row.seq, row.kind, row.entry()["data"])
            size = row.seq
        check.finish(size)
    finally:
        db.close()


def _verified(state: Path) -> None:
    signer = load_signer(state)
    assert signer is not None
    verify_state_dir(state, signer.verifier, workers=1)


def _played(state: Path, rounds: int) -> Path:
    """A log the table's own loop played (bench/loggen.py), which verify-log accepts."""
    spec = importlib.util.spec_from_file_location("loggen", LOGGEN)
    assert spec is not None
    assert spec.loader is not None
    loggen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loggen)
    loggen.generate(state, rounds)
    return state


def test_verify_log_checks_the_totals_and_names_a_row_that_is_not_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", 40)
    state = _played(tmp_path / "state", 20)
    signer = load_signer(state)
    assert signer is not None
    verify_state_dir(state, signer.verifier)
    with sqlite3.connect(state / DB_NAME) as db:
        seqs = [seq for (seq,) in db.execute("SELECT size FROM totals ORDER BY size")]
        seq = seqs[len(seqs) // 2]
        (blob,) = db.execute("SELECT meters FROM totals WHERE size = ?", (seq,)).fetchone()
        altered = bytes(blob).replace(b'"games":', b'"games":1')
        db.execute("UPDATE totals SET meters = ? WHERE size = ?", (altered, seq))
    db.close()
    assert len(seqs) > 2
    with pytest.raises(LogIntegrityError, match=f"record {seq}: its row of the meters' totals"):
        verify_state_dir(state, signer.verifier)


# --- dice-stats ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two logs the table's loop played, of 150 and 1,500 rounds (some 1,000 and 10,000
    records), with the totals kept every 7 * 20 records, so that both end near one."""
    base = tmp_path_factory.mktemp("played")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(audit_log, "FRONTIER_EVERY", 7 * ROUNDS_PER_COMMIT)
        return _played(base / "small", 150), _played(base / "large", 1500)


def _dice_stats(state: Path) -> None:
    assert dice_stats(state, Window.ALL)["rolls"] > 0


@pytest.mark.skipif(not PROC_IO.exists(), reason="no /proc/self/io to count reads")
def test_dice_stats_reads_no_more_of_a_long_log(played: tuple[Path, Path]) -> None:
    small, large = played
    _dice_stats(small)  # the modules' first use is not counted
    costs = [read_cost(_dice_stats, small), read_cost(_dice_stats, large)]
    print(f"dice-stats: bytes read at 150 and 1,500 rounds: {costs}")
    assert costs[1] <= costs[0] * 2, costs


@pytest.mark.parametrize("window", list(Window), ids=str)
def test_dice_stats_from_the_totals_is_the_records_count(
    played: tuple[Path, Path], tmp_path: Path, window: Window
) -> None:
    _, large = played
    bare = _without_totals(large, tmp_path / "bare")
    assert dice_stats(large, window) == dice_stats(bare, window)
    _verified(large)


def test_a_dice_state_with_alarms_is_kept_as_it_was() -> None:
    alarm = (9, 3, "red", -1, 2, 6, 40)
    fold = DiceFold(alarms=(alarm, alarm), standing=alarm, since_set=1, mode=(4, "shaker"))
    assert DiceFold.decode(fold.encode()) == fold
    assert fold.alarms_in(Window.SET) == (alarm,)
    assert fold.alarms_in(Window.SHIFT) == ()
    assert fold.alarms_in(Window.ALL) == (alarm, alarm)


def test_verify_log_names_a_dice_state_that_is_not_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", 40)
    state = _played(tmp_path / "state", 20)
    with sqlite3.connect(state / DB_NAME) as db:
        seqs = [seq for (seq,) in db.execute("SELECT size FROM totals ORDER BY size")]
        seq = seqs[len(seqs) // 2]
        altered = DiceFold(counted_from=1).encode()
        db.execute("UPDATE totals SET dice = ? WHERE size = ?", (altered, seq))
    db.close()
    signer = load_signer(state)
    assert signer is not None
    with pytest.raises(LogIntegrityError, match=f"record {seq}: its row's dice state is not"):
        verify_state_dir(state, signer.verifier)


def test_meters_counts_from_a_row_before_an_older_stored_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits without a context after the last one with it (a cosignature, a software
    check): the meters at the context are counted from a row before it, and the same report
    as the records' is given."""
    monkeypatch.setattr(audit_log, "FRONTIER_EVERY", 50)
    log = AuditLog.open(tmp_path)
    for number in range(1, 30):
        log.commit(_round(number), context=b'{"v":1}')  # a context from before the meters
    stored_at = log.size
    for number in range(30, 60):
        log.commit(_round(number))
    log.close()
    report = meters_report(tmp_path)
    assert report["context_seq"] == stored_at
    assert report["games"] == 59
    bare = _without_totals(tmp_path, tmp_path.parent / f"{tmp_path.name}-bare")
    assert report == meters_report(bare)
