"""File operations every subsystem does the same way: durable (a directory's entries fsynced)
and bounded (a file read with a size cap, so ``/dev/zero`` is an error, not a process that grows
without end). Shared by the audit log, its anchor, the RNG's auditor key file, the config file
and the files named on the command line. May import only the standard library."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from controller.errors import LockHeld, TooLarge


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a file created, linked or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make a file's contents, written by another handle (SQLite's, a copy's), durable."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new(path: Path, blob: bytes, mode: int, *, replace: bool) -> None:
    """``blob`` at ``path``, whole or not at all: written to a new temporary file beside it
    (``mode``), fsynced, then renamed over ``path`` (``replace``) or linked to it (never
    replacing one: ``FileExistsError``), and the directory fsynced. OSError on failure; the
    temporary file never stays."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        (os.replace if replace else os.link)(temporary, path)
        fsync_dir(path.parent)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


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


class _HeldFlock:
    """An open file descriptor holding an ``flock`` until released or the process dies."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class DirectoryLock(_HeldFlock):
    """An exclusive ``flock`` on a directory itself, for the holder's life: a lock file in it
    can be deleted from under its holder (and a second taker then locks a new file), the
    directory cannot while it holds anything. Released by the kernel when the process dies."""

    @classmethod
    def acquire(cls, path: Path) -> DirectoryLock:
        """The lock, or :class:`BlockingIOError` when another open of the directory holds it;
        ``OSError`` when it cannot be opened or locked."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        return cls(fd)


class PidLock(_HeldFlock):
    """An exclusive ``flock`` on ``path`` for the holder's life (the kernel releases it when the
    process dies, so a crash never leaves it stuck), the holder's PID written in the file so
    that a second taker can name it: one controller per state directory, one witness per its
    own."""

    @classmethod
    def acquire(cls, path: Path) -> PidLock:
        """The lock, or :class:`LockHeld` naming the holder; ``OSError`` when the file cannot
        be opened or locked."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise LockHeld(holder) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return cls(fd)
