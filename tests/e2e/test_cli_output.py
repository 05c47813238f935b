"""What the reading commands print: a report for a person at a terminal, the same JSON as
before for a program (``--json``, or stdout not a terminal); recall's table in local time,
``--round``, ``--since``/``--until``; every ``--help``; ``--version``.

Times never come from the wall clock: the logs whose times matter are written with a scripted
clock, and the zone is set per process (TZ in a child's environment) or passed to the pure
renderer. The terminal is a real pseudo-terminal for the children, an object whose
``isatty()`` is True in-process.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import run_shown as run

import controller.cli
from controller.audit.log import AuditLog
from controller.audit.recall import export_lines, recall
from controller.cli import COMMANDS, build_parser, package_version
from controller.cli.args import local_span
from controller.cli.render import (
    RECALL_HEADERS,
    columns,
    recall_table,
    record_text,
    round_report,
    selftest_report,
    verify_report,
    zone_label,
)
from controller.core.records import RecordKind
from controller.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "hw" / "config.example.toml"
NEW_YORK = ZoneInfo("America/New_York")
READING_COMMANDS = (
    "recall",
    "verify-log",
    "selftest",
    "dice-stats",
    "meters",
    "paytables",
    "check-config",
)


# --- helpers -----------------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("logging_restored")


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "controller", *argv]


def child_env(tz: str, env: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "TZ": tz, "PYTHONPATH": str(ROOT), **(env or {})}


def on_a_terminal(
    argv: Sequence[str], *, tz: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """The command in a child whose stdout is a pseudo-terminal, in the zone ``tz``."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            cli(*argv),
            stdout=slave,
            stderr=subprocess.DEVNULL,
            env=child_env(tz, env),
            cwd=ROOT,
        )
    finally:
        os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError as exc:  # EIO: the child closed its end
                if exc.errno != errno.EIO:
                    raise
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def piped(
    argv: Sequence[str], *, tz: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*argv),
        capture_output=True,
        text=True,
        env=child_env(tz, env),
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- logs ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve rounds played by the simulated table (no rolls, a round voided and a result
    corrected among them)."""
    state_dir = tmp_path_factory.mktemp("simulated")
    subprocess.run(
        cli(
            "simulate",
            "--fast",
            "--rounds",
            "12",
            "--seed",
            "5",
            "--faults",
            "tilted=0.2,die_out=0.2",
            "--state-dir",
            str(state_dir),
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    return state_dir


# UTC opening times. New York: 2026-11-01 06:00 UTC is 02:00 EDT, which becomes 01:00 EST;
# 2026-11-30 19:00 UTC is 14:00 EST.
SCRIPTED_ROUNDS = [
    "2026-11-01T05:30:00.000Z",  # 01:30 EDT
    "2026-11-01T06:30:00.000Z",  # 01:30 EST (the hour that comes twice)
    "2026-11-30T18:59:59.000Z",  # 13:59:59 EST
    "2026-11-30T19:00:00.000Z",  # 14:00:00 EST
    "2026-11-30T19:59:30.000Z",  # 14:59:30 EST
    "2026-11-30T20:00:00.000Z",  # 15:00:00 EST
    "2026-12-01T04:59:59.000Z",  # 23:59:59 EST, 30 November
    "2026-12-01T05:00:00.000Z",  # 00:00:00 EST, 1 December
]


def result_data(number: int, attempt: int, red: int, blue: tuple[int, int]) -> dict[str, Any]:
    total = red + sum(blue)
    return {
        "round": number,
        "attempt": attempt,
        "bank": "seat 2" if number % 2 else "dealer",
        "count": total,
        "dice": {"red": red, "blue": list(blue)},
        "game": "tiles",
        "payouts": {},
        "starting_position": "dead hand" if total == 16 else f"seat {number % 6 + 1}",
        "total": total,
        "wagers": {},
    }


@pytest.fixture
def scripted(tmp_path: Path) -> Path:
    """A log whose records have known times: round n opens at SCRIPTED_ROUNDS[n - 1] and its
    other records follow a second apart. Round 2 has a no roll and a result corrected to the
    dice as they lie (read 1 2 3, seen 3 4 5), round 3 a fault, round 5 is voided by the
    supervisor, round 8 is still in play."""
    times: Iterator[str] = iter(())

    def clock() -> str:
        return next(times, "2026-12-01T06:00:00.000Z")

    log = AuditLog.open(tmp_path, clock=clock)
    for number, opened in enumerate(SCRIPTED_ROUNDS, start=1):
        start = utc(opened)
        times = iter(
            (start + timedelta(seconds=s)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            for s in range(20)
        )
        log.append(RecordKind.ROUND_OPENED, {"round": number})
        log.append(RecordKind.NO_MORE_BETS, {"round": number, "bank": "dealer", "mode": "shaker"})
        if number == 8:
            continue
        if number == 2:
            log.append(RecordKind.NO_ROLL, {"round": number, "attempt": 1, "reason": "die_out"})
            log.append(RecordKind.RESULT, result_data(number, 2, 1, (2, 3)))
            seen = result_data(number, 2, 3, (4, 5))
            log.append(
                RecordKind.RESULT_CORRECTED,
                {
                    "round": number,
                    "attempt": 2,
                    "dice_read": {"red": 1, "blue": [2, 3]},
                    "dice_seen": {"red": 3, "blue": [4, 5]},
                    "reason": "misread",
                    "employee": "S100",
                    "note": "seat 3",
                    "result": {k: v for k, v in seen.items() if k not in ("round", "attempt")},
                    "uid": 1001,
                },
            )
            log.append(RecordKind.CLOSE, {"round": number, "employee": "D7"})
            continue
        if number == 3:
            log.append(
                RecordKind.FAULT,
                {
                    "round": number,
                    "attempt": 1,
                    "fault": "tamper",
                    "detail": "tilted",
                    "state": "shaking",
                },
            )
            log.append(
                RecordKind.FAULT_CLEARED,
                {"round": number, "faults": ["tamper"], "supervisor": True},
            )
        log.append(RecordKind.RESULT, result_data(number, 1, number % 6 + 1, (4, 5)))
        if number == 5:
            log.append(
                RecordKind.VOID,
                {
                    "round": number,
                    "attempt": 1,
                    "state": "result",
                    "reason": "dealer_error",
                    "wagers": "returned",
                    "reshuffle": False,
                    "note": "x",
                    "employee": "S100",
                },
            )
        else:
            log.append(RecordKind.CLOSE, {"round": number, "employee": None})
    log.close()
    return tmp_path


# --- recall: the JSON is what it was -----------------------------------------------------------


def test_recall_json_is_the_rounds_with_the_logs_own_records(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --json on a terminal, and without it in a pipe: one document, {"rounds": [...]},
    each round {"round", "outcome", "result", "records"} and each record its seq, kind, time
    and data exactly as ``export`` gives them."""
    code, on_screen, _ = run(
        capsys, "recall", "--state-dir", str(simulated), "--json", terminal=True
    )
    assert code == 0
    code, in_pipe, _ = run(capsys, "recall", "--state-dir", str(simulated))
    assert code == 0
    assert on_screen == in_pipe
    assert on_screen.count("\n") == 1
    document = json.loads(on_screen)
    assert document == {"rounds": recall(simulated, last=10)}
    exported = {line["seq"]: line for line in export_lines(simulated)}
    rounds = document["rounds"]
    numbers = [r["round"] for r in rounds]
    assert numbers == list(range(numbers[0], numbers[0] + 10))
    for game in rounds:
        assert list(game) == ["round", "outcome", "result", "records"]
        for record in game["records"]:
            assert list(record) == ["seq", "kind", "time", "data"]
            line = exported[record["seq"]]
            assert record == {k: line[k] for k in ("seq", "kind", "time", "data")}
        results = [r["data"] for r in game["records"] if r["kind"] == "result"]
        assert game["result"] == (results[-1] if results else None)


