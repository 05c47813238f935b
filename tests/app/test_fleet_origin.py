"""``[fleet] origin``: the log's origin and its key's name, a name unique in the world. ``init``
makes a new log's key with it and every checkpoint names it; a log of another origin is a
configuration error (exit 78 naming ``fleet.origin``) at ``init``, ``run`` and ``check-config
--state-dir``; unset, a new log is ``paigow-controller/<table>`` as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.audit.log import AuditLog, configured_origin, require_origin
from controller.audit.recall import export_lines
from controller.cli import main
from controller.core.config import ConfigError, parse_config
from controller.core.note import Verifier, open_checkpoint
from controller.core.records import RecordKind

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "casino.example/paigow/table-7"


def config_file(tmp_path: Path, *, origin: str | None, name: str = "config.toml") -> Path:
    lines = ["[table]", 'name = "t7"', "[storage]", f'state_dir = "{tmp_path / "state"}"']
    if origin is not None:
        lines += ["[fleet]", f'origin = "{origin}"']
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "origin",
    [
        ORIGIN,
        "casino.example/t7",
        "a.b/c",
        "pit-3.casino.example/paigow/table_7/v2",
        "x" * 10 + ".example/" + "y" * 81,  # 100 characters
    ],
)
def test_a_good_origin(origin: str) -> None:
    config = parse_config({"fleet": {"origin": origin}})
    assert config.fleet.origin == origin
    assert configured_origin(config) == origin


@pytest.mark.parametrize(
    "origin",
    [
        "paigow-controller/t7",  # no dot: not a DNS name
        "casino.example",  # no path
        "casino.example/",
        "casino.example//t7",
        "casino.example/t7/",
        "/casino.example/t7",
        ".example/t7",
        "casino..example/t7",
        "-casino.example/t7",
        "casino_1.example/t7",
        "casino.example/table 7",
        "casino.example/table+7",
        "casino.example/tåble-7",
        "casino.example/t\u200b7",
        "x" * 10 + ".example/" + "y" * 82,  # 101 characters
        "a" * 64 + ".example/t7",  # a DNS label is at most 63 characters
    ],
)
def test_a_bad_origin_names_the_key(origin: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"fleet": {"origin": origin}})
    assert raised.value.key == "fleet.origin"


def test_unset_a_new_log_is_named_after_the_table() -> None:
    assert configured_origin(parse_config({"table": {"name": "t7"}})) == "paigow-controller/t7"


def test_init_with_an_origin_names_the_key_the_log_and_its_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, origin=ORIGIN)
    assert main(["init", "--config", str(config)]) == 0
    verifier = Verifier.parse(capsys.readouterr().out)
    assert verifier.name == ORIGIN
    state = tmp_path / "state"
    with AuditLog.open(state, origin=ORIGIN) as log:
        assert log.origin == ORIGIN
        assert log.signer is not None
        assert log.signer.verifier == verifier
        log.commit([(RecordKind.CLOSE, {"round": 1})])
    lines = list(export_lines(state))
    assert lines[0]["data"] == {"origin": ORIGIN, "key": str(verifier)}
    checkpoint = open_checkpoint(lines[-1]["checkpoint"], verifier)
    assert checkpoint.origin == ORIGIN
    assert checkpoint.size == len(lines)
    # check-config --state-dir with the same configuration: valid, and it says the origin
    assert main(["check-config", "--config", str(config), "--state-dir", str(state)]) == 0
    assert json.loads(capsys.readouterr().out)["origin"] == ORIGIN


def test_a_log_of_another_origin_exits_78_naming_fleet_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table made before [fleet] origin (paigow-controller/t7), then configured with one: the
    log keeps its name, so the configuration is refused, naming the origin the log has."""
    plain = config_file(tmp_path, origin=None, name="plain.toml")
    assert main(["init", "--config", str(plain)]) == 0
    capsys.readouterr()
    state = tmp_path / "state"
    named = config_file(tmp_path, origin=ORIGIN, name="named.toml")
    for argv in (
        ["check-config", "--config", str(named), "--state-dir", str(state)],
        ["init", "--config", str(named)],
    ):
        assert main(argv) == 78, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "fleet.origin" in err
        assert "the log's origin is 'paigow-controller/t7'" in err
    with pytest.raises(ConfigError, match=r"fleet\.origin"):
        require_origin(state, parse_config({"fleet": {"origin": ORIGIN}}))
    require_origin(state, parse_config({"table": {"name": "t7"}}))  # unset: as before
    require_origin(tmp_path / "empty", parse_config({"fleet": {"origin": ORIGIN}}))  # no log yet
    # check-config without --state-dir checks the file only
    assert main(["check-config", "--config", str(named)]) == 0
    # run: the table does not start (and does not open the log under another name)
    before = list(export_lines(state))
    run = subprocess.run(
        [sys.executable, "-m", "controller", "run", "--config", str(named)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GPIOZERO_PIN_FACTORY": "mock"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 78, run.stderr
    assert "fleet.origin" in run.stderr
    assert "the log's origin is 'paigow-controller/t7'" in run.stderr
    assert list(export_lines(state)) == before
