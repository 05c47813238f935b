"""The canonical encoding of audit records: the exact bytes that are hashed and signed.

Rules (a verifier in any language can reproduce them):

- JSON (RFC 8259) encoded as UTF-8, without a byte order mark;
- object keys are strings, sorted by code point, each key once;
- compact: no whitespace, ``,`` between members and ``:`` between key and value;
- no floats, NaN or infinities: numbers are integers within +-(2**53 - 1) (I-JSON, RFC 7493),
  so that every verifier reads them the same; a confidence is a whole percentage, a time a string;
- strings are written as themselves (not ``\\u`` escaped) except the characters JSON must
  escape: ``"``, ``\\`` and the controls below U+0020, written as Python's ``json`` writes them.

:func:`decode` accepts only bytes that :func:`encode` would produce, so that a record has
exactly one encoding and a flipped byte cannot go unnoticed. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1


class EncodingError(ValueError):
    """A value that has no canonical encoding, or bytes that are not canonical."""


def _check(value: object, path: str) -> None:
    if value is None or isinstance(value, bool | str):
        if isinstance(value, str):
            _check_text(value, path)
        return
    if isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise EncodingError(f"{path}: integer {value} is outside +-(2**53 - 1)")
        return
    if isinstance(value, float):
        raise EncodingError(f"{path}: floats are not allowed in audit records ({value!r})")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise EncodingError(f"{path}: object key {key!r} is not a string")
            _check_text(key, path)
            _check(item, f"{path}.{key}")
        return
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    raise EncodingError(f"{path}: {type(value).__name__} cannot be recorded")


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodingError(f"{path}: string is not valid Unicode") from exc


def encode(value: object) -> bytes:
    """The canonical bytes of ``value``; raises :class:`EncodingError` for what has none."""
    _check(value, "$")
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def _refuse_float(text: str) -> Any:
    raise EncodingError(f"number {text} is not an integer")


def _refuse_constant(text: str) -> Any:
    raise EncodingError(f"{text} is not JSON")


def _bounded_int(text: str) -> int:
    if len(text) > 17 or not -MAX_SAFE_INTEGER <= (value := int(text)) <= MAX_SAFE_INTEGER:
        raise EncodingError(f"integer {text[:40]} is outside +-(2**53 - 1)")
    return value


_DUMPS = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
# An integer of 15 digits or fewer is within 2**53 - 1: bytes without a run of 16 digits
# are parsed without a call per integer (found by mapping every digit to "0", the rest to " ").
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_SIXTEEN_DIGITS = b"0" * 16
_PARSE_SHORT = json.JSONDecoder(parse_float=_refuse_float, parse_constant=_refuse_constant).decode
_PARSE_CHECKED = json.JSONDecoder(
    parse_float=_refuse_float, parse_constant=_refuse_constant, parse_int=_bounded_int
).decode


def decode(data: bytes) -> Any:
    """Parse canonical bytes; raises :class:`EncodingError` unless ``encode`` gives them back.

    Encoding what was parsed and comparing the bytes catches every departure at once (keys
    out of order or twice, spaces, escapes, a leading zero); floats, JSON's constants and
    integers beyond 2**53 are refused as they are parsed. A verifier decodes every record of
    the log, so this is its main cost."""
    long_digits = _SIXTEEN_DIGITS in data.translate(_DIGITS_ONLY)
    parse = _PARSE_CHECKED if long_digits else _PARSE_SHORT
    try:
        value = parse(data.decode("utf-8"))
        again = _DUMPS(value).encode("utf-8")
    except UnicodeError as exc:  # not UTF-8, or a lone surrogate escaped in a string
        raise EncodingError("not UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise EncodingError(f"not JSON: {exc.msg} at byte {exc.pos}") from exc
    if again != data:
        raise EncodingError("not in canonical form")
    return value


def normalized(value: object) -> Any:
    """``value`` as decoding its canonical encoding gives it back (tuples become lists), for
    comparing what the program computes with what a record holds. ``value`` must be one the
    program built (its types are not checked again)."""
    return json.loads(_DUMPS(value))
