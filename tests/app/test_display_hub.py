"""The display hub without servers: its messages as the page receives them, and a live client
that falls behind (its socket's buffer full) losing nothing."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.core import canonical
from controller.core.dealing import DeliveryStyle
from controller.core.records import RecordKind, StoredRecord
from controller.core.state import LidClosed, LidOpened, NoMoreBets, Refusal, Screen, occurrence
from controller.display import events
from controller.display.events import (
    PLAYER_FAULT_OTHER,
    PLAYER_FAULTS,
    PLAYER_REFUSAL_OTHER,
    PLAYER_REFUSALS,
    _jsonable,
    jsonable,
    player_refusal,
)
from controller.display.hub import DisplayHub
from controller.errors import ClientNotReading
from controller.ports import LoggedCheckpoint
from controller.web.sse import sse

RESULT = {
    "dice": [{"colour": "red", "face": 3}, {"colour": "blue", "face": 4}],
    "total": 7,
    "count": 7,
    "starting_position": "bank",
    "bank": 2,
}


def _record(seq: int, kind: RecordKind, data: dict[str, object]) -> StoredRecord:
    entry = {"seq": seq, "kind": str(kind), "time": "t", "prev": "0" * 64, "data": data}
    return StoredRecord(seq, str(kind), canonical.encode(entry))


def test_each_message_is_its_payload_as_one_server_sent_event() -> None:
    """Messages with the board are serialised from cells kept serialised: the bytes must be
    those of the whole payload serialised at once."""
    hub = DisplayHub(table="table-ü")
    trend = [{"seq": 2, "round": 1, "count": 7, "total": 7, "dice": [], "void": False}]
    hub.seed(trend=trend, commitment={"commitment": "ab", "session": "s1", "seq": 1}, last_seq=2)
    hub.publish(Screen.READY, {"round": 2}, 3)
    for round_number in range(2, 25):
        hub.publish(Screen.RESULT, {"round": round_number, "result": RESULT}, round_number * 2)
        hub.publish(Screen.REFUSED, {"reason": "not now", "event": "close_round"}, None)
    checkpoint = LoggedCheckpoint(60, "note")
    hub.committed([_record(60, RecordKind.VOID, {"round": 24})], checkpoint)  # a board event
    hub.publish(Screen.READY, {"round": 25, "note": "«ünïcode»"}, 60)
    messages, _ = hub.wait_messages(0, 0)
    assert {m.event for m in messages} == {"screen", "notice", "board"}
    for message in messages:
        event_id = None if message.event_id is None else str(message.event_id)
        assert message.sse == sse(message.event, message.payload, event_id)
    board = json.loads(messages[-2].sse.split(b"data: ", 1)[1])
    assert board["trend"][-1]["round"] == 24
    assert board["trend"][-1]["void"] is True


def test_a_live_feed_client_that_falls_behind_gets_every_line_in_order() -> None:
    hub = DisplayHub()
    hub.seed(trend=[], commitment=None, last_seq=0)
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client = hub.go_live_feed(ours, 1)
    assert client is not None
    count = 60
    for seq in range(1, count + 1):  # far more than the socket's buffer holds
        hub.committed(
            [_record(seq, RecordKind.NO_ROLL, {"pad": "x" * 500})], LoggedCheckpoint(seq, "n")
        )
    assert not client.is_live
    assert client.backlog
    hub.stay_live(client, lambda: 60.0)  # at once: it is live no more

    received: list[int] = []

    def read() -> None:
        with theirs.makefile("rb") as lines:
            while len(received) < count and (line := lines.readline()):
                received.append(json.loads(line)["seq"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ours.settimeout(5)
    ours.sendall(client.backlog)  # as the feed's handler does, then it catches up
    caught_up = hub.lines_from(client.position)
    assert caught_up is not None
    ours.sendall(b"".join(caught_up))
    reader.join(timeout=5)
    assert received == list(range(1, count + 1))
    ours.close()
    theirs.close()


def test_a_result_shown_again_is_one_cell_of_the_trend() -> None:
    hub = DisplayHub()
    result = {"count": 7, "total": 7, "dice": {"red": 1, "blue": [2, 4]}, "bank": "dealer"}
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": result}, 10)
    hub.publish(Screen.FAULT, {"faults": ["tamper"]}, 11)
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": result}, 12)  # cleared
    assert [(e["round"], e["attempt"]) for e in hub.snapshot()[1]["trend"]] == [(1, 1)]
    # a test result in service mode is not a cell at all
    hub.publish(Screen.RESULT, {"round": 2, "attempt": 1, "result": result, "service": True}, 20)
    assert len(hub.snapshot()[1]["trend"]) == 1


def test_an_older_logs_voided_result_keeps_its_cell_marked_beside_the_next_attempt() -> None:
    """Logs in the field hold results voided and their rounds played again (nothing writes
    them now): the voided attempt keeps its cell, marked void, its dice still shown."""
    hub = DisplayHub()
    result = {"count": 7, "total": 7, "dice": {"red": 1, "blue": [2, 4]}, "bank": "dealer"}
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": result}, 10)
    voided = {"round": 1, "attempt": 1, "reason": "misread"}
    hub.committed([_record(13, RecordKind.RESULT_VOIDED, voided)], LoggedCheckpoint(13, "note"))
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 2, "result": result}, 17)
    trend = hub.snapshot()[1]["trend"]
    assert [(e["attempt"], e["void"], e["dice"]) for e in trend] == [
        (1, True, result["dice"]),
        (2, False, result["dice"]),
    ]
    assert hub.snapshot()[1]["interventions"] == []  # not a correction, nor a round's void


READ = {"red": 3, "blue": [4, 5]}
SEEN = {"red": 3, "blue": [4, 6]}
CORRECTED = {
    "count": 13,
    "total": 13,
    "dice": SEEN,
    "bank": "dealer",
    "starting_position": "seat 4",
}


def correction(seq: int, round_number: int) -> StoredRecord:
    """A ``result_corrected`` record as the core writes it."""
    data = {
        "round": round_number,
        "attempt": 1,
        "dice_read": READ,
        "dice_seen": SEEN,
        "reason": "misread",
        "employee": "S100",
        "note": "seat 3 saw it",
        "result": CORRECTED,
    }
    return _record(seq, RecordKind.RESULT_CORRECTED, data)


def void(seq: int, round_number: int, reason: str = "tile_exposed") -> StoredRecord:
    data = {
        "round": round_number,
        "attempt": 1,
        "state": "result",
        "reason": reason,
        "wagers": "returned",
        "reshuffle": True,
        "note": "",
        "employee": "S100",
    }
    return _record(seq, RecordKind.VOID, data)


def test_a_correction_takes_its_results_place_on_the_board_marked() -> None:
    """N.J.A.C. 13:69E-1.28P(d): the result corrected to the dice as they lie stands in the
    place of the one first read, marked corrected; the supervisor's list names who did it.
    The record and the screen shown again after it agree: one cell."""
    hub = DisplayHub()
    read = {"count": 12, "total": 12, "dice": READ, "bank": "dealer", "starting_position": "seat 3"}
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": RESULT}, 5)
    hub.publish(Screen.RESULT, {"round": 2, "attempt": 1, "result": read}, 10)
    hub.committed([correction(11, 2)], LoggedCheckpoint(11, "note"))
    corrected = {"dice_read": READ, "reason": "misread", "employee": "S100"}
    hub.publish(
        Screen.RESULT, {"round": 2, "attempt": 1, "result": CORRECTED, "corrected": corrected}, 11
    )
    messages, _ = hub.wait_messages(0, 0)
    assert [m.event for m in messages] == ["screen", "screen", "board", "screen"]
    _, view, _ = hub.snapshot()
    assert [(c["round"], c["total"], c["corrected"]) for c in view["trend"]] == [
        (1, 7, False),
        (2, 13, True),
    ]
    assert view["trend"][1]["dice"] == SEEN
    assert view["trend"][1]["starting_position"] == "seat 4"
    (shown,) = view["interventions"]
    assert shown == {
        "kind": "correction",
        "seq": 11,
        "time": "t",
        "round": 2,
        "attempt": 1,
        "reason": "misread",
        "employee": "S100",
        "note": "seat 3 saw it",
        "dice_read": READ,
        "dice_seen": SEEN,
        "total": 13,
    }
    # the result shown again after a restart is the corrected one, and the same cell
    hub.publish(
        Screen.RESULT, {"round": 2, "attempt": 1, "result": CORRECTED, "corrected": corrected}, 30
    )
    assert len(hub.snapshot()[1]["trend"]) == 2


def test_a_void_round_is_void_on_the_board_with_wagers_returned_never_a_result() -> None:
    """621a.12(c),(e): a round void after its result shows none of it (not its dice, total or
    first hand); a round void before a result has a cell of its own; every wager returned."""
    hub = DisplayHub()
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": RESULT}, 5)
    hub.publish(Screen.RESULT, {"round": 2, "attempt": 1, "result": RESULT}, 8)
    hub.committed([void(9, 2)], LoggedCheckpoint(9, "note"))
    hub.committed([void(12, 3, reason="dealer_key")], LoggedCheckpoint(12, "note"))
    hub.committed([void(12, 3, reason="dealer_key")], LoggedCheckpoint(12, "note"))  # again
    trend = hub.snapshot()[1]["trend"]
    assert [(c["round"], c["void"], c["wagers_returned"]) for c in trend] == [
        (1, False, False),
        (2, True, True),
        (3, True, True),
    ]
    for cell in trend[1:]:
        assert (cell["dice"], cell["total"], cell["count"], cell["starting_position"]) == (
            None,
            None,
            None,
            None,
        )
    # the void's round is never shown as a result again
    hub.publish(Screen.RESULT, {"round": 2, "attempt": 1, "result": RESULT}, 20)
    assert hub.snapshot()[1]["trend"][1]["wagers_returned"] is True
    shown = hub.snapshot()[1]["interventions"]
    assert [(i["kind"], i["round"], i["reason"], i["employee"]) for i in shown] == [
        ("void", 2, "tile_exposed", "S100"),
        ("void", 3, "dealer_key", "S100"),
    ]
    assert shown[0]["reshuffle"] is True


def test_the_snapshot_keeps_the_last_statistics_dice_tiles_and_meters_a_screen_carried() -> None:
    """Issue 15: bets open carries the dice's statistics and the set, the set of tiles and the
    meters, the screens after it do not; a page that connects in between is given them with
    the snapshot. An RNG table has no dice: no statistics, no dice set; its tiles and meters
    stay."""
    hub = DisplayHub()
    kept = ("stats", "dice", "tiles", "meters")
    assert {k: hub.snapshot()[1][k] for k in kept} == dict.fromkeys(kept)
    stats = {"shift": {"red": [1, 0, 0, 0, 0, 0]}, "alarm": None}
    dice = {"set": "D-7", "warning": None}
    tiles = {"set": "T1", "warning": None}
    meters = {"games": 4, "corrections": 1}
    ready = {"round": 3, "mode": "shaker", "stats": stats, "dice": dice, "tiles": tiles}
    hub.publish(Screen.READY, {**ready, "meters": meters}, 4)
    hub.publish(Screen.BETS_CLOSED, {"round": 3, "dice": {"set": "D-7", "warning": "23 h"}}, 5)
    hub.publish(Screen.RESULT, {"round": 3, "attempt": 1, "result": RESULT}, 6)
    hub.publish(Screen.REFUSED, {"reason": "not now", "stats": None, "mode": "rng"}, None)
    view = hub.snapshot()[1]
    assert view["current"]["screen"] == "result"
    assert view["stats"] == stats
    assert view["dice"] == {"set": "D-7", "warning": "23 h"}
    assert (view["tiles"], view["meters"]) == (tiles, meters)
    newer = {"shift": {"red": [1, 1, 0, 0, 0, 0]}, "alarm": None}
    hub.publish(Screen.READY, {"round": 4, "mode": "shaker", "stats": newer, "dice": dice}, 7)
    assert hub.snapshot()[1]["stats"] == newer
    hub.publish(Screen.READY, {"round": 5, "mode": "rng", "tiles": tiles}, 9)  # the RNG
    view = hub.snapshot()[1]
    assert (view["stats"], view["dice"]) == (None, None)
    assert (view["tiles"], view["meters"]) == (tiles, meters)


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**60), 2**60)
        | st.text(max_size=6)
        | st.sampled_from(
            [Screen.RESULT, DeliveryStyle.JUNG_QUAT, 1.5, "\ud800", frozenset({2, 1})]
        ),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(
                st.text(max_size=3) | st.sampled_from([Screen.READY, 7]), inner, max_size=3
            )
        ),
        max_leaves=10,
    )
)
def test_a_screens_data_is_made_plain_alike_by_both_paths(value: object) -> None:
    """jsonable's quick path (the json module's C encoder and decoder, for plain data) gives
    what the reference walk gives."""
    assert jsonable(value) == _jsonable(value)


def test_a_live_pages_heartbeat_is_made_outside_the_hubs_lock_and_sent() -> None:
    """Issue 16: a page's heartbeat carries the clock, read (the time, the OS's clock status)
    with the hub's lock released; the control thread is never kept waiting on it."""
    hub = DisplayHub()
    hub.seed(trend=[], commitment=None, last_seq=0)
    ours, theirs = socket.socketpair()
    client = hub.go_live_page(ours, 0)
    assert client is not None
    made: list[bool] = []

    def beat() -> bytes:
        free = hub._lock.acquire(blocking=False)
        if free:
            hub._lock.release()
        made.append(free)
        if len(made) == 2:
            hub.close()  # stay_live returns after this heartbeat
        return sse("heartbeat", {"now_ms": len(made)})

    stayer = threading.Thread(
        target=hub.stay_live, args=(client, lambda: 0.0), kwargs={"page_heartbeat": beat}
    )
    stayer.start()
    stayer.join(timeout=20)
    assert not stayer.is_alive()
    assert made == [True, True]
    theirs.settimeout(5)
    received = b""
    while received.count(b"\n\n") < 1:
        received += theirs.recv(65536)
    assert received.startswith(sse("heartbeat", {"now_ms": 1}))
    assert sse("heartbeat", {"now_ms": 2}) not in received  # made, but the hub had closed
    ours.close()
    theirs.close()


