"""No import cycle between the project's modules: every module of controller/ and drivers/,
found by walking the folders (no list to forget), parsed with ``ast``.

Every import counts, wherever it is written: at the top, inside a function, under
``if TYPE_CHECKING:``; and a package's ``__init__`` importing its own modules. A relative import
is resolved against the module's package; ``from pkg import name`` is an import of the module
``pkg.name`` when there is one, else of ``pkg``. Importing ``a.b.c`` also runs ``a`` and ``a.b``
(their ``__init__``), so those count too. A cycle fails the test, named module by module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controller", "drivers")


def module_names() -> dict[str, Path]:
    """Every module of the project by its dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(node: ast.AST, name: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    """The project modules one import statement of module ``name`` names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if not isinstance(node, ast.ImportFrom):
        return
    base = node.module or ""
    if node.level:
        package = name.split(".") if is_package else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    for alias in node.names:
        full = f"{base}.{alias.name}"
        yield full if full in modules else base


def _with_parents(target: str, modules: set[str]) -> Iterator[str]:
    """``target`` and the packages above it that are project modules (their ``__init__`` runs)."""
    parts = target.split(".")
    for end in range(1, len(parts) + 1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            yield candidate


def import_graph() -> dict[str, set[str]]:
    """Each project module -> the project modules it imports (itself left out)."""
    paths = module_names()
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(tree):
            for target in _imported(node, name, is_package, modules):
                # The packages above what is imported run first, except the module's own
                # (they run before it whatever it imports); named outright, they count.
                edges.update(
                    p
                    for p in _with_parents(target, modules)
                    if p == target or not name.startswith(p + ".")
                )
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the list of its modules (the first repeated at the end)."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_graph_sees_the_project() -> None:
    graph = import_graph()
    assert "controller.audit.log" in graph
    assert "controller.core.merkle" in graph["controller.audit.log"]
    assert "drivers" in graph
    assert "controller.cli.args" in graph["controller.cli"]  # a package's __init__ counts


def test_a_cycle_is_found_and_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_controller_or_drivers() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
