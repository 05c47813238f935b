"""Nothing the table reads at its start, or on the dealer's RECALL screen, grows with the log
(issue 31): a read-only open, game recall of the last rounds, and the newest records of the
kinds the start looks up (the RNG commitment, the cosignature, the corrections and voids, the
program's identity) read as many bytes of the log at 20,000 records as at 1,000.

The measure is the bytes the process reads through system calls (``rchar`` in
/proc/self/io): SQLite reads its pages with ``pread``, and each reader opens a connection of
its own, whose page cache starts empty, so a page it needs is a read whether or not the
kernel has it cached. No clock is looked at. The rare records are written first, so that a
look back for them would cross the whole log.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.reads import PROC_IO, read_cost
from support.records import log_of_rounds, valid

from controller.app.watch import last_software_identity
from controller.audit import log as audit_log
from controller.audit import store
from controller.audit.archive import Policy, Retention
from controller.audit.log import DB_NAME, AuditLog, load_signer, open_for_reading
from controller.audit.recall import recall
from controller.audit.store import BY_KIND, BY_KIND_SINCE
from controller.audit.verify import verify_state_dir
from controller.core.config import MIN_RETAIN_ROUNDS
from controller.core.records import RecordKind
from controller.core.state import RECALL_DEPTH
from controller.display.events import INTERVENTIONS, TREND_LENGTH
from controller.display.log_reader import SqliteLogReader

SMALL, LARGE = 1_000, 20_000  # records
ROUNDS_PER_COMMIT = 20
# What a reader may read more on the larger log: the b-trees are a level or two deeper.
GROWTH = 1.3

pytestmark = pytest.mark.skipif(not PROC_IO.exists(), reason="no /proc/self/io to count reads")


DICE = {"red": 1, "blue": [2, 3]}


def _round(number: int) -> list[tuple[RecordKind, dict[str, object]]]:
    return [
        (RecordKind.ROUND_OPENED, valid(RecordKind.ROUND_OPENED, round=number)),
        (RecordKind.NO_MORE_BETS, valid(RecordKind.NO_MORE_BETS, round=number, bank="dealer")),
        (RecordKind.SHAKE, valid(RecordKind.SHAKE, round=number, cycles=4)),
        (RecordKind.READING, valid(RecordKind.READING, round=number, image_digest="ab" * 32)),
        (RecordKind.READING, valid(RecordKind.READING, round=number, image_digest="ab" * 32)),
        (RecordKind.RESULT, valid(RecordKind.RESULT, round=number, dice=DICE)),
        (RecordKind.CLOSE, valid(RecordKind.CLOSE, round=number)),
    ]


START: list[tuple[RecordKind, dict[str, object]]] = [
    (RecordKind.POWER_ON, valid(RecordKind.POWER_ON)),
    (RecordKind.CONFIG_LOADED, valid(RecordKind.CONFIG_LOADED, table="t")),
    (
        RecordKind.SOFTWARE_CHECK,
        valid(RecordKind.SOFTWARE_CHECK, result="ok", version="1", manifest="m"),
    ),
    (RecordKind.RNG_COMMIT, valid(RecordKind.RNG_COMMIT, session="s1", commitment="00" * 32)),
    (RecordKind.COSIGNED, valid(RecordKind.COSIGNED, witness="w", size=5)),
]


def _log(state: Path, records: int, start: list[tuple[RecordKind, dict[str, object]]]) -> Path:
    """A log of about ``records`` records: the ``start``'s (rare) records, then rounds."""
    return log_of_rounds(state, records, start, _round, rounds_per_commit=ROUNDS_PER_COMMIT)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("flat")
    with pytest.MonkeyPatch.context() as patch:
        # A start reads the records after the last checkpoint kept with the tree's frontier,
        # at most FRONTIER_EVERY of them whatever the log's length: kept at every commit
        # here, so that both logs end at one.
        patch.setattr(audit_log, "FRONTIER_EVERY", 7 * ROUNDS_PER_COMMIT)
        return _log(base / "small", SMALL, START), _log(base / "large", LARGE, START)


def _open(state: Path) -> None:
    open_for_reading(state).close()