def test_a_live_client_found_not_reading_ends_its_live_state_with_that_error() -> None:
    """stay_live looks at the client (clients.UnreadWatch.check) at each wake: what the look
    raises ends the live state as the client's error, and the control thread sends to it no
    more."""
    hub = DisplayHub()
    hub.seed(trend=[], commitment=None, last_seq=0)
    ours, theirs = socket.socketpair()
    client = hub.go_live_feed(ours, 1)
    assert client is not None
    looks: list[int] = []

    def check() -> None:
        looks.append(len(looks))
        if len(looks) == 3:
            raise ClientNotReading("nothing read for 10 s")

    stayer = threading.Thread(
        target=hub.stay_live, args=(client, lambda: 0.01), kwargs={"check": check}
    )
    stayer.start()
    stayer.join(timeout=20)
    assert not stayer.is_alive()
    assert looks == [0, 1, 2]
    assert isinstance(client.error, ClientNotReading)
    assert not client.is_live
    assert hub._live_feeds == []
    hub.close()
    ours.close()
    theirs.close()


# --- the players' stream ----------------------------------------------------------------------

ASSETS = Path(__file__).resolve().parents[2] / "controller" / "display" / "assets"
CITATION = re.compile(r"\b(?:621a|645a)\.|N\.J\.A\.C\.|NYCRR|13:69E")
MACHINE_WORDS = re.compile(r"\b(?:state|event|alarm|supervisor)\b|[a-z]+_[a-z_]+", re.I)


