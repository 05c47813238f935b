"""``fleet-ca``: the casino's fleet CA (controller/fleet/pki.py), in a directory of its own:

    DIR/ca.key      the CA's private key (0600): keep DIR off the network, on the IT office's
                    machine or a USB stick in the safe
    DIR/ca.pem      its certificate (the broker's cafile, every client's ca_file)
    DIR/crl.pem     its revocation list (the broker's crlfile)
    DIR/index.json  what it issued (fleet-ca list)

``issue`` writes into ``--out`` the certificate and its key (0600), named by the common name
(``table-7.pem``, ``witness.pem``; the broker's ``broker.pem``), ``ca.pem`` and, for the
broker, ``crl.pem``. Nothing is ever replaced but the CRL and the index, each written whole.

Exit codes: 0 done; 1 a file could not be written; 2 a bad argument, a directory that is not a
fleet CA's, a file that would be replaced (one line, never a traceback).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from controller.cli.args import describe, number_argument, path_argument, print_json
from controller.core.digits import quoted
from controller.errors import ControllerError, UsageError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    from controller.fleet.pki import Index, Request

CA_KEY, CA_CERT, CRL, INDEX, LOCK = "ca.key", "ca.pem", "crl.pem", "index.json", ".lock"
MAX_PEM_BYTES = 64 * 1024
DEFAULT_NAME = "paigow fleet CA"
ACTIONS = ("init", "issue", "list", "revoke", "crl")

_EXAMPLES = """\
examples:
  paigow-controller fleet-ca init --dir /media/ca --name "Casino Example fleet CA"
  paigow-controller fleet-ca issue --dir /media/ca --broker broker.casino --out broker/
  paigow-controller fleet-ca issue --dir /media/ca --witness --out witness/
  paigow-controller fleet-ca issue --dir /media/ca --table table-7 --out table-7/
  paigow-controller fleet-ca list --dir /media/ca
  paigow-controller fleet-ca revoke --dir /media/ca --serial 5f3a...
  paigow-controller fleet-ca crl --dir /media/ca        # a new CRL before the old one expires"""


def fleet_ca_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The casino's fleet CA, for the MQTT broker's TLS listener (hw/mosquitto/paigow.conf):"
        " the broker takes a client only with a certificate of this CA, not revoked, and its"
        " ACL knows the client by the certificate's common name: a table's is its [table]"
        " name, the witness's 'witness' (or 'witness-NAME', one of several)."
        "\n\n"
        "init makes the CA in DIR (its key 0600, its certificate, an empty CRL; never over"
        " one). issue makes a P-256 key and a certificate for one --table, --witness or"
        " --broker (with its --ip addresses) in OUTDIR, valid --days (default 730, at most"
        " 1825). list prints what was issued (JSON); revoke adds a certificate to the CRL and"
        " writes it (DIR/crl.pem: copy it to the broker and restart mosquitto); crl writes the"
        " CRL again, valid another year: the broker refuses every client once it has expired."
        "\n\n"
        "Exit codes: 0 done, 1 a file could not be written, 2 a bad argument.",
        _EXAMPLES,
    )
    p.add_argument("action", choices=ACTIONS, metavar="{" + ",".join(ACTIONS) + "}")
    p.add_argument("--dir", required=True, type=path_argument, help="the CA's directory")
    p.add_argument("--name", help=f"init: the CA's name (default {DEFAULT_NAME!r})")
    p.add_argument("--out", type=path_argument, metavar="OUTDIR", help="issue: where to write")
    whom = p.add_mutually_exclusive_group()
    whom.add_argument("--table", metavar="TABLE", help="issue: a table's client certificate")
    whom.add_argument(
        "--witness",
        nargs="?",
        const="",
        metavar="NAME",
        help="issue: the witness's client certificate (CN witness, or witness-NAME)",
    )
    whom.add_argument("--broker", metavar="HOSTNAME", help="issue: the broker's server certificate")
    p.add_argument(
        "--ip",
        action="append",
        default=[],
        metavar="ADDR",
        help="issue --broker: an address the clients use (repeat for more)",
    )
    p.add_argument(
        "--days",
        type=number_argument,
        help="init: the CA's validity (default 3650, at most 7300); issue: the certificate's"
        " (default 730, at most 1825)",
    )
    p.add_argument(
        "--serial", help="revoke: the certificate's serial number (hex, as list prints it)"
    )


