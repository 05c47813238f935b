"""Restoring the audit log from a backup (``paigow-controller restore``) into a new state
directory, after a card failed or was replaced.

A backup (``paigow-controller backup``, controller/audit/backup.py) is the log as it was at one
commit; the archive files the retention moved older rounds to (controller/audit/archive.py)
are copied with it. Restoring one is putting an older log in place of the table's, which is
exactly what the log's integrity machinery exists to notice: the rules never let a log be
rolled back unnoticed. So a restore:

1. refuses a target that holds a log (``audit.db``) or anything but the log's anchor: it never
   writes over a log, and restores only into a new (empty or absent) directory;
2. verifies the backup before anything is written: every record, the hash chain, the signed
   checkpoints and the running checkpoint with the log's verifier key (``verify-log``'s own
   verifier), the archive chain's signed notes and that the backup follows the last archive;
   given a checkpoint kept off the box (``--checkpoint``), that the backup extends it;
3. refuses when an anchor it can see shows a newer log than the backup (or another log): the
   anchor left in the target directory, and the copy in ``[storage] anchor_copy_dir`` (a
   configured copy directory that is missing is a refusal too: a mount that failed proves
   nothing). An anchor at or behind the backup is kept: the controller checks the log
   against it at its start, as always;
4. holds the target with the controller's own directory lock (no controller starts on it and
   no second restore writes into it meanwhile; an absent target is made empty first), writes
   the copy into a hidden directory inside it (on its filesystem: a new card mounted there),
   fsynced, checks it (the bytes verified are the bytes copied; with archives, the whole log
   verified again there), and only then gives the files their names (the log last: a log
   appears whole or not at all). A restore killed midway leaves no log; the next one removes
   its hidden copy.

The restored directory holds no anchor of its own unless one was there: at its first start the
controller takes the copy in ``anchor_copy_dir`` if there is one (and records that it rewrote
the local one), else it latches ``anchor_missing``, which is cleared only at the service
terminal with an employee id and a note saying why (the restore): the log records who put an
older copy in place, and the table plays on from it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from controller.audit.anchor import ANCHOR_FILE, Anchor, AnchorFile, copy_path
from controller.audit.archive import ARCHIVE_DIR, Archive, archived_records, read_chain
from controller.audit.backup import _identity
from controller.audit.keys import KEY_FILE
from controller.audit.reader import read_latest_checkpoint, read_records
from controller.audit.store import DB_NAME, connect_read_only, storage_error
from controller.audit.verify import verify_database, verify_state_dir
from controller.core.merkle import CompactRange
from controller.core.note import Checkpoint, Signer, Verifier, open_checkpoint
from controller.errors import ArchiveError, LogIntegrityError, NoteError, RestoreRefused, UsageError
from controller.files import DirectoryLock, fsync_dir, fsync_file, write_new

COPY_CHUNK = 1 << 20
STAGING_PREFIX = ".restore-"  # the copy being made, hidden in the target


@dataclass(frozen=True, slots=True)
class RestoreReport:
    state_dir: Path
    records: int  # the last record's number
    first: int  # the backup's first record (past 1 with archives)
    archives: int
    origin: str
    key_id: str
    checkpoint_size: int
    signing_key: str
    anchors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": True,
            "restored": str(self.state_dir),
            "records": self.records,
            "first_in_backup": self.first,
            "archives": self.archives,
            "origin": self.origin,
            "key_id": self.key_id,
            "checkpoint_size": self.checkpoint_size,
            "signing_key": self.signing_key,
            "anchors": self.anchors,
            "next": [
                f"paigow-controller verify-log --state-dir {self.state_dir} --key LOG.pub",
                "start the controller on it; without an anchor copy it latches anchor_missing:"
                " clear it at the terminal saying why, e.g. paigow-controller supervise"
                ' clear-fault --note "restored from backup" --employee T0042',
            ],
        }


def restore_log(
    backup: Path,
    state_dir: Path,
    *,
    verifier: Verifier,
    signer: Signer | None = None,
    archive: Path | None = None,
    anchor_copy_dir: Path | None = None,
    checkpoint: str | None = None,
) -> RestoreReport:
    """Restore ``backup`` (and the archive files in ``archive``) into the new ``state_dir``:
    see the module's docstring. ``signer``: the log's signing key, written beside it (mode
    0600); None when the controller takes it from its systemd credential. Raises
    :class:`RestoreRefused` (or :class:`UsageError` for a bad argument) with nothing written."""
    if signer is not None and signer.verifier.key_id != verifier.key_id:
        raise UsageError(
            f"--signing-key is the key {signer.verifier.key_id.hex()}, not the verifier key's"
            f" {verifier.key_id.hex()}"
        )
    lock = _locked(state_dir)  # an existing target, held from here: one restore, no controller
    try:
        return _restore(
            backup,
            state_dir,
            lock,
            verifier=verifier,
            signer=signer,
            archive=archive,
            anchor_copy_dir=anchor_copy_dir,
            checkpoint=checkpoint,
        )
    finally:
        if lock is not None:
            lock.release()


def _restore(
    backup: Path,
    state_dir: Path,
    lock: DirectoryLock | None,
    *,
    verifier: Verifier,
    signer: Signer | None,
    archive: Path | None,
    anchor_copy_dir: Path | None,
    checkpoint: str | None,
) -> RestoreReport:
    kept_anchor = _check_target(state_dir)
    origin, key_id, first, size = _backup_identity(backup)
    if key_id != verifier.key_id.hex() or origin != verifier.name:
        raise RestoreRefused(
            f"restore: refused: the backup {backup} is the log of {origin} (key {key_id}), not"
            f" of the key given ({verifier.name}, key {verifier.key_id.hex()})"
        )
    chain = _check_archives(backup, archive, verifier, first)
    if not chain:
        _verified(lambda: verify_database(backup, verifier, checkpoint=checkpoint))
    head = _head(backup, verifier, size)
    anchors = _check_anchors(
        state_dir, kept_anchor, anchor_copy_dir, verifier, head, backup=backup, chain=chain
    )
    created = lock is None
    made = _made_and_locked(state_dir) if created else None  # absent: made empty, held
    # staged inside the target: on its filesystem (a new card mounted there), and what a
    # killed restore leaves is a hidden directory the next one removes, never a log
    staging = state_dir / f"{STAGING_PREFIX}{os.getpid()}"
    try:
        try:
            _stage(staging, backup, chain, signer, verified_alone=not chain)
            if chain:  # the archives and the backup, verified as one log where they will lie
                _verified(lambda: verify_state_dir(staging, verifier, checkpoint=checkpoint))
            _put_in_place(staging, state_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        if created:  # the directory this restore made, still empty: as it was, absent
            with contextlib.suppress(OSError):
                state_dir.rmdir()
        raise
    finally:
        if made is not None:
            made.release()
    said_key = (
        f"{state_dir / KEY_FILE} (0600)"
        if signer is not None
        else f"not copied: the controller takes it from its systemd credential {KEY_FILE}"
    )
    return RestoreReport(
        state_dir, size, first, len(chain), origin, key_id, head.size, said_key, anchors
    )


# --- before anything is written -------------------------------------------------------------


def _is_a_directory(state_dir: Path) -> bool:
    """Whether the target exists (a directory, or a link to one); a usage error when it is
    something else or a link to nothing."""
    try:
        if state_dir.is_symlink() and not state_dir.exists():
            raise UsageError(f"--state-dir {state_dir} is a symbolic link to nothing")
        if state_dir.exists() and not state_dir.is_dir():
            raise UsageError(f"--state-dir {state_dir} exists and is not a directory")
        return state_dir.exists()
    except OSError as exc:
        raise UsageError(f"--state-dir {state_dir}: {exc.strerror or exc}") from None


def _locked(state_dir: Path) -> DirectoryLock | None:
    """An existing target held (the controller's own lock, controller/app/instance_lock.py):
    no controller starts on it and no other restore writes into it meanwhile. None when it is
    absent."""
    if not _is_a_directory(state_dir):
        return None
    try:
        return DirectoryLock.acquire(state_dir)
    except BlockingIOError:
        raise RestoreRefused(
            f"restore: refused: {state_dir} is held by a running controller or another"
            " restore: stop it, or wait for the other restore, and restore again"
        ) from None
    except OSError as exc:
        raise storage_error(exc, f"cannot take {state_dir}") from exc


def _made_and_locked(state_dir: Path) -> DirectoryLock:
    try:
        state_dir.mkdir(mode=0o700)
    except FileExistsError:
        raise RestoreRefused(
            f"restore: refused: {state_dir} appeared while the backup was verified (another"
            " restore, or a controller started on it?): nothing was written into it"
        ) from None
    except OSError as exc:
        raise storage_error(exc, f"cannot write {state_dir}") from exc
    try:
        return DirectoryLock.acquire(state_dir)
    except OSError as exc:  # made by this restore a moment ago: held by another is a race lost
        with contextlib.suppress(OSError):
            state_dir.rmdir()
        raise RestoreRefused(
            f"restore: refused: {state_dir} was taken while it was made ({exc.strerror or exc})"
        ) from None


def _check_target(state_dir: Path) -> Anchor | None:
    """The target holds no log and nothing but (perhaps) the log's anchor; that anchor, if any.
    Held (or absent): what a killed restore left (its hidden staging directory) is removed."""
    try:
        names = sorted(os.listdir(state_dir)) if _is_a_directory(state_dir) else []
    except OSError as exc:
        raise UsageError(f"--state-dir {state_dir}: {exc.strerror or exc}") from None
    if DB_NAME in names:
        raise RestoreRefused(
            f"restore: refused: {state_dir / DB_NAME} exists: a restore never writes over a"
            " log; restore into a new (empty or absent) state directory"
        )
    for name in names:
        if name.startswith(STAGING_PREFIX):  # a restore killed while it copied: never a log
            shutil.rmtree(state_dir / name, ignore_errors=True)
    _refuse_others(state_dir, names)
    return _target_anchor(state_dir) if ANCHOR_FILE in names else None


def _refuse_others(state_dir: Path, names: list[str]) -> None:
    """Refused when the target holds anything but the anchor (and an empty lost+found)."""
    others = [
        n
        for n in names
        if n != ANCHOR_FILE
        and not n.startswith(STAGING_PREFIX)
        and not _empty_lost_found(state_dir, n)
    ]
    if not others:
        return
    shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    if set(others) <= {ARCHIVE_DIR, KEY_FILE}:
        raise RestoreRefused(
            f"restore: refused: {state_dir} holds {shown} but no log: a restore stopped"
            f" before it finished? remove {shown} from it (keep {ANCHOR_FILE}) and restore"
            " again"
        )
    raise RestoreRefused(
        f"restore: refused: {state_dir} is not empty ({shown}): restore into a new (empty"
        " or absent) state directory"
    )


def _target_anchor(state_dir: Path) -> Anchor:
    """The anchor the target holds (a restore must extend it)."""
    if (state_dir / ANCHOR_FILE).is_symlink():
        raise RestoreRefused(
            f"restore: refused: the anchor {state_dir / ANCHOR_FILE} is a symbolic link, not"
            " this directory's anchor: remove it and restore again"
        )
    found = AnchorFile(state_dir / ANCHOR_FILE).read()  # damaged: AuditLogError, said so
    if found is None:
        raise RestoreRefused(f"restore: refused: the anchor {state_dir / ANCHOR_FILE} is empty")
    return found


def _empty_lost_found(state_dir: Path, name: str) -> bool:
    """The empty ``lost+found`` of a new card's filesystem mounted at the target."""
    path = state_dir / name
    try:
        return name == "lost+found" and not path.is_symlink() and not any(path.iterdir())
    except OSError:
        return False


def _backup_identity(backup: Path) -> tuple[str, str, int, int]:
    """The backup's origin, key id, first and last record (read only)."""
    try:
        is_file = backup.is_file()
    except OSError as exc:
        raise UsageError(f"{backup}: {exc.strerror or exc}") from None
    if not is_file:
        raise UsageError(f"{backup}: no such backup file")
    db = connect_read_only(backup)
    try:
        origin, key_id = _identity(db, backup)
        first, last = db.execute(
            "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM records"
        ).fetchone()
    except sqlite3.Error as exc:
        raise storage_error(exc, f"cannot read {backup}") from exc
    finally:
        db.close()
    if type(first) is not int or type(last) is not int or first < 1:
        raise RestoreRefused(f"restore: refused: the backup {backup} holds no records")
    return origin, key_id, first, last


def _check_archives(
    backup: Path, archive: Path | None, verifier: Verifier, first: int
) -> list[Archive]:
    """The archive chain the backup follows (empty when it starts at record 1), each note's
    signature and the chain checked."""
    if first == 1:
        if archive is not None:
            raise UsageError(f"--archive: the backup {backup} starts at record 1: it has none")
        return []
    if archive is None:
        raise UsageError(
            f"the backup {backup} starts at record {first}: records 1..{first - 1} are in the"
            f" archive files; give their directory with --archive (the {ARCHIVE_DIR}/ beside"
            " the log it was taken from)"
        )
    if not archive.is_dir():
        raise UsageError(f"--archive {archive}: no such directory")
    try:
        chain = read_chain(archive, verifier, directory=archive)
    except ArchiveError as exc:
        raise RestoreRefused(f"restore: refused: {exc}") from None
    if not chain:
        raise UsageError(f"--archive {archive}: no archive files (00000001.db, ...) there")
    # the live log keeps the archive's last records until their drop is done: it may overlap
    if not chain[-1].first <= first <= chain[-1].last + 1:
        raise RestoreRefused(
            f"restore: refused: the archives end at record {chain[-1].last} but the backup"
            f" starts at {first}: they are not of one log"
        )
    return chain


def _verified(check: Callable[[], object]) -> None:
    """A verification, its failure a refusal naming the record (nothing was written)."""
    try:
        check()
    except LogIntegrityError as exc:
        raise RestoreRefused(f"restore: refused: the backup does not verify: {exc}") from None


def _head(backup: Path, verifier: Verifier, size: int) -> Checkpoint:
    """The backup's running checkpoint (signs its whole log; verified with the rest)."""
    db = connect_read_only(backup)
    try:
        note = read_latest_checkpoint(db)
    finally:
        db.close()
    try:
        head = None if note is None else open_checkpoint(note, verifier)
    except NoteError as exc:
        raise RestoreRefused(f"restore: refused: the backup's checkpoint: {exc}") from None
    if head is None or head.size != size:
        raise RestoreRefused(
            f"restore: refused: the backup {backup} has no checkpoint signing its {size} records"
        )
    return head


def _check_anchors(
    state_dir: Path,
    kept: Anchor | None,
    copy_dir: Path | None,
    verifier: Verifier,
    head: Checkpoint,
    *,
    backup: Path,
    chain: list[Archive],
) -> list[str]:
    """Every anchor in sight must sign this log at or behind the backup: a newer one is a
    rollback. What was checked, in words."""
    places: list[tuple[Path, Anchor]] = []
    said: list[str] = []
    if kept is not None:
        places.append((state_dir / ANCHOR_FILE, kept))
    if copy_dir is not None:
        if not copy_dir.is_dir():
            raise RestoreRefused(
                f"restore: refused: [storage] anchor_copy_dir {copy_dir} is missing (a mount"
                " that failed?): the anchor's copy cannot be checked against the backup"
            )
        path = copy_path(copy_dir, verifier.key_id)
        found = AnchorFile(path).read()
        if found is None:
            said.append(f"{path}: none (no copy of this log's anchor)")
        else:
            places.append((path, found))
    for path, anchor in places:
        try:
            signed = open_checkpoint(anchor.note, verifier)
            tree = anchor.tree(signed.size)
        except (NoteError, ValueError) as exc:
            raise RestoreRefused(
                f"restore: refused: the anchor {path} is not of this log's key: {exc}"
            ) from None
        if signed.size > head.size:
            raise RestoreRefused(
                f"restore: refused: the anchor {path} shows the log at {signed.size} records,"
                f" newer than the backup's {head.size}: restoring it would roll the log back;"
                " restore the newest backup"
            )
        if tree.root() != signed.root_hash or not _extends(tree, signed.size, backup, chain, head):
            raise RestoreRefused(
                f"restore: refused: the anchor {path} signs {signed.size} records that are not"
                " the backup's first ones: it is another log, or a fork"
            )
        said.append(f"{path}: {signed.size} records, at or behind the backup's {head.size}")
    return said


def _extends(
    tree: CompactRange, size: int, backup: Path, chain: list[Archive], head: Checkpoint
) -> bool:
    """Whether the backup's log is the anchor's tree with more leaves (RFC 6962: the leaves
    after the anchor appended to its compact range give the backup's root)."""
    for row in _leaves_after(size, backup, chain):
        tree.append(row)
    return tree.root() == head.root_hash


def _leaves_after(size: int, backup: Path, chain: list[Archive]) -> Iterator[bytes]:
    seen = size
    for archive in chain:
        if archive.last <= seen:
            continue
        for row in archived_records(archive):
            if row.seq == seen + 1:
                seen += 1
                yield row.leaf
    db = connect_read_only(backup)
    try:
        for row in read_records(db, start=seen + 1):
            yield row.leaf
    finally:
        db.close()


# --- writing ----------------------------------------------------------------------------------


def _stage(
    staging: Path,
    backup: Path,
    chain: list[Archive],
    signer: Signer | None,
    *,
    verified_alone: bool,
) -> None:
    try:
        staging.mkdir(mode=0o700)
        if chain:
            (staging / ARCHIVE_DIR).mkdir(mode=0o700)
            for archive in chain:
                _copy(archive.path, staging / ARCHIVE_DIR / archive.path.name)
            fsync_dir(staging / ARCHIVE_DIR)
        copied = _copy(backup, staging / DB_NAME)
        if signer is not None:
            write_new(staging / KEY_FILE, f"{signer}\n".encode(), 0o600, replace=False)
        fsync_dir(staging)
    except OSError as exc:
        raise storage_error(exc, f"cannot write {staging}") from exc
    if verified_alone and _sha256(backup) != copied:  # the bytes verified are the bytes copied
        raise RestoreRefused(f"restore: refused: the backup {backup} changed while it was copied")


def _copy(source: Path, target: Path) -> str:
    """``source`` to the new file ``target``, fsynced; the SHA-256 of what was written."""
    digest = hashlib.sha256()
    with source.open("rb") as reading:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as writing:
            while chunk := reading.read(COPY_CHUNK):
                digest.update(chunk)
                writing.write(chunk)
    fsync_file(target)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _put_in_place(staging: Path, state_dir: Path) -> None:
    """The staged files (in the held target) under their names, each moved in, the log last
    and never over one that appeared."""
    try:
        for name in sorted(os.listdir(staging)):
            if name != DB_NAME:
                os.rename(staging / name, state_dir / name)
        try:
            os.link(staging / DB_NAME, state_dir / DB_NAME)  # never replaces a log
        except FileExistsError:
            raise RestoreRefused(
                f"restore: refused: {state_dir / DB_NAME} appeared meanwhile (a controller"
                " started on it?): nothing was written over it"
            ) from None
        with contextlib.suppress(OSError):
            os.unlink(staging / DB_NAME)
            os.rmdir(staging)
        fsync_dir(state_dir)
        fsync_dir(state_dir.parent)
    except OSError as exc:
        raise storage_error(exc, f"cannot write {state_dir}") from exc
