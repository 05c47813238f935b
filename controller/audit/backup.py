"""A consistent copy of the live audit log (``paigow-controller backup``).

A ``cp`` of ``audit.db`` while the controller writes is not a backup: the newest records are in
``audit.db-wal`` until the writer copies them into the database, and a file copied while pages
are being written may hold half of a commit. This copies the log through SQLite's online backup
API instead, from a read-only connection that holds one read snapshot for the whole copy: the
copy is the log exactly as it was at one commit, whatever the controller appends meanwhile. In
WAL mode a reader never blocks the writer (it only keeps the writer's WAL copy from passing its
snapshot until it is done), and the pages are copied in steps of ``STEP_PAGES``, so each call
into SQLite is short.

The copy is written to a temporary file beside ``OUT``, switched out of WAL mode (one file,
nothing beside it), checked (its records are those of the snapshot), fsynced, and only then
given its name (a link, which never replaces a file; ``force`` replaces one) and its directory
fsynced: a crash leaves either no ``OUT`` or a whole one.

A backup holds no private key: the database keeps only the log's public identity in ``meta``
(its format, origin and key id); the signing key is ``audit-log.key`` in the state directory
(or the systemd credential of that name) and is never in the database. A ``meta`` name this
module does not know is refused, so a future field is looked at before it is copied away.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from controller.audit.archive import ARCHIVE_DIR
from controller.audit.keys import KEY_FILE
from controller.audit.reader import read_latest_checkpoint
from controller.audit.store import DB_NAME, FORMAT, connect_read_only, storage_error
from controller.core.note import checkpoint_size
from controller.errors import AuditLogError, UsageError
from controller.files import fsync_dir, fsync_file

STEP_PAGES = 1024  # 512 KiB at the log's 512-byte pages: a few ms per step on a Pi's card
# What the log's meta table may hold: its public identity only (log.py, AuditLog._create;
# 'frontier' in logs from before the head row).
PUBLIC_META = frozenset({"format", "origin", "key_id", "frontier"})


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: Path
    records: int
    first: int  # the copy's first record (after retention, past 1)
    size_bytes: int
    origin: str
    key_id: str
    checkpoint: str | None  # the latest signed checkpoint in the copy (a C2SP signed note)
    seconds: float

    def as_dict(self, state_dir: Path) -> dict[str, object]:
        signed = None
        if self.checkpoint is not None:
            signed = checkpoint_size(self.checkpoint)
        return {
            "backup": str(self.path),
            "records": self.records,
            "bytes": self.size_bytes,
            "origin": self.origin,
            "key_id": self.key_id,
            "checkpoint_size": signed,
            "checkpoint": self.checkpoint,
            "seconds": round(self.seconds, 3),
            "archive": _archive_note(Path(state_dir), self.first),
            "signing_key": (
                f"not in the backup: it is {Path(state_dir) / KEY_FILE} (or the systemd"
                f" credential {KEY_FILE}); verify the backup with the verifier key"
                " (export-key)"
            ),
        }


def _archive_note(state_dir: Path, first: int) -> str | None:
    """Where the records before the copy's first are (retention, controller/audit/archive.py)."""
    if first <= 1:
        return None
    return (
        f"records 1..{first - 1} are in the archive files of {state_dir / ARCHIVE_DIR}, not in"
        " this copy: copy them with it (they are written once and closed)"
    )


