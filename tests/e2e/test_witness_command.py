"""The witness's own entry point (controller/witness/main.py): ``python -m controller.witness``
and the ``paigow-witness`` script take the arguments ``paigow-controller witness`` takes and
end the same way (one line on stderr, the same exit code); the witness loads nothing of the
table's controller (controller/app) nor of its display."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from controller.errors import UsageError
from controller.witness.command import has_password, host_port

ROOT = Path(__file__).resolve().parents[2]
WITNESS = ROOT / "controller" / "witness"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_script_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["paigow-witness"] == "controller.witness.main:main"


def test_help_names_the_program() -> None:
    shown = run("-m", "controller.witness", "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: paigow-witness ")
    assert "paigow-witness --state-dir /var/lib/paigow-witness --reset-table" in shown.stdout


@pytest.mark.parametrize(
    "wrong",
    [
        ["--mqtt-url", "http://x"],
        ["--gap-s", "0"],
        ["--db", "mysql://x"],
        ["--dashboard", "nowhere"],
        ["--db", "postgresql://w:secret@db/w"],
        ["--bogus"],
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2_by_either_command(
    tmp_path: Path, wrong: list[str]
) -> None:
    argv = ["--mqtt-url", "mqtt://127.0.0.1:1", "--state-dir", str(tmp_path), "--keys", "k"]
    own = run("-m", "controller.witness", *argv, *wrong)
    through_cli = run("-m", "controller", "witness", *argv, *wrong)
    assert (own.returncode, own.stdout, own.stderr.count("\n")) == (2, "", 1), own.stderr
    assert own.stderr.startswith("paigow-witness: ")
    assert (through_cli.returncode, through_cli.stdout) == (2, "")
    said = own.stderr.removeprefix("paigow-witness: ")
    assert through_cli.stderr.removeprefix("paigow-controller: ") == said


def test_a_reset_through_its_own_entry_point(tmp_path: Path) -> None:
    reset = run("-m", "controller.witness", "--state-dir", str(tmp_path), "--reset-table", "t-1")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout) == {
        "table": "t-1",
        "reset": False,
        "records_forgotten": 0,
        "cosigned_size": 0,
        "was_stopped": "",
    }
    missing = run("-m", "controller.witness", "--state-dir", str(tmp_path / "no"),
                  "--reset-table", "t-1")  # fmt: skip
    assert (missing.returncode, missing.stderr.count("\n")) == (2, 1)
    assert "does not exist" in missing.stderr


def test_a_bad_key_file_is_exit_78_naming_it(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "table-2.pub").write_text("not a key\n")
    argv = ["--mqtt-url", "mqtt://127.0.0.1:1", "--state-dir", str(tmp_path / "w")]
    bad = run("-m", "controller.witness", *argv, "--keys", str(keys), "--dashboard", "off")
    assert (bad.returncode, bad.stderr.count("\n")) == (78, 1), bad.stderr
    assert str(keys / "table-2.pub") in bad.stderr


def test_the_witness_loads_nothing_of_the_controller_or_its_display() -> None:
    code = "import sys, json, controller.witness.main; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(run("-c", code).stdout)
    assert [m for m in loaded if m.startswith(("controller.app", "controller.display"))] == []
    assert "controller.web.pages" in loaded  # the dashboard's server
    assert "controller.system.sdnotify" in loaded


def test_no_witness_module_imports_the_controller_or_its_display() -> None:
    found = []
    for path in sorted(WITNESS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{path.name}: {name}"
                for name in names
                if name.startswith(("controller.app", "controller.display"))
            ]
    assert found == []


def test_the_dashboard_address() -> None:
    assert host_port("off") is None
    assert host_port("0.0.0.0:8090") == ("0.0.0.0", 8090)
    assert host_port("floor.casino:1") == ("floor.casino", 1)
    for wrong in ("8090", ":8090", "host:", "host:0", "host:65536", "h st:80", "host:８０"):
        with pytest.raises(UsageError, match="--dashboard"):
            host_port(wrong)


def test_a_database_url_with_a_password_is_seen() -> None:
    assert has_password("postgresql://w:secret@db/w")
    assert has_password("postgresql://db/w?PassWord=x")
    assert has_password("postgresql://db/w?%70assword=x")
    assert has_password("postgresql://db/w?sslpassword=x")
    assert not has_password("postgresql://w@db/w?sslmode=require")
