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

    {"action":"correct_result","dice":"4,2,3","employee":"S1021","reason":"misread","result":"30.1"}
    {"action":"void_round","employee":"S1021","note":"seat 3","reason":"tile_exposed","round":"30"}
    {"action":"dice_replaced","employee":"S1021"}            the next number
    {"action":"dice_replaced","employee":"S1021","id":"B-0417"}
    {"action":"tiles_inspected","dealer":"D2207","employee":"F0310","set":"T-0921"}
    {"action":"tiles_shuffled","employee":"D2207"}           reason new_game (default) or remix
    {"action":"shift_change","employee":"D2207"}             the dealer coming on
    {"action":"clear_fault","employee":"S1021"}
    {"action":"clear_fault","employee":"T0042","note":"anchor deleted in repair"}  why: a
                                                             missing anchor needs it
    {"action":"shaker_inspected","employee":"S1021","note":"lid ok"}
    {"action":"mode_switch","employee":"S1021","mode":"rng"}  shaker, rng or manual
    {"action":"service_mode","employee":"T0042"}             into service mode, or out of it
    {"action":"lamp_test","employee":"T0042"}                in service mode: every lamp lit
    {"action":"dice_kept","employee":"S1021","note":"weighed"}  after a dice alarm
    {"action":"recall","back":"3","employee":"S1021"}        the display recalls a round
    {"action":"recall_leave","employee":"S1021"}             the display returns to the table
    {"action":"status"}                                      read only: the table's status

``status`` is the one action that reads and never acts: it takes no other key, needs no
supervisor key and no employee id (the journal still names the operating system's account that
asked, from SO_PEERCRED, and the reply carries its uid as ``asked_by``); the controller
answers with ``status``, the report of ``controller.core.status`` (``paigow-controller
status`` prints it), without the control thread stepping anything::

    {"action":"status","asked_by":1000,"ok":true,"status":{"faults":[...],"state":"idle",...}}

``action`` is one of those above (``ACTIONS``) and no other key is taken than those it shows;
every action names the employee who does it (1..16 ASCII letters and digits), and the record
also carries the operating system's account that sent it (SO_PEERCRED). A note is at most
``MAX_NOTE_CHARS`` (120) printable ASCII characters; a reason is one of the action's
(:class:`~controller.core.state.CorrectionReason`, the typed
:class:`~controller.core.state.VoidReason`, :class:`~controller.core.state.ShuffleReason`),
dice are ``R,B,B`` (the red die, then the two blue), a mode one of
:class:`~controller.core.state.Mode`. Who needs the supervisor key is the core's rule: a
correction, a round's void, a tile inspection (the floorperson's verification), the dice, the
mode, service mode, recall; a shuffle and a shift change are the dealer's.
The reply is one line of JSON (ASCII), then the connection closes::

    {"action":"dice_replaced","ok":true,"records":[{"kind":"dice_replaced","seq":42}]}
    {"action":"service_mode","in_service":true,"ok":true,"records":[...]}
    {"action":"correct_result","ok":false,"records":[],"refused":"correcting a result needs ..."}
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
from typing import TYPE_CHECKING, Protocol, TypeVar

from controller.audit.log import AuditLog
from controller.core import canonical
from controller.core.dice import Roll
from controller.core.digits import MAX_SEQ, parse_bounded_int
from controller.core.state import (
    RECALL_DEPTH,
    CorrectionReason,
    Event,
    Mode,
    Occurrence,
    ShuffleReason,
    VoidReason,
    check_dice_set_id,
    check_employee_id,
    occurrence,
)
from controller.display.log_reader import SqliteLogReader
from controller.errors import (
    ControllerError,
    EncodingError,
    GameRuleError,
    NumberError,
    RequestError,
    ServiceTerminalError,
    TerminalUnavailable,
)

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

