"""Records written as a writer other than this product's would write them.

The log checks every record it appends against its kind's schema (controller/core/log_state.py
``append``, controller/core/record_schema.py ``check``): this product cannot write a record of
the wrong shape. What reads a log must still meet one: a log written by an older version (a
format this one no longer writes), or by someone holding the log's key who writes what they
like. A test that makes such a log writes it inside :func:`unchecked`; nothing else does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from unittest import mock

from controller.core import record_schema
from controller.core.records import RecordKind


def _unchecked(kind: RecordKind | str, data: Mapping[str, object]) -> None:
    del kind, data


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """While inside, the log appends records its schemas refuse (this process only)."""
    with mock.patch.object(record_schema, "check", _unchecked):
        yield
