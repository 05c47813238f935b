"""The audit log's commands: ``verify-log``, ``recall``, ``export`` and ``export-key``.

JSON on stdout (one document, or JSON lines for ``export``); a failed verification names the
first bad record on stderr and exits 1; a bad argument is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from controller.app.config_file import DEFAULT_PATH, load_config
from controller.app.instance_lock import InstanceLock
from controller.audit.log import (
    DB_NAME,
    KEY_FILE,
    MAX_KEY_FILE_BYTES,
    AuditLog,
    load_signer,
    open_for_reading,
    origin_for,
    read_latest_checkpoint,
)
from controller.audit.recall import DEFAULT_RECALL, export_lines, recall
from controller.audit.verify import verify_database, verify_export, verify_state_dir
from controller.cli.args import path_argument
from controller.core.config import StorageConfig
from controller.core.digits import NumberError, parse_bounded_int, quoted
from controller.core.note import NoteError, Verifier
from controller.errors import AuditLogError, LogIntegrityError, UsageError
from controller.files import read_capped

MAX_NOTE_BYTES = 16 * 1024  # a signed checkpoint is a few hundred bytes


def _state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or StorageConfig().state_dir)


def _state_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir",
        help=f"the controller's state directory (default {StorageConfig().state_dir})",
    )


def _print(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def _argument_file(option: str, name: str, limit: int) -> str:
    """The text of a small file named on the command line (a key, a checkpoint)."""
    try:
        return read_capped(Path(name), limit).decode("utf-8")
    except OSError as exc:
        raise UsageError(f"{option} {quoted(name)}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option} {quoted(name)}: {exc}") from None


def log_verifier(state_dir: Path, key_file: str | None) -> Verifier:
    """The verifier key from ``--key`` (note-verifier form), else from the log's own key."""
    if key_file is not None:
        text = _argument_file("--key", key_file, MAX_KEY_FILE_BYTES)
        try:
            return Verifier.parse(text)
        except NoteError as exc:
            raise UsageError(f"--key {quoted(key_file)}: not a verifier key ({exc})") from None
    signer = load_signer(state_dir)
    if signer is None:
        raise AuditLogError(f"audit log: no key in {state_dir}; pass the verifier key with --key")
    return signer.verifier


# --- verify-log -----------------------------------------------------------------------------

MAX_JOBS = 64


def verify_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)
    copy = p.add_mutually_exclusive_group()
    copy.add_argument(
        "--db",
        type=path_argument,
        help="verify this log file instead (a backup); the key: --key, or --state-dir's",
    )
    copy.add_argument(
        "--export",
        type=path_argument,
        help="verify this export instead (JSON lines of export); the key: --key, or --state-dir's",
    )
    p.add_argument("--key", help="file holding the log's verifier key (name+keyid+base64)")
    p.add_argument(
        "--checkpoint",
        help="a signed checkpoint kept elsewhere (paigow-controller checkpoint): the log must"
        " extend it",
    )
    p.add_argument(
        "--jobs",
        help="processes for a long log (default: one per available core; 1: this one only)",
    )


def verify(args: argparse.Namespace) -> int:
    jobs = None
    if args.jobs is not None:
        try:
            jobs = parse_bounded_int(args.jobs, low=1, high=MAX_JOBS, what="--jobs")
        except NumberError as exc:
            raise UsageError(str(exc)) from None
    copy = _copy_to_verify(args)
    state_dir = _state_dir(args)
    verifier = log_verifier(state_dir, args.key)
    checkpoint = None
    if args.checkpoint is not None:
        checkpoint = _argument_file("--checkpoint", args.checkpoint, MAX_NOTE_BYTES)
    try:
        if copy is None:
            report = verify_state_dir(state_dir, verifier, checkpoint=checkpoint, workers=jobs)
        elif args.export is not None:
            report = verify_export(copy, verifier, checkpoint=checkpoint)
        else:
            report = verify_database(copy, verifier, checkpoint=checkpoint, workers=jobs)
    except LogIntegrityError as exc:
        _print({"ok": False, "record": exc.record, "error": str(exc)})
        sys.stderr.write(f"paigow-controller: verify-log: {exc}\n")
        return 1
    _print({**report.as_dict(), "key": str(verifier)})
    return 0


