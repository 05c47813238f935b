"""The canonical encoder's and decoder's quick paths (controller/core/canonical.py) accept exactly
what the reference paths accept, give the same bytes or value, and refuse with the same words:
the encoder's check of plain types, the C scanner and encoder called directly, and texts
recognised by the shape of one decoded before."""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core import canonical

SAFE = canonical.MAX_SAFE_INTEGER
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-SAFE, SAFE)
    | st.sampled_from([0, 10**14, -(10**15) + 1, 10**15, SAFE, -SAFE])
    | st.text(st.characters(codec="utf-8"), max_size=8)
    | st.sampled_from(['"', "\\", "\n", "\x01\x7f", "\u2028", "é", "a b", "-0", "1.5"])
)
KEYS = st.text(st.characters(codec="utf-8"), max_size=4) | st.sampled_from(["a", "b", "seq", " "])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


class Colour(StrEnum):
    RED = "red"


class Count(IntEnum):
    TWO = 2


# What a record must not hold, or holds in another type than the plain ones, mixed in.
ODD_SCALARS = SCALARS | st.sampled_from(
    [
        1.5,
        float("nan"),
        2**53,
        -(2**53),
        10**30,
        "\ud800",
        b"bytes",
        Colour.RED,
        Count.TWO,
        frozenset({1}),
        object(),
    ]
)
ODD_VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(KEYS | st.integers(0, 3) | st.none(), inner, max_size=4)
    ),
    max_leaves=12,
)


def _encoded(encode: Any, value: object) -> object:
    try:
        return ("bytes", encode(value))
    except canonical.EncodingError as exc:
        return ("refused", str(exc))


def _encode_reference(value: object) -> bytes:
    canonical._check(value, "$")
    return canonical._DUMPS(value).encode("utf-8")


@given(ODD_VALUES)
def test_encode_writes_or_refuses_as_the_reference_walk_does(value: object) -> None:
    assert _encoded(canonical.encode, value) == _encoded(_encode_reference, value)


def test_encode_names_where_a_lone_surrogate_is() -> None:
    with pytest.raises(canonical.EncodingError, match=r"\$\.a\[1\]: string is not valid"):
        canonical.encode({"a": ["ok", "\ud800"]})


def _outcome(decode: Any, data: bytes) -> object:
    try:
        return ("value", decode(data))
    except canonical.EncodingError as exc:
        return ("refused", str(exc))


def _mutations(data: bytes, draw: st.DrawFn) -> bytes:
    at = draw(st.integers(0, len(data)))
    how = draw(st.sampled_from(["flip", "insert", "delete", "swap"]))
    if how == "flip" and at < len(data):
        bit = draw(st.integers(0, 7))
        return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]
    if how == "insert":
        extra = draw(st.sampled_from([b" ", b"\\", b"0", b"-", b".5", b"e1", b'"', b"\xff", b"9"]))
        return data[:at] + extra + data[at:]
    if how == "delete" and at < len(data):
        return data[:at] + data[at + 1 :]
    if how == "swap" and at + 1 < len(data):
        return data[:at] + data[at + 1 : at + 2] + data[at : at + 1] + data[at + 2 :]
    return data


@given(VALUES)
def test_what_encode_writes_decodes_to_the_same_value(value: object) -> None:
    assert canonical.decode(canonical.encode(value)) == canonical.normalized(value)


@given(VALUES, st.data())
def test_any_altered_text_is_decoded_or_refused_as_the_reference_does(
    value: object, data: st.DataObject
) -> None:
    text = _mutations(canonical.encode(value), data.draw)
    assert _outcome(canonical.decode, text) == _outcome(canonical._decode_reference, text)


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1}',
        b'{"b":1,"a":2}',
        b'{"a":1,"a":1}',
        b"-0",
        b'"\\u0041"',
        b'"\\u001F"',
        b"1.0",
        b"NaN",
        b"12345678901234567",
        b'"\\ud800"',
        b"\xff",
        b" 1",
        b"1 ",
        b"\xef\xbb\xbf1",
    ],
)
def test_non_canonical_texts_are_refused_with_the_reference_words(text: bytes) -> None:
    expected = _outcome(canonical._decode_reference, text)
    assert expected[0] == "refused"
    assert _outcome(canonical.decode, text) == expected


