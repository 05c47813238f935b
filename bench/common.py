"""What the benchmarks share: printing a figure beside its goal, the daemon started on simulated
hardware the way systemd starts it, and readings of a process from /proc.

The daemon (``paigow-controller run``, as ``systemd/paigow-controller.service`` starts it, with
the unit's environment) runs on gpiozero's mock pins with the simulated shaker secured and its
lid closed (bench/table_daemon.py), and the simulated dice sensor of ``drivers/sim/sensor.py``
at the far end of a real pty, in the benchmark's own process; it tells the benchmark
``READY=1`` through a ``NOTIFY_SOCKET`` datagram socket the benchmark binds, as it tells
systemd.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.app import simulate
from controller.core.config import Config
from controller.files import fsync_dir, fsync_file
from controller.software.check import (
    build_manifest,
    create_release_key,
    installed_root,
    running_version,
    write_manifest,
)
from drivers.sim.sensor import SimulatedSensor

WATCHDOG_USEC = 10_000_000  # the unit's WatchdogSec=10
# What the unit's Environment= sets.
UNIT_ENV = {"PYTHONFAULTHANDLER": "1", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
MOCK_PINS_ENV = {"GPIOZERO_PIN_FACTORY": "mock", "GPIOZERO_MOCK_PIN_CLASS": "mockpwmpin"}


# --- printing ---------------------------------------------------------------------------------


def env_int(name: str, default: int, *, low: int = 1) -> int:
    """A whole number from the environment (to shrink a run), or the default."""
    text = os.environ.get(name, "")
    if not text:
        return default
    if not text.isdecimal() or not text.isascii() or int(text) < low:
        sys.exit(f"{name} must be a whole number >= {low}, not {text!r}")
    return int(text)


def title(text: str) -> None:
    print(text, flush=True)


def note(text: str) -> None:
    print(f"  {text}", flush=True)


def machine_load() -> str:
    """The load average beside the cores: these figures share the machine with other work."""
    try:
        one, five = Path("/proc/loadavg").read_text().split()[:2]
    except (OSError, ValueError):
        return "load average unknown"
    return f"load average {one} (5 min {five}) on {os.cpu_count()} cores when this started"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def figure(name: str, value: str, goal: str = "", ok: bool | None = None) -> None:
    """One figure: its name, its value, the goal beside it and PASS or MISS."""
    goal_text = f"goal {goal}" if goal else ""
    mark = "" if ok is None else verdict(ok)
    print(f"  {name:<48} {value:>18}   {goal_text:<18} {mark}".rstrip(), flush=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` 0..1) of at least one value."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def spread(values: Sequence[float], unit: str, digits: int = 2) -> str:
    """The runs' values, for the reader to judge the noise."""
    return "runs: " + ", ".join(f"{v:.{digits}f}" for v in values) + f" {unit}"


# --- the simulation ---------------------------------------------------------------------------

# ``simulate --fast`` rolls the simulated dice one cycle (6 ms) after the motor stops and reads
# them 1 ms after the shake's end, and shakes exactly the three cycles the rules ask for: on a
# loaded machine the read often comes first ("did not move") or a pulse is late ("too few
# cycles"), and a round becomes several shakes. Where a figure is per round, the simulated
# hardware is given margins instead: the dice land 10 ms after the motor stops and are read 40
# ms after the shake's end, four cycles per shake. Every record, commit and I/O path is the same.
# The motor's limit stays ``--fast``'s (FAST_MOTOR_MAX_MS, 25 times this shake): a limit of
# 300 ms, under strace (each traced call stops the thread) on a loaded machine, cut a 40 ms
# shake that the stops had stretched, and the run counted motor overruns as faults.
STEADY_SHAKER = {"shake_ms": 40, "cycle_ms": 10}
STEADY_SETTLE_MS = 40


def steady_simulation() -> None:
    """``run_simulation(fast=True)`` in this process with the margins above."""
    fast_config = simulate.simulation_config

    def steady(config: Config, *, fast: bool) -> Config:
        config = fast_config(config, fast=fast)
        if not fast:
            return config
        shaker = dataclasses.replace(config.shaker, **STEADY_SHAKER)
        round_ = dataclasses.replace(config.round, settle_ms=STEADY_SETTLE_MS)
        return dataclasses.replace(config, shaker=shaker, round=round_)

    simulate.simulation_config = steady


# --- files ------------------------------------------------------------------------------------


def copy_state_dir(source: Path, target: Path) -> None:
    """A copy of a state directory, on disk before the daemon starts (fsynced), so that the
    daemon's first fsync does not pay for flushing the copy."""
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    for item in sorted(source.iterdir()):
        if not item.is_file() or item.name.startswith("."):
            continue
        destination = target / item.name
        shutil.copy2(item, destination)
        fsync_file(destination)
    fsync_dir(target)


def tmpfs_dir() -> Path | None:
    """A directory on a tmpfs (where fsync costs nothing), or None."""
    for candidate in ("/dev/shm", os.environ.get("XDG_RUNTIME_DIR", "")):
        if candidate and _is_tmpfs(Path(candidate)):
            return Path(candidate)
    return None


