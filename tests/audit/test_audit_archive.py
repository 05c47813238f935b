"""Retention ([storage] retain_rounds, retain_days; controller/audit/archive.py): the oldest
whole rounds move to signed archive files and leave the live log only once the archive reads
back; a failure at any step loses no record; the archive and the live log verify as one log;
the next start works."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.audit import archive as archive_module
from controller.audit.archive import Policy, Retention, archive_paths, read_archive
from controller.audit.backup import backup_log
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.recall import export_lines
from controller.audit.verify import verify_export, verify_state_dir
from controller.cli import main
from controller.core import canonical
from controller.core.config import MIN_RETAIN_ROUNDS
from controller.core.merkle import CompactRange
from controller.core.note import Signer, sign_note
from controller.display.log_reader import SqliteLogReader
from controller.errors import AuditLogError, LogIntegrityError

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"
ROUNDS = 180


class Injected(Exception):
    """A crash, injected between two steps of retention."""


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("played")
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "9", str(ROUNDS)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return state


@pytest.fixture
def state(played: Path, tmp_path: Path) -> Path:
    target = tmp_path / "state"
    shutil.copytree(played, target)
    return target


def _rows(path: Path) -> dict[int, bytes]:
    with sqlite3.connect(path) as db:
        rows = {int(s): bytes(leaf) for s, leaf in db.execute("SELECT seq, leaf FROM records")}
    db.close()
    return rows


def _everywhere(state: Path) -> dict[int, bytes]:
    """Every record the state directory holds, in the archive or the live log (a record in
    both must be the same bytes)."""
    found: dict[int, bytes] = {}
    for path in [*archive_paths(state), state / DB_NAME]:
        for seq, leaf in _rows(path).items():
            assert found.setdefault(seq, leaf) == leaf, seq
    return found


def _retention(state: Path, fail_at: Callable[[str], None] = lambda step: None) -> Retention:
    signer = load_signer(state)
    assert signer is not None
    return Retention(state, signer, Policy(retain_rounds=MIN_RETAIN_ROUNDS), fail_at=fail_at)


def _verify(state: Path) -> dict[str, object]:
    signer = load_signer(state)
    assert signer is not None
    report = verify_state_dir(state, signer.verifier, workers=1).as_dict()
    report.pop("notes")
    return report


def _closes(rows: dict[int, bytes]) -> int:
    return sum(b'"kind":"close"' in leaf or b'"kind":"void"' in leaf for leaf in rows.values())


def test_retention_moves_the_oldest_rounds_loses_none_and_the_next_start_works(
    state: Path,
) -> None:
    original = _rows(state / DB_NAME)
    before = _verify(state)
    kept = subprocess.run(
        [sys.executable, "-m", "controller", "checkpoint", "--state-dir", str(state)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout  # a checkpoint kept off the box before retention
    with AuditLog.open(state) as audit:
        assert _retention(state).run_until_done(audit) >= 1
    live = _rows(state / DB_NAME)
    assert min(live) > 1
    assert _closes(live) >= MIN_RETAIN_ROUNDS  # the newest rounds stay
    first = canonical.decode(original[min(live) - 1])
    assert first["kind"] in ("close", "void")  # whole rounds only
    assert _everywhere(state) == original
    assert _verify(state) == before
    signer = load_signer(state)
    assert signer is not None
    proven = verify_state_dir(state, signer.verifier, checkpoint=kept)
    assert proven.extends == max(original)  # archive + live log extend it
    # A backup of the live log says where the rest is.
    copied = backup_log(state, state.parent / "backup.db").as_dict(state)
    assert f"records 1..{min(live) - 1} are in the archive" in str(copied["archive"])
    # The next start: the log opens, extends its anchor and plays on.
    with AuditLog.open(state) as audit:
        assert audit.check_anchor() is None
        assert audit.size == max(original)
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "10", "3"], check=True, stdout=subprocess.DEVNULL
    )
    assert _verify(state)["records"] > max(original)  # type: ignore[operator]
    # and the export is the whole log, which verifies
    export = state.parent / "audit.jsonl"
    lines = list(export_lines(state))
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))
    signer = load_signer(state)
    assert signer is not None
    assert verify_export(export, signer.verifier).records == len(lines)


STEPS = ["write", "fsync", "rename", "fsync-dir", "read-back", "drop", "drop again"]


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_loses_no_record(
    step: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _rows(state / DB_NAME)
    before = _verify(state)
    monkeypatch.setattr(archive_module, "DROP_CHUNK", 64)  # several drops per archive
    seen: list[str] = []

    def crash(at: str) -> None:
        seen.append(at)
        name, count = ("drop", 2) if step == "drop again" else (step, 1)
        if seen.count(name) == count:
            raise Injected(at)

    with AuditLog.open(state) as audit, pytest.raises(Injected):
        _retention(state, crash).run_until_done(audit)
    assert _everywhere(state) == original  # every record in the archive or the live log
    assert _verify(state) == before
    with AuditLog.open(state) as audit:  # a start after the crash
        assert audit.check_anchor() is None
        _retention(state).run_until_done(audit)  # and retention carries on
    assert _everywhere(state) == original
    assert min(_rows(state / DB_NAME)) > 1
    assert _verify(state) == before
    assert not list((state / "archive").glob(".*.tmp"))


def test_an_archive_altered_is_named_at_the_record(state: Path) -> None:
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    (path,) = archive_paths(state)[:1]
    with sqlite3.connect(path) as db:
        seq, leaf = db.execute("SELECT seq, leaf FROM records WHERE kind = 'result'").fetchone()
        entry = canonical.decode(bytes(leaf))
        entry["data"]["starting_position"] = "seat 9"
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (canonical.encode(entry), seq))
    db.close()
    with pytest.raises(LogIntegrityError) as caught:
        _verify(state)
    assert caught.value.record == seq


def test_an_archive_missing_or_forged_fails(state: Path, tmp_path: Path) -> None:
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    paths = archive_paths(state)
    forged = tmp_path / "forged"
    shutil.copytree(state, forged)
    # an archive's note signed with another key
    other = Signer.generate(load_signer(state).name)  # type: ignore[union-attr]
    target = forged / "archive" / paths[0].name
    with sqlite3.connect(target) as db:
        (note,) = db.execute("SELECT note FROM archive").fetchone()
        text = note.rpartition("\n\n")[0] + "\n"
        db.execute("UPDATE archive SET note = ?", (sign_note(text, other),))
    db.close()
    with pytest.raises(LogIntegrityError):
        _verify(forged)
    # the archive gone: the live log alone lacks its first records
    for path in paths:
        path.unlink()
    with pytest.raises(LogIntegrityError) as caught:
        _verify(state)
    assert caught.value.record == 1


def test_retain_days_archives_only_rounds_older_than_the_days(state: Path) -> None:
    signer = load_signer(state)
    assert signer is not None
    with AuditLog.open(state) as audit:
        today = Retention(state, signer, Policy(retain_days=1))
        assert today.run_until_done(audit) == 0  # every round was played today
        later = Retention(
            state,
            signer,
            Policy(retain_days=1),
            now=lambda: datetime.now(UTC) + timedelta(days=3),
        )
        assert later.run_until_done(audit) >= 1
    assert _closes(_rows(state / DB_NAME)) == MIN_RETAIN_ROUNDS  # never fewer
    assert read_archive(archive_paths(state)[0], signer.verifier).first == 1


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("retain_rounds = 5", "storage.retain_rounds"),
        ("retain_rounds = -1", "storage.retain_rounds"),
        ('retain_rounds = "100"', "storage.retain_rounds"),
        ("retain_days = -1", "storage.retain_days"),
        ("retain_days = 1.5", "storage.retain_days"),
        ("retain_days = 100000", "storage.retain_days"),
    ],
)
def test_bad_retention_settings_exit_78_naming_the_key(
    line: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[storage]\n{line}\n")
    assert main(["check-config", "--config", str(config)]) == 78
    err = capsys.readouterr().err
    assert key in err
    assert err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "table", ["", '[table]\nmode = "rng"\n[rng]\nsession_max_rounds = 20\n'], ids=["dice", "rng"]
)
def test_the_running_table_archives_between_rounds(table: str, tmp_path: Path) -> None:
    """simulate with retain_rounds = 100 plays 160 rounds: the archive is made and dropped on
    the way, the whole verifies, and a second run starts on it (in RNG mode it takes up its
    session from the live log) and verifies again."""
    config = tmp_path / "config.toml"
    config.write_text(f"{table}[storage]\nretain_rounds = {MIN_RETAIN_ROUNDS}\n")
    state = tmp_path / "state"
    for rounds in ("160", "3"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller",
                "simulate",
                "--fast",
                "--faults",
                "none",
                "--rounds",
                rounds,
                "--config",
                str(config),
                "--state-dir",
                str(state),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert "retention" not in proc.stderr  # no retention error was logged
        assert archive_paths(state)
        assert min(_rows(state / DB_NAME)) > 1
        report = _verify(state)
        assert report["ok"] is True


def test_the_log_drops_nothing_an_archive_does_not_begin_with(state: Path) -> None:
    """The last guard, in the log itself: records before the archive's first are refused."""
    rows = _rows(state / DB_NAME)
    with sqlite3.connect(state / DB_NAME) as db:
        through, note = db.execute(
            "SELECT c.size, c.note FROM checkpoints c JOIN records r ON r.seq = c.size"
            " WHERE r.kind = 'close' ORDER BY c.size LIMIT 1"
        ).fetchone()
    db.close()
    tree = CompactRange()
    for seq in range(1, through + 1):
        tree.append(rows[seq])
    with AuditLog.open(state) as audit:
        with pytest.raises(AuditLogError, match="not in the archive"):
            audit.drop_archived((2, through), tree.to_bytes(), note, chunk=10)
        with pytest.raises(AuditLogError, match=r"damaged|not the signed"):
            audit.drop_archived((1, through), b"\0" * len(tree.to_bytes()), note, chunk=10)
    with AuditLog.open(state) as audit:  # reopened: a refused drop poisons nothing on disk
        assert audit.check_anchor() is None
    assert _rows(state / DB_NAME) == rows


