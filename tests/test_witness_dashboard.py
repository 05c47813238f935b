"""The floor dashboard (controller/witness/dashboard.py): the page in Debian's chromium through
Playwright (live updates without a reload, alerts, an offline table, hostile text shown as
text, both screen sizes), and the server under bad requests, too many streams and a client
that never reads, over raw sockets.

Screenshots go to test-output/floor/ (git-ignored). The witness's clock is injected."""

from __future__ import annotations

import json
import logging
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_display_server import (
    WAIT_S,
    Stream,
    assert_no_traceback,
    get,
    read_all,
    request,
    wait_until,
)

from controller.display.feed import ClientLimits
from controller.fleet.protocol import Alert, AlertKind, Presence, Status
from controller.witness.dashboard import DashboardServer
from controller.witness.floor import Floor, FloorSettings

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-output" / "floor"
T0 = 1_796_112_000.0  # 2026-12-01T08:00:00Z
HOSTILE = '<img src=x onerror="window.pwned=1"><b>&amp;</b>'


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class TableFeed:
    """Export lines of one table, numbered in order, and its statuses."""

    def __init__(self, floor: Floor, name: str) -> None:
        self.floor, self.name, self.seq, self.t = floor, name, 0, 0

    def time(self) -> str:
        self.t += 1
        return f"2026-12-01T08:{self.t // 60:02d}:{self.t % 60:02d}.000Z"

    def record(self, kind: str, **data: Any) -> int:
        self.seq += 1
        line = {"seq": self.seq, "kind": kind, "time": self.time(), "data": data}
        self.floor.apply_record(self.name, line)
        return self.seq

    def status(self, presence: Presence, screen: str = "ready", *faults: str) -> None:
        status = Status(presence, screen, "shaker", 1, tuple(faults), self.time())
        self.floor.apply_status(self.name, status)

    def result(self, number: int, red: int, blue: tuple[int, int], start: str) -> None:
        total = red + sum(blue)
        self.record(
            "result",
            round=number,
            attempt=1,
            game="tiles",
            bank="dealer",
            count=total,
            total=total,
            starting_position=start,
            dice={"red": red, "blue": list(blue)},
            wagers={"sum": {"pair": blue[0] == blue[1]}, "match": {}, "beat_it": {}},
            payouts={},
        )


@pytest.fixture
def floor() -> Floor:
    return Floor(clock=Clock(), settings=FloorSettings(min_games_per_hour=10))


@pytest.fixture
def dashboard(floor: Floor, caplog: pytest.LogCaptureFixture) -> Iterator[DashboardServer]:
    caplog.set_level(logging.INFO, logger="paigow")
    limits = ClientLimits(max_clients=3, request_timeout_s=0.5, send_timeout_s=0.5)
    server = DashboardServer(
        floor, "127.0.0.1", 0, heartbeat_s=0.2, refresh_s=0.2, coalesce_s=0.0, limits=limits
    )
    with server:
        yield server


# --- the page, in chromium ---------------------------------------------------------------------


def two_tables(floor: Floor) -> tuple[TableFeed, TableFeed]:
    one, two = TableFeed(floor, "table-1"), TableFeed(floor, "table-2")
    for table in (one, two):
        table.status(Presence.ONLINE)
        table.record("config_loaded", game="tiles", mode="shaker", table=table.name)
    one.result(7, 5, (3, 4), "seat 3")
    one.record("close", round=7)
    floor.apply_cosigned("table-1", 2, int(T0) + 3)  # POSIX seconds, as the witness says
    return one, two


def card(page: Any, table: str, part: str = "") -> Any:
    return page.locator(f'article[data-table="{table}"] {part}'.strip())


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def open_page(browser: Any, dashboard: DashboardServer, width: int, height: int) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.on("pageerror", lambda exc: pytest.fail(f"page error: {exc}"))
    page.goto(dashboard.url)
    page.wait_for_function("() => window.floorState && window.floorState.events > 0")
    return page


