"""The table display: a local web page fed by Server-Sent Events, and the result feed.

:class:`DisplayServer` is the ``TableDisplay`` port. ``show`` is called by the control thread
after the screen's record is committed (write-ahead) and only updates memory; the HTTP
threads stream it to the page, and the feed threads (controller/display/feed.py) send the
committed records to table-management systems.

The page's stream (``GET /events``):

- ``retry: 1000``; then, if the client sends ``Last-Event-ID`` (or ``?last=``), every screen
  after that id: from the bounded in-memory history, and for anything older from the audit log
  (event ``replay``); then ``snapshot``, the whole current view; then live ``screen``,
  ``notice`` (a refused key, over the current screen) and ``board`` (trend board or RNG
  commitment changed) events, and ``heartbeat`` every ``heartbeat_s``.
- The page treats about three seconds without any event as a lost stream and shows
  "OFFLINE — NO RESULT" until a fresh snapshot arrives: an old result is never shown as current.
- The snapshot also carries the page's settings (``settings``, below) and the last ``stats``,
  ``dice``, ``tiles`` and ``meters`` a screen carried, so a page that connects between two
  screens that carry them still has them.
- Every snapshot, screen and board carries the trend board (``trend``: corrected results
  marked ``corrected``, a round void as a cell with ``void`` and ``wagers_returned`` and no
  result), the RNG commitment, the witness's anchor, the table's name and ``interventions``:
  the last results corrected and rounds voided, each with its round, reason and the employee
  who did it (the supervisor's view lists them; the players' page has no code that shows
  them).
- ``settings``: ``stats_panel`` (``[display] stats_panel``); ``languages`` and ``brand``
  (``[display]``); ``limits`` (``[limits]``: the currency and the wagers given limits, or null);
  ``paytables`` (each as the ``config_loaded`` record has it, odds as "N to M"); ``instance``,
  made once per server start (a page that sees it change reloads itself: the controller
  restarted, perhaps with a new page); and ``clock``: ``now_ms`` (UTC), ``tz_offset_min`` (the
  box's local offset) and ``synchronised`` (true, false, or null when the OS cannot tell). The
  ``heartbeat`` event's data is the same ``clock`` (issue 16).
- ``GET /messages.json`` is the page's message catalogue (English and Traditional Chinese).

Two pages read the stream: the table's (``/``), for the players, at ``GET /table/events``, and
the supervisor's (``/supervisor``), for the pit podium, at ``GET /events``: the dice monitor's
state (issue 15), the dice set and the set of tiles with their warnings, the table's meters,
the last corrections and voids with who made them, the counts with their p-values and game
recall. The players' page never shows the monitor's evidence or its alarm, the meters, the
warnings' words or an employee id (the supervisor's page has the code that renders them): its
stream is not sent them at all (events.for_players); where the dice or the tiles stop play it
says only that the table is not ready, and a refused key is a player's message chosen by the
refusal's code.

Both servers listen on ``[display] host`` (127.0.0.1 by default); any other address is set in
the configuration on purpose. Each bounds its clients (:class:`ClientLimits`): at most
``MAX_CLIENTS`` at once and ``MAX_CLIENTS_PER_ADDRESS`` from one address (more are refused at
once: ``503`` here), ``KIOSK_SLOTS`` more that only the box's own address (the kiosk, at
127.0.0.1) takes, so clients that hold connections without reading never keep the kiosk out;
the whole request within ``REQUEST_TIMEOUT_S`` and ``REQUEST_MAX_BYTES``; and a client that
leaves what it was sent untaken for ``SEND_TIMEOUT_S`` is dropped, measured by the bytes it has
not taken (controller/web/clients.py), not by whether a send waited. A client that goes
away costs one log line, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from controller.core.config import DisplayConfig, LimitsConfig
from controller.core.faults import faults_json
from controller.core.record_data import paytables_record
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import Screen
from controller.core.wagers import Paytable
from controller.display.clock import SystemClockStatus, page_clock
from controller.display.events import (
    INTERVENTIONS,
    REPLAYED_KINDS,
    TREND_LENGTH,
    EventId,
    TrendBoard,
    anchor_of,
    commitment_of,
    for_players,
    intervention_of,
    replay_event,
)
from controller.display.feed import FeedServer
from controller.display.hub import DisplayHub
from controller.errors import AuditLogError
from controller.ports import ClockStatus, LoggedCheckpoint, LogReader
from controller.web.capped import CappedServer, ClientLimits
from controller.web.clients import SEND_SLICE_S
from controller.web.pages import (
    HttpCappedServer,
    RequestReader,
    WatchedWriter,
    listening_on,
    load_assets,
)
from controller.web.sse import sse

log = logging.getLogger("paigow.display")

FONT_FACES = (  # assets/fonts/<face>.woff2 (display.css, @font-face)
    "sans-400",
    "sans-700",
    "cjk-tc-400",
    "cjk-tc-700",
    "symbols-400",
    "math-400",
    "mono-400",
    "mono-700",
)
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/display.css": ("display.css", "text/css; charset=utf-8"),
    "/display.js": ("display.js", "text/javascript; charset=utf-8"),
    "/supervisor": ("supervisor.html", "text/html; charset=utf-8"),
    "/supervisor.html": ("supervisor.html", "text/html; charset=utf-8"),
    "/supervisor.js": ("supervisor.js", "text/javascript; charset=utf-8"),
    "/supervisor.css": ("supervisor.css", "text/css; charset=utf-8"),
    "/messages.json": ("messages.json", "application/json; charset=utf-8"),
    # The kiosk's service worker and the waiting page it shows while the controller is down
    "/kiosk-sw.js": ("kiosk-sw.js", "text/javascript; charset=utf-8"),
    "/waiting.html": ("waiting.html", "text/html; charset=utf-8"),
    "/waiting.js": ("waiting.js", "text/javascript; charset=utf-8"),
    # The page's own fonts (assets/fonts/, scripts/build-fonts) and their licence
    **{f"/fonts/{face}.woff2": (f"fonts/{face}.woff2", "font/woff2") for face in FONT_FACES},
    "/fonts/OFL.txt": ("fonts/OFL.txt", "text/plain; charset=utf-8"),
    "/fonts/SOURCES.txt": ("fonts/SOURCES.txt", "text/plain; charset=utf-8"),
}
# The streams: the supervisor's and surveillance's (everything), and the players' page's, sent
# only what players read (events.for_players: no refusal's operator words, no alarm, no meters,
# no employee id); display.js reads the one of its page.
PAGE_STREAMS = {"/events": False, "/table/events": True}
# A font never changes within a release: a page may keep it for an hour (the rest is no-store)
FONT_CACHE_CONTROL = "max-age=3600"
REPLAY_FROM_LOG_MAX = 2000  # a page further behind than this gets the snapshot only
# The bounds are constants, not [display] keys: they protect the box, and no site needs others
# (a browser opens at most six connections to one server; the kiosk is one browser).
MAX_CLIENTS = 16  # pages and streams at once, but for the kiosk's slots; more get 503
MAX_CLIENTS_PER_ADDRESS = 6  # from one source (an IPv6 /64): a browser's own limit
KIOSK_SLOTS = 8  # more, for the box's own address only (127.0.0.1, ::1): the kiosk's
REQUEST_TIMEOUT_S = 5.0  # the request line and headers, in all
REQUEST_MAX_BYTES = 16 * 1024  # the request line and headers; past it the request is cut
SEND_TIMEOUT_S = 10.0  # a client that leaves what it was sent untaken this long is dropped
SEND_BUFFER_BYTES = 32 * 1024  # SO_SNDBUF (Linux doubles it): what is not taken stays unsent
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


class _HttpServer(HttpCappedServer):
    name = "display"
    logger = log

    def __init__(
        self,
        address: tuple[str, int],
        display: DisplayServer,
        limits: ClientLimits,
        clock: Callable[[], float],
    ) -> None:
        self.display = display
        super().__init__(address, _PageHandler, limits, clock=clock)


class DisplayServer:
    """The table display and the result feed (implements ``controller.ports.TableDisplay``).

    ``log`` reads the audit log for catch-up (``SqliteLogReader.of(audit_log)``). The servers
    start listening in the constructor; ``close`` stops them and may be called twice.
    ``limits`` and ``paytables`` are the config's, shown on the page while bets are open;
    ``clock_status`` says whether the clock is synchronised (the OS's, by default); ``wall_ns``
    is the box's clock the page is told; ``clock`` the one the clients' unread bound is
    measured on (monotonic seconds; tests inject one).
    """

    def __init__(
        self,
        config: DisplayConfig,
        log_reader: LogReader,
        *,
        table: str = "",
        heartbeat_s: float = 1.0,
        history: int = 256,
        feed: bool = True,
        page_limits: ClientLimits | None = None,
        feed_limits: ClientLimits | None = None,
        limits: LimitsConfig | None = None,
        paytables: Sequence[Paytable] = (),
        clock_status: ClockStatus | None = None,
        wall_ns: Callable[[], int] = time.time_ns,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.log_reader = log_reader
        self.heartbeat_s = heartbeat_s
        self.clock_status: ClockStatus = clock_status or SystemClockStatus()
        self._wall_ns = wall_ns  # the box's clock, UTC nanoseconds (tests inject one)
        self.instance = secrets.token_hex(8)  # this start of the server, for the page
        self._settings = _fixed_settings(config, limits, paytables)
        self.hub = DisplayHub(history=history, table=table)
        self._assets = load_assets("controller.display", ASSETS)
        self._assets["/faults.json"] = (faults_json().encode(), "application/json; charset=utf-8")
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._seed()
        if page_limits is None:
            page_limits = ClientLimits(
                MAX_CLIENTS,
                REQUEST_TIMEOUT_S,
                SEND_TIMEOUT_S,
                per_address=MAX_CLIENTS_PER_ADDRESS,
                reserved=KIOSK_SLOTS,
                send_buffer=SEND_BUFFER_BYTES,
            )
        with listening_on("table display", config.host, config.http_port):
            self._http = _HttpServer((config.host, config.http_port), self, page_limits, clock)
        self._feed: FeedServer | None = None
        try:
            if feed:
                with listening_on("result feed", config.host, config.feed_port):
                    self._feed = FeedServer(
                        (config.host, config.feed_port),
                        self.hub,
                        log_reader,
                        heartbeat_s=heartbeat_s,
                        limits=feed_limits,
                        clock=clock,
                    )
        except BaseException:
            self._http.server_close()
            raise
        self._start(self._http.serve_forever, "display-http")
        if self._feed is not None:
            self._start(self._feed.serve_forever, "display-feed")

    @property
    def http_address(self) -> tuple[str, int]:
        return self._http.address

    @property
    def feed_address(self) -> tuple[str, int] | None:
        return None if self._feed is None else self._feed.address

    @property
    def page_server(self) -> CappedServer:
        """The page's HTTP server (its client count, for surveillance and tests)."""
        return self._http

    @property
    def feed_server(self) -> CappedServer | None:
        return self._feed

    @property
    def url(self) -> str:
        host, port = self.http_address
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    def page_settings(self) -> dict[str, Any]:
        """What the pages are told with each snapshot (the module docstring lists it): the
        configured settings, this server's instance and the clock now."""
        return {**self._settings, "instance": self.instance, "clock": self.page_clock()}

    def page_clock(self) -> dict[str, int | bool | None]:
        """The box's time for the page (issue 16): with every snapshot and every heartbeat."""
        return page_clock(self.clock_status, now_ns=self._wall_ns)

    def page_heartbeat(self) -> bytes:
        """The page's ``heartbeat`` event: the clock now."""
        return sse("heartbeat", self.page_clock())

    # --- TableDisplay ----------------------------------------------------------------------

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        """Called by the control thread after the screen's record is committed. Never blocks
        on a client: it only updates memory and wakes the streams."""
        self.hub.publish(Screen(screen), data, seq)

    def prepare(self, screen: Screen, data: Mapping[str, object]) -> None:
        """A screen decided ahead, made ready on the control thread (``PreparesScreens``)."""
        self.hub.prepare(Screen(screen), data)

    def committed(self, records: Sequence[StoredRecord], checkpoint: LoggedCheckpoint) -> None:
        """Called by the audit log on the control thread after each commit: the records go to
        the hub, serialised for the feed, and a correction, a void or an RNG commitment to the
        board."""
        self.hub.committed(records, checkpoint)

    def anchored(self, anchor: Mapping[str, object]) -> None:
        """The witness's newest cosignature the fleet accepted (controller/fleet): the page
        says how far the log is anchored. From the publisher's thread; memory only."""
        self.hub.set_anchor(anchor)

    def close(self, *, timeout: float = 30.0) -> None:
        """Both servers stopped, their clients' threads waited for, the log reader closed:
        within ``timeout`` in all (the appliance's stop budget); a client thread still
        sending or reading then (a daemon) is left behind, with a log line."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        self.hub.close()  # wakes every stream; each returns and its connection closes
        servers = [s for s in (self._http, self._feed) if s is not None]
        for server in servers:
            server.shut_down_within(max(0.0, deadline - time.monotonic()))
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        # The clients' threads end by themselves now (the hub woke every stream; a send or a
        # request waits at most its timeout): wait for them, bounded, so none outlives the
        # server still writing to a socket or to the log. The two servers' clients end
        # together: one wait, not one after the other.
        for server in servers:
            limits = server.limits
            bound = max(limits.request_timeout_s, limits.send_timeout_s) + 1.0
            left = min(bound, max(0.0, deadline - time.monotonic()))
            if not server.wait_for_clients(0, timeout=left):
                log.warning("%s: %d clients still served at close", server.name, server.clients)
        close_reader = getattr(self.log_reader, "close", None)  # its kept-open connections
        if close_reader is not None:
            close_reader()

    def __enter__(self) -> DisplayServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the log ---------------------------------------------------------------------------

    def _seed(self) -> int:
        """The trend board, the last corrections and voids and the RNG commitment as the log
        has them; returns the log size. Only the log's newest records are looked at (a
        commitment older than a session's life is not the current one)."""
        try:
            size = self.log_reader.size()
            # a result, its correction and its round's void each take a record: three a round
            board_records = self.log_reader.latest_of(
                {
                    RecordKind.RESULT,
                    RecordKind.RESULT_CORRECTED,
                    RecordKind.VOID,
                    RecordKind.RESULT_VOIDED,
                },
                limit=3 * TREND_LENGTH,
            )
            amended = self.log_reader.latest_of(
                {RecordKind.RESULT_CORRECTED, RecordKind.VOID}, limit=INTERVENTIONS
            )
            commits = self.log_reader.latest_of({RecordKind.RNG_COMMIT}, limit=1)
            cosigned = self.log_reader.latest_of({RecordKind.COSIGNED}, limit=1)
        except AuditLogError as exc:
            log.warning("display: cannot read the audit log: %s", exc)
            return 0
        trend = TrendBoard()
        for record in board_records:
            data = record.entry().get("data", {})
            if isinstance(data, dict):
                trend.record(record.kind, record.seq, data)
        interventions = []
        for record in amended:
            entry = record.entry()
            data = entry.get("data", {})
            shown = None
            if isinstance(data, dict):
                shown = intervention_of(record.kind, record.seq, entry.get("time"), data)
            if shown is not None:
                interventions.append(shown)
        commitment = None
        if commits:
            data = commits[-1].entry().get("data", {})
            commitment = commitment_of(
                {"commitment": data.get("commitment"), "rng_session": data.get("session")},
                commits[-1].seq,
            )
        anchor = anchor_of(cosigned[-1].entry().get("data", {})) if cosigned else None
        self.hub.seed(
            trend=trend.cells,
            commitment=commitment,
            last_seq=size,
            anchor=anchor,
            interventions=interventions,
        )
        return size

    def replay_after(self, after: EventId) -> list[tuple[str, dict[str, Any]]]:
        """Every screen after ``after``, as (SSE id, payload): records older than the bounded
        history are rebuilt from the log, the rest come from the history."""
        out: list[tuple[str, dict[str, Any]]] = []
        oldest = self.hub.oldest_id()
        try:
            size = self.log_reader.size()
            last = size if oldest is None else min(size, oldest.seq - 1)
            start = max(after.seq, last - REPLAY_FROM_LOG_MAX)
            while start < last:
                records = self.log_reader.records_after(start, limit=min(500, last - start))
                if not records:
                    break
                for record in records:
                    event = replay_event(record) if record.kind in REPLAYED_KINDS else None
                    if event is not None:
                        out.append((event["id"], event))
                start = records[-1].seq
        except AuditLogError as exc:
            log.warning("display: cannot catch up from the audit log: %s", exc)
        for message in self.hub.screens_after(after):
            assert message.event_id is not None
            out.append((str(message.event_id), message.payload))
        return out

    # --- helpers ---------------------------------------------------------------------------

    def _start(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)


def _fixed_settings(
    config: DisplayConfig, limits: LimitsConfig | None, paytables: Sequence[Paytable]
) -> dict[str, Any]:
    """The page's settings that the config fixes, JSON-safe (issue 16): the languages in the
    order shown, the certificate holder's name (621a.2(b)(1)), the table limits of the wagers
    given limits (null when none are), and the paytables with their odds as "N to M"."""
    shown = None if limits is None else limits.configured()
    return {
        "stats_panel": config.stats_panel,
        "languages": [str(language) for language in config.languages],
        "brand": config.brand,
        "limits": (
            {
                "currency": limits.currency,
                **{name: {"min": b.min, "max": b.max} for name, b in shown.items()},
            }
            if limits is not None and shown
            else None
        ),
        "paytables": paytables_record(paytables),
    }


class _PageHandler(BaseHTTPRequestHandler):
    server: _HttpServer
    server_version = "paigow-display"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        limits = self.server.limits
        self.rfile.close()  # read through the bounded reader instead
        self.rfile = io.BufferedReader(
            RequestReader(
                self.connection,
                timeout_s=limits.request_timeout_s,
                max_bytes=REQUEST_MAX_BYTES,
                send_timeout_s=SEND_SLICE_S,
            )
        )
        self.watch = self.server.unread_watch(self.connection)
        self.wfile.close()  # write through the watch instead: a client that does not take
        self.wfile = WatchedWriter(self.watch)  # what it is sent is dropped after the bound

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("display http: " + format, *args)

    def log_error(self, format: str, *args: Any) -> None:
        """A malformed or stalled request: one line, and the connection is closed."""
        log.info("display client %s: " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        try:
            self._get()
        except (ConnectionError, TimeoutError) as exc:
            log.info("display client %s dropped: %s", self.address_string(), exc)
            self.close_connection = True

    def _get(self) -> None:
        parts = urlsplit(self.path)
        if parts.path in PAGE_STREAMS:
            self._events(parse_qs(parts.query), players=PAGE_STREAMS[parts.path])
            return
        asset = self.server.display._assets.get(parts.path)
        if parts.path == "/favicon.ico":
            self.send_response(HTTPStatus.NO_CONTENT)
            self.end_headers()
            return
        if asset is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        body, kind = asset
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        headers = dict(_SECURITY_HEADERS)
        if kind == "font/woff2":
            headers["Cache-Control"] = FONT_CACHE_CONTROL
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _events(self, query: dict[str, list[str]], *, players: bool) -> None:
        """The page's stream, until the hub closes or the client goes (or stops reading);
        ``players``: the players' stream (events.for_players: nothing supervisor-only)."""
        display = self.server.display
        hub = display.hub
        after = EventId.parse(self.headers.get("Last-Event-ID")) or EventId.parse(
            (query.get("last") or [""])[0]
        )
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        for name, value in _SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(b"retry: 1000\n\n")
        if after is not None:
            for event_id, payload in display.replay_after(after):
                shown = for_players(payload) if players else payload
                self.wfile.write(sse("replay", shown, event_id))
        number = self._snapshot(players=players)
        sock = self.connection
        while not hub.is_closed():
            live = hub.go_live_page(sock, number, players=players)
            if live is not None:  # up to date: the control thread sends to it from now on
                try:
                    hub.stay_live(
                        live,
                        lambda: display.heartbeat_s,
                        page_heartbeat=display.page_heartbeat,
                        check=self.watch.check,
                    )
                finally:
                    sock.settimeout(SEND_SLICE_S)
                if live.error is not None:
                    raise live.error
                self.wfile.write(live.backlog)
                number = live.position
                continue
            messages, missed = hub.wait_messages(number, display.heartbeat_s)
            if hub.is_closed():
                break
            if missed:
                number = self._snapshot(players=players)
                continue
            if not messages:
                self.wfile.write(display.page_heartbeat())
                self.wfile.flush()
                continue
            self.wfile.write(b"".join(m.players_sse if players else m.sse for m in messages))
            number = messages[-1].number
            self.wfile.flush()
        with contextlib.suppress(OSError):
            self.wfile.flush()

    def _snapshot(self, *, players: bool) -> int:
        display = self.server.display
        number, view, event_id = display.hub.snapshot(players=players)
        view["settings"] = display.page_settings()
        self.wfile.write(sse("snapshot", view, None if event_id is None else str(event_id)))
        self.wfile.flush()
        return number