def test_every_refusal_has_a_players_message_in_both_languages_in_plain_words() -> None:
    """Each stable refusal code of the core (controller/core/state.py ``Refusal``) chooses one
    of the players' messages, and each of those is in English and Traditional Chinese, with no
    state or event name, no identifier, no mention of the supervisor's alarm, no rule."""
    catalogue = json.loads((ASSETS / "messages.json").read_text(encoding="utf-8"))
    assert set(PLAYER_REFUSALS) == set(Refusal)
    shown = {*PLAYER_REFUSALS.values(), PLAYER_REFUSAL_OTHER}
    for language in ("en", "zh-Hant"):
        for code in shown:
            words = catalogue[language][f"refused.{code}"]
            assert MACHINE_WORDS.findall(words) == [], (language, code, words)
    for fault_kind in {*PLAYER_FAULTS.values(), PLAYER_FAULT_OTHER}:
        assert catalogue["zh-Hant"][f"player_fault.{fault_kind}"]
    assert player_refusal({"reason": "event tick is not allowed in state idle"}) == "no_change"
    assert player_refusal({"code": "lid_open", "reason": "close the lid"}) == "close_lid"


def test_no_message_of_the_catalogue_cites_a_rule() -> None:
    """Rule citations are the supervisor's and surveillance's (their views and the log): the
    catalogue the players' page reads words every message without them."""
    catalogue = json.loads((ASSETS / "messages.json").read_text(encoding="utf-8"))
    cited = {
        f"{language}:{key}": text
        for language, table in catalogue.items()
        for key, text in table.items()
        if CITATION.search(text)
    }
    assert cited == {}


