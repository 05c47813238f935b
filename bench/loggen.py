"""A table-year of audit log, fast: the daemon's own control loop and audit log play scripted
rounds, and the log's commits are grouped into large transactions without fsync. The rows are
the ones the daemon writes (the same ``AuditLog.commit``: records, contexts, frontiers, signed
checkpoints, round checkpoints); only durability is skipped, which a benchmark of reading them
does not need.

    .venv/bin/python bench/loggen.py STATE_DIR ROUNDS

Logs are cached under bench/.scratch by ``cached_log`` (the format's version in the name).
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.app.loop import ControlLoop, Ports
from controller.audit.log import DB_NAME, AuditLog, origin_for
from controller.core.config import Config, TableConfig
from controller.core.dice import DiceReading, DieColour, DieReading
from controller.core.record_data import config_loaded_data
from controller.core.snapshot import decode_context
from controller.core.state import Event, RoundMachine, State, occurrence
from drivers.sim.hardware import StillTable

SCRATCH = Path(__file__).parent / ".scratch"
# the log's rows as they are written now (v8: with the totals of the meters and the dice
# statistics); a new layout gets a new cache
FORMAT = "v8"
RENEW_EVERY = 1000  # rounds (some 4.5 hours of table time) between new dice and new tiles
GROUP = 5000  # commits per transaction
MAX_ATTEMPTS = 3  # shakes of a round before the log is no benchmark


class _BulkLog(AuditLog):
    """The audit log whose commits share large transactions, on a connection without fsync."""

    def start_bulk(self) -> None:
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("BEGIN")
        self._grouped = 0

    _grouped = -1  # not grouping yet: the log opens as usual

    def _transaction(self, body: Callable[[sqlite3.Connection], Any]) -> Any:
        if self._grouped < 0:
            return super()._transaction(body)
        result = body(self._db)
        self._grouped += 1
        if self._grouped >= GROUP:
            self._db.execute("COMMIT")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("BEGIN")
            self._grouped = 0
        return result

    def _checkpoint_wal(self) -> None:
        if self._grouped < 0:
            super()._checkpoint_wal()
        # grouped: the WAL is copied after each group's transaction (above)

    def end_bulk(self) -> None:
        self._db.execute("COMMIT")


def _reading(round_number: int, attempt: int = 0) -> DiceReading:
    seed = str(round_number) if attempt == 0 else f"{round_number}.{attempt}"
    digest = hashlib.sha256(seed.encode()).digest()
    faces = [digest[i] % 6 + 1 for i in range(3)]
    dice = tuple(
        DieReading(
            DieColour.RED if i == 0 else DieColour.BLUE,
            faces[i],
            True,
            True,
            90 + digest[3 + i] % 10,
            (20 + 30 * i + digest[6] % 9, 40 + digest[7 + i] % 30),
        )
        for i in range(3)
    )
    return DiceReading(dice, digest.hex())


def generate(
    state_dir: Path, rounds: int, *, progress: bool = False, table: str = "table-1"
) -> None:
    """Play ``rounds`` more rounds into the log in ``state_dir`` (created if new) of the table
    named ``table`` (its origin and key name)."""
    origin = origin_for(table)
    AuditLog.open(state_dir, origin=origin).close()  # the key and the log, as a first start
    log = _BulkLog.open(state_dir, origin=origin)
    log.start_bulk()
    config = Config(table=TableConfig(name=table))
    stored = log.latest_context()
    machine = RoundMachine(
        config.round_settings(), None if stored is None else decode_context(stored[1])
    )
    table = StillTable()
    clock = 0
    loop = ControlLoop(
        machine,
        Ports(
            log=log,
            display=table,
            panel=table,
            shaker=table,
            latch=table,
            sensor=table,
        ),
        clock=lambda: clock,
    )
    loop.power_on(config=config_loaded_data(config))
    first = machine.context.round_number
    started = time.monotonic()

    def send(event: Event, **data: Any) -> None:
        nonlocal clock
        clock += 2000
        loop.dispatch(occurrence(event, at=clock, **data))

    def renew() -> None:
        """New dice (proposed 621a.5(c): 24 hours at most) and a new set of tiles inspected
        (621a.6(a); 621a.3(e): 12 hours at most), as the table's day asks for them."""
        send(Event.DICE_REPLACED, supervisor=True, employee="S100")
        send(
            Event.TILES_INSPECTED,
            supervisor=True,
            employee="S100",
            tile_set=f"T{number}",
            dealer="D7",
        )

    send(Event.LID_CLOSED)
    for number in range(first, first + rounds):
        if (number - first) % RENEW_EVERY == 0:
            renew()
        send(Event.NO_MORE_BETS)
        for attempt in range(MAX_ATTEMPTS):
            send(Event.SHAKE_PRESSED)
            send(Event.SHAKE_DONE, cycles=4)
            send(Event.TICK)
            reading = _reading(number, attempt)
            send(Event.READING, reading=reading)
            send(Event.READING, reading=reading)
            if machine.context.state is not State.NO_ROLL:
                break  # a no roll (the dice lying as the round before left them) is reshaken
        send(Event.CLOSE_ROUND)
        if machine.context.state is not State.IDLE or machine.context.round_number != number + 1:
            loop.shutdown()
            log.end_bulk()
            raise SystemExit(
                f"loggen: round {number} left the table in {machine.context.state}"
                f" (faults: {', '.join(sorted(machine.context.active_faults)) or 'none'}):"
                " a log that does not play its rounds is no benchmark"
            )
        if progress and (number - first + 1) % 20_000 == 0:
            rate = (number - first + 1) / (time.monotonic() - started)
            print(f"  generated {number - first + 1} rounds ({rate:,.0f} rounds/s)", flush=True)
    loop.shutdown()
    log.end_bulk()
    log.close()


def cached_log(rounds: int) -> Path:
    """A state directory with a log of ``rounds`` rounds, generated once and kept."""
    target = SCRATCH / f"log-{rounds}-{FORMAT}"
    if (target / DB_NAME).exists() and (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    print(f"  generating a log of {rounds} rounds in {target} (once)", flush=True)
    generate(target, rounds, progress=True)
    (target / ".complete").write_text("ok\n")
    return target


if __name__ == "__main__":
    generate(Path(sys.argv[1]), int(sys.argv[2]), progress=True)
