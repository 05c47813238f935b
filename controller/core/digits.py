"""Whole numbers from outside: ASCII digits only, with an upper bound, checked before ``int()``.

``str.isdigit()`` accepts ``"²"``, ``str.isdecimal()`` accepts ``"٣"``, and ``int()`` accepts
both, and ``"1_000"``, ``" 7 "`` and ``"+7"`` too; a string of a hundred thousand digits makes
``int()`` work hard and then raise. So a number that comes from a person, a file or a socket
(a command-line argument, a config value, a feed request, a Last-Event-ID, a checkpoint's
size) is read here and nowhere else: one to any number of ``0``-``9``, leading zeros allowed,
and a value in ``low..high``, the length checked before any conversion.

Pure: no I/O.
"""

from __future__ import annotations

from controller.errors import NumberError

MAX_SEQ = 2**63 - 1  # the largest audit-log sequence number (SQLite's INTEGER)
_DIGITS = frozenset("0123456789")
_QUOTE_LIMIT = 40


def is_ascii_digits(text: str) -> bool:
    """True for one or more of ``0``-``9`` and nothing else (no sign, space, ``_`` or ``²``)."""
    return bool(text) and all(c in _DIGITS for c in text)


def parse_bounded_int(text: str, *, low: int = 0, high: int, what: str) -> int:
    """The value of ``text``, which must be ASCII digits for a number in ``low..high``.

    Raises :class:`NumberError` (a ValueError) whose message names ``what`` and quotes at most
    a few dozen characters of ``text``, on one line."""
    if low < 0 or high < low:
        raise ValueError(f"parse_bounded_int: bad range {low}..{high}")
    if not is_ascii_digits(text):
        raise NumberError(f"{what} {quoted(text)} is not a whole number")
    significant = text.lstrip("0") or "0"
    if len(significant) > len(str(high)):
        raise NumberError(f"{what} {quoted(text)} is not {low}..{high}")
    value = int(significant)
    if not low <= value <= high:
        raise NumberError(f"{what} {value} is not {low}..{high}")
    return value


def quoted(text: str, limit: int = _QUOTE_LIMIT) -> str:
    """``text`` as a message quotes it: ``repr`` (so one line, control characters escaped),
    cut to about ``limit`` characters."""
    if len(text) > limit:
        return repr(text[:limit]) + f"... ({len(text)} characters)"
    return repr(text)
