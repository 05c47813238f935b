"""``paigow-controller meters``: the table's meters counted again from the log alone, with the
core's own counting (controller/core/meters.py), and compared with the meters the table keeps
in its stored context. Logs the core writes (tests/support/logged_table.py), and records appended by
hand for each meter; the archive's records count; --since counts by each record's time; a log
kept before the head row has its context read (dice-stats' too); a bad argument is one line
and exit 2, a log that cannot be read one line and exit 1."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import run_shown as run
from support.audit_writer import _to_layout_before_the_head
from support.logged_table import SUPERVISOR, LoggedTable
from support.records import valid

from controller.audit.archive import Policy, Retention, archive_paths
from controller.audit.dice_stats import dice_stats
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.meters import meters_report
from controller.audit.verify import verify_state_dir
from controller.cli.render import meters_report as meters_text
from controller.core import canonical
from controller.core.config import MIN_RETAIN_ROUNDS
from controller.core.dice import NoRollReason
from controller.core.dice_monitor import Window
from controller.core.records import RecordKind
from controller.core.snapshot import MAX_SNAPSHOT_BYTES, decode_context
from controller.core.state import Event, VoidReason

ROOT = Path(__file__).resolve().parents[2]
METERS = (
    "games",
    "no_rolls",
    "corrections",
    "round_voids",
    "lid_openings",
    "tamper",
    "power_ups",
    "service_mode",
)
NONE_YET = dict.fromkeys((str(r) for r in NoRollReason), 0)


def meters_of(report: dict[str, Any]) -> dict[str, Any]:
    return {name: report[name] for name in METERS}


def no_rolls(**counts: int) -> dict[str, int]:
    return {**NONE_YET, **counts}


# --- a log the core writes --------------------------------------------------------------------


@pytest.fixture
def day(tmp_path: Path) -> Path:
    """A day at the table, every meter moved: games (one with a no roll), a correction, the
    lid opened in a shake and between rounds, the shaker's tamper loop, voids by the
    supervisor and by the dealer's key, service mode, and a restart."""
    table = LoggedTable(tmp_path).open()
    table.play((3, 4, 5), tilted=1)  # a no roll: not flat
    table.to_result((2, 4, 5))
    table.correct((2, 4, 6))
    table.send(Event.CLOSE_ROUND)
    table.send(Event.NO_MORE_BETS)
    table.send(Event.SHAKE_PRESSED)
    table.send(Event.LID_OPENED)  # 621a.11(i): a lid opened too early, a no roll
    table.send(Event.LID_CLOSED)
    table.send(Event.VOID_ROUND)  # the dealer's key, before any dice rest
    table.to_result((1, 2, 3))
    table.void(VoidReason.PATRON_COMPLAINT)
    table.send(Event.LID_OPENED)  # between rounds: the meters count it all the same
    table.send(Event.LID_CLOSED)
    table.send(Event.TAMPER, detail="shaker tilted")
    table.send(Event.SECURED)
    table.send(Event.CLEAR_FAULT, supervisor=True, employee=SUPERVISOR)
    table.service_round()  # its close is a test record: no game
    table.play((6, 5, 4))
    table.close()
    again = LoggedTable(tmp_path).open()  # a restart
    again.play((1, 1, 2))
    again.close()
    return tmp_path


def test_the_meters_are_the_records_counted_and_the_table_agrees(day: Path) -> None:
    report = meters_report(day)
    assert meters_of(report) == {
        "games": 4,
        "no_rolls": no_rolls(not_flat=1, lid_opened=1),
        "corrections": 1,
        "round_voids": 2,
        "lid_openings": 2,
        "tamper": 1,
        "power_ups": 2,
        "service_mode": 1,
    }
    assert report["context_agrees"] is True
    assert report["context_meters"] == meters_of(report)
    with AuditLog.open(day) as log:
        stored = log.latest_context()
        assert stored is not None
        assert report["context_seq"] == stored[0] == log.size == report["records"]
        assert decode_context(stored[1]).meters.as_record() == meters_of(report)
    assert report["since"] is None
    signer = load_signer(day)
    assert signer is not None
    verify_state_dir(day, signer.verifier)  # the log is one verify-log accepts


