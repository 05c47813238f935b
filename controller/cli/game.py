"""The game's own commands: ``position``, ``wagers``, ``paytables`` and ``check-config``. They
decide nothing themselves: the core (controller/core/) does, from the rule texts."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.cli.args import print_json, whole_number
from controller.core.config import Config
from controller.core.dice import FACES, Roll
from controller.core.position import BETTING_POSITIONS, Game, starting_position
from controller.core.result import result_of_roll
from controller.core.wagers import paytable_figures
from controller.errors import UsageError


def _config_or_default(path: str | None) -> Config:
    return Config() if path is None else load_config(Path(path))


# --- position -------------------------------------------------------------------------------


def _total(text: str) -> int:
    return whole_number(text, "total", 3, 18)


def _seat(text: str) -> int:
    return whole_number(text, "seat", 1, BETTING_POSITIONS)


def position_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--game", required=True, choices=[g.value for g in Game])
    p.add_argument("--total", required=True, help="the dice total, 3..18")
    p.add_argument("--bank-seat", help="the seat of the player who banks or co-banks, 1..6")


def position(args: argparse.Namespace) -> int:
    game = Game(args.game)
    total = _total(args.total)
    bank_seat = None if args.bank_seat is None else _seat(args.bank_seat)
    position = starting_position(game, total, bank_seat=bank_seat)
    bank = "dealer" if bank_seat is None else f"seat {bank_seat}"
    print_json({"game": game.value, "total": total, "bank": bank, "label": position.label})
    return 0


# --- wagers ---------------------------------------------------------------------------------


def _dice(text: str) -> Roll:
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"--dice needs three faces, red first (R,B,B); got {len(parts)}")
    faces = [whole_number(part.strip(), "face", min(FACES), max(FACES)) for part in parts]
    return Roll(faces[0], (faces[1], faces[2]))


def wagers_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dice", required=True, help="R,B,B: the red die first, then the two blue")
    p.add_argument("--config", help="config file with the casino's paytables")


def wagers(args: argparse.Namespace) -> int:
    roll = _dice(args.dice)
    config = _config_or_default(args.config)
    result = result_of_roll(config.table.game, roll, bank_seat=None, paytables=config.paytables)
    assert result.wagers is not None
    record = result.wagers.as_record()
    print_json(
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


def paytables_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="config file with the casino's paytables")


def paytables(args: argparse.Namespace) -> int:
    config = _config_or_default(args.config)
    print_json(
        {
            "outcomes": 216,
            "paytables": [paytable_figures(t).as_report() for t in config.paytables],
        }
    )
    return 0


# --- check-config -----------------------------------------------------------------------------


def check_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")


def check_config(args: argparse.Namespace) -> int:
    config = load_config(Path(args.config))
    print_json(
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
