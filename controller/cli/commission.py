"""``paigow-controller commission``: a technician walks through the table's real hardware, step
by step, answering at the terminal; the report is printed and recorded in the audit log."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.cli import render
from controller.cli.args import (
    JSON_OR_TEXT,
    complain,
    describe,
    directory_argument,
    json_argument,
    print_report,
)
from controller.cli.args import whole_number as _whole
from controller.core.commissioning import (
    READINGS_MAX,
    STEP_TIMEOUT_MAX_S,
    TECHNICIAN_MAX_CHARS,
    technician_error,
)
from controller.core.config import Config
from controller.core.digits import quoted
from controller.errors import ControllerError, InstanceLocked, UsageError

if TYPE_CHECKING:
    from controller.app.commission import Console, Settings

EX_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
ANSWER_TIMEOUT_MAX_S = 3600


def commission_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "A technician's guided walk through the table's real hardware, with the same config,"
        " pins and dice sensor as run: each lamp lit in turn (answer y or n), the player's"
        " shake button, every dealer key and the supervisor key switch, the shaker's lid"
        " switch, the motor (one shake pattern, its motion pulses counted; the driver's"
        " maximum run time applies), the tamper loop, then the dice sensor's handshake and"
        " --readings readings of dice you set in the tray (confirm each against the tray)."
        " Each step says what to do; press Enter to start it or type s to skip it; a step"
        " waits at most --step-timeout seconds for the hardware.\n\n"
        "It takes the state directory's lock: it refuses to run while the controller runs"
        " (stop it first). Every output is driven to its safe value at the end, on an error"
        " and on Ctrl-C. The report is recorded in the audit log as a commissioning record"
        " (recall and export show it, verify-log checks it). Prompts go to stderr; the"
        f" report to stdout. {JSON_OR_TEXT}\n\n"
        "It records into the table's existing log and never makes one: a state directory"
        " without a log (or its signing key) is an error in one line, and nothing is"
        " written (make the log with init, or the controller's first start).\n\n"
        "--simulate walks simulate's simulated hardware instead (mock pins behind the"
        " simulated shaker and panel, the simulated dice sensor on a pseudo-terminal), its"
        " inputs worked and its dice rolled by the walk itself, what a person would see said"
        " on the terminal: practice on the bench. The technician still answers each question;"
        " it takes --state-dir (a practice log, never the config's), the built-in config"
        " unless --config is given, and the record says simulated.\n\n"
        "Exit codes: 0 every step passed or was skipped by the technician; 1 a step failed,"
        " or no answer came in time, or no log in the state directory; 130 interrupted"
        " (Ctrl-C); 2 a bad argument (a --state-dir that is no directory); 78 a bad config"
        " (its [storage] state_dir no directory).",
        "examples:\n"
        '  paigow-controller commission --technician "J. Rivera #4411"\n'
        '  paigow-controller commission --technician "J. Rivera #4411" --readings 20'
        " --step-timeout 60\n"
        "  paigow-controller commission --technician JR --config /etc/paigow-controller/config.toml"
        " --json > commissioning.json\n"
        "  paigow-controller init --config bench.toml --state-dir bench-state > bench-state.pub\n"
        '  paigow-controller commission --simulate --state-dir bench-state --technician "JR"'
        " --readings 2",
    )
    p.add_argument(
        "--technician",
        required=True,
        metavar="NAME",
        help=f"who commissions the table: name or badge, 1 to {TECHNICIAN_MAX_CHARS} printable"
        " ASCII characters (recorded)",
    )
    p.add_argument(
        "--config",
        help=f"default {DEFAULT_PATH} (with --simulate: the built-in defaults)",
    )
    p.add_argument(
        "--simulate",
        action="store_true",
        help="walk the simulated hardware of simulate (practice; needs --state-dir)",
    )
    p.add_argument(
        "--readings",
        default="10",
        metavar="N",
        help=f"dice sensor readings to take, 0 to {READINGS_MAX} (default 10)",
    )
    p.add_argument(
        "--step-timeout",
        default="30",
        metavar="SECONDS",
        help=f"how long a step waits for the hardware, 1 to {STEP_TIMEOUT_MAX_S} (default 30)",
    )
    p.add_argument(
        "--answer-timeout",
        default="600",
        metavar="SECONDS",
        help=f"how long a question waits for an answer before the walk is abandoned, 1 to"
        f" {ANSWER_TIMEOUT_MAX_S} (default 600)",
    )
    p.add_argument("--sensor-url", help="override the config's [sensor] url")
    p.add_argument("--state-dir", help="override the config's [storage] state_dir")
    json_argument(p)


def commission_command(args: argparse.Namespace) -> int:
    from controller.app.commission import Console, Settings, require_log
    from controller.system.logs import configure_logging

    readings, step_timeout, answer_timeout = _checked_numbers(args)
    state_dir = _checked_state_dir(args)
    if args.simulate and args.config is None:
        config = Config()
    else:
        # a bad config: exit 78 naming the key (its display host too: a technician is there)
        config_file = Path(args.config or DEFAULT_PATH)
        config = load_config(config_file, on_this_machine=not args.simulate)
    settings = Settings(
        technician=args.technician,
        state_dir=state_dir or Path(config.storage.state_dir),
        step_timeout_s=step_timeout,
        readings=readings,
        answer_timeout_s=answer_timeout,
        sensor_url=args.sensor_url,
    )
    option = None if state_dir is None else "--state-dir"
    require_log(settings.state_dir, option=option)  # before anything is opened or driven
    configure_logging(logging.ERROR)  # the walk's prompts share stderr with the logs
    console = Console(sys.stdin, sys.stderr, timeout_s=answer_timeout)
    document = _walk(args, config, settings, console, option)
    print_report(args, document, render.commission_report)
    return _exit_status(document)


def _checked_numbers(args: argparse.Namespace) -> tuple[int, int, int]:
    """The technician named, and the readings, the step timeout and the answer timeout."""
    problem = technician_error(args.technician)
    if problem is not None:
        raise UsageError(f"--technician {quoted(args.technician)} {problem}")
    readings = _whole(args.readings, "readings", 0, READINGS_MAX)
    step_timeout = _whole(args.step_timeout, "step-timeout", 1, STEP_TIMEOUT_MAX_S)
    answer_timeout = _whole(args.answer_timeout, "answer-timeout", 1, ANSWER_TIMEOUT_MAX_S)
    return readings, step_timeout, answer_timeout


def _checked_state_dir(args: argparse.Namespace) -> Path | None:
    """``--state-dir``, checked before the config is read (``--simulate`` needs one: a
    practice log, never the table's)."""
    from controller.app.commission import require_log

    state_dir = directory_argument(args.state_dir)
    if args.simulate and state_dir is None:
        raise UsageError("--simulate needs --state-dir (a practice log, never the table's)")
    if args.simulate and args.sensor_url is not None:
        raise UsageError("--simulate has its own dice sensor: it takes no --sensor-url")
    if state_dir is not None:  # an argument: checked before the config is read
        require_log(state_dir, option="--state-dir")
    return state_dir


def _walk(
    args: argparse.Namespace,
    config: Config,
    settings: Settings,
    console: Console,
    option: str | None,
) -> dict[str, Any]:
    """The commissioning walk, on the table's hardware or on the simulated bench."""
    from controller.app.commission import commission, describe_lock_error

    try:
        if not args.simulate:
            return commission(config, settings, console, state_dir_option=option)
        from controller.app.simulate import SimulatedBench

        with SimulatedBench(config) as bench:
            settings = dataclasses.replace(settings, sensor_url=bench.sensor_url)
            return commission(
                config,
                settings,
                console,
                pin_factory=bench.factory,
                hands=bench,
                state_dir_option=option,
            )
    except InstanceLocked as exc:
        raise ControllerError(describe_lock_error(exc)) from None


def _exit_status(document: Mapping[str, Any]) -> int:
    """1 for a report not recorded or a walk failed, EX_INTERRUPTED for one interrupted."""
    if document.get("record") is None:
        complain(f"commission: the report was not recorded: {document.get('record_error')}")
        return 1
    if document["outcome"] == "interrupted":
        complain(
            f"commission: interrupted; every output safe; recorded as record {document['record']}"
        )
        return EX_INTERRUPTED
    return 0 if document["passed"] else 1