def _copy_to_verify(args: argparse.Namespace) -> Path | None:
    """The backup (``--db``) or export (``--export``) file to verify, if one is named. Its
    verifier key is never taken from the copy itself: ``--key``, or the state directory's."""
    option, name = ("--db", args.db) if args.db is not None else ("--export", args.export)
    if name is None:
        return None
    path = Path(name)
    try:
        is_file = path.is_file()
    except OSError as exc:
        raise UsageError(f"{option} {quoted(name)}: {exc.strerror or exc}") from None
    if not is_file:
        what = "not a regular file" if path.exists() else "no such file"
        raise UsageError(f"{option} {quoted(name)}: {what}")
    if args.key is None and args.state_dir is None:
        raise UsageError(
            f"{option} needs the log's verifier key: --key FILE (what export-key prints)"
            " or --state-dir D"
        )
    return path


# --- recall ---------------------------------------------------------------------------------


def recall_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)
    p.add_argument("--last", default=str(DEFAULT_RECALL), help="how many rounds (default 10)")


def recall_command(args: argparse.Namespace) -> int:
    try:
        last = parse_bounded_int(args.last, low=1, high=10_000, what="--last")
    except NumberError as exc:
        raise UsageError(str(exc)) from None
    _print({"rounds": recall(_state_dir(args), last=last)})
    return 0


# --- export ---------------------------------------------------------------------------------


def export_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)


def export(args: argparse.Namespace) -> int:
    """One JSON line per record (``controller.audit.recall.export_lines``)."""
    for line in export_lines(_state_dir(args)):
        _print(line)
    return 0


# --- checkpoint and init ---------------------------------------------------------------------


def checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)


def checkpoint_command(args: argparse.Namespace) -> int:
    """The log's latest signed checkpoint (a C2SP signed note), to keep off the box."""
    db = open_for_reading(_state_dir(args))
    try:
        latest = read_latest_checkpoint(db)
    finally:
        db.close()
    if latest is None:
        raise AuditLogError("audit log: the log has no signed checkpoint yet")
    sys.stdout.write(latest)
    return 0


def init_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")


def init_command(args: argparse.Namespace) -> int:
    """A new state directory: the log's signing key and its first record. Refuses a directory
    that already holds a log or a key (a key is never replaced)."""
    config = load_config(Path(args.config))
    state_dir = Path(args.state_dir or config.storage.state_dir)
    lock = InstanceLock.acquire(state_dir)
    try:
        if (state_dir / KEY_FILE).exists() or (state_dir / DB_NAME).exists():
            raise AuditLogError(f"audit log: {state_dir} already holds a log or a key")
        with AuditLog.open(state_dir, origin=origin_for(config.table.name)) as log:
            assert log.signer is not None
            verifier = log.signer.verifier
    finally:
        lock.release()
    sys.stdout.write(f"{verifier}\n")
    return 0


# --- export-key -----------------------------------------------------------------------------


def key_arguments(p: argparse.ArgumentParser) -> None:
    _state_dir_argument(p)


def export_key(args: argparse.Namespace) -> int:
    verifier = log_verifier(_state_dir(args), None)
    sys.stdout.write(f"{verifier}\n")
    return 0


# --- dice-stats ------------------------------------------------------------------------------

_DICE_STATS_EXAMPLES = """\
examples:
  paigow-controller dice-stats --state-dir /var/lib/paigow-controller
  paigow-controller dice-stats --state-dir copy-of-state --window all --json"""


def dice_stats_arguments(p: argparse.ArgumentParser) -> None:
    from controller.core.dice_monitor import Window

    p.description = (
        "The dice's face counts, their chi-square p-values and the dice monitor's figures,"
        " counted again from the log's records (a copy of the state directory will do). JSON"
        " with --json or when stdout is not a terminal; a table on a terminal."
    )
    p.epilog = _DICE_STATS_EXAMPLES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    _state_dir_argument(p)
    p.add_argument(
        "--window",
        default="set",
        choices=[str(w) for w in Window if w is not Window.TEST],
        help="set: since the dice were put in (default); shift: since the shift change;"
        " all: since the log began",
    )
    p.add_argument("--json", action="store_true", help="JSON even on a terminal")


def dice_stats_command(args: argparse.Namespace) -> int:
    from controller.audit.dice_stats import dice_stats, table_text
    from controller.core.dice_monitor import Window

    stats = dice_stats(_state_dir(args), Window(args.window))
    if args.json or not sys.stdout.isatty():
        _print(stats)
    else:
        sys.stdout.write(table_text(stats))
    return 0
