"""The page brings its own fonts (controller/display/assets/fonts, scripts/build-fonts): served
by the controller, and every text of the players' page and the supervisor's view drawn in them,
in every language, whatever fonts the machine has. The browser sees none of the machine's
Noto fonts (tests/conftest.py, no_system_fonts): a text that fell back to a face of the
machine's would be drawn in DejaVu, and Chromium says which face drew each text
(CSS.getPlatformFontsForNode, Chrome's DevTools protocol)."""

from __future__ import annotations

import http.client
import json
import re
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from support.browser import LIMITS, WAIT_MS, wait_current
from support.display_table import Table, start_display

from controller.core.dice import NoRollReason
from controller.core.state import Screen
from controller.display.server import ASSETS, FONT_CACHE_CONTROL, FONT_FACES

ROOT = Path(__file__).resolve().parents[2]
ASSETS_DIR = ROOT / "controller" / "display" / "assets"
# The families inside the woff2 files (their name table), as Chromium names them
TEXT_FACES = {"Noto Sans", "Noto Sans CJK TC", "Noto Sans Mono CJK TC"}
BUNDLED = TEXT_FACES | {"Noto Sans Symbols2", "Noto Sans Math"}
NOT_DRAWN = {"SCRIPT", "STYLE", "TITLE", "HEAD", "#document", "HTML"}


# --- served with the page -----------------------------------------------------------------------


@pytest.fixture
def table(tmp_path: Path) -> Iterator[Table]:
    t = Table(tmp_path)
    t.display = start_display(t.log)
    yield t
    t.close()


def get(url: str, path: str) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_the_fonts_are_served_as_woff2_with_the_pages_headers(table: Table) -> None:
    assert table.display is not None
    for face in FONT_FACES:
        status, headers, body = get(table.display.url, f"/fonts/{face}.woff2")
        assert status == 200, face
        assert headers["Content-Type"] == "font/woff2"
        assert body[:4] == b"wOF2"  # the woff2 signature
        assert body == (ASSETS_DIR / "fonts" / f"{face}.woff2").read_bytes()
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert headers["Cache-Control"] == FONT_CACHE_CONTROL
    status, headers, body = get(table.display.url, "/fonts/OFL.txt")
    assert status == 200
    assert headers["Cache-Control"] == "no-store"
    assert b"SIL OPEN FONT LICENSE Version 1.1" in body
    status, _, _ = get(table.display.url, "/fonts/../server.py")
    assert status == 404


def test_the_fonts_ship_in_the_package_with_their_licence_and_sources() -> None:
    """An installed wheel serves them: package data, read as the server reads its assets."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "assets/fonts/*" in project["tool"]["setuptools"]["package-data"]["controller.display"]
    folder = resources.files("controller.display") / "assets" / "fonts"
    sources = (folder / "SOURCES.txt").read_text(encoding="utf-8")
    for face in FONT_FACES:
        assert f"/fonts/{face}.woff2" in ASSETS
        assert (folder / f"{face}.woff2").read_bytes()[:4] == b"wOF2"
        assert f"{face}.woff2: Noto Sans" in sources, face
    assert "SIL OPEN FONT LICENSE Version 1.1" in (folder / "OFL.txt").read_text(encoding="utf-8")
    for package in ("fonts-noto-core", "fonts-noto-cjk"):
        assert (folder / f"copyright.{package}").is_file()
    css = (ASSETS_DIR / "display.css").read_text(encoding="utf-8")
    rules = re.findall(r"@font-face \{[^}]*\}", css)
    assert sorted(re.findall(r'url\("/fonts/([a-z0-9-]+)\.woff2"\)', css)) == sorted(FONT_FACES)
    assert len(rules) == len(FONT_FACES)
    assert all("font-display: block;" in rule for rule in rules)
    # no face of the machine's is named: every family in the page's stacks is bundled
    named = set(re.findall(r'"([^"]+)"', "".join(re.findall(r"--(?:sans|cjk|mono): [^;]*;", css))))
    assert named == {"Table Sans", "Table Sans CJK TC", "Table Symbols", "Table Math", "Table Mono"}


# --- drawn in them --------------------------------------------------------------------------------


def platform_fonts(page: Any) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Every element with text of its own that is drawn: (tag, its text, the faces that drew it)."""
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]
        found: list[tuple[str, str, list[dict[str, Any]]]] = []

        def walk(node: dict[str, Any]) -> None:
            children = node.get("children", [])
            text = "".join(
                child["nodeValue"] for child in children if child["nodeType"] == 3
            ).strip()
            if text and node["nodeName"] not in NOT_DRAWN:
                fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})
                if fonts["fonts"]:  # none: not drawn (hidden)
                    found.append((node["nodeName"], text, fonts["fonts"]))
            for child in children:
                walk(child)

        walk(root)
        return found
    finally:
        cdp.detach()


