"""Numbers from outside are ASCII digits with an upper bound, wherever they come in.

``str.isdigit()`` accepts ``"²"`` and ``str.isdecimal()`` accepts ``"٣"``; ``int()`` accepts
both. Each place that reads a number from a person, a file, a socket or a record goes through
``controller.core.digits``; these tests feed each of them superscripts, other scripts' digits and
numbers too large for a sequence number.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.config import parse_config
from controller.core.digits import MAX_SEQ, NumberError, is_ascii_digits, parse_bounded_int, quoted
from controller.core.note import Checkpoint, NoteError
from controller.core.record_data import RecordDataError, bank_seat_of, paytables_from_record
from controller.display.events import EventId
from controller.display.feed import FeedRequestError, parse_request
from controller.errors import ConfigError

SUPERSCRIPT_TWO = "\u00b2"  # isdigit() is True, isdecimal() is False
ARABIC_INDIC_THREE = "\u0663"  # isdecimal() is True
DEVANAGARI_TWELVE = "\u0967\u0968"
FULLWIDTH_SEVEN = "\uff17"
NOT_ASCII_DIGITS = [SUPERSCRIPT_TWO, ARABIC_INDIC_THREE, DEVANAGARI_TWELVE, FULLWIDTH_SEVEN]
TOO_BIG = "9" * 23  # more than 2**63 - 1
ROOT = base64.b64encode(bytes(32)).decode()


# --- the helper -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [*NOT_ASCII_DIGITS, "", " 1", "1 ", "+1", "-1", "1_0", "0x1"])
def test_only_ascii_digits_are_digits(text: str) -> None:
    assert not is_ascii_digits(text)
    with pytest.raises(NumberError, match="is not a whole number"):
        parse_bounded_int(text, high=100, what="n")


def test_bounds_are_checked_before_the_conversion() -> None:
    assert parse_bounded_int("007", low=1, high=18, what="total") == 7
    assert parse_bounded_int(str(MAX_SEQ), high=MAX_SEQ, what="seq") == MAX_SEQ
    with pytest.raises(NumberError, match=r"seq 9223372036854775808 is not 0\.\.9223"):
        parse_bounded_int(str(MAX_SEQ + 1), high=MAX_SEQ, what="seq")
    with pytest.raises(NumberError, match=r"total 2 is not 3\.\.18"):
        parse_bounded_int("2", low=3, high=18, what="total")
    # 100 000 digits: refused by length, quoted short, on one line.
    with pytest.raises(NumberError) as caught:
        parse_bounded_int("9" * 100_000, high=MAX_SEQ, what="seq")
    assert len(str(caught.value)) < 200
    assert "\n" not in quoted("a\nb" * 1000)


@given(st.text(max_size=30), st.integers(0, 50), st.integers(0, 10**20))
def test_the_helper_returns_a_value_in_range_or_refuses(text: str, low: int, span: int) -> None:
    high = low + span
    if text.isascii() and text.isdigit() and low <= int(text) <= high:
        assert parse_bounded_int(text, low=low, high=high, what="n") == int(text)
        return
    with pytest.raises(NumberError) as caught:
        parse_bounded_int(text, low=low, high=high, what="n")
    assert "\n" not in str(caught.value)


# --- every place that reads a number from outside ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        *NOT_ASCII_DIGITS,
        f"{ARABIC_INDIC_THREE}.1",
        f"1.{SUPERSCRIPT_TWO}",
        TOO_BIG,
        f"1.{TOO_BIG}",
        "1.",
        ".1",
        "-1",
    ],
)
def test_a_last_event_id_that_is_not_ascii_digits_is_a_new_client(text: str) -> None:
    assert EventId.parse(text) is None


def test_last_event_ids_within_bounds_are_read() -> None:
    assert EventId.parse(str(MAX_SEQ)) == EventId(MAX_SEQ)
    assert EventId.parse("41.2") == EventId(41, 2)


@pytest.mark.parametrize(
    "line",
    [
        f"FROM {ARABIC_INDIC_THREE}".encode(),
        f"FROM {SUPERSCRIPT_TWO}".encode(),
        f"FROM {FULLWIDTH_SEVEN}".encode(),
        f"FROM {TOO_BIG}".encode(),
        b"FROM 9223372036854775808",
        b"FROM +3",
        b"FROM 1_0",
        b'{"from": 1e400}',
        b'{"from": -1e400}',
        b'{"from": NaN}',
        b'{"from": Infinity}',
        b'{"from": 3.0}',
        b'{"from": 9223372036854775808}',
        b'{"from": 100000000000000000000000000000}',
    ],
)
def test_feed_requests_take_ascii_digits_up_to_the_largest_sequence_number(line: bytes) -> None:
    with pytest.raises(FeedRequestError):
        parse_request(line)


def test_the_largest_sequence_number_is_a_valid_feed_request() -> None:
    assert parse_request(f"FROM {MAX_SEQ}".encode()) == MAX_SEQ
    assert parse_request(f'{{"from": {MAX_SEQ}}}'.encode()) == MAX_SEQ


def _sum_paytable(odds: str) -> dict[str, object]:
    return {
        "S": {
            "wager": "sum",
            "condition": "8-16-17",
            "pays": {"17": odds, "16": "6 to 1", "8": "3 to 1"},
        }
    }


@pytest.mark.parametrize(
    "odds",
    [
        f"{ARABIC_INDIC_THREE} to 1",
        f"25 to {SUPERSCRIPT_TWO}",
        f"{FULLWIDTH_SEVEN} to 1",
        f"{TOO_BIG} to 1",
        f"25 to {TOO_BIG}",
        "+25 to 1",
    ],
)
def test_paytable_odds_in_a_config_are_ascii_digits(odds: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"paytables": _sum_paytable(odds)})
    assert caught.value.key == "paytables.S.pays.17"


def _recorded_paytable(odds: str) -> list[dict[str, object]]:
    pays = {"17": odds, "16": "6 to 1", "8": "3 to 1"}
    return [{"name": "S", "wager": "sum", "condition": "8-16-17", "pays": pays}]


@pytest.mark.parametrize(
    "odds",
    [f"{ARABIC_INDIC_THREE} to 1", f"25 to {SUPERSCRIPT_TWO}", f"{TOO_BIG} to 1", "0 to 1"],
)
def test_recorded_paytable_odds_are_ascii_digits(odds: str) -> None:
    with pytest.raises(RecordDataError):
        paytables_from_record(_recorded_paytable(odds))


def test_recorded_paytable_odds_within_bounds_are_read() -> None:
    (table,) = paytables_from_record(_recorded_paytable("25 to 1"))
    assert str(table.pays["17"]) == "25 to 1"


@pytest.mark.parametrize(
    "label",
    [f"seat {c}" for c in NOT_ASCII_DIGITS] + [f"seat {TOO_BIG}", "seat 7", "seat 0", "seat "],
)
def test_a_recorded_bank_seat_is_ascii_digits(label: str) -> None:
    with pytest.raises(RecordDataError):
        bank_seat_of(label)


def test_a_recorded_bank_seat_is_read() -> None:
    assert bank_seat_of("dealer") is None
    assert bank_seat_of("seat 3") is not None


@pytest.mark.parametrize(
    "size", [*NOT_ASCII_DIGITS, TOO_BIG, str(MAX_SEQ + 1), "07", "", "-1", "+1"]
)
def test_a_checkpoint_size_is_ascii_digits_within_bounds(size: str) -> None:
    with pytest.raises(NoteError):
        Checkpoint.parse(f"origin\n{size}\n{ROOT}\n")


def test_a_checkpoint_is_read() -> None:
    assert Checkpoint.parse(f"origin\n{MAX_SEQ}\n{ROOT}\n").size == MAX_SEQ
    assert Checkpoint.parse(f"origin\n0\n{ROOT}\n").size == 0
