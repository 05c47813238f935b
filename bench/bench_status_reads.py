"""What ``status`` of a stopped controller reads and writes, by the state its log was left in.

    .venv/bin/python bench/bench_status_reads.py [STATE_DIR]   # BENCH_ROUNDS=20000

``STATE_DIR`` (default: the cached log of ``BENCH_ROUNDS`` rounds, bench/loggen.py) is copied
to a scratch directory, never read in place. Three ways the log may be left:

- no WAL: a stop that deleted it (the stop before the WAL was kept): read ``immutable``;
- a kept WAL: the controller started on it, played 3 rounds (``simulate``) and stopped
  (store.close_keeping_wal: one small commit in it, ``-shm`` beside it): read in place,
  ``mode=ro`` (app/status.quiet_connection);
- the same WAL without its ``-shm``: read from a private copy of the database and the WAL,
  as status read every WAL with content before it read one in place.

Each figure is one ``status --json`` in a process of its own, its ``/proc/self/io`` counted
around the call (``rchar``/``wchar``: the bytes its system calls read and wrote, the copy's
included; ``read_bytes``: what came from the device, its cache dropped before each run for
the log's files; ``write_bytes``: what it dirtied in the page cache, for the device), the
median of ``BENCH_REPEATS`` runs. Run as root, the in-place read rewrites the ``-shm`` (32 KiB,
shared memory, SQLite's wal-index: no part of the log); a user who may not write it builds
the wal-index on the heap instead.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from common import child_report, copy_state_dir, env_int, figure, machine_load, median, note, title
from loggen import cached_log

from controller.audit.log import DB_NAME

SCRATCH = Path(__file__).parent / ".scratch"

_MEASURED = """
import contextlib, io, json, sys
from controller.cli import main

def io_now():
    return dict(
        (k, int(v)) for k, v in (l.split(": ") for l in open("/proc/self/io").read().splitlines())
    )

before = io_now()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["status", "--state-dir", sys.argv[1], "--socket", sys.argv[1] + "/none", "--json"])
after = io_now()
shown = json.loads(out.getvalue())
print(json.dumps({
    "code": code,
    "log_size": shown.get("log_size"),
    "problems": shown.get("problems", []),
    **{k: after[k] - before[k] for k in ("rchar", "wchar", "read_bytes", "write_bytes")},
}))
"""


def _drop_cache(state: Path) -> None:
    for path in state.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _status(state: Path) -> dict[str, int]:
    _drop_cache(state)
    return child_report([sys.executable, "-c", _MEASURED, str(state)], "status", timeout=600)


def _sizes(state: Path) -> str:
    names = (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm")
    return ", ".join(f"{n} {(state / n).stat().st_size:,} B" for n in names if (state / n).exists())


def main() -> None:
    repeats = env_int("BENCH_REPEATS", 3)
    if len(sys.argv) > 1:
        source = Path(sys.argv[1])
        if not (source / DB_NAME).is_file():
            sys.exit(f"{source}: no {DB_NAME} there")
    else:
        source = cached_log(env_int("BENCH_ROUNDS", 20_000))
    title(f"status of a stopped controller: bytes read and written ({source})")
    note(machine_load())
    SCRATCH.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-status-", dir=SCRATCH) as tmp:
        state = Path(tmp) / "state"
        copy_state_dir(source, state)
        db = sqlite3.connect(state / DB_NAME)  # the last to close: it copies and deletes
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        db.close()
        if (state / f"{DB_NAME}-wal").exists():
            sys.exit(f"{state}: the WAL was not deleted at the close")
        cases = {}
        cases["no WAL (a stop that deleted it): immutable"] = _measure(state, repeats)
        play = ["simulate", "--fast", "--rounds", "3", "--faults", "none"]
        subprocess.run(  # the controller started, a few rounds, stopped: its WAL kept
            [sys.executable, "-m", "controller", *play, "--state-dir", str(state)],
            check=True,
            capture_output=True,
            timeout=600,
        )
        cases["a kept WAL: read in place (mode=ro)"] = _measure(state, repeats)
        shutil.move(state / f"{DB_NAME}-shm", Path(tmp) / "shm")
        cases["a kept WAL without -shm: a private copy"] = _measure(state, repeats)
    if any(run["problems"] for runs in cases.values() for run in runs):
        sys.exit(f"a read had problems: {cases}")
    sizes = [{run["log_size"] for run in runs} for runs in cases.values()]
    if any(len(found) != 1 for found in sizes) or sizes[1] != sizes[2]:
        sys.exit(f"the reads of the kept WAL disagree: {cases}")
    note(f"log size {sizes[0].pop():,} records, then {sizes[1].pop():,} (3 rounds played)")
    for name, runs in cases.items():
        shown = ", ".join(
            f"{key} {median([run[key] for run in runs]) / 1024:,.0f} KiB"
            for key in ("rchar", "wchar", "read_bytes", "write_bytes")
        )
        figure(name, shown)


def _measure(state: Path, repeats: int) -> list[dict[str, int]]:
    note(f"  files: {_sizes(state)}")
    return [_status(state) for _ in range(repeats)]


if __name__ == "__main__":
    main()
