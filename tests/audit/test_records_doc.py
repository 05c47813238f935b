"""Every kind of record has one schema (controller/core/record_schema.py), records are checked
against it, and docs/records.md is what its generator writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from controller.core import record_schema
from controller.core.record_schema import (
    SCHEMAS,
    NoMoreBets,
    RecordShapeError,
    Result,
    Void,
    check,
    markdown,
    read,
    read_any,
    read_lenient,
    schema_of,
)
from controller.core.records import RecordKind
from controller.errors import RecordDataError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "records.md"
RESULT = {
    "round": 4,
    "attempt": 1,
    "game": "tiles",
    "bank": "dealer",
    "count": 9,
    "starting_position": "seat 2",
    "dice": {"red": 3, "blue": [2, 4]},
    "total": 9,
}


def test_every_kind_has_one_schema_of_its_own() -> None:
    assert set(SCHEMAS) == set(RecordKind)
    assert all(cls.KIND is kind for kind, cls in SCHEMAS.items())
    assert all(cls.MEANING and cls.VERSION >= 1 for cls in SCHEMAS.values())
    assert all(spec.meaning for specs in record_schema.FIELDS.values() for spec in specs)


def test_the_document_is_the_generators_output() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        f"docs/records.md is stale: run `{record_schema.GENERATOR}`"
    )


def test_the_generator_runs_as_the_document_says() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "controller.core.record_schema", "--markdown"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert proc.stdout == markdown()
    assert record_schema.GENERATOR in markdown().splitlines()[0]


def test_the_document_names_every_kind_and_field() -> None:
    text = markdown()
    for kind, specs in record_schema.FIELDS.items():
        assert f"### `{kind}` (version {SCHEMAS[kind].VERSION})" in text
        assert all(f"| `{spec.name}` |" in text for spec in specs)


def test_a_record_is_read_as_its_kinds_dataclass() -> None:
    result = read(Result, RESULT)
    assert (result.round, result.dice, result.wagers) == (4, {"red": 3, "blue": [2, 4]}, None)
    assert read_any("result", RESULT) == result
    bets = read(NoMoreBets, {"round": 2, "bank": "seat 1"})
    assert (bets.mode, bets.employee) == (None, None)
    old = read(Void, {"round": 1, "attempt": 2, "state": "armed", "supervisor": True, "detail": ""})
    assert (old.reason, old.supervisor) == (None, True)


# Records as versions before this one wrote them, from git history (a log in the field holds
# them): each reads through its kind's schema, as verify-log, recall and the display read it.
OLDER_FORMATS = [
    # before corrections (state.py at 59221aa^): a result voided with what the supervisor said
    (
        RecordKind.RESULT_VOIDED,
        {"round": 3, "attempt": 1, "reason": "misread", "detail": "the dice show other faces"},
    ),
    # before the dice monitor: a start's recovery without its counts
    (
        RecordKind.RECOVERY,
        {
            "round": 1,
            "attempt": 1,
            "state": "idle",
            "faults": [],
            "interrupted": False,
            "voided_attempt": None,
        },
    ),
    # before the escrow: an RNG session's commitment without its sealed seed
    (
        RecordKind.RNG_COMMIT,
        {
            "session": "00" * 8,
            "table": "table-7",
            "game": "tiles",
            "mode": "position",
            "positions": 8,
            "max_rounds": 500,
            "algorithm": "HMAC_DRBG-SHA-256",
            "commitment": "ab" * 32,
        },
    ),
]


@pytest.mark.parametrize(("kind", "data"), OLDER_FORMATS, ids=[str(k) for k, _ in OLDER_FORMATS])
def test_a_record_an_older_version_wrote_reads_through_its_schema(
    kind: RecordKind, data: dict[str, object]
) -> None:
    check(kind, data)
    assert isinstance(read_any(str(kind), data), record_schema.SCHEMAS[kind])


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({**RESULT, "round": "4"}, "round is not integer"),
        ({**RESULT, "round": 0}, "round 0 is outside 1.."),
        ({**RESULT, "game": "craps"}, "game is one of tiles, poker"),
        ({**RESULT, "dice": {"red": 3, "blue": [2]}}, "dice is not {red, blue: [b1, b2]}"),
        ({**RESULT, "bank": None}, "bank is not null"),
        ({**RESULT, "why": "x"}, "has no field why"),
        ({k: v for k, v in RESULT.items() if k != "count"}, "lacks its count"),
        ({**RESULT, "uid": True}, "uid is not integer"),
    ],
)
def test_a_record_of_another_shape_is_refused(data: dict[str, object], words: str) -> None:
    with pytest.raises(RecordShapeError, match=words.replace("{", r"\{").replace("[", r"\[")):
        check(RecordKind.RESULT, data)
    with pytest.raises(RecordDataError):  # the one error type, a RecordDataError
        read(Result, data)


def test_a_record_read_leniently_keeps_each_field_of_its_type_and_drops_the_rest() -> None:
    partial = {"round": "4", "attempt": True, "game": "craps", "dice": [3], "why": "x"}
    result = read_lenient(Result, {**partial, "count": 2**60, "total": 9})
    shown: list[object] = [result.round, result.attempt, result.dice, result.count, result.total]
    assert shown == [None, None, None, 2**60, 9]
    assert result.game == "craps"  # its type only: bounds, choices, shapes are the writer's
    assert read_lenient(Result, RESULT) == read(Result, RESULT)
    void = read_lenient(Void, {})
    assert set(vars(void).values()) == {None}
    assert len(vars(void)) == len(record_schema.FIELDS[Void.KIND])
    assert (schema_of("void"), schema_of("result_rerolled")) == (Void, None)


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(RecordShapeError, match="no kind of record"):
        check("result_rerolled", {})
    with pytest.raises(RecordShapeError, match="no kind of record"):
        read_any("result_rerolled", {})


def test_a_service_test_record_carries_the_fields_of_the_record_it_stands_for() -> None:
    check(RecordKind.SERVICE_TEST, {"record": "result", "round": 1, **RESULT})


def test_a_kinds_dataclass_is_made_when_first_read_and_is_its_declared_class() -> None:
    """The schemas are declared at import and each kind's dataclass made at its first read
    (45 dataclasses cost 75-110 ms of every start): the record read is an instance of the
    declared class, frozen, equal to another read of the same data, and the class is made
    once; the declared class is not called."""
    code = (
        "from controller.core import record_schema as r\n"
        "print(len(r._MADE))\n"
        "r.read_lenient(r.Void, {})\n"
        "print(sorted(c.__name__ for c in r._MADE))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert proc.stdout.split("\n")[:2] == ["0", "['Void']"]
    first, second = read(Result, RESULT), read_any("result", RESULT)
    assert isinstance(first, Result)
    assert type(first) is type(second)
    assert first == second
    assert type(first).__name__ == "Result"
    assert type(first) is not Result
    with pytest.raises(AttributeError):
        first.round = 5  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"read through record_schema\.read"):
        Result(**RESULT)  # type: ignore[arg-type]
