"""The supervisor's view in Debian's chromium (Playwright, as
tests/browser/test_display_browser.py):
it scales with its screen (no scrolling, nothing outside the viewport, no text over another or
cut off, at 800x480, 1280x720, 1920x1080 and 3840x2160), it shows the table's status as
``paigow-controller status`` does (each fault with its code, meaning, who clears it and how),
and its LIVE indicator is red while a fault stops play, amber for a notice, green otherwise.

Screenshots go to test-output/display/ (git-ignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import WAIT_MS, shot
from support.display_table import SUPERVISOR, CoreTable

from controller.core.faults import BY_NAME
from controller.core.state import CorrectionReason, Event, Fault, VoidReason

pytestmark = pytest.mark.browser

VIEWPORTS = [(800, 480), (1280, 720), (1920, 1080), (3840, 2160)]
SUPPORT = Path(__file__).resolve().parents[1] / "support"
MEASURE = (SUPPORT / "display_measure.js").read_text(encoding="utf-8")
GREEN = "rgb(63, 223, 106)"  # the LIVE indicator's colour when all is well


@pytest.fixture
def busy(tmp_path: Path) -> Iterator[CoreTable]:
    """A table with as much on the supervisor's view as it holds: six corrections and voids
    with who made them and notes, the dice monitor's counts, the meters, bets open."""
    t = CoreTable(tmp_path)
    t.start()
    for k in range(3):
        t.shake(3, (4, 5))
        t.correct(3, (4, 6), CorrectionReason.PATRON_COMPLAINT)
        t.send(Event.CLOSE_ROUND)
        t.shake(2, (2, 2))
        t.send(
            Event.VOID_ROUND,
            supervisor=True,
            employee=SUPERVISOR,
            void_reason=VoidReason.DEALER_ERROR,
            round_meant=t.machine.context.round_number,
            detail=f"seat {k + 2} was dealt from the wrong stack, the patron agreed at once",
        )
    yield t
    t.close()


def _open(browser: Any, url: str, width: int, height: int) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.on("pageerror", lambda exc: pytest.fail(f"page error: {exc}"))
    page.goto(url + "supervisor")
    page.wait_for_selector("#live:not([hidden])", timeout=WAIT_MS)
    return page


def _fits(page: Any) -> list[str]:
    found: dict[str, Any] = page.evaluate(MEASURE)
    problems = list(found["problems"])
    scroll = page.evaluate(
        "() => [document.scrollingElement.scrollWidth, document.scrollingElement.scrollHeight,"
        " innerWidth, innerHeight]"
    )
    if scroll[0] > scroll[2] or scroll[1] > scroll[3]:
        problems.append(f"the page scrolls: {scroll[0]}x{scroll[1]} in {scroll[2]}x{scroll[3]}")
    small = [t for t in found["texts"] if t["size"] < 9.5]
    problems.extend(f"text under 9.5 px: {t['text']!r} {t['size']:.1f}" for t in small)
    return problems


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
def test_the_supervisors_view_fits_its_screen_with_and_without_faults(
    browser: Any, busy: CoreTable, width: int, height: int
) -> None:
    page = _open(browser, busy.display.url, width, height)
    try:
        for selector in ("#sup-interventions li:nth-child(6)", "#sup-counts table"):
            page.wait_for_selector(selector, state="attached", timeout=WAIT_MS)
        shot(page, f"supervisor-{width}x{height}")
        assert _fits(page) == [], f"{width}x{height} bets open"
        busy.send(Event.FAULT, fault=Fault.RNG_FAILURE, detail="the DRBG's known-answer test")
        busy.send(Event.TAMPER)
        page.wait_for_selector("#sup-fault-list li:nth-child(2)", timeout=WAIT_MS)
        shot(page, f"supervisor-faults-{width}x{height}")
        assert _fits(page) == [], f"{width}x{height} two faults"
    finally:
        page.context.close()


def test_live_is_red_in_a_fault_with_each_code_and_how_to_clear_it(
    browser: Any, busy: CoreTable
) -> None:
    page = _open(browser, busy.display.url, 1280, 720)
    try:
        page.wait_for_function(
            "() => document.getElementById('status-line').textContent === 'LIVE'",
            timeout=WAIT_MS,
        )
        line = page.locator("#status-line")
        assert line.get_attribute("data-level") == "ok"
        assert line.evaluate("e => getComputedStyle(e).color") == GREEN
        assert page.is_hidden("#sup-faults")

        busy.send(Event.FAULT, fault=Fault.RNG_FAILURE, detail="the DRBG's known-answer test")
        busy.send(Event.TAMPER)
        page.wait_for_selector("#sup-fault-list li:nth-child(2)", timeout=WAIT_MS)
        assert line.text_content() == "PLAY STOPPED — F01 F06"
        assert line.get_attribute("data-level") == "stopped"
        colour = line.evaluate("e => getComputedStyle(e).color")
        background = line.evaluate("e => getComputedStyle(e).backgroundColor")
        assert GREEN not in (colour, background)
        assert "rgb(255, 82, 82)" in (colour, background)  # red
        assert page.text_content("#sup-faults-title") == "PLAY STOPPED — 2 FAULTS"
        items = page.locator("#sup-fault-list li")
        assert [items.nth(i).get_attribute("data-code") for i in range(2)] == ["F01", "F06"]
        for i, name in enumerate(("tamper", "rng_failure")):
            row = BY_NAME[name]
            item = items.nth(i)
            assert item.locator(".sup-fault-meaning").text_content() == row.meaning
            assert item.locator(".sup-fault-how").text_content() == row.how
            assert item.locator(".sup-fault-who").text_content() == "clears: supervisor key"
        shot(page, "supervisor-live-red")

        # cleared: the tamper loop closed and the supervisor's key; green again
        busy.send(Event.SECURED)
        busy.send(Event.CLEAR_FAULT, supervisor=True)
        page.wait_for_selector("#sup-faults", state="hidden", timeout=WAIT_MS)
        assert line.text_content() == "LIVE"
        assert line.evaluate("e => getComputedStyle(e).color") == GREEN
    finally:
        page.context.close()


def test_a_notice_turns_live_amber_and_play_goes_on(browser: Any, tmp_path: Path) -> None:
    """The dice's last hour (a warning) and an unsynchronised clock: amber, never green, and
    the clock's code with its words; play is not stopped."""
    t = CoreTable(tmp_path, synchronised=False)
    try:
        t.start()
        page = _open(browser, t.display.url, 1280, 720)
        try:
            page.wait_for_selector("#sup-fault-list li", timeout=WAIT_MS)
            line = page.locator("#status-line")
            assert line.get_attribute("data-level") == "notice"
            assert line.text_content() == "LIVE — ATTENTION"
            colour = line.evaluate("e => getComputedStyle(e).color")
            background = line.evaluate("e => getComputedStyle(e).backgroundColor")
            assert GREEN not in (colour, background)
            assert "rgb(255, 176, 32)" in (colour, background)  # amber
            assert page.locator("#sup-fault-list li").get_attribute("data-code") == "F20"
            assert page.text_content("#sup-faults-title") == "NOTICE — PLAY GOES ON"
        finally:
            page.context.close()
    finally:
        t.close()
