"""Software identity (program verification): the release's signed manifest of the installed
files, and what a check of the installed files against it found. Pure: no I/O (the files are
read by ``controller/software/``).

The issue cites N.J.A.C. 13:69E-1.28H, 9 NYCRR 5319.14 and AGCO standard 22 (their texts are
not among ``../shared/regulations``): the software is identified by a digest of at least 128
bits, checked at start, periodically and on demand; a failed check is a fault that the
supervisor clears; the last changes of the software are kept. Here each file is identified by
its SHA-256 (256 bits) and the whole by the SHA-256 of the manifest's canonical body.

A manifest (``MANIFEST.json``) is canonical JSON (``controller/core/canonical.py``)::

    {"format": "paigow-controller-manifest/1",
     "manifest": {"version": "0.1.0", "files": {"controller/__init__.py": "<sha-256 hex>", ...}},
     "key": "<the release key's verifier: name+keyid+base64>",
     "signature": "<base64 Ed25519 signature of SIGNING_CONTEXT + canonical(manifest)>"}

The ``key`` only names the signer: the signature is checked with the release key the table
trusts (configured, or installed beside the manifest), never with the key the file names.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.core import canonical
from controller.core.note import Signer, Verifier
from controller.errors import EncodingError, NoteError, SoftwareIdentityError

FORMAT = "paigow-controller-manifest/1"
SIGNING_CONTEXT = b"paigow-controller software manifest v1\n"  # never valid as another message
PACKAGES = ("controller", "drivers")  # the installed packages the manifest covers
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_FILES = 4096
MAX_PATH_CHARS = 255
MAX_VERSION_CHARS = 64
MAX_DIFFERENCES_RECORDED = 20  # a record names at most this many files (and counts them all)
MANIFEST_NAME = "MANIFEST.json"  # in the installed controller package, beside __init__.py
PUBLIC_KEY_NAME = "release.pub"  # the release key installed beside it (see the README)
EXCLUDED = frozenset({f"controller/{MANIFEST_NAME}", f"controller/{PUBLIC_KEY_NAME}"})


class SoftwareResult(StrEnum):
    OK = "ok"  # every file is the one the signed manifest names, and none is added
    MISMATCH = "mismatch"  # a file changed, is missing or was added, or another version runs
    NO_MANIFEST = "no_manifest"  # unverified: no manifest installed (a development checkout)
    BAD_MANIFEST = "bad_manifest"  # unreadable, malformed, unsigned or signed by another key


class Change(StrEnum):
    CHANGED = "changed"
    MISSING = "missing"
    ADDED = "added"


@dataclass(frozen=True, slots=True)
class Difference:
    path: str
    change: Change

    def __str__(self) -> str:
        return f"{self.change}: {self.path}"


@dataclass(frozen=True, slots=True)
class Manifest:
    version: str
    files: Mapping[str, str]  # path relative to the packages' root -> SHA-256 hex
    digest: str  # SHA-256 hex of the canonical body: the software's identity
    key_id: str  # the release key's id (hex) that signed it


@dataclass(frozen=True, slots=True)
class SoftwareIdentity:
    """What ``software_changed`` compares: the version that runs and the manifest's digest."""

    version: str
    manifest: str | None

    def as_record(self) -> dict[str, object]:
        return {"version": self.version, "manifest": self.manifest}

    @classmethod
    def from_record(cls, raw: object) -> SoftwareIdentity | None:
        """The identity a ``power_on`` record holds, or None (none recorded, or malformed)."""
        if not isinstance(raw, dict) or set(raw) != {"version", "manifest"}:
            return None
        version, manifest = raw["version"], raw["manifest"]
        if not isinstance(version, str) or not (manifest is None or isinstance(manifest, str)):
            return None
        return cls(version[:MAX_VERSION_CHARS], None if manifest is None else manifest[:64])


