"""The fleet CA (controller/fleet/pki.py) and its command, ``fleet-ca``: what it issues, what it
refuses, and that every bad argument is one line and exit 2. (That mosquitto takes what it
issues, and refuses what it revoked: tests/e2e/test_fleet_broker_acl.py.)"""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.cli import main
from controller.files import PidLock
from controller.fleet import pki

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(["fleet-ca", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else None), err


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def cn(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def eku(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


# --- the module -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = pki.new_key()
    return pki.make_ca("Casino Example fleet CA", key, now=NOW, days=3650), key


def test_the_ca_signs_certificates_and_crls_only(ca: Any) -> None:
    cert, key = ca
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert (constraints.critical, constraints.value.ca, constraints.value.path_length) == (
        True,
        True,
        0,
    )
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert (usage.key_cert_sign, usage.crl_sign, usage.digital_signature) == (True, True, False)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]
    assert pki.load_ca(pki.cert_pem(cert), pki.key_pem(key))[0] == cert
    other = pki.new_key()
    with pytest.raises(pki.PkiError, match="not its certificate's"):
        pki.load_ca(pki.cert_pem(cert), pki.key_pem(other))


def test_a_table_a_witness_and_the_broker(ca: Any) -> None:
    ca_cert, ca_key = ca
    issued = {}
    for request in (
        pki.table_request("table-7"),
        pki.witness_request(""),
        pki.witness_request("east"),
        pki.broker_request("Broker.Casino", ["127.0.0.1", "fd00::7", "127.0.0.1"]),
    ):
        key = pki.new_key()
        cert = pki.issue(request, key.public_key(), ca_cert, ca_key, now=NOW)
        cert.verify_directly_issued_by(ca_cert)
        issued[cn(cert)] = cert
    assert set(issued) == {"table-7", "witness", "witness-east", "broker.casino"}
    for name in ("table-7", "witness", "witness-east"):
        assert eku(issued[name]) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    broker = issued["broker.casino"]
    assert eku(broker) == [ExtendedKeyUsageOID.SERVER_AUTH]
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["broker.casino"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == [
        "127.0.0.1",
        "fd00::7",
    ]
    for cert in issued.values():
        assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
        assert cert.not_valid_before_utc < NOW
        assert cert.not_valid_after_utc == NOW + timedelta(days=pki.CERT_DAYS_DEFAULT)
    serials = {cert.serial_number for cert in issued.values()}
    assert len(serials) == 4
    assert all(s.bit_length() > 128 for s in serials)  # random, not counted


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: pki.table_request("witness"), "named like the witness"),
        (lambda: pki.table_request("witness-east"), "named like the witness"),
        (lambda: pki.table_request("table/7"), "not a table name"),
        (lambda: pki.table_request("+"), "not a table name"),
        (lambda: pki.table_request("#"), "not a table name"),
        (lambda: pki.table_request("t" * 33), "not a table name"),
        (lambda: pki.witness_request("a b"), "not a witness's name"),
        (lambda: pki.broker_request("10.0.0.1"), "an address goes in --ip"),
        (lambda: pki.broker_request("-x.casino"), "not a host name"),
        (lambda: pki.broker_request("a..b"), "not a host name"),
        (lambda: pki.broker_request("broker.casino", ["broker"]), "not an IP address"),
        (lambda: pki.broker_request("b", [f"10.0.0.{i}" for i in range(9)]), "at most 8"),
    ],
)
def test_names_that_would_fool_the_acl_are_refused(make: Any, message: str) -> None:
    with pytest.raises(pki.PkiError, match=message):
        make()


def test_validity_is_bounded_and_never_outlives_the_ca(ca: Any) -> None:
    ca_cert, ca_key = ca
    public = pki.new_key().public_key()
    for days in (0, pki.CERT_DAYS_MAX + 1):
        with pytest.raises(pki.PkiError, match="days"):
            pki.issue(pki.table_request("t", days), public, ca_cert, ca_key, now=NOW)
    late = NOW + timedelta(days=3650 - 100)
    with pytest.raises(pki.PkiError, match="outlive the CA"):
        pki.issue(pki.table_request("t", 200), public, ca_cert, ca_key, now=late)
    with pytest.raises(pki.PkiError, match="days"):
        pki.make_ca("x", pki.new_key(), now=NOW, days=pki.CA_DAYS_MAX + 1)


def test_the_crl_names_the_revoked_serials(ca: Any) -> None:
    ca_cert, ca_key = ca
    crl = pki.make_crl(ca_cert, ca_key, [(12345, NOW)], number=7, now=NOW)
    assert crl.is_signature_valid(ca_cert.public_key())  # type: ignore[arg-type]
    assert crl.get_revoked_certificate_by_serial_number(12345) is not None
    assert crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number == 7
    assert crl.next_update_utc == NOW + timedelta(days=pki.CRL_DAYS)