def _recall(state: Path) -> None:
    """The dealer's RECALL screen: ``AuditLog.recall``, through a connection of its own."""
    rounds = recall(state, last=RECALL_DEPTH)
    assert [game["outcome"] for game in rounds] == ["closed"] * RECALL_DEPTH


def _display_seed(state: Path) -> None:
    """What the display reads from the log at start (DisplayServer._seed)."""
    reader = SqliteLogReader.in_state_dir(state)
    try:
        reader.size()
        board = {
            RecordKind.RESULT,
            RecordKind.RESULT_CORRECTED,
            RecordKind.VOID,
            RecordKind.RESULT_VOIDED,
        }
        assert len(reader.latest_of(board, limit=3 * TREND_LENGTH)) == 3 * TREND_LENGTH
        amended = {RecordKind.RESULT_CORRECTED, RecordKind.VOID}
        assert reader.latest_of(amended, limit=INTERVENTIONS) == []
        assert [r.seq for r in reader.latest_of({RecordKind.RNG_COMMIT}, limit=1)] == [5]
        assert [r.seq for r in reader.latest_of({RecordKind.COSIGNED}, limit=1)] == [6]
    finally:
        reader.close()


def _writer_start(state: Path) -> None:
    """The writer's open, and what the start asks of it (the RNG's sessions, the program's
    last identity)."""
    log = AuditLog.open(state)
    try:
        kinds = {RecordKind.RNG_COMMIT, RecordKind.RNG_DRAW, RecordKind.RNG_REVEAL}
        found = log.recent_records(kinds, since_kind=RecordKind.RNG_COMMIT, count=3)
        assert [r.kind for r in found] == [RecordKind.RNG_COMMIT]
        last_software_identity(log)  # the last one within its look-back (none at 20,000)
    finally:
        log.close()


READS = {
    "open": _open,
    "recall": _recall,
    "display": _display_seed,
    "start": _writer_start,
}


@pytest.mark.parametrize("name", sorted(READS))
def test_what_the_start_and_recall_read_does_not_grow_with_the_log(
    logs: tuple[Path, Path], name: str
) -> None:
    small, large = logs
    read = READS[name]
    read(small)  # the modules' first use (imports, caches) is not counted
    costs = [read_cost(read, small), read_cost(read, large)]
    print(f"{name}: bytes read at {SMALL} and {LARGE} records: {costs}")
    assert costs[1] <= costs[0] * GROWTH, costs


def test_the_measure_sees_a_read_that_grows_with_the_log(logs: tuple[Path, Path]) -> None:
    """The measure can fail: the count of the records the open used to run reads the whole
    table, many times more at 20,000 records than at 1,000."""

    def count(state: Path) -> None:
        db = open_for_reading(state)
        try:
            db.execute("SELECT count(*) FROM records").fetchone()
        finally:
            db.close()

    small, large = logs
    costs = [read_cost(count, small), read_cost(count, large)]
    assert costs[1] > costs[0] * 5, costs


# --- the index of the rare kinds (store.BY_KIND) --------------------------------------------


def _leaves(state: Path) -> list[tuple[int, bytes]]:
    with sqlite3.connect(state / DB_NAME) as db:
        rows = db.execute("SELECT seq, leaf FROM records ORDER BY seq").fetchall()
    db.close()
    return rows


def _power_on(n: int) -> tuple[RecordKind, dict[str, object]]:
    """A power-on told apart from the others by its software's version."""
    return RecordKind.POWER_ON, valid(RecordKind.POWER_ON, software={"version": f"v{n}"})


