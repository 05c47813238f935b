"""One controller per state directory: an exclusive lock held for the daemon's life.

Two daemons on one log would interleave records and fight over the round. The lock is an
``flock`` on the state directory itself (``controller.files.DirectoryLock``), taken first, and
``controller.files.PidLock`` on ``controller.lock`` in it, which holds the holder's PID so that
a second start can name it. Both are released by the kernel when the process dies. The lock
file alone would not do: deleted from under a running controller (``rm controller.lock``), a
second one would lock a new file and write into the live log. The directory cannot be deleted
while it holds the log, and its lock is taken before anything is written, so a second
controller is refused with nothing recorded (not even its ``power_on``).
Reading commands (verify-log, recall, export) take no lock: they open the log read-only.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from controller.errors import AuditLogError, InstanceLocked, LockHeld
from controller.files import DirectoryLock, PidLock

LOCK_FILE = "controller.lock"


class InstanceLock:
    def __init__(self, path: Path, directory: DirectoryLock, lock: PidLock) -> None:
        self.path = path
        self._directory = directory
        self._lock = lock

    @classmethod
    def acquire(cls, state_dir: Path) -> InstanceLock:
        """Take the state directory, or raise :class:`InstanceLocked` naming the holder."""
        path = state_dir / LOCK_FILE
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            directory = DirectoryLock.acquire(state_dir)
        except BlockingIOError:
            raise InstanceLocked(
                f"another controller ({_holder(path)}) is running on {state_dir}"
            ) from None
        except OSError as exc:
            raise AuditLogError(f"cannot take the state directory {state_dir}: {exc}") from exc
        try:
            lock = PidLock.acquire(path)
        except LockHeld as held:  # a controller of a release that locked the file alone
            directory.release()
            raise InstanceLocked(
                f"another controller (PID {held.holder}) is running on {state_dir}"
            ) from None
        except OSError as exc:
            directory.release()
            raise AuditLogError(f"cannot take the state directory {state_dir}: {exc}") from exc
        return cls(path, directory, lock)

    def release(self) -> None:
        self._lock.release()
        self._directory.release()


def _holder(path: Path) -> str:
    """The running controller as its lock file names it, or that the file is gone."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with path.open("rb") as file:
            text = file.read(32).decode("ascii").strip()
        if text.isdecimal():
            return f"PID {text}"
    return f"its lock file {LOCK_FILE} was removed or emptied"
