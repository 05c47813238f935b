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
