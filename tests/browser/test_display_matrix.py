"""The table page at every screen size in every state (issue 16), in Debian's chromium.

For each viewport (the 800x480 touch display to a 3840x2160 screen, and portrait 1080x1920)
and each state (bets open with limits, paytables and the clock; a result of the dice with its
dealing plan; a no roll; a fault; a recall; an RNG result; OFFLINE once the server stops), in
English and Traditional Chinese together (the tightest setting), the page is checked for:

- every visible element inside the viewport;
- no two texts overlapping: each text node's boxes (Range rects, or an SVG text's box) with
  the font's internal leading taken off (0.2 em above, 0.12 em below: the glyphs of Noto Sans
  and Noto Sans CJK lie within), so that two lines set tighter than the font's own line gap
  are not an overlap, and text cut off by an element that clips is reported as well;
- axe-core (axe-playwright-python): the full rule set; no violation of any impact
  (color-contrast among them) is allowed;
- the lowest contrast ratio of any text against what is under it (computed from the computed
  colours: the nearest background or SVG shape at the text's centre), at least 4.5;
- no rule citation ("621a.8(d)", "N.J.A.C. ...") anywhere in the players' text or labels;
- at 1920x1080 the smallest font size of the players' text (an SVG text's size times its
  scale), at least 34 px. The recall's column of records (image digests, the timeline: the
  inspector's evidence) is reported apart and not held to it.

One browser for the module, one page per viewport, all fed by one display server; the
screenshots go to test-output/display-matrix/<state>-<w>x<h>-<lang>.png (git-ignored): every
state at 1920x1080 and any page where a check found a problem; every viewport with
``DISPLAY_SHOTS=all`` (a screenshot costs some 60 ms of the browser's CPU; there are 70).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.base import AXE_SCRIPT
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from support.browser import DICE, RECALL_PLAYS, stats_payload, wait_current
from support.display_table import PAYTABLES, RNG_COMMIT, CoreTable, Table, rng_draw, start_display

from controller.audit.recall import recall
from controller.core.config import BetLimits, LimitsConfig
from controller.core.dealing import DeliveryStyle, dealing_plan
from controller.core.dice import NoRollReason, Roll
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.result import result_of_number, result_of_roll
from controller.core.state import (
    CorrectionReason,
    Event,
    Fault,
    Mode,
    RoundContext,
    RoundSettings,
    Screen,
    VoidReason,
)

ASSETS = Path(__file__).resolve().parents[2] / "controller" / "display" / "assets"

SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "display-matrix"
ALL_SHOTS = os.environ.get("DISPLAY_SHOTS") == "all"
VIEWPORTS = [(800, 480), (1280, 720), (1920, 1080), (3840, 2160), (1080, 1920)]
LIMITS = LimitsConfig(
    currency="USD",
    table=BetLimits(25, 5000),
    sum=BetLimits(5, 500),
    beat_it=BetLimits(5, 200),
)
BRAND = "GOLDEN DRAGON"
MIN_PLAYER_FONT_PX = 34.0  # at 1920x1080: 17 mm on a 43-inch screen, read from 3 m
MIN_CONTRAST = 4.5  # WCAG AA, for all text
SERIOUS = {"minor", "moderate", "serious", "critical"}  # every violation

# What the page shows, measured in the page itself: the problems found, and each text's
# effective font size and contrast against what is under it.
SUPPORT = Path(__file__).resolve().parents[1] / "support"
_SOURCE = (SUPPORT / "display_measure.js").read_text(encoding="utf-8")
MEASURE = _SOURCE[_SOURCE.index("() =>") :]  # the function, after its comment
# Every word on the players' page: its text as shown, and its labels for assistive technology.
PLAYER_WORDS = """() => document.body.innerText + " | " + [...document.querySelectorAll(
  "[aria-label]")].map((e) => e.getAttribute("aria-label")).join(" | ")"""
# A rule's citation: the section numbers of the rules (621a, 645a), N.J.A.C., NYCRR, AGCO.
CITATION = re.compile(r"\b(?:621a|645a)\.[\w().]*|N\.J\.A\.C\.|NYCRR|13:69E|AGCO \d")


class Screens:
    """One page per viewport, all on the same display server."""

    def __init__(
        self,
        browser: Any,
        table: Table | CoreTable,
        language: str,
        viewports: Sequence[tuple[int, int]] = VIEWPORTS,
    ) -> None:
        self.table = table
        self.language = language
        self.pages: list[tuple[int, int, Any]] = []
        self.errors: list[str] = []
        self.problems: list[str] = []
        self.figures: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
        assert table.display is not None
        for width, height in viewports:
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            page.on("pageerror", lambda exc: self.errors.append(str(exc)))
            page.goto(table.display.url)
            self.pages.append((width, height, page))

    def wait(self, condition: str, arg: object) -> None:
        for _, _, page in self.pages:
            # a bound on liveness, not a measure of speed: every page of the matrix at once on
            # a loaded machine
            page.wait_for_function(condition, arg=arg, timeout=60_000)

    def check(self, state: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        for width, height, page in self.pages:
            label = f"{state}-{width}x{height}-{self.language}"
            problems = len(self.problems)
            measured = page.evaluate(MEASURE)
            self.problems += [f"{label}: {p}" for p in measured["problems"]]
            self.figures[(state, width, height)] = measured["texts"]
            words = page.evaluate(PLAYER_WORDS)
            for citation in sorted(set(CITATION.findall(words))):
                self.problems.append(f"{label}: a rule citation on the players' page: {citation}")
            if page.evaluate("typeof window.axe") == "undefined":
                page.evaluate(AXE_SCRIPT)
            violations = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for v in violations["violations"]:
                if v["impact"] in SERIOUS:
                    nodes = [n["target"] for n in v["nodes"]][:3]
                    self.problems.append(f"{label}: axe {v['id']} ({v['impact']}): {nodes}")
            if ALL_SHOTS or (width, height) == (1920, 1080) or len(self.problems) > problems:
                page.screenshot(path=str(SHOTS / f"{label}.png"))

    def close(self) -> None:
        for _, _, page in self.pages:
            page.context.close()


def played_table(state_dir: Path, languages: Sequence[str]) -> Table:
    """A table eleven rounds into a shift (their readings in the log, for a recall), with a
    brand, limits, the two paytables and a clock that is not synchronised."""
    table = Table(state_dir)
    table.display = start_display(
        table.log,
        languages=languages,
        brand=BRAND,
        limits=LIMITS,
        paytables=PAYTABLES,
        synchronised=False,
    )
    table.open_round()
    for (red, blue), options in RECALL_PLAYS:
        table.recorded_round(red, blue, **options)
    return table


def latest(state: str, round_number: int) -> str:
    return f"l => {{ const e = window.displayLog[window.displayLog.length - 1]; return e && e.screen === {state!r} && e.round === {round_number}; }}"  # noqa: E501


def play_every_state(screens: Screens, table: Table, state_dir: Path) -> None:
    """Each state in turn, as the controller shows it, checked on every page."""
    n = table.round
    table.show(
        Screen.READY, round=n, mode="shaker", bank="dealer", stats=stats_payload(), dice=DICE
    )
    screens.wait(latest("ready", n), None)
    screens.wait("() => !document.getElementById('clock-box').hidden", None)
    screens.check("ready")

    table.record(RecordKind.BANK_SELECTED, round=n, bank="seat 2", refused=None)
    table.record(RecordKind.NO_MORE_BETS, round=n, bank="seat 2", mode="shaker")
    # 621a.9(8): the longest style name, and a plan tile by tile with its key
    table.show(Screen.BETS_CLOSED, round=n, attempt=1, delivery_style="dragon-phoenix-right")
    show_result(table, Roll(3, (4, 5)), 2, DeliveryStyle.DRAGON_PHOENIX_RIGHT)
    screens.wait(latest("result", n), None)
    screens.check("result")

    # Service mode (9 NYCRR 5319.58), with a player bank and a full statistics panel: TEST
    # across the page, and a test result with its dealing plan.
    table.show(
        Screen.READY,
        round=n,
        mode="shaker",
        bank="seat 1",
        stats=stats_payload(),
        dice=DICE,
        service=True,
    )
    screens.wait("() => document.getElementById('live').dataset.screen === 'ready'", None)
    screens.check("service-ready")
    show_result(table, Roll(6, (6, 5)), 1, DeliveryStyle.STANDARD, service=True)
    screens.wait("() => document.getElementById('live').dataset.screen === 'result'", None)
    screens.check("service-result")

    table.close_round()
    n = table.round
    table.show(Screen.NO_ROLL, round=n, attempt=2, reason="not_flat", words="a die is not flat")
    screens.wait(latest("no_roll", n), None)
    screens.check("no-roll")

    table.record(RecordKind.FAULT, round=n, attempt=2, fault="sensor_lost", detail="", state="x")
    table.show(Screen.FAULT, round=n, faults=["sensor_lost", "tamper"], fallback="rng")
    screens.wait(latest("fault", n), None)
    screens.check("fault")

    rounds = recall(state_dir, last=11)
    table.show(Screen.RECALL, round=n, back=3, rounds=rounds)
    screens.wait(latest("recall", n), None)
    screens.check("recall")

    # The supervisor switches to the RNG: its commitment before bets close, then its number.
    table.record(RecordKind.RNG_COMMIT, **RNG_COMMIT)
    table.show(Screen.READY, round=n, mode="rng", bank="dealer")
    table.record(RecordKind.RNG_DRAW, **rng_draw(n, 6))
    number = result_of_number(Game.TILES, 6, bank_seat=None)
    table.record(RecordKind.RESULT, round=n, attempt=1, **number.as_record())
    table.show(Screen.RESULT, round=n, attempt=1, result=number.as_record())
    screens.wait(latest("result", n), None)
    screens.wait("() => !document.getElementById('commitment').hidden", None)
    screens.check("rng-result")

    assert table.display is not None
    table.display.close()
    screens.wait("() => !document.getElementById('offline').hidden", None)
    screens.check("offline")


def smallest(texts: list[dict[str, Any]]) -> dict[str, Any]:
    return min(texts, key=lambda t: t["size"])


def show_result(
    table: Table, roll: Roll, bank_seat: int | None, style: DeliveryStyle, *, service: bool = False
) -> None:
    """A dice result of the current round recorded, then shown with its dealing plan; with
    ``service``, a test result of service mode (recorded as the core records it)."""
    n = table.round
    result = result_of_roll(Game.TILES, roll, bank_seat=bank_seat, paytables=PAYTABLES)
    plan = dealing_plan(Game.TILES, style, result.position)
    if service:
        test = {"record": str(RecordKind.RESULT), "round": n, "attempt": 1}
        table.record(RecordKind.SERVICE_TEST, **test, **result.as_record())
    else:
        table.record(RecordKind.RESULT, round=n, attempt=1, **result.as_record())
    table.show(
        Screen.RESULT,
        round=n,
        attempt=1,
        result=result.as_record(),
        dealing_plan=plan.as_record(),
        **({"service": True} if service else {}),
    )


@pytest.mark.browser
@pytest.mark.slow
def test_every_state_fits_every_screen_in_english_and_chinese(browser: Any, tmp_path: Path) -> None:
    table = played_table(tmp_path, ["en", "zh-Hant"])
    screens = Screens(browser, table, "en+zh-Hant")
    started = time.monotonic()
    try:
        wait_current(screens.pages[0][2], "ready", table.round, timeout_ms=10_000)
        play_every_state(screens, table, tmp_path)
    finally:
        screens.close()
        table.close()
    print(f"\nmatrix: {len(screens.figures)} screens checked in {time.monotonic() - started:.1f} s")
    at_1080 = [
        t
        for (state, w, h), texts in screens.figures.items()
        if (w, h) == (1920, 1080) and state != "offline"
        for t in texts
    ]
    players = [t for t in at_1080 if not t["records"]]
    records = [t for t in at_1080 if t["records"]]
    low = smallest(players)
    print(
        f"smallest player-facing text at 1920x1080: {low['size']:.1f} px"
        f" ({low['text']!r} in {low['where']})"
    )
    if records:
        print(
            "smallest text of the recall's records at 1920x1080:"
            f" {smallest(records)['size']:.1f} px"
        )
    every = [t for texts in screens.figures.values() for t in texts]
    worst = min(every, key=lambda t: t["ratio"])
    print(
        f"lowest contrast ratio of any text, every screen: {worst['ratio']:.2f}:1"
        f" ({worst['text']!r} in {worst['where']})"
    )
    assert screens.errors == []
    assert screens.problems == [], "\n".join(screens.problems)
    small = [t for t in players if t["size"] < MIN_PLAYER_FONT_PX - 0.05]
    assert small == [], small[:10]
    assert worst["ratio"] >= MIN_CONTRAST


@pytest.mark.browser
@pytest.mark.parametrize("language", ["en", "zh-Hant"])
def test_one_language_alone_fits_and_reads_at_1080p_and_on_the_small_display(
    browser: Any, tmp_path: Path, language: str
) -> None:
    """English alone and Chinese alone: bets open and a result, at 1920x1080 and 800x480."""
    table = played_table(tmp_path, [language])
    screens = Screens(browser, table, language, viewports=[(1920, 1080), (800, 480)])
    try:
        n = table.round
        table.show(Screen.READY, round=n, mode="shaker", bank="dealer", stats=stats_payload())
        screens.wait(latest("ready", n), None)
        screens.check("ready")
        show_result(table, Roll(6, (6, 6)), None, DeliveryStyle.PIN_SAY_LEFT)  # with its key
        screens.wait(latest("result", n), None)
        screens.check("result")
    finally:
        screens.close()
        table.close()
    assert screens.errors == []
    assert screens.problems == [], "\n".join(screens.problems)
    at_1080 = [t for (_, w, _), texts in screens.figures.items() if w == 1920 for t in texts]
    low = smallest(at_1080)
    print(f"\n{language}: smallest text at 1920x1080 {low['size']:.1f} px ({low['text']!r})")
    assert low["size"] >= MIN_PLAYER_FONT_PX - 0.05
    assert min(t["ratio"] for texts in screens.figures.values() for t in texts) >= MIN_CONTRAST


@pytest.mark.browser
def test_a_correction_voids_rng_delivery_and_a_table_not_ready_fit_in_both_languages(
    browser: Any, tmp_path: Path
) -> None:
    """English and Traditional Chinese together at 800x480 and 1920x1080, played through the
    round state machine: a result corrected (CORRECTED over the corrected outcome), bets open
    after a round void and a correction (their cells on the trend board), the table not ready
    (no dice set), and an RNG round's bets closed with the style of delivery and its draw."""
    table = CoreTable(
        tmp_path,
        languages=("en", "zh-Hant"),
        brand=BRAND,
        limits=LIMITS,
        paytables=PAYTABLES,
        synchronised=False,
    )
    screens = Screens(browser, table, "en+zh-Hant", viewports=[(800, 480), (1920, 1080)])
    try:
        table.start()
        for red, blue in [(3, (4, 5)), (6, (6, 2)), (1, (2, 3)), (5, (5, 5))]:
            table.shake(red, blue)
            table.send(Event.CLOSE_ROUND)
        table.shake(2, (2, 2))
        table.void(VoidReason.TILE_EXPOSED)  # round 5: void after its result
        table.send(Event.NO_MORE_BETS)
        table.send(Event.VOID_ROUND)  # round 6: the dealer's key
        table.shake(3, (4, 5))
        table.correct(3, (4, 6))  # round 7: corrected, with the dealing plan of seat 4
        screens.wait(latest("result", 7), None)
        screens.wait("() => !document.getElementById('corrected').hidden", None)
        screens.check("corrected")
        table.send(Event.CLOSE_ROUND)
        screens.wait(latest("ready", 8), None)
        screens.check("ready-after-voids")
    finally:
        screens.close()
        table.close()

    rng = CoreTable(
        tmp_path / "rng",
        RoundSettings(mode=Mode.RNG),
        languages=("en", "zh-Hant"),
        brand=BRAND,
        limits=LIMITS,
        paytables=PAYTABLES,
    )
    more = Screens(browser, rng, "en+zh-Hant", viewports=[(800, 480), (1920, 1080)])
    try:
        rng.start()
        rng.send(Event.NO_MORE_BETS)
        for _ in range(2):
            rng.send(Event.STYLE_KEY)  # to Cup Say From the Right: the longest name
        more.wait(latest("bets_closed", 1), None)
        more.check("rng-bets-closed")
        rng.send(Event.DICE_SET)
        more.wait(latest("drawing", 1), None)
        more.check("rng-drawing")
    finally:
        more.close()
        rng.close()

    bare = CoreTable(
        tmp_path / "bare",
        context=RoundContext(tiles_set="T1", tiles_since_table=0),
        languages=("en", "zh-Hant"),
        limits=LIMITS,
        paytables=PAYTABLES,
    )
    last = Screens(browser, bare, "en+zh-Hant", viewports=[(800, 480), (1920, 1080)])
    try:
        bare.start()  # no dice set recorded: the table is not ready
        last.wait(latest("ready", 1), None)
        last.check("not-ready")
    finally:
        last.close()
        bare.close()
    problems = screens.problems + more.problems + last.problems
    assert screens.errors + more.errors + last.errors == []
    assert problems == [], "\n".join(problems)
    figures = {**screens.figures, **more.figures, **last.figures}
    at_1080 = [t for (_, w, _), texts in figures.items() if w == 1920 for t in texts]
    low = smallest(at_1080)
    assert low["size"] >= MIN_PLAYER_FONT_PX - 0.05, low
    assert min(t["ratio"] for texts in figures.values() for t in texts) >= MIN_CONTRAST


