"""verify-log fails naming the record when a record is altered, deleted or reordered, or when it
is checked with another key; a torn WAL tail is discarded and the log still verifies."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.records import valid

from controller.audit.log import (
    DB_NAME,
    AuditLog,
    read_checkpoints,
    read_latest_checkpoint,
    read_records,
)
from controller.audit.verify import LogVerifier, verify_state_dir
from controller.cli import main
from controller.core import canonical
from controller.core.config import Config
from controller.core.note import Signer
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.errors import LogIntegrityError

WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("played")
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "7", "6"], check=True, stdout=subprocess.DEVNULL
    )
    return state


@pytest.fixture
def log_dir(played: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state"
    shutil.copytree(played, target)
    return target


def _rows(state: Path) -> list[tuple[int, str, bytes]]:
    with sqlite3.connect(state / DB_NAME) as db:
        return [
            (r[0], r[1], bytes(r[2]))
            for r in db.execute("SELECT seq, kind, leaf FROM records ORDER BY seq")
        ]


def _verify(state: Path) -> None:
    verify_state_dir(state, Signer.parse((state / "audit-log.key").read_text()).verifier)


def _verifier(state: Path) -> LogVerifier:
    db = sqlite3.connect(state / DB_NAME)
    try:
        log = LogVerifier(
            Signer.parse((state / "audit-log.key").read_text()).verifier,
            read_checkpoints(db),
            latest=read_latest_checkpoint(db),
        )
        rows = list(read_records(db))
    finally:
        db.close()
    log.rows = rows  # type: ignore[attr-defined]
    return log


def _run(rows: list, log: LogVerifier) -> None:  # type: ignore[type-arg]
    for row in rows:
        log.feed(row)
    log.finish()


def test_the_played_log_verifies(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify-log", "--state-dir", str(log_dir)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["results_recomputed"] >= 6
    assert report["checkpoints"] >= 6


def test_flipping_any_byte_of_any_record_is_found_at_that_record(log_dir: Path) -> None:
    """Every byte of every record, in memory (the stored bytes as verify-log reads them)."""
    log = _verifier(log_dir)
    rows = log.rows  # type: ignore[attr-defined]
    checkpoints = dict(log.checkpoints)
    if log.latest is not None:
        checkpoints[0] = log.latest
    verifier = log.verifier
    kinds = [row.kind for row in rows]
    chosen = {0, 1, 2, len(rows) - 2, len(rows) - 1}
    chosen |= {
        kinds.index(k) for k in ("reading", "result", "close", "fault", "no_roll") if k in kinds
    }
    for index, row in enumerate(rows):
        if index not in chosen:
            continue
        for offset in range(len(row.leaf)):
            flipped = bytearray(row.leaf)
            flipped[offset] ^= 0x01
            altered = [
                *rows[:index],
                type(row)(row.seq, row.kind, bytes(flipped)),
                *rows[index + 1 :],
            ]
            with pytest.raises(LogIntegrityError) as caught:
                _run(altered, LogVerifier(verifier, checkpoints))
            assert caught.value.record == row.seq, (row.seq, offset, str(caught.value))


def test_flipped_byte_in_the_database_fails_the_command_naming_the_record(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = _rows(log_dir)
    seq, _, leaf = next(r for r in rows if r[1] == "result")
    data = canonical.decode(leaf)
    data["data"]["starting_position"] = "seat 9"  # a plausible edit, re-encoded canonically
    with sqlite3.connect(log_dir / DB_NAME) as db:
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (canonical.encode(data), seq))
    assert main(["verify-log", "--state-dir", str(log_dir)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert out["record"] == seq


def test_a_result_whose_wagers_do_not_follow_from_its_dice_is_named(log_dir: Path) -> None:
    """Even re-chained and re-signed by the key holder, a wrong settlement is refused."""
    rows = _rows(log_dir)
    signer = Signer.parse((log_dir / "audit-log.key").read_text())
    target = log_dir.parent / "forged"
    target.mkdir()
    log = AuditLog(target / DB_NAME, signer)
    bad_seq = None
    for seq, kind, leaf in rows[1:]:  # the new log has its own log_created record
        data = canonical.decode(leaf)["data"]
        if kind == "result" and bad_seq is None:
            data["payouts"]["A"]["wins"] = not data["payouts"]["A"]["wins"]
            bad_seq = seq
        log.append(RecordKind(kind), data)
    log.close()
    with pytest.raises(LogIntegrityError, match="payouts") as caught:
        verify_state_dir(target, signer.verifier)
    assert caught.value.record == bad_seq


@pytest.mark.parametrize("victim", [1, 5, 20, -2, -1])
def test_deleting_a_record_is_named(log_dir: Path, victim: int) -> None:
    rows = _rows(log_dir)
    seq = rows[victim][0]
    with sqlite3.connect(log_dir / DB_NAME) as db:
        db.execute("DELETE FROM records WHERE seq = ?", (seq,))
    with pytest.raises(LogIntegrityError) as caught:
        _verify(log_dir)
    assert caught.value.record == seq


def test_reordering_two_records_is_named(log_dir: Path) -> None:
    rows = _rows(log_dir)
    (a, ka, la), (b, kb, lb) = rows[10], rows[11]
    with sqlite3.connect(log_dir / DB_NAME) as db:
        db.execute("UPDATE records SET kind = ?, leaf = ? WHERE seq = ?", (kb, lb, a))
        db.execute("UPDATE records SET kind = ?, leaf = ? WHERE seq = ?", (ka, la, b))
    with pytest.raises(LogIntegrityError, match="reordered") as caught:
        _verify(log_dir)
    assert caught.value.record == a


def test_another_key_fails_at_the_first_record_which_names_the_log_s_key(
    log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.pub"
    other.write_text(str(Signer.generate("paigow-controller/table-1").verifier) + "\n")
    assert main(["verify-log", "--state-dir", str(log_dir), "--key", str(other)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["record"] == 1
    assert "created for the key" in out["error"]


def test_a_key_of_the_same_name_but_another_secret_fails_the_key_id(
    log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A swapped key with the right name: its key id differs from the one recorded."""
    name = Signer.parse((log_dir / "audit-log.key").read_text()).name
    other = tmp_path / "other.pub"
    other.write_text(str(Signer.generate(name).verifier) + "\n")
    assert main(["verify-log", "--state-dir", str(log_dir), "--key", str(other)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["record"] == 1
    assert "created for the key" in out["error"]


def test_the_right_key_from_export_key_verifies(
    log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export-key", "--state-dir", str(log_dir)]) == 0
    key = tmp_path / "log.pub"
    key.write_text(capsys.readouterr().out)
    assert main(["verify-log", "--state-dir", str(log_dir), "--key", str(key)]) == 0


def test_a_bad_key_file_is_a_usage_error(
    log_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.pub"
    bad.write_text("not a key\n")
    assert main(["verify-log", "--state-dir", str(log_dir), "--key", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1


def _wal_copy(tmp_path: Path, name: str, source: Path) -> Path:
    copy = tmp_path / name
    copy.mkdir()
    for file in source.iterdir():
        shutil.copy2(file, copy / file.name)
    return copy


def test_a_torn_wal_tail_is_discarded_and_the_log_verifies(tmp_path: Path) -> None:
    state = tmp_path / "live"
    log = AuditLog.open(state)
    log._db.execute("PRAGMA wal_autocheckpoint=0")  # keep every frame in the WAL
    log.append(RecordKind.CONFIG_LOADED, config_loaded_data(Config()))
    for n in range(5):
        log.append(RecordKind.ROUND_OPENED, {"round": n + 1})
        log.append(RecordKind.VOID, valid(RecordKind.VOID, round=n + 1))
    committed = log.size
    log.append(RecordKind.ROUND_OPENED, {"round": 6})  # the transaction that will be torn
    # A crash copy: what the disk holds while the log is open (WAL not checkpointed).
    crash = _wal_copy(tmp_path, "crash", state)
    log.close()
    wal = crash / f"{DB_NAME}-wal"
    assert wal.stat().st_size > 4096
    with wal.open("r+b") as f:
        f.truncate(wal.stat().st_size - 100)  # the last frame only partly written
    _verify(crash)
    reopened = AuditLog.open(crash)
    assert reopened.size == committed
    reopened.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="interrupted"))
    reopened.close()
    _verify(crash)


def test_garbage_after_the_last_wal_frame_is_ignored(tmp_path: Path) -> None:
    state = tmp_path / "live"
    log = AuditLog.open(state)
    log._db.execute("PRAGMA wal_autocheckpoint=0")
    for n in range(3):
        log.append(RecordKind.ROUND_OPENED, {"round": n + 1})
    crash = _wal_copy(tmp_path, "crash", state)
    log.close()
    with (crash / f"{DB_NAME}-wal").open("ab") as f:
        f.write(b"\x37" * 1000)
    _verify(crash)
    assert len(_rows(crash)) == 4  # log_created and the three
