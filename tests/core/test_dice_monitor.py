"""The dice fairness monitor: counts and their records, the chi-square picture, the exact total
distribution, the three test martingales (exactly, over every next roll), the alarm on
handcrafted counts, the loaded die of the simulator, and seeded simulations of the issue's
figures (issue 15: fair dice alarm in fewer than 1 % of 1,000-roll sets; a red die showing 6
with probability 0.25 flagged within 400 rolls in at least 95 % of runs).

The statistical tests print their seed (``DICE_MONITOR_SEED`` replays another one); the figures
over many more sets are bench/bench_dice_monitor.py's.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core import canonical
from controller.core.dice import FACES, Roll
from controller.core.dice_monitor import (
    ALPHA,
    ALPHA_BLUE,
    ALPHA_RED,
    ALPHA_TOTAL,
    EMPTY,
    LOADED,
    MAX_COUNT,
    TOTAL_PROBABILITY,
    TOTALS,
    CountsError,
    DiceCounts,
    DiceTest,
    DiceWindows,
    Window,
    alarm,
    chi_square_survival,
    evaluate,
    loaded_face_probabilities,
    p_values,
)
from controller.errors import GameRuleError

SEED = int(os.environ.get("DICE_MONITOR_SEED", "15"))
FAIR = (1 / 6,) * 6
WAYS = (1, 3, 6, 10, 15, 21, 25, 27, 27, 25, 21, 15, 10, 6, 3, 1)  # of each total in 216

rolls_st = st.builds(
    Roll, st.sampled_from(FACES), st.tuples(st.sampled_from(FACES), st.sampled_from(FACES))
)


def counts_of(rolls: Sequence[Roll]) -> DiceCounts:
    counts = EMPTY
    for roll in rolls:
        counts = counts.after(roll)
    return counts


def spread_face_probabilities(face: int, probability: float) -> tuple[float, ...]:
    """The "spread" model: ``face`` at ``probability``, the other five faces equal."""
    chances = [(1 - probability) / 5] * 6
    chances[face - 1] = probability
    return tuple(chances)


# --- counts -----------------------------------------------------------------------------------


def test_a_roll_counts_its_red_face_both_blue_faces_and_its_total() -> None:
    counts = EMPTY.after(Roll(6, (2, 5)))
    assert counts.red == (0, 0, 0, 0, 0, 1)
    assert counts.blue == (0, 1, 0, 0, 1, 0)
    assert counts.total[13 - 3] == 1
    assert sum(counts.total) == 1
    assert counts.rolls == 1
    doubled = counts.after(Roll(1, (5, 5)))
    assert doubled.red == (1, 0, 0, 0, 0, 1)
    assert doubled.blue == (0, 1, 0, 0, 3, 0)
    assert doubled.total[11 - 3] == 1
    assert doubled.rolls == 2
    assert counts.rolls == 1  # frozen: ``after`` gives new counts


@given(st.lists(rolls_st, max_size=60))
def test_counts_are_the_tallies_of_the_rolls(rolls: list[Roll]) -> None:
    counts = counts_of(rolls)
    red = Counter(r.red for r in rolls)
    blue = Counter(face for r in rolls for face in r.blue)
    total = Counter(r.total for r in rolls)
    assert counts.red == tuple(red[f] for f in FACES)
    assert counts.blue == tuple(blue[f] for f in FACES)
    assert counts.total == tuple(total[t] for t in TOTALS)
    assert counts.rolls == len(rolls)


def test_the_windows_start_again_where_the_table_says() -> None:
    roll = Roll(3, (4, 4))
    windows = DiceWindows().after(roll).after(roll)
    one = EMPTY.after(roll)
    two = one.after(roll)
    assert all(windows.window(w) == two for w in Window if w is not Window.ALL)
    with pytest.raises(CountsError, match="the log's"):
        windows.window(Window.ALL)  # the log's window: dice-stats makes it from the records
    assert windows.kept() == DiceWindows(set=two, shift=two, test=EMPTY)
    assert windows.replaced() == DiceWindows(set=EMPTY, shift=two, test=EMPTY)
    assert windows.new_shift() == DiceWindows(set=two, shift=EMPTY, test=two)
    assert windows.new_shift().after(roll).shift == one
    assert DiceWindows().is_empty
    assert not windows.is_empty
    assert windows.replaced().replaced().new_shift().set == EMPTY


# --- records: only what as_record writes --------------------------------------------------------

window_steps = st.lists(
    st.one_of(rolls_st, st.sampled_from(["replaced", "kept", "new_shift"])), max_size=40
)


def windows_after(steps: list[Roll | str]) -> DiceWindows:
    windows = DiceWindows()
    for step in steps:
        windows = windows.after(step) if isinstance(step, Roll) else getattr(windows, step)()
    return windows


@given(window_steps)
def test_records_round_trip_through_canonical_json(steps: list[Roll | str]) -> None:
    windows = windows_after(steps)
    record = windows.as_record()
    assert DiceWindows.from_record(record) == windows
    assert DiceWindows.from_record(canonical.decode(canonical.encode(record))) == windows
    assert DiceWindows.from_record(json.loads(json.dumps(record))) == windows
    for w in (Window.SET, Window.SHIFT, Window.TEST):
        counts = windows.window(w)
        assert DiceCounts.from_record(counts.as_record()) == counts
        assert DiceCounts.from_record(json.loads(json.dumps(counts.as_record()))) == counts


@given(window_steps)
def test_the_snapshots_text_form_reads_back_as_itself(steps: list[Roll | str]) -> None:
    windows = windows_after(steps)
    text = windows.as_text()
    assert text.isascii()
    assert DiceWindows.from_text(text) == windows


def test_the_text_form_refuses_what_as_text_never_writes() -> None:
    text = EMPTY_WINDOWS.after(Roll(6, (2, 5))).new_shift().kept().as_text()
    full = EMPTY_WINDOWS.after(Roll(6, (2, 5))).as_text()
    assert full.endswith("|=|=")  # the shift and the test count what the set counts
    set_text = full.split("|")[0]
    for bad in (
        f"{set_text}|{set_text}|=",  # a window equal to the set written out
        f"{set_text}|=",  # two windows
        "=|=|=",  # the set itself as '='
        full.replace("|=|=", "|=|= "),
        text.replace("1", "01", 1),  # a leading zero
        text.replace("1", "+1", 1),  # a sign
        text.replace(",", ", ", 1),  # a space
        text.replace("1", "\u0661", 1),  # an Arabic-Indic digit
        text + "|=",  # a fourth window
        text.rsplit("|", 1)[0],  # three windows
        text.replace(";", ",", 1),  # a group run into the next
        text.split(";", 1)[1],  # the first window without its red counts
        "",
        None,
        [text],
        text.replace("0", "9" * 17, 1),  # beyond 2**53
        # counts that the text can carry but the windows cannot be: an inner window larger
        text.replace("0", "5", 1),
    ):
        with pytest.raises(CountsError):
            DiceWindows.from_text(bad)


EMPTY_WINDOWS = DiceWindows()
GOOD = EMPTY.after(Roll(6, (2, 5))).after(Roll(1, (1, 3))).as_record()


def with_(name: str, value: object) -> dict[str, object]:
    return {**GOOD, name: value}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        "red",
        {"red": [0] * 6, "blue": [0] * 6},  # a key missing
        {**EMPTY.as_record(), "extra": [0]},  # a key too many
        with_("red", [1, 0, 0, 0, 0]),  # wrong lengths
        with_("red", [1, 0, 0, 0, 0, 1, 0]),
        with_("blue", [0] * 5),
        with_("total", [0] * 15),
        with_("total", [0] * 17),
        with_("red", (1, 0, 0, 0, 0, 1)),  # a tuple: the record holds lists
        with_("red", "100001"),
        with_("red", [-1, 0, 0, 0, 0, 3]),  # a negative count
        with_("red", [True, 0, 0, 0, 0, 1]),  # a bool is not a count
        with_("red", [1.0, 0, 0, 0, 0, 1]),  # nor a float
        with_("red", ["1", 0, 0, 0, 0, 1]),  # nor text
        with_("red", [None, 0, 0, 0, 0, 1]),
        {"red": [MAX_COUNT + 1, 0, 0, 0, 0, 0], "blue": [0] * 6, "total": [0] * 16},
        with_("red", [1, 0, 0, 0, 0, 0]),  # one roll of red, four blue faces, two totals
        with_("blue", [1, 1, 0, 0, 1, 0]),  # three blue faces in two rolls
        with_("total", [0] * 16),  # no totals for two rolls
        with_("total", [1] * 3 + [0] * 13),  # three totals for two rolls
    ],
)
def test_counts_refuse_what_as_record_never_writes(raw: object) -> None:
    with pytest.raises(CountsError):
        DiceCounts.from_record(raw)


def test_counts_take_counts_up_to_the_largest_and_no_more() -> None:
    # MAX_COUNT red rolls would need twice as many blue faces: no record can hold them
    raw = {"red": [MAX_COUNT, 0, 0, 0, 0, 0], "blue": [0] * 6, "total": [0] * 16}
    raw["total"] = [MAX_COUNT] + [0] * 15
    raw["blue"] = [MAX_COUNT, MAX_COUNT, 0, 0, 0, 0]
    assert DiceCounts.from_record(raw).rolls == MAX_COUNT
    with pytest.raises(CountsError):
        DiceCounts.from_record({**raw, "blue": [2 * MAX_COUNT, 0, 0, 0, 0, 0]})
    assert issubclass(CountsError, ValueError)


def test_windows_refuse_what_as_record_never_writes() -> None:
    roll = Roll(2, (3, 4))
    one = EMPTY.after(roll).as_record()
    two = EMPTY.after(roll).after(roll).as_record()
    whole = DiceWindows().after(roll).after(roll).as_record()
    assert DiceWindows.from_record(whole) == DiceWindows().after(roll).after(roll)
    # the shift and the set are independent: either may be the longer
    assert DiceWindows.from_record({**whole, "set": one, "test": one}).shift.rolls == 2
    assert DiceWindows.from_record({**whole, "shift": one}).set.rolls == 2
    refused: list[object] = [
        None,
        {k: v for k, v in whole.items() if k != "test"},  # a window missing
        {**whole, "day": two},  # a window too many
        {**whole, "set": {**two, "red": [0, 3, 0, 0, 0, 0]}},  # bad counts inside
        {**whole, "all": one},  # the log's window is not the table's
        {**whole, "set": one},  # the test counts more than its set
        {**whole, "set": EMPTY.after(Roll(5, (3, 4))).after(roll).as_record()},  # other faces
    ]
    for raw in refused:
        with pytest.raises(CountsError):
            DiceWindows.from_record(raw)


# --- the chi-square picture -------------------------------------------------------------------


def chi_square_survival_closed_form(x: float, df: int) -> float:
    """Q(df/2, x/2) in closed form: a finite Poisson sum for even df, erfc and a finite sum of
    half-integer terms for odd df (Abramowitz and Stegun 26.4.4, 26.4.5)."""
    z = x / 2
    if df % 2 == 0:
        return math.exp(-z) * math.fsum(z**k / math.factorial(k) for k in range(df // 2))
    return math.erfc(math.sqrt(z)) + math.fsum(
        math.exp((k - 0.5) * math.log(z) - z - math.lgamma(k + 0.5))
        for k in range(1, (df + 1) // 2)
    )


@pytest.mark.parametrize(
    ("x", "df", "p"),
    [  # a printed table of chi-square critical values (upper tail), four decimals
        (3.8415, 1, 0.05),
        (6.6349, 1, 0.01),
        (10.8276, 1, 0.001),
        (5.9915, 2, 0.05),
        (1.1455, 5, 0.95),
        (4.3515, 5, 0.50),
        (11.0705, 5, 0.05),
        (15.0863, 5, 0.01),
        (20.5150, 5, 0.001),
        (18.3070, 10, 0.05),
        (7.2609, 15, 0.95),
        (14.3389, 15, 0.50),
        (24.9958, 15, 0.05),
        (30.5779, 15, 0.01),
        (37.6973, 15, 0.001),
    ],
)
def test_chi_square_survival_matches_the_table(x: float, df: int, p: float) -> None:
    assert chi_square_survival(x, df) == pytest.approx(p, rel=2e-4)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 6, 9, 10, 15, 16, 30])
def test_chi_square_survival_matches_the_closed_form_from_tiny_to_huge_x(df: int) -> None:
    # across the switch from the series (x/2 < df/2 + 1) to the continued fraction
    for x in (1e-6, 0.01, 0.5, 1, 2, df / 2, df, df + 1, df + 2, df + 3, 2 * df, 50, 100, 300):
        expected = chi_square_survival_closed_form(x, df)
        assert chi_square_survival(x, df) == pytest.approx(expected, rel=1e-9, abs=1e-300), x
    assert chi_square_survival(0, df) == 1.0
    assert chi_square_survival(-3, df) == 1.0
    assert chi_square_survival(5000, df) == 0.0  # underflows, never negative or NaN


@given(
    st.floats(0, 400, allow_nan=False),
    st.floats(0, 400, allow_nan=False),
    st.integers(1, 40),
)
def test_chi_square_survival_is_a_monotone_probability(a: float, b: float, df: int) -> None:
    low, high = sorted((a, b))
    q_low, q_high = chi_square_survival(low, df), chi_square_survival(high, df)
    assert 0.0 <= q_high <= q_low * (1 + 1e-12) <= 1.0 + 1e-12
    # more degrees of freedom, a heavier upper tail at the same x
    assert chi_square_survival(high, df + 1) >= q_high * (1 - 1e-12)


def test_p_values_are_none_before_a_roll_one_for_exact_counts_and_tiny_for_skewed_ones() -> None:
    assert p_values(EMPTY) == {DiceTest.RED: None, DiceTest.BLUE: None, DiceTest.TOTAL: None}
    # every one of the 216 outcomes once: counts exactly as expected, statistic 0
    exact = counts_of([Roll(r, (a, b)) for r, a, b in itertools.product(FACES, FACES, FACES)])
    assert p_values(exact) == {DiceTest.RED: 1.0, DiceTest.BLUE: 1.0, DiceTest.TOTAL: 1.0}
    skewed = counts_of([Roll(6, (6, 6))] * 30 + [Roll(1, (2, 3))] * 6)
    assert all(p is not None and p < 1e-6 for p in p_values(skewed).values())


# --- the total's exact distribution -----------------------------------------------------------


def test_the_total_distribution_is_exact_over_all_216_outcomes() -> None:
    ways = Counter(r + a + b for r, a, b in itertools.product(FACES, FACES, FACES))
    assert sum(ways.values()) == 216
    assert tuple(TOTALS) == tuple(range(3, 19))
    assert tuple(ways[t] / 216 for t in TOTALS) == TOTAL_PROBABILITY
    assert tuple(ways[t] for t in TOTALS) == WAYS
    assert math.fsum(TOTAL_PROBABILITY) == pytest.approx(1.0, abs=1e-15)
    # and the counts index every outcome's total where the monitor looks for it
    for r, a, b in itertools.product(FACES, FACES, FACES):
        counts = EMPTY.after(Roll(r, (a, b)))
        assert counts.total[r + a + b - TOTALS[0]] == 1


# --- the test martingales ---------------------------------------------------------------------


def near(weights: Sequence[int], most: int, wobble: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Counts ``k * weight`` (k up to ``most``), each moved by up to ``wobble``: around fair
    dice, on both sides of the thresholds."""
    size = len(weights)
    return st.tuples(
        st.integers(0, most), st.lists(st.integers(-wobble, wobble), min_size=size, max_size=size)
    ).map(lambda kd: tuple(max(0, kd[0] * w + d) for w, d in zip(weights, kd[1], strict=True)))


