"""The log's anchor in its two places (controller/audit/anchor.py): beside the log and a copy in
``[storage] anchor_copy_dir``. One deleted is rewritten from the other and that is said; both
gone while the log has closed rounds is ``anchor_missing``; copies that disagree: the one that
proves more is checked and the other rewritten from it (issue 28)."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from controller.audit.anchor import (
    ANCHOR_FILE,
    SECTOR_BYTES,
    SLOT_BYTES,
    Anchor,
    AnchorFile,
    copy_path,
)
from controller.audit.log import DB_NAME, AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.core.records import RecordKind
from controller.core.state import Fault
from controller.errors import LogIntegrityError


def _log(state: Path, copies: Path | None) -> AuditLog:
    return AuditLog.open(state, anchor_copy_dir=copies)


def _round(log: AuditLog, number: int) -> None:
    """A round's records, ending with its close: the commit writes the anchor."""
    log.commit([(RecordKind.ROUND_OPENED, {"round": number})], context=b"open")
    log.commit([(RecordKind.CLOSE, {"round": number})], context=b"closed")


def _places(state: Path, copies: Path) -> tuple[Path, Path]:
    signer = load_signer(state)
    assert signer is not None
    return state / ANCHOR_FILE, copy_path(copies, signer.verifier.key_id)


def _size(path: Path) -> int:
    anchor = AnchorFile(path).read()
    assert anchor is not None
    return anchor.checkpoint().size


def _played(tmp_path: Path, rounds: int = 2) -> tuple[Path, Path, int]:
    state, copies = tmp_path / "state", tmp_path / "boot"
    copies.mkdir()
    with _log(state, copies) as log:
        for number in range(1, rounds + 1):
            _round(log, number)
        size = log.size
    return state, copies, size


def test_each_round_writes_the_anchor_in_both_places(tmp_path: Path) -> None:
    state, copies, size = _played(tmp_path)
    primary, copy = _places(state, copies)
    assert copy.name.startswith("log-anchor-")
    assert len(copy.name) == len("log-anchor-") + 8
    assert _size(primary) == _size(copy) == size
    with _log(state, copies) as log:
        assert log.check_anchor() is None


def test_one_place_deleted_is_rewritten_from_the_other_and_said(tmp_path: Path) -> None:
    state, copies, size = _played(tmp_path)
    primary, copy = _places(state, copies)
    for gone, other in ((primary, copy), (copy, primary)):
        gone.unlink()
        with _log(state, copies) as log:
            found = log.check_anchor()
        assert found is not None
        assert found.fault is None
        assert f"{gone} (missing)" in found.rewritten
        assert f"from {other} ({size} records)" in found.rewritten
        assert _size(gone) == size
        with _log(state, copies) as log:
            assert log.check_anchor() is None  # set right: the next start is quiet


def test_both_places_gone_with_closed_rounds_is_anchor_missing(tmp_path: Path) -> None:
    state, copies, _ = _played(tmp_path)
    for path in _places(state, copies):
        path.unlink()
    with _log(state, copies) as log:
        found = log.check_anchor()
        assert found is not None
        assert found.fault is Fault.ANCHOR_MISSING
        assert "closed rounds" in found.detail
        assert str(state / ANCHOR_FILE) in found.detail
        assert log.reanchor() == log.size  # the supervisor's clear: both written again
        assert log.check_anchor() is None
    assert all(p.exists() for p in _places(state, copies))


def test_the_anchor_beside_the_log_deleted_without_a_copy_is_anchor_missing(
    tmp_path: Path,
) -> None:
    """Issue 28, finding 2: before, a log with closed rounds and no anchor was taken as a log
    with no anchor yet, and the rollback check was off."""
    state = tmp_path / "state"
    with AuditLog.open(state) as log:
        _round(log, 1)
    (state / ANCHOR_FILE).unlink()
    with AuditLog.open(state) as log:
        found = log.check_anchor()
    assert found is not None
    assert found.fault is Fault.ANCHOR_MISSING


