"""The delay before a shake's motor starts (issue 14): drawn by the shell from the OS CSPRNG
over the configured range, put on the press, recorded with the shake."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from support import OPENED

from controller.app.appliance import draw_shake_delay
from controller.app.loop import ControlLoop, Ports
from controller.audit.log import DB_NAME, AuditLog
from controller.core.config import RoundConfig
from controller.core.state import Event, RoundMachine, RoundSettings, State, occurrence
from drivers.sim.hardware import StillTable


def test_the_delay_is_drawn_over_the_whole_range_and_no_further() -> None:
    config = RoundConfig(shake_delay_min_ms=3, shake_delay_max_ms=5)
    drawn = {draw_shake_delay(config) for _ in range(300)}
    assert drawn == {3, 4, 5}  # a miss has odds of 3 * (2/3)**300
    assert {draw_shake_delay(replace(config, shake_delay_max_ms=3)) for _ in range(20)} == {3}


def test_the_loop_puts_the_drawn_delay_on_the_press_and_the_shake_records_it(
    tmp_path: Path,
) -> None:
    table = StillTable()
    log = AuditLog.open(tmp_path)
    now = [0]
    loop = ControlLoop(
        RoundMachine(RoundSettings(), OPENED),
        Ports(log=log, display=table, panel=table, shaker=table, latch=table, sensor=table),
        clock=lambda: now[0],
        shake_delay=lambda: 321,
    )

    def send(event: Event, advance: int = 10, **data: Any) -> None:
        now[0] += advance
        loop.dispatch(occurrence(event, at=now[0], **data))

    for event in (Event.LID_CLOSED, Event.NO_MORE_BETS, Event.SHAKE_PRESSED):
        send(event)
    assert loop.machine.state is State.WAITING
    assert loop.machine.context.deadline == now[0] + 321
    send(Event.SHAKE_PRESSED, advance=1, delay_ms=5)  # ignored while waiting
    send(Event.TICK, advance=320)
    assert loop.machine.state is State.SHAKING
    send(Event.SHAKE_DONE, cycles=3)
    log.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        (leaf,) = db.execute("SELECT leaf FROM records WHERE kind = 'shake'").fetchone()
    assert json.loads(leaf)["data"]["delay_ms"] == 321