@dataclass(frozen=True, slots=True)
class SoftwareCheck:
    """One check of the installed software. ``required``: whether a missing manifest is a
    fault (the table's policy, recorded with the result)."""

    result: SoftwareResult
    version: str  # the version of the software that runs
    manifest: str | None = None  # the manifest's digest, when one could be read
    key: str | None = None  # the id of the release key that signed it
    files: int = 0  # files hashed
    differences: tuple[Difference, ...] = ()
    detail: str = ""
    required: bool = True

    @property
    def is_fault(self) -> bool:
        if self.result is SoftwareResult.NO_MANIFEST:
            return self.required
        return self.result is not SoftwareResult.OK

    @property
    def identity(self) -> SoftwareIdentity:
        return SoftwareIdentity(self.version, self.manifest)

    def summary(self) -> str:
        """One line for a fault record, the journal and the command line."""
        if self.result is SoftwareResult.OK:
            return f"software {self.version} verified: {self.files} files match the manifest"
        what = _SAYS[self.result]
        if self.differences:
            named = ", ".join(str(d) for d in self.differences[:3])
            more = len(self.differences) - 3
            tail = f" and {more} more" if more > 0 else ""
            return f"{what}: {named}{tail}" + (f"; {self.detail}" if self.detail else "")
        return f"{what}: {self.detail}"

    def as_record(self) -> dict[str, object]:
        return {
            "result": str(self.result),
            "version": self.version,
            "manifest": self.manifest,
            "key": self.key,
            "files": self.files,
            "differ": [
                str(d)[:MAX_PATH_CHARS] for d in self.differences[:MAX_DIFFERENCES_RECORDED]
            ],
            "differ_count": len(self.differences),
            "detail": self.detail,
            "required": self.required,
        }


_SAYS = {
    SoftwareResult.OK: "software verified",
    SoftwareResult.MISMATCH: "the software does not match its signed manifest",
    SoftwareResult.NO_MANIFEST: "software unverified",
    SoftwareResult.BAD_MANIFEST: "the software's manifest is refused",
}


def is_covered(path: str) -> bool:
    """Whether a path (relative, '/'-separated) is one the manifest covers: every file of the
    packages but the manifest and its key themselves, their bytecode caches included (a
    ``.pyc`` runs as surely as its ``.py``; a ``name.pyc`` beside the modules imports without
    any source at all)."""
    parts = path.split("/")
    return len(parts) >= 2 and parts[0] in PACKAGES and path not in EXCLUDED


def is_bytecode(path: str) -> bool:
    """A compiled module, in a ``__pycache__`` or not."""
    return path.endswith((".pyc", ".pyo"))


def _check_path(path: object) -> str:
    if (
        not isinstance(path, str)
        or not 0 < len(path) <= MAX_PATH_CHARS
        or not path.isascii()
        or not path.isprintable()
        or path.startswith("/")
        or any(part in ("", ".", "..") for part in path.split("/"))
        or not is_covered(path)
    ):
        raise SoftwareIdentityError(f"manifest: {str(path)[:80]!r} is not a path it may name")
    return path


def _check_digest(value: object) -> str:
    if (
        not isinstance(value, str)
        or len(value) != 64
        or not all(c in "0123456789abcdef" for c in value)
    ):
        raise SoftwareIdentityError(f"manifest: {str(value)[:80]!r} is not a SHA-256 in hex")
    return value


def check_version(version: object) -> str:
    if (
        not isinstance(version, str)
        or not 0 < len(version) <= MAX_VERSION_CHARS
        or not version.isascii()
        or not version.isprintable()
        or " " in version
    ):
        raise SoftwareIdentityError(f"manifest: {str(version)[:80]!r} is not a version")
    return version


def manifest_body(version: str, files: Mapping[str, str]) -> dict[str, object]:
    if len(files) > MAX_FILES:
        raise SoftwareIdentityError(f"manifest: {len(files)} files, at most {MAX_FILES}")
    checked = {_check_path(p): _check_digest(d) for p, d in files.items()}
    return {"version": check_version(version), "files": dict(sorted(checked.items()))}


def body_digest(body: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical.encode(body)).hexdigest()


