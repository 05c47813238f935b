"""The configuration file: validated, every bad key named (exit 78 at the command line)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import random
import socket
import subprocess
import sys
import threading
import tomllib
import typing
from pathlib import Path

import pytest
from support.rng_fakes import AUDITOR_KEY

from controller.app.config_file import listen_address_problem, load_config
from controller.core.config import (
    _SECTIONS,
    MAX_KEYS,
    MAX_NESTING,
    BetLimits,
    Config,
    Language,
    LimitsConfig,
    config_from_bytes,
    parse_config,
)
from controller.core.position import Game
from controller.core.state import Mode
from controller.core.wagers import Odds, Wager
from controller.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "hw" / "config.example.toml"
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
        # a number that is not finite passes every comparison with a bound
        ({"shaker": {"amplitude": float("nan")}}, "shaker.amplitude"),
        ({"shaker": {"amplitude": float("inf")}}, "shaker.amplitude"),
        ({"shaker": {"amplitude": float("-inf")}}, "shaker.amplitude"),
        ({"round": {"settle_ms": float("nan")}}, "round.settle_ms"),
        ({"shaker": {"amplitude": 10**400}}, "shaker.amplitude"),  # no float holds it
        ({"round": {"settle_ms": 2**80}}, "round.settle_ms"),
        # the page and the feed each listen on a port of their own
        ({"display": {"http_port": 8080, "feed_port": 8080}}, "display.feed_port"),
        ({"display": {"feed_port": 8080}}, "display.feed_port"),
        # the log's directory is the same whatever directory the service starts in
        ({"storage": {"state_dir": "var/lib/paigow-controller"}}, "storage.state_dir"),
        ({"storage": {"state_dir": " "}}, "storage.state_dir"),
        ({"storage": {"state_dir": ""}}, "storage.state_dir"),
        ({"storage": {"state_dir": "~/state"}}, "storage.state_dir"),
        # the shape of the file: nesting and key count bounded
        ({"paytables": {"A": {"pays": {"x": [[[[[[1]]]]]]}}}}, "paytables.A.pays.x[0][0][0][0][0]"),
        ({"paytables": {f"T{i}": {} for i in range(5000)}}, "paytables"),
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
        # the kiosk's screen turns in quarter turns (hw/kiosk/kiosk-session)
        ({"display": {"rotation": 45}}, "display.rotation"),
        ({"display": {"rotation": 360}}, "display.rotation"),
        ({"display": {"rotation": -90}}, "display.rotation"),
        ({"display": {"rotation": "90"}}, "display.rotation"),
        ({"display": {"rotation": True}}, "display.rotation"),
        ({"display": {"rotation": 90.0}}, "display.rotation"),
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


# --- bounds: every number finite and in range, the file's shape, the host ---------------------


def test_every_number_a_section_takes_has_bounds() -> None:
    """A number without a range would take anything tomllib reads (1e308, a 64-bit integer)."""
    for name, cls in _SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for spec in dataclasses.fields(cls):
            if hints[spec.name] in (int, float):
                meta = spec.metadata
                bounded = meta.get("low") is not None and meta.get("high") is not None
                assert bounded or meta.get("choices"), f"{name}.{spec.name}"


def _deep_array(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("text", "key"),
    [
        # tomllib recurses into each nested list and inline table: past Python's recursion
        # limit it raised RecursionError (exit 70 with a traceback); now the file is named
        (f"[table]\nname = {_deep_array(2000)}\n", "file"),
        ("x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n", "file"),
        # within the recursion limit, the parsed tree's depth is bounded and the key named
        (f"[table]\nname = {_deep_array(MAX_NESTING + 1)}\n", "table.name" + "[0]" * 7),
        ("[" + ".".join(["a"] * 2000) + "]\n", ".".join(["a"] * (MAX_NESTING + 1))),
        ("[paytables.A]\n" + "".join(f"k{i} = 1\n" for i in range(MAX_KEYS)), "paytables.A"),
        # tomllib's int() of more than 4,300 digits raised ValueError (exit 70)
        ("[round]\nsettle_ms = " + "9" * 5000 + "\n", "file"),
        # read (a power of two's base has no digit limit), but too large to write out
        ("[round]\nsettle_ms = 0x" + "f" * 5000 + "\n", "round.settle_ms"),
    ],
    ids=["array-2000", "inline-2000", "array-9", "header-2000", "keys", "digits", "hex-digits"],
)
def test_the_files_nesting_and_key_count_are_bounded(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_bytes(text.encode(), source="deep.toml")
    assert caught.value.key == key
    if key == "file":
        assert "deep.toml" in str(caught.value)


def test_the_deepest_config_within_the_bounds_is_read() -> None:
    """Paytables are the deepest keys a config has (three tables down): well within."""
    text = EXAMPLE.read_text()
    assert "[paytables." in text
    assert config_from_bytes(text.encode(), source="example").paytables == Config().paytables


def _this_machines_address() -> str | None:
    """An address of one of this machine's interfaces: the one a UDP socket would send from
    (connect() on UDP sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "0.0.0.0", "::", "::1", "localhost"])
