"""The floor dashboard: a web page of every table, live, served by the witness.

:class:`DashboardServer` serves what a :class:`controller.witness.floor.Floor` holds::

    floor = Floor(clock=time.time, settings=FloorSettings(min_games_per_hour=10))
    dashboard = DashboardServer(floor, host="127.0.0.1", port=8090)  # binds here (OSError)
    dashboard.start()        # serves, and asks the floor to refresh every ``refresh_s``
    print(dashboard.url)
    dashboard.close()        # may be called twice

Paths (GET, and HEAD; and one POST; anything else is a 405, a request too large a 414 or 431,
an unknown path a 404, never a traceback):

- ``/``: the page (``assets/floor.html``, ``floor.css``, ``floor.js``: nothing from outside the
  box, a strict Content-Security-Policy, every text from a table set as text, never as HTML);
- ``/state.json``: the whole view now (``Floor.snapshot``);
- ``/events``: Server-Sent Events: ``retry: 1000``; ``snapshot`` (the whole view) at once;
  then on each change ``delta`` (the tables that changed, whole, and the alerts added, newest
  first; a ``snapshot`` again if the client fell behind the bounded alert list), changes
  within ``coalesce_s`` sent together; ``heartbeat`` (``now_ms``, the witness's clock, and
  ``version``) when nothing was sent for ``heartbeat_s``. Each event's id is the floor's
  version. The page treats about three seconds without an event as a lost stream and says so.
- ``POST /alerts/<id>/ack``, body ``{"user": "<name>"}`` (JSON, ``Content-Type:
  application/json``, at most 1 KiB): a named user acknowledges the witness's alert ``<id>``;
  the witness records who and when in its store (on its control thread: ``acknowledge``) and
  the page shows it. 200 with the alert's acknowledgement, 409 when someone acknowledged it
  already (who and when), 404 no such alert, 400 a body without a user name (1 to 64
  printable characters), 415 not JSON, 503 the witness did not answer in time.

  An acknowledgement is a write, so it is taken only from someone the witness can name as
  allowed: with ``ack_token`` (``paigow-controller witness --ack-token-file``), a request
  that carries ``Authorization: Bearer <token>``, from anywhere (401 otherwise); without one,
  a request from the loopback address only (403 otherwise). Either way a request whose
  ``Origin`` is not the page's own is refused (403), and the JSON content type cannot be sent
  by another site's form without a CORS preflight, which is never answered (a page elsewhere
  in a pit boss's browser cannot acknowledge for them).

Bounds, as the table display's server has them (both serve with controller/web: its bounded
request reader and capped server): ``host`` is the loopback address unless set
otherwise on purpose; at most ``MAX_CLIENTS`` connections (more get a 503 at once); the
request line and headers within ``REQUEST_TIMEOUT_S`` and ``REQUEST_MAX_BYTES``; a client that
does not read for ``SEND_TIMEOUT_S`` is dropped, and each stream sends on its own thread, so
it holds up no other. Each costs one log line.
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from controller.web.capped import CappedServer, ClientLimits
from controller.web.pages import HttpCappedServer, RequestReader, listening_on, load_assets
from controller.web.sse import sse
from controller.witness.floor import Floor, local_text
from controller.witness.ports import StoredAlert

# (the alert as it is now or None, whether this acknowledgement is the one recorded); raises
# TimeoutError when the witness does not answer in time
Acknowledge = Callable[[int, str], tuple[StoredAlert | None, bool]]

log = logging.getLogger("paigow.floor")

DEFAULT_PORT = 8090
ASSETS = {
    "/": ("floor.html", "text/html; charset=utf-8"),
    "/index.html": ("floor.html", "text/html; charset=utf-8"),
    "/floor.css": ("floor.css", "text/css; charset=utf-8"),
    "/floor.js": ("floor.js", "text/javascript; charset=utf-8"),
}
MAX_CLIENTS = 32  # pages and streams at once: the pit's screens, a few others; more get 503
REQUEST_TIMEOUT_S = 5.0  # the request line and headers, in all
REQUEST_MAX_BYTES = 16 * 1024  # the request line and headers
SEND_TIMEOUT_S = 10.0  # a client that does not read for this long is dropped
MAX_ACK_BYTES = 1024  # the body of an acknowledgement
MAX_USER_CHARS = 64
_ACK_PATH = re.compile(r"/alerts/([1-9][0-9]{0,17})/ack")
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none';"
        " frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
}


class _HttpServer(HttpCappedServer):
    name = "floor dashboard"
    logger = log

    def __init__(
        self, address: tuple[str, int], dashboard: DashboardServer, limits: ClientLimits
    ) -> None:
        self.dashboard = dashboard
        super().__init__(address, _Handler, limits)


class DashboardServer:
    """The floor's page, its state and its event stream over HTTP (see the module docstring).
    Listens from the constructor (an address taken raises OSError naming it); ``start``
    serves; ``close`` stops and may be called twice."""

    def __init__(
        self,
        floor: Floor,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        heartbeat_s: float = 1.0,
        refresh_s: float = 5.0,
        coalesce_s: float = 0.1,
        limits: ClientLimits | None = None,
        acknowledge: Acknowledge | None = None,
        ack_token: str = "",
    ) -> None:
        self.floor = floor
        self.acknowledge = acknowledge
        self.ack_token = ack_token
        self.heartbeat_s = heartbeat_s
        self.refresh_s = refresh_s
        self.coalesce_s = coalesce_s
        self.assets = load_assets("controller.witness", ASSETS)
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._closed = False
        if limits is None:
            limits = ClientLimits(MAX_CLIENTS, REQUEST_TIMEOUT_S, SEND_TIMEOUT_S)
        with listening_on("floor dashboard", host, port):
            self._http = _HttpServer((host, port), self, limits)

    @property
    def address(self) -> tuple[str, int]:
        return self._http.address

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    @property
    def page_server(self) -> CappedServer:
        """The HTTP server (its client count, for tests and the witness's health)."""
        return self._http

    def is_closing(self) -> bool:
        return self._closing.is_set()

    def start(self) -> DashboardServer:
        if self._started or self._closed:
            return self
        self._started = True
        for target, name in ((self._http.serve_forever, "floor-http"), (self._tick, "floor-tick")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self.floor.wake()  # every stream returns and its connection closes
        self._http.shutdown()
        self._http.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        limits = self._http.limits
        bound = max(limits.request_timeout_s, limits.send_timeout_s) + self.heartbeat_s + 1.0
        if not self._http.wait_for_clients(0, timeout=bound):
            log.warning("floor dashboard: %d clients still served at close", self._http.clients)

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tick(self) -> None:
        """The passing of time: games per hour and the alerts that depend on it."""
        while not self._closing.wait(self.refresh_s):
            try:
                self.floor.refresh()
            except Exception:
                log.exception("floor dashboard: refresh failed")


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    server_version = "paigow-floor"
    sys_version = ""
    default_request_version = "HTTP/1.0"  # an error to a malformed request has a status line
    raw_requestline: bytes  # set by http.server before parse_request

    def setup(self) -> None:
        super().setup()
        limits = self.server.limits
        self.rfile.close()  # read through the bounded reader instead
        self._reader = RequestReader(
            self.connection,
            timeout_s=limits.request_timeout_s,
            max_bytes=REQUEST_MAX_BYTES,
            send_timeout_s=limits.send_timeout_s,
        )
        self.rfile = io.BufferedReader(self._reader)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("floor http: " + format, *args)

    def log_error(self, format: str, *args: Any) -> None:
        """A malformed or stalled request: one line, and the connection is closed."""
        log.info("floor client %s: " + format, self.address_string(), *args)

    def parse_request(self) -> bool:
        """http.server's parsing, stricter: a request line or headers past the size cap, an
        HTTP/0.9 request (no version: its answer would have no status line), or a method
        other than GET or HEAD is refused with a 4xx, and the connection closed."""
        self.command, self.request_version = None, self.default_request_version  # type: ignore[assignment]
        self.requestline = ""
        if not self.raw_requestline.endswith(b"\n"):
            if self._reader.is_cut:
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
            else:
                self.send_error(HTTPStatus.BAD_REQUEST, "incomplete request line")
            return False
        if not super().parse_request():
            return False
        if self._reader.is_cut:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            return False
        if len(self.requestline.split()) != 3:
            self.send_error(HTTPStatus.BAD_REQUEST, "an HTTP/1.x request line")
            return False
        if self.command not in ("GET", "HEAD", "POST"):
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED)
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A plain text error, with the page's security headers; the connection closes."""
        status = HTTPStatus(code)
        self.log_error("%d %s", code, message or status.phrase)
        self.close_connection = True
        body = f"{code} {status.phrase}\n".encode()
        self.send_response(code, status.phrase)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def do_GET(self) -> None:
        try:
            self._get()
        except (ConnectionError, TimeoutError) as exc:
            log.info("floor client %s dropped: %s", self.address_string(), exc)
            self.close_connection = True

    def do_HEAD(self) -> None:
        self.do_GET()  # _send and _events leave the body out

    def do_POST(self) -> None:
        try:
            self._post()
        except (ConnectionError, TimeoutError) as exc:
            log.info("floor client %s dropped: %s", self.address_string(), exc)
            self.close_connection = True

    def _post(self) -> None:
        matched = _ACK_PATH.fullmatch(self.path)
        if matched is None:
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED)
            return
        dashboard = self.server.dashboard
        refusal = self._allowed(dashboard)
        if refusal is not None:
            self.send_error(refusal)
            return
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            self.send_error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
            return
        length = self.headers.get("Content-Length", "")
        if not (length.isascii() and length.isdigit() and len(length) <= 6):
            self.send_error(HTTPStatus.LENGTH_REQUIRED)
            return
        if int(length) > MAX_ACK_BYTES:
            self.send_error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            return
        body = self.rfile.read(int(length))
        user = _user_of(body) if len(body) == int(length) else None
        if user is None:
            self.send_error(HTTPStatus.BAD_REQUEST, "a JSON body with the user's name")
            return
        if dashboard.acknowledge is None:
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE)
            return
        try:
            stored, recorded = dashboard.acknowledge(int(matched.group(1)), user)
        except TimeoutError:
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE)
            return
        if stored is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        code = HTTPStatus.OK if recorded else HTTPStatus.CONFLICT
        answer = _ack_view(stored, dashboard.floor.settings.zone)
        self._send(json.dumps(answer).encode(), "application/json; charset=utf-8", code)

    def _allowed(self, dashboard: DashboardServer) -> HTTPStatus | None:
        """Who may write: the token's bearer, or (no token) the loopback; and the page's own
        origin only."""
        origin = self.headers.get("Origin")
        host = self.headers.get("Host", "")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return HTTPStatus.FORBIDDEN
        if dashboard.ack_token:
            given = self.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            wanted = f"Bearer {dashboard.ack_token}".encode()
            return None if hmac.compare_digest(given, wanted) else HTTPStatus.UNAUTHORIZED
        try:
            loopback = ipaddress.ip_address(self.client_address[0]).is_loopback
        except ValueError:
            loopback = False
        return None if loopback else HTTPStatus.FORBIDDEN

    def _get(self) -> None:
        path = self.path.partition("?")[0]
        dashboard = self.server.dashboard
        if path == "/events":
            self._events()
            return
        if path == "/favicon.ico":
            self.send_response(HTTPStatus.NO_CONTENT)
            self.end_headers()
            return
        if path == "/state.json":
            body = json.dumps(dashboard.floor.snapshot(), separators=(",", ":")).encode()
            self._send(body, "application/json; charset=utf-8")
            return
        asset = dashboard.assets.get(path)
        if asset is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        self._send(*asset)

    def _send(self, body: bytes, kind: str, code: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _events(self) -> None:
        """The stream, until the server closes or the client goes (or stops reading)."""
        dashboard = self.server.dashboard
        floor = dashboard.floor
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.write(b"retry: 1000\n\n")
        version = self._snapshot()
        while not dashboard.is_closing():
            changed = floor.wait_for_change(
                version, dashboard.heartbeat_s, is_stopped=dashboard.is_closing
            )
            if dashboard.is_closing():
                break
            if not changed:
                beat = {"now_ms": floor.now_ms(), "version": version}
                self.wfile.write(sse("heartbeat", beat))
                continue
            if dashboard.coalesce_s > 0 and dashboard._closing.wait(dashboard.coalesce_s):
                break
            delta = floor.changes_since(version)
            if delta is None:  # it fell behind the alert list: the whole view again
                version = self._snapshot()
                continue
            version = delta["version"]
            self.wfile.write(sse("delta", delta, str(version)))

    def _snapshot(self) -> int:
        view = self.server.dashboard.floor.snapshot()
        self.wfile.write(sse("snapshot", view, str(view["version"])))
        version: int = view["version"]
        return version


def _user_of(body: bytes) -> str | None:
    """The user name of an acknowledgement's body: 1 to 64 printable characters."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    user = value.get("user") if isinstance(value, dict) else None
    if not isinstance(user, str):
        return None
    user = user.strip()
    if not 0 < len(user) <= MAX_USER_CHARS or not user.isprintable():
        return None
    return user


def _ack_view(stored: StoredAlert, zone: tzinfo) -> dict[str, object]:
    return {
        "id": stored.id,
        "table": stored.alert.table,
        "kind": str(stored.alert.kind),
        "acked_by": stored.acked_by,
        "acked_at": stored.acked_at,
        "acked_local": local_text(stored.acked_at, zone),
    }


class LocalZone(tzinfo):
    """The zone this process runs in (``TZ``, else the system's), its offset and name asked
    of the C library for each moment, so a summer time change is followed."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(seconds=self._local(dt).tm_gmtoff)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=1) if self._local(dt).tm_isdst > 0 else timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return self._local(dt).tm_zone

    def fromutc(self, dt: datetime) -> datetime:
        seconds = (dt.replace(tzinfo=None) - _EPOCH) // timedelta(seconds=1)
        return dt + timedelta(seconds=time.localtime(seconds).tm_gmtoff)

    @staticmethod
    def _local(dt: datetime | None) -> time.struct_time:
        """The C library's local time at the wall-clock moment ``dt`` (naive, local)."""
        if dt is None:
            return time.localtime()
        seconds = (dt.replace(tzinfo=None) - _EPOCH) // timedelta(seconds=1)
        return time.localtime(seconds - time.localtime(seconds).tm_gmtoff)


_EPOCH = datetime(1970, 1, 1)
