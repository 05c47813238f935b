"""``witness`` and ``witness-key``: the fleet's witness (controller/witness), run on the casino's
server under systemd (systemd/paigow-witness.service).

Exit codes of ``witness``: 0 stopped by SIGTERM or SIGINT (or a reset done); 1 its store
failed (restart it: it reads what the store really holds, and the broker delivers again what
it did not acknowledge) or another witness holds the state directory; 2 a bad argument (a
``--db`` with a password among them: ``ps`` shows it to every user); 78 a bad key file, keys
directory, credentials file or ``--db-file`` (the message names the file).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from controller.cli.args import (
    describe,
    directory_argument,
    path_argument,
    print_json,
    whole_number,
)
from controller.core.digits import quoted
from controller.errors import ConfigError, ControllerError, UsageError

log = logging.getLogger("paigow.witness")

DB_ENV = "PAIGOW_WITNESS_DB"
MAX_DB_URL_CHARS = 1000
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})  # libpq's, in a URL's query
MAX_DB_FILE_BYTES = 4096


_WITNESS_EXAMPLES = """\
examples:
  paigow-controller witness --mqtt-url mqtts://broker.casino --ca-file tls/ca.pem \\
      --cert-file tls/witness.pem --key-file tls/witness.key \\
      --state-dir /var/lib/paigow-witness --keys /etc/paigow-witness/tables
  paigow-controller witness --mqtt-url mqtts://broker.casino --ca-file tls/ca.pem \\
      --cert-file tls/witness.pem --key-file tls/witness.key \\
      --state-dir /var/lib/paigow-witness --keys /etc/paigow-witness/tables \\
      --db-file /etc/paigow-witness/db.url   # postgresql://witness:PASSWORD@db.casino/witness
  paigow-controller witness --mqtt-url mqtt://127.0.0.1:1883 --state-dir /tmp/w --keys keys \\
      --dashboard 0.0.0.0:8090 --min-games-per-hour 20
  paigow-controller witness --state-dir /var/lib/paigow-witness --reset-table table-7"""


def _key_name(text: str) -> str:
    if not (0 < len(text) <= 64 and text.isascii() and text.isprintable()) or any(
        c in text for c in " +"
    ):
        raise argparse.ArgumentTypeError("1 to 64 printable ASCII characters, no space or '+'")
    return text


def _table_name(text: str) -> str:
    from controller.fleet.protocol import is_table_name

    if not is_table_name(text):
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a table name")
    return text


def witness_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The fleet's witness: it subscribes to every table's records, checkpoints and status on"
        " the casino's MQTT broker (a persistent session: the broker keeps them while it is"
        " down), keeps the records, verifies the hash chain, the Merkle tree and every"
        " signature with the table's key from --keys (<table>.pub, the line export-key prints),"
        " checks that each new checkpoint extends the one it accepted before, recomputing it"
        " from the records it holds, and publishes its cosignature (C2SP tlog-cosignature) on"
        " paigow/v1/<table>/cosignature. A record is a fact only once a signed checkpoint"
        " covers it; an older signed checkpoint than one cosigned is stale (counted, never an"
        " alert); a status counts only signed by the table's key. A rollback or a fork named"
        " from signed evidence, a gap, a bad record or signature,"
        " a silent table or an unknown one is an alert, recorded in its store and published on"
        " paigow/v1/alerts; after a rollback or a fork it stops cosigning that table until"
        " --reset-table."
        "\n\n"
        "Its store is witness.db in --state-dir (SQLite), or the PostgreSQL database of --db"
        " (no password there: every user's ps shows it), --db-file (a file of mode 0600) or"
        f" the environment's {DB_ENV}."
        " Its cosigner key is witness.key there, made at the first start (witness-key prints"
        " it). Exit codes: 0 stopped (SIGTERM), 1 the store failed or another witness runs on"
        " the state directory, 2 a bad argument, 78 a bad key, credentials or --db-file.",
        _WITNESS_EXAMPLES,
    )
    p.add_argument("--mqtt-url", help="the broker: mqtt://host:port or mqtts://host:port")
    p.add_argument("--state-dir", required=True, help="the witness's directory (key, store)")
    p.add_argument("--keys", type=path_argument, help="the directory of <table>.pub files")
    db = p.add_mutually_exclusive_group()
    db.add_argument(
        "--db",
        help="postgresql://... : the store in PostgreSQL (default SQLite); no password here"
        " (ps shows it): --db-file or PAIGOW_WITNESS_DB",
    )
    db.add_argument(
        "--db-file",
        type=path_argument,
        help="a file holding the postgresql:// URL, password included (mode 0600 or 0400)",
    )
    p.add_argument("--name", type=_key_name, help="the cosigner key's name, for a new key")
    p.add_argument(
        "--gap-s", default="120", help="seconds a gap in a table's records may last (120)"
    )
    p.add_argument("--silence-s", default="900", help="seconds a table may say nothing (900)")
    p.add_argument("--client-id", default=None, help="the MQTT client id (paigow-witness)")
    p.add_argument("--ca-file", type=path_argument, help="mqtts: the broker's CA")
    p.add_argument("--cert-file", type=path_argument, help="mqtts: the witness's certificate")
    p.add_argument("--key-file", type=path_argument, help="mqtts: its private key")
    p.add_argument(
        "--credentials-file",
        type=path_argument,
        help="two lines, user name and password (mode 0600 or 0400)",
    )
    p.add_argument(
        "--partition",
        action="store_true",
        help="subscribe to the tables of --keys only (one of several witnesses, the tables split"
        " between them; a table without a key is then another witness's, not an alert)",
    )
    p.add_argument(
        "--dashboard",
        default="127.0.0.1:8090",
        metavar="HOST:PORT",
        help="where the floor dashboard is served (default 127.0.0.1:8090; 'off': not served)",
    )
    p.add_argument(
        "--min-games-per-hour",
        default="10",
        help="below it an open table is alerted on the dashboard (default 10; 0: never)",
    )
    p.add_argument(
        "--ack-token-file",
        type=path_argument,
        help="a file (mode 0600 or 0400) holding the token a dashboard user sends to acknowledge"
        " an alert (Authorization: Bearer); without it only the witness's own host (the"
        " loopback) may acknowledge",
    )
    p.add_argument(
        "--reset-table",
        type=_table_name,
        metavar="TABLE",
        help="forget what is held of TABLE (after a rollback or fork was dealt with) and exit;"
        " its alerts stay recorded. Stop the service first.",
    )


def witness(args: argparse.Namespace) -> int:
    from controller.core.config import parse_broker_url
    from controller.witness.store import StateLock, open_store

    state_dir = directory_argument(args.state_dir)
    assert state_dir is not None
    db = _database(args)
    if args.reset_table is not None:
        return _reset(state_dir, db, args.reset_table)
    if not args.mqtt_url:
        raise UsageError("--mqtt-url is required (except with --reset-table)")
    if args.keys is None:
        raise UsageError("--keys is required (except with --reset-table)")
    try:
        address = parse_broker_url(args.mqtt_url)
    except ValueError as exc:
        raise UsageError(f"--mqtt-url: {exc}") from None
    if address.tls and not args.ca_file:
        raise UsageError("mqtts:// needs --ca-file")
    if bool(args.cert_file) != bool(args.key_file):
        raise UsageError("--cert-file and --key-file go together")
    dashboard_at = _host_port(args.dashboard)
    min_games = whole_number(args.min_games_per_hour, "--min-games-per-hour", 0, 10_000)
    gap_s = whole_number(args.gap_s, "--gap-s", 1, 86_400)
    silence_s = whole_number(args.silence_s, "--silence-s", 1, 7 * 86_400)
    client_id = args.client_id or "paigow-witness"
    if not (0 < len(client_id) <= 64 and client_id.isascii() and client_id.isprintable()):
        raise UsageError("--client-id: 1 to 64 printable ASCII characters")

    from controller.app.logs import configure_logging
    from controller.app.sdnotify import notify
    from controller.witness.dashboard import DashboardServer, LocalZone
    from controller.witness.floor import Floor, FloorSettings
    from controller.witness.keys import (
        load_or_create_alert_key,
        load_or_create_key,
        load_table_keys,
    )
    from controller.witness.service import Connection, WitnessService
    from controller.witness.tables import Witness

    configure_logging()
    keys = load_table_keys(Path(args.keys))
    username, password = _credentials(args.credentials_file)
    ack_token = _ack_token(args.ack_token_file)
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = StateLock(state_dir)
    try:
        cosigner, made = load_or_create_key(state_dir, args.name)
        if made:
            log.info("made the witness's key %s: %s", state_dir / "witness.key", cosigner.verifier)
        alert_key, made = load_or_create_alert_key(state_dir, cosigner)
        if made:
            log.info("made the witness's alert key %s: %s", state_dir / "alerts.key",
                     alert_key.verifier)  # fmt: skip
        store = open_store(state_dir, db)
        try:
            connection = Connection(
                address,
                client_id=client_id,
                ca_file=args.ca_file or "",
                cert_file=args.cert_file or "",
                key_file=args.key_file or "",
                username=username,
                password=password,
                tables=tuple(sorted(keys)) if args.partition else (),
            )
            service = WitnessService(connection)
            settings = FloorSettings(min_games_per_hour=min_games, zone=LocalZone())
            floor = Floor(clock=time.time, settings=settings)
            core = Witness(
                store,
                keys,
                cosigner,
                alert_key=alert_key,
                clock=time.time,
                publish=service.publish,
                gap_s=gap_s,
                silence_s=silence_s,
                floor=floor,
            )
            stop = threading.Event()

            def on_signal(signum: int, frame: FrameType | None) -> None:
                stop.set()

            signal.signal(signal.SIGTERM, on_signal)
            signal.signal(signal.SIGINT, on_signal)
            log.info("witnessing %d table(s) on %s as %s", len(keys), address, cosigner.verifier)
            dashboard = None
            if dashboard_at is not None:
                try:
                    dashboard = DashboardServer(
                        floor,
                        *dashboard_at,
                        acknowledge=service.acknowledge,
                        ack_token=ack_token,
                    )
                except OSError as exc:
                    raise ControllerError(f"the floor dashboard: {exc}") from None
                dashboard.start()
                log.info("the floor dashboard: %s", dashboard.url)
            try:
                service.run(core, stop, ready=lambda: notify("READY=1"))
            finally:
                if dashboard is not None:
                    dashboard.close()
            notify("STOPPING=1")
            log.info("stopped")
        finally:
            store.close()
    finally:
        lock.release()
    return 0


def _host_port(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (an IPv4 address or a name, a port 1-65535), or ``off``."""
    if text == "off":
        return None
    host, sep, port = text.rpartition(":")
    ok_host = 0 < len(host) <= 253 and all(c.isascii() and (c.isalnum() or c in ".-") for c in host)
    if not sep or not ok_host or not (port.isascii() and port.isdigit() and len(port) <= 5):
        raise UsageError(f"--dashboard {quoted(text)}: HOST:PORT or off")
    number = int(port)
    if not 1 <= number <= 65535:
        raise UsageError(f"--dashboard {quoted(text)}: the port is 1 to 65535")
    return host, number


