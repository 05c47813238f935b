"""The table page in Debian's chromium, driven through Playwright (never a downloaded browser).

Screenshots go to test-output/display/ (git-ignored)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.browser import (
    DICE,
    LIMITS,
    RECALL_PLAYS,
    SHIFT_BLUE,
    SHIFT_RED,
    WAIT_MS,
    shot,
    stats_payload,
    wait_current,
)
from support.display_table import (
    OPENED,
    PAYTABLES,
    RNG_COMMIT,
    SUPERVISOR,
    CoreTable,
    Table,
    rng_draw,
    start_display,
)
from support.rng_fakes import AUDITOR_KEY

from controller.audit.recall import recall
from controller.core.config import BetLimits, LimitsConfig
from controller.core.dealing import DeliveryStyle, dealing_plan
from controller.core.dice import NoRollReason, Roll
from controller.core.position import DEALER, Game
from controller.core.records import RecordKind
from controller.core.result import result_of_roll
from controller.core.state import (
    ActionKind,
    BankSeatKey,
    CorrectionReason,
    DiceSet,
    Event,
    LidClosed,
    Mode,
    NoMoreBets,
    RngMode,
    RoundContext,
    RoundMachine,
    RoundSettings,
    Screen,
    VoidReason,
    occurrence,
)
from controller.web.sse import sse

pytestmark = pytest.mark.browser


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
    wait_current(p, "ready", 1, timeout_ms=WAIT_MS)
    yield p
    context.close()
    assert errors == []


def rendered(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("window.displayLog")  # type: ignore[no-any-return]


def test_a_result_appears_after_its_commit_naming_its_record(page: Any, table: Table) -> None:
    """Write-ahead, as the page sees it: the result it shows carries the sequence number of
    the committed record it came from. (How fast it appears is measured in bench/.)"""
    table.record(RecordKind.NO_MORE_BETS, round=1, bank="dealer", mode="shaker")
    table.show(Screen.BETS_CLOSED, round=1, attempt=1)
    wait_current(page, "bets_closed", 1, timeout_ms=WAIT_MS)
    seq = table.result(3, (4, 5))  # commits, then shows, as the daemon does
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
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
    wait_current(page, "no_roll", 1, timeout_ms=WAIT_MS)
    assert page.text_content("#headline") == "NO ROLL — a die is not flat"
    assert page.is_hidden("#outcome")  # no dice, no total: nothing that looks like a result
    shot(page, "no-roll")


def test_a_fault_is_shown_with_its_causes(page: Any, table: Table) -> None:
    table.record(RecordKind.FAULT, round=1, attempt=1, fault="sensor_lost", detail="", state="x")
    table.show(Screen.FAULT, faults=["sensor_lost", "tamper"])
    wait_current(page, "fault", 1, timeout_ms=WAIT_MS)
    assert page.text_content("#headline") == "FAULT — PLAY STOPPED"
    # each by its kind, in the players' words (events.PLAYER_FAULTS)
    assert page.locator("#faults li").all_text_contents() == [
        "the dice reader needs attention",
        "the shaker needs attention",
    ]
    shot(page, "fault")


def test_a_fault_s_internals_are_never_sent_to_the_players_page(page: Any, table: Table) -> None:
    """A fault back within a minute of its clear is held, and back too often restarts the
    controller: the supervisor's view counts its returns; the players' page is sent neither,
    nor the fault's own name (the audit log's storage, the dice alarm): only its kind."""
    table.record(RecordKind.FAULT, round=1, attempt=1, fault="storage", detail="", state="x")
    table.show(Screen.FAULT, faults=["storage", "dice_alarm", "tamper"], returns={"storage": 3})
    wait_current(page, "fault", 1, timeout_ms=WAIT_MS)
    assert page.locator("#faults li").all_text_contents() == [
        "the table's equipment needs attention",
        "the shaker needs attention",
    ]
    table.show(Screen.FAULT, faults=["storage"], returns={"storage": 5}, restart="why")
    page.wait_for_function("() => document.querySelectorAll('#faults li').length === 1")
    body = page.inner_text("body")
    for word in ("came back", "restarting", "audit", "dice alarm", "inspected"):
        assert word not in body, word


def test_rng_number_and_session_commitment(page: Any, table: Table) -> None:
    table.record(RecordKind.RNG_COMMIT, **RNG_COMMIT)
    table.show(Screen.READY, round=1, rng_session="s-0001", rng_commitment="ab" * 32)
    table.record(RecordKind.RNG_DRAW, **rng_draw(1, 6))
    table.rng_result(6)
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
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
    # the operator's words (and their rule) are not sent to the players' page at all
    assert page.text_content("#bank-refused") == "BANK REFUSED — that seat may not bank this round"
    assert page.locator("#bank-refused *").count() == 0
    assert "621a" not in page.inner_text("body")
    assert page.evaluate("window.pwned") is None
    shot(page, "bank-refused")
    table.show(Screen.READY, round=1, bank="dealer")
    page.wait_for_function(
        "() => document.getElementById('bank-line').textContent === 'Bank: dealer'"
    )
    assert page.is_hidden("#bank-refused")
    for style, words in [
        ("jung-quat", "Jung Quat"),
        ("standard", "Standard"),
        ("house-way-left", "House Way From the Left"),
        ("cup-say-left", "Cup Say From the Left"),
        ("cup-say-right", "Cup Say From the Right"),
        ("chee-yee", "Chee Yee"),
        ("pin-say-right", "Pin Say From the Right"),
        ("pin-say-left", "Pin Say From the Left"),
        ("dragon-phoenix-right", "Dragon Phoenix From the Right"),
        ("dragon-phoenix-left", "Dragon Phoenix From the Left"),
    ]:
        table.show(Screen.BETS_CLOSED, round=1, attempt=1, delivery_style=style)
        page.wait_for_function(
            "w => document.getElementById('delivery-style-name').textContent === w", arg=words
        )
        assert page.is_visible("#delivery-style")
        assert page.is_hidden("#bank-line")
    shot(page, "delivery-style")


def test_a_tiles_result_shows_its_dealing_plan_beside_the_result(page: Any, table: Table) -> None:
    """621a.8(d), 621a.9: the eight positions in dealing order with their stacks and the tiles
    of them each takes, clear of the dice, the total and the first hand."""
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
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
    assert page.text_content("#dealing-style") == "Cup Say From the Right"
    # each turn with its stacks and their tiles (1 the top tile), the words said once
    assert page.text_content("#dealing-key") == "tiles: 1 = top"
    turns = dealing_turns(page)
    assert turns[:3] == [
        ["seat 3", "A", "1+2: 1–2"],
        ["seat 4", "B", "1+2: 3–4"],
        ["seat 5", "C", "3+4: 1–2"],
    ]
    assert len(turns) == 8
    # and each turn drawn at its position on the table, by its letter in a square: never a
    # number in a circle, as the seats are
    drawn = page.eval_on_selector_all(
        "#table .turn",
        "els => els.map(e => [e.closest('.spot').dataset.position, e.textContent,"
        " e.querySelectorAll('rect').length, e.querySelectorAll('circle').length])",
    )
    assert sorted(drawn) == sorted([t[0], t[1], 1, 0] for t in turns)
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
        "() => document.getElementById('dealing-style').textContent === 'Standard'"
    )
    assert dealing_turns(page)[0] == ["dealer", "A", "1"]
    assert page.is_hidden("#dealing-key")  # whole stacks: no tiles to name
    table.show(Screen.NO_ROLL, round=1, attempt=2, reason="not_flat", words="a die is not flat")
    wait_current(page, "no_roll", 1, timeout_ms=WAIT_MS)
    assert page.is_hidden("#dealing")


def dealing_turns(page: Any) -> list[list[str]]:
    """The dealing plan as shown: position, turn, and its stacks with their tiles ("1+2: 1-2";
    the stacks alone for whole stacks)."""
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        "#dealing-plan li[data-position]",
        "els => els.map(e => [e.dataset.position, e.querySelector('.order').textContent,"
        " [...e.querySelectorAll('.group')].map(g => g.textContent).join(', ')])",
    )


# 621a.9(5)-(9) as the page shows them, written from the rule text: the stacks of each turn
# in the order the dealer takes them (a run as "first–last"), and the tiles (1 the top).
SHOWN_PLANS = {
    DeliveryStyle.CHEE_YEE: [
        "1+8: 1–2", "1+8: 3–4", "2+7: 1–2", "2+7: 3–4",
        "3+6: 1–2", "3+6: 3–4", "4+5: 1–2", "4+5: 3–4",
    ],
    DeliveryStyle.PIN_SAY_RIGHT: [
        "1–4: 1", "8–5: 1", "1–4: 2", "8–5: 2", "1–4: 3", "8–5: 3", "1–4: 4", "8–5: 4",
    ],
    DeliveryStyle.PIN_SAY_LEFT: [
        "8–5: 1", "1–4: 1", "8–5: 2", "1–4: 2", "8–5: 3", "1–4: 3", "8–5: 4", "1–4: 4",
    ],
    DeliveryStyle.DRAGON_PHOENIX_RIGHT: [
        "1+2: 1–2", "8–5: 1", "1+2: 3–4", "8–5: 2",
        "3+4: 1–2", "8–5: 3", "3+4: 3–4", "8–5: 4",
    ],
    DeliveryStyle.DRAGON_PHOENIX_LEFT: [
        "8+7: 1–2", "1–4: 1", "8+7: 3–4", "1–4: 2",
        "6+5: 1–2", "1–4: 3", "6+5: 3–4", "1–4: 4",
    ],
}  # fmt: skip


def test_each_new_style_shows_each_turn_s_tiles(page: Any, table: Table) -> None:
    """621a.9(5)-(9): tile by tile, in dealing order from the starting position (seat 2 banks,
    total 12: seat 5 first), each turn drawn at its position, all inside the plan's box."""
    result = result_of_roll(Game.TILES, Roll(3, (4, 5)), bank_seat=2, paytables=PAYTABLES)
    order = ["seat 5", "seat 6", "dead hand", "dealer", "seat 1", "seat 2", "seat 3", "seat 4"]
    for style, shown in SHOWN_PLANS.items():
        plan = dealing_plan(Game.TILES, style, result.position)
        table.record(RecordKind.RESULT, round=1, attempt=1, **result.as_record())
        table.show(
            Screen.RESULT,
            round=1,
            attempt=1,
            result=result.as_record(),
            dealing_plan=plan.as_record(),
        )
        page.wait_for_function(
            "t => [...document.querySelectorAll('#dealing-plan .group')]"
            ".map(g => g.textContent).join('|') === t",
            arg="|".join(shown),
        )
        turns = dealing_turns(page)
        assert turns == [
            [p, "ABCDEFGH"[k], t] for k, (p, t) in enumerate(zip(order, shown, strict=True))
        ]
        assert page.text_content("#dealing-key") == "tiles: 1 = top"
        box = page.locator("#dealing").bounding_box()
        for item in page.locator("#dealing-plan li").all():
            inner = item.bounding_box()
            assert box["x"] <= inner["x"]
            assert inner["x"] + inner["width"] <= box["x"] + box["width"]
        shot(page, f"dealing-plan-{style.value}")


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
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
    assert table.display is not None
    table.display.close()
    wait_current(page, "offline", None, timeout_ms=WAIT_MS)  # type: ignore[arg-type]
    assert page.is_visible("#offline")
    assert page.is_hidden("#live")
    assert page.text_content("#offline-title") == "OFFLINE — NO RESULT"
    shot(page, "offline")


