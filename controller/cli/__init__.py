"""``paigow-controller``: the command line. JSON on stdout, stable: auditors rely on it; the
reading commands print a readable report instead when stdout is a terminal (``--json`` keeps
the JSON there too). ``paigow-controller --version`` prints the package's version (and the
release's id on a table).

Exit codes: 0 success; 1 a check failed; 2 a bad argument (one line on stderr, nothing on
stdout, never a traceback); 78 a bad configuration (the message names the key); 70 anything
unforeseen (one line too).

Each subcommand lives in a module of this package and is imported only when it runs: an
auditor's ``verify-log`` loads neither gpiozero, nor pyserial, nor the HTTP server.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.cli.args import PROG, Parser, complain
from controller.errors import (
    EX_CONFIG,
    EX_SOFTWARE,
    EX_USAGE,
    ConfigError,
    ControllerError,
    NumberError,
    UsageError,
)


@dataclass(frozen=True)
class Command:
    """A subcommand: its module (imported only when it is the one run), the function there
    that declares its arguments and the one that runs it."""

    name: str
    help: str
    module: str
    arguments: str
    run: str


_GAME, _APP = "controller.cli.game", "controller.cli.appliance"
_RNG, _AUDIT = "controller.cli.rng", "controller.cli.audit"

COMMANDS: list[Command] = [
    Command(
        "position",
        "the position that receives the first stack",
        _GAME,
        "position_arguments",
        "position",
    ),
    Command(
        "deal-plan",
        "which tiles each position receives, for a delivery style",
        _GAME,
        "deal_plan_arguments",
        "deal_plan",
    ),
    Command(
        "wagers", "the dice side wager outcomes of one roll", _GAME, "wagers_arguments", "wagers"
    ),
    Command(
        "paytables",
        "exact hit frequency and house edge of each paytable",
        _GAME,
        "paytables_arguments",
        "paytables",
    ),
    Command(
        "check-config",
        "validate a config file (exit 78 naming the bad key)",
        _GAME,
        "check_config_arguments",
        "check_config",
    ),
    Command("run", "run the table (what systemd starts)", _APP, "run_arguments", "run_command"),
    Command(
        "simulate",
        "run the table on simulated hardware",
        _APP,
        "simulate_arguments",
        "simulate_command",
    ),
    Command(
        "selftest",
        "check config, keys, RNG, sensor and pins",
        _APP,
        "selftest_arguments",
        "selftest_command",
    ),
    Command(
        "commission",
        "a technician's guided walk through the table's hardware, recorded",
        "controller.cli.commission",
        "commission_arguments",
        "commission_command",
    ),
    Command(
        "supervise",
        "a supervisor's action at the service terminal (the supervisor key must be on)",
        "controller.cli.supervise",
        "supervise_arguments",
        "supervise",
    ),
    Command(
        "status",
        "the table's status on one screen",
        "controller.cli.status",
        "status_arguments",
        "status_command",
    ),
    Command(
        "rng-stream", "raw RNG output for test suites", _RNG, "rng_stream_arguments", "rng_stream"
    ),
    Command(
        "rng-replay", "replay revealed RNG sessions", _RNG, "rng_replay_arguments", "rng_replay"
    ),
    Command(
        "rng-escrow-key",
        "make the auditor's key pair for the RNG's seed escrow (0600) and print its public key",
        _RNG,
        "rng_escrow_key_arguments",
        "rng_escrow_key",
    ),
    Command(
        "rng-reveal",
        "the auditor's reveal of RNG sessions a restart ended unrevealed, from their escrow",
        _RNG,
        "rng_reveal_arguments",
        "rng_reveal",
    ),
    Command("verify-log", "verify the audit log", _AUDIT, "verify_arguments", "verify"),
    Command(
        "recall",
        "game recall: the last rounds, those between two times, or one round",
        _AUDIT,
        "recall_arguments",
        "recall_command",
    ),
    Command(
        "dice-stats",
        "the dice's counts and the dice monitor, from the log",
        _AUDIT,
        "dice_stats_arguments",
        "dice_stats_command",
    ),
    Command(
        "meters",
        "the table's meters (games, no rolls, corrections, voids, lid, tamper), from the log",
        _AUDIT,
        "meters_arguments",
        "meters_command",
    ),
    Command("export", "the audit log as JSON lines", _AUDIT, "export_arguments", "export"),
    Command(
        "backup",
        "a consistent copy of the live audit log (not cp)",
        "controller.cli.backup",
        "backup_arguments",
        "backup_command",
    ),
    Command(
        "restore",
        "the audit log from a backup into a new state directory, verified first; never a rollback",
        "controller.cli.backup",
        "restore_arguments",
        "restore_command",
    ),
    Command("export-key", "the log's verifier key", _AUDIT, "key_arguments", "export_key"),
    Command(
        "checkpoint",
        "the log's latest signed checkpoint, to keep off the box",
        _AUDIT,
        "checkpoint_arguments",
        "checkpoint_command",
    ),
    Command(
        "verify-software",
        "check the installed software against its signed manifest (exit 1: it differs)",
        "controller.cli.software",
        "verify_software_arguments",
        "verify_software",
    ),
    Command(
        "manifest",
        "write the release's signed manifest of the installed packages",
        "controller.cli.software",
        "manifest_arguments",
        "manifest",
    ),
    Command(
        "release-key",
        "make a release signing key (0600) and print its verifier key",
        "controller.cli.software",
        "release_key_arguments",
        "release_key",
    ),
    Command(
        "witness",
        "the fleet's witness: verify every table's log over MQTT and cosign its checkpoints",
        "controller.cli.witness",
        "witness_arguments",
        "witness",
    ),
    Command(
        "witness-key",
        "the witness's cosigner key (made if missing): prints its verifier key",
        "controller.cli.witness",
        "witness_key_arguments",
        "witness_key",
    ),
    Command(
        "fleet-ca",
        "the casino's fleet CA: the broker's, the tables' and the witness's TLS certificates",
        "controller.cli.fleet_ca",
        "fleet_ca_arguments",
        "fleet_ca",
    ),
    Command(
        "init",
        "a new state directory: the log's signing key and its first record",
        _AUDIT,
        "init_arguments",
        "init_command",
    ),
]
_BY_NAME = {command.name: command for command in COMMANDS}


DISTRIBUTION = "paigow-controller"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
PYPROJECT_MAX_BYTES = 64 * 1024


def package_version() -> str:
    """The installed distribution's version; in a source tree that is not installed, the
    version its pyproject.toml declares; else "unknown"."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    import tomllib

    from controller.files import read_capped

    try:
        project = tomllib.loads(read_capped(PYPROJECT, PYPROJECT_MAX_BYTES).decode("utf-8"))
        version = project["project"]["version"]
    except (OSError, ValueError, KeyError, TypeError):  # TOMLDecodeError is a ValueError
        return "unknown"
    return version if isinstance(version, str) else "unknown"


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from controller.software.release import installed_release

        # The version alone names two different releases of one version: the release's id
        # (the version and a digest of every file installed) names which one runs.
        release = installed_release()
        named = f" (release {release})" if release else ""  # a checkout is no release
        sys.stdout.write(f"{PROG} {package_version()}{named}\n")
        parser.exit(0)


