"""One controller per state directory: an exclusive lock held for the daemon's life.

Two daemons on one log would interleave records and fight over the round. The lock is an
``flock`` on ``controller.lock`` in the state directory (released by the kernel when the process
dies, so a crash never leaves it stuck); the holder writes its PID into the file so that a
second start can name it. Reading commands (verify-log, recall, export) take no lock: they open
the log read-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from controller.errors import AuditLogError, InstanceLocked

LOCK_FILE = "controller.lock"


class InstanceLock:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, state_dir: Path) -> InstanceLock:
        """Take the state directory, or raise :class:`InstanceLocked` naming the holder."""
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = state_dir / LOCK_FILE
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise AuditLogError(f"cannot take the state directory {state_dir}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise InstanceLocked(
                f"another controller (PID {holder}) is running on {state_dir}"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise AuditLogError(f"cannot lock {path}: {exc}") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return cls(path, fd)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
