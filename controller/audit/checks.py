"""What one record of the audit log must be, checked by itself: its canonical form and fields,
and what it says (the key of ``log_created``, the paytables of ``config_loaded``, each result
recomputed from its dice, a correction's result recomputed from the dice seen, a void's reason
and who gave it, every employee id well-formed), and the shape of the rounds (no round decided
twice, no result before its bets closed, no close without its result, a correction only of its
round's result). The sequential verifier (verify.py) and the parallel one (parallel.py) share
these, so that both check exactly the same things."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.core import canonical
from controller.core.commissioning import check_record as check_commissioning
from controller.core.dice import Roll
from controller.core.note import Checkpoint, Verifier, open_checkpoint
from controller.core.record_data import (
    check_cosigned,
    check_rollback_evidence,
    paytables_from_record,
    recompute_result,
    result_fields,
    roll_of,
)
from controller.core.records import RecordKind, StoredRecord, record_hash
from controller.core.state import CorrectionReason, Fault, VoidReason, check_employee_id
from controller.core.wagers import Paytable
from controller.errors import (
    EncodingError,
    GameRuleError,
    LogIntegrityError,
    NoteError,
    RecordDataError,
)

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
        RecordKind.RESULT_CORRECTED,
        RecordKind.MODE_CHANGED,
        RecordKind.BANK_SELECTED,
        RecordKind.DELIVERY_STYLE,
    }
)
# The records that may name who did it: "employee" (an employee id, or null where a key of the
# dealer's panel was pressed with no dealer signed on), "dealer", and "uid" (the operating
# system's account that sent a terminal command)
WHO_KINDS = frozenset(
    {
        RecordKind.NO_MORE_BETS,
        RecordKind.BANK_SELECTED,
        RecordKind.DELIVERY_STYLE,
        RecordKind.CLOSE,
        RecordKind.FAULT_CLEARED,
        RecordKind.SUPERVISOR_ACTION,
        RecordKind.MODE_CHANGED,
        RecordKind.SERVICE_MODE,
        RecordKind.DICE_REPLACED,
        RecordKind.VOID,
        RecordKind.RESULT_CORRECTED,
        RecordKind.SHUFFLE,
        RecordKind.TILES_SHUFFLED,
        RecordKind.TILES_INSPECTED,
        RecordKind.SHIFT_CHANGE,
    }
)
CONTENT_KINDS = (
    frozenset(
        {
            RecordKind.LOG_CREATED,
            RecordKind.CONFIG_LOADED,
            RecordKind.RESULT,
            RecordKind.COMMISSIONING,
            RecordKind.COSIGNED,
            RecordKind.ROLLBACK_EVIDENCE,
        }
    )
    | WHO_KINDS
)
MAX_REMEMBERED_RESULTS = 4096  # distinct (game, bank, dice, wagers settled or not)
MAX_UID = 2**32 - 1  # a Linux uid_t
DICE_MODES = frozenset({"shaker", "manual"})  # a round's mode whose dice settle side wagers
MODES = DICE_MODES | {"rng"}
# what a ``void`` record holds: now, and as logs written before corrections hold it
_VOID_KEYS = frozenset(
    {"round", "attempt", "state", "reason", "wagers", "reshuffle", "note", "employee"}
)
_OLD_VOID_KEYS = frozenset({"round", "attempt", "state", "supervisor", "detail"})
_CORRECTED_KEYS = frozenset(
    {"round", "attempt", "dice_read", "dice_seen", "reason", "employee", "note", "result"}
)


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
            raise EncodingError("a record is a JSON object")
    except EncodingError as exc:
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
    created for, the paytables it loads, the result its dice (or number) give, the result a
    correction's dice seen give (N.J.A.C. 13:69E-1.28P(d)), a void's reason and who gave it
    (621a.12(c),(e)), every employee id, the verdict a commissioning walk's steps give, the
    witness's cosignature a ``cosigned`` record names.

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
        """1 for a result recomputed (a result's, or a correction's), else 0; raises
        :class:`RecordDataError`."""
        if cur.kind in WHO_KINDS:
            _check_who(cur.data)
        if cur.kind == RecordKind.LOG_CREATED:
            _check_created(self.verifier, cur)
        elif cur.kind == RecordKind.CONFIG_LOADED:
            if "paytables" not in cur.data:
                raise RecordDataError("config_loaded lacks the paytables")
            self.paytables = paytables_from_record(cur.data["paytables"])
            self._expected = {}
        elif cur.kind == RecordKind.RESULT:
            self._check_result(cur.data)
            return 1
        elif cur.kind == RecordKind.RESULT_CORRECTED:
            self._check_correction(cur.data)
            return 1
        elif cur.kind == RecordKind.VOID:
            _check_void(cur.data)
        elif cur.kind == RecordKind.FAULT_CLEARED:
            _check_fault_cleared(cur.data)
        elif cur.kind == RecordKind.COMMISSIONING:
            check_commissioning(cur.data)
        elif cur.kind == RecordKind.COSIGNED:
            check_cosigned(cur.data, seq=cur.seq, origin=self.verifier.name)
        elif cur.kind == RecordKind.ROLLBACK_EVIDENCE:
            check_rollback_evidence(cur.data, log_key=self.verifier)
        return 0

    def _check_result(self, data: Mapping[str, Any], *, what: str = "result") -> None:
        if self.paytables is None and "dice" in data:
            raise RecordDataError(f"a {what} with dice before any config_loaded record")
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
                        f"{what} {name} is recorded as {recorded.get(name)!r} but the recorded"
                        f" {'dice give' if 'dice' in recorded else 'count gives'}"
                        f" {expected.get(name)!r}"
                    )

    def _check_correction(self, data: Mapping[str, Any]) -> None:
        """N.J.A.C. 13:69E-1.28P(d): a result corrected to the dice as they lie says what the
        sensor read, what the dice show, why, who, and the result the dice seen give with the
        paytables in force (its side wagers settled on them). Its place in the round (after its
        result, the same dice read) is :class:`RoundShape`'s."""
        keys = set(data) - {"uid"}
        if keys != _CORRECTED_KEYS:
            raise RecordDataError(
                f"a result_corrected record has {sorted(_CORRECTED_KEYS)} (and a uid), not"
                f" {sorted(keys)}"
            )
        if data["reason"] not in _CORRECTION_REASONS:
            raise RecordDataError(
                f"a correction's reason is one of {', '.join(sorted(_CORRECTION_REASONS))},"
                f" not {data['reason']!r}"
            )
        if data["employee"] is None:
            raise RecordDataError("a correction names the employee who made it")
        if not isinstance(data["note"], str):
            raise RecordDataError("a correction's note is text")
        read, seen = _roll(data["dice_read"], "dice_read"), _roll(data["dice_seen"], "dice_seen")
        if seen == read:
            raise RecordDataError("a correction whose dice seen are the dice read corrects nothing")
        result = data["result"]
        if not isinstance(result, dict) or "round" in result or "attempt" in result:
            raise RecordDataError("a correction's result is a result's fields")
        if result.get("dice") != data["dice_seen"] or "wagers" not in result:
            raise RecordDataError(
                "a correction's result is of the dice seen, its side wagers settled on them"
            )
        self._check_result(result, what="corrected result")