def test_a_stream_that_goes_silent_turns_the_page_offline(page: Any, table: Table) -> None:
    table.result(2, (6, 1))
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
    assert table.display is not None
    since = len(rendered(page))
    table.display.heartbeat_s = 60.0  # the connection stays open but nothing arrives
    page.wait_for_function(
        "n => window.displayLog.slice(n).some(e => e.screen === 'offline')",
        arg=since,
        timeout=WAIT_MS,
    )
    # It then reconnects; the server answers with a fresh snapshot, which alone makes it live.


def test_a_restarted_controller_gets_a_fresh_page_that_never_shows_an_older_result(
    page: Any, table: Table, tmp_path: Path
) -> None:
    """A restarted controller is a new instance (issue 16): the page that sees it reloads
    itself, and the fresh page shows the recovered screen first, nothing older, with the
    trend board as the log holds it."""
    table.play_round(3, (4, 5))  # round 1
    wait_current(page, "ready", 2, timeout_ms=WAIT_MS)
    assert table.display is not None
    port = table.display.http_address[1]
    table.display.close()
    wait_current(page, "offline", None, timeout_ms=WAIT_MS)  # type: ignore[arg-type]
    # While the display is down the table goes on: round 2 closes, round 3 has a result.
    table.display = None
    table.play_round(6, (6, 2))
    table.result(5, (5, 5))
    page.evaluate("window.beforeTheRestart = true")
    with page.expect_navigation(timeout=WAIT_MS):  # the page reloads itself
        table.display = start_display(table.log, http_port=port)
        # The restarted controller shows its recovered screen: round 3's committed result.
        table.show(Screen.RESULT, round=3, attempt=1, result=recorded_result(table))
    wait_current(page, "result", 3, timeout_ms=WAIT_MS)
    assert page.evaluate("window.beforeTheRestart") is None
    assert [(e["screen"], e["round"]) for e in rendered(page)] == [("result", 3)]
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
        escrow=AUDITOR_KEY,
    )
    loop = ControlLoop(
        RoundMachine(RoundSettings(mode=Mode.RNG), OPENED),
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
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        loop.dispatch(NoMoreBets(at=1))
        wait_current(page, "bets_closed", 1, timeout_ms=WAIT_MS)  # 621a.11(i): the style first
        loop.dispatch(DiceSet(at=2))  # the dealer's key: the RNG draws
        wait_current(page, "result", 1, timeout_ms=WAIT_MS)
        (draw,) = [r.data for r in table.log.records() if r.kind == RecordKind.RNG_DRAW]
        assert page.text_content("#rng-value") == str(draw["number"])
        assert "DRAWING" not in (page.text_content("#headline") or "")
        screens = [e["screen"] for e in rendered(page)]
        assert screens[-3:] == ["bets_closed", "drawing", "result"]
        assert lamps.shown[-1] is Screen.RESULT
        shot(page, "rng-round-of-the-loop")
    finally:
        context.close()
        table.close()


# --- issue 15: the players' statistics panel, the supervisor's view; game recall ------------


ALARM = {
    "test": "red",
    "face": 6,
    "log_e": "7.020",
    "threshold": "5.298",
    "round": 123,
    "rolls": 210,
}


def texts(page: Any, selector: str, attribute: str | None = None) -> list[str]:
    if attribute is None:
        return page.locator(selector).all_text_contents()  # type: ignore[no-any-return]
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        selector, f"els => els.map(e => e.getAttribute({attribute!r}))"
    )


