"""The guest's helpers that need no guest: which apt sources the host's mirror is read from.

These run without root and boot nothing (``pytest tests/system/test_machine.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from machine import apt_mirror, apt_sources

DEBIAN_DEB822 = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"


def _etc(tmp_path: Path, parts: dict[str, str], sources_list: str | None = None) -> Path:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    if sources_list is not None:
        (etc / "sources.list").write_text(sources_list)
    for name, text in parts.items():
        (etc / "sources.list.d" / name).write_text(text)
    return etc


def test_a_part_apt_ignores_is_not_read_even_when_it_sorts_first(tmp_path: Path) -> None:
    # "a-off..." sorts before "debian.sources": read, it would give its mirror
    etc = _etc(
        tmp_path,
        {
            "a-off.sources.disabled-by-farm": "URIs: http://disabled.example/debian\n",
            "a-old.list.dpkg-old": "deb http://old.example/debian bookworm main\n",
            "a-backup.list~": "deb http://backup.example/debian bookworm main\n",
            "debian.sources": DEBIAN_DEB822,
        },
    )
    assert apt_mirror(etc) == "http://mirror.example/debian"
    assert [p.name for p in apt_sources(etc)] == ["sources.list", "debian.sources"]


def test_list_and_sources_parts_are_read_after_sources_list_in_name_order(tmp_path: Path) -> None:
    etc = _etc(
        tmp_path,
        {
            "b.sources": DEBIAN_DEB822,
            "a_1.list": "deb [arch=arm64] https://one.example/debian bookworm main\n",
            "c.list": "deb http://three.example/debian bookworm main\n",
        },
    )
    assert [p.name for p in apt_sources(etc)] == ["sources.list", "a_1.list", "b.sources", "c.list"]
    assert apt_mirror(etc) == "https://one.example/debian"
    (etc / "sources.list").write_text("deb http://first.example/debian bookworm main\n")
    assert apt_mirror(etc) == "http://first.example/debian"


def test_the_security_mirror_is_passed_over_and_none_found_gives_debians(tmp_path: Path) -> None:
    etc = _etc(
        tmp_path,
        {"debian.sources": "URIs: http://security.debian.org/debian-security\n"},
        sources_list="# deb http://commented.example/debian bookworm main\n",
    )
    assert apt_mirror(etc) == "http://deb.debian.org/debian"
    assert apt_mirror(tmp_path / "no-apt-here") == "http://deb.debian.org/debian"
