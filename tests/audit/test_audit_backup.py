"""``paigow-controller backup`` and ``verify-log --db`` / ``--export``: a copy of the live log
taken while the table plays verifies, a copy or an export altered anywhere fails at the record
altered, and what is not a log (garbage, a huge file) is one line, never a traceback."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.killed_log import kill_writing, records_in_the_database_file

from controller.audit.backup import backup_log
from controller.audit.log import DB_NAME, KEY_FILE, AuditLog
from controller.audit.recall import export_lines
from controller.audit.verify import verify_database, verify_export, verify_state_dir
from controller.cli import main
from controller.core import canonical
from controller.core.note import Signer, Verifier
from controller.errors import LogIntegrityError

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("played")
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "5", "12"], check=True, stdout=subprocess.DEVNULL
    )
    return state


def _key(state: Path) -> Verifier:
    return Signer.parse((state / KEY_FILE).read_text()).verifier


def _key_file(state: Path, tmp_path: Path) -> Path:
    path = tmp_path / "log.pub"
    path.write_text(f"{_key(state)}\n")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("paigow-controller: ") and "Traceback" not in err


# --- backup ---------------------------------------------------------------------------------


def test_a_backup_taken_while_a_simulation_plays_verifies(tmp_path: Path) -> None:
    state = tmp_path / "state"
    table = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller",
            "simulate",
            "--fast",
            "--rounds",
            "60",
            "--faults",
            "none",
            "--state-dir",
            str(state),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    backups: list[tuple[Path, int]] = []
    try:
        deadline = time.monotonic() + 120
        while table.poll() is None and time.monotonic() < deadline:
            if (state / KEY_FILE).exists() and (state / DB_NAME).exists():
                out = tmp_path / f"backup-{len(backups)}.db"
                try:
                    report = backup_log(state, out)
                except Exception as exc:  # the log's first commit may not be there yet
                    if backups or "no such table" not in str(exc):
                        raise
                else:
                    backups.append((out, report.records))
            time.sleep(0.2)
        _, err = table.communicate(timeout=120)
    finally:
        if table.poll() is None:
            table.kill()
            table.wait()
    assert table.returncode == 0, err
    during = [records for _, records in backups]
    assert len(set(during)) >= 3, during  # taken while it grew
    verifier = _key(state)
    for path, records in backups:
        report = verify_database(path, verifier, workers=1)
        assert report.records == records
        assert not path.with_name(path.name + "-wal").exists()  # one file, nothing beside it
    final = backup_log(state, tmp_path / "final.db")
    assert verify_database(final.path, verifier).as_dict() == (
        verify_state_dir(state, verifier).as_dict()
    )


def test_a_stopped_log_whose_wal_holds_records_is_backed_up_and_verified_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stop keeps the WAL, and a writer killed after it leaves records in the WAL that the
    database file does not hold: backup and verify-log read them (the WAL read as the log),
    and leave the state directory's files as they were (nothing copied into the database,
    nothing removed): the next start finds what the kill left."""
    state = tmp_path / "state"
    kill_writing(state, 5)
    AuditLog.open(state).close()
    kill_writing(state, 30)
    assert records_in_the_database_file(state) == 6
    names = sorted(p.name for p in state.iterdir())
    files = {n: (state / n).read_bytes() for n in (DB_NAME, f"{DB_NAME}-wal")}
    out = tmp_path / "b.db"
    code, stdout, err = _run(capsys, "backup", "--state-dir", str(state), str(out))
    assert (code, err) == (0, "")
    assert json.loads(stdout)["records"] == 36
    assert verify_database(out, _key(state), workers=1).records == 36
    assert verify_state_dir(state, _key(state)).records == 36
    assert sorted(p.name for p in state.iterdir()) == names
    assert {n: (state / n).read_bytes() for n in files} == files