def backup_log(
    state_dir: Path | str,
    out: Path | str,
    *,
    force: bool = False,
    step_pages: int = STEP_PAGES,
) -> BackupReport:
    """Copy the log in ``state_dir`` to the file ``out`` (see the module's docstring). A bad
    ``out`` is :class:`UsageError`; a log that cannot be read :class:`AuditLogError`."""
    started = time.monotonic()
    source = Path(state_dir) / DB_NAME
    target = Path(out)
    _check_target(source, target, force=force)
    if not source.is_file():
        raise AuditLogError(f"audit log: no log at {source}")
    db = connect_read_only(source)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        try:
            db.execute("BEGIN")  # one snapshot: the copy is the log as of one commit
            origin, key_id = _identity(db, source)
            first, records = db.execute(
                "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM records"
            ).fetchone()
            latest = read_latest_checkpoint(db)
        except sqlite3.Error as exc:
            raise storage_error(exc, f"cannot read {source}") from exc
        _copy(db, temporary, int(records), step_pages)
        try:
            _put_in_place(temporary, target, force=force)
            fsync_dir(target.parent)
        except FileExistsError:
            raise UsageError(f"{target} exists (--force replaces it)") from None
        except OSError as exc:
            raise storage_error(exc, f"cannot write {target}") from exc
    finally:
        with contextlib.suppress(sqlite3.Error):
            db.close()
        for leftover in (temporary, temporary.with_name(temporary.name + "-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
    return BackupReport(
        target,
        int(records),
        int(first),
        target.stat().st_size,
        origin,
        key_id,
        latest,
        time.monotonic() - started,
    )


def _put_in_place(temporary: Path, target: Path, *, force: bool) -> None:
    if force:
        os.replace(temporary, target)
        return
    try:
        os.link(temporary, target)  # never replaces a file that appeared meanwhile
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise
        # No hard links here (a FAT-formatted stick): a rename, after a last look.
        if target.exists():
            raise FileExistsError(target) from None
        os.rename(temporary, target)


def _check_target(source: Path, target: Path, *, force: bool) -> None:
    try:
        parent_is_dir = target.parent.is_dir()
        exists = target.exists() or target.is_symlink()
        is_file = target.is_file()
    except OSError as exc:  # a name too long, a loop of links
        raise UsageError(f"{target}: {exc.strerror or exc}") from None
    if not parent_is_dir:
        raise UsageError(f"{target}: no such directory {target.parent}")
    if exists and not is_file:
        raise UsageError(f"{target} exists and is not a file")
    if exists and not force:
        raise UsageError(f"{target} exists (--force replaces it)")
    if exists and source.exists() and os.path.samefile(source, target):
        raise UsageError(f"{target} is the live log itself")
    for suffix in ("-wal", "-shm", "-journal"):
        if target.with_name(target.name + suffix).exists():
            raise UsageError(f"{target}{suffix} exists: {target} may be a live database")


def _identity(db: sqlite3.Connection, source: Path) -> tuple[str, str]:
    """The log's origin and key id; refuses a database that is not a log, or whose meta holds
    anything but the log's public identity."""
    try:
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
    except sqlite3.OperationalError as exc:
        raise AuditLogError(f"audit log: {source} is not an audit log ({exc})") from None
    if bytes(meta.get("format", b"")) != FORMAT.encode():
        raise AuditLogError(f"audit log: {source} is not a {FORMAT} database")
    unknown = sorted(str(name) for name in meta if name not in PUBLIC_META)
    if unknown:
        raise AuditLogError(
            f"audit log: {source} keeps {', '.join(unknown)} in its meta table: not copied"
            " until it is known to hold no secret"
        )
    origin = bytes(meta.get("origin", b"")).decode("utf-8", "replace")
    key_id = bytes(meta.get("key_id", b"")).decode("ascii", "replace")
    return origin, key_id


def _copy(db: sqlite3.Connection, temporary: Path, records: int, step_pages: int) -> None:
    """The snapshot ``db`` holds, into ``temporary``: one file (not WAL), checked, fsynced."""
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.close(fd)
        copy = sqlite3.connect(temporary, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise storage_error(exc, f"cannot write {temporary}") from exc
    try:
        db.backup(copy, pages=step_pages)
        copy.execute("PRAGMA journal_mode=DELETE")  # one file: nothing beside it to lose
        (copied,) = copy.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()
        (check,) = copy.execute("PRAGMA quick_check").fetchone()
    except sqlite3.Error as exc:
        raise storage_error(exc, f"cannot copy the log to {temporary}") from exc
    finally:
        copy.close()
    if copied != records or check != "ok":
        raise AuditLogError(
            f"audit log: the copy holds {copied} records of {records} ({check}): not kept"
        )
    try:
        fsync_file(temporary)
    except OSError as exc:
        raise storage_error(exc, f"cannot write {temporary}") from exc