DESCRIPTION = """\
The controller under a Pai Gow table: the dice shaker, the optical dice sensor, the auditable
RNG, the starting position and the dice side wagers, with a signed audit log. Each command's
--help says what it does, with examples. Reading commands (recall, verify-log, dice-stats,
meters, selftest, paytables, check-config) print a report on a terminal and JSON with --json or
in a pipe. Exit codes: 0 success, 1 a check failed, 2 a bad argument, 78 a bad configuration."""
EXAMPLES = """\
examples:
  paigow-controller recall --help
  paigow-controller recall --since "2026-11-30 14:00"
  paigow-controller verify-log --state-dir /var/lib/paigow-controller --key log.pub
  paigow-controller meters --since "2026-11-30 14:00"
  paigow-controller --version"""


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser. Only the ``chosen`` subcommand's module is imported to declare its
    arguments (all of them when None, for documentation and tests)."""
    parser = Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND"
    )
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help)
        if chosen is None or command.name == chosen:
            module = importlib.import_module(command.module)
            getattr(module, command.arguments)(p)
            p.set_defaults(run=getattr(module, command.run))
    return parser


def _chosen(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in _BY_NAME else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Whatever goes wrong ends in one line on stderr and an exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = _chosen(argv)
    parser = build_parser(chosen) if chosen is not None else build_parser("")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument, already said in one line (2)
        return exc.code if isinstance(exc.code, int) else EX_USAGE
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (UsageError, NumberError) as exc:
        complain(str(exc))
        return EX_USAGE
    except ConfigError as exc:
        complain(str(exc))
        return EX_CONFIG
    except ControllerError as exc:
        complain(str(exc))
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        complain("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: a user never sees a traceback
        complain(f"internal error: {type(exc).__name__}: {exc}")
        return EX_SOFTWARE