def assert_only_bundled(page: Any, state: str) -> set[str]:
    # the page has drawn its texts (a loaded machine lays the page out after its load event)
    drawn = platform_fonts(page)
    for _ in range(WAIT_MS // 50):
        if len(drawn) >= 2:
            break
        page.wait_for_timeout(50)
        drawn = platform_fonts(page)
    assert len(drawn) >= 2, (state, drawn)  # the page drew texts, and each was asked about
    families: set[str] = set()
    for tag, text, fonts in drawn:
        for font in fonts:
            assert font["isCustomFont"], (state, tag, text, font)
            assert font["familyName"] in BUNDLED, (state, tag, text, font)
            families.add(font["familyName"])
    return families


@pytest.mark.browser
@pytest.mark.parametrize("languages", [("en",), ("zh-Hant", "en")], ids=["en", "zh-Hant+en"])
def test_every_text_of_the_pages_is_drawn_in_the_bundled_fonts(
    browser: Any, tmp_path: Path, languages: tuple[str, ...]
) -> None:
    table = Table(tmp_path)
    table.display = start_display(table.log, languages=languages, brand="金沙", limits=LIMITS)
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    families: set[str] = set()
    try:
        page = context.new_page()
        page.goto(table.display.url)
        families |= assert_only_bundled(page, "offline, before the stream")
        table.open_round()
        wait_current(page, "ready", 1, timeout_ms=WAIT_MS)
        families |= assert_only_bundled(page, "ready")
        table.no_roll(NoRollReason.NOT_FLAT)
        wait_current(page, "no_roll", 1, timeout_ms=WAIT_MS)
        families |= assert_only_bundled(page, "no roll")
        table.result(3, (4, 5))
        wait_current(page, "result", 1, timeout_ms=WAIT_MS)
        families |= assert_only_bundled(page, "result")
        sup = context.new_page()
        sup.goto(table.display.url + "supervisor")
        sup.wait_for_function("() => window.displayLog.length > 0", timeout=WAIT_MS)
        families |= assert_only_bundled(sup, "the supervisor's view")
        table.show(Screen.FAULT, faults=["sensor_lost", "tamper"])
        wait_current(page, "fault", 1, timeout_ms=WAIT_MS)
        families |= assert_only_bundled(page, "fault")
    finally:
        context.close()
        table.close()
    # the text faces drew it: Latin, and Chinese where the page speaks it (the mono face's
    # characters are checked by the next test)
    assert families >= (
        {"Noto Sans", "Noto Sans CJK TC"} if "zh-Hant" in languages else {"Noto Sans"}
    )


def page_characters() -> str:
    """Every character the pages can show: the catalogue's every string in every language,
    the pages' html, and the scripts' own strings (a superset: the files' every character)."""
    chars: set[str] = set()

    def strings(value: object) -> None:
        if isinstance(value, str):
            chars.update(value)
        elif isinstance(value, dict):
            for item in value.values():
                strings(item)
        elif isinstance(value, list):
            for item in value:
                strings(item)

    strings(json.loads((ASSETS_DIR / "messages.json").read_text(encoding="utf-8")))
    for name in ("index.html", "supervisor.html", "display.js", "supervisor.js"):
        chars.update((ASSETS_DIR / name).read_text(encoding="utf-8"))
    chars.update(chr(c) for c in range(0x21, 0x7F))  # names and numbers from the configuration
    return "".join(sorted(c for c in chars if c.isprintable() and not c.isspace()))


@pytest.mark.browser
def test_every_character_the_pages_can_show_is_in_the_bundled_fonts(
    browser: Any, table: Table
) -> None:
    """One element a character, in each language's family and weight: a character missing
    from the subsets would be drawn in DejaVu (or not at all) and named here."""
    assert table.display is not None
    chars = page_characters()
    assert "請" in chars  # the catalogue's Chinese
    assert "A" in chars
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = context.new_page()
        page.goto(table.display.url)
        page.evaluate(
            """(chars) => {
              document.body.replaceChildren();
              const box = document.createElement("div");
              box.id = "chars";
              for (const [lang, weight, mono] of [["en", 400, false], ["en", 900, false],
                  ["zh-Hant", 400, false], ["zh-Hant", 800, false], ["en", 400, true],
                  ["en", 700, true]]) {
                for (const c of chars) {
                  const e = document.createElement("span");
                  e.lang = lang;
                  e.className = mono ? "mono" : "";
                  e.style.fontWeight = String(weight);
                  e.textContent = c;
                  box.append(e);
                }
              }
              document.body.append(box);
            }""",
            chars,
        )
        page.evaluate("() => document.fonts.ready.then(() => null)")
        missing: set[str] = set()
        drawn = platform_fonts(page)
        assert len(drawn) == 6 * len(chars)
        for _, text, fonts in drawn:
            if not all(f["isCustomFont"] and f["familyName"] in BUNDLED for f in fonts):
                missing.add(text)
        assert not missing, f"not in the page's fonts (run scripts/build-fonts): {missing}"
    finally:
        context.close()
