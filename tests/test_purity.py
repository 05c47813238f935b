"""The decision modules are pure: they import neither gpiozero nor serial, nor any driver."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

DECISION_MODULES = [
    "controller.dice",
    "controller.position",
    "controller.wagers",
    "controller.result",
    "controller.state",
    "controller.records",
    "controller.config",
    "controller.errors",
    "controller.digits",
    "controller.snapshot",
    "controller.merkle",
    "controller.note",
]
FORBIDDEN = ("gpiozero", "serial", "drivers", "sqlite3", "socket", "threading")


@pytest.mark.parametrize("module", DECISION_MODULES)
def test_decision_module_imports_no_hardware_or_io(module: str) -> None:
    # A fresh interpreter, so that nothing imported by other tests hides an import.
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stdout)
    offending = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert offending == [], f"{module} pulls in {offending}"


def test_the_check_would_see_a_forbidden_import() -> None:
    code = "import sys, json, serial; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "serial" in json.loads(proc.stdout)
