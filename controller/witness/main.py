"""The witness's entry point: ``paigow-witness`` (or ``python -m controller.witness``), which
systemd runs as ``paigow-controller witness`` (systemd/paigow-witness.service): the same
arguments (controller/witness/command.py), the same exit codes.

Exit codes: 0 stopped by SIGTERM or SIGINT (or a reset done); 1 its store failed (restart it:
it reads what the store really holds, and the broker delivers again what it did not
acknowledge) or another witness holds the state directory; 2 a bad argument (a ``--db`` with a
password among them: ``ps`` shows it to every user); 78 a bad key file, keys directory,
credentials file or ``--db-file`` (the message names the file); 70 anything unforeseen (one
line, never a traceback).

It puts together the store (``store``), the keys (``keys``), the MQTT side (``service``), the
verification (``tables``), the floor (``floor``) and its page (``dashboard``), and tells
systemd when it is ready and stopping (controller/system).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import NoReturn

from controller.cli.args import Parser, one_line, print_json, stderr_is_journal
from controller.core.digits import quoted
from controller.core.note import Signer, Verifier
from controller.errors import (
    EX_CONFIG,
    EX_SOFTWARE,
    EX_USAGE,
    ConfigError,
    ControllerError,
    FleetError,
    NumberError,
    UsageError,
)
from controller.fleet.client import read_credentials
from controller.system.logs import configure_logging
from controller.system.sdnotify import notify

# the store's open_store looked up when it is called (a test stands in for the database)
from controller.witness import store as witness_store
from controller.witness.command import (
    WitnessOptions,
    ack_token,
    database,
    options_of,
    state_dir_of,
    witness_arguments,
)
from controller.witness.dashboard import DashboardServer, LocalZone
from controller.witness.floor import Floor, FloorSettings
from controller.witness.keys import load_or_create_alert_key, load_or_create_key, load_table_keys
from controller.witness.ports import Store
from controller.witness.service import Connection, WitnessService
from controller.witness.store import StateLock
from controller.witness.tables import Witness

log = logging.getLogger("paigow.witness")

PROG = "paigow-witness"


def witness(args: argparse.Namespace) -> int:
    """The witness of parsed arguments: reset a table and exit, or run until SIGTERM."""
    state_dir = state_dir_of(args)
    db = database(args)
    if args.reset_table is not None:
        return reset(state_dir, db, args.reset_table)
    return run(options_of(args, state_dir, db))


@dataclass(frozen=True, slots=True)
class _Secrets:
    """What the files of secrets hold: the broker's login and the dashboard's token."""

    username: str
    password: str
    ack_token: str


@dataclass(frozen=True, slots=True)
class _Signers:
    """The witness's keys: the cosigner's, and the one its alerts are signed with."""

    cosigner: Signer
    alert_key: Signer


def run(options: WitnessOptions) -> int:
    """Witness until SIGTERM or SIGINT (0); the files are read first (a bad one: 78)."""
    configure_logging()
    keys = load_table_keys(options.keys)
    username, password = _credentials(options.broker.credentials_file)
    secrets = _Secrets(username, password, ack_token(options.ack_token_file))
    options.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = StateLock(options.state_dir)
    try:
        signers = _signers(options.state_dir, options.key_name)
        store = witness_store.open_store(options.state_dir, options.db)
        try:
            _witness(options, keys, store, signers, secrets)
        finally:
            store.close()
    finally:
        lock.release()
    return 0


def _signers(state_dir: Path, name: str | None) -> _Signers:
    """The witness's keys, made at its first start (each one logged as it is made)."""
    cosigner, made = load_or_create_key(state_dir, name)
    if made:
        log.info("made the witness's key %s: %s", state_dir / "witness.key", cosigner.verifier)
    alert_key, made = load_or_create_alert_key(state_dir, cosigner)
    if made:
        log.info("made the witness's alert key %s: %s", state_dir / "alerts.key",
                 alert_key.verifier)  # fmt: skip
    return _Signers(cosigner, alert_key)


