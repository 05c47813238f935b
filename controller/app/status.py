"""The facts of the table's status that the log holds (``controller.core.status`` decides what
they mean): the last checkpoint, the witness's last cosignature, the last program
verification and clock status, and, for a controller that is not running, the context its
last step stored.

Read only, and for a stopped controller without creating a file in the state directory
(:func:`quiet_connection`): a log without WAL content is opened ``immutable``; one whose
WAL and wal-index files are both there (a stop keeps them: store.close_keeping_wal; a
controller killed leaves them) is read in place, ``mode=ro``; only a WAL without its
wal-index beside it is read from a private copy elsewhere.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from controller.audit.log import (
    DB_NAME,
    read_latest_checkpoint,
    read_latest_context,
)
from controller.audit.reader import newest_of
from controller.audit.store import open_uri
from controller.core import canonical
from controller.core.snapshot import decode_context
from controller.core.state import ClockSync, RoundContext
from controller.core.status import ROOT_PREFIX_CHARS
from controller.errors import AuditLogError, ControllerError, SnapshotError

LOOK_BACK = 100_000  # records looked at for the last of a kind (store.BY_KIND's through an index)
MAX_DETAIL_CHARS = 300  # a fault's detail, as the status carries it


@contextlib.contextmanager
def quiet_connection(state_dir: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the log in ``state_dir`` that creates no file there (no
    ``-wal``, no ``-shm``) and copies no database. Raises :class:`AuditLogError` when there
    is no log to read.

    - No WAL content: ``immutable`` (SQLite opens nothing beside the database).
    - WAL content with its ``-shm`` beside it (a stop keeps both; so does a controller killed
      or a power cut): ``mode=ro``, the WAL read in place. SQLite (3.22 and later; Debian
      bookworm ships 3.40.1) opens a read-only WAL database when both files exist, each
      read-write if it may (the wal-index shared with a controller that runs meanwhile)
      and read-only if not (a private wal-index on the heap, built from the WAL: a user who
      may not write there; the shared one is written as it is read, shared memory and no
      part of the log). It makes a file only when one of the two is missing, so it is
      used only when both are there; one removed in the instant between that look and the
      open (only a controller's close that could not keep the WAL removes them) would be
      made again, as root with the log's owner (SQLite gives it the database's).
    - Its close copies nothing into the database and deletes nothing: this relies on what
      SQLite does but does not document (it documents that the last connection to close
      runs a checkpoint under an EXCLUSIVE lock on the database and deletes the WAL): a
      ``mode=ro`` connection holds the database file open read-only, and the unix VFS's
      EXCLUSIVE lock is a ``fcntl`` write lock, which POSIX refuses on a descriptor not
      open for writing (EBADF), so that close neither checkpoints nor deletes (SQLite 3.40.1;
      pinned by tests/audit/test_audit_storage.py's
      ``test_a_read_only_close_neither_copies_nor_deletes_the_wal``). Were that to change,
      nothing would be lost: SQLite deletes a WAL only after a checkpoint that copied all
      of it into the database and synced it; status would then have removed the two files
      (the next start grows the WAL anew, as before the WAL was kept).
    - WAL content without its ``-shm`` (files put back by hand): a private copy elsewhere,
      as ``mode=ro`` would make the ``-shm``; so too when the in-place open cannot open one
      of the files.
    """
    path = (state_dir / DB_NAME).absolute()
    try:
        is_file = path.is_file()
    except OSError as exc:  # the state directory not ours to read
        raise AuditLogError(f"audit log: cannot read {path}: {exc.strerror or exc}") from None
    if not is_file:
        raise AuditLogError(f"audit log: no log at {path}")
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    db: sqlite3.Connection
    with contextlib.ExitStack() as stack:
        try:
            if not (wal.is_file() and wal.stat().st_size > 0):
                db = open_uri(path.as_uri() + "?immutable=1")
            elif shm.is_file():
                try:
                    db = open_uri(path.as_uri() + "?mode=ro")
                except sqlite3.OperationalError:  # cannot open one of them (not: no database)
                    db = _private_copy(path, wal, stack)
            else:
                db = _private_copy(path, wal, stack)
            stack.callback(db.close)
        except (OSError, sqlite3.Error) as exc:
            raise AuditLogError(f"audit log: cannot read {path}: {exc}") from exc
        yield db


def _private_copy(path: Path, wal: Path, stack: contextlib.ExitStack) -> sqlite3.Connection:
    """The log and its WAL copied to a temporary directory (removed with ``stack``), opened
    there."""
    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="paigow-")))
    copy = scratch / path.name
    shutil.copyfile(path, copy)
    shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
    return open_uri(copy.as_uri() + "?mode=ro")


def log_facts(db: sqlite3.Connection) -> dict[str, Any]:
    """``log_size``, ``checkpoint``, ``witness``, ``software``, ``clock`` and ``table`` (its
    configuration's name, game and modes) as the log has them (each None when it has none),
    and ``problems``: what could not be read."""
    facts: dict[str, Any] = {"problems": []}
    steps = (
        ("log_size", _size),
        ("checkpoint", _checkpoint),
        ("witness", _witness),
        ("software", _software),
        ("clock", _clock),
        ("table", _table),
    )
    for name, read in steps:
        try:
            facts[name] = read(db)
        except (sqlite3.Error, ControllerError, ValueError, KeyError, TypeError) as exc:
            facts[name] = None
            facts["problems"].append(f"{name}: {exc}")
    return facts


