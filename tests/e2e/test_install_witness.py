"""hw/install-witness.sh run into a directory (``--root``): the files it says it writes, with
their modes; mosquitto started on what it installed takes a partition's witness; the unit and
its drop-in verify under systemd-analyze. (Packages, the user, the release and systemctl are
what --root leaves out.)"""

from __future__ import annotations

import shutil
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from support.fleet_broker import INSTALLED, SHIPPED, ClientFiles, FleetCa, ShippedBroker

from controller.fleet.client import tls_context

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hw" / "install-witness.sh"
UNIT = ROOT / "systemd" / "paigow-witness.service"
SYSTEM = "etc/systemd/system"
DROP_IN = f"{SYSTEM}/paigow-witness.service.d/10-install-witness.conf"
INSTALLED_BIN = "/opt/paigow-controller/current/venv/bin/paigow-controller"
DB_URL = "postgresql://witness:s3cret@db.casino/witness\n"


def install(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv], capture_output=True, text=True, timeout=60, check=False
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("issued")
    ca = FleetCa(base)
    broker_dir, witness_dir = base / "broker-out", base / "witness-out"
    ca.fleet_ca("issue", "--dir", str(ca.ca_dir), "--broker", "localhost", "--ip", "127.0.0.1",
                "--out", str(broker_dir))  # fmt: skip
    ca.fleet_ca("issue", "--dir", str(ca.ca_dir), "--witness", "east", "--out", str(witness_dir))
    db_url = base / "db.url"
    db_url.write_text(DB_URL)
    db_url.chmod(0o600)
    return {"ca": ca, "broker": broker_dir, "witness": witness_dir, "db_url": db_url}


@pytest.fixture(scope="module")
def installed(issued: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root")
    done = install(
        "--broker-certs", str(issued["broker"]), "--witness-certs", str(issued["witness"]),
        "--partition", "west", "--partition", "east", "--db-url-file", str(issued["db_url"]),
        "--root", str(root),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "What the technician does next" in done.stdout
    for step in ("witness-key", "fleet-ca issue --dir CA --table T", "mqtts://", "export-key",
                 "fleet-ca revoke", "fleet-ca crl", "8883"):  # fmt: skip
        assert step in done.stdout, step
    return root


def test_it_writes_what_it_says_with_their_modes(installed: Path, issued: dict[str, Any]) -> None:
    files = {str(p.relative_to(installed)): mode(p) for p in installed.rglob("*") if p.is_file()}
    assert files == {
        "etc/mosquitto/conf.d/paigow.conf": 0o644,
        "etc/mosquitto/paigow.acl": 0o644,
        "etc/mosquitto/ca_certificates/paigow-fleet-ca.pem": 0o644,
        "etc/mosquitto/certs/paigow-broker.pem": 0o644,
        "etc/mosquitto/certs/paigow-broker.key": 0o640,  # root:mosquitto when not --root
        "etc/mosquitto/paigow-fleet.crl": 0o644,
        "etc/paigow-witness/tls/ca.pem": 0o644,
        "etc/paigow-witness/tls/witness.pem": 0o644,
        "etc/paigow-witness/tls/witness.key": 0o600,
        "etc/paigow-witness/db.url": 0o600,
        "etc/systemd/system/paigow-witness.service": 0o644,
        DROP_IN: 0o644,
    }
    assert (installed / "etc/paigow-witness/tables").is_dir()
    read = lambda path: (installed / path).read_bytes()  # noqa: E731
    assert read("etc/mosquitto/conf.d/paigow.conf") == (SHIPPED / "paigow.conf").read_bytes()
    assert read("etc/systemd/system/paigow-witness.service") == UNIT.read_bytes()
    assert (
        read("etc/mosquitto/certs/paigow-broker.key")
        == (issued["broker"] / "broker.key").read_bytes()
    )
    assert (
        read("etc/paigow-witness/tls/witness.pem")
        == (issued["witness"] / "witness-east.pem").read_bytes()
    )
    assert read("etc/paigow-witness/db.url") == DB_URL.encode()
    # every file paigow.conf names is installed where it names it
    for path in INSTALLED:
        assert (installed / path.lstrip("/")).is_file(), path
    acl = (installed / "etc/mosquitto/paigow.acl").read_text()
    assert acl.startswith((SHIPPED / "paigow.acl").read_text())
    assert acl.count("\nuser witness-east\n") == 1  # its own partition, named once
    assert acl.count("\nuser witness-west\n") == 1


def test_the_unit_reads_its_secrets_from_files(installed: Path) -> None:
    unit = (installed / "etc/systemd/system/paigow-witness.service").read_text()
    drop_in = (installed / DROP_IN).read_text()
    assert "LoadCredential=witness.key:/etc/paigow-witness/tls/witness.key\n" in unit
    assert "--key-file %d/witness.key" in unit
    assert "LoadCredential=db.url:/etc/paigow-witness/db.url\n" in drop_in
    start = [line for line in drop_in.splitlines() if line.startswith("ExecStart=")]
    assert start[0] == "ExecStart="
    shipped_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert start[1] == f"{shipped_start} --partition --db-file %d/db.url"
    assert "s3cret" not in unit + drop_in
    assert "--db " not in unit + drop_in
    for line in (unit + drop_in).splitlines():  # every file a line names is installed
        for word in line.replace("=", " ").replace(":", " ").split():
            if word.startswith("/etc/") and not word.endswith("/"):
                assert (installed / word.lstrip("/")).exists(), word


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_unit_and_its_drop_in_verify(installed: Path, tmp_path: Path) -> None:
    copy = tmp_path / "system"
    shutil.copytree(installed / SYSTEM, copy)
    true = str(shutil.which("true"))
    for path in (copy / "paigow-witness.service", copy / Path(DROP_IN).relative_to(SYSTEM)):
        path.write_text(path.read_text().replace(INSTALLED_BIN, true))
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(copy / "paigow-witness.service")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"SYSTEMD_LOG_LEVEL": "debug", "PATH": "/usr/bin:/bin"},
    )
    assert verify.returncode == 0, verify.stderr
    assert "10-install-witness.conf" in verify.stdout + verify.stderr  # the drop-in was read


