"""A real MQTT broker for the fleet tests: Debian's mosquitto on a free loopback port, with its
own config, persistence and log in the test's directory. ``stop``/``start`` restart it on the
same port (its persistence keeps retained messages and queued QoS 1 messages, as a broker in a
casino's server room would), ``kill`` ends it without a word.

``ShippedBroker`` runs it as the casino does: the shipped hw/mosquitto/ config and ACL, TLS
only, with certificates from the product's own fleet CA (``FleetCa``)."""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class TlsFiles:
    """A test CA, the broker's certificate for 127.0.0.1 and a table's client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_tls(directory: Path) -> TlsFiles:
    """A CA made for the test, and the two certificates it signs (P-256 keys)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)

    def issue(
        name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: Any, ca: bool
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(hours=1))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if name == "127.0.0.1":
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(name))])
            builder = builder.add_extension(san, critical=False)
        return builder.sign(signer, hashes.SHA256())

    def save(stem: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        pem = serialization.PrivateFormat.PKCS8
        raw = key.private_bytes(serialization.Encoding.PEM, pem, serialization.NoEncryption())
        (directory / f"{stem}.key").write_bytes(raw)
        (directory / f"{stem}.key").chmod(0o600)
        (directory / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "casino test CA")])
    save("ca", ca_key, issue("casino test CA", ca_key, ca_name, ca_key, True))
    for stem, name in (("server", "127.0.0.1"), ("client", "table-1")):
        key = ec.generate_private_key(ec.SECP256R1())
        save(stem, key, issue(name, key, ca_name, ca_key, False))
    d = directory
    return TlsFiles(
        d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key"
    )


class Broker:
    """``tls``: also an mqtts listener (``tls_url``) that wants a client certificate from the
    test CA and a user in ``password_file`` (mosquitto_passwd's format); the plain listener
    stays open to anyone, for the test's own subscribers."""

    def __init__(
        self,
        directory: Path,
        port: int | None = None,
        *,
        tls: TlsFiles | None = None,
        password_file: Path | None = None,
    ) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.tls = tls
        self.password_file = password_file
        self.tls_port = free_port() if tls is not None else 0
        self.process: subprocess.Popen[bytes] | None = None
        self.config = directory / "mosquitto.conf"
        self.log = directory / "mosquitto.log"

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def tls_url(self) -> str:
        return f"mqtts://127.0.0.1:{self.tls_port}"

    def _tls_listener(self) -> str:
        if self.tls is None:
            return ""
        lines = [
            f"listener {self.tls_port} 127.0.0.1",
            f"cafile {self.tls.ca}",
            f"certfile {self.tls.server_cert}",
            f"keyfile {self.tls.server_key}",
            "require_certificate true",
            "allow_anonymous false",
        ]
        if self.password_file is not None:
            lines.append(f"password_file {self.password_file}")
        return "\n".join(lines) + "\n"

    def _write_config(self) -> None:
        self.config.write_text(
            # as root it would change to the mosquitto user, who may not write here
            f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"
            + ("per_listener_settings true\n" if self.tls is not None else "")
            + f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "set_tcp_nodelay true\n"  # docs/casino-it.md: a casino's broker sets it
            "persistence true\n"
            f"persistence_location {self.directory}/\n"
            "autosave_interval 1\n"
            "max_queued_messages 0\n"  # no limit: a table's backlog is never dropped
            f"log_dest file {self.log}\n"
            # information: its "running" line, which start() waits for
            "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n"
            + self._tls_listener()
        )

    def start(self, timeout_s: float = 60.0) -> None:
        """Until it listens and has said it runs: its signal handlers are set only then, and a
        SIGHUP (install_crl) before them would end it (a bound a loaded machine never meets)."""
        self._write_config()
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mosquitto exited {self.process.returncode}: {self.tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                if " running" in self.log_text():
                    return
            time.sleep(0.02)
        raise RuntimeError(f"mosquitto did not listen on {self.port} and run: {self.tail()}")

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """An orderly stop (SIGTERM: it saves its persistence)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def tail(self, lines: int = 10) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


# --- the casino's broker as shipped: hw/mosquitto/, certificates from fleet-ca ----------------

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "hw" / "mosquitto"
SHIPPED_PORT = 8883
# Each file paigow.conf names where hw/install-witness.sh installs it, and its name here.
INSTALLED = {
    "/etc/mosquitto/ca_certificates/paigow-fleet-ca.pem": "ca.pem",
    "/etc/mosquitto/certs/paigow-broker.pem": "broker.pem",
    "/etc/mosquitto/certs/paigow-broker.key": "broker.key",
    "/etc/mosquitto/paigow-fleet.crl": "crl.pem",
    "/etc/mosquitto/paigow.acl": "paigow.acl",
}


@dataclass(frozen=True)
class ClientFiles:
    """What a client needs for the broker's TLS listener: its certificate and key, the CA."""

    name: str
    cert: Path
    key: Path
    ca: Path
    serial: str


class FleetCa:
    """A fleet CA made by ``paigow-controller fleet-ca`` (run in this process), as the casino's
    IT makes one: init, then a certificate for each client and one for the broker."""

    def __init__(self, directory: Path, name: str = "casino test fleet CA") -> None:
        self.directory = directory
        self.ca_dir = directory / "ca"
        self._issued = 0
        self.fleet_ca("init", "--dir", str(self.ca_dir), "--name", name)

    def fleet_ca(self, *argv: str) -> dict[str, Any]:
        from controller.cli import main

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["fleet-ca", *argv])
        assert code == 0, (argv, out.getvalue())
        doc: dict[str, Any] = json.loads(out.getvalue())
        return doc

    def _issue(self, *argv: str) -> ClientFiles:
        self._issued += 1  # a directory each: the same name may be issued again
        out = self.directory / "issued" / f"{self._issued}-{argv[-1].strip('-')}"
        doc = self.fleet_ca("issue", "--dir", str(self.ca_dir), *argv, "--out", str(out))
        return ClientFiles(
            doc["name"], Path(doc["cert"]), Path(doc["key"]), out / "ca.pem", doc["serial"]
        )

    def table(self, name: str) -> ClientFiles:
        return self._issue("--table", name)

    def witness(self, partition: str = "") -> ClientFiles:
        return self._issue("--witness", *([partition] if partition else []))

    def broker(self) -> ClientFiles:
        """For 127.0.0.1, where the tests' clients find it (and localhost)."""
        return self._issue("--broker", "localhost", "--ip", "127.0.0.1")

    def revoke(self, files: ClientFiles) -> Path:
        """Revoke ``files``' certificate: the CA's new CRL."""
        self.fleet_ca("revoke", "--dir", str(self.ca_dir), "--serial", files.serial)
        return self.ca_dir / "crl.pem"


