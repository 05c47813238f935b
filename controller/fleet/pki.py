"""The casino's fleet CA: the certificates that let a table, the witness and the broker know
each other on the casino's MQTT broker (README, "The casino's broker").

The broker (mosquitto, ``hw/mosquitto/paigow.conf``) takes a client only with a certificate
this CA issued and not revoked, and takes its certificate's common name as the user its ACL
(``hw/mosquitto/paigow.acl``) knows: a table's CN is its ``[table] name``, the witness's
``witness`` or ``witness-<partition>``. So the names are the security: a table may never be
named like the witness (:func:`table_cn` refuses it), and every CN is a safe MQTT topic level.

P-256 keys, ECDSA with SHA-256, random serial numbers (159 bits, RFC 5280's 20 octets), each
certificate bounded in validity and never outliving the CA. The record of what was issued is
a small JSON index (:class:`Index`), decoded strictly. This module builds and serialises only:
the CLI (``controller/cli/fleet_ca.py``) reads and writes the files.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.errors import PkiError
from controller.fleet.protocol import is_table_name

CA_DAYS_DEFAULT = 3650
CA_DAYS_MAX = 7300  # 20 years: the CA outlives the tables it names
CERT_DAYS_DEFAULT = 730
CERT_DAYS_MAX = 1825  # 5 years: a stolen table's certificate does not work for ever
CRL_DAYS = 365  # the broker refuses every client once its CRL is past its next update
BACKDATE = timedelta(hours=1)  # a client's clock a little behind still takes a new certificate
MAX_NAME_CHARS = 64  # a CN's upper bound (RFC 5280)
MAX_INDEX_BYTES = 4 * 1024 * 1024
MAX_INDEX_ENTRIES = 10_000
MAX_IPS = 8
WITNESS = "witness"  # the witness's CN; a partition's is witness-<name>
INDEX_VERSION = 1


class Role(StrEnum):
    TABLE = "table"  # a client: EKU clientAuth; publishes its own table's topics
    WITNESS = "witness"  # a client: EKU clientAuth; reads every table, writes cosignatures
    BROKER = "broker"  # the server: EKU serverAuth, its names as SANs


# --- names ------------------------------------------------------------------------------------


def is_witness_cn(name: str) -> bool:
    return name == WITNESS or name.startswith(WITNESS + "-")


def table_cn(name: str) -> str:
    """A table's CN: its ``[table] name`` (a safe topic level: no ``/``, ``+`` or ``#``), never
    one the ACL gives the witness's rights to."""
    if not is_table_name(name):
        raise PkiError(f"{name!r} is not a table name (1-32 of A-Z a-z 0-9 - _)")
    if is_witness_cn(name):
        raise PkiError(f"{name!r}: a table may not be named like the witness (witness, witness-*)")
    return name


def witness_cn(partition: str) -> str:
    """``witness``, or ``witness-<partition>`` for one of several witnesses."""
    if partition == "":
        return WITNESS
    if not is_table_name(partition) or len(partition) > MAX_NAME_CHARS - len(WITNESS) - 1:
        raise PkiError(f"{partition!r} is not a witness's name (1-32 of A-Z a-z 0-9 - _)")
    return f"{WITNESS}-{partition}"


def broker_hostname(name: str) -> str:
    """The broker's DNS name, as the tables' ``mqtt_url`` names it (an address goes in --ip)."""
    text = name.lower()
    labels = text.split(".")
    ok = (
        0 < len(text) <= 253
        and text.isascii()
        and all(
            0 < len(label) <= 63
            and all(c.isalnum() or c == "-" for c in label)
            and not label.startswith("-")
            and not label.endswith("-")
            for label in labels
        )
        and not labels[-1].isdigit()
    )
    if not ok:
        raise PkiError(f"{name!r} is not a host name (an address goes in --ip)")
    return text


def broker_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise PkiError(f"{text!r} is not an IP address") from None


# --- certificates -----------------------------------------------------------------------------


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _validity(now: datetime, days: int, low: int, high: int) -> tuple[datetime, datetime]:
    if not low <= days <= high:
        raise PkiError(f"a validity of {days} days: {low} to {high}")
    start = now.astimezone(UTC).replace(microsecond=0)
    return start - BACKDATE, start + timedelta(days=days)


