"""The arm64 test's tree: Debian bookworm arm64 with this checkout installed, entered with
chroot through qemu-user-static (tests/arm64/chroot.py). Run by ``make armtest`` (``make test``
runs it after the system test), as root, never inside the parallel suite. Where arm64 binaries
cannot run (not root, no binfmt_misc, no qemu) the test is skipped with the reason."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from chroot import Chroot, locked, root_filesystem, unavailable


@pytest.fixture(scope="session")
def arm64() -> Iterator[Chroot]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"arm64 under qemu: {reason}")
    with locked():
        started = time.monotonic()
        tree = Chroot(root_filesystem())
        built = time.monotonic()
        said = tree.install_project()
        print(
            f"\narm64 tree {tree.root}: debootstrap {built - started:.0f} s,"
            f" project and venv {time.monotonic() - built:.0f} s"
            f" ({'made' if said else 'kept'})"
        )
        try:
            yield tree
        finally:
            left = tree.mounts()
            assert left == [], f"mounts left in the arm64 tree: {left}"
