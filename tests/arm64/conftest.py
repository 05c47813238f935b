"""The arm64 test's tree: Debian bookworm arm64 with this checkout installed, entered with
chroot through qemu-user-static (tests/arm64/chroot.py). Run by ``make armtest`` (``make test``
runs it after the system test), as root, never inside the parallel suite. Where arm64 binaries
cannot run (not root, no binfmt_misc, no qemu) the test is skipped with the reason."""

from __future__ import annotations

import os
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


@pytest.fixture
def arm64_suite(arm64: Chroot) -> Chroot:
    """The tree with the test lock's pytest and hypothesis in its venv too: when
    ARM64_SUITE=1 only (``make armtest ARM64_SUITE=1``): made cold, it and the suite's part
    take about three minutes more than the plain rounds, over ``make test``'s budget."""
    if os.environ.get("ARM64_SUITE") != "1":
        pytest.skip("the suite's part under qemu runs with ARM64_SUITE=1 (about 3 min more)")
    started = time.monotonic()
    said = arm64.install_tests()
    print(f"\ntest lock's part: {time.monotonic() - started:.0f} s ({'made' if said else 'kept'})")
    return arm64
