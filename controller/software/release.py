"""A release as the installer (``hw/install-raspberry-pi.sh``) builds it, and its id.

A release directory, ``/opt/paigow-controller/releases/<id>``, holds what the product is
built from and everything else the installer puts on the box, copied from the checkout:

- ``src/``: ``controller``, ``drivers``, ``requirements``, ``pyproject.toml``, ``README.md``,
  ``docs`` (the virtualenv beside it, ``venv/``, is built from these);
- ``system/``: the systemd unit, the udev rule, the example config and the kiosk's files
  (``hw/kiosk``), installed from here, so that ``--rollback`` puts the previous release's
  back with its code;
- ``RELEASE``: the id, which ``paigow-controller --version`` prints.

The id is the version and the first 12 hex digits of the SHA-256 of the release's listing
(every file's path, SHA-256 and whether it is executable): two trees that differ in any file
the installer installs have different ids. :func:`compare` checks a built release against the
tree it was built from, and the installed packages against their sources, naming every file
that differs: what the installer says before it builds the release again.

Only the standard library: the installer runs this file with the system's ``python3`` from the
checkout (``python3 -I controller/software/release.py``), before any virtualenv exists, and
never trusts the code of a release it checks.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import sys
import tomllib
from pathlib import Path


class ReleaseError(Exception):
    """A tree that cannot be a release (a file that is not a regular file, no version). Defined
    here, not in controller/errors.py: the installer runs this file alone, before the package is
    installed, with only the standard library."""


# checkout path -> path in the release
SOURCES = {
    "controller": "src/controller",
    "drivers": "src/drivers",
    "requirements": "src/requirements",
    "pyproject.toml": "src/pyproject.toml",
    "README.md": "src/README.md",
    "docs": "src/docs",  # the guides the README maps (the units' Documentation=)
    "systemd/paigow-controller.service": "system/paigow-controller.service",
    "hw/99-paigow-dice.rules": "system/99-paigow-dice.rules",
    "hw/config.example.toml": "system/config.example.toml",
    "hw/kiosk": "system/kiosk",
}
TOPS = ("src", "system")  # what the listing covers in a release directory
PACKAGES = ("controller", "drivers")  # installed in the venv's site-packages
# what the installer adds to the installed packages (controller/core/software.py EXCLUDED)
INSTALLED_EXTRA = frozenset({"controller/MANIFEST.json", "controller/release.pub"})
RELEASE_FILE = "RELEASE"
MAX_RELEASE_FILE_BYTES = 256
RELEASE_ID = re.compile(r"[0-9A-Za-z.+!_-]{1,64}-[0-9a-f]{12}")
NOT_A_FILE = "not-a-regular-file"  # never a digest: never a match
MAX_FILES = 20000


def _skipped(name: str) -> bool:
    return name == "__pycache__" or name.endswith((".pyc", ".pyo"))


def _digest(path: Path) -> str:
    """SHA-256 hex of a regular file, with ``+x`` when its owner may execute it; a link or
    anything else that is not a regular file is ``NOT_A_FILE`` (never opened)."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return NOT_A_FILE
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest() + ("+x" if info.st_mode & stat.S_IXUSR else "")


def _walk(top: Path, prefix: str, found: dict[str, str]) -> None:
    if top.is_symlink() or not top.exists():
        if top.is_symlink():
            found[prefix] = NOT_A_FILE
        return
    if not top.is_dir():
        found[prefix] = _digest(top)
        return
    for directory, subdirectories, names in os.walk(top, followlinks=False):
        relative = Path(directory).relative_to(top)
        subdirectories[:] = sorted(d for d in subdirectories if not _skipped(d))
        for name in sorted(names):
            if _skipped(name):
                continue
            path = (Path(prefix) / relative / name).as_posix()
            found[path] = _digest(Path(directory) / name)
            if len(found) > MAX_FILES:
                raise ReleaseError(f"{top}: more than {MAX_FILES} files")
        for name in list(subdirectories):  # a linked directory is named, never entered
            if (Path(directory) / name).is_symlink():
                found[(Path(prefix) / relative / name).as_posix()] = NOT_A_FILE
                subdirectories.remove(name)


def listing(release: Path) -> dict[str, str]:
    """Every file of a release's ``src/`` and ``system/`` (or of a staged tree): path -> its
    SHA-256 (``+x`` when executable). Bytecode caches are not part of a release."""
    found: dict[str, str] = {}
    for top in TOPS:
        _walk(release / top, top, found)
    return found


def version_of(tree: Path) -> str:
    """The version in ``src/pyproject.toml`` of a staged tree or a release."""
    try:
        project = tomllib.loads((tree / "src/pyproject.toml").read_text(encoding="utf-8"))
        version = project["project"]["version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{tree}: no version in src/pyproject.toml ({exc})") from None
    if not isinstance(version, str) or not re.fullmatch(r"[0-9A-Za-z.+!_-]{1,64}", version):
        raise ReleaseError(f"{tree}: {version!r} is not a version a release can be named by")
    return version


