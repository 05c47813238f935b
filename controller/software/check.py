"""Program verification on the box: the installed packages hashed, the release's signed manifest
read, the two compared (``controller/core/software.py``), and the release key made.

Where things are (``[software]`` in the config, ``hw/config.example.toml``):

- the packages: the directory that holds the running ``controller`` and ``drivers`` packages
  (the virtualenv's site-packages on the table; the checkout in development);
- the manifest: ``[software] manifest``, else ``controller/MANIFEST.json`` in that directory
  (the installer writes it there);
- the release key: ``[software] public_key`` (the verifier key itself, in the config), else
  ``controller/release.pub`` beside the manifest. A key on the same writable disk as the files
  only shows that nothing changed them by accident: whoever can change the files can change it
  too (see the README, "Software identity").

Hashing is bounded: at most ``MAX_FILES`` files of at most ``MAX_FILE_BYTES`` each, and
``MAX_TOTAL_BYTES`` in all, read in chunks; symbolic links are never followed.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from controller.core.note import Signer, Verifier
from controller.core.software import (
    MANIFEST_NAME,
    MAX_FILES,
    MAX_MANIFEST_BYTES,
    PACKAGES,
    PUBLIC_KEY_NAME,
    SoftwareCheck,
    SoftwareResult,
    checked,
    is_bytecode,
    is_covered,
    open_manifest,
    sign_manifest,
)
from controller.errors import NoteError, SoftwareIdentityError, TooLarge
from controller.files import read_capped, write_new
from controller.software import bytecode

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 12
MAX_ENTRIES = 8 * MAX_FILES  # names walked in all, bytecode caches and other files included
MAX_KEY_FILE_BYTES = 1024
_CHUNK = 256 * 1024
NOT_A_FILE = "not a regular file"  # the digest of what is not a regular file: never a match
DISTRIBUTION = "paigow-controller"
RELEASE_KEY_NAME = "paigow-controller-release"
BYTECODE_TIMEOUT_S = 300  # compiling ~150 modules: under a second here, a few on a Pi


def installed_root() -> Path:
    """The directory holding the running ``controller`` and ``drivers`` packages."""
    roots = set()
    for package in PACKAGES:  # found, not imported: only the composition root imports drivers
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise SoftwareIdentityError(f"the {package} package is not installed")
        roots.add(Path(spec.origin).resolve().parent.parent)
    if len(roots) != 1:
        raise SoftwareIdentityError(f"the packages are not installed side by side: {sorted(roots)}")
    return roots.pop()


def running_version() -> str:
    """The version of the installed distribution ("unknown" outside an installation)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _file_digest(path: Path, budget: int) -> tuple[str, int]:
    """SHA-256 hex of a regular file (``NOT_A_FILE`` for anything else, never opened: a
    device or a pipe is not read), and its size."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return NOT_A_FILE, 0
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link
            return NOT_A_FILE, 0
        raise SoftwareIdentityError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return NOT_A_FILE, 0
        if info.st_size > min(MAX_FILE_BYTES, budget):
            raise SoftwareIdentityError(
                f"{path}: {info.st_size} bytes is more than a package file may hold"
                f" ({MAX_FILE_BYTES}, {MAX_TOTAL_BYTES} in all)"
            )
        digest = hashlib.sha256()
        size = 0
        while size <= info.st_size:
            data = os.read(fd, _CHUNK)
            if not data:
                break
            size += len(data)
            digest.update(data)
        if size != info.st_size:
            raise SoftwareIdentityError(f"{path} changed while it was read")
        return digest.hexdigest(), size
    except OSError as exc:
        raise SoftwareIdentityError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def hash_packages(root: Path) -> dict[str, str]:
    """The SHA-256 of every file of the packages under ``root`` that a manifest covers, by its
    '/'-separated path from ``root``. :class:`SoftwareIdentityError` past the bounds."""
    found: dict[str, str] = {}
    budget = MAX_TOTAL_BYTES
    entries = 0  # every name walked, covered or not (a directory of a million caches)
    for package in PACKAGES:
        top = root / package
        if not top.is_dir():
            continue  # every file the manifest names in it is missing
        for directory, subdirectories, names in os.walk(top, followlinks=False):
            relative = Path(directory).relative_to(root)
            if len(relative.parts) > MAX_DEPTH:
                raise SoftwareIdentityError(f"{directory}: packages are not nested this deep")
            entries += len(names) + len(subdirectories)
            if entries > MAX_ENTRIES:
                raise SoftwareIdentityError(
                    f"{root}: more than {MAX_ENTRIES} names in the packages"
                )
            subdirectories.sort()  # caches too: their bytecode is what runs
            for name in sorted(names):
                # a name that is not UTF-8 is kept as escaped ASCII: it names the file, and
                # it can be recorded (and it never matches the manifest, which is ASCII)
                path = os.fsencode(f"{relative.as_posix()}/{name}").decode(
                    "ascii", "backslashreplace"
                )
                if not is_covered(path):
                    continue
                if len(found) >= MAX_FILES:
                    raise SoftwareIdentityError(f"{root}: more than {MAX_FILES} package files")
                digest, size = _file_digest(Path(directory) / name, budget)
                budget -= size
                found[path] = digest
            # a directory that is a symbolic link is listed among subdirectories, never entered
            for name in list(subdirectories):
                if (Path(directory) / name).is_symlink():
                    linked = os.fsencode(f"{relative.as_posix()}/{name}")
                    found[linked.decode("ascii", "backslashreplace")] = NOT_A_FILE
                    subdirectories.remove(name)
    return found


@dataclass(frozen=True)
class SoftwareVerifier:
    """Checks the packages under ``root`` against the manifest at ``manifest``, signed by
    ``release_key`` (None: the key file beside the manifest). ``required``: a missing manifest
    is a fault (``run``), or recorded as unverified (``simulate``, the tests)."""

    root: Path
    manifest: Path
    release_key: Verifier | None = None
    required: bool = True
    version: str = "unknown"

    @classmethod
    def installed(
        cls,
        *,
        manifest: str = "",
        public_key: str = "",
        required: bool = True,
        root: Path | None = None,
    ) -> SoftwareVerifier:
        """The verifier for the running software (``[software]``'s ``manifest`` and
        ``public_key``, "" for the defaults)."""
        root = installed_root() if root is None else root
        path = Path(manifest) if manifest else root / "controller" / MANIFEST_NAME
        key = Verifier.parse(public_key) if public_key else None
        return cls(root, path, key, required, running_version())

    def _release_key(self) -> Verifier:
        if self.release_key is not None:
            return self.release_key
        path = self.manifest.parent / PUBLIC_KEY_NAME
        try:
            text = read_capped(path, MAX_KEY_FILE_BYTES).decode("ascii")
            return Verifier.parse(text)
        except FileNotFoundError:
            raise SoftwareIdentityError(
                f"no release key: neither [software] public_key nor {path}"
            ) from None
        except (OSError, TooLarge, UnicodeDecodeError, NoteError) as exc:
            raise SoftwareIdentityError(f"the release key {path}: {exc}") from None

    def check(self) -> SoftwareCheck:
        """The installed files against the signed manifest. Never raises: whatever goes wrong
        is the check's result (a manifest that cannot be trusted is ``bad_manifest``)."""

        def failed(result: SoftwareResult, detail: str) -> SoftwareCheck:
            return SoftwareCheck(result, self.version, detail=detail, required=self.required)

        try:
            blob = read_capped(self.manifest, MAX_MANIFEST_BYTES)
        except FileNotFoundError:
            return failed(SoftwareResult.NO_MANIFEST, f"no manifest at {self.manifest}")
        except (OSError, TooLarge, ValueError) as exc:
            return failed(SoftwareResult.BAD_MANIFEST, f"{self.manifest}: {exc}")
        try:
            manifest = open_manifest(blob, self._release_key())
        except SoftwareIdentityError as exc:
            return failed(SoftwareResult.BAD_MANIFEST, str(exc))
        try:
            found = hash_packages(self.root)
        except SoftwareIdentityError as exc:  # past the bounds, or unreadable: not the release
            refused = failed(SoftwareResult.MISMATCH, str(exc))
            return dataclasses.replace(refused, manifest=manifest.digest, key=manifest.key_id)
        return checked(manifest, found, version=self.version, required=self.required)


