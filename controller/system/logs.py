"""Logging to stderr with syslog priority prefixes (``<3>`` error ... ``<7>`` debug), so that
journald keeps the levels. Nothing secret is ever logged: RNG seed material never reaches a
logger (it is written only to its 0600 file and, at reveal, to the audit log)."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


class SyslogPrefixFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = _PRIORITY.get(record.levelno, 5)
        text = super().format(record)
        # Every line of a multi-line message (a traceback) keeps the record's priority.
        return "\n".join(f"<{priority}>{line}" for line in text.splitlines())


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted, not the stream it was
    when logging was set up (which may have been closed or replaced since)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        return None


def configure_logging(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(SyslogPrefixFormatter("%(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)  # library warnings (gpiozero's pin fallbacks) keep a priority