_WHO = frozenset({"employee"})
# action -> (event, keys it takes besides "action", keys it needs): every action names the
# employee who does it (1..16 ASCII letters and digits)
ACTIONS: Mapping[str, tuple[Event, frozenset[str], frozenset[str]]] = {
    "dice_replaced": (Event.DICE_REPLACED, frozenset({"id", "employee"}), _WHO),
    "shaker_inspected": (Event.SHAKER_INSPECTED, frozenset({"note", "employee"}), _WHO),
    "correct_result": (
        Event.CORRECT_RESULT,
        frozenset({"result", "dice", "reason", "note", "employee"}),
        frozenset({"result", "dice", "reason", "employee"}),
    ),
    "void_round": (
        Event.VOID_ROUND,
        frozenset({"round", "reason", "note", "employee"}),
        frozenset({"round", "reason", "employee"}),
    ),
    "tiles_inspected": (
        Event.TILES_INSPECTED,
        frozenset({"set", "dealer", "employee"}),
        frozenset({"set", "dealer", "employee"}),
    ),
    "tiles_shuffled": (Event.SHUFFLED, frozenset({"reason", "employee"}), _WHO),
    "shift_change": (Event.SHIFT_CHANGE, _WHO, _WHO),
    # a note: why (a missing anchor is cleared only with one)
    "clear_fault": (Event.CLEAR_FAULT, frozenset({"note", "employee"}), _WHO),
    "mode_switch": (
        Event.MODE_SWITCH,
        frozenset({"mode", "employee"}),
        frozenset({"mode", "employee"}),
    ),
    "service_mode": (Event.SERVICE_MODE, _WHO, _WHO),
    "lamp_test": (Event.LAMP_TEST, _WHO, _WHO),
    "dice_kept": (Event.DICE_KEPT, frozenset({"note", "employee"}), _WHO),
    "recall": (Event.RECALL, frozenset({"back", "employee"}), frozenset({"back", "employee"})),
    "recall_leave": (Event.RECALL, _WHO, _WHO),
}
# done without a record: the lamps are lit; the display steps to another recalled round
RECORDS_NOTHING = frozenset({"lamp_test", "recall"})
# the read-only action: exactly this line (canonical JSON), no key, no employee, no event
STATUS_ACTION = "status"
STATUS_REQUEST = b'{"action":"status"}\n'
# what "reason" means for each action that takes one
_REASONS: Mapping[str, tuple[str, ...]] = {
    "correct_result": tuple(str(r) for r in CorrectionReason),
    "void_round": tuple(str(r) for r in VoidReason if r.is_typed),
    "tiles_shuffled": tuple(str(r) for r in ShuffleReason),
}


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
    """One action at the terminal, checked: what :func:`parse_request` gives and
    :meth:`encode` writes."""

    action: str
    employee: str  # who does it
    dice_set: str | None = None  # dice_replaced: None is the next number
    note: str = ""
    reason: str | None = None  # correct_result, void_round, tiles_shuffled (see _REASONS)
    mode: Mode | None = None  # mode_switch: the mode to switch to
    result: tuple[int, int] | None = None  # correct_result: the (round, attempt) shown
    dice: Roll | None = None  # correct_result: the dice as they lie
    round: int | None = None  # void_round: the round in play, as shown
    back: int | None = None  # recall: the round recalled, 1 the newest
    tile_set: str | None = None  # tiles_inspected
    dealer: str | None = None  # tiles_inspected: the dealer who inspected (employee verified)

    def __post_init__(self) -> None:  # noqa: C901 - input validator
        if self.action not in ACTIONS:
            raise RequestError(f"unknown action {_shown(self.action)}")
        _, takes, needs = ACTIONS[self.action]
        given = {key for key, value in self._fields().items() if value is not None}
        if not needs <= given:
            raise RequestError(f"{self.action} needs {', '.join(sorted(needs - given))}")
        if not given <= takes:
            raise RequestError(f"{self.action} takes no {', '.join(sorted(given - takes))}")
        try:
            check_employee_id(self.employee)
            if self.dealer is not None:
                check_employee_id(self.dealer)
            if self.dice_set is not None:
                check_dice_set_id(self.dice_set)
            if self.tile_set is not None:
                check_dice_set_id(self.tile_set, what="a tile set id")
        except GameRuleError as exc:
            raise RequestError(str(exc)) from None
        if len(self.note) > MAX_NOTE_CHARS or not all(" " <= c <= "~" for c in self.note):
            raise RequestError(f"a note is at most {MAX_NOTE_CHARS} printable ASCII characters")
        if self.reason is not None and self.reason not in _REASONS.get(self.action, ()):
            raise RequestError(
                f"reason {_shown(self.reason)} is not one of"
                f" {', '.join(_REASONS.get(self.action, ()))}"
            )
        if self.result is not None and not all(1 <= n <= MAX_SEQ for n in self.result):
            raise RequestError("a result is named by its round and attempt, each 1 or more")
        if self.round is not None and not 1 <= self.round <= MAX_SEQ:
            raise RequestError("a round is 1 or more")
        if self.back is not None and not 1 <= self.back <= RECALL_DEPTH:
            raise RequestError(f"recall goes back 1 to {RECALL_DEPTH} rounds")

    def _fields(self) -> dict[str, str | None]:
        """The request's keys and their text, as the line carries them (None: absent)."""
        return {
            "employee": self.employee,
            "id": self.dice_set,
            "note": self.note or None,
            "reason": self.reason,
            "mode": None if self.mode is None else str(self.mode),
            "result": None if self.result is None else f"{self.result[0]}.{self.result[1]}",
            "dice": None if self.dice is None else dice_text(self.dice),
            "round": None if self.round is None else str(self.round),
            "back": None if self.back is None else str(self.back),
            "set": self.tile_set,
            "dealer": self.dealer,
        }

    def encode(self) -> bytes:
        """The request line, as ``parse_request`` takes it."""
        fields = {"action": self.action}
        fields.update({k: v for k, v in self._fields().items() if v is not None})
        line = canonical.encode(fields) + b"\n"
        if len(line) > MAX_REQUEST_BYTES:  # pragma: no cover - the fields' bounds keep it short
            raise RequestError(f"the request is longer than {MAX_REQUEST_BYTES} bytes")
        return line

    def occurrence(self, *, at: int, supervisor: bool, uid: int | None = None) -> Occurrence:
        event = ACTIONS[self.action][0]
        reason = self.reason
        return occurrence(
            event,
            at=at,
            supervisor=supervisor,
            detail=self.note,
            employee=self.employee,
            uid=uid,
            dice_set=self.dice_set,
            mode=self.mode,
            back=self.back,
            result_meant=self.result,
            dice_seen=self.dice,
            correction=CorrectionReason(reason)
            if self.action == "correct_result" and reason
            else None,
            void_reason=VoidReason(reason) if self.action == "void_round" and reason else None,
            round_meant=self.round,
            shuffle=ShuffleReason(reason) if self.action == "tiles_shuffled" and reason else None,
            tile_set=self.tile_set,
            dealer=self.dealer,
        )

    def summary(self) -> str:
        parts = [self.action]
        for key, value in self._fields().items():
            if value is not None and key != "note":
                parts.append(f"{key}={value}")
        if self.note:
            parts.append(f"note={self.note!r}")
        return " ".join(parts)


