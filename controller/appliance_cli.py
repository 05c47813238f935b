"""The appliance's commands: ``run`` (what systemd starts), ``simulate`` (``make demo``) and
``selftest`` (a technician's check of config, keys, RNG, sensor and pins)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import queue
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from controller.appliance import Appliance
from controller.audit_log import DB_NAME, load_signer, peek_identity
from controller.config import DEFAULT_PATH, Config, load_config
from controller.digits import NumberError, parse_bounded_int, quoted
from controller.errors import ControllerError, UsageError
from controller.logs import configure_logging
from controller.rng import known_answer_test
from controller.simulate import FAULT_NAMES, parse_faults, run_simulation
from controller.state import Mode, Occurrence
from drivers.dice_sensor import SerialDiceSensor
from drivers.table_io import build_table_io

log = logging.getLogger("paigow")


def _whole(text: str, what: str, low: int, high: int) -> int:
    try:
        return parse_bounded_int(text, low=low, high=high, what=what)
    except NumberError as exc:
        raise UsageError(str(exc)) from None


def _directory(text: str, option: str) -> Path:
    """A directory argument that may not exist yet; one that names a file is refused now,
    before anything starts. (Its length and characters were checked as it was parsed.)"""
    path = Path(text)
    try:
        is_other = path.exists() and not path.is_dir()
    except OSError as exc:
        raise UsageError(f"{option} {quoted(text)}: {exc.strerror or exc}") from None
    if is_other:
        raise UsageError(f"{option} {quoted(text)} exists and is not a directory")
    return path


# --- run --------------------------------------------------------------------------------------


def run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--debug", action="store_true", help="log at debug level")


def run_command(args: argparse.Namespace) -> int:
    config = load_config(Path(args.config))  # a bad config: exit 78 naming the key
    configure_logging(logging.DEBUG if args.debug else logging.INFO)
    appliance = Appliance(config)
    try:
        appliance.start()
        appliance.run()
    except (ControllerError, OSError) as exc:  # a port taken, a state directory not writable
        log.error("%s", exc)
        return 1
    finally:
        appliance.close()
    return 0


# --- simulate ---------------------------------------------------------------------------------


def simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", default="20", help="rounds to play (default 20)")
    p.add_argument("--seed", default="1", help="seed of the simulated dice and crew (default 1)")
    p.add_argument("--fast", action="store_true", help="as fast as the rules allow")
    p.add_argument(
        "--faults",
        default="default",
        help=f"name=probability per shake, comma-separated; 'none' or 'default'."
        f" Names: {', '.join(FAULT_NAMES)}",
    )
    p.add_argument("--state-dir", help="where the audit log goes (default: a new temporary one)")
    p.add_argument("--config", help="a config file (default: the built-in defaults)")
    p.add_argument(
        "--mode", choices=[m.value for m in Mode], help="override the config's table mode"
    )
    p.add_argument("--web-display", action="store_true", help="also serve the table display")
    p.add_argument("--debug", action="store_true", help="log at debug level")


def simulate_command(args: argparse.Namespace) -> int:
    rounds = _whole(args.rounds, "rounds", 1, 10_000_000)
    seed = _whole(args.seed, "seed", 0, 2**32 - 1)
    faults = parse_faults(args.faults)
    state_dir = None if args.state_dir is None else _directory(args.state_dir, "--state-dir")
    config = Config() if args.config is None else load_config(Path(args.config))
    if args.mode is not None:
        config = dataclasses.replace(
            config, table=dataclasses.replace(config.table, mode=Mode(args.mode))
        )
    configure_logging(logging.DEBUG if args.debug else logging.WARNING)
    if state_dir is None:
        state_dir = Path(tempfile.mkdtemp(prefix="paigow-sim-"))
    try:
        return run_simulation(
            config,
            rounds=rounds,
            seed=seed,
            fast=args.fast,
            faults=faults,
            state_dir=state_dir,
            out=sys.stdout,
            web_display=args.web_display,
        )
    except ControllerError:
        raise  # ours say what failed: one line on stderr, exit 1
    except OSError as exc:  # a port taken, a directory not writable: the same, in one line
        raise ControllerError(f"simulate: {exc}") from exc


# --- selftest ---------------------------------------------------------------------------------


def selftest_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--sensor-url", help="override the config's [sensor] url")
    p.add_argument("--state-dir", help="override the config's [storage] state_dir")


def selftest_command(args: argparse.Namespace) -> int:
    """Each check in turn; a JSON report on stdout; exit 1 naming every failure on stderr, in
    one line."""
    given_dir = None if args.state_dir is None else _directory(args.state_dir, "--state-dir")
    config = load_config(Path(args.config))
    configure_logging(logging.WARNING)
    state_dir = given_dir or Path(config.storage.state_dir)
    checks: list[tuple[str, Callable[[], str]]] = [
        ("config", lambda: f"{args.config} sha256 {config.source_sha256[:16]}"),
        ("keys", lambda: _check_keys(state_dir)),
        ("rng", _check_rng),
    ]
    if config.table.mode is not Mode.RNG:
        url = args.sensor_url or config.sensor.url
        checks.append(("sensor", lambda: _check_sensor(config, url)))
    checks.append(("pins", lambda: _check_pins(config)))
    report: dict[str, dict[str, object]] = {}
    failed = []
    for name, check in checks:
        try:
            report[name] = {"ok": True, "detail": check()}
        except Exception as exc:  # noqa: BLE001 - each failure is reported by name, no traceback
            report[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
            failed.append(name)
    sys.stdout.write(json.dumps({"ok": not failed, "checks": report}) + "\n")
    if failed:  # one line on stderr naming every failure (exit 1); stdout has the details
        details = "; ".join(f"{name} failed: {report[name]['detail']}" for name in failed)
        raise ControllerError(f"selftest: {details}")
    return 0


def _check_keys(state_dir: Path) -> str:
    """The log's signing key is there and is the log's own. Never creates one: only
    ``paigow-controller init`` (or the first start on an empty directory) does."""
    signer = load_signer(state_dir)
    recorded = peek_identity(state_dir / DB_NAME)
    if signer is None:
        if recorded is None:
            raise ControllerError(
                f"no signing key in {state_dir}: run paigow-controller init --state-dir"
                f" {state_dir}, or start the controller once"
            )
        raise ControllerError(f"the signing key of {recorded[0]} (key id {recorded[1]}) is missing")
    key_id = signer.verifier.key_id.hex()
    if recorded is not None and (recorded[0], recorded[1]) != (signer.name, key_id):
        raise ControllerError(
            f"the signing key {signer.name} ({key_id}) is not the log's key"
            f" {recorded[0]} ({recorded[1]})"
        )
    return f"log signing key {signer.name} ({key_id}) in {state_dir}"


def _check_rng() -> str:
    known_answer_test()
    return "HMAC_DRBG SHA-256 known-answer test passed"


def _check_sensor(config: Config, url: str) -> str:
    events: queue.Queue[Occurrence] = queue.Queue()
    sensor = SerialDiceSensor.from_config(dataclasses.replace(config.sensor, url=url), events)
    try:
        identity = sensor.open()
        faults = sensor.status()
        if faults:
            raise ControllerError(f"sensor reports {', '.join(sorted(map(str, faults)))}")
    finally:
        sensor.close()
    return f"{identity.model} firmware {identity.firmware} serial {identity.serial_number}"


def _check_pins(config: Config) -> str:
    events: queue.Queue[Occurrence] = queue.Queue()
    table_io = build_table_io(config, events)
    try:
        lid = "n/a"
        if table_io.shaker is not None:
            lid = "closed" if table_io.shaker.is_lid_closed else "open"
            if not table_io.shaker.is_secured:
                raise ControllerError("the shaker's tamper loop is open (not secured)")
    finally:
        table_io.close()
    return f"pins claimed; lid {lid}"
