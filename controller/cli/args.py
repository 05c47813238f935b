"""The command line's parser and the checks every argument from a person gets: one line on
stderr and exit 2 for a bad one, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, NoReturn

from controller.core.digits import is_ascii_digits, parse_bounded_int, quoted
from controller.errors import EX_USAGE, NumberError, UsageError

PROG = "paigow-controller"
MESSAGE_MAX_CHARS = 500  # one line on stderr, even when an argument was 100 kB long


def one_line(message: str) -> str:
    """``message`` as one line of at most MESSAGE_MAX_CHARS: line breaks and other control
    characters escaped (an argument may hold them), the tail of a long message cut."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(text) > MESSAGE_MAX_CHARS:
        text = text[: MESSAGE_MAX_CHARS - 30] + f"... ({len(text)} characters)"
    return text


def complain(message: str) -> None:
    """The one line a failed command leaves; in the journal at priority err (a service's
    stderr there is read at info unless the line says otherwise)."""
    prefix = "<3>" if stderr_is_journal() else ""
    sys.stderr.write(f"{prefix}{PROG}: {one_line(message)}\n")


def stderr_is_journal() -> bool:
    """Whether stderr is the journal stream systemd gave this process: ``$JOURNAL_STREAM``
    names its device and inode (systemd.exec(5)), which a stream passed on to a child (a
    redirect, a pipe) no longer matches."""
    device, sep, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    if not (sep and is_ascii_digits(device) and is_ascii_digits(inode)):
        return False
    if len(device) > 20 or len(inode) > 20:
        return False
    try:
        status = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):  # closed, replaced, or not a real file
        return False
    return status.st_dev == int(device) and status.st_ino == int(inode)


PATH_MAX_BYTES = 4096  # Linux's PATH_MAX and NAME_MAX: a longer name cannot name a file
NAME_MAX_BYTES = 255
NUMBER_MAX_CHARS = 20  # every number option's range fits (2**63 - 1 has 19 digits)
# Options checked when the command line is parsed, whichever command declares them: the
# command still decides the range (a number) or what the path must be.
PATH_OPTIONS = frozenset({"config", "state_dir", "key", "log", "sensor_url", "checkpoint"})
NUMBER_OPTIONS = frozenset({"total", "bank_seat", "rounds", "seed", "n_bytes", "last"})


def path_argument(text: str) -> str:
    """A file or directory name (or a sensor URL): 1..PATH_MAX bytes, no part over NAME_MAX,
    no control characters. Returned unchanged."""
    raw = os.fsencode(text)
    if not raw:
        raise argparse.ArgumentTypeError("an empty name")
    if any(c < " " or c == "\x7f" for c in text):
        raise argparse.ArgumentTypeError(f"{quoted(text)} has control characters")
    if len(raw) > PATH_MAX_BYTES or any(len(part) > NAME_MAX_BYTES for part in raw.split(b"/")):
        raise argparse.ArgumentTypeError(f"{quoted(text)} is too long to be a name")
    return text


def directory_argument(text: str | None, option: str = "--state-dir") -> Path | None:
    """A directory argument that may not exist yet (None when not given); one that names a
    file is refused now, before anything starts. (Its length and characters were checked as
    it was parsed.)"""
    if text is None:
        return None
    path = Path(text)
    try:
        is_other = path.exists() and not path.is_dir()
    except OSError as exc:
        raise UsageError(f"{option} {quoted(text)}: {exc.strerror or exc}") from None
    if is_other:
        raise UsageError(f"{option} {quoted(text)} exists and is not a directory")
    return path


