"""A real MQTT broker for the fleet tests: Debian's mosquitto on a free loopback port, with its
own config, persistence and log in the test's directory. ``stop``/``start`` restart it on the
same port (its persistence keeps retained messages and queued QoS 1 messages, as a broker in a
casino's server room would), ``kill`` ends it without a word."""

from __future__ import annotations

import contextlib
import ipaddress
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

    def start(self, timeout_s: float = 10.0) -> None:
        self.config.write_text(
            # as root it would change to the mosquitto user, who may not write here
            f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"
            + ("per_listener_settings true\n" if self.tls is not None else "")
            + f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "set_tcp_nodelay true\n"  # as README, "The witness", advises for a casino's broker
            "persistence true\n"
            f"persistence_location {self.directory}/\n"
            "autosave_interval 1\n"
            "max_queued_messages 0\n"  # no limit: a table's backlog is never dropped
            f"log_dest file {self.log}\n"
            "log_type error\nlog_type warning\nlog_type notice\n" + self._tls_listener()
        )
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
                return
            time.sleep(0.02)
        raise RuntimeError(f"mosquitto did not listen on {self.port}: {self.tail()}")

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
