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

import time
from collections.abc import Callable
from pathlib import Path

import loggen
from common import env_int, figure, machine_load, median, note, spread, title

from controller.audit.log import DB_NAME, open_for_reading
from controller.audit.recall import recall
from controller.audit.store import drop_cached_pages
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


def timed_ms(read: Callable[[Path], None], state: Path, *, cold: bool, repeats: int) -> list[float]:
    runs = []
    for _ in range(repeats):
        if cold:
            drop_cached_pages(state / DB_NAME)
        start = time.perf_counter()
        read(state)
        runs.append((time.perf_counter() - start) * 1000)
    return runs


def main() -> None:
    rounds = env_int("BENCH_ROUNDS", 400_000)
    repeats = env_int("BENCH_RECALL_REPEATS", 7)
    title(f"reading the log where the table waits: median of {repeats} runs")
    note(machine_load())
    loggen.SCRATCH.mkdir(parents=True, exist_ok=True)
    logs = {SMALL_ROUNDS: loggen.cached_log(SMALL_ROUNDS), rounds: loggen.cached_log(rounds)}
    for name, read in READS.items():
        for cold in (False, True):
            found = {}
            for size, state in logs.items():
                read(state)  # the modules' first use is not counted
                runs = timed_ms(read, state, cold=cold, repeats=repeats)
                found[size] = median(runs)
                label = f"{name}, {size:,} rounds{', cold' if cold else ''}"
                if name.startswith("RECALL"):
                    ok = found[size] <= GOAL_RECALL_MS
                    figure(label, f"{found[size]:.2f} ms", f"<= {GOAL_RECALL_MS:.0f} ms", ok)
                else:
                    figure(label, f"{found[size]:.2f} ms")
                note(spread(runs, "ms"))
            ratio = found[rounds] / found[SMALL_ROUNDS]
            ok = ratio <= GOAL_RATIO
            label = f"  {rounds:,} / {SMALL_ROUNDS:,} rounds"
            figure(label, f"{ratio:.2f}x", f"<= {GOAL_RATIO}x", ok)


if __name__ == "__main__":
    main()
