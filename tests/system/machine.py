"""A Debian bookworm machine booted under systemd-nspawn, for the system test of the unit.

The root file system is made once by ``debootstrap`` (minbase with systemd, dbus, python3 and
python3-venv, from the mirror the host's apt is configured with) and kept in
``/var/tmp/paigow-systest/`` for the next run on the same host; each run boots a fresh copy.

Booting where no systemd is PID 1 (CI's container): nspawn is told not to register with
machined and to stay in the cgroup it was started in (``--register=no --keep-unit``); that is
a cgroup v2 subgroup of its own (``SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1`` has the guest's systemd
use the unified hierarchy). ``--private-network`` gives the guest its own loopback, so its
ports clash with nothing on the host. Commands go in with ``nsenter`` into the guest's
namespaces and its root and working directory (``-r -w``: run from a chroot, as when a fresh
Debian tree is checked by chroot, the namespaces alone did not reach the guest's manager, and
``systemctl is-system-running`` said "offline"; with them it does), with a clean environment.
``systemctl reboot`` in the guest ends nspawn with exit status 133; :meth:`Machine.boot` starts
it again, as ``systemd-nspawn@.service`` does.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

CACHE = Path("/var/tmp/paigow-systest")
SUITE = "bookworm"
PACKAGES = ("systemd", "systemd-sysv", "dbus", "python3", "python3-venv")
GUEST_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/root",
    "LANG=C.UTF-8",
)
REBOOT_STATUS = 133  # systemd-nspawn's exit status when the guest rebooted


class MachineError(Exception):
    pass


# sources.list(5): in sources.list.d apt reads the files named with letters, digits, "_", "-"
# and "." that end in .list (one-line style) or .sources (deb822); it ignores any other
# (a *.disabled-by-farm, a *.dpkg-old, an editor's backup)
APT_SOURCE_PART = re.compile(r"[A-Za-z0-9_.-]+\.(?:list|sources)")


def apt_sources(etc: Path = Path("/etc/apt")) -> list[Path]:
    """The source files apt reads, in its order: ``sources.list``, then the parts in
    ``sources.list.d`` that apt takes (:data:`APT_SOURCE_PART`), sorted by name."""
    parts = etc / "sources.list.d"
    names = sorted(p.name for p in parts.iterdir()) if parts.is_dir() else []
    chosen = [parts / name for name in names if APT_SOURCE_PART.fullmatch(name)]
    return [etc / "sources.list", *chosen]


def apt_mirror(etc: Path = Path("/etc/apt")) -> str:
    """The Debian mirror the host's apt uses (deb822 ``URIs:`` or a one-line ``deb`` entry),
    from the files apt reads (:func:`apt_sources`)."""
    for path in apt_sources(etc):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            found = re.match(r"\s*(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(https?://\S+)", line)
            if found and "security" not in found.group(1):
                return found.group(1)
    return "http://deb.debian.org/debian"


def root_filesystem() -> Path:
    """The debootstrapped tree, made when this host has none yet (about a minute)."""
    key = hashlib.sha256(f"{SUITE} {' '.join(PACKAGES)}".encode()).hexdigest()[:12]
    tree = CACHE / f"{SUITE}-{key}"
    if (tree / ".complete").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    debootstrap(tree, CACHE / f"{SUITE}-{key}.debootstrap.log", PACKAGES)
    (tree / ".complete").touch()
    return tree


def debootstrap(
    tree: Path,
    log: Path,
    packages: Sequence[str],
    *options: str,
    wrapper: Sequence[str] = (),
) -> None:
    """Debian ``SUITE`` (minbase and ``packages``) bootstrapped into ``tree`` from this host's
    mirror, its output in ``log``; ``options`` go to debootstrap, which runs under
    ``wrapper``. Raises :class:`MachineError` with the log's last lines if it fails."""
    with log.open("wb") as out:
        done = subprocess.run(
            [
                *wrapper,
                "debootstrap",
                *options,
                "--variant=minbase",
                f"--include={','.join(packages)}",
                SUITE,
                str(tree),
                apt_mirror(),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-5:]
        raise MachineError(f"debootstrap failed ({done.returncode}): {' | '.join(tail)}")


def _cgroup2_mount() -> Path:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split(" ")[4])
    raise MachineError("no cgroup v2 hierarchy is mounted")