def _result_key(data: Mapping[str, Any]) -> tuple[object, ...] | None:
    """Everything ``recompute_result`` reads of ``data``, exactly (``type(x) is int`` keeps
    ``true`` apart from 1), whether its dice settle side wagers included, or None: then the
    result is computed afresh."""
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
        return (game, bank, red, blue[0], blue[1], "wagers" in data)
    count = data.get("count")
    return (game, bank, count) if type(count) is int else None


_CORRECTION_REASONS = frozenset(str(r) for r in CorrectionReason)
_VOID_REASONS = {str(r): r for r in VoidReason}


def _roll(raw: object, what: str) -> Roll:
    try:
        return roll_of(raw)
    except (RecordDataError, GameRuleError) as exc:
        raise RecordDataError(f"{what}: {exc}") from None


def _check_who(data: Mapping[str, Any]) -> None:
    """Who did it, where a record says: an employee id (or null for a key of the dealer's
    panel with no dealer signed on) is 1..16 ASCII letters and digits; a uid is a Linux
    account's number."""
    for name in ("employee", "dealer"):
        employee = data.get(name)
        if employee is None:
            continue
        if not isinstance(employee, str):
            raise RecordDataError(f"{name} is an employee id or null, not {employee!r}")
        try:
            check_employee_id(employee)
        except GameRuleError as exc:
            raise RecordDataError(f"{name}: {exc}") from None
    if "uid" in data:
        uid = data["uid"]
        if type(uid) is not int or not 0 <= uid <= MAX_UID:
            raise RecordDataError(f"uid is an account's number 0..{MAX_UID}, not {uid!r}")