def _players_messages(hub: DisplayHub) -> list[dict[str, Any]]:
    messages, _ = hub.wait_messages(0, 0)
    out = []
    for message in messages:
        body = message.players_sse.decode().split("data: ", 1)[1]
        out.append(json.loads(body))
    return out


def test_the_players_statistics_count_every_result_once_and_no_test_round() -> None:
    """The core's counts come with bets open; each result of the dice after them is counted at
    once in the players' stream (the same result shown again, a test round of service mode and
    the RNG's number are not), until the next counts replace them."""
    hub = DisplayHub()
    zero = {"red": [0] * 6, "blue": [0] * 6, "total": [0] * 16}
    stats = {"shift": zero, "monitor": {"rolls": 0}, "alarm": None}
    hub.publish(Screen.READY, {"round": 1, "mode": "shaker", "stats": stats}, 1)
    red3 = {"total": 12, "dice": {"red": 3, "blue": [4, 5]}}
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": red3}, 2)
    hub.publish(Screen.RESULT, {"round": 1, "attempt": 1, "result": red3}, 2)  # again
    hub.publish(Screen.RESULT, {"round": 2, "attempt": 1, "result": red3, "service": True}, 3)
    rng = {"count": 6, "dice": None}
    hub.publish(Screen.RESULT, {"round": 3, "attempt": 1, "result": rng}, 4)
    shown = [m["data"].get("stats") for m in _players_messages(hub) if m.get("screen")]
    once = {
        "red": [0, 0, 1, 0, 0, 0],
        "blue": [0, 0, 0, 1, 1, 0],
        "total": [0] * 9 + [1] + [0] * 6,  # 12
    }
    assert shown == [{"shift": zero}, *[{"shift": once}] * 4]
    assert hub.snapshot(players=True)[1]["stats"] == {"shift": once}
    assert hub.snapshot()[1]["stats"] == stats  # the supervisor's: the core's own
    newer = {**stats, "shift": once}
    hub.publish(Screen.READY, {"round": 4, "mode": "shaker", "stats": newer}, 5)
    hub.publish(Screen.RESULT, {"round": 4, "attempt": 1, "result": red3}, 6)
    assert hub.snapshot(players=True)[1]["stats"]["shift"]["red"] == [0, 0, 2, 0, 0, 0]


