"""The Pi's budget: CPU time per round, start-up and verify-log throughput measured here (x86_64)
and in the arm64 tree under qemu-user (tests/arm64/chroot.py: Debian bookworm arm64, the
Pi's userland), the ratio of the two, and what they leave a Pi 4 at a real table.

    .venv/bin/python bench/bench_pi.py    # BENCH_PI_ROUNDS=100 BENCH_PI_REPEATS=3 BENCH_SEED=1

Each figure is the product's own command, run the same way on both sides, its CPU time taken
from the child's rusage (``os.wait4``: user + sys, qemu's emulation included on arm64):

- **CPU per round**: ``simulate --fast --faults none --plain-rounds`` for ``BENCH_PI_ROUNDS``
  rounds and for a tenth of them; the difference of their CPU times over the difference of
  their rounds (the interpreter's start and the imports cancel out). Median of the repeats.
- **start-up**: the CLI's, ``check-config`` of the example config (the interpreter, the
  imports of the config and the core, the parse): wall and CPU, median of 5 runs after one
  that warms the caches. The daemon's exec -> READY=1 is measured here (bench/common.py's
  ``run_daemon``, as bench_startup does) and scaled by the CLI's ratio for the Pi.
- **verify-log**: ``verify-log --jobs 1`` of a log of ``BENCH_PI_LOG_ROUNDS`` rounds
  (bench/loggen.py, the daemon's own code; the same file on both sides: SQLite's is the same
  on every architecture) less that of the short simulation's log: records per second of CPU.

qemu-user is not a Pi: it translates every arm64 instruction on this x86 core, so its ratio is
the cost of emulation, an upper bound on the Pi's, not a measure of it. A Pi 4 (Cortex-A72,
1.5 GHz) runs CPython about 3 to 5 times slower per core than this machine; the budget below
assumes 5x (``PI_FACTOR``), the slow end: the A72 has a small cache and no large branch
predictor, which an interpreter's dispatch loop feels more than other code. The margin is the
time a real table gives a round (``ROUND_EVERY_S``) over the Pi's CPU time per round.

Where arm64 binaries cannot run here (not root, no binfmt_misc, no qemu, no tree: ``make
armtest`` makes it), one line says why, and the x86_64 figures and the Pi's budget from them
are printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import loggen
from common import (
    daemon_problems,
    env_int,
    figure,
    machine_load,
    median,
    note,
    run_daemon,
    spread,
    title,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "arm64"))

import chroot  # noqa: E402 (tests/arm64: the tree and how to enter it)

PI_FACTOR = 5.0  # a Pi 4's Cortex-A72 at 1.5 GHz against this x86_64 core: 3-5x, the slow end
ROUND_EVERY_S = 30.0  # a fast real table: bets, the shake, the dice read, paying out
GOAL_CPU_SHARE = 0.05  # a round's CPU on the Pi within 5% of one core at that pace
GOAL_START_S = 10.0  # a table in play 10 s after its start (TimeoutStartSec=90 is the limit)
GOAL_VERIFY_S = 3600.0  # a table-year's log (400,000 rounds) verified on one Pi core in 1 h
TABLE_YEAR_ROUNDS = 400_000
CONFIG = "hw/config.example.toml"
GUEST_SCRATCH = "/tmp/bench-pi"  # in the tree
PROGRESS = re.compile(r"done: (\d+) rounds, (\d+) no rolls, (\d+) faults")


@dataclass
class Side:
    """One architecture: how to run a CLI command there and where its scratch directory is."""

    name: str
    argv: Callable[[list[str]], list[str]]  # the CLI's arguments -> the host's command line
    scratch: Path  # on the host
    scratch_as_seen: str  # the same directory as the command sees it
    config: str  # the example config, as the command sees it

    def run(self, args: list[str]) -> tuple[str, float, float]:
        """stdout+stderr, wall seconds and CPU seconds (the child's, user + sys)."""
        with tempfile.TemporaryFile() as out:
            started = time.perf_counter()
            process = subprocess.Popen(self.argv(args), stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - started
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{self.name}: {' '.join(args[:3])} exited {code}:\n{text[-2000:]}")
        return text, wall, usage.ru_utime + usage.ru_stime


@dataclass
class Figures:
    cpu_per_round: list[float]
    no_rolls: int
    faults: int
    start_wall: list[float]
    start_cpu: list[float]
    records: int  # verify-log's: the big log's less the few rounds'
    verify_wall: list[float]
    verify_cpu: list[float]
    records_per_round: float  # in the big log

    @property
    def verify_rate(self) -> float:
        """Records per second of CPU (wall is the same on an idle machine, more on a busy)."""
        return self.records / median(self.verify_cpu)


def simulate(side: Side, rounds: int, seed: int, name: str) -> tuple[float, int, int]:
    state = f"{side.scratch_as_seen}/{name}"
    shutil.rmtree(side.scratch / name, ignore_errors=True)
    text, _, cpu = side.run(
        [
            *("simulate", "--fast", "--faults", "none", "--plain-rounds"),
            *("--rounds", str(rounds), "--seed", str(seed), "--state-dir", state),
        ]
    )
    done = PROGRESS.search(text)
    if done is None or int(done.group(1)) != rounds:
        sys.exit(f"{side.name}: simulate said no 'done: {rounds} rounds':\n{text[-2000:]}")
    return cpu, int(done.group(2)), int(done.group(3))


def verify(side: Side, name: str) -> tuple[int, float, float]:
    """Records, wall and CPU seconds of ``verify-log --jobs 1`` of a state directory."""
    text, wall, cpu = side.run(
        ["verify-log", "--json", "--jobs", "1", "--state-dir", f"{side.scratch_as_seen}/{name}"]
    )
    return int(json.loads(text)["records"]), wall, cpu


def measure(
    side: Side, rounds: int, repeats: int, seed: int, *, log: Path, log_rounds: int
) -> Figures:
    few = max(1, rounds // 10)
    simulate(side, few, seed, "few")  # the first run compiles and caches: not counted
    per_round, no_rolls, faults = [], 0, 0
    for _ in range(repeats):
        short, *_ = simulate(side, few, seed, "few")
        long, rolls, failed = simulate(side, rounds, seed, "long")
        per_round.append((long - short) / (rounds - few))
        no_rolls += rolls
        faults += failed
    starts = [side.run(["check-config", "--config", side.config]) for _ in range(6)][1:]
    shutil.copytree(log, side.scratch / "big")
    walls, cpus, records = [], [], 0
    for _ in range(3):  # the big log less the few rounds': the start-up cancels out
        small_records, small_wall, small_cpu = verify(side, "few")
        big_records, big_wall, big_cpu = verify(side, "big")
        records = big_records - small_records
        walls.append(big_wall - small_wall)
        cpus.append(big_cpu - small_cpu)
    return Figures(
        per_round,
        no_rolls,
        faults,
        [wall for _, wall, _ in starts],
        [cpu for _, _, cpu in starts],
        records,
        walls,
        cpus,
        big_records / log_rounds,
    )


def x86_side(scratch: Path) -> Side:
    cli = str(ROOT / ".venv" / "bin" / "paigow-controller")
    return Side("x86_64", lambda args: [cli, *args], scratch, str(scratch), str(ROOT / CONFIG))


def arm64_side(tree: chroot.Chroot) -> Side:
    cli = f"{chroot.PROJECT}/.venv/bin/paigow-controller"
    scratch = tree.root / GUEST_SCRATCH.lstrip("/")
    return Side(
        "arm64",
        lambda args: tree.argv([cli, *args], cwd=chroot.PROJECT),
        scratch,
        GUEST_SCRATCH,
        f"{chroot.PROJECT}/{CONFIG}",
    )


def arm64_tree() -> chroot.Chroot | str:
    """The tree (the project installed in it afresh), or why there is none here."""
    reason = chroot.unavailable()
    if reason is not None:
        return reason
    made = sorted(chroot.CACHE.glob(f"{chroot.SUITE}-{chroot.ARCH}-*/.complete"))
    if not made:
        return f"no arm64 tree in {chroot.CACHE} (make armtest makes it, once)"
    tree = chroot.Chroot(chroot.root_filesystem())
    tree.install_project()
    return tree


def daemon_start() -> list[float]:
    """exec -> READY=1 of the daemon here, on an empty state directory (bench_startup's)."""
    seconds = []
    for _ in range(4):
        with tempfile.TemporaryDirectory(prefix="bench-pi-", dir=loggen.SCRATCH) as tmp:
            with run_daemon(Path(tmp) / "state", work_dir=Path(tmp)) as daemon:
                seconds.append(daemon.wait_ready(120))
            for line in daemon_problems(daemon.stderr())[:1]:
                note(f"the daemon reported: {line}")
    return seconds[1:]  # the first pays for cold caches


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def report(x86: Figures, arm: Figures | None, daemon_s: float) -> None:
    x86_round = median(x86.cpu_per_round)
    x86_start, x86_start_cpu = median(x86.start_wall), median(x86.start_cpu)
    figure("x86_64: CPU per round (user + sys)", ms(x86_round))
    note(spread([v * 1000 for v in x86.cpu_per_round], "ms", 1))
    figure("x86_64: CLI start (check-config), wall", ms(x86_start))
    figure("x86_64: CLI start (check-config), CPU", ms(x86_start_cpu))
    figure("x86_64: daemon exec -> READY=1", ms(daemon_s))
    figure("x86_64: verify-log, one process", f"{x86.verify_rate:,.0f} records/s")
    note(f"x86_64: wall {x86.records / median(x86.verify_wall):,.0f} records/s")
    note(f"x86_64: {x86.no_rolls} no rolls, {x86.faults} faults in the timed simulations")
    ratios = {}
    if arm is not None:
        arm_round = median(arm.cpu_per_round)
        ratios = {
            "round": arm_round / x86_round,
            "start": median(arm.start_wall) / x86_start,
            "start_cpu": median(arm.start_cpu) / x86_start_cpu,
            "verify": x86.verify_rate / arm.verify_rate,
        }
        figure("arm64 (qemu): CPU per round (user + sys)", ms(arm_round))
        note(spread([v * 1000 for v in arm.cpu_per_round], "ms", 1))
        figure("arm64 (qemu): CLI start (check-config), wall", ms(median(arm.start_wall)))
        figure("arm64 (qemu): CLI start (check-config), CPU", ms(median(arm.start_cpu)))
        figure("arm64 (qemu): verify-log, one process", f"{arm.verify_rate:,.0f} records/s")
        note(f"arm64: wall {arm.records / median(arm.verify_wall):,.0f} records/s")
        note(f"arm64: {arm.no_rolls} no rolls, {arm.faults} faults in the timed simulations")
        figure("arm64 / x86_64: CPU per round", f"{ratios['round']:.1f}x")
        figure("arm64 / x86_64: CLI start, wall", f"{ratios['start']:.1f}x")
        figure("arm64 / x86_64: CLI start, CPU", f"{ratios['start_cpu']:.1f}x")
        figure("arm64 / x86_64: verify-log time per record", f"{ratios['verify']:.1f}x")
    title(f"the Pi 4's budget, assuming {PI_FACTOR:.0f}x this x86_64 per core (qemu: upper bound)")
    pi_round = x86_round * PI_FACTOR
    share = pi_round / ROUND_EVERY_S
    figure(
        f"Pi: CPU per round, a round every {ROUND_EVERY_S:.0f} s",
        f"{ms(pi_round)} = {share:.2%}",
        f"<= {GOAL_CPU_SHARE:.0%} of a core",
        share <= GOAL_CPU_SHARE,
    )
    figure("  margin (round interval / CPU per round)", f"{ROUND_EVERY_S / pi_round:,.0f}x")
    pi_start = daemon_s * PI_FACTOR
    figure(
        "Pi: daemon exec -> READY=1",
        f"{pi_start:.1f} s",
        f"<= {GOAL_START_S:.0f} s",
        pi_start <= GOAL_START_S,
    )
    per_round = x86.records_per_round
    pi_verify = TABLE_YEAR_ROUNDS * per_round / (x86.verify_rate / PI_FACTOR)
    figure(
        f"Pi: verify-log of {TABLE_YEAR_ROUNDS:,} rounds, one core",
        f"{pi_verify / 60:.0f} min",
        f"<= {GOAL_VERIFY_S / 60:.0f} min",
        pi_verify <= GOAL_VERIFY_S,
    )
    if ratios:
        qemu_round = x86_round * ratios["round"]
        note(
            f"under qemu's own ratio instead (an upper bound): {ms(qemu_round)} per round"
            f" ({qemu_round / ROUND_EVERY_S:.2%} of a core), daemon start"
            f" {daemon_s * ratios['start']:.1f} s, verify-log of {TABLE_YEAR_ROUNDS:,} rounds"
            f" {TABLE_YEAR_ROUNDS * per_round / (x86.verify_rate / ratios['verify']) / 60:.0f}"
            " min"
        )


def main() -> None:
    rounds = env_int("BENCH_PI_ROUNDS", 100, low=10)
    log_rounds = env_int("BENCH_PI_LOG_ROUNDS", 2000)
    repeats = env_int("BENCH_PI_REPEATS", 3)
    seed = env_int("BENCH_SEED", 1, low=0)
    title(f"the Pi's budget: x86_64 and arm64 under qemu-user, seed {seed}, {rounds} rounds")
    note(machine_load())
    loggen.SCRATCH.mkdir(parents=True, exist_ok=True)
    log = loggen.cached_log(log_rounds)
    with tempfile.TemporaryDirectory(prefix="bench-pi-", dir=loggen.SCRATCH) as tmp:
        x86 = measure(x86_side(Path(tmp)), rounds, repeats, seed, log=log, log_rounds=log_rounds)
    daemon = daemon_start()
    arm = None
    with chroot.locked():
        tree = arm64_tree()
        if isinstance(tree, str):
            note(f"arm64: not measured: {tree}")
        else:
            side = arm64_side(tree)
            shutil.rmtree(side.scratch, ignore_errors=True)
            side.scratch.mkdir(parents=True)
            try:
                arm = measure(side, rounds, repeats, seed, log=log, log_rounds=log_rounds)
            finally:
                shutil.rmtree(side.scratch, ignore_errors=True)
    report(x86, arm, median(daemon))
    note(spread(daemon, "s (daemon start here)", 3))


if __name__ == "__main__":
    main()
