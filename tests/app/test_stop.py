"""Stopping the daemon: SIGTERM at any point ends within the unit's TimeoutStopSec, cleanly.

The stress test starts the daemon again and again (bench/stop_stress.py: ``run`` as systemd
starts it, with a fleet broker that is down or never answers, and ``simulate`` playing) and
sends SIGTERM at a point drawn from a seeded RNG, printed: while it starts, right after
READY=1, while it plays, after restarts on the same state directory. The stop's time is
checked only against the budget (a hang detector, never a performance figure); the figures are
bench/stop_stress.py's.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from gpiozero.pins.mock import MockFactory
from support.rng_fakes import AUDITOR_KEY

from controller.app import appliance as appliance_module
from controller.app.appliance import (
    STOP_BUDGET_S,
    STOP_DUMP_AFTER_S,
    STOP_WAITS_S,
    Appliance,
    Options,
    _SignalWake,
)
from controller.audit.log import AuditLog
from controller.core.config import Config
from controller.core.state import Mode
from controller.web.capped import CappedServer, ClientLimits

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import stop_stress  # noqa: E402 - the bench's harness, from its folder

STRESS_STOPS = int(os.environ.get("STOP_STRESS_STOPS", "16"))  # the bench does hundreds

RNG_TABLE = dataclasses.replace(
    Config(),
    table=dataclasses.replace(Config().table, mode=Mode.RNG, name="t9"),
    rng=dataclasses.replace(Config().rng, escrow_public_key=AUDITOR_KEY.text),
)


def test_the_budget_is_the_units_timeout_stop_sec() -> None:
    """systemd sends SIGKILL at TimeoutStopSec=: the appliance's budget is that, its waits
    and its stack dump come before it."""
    assert stop_stress.stop_budget_s() == STOP_BUDGET_S
    assert STOP_WAITS_S < STOP_DUMP_AFTER_S < STOP_BUDGET_S


def test_every_seed_s_stops_meet_every_phase() -> None:
    """The stress test asks every phase of its stops; the plan deals them so that no seed can
    miss one (a draw that did was a test failing by chance, some 0.5 % of runs)."""
    for seed in range(500):
        for stops in (len(stop_stress.PHASES), STRESS_STOPS):
            trials = stop_stress.plan(
                random.Random(seed), modes=("table", "play"), stops=stops, per_series=5
            )
            assert {t.phase for t in trials} == set(stop_stress.PHASES), (seed, stops)


@pytest.mark.slow
@pytest.mark.timeout(0)  # every wait of the harness is bounded (start, stop, verify-log)
def test_sigterm_at_random_points_after_restarts_always_stops_cleanly_within_budget(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("STOP_STRESS_SEED", random.randrange(1_000_000)))
    print(f"stop stress seed {seed} ({STRESS_STOPS} stops)")
    trials = stop_stress.run_trials(
        seed=seed, stops=STRESS_STOPS, per_series=5, root=tmp_path, report=False
    )
    print(stop_stress.summary(trials, STOP_BUDGET_S))
    failed = [t for t in trials if t.problems]
    report = "\n\n".join(
        f"{t.line()}\n" + "\n".join(t.problems) + "\n" + t.stderr[-6000:] for t in failed
    )
    assert not failed, f"seed {seed}: {len(failed)} stops failed:\n{report}"
    phases = {t.phase for t in trials}
    assert phases == set(stop_stress.PHASES), phases
    assert any(t.start > 1 for t in trials)  # restarts on a state directory a stop left


@pytest.mark.slow
def test_a_fleet_flush_longer_than_the_budget_is_cut_to_fit(tmp_path: Path) -> None:
    """``[fleet] stop_flush_s = 60`` (the most the config takes) with a broker that never
    answers: the stop used to wait the whole flush and more (systemd's SIGKILL at 20 s);
    its waits now share STOP_WAITS_S."""
    broker = stop_stress.SilentBroker()
    work = tmp_path / "work"
    work.mkdir()
    try:
        with stop_stress.started(
            "table", tmp_path / "state", work, seed=1, broker_port=broker.port, stop_flush_s=60
        ) as (proc, notify, stderr_path):
            assert notify.wait_for("READY=1", stop_stress.READY_TIMEOUT_S) is not None
            stopped = stop_stress.stop_and_watch(proc, STOP_BUDGET_S)
            stderr = stderr_path.read_text(errors="replace")
    finally:
        broker.close()
    assert stopped is not None, f"no exit within {STOP_BUDGET_S} s:\n{stderr[-8000:]}"
    assert proc.returncode == 0, stderr[-4000:]
    assert stop_stress.records(tmp_path / "state")[1] == "shutdown"


def _appliance(state_dir: Path, factory: MockFactory) -> Appliance:
    return Appliance(
        RNG_TABLE,
        Options(pin_factory=factory, state_dir=state_dir, web_display=False),
    )


def _kinds(state_dir: Path) -> list[str]:
    with AuditLog.open(state_dir, origin="paigow-controller/t9") as audit:
        return [str(r.kind) for r in audit.records()]


def test_sigterm_while_the_table_starts_skips_the_rest_and_records_the_shutdown(
    tmp_path: Path, factory: MockFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal comes as the self-tests run (power_on is recorded): no service terminal,
    no READY=1, ``run`` returns at once, the shutdown is recorded last, and the handlers
    found before are back."""
    before = signal.getsignal(signal.SIGTERM)
    real = Appliance._self_tests

    def self_tests_then_sigterm(self: Appliance) -> None:
        signal.raise_signal(signal.SIGTERM)
        real(self)

    monkeypatch.setattr(Appliance, "_self_tests", self_tests_then_sigterm)
    said: list[str] = []
    monkeypatch.setattr(appliance_module, "notify", said.append)
    appliance = _appliance(tmp_path, factory)
    try:
        appliance.start()
        assert appliance.is_stopping()
        assert appliance.terminal is None
        appliance.run()  # returns at once
    finally:
        appliance.close()
    assert not any("READY=1" in message for message in said)
    assert said[-1] == "STOPPING=1"
    kinds = _kinds(tmp_path)
    assert kinds[:2] == ["log_created", "power_on"]
    assert "shutdown" in kinds
    after = kinds[kinds.index("shutdown") + 1 :]
    assert set(after) <= {"rng_reveal"}  # the RNG session the shutdown ended, revealed
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_before_power_on_records_nothing(
    tmp_path: Path, factory: MockFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Appliance._rng

    def rng_then_sigterm(self: Appliance) -> object:
        signal.raise_signal(signal.SIGTERM)
        return real(self)

    monkeypatch.setattr(Appliance, "_rng", rng_then_sigterm)
    appliance = _appliance(tmp_path, factory)
    try:
        appliance.start()
        assert appliance.loop is None
        appliance.run()
    finally:
        appliance.close()
    assert _kinds(tmp_path) == ["log_created"]  # the new log opened, nothing after it


def test_the_wake_thread_ends_when_a_signals_byte_and_the_close_come_in_one_read() -> None:
    """The signal's byte not yet read when ``close`` writes its own: one read takes both. The
    thread wakes the loop once and ends (it used to read on, and ``close`` waited 2 s)."""
    woken = threading.Event()
    relay = _SignalWake(woken.set)
    try:
        os.write(relay._write, bytes([signal.SIGTERM, 0xFF]))
        relay._thread.join(timeout=60)
        assert not relay._thread.is_alive()
        assert woken.is_set()
    finally:
        relay.close()


def test_a_server_shut_down_before_its_thread_ran_returns_without_an_error() -> None:
    """``shutdown`` at once after start, before the server's thread got to ``serve_forever``
    (a SIGTERM right after the display bound): the thread returns, nothing raised."""
    limits = ClientLimits(2, 1.0, 1.0)
    server = CappedServer(("127.0.0.1", 0), socketserver_handler(), limits)
    assert server.shut_down_within(0.0)
    server.server_close()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            server.serve_forever()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert errors == []


def socketserver_handler() -> type:
    import socketserver

    return socketserver.BaseRequestHandler


def test_a_stop_that_hangs_prints_every_threads_stack() -> None:
    """What the appliance arms at SIGTERM: faulthandler's timer writes every thread's stack
    to stderr (the journal) while the main thread is stuck, before systemd's SIGKILL."""
    script = textwrap.dedent(
        """
        import signal, sys, threading
        from controller.app.appliance import _Signals

        def on_signal(signum, frame):
            signals.dump_stacks_later(0.2)

        signals = _Signals(on_signal, lambda: None)
        threading.Thread(target=threading.Event().wait, name="helper", daemon=True).start()
        signal.raise_signal(signal.SIGTERM)
        sys.stdin.read()  # stuck, as a join that never returns, until the test lets it go
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    dumped = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if 'File "<string>"' in line:  # the main thread's frame: the dump is out
                dumped.set()
        dumped.set()  # the end of the stream

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert dumped.wait(timeout=120), "".join(lines)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
        reader.join(timeout=60)
    dump = "".join(lines)
    assert dump.startswith("Timeout ("), dump
    assert dump.count("(most recent call first)") >= 2, dump  # the main thread and the helper
    assert 'File "<string>"' in dump, dump
