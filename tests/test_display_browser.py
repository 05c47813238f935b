"""The table page in Debian's chromium, driven through Playwright (never a downloaded browser).

Screenshots go to test-output/display/ (git-ignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from display_table import PAYTABLES, Table, start_display
from playwright.sync_api import sync_playwright

from controller.core.dealing import DeliveryStyle, dealing_plan
from controller.core.dice import NoRollReason, Roll
from controller.core.position import DEALER, Game
from controller.core.records import RecordKind
from controller.core.result import result_of_roll
from controller.core.state import Screen

pytestmark = pytest.mark.browser

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
SHOTS = Path(__file__).resolve().parents[1] / "test-output" / "display"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def table(tmp_path: Path) -> Iterator[Table]:
    t = Table(tmp_path)
    t.display = start_display(t.log)
    t.open_round()
    yield t
    t.close()


@pytest.fixture
def page(browser: Any, table: Table) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    assert table.display is not None
    p.goto(table.display.url)
    wait_current(p, "ready", 1, timeout_ms=5000)
    yield p
    context.close()
    assert errors == []


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def wait_current(page: Any, screen: str, round_number: int, *, timeout_ms: int) -> None:
    page.wait_for_function(
        "([s, r]) => { const l = window.displayLog; const e = l[l.length - 1];"
        " return e && e.screen === s && e.round === r; }",
        arg=[screen, round_number],
        timeout=timeout_ms,
    )


def rendered(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("window.displayLog")  # type: ignore[no-any-return]


def test_a_result_appears_after_its_commit_naming_its_record(page: Any, table: Table) -> None:
    """Write-ahead, as the page sees it: the result it shows carries the sequence number of
    the committed record it came from. (How fast it appears is measured in bench/.)"""
    table.record(RecordKind.NO_MORE_BETS, round=1, bank="dealer", mode="shaker")
    table.show(Screen.BETS_CLOSED, round=1, attempt=1)
    wait_current(page, "bets_closed", 1, timeout_ms=5000)
    seq = table.result(3, (4, 5))  # commits, then shows, as the daemon does
    wait_current(page, "result", 1, timeout_ms=5000)
    shown = rendered(page)[-1]
    assert shown["id"] == str(seq)
    assert page.text_content("#total") == "12"
    assert page.text_content("#starting-label") == "SEAT 3"
    assert page.get_attribute(".spot.first", "data-position") == "seat 3"
    assert page.locator("#dice .die-red").count() == 1
    assert page.locator("#dice .die-blue").count() == 2
    assert page.locator("#dice .die-red circle").count() == 3  # pips
    assert page.is_hidden("#offline")
    shot(page, "result")


def test_a_no_roll_shows_its_reason_in_plain_words(page: Any, table: Table) -> None:
    table.no_roll(NoRollReason.NOT_FLAT)
    wait_current(page, "no_roll", 1, timeout_ms=5000)
    assert page.text_content("#headline") == "NO ROLL — a die is not flat"
    assert page.is_hidden("#outcome")  # no dice, no total: nothing that looks like a result
    shot(page, "no-roll")


def test_a_fault_is_shown_with_its_causes(page: Any, table: Table) -> None:
    table.record(RecordKind.FAULT, round=1, attempt=1, fault="sensor_lost", detail="", state="x")
    table.show(Screen.FAULT, faults=["sensor_lost", "tamper"])
    wait_current(page, "fault", 1, timeout_ms=5000)
    assert page.text_content("#headline") == "FAULT — PLAY STOPPED"
    assert page.locator("#faults li").all_text_contents() == [
        "the dice sensor is disconnected",
        "the shaker was moved or opened",
    ]
    shot(page, "fault")


def test_rng_number_and_session_commitment(page: Any, table: Table) -> None:
    table.record(RecordKind.RNG_COMMIT, session="s-0001", commitment="ab" * 32)
    table.show(Screen.READY, round=1, rng_session="s-0001", rng_commitment="ab" * 32)
    table.record(RecordKind.RNG_DRAW, round=1, attempt=1, number=6)
    table.rng_result(6)
    wait_current(page, "result", 1, timeout_ms=5000)
    assert page.text_content("#rng-value") == "6"
    assert page.text_content("#starting-label") == "SEAT 5"
    assert page.text_content("#commit-session") == "s-0001"
    assert page.text_content("#commit-value").replace(" ", "") == "ab" * 32
    shot(page, "rng-result")


HOSTILE = '621a.11(b) <img src=x onerror="window.pwned=1"><b>&amp;</b>'


def test_the_bank_its_refusal_and_the_delivery_style_are_shown_as_text(
    page: Any, table: Table
) -> None:
    """621a.11(b), (c): who banks, and why the rules refuse it; 621a.11(i): the style chosen."""
    table.show(Screen.READY, round=1, bank="seat 3", bank_refused=HOSTILE)
    page.wait_for_function(
        "() => document.getElementById('bank-line').textContent === 'Bank: seat 3'"
    )
    assert page.is_visible("#bank-line")
    assert page.is_visible("#bank-refused")
    assert page.text_content("#bank-refused") == "BANK REFUSED — " + HOSTILE
    assert page.locator("#bank-refused *").count() == 0  # shown as text, never parsed
    assert page.evaluate("window.pwned") is None
    shot(page, "bank-refused")
    table.show(Screen.READY, round=1, bank="dealer")
    page.wait_for_function(
        "() => document.getElementById('bank-line').textContent === 'Bank: dealer'"
    )
    assert page.is_hidden("#bank-refused")
    for style, words in [
        ("jung-quat", "Jung Quat"),
        ("standard", "Standard (621a.8(d))"),
        ("house-way-left", "House Way From the Left"),
        ("cup-say-left", "Cup Say From the Left"),
        ("cup-say-right", "Cup Say From the Right"),
    ]:
        table.show(Screen.BETS_CLOSED, round=1, attempt=1, delivery_style=style)
        page.wait_for_function(
            "w => document.getElementById('delivery-style-name').textContent === w", arg=words
        )
        assert page.is_visible("#delivery-style")
        assert page.is_hidden("#bank-line")
    shot(page, "delivery-style")


def test_a_tiles_result_shows_its_dealing_plan_beside_the_result(page: Any, table: Table) -> None:
    """621a.8(d), 621a.9: the eight positions in dealing order with their stacks, clear of the
    dice, the total and the first hand."""
    roll = Roll(3, (4, 5))
    result = result_of_roll(Game.TILES, roll, bank_seat=None, paytables=PAYTABLES)
    plan = dealing_plan(Game.TILES, DeliveryStyle.CUP_SAY_RIGHT, result.position)
    table.record(RecordKind.RESULT, round=1, attempt=1, **result.as_record())
    table.show(
        Screen.RESULT,
        round=1,
        attempt=1,
        result=result.as_record(),
        dealing_plan=plan.as_record(),
    )
    wait_current(page, "result", 1, timeout_ms=5000)
    assert page.text_content("#dealing-style") == "Cup Say From the Right"
    lines = page.locator("#dealing-plan .delivery").all_text_contents()
    assert lines[:3] == [
        "seat 3: 1 top + 2 top",
        "seat 4: 1 bottom + 2 bottom",
        "seat 5: 3 top + 4 top",
    ]
    assert len(lines) == 8
    assert page.text_content("#starting-label") == "SEAT 3"
    plan_box = page.locator("#dealing").bounding_box()
    for shown in ("#dice", "#total-box", "#starting", "#wagers"):
        box = page.locator(shown).bounding_box()
        assert not overlaps(plan_box, box), shown
    assert plan_box["y"] + plan_box["height"] <= page.locator(".trend").bounding_box()["y"]
    shot(page, "dealing-plan")

    standard = dealing_plan(Game.TILES, DeliveryStyle.STANDARD, DEALER)
    table.show(
        Screen.RESULT,
        round=1,
        attempt=1,
        result=result.as_record(),
        dealing_plan=standard.as_record(),
    )
    page.wait_for_function(
        "() => document.getElementById('dealing-style').textContent === 'Standard (621a.8(d))'"
    )
    assert page.locator("#dealing-plan .delivery").all_text_contents()[0] == "dealer: 1"
    table.show(Screen.NO_ROLL, round=1, attempt=2, reason="not_flat", words="a die is not flat")
    wait_current(page, "no_roll", 1, timeout_ms=5000)
    assert page.is_hidden("#dealing")


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_stopping_the_server_turns_the_page_offline_within_five_seconds(
    page: Any, table: Table
) -> None:
    table.result(6, (6, 2))
    wait_current(page, "result", 1, timeout_ms=5000)
    assert table.display is not None
    table.display.close()
    wait_current(page, "offline", None, timeout_ms=5000)  # type: ignore[arg-type]
    assert page.is_visible("#offline")
    assert page.is_hidden("#live")
    assert page.text_content("#offline-title") == "OFFLINE — NO RESULT"
    shot(page, "offline")


def test_a_stream_that_goes_silent_turns_the_page_offline(page: Any, table: Table) -> None:
    table.result(2, (6, 1))
    wait_current(page, "result", 1, timeout_ms=5000)
    assert table.display is not None
    since = len(rendered(page))
    table.display.heartbeat_s = 60.0  # the connection stays open but nothing arrives
    page.wait_for_function(
        "n => window.displayLog.slice(n).some(e => e.screen === 'offline')", arg=since, timeout=5000
    )
    # It then reconnects; the server answers with a fresh snapshot, which alone makes it live.


def test_a_restart_catches_up_and_never_shows_an_older_result(
    page: Any, table: Table, tmp_path: Path
) -> None:
    table.play_round(3, (4, 5))  # round 1
    wait_current(page, "ready", 2, timeout_ms=5000)
    assert table.display is not None
    port = table.display.http_address[1]
    table.display.close()
    wait_current(page, "offline", None, timeout_ms=5000)  # type: ignore[arg-type]
    # While the display is down the table goes on: round 2 closes, round 3 has a result.
    table.display = None
    table.play_round(6, (6, 2))
    table.result(5, (5, 5))
    offline_at = len(rendered(page))
    table.display = start_display(table.log, http_port=port)
    # The restarted controller shows its recovered screen: round 3's committed result.
    table.show(Screen.RESULT, round=3, attempt=1, result=recorded_result(table))
    wait_current(page, "result", 3, timeout_ms=10_000)
    after = rendered(page)[offline_at:]
    assert [(e["screen"], e["round"]) for e in after] == [("result", 3)]
    assert page.text_content("#round") == "3"
    assert page.text_content("#total") == "15"
    rounds = [c.split("\n")[0] for c in page.locator("#trend li .top").all_inner_texts()]
    assert [r.split()[0] for r in rounds] == ["R3", "R2", "R1"]
    shot(page, "after-restart")


def recorded_result(table: Table) -> dict[str, Any]:
    (record,) = table.display.log_reader.latest_of({"result"}, limit=1)  # type: ignore[union-attr]
    data = record.entry()["data"]
    return {k: v for k, v in data.items() if k not in ("round", "attempt")}


def test_an_rng_round_of_the_real_control_loop_ends_on_its_number(
    browser: Any, tmp_path: Path
) -> None:
    """The daemon's own loop, log, RNG session and display server: the page shows DRAWING,
    then the result with the number, and stays on it (the number is never overwritten)."""
    from controller.app.adapters import NoShaker
    from controller.app.loop import ControlLoop, Ports
    from controller.core.config import Config
    from controller.core.position import Game
    from controller.core.record_data import config_loaded_data
    from controller.core.state import Event, Mode, Occurrence, RngMode, RoundMachine, RoundSettings
    from controller.rng.session import RngPort, RngSessionManager
    from drivers.safety import FaultLatch

    class Lamps:
        def __init__(self) -> None:
            self.shown: list[Screen] = []

        def show_status(
            self, screen: Screen, *, player_bank: bool = False, dice_alarm: bool = False
        ) -> None:
            self.shown.append(screen)

        def drive_safe(self) -> None:
            return None

        def close(self) -> None:
            return None

    table = Table(tmp_path)
    table.display = display = start_display(table.log)
    lamps = Lamps()
    manager = RngSessionManager(
        state_dir=tmp_path,
        log=table.log,
        table="table-1",
        game=Game.TILES,
        mode=RngMode.POSITION,
        max_rounds=10,
        records=[],
    )
    loop = ControlLoop(
        RoundMachine(RoundSettings(mode=Mode.RNG)),
        Ports(
            log=table.log,
            display=display,
            panel=lamps,
            shaker=NoShaker(),
            latch=FaultLatch(),
            rng=RngPort(manager),
        ),
    )
    loop.power_on(config=config_loaded_data(Config()))
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = context.new_page()
        page.goto(display.url)
        wait_current(page, "ready", 1, timeout_ms=5000)
        loop.dispatch(Occurrence(Event.NO_MORE_BETS, at=1))
        wait_current(page, "result", 1, timeout_ms=5000)
        (draw,) = [r.data for r in table.log.records() if r.kind == RecordKind.RNG_DRAW]
        assert page.text_content("#rng-value") == str(draw["number"])
        assert "DRAWING" not in (page.text_content("#headline") or "")
        screens = [e["screen"] for e in rendered(page)]
        assert screens[-2:] == ["drawing", "result"]
        assert lamps.shown[-1] is Screen.RESULT
        shot(page, "rng-round-of-the-loop")
    finally:
        context.close()
        table.close()
