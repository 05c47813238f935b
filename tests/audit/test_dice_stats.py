"""Issue 15 end to end: ``simulate --dice-bias`` loads the simulated dice, the running
controller's monitor raises the alarm, and ``dice-stats`` counts the dice again from the log
alone and reports it; fair dice raise none. Then what dice-stats does with a log that lies."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.logged_table import LoggedTable, rng_dice_settings
from support.records import valid

from controller.audit.dice_stats import dice_stats
from controller.audit.log import AuditLog
from controller.cli.render import dice_stats_report
from controller.core.dice import Roll
from controller.core.dice_monitor import DiceWindows, Window
from controller.core.records import RecordKind
from controller.core.state import Event, Mode, VoidReason
from controller.errors import LogIntegrityError

CLI = [sys.executable, "-m", "controller"]
SEED = 1  # the simulation's dice and crew
HANG_S = 1500  # a simulation that has not ended by then hangs (pytest-timeout: 1800 s)
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def stats_of(state: Path, *more: str) -> dict[str, Any]:
    proc = run("dice-stats", "--state-dir", str(state), *more)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory on a tmpfs where there is one (fsync costs nothing there: the 2,400 commits
    of the two logs do not queue behind the rest of the suite's syncs); the logs are the same
    either way."""
    if SCRATCH is None:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="dice-stats-", dir=SCRATCH))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def simulations(tmp_path: Path) -> tuple[Path, Path]:
    """The issue's two runs, side by side (each waits on the simulated hardware far more than
    it computes): 400 rounds with the red die showing 6 a quarter of the time, and the same
    400 rounds with fair dice. Plain rounds: the dealer banks, no style or void is keyed in, so
    the crew's key presses do not double a round's time (the dice are what is tested here;
    34.8 s alone with them, 23.0 s without; in the full suite 79 s with them, 44-54 s without)."""
    print(f"seed {SEED}")
    loaded, fair = tmp_path / "loaded", tmp_path / "fair"
    common = ["simulate", "--fast", "--plain-rounds", "--rounds", "400", "--seed", str(SEED)]
    procs = [
        subprocess.Popen(
            [*CLI, *common, *bias, "--state-dir", str(state)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for state, bias in ((loaded, ["--dice-bias", "red:6:0.25"]), (fair, []))
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=HANG_S)  # a hang, not a slow machine
        assert proc.returncode == 0, err[-2000:]
    return loaded, fair


@pytest.mark.slow
def test_loaded_dice_raise_the_alarm_and_fair_dice_do_not(tmp_path: Path, scratch: Path) -> None:
    """dice-stats, reading each log alone, reports the loaded red die's alarm and none for the
    fair dice; then what it says on a terminal, and on a log whose dice were edited."""
    loaded, fair = simulations(scratch)
    stats = stats_of(loaded)
    assert stats["alarm"] is True
    assert stats["rolls"] >= 400  # every result read
    (alarm,) = stats["alarms"]
    assert (alarm["test"], alarm["face"]) == ("red", 6)
    assert float(alarm["log_e"]) >= float(alarm["threshold"])
    # the chi-square test agrees; its figure depends on which rolls the set window holds (a
    # loaded machine may shift where the crew's dice change falls), the alarm above does not
    print(f"red die's chi-square p-value {stats['dice']['red']['p_value']:.2e}")
    assert stats["dice"]["red"]["p_value"] < 0.01
    assert stats["context_agrees"] is True  # the controller counted what the records say
    assert run("verify-log", "--state-dir", str(loaded)).returncode == 0

    stats = stats_of(fair, "--window", "all")
    assert stats["alarm"] is False
    assert stats["alarms"] == []
    assert stats["rolls"] >= 400
    assert all(float(f["log_e"]) < float(f["threshold"]) for f in stats["monitor"]["tests"])
    assert stats["context_agrees"] is True

    the_terminal_table_says_what_the_json_says(loaded)
    a_result_changed_in_the_log_no_longer_gives_its_alarm(loaded, tmp_path)


def the_terminal_table_says_what_the_json_says(loaded: Path) -> None:
    stats = dice_stats(loaded, Window.SET)
    text = dice_stats_report(stats)
    red = next(line for line in text.splitlines() if line.startswith("red "))
    assert red.split()[1:7] == [str(stats["dice"]["red"]["counts"][str(f)]) for f in range(1, 7)]
    assert "DICE ALARM stands: red (face 6)" in text


def a_result_changed_in_the_log_no_longer_gives_its_alarm(loaded: Path, tmp_path: Path) -> None:
    """An auditor's copy whose dice were edited before the alarm: the alarm recorded is not what
    the monitor's test gives on the rolls before it, and dice-stats names the record."""
    copy = tmp_path / "copy"
    copy.mkdir()
    source = sqlite3.connect(loaded / "audit.db")
    target = sqlite3.connect(copy / "audit.db")
    source.backup(target)
    source.close()
    (seq,) = target.execute("SELECT min(seq) FROM records WHERE kind = 'dice_alarm'").fetchone()
    rows = target.execute(
        "SELECT seq, leaf FROM records WHERE kind = 'result' AND seq < ? ORDER BY seq DESC",
        (seq,),
    ).fetchall()
    edited, leaf = next((s, bytes(b)) for s, b in rows if b'"red":6' in bytes(b))
    target.execute(
        "UPDATE records SET leaf = ? WHERE seq = ?", (leaf.replace(b'"red":6', b'"red":1'), edited)
    )
    target.commit()
    target.close()
    proc = run("dice-stats", "--state-dir", str(copy))
    assert proc.returncode == 1
    assert f"record {seq}: the dice alarm is not what the monitor's test gives" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--window", "test"], "invalid choice"),
        (["--window", "set", "--nope"], "unrecognized"),
    ],
)
def test_dice_stats_refuses_a_bad_argument_in_one_line(
    tmp_path: Path, args: list[str], says: str
) -> None:
    proc = run("dice-stats", "--state-dir", str(tmp_path), *args)
    assert proc.returncode == 2
    assert says in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2  # argparse's usage line and the error