face_counts = st.lists(st.integers(0, 150), min_size=6, max_size=6).map(tuple)
total_counts = st.lists(st.integers(0, 60), min_size=16, max_size=16).map(tuple)
# counts the monitor could not have made are fine here: the statistics are functions of counts
any_counts = st.one_of(
    st.builds(DiceCounts, face_counts, face_counts, total_counts),
    st.builds(DiceCounts, near((1,) * 6, 80, 30), near((1,) * 6, 80, 30), near(WAYS, 5, 25)),
)


@settings(max_examples=60, deadline=None)
@given(any_counts)
def test_each_statistic_is_a_test_martingale_over_every_next_roll(counts: DiceCounts) -> None:
    """Under fair dice, the expected next value of each M (over all 216 next rolls, equally
    likely) is its value now: E[M_(n+1) / M_n] = 1. With M_0 = 1 and M >= 0, Ville's
    inequality bounds each test's false alarm over the set's whole life by its alpha."""
    now = evaluate(counts)
    ratios: list[list[float]] = [[], [], []]
    for r, a, b in itertools.product(FACES, FACES, FACES):
        after = evaluate(counts.after(Roll(r, (a, b))))
        for i in range(3):
            ratios[i].append(math.exp(after[i].log_e - now[i].log_e))
    for figure, ratio in zip(now, ratios, strict=True):
        assert math.fsum(ratio) / 216 == pytest.approx(1.0, rel=1e-9), figure.test