def test_the_stats_panel_shows_hot_and_cold_totals_faces_and_first_hands(
    page: Any, table: Table
) -> None:
    """Over the shift: the totals most and least frequent against their exact chances, each
    colour's faces with counts and percentages, the first hands of the trend board's results;
    kept on the screens that carry no statistics, and beside the result, never over it."""
    for red, blue in [(3, (4, 5)), (6, (6, 2)), (3, (4, 5))]:  # first hands: seat 3, 5, 3
        table.play_round(red, blue)
    table.show(Screen.READY, round=4, mode="shaker", stats=stats_payload(), dice=DICE)
    page.wait_for_selector("#stats:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#stats-rolls") == "60 rolls"
    assert texts(page, "#stats-hot .total-chip", "data-total") == ["18", "4", "11"]
    assert texts(page, "#stats-cold .total-chip", "data-total") == ["16", "17", "3"]
    # each total with how often it was seen and expected, under the row names
    assert texts(page, "#stats-hot .total-keys > *") == ["HOT", "seen", "exp."]
    assert texts(page, "#stats-hot .total-chip .seen-n")[:2] == ["1", "2"]
    assert texts(page, "#stats-hot .total-chip .expected-n")[:2] == ["0.3", "0.8"]
    assert texts(page, "#stats-cold .total-chip")[0] == "1601.7"
    assert texts(page, "#stats-red .face .count") == [str(c) for c in SHIFT_RED]
    assert texts(page, "#stats-blue .face .count") == [str(c) for c in SHIFT_BLUE]
    assert texts(page, "#stats-red .face .pct") == [
        "16.7%",
        "20.0%",
        "13.3%",
        "15.0%",
        "18.3%",
        "16.7%",
    ]
    assert texts(page, "#stats-blue .face .pct") == [
        "16.7%",
        "18.3%",
        "15.0%",
        "15.8%",
        "17.5%",
        "16.7%",
    ]
    # The bars: face 2 of the red die (12 of 60) is the longest, face 3 (8) the shortest.
    lengths = page.eval_on_selector_all(
        "#stats-red .face-bar", "els => els.map(e => e.getBoundingClientRect().width)"
    )
    assert max(lengths) == lengths[1]
    assert min(lengths) == lengths[2] > 0
    # Rounds 1 and 3 (12: seat 3), round 2 (14: seat 5).
    first = dict(
        zip(
            texts(page, "#stats-first .first-item", "data-position"),
            texts(page, "#stats-first .first-item b"),
            strict=True,
        )
    )
    assert first == {
        "dealer": "0", "seat 1": "0", "seat 2": "0", "seat 3": "2",
        "seat 4": "0", "seat 5": "1", "seat 6": "0", "dead hand": "0",
    }  # fmt: skip
    assert page.text_content("#stats-first-title") == "FIRST HAND · LAST 3"
    shot(page, "stats-panel-ready")

    # The result screen carries no statistics from the core: the hub counts the result in the
    # players' panel at once (not at the next bets open), clear of the result.
    table.record(RecordKind.NO_MORE_BETS, round=4, bank="dealer", mode="shaker")
    table.show(Screen.BETS_CLOSED, round=4, attempt=1, delivery_style="jung-quat")
    roll = Roll(5, (5, 5))
    result = result_of_roll(Game.TILES, roll, bank_seat=None, paytables=PAYTABLES)
    plan = dealing_plan(Game.TILES, DeliveryStyle.JUNG_QUAT, result.position)
    table.record(RecordKind.RESULT, round=4, attempt=1, **result.as_record())
    table.show(
        Screen.RESULT, round=4, attempt=1, result=result.as_record(), dealing_plan=plan.as_record()
    )
    wait_current(page, "result", 4, timeout_ms=WAIT_MS)
    assert page.is_visible("#stats")
    assert page.text_content("#stats-rolls") == "61 rolls"
    counted_red = [c + (k == 4) for k, c in enumerate(SHIFT_RED)]  # red 5, blue 5 5
    counted_blue = [c + 2 * (k == 4) for k, c in enumerate(SHIFT_BLUE)]
    assert texts(page, "#stats-red .face .count") == [str(c) for c in counted_red]
    assert texts(page, "#stats-blue .face .count") == [str(c) for c in counted_blue]
    assert page.text_content("#stats-first-title") == "FIRST HAND · LAST 4"
    panel = page.locator("#stats").bounding_box()
    for shown in ("#dice", "#total-box", "#starting", "#wagers", "#table", "#dealing", "#trend"):
        assert not overlaps(panel, page.locator(shown).bounding_box()), shown
    assert panel["y"] + panel["height"] <= 1080
    assert page.locator("#trend li").count() == 4
    shot(page, "stats-panel")

    # A page that connects now (a kiosk restarted) has the panel at once, from the snapshot.
    page.reload()
    wait_current(page, "result", 4, timeout_ms=WAIT_MS)
    assert page.is_visible("#stats")
    assert texts(page, "#stats-red .face .count") == [str(c) for c in counted_red]
    # the same result shown again (a fault cleared) is not counted twice
    table.show(
        Screen.RESULT, round=4, attempt=1, result=result.as_record(), dealing_plan=plan.as_record()
    )
    table.show(Screen.READY, round=4, mode="shaker")  # bets open without counts: kept
    wait_current(page, "ready", 4, timeout_ms=WAIT_MS)
    assert page.text_content("#stats-rolls") == "61 rolls"

    # New statistics replace the old; an RNG table has none.
    newer = stats_payload()
    newer["shift"] = {
        "red": [1, 0, 0, 0, 0, 0],
        "blue": [0, 1, 1, 0, 0, 0],
        "total": [0] * 2 + [1] + [0] * 13,
    }
    table.show(Screen.READY, round=5, mode="shaker", stats=newer)
    wait_current(page, "ready", 5, timeout_ms=WAIT_MS)
    assert page.text_content("#stats-rolls") == "1 roll"
    # one roll names no total hot or cold: the page says from how many rolls it will
    assert page.is_hidden("#stats-hot")
    assert page.is_hidden("#stats-cold")
    assert page.text_content("#stats-hot-cold-min") == "HOT / COLD after 50 rolls"
    table.show(Screen.READY, round=5, mode="rng")
    page.wait_for_selector("#stats", state="hidden", timeout=WAIT_MS)


def test_the_stats_panel_is_not_shown_when_the_setting_is_off(browser: Any, tmp_path: Path) -> None:
    table = Table(tmp_path)
    table.display = start_display(table.log, stats_panel=False)
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = context.new_page()
        page.goto(table.display.url)
        table.open_round()
        table.show(Screen.READY, round=1, mode="shaker", stats=stats_payload(), dice=DICE)
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        assert page.is_hidden("#stats")
        assert "HOT" not in page.inner_text("body")
        assert "THIS SHIFT" not in page.inner_text("body")
        assert page.locator("#stats-hot .total-chip").count() == 0
        # The trend board keeps its full width.
        assert page.locator(".trend").bounding_box()["width"] > 1800
    finally:
        context.close()
        table.close()


def test_the_supervisors_view_shows_the_dice_alarm_and_the_table_page_does_not(
    browser: Any, page: Any, table: Table
) -> None:
    assert table.display is not None
    table.show(Screen.READY, round=1, mode="shaker", stats=stats_payload(alarm=ALARM), dice=DICE)
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    errors: list[str] = []
    try:
        sup = context.new_page()
        sup.on("pageerror", lambda exc: errors.append(str(exc)))
        sup.goto(table.display.url + "supervisor")
        sup.wait_for_selector("#sup-alarm:not([hidden])", timeout=WAIT_MS)
        assert sup.text_content("#sup-alarm-what") == "RED DIE, FACE 6 LOOKS LOADED"
        evidence = sup.text_content("#sup-alarm-evidence")
        assert evidence == (
            "Evidence ln E = 7.020 ≥ threshold 5.298 · raised in round 123, after 210 rolls"
            " of these dice"
        )
        assert "Play goes on" in sup.text_content("#sup-alarm-action")
        # Each test's evidence as a bar towards its threshold.
        tests = texts(sup, "#sup-tests .sup-test", "data-test")
        assert tests == ["red", "blue", "total"]
        rolls = sup.text_content("#sup-monitor-rolls")
        assert rolls == "· 210 rolls tested (since the set was put in or kept)"
        widths = sup.eval_on_selector_all(
            "#sup-tests .sup-meter", "els => els.map(e => e.style.width)"
        )
        assert widths == ["100%", "21.2%", "0%"]  # 1.234 / 5.809; ln E below 0 is no bar
        assert sup.locator(".sup-test.over").count() == 1
        assert texts(sup, "#sup-tests .sup-test-figure")[1] == "ln E 1.234 / 5.809"
        # The counts over the set and the shift, with the p-values (over the set).
        red_set = texts(sup, ".sup-table-red tr[data-window=set] td b")
        assert red_set == ["30", "31", "29", "33", "27", "60"]
        red_shift = texts(sup, ".sup-table-red tr[data-window=shift] td b")
        assert red_shift == [str(c) for c in SHIFT_RED]
        assert sup.text_content(".sup-table-red tr[data-window=set] .sup-p") == "0.0012"
        assert sup.text_content(".sup-table-blue tr[data-window=set] .sup-p") == "0.9981"
        assert sup.text_content(".sup-table-total tr[data-window=set] .sup-p") == "0.7342"
        assert sup.text_content(".sup-table-blue tr[data-window=set] .sup-rolls") == "420 dice"
        assert sup.text_content(".sup-table-total tr[data-window=set] .sup-rolls") == "210"
        assert len(texts(sup, ".sup-table-total tr[data-window=shift] td b")) == 16
        # The dice set, its warning, and what the table shows.
        assert sup.text_content("#sup-set") == "D-0042"
        assert sup.text_content("#sup-set-warning") == DICE["warning"]
        assert sup.text_content("#sup-screen") == "PLACE YOUR BETS"
        shot(sup, "supervisor-alarm")

        # The players' page: the statistics, never the alarm or the monitor's evidence.
        page.wait_for_selector("#stats:not([hidden])", timeout=WAIT_MS)
        shown = page.inner_text("body")
        for word in ("alarm", "loaded", "evidence", "monitor", "threshold", "ln e"):
            assert word not in shown.lower(), word
        for figure in ("7.020", "5.298", "1.234", "5.809", "0.0012", "0.9981"):
            assert figure not in shown, figure
        assert page.evaluate("document.documentElement.innerHTML.includes('7.020')") is False

        # Without an alarm the supervisor sees the evidence only; the alarm box goes.
        table.show(Screen.READY, round=1, mode="shaker", stats=stats_payload(), dice=DICE)
        sup.wait_for_selector("#sup-alarm", state="hidden", timeout=WAIT_MS)
        assert texts(sup, "#sup-tests .sup-test", "data-test") == ["red", "blue", "total"]
        table.result(3, (4, 5))
        sup.wait_for_function(
            "() => document.getElementById('sup-screen').textContent === 'RESULT'"
        )
        details = texts(sup, "#sup-details li")
        assert "Dice red 3, blue 4 5 · total 12 · first hand SEAT 3" in details
        assert sup.text_content("#sup-set") == "D-0042"  # kept from bets open
        shot(sup, "supervisor")
    finally:
        context.close()
    assert errors == []


