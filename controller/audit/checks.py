"""What one record of the audit log must be, checked by itself: its canonical form and fields,
and what it says (the key of ``log_created``, the paytables of ``config_loaded``, each result
recomputed from its dice). The sequential verifier (verify.py) and the parallel one
(parallel.py) share these, so that both check exactly the same things."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core import canonical
from controller.core.note import Checkpoint, NoteError, Verifier, open_checkpoint
from controller.core.record_data import (
    RecordDataError,
    paytables_from_record,
    recompute_result,
    result_fields,
)
from controller.core.records import RecordKind, StoredRecord, record_hash
from controller.core.wagers import Paytable
from controller.errors import LogIntegrityError

ENTRY_KEYS = frozenset({"seq", "kind", "time", "prev", "data"})
RNG_KINDS = frozenset({RecordKind.RNG_COMMIT, RecordKind.RNG_DRAW, RecordKind.RNG_REVEAL})
KINDS = frozenset(str(k) for k in RecordKind)


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    kind: str
    prev: str
    data: Mapping[str, Any]
    leaf: bytes
    hash: str


def decode_entry(row: StoredRecord) -> Entry:
    try:
        entry = row.entry()
    except canonical.EncodingError as exc:
        raise LogIntegrityError(row.seq, f"not a canonical record: {exc}") from exc
    if set(entry) != ENTRY_KEYS:
        raise LogIntegrityError(row.seq, f"has fields {sorted(entry)}, not {sorted(ENTRY_KEYS)}")
    seq, kind, prev, data = entry["seq"], entry["kind"], entry["prev"], entry["data"]
    if seq != row.seq:
        raise LogIntegrityError(
            row.seq, f"is stored at {row.seq} but holds sequence number {seq} (moved or reordered)"
        )
    if kind not in KINDS or kind != row.kind:
        raise LogIntegrityError(row.seq, f"kind {kind!r} is unknown or differs from its index")
    if not isinstance(entry["time"], str) or not isinstance(data, dict):
        raise LogIntegrityError(row.seq, "time must be a string and data an object")
    if not isinstance(prev, str) or len(prev) != 64:
        raise LogIntegrityError(row.seq, "prev is not a SHA-256 in hex")
    return Entry(seq, kind, prev, data, row.leaf, record_hash(row.leaf))


def check_content(
    verifier: Verifier, paytables: tuple[Paytable, ...] | None, cur: Entry
) -> tuple[tuple[Paytable, ...] | None, int]:
    """What one record must say, given the paytables in force: the key it was created for,
    the paytables it loads, the result its dice (or number) give. Returns the paytables in
    force after it and 1 for a result checked. Raises :class:`RecordDataError`."""
    if cur.kind == RecordKind.LOG_CREATED:
        _check_created(verifier, cur)
    elif cur.kind == RecordKind.CONFIG_LOADED:
        if "paytables" not in cur.data:
            raise RecordDataError("config_loaded lacks the paytables")
        return paytables_from_record(cur.data["paytables"]), 0
    elif cur.kind == RecordKind.RESULT:
        _check_result(paytables, cur)
        return paytables, 1
    return paytables, 0


def _check_created(verifier: Verifier, cur: Entry) -> None:
    """The first record names the log's key: the verifier's must be that key."""
    if cur.seq != 1:
        raise RecordDataError("log_created is only the first record")
    recorded = cur.data.get("key")
    try:
        key = Verifier.parse(str(recorded))
    except NoteError as exc:
        raise RecordDataError(f"log_created names no verifier key: {exc}") from exc
    if (key.name, key.key_id) != (verifier.name, verifier.key_id):
        raise RecordDataError(
            f"the log was created for the key {key.name}+{key.key_id.hex()}, not the key"
            f" {verifier.name}+{verifier.key_id.hex()} it is verified with"
        )
    if cur.data.get("origin") != key.name:
        raise RecordDataError("log_created: the origin is not the key's name")


def _check_result(paytables: tuple[Paytable, ...] | None, cur: Entry) -> None:
    if paytables is None and "dice" in cur.data:
        raise RecordDataError("a result with dice before any config_loaded record")
    recomputed = recompute_result(cur.data, paytables or ())
    recorded = result_fields(cur.data)
    expected = canonical.normalized(recomputed.as_record())
    if expected != recorded:
        for key in sorted(set(expected) | set(recorded)):
            if expected.get(key) != recorded.get(key):
                raise RecordDataError(
                    f"result {key} is recorded as {recorded.get(key)!r} but the recorded"
                    f" {'dice give' if 'dice' in recorded else 'count gives'}"
                    f" {expected.get(key)!r}"
                )


def open_signed(verifier: Verifier, seq: int, note: str, what: str) -> Checkpoint:
    """A checkpoint note whose signature by ``verifier`` verifies, or a LogIntegrityError."""
    try:
        return open_checkpoint(note, verifier)
    except NoteError as exc:
        raise LogIntegrityError(seq, f"{what} signature: {exc}") from exc