def test_the_alpha_budget_and_thresholds() -> None:
    assert pytest.approx(0.007) == ALPHA_RED + ALPHA_BLUE + ALPHA_TOTAL == ALPHA  # < 1 %
    figures = evaluate(EMPTY)
    assert [f.test for f in figures] == [DiceTest.RED, DiceTest.BLUE, DiceTest.TOTAL]
    for figure, alpha in zip(figures, (ALPHA_RED, ALPHA_BLUE, ALPHA_TOTAL), strict=True):
        assert figure.threshold == pytest.approx(math.log(1 / alpha))


# --- evaluate and alarm on handcrafted counts ---------------------------------------------------

NEUTRAL_BLUE = (34, 33, 33, 33, 34, 33)  # 200 blue faces, two for each of 100 rolls
NEUTRAL_RED = (17, 17, 16, 16, 17, 17)
NEUTRAL_TOTAL = (0,) * 7 + (50, 50) + (0,) * 7  # 50 tens and 50 elevens: no tilt either way


def test_no_rolls_no_evidence_no_alarm() -> None:
    assert alarm(EMPTY) is None
    figures = evaluate(EMPTY)
    assert [f.log_e for f in figures] == [0.0, 0.0, 0.0]
    assert not any(f.is_alarm for f in figures)
    assert figures[2].face is None