def wait_recall(page: Any, back: int) -> None:
    page.wait_for_function(
        "b => { const l = window.displayLog; const e = l[l.length - 1];"
        " return e && e.screen === 'recall' && e.back === b; }",
        arg=back,
        timeout=WAIT_MS,
    )


def test_recall_shows_each_of_the_last_ten_rounds_then_the_table_again(
    browser: Any, page: Any, table: Table, tmp_path: Path
) -> None:
    """AGCO 13.1.1: the last rounds from the real audit log (controller.audit.recall), each
    with its number, its dice and its first hand under a banner that says it is not live; a
    fault ends the recall and the page shows the table again."""
    assert table.display is not None
    plays = RECALL_PLAYS
    results = [table.recorded_round(*dice, **options) for dice, options in plays]  # type: ignore[arg-type]
    # Round 12: a result, then a fault; the supervisor recalls from the fault (the table waits).
    results.append(table.recorded_round(4, (5, 2), close=False))
    table.record(
        RecordKind.FAULT, round=12, attempt=1, fault="tamper", detail="tilted", state="result"
    )
    table.show(Screen.FAULT, round=12, faults=["tamper"])
    wait_current(page, "fault", 12, timeout_ms=WAIT_MS)
    rounds = recall(tmp_path, last=11)
    assert [g["round"] for g in rounds] == list(range(2, 13))
    for back in range(1, 11):
        table.show(Screen.RECALL, round=12, back=back, rounds=rounds)
        wait_recall(page, back)
        expected = results[12 - back]
        title = page.text_content(".recall-title")
        assert title == f"RECALL — PAST GAME {back} OF 11 — NOT LIVE"
        assert page.text_content("#recall-round") == str(expected["round"])
        faces = texts(page, "#recall-dice .die", "data-face")
        assert faces == [str(expected["dice"]["red"]), *map(str, expected["dice"]["blue"])]
        assert page.text_content("#recall-total") == str(expected["total"])
        start = str(expected["starting_position"]).upper()
        assert page.text_content("#recall-starting") == start
        recorded = rounds[11 - back]["records"]
        readings = [r for r in recorded if r["kind"] == "reading"]
        shown_readings = page.locator("#recall-readings .reading")
        assert shown_readings.count() == len(readings)
        digests = texts(page, "#recall-readings .digest")
        assert digests == ["image " + r["data"]["image_digest"] for r in readings]
        first_dice = texts(page, "#recall-readings .reading:first-child .reading-die")
        assert len(first_dice) == 3
        assert first_dice[0].startswith(str(readings[0]["data"]["dice"][0]["face"]) + "red")
        kinds = texts(page, "#recall-actions li", "data-kind")
        assert kinds == [r["kind"] for r in recorded if r["kind"] != "reading"]
        assert page.is_hidden("#live")
        if back == 4:
            shot(page, "recall")
    # What the rounds hold beyond their result.
    table.show(Screen.RECALL, round=12, back=9, rounds=rounds)  # round 4: a corrected result
    wait_recall(page, 9)
    corrected = page.locator("#recall-actions li[data-kind=result_corrected] .what")
    assert corrected.text_content() == (
        "attempt 1 · misread · read red 4, blue 4 4 → seen red 2, blue 5 6 · total 13"
        " · first hand SEAT 4"
    )
    assert page.text_content("#recall-outcome") == "CLOSED"
    assert page.text_content("#recall-corrected") == "CORRECTED"
    assert "first read red 4, blue 4 4" in (page.text_content(".recall-meta") or "")
    assert "S100" not in page.inner_text("body")  # who corrected it is the supervisor's
    table.show(Screen.RECALL, round=12, back=4, rounds=rounds)  # round 9: three attempts
    wait_recall(page, 4)
    verdicts = texts(page, "#recall-readings .verdict")
    assert verdicts == ["DIE OUT", "LOW CONFIDENCE", "VALID", "VALID"]
    dice = texts(page, "#recall-readings .reading-die")
    assert dice[0] == "1redflatOUTconf 91%(41, 20)"  # the die out of the shaker
    assert dice[3] == "1redflatinsideconf 41%(41, 20)"  # the low confidence
    assert dice[6] == "1redflatinsideconf 91%(41, 20)"
    table.show(Screen.RECALL, round=12, back=1, rounds=rounds)
    wait_recall(page, 1)
    fault = page.locator("#recall-actions li[data-kind=fault] .what").text_content()
    assert fault == "the shaker needs attention"  # its kind; its name and detail: supervisor's
    assert page.text_content("#recall-outcome") == "RESULT — NOT CLOSED"
    assert page.is_visible(".recall-banner")
    shot(page, "recall-newest")

    # The fault is shown again: the page leaves recall for the live view.
    table.show(Screen.FAULT, round=12, faults=["tamper"])
    wait_current(page, "fault", 12, timeout_ms=WAIT_MS)
    assert page.is_hidden("#recall")
    assert page.is_visible("#live")
    assert page.text_content("#headline") == "FAULT — PLAY STOPPED"
    assert "RECALL" not in page.inner_text("body")


def test_recall_on_the_supervisors_view_and_its_records_shown_as_text(
    browser: Any, page: Any, table: Table, tmp_path: Path
) -> None:
    """The supervisor's view recalls as the table's page does, with the dice monitor's alarm
    records the players' page leaves out; what a record says is never parsed as markup."""
    assert table.display is not None
    table.recorded_round(2, (3, 4))
    table.record(RecordKind.BANK_SELECTED, round=2, bank="seat 4", refused=HOSTILE)
    result = table.recorded_round(6, (6, 6), close=False)
    table.record(
        RecordKind.DICE_ALARM, round=2, attempt=1, test="red", face=6, log_e="7.020",
        threshold="5.298", rolls=210, counts={"red": [0] * 6, "blue": [0] * 6, "total": [0] * 16},
        dice_set="D-0042", locks=False,
    )  # fmt: skip
    rounds = recall(tmp_path, last=11)
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        sup = context.new_page()
        sup.goto(table.display.url + "supervisor")
        wait_current(sup, "result", 2, timeout_ms=WAIT_MS)
        for shown in (page, sup):
            table.show(Screen.RECALL, round=2, back=1, rounds=rounds)
            wait_recall(shown, 1)
            assert shown.text_content("#recall-round") == "2"
            assert texts(shown, "#recall-dice .die", "data-face") == ["6", "6", "6"]
            assert (
                shown.text_content("#recall-starting") == str(result["starting_position"]).upper()
            )
            refused = shown.locator("#recall-actions li[data-kind=bank_selected] .what")
            if shown is sup:
                assert refused.text_content() == "bank seat 4 · refused: " + HOSTILE
            else:  # the rule's words are the supervisor's: the players read that it was refused
                assert refused.text_content() == "bank seat 4 · BANK REFUSED"
            assert shown.locator("#recall-actions *").filter(has=shown.locator("img")).count() == 0
            assert shown.evaluate("window.pwned") is None
        alarm = sup.locator("#recall-actions li[data-kind=dice_alarm]")
        assert alarm.locator(".what").text_content() == "red · face 6 · ln E 7.020 ≥ 5.298"
        assert page.locator("#recall-actions li[data-kind=dice_alarm]").count() == 0
        assert "alarm" not in page.inner_text("body").lower()
        shot(sup, "supervisor-recall")
    finally:
        context.close()