def _same_shape(value: object) -> st.SearchStrategy[object]:
    """Values of the shape of ``value``: its containers and keys, any scalar in each place."""
    if isinstance(value, list):
        return st.tuples(*[_same_shape(item) for item in value]).map(list)
    if isinstance(value, dict):
        keys = list(value)
        return st.tuples(*[_same_shape(value[k]) for k in keys]).map(
            lambda items: dict(zip(keys, items, strict=True))
        )
    return SCALARS


@given(VALUES, st.data())
def test_a_text_of_a_learned_shape_is_recognised_and_holds_its_value(
    value: object, data: st.DataObject
) -> None:
    shapes = canonical.Shapes()
    shapes.learn(canonical.decode(canonical.encode(value)), "hint")
    other = data.draw(_same_shape(canonical.normalized(value)))
    text = canonical.encode(other).decode("utf-8")
    members = shapes.match(text, "hint")
    escaped = "\\" in text
    long_number = any(len(run) > 15 for run in text.translate(_NOT_DIGITS).split())
    if members is None:
        assert escaped or long_number  # only escapes and long integers are left to decode
    else:
        assert canonical.Shapes.value(text) == canonical.decode(text.encode("utf-8"))
        if isinstance(other, dict):
            scalars = [k for k in sorted(other) if not isinstance(other[k], list | dict)]
            assert len(members) == len(scalars)


_NOT_DIGITS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isdigit()})


@given(VALUES, st.data())
def test_a_recognised_text_is_always_canonical(value: object, data: st.DataObject) -> None:
    """Whatever is done to a text of a learned shape, it is recognised only if the reference
    decoder accepts it, and then holds the value the reference gives."""
    shapes = canonical.Shapes()
    shapes.learn(canonical.decode(canonical.encode(value)), "hint")
    altered = _mutations(canonical.encode(value), data.draw)
    try:
        text = altered.decode("utf-8")
    except UnicodeError:
        return
    if shapes.match(text, "hint") is not None:
        assert _outcome(canonical._decode_reference, altered) == (
            "value",
            canonical.Shapes.value(text),
        )


def test_shapes_are_learned_per_hint_and_in_bounded_numbers() -> None:
    shapes = canonical.Shapes(per_hint=2, hints=1)
    for width in range(4):
        shapes.learn(list(range(width)), "lists")
    shapes.learn({"a": 1}, "other hint")  # no room for a second hint
    assert shapes.match("[1,2]", "lists") is None  # the third shape was not learned
    assert shapes.match("[7]", "lists") == ()
    assert shapes.match("[]", "lists") == ()
    assert shapes.match('{"a":2}', "other hint") is None
    assert shapes.match('{"a":2}', "lists") is None


def test_a_hint_whose_texts_are_mostly_of_new_shapes_stops_being_tried() -> None:
    shapes = canonical.Shapes()
    shapes.learn({"a": 1}, "hint")
    for _ in range(300):
        assert shapes.match('{"b":1}', "hint") is None
    assert shapes.match('{"a":1}', "hint") is None  # no longer tried


def test_a_shape_is_learned_once_even_from_texts_it_does_not_recognise() -> None:
    shapes = canonical.Shapes(per_hint=2)
    for text in (b'{"a":"x"}', b'{"a":"\\n"}', b'{"a":"\\t"}', b'{"a":[]}'):
        if shapes.match(text.decode(), "hint") is None:
            shapes.learn(canonical.decode(text), "hint")
    assert shapes.match('{"a":[]}', "hint") == ()  # room was left for the second shape
    assert shapes.match('{"a":5}', "hint") == ("5",)


@pytest.mark.parametrize(
    "text",
    [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000],
    ids=["lists", "objects"],
)
def test_a_text_nested_deeper_than_the_stack_is_refused_not_a_recursion_error(
    text: bytes,
) -> None:
    """A record, a service request or a context read from outside may nest [[[[... past the
    interpreter's stack: refused as not JSON, never a RecursionError (exit 70)."""
    with pytest.raises(canonical.EncodingError, match="nested too deep"):
        canonical.decode(text)