def test_sixty_sixes_in_a_hundred_red_rolls_raise_the_red_alarm_on_six() -> None:
    counts = DiceCounts((8, 8, 8, 8, 8, 60), NEUTRAL_BLUE, NEUTRAL_TOTAL)
    raised = alarm(counts)
    assert raised is not None
    assert raised.test is DiceTest.RED
    assert raised.face == 6
    assert raised.is_alarm
    red, blue, total = evaluate(counts)
    assert red == raised
    assert not blue.is_alarm
    assert not total.is_alarm
    record = raised.as_record()
    assert record == {
        "test": "red",
        "log_e": f"{raised.log_e:.3f}",
        "threshold": f"{math.log(1 / ALPHA_RED):.3f}",
        "face": 6,
    }


def test_a_blue_bias_on_two_pooled_over_both_blue_dice_raises_the_blue_alarm() -> None:
    # one blue die showing 2 half the time: 50 + 17 twos in 200 blue faces
    counts = DiceCounts(NEUTRAL_RED, (26, 67, 26, 27, 27, 27), NEUTRAL_TOTAL)
    raised = alarm(counts)
    assert raised is not None
    assert (raised.test, raised.face) == (DiceTest.BLUE, 2)
    assert not evaluate(counts)[0].is_alarm


def test_the_opposite_face_shown_seldom_points_at_the_loaded_face() -> None:
    # 1 shown often and its opposite 6 seldom: the pair alternative for 1 carries the evidence
    counts = DiceCounts(
        (45, 20, 20, 20, 20, 2), (43, 42, 42, 42, 42, 43), (0,) * 7 + (64, 63) + (0,) * 7
    )
    raised = alarm(counts)
    assert raised is not None
    assert (raised.test, raised.face) == (DiceTest.RED, 1)


