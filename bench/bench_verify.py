"""verify-log on a table-year: ``paigow-controller verify-log`` run as an auditor runs it, on a
log of 400,000 rounds written by the daemon's own code (bench/loggen.py), every signature
checked.

Run: ``.venv/bin/python bench/bench_verify.py`` (also part of ``make bench``). Figures:
- the wall time of the whole command on the 400k-round log with every available core (median
  of REPEATS runs), against issue 13's goal of 45 s, with the load average before and after
  (the machine is shared: compare with a baseline run in turn, below);
- rounds per second of one process (``--jobs 1``) and of all cores on a shorter log
  (BASELINE_ROUNDS), measured in the same run: the ratio is what the split gains here.
``BENCH_ROUNDS`` shrinks the long log (the first build of 400k rounds takes minutes; it is kept
in bench/.scratch). ``BENCH_VERIFY_BASELINE=DIR``, a folder holding another ``controller``
package (``git archive <commit> controller | tar -x -C DIR``), times that one too, the two in
turn on the long log (all cores, then one process: ``--jobs 1``), and prints the ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from common import env_int, figure, machine_load, median, note, title
from loggen import cached_log

from controller.audit.parallel import available_cores

ROUNDS = env_int("BENCH_ROUNDS", 400_000)
BASELINE_ROUNDS = min(ROUNDS, 20_000)
REPEATS = env_int("BENCH_REPEATS", 3)
GOAL_S = 45.0
CLI = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "paigow-controller")
BASELINE = os.environ.get("BENCH_VERIFY_BASELINE")


def _verify(
    state: Path, jobs: int | None, *, code: str | None = None
) -> tuple[float, dict[str, object]]:
    """Wall seconds and the report; ``code``: a folder whose ``controller`` package runs
    instead of this one."""
    command = [CLI, "verify-log", "--state-dir", str(state)]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    env = None if code is None else {**os.environ, "PYTHONPATH": code}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"verify-log failed on {state}: {done.stderr.strip()}")
    report = json.loads(done.stdout)
    return elapsed, report


def main() -> None:
    cores = available_cores()
    title(f"verify-log: every record, every signature ({cores} cores, median of {REPEATS})")
    note(machine_load())
    short = cached_log(BASELINE_ROUNDS)
    one = median([_verify(short, 1)[0] for _ in range(REPEATS)])
    every = median([_verify(short, None)[0] for _ in range(REPEATS)])
    figure(f"{BASELINE_ROUNDS} rounds, one process", f"{BASELINE_ROUNDS / one:,.0f} rounds/s")
    figure(
        f"{BASELINE_ROUNDS} rounds, {cores} processes",
        f"{BASELINE_ROUNDS / every:,.0f} rounds/s",
    )
    figure("  ratio to one process (same run)", f"{one / every:.2f}x")
    long = cached_log(ROUNDS)
    runs, baseline, single, single_baseline = [], [], [], []
    for _ in range(REPEATS):
        runs.append(_verify(long, None))
        if BASELINE is not None:
            baseline.append(_verify(long, None, code=BASELINE))
            single.append(_verify(long, 1)[0])
            single_baseline.append(_verify(long, 1, code=BASELINE)[0])
    wall = median([t for t, _ in runs])
    report = runs[0][1]
    note(
        f"{report['records']:,} records, {report['checkpoints']:,} checkpoints,"
        f" {report['results_recomputed']:,} results recomputed"
    )
    figure(f"{ROUNDS} rounds, all cores", f"{wall:.1f} s", f"<= {GOAL_S:.0f} s", wall <= GOAL_S)
    figure("  rounds per second", f"{ROUNDS / wall:,.0f}")
    if baseline:
        old_wall = median([t for t, _ in baseline])
        figure(f"  baseline {BASELINE}, in turn", f"{old_wall:.1f} s")
        figure("  ratio to the baseline (same run)", f"{old_wall / wall:.2f}x")
        if baseline[0][1] != report:
            note("the baseline's report differs from this one's")
        one, old_one = median(single), median(single_baseline)
        figure(f"{ROUNDS} rounds, one process", f"{one:.1f} s")
        figure(f"  baseline {BASELINE}, one process, in turn", f"{old_one:.1f} s")
        figure("  ratio to the baseline (same run)", f"{old_one / one:.2f}x")
    if ROUNDS != 400_000:
        note(f"BENCH_ROUNDS={ROUNDS}: a table-year would take {wall * 400_000 / ROUNDS:.0f} s")
    note(f"cpu: {os.cpu_count()} logical, {cores} available to this process")
    note(machine_load().replace("when this started", "at the end"))


if __name__ == "__main__":
    main()
