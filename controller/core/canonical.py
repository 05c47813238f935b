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
import json.encoder
import json.scanner
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.errors import EncodingError

MAX_SAFE_INTEGER = 2**53 - 1


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


def is_plain(value: object) -> bool:
    """Whether ``value`` is made only of the types a record is built of (dict with string
    keys, list, tuple, str, int within +-(2**53 - 1), bool, None), checked by exact type
    without the reference walk's paths: the common case. False says nothing: :func:`_check`
    decides."""
    if type(value) is dict:
        return _is_plain_dict(value)
    if type(value) is list or type(value) is tuple:
        return _is_plain_items(value)
    return _is_plain_scalar(value)


# The walk calls a function per container only: a scalar of an exact type (most of a record)
# is decided inline, with the answers _is_plain_scalar gives (the path to the display costs
# a function call per member otherwise, some 300 for a result's step). Loops, not all() over
# a generator: a third faster again. A dict's keys are checked first, then its values as any
# other items (one walk of the members for dicts and lists alike; 0.3 us more on a result).


def _is_plain_dict(value: dict[Any, Any]) -> bool:
    for key in value:
        if type(key) is not str:
            return False
    return _is_plain_items(value.values())


def _is_plain_items(value: Iterable[Any]) -> bool:
    for item in value:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            if not _is_plain_dict(item):
                return False
        elif kind is list or kind is tuple:
            if not _is_plain_items(item):
                return False
        elif not _is_plain_scalar(item):
            return False
    return True


def _is_plain_scalar(value: object) -> bool:
    """Anything but a dict, a list or a tuple (by exact type): a subclass of str, bool or int
    (a StrEnum is written as its text, an IntEnum as its number), or not plain."""
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    return False


def encode(value: object) -> bytes:
    """The canonical bytes of ``value``; raises :class:`EncodingError` for what has none.

    A value of plain types is checked by :func:`is_plain`, its strings by encoding the text
    (a lone surrogate fails there); anything else, or a failure, goes through the reference
    walk, which accepts other mappings and sequences and names what is wrong."""
    if is_plain(value):
        try:
            if _FAST is not None and type(value) is dict:  # a record: see _FAST_ENCODE_NOTE
                return "".join(_FAST[1](value, 0)).encode("utf-8")
            return _DUMPS(value).encode("utf-8")
        except UnicodeEncodeError:
            pass
    _check(value, "$")
    return _DUMPS(value).encode("utf-8")


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


def _fast_parts() -> tuple[Any, Any] | None:
    """The C scanner and encoder of the json module, called without the Python wrappers
    around them (what ``_PARSE_SHORT`` and ``_DUMPS`` call inside), or None where the
    interpreter has no C accelerator."""
    scanner = getattr(json.scanner, "c_make_scanner", None)
    make_encoder = getattr(json.encoder, "c_make_encoder", None)
    encode_string = getattr(json.encoder, "c_encode_basestring", None)
    if scanner is None or make_encoder is None or encode_string is None:
        return None
    decoder = json.JSONDecoder(parse_float=_refuse_float, parse_constant=_refuse_constant)
    try:
        # The arguments JSONEncoder.iterencode gives it for _DUMPS, but no cycle check: a
        # value just parsed from text holds no cycle.
        encoder = make_encoder(None, None, encode_string, None, ":", ",", True, False, False)
        scan = scanner(decoder)
        sample = {"b": [1, -2, None, True, '\u00e9"\\\n\x01'], "a": {"": False}}
        text = _DUMPS(sample)
        if "".join(encoder(sample, 0)) != text or scan(text, 0) != (sample, len(text)):
            return None
    except (TypeError, ValueError):  # an interpreter whose accelerator takes other arguments
        return None
    return scan, encoder


_FAST = _fast_parts()

# _FAST_ENCODE_NOTE: ``encode`` writes a plain dict (a record, a context) with the C encoder
# of ``_FAST`` rather than ``_DUMPS``, whose Python wrapper makes a new encoder for each value:
# the same bytes (the same C encoder with the same arguments). It has no cycle check and no
# ``default``, neither needed: ``is_plain`` has walked the whole value (a cycle would not end)
# and accepted only types the encoder writes itself.


def decode(data: bytes) -> Any:
    """Parse canonical bytes; raises :class:`EncodingError` unless ``encode`` gives them back.

    Encoding what was parsed and comparing the bytes catches every departure at once (keys
    out of order or twice, spaces, escapes, a leading zero); floats, JSON's constants and
    integers beyond 2**53 are refused as they are parsed. A verifier decodes every record of
    the log, so this is its main cost: canonical bytes are taken by the json module's C
    scanner and encoder directly, and anything else is decoded again by the reference path
    below, which names what is wrong."""
    if _FAST is not None and _SIXTEEN_DIGITS not in data.translate(_DIGITS_ONLY):
        scan, encode_value = _FAST
        try:
            text = data.decode("utf-8")
            value, end = scan(text, 0)
            # The same value _PARSE_SHORT gives (same scanner, same hooks); equal text means
            # no space before, between or after, and text decoded from UTF-8 holds no lone
            # surrogate, so the bytes are the ones _DUMPS gives back.
            if end == len(text) and "".join(encode_value(value, 0)) == text:
                return value
        except Exception:  # noqa: BLE001, S110 - the reference path names what is wrong
            pass
    return _decode_reference(data)