def _is_tmpfs(path: Path) -> bool:
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    best = ("", "")
    resolved = str(path.resolve())
    for line in mounts:
        parts = line.split()
        is_under = len(parts) >= 3 and (resolved + "/").startswith(parts[1].rstrip("/") + "/")
        if is_under and len(parts[1]) >= len(best[0]):
            best = (parts[1], parts[2])
    return best[1] == "tmpfs" and os.access(path, os.W_OK)


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` ports free now, each a different one: all are held while the next is asked
    for (one asked for after another was let go may be the same, and a display given the same
    port for its page and its feed refuses its config)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


# --- /proc ------------------------------------------------------------------------------------


def cpu_ns(pid: int) -> int:
    """CPU time of every live thread of ``pid``, in ns (``/proc/<pid>/task/*/schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` (all its threads), in clock ticks (``/proc/<pid>/stat``)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def proc_status(pid: int | str, key: str) -> int:
    """A ``kB`` line of ``/proc/<pid>/status`` in bytes (VmRSS, VmHWM, ...)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def proc_io(pid: int | str = "self") -> dict[str, int]:
    """``/proc/<pid>/io``: rchar, wchar, write_bytes, ..."""
    pairs = (line.split(":") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return {name.strip(): int(value) for name, value in pairs}


def thread_count(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


# --- the daemon -------------------------------------------------------------------------------


class NotifySocket:
    """The ``NOTIFY_SOCKET`` systemd would give: a datagram socket bound in ``directory``, read
    all the time by a thread of its own, as systemd reads it (a socket left unread fills, and
    the daemon then drops what it sends)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.2)  # how soon the reader sees close()
        self.messages: list[tuple[float, str]] = []
        self._arrived = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="notify-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._closed:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._arrived:
                self.messages.append((time.monotonic(), data.decode("utf-8", "replace")))
                self._arrived.notify_all()

    def _found(self, line: str) -> float | None:
        for at, message in self.messages:
            if line in message.splitlines():
                return at
        return None

    def wait_for(self, line: str, timeout: float) -> float | None:
        """The ``time.monotonic()`` at which a message holding ``line`` arrived, or None."""
        with self._arrived:
            self._arrived.wait_for(lambda: self._found(line) is not None, timeout)
            return self._found(line)

    def count(self, line: str) -> int:
        with self._arrived:
            return sum(line in message.splitlines() for _, message in self.messages)

    def close(self) -> None:
        self._closed = True
        self._reader.join(5)
        self.sock.close()


def daemon_problems(stderr: str) -> list[str]:
    """The daemon's log lines at error level or worse, but for the latch a SIGTERM trips."""
    return [
        line
        for line in stderr.splitlines()
        if line.startswith(("<0>", "<1>", "<2>", "<3>")) and "shutdown: signal" not in line
    ]


_REPORTED: set[str] = set()  # the daemon's problems noted once per bench run


def daemon_start_s(
    source: Path | None,
    *,
    prefix: str,
    timeout_s: float,
    python: str = sys.executable,
    packages: Path | None = None,
) -> float:
    """Exec -> READY=1 of one daemon (``run_daemon``) on a state directory of its own, a copy
    of ``source``'s (None: empty), in bench/.scratch; each problem the daemon reports at error
    level is noted once."""
    scratch = Path(__file__).resolve().parent / ".scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=scratch) as tmp:
        state = Path(tmp) / "state"
        if source is not None:
            copy_state_dir(source, state)
        with run_daemon(state, work_dir=Path(tmp), python=python, packages=packages) as daemon:
            seconds = daemon.wait_ready(timeout_s)
        for line in daemon_problems(daemon.stderr()):
            if line not in _REPORTED:
                _REPORTED.add(line)
                note(f"the daemon reported: {line}")
        return seconds


@dataclass
class Daemon:
    """``paigow-controller run`` started as systemd starts it, on simulated hardware."""

    proc: subprocess.Popen[bytes]
    started: float  # time.monotonic() just before the exec
    notify: NotifySocket
    stderr_path: Path
    state_dir: Path
    http_port: int
    feed_port: int
    sensor: SimulatedSensor
    ready: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float) -> float:
        """Seconds from exec to READY=1; exits the benchmark with the daemon's stderr if it
        never comes."""
        at = self.notify.wait_for("READY=1", timeout)
        if at is None:
            self.stop()
            sys.exit(
                f"the daemon sent no READY=1 within {timeout:.0f} s; its stderr:\n"
                + self.stderr()[-3000:]
            )
        self.ready = at
        return at - self.started

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


def controller_command(*args: str) -> list[str]:
    """The installed ``paigow-controller`` script, as the unit's ExecStart names it."""
    script = Path(sys.executable).parent / "paigow-controller"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "controller", *args]


def table_daemon_command(*args: str, python: str = sys.executable) -> list[str]:
    """``paigow-controller run ARGS`` on a simulated table at rest (bench/table_daemon.py),
    by ``python`` (another virtualenv's: its packages run)."""
    return [python, str(Path(__file__).parent / "table_daemon.py"), *args]


