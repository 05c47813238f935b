"""Statistical tests of the RNG at 99% confidence (N.J.A.C. 13:69E-1.28G, 25 CFR 547.14, AGCO 5.1).

Run: ``.venv/bin/python bench/rng_stats.py [--draws N]`` (default 10^6; about a minute on a
desktop core, several on a Pi). Not part of ``make bench`` (its name has no ``bench_`` prefix)
nor of CI: a correct generator fails each test 1% of the time by definition.

The draws take the table's own path: sessions of 500 rounds, each instantiated from fresh OS
entropy with the table's personalization, each draw with its round identity as additional
input, scaled by simple discard. Tests and their pass rule:

- chi-square goodness of fit, statistic < the 99% quantile of chi-square with k-1 degrees of
  freedom: positions over 8 (tiles) and 7 (poker); dice: each die's face over 6, the total over
  3..18 against its exact 216-outcome distribution, the 216 outcomes;
- NIST SP 800-22 Rev. 1a frequency (mono-bit) test §2.1 and runs test §2.3 on 100 raw DRBG
  sequences of 10^6 bits, judged as §4.2 says: the proportion passing at 0.01 within its
  3-sigma interval, and the P-values uniform. (One sequence alone fails 1% of the time.)

The chi-square quantiles are computed here (regularized incomplete gamma, bisection) and checked
against published table values, and the bit tests against SP 800-22's worked examples, before
anything is tested.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from controller.core.dice_monitor import chi_square_survival
from controller.core.drbg import HmacDrbg, bound_source, number_in_range, virtual_roll
from controller.core.rng_replay import personalization_for, round_identity

_T = TypeVar("_T")
_K = TypeVar("_K")

ALPHA = 0.01
SESSION_ROUNDS = 500
SEQUENCES = 100  # SP 800-22 §4.2: m sequences of n bits
SEQUENCE_BITS = 1_000_000


# --- chi-square distribution ----------------------------------------------------------------


def chi2_cdf(x: float, df: int) -> float:
    """P(X < x), from the chi-square survival the dice monitor uses (one implementation)."""
    return 1 - chi_square_survival(x, df)


def chi2_critical(df: int, alpha: float = ALPHA) -> float:
    """The (1 - alpha) quantile of chi-square with ``df`` degrees of freedom."""
    low, high = 0.0, df + 20 * math.sqrt(2 * df) + 50
    for _ in range(200):
        mid = (low + high) / 2
        if chi2_cdf(mid, df) < 1 - alpha:
            low = mid
        else:
            high = mid
    return (low + high) / 2


# Published 99% points (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.4).
_TABLE_99 = {5: 15.086, 6: 16.812, 7: 18.475, 15: 30.578, 100: 135.807}


def _check_quantiles() -> None:
    for df, expected in _TABLE_99.items():
        got = chi2_critical(df)
        if abs(got - expected) > 0.002:
            sys.exit(f"chi-square quantile for df {df}: computed {got:.4f}, table {expected}")


# --- the draws ------------------------------------------------------------------------------


def _sessions(table: str) -> Iterator[tuple[HmacDrbg, str]]:
    while True:
        session = os.urandom(8).hex()
        drbg = HmacDrbg(os.urandom(32), os.urandom(16), personalization_for(table, session))
        yield drbg, session


def _draws(n: int, draw: Callable[[HmacDrbg, bytes], _T]) -> Iterator[_T]:
    made = 0
    for drbg, session in _sessions("table-1"):
        for round_number in range(1, SESSION_ROUNDS + 1):
            if made == n:
                return
            yield draw(drbg, round_identity("table-1", session, round_number, 1))
            made += 1


def _position_draw(positions: int) -> Callable[[HmacDrbg, bytes], int]:
    def draw(drbg: HmacDrbg, identity: bytes) -> int:
        return number_in_range(positions, bound_source(drbg, identity))

    return draw


# --- tests ----------------------------------------------------------------------------------

RESULTS: list[bool] = []


def _report(name: str, statistic: float, critical: str, passed: bool, unit: str) -> None:
    RESULTS.append(passed)
    verdict = "PASS" if passed else "FAIL"
    print(f"  {verdict}  {name:46s} {unit} = {statistic:10.4f}   {critical}")


def chi_square(name: str, counts: Mapping[_K, int], expected: Mapping[_K, float]) -> None:
    statistic = sum((counts.get(k, 0) - e) ** 2 / e for k, e in expected.items())
    df = len(expected) - 1
    critical = chi2_critical(df)
    _report(
        name,
        statistic,
        f"critical {critical:.3f} (df {df}, 99%)",
        statistic < critical,
        "chi2",
    )


def monobit_p(bits: int, n: int) -> float:
    """SP 800-22 §2.1 frequency (mono-bit) test: the P-value of one n-bit sequence."""
    s_obs = abs(2 * bits.bit_count() - n) / math.sqrt(n)
    return math.erfc(s_obs / math.sqrt(2))


def runs_p(bits: int, n: int) -> float:
    """SP 800-22 §2.3 runs test: the P-value (0.0 when the frequency pre-test fails)."""
    pi = bits.bit_count() / n
    if abs(pi - 0.5) >= 2 / math.sqrt(n):
        return 0.0
    v_obs = ((bits ^ (bits >> 1)) & ((1 << (n - 1)) - 1)).bit_count() + 1
    return math.erfc(abs(v_obs - 2 * n * pi * (1 - pi)) / (2 * math.sqrt(2 * n) * pi * (1 - pi)))


def _self_check_bit_tests() -> None:
    """The worked examples of SP 800-22 Rev. 1a §2.1.8 and §2.3.8."""
    if abs(monobit_p(0b1011010101, 10) - 0.527089) > 1e-6:
        sys.exit("mono-bit test does not reproduce SP 800-22 §2.1.8")
    if abs(runs_p(0b1001101011, 10) - 0.147232) > 1e-6:
        sys.exit("runs test does not reproduce SP 800-22 §2.3.8")


def bit_tests(name: str, p_values: list[float]) -> None:
    """SP 800-22 §4.2: the proportion of sequences passing at alpha must lie within
    (1 - alpha) ± 3 sqrt(alpha (1 - alpha) / m), and the P-values must be uniform (chi-square
    over ten bins, P-value of the P-values ≥ 0.0001)."""
    m = len(p_values)
    proportion = sum(p >= ALPHA for p in p_values) / m
    low = (1 - ALPHA) - 3 * math.sqrt(ALPHA * (1 - ALPHA) / m)
    _report(
        f"{name}: proportion passing",
        proportion,
        f"minimum {low:.4f} ({m} sequences of {SEQUENCE_BITS:,} bits)",
        proportion >= low,
        "prop",
    )
    bins = Counter(min(int(p * 10), 9) for p in p_values)
    chi2 = sum((bins.get(b, 0) - m / 10) ** 2 / (m / 10) for b in range(10))
    p_uniform = 1 - chi2_cdf(chi2, 9)
    _report(f"{name}: P-values uniform", p_uniform, "P >= 0.0001", p_uniform >= 0.0001, "P")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1_000_000)
    n = parser.parse_args().draws
    _check_quantiles()
    _self_check_bit_tests()
    started = time.perf_counter()
    print(
        f"rng statistics: {n:,} draws per test, sessions of {SESSION_ROUNDS} rounds, alpha {ALPHA}"
    )

    for positions, game in ((8, "tiles"), (7, "poker")):
        counts = Counter(_draws(n, _position_draw(positions)))
        chi_square(
            f"positions 1..{positions} ({game})",
            counts,
            dict.fromkeys(range(1, positions + 1), n / positions),
        )

    rolls = list(_draws(n, lambda d, i: virtual_roll(bound_source(d, i))))
    for index, colour in enumerate(("red", "first blue", "second blue")):
        faces = Counter(roll.faces[index] for roll in rolls)
        chi_square(f"dice: {colour} die faces", faces, dict.fromkeys(range(1, 7), n / 6))
    ways = Counter(a + b + c for a in range(1, 7) for b in range(1, 7) for c in range(1, 7))
    totals = Counter(roll.total for roll in rolls)
    chi_square("dice: totals 3..18", totals, {t: n * w / 216 for t, w in ways.items()})
    outcomes = Counter(roll.faces for roll in rolls)
    every = [(a, b, c) for a in range(1, 7) for b in range(1, 7) for c in range(1, 7)]
    chi_square("dice: the 216 outcomes", outcomes, dict.fromkeys(every, n / 216))

    monobit_values, runs_values = [], []
    for _ in range(SEQUENCES):
        drbg, _ = next(_sessions("table-1"))
        raw = b"".join(drbg.generate(65536) for _ in range(SEQUENCE_BITS // 8 // 65536 + 1))
        bits = int.from_bytes(raw[: SEQUENCE_BITS // 8], "big")
        monobit_values.append(monobit_p(bits, SEQUENCE_BITS))
        runs_values.append(runs_p(bits, SEQUENCE_BITS))
    bit_tests("mono-bit", monobit_values)
    bit_tests("runs", runs_values)

    elapsed = time.perf_counter() - started
    print(f"{sum(RESULTS)}/{len(RESULTS)} passed in {elapsed:.0f} s")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