@pytest.mark.browser
def test_the_page_follows_the_floor_live(
    browser: Any, dashboard: DashboardServer, floor: Floor
) -> None:
    from playwright.sync_api import expect

    one, two = two_tables(floor)
    page = open_page(browser, dashboard, 1920, 1080)
    expect(page.locator("article.card")).to_have_count(2)
    expect(card(page, "table-1", ".presence")).to_have_text("ONLINE")
    expect(card(page, "table-1", "dd.result")).to_contain_text("Red 5 · Blue 3 4 · total 12")
    expect(card(page, "table-1", "dd.gph")).to_contain_text("1")
    expect(card(page, "table-1", "dd.log")).to_contain_text("3 records · anchored 2")
    expect(card(page, "table-2", "dd.result")).to_have_text("none yet")
    page.evaluate("window.marker = 'no reload'")

    one.record("round_opened", round=8)
    one.result(8, 6, (2, 2), "dead hand")  # a record applied: the card changes, no reload
    expect(card(page, "table-1", "dd.result")).to_contain_text("Round 8")
    expect(card(page, "table-1", "dd.result")).to_contain_text("Red 6 · Blue 2 2 · total 10")
    expect(card(page, "table-1", "dd.result")).to_contain_text("Sum: pair")

    floor.apply_alert(Alert("table-2", AlertKind.FORK, HOSTILE, "2026-12-01T08:05:00.000Z", 9))
    first = page.locator("#alert-list li").first
    expect(first).to_contain_text("LOG FORKED")
    expect(first.locator(".alert-detail")).to_have_text(HOSTILE + " (log size 9)")
    expect(card(page, "table-2", "")).to_have_class("card alerting")
    expect(card(page, "table-2", ".witness-alert")).to_contain_text(HOSTILE)

    one.status(Presence.OFFLINE, "")  # the table went away: highlighted, said in words
    expect(card(page, "table-1", "")).to_have_class("card offline alerting")
    expect(card(page, "table-1", ".presence")).to_have_text("OFFLINE")
    expect(card(page, "table-1", ".card-alert")).to_contain_text("DEVICE OFFLINE")
    expect(page.locator("#alert-list li").first).to_contain_text("DEVICE OFFLINE")
    expect(page.locator("#summary")).to_have_text("2 tables · 1 offline · 2 alerting")

    two.record("fault", round=1, fault="sensor_lost", detail=HOSTILE)
    expect(card(page, "table-2", "dd.faults")).to_contain_text("1 OPEN")
    expect(card(page, "table-2", "dd.faults")).to_contain_text("sensor lost")
    assert page.evaluate("window.marker") == "no reload"
    assert page.evaluate("window.pwned") is None  # table texts were never HTML
    assert page.locator("img").count() == 0
    shot(page, "floor-1920x1080")
    page.context.close()


@pytest.mark.browser
def test_a_card_shows_the_corrected_result_and_a_void_round(
    browser: Any, dashboard: DashboardServer, floor: Floor
) -> None:
    """The last result is the corrected one, marked, with the dice first read and who; a round
    void shows no result, every wager returned; an older log's voided result stays marked."""
    from playwright.sync_api import expect

    one, two = two_tables(floor)
    one.record("round_opened", round=8)
    one.result(8, 6, (2, 2), "dead hand")
    one.record(
        "result_corrected",
        round=8,
        attempt=1,
        dice_read={"red": 6, "blue": [2, 2]},
        dice_seen={"red": 6, "blue": [2, 3]},
        reason="surveillance_review",
        employee="S100",
        note="",
        result={
            "game": "tiles",
            "bank": "dealer",
            "count": 11,
            "total": 11,
            "starting_position": "seat 3",
            "dice": {"red": 6, "blue": [2, 3]},
            "wagers": {"sum": {"pair": False}, "match": {}, "beat_it": {}},
            "payouts": {},
        },
    )
    page = open_page(browser, dashboard, 1920, 1080)
    result = card(page, "table-1", "dd.result")
    expect(result).to_contain_text("Round 8CORRECTED")
    expect(result).to_contain_text("Red 6 · Blue 2 3 · total 11")
    expect(result).to_contain_text("Start: seat 3")
    expect(result).to_contain_text("First read Red 6 · Blue 2 2 · surveillance review by S100")
    two.result(1, 1, (1, 1), "dealer")
    two.record(
        "void", round=1, attempt=1, state="result", reason="wrong_count", wagers="returned",
        reshuffle=True, note="", employee="S200",
    )  # fmt: skip
    voided = card(page, "table-2", "dd.result")
    expect(voided).to_contain_text("Round 1VOID")
    expect(voided).to_contain_text("No result: wagers returned")
    expect(voided).to_contain_text("wrong count · tiles reshuffled · by S200")
    assert "total" not in (voided.text_content() or "")
    shot(page, "floor-corrected-and-void")
    page.context.close()


