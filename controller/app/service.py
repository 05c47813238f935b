"""The service terminal: the supervisor's actions typed at a terminal on the box.

``paigow-controller supervise ...`` connects to the running controller over a Unix domain
socket, ``control.sock`` in the service's runtime directory (``$RUNTIME_DIRECTORY``, which
systemd makes for ``RuntimeDirectory=``) or, without one, in the state directory. The socket
is mode 0660, owned by the service's user and group: being allowed to open it (root or the
service's group) is the second factor. The first is the physical supervisor key switch: the
controller reads it when a command arrives and the core refuses a supervisor action without
it. Nothing the client sends can say it holds the key.

**Protocol.** One request per connection: one line of printable ASCII ending in ``\\n``, at
most ``MAX_REQUEST_BYTES`` (512) bytes with the newline, holding a JSON object in the canonical
form of the audit records (``controller/core/canonical.py``: keys sorted, no spaces)::

    {"action":"dice_replaced"}                       the next number
    {"action":"dice_replaced","id":"B-0417"}         1..16 ASCII letters, digits or '-'
    {"action":"shaker_inspected","note":"lid ok"}    note optional
    {"action":"void_result","note":"seat 3","reason":"misread"}
    {"action":"mode_switch","mode":"rng"}            shaker, rng or manual
    {"action":"service_mode"}                        into service mode, or out of it
    {"action":"lamp_test"}                           in service mode: every lamp lit
    {"action":"dice_kept","note":"weighed, calipered"}  after a dice alarm; note optional
    {"action":"recall","back":"3"}                   the display recalls a round (1: newest)
    {"action":"recall_leave"}                        the display returns to the table

``action`` is one of the nine above and no other key is taken than those shown; a note is at
most ``MAX_NOTE_CHARS`` (120) printable ASCII characters; a reason is one of
:class:`~controller.core.state.VoidReason`, a mode one of :class:`~controller.core.state.Mode`.
The reply is one line of JSON (ASCII), then the connection closes::

    {"action":"dice_replaced","ok":true,"records":[{"kind":"dice_replaced","seq":42}]}
    {"action":"service_mode","in_service":true,"ok":true,"records":[...]}
    {"action":"void_result","ok":false,"records":[],"refused":"voiding a result needs ..."}
    {"error":"bad_request","ok":false,"detail":"unknown action 'x'"}

``records`` are those the table made durable for the action (with what followed from it);
``refused`` is the table's reason (the REFUSED screen's, or the rule or state it broke, such as
a mode the table's ``[table] modes`` does not allow). ``in_service`` (``service_mode`` only) is
the ``entered`` of the ``service_mode`` record the toggle made, read back from the audit log:
whether the table is now in service mode (absent if the log could not be read).
``error`` is ``bad_request`` (nothing outside the grammar becomes an event; each is counted
and logged), ``timeout`` (no full line within ``READ_TIMEOUT_S``), ``busy`` (more than
``MAX_CLIENTS`` connections at once) or ``no_answer`` (the control thread did not step the
action within ``ANSWER_TIMEOUT_S``: it may still be recorded, look at the log).

**Threads.** One thread accepts; each connection gets a thread of its own, at most
``MAX_CLIENTS`` at a time, so a silent or slow client holds only its own. The control thread
is never waited on by anything but a connection's thread (bounded). The server's lock is a
leaf: nothing else is called while it is held.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from controller.audit.log import AuditLog
from controller.core import canonical
from controller.core.digits import MAX_SEQ, NumberError, parse_bounded_int
from controller.core.state import (
    RECALL_DEPTH,
    Event,
    Mode,
    Occurrence,
    VoidReason,
    check_dice_set_id,
)
from controller.display.log_reader import SqliteLogReader
from controller.errors import ControllerError, GameRuleError

if TYPE_CHECKING:
    from controller.app.loop import Outcome

log = logging.getLogger("paigow.service")

SOCKET_NAME = "control.sock"
DEFAULT_SOCKET = Path("/run/paigow-controller") / SOCKET_NAME  # RuntimeDirectory= of the unit
SOCKET_MODE = 0o660
MAX_REQUEST_BYTES = 512  # the line with its newline
MAX_REPLY_BYTES = 16_384
MAX_NOTE_CHARS = 120
MAX_CLIENTS = 4
READ_TIMEOUT_S = 2.0  # for the whole request line, however it trickles in
ANSWER_TIMEOUT_S = 5.0  # for the control thread to step the action
CLIENT_TIMEOUT_S = READ_TIMEOUT_S + ANSWER_TIMEOUT_S + 3.0
_SUN_PATH_MAX = 107  # sockaddr_un.sun_path, without its NUL

# action -> (event, keys it takes besides "action", keys it needs)
ACTIONS: Mapping[str, tuple[Event, frozenset[str], frozenset[str]]] = {
    "dice_replaced": (Event.DICE_REPLACED, frozenset({"id"}), frozenset()),
    "shaker_inspected": (Event.SHAKER_INSPECTED, frozenset({"note"}), frozenset()),
    "void_result": (
        Event.VOID_RESULT,
        frozenset({"note", "reason", "result"}),
        frozenset({"reason", "result"}),
    ),
    "mode_switch": (Event.MODE_SWITCH, frozenset({"mode"}), frozenset({"mode"})),
    "service_mode": (Event.SERVICE_MODE, frozenset(), frozenset()),
    "lamp_test": (Event.LAMP_TEST, frozenset(), frozenset()),
    "dice_kept": (Event.DICE_KEPT, frozenset({"note"}), frozenset()),
    "recall": (Event.RECALL, frozenset({"back"}), frozenset({"back"})),
    "recall_leave": (Event.RECALL, frozenset(), frozenset()),
}
# done without a record: the lamps are lit; the display steps to another recalled round
RECORDS_NOTHING = frozenset({"lamp_test", "recall"})


class ServiceTerminalError(ControllerError, OSError):
    """The service terminal cannot be served, or its controller cannot be reached or answered
    outside the grammar."""


class TerminalUnavailable(ServiceTerminalError, ConnectionError):
    """No controller answers at the socket (not running, or a socket left by a crash)."""


class RequestError(ControllerError, ValueError):
    """A request outside the grammar: it never becomes an event."""


class SupervisorKey(Protocol):
    """The physical supervisor key switch (``drivers.panel.GpioPanel``)."""

    @property
    def is_supervisor_key_on(self) -> bool: ...


class Submitter(Protocol):
    """The control loop's hook (``ControlLoop.submit``): an event and its outcome."""

    clock: Callable[[], int]

    def submit(self, occ: Occurrence) -> Outcome: ...

    def withdraw(self, outcome: Outcome) -> None: ...


