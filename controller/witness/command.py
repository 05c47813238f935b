"""The witness's command line: its arguments, and what they are checked into before anything
starts (:class:`WitnessOptions`): the broker, the store's URL and the files of secrets.

Declared here for both ways of starting it, ``paigow-witness`` (controller/witness/main.py) and
``paigow-controller witness`` (controller/cli/witness.py). A bad argument is a
:class:`~controller.errors.UsageError` (exit 2; a ``--db`` with a password among them: ``ps``
shows it to every user); a bad ``--db-file``, ``--ack-token-file`` or ``--credentials-file``
a :class:`~controller.errors.ConfigError` naming the file (exit 78).
"""

from __future__ import annotations

import argparse
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from controller.cli.args import describe, directory_argument, path_argument, whole_number
from controller.core.config import BrokerAddress, parse_broker_url
from controller.core.digits import quoted
from controller.errors import ConfigError, TooLarge, UsageError
from controller.files import read_capped
from controller.fleet.protocol import is_table_name

DB_ENV = "PAIGOW_WITNESS_DB"
MAX_DB_URL_CHARS = 1000
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})  # libpq's, in a URL's query
MAX_DB_FILE_BYTES = 4096
MAX_ACK_TOKEN_FILE_BYTES = 1024
DEFAULT_CLIENT_ID = "paigow-witness"

_EXAMPLES = """\
examples:
  {prog} --mqtt-url mqtts://broker.casino --ca-file tls/ca.pem \\
      --cert-file tls/witness.pem --key-file tls/witness.key \\
      --state-dir /var/lib/paigow-witness --keys /etc/paigow-witness/tables
  {prog} --mqtt-url mqtts://broker.casino --ca-file tls/ca.pem \\
      --cert-file tls/witness.pem --key-file tls/witness.key \\
      --state-dir /var/lib/paigow-witness --keys /etc/paigow-witness/tables \\
      --db-file /etc/paigow-witness/db.url   # postgresql://witness:PASSWORD@db.casino/witness
  {prog} --mqtt-url mqtt://127.0.0.1:1883 --state-dir /tmp/w --keys keys \\
      --dashboard 0.0.0.0:8090 --min-games-per-hour 20
  {prog} --state-dir /var/lib/paigow-witness --reset-table table-7"""

_DESCRIPTION = (
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
    " the state directory, 2 a bad argument, 78 a bad key, credentials or --db-file."
)


def key_name(text: str) -> str:
    """A cosigner key's name: 1 to 64 printable ASCII characters, no space or '+'."""
    if not (0 < len(text) <= 64 and text.isascii() and text.isprintable()) or any(
        c in text for c in " +"
    ):
        raise argparse.ArgumentTypeError("1 to 64 printable ASCII characters, no space or '+'")
    return text


def _table_name(text: str) -> str:
    if not is_table_name(text):
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a table name")
    return text


def witness_arguments(p: argparse.ArgumentParser, prog: str = "paigow-controller witness") -> None:
    """The witness's arguments and its ``--help`` (``prog``: how its examples start it)."""
    describe(p, _DESCRIPTION, _EXAMPLES.format(prog=prog))
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
    p.add_argument("--name", type=key_name, help="the cosigner key's name, for a new key")
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


# --- the options, checked --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Broker:
    """Where the witness connects and as whom (the files are read when it starts)."""

    address: BrokerAddress
    client_id: str
    ca_file: str
    cert_file: str
    key_file: str
    credentials_file: str | None


@dataclass(frozen=True, slots=True)
class WitnessOptions:
    """The witness's arguments once checked: what :func:`controller.witness.main.run` starts
    from. ``dashboard`` None: no floor dashboard."""

    state_dir: Path
    db: str | None
    keys: Path
    key_name: str | None
    broker: Broker
    partition: bool
    dashboard: tuple[str, int] | None
    ack_token_file: str | None
    min_games_per_hour: int
    gap_s: int
    silence_s: int


def state_dir_of(args: argparse.Namespace) -> Path:
    """``--state-dir`` (it may not exist yet; a file there is refused)."""
    state_dir = directory_argument(args.state_dir)
    assert state_dir is not None  # a required argument
    return state_dir


