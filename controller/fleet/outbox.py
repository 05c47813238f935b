"""The audit log as the fleet publisher's outbox, read through a read-only connection of its own
(the control thread's writer is never waited for: in WAL mode a reader does not block it), and
the cursor file that says how far the broker has acknowledged.

Records are read in sequence order as the lines of ``paigow-controller export``
(``controller.audit.recall.export_line``): a record carries ``checkpoint`` only where the log's
``checkpoints`` table has one at its sequence number (a round's close or void, or a checkpoint
kept with the tree's frontier). Records that retention moved to the archive are read from the
archive files (``controller.audit.archive``): a broker that was away longer than the live log
keeps its rounds still gets every record.

The cursor (``fleet-cursor`` in the state directory) is one small JSON object, the highest
sequence number the broker acknowledged with every one before it, and that record's hash:
``{"acked": 1234, "hash": "<hex SHA-256 of its leaf>"}``. It is written whole or not at all
(``controller.files.write_new``). A log that no longer holds that record with that hash (it was
rolled back, or replaced by another copy) is published again from its first record.

The connection number (``fleet-connection``: ASCII digits and a newline) numbers the publisher's
connections to the broker across the table's life: each signed status names it, and a reader
takes a status only if its ``(connection, seq)`` is greater than the last it took. So it must
never go back, even when the file is lost, damaged or rolled back with the card. Before each
connect it becomes (:func:`next_connection`) the greatest of

- the file's number + 1 (a bad file counts as 0, logged);
- the last number this process used or saw + 1 (the file lost under a running publisher);
- ``log size x 2^20``: the log only grows (every start records its ``power_on``), so a lost
  file's successor still starts above every number of an earlier start, unless more than
  2^20 connections happened while the log did not grow by one record (six days of a
  connection lost twice a second, the table never started again meanwhile);
- and, learned once connected, the connection of the table's own retained status at the broker
  (verified with the log's key) + 1: a card rolled back to an older copy holds an older file
  and a shorter log, but the broker still holds the status its last connection signed. Seeing
  one not below its own, the publisher writes that number + 1 and connects again under it.

Only when the card went back and the broker lost its retained messages too can a number go
back: the witness then takes the statuses as stale (ignored, counted, never an alert) until
the log grows past its old size (the ``2^20`` term catches up). The file is written whole,
fsynced, renamed and its directory fsynced before the connect that uses it; a number that
cannot be written is not used (the publisher tries again later).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.audit.archive import archive_paths
from controller.audit.log import (
    DB_NAME,
    connect_read_only,
    read_latest_checkpoint,
    read_records,
)
from controller.audit.reader import newest_of
from controller.audit.recall import export_line
from controller.core.digits import MAX_SEQ
from controller.core.merkle import CompactRange
from controller.core.note import checkpoint_size
from controller.core.records import RecordKind, StoredRecord
from controller.errors import AuditLogError, CursorError, TooLarge
from controller.files import read_capped, write_new
from controller.fleet.protocol import END_OF_CONNECTION, encode_record

CURSOR_FILE = "fleet-cursor"
MAX_CURSOR_BYTES = 256
# How far back a start looks for the last ``cosigned`` record (the records have no index by
# kind): some ten hours of play. Not found, the next cosignature of a round close is recorded.
COSIGNED_LOOKBACK_RECORDS = 20_000
_ROUND_ENDS = (str(RecordKind.CLOSE), str(RecordKind.VOID))


CONNECTION_FILE = "fleet-connection"
MAX_CONNECTION_BYTES = 64
CONNECTIONS_PER_RECORD_BITS = 20  # next_connection: log size x 2^20


@dataclass(frozen=True, slots=True)
class Cursor:
    acked: int = 0  # every record up to this one was acknowledged by the broker
    hash: str = ""  # the hex SHA-256 of that record's leaf ("" for 0)


def read_cursor(path: Path) -> Cursor:
    """The cursor in ``path``; ``Cursor()`` when there is none. :class:`CursorError` for a file
    that is not a cursor (garbage, too large, a number out of range)."""
    try:
        raw = read_capped(path, MAX_CURSOR_BYTES)
    except FileNotFoundError:
        return Cursor()
    except TooLarge:
        raise CursorError(f"{path} is larger than {MAX_CURSOR_BYTES} bytes") from None
    except OSError as exc:
        raise CursorError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CursorError(f"{path} is not a JSON object") from None
    if not isinstance(value, dict) or set(value) != {"acked", "hash"}:
        raise CursorError(f"{path} is not a cursor (acked and hash)")
    acked, digest = value["acked"], value["hash"]
    if type(acked) is not int or not 0 <= acked <= MAX_SEQ:
        raise CursorError(f"{path}: acked is not a sequence number")
    is_hex = isinstance(digest, str) and all(c in "0123456789abcdef" for c in digest)
    if not is_hex or len(digest) != (0 if acked == 0 else 64):
        raise CursorError(f"{path}: hash is not the hex SHA-256 of a record")
    return Cursor(acked, digest)


def write_cursor(path: Path, cursor: Cursor) -> None:
    """Whole or not at all, durable (OSError on failure)."""
    blob = json.dumps({"acked": cursor.acked, "hash": cursor.hash}).encode() + b"\n"
    write_new(path, blob, 0o600, replace=True)


def read_connection(path: Path) -> int:
    """The connection number in ``path``; 0 when there is none. :class:`CursorError` for a
    file that is not one (garbage, too large, out of range)."""
    try:
        raw = read_capped(path, MAX_CONNECTION_BYTES)
    except FileNotFoundError:
        return 0
    except TooLarge:
        raise CursorError(f"{path} is larger than {MAX_CONNECTION_BYTES} bytes") from None
    except OSError as exc:
        raise CursorError(f"{path} cannot be read: {exc.strerror or exc}") from None
    text = raw.removesuffix(b"\n")
    if not (0 < len(text) <= 16 and text.isascii() and text.isdigit()):
        raise CursorError(f"{path} is not a connection number")
    number = int(text)
    if number > END_OF_CONNECTION:
        raise CursorError(f"{path}: {number} is above 2^53 - 1")
    return number


def write_connection(path: Path, number: int) -> None:
    """Whole or not at all, durable: the file fsynced, renamed, its directory fsynced
    (OSError on failure)."""
    write_new(path, f"{number}\n".encode("ascii"), 0o600, replace=True)


def next_connection(*, saved: int, seen: int, log_size: int) -> int:
    """The number of the next connection (see the module docstring): above the file's, above
    every one this process used or saw, and at least the log's size x 2^20."""
    floor = min(log_size, END_OF_CONNECTION >> CONNECTIONS_PER_RECORD_BITS)
    number = max(saved + 1, seen + 1, floor << CONNECTIONS_PER_RECORD_BITS)
    return min(number, END_OF_CONNECTION)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One record as the publisher sends it: its export line, encoded."""

    seq: int
    hash: str
    payload: bytes


class LogOutbox:
    """Reads the live log (and its archive) for the publisher's thread. Not thread-safe: the
    publisher's one thread owns it. Every method raises :class:`AuditLogError` when the log
    cannot be read; the connection is then opened afresh at the next call."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / DB_NAME
        self._connection: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = connect_read_only(self.path)
        return self._connection

    def _query(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        try:
            return list(self._db().execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            self.close()
            raise AuditLogError(f"audit log: the fleet cannot read {self.path}: {exc}") from None

    def size(self) -> int:
        """The sequence number of the last record committed."""
        rows = self._query("SELECT coalesce(max(seq), 0) FROM records")
        return int(rows[0][0])

    def records(self, start: int, count: int) -> list[Outgoing]:
        """Up to ``count`` records from ``start`` on, in order, with no gap (from the archive
        for those retention moved there)."""
        stop = start + count - 1
        try:
            rows = list(read_records(self._db(), start=start, stop=stop))
        except AuditLogError:
            self.close()
            raise
        if not rows or rows[0].seq != start:
            archived = self._archived(start, stop)
            if archived:
                return archived
        between = "SELECT size, note FROM checkpoints WHERE size BETWEEN ? AND ?"
        notes: dict[int, str] = dict(self._query(between, (start, stop)))
        out = []
        for expected, row in enumerate(rows, start):
            if row.seq != expected:
                break  # a gap in the live log: never sent past it
            out.append(self._outgoing(row, notes.get(row.seq)))
        return out

    @staticmethod
    def _outgoing(row: StoredRecord, note: str | None) -> Outgoing:
        try:
            line = export_line(row, note)
        except ValueError as exc:  # not canonical, not UTF-8: verify-log names it
            raise AuditLogError(f"audit log: record {row.seq} cannot be exported: {exc}") from None
        return Outgoing(row.seq, row.hash, encode_record(line))

    def _archived(self, start: int, stop: int) -> list[Outgoing]:
        out: list[Outgoing] = []
        for path in archive_paths(self.state_dir):
            archive = connect_read_only(path)
            try:
                first, last = archive.execute("SELECT min(seq), max(seq) FROM records").fetchone()
                if not isinstance(first, int) or not isinstance(last, int) or last < start:
                    continue
                if first > start:
                    return out
                notes = dict(
                    archive.execute(
                        "SELECT size, note FROM checkpoints WHERE size BETWEEN ? AND ?",
                        (start, stop),
                    ).fetchall()
                )
                for row in read_records(archive, start=start, stop=stop):
                    if row.seq != start:
                        return out
                    note = notes.get(row.seq)
                    out.append(self._outgoing(row, note if isinstance(note, str) else None))
                    start += 1
                return out
            except sqlite3.Error as exc:
                raise AuditLogError(f"audit log: cannot read the archive {path}: {exc}") from None
            finally:
                archive.close()
        return out

    def hash_at(self, seq: int) -> str | None:
        """The hash of record ``seq`` in the live log, None when it holds no such record."""
        try:
            rows = list(read_records(self._db(), start=seq, stop=seq))
        except AuditLogError:
            self.close()
            raise
        return rows[0].hash if rows else None

    def checkpoint_within(self, acked: int) -> tuple[int, str] | None:
        """The newest signed checkpoint whose records were all acknowledged (size <= ``acked``):
        the log's latest if it is, else the newest kept in ``checkpoints``. Never one ahead of
        its records."""
        if acked <= 0:
            return None
        try:
            latest = read_latest_checkpoint(self._db())
        except AuditLogError:
            self.close()
            raise
        if latest is not None:
            size = checkpoint_size(latest)
            if size is not None and 0 < size <= acked:
                return size, latest
        rows = self._query(
            "SELECT size, note FROM checkpoints WHERE size > 0 AND size <= ?"
            " ORDER BY size DESC LIMIT 1",
            (acked,),
        )
        if not rows or not isinstance(rows[0][0], int) or not isinstance(rows[0][1], str):
            return None
        return rows[0][0], rows[0][1]

    def root_at(self, size: int) -> bytes | None:
        """The Merkle tree's root over the first ``size`` records, computed from the nearest
        frontier the log keeps (``checkpoints``) and the leaves after it; None when the live
        log cannot say (``size`` beyond it, or before its archived records)."""
        if size <= 0 or size > self.size():
            return None
        rows = self._query(
            "SELECT size, frontier FROM checkpoints WHERE frontier IS NOT NULL AND size <= ?"
            " ORDER BY size DESC LIMIT 1",
            (size,),
        )
        try:
            tree = (
                CompactRange()
                if not rows
                else CompactRange.from_bytes(int(rows[0][0]), bytes(rows[0][1]))
            )
        except (ValueError, TypeError):
            return None
        try:
            for row in read_records(self._db(), start=tree.size + 1, stop=size):
                if row.seq != tree.size + 1:
                    return None  # archived records and no frontier at the cut
                tree.append(row.leaf)
        except AuditLogError:
            self.close()
            raise
        return tree.root() if tree.size == size else None

    def close_covered(self, size: int) -> int | None:
        """The newest round close (a ``close`` or ``void`` record) among the first ``size``
        records, looked for back to the previous one; None when there is none in the live log."""
        rows = self._query(
            "SELECT seq FROM records WHERE seq <= ? AND kind IN (?, ?) ORDER BY seq DESC LIMIT 1",
            (size, *_ROUND_ENDS),
        )
        return int(str(rows[0][0])) if rows else None

    def last_cosigned(self) -> dict[str, Any]:
        """The data of the last ``cosigned`` record within the look-back (empty: none, or it
        cannot be read): the witness's key, the size it vouched for, the round close covered."""
        try:
            rows = newest_of(
                self._db(), {RecordKind.COSIGNED}, limit=1, within=COSIGNED_LOOKBACK_RECORDS
            )
        except sqlite3.Error as exc:
            self.close()
            raise AuditLogError(f"audit log: the fleet cannot read {self.path}: {exc}") from None
        if not rows:
            return {}
        seq, kind, leaf = rows[0]
        try:
            return dict(StoredRecord(int(str(seq)), str(kind), bytes(leaf)).data)
        except ValueError:
            return {}

    def rollback_evidence_recorded(self, size: int, root: str) -> bool:
        """Whether a ``rollback_evidence`` record of the witness's cosignature at ``size``
        records with ``root`` (base64) is in the live log. The records have no index by kind:
        this reads the whole log, so it is asked only when such a cosignature comes (after a
        rollback; once per process, the answer is then kept) and never on the control thread."""
        rows = self._query(
            "SELECT seq, kind, leaf FROM records WHERE kind = ? ORDER BY seq DESC",
            (str(RecordKind.ROLLBACK_EVIDENCE),),
        )
        for seq, kind, leaf in rows:
            try:
                data = StoredRecord(int(str(seq)), str(kind), bytes(leaf)).data
            except ValueError:
                continue
            if data.get("size") == size and data.get("root") == root:
                return True
        return False

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()