def number_argument(text: str) -> str:
    """A whole number as text: ASCII digits only (int() also takes '٣', ' 7' and '1_0').
    Returned unchanged; the command checks the range."""
    if not is_ascii_digits(text) or len(text) > NUMBER_MAX_CHARS:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a whole number")
    return text


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line and exits 2, and checks every option
    in PATH_OPTIONS and NUMBER_OPTIONS as it parses them."""

    def error(self, message: str) -> NoReturn:
        complain(message)
        raise SystemExit(EX_USAGE)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if action.type is None and action.dest in PATH_OPTIONS:
            action.type = path_argument
        elif action.type is None and action.dest in NUMBER_OPTIONS:
            action.type = number_argument
        return action


def whole_number(text: str, what: str, low: int, high: int) -> int:
    """A whole-number argument: ASCII digits for a value in ``low..high``, else exit 2."""
    try:
        return parse_bounded_int(text, low=low, high=high, what=what)
    except NumberError as exc:
        raise UsageError(str(exc)) from None


def print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, sort_keys=False) + "\n")


# --- help, and JSON or text -------------------------------------------------------------------

JSON_OR_TEXT = (
    "On a terminal it prints a readable report; with --json, or when stdout is not a terminal"
    " (a pipe, a file), it prints JSON, whose shape programs rely on."
)


HELP_WIDTH = 79  # an 80-column terminal


def describe(p: argparse.ArgumentParser, description: str, examples: str) -> None:
    """A subcommand's ``--help``: the paragraphs saying what it does (blank lines between
    them), filled to HELP_WIDTH, then the examples exactly as written."""
    paragraphs = description.split("\n\n")
    p.description = "\n\n".join(
        textwrap.fill(
            " ".join(text.split()), HELP_WIDTH, break_long_words=False, break_on_hyphens=False
        )
        for text in paragraphs
    )
    p.epilog = examples
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", action="store_true", help="JSON even on a terminal (always JSON in a pipe)"
    )


def wants_json(args: argparse.Namespace) -> bool:
    """JSON for a program, text for a person: ``--json``, or stdout is not a terminal."""
    return bool(args.json) or not sys.stdout.isatty()


def print_report(
    args: argparse.Namespace,
    doc: Any,
    report: Callable[[Any], str],
    *,
    to_json: Callable[[object], None] = print_json,
) -> None:
    """A reading command's answer: ``doc`` as JSON for a program (``--json``, a pipe), or its
    ``report`` in words for a person at a terminal."""
    if wants_json(args):
        to_json(doc)
    else:
        sys.stdout.write(report(doc))


# --- local date-times ---------------------------------------------------------------------------

LOCAL_TIME_FORMS = "YYYY-MM-DD, YYYY-MM-DD HH:MM or YYYY-MM-DD HH:MM:SS"
LOCAL_TIME_MAX_CHARS = 19  # the longest form
EARLIEST_YEAR, LATEST_YEAR = 2000, 2999  # a log's times are never outside; no overflow near them
_LOCAL_TIME = re.compile(  # ASCII digits only: \d would take '٣'
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?"
)


@dataclass(frozen=True)
class LocalSpan:
    """A local date-time as a person wrote it, as the span of UTC time it names: a date is its
    whole day, ``14:00`` the whole minute, ``14:00:30`` the whole second. ``end`` is exclusive."""

    text: str
    start: datetime
    end: datetime


def local_span(text: str, option: str, *, zone: tzinfo | None) -> LocalSpan:
    """``text`` (one of LOCAL_TIME_FORMS, ASCII digits, a year EARLIEST_YEAR..LATEST_YEAR) read
    in ``zone`` (None: the machine's zone, with its daylight saving). A bad one: UsageError."""
    found = None if len(text) > LOCAL_TIME_MAX_CHARS else _LOCAL_TIME.fullmatch(text)
    if found is None:
        raise UsageError(f"{option} {quoted(text)} is not a local date-time ({LOCAL_TIME_FORMS})")
    year, month, day = (int(found[i]) for i in (1, 2, 3))
    hour, minute, second = (None if found[i] is None else int(found[i]) for i in (4, 5, 6))
    if not EARLIEST_YEAR <= year <= LATEST_YEAR:
        years = f"{EARLIEST_YEAR}..{LATEST_YEAR}"
        raise UsageError(f"{option} {quoted(text)}: the year is not {years}")
    try:
        naive = datetime(year, month, day, hour or 0, minute or 0, second or 0)
    except ValueError as exc:
        raise UsageError(f"{option} {quoted(text)}: {exc}") from None
    unit = (
        timedelta(days=1)
        if hour is None
        else timedelta(minutes=1)
        if second is None
        else timedelta(seconds=1)
    )

    def utc(moment: datetime) -> datetime:
        local = moment.astimezone() if zone is None else moment.replace(tzinfo=zone)
        return local.astimezone(UTC)

    return LocalSpan(text, utc(naive), utc(naive + unit))