def test_a_log_with_no_closed_round_has_no_anchor_yet(tmp_path: Path) -> None:
    state, copies = tmp_path / "state", tmp_path / "boot"
    copies.mkdir()
    with _log(state, copies) as log:
        log.commit([(RecordKind.ROUND_OPENED, {"round": 1})], context=b"open")
        log.checkpoint()  # a checkpoint on demand is not a round's close
        assert log.check_anchor() is None
    assert not (state / ANCHOR_FILE).exists()


def test_a_rollback_with_the_anchor_beside_the_log_deleted_is_caught_by_the_copy(
    tmp_path: Path,
) -> None:
    state, copies = tmp_path / "state", tmp_path / "boot"
    copies.mkdir()
    with _log(state, copies) as log:
        _round(log, 1)
    older = tmp_path / "older.db"
    shutil.copy2(state / DB_NAME, older)
    with _log(state, copies) as log:
        _round(log, 2)
    (state / DB_NAME).unlink()
    for suffix in ("-wal", "-shm"):
        (state / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
    shutil.copy2(older, state / DB_NAME)
    (state / ANCHOR_FILE).unlink()
    with _log(state, copies) as log:
        found = log.check_anchor()
    assert found is not None
    assert found.fault is Fault.LOG_ROLLBACK
    assert "rolled back" in found.detail
    assert not (state / ANCHOR_FILE).exists()  # nothing rewritten from a log that went back


def test_copies_that_disagree_the_one_that_proves_more_is_checked_and_the_other_rewritten(
    tmp_path: Path,
) -> None:
    state, copies, first = _played(tmp_path, rounds=1)
    primary, copy = _places(state, copies)
    behind = tmp_path / "behind"
    shutil.copy2(copy, behind)
    with _log(state, copies) as log:
        _round(log, 2)
        size = log.size
    for stale, ahead in ((copy, primary), (primary, copy)):
        shutil.copy2(behind, stale)  # a round behind (a power cut, or a copy put back)
        assert _size(stale) == first
        with _log(state, copies) as log:
            found = log.check_anchor()
        assert found is not None
        assert found.fault is None
        assert f"{stale} (at {first} records)" in found.rewritten
        assert f"from {ahead} ({size} records)" in found.rewritten
        assert _size(stale) == size


def test_a_copy_ahead_of_a_rolled_back_log_is_a_rollback(tmp_path: Path) -> None:
    """The copy proves more than the log beside it: the log is checked against the copy."""
    state, copies, _ = _played(tmp_path, rounds=1)
    primary, _copy = _places(state, copies)
    behind = tmp_path / "behind"
    shutil.copy2(primary, behind)
    older = tmp_path / "older.db"
    shutil.copy2(state / DB_NAME, older)
    with _log(state, copies) as log:
        _round(log, 2)
    for suffix in ("-wal", "-shm"):
        (state / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
    shutil.copy2(older, state / DB_NAME)
    shutil.copy2(behind, primary)  # the anchor beside the log put back with it
    with _log(state, copies) as log:
        found = log.check_anchor()
    assert found is not None
    assert found.fault is Fault.LOG_ROLLBACK
    assert "rolled back" in found.detail


def test_a_copy_that_cannot_be_written_is_a_storage_fault(tmp_path: Path) -> None:
    state, copies, _ = _played(tmp_path)
    _, copy = _places(state, copies)
    copy.unlink()
    copies.rmdir()  # the second place's mount is gone: never made again on the card
    with _log(state, copies) as log:
        found = log.check_anchor()
        assert found is not None
        assert found.fault is Fault.STORAGE
        assert str(copy) in found.detail
        committed = log.commit([(RecordKind.CLOSE, {"round": 3})], context=b"c")
        assert committed.anchor_error is not None
        assert str(copy) in committed.anchor_error
    assert not copies.exists()


def test_verify_log_refuses_a_missing_anchor_cleared_without_who_or_why(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cleared = {"round": 1, "faults": ["anchor_missing"], "supervisor": True, "employee": "T0042"}
    with AuditLog.open(state) as log:
        log.append(RecordKind.FAULT_CLEARED, {**cleared, "note": "card repaired"})
    signer = load_signer(state)
    assert signer is not None
    verify_state_dir(state, signer.verifier)  # who and why: as the controller writes it
    for number, (wrong, message) in enumerate(
        (
            ({**cleared}, "a note saying why"),
            ({**cleared, "note": " "}, "a note saying why"),
            ({**cleared, "employee": None, "note": "x"}, "names themselves"),
            ({**cleared, "supervisor": False, "note": "x"}, "names themselves"),
        )
    ):
        other = tmp_path / f"other-{number}"
        with AuditLog.open(other) as log:
            log.append(RecordKind.FAULT_CLEARED, wrong)
        key = load_signer(other)
        assert key is not None
        with pytest.raises(LogIntegrityError, match=message):
            verify_state_dir(other, key.verifier)


def _writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each pwrite's (offset, bytes) from here on."""
    calls: list[tuple[int, int]] = []
    pwrite = os.pwrite

    def counted(fd: int, data: Any, offset: int) -> int:
        written = pwrite(fd, data, offset)
        calls.append((offset, written))
        return written

    monkeypatch.setattr(os, "pwrite", counted)
    return calls


def test_a_round_writes_the_anchors_sectors_not_its_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first (the file made, synced), a round's anchor is written in the 512-byte
    sectors its slot's content spans, straight to the device where it takes O_DIRECT (this
    machine's disk does): not a 4 KiB page of the page cache each round."""
    state = tmp_path / "state"
    with AuditLog.open(state) as log:
        _round(log, 1)
        calls = _writes(monkeypatch)
        for number in range(2, 6):
            _round(log, number)
        assert log._anchor is not None
        direct = log._anchor.written_direct
        size = log.size
    assert len(calls) == 4
    for n, (offset, written) in enumerate(calls):
        assert offset == (n % 2) * SLOT_BYTES  # the slots in turn (generations 2 to 5)
        assert written % SECTOR_BYTES == 0
        assert 0 < written <= 3 * SECTOR_BYTES
    assert _size(state / ANCHOR_FILE) == size
    print(f"the anchor went straight to the device: {direct}")


def test_a_slot_written_shorter_than_before_is_cleared_past_it(tmp_path: Path) -> None:
    """The compact range has fewer hashes as the log grows past a power of two: the sectors
    the slot's longer old content spans are written too (zeros), so that it reads whole."""
    path = tmp_path / ANCHOR_FILE
    anchor = AnchorFile(path)
    long, short = tuple(bytes([n]) * 32 for n in range(20)), (bytes(32),)
    anchor.write("long, generation 1", long)
    anchor.write("long, generation 2", long)
    anchor.write("short, generation 3", short)
    anchor.write("short, generation 4", short)
    data = path.read_bytes()
    slots = [Anchor.decode(data[i * SLOT_BYTES : (i + 1) * SLOT_BYTES]) for i in (0, 1)]
    assert [s.note if s else None for s in slots] == ["short, generation 4", "short, generation 3"]
    read = anchor.read()
    assert read is not None
    assert (read.note, read.hashes) == ("short, generation 4", short)


def test_where_o_direct_is_refused_the_sectors_go_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that refuses O_DIRECT (tmpfs on older kernels: EINVAL at open) or a device
    that refuses the write (sectors larger than 512 bytes: EINVAL at write): the same sectors
    are written as any other write."""
    path = tmp_path / ANCHOR_FILE
    anchor = AnchorFile(path)
    anchor.write("generation 1", ())
    opened = os.open
    pwrite = os.pwrite
    for where in ("open", "write"):

        def refused_open(name: Any, flags: int, *args: Any, where: str = where, **kw: Any) -> int:
            if where == "open" and flags & os.O_DIRECT:
                raise OSError(errno.EINVAL, "Invalid argument")
            return opened(name, flags, *args, **kw)

        def refused_write(fd: int, data: Any, offset: int, where: str = where) -> int:
            if where == "write" and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
                raise OSError(errno.EINVAL, "Invalid argument")
            return pwrite(fd, data, offset)

        monkeypatch.setattr(os, "open", refused_open)
        monkeypatch.setattr(os, "pwrite", refused_write)
        anchor.write(f"after a refused {where}", ())
        monkeypatch.undo()
        assert anchor.written_direct is False
        read = anchor.read()
        assert read is not None
        assert read.note == f"after a refused {where}"
