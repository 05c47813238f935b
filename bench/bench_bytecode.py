"""Shipped bytecode: the CLI's and the daemon's start, installed as the installer installs,
with the release's compiled bytecode against none at all (the installer's way before: every
cache deleted, and the unit's PYTHONDONTWRITEBYTECODE=1 keeps the service from writing any).

    .venv/bin/python bench/bench_bytecode.py     # BENCH_BYTECODE_REPEATS=5 for a quick run

A virtualenv as the installer makes it (the runtime lock, hash-checked, then the product,
not editable) is kept in bench/.scratch/install-venv (made again when the lock changes; the
product is installed again at every run). Each round deletes every ``__pycache__`` in it and
measures, then compiles as the installer does (``controller/software/bytecode.py --write``
for the product, ``compileall --invalidation-mode checked-hash`` for the rest) and measures
again, with the unit's environment: the CLI (``paigow-controller --version``, wall time and
the child's CPU time from its rusage) and the daemon (exec -> READY=1 on an empty state
directory, bench/common.py), its software verified against a manifest that names the bytecode.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import loggen
from common import (
    UNIT_ENV,
    daemon_start_s,
    env_int,
    figure,
    machine_load,
    median,
    note,
    spread,
    title,
)

from controller.software import bytecode

ROOT = Path(__file__).resolve().parent.parent
VENV = loggen.SCRATCH / "install-venv"
LOCK = ROOT / "requirements" / "runtime.txt"
GOAL_RATIO = 0.9  # the release's bytecode must win a tenth of the start at least
READY_TIMEOUT_S = 120


def python() -> str:
    return str(VENV / "bin" / "python")


def site_packages() -> Path:
    done = subprocess.run(
        [python(), "-I", "-c", 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def install() -> None:
    """The venv as the installer makes it; the lock only when it changed."""
    stamp = VENV / ".lock-sha256"
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    pip = [python(), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    if not stamp.exists() or stamp.read_text() != digest:
        note("making the installer's virtualenv (the runtime lock, once)")
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([*pip, "--require-hashes", "-r", str(LOCK)], check=True)
        stamp.write_text(digest)
    with tempfile.TemporaryDirectory(prefix="bench-bytecode-") as tmp:
        build = Path(tmp) / "src"  # the build's leftovers go there, not into the checkout
        for part in ("controller", "drivers", "pyproject.toml", "README.md"):
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(source, build / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, build / part)
        subprocess.run(
            [*pip, "--no-deps", "--no-build-isolation", "--force-reinstall", str(build)],
            check=True,
        )


def without_bytecode() -> None:
    for cache in sorted(VENV.rglob("__pycache__")):
        shutil.rmtree(cache)


def with_bytecode(site: Path) -> None:
    """The installer's two steps (hw/install-raspberry-pi.sh)."""
    without_bytecode()
    script = site / "controller" / "software" / Path(bytecode.__file__).name
    subprocess.run(
        [python(), "-I", "-S", str(script), "--write", str(site)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [
            *(python(), "-I", "-m", "compileall", "-q", "-j", "0"),
            *("--invalidation-mode", "checked-hash", "-x", "/site-packages/(controller|drivers)/"),
            str(site),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


CLI_COMMANDS = {
    "version": ["--version"],  # the interpreter, the entry point, the argument parser
    "check": ["check-config", "--config", str(ROOT / "hw" / "config.example.toml")],  # + core
}


def cli_once(command: str = "version") -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + sys, the child's rusage) of a CLI command."""
    env = {**os.environ, **UNIT_ENV}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [str(VENV / "bin" / "paigow-controller"), *CLI_COMMANDS[command]],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def daemon_once(site: Path) -> float:
    prefix, timeout = "bench-bytecode-", READY_TIMEOUT_S
    return daemon_start_s(None, prefix=prefix, timeout_s=timeout, python=python(), packages=site)


def main() -> None:
    repeats = env_int("BENCH_BYTECODE_REPEATS", 7)
    cli_runs = env_int("BENCH_BYTECODE_CLI_RUNS", 5)
    title(f"shipped bytecode: start-up without and with it, medians of {repeats} rounds")
    note(machine_load())
    loggen.SCRATCH.mkdir(parents=True, exist_ok=True)
    install()
    site = site_packages()
    results: dict[str, dict[str, list[float]]] = {
        way: {"version": [], "check": [], "check_cpu": [], "daemon": []}
        for way in ("none", "release")
    }
    for _ in range(repeats):  # interleaved: the machine's load falls on both alike
        for way in ("none", "release"):
            if way == "none":
                without_bytecode()
            else:
                with_bytecode(site)
            cli_once()  # the files in the page cache: not counted
            for _ in range(cli_runs):
                results[way]["version"].append(cli_once("version")[0])
                wall, cpu = cli_once("check")
                results[way]["check"].append(wall)
                results[way]["check_cpu"].append(cpu)
            results[way]["daemon"].append(daemon_once(site))
    for what, name, unit in (
        ("version", "CLI --version", "ms"),
        ("check", "CLI check-config", "ms"),
        ("check_cpu", "CLI check-config CPU (user+sys)", "ms"),
        ("daemon", "daemon exec -> READY=1", "ms"),
    ):
        none = median(results["none"][what]) * 1000
        shipped = median(results["release"][what]) * 1000
        ratio = shipped / none
        figure(f"{name}: no bytecode (baseline)", f"{none:.0f} {unit}")
        figure(f"{name}: the release's", f"{shipped:.0f} {unit}")
        figure("  with / without", f"{ratio:.2f}x", f"<= {GOAL_RATIO}x", ratio <= GOAL_RATIO)
        if what == "daemon":
            note(spread([v * 1000 for v in results["none"][what]], "ms (none)", 0))
            note(spread([v * 1000 for v in results["release"][what]], "ms (release)", 0))


if __name__ == "__main__":
    main()
