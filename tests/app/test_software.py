"""Program verification: the signed manifest of a copy of the packages, the files that differ,
signatures that do not verify or come from another key, the command line, and the appliance
that records the check at start, latches the fault and records a change of software."""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gpiozero.pins.mock import MockFactory
from support.rng_fakes import AUDITOR_KEY

from controller.app.appliance import Appliance, Options
from controller.app.loop import Duty
from controller.app.watch import ClockWatch, last_software_identity
from controller.audit.log import AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.cli import main
from controller.core import canonical
from controller.core.config import Config
from controller.core.records import RecordKind
from controller.core.software import (
    MAX_MANIFEST_BYTES,
    PUBLIC_KEY_NAME,
    Change,
    SoftwareResult,
    open_manifest,
)
from controller.core.state import ClearFault, ClockSync, Event, Fault, Mode, Occurrence, State
from controller.errors import SoftwareIdentityError
from controller.software import bytecode
from controller.software import release as releases
from controller.software.check import (
    SoftwareVerifier,
    build_manifest,
    create_release_key,
    hash_packages,
    installed_root,
    read_release_key,
    running_version,
    write_manifest,
)

SOURCE = installed_root()
VERSION = running_version()


@dataclasses.dataclass
class Release:
    root: Path  # the copy of the packages, as installed
    manifest: Path
    key_file: Path
    public_key: str

    def verifier(self, *, required: bool = True, public_key: str = "") -> SoftwareVerifier:
        return SoftwareVerifier.installed(
            manifest=str(self.manifest), public_key=public_key, required=required, root=self.root
        )


def copy_packages(root: Path) -> None:
    for package in ("controller", "drivers"):
        shutil.copytree(
            SOURCE / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )


@pytest.fixture
def release(tmp_path: Path) -> Release:
    """The packages copied into a temporary directory, with a signed manifest and the release
    key's verifier installed beside it, as the installer leaves them."""
    root = tmp_path / "site-packages"
    copy_packages(root)
    key_file = tmp_path / "release.key"
    signer = create_release_key(key_file)
    manifest = root / "controller" / "MANIFEST.json"
    write_manifest(manifest, build_manifest(root, signer, VERSION))
    (root / "controller" / PUBLIC_KEY_NAME).write_text(f"{signer.verifier}\n")
    return Release(root, manifest, key_file, str(signer.verifier))


def flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


# --- the check ------------------------------------------------------------------------------


def test_an_unchanged_tree_verifies(release: Release) -> None:
    check = release.verifier().check()
    assert check.result is SoftwareResult.OK, check.summary()
    assert not check.is_fault
    assert check.files == len(hash_packages(release.root)) > 50
    assert check.key == read_release_key(release.key_file).verifier.key_id.hex()
    assert check.version == VERSION
    assert len(check.manifest or "") == 64


def test_the_release_key_file_is_its_owners_only(release: Release) -> None:
    assert release.key_file.stat().st_mode & 0o777 == 0o600
    with pytest.raises(SoftwareIdentityError, match="exists"):
        create_release_key(release.key_file)  # never replaced
    release.key_file.chmod(0o644)
    with pytest.raises(SoftwareIdentityError, match="0600"):
        read_release_key(release.key_file)


def test_one_byte_changed_names_the_file(release: Release) -> None:
    flip_one_byte(release.root / "drivers" / "shaker.py")
    check = release.verifier().check()
    assert check.result is SoftwareResult.MISMATCH
    assert check.is_fault
    assert [(d.path, d.change) for d in check.differences] == [
        ("drivers/shaker.py", Change.CHANGED)
    ]
    assert "drivers/shaker.py" in check.summary()


def test_package_data_and_bytecode_are_covered(release: Release) -> None:
    found = hash_packages(release.root)
    assert "controller/display/assets/display.js" in found
    assert "controller/py.typed" in found
    assert "controller/MANIFEST.json" not in found
    flip_one_byte(release.root / "controller" / "display" / "assets" / "display.css")
    assert release.verifier().check().differences[0].path == "controller/display/assets/display.css"