def _refuse_unused(args: argparse.Namespace) -> None:
    """An option another action takes is a mistake worth saying, not something to ignore."""
    used = {
        "init": {"name", "days"},
        "issue": {"out", "table", "witness", "broker", "ip", "days"},
        "list": set(),
        "revoke": {"serial"},
        "crl": set(),
    }[args.action]
    given = {
        "name": args.name is not None,
        "out": args.out is not None,
        "table": args.table is not None,
        "witness": args.witness is not None,
        "broker": args.broker is not None,
        "ip": bool(args.ip),
        "days": args.days is not None,
        "serial": args.serial is not None,
    }
    for option, present in given.items():
        if present and option not in used:
            raise UsageError(f"--{option} is not an option of fleet-ca {args.action}")
    if args.ip and args.broker is None:
        raise UsageError("--ip goes with --broker")


def fleet_ca(args: argparse.Namespace) -> int:
    from controller.errors import PkiError

    _refuse_unused(args)
    try:
        return {
            "init": _init,
            "issue": _issue,
            "list": _list,
            "revoke": _revoke,
            "crl": _crl,
        }[args.action](args)
    except PkiError as exc:
        raise UsageError(str(exc)) from None


# --- files ------------------------------------------------------------------------------------


def _read(path: Path, limit: int = MAX_PEM_BYTES) -> bytes:
    from controller.errors import TooLarge
    from controller.files import read_capped

    try:
        return read_capped(path, limit)
    except FileNotFoundError:
        raise UsageError(f"{quoted(str(path))} is missing: not a fleet CA's directory") from None
    except TooLarge:
        raise UsageError(f"{quoted(str(path))} is larger than {limit} bytes") from None
    except OSError as exc:
        raise UsageError(f"{quoted(str(path))}: {exc.strerror or exc}") from None


def _write(path: Path, data: bytes, mode: int, *, replace: bool) -> None:
    from controller.files import write_new

    try:
        write_new(path, data, mode, replace=replace)
    except FileExistsError:
        raise UsageError(f"{quoted(str(path))} exists: it is never replaced") from None
    except OSError as exc:
        raise ControllerError(f"cannot write {path}: {exc.strerror or exc}") from None


def _directory(text: str, option: str) -> Path:
    path = Path(text)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{option} {quoted(text)} exists and is not a directory") from None
    except OSError as exc:
        raise UsageError(f"{option} {quoted(text)}: {exc.strerror or exc}") from None
    return path


