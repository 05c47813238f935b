"""The log's state without storage (controller/core/log_state.py): what one commit appends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.records import valid

from controller.core import canonical
from controller.core.log_state import (
    GENESIS_PREV,
    LogHead,
    Prepared,
    append,
    leaf_of,
    prepare,
    start,
)
from controller.core.merkle import root
from controller.core.note import Checkpoint
from controller.core.record_schema import RecordShapeError
from controller.core.records import RecordKind, record_hash
from controller.errors import AuditLogError

ORIGIN = "paigow-controller/table-1"


def sign(checkpoint: Checkpoint) -> bytes:
    """A stand-in signature that names what it signs (the core never sees a key)."""
    return f"{checkpoint.size}".encode().ljust(64, b".")


def test_the_first_record_names_the_origin_and_key_and_keeps_no_frontier() -> None:
    first = start(ORIGIN, "the key", time="T0", sign=sign)
    (row,) = first.rows
    assert (row.seq, row.kind) == (1, "log_created")
    assert canonical.decode(row.leaf) == {
        "seq": 1,
        "kind": "log_created",
        "time": "T0",
        "prev": GENESIS_PREV,
        "data": {"origin": ORIGIN, "key": "the key"},
    }
    assert first.checkpoints == ()
    assert (first.root, first.signature) == (
        root([row.leaf]),
        sign(Checkpoint(ORIGIN, 1, first.root)),
    )
    assert first.head.size == 1
    assert first.head.prev == record_hash(row.leaf)


def test_records_are_chained_and_a_round_close_is_signed_and_anchored() -> None:
    first = start(ORIGIN, "k", time="T0", sign=sign)
    head = first.head
    step = append(
        head,
        [
            (RecordKind.POWER_ON, valid(RecordKind.POWER_ON)),
            (RecordKind.CLOSE, valid(RecordKind.CLOSE, round=1)),
            (RecordKind.POWER_ON, valid(RecordKind.POWER_ON, previous="shutdown")),
        ],
        time="T1",
        sign=sign,
        frontier_every=4096,
    )
    leaves = [first.rows[0].leaf, *(r.leaf for r in step.rows)]
    assert [r.seq for r in step.rows] == [2, 3, 4]
    assert [canonical.decode(r.leaf)["prev"] for r in step.rows] == [
        record_hash(leaf) for leaf in leaves[:-1]
    ]
    (kept,) = step.checkpoints
    assert (kept.size, kept.frontier) == (3, None)
    assert step.anchor is not None
    assert step.anchor[0] == kept.note
    assert step.root == root(leaves)
    assert step.signature == sign(Checkpoint(ORIGIN, 4, root(leaves)))
    assert step.note.startswith(f"{ORIGIN}\n4\n")
    assert (step.head.size, step.head.prev, step.head.frontier_size) == (
        4,
        record_hash(leaves[-1]),
        0,
    )
    assert head.size == 1  # the head given is left as it was


def test_a_frontier_is_kept_every_so_many_records_and_at_once_when_none_is() -> None:
    head = start(ORIGIN, "k", time="T0", sign=sign).head
    power_on = (RecordKind.POWER_ON, valid(RecordKind.POWER_ON))
    step = append(head, [power_on] * 2, time="T", sign=sign, frontier_every=4)
    assert step.checkpoints == ()
    step = append(
        step.head,
        [(RecordKind.VOID, valid(RecordKind.VOID))],
        time="T",
        sign=sign,
        frontier_every=4,
    )
    (kept,) = step.checkpoints  # the round's checkpoint is the one kept with the frontier
    assert (kept.size, kept.note) == (4, step.note)
    assert kept.frontier == step.head.tree().to_bytes()
    assert step.frontier_kept
    assert step.head.frontier_size == 4
    legacy = LogHead(ORIGIN, step.head.size, step.head.hashes, step.head.prev, None)
    again = append(legacy, [power_on], time="T", sign=sign, frontier_every=4)
    assert [k.size for k in again.checkpoints] == [5]
    assert again.head.frontier_size == 5


def test_what_cannot_be_appended_is_refused() -> None:
    head = start(ORIGIN, "k", time="T0", sign=sign).head
    with pytest.raises(ValueError, match="at least one event"):
        append(head, [], time="T", sign=sign, frontier_every=4)
    with pytest.raises(AuditLogError, match="cannot be encoded"):
        append(
            head,
            [(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, software={"version": 1.5}))],
            time="T",
            sign=sign,
            frontier_every=4,
        )


# --- records prepared ahead (log_state.prepare, leaf_of) ------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(
    ['"', "\\", "\n", "\x01\x7f", "\u2028", "é"]
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-canonical.MAX_SAFE_INTEGER, canonical.MAX_SAFE_INTEGER)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
DATA = st.dictionaries(TEXT, VALUES, max_size=5)
TEXTS = st.text(st.characters(codec="utf-8"), max_size=30) | st.sampled_from(
    ["2026-12-03T14:49:07.051Z", '"', "\\", "\n\x01", "é\u2028"]
)


@settings(max_examples=300, deadline=None)
@given(
    seq=st.integers(1, canonical.MAX_SAFE_INTEGER),
    kind=st.sampled_from(list(RecordKind)),
    time=TEXTS,
    prev=TEXTS,
    data=DATA,
)
def test_a_leaf_of_encoded_data_is_the_canonical_encoding_of_the_record(
    seq: int, kind: RecordKind, time: str, prev: str, data: dict[str, Any]
) -> None:
    """The leaf put together from the data's encoding is byte for byte canonical.encode of the
    whole record, which the strict decoder takes back (hypothesis prints its example)."""
    entry = {"seq": seq, "kind": str(kind), "time": time, "prev": prev, "data": data}
    expected = canonical.encode(entry)
    assert leaf_of(seq, kind, time, prev, canonical.encode(data)) == expected
    assert canonical.decode(expected) == entry


def test_a_leaf_refuses_what_has_no_encoding() -> None:
    with pytest.raises(AuditLogError, match="sequence number"):
        leaf_of(canonical.MAX_SAFE_INTEGER + 1, RecordKind.LID, "T", "p", b"{}")
    with pytest.raises(AuditLogError, match="cannot be encoded"):
        leaf_of(1, RecordKind.LID, "\ud800", "p", b"{}")


def test_prepared_records_append_as_the_same_records_do() -> None:
    head = start(ORIGIN, "k", time="T0", sign=sign).head
    entries = [
        (RecordKind.LID, valid(RecordKind.LID, round=1)),
        (RecordKind.CLOSE, valid(RecordKind.CLOSE, round=1)),
        (RecordKind.ROUND_OPENED, valid(RecordKind.ROUND_OPENED, round=2)),
    ]
    plain = append(head, entries, time="T1", sign=sign, frontier_every=4)
    mixed = [prepare(*entries[0]), entries[1], prepare(*entries[2])]
    assert append(head, mixed, time="T1", sign=sign, frontier_every=4) == plain
    kind, data = mixed[0]  # a prepared record unpacks as any entry does
    assert (kind, data) == entries[0]


def test_a_record_is_prepared_only_through_its_schema() -> None:
    """prepare refuses what append refuses, and a Prepared record is made by prepare alone:
    there is no way past the schema check."""
    with pytest.raises(RecordShapeError):
        prepare(RecordKind.CLOSE, {"round": "one"})
    with pytest.raises(AuditLogError, match="cannot be encoded"):
        prepare(RecordKind.POWER_ON, valid(RecordKind.POWER_ON, software={"version": 1.5}))
    with pytest.raises(TypeError, match=r"made by log_state\.prepare"):
        Prepared(RecordKind.CLOSE, {"round": "one"}, b'{"round":"one"}')