@pytest.mark.parametrize(
    "totals",
    [
        (0,) * 10 + (20, 20, 20, 20, 10, 10),  # 100 totals of 13..18
        (10, 10, 20, 20, 20, 20) + (0,) * 10,  # 100 totals of 3..8
    ],
)
def test_totals_skewed_high_or_low_trip_the_total_test(totals: tuple[int, ...]) -> None:
    counts = DiceCounts(NEUTRAL_RED, NEUTRAL_BLUE, totals)
    raised = alarm(counts)
    assert raised is not None
    assert raised.test is DiceTest.TOTAL
    assert raised.face is None
    red, blue, _ = evaluate(counts)
    assert not red.is_alarm
    assert not blue.is_alarm


def test_the_strongest_evidence_raises_the_alarm() -> None:
    counts = DiceCounts((8, 8, 8, 8, 8, 60), (20, 20, 20, 20, 20, 100), NEUTRAL_TOTAL)
    figures = evaluate(counts)
    assert figures[0].is_alarm
    assert figures[1].is_alarm
    strongest = max(figures[:2], key=lambda f: f.log_e - f.threshold)
    assert alarm(counts) == strongest


@settings(max_examples=300)
@given(any_counts)
def test_alarm_agrees_with_evaluate(counts: DiceCounts) -> None:
    figures = evaluate(counts)
    raised = alarm(counts)
    alarms = [f for f in figures if f.is_alarm]
    if not alarms:
        assert raised is None
        return
    assert raised in alarms
    assert raised.log_e - raised.threshold == max(f.log_e - f.threshold for f in alarms)