def _decode_reference(data: bytes) -> Any:
    long_digits = _SIXTEEN_DIGITS in data.translate(_DIGITS_ONLY)
    parse = _PARSE_CHECKED if long_digits else _PARSE_SHORT
    try:
        value = parse(data.decode("utf-8"))
        again = _DUMPS(value).encode("utf-8")
    except UnicodeError as exc:  # not UTF-8, or a lone surrogate escaped in a string
        raise EncodingError("not UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise EncodingError(f"not JSON: {exc.msg} at byte {exc.pos}") from exc
    except RecursionError:  # [[[[... deeper than the interpreter's stack: no record nests so
        raise EncodingError("not JSON: nested too deep") from None
    if again != data:
        raise EncodingError("not in canonical form")
    return value


# --- canonical texts recognised by their shape -------------------------------------------

# A scalar written as encode writes it: a string no character of which needs an escape, an
# integer of at most 15 digits (so within 2**53 - 1) without a leading zero or a minus zero,
# true, false or null.
_SCALAR = r'(?:"[^"\\\x00-\x1f]*"|-?[1-9][0-9]{0,14}|0|true|false|null)'


@dataclass(slots=True)
class _Hint:
    """The shapes learned under one hint, most recently recognised first."""

    patterns: list[re.Pattern[str]] = field(default_factory=list)
    hits: int = 0
    misses: int = 0


class Shapes:
    """Canonical texts recognised by their shape, with one regular expression, instead of
    being parsed and encoded again.

    The shape of a value is its objects with their keys and its arrays with their lengths;
    its strings, integers, booleans and nulls are only places. A text of the shape of a value
    once decoded (so written as ``encode`` writes it: keys sorted, each once, no space), with
    in each place a scalar as ``encode`` writes it (a string no character of which needs an
    escape, an integer of 15 digits at most with no leading zero, true, false, null), is what
    ``encode`` writes for the value it holds: canonical. Anything else (an escape, a long
    integer, another shape) is not recognised and must go through :func:`decode`.

    Shapes are learned under a hint (a record's kind) and tried in that hint's list only;
    the lists are bounded, and a hint whose texts are mostly of shapes not learned stops
    being tried, so that a log of ever new shapes costs little more than decoding."""

    def __init__(self, *, per_hint: int = 8, hints: int = 64) -> None:
        self._per_hint = per_hint
        self._hints = hints
        self._learned: dict[Hashable, _Hint] = {}

    def match(self, text: str, hint: Hashable) -> tuple[str, ...] | None:
        """The scalar members of the top-level object of ``text`` as written (in key order)
        when ``text`` is of a shape learned under ``hint``, so canonical; else None (then
        nothing is known of it)."""
        learned = self._learned.get(hint)
        if learned is None or learned.misses > learned.hits + 256:
            return None
        patterns = learned.patterns
        for index, pattern in enumerate(patterns):
            found = pattern.fullmatch(text)
            if found is not None:
                learned.hits += 1
                if index:
                    patterns.insert(0, patterns.pop(index))
                return found.groups()
        learned.misses += 1
        return None

    def learn(self, value: object, hint: Hashable) -> None:
        """``value`` was decoded from canonical text (by :func:`decode`): texts of its shape
        will be recognised under ``hint``."""
        learned = self._learned.get(hint)
        if learned is None:
            if len(self._learned) >= self._hints:
                return
            learned = self._learned[hint] = _Hint()
        if len(learned.patterns) >= self._per_hint:
            return
        pattern = _shape_pattern(value, top=True)
        if pattern is not None and all(p.pattern != pattern for p in learned.patterns):
            learned.patterns.insert(0, re.compile(pattern))  # (a text with an escape misses)

    @staticmethod
    def value(text: str) -> Any:
        """The value of a text that :meth:`match` recognised (parsed only: it is canonical)."""
        if _FAST is None:
            return _PARSE_SHORT(text)
        value, _ = _FAST[0](text, 0)
        return value


def _shape_pattern(value: object, *, top: bool = False) -> str | None:
    """The regular expression of the canonical texts of the shape of ``value``, the scalar
    members of a top-level object captured; None for a float or a key that needs an escape."""
    if value is None or isinstance(value, bool | str):
        return _SCALAR
    if isinstance(value, int):
        return _SCALAR if abs(value) <= MAX_SAFE_INTEGER else None
    if isinstance(value, list):
        return _array_pattern(value)
    if isinstance(value, dict):
        return _object_pattern(value, top=top)
    return None


def _array_pattern(value: list[Any]) -> str | None:
    items = [_shape_pattern(item) for item in value]
    if any(item is None for item in items):
        return None
    return r"\[" + ",".join(item for item in items if item is not None) + r"\]"


def _object_pattern(value: dict[Any, Any], *, top: bool) -> str | None:
    """An object's members in key order; at the top, each scalar member captured."""
    members = []
    for key in sorted(value):
        if not isinstance(key, str) or _DUMPS(key) != f'"{key}"':
            return None
        member = _shape_pattern(value[key])
        if member is None:
            return None
        if top and member == _SCALAR:
            member = f"({member})"
        members.append(re.escape(f'"{key}":') + member)
    return r"\{" + ",".join(members) + r"\}"


def normalized(value: object) -> Any:
    """``value`` as decoding its canonical encoding gives it back (tuples become lists), for
    comparing what the program computes with what a record holds. ``value`` must be one the
    program built (its types are not checked again)."""
    return json.loads(_DUMPS(value))