def _is_served(path: Path) -> bool:
    """Whether something accepts connections on the socket at ``path`` right now."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(os.fspath(path))
    except OSError:
        return False
    else:
        return True
    finally:
        probe.close()


def socket_path(state_dir: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the controller serves the terminal: the runtime directory systemd made for it
    (the first of ``$RUNTIME_DIRECTORY``), else the state directory."""
    runtime = (os.environ if environ is None else environ).get("RUNTIME_DIRECTORY", "")
    first = runtime.split(":")[0]
    return (Path(first) if first else state_dir) / SOCKET_NAME


# --- the request grammar (pure) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    action: str
    dice_set: str | None = None  # dice_replaced: None is the next number
    note: str = ""
    reason: VoidReason | None = None  # void_result
    mode: Mode | None = None  # mode_switch: the mode to switch to
    result: tuple[int, int] | None = None  # void_result: the (round, attempt) shown, voided
    back: int | None = None  # recall: the round recalled, 1 the newest

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise RequestError(f"unknown action {_shown(self.action)}")
        if self.dice_set is not None:
            if self.action != "dice_replaced":
                raise RequestError("an id goes with dice_replaced only")
            try:
                check_dice_set_id(self.dice_set)
            except GameRuleError as exc:
                raise RequestError(str(exc)) from None
        if self.note and "note" not in ACTIONS[self.action][1]:
            raise RequestError(f"{self.action} takes no note")
        if len(self.note) > MAX_NOTE_CHARS or not all(" " <= c <= "~" for c in self.note):
            raise RequestError(f"a note is at most {MAX_NOTE_CHARS} printable ASCII characters")
        if (self.reason is None) == (self.action == "void_result"):
            raise RequestError("a reason goes with void_result, and only with it")
        if (self.mode is None) == (self.action == "mode_switch"):
            raise RequestError("a mode goes with mode_switch, and only with it")
        if (self.result is None) == (self.action == "void_result"):
            raise RequestError("the result (round.attempt) goes with void_result, and only with it")
        if self.result is not None and not all(1 <= n <= MAX_SEQ for n in self.result):
            raise RequestError("a result is named by its round and attempt, each 1 or more")
        if (self.back is None) == (self.action == "recall"):
            raise RequestError("back goes with recall, and only with it")
        if self.back is not None and not 1 <= self.back <= RECALL_DEPTH:
            raise RequestError(f"recall goes back 1 to {RECALL_DEPTH} rounds")

    def encode(self) -> bytes:
        """The request line, as ``parse_request`` takes it."""
        fields: dict[str, str] = {"action": self.action}
        if self.dice_set is not None:
            fields["id"] = self.dice_set
        if self.note:
            fields["note"] = self.note
        if self.reason is not None:
            fields["reason"] = str(self.reason)
        if self.mode is not None:
            fields["mode"] = str(self.mode)
        if self.result is not None:
            fields["result"] = f"{self.result[0]}.{self.result[1]}"
        if self.back is not None:
            fields["back"] = str(self.back)
        line = canonical.encode(fields) + b"\n"
        if len(line) > MAX_REQUEST_BYTES:  # pragma: no cover - the fields' bounds keep it short
            raise RequestError(f"the request is longer than {MAX_REQUEST_BYTES} bytes")
        return line

    def occurrence(self, *, at: int, supervisor: bool) -> Occurrence:
        event = ACTIONS[self.action][0]
        return Occurrence(
            event,
            at=at,
            supervisor=supervisor,
            detail=self.note,
            dice_set=self.dice_set,
            reason=self.reason,
            mode=self.mode,
            voids=self.result,
            back=self.back,
        )

    def summary(self) -> str:
        parts = [self.action]
        if self.dice_set is not None:
            parts.append(f"id={self.dice_set}")
        if self.reason is not None:
            parts.append(f"reason={self.reason}")
        if self.mode is not None:
            parts.append(f"mode={self.mode}")
        if self.result is not None:
            parts.append(f"result={self.result[0]}.{self.result[1]}")
        if self.back is not None:
            parts.append(f"back={self.back}")
        if self.note:
            parts.append(f"note={self.note!r}")
        return " ".join(parts)