class _Ca:
    """The CA's directory, locked while a command changes it (one fleet-ca at a time)."""

    def __init__(self, directory: Path) -> None:
        from controller.errors import LockHeld
        from controller.files import PidLock

        if not (directory / CA_KEY).is_file():
            raise UsageError(f"--dir {quoted(str(directory))} is not a fleet CA's (no {CA_KEY})")
        try:
            self._lock = PidLock.acquire(directory / LOCK)
        except LockHeld as exc:
            raise UsageError(f"another fleet-ca works on {directory}: {exc}") from None
        except OSError as exc:
            raise UsageError(f"--dir {quoted(str(directory))}: {exc.strerror or exc}") from None
        self.directory = directory

    def __enter__(self) -> _Ca:
        return self

    def __exit__(self, *_: object) -> None:
        self._lock.release()

    def load(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, Index]:
        from controller.errors import PkiError
        from controller.fleet.pki import MAX_INDEX_BYTES, Index, load_ca

        cert_data, key_data = _read(self.directory / CA_CERT), _read(self.directory / CA_KEY)
        try:
            cert, key = load_ca(cert_data, key_data)
            index = Index.decode(_read(self.directory / INDEX, MAX_INDEX_BYTES))
        except PkiError as exc:
            raise UsageError(f"--dir {quoted(str(self.directory))}: {exc}") from None
        return cert, key, index

    def save_index(self, index: Index) -> None:
        _write(self.directory / INDEX, index.encode(), 0o600, replace=True)

    def write_crl(
        self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, index: Index, now: datetime
    ) -> tuple[Index, x509.CertificateRevocationList]:
        """A new CRL (its number the next), recorded in the index first."""
        from controller.fleet.pki import crl_pem, make_crl

        index = index.next_crl()
        crl = make_crl(cert, key, index.revoked(), number=index.crl_number, now=now)
        self.save_index(index)
        _write(self.directory / CRL, crl_pem(crl), 0o644, replace=True)
        return index, crl


def _days(args: argparse.Namespace, default: int, high: int) -> int:
    from controller.cli.args import whole_number

    return default if args.days is None else whole_number(args.days, "--days", 1, high)


def _now() -> datetime:
    return datetime.now(UTC)


def _crl_json(crl: x509.CertificateRevocationList, path: Path) -> dict[str, object]:
    from cryptography import x509

    from controller.fleet.pki import time_text

    try:
        number: int | None = crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number
    except x509.ExtensionNotFound:
        number = None
    next_update = crl.next_update_utc
    return {
        "crl": str(path),
        "crl_number": number,
        "revoked_count": len(list(crl)),
        "next_update": None if next_update is None else time_text(next_update),
    }


# --- the actions ------------------------------------------------------------------------------


def _init(args: argparse.Namespace) -> int:
    from controller.fleet.pki import (
        CA_DAYS_DEFAULT,
        CA_DAYS_MAX,
        Index,
        cert_pem,
        fingerprint,
        key_pem,
        make_ca,
        new_key,
        time_text,
    )

    name = DEFAULT_NAME if args.name is None else args.name
    days = _days(args, CA_DAYS_DEFAULT, CA_DAYS_MAX)
    directory = Path(args.dir)
    for existing in (CA_KEY, CA_CERT, INDEX):
        if (directory / existing).exists():
            raise UsageError(f"{quoted(str(directory / existing))} exists: a CA is never replaced")
    now = _now()
    key = new_key()
    cert = make_ca(name, key, now=now, days=days)
    directory = _directory(args.dir, "--dir")
    _write(directory / CA_KEY, key_pem(key), 0o600, replace=False)
    _write(directory / CA_CERT, cert_pem(cert), 0o644, replace=False)
    _write(directory / INDEX, Index().encode(), 0o600, replace=False)
    with _Ca(directory) as ca:
        _, crl = ca.write_crl(cert, key, Index(), now)
    print_json(
        {
            "ca": str(directory / CA_CERT),
            "key": str(directory / CA_KEY),
            "name": name,
            "not_after": time_text(cert.not_valid_after_utc),
            "sha256": fingerprint(cert),
            **_crl_json(crl, directory / CRL),
        }
    )
    return 0


def _request_of(args: argparse.Namespace) -> tuple[Request, str]:
    """The request, and the file stem its certificate and key are written under."""
    from controller.fleet.pki import (
        CERT_DAYS_DEFAULT,
        CERT_DAYS_MAX,
        broker_request,
        table_request,
        witness_request,
    )

    days = _days(args, CERT_DAYS_DEFAULT, CERT_DAYS_MAX)
    if args.table is not None:
        request = table_request(args.table, days)
        return request, request.name
    if args.witness is not None:
        request = witness_request(args.witness, days)
        return request, request.name
    if args.broker is not None:
        return broker_request(args.broker, args.ip, days), "broker"
    raise UsageError("fleet-ca issue needs one of --table, --witness or --broker")


