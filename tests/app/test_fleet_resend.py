"""The witness's cosignature as the publisher's cursor (controller/fleet/resend.py): where a
connection starts, when records are sent again, and the back-off while the witness does not
move. Pure: the times are given."""

from __future__ import annotations

from controller.fleet.resend import RESEND_AFTER_S, RESEND_MAX_S, WitnessCursor


def test_a_connection_starts_at_the_cursor_never_past_the_cosignature() -> None:
    cursor = WitnessCursor()
    assert cursor.first_on_connection(120) == 121  # no cosignature known: the broker's cursor
    # the first of the connection, behind 121: the broker may have lost 81..120, they go again
    assert cursor.cosigned_at(80) == 81
    assert cursor.first_on_connection(120) == 81  # the next connection starts there
    assert cursor.first_on_connection(50) == 51  # a cursor behind the witness (a power cut)
    assert cursor.cosigned_at(80) is None
    assert cursor.cosigned_at(80) is None  # the same size again: it did not grow
    assert cursor.cosigned_at(70) is None  # an older one after the first: S stays
    assert cursor.cosigned == 80
    assert cursor.cosigned_at(90) is None  # S grows
    assert cursor.held == 90


def test_before_a_cosignature_the_log_s_record_of_one_is_where_a_connection_starts() -> None:
    """The publisher started: the last ``cosigned`` record of this witness names 60 records.
    A connection sends from 61, not from the broker's cursor (the broker may have lost what
    it acknowledged past it, the witness being down)."""
    cursor = WitnessCursor(recorded=60)
    assert cursor.held == 60
    assert cursor.first_on_connection(120) == 61
    assert cursor.first_on_connection(40) == 41  # a cursor behind the record (a power cut)
    # the resend counts from the record too, until a cosignature is verified
    assert cursor.resend_from(acked=120, checkpoint=120, sent_all=True, now=0.0) is None
    assert cursor.resend_from(acked=120, checkpoint=120, sent_all=True, now=10.0) == 61


def test_the_first_cosignature_of_a_connection_says_what_the_witness_holds() -> None:
    """It is taken even when smaller than S (the witness's store restored, records lost
    between): the records after it go again at once, once; later smaller ones move nothing."""
    cursor = WitnessCursor()
    cursor.first_on_connection(0)
    assert cursor.cosigned_at(100) is None
    assert cursor.first_on_connection(150) == 101
    assert cursor.cosigned_at(70) == 71  # behind 101: 71..100 go again now
    assert (cursor.cosigned, cursor.start) == (70, 71)
    assert cursor.cosigned_at(60) is None  # not the first any more: S does not go back
    assert cursor.cosigned == 70
    assert cursor.cosigned_at(150) is None
    assert cursor.first_on_connection(150) == 151
    assert cursor.cosigned_at(150) is None  # in step: nothing again


def test_records_go_again_when_the_witness_does_not_move_and_the_wait_doubles() -> None:
    cursor = WitnessCursor()
    cursor.cosigned_at(80)
    # in step: nothing past the cosignature
    assert cursor.resend_from(acked=80, checkpoint=80, sent_all=True, now=0.0) is None
    # records past it but no checkpoint past it yet: the witness cannot cosign them
    assert cursor.resend_from(acked=90, checkpoint=80, sent_all=True, now=1.0) is None
    assert cursor.resend_from(acked=90, checkpoint=80, sent_all=True, now=100.0) is None
    # a checkpoint past it from t = 100 on
    assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=100.0) is None
    assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=109.9) is None
    assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=110.0) == 81
    # then 20 s, 40 s ... up to RESEND_MAX_S, counted from each resend
    waits = []
    now = 110.0
    for _ in range(8):
        wait = cursor.wait_s
        waits.append(wait)
        assert (
            cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=now + wait - 0.1) is None
        )
        assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=now + wait) == 81
        now += wait
    assert waits == [20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0, 300.0]
    assert RESEND_MAX_S == 300.0
    # the witness moves: the wait is back to 10 s, counted from when it is behind again
    assert cursor.cosigned_at(85) is None
    assert cursor.wait_s == RESEND_AFTER_S == 10.0
    assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=now + 1) is None
    assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=now + 10) is None
    assert cursor.resend_from(acked=90, checkpoint=90, sent_all=True, now=now + 11) == 86


def test_a_resend_waits_for_the_last_one_to_be_sent_whole() -> None:
    cursor = WitnessCursor()
    cursor.cosigned_at(10)
    assert cursor.resend_from(acked=5000, checkpoint=5000, sent_all=True, now=0.0) is None
    assert cursor.resend_from(acked=5000, checkpoint=5000, sent_all=True, now=10.0) == 11
    # a long log still going out: never started again from the top meanwhile
    assert cursor.resend_from(acked=5000, checkpoint=5000, sent_all=False, now=1000.0) is None
    assert cursor.resend_from(acked=5000, checkpoint=5000, sent_all=True, now=1000.0) == 11


def test_no_cosignature_known_is_zero_and_a_connection_counts_the_wait_anew() -> None:
    cursor = WitnessCursor()
    assert cursor.resend_from(acked=30, checkpoint=30, sent_all=True, now=0.0) is None
    assert cursor.resend_from(acked=30, checkpoint=30, sent_all=True, now=10.0) == 1
    cursor.first_on_connection(30)
    assert cursor.resend_from(acked=30, checkpoint=30, sent_all=True, now=10.0) is None
    assert cursor.resend_from(acked=30, checkpoint=30, sent_all=True, now=29.9) is None
    assert cursor.resend_from(acked=30, checkpoint=30, sent_all=True, now=30.0) == 1
