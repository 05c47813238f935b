"""SIGKILL a table writing rounds into the log, at random points, again and again: each time the
log verifies, every acknowledged record is there, and recovery does what the rules say."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.audit.log import AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.core.config import Config
from controller.core.records import RecordKind as K
from controller.core.snapshot import decode_context
from controller.core.state import ActionKind, PowerOn, Screen, State, step

WRITER = Path(__file__).resolve().parents[1] / "support" / "audit_writer.py"
KILLS = 50


def _records(state: Path) -> list[tuple[int, str, dict]]:  # type: ignore[type-arg]
    log = AuditLog.open(state)
    try:
        return [(r.seq, r.kind, r.entry()["data"]) for r in log.records()]
    finally:
        log.close()


def _power_on(state: Path):  # type: ignore[no-untyped-def]
    """What the next start does: the context the log holds, through the core's POWER_ON."""
    log = AuditLog.open(state)
    try:
        stored = log.latest_context()
    finally:
        log.close()
    assert stored is not None
    return step(Config().round_settings(), decode_context(stored[1]), PowerOn(at=0))


def _kill_after(state: Path, seed: int, delay: float) -> list[int]:
    """Start the table, SIGKILL it ``delay`` seconds after its first acknowledged record."""
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(state), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    first = child.stdout.readline()  # the process is up and writing
    assert first, child.stderr.read() if child.stderr else b""
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return [int(line) for line in (first + rest).split()]


def _check_recovery(state: Path, records: list[tuple[int, str, dict]]) -> None:  # type: ignore[type-arg]
    ctx, actions = _power_on(state)
    kinds = [a.record for a in actions if a.kind is ActionKind.RECORD]
    assert kinds[0] is K.POWER_ON
    assert kinds[-1] is K.RECOVERY
    game = [(s, k, d) for s, k, d in records if k not in (K.POWER_ON, K.CONFIG_LOADED, K.RECOVERY)]
    _seq, kind, data = game[-1]
    open_faults: set[str] = set()
    for _, k, d in records:
        if k == K.FAULT:
            open_faults.add(d["fault"])
        elif k == K.FAULT_CLEARED:
            open_faults -= set(d["faults"])
    # AGCO 11.1: a fault that was active is still active, outputs safe, until cleared.
    assert {str(f) for f in ctx.active_faults} == open_faults
    if open_faults:
        assert ctx.state is State.FAULT
        assert any(a.kind is ActionKind.SAFE_STATE for a in actions)
    if kind == K.RESULT:
        # A committed result is shown again as recorded, never re-drawn or re-read.
        assert ctx.state is State.RESULT
        shown = [a for a in actions if a.screen is Screen.RESULT]
        assert shown
        recorded = {k: v for k, v in data.items() if k not in ("round", "attempt")}
        assert shown[-1].data["result"] == recorded
        assert K.INTERRUPTED not in kinds
    if kind in (K.SHAKE, K.READING) and not open_faults:
        # A shake without a committed result is void and reshaken (next attempt).
        assert K.INTERRUPTED in kinds
        assert ctx.state is State.ARMED
        assert ctx.attempt == data["attempt"] + 1
        recovery = next(a for a in actions if a.record is K.RECOVERY)
        assert recovery.data["voided_attempt"] == data["attempt"]
    if kind in (K.CLOSE, K.VOID):
        assert ctx.round_number == data["round"] + 1
        opened = [d["round"] for _, k, d in records if k == K.ROUND_OPENED]
        assert opened[-1] == data["round"] + 1  # opened in the same commit as the close


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "1", "0"], check=True, stdout=subprocess.DEVNULL
    )  # the log and its key, as the first start makes them
    signer = load_signer(state)
    assert signer is not None
    verifier = signer.verifier
    seed = int.from_bytes(os.urandom(4))
    print(f"seed {seed}")
    rng = random.Random(seed)
    seen_result_recovery = seen_void_shake = False
    for kill in range(KILLS):
        acknowledged = _kill_after(state, rng.randrange(10**6), rng.uniform(0.0, 0.05))
        report = verify_state_dir(state, verifier)
        records = _records(state)
        assert report.records == len(records)
        assert max(acknowledged) <= len(records), f"kill {kill}: an acknowledged record is missing"
        stored = {seq for seq, _, _ in records}
        assert set(acknowledged) <= stored
        _check_recovery(state, records)
        last_game = [
            k for _, k, _ in records if k not in (K.POWER_ON, K.CONFIG_LOADED, K.RECOVERY)
        ][-1]
        seen_result_recovery |= last_game == K.RESULT
        seen_void_shake |= last_game in (K.SHAKE, K.READING)
    # The next start carries out the recovery and the log still verifies.
    subprocess.run(
        [sys.executable, str(WRITER), str(state), "1", "2"], check=True, stdout=subprocess.DEVNULL
    )
    verify_state_dir(state, verifier)
    records = _records(state)
    power_ons = [d for _, k, d in records if k == K.POWER_ON]
    assert len(power_ons) == KILLS + 2
    assert power_ons[0]["previous"] == "first start"
    assert power_ons[1]["previous"] == "shutdown"
    assert sum(1 for d in power_ons if d["previous"] == "interrupted") == KILLS
    # Round numbers only go on: a closed round is never played again.
    closed = [d["round"] for _, k, d in records if k in (K.CLOSE, K.VOID)]
    assert closed == sorted(closed)
    assert len(closed) == len(set(closed))
    assert seen_result_recovery or seen_void_shake
    # After each power on: a result committed before it is never read or decided again, and a
    # voided attempt never gets a result.
    decided: set[tuple[int, int]] = set()
    voided: set[tuple[int, int]] = set()
    for _, k, d in records:
        key = (d.get("round"), d.get("attempt"))
        if k in (K.READING, K.RESULT):
            assert key not in decided, f"round {key} was decided again after a restart"
            assert key not in voided, f"voided attempt {key} was read after a restart"
        if k == K.RESULT:
            decided.add(key)
        elif k == K.INTERRUPTED:
            voided.add(key)