# --- the message catalogue ------------------------------------------------------------------


def test_the_catalogue_has_every_message_the_page_names_in_both_languages() -> None:
    """messages.json: the same keys in English and Traditional Chinese, none empty, each with
    the same placeholders; every key the scripts name is there, and the words for everything
    the controller can send (faults, no rolls, delivery styles, record kinds, screens, void
    and correction reasons, modes)."""
    catalogue = json.loads((ASSETS / "messages.json").read_text(encoding="utf-8"))
    assert set(catalogue) == {"en", "zh-Hant"}
    en, zh = catalogue["en"], catalogue["zh-Hant"]
    assert set(en) == set(zh)
    placeholder = re.compile(r"\{(\w+)\}")
    for key, text in en.items():
        assert text.strip(), key
        assert zh[key].strip(), key
        assert set(placeholder.findall(text)) == set(placeholder.findall(zh[key])), key
        assert not re.search(r"[\u4e00-\u9fff]", text), key  # no Chinese in the English
    prefixes = "|".join(sorted({key.split(".")[0] for key in en}))
    scripts = "".join(
        (ASSETS / name).read_text(encoding="utf-8") for name in ("display.js", "supervisor.js")
    )
    named = set(re.findall(rf'"((?:{prefixes})\.[A-Za-z0-9_. -]+)"', scripts))
    assert named, "the scripts name no message"
    assert sorted(named - set(en)) == []
    expected = {f"fault.{f}" for f in Fault}
    expected |= {f"no_roll.{r}" for r in NoRollReason} | {f"verdict.{r}" for r in NoRollReason}
    expected |= {f"style.{s}" for s in DeliveryStyle} | {f"kind.{k}" for k in RecordKind}
    expected |= {f"headline.{s}" for s in Screen if s is not Screen.REFUSED}
    expected |= {f"void.{r}" for r in VoidReason} | {f"mode.{m}" for m in Mode}
    expected |= {f"correction.{r}" for r in CorrectionReason}
    assert sorted(expected - set(en)) == []
    # and no message is left that nothing shows: each is named, or of a family the scripts
    # name by its prefix ("fault." + code), or a position's name in one of its forms, or the
    # plural of a named one
    forms = {f for f in ("pos", "who", "short", "mini") if f'"{f}"' in scripts}

    def used(key: str) -> bool:
        family = key.split(".", maxsplit=1)[0]
        return (
            key in named
            or f'"{key}"' in scripts
            or f'"{family}."' in scripts
            or family in forms
            or key[:-1] in named
        )

    assert sorted(k for k in en if not used(k)) == []


