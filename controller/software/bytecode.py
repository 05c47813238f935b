"""The release's bytecode: every module of the ``controller`` and ``drivers`` packages compiled
as the installer ships it, and the SHA-256 of each ``.pyc``, for the signed manifest.

A fresh install without bytecode compiles every module it imports at every start (the CLI
224 ms against 178 ms, the daemon 0.15-0.25 s slower), and the unit's
``PYTHONDONTWRITEBYTECODE=1`` (and ``ProtectSystem=strict``) keep it from writing any. So the
installer compiles them, and the manifest names each ``.pyc`` as it names each ``.py``: a
changed ``.pyc`` runs as surely as a changed ``.py``, and the check reports it the same way.

The caches are PEP 552's checked hash-based ``.pyc`` (flags 0b11): at import the interpreter
hashes the ``.py`` and ignores a ``.pyc`` whose recorded source hash differs, so a source
changed without its cache runs as it is on disk (and the check names the ``.py``). That is all
it gives: the hash is of the source only (SipHash-1-3 under a key every CPython shares, 64
bits), never of the code, so a ``.pyc`` whose code was changed and whose header was kept runs
unseen by the interpreter. Only the manifest's SHA-256 of the ``.pyc`` itself catches that.

The bytes must be the same wherever the release is compiled (on the table by the installer,
or by the release manager who signs off the box), so each module is compiled under a name
relative to the packages' root (the interpreter puts the real path in at import), and always
in a fresh interpreter run as ``python -I -S bytecode.py``: ``marshal`` writes a back-reference
only for an object referenced more than once, so the same code object marshals differently in
a process whose other imports hold more references to the same interned names (measured: the
143 modules hash differently compiled beside ``controller.cli``'s imports than alone). Two
interpreters of the same CPython build started the same way agree; another version may not
(the name's cache tag, ``cpython-311``, differs between minor versions).

Only the standard library, and nothing imported but what every run imports: the installer
runs this file before the product is trusted, and the signer runs it from ``build_manifest``::

    python -I -S controller/software/bytecode.py ROOT            # print {pyc path: SHA-256}
    python -I -S controller/software/bytecode.py --write ROOT    # and write the .pyc files
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import stat
import sys

PACKAGES = ("controller", "drivers")
CHECKED_HASH_FLAGS = 0b11  # PEP 552: hash-based, checked against the source at import
MAX_FILES = 4096
MAX_FILE_BYTES = 4 * 1024 * 1024
USAGE = "usage: bytecode.py [--write] ROOT"


class BytecodeError(Exception):
    """A tree whose bytecode cannot be made (a module that does not compile, past a bound).
    Defined here, not in controller/errors.py: this file runs alone, before the package is
    trusted, with only the standard library."""


def cache_path(module: str) -> str:
    """``controller/core/state.py`` -> ``controller/core/__pycache__/state.cpython-311.pyc``:
    where this interpreter looks for the module's bytecode (optimisation level 0, as the
    unit runs it)."""
    return importlib.util.cache_from_source(module, optimization="")


def compiled(source: bytes, module: str) -> bytes:
    """The checked hash-based ``.pyc`` of ``source``, compiled under the name ``module``."""
    code = compile(source, module, "exec", dont_inherit=True, optimize=0)
    return (
        importlib.util.MAGIC_NUMBER
        + CHECKED_HASH_FLAGS.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def modules(root: str) -> list[str]:
    """Every ``.py`` of the packages under ``root`` ('/'-separated, relative), sorted; links
    and caches are not entered."""
    found: list[str] = []
    for package in PACKAGES:
        top = os.path.join(root, package)
        for directory, subdirectories, names in os.walk(top, followlinks=False):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            relative = os.path.relpath(directory, root).replace(os.sep, "/")
            for name in sorted(names):
                path = os.path.join(directory, name)
                if name.endswith(".py") and stat.S_ISREG(os.lstat(path).st_mode):
                    found.append(f"{relative}/{name}")
            if len(found) > MAX_FILES:
                raise BytecodeError(f"{root}: more than {MAX_FILES} modules")
    return found


def compile_packages(root: str) -> dict[str, bytes]:
    """The ``.pyc`` of every module under ``root``, by its path relative to ``root``."""
    caches: dict[str, bytes] = {}
    for module in modules(root):
        with open(os.path.join(root, module), "rb") as f:
            source = f.read(MAX_FILE_BYTES + 1)
        if len(source) > MAX_FILE_BYTES:
            raise BytecodeError(f"{module}: more than {MAX_FILE_BYTES} bytes")
        try:
            caches[cache_path(module)] = compiled(source, module)
        except (SyntaxError, ValueError) as exc:
            raise BytecodeError(f"{module} does not compile: {exc}") from None
    return caches


def write(root: str, caches: dict[str, bytes]) -> None:
    """Each ``.pyc`` in place (mode 0644), whole or not at all: written beside, then renamed."""
    for path, data in caches.items():
        target = os.path.join(root, path)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        partial = f"{target}.{os.getpid()}.tmp"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, target)


def main(argv: list[str]) -> int:
    """Print the digests (JSON, one object) and, with ``--write``, write the caches; one line
    on stderr and exit 2 for a bad argument, exit 1 for a tree whose bytecode cannot be made."""
    match argv:
        case ["--write", root]:
            writing = True
        case [root] if not root.startswith("-"):
            writing = False
        case _:
            print(USAGE, file=sys.stderr)
            return 2
    try:
        caches = compile_packages(root)  # every module first, the same way in either mode
        if writing:
            write(root, caches)
    except (BytecodeError, OSError) as exc:
        print(f"bytecode: {exc}", file=sys.stderr)
        return 1
    digests = {path: hashlib.sha256(data).hexdigest() for path, data in caches.items()}
    print(json.dumps(digests, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
