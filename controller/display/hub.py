"""The display's shared state: what is on screen now, the recent screens, the trend board.

The control thread publishes (``DisplayServer.show``, ``committed``) and never waits on a
client. A client that is up to date is a :class:`LiveClient`: the control thread sends it what
is new itself, serialised once for every client, with a send that does not wait (the socket is
non-blocking while it is live), so that no thread is woken and no GIL handed over between a
commit and the bytes leaving (issue 13: sensor frame to screen and feed within 1 ms). What does
not fit in the client's socket buffer is kept as its backlog and the client is live no more:
its own thread sends the backlog, waiting up to its send timeout (a client that does not read
is dropped), catches up from the hub's history or the log, and goes live again. A client that
is not live waits on the hub's condition variable, with a timeout, and reads. Whether a client
takes what it is sent is looked at on its own thread, live or not (clients.UnreadWatch): one
that leaves it untaken for the bound is dropped, even while its buffers still have room.

Each message is serialised twice, once for each stream: the supervisor's (everything) and the
players' page's (events.for_players: nothing that is the supervisor's alone, and the players'
statistics brought up to date with every result, events.ShiftTally). A live client is sent the
one of its page.

Locks: the hub's one lock guards everything here, the live clients included; a live client's
socket is sent to only under it (by the control thread, or by its own thread for a heartbeat).
Nothing is called out to while it is held but a non-blocking send.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.record_schema import CosignedRecord, RngCommit, read_lenient
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import Screen
from controller.display.events import (
    INTERVENTIONS,
    EventId,
    PreparedScreen,
    ShiftTally,
    TrendBoard,
    anchor_of,
    checkpoint_json,
    commitment_of,
    committed_feed_line,
    for_players,
    intervention_of,
    players_view,
    screen_event,
    trend_entry,
)
from controller.ports import LoggedCheckpoint
from controller.web.sse import sse, sse_of_json

# Screens that are a notice over what is shown, not a new state of the table.
NOTICE_SCREENS = frozenset({Screen.REFUSED})
# What some screens carry and the others do not repeat, kept for a page that connects later
# (its snapshot): the dice's statistics (bets open carries them; issue 15), the dice set with
# its warning (bets open, bets closed, a no roll; proposed 621a.5(c)), the set of tiles with
# its warning (bets open at tiles; 621a.6(a), 621a.3(e)) and the table's meters (bets open).
KEPT_KEYS = ("stats", "dice", "tiles", "meters")
# What only the dice have: an RNG table has none of it.
_DICE_KEYS = ("stats", "dice")
# The board's changes a record makes without a screen: a correction, a void, a voided result.
_BOARD_KINDS = frozenset({RecordKind.RESULT_CORRECTED, RecordKind.VOID, RecordKind.RESULT_VOIDED})


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the page's stream. ``number`` orders every message the hub made."""

    number: int
    event: str  # the SSE event name: "screen" or "notice"
    payload: dict[str, Any]
    event_id: EventId | None  # None for a notice: it does not move Last-Event-ID
    sse: bytes  # the message as the stream sends it (serialised once, when made)
    players_sse: bytes  # as the players' stream sends it (events.for_players)


# json.dumps with these arguments, without making a new encoder for each value (on the path
# from the sensor's frame to the page and the feed): the same text.
_COMPACT = json.JSONEncoder(separators=(",", ":"), default=str).encode
_FEED_LINE = json.JSONEncoder(separators=(",", ":")).encode


def _compact(value: object) -> str:
    return _COMPACT(value)


PAGE_HEARTBEAT = sse("heartbeat", {})


class LiveClient:
    """A client that is up to date, sent to by the control thread (see the module docstring).

    ``position`` is where the client is: for a feed client the sequence number of the next
    record it is owed, for a page the number of the last message it was sent. Every field is
    guarded by the hub's lock. Once ``is_live`` is false, only the client's own thread touches
    the socket again: it sends ``backlog`` (what the control thread could not), or raises
    ``error`` (the send that found the client gone)."""

    __slots__ = (
        "_cond",
        "backlog",
        "error",
        "is_live",
        "is_players",
        "last_sent",
        "position",
        "sock",
    )

    def __init__(
        self, sock: socket.socket, position: int, lock: threading.Lock, *, players: bool = False
    ) -> None:
        self.sock = sock
        self.is_players = players  # the players' page: sent the players' stream
        self.position = position
        self.backlog = b""
        self.error: OSError | None = None
        self.is_live = True
        self.last_sent = time.monotonic()
        self._cond = threading.Condition(lock)

    def _send(self, data: bytes) -> None:
        """Send without waiting; what does not fit ends the live state (the hub's lock held)."""
        if not self.is_live:
            return
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:  # the client went away
            self.error = exc
            self._fall()
            return
        self.last_sent = time.monotonic()
        if sent < len(data):
            self.backlog = data[sent:]
            self._fall()

    def _fall(self) -> None:
        self.is_live = False
        self._cond.notify()