@pytest.mark.browser
@pytest.mark.slow  # the page waits 3.5 s of silence before it says so
def test_a_page_that_lost_the_witness_says_it_is_not_live(
    browser: Any, dashboard: DashboardServer, floor: Floor
) -> None:
    from playwright.sync_api import expect

    two_tables(floor)
    page = open_page(browser, dashboard, 1280, 720)
    expect(page.locator("#stream")).to_have_text("LIVE")
    assert page.is_hidden("#stale")
    dashboard.close()
    expect(page.locator("#stale")).to_be_visible(timeout=15_000)
    expect(page.locator("#stream")).to_have_text("NOT LIVE")
    shot(page, "floor-not-live")
    page.context.close()


@pytest.mark.browser
@pytest.mark.parametrize(("width", "height"), [(1280, 720), (1920, 1080)])
def test_many_tables_fit_the_width_of_a_supervisors_screen(
    browser: Any, dashboard: DashboardServer, floor: Floor, width: int, height: int
) -> None:
    for n in range(1, 9):
        table = TableFeed(floor, f"pit-{n}")
        table.status(Presence.ONLINE if n % 3 else Presence.OFFLINE)
        table.result(n, 1 + n % 6, (2, 5), "seat 2")
        table.record("close", round=n)
    page = open_page(browser, dashboard, width, height)
    page.locator("article.card").nth(7).wait_for()
    overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert overflow <= 0  # no sideways scrolling
    size = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('.facts dd')).fontSize)"
    )
    assert size >= 14  # readable from a step back
    names = page.locator("article.card h2").all_text_contents()
    assert names == [f"pit-{n}" for n in range(1, 9)]
    shot(page, f"floor-{width}x{height}")
    page.context.close()


