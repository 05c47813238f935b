"""verify-log checks the log's index of the rare kinds (``by_kind``, store.BY_KIND), which is
not signed, against the records it verifies: a row deleted, a row's kind altered, a row
naming a record of another kind, a row of a kind not indexed each fail it naming the seq, in
one process and split across workers; an untouched log, and one retention moved records of,
pass."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.records import valid

from controller.audit import parallel, verify
from controller.audit.archive import Policy, Retention
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.verify import LogVerifier, verify_state_dir
from controller.cli import main
from controller.core.config import MIN_RETAIN_ROUNDS
from controller.core.records import RecordKind
from controller.errors import LogIntegrityError

WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A log of sensor records with two power-ons and a void among them (of store.BY_KIND)."""
    with AuditLog.open(tmp_path) as log:
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        for number in range(1, 6):
            sensor = valid(RecordKind.SENSOR, present=number % 2 == 0)
            log.commit([(RecordKind.SENSOR, sensor)] * 3)
            if number == 2:
                log.append(RecordKind.VOID, valid(RecordKind.VOID, round=number))
            if number == 4:
                log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="shutdown"))
    return tmp_path


def _seq_of(state: Path, kind: RecordKind, nth: int = 0) -> int:
    with sqlite3.connect(state / DB_NAME) as db:
        rows = db.execute("SELECT seq FROM records WHERE kind = ? ORDER BY seq", (kind,))
        seq: int = rows.fetchall()[nth][0]
    db.close()
    return seq


def _alter(state: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(state / DB_NAME) as db:
        assert db.execute(sql, params).rowcount == 1
    db.close()


def _failure(state: Path, workers: int = 1) -> LogIntegrityError:
    signer = load_signer(state)
    assert signer is not None
    with pytest.raises(LogIntegrityError) as caught:
        verify_state_dir(state, signer.verifier, workers=workers)
    return caught.value


def _passes(state: Path, workers: int = 1) -> int:
    signer = load_signer(state)
    assert signer is not None
    return verify_state_dir(state, signer.verifier, workers=workers).records


def test_an_untouched_log_passes(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _passes(state) > 15
    assert main(["verify-log", "--state-dir", str(state)]) == 0


def test_a_deleted_row_fails_naming_its_record(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newest = _seq_of(state, RecordKind.POWER_ON, 1)
    _alter(state, "DELETE FROM by_kind WHERE kind = ? AND seq = ?", RecordKind.POWER_ON, newest)
    failure = _failure(state)
    assert failure.record == newest
    assert "without its by_kind row" in str(failure)
    assert main(["verify-log", "--state-dir", str(state)]) == 1
    assert f"record {newest}" in capsys.readouterr().err


def test_a_row_whose_kind_was_altered_fails_naming_its_record(state: Path) -> None:
    void = _seq_of(state, RecordKind.VOID)
    _alter(
        state,
        "UPDATE by_kind SET kind = ? WHERE kind = ? AND seq = ?",
        RecordKind.RNG_COMMIT,
        RecordKind.VOID,
        void,
    )
    failure = _failure(state)
    assert failure.record == void
    assert "without its by_kind row" in str(failure)


def test_a_row_naming_a_record_of_another_kind_fails_naming_it(state: Path) -> None:
    sensor = _seq_of(state, RecordKind.SENSOR, 9)  # after the void
    _alter(state, "INSERT INTO by_kind VALUES (?, ?)", RecordKind.VOID, sensor)
    failure = _failure(state)
    assert failure.record == sensor
    assert f"as a {RecordKind.VOID} record, but it is a {RecordKind.SENSOR}" in str(failure)


def test_a_row_before_the_last_of_its_kind_naming_another_record_fails(state: Path) -> None:
    sensor = _seq_of(state, RecordKind.SENSOR, 0)  # between the two power-ons
    _alter(state, "INSERT INTO by_kind VALUES (?, ?)", RecordKind.POWER_ON, sensor)
    assert _failure(state).record == sensor


def test_a_row_naming_no_record_fails(state: Path) -> None:
    beyond = _passes(state) + 3
    _alter(state, "INSERT INTO by_kind VALUES (?, ?)", RecordKind.RNG_COMMIT, beyond)
    failure = _failure(state)
    assert failure.record == beyond
    assert "holds no record" in str(failure)


def test_a_row_of_a_kind_not_indexed_fails(state: Path) -> None:
    sensor = _seq_of(state, RecordKind.SENSOR)
    _alter(state, "INSERT INTO by_kind VALUES (?, ?)", RecordKind.SENSOR, sensor)
    failure = _failure(state)
    assert failure.record == sensor
    assert "a kind it does not index" in str(failure)


def test_the_split_verifier_names_the_same_row(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verify, "MIN_RECORDS", 1)
    monkeypatch.setattr(parallel, "RUN_RECORDS", 4)
    assert _passes(state, workers=2) == _passes(state)

    def no_sequential(self: LogVerifier, row: object) -> None:
        raise AssertionError("fell back to the sequential verifier")

    monkeypatch.setattr(LogVerifier, "feed", no_sequential)  # the split path itself names it
    newest = _seq_of(state, RecordKind.POWER_ON, 1)
    _alter(state, "DELETE FROM by_kind WHERE kind = ? AND seq = ?", RecordKind.POWER_ON, newest)
    assert _failure(state, workers=2).record == newest


def test_retention_leaves_an_index_that_verifies(tmp_path: Path) -> None:
    """Retention drops the rows of the records it moves to the archive; what it leaves
    verifies, and a row left for a record it moved does not."""
    state = tmp_path / "state"
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "5", str(MIN_RETAIN_ROUNDS + 30)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    moved = _seq_of(state, RecordKind.POWER_ON)
    signer = load_signer(state)
    assert signer is not None
    retention = Retention(state, signer, Policy(retain_rounds=MIN_RETAIN_ROUNDS))
    with AuditLog.open(state) as log:
        assert retention.run_until_done(log) >= 1
        kept = log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="shutdown"))
    assert _passes(state) == kept
    _alter(state, "INSERT INTO by_kind VALUES (?, ?)", RecordKind.POWER_ON, moved)
    failure = _failure(state)
    assert failure.record == moved
    assert "holds no record" in str(failure)
