"""Writes of the first rounds after a restart (issue 31: the WAL is kept across restarts).

    .venv/bin/python bench/bench_restart_writes.py   # BENCH_RESTART_ROUNDS=900,700 BENCH_SEED=1
    BENCH_RESTART_DIR=/mnt/scratch .venv/bin/python bench/bench_restart_writes.py

A first child plays ``P`` rounds on a new state directory and stops in order (its WAL has
wrapped at least once: CHECKPOINT_PAGES is some 800 rounds); a second child, on the same
directory, plays ``N`` rounds: the figures are the second's, per round. Each child is
bench_writes.py's (``simulate --fast --faults none`` in-process, its ``/proc/self/io``).

``write_bytes`` counts the pages the process dirtied, not what the file system adds for a
file that grows: a WAL written anew grows by a block every few commits, and each synced
growth commits the file system's journal (inode, extent, bitmap). Those writes are the
journal thread's; they show at the block device (``/sys/dev/block/M:m/stat``, sectors
written while the second child ran: the whole machine's, so noisy on a shared one) and in the
WAL's size at the second start and at its end (a WAL kept across the restart does not grow).
``BENCH_RESTART_DIR`` (default bench/.scratch) puts the state directory on a file system of
its own (a loop device, an SD card), whose device then counts this bench's writes alone;
everything is synced before each count.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from common import child_report, env_int, figure, machine_load, note, title

SCRATCH = Path(__file__).parent / ".scratch"
WRITES = Path(__file__).parent / "bench_writes.py"


def device_sectors_written(path: Path) -> int:
    """Sectors written to the block device holding ``path`` since boot (its stat file)."""
    dev = os.stat(path).st_dev
    stat = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat")
    return int(stat.read_text().split()[6])


def play(rounds: int, seed: int, state: Path) -> dict[str, object]:
    command = [sys.executable, str(WRITES), "--child", str(rounds), str(seed), str(state)]
    return child_report(command, "the simulation", timeout=1800)


def wal_size(state: Path) -> int:
    wal = state / "audit.db-wal"
    return wal.stat().st_size if wal.exists() else 0


def main() -> None:
    text = os.environ.get("BENCH_RESTART_ROUNDS", "900,700")
    first, _, second = text.partition(",")
    if not (first.isdecimal() and second.isdecimal() and int(first) > 0 and int(second) > 0):
        sys.exit(f"BENCH_RESTART_ROUNDS must be P,N with P, N > 0, not {text!r}")
    primed, rounds = int(first), int(second)
    seed = env_int("BENCH_SEED", 1, low=0)
    title(f"writes of the first {rounds} rounds after a restart ({primed} before it, seed {seed})")
    note(machine_load())
    scratch = Path(os.environ.get("BENCH_RESTART_DIR", "") or SCRATCH)
    scratch.mkdir(exist_ok=True)
    dev = os.stat(scratch).st_dev
    note(f"state directory under {scratch} (device {os.major(dev)}:{os.minor(dev)})")
    with tempfile.TemporaryDirectory(prefix="bench-restart-", dir=scratch) as tmp:
        state = Path(tmp) / "state"
        play(primed, seed, state)
        wal_before = wal_size(state)
        os.sync()
        sectors = device_sectors_written(Path(tmp))
        report = play(rounds, seed, state)
        os.sync()
        device = (device_sectors_written(Path(tmp)) - sectors) * 512
        wal_after = wal_size(state)
    io = report["io"]
    assert isinstance(io, dict)
    figure("WAL at the restart, and after the rounds", f"{wal_before:,} B, {wal_after:,} B")
    figure("bytes written per round (write_bytes)", f"{io['write_bytes'] / rounds / 1024:.1f} KiB")
    figure("at the block device per round", f"{device / rounds / 1024:.1f} KiB")
    note(f"no rolls {report['no_rolls']}, faults {report['faults']}")


if __name__ == "__main__":
    main()
