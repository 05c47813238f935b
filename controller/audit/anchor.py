"""The log's anchor: the last signed round checkpoint, kept outside the database.

A database replaced by an older copy of itself, or cut back to an earlier signed checkpoint,
verifies on its own: every record, hash and signature in it is genuine. What gives it away is a
checkpoint the log published later. After each round the controller keeps that checkpoint here,
in a file of its own, and at every start it checks that the log extends it (the size is not
smaller, and the log's tree is the anchor's tree with more leaves). A log that does not is a
supervisor fault: the table does not play on a rolled-back log unnoticed.

The anchor is kept in two places: beside the log (``log-anchor``) and, with ``[storage]
anchor_copy_dir``, a copy in another directory, best on another filesystem (the copy is named
by the log's key id, ``log-anchor-<keyid>``, so that a simulation's log never overwrites the
table's copy). Both are written after each round. At start (``AuditLog.check_anchor``) one place
missing or behind the other is rewritten from the one that proves more, and that is recorded
(``power_on``'s ``anchor``); the log is checked against that one. With both gone while the log
has closed rounds, there is nothing to check a rollback against: ``anchor_missing`` latches, a
supervisor fault cleared only at the terminal with an employee id and a reason. Deleting the
anchor no longer turns the rollback check off.

This is a local anchor: it is on the same card. A card rolled back as a whole (both files) or a
log cut back to within the current round is not caught here; the checkpoint kept off the box
(``paigow-controller checkpoint`` and ``verify-log --checkpoint``, or the fleet's witness) is.

The file has two fixed-size slots written in turn, like a double-buffered superblock: a write
torn by a power cut damages only the slot being written, and the other still holds the previous
anchor. Each slot carries a generation number and the SHA-256 of its content; the valid slot
with the highest generation is the anchor. A slot is written after the round's records are
durable and is not synced itself: the anchor is a lower bound, so a power cut can only leave it
a round or two older, never ahead of the log, and the table pays no third fsync per round for
it. The file's creation is synced.

A slot's content (some 600 to 1,500 bytes) is written straight to the device (``O_DIRECT``),
in whole 512-byte sectors: those its new content spans, and those the slot's previous content
spanned beyond them (zeros now), so that the slot reads as the new anchor alone (issue 31:
written through the page cache, every round dirtied a 4 KiB page of its own, which at a
table's pace, a round a minute and the kernel's write-back after 30 seconds, was written
every round). The file's format is unchanged. Where ``O_DIRECT`` is refused (a filesystem
without it, a device whose sectors are larger, a buffer it will not take), the same sectors
are written through the page cache, as before.
"""

from __future__ import annotations

import errno
import hashlib
import json
import mmap
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from controller.core.merkle import HASH_SIZE, CompactRange
from controller.core.note import Checkpoint
from controller.core.state import Fault
from controller.errors import AuditLogError, NoteError
from controller.files import fsync_dir

ANCHOR_FILE = "log-anchor"
COPY_PREFIX = "log-anchor-"  # the copy in [storage] anchor_copy_dir: + the log's key id, hex
SLOT_BYTES = 4096
SECTOR_BYTES = 512  # the unit a slot is written in (O_DIRECT's, on an SD card's 512-byte sectors)
_MAGIC = b"paigow-log-anchor/1\n"


@dataclass(frozen=True, slots=True)
class Anchor:
    """A signed checkpoint (the note's text) and the compact range of the tree it signs, so
    that the records after it can be checked against it without reading the whole log."""

    note: str
    hashes: tuple[bytes, ...]
    generation: int = 0

    def checkpoint(self) -> Checkpoint:
        """The checkpoint's body, unverified (``controller.core.note.open_checkpoint`` verifies)."""
        text, sep, _ = self.note.rpartition("\n\n")
        if not sep:
            raise NoteError("the anchor's note has no signature")
        return Checkpoint.parse(text + "\n")

    def tree(self, size: int) -> CompactRange:
        return CompactRange.from_bytes(size, b"".join(self.hashes))

    def encode(self) -> bytes:
        body = json.dumps(
            {
                "generation": self.generation,
                "note": self.note,
                "hashes": [h.hex() for h in self.hashes],
            },
            sort_keys=True,
            ensure_ascii=True,
        ).encode("ascii")
        slot = _MAGIC + body + b"\n" + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n"
        if len(slot) > SLOT_BYTES:
            raise AuditLogError("audit log: the anchor does not fit its slot")
        return slot.ljust(SLOT_BYTES, b"\0")

    @classmethod
    def decode(cls, slot: bytes) -> Anchor | None:
        """The anchor in a slot, or None for an empty or damaged slot."""
        if not slot.startswith(_MAGIC):
            return None
        content = slot[len(_MAGIC) :].rstrip(b"\0")
        body, _, digest = content.rstrip(b"\n").rpartition(b"\n")
        if hashlib.sha256(body).hexdigest().encode("ascii") != digest:
            return None
        try:
            raw = json.loads(body.decode("ascii"))
            generation, note, hashes = raw["generation"], raw["note"], raw["hashes"]
            if not isinstance(generation, int) or not isinstance(note, str):
                return None
            decoded = tuple(bytes.fromhex(h) for h in hashes)
        except (ValueError, KeyError, TypeError, RecursionError):  # [[[[... nests too deep
            return None
        if any(len(h) != HASH_SIZE for h in decoded):
            return None
        return cls(note, decoded, generation)