def test_meters_prints_json_in_a_pipe_and_a_table_on_a_terminal(
    day: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, in_pipe, err = run(capsys, "meters", "--state-dir", str(day))
    assert (code, err) == (0, "")
    document = json.loads(in_pipe)
    assert document == meters_report(day)
    assert list(document)[: len(METERS)] == list(METERS)
    code, with_json, _ = run(capsys, "meters", "--state-dir", str(day), "--json", terminal=True)
    assert (code, with_json) == (0, in_pipe)
    code, text, _ = run(capsys, "meters", "--state-dir", str(day), terminal=True)
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == f"meters counted from the audit log's {document['records']} records"
    assert "  games                 4" in lines
    assert "  no rolls              2 (not_flat 1, lid_opened 1)" in lines
    assert "  results corrected     1" in lines
    assert "  rounds voided         2" in lines
    assert "  tamper-loop openings  1" in lines
    assert lines[-1] == (
        f"the table's stored meters (with record {document['context_seq']}) agree with the records"
    )


def test_stored_meters_that_differ_from_the_records_are_said(
    day: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A close committed with a context whose meters did not count it (as a table whose
    counting went wrong would store them): the recount says so; the records win."""
    with AuditLog.open(day) as log:
        stored = log.latest_context()
        assert stored is not None
        log.commit([(RecordKind.CLOSE, {"round": 99, "employee": None})], context=stored[1])
    report = meters_report(day)
    assert report["games"] == 5
    assert report["context_meters"]["games"] == 4
    assert report["context_agrees"] is False
    code, text, _ = run(capsys, "meters", "--state-dir", str(day), terminal=True)
    assert code == 0  # a report, not a failure: verify-log judges the log
    assert "WARNING: the table's stored meters" in text
    assert "games 4 stored, 5 in the records" in text


def test_a_stored_context_nested_deeper_than_the_stack_is_said_not_a_recursion_error(
    day: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose stored context nests [[[[... past the interpreter's stack (a forged
    audit.db): meters says the context cannot be read (exit 1); dice-stats says it does not
    agree; neither raises RecursionError (exit 70)."""
    with AuditLog.open(day) as log:
        # within the largest context read (the head keeps it packed: one that inflates past
        # that is refused before it is parsed), far deeper than the stack
        deep = b"[" * 30_000 + b"]" * 30_000
        assert len(deep) <= MAX_SNAPSHOT_BYTES
        log.commit([(RecordKind.CLOSE, {"round": 99, "employee": None})], context=deep)
    code, _, err = run(capsys, "meters", "--state-dir", str(day))
    assert code == 1
    assert "the stored context cannot be read: nested too deep" in err
    assert "Traceback" not in err
    assert dice_stats(day, Window.SET)["context_agrees"] is False


def test_records_after_the_stored_context_are_counted_but_not_compared(day: Path) -> None:
    """The shell's own records come after the context (an RNG commitment, a cosignature):
    the table's meters are those of the records up to its context."""
    with AuditLog.open(day) as log:
        log.append(RecordKind.POWER_ON, {"previous": "interrupted"})
    report = meters_report(day)
    assert report["power_ups"] == 3
    assert report["context_meters"]["power_ups"] == 2
    assert report["context_agrees"] is True


def test_a_context_from_before_the_meters_is_not_compared(tmp_path: Path) -> None:
    table = LoggedTable(tmp_path).open()
    table.play()
    table.close()
    with AuditLog.open(tmp_path) as log:
        stored = log.latest_context()
        assert stored is not None
        older = stored[1].replace(b'"v":5', b'"v":4', 1)
        assert older != stored[1]
        log.commit([(RecordKind.SHUTDOWN, {"round": 2})], context=older)
    report = meters_report(tmp_path)
    assert report["games"] == 1
    assert (report["context_agrees"], report["context_meters"]) == (None, None)
    assert "the table stored no meters to compare" in meters_text(report)


def test_a_log_kept_before_the_head_row_has_its_context_read(tmp_path: Path) -> None:
    """An earlier version kept the context with the last record of each step, not in a head
    row: the stored meters are read from there."""
    table = LoggedTable(tmp_path).open()
    table.play()
    frontier = table.log._tree.to_bytes()
    table.close()
    _to_layout_before_the_head(tmp_path, frontier)
    report = meters_report(tmp_path)
    assert report["games"] == 1
    assert report["context_agrees"] is True
    stats = dice_stats(tmp_path, Window.SET)
    assert (stats["rolls"], stats["context_agrees"]) == (1, True)


# --- each meter, records appended by hand ----------------------------------------------------

# (kind, data, the meter it moves or None): what counts and what does not
BY_HAND: list[tuple[RecordKind, dict[str, Any], str | None]] = [
    (RecordKind.POWER_ON, {"previous": "first start"}, "power_ups"),
    (RecordKind.CLOSE, {"round": 1, "employee": "D7"}, "games"),
    (RecordKind.NO_ROLL, {"round": 2, "attempt": 1, "reason": "die_out"}, "no_rolls"),
    (RecordKind.NO_ROLL, {"round": 2, "attempt": 2, "reason": "not_flat"}, "no_rolls"),
    (
        RecordKind.RESULT_CORRECTED,
        valid(RecordKind.RESULT_CORRECTED, round=2, attempt=3),
        "corrections",
    ),
    (RecordKind.VOID, valid(RecordKind.VOID, round=2, reason="wrong_count"), "round_voids"),
    (RecordKind.VOID, {"round": 3, "state": "armed", "supervisor": False}, "round_voids"),
    (RecordKind.LID, {"round": 4, "opened": True, "state": "idle"}, "lid_openings"),
    (RecordKind.LID, {"round": 4, "opened": False, "state": "idle"}, None),
    (RecordKind.TAMPER_LOOP, {"round": 4, "closed": False, "state": "idle"}, "tamper"),
    (RecordKind.TAMPER_LOOP, {"round": 4, "closed": True, "state": "fault"}, None),
    (RecordKind.SERVICE_MODE, {"round": 4, "entered": True, "employee": "S1"}, "service_mode"),
    (RecordKind.SERVICE_TEST, {"record": "close", "round": 4}, None),  # a test round: no game
    (RecordKind.SERVICE_TEST, {"record": "void", "round": 5}, None),
    (RecordKind.SERVICE_MODE, {"round": 4, "entered": False, "test_rounds": 2}, None),
    (RecordKind.RESULT_VOIDED, {"round": 4, "attempt": 1, "reason": "misread"}, None),
    (RecordKind.RESULT, valid(RecordKind.RESULT, round=4, attempt=2), None),
    (RecordKind.SHUTDOWN, {"round": 5}, None),
]


def test_each_meter_counts_its_records_and_nothing_else(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path)
    for kind, data, _ in BY_HAND:
        log.append(kind, data)
    log.close()
    report = meters_report(tmp_path)
    expected: dict[str, Any] = dict.fromkeys(METERS, 0)
    expected["no_rolls"] = no_rolls(die_out=1, not_flat=1)
    for _, _, meter in BY_HAND:
        if meter is not None and meter != "no_rolls":
            expected[meter] += 1
    assert meters_of(report) == expected
    assert report["records"] == len(BY_HAND) + 1  # log_created
    assert (report["context_seq"], report["context_agrees"]) == (None, None)


# --- --since: by each record's time ----------------------------------------------------------


def _clocked_log(state: Path) -> list[str]:
    """A close every hour from 2026-11-30 12:00 UTC; their times."""
    times = [
        (datetime(2026, 11, 30, 12, tzinfo=UTC) + timedelta(hours=h))
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
        for h in range(6)
    ]
    clock: Iterator[str] = iter(["2026-11-30T11:00:00.000Z", *times])
    log = AuditLog.open(state, clock=lambda: next(clock))
    for number in range(1, 7):
        log.append(RecordKind.CLOSE, {"round": number, "employee": None})
    log.close()
    return times


def test_since_counts_the_records_written_from_then_on(tmp_path: Path) -> None:
    _clocked_log(tmp_path)
    assert meters_report(tmp_path)["games"] == 6
    since = datetime(2026, 11, 30, 14, tzinfo=UTC)
    report = meters_report(tmp_path, since=since)
    assert report["games"] == 4  # 14:00 itself included
    assert report["since"] == "2026-11-30T14:00:00+00:00"
    assert (report["context_seq"], report["context_agrees"]) == (None, None)
    assert meters_report(tmp_path, since=since + timedelta(milliseconds=1))["games"] == 3


def test_since_is_local_time_through_the_command(tmp_path: Path) -> None:
    """In New York, 2026-11-30 09:00 EST is 14:00 UTC."""
    _clocked_log(tmp_path)
    env = {**os.environ, "TZ": "America/New_York", "PYTHONPATH": str(ROOT)}
    argv = ["meters", "--state-dir", str(tmp_path), "--since", "2026-11-30 09:00"]
    proc = subprocess.run(
        [sys.executable, "-m", "controller", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert json.loads(proc.stdout)["games"] == 4


def test_a_record_whose_time_is_not_one_is_named_with_since(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = iter(["2026-11-30T11:00:00.000Z", "yesterday"])
    log = AuditLog.open(tmp_path, clock=lambda: next(clock))
    seq = log.append(RecordKind.CLOSE, {"round": 1, "employee": None})
    log.close()
    assert meters_report(tmp_path)["games"] == 1  # without --since no time is read
    code, out, err = run(capsys, "meters", "--state-dir", str(tmp_path), "--since", "2026-01-01")
    assert code == 1  # named, left out, the rest counted
    report = json.loads(out)
    assert report["games"] == 0
    assert report["damaged"] == [
        {
            "record": seq,
            "error": f"record {seq}: its time 'yesterday' is not a date-time with its zone",
        }
    ]
    assert err.splitlines()[0] == (
        f"paigow-controller: meters: damaged: record {seq}: its time 'yesterday' is not a"
        " date-time with its zone"
    )
    assert "1 damaged record(s) left out" in err


# --- the archive ----------------------------------------------------------------------------------


def test_the_archives_records_are_counted(tmp_path: Path) -> None:
    """Retention moved the oldest rounds to the archive: the meters are the same, and still
    agree with the table's."""
    table = LoggedTable(tmp_path).open()
    for number in range(MIN_RETAIN_ROUNDS + 20):
        table.play((number % 6 + 1, (number // 6) % 6 + 1, 3))
    before = meters_report(tmp_path)
    signer = load_signer(tmp_path)
    assert signer is not None
    retention = Retention(tmp_path, signer, Policy(retain_rounds=MIN_RETAIN_ROUNDS))
    assert retention.run_until_done(table.log) >= 1
    table.close()
    assert archive_paths(tmp_path)
    after = meters_report(tmp_path)
    assert meters_of(after) == meters_of(before)
    assert after["games"] == MIN_RETAIN_ROUNDS + 20
    assert after["power_ups"] == 1  # in the archive now
    assert after["context_agrees"] is True


# --- refusals: one line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "30/11/2026"], "--since '30/11/2026' is not a local date-time"),
        (["--since", "2026-02-30"], "day is out of range for month"),
        (["--since", "\u0662\u0660\u0662\u0666-01-01"], "is not a local date-time"),
        (["--until", "2026-01-01"], "unrecognized arguments: --until"),
        (["--state-dir", "a\nb"], "has control characters"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "meters", "--state-dir", str(tmp_path), *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert message in err


def test_a_log_that_cannot_be_read_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "meters", "--state-dir", str(tmp_path / "none"))
    assert (code, out) == (1, "")
    assert err == f"paigow-controller: audit log: no log at {tmp_path / 'none' / DB_NAME}\n"
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / DB_NAME).write_bytes(b"not a database" * 100)
    code, out, err = run(capsys, "meters", "--state-dir", str(tmp_path / "junk"))
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert "audit log" in err


def test_a_record_that_is_not_canonical_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog.open(tmp_path)
    seq = log.append(RecordKind.CLOSE, {"round": 1, "employee": None})
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        (leaf,) = db.execute("SELECT leaf FROM records WHERE seq = ?", (seq,)).fetchone()
        entry = canonical.decode(bytes(leaf))
        db.execute("UPDATE records SET leaf = ? WHERE seq = ?", (b" " + bytes(leaf), seq))
    db.close()
    assert entry["kind"] == "close"
    code, out, err = run(capsys, "meters", "--state-dir", str(tmp_path))
    assert code == 1
    assert json.loads(out)["games"] == 0  # the damaged close is not counted
    assert err.startswith(f"paigow-controller: meters: damaged: record {seq}: not a canonical")
    assert err.count("\n") == 2  # the record named, then the count