def test_the_index_is_read_strictly() -> None:
    entry = pki.Entry(0xABC, pki.Role.TABLE, "table-7", NOW, NOW, "0" * 64)
    index = pki.Index().add(entry).revoke(0xABC, NOW).next_crl()
    assert pki.Index.decode(index.encode()) == index
    with pytest.raises(pki.PkiError, match="issued already"):
        index.add(entry)
    good = json.loads(index.encode())
    bad_docs: list[Any] = [
        b"",
        b"\xff",
        b"[]",
        {**good, "extra": 1},
        {**good, "version": 2},
        {**good, "crl_number": -1},
        {**good, "crl_number": True},
        {**good, "issued": {}},
        {**good, "issued": [{**good["issued"][0], "role": "king"}]},
        {**good, "issued": [{**good["issued"][0], "serial": "xyz"}]},
        {**good, "issued": [{**good["issued"][0], "sha256": "0"}]},
        {**good, "issued": [{**good["issued"][0], "not_after": "yesterday"}]},
        {**good, "issued": [good["issued"][0], good["issued"][0]]},
        b"[" * 100_000,
    ]
    for doc in bad_docs:
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        with pytest.raises(pki.PkiError):
            pki.Index.decode(data)
    with pytest.raises(pki.PkiError, match="larger"):
        pki.Index.decode(b" " * (pki.MAX_INDEX_BYTES + 1))


def test_serial_numbers_as_list_prints_them() -> None:
    assert pki.parse_serial(pki.serial_text(0x5F3A01)) == 0x5F3A01
    assert pki.parse_serial("5F:3A:01") == pki.parse_serial("0x5f3a01") == 0x5F3A01
    for bad in ("", "xyz", "1" * 41, "-1", "٣"):
        with pytest.raises(pki.PkiError):
            pki.parse_serial(bad)


# --- the command ------------------------------------------------------------------------------


def test_init_makes_the_ca_and_never_replaces_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = tmp_path / "ca"
    code, doc, err = run(capsys, "init", "--dir", str(ca), "--name", "Casino Example fleet CA")
    assert (code, err) == (0, "")
    assert doc["name"] == "Casino Example fleet CA"
    assert doc["crl_number"] == 1
    assert (mode(ca), mode(ca / "ca.key"), mode(ca / "ca.pem")) == (0o700, 0o600, 0o644)
    assert mode(ca / "index.json") == 0o600
    cert = x509.load_pem_x509_certificate((ca / "ca.pem").read_bytes())
    assert cn(cert) == "Casino Example fleet CA"
    assert list(x509.load_pem_x509_crl((ca / "crl.pem").read_bytes())) == []
    key = (ca / "ca.key").read_bytes()
    code, doc, err = run(capsys, "init", "--dir", str(ca))
    assert (code, doc, err.count("\n")) == (2, None, 1)
    assert "never replaced" in err
    assert (ca / "ca.key").read_bytes() == key


@pytest.fixture
def ca_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    directory = tmp_path / "ca"
    assert run(capsys, "init", "--dir", str(directory))[0] == 0
    return directory


def test_issue_writes_the_certificate_its_key_and_the_ca(
    ca_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, table, err = run(
        capsys, "issue", "--dir", str(ca_dir), "--table", "table-7", "--out", str(out)
    )
    assert (code, err) == (0, "")
    assert (table["role"], table["name"], table["revoked"]) == ("table", "table-7", None)
    assert mode(out / "table-7.key") == 0o600
    cert = x509.load_pem_x509_certificate((out / "table-7.pem").read_bytes())
    assert (cn(cert), format(cert.serial_number, "x")) == ("table-7", table["serial"])
    assert (out / "ca.pem").read_bytes() == (ca_dir / "ca.pem").read_bytes()
    # the same OUTDIR takes another client (its ca.pem is this CA's)
    code, witness, _ = run(capsys, "issue", "--dir", str(ca_dir), "--witness", "--out", str(out))
    assert (code, witness["name"]) == (0, "witness")
    code, east, _ = run(
        capsys, "issue", "--dir", str(ca_dir), "--witness", "east", "--out", str(out)
    )
    assert (code, east["name"]) == (0, "witness-east")
    broker_out = tmp_path / "broker"
    code, broker, _ = run(
        capsys, "issue", "--dir", str(ca_dir), "--broker", "broker.casino", "--ip", "127.0.0.1",
        "--days", "30", "--out", str(broker_out),
    )  # fmt: skip
    assert (code, broker["name"], broker["role"]) == (0, "broker.casino", "broker")
    assert {p.name for p in broker_out.iterdir()} == {
        "broker.pem",
        "broker.key",
        "ca.pem",
        "crl.pem",
    }
    cert = x509.load_pem_x509_certificate((broker_out / "broker.pem").read_bytes())
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=30, hours=1)

    code, listed, _ = run(capsys, "list", "--dir", str(ca_dir))
    assert code == 0
    assert [e["name"] for e in listed["issued"]] == [
        "table-7",
        "witness",
        "witness-east",
        "broker.casino",
    ]
    assert listed["issued"][0]["sha256"] == table["sha256"]
    assert listed["crl"]["revoked_count"] == 0

    # nothing is ever replaced: the same table again, or an OUTDIR of another CA
    key = (out / "table-7.key").read_bytes()
    code, doc, err = run(
        capsys, "issue", "--dir", str(ca_dir), "--table", "table-7", "--out", str(out)
    )
    assert (code, doc, "never replaced" in err, err.count("\n")) == (2, None, True, 1)
    assert (out / "table-7.key").read_bytes() == key
    other = tmp_path / "other"
    assert run(capsys, "init", "--dir", str(other))[0] == 0
    code, _, err = run(capsys, "issue", "--dir", str(other), "--table", "t2", "--out", str(out))
    assert (code, "another CA's" in err) == (2, True)
    assert len(run(capsys, "list", "--dir", str(other))[1]["issued"]) == 0  # nothing recorded