def _check_fault_cleared(data: Mapping[str, Any]) -> None:
    """A missing anchor (``anchor_missing``, issue 28) is cleared by a supervisor naming
    themselves and why: the record carries both, or it was not the controller that wrote it."""
    faults = data.get("faults")
    if not isinstance(faults, list) or str(Fault.ANCHOR_MISSING) not in faults:
        return
    if data.get("supervisor") is not True or not isinstance(data.get("employee"), str):
        raise RecordDataError("anchor_missing is cleared by a supervisor who names themselves")
    note = data.get("note")
    if not isinstance(note, str) or not note.strip():
        raise RecordDataError("anchor_missing is cleared with a note saying why")


def _check_void(data: Mapping[str, Any]) -> None:
    """A whole round void (621a.12(c),(e)): why, who, every wager returned, whether the tiles
    are reshuffled. A reason a person gives at the service terminal names the employee; the
    table's own may not (a key of the panel with no dealer signed on). A log written before
    the reasons has ``{round, attempt, state, supervisor, detail}``, still accepted."""
    if "reason" not in data:
        if not set(data) <= _OLD_VOID_KEYS or not isinstance(data.get("supervisor", False), bool):
            raise RecordDataError(
                f"a void record has {sorted(_VOID_KEYS)} (and a uid), not {sorted(data)}"
            )
        return
    keys = set(data) - {"uid"}
    if keys != _VOID_KEYS:
        raise RecordDataError(
            f"a void record has {sorted(_VOID_KEYS)} (and a uid), not {sorted(keys)}"
        )
    reason = _VOID_REASONS.get(data["reason"]) if isinstance(data["reason"], str) else None
    if reason is None:
        raise RecordDataError(
            f"a void's reason is one of {', '.join(_VOID_REASONS)}, not {data['reason']!r}"
        )
    if reason.is_typed and data["employee"] is None:
        raise RecordDataError(f"a void for {reason} names the employee who voided the round")
    if data["wagers"] != "returned":
        raise RecordDataError("a void returns every wager (621a.12(c),(e))")
    if data["reshuffle"] is not reason.reshuffles:
        raise RecordDataError(
            f"a void for {reason} {'reshuffles' if reason.reshuffles else 'does not reshuffle'}"
            " the tiles (621a.12(c),(e))"
        )
    if not isinstance(data["note"], str) or not isinstance(data["state"], str):
        raise RecordDataError("a void's state and note are text")


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


# What :class:`RoundShape` reads of a record: the parallel verifier hands these back for the
# records of a run before its first round boundary (shape_data)
SHAPE_FIELDS = (
    "round",
    "attempt",
    "mode",
    "game",
    "bank",
    "dice",
    "wagers",
    "payouts",
    "dice_read",
    "result",
)


def shape_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a record's data that :class:`RoundShape` reads."""
    return {name: data[name] for name in SHAPE_FIELDS if name in data}


@dataclass(frozen=True, slots=True)
class Decided:
    """A round's one result, as the round's shape keeps it: what a correction must match."""

    round: object
    attempt: object
    game: object
    bank: object
    dice: object  # None: an RNG number without dice
    settles_wagers: bool


