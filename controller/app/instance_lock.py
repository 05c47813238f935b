"""One controller per state directory: an exclusive lock held for the daemon's life.

Two daemons on one log would interleave records and fight over the round. The lock is
``controller.files.PidLock`` on ``controller.lock`` in the state directory (released by the
kernel when the process dies; the holder's PID in it, so that a second start can name it).
Reading commands (verify-log, recall, export) take no lock: they open the log read-only.
"""

from __future__ import annotations

from pathlib import Path

from controller.errors import AuditLogError, InstanceLocked
from controller.files import LockHeld, PidLock

LOCK_FILE = "controller.lock"


class InstanceLock:
    def __init__(self, path: Path, lock: PidLock) -> None:
        self.path = path
        self._lock = lock

    @classmethod
    def acquire(cls, state_dir: Path) -> InstanceLock:
        """Take the state directory, or raise :class:`InstanceLocked` naming the holder."""
        path = state_dir / LOCK_FILE
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock = PidLock.acquire(path)
        except LockHeld as held:
            raise InstanceLocked(
                f"another controller (PID {held.holder}) is running on {state_dir}"
            ) from None
        except OSError as exc:
            raise AuditLogError(f"cannot take the state directory {state_dir}: {exc}") from exc
        return cls(path, lock)

    def release(self) -> None:
        self._lock.release()
