"""SIGTERM at random points: every stop of the daemon completes within its budget, cleanly.

    .venv/bin/python bench/stop_stress.py                     # 300 stops, seed from the clock
    .venv/bin/python bench/stop_stress.py --stops 40 --seed 7 # a shorter run, repeatable
    .venv/bin/python bench/stop_stress.py --mode play         # only the simulation playing

Each stop is a trial: the daemon is started as systemd starts it (``NOTIFY_SOCKET``, the unit's
``Environment=``, ``WATCHDOG_USEC``), and SIGTERM is sent at a point drawn from a seeded RNG:
while it starts (any time from the exec on: the imports, the lock, the log opening, the display
binding, the sensor's handshake, the fleet's first connect), just after READY=1, or while it
plays. Several starts in a row share one state directory (systemd restarting the service, an
upgrade's restarts): each start finds the log the stop before left.

Two daemons take turns (``--mode both``, the default):

- ``table``: ``paigow-controller run`` on mock pins at rest with the simulated sensor on a pty
  (bench/table_daemon.py), the display serving, and ``[fleet]`` pointed at a broker that is
  down (a refused port) or that never answers (a listener that takes no connection: the TCP
  handshake completes in the kernel and no CONNACK ever comes);
- ``play``: ``paigow-controller simulate --fast`` with the simulated crew at the service
  terminal, rounds under way, commits in progress when the signal comes.

A stop must end within the budget, the unit's ``TimeoutStopSec=`` (systemd's SIGKILL comes
then): measured as a hang detector, not as a performance figure. It must exit 0 with no
traceback, ``verify-log`` must pass on the state directory, and a start that recorded anything
must have recorded its ``shutdown`` last. A stop that overruns gets SIGABRT: the interpreter's
faulthandler (``PYTHONFAULTHANDLER=1``, as the unit sets it) prints every thread's stack, which
is reported with the trial; the daemon itself prints them at ``STOP_DUMP_AFTER_S`` after the
SIGTERM (controller/app/appliance.py), before the budget runs out.

It prints the stop times (SIGTERM to exit, per phase: median, 90th percentile, maximum) and
every trial that failed with its stderr. Exit 1 if any did.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    MOCK_PINS_ENV,
    UNIT_ENV,
    WATCHDOG_USEC,
    NotifySocket,
    free_port,
    free_ports,
    machine_load,
    median,
    percentile,
    signed_manifest,
    table_daemon_command,
)

from drivers.sim.sensor import SimulatedSensor

UNIT = Path(__file__).resolve().parent.parent / "systemd" / "paigow-controller.service"
PHASES = ("starting", "ready", "playing")
READY_TIMEOUT_S = 180  # a start this slow is reported, not waited for longer
ABORT_WAIT_S = 10  # after SIGABRT, for faulthandler's dump


def stop_budget_s(unit: Path = UNIT) -> float:
    """The unit's ``TimeoutStopSec=`` in seconds (a plain number, or ``Ns``/``Nmin``)."""
    for line in unit.read_text().splitlines():
        name, _, value = line.partition("=")
        if name.strip() != "TimeoutStopSec":
            continue
        found = re.fullmatch(r"\s*([0-9]+)\s*(s|sec|min)?\s*", value)
        if found is None:
            raise ValueError(f"{unit}: TimeoutStopSec={value} is not N, Ns or Nmin")
        return float(found[1]) * (60 if found[2] == "min" else 1)
    raise ValueError(f"{unit}: no TimeoutStopSec=")


@dataclass
class Trial:
    """One start of the daemon and the SIGTERM that stopped it."""

    number: int
    mode: str
    series: int  # the state directory's series
    start: int  # which start on that state directory (1: a new one)
    phase: str
    delay_s: float  # after the exec (starting) or after READY=1 (ready, playing)
    broker: str = ""
    ready_s: float | None = None  # exec -> READY=1, when it came before the signal
    stop_s: float | None = None  # SIGTERM -> exit; None: it did not exit within the budget
    code: int | None = None
    problems: list[str] = field(default_factory=list)
    stderr: str = ""

    def line(self) -> str:
        stop = "HUNG" if self.stop_s is None else f"{self.stop_s:6.2f} s"
        ready = "" if self.ready_s is None else f" ready after {self.ready_s:.2f} s"
        broker = f" broker {self.broker}" if self.broker else ""
        return (
            f"#{self.number:<4} {self.mode:<5} series {self.series} start {self.start}"
            f" {self.phase:<8} +{self.delay_s:.3f} s{broker}:{ready} stop {stop} exit {self.code}"
        )


