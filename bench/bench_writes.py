"""SD-card wear: bytes written and fsyncs per round (issue 13: <= 30 KiB and <= 3 per round).

    .venv/bin/python bench/bench_writes.py      # BENCH_WRITES_ROUNDS=40,1040 BENCH_SEED=1

Each run is a child Python playing ``simulate --fast --faults none`` in-process (the same
``run_simulation`` the command calls: the appliance on simulated hardware, the simulated crew,
the sensor on a pty, the log on this machine's disk) and reporting its own ``/proc/self/io``
when it is done. The simulated hardware is given timing margins (bench/common.py,
``steady_simulation``) so that a round is one shake as on a table, not the several that
``--fast`` races into on a loaded machine; the no rolls that remain are printed.

``write_bytes`` is what the process made the kernel write to storage (pages dirtied; a page
dirtied again after an fsync counts again), which is what wears an SD card; ``wchar`` (every
write call, the pty and pipes included) is shown beside it. The child runs under ``strace -f
-ff --seccomp-bpf -y`` tracing fsync, fdatasync and pwrite, to count every fsync and fdatasync
of every thread and to say which files of the state directory the bytes go to (the calls'
sizes, not pages: a WAL frame is a 24-byte header and a 512-byte page, and a commit's frames
dirty one 4 KiB page of the file more than they fill).

The anchor (audit/anchor.py) is written straight to the device, in the 512-byte sectors of its
slot: its bytes are in ``write_bytes`` whatever the pace. Where O_DIRECT is refused it goes
through the page cache, a 4 KiB page a round at a table's pace, which the simulator's pace
hides: the figure at a table's pace adds that page then.

The log copies its WAL into the database every CHECKPOINT_PAGES pages (some 800 rounds), two
syncs each: the longer run spans at least one such copy, so its syncs and bytes are in the
slope (``checkpoints per round`` below says how many fell inside).

Start-up and shutdown write too (the key, the schema, power_on, shutdown), so each figure is
the slope between runs of two lengths: (W(N2) - W(N1)) / (N2 - N1), one pair per repeat, the
median of the repeats. A round is a round played to its close, with the no rolls and reshakes
it had on the way.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import (
    child_report,
    env_int,
    figure,
    machine_load,
    median,
    note,
    proc_io,
    spread,
    steady_simulation,
    title,
)

from controller.app.simulate import run_simulation
from controller.audit.anchor import SLOT_BYTES, AnchorFile
from controller.audit.log import AuditLog
from controller.core.config import Config
from controller.ports import Committed

GOAL_BYTES = 30 * 1024
GOAL_FSYNCS = 3.0
SCRATCH = Path(__file__).parent / ".scratch"
DONE = re.compile(r"done: \d+ rounds, (\d+) no rolls, (\d+) faults")


def child(rounds: int, seed: int, state_dir: Path) -> None:
    """Play ``rounds`` rounds in this process; print what it wrote, as JSON."""
    steady_simulation()
    commits = count_commits()
    anchors = count_anchor_writes()
    out = io.StringIO()
    code = run_simulation(
        Config(),
        rounds=rounds,
        seed=seed,
        fast=True,
        faults={},
        state_dir=state_dir,
        out=out,
        plain_rounds=True,  # a round as counted: the dealer banks, no key but the round's own
    )
    written = proc_io()
    stored = (state_dir / "audit.db").stat().st_size  # the WAL is kept at a stop: not counted
    done = DONE.search(out.getvalue())
    no_rolls, faults = (int(done[1]), int(done[2])) if done else (-1, -1)
    db = sqlite3.connect(f"file:{state_dir / 'audit.db'}?mode=ro", uri=True)
    try:
        (records, shakes) = db.execute(
            "SELECT count(*), sum(kind = 'shake') FROM records"
        ).fetchone()
    finally:
        db.close()
    counts = {"records": records, "commits": commits[0], "shakes": shakes}
    counts |= {"anchor_direct": anchors[0], "anchor_cached": anchors[1]}
    report = {"code": code, "io": written, "stored": stored, "no_rolls": no_rolls}
    print(json.dumps({**report, "faults": faults, **counts}))


def count_commits() -> list[int]:
    """Count the log's commits (one transaction, one WAL sync each) in this process."""
    counter = [0]
    commit = AuditLog.commit

    def counted(self: AuditLog, *args: Any, **kwargs: Any) -> Committed:
        counter[0] += 1
        return commit(self, *args, **kwargs)

    AuditLog.commit = counted  # type: ignore[method-assign]
    return counter


