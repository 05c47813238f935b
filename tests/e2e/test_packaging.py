"""The lock files and the wheel: what `make demo`, `make test` and the Pi's installer install.

The venvs and the installer install only from requirements/*.txt (pip --require-hashes), so
a dependency added to pyproject.toml without `make lock` would be missing from them; these
tests say so before an install does. The wheel must carry the display's page (package data).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def read_lock(path: Path) -> dict[str, tuple[Requirement, frozenset[str]]]:
    """A lock file as written by `uv pip compile --generate-hashes`: name -> (pin, hashes)."""
    entries: list[tuple[Requirement, set[str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip().removesuffix("\\").strip()
        if text.startswith("--hash="):
            entries[-1][1].add(text.removeprefix("--hash="))
        elif text and not text.startswith("#"):
            entries.append((Requirement(text), set()))
    return {canonicalize_name(pin.name): (pin, frozenset(hashes)) for pin, hashes in entries}


RUNTIME = read_lock(LOCKS / "runtime.txt")
TEST = read_lock(LOCKS / "test.txt")


@pytest.mark.parametrize("lock", [RUNTIME, TEST], ids=["runtime", "test"])
def test_every_pin_is_exact_and_hashed(lock: dict[str, tuple[Requirement, frozenset[str]]]) -> None:
    for name, (pin, hashes) in lock.items():
        assert [spec.operator for spec in pin.specifier] == ["=="], name
        assert hashes, f"{name} has no hash"
        assert all(h.startswith("sha256:") for h in hashes), name


def test_the_test_lock_keeps_the_runtime_pins() -> None:
    """`make test` installs test.txt over the runtime's venv: the same versions, the same files."""
    for name, (pin, hashes) in RUNTIME.items():
        assert name in TEST, name
        assert str(TEST[name][0].specifier) == str(pin.specifier), name
        assert TEST[name][1] == hashes, name


@pytest.mark.parametrize(
    ("wanted", "lock"),
    [
        (PYPROJECT["project"]["dependencies"], RUNTIME),
        (PYPROJECT["project"]["optional-dependencies"]["test"], TEST),
        (PYPROJECT["build-system"]["requires"], RUNTIME),
    ],
    ids=["runtime", "test", "build"],
)
def test_the_locks_satisfy_pyproject(
    wanted: list[str], lock: dict[str, tuple[Requirement, frozenset[str]]]
) -> None:
    """A requirement edited in pyproject.toml and not locked again (`make lock`) fails here."""
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{name} is not in the lock: run `make lock`"
        (version,) = (spec.version for spec in lock[name][0].specifier)
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{name}=={version} does not meet {requirement.specifier}: run `make lock`"
        )


def test_the_build_lock_input_follows_the_build_system() -> None:
    build_in = (LOCKS / "build.in").read_text(encoding="utf-8").splitlines()
    pinned = [line for line in build_in if line.strip() and not line.startswith("#")]
    assert pinned == PYPROJECT["build-system"]["requires"]


@pytest.mark.slow
def test_the_wheel_carries_the_packages_and_the_display_page(tmp_path: Path) -> None:
    """Built offline from a copy of the sources, with the venv's setuptools (from the lock)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("controller", "drivers"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--verbose", "--no-index", "--no-deps"]
    built = subprocess.run(
        [*pip_wheel, "--no-build-isolation", "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,  # a hang, not a slow machine
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    # setuptools' warnings: "SetuptoolsDeprecationWarning: ..." and a "!!" banner
    assert "Warning:" not in output, output
    assert "!!" not in output, output
    (wheel,) = (tmp_path / "dist").glob("paigow_controller-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    # the table's command line, and the witness's own (controller/witness/main.py)
    assert "paigow-controller = controller.cli:main" in scripts
    assert "paigow-witness = controller.witness.main:main" in scripts
    folder = ROOT / "controller" / "display" / "assets"
    assets = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert assets, "no display assets in the checkout"
    assert "fonts/sans-400.woff2" in assets  # the page's own fonts, in a folder of their own
    for asset in assets:
        assert f"controller/display/assets/{asset}" in names
    for module in ("controller/display/server.py", "controller/py.typed", "drivers/py.typed"):
        assert module in names
    assert not [n for n in names if n.split("/")[0] in {"tests", "bench", "hw", "scripts"}]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--bogus"], "unknown argument '--bogus'"),
        (["--wheels"], "--wheels needs a directory"),
        (["--wheels", "/nonexistent/wheels"], "--wheels /nonexistent/wheels: not a directory"),
        # signing first: a release without its signed manifest would fault under `run`
        ([], "install: no release signing: give PAIGOW_MANIFEST=FILE (signed off the box)"),
        (["--no-kiosk", "--no-start"], "or PAIGOW_RELEASE_KEY=FILE (made once by paigow-contr"),
        (["PAIGOW_RELEASE_KEY=/nonexistent/release.key"], "/nonexistent/release.key: no such"),
        (["PAIGOW_MANIFEST=/nonexistent/M.json"], "install: /nonexistent/M.json: no such file"),
    ],
)
def test_the_installer_refuses_a_bad_argument_in_one_line(args: list[str], said: str) -> None:
    """Checked before anything else (root, apt, the lock): one line, exit 2. (What it installs
    is tested in a booted Debian: tests/system.) Never given a signing that exists: run as
    root, it would install on this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIGOW_")}
    env.update(arg.split("=", 1) for arg in args if "=" in arg)
    argv = [arg for arg in args if "=" not in arg]
    done = subprocess.run(
        [str(ROOT / "hw/install-raspberry-pi.sh"), *argv], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert said in done.stderr
