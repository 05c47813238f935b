"""How the suite is run in parallel (``make test``: ``pytest -n auto``, pytest-xdist).

``-n auto`` starts two workers per core (4 on 2 cores): about half of the suite's wall time is
spent waiting on real timers (sensor timeouts, shakes, debouncing, the simulated crew, the
display going offline) with the CPU idle, while its timing tests (a shake's pattern against its
motor limit, a late sensor reply against the timeout) need the CPU when their timers fire.
Measured on 2 cores: 3 workers 134-152 s, 4 workers 126 s with the CPU 74 % busy, 5 workers
135 s and a handshake that missed its 0.2 s reply timeout.
Each worker is handed one test at a time (``--dist load --maxschedchunk 1``), the tests marked
``slow`` first, so that the longest ones start at once and the short ones fill the gaps.
``PYTEST_XDIST_AUTO_NUM_WORKERS`` (digits) sets another count.

Every test is safe beside any other: it writes under its own ``tmp_path`` (the stateful tests
in a fresh directory in /dev/shm; the browser tests' screenshots to test-output/display/, a
name each), takes the ports the system gives it, changes the environment only through
``monkeypatch``, and signals only the processes it started.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# No test depends on the machine's speed (the suite passes with a load average of 8 on 2 cores):
# hypothesis's per-example deadline (200 ms by default) is off for every test; a property that
# hangs is caught by pytest-timeout's guard (pyproject.toml), not by a deadline.
settings.register_profile("paigow", deadline=None)
settings.load_profile("paigow")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: none without it (-p no:xdist)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if chosen.isascii() and chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    return max(2, 2 * len(os.sched_getaffinity(0)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow first


NO_SYSTEM_FONTS = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<!-- Of the machine's fonts this fontconfig sees DejaVu only (tests/conftest.py) -->
<fontconfig>{dirs}<cachedir>{cache}</cachedir></fontconfig>
"""
# The one family every Debian with fontconfig has (fontconfig-config depends on
# fonts-dejavu-core). Chromium needs one system font to start laying out a page: with none at
# all, web fonts loaded while it lays out the first frame fail at random.
DEJAVU = Path("/usr/share/fonts/truetype/dejavu")


@pytest.fixture(scope="session")
def no_system_fonts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a browser that sees none of the machine's Noto fonts: a fontconfig
    file whose only font folder is DejaVu's, as on a Debian without fonts-noto-core or
    fonts-noto-cjk. The page brings its own fonts (controller/display/assets/fonts), so it is
    laid out the same here as on a machine with any fonts installed (test_display_fonts.py
    checks that no text is drawn in a face of the machine's)."""
    folder = tmp_path_factory.mktemp("fontconfig")
    config = folder / "fonts.conf"
    dirs = f"<dir>{DEJAVU}</dir>" if DEJAVU.is_dir() else ""
    config.write_text(NO_SYSTEM_FONTS.format(dirs=dirs, cache=folder / "cache"), encoding="utf-8")
    return {**os.environ, "FONTCONFIG_FILE": str(config)}


@pytest.fixture(scope="module")
def browser(no_system_fonts: dict[str, str]) -> Iterator[Any]:
    """Debian's chromium through Playwright (never a downloaded browser), one per module of the
    browser tests, launched with the display tests' flags
    (tests/support/browser.py) and no system fonts (no_system_fonts)."""
    from playwright.sync_api import sync_playwright
    from support.browser import ARGS, CHROMIUM

    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM, args=ARGS, headless=True, env=no_system_fonts
        )
        yield launched
        launched.close()


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """Commands configure the root logger for their process; undo it after the test (the CLI
    tests use it for every test: ``pytestmark = pytest.mark.usefixtures(...)``)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


@pytest.fixture
def factory() -> Iterator[Any]:
    """gpiozero's MockFactory with PWM-capable pins, closed after the test."""
    from gpiozero.pins.mock import MockFactory, MockPWMPin

    f = MockFactory(pin_class=MockPWMPin)
    yield f
    f.close()


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[Any]:
    """A running mosquitto of the test's own (tests/support/fleet_broker.py); killed at the end,
    whatever the test did to it."""
    from support.fleet_broker import Broker

    b = Broker(tmp_path / "broker")
    b.start()
    try:
        yield b
    finally:
        b.kill()
