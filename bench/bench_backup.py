"""Backup and retention on a long log (bench/loggen.py: the daemon's own rows).

Run: ``.venv/bin/python bench/bench_backup.py``. Figures, medians of REPEATS runs:
- ``paigow-controller backup`` of the log (the online backup API, one snapshot, 1,024-page
  steps, then fsync), wall time and MB/s; beside it ``cp`` + fsync of the same file, the
  baseline a copy cannot beat;
- ``verify-log --db`` on the backup against ``verify-log --state-dir`` on the log (the same
  verifier: the ratio should be 1);
- retention with ``retain_rounds = 100`` on a copy: the time to write, fsync and read back one
  archive (off the control thread), and what the control thread pays per drop step (256
  records in one transaction), median and worst.
``BENCH_ROUNDS`` (default 20,000) sets the log's length.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import env_int, figure, machine_load, median, note, spread, title
from loggen import cached_log

from controller.audit.archive import Policy, Retention
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.files import fsync_file

ROUNDS = env_int("BENCH_ROUNDS", 20_000)
REPEATS = env_int("BENCH_REPEATS", 3)
CLI = [sys.executable, "-m", "controller"]


def _timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
    return elapsed


def _cp(source: Path, target: Path) -> float:
    start = time.perf_counter()
    shutil.copyfile(source, target)
    fsync_file(target)
    return time.perf_counter() - start


def main() -> None:
    title(f"backup and retention, a log of {ROUNDS} rounds ({machine_load()})")
    state = cached_log(ROUNDS)
    size_mb = (state / DB_NAME).stat().st_size / 1e6
    with tempfile.TemporaryDirectory(prefix="bench-backup-", dir=state.parent) as scratch:
        work = Path(scratch)
        backups, copies = [], []
        for run in range(REPEATS):
            out = work / f"backup-{run}.db"
            backups.append(_timed([*CLI, "backup", "--state-dir", str(state), str(out)]))
            copies.append(_cp(state / DB_NAME, work / f"cp-{run}.db"))
        figure("backup (online backup API, fsync)", f"{median(backups):.2f} s")
        note(spread(backups, "s") + f"; {size_mb / median(backups):.0f} MB/s of {size_mb:.0f} MB")
        figure("cp + fsync of the same file (baseline)", f"{median(copies):.2f} s")
        key = work / "log.pub"
        signer = load_signer(state)
        assert signer is not None
        key.write_text(f"{signer.verifier}\n")
        on_db = [
            _timed([*CLI, "verify-log", "--db", str(work / "backup-0.db"), "--key", str(key)])
            for _ in range(REPEATS)
        ]
        on_dir = [_timed([*CLI, "verify-log", "--state-dir", str(state)]) for _ in range(REPEATS)]
        figure("verify-log --db on the backup", f"{median(on_db):.2f} s")
        figure("verify-log --state-dir on the log", f"{median(on_dir):.2f} s")
        note(f"ratio {median(on_db) / median(on_dir):.2f}")
        copy = work / "retained"
        shutil.copytree(state, copy)
        retention = Retention(copy, signer, Policy(retain_rounds=100))
        prepares, drops = [], []
        with AuditLog.open(copy) as audit:
            while True:
                start = time.perf_counter()
                archive = retention.prepare()
                prepares.append(time.perf_counter() - start)
                if archive is None:
                    prepares.pop()
                    break
                while True:
                    start = time.perf_counter()
                    remaining = retention.drop_step(audit)
                    drops.append(time.perf_counter() - start)
                    if remaining == 0:
                        break
        figure("one archive of 65,536 records, read back", f"{median(prepares):.2f} s")
        note(spread(prepares, "s") + " (its own thread)")
        figure("a drop step on the control thread", f"{median(drops) * 1000:.1f} ms")
        note(f"worst {max(drops) * 1000:.1f} ms of {len(drops)} steps")


if __name__ == "__main__":
    main()