def make_ca(
    name: str, key: ec.EllipticCurvePrivateKey, *, now: datetime, days: int = CA_DAYS_DEFAULT
) -> x509.Certificate:
    """A self-signed CA that may sign end-entity certificates and CRLs only (path length 0)."""
    if not (0 < len(name) <= MAX_NAME_CHARS and name.isprintable() and name.strip() == name):
        raise PkiError(f"the CA's name: 1 to {MAX_NAME_CHARS} printable characters")
    start, end = _validity(now, days, 1, CA_DAYS_MAX)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


@dataclass(frozen=True)
class Request:
    """What to issue: the role, the CN, the broker's names (its CN first) and addresses."""

    role: Role
    name: str
    ips: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...] = ()
    days: int = CERT_DAYS_DEFAULT


def table_request(table: str, days: int = CERT_DAYS_DEFAULT) -> Request:
    return Request(Role.TABLE, table_cn(table), days=days)


def witness_request(partition: str, days: int = CERT_DAYS_DEFAULT) -> Request:
    return Request(Role.WITNESS, witness_cn(partition), days=days)


def broker_request(
    hostname: str, ips: Sequence[str] = (), days: int = CERT_DAYS_DEFAULT
) -> Request:
    if len(ips) > MAX_IPS:
        raise PkiError(f"at most {MAX_IPS} addresses")
    addresses = tuple(dict.fromkeys(broker_address(ip) for ip in ips))
    return Request(Role.BROKER, broker_hostname(hostname), addresses, days)