def test_dice_stats_without_a_log_says_so(tmp_path: Path) -> None:
    proc = run("dice-stats", "--state-dir", str(tmp_path))
    assert proc.returncode == 1
    assert "no log at" in proc.stderr


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("red:7:0.25", "face '7' is not 1..6"),
        ("green:6:0.25", "is not colour:face:probability"),
        ("red:6:1.5", "is not 0..1"),
        ("red:6:\u0660.\u0665", "is not 0..1"),  # Arabic-Indic digits are not ASCII digits
        ("red:6", "is not colour:face:probability"),
        ("red:6:0.25:1", "is not colour:face:probability"),
    ],
)
def test_simulate_refuses_a_bad_dice_bias_in_one_line(tmp_path: Path, spec: str, says: str) -> None:
    proc = run("simulate", "--rounds", "1", "--dice-bias", spec, "--state-dir", str(tmp_path))
    assert proc.returncode == 2
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr


def test_simulate_loads_each_colour_once(tmp_path: Path) -> None:
    proc = run(
        "simulate", "--rounds", "1", "--dice-bias", "red:6:0.3", "--dice-bias", "red:1:0.3",
        "--state-dir", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "the red dice are loaded once" in proc.stderr


def test_a_log_older_than_the_monitor_is_counted_from_its_first_start_that_counted(
    tmp_path: Path,
) -> None:
    """A table upgraded to the monitor: its rolls before the upgrade were never counted by the
    controller, so dice-stats starts where the first start with counts says they stood; every
    later start must agree with the records, and one that does not is named."""

    def round_of(log: AuditLog, number: int, red: int) -> None:
        log.append(RecordKind.NO_MORE_BETS, {"round": number, "bank": "dealer", "mode": "shaker"})
        dice = {"red": red, "blue": [2, 3]}
        shown = {"game": "tiles", "bank": "dealer", "count": red + 5, "total": red + 5}
        result = {"round": number, "attempt": 1, "dice": dice, "starting_position": "dealer"}
        log.append(RecordKind.RESULT, {**result, **shown})

    log = AuditLog.open(tmp_path)
    before_the_monitor = valid(RecordKind.RECOVERY, round=1, state="idle")
    assert "dice_counts" not in before_the_monitor  # as a version before the monitor wrote it
    log.append(RecordKind.RECOVERY, before_the_monitor)
    round_of(log, 1, 6)
    round_of(log, 2, 6)
    upgraded = log.append(
        RecordKind.RECOVERY,
        valid(RecordKind.RECOVERY, round=3, dice_counts=DiceWindows().as_record()),
    )
    round_of(log, 3, 1)
    after = DiceWindows().after(Roll(1, (2, 3)))
    log.append(
        RecordKind.RECOVERY, valid(RecordKind.RECOVERY, round=4, dice_counts=after.as_record())
    )
    log.close()
    stats = dice_stats(tmp_path, Window.SET)
    assert stats["counted_from"] == upgraded
    assert stats["rolls"] == 1
    assert stats["dice"]["red"]["counts"]["1"] == 1
    assert stats["dice"]["red"]["counts"]["6"] == 0
    everything = dice_stats(tmp_path, Window.ALL)  # the log's own window: every result in it
    assert everything["rolls"] == 3
    assert everything["dice"]["red"]["counts"]["6"] == 2

    log = AuditLog.open(tmp_path)
    lying = log.append(
        RecordKind.RECOVERY,
        valid(RecordKind.RECOVERY, round=4, dice_counts=DiceWindows().as_record()),
    )
    log.close()
    with pytest.raises(LogIntegrityError, match=f"record {lying}: the dice counts the controller"):
        dice_stats(tmp_path, Window.ALL)


def test_the_dice_the_core_records_are_counted_as_its_monitor_counts_them(tmp_path: Path) -> None:
    """A corrected result counts the dice as read (the correction is the supervisor's, not a
    roll), a void keeps its roll counted, the RNG's dice and a service test round's are not
    counted; the controller's own counts agree with the recount."""
    table = LoggedTable(tmp_path, settings=rng_dice_settings()).open()
    table.play((3, 4, 5))
    table.to_result((2, 4, 5))
    table.correct((2, 4, 6))  # the sensor read 2 4 5: that is counted
    table.send(Event.CLOSE_ROUND)
    table.to_result((1, 1, 6))
    table.void(VoidReason.PATRON_COMPLAINT)
    table.service_round((6, 6, 6))
    table.switch_to(Mode.RNG)
    table.rng_round((5, 5, 5))
    table.close()
    stats = dice_stats(tmp_path, Window.SET)
    assert stats["rolls"] == 3
    assert stats["dice"]["red"]["counts"] == {"1": 1, "2": 1, "3": 1, "4": 0, "5": 0, "6": 0}
    blue = stats["dice"]["blue"]["counts"]
    assert blue == {"1": 1, "2": 0, "3": 0, "4": 2, "5": 2, "6": 1}
    assert stats["total"]["counts"]["11"] == 1  # 2 4 5 as read, not 2 4 6 as seen
    assert stats["total"]["counts"]["12"] == 1  # 3 4 5
    assert stats["total"]["counts"]["8"] == 1  # 1 1 6
    assert stats["context_agrees"] is True
