"""The simulated crew decides by what the table shows and has taken, never by timing.

``simulate``'s crew once recorded two ``tiles_shuffled`` for round 20 (one press of the shuffle
key, its contacts' chatter stretched past the debounce time by a loaded machine: the driver
took two presses) and once missed round 40's correction (the supervisor key turned, the action
typed before the table had taken the key: refused three times, given up). Here the same
simulation runs twice with the same seed, the second time with its simulated hardware's
threads slowed (the keys' chatter four times slower than the debounce, and every input taken
by the table's driver 15 ms late): the records the crew decides are the same.
"""

from __future__ import annotations

import dataclasses
import io
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from controller.app import simulate
from controller.audit.log import AuditLog, configured_origin
from controller.core.config import Config
from controller.core.state import Mode
from drivers import debounce
from drivers.sim import hardware

pytestmark = pytest.mark.slow

ROUNDS = 22  # a void at 5 and 15, a correction at 10 and 20, the shuffle at 20, RNG 15-19
SEED = 14
# What the crew decides, by record kind: the fields that say what it did.
CREW_RECORDS = {
    "no_more_bets": ("round", "bank", "mode"),
    "bank_selected": ("round", "bank"),
    "delivery_style": ("round", "style"),
    "tiles_shuffled": ("round", "reason", "employee"),
    "result_corrected": ("round", "reason", "employee"),
    "void": ("round", "reason", "employee"),
    "mode_changed": ("round", "mode", "employee"),
    "dice_replaced": ("dice_set", "employee"),
    "tiles_inspected": ("round", "tile_set", "employee", "dealer"),
    "shift_change": ("employee",),
    "close": ("round", "employee"),
}


def crew_records(state_dir: Path, config: Config) -> list[tuple[object, ...]]:
    with AuditLog.open(state_dir, origin=configured_origin(config)) as audit:
        return [
            (str(r.kind), *(r.data.get(field) for field in CREW_RECORDS[str(r.kind)]))
            for r in audit.records()
            if str(r.kind) in CREW_RECORDS
        ]


def play(state_dir: Path) -> tuple[Config, list[tuple[object, ...]]]:
    config = Config()
    config = dataclasses.replace(config, table=dataclasses.replace(config.table, modes=(Mode.RNG,)))
    out = io.StringIO()
    code = simulate.run_simulation(
        config,
        rounds=ROUNDS,
        seed=SEED,
        fast=True,
        faults={},
        state_dir=state_dir,
        out=out,
        table_minutes_per_round=60,
    )
    assert code == 0, out.getvalue()
    return config, crew_records(state_dir, config)


def slow_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys' chatter with 4 ms between its edges (the debounce is 1 ms in ``--fast``), and
    every input the table's driver settles taken 15 ms late: a crew that acts after fixed
    sleeps sees its presses doubled and its supervisor key refused."""

    def slow_bounce(pin: Any, *, closed: bool, bounces: int, gap_s: float = 0.001) -> None:
        for _ in range(bounces):
            pin.set_contact(closed)
            time.sleep(0.004)
            pin.set_contact(not closed)
            time.sleep(0.004)
        pin.set_contact(closed)

    real_accept = debounce.DebouncedInput._accept

    def late_accept(self: debounce.DebouncedInput, value: bool) -> None:
        # the settle thread holds the input's lock here: wait without it, as a slow machine's
        # scheduler would keep the thread from running
        self._lock.release()
        try:
            threading.Event().wait(0.015)
        finally:
            self._lock.acquire()
        real_accept(self, value)

    monkeypatch.setattr(hardware, "_bounce", slow_bounce)
    monkeypatch.setattr(debounce.DebouncedInput, "_accept", late_accept)


def test_the_crews_records_are_the_same_with_its_hardware_slowed(tmp_path: Path) -> None:
    _, steady = play(tmp_path / "steady")
    assert [r[1] for r in steady if r[0] == "tiles_shuffled"] == [20]
    assert [r[1] for r in steady if r[0] == "result_corrected"] == [10, 20]
    assert [r[1] for r in steady if r[0] == "void"] == [5, 15]
    with pytest.MonkeyPatch.context() as patch:
        slow_hardware(patch)
        _, slowed = play(tmp_path / "slowed")
    assert slowed == steady
