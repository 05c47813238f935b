"""What the tables, the broker and the witness say to each other over MQTT: the topics and the
payloads, checked strictly on the way in. Pure: no I/O, no clock (times arrive as data).

Topics (``<table>`` is the table's ``[table] name``, 1-32 of ``A-Z a-z 0-9 - _``):

=====================================  =====  ========  =========================================
topic                                  QoS    retained  payload
=====================================  =====  ========  =========================================
``paigow/v1/<table>/records``          1      no        one audit record: exactly one line of
                                                        ``paigow-controller export`` (JSON)
``paigow/v1/<table>/checkpoint``       1      yes       the latest signed checkpoint (C2SP note)
``paigow/v1/<table>/status``           1      yes       a status signed by the table's log key
                                                        (``sign_status``): online or offline,
                                                        the screen, the connection and its seq
``paigow/v1/<table>/cosignature``      1      yes       the checkpoint's note with the witness's
                                                        cosignature line (C2SP tlog-cosignature)
``paigow/v1/alerts``                   1      no        an alert signed by the witness
                                                        (``sign_alert``)
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

from controller.core import canonical
from controller.core.digits import is_ascii_digits
from controller.core.note import Signer, Verifier, open_note, sign_note
from controller.errors import EncodingError, NoteError, ProtocolError

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
    # two signed trees that disagree (fleet-v2.md, "Checkpoints: stale, consistent, or
    # evidence"): the log went back to an older copy and went on, or two copies played
    ROLLBACK = "rollback"
    FORK = "fork"
    GAP = "gap"  # a signed checkpoint whose records did not come
    BAD_SIGNATURE = "bad_signature"  # a checkpoint not signed by the table's key
    BAD_RECORD = "bad_record"  # a record under the table's signature that the verifier refuses
    SILENCE = "silence"  # nothing signed from the table past the configured time
    UNKNOWN_TABLE = "unknown_table"  # a table whose key the witness was not given
    DEVICE_OFFLINE = "device_offline"  # the table's signed status says offline
    BIASED_DICE = "biased_dice"  # the table's dice monitor raised its alarm


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


# --- signed statuses and alerts -----------------------------------------------------------------

STATUS_HEADER = "paigow-controller status v1"
ALERT_HEADER = "paigow-controller alert v1"
END_OF_CONNECTION = 2**53 - 1  # the will's seq: "the end of connection C"


@dataclass(frozen=True, slots=True)
class SignedStatus:
    """A status as a table signed it: which connection of the table's life said it (a number
    that only grows, kept by the table), its place in that connection (1, 2, ...; the will,
    published by the broker when the table vanishes, is ``END_OF_CONNECTION``)."""

    table: str
    connection: int
    seq: int
    status: Status

    @property
    def order(self) -> tuple[int, int]:
        """A later status has a greater order: a reader takes only what is newer than what
        it took (a replayed or retained older one is stale)."""
        return (self.connection, self.seq)


def _status_json(status: Status) -> str:
    return canonical.encode(
        {
            "status": str(status.presence),
            "screen": status.screen,
            "mode": status.mode,
            "round": status.round,
            "faults": list(status.faults),
            "time": status.time,
        }
    ).decode("ascii")


def sign_status(signed: SignedStatus, signer: Signer) -> bytes:
    """The status note a table publishes, signed with its log key. Its second line is not a
    number, so it can never be read as a checkpoint (origin, size, root)."""
    if not is_table_name(signed.table):
        raise ProtocolError(f"{signed.table!r} is not a table name")
    for number in (signed.connection, signed.seq):
        if not 0 <= number <= END_OF_CONNECTION:
            raise ProtocolError("a status's connection and seq are whole numbers up to 2^53 - 1")
    text = (
        f"{STATUS_HEADER}\ntable {signed.table}\nconnection {signed.connection}\n"
        f"seq {signed.seq}\n{_status_json(signed.status)}\n"
    )
    return sign_note(text, signer).encode("utf-8")


class StatusSigner:
    """All the table's publisher may do with the log's key: sign its own status notes (the
    status header, its table, connection and seq, the status's fields), never any other text.
    A checkpoint, a record or an arbitrary note cannot be made with it, so the publisher's
    thread is no signing oracle for the log (the key stays inside; ``repr`` names it only)."""

    __slots__ = ("_signer",)

    def __init__(self, signer: Signer) -> None:
        self._signer = signer

    @property
    def verifier(self) -> Verifier:
        """The log's verifier key (its name is the log's origin)."""
        return self._signer.verifier

    def sign(self, signed: SignedStatus) -> bytes:
        return sign_status(signed, self._signer)

    def __repr__(self) -> str:
        return f"StatusSigner({self._signer.name!r})"


def open_status(payload: bytes, verifier: Verifier, table: str) -> SignedStatus:
    """A table's status note, once its signature verifies with the table's key and it names
    that table; :class:`ProtocolError` for anything else."""
    if len(payload) > MAX_STATUS_BYTES:
        raise ProtocolError(f"status: {len(payload)} bytes, over {MAX_STATUS_BYTES}")
    try:
        text = open_note(payload.decode("utf-8"), verifier)
    except (UnicodeDecodeError, NoteError) as exc:
        raise ProtocolError(f"status: not signed by the table's key: {exc}") from None
    lines = text.split("\n")[:-1]
    if len(lines) != 5 or lines[0] != STATUS_HEADER:
        raise ProtocolError("status: not a status note")
    named, connection, seq = (
        _field(lines[i], key) for i, key in ((1, "table"), (2, "connection"), (3, "seq"))
    )
    if named != table:
        raise ProtocolError(f"status: of table {named[:40]!r}, not {table!r}")
    numbers = []
    for value in (connection, seq):
        if not is_ascii_digits(value) or len(value) > 16 or int(value) > END_OF_CONNECTION:
            raise ProtocolError("status: connection and seq are whole numbers up to 2^53 - 1")
        numbers.append(int(value))
    try:
        fields = canonical.decode(lines[4].encode("utf-8"))
    except EncodingError as exc:
        raise ProtocolError(f"status: its fields are not canonical JSON: {exc}") from None
    if not isinstance(fields, dict) or set(fields) != {
        "status",
        "screen",
        "mode",
        "round",
        "faults",
        "time",
    }:
        raise ProtocolError("status: its fields are status, screen, mode, round, faults, time")
    status = Status.decode(json.dumps(fields).encode())
    return SignedStatus(table, numbers[0], numbers[1], status)


def _field(line: str, key: str) -> str:
    name, sep, value = line.partition(" ")
    if name != key or not sep or not value:
        raise ProtocolError(f"status: no {key} line")
    return value


def sign_alert(alert: Alert, signer: Signer) -> bytes:
    """An alert of the witness, signed with its alert key (consumers other than its own
    dashboard verify it with that key)."""
    body = json.loads(alert.encode())
    text = f"{ALERT_HEADER}\n{canonical.encode(body).decode('ascii')}\n"
    return sign_note(text, signer).encode("utf-8")


def open_alert(payload: bytes, verifier: Verifier) -> Alert:
    """A witness's alert note, once its signature verifies; :class:`ProtocolError` otherwise."""
    if len(payload) > MAX_ALERT_BYTES + 512:
        raise ProtocolError(f"alert: {len(payload)} bytes, over {MAX_ALERT_BYTES + 512}")
    try:
        text = open_note(payload.decode("utf-8"), verifier)
    except (UnicodeDecodeError, NoteError) as exc:
        raise ProtocolError(f"alert: not signed by the witness: {exc}") from None
    lines = text.split("\n")[:-1]
    if len(lines) != 2 or lines[0] != ALERT_HEADER:
        raise ProtocolError("alert: not an alert note")
    return Alert.decode(lines[1].encode("utf-8"))
