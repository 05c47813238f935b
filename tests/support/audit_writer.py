"""A table that plays rounds into a real audit log until it is killed (for test_audit_crash).

Usage: python tests/support/audit_writer.py STATE_DIR SEED [ROUNDS]

It is the daemon's own control loop (controller/app/loop.py) with the real audit log, started the
daemon's way: the context the log holds, then ``POWER_ON`` through the core. Only the hardware
is stood in for (the lamps, the motor, the sensor), and the events are scripted. The sequence
number of every record is written to stdout (one line, flushed) only after the commit that made
it durable returned: an acknowledged record.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.app.loop import ControlLoop, Ports
from controller.audit.log import (
    DB_NAME,
    AuditLog,
    read_latest_checkpoint,
)
from controller.core.config import Config
from controller.core.dice import DiceReading, DieColour, DieReading
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context
from controller.core.state import (
    Event,
    Fault,
    RoundContext,
    RoundMachine,
    State,
    VoidReason,
    occurrence,
)
from controller.ports import Committed
from drivers.sim.hardware import StillTable


class Acknowledging:
    """The audit log, printing each sequence number once its commit returned."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log

    def __getattr__(self, name: str) -> object:
        return getattr(self.log, name)

    def commit(
        self, entries: Sequence[tuple[RecordKind, Mapping[str, object]]], **kw: bytes | None
    ) -> Committed:
        committed = self.log.commit(entries, **kw)
        sys.stdout.write("".join(f"{seq}\n" for seq in committed.seqs))
        sys.stdout.flush()
        return committed

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        return self.commit([(kind, data)]).seqs[0]


def main() -> int:
    state_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    rng = random.Random(seed)  # a simulated table, not the product RNG
    config = Config()
    settings = config.round_settings()
    log = AuditLog.open(state_dir)
    stored = log.latest_context()
    context = RoundContext() if stored is None else decode_context(stored[1])
    hardware = StillTable()
    machine = RoundMachine(settings, context)
    clock = 0
    loop = ControlLoop(
        machine,
        Ports(
            log=Acknowledging(log),  # type: ignore[arg-type]
            display=hardware,
            panel=hardware,
            shaker=hardware,
            latch=hardware,
            sensor=hardware,
        ),
        clock=lambda: clock,
    )
    loop.power_on(config=config_loaded_data(config))
    played = 0

    def handle(event: Event, **kw: object) -> None:
        nonlocal clock
        clock += 10
        loop.dispatch(occurrence(event, at=clock, **kw))

    handle(Event.LID_CLOSED)
    # a table opened for play: a dice set in the shaker (proposed 621a.5(c)) and a set of
    # tiles inspected by the dealer and verified by the floorperson (621a.6(a))
    if machine.context.dice_set is None:
        handle(Event.DICE_REPLACED, supervisor=True, employee="S100", dice_set="D1")
    if machine.context.tiles_set is None:
        handle(Event.TILES_INSPECTED, supervisor=True, employee="S100", tile_set="T1", dealer="D7")
    while played < rounds:
        state = machine.state
        luck = rng.random()
        if state is State.IDLE:
            handle(Event.NO_MORE_BETS)
        elif state in (State.ARMED, State.NO_ROLL):
            handle(Event.SHAKE_PRESSED)
        elif state is State.SHAKING:
            if luck < 0.05:
                handle(Event.TAMPER, detail="shaker tilted")
            else:
                handle(Event.SHAKE_DONE, cycles=rng.choice([2, 3, 4, 5, 6, 7]))
        elif state is State.SETTLING:
            clock += settings.settle_ms
            handle(Event.TICK)
        elif state is State.READING:
            # the same dice for every read of one shake, so that K reads agree
            attempt = (machine.context.round_number, machine.context.attempt)
            handle(Event.READING, reading=_reading(random.Random(f"{seed} {attempt}"), clock))
        elif state is State.RESULT:
            if luck < 0.05:
                handle(
                    Event.VOID_ROUND,
                    supervisor=True,
                    void_reason=VoidReason.DEALER_ERROR,
                    employee="S100",
                    round_meant=machine.context.round_number,
                    detail="dealer error",
                )
            elif luck < 0.08:
                handle(Event.FAULT, fault=Fault.INTERNAL, detail="simulated")
            else:
                handle(Event.CLOSE_ROUND)
                played += 1
        elif state in (State.FAULT, State.LOCKED):
            handle(Event.SECURED)
            handle(Event.CLEAR_FAULT, supervisor=True)
        else:  # pragma: no cover - a state this table never reaches
            raise AssertionError(state)
    loop.shutdown()
    log.close()
    return 0


def _reading(rng: random.Random, clock: int) -> DiceReading:
    faces = [rng.randint(1, 6) for _ in range(3)]
    flat = rng.random() > 0.05
    dice = tuple(
        DieReading(
            colour=DieColour.RED if i == 0 else DieColour.BLUE,
            face=faces[i],
            is_flat=flat or i != 1,
            is_inside=True,
            confidence=97,
            position=(20 + 30 * i + rng.randint(0, 9), 40 + rng.randint(0, 30)),
        )
        for i in range(3)
    )
    return DiceReading(dice, hashlib.sha256(f"{faces} {dice}".encode()).hexdigest())


if __name__ == "__main__":
    sys.exit(main())


def _to_layout_before_the_head(state: Path, frontier: bytes) -> None:
    """Rewrite a log as the controller kept it before the head row: the context with the last
    record of each step, the frontier and the running checkpoint with the last record, and
    checkpoints without frontiers."""
    with sqlite3.connect(state / DB_NAME) as db:
        note = read_latest_checkpoint(db)
        size, context_seq, context = db.execute(
            "SELECT size, context_seq, context FROM head"
        ).fetchone()
        db.execute("UPDATE records SET context = ? WHERE seq = ?", (context, context_seq))
        db.execute(
            "UPDATE records SET frontier = ?, note = ? WHERE seq = ?", (frontier, note, size)
        )
        db.execute("DROP TABLE head")
        db.execute("CREATE TABLE old (size INTEGER PRIMARY KEY, note TEXT NOT NULL)")
        db.execute("INSERT INTO old SELECT size, note FROM checkpoints")
        db.execute("DROP TABLE checkpoints")
        db.execute("ALTER TABLE old RENAME TO checkpoints")
    os.chmod(state / DB_NAME, 0o600)