def parse_request(data: bytes) -> Request:
    """The one request line of a connection (with its newline), or :class:`RequestError`."""
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestError(f"a request is at most {MAX_REQUEST_BYTES} bytes")
    if data.count(b"\n") != 1 or not data.endswith(b"\n"):
        raise RequestError("a connection sends one line, ending in a newline")
    line = data[:-1]
    if not all(0x20 <= b <= 0x7E for b in line):
        raise RequestError("a request is printable ASCII, one line")
    try:
        fields = canonical.decode(line)
    except canonical.EncodingError as exc:
        raise RequestError(f"not canonical JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise RequestError("a request is a JSON object")
    action = fields.get("action")
    if action is None:
        raise RequestError("a request names its action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise RequestError(f"unknown action {_shown(action)}")
    _, takes, needs = ACTIONS[action]
    unknown = sorted(set(fields) - takes - {"action"})
    if unknown:
        raise RequestError(f"{action} takes no {', '.join(_shown(k) for k in unknown)}")
    missing = sorted(needs - set(fields))
    if missing:
        raise RequestError(f"{action} needs {', '.join(missing)}")
    if not all(isinstance(value, str) for value in fields.values()):
        raise RequestError("every value is a string")
    reason = fields.get("reason")
    if reason is not None and reason not in {str(r) for r in VoidReason}:
        raise RequestError(
            f"reason {_shown(reason)} is not one of {', '.join(str(r) for r in VoidReason)}"
        )
    mode = fields.get("mode")
    if mode is not None and mode not in {str(m) for m in Mode}:
        raise RequestError(f"mode {_shown(mode)} is not one of {', '.join(str(m) for m in Mode)}")
    result = fields.get("result")
    back = fields.get("back")
    if back is not None:
        try:
            back = parse_bounded_int(back, low=1, high=RECALL_DEPTH, what="back")
        except NumberError as exc:
            raise RequestError(f"back {_shown(fields['back'])}: {exc}") from None
    return Request(
        action,
        dice_set=fields.get("id"),
        note=fields.get("note", ""),
        reason=None if reason is None else VoidReason(reason),
        mode=None if mode is None else Mode(mode),
        result=None if result is None else parse_result(result),
        back=back,
    )


def parse_result(text: str) -> tuple[int, int]:
    """``ROUND.ATTEMPT`` (ASCII digits, as the display shows them) -> (round, attempt)."""
    round_text, dot, attempt_text = text.partition(".")
    try:
        if not dot:
            raise NumberError("no '.'")
        number = parse_bounded_int(round_text, low=1, high=MAX_SEQ, what="round")
        attempt = parse_bounded_int(attempt_text, low=1, high=MAX_SEQ, what="attempt")
    except NumberError as exc:
        raise RequestError(f"result {_shown(text)} is not ROUND.ATTEMPT: {exc}") from None
    return number, attempt


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def outcome_reply(request: Request, outcome: Outcome) -> dict[str, object]:
    records = [{"kind": kind, "seq": seq} for kind, seq in outcome.records]
    reply: dict[str, object] = {"action": request.action, "records": records}
    if outcome.refused is not None:
        reply["refused"] = outcome.refused
    elif outcome.is_storage_failed:
        reply["refused"] = "the audit log failed: nothing was recorded (a storage fault)"
    elif not records and request.action not in RECORDS_NOTHING:
        reply["refused"] = "the table recorded nothing"
    reply["ok"] = "refused" not in reply
    return reply


def error_reply(error: str, detail: str) -> dict[str, object]:
    return {"ok": False, "error": error, "detail": detail}


def encode_reply(reply: Mapping[str, object]) -> bytes:
    return (
        json.dumps(reply, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        + b"\n"
    )


# --- the server -------------------------------------------------------------------------------


class ServiceTerminal:
    """Serves the terminal on a Unix socket, with a thread of its own (``start``, ``close``)."""

    def __init__(
        self,
        path: Path,
        *,
        loop: Submitter,
        key: SupervisorKey,
        read_timeout_s: float = READ_TIMEOUT_S,
        answer_timeout_s: float = ANSWER_TIMEOUT_S,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.path = path
        self.loop = loop
        self.key = key
        self.read_timeout_s = read_timeout_s
        self.answer_timeout_s = answer_timeout_s
        self.max_clients = max_clients
        self._slots = threading.BoundedSemaphore(max_clients)
        self._lock = threading.Lock()  # a leaf: the counts and the open connections
        self._connections: set[socket.socket] = set()
        self.counts = {"accepted": 0, "bad_request": 0, "timeout": 0, "busy": 0, "no_answer": 0}
        self._listener: socket.socket | None = None
        self._identity: tuple[int, int] | None = None  # the socket file's (st_dev, st_ino)
        self._wake_read, self._wake_write = -1, -1
        self._thread: threading.Thread | None = None
        self._closed = False
        # Where a toggle's record is read back (service_mode's ``entered``): the loop's own
        # audit log, with read-only connections of the terminal's (the writer's is the loop's).
        self._reader = _reader_of(loop)

    @property
    def clients(self) -> int:
        """Connections being served now."""
        with self._lock:
            return len(self._connections)

    # --- start and close ------------------------------------------------------------------

    def start(self) -> None:
        """Bind (a socket file left by a crash is replaced; any other file there is an error
        naming it), set the mode, listen, and start the accepting thread."""
        path = self.path
        # (bound first as <dir>/.ctl-XXXXXXXX/s, which must fit as well)
        if max(len(os.fsencode(path)), len(os.fsencode(path.parent)) + 16) > _SUN_PATH_MAX:
            raise ServiceTerminalError(
                f"service terminal: the socket path {path} is longer than {_SUN_PATH_MAX} bytes"
            )
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ServiceTerminalError(f"service terminal: {path}: {exc.strerror}") from exc
        else:
            if not stat.S_ISSOCK(mode):
                raise ServiceTerminalError(
                    f"service terminal: {path} exists and is not a socket; remove it or"
                    " choose another path"
                )
            if _is_served(path):  # another controller's, not one left by a crash
                raise ServiceTerminalError(
                    f"service terminal: another controller serves {path}; give this one its"
                    " own runtime or state directory"
                )
            log.info("service terminal: replacing the socket left at %s", path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound = False
        try:
            # Bound and given its mode (the access to it is the second factor) in a directory
            # of its own that nobody else may enter, then moved into place: no moment with the
            # umask's mode, and no chmod that could follow a link put where it is.
            private = Path(tempfile.mkdtemp(prefix=".ctl-", dir=path.parent))
            try:
                listener.bind(os.fspath(private / "s"))
                os.chmod(private / "s", SOCKET_MODE)
                os.rename(private / "s", path)
            finally:
                with contextlib.suppress(OSError):
                    (private / "s").unlink()
                with contextlib.suppress(OSError):
                    private.rmdir()
            bound = True
            info = path.lstat()
            listener.listen(MAX_CLIENTS * 2)
            listener.setblocking(False)  # select says when; a client gone by then costs nothing
        except OSError as exc:
            listener.close()
            if bound:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise ServiceTerminalError(
                f"service terminal: cannot listen at {path}: {exc.strerror or exc}"
            ) from exc
        self._identity = (info.st_dev, info.st_ino)
        self._listener = listener
        self._wake_read, self._wake_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._accept, name="service-terminal", daemon=True)
        self._thread.start()
        log.info("service terminal on %s", path)

    def close(self) -> None:
        """Stop accepting, drop the open connections, remove the socket file (if it is still
        ours). May be called twice."""
        if self._closed:
            return
        self._closed = True
        if self._wake_write >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # their threads see the end of the stream and finish
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._listener is not None:
            self._listener.close()
            self._remove_socket_file()
        for fd in (self._wake_read, self._wake_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self._reader is not None:
            self._reader.close()

    def _remove_socket_file(self) -> None:
        try:
            info = self.path.lstat()
            if (info.st_dev, info.st_ino) == self._identity:
                self.path.unlink()
        except OSError as exc:
            if not isinstance(exc, FileNotFoundError):
                log.warning("service terminal: cannot remove %s: %s", self.path, exc)

    def __enter__(self) -> ServiceTerminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the accepting thread ---------------------------------------------------------------

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                ready, _, _ = select.select([listener.fileno(), self._wake_read], [], [])
            except OSError:
                return
            if self._wake_read in ready:
                return
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                log.warning("service terminal: accept failed: %s", exc)
                continue
            if not self._slots.acquire(blocking=False):
                self._count("busy")
                log.warning("service terminal: more than %d clients at once", self.max_clients)
                # Without waiting: a new connection's buffer takes the short line at once.
                self._reply_and_close(conn, error_reply("busy", "too many clients at once"), 0)
                continue
            with self._lock:
                self._connections.add(conn)
            try:
                threading.Thread(
                    target=self._serve, args=(conn,), name="service-terminal-client", daemon=True
                ).start()
            except RuntimeError as exc:  # no thread to be had: this client only is dropped
                log.error("service terminal: %s", exc)
                with self._lock:
                    self._connections.discard(conn)
                self._slots.release()
                conn.close()

    # --- a connection's thread ------------------------------------------------------------

    def _serve(self, conn: socket.socket) -> None:
        try:
            reply = self._answer(conn)
            self._reply_and_close(conn, reply)
        except Exception:  # a bug: this connection ends, the server and the table go on
            log.exception("service terminal: a connection failed")
            with contextlib.suppress(OSError):
                conn.close()
        finally:
            with self._lock:
                self._connections.discard(conn)
            self._slots.release()

    def _answer(self, conn: socket.socket) -> dict[str, object]:
        peer = _peer(conn)
        try:
            data = self._read_line(conn)
        except TimeoutError:
            self._count("timeout")
            log.warning(
                "service terminal: %s sent no request within %ss", peer, self.read_timeout_s
            )
            return error_reply("timeout", f"no request line within {self.read_timeout_s} s")
        try:
            request = parse_request(data)
        except RequestError as exc:
            self._count("bad_request")
            log.warning("service terminal: bad request from %s: %s", peer, exc)
            return error_reply("bad_request", str(exc))
        try:
            supervisor = self.key.is_supervisor_key_on  # the key as it is now, nothing else
        except Exception:  # a key that cannot be read is a key that is off
            log.exception("service terminal: the supervisor key cannot be read")
            supervisor = False
        self._count("accepted")
        log.info(
            "service terminal: %s: %s (supervisor key %s)",
            peer,
            request.summary(),
            "on" if supervisor else "off",
        )
        outcome = self.loop.submit(request.occurrence(at=self.loop.clock(), supervisor=supervisor))
        if not outcome.wait_for_step(self.answer_timeout_s):
            self.loop.withdraw(outcome)
            self._count("no_answer")
            log.error("service terminal: no answer from the table for %s", request.action)
            return error_reply(
                "no_answer",
                f"the table did not answer within {self.answer_timeout_s} s; the action may"
                " still be recorded: look at the log",
            )
        reply = outcome_reply(request, outcome)
        if request.action == "service_mode" and reply["ok"] is True:
            in_service = self._in_service(reply)
            if in_service is not None:
                reply["in_service"] = in_service
        log.info("service terminal: %s: %s", request.action, _said(reply))
        return reply

    def _in_service(self, reply: Mapping[str, object]) -> bool | None:
        """The ``entered`` of the ``service_mode`` record the toggle made (None: not to be
        read; the reply then says only what was recorded)."""
        seqs = [r.get("seq") for r in _records(reply) if r.get("kind") == "service_mode"]
        if self._reader is None or len(seqs) != 1 or not isinstance(seqs[0], int):
            return None
        seq = seqs[0]
        try:
            found = self._reader.records_after(seq - 1, limit=1)
            entered = (
                found[0].data.get("entered")
                if found and (found[0].seq, found[0].kind) == (seq, "service_mode")
                else None
            )
        except (ControllerError, ValueError) as exc:  # the log unreadable, or the record
            log.warning("service terminal: cannot read back record #%d: %s", seq, exc)
            return None
        return entered if isinstance(entered, bool) else None

    def _read_line(self, conn: socket.socket) -> bytes:
        """Bytes up to and including the first newline, or the first bytes over the limit (the
        parser refuses them), or what came before the end of the stream. The whole line must
        come within ``read_timeout_s``."""
        deadline = time.monotonic() + self.read_timeout_s
        data = b""
        while b"\n" not in data and len(data) <= MAX_REQUEST_BYTES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            conn.settimeout(remaining)
            try:
                chunk = conn.recv(MAX_REQUEST_BYTES + 1 - len(data))
            except TimeoutError:
                raise
            except OSError:
                break  # reset, or shut down by close(): what came is all there is
            if not chunk:
                break
            data += chunk
        return data

    def _reply_and_close(
        self, conn: socket.socket, reply: Mapping[str, object], timeout_s: float | None = None
    ) -> None:
        try:
            conn.settimeout(self.read_timeout_s if timeout_s is None else timeout_s)
            conn.sendall(encode_reply(reply))
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the client went away: nothing more to tell it
        finally:
            conn.close()

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1


def _peer(conn: socket.socket) -> str:
    """Who connected, for the journal: the kernel's word (SO_PEERCRED), not the client's."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - Linux has it
        return "a client"
    try:
        pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, 12))
    except OSError:
        return "a client"
    return f"uid {uid} gid {gid} pid {pid}"


def _said(reply: Mapping[str, object]) -> str:
    if reply.get("ok"):
        said = "recorded " + ", ".join(f"{r['kind']} #{r['seq']}" for r in _records(reply))
        return said + in_service_said(reply)
    return f"refused: {reply.get('refused')}"


def in_service_said(reply: Mapping[str, object]) -> str:
    """What a service mode toggle's reply says of the table now ("" when it says nothing)."""
    in_service = reply.get("in_service")
    if in_service is True:
        return "; the table is now in service mode"
    if in_service is False:
        return "; the table is now out of service mode"
    return ""


def _reader_of(loop: object) -> SqliteLogReader | None:
    """A reader of the loop's audit log file, if the loop has one."""
    audit = getattr(getattr(loop, "ports", None), "log", None)
    return SqliteLogReader.of(audit) if isinstance(audit, AuditLog) else None


def _records(reply: Mapping[str, object]) -> list[Mapping[str, object]]:
    records = reply.get("records")
    return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []


# --- the client ---------------------------------------------------------------------------------


def send_request(
    path: Path, request: Request, *, timeout_s: float = CLIENT_TIMEOUT_S
) -> dict[str, object]:
    """Send one request and return the controller's reply. Raises
    :class:`TerminalUnavailable` when nothing answers at ``path``, ``PermissionError`` when
    the socket is not ours to open, :class:`ServiceTerminalError` for anything else."""
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise TerminalUnavailable(f"the socket path {path} is longer than {_SUN_PATH_MAX} bytes")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        try:
            conn.connect(os.fspath(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise TerminalUnavailable(
                f"no controller answers at {path} ({exc.strerror}): is paigow-controller running?"
            ) from None
        except PermissionError:
            raise
        except OSError as exc:
            raise ServiceTerminalError(f"cannot connect to {path}: {exc.strerror or exc}") from exc
        try:
            conn.sendall(request.encode())
            data = _read_reply(conn)
        except TimeoutError:
            raise ServiceTerminalError(
                f"the controller at {path} did not answer within {timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise ServiceTerminalError(f"the connection to {path} failed: {exc}") from exc
    try:
        reply = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        reply = None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise ServiceTerminalError(f"the controller at {path} answered outside the protocol")
    return reply


def _read_reply(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REPLY_BYTES:
            break
    return data
