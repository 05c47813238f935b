"""The system test's guest: one Debian bookworm machine booted under systemd-nspawn for the
module (tests/system/machine.py). Run by ``make systemtest`` (``make test`` runs it after the
suite), as root, never inside the parallel suite."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from machine import Machine
from trees import CHECKOUT


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machine]:
    if os.geteuid() != 0:
        pytest.fail("the system test boots a container: run it as root (make systemtest)")
    work = tmp_path_factory.mktemp("guest")
    machine = Machine(work)
    try:
        machine.prepare()
        # The runtime lock's wheels, hash-checked: the guest has no network (--private-network),
        # as a table on a closed floor network has none; the installer takes --wheels.
        wheels = machine.root / "root/wheels"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--quiet",
                "--require-hashes",
                "--only-binary=:all:",
                "-r",
                str(CHECKOUT / "requirements/runtime.txt"),
                "-d",
                str(wheels),
            ],
            check=True,
        )
        machine.boot()
        yield machine
    finally:
        machine.close()
