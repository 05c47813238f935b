"""The daemon's memory kept from its own account: no core file, no debugger attached.

The RNG's seed material lives in the daemon's memory only (controller/rng/session.py). A
process of the same Unix user could still read it there: from a core file, or by attaching
with ptrace (a debugger, ``/proc/PID/mem``). ``prctl(PR_SET_DUMPABLE, 0)`` (prctl(2)) makes the
kernel write no core file of the process and refuse ptrace and ``/proc/PID/mem`` to any
process without CAP_SYS_PTRACE, the same user's included; the unit's ``LimitCORE=0`` says no
core file too, should a child ever be dumpable. Root (or CAP_SYS_PTRACE, a kernel module, the
RAM itself) can still read it: this keeps the seed from the service's account and the
operators who hold it, not from whoever owns the machine.
"""

from __future__ import annotations

import ctypes
import os

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def _prctl(option: int, arg: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    result = int(prctl(option, arg, 0, 0, 0))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")
    return result


def make_undumpable() -> None:
    """No core file of this process, and no ptrace of it by the same user (OSError if the
    kernel refuses)."""
    _prctl(PR_SET_DUMPABLE, 0)


def is_dumpable() -> bool:
    return _prctl(PR_GET_DUMPABLE, 0) != 0
