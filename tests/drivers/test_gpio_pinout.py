"""hw/pinout.md, PinsConfig and the example config name the same pins."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from controller.core.config import PinsConfig

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|", re.MULTILINE)
# BCM -> physical header pin on the 40-pin header.
HEADER = {4: 7, 5: 29, 6: 31, 7: 26, 8: 24, 12: 32, 13: 33, 16: 36, 17: 11, 18: 12, 19: 35, 20: 38,
          21: 40, 22: 15, 23: 16, 24: 18, 25: 22, 26: 37, 27: 13}  # fmt: skip


def test_the_pin_map_agrees_with_the_defaults_and_the_example() -> None:
    documented = {key: int(bcm) for bcm, _, key in ROW.findall((ROOT / "hw/pinout.md").read_text())}
    defaults = dataclasses.asdict(PinsConfig())
    example = tomllib.loads((ROOT / "hw/config.example.toml").read_text())["pins"]
    assert documented == defaults
    assert example == defaults


def test_the_header_pins_are_right() -> None:
    for bcm, header, _ in ROW.findall((ROOT / "hw/pinout.md").read_text()):
        assert HEADER[int(bcm)] == int(header), f"BCM {bcm}"
