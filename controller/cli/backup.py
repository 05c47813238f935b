"""``paigow-controller backup``: a consistent copy of the live audit log
(controller/audit/backup.py), and what ``verify-log`` needs to verify a copy or an export."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli import render
from controller.cli.args import describe, json_argument, path_argument, print_report
from controller.core.config import StorageConfig


def backup_arguments(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Copy the audit log while the controller writes it, through SQLite's online backup"
        " API, into the file OUT (written aside, fsynced, then renamed). A cp of a live WAL"
        " database is not a backup. The copy holds no private key. A report on a terminal;"
        " JSON with --json or in a pipe.",
        "examples:\n"
        "  paigow-controller backup --state-dir /var/lib/paigow-controller"
        " /media/usb/table-1-2026-12-01.db\n"
        "  paigow-controller verify-log --db /media/usb/table-1-2026-12-01.db --key log.pub",
    )
    json_argument(p)
    p.add_argument(
        "--state-dir",
        help=f"the controller's state directory (default {StorageConfig().state_dir})",
    )
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("out", metavar="OUT", type=path_argument, help="the backup file to write")


def backup_command(args: argparse.Namespace) -> int:
    from controller.audit.backup import backup_log

    state_dir = Path(args.state_dir or StorageConfig().state_dir)
    report = backup_log(state_dir, Path(args.out), force=args.force)
    doc = report.as_dict(state_dir)
    print_report(args, doc, render.backup_report)
    return 0


# --- restore --------------------------------------------------------------------------------

_RESTORE_DESCRIPTION = """\
Restores the audit log from a backup (what backup wrote) into a NEW state directory (absent,
or empty but for the log's anchor), after the card failed or was replaced. Before anything is
written it verifies the backup with the log's verifier key (--key, or the one of
--signing-key): every record, the hash chain, the signed checkpoints and the one signing the
whole backup; with --archive, the archive files' signed chain; with --checkpoint, that the
backup extends a checkpoint kept off the box.

It refuses to restore over a log (the target holds audit.db), into a directory holding
anything else, and when an anchor in sight shows a newer log than the backup (or another
log): the one in the target directory and the copy in [storage] anchor_copy_dir (a copy
directory configured but missing is refused too). A rollback never passes silently: restore
the newest backup.

The target is held with the controller's lock (a running controller or a second restore
is refused), the copy written inside it, fsynced and checked, then put in place (the log
last).
--signing-key puts the log's signing key beside it (0600); without it the controller takes
the key from its systemd credential. Then verify-log, and start the controller on it: with no
anchor it latches anchor_missing, cleared at the terminal with a note saying why (the restore
is recorded with who did it). Exit 0 restored; 1 refused (one line, nothing written); 2 a bad
argument; 78 a config whose table is not the backup's (fleet.origin or table.name).

A report on a terminal; JSON with --json or in a pipe."""
_RESTORE_EXAMPLES = """\
examples:
  paigow-controller restore /media/usb/table-1-2026-12-01.db --key log.pub \\
      --signing-key /media/keys/audit-log.key --state-dir /var/lib/paigow-controller
  paigow-controller restore table-1.db --archive /media/usb/archive --key log.pub \\
      --state-dir /var/lib/paigow-controller --checkpoint witness-checkpoint.txt"""


def restore_arguments(p: argparse.ArgumentParser) -> None:
    from controller.app.config_file import DEFAULT_PATH

    describe(p, _RESTORE_DESCRIPTION, _RESTORE_EXAMPLES)
    json_argument(p)
    p.add_argument(
        "backup", metavar="BACKUP", type=path_argument, help="the backup file (backup's OUT)"
    )
    p.add_argument(
        "--state-dir",
        help="the new state directory (default: the config's [storage] state_dir)",
    )
    p.add_argument("--config", default=str(DEFAULT_PATH), help=f"default {DEFAULT_PATH}")
    p.add_argument("--key", help="the log's verifier key (export-key's output)")
    p.add_argument(
        "--signing-key",
        type=path_argument,
        metavar="FILE",
        help="the log's signing key (audit-log.key), copied beside the log (0600)",
    )
    p.add_argument(
        "--archive",
        type=path_argument,
        metavar="DIR",
        help="the archive files (00000001.db, ...) taken with the backup, when it starts past"
        " record 1",
    )
    p.add_argument(
        "--checkpoint",
        help="a signed checkpoint kept off the box: the backup must extend it",
    )


def restore_command(args: argparse.Namespace) -> int:
    from controller.app.config_file import load_config
    from controller.audit.log import _read_signer, configured_origin
    from controller.audit.restore import restore_log
    from controller.cli.args import directory_argument
    from controller.cli.audit import MAX_NOTE_BYTES, _argument_file, log_verifier
    from controller.errors import ConfigError, UsageError

    given = directory_argument(args.state_dir)
    backup = Path(args.backup)
    signer = None
    if args.signing_key is not None:
        signer = _read_signer(Path(args.signing_key), check_mode=True)
    if args.key is None and signer is None:
        raise UsageError("restore needs --key (the log's verifier key) or --signing-key")
    verifier = log_verifier(Path("."), args.key) if args.key is not None else None
    if verifier is None:
        assert signer is not None
        verifier = signer.verifier
    checkpoint = None
    if args.checkpoint is not None:
        checkpoint = _argument_file("--checkpoint", args.checkpoint, MAX_NOTE_BYTES)
    config = load_config(Path(args.config))  # a bad config: exit 78 naming the key
    wanted = configured_origin(config)
    if wanted != verifier.name:
        key = "fleet.origin" if config.fleet.origin else "table.name"
        raise ConfigError(
            key,
            f"this table's log would be {wanted!r}, but the backup's key is of {verifier.name!r}:"
            " restore a backup of this table, or configure the table it is of",
        )
    state_dir = given or Path(config.storage.state_dir)
    copy_dir = config.storage.anchor_copy_dir
    report = restore_log(
        backup,
        state_dir,
        verifier=verifier,
        signer=signer,
        archive=None if args.archive is None else Path(args.archive),
        anchor_copy_dir=Path(copy_dir) if copy_dir else None,
        checkpoint=checkpoint,
    )
    print_report(args, report.as_dict(), _restore_report)
    return 0


def _restore_report(doc: dict[str, object]) -> str:
    lines = [render.clean(f"audit log restored into {doc.get('restored')}")]
    for name in ("records", "archives", "origin", "key_id", "checkpoint_size", "signing_key"):
        lines.append(render.clean(f"  {name.replace('_', ' ')}: {doc.get(name)}"))
    anchors = doc.get("anchors")
    for said in anchors if isinstance(anchors, list) else []:
        lines.append(render.clean(f"  anchor checked: {said}"))
    steps = doc.get("next")
    lines.append("next:")
    for step in steps if isinstance(steps, list) else []:
        lines.append(render.clean(f"  {step}"))
    return "\n".join(lines) + "\n"