def count_anchor_writes() -> list[int]:
    """Count the anchor's writes in this process: [straight to the device, through the page
    cache] (the file's creation is one of the latter)."""
    counter = [0, 0]
    write = AnchorFile.write

    def counted(self: AnchorFile, *args: Any, **kwargs: Any) -> None:
        write(self, *args, **kwargs)
        counter[0 if self.written_direct else 1] += 1

    AnchorFile.write = counted  # type: ignore[method-assign]
    return counter


def measure(rounds: int, seed: int, strace: str | None) -> dict[str, float]:
    SCRATCH.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-writes-", dir=SCRATCH) as tmp:
        state = Path(tmp) / "state"
        command = [sys.executable, __file__, "--child", str(rounds), str(seed), str(state)]
        traces = Path(tmp) / "traces"
        if strace is not None:
            traces.mkdir()
            trace = [strace, "-f", "-ff", "--seccomp-bpf", "-y", "-s", "0", "-e", TRACED]
            command = [*trace, "-o", str(traces / "t"), *command]
        report = child_report(command, "the simulation", timeout=900)
        figures: dict[str, float] = {
            "write_bytes": report["io"]["write_bytes"],
            "wchar": report["io"]["wchar"],
            "stored": report["stored"],
            "no_rolls": report["no_rolls"],
            "faults": report["faults"],
            "records": report["records"],
            "commits": report["commits"],
            "shakes": report["shakes"],
            "anchor_direct": report["anchor_direct"],
            "anchor_cached": report["anchor_cached"],
        }
        if strace is not None:
            figures.update(tally(traces, state))
    return figures


# SQLite and the anchor write with pwrite64; the pty, pipes and stdout (write) are left
# untraced: every traced call stops the thread, and enough stops make the simulated motor
# overrun its watchdog, which adds fault records.
TRACED = "trace=fsync,fdatasync,pwrite64,pwritev,pwritev2"
_CALL = re.compile(r"^(\w+)\((\d+)<([^>]*)>.*\)\s+=\s+(-?\d+)")


def tally(traces: Path, state: Path) -> dict[str, float]:
    """From strace's per-thread logs: every fsync and fdatasync, and the bytes and calls
    written to each file of the state directory."""
    figures: dict[str, float] = {"fsyncs": 0}
    for path in traces.iterdir():
        for line in path.read_text(errors="replace").splitlines():
            match = _CALL.match(line)
            if match is None:
                continue
            call, _, target, result = match.groups()
            name = Path(target).name if Path(target).parent == state else "elsewhere"
            if name.startswith("."):
                name = "the key (written once)"
            if call in ("fsync", "fdatasync"):
                figures["fsyncs"] += 1
                figures[f"{call} {name}"] = figures.get(f"{call} {name}", 0) + 1
            elif int(result) > 0:
                figures[f"bytes {name}"] = figures.get(f"bytes {name}", 0) + int(result)
    return figures


