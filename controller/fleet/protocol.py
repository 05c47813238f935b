"""What the tables, the broker and the witness say to each other over MQTT: the topics and the
payloads, checked strictly on the way in. Pure: no I/O, no clock (times arrive as data).

Topics (``<table>`` is the table's ``[table] name``, 1-32 of ``A-Z a-z 0-9 - _``):

=====================================  =====  ========  =========================================
topic                                  QoS    retained  payload
=====================================  =====  ========  =========================================
``paigow/v1/<table>/records``          1      no        one audit record: exactly one line of
                                                        ``paigow-controller export`` (JSON)
``paigow/v1/<table>/checkpoint``       1      yes       the latest signed checkpoint (C2SP note)
``paigow/v1/<table>/status``           1      yes       JSON: ``online``/``offline``, the screen
``paigow/v1/<table>/cosignature``      1      yes       the checkpoint's note with the witness's
                                                        cosignature line (C2SP tlog-cosignature)
``paigow/v1/alerts``                   1      no        JSON: an alert of the witness
=====================================  =====  ========  =========================================

Delivery is at least once: a record may arrive twice (a resend after a reconnect), and a
consumer drops a duplicate by its ``seq``. Nothing from the network is trusted: a payload is
bounded in size, parsed strictly, and what it says is checked (the records against the chain,
the Merkle tree and the log's signatures; the cosignature against the witness's key).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

ROOT = "paigow/v1"
ALERTS_TOPIC = f"{ROOT}/alerts"
MAX_TABLE_CHARS = 32
MAX_RECORD_BYTES = 1 << 20  # as an export line (controller/audit/verify.py)
MAX_NOTE_BYTES = 16 * 1024  # a checkpoint with its signatures, or a cosigned one
MAX_STATUS_BYTES = 4096
MAX_ALERT_BYTES = 8192
MAX_DETAIL_CHARS = 1000
QOS = 1


class Channel(StrEnum):
    RECORDS = "records"
    CHECKPOINT = "checkpoint"
    STATUS = "status"
    COSIGNATURE = "cosignature"


class ProtocolError(ValueError):
    """A topic or payload that is not what this protocol says: refused, never acted on."""


def is_table_name(name: str) -> bool:
    """The config's table name pattern (``[table] name``): also a safe MQTT topic level."""
    return 1 <= len(name) <= MAX_TABLE_CHARS and all(
        c.isascii() and (c.isalnum() or c in "-_") for c in name
    )


def topic(table: str, channel: Channel) -> str:
    if not is_table_name(table):
        raise ProtocolError(f"{table!r} is not a table name")
    return f"{ROOT}/{table}/{channel}"


def subscription(channel: Channel) -> str:
    """Every table's ``channel`` (the witness's subscriptions)."""
    return f"{ROOT}/+/{channel}"


def parse_topic(text: str) -> tuple[str, Channel]:
    """(table, channel) of a table's topic; :class:`ProtocolError` for anything else."""
    parts = text.split("/")
    if len(parts) != 4 or f"{parts[0]}/{parts[1]}" != ROOT or not is_table_name(parts[2]):
        raise ProtocolError(f"not a table's topic: {text[:100]!r}")
    try:
        return parts[2], Channel(parts[3])
    except ValueError:
        raise ProtocolError(f"not a table's topic: {text[:100]!r}") from None


# --- payloads ---------------------------------------------------------------------------------


def encode_record(line: dict[str, Any]) -> bytes:
    """One export line (``controller.audit.recall.export_line``), as ``export`` prints it."""
    return json.dumps(line, sort_keys=False).encode()


def decode_json(payload: bytes, limit: int, what: str) -> dict[str, Any]:
    """A JSON object of at most ``limit`` bytes, or :class:`ProtocolError`."""
    if len(payload) > limit:
        raise ProtocolError(f"{what}: {len(payload)} bytes, over {limit}")
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError(f"{what}: not JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{what}: not a JSON object")
    return value