def test_mosquitto_runs_on_what_it_installed(
    installed: Path, issued: dict[str, Any], tmp_path: Path
) -> None:
    """The installed ACL: the partition's witness (witness-east) reads every table's records
    and writes their cosignatures, as the witness does."""
    ca: FleetCa = issued["ca"]
    broker = ShippedBroker(tmp_path / "broker", ca, acl=installed / "etc/mosquitto/paigow.acl")
    broker.start()
    try:
        witness_dir = issued["witness"]
        east = ClientFiles(
            "witness-east",
            witness_dir / "witness-east.pem",
            witness_dir / "witness-east.key",
            witness_dir / "ca.pem",
            "",
        )
        table = ca.table("table-7")
        got = threading.Event()
        cosigned = threading.Event()

        def client(files: ClientFiles) -> mqtt.Client:
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"paigow-{files.name}")
            c.tls_set_context(tls_context(str(files.ca), str(files.cert), str(files.key)))
            c.connect("127.0.0.1", broker.port, keepalive=10)
            c.loop_start()
            return c

        witness = client(east)
        witness.on_message = lambda *_: got.set()
        witness.subscribe("paigow/v1/+/records", 1)
        tab = client(table)
        tab.on_message = lambda *_: cosigned.set()
        tab.subscribe("paigow/v1/table-7/cosignature", 1)
        for _ in range(100):  # until the witness's subscription holds
            tab.publish("paigow/v1/table-7/records", b"a record", 1).wait_for_publish(10)
            if got.wait(0.1):
                break
        assert got.is_set()
        witness.publish("paigow/v1/table-7/cosignature", b"cosigned", 1, True).wait_for_publish(10)
        assert cosigned.wait(10)
        for c in (witness, tab):
            c.disconnect()
            c.loop_stop()
    finally:
        broker.kill()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--broker-certs DIR is required"),
        (["--broker-certs", "{broker}"], "--witness-certs DIR is required"),
        (["--broker-certs", "{witness}", "--witness-certs", "{witness}"], "has no broker.pem"),
        (["--broker-certs", "{broker}", "--witness-certs", "{broker}"], "one witness*.pem"),
        (
            ["--broker-certs", "{broker}", "--witness-certs", "{witness}", "--partition", "a b"],
            "--partition 'a b'",
        ),
        (
            [
                "--broker-certs",
                "{broker}",
                "--witness-certs",
                "{witness}",
                "--db-url-file",
                "{broker}/ca.pem",
            ],
            "no postgresql:// URL",
        ),
        (
            ["--broker-certs", "{broker}", "--witness-certs", "{witness}", "--root", "{missing}"],
            "is not a directory",
        ),
        (["--frobnicate"], "unknown argument"),
        (["--root"], "--root needs a value"),
    ],
)
def test_a_bad_argument_writes_nothing(
    argv: list[str], message: str, issued: dict[str, Any], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    places = {"{broker}": str(issued["broker"]), "{witness}": str(issued["witness"]),
              "{missing}": str(tmp_path / "missing")}  # fmt: skip
    argv = [places.get(a, a) for a in argv]
    for key, value in places.items():
        argv = [a.replace(key, value) for a in argv]
    if "--root" not in argv:
        argv += ["--root", str(root)]
    done = install(*argv)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert (done.stdout, done.stderr.count("\n")) == ("", 1)
    assert list(root.iterdir()) == []


def test_an_old_crl_never_replaces_the_installed_one(
    installed: Path, issued: dict[str, Any], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    shutil.copytree(installed, root)
    crl = root / "etc/mosquitto/paigow-fleet.crl"
    crl.write_text("the newer CRL\n")
    argv = ["--broker-certs", str(issued["broker"]), "--witness-certs", str(issued["witness"]),
            "--root", str(root)]  # fmt: skip
    done = install(*argv)
    assert done.returncode == 0, done.stderr
    assert crl.read_text() == "the newer CRL\n"
    assert "the CRL installed stays" in done.stdout
    assert not (root / DROP_IN).exists() or "--db-file" not in (root / DROP_IN).read_text()
    done = install(*argv, "--crl", str(issued["ca"].ca_dir / "crl.pem"))
    assert done.returncode == 0, done.stderr
    assert crl.read_bytes() == (issued["ca"].ca_dir / "crl.pem").read_bytes()


def test_it_is_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("needs shellcheck")
    done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
