"""File operations every subsystem does the same way: durable (a directory's entries fsynced)
and bounded (a file read with a size cap, so ``/dev/zero`` is an error, not a process that grows
without end). Shared by the audit log, its anchor, the RNG's seed files, the config file and the
files named on the command line. May import only the standard library."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a file created, linked or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TooLarge(ValueError):
    """A file (or a device or pipe) that holds more than the caller will read."""


def read_capped(path: Path, limit: int, *, chunk: int = 64 * 1024) -> bytes:
    """The bytes of ``path``, read in chunks and never more than ``limit`` of them. Raises
    ``OSError`` when it cannot be read, :class:`TooLarge` when it holds more than ``limit``
    (``/dev/zero`` included), ``ValueError`` for a path with a NUL byte."""
    chunks: list[bytes] = []
    size = 0
    with Path(path).open("rb", buffering=0) as file:
        while size <= limit:
            data = file.read(min(chunk, limit + 1 - size))
            if not data:
                break
            size += len(data)
            chunks.append(data)
    if size > limit:
        raise TooLarge(f"{path} is larger than {limit} bytes")
    return b"".join(chunks)