def stored_context(db: sqlite3.Connection, path: Path) -> RoundContext | None:
    """The context the log's last step stored (None: none)."""
    try:
        stored = read_latest_context(db, path)
        return None if stored is None else decode_context(stored[1])
    except (SnapshotError, ControllerError, sqlite3.Error) as exc:
        raise AuditLogError(f"audit log: the stored context cannot be read: {exc}") from exc


def _size(db: sqlite3.Connection) -> int:
    (last,) = db.execute("SELECT max(seq) FROM records").fetchone()
    return 0 if last is None else int(last)


def _last(db: sqlite3.Connection, *kinds: str) -> tuple[str, dict[str, Any]] | None:
    """The last record of one of ``kinds`` within ``LOOK_BACK``: its time and data."""
    rows = newest_of(db, kinds, limit=1, within=LOOK_BACK)
    if not rows:
        return None
    entry = canonical.decode(bytes(rows[0][2]))
    if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
        raise ValueError("a record is not a JSON object with data")
    return str(entry.get("time", "")), entry["data"]


def _checkpoint(db: sqlite3.Connection) -> dict[str, object] | None:
    note = read_latest_checkpoint(db)
    if note is None:
        return None
    lines = note.split("\n")
    if len(lines) < 3 or not lines[1].isascii() or not lines[1].isdigit():
        raise ValueError("the checkpoint is not a C2SP checkpoint")
    size = int(lines[1])
    row = db.execute("SELECT leaf FROM records WHERE seq = ?", (size,)).fetchone()
    time = None
    if row is not None:
        entry = canonical.decode(bytes(row[0]))
        time = entry.get("time") if isinstance(entry, dict) else None
    return {"size": size, "root": lines[2][:ROOT_PREFIX_CHARS], "time": time}


def _witness(db: sqlite3.Connection) -> dict[str, object] | None:
    found = _last(db, "cosigned")
    if found is None:
        return None
    time, data = found
    return {
        "witness": data.get("witness"),
        "size": data.get("size"),
        "root": str(data.get("root", ""))[:ROOT_PREFIX_CHARS],
        "timestamp": data.get("timestamp"),
        "recorded": time,
    }


def _software(db: sqlite3.Connection) -> dict[str, object] | None:
    found = _last(db, "software_check")
    if found is None:
        return None
    time, data = found
    return {
        "result": data.get("result"),
        "version": data.get("version"),
        "manifest": data.get("manifest"),
        "key": data.get("key"),
        "checked": time,
    }


def _clock(db: sqlite3.Connection) -> str | None:
    found = _last(db, "clock_status", "power_on")
    if found is None:
        return None
    value = found[1].get("clock")
    return str(ClockSync(value)) if value in {str(c) for c in ClockSync} else None


FAULT_RECORDS_SEARCHED = 200  # the newest fault records looked at for the active faults' details


def fault_details(db: sqlite3.Connection, names: Iterable[str]) -> dict[str, str]:
    """Each named fault's detail as its newest ``fault`` record says it (what the table found:
    the file that differs, the anchor that is missing), cut to ``MAX_DETAIL_CHARS``."""
    wanted = set(names)
    found: dict[str, str] = {}
    if not wanted:
        return found
    rows = db.execute(
        "SELECT leaf FROM records WHERE kind = 'fault'"
        " AND seq > (SELECT coalesce(max(seq), 0) FROM records) - ?"
        " ORDER BY seq DESC LIMIT ?",
        (LOOK_BACK, FAULT_RECORDS_SEARCHED),
    ).fetchall()
    for (leaf,) in rows:
        entry = canonical.decode(bytes(leaf))
        data = entry.get("data") if isinstance(entry, dict) else None
        if not isinstance(data, dict):
            continue
        name, detail = data.get("fault"), data.get("detail")
        if name in wanted and name not in found and isinstance(detail, str) and detail:
            found[str(name)] = detail[:MAX_DETAIL_CHARS]
        if found.keys() == wanted:
            break
    return found


def _table(db: sqlite3.Connection) -> dict[str, object] | None:
    """The table's name, game, mode and modes as its last ``config_loaded`` record has them
    (what a stopped controller was configured with)."""
    found = _last(db, "config_loaded")
    if found is None:
        return None
    data = found[1]
    return {key: data.get(key) for key in ("table", "game", "mode", "modes")}


def lean(report: Mapping[str, object]) -> dict[str, object]:
    """The report as the service terminal sends it: each fault by code, name and detail (the
    client has the same table for the rest), details cut short, so that it fits one reply."""
    shown = dict(report)
    faults = report.get("faults")
    if isinstance(faults, list):
        shown["faults"] = [
            {
                "code": f.get("code"),
                "name": f.get("name"),
                "stops_play": f.get("stops_play"),
                **(
                    {"detail": str(f["detail"])[:MAX_DETAIL_CHARS]}
                    if isinstance(f, dict) and f.get("detail")
                    else {}
                ),
            }
            for f in faults
            if isinstance(f, dict)
        ]
    return shown