def shipped_config(port: int, files: dict[str, Path]) -> str:
    """hw/mosquitto/paigow.conf as a test runs it: the listener on ``port`` of the loopback
    instead of 8883 on every address, and each installed path (INSTALLED) the test's file.
    Nothing else changes; a path the shipped config no longer names fails here."""
    text = (SHIPPED / "paigow.conf").read_text()
    listener = f"\nlistener {SHIPPED_PORT}\n"
    assert text.count("\nlistener ") == 1, "one listener, the TLS one"
    assert listener in text
    text = text.replace(listener, f"\nlistener {port} 127.0.0.1\n")
    for installed, local in files.items():
        assert installed in text, f"paigow.conf no longer names {installed}"
        text = text.replace(installed, str(local))
    return text


class ShippedBroker(Broker):
    """Debian's mosquitto as the casino runs it: a main config as Debian's (persistence in
    the test's directory, the log, ``include_dir`` of conf.d) and hw/mosquitto/paigow.conf in
    conf.d with the shipped ACL (or ``acl``, an installed one) plus ``extra_acl`` (a test's
    observer), its certificates issued by ``ca``. Its only listener is TLS (``url``)."""

    def __init__(
        self,
        directory: Path,
        ca: FleetCa,
        *,
        acl: Path | None = None,
        extra_acl: str = "",
    ) -> None:
        super().__init__(directory)
        self.ca = ca
        server = ca.broker()
        self.files = {
            "ca.pem": server.ca,
            "broker.pem": server.cert,
            "broker.key": server.key,
            "crl.pem": directory / "paigow-fleet.crl",
            "paigow.acl": directory / "paigow.acl",
        }
        shutil.copyfile(ca.ca_dir / "crl.pem", self.files["crl.pem"])
        acl_text = (acl or SHIPPED / "paigow.acl").read_text()
        self.files["paigow.acl"].write_text(acl_text + ("\n" + extra_acl if extra_acl else ""))
        self.conf_d = directory / "conf.d"
        self.conf_d.mkdir(exist_ok=True)

    @property
    def url(self) -> str:
        return f"mqtts://127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        local = {installed: self.files[name] for installed, name in INSTALLED.items()}
        (self.conf_d / "paigow.conf").write_text(shipped_config(self.port, local))
        self.config.write_text(
            f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"
            "persistence true\n"
            f"persistence_location {self.directory}/\n"
            f"log_dest file {self.log}\n"
            "log_type all\n"
            f"include_dir {self.conf_d}\n"
        )

    def install_crl(self, crl: Path) -> None:
        """The CA's new CRL in the broker's crlfile, and SIGHUP (systemctl reload mosquitto)."""
        shutil.copyfile(crl, self.files["crl.pem"])
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)
