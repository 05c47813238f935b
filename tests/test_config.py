"""The configuration file: validated, every bad key named (exit 78 at the command line)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
from rng_fakes import AUDITOR_KEY

from controller.app.config_file import load_config
from controller.core.config import BetLimits, Config, Language, LimitsConfig, parse_config
from controller.core.position import Game
from controller.core.state import Mode
from controller.core.wagers import Odds, Wager
from controller.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parent.parent / "hw" / "config.example.toml"
DEMO = EXAMPLE.parent / "config.demo.toml"


def test_the_example_config_loads_and_equals_the_defaults() -> None:
    config = load_config(EXAMPLE)
    defaults = Config()
    for section in (
        "table",
        "round",
        "shaker",
        "sensor",
        "rng",
        "storage",
        "display",
        "pins",
        "limits",
    ):
        assert getattr(config, section) == getattr(defaults, section), section
    assert config.paytables == defaults.paytables
    assert len(config.source_sha256) == 64


def test_the_examples_commented_limits_load_as_documented() -> None:
    """hw/config.example.toml shows [limits] commented out (none by default): uncommented,
    it is a valid config."""
    lines = EXAMPLE.read_text().splitlines()
    start = lines.index("# [limits]")
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line[2:])
    limits = parse_config(tomllib.loads("\n".join(block))).limits
    assert limits is not None
    assert set(limits.configured()) == {"table", "sum"}


def test_the_demo_config_shows_limits_and_a_brand() -> None:
    """``make demo`` plays with hw/config.demo.toml: the page shows limits and a name."""
    config = load_config(DEMO)
    assert config.limits is not None
    assert set(config.limits.configured()) == {"table", "sum"}
    assert config.display.brand
    assert config.paytables == Config().paytables  # no payout invented for a demo
    makefile = (EXAMPLE.parent.parent / "Makefile").read_text()
    assert "--config hw/config.demo.toml" in makefile


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("")
    assert load_config(path).table.game is Game.TILES


def test_values_are_read() -> None:
    config = parse_config(
        {
            "table": {"game": "poker", "mode": "rng", "name": "PG-7"},
            "rng": {"escrow_public_key": AUDITOR_KEY.text},
        }
    )
    assert config.table.game is Game.POKER
    assert config.table.mode is Mode.RNG
    assert config.round_settings().game is Game.POKER
    assert config.rng.escrow_public_key == AUDITOR_KEY.text


@pytest.mark.parametrize(
    "table",
    ['mode = "rng"', 'modes = ["rng"]', 'mode = "manual"\nmodes = ["shaker", "rng"]'],
)
def test_check_config_refuses_rng_mode_without_the_auditors_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str
) -> None:
    """Each RNG session's seed is sealed to the auditor's key: a table that may play RNG mode
    without one is a bad config (exit 78 naming rng.escrow_public_key); with one it is fine."""
    from controller.cli import main

    path = tmp_path / "config.toml"
    path.write_text(f"[table]\n{table}\n")
    assert main(["check-config", "--config", str(path)]) == 78
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "rng.escrow_public_key" in captured.err
    assert captured.err.count("\n") == 1
    path.write_text(f'[table]\n{table}\n[rng]\nescrow_public_key = "{AUDITOR_KEY.text}"\n')
    assert main(["check-config", "--config", str(path), "--json"]) == 0
    path.write_text(f'[table]\n{table}\n[rng]\nescrow_public_key = "{AUDITOR_KEY.text[1:]}"\n')
    assert main(["check-config", "--config", str(path)]) == 78
    assert "rng.escrow_public_key" in capsys.readouterr().err


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
        (
            {"round": {"shake_delay_min_ms": 900, "shake_delay_max_ms": 800}},
            "round.shake_delay_max_ms",
        ),
        ({"round": {"shake_delay_max_ms": 6000}}, "round.shake_delay_max_ms"),
        ({"pins": {"key_style": 17}}, "pins.key_style"),
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
        # issue 16: the page's languages and brand, the table limits
        ({"display": {"languages": []}}, "display.languages"),
        ({"display": {"languages": ["en", "en"]}}, "display.languages"),
        ({"display": {"languages": ["zh-Hans"]}}, "display.languages"),
        ({"display": {"languages": ["en", "zh-Hant", "en"]}}, "display.languages"),
        ({"display": {"languages": "en"}}, "display.languages"),
        ({"display": {"brand": "x" * 41}}, "display.brand"),
        ({"display": {"brand": "Casino\nRoyale"}}, "display.brand"),
        ({"display": {"brand": "Casino\u202eelayoR"}}, "display.brand"),  # a bidi override
        ({"display": {"brand": 7}}, "display.brand"),
        ({"limits": []}, "limits"),
        ({"limits": {"currency": "usd"}}, "limits.currency"),
        ({"limits": {"currency": "US"}}, "limits.currency"),
        ({"limits": {"currency": "ＵＳＤ"}}, "limits.currency"),
        ({"limits": {"currency": 840}}, "limits.currency"),
        ({"limits": {"tables": {"min": 1, "max": 2}}}, "limits.tables"),
        ({"limits": {"table": 25}}, "limits.table"),
        ({"limits": {"table": {"min": 25}}}, "limits.table.max"),
        ({"limits": {"table": {"max": 25}}}, "limits.table.min"),
        ({"limits": {"table": {"min": 25, "max": 50, "step": 5}}}, "limits.table.step"),
        ({"limits": {"table": {"min": 0, "max": 50}}}, "limits.table.min"),
        ({"limits": {"table": {"min": 1, "max": 10_000_001}}}, "limits.table.max"),
        ({"limits": {"table": {"min": 2.5, "max": 50}}}, "limits.table.min"),
        ({"limits": {"table": {"min": True, "max": 50}}}, "limits.table.min"),
        ({"limits": {"table": {"min": "25", "max": 50}}}, "limits.table.min"),
        ({"limits": {"sum": {"min": 100, "max": 50}}}, "limits.sum.max"),
        ({"limits": {"match": {"min": 5, "max": 50}}}, "limits.match"),  # no match paytable
        ({"limits": {"beat_it": {"min": 5, "max": 50}}}, "limits.beat_it"),
        # the Rules Submission: what the table cannot honour
        ({"table": {"co_banking": True}}, "table.co_banking"),  # moved to [rules]
        ({"rules": {"co_banking": True, "player_bank": False}}, "rules.co_banking"),
        (
            {"table": {"game": "poker"}, "rules": {"delivery_styles": ["jung-quat"]}},
            "rules.delivery_styles",
        ),
        ({"rules": {"delivery_styles": ["pin-say"]}}, "rules.delivery_styles"),
        ({"rules": {"delivery_styles": ["chee-yee", "chee-yee"]}}, "rules.delivery_styles"),
        ({"rules": {"delivery_styles": "chee-yee"}}, "rules.delivery_styles"),
        ({"rules": {"player_bank": "yes"}}, "rules.player_bank"),
        ({"rules": {"cut": True}}, "rules.cut"),
        # current 621a.5(e)(2)-(4): side wagers are the physical dice's, never the RNG's
        (
            {
                "table": {"mode": "rng"},
                "rng": {"escrow_public_key": AUDITOR_KEY.text},
                "limits": {"sum": {"min": 5, "max": 50}},
            },
            "limits.sum",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(raw)
    assert raised.value.key == key
    assert key in str(raised.value)


def test_the_rules_submission_is_read_into_the_round_settings() -> None:
    config = parse_config(
        {
            "rules": {
                "delivery_styles": ["jung-quat", "chee-yee"],
                "player_bank": True,
                "co_banking": True,
            }
        }
    )
    settings = config.round_settings()
    assert [str(s) for s in settings.styles] == ["jung-quat", "chee-yee"]
    assert (settings.player_bank, settings.co_banking) == (True, True)
    none = parse_config({"rules": {"delivery_styles": [], "player_bank": False}}).round_settings()
    assert (none.styles, none.player_bank, none.co_banking) == ((), False, False)
    # a table that also plays the dice may show a side wager's limits (its dice rounds)
    both = parse_config(
        {
            "table": {"mode": "rng", "modes": ["shaker"]},
            "rng": {"escrow_public_key": AUDITOR_KEY.text},
            "limits": {"sum": {"min": 5, "max": 50}},
        }
    )
    assert both.limits is not None


def test_the_page_languages_and_brand_are_read() -> None:
    """Issue 16: one language or both, in the order given; the certificate holder's name
    (621a.2(b)(1)), up to 40 printable characters, any script."""
    default = Config().display
    assert default.languages == (Language.EN, Language.ZH_HANT)
    assert default.brand == ""
    for languages in (["en"], ["zh-Hant"], ["zh-Hant", "en"], ["en", "zh-Hant"]):
        display = parse_config({"display": {"languages": languages}}).display
        assert [str(language) for language in display.languages] == languages
    brand = "金沙 Casino & Resort — Table Games 40 ch"[:40]
    assert parse_config({"display": {"brand": brand}}).display.brand == brand
    assert parse_config({"display": {"brand": ""}}).display.brand == ""


def test_table_limits_are_read() -> None:
    assert Config().limits is None  # no [limits]: none shown
    config = parse_config(
        {
            "limits": {
                "currency": "MOP",
                "table": {"min": 25, "max": 5000},
                "sum": {"min": 5, "max": 5},
                "match": {"min": 1, "max": 10_000_000},
            },
            "paytables": {
                "A": {
                    "wager": "sum",
                    "condition": "3-8-9",
                    "pays": {"3": "25 to 1", "8": "4 to 1", "9": "2 to 1"},
                },
                "M": {"wager": "match", "pays": {"two": "2 to 1", "three": "12 to 1"}},
            },
        }
    )
    assert config.limits == LimitsConfig(
        currency="MOP",
        table=BetLimits(25, 5000),
        sum=BetLimits(5, 5),
        match=BetLimits(1, 10_000_000),
    )
    assert list(config.limits.configured()) == ["table", "sum", "match"]
    only_currency = parse_config({"limits": {}}).limits
    assert only_currency == LimitsConfig()
    assert only_currency.configured() == {}


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


# --- bounds: a config file is read with a size cap ---------------------------------------------

MIB = 1 << 20
MEMORY_CAP = 1 << 30  # the child may use 1 GiB of address space; an uncapped read dies there


def _check_config_in_a_capped_child(path: str) -> subprocess.CompletedProcess[str]:
    """``check-config --config PATH`` in a child whose memory is capped, so that a reader
    without a size cap fails with MemoryError instead of taking the machine's memory."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))\n"
        "from controller.cli import main\n"
        f"raise SystemExit(main(['check-config', '--config', {path!r}]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_file_over_the_cap_is_refused_naming_file(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * MIB + b"\n")  # valid TOML (one comment), one byte over 1 MiB
    with pytest.raises(ConfigError, match="larger than") as caught:
        load_config(path)
    assert caught.value.key == "file"


