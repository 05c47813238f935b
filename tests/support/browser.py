"""Shared by the browser tests: chromium's flags, the page's waits, screenshots, the dice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.core.config import BetLimits, LimitsConfig
from controller.core.dealing import DeliveryStyle
from controller.core.dice import NoRollReason

CHROMIUM = "/usr/bin/chromium"


ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# How long a wait for the page may take before the test fails: a bound on liveness, not a
# measure of speed (bench/ measures that), wide enough for a CI machine under full load.
WAIT_MS = 30_000


SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "display"


LIMITS = LimitsConfig(currency="USD", table=BetLimits(25, 5000), sum=BetLimits(5, 500))


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def wait_current(page: Any, screen: str, round_number: int, *, timeout_ms: int) -> None:
    page.wait_for_function(
        "([s, r]) => { const l = window.displayLog; const e = l && l[l.length - 1];"
        " return e && e.screen === s && e.round === r; }",
        arg=[screen, round_number],
        timeout=timeout_ms,
    )


# Totals 3..18 over a shift of 60 rolls. Against 60 x ways/216: 18 (1 seen, 0.28 expected) is
# 3.6 times its chance, 4 is 2.4 times, 11 is 1.6 times; 16, 17 and 3 are not seen at all (the
# total expected most often first: 1.67, 0.83, 0.28).
SHIFT_TOTALS = [0, 2, 2, 3, 4, 6, 7, 6, 12, 5, 6, 4, 2, 0, 0, 1]


SHIFT_RED = [10, 12, 8, 9, 11, 10]


SHIFT_BLUE = [20, 22, 18, 19, 21, 20]


def stats_payload(*, alarm: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``stats`` of a bets-open screen, as the data contract of issue 15 has it."""
    return {
        "shift": {"red": SHIFT_RED, "blue": SHIFT_BLUE, "total": SHIFT_TOTALS},
        "set": {
            "red": [30, 31, 29, 33, 27, 60],
            "blue": [70, 71, 69, 72, 68, 70],
            "total": [1, 3, 6, 10, 14, 20, 24, 27, 27, 24, 20, 14, 10, 6, 3, 1],
        },
        "monitor": {
            "rolls": 210,
            "tests": [
                {"test": "red", "log_e": "7.020", "threshold": "5.298", "face": 6},
                {"test": "blue", "log_e": "1.234", "threshold": "5.809", "face": 4},
                {"test": "total", "log_e": "-0.512", "threshold": "6.215", "face": None},
            ],
            "p_values": {"red": "0.0012", "blue": "0.9981", "total": "0.7342"},
        },
        "alarm": alarm,
        "locks": False,
    }


DICE = {"set": "D-0042", "warning": "23 h on the table: replace the dice within the hour"}


# Eleven rounds for recall (AGCO 13.1.1): banks, styles, no rolls and a correction among them.
RECALL_PLAYS: list[tuple[tuple[int, tuple[int, int]], dict[str, Any]]] = [
    ((3, (4, 5)), {"bank_seat": 2, "style": DeliveryStyle.JUNG_QUAT}),
    ((6, (6, 2)), {"no_rolls": [NoRollReason.NOT_FLAT]}),
    ((1, (1, 1)), {}),
    ((2, (5, 6)), {"corrected": (4, (4, 4))}),  # the sensor read 4, 4 4: a misread
    ((6, (6, 6)), {"style": DeliveryStyle.STANDARD}),
    ((4, (1, 2)), {}),
    ((5, (3, 1)), {"bank_seat": 5}),
    ((2, (2, 3)), {}),
    ((1, (6, 3)), {"no_rolls": [NoRollReason.DIE_OUT, NoRollReason.LOW_CONFIDENCE]}),
    ((5, (4, 6)), {}),
    ((3, (3, 2)), {}),
]
