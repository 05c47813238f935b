"""The floor dashboard (controller/witness/dashboard.py): the page in Debian's chromium through
Playwright (live updates without a reload, alerts by severity in the witness's zone, an alert
acknowledged by a named user, unconfirmed records, an offline table, hostile text shown as
text, both screen sizes), and the server under bad requests, acknowledgements from where they
are not allowed, too many streams and a client that never reads, over raw sockets.

Screenshots go to test-output/floor/ (git-ignored). The witness's clock is injected."""

from __future__ import annotations

import json
import logging
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support.web import (
    WAIT_S,
    Stream,
    assert_no_traceback,
    get,
    read_all,
    request,
    wait_until,
)

from controller.fleet.protocol import Alert, AlertKind, Presence, Status
from controller.web.capped import ClientLimits
from controller.witness.dashboard import DashboardServer
from controller.witness.floor import Floor, FloorSettings
from controller.witness.ports import SEVERITY, StoredAlert, Unconfirmed

ROOT = Path(__file__).resolve().parents[2]
SLOW_READER_S = 5.0  # the send timeout when the test's own reader must keep up
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


def stored(number: int, table: str, kind: AlertKind, detail: str, time: str, **kw: Any) -> Any:
    return StoredAlert(
        number, Alert(table, kind, detail, time, kw.pop("size", 0)), SEVERITY[kind], **kw
    )


class Acks:
    """The witness's side of an acknowledgement, as its control thread answers it: each alert
    the floor was given, acknowledged once, by the first user."""

    def __init__(self, floor: Floor) -> None:
        self.floor, self.alerts, self.calls = floor, {}, []  # type: ignore[var-annotated]

    def give(self, alert: StoredAlert) -> None:
        self.alerts[alert.id] = alert
        self.floor.apply_alert(alert)

    def __call__(self, number: int, user: str) -> tuple[StoredAlert | None, bool]:
        from dataclasses import replace

        self.calls.append((number, user))
        alert = self.alerts.get(number)
        if alert is None or alert.acked_by:
            return alert, False
        alert = self.alerts[number] = replace(
            alert, acked_by=user, acked_at="2026-12-01T08:30:00.000Z"
        )
        self.floor.apply_alert(alert)
        return alert, True


@pytest.fixture
def floor() -> Floor:
    zone = ZoneInfo("Europe/Paris")
    return Floor(clock=Clock(), settings=FloorSettings(min_games_per_hour=10, zone=zone))


@pytest.fixture
def acks(floor: Floor) -> Acks:
    return Acks(floor)


@pytest.fixture
def dashboard(
    floor: Floor, acks: Acks, caplog: pytest.LogCaptureFixture
) -> Iterator[DashboardServer]:
    caplog.set_level(logging.INFO, logger="paigow")
    with dashboard_server(floor, acks, send_timeout_s=0.5) as server:
        yield server


def dashboard_server(floor: Floor, acks: Acks, *, send_timeout_s: float) -> DashboardServer:
    limits = ClientLimits(max_clients=3, request_timeout_s=0.5, send_timeout_s=send_timeout_s)
    return DashboardServer(
        floor, "127.0.0.1", 0, heartbeat_s=0.2, refresh_s=0.2, coalesce_s=0.0, limits=limits,
        acknowledge=acks,
    )  # fmt: skip


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

    floor.apply_alert(
        stored(1, "table-2", AlertKind.FORK, HOSTILE, "2026-12-01T08:05:00.000Z", size=9)
    )
    first = page.locator("#alert-list li").first
    expect(first).to_contain_text("LOG FORKED")
    expect(first.locator(".severity")).to_have_text("CRITICAL")
    expect(first.locator(".alert-time")).to_have_text(
        "2026-12-01 09:05:00 CET"
    )  # the witness's zone
    expect(first.locator(".alert-detail")).to_have_text(HOSTILE + " (log size 9)")
    expect(card(page, "table-2", "")).to_have_class("card alerting")
    expect(card(page, "table-2", ".witness-alert")).to_contain_text(HOSTILE)

    one.status(Presence.OFFLINE, "")  # the table went away: highlighted, said in words
    expect(card(page, "table-1", "")).to_have_class("card offline")
    expect(card(page, "table-1", ".presence")).to_have_text("OFFLINE")
    offline = stored(
        2, "table-1", AlertKind.DEVICE_OFFLINE, "table-1 is offline", "2026-12-01T08:06:00.000Z"
    )
    floor.apply_alert(offline)  # and the witness says so
    expect(card(page, "table-1", "")).to_have_class("card offline alerting")
    expect(card(page, "table-1", ".card-alert")).to_contain_text("DEVICE OFFLINE")
    expect(page.locator("#alert-list li").nth(1)).to_contain_text(
        "DEVICE OFFLINE"
    )  # after critical
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
    floor: Floor,
    acks: Acks,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The reader is this test's thread, parsing every alert sent: on a loaded machine it may
    # fall half a second behind, and be dropped as the stuck one is. Its margin is wider here.
    caplog.set_level(logging.INFO, logger="paigow")
    with dashboard_server(floor, acks, send_timeout_s=SLOW_READER_S) as dashboard:
        _a_client_that_never_reads(dashboard, floor, capfd, caplog)


