"""The simulator's speed and memory: ``simulate --fast`` rounds per second, without faults and
with the default faults (what ``simulate --fast`` plays when no ``--faults`` is given; issue 13:
>= 20 rounds/s), and its RSS after 10,000 rounds less its RSS after 1,000 (issue 13: <= 2 MB).

    .venv/bin/python bench/bench_simulate.py
    # BENCH_SIM_ROUNDS=300 (per rate run), BENCH_RSS_ROUNDS=10000, BENCH_SEED=1

Every figure is the command itself, ``paigow-controller simulate --fast --rounds N --faults F
--seed S --state-dir D`` (the log on this machine's disk), read from outside. With ``--fast`` it
prints a progress line every 50 rounds; this script notes when each arrives. A rate is the
rounds between the first and the last progress line over the time between them (the start-up
is left out; the whole command's rounds over its wall time is shown beside it), the median of
the runs. The RSS is ``VmRSS`` of ``/proc/<pid>/status`` read as the progress line of round
1,000 arrives and as the last one does (before the run's clean-up); 10,000 rounds take several
minutes here, and BENCH_RSS_ROUNDS shrinks the run (the first point is then a tenth of it).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    controller_command,
    env_int,
    figure,
    machine_load,
    median,
    note,
    proc_status,
    spread,
    title,
)

GOAL_RATE = 20.0
GOAL_RSS = 2_000_000  # bytes: "2 MB"
SCRATCH = Path(__file__).parent / ".scratch"
PROGRESS = re.compile(r"progress: (\d+)/(\d+) rounds, (\d+) no rolls, (\d+) faults")


@dataclass
class Run:
    progress: list[tuple[float, int]] = field(default_factory=list)  # (time, rounds)
    rss: dict[int, int] = field(default_factory=dict)  # rounds -> VmRSS bytes
    started: float = 0.0
    ended: float = 0.0
    rounds: int = 0
    no_rolls: int = 0
    faults: int = 0

    @property
    def rate(self) -> float:
        (t0, r0), (t1, r1) = self.progress[0], self.progress[-1]
        return (r1 - r0) / (t1 - t0)

    @property
    def whole_rate(self) -> float:
        return self.rounds / (self.ended - self.started)


def simulate(rounds: int, faults: str, seed: int, *, rss_at: frozenset[int] = frozenset()) -> Run:
    SCRATCH.mkdir(exist_ok=True)
    run = Run()
    with tempfile.TemporaryDirectory(prefix="bench-simulate-", dir=SCRATCH) as tmp:
        command = controller_command(
            "simulate", "--fast", "--rounds", str(rounds), "--faults", faults, "--seed", str(seed)
        )
        command.append("--plain-rounds")  # no bank or style key presses: the round itself
        command += ["--state-dir", str(Path(tmp) / "state")]
        run.started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            at = time.monotonic()
            match = PROGRESS.match(line)
            if match is None:
                continue
            done = int(match[1])
            if done in rss_at or (done == rounds and rss_at):
                run.rss[done] = proc_status(proc.pid, "VmRSS")
            run.progress.append((at, done))
            run.rounds, run.no_rolls, run.faults = done, int(match[3]), int(match[4])
        stderr = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait()
        run.ended = time.monotonic()
    if proc.returncode != 0 or len(run.progress) < 2:
        raise SystemExit(f"simulate failed ({proc.returncode}):\n{stderr[-3000:]}")
    return run


def rates(rounds: int, faults: str, seed: int, repeats: int) -> None:
    runs = [simulate(rounds, faults, seed) for _ in range(repeats)]
    rate = median([run.rate for run in runs])
    figure(
        f"simulate --fast --faults {faults}",
        f"{rate:.1f} rounds/s",
        f">= {GOAL_RATE:.0f} rounds/s",
        rate >= GOAL_RATE,
    )
    note(spread([run.rate for run in runs], "rounds/s", 1))
    note(
        f"whole command, start-up included: {median([r.whole_rate for r in runs]):.1f} rounds/s;"
        f" per run {median([r.no_rolls for r in runs]):.0f} no rolls and"
        f" {median([r.faults for r in runs]):.0f} faults in {rounds} rounds"
    )


def memory(rounds: int, seed: int) -> None:
    first = 1000 if rounds >= 10_000 else max(50, rounds // 10 // 50 * 50)
    points = frozenset(range(first, rounds + 1, first))
    note(f"RSS run: {rounds:,} rounds without faults (several minutes at ~20 rounds/s)")
    run = simulate(rounds, "none", seed, rss_at=points)
    growth = run.rss[rounds] - run.rss[first]
    figure(
        f"RSS after {rounds:,} rounds - after {first:,}",
        f"{growth / 1e6:.2f} MB",
        f"<= {GOAL_RSS / 1e6:.0f} MB",
        growth <= GOAL_RSS,
    )
    note(
        "VmRSS by rounds: "
        + ", ".join(f"{n:,}: {rss / 1e6:.1f} MB" for n, rss in sorted(run.rss.items()))
    )
    note(f"the same run: {run.rate:.1f} rounds/s, {run.no_rolls} no rolls, {run.faults} faults")
    if rounds != 10_000:
        note(f"BENCH_RSS_ROUNDS={rounds}: the issue's figure is after 10,000 rounds less 1,000")


def main() -> None:
    rounds = env_int("BENCH_SIM_ROUNDS", 300, low=100)
    rss_rounds = env_int("BENCH_RSS_ROUNDS", 10_000, low=500)
    seed = env_int("BENCH_SEED", 1, low=0)
    repeats = env_int("BENCH_SIM_REPEATS", 3)
    title(f"simulate --fast: {repeats} runs of {rounds} rounds per figure, seed {seed}")
    note(machine_load())
    rates(rounds, "none", seed, repeats)
    rates(rounds, "default", seed, repeats)
    memory(rss_rounds, seed)


if __name__ == "__main__":
    main()