def release_id(tree: Path) -> str:
    """The id of the release built from ``tree``: the version and 12 hex digits."""
    lines = "".join(f"{digest}  {path}\n" for path, digest in sorted(listing(tree).items()))
    return f"{version_of(tree)}-{hashlib.sha256(lines.encode()).hexdigest()[:12]}"


def stage(checkout: Path, dest: Path) -> None:
    """Copy what a release holds from ``checkout`` into ``dest`` (which must not exist), in the
    release's layout, without bytecode caches; modes 0644, or 0755 for what is executable
    (so that the id does not depend on the checkout's umask)."""
    dest.mkdir(mode=0o755)
    for source, target in SOURCES.items():
        origin = checkout / source
        if origin.is_symlink() or not origin.exists():
            raise ReleaseError(f"{origin}: missing or a link (a release is built from files)")
        copy = dest / target
        copy.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, copy, symlinks=True, ignore=_ignore)
        else:
            shutil.copy2(origin, copy)
    odd = [path for path, digest in listing(dest).items() if digest == NOT_A_FILE]
    if odd:
        raise ReleaseError(f"not regular files: {', '.join(sorted(odd)[:5])}")
    for directory, _, names in os.walk(dest):
        os.chmod(directory, 0o755)  # noqa: S103 (a release is read by every user)
        for name in names:
            path = Path(directory) / name
            executable = os.stat(path).st_mode & stat.S_IXUSR
            os.chmod(path, 0o755 if executable else 0o644)


def _ignore(_: str, names: list[str]) -> set[str]:
    return {name for name in names if _skipped(name)}


def site_packages(release: Path) -> Path | None:
    """The release's virtualenv's site-packages (None before it is built)."""
    found = sorted(release.glob("venv/lib/python3*/site-packages"))
    return found[0] if len(found) == 1 else None


def _differences(expected: dict[str, str], found: dict[str, str]) -> list[str]:
    said = [
        f"{'changed' if path in found else 'missing'}: {path}"
        for path, digest in expected.items()
        if found.get(path) != digest
    ]
    said += [f"added: {path}" for path in found if path not in expected]
    return said


def compare(release: Path, staged: Path) -> list[str]:
    """What differs between a built release and the staged tree it is built from (which has
    the same id), in the release's own ``src/`` and ``system/`` and in the packages installed
    in its virtualenv (against their sources; a file the wheel does not carry is not
    missing, except a module: the signed manifest names the rest). Empty when nothing does."""
    said = _differences(listing(staged), listing(release))
    if not (release / RELEASE_FILE).is_file():
        said.append(f"missing: {RELEASE_FILE}")
    site = site_packages(release)
    if site is None:
        return [*said, "missing: venv (the release's virtualenv)"]
    sources: dict[str, str] = {}
    installed: dict[str, str] = {}
    for package in PACKAGES:
        _walk(staged / "src" / package, package, sources)
        _walk(site / package, package, installed)
    for path in INSTALLED_EXTRA:
        installed.pop(path, None)
    for line in _differences(sources, installed):
        change, _, path = line.partition(": ")
        if change == "missing" and not path.endswith(".py"):
            continue
        said.append(f"{change}: {path} (installed)")
    return sorted(said, key=lambda s: s.partition(": ")[2])


def installed_release(prefix: Path | None = None) -> str | None:
    """The id of the release this Python runs from (``RELEASE`` beside its virtualenv), or
    None outside a release (a checkout, a test's venv)."""
    venv = Path(sys.prefix) if prefix is None else prefix
    try:
        with (venv.parent / RELEASE_FILE).open("rb") as f:
            text = f.read(MAX_RELEASE_FILE_BYTES + 1).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if RELEASE_ID.fullmatch(text) else None


USAGE = """\
usage: release.py stage CHECKOUT DEST | id TREE | compare RELEASE STAGED
  stage    copy a release's files from a checkout into DEST (new), in the release's layout
  id       print the id of the release built from TREE (a staged tree or a release)
  compare  name every file in which RELEASE differs from STAGED; exit 1 when one does"""


def main(argv: list[str]) -> int:
    """The installer's commands; one line on stderr and exit 2 for a bad argument, exit 1
    for a tree that cannot be a release (or, ``compare``, a release that differs)."""
    try:
        match argv:
            case ["stage", checkout, dest]:
                stage(Path(checkout), Path(dest))
            case ["id", tree]:
                print(release_id(Path(tree)))
            case ["compare", release, staged]:
                said = compare(Path(release), Path(staged))
                for line in said:
                    print(line)
                return 1 if said else 0
            case _:
                print(USAGE.splitlines()[0], file=sys.stderr)
                return 2
    except (ReleaseError, OSError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