# --- what the players read: refusals, service mode, player banks, the statistics' minimum ----

_SCRIPT = (ASSETS / "display.js").read_text(encoding="utf-8")
_MINIMUM = re.search(r"const HOT_COLD_MIN_ROLLS = (\d+);", _SCRIPT)
HOT_COLD_MIN_ROLLS = int(_MINIMUM.group(1)) if _MINIMUM else 0  # the test says when it is not
CATALOGUE = json.loads((ASSETS / "messages.json").read_text(encoding="utf-8"))
# What a refusal must never say to players: the state machine's words (a state, an event, an
# identifier with an underscore) or the supervisor's (the dice alarm, a fault's internals).
MACHINE_WORDS = re.compile(
    r"\b(?:state|event|idle|armed|alarm|supervisor|audit|manifest)\b|[a-z]+_[a-z_]+", re.I
)
INVITATIONS = ("PLACE YOUR BETS", "請下注", "LIMITS", "PAYTABLE")

NOTICE_LINES = """() => { const n = document.getElementById("notice");
  return n.hidden ? null : [...n.querySelectorAll(".ln")].map((s) => [s.lang, s.textContent]); }"""
HEADLINE = """() => [...document.querySelectorAll("#headline .ln")].map((s) => s.textContent)"""
STATS = """() => ({ rolls: document.getElementById("stats-rolls").textContent,
  hot: !document.getElementById("stats-hot").hidden
    && !!document.querySelector("#stats-hot .total-chip, #stats-hot .stats-label"),
  cold: !document.getElementById("stats-cold").hidden
    && !!document.querySelector("#stats-cold .total-chip, #stats-cold .stats-label"),
  minimum: (document.getElementById("stats-hot-cold-min") || {}).textContent || "" })"""


