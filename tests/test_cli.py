"""The command line: stable JSON, exit 2 on a bad argument, exit 78 on a bad config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "hw" / "config.example.toml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_position(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "position", "--game", "tiles", "--total", "15")
    assert code == 0
    assert json.loads(out) == {"game": "tiles", "total": 15, "bank": "dealer", "label": "seat 6"}
    code, out, _ = run(capsys, "position", "--game", "tiles", "--total", "9")
    assert json.loads(out)["label"] == "dealer"
    code, out, _ = run(capsys, "position", "--game", "poker", "--total", "5", "--bank-seat", "3")
    assert json.loads(out) == {"game": "poker", "total": 5, "bank": "seat 3", "label": "dealer"}
    code, out, _ = run(capsys, "position", "--game", "tiles", "--total", "16")
    assert json.loads(out)["label"] == "dead hand"


def test_wagers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "wagers", "--dice", "6,2,1")
    assert code == 0
    doc = json.loads(out)
    assert list(doc) == ["dice", "total", "sum", "match", "beat_it", "payouts"]
    assert doc["dice"] == {"red": 6, "blue": [2, 1]}
    assert doc["total"] == 9
    assert doc["sum"] == {"8-16-17": False, "3-8-9": True, "pair": False, "series": False}
    assert doc["match"] == {"1": 1, "2": 1, "3": 0, "4": 0, "5": 0, "6": 1}
    assert doc["beat_it"] == {"red": True, "any": True}
    assert doc["payouts"]["B"]["pays"] == "2 to 1"
    assert doc["payouts"]["A"]["wins"] is False


def test_wagers_with_a_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[paytables.M]\nwager = "match"\npays = { two = "2 to 1", three = "12 to 1" }\n'
    )
    code, out, _ = run(capsys, "wagers", "--dice", "4,4,2", "--config", str(config))
    assert code == 0
    assert json.loads(out)["payouts"]["M"]["by_value"]["4"]["pays"] == "2 to 1"


def test_paytables_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "paytables", "--config", str(EXAMPLE))
    assert code == 0
    doc = json.loads(out)
    assert doc["outcomes"] == 216
    a, b = doc["paytables"]
    assert (a["name"], a["hits"], a["house_edge"]) == ("A", 30, "1/18")
    assert (b["name"], b["hits"], b["house_edge"]) == ("B", 47, "5/108")


@pytest.mark.parametrize(
    "argv",
    [
        ["wagers", "--dice", "0,1,2"],
        ["wagers", "--dice", "7,1,2"],
        ["wagers", "--dice", "1,2"],
        ["wagers", "--dice", "1,2,3,4"],
        ["wagers", "--dice", "a,b,c"],
        ["position", "--game", "tiles", "--total", "2"],
        ["position", "--game", "tiles", "--total", "19"],
        ["position", "--game", "tiles", "--total", "9", "--bank-seat", "7"],
        ["position", "--game", "craps", "--total", "9"],
        ["position", "--game", "tiles"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("paigow-controller: ")
    assert "Traceback" not in err


def test_a_bad_config_exits_78_naming_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[round]\nmin_shake_cycles = 2\n")
    code, out, err = run(capsys, "paytables", "--config", str(config))
    assert code == 78
    assert out == ""
    assert "round.min_shake_cycles" in err


def test_the_installed_entry_point_behaves_the_same() -> None:
    """Through a real process: exit code 2, one line, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "position", "--game", "tiles", "--total", "19"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    ok = subprocess.run(
        [sys.executable, "-m", "controller", "position", "--game", "tiles", "--total", "9"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(ok.stdout)["label"] == "dealer"


def test_check_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "check-config", "--config", str(EXAMPLE))
    assert code == 0
    assert json.loads(out)["paytables"] == ["A", "B"]
    bad = tmp_path / "c.toml"
    bad.write_text('[sensor]\nurl = "/dev/x"\nspeed = 9600\n')
    code, out, err = run(capsys, "check-config", "--config", str(bad))
    assert (code, out) == (78, "")
    assert "sensor.speed" in err
