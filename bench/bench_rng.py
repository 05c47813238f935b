"""RNG speed: draws per second of the table's HMAC_DRBG path against ``secrets.randbelow``.

Run: ``.venv/bin/python bench/bench_rng.py`` (also part of ``make bench``). Each figure is the
median of REPEATS timed runs in this one process; the ratio is against ``secrets.randbelow``
(the kernel's CSPRNG through ``os.urandom``) measured in the same run, since these machines are
noisy. A table draws one number per round, so any figure above a few hundred per second is far
more than it needs; the point is the cost of auditability relative to the stdlib. Issue 13's
goal: position draws at >= 0.1x ``secrets.randbelow(8)``.
"""

from __future__ import annotations

import os
import secrets
import statistics
import time
from collections.abc import Callable

from common import figure, title

from controller.core.drbg import HmacDrbg, bound_source, number_in_range, virtual_roll
from controller.core.rng_replay import personalization_for, round_identity

DRAWS = 50_000
REPEATS = 7
STREAM_BYTES = 8 << 20
GOAL_RATIO = 0.1


def _rate(work: Callable[[], None], count: int) -> float:
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        timings.append(time.perf_counter() - start)
    return count / statistics.median(timings)


def _session_drbg() -> HmacDrbg:
    return HmacDrbg(os.urandom(32), os.urandom(16), personalization_for("table-1", "0" * 16))


def main() -> None:
    identities = [round_identity("table-1", "0" * 16, r, 1) for r in range(1, DRAWS + 1)]

    def baseline() -> None:
        for _ in range(DRAWS):
            secrets.randbelow(8)

    def positions() -> None:
        drbg = _session_drbg()
        for identity in identities:
            number_in_range(8, bound_source(drbg, identity))

    def dice() -> None:
        drbg = _session_drbg()
        for identity in identities:
            virtual_roll(bound_source(drbg, identity))

    def stream() -> None:
        drbg = _session_drbg()
        for _ in range(STREAM_BYTES // 65536):
            drbg.generate(65536)

    def stream_baseline() -> None:
        for _ in range(STREAM_BYTES // 65536):
            os.urandom(65536)

    base = _rate(baseline, DRAWS)
    title(f"rng: {DRAWS} draws x {REPEATS} repeats, medians")
    figure("secrets.randbelow(8) (baseline)", f"{base:,.0f} draws/s")
    position = _rate(positions, DRAWS)
    figure("HMAC_DRBG position 1..8", f"{position:,.0f} draws/s")
    figure(
        "  position draws / secrets.randbelow(8)",
        f"{position / base:.3f}x",
        f">= {GOAL_RATIO}x",
        position / base >= GOAL_RATIO,
    )
    rolls = _rate(dice, DRAWS)
    figure("HMAC_DRBG three dice", f"{rolls:,.0f} draws/s")
    figure("  three dice / secrets.randbelow(8)", f"{rolls / base:.3f}x")
    urandom = _rate(stream_baseline, STREAM_BYTES) / 1e6
    drbg_rate = _rate(stream, STREAM_BYTES) / 1e6
    figure("os.urandom raw stream (baseline)", f"{urandom:,.1f} MB/s")
    figure("HMAC_DRBG raw stream (rng-stream)", f"{drbg_rate:,.1f} MB/s")
    figure("  HMAC_DRBG stream / os.urandom", f"{drbg_rate / urandom:.3f}x")


if __name__ == "__main__":
    main()