def message(language: str, key: str, **values: object) -> str:
    template = CATALOGUE[language].get(key, f"<no message {key}>")
    return str(template).format(**values)


def each_page(screens: Screens, script: str) -> list[tuple[str, Any]]:
    return [(f"{w}x{h}", page.evaluate(script)) for w, h, page in screens.pages]


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(600)  # a dozen states at every size in a browser
def test_refusals_service_mode_and_player_banks_speak_to_players_at_every_size(
    browser: Any, tmp_path: Path
) -> None:
    """Played through the round state machine, in English and Traditional Chinese together, at
    every size: a result (the statistics counted at once; hot and cold not named below the
    minimum of rolls), a key the table does not take (the players' message in both languages,
    never the state machine's words), bets open and a result with a player bank, and service
    mode's bets open and a test result with a player bank (TEST / 測試 as the headline, no
    invitation to bet, no limits, no paytables). Every page: nothing overprinted or cut off,
    no rule citation (Screens.check)."""
    table = CoreTable(
        tmp_path,
        RoundSettings(settle_ms=10, player_bank=True),
        languages=("en", "zh-Hant"),
        brand=BRAND,
        limits=LIMITS,
        paytables=PAYTABLES,
        synchronised=False,
    )
    screens = Screens(browser, table, "en+zh-Hant")
    wrong: list[str] = []

    def expect(what: str, found: object, wanted: object) -> None:
        if found != wanted:
            wrong.append(f"{what}: {found!r}, not {wanted!r}")

    def round_shown(screen: str) -> None:
        screens.wait(latest(screen, table.machine.context.round_number), None)

    def statistics(state: str, rolls: int) -> None:
        key = "stats.roll" if rolls == 1 else "stats.rolls"
        words = " / ".join(message(lang, key, n=rolls) for lang in ("en", "zh-Hant"))
        try:
            screens.wait("w => document.getElementById('stats-rolls').textContent === w", words)
        except PlaywrightTimeout:
            shown = each_page(screens, "() => document.getElementById('stats-rolls').textContent")
            wrong.append(f"{state}: the statistics say {shown[0][1]!r}, not {words!r}")
        for size, shown in each_page(screens, STATS):
            expect(
                f"{state} {size}: hot named below {HOT_COLD_MIN_ROLLS} rolls", shown["hot"], False
            )
            expect(f"{state} {size}: cold named", shown["cold"], False)
            minimum = " / ".join(
                message(lang, "stats.after", n=HOT_COLD_MIN_ROLLS) for lang in ("en", "zh-Hant")
            )
            expect(f"{state} {size}: the minimum said", minimum in shown["minimum"], True)

    def test_mode(state: str) -> None:
        for size, headline in each_page(screens, HEADLINE):
            expect(f"{state} {size}: the headline", headline, ["TEST", "測試"])
        for size, words in each_page(screens, PLAYER_WORDS):
            for invitation in INVITATIONS:
                expect(f"{state} {size}: says {invitation!r}", invitation in words.upper(), False)
        for w, h, page in screens.pages:
            for box in ("#limits", "#paytables"):
                expect(f"{state} {w}x{h}: {box} shown", page.is_visible(box), False)

    expect("display.js states HOT_COLD_MIN_ROLLS", _MINIMUM is not None, True)
    try:
        table.start()
        round_shown("ready")
        for size, headline in each_page(screens, HEADLINE):  # live: bets are invited
            expect(f"ready {size}: the headline", headline, ["PLACE YOUR BETS", "請下注"])
        screens.check("ready-no-rolls")
        table.shake(3, (4, 5))  # round 1, the dealer banks
        round_shown("result")
        statistics("result", 1)  # counted with the result, not at the next bets open
        screens.check("result-one-roll")

        table.press(Event.NO_MORE_BETS)  # not taken over a result
        screens.wait("() => !document.getElementById('notice').hidden", None)
        wanted = [[lang, message(lang, "refused.no_change")] for lang in ("en", "zh-Hant")]
        for size, lines in each_page(screens, NOTICE_LINES):
            expect(f"refused {size}: the notice", lines, wanted)
            for _, words in lines or []:
                expect(f"refused {size}: machine words", MACHINE_WORDS.findall(words), [])
        notices = each_page(screens, "() => document.getElementById('notice').textContent")
        for size, words in notices:
            expect(f"refused {size}: machine words", MACHINE_WORDS.findall(words), [])
        screens.check("refused")

        table.send(Event.CLOSE_ROUND)
        table.press(Event.BANK_SEAT_KEY)  # round 2: seat 1 banks
        round_shown("ready")
        screens.wait("() => /1/.test(document.getElementById('bank-line').textContent)", None)
        screens.check("ready-player-bank")
        table.shake(5, (5, 6))
        round_shown("result")
        statistics("player-bank result", 2)
        screens.check("result-player-bank")

        table.send(Event.CLOSE_ROUND)
        table.send(Event.SERVICE_MODE, supervisor=True, employee="S100")
        round_shown("ready")
        test_mode("service-ready")
        screens.check("service-ready")
        for _ in range(2):
            table.press(Event.BANK_SEAT_KEY)  # seat 2 banks the test round
        table.shake(6, (6, 5))
        round_shown("result")
        test_mode("service-result")
        for w, h, page in screens.pages:  # test rounds are not counted: the panel waits
            expect(f"service result {w}x{h}: statistics shown", page.is_visible("#stats"), False)
        screens.check("service-result")
    finally:
        screens.close()
        table.close()
    assert screens.errors == []
    assert wrong + screens.problems == [], "\n".join(wrong + screens.problems)
