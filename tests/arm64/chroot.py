"""A Debian bookworm arm64 tree, the Pi's userland, run on this x86_64 host through
qemu-user-static and binfmt_misc, for the arm64 test (tests/arm64).

The tree is made once from the packages ``debootstrap --arch=arm64 --variant=minbase`` chooses
for python3 and python3-venv (from the mirror the host's apt is configured with), extracted on
the host (root_filesystem says why its second stage is left out), and kept in
``/var/tmp/paigow-arm64/`` for the next run on the same host, as the
system test keeps its own (tests/system/machine.py). The project goes in at ``/opt/paigow``
with its virtualenv beside it, filled by ``scripts/bootstrap-venv`` from the runtime lock, as
``make demo`` does; it is filled again only when what the Makefile's stamp depends on
(pyproject.toml, requirements/runtime.txt, scripts/bootstrap-venv) changed, and made afresh
only when the lock or the script did. One run at a time
uses the tree (a lock file beside it).

Each command runs in a mount and PID namespace of its own (``unshare``) with /proc and /dev
mounted into the tree: the mounts, and any process the command leaves, end with it, so no
mount is left behind even when the test is killed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "system"))

from machine import SUITE, MachineError, debootstrap
from trees import CHECKOUT, SOURCE_PARTS

CACHE = Path("/var/tmp/paigow-arm64")
ARCH = "arm64"
PACKAGES = ("python3", "python3-venv")
PROJECT = "/opt/paigow"  # in the tree: the checkout's product files and its .venv
# what the Makefile's $(RUNTIME_STAMP) depends on: the venv is made again when one changes
VENV_INPUTS = ("pyproject.toml", "requirements/runtime.txt", "scripts/bootstrap-venv")
# of the test lock, what the suite's core and driver tests need (pytest and hypothesis, with
# the dependencies the lock gives them): not the browser, PostgreSQL, lint and type tools
TEST_PACKAGES = (
    "pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
    "pytest-timeout",
    "hypothesis",
    "sortedcontainers",
)
TEST_LOCK = "requirements/test-arm64.txt"  # in the tree: TEST_PACKAGES' pins and hashes
BINFMT = Path("/proc/sys/fs/binfmt_misc")
HANDLER = BINFMT / "qemu-aarch64"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
TREE_CA = "/etc/ssl/certs/host-ca-bundle.crt"  # the host's bundle: this host's TLS proxy
GUEST_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/root",
    "LANG=C.UTF-8",
    f"PIP_CERT={TREE_CA}",
    "PIP_DISABLE_PIP_VERSION_CHECK=1",
)
# mounts /proc and /dev (with /dev/pts and /dev/shm) into the tree, then chroots, in the
# namespaces unshare made: they end with the command
PRIVATE_MOUNTS = ("unshare", "--mount", "--propagation", "private")
ENTER = (
    'root=$1; shift; mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev"'
    ' && cd "$root" && exec chroot "$root" "$@"'
)


class ChrootError(Exception):
    pass


def unavailable() -> str | None:
    """Why arm64 binaries cannot run here (None: they can). Mounts binfmt_misc and enables
    qemu-aarch64's handler when root can, as systemd and binfmt-support do at boot."""
    if os.geteuid() != 0:
        return "not root: the arm64 test makes and enters a chroot (run make armtest as root)"
    for tool in ("debootstrap", "unshare", "chroot"):
        if shutil.which(tool) is None:
            return f"no {tool} (scripts/install-system-deps installs it)"
    if not BINFMT.is_dir():
        return f"no {BINFMT}: this kernel has no binfmt_misc"
    if not (BINFMT / "register").exists():
        mounted = subprocess.run(
            ["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)],
            capture_output=True,
            text=True,
            check=False,
        )
        if mounted.returncode != 0:
            return f"binfmt_misc cannot be mounted here: {mounted.stderr.strip()}"
    if not HANDLER.exists() and shutil.which("update-binfmts"):
        subprocess.run(
            ["update-binfmts", "--enable", "qemu-aarch64"], capture_output=True, check=False
        )
    if not HANDLER.exists():
        return "no qemu-aarch64 binfmt handler (qemu-user-static and binfmt-support)"
    lines = HANDLER.read_text().splitlines()
    if not lines or lines[0] != "enabled":
        return f"the qemu-aarch64 binfmt handler is {lines[0] if lines else 'empty'}"
    flags = next((line.split(":", 1)[1] for line in lines if line.startswith("flags:")), "")
    if "F" not in flags:  # without it the interpreter is looked for inside the tree
        return f"the qemu-aarch64 binfmt handler lacks the F flag (flags:{flags})"
    return None


@contextmanager
def locked() -> Iterator[None]:
    """The cache to ourselves: another run on this host waits."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def root_filesystem() -> Path:
    """The tree, made when this host has none yet: debootstrap's first stage (on the host:
    the packages downloaded and checked against the archive's signed index, the required
    ones extracted), then every downloaded package extracted on the host too (dpkg-deb), the
    accounts from base-passwd and the linker's cache (ldconfig, under qemu). Debootstrap's
    second stage, dpkg configuring every package under qemu, is left out: measured on 2
    cores it took over 12 minutes, too long for ``make test``, and no maintainer script of
    these packages makes a file Python needs."""
    key = hashlib.sha256(f"{SUITE} {ARCH} {' '.join(PACKAGES)}".encode()).hexdigest()[:12]
    tree = CACHE / f"{SUITE}-{ARCH}-{key}"
    if (tree / ".complete").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    log = CACHE / f"{SUITE}-{ARCH}-{key}.debootstrap.log"
    try:
        debootstrap(tree, log, PACKAGES, "--foreign", f"--arch={ARCH}", wrapper=PRIVATE_MOUNTS)
    except MachineError as exc:
        raise ChrootError(str(exc)) from None
    archives = tree / "var/cache/apt/archives"
    for deb in sorted(archives.glob("*.deb")):
        subprocess.run(["dpkg-deb", "--extract", str(deb), str(tree)], check=True)
        deb.unlink()
    for name in ("passwd", "group"):
        if not (tree / "etc" / name).exists():
            shutil.copy2(tree / f"usr/share/base-passwd/{name}.master", tree / "etc" / name)
    shutil.rmtree(tree / "debootstrap")
    Chroot(tree).run(["/sbin/ldconfig"])
    (tree / ".complete").touch()
    return tree


@dataclass
class Chroot:
    root: Path

    def argv(self, command: list[str], *, cwd: str = "/", env: tuple[str, ...] = ()) -> list[str]:
        """The host's command line that runs ``command`` in the tree (see run)."""
        argv = [*PRIVATE_MOUNTS, "--pid", "--fork"]
        argv += ["sh", "-c", ENTER, "sh", str(self.root)]
        return [*argv, "env", "-i", f"--chdir={cwd}", *GUEST_ENV, *env, *command]

    def run(
        self,
        command: list[str],
        *,
        cwd: str = "/",
        env: tuple[str, ...] = (),
        timeout: float = 900.0,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """``command`` in the tree as its root, with a clean environment."""
        argv = self.argv(command, cwd=cwd, env=env)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise ChrootError(
                f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def mounts(self) -> list[str]:
        """The host's mounts inside the tree (none: each command's went with its namespace)."""
        inside = str(self.root) + "/"
        return [
            line.split(" ")[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split(" ")[4].startswith(inside)
        ]

    def install_project(self) -> str:
        """This checkout's product files at PROJECT, and the runtime lock in its .venv (filled
        again when an input of the Makefile's stamp changed); what bootstrap-venv said, or ''
        when the venv was kept."""
        shutil.copy2("/etc/resolv.conf", self.root / "etc/resolv.conf")
        shutil.copy2(HOST_CA, self.root / TREE_CA.lstrip("/"))
        project = self.root / PROJECT.lstrip("/")
        project.mkdir(parents=True, exist_ok=True)
        for path in project.iterdir():
            if path.name != ".venv":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        for part in (*SOURCE_PARTS, "scripts", "tests"):
            source = CHECKOUT / part
            if source.is_dir():
                ignore = shutil.ignore_patterns("__pycache__")
                shutil.copytree(source, project / part, ignore=ignore)
            else:
                shutil.copy2(source, project / part)
        # the lock's and the script's digest, then pyproject.toml's: a new lock makes the venv
        # afresh (about two minutes under qemu, most of it ensurepip); a new pyproject.toml
        # only installs the project again, as the Makefile's stamp does
        digests = [
            hashlib.sha256(b"".join((CHECKOUT / name).read_bytes() for name in names)).hexdigest()
            for names in (VENV_INPUTS[1:], VENV_INPUTS[:1])
        ]
        wanted = " ".join(digests)
        stamp = project / ".venv/.installed-runtime"
        had = stamp.read_text() if stamp.exists() else ""
        if had == wanted:
            return ""
        if had.split(" ")[0] != digests[0]:
            shutil.rmtree(project / ".venv", ignore_errors=True)
        done = self.run(
            ["scripts/bootstrap-venv", ".venv", "requirements/runtime.txt"],
            cwd=PROJECT,
            env=("PYTHON=python3",),
        )
        stamp.write_text(wanted)
        return done.stdout

    def install_tests(self) -> str:
        """TEST_PACKAGES from the test lock, with their hashes, in the project's .venv on top of
        the runtime lock (as the Makefile's $(TEST_STAMP)); what bootstrap-venv said, or ''."""
        project = self.root / PROJECT.lstrip("/")
        lock = lock_subset((CHECKOUT / "requirements/test.txt").read_text(), TEST_PACKAGES)
        (project / TEST_LOCK).write_text(lock)
        runtime = (project / ".venv/.installed-runtime").read_text()
        digest = hashlib.sha256(f"{runtime}\n{lock}".encode()).hexdigest()
        stamp = project / ".venv/.installed-test"
        if stamp.exists() and stamp.read_text() == digest:
            return ""
        done = self.run(
            ["scripts/bootstrap-venv", ".venv", TEST_LOCK], cwd=PROJECT, env=("PYTHON=python3",)
        )
        stamp.write_text(digest)
        return done.stdout


def lock_subset(lock: str, names: tuple[str, ...]) -> str:
    """The entries of ``names`` in a lock file (a pin at the line's start, its hashes on the
    indented lines after it); pip --require-hashes refuses it if a dependency is missing."""
    entries = {
        entry.split("==", 1)[0]: entry.rstrip() + "\n"
        for entry in re.split(r"\n(?=[a-z])", lock)
        if "==" in entry.split("\n", 1)[0]
    }
    missing = [name for name in names if name not in entries]
    if missing:
        raise ChrootError(f"not in the test lock: {', '.join(missing)}")
    return "".join(entries[name] for name in names)
