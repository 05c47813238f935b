"""What one record of the audit log must be, checked by itself: its canonical form and fields,
and what it says (the key of ``log_created``, the paytables of ``config_loaded``, each result
recomputed from its dice), and the shape of the rounds (no result before its bets closed, no
close without its result). The sequential verifier (verify.py) and the parallel one
(parallel.py) share these, so that both check exactly the same things."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core import canonical
from controller.core.commissioning import check_record as check_commissioning
from controller.core.note import Checkpoint, NoteError, Verifier, open_checkpoint
from controller.core.record_data import (
    RecordDataError,
    check_cosigned,
    paytables_from_record,
    recompute_result,
    result_fields,
)
from controller.core.records import RecordKind, StoredRecord, record_hash
from controller.core.wagers import Paytable
from controller.errors import LogIntegrityError

ENTRY_KEYS = frozenset({"seq", "kind", "time", "prev", "data"})
RNG_KINDS = frozenset(
    {
        RecordKind.RNG_COMMIT,
        RecordKind.RNG_DRAW,
        RecordKind.RNG_REVEAL,
        RecordKind.RNG_INTERRUPTED,
    }
)
KINDS = frozenset(str(k) for k in RecordKind)
ROUND_KINDS = frozenset(
    {
        RecordKind.NO_MORE_BETS,
        RecordKind.RESULT,
        RecordKind.CLOSE,
        RecordKind.VOID,
        RecordKind.RESULT_VOIDED,
        RecordKind.MODE_CHANGED,
        RecordKind.BANK_SELECTED,
        RecordKind.DELIVERY_STYLE,
    }
)
CONTENT_KINDS = frozenset(
    {
        RecordKind.LOG_CREATED,
        RecordKind.CONFIG_LOADED,
        RecordKind.RESULT,
        RecordKind.COMMISSIONING,
        RecordKind.COSIGNED,
    }
)
MAX_REMEMBERED_RESULTS = 4096  # distinct (game, bank, dice): 216 rolls x 8 banks x 2 games


class Entry:
    """One record, decoded; ``data`` is parsed from the leaf when first asked for (a record
    recognised by its shape is canonical without it, and most kinds never need it)."""

    __slots__ = ("_data", "hash", "kind", "leaf", "prev", "seq")

    def __init__(
        self,
        seq: int,
        kind: str,
        prev: str,
        data: Mapping[str, Any] | None,
        *,
        leaf: bytes,
        hash: str,
    ) -> None:
        self.seq = seq
        self.kind = kind
        self.prev = prev
        self._data = data
        self.leaf = leaf
        self.hash = hash

    @property
    def data(self) -> Mapping[str, Any]:
        if self._data is None:
            data = canonical.Shapes.value(self.leaf.decode("utf-8"))["data"]
            assert isinstance(data, dict), "a record recognised by its shape holds an object"
            self._data = data
        return self._data


def decode_entry(row: StoredRecord, shapes: canonical.Shapes | None = None) -> Entry:
    return decode_fields(row.seq, row.kind, row.leaf, shapes)


def decode_fields(
    stored_seq: int, stored_kind: str, leaf: bytes, shapes: canonical.Shapes | None = None
) -> Entry:
    """The record stored at ``stored_seq`` with the index copy ``stored_kind`` of its kind:
    canonical, with its fields and nothing else, where its index says it is. With ``shapes``,
    a record of the shape of one decoded before (by kind) is recognised without decoding it
    (canonical.Shapes), and records decoded teach it their shapes."""
    if shapes is not None:
        entry = _recognised(stored_seq, stored_kind, leaf, shapes)
        if entry is not None:
            return entry
    try:
        value = canonical.decode(leaf)
        if not isinstance(value, dict):  # as StoredRecord.entry says it
            raise canonical.EncodingError("a record is a JSON object")
    except canonical.EncodingError as exc:
        raise LogIntegrityError(stored_seq, f"not a canonical record: {exc}") from exc
    if value.keys() != ENTRY_KEYS:
        raise LogIntegrityError(stored_seq, f"has fields {sorted(value)}, not {sorted(ENTRY_KEYS)}")
    seq, kind, prev, data = value["seq"], value["kind"], value["prev"], value["data"]
    if seq != stored_seq:
        raise LogIntegrityError(
            stored_seq,
            f"is stored at {stored_seq} but holds sequence number {seq} (moved or reordered)",
        )
    if kind not in KINDS or kind != stored_kind:
        raise LogIntegrityError(stored_seq, f"kind {kind!r} is unknown or differs from its index")
    if not isinstance(value["time"], str) or not isinstance(data, dict):
        raise LogIntegrityError(stored_seq, "time must be a string and data an object")
    if not isinstance(prev, str) or len(prev) != 64:
        raise LogIntegrityError(stored_seq, "prev is not a SHA-256 in hex")
    if shapes is not None:
        shapes.learn(value, stored_kind)
    return Entry(seq, kind, prev, data, leaf=leaf, hash=record_hash(leaf))


def _recognised(
    stored_seq: int, stored_kind: str, leaf: bytes, shapes: canonical.Shapes
) -> Entry | None:
    """The record, if of a shape learned from a record of its kind that passed every check
    of ``decode_fields`` (so with ``kind``, ``prev``, ``seq`` and ``time`` as its only scalar
    members, in that order, and ``data`` an object) and if these pass them too; else None."""
    try:
        text = leaf.decode("utf-8")
    except UnicodeError:
        return None
    members = shapes.match(text, stored_kind)
    if members is None or len(members) != 4:
        return None
    kind, prev, seq, time = members
    if kind[0] != '"' or prev[0] != '"' or time[0] != '"' or seq[0] not in _DIGIT_OR_MINUS:
        return None  # a scalar of another type: decode_fields names it
    number = int(seq)
    kind, prev = kind[1:-1], prev[1:-1]  # written as themselves: no escape in them
    if number != stored_seq or kind != stored_kind or kind not in KINDS or len(prev) != 64:
        return None
    return Entry(number, kind, prev, None, leaf=leaf, hash=record_hash(leaf))


_DIGIT_OR_MINUS = frozenset("-0123456789")


class ContentCheck:
    """What each record must say, fed in log order from the paytables in force: the key it was
    created for, the paytables it loads, the result its dice (or number) give, the verdict a
    commissioning walk's steps give, the witness's cosignature a ``cosigned`` record names.

    A result is a function of the game, the bank, the dice and the paytables alone: each
    distinct one is computed once per paytables (a log holds a few hundred distinct rolls
    and banks), and every result record is compared with it."""

    def __init__(
        self,
        verifier: Verifier,
        paytables: tuple[Paytable, ...] | None = None,
        *,
        expected: dict[tuple[object, ...], dict[str, Any]] | None = None,
    ) -> None:
        """``expected``: the results already computed with ``paytables`` (a dict this check
        fills in while those are in force)."""
        self.verifier = verifier
        self.paytables = paytables
        self._expected = {} if expected is None else expected

    def check(self, cur: Entry) -> int:
        """1 for a result checked, else 0; raises :class:`RecordDataError`."""
        if cur.kind == RecordKind.LOG_CREATED:
            _check_created(self.verifier, cur)
        elif cur.kind == RecordKind.CONFIG_LOADED:
            if "paytables" not in cur.data:
                raise RecordDataError("config_loaded lacks the paytables")
            self.paytables = paytables_from_record(cur.data["paytables"])
            self._expected = {}
        elif cur.kind == RecordKind.RESULT:
            self._check_result(cur)
            return 1
        elif cur.kind == RecordKind.COMMISSIONING:
            check_commissioning(cur.data)
        elif cur.kind == RecordKind.COSIGNED:
            check_cosigned(cur.data, seq=cur.seq, origin=self.verifier.name)
        return 0

    def _check_result(self, cur: Entry) -> None:
        data = cur.data
        if self.paytables is None and "dice" in data:
            raise RecordDataError("a result with dice before any config_loaded record")
        key = _result_key(data)
        expected = None if key is None else self._expected.get(key)
        if expected is None:
            recomputed = recompute_result(data, self.paytables or ())
            expected = canonical.normalized(recomputed.as_record())
            if key is not None and len(self._expected) < MAX_REMEMBERED_RESULTS:
                self._expected[key] = expected
        recorded = result_fields(data)
        if expected != recorded:
            for name in sorted(set(expected) | set(recorded)):
                if expected.get(name) != recorded.get(name):
                    raise RecordDataError(
                        f"result {name} is recorded as {recorded.get(name)!r} but the recorded"
                        f" {'dice give' if 'dice' in recorded else 'count gives'}"
                        f" {expected.get(name)!r}"
                    )


def _result_key(data: Mapping[str, Any]) -> tuple[object, ...] | None:
    """Everything ``recompute_result`` reads of ``data``, exactly (``type(x) is int`` keeps
    ``true`` apart from 1), or None: then the result is computed afresh."""
    game, bank = data.get("game"), data.get("bank")
    if type(game) is not str or type(bank) is not str:
        return None
    if "dice" in data:
        dice = data["dice"]
        if type(dice) is not dict or len(dice) != 2:
            return None
        red, blue = dice.get("red"), dice.get("blue")
        if type(red) is not int or type(blue) is not list or len(blue) != 2:
            return None
        if type(blue[0]) is not int or type(blue[1]) is not int:
            return None
        return (game, bank, red, blue[0], blue[1])
    count = data.get("count")
    return (game, bank, count) if type(count) is int else None


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


@dataclass(slots=True)
class RoundShape:
    """What every round must look like, whatever happened in it: a result only after its
    bets closed, and a second one only after the first was voided (N.J.A.C. 13:69E-1.28P:
    a round is never decided twice), a close only after its result, a bank selected only
    while bets are open, a delivery style only between the bets closed and the result. After
    a ``no_more_bets`` or a ``void`` the state no longer depends on the records before, so a
    run of the log can be checked from its first one on."""

    bets_closed: tuple[object, int] | None = None  # (round, seq of its no_more_bets)
    result: object = None  # the round whose result is recorded since its bets closed

    def feed(self, seq: int, kind: str, round_number: object) -> None:
        if kind == RecordKind.NO_MORE_BETS:
            self.bets_closed = (round_number, seq)
            self.result = None
        elif kind == RecordKind.RESULT:
            if self.bets_closed is None or self.bets_closed[0] != round_number:
                raise RecordDataError(f"a result of round {round_number} before its bets closed")
            if self.result == round_number:
                raise RecordDataError(
                    f"a second result of round {round_number} without a void of the first"
                )
            self.result = round_number
        elif kind == RecordKind.RESULT_VOIDED:
            if self.result != round_number:
                raise RecordDataError(f"round {round_number} has no result to void")
            self.result = None
        elif kind == RecordKind.CLOSE:
            if self.result != round_number:
                raise RecordDataError(f"round {round_number} is closed without its result")
            self.bets_closed = self.result = None
        elif kind == RecordKind.VOID:
            self.bets_closed = self.result = None
        elif kind == RecordKind.MODE_CHANGED and self.bets_closed and self.result is None:
            # current 621a.6(a): between rounds; a round in play is voided first
            raise RecordDataError(f"the mode changed while round {round_number} was in play")
        elif kind == RecordKind.BANK_SELECTED and self.bets_closed is not None:
            raise RecordDataError(f"a bank selected for round {round_number} after bets closed")
        elif kind == RecordKind.DELIVERY_STYLE and (
            # 621a.11(i): chosen once "no more bets" is announced, before the dice decide
            self.bets_closed is None
            or self.bets_closed[0] != round_number
            or self.result is not None
        ):
            raise RecordDataError(
                f"a delivery style for round {round_number} outside its bets closed"
                " and its result (621a.11(i))"
            )


def open_signed(verifier: Verifier, seq: int, note: str, what: str) -> Checkpoint:
    """A checkpoint note whose signature by ``verifier`` verifies, or a LogIntegrityError."""
    try:
        return open_checkpoint(note, verifier)
    except NoteError as exc:
        raise LogIntegrityError(seq, f"{what} signature: {exc}") from exc
