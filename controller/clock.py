"""The table's event clock: whole milliseconds of the monotonic clock.

The core never reads a clock; every adapter stamps its events (``Occurrence.at``) with this
one, so that deadlines in the round state machine compare like with like."""

from __future__ import annotations

import time


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000