def main() -> None:
    n1, n2 = rounds_pair()
    seed = env_int("BENCH_SEED", 1, low=0)
    repeats = env_int("BENCH_WRITES_REPEATS", 3)
    strace = shutil.which("strace")
    title(
        f"writes per round: slope between {n1} and {n2} simulated rounds (seed {seed}),"
        f" median of {repeats}"
    )
    note(machine_load())
    if strace is None:
        note("strace is missing (scripts/install-system-deps installs it): fsyncs not counted")
    slopes: dict[str, list[float]] = {}
    for _ in range(repeats):
        short, long = measure(n1, seed, strace), measure(n2, seed, strace)
        note(
            f"runs of {n1} and {n2} rounds: {short['no_rolls']:.0f} and {long['no_rolls']:.0f}"
            f" no rolls, {short['faults']:.0f} and {long['faults']:.0f} faults"
        )
        for key in short.keys() | long.keys():
            slope = (long.get(key, 0) - short.get(key, 0)) / (n2 - n1)
            slopes.setdefault(key, []).append(slope)
    written = median(slopes["write_bytes"])
    note(spread([v / 1024 for v in slopes["write_bytes"]], "KiB", 1))
    figure("bytes written per round (write_bytes)", f"{written / 1024:.1f} KiB")
    # The anchor is rewritten every round. Written straight to the device (O_DIRECT, its
    # slot's sectors: audit/anchor.py), its bytes are in write_bytes at any pace. Written
    # through the page cache (where O_DIRECT is refused), its slot is a page of its own: at
    # the simulator's pace still dirty from two rounds before, and written once; at a table's
    # pace (a round a minute, write-back after 30 s) written every round: a page is added.
    direct = median(slopes["anchor_direct"])
    cached = min(1.0, median(slopes["anchor_cached"]))
    anchor = median(slopes.get("bytes log-anchor", [0.0])) if direct > 0 else 0.0
    table = written + cached * SLOT_BYTES
    figure("per round without the anchor", f"{(written - anchor) / 1024:.2f} KiB")
    figure(
        "per round at a table's pace, with the anchor",
        f"{table / 1024:.2f} KiB",
        f"<= {GOAL_BYTES // 1024} KiB",
        table <= GOAL_BYTES,
    )
    how = (
        f"{direct:.2f} writes of {anchor / direct:.0f} B a round, straight to the device"
        if direct > 0
        else "through the page cache: a 4 KiB page a round at a table's pace"
    )
    if strace is None and direct > 0:
        how = f"{direct:.2f} writes a round, straight to the device (their size needs strace)"
    note(f"the anchor: {how}; [storage] anchor_copy_dir (as installed) writes it once more")
    if strace is not None:
        fsyncs = median(slopes["fsyncs"])
        figure(
            "fsync + fdatasync per round",
            f"{fsyncs:.3f}",
            f"<= {GOAL_FSYNCS:.0f}",
            fsyncs <= GOAL_FSYNCS,
        )
        note(spread(slopes["fsyncs"], "calls", 3))
    commits = median(slopes["commits"])
    figure(
        "per round: commits, records, shakes",
        f"{commits:.2f}, {median(slopes['records']):.2f}, {median(slopes['shakes']):.2f}",
    )
    figure("bytes written per commit", f"{written / commits / 1024:.1f} KiB")
    stored = median(slopes["stored"])
    figure("bytes stored per round (audit.db)", f"{stored:,.0f} B")
    figure("written / stored", f"{written / stored:.1f}x" if stored > 0 else "-")
    figure("write calls' bytes per round (wchar)", f"{median(slopes['wchar']) / 1024:.1f} KiB")
    if strace is not None:
        note("where they go, per round (strace: pwrite calls and syncs, by file):")
        for key in sorted(slopes, key=lambda k: -median(slopes[k])):
            kind, _, name = key.partition(" ")
            value = median(slopes[key])
            if kind == "bytes" and name != "elsewhere" and value >= 1:
                note(f"  {value / 1024:7.1f} KiB written to {name}")
            elif kind in ("fsync", "fdatasync") and value >= 0.005:
                note(f"  {value:7.2f} {kind} of {name}")


def rounds_pair() -> tuple[int, int]:
    text = os.environ.get("BENCH_WRITES_ROUNDS", "40,1040")
    first, _, second = text.partition(",")
    if not (first.isdecimal() and second.isdecimal() and 0 < int(first) < int(second)):
        sys.exit(f"BENCH_WRITES_ROUNDS must be N1,N2 with 0 < N1 < N2, not {text!r}")
    return int(first), int(second)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
