"""The code's shape: short functions in the pure core, and no function too branchy to test.

- No function in ``controller/core`` longer than 60 lines (``end_lineno - lineno + 1`` of its
  ``def``, decorators not counted).
- No function in ``controller/`` or ``drivers/`` of a cyclomatic complexity over 15, but for
  one marked ``# noqa: C901`` on its ``def`` line (an input validator, a table's parser).

The complexity is radon's (``radon cc``, radon 6), computed here with ``ast`` so that the suite
needs no radon: 1, plus 1 for each ``if``, ``elif``, conditional expression, ``assert``, ``for``
and ``while`` (and 1 for their ``else``), each ``except`` of a ``try`` (and 1 for its ``else``),
each ``for`` and ``if`` of a comprehension, each operand of a boolean operator after the first,
and each ``case`` of a ``match`` but a wildcard one. A nested function or class is a block of
its own; an ``assert``'s expression counts for nothing more, nor a ``with``, as with radon."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_CORE_LINES = 60
MAX_COMPLEXITY = 15
EXEMPT = "# noqa: C901"

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (*_FUNCTIONS, ast.ClassDef)


def functions(folder: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every function and method under ``folder`` (nested ones too): its place
    (``path:line Class.name``, as radon names it), its node, and its ``def`` line."""
    for path in sorted((ROOT / folder).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for name, node in _defs(ast.parse(source, filename=str(path)), ""):
            yield f"{path.relative_to(ROOT)}:{node.lineno} {name}", node, lines[node.lineno - 1]


def _defs(
    node: ast.AST, prefix: str
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _BLOCKS):
            name = f"{prefix}{child.name}"
            if isinstance(child, _FUNCTIONS):
                yield name, child
            yield from _defs(child, f"{name}.")
        else:
            yield from _defs(child, prefix)


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's cyclomatic complexity as radon counts it."""
    return 1 + sum(_decisions(child) for child in function.body)


def _decisions(node: ast.AST) -> int:
    if isinstance(node, _BLOCKS):
        return 0  # a block of its own
    if isinstance(node, ast.Assert):
        return 1  # radon does not look inside an assert
    return _own(node) + sum(_decisions(child) for child in ast.iter_child_nodes(node))


def _own(node: ast.AST) -> int:
    """What ``node`` itself adds (not its children)."""
    if isinstance(node, ast.Try):
        return len(node.handlers) + bool(node.orelse)
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, ast.If | ast.IfExp):
        return 1
    if isinstance(node, ast.Match):
        wildcard = any(getattr(case.pattern, "pattern", False) is None for case in node.cases)
        return max(0, len(node.cases) - wildcard)
    if isinstance(node, ast.For | ast.AsyncFor | ast.While):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    return 0


def long_core_functions() -> list[str]:
    found = []
    for place, node, _ in functions("controller/core"):
        assert node.end_lineno is not None
        length = node.end_lineno - node.lineno + 1
        if length > MAX_CORE_LINES:
            found.append(f"{place}: {length} lines")
    return found


def complex_functions() -> list[str]:
    found = []
    for folder in ("controller", "drivers"):
        for place, node, line in functions(folder):
            figure = complexity(node)
            if figure > MAX_COMPLEXITY and EXEMPT not in line:
                found.append(f"{place}: complexity {figure}")
    return found


def test_no_function_in_the_core_is_longer_than_60_lines() -> None:
    found = long_core_functions()
    assert not found, "\n".join([f"over {MAX_CORE_LINES} lines:", *found])


def test_no_function_is_more_complex_than_15_unless_marked() -> None:
    found = complex_functions()
    assert not found, "\n".join([f"complexity over {MAX_COMPLEXITY}:", *found])


_SAMPLE = '''
def sample(a, b, items):
    """1 + if, elif, else-less for with else, except x2, try-else, and x2, or, IfExp,
    comprehension with two ifs, while, assert, match of 3 cases one wildcard."""
    if a and b and not a:          # if 1, and 2
        pass
    elif a or b:                   # elif 1, or 1
        pass
    for item in items:             # for 1, else 1
        pass
    else:
        pass
    try:                           # two handlers 2, else 1
        pass
    except ValueError:
        pass
    except KeyError:
        pass
    else:
        pass
    x = 1 if a else 2              # 1
    y = [i for i in items if i if i > 1]   # comprehension 1, two ifs 2
    while a:                       # 1
        break
    assert a and b                 # 1 (its and not counted)
    with open("f") as f:           # 0
        pass
    match a:                       # 2 (the wildcard not counted)
        case 1:
            pass
        case 2:
            pass
        case _:
            pass

    def inner(c):                  # a block of its own
        return c if c else 0
    return x, y
'''


def test_the_complexity_is_counted_as_radon_counts_it() -> None:
    tree = ast.parse(_SAMPLE)
    sample, inner = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert complexity(sample) == 1 + 3 + 2 + 2 + 3 + 1 + 3 + 1 + 1 + 0 + 2
    assert complexity(inner) == 2
