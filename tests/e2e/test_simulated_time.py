"""The simulated hardware keeps its own time: Python slowed ten times over (a board several
times slower than this machine, or this one loaded) makes a simulated round take longer, never
changes what happens in it: no spurious no roll, no fault, the same results for the same seed.

The table's own command runs in a process of its own, once as it is and once with every
Python thread slowed (``tests/support/slow_python.py``); the two logs are read back.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import simulate_argv, what_happened

pytestmark = pytest.mark.slow

SLOWER = 10.0  # the factor Python is slowed by, at least
ROUNDS = 20
SEED = "7"
SLOW_PYTHON = Path(__file__).parent.parent / "support" / "slow_python.py"


def simulate(state: Path, *, slowed: bool) -> str:
    argv = simulate_argv(state, ROUNDS, "--seed", SEED)
    if slowed:
        argv = [sys.executable, str(SLOW_PYTHON), str(SLOWER), *argv[3:]]  # past "-m controller"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stderr


def test_python_ten_times_slower_changes_nothing_that_happens(tmp_path: Path) -> None:
    print(f"seed {SEED}, {ROUNDS} rounds, with the crew's choices, no fault injected")
    simulate(tmp_path / "as-is", slowed=False)
    said = simulate(tmp_path / "slowed", slowed=True)
    print(said.splitlines()[0])
    assert said.startswith("python slowed x"), said
    assert float(said.split("x", 1)[1].split()[0]) >= SLOWER
    results, wrong = what_happened(tmp_path / "as-is")
    slowed_results, slowed_wrong = what_happened(tmp_path / "slowed")
    assert len(results) >= ROUNDS - 2  # the crew voids a round now and then, on purpose
    assert (wrong, slowed_wrong) == ([], [])
    assert slowed_results == results