@dataclass(slots=True)
class RoundShape:
    """What every round must look like, whatever happened in it. A round's bets close once,
    and the rounds' numbers only grow; a round is decided once, ever: one ``result`` after its
    bets closed, never voided to be decided again (N.J.A.C. 13:69E-1.28G: no secondary
    selection, so a ``result_voided`` of a log written before corrections is refused); at most
    one correction of that result to the dice as they lie, before its close or void, never of
    an RNG round's (N.J.A.C. 13:69E-1.28P(d)); the dice of an RNG round settle no side wager
    and those of a dice round do (current 621a.5(e)(2)-(4), 621a.6(b)); a close only after its
    result, a bank selected only while bets are open, a delivery style only between the bets
    closed and the result.

    After a ``no_more_bets`` or a ``void`` the state no longer depends on the records before
    but for the last round whose bets closed (and the last decided, for the message): a run of
    the log can be checked from its first one on, by itself, and joined to what came before
    with :meth:`then`, which checks the seam."""

    bets_closed: tuple[object, int] | None = None  # (round, seq of its no_more_bets)
    mode: object = None  # the mode its bets closed in (None: a log from before the modes)
    result: Decided | None = None  # the round's result, recorded since its bets closed
    corrected: bool = False  # its result was corrected
    last_bets: int | None = None  # the round whose bets closed last, ever
    decided: object = None  # the round decided last, ever
    first_bets: int | None = None  # the first round whose bets closed, with none known before

    def feed(self, seq: int, kind: str, data: Mapping[str, Any]) -> None:
        """One record's part in the rounds' shape (record_schema.py gives its fields)."""
        take = _SHAPE_STEPS.get(kind)
        if take is not None:
            take(self, seq, data.get("round"), data)

    def _no_more_bets(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        self._bets_closed(seq, round_number, data.get("mode", None))

    def _result_of(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        self._result(round_number, data)

    def _result_voided(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        raise RecordDataError(
            f"a result of round {round_number} voided to decide the round again: a"
            " secondary selection (N.J.A.C. 13:69E-1.28G; a result is corrected to the"
            " dice as they lie, or the round is void)"
        )

    def _corrected_of(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        self._corrected(round_number, data)

    def _close(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        if self.result is None or self.result.round != round_number:
            raise RecordDataError(f"round {round_number} is closed without its result")
        self._ended()

    def _void(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        self._ended()

    def _mode_changed(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        if self.bets_closed and self.result is None:
            # current 621a.6(a): between rounds; a round in play is voided first
            raise RecordDataError(f"the mode changed while round {round_number} was in play")

    def _bank_selected(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        if self.bets_closed is not None:
            raise RecordDataError(f"a bank selected for round {round_number} after bets closed")

    def _delivery_style(self, seq: int, round_number: object, data: Mapping[str, Any]) -> None:
        # 621a.11(i): chosen once "no more bets" is announced, before the dice decide
        if (
            self.bets_closed is None
            or self.bets_closed[0] != round_number
            or self.result is not None
        ):
            raise RecordDataError(
                f"a delivery style for round {round_number} outside its bets closed"
                " and its result (621a.11(i))"
            )

    def then(self, later: RoundShape) -> RoundShape:
        """The shape after this one's records and then ``later``'s, a run checked by itself
        from a ``no_more_bets`` or a ``void`` on: its first bets closed must come after the
        last ones here (the round numbers only grow across the seam too)."""
        first, last = later.first_bets, self.last_bets
        if first is not None and last is not None and first <= last:
            raise RecordDataError(_bets_again(first, last))
        return replace(
            later,
            last_bets=last if later.last_bets is None else later.last_bets,
            decided=self.decided if later.decided is None else later.decided,
            first_bets=first if self.first_bets is None else self.first_bets,
        )

    def _bets_closed(self, seq: int, round_number: object, mode: object) -> None:
        if type(round_number) is not int or round_number < 1:
            raise RecordDataError(f"no_more_bets names round {round_number!r}, not a round 1..")
        if mode is not None and mode not in MODES:
            raise RecordDataError(f"no_more_bets: mode {mode!r} is none of {sorted(MODES)}")
        if self.last_bets is not None and round_number <= self.last_bets:
            raise RecordDataError(_bets_again(round_number, self.last_bets))
        if self.last_bets is None and self.first_bets is None:
            self.first_bets = round_number
        self.last_bets = round_number
        self.bets_closed = (round_number, seq)
        self.mode = mode
        self.result = None
        self.corrected = False

    def _result(self, round_number: object, data: Mapping[str, Any]) -> None:
        if self.decided is not None and self.decided == round_number:
            raise RecordDataError(
                f"round {round_number} decided twice: a second result of it (no secondary"
                " selection, N.J.A.C. 13:69E-1.28G)"
            )
        if self.bets_closed is None or self.bets_closed[0] != round_number:
            raise RecordDataError(f"a result of round {round_number} before its bets closed")
        settles = "wagers" in data or "payouts" in data
        if self.mode == "rng" and settles:
            raise RecordDataError(
                f"a result of RNG round {round_number} settles side wagers: the RNG's dice"
                " settle none (current 621a.5(e)(2)-(4))"
            )
        if self.mode in DICE_MODES and not {"dice", "wagers", "payouts"} <= set(data):
            raise RecordDataError(
                f"a result of {self.mode} round {round_number} without its dice and the side"
                " wagers they settle (current 621a.5(e), 621a.6(b))"
            )
        self.result = Decided(
            round_number,
            data.get("attempt"),
            data.get("game"),
            data.get("bank"),
            data.get("dice"),
            "wagers" in data,
        )
        self.decided = round_number

    def _corrected(self, round_number: object, data: Mapping[str, Any]) -> None:
        """N.J.A.C. 13:69E-1.28P(d): the result shown, corrected to the dice as they lie."""
        result = self.result
        if result is None or result.round != round_number:
            when = "after its close or void" if self.decided == round_number else "before it"
            raise RecordDataError(
                f"a correction of the result of round {round_number} {when}: a result is"
                " corrected while it is shown (N.J.A.C. 13:69E-1.28P(d))"
            )
        if self.corrected:
            raise RecordDataError(
                f"round {round_number} corrected twice: a wrong correction is remedied by the"
                " round's void"
            )
        if self.mode == "rng" or result.dice is None or not result.settles_wagers:
            raise RecordDataError(
                f"a correction of round {round_number}, an RNG result: the RNG's number is the"
                " selection, never corrected or redrawn (N.J.A.C. 13:69E-1.28G)"
            )
        if data.get("attempt") != result.attempt:
            raise RecordDataError(
                f"a correction of attempt {data.get('attempt')!r} of round {round_number}, whose"
                f" result is of attempt {result.attempt!r}"
            )
        if data.get("dice_read") != result.dice:
            raise RecordDataError(
                f"the dice read that round {round_number}'s correction names are not those its"
                " result recorded"
            )
        corrected = data.get("result")
        if not isinstance(corrected, dict) or (corrected.get("game"), corrected.get("bank")) != (
            result.game,
            result.bank,
        ):
            raise RecordDataError(
                f"the corrected result of round {round_number} is not of its game and bank"
            )
        self.corrected = True

    def _ended(self) -> None:
        self.bets_closed = self.result = self.mode = None
        self.corrected = False


_SHAPE_STEPS: dict[str, Callable[[RoundShape, int, object, Mapping[str, Any]], None]] = {
    RecordKind.NO_MORE_BETS: RoundShape._no_more_bets,
    RecordKind.RESULT: RoundShape._result_of,
    RecordKind.RESULT_VOIDED: RoundShape._result_voided,
    RecordKind.RESULT_CORRECTED: RoundShape._corrected_of,
    RecordKind.CLOSE: RoundShape._close,
    RecordKind.VOID: RoundShape._void,
    RecordKind.MODE_CHANGED: RoundShape._mode_changed,
    RecordKind.BANK_SELECTED: RoundShape._bank_selected,
    RecordKind.DELIVERY_STYLE: RoundShape._delivery_style,
}


def _bets_again(round_number: int, last: int) -> str:
    if round_number == last:
        return f"the bets of round {round_number} closed twice: a second no_more_bets of it"
    return (
        f"the bets of round {round_number} closed after those of round {last}: the rounds'"
        " numbers only grow"
    )


def open_signed(verifier: Verifier, seq: int, note: str, what: str) -> Checkpoint:
    """A checkpoint note whose signature by ``verifier`` verifies, or a LogIntegrityError."""
    try:
        return open_checkpoint(note, verifier)
    except NoteError as exc:
        raise LogIntegrityError(seq, f"{what} signature: {exc}") from exc