def test_a_loopback_or_any_address_is_a_host_to_listen_on(host: str) -> None:
    assert listen_address_problem(host) is None


def test_an_address_this_machine_holds_is_a_host_to_listen_on() -> None:
    address = _this_machines_address()
    if address is None:
        pytest.skip("no interface but the loopback")
    assert listen_address_problem(address) is None


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("203.0.113.77", "is not an address of this machine"),  # TEST-NET-3: nobody's
        ("2001:db8::77", "address of this machine"),  # the documentation prefix
        ("no-such-table.invalid", "does not resolve"),  # RFC 6761: never resolves
        ("bad host", "does not resolve"),
    ],
)
def test_a_host_that_is_not_this_machines_is_refused_naming_display_host(
    tmp_path: Path, host: str, problem: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[display]\nhost = "{host}"\n')
    with pytest.raises(ConfigError, match=problem) as caught:
        load_config(path, on_this_machine=True)
    assert caught.value.key == "display.host"
    # run does not refuse it (exit 78 is never restarted; at boot the address may come later,
    # then the display's bind fails and systemd tries again), nor a copy read elsewhere
    assert load_config(path).display.host == host


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[shaker]\namplitude = nan\n", "shaker.amplitude"),
        ("[shaker]\namplitude = -inf\n", "shaker.amplitude"),
        (f"[rules]\nx = {_deep_array(2000)}\n", "file"),
        ("[round]\nsettle_ms = " + "9" * 5000 + "\n", "file"),
        ("[display]\nhttp_port = 9000\nfeed_port = 9000\n", "display.feed_port"),
        ('[display]\nhost = "203.0.113.77"\n', "display.host"),
        ('[storage]\nstate_dir = "state"\n', "storage.state_dir"),
        ('[storage]\nstate_dir = "  "\n', "storage.state_dir"),
        ("[display]\nrotation = 45\n", "display.rotation"),
    ],
    ids=["nan", "-inf", "deep", "digits", "ports", "host", "relative", "blank", "rotation"],
)
def test_check_config_exits_78_naming_the_key_in_one_line(
    tmp_path: Path, text: str, key: str
) -> None:
    """The command itself, as a technician runs it: one line naming the key, exit 78."""
    path = tmp_path / "config.toml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 78, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"paigow-controller: config: {key}: "), proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


# --- a fuzz of the whole loader: every bad value refused naming its key, nothing else raised ---

FUZZ_SEED = int(os.environ.get("CONFIG_FUZZ_SEED", "2028"))
FUZZ_CASES = 400