def compile_release(root: Path) -> dict[str, str]:
    """The installer's step: the release's bytecode written into the tree."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", bytecode.__file__, "--write", str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    digests: dict[str, str] = json.loads(done.stdout)
    return digests


def test_the_manifest_names_the_bytecode_the_installer_compiles(release: Release) -> None:
    """Signed before the tree is compiled (off the box, from the sources), the manifest names
    each module's .pyc; compiled afterwards in another process, the tree verifies, bytecode
    and all, and every module has its .pyc."""
    blob = json.loads(release.manifest.read_bytes())
    named = {p for p in blob["manifest"]["files"] if p.endswith(".pyc")}
    modules = {p for p in blob["manifest"]["files"] if p.endswith(".py")}
    assert named == {bytecode.cache_path(m) for m in modules}
    assert release.verifier().check().result is SoftwareResult.OK  # none compiled yet
    written = compile_release(release.root)
    assert set(written) == named
    check = release.verifier().check()
    assert check.result is SoftwareResult.OK, check.summary()
    assert check.files == len(modules) * 2 + len(blob["manifest"]["files"]) - len(named) * 2


@pytest.mark.parametrize(
    "cache",
    [
        "controller/core/__pycache__/state.cpython-311.pyc",  # a module's, not the release's
        "controller/core/__pycache__/state.cpython-311.opt-1.pyc",  # python -O would run it
        "controller/core/evil.pyc",  # imports as controller.core.evil, with no source
    ],
)
def test_bytecode_the_release_does_not_ship_is_named(release: Release, cache: str) -> None:
    (release.root / cache).parent.mkdir(exist_ok=True)
    (release.root / cache).write_bytes(b"whatever")
    check = release.verifier().check()
    assert check.result is SoftwareResult.MISMATCH
    change = Change.CHANGED if cache.endswith("state.cpython-311.pyc") else Change.ADDED
    assert [(d.path, d.change) for d in check.differences] == [(cache, change)]


# drivers.sim imported from the tree named by argv[1] (not the checkout's), said on stderr
IMPORT_FROM_TREE = (
    "import sys; sys.path.insert(0, sys.argv[1]); import drivers.sim;"
    " sys.stderr.write(drivers.sim.__file__)"
)


def import_from_tree(root: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter importing drivers.sim from ``root`` (IMPORT_FROM_TREE)."""
    return subprocess.run(
        [sys.executable, "-I", "-B", "-c", IMPORT_FROM_TREE, str(root)],
        capture_output=True,
        text=True,
        check=True,
    )


def tampered(pyc: bytes, marker: str) -> bytes:
    """``pyc`` with its code replaced and its header (the checked source hash) kept: what an
    interpreter given checked hash-based bytecode cannot tell from the real one."""
    code = compile(f"print({marker!r})\n", "tampered", "exec")
    return pyc[:16] + marshal.dumps(code)