def test_a_recalled_round_with_more_than_fits_says_what_it_leaves_out(
    page: Any, table: Table, tmp_path: Path
) -> None:
    """Nine no rolls: the oldest readings give way, with a line saying how many; the reading
    that decided, the result and every record of the round stay on the screen."""
    reasons = [NoRollReason.NOT_FLAT, NoRollReason.DIE_OUT, NoRollReason.UNREADABLE] * 3
    result = table.recorded_round(2, (2, 6), no_rolls=reasons, bank_seat=4)
    rounds = recall(tmp_path, last=11)
    assert table.display is not None
    table.show(Screen.RECALL, round=2, back=2, rounds=rounds)
    wait_recall(page, 2)
    assert page.text_content("#recall-round") == "1"
    assert texts(page, "#recall-dice .die", "data-face") == ["2", "2", "6"]
    assert page.text_content("#recall-starting") == str(result["starting_position"]).upper()
    left_out = page.text_content("#recall-readings .recall-left-out")
    shown = page.locator("#recall-readings .reading").count()
    assert (
        left_out
        == f"{11 - shown} earlier readings not shown here (paigow-controller recall has them all)"
    )
    assert 1 <= shown < 11
    assert texts(page, "#recall-readings .verdict")[-1] == "VALID"
    records = [r for r in rounds[0]["records"] if r["kind"] != "reading"]
    assert texts(page, "#recall-actions li", "data-kind") == [r["kind"] for r in records]
    for selector in ("#recall-actions li:last-child", "#recall-readings .reading:last-child"):
        box = page.locator(selector).bounding_box()
        assert box["y"] + box["height"] <= 1080, selector
    shot(page, "recall-crowded")


def test_the_real_control_loop_recalls_the_last_ten_rounds_after_a_fault_and_shows_its_stats(
    browser: Any, tmp_path: Path
) -> None:
    """Issue 15 end to end: the daemon's own loop, log and display server. Twelve rounds are
    played through the core (readings as the sensor sends them), the shaker is tampered with
    (a fault), and the supervisor recalls the last ten rounds on the display, one by one; each
    shows its dice as the log holds them. Leaving recall shows the fault again. Before the
    fault, bets open showed the statistics the core counted."""
    from controller.app.loop import ControlLoop, Ports
    from controller.core.config import Config
    from controller.core.dice import DiceReading, DieColour, DieReading
    from controller.core.record_data import config_loaded_data
    from drivers.safety import FaultLatch
    from drivers.sim.hardware import StillTable

    table = Table(tmp_path)
    table.display = display = start_display(table.log)
    hardware = StillTable()
    settings = RoundSettings(settle_ms=10)
    loop = ControlLoop(
        RoundMachine(settings, OPENED),
        Ports(
            log=table.log,
            display=display,
            panel=hardware,
            shaker=hardware,
            latch=FaultLatch(),
            sensor=hardware,
        ),
    )
    loop.power_on(config=config_loaded_data(Config()))
    at = [0]

    def send(event: Event, advance: int = 10, **data: Any) -> None:
        at[0] += advance
        loop.dispatch(occurrence(event, at=at[0], supervisor=data.pop("key", False), **data))

    def reading(faces: tuple[int, int, int], k: int) -> DiceReading:
        colours = (DieColour.RED, DieColour.BLUE, DieColour.BLUE)
        return DiceReading(
            tuple(
                DieReading(colour, face, True, True, 95, (20 + 30 * i + 5 * (k % 2), 40))
                for i, (colour, face) in enumerate(zip(colours, faces, strict=True))
            ),
            f"{k:02x}" * 32,
        )

    played: dict[int, tuple[int, int, int]] = {}
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = context.new_page()
        page.goto(display.url)
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        send(Event.LID_CLOSED)
        for k in range(1, 13):
            faces = (1 + k % 6, 1 + (k + 2) % 6, 1 + (k * 5) % 6)
            send(Event.NO_MORE_BETS)
            send(Event.SHAKE_PRESSED, delay_ms=0)
            send(Event.SHAKE_DONE, cycles=4)
            send(Event.TICK, advance=settings.settle_ms)
            send(Event.READING, reading=reading(faces, k))
            send(Event.READING, reading=reading(faces, k))
            assert loop.machine.state.value == "result", loop.machine.state
            played[k] = faces
            send(Event.CLOSE_ROUND)
        wait_current(page, "ready", 13, timeout_ms=WAIT_MS)
        # the statistics the core counted, on the players' panel
        red_counts = [sum(1 for f in played.values() if f[0] == face) for face in range(1, 7)]
        assert loop.machine.context.dice_counts.shift.red == tuple(red_counts)
        page.wait_for_selector("#stats:not([hidden])", timeout=WAIT_MS)
        assert page.text_content("#stats-rolls") == "12 rolls"
        assert texts(page, "#stats-red .face .count") == [str(c) for c in red_counts]
        shot(page, "loop-stats-panel")

        send(Event.TAMPER)  # a simulated fault: the shaker is tilted off its mount
        wait_current(page, "fault", 13, timeout_ms=WAIT_MS)
        for back in range(1, 11):
            send(Event.RECALL, key=True, back=back, employee=SUPERVISOR)
            page.wait_for_function(
                "b => { const l = window.displayLog; const e = l[l.length - 1];"
                " return e && e.screen === 'recall' && e.back === b; }",
                arg=back,
                timeout=WAIT_MS,
            )
            text = page.text_content("body") or ""
            assert "RECALL" in text
            number = 14 - back  # back 1 is round 13, in play (bets open when the fault came)
            assert f"ROUND{number}" in text.replace(" ", "").upper(), (back, text[:300])
            if number in played:
                red, b1, b2 = played[number]
                assert f"red {red}, blue {b1} {b2}" in text, (number, text[:600])
            if back == 4:
                shot(page, "loop-recall-after-fault")
        assert loop.machine.state.value == "fault"
        send(Event.RECALL, key=True, employee=SUPERVISOR)  # leave: the table as it was
        wait_current(page, "fault", 13, timeout_ms=WAIT_MS)
        page.wait_for_selector("#recall", state="hidden", timeout=WAIT_MS)
        records = table.log.records()
        actions = [r.data.get("action") for r in records if r.kind == "supervisor_action"]
        assert actions == ["recall_entered", "recall_left"]
    finally:
        context.close()
        loop.shutdown()
        table.close()


# --- issue 16: notices, the box's clock, a controller that sends no page settings ------------


