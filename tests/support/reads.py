"""What a read costs in bytes, not seconds: the bytes a call reads through system calls
(``rchar`` of /proc/self/io), for the tests that a read does not grow with the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PROC_IO = Path("/proc/self/io")


def bytes_read() -> int:
    for line in PROC_IO.read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def read_cost(read: Callable[[Path], object], state: Path) -> int:
    """The bytes ``read(state)`` reads through system calls."""
    before = bytes_read()
    read(state)
    return bytes_read() - before
