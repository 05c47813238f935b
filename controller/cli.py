"""``paigow-controller``: the command line. JSON on stdout, stable: auditors rely on it.

Exit codes: 0 success; 1 a check failed; 2 a bad argument (one line on stderr, nothing on
stdout, never a traceback); 78 a bad configuration (the message names the key).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from controller import appliance_cli, audit_cli
from controller.config import DEFAULT_PATH, Config, load_config
from controller.dice import FACES, Roll
from controller.errors import EX_CONFIG, EX_USAGE, ConfigError, ControllerError, UsageError
from controller.position import BETTING_POSITIONS, Game, starting_position
from controller.result import result_of_roll
from controller.rng_cli import rng_replay, rng_replay_arguments, rng_stream, rng_stream_arguments
from controller.wagers import paytable_figures

PROG = "paigow-controller"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: {message}\n")
        raise SystemExit(EX_USAGE)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, sort_keys=False) + "\n")


def _config_or_default(path: str | None) -> Config:
    return Config() if path is None else load_config(Path(path))


# --- position -------------------------------------------------------------------------------


def _total(text: str) -> int:
    value = _int(text, "total")
    if not 3 <= value <= 18:
        raise UsageError(f"total {value} is not a three-dice total (3..18)")
    return value


def _seat(text: str) -> int:
    value = _int(text, "seat")
    if not 1 <= value <= BETTING_POSITIONS:
        raise UsageError(f"seat {value} is not a betting position (1..{BETTING_POSITIONS})")
    return value


def _int(text: str, what: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a whole number") from None


def _position_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--game", required=True, choices=[g.value for g in Game])
    p.add_argument("--total", required=True, help="the dice total, 3..18")
    p.add_argument("--bank-seat", help="the seat of the player who banks or co-banks, 1..6")


def _position(args: argparse.Namespace) -> int:
    game = Game(args.game)
    total = _total(args.total)
    bank_seat = None if args.bank_seat is None else _seat(args.bank_seat)
    position = starting_position(game, total, bank_seat=bank_seat)
    bank = "dealer" if bank_seat is None else f"seat {bank_seat}"
    _print_json({"game": game.value, "total": total, "bank": bank, "label": position.label})
    return 0


# --- wagers ---------------------------------------------------------------------------------


def _dice(text: str) -> Roll:
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"--dice needs three faces, red first (R,B,B); got {len(parts)}")
    faces = [_int(part.strip(), "face") for part in parts]
    for face in faces:
        if face not in FACES:
            raise UsageError(f"face {face} is not 1..6")
    return Roll(faces[0], (faces[1], faces[2]))


def _wagers_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dice", required=True, help="R,B,B: the red die first, then the two blue")
    p.add_argument("--config", help="config file with the casino's paytables")


def _wagers(args: argparse.Namespace) -> int:
    roll = _dice(args.dice)
    config = _config_or_default(args.config)
    result = result_of_roll(config.table.game, roll, bank_seat=None, paytables=config.paytables)
    assert result.wagers is not None
    record = result.wagers.as_record()
    _print_json(
        {
            "dice": roll.as_record(),
            "total": roll.total,
            "sum": record["sum"],
            "match": record["match"],
            "beat_it": record["beat_it"],
            "payouts": result.payouts,
        }
    )
    return 0


# --- paytables ------------------------------------------------------------------------------


def _paytables_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="config file with the casino's paytables")


def _paytables(args: argparse.Namespace) -> int:
    config = _config_or_default(args.config)
    _print_json(
        {
            "outcomes": 216,
            "paytables": [paytable_figures(t).as_report() for t in config.paytables],
        }
    )
    return 0


# --- check-config -----------------------------------------------------------------------------


def _check_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")


def _check_config(args: argparse.Namespace) -> int:
    config = load_config(Path(args.config))
    _print_json(
        {
            "config": args.config,
            "sha256": config.source_sha256,
            "table": config.table.name,
            "game": str(config.table.game),
            "mode": str(config.table.mode),
            "paytables": [t.name for t in config.paytables],
        }
    )
    return 0


COMMANDS: list[Command] = [
    Command(
        "position", "the position that receives the first stack", _position_arguments, _position
    ),
    Command("wagers", "the dice side wager outcomes of one roll", _wagers_arguments, _wagers),
    Command(
        "paytables",
        "exact hit frequency and house edge of each paytable",
        _paytables_arguments,
        _paytables,
    ),
    Command(
        "check-config",
        "validate a config file (exit 78 naming the bad key)",
        _check_config_arguments,
        _check_config,
    ),
    Command(
        "run",
        "run the table (what systemd starts)",
        appliance_cli.run_arguments,
        appliance_cli.run_command,
    ),
    Command(
        "simulate",
        "run the table on simulated hardware",
        appliance_cli.simulate_arguments,
        appliance_cli.simulate_command,
    ),
    Command(
        "selftest",
        "check config, keys, RNG, sensor and pins",
        appliance_cli.selftest_arguments,
        appliance_cli.selftest_command,
    ),
    Command("rng-stream", "raw RNG output for test suites", rng_stream_arguments, rng_stream),
    Command("rng-replay", "replay revealed RNG sessions", rng_replay_arguments, rng_replay),
    Command("verify-log", "verify the audit log", audit_cli.verify_arguments, audit_cli.verify),
    Command("recall", "the last rounds", audit_cli.recall_arguments, audit_cli.recall_command),
    Command("export", "the audit log as JSON lines", audit_cli.export_arguments, audit_cli.export),
    Command("export-key", "the log's verifier key", audit_cli.key_arguments, audit_cli.export_key),
]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Pai Gow table controller")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help)
        command.arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return EX_USAGE
    except ConfigError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return EX_CONFIG
    except ControllerError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0
