"""The DS1 parser: raw bytes, the document's examples, and hypothesis on arbitrary streams."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.dice import DieColour
from controller.core.sensor_protocol import (
    CRC_CHECK_VALUE,
    MAX_FRAME_BYTES,
    MAX_OBJECTS,
    DieField,
    FaultReport,
    Frame,
    FrameParser,
    Hello,
    Identity,
    Reading,
    ReadNow,
    Refused,
    Rejection,
    SensorFault,
    Status,
    StatusRequest,
    crc16_ccitt_false,
    decode_frame,
    encode,
    encode_body,
    seal,
)
from controller.errors import FrameError, SensorVersionError

DOC = Path(__file__).resolve().parents[2] / "hw" / "dice-sensor-protocol.md"
DIGEST = hashlib.sha256(b"tray image 42").hexdigest()


def _die(colour: DieColour, face: int | None, x: int, y: int, conf: int = 97) -> DieField:
    return DieField(colour, face, True, True, (x, y), conf)


VALID = Reading(
    3,
    DIGEST,
    (
        _die(DieColour.RED, 5, 120, 45),
        _die(DieColour.BLUE, 2, 60, 150, 99),
        _die(DieColour.BLUE, 6, 170, 140, 95),
    ),
)


def _doc_block(tag: str) -> list[bytes]:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"```{tag}\n(.*?)```", text, re.DOTALL)
    assert match is not None, f"no ```{tag} block in {DOC.name}"
    return [line.encode("ascii") + b"\r\n" for line in match.group(1).splitlines() if line]


def test_crc_check_value() -> None:
    assert crc16_ccitt_false(b"123456789") == CRC_CHECK_VALUE == 0x29B1
    assert crc16_ccitt_false(b"") == 0xFFFF


def test_document_example_frames_decode_and_reencode_exactly() -> None:
    frames = _doc_block("frames")
    assert len(frames) >= 10
    parser = FrameParser()
    decoded = parser.feed(b"".join(frames))
    assert len(decoded) == len(frames)
    assert not parser.rejections
    for line, frame in zip(frames, decoded, strict=True):
        assert encode(frame) == line
    assert decoded[1] == Identity(1, "OptiDice-3", "1.4.2", "SN-000117")
    assert decoded[5] == VALID
    assert isinstance(decoded[7], Reading)
    no_roll = decoded[7].to_dice_reading().dice
    assert not no_roll[0].is_flat
    assert not no_roll[2].is_inside
    assert no_roll[2].face is None
    assert no_roll[2].position is None
    assert decoded[9] == FaultReport(5, frozenset({SensorFault.LENS}))
    assert decoded[11] == Status(6, frozenset({SensorFault.CAMERA, SensorFault.LIGHTING}))


def test_document_rejected_frames_are_rejected() -> None:
    frames = _doc_block("rejected-frames")
    assert len(frames) == 4
    parser = FrameParser()
    assert parser.feed(b"".join(frames)) == []
    assert parser.rejections == {
        Rejection.BAD_CHECKSUM: 1,
        Rejection.MALFORMED: 1,
        Rejection.UNKNOWN_VERSION: 1,
        Rejection.OUT_OF_RANGE: 1,
    }


@pytest.mark.parametrize(
    "frame",
    [
        Hello(0),
        ReadNow(0xFFFF),
        StatusRequest(7),
        Identity(1, "A", "0.0.0", "X"),
        VALID,
        Reading(9, DIGEST, ()),
        Reading(9, DIGEST, tuple(_die(DieColour.OTHER, None, 999, 0, 100) for _ in range(9))),
        Status(2, frozenset()),
        FaultReport(2, frozenset(SensorFault)),
        Refused(1, "BUSY"),
    ],
)
def test_round_trip(frame: Frame) -> None:
    data = encode(frame)
    assert len(data) <= MAX_FRAME_BYTES
    assert decode_frame(data) == frame
    assert FrameParser().feed(data) == [frame]


def test_reading_converts_to_dice_reading() -> None:
    reading = VALID.to_dice_reading()
    assert reading.image_digest == DIGEST
    assert [(d.colour, d.face, d.position, d.confidence) for d in reading.dice] == [
        (DieColour.RED, 5, (120, 45), 97),
        (DieColour.BLUE, 2, (60, 150), 99),
        (DieColour.BLUE, 6, (170, 140), 95),
    ]


def test_every_single_byte_change_is_rejected() -> None:
    good = encode(VALID)
    for index in range(1, len(good) - 2):
        for flip in (0x01, 0x20, 0x80):
            broken = bytearray(good)
            broken[index] ^= flip
            assert FrameParser().feed(bytes(broken)) == [], (index, flip)


def test_resynchronises_after_garbage_truncation_and_over_long() -> None:
    good = encode(VALID)
    parser = FrameParser()
    stream = (
        b"\x00\xff noise"
        + good[:40]  # truncated by the next start marker
        + good
        + b"$"
        + b"A" * (MAX_FRAME_BYTES + 10)  # over-long
        + b"\r\n"
        + encode(Hello(4))
    )
    assert parser.feed(stream) == [VALID, Hello(4)]
    assert parser.rejections[Rejection.TRUNCATED] == 1
    assert parser.rejections[Rejection.OVER_LONG] == 1
    assert parser.rejections[Rejection.GARBAGE] >= 1


def test_frames_split_across_feeds() -> None:
    good = encode(VALID) + encode(Hello(1))
    parser = FrameParser()
    out = [frame for byte in good for frame in parser.feed(bytes([byte]))]
    assert out == [VALID, Hello(1)]
    assert parser.buffered == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"DS1,0001,DI," + DIGEST.encode() + b",1,R5FI:120:045:101", Rejection.OUT_OF_RANGE),
        (b"DS1,0001,DI," + DIGEST.encode() + b",1,R7FI:120:045:090", Rejection.MALFORMED),
        (b"DS1,0001,DI," + DIGEST.encode() + b",2,R5FI:120:045:090", Rejection.MALFORMED),
        (b"DS1,0001,DI," + DIGEST.upper().encode() + b",0", Rejection.MALFORMED),
        (b"DS1,0001,DI," + DIGEST.encode() + b",1,R5FI:12:045:090", Rejection.MALFORMED),
        (b"DS1,0001,DI," + DIGEST.encode() + b",1,R5FI:120:---:090", Rejection.MALFORMED),
        (b"DS1,00a1,HI", Rejection.MALFORMED),
        (b"DS1,0001,HI,extra", Rejection.MALFORMED),
        (b"DS1,0001,ZZ", Rejection.UNKNOWN_TYPE),
        (b"DS1,0001,SS,FIRE", Rejection.OUT_OF_RANGE),
        (b"DS1,0001,SS,LIT+CAM", Rejection.MALFORMED),  # not in the canonical order
        (b"DS1,0001,FL,-", Rejection.MALFORMED),
        (b"DS1,0001,ID,OptiDice,01.2.3,SN1", Rejection.MALFORMED),
        (b"DS9,0001,HI", Rejection.UNKNOWN_VERSION),
    ],
)
def test_out_of_range_and_malformed_fields(body: bytes, reason: Rejection) -> None:
    parser = FrameParser()
    assert parser.feed(seal(body)) == []
    assert parser.rejections == {reason: 1}
    error = SensorVersionError if reason is Rejection.UNKNOWN_VERSION else FrameError
    with pytest.raises(error):
        decode_frame(seal(body))


def test_non_ascii_and_lowercase_checksum_rejected() -> None:
    body = encode_body(VALID)
    parser = FrameParser()
    assert parser.feed(seal(body.replace(b"R5", b"R\xb5"))) == []
    good = encode(Status(2, frozenset()))
    assert parser.feed(good.replace(b"F2BE", b"f2be")) == []
    assert parser.feed(good.replace(b"\r\n", b"\n")) == []
    assert parser.rejections[Rejection.NOT_ASCII] == 1
    assert parser.rejections[Rejection.MALFORMED] == 2


# --- hypothesis ------------------------------------------------------------------------------

_dice = st.builds(
    DieField,
    st.sampled_from(list(DieColour)),
    st.one_of(st.none(), st.integers(1, 6)),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.tuples(st.integers(0, 999), st.integers(0, 999))),
    st.integers(0, 100),
)
_seq = st.integers(0, 0xFFFF)
_frames: st.SearchStrategy[Frame] = st.one_of(
    st.builds(Hello, _seq),
    st.builds(ReadNow, _seq),
    st.builds(StatusRequest, _seq),
    st.builds(
        Identity,
        _seq,
        st.from_regex(r"[A-Za-z0-9._-]{1,16}", fullmatch=True),
        st.from_regex(r"(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9])", fullmatch=True),
        st.from_regex(r"[A-Z0-9-]{1,16}", fullmatch=True),
    ),
    st.builds(
        Reading,
        _seq,
        st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
        st.lists(_dice, max_size=MAX_OBJECTS).map(tuple),
    ),
    st.builds(Status, _seq, st.frozensets(st.sampled_from(list(SensorFault)))),
    st.builds(FaultReport, _seq, st.frozensets(st.sampled_from(list(SensorFault)), min_size=1)),
)


def _checksum_ok(line: bytes) -> bool:
    star = line.rfind(b"*")
    return line[:1] == b"$" and int(line[star + 1 : star + 5], 16) == crc16_ccitt_false(
        line[1:star]
    )


@given(_frames)
def test_any_frame_round_trips(frame: Frame) -> None:
    data = encode(frame)
    assert len(data) <= MAX_FRAME_BYTES
    assert FrameParser().feed(data) == [frame]


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=400), max_size=20))
def test_arbitrary_bytes_never_raise_and_buffer_stays_bounded(chunks: list[bytes]) -> None:
    parser = FrameParser()
    stream = b"".join(chunks)
    for chunk in chunks:
        for frame in parser.feed(chunk):
            data = encode(frame)
            assert data in stream
            assert _checksum_ok(data)
        assert parser.buffered <= MAX_FRAME_BYTES


@settings(max_examples=300)
@given(
    st.lists(_frames, min_size=1, max_size=6),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["flip", "drop", "insert", "dup"])),
        max_size=8,
    ),
    st.integers(1, 64),
    st.data(),
)
def test_mutated_streams_accept_only_frames_sent_intact(
    frames: list[Frame],
    mutations: list[tuple[int, str]],
    chunk_size: int,
    data: st.DataObject,
) -> None:
    """Mutate a stream of valid frames; every frame that comes out must be one that was sent
    and, re-encoded, must occur in the mutated stream with a correct CRC."""
    stream = bytearray(b"".join(encode(f) for f in frames))
    for position, kind in mutations:
        if not stream:
            break
        i = position % len(stream)
        if kind == "flip":
            stream[i] ^= data.draw(st.integers(1, 255))
        elif kind == "drop":
            del stream[i]
        elif kind == "insert":
            stream[i:i] = data.draw(st.binary(min_size=1, max_size=5))
        else:
            stream[i:i] = stream[i : i + data.draw(st.integers(1, 40))]
    parser = FrameParser()
    out: list[Frame] = []
    mutated = bytes(stream)
    for start in range(0, len(mutated), chunk_size):
        out += parser.feed(mutated[start : start + chunk_size])
        assert parser.buffered <= MAX_FRAME_BYTES
    for frame in out:
        encoded = encode(frame)
        assert encoded in mutated
        assert _checksum_ok(encoded)
        assert frame in frames
    if not mutations:
        assert out == frames


def test_the_parser_does_no_io() -> None:
    """The parser is part of the pure core: it imports neither serial nor any I/O module."""
    import ast

    import controller.core.sensor_protocol as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported.isdisjoint({"serial", "gpiozero", "os", "socket", "io", "time", "threading"})
