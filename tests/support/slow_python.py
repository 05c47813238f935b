"""Run ``paigow-controller`` with every Python thread slowed some ``FACTOR`` times.

    python tests/support/slow_python.py FACTOR ARGV...

A trace function that does a little work on each line the interpreter runs, in this thread and
every thread started after it (``threading.settrace``), makes pure Python that much slower: the
control thread, the drivers' pattern and watchdog threads, the simulated sensor and shaker, the
crew. Its work is calibrated here until a pure-Python loop runs at least ``FACTOR`` times
slower than untraced, and the factor reached is printed on stderr (``python slowed xN.N``). C
code (SQLite, the signatures, the kernel's pty) runs at its own speed, as on a slow board whose
Python is what lags.
"""

from __future__ import annotations

import sys
import threading
import time
from types import FrameType
from typing import Any

from controller.cli import main as cli

LOOP = 100_000  # iterations of the calibration loop
MAX_WORK = 100_000  # a tracer doing more than this per line would never reach any factor


def _loop() -> float:
    started = time.perf_counter()
    total = 0
    for i in range(LOOP):
        total += i
    return time.perf_counter() - started


def _tracer(work: int) -> Any:
    def trace(frame: FrameType, event: str, arg: object) -> Any:
        for _ in range(work):
            pass
        return trace

    return trace


def _slowed(work: int) -> float:
    sys.settrace(_tracer(work))
    try:
        return _loop()
    finally:
        sys.settrace(None)


def calibrate(factor: float) -> tuple[int, float]:
    """The tracer's work per line that slows the loop ``factor`` times, and the factor seen."""
    base = min(_loop() for _ in range(5))
    work = 1
    while True:
        seen = min(_slowed(work) for _ in range(3)) / base
        if seen >= factor or work >= MAX_WORK:
            return work, seen
        work = max(work + 1, int(work * min(2.0, factor / seen * 1.1)))


def main() -> int:
    factor = float(sys.argv[1])
    work, seen = calibrate(factor)
    print(f"python slowed x{seen:.1f} (tracer work {work} per line)", file=sys.stderr, flush=True)
    threading.settrace(_tracer(work))
    sys.settrace(_tracer(work))
    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
