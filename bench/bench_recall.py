"""What reading the log costs where the table waits on it, at 1,000 rounds and at a long log
(issue 31: nothing on the control thread or at start-up grows with the log): a read-only open,
the dealer's RECALL screen (``AuditLog.recall`` of the last RECALL_DEPTH rounds: goal 50 ms),
and the display's reads at start (the trend board, the corrections and voids, the RNG commitment and
the cosignature, each the newest of its kinds).

    .venv/bin/python bench/bench_recall.py      # BENCH_ROUNDS=20000 for a quick run

Each figure is the median of BENCH_RECALL_REPEATS runs in this process, each on connections
of its own; "cold" drops the log's pages from the kernel's cache first (posix_fadvise), as
after a reboot, so that every page is read from the device. The logs are bench/loggen.py's,
kept in bench/.scratch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import loggen
from common import env_int, flat_reads, machine_load, note, title

from controller.audit.log import open_for_reading
from controller.audit.recall import recall
from controller.core.records import RecordKind
from controller.core.state import RECALL_DEPTH
from controller.display.events import INTERVENTIONS, TREND_LENGTH
from controller.display.log_reader import SqliteLogReader

GOAL_RECALL_MS = 50.0
GOAL_RATIO = 2.0  # flat: as bench_startup's long log against the empty one
SMALL_ROUNDS = 1000


def _open(state: Path) -> None:
    open_for_reading(state).close()


def _recall(state: Path) -> None:
    rounds = recall(state, last=RECALL_DEPTH)
    if len(rounds) != RECALL_DEPTH:
        raise SystemExit(f"recall gave {len(rounds)} rounds, not {RECALL_DEPTH}")


def _display_seed(state: Path) -> None:
    """The display's reads of the log at start (DisplayServer._seed)."""
    reader = SqliteLogReader.in_state_dir(state)
    try:
        reader.size()
        board = {RecordKind.RESULT, RecordKind.RESULT_CORRECTED, RecordKind.VOID}
        reader.latest_of({*board, RecordKind.RESULT_VOIDED}, limit=3 * TREND_LENGTH)
        reader.latest_of({RecordKind.RESULT_CORRECTED, RecordKind.VOID}, limit=INTERVENTIONS)
        reader.latest_of({RecordKind.RNG_COMMIT}, limit=1)
        reader.latest_of({RecordKind.COSIGNED}, limit=1)
    finally:
        reader.close()


READS: dict[str, Callable[[Path], None]] = {
    "read-only open": _open,
    f"RECALL (last {RECALL_DEPTH} rounds)": _recall,
    "display's reads at start": _display_seed,
}


def main() -> None:
    rounds = env_int("BENCH_ROUNDS", 400_000)
    repeats = env_int("BENCH_RECALL_REPEATS", 7)
    title(f"reading the log where the table waits: median of {repeats} runs")
    note(machine_load())
    loggen.SCRATCH.mkdir(parents=True, exist_ok=True)
    logs = {SMALL_ROUNDS: loggen.cached_log(SMALL_ROUNDS), rounds: loggen.cached_log(rounds)}
    recall_name = next(name for name in READS if name.startswith("RECALL"))
    flat_reads(
        READS, logs, repeats=repeats, ratio_goal=GOAL_RATIO, goals_ms={recall_name: GOAL_RECALL_MS}
    )


if __name__ == "__main__":
    main()