def test_a_file_just_under_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * (MIB - 1) + b"\n")
    assert load_config(path).table.game is Game.TILES


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_that_never_ends_is_refused_in_bounded_memory(device: str) -> None:
    proc = _check_config_in_a_capped_child(device)
    assert proc.returncode == 78, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("paigow-controller: config: file: ")
    assert "larger than" in proc.stderr


def test_a_pipe_is_read_up_to_the_cap(tmp_path: Path) -> None:
    """A non-regular file that yields a config is fine (``--config <(...)``)."""
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb") as pipe:
            pipe.write(b'[table]\nname = "from-a-pipe"\n')

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert load_config(fifo).table.name == "from-a-pipe"
    writer.join(timeout=5)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"storage": {"state_dir": "/var/lib/a\x00b"}}, "storage.state_dir"),
        ({"sensor": {"url": "/dev/tty\nUSB0"}}, "sensor.url"),
        ({"display": {"host": "x" * 5000}}, "display.host"),
    ],
)
def test_text_values_are_bounded_and_without_control_characters(
    raw: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert caught.value.key == key


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("boot/anchor", "absolute"),
        ("/var/lib/paigow-controller/", "another directory"),
        ("/var/lib/x\x00y", "control characters"),
    ],
)
def test_the_anchors_second_place_is_another_absolute_directory(value: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as caught:
        parse_config({"storage": {"anchor_copy_dir": value}})
    assert caught.value.key == "storage.anchor_copy_dir"
    assert parse_config({"storage": {"anchor_copy_dir": "/boot/firmware/paigow"}})


def test_a_path_with_a_nul_byte_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(Path("/etc/paigow\x00.toml"))
    assert caught.value.key == "file"
