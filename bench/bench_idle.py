"""Idle CPU of the daemon: ``run`` waiting for a player, nothing happening (issue 13: <= 0.05 %
of one core).

    .venv/bin/python bench/bench_idle.py        # BENCH_IDLE_SECONDS=30 (three windows)

The daemon is started as in bench_startup.py (the unit's environment, WATCHDOG_USEC of its
WatchdogSec=10, mock pins with the shaker secured and its lid closed, the simulated sensor on a
pty in this process, an empty state directory), left to settle after READY=1, then watched over
three windows. CPU time is read from every thread's ``/proc/<pid>/task/<tid>/schedstat`` (ns;
the figure) and from ``utime + stime`` of ``/proc/<pid>/stat`` (clock ticks of 10 ms: at 0.05 %
a 10 s window holds half a tick, so that one is only a cross-check over the whole run). The
wake-ups are the threads' context switches (schedstat's third field) per second.
"""

from __future__ import annotations

import contextlib
import os
import platform
import tempfile
import time
from pathlib import Path

from common import (
    cpu_ns,
    cpu_ticks,
    daemon_problems,
    env_int,
    figure,
    machine_load,
    median,
    note,
    run_daemon,
    spread,
    thread_count,
    title,
)

GOAL_PERCENT = 0.05
SETTLE_S = 3.0
WINDOWS = 3
# The system calls a waiting thread sits in, by number (proc(5): /proc/<pid>/task/<tid>/syscall).
SYSCALLS = {
    "x86_64": {
        0: "read", 7: "poll", 23: "select", 35: "nanosleep", 43: "accept", 44: "sendto",
        45: "recvfrom", 46: "sendmsg", 202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
        270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4",
    },
    "aarch64": {
        22: "epoll_pwait", 63: "read", 72: "pselect6", 73: "ppoll", 98: "futex",
        101: "nanosleep", 115: "clock_nanosleep", 202: "accept", 206: "sendto", 207: "recvfrom",
        211: "sendmsg", 242: "accept4",
    },
}  # fmt: skip


def per_thread(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread's CPU time (ns) and times it was scheduled (schedstat)."""
    counts = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran_ns, _, scheduled = (task / "schedstat").read_text().split()[:3]
            counts[int(task.name)] = (int(ran_ns), int(scheduled))
        except (OSError, ValueError):
            continue
    return counts


def _socket_names(pid: int, labels: dict[int, str]) -> dict[str, str]:
    """``socket:[inode]`` -> what it is, for the daemon's TCP listeners."""
    names = {}
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                port = int(fields[1].rsplit(":", 1)[1], 16)
                what = labels.get(port, f"TCP port {port}")
                names[f"socket:[{fields[9]}]"] = f"{what} (port {port})"
    return names


def waiting_on(pid: int, tid: int, sockets: dict[str, str]) -> str:
    """What a thread of ``pid`` is blocked in now: the system call and, for a wait on one
    file descriptor, what that is (a socket the daemon listens on, the sensor's pty)."""
    try:
        fields = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
    except OSError:
        return "?"
    if not fields or not fields[0].isdigit():
        return fields[0] if fields else "?"
    number, args = int(fields[0]), [int(a, 16) for a in fields[1:7]]
    name = SYSCALLS.get(platform.machine(), {}).get(number, f"system call {number}")
    fds: list[int] = []
    if name in ("poll", "ppoll"):  # struct pollfd {int fd; short events, revents;}[nfds]
        entries = _memory(pid, args[0], 8 * min(args[1], 16))
        fds = [
            int.from_bytes(entries[i : i + 4], "little", signed=True)
            for i in range(0, len(entries), 8)
        ]
    elif name in ("select", "pselect6"):  # the read set's bits, below nfds
        bits = int.from_bytes(_memory(pid, args[1], (min(args[0], 1024) + 7) // 8), "little")
        fds = [fd for fd in range(args[0]) if bits >> fd & 1]
    elif name in ("read", "recvfrom", "accept", "accept4"):
        fds = [args[0]]
    if not fds:
        return name
    return f"{name} on " + ", ".join(_fd_name(pid, fd, sockets) for fd in fds)


def blocked_in(pid: int, tid: int, sockets: dict[str, str]) -> str:
    """``waiting_on``, asked again a few times if the thread happens to be running."""
    for _ in range(10):
        found = waiting_on(pid, tid, sockets)
        if found != "running":
            return found
        time.sleep(0.013)
    return "running"


def _memory(pid: int, address: int, size: int) -> bytes:
    try:
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(address)
            return mem.read(size)
    except OSError:
        return b""


def _fd_name(pid: int, fd: int, sockets: dict[str, str]) -> str:
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return f"fd {fd}"
    if target.startswith("/dev/pts/"):
        return f"{target} (the dice sensor's line)"
    return sockets.get(target, target)


def main() -> None:
    seconds = env_int("BENCH_IDLE_SECONDS", 30, low=3)
    window_s = seconds / WINDOWS
    title(f"idle CPU of the daemon waiting for a player: {WINDOWS} windows of {window_s:.0f} s")
    note(machine_load())
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        with run_daemon(Path(tmp) / "state", work_dir=Path(tmp)) as daemon:
            daemon.wait_ready(120)
            time.sleep(SETTLE_S)
            pid = daemon.pid
            percents = []
            first_ticks, first_at = cpu_ticks(pid), time.monotonic()
            first_threads = per_thread(pid)
            watchdog_before = daemon.notify.count("WATCHDOG=1")
            for _ in range(WINDOWS):
                before, at = cpu_ns(pid), time.monotonic()
                time.sleep(window_s)
                used, elapsed = cpu_ns(pid) - before, time.monotonic() - at
                percents.append(100 * used / 1e9 / elapsed)
            elapsed = time.monotonic() - first_at
            ticks = cpu_ticks(pid) - first_ticks
            last_threads = per_thread(pid)
            labels = {daemon.http_port: "the display's HTTP server", daemon.feed_port: "the feed"}
            sockets = _socket_names(pid, labels)
            waits = {tid: blocked_in(pid, tid, sockets) for tid in last_threads}
            watchdogs = daemon.notify.count("WATCHDOG=1") - watchdog_before
            threads = thread_count(pid)
        problems = daemon_problems(daemon.stderr())
    percent = median(percents)
    figure(
        "idle CPU, % of one core (schedstat)",
        f"{percent:.4f} %",
        f"<= {GOAL_PERCENT} %",
        percent <= GOAL_PERCENT,
    )
    note(spread(percents, "%", 4))
    note(
        f"utime+stime over the {elapsed:.0f} s: {ticks} ticks of {1000 // ticks_per_s} ms"
        f" = {100 * ticks / ticks_per_s / elapsed:.4f} % (cross-check)"
    )
    note(f"{threads} threads: wake-ups per second, CPU per wake-up, and what each waits in:")
    rows = []
    for tid, (ran_ns, scheduled) in last_threads.items():
        ran_before, scheduled_before = first_threads.get(tid, (0, 0))
        rows.append((scheduled - scheduled_before, ran_ns - ran_before, tid))
    for count, ran_ns, tid in sorted(rows, reverse=True):
        each = f"{ran_ns / count / 1000:5.0f} us" if count else "    -   "
        note(f"  {count / elapsed:5.1f}/s  {each}  thread {tid}: {waits[tid]}")
    note(f"WATCHDOG=1 sent {watchdogs} times in {elapsed:.0f} s (WatchdogSec=10)")
    for line in problems:
        note(f"the daemon reported: {line}")


if __name__ == "__main__":
    main()
