"""The table display's HTTP server under clients that misbehave, over raw sockets.

A client that goes away, stalls in the middle of its request, never reads, or comes with too
many others costs one log line and is dropped; the server goes on serving the others and no
traceback reaches stderr or the log. The bounds are module constants, made short here; the
tests wait on conditions with timeouts and never measure how long anything took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin
from support.display_table import FixedClockStatus
from support.rng_fakes import AUDITOR_KEY
from support.web import (
    KIOSK,
    NETWORK,
    WAIT_S,
    EmptyLog,
    StepClock,
    Stream,
    assert_no_traceback,
    connect,
    flood_sources,
    get,
    handler_threads,
    read_all,
    request,
    reset,
    wait_until,
)

from controller.core.config import DisplayConfig, parse_config
from controller.core.state import Screen
from controller.display import server as display_server
from controller.display.server import DisplayServer


@pytest.fixture
def display(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[Any]:
    # raising=False: a server without these bounds then fails the tests by what it does.
    monkeypatch.setattr(display_server, "MAX_CLIENTS", 3, raising=False)
    monkeypatch.setattr(display_server, "REQUEST_TIMEOUT_S", 0.3, raising=False)
    monkeypatch.setattr(display_server, "SEND_TIMEOUT_S", 0.3, raising=False)
    caplog.set_level(logging.INFO, logger="paigow")
    config = DisplayConfig(host="127.0.0.1", http_port=0, feed_port=0)
    server = DisplayServer(config, EmptyLog(), table="table-1", heartbeat_s=0.05, feed=False)
    yield server
    server.close()


def is_closed_by_the_server(sock: socket.socket, limit: int = 64 << 20) -> bool:
    """Read what is left (at most ``limit`` bytes): True if the server closed the connection
    (an end of stream or a reset), False if it is still sending."""
    received = 0
    try:
        while received < limit:
            chunk = sock.recv(65536)
            if not chunk:
                return True
            received += len(chunk)
    except ConnectionResetError:
        return True
    finally:
        sock.close()
    return False


def test_clients_that_go_away_cost_a_log_line_not_a_traceback(
    display: DisplayServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    address = display.http_address
    for path in ("/", "/display.js", "/events", "/nowhere"):
        reset(request(address, get(path)))
    # Each is served until its thread meets the reset: with three clients at most, the stream
    # below is refused (503) if it comes before the server has seen them go.
    assert display.page_server.wait_for_clients(0, timeout=WAIT_S)
    half = Stream(address)
    half.until_snapshot()
    reset(half.sock)  # mid-stream: the next heartbeat finds it gone
    socket.create_connection(address, timeout=5).close()  # not a byte sent
    reset(request(address, b"GET /events HTTP/1.1\r\nHo"))  # gone mid-request
    assert wait_until(lambda: handler_threads() == 0)

    assert_no_traceback(capfd.readouterr().err, caplog)
    assert len(caplog.records) <= 7  # at most one line per client
    page = request(address, get("/"))
    assert read_all(page).startswith(b"HTTP/1.0 200")


@pytest.mark.parametrize(
    "partial",
    [b"GET /events HT", b"GET /events HTTP/1.1\r\nHost: table\r\n", b"G"],
)
def test_a_request_that_stalls_is_dropped(
    display: DisplayServer,
    partial: bytes,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    sock = request(display.http_address, partial)
    assert read_all(sock) == b""  # closed by the server, not by this test's 5 s timeout
    sock.close()
    assert wait_until(lambda: handler_threads() == 0)
    assert_no_traceback(capfd.readouterr().err, caplog)
    assert any("timed out" in r.getMessage() for r in caplog.records)


def test_a_request_that_dribbles_in_is_dropped(
    display: DisplayServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A byte every 50 ms keeps each read short of the timeout; the request as a whole is
    still bounded."""
    sock = request(display.http_address, b"GET /events HTTP/1.1\r\nX-Slow: ")
    stop = threading.Event()

    def dribble() -> None:
        for _ in range(400):
            if stop.wait(0.05):
                return
            try:
                sock.send(b"a")
            except OSError:
                return

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    try:
        assert sock.recv(65536) == b""
    finally:
        stop.set()
        dribbler.join(timeout=5)
        sock.close()
    assert_no_traceback(capfd.readouterr().err, caplog)


