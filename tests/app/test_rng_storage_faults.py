"""An RNG table whose disk fails a write once, at each commit of its rounds in turn (a real
fdatasync failing with EIO, injected with strace): every round is decided once, its number
drawn once and never redrawn, and the log verifies, the draws replayed from the revealed seed.
Before, a failed ``rng_draw`` commit left the session refusing every draw ("cannot draw after a
failed draw") while the crew cleared the fault again and again."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.audit.log import load_signer
from controller.audit.recall import export_lines
from controller.audit.verify import verify_state_dir
from controller.core.rng_replay import verify_rng_records

STRACE = shutil.which("strace")
ROUNDS = 2


def _simulate_rng_under_strace(state: Path, when: int) -> subprocess.CompletedProcess[str]:
    """The control thread (the process's main thread, which makes every commit) is traced
    alone: its ``when``-th fdatasync fails."""
    assert STRACE is not None, "strace is installed by scripts/install-system-deps"
    return subprocess.run(
        [
            *(("nice", "-n", "-10") if os.geteuid() == 0 else ()),
            STRACE,
            *("-qq", "-o", "/dev/null", "-e", "trace=fdatasync"),
            *("-e", f"inject=fdatasync:error=EIO:when={when}"),
            *(sys.executable, "-m", "controller", "simulate", "--fast", "--plain-rounds"),
            *("--mode", "rng", "--rounds", str(ROUNDS), "--faults", "none"),
            *("--state-dir", str(state)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rows(state: Path) -> list[dict[str, Any]]:
    return list(export_lines(state))


@pytest.mark.slow
def test_a_failed_fdatasync_at_any_commit_of_an_rng_round_decides_each_round_once(
    tmp_path: Path,
) -> None:
    hit_draw = 0
    # The log's creation takes the first fdatasyncs (a failure there fails the start, as it
    # should: nothing is recorded); from the first power on, two RNG rounds take some fifteen
    # commits (bets closed, the draw, the result, the close and the next round's opening), the
    # shutdown and the session's reveal. The sweep goes past the last of them.
    for when in range(8, 23):
        state = tmp_path / f"when-{when}"
        proc = _simulate_rng_under_strace(state, when)
        assert proc.returncode == 0, (when, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (when, proc.stderr[-2000:])
        assert "after a failed draw" not in proc.stderr, (when, proc.stderr[-2000:])
        hit_draw += "draw_number failed" in proc.stderr
        signer = load_signer(state)
        assert signer is not None
        verify_state_dir(state, signer.verifier)  # what verify-log checks; raises if broken
        rows = _rows(state)
        draws = collections.Counter(
            (r["data"]["round"], r["data"]["attempt"]) for r in rows if r["kind"] == "rng_draw"
        )
        results = collections.Counter(r["data"]["round"] for r in rows if r["kind"] == "result")
        closed = [r["data"]["round"] for r in rows if r["kind"] == "close"]
        # every round played: one draw, one result, one close; nothing drawn again
        assert sorted(round_ for round_, _ in draws) == list(range(1, ROUNDS + 1)), (when, draws)
        assert set(draws.values()) == {1}, (when, draws)
        assert results == dict.fromkeys(range(1, ROUNDS + 1), 1), (when, results)
        assert closed == list(range(1, ROUNDS + 1)), (when, closed)
        # the draws replay from the seed the session revealed at the stop (unless the reveal
        # was the write that failed: the session then stays escrowed, for the auditor)
        rng = [(r["seq"], r["kind"], r["data"]) for r in rows if r["kind"].startswith("rng_")]
        revealed = sum(kind == "rng_reveal" for _, kind, _ in rng)
        assert verify_rng_records(rng) == revealed, when
        lost_at_stop = ("close_rng failed", "not recorded: shutdown")
        assert revealed == 1 or any(why in proc.stderr for why in lost_at_stop), when
        # a fault at most, cleared once: none came back
        faults = [r["data"] for r in rows if r["kind"] == "fault"]
        assert len(faults) <= 1, (when, faults)
    assert hit_draw >= ROUNDS, "no injection hit the commit of a draw"