# --- the loaded die of the simulator ------------------------------------------------------------


@pytest.mark.parametrize(
    ("face", "probability", "expected"),
    [
        (6, 0.25, (1 / 12, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 4)),  # the die: pair model
        (1, 0.25, (1 / 4, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 12)),
        (3, 0.30, (1 / 6, 1 / 6, 0.30, 1 / 3 - 0.30, 1 / 6, 1 / 6)),
        (6, 1 / 3, (0, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 3)),  # the opposite face never shows
        (6, 0.40, (0, 0.15, 0.15, 0.15, 0.15, 0.40)),  # then the other four give evenly
        (2, 1.0, (0, 1, 0, 0, 0, 0)),
        (6, 0.10, (1 / 3 - 0.10, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 0.10)),  # below 1/6: opposite more
        (4, 0.0, (1 / 6, 1 / 6, 1 / 3, 0, 1 / 6, 1 / 6)),
    ],
)
def test_loaded_face_probabilities(
    face: int, probability: float, expected: tuple[float, ...]
) -> None:
    assert loaded_face_probabilities(face, probability) == pytest.approx(expected, abs=1e-15)


def test_a_die_loaded_to_one_sixth_is_fair_and_one_at_one_quarter_is_the_pair_alternative() -> None:
    for face in FACES:
        assert loaded_face_probabilities(face, 1 / 6) == FAIR
    chances = loaded_face_probabilities(6, LOADED)
    ratios = sorted({round(c * 6, 12) for c in chances})
    assert ratios == [0.5, 1.0, 1.5]  # what the monitor's pair alternative for 6 assumes


@given(st.sampled_from(FACES), st.floats(0, 1), st.floats(0, 1))
def test_loaded_face_probabilities_is_a_distribution_moving_with_the_probability(
    face: int, p: float, q: float
) -> None:
    chances = loaded_face_probabilities(face, p)
    assert len(chances) == 6
    assert all(0 <= c <= 1 for c in chances)
    assert math.fsum(chances) == pytest.approx(1.0, abs=1e-12)
    assert chances[face - 1] == p
    assert chances[6 - face] == pytest.approx(max(0.0, 1 / 3 - p), abs=1e-15)
    others = [c for i, c in enumerate(chances) if i not in (face - 1, 6 - face)]
    assert len(set(others)) == 1  # the other four alike
    low, high = sorted((p, q))
    below, above = loaded_face_probabilities(face, low), loaded_face_probabilities(face, high)
    # what the face gains as its probability rises, no other face gains
    assert above[face - 1] >= below[face - 1]
    assert all(above[i] <= below[i] + 1e-15 for i in range(6) if i != face - 1)