def test_a_notice_never_covers_the_result_and_the_next_screen_clears_it(
    page: Any, table: Table, tmp_path: Path
) -> None:
    """A refused key's notice sits over the trend board, clear of the dice, the total, the first
    hand, the wagers and the drawing; the next screen takes it away at once. In a recall it
    heads the column of records, clear of the recalled outcome."""
    table.result(3, (4, 5))
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
    reason = "the shake button is not active: the result stands"
    table.show(Screen.REFUSED, reason=reason)
    page.wait_for_selector("#notice:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#notice") == "NOT TAKEN — NOTHING CHANGED"  # never the reason
    notice_box = page.locator("#notice").bounding_box()
    for shown in ("#dice", "#total-box", "#starting", "#wagers", "#table", "#bank-line"):
        assert not overlaps(notice_box, page.locator(shown).bounding_box()), shown
    assert overlaps(notice_box, page.locator("#trend-box").bounding_box())
    shot(page, "notice-over-the-trend-board")
    table.close_round()  # bets open for round 2
    wait_current(page, "ready", 2, timeout_ms=WAIT_MS)
    assert page.is_hidden("#notice")  # at once, not after its 5 s

    table.show(Screen.RECALL, round=2, back=2, rounds=recall(tmp_path, last=11))
    wait_recall(page, 2)
    table.show(Screen.REFUSED, reason="recall: only the supervisor's keys")
    page.wait_for_selector(".recall-records > #notice:not([hidden])", timeout=WAIT_MS)
    notice_box = page.locator("#notice").bounding_box()
    for shown in (".recall-banner", "#recall-dice", "#recall-total", "#recall-starting"):
        assert not overlaps(notice_box, page.locator(shown).bounding_box()), shown
    assert page.text_content("#recall-round") == "1"
    shot(page, "notice-in-a-recall")
    table.show(Screen.READY, round=2)
    wait_current(page, "ready", 2, timeout_ms=WAIT_MS)
    assert page.is_hidden("#notice")