def test_a_tampered_pyc_runs_and_the_check_names_it(release: Release, tmp_path: Path) -> None:
    """PEP 552's checked hash compares the .pyc's recorded hash with the source, never the
    code: a .pyc with its code changed and its header kept runs (here in a real interpreter,
    from the tree), and only the manifest's SHA-256 of the .pyc catches it, as a changed .py."""
    compile_release(release.root)
    module = "drivers/sim/__init__.py"
    pyc = release.root / bytecode.cache_path(module)
    pyc.write_bytes(tampered(pyc.read_bytes(), "tampered bytecode ran"))
    ran = import_from_tree(release.root)
    assert ran.stdout == "tampered bytecode ran\n"
    assert ran.stderr == str(release.root / module)
    check = release.verifier().check()
    assert check.result is SoftwareResult.MISMATCH
    assert [(d.path, d.change) for d in check.differences] == [
        (bytecode.cache_path(module), Change.CHANGED)
    ]
    assert bytecode.cache_path(module) in check.summary()
    verify = subprocess.run(
        [sys.executable, "-m", "controller", *verify_command(release, tmp_path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 1, verify.stderr
    assert json.loads(verify.stdout)["differ"] == [f"changed: {bytecode.cache_path(module)}"]


def test_a_changed_source_is_named_and_its_stale_pyc_does_not_run(release: Release) -> None:
    """The other half of the checked hash: a .py changed without its .pyc runs as it is on
    disk (the interpreter sees the source's hash differ), and the check names the .py."""
    compile_release(release.root)
    source = release.root / "drivers/sim/__init__.py"
    source.write_text(source.read_text() + "print('changed source ran')\n")
    ran = import_from_tree(release.root)
    assert ran.stdout == "changed source ran\n"
    assert ran.stderr == str(source)
    check = release.verifier().check()
    assert [(d.path, d.change) for d in check.differences] == [
        ("drivers/sim/__init__.py", Change.CHANGED)
    ]


def test_an_installed_release_writes_no_bytecode_over_the_release(release: Release) -> None:
    """A command run on the box by root (no PYTHONDONTWRITEBYTECODE) after a source changed
    leaves the release's .pyc as it is: the check names the .py alone, and once the source is
    put back the tree verifies again."""
    compile_release(release.root)
    source = release.root / "controller/core/wagers.py"
    pyc = release.root / bytecode.cache_path("controller/core/wagers.py")
    original, shipped = source.read_bytes(), pyc.read_bytes()
    source.write_bytes(original + b"\n# changed\n")
    subprocess.run(
        [
            *(sys.executable, "-I", "-c"),
            "import sys; sys.path.insert(0, sys.argv[1]); import controller.core.wagers",
            str(release.root),
        ],
        check=True,
    )
    assert pyc.read_bytes() == shipped
    check = release.verifier().check()
    assert [d.path for d in check.differences] == ["controller/core/wagers.py"]
    source.write_bytes(original)
    assert release.verifier().check().result is SoftwareResult.OK


def test_a_module_that_does_not_compile_is_refused_in_one_line(tmp_path: Path) -> None:
    copy_packages(tmp_path)
    (tmp_path / "drivers" / "broken.py").write_text("def (:\n")
    signer = create_release_key(tmp_path / "release.key")
    with pytest.raises(SoftwareIdentityError, match=r"drivers/broken.py does not compile"):
        build_manifest(tmp_path, signer, VERSION)


def test_an_added_a_missing_and_a_linked_file_are_named(release: Release) -> None:
    (release.root / "drivers" / "extra.py").write_text("print('hello')\n")
    (release.root / "controller" / "core" / "dice.py").unlink()
    target = release.root / "controller" / "core" / "position.py"
    moved = release.root.parent / "position.py"
    target.rename(moved)
    target.symlink_to(moved)  # the same bytes, behind a link: not a regular file
    check = release.verifier().check()
    assert {(d.path, d.change) for d in check.differences} == {
        ("drivers/extra.py", Change.ADDED),
        ("controller/core/dice.py", Change.MISSING),
        ("controller/core/position.py", Change.CHANGED),
    }


def test_a_file_whose_name_is_not_utf8_is_named_and_can_be_recorded(release: Release) -> None:
    odd = os.fsencode(release.root / "drivers") + b"/\xff\n.py"
    with open(odd, "wb") as file:
        file.write(b"x = 1\n")
    check = release.verifier().check()
    assert [str(d) for d in check.differences] == ["added: drivers/\\xff\n.py"]
    canonical.encode(check.as_record())  # recordable as it is


def test_a_pipe_is_never_opened_and_a_tree_past_the_bounds_is_a_mismatch(
    release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.mkfifo(release.root / "drivers" / "pipe.py")  # reading it would wait for a writer
    check = release.verifier().check()
    assert [str(d) for d in check.differences] == ["added: drivers/pipe.py"]
    monkeypatch.setattr("controller.software.check.MAX_ENTRIES", 10)
    check = release.verifier().check()
    assert check.result is SoftwareResult.MISMATCH
    assert "more than 10 names" in check.detail
    assert check.manifest is not None  # the manifest it was checked against


def test_another_version_running_is_a_mismatch(release: Release) -> None:
    verifier = dataclasses.replace(release.verifier(), version="9.9.9")
    check = verifier.check()
    assert check.result is SoftwareResult.MISMATCH
    assert f"the manifest is for version {VERSION}, version 9.9.9 runs" in check.summary()


def test_a_bad_signature_is_refused(release: Release) -> None:
    raw = canonical.decode(release.manifest.read_bytes().rstrip(b"\n"))
    # the body changed after signing: a file's digest replaced by the tampered file's
    shaker = release.root / "drivers" / "shaker.py"
    flip_one_byte(shaker)
    raw["manifest"]["files"]["drivers/shaker.py"] = hash_packages(release.root)["drivers/shaker.py"]
    release.manifest.write_bytes(canonical.encode(raw))
    check = release.verifier().check()
    assert check.result is SoftwareResult.BAD_MANIFEST
    assert check.is_fault
    assert "signature does not verify" in check.detail


def test_a_manifest_signed_by_another_key_is_refused(release: Release, tmp_path: Path) -> None:
    other = create_release_key(tmp_path / "other.key", "someone-else")
    write_manifest(release.manifest, build_manifest(release.root, other, VERSION))
    check = release.verifier().check()
    assert check.result is SoftwareResult.BAD_MANIFEST
    assert "signed by another key (someone-else" in check.detail


def test_a_configured_public_key_is_trusted_over_the_file_beside_the_manifest(
    release: Release, tmp_path: Path
) -> None:
    """Whoever changes the files may also replace release.pub and sign their own manifest:
    a key in the config (or, better, checked off the box) is not replaced with them."""
    intruder = create_release_key(tmp_path / "intruder.key", "paigow-controller-release")
    flip_one_byte(release.root / "controller" / "core" / "wagers.py")
    write_manifest(release.manifest, build_manifest(release.root, intruder, VERSION))
    (release.root / "controller" / PUBLIC_KEY_NAME).write_text(f"{intruder.verifier}\n")
    assert release.verifier().check().result is SoftwareResult.OK  # accidents only
    pinned = release.verifier(public_key=release.public_key).check()
    assert pinned.result is SoftwareResult.BAD_MANIFEST
    assert "signed by another key" in pinned.detail


def test_no_manifest_and_no_key_are_said(release: Release) -> None:
    (release.root / "controller" / PUBLIC_KEY_NAME).unlink()
    check = release.verifier().check()
    assert check.result is SoftwareResult.BAD_MANIFEST
    assert "no release key" in check.detail
    release.manifest.unlink()
    for required in (True, False):
        check = release.verifier(required=required).check()
        assert check.result is SoftwareResult.NO_MANIFEST
        assert check.is_fault is required


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"{" * 5000, "canonical"),
        (b'{"format":"x"}', "format, manifest"),
        (b" " * (MAX_MANIFEST_BYTES + 1), "bytes"),
    ],
)
def test_a_malformed_manifest_is_refused(release: Release, blob: bytes, why: str) -> None:
    with pytest.raises(SoftwareIdentityError, match=why):
        open_manifest(blob, read_release_key(release.key_file).verifier)
    release.manifest.write_bytes(blob)
    assert release.verifier().check().result is SoftwareResult.BAD_MANIFEST


def test_a_manifest_naming_a_path_outside_the_packages_is_refused(release: Release) -> None:
    signer = read_release_key(release.key_file)
    from controller.core.software import sign_manifest

    with pytest.raises(SoftwareIdentityError, match="not a path"):
        sign_manifest(VERSION, {"controller/../etc/passwd": "00" * 32}, signer)


# --- the command line -----------------------------------------------------------------------


def verify_command(release: Release, tmp_path: Path, *extra: str) -> list[str]:
    config = tmp_path / "config.toml"
    config.write_text(f'[software]\nmanifest = "{release.manifest}"\n')
    return [
        "verify-software",
        "--config",
        str(config),
        "--root",
        str(release.root),
        *extra,
    ]


def test_verify_software_exits_0_when_it_verifies_and_1_naming_the_file(
    release: Release, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(verify_command(release, tmp_path)) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["ok"], out["result"]) == (True, "ok")
    flip_one_byte(release.root / "controller" / "core" / "state.py")
    assert main(verify_command(release, tmp_path)) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["differ"] == ["changed: controller/core/state.py"]
    assert out["ok"] is False


def test_verify_software_with_a_bad_config_or_argument(
    release: Release, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[software]\npublic_key = "not a key"\n')
    assert main(["verify-software", "--config", str(bad)]) == 78
    err = capsys.readouterr().err
    assert "software.public_key" in err
    assert len(err.splitlines()) == 1
    relative = tmp_path / "relative.toml"
    relative.write_text('[software]\nmanifest = "MANIFEST.json"\n')
    assert main(["verify-software", "--config", str(relative)]) == 78
    assert "software.manifest" in capsys.readouterr().err
    assert main([*verify_command(release, tmp_path), "--public-key", "nonsense"]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    # a key given on the command line: the auditor's own copy of the release key
    assert main([*verify_command(release, tmp_path), "--public-key", release.public_key]) == 0


def test_release_key_and_manifest_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tree"
    copy_packages(root)
    key = tmp_path / "k"
    assert main(["release-key", "--out", str(key)]) == 0
    public = capsys.readouterr().out.strip()
    assert os.stat(key).st_mode & 0o777 == 0o600
    assert main(["release-key", "--out", str(key)]) == 1  # never replaced
    assert "exists" in capsys.readouterr().err
    out = root / "controller" / "MANIFEST.json"
    command = ["manifest", "--release-key", str(key), "--out", str(out), "--root", str(root)]
    assert main(command) == 0
    capsys.readouterr()
    release = Release(root, out, key, public)
    assert release.verifier(public_key=public).check().result is SoftwareResult.OK
    assert main([*command, "--version", "has space"]) == 2
    assert main(["release-key", "--out", str(tmp_path / "k2"), "--name", "a+b"]) == 2


# --- the appliance --------------------------------------------------------------------------


class FakeClock:
    """The clock status the OS would give, set by the test."""

    def __init__(self, synchronised: bool | None) -> None:
        self.synchronised = synchronised

    def is_synchronised(self) -> bool | None:
        return self.synchronised


RNG_TABLE = dataclasses.replace(
    Config(),
    table=dataclasses.replace(Config().table, mode=Mode.RNG, name="t9"),
    rng=dataclasses.replace(Config().rng, escrow_public_key=AUDITOR_KEY.text),
)


def start(
    state_dir: Path, factory: MockFactory, verifier: SoftwareVerifier, clock: FakeClock
) -> Appliance:
    appliance = Appliance(
        RNG_TABLE,
        Options(
            pin_factory=factory,
            state_dir=state_dir,
            web_display=False,
            service_terminal=False,
            software=verifier,
            clock_status=clock,
        ),
    )
    appliance.start()
    return appliance


def records(state_dir: Path) -> list[tuple[str, dict[str, object]]]:
    log = AuditLog.open(state_dir, origin="paigow-controller/t9")
    try:
        return [(r.kind, r.data) for r in log.records()]
    finally:
        log.close()


def test_the_next_start_records_the_mismatch_and_latches_the_fault(
    release: Release, tmp_path: Path, factory: MockFactory
) -> None:
    state = tmp_path / "state"
    clock = FakeClock(synchronised=False)
    appliance = start(state, factory, release.verifier(), clock)
    try:
        assert appliance.loop is not None
        assert appliance.loop.machine.state is State.IDLE
    finally:
        appliance.close()
    flip_one_byte(release.root / "controller" / "core" / "wagers.py")
    appliance = start(state, factory, release.verifier(), clock)
    try:
        assert appliance.loop is not None
        context = appliance.loop.machine.context
        assert context.state is State.FAULT
        assert context.active_faults == {Fault.SOFTWARE_IDENTITY}
        # the supervisor cannot clear it while the file differs
        appliance.loop.dispatch(ClearFault(at=1, supervisor=True))
        assert appliance.loop.machine.state is State.FAULT
    finally:
        appliance.close()
    rows = records(state)
    checks = [data for kind, data in rows if kind == RecordKind.SOFTWARE_CHECK]
    assert [c["result"] for c in checks] == ["ok", "mismatch"]
    assert checks[1]["differ"] == ["changed: controller/core/wagers.py"]
    faults = [data for kind, data in rows if kind == RecordKind.FAULT]
    assert faults[-1]["fault"] == "software_identity"
    power_on = [data for kind, data in rows if kind == RecordKind.POWER_ON]
    assert power_on[0]["clock"] == "unsynchronised"
    assert power_on[0]["software"] == {"version": VERSION, "manifest": checks[0]["manifest"]}
    signer = load_signer(state)
    assert signer is not None
    verify_state_dir(state, signer.verifier)  # the new records verify like any other


def test_a_new_release_is_recorded_as_a_software_change(
    release: Release, tmp_path: Path, factory: MockFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    clock = FakeClock(synchronised=True)
    start(state, factory, release.verifier(), clock).close()
    first = release.verifier().check().manifest
    # version 2: a file changed and the manifest signed again by the release key
    (release.root / "controller" / "core" / "wagers.py").write_text("# release 2\n")
    signer = read_release_key(release.key_file)
    write_manifest(release.manifest, build_manifest(release.root, signer, VERSION))
    second = release.verifier().check().manifest
    assert second != first
    start(state, factory, release.verifier(), clock).close()
    start(state, factory, release.verifier(), clock).close()  # the same again: no change
    changes = [data for kind, data in records(state) if kind == RecordKind.SOFTWARE_CHANGED]
    assert changes == [
        {
            "round": 1,
            "previous": {"version": VERSION, "manifest": first},
            "now": {"version": VERSION, "manifest": second},
        }
    ]
    # the export shows it (and recall, in its round)
    assert main(["export", "--state-dir", str(state)]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["data"]["now"]["manifest"] for e in exported if e["kind"] == "software_changed"] == [
        second
    ]
    assert main(["recall", "--state-dir", str(state), "--last", "1"]) == 0
    recalled = json.loads(capsys.readouterr().out)["rounds"][0]["records"]
    assert "software_changed" in [r["kind"] for r in recalled]


def test_the_hourly_check_and_the_clock_change_run_on_the_loops_own_deadlines(
    release: Release, tmp_path: Path, factory: MockFactory
) -> None:
    """The loop's clock is injected: nothing waits for the wall clock."""
    state = tmp_path / "state"
    clock = FakeClock(synchronised=False)
    appliance = start(state, factory, release.verifier(), clock)
    try:
        loop = appliance.loop
        assert loop is not None
        now = [0]
        loop.clock = lambda: now[0]
        duties = {duty.name: duty for duty in loop.duties}
        assert duties["software"].every_ms == 3_600_000
        for duty in loop.duties:
            duty.due = duty.every_ms  # as if the loop was made at 0 on this clock
        assert loop._sleep_s() is not None
        now[0] = 59_999
        loop.run_duties()
        clock.synchronised = True
        now[0] = 60_000
        loop.run_duties()  # the clock: synchronised now, recorded once
        now[0] = 120_000
        loop.run_duties()  # asked again, the same: nothing recorded
        flip_one_byte(release.root / "drivers" / "panel.py")
        now[0] = 3_599_999
        loop.run_duties()
        assert loop.machine.state is State.IDLE  # not due yet
        now[0] = 3_600_000
        loop.run_duties()
        assert loop.machine.state is State.FAULT
        assert duties["software"].due == 7_200_000
    finally:
        appliance.close()
    rows = records(state)
    assert [d["clock"] for k, d in rows if k == RecordKind.CLOCK_STATUS] == ["synchronised"]
    checks = [d for k, d in rows if k == RecordKind.SOFTWARE_CHECK]
    assert [(c["reason"], c["result"]) for c in checks] == [
        ("power_on", "ok"),
        ("periodic", "mismatch"),
    ]


def test_a_check_is_put_off_while_a_shake_is_in_progress(
    release: Release, tmp_path: Path, factory: MockFactory
) -> None:
    state = tmp_path / "state"
    appliance = start(state, factory, release.verifier(), FakeClock(True))
    try:
        loop = appliance.loop
        assert loop is not None
        now = [10_000]
        loop.clock = lambda: now[0]
        calls: list[int] = []

        def check(at: int) -> Occurrence | None:
            calls.append(at)
            return None

        loop.duties = [Duty("probe", 1000, check, due=10_000)]
        loop.machine.context = dataclasses.replace(loop.machine.context, state=State.DRAWING)
        loop.run_duties()
        assert calls == []
        assert loop.duties[0].due == 15_000  # DUTY_RETRY_MS later
        loop.machine.context = dataclasses.replace(loop.machine.context, state=State.IDLE)
        now[0] = 15_000
        loop.run_duties()
        assert calls == [15_000]
        assert loop.duties[0].due == 16_000
    finally:
        loop.machine.context = dataclasses.replace(loop.machine.context, state=State.IDLE)
        appliance.close()


def test_power_on_records_an_unknown_clock(
    release: Release, tmp_path: Path, factory: MockFactory
) -> None:
    state = tmp_path / "state"
    start(state, factory, release.verifier(), FakeClock(None)).close()
    power_on = next(d for k, d in records(state) if k == RecordKind.POWER_ON)
    assert power_on["clock"] == str(ClockSync.UNKNOWN)


def test_the_clock_watch_reports_each_change_once() -> None:
    status = FakeClock(False)
    watch = ClockWatch(status)
    assert watch.now() is ClockSync.UNSYNCHRONISED
    assert watch.check(1) is None
    status.synchronised = True
    changed = watch.check(2)
    assert changed is not None
    assert (changed.event, changed.clock, changed.at) == (
        Event.CLOCK_CHANGED,
        ClockSync.SYNCHRONISED,
        2,
    )
    assert watch.check(3) is None
    status.synchronised = None  # the kernel and the time service no longer say
    unknown = watch.check(4)
    assert unknown is not None
    assert unknown.clock is ClockSync.UNKNOWN


def test_the_last_software_check_is_found_within_a_bounded_look_back(
    release: Release, tmp_path: Path, factory: MockFactory
) -> None:
    state = tmp_path / "state"
    start(state, factory, release.verifier(), FakeClock(True)).close()
    log = AuditLog.open(state, origin="paigow-controller/t9")
    try:
        found = last_software_identity(log)
        assert found == release.verifier().check().identity
        assert log.last_record(RecordKind.SOFTWARE_CHECK, within=1) is None  # not the last
    finally:
        log.close()


# --- the release the installer builds (controller/software/release.py) -----------------------

CHECKOUT = Path(__file__).resolve().parents[2]
RELEASE_PY = CHECKOUT / "controller/software/release.py"


def staged(tmp_path: Path, name: str = "stage") -> Path:
    dest = tmp_path / name
    releases.stage(CHECKOUT, dest)
    return dest


def fake_checkout(tmp_path: Path) -> Path:
    """The parts of the checkout a release is built from, copied (so a test may change them)."""
    checkout = tmp_path / "checkout"
    for source in releases.SOURCES:
        origin = CHECKOUT / source
        (checkout / source).parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, checkout / source, ignore=releases._ignore)
        else:
            shutil.copy2(origin, checkout / source)
    return checkout


def built(tmp_path: Path, stage: Path) -> Path:
    """A release built from ``stage`` as the installer leaves it: src/, system/, RELEASE and
    the packages in a venv's site-packages (copied: the wheel carries them unchanged)."""
    built_dir = tmp_path / releases.release_id(stage)
    shutil.copytree(stage, built_dir)
    site = built_dir / "venv/lib/python3.11/site-packages"
    for package in releases.PACKAGES:
        shutil.copytree(stage / "src" / package, site / package)
    (site / "controller/MANIFEST.json").write_text("{}\n")  # the installer's: not compared
    (built_dir / "RELEASE").write_text(f"{built_dir.name}\n")
    return built_dir


def test_a_release_holds_everything_the_installer_installs(tmp_path: Path) -> None:
    stage = staged(tmp_path)
    files = releases.listing(stage)
    for path in (
        "system/paigow-controller.service",
        "system/99-paigow-dice.rules",
        "system/config.example.toml",
        "system/kiosk/setup-kiosk.sh",
        "src/pyproject.toml",
        "src/controller/core/software.py",
    ):
        assert path in files, path
    assert files["system/kiosk/setup-kiosk.sh"].endswith("+x")  # the mode is part of it
    assert not [p for p in files if "__pycache__" in p or p.endswith(".pyc")]
    assert re.fullmatch(rf"{re.escape(VERSION)}-[0-9a-f]{{12}}", releases.release_id(stage))


@pytest.mark.parametrize(
    "changed",
    [
        "systemd/paigow-controller.service",
        "hw/99-paigow-dice.rules",
        "hw/config.example.toml",
        "hw/kiosk/offline.html",
        "controller/core/wagers.py",
    ],
)
def test_the_release_id_covers_every_file_installed(tmp_path: Path, changed: str) -> None:
    checkout = fake_checkout(tmp_path)
    releases.stage(checkout, tmp_path / "before")
    with (checkout / changed).open("a") as f:
        f.write("\n")
    releases.stage(checkout, tmp_path / "after")
    before, after = (releases.release_id(tmp_path / n) for n in ("before", "after"))
    assert before != after
    assert before.split("-")[0] == after.split("-")[0]  # one version, two releases


def test_the_release_id_is_the_same_whatever_the_checkouts_modes(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    releases.stage(checkout, tmp_path / "one")
    (checkout / "hw/config.example.toml").chmod(0o664)  # a group-writable checkout
    releases.stage(checkout, tmp_path / "two")
    assert releases.release_id(tmp_path / "one") == releases.release_id(tmp_path / "two")
    (checkout / "hw/config.example.toml").chmod(0o755)  # made executable: another release
    releases.stage(checkout, tmp_path / "three")
    assert releases.release_id(tmp_path / "one") != releases.release_id(tmp_path / "three")


def test_a_checkout_with_a_link_cannot_be_a_release(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    (checkout / "hw/kiosk/linked").symlink_to("/etc/passwd")
    with pytest.raises(releases.ReleaseError, match="kiosk/linked"):
        releases.stage(checkout, tmp_path / "stage")


def test_a_built_release_that_matches_compares_equal(tmp_path: Path) -> None:
    stage = staged(tmp_path)
    assert releases.compare(built(tmp_path, stage), stage) == []


def test_compare_names_every_file_that_differs(tmp_path: Path) -> None:
    stage = staged(tmp_path)
    done = built(tmp_path, stage)
    site = done / "venv/lib/python3.11/site-packages"
    flip_one_byte(site / "controller/core/wagers.py")
    (site / "drivers/extra.py").write_text("print('hello')\n")
    (site / "controller/core/state.py").unlink()
    (site / "controller/display/assets").rename(tmp_path / "assets")  # not a module: the
    flip_one_byte(done / "system/paigow-controller.service")  # manifest names those
    (done / "system/kiosk/offline.html").unlink()
    (done / "src/controller/core/added.py").write_text("")
    (done / "system/kiosk/setup-kiosk.sh").chmod(0o644)
    (done / "RELEASE").unlink()
    assert releases.compare(done, stage) == [
        "missing: RELEASE",
        "missing: controller/core/state.py (installed)",
        "changed: controller/core/wagers.py (installed)",
        "added: drivers/extra.py (installed)",
        "added: src/controller/core/added.py",
        "missing: system/kiosk/offline.html",
        "changed: system/kiosk/setup-kiosk.sh",
        "changed: system/paigow-controller.service",
    ]


def test_a_release_without_its_venv_is_named(tmp_path: Path) -> None:
    stage = staged(tmp_path)
    done = built(tmp_path, stage)
    shutil.rmtree(done / "venv")
    assert releases.compare(done, stage) == ["missing: venv (the release's virtualenv)"]


def test_the_installers_commands_through_the_system_python(tmp_path: Path) -> None:
    """As the installer runs it: ``python3 -I -B release.py``, the standard library only."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-I", "-B", str(RELEASE_PY), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=False)

    done = run("stage", str(CHECKOUT), str(tmp_path / "stage"))
    assert (done.returncode, done.stderr) == (0, "")
    done = run("id", str(tmp_path / "stage"))
    assert done.stdout == f"{releases.release_id(tmp_path / 'stage')}\n"
    built_dir = built(tmp_path, tmp_path / "stage")
    assert run("compare", str(built_dir), str(tmp_path / "stage")).returncode == 0
    flip_one_byte(built_dir / "src/README.md")
    done = run("compare", str(built_dir), str(tmp_path / "stage"))
    assert (done.returncode, done.stdout) == (1, "changed: src/README.md\n")
    done = run("stage", str(tmp_path / "nowhere"), str(tmp_path / "again"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "nowhere/controller: missing" in done.stderr
    done = run("bogus")
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)


def test_version_names_the_release_it_runs_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = tmp_path / "releases/0.1.0-0123456789ab/venv"
    venv.mkdir(parents=True)
    assert releases.installed_release(venv) is None  # not written (a checkout's venv)
    (venv.parent / "RELEASE").write_text("0.1.0-0123456789ab\n")
    assert releases.installed_release(venv) == "0.1.0-0123456789ab"
    monkeypatch.setattr(sys, "prefix", str(venv))
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"paigow-controller {VERSION} (release 0.1.0-0123456789ab)\n"
    (venv.parent / "RELEASE").write_text("0.1.0-0123456789ab\x1b[2J\n")  # never shown
    assert releases.installed_release(venv) is None


def test_bytecode_py_says_its_usage_in_one_line() -> None:
    for argv in ([], ["--write"], ["--bogus", "x"], ["a", "b"]):
        done = subprocess.run(
            [sys.executable, "-I", "-S", bytecode.__file__, *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stderr) == (2, bytecode.USAGE + "\n"), argv