def test_the_backup_command_prints_what_it_copied_and_holds_no_private_key(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "table.db"
    code, stdout, err = _run(capsys, "backup", "--state-dir", str(played), str(out))
    assert (code, err) == (0, "")
    report = json.loads(stdout)
    assert report["backup"] == str(out)
    assert report["bytes"] == out.stat().st_size
    with sqlite3.connect(played / DB_NAME) as db:
        (records,) = db.execute("SELECT max(seq) FROM records").fetchone()
        names = {row[0] for row in db.execute("SELECT name FROM meta")}
    assert report["records"] == records
    assert report["checkpoint_size"] == records
    assert report["checkpoint"].startswith(f"{report['origin']}\n{records}\n")
    assert str(played / KEY_FILE) in report["signing_key"]
    assert report["archive"] is None  # nothing was moved to the archive
    assert names <= {"format", "origin", "key_id"}
    signer = Signer.parse((played / KEY_FILE).read_text())
    copied = out.read_bytes()
    assert signer.seed not in copied
    assert str(signer).split("+", 4)[4].encode() not in copied  # base64 may hold "+"
    assert not list(tmp_path.glob(".table.db.*"))  # no temporary left behind


def test_a_backup_never_replaces_a_file_without_force(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "table.db"
    out.write_text("an older backup")
    code, stdout, err = _run(capsys, "backup", "--state-dir", str(played), str(out))
    assert (code, stdout) == (2, "")
    assert _one_line(err)
    assert "--force" in err
    assert out.read_text() == "an older backup"
    code, stdout, err = _run(capsys, "backup", "--force", "--state-dir", str(played), str(out))
    assert code == 0, err
    assert verify_database(out, _key(played)).records == json.loads(stdout)["records"]


@pytest.mark.parametrize("where", ["missing-dir/x.db", "a-dir", "live"])
def test_bad_backup_targets_exit_2_in_one_line(
    where: str, played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-dir").mkdir()
    target = str(played / DB_NAME) if where == "live" else str(tmp_path / where)
    code, stdout, err = _run(capsys, "backup", "--force", "--state-dir", str(played), target)
    assert (code, stdout) == (2, "")
    assert _one_line(err)


def test_a_backup_of_no_log_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = _run(capsys, "backup", "--state-dir", str(tmp_path), str(tmp_path / "b"))
    assert (code, stdout) == (1, "")
    assert _one_line(err)
    assert not (tmp_path / "b").exists()


# --- verify-log --db ------------------------------------------------------------------------


def test_verify_log_checks_a_backup_with_the_key_given_or_the_state_dir_s(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = backup_log(played, tmp_path / "b.db").path
    key = _key_file(played, tmp_path)
    expected = verify_state_dir(played, _key(played)).as_dict()
    for argv in (["--key", str(key)], ["--state-dir", str(played)]):
        code, stdout, err = _run(capsys, "verify-log", "--db", str(out), *argv)
        assert (code, err) == (0, "")
        report = json.loads(stdout)
        assert {k: report[k] for k in expected} == expected
    code, stdout, err = _run(capsys, "verify-log", "--db", str(out))  # whose key?
    assert (code, stdout) == (2, "")
    assert _one_line(err)
    assert "--key" in err


def test_a_backup_checked_with_another_log_s_key_fails(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = backup_log(played, tmp_path / "b.db").path
    other = tmp_path / "other.pub"
    other.write_text(f"{Signer.generate('paigow-controller/table-1').verifier}\n")
    code, stdout, _ = _run(capsys, "verify-log", "--db", str(out), "--key", str(other))
    assert code == 1
    assert json.loads(stdout)["ok"] is False


def _leaf_offset(data: bytes, seq: int) -> int:
    """Where, in the file's bytes, the ``time`` of record ``seq`` is (found exactly once)."""
    marker = f'"seq":{seq},"time":"'.encode()
    assert data.count(marker) == 1, seq
    return data.index(marker) + len(marker) + 20  # a digit of the milliseconds


@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_a_flipped_byte_in_a_backup_is_reported_at_that_record(
    which: str, played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = backup_log(played, tmp_path / "b.db").path
    report = verify_database(out, _key(played))
    seq = {"first": 2, "middle": report.records // 2, "last": report.records}[which]
    data = bytearray(out.read_bytes())
    offset = _leaf_offset(bytes(data), seq)
    data[offset] = ord("0") + (data[offset] - ord("0") + 1) % 10  # still canonical JSON
    out.write_bytes(bytes(data))
    key = _key_file(played, tmp_path)
    code, stdout, err = _run(capsys, "verify-log", "--db", str(out), "--key", str(key))
    assert code == 1
    assert json.loads(stdout)["record"] == seq, stdout
    assert _one_line(err)
    assert f"record {seq}" in err


# --- verify-log --export --------------------------------------------------------------------


def _export(state: Path, path: Path) -> list[dict[str, object]]:
    lines = list(export_lines(state))
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return lines


def test_an_export_verifies_as_the_log_does(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "audit.jsonl"
    code, stdout, _ = _run(capsys, "export", "--state-dir", str(played))
    assert code == 0
    export.write_text(stdout)
    key = _key_file(played, tmp_path)
    code, stdout, err = _run(capsys, "verify-log", "--export", str(export), "--key", str(key))
    assert (code, err) == (0, "")
    report = json.loads(stdout)
    expected = verify_state_dir(played, _key(played)).as_dict()
    assert {k: report[k] for k in expected} == expected


def _altered(lines: list[dict[str, object]], how: str) -> tuple[list[dict[str, object]], int]:
    """The export altered ``how``, and the record that must be named."""
    lines = [dict(line) for line in lines]
    result = next(i for i, line in enumerate(lines) if line["kind"] == "result")
    seq = int(lines[result]["seq"])  # type: ignore[call-overload]
    if how == "data":  # what a reader of the line sees, not what was signed
        data = dict(lines[result]["data"])  # type: ignore[call-overload]
        data["starting_position"] = "seat 9"
        lines[result]["data"] = data
    elif how == "leaf":  # the signed record itself, and its line to match
        entry = canonical.decode(str(lines[result]["leaf"]).encode())
        entry["data"]["starting_position"] = "seat 9"  # re-encoded canonically
        lines[result]["leaf"] = canonical.encode(entry).decode()
        lines[result]["data"] = entry["data"]
    elif how == "time":
        lines[result]["time"] = "2020-01-01T00:00:00.000Z"
    elif how == "deleted":
        del lines[result]
    elif how == "swapped":
        lines[result], lines[result + 1] = lines[result + 1], lines[result]
    elif how == "last checkpoint":
        del lines[-1]["checkpoint"]
        seq = int(lines[-1]["seq"]) + 1  # type: ignore[call-overload]
    elif how == "an extra field":
        lines[result]["note"] = "looks fine"
    return lines, seq


@pytest.mark.parametrize(
    "how", ["data", "leaf", "time", "deleted", "swapped", "last checkpoint", "an extra field"]
)
def test_a_modified_export_fails_at_the_record(how: str, played: Path, tmp_path: Path) -> None:
    export = tmp_path / "audit.jsonl"
    lines, seq = _altered(_export(played, export), how)
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(LogIntegrityError) as caught:
        verify_export(export, _key(played))
    assert caught.value.record == seq, str(caught.value)


def test_an_export_can_be_checked_against_a_checkpoint_kept_elsewhere(
    played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "audit.jsonl"
    lines = _export(played, export)
    kept = tmp_path / "cp.txt"
    _, stdout, _ = _run(capsys, "checkpoint", "--state-dir", str(played))
    kept.write_text(stdout)
    assert verify_export(export, _key(played), checkpoint=stdout).extends == len(lines)
    # cut back to the last round close before the end: every line verifies, the kept
    # checkpoint does not
    close = max(i for i, line in enumerate(lines[:-1]) if line["kind"] == "close")
    export.write_text("".join(json.dumps(line) + "\n" for line in lines[: close + 1]))
    assert verify_export(export, _key(played)).records == close + 1
    key = _key_file(played, tmp_path)
    argv = ["verify-log", "--export", str(export), "--key", str(key), "--checkpoint", str(kept)]
    code, stdout, err = _run(capsys, *argv)
    assert code == 1
    assert "rolled back" in err


# --- what is not a log ------------------------------------------------------------------------


def _garbage(tmp_path: Path, kind: str) -> str:
    path = tmp_path / kind
    if kind == "dev-zero":
        return "/dev/zero"
    if kind == "random":
        path.write_bytes(os.urandom(300_000))
    elif kind == "huge-line":
        path.write_bytes(b"[" * 3_000_000)
    elif kind == "deep":
        path.write_bytes(b"[" * 100_000 + b"\n")
    elif kind == "json-lines":
        path.write_text('{"seq": 1}\n[1, 2]\n')
    elif kind == "empty":
        path.write_text("")
    elif kind == "sqlite":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE t (x)")
        db.close()
    elif kind == "directory":
        path.mkdir()
    return str(path)


@pytest.mark.parametrize(
    "kind",
    ["dev-zero", "random", "huge-line", "deep", "json-lines", "empty", "sqlite", "directory"],
)
@pytest.mark.parametrize("option", ["--db", "--export"])
def test_what_is_not_a_log_is_one_line_never_a_traceback(
    option: str, kind: str, played: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = _key_file(played, tmp_path)
    code, stdout, err = _run(
        capsys, "verify-log", option, _garbage(tmp_path, kind), "--key", str(key)
    )
    assert code in (1, 2), (code, err)
    assert _one_line(err), err
    if stdout:
        assert json.loads(stdout)["ok"] is False


def test_a_huge_export_is_read_in_bounded_memory(played: Path, tmp_path: Path) -> None:
    """A 4 GiB line (a sparse file), in a child capped at 512 MiB of address space."""
    key = _key_file(played, tmp_path)
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as file:
        file.truncate(4 << 30)
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 29, 1 << 29))\n"
        "from controller.cli import main\n"
        f"argv = ['verify-log', '--export', {str(huge)!r}, '--key', {str(key)!r}]\n"
        "raise SystemExit(main(argv))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 1, child.stderr
    assert "Traceback" not in child.stderr
    assert "is over" in child.stderr