def test_recall_round_and_window_json_have_the_same_shape(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    everything = recall(simulated, last=100)
    code, out, _ = run(capsys, "recall", "--state-dir", str(simulated), "--round", "7")
    assert code == 0
    assert json.loads(out) == {"rounds": [everything[6]]}
    code, out, _ = run(capsys, "recall", "--state-dir", str(simulated), "--since", "2000-01-01")
    assert code == 0
    assert json.loads(out) == {"rounds": everything}


# --- recall: the table -------------------------------------------------------------------------


def table_rows(text: str) -> tuple[str, list[str]]:
    """The header line and the row lines of a recall table."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("round  opened"))
    return lines[at], [line for line in lines[at + 1 :] if line.strip()]


def test_recall_on_a_terminal_is_a_table_in_local_time(simulated: Path) -> None:
    """A real pseudo-terminal, in New York: one line per round, its fields those of the JSON,
    its time the round's opening in New York's time, the zone named."""
    code, text = on_a_terminal(["recall", "--state-dir", str(simulated)], tz="America/New_York")
    assert code == 0, text
    assert not text.lstrip().startswith("{")
    rounds = recall(simulated, last=10)
    header, rows = table_rows(text)
    assert header.split("  ")[0] == "round"
    assert len(rows) == len(rounds)
    opened = [utc(g["records"][0]["time"]).astimezone(NEW_YORK) for g in rounds]
    assert f"times are local: {zone_label(opened[0])}" in text
    for row, game, moment in zip(rows, rounds, opened, strict=True):
        assert game["records"][0]["kind"] == "round_opened"
        assert row.split()[0] == str(game["round"])
        assert moment.strftime("%Y-%m-%d %H:%M:%S") in row
        result = game["result"]
        corrected = [r for r in game["records"] if r["kind"] == "result_corrected"]
        if corrected:  # the round stands on the dice as they lie (N.J.A.C. 13:69E-1.28P(d))
            result = corrected[-1]["data"]["result"]
        if result is None:
            assert row.split()[3:6] == ["-", "-", "-"]
        else:
            red, blue = result["dice"]["red"], result["dice"]["blue"]
            assert row.split()[3:7] == [str(red), str(blue[0]), str(blue[1]), str(result["total"])]
        assert game["outcome"] in row.split("  ")[-1]


def test_the_same_log_in_another_zone_shows_other_times(simulated: Path) -> None:
    code, text = on_a_terminal(["recall", "--state-dir", str(simulated)], tz="Asia/Kolkata")
    assert code == 0
    first = recall(simulated, last=10)[0]["records"][0]["time"]
    moment = utc(first).astimezone(ZoneInfo("Asia/Kolkata"))
    assert moment.strftime("%Y-%m-%d %H:%M:%S") in text
    assert "UTC+05:30" in text


def test_the_table_counts_voids_no_rolls_and_faults_per_round(scripted: Path) -> None:
    text = recall_table(recall(scripted, last=8), heading="recall", zone=NEW_YORK)
    header, rows = table_rows(text)
    assert header.split("  ")[0] == "round"
    assert re.split(r"\s{2,}", header) == list(RECALL_HEADERS)
    by_round = {int(row.split()[0]): row for row in rows}
    fields = {n: re.split(r"\s{2,}", row.strip()) for n, row in by_round.items()}
    # round, opened, red, blue, total, start, bank, attempt, read as, voids, no rolls, faults,
    # outcome: a corrected round shows the dice seen, and the dice read under "read as"
    assert fields[2][2:] == [
        *("3", "4 5", "12", "seat 3", "dealer", "2", "1 2 3"),
        *("0", "1", "0", "closed"),
    ]
    assert fields[3][2:] == [
        *("4", "4 5", "13", "seat 4", "seat 2", "1", "-"),
        *("0", "0", "1", "closed"),
    ]
    assert fields[5][2:] == [
        *("6", "4 5", "15", "seat 6", "seat 2", "1", "-"),
        *("1", "0", "0", "void (dealer_error)"),
    ]
    assert fields[8][2:] == [*("-",) * 7, "0", "0", "0", "in play"]
    # aligned: every right-aligned value ends where its header ends
    for name in ("total", "attempt", "faults"):
        end = header.index(name) + len(name)
        for row in rows:
            assert row[end - 1] != " ", (name, row)
            assert row[end : end + 2] == "  ", (name, row)


def test_the_hour_that_comes_twice_is_told_apart_by_its_zone(scripted: Path) -> None:
    """Daylight saving ends in New York between rounds 1 and 2: both opened at 01:30 local
    time, so every time carries its zone."""
    text = recall_table(recall(scripted, last=8), heading="recall", zone=NEW_YORK)
    assert "times are local: EDT (UTC-04:00) then EST (UTC-05:00)" in text
    _, rows = table_rows(text)
    assert "2026-11-01 01:30:00 EDT" in rows[0]
    assert "2026-11-01 01:30:00 EST" in rows[1]
    one_zone = recall_table(recall(scripted, last=6), heading="recall", zone=NEW_YORK)
    assert "times are local: EST (UTC-05:00)" in one_zone
    assert " EST" not in "".join(table_rows(one_zone)[1])


def test_an_empty_log_says_so(tmp_path: Path) -> None:
    AuditLog.open(tmp_path).close()
    assert recall_table(recall(tmp_path), heading="game recall", zone=UTC) == (
        "game recall: no rounds\n"
    )


# --- recall --round N --------------------------------------------------------------------------


def test_one_round_in_detail_lists_its_records_in_order(scripted: Path) -> None:
    (game,) = [g for g in recall(scripted, last=8) if g["round"] == 2]
    text = round_report(game, zone=NEW_YORK)
    lines = text.splitlines()
    assert lines[0] == "round 2 (closed), opened 2026-11-01 01:30:00 EST (UTC-05:00)"
    assert "  dice               red 3, blue 4 5" in lines  # the dice seen
    assert "  total              12" in lines
    assert "  result's attempt   2" in lines
    assert (
        "  corrected          dice read red 1, blue 2 3 -> dice seen red 3, blue 4 5:"
        " misread, by S100 (uid 1001); note seat 3"
    ) in lines
    assert "  voids              0" in lines
    assert "  no rolls           1" in lines
    listed = [line for line in lines if re.match(r"\s*\d+  \d\d:\d\d:\d\d\.\d{3}  ", line)]
    assert [int(line.split()[0]) for line in listed] == [r["seq"] for r in game["records"]]
    assert [line.split()[2] for line in listed] == [r["kind"] for r in game["records"]]
    assert "01:30:02.000  no_roll" in text
    assert "attempt 1, reason die_out" in text
    assert re.search(
        r"result_corrected  attempt 2: dice read red 1, blue 2 3 -> dice seen red 3, blue 4 5:"
        r" misread, by S100 \(uid 1001\); note seat 3; total 12, start seat 3$",
        text,
        re.MULTILINE,
    )
    assert re.search(r"close +by D7$", text, re.MULTILINE)


def test_a_round_void_says_why_who_and_that_every_wager_is_returned(scripted: Path) -> None:
    (game,) = [g for g in recall(scripted, last=8) if g["round"] == 5]
    text = round_report(game, zone=NEW_YORK)
    assert text.splitlines()[0].startswith("round 5 (void), opened")
    assert "  void               dealer_error, by S100: every wager returned; note x" in text
    assert re.search(
        r"void +attempt 1, result: dealer_error, by S100: every wager returned; note x$",
        text,
        re.MULTILINE,
    )


def test_every_operator_action_names_who_did_it() -> None:
    """The employee id a record carries, or the panel's key with no dealer signed on; the
    account of a terminal command; a void that reshuffles says so (621a.12(c))."""
    assert record_text("close", {"round": 1, "employee": None}) == (
        "by the panel, no dealer signed on"
    )
    assert record_text("no_more_bets", {"round": 1, "bank": "seat 2", "employee": "D7"}) == (
        "by D7: bank seat 2"
    )
    assert record_text(
        "mode_changed", {"round": 1, "mode": "rng", "employee": "S100", "uid": 1001}
    ) == ("by S100 (uid 1001): mode rng")
    void = {
        "round": 3,
        "attempt": 1,
        "state": "result",
        "reason": "wrong_count",
        "wagers": "returned",
        "reshuffle": True,
        "note": "",
        "employee": "S100",
    }
    assert record_text("void", void) == (
        "attempt 1, result: wrong_count, by S100: every wager returned, the tiles reshuffled"
        " (a new game)"
    )
    # a void as logs written before the reasons hold it, and their voided result
    assert record_text("void", {"round": 3, "state": "armed", "supervisor": True}) == (
        "state armed, supervisor yes"
    )
    old = {
        "round": 2,
        "outcome": "closed",
        "result": result_data(2, 2, 6, (4, 5)),
        "records": [
            {"seq": 1, "kind": "result", "time": "x", "data": result_data(2, 1, 1, (2, 3))},
            {"seq": 2, "kind": "result_voided", "time": "x", "data": {"round": 2}},
            {"seq": 3, "kind": "result", "time": "x", "data": result_data(2, 2, 6, (4, 5))},
        ],
    }
    _, rows = table_rows(recall_table([old], heading="recall", zone=UTC))
    assert re.split(r"\s{2,}", rows[0].strip())[2:] == [
        *("6", "4 5", "15", "seat 3", "dealer", "2", "-"),
        *("1", "0", "0", "closed"),
    ]


def test_recall_round_on_a_terminal(scripted: Path) -> None:
    code, text = on_a_terminal(
        ["recall", "--state-dir", str(scripted), "--round", "3"], tz="America/New_York"
    )
    assert code == 0, text
    assert text.startswith("round 3 (closed), opened 2026-11-30 13:59:59 EST (UTC-05:00)\n")
    assert "  faults             1" in text
    assert re.search(r"fault\s+attempt 1, detail tilted, fault tamper, state shaking", text)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--round", "9"], "round 9 is not in the log"),
        (["--round", "0"], "--round 0 is not 1.."),
        (["--round", "\u0663"], "is not a whole number"),
        (["--round", "3", "--last", "2"], "takes no --last, --since or --until"),
        (["--round", "3", "--since", "2026-11-30"], "takes no --last, --since or --until"),
    ],
)
def test_recall_round_refusals_are_one_line(
    scripted: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    code, out, err = run(capsys, "recall", "--state-dir", str(scripted), *argv)
    assert code == (1 if "not in the log" in message else 2)
    assert out == ""
    assert err.count("\n") == 1
    assert message in err


# --- recall --since / --until ------------------------------------------------------------------


def rounds_between(state_dir: Path, tz: str, *window: str) -> list[int]:
    proc = piped(["recall", "--state-dir", str(state_dir), *window], tz=tz)
    assert proc.returncode == 0, proc.stderr
    return [game["round"] for game in json.loads(proc.stdout)["rounds"]]


def test_since_and_until_are_local_times_in_the_machines_zone(scripted: Path) -> None:
    window = ("--since", "2026-11-30 14:00", "--until", "2026-11-30 14:59")
    assert rounds_between(scripted, "America/New_York", *window) == [4, 5]
    assert rounds_between(scripted, "UTC", *window) == []
    utc_window = ("--since", "2026-11-30 19:00", "--until", "2026-11-30 19:59")
    assert rounds_between(scripted, "UTC", *utc_window) == [4, 5]


def test_a_window_takes_both_ends_to_the_precision_written(scripted: Path) -> None:
    ny = "America/New_York"
    assert rounds_between(scripted, ny, "--since", "2026-11-30") == [3, 4, 5, 6, 7, 8]
    assert rounds_between(scripted, ny, "--until", "2026-11-30") == [1, 2, 3, 4, 5, 6, 7]
    assert rounds_between(scripted, ny, "--since", "2026-11-30", "--until", "2026-11-30") == [
        3,
        4,
        5,
        6,
        7,
    ]
    assert rounds_between(scripted, ny, "--until", "2026-11-30 14:00") == [1, 2, 3, 4]
    assert rounds_between(scripted, ny, "--until", "2026-11-30 13:59:58") == [1, 2]
    assert rounds_between(scripted, ny, "--since", "2026-11-30 14:59:30") == [5, 6, 7, 8]
    assert rounds_between(scripted, ny, "--since", "2026-11-30", "--last", "2") == [7, 8]
    assert rounds_between(scripted, ny, "--since", "2026-12-02") == []


def test_a_window_on_a_terminal_says_how_many_rounds_it_holds(scripted: Path) -> None:
    code, text = on_a_terminal(
        ["recall", "--state-dir", str(scripted), "--since", "2026-11-30", "--last", "2"],
        tz="America/New_York",
    )
    assert code == 0, text
    assert text.startswith(
        "game recall: 6 rounds opened since 2026-11-30 (local time); the last 2 shown (--last)\n"
    )
    _, rows = table_rows(text)
    assert [row.split()[0] for row in rows] == ["7", "8"]
    assert "2026-11-30 23:59:59" in rows[0]


def test_local_span_reads_each_form_in_the_zone_given() -> None:
    day = local_span("2026-11-30", "--since", zone=NEW_YORK)
    assert (day.start, day.end) == (
        datetime(2026, 11, 30, 5, tzinfo=UTC),
        datetime(2026, 12, 1, 5, tzinfo=UTC),
    )
    minute = local_span("2026-11-30 14:00", "--until", zone=NEW_YORK)
    assert minute.end - minute.start == timedelta(minutes=1)
    assert minute.start == datetime(2026, 11, 30, 19, tzinfo=UTC)
    second = local_span("2026-07-04T09:15:30", "--since", zone=NEW_YORK)
    assert (second.start, second.end - second.start) == (
        datetime(2026, 7, 4, 13, 15, 30, tzinfo=UTC),
        timedelta(seconds=1),
    )


BAD_TIMES = [
    "",
    "x",
    "yesterday",
    "2026-11-30 14",
    "2026-11-30 14:00Z",
    "2026-11-30T14:00:00+01:00",
    "2026-11-30 14:00:00.5",
    "30/11/2026",
    "2026-13-01",
    "2026-02-30",
    "2026-11-30 24:00",
    "2026-11-30 14:60",
    "1999-12-31",
    "3000-01-01",
    " 2026-11-30",
    "2026-11-30\n14:00",
    "\u0662\u0660\u0662\u0666-11-30",  # Arabic-Indic digits: \d would take them
    "\uff12\uff10\uff12\uff16-11-30",  # fullwidth
    "2026-11-30" + "0" * 100_000,
]


@pytest.mark.parametrize("text", BAD_TIMES)
def test_a_bad_local_time_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        local_span(text, "--since", zone=NEW_YORK)


@pytest.mark.parametrize("option", ["--since", "--until"])
def test_a_bad_since_or_until_exits_2_in_one_line(
    option: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Checked before the log is opened: the directory holds no log."""
    for text in BAD_TIMES:
        code, out, err = run(capsys, "recall", "--state-dir", str(tmp_path), option, text)
        assert (code, out) == (2, ""), text[:40]
        assert err.count("\n") == 1
        assert err.startswith(f"paigow-controller: {option} ")
        assert len(err) < 300
    code, _, err = run(capsys, "recall", "--since", "2026-12-01", "--until", "2026-11-30")
    assert code == 2
    assert "--since 2026-12-01 is after --until 2026-11-30" in err


def test_a_bad_since_through_a_real_process(tmp_path: Path) -> None:
    proc = piped(
        ["recall", "--state-dir", str(tmp_path), "--since", "2026-11-31 14:00"],
        tz="America/New_York",
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        "paigow-controller: --since '2026-11-31 14:00': day is out of range for month\n"
    )


# --- the other reading commands ----------------------------------------------------------------


def test_every_reading_command_prints_json_in_a_pipe_and_text_on_a_terminal(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(selftest, which claims pins, runs in a child: the next test.)"""
    argvs = {
        "recall": ["recall", "--state-dir", str(simulated)],
        "verify-log": ["verify-log", "--state-dir", str(simulated), "--jobs", "1"],
        "dice-stats": ["dice-stats", "--state-dir", str(simulated)],
        "meters": ["meters", "--state-dir", str(simulated)],
        "paytables": ["paytables", "--config", str(EXAMPLE)],
        "check-config": ["check-config", "--config", str(EXAMPLE)],
    }
    assert set(argvs) == set(READING_COMMANDS) - {"selftest"}
    for name, argv in argvs.items():
        code, in_pipe, _ = run(capsys, *argv)
        json.loads(in_pipe)
        again, with_json, _ = run(capsys, *argv, "--json", terminal=True)
        assert (again, with_json) == (code, in_pipe), name
        again, text, _ = run(capsys, *argv, terminal=True)
        assert again == code, name
        assert text.strip(), name
        assert not text.lstrip().startswith("{"), name
        with pytest.raises(ValueError):  # noqa: PT011 - any JSON error: it is not JSON
            json.loads(text)


def test_selftest_prints_json_in_a_pipe_and_its_checks_on_a_terminal(tmp_path: Path) -> None:
    config = tmp_path / "selftest.toml"
    config.write_text(f'[sensor]\nurl = "{tmp_path}/no-such-port"\ntimeout_ms = 100\nretries = 0\n')
    argv = ["selftest", "--config", str(config), "--state-dir", str(tmp_path / "none")]
    env = {"GPIOZERO_PIN_FACTORY": "mock"}
    proc = piped(argv, tz="UTC", env=env)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert proc.stderr.count("\n") == 1
    code, with_json = on_a_terminal([*argv, "--json"], tz="UTC", env=env)
    assert code == 1
    assert json.loads(with_json) == report
    code, text = on_a_terminal(argv, tz="UTC", env=env)
    assert code == 1
    failed = [name for name, check in report["checks"].items() if not check["ok"]]
    assert {"keys", "sensor"} <= set(failed)
    assert text.splitlines()[0] == f"selftest FAILED: {', '.join(failed)}"
    for name, check in report["checks"].items():
        assert re.search(rf"^{name}\s+{'ok' if check['ok'] else 'FAILED'}\s", text, re.MULTILINE)


def test_verify_log_report_says_what_the_json_says(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify-log", "--state-dir", str(simulated), "--jobs", "1"]
    _, out, _ = run(capsys, *argv)
    report = json.loads(out)
    code, text, _ = run(capsys, *argv, terminal=True)
    assert code == 0
    assert text.startswith("audit log verified\n")
    assert re.search(rf"^  records\s+{report['records']}$", text, re.MULTILINE)
    assert re.search(rf"^  key\s+{re.escape(report['key'])}$", text, re.MULTILINE)


def test_paytables_and_check_config_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text, _ = run(capsys, "paytables", "--config", str(EXAMPLE), terminal=True)
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "paytables over the 216 equally likely rolls of the three dice"
    a = next(line for line in lines if line.startswith("A "))
    assert a.split()[:4] == ["A", "sum", "8-16-17", "30"]
    assert "5/36 (13.8889 %)" in a
    assert "1/18 (5.5556 %)" in a
    code, text, _ = run(capsys, "check-config", "--config", str(EXAMPLE), terminal=True)
    assert code == 0
    assert text.splitlines()[0] == f"config {EXAMPLE} is valid"
    assert re.search(r"^  paytables\s+A, B$", text, re.MULTILINE)


def test_a_bad_config_on_a_terminal_is_still_78_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text("[round]\nmin_shake_cycles = 2\n")
    for command in ("check-config", "paytables"):
        code, out, err = run(capsys, command, "--config", str(bad), terminal=True)
        assert (code, out) == (78, "")
        assert err.count("\n") == 1
        assert "round.min_shake_cycles" in err


def test_selftest_report_names_each_check() -> None:
    text = selftest_report(
        {
            "ok": False,
            "checks": {
                "config": {"ok": True, "detail": "c.toml sha256 0123"},
                "keys": {"ok": False, "detail": "AuditLogError: no signing key"},
            },
        }
    )
    assert text.splitlines()[0] == "selftest FAILED: keys"
    assert re.search(r"^keys\s+FAILED\s+AuditLogError: no signing key$", text, re.MULTILINE)
    assert re.search(r"^config\s+ok\s+c.toml sha256 0123$", text, re.MULTILINE)


def test_a_failed_verification_names_the_record() -> None:
    text = verify_report({"ok": False, "record": 12, "error": "record 12: prev does not match"})
    assert text == "audit log NOT verified: record 12: record 12: prev does not match\n"


def test_what_comes_from_the_log_cannot_move_the_cursor_or_break_a_line() -> None:
    """A record's text (a note, a sensor's detail) reaches the terminal one line, its escape
    sequences shown, not obeyed."""
    game = {
        "round": 4,
        "outcome": "closed",
        "result": None,
        "records": [
            {
                "seq": 9,
                "kind": "supervisor_action",
                "time": "2026-11-30T19:00:00.000Z",
                "data": {"round": 4, "detail": "a\x1b[2Jb\nc"},
            }
        ],
    }
    text = round_report(game, zone=NEW_YORK)
    assert "\x1b" not in text
    assert text.startswith("round 4 (closed), opened 2026-11-30 14:00:00 EST (UTC-05:00)\n")
    assert "detail a\\x1b[2Jb c" in text
    report = selftest_report({"checks": {"pins": {"ok": False, "detail": "unavailable:\n  17"}}})
    assert report.splitlines()[-1] == "pins   FAILED  unavailable:   17"
    assert report.count("\n") == 4  # the heading, a blank line, the header, the one check


def test_a_time_that_is_not_one_is_shown_as_written() -> None:
    game = {
        "round": 4,
        "outcome": "in play",
        "result": None,
        "records": [{"seq": 9, "kind": "round_opened", "time": "yesterday", "data": {}}],
    }
    assert "round 4 (in play), opened yesterday (not a time)" in round_report(game, zone=UTC)
    _, rows = table_rows(recall_table([game], heading="recall", zone=UTC))
    assert rows[0].split()[:2] == ["4", "yesterday"]


def test_columns_align_left_and_right() -> None:
    text = columns(["name", "n"], [["a", 1], ["bbb", 100], [None, None]], right="_r")
    assert text.splitlines() == ["name    n", "a       1", "bbb   100", "-       -"]


# --- --help and --version ------------------------------------------------------------------------


def subparsers() -> dict[str, Any]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(commands.choices)


def test_every_subcommand_has_a_description_and_an_example() -> None:
    found = subparsers()
    assert set(found) == {c.name for c in COMMANDS}
    for name, sub in found.items():
        assert len((sub.description or "").split()) >= 15, name
        assert (sub.epilog or "").startswith("example"), name
        assert f"paigow-controller {name}" in sub.epilog, name
        help_text = sub.format_help()
        assert sub.epilog in help_text, name  # the examples as written, not refilled
    for name in READING_COMMANDS:
        text = " ".join(found[name].format_help().split())
        assert "--json" in text, name
        assert "not a terminal" in text, name


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_help_through_main_exits_0(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, command, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(f"usage: paigow-controller {command}")
    assert "\nexample" in out


def test_version_prints_the_installed_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--version")
    assert (code, err) == (0, "")
    try:
        expected = metadata.version("paigow-controller")
    except metadata.PackageNotFoundError:  # a source tree that is not installed
        expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out == f"paigow-controller {expected}\n"


def test_version_falls_back_to_pyproject_when_not_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert package_version() == declared
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "9.8.7"\n')
    monkeypatch.setattr(controller.cli, "PYPROJECT", tmp_path / "pyproject.toml")
    assert package_version() == "9.8.7"
    monkeypatch.setattr(controller.cli, "PYPROJECT", tmp_path / "missing.toml")
    assert package_version() == "unknown"
    monkeypatch.setattr(controller.cli, "PYPROJECT", Path("/dev/zero"))
    assert package_version() == "unknown"


def test_version_through_a_real_process() -> None:
    proc = piped(["--version"], tz="UTC")
    assert proc.returncode == 0
    assert re.fullmatch(r"paigow-controller [0-9][0-9A-Za-z.+-]*\n", proc.stdout)
    assert proc.stderr == ""