def signed_manifest(work: Path, packages: Path | None = None) -> tuple[Path, str]:
    """A manifest of this checkout's packages (their caches as they are) signed with a
    throw-away release key, in ``work``: the daemon verifies its own files at start as on a
    table (a checkout has no manifest, and ``run`` would start in the software_identity
    fault). ``packages``: those of an installed tree instead, with the release's bytecode."""
    signer = create_release_key(work / "release.key")
    manifest = work / "MANIFEST.json"
    if packages is None:
        blob = build_manifest(installed_root(), signer, running_version(), bytecode_as_found=True)
    else:
        blob = build_manifest(packages, signer, running_version())
    write_manifest(manifest, blob)
    return manifest, str(signer.verifier)


@contextlib.contextmanager
def run_daemon(
    state_dir: Path,
    *,
    work_dir: Path | None = None,
    sensor_seed: int = 1,
    config_text: str = "",
    python: str = sys.executable,
    packages: Path | None = None,
) -> Iterator[Daemon]:
    """The daemon on ``state_dir`` (bench/table_daemon.py: ``paigow-controller run`` on a
    simulated table at rest), the simulated sensor in this process; stopped (SIGTERM) on
    leaving. ``config_text`` is added to the config file; ``python`` and ``packages``: another
    virtualenv's interpreter and the directory holding its controller and drivers packages."""
    with contextlib.ExitStack() as stack:
        work = work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sensor = stack.enter_context(SimulatedSensor(seed=sensor_seed))
        http_port, feed_port = free_ports(2)
        config = work / "config.toml"
        manifest, release_key = signed_manifest(work, packages)
        config.write_text(
            f'[storage]\nstate_dir = "{state_dir}"\n'
            f'[sensor]\nurl = "{sensor.url}"\n'
            f"[display]\nhttp_port = {http_port}\nfeed_port = {feed_port}\n"
            f'[software]\nmanifest = "{manifest}"\npublic_key = "{release_key}"\n' + config_text
        )
        notify = NotifySocket(work)
        stack.callback(notify.close)
        env = {
            **os.environ,
            **UNIT_ENV,
            **MOCK_PINS_ENV,
            "NOTIFY_SOCKET": str(notify.path),
            "WATCHDOG_USEC": str(WATCHDOG_USEC),
        }
        env.pop("WATCHDOG_PID", None)
        stderr_path = work / "daemon.stderr"
        with stderr_path.open("wb") as stderr:
            started = time.monotonic()
            proc = subprocess.Popen(
                table_daemon_command("--config", str(config), python=python),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                cwd=work,
            )
        daemon = Daemon(proc, started, notify, stderr_path, state_dir, http_port, feed_port, sensor)
        try:
            yield daemon
        finally:
            daemon.stop()


def child_report(command: Sequence[str], what: str, *, timeout: float) -> dict[str, Any]:
    """Run a bench's child and return the JSON object its last line of output prints; exit
    naming ``what`` failed and the end of its stderr if it fails."""
    proc = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"{what} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


# --- reads of a long log against a short one (bench_recall, bench_reports) --------------------


def timed_ms(
    read: Callable[[Path], object], state: Path, *, cold: bool, repeats: int
) -> list[float]:
    """``read(state)``'s wall time, ``repeats`` times; ``cold`` drops the log's pages from the
    kernel's cache before each (posix_fadvise), as after a reboot."""
    from controller.audit.log import DB_NAME  # noqa: PLC0415 - only the log benches need it
    from controller.audit.store import drop_cached_pages  # noqa: PLC0415

    runs = []
    for _ in range(repeats):
        if cold:
            drop_cached_pages(state / DB_NAME)
        start = time.perf_counter()
        read(state)
        runs.append((time.perf_counter() - start) * 1000)
    return runs


def flat_reads(
    reads: Mapping[str, Callable[[Path], object]],
    logs: Mapping[int, Path],
    *,
    repeats: int,
    ratio_goal: float,
    goals_ms: Mapping[str, float] | None = None,
) -> None:
    """Each of ``reads`` on each of ``logs`` (rounds: state directory, the short log first and
    the long one last), warm and cold: its median, and the long log's against the short one's
    (flat: at most ``ratio_goal``); a read named in ``goals_ms`` has a goal of its own."""
    sizes = list(logs)
    goals = goals_ms or {}
    for name, read in reads.items():
        for cold in (False, True):
            found = {}
            for size, state in logs.items():
                read(state)  # the modules' first use is not counted
                runs = timed_ms(read, state, cold=cold, repeats=repeats)
                found[size] = median(runs)
                label = f"{name}, {size:,} rounds{', cold' if cold else ''}"
                goal = goals.get(name)
                if goal is None:
                    figure(label, f"{found[size]:.2f} ms")
                else:
                    figure(label, f"{found[size]:.2f} ms", f"<= {goal:.0f} ms", found[size] <= goal)
                note(spread(runs, "ms"))
            ratio = found[sizes[-1]] / found[sizes[0]]
            label = f"  {sizes[-1]:,} / {sizes[0]:,} rounds"
            figure(label, f"{ratio:.2f}x", f"<= {ratio_goal}x", ratio <= ratio_goal)