def test_a_feed_client_resuming_from_an_archived_record_gets_the_live_log_s_first(
    state: Path,
) -> None:
    """Not a gap that the feed waits on for ever: the records from the live log's first."""
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    first = min(_rows(state / DB_NAME))
    reader = SqliteLogReader.in_state_dir(state)
    try:
        assert [r.seq for r in reader.records_after(0, limit=3)] == [first, first + 1, first + 2]
        assert [r.seq for r in reader.records_after(first, limit=2)] == [first + 1, first + 2]
    finally:
        reader.close()


def test_an_archive_that_does_not_read_back_is_set_aside_and_written_again(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _rows(state / DB_NAME)
    real = Retention._read_back
    calls: list[int] = []

    def unreadable(
        self: Retention, archive: archive_module.Archive, live: sqlite3.Connection
    ) -> None:
        calls.append(archive.index)
        if len(calls) == 1:
            raise archive_module.ArchiveError("audit log: injected: it does not read back")
        real(self, archive, live)

    monkeypatch.setattr(Retention, "_read_back", unreadable)
    with AuditLog.open(state) as audit:
        retention = _retention(state)
        with pytest.raises(archive_module.ArchiveError):
            retention.prepare()
        assert retention.ready is None  # nothing may be dropped
        assert _rows(state / DB_NAME) == original
        assert list((state / "archive").glob("*.rejected"))
        assert archive_paths(state) == []
        retention.run_until_done(audit)
    assert _everywhere(state) == original
    assert min(_rows(state / DB_NAME)) > 1


def test_a_garbage_archive_file_is_one_line_never_a_traceback(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    count = len(archive_paths(state))
    (state / "archive" / f"{count + 1:08d}.db").write_bytes(b"\x00garbage" * 100_000)
    assert main(["verify-log", "--state-dir", str(state)]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["ok"] is False
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert "archive" in err


# --- recall reads the archives, verified first ---------------------------------------------------


def _recall(capsys: pytest.CaptureFixture[str], state: Path, *argv: str) -> tuple[int, Any, str]:
    code = main(["recall", "--state-dir", str(state), "--json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else None, err


def _round_records(rows: dict[int, bytes], number: int) -> list[int]:
    found = []
    for seq, leaf in sorted(rows.items()):
        data = canonical.decode(leaf)["data"]
        if data.get("round") == number and data.get("service") is not True:
            found.append(seq)
    return found


def test_recall_finds_an_archived_round_and_the_records_outside_rounds(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _rows(state / DB_NAME)
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    first_live = min(_rows(state / DB_NAME))
    assert first_live > 1
    # a round that retention moved: found in the archive, verified, with its records
    code, doc, err = _recall(capsys, state, "--round", "3")
    assert (code, err) == (0, "")
    (game,) = doc["rounds"]
    assert game["round"] == 3
    assert game["archive"] == "00000001.db"
    assert [r["seq"] for r in game["records"]] == _round_records(original, 3)
    assert all(r["seq"] < first_live for r in game["records"])
    # a live round is still read from the log
    code, doc, _ = _recall(capsys, state, "--round", "170")
    assert code == 0
    assert "archive" not in doc["rounds"][0]
    # records by number across the archive and the live log: the log's first records first
    code, doc, _ = _recall(capsys, state, "--seq", f"1-{first_live + 1}")
    assert code == 0
    assert [r["seq"] for r in doc["records"]] == list(range(1, first_live + 2))
    assert doc["records"][0]["kind"] == "log_created"
    assert doc["records"][0]["from"] == "archive/00000001.db"
    assert doc["records"][-1]["from"] == "log"
    # by kind, outside rounds: every power-on, the archived ones included, the last ones kept
    every = [s for s, leaf in original.items() if canonical.decode(leaf)["kind"] == "power_on"]
    code, doc, _ = _recall(capsys, state, "--kind", "power_on", "--last", "1000")
    assert code == 0
    assert [r["seq"] for r in doc["records"]] == sorted(every)
    assert doc["found"] == len(every)
    code, doc, _ = _recall(capsys, state, "--kind", "power_on,log_created", "--last", "1")
    assert code == 0
    assert doc["found"] == len(every) + 1
    assert len(doc["records"]) == 1


def altered_said(seq: int, path: Path) -> str:
    """What recall says of an archive whose record ``seq`` was altered: the first record
    after it no longer carries its hash."""
    return (
        f"paigow-controller: record {seq + 1}: does not carry the hash of the record before it"
        f" ({path})"
    )


def test_recall_believes_no_altered_archive(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    (path,) = archive_paths(state)[:1]
    with sqlite3.connect(path) as db:
        seq, leaf = db.execute(
            "SELECT seq, leaf FROM records WHERE kind = 'result' ORDER BY seq LIMIT 1 OFFSET 2"
        ).fetchone()
        entry = canonical.decode(bytes(leaf))
        entry["data"]["starting_position"] = "seat 9"
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (canonical.encode(entry), seq))
    db.close()
    number = entry["data"]["round"]
    code, doc, err = _recall(capsys, state, "--round", str(number))
    assert (code, doc) == (1, None)
    assert err.splitlines() == [altered_said(seq, path)]
    code, doc, err = _recall(capsys, state, "--seq", "1-10")
    assert (code, doc) == (1, None)
    assert err.splitlines() == [altered_said(seq, path)]


def test_recall_says_records_missing_when_an_archive_file_is_removed(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The archive removed (the last file, or all): records between the archives and the live
    log are missing; asked for, they are an error naming them, never an empty answer or a
    round "not in the log". What lies outside the gap is still recalled."""
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    first_live = min(_rows(state / DB_NAME))
    for path in archive_paths(state):
        path.unlink()
    said = [
        f"paigow-controller: log: records 1..{first_live - 1} are missing: the log starts at"
        f" record {first_live} and there are no archive files (an archive file removed from"
        f" {state / 'archive'}?)"
    ]
    for argv in (
        ("--seq", f"{first_live - 1}"),
        ("--seq", f"1-{first_live}"),
        ("--kind", "power_on"),
        ("--round", "3"),
    ):
        code, doc, err = _recall(capsys, state, *argv)
        assert (code, doc) == (1, None), argv
        assert err.splitlines() == said, argv
    code, doc, err = _recall(capsys, state, "--seq", str(first_live))
    assert (code, err) == (0, "")
    assert [r["seq"] for r in doc["records"]] == [first_live]


def test_recall_of_an_archive_needs_the_verifier_key(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    signer = load_signer(state)
    assert signer is not None
    key = tmp_path / "log.pub"
    key.write_text(f"{signer.verifier}\n")
    (state / "audit-log.key").unlink()  # an auditor's copy: no signing key
    code, _, err = _recall(capsys, state, "--round", "3")
    assert code == 1
    assert "pass the verifier key with --key" in err
    code, doc, _ = _recall(capsys, state, "--round", "3", "--key", str(key))
    assert code == 0
    assert doc["rounds"][0]["round"] == 3
    other = tmp_path / "other.pub"
    other.write_text(f"{Signer.generate(signer.name).verifier}\n")
    code, _, err = _recall(capsys, state, "--round", "3", "--key", str(other))
    assert code == 1
    assert "archive" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--seq", "0"), "--seq"),
        (("--seq", "3-2"), "3 is after 2"),
        (("--seq", "1-1001"), "at most 1000"),
        (("--seq", "\u0663"), "is not N or A-B"),
        (("--seq", "1-2-3"), "is not N or A-B"),
        (("--kind", "power_on,nope"), "'nope' is not a record kind"),
        (("--kind", "power_on", "--last", "1001"), "--last"),
        (("--seq", "1-5", "--last", "2"), "--last goes with --kind"),
        (("--seq", "1", "--since", "2026-01-01"), "take no --since"),
        (("--round", "3", "--kind", "power_on"), "--round shows one round"),
    ],
)
def test_recall_of_records_bounds_its_arguments(
    argv: tuple[str, ...], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["recall", "--state-dir", str(tmp_path / "none"), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert said in line


def test_a_fifo_in_an_archive_file_s_place_is_one_line_never_a_hang(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite opening a FIFO waits for a writer for ever: an archive file (or a log's -wal)
    that is not a regular file is said so."""
    with AuditLog.open(state) as audit:
        _retention(state).run_until_done(audit)
    (path,) = archive_paths(state)[:1]
    path.unlink()
    os.mkfifo(path)
    code, doc, err = _recall(capsys, state, "--seq", "1")
    assert (code, doc) == (1, None)
    assert err.splitlines() == [
        f"paigow-controller: log: audit log: archive {path}: audit log: {path} is not a regular"
        " file"
    ]
    path.unlink()
    for name in ("audit.db-wal", "audit.db-shm"):
        (state / name).unlink(missing_ok=True)
    os.mkfifo(state / "audit.db-wal")
    code, doc, err = _recall(capsys, state, "--seq", "1")
    assert (code, doc) == (1, None)
    assert err.splitlines() == [
        f"paigow-controller: audit log: {state / 'audit.db-wal'} is not a regular file"
    ]