def test_more_clients_than_the_cap_are_refused_at_once(
    display: DisplayServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    address = display.http_address
    streams = [Stream(address, source=NETWORK) for _ in range(3)]
    for stream in streams:
        stream.until_snapshot()

    refused = connect(address, source="127.0.0.3")  # sends nothing: refused anyway
    answer = read_all(refused)
    refused.close()
    assert answer.startswith(b"HTTP/1.0 503 ")
    assert answer.endswith(b"too many clients\n")
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1, refusals

    streams.pop().close()
    assert display.page_server.wait_for_clients(2, timeout=WAIT_S)
    again = Stream(address, source=NETWORK)
    assert again.until_snapshot()["table"] == "table-1"
    for stream in [*streams, again]:
        stream.close()
    assert_no_traceback(capfd.readouterr().err, caplog)


def latest_round(name: str, data: dict[str, Any]) -> int | None:
    """The round on screen after this event (a screen, or the snapshot's current screen)."""
    if name == "snapshot":
        data = data.get("current") or {}
    elif name != "screen":
        return None
    number = data.get("round")
    return number if isinstance(number, int) else None


def test_a_client_that_never_reads_is_dropped_and_the_others_are_served(
    display: DisplayServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    address = display.http_address
    # A small receive window: the server's sends to it block once its buffers are full.
    stuck = request(address, get("/events"), rcvbuf=4096)
    reader = Stream(address)
    reader.until_snapshot()
    assert wait_until(lambda: handler_threads() == 2)

    last_round = 200
    seen = threading.Event()
    failed: list[BaseException] = []

    def read() -> None:
        try:
            while not seen.is_set():
                if latest_round(*reader.event()) == last_round:
                    seen.set()
        except BaseException as exc:
            failed.append(exc)
            seen.set()

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    pad = "x" * 65536  # 200 screens of 64 kB: more than the kernel buffers a stuck client
    for number in range(1, last_round + 1):
        display.show(Screen.READY, {"round": number, "words": pad}, seq=number)

    assert seen.wait(WAIT_S)
    assert failed == []
    assert wait_until(lambda: handler_threads() == 1)  # the stuck client's stream has ended
    assert is_closed_by_the_server(stuck)

    page = request(address, get("/"))
    assert read_all(page).startswith(b"HTTP/1.0 200")
    reading.join(timeout=5)
    reader.close()
    assert_no_traceback(capfd.readouterr().err, caplog)
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1


@pytest.mark.parametrize(
    "head",
    [
        get("/events?last=%C2%B2"),  # "²": isdigit() is True, int() refuses it
        get("/events?last=%D9%A3"),  # "٣": isdecimal() is True
        get("/events?last=99999999999999999999999"),
        get("/events", "Last-Event-ID: \xb2"),  # latin-1 "²" in a header
    ],
)
def test_a_last_event_id_that_is_not_ascii_digits_gets_the_snapshot(
    display: DisplayServer,
    head: bytes,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    display.show(Screen.READY, {"round": 4}, seq=9)
    stream = Stream(display.http_address, head)
    assert stream.status().startswith(b"HTTP/1.0 200")
    name, data = stream.event()
    assert name == "snapshot"  # a new client: no replay of screens it cannot have seen
    assert data["current"]["round"] == 4
    stream.close()
    assert_no_traceback(capfd.readouterr().err, caplog)


def test_a_port_already_taken_is_one_error_naming_it(display: DisplayServer) -> None:
    """The servers' wake-up pipe exists before the socket: socketserver closes the server when
    it cannot listen, and that close must not fail in its turn."""
    host, port = display.http_address
    config = DisplayConfig(host=host, http_port=port, feed_port=0)
    with pytest.raises(OSError, match=f"table display cannot listen on {host}:{port}"):
        DisplayServer(config, EmptyLog(), feed=False)


def test_the_supervisors_page_is_served_and_the_snapshot_carries_the_page_settings(
    display: DisplayServer,
) -> None:
    """The supervisor's view is a page of the same server (issue 15); each snapshot tells the
    pages whether the table's page shows the players' statistics ([display] stats_panel)."""
    address = display.http_address
    for path, kind, text in [
        ("/supervisor", b"text/html", b'data-page="supervisor"'),
        ("/supervisor.js", b"text/javascript", b"function renderSupervisor"),
        ("/", b"text/html", b'data-page="table"'),
    ]:
        answer = read_all(request(address, get(path)))
        head, body = answer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.0 200"), path
        assert b"Content-Type: " + kind in head
        assert b"Content-Security-Policy: default-src 'self'" in head
        assert text in body
    table_page = read_all(request(address, get("/display.js")))
    assert b"renderSupervisor(cur)" in table_page  # called on the supervisor's page only
    assert b"sup-alarm" not in table_page  # the players' page has no code for the alarm
    stream = Stream(address)
    assert stream.until_snapshot()["settings"]["stats_panel"] is True
    stream.close()

    config = DisplayConfig(host="127.0.0.1", http_port=0, feed_port=0, stats_panel=False)
    with DisplayServer(config, EmptyLog(), feed=False) as without:
        stream = Stream(without.http_address)
        assert stream.until_snapshot()["settings"]["stats_panel"] is False
        stream.close()


# --- the players' stream: nothing supervisor-only is sent to the players' page ----------------

REFUSAL_WORDS = "event no_more_bets is not allowed in state armed"
SUPERVISOR_SCREENS: list[tuple[Screen, dict[str, Any]]] = [
    (
        Screen.READY,
        {
            "round": 7,
            "bank": "seat 1",
            "bank_refused": "seat 1 may not bank the first round after a shuffle (621a.11(b))",
            "bank_refused_rule": {"rule": "after_shuffle", "seat": 1},
            "dice": {"set": "D-9", "warning": "replace the dice within 12 min (621a.5(c))"},
            "tiles": {"set": None, "warning": "no set of tiles is inspected (621a.6(a))"},
            "meters": {"games": 40, "corrections": 1},
            "stats": {
                "shift": {"red": [1, 0, 0, 0, 0, 0], "blue": [0, 1, 1, 0, 0, 0], "total": [0] * 16},
                "monitor": {"rolls": 1, "p_values": {"red": "0.0001"}},
                "alarm": {"test": "red", "log_e": "9.000", "threshold": "5.521"},
            },
        },
    ),
    (Screen.REFUSED, {"reason": REFUSAL_WORDS, "event": "no_more_bets"}),
    (
        Screen.REFUSED,
        {
            "code": "supervisor_key",
            "reason": "keeping the dice after an alarm needs the supervisor key",
        },
    ),
    (
        Screen.FAULT,
        {
            "round": 7,
            "faults": ["dice_alarm", "log_identity", "tamper"],
            "detail": "signing key /var/lib/paigow/log.key: mode 0644",
            "returns": {"tamper": 3},
            "restart": "tamper came back 5 times in a row",
        },
    ),
    (
        Screen.RESULT,
        {
            "round": 7,
            "attempt": 1,
            "result": {"total": 12, "dice": {"red": 3, "blue": [4, 5]}, "bank": "seat 1"},
            "corrected": {"dice_read": {"red": 3, "blue": [4, 4]}, "employee": "S100"},
            "dealing_plan": {"style": "standard", "section": "621a.8(d)", "plan": []},
        },
    ),
]
# What only the supervisor's and surveillance's stream may carry.
SUPERVISOR_ONLY = [
    REFUSAL_WORDS,
    "not allowed",
    "alarm",
    "supervisor key",
    "p_values",
    "monitor",
    "meters",
    "warning",
    "621a",
    "log_identity",
    "log.key",
    "came back",
    "S100",
    "section",
]


def test_the_players_stream_carries_nothing_that_is_the_supervisors(
    display: DisplayServer,
) -> None:
    """The players' page reads ``/table/events``: a refusal comes as the players' message code
    (never the operator's words with a state and an event), and no alarm, monitor, meters,
    warning, rule citation, fault internals or employee id is ever sent to it, live, in its
    snapshot, or replayed after a reconnection. The supervisor's stream (``/events``) keeps
    them all."""
    address = display.http_address
    players = Stream(address, get("/table/events"))
    supervisor = Stream(address, get("/events"))
    players.until_snapshot()
    supervisor.until_snapshot()
    for screen, data in SUPERVISOR_SCREENS:
        display.show(screen, data, seq=None)
    display.show(Screen.SHAKING, {"round": 8}, seq=None)  # the last: read up to it
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {"players": [], "supervisor": []}
    for name, stream in (("players", players), ("supervisor", supervisor)):
        while True:
            event, data = stream.event()
            seen[name].append((event, data))
            if event == "screen" and data.get("screen") == Screen.SHAKING:
                break
        stream.close()
    notices = [d["data"] for e, d in seen["players"] if e == "notice"]
    assert notices == [{"code": "no_change"}, {"code": "no_change"}]
    sent = json.dumps(seen["players"], ensure_ascii=False)
    assert [word for word in SUPERVISOR_ONLY if word in sent] == []
    everything = json.dumps(seen["supervisor"], ensure_ascii=False)
    assert [word for word in SUPERVISOR_ONLY if word not in everything] == []
    (fault,) = [d["data"] for e, d in seen["players"] if d.get("screen") == Screen.FAULT]
    assert fault == {"round": 7, "faults": ["table", "shaker"]}  # by kind, each once
    (ready,) = [d["data"] for e, d in seen["players"] if d.get("screen") == Screen.READY]
    assert ready["dice"] == {"stops": False}
    assert ready["tiles"] == {"stops": True}
    assert ready["bank_refused"] is True
    assert ready["stats"] == {"shift": SUPERVISOR_SCREENS[0][1]["stats"]["shift"]}

    # a page that connects again later: its snapshot and what is replayed to it
    again = Stream(address, get("/table/events?last=0"))
    assert again.status().startswith(b"HTTP/1.0 200")
    replayed: list[Any] = []
    while True:
        event, data = again.event()
        replayed.append(data)
        if event == "snapshot":
            break
    again.close()
    assert len(replayed) > 1
    sent = json.dumps(replayed, ensure_ascii=False)
    assert [word for word in SUPERVISOR_ONLY if word in sent] == []


# --- issue 16: the page's settings, its clock, its message catalogue ---------------------------


SETTINGS_KEYS = {"stats_panel", "languages", "brand", "limits", "paytables", "instance", "clock"}


BOX_NS = 1_973_000_123_456_789_000  # the box's clock the servers below are given (2032)


def assert_is_clock(clock: dict[str, Any], synchronised: bool | None) -> None:
    """The clock as the page gets it: UTC milliseconds, the box's offset, the OS's answer."""
    assert set(clock) == {"now_ms", "tz_offset_min", "synchronised"}
    assert clock["now_ms"] == BOX_NS // 1_000_000
    assert clock["tz_offset_min"] == time.localtime(BOX_NS // 1_000_000_000).tm_gmtoff // 60
    seconds = clock["now_ms"] // 1000
    assert clock["tz_offset_min"] == time.localtime(seconds).tm_gmtoff // 60
    assert clock["synchronised"] is synchronised


def test_the_snapshot_carries_languages_brand_limits_paytables_instance_and_clock() -> None:
    config = parse_config(
        {
            "display": {"languages": ["zh-Hant", "en"], "brand": "金沙 Sands", "http_port": 1},
            "limits": {
                "currency": "MOP",
                "table": {"min": 25, "max": 5000},
                "beat_it": {"min": 5, "max": 200},
            },
            "paytables": {
                "A": {
                    "wager": "sum",
                    "condition": "8-16-17",
                    "pays": {"17": "25 to 1", "16": "6 to 1", "8": "3 to 1"},
                },
                "R": {"wager": "beat_it", "condition": "red", "pays": {"win": "3 to 2"}},
            },
        }
    )
    display = dataclasses.replace(config.display, http_port=0, feed_port=0)
    clock = FixedClockStatus(False)
    with DisplayServer(
        display,
        EmptyLog(),
        feed=False,
        limits=config.limits,
        paytables=config.paytables,
        clock_status=clock,
        wall_ns=lambda: BOX_NS,
    ) as server:
        stream = Stream(server.http_address)
        settings = stream.until_snapshot()["settings"]
        stream.close()
        again = Stream(server.http_address)
        instance_again = again.until_snapshot()["settings"]["instance"]
        again.close()
    assert set(settings) == SETTINGS_KEYS
    assert settings["languages"] == ["zh-Hant", "en"]
    assert settings["brand"] == "金沙 Sands"
    assert settings["limits"] == {
        "currency": "MOP",
        "table": {"min": 25, "max": 5000},
        "beat_it": {"min": 5, "max": 200},
    }  # only the wagers given limits
    assert settings["paytables"] == [
        {
            "name": "A",
            "wager": "sum",
            "condition": "8-16-17",
            "pays": {"16": "6 to 1", "17": "25 to 1", "8": "3 to 1"},
        },
        {"name": "R", "wager": "beat_it", "condition": "red", "pays": {"win": "3 to 2"}},
    ]
    assert re.fullmatch(r"[0-9a-f]{16}", settings["instance"])
    assert instance_again == settings["instance"]  # one per server start, not per page
    assert_is_clock(settings["clock"], False)
    assert clock.asked >= 1


def test_the_default_settings_show_both_languages_no_brand_and_no_limits(
    display: DisplayServer,
) -> None:
    """Without [limits] no limits are shown; a new server start is a new instance (the page
    reloads itself when it sees one)."""
    stream = Stream(display.http_address)
    settings = stream.until_snapshot()["settings"]
    stream.close()
    assert set(settings) == SETTINGS_KEYS
    assert settings["languages"] == ["en", "zh-Hant"]
    assert (settings["brand"], settings["limits"], settings["paytables"]) == ("", None, [])
    config = DisplayConfig(host="127.0.0.1", http_port=0, feed_port=0)
    with DisplayServer(config, EmptyLog(), feed=False) as restarted:
        assert restarted.page_settings()["instance"] != settings["instance"]
    only_currency = DisplayServer(
        config, EmptyLog(), feed=False, limits=parse_config({"limits": {}}).limits
    )
    with only_currency:
        assert only_currency.page_settings()["limits"] is None  # no wager given limits


@pytest.mark.parametrize("synchronised", [True, False, None])
def test_every_heartbeat_carries_the_clock(synchronised: bool | None) -> None:
    config = DisplayConfig(host="127.0.0.1", http_port=0, feed_port=0)
    clock = FixedClockStatus(synchronised)
    with DisplayServer(
        config, EmptyLog(), heartbeat_s=0.05, feed=False, clock_status=clock, wall_ns=lambda: BOX_NS
    ) as server:
        stream = Stream(server.http_address)
        assert_is_clock(stream.until_snapshot()["settings"]["clock"], synchronised)
        beats = []
        while len(beats) < 3:
            name, data = stream.event()
            if name == "heartbeat":
                beats.append(data)
        stream.close()
    for beat in beats:
        assert_is_clock(beat, synchronised)
    assert clock.asked >= 4


def test_the_message_catalogue_is_served_as_json(display: DisplayServer) -> None:
    answer = read_all(request(display.http_address, get("/messages.json")))
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.0 200")
    assert b"Content-Type: application/json; charset=utf-8" in head
    assert b"X-Content-Type-Options: nosniff" in head
    assert b"Content-Security-Policy: default-src 'self'" in head
    catalogue = json.loads(body)
    assert {"en", "zh-Hant"} <= set(catalogue)
    refused = read_all(request(display.http_address, b"POST /messages.json HTTP/1.1\r\n\r\n"))
    assert refused.startswith(b"HTTP/1.0 501")  # read-only: GET alone


def test_the_appliance_gives_the_page_its_limits_paytables_and_brand(tmp_path: Path) -> None:
    """The composition root hands the config's [limits] and paytables to the page."""
    # the composition root, for this test alone: the display's own tests need none of it
    from controller.app.appliance import Appliance, Options

    config = parse_config(
        {
            "table": {"mode": "rng", "modes": ["shaker"], "name": "t16"},  # sum: the dice's
            "rng": {"escrow_public_key": AUDITOR_KEY.text},
            "display": {"http_port": 1, "feed_port": 2, "brand": "Casino"},
            "limits": {"table": {"min": 10, "max": 1000}, "sum": {"min": 5, "max": 100}},
        }
    )
    config = dataclasses.replace(
        config, display=dataclasses.replace(config.display, http_port=0, feed_port=0)
    )
    factory = MockFactory(pin_class=MockPWMPin)
    options = Options(pin_factory=factory, state_dir=tmp_path, service_terminal=False)
    appliance = Appliance(config, options)
    try:
        appliance.start()
        assert appliance.display is not None
        (server,) = [d for d in appliance.display.displays if isinstance(d, DisplayServer)]
        settings = server.page_settings()
    finally:
        appliance.close()
        factory.close()
    assert settings["brand"] == "Casino"
    assert settings["limits"] == {
        "currency": "USD",
        "table": {"min": 10, "max": 1000},
        "sum": {"min": 5, "max": 100},
    }
    assert [t["name"] for t in settings["paytables"]] == ["A", "B"]  # the built-in sum tables
    assert settings["paytables"][0]["pays"]["17"] == "25 to 1"


# --- clients that hold connections without reading: the kiosk is always served ---------------

# What an idle client sends: a whole request (then never reads), half of one, nothing.
IDLE_HEADS = (get("/events"), b"GET /events HTTP/1.1\r\nHost: ta", b"")


def idle_clients(address: tuple[str, int], sources: list[str]) -> list[socket.socket]:
    """A client from each of ``sources`` that connects, sends one of ``IDLE_HEADS`` and never
    reads (those over the caps are refused and closed by the server)."""
    clients = []
    for index, source in enumerate(sources):
        sock = connect(address, source=source)
        clients.append(sock)
        head = IDLE_HEADS[index % len(IDLE_HEADS)]
        if head:
            with contextlib.suppress(OSError):  # refused and closed already
                sock.sendall(head)
    return clients


@pytest.mark.parametrize("spread", ["one address", "many addresses"])
@pytest.mark.parametrize("count", [16, 200])
def test_clients_that_hold_connections_without_reading_never_keep_the_kiosk_out(
    count: int,
    spread: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The finding: 16 connections to /events that never read took every slot, and the kiosk
    got 503 for as long as they stayed (their kernel buffers take the heartbeats, so a send
    never waits). Now one address takes at most MAX_CLIENTS_PER_ADDRESS slots, and the kiosk
    has slots no other address takes: it gets its page and its stream while they stay."""
    # The clients with half a request hold their slots for the whole test (the request
    # timeout is shown elsewhere): what keeps the kiosk in here is the caps alone.
    monkeypatch.setattr(display_server, "REQUEST_TIMEOUT_S", 120.0)
    caplog.set_level(logging.INFO, logger="paigow")
    config = DisplayConfig(host="127.0.0.1", http_port=0, feed_port=0)
    display = DisplayServer(config, EmptyLog(), table="table-1", heartbeat_s=0.05, feed=False)
    idle: list[socket.socket] = []
    try:
        address = display.http_address
        idle = idle_clients(address, flood_sources(count, spread))
        held = min(count, 6 if spread == "one address" else 16)  # the caps, as configured
        assert display.page_server.wait_for_clients(held, timeout=WAIT_S)
        if spread == "one address":
            assert display.page_server.clients_from(NETWORK) == held

        kiosk = Stream(address, source=KIOSK)
        assert kiosk.until_snapshot()["table"] == "table-1"
        display.show(Screen.READY, {"round": 7}, seq=1)
        assert wait_until(lambda: latest_round(*kiosk.event()) == 7)
        page = read_all(request(address, get("/"), source=KIOSK))
        assert page.startswith(b"HTTP/1.0 200")
        assert display.page_server.clients >= held + 1  # the idle clients are all still there

        other = request(address, get("/"), source="127.0.1.250")
        answer = read_all(other)
        other.close()
        if spread == "one address":  # one address does not take every slot
            assert answer.startswith(b"HTTP/1.0 200")
        else:  # every slot but the kiosk's taken, by as many addresses
            assert answer.startswith(b"HTTP/1.0 503 ")
        kiosk.close()
    finally:
        for sock in idle:
            sock.close()
        display.close()
    assert_no_traceback(capfd.readouterr().err, caplog)


def test_streams_that_never_read_are_dropped_at_the_bound_on_the_servers_clock(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """16 streams that never read, from 16 addresses, with small receive buffers so that a few
    screens fill them: they are dropped once they have taken nothing for SEND_TIMEOUT_S on the
    server's clock, not before; the kiosk, reading, is served throughout."""
    caplog.set_level(logging.INFO, logger="paigow")
    clock = StepClock()
    config = DisplayConfig(host="127.0.0.1", http_port=0, feed_port=0)
    display = DisplayServer(
        config, EmptyLog(), table="table-1", heartbeat_s=0.05, feed=False, clock=clock
    )
    stuck: list[socket.socket] = []
    try:
        address = display.http_address
        stuck = [
            request(address, get("/events"), rcvbuf=4096, source=f"127.0.0.{10 + i}")
            for i in range(16)
        ]
        kiosk = Stream(address, source=KIOSK)
        kiosk.until_snapshot()
        assert display.page_server.wait_for_clients(17, timeout=WAIT_S)
        seen = [0]
        failed: list[BaseException] = []

        def read() -> None:
            try:
                while True:
                    number = latest_round(*kiosk.event())
                    if number is not None:
                        seen[0] = number
            except BaseException as exc:
                failed.append(exc)

        reading = threading.Thread(target=read, daemon=True)
        reading.start()
        pad = "x" * 65536  # more than a stuck client's buffers and the server's take
        for number in range(1, 4):
            display.show(Screen.READY, {"round": number, "words": pad}, seq=number)
        assert wait_until(lambda: seen[0] == 3)
        assert wait_until(lambda: display.page_server.clients_behind == 16)

        clock.advance(display_server.SEND_TIMEOUT_S - 1)
        assert clock.wait_for_reads(200)
        assert display.page_server.clients == 17  # behind, not yet for the bound
        assert clock.advance_until(
            lambda: display.page_server.clients == 1, limit=display_server.SEND_TIMEOUT_S
        )
        display.show(Screen.READY, {"round": 4}, seq=4)
        assert wait_until(lambda: seen[0] == 4)  # the kiosk was served throughout
        assert failed == []
        assert all(is_closed_by_the_server(sock) for sock in stuck)
        dropped = [r for r in caplog.records if "nothing read for 10 s" in r.getMessage()]
        assert len(dropped) == 16
        kiosk.sock.shutdown(socket.SHUT_RDWR)
        reading.join(timeout=5)
        kiosk.close()
    finally:
        for sock in stuck:
            sock.close()
        display.close()
    assert_no_traceback(capfd.readouterr().err, caplog)