def options_of(args: argparse.Namespace, state_dir: Path, db: str | None) -> WitnessOptions:
    """The arguments of a witness that runs (not ``--reset-table``), checked in the order they
    always were: the first bad one is the one named."""
    if not args.mqtt_url:
        raise UsageError("--mqtt-url is required (except with --reset-table)")
    if args.keys is None:
        raise UsageError("--keys is required (except with --reset-table)")
    address = _broker_address(args)
    dashboard = host_port(args.dashboard)
    min_games = whole_number(args.min_games_per_hour, "--min-games-per-hour", 0, 10_000)
    gap_s = whole_number(args.gap_s, "--gap-s", 1, 86_400)
    silence_s = whole_number(args.silence_s, "--silence-s", 1, 7 * 86_400)
    broker = Broker(
        address,
        _client_id(args.client_id),
        ca_file=args.ca_file or "",
        cert_file=args.cert_file or "",
        key_file=args.key_file or "",
        credentials_file=args.credentials_file,
    )
    return WitnessOptions(
        state_dir=state_dir,
        db=db,
        keys=Path(args.keys),
        key_name=args.name,
        broker=broker,
        partition=bool(args.partition),
        dashboard=dashboard,
        ack_token_file=args.ack_token_file,
        min_games_per_hour=min_games,
        gap_s=gap_s,
        silence_s=silence_s,
    )


def _broker_address(args: argparse.Namespace) -> BrokerAddress:
    """``--mqtt-url``, and the TLS files it needs."""
    try:
        address = parse_broker_url(args.mqtt_url)
    except ValueError as exc:
        raise UsageError(f"--mqtt-url: {exc}") from None
    if address.tls and not args.ca_file:
        raise UsageError("mqtts:// needs --ca-file")
    if bool(args.cert_file) != bool(args.key_file):
        raise UsageError("--cert-file and --key-file go together")
    return address


def _client_id(text: str | None) -> str:
    client_id = text or DEFAULT_CLIENT_ID
    if not (0 < len(client_id) <= 64 and client_id.isascii() and client_id.isprintable()):
        raise UsageError("--client-id: 1 to 64 printable ASCII characters")
    return client_id


def host_port(text: str) -> tuple[str, int] | None:
    """``--dashboard``: ``HOST:PORT`` (an IPv4 address or a name, a port 1-65535), or ``off``."""
    if text == "off":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not _is_host(host) or not (port.isascii() and port.isdigit() and len(port) <= 5):
        raise UsageError(f"--dashboard {quoted(text)}: HOST:PORT or off")
    number = int(port)
    if not 1 <= number <= 65535:
        raise UsageError(f"--dashboard {quoted(text)}: the port is 1 to 65535")
    return host, number


def _is_host(text: str) -> bool:
    """An IPv4 address or a host name: 1 to 253 ASCII letters, digits, dots and hyphens."""
    return 0 < len(text) <= 253 and all(c.isascii() and (c.isalnum() or c in ".-") for c in text)


# --- the store's URL ---------------------------------------------------------------------------


def database(args: argparse.Namespace) -> str | None:
    """The PostgreSQL URL: ``--db`` (without a password: every user's ``ps`` shows the command
    line), ``--db-file`` (a file only the service's user may read), or the environment's
    ``PAIGOW_WITNESS_DB``; None: SQLite in the state directory."""
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
    lines = _secret_lines(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != 1:
        raise ConfigError("--db-file", f"{path} must be one line, the postgresql:// URL")
    try:
        return _db_url(lines[0].strip(), "--db-file")
    except UsageError as exc:
        raise ConfigError("--db-file", f"{path}: {exc}".replace("--db-file: ", "")) from None


def _secret_lines(path: Path) -> str:
    """The text of ``--db-file``, read only if no one but its owner (or systemd's credential
    ACL) may read it."""
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
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("--db-file", f"{path} is not UTF-8") from None


# --- the other secrets -------------------------------------------------------------------------


def ack_token(path_text: str | None) -> str:
    """The dashboard's acknowledgement token: one line of 16 to 256 printable ASCII
    characters, in a file its owner alone reads ("": none)."""
    if path_text is None:
        return ""
    path = Path(path_text)
    try:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise ConfigError("--ack-token-file", f"{path} must be mode 0600 or 0400")
        token = read_capped(path, MAX_ACK_TOKEN_FILE_BYTES).decode("ascii").strip()
    except (OSError, TooLarge, UnicodeDecodeError) as exc:
        raise ConfigError("--ack-token-file", f"cannot read {path}: {exc}") from None
    if not (16 <= len(token) <= 256 and token.isprintable() and " " not in token):
        raise ConfigError("--ack-token-file", "one line of 16 to 256 characters, no spaces")
    return token
