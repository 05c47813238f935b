"""``paigow-controller``: the command line. JSON on stdout, stable: auditors rely on it.

Exit codes: 0 success; 1 a check failed; 2 a bad argument (one line on stderr, nothing on
stdout, never a traceback); 78 a bad configuration (the message names the key).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from controller import appliance_cli, audit_cli
from controller.config import DEFAULT_PATH, Config, load_config
from controller.dice import FACES, Roll
from controller.digits import NumberError, is_ascii_digits, parse_bounded_int, quoted
from controller.errors import (
    EX_CONFIG,
    EX_SOFTWARE,
    EX_USAGE,
    ConfigError,
    ControllerError,
    UsageError,
)
from controller.position import BETTING_POSITIONS, Game, starting_position
from controller.result import result_of_roll
from controller.rng_cli import rng_replay, rng_replay_arguments, rng_stream, rng_stream_arguments
from controller.wagers import paytable_figures

PROG = "paigow-controller"
MESSAGE_MAX_CHARS = 500  # one line on stderr, even when an argument was 100 kB long


def one_line(message: str) -> str:
    """``message`` as one line of at most MESSAGE_MAX_CHARS: line breaks and other control
    characters escaped (an argument may hold them), the tail of a long message cut."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(text) > MESSAGE_MAX_CHARS:
        text = text[: MESSAGE_MAX_CHARS - 30] + f"... ({len(text)} characters)"
    return text


def _complain(message: str) -> None:
    sys.stderr.write(f"{PROG}: {one_line(message)}\n")


PATH_MAX_BYTES = 4096  # Linux's PATH_MAX and NAME_MAX: a longer name cannot name a file
NAME_MAX_BYTES = 255
NUMBER_MAX_CHARS = 20  # every number option's range fits (2**63 - 1 has 19 digits)
# Options checked when the command line is parsed, whichever command declares them: the
# command still decides the range (a number) or what the path must be.
PATH_OPTIONS = frozenset({"config", "state_dir", "key", "log", "sensor_url", "checkpoint"})
NUMBER_OPTIONS = frozenset({"total", "bank_seat", "rounds", "seed", "n_bytes", "last"})


def path_argument(text: str) -> str:
    """A file or directory name (or a sensor URL): 1..PATH_MAX bytes, no part over NAME_MAX,
    no control characters. Returned unchanged."""
    raw = os.fsencode(text)
    if not raw:
        raise argparse.ArgumentTypeError("an empty name")
    if any(c < " " or c == "\x7f" for c in text):
        raise argparse.ArgumentTypeError(f"{quoted(text)} has control characters")
    if len(raw) > PATH_MAX_BYTES or any(len(part) > NAME_MAX_BYTES for part in raw.split(b"/")):
        raise argparse.ArgumentTypeError(f"{quoted(text)} is too long to be a name")
    return text


def number_argument(text: str) -> str:
    """A whole number as text: ASCII digits only (int() also takes '٣', ' 7' and '1_0').
    Returned unchanged; the command checks the range."""
    if not is_ascii_digits(text) or len(text) > NUMBER_MAX_CHARS:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a whole number")
    return text


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line and exits 2, and checks every option
    in PATH_OPTIONS and NUMBER_OPTIONS as it parses them."""

    def error(self, message: str) -> NoReturn:
        _complain(message)
        raise SystemExit(EX_USAGE)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        if action.type is None and action.dest in PATH_OPTIONS:
            action.type = path_argument
        elif action.type is None and action.dest in NUMBER_OPTIONS:
            action.type = number_argument
        return action


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
    return whole_number(text, "total", 3, 18)


def _seat(text: str) -> int:
    return whole_number(text, "seat", 1, BETTING_POSITIONS)


def whole_number(text: str, what: str, low: int, high: int) -> int:
    """A whole-number argument: ASCII digits for a value in ``low..high``, else exit 2."""
    try:
        return parse_bounded_int(text, low=low, high=high, what=what)
    except NumberError as exc:
        raise UsageError(str(exc)) from None


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
    faces = [whole_number(part.strip(), "face", min(FACES), max(FACES)) for part in parts]
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
    Command(
        "checkpoint",
        "the log's latest signed checkpoint, to keep off the box",
        audit_cli.checkpoint_arguments,
        audit_cli.checkpoint_command,
    ),
    Command(
        "init",
        "a new state directory: the log's signing key and its first record",
        audit_cli.init_arguments,
        audit_cli.init_command,
    ),
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
    """Run one command. Whatever goes wrong ends in one line on stderr and an exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument, already said in one line (2)
        return exc.code if isinstance(exc.code, int) else EX_USAGE
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
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
    except Exception as exc:  # noqa: BLE001 - the last resort: a user never sees a traceback
        _complain(f"internal error: {type(exc).__name__}: {exc}")
        return EX_SOFTWARE