@pytest.mark.parametrize(
    ("face", "probability"),
    [
        (0, 0.25),
        (7, 0.25),
        (True, 0.25),
        (6.0, 0.25),
        (6, -0.01),
        (6, 1.01),
        (6, math.nan),
        (6, math.inf),
        (6, True),
    ],
)
def test_loaded_face_probabilities_refuses_a_face_or_probability_out_of_range(
    face: object, probability: object
) -> None:
    with pytest.raises(GameRuleError) as raised:
        loaded_face_probabilities(face, probability)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError)


# --- the figures, on seeded simulations -------------------------------------------------


def first_alarm(
    rng: random.Random,
    rolls: int,
    red: Sequence[float] = FAIR,
    blue_1: Sequence[float] = FAIR,
    blue_2: Sequence[float] = FAIR,
) -> int | None:
    """The roll of a set's first alarm, the monitor asked after every roll as the appliance
    asks it (faces drawn from each die's chances by cumulative weights), or None."""
    reds = rng.choices(FACES, cum_weights=list(accumulate(red)), k=rolls)
    blues_1 = rng.choices(FACES, cum_weights=list(accumulate(blue_1)), k=rolls)
    blues_2 = rng.choices(FACES, cum_weights=list(accumulate(blue_2)), k=rolls)
    counts = EMPTY
    for n, faces in enumerate(zip(reds, blues_1, blues_2, strict=True), 1):
        counts = counts.after(Roll(faces[0], (faces[1], faces[2])))
        if alarm(counts) is not None:
            return n
    return None


@pytest.mark.slow
def test_fair_dice_alarm_in_fewer_than_one_percent_of_1000_roll_sets() -> None:
    """600 fair sets of 1,000 rolls (about 6 s). Ville's inequality bounds the false alarm over
    a set's whole life by ALPHA = 0.7 % (the exact test above proves the martingales); within
    1,000 rolls the bench measures about 0.5 % (26 of 5,000 sets with seed 1): about 3 alarms
    are expected here, and the assertion (under 1 %) allows 5. So this seeded run (1 alarm
    with seed 15) is a tripwire for a broken monitor, not a measurement: a monitor at twice
    the budget, or a chi-square looked at after every roll (alarms in about half the sets),
    fails it; bench/bench_dice_monitor.py gives the rate with its confidence bound."""
    sets = 600
    rng = random.Random(f"{SEED}/fair")
    alarms = sum(first_alarm(rng, 1000) is not None for _ in range(sets))
    print(f"seed {SEED}: {alarms} false alarms in {sets} fair sets of 1,000 rolls")
    assert alarms < 0.01 * sets


def test_a_red_six_at_one_quarter_is_flagged_within_400_rolls_in_95_percent_of_runs() -> None:
    """The issue's die under the pair model (the simulator's ``--dice-bias red:6:0.25``): 600
    runs; the bench measures 97.3 % (4,863 of 5,000, median 167 rolls), so about 16 misses
    are expected (21 with seed 15) and the assertion allows 30; a monitor at 94 % would miss
    about 36."""
    runs = 600
    rng = random.Random(f"{SEED}/red pair")
    loaded = loaded_face_probabilities(6, 0.25)
    flagged = [first_alarm(rng, 400, red=loaded) for _ in range(runs)]
    hits = sum(n is not None for n in flagged)
    print(f"seed {SEED}: {hits} of {runs} runs flagged within 400 rolls (pair)")
    assert hits >= 0.95 * runs


def test_a_red_six_at_one_quarter_spread_evenly_is_flagged_in_most_runs() -> None:
    """The extra chance of 6 taken evenly from the other five faces ("spread"). No test that
    does not know the loaded face reaches 95 % here at 400 rolls with a 1 % family-wise false
    alarm: one look at roll 400 reaches about 92 % with the red die alone, 85 % watching red
    and blue (bench/dice_monitor_limits.py), and a monitor looking after every roll pays for
    it. The bench measures 68.3 % (3,414 of 5,000): about 410 of 600 expected (397 with seed
    15), and the floor at 60 % (360) is more than four standard deviations below."""
    runs = 600
    rng = random.Random(f"{SEED}/red spread")
    loaded = spread_face_probabilities(6, 0.25)
    hits = sum(first_alarm(rng, 400, red=loaded) is not None for _ in range(runs))
    print(f"seed {SEED}: {hits} of {runs} runs flagged within 400 rolls (spread)")
    assert hits >= 0.60 * runs
