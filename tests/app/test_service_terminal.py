"""The service terminal: a real Unix socket in front of a real control loop over a real audit log.

The supervisor's authority is the physical key as the controller reads it; the grammar is
strict and bounded; a client that says nothing, or too much, holds up nobody; and the CLI
speaks it end to end, with its exit codes."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin
from support import SUPERVISOR, ScreenLog, opening
from support.rng_fakes import AUDITOR_KEY
from support.web import wait_until

from controller.app.adapters import NoShaker
from controller.app.appliance import Appliance, Options
from controller.app.loop import ControlLoop, Outcome, Ports
from controller.app.service import (
    MAX_REQUEST_BYTES,
    SOCKET_NAME,
    Request,
    RequestError,
    ServiceTerminal,
    ServiceTerminalError,
    TerminalUnavailable,
    parse_request,
    send_request,
    socket_path,
)
from controller.audit.log import DB_NAME, AuditLog
from controller.core.config import Config
from controller.core.dice import Roll
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.state import (
    Event,
    Fault,
    FaultRaised,
    Mode,
    Occurrence,
    RngMode,
    RoundMachine,
    RoundSettings,
    Screen,
    State,
    occurrence,
)
from controller.rng.session import RngPort, RngSessionManager
from drivers.safety import FaultLatch
from drivers.sim.hardware import SimPanel

WAIT_S = 60.0  # a bound on every wait; none is expected to come near it, even loaded


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose socket path fits sockaddr_un (107 bytes), whatever tmp_path's length."""
    path = Path(tempfile.mkdtemp(prefix="pgst-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


class Key:
    """The supervisor key switch, as the panel reports it."""

    def __init__(self) -> None:
        self.is_supervisor_key_on = False


class Lamps(ScreenLog):
    """The display and the panel, which also counts its lamp tests."""

    def __init__(self) -> None:
        super().__init__()
        self.lamp_tests = 0

    def lamp_test(self) -> None:
        self.lamp_tests += 1


class Table:
    """An RNG table (its rounds need no dice): the real loop in a thread of its own, its log in
    ``state_dir``, the service terminal on ``socket``; ``modes``: the others the supervisor may
    switch to ([table] modes)."""

    def __init__(
        self, state_dir: Path, socket_dir: Path, *, modes: tuple[Mode, ...] = (), **terminal: Any
    ) -> None:
        self.state_dir = state_dir
        self.log = AuditLog.open(state_dir)
        self.screens = Lamps()
        latch = FaultLatch()
        latch.register("lamps", self.screens.drive_safe)
        rng = RngSessionManager(
            state_dir=state_dir,
            log=self.log,
            table="t1",
            game=Game.TILES,
            mode=RngMode.POSITION,
            max_rounds=1000,
            records=[],
            escrow=AUDITOR_KEY,
        )
        ports = Ports(
            log=self.log,
            display=self.screens,
            panel=self.screens,
            shaker=NoShaker(),
            latch=latch,
            rng=RngPort(rng),
        )
        self.loop = ControlLoop(RoundMachine(RoundSettings(mode=Mode.RNG, modes=modes)), ports)
        self.loop.power_on(config=config_loaded_data(Config()))
        for occ in opening(self.loop.clock()):  # the tiles inspected (an RNG table needs no dice)
            self.loop.dispatch(occ)
        self.thread = threading.Thread(target=self.loop.run, name="control", daemon=True)
        self.thread.start()
        self.key = Key()
        self.socket = socket_dir / SOCKET_NAME
        self.terminal = ServiceTerminal(self.socket, loop=self.loop, key=self.key, **terminal)
        self.terminal.start()

    def step(self, event: Event) -> Outcome:
        """An event from the dealer's panel, waited for."""
        outcome = self.loop.submit(occurrence(event, at=self.loop.clock()))
        assert outcome.wait_for_step(WAIT_S)
        return outcome

    def to_result(self) -> None:
        self.step(Event.NO_MORE_BETS)
        self.step(Event.DICE_SET)  # 621a.11(i): the style settled, the RNG draws
        assert self.loop.machine.state is State.RESULT

    def kinds(self) -> list[str]:
        """The kinds of the records in the log now (read beside the writer, read-only)."""
        db = sqlite3.connect(f"file:{self.state_dir / DB_NAME}?mode=ro", uri=True)
        try:
            return [kind for (kind,) in db.execute("SELECT kind FROM records ORDER BY seq")]
        finally:
            db.close()

    def close(self) -> None:
        self.terminal.close()
        self.loop.stop()
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive()
        self.log.close()

    def records(self) -> dict[int, tuple[str, dict[str, Any]]]:
        """Every record by its sequence number (once closed)."""
        log = AuditLog.open(self.state_dir)
        try:
            return {r.seq: (r.kind, dict(r.data)) for r in log.records()}
        finally:
            log.close()


@pytest.fixture
def table(tmp_path: Path, short_dir: Path) -> Iterator[Table]:
    t = Table(tmp_path / "state", short_dir)
    yield t
    if t.thread.is_alive():
        t.close()


@pytest.fixture
def manual_too(tmp_path: Path, short_dir: Path) -> Iterator[Table]:
    """An RNG table whose supervisor may switch it to manual mode (its sensor is present)."""
    t = Table(tmp_path / "state", short_dir, modes=(Mode.MANUAL,))
    yield t
    if t.thread.is_alive():
        t.close()


def exchange(path: Path, data: bytes, *, shut_write: bool = False) -> dict[str, Any]:
    """Send raw bytes on one connection and read the one-line reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(WAIT_S)
        conn.connect(str(path))
        conn.sendall(data)
        if shut_write:
            conn.shutdown(socket.SHUT_WR)
        return read_reply(conn)


def read_reply(conn: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    assert data.count(b"\n") == 1, data
    reply = json.loads(data)
    assert isinstance(reply, dict)
    return reply


def request(table: Table, action: str, **fields: Any) -> dict[str, Any]:
    fields.setdefault("employee", SUPERVISOR)
    return send_request(table.socket, Request(action, **fields), timeout_s=WAIT_S)


def shown(table: Table) -> tuple[int, int]:
    """The (round, attempt) of the result on the display, as a supervisor names it."""
    ctx = table.loop.machine.context
    return ctx.round_number, ctx.attempt


# --- each command, with the key and without -------------------------------------------------


def test_a_missing_anchor_is_cleared_at_the_terminal_with_who_and_why(table: Table) -> None:
    """Issue 28: anchor_missing stays until a supervisor, the key on, names themselves and
    why; the clear is recorded with both and re-anchors the log as it is."""
    latched = table.loop.submit(
        FaultRaised(at=table.loop.clock(), fault=Fault.ANCHOR_MISSING, detail="gone")
    )
    assert latched.wait_for_step(WAIT_S)
    assert table.loop.machine.state is State.FAULT
    (table.state_dir / "log-anchor").unlink(missing_ok=True)
    table.key.is_supervisor_key_on = True
    refused = request(table, "clear_fault", employee="T0042")
    assert refused["ok"] is False
    assert "a note saying why" in refused["refused"]
    assert table.loop.machine.state is State.FAULT
    table.key.is_supervisor_key_on = False
    keyless = request(table, "clear_fault", employee="T0042", note="card repaired")
    assert keyless["ok"] is False
    table.key.is_supervisor_key_on = True
    cleared = request(table, "clear_fault", employee="T0042", note="card repaired")
    assert cleared["ok"] is True, cleared
    assert cleared["records"][0]["kind"] == "fault_cleared"
    assert table.loop.machine.state is State.IDLE
    assert (table.state_dir / "log-anchor").exists()  # the log as it is, its anchor again
    table.close()
    kind, data = table.records()[cleared["records"][0]["seq"]]
    assert kind == "fault_cleared"
    assert (data["faults"], data["employee"], data["note"]) == (
        ["anchor_missing"],
        "T0042",
        "card repaired",
    )


def test_each_command_with_the_key_on_is_recorded(table: Table) -> None:
    table.key.is_supervisor_key_on = True
    replaced = request(table, "dice_replaced", dice_set="B-0417")
    assert replaced["ok"] is True, replaced
    assert [r["kind"] for r in replaced["records"]] == ["dice_replaced"]
    numbered = request(table, "dice_replaced")  # the next number after a named set: "1"
    assert numbered["ok"] is True, numbered
    inspected = request(table, "shaker_inspected", note='lid, cup and tilt switch "ok"')
    assert inspected["ok"] is True, inspected
    assert [r["kind"] for r in inspected["records"]] == ["supervisor_action"]
    table.to_result()
    uncorrected = request(
        table, "correct_result", result=shown(table), dice=Roll(6, (6, 6)), reason="misread"
    )
    assert uncorrected["ok"] is False  # an RNG result is never corrected (nor redrawn)
    assert "never corrected or redrawn" in uncorrected["refused"]
    voided = request(
        table,
        "void_round",
        reason="patron_complaint",
        note="seat 3 saw a misdeal",
        round=shown(table)[0],
    )
    assert voided["ok"] is True, voided
    kinds = [r["kind"] for r in voided["records"]]
    assert kinds[0] == "void"  # the round ends without a result: never drawn again
    assert "result" not in kinds
    assert "rng_draw" not in kinds
    assert table.loop.machine.state is State.IDLE
    table.close()

    records = table.records()
    seq = replaced["records"][0]["seq"]
    assert records[seq][0] == "dice_replaced"
    assert records[seq][1]["dice_set"] == "B-0417"
    assert records[numbered["records"][0]["seq"]][1]["dice_set"] == "1"
    kind, data = records[inspected["records"][0]["seq"]]
    assert (kind, data["action"], data["detail"]) == (
        "supervisor_action",
        "shaker_inspected",
        'lid, cup and tilt switch "ok"',
    )
    kind, data = records[voided["records"][0]["seq"]]
    assert (kind, data["reason"], data["note"], data["employee"], data["wagers"]) == (
        "void",
        "patron_complaint",
        "seat 3 saw a misdeal",
        SUPERVISOR,
        "returned",
    )
    assert data["uid"] == os.getuid()  # the account that sent it, as the kernel says
    for record in voided["records"]:  # every record named in the reply is the log's
        assert records[record["seq"]][0] == record["kind"]
    assert table.terminal.counts["accepted"] == 5


def test_with_the_key_off_the_table_refuses_and_records_nothing(table: Table) -> None:
    table.to_result()
    before = table.kinds()
    for action, fields in (
        ("dice_replaced", {"dice_set": "C7"}),
        ("void_round", {"reason": "wrong_count", "round": shown(table)[0]}),
    ):
        reply = request(table, action, **fields)
        assert reply["ok"] is False, reply
        assert "supervisor key" in reply["refused"]
        assert reply["records"] == []
    assert table.kinds() == before
    table.step(Event.CLOSE_ROUND)
    before = table.kinds()
    reply = request(table, "shaker_inspected")
    assert reply["ok"] is False
    assert "supervisor key" in reply["refused"]
    assert table.kinds() == before


def test_mode_switch_service_mode_and_lamp_test_with_the_key_on(manual_too: Table) -> None:
    table = manual_too
    table.key.is_supervisor_key_on = True
    to_manual = request(table, "mode_switch", mode=Mode.MANUAL)
    assert to_manual["ok"] is True, to_manual
    assert "mode_changed" in [r["kind"] for r in to_manual["records"]]
    back = request(table, "mode_switch", mode=Mode.RNG)
    assert back["ok"] is True, back
    entered = request(table, "service_mode")
    assert entered["ok"] is True, entered
    assert entered["in_service"] is True
    assert [r["kind"] for r in entered["records"]] == ["service_mode"]
    lit = request(table, "lamp_test")
    assert lit == {"action": "lamp_test", "ok": True, "records": []}
    assert table.screens.lamp_tests == 2  # on entering service mode, and on the command
    left = request(table, "service_mode")
    assert left["ok"] is True, left
    assert left["in_service"] is False
    outside = request(table, "lamp_test")  # the lamp test is part of service mode
    assert outside["ok"] is False
    assert "service mode" in outside["refused"]
    assert table.screens.lamp_tests == 2
    table.close()

    records = table.records()
    changes = [
        records[r["seq"]][1]
        for reply in (to_manual, back)
        for r in reply["records"]
        if r["kind"] == "mode_changed"
    ]
    assert [(c["previous"], c["mode"]) for c in changes] == [("rng", "manual"), ("manual", "rng")]
    for reply, entered_ in ((entered, True), (left, False)):  # what the replies said
        kind, data = records[reply["records"][0]["seq"]]
        assert (kind, data["entered"]) == ("service_mode", entered_)
    assert table.terminal.counts["accepted"] == 6


def test_a_mode_the_table_does_not_allow_is_refused_with_the_tables_reason(table: Table) -> None:
    table.key.is_supervisor_key_on = True
    before = table.kinds()
    reply = request(table, "mode_switch", mode=Mode.SHAKER)  # [table] modes: none but rng
    assert reply["ok"] is False, reply
    assert reply["refused"] == "shaker mode is not allowed at this table ([table] modes)"
    assert reply["records"] == []
    assert table.kinds() == before


def test_the_new_commands_with_the_key_off_are_refused(manual_too: Table) -> None:
    table = manual_too
    before = table.kinds()
    for action, fields in (
        ("mode_switch", {"mode": Mode.MANUAL}),
        ("service_mode", {}),
        ("lamp_test", {}),
    ):
        reply = request(table, action, **fields)
        assert reply["ok"] is False, reply
        assert "supervisor key" in reply["refused"], reply
        assert reply["records"] == []
    table.key.is_supervisor_key_on = True
    assert request(table, "service_mode")["in_service"] is True
    table.key.is_supervisor_key_on = False
    in_service = table.kinds()
    lamps = table.screens.lamp_tests
    for action in ("lamp_test", "service_mode"):  # in service mode too
        reply = request(table, action)
        assert reply["ok"] is False, reply
        assert "supervisor key" in reply["refused"], reply
    assert table.screens.lamp_tests == lamps
    assert table.kinds() == in_service
    assert in_service[len(before) :] == ["service_mode"]


def test_the_client_cannot_claim_the_key(table: Table) -> None:
    """Only the key switch says who is the supervisor; a request that tries is outside the
    grammar."""
    before = table.kinds()
    reply = exchange(table.socket, b'{"action":"shaker_inspected","supervisor":true}\n')
    assert reply == {"ok": False, "error": "bad_request", "detail": reply["detail"]}
    assert "supervisor" in reply["detail"]
    assert table.kinds() == before


def test_an_action_the_state_does_not_allow_is_refused_with_the_reason(table: Table) -> None:
    table.key.is_supervisor_key_on = True
    before = table.kinds()
    reply = request(table, "void_round", reason="equipment", round=1)  # bets open
    assert reply["ok"] is False
    assert "void_round" in reply["refused"]
    assert "idle" in reply["refused"]
    assert table.kinds() == before


# --- the grammar ---------------------------------------------------------------------------------

_E = b'"employee":"S1021"'  # a line that is right but for what its name says names its employee
BAD_LINES = {
    "garbage": b"hello\n",
    "empty line": b"\n",
    "not ASCII": b'{"action":"shaker_inspected",' + _E + b',"note":"caf\xc3\xa9"}\n',
    "a control byte": b'{"action":"shaker_inspected",' + _E + b',"note":"a\x07b"}\n',
    "over-long": b'{"action":"shaker_inspected",' + _E + b',"note":"' + b"x" * 600 + b'"}\n',
    "no newline": b'{"action":"shaker_inspected",' + _E + b"}",
    "two lines": b'{"action":"shaker_inspected",' + _E + b'}\n{"action":"shaker_inspected"}\n',
    "CRLF": b'{"action":"shaker_inspected",' + _E + b"}\r\n",
    "unknown verb": b'{"action":"open_the_cash_box",' + _E + b"}\n",
    "no verb": b'{"note":"x"}\n',
    "no employee": b'{"action":"shaker_inspected"}\n',
    "an empty employee": b'{"action":"shaker_inspected","employee":""}\n',
    "an employee with a space": b'{"action":"shaker_inspected","employee":"S 1021"}\n',
    "an employee too long": b'{"action":"shaker_inspected","employee":"' + b"S" * 17 + b'"}\n',
    "an employee in other digits": b'{"action":"shaker_inspected","employee":"S\\u0663"}\n',
    "unknown key": b'{"action":"dice_replaced","colour":"red",' + _E + b"}\n",
    "key of another verb": b'{"action":"dice_replaced",' + _E + b',"reason":"misread"}\n',
    "keys out of order": b'{"reason":"misread","action":"void_round",' + _E + b',"round":"1"}\n',
    "spaces": b'{"action": "shaker_inspected", ' + _E + b"}\n",
    "duplicate key": b'{"action":"shaker_inspected","action":"dice_replaced",' + _E + b"}\n",
    "an array": b'["shaker_inspected"]\n',
    "a number": b'{"action":"dice_replaced",' + _E + b',"id":7}\n',
    "bad id": b'{"action":"dice_replaced",' + _E + b',"id":"a b"}\n',
    "empty id": b'{"action":"dice_replaced",' + _E + b',"id":""}\n',
    "long id": b'{"action":"dice_replaced",' + _E + b',"id":"' + b"A" * 17 + b'"}\n',
    "the gone void_result": b'{"action":"void_result",'
    + _E
    + b',"reason":"misread","result":"1.1"}\n',
    "a void's bad reason": b'{"action":"void_round",' + _E + b',"reason":"boredom","round":"1"}\n',
    "a void with the table's own reason": b'{"action":"void_round",'
    + _E
    + b',"reason":"dealer_key","round":"1"}\n',
    "a void without its reason": b'{"action":"void_round",' + _E + b',"round":"1"}\n',
    "a void without its round": b'{"action":"void_round",' + _E + b',"reason":"wrong_count"}\n',
    "a void of round 0": b'{"action":"void_round",'
    + _E
    + b',"reason":"wrong_count","round":"0"}\n',
    "a void of a signed round": b'{"action":"void_round",'
    + _E
    + b',"reason":"wrong_count","round":"+1"}\n',
    "a correction's void reason": b'{"action":"correct_result","dice":"1,2,3",'
    + _E
    + b',"reason":"wrong_count","result":"1.1"}\n',
    "a correction without dice": b'{"action":"correct_result",'
    + _E
    + b',"reason":"misread","result":"1.1"}\n',
    "a correction of a 7": b'{"action":"correct_result","dice":"7,2,3",'
    + _E
    + b',"reason":"misread","result":"1.1"}\n',
    "a correction of two dice": b'{"action":"correct_result","dice":"1,2",'
    + _E
    + b',"reason":"misread","result":"1.1"}\n',
    "a correction with spaces": b'{"action":"correct_result","dice":"1, 2, 3",'
    + _E
    + b',"reason":"misread","result":"1.1"}\n',
    "a correction in other digits": b'{"action":"correct_result","dice":"\\u0663,2,3",'
    + _E
    + b',"reason":"misread","result":"1.1"}\n',
    "a result without its attempt": b'{"action":"correct_result","dice":"1,2,3",'
    + _E
    + b',"reason":"misread","result":"1"}\n',
    "a result of round 0": b'{"action":"correct_result","dice":"1,2,3",'
    + _E
    + b',"reason":"misread","result":"0.1"}\n',
    "tiles without a set": b'{"action":"tiles_inspected","dealer":"D1",' + _E + b"}\n",
    "tiles without a dealer": b'{"action":"tiles_inspected",' + _E + b',"set":"T1"}\n',
    "tiles with a bad dealer": b'{"action":"tiles_inspected","dealer":"D-1",'
    + _E
    + b',"set":"T1"}\n',
    "a shuffle's bad reason": b'{"action":"tiles_shuffled",' + _E + b',"reason":"misread"}\n',
    "escaped newline in a note": b'{"action":"shaker_inspected",' + _E + b',"note":"a\\nb"}\n',
    "escaped non-ASCII": b'{"action":"shaker_inspected",' + _E + b',"note":"caf\\u00e9"}\n',
    "long note": b'{"action":"shaker_inspected",' + _E + b',"note":"' + b"n" * 121 + b'"}\n',
    "bad mode": b'{"action":"mode_switch",' + _E + b',"mode":"roulette"}\n',
    "mode in capitals": b'{"action":"mode_switch",' + _E + b',"mode":"RNG"}\n',
    "no mode": b'{"action":"mode_switch",' + _E + b"}\n",
    "mode of another verb": b'{"action":"service_mode",' + _E + b',"mode":"rng"}\n',
    "a note to a toggle": b'{"action":"service_mode",' + _E + b',"note":"x"}\n',
    "a lamp test with data": b'{"action":"lamp_test",' + _E + b',"on":"all"}\n',
    "a mode as a number": b'{"action":"mode_switch",' + _E + b',"mode":1}\n',
    "the toggle's state": b'{"action":"service_mode",' + _E + b',"entered":"true"}\n',
    "recall without a round": b'{"action":"recall",' + _E + b"}\n",
    "recall of round 0": b'{"action":"recall","back":"0",' + _E + b"}\n",
    "recall too far back": b'{"action":"recall","back":"12",' + _E + b"}\n",
    "recall in Arabic-Indic digits": b'{"action":"recall","back":"\\u0663",' + _E + b"}\n",
    "recall as a number": b'{"action":"recall","back":3,' + _E + b"}\n",
    "recall with a sign": b'{"action":"recall","back":"+3",' + _E + b"}\n",
    "leaving recall to a round": b'{"action":"recall_leave","back":"1",' + _E + b"}\n",
    "dice kept with an id": b'{"action":"dice_kept",' + _E + b',"id":"B-1"}\n',
}


def test_requests_outside_the_grammar_are_refused_and_never_become_events(table: Table) -> None:
    table.key.is_supervisor_key_on = True
    table.to_result()  # every action would be accepted here: only the grammar refuses them
    before = table.kinds()
    for name, line in BAD_LINES.items():
        # A burst of connections from one client may find the earlier ones' threads still
        # ending: "busy" is the terminal's answer then (counted apart), and the line is sent
        # again, a bounded number of times.
        for _ in range(50):
            reply = exchange(table.socket, line, shut_write=name == "no newline")
            if reply.get("error") != "busy":
                break
            time.sleep(0.01)
        assert reply["ok"] is False, name
        assert reply["error"] == "bad_request", (name, reply)
        assert isinstance(reply["detail"], str)
    assert table.kinds() == before
    assert table.terminal.counts["bad_request"] == len(BAD_LINES)
    assert table.terminal.counts["accepted"] == 0


def test_the_grammar_takes_what_the_client_writes() -> None:
    """What ``Request.encode`` writes, ``parse_request`` gives back, at the longest too."""
    longest = "~" * 120
    e = "S" * 16
    for request_ in (
        Request("dice_replaced", employee="S1"),
        Request("dice_replaced", employee=e, dice_set="Z" * 16),
        Request("shaker_inspected", employee=e, note=longest),
        Request(
            "correct_result",
            employee=e,
            result=(9, 2),
            dice=Roll(6, (1, 6)),
            reason="surveillance_review",
            note='\\"' * 60,
        ),
        Request("void_round", employee=e, round=9, reason="tile_exposed", note=longest),
        Request("tiles_inspected", employee=e, tile_set="T" * 16, dealer="D" * 16),
        Request("tiles_shuffled", employee=e),
        Request("tiles_shuffled", employee=e, reason="remix"),
        Request("shift_change", employee=e),
        Request("clear_fault", employee=e),
        Request("clear_fault", employee=e, note=longest),
        *(Request("mode_switch", employee=e, mode=mode) for mode in Mode),
        Request("service_mode", employee=e),
        Request("lamp_test", employee=e),
        Request("dice_kept", employee=e, note=longest),
        Request("recall", employee=e, back=1),
        Request("recall", employee=e, back=11),
        Request("recall_leave", employee=e),
    ):
        line = request_.encode()
        assert len(line) <= MAX_REQUEST_BYTES
        assert parse_request(line) == request_
    for wrong in (
        {"action": "void_round", "employee": e, "round": 1},  # a reason goes with it
        {"action": "shaker_inspected", "employee": e, "note": "é"},
        {"action": "shaker_inspected", "employee": "S-1"},
        {"action": "mode_switch", "employee": e},  # a mode goes with it
        {"action": "service_mode", "employee": e, "mode": Mode.RNG},
        {"action": "lamp_test", "employee": e, "note": "all of them"},
        {"action": "recall", "employee": e},  # the round recalled goes with it
        {"action": "recall_leave", "employee": e, "back": 1},
        {"action": "correct_result", "employee": e, "result": (1, 1), "reason": "misread"},
        {"action": "void_round", "employee": e, "round": 1, "reason": "rng_interrupted"},
    ):
        with pytest.raises(RequestError):
            Request(**wrong)  # type: ignore[arg-type]


def test_recall_from_the_terminal_shows_the_rounds_the_log_holds(table: Table) -> None:
    """AGCO 13.1.1: the display recalls rounds read from the log; entering and leaving are
    recorded, a step is not; the table takes no round while it recalls."""
    for _ in range(3):
        table.to_result()
        table.step(Event.CLOSE_ROUND)
    refused = request(table, "recall", back=1)  # the key is off
    assert refused["ok"] is False
    table.key.is_supervisor_key_on = True
    entered = request(table, "recall", back=2)
    assert entered["ok"] is True, entered
    assert [r["kind"] for r in entered["records"]] == ["supervisor_action"]
    screen, data, _ = table.screens.shown[-1]
    assert screen is Screen.RECALL
    assert data["back"] == 2
    assert data["count"] == 4  # rounds 1 to 4; round 4: bets open, nothing yet
    (recalled,) = data["rounds"]  # the round recalled alone: the screen stays small
    assert (recalled["round"], recalled["outcome"]) == (3, "closed")
    assert recalled["result"]["starting_position"]
    stepped = request(table, "recall", back=3)
    assert stepped == {"action": "recall", "ok": True, "records": []}
    assert table.step(Event.NO_MORE_BETS).refused is not None  # nothing changes meanwhile
    left = request(table, "recall_leave")
    assert left["ok"] is True, left
    assert table.screens.shown[-1][0] is Screen.READY
    table.close()
    actions = [d["action"] for k, d in table.records().values() if k == "supervisor_action"]
    assert actions == ["recall_entered", "recall_left"]


# --- clients that say nothing, or too much ---------------------------------------------------


def test_a_silent_client_times_out_without_holding_up_another(
    tmp_path: Path, short_dir: Path
) -> None:
    table = Table(tmp_path / "state", short_dir, read_timeout_s=3.0)
    try:
        table.key.is_supervisor_key_on = True
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
            silent.connect(str(table.socket))
            reply = request(table, "shaker_inspected", note="while another says nothing")
            assert reply["ok"] is True
            silent.setblocking(False)
            with pytest.raises(BlockingIOError):  # still waiting for its line: no reply yet
                silent.recv(1)
            silent.settimeout(WAIT_S)
            late = read_reply(silent)
        assert late["error"] == "timeout"
        assert table.terminal.counts["timeout"] == 1
    finally:
        table.close()


def test_a_flood_is_cut_at_the_limit_and_others_are_served(table: Table) -> None:
    table.key.is_supervisor_key_on = True
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as flood:
        flood.settimeout(WAIT_S)
        flood.connect(str(table.socket))
        flood.sendall(b"{" * 100_000)  # never a newline, and more than a line may be
        reply = request(table, "shaker_inspected")
        assert reply["ok"] is True
        cut = read_reply(flood)
    assert cut["error"] == "bad_request"


def test_more_clients_than_the_limit_are_told_busy(tmp_path: Path, short_dir: Path) -> None:
    table = Table(tmp_path / "state", short_dir, max_clients=2, read_timeout_s=2.0)
    silent = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    try:
        for conn in silent:
            conn.connect(str(table.socket))
        # Taken in turn by the one accepting thread: the two silent ones hold both places.
        busy = exchange(table.socket, Request("shaker_inspected", employee=SUPERVISOR).encode())
        assert busy["error"] == "busy"
        for conn in silent:
            conn.settimeout(WAIT_S)
            assert read_reply(conn)["error"] == "timeout"
        assert wait_until(lambda: table.terminal.clients == 0)  # the places are free again
        table.key.is_supervisor_key_on = True
        assert request(table, "shaker_inspected")["ok"] is True
    finally:
        for conn in silent:
            conn.close()
        table.close()


def test_the_table_that_does_not_answer_in_time_is_reported(
    tmp_path: Path, short_dir: Path
) -> None:
    """A stopped control loop never steps the action: the client hears so, bounded."""
    table = Table(tmp_path / "state", short_dir, answer_timeout_s=0.2)
    try:
        table.loop.stop()
        table.thread.join(timeout=WAIT_S)
        reply = request(table, "shaker_inspected")
        assert reply["error"] == "no_answer"
        assert "may still be recorded" in reply["detail"]
    finally:
        table.close()


# --- the socket file ---------------------------------------------------------------------------


class Stopped:
    clock = staticmethod(lambda: 0)

    def submit(self, occ: Occurrence) -> Outcome:
        return Outcome(occ)

    def withdraw(self, outcome: Outcome) -> None:
        return None


def test_the_socket_is_0660_replaces_a_stale_one_and_is_removed_on_close(short_dir: Path) -> None:
    path = short_dir / SOCKET_NAME
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a crash leaves the file behind
    stale.close()
    terminal = ServiceTerminal(path, loop=Stopped(), key=Key())
    terminal.start()
    try:
        info = path.lstat()
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o660
        assert info.st_uid == os.getuid()
    finally:
        terminal.close()
    assert not path.exists()
    terminal.close()  # twice is fine


def test_a_socket_another_controller_serves_is_never_taken_over(short_dir: Path) -> None:
    path = short_dir / SOCKET_NAME
    first = ServiceTerminal(path, loop=Stopped(), key=Key())
    first.start()
    try:
        second = ServiceTerminal(path, loop=Stopped(), key=Key())
        with pytest.raises(ServiceTerminalError, match="another controller serves"):
            second.start()
        second.close()
        assert stat.S_ISSOCK(path.lstat().st_mode)  # still the first one's
        assert not [p for p in short_dir.iterdir() if p.name.startswith(".ctl-")]
    finally:
        first.close()


def test_a_file_that_is_not_a_socket_is_an_error_naming_it(short_dir: Path) -> None:
    path = short_dir / SOCKET_NAME
    path.write_text("not a socket")
    terminal = ServiceTerminal(path, loop=Stopped(), key=Key())
    with pytest.raises(ServiceTerminalError, match=str(path)):
        terminal.start()
    assert path.read_text() == "not a socket"  # never removed
    terminal.close()


def test_the_socket_is_in_the_runtime_directory_else_the_state_directory() -> None:
    state = Path("/var/lib/paigow-controller")
    assert socket_path(state, {}) == state / SOCKET_NAME
    runtime = {"RUNTIME_DIRECTORY": "/run/paigow-controller"}
    assert socket_path(state, runtime) == Path("/run/paigow-controller/control.sock")


def test_no_controller_at_the_path_is_said_so(short_dir: Path) -> None:
    with pytest.raises(TerminalUnavailable, match="is paigow-controller running"):
        send_request(short_dir / SOCKET_NAME, Request("shaker_inspected", employee=SUPERVISOR))
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(short_dir / SOCKET_NAME))
    stale.close()
    with pytest.raises(TerminalUnavailable):  # a socket left by a crash: refused
        send_request(short_dir / SOCKET_NAME, Request("shaker_inspected", employee=SUPERVISOR))


def test_a_reply_nested_deeper_than_the_stack_is_outside_the_protocol(short_dir: Path) -> None:
    """Whatever listens at the socket answers [[[[... (within the reply's bound): the terminal
    says the answer is outside the protocol, never a RecursionError (exit 70)."""
    path = short_dir / SOCKET_NAME
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"[" * 8000 + b"]" * 8000 + b"\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        with pytest.raises(ServiceTerminalError, match="outside the protocol"):
            send_request(path, Request("shaker_inspected", employee=SUPERVISOR), timeout_s=WAIT_S)
        thread.join(timeout=WAIT_S)


# --- the command line, end to end ------------------------------------------------------------


def cli(*args: str, employee: str | None = SUPERVISOR) -> subprocess.CompletedProcess[str]:
    who = () if employee is None else ("--employee", employee)
    return subprocess.run(
        [sys.executable, "-m", "controller", "supervise", *args, *who],
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line(stderr: str) -> None:
    assert stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr


def test_the_command_line_end_to_end(table: Table) -> None:
    where = ("--socket", str(table.socket))
    refused = cli("dice-replaced", "--id", "D1", *where)  # the key is off
    assert refused.returncode == 1, refused
    assert "refused by the table" in refused.stderr
    assert "supervisor key" in refused.stderr
    assert_one_line(refused.stderr)

    table.key.is_supervisor_key_on = True
    done = cli("dice-replaced", "--id", "D1", *where)
    assert done.returncode == 0, done
    assert done.stdout.startswith("recorded: dice_replaced #")
    as_json = cli("shaker-inspected", "--note", "end of day", "--json", *where)
    assert as_json.returncode == 0, as_json
    reply = json.loads(as_json.stdout)
    assert reply["ok"] is True
    assert [r["kind"] for r in reply["records"]] == ["supervisor_action"]
    recalled = cli("recall", "--back", "1", *where)
    assert recalled.returncode == 0, recalled
    assert recalled.stdout.startswith("recorded: supervisor_action #")
    stepped = cli("recall", *where)  # back 1 again: a view, nothing recorded
    assert stepped.stdout == "done: the display shows the round recalled\n"
    assert cli("recall-leave", *where).returncode == 0

    kinds = table.kinds()
    for bad in (
        ("dice-replaced", "--id", "not an id"),
        ("void-result", "--reason", "misread", "--result", "1.1"),  # gone: a clear line
        ("void-round", "--reason", "boredom", "--round", "1"),
        ("void-round", "--round", "1"),
        ("void-round", "--reason", "wrong_count"),
        ("void-round", "--reason", "dealer_key", "--round", "1"),
        ("correct-result", "--result", "1.1", "--dice", "7,1,1", "--reason", "misread"),
        ("correct-result", "--result", "1.1", "--reason", "misread"),
        ("tiles-inspected", "--set", "T1"),
        ("shaker-inspected", "--note", "n" * 121),
        ("shaker-inspected", "--note", "caf\u00e9"),
        ("open-the-cash-box",),
        ("shaker-inspected", "--id", "A1"),
        ("dice-replaced", "--reason", "misread"),
        ("dice-replaced", "--socket", "a\nb"),
        ("recall", "--back", "0"),
        ("recall", "--back", "12"),
        ("recall", "--back", "\u0663"),
        ("recall-leave", "--back", "2"),
        ("dice-kept", "--back", "1"),
    ):
        assert_usage_error(cli(*bad, *where), bad)
    assert table.kinds() == kinds
    for who in ("", "S 1", "S" * 17):
        assert_usage_error(cli("shaker-inspected", *where, employee=who), who)
    assert_usage_error(cli("shaker-inspected", *where, employee=None), "no --employee")
    gone = cli("void-result", "--result", "1.1", "--reason", "misread", *where)
    assert "correct-result" in gone.stderr and "void-round" in gone.stderr  # noqa: PT018

    table.close()
    missing = cli("shaker-inspected", *where)
    assert missing.returncode == 69, missing
    assert "no controller answers" in missing.stderr
    assert_one_line(missing.stderr)
    by_state_dir = cli("shaker-inspected", "--state-dir", str(table.socket.parent / "nowhere"))
    assert by_state_dir.returncode == 69


def test_the_new_commands_on_the_command_line(manual_too: Table) -> None:
    table = manual_too
    where = ("--socket", str(table.socket))
    refused = cli("mode-switch", "--to", "manual", *where)  # the key is off
    assert refused.returncode == 1, refused
    assert "supervisor key" in refused.stderr
    assert_one_line(refused.stderr)

    table.key.is_supervisor_key_on = True
    switched = cli("mode-switch", "--to", "manual", *where)
    assert switched.returncode == 0, switched
    assert switched.stdout.startswith("recorded: mode_changed #")
    not_allowed = cli("mode-switch", "--to", "shaker", *where)
    assert not_allowed.returncode == 1, not_allowed
    assert "shaker mode is not allowed at this table" in not_allowed.stderr
    assert_one_line(not_allowed.stderr)
    entered = cli("service-mode", *where)
    assert entered.returncode == 0, entered
    assert entered.stdout.startswith("recorded: service_mode #")
    assert entered.stdout.endswith("; the table is now in service mode\n")
    lit = cli("lamp-test", *where)
    assert lit.returncode == 0, lit
    assert lit.stdout == "done: every lamp is lit until the next screen\n"
    left = cli("service-mode", "--json", *where)
    assert left.returncode == 0, left
    assert json.loads(left.stdout)["in_service"] is False
    outside = cli("lamp-test", *where)
    assert outside.returncode == 1, outside
    assert "service mode" in outside.stderr

    kinds = table.kinds()
    for bad in (
        ("mode-switch",),
        ("mode-switch", "--to", "roulette"),
        ("mode-switch", "--to", "RNG"),
        ("mode-switch", "--to", "rng", "--note", "x"),
        ("service-mode", "--to", "rng"),
        ("service-mode", "--note", "x"),
        ("lamp-test", "--note", "all"),
        ("lamp-test", "--reason", "misread"),
        ("lamp-test", "--id", "A1"),
    ):
        assert_usage_error(cli(*bad, *where), bad)
    assert table.kinds() == kinds


def assert_usage_error(usage: subprocess.CompletedProcess[str], args: object) -> None:
    """A bad argument: exit 2, one line on stderr, nothing on stdout."""
    assert usage.returncode == 2, (args, usage)
    assert usage.stdout == ""
    assert_one_line(usage.stderr)


def test_help_has_a_description_and_an_example() -> None:
    out = cli("correct-result", "--help")
    assert out.returncode == 0
    assert "supervisor key" in out.stdout
    assert "examples:" in out.stdout
    assert "--reason" in out.stdout
    assert "--employee" in out.stdout
    assert "supervise correct-result --result 30.1 --dice 4,2,3" in out.stdout
    assert "supervise void-round --round 30 --reason tile_exposed" in out.stdout
    assert "supervise mode-switch --to rng" in out.stdout
    assert "supervise service-mode" in out.stdout
    assert "supervise lamp-test" in out.stdout


# --- the appliance ------------------------------------------------------------------------------


RNG_TABLE = dataclasses.replace(
    Config(),
    table=dataclasses.replace(Config().table, mode=Mode.RNG, name="t9"),
    rng=dataclasses.replace(Config().rng, escrow_public_key=AUDITOR_KEY.text),
)


def test_the_appliance_serves_the_terminal_with_the_panels_key(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started with the appliance, in the state directory without systemd's runtime one, with
    the real panel's key switch on mock pins; closed (and the socket gone) with it."""
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    factory = MockFactory(pin_class=MockPWMPin)
    panel = SimPanel(factory, RNG_TABLE.pins)
    appliance = Appliance(
        RNG_TABLE, Options(pin_factory=factory, state_dir=short_dir, web_display=False)
    )
    runner = threading.Thread(target=appliance.run, name="appliance", daemon=True)
    try:
        appliance.start()
        runner.start()
        path = short_dir / SOCKET_NAME
        assert stat.S_ISSOCK(path.lstat().st_mode)
        inspect = Request("shaker_inspected", employee=SUPERVISOR, note="ok")
        refused = send_request(path, inspect, timeout_s=WAIT_S)
        assert "supervisor key" in refused["refused"]
        panel.turn_supervisor_key(True)
        io = appliance.table_io
        assert io is not None
        assert wait_until(lambda: io.panel.is_supervisor_key_on)  # the switch's input settles
        reply = send_request(path, inspect, timeout_s=WAIT_S)
        assert reply["ok"] is True, reply
    finally:
        appliance.stop()
        runner.join(timeout=WAIT_S)
        appliance.close()
        factory.close()
    assert not (short_dir / SOCKET_NAME).exists()
