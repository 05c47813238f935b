"""The display's shared state: what is on screen now, the recent screens, the trend board.

The control thread publishes (``DisplayServer.show``) and never waits on a client; each page
stream and each feed client waits here on one condition variable, with a timeout, and reads.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.records import RecordKind, StoredRecord
from controller.core.state import Screen
from controller.display.events import (
    TREND_LENGTH,
    EventId,
    checkpoint_json,
    commitment_of,
    feed_line,
    screen_event,
    trend_entry,
)
from controller.ports import LoggedCheckpoint

# Screens that are a notice over what is shown, not a new state of the table.
NOTICE_SCREENS = frozenset({Screen.REFUSED})


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the page's stream. ``number`` orders every message the hub made."""

    number: int
    event: str  # the SSE event name: "screen" or "notice"
    payload: dict[str, Any]
    event_id: EventId | None  # None for a notice: it does not move Last-Event-ID


class DisplayHub:
    """``records`` committed lately are kept as the feed's lines (serialised once, on the
    control thread), so that feed clients that are up to date never read the database."""

    def __init__(self, *, history: int = 256, table: str = "", records: int = 4096) -> None:
        self._cond = threading.Condition()
        self._lines: deque[tuple[int, bytes]] = deque(maxlen=records)
        self._size = 0
        self._checkpoint: LoggedCheckpoint | None = None
        self._history: deque[Message] = deque(maxlen=history)
        self._number = 0
        self._last_id = EventId(-1)
        self._current: dict[str, Any] | None = None
        self._trend: deque[dict[str, Any]] = deque(maxlen=TREND_LENGTH)
        self._commitment: dict[str, Any] | None = None
        self._round: int | None = None
        self._table = table
        self._log_version = 0
        self._closed = False

    # --- writers -------------------------------------------------------------------------

    def seed(
        self,
        *,
        trend: list[dict[str, Any]],
        commitment: dict[str, Any] | None,
        last_seq: int,
    ) -> None:
        """What the log already says, before the first screen of this run."""
        with self._cond:
            for entry in trend:
                self._add_trend(entry)
            if commitment is not None:
                self._commitment = commitment
            self._last_id = EventId(last_seq, -1)  # the next screen after it gets "last_seq"
            self._size = last_seq

    def publish(self, screen: Screen, data: Mapping[str, object], seq: int | None) -> None:
        with self._cond:
            commitment = commitment_of(data, seq)
            if commitment is not None:
                self._commitment = commitment
            if screen in NOTICE_SCREENS:
                payload = screen_event(screen, data, self._last_id, round_number=self._round)
                self._append("notice", payload, None)
                return
            event_id = self._last_id.next_for(seq)
            self._last_id = event_id
            payload = screen_event(screen, data, event_id, round_number=self._round)
            self._round = payload["round"]
            if screen is Screen.RESULT:
                result = payload["data"].get("result")
                if isinstance(result, dict):
                    self._add_trend(trend_entry(event_id.seq, payload["round"], result))
            self._current = payload
            self._append("screen", {**payload, **self._board()}, event_id)

    def committed(self, records: Sequence[StoredRecord], checkpoint: LoggedCheckpoint) -> None:
        """Records just committed (from the log, on the control thread): the feed's lines, and
        the board's changes a record makes without a screen (a void, an RNG commitment)."""
        lines = [(r.seq, _line(feed_line(r, checkpoint))) for r in records]
        changed = False
        with self._cond:
            if lines and self._lines and lines[0][0] != self._lines[-1][0] + 1:
                self._lines.clear()  # a gap (the log reopened): the buffer starts again
            self._lines.extend(lines)
            self._size = max(self._size, records[-1].seq if records else self._size)
            self._checkpoint = checkpoint
            for record in records:
                if record.kind == RecordKind.VOID:
                    changed = self._mark_void(record.data.get("round")) or changed
                elif record.kind == RecordKind.RNG_COMMIT:
                    data = record.data
                    commitment = commitment_of(
                        {"commitment": data.get("commitment"), "rng_session": data.get("session")},
                        record.seq,
                    )
                    if commitment is not None and self._commitment != commitment:
                        self._commitment = commitment
                        changed = True
            if changed:
                self._append("board", self._board(), None)
            self._log_version += 1
            self._cond.notify_all()

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
            return {
                "type": "heartbeat",
                "size": self._size,
                "checkpoint": checkpoint_json(self._checkpoint),
            }

    def log_grew(self) -> None:
        """Wake the feed clients: records may have been committed without a screen."""
        with self._cond:
            self._log_version += 1
            self._cond.notify_all()

    def mark_void(self, round_number: int) -> bool:
        """A voided round stays on the trend board, marked void. True when something changed."""
        with self._cond:
            return self._mark_void(round_number)

    def _mark_void(self, round_number: object) -> bool:
        changed = False
        for entry in self._trend:
            if entry["round"] == round_number and not entry["void"]:
                entry["void"] = changed = True
        return changed

    def set_commitment(self, commitment: dict[str, Any]) -> bool:
        with self._cond:
            if self._commitment is not None and (
                self._commitment["commitment"] == commitment["commitment"]
            ):
                return False
            self._commitment = commitment
            return True

    def publish_board(self) -> None:
        """The trend board or the commitment changed without a new screen."""
        with self._cond:
            self._append("board", self._board(), None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _add_trend(self, entry: dict[str, Any]) -> None:
        # A result shown again after a restart (recovery) is the same result, not a new one.
        if any(e["seq"] == entry["seq"] for e in self._trend):
            return
        self._trend.append(entry)

    def _append(self, event: str, payload: dict[str, Any], event_id: EventId | None) -> None:
        self._number += 1
        self._history.append(Message(self._number, event, payload, event_id))
        self._log_version += 1
        self._cond.notify_all()

    def _board(self) -> dict[str, Any]:
        return {
            "trend": [dict(e) for e in self._trend],
            "commitment": self._commitment,
            "table": self._table,
        }

    # --- readers ---------------------------------------------------------------------------

    def is_closed(self) -> bool:
        with self._cond:
            return self._closed

    def snapshot(self) -> tuple[int, dict[str, Any], EventId | None]:
        """The message number it is current at, the page's whole view, and its event id."""
        with self._cond:
            current = None if self._current is None else dict(self._current)
            event_id = EventId.parse(current["id"]) if current else None
            return self._number, {"current": current, **self._board()}, event_id

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

    def wait_log(self, version: int, timeout: float) -> int:
        """Wait until a screen is shown or ``log_grew`` is called; returns the new version."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._log_version != version, timeout)
            return self._log_version

    @property
    def log_version(self) -> int:
        with self._cond:
            return self._log_version


def _line(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, separators=(",", ":")) + "\n").encode("utf-8")