def test_the_clock_is_the_boxs_and_says_when_it_is_not_synchronised(
    browser: Any, tmp_path: Path
) -> None:
    """The page shows the box's local time (HH:MM) whatever the browser's own clock says, and
    says so beside it when the box's clock is not synchronised."""
    table = Table(tmp_path)
    box_ns = 1_973_000_123_456_789_000  # the box's clock, injected (2032)
    table.display = start_display(table.log, synchronised=False, wall_ns=lambda: box_ns)
    box_time = time.strftime("%H:%M", time.localtime(box_ns // 1_000_000_000))
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = context.new_page()
        page.clock.set_fixed_time(datetime(2001, 2, 3, 4, 5, tzinfo=UTC))  # a browser far off
        page.goto(table.display.url)
        table.open_round()
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        page.wait_for_selector("#clock-box:not([hidden])", timeout=WAIT_MS)
        assert page.text_content("#clock") == box_time
        assert page.is_visible("#clock-warning")
        assert page.text_content("#clock-warning") == "clock not synchronised"
        shot(page, "clock-not-synchronised")
        table.display.clock_status.synchronised = True  # type: ignore[attr-defined]
        page.wait_for_selector("#clock-warning", state="hidden", timeout=WAIT_MS)  # next heartbeat
        assert page.text_content("#clock") == box_time
    finally:
        context.close()
        table.close()


def test_a_controller_that_sends_no_page_settings_gets_a_page_in_english_without_them(
    browser: Any, tmp_path: Path
) -> None:
    """Each setting of issue 16 may be missing (a controller from before it): the page shows
    nothing for it, in English, and raises no error."""
    table = Table(tmp_path)
    table.display = display = start_display(
        table.log, languages=("zh-Hant",), brand="金沙", limits=LIMITS, paytables=PAYTABLES
    )
    display.page_settings = lambda: {"stats_panel": False}  # type: ignore[method-assign]
    display.page_heartbeat = lambda: sse("heartbeat", {})  # type: ignore[method-assign]
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(display.url)
        table.open_round()
        table.show(Screen.READY, round=1, bank="dealer")
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        page.wait_for_timeout(1500)  # a heartbeat or more, which carries no clock either
        assert page.text_content("#headline") == "PLACE YOUR BETS"
        for absent in ("#brand", "#clock-box", "#limits", "#paytables", "#stats"):
            assert page.is_hidden(absent), absent
        table.result(3, (4, 5))
        wait_current(page, "result", 1, timeout_ms=WAIT_MS)
        assert page.text_content("#starting-label") == "SEAT 3"
    finally:
        context.close()
        table.close()
    assert errors == []


def test_the_page_speaks_the_languages_the_settings_name_in_their_order(
    browser: Any, tmp_path: Path
) -> None:
    """Chinese alone, or Chinese then English: every text from the one catalogue."""
    for languages, headline, first_hand in [
        (("zh-Hant",), ["請下注"], "閒家 3"),
        (("zh-Hant", "en"), ["請下注", "PLACE YOUR BETS"], "閒家 3 / SEAT 3"),
    ]:
        table = Table(tmp_path / "-".join(languages))
        table.display = start_display(table.log, languages=languages, limits=LIMITS)
        context = browser.new_context(viewport={"width": 1920, "height": 1080})
        try:
            page = context.new_page()
            page.goto(table.display.url)
            table.open_round()
            wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
            assert texts(page, "#headline .ln") == headline
            assert texts(page, "#headline .ln", "lang") == list(languages)
            assert texts(page, "#limits .limits-name")[0] == (
                "牌九" if languages == ("zh-Hant",) else "牌九 / PAI GOW"
            )
            table.result(3, (4, 5))
            wait_current(page, "result", 1, timeout_ms=WAIT_MS)
            assert page.text_content("#starting-label") == first_hand
            shot(page, "result-" + "+".join(languages))
        finally:
            context.close()
            table.close()


def test_the_core_s_bank_refusal_is_worded_in_the_page_s_languages_and_the_dice_warning_is_not(
    browser: Any, tmp_path: Path
) -> None:
    """The bank refused (621a.11(b)) as the core sends it, on a Chinese-only page: the page's
    own words from the catalogue, with the seat the core gave, not the core's English
    sentence. The dice's last hour (621a.5(c)) is the supervisor's: the players read nothing of
    it, until play stops by it, and then only that the table is not ready."""
    machine = RoundMachine(RoundSettings(), OPENED)
    machine.handle(LidClosed(at=0))
    actions = machine.handle(BankSeatKey(at=1))
    (ready,) = [a for a in actions if a.kind is ActionKind.SHOW and a.screen is Screen.READY]
    assert ready.data["bank_refused_rule"] == {"rule": "after_shuffle", "seat": 1}
    dice = {"set": "7", "warning": "replace the dice within 12 min: ...", "minutes_left": 12}
    table = Table(tmp_path / "zh")
    table.display = start_display(table.log, languages=("zh-Hant",))
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = context.new_page()
        page.goto(table.display.url)
        table.record(RecordKind.ROUND_OPENED, round=1)
        table.show(Screen.READY, **{**ready.data, "dice": dice})
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        refused = page.text_content("#bank-refused") or ""
        assert refused == "不可坐莊 — 洗牌後第一局，閒家 1 不可坐莊"
        assert not any(word in refused for word in ("seat", "shuffle"))
        assert texts(page, "#headline .ln") == ["請下注"]
        body = page.inner_text("body")
        assert "12" not in body.replace("12:", "")  # nor the minutes left (the clock aside)
        assert "621a.5" not in body
        assert page.is_hidden("#not-ready")
        shot(page, "bank-refused-zh-Hant")
        over = {
            **dice,
            "warning": "the dice have been on the table 24 hours: ...",
            "minutes_left": 0,
        }
        table.show(Screen.READY, **{**ready.data, "dice": over})
        page.wait_for_function(
            "() => document.getElementById('headline').textContent === '枱面未準備好'"
        )
        assert page.text_content("#subline") == "請稍候：枱面準備中。"
        assert "621a.5" not in page.inner_text("body")
    finally:
        context.close()
        table.close()


# --- corrections, round voids, RNG rounds, a table not ready, the supervisor's meters ---------


@pytest.fixture
def core(tmp_path: Path) -> Iterator[CoreTable]:
    """A table played through the round state machine, bets open for round 1."""
    t = CoreTable(tmp_path)
    t.start()
    yield t
    t.close()


def open_pages(browser: Any, url: str, *paths: str) -> list[Any]:
    pages = []
    for path in paths:
        context = browser.new_context(viewport={"width": 1920, "height": 1080})
        p = context.new_page()
        p.on("pageerror", lambda exc: pytest.fail(f"page error: {exc}"))
        p.goto(url + path)
        pages.append(p)
    return pages


def test_a_corrected_result_says_corrected_and_takes_its_place_on_the_trend_board(
    browser: Any, core: CoreTable
) -> None:
    """N.J.A.C. 13:69E-1.28P(d): the result corrected to the dice as they lie is shown again,
    CORRECTED with the dice first read: the corrected dice, total, first hand and wagers; the
    trend board's cell of the round is the corrected result, marked; who corrected it and why
    are on the supervisor's view only. A page that connects later has it so too."""
    (page, sup) = open_pages(browser, core.display.url, "", "supervisor")
    wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
    core.shake(3, (4, 5))  # the sensor reads 3, 4 5: seat 3
    wait_current(page, "result", 1, timeout_ms=WAIT_MS)
    assert page.is_hidden("#corrected")
    core.correct(3, (4, 6), CorrectionReason.SURVEILLANCE_REVIEW)  # the dice lie 3, 4 6
    page.wait_for_selector("#corrected:not([hidden])", timeout=WAIT_MS)
    assert page.text_content("#corrected") == "CORRECTEDfirst read345"
    assert texts(page, "#corrected .mini span") == ["3", "4", "5"]
    assert texts(page, "#dice .die", "data-face") == ["3", "4", "6"]
    assert page.text_content("#total") == "13"
    assert page.text_content("#starting-label") == "SEAT 4"
    assert page.get_attribute(".spot.first", "data-position") == "seat 4"
    assert page.is_visible("#wagers")
    assert texts(page, "#dealing-plan li[data-position]", "data-position")[0] == "seat 4"
    cell = page.locator("#trend li").first
    assert cell.get_attribute("class") == "cell corrected"
    assert cell.locator(".rnd").text_content() == "R1✱"
    assert cell.locator(".num").text_content() == "13"
    assert texts(page, "#trend li:first-child .mini span") == ["3", "4", "6"]
    assert page.text_content("#trend-hint") == "newest first · ✱ corrected"
    shown = page.inner_text("body")
    assert "S100" not in shown
    assert "surveillance" not in shown
    shot(page, "corrected-result")
    sup.wait_for_function(
        "() => [...document.querySelectorAll('#sup-details li')]"
        ".some(l => l.textContent.startsWith('CORRECTED'))"
    )
    assert (
        "CORRECTED (surveillance review) by employee S100: read red 3, blue 4 5, the dice as"
        " they lie red 3, blue 4 6" in texts(sup, "#sup-details li")
    )
    (listed,) = texts(sup, "#sup-interventions li")
    assert listed.startswith(
        "employee S100ROUND 1 CORRECTED — surveillance review: read red 3, blue 4 5 → red 3,"
        " blue 4 6 (total 13)"
    )
    core.send(Event.CLOSE_ROUND)
    wait_current(page, "ready", 2, timeout_ms=WAIT_MS)
    page.reload()  # a kiosk restarted: the board from the snapshot
    wait_current(page, "ready", 2, timeout_ms=WAIT_MS)
    assert page.locator("#trend li").first.get_attribute("class") == "cell corrected"
    assert page.text_content("#trend li:first-child .num") == "13"
    assert page.is_hidden("#corrected")
    sup.context.close()
    page.context.close()


def test_a_corrected_result_in_traditional_chinese(browser: Any, tmp_path: Path) -> None:
    table = CoreTable(tmp_path, languages=("zh-Hant",))
    try:
        (page,) = open_pages(browser, table.display.url, "")
        table.start()
        table.shake(6, (6, 2))
        table.correct(6, (6, 3))
        page.wait_for_selector("#corrected:not([hidden])", timeout=WAIT_MS)
        assert page.text_content("#corrected .corrected-word") == "已更正"
        assert page.text_content("#corrected .first-read") == "原讀數"
        assert page.text_content("#total") == "15"
        assert page.text_content("#trend-hint") == "最新在左 · ✱ 已更正"
        shot(page, "corrected-result-zh-Hant")
        page.context.close()
    finally:
        table.close()


def test_a_void_round_is_void_on_the_trend_board_with_wagers_returned(
    browser: Any, core: CoreTable
) -> None:
    """621a.12(c),(e): a round void after its result (a tile exposed) and one void before any
    (the dealer's key) are each VOID, wagers returned, with no total, dice or first hand;
    neither counts among the first hands of the statistics."""
    (page,) = open_pages(browser, core.display.url, "")
    core.shake(3, (4, 5))
    core.send(Event.CLOSE_ROUND)  # round 1: seat 3
    core.shake(6, (6, 2))
    wait_current(page, "result", 2, timeout_ms=WAIT_MS)
    core.void(VoidReason.TILE_EXPOSED)  # round 2: void after its result
    core.send(Event.NO_MORE_BETS)
    core.send(Event.VOID_ROUND)  # round 3: the dealer's key before any dice
    wait_current(page, "ready", 4, timeout_ms=WAIT_MS)
    page.wait_for_function("() => document.querySelectorAll('#trend li').length === 3")
    assert texts(page, "#trend li", "data-round") == ["3", "2", "1"]
    for n in ("3", "2"):
        cell = page.locator(f"#trend li[data-round='{n}']")
        assert cell.get_attribute("class") == "cell void returned"
        assert cell.locator(".voidword").text_content() == "VOID"
        assert cell.locator(".pos").text_content() == "wagers returned"
        assert cell.locator(".num, .mini").count() == 0  # nothing of a result
    assert page.text_content("#trend li[data-round='1'] .num") == "12"
    assert page.text_content("#stats-first-title") == "FIRST HAND · LAST 1"
    assert "14" not in texts(page, "#trend li .num")  # round 2's total is not shown
    shot(page, "void-rounds-on-the-trend-board")
    page.context.close()


def test_an_older_logs_voided_result_is_shown_as_before(page: Any, table: Table) -> None:
    """Logs in the field hold a result voided and its round played again: the voided
    attempt's cell keeps its dice, its total struck out and VOID; the next attempt's stands."""
    table.result(6, (6, 2))
    table.old_voided_result()
    table.record(RecordKind.RESULT, round=1, attempt=2, **recorded_result(table))
    table.show(Screen.RESULT, round=1, attempt=2, result=recorded_result(table))
    table.close_round()
    wait_current(page, "ready", 2, timeout_ms=WAIT_MS)
    cells = page.locator("#trend li")
    assert cells.count() == 2
    assert cells.nth(1).get_attribute("class") == "cell void"
    assert cells.nth(1).locator(".pos").text_content() == "VOID"
    assert cells.nth(1).locator(".num").text_content() == "14"
    assert texts(page, "#trend li:nth-child(2) .mini span") == ["6", "6", "2"]


SIDE_WAGER_WORDS = ("SUM", "MATCH", "BEAT IT", "PAYS", "8·16·17", "總和", "配對", "比大", "賠率")


@pytest.mark.parametrize("rng_mode", [RngMode.POSITION, RngMode.DICE])
def test_an_rng_round_shows_nothing_of_the_side_wagers(
    browser: Any, tmp_path: Path, rng_mode: RngMode
) -> None:
    """Current 621a.5(e)(2)-(4): Sum, Match and Beat It are the physical dice's, so an RNG
    round shows none of them (their limits, paytables or outcomes) on any screen, in both
    languages. Bets closed says plainly that the bank may choose the style of delivery and
    the RNG draws next (621a.11(i)); the draw shows the style chosen."""
    limits = LimitsConfig(
        currency="USD", table=BetLimits(25, 5000), sum=BetLimits(5, 500), beat_it=BetLimits(5, 50)
    )
    table = CoreTable(
        tmp_path,
        RoundSettings(mode=Mode.RNG, rng_mode=rng_mode),
        languages=("en", "zh-Hant"),
        limits=limits,
        paytables=PAYTABLES,
    )
    try:
        (page,) = open_pages(browser, table.display.url, "")
        table.start()

        def no_side_wager(screen: str) -> None:
            wait_current(page, screen, 1, timeout_ms=WAIT_MS)
            body = page.inner_text("body")
            for word in SIDE_WAGER_WORDS:
                assert word not in body, (screen, word)
            assert page.is_hidden("#wagers")
            assert page.is_hidden("#paytables")

        no_side_wager("ready")
        assert texts(page, "#limits .limits-name") == ["PAI GOW / 牌九"]
        table.send(Event.NO_MORE_BETS)
        table.send(Event.STYLE_KEY)  # the bank chooses a style of delivery
        no_side_wager("bets_closed")
        assert texts(page, "#subline .ln") == [
            "Bets are closed. The bank may choose the style of delivery; then the RNG draws"
            " the number.",
            "已停止下注。坐莊者可選擇派牌方式，隨後由電子隨機數抽出號碼。",
        ]
        style = page.text_content("#delivery-style-name")
        assert style == "House Way From the Left / House Way 由左起"
        shot(page, f"rng-bets-closed-{rng_mode}")
        table.send(Event.DICE_SET)  # the dealer's dice-set key: the RNG draws
        no_side_wager("drawing")
        assert page.text_content("#delivery-style-name") == style
        if rng_mode is RngMode.DICE:
            table.send(Event.RNG_DRAWN, roll=Roll(5, (1, 1)))
        else:
            table.send(Event.RNG_DRAWN, rng_number=4)
        no_side_wager("result")
        assert page.is_visible("#starting")
        if rng_mode is RngMode.DICE:
            assert texts(page, "#dice .die", "data-face") == ["5", "1", "1"]
            assert page.text_content("#total") == "7"
        shot(page, f"rng-result-{rng_mode}")
        page.context.close()
    finally:
        table.close()


def test_the_table_is_not_ready_without_dice_or_tiles_and_the_supervisor_is_told_why(
    browser: Any, tmp_path: Path
) -> None:
    """No dice set recorded (proposed 621a.5(c)), or tiles past their 12 hours (621a.3(e)):
    play stops (the shake, or "no more bets", is refused) and the players read only that the
    table is not ready; the core's warning, with its rule, is on the supervisor's view. An
    hour's warning before is the supervisor's alone."""
    hour = 3_600_000
    table = CoreTable(tmp_path, context=RoundContext(tiles_set="T1", tiles_since_table=0))
    try:
        page, sup = open_pages(browser, table.display.url, "", "supervisor")
        table.start()  # no dice set recorded
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        assert page.text_content("#headline") == "TABLE NOT READY"
        assert page.text_content("#subline") == "Please wait: the table is being prepared."
        body = page.inner_text("body").lower()
        for word in ("621a", "supervisor", "dice set", "record", "place your bets"):
            assert word not in body, word
        shot(page, "not-ready-no-dice")
        sup.wait_for_selector("#sup-set-warning:not([hidden])", timeout=WAIT_MS)
        assert sup.text_content("#sup-set") == "NONE RECORDED"
        assert sup.text_content("#sup-set-warning") == (
            "PLAY STOPPED — no dice set is recorded in the shaker: the supervisor records the"
            " dice put in"
        )
        table.send(Event.DICE_REPLACED, supervisor=True, dice_set="D-1", employee=SUPERVISOR)
        page.wait_for_function(
            "() => document.getElementById('headline').textContent === 'PLACE YOUR BETS'"
        )
        table.send(Event.TICK, advance=11 * hour + 60_000)  # the tiles' last hour
        table.send(Event.DICE_REPLACED, supervisor=True, dice_set="D-2", employee=SUPERVISOR)
        sup.wait_for_function(
            "() => document.getElementById('sup-tiles-warning').textContent.includes('59 min')"
        )
        assert page.text_content("#headline") == "PLACE YOUR BETS"
        # the supervisor's warning ("59 min" left) is not the players' (the clock may read :59)
        assert "59 min" not in page.inner_text("body")
        table.send(Event.TICK, advance=hour)  # the tiles' 12 hours are over
        table.send(Event.DICE_REPLACED, supervisor=True, dice_set="D-3", employee=SUPERVISOR)
        page.wait_for_function(
            "() => document.getElementById('headline').textContent === 'TABLE NOT READY'"
        )
        sup.wait_for_function(
            "() => document.getElementById('sup-tiles-warning').textContent"
            ".startsWith('PLAY STOPPED — the tiles have been in play 12 hours')"
        )
        table.send(Event.NO_MORE_BETS)  # refused: the notice says why, over the trend board
        page.wait_for_selector("#notice:not([hidden])", timeout=WAIT_MS)
        sup.context.close()
        page.context.close()
    finally:
        table.close()


def test_the_supervisors_view_shows_the_meters_the_tiles_and_who_corrected_or_voided(
    browser: Any, core: CoreTable
) -> None:
    (page, sup) = open_pages(browser, core.display.url, "", "supervisor")
    core.shake(3, (4, 5))
    core.correct(3, (4, 6))
    core.send(Event.CLOSE_ROUND)
    core.shake(2, (2, 2))
    core.void(VoidReason.WRONG_COUNT)
    core.send(Event.NO_MORE_BETS)
    core.send(Event.VOID_ROUND)
    wait_current(sup, "ready", 4, timeout_ms=WAIT_MS)
    meters = core.shown(Screen.READY)["meters"]  # as bets open carries them
    assert meters["corrections"] == 1
    sup.wait_for_selector("#sup-meters [data-meter=games]", timeout=WAIT_MS)
    shown = dict(
        zip(
            texts(sup, "#sup-meters .sup-meter-item", "data-meter"),
            texts(sup, "#sup-meters dd"),
            strict=True,
        )
    )
    assert shown == {k: str(meters[k]) for k in shown if k != "no_rolls"} | {"no_rolls": "0"}
    assert sup.text_content("#sup-tiles") == "T1"
    assert sup.is_hidden("#sup-tiles-warning")
    listed = texts(sup, "#sup-interventions li")
    assert [item.split("ROUND ")[1].split(" —")[0] for item in listed] == [
        "3 VOID",
        "2 VOID",
        "1 CORRECTED",
    ]
    assert listed[0].startswith("no employee id")  # the dealer's key: the dealer signed on
    assert listed[1].startswith("employee S100ROUND 2 VOID — wrong count, wagers returned,")
    assert "tiles reshuffled" in listed[1]
    shot(sup, "supervisor-meters-and-interventions")
    body = page.inner_text("body")
    for word in ("S100", "employee", "corrections", "lid openings", "meters"):
        assert word not in body.lower(), word
    sup.context.close()
    page.context.close()


def test_recall_shows_a_void_round_as_void_and_a_correction_as_corrected(
    browser: Any, core: CoreTable
) -> None:
    """AGCO 13.1.1 from the log as the control loop reads it (controller.audit.recall): a round
    void after its result is VOID, every wager returned, with no result shown (its records say
    what happened); a corrected round shows the corrected result, CORRECTED, with the dice
    first read. Who did it is on the supervisor's view only."""
    (page, sup) = open_pages(browser, core.display.url, "", "supervisor")
    core.shake(3, (4, 5))
    core.correct(3, (4, 6))
    core.send(Event.CLOSE_ROUND)  # round 1: corrected
    core.shake(6, (6, 2))
    core.void(VoidReason.TILE_EXPOSED)  # round 2: void after its result
    wait_current(page, "ready", 3, timeout_ms=WAIT_MS)
    core.send(Event.RECALL, supervisor=True, employee=SUPERVISOR, back=2)
    for shown in (page, sup):
        wait_recall(shown, 2)
        assert shown.text_content("#recall-round") == "2"
        assert shown.text_content("#recall-outcome") == "VOID"
        assert texts(shown, "#recall-void .ln") == [
            "ROUND VOID — NO RESULT",
            "Every wager returned",
        ]
        assert shown.locator("#recall-dice, #recall-total, #recall-starting").count() == 0
    detail = "tile exposed · wagers returned · tiles reshuffled"  # not the state's name
    assert page.text_content("#recall-actions li[data-kind=void] .what") == detail
    on_sup = sup.text_content("#recall-actions li[data-kind=void] .what")
    assert on_sup == "in result · " + detail + " · employee S100"
    shot(page, "recall-void-round")
    core.send(Event.RECALL, supervisor=True, employee=SUPERVISOR, back=3)
    for shown in (page, sup):
        wait_recall(shown, 3)
        assert shown.text_content("#recall-round") == "1"
        assert shown.text_content("#recall-corrected") == "CORRECTED"
        assert texts(shown, "#recall-dice .die", "data-face") == ["3", "4", "6"]
        assert shown.text_content("#recall-total") == "13"
        assert shown.text_content("#recall-starting") == "SEAT 4"
        meta = shown.text_content(".recall-game .recall-meta") or ""
        assert meta.endswith("first read red 3, blue 4 5")
    assert "S100" not in page.inner_text("body")
    assert "employee S100" in sup.inner_text("body")
    shot(page, "recall-corrected-round")
    sup.context.close()
    page.context.close()