def test_revoke_writes_the_crl(
    ca_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    _, issued, _ = run(
        capsys, "issue", "--dir", str(ca_dir), "--table", "table-7", "--out", str(out)
    )
    code, revoked, err = run(capsys, "revoke", "--dir", str(ca_dir), "--serial", issued["serial"])
    assert (code, err) == (0, "")
    assert (revoked["name"], revoked["already_revoked"], revoked["crl_number"]) == (
        "table-7",
        False,
        2,
    )
    crl = x509.load_pem_x509_crl((ca_dir / "crl.pem").read_bytes())
    assert crl.get_revoked_certificate_by_serial_number(int(issued["serial"], 16)) is not None
    code, again, _ = run(capsys, "revoke", "--dir", str(ca_dir), "--serial", issued["serial"])
    assert (code, again["already_revoked"], again["revoked"]) == (0, True, revoked["revoked"])
    code, listed, _ = run(capsys, "list", "--dir", str(ca_dir))
    assert listed["issued"][0]["revoked"] == revoked["revoked"]
    assert listed["crl"]["crl_number"] == 3
    code, renewed, _ = run(capsys, "crl", "--dir", str(ca_dir))
    assert (code, renewed["crl_number"], renewed["revoked_count"]) == (0, 4, 1)


def test_one_fleet_ca_at_a_time(
    ca_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = PidLock.acquire(ca_dir / ".lock")
    try:
        code, _, err = run(
            capsys, "issue", "--dir", str(ca_dir), "--table", "t", "--out", str(tmp_path / "o")
        )
    finally:
        lock.release()
    assert (code, "another fleet-ca" in err) == (2, True)


@pytest.mark.parametrize(
    "argv",
    [
        ["issue", "--dir", "{ca}", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t"],
        ["issue", "--dir", "{ca}", "--table", "witness", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "a/b", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t", "--witness", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t", "--ip", "10.0.0.1", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--broker", "b.casino", "--ip", "x", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t", "--days", "0", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t", "--days", "1826", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t", "--days", "٣", "--out", "{out}"],
        ["issue", "--dir", "{ca}", "--table", "t", "--out", "{file}"],
        ["issue", "--dir", "{missing}", "--table", "t", "--out", "{out}"],
        ["issue", "--dir", "{file}", "--table", "t", "--out", "{out}"],
        ["init", "--dir", "{new}", "--days", "7301"],
        ["init", "--dir", "{new}", "--name", ""],
        ["init", "--dir", "{new}", "--name", "a\nb"],
        ["init", "--dir", "{new}", "--table", "t"],
        ["list", "--dir", "{ca}", "--serial", "1"],
        ["revoke", "--dir", "{ca}"],
        ["revoke", "--dir", "{ca}", "--serial", "xyz"],
        ["revoke", "--dir", "{ca}", "--serial", "abc"],
        ["crl", "--dir", "{missing}"],
        ["sign", "--dir", "{ca}"],
        [],
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2(
    argv: list[str], ca_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    places = {
        "{ca}": str(ca_dir),
        "{out}": str(tmp_path / "out"),
        "{missing}": str(tmp_path / "missing"),
        "{file}": str(tmp_path / "file"),
        "{new}": str(tmp_path / "new"),
    }
    code, doc, err = run(capsys, *[places.get(a, a) for a in argv])
    assert (code, doc, err.count("\n")) == (2, None, 1), err
    assert err.startswith("paigow-controller: ")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_corrupt_index_is_a_bad_argument(
    ca_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (ca_dir / "index.json").write_text("{}")
    code, _, err = run(capsys, "list", "--dir", str(ca_dir))
    assert (code, err.count("\n"), "not a fleet CA's" in err) == (2, 1, True)