def decode_note(payload: bytes, what: str) -> str:
    """A signed note's text (a checkpoint or a cosigned one): UTF-8, bounded. Its signatures
    are checked by the reader (``controller.core.note``)."""
    if len(payload) > MAX_NOTE_BYTES:
        raise ProtocolError(f"{what}: {len(payload)} bytes, over {MAX_NOTE_BYTES}")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what}: not UTF-8") from None


class Presence(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"  # the broker's will, or said by an orderly stop


@dataclass(frozen=True, slots=True)
class Status:
    """A table's retained status: whether it is connected, and what its screen shows."""

    presence: Presence
    screen: str = ""  # the table display's screen (ready, result, fault ...)
    mode: str = ""  # shaker, rng or manual
    round: int = 0
    faults: tuple[str, ...] = ()
    time: str = ""  # when it was said (the controller's clock, RFC 3339 UTC)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "status": str(self.presence),
                "screen": self.screen,
                "mode": self.mode,
                "round": self.round,
                "faults": list(self.faults),
                "time": self.time,
            }
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> Status:
        raw = decode_json(payload, MAX_STATUS_BYTES, "status")
        try:
            presence = Presence(str(raw.get("status")))
        except ValueError:
            raise ProtocolError("status: 'status' is not online or offline") from None
        text = {k: raw.get(k, "") for k in ("screen", "mode", "time")}
        if not all(isinstance(v, str) and len(v) <= 64 and v.isprintable() for v in text.values()):
            raise ProtocolError("status: screen, mode and time are short printable strings")
        number = raw.get("round", 0)
        if type(number) is not int or not 0 <= number < 2**63:
            raise ProtocolError("status: 'round' is not a round number")
        faults = raw.get("faults", [])
        if not isinstance(faults, list) or len(faults) > 32:
            raise ProtocolError("status: 'faults' is not a list of fault names")
        if not all(isinstance(f, str) and is_table_name(f) for f in faults):
            raise ProtocolError("status: 'faults' is not a list of fault names")
        return cls(presence, text["screen"], text["mode"], number, tuple(faults), text["time"])


class AlertKind(StrEnum):
    ROLLBACK = "rollback"  # a checkpoint smaller than one already cosigned
    FORK = "fork"  # a record or checkpoint that contradicts what was accepted at its size
    GAP = "gap"  # records missing that did not come
    BAD_SIGNATURE = "bad_signature"  # a checkpoint not signed by the table's key
    BAD_RECORD = "bad_record"  # a record that is not an export line, or breaks the chain
    SILENCE = "silence"  # nothing from the table past the configured time
    UNKNOWN_TABLE = "unknown_table"  # a table whose key the witness was not given


@dataclass(frozen=True, slots=True)
class Alert:
    table: str
    kind: AlertKind
    detail: str
    time: str  # RFC 3339 UTC, the witness's clock
    size: int = 0  # the log size it concerns (0: none)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "table": self.table,
                "kind": str(self.kind),
                "detail": self.detail[:MAX_DETAIL_CHARS],
                "time": self.time,
                "size": self.size,
            }
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> Alert:
        raw = decode_json(payload, MAX_ALERT_BYTES, "alert")
        table, detail, when = raw.get("table"), raw.get("detail"), raw.get("time")
        if not isinstance(table, str) or not is_table_name(table):
            raise ProtocolError("alert: 'table' is not a table name")
        try:
            kind = AlertKind(str(raw.get("kind")))
        except ValueError:
            raise ProtocolError("alert: unknown 'kind'") from None
        if not isinstance(detail, str) or len(detail) > MAX_DETAIL_CHARS:
            raise ProtocolError("alert: 'detail' is not a short string")
        if not isinstance(when, str) or len(when) > 64:
            raise ProtocolError("alert: 'time' is not a time")
        size = raw.get("size", 0)
        if type(size) is not int or not 0 <= size < 2**63:
            raise ProtocolError("alert: 'size' is not a log size")
        return cls(table, kind, detail, when, size)
