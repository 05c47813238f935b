"""A table that plays rounds into a real audit log until it is killed (for test_audit_crash).

Usage: python tests/audit_writer.py STATE_DIR SEED [ROUNDS]

On start it recovers from the log like the daemon: recovery's actions are carried out first
(power_on, interrupted, recovery records), then the pure round state machine plays simulated
rounds, every RECORD action is appended to the log, and the sequence number is written to
stdout (one line, flushed) only after ``append`` returned: an acknowledged record.
"""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

from controller.audit_log import AuditLog
from controller.audit_records import config_loaded_data
from controller.config import Config
from controller.dice import DiceReading, DieColour, DieReading
from controller.records import RecordKind
from controller.recovery import recover
from controller.state import Action, ActionKind, Event, Fault, Occurrence, RoundMachine, State


def main() -> int:
    state_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    rng = random.Random(seed)  # a simulated table, not the product RNG
    config = Config()
    settings = config.round_settings()
    log = AuditLog.open(state_dir)
    records = [(r.seq, r.kind, r.entry()["data"]) for r in log.records()]
    recovery = recover(records, settings)

    def carry_out(actions: list[Action]) -> None:
        for action in actions:
            if action.kind is ActionKind.RECORD:
                assert action.record is not None
                seq = log.append(action.record, action.data)
                sys.stdout.write(f"{seq}\n")
                sys.stdout.flush()

    carry_out(recovery.actions[:1])  # power_on
    loaded = config_loaded_data(config)
    carry_out([Action(ActionKind.RECORD, record=RecordKind.CONFIG_LOADED, data=loaded)])
    carry_out(recovery.actions[1:])
    machine = RoundMachine(settings, recovery.context)
    clock = 0
    played = 0

    def handle(event: Event, **kw: object) -> None:
        nonlocal clock
        clock += 10
        carry_out(machine.handle(Occurrence(event, at=clock, **kw)))  # type: ignore[arg-type]

    handle(Event.LID_CLOSED)
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
                handle(Event.VOID_ROUND, supervisor=True, detail="dealer error")
            elif luck < 0.08:
                handle(Event.FAULT, fault=Fault.INTERNAL, detail="simulated")
            else:
                handle(Event.CLOSE_ROUND)
                played += 1
        elif state in (State.FAULT, State.LOCKED):
            handle(Event.CLEAR_FAULT, supervisor=True)
        else:  # pragma: no cover - a state this table never reaches
            raise AssertionError(state)
    log.append(RecordKind.SHUTDOWN, {"reason": "done"})
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