def copy_path(directory: Path, key_id: bytes) -> Path:
    """Where the log of the key ``key_id`` keeps the copy of its anchor in ``directory``."""
    return Path(directory) / f"{COPY_PREFIX}{key_id.hex()}"


@dataclass(frozen=True, slots=True)
class AnchorFinding:
    """What a start found of the log's anchor: a fault to latch (and why), and a place whose
    anchor was missing or behind and was rewritten (to be recorded)."""

    fault: Fault | None = None
    detail: str = ""
    rewritten: str = ""


class AnchorFile:
    """The anchor file of a state directory. Not thread-safe: the control thread owns it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.written_direct: bool | None = None  # how the last write went (None: none yet)

    def read(self) -> Anchor | None:
        """The newest valid anchor; None when there is no file yet. A file whose slots are all
        damaged raises :class:`AuditLogError` (it was written, so an anchor was kept)."""
        try:  # not blocking: a FIFO put in the anchor's place must not hang its reader
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise AuditLogError(f"audit log: cannot read the anchor {self.path}: {exc}") from exc
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            with os.fdopen(fd, "rb", closefd=False) as file:
                data = file.read(2 * SLOT_BYTES + 1) if regular else b""
        except OSError as exc:
            raise AuditLogError(f"audit log: cannot read the anchor {self.path}: {exc}") from exc
        finally:
            os.close(fd)
        if not regular:
            raise AuditLogError(f"audit log: the anchor {self.path} is not a regular file")
        if len(data) != 2 * SLOT_BYTES:
            raise AuditLogError(f"audit log: the anchor {self.path} is damaged (size)")
        slots = [Anchor.decode(data[i * SLOT_BYTES : (i + 1) * SLOT_BYTES]) for i in (0, 1)]
        valid = [a for a in slots if a is not None]
        if not valid:
            if data.strip(b"\0"):
                raise AuditLogError(f"audit log: the anchor {self.path} is damaged")
            return None
        return max(valid, key=lambda a: a.generation)

    def write(self, note: str, hashes: tuple[bytes, ...]) -> None:
        """Keep a new anchor in the slot the current one is not in (not synced: see above)."""
        data = self._read_file()
        current = [_decoded(data, i) for i in (0, 1)]
        generation = max((a.generation for a in current if a is not None), default=0) + 1
        slot = generation % 2
        content = Anchor(note, hashes, generation).encode()
        try:
            if len(data) != 2 * SLOT_BYTES:  # a new file (or one cut short): made whole, synced
                self._create(data, slot, content)
                return
            # the sectors the new content spans and those the slot's old content spans
            old = data[slot * SLOT_BYTES : (slot + 1) * SLOT_BYTES].rstrip(b"\0")
            used = max(len(content.rstrip(b"\0")), len(old))
            length = min(SLOT_BYTES, -(-used // SECTOR_BYTES) * SECTOR_BYTES)
            self.written_direct = _write_sectors(self.path, content[:length], slot * SLOT_BYTES)
        except OSError as exc:
            raise AuditLogError(f"audit log: cannot write the anchor {self.path}: {exc}") from exc

    def _create(self, data: bytes, slot: int, content: bytes) -> None:
        """The whole file written, synced, its directory synced: the other slot keeps what
        it held (a file cut short: what is left of it; a new file: zeros)."""
        whole = bytearray(data[: 2 * SLOT_BYTES].ljust(2 * SLOT_BYTES, b"\0"))
        whole[slot * SLOT_BYTES : (slot + 1) * SLOT_BYTES] = content
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, 2 * SLOT_BYTES)
            _pwrite_all(fd, memoryview(bytes(whole)), 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.path.parent)
        self.written_direct = False

    def _read_file(self) -> bytes:
        """The file's bytes, one more than it should hold when it holds more."""
        try:
            with self.path.open("rb") as file:
                return file.read(2 * SLOT_BYTES + 1)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise AuditLogError(f"audit log: cannot read the anchor {self.path}: {exc}") from exc


def _decoded(data: bytes, slot: int) -> Anchor | None:
    return Anchor.decode(data[slot * SLOT_BYTES : (slot + 1) * SLOT_BYTES])


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


# How a filesystem or a device refuses O_DIRECT (at the open, or at a write it cannot take):
# the sectors then go through the page cache. Any other error is the write's own.
_REFUSED = frozenset({errno.EINVAL, errno.EOPNOTSUPP})


def _write_sectors(path: Path, sectors: bytes, offset: int) -> bool:
    """Whole sectors written at ``offset`` (a multiple of SECTOR_BYTES) straight to the device;
    through the page cache where O_DIRECT is refused. Whether they went straight."""
    direct = getattr(os, "O_DIRECT", None)  # Linux's
    try:
        fd = -1 if direct is None else os.open(path, os.O_WRONLY | os.O_CLOEXEC | direct)
    except OSError as exc:
        if exc.errno not in _REFUSED:
            raise
        fd = -1
    if fd >= 0:
        try:
            # O_DIRECT takes memory aligned to the sector: an anonymous map is page aligned
            with mmap.mmap(-1, len(sectors)) as buffer:
                buffer.write(sectors)
                if os.pwrite(fd, buffer, offset) == len(sectors):
                    return True
                # a short direct write: the rest as any other write
        except OSError as exc:
            if exc.errno not in _REFUSED:
                raise
        finally:
            os.close(fd)
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        _pwrite_all(fd, memoryview(sectors), offset)
    finally:
        os.close(fd)
    return False