def _screens(prepare: bool, monkeypatch: Any) -> tuple[list[tuple[bytes, bytes]], int]:
    """A hub shown a sequence of screens (each result, a no roll and a fault ``prepare``d
    first when asked, and one prepared for data it is not shown: an equal copy); its messages'
    bytes in both streams, and how many screens' bodies were made (prepared or shown)."""
    made = [0]
    real_body = events.screen_body

    def counting(screen: Any, data: Any) -> Any:
        made[0] += 1
        return real_body(screen, data)

    monkeypatch.setattr(events, "screen_body", counting)
    hub = DisplayHub(table="t")
    zero = {"red": [0] * 6, "blue": [0] * 6, "total": [0] * 16}
    hub.publish(Screen.READY, {"round": 1, "stats": {"shift": zero}}, 1)
    for number in range(1, 6):
        red = {**RESULT, "dice": {"red": number, "blue": [2, 6]}, "faults": ["sensor"]}
        shown = [
            (Screen.NO_ROLL, {"round": number, "reason": "not_flat", "employee": "E1"}),
            (Screen.RESULT, {"round": number, "attempt": 2, "result": red, "bank": "dealer"}),
            (Screen.FAULT, {"faults": ["storage", "sensor"], "round": number}),
        ]
        for screen, data in shown:
            if prepare:
                hub.prepare(screen, data)
            hub.publish(screen, data, number * 3)
        copy = {"round": number, "note": "an equal copy"}
        if prepare:
            hub.prepare(Screen.READY, copy)
        hub.publish(Screen.READY, dict(copy), number * 3 + 1)
    messages, _ = hub.wait_messages(0, 0)
    return [(m.sse, m.players_sse) for m in messages], made[0]


