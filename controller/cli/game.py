"""The game's own commands: ``position``, ``deal-plan``, ``wagers``, ``paytables`` and
``check-config``. They decide nothing themselves: the core (controller/core/) does, from the
rule texts. The reading commands ``paytables`` and ``check-config`` print a report on a
terminal and JSON with ``--json`` or in a pipe; the others print JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.cli import render
from controller.cli.args import (
    JSON_OR_TEXT,
    describe,
    directory_argument,
    json_argument,
    print_json,
    print_report,
    whole_number,
)
from controller.core.config import Config
from controller.core.dealing import DeliveryStyle, dealing_plan
from controller.core.dice import FACES, Roll
from controller.core.position import BETTING_POSITIONS, Game, starting_position
from controller.core.result import bank_label, result_of_roll
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
    describe(
        p,
        "The position that receives the first stack (Pai Gow tiles) or the first hand (Pai Gow"
        " poker) for a dice total, counted counterclockwise with the bank as number one: the"
        " dealer, or the seat of the player who banks or co-banks (621a.8(c), 621a.11(j),"
        " 645a.12). Prints JSON: the game, the total, the bank and the position's label.",
        "examples:\n"
        "  paigow-controller position --game tiles --total 9\n"
        "  paigow-controller position --game poker --total 5 --bank-seat 3",
    )
    p.add_argument("--game", required=True, choices=[g.value for g in Game])
    p.add_argument("--total", required=True, help="the dice total, 3..18")
    p.add_argument("--bank-seat", help="the seat of the player who banks or co-banks, 1..6")


def position(args: argparse.Namespace) -> int:
    game = Game(args.game)
    total = _total(args.total)
    bank_seat = None if args.bank_seat is None else _seat(args.bank_seat)
    position = starting_position(game, total, bank_seat=bank_seat)
    bank = bank_label(bank_seat)
    print_json({"game": game.value, "total": total, "bank": bank, "label": position.label})
    return 0


# --- deal-plan ------------------------------------------------------------------------------

DEAL_PLAN_DESCRIPTION = """\
The dealing plan of a Pai Gow (tiles) round: the eight positions in dealing order,
counterclockwise from the starting position (621a.8(c), or 621a.11(j) when a player banks),
the dealer and the Dead Hand included, each with the four tiles it receives, for the standard
procedure of 621a.8(d) or one of the nine delivery styles of 621a.9 the bank may choose
(621a.11(i)).

Prints JSON: the style, its section, the starting position and the plan, tile by tile: each
position's tiles as {"stack": 1..8, "levels": [...]} items in the order the dealer takes them.
Stacks are numbered 1..8 from the dealer's right as they lie when dealing begins; level 1 is a
stack's top tile, 4 its bottom tile."""


def _styles_help() -> str:
    width = max(len(s.value) for s in DeliveryStyle)
    rows = "\n".join(f"  {s.value:<{width}}  {s.section:<9}  {s.rule_name}" for s in DeliveryStyle)
    return f"styles:\n{rows}"


DEAL_PLAN_EXAMPLE = """\
example:
  paigow-controller deal-plan --style jung-quat --total 9 --bank-seat 3"""


def deal_plan_arguments(p: argparse.ArgumentParser) -> None:
    describe(p, DEAL_PLAN_DESCRIPTION, f"{DEAL_PLAN_EXAMPLE}\n\n{_styles_help()}")
    p.add_argument(
        "--style",
        required=True,
        choices=[s.value for s in DeliveryStyle],
        metavar="STYLE",
        help="the delivery style the bank chose (standard when it chose none, 621a.11(i));"
        " one of the styles below",
    )
    p.add_argument("--total", required=True, help="the dice total, 3..18")
    p.add_argument("--bank-seat", help="the seat of the player who banks, 1..6")


def deal_plan(args: argparse.Namespace) -> int:
    style = DeliveryStyle(args.style)
    total = _total(args.total)
    bank_seat = None if args.bank_seat is None else _seat(args.bank_seat)
    start = starting_position(Game.TILES, total, bank_seat=bank_seat)
    print_json(dealing_plan(Game.TILES, style, start).as_record())
    return 0


# --- wagers ---------------------------------------------------------------------------------


def _dice(text: str) -> Roll:
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"--dice needs three faces, red first (R,B,B); got {len(parts)}")
    faces = [whole_number(part.strip(), "face", min(FACES), max(FACES)) for part in parts]
    return Roll(faces[0], (faces[1], faces[2]))


def wagers_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "The dice side wagers' outcomes for one roll of the three dice (red first): whether"
        " the sum, match and beat-it wagers win, and what each configured paytable pays"
        " (621a.5(e)(2)-(4), 645c.2). Only the casino's paytables pay; none is invented."
        " Prints JSON.",
        "examples:\n"
        "  paigow-controller wagers --dice 6,2,1\n"
        "  paigow-controller wagers --dice 4,4,2 --config /etc/paigow-controller/config.toml",
    )
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
    describe(
        p,
        "Each side wager paytable's exact hit frequency and house edge, counted over the 216"
        " equally likely rolls of the three dice (fractions, and percentages to four places)."
        " Without --config, the built-in sum paytables A and B of 645c.2(g). A bad config"
        f" exits 78 naming the key. {JSON_OR_TEXT}",
        "examples:\n"
        "  paigow-controller paytables\n"
        "  paigow-controller paytables --config /etc/paigow-controller/config.toml --json",
    )
    p.add_argument("--config", help="config file with the casino's paytables")
    json_argument(p)


def paytables(args: argparse.Namespace) -> int:
    config = _config_or_default(args.config)
    report = {
        "outcomes": 216,
        "paytables": [paytable_figures(t).as_report() for t in config.paytables],
    }
    print_report(args, report, render.paytables_report)
    return 0


# --- check-config -----------------------------------------------------------------------------


def check_config_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Reads a config file as the controller would at start-up and says whether it is valid:"
        " a bad one (an unknown key, a value out of range, a file too large, a display host that"
        " is not this machine's) exits 78 with one line naming the key. A valid one shows its"
        " SHA-256 (the config_loaded record carries the same), the table, game, mode,"
        " paytables and the log's origin. With --state-dir"
        " the log there is checked against the config too: one of another origin than"
        f" [fleet] origin exits 78 naming fleet.origin. {JSON_OR_TEXT}",
        "examples:\n"
        "  paigow-controller check-config\n"
        "  paigow-controller check-config --config new-config.toml --json\n"
        "  paigow-controller check-config --state-dir /var/lib/paigow-controller",
    )
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--state-dir", help="also check the log there against the config")
    json_argument(p)


def check_config(args: argparse.Namespace) -> int:
    from controller.audit.log import configured_origin, require_origin

    config = load_config(Path(args.config), on_this_machine=True)
    state_dir = directory_argument(args.state_dir)
    if state_dir is not None:
        require_origin(state_dir, config)
    report = {
        "config": args.config,
        "sha256": config.source_sha256,
        "table": config.table.name,
        "game": str(config.table.game),
        "mode": str(config.table.mode),
        "paytables": [t.name for t in config.paytables],
        "origin": configured_origin(config),
    }
    print_report(args, report, render.config_report)
    return 0
