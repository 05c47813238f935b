"""The result feed and the page stream's catch-up, over real sockets and the real audit log."""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.display_table import Table, start_display
from support.web import (
    KIOSK,
    NETWORK,
    WAIT_S,
    EmptyLog,
    StepClock,
    connect,
    flood_sources,
    handler_threads,
    reset,
    wait_until,
)

from controller.core import canonical
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import Screen, VoidReason
from controller.display import feed as display_feed
from controller.display.events import EventId
from controller.display.feed import FeedRequestError, FeedServer, parse_request
from controller.display.hub import DisplayHub


@pytest.fixture
def table(tmp_path: Path) -> Iterator[Table]:
    t = Table(tmp_path)
    t.display = start_display(t.log)
    yield t
    t.close()


class FeedClient:
    def __init__(
        self, address: tuple[str, int], request: bytes | None, *, source: str | None = None
    ) -> None:
        self.sock = connect(address, source=source)
        self.file = self.sock.makefile("rb")
        if request is not None:
            self.sock.sendall(request)

    def records_until(self, seq: int) -> list[dict[str, Any]]:
        """Every record line up to and including ``seq`` (heartbeats skipped)."""
        out: list[dict[str, Any]] = []
        while not out or out[-1]["seq"] < seq:
            line = self.file.readline()
            assert line, "the feed closed"
            message = json.loads(line)
            if message["type"] == "record":
                out.append(message)
        return out

    def next_message(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line, "the feed closed"
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def test_a_reconnecting_client_gets_exactly_the_missed_records(table: Table) -> None:
    assert table.display is not None
    address = table.display.feed_address
    assert address is not None
    table.open_round()
    table.play_round(3, (4, 5))
    first = FeedClient(address, b'{"from": 1}\n')
    seen = first.records_until(table.log.size)
    assert [r["seq"] for r in seen] == list(range(1, table.log.size + 1))
    first.close()
    last_seen = seen[-1]

    missed_results = [table.play_round(6, (6, 2)), table.play_round(1, (2, 3))]
    again = FeedClient(address, f"FROM {last_seen['seq'] + 1}\n".encode())
    missed = again.records_until(table.log.size)
    again.close()

    assert [r["seq"] for r in missed] == list(range(last_seen["seq"] + 1, table.log.size + 1))
    assert missed[0]["prev"] == last_seen["hash"]  # the chain continues where it stopped
    for before, after in itertools.pairwise(missed):
        assert after["prev"] == before["hash"]
    results = [r for r in missed if r["kind"] == RecordKind.RESULT]
    assert [r["seq"] for r in results] == missed_results
    assert results[0]["round"] == 2
    assert results[0]["dice"] == {"red": 6, "blue": [6, 2]}
    assert results[0]["total"] == 14
    assert results[0]["starting_position"] == "seat 5"
    assert results[1]["checkpoint"]["size"] >= results[1]["seq"]  # the newest signed tree
    assert results[1]["checkpoint"]["note"].startswith("paigow-controller/table-1\n")


def test_a_live_client_gets_new_records_then_heartbeats(table: Table) -> None:
    assert table.display is not None
    assert table.display.feed_address is not None
    table.open_round()
    client = FeedClient(table.display.feed_address, None)
    # No request line: live records only; wait until the server has started streaming.
    heartbeat = client.next_message()
    assert (heartbeat["type"], heartbeat["size"]) == ("heartbeat", 2)  # log_created, the round
    seq = table.result(5, (5, 5))
    (line,) = client.records_until(seq)
    assert (line["seq"], line["round"], line["total"]) == (seq, 1, 15)
    assert client.next_message()["type"] == "heartbeat"
    client.close()


@pytest.mark.parametrize(
    ("line", "expected"),
    [(b"", None), (b'{"from": 7}', 7), (b"FROM 12", 12), (b"from 3 ", 3)],
)
def test_feed_requests(line: bytes, expected: int | None) -> None:
    assert parse_request(line) == expected


@pytest.mark.parametrize("line", [b'{"from": 0}', b'{"from": "7"}', b"FROM", b"GIVE 3", b"{"])
def test_bad_feed_requests_are_refused(line: bytes) -> None:
    with pytest.raises(FeedRequestError):
        parse_request(line)


def test_a_bad_request_gets_an_error_line(table: Table) -> None:
    assert table.display is not None
    assert table.display.feed_address is not None
    client = FeedClient(table.display.feed_address, b"GIVE ME EVERYTHING\n")
    assert client.next_message()["type"] == "error"
    assert client.file.readline() == b""
    client.close()


def read_stream(
    address: tuple[str, int], last_event_id: str | None
) -> list[tuple[str, str | None, dict[str, Any]]]:
    """The page stream's events up to and including the snapshot."""
    connection = http.client.HTTPConnection(*address, timeout=5)
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    connection.request("GET", "/events", headers=headers)
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    events: list[tuple[str, str | None, dict[str, Any]]] = []
    name, event_id, data = "message", None, ""
    while not events or events[-1][0] != "snapshot":
        line = response.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            events.append((name, event_id, json.loads(data)))
            name, event_id, data = "message", None, ""
    connection.close()
    return events


def test_the_page_stream_replays_after_last_event_id_from_history_and_log(tmp_path: Path) -> None:
    table = Table(tmp_path)
    table.display = start_display(table.log, history=3)  # most of the round is only in the log
    try:
        table.open_round()
        table.play_round(3, (4, 5))
        seen = table.last_seq
        assert seen is not None
        result_2 = table.result(6, (6, 2))
        table.show(Screen.REFUSED, reason="voiding now needs the supervisor key")
        table.close_round()
        table.show(Screen.BETS_CLOSED, round=3, attempt=1)  # no record: same seq, next index
        events = read_stream(table.display.http_address, str(seen))
    finally:
        table.close()
    replayed = [(event_id, data["screen"], data["round"]) for name, event_id, data in events[:-1]]
    assert all(name == "replay" for name, _, _ in events[:-1])
    assert replayed == [
        (str(result_2), "result", 2),
        (str(result_2 + 2), "ready", 3),
        (f"{result_2 + 2}.1", "bets_closed", 3),
    ]
    name, event_id, snapshot = events[-1]
    assert (name, event_id) == ("snapshot", f"{result_2 + 2}.1")
    assert snapshot["current"]["screen"] == "bets_closed"
    assert [t["round"] for t in snapshot["trend"]] == [1, 2]


def test_a_correction_and_a_void_are_fed_replayed_and_seeded_again_after_a_restart(
    tmp_path: Path,
) -> None:
    """The feed's line of a correction names the corrected result (its dice, total and first
    hand); a page catching up from the log is given the result shown again corrected and the
    round's void; and a display started on the log has its trend board and its list of
    corrections and voids as they were."""
    table = Table(tmp_path)
    table.display = start_display(table.log, history=2)  # the catch-up comes from the log
    try:
        table.open_round()
        table.play_round(3, (4, 5))
        seen = table.last_seq
        assert seen is not None
        table.recorded_round(3, (4, 6), corrected=(3, (4, 5)))  # round 2, corrected, closed
        table.recorded_round(6, (6, 6), void=VoidReason.TILE_EXPOSED)  # round 3, void
        table.record(RecordKind.NO_MORE_BETS, round=4, bank="dealer", mode="shaker")
        table.void_round(VoidReason.DEALER_KEY)  # round 4: void before any result
        assert table.display.feed_address is not None
        client = FeedClient(table.display.feed_address, b'{"from": 1}\n')
        lines = client.records_until(table.log.size)
        client.close()
        (fed,) = [line for line in lines if line["kind"] == RecordKind.RESULT_CORRECTED]
        assert (fed["round"], fed["attempt"]) == (2, 1)
        assert (fed["dice"], fed["total"], fed["count"]) == ({"red": 3, "blue": [4, 6]}, 13, 13)
        assert fed["starting_position"] == "seat 4"
        assert fed["data"]["dice_read"] == {"red": 3, "blue": [4, 5]}
        events = read_stream(table.display.http_address, str(seen))
    finally:
        table.close()
    replayed = [(d["screen"], d["round"], d["data"]) for name, _, d in events if name == "replay"]
    corrected = [d for screen, n, d in replayed if screen == "result" and "corrected" in d]
    assert [(d["round"], d["result"]["total"]) for d in corrected] == [(2, 13)]
    assert corrected[0]["corrected"] == {
        "dice_read": {"red": 3, "blue": [4, 5]},
        "reason": "misread",
        "employee": "S100",
    }
    voids = [(n, d["reason"], d["wagers"]) for screen, n, d in replayed if screen == "void"]
    assert voids == [(3, "tile_exposed", "returned"), (4, "dealer_key", "returned")]

    again = Table(tmp_path)
    again.display = start_display(again.log)  # a restart: the board from the log alone
    try:
        snapshot = read_stream(again.display.http_address, None)[-1][2]
    finally:
        again.close()
    board = [
        (c["round"], c["total"], c["corrected"], c["wagers_returned"]) for c in snapshot["trend"]
    ]
    assert board == [(1, 12, False, False), (2, 13, True, False), (3, None, False, True),
                     (4, None, False, True)]  # fmt: skip
    interventions = [(i["kind"], i["round"], i["reason"]) for i in snapshot["interventions"]]
    assert interventions == [
        ("correction", 2, "misread"),
        ("void", 3, "tile_exposed"),
        ("void", 4, "dealer_key"),
    ]
    assert snapshot["interventions"][0]["employee"] == "S100"


def test_event_ids_order_screens_between_records() -> None:
    assert EventId.parse("41") == EventId(41)
    assert EventId.parse("41.2") == EventId(41, 2)
    assert EventId.parse("x") is None
    assert EventId.parse("") is None
    assert EventId(41).next_for(41) == EventId(41, 1)
    assert EventId(41, 1).next_for(42) == EventId(42)
    assert EventId(41, 1) < EventId(42) < EventId(42, 1)


# --- bounds: requests, clients over the cap, clients that do not read --------------------------


def test_a_request_past_the_largest_sequence_number_gets_an_error_line(
    table: Table, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert table.display is not None
    assert table.display.feed_address is not None
    for request in (b"FROM 99999999999999999999999\n", b'{"from": 100000000000000000000}\n'):
        client = FeedClient(table.display.feed_address, request)
        message = client.next_message()
        assert message["type"] == "error", message
        assert client.file.readline() == b""
        client.close()
    assert "Traceback" not in capfd.readouterr().err
    assert "Traceback" not in caplog.text


def address_of(server: FeedServer) -> tuple[str, int]:
    host, port = server.server_address[:2]
    return str(host), int(port)


def big_record(seq: int) -> StoredRecord:
    entry = {
        "seq": seq,
        "kind": "note",
        "time": "t",
        "prev": "0" * 64,
        "data": {"pad": "x" * 65536},
    }
    return StoredRecord(seq, "note", canonical.encode(entry))


class EndlessLog(EmptyLog):
    """A log that always has more 64 kB records than a client can take."""

    def size(self) -> int:
        return 10**9  # far more than the hub keeps: every line comes from the log

    def records_after(self, seq: int, *, limit: int) -> list[StoredRecord]:
        return [big_record(n) for n in range(seq + 1, seq + 1 + min(limit, 2))]


@pytest.fixture
def feed_server(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> Iterator[FeedServer]:
    """A feed server alone, with short bounds; ``indirect`` picks its log."""
    # raising=False: a server without these bounds then fails the tests by what it does.
    monkeypatch.setattr(display_feed, "MAX_CLIENTS", 2, raising=False)
    monkeypatch.setattr(display_feed, "REQUEST_WAIT_S", 0.3)
    monkeypatch.setattr(display_feed, "SEND_TIMEOUT_S", 0.5)
    caplog.set_level(logging.INFO, logger="paigow")
    log = getattr(request, "param", EmptyLog)()
    hub = DisplayHub()
    hub.seed(trend=[], commitment=None, last_seq=log.size())  # as the display server seeds it
    server = FeedServer(("127.0.0.1", 0), hub, log, heartbeat_s=0.05)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    hub.close()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_more_feed_clients_than_the_cap_are_refused_at_once(
    feed_server: FeedServer, caplog: pytest.LogCaptureFixture
) -> None:
    address = address_of(feed_server)
    clients = [FeedClient(address, b"\n", source=NETWORK) for _ in range(2)]
    for client in clients:
        assert client.next_message()["type"] == "heartbeat"
    refused = FeedClient(address, None, source="127.0.0.3")
    assert refused.next_message() == {"type": "error", "error": "too many clients"}
    assert refused.file.readline() == b""
    refused.close()
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1

    clients.pop().close()
    assert wait_until(lambda: handler_threads() == 1)
    again = FeedClient(address, b"\n", source=NETWORK)
    assert again.next_message()["type"] == "heartbeat"
    for client in [*clients, again]:
        client.close()


def test_a_request_line_that_dribbles_past_the_wait_is_refused(feed_server: FeedServer) -> None:
    """The request wait is for the whole line: a byte at a time does not hold it open."""
    client = FeedClient(address_of(feed_server), None)
    stop = threading.Event()

    def dribble() -> None:
        for byte in b"FROM 1\n":
            if stop.wait(0.1):
                return
            try:
                client.sock.send(bytes([byte]))
            except OSError:
                return

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    try:
        assert client.next_message()["type"] == "error"
    finally:
        stop.set()
        dribbler.join(timeout=5)
        client.close()


@pytest.mark.parametrize("feed_server", [EndlessLog], indirect=True)
def test_a_feed_client_that_never_reads_is_dropped_and_the_others_are_served(
    feed_server: FeedServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    address = address_of(feed_server)
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(address)
    stuck.sendall(b"FROM 1\n")
    reader = FeedClient(address, b"FROM 1\n")
    lines = [0]
    stop = threading.Event()

    def read() -> None:
        # ends at the test's own shutdown below, which may reset the connection mid-line
        with contextlib.suppress(OSError):
            while not stop.is_set() and reader.file.readline():
                lines[0] += 1

    reading = threading.Thread(target=read, daemon=True)
    reading.start()
    port = str(stuck.getsockname()[1])
    assert wait_until(lambda: any(port in r.getMessage() for r in caplog.records))  # dropped
    assert wait_until(lambda: handler_threads() == 1)
    seen = lines[0]
    assert wait_until(lambda: lines[0] > seen + 10)  # and the reader is still served
    stop.set()
    reader.sock.shutdown(socket.SHUT_RDWR)
    reading.join(timeout=5)
    reader.close()
    stuck.close()
    assert "Traceback" not in capfd.readouterr().err
    assert "Traceback" not in caplog.text


def test_a_feed_client_that_goes_away_mid_stream_costs_a_log_line(
    feed_server: FeedServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    client = FeedClient(address_of(feed_server), b"\n")
    assert client.next_message()["type"] == "heartbeat"
    client.file.close()
    reset(client.sock)
    assert wait_until(lambda: handler_threads() == 0)
    assert "Traceback" not in capfd.readouterr().err
    assert "Traceback" not in caplog.text
    assert len(caplog.records) <= 1


# --- feed clients that hold connections without reading ----------------------------------------


@pytest.fixture
def default_feed() -> Iterator[tuple[FeedServer, StepClock]]:
    """A feed server with the product's bounds, on a clock the test moves."""
    clock = StepClock()
    log = EndlessLog()
    hub = DisplayHub()
    hub.seed(trend=[], commitment=None, last_seq=log.size())
    server = FeedServer(("127.0.0.1", 0), hub, log, heartbeat_s=0.05, clock=clock)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, clock
    hub.close()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def product_feed() -> Iterator[FeedServer]:
    """A feed server as the display server makes it: the product's bounds and clock."""
    log = EmptyLog()
    hub = DisplayHub()
    hub.seed(trend=[], commitment=None, last_seq=log.size())
    server = FeedServer(("127.0.0.1", 0), hub, log, heartbeat_s=0.05)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    hub.close()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.mark.parametrize("spread", ["one address", "many addresses"])
@pytest.mark.parametrize("count", [16, 200])
def test_feed_clients_that_hold_connections_without_reading_never_keep_the_box_out(
    count: int,
    spread: str,
    product_feed: FeedServer,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Live feed clients that never read (their kernel buffers take the heartbeats): one
    address takes at most MAX_CLIENTS_PER_ADDRESS slots, and a reader on the box itself (a
    forwarder to the table-management system) has slots no other address takes."""
    caplog.set_level(logging.INFO, logger="paigow")
    server = product_feed
    address = address_of(server)
    idle = []
    try:
        for index, source in enumerate(flood_sources(count, spread)):
            sock = connect(address, source=source)
            idle.append(sock)
            if index % 2 == 0:  # the others send nothing: live records only, after the wait
                with contextlib.suppress(OSError):  # refused and closed already
                    sock.sendall(b"\n")
        held = min(count, 4 if spread == "one address" else 16)  # the caps, as configured
        assert server.wait_for_clients(held, timeout=WAIT_S)

        local = FeedClient(address, b"\n", source=KIOSK)
        assert local.next_message()["type"] == "heartbeat"
        assert local.next_message()["type"] == "heartbeat"
        assert server.clients == held + 1  # the idle clients are all still there
        other = FeedClient(address, b"\n", source="127.0.1.250")
        if spread == "one address":  # one address does not take every slot
            assert other.next_message()["type"] == "heartbeat"
        else:
            assert other.next_message() == {"type": "error", "error": "too many clients"}
        other.close()
        local.close()
    finally:
        for sock in idle:
            sock.close()
    assert "Traceback" not in capfd.readouterr().err
    assert "Traceback" not in caplog.text


def test_feed_clients_that_never_read_are_dropped_at_the_bound_on_the_servers_clock(
    default_feed: tuple[FeedServer, StepClock],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """16 clients that ask for every record and never read, from 16 addresses: once their
    buffers are full they take nothing, and are dropped after SEND_TIMEOUT_S on the server's
    clock, not before; a reader on the box is served throughout."""
    caplog.set_level(logging.INFO, logger="paigow")
    server, clock = default_feed
    address = address_of(server)
    stuck = []
    for i in range(16):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((f"127.0.0.{10 + i}", 0))
        sock.connect(address)
        sock.sendall(b"FROM 1\n")
        stuck.append(sock)
    local = FeedClient(address, b"\n", source=KIOSK)
    assert local.next_message()["type"] == "heartbeat"
    assert server.wait_for_clients(17, timeout=WAIT_S)
    assert wait_until(lambda: server.clients_behind == 16)

    clock.advance(display_feed.SEND_TIMEOUT_S - 1)
    assert clock.wait_for_reads(200)
    assert server.clients == 17  # behind, not yet for the bound
    assert clock.advance_until(lambda: server.clients == 1, limit=display_feed.SEND_TIMEOUT_S)
    for _ in range(3):  # the reader on the box is still served
        assert local.next_message()["type"] == "heartbeat"
    local.close()
    dropped = [r for r in caplog.records if "nothing read for 10 s" in r.getMessage()]
    assert len(dropped) == 16
    for sock in stuck:
        sock.close()
    assert "Traceback" not in capfd.readouterr().err
    assert "Traceback" not in caplog.text