def test_a_screen_prepared_ahead_is_sent_as_the_same_bytes_and_only_for_its_own_data(
    monkeypatch: Any,
) -> None:
    """A screen decided ahead has its bodies made before it is shown (``prepare``): its
    messages, in the supervisor's stream and the players', are byte for byte those of the
    screen made when shown; and the bodies are taken only for the very data they were made
    of (an equal copy's are made again)."""
    plain, made_plain = _screens(False, monkeypatch)
    prepared, made_prepared = _screens(True, monkeypatch)
    assert prepared == plain
    assert made_plain == 1 + 5 * 4
    # each prepared once and not made again when shown, but the copies: made again
    assert made_prepared == 1 + 5 * 4 + 5


def test_the_core_s_refusals_carry_their_stable_code_beside_the_operator_s_words() -> None:
    """controller/core/state.py: a refused key's screen says why in the operator's words (the
    log, the supervisor's view) and by a stable code (the players' message is chosen by it)."""
    from dataclasses import replace

    from support.display_table import OPENED, WALL

    from controller.core.state import Event, RoundMachine, RoundSettings

    def refused(machine: RoundMachine, event: Event, **data: object) -> dict[str, object]:
        actions = machine.handle(occurrence(event, at=1, wall=WALL, **data))
        (shown,) = [a for a in actions if a.screen is Screen.REFUSED]
        return dict(shown.data)

    machine = RoundMachine(RoundSettings(), replace(OPENED, dice_set=None, dice_since_table=None))
    machine.handle(LidClosed(at=0, wall=WALL))
    machine.handle(NoMoreBets(at=0, wall=WALL))
    dice = refused(machine, Event.SHAKE_PRESSED)
    assert dice["code"] == Refusal.DICE_MISSING
    assert "no dice set is recorded" in str(dice["reason"])
    assert player_refusal(dice) == "not_ready"
    key = refused(machine, Event.SERVICE_MODE, employee="S1")
    assert key["code"] == Refusal.SUPERVISOR_KEY
    assert player_refusal(key) == "no_change"
    machine.handle(LidOpened(at=2, wall=WALL))
    lid = refused(machine, Event.SHAKE_PRESSED)
    assert (lid["code"], player_refusal(lid)) == (Refusal.LID_OPEN, "close_lid")
