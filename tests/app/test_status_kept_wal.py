"""``status`` of a stopped controller whose log keeps its WAL (a stop keeps it; a controller
killed, or a power cut, leaves it holding records the database file does not): it reads the
WAL in place, copies no database, makes and removes no file in the state directory, and
reads for a user who may not write there and beside a writer."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support.killed_log import kill_writing, records_in_the_database_file
from support.reads import read_cost
from support.records import valid

from controller.app import status as app_status
from controller.app.status import log_facts, quiet_connection
from controller.audit.log import DB_NAME, AuditLog
from controller.core.records import RecordKind

STATUS = [sys.executable, "-m", "controller", "status"]


def _copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The private copies status makes from here on (each its temporary directory)."""
    made: list[str] = []
    real = tempfile.TemporaryDirectory

    def counted(*args: Any, **kwargs: Any) -> tempfile.TemporaryDirectory[str]:
        made.append(str(kwargs.get("prefix")))
        return real(*args, **kwargs)

    monkeypatch.setattr(app_status.tempfile, "TemporaryDirectory", counted)
    return made


def _files(state: Path) -> dict[str, str]:
    """Each file in ``state`` and a digest of its bytes (the -shm's left out: shared memory,
    which a reader who may write it writes as it reads)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() if not p.name.endswith("-shm") else ""
        for p in state.iterdir()
    }


def _facts(state: Path) -> dict[str, Any]:
    with quiet_connection(state) as db:
        return log_facts(db)


def _status_json(state: Path, *prefix: str) -> dict[str, Any]:
    """``status --json`` of ``state`` in a process of its own (``prefix``: run it as whom)."""
    argv = [*prefix, *STATUS, "--state-dir", str(state), "--socket", str(state / "none")]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # NOT RUNNING: F22 controller_stopped
    assert done.stderr == ""
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def test_a_clean_stop_is_read_in_place_without_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop keeps the WAL (one small commit in it): status reads the log where it is, a few
    pages, not a copy of the database and the WAL."""
    with AuditLog.open(tmp_path) as log:
        for _ in range(300):
            log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
    wal = tmp_path / f"{DB_NAME}-wal"
    assert wal.stat().st_size > 0  # kept: the case status copied on every stop
    before = _files(tmp_path)
    copies = _copies(monkeypatch)
    cost = read_cost(_facts, tmp_path)
    facts = _facts(tmp_path)
    assert facts["problems"] == []
    assert facts["log_size"] == 301
    assert facts["checkpoint"]["size"] == 301
    assert copies == []
    database = (tmp_path / DB_NAME).stat().st_size
    print(f"status read {cost:,} B of a {database:,} B database and a {wal.stat().st_size:,} B WAL")
    assert cost < database // 4  # a copy reads the whole database and the WAL
    assert _files(tmp_path) == before  # nothing made, removed or written but the -shm


def test_an_unclean_stop_shows_the_records_only_the_wal_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed after a restart: 30 of the log's 36 records are in the WAL only (the
    database file holds 6). Status shows all 36, still without a copy, and the next start
    finds the files as the kill left them."""
    kill_writing(tmp_path, 5)
    AuditLog.open(tmp_path).close()
    kill_writing(tmp_path, 30)
    assert records_in_the_database_file(tmp_path) == 6
    before = _files(tmp_path)
    copies = _copies(monkeypatch)
    facts = _facts(tmp_path)
    assert (facts["problems"], facts["log_size"], facts["checkpoint"]["size"]) == ([], 36, 36)
    assert copies == []
    assert _files(tmp_path) == before
    with AuditLog.open(tmp_path) as log:
        assert log.size == 36


def test_a_wal_without_its_shm_is_read_from_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL with records but no ``-shm`` beside it (files put back by hand): reading it in
    place would make the ``-shm``, so status reads a private copy elsewhere, as it did for
    every WAL before a stop kept it."""
    kill_writing(tmp_path, 12)
    (tmp_path / f"{DB_NAME}-shm").unlink()
    before = _files(tmp_path)
    copies = _copies(monkeypatch)
    facts = _facts(tmp_path)
    assert (facts["problems"], facts["log_size"]) == ([], 13)
    assert copies == ["paigow-"]
    assert _files(tmp_path) == before


def test_a_user_who_may_not_write_the_state_directory_reads_the_kept_wal(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Nobody's status (root's tests: setpriv to 65534; others': the directory and its files
    made read-only) reads a log whose WAL holds records, the -shm not writable to it (SQLite
    builds its wal-index on the heap), and touches nothing."""
    if os.geteuid() == 0:  # a directory nobody may pass through (pytest's are 0700)
        tmp_path = Path(tempfile.mkdtemp(prefix="paigow-status-"))
        tmp_path.chmod(0o755)
        request.addfinalizer(lambda: shutil.rmtree(tmp_path, ignore_errors=True))
    state = tmp_path / "state"
    kill_writing(state, 5)
    AuditLog.open(state).close()
    kill_writing(state, 20)
    assert records_in_the_database_file(state) == 6
    state.chmod(0o755)
    for path in state.iterdir():
        path.chmod(0o444 if os.geteuid() != 0 else 0o644)
    (state / "audit-log.key").chmod(0o400)  # the key stays the owner's: status never reads it
    before = _files(state)
    if os.geteuid() == 0:
        shown = _status_json(state, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    else:
        state.chmod(0o555)
        try:
            shown = _status_json(state)
        finally:
            state.chmod(0o700)
    assert shown["log_size"] == 26, shown
    assert not [p for p in shown.get("problems", []) if "audit log" in p], shown
    assert _files(state) == before


def test_status_beside_a_writer_reads_what_it_committed(tmp_path: Path) -> None:
    """A controller writing (its socket not answering, as while it starts): status, in a
    process of its own, reads every record committed so far, in place, and the writer goes
    on, its WAL kept at its stop."""
    wal = tmp_path / f"{DB_NAME}-wal"
    with AuditLog.open(tmp_path) as log:
        for _ in range(10):
            log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        names = sorted(p.name for p in tmp_path.iterdir())
        assert _status_json(tmp_path)["log_size"] == 11
        for _ in range(15):
            log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        assert _status_json(tmp_path)["log_size"] == 26
        assert sorted(p.name for p in tmp_path.iterdir()) == names
        log.append(RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
        kept = wal.stat().st_ino
    assert wal.stat().st_ino == kept
    assert _status_json(tmp_path)["log_size"] == 27
