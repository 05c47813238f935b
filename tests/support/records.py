"""Valid records of any kind, for tests whose point is the log's mechanics, not what a record says.

:func:`valid` gives the least record its kind's schema (controller/core/record_schema.py)
accepts, with the fields given: every field the kind needs (an integer its lowest bound or 1, a
text its first choice or ``"x"``, a boolean false, null where null is allowed, a dice
``{red: 1, blue: [2, 3]}``, an empty object or list), then the fields given over them. The
record is checked before it is returned, so a test naming a field wrongly fails here, at the
line that made it, not at the log's append.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller.audit.log import AuditLog
from controller.core import record_schema
from controller.core.records import RecordKind

Entry = tuple[RecordKind, dict[str, object]]


def _least(spec: record_schema.FieldSpec) -> object:
    if spec.null:
        return None
    if spec.shape == "dice":
        return {"red": 1, "blue": [2, 3]}
    if spec.type == "integer":
        return spec.low if spec.low is not None else 1
    if spec.type == "text":
        return spec.choices[0] if spec.choices else "x"
    if spec.type == "boolean":
        return False
    if spec.type == "list":
        return []
    return {}


def valid(kind: RecordKind, /, **fields: Any) -> dict[str, Any]:
    """The least record of ``kind`` its schema accepts, with ``fields`` over it."""
    data: dict[str, Any] = {
        spec.name: _least(spec) for spec in record_schema.FIELDS[kind] if not spec.optional
    }
    data.update(fields)
    record_schema.check(kind, data)
    return data


def log_of_rounds(
    state: Path,
    records: int,
    start: Sequence[Entry],
    round_of: Callable[[int], list[Entry]],
    *,
    rounds_per_commit: int,
) -> Path:
    """A log of about ``records`` records in ``state``: the ``start``'s, then ``round_of(n)``
    for rounds 1, 2, ..., ``rounds_per_commit`` of them a commit (unsynced: durability is not
    what the tests that need a long log measure)."""
    log = AuditLog.open(state)
    log._db.execute("PRAGMA synchronous=OFF")
    log.commit(list(start))
    number = 1
    while log.size < records:
        batch = []
        for _ in range(rounds_per_commit):
            batch += round_of(number)
            number += 1
        log.commit(batch)
    log.close()
    return state