def release_bytecode(root: Path) -> dict[str, str]:
    """The SHA-256 of each ``.pyc`` the installer compiles from the modules under ``root``
    (``controller/software/bytecode.py``, in a fresh ``python -I -S``, as the installer runs
    it: marshal's output depends on what else the process holds), by its path."""
    script = Path(bytecode.__file__)
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(script), str(root)],
            capture_output=True,
            timeout=BYTECODE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SoftwareIdentityError(f"cannot compile the bytecode of {root}: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SoftwareIdentityError(said[-1] if said else f"bytecode.py exited {done.returncode}")
    try:
        digests = json.loads(done.stdout)
    except ValueError:
        raise SoftwareIdentityError("bytecode.py printed no digests") from None
    if not isinstance(digests, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in digests.items()
    ):
        raise SoftwareIdentityError("bytecode.py printed no digests")
    return digests


def build_manifest(
    root: Path, signer: Signer, version: str, *, bytecode_as_found: bool = False
) -> bytes:
    """The signed manifest of the packages under ``root``: their files as they are now, and
    the bytecode the installer compiles from them (``release_bytecode``; any cache already
    in the tree is not what a table runs). ``bytecode_as_found``: the caches in the tree
    instead, for a checkout that runs as it is (the benches, the tests)."""
    found = hash_packages(root)
    if not bytecode_as_found:
        found = {path: d for path, d in found.items() if not is_bytecode(path)}
        found.update(release_bytecode(root))
    odd = sorted(path for path, digest in found.items() if digest == NOT_A_FILE)
    if odd:
        raise SoftwareIdentityError(f"not regular files: {', '.join(odd[:5])}")
    missing = [package for package in PACKAGES if not (root / package).is_dir()]
    if missing:
        raise SoftwareIdentityError(f"{root} holds no {' or '.join(missing)} package")
    return sign_manifest(version, found, signer)


def read_release_key(path: Path) -> Signer:
    """A release signing key file (mode 0600, as ``create_release_key`` writes it)."""
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise SoftwareIdentityError(f"{path} must be readable by its owner only (0600)")
        return Signer.parse(read_capped(path, MAX_KEY_FILE_BYTES).decode("ascii"))
    except (OSError, TooLarge, UnicodeDecodeError) as exc:
        raise SoftwareIdentityError(f"cannot read the release key {path}: {exc}") from None
    except NoteError as exc:
        raise SoftwareIdentityError(f"{path} is not a release signing key: {exc}") from None


def create_release_key(path: Path, name: str = RELEASE_KEY_NAME) -> Signer:
    """A new release signing key in ``path`` (mode 0600); never replaces a file."""
    signer = Signer.generate(name)
    _write_new(path, f"{signer}\n".encode(), 0o600, replace=False)
    return signer


def write_manifest(path: Path, blob: bytes) -> None:
    """``blob`` at ``path`` (mode 0644), whole or not at all."""
    _write_new(path, blob, 0o644, replace=True)


def _write_new(path: Path, blob: bytes, mode: int, *, replace: bool) -> None:
    try:
        write_new(path, blob, mode, replace=replace)
    except FileExistsError:
        raise SoftwareIdentityError(f"{path} exists: it is never replaced") from None
    except OSError as exc:
        raise SoftwareIdentityError(f"cannot write {path}: {exc.strerror or exc}") from exc
