"""What the floor's reports and the auditor's export cost at 1,000 rounds and at a long log
(issue 31): ``meters`` and ``dice-stats`` as a supervisor runs them, and ``export`` as an
auditor takes it away.

    .venv/bin/python bench/bench_reports.py      # BENCH_ROUNDS=20000 for a quick run

meters and dice-stats should be flat (they start from the newest row of the totals,
controller/audit/totals.py: the long log's figure at most GOAL_RATIO times the short one's);
export must read every record, so its figure is its throughput, records a second. Each
figure is the median of BENCH_REPORT_REPEATS runs in this process; "cold" drops the log's
pages from the kernel's cache first (posix_fadvise), as after a reboot. The logs are
bench/loggen.py's, kept in bench/.scratch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import loggen
from common import (
    env_int,
    figure,
    flat_reads,
    machine_load,
    median,
    note,
    spread,
    timed_ms,
    title,
)

from controller.audit.dice_stats import dice_stats
from controller.audit.log import open_for_reading
from controller.audit.meters import meters_report
from controller.audit.recall import export_lines
from controller.core.dice_monitor import Window

GOAL_RATIO = 2.0  # flat: as bench_recall's long log against the short one
SMALL_ROUNDS = 1000


def _meters(state: Path) -> None:
    meters_report(state)


def _dice_stats(state: Path) -> None:
    dice_stats(state, Window.ALL)


def _export(state: Path) -> None:
    for _ in export_lines(state):
        pass


FLAT: dict[str, Callable[[Path], None]] = {
    "meters": _meters,
    "dice-stats --window all": _dice_stats,
}


def _records(state: Path) -> int:
    db = open_for_reading(state)
    try:
        (size,) = db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
    finally:
        db.close()
    return int(size)


def main() -> None:
    rounds = env_int("BENCH_ROUNDS", 400_000)
    repeats = env_int("BENCH_REPORT_REPEATS", 3)
    title(f"the floor's reports and the export: median of {repeats} runs")
    note(machine_load())
    loggen.SCRATCH.mkdir(parents=True, exist_ok=True)
    logs = {SMALL_ROUNDS: loggen.cached_log(SMALL_ROUNDS), rounds: loggen.cached_log(rounds)}
    flat_reads(FLAT, logs, repeats=repeats, ratio_goal=GOAL_RATIO)
    for size, state in logs.items():
        records = _records(state)
        once = 1 if size > SMALL_ROUNDS else repeats
        runs = [ms / 1000 for ms in timed_ms(_export, state, cold=True, repeats=once)]
        rate = records / median(runs)
        figure(f"export, {size:,} rounds ({records:,} records), cold", f"{rate:,.0f} records/s")
        note(spread(runs, "s"))


if __name__ == "__main__":
    main()