def issue(
    request: Request,
    public: ec.EllipticCurvePublicKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    now: datetime,
) -> x509.Certificate:
    """An end-entity certificate for ``request``, signed by the CA; never valid past the CA."""
    start, end = _validity(now, request.days, 1, CERT_DAYS_MAX)
    if end > ca_cert.not_valid_after_utc:
        raise PkiError(
            f"{request.days} days would outlive the CA (valid until"
            f" {ca_cert.not_valid_after_utc:%Y-%m-%d}): fewer --days"
        )
    server = request.role is Role.BROKER
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, request.name)]))
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        names: list[x509.GeneralName] = [x509.DNSName(request.name)]
        names += [x509.IPAddress(ip) for ip in request.ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def make_crl(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    revoked: Sequence[tuple[int, datetime]],
    *,
    number: int,
    now: datetime,
    days: int = CRL_DAYS,
) -> x509.CertificateRevocationList:
    """The CA's revocation list (``crlfile`` of the broker's listener): ``revoked`` are
    (serial, when) pairs; ``number`` grows with each list (RFC 5280 cRLNumber)."""
    start = now.astimezone(UTC).replace(microsecond=0)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(start - BACKDATE)
        .next_update(start + timedelta(days=days))
        .add_extension(x509.CRLNumber(number), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    for serial, when in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder()
            .serial_number(serial)
            .revocation_date(when.astimezone(UTC))
            .build()
        )
    return builder.sign(ca_key, hashes.SHA256())


# --- serialisation ----------------------------------------------------------------------------


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8, unencrypted: the file's mode (0600) protects it."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def crl_pem(crl: x509.CertificateRevocationList) -> bytes:
    return crl.public_bytes(serialization.Encoding.PEM)


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def load_ca(
    cert_data: bytes, key_data: bytes
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA's certificate and key, which must be a pair and a CA."""
    try:
        cert = x509.load_pem_x509_certificate(cert_data)
        key = serialization.load_pem_private_key(key_data, password=None)
    except (ValueError, TypeError) as exc:
        raise PkiError(f"not a CA's PEM files: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError("the CA's key is not an EC key")
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if (
        cert.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        != public
    ):
        raise PkiError("the CA's key is not its certificate's")
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        raise PkiError("the CA's certificate is not a CA's") from None
    if not constraints.ca:
        raise PkiError("the CA's certificate is not a CA's")
    return cert, key


# --- the index of what was issued -------------------------------------------------------------


def time_text(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(text: object) -> datetime:
    if not isinstance(text, str) or len(text) != 20:
        raise PkiError(f"index: {text!r} is not a time")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise PkiError(f"index: {text!r} is not a time") from None


def serial_text(serial: int) -> str:
    """A serial number as ``fleet-ca list`` prints it and ``revoke --serial`` takes it: hex."""
    return format(serial, "x")


def parse_serial(text: str) -> int:
    """Hex digits (``fleet-ca list``'s), optionally with openssl's colons or a 0x."""
    digits = text.lower().removeprefix("0x").replace(":", "")
    if not (0 < len(digits) <= 40 and all(c in "0123456789abcdef" for c in digits)):
        raise PkiError(f"{text!r} is not a serial number (hex, as fleet-ca list prints it)")
    return int(digits, 16)


@dataclass(frozen=True)
class Entry:
    """One certificate issued."""

    serial: int
    role: Role
    name: str
    not_before: datetime
    not_after: datetime
    fingerprint: str
    revoked: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "serial": serial_text(self.serial),
            "role": self.role.value,
            "name": self.name,
            "not_before": time_text(self.not_before),
            "not_after": time_text(self.not_after),
            "sha256": self.fingerprint,
            "revoked": None if self.revoked is None else time_text(self.revoked),
        }

    @classmethod
    def from_json(cls, item: object) -> Entry:
        keys = {"serial", "role", "name", "not_before", "not_after", "sha256", "revoked"}
        if not isinstance(item, dict) or set(item) != keys:
            raise PkiError("index: an entry is not one")
        role, name, digest = item["role"], item["name"], item["sha256"]
        if role not in {r.value for r in Role}:
            raise PkiError(f"index: {role!r} is not a role")
        if not isinstance(name, str) or not 0 < len(name) <= 253 or not name.isprintable():
            raise PkiError("index: a bad name")
        if not (
            isinstance(digest, str)
            and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest)
        ):
            raise PkiError("index: a bad fingerprint")
        serial = item["serial"]
        if not isinstance(serial, str):
            raise PkiError("index: a bad serial number")
        revoked = item["revoked"]
        return cls(
            serial=parse_serial(serial),
            role=Role(role),
            name=name,
            not_before=_time(item["not_before"]),
            not_after=_time(item["not_after"]),
            fingerprint=digest,
            revoked=None if revoked is None else _time(revoked),
        )


def entry_of(role: Role, cert: x509.Certificate) -> Entry:
    name = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    return Entry(
        serial=cert.serial_number,
        role=role,
        name=str(name),
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        fingerprint=fingerprint(cert),
    )


@dataclass(frozen=True)
class Index:
    """What the CA issued, and the number of the last CRL it wrote."""

    entries: tuple[Entry, ...] = ()
    crl_number: int = 0

    def find(self, serial: int) -> Entry | None:
        return next((e for e in self.entries if e.serial == serial), None)

    def add(self, entry: Entry) -> Index:
        if len(self.entries) >= MAX_INDEX_ENTRIES:
            raise PkiError(f"the index holds {MAX_INDEX_ENTRIES} certificates: a new CA")
        if self.find(entry.serial) is not None:
            raise PkiError(f"serial {serial_text(entry.serial)} was issued already")
        return replace(self, entries=(*self.entries, entry))

    def revoke(self, serial: int, when: datetime) -> Index:
        entries = tuple(
            replace(e, revoked=when) if e.serial == serial and e.revoked is None else e
            for e in self.entries
        )
        return replace(self, entries=entries)

    def revoked(self) -> list[tuple[int, datetime]]:
        return [(e.serial, e.revoked) for e in self.entries if e.revoked is not None]

    def next_crl(self) -> Index:
        return replace(self, crl_number=self.crl_number + 1)

    def encode(self) -> bytes:
        body = {
            "version": INDEX_VERSION,
            "crl_number": self.crl_number,
            "issued": [e.to_json() for e in self.entries],
        }
        return (json.dumps(body, indent=1) + "\n").encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Index:
        if len(data) > MAX_INDEX_BYTES:
            raise PkiError(f"the index is larger than {MAX_INDEX_BYTES} bytes")
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # [[[[... nests too deep
            raise PkiError("the index is not JSON") from None
        if not isinstance(body, dict) or set(body) != {"version", "crl_number", "issued"}:
            raise PkiError("the index is not a fleet CA's")
        if body["version"] != INDEX_VERSION:
            raise PkiError(f"the index's version {body['version']!r} is not {INDEX_VERSION}")
        number, issued = body["crl_number"], body["issued"]
        if type(number) is not int or not 0 <= number < 2**63:
            raise PkiError("index: a bad crl_number")
        if not isinstance(issued, list) or len(issued) > MAX_INDEX_ENTRIES:
            raise PkiError("index: a bad list of certificates")
        index = cls(crl_number=number)
        for item in issued:
            index = index.add(Entry.from_json(item))
        return index
