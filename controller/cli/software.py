"""Program verification on demand (``verify-software``) and the release's tools: the signing
key (``release-key``) and the signed manifest of the packages (``manifest``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.cli import render
from controller.cli.args import describe, json_argument, path_argument, print_report
from controller.core.note import Verifier
from controller.errors import NoteError, UsageError

EX_MISMATCH = 1


def verify_software_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Check the installed software against its signed manifest (a SHA-256 of every file of"
        " the packages), as the controller does at start and every [software] check_every_s"
        " (N.J.A.C. 13:69E-1.28H, 9 NYCRR 5319.14, AGCO 22). Exit 0 when every file matches, 1"
        " when one differs or the manifest is missing or not signed by the release key, 78 for"
        " a bad config. A report on a terminal; JSON with --json or in a pipe.",
        "examples:\n"
        "  paigow-controller verify-software\n"
        "  paigow-controller verify-software --root"
        " /mnt/card/opt/paigow-controller/current/venv/lib/python3.11/site-packages"
        ' --public-key "$(cat release.pub)" --json',
    )
    json_argument(p)
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--manifest", type=path_argument, help="override [software] manifest")
    p.add_argument(
        "--public-key",
        help="the release key's verifier (name+keyid+base64); overrides [software] public_key",
    )
    p.add_argument(
        "--root",
        type=path_argument,
        help="the directory holding the controller and drivers packages (default: the"
        " installed ones; e.g. a copy of a table's card)",
    )


def verify_software(args: argparse.Namespace) -> int:
    from controller.software.check import SoftwareVerifier

    settings = load_config(Path(args.config)).software  # a bad config: exit 78 naming the key
    public_key = settings.public_key
    if args.public_key is not None:
        try:
            public_key = str(Verifier.parse(args.public_key))
        except NoteError as exc:
            raise UsageError(f"--public-key: {exc}") from None
    root = None if args.root is None else Path(args.root)
    manifest = settings.manifest
    if args.manifest is not None:
        manifest = str(Path(args.manifest).absolute())
    verifier = SoftwareVerifier.installed(
        manifest=manifest, public_key=public_key, required=True, root=root
    )
    check = verifier.check()
    doc = {"ok": not check.is_fault, "summary": check.summary(), **check.as_record()}
    print_report(args, doc, render.software_report)
    return EX_MISMATCH if check.is_fault else 0


def release_key_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Make a release signing key (Ed25519) in a new file of mode 0600 and print its verifier"
        " key, for [software] public_key or release.pub. Keep the signing key off the tables.",
        "example:\n  paigow-controller release-key --out ~/keys/paigow-release.key > release.pub",
    )
    p.add_argument("--out", required=True, type=path_argument, help="the new key file")
    p.add_argument("--name", default=None, help="the key name (default paigow-controller-release)")


def release_key(args: argparse.Namespace) -> int:
    from controller.software.check import RELEASE_KEY_NAME, create_release_key

    name = RELEASE_KEY_NAME if args.name is None else args.name
    if not (0 < len(name) <= 64 and name.isascii() and name.isprintable()) or any(
        c in name for c in " +"
    ):
        raise UsageError("--name: 1 to 64 printable ASCII characters, no space or '+'")
    signer = create_release_key(Path(args.out), name)
    sys.stdout.write(f"{signer.verifier}\n")
    return 0


def manifest_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Hash every file of the controller and drivers packages, and the bytecode the"
        " installer compiles from them (not the caches in the tree), and write the manifest,"
        " with the version, signed by the release key.",
        "example:\n"
        "  paigow-controller manifest --release-key ~/keys/paigow-release.key"
        " --root . --out controller/MANIFEST.json",
    )
    p.add_argument(
        "--release-key", required=True, type=path_argument, help="the signing key file (0600)"
    )
    p.add_argument("--out", required=True, type=path_argument, help="where to write it")
    p.add_argument(
        "--root",
        type=path_argument,
        help="the directory holding the packages (default: the installed ones)",
    )
    p.add_argument("--version", help="the version it names (default: the installed one)")


def manifest(args: argparse.Namespace) -> int:
    from controller.core.software import check_version
    from controller.errors import SoftwareIdentityError
    from controller.software.check import (
        build_manifest,
        installed_root,
        read_release_key,
        running_version,
        write_manifest,
    )

    version = running_version() if args.version is None else args.version
    try:
        check_version(version)
    except SoftwareIdentityError as exc:
        raise UsageError(f"--version: {exc}") from None
    signer = read_release_key(Path(args.release_key))
    root = installed_root() if args.root is None else Path(args.root)
    blob = build_manifest(root, signer, version)
    write_manifest(Path(args.out), blob)
    sys.stdout.write(f"{args.out}: {version}, signed by {signer.verifier}\n")
    return 0