class Machine:
    """One guest: :meth:`boot`, :meth:`run` commands in it, :meth:`reboot`, :meth:`close`."""

    def __init__(self, workdir: Path, name: str = "paigow-systest") -> None:
        if Path("/run/systemd/system").exists():
            raise MachineError(
                "systemd runs this host: the system test boots its guest where no systemd is"
                " PID 1 (a CI container); run it in one"
            )
        self.workdir = workdir
        self.root = workdir / "root"
        self.name = name
        self.console = workdir / "console.log"
        self.cgroup = _cgroup2_mount() / f"paigow-systest-{os.getpid()}"
        self.process: subprocess.Popen[bytes] | None = None
        self.leader = 0
        self.boots = 0

    def prepare(self) -> None:
        """A fresh copy of the cached tree, with its own machine id."""
        subprocess.run(
            ["cp", "-a", "--reflink=auto", str(root_filesystem()), str(self.root)], check=True
        )
        (self.root / ".complete").unlink()
        (self.root / "etc/machine-id").write_text("")  # a new one at the first boot
        self.cgroup.mkdir(exist_ok=True)

    def boot(self, timeout_s: float = 90.0) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        env["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "1"
        command = (
            f'echo $$ > "{self.cgroup}/cgroup.procs" && exec systemd-nspawn --quiet'
            f" --register=no --keep-unit --private-network --console=read-only"
            f' -M {self.name} -D "{self.root}" --boot'
        )
        with self.console.open("ab") as out:
            self.process = subprocess.Popen(
                ["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env
            )
        self.boots += 1
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise MachineError(
                    f"nspawn exited {self.process.returncode}: {self.console_tail()}"
                )
            self.leader = self._find_leader()
            if self.leader:
                state = self.run(["systemctl", "is-system-running"], check=False).stdout.strip()
                if state in ("running", "degraded"):
                    if state == "degraded":
                        failed = self.run(["systemctl", "--failed", "--no-legend"], check=False)
                        raise MachineError(f"the guest booted degraded: {failed.stdout.strip()}")
                    return
            time.sleep(0.2)
        raise MachineError(f"the guest did not finish booting ({state!r}): {self.console_tail()}")

    def _find_leader(self) -> int:
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            pids = children.read_text().split()
        except OSError:
            return 0
        return int(pids[0]) if pids else 0

    def run(
        self,
        command: list[str],
        *,
        check: bool = True,
        timeout: float = 120.0,
        env: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[str]:
        """``command`` in the guest's namespaces, as its root, with a clean environment."""
        if not self.leader:
            raise MachineError("the guest is not running")
        argv = ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--"]
        argv += ["env", "-i", *GUEST_ENV, *env, *command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise MachineError(
                f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def reboot(self) -> int:
        """``systemctl reboot`` in the guest; nspawn's exit status; then the guest booted again."""
        assert self.process is not None
        self.run(["systemctl", "reboot"], check=False)
        status = self.process.wait(timeout=90)
        self.leader = 0
        self.boot()
        return status

    def console_tail(self, lines: int = 15) -> str:
        try:
            return " | ".join(self.console.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no console output)"

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            if self.leader:
                self.run(["systemctl", "poweroff"], check=False, timeout=30)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # the guest's own groups inside ours (payload/..., supervisor), the deepest first
        groups = sorted(self.cgroup.rglob("*/"), key=lambda p: len(p.parts), reverse=True)
        for group in [*groups, self.cgroup]:
            with contextlib.suppress(OSError):
                group.rmdir()
        shutil.rmtree(self.root, ignore_errors=True)