def _database(args: argparse.Namespace) -> str | None:
    """The PostgreSQL URL: ``--db`` (without a password: every user's ``ps`` shows the command
    line), ``--db-file`` (a file only the service's user may read), or the environment's
    ``PAIGOW_WITNESS_DB``; None: SQLite in the state directory."""
    import os

    if args.db is not None:
        url = _db_url(args.db, "--db")
        if has_password(url):
            raise UsageError(
                "--db: a password on the command line is seen by every user (ps): put the URL"
                f" in --db-file (mode 0600) or {DB_ENV}"
            )
        return url
    if args.db_file is not None:
        return _db_file(Path(args.db_file))
    from_env = os.environ.get(DB_ENV, "")
    if from_env:
        try:
            return _db_url(from_env, DB_ENV)
        except UsageError as exc:
            raise ConfigError(DB_ENV, str(exc).removeprefix(f"{DB_ENV}: ")) from None
    return None


def _db_url(text: str, source: str) -> str:
    if not text.startswith(("postgresql://", "postgres://")) or len(text) > MAX_DB_URL_CHARS:
        raise UsageError(f"{source}: a postgresql:// URL")
    if any(not c.isprintable() for c in text):
        raise UsageError(f"{source}: a postgresql:// URL")
    return text


def has_password(url: str) -> bool:
    """Whether a libpq URL carries a secret: ``user:password@`` or ``?password=`` (or
    ``sslpassword=``, the client key's passphrase), in whatever case or percent-encoding."""
    from urllib.parse import unquote

    before_query, _, query = url.partition("://")[2].partition("?")
    userinfo, at, _ = before_query.partition("@")  # user:password@host, a '/' in it or not
    if at and ":" in userinfo:
        return True
    for pair in query.split("&"):
        name = unquote(pair.partition("=")[0]).strip().lower()
        if name in _SECRET_PARAMETERS:
            return True
    return False