def _issue(args: argparse.Namespace) -> int:
    from controller.fleet.pki import (
        Role,
        cert_pem,
        entry_of,
        issue,
        key_pem,
        new_key,
    )

    request, stem = _request_of(args)
    if args.out is None:
        raise UsageError("fleet-ca issue needs --out OUTDIR")
    with _Ca(Path(args.dir)) as ca:
        ca_cert, ca_key, index = ca.load()
        out = _directory(args.out, "--out")
        cert_path, key_path, ca_copy = out / f"{stem}.pem", out / f"{stem}.key", out / CA_CERT
        for path in (cert_path, key_path):
            if path.exists():
                raise UsageError(f"{quoted(str(path))} exists: it is never replaced")
        same_ca = ca_copy.exists() and _read(ca_copy) == cert_pem(ca_cert)
        if ca_copy.exists() and not same_ca:
            raise UsageError(f"{quoted(str(ca_copy))} is another CA's: a new --out")
        now = _now()
        key = new_key()
        cert = issue(request, key.public_key(), ca_cert, ca_key, now=now)
        entry = entry_of(request.role, cert)
        ca.save_index(index.add(entry))  # recorded before it leaves the CA
        _write(key_path, key_pem(key), 0o600, replace=False)
        _write(cert_path, cert_pem(cert), 0o644, replace=False)
        if not same_ca:
            _write(ca_copy, cert_pem(ca_cert), 0o644, replace=False)
        written = {"cert": str(cert_path), "key": str(key_path), "ca": str(ca_copy)}
        if request.role is Role.BROKER:  # the broker's crlfile: the CA's current one
            _write(out / CRL, _read(ca.directory / CRL), 0o644, replace=True)
            written["crl"] = str(out / CRL)
    print_json({**entry.to_json(), **written})
    return 0


def _list(args: argparse.Namespace) -> int:
    from cryptography import x509

    from controller.fleet.pki import fingerprint, time_text

    with _Ca(Path(args.dir)) as ca:
        cert, _, index = ca.load()
        try:
            crl = x509.load_pem_x509_crl(_read(ca.directory / CRL))
        except ValueError:
            raise UsageError(f"{quoted(str(ca.directory / CRL))} is not a CRL") from None
    print_json(
        {
            "ca": {
                "name": cert.subject.rfc4514_string(),
                "not_after": time_text(cert.not_valid_after_utc),
                "sha256": fingerprint(cert),
            },
            "crl": _crl_json(crl, ca.directory / CRL),
            "issued": [e.to_json() for e in index.entries],
        }
    )
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from controller.fleet.pki import parse_serial, serial_text, time_text

    if args.serial is None:
        raise UsageError("fleet-ca revoke needs --serial N (fleet-ca list prints them)")
    serial = parse_serial(args.serial)
    with _Ca(Path(args.dir)) as ca:
        cert, key, index = ca.load()
        entry = index.find(serial)
        if entry is None:
            raise UsageError(f"--serial {serial_text(serial)}: this CA issued no such certificate")
        now = _now()
        already = entry.revoked is not None
        when = now if entry.revoked is None else entry.revoked  # the first revocation stands
        _, crl = ca.write_crl(cert, key, index.revoke(serial, now), now)
    print_json(
        {
            "serial": serial_text(serial),
            "role": entry.role.value,
            "name": entry.name,
            "revoked": time_text(when),
            "already_revoked": already,
            **_crl_json(crl, ca.directory / CRL),
        }
    )
    return 0


def _crl(args: argparse.Namespace) -> int:
    with _Ca(Path(args.dir)) as ca:
        cert, key, index = ca.load()
        _, crl = ca.write_crl(cert, key, index, _now())
    print_json(_crl_json(crl, ca.directory / CRL))
    return 0
