"""The appliance's commands: ``run`` (what systemd starts), ``simulate`` (``make demo``) and
``selftest`` (a technician's check of config, keys, RNG, sensor and pins)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import tempfile
from pathlib import Path

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.cli import render
from controller.cli.args import (
    JSON_OR_TEXT,
    describe,
    directory_argument,
    json_argument,
    print_report,
)
from controller.core.config import Config
from controller.core.digits import parse_bounded_int, quoted
from controller.core.state import Mode
from controller.errors import ConfigError, ControllerError, NumberError, UsageError

log = logging.getLogger("paigow")


def _whole(text: str, what: str, low: int, high: int) -> int:
    try:
        return parse_bounded_int(text, low=low, high=high, what=what)
    except NumberError as exc:
        raise UsageError(str(exc)) from None


# --- run --------------------------------------------------------------------------------------


def run_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Runs the table: what systemd starts (systemd/paigow-controller.service). Takes the"
        " state directory's lock, opens the audit log, checks the log's key and anchor, runs the"
        " self-tests, then plays rounds until SIGTERM, logging to stderr with syslog priority"
        " prefixes for journald. A bad config exits 78 naming the key (fleet.origin for a log of"
        " another origin than [fleet] origin); a failed start exits 1 in one line.",
        "examples:\n"
        "  paigow-controller run\n"
        "  paigow-controller run --config /etc/paigow-controller/config.toml --debug",
    )
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--debug", action="store_true", help="log at debug level")


def run_command(args: argparse.Namespace) -> int:
    from controller.app.appliance import Appliance, Options
    from controller.app.hardening import make_undumpable
    from controller.system.logs import configure_logging

    # First of all: the RNG's seed (in memory only) is kept from the service's own account,
    # no core file and no ptrace (controller/app/hardening.py).
    try:
        make_undumpable()
    except OSError as exc:
        raise ControllerError(f"run: cannot keep the memory from being dumped: {exc}") from None
    config = load_config(Path(args.config))  # a bad config: exit 78 naming the key
    configure_logging(logging.DEBUG if args.debug else logging.INFO)
    # program verification: no manifest installed is a fault unless [software] required = false
    appliance = Appliance(config, Options(software_required=config.software.required))
    try:
        appliance.start()
        appliance.run()
    except ConfigError:
        raise  # found at start (a log of another [fleet] origin): exit 78 naming the key
    except (ControllerError, OSError) as exc:  # a port taken, a state directory not writable
        log.error("%s", exc)
        return 1
    finally:
        appliance.close()
    return 0


# --- simulate ---------------------------------------------------------------------------------


def simulate_arguments(p: argparse.ArgumentParser) -> None:
    from controller.app.simulate import FAULT_NAMES

    describe(
        p,
        "Runs the table on simulated hardware (gpiozero's mock pins, the simulated dice sensor"
        " on a pseudo-terminal, a simulated dealer and supervisor) into a real audit log, then"
        " prints how many rounds, no rolls and faults it played. --fast plays as fast as the"
        " rules allow; --faults injects sensor and shaker faults per shake.",
        "examples:\n"
        "  paigow-controller simulate --rounds 50 --fast --state-dir demo-state\n"
        "  paigow-controller simulate --rounds 200 --fast --faults none --plain-rounds\n"
        "  paigow-controller simulate --fast --faults tilted=0.2,lid=0.05 --seed 7\n"
        "  paigow-controller simulate --rounds 500 --supervisor-key on --state-dir demo-state"
        "   # then: paigow-controller supervise ... --state-dir demo-state\n"
        "  paigow-controller simulate --rounds 1 --sensor-url /dev/paigow-dice   # a sensor on the"
        " bench",
    )
    p.add_argument("--rounds", default="20", help="rounds to play (default 20)")
    p.add_argument("--seed", default="1", help="seed of the simulated dice and crew (default 1)")
    p.add_argument("--fast", action="store_true", help="as fast as the rules allow")
    p.add_argument(
        "--faults",
        help=f"name=probability per shake, comma-separated; 'none' or 'default' (the default;"
        f" 'none' with --sensor-url). Names: {', '.join(FAULT_NAMES)}",
    )
    p.add_argument("--state-dir", help="where the audit log goes (default: a new temporary one)")
    p.add_argument("--config", help="a config file (default: the built-in defaults)")
    p.add_argument(
        "--mode", choices=[m.value for m in Mode], help="override the config's table mode"
    )
    p.add_argument("--web-display", action="store_true", help="also serve the table display")
    p.add_argument(
        "--plain-rounds",
        action="store_true",
        help="the dealer banks every round, standard delivery (no bank or style key pressed),"
        " and the supervisor voids nothing",
    )
    p.add_argument(
        "--table-minutes-per-round",
        metavar="M",
        help="a simulated wall clock that moves M minutes (1 to 1440) with each round closed:"
        " the dice's 24 hours on the table pass within the run (default: the real clock)",
    )
    p.add_argument(
        "--dice-bias",
        action="append",
        default=[],
        metavar="COLOUR:FACE:P",
        help="load the simulated dice, e.g. red:6:0.25 (colour red or blue; the face's opposite"
        " gives up the chance first); once per colour",
    )
    p.add_argument(
        "--sensor-url",
        metavar="URL",
        help="a DS1 dice sensor at URL (a serial device such as /dev/paigow-dice, or"
        " socket://host:port) instead of the simulated one: try a sensor on the bench with the"
        " shaker and keys simulated; its dice are read as they lie, no sensor fault is injected",
    )
    p.add_argument(
        "--supervisor-key",
        choices=("auto", "on", "off"),
        default="auto",
        help="the simulated supervisor key switch: auto (the default) the simulated crew turns"
        " it on for its own actions only; on for the whole run, so that"
        " 'paigow-controller supervise ... --state-dir DIR' can be tried at any time; off for"
        " the whole run (every supervisor action refused; the run stops when the table needs"
        " its supervisor)",
    )
    p.add_argument("--debug", action="store_true", help="log at debug level")


def _sensor_url(text: str) -> str:
    """A device path or a pyserial URL: printable ASCII, no spaces, bounded."""
    if not (0 < len(text) <= 255 and text.isascii() and text.isprintable() and " " not in text):
        raise UsageError(f"--sensor-url {quoted(text)}: not a device path or URL")
    return text


def simulate_command(args: argparse.Namespace) -> int:
    from controller.app.simulate import (
        KeySwitch,
        parse_dice_bias,
        parse_faults,
        run_simulation,
    )
    from controller.system.logs import configure_logging

    rounds = _whole(args.rounds, "rounds", 1, 10_000_000)
    seed = _whole(args.seed, "seed", 0, 2**32 - 1)
    sensor_url = None if args.sensor_url is None else _sensor_url(args.sensor_url)
    faults = parse_faults(args.faults or ("none" if sensor_url is not None else "default"))
    dice_bias = parse_dice_bias(args.dice_bias)
    minutes = args.table_minutes_per_round
    per_round = None if minutes is None else _whole(minutes, "table-minutes-per-round", 1, 1440)
    state_dir = directory_argument(args.state_dir)
    # RNG mode without an auditor's key: the simulation makes a throwaway one (run_simulation)
    config = (
        Config() if args.config is None else load_config(Path(args.config), escrow_required=False)
    )
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
            plain_rounds=args.plain_rounds,
            table_minutes_per_round=per_round,
            dice_bias=dice_bias,
            sensor_url=sensor_url,
            supervisor_key=KeySwitch(args.supervisor_key),
        )
    except ControllerError:
        raise  # ours say what failed: one line on stderr, exit 1
    except OSError as exc:  # a port taken, a directory not writable: the same, in one line
        raise ControllerError(f"simulate: {exc}") from exc


# --- selftest ---------------------------------------------------------------------------------


def selftest_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "A technician's check of the table, each check in turn: the config, the log's signing"
        " key (never created here), the RNG's known-answer test, the dice sensor's handshake"
        " (unless the table only plays RNG) and the pins. Exit 1 names every failure on stderr"
        f" in one line. {JSON_OR_TEXT}",
        "examples:\n"
        "  paigow-controller selftest\n"
        "  paigow-controller selftest --sensor-url /dev/ttyUSB0 --json",
    )
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--sensor-url", help="override the config's [sensor] url")
    p.add_argument("--state-dir", help="override the config's [storage] state_dir")
    json_argument(p)


def selftest_command(args: argparse.Namespace) -> int:
    """Each check in turn; the report on stdout (JSON, or words on a terminal); exit 1 naming
    every failure on stderr, in one line."""
    from controller.app.selftest import selftest
    from controller.system.logs import configure_logging

    given_dir = directory_argument(args.state_dir)
    config = load_config(Path(args.config), on_this_machine=True)
    configure_logging(logging.WARNING)
    state_dir = given_dir or Path(config.storage.state_dir)
    ok, report = selftest(
        config, config_name=args.config, state_dir=state_dir, sensor_url=args.sensor_url
    )
    document = {"ok": ok, "checks": report}
    print_report(args, document, render.selftest_report)
    if not ok:  # one line on stderr naming every failure (exit 1); stdout has the details
        failed = [name for name, r in report.items() if not r["ok"]]
        details = "; ".join(f"{name} failed: {report[name]['detail']}" for name in failed)
        raise ControllerError(f"selftest: {details}")
    return 0
