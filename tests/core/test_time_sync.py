"""Trusted time: the service unit starts once the clock is synchronised (where a wait service
holds time-sync.target back), and the controller records the clock's status itself."""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "paigow-controller.service"


def unit_values(key: str) -> list[str]:
    """Every value of ``key`` in the unit's [Unit] section, split on spaces."""
    values: list[str] = []
    section = ""
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Unit]" and line.startswith(f"{key}="):
            values += line.split("=", 1)[1].split()
    return values


def test_the_unit_is_ordered_after_time_sync_and_wants_it() -> None:
    assert "time-sync.target" in unit_values("After")
    assert "time-sync.target" in unit_values("Wants")
    # still after the file systems and the network, as before
    assert {"local-fs.target", "network.target"} <= set(unit_values("After"))
