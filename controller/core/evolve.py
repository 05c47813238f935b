"""``replace``: a frozen dataclass with some fields changed, as :func:`dataclasses.replace`
makes it, for the core's hot path.

Each event the table handles makes a new :class:`~controller.core.table_types.RoundContext`
(38 fields) once or twice; :func:`dataclasses.replace` walks every field's definition in Python
each time, which was the largest single cost of a round in the core (bench/bench_core.py). This
one reads the fields' current values in one C call (an ``attrgetter`` built once per class) and
calls the class itself, so ``__init__`` and ``__post_init__`` run as they do for
:func:`dataclasses.replace`, and a field the class does not have is refused the same way (a
``TypeError``). The type checker sees :func:`dataclasses.replace` itself, and checks each call's
fields and their types as it does for it.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["replace"]

if TYPE_CHECKING:
    from dataclasses import replace
else:
    _READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None] = {}

    def _reader(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None:
        fields = dataclasses.fields(cls)
        if len(fields) < 2 or not all(f.init for f in fields):
            return None  # dataclasses.replace's own checks apply
        names = tuple(f.name for f in fields)
        return names, operator.attrgetter(*names)

    def replace(obj: Any, /, **changes: Any) -> Any:
        cls = type(obj)
        try:
            reader = _READERS[cls]
        except KeyError:
            reader = _READERS[cls] = _reader(cls)
        if reader is None:
            return dataclasses.replace(obj, **changes)
        names, values = reader
        current = dict(zip(names, values(obj), strict=True))
        current.update(changes)
        return cls(**current)