def sign_manifest(version: str, files: Mapping[str, str], signer: Signer) -> bytes:
    """The bytes of ``MANIFEST.json``: the body, its signer's verifier key and signature."""
    body = manifest_body(version, files)
    signature = signer.sign(SIGNING_CONTEXT + canonical.encode(body))
    return (
        canonical.encode(
            {
                "format": FORMAT,
                "manifest": body,
                "key": str(signer.verifier),
                "signature": base64.b64encode(signature).decode("ascii"),
            }
        )
        + b"\n"
    )


def open_manifest(blob: bytes, release_key: Verifier) -> Manifest:
    """The manifest in ``blob`` if it is well formed and signed by ``release_key``;
    :class:`SoftwareIdentityError` saying why not."""
    if len(blob) > MAX_MANIFEST_BYTES:
        raise SoftwareIdentityError(f"manifest: {len(blob)} bytes, at most {MAX_MANIFEST_BYTES}")
    try:
        raw: Any = canonical.decode(blob.removesuffix(b"\n"))
    except (EncodingError, UnicodeDecodeError, RecursionError) as exc:
        raise SoftwareIdentityError(f"manifest: not canonical JSON: {exc}") from None
    if not isinstance(raw, dict) or set(raw) != {"format", "manifest", "key", "signature"}:
        raise SoftwareIdentityError(
            "manifest: not a signed manifest (format, manifest, key, signature)"
        )
    if raw["format"] != FORMAT:
        raise SoftwareIdentityError(f"manifest: format {str(raw['format'])[:40]!r}, not {FORMAT}")
    try:
        named = Verifier.parse(str(raw["key"]))
    except NoteError as exc:
        raise SoftwareIdentityError(f"manifest: its key is malformed: {exc}") from None
    if named.key_id != release_key.key_id or named.public_key != release_key.public_key:
        raise SoftwareIdentityError(
            f"manifest: signed by another key ({named.name} {named.key_id.hex()}), not the"
            f" release key {release_key.name} {release_key.key_id.hex()}"
        )
    try:
        signature = base64.b64decode(str(raw["signature"]), validate=True)
    except (binascii.Error, ValueError):
        raise SoftwareIdentityError("manifest: its signature is not base64") from None
    body = raw["manifest"]
    if not isinstance(body, dict) or set(body) != {"version", "files"}:
        raise SoftwareIdentityError("manifest: its body is not {version, files}")
    if len(signature) != 64 or not release_key.verify(
        SIGNING_CONTEXT + canonical.encode(body), signature
    ):
        raise SoftwareIdentityError("manifest: the signature does not verify with the release key")
    files = body["files"]
    if not isinstance(files, dict):
        raise SoftwareIdentityError("manifest: files is not an object")
    checked = manifest_body(body["version"], files)
    return Manifest(
        version=str(checked["version"]),
        files=files,
        digest=body_digest(checked),
        key_id=release_key.key_id.hex(),
    )


def compare(expected: Mapping[str, str], found: Mapping[str, str]) -> tuple[Difference, ...]:
    """The files that differ, by path: changed, missing (named but not found), added (found
    but not named: a module dropped into a package runs as well as one that was changed).
    Bytecode the manifest names may be absent (a tree before it is compiled, a staged
    release): the interpreter then compiles the module from its source, which is checked."""
    differences = [
        Difference(path, Change.CHANGED if path in found else Change.MISSING)
        for path, digest in expected.items()
        if found.get(path) != digest and (path in found or not is_bytecode(path))
    ]
    differences += [Difference(path, Change.ADDED) for path in found if path not in expected]
    return tuple(sorted(differences, key=lambda d: d.path))


def checked(
    manifest: Manifest, found: Mapping[str, str], *, version: str, required: bool
) -> SoftwareCheck:
    """The check of ``found`` (the installed files' digests) against a signed manifest."""
    differences = compare(manifest.files, found)
    detail = ""
    if manifest.version != version:
        detail = f"the manifest is for version {manifest.version}, version {version} runs"
    is_ok = not differences and not detail
    return SoftwareCheck(
        result=SoftwareResult.OK if is_ok else SoftwareResult.MISMATCH,
        version=version,
        manifest=manifest.digest,
        key=manifest.key_id,
        files=len(found),
        differences=differences,
        detail=detail,
        required=required,
    )