def test_a_log_from_before_the_index_is_read_and_carried_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log written before ``by_kind``: read only, its rare records are looked for in the
    records as before; the writer's next open indexes its newest (BY_KIND_BACKFILL: none
    here) and keeps the rest from its next record on (nothing before is rewritten), and a
    look-up finds both; the log verifies."""
    monkeypatch.setattr(store, "BY_KIND_BACKFILL", 0)
    log = AuditLog.open(tmp_path)
    first = log.commit(
        [_power_on(1), (RecordKind.SENSOR, valid(RecordKind.SENSOR, present=True))]
    ).seqs[0]
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("DROP TABLE by_kind")
    db.close()
    before = _leaves(tmp_path)
    reader = SqliteLogReader.in_state_dir(tmp_path)
    assert [r.seq for r in reader.latest_of({RecordKind.POWER_ON}, limit=1)] == [first]
    reader.close()
    log = AuditLog.open(tmp_path)
    found = log.last_record(RecordKind.POWER_ON, within=100)
    assert found is not None
    assert found.seq == first
    second = log.append(*_power_on(2))
    assert log.contains(RecordKind.POWER_ON, b'"version":"v1"')  # before the index: looked through
    assert log.contains(RecordKind.POWER_ON, b'"version":"v2"')  # through the index
    assert not log.contains(RecordKind.POWER_ON, b'"version":"v3"')
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        kept = db.execute("SELECT kind, seq FROM by_kind ORDER BY seq").fetchall()
    db.close()
    assert kept == [(BY_KIND_SINCE, len(before) + 1), (RecordKind.POWER_ON, second)]
    assert _leaves(tmp_path)[: len(before)] == before
    reader = SqliteLogReader.in_state_dir(tmp_path)
    both = reader.latest_of({RecordKind.POWER_ON}, limit=3)
    reader.close()
    assert [r.seq for r in both] == [first, second]
    signer = load_signer(tmp_path)
    assert signer is not None
    assert verify_state_dir(tmp_path, signer.verifier).records == second


def test_every_rare_record_is_indexed_in_its_commit(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path)
    kinds = sorted(BY_KIND)
    seqs = log.commit([(RecordKind(k), valid(RecordKind(k))) for k in kinds]).seqs
    log.append(RecordKind.READING, valid(RecordKind.READING))
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        kept = db.execute("SELECT kind, seq FROM by_kind ORDER BY seq").fetchall()
    db.close()
    assert kept == [(BY_KIND_SINCE, 1), *zip(kinds, seqs, strict=True)]


def test_a_row_of_the_index_naming_another_record_is_passed_over(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path)
    power_on = log.append(*_power_on(1))
    reading = log.append(RecordKind.READING, valid(RecordKind.READING))
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("INSERT INTO by_kind VALUES (?, ?)", (RecordKind.POWER_ON, reading))
        db.execute("INSERT INTO by_kind VALUES (?, ?)", (RecordKind.POWER_ON, reading + 5))
    db.close()
    reader = SqliteLogReader.in_state_dir(tmp_path)
    found = reader.latest_of({RecordKind.POWER_ON}, limit=1)
    reader.close()
    assert [r.seq for r in found] == [power_on]


def test_retention_drops_the_index_rows_of_the_records_it_moves(tmp_path: Path) -> None:
    # (no RNG commitment: retention keeps the RNG's last three sessions)
    state = _log(
        tmp_path / "state", SMALL, [_power_on(0), (RecordKind.VOID, valid(RecordKind.VOID))]
    )
    signer = load_signer(state)
    assert signer is not None
    retention = Retention(state, signer, Policy(retain_rounds=MIN_RETAIN_ROUNDS))
    with AuditLog.open(state) as audit:
        assert retention.run_until_done(audit) >= 1
        audit.append(*_power_on(1))
        last = audit.size
    with sqlite3.connect(state / DB_NAME) as db:
        (first,) = db.execute("SELECT min(seq) FROM records").fetchone()
        kept = db.execute("SELECT kind, seq FROM by_kind ORDER BY seq").fetchall()
    db.close()
    assert first > 6  # the rare records at the start were moved to the archive
    assert kept == [(BY_KIND_SINCE, 1), (RecordKind.POWER_ON, last)]


def test_a_log_from_before_the_index_has_its_newest_records_indexed_at_its_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "BY_KIND_BACKFILL", 4)
    log = AuditLog.open(tmp_path)  # log_created, then 2..6
    seqs = log.commit([_power_on(n) for n in range(5)]).seqs
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("DROP TABLE by_kind")
    db.close()
    AuditLog.open(tmp_path).close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        kept = db.execute("SELECT kind, seq FROM by_kind ORDER BY seq").fetchall()
    db.close()
    assert kept == [(BY_KIND_SINCE, 3)] + [(RecordKind.POWER_ON, seq) for seq in seqs[1:]]
