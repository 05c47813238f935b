"""The core is pure: every module of controller/core, found by walking the package (no list to
forget), imports no hardware, storage, network, thread, clock or randomness, and opens no file.

Two checks: each module's own import statements and calls (the source, so that an import
hidden in a function is seen too), and what importing it really loads in a fresh interpreter.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import controller.core

CORE = Path(controller.core.__file__).parent
MODULES = sorted(
    f"controller.core.{m.name}" for m in pkgutil.iter_modules([str(CORE)]) if not m.ispkg
)
# What the core may never import (time and randomness arrive as data).
FORBIDDEN = frozenset(
    {
        "gpiozero",
        "serial",
        "drivers",
        "sqlite3",
        "socket",
        "threading",
        "time",
        "os",
        "random",
        "secrets",
        "io",
        "pathlib",
        "shutil",
        "tempfile",
        "subprocess",
        "datetime",
        "http",
        "urllib",
        "socketserver",
        "select",
        "signal",
        "queue",
        "logging",
    }
)
# Inside controller, the core may import only itself and the exception tree.
ALLOWED_OWN = ("controller.core", "controller.errors")
FILE_CALLS = frozenset({"open", "read_bytes", "read_text", "write_bytes", "write_text"})
# Never loaded by importing a core module (os, io and the like are loaded by Python itself, and
# cryptography's serialization loads random, so only the source check can see those).
NEVER_LOADED = ("gpiozero", "serial", "drivers", "sqlite3", "socket", "threading")


def impurities(source: str) -> list[str]:
    """What in this module's source is not pure: forbidden imports and file calls."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom):
            found.append("a relative import")
        for name in names:
            top = name.split(".")[0]
            if top in FORBIDDEN:
                found.append(f"import {name}")
            if top == "controller" and not name.startswith(ALLOWED_OWN):
                found.append(f"import {name}")
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called in FILE_CALLS:
                found.append(f"calls {called}()")
            if called in ("__import__", "import_module"):
                found.append("imports by name")
    return found


def test_the_walk_finds_the_core() -> None:
    assert "controller.core.state" in MODULES
    assert len(MODULES) >= 15


@pytest.mark.parametrize("module", MODULES)
def test_each_core_module_is_pure_in_its_source(module: str) -> None:
    path = CORE / f"{module.rpartition('.')[2]}.py"
    assert impurities(path.read_text(encoding="utf-8")) == []


def test_importing_the_whole_core_loads_no_hardware_storage_or_threads() -> None:
    # A fresh interpreter, so that nothing imported by other tests hides an import.
    imports = "; ".join(f"import {m}" for m in MODULES)
    code = f"import sys, json; {imports}; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stdout)
    offending = [m for m in loaded if m.split(".")[0] in NEVER_LOADED]
    assert offending == []


@pytest.mark.parametrize(
    "line",
    [
        "import time",
        "import os.path",
        "from threading import Lock",
        "from pathlib import Path",
        "import controller.audit.log",
        "from controller.app import loop",
        "from drivers import shaker",
        "def f(p):\n    return open(p).read()",
        "def f(p):\n    return p.read_bytes()",
        "def f():\n    import random\n    return random.random()",
        "from . import dice",
    ],
)
def test_the_check_sees_an_impure_line(line: str) -> None:
    assert impurities(line) != []


def test_the_check_passes_pure_lines() -> None:
    assert impurities("import hashlib\nfrom controller.core import dice\nx = len('a')") == []


def test_the_cli_loads_no_hardware_or_server_for_an_auditor() -> None:
    """verify-log --help, recall --help and position, run through controller.cli: neither
    gpiozero nor serial nor http.server is loaded."""
    code = "\n".join(
        [
            "import contextlib, io, json, sys",
            "from controller.cli import main",
            "for argv in (['verify-log', '--help'], ['recall', '--help']):",
            "    with contextlib.redirect_stdout(io.StringIO()) as out:",
            "        assert main(argv) == 0",
            "    assert 'usage:' in out.getvalue()",
            "with contextlib.redirect_stdout(io.StringIO()) as out:",
            "    assert main(['position', '--game', 'tiles', '--total', '9']) == 0",
            "assert json.loads(out.getvalue())['label'] == 'dealer'",
            "print(json.dumps(sorted(sys.modules)))",
        ]
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert not {m for m in loaded if m.split(".")[0] in ("gpiozero", "serial")}
    assert "http.server" not in loaded
    assert "controller.cli.audit" in loaded  # the command that ran was imported
    assert "controller.app.appliance" not in loaded
