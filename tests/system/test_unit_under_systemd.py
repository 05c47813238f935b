"""The shipped unit (systemd/paigow-controller.service) and installer
(hw/install-raspberry-pi.sh) under a real systemd: Debian bookworm booted in systemd-nspawn.

The guest has no GPIO chip and no dice sensor, so a drop-in replaces only ``ExecStart`` with
``simulate`` (the same appliance on gpiozero's mock pins and the simulated sensor, into the
real state directory); everything else is the shipped unit: Type=notify, the watchdog, the
restart policy, the sandbox, the user. The tests run in order on one guest, each leaving the
service running for the next:

install → READY=1 before active → journal priorities → watchdog restart after SIGSTOP → clean
stop with ``shutdown`` recorded → exit 78 without a restart loop → upgrade (a changed unit
file) → a release that does not start is rolled back by the installer → --rollback (the old
unit file back) → reboot with the log verifying → one byte changed found → a tampered release
(a package file, the unit, the manifest gone) repaired by running the installer again, offline
with the kiosk skipped, under a start limit that repeated restarts would meet.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from machine import REBOOT_STATUS, Machine
from trees import CHECKOUT, source_tree

UNIT = "paigow-controller.service"
PREFIX = "/opt/paigow-controller"
STATE = "/var/lib/paigow-controller"
CONFIG = "/etc/paigow-controller/config.toml"
DROP_IN = "/etc/systemd/system/paigow-controller.service.d/simulate.conf"
SIMULATE = (
    "[Service]\n"
    "ExecStart=\n"
    f"ExecStart={PREFIX}/current/venv/bin/paigow-controller simulate --rounds 10000000 --fast"
    f" --faults none --plain-rounds --config {CONFIG} --state-dir {STATE}\n"
)
INSTALL = ["/root/{tree}/hw/install-raspberry-pi.sh", "--no-kiosk", "--wheels", "/root/wheels"]
RELEASE_KEY = ("PAIGOW_RELEASE_KEY=/root/release.key",)
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
UNIT_A = (CHECKOUT / "systemd" / UNIT).read_text()
DESCRIPTION_B = "Pai Gow table controller, release b"

VERSION = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.timeout(600)


def install(
    guest: Machine, tree: str, *extra: str, env: tuple[str, ...] = RELEASE_KEY, kiosk: bool = False
) -> tuple[int, str]:
    argv = [INSTALL[0].format(tree=tree), *INSTALL[1:], *extra]
    if kiosk:
        argv.remove("--no-kiosk")
    done = guest.run(argv, check=False, env=env, timeout=300)
    return done.returncode, done.stdout + done.stderr


def installed_unit(guest: Machine) -> str:
    return (guest.root / UNIT_PATH.lstrip("/")).read_text()


def show(guest: Machine, *properties: str) -> dict[str, str]:
    args = ["systemctl", "show", UNIT, *(f"--property={p}" for p in properties)]
    lines = guest.run(args).stdout.splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def records(guest: Machine) -> list[dict[str, Any]]:
    out = guest.run(["paigow-controller", "export", "--state-dir", STATE]).stdout
    return [json.loads(line) for line in out.splitlines()]


def journal(guest: Machine, since_cursor: str = "") -> list[dict[str, str]]:
    args = ["journalctl", "--unit", UNIT, "--output=json", "--no-pager", "--all"]
    if since_cursor:
        args.append(f"--after-cursor={since_cursor}")
    return [json.loads(line) for line in guest.run(args).stdout.splitlines() if line]


def cursor(guest: Machine) -> str:
    entries = journal(guest)
    return entries[-1]["__CURSOR"] if entries else ""


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


def current_release(guest: Machine) -> str:
    return guest.run(["readlink", f"{PREFIX}/current"]).stdout.strip().rsplit("/", 1)[-1]


def previous_release(guest: Machine) -> str:
    done = guest.run(["readlink", f"{PREFIX}/previous"], check=False)
    return done.stdout.strip().rsplit("/", 1)[-1]


def last_power_on(guest: Machine) -> dict[str, Any]:
    found = [r for r in records(guest) if r["kind"] == "power_on"]
    data = found[-1]["data"]
    assert isinstance(data, dict)
    return data


def rounds_played(guest: Machine) -> int:
    return sum(1 for r in records(guest) if r["kind"] == "result")


def test_install_starts_the_service_after_ready(guest: Machine) -> None:
    tmp = guest.root / "root"
    source_tree(tmp / "release-a")
    tree_b = source_tree(tmp / "release-b", local_version="systest.b")
    unit_b = tree_b / "systemd" / UNIT  # a release whose unit differs: --rollback must undo it
    text_b = unit_b.read_text()
    assert text_b.count("\nDescription=") == 1
    unit_b.write_text(
        "\n".join(
            f"Description={DESCRIPTION_B}" if line.startswith("Description=") else line
            for line in text_b.split("\n")
        )
    )
    broken = source_tree(tmp / "release-c", local_version="systest.c")
    appliance = broken / "controller/app/appliance.py"
    text = appliance.read_text()
    start = "    def start(self) -> None:\n"
    assert start in text
    appliance.write_text(text.replace(start, start + '        raise RuntimeError("broken")\n', 1))
    # the release key, made off the box, as a release's signing key is
    made = subprocess.run(
        [sys.executable, "-m", "controller", "release-key", "--out", str(tmp / "release.key")],
        capture_output=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    (tmp / "release.pub").write_bytes(made.stdout)  # its verifier key, for the papers
    drop_in = guest.root / DROP_IN.lstrip("/")
    drop_in.parent.mkdir(parents=True)
    drop_in.write_text(SIMULATE)

    # A first install: a release key signs the manifest here (a test table's way).
    status, out = install(guest, "release-a", "--no-start")
    assert status == 0, out
    release_a = current_release(guest)
    assert release_a.startswith(f"{VERSION}-"), release_a
    assert len(release_a) == len(VERSION) + 13, release_a
    assert "python3-lgpio is not in this system's archives" in out  # detected, not required
    assert "udevd is not running" in out
    version = guest.run(["paigow-controller", "--version"]).stdout  # on PATH, via current
    assert version == f"paigow-controller {VERSION} (release {release_a})\n"
    # nothing but the product went in: no working files of a checkout
    listing = guest.run(["find", f"{PREFIX}/releases/{release_a}/src", "-maxdepth", "1"]).stdout
    assert sorted(Path(p).name for p in listing.split()[1:]) == sorted(
        ["controller", "drivers", "requirements", "pyproject.toml", "README.md", "docs"]
    )
    # ... and everything else it installs, in the release: what --rollback puts back
    listing = guest.run(["find", f"{PREFIX}/releases/{release_a}/system"]).stdout
    system = sorted(p.split("/system/", 1)[1] for p in listing.split()[1:])
    assert system == [
        "99-paigow-dice.rules",
        "config.example.toml",
        "kiosk",
        *sorted(f"kiosk/{p.name}" for p in (CHECKOUT / "hw/kiosk").iterdir()),
        UNIT,
    ], system
    assert installed_unit(guest) == UNIT_A

    # READY=1 before active: a Type=notify unit is active only once READY=1 came, and the
    # status text sent with it says so; the log holds power_on and the self-tests by then.
    guest.run(["systemctl", "start", UNIT])
    unit = show(guest, "Type", "NotifyAccess", "ActiveState", "StatusText", "MainPID", "NRestarts")
    assert unit["Type"] == "notify"
    assert unit["NotifyAccess"] == "main"
    assert unit["ActiveState"] == "active"
    # a new table has no dice set and no inspected tiles yet: up, but its status never says
    # ready while play is stopped; it names the codes (docs/faults.md)
    assert unit["StatusText"] == (
        "table table-1: FAULT F16 dice_missing, F18 tiles_missing: play stopped, round 1"
    ), unit
    kinds = [r["kind"] for r in records(guest)]
    assert kinds[:2] == ["log_created", "power_on"]
    assert "software_check" in kinds
    checks = [r["data"] for r in records(guest) if r["kind"] == "software_check"]
    assert checks[-1]["result"] == "ok", checks
    wait_for("rounds played under systemd", lambda: rounds_played(guest) >= 3)
    owner = guest.run(["stat", "-c", "%U %a", STATE]).stdout.split()
    assert owner == ["paigow", "700"]


def test_journal_keeps_the_priorities(guest: Machine) -> None:
    entries = [e for e in journal(guest) if e.get("_COMM", "").startswith("paigow")]
    by_text = {e["MESSAGE"]: e["PRIORITY"] for e in entries if isinstance(e.get("MESSAGE"), str)}
    unknown = [t for t in by_text if "the clock is" in t]
    assert unknown, by_text  # no time service in the guest: said, at warning
    assert by_text[unknown[0]] == "4"
    simulating = [t for t in by_text if t.startswith("simulating ")]
    assert simulating
    assert by_text[simulating[0]] == "6"
    assert not [t for t in by_text if t.startswith("<")]  # every prefix was read, none shown


def test_watchdog_restarts_a_stopped_process(guest: Machine) -> None:
    before = show(guest, "MainPID", "NRestarts")
    mark = cursor(guest)
    guest.run(["systemctl", "kill", "--kill-whom=main", "--signal=SIGSTOP", UNIT])
    # WatchdogSec=10: systemd aborts it (SIGABRT: the fault handler prints every thread's
    # stack), Restart=on-failure starts it again after RestartSec=2.
    wait_for(
        "a restart by the watchdog",
        lambda: show(guest, "NRestarts")["NRestarts"] != before["NRestarts"],
        timeout_s=40,
    )
    wait_for("active again", lambda: show(guest, "ActiveState")["ActiveState"] == "active")
    after = show(guest, "MainPID", "NRestarts")
    assert after["MainPID"] != before["MainPID"]
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1
    said = [e.get("MESSAGE", "") for e in journal(guest, mark)]
    assert any("Watchdog timeout" in str(m) for m in said), said
    assert any(str(m).startswith("Thread 0x") for m in said)  # the stacks, for the technician
    assert last_power_on(guest)["previous"] == "interrupted"
    wait_for("play goes on", lambda: rounds_played(guest) >= 1)


def test_stop_is_clean_and_recorded(guest: Machine) -> None:
    guest.run(["systemctl", "stop", UNIT])
    unit = show(guest, "ActiveState", "Result", "ExecMainStatus")
    assert unit == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
    assert records(guest)[-1]["kind"] == "shutdown"


def test_a_bad_config_exits_78_without_a_restart_loop(guest: Machine) -> None:
    config = guest.root / CONFIG.lstrip("/")
    good = config.read_text()
    mark = cursor(guest)
    try:
        config.write_text(good + "\n[table]\nno_such_key = 1\n")
        guest.run(["systemctl", "start", UNIT], check=False)
        time.sleep(5)  # two RestartSec= intervals: a restart would have come
        unit = show(guest, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
        assert unit["ExecMainStatus"] == "78"
        assert unit["ActiveState"] == "failed"
        assert unit["Result"] == "exit-code"
        assert unit["NRestarts"] == "0"
        lines = [e for e in journal(guest, mark) if e.get("_COMM", "").startswith("paigow")]
        assert lines
        assert all(e["PRIORITY"] == "3" for e in lines), lines
        assert any("table" in str(e["MESSAGE"]) for e in lines)  # the key is named
    finally:
        config.write_text(good)
    guest.run(["systemctl", "reset-failed", UNIT])
    guest.run(["systemctl", "start", UNIT])
    assert last_power_on(guest)["previous"] == "shutdown"


def test_one_installer_at_a_time(guest: Machine) -> None:
    release = current_release(guest)
    held = ["flock", f"{PREFIX}/.install.lock", INSTALL[0].format(tree="release-b"), "--no-kiosk"]
    done = guest.run(held, check=False, env=RELEASE_KEY)
    assert done.returncode == 1
    assert "another install is running" in done.stderr
    assert current_release(guest) == release


def test_upgrade_restarts_on_the_new_release(guest: Machine) -> None:
    release_a = current_release(guest)
    pid = show(guest, "MainPID")["MainPID"]
    config_before = guest.run(["sha256sum", CONFIG]).stdout
    seq_before = len(records(guest))
    status, out = install(guest, "release-b")
    assert status == 0, out
    release_b = current_release(guest)
    assert release_b != release_a
    assert release_b.startswith(f"{VERSION}+systest.b-")
    assert previous_release(guest) == release_a
    unit = show(guest, "MainPID", "ActiveState")
    assert unit["MainPID"] != pid
    assert unit["ActiveState"] == "active"
    assert guest.run(["paigow-controller", "--version"]).stdout == (
        f"paigow-controller {VERSION}+systest.b (release {release_b})\n"
    )
    # the release's own unit, loaded: the id covers systemd/ as well as the code
    assert installed_unit(guest).count(f"Description={DESCRIPTION_B}\n") == 1
    assert show(guest, "Description")["Description"] == DESCRIPTION_B
    software = last_power_on(guest)["software"]
    assert software["version"] == f"{VERSION}+systest.b"
    assert guest.run(["sha256sum", CONFIG]).stdout == config_before  # the config untouched
    assert len(records(guest)) > seq_before  # the same log, carried on
    kinds = [r["kind"] for r in records(guest)]
    assert "software_changed" in kinds


def test_a_release_that_does_not_start_is_rolled_back(guest: Machine) -> None:
    release_b = current_release(guest)
    status, out = install(guest, "release-c")
    assert status == 1, out
    assert "did not start" in out
    assert current_release(guest) == release_b
    assert show(guest, "ActiveState")["ActiveState"] == "active"
    releases = guest.run(["ls", f"{PREFIX}/releases"]).stdout.split()
    assert not [r for r in releases if "systest.c" in r]  # the failed release is gone
    assert show(guest, "Description")["Description"] == DESCRIPTION_B  # b's unit, back too
    assert guest.run(["paigow-controller", "--version"]).stdout.endswith(f"{release_b})\n")


def test_rollback_returns_to_the_previous_release(guest: Machine) -> None:
    release_b = current_release(guest)
    release_a = previous_release(guest)
    pid = show(guest, "MainPID")["MainPID"]
    status, out = install(guest, "release-b", "--rollback")
    assert status == 0, out
    assert current_release(guest) == release_a
    assert previous_release(guest) == release_b
    assert show(guest, "MainPID")["MainPID"] != pid
    assert show(guest, "ActiveState")["ActiveState"] == "active"
    assert last_power_on(guest)["software"]["version"] == VERSION
    # the unit file in place is release a's again, and the one systemd runs
    assert installed_unit(guest) == UNIT_A
    assert show(guest, "Description")["Description"] != DESCRIPTION_B
    assert guest.run(["paigow-controller", "--version"]).stdout.endswith(f"{release_a})\n")


def test_reboot_stops_cleanly_and_the_log_verifies(guest: Machine) -> None:
    wait_for("a round after the rollback", lambda: rounds_played(guest) >= 1)
    status = guest.reboot()
    assert status == REBOOT_STATUS
    assert guest.boots == 2
    wait_for(
        "active after the reboot", lambda: show(guest, "ActiveState")["ActiveState"] == "active"
    )
    kinds = [r["kind"] for r in records(guest)]
    last_on = len(kinds) - 1 - kinds[::-1].index("power_on")
    assert kinds[last_on - 1] == "shutdown"  # the reboot stopped the service cleanly
    assert last_power_on(guest)["previous"] == "shutdown"
    guest.run(["systemctl", "stop", UNIT])
    verified = guest.run(["paigow-controller", "verify-log", "--state-dir", STATE, "--json"])
    report = json.loads(verified.stdout)
    assert report["ok"] is True, report


def test_one_byte_changed_in_the_installed_release_is_found(guest: Machine) -> None:
    """Program verification on the installed release: on demand and at the next start."""
    site = guest.root / "opt/paigow-controller/current/venv/lib/python3.11/site-packages"
    target = site / "controller/core/wagers.py"
    original = target.read_bytes()
    changed = bytearray(original)
    changed[len(changed) // 2] ^= 0x01
    try:
        target.write_bytes(bytes(changed))
        done = guest.run(["paigow-controller", "verify-software", "--json"], check=False)
        assert done.returncode == 1, done.stderr
        assert json.loads(done.stdout)["differ"] == ["changed: controller/core/wagers.py"]
        guest.run(["systemctl", "start", UNIT])
        check = [r["data"] for r in records(guest) if r["kind"] == "software_check"][-1]
        assert check["result"] == "mismatch"
        assert check["differ"] == ["changed: controller/core/wagers.py"]
        faults = [r["data"] for r in records(guest) if r["kind"] == "fault"]
        assert faults[-1]["fault"] == "software_identity", faults[-1]
    finally:
        guest.run(["systemctl", "stop", UNIT], check=False)
        target.write_bytes(original)
    assert guest.run(["paigow-controller", "verify-software", "--json"]).returncode == 0


SITE = "venv/lib/python3.11/site-packages"
START_LIMIT = "/etc/systemd/system/paigow-controller.service.d/start-limit.conf"
APT_SHIM = "/root/no-network/apt-get"
KIOSK_PACKAGES = ("cage", "chromium", "wlr-randr")


def test_a_tampered_release_is_repaired_by_running_the_installer_again(guest: Machine) -> None:
    """A package file changed, the installed unit changed, the manifest deleted: running the
    installer again with the release's manifest names what differs, builds the release again
    and installs its manifest and unit. Offline (``--wheels``, the kiosk asked for, its
    packages missing, then in the wheels' debs/): apt never downloads. Under
    ``StartLimitBurst=2`` (the shipped unit allows 5 in 300 s: fewer installs in a row would
    meet this one), every restart still starts."""
    release_a = current_release(guest)
    assert previous_release(guest).startswith(f"{VERSION}+systest.b-")
    release = guest.root / f"{PREFIX.lstrip('/')}/releases/{release_a}"
    package = release / SITE / "controller"
    # the release's papers, as the release manager hands them over: its manifest, the key's
    # verifier (the key itself stays off the box)
    (guest.root / "root/a.manifest").write_bytes((package / "MANIFEST.json").read_bytes())
    papers = ("PAIGOW_MANIFEST=/root/a.manifest", "PAIGOW_RELEASE_PUB=/root/release.pub")
    # apt-get that says it was run (there is no network: --private-network)
    shim = guest.root / APT_SHIM.lstrip("/")
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --no-download "*) exec /usr/bin/apt-get "$@" ;; esac\n'
        "echo apt-get was run >&2\ntouch /root/apt-was-run\nexit 100\n"
    )
    shim.chmod(0o755)
    offline = (*papers, f"PATH={shim.parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin")
    limit = guest.root / START_LIMIT.lstrip("/")
    limit.write_text("[Unit]\nStartLimitIntervalSec=600\nStartLimitBurst=2\n")
    unit = guest.root / UNIT_PATH.lstrip("/")
    wagers = package / "core/wagers.py"
    try:
        guest.run(["systemctl", "daemon-reload"])
        guest.run(["systemctl", "start", UNIT])
        changed = bytearray(wagers.read_bytes())
        changed[len(changed) // 2] ^= 0x01
        wagers.write_bytes(bytes(changed))
        unit.write_text(UNIT_A.replace("RestartSec=2\n", "RestartSec=600\n"))
        (package / "MANIFEST.json").unlink()

        # the check names the file before
        done = guest.run(["paigow-controller", "verify-software", "--json"], check=False)
        assert done.returncode == 1
        status, out = install(guest, "release-a", env=offline, kiosk=True)
        print(out)  # what the technician reads (pytest -rP shows it)
        assert status == 0, out
        assert "changed: controller/core/wagers.py (installed)" in out
        assert f"{UNIT_PATH} was changed on this box (it is no release's)" in out
        assert f"building release {release_a}" in out
        assert "kiosk skipped: cage chromium wlr-randr not installed" in out
        assert "apt-get was run" not in out
        assert not (guest.root / "root/apt-was-run").exists()

        # repaired: the files the manifest names, its manifest, the release's unit; running
        assert current_release(guest) == release_a
        verified = guest.run(["paigow-controller", "verify-software", "--json"])
        assert json.loads(verified.stdout)["result"] == "ok"
        assert (package / "MANIFEST.json").read_bytes() == (
            guest.root / "root/a.manifest"
        ).read_bytes()
        assert installed_unit(guest) == UNIT_A
        assert show(guest, "ActiveState", "RestartUSec") == {
            "ActiveState": "active",
            "RestartUSec": "2s",
        }

        # once more: nothing differs, nothing is built; a third start within the limit. The
        # kiosk's packages now in the wheels' debs/ (stand-ins of the same names): installed
        # without the network, and the kiosk set up from the release's own files
        debs = guest.root / "root/wheels/debs"
        for name in KIOSK_PACKAGES:
            control = guest.root / f"root/stand-in/{name}/DEBIAN/control"
            control.parent.mkdir(parents=True)
            control.write_text(
                f"Package: {name}\nVersion: 999\nArchitecture: all\n"
                "Maintainer: system test <root@localhost>\nDescription: a stand-in\n"
            )
            guest.run(["dpkg-deb", "--build", f"/root/stand-in/{name}"])
            debs.mkdir(exist_ok=True)
            (guest.root / f"root/stand-in/{name}.deb").rename(debs / f"{name}.deb")
        status, out = install(guest, "release-a", env=offline, kiosk=True)
        print(out)
        assert status == 0, out
        assert "built already: checking it" in out
        assert "building release" not in out
        assert "was changed on this box" not in out
        assert show(guest, "ActiveState")["ActiveState"] == "active"
        assert "3 packages from /root/wheels/debs (no download)" in out
        assert "kiosk (offline: its packages are installed)" in out
        assert not (guest.root / "root/apt-was-run").exists()
        kiosk_unit = guest.root / "etc/systemd/system/paigow-kiosk.service"
        assert kiosk_unit.read_bytes() == (CHECKOUT / "hw/kiosk/paigow-kiosk.service").read_bytes()
        enabled = guest.run(["systemctl", "is-enabled", "paigow-kiosk.service"], check=False)
        assert enabled.stdout.strip() == "enabled"

        # a manifest that is not this checkout's (release b's) is refused: nothing changes
        b_manifest = (
            guest.root
            / f"{PREFIX.lstrip('/')}/releases/{previous_release(guest)}/{SITE}"
            / "controller/MANIFEST.json"
        )
        (guest.root / "root/b.manifest").write_bytes(b_manifest.read_bytes())
        pid = show(guest, "MainPID")["MainPID"]
        wrong = ("PAIGOW_MANIFEST=/root/b.manifest", "PAIGOW_RELEASE_PUB=/root/release.pub")
        status, out = install(guest, "release-a", env=wrong)
        assert status == 1, out
        assert "the manifest /root/b.manifest is not this checkout's" in out
        assert "systest.b" in out  # what differs: the version it names
        assert show(guest, "MainPID")["MainPID"] == pid
        assert guest.run(["paigow-controller", "verify-software", "--json"]).returncode == 0

        # a release whose files are right but whose manifest is gone (installed without it):
        # the right manifest given again is installed, without building anything
        (package / "MANIFEST.json").unlink()
        assert guest.run(["paigow-controller", "verify-software"], check=False).returncode == 1
        status, out = install(guest, "release-a", env=papers)
        assert status == 0, out
        assert "building release" not in out
        assert guest.run(["paigow-controller", "verify-software", "--json"]).returncode == 0
        assert show(guest, "ActiveState")["ActiveState"] == "active"
    finally:
        limit.unlink()
        guest.run(["systemctl", "daemon-reload"])