def parse_request(data: bytes) -> Request:  # noqa: C901 - input validator
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
    except EncodingError as exc:
        raise RequestError(f"not canonical JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise RequestError("a request is a JSON object")
    action = fields.get("action")
    if action is None:
        raise RequestError("a request names its action")
    if action == STATUS_ACTION:  # the exact line is answered before parsing (``_answer``)
        raise RequestError("status takes no other key")
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
    mode = fields.get("mode")
    if mode is not None and mode not in {str(m) for m in Mode}:
        raise RequestError(f"mode {_shown(mode)} is not one of {', '.join(str(m) for m in Mode)}")
    return Request(
        action,
        employee=fields["employee"],
        dice_set=fields.get("id"),
        note=fields.get("note", ""),
        reason=fields.get("reason"),
        mode=None if mode is None else Mode(mode),
        result=_optional(parse_result, fields, "result"),
        dice=_optional(parse_dice, fields, "dice"),
        round=_optional(_number("round", MAX_SEQ), fields, "round"),
        back=_optional(_number("back", RECALL_DEPTH), fields, "back"),
        tile_set=fields.get("set"),
        dealer=fields.get("dealer"),
    )


_P = TypeVar("_P")


def _optional(parse: Callable[[str], _P], fields: Mapping[str, str], key: str) -> _P | None:
    return None if key not in fields else parse(fields[key])


def _number(what: str, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return parse_bounded_int(text, low=1, high=high, what=what)
        except NumberError as exc:
            raise RequestError(f"{what} {_shown(text)}: {exc}") from None

    return parse


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


def parse_dice(text: str) -> Roll:
    """``R,B,B``: the red die, then the two blue, each an ASCII digit 1..6."""
    faces = text.split(",")
    if len(faces) != 3 or not all(len(f) == 1 and f in "123456" for f in faces):
        raise RequestError(
            f"dice {_shown(text)} are not R,B,B (the red die, then the two blue, each 1..6)"
        )
    red, first, second = (int(f) for f in faces)
    return Roll(red, (first, second))


def dice_text(roll: Roll) -> str:
    return f"{roll.red},{roll.blue[0]},{roll.blue[1]}"


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
        status: Callable[[], Mapping[str, object]] | None = None,
    ) -> None:
        """``status``: the table's status report, read from a connection's thread (it never
        waits on the control thread); None answers ``status`` with an error."""
        self.path = path
        self.status = status
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
        if data == STATUS_REQUEST:
            return self._status(peer, _peer_uid(conn))
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
        occ = request.occurrence(at=self.loop.clock(), supervisor=supervisor, uid=_peer_uid(conn))
        outcome = self.loop.submit(occ)
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

    def _status(self, peer: str, uid: int | None) -> dict[str, object]:
        """The read-only ``status``: no key is read, no event made; who asked is logged."""
        self._count("accepted")
        log.info("service terminal: %s: status", peer)
        if self.status is None:
            return error_reply("bad_request", "this controller serves no status")
        try:
            status = dict(self.status())
        except Exception as exc:  # a bug in gathering it: this reply says so, the table goes on
            log.exception("service terminal: the status could not be gathered")
            return error_reply("no_answer", f"the status could not be gathered: {exc}")
        reply: dict[str, object] = {"action": STATUS_ACTION, "ok": True}
        reply["status"] = status
        reply["asked_by"] = uid
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


def _credentials(conn: socket.socket) -> tuple[int, int, int] | None:
    """The kernel's word on who connected (SO_PEERCRED: pid, uid, gid), not the client's."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - Linux has it
        return None
    try:
        pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, 12))
    except OSError:
        return None
    return int(pid), int(uid), int(gid)


def _peer(conn: socket.socket) -> str:
    """Who connected, for the journal."""
    credentials = _credentials(conn)
    if credentials is None:
        return "a client"
    pid, uid, gid = credentials
    return f"uid {uid} gid {gid} pid {pid}"


def _peer_uid(conn: socket.socket) -> int | None:
    """The operating system's account that sent the request, for the record."""
    credentials = _credentials(conn)
    return None if credentials is None else credentials[1]


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
    return _exchange(path, request.encode(), timeout_s)


def _exchange(path: Path, line: bytes, timeout_s: float) -> dict[str, object]:
    """One request line sent, one reply read and decoded."""
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
            conn.sendall(line)
            data = _read_reply(conn, time.monotonic() + timeout_s)
        except TimeoutError:
            raise ServiceTerminalError(
                f"the controller at {path} did not answer within {timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise ServiceTerminalError(f"the connection to {path} failed: {exc}") from exc
    return _decoded_reply(path, data)


def ask_status(path: Path, *, timeout_s: float = CLIENT_TIMEOUT_S) -> dict[str, object]:
    """The running controller's status (the ``status`` action's reply); raises as
    :func:`send_request` does."""
    return _exchange(path, STATUS_REQUEST, timeout_s)


def _decoded_reply(path: Path, data: bytes) -> dict[str, object]:
    try:
        reply = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # [[[[... nests too deep
        reply = None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise ServiceTerminalError(f"the controller at {path} answered outside the protocol")
    return reply


def _read_reply(
    conn: socket.socket, deadline: float, clock: Callable[[], float] = time.monotonic
) -> bytes:
    """The reply line, read by ``deadline`` in all: a peer that sends a byte now and then
    (each within the socket's timeout) is not waited on beyond it."""
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - clock()
        if remaining <= 0:
            raise TimeoutError
        conn.settimeout(remaining)
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REPLY_BYTES:
            break
    return data