def _witness(
    options: WitnessOptions,
    keys: dict[str, Verifier],
    store: Store,
    signers: _Signers,
    secrets: _Secrets,
) -> None:
    """The witness's parts put together, run until a signal stops it."""
    broker = options.broker
    connection = Connection(
        broker.address,
        client_id=broker.client_id,
        ca_file=broker.ca_file,
        cert_file=broker.cert_file,
        key_file=broker.key_file,
        username=secrets.username,
        password=secrets.password,
        tables=tuple(sorted(keys)) if options.partition else (),
    )
    service = WitnessService(connection)
    settings = FloorSettings(min_games_per_hour=options.min_games_per_hour, zone=LocalZone())
    floor = Floor(clock=time.time, settings=settings)
    core = Witness(
        store,
        keys,
        signers.cosigner,
        alert_key=signers.alert_key,
        clock=time.time,
        publish=service.publish,
        gap_s=options.gap_s,
        silence_s=options.silence_s,
        floor=floor,
    )
    stop = _stopped_by_signals()
    log.info(
        "witnessing %d table(s) on %s as %s", len(keys), broker.address, signers.cosigner.verifier
    )
    dashboard = _dashboard(options.dashboard, floor, service, secrets.ack_token)
    try:
        service.run(core, stop, ready=lambda: notify("READY=1"))
    finally:
        if dashboard is not None:
            dashboard.close()
    notify("STOPPING=1")
    log.info("stopped")


def _stopped_by_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def _dashboard(
    at: tuple[str, int] | None, floor: Floor, service: WitnessService, token: str
) -> DashboardServer | None:
    """The floor dashboard, serving at ``at`` (None: not served)."""
    if at is None:
        return None
    try:
        dashboard = DashboardServer(floor, *at, acknowledge=service.acknowledge, ack_token=token)
    except OSError as exc:
        raise ControllerError(f"the floor dashboard: {exc}") from None
    dashboard.start()
    log.info("the floor dashboard: %s", dashboard.url)
    return dashboard


def _credentials(path_text: str | None) -> tuple[str, str]:
    """The broker's user name and password from ``--credentials-file`` (("", ""): none)."""
    if path_text is None:
        return "", ""
    try:
        return read_credentials(Path(path_text))
    except FleetError as exc:
        raise ConfigError("--credentials-file", str(exc)) from None


def reset(state_dir: Path, db: str | None, table: str) -> int:
    """``--reset-table``: forget what is held of ``table`` (its alerts stay) and print what was
    forgotten; the witness must be stopped (the state directory's lock)."""
    if not state_dir.is_dir():
        raise UsageError(f"--state-dir {quoted(str(state_dir))} does not exist")
    lock = StateLock(state_dir)
    try:
        store = witness_store.open_store(state_dir, db)
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


# --- paigow-witness ----------------------------------------------------------------------------


def _complain(message: str) -> None:
    """The one line a failed start leaves (at priority err in the journal)."""
    prefix = "<3>" if stderr_is_journal() else ""
    sys.stderr.write(f"{prefix}{PROG}: {one_line(message)}\n")


class _WitnessParser(Parser):
    """The command line's parser, its one line on a bad argument naming this program."""

    def error(self, message: str) -> NoReturn:
        _complain(message)
        raise SystemExit(EX_USAGE)


def main(argv: Sequence[str] | None = None) -> int:
    """``paigow-witness``: run the witness. Whatever goes wrong ends in one line on stderr
    and an exit code (the module docstring)."""
    parser = _WitnessParser(prog=PROG)
    witness_arguments(parser, prog=PROG)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as exc:  # --help (0) or a bad argument, already said in one line (2)
        return exc.code if isinstance(exc.code, int) else EX_USAGE
    return exit_code(lambda: witness(args))


def exit_code(run: Callable[[], int]) -> int:
    """``run``'s exit code, or the one of what it raised (said in one line)."""
    try:
        return run()
    except (UsageError, NumberError) as exc:
        _complain(str(exc))
        return EX_USAGE
    except ConfigError as exc:
        _complain(str(exc))
        return EX_CONFIG
    except ControllerError as exc:
        _complain(str(exc))
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        _complain("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: never a traceback
        _complain(f"internal error: {type(exc).__name__}: {exc}")
        return EX_SOFTWARE