def _is_credential(path: Path) -> bool:
    """Whether ``path`` is a credential systemd handed this service (``LoadCredential=``): a
    file directly in ``$CREDENTIALS_DIRECTORY``, which only the service may read. systemd
    grants its user read access there by an ACL, whose mask ``stat`` shows in the group bits
    (0440), so the mode alone would refuse it."""
    import os

    directory = os.environ.get("CREDENTIALS_DIRECTORY", "")
    if not directory:
        return False
    try:
        return path.resolve().parent == Path(directory).resolve()
    except (OSError, RuntimeError):
        return False


def _db_file(path: Path) -> str:
    """The URL in ``--db-file``: one line, in a file that only its owner may read (0600 or
    0400, as --credentials-file; or a systemd credential); a bad file is exit 78 naming it."""
    import stat

    from controller.errors import TooLarge
    from controller.files import read_capped

    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077 and not ((mode & 0o077) == 0o040 and _is_credential(path)):
            raise ConfigError(
                "--db-file",
                f"{path} is readable by group or others (mode {mode:04o}): it must be 0600 or 0400",
            )
        raw = read_capped(path, MAX_DB_FILE_BYTES)
    except TooLarge:
        raise ConfigError("--db-file", f"{path} is larger than {MAX_DB_FILE_BYTES} bytes") from None
    except OSError as exc:
        raise ConfigError("--db-file", f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise ConfigError("--db-file", f"{path} is not UTF-8") from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != 1:
        raise ConfigError("--db-file", f"{path} must be one line, the postgresql:// URL")
    try:
        return _db_url(lines[0].strip(), "--db-file")
    except UsageError as exc:
        raise ConfigError("--db-file", f"{path}: {exc}".replace("--db-file: ", "")) from None


def _reset(state_dir: Path, db: str | None, table: str) -> int:
    from datetime import UTC, datetime

    from controller.witness.store import StateLock, open_store

    if not state_dir.is_dir():
        raise UsageError(f"--state-dir {quoted(str(state_dir))} does not exist")
    lock = StateLock(state_dir)
    try:
        store = open_store(state_dir, db)
        try:
            now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            with store.transaction():
                head = store.reset_table(table, now, "operator: witness --reset-table")
        finally:
            store.close()
    finally:
        lock.release()
    print_json(
        {
            "table": table,
            "reset": head is not None,
            "records_forgotten": 0 if head is None else head.size,
            "cosigned_size": 0 if head is None else head.cosigned_size,
            "was_stopped": "" if head is None else head.halted,
        }
    )
    return 0


def _ack_token(path_text: str | None) -> str:
    """The dashboard's acknowledgement token: one line of 16 to 256 printable ASCII
    characters, in a file its owner alone reads."""
    if path_text is None:
        return ""
    import stat

    from controller.errors import TooLarge
    from controller.files import read_capped

    path = Path(path_text)
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise ConfigError("--ack-token-file", f"{path} must be mode 0600 or 0400")
        token = read_capped(path, 1024).decode("ascii").strip()
    except (OSError, TooLarge, UnicodeDecodeError) as exc:
        raise ConfigError("--ack-token-file", f"cannot read {path}: {exc}") from None
    if not (16 <= len(token) <= 256 and token.isprintable() and " " not in token):
        raise ConfigError("--ack-token-file", "one line of 16 to 256 characters, no spaces")
    return token


def _credentials(path_text: str | None) -> tuple[str, str]:
    if path_text is None:
        return "", ""
    from controller.errors import FleetError
    from controller.fleet.client import read_credentials

    try:
        return read_credentials(Path(path_text))
    except FleetError as exc:
        raise ConfigError("--credentials-file", str(exc)) from None


# --- witness-key ------------------------------------------------------------------------------


def witness_key_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The witness's cosigner key (C2SP cosignature/v1) and its alert key: made in"
        " witness.key and alerts.key (mode 0600) in the state directory when there are none,"
        " never replaced. Prints their verifier keys: the first line the cosigner's, for each"
        " table's [fleet] witness_key; the second the alert key's (Ed25519, the same name),"
        " for whoever reads the signed alerts on paigow/v1/alerts.",
        "example:\n"
        "  paigow-controller witness-key --state-dir /var/lib/paigow-witness | head -1 > w.pub",
    )
    p.add_argument("--state-dir", required=True, help="the witness's directory")
    p.add_argument("--name", type=_key_name, help="the key's name, for a new key")


def witness_key(args: argparse.Namespace) -> int:
    from controller.witness.keys import load_or_create_alert_key, load_or_create_key

    state_dir = directory_argument(args.state_dir)
    assert state_dir is not None
    signer, _ = load_or_create_key(state_dir, args.name)
    alert_key, _ = load_or_create_alert_key(state_dir, signer)
    sys.stdout.write(f"{signer.verifier}\n{alert_key.verifier}\n")
    return 0