class SilentBroker:
    """A TCP listener that never accepts: a client's connect completes in the kernel (the
    backlog) and then nothing ever answers, as a broker that hangs or a black-holing proxy."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])

    def close(self) -> None:
        self.sock.close()


def refused_port() -> int:
    """A loopback port where nothing listens (connect is refused at once)."""
    return free_port()


def records(state_dir: Path) -> tuple[int, str | None]:
    """How many records the log holds and the kind of the last one but the RNG's (a shutdown
    ends an RNG session: its reveal follows the shutdown record), read-only."""
    path = state_dir / "audit.db"
    if not path.exists():
        return 0, None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        (size,) = db.execute("SELECT count(*) FROM records").fetchone()
        row = db.execute(
            "SELECT kind FROM records WHERE kind NOT LIKE 'rng%' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    except sqlite3.OperationalError:
        return 0, None
    finally:
        db.close()
    return int(size), None if row is None else str(row[0])


def verify_log(state_dir: Path) -> str | None:
    """None when ``verify-log`` passes, else what it said."""
    if not (state_dir / "audit.db").exists():
        return None
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "verify-log", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode == 0:
        return None
    return f"verify-log exit {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}"


@contextlib.contextmanager
def started(
    mode: str,
    state_dir: Path,
    work: Path,
    *,
    seed: int,
    broker_port: int | None,
    stop_flush_s: int = 2,
) -> Iterator[tuple[subprocess.Popen[bytes], NotifySocket, Path]]:
    """The daemon of ``mode`` on ``state_dir``; killed on leaving if it still runs. With a
    ``broker_port`` the table publishes there with ``[fleet] stop_flush_s``."""
    notify = NotifySocket(work)
    env = {
        **os.environ,
        **UNIT_ENV,
        "NOTIFY_SOCKET": str(notify.path),
        "WATCHDOG_USEC": str(WATCHDOG_USEC),
    }
    env.pop("WATCHDOG_PID", None)
    stderr_path = work / "daemon.stderr"
    with contextlib.ExitStack() as stack:
        stack.callback(notify.close)
        if mode == "table":
            sensor = stack.enter_context(SimulatedSensor(seed=seed))
            manifest, release_key = signed_manifest(work)
            config = work / "config.toml"
            fleet = (
                ""
                if broker_port is None
                else f'[fleet]\nmqtt_url = "mqtt://127.0.0.1:{broker_port}"\n'
                f"stop_flush_s = {stop_flush_s}\n"
            )
            http_port, feed_port = free_ports(2)
            config.write_text(
                f'[storage]\nstate_dir = "{state_dir}"\n'
                f'[sensor]\nurl = "{sensor.url}"\n'
                f"[display]\nhttp_port = {http_port}\nfeed_port = {feed_port}\n"
                f'[software]\nmanifest = "{manifest}"\npublic_key = "{release_key}"\n{fleet}'
            )
            argv = table_daemon_command("--config", str(config))
            env.update(MOCK_PINS_ENV)
        else:
            argv = [
                sys.executable,
                "-m",
                "controller",
                "simulate",
                "--fast",
                "--rounds",
                "1000000",
                "--faults",
                "none",
                "--seed",
                str(seed),
                "--state-dir",
                str(state_dir),
            ]
        with stderr_path.open("wb") as stderr:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                cwd=work,
            )
        try:
            yield proc, notify, stderr_path
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def stop_and_watch(proc: subprocess.Popen[bytes], budget_s: float) -> float | None:
    """SIGTERM, then the seconds until the process exits, or None when the budget ran out (it
    then gets SIGABRT, for faulthandler's stacks, and SIGKILL)."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=budget_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=ABORT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        return None
    return time.monotonic() - sent


def one_trial(
    trial: Trial, state_dir: Path, work: Path, *, seed: int, budget_s: float, ready_guess: float
) -> None:
    """Start, SIGTERM at the trial's point, and judge the stop (``trial.problems``)."""
    broker: SilentBroker | None = None
    port = None
    if trial.broker == "silent":
        broker = SilentBroker()
        port = broker.port
    elif trial.broker == "down":
        port = refused_port()
    size_before, _ = records(state_dir)
    try:
        with started(trial.mode, state_dir, work, seed=seed, broker_port=port) as (
            proc,
            notify,
            stderr_path,
        ):
            launched = time.monotonic()
            if trial.phase == "starting":
                trial.delay_s = trial.delay_s * ready_guess
                at = notify.wait_for("READY=1", trial.delay_s)
                if at is not None:
                    trial.ready_s = at - launched
                    time.sleep(max(0.0, launched + trial.delay_s - time.monotonic()))
            else:
                at = notify.wait_for("READY=1", READY_TIMEOUT_S)
                if at is None:
                    trial.problems.append(f"no READY=1 within {READY_TIMEOUT_S} s")
                else:
                    trial.ready_s = at - launched
                    time.sleep(trial.delay_s)
            if proc.poll() is not None:
                trial.problems.append(f"it exited by itself before the SIGTERM ({proc.returncode})")
            trial.stop_s = stop_and_watch(proc, budget_s)
            trial.code = proc.returncode
            trial.stderr = stderr_path.read_text(errors="replace")
    finally:
        if broker is not None:
            broker.close()
    judge(trial, state_dir, size_before, budget_s)


def judge(trial: Trial, state_dir: Path, size_before: int, budget_s: float) -> None:
    """The stop's verdict. Exit 0; or killed by the SIGTERM itself (the signal's default
    action, as systemd counts a clean stop) only when it came before the appliance caught
    signals, that is before it took the state directory: then this start recorded nothing.
    A start that recorded anything past a new log's ``log_created`` recorded its shutdown
    last."""
    size, last = records(state_dir)
    recorded = size - size_before
    if trial.stop_s is None:
        trial.problems.append(f"the stop did not end within the budget of {budget_s:.0f} s")
    elif trial.code == -signal.SIGTERM:
        if recorded:
            trial.problems.append(f"killed by SIGTERM after it recorded {recorded} records")
    elif trial.code != 0:
        trial.problems.append(f"exit {trial.code}, not 0")
    if "Traceback" in trial.stderr:
        trial.problems.append("a traceback on stderr")
    problem = verify_log(state_dir)
    if problem is not None:
        trial.problems.append(problem)
    if trial.stop_s is not None and recorded and last not in ("shutdown", "log_created"):
        trial.problems.append(f"this start recorded {recorded} records, the last {last}")


def plan(rng: random.Random, *, modes: Sequence[str], stops: int, per_series: int) -> list[Trial]:
    """The trials, drawn from ``rng``: a state directory per series of ``per_series`` starts;
    the phase of each SIGTERM, its delay, and for the table the broker's state. The phases
    are dealt as a shuffled deck of them all, again and again: every phase is met once there
    are as many stops as phases (drawn one by one, 16 stops missed one some 0.5 % of runs)."""
    trials = []
    phases: list[str] = []
    for number in range(1, stops + 1):
        series, start = divmod(number - 1, per_series)
        mode = modes[series % len(modes)]
        if not phases:
            phases = rng.sample(PHASES, len(PHASES))
        phase = phases.pop()
        if phase == "starting":
            delay = rng.uniform(0.0, 1.2)  # a fraction of the start's usual length
        elif phase == "ready":
            delay = rng.uniform(0.0, 0.25)
        else:
            delay = rng.uniform(0.25, 3.0)
        broker = rng.choice(("none", "down", "silent")) if mode == "table" else ""
        trials.append(Trial(number, mode, series + 1, start + 1, phase, delay, broker))
    return trials


def run_trials(
    *,
    seed: int,
    stops: int,
    modes: Sequence[str] = ("table", "play"),
    per_series: int = 5,
    budget_s: float | None = None,
    root: Path | None = None,
    report: bool = True,
) -> list[Trial]:
    """Every trial of ``plan(seed)``, in order; each judged (``Trial.problems``)."""
    budget = stop_budget_s() if budget_s is None else budget_s
    rng = random.Random(seed)  # the trials' points, not the table's RNG
    trials = plan(rng, modes=modes, stops=stops, per_series=per_series)
    base = root or Path(tempfile.mkdtemp(prefix="stop-stress-"))
    ready_seen: list[float] = []
    for trial in trials:
        state_dir = base / f"state-{trial.series}"
        work = base / f"trial-{trial.number}"
        work.mkdir(parents=True)
        guess = median(ready_seen[-20:]) if ready_seen else 2.0
        one_trial(
            trial,
            state_dir,
            work,
            seed=seed + trial.number,
            budget_s=budget,
            ready_guess=guess,
        )
        if trial.ready_s is not None:
            ready_seen.append(trial.ready_s)
        if report:
            print(("FAIL " if trial.problems else "ok   ") + trial.line(), flush=True)
            for problem in trial.problems:
                print(f"       {problem}", flush=True)
    return trials


def summary(trials: Sequence[Trial], budget_s: float) -> str:
    lines = [f"stop times (SIGTERM to exit), budget {budget_s:.0f} s (TimeoutStopSec):"]
    groups: dict[str, list[float]] = {}
    for trial in trials:
        if trial.stop_s is None:
            continue
        key = f"{trial.mode} {trial.phase}" + (f" broker {trial.broker}" if trial.broker else "")
        groups.setdefault(key, []).append(trial.stop_s)
        groups.setdefault("all", []).append(trial.stop_s)
    for key in sorted(groups, key=lambda k: (k != "all", k)):
        values = groups[key]
        lines.append(
            f"  {key:<34} n={len(values):<4} median {median(values):6.2f} s"
            f"  p90 {percentile(values, 0.9):6.2f} s  max {max(values):6.2f} s"
        )
    hung = [t for t in trials if t.stop_s is None]
    failed = [t for t in trials if t.problems]
    lines.append(f"  hung: {len(hung)} of {len(trials)}; failed: {len(failed)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stops", type=int, default=300)
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument("--mode", choices=("both", "table", "play"), default="both")
    parser.add_argument("--per-series", type=int, default=5, help="starts per state directory")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else time.time_ns() % 1_000_000
    modes = ("table", "play") if args.mode == "both" else (args.mode,)
    budget = stop_budget_s()
    print(f"stop stress: {args.stops} stops, seed {seed}, {machine_load()}", flush=True)
    trials = run_trials(seed=seed, stops=args.stops, modes=modes, per_series=args.per_series)
    print(summary(trials, budget))
    for trial in trials:
        if trial.problems:
            print(f"\n--- {trial.line()}\n" + "\n".join(trial.problems))
            print(trial.stderr[-12000:])
    print(f"seed {seed}")
    return 1 if any(t.problems for t in trials) else 0


if __name__ == "__main__":
    sys.exit(main())
