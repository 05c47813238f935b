"""The configuration file: validated, every bad key named (exit 78 at the command line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import Config, load_config, parse_config
from controller.errors import ConfigError
from controller.position import Game
from controller.state import Mode
from controller.wagers import Odds, Wager

EXAMPLE = Path(__file__).resolve().parent.parent / "hw" / "config.example.toml"


def test_the_example_config_loads_and_equals_the_defaults() -> None:
    config = load_config(EXAMPLE)
    defaults = Config()
    for section in ("table", "round", "shaker", "sensor", "rng", "storage", "display", "pins"):
        assert getattr(config, section) == getattr(defaults, section), section
    assert config.paytables == defaults.paytables
    assert len(config.source_sha256) == 64


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("")
    assert load_config(path).table.game is Game.TILES


def test_values_are_read() -> None:
    config = parse_config({"table": {"game": "poker", "mode": "rng", "name": "PG-7"}})
    assert config.table.game is Game.POKER
    assert config.table.mode is Mode.RNG
    assert config.round_settings().game is Game.POKER


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"tabel": {}}, "tabel"),
        ({"table": {"colour": "red"}}, "table.colour"),
        ({"table": {"game": "craps"}}, "table.game"),
        ({"table": {"name": "a b"}}, "table.name"),
        ({"table": {"name": ""}}, "table.name"),
        ({"round": {"min_shake_cycles": 2}}, "round.min_shake_cycles"),
        ({"round": {"min_shake_cycles": "3"}}, "round.min_shake_cycles"),
        ({"round": {"reads_to_agree": 0}}, "round.reads_to_agree"),
        ({"round": {"max_reshakes": True}}, "round.max_reshakes"),
        ({"shaker": {"amplitude": 1.5}}, "shaker.amplitude"),
        ({"shaker": {"motor_max_ms": 100}}, "shaker.motor_max_ms"),
        ({"shaker": {"shake_ms": 500, "cycle_ms": 200}}, "shaker.shake_ms"),
        ({"shaker": {"motor_max_ms": 3100}}, "shaker.motor_max_ms"),
        ({"round": {"min_shake_cycles": 8}}, "round.min_shake_cycles"),
        ({"sensor": {"baudrate": 1234}}, "sensor.baudrate"),
        ({"pins": {"motor": 40}}, "pins.motor"),
        ({"pins": {"lid_switch": 12}}, "pins.lid_switch"),
        ({"round": []}, "round"),
        ({"paytables": {"A": {"wager": "roulette", "pays": {}}}}, "paytables.A.wager"),
        (
            {"paytables": {"A": {"wager": "sum", "condition": "7", "pays": {}}}},
            "paytables.A.condition",
        ),
        ({"paytables": {"A": {"wager": "sum", "condition": "3-8-9"}}}, "paytables.A.pays"),
        (
            {"paytables": {"A": {"wager": "sum", "condition": "3-8-9", "pays": {"3": "25 to 1"}}}},
            "paytables.A.pays.8",
        ),
        (
            {
                "paytables": {
                    "A": {"wager": "sum", "condition": "series", "pays": {"series": "lots"}}
                }
            },
            "paytables.A.pays.series",
        ),
        (
            {"paytables": {"M": {"wager": "match", "pays": {"two": "2 to 1", "four": "9 to 1"}}}},
            "paytables.M.pays.four",
        ),
        ({"paytables": {"M": {"wager": "match", "odds": {}}}}, "paytables.M.odds"),
    ],
)
def test_bad_values_are_refused_naming_the_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(raw)
    assert raised.value.key == key
    assert key in str(raised.value)


def test_a_casino_paytable_is_read() -> None:
    config = parse_config(
        {"paytables": {"M": {"wager": "match", "pays": {"two": "2 to 1", "three": "12 to 1"}}}}
    )
    (table,) = config.paytables
    assert table.wager is Wager.MATCH
    assert table.pays == {"two": Odds(2), "three": Odds(12)}


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[table\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(binary)