def _a_client_that_never_reads(
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
        sent += 1
        floor.apply_alert(stored(sent, "table-1", AlertKind.GAP, pad, "2026-12-01T08:00:00.000Z"))
    floor.apply_alert(
        stored(sent + 1, "table-1", AlertKind.GAP, "last", "2026-12-01T08:00:00.000Z")
    )
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


# --- acknowledgements --------------------------------------------------------------------------


def post_ack(number: int | str, body: bytes, *headers: str) -> bytes:
    lines = [f"POST /alerts/{number}/ack HTTP/1.1", "Host: floor", *headers]
    if not any(h.lower().startswith("content-length") for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join([*lines, "", ""])).encode("latin-1") + body


JSON = "Content-Type: application/json"


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_an_acknowledgement_names_its_user_and_is_taken_once(
    dashboard: DashboardServer, floor: Floor, acks: Acks
) -> None:
    two_tables(floor)
    acks.give(stored(3, "table-1", AlertKind.FORK, "two logs", "2026-12-01T08:05:00.000Z"))
    answer = read_all(request(dashboard.address, post_ack(3, b'{"user": " S100 Pat "}', JSON)))
    assert status_of(answer) == 200
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert (body["acked_by"], body["acked_local"]) == ("S100 Pat", "2026-12-01 09:30:00 CET")
    again = read_all(request(dashboard.address, post_ack(3, b'{"user": "S200"}', JSON)))
    assert status_of(again) == 409
    assert json.loads(again.partition(b"\r\n\r\n")[2])["acked_by"] == "S100 Pat"
    assert acks.calls == [(3, "S100 Pat"), (3, "S200")]
    shown = floor.snapshot()
    assert shown["alerts"] == []
    assert shown["closed"][0]["acked_by"] == "S100 Pat"


@pytest.mark.parametrize(
    ("head", "code"),
    [
        (post_ack(9, b'{"user": "S1"}', JSON), 404),  # no such alert
        (post_ack(3, b'{"user": "S1"}'), 415),  # not JSON: another site's form could send it
        (post_ack(3, b'{"user": "S1"}', "Content-Type: text/plain"), 415),
        (post_ack(3, b"user=S1", "Content-Type: application/x-www-form-urlencoded"), 415),
        (post_ack(3, b'{"user": "S1"}', JSON, "Origin: http://evil.example"), 403),
        (post_ack(3, b"x" * 2000, JSON), 413),
        (post_ack(3, b"", JSON, "Content-Length: x"), 411),
        (post_ack(3, b'{"user": ""}', JSON), 400),
        (post_ack(3, b'{"user": "' + b"x" * 65 + b'"}', JSON), 400),
        (post_ack(3, b'{"user": "a\\u0007b"}', JSON), 400),
        (post_ack(3, b'{"name": "S1"}', JSON), 400),
        (post_ack(3, b"\xff\xfe", JSON), 400),
        (post_ack("03", b'{"user": "S1"}', JSON), 405),  # not an alert's number
        (post_ack("3/../4", b'{"user": "S1"}', JSON), 405),
    ],
)
def test_an_acknowledgement_that_is_not_one_is_refused(
    dashboard: DashboardServer,
    acks: Acks,
    head: bytes,
    code: int,
    capfd: pytest.CaptureFixture[str],
) -> None:
    acks.give(stored(3, "table-1", AlertKind.FORK, "two logs", "2026-12-01T08:05:00.000Z"))
    answer = read_all(request(dashboard.address, head))
    assert status_of(answer) == code, answer[:200]
    assert acks.alerts[3].acked_by == ""
    assert "Traceback" not in capfd.readouterr().err


def test_with_a_token_an_acknowledgement_carries_it(floor: Floor, acks: Acks) -> None:
    acks.give(stored(3, "table-1", AlertKind.FORK, "two logs", "2026-12-01T08:05:00.000Z"))
    token = "f00d-c0ffee-0123456789"
    with DashboardServer(floor, "127.0.0.1", 0, acknowledge=acks, ack_token=token) as server:
        for given in ("", "Authorization: Bearer wrong", f"Authorization: Basic {token}"):
            head = post_ack(3, b'{"user": "S1"}', JSON, *([given] if given else []))
            assert status_of(read_all(request(server.address, head))) == 401
        head = post_ack(3, b'{"user": "S1"}', JSON, f"Authorization: Bearer {token}")
        assert status_of(read_all(request(server.address, head))) == 200


def test_without_a_token_only_the_loopback_acknowledges(floor: Floor, acks: Acks) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: the route says the address
            address = probe.getsockname()[0]
        except OSError:
            address = "127.0.0.1"
    if address.startswith("127."):
        pytest.skip("no address other than the loopback here")
    outside = [address]
    acks.give(stored(3, "table-1", AlertKind.FORK, "two logs", "2026-12-01T08:05:00.000Z"))
    with DashboardServer(floor, outside[0], 0, acknowledge=acks) as server:
        head = post_ack(3, b'{"user": "S1"}', JSON)
        assert status_of(read_all(request(server.address, head))) == 403
        assert status_of(read_all(request(server.address, get("/state.json")))) == 200
    assert acks.calls == []


@pytest.mark.browser
def test_a_pit_boss_acknowledges_an_alert_on_the_page(
    browser: Any, dashboard: DashboardServer, floor: Floor, acks: Acks
) -> None:
    from playwright.sync_api import expect

    two_tables(floor)
    acks.give(
        stored(1, "table-2", AlertKind.GAP, "records 5 to 9 missing", "2026-12-01T08:04:00.000Z")
    )
    acks.give(stored(2, "table-1", AlertKind.FORK, "two logs", "2026-12-01T08:03:00.000Z"))
    dice = "dice on table-1 look loaded: red 6 seen 31 % of 180 rolls (round 41)."
    acks.give(stored(3, "table-1", AlertKind.BIASED_DICE, dice, "2026-12-01T08:05:00.000Z"))
    line = {"seq": 9, "kind": "result", "time": "2026-12-01T08:06:00.000Z", "data": {
        "round": 9, "attempt": 1, "game": "tiles", "bank": "dealer", "count": 12, "total": 12,
        "starting_position": "seat 3", "dice": {"red": 5, "blue": [3, 4]}}}  # fmt: skip
    floor.apply_unconfirmed("table-1", Unconfirmed(2, 8, 9, line))
    page = open_page(browser, dashboard, 1920, 1080)
    items = page.locator("#alert-list li")
    expect(items).to_have_count(3)
    expect(items.nth(0)).to_contain_text("CRITICAL")  # by severity, then the newest first
    expect(items.nth(1)).to_contain_text("red 6 seen 31 % of 180 rolls")
    expect(items.nth(2)).to_contain_text("RECORDS MISSING")
    expect(card(page, "table-1", "dd.log")).to_contain_text("2 UNCONFIRMED")
    expect(card(page, "table-1", "dd.result.unconfirmed")).to_contain_text("Red 5 · Blue 3 4")
    fork = items.nth(0)
    fork.locator("input").fill("S100 Pat")
    fork.locator("button").click()
    closed = page.locator("#closed-list li").first
    expect(closed).to_contain_text("ACKNOWLEDGED by S100 Pat at 2026-12-01 09:30:00 CET")
    expect(page.locator("#alert-list li")).to_have_count(2)
    assert acks.calls == [(2, "S100 Pat")]
    shot(page, "floor-acknowledged")
    page.context.close()
