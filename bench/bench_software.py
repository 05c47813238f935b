"""Program verification's cost: the time to check the installed packages against their signed
manifest, as the control thread does at start and every hour (between rounds).

A copy of this checkout's ``controller`` and ``drivers`` packages, compiled as the installer
compiles them (``controller/software/bytecode.py``: the ``.pyc`` files are covered too), is
signed with a throw-away release key; the check (read and verify the manifest, hash every file,
compare) is timed against its parts in the same run: hashing the files alone, and reading
their bytes alone (the floor). Medians of ``BENCH_SOFTWARE_REPEATS`` (default 31) runs, the
files in the page cache (a start after a power cut reads them from the card: slower, once).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import env_int, figure, machine_load, note, title

from controller.core.software import SoftwareResult, is_bytecode
from controller.software import bytecode
from controller.software.check import (
    SoftwareVerifier,
    build_manifest,
    create_release_key,
    hash_packages,
    installed_root,
    running_version,
    write_manifest,
)

GOAL_MS = 50.0  # a check holds the control thread between rounds: well under a round's pause


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(samples)


def main() -> None:
    repeats = env_int("BENCH_SOFTWARE_REPEATS", 31)
    title("software identity: verifying the installed packages against the signed manifest")
    note(machine_load())
    with tempfile.TemporaryDirectory(prefix="bench-software-") as tmp:
        root = Path(tmp) / "site-packages"
        for package in ("controller", "drivers"):
            shutil.copytree(
                installed_root() / package,
                root / package,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        subprocess.run(
            [sys.executable, "-I", "-S", bytecode.__file__, "--write", str(root)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        signer = create_release_key(Path(tmp) / "release.key")
        manifest = root / "controller" / "MANIFEST.json"
        write_manifest(manifest, build_manifest(root, signer, running_version()))
        verifier = SoftwareVerifier(
            root, manifest, signer.verifier, required=True, version=running_version()
        )
        check = verifier.check()
        assert check.result is SoftwareResult.OK, check.summary()
        files = sorted(p for p in root.rglob("*") if p.is_file() and p != manifest)
        size = sum(p.stat().st_size for p in files)
        caches = sum(is_bytecode(p.as_posix()) for p in files)
        note(
            f"{check.files} files ({caches} of them bytecode), {size / 1024:.0f} KiB,"
            f" manifest {manifest.stat().st_size} B"
        )
        read_ms = median_ms(lambda: [p.read_bytes() for p in files], repeats)
        hash_ms = median_ms(lambda: hash_packages(root), repeats)
        check_ms = median_ms(verifier.check, repeats)
    figure("read every file (floor)", f"{read_ms:.2f} ms")
    figure("hash every file", f"{hash_ms:.2f} ms")
    figure(
        "verify (manifest + signature + hashes)",
        f"{check_ms:.2f} ms",
        f"< {GOAL_MS:.0f} ms",
        check_ms < GOAL_MS,
    )
    figure("verify / read floor", f"{check_ms / read_ms:.1f} x")


if __name__ == "__main__":
    main()
