"""Server-Sent Events as the streams send them: the event's name, its id if it has one, its
payload as one compact JSON line (a value JSON does not know, as its ``str``)."""

from __future__ import annotations

import json
from typing import Any

# json.dumps with these arguments, without making a new encoder for each value: the same text.
_COMPACT = json.JSONEncoder(separators=(",", ":"), default=str).encode


def sse(event: str, payload: dict[str, Any], event_id: str | None = None) -> bytes:
    """One Server-Sent Event: its name, its id if it has one, its payload as one JSON line."""
    return sse_of_json(event, _COMPACT(payload), event_id)


def sse_of_json(event: str, payload_json: str, event_id: str | None) -> bytes:
    """One Server-Sent Event whose payload is already one line of JSON."""
    head = f"event: {event}\n" if event_id is None else f"event: {event}\nid: {event_id}\n"
    return (head + "data: " + payload_json + "\n\n").encode("utf-8")