class DisplayHub:
    """``records`` committed lately are kept as the feed's lines (serialised once, on the
    control thread), so that feed clients that are up to date never read the database."""

    def __init__(self, *, history: int = 256, table: str = "", records: int = 4096) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._live_feeds: list[LiveClient] = []
        self._live_pages: list[LiveClient] = []
        self._lines: deque[tuple[int, bytes]] = deque(maxlen=records)
        self._size = 0
        self._checkpoint: LoggedCheckpoint | None = None
        self._history: deque[Message] = deque(maxlen=history)
        self._number = 0
        self._last_id = EventId(-1)
        self._current: dict[str, Any] | None = None
        self._trend = TrendBoard(_COMPACT)  # each cell kept serialised as well
        # the last results corrected and rounds voided, with who (the supervisor's view)
        self._interventions: deque[dict[str, Any]] = deque(maxlen=INTERVENTIONS)
        self._interventions_json = "[]"
        self._commitment: dict[str, Any] | None = None
        self._anchor: dict[str, Any] | None = None  # the witness's latest cosignature (fleet)
        self._round: int | None = None
        self._kept: dict[str, Any] = {}
        self._shift = ShiftTally()  # the players' statistics, with every result
        self._table = table
        self._closed = False
        self._prepared: PreparedScreen | None = None  # the next screen's bodies, made ahead

    # --- writers -------------------------------------------------------------------------

    def seed(
        self,
        *,
        trend: list[dict[str, Any]],
        commitment: dict[str, Any] | None,
        last_seq: int,
        anchor: dict[str, Any] | None = None,
        interventions: Sequence[dict[str, Any]] = (),
    ) -> None:
        """What the log already says, before the first screen of this run: the trend board's
        cells as the log has them (events.TrendBoard), oldest first, and the last corrections
        and voids (events.intervention_of)."""
        with self._cond:
            for entry in trend:
                self._trend.add(entry)
            for intervention in interventions:
                self._add_intervention(intervention)
            if commitment is not None:
                self._commitment = commitment
            if anchor is not None:
                self._anchor = anchor
            self._last_id = EventId(last_seq, -1)  # the next screen after it gets "last_seq"
            self._size = last_seq

    def prepare(self, screen: Screen, data: Mapping[str, object]) -> None:
        """A screen that will be shown unless something else happens first (a result decided
        ahead): its bodies made now (``PreparedScreen``), on the control thread while the
        sensor reads again, so that its :meth:`publish` only numbers and sends it. Replaces any
        screen prepared before; taken by the next publish of this very ``data``."""
        prepared = PreparedScreen.of(screen, data)
        with self._cond:
            self._prepared = prepared

    def publish(self, screen: Screen, data: Mapping[str, object], seq: int | None) -> None:
        with self._cond:
            prepared, self._prepared = self._prepared, None
            if prepared is not None and not prepared.is_for(screen, data):
                prepared = None
            commitment = commitment_of(data, seq)
            if commitment is not None:
                self._commitment = commitment
            if screen in NOTICE_SCREENS:
                payload = screen_event(screen, data, self._last_id, round_number=self._round)
                self._append("notice", payload, None)
                return
            event_id = self._last_id.next_for(seq)
            self._last_id = event_id
            payload = screen_event(
                screen,
                data,
                event_id,
                round_number=self._round,
                body=None if prepared is None else prepared.body,
            )
            self._round = payload["round"]
            self._keep(payload["data"])
            self._tally(screen, payload)
            if screen is Screen.RESULT and not data.get("service"):  # a test result: no trend
                shown = payload["data"]
                result = shown.get("result")
                if isinstance(result, dict):
                    cell = trend_entry(
                        event_id.seq,
                        payload["round"],
                        result,
                        shown.get("attempt"),
                        corrected=isinstance(shown.get("corrected"), dict),
                    )
                    self._trend.result(cell)
            self._current = payload
            players = None if prepared is None else prepared.players
            self._append("screen", payload, event_id, with_board=True, players=players)

    def committed(self, records: Sequence[StoredRecord], checkpoint: LoggedCheckpoint) -> None:
        """Records just committed (from the log, on the control thread): the feed's lines, sent
        at once to the live feed clients, and the board's changes a record makes without a
        screen (a correction, a void, an RNG commitment)."""
        lines = [(r.seq, _line(committed_feed_line(r, checkpoint))) for r in records]
        changed = False
        with self._cond:
            if lines and self._lines and lines[0][0] != self._lines[-1][0] + 1:
                self._lines.clear()  # a gap (the log reopened): the buffer starts again
            self._lines.extend(lines)
            self._size = max(self._size, records[-1].seq if records else self._size)
            self._checkpoint = checkpoint
            if lines and self._live_feeds:
                self._send_lines(lines)
            for record in records:
                changed = self._board_change(record) or changed
            if changed:
                self._append("board", {}, None, with_board=True)
            self._cond.notify_all()

    def _board_change(self, record: StoredRecord) -> bool:
        """What a committed record changes on the board without a screen (record_schema.py
        gives its fields): a correction's or a void's cell, the RNG's commitment, the anchor;
        True when the board changed."""
        if record.kind in _BOARD_KINDS:
            return self._board_record(record)
        if record.kind == RecordKind.RNG_COMMIT:
            commit = read_lenient(RngCommit, record.data)
            commitment = commitment_of(
                {"commitment": commit.commitment, "rng_session": commit.session}, record.seq
            )
            if commitment is None or self._commitment == commitment:
                return False
            self._commitment = commitment
            return True
        if record.kind == RecordKind.COSIGNED:
            cosigned = read_lenient(CosignedRecord, record.data)
            return self._set_anchor(
                anchor_of(
                    {
                        "size": cosigned.size,
                        "timestamp": cosigned.timestamp,
                        "witness": cosigned.witness,
                    }
                )
            )
        return False

    def lines_from(self, seq: int) -> list[bytes] | None:
        """The feed's lines from record ``seq`` on (empty when it is not committed yet), or
        None when ``seq`` is older than the lines kept (catch up from the log)."""
        with self._cond:
            if not self._lines or seq > self._lines[-1][0]:
                return [] if seq > self._size else None
            first = self._lines[0][0]
            if seq < first:
                return None
            return [line for s, line in itertools.islice(self._lines, seq - first, None)]

    def _send_lines(self, lines: list[tuple[int, bytes]]) -> None:
        first, last = lines[0][0], lines[-1][0]
        data = b"".join(line for _, line in lines)
        for client in self._live_feeds:
            if client.position == first:
                client._send(data)
                client.position = last + 1
            else:  # not the next record it is owed (a gap): it catches up on its own thread
                client._fall()
        self._live_feeds = [c for c in self._live_feeds if c.is_live]

    def go_live_feed(self, sock: socket.socket, next_seq: int) -> LiveClient | None:
        """The feed client on ``sock``, owed records from ``next_seq`` on, as a live client
        if it is up to date (``next_seq`` not committed yet); else None: send it what it is
        owed first. The socket is made non-blocking while it is live."""
        with self._cond:
            if self._closed or next_seq != self._size + 1:
                return None
            sock.settimeout(0.0)
            client = LiveClient(sock, next_seq, self._lock)
            self._live_feeds.append(client)
            return client

    def go_live_page(
        self, sock: socket.socket, number: int, *, players: bool = False
    ) -> LiveClient | None:
        """The page on ``sock``, sent every message up to ``number``, as a live client if no
        message came since; else None. ``players``: the players' page (its own stream)."""
        with self._cond:
            if self._closed or number != self._number:
                return None
            sock.settimeout(0.0)
            client = LiveClient(sock, number, self._lock, players=players)
            self._live_pages.append(client)
            return client

    def stay_live(
        self,
        client: LiveClient,
        heartbeat_s: Callable[[], float],
        *,
        page_heartbeat: Callable[[], bytes] | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        """On the client's own thread: wait while the control thread sends to ``client``,
        sending a heartbeat whenever nothing was sent for ``heartbeat_s()`` (asked again after
        each wait: the server's setting may change). A page's heartbeat is
        ``page_heartbeat()`` (the clock, issue 16), made with the hub's lock released: it reads
        the time and the clock's status, and nothing but a send is done under the lock.
        Returns once it is live no more (it fell behind, went away, or the hub closed); its
        socket is then its own thread's again (blocking, timeout left to the caller).

        ``check`` (clients.UnreadWatch.check) is called at each wake, under the lock (it reads
        the socket's queue, without waiting): what it raises ends the live state as the
        client's ``error`` (a client that has not taken what it was sent)."""
        with self._cond:
            try:
                while client.is_live and not self._closed:
                    if check is not None:
                        try:
                            check()
                        except OSError as exc:
                            client.error = exc
                            client._fall()
                            break
                    due = client.last_sent + heartbeat_s() - time.monotonic()
                    if due > 0:
                        client._cond.wait(due)
                    elif client in self._live_feeds:
                        client._send(_line(self._heartbeat()))
                    elif page_heartbeat is None:
                        client._send(PAGE_HEARTBEAT)
                    else:
                        self._lock.release()
                        try:
                            beat = page_heartbeat()
                        finally:
                            self._lock.acquire()
                        if not self._closed:
                            client._send(beat)  # nothing, if it fell meanwhile
            finally:
                client.is_live = False
                for clients in (self._live_feeds, self._live_pages):
                    if client in clients:
                        clients.remove(client)

    def wait_lines(self, seq: int, timeout: float) -> bool:
        """Wait until record ``seq`` is committed (or ``timeout``); whether it is."""
        with self._cond:
            return self._cond.wait_for(lambda: self._closed or self._size >= seq, timeout)

    @property
    def size(self) -> int:
        """The sequence number of the last record committed (as far as the hub knows)."""
        with self._cond:
            return self._size

    def heartbeat(self) -> dict[str, Any]:
        with self._cond:
            return self._heartbeat()

    def _heartbeat(self) -> dict[str, Any]:
        return {
            "type": "heartbeat",
            "size": self._size,
            "checkpoint": checkpoint_json(self._checkpoint),
        }

    def _board_record(self, record: StoredRecord) -> bool:
        """A correction, a void or a voided result on the trend board, and a correction or a
        void in the supervisor's list with who made them. True when something changed."""
        entry = record.entry()
        data = entry.get("data")
        if not isinstance(data, dict):
            return False
        changed = self._trend.record(record.kind, record.seq, data)
        intervention = intervention_of(record.kind, record.seq, entry.get("time"), data)
        if intervention is not None:
            changed = self._add_intervention(intervention) or changed
        return changed

    def _add_intervention(self, intervention: dict[str, Any]) -> bool:
        if any(i["seq"] == intervention["seq"] for i in self._interventions):
            return False
        self._interventions.append(intervention)
        self._interventions_json = _compact(list(self._interventions))
        return True

    def set_anchor(self, anchor: Mapping[str, object]) -> None:
        """The witness's newest cosignature the fleet publisher accepted (from its thread):
        the board says how far the log is anchored."""
        with self._cond:
            if self._set_anchor(anchor_of(anchor)):
                self._append("board", {}, None, with_board=True)

    def _set_anchor(self, anchor: dict[str, Any] | None) -> bool:
        old = self._anchor
        if anchor is None or (old is not None and old["size"] >= anchor["size"]):
            return False
        self._anchor = anchor
        return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for client in (*self._live_feeds, *self._live_pages):
                client._fall()
            self._cond.notify_all()

    def _tally(self, screen: Screen, payload: dict[str, Any]) -> None:
        """The players' statistics: the core's counts (bets open), and each result since."""
        data = payload["data"]
        key = (payload["round"], data.get("attempt"))
        result = data.get("result") if screen is Screen.RESULT else None
        if data.get("mode") == "rng":
            self._shift.counts(None)
        elif isinstance(data.get("stats"), dict):
            self._shift.counts(data["stats"].get("shift"), key=key if result else None)
        elif isinstance(result, dict) and not data.get("service"):
            self._shift.result(key, result)

    def _players_stats(self) -> dict[str, Any] | None:
        shift = self._shift.shift
        return None if shift is None else {"shift": shift}

    def _keep(self, data: dict[str, Any]) -> None:
        if data.get("mode") == "rng":  # an RNG table uses no dice: no statistics, no set
            for key in _DICE_KEYS:
                self._kept.pop(key, None)
        for key in KEPT_KEYS:
            if key in data:
                self._kept[key] = data[key]

    def _append(
        self,
        event: str,
        payload: dict[str, Any],
        event_id: EventId | None,
        *,
        with_board: bool = False,
        players: dict[str, Any] | None = None,
    ) -> None:
        """A message of the page's stream, ``with_board``: the trend board, the commitment, the
        anchor, the table's name and the last corrections and voids after the payload's
        members; serialised once, here, with each cell of the trend board serialised when it
        was added (the whole board was four fifths of the cost of a result's message).
        ``players``: the players' copy of the payload's data, made beforehand."""
        self._number += 1
        event_id_text = None if event_id is None else str(event_id)
        shown = for_players(payload, players=players)
        stats = self._players_stats()
        if stats is not None and payload.get("screen") == Screen.RESULT:
            shown["data"] = {**shown["data"], "stats": stats}  # the panel, with every result
        if with_board:
            board = (
                f'"trend":[{",".join(self._trend.json)}],"commitment":'
                f'{_compact(self._commitment)},"anchor":{_compact(self._anchor)},'
                f'"table":{_compact(self._table)},"interventions":'
            )
            data = sse_of_json(
                event, _joined(payload, board + self._interventions_json), event_id_text
            )
            players_data = sse_of_json(event, _joined(shown, board + "[]"), event_id_text)
        else:
            data = sse(event, payload, event_id_text)
            players_data = sse(event, shown, event_id_text)
        if self._live_pages:  # first: the page waits for nothing that follows
            for client in self._live_pages:
                client._send(players_data if client.is_players else data)
                client.position = self._number
            self._live_pages = [c for c in self._live_pages if c.is_live]
        if with_board:
            payload = {**payload, **self._board()}
        self._history.append(Message(self._number, event, payload, event_id, data, players_data))
        self._cond.notify_all()

    def _board(self) -> dict[str, Any]:
        return {
            "trend": self._trend.cells,
            "commitment": self._commitment,
            "anchor": self._anchor,
            "table": self._table,
            "interventions": [dict(i) for i in self._interventions],
        }

    # --- readers ---------------------------------------------------------------------------

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    def snapshot(self, *, players: bool = False) -> tuple[int, dict[str, Any], EventId | None]:
        """The message number it is current at, the page's whole view, and its event id. The
        view has the last of each of ``KEPT_KEYS`` any screen carried (None if none did);
        ``players``: as the players' page is sent it (events.players_view), its statistics
        brought up to date with every result since bets open."""
        with self._cond:
            current = None if self._current is None else dict(self._current)
            event_id = EventId.parse(current["id"]) if current else None
            kept = {key: self._kept.get(key) for key in KEPT_KEYS}
            view = {"current": current, **self._board(), **kept}
            if players:
                view = players_view(view)
                view["stats"] = self._players_stats()
            return self._number, view, event_id

    def oldest_id(self) -> EventId | None:
        """The id of the oldest screen still in the history (older ones come from the log)."""
        with self._cond:
            for message in self._history:
                if message.event_id is not None:
                    return message.event_id
            return None

    def screens_after(self, after: EventId) -> list[Message]:
        with self._cond:
            return [m for m in self._history if m.event_id is not None and m.event_id > after]

    def wait_messages(self, after: int, timeout: float) -> tuple[list[Message], bool]:
        """Messages numbered above ``after`` (waiting up to ``timeout`` for one), and whether
        some were already dropped from the bounded history (the caller sends a snapshot)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._number > after, timeout)
            messages = [m for m in self._history if m.number > after]
            missed = bool(self._history) and self._history[0].number > after + 1
            return messages, missed and self._number > after


def _joined(payload: dict[str, Any], board: str) -> str:
    """The payload's members, then the board's (JSON text without its braces)."""
    members = _COMPACT(payload)[1:-1]
    return "{" + (members + "," if members else "") + board + "}"


def _line(value: dict[str, Any]) -> bytes:
    return (_FEED_LINE(value) + "\n").encode("utf-8")