# --- the server, over raw sockets --------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "code"),
    [
        (get("/", "X-Big: " + "a" * 20000), b"431"),
        (get("/" + "a" * 20000), b"414"),
        (get("/../../etc/passwd"), b"404"),
        (get("/%00%ff<script>"), b"404"),
        (b"POST /events HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"405"),
        (b"BREW / HTTP/1.1\r\n\r\n", b"405"),
        (b"GET /\r\n\r\n", b"400"),  # HTTP/0.9: no status line could be sent
        (b"\x00\xff\xfe garbage\r\n\r\n", b"400"),
        (b"GET / HTTP/9.9\r\n\r\n", b"505"),
    ],
)
def test_a_bad_request_gets_a_clean_refusal(
    dashboard: DashboardServer,
    head: bytes,
    code: bytes,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = read_all(request(dashboard.address, head))
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.0 " + code + b" "), answer[:200]
    assert b"X-Content-Type-Options: nosniff" in rest
    assert rest.endswith(code + b" " + status.split(b" ", 2)[2] + b"\n")  # plain text
    assert_no_traceback(capfd.readouterr().err, caplog)
    assert read_all(request(dashboard.address, get("/"))).startswith(b"HTTP/1.0 200")


def test_the_state_the_page_and_head(dashboard: DashboardServer, floor: Floor) -> None:
    two_tables(floor)
    answer = read_all(request(dashboard.address, get("/state.json")))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200")
    assert b"Content-Security-Policy: default-src 'self';" in head
    state = json.loads(body)
    assert [t["table"] for t in state["tables"]] == ["table-1", "table-2"]
    page = read_all(request(dashboard.address, get("/")))
    assert b'<script src="/floor.js" defer></script>' in page
    assert b"http" not in page.partition(b"\r\n\r\n")[2]  # nothing from outside the box
    only_head = read_all(request(dashboard.address, b"HEAD /floor.js HTTP/1.1\r\n\r\n"))
    assert only_head.startswith(b"HTTP/1.0 200")
    assert only_head.endswith(b"\r\n\r\n")  # no body


def test_a_stream_gets_the_snapshot_then_what_changed(
    dashboard: DashboardServer, floor: Floor
) -> None:
    one, _ = two_tables(floor)
    stream = Stream(dashboard.address)
    snapshot = stream.until_snapshot()
    assert len(snapshot["tables"]) == 2
    one.result(8, 6, (1, 1), "dealer")
    while (event := stream.event())[0] == "heartbeat":
        pass
    name, delta = event
    assert name == "delta"
    assert [t["table"] for t in delta["tables"]] == ["table-1"]  # the table that changed only
    assert delta["tables"][0]["last_result"]["round"] == 8
    assert delta["version"] > snapshot["version"]
    while (event := stream.event())[0] != "heartbeat":
        pass
    assert event[1]["version"] == delta["version"]
    stream.close()


def test_more_streams_than_the_cap_are_refused_and_served_again(
    dashboard: DashboardServer, caplog: pytest.LogCaptureFixture
) -> None:
    streams = [Stream(dashboard.address) for _ in range(3)]
    for stream in streams:
        stream.until_snapshot()
    refused = read_all(request(dashboard.address, get("/events")))
    assert refused.startswith(b"HTTP/1.0 503 ")
    assert refused.endswith(b"too many clients\n")
    streams.pop().close()
    assert dashboard.page_server.wait_for_clients(2, timeout=WAIT_S)
    again = Stream(dashboard.address)
    assert again.until_snapshot()["tables"] == []
    for stream in [*streams, again]:
        stream.close()


def test_a_client_that_never_reads_is_dropped_and_holds_up_no_other(
    dashboard: DashboardServer,
    floor: Floor,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    TableFeed(floor, "table-1").status(Presence.ONLINE)
    stuck = request(dashboard.address, get("/events"), rcvbuf=4096)
    reader = Stream(dashboard.address)
    reader.until_snapshot()
    assert wait_until(lambda: dashboard.page_server.clients == 2)
    seen = threading.Event()
    pad = "x" * 999

    def read() -> None:
        while not seen.is_set():
            name, data = reader.event()
            if name != "heartbeat" and any(a["detail"] == "last" for a in data["alerts"]):
                seen.set()

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    sent = 0
    while dashboard.page_server.clients == 2 and sent < 40_000:  # about 40 MB at most
        floor.apply_alert(Alert("table-1", AlertKind.GAP, pad, "2026-12-01T08:00:00.000Z"))
        sent += 1
    floor.apply_alert(Alert("table-1", AlertKind.GAP, "last", "2026-12-01T08:00:00.000Z"))
    assert seen.wait(WAIT_S)
    assert dashboard.page_server.wait_for_clients(1, timeout=WAIT_S)
    reading.join(timeout=WAIT_S)
    reader.close()
    stuck.close()
    assert_no_traceback(capfd.readouterr().err, caplog)
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1


def test_the_page_is_shipped_with_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "assets/*" in pyproject["tool"]["setuptools"]["package-data"]["controller.witness"]
    assets = {p.name for p in (ROOT / "controller" / "witness" / "assets").iterdir()}
    assert assets == {"floor.html", "floor.css", "floor.js"}
