"""The optical dice sensor's wire protocol (``hw/dice-sensor-protocol.md``): encoder and parser.

Pure: no I/O, no clock, no ``serial``. The driver feeds it whatever bytes the line delivered;
:meth:`FrameParser.feed` returns only frames that are exactly what the sensor meant to send
(start marker, canonical fields in range, CRC-16/CCITT-FALSE correct, known version). Anything
else is counted as a rejection and dropped, so a bad frame can never become a result.

A frame is one line of printable ASCII::

    $DS1,002A,DI,<64 hex digits>,3,R5FI:120:045:097,B2FI:060:150:099,B6FI:170:140:095*6B0A

The buffer is bounded by :data:`MAX_FRAME_BYTES`; after garbage, a truncated or an over-long
frame the parser resynchronises on the next ``$``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from controller.core.dice import DiceReading, DieColour, DieReading
from controller.errors import FrameError, SensorVersionError

PROTOCOL_VERSION = 1
VERSION_TAG = "DS1"
TERMINATOR = b"\r\n"
MAX_FRAME_BYTES = 256  # from "$" to "\n" inclusive; the longest legal frame is 239
MAX_OBJECTS = 9  # objects one reading may report (three dice plus up to six foreign objects)
SEQ_MODULO = 0x10000
CRC_CHECK_VALUE = 0x29B1  # CRC-16/CCITT-FALSE of b"123456789"


# --- CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, not reflected, xorout 0 -------------------


def _crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_CRC_TABLE = _crc_table()


def crc16_ccitt_false(data: bytes | bytearray | memoryview) -> int:
    """CRC-16/CCITT-FALSE; ``crc16_ccitt_false(b"123456789") == 0x29B1``."""
    crc = 0xFFFF
    table = _CRC_TABLE
    for byte in bytes(data):
        crc = ((crc << 8) & 0xFFFF) ^ table[(crc >> 8) ^ byte]
    return crc


# --- the messages --------------------------------------------------------------------------


class SensorFault(StrEnum):
    """Hardware faults the sensor reports of itself."""

    CAMERA = "CAM"  # the image sensor does not deliver frames
    LIGHTING = "LIT"  # the tray illumination failed
    LENS = "LENS"  # the lens is blocked or dirty (image too dark or uniform)


class Rejection(StrEnum):
    """Why bytes from the line were not accepted as a frame."""

    GARBAGE = "garbage"  # bytes outside any frame
    TRUNCATED = "truncated"  # a new "$" arrived before the frame ended
    OVER_LONG = "over_long"
    NOT_ASCII = "not_ascii"
    MALFORMED = "malformed"
    BAD_CHECKSUM = "bad_checksum"
    UNKNOWN_VERSION = "unknown_version"
    UNKNOWN_TYPE = "unknown_type"
    OUT_OF_RANGE = "out_of_range"


@dataclass(frozen=True, slots=True)
class Hello:
    """Controller to sensor: identify yourself (the version handshake)."""

    seq: int


@dataclass(frozen=True, slots=True)
class ReadNow:
    """Controller to sensor: take an image of the tray now and report the dice."""

    seq: int


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """Controller to sensor: report your health."""

    seq: int


@dataclass(frozen=True, slots=True)
class Identity:
    """Sensor to controller, answering :class:`Hello`."""

    seq: int
    model: str
    firmware: str
    serial_number: str


@dataclass(frozen=True, slots=True)
class DieField:
    """One object in a reading, as on the wire."""

    colour: DieColour
    face: int | None
    is_flat: bool
    is_inside: bool
    position: tuple[int, int] | None
    confidence: int

    def to_die_reading(self) -> DieReading:
        return DieReading(
            colour=self.colour,
            face=self.face,
            is_flat=self.is_flat,
            is_inside=self.is_inside,
            confidence=self.confidence,
            position=self.position,
        )


@dataclass(frozen=True, slots=True)
class Reading:
    """Sensor to controller, answering :class:`ReadNow`: every object seen, and the SHA-256 of
    the raw image it came from (kept in the audit log as evidence)."""

    seq: int
    image_digest: str
    objects: tuple[DieField, ...]

    def to_dice_reading(self) -> DiceReading:
        return DiceReading(
            dice=tuple(o.to_die_reading() for o in self.objects), image_digest=self.image_digest
        )


@dataclass(frozen=True, slots=True)
class Status:
    """Sensor to controller, answering :class:`StatusRequest`; no faults means ready."""

    seq: int
    faults: frozenset[SensorFault]


@dataclass(frozen=True, slots=True)
class FaultReport:
    """Sensor to controller, answering :class:`ReadNow` when its hardware cannot take a reading."""

    seq: int
    faults: frozenset[SensorFault]


@dataclass(frozen=True, slots=True)
class Refused:
    """Sensor to controller: the request was not understood or cannot be served."""

    seq: int
    reason: str


Request = Hello | ReadNow | StatusRequest
Reply = Identity | Reading | Status | FaultReport | Refused
Frame = Request | Reply

_TYPE_OF: dict[type, str] = {
    Hello: "HI",
    ReadNow: "RD",
    StatusRequest: "ST",
    Identity: "ID",
    Reading: "DI",
    Status: "SS",
    FaultReport: "FL",
    Refused: "NK",
}

_COLOUR_CODE = {DieColour.RED: "R", DieColour.BLUE: "B", DieColour.OTHER: "X"}
_CODE_COLOUR = {code: colour for colour, code in _COLOUR_CODE.items()}
_FAULT_ORDER = (SensorFault.CAMERA, SensorFault.LIGHTING, SensorFault.LENS)

_MODEL = re.compile(r"[A-Za-z0-9._-]{1,16}")
_FIRMWARE = re.compile(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})")
_SERIAL = re.compile(r"[A-Z0-9-]{1,16}")
_REASON = re.compile(r"[A-Z_]{1,16}")
_SEQ = re.compile(r"[0-9A-F]{4}")
_CRC = re.compile(r"[0-9A-F]{4}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_DIE = re.compile(r"([RBX])([1-6?])([FT])([IO]):(?:([0-9]{3}):([0-9]{3})|(---):(---)):([0-9]{3})")


# --- encoding ------------------------------------------------------------------------------


def _faults_text(faults: Iterable[SensorFault]) -> str:
    chosen = set(faults)
    return "+".join(f.value for f in _FAULT_ORDER if f in chosen) or "-"


def _die_text(die: DieField) -> str:
    face = "?" if die.face is None else str(die.face)
    flat = "F" if die.is_flat else "T"
    inside = "I" if die.is_inside else "O"
    where = "---:---" if die.position is None else f"{die.position[0]:03d}:{die.position[1]:03d}"
    return f"{_COLOUR_CODE[die.colour]}{face}{flat}{inside}:{where}:{die.confidence:03d}"


def _fields(frame: Frame) -> list[str]:
    match frame:
        case Hello() | ReadNow() | StatusRequest():
            return []
        case Identity(model=model, firmware=firmware, serial_number=serial):
            return [model, firmware, serial]
        case Reading(image_digest=digest, objects=objects):
            return [digest, str(len(objects)), *(_die_text(o) for o in objects)]
        case Status(faults=faults) | FaultReport(faults=faults):
            return [_faults_text(faults)]
        case Refused(reason=reason):
            return [reason]


def encode_body(frame: Frame, *, version_tag: str = VERSION_TAG) -> bytes:
    """The bytes between ``$`` and ``*`` (what the CRC covers)."""
    parts = [version_tag, f"{frame.seq % SEQ_MODULO:04X}", _TYPE_OF[type(frame)], *_fields(frame)]
    return ",".join(parts).encode("ascii")


def seal(body: bytes) -> bytes:
    """Frame a body: start marker, CRC and terminator."""
    return b"$" + body + b"*" + f"{crc16_ccitt_false(body):04X}".encode("ascii") + TERMINATOR


def encode(frame: Frame) -> bytes:
    """The frame as it goes on the wire. ``decode_frame(encode(f)) == f`` for every valid frame."""
    data = seal(encode_body(frame))
    if len(data) > MAX_FRAME_BYTES:  # pragma: no cover - only more than MAX_OBJECTS can do this
        raise FrameError(f"frame of {len(data)} bytes is over {MAX_FRAME_BYTES}")
    return data


# --- decoding ------------------------------------------------------------------------------


class _Reject(FrameError):
    """Why one line is not a frame (internal; :func:`decode_frame` raises it as a FrameError)."""

    def __init__(self, reason: Rejection, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _faults(text: str) -> frozenset[SensorFault]:
    if text == "-":
        return frozenset()
    codes = text.split("+")
    faults = []
    for code in codes:
        try:
            faults.append(SensorFault(code))
        except ValueError:
            raise _Reject(Rejection.OUT_OF_RANGE, f"unknown sensor fault {code!r}") from None
    result = frozenset(faults)
    if _faults_text(result) != text:
        raise _Reject(Rejection.MALFORMED, f"fault list {text!r} is not canonical")
    return result


def _die(text: str) -> DieField:
    match = _DIE.fullmatch(text)
    if match is None:
        raise _Reject(Rejection.MALFORMED, f"object {text!r}")
    colour, face, flat, inside, x, y, _, _, confidence = match.groups()
    position = (int(x), int(y)) if x is not None and y is not None else None
    conf = int(confidence)
    if conf > 100:
        raise _Reject(Rejection.OUT_OF_RANGE, f"confidence {conf} is over 100")
    return DieField(
        colour=_CODE_COLOUR[colour],
        face=None if face == "?" else int(face),
        is_flat=flat == "F",
        is_inside=inside == "I",
        position=position,
        confidence=conf,
    )


def _expect(fields: list[str], count: int, kind: str) -> None:
    if len(fields) != count:
        raise _Reject(Rejection.MALFORMED, f"{kind} has {len(fields)} fields, not {count}")


def _request(seq: int, kind: str, fields: list[str]) -> Frame:
    _expect(fields, 0, kind)
    if kind == "HI":
        return Hello(seq)
    return ReadNow(seq) if kind == "RD" else StatusRequest(seq)


def _identity(seq: int, kind: str, fields: list[str]) -> Frame:
    _expect(fields, 3, kind)
    model, firmware, serial = fields
    if not (_MODEL.fullmatch(model) and _FIRMWARE.fullmatch(firmware)):
        raise _Reject(Rejection.MALFORMED, "identity model or firmware")
    if not _SERIAL.fullmatch(serial):
        raise _Reject(Rejection.MALFORMED, "identity serial number")
    return Identity(seq, model, firmware, serial)


def _reading(seq: int, kind: str, fields: list[str]) -> Frame:
    if len(fields) < 2:
        raise _Reject(Rejection.MALFORMED, "reading without digest and count")
    digest, count_text, *objects = fields
    if not _DIGEST.fullmatch(digest):
        raise _Reject(Rejection.MALFORMED, "image digest is not 64 lowercase hex digits")
    if not re.fullmatch(r"[0-9]", count_text):
        raise _Reject(Rejection.MALFORMED, f"object count {count_text!r}")
    count = int(count_text)
    if count != len(objects):
        raise _Reject(Rejection.MALFORMED, f"count {count} but {len(objects)} objects")
    return Reading(seq, digest, tuple(_die(o) for o in objects))


def _status(seq: int, kind: str, fields: list[str]) -> Frame:
    _expect(fields, 1, kind)
    faults = _faults(fields[0])
    if kind == "SS":
        return Status(seq, faults)
    if not faults:
        raise _Reject(Rejection.MALFORMED, "a fault report names no fault")
    return FaultReport(seq, faults)


def _refused(seq: int, kind: str, fields: list[str]) -> Frame:
    _expect(fields, 1, kind)
    if not _REASON.fullmatch(fields[0]):
        raise _Reject(Rejection.MALFORMED, "refusal reason")
    return Refused(seq, fields[0])


# Each message type's decoder of its fields (after the sequence number and the type).
_MESSAGES: dict[str, Callable[[int, str, list[str]], Frame]] = {
    "HI": _request,
    "RD": _request,
    "ST": _request,
    "ID": _identity,
    "DI": _reading,
    "SS": _status,
    "FL": _status,
    "NK": _refused,
}


def _message(seq: int, kind: str, fields: list[str]) -> Frame:
    decode = _MESSAGES.get(kind)
    if decode is None:
        raise _Reject(Rejection.UNKNOWN_TYPE, f"message type {kind!r}")
    return decode(seq, kind, fields)


def _decode(line: bytes) -> Frame:
    if len(line) > MAX_FRAME_BYTES:
        raise _Reject(Rejection.OVER_LONG, f"{len(line)} bytes")
    if not line.startswith(b"$") or not line.endswith(TERMINATOR):
        raise _Reject(Rejection.MALFORMED, "frame must start with $ and end with CR LF")
    inner = line[1 : -len(TERMINATOR)]
    if any(b < 0x20 or b > 0x7E for b in inner):
        raise _Reject(Rejection.NOT_ASCII, "byte outside printable ASCII")
    star = inner.rfind(b"*")
    if star < 0:
        raise _Reject(Rejection.MALFORMED, "no checksum")
    body, crc_bytes = inner[:star], inner[star + 1 :]
    text = body.decode("ascii")  # strict; every byte was checked printable above
    crc_text = crc_bytes.decode("ascii")
    if not _CRC.fullmatch(crc_text):
        raise _Reject(Rejection.MALFORMED, f"checksum {crc_text!r} is not 4 uppercase hex digits")
    if int(crc_text, 16) != crc16_ccitt_false(body):
        raise _Reject(Rejection.BAD_CHECKSUM, f"checksum {crc_text} does not match the frame")
    if "$" in text or "*" in text:
        raise _Reject(Rejection.MALFORMED, "marker inside the body")
    version, *rest = text.split(",")
    if version != VERSION_TAG:
        raise _Reject(Rejection.UNKNOWN_VERSION, f"protocol {version!r}")
    if len(rest) < 2 or not _SEQ.fullmatch(rest[0]):
        raise _Reject(Rejection.MALFORMED, "sequence number")
    return _message(int(rest[0], 16), rest[1], rest[2:])


def decode_frame(line: bytes) -> Frame:
    """Decode one complete frame (``$`` to CR LF). Raises :class:`FrameError`, or
    :class:`SensorVersionError` for a protocol version this controller does not speak."""
    try:
        return _decode(line)
    except _Reject as rejected:
        if rejected.reason is Rejection.UNKNOWN_VERSION:
            raise SensorVersionError(str(rejected)) from None
        raise


class FrameParser:
    """Incremental parser: ``feed(bytes) -> list[Frame]``.

    Holds at most :data:`MAX_FRAME_BYTES` bytes between calls. Rejected input is counted in
    :attr:`rejections` (by reason) and the last one kept in :attr:`last_rejection` for the log.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._in_frame = False
        self.rejections: Counter[Rejection] = Counter()
        self.last_rejection: str = ""

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished frame (never more than :data:`MAX_FRAME_BYTES`)."""
        return len(self._buffer)

    def reset(self) -> None:
        """Forget a partial frame (the line was lost and reopened)."""
        self._buffer.clear()
        self._in_frame = False

    def _reject(self, reason: Rejection, detail: str) -> None:
        self.rejections[reason] += 1
        self.last_rejection = f"{reason}: {detail}"

    def _take(self, data: bytes, start: int, end: int) -> bool:
        """Append ``data[start:end]`` to the frame; False (and the frame dropped) if too long."""
        if len(self._buffer) + (end - start) > MAX_FRAME_BYTES:
            self._reject(Rejection.OVER_LONG, f"no end within {MAX_FRAME_BYTES} bytes")
            self.reset()
            return False
        self._buffer += data[start:end]
        return True

    def _finish(self, frames: list[Frame]) -> None:
        line = bytes(self._buffer)
        self.reset()
        try:
            frames.append(_decode(line))
        except _Reject as rejected:
            self.rejections[rejected.reason] += 1
            self.last_rejection = str(rejected)

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        i, n = 0, len(data)
        while i < n:
            if not self._in_frame:
                start = data.find(b"$", i)
                if start < 0:
                    self._reject(Rejection.GARBAGE, f"{n - i} bytes outside a frame")
                    break
                if start > i:
                    self._reject(Rejection.GARBAGE, f"{start - i} bytes outside a frame")
                self._in_frame = True
                self._buffer += b"$"
                i = start + 1
                continue
            newline = data.find(b"\n", i)
            marker = data.find(b"$", i)
            if marker >= 0 and (newline < 0 or marker < newline):
                if self._take(data, i, marker):
                    self._reject(Rejection.TRUNCATED, "a new frame started before this one ended")
                    self.reset()
                i = marker  # resynchronise on the new start marker
                continue
            if newline < 0:
                self._take(data, i, n)
                break
            if self._take(data, i, newline + 1):
                self._finish(frames)
            i = newline + 1
        return frames