_NASTY: list[object] = [
    float("nan"),
    float("inf"),
    float("-inf"),
    -(2**63),
    2**63 - 1,
    10**400,
    0,
    -1,
    1e308,
    0.5,
    True,
    "",
    " ",
    "relative/dir",
    "x" * 5000,
    "a\u202eb",
    "a\x7fb",
    [],
    [float("nan")],
    {},
    {"k": float("inf")},
]


def _nested(rng: random.Random) -> object:
    value: object = rng.choice([1, "x", float("nan")])
    for _ in range(rng.choice([MAX_NESTING, MAX_NESTING + 1, 40, 400, 2000])):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def _toml_value(value: object) -> str:
    """TOML for a value: floats as TOML writes them (nan, inf, -inf), strings escaped, lists
    and inline tables written without recursion (the fuzz nests them 2,000 deep)."""
    opening, closing, leaf = [], [], value
    while isinstance(leaf, list | dict) and len(leaf) == 1:
        if isinstance(leaf, list):
            opening.append("[")
            closing.append("]")
            leaf = leaf[0]
        else:
            ((name, leaf),) = leaf.items()
            opening.append(f"{{{name} = ")
            closing.append("}")
    if isinstance(leaf, bool):
        text = "true" if leaf else "false"
    elif isinstance(leaf, float):
        text = (
            "nan"
            if math.isnan(leaf)
            else ("inf" if leaf > 0 else "-inf")
            if math.isinf(leaf)
            else repr(leaf)
        )
    elif isinstance(leaf, int):
        text = str(leaf)
    elif isinstance(leaf, str):
        text = json.dumps(leaf)
    elif isinstance(leaf, list):
        text = "[]"
    else:
        text = "{}"
    return "".join(opening) + text + "".join(reversed(closing))


def _contains_non_finite(value: object) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return False


def _refusal(text: str) -> ConfigError | None:
    """The ConfigError that loading ``text`` raises, None if it is a config; anything else
    raised fails the test."""
    try:
        config_from_bytes(text.encode(), source="fuzz.toml", escrow_required=False)
    except ConfigError as exc:
        return exc
    return None


def test_a_fuzzed_config_is_read_or_refused_naming_a_key() -> None:
    """Each case sets one key of a section (or both display ports to one value) to a value
    drawn from the nasty ones (NaN, infinities, 64-bit extremes, nesting 2,000 deep, control
    characters, relative paths), writes it as TOML and loads it: a config or a ConfigError,
    nothing else ever; a non-finite number, a nesting past the bound and equal ports always
    refused, naming the key (or the file, where tomllib itself ran out of stack)."""
    print(f"seed {FUZZ_SEED} (CONFIG_FUZZ_SEED replays another)")
    rng = random.Random(FUZZ_SEED)
    keys = [
        (name, spec.name) for name, cls in _SECTIONS.items() for spec in dataclasses.fields(cls)
    ]
    refused = 0
    for case in range(FUZZ_CASES):
        section, name = rng.choice(keys)
        roll = rng.random()
        if roll < 0.1:
            section, port = "display", rng.randint(1, 65535)
            lines = [f"http_port = {port}", f"feed_port = {port}"]
            must_name: tuple[str, ...] | None = ("display.feed_port",)
        else:
            value = _nested(rng) if roll < 0.3 else rng.choice(_NASTY)
            lines = [f"{name} = {_toml_value(value)}"]
            key = f"{section}.{name}"
            deep = roll < 0.3 and isinstance(value, list | dict)
            must_name = None
            if _contains_non_finite(value) or deep:
                must_name = (key, "file") if deep else (key,)
        text = f"[{section}]\n" + "\n".join(lines) + "\n"
        refusal = _refusal(text)
        if refusal is None:
            assert must_name is None, (case, text[:200])
        else:
            refused += 1
            if must_name is not None:
                assert refusal.key.startswith(must_name), (case, text[:200], refusal)
    assert refused > FUZZ_CASES // 2  # the nasty values are nasty: most are refused
