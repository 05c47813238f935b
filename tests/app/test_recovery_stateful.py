"""The control loop against the real audit log, driven by hypothesis: random events, commits
that fail (with nothing written, or written and still reported failed, as SQLite can leave a
failed fsync), and power cuts at any point, each followed by a start from what the log holds.

After every step:
- every result ever shown was in the log, with the same data, when it was shown (a corrected
  one with its correction);
- no round is decided twice (one ``result`` per round, ever: corrected, or void, never
  re-rolled or redrawn), and no RNG (round, attempt) is drawn twice;
- the context a start recovers is the one the loop had when its last step became durable;
- the log verifies (chain, signatures, shape: no round closed without its result).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support.rng_fakes import AUDITOR, AUDITOR_KEY

from controller.app.loop import ControlLoop, Ports
from controller.audit.dice_stats import dice_stats
from controller.audit.log import AuditLog, load_signer
from controller.audit.verify import verify_state_dir
from controller.core.config import Config
from controller.core.dice import DiceReading, DieColour, DieReading, Roll
from controller.core.dice_monitor import Window
from controller.core.merkle import CompactRange
from controller.core.position import Game
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind
from controller.core.rng_audit import open_escrowed_sessions, reveals_from_document
from controller.core.snapshot import decode_context, encode_context
from controller.core.state import (
    CorrectionReason,
    Event,
    Fault,
    Mode,
    RoundMachine,
    RoundSettings,
    Screen,
    ShuffleReason,
    VoidReason,
    occurrence,
)
from controller.errors import AuditLogError
from controller.ports import Committed
from controller.rng.session import RngPort, RngSessionManager
from drivers.sim.hardware import StillTable

# a hang fails the run; a slow or loaded machine only takes longer (hundreds of examples)
pytestmark = [pytest.mark.slow]
SUPERVISOR, FLOOR, DEALER = "S1021", "F0310", "D2207"

EXAMPLES = int(os.environ.get("PAIGOW_STATEFUL_EXAMPLES", "500"))
WALL = 1_764_500_000_000  # UTC milliseconds at the table clock's zero
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None  # fsync costs nothing on tmpfs


class Flaky:
    """The real log; the next commit can be made to fail with nothing written (``lost``), or
    to be written and still reported failed (``written``: the writer never acknowledged it)."""

    def __init__(self, log: AuditLog, table: Table) -> None:
        self.log = log
        self.table = table
        self.next_failure: str | None = None
        self.last_context: bytes | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.log, name)

    def commit(
        self, entries: Sequence[tuple[RecordKind, Mapping[str, object]]], **kw: Any
    ) -> Committed:
        failure, self.next_failure = self.next_failure, None
        if failure == "lost":
            self.log._poison("injected: nothing written")
            raise AuditLogError("audit log: injected failure, nothing written")
        if failure == "written":
            acknowledged = CompactRange(self.log._tree.size, list(self.log._tree.hashes))
            prev = self.log._prev
            self.log.commit(entries, **kw)
            self.log._tree, self.log._prev = acknowledged, prev  # the writer's view: failed
            self.log._poison("injected: written, reported failed")
            raise AuditLogError("audit log: injected failure after the write")
        committed = self.log.commit(entries, **kw)
        if kw.get("context") is not None:  # the RNG's own records carry none
            self.last_context = kw["context"]
        return committed

    def append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        return self.commit([(kind, data)]).seqs[0]

    def reopen(self) -> Any:
        reopened = self.log.reopen()
        if reopened.size != reopened.acknowledged:
            stored = self.log.latest_context()
            self.last_context = None if stored is None else stored[1]
        return reopened


class Table(StillTable):
    """One controller run: the loop over the flaky log, the hardware as the dealer sees it."""

    def __init__(self, state: Path, settings: RoundSettings, durable: bytes | None) -> None:
        self.state = state
        self.settings = settings
        self.shown: list[tuple[Screen, dict[str, Any]]] = []
        self.real = AuditLog.open(state)
        self.log = Flaky(self.real, self)
        self.log.last_context = durable
        stored = self.real.latest_context()
        self.recovered = None if stored is None else stored[1]
        context = None if stored is None else decode_context(stored[1])
        self.at = 0
        rng = None
        if Mode.RNG in settings.allowed_modes:
            rng = RngPort(
                RngSessionManager(
                    state_dir=state,
                    log=self.log,  # type: ignore[arg-type]
                    table="table-1",
                    game=settings.game,
                    mode=settings.rng_mode,
                    max_rounds=3,
                    records=[(r.seq, r.kind, r.data) for r in self.real.records()],
                    escrow=AUDITOR_KEY,
                )
            )
        self.loop = ControlLoop(
            RoundMachine(settings, context),
            Ports(
                log=self.log,  # type: ignore[arg-type]
                display=self,
                panel=self,
                shaker=self,
                latch=self,
                sensor=self,
                rng=rng,
            ),
            clock=lambda: self.at,
            # a millisecond of the table's clock is a second of the wall's: the dice's 24
            # hours on the table go by within a run
            wall_clock=lambda: WALL + self.at * 1000,
        )

    # --- the hardware ------------------------------------------------------------------------

    def show(self, screen: Screen, data: Mapping[str, object], *, seq: int | None) -> None:
        if screen is Screen.RESULT:
            # write-ahead, checked when it happens: the result is in the log right now
            # (in service mode: its test record, never a live result)
            key = (data["round"], data["attempt"])
            kind = RecordKind.SERVICE_TEST if data.get("service") else RecordKind.RESULT
            recorded = [
                {k: v for k, v in r.data.items() if k != "record"}
                for r in self.real.records()
                if r.kind == kind
                and r.data.get("record", "result") == "result"
                and (r.data["round"], r.data["attempt"]) == key
            ]
            assert len(recorded) >= 1, f"result {key} shown without its record"
            if kind is RecordKind.RESULT:
                assert len(recorded) == 1, f"result {key} shown with {len(recorded)} records"
            shown = json.loads(json.dumps(data["result"]))
            corrections = [
                r.data
                for r in self.real.records()
                if r.kind == RecordKind.RESULT_CORRECTED
                and (r.data["round"], r.data["attempt"]) == key
            ]
            if data.get("corrected") is not None:
                # N.J.A.C. 13:69E-1.28P(d): the result shown is the correction's, in the log
                assert kind is RecordKind.RESULT
                assert len(corrections) == 1
                assert shown == corrections[0]["result"]
            else:
                assert not corrections or kind is not RecordKind.RESULT
                assert shown == {
                    k: v for k, v in recorded[-1].items() if k not in ("round", "attempt")
                }
        self.shown.append((screen, dict(data)))

    def send(self, occ_event: Event, **data: Any) -> None:
        self.at += data.pop("advance", 10)
        self.loop.dispatch(occurrence(occ_event, at=self.at, **data))


def _reading(faces: tuple[int, int, int], flat: bool) -> DiceReading:
    dice = tuple(
        DieReading(
            DieColour.RED if i == 0 else DieColour.BLUE,
            face,
            flat or i != 2,
            True,
            97,
            (20 + 30 * i, 40),
        )
        for i, face in enumerate(faces)
    )
    return DiceReading(dice, "ab" * 32)


class ControllerUnderFaults(RuleBasedStateMachine):
    mode = Mode.SHAKER
    game = Game.TILES

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="paigow-stateful-", dir=SCRATCH)
        self.state = Path(self.dir)
        # the table may switch between the player's shaker and the RNG (current 621a.6(a))
        other = Mode.SHAKER if self.mode is Mode.RNG else Mode.RNG
        self.settings = RoundSettings(mode=self.mode, modes=(other,), max_reshakes=3, settle_ms=100)
        self.table = Table(self.state, self.settings, None)
        self.table.loop.power_on(config=config_loaded_data(Config()))
        self.faces = (1, 2, 3)
        # the table opened: a dice set in the shaker and a set of tiles inspected
        self.table.send(Event.DICE_REPLACED, supervisor=True, employee=SUPERVISOR)
        self.table.send(
            Event.TILES_INSPECTED,
            supervisor=True,
            employee=FLOOR,
            tile_set="T-1",
            dealer=DEALER,
        )

    def teardown(self) -> None:
        try:
            self.table.real.close()
            signer = load_signer(self.state)
            assert signer is not None
            report = verify_state_dir(self.state, signer.verifier)
            # every RNG session a power cut left unrevealed opens with the auditor's key, its
            # seed matches its commitment and every draw it made replays (rng-reveal, then
            # verify-log --rng-reveals): a cut never leaves a number nobody can prove
            log = AuditLog.open(self.state)
            try:
                records = [(r.seq, r.kind, r.data) for r in log.records()]
            finally:
                log.close()
            opening = open_escrowed_sessions(records, AUDITOR)
            interrupted = {d["session"] for _, k, d in records if k == RecordKind.RNG_INTERRUPTED}
            assert {o.session.session for o in opening.opened} >= interrupted
            reveals = reveals_from_document(opening.as_document())
            again = verify_state_dir(self.state, signer.verifier, rng_reveals=reveals)
            assert again.results == report.results
            # issue 15: the dice counts the controller keeps are those its records give
            assert dice_stats(self.state, Window.ALL)["context_agrees"] is not False
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # --- what happens at the table --------------------------------------------------------

    @rule()
    def bets_closed(self) -> None:
        self.table.send(Event.NO_MORE_BETS)

    @rule(closed=st.booleans())
    def lid(self, closed: bool) -> None:
        self.table.send(Event.LID_CLOSED if closed else Event.LID_OPENED)

    @precondition(lambda self: self.mode is Mode.SHAKER)
    @rule(delay=st.sampled_from([None, 0, 300]))
    def shake(self, delay: int | None) -> None:
        """The press, with the random delay the shell would draw before the motor starts."""
        self.table.send(Event.SHAKE_PRESSED, delay_ms=delay)

    @precondition(lambda self: self.mode is Mode.SHAKER)
    @rule(cycles=st.integers(2, 5))
    def shake_done(self, cycles: int) -> None:
        self.table.send(Event.SHAKE_DONE, cycles=cycles)

    @rule(advance=st.sampled_from([10, 100, 2000, 20_000, 90_000]))
    def time_passes(self, advance: int) -> None:
        self.table.send(Event.TICK, advance=advance)

    @precondition(lambda self: self.mode is Mode.SHAKER)
    @rule(faces=st.tuples(*[st.integers(1, 6)] * 3), flat=st.booleans(), same=st.booleans())
    def reading(self, faces: tuple[int, int, int], flat: bool, same: bool) -> None:
        if not same:
            self.faces = faces
        self.table.send(Event.READING, reading=_reading(self.faces, flat))

    @rule()
    def close_round(self) -> None:
        self.table.send(Event.CLOSE_ROUND)

    @rule(event=st.sampled_from([Event.BANK_SEAT_KEY, Event.STYLE_KEY, Event.SHIFT_CHANGE]))
    def dealer_selects(self, event: Event) -> None:
        """The bank, the delivery style and the shift change: in the context, taken up again."""
        self.table.send(event)

    @rule(supervisor=st.booleans(), dice_set=st.sampled_from([None, "A-1", "7"]))
    def dice_replaced(self, supervisor: bool, dice_set: str | None) -> None:
        """The dice set and its time: in the context, taken up again after a restart."""
        self.table.send(
            Event.DICE_REPLACED, supervisor=supervisor, dice_set=dice_set, employee=SUPERVISOR
        )

    @rule(supervisor=st.booleans(), tile_set=st.sampled_from(["T-2", "T-3"]))
    def tiles_inspected(self, supervisor: bool, tile_set: str) -> None:
        """621a.6(a), 621a.3(e): a set of tiles and its time, a new game (621a.11(b))."""
        self.table.send(
            Event.TILES_INSPECTED,
            supervisor=supervisor,
            employee=FLOOR,
            tile_set=tile_set,
            dealer=DEALER,
        )

    @rule(terminal=st.booleans(), reason=st.sampled_from(list(ShuffleReason)))
    def shuffled(self, terminal: bool, reason: ShuffleReason) -> None:
        """621a.11(b): a new game's shuffle, by the dealer's key or at the terminal."""
        if terminal:
            self.table.send(Event.SHUFFLED, employee=DEALER, shuffle=reason)
        else:
            self.table.send(Event.SHUFFLED)

    @rule()
    def shaker_inspected(self) -> None:
        self.table.send(
            Event.SHAKER_INSPECTED, supervisor=True, detail="intact", employee=SUPERVISOR
        )

    @rule(
        supervisor=st.booleans(),
        reason=st.sampled_from(list(CorrectionReason)),
        faces=st.tuples(*[st.integers(1, 6)] * 3),
        named=st.booleans(),
    )
    def correct_result(
        self,
        supervisor: bool,
        reason: CorrectionReason,
        faces: tuple[int, int, int],
        named: bool,
    ) -> None:
        """N.J.A.C. 13:69E-1.28P(d): the result shown corrected to the dice as they lie (or a
        stale name of it, which corrects nothing)."""
        ctx = self.table.loop.machine.context
        self.table.send(
            Event.CORRECT_RESULT,
            supervisor=supervisor,
            employee=SUPERVISOR,
            correction=reason,
            dice_seen=Roll(faces[0], (faces[1], faces[2])),
            result_meant=(ctx.round_number, ctx.attempt if named else ctx.attempt + 1),
        )

    @rule(supervisor=st.booleans())
    def dice_kept(self, supervisor: bool) -> None:
        """After a dice alarm (refused without one): the test starts again."""
        self.table.send(
            Event.DICE_KEPT, supervisor=supervisor, detail="weighed", employee=SUPERVISOR
        )

    @rule(back=st.sampled_from([None, 1, 2, 11]))
    def recall(self, back: int | None) -> None:
        """AGCO 13.1.1: the display recalls a round; a view, never kept across a start."""
        self.table.send(Event.RECALL, supervisor=True, back=back, employee=SUPERVISOR)

    @rule()
    def service_mode(self) -> None:
        """In or out of service mode: its test rounds never become live results."""
        self.table.send(Event.SERVICE_MODE, supervisor=True, employee="T0042")

    @rule(mode=st.sampled_from([Mode.SHAKER, Mode.RNG]))
    def mode_switch(self, mode: Mode) -> None:
        """Between rounds, or out of a fault of the dice: the mode is in the context."""
        self.table.send(Event.MODE_SWITCH, supervisor=True, mode=mode, employee=SUPERVISOR)

    @rule()
    def dealer_voids(self) -> None:
        """The dealer's void key: taken only before any dice are at rest."""
        self.table.send(Event.VOID_ROUND)

    @rule(
        supervisor=st.booleans(),
        reason=st.sampled_from([r for r in VoidReason if r.is_typed]),
        named=st.booleans(),
    )
    def void_round(self, supervisor: bool, reason: VoidReason, named: bool) -> None:
        """621a.12(c),(e): the whole round void at the terminal (or a stale name of it)."""
        ctx = self.table.loop.machine.context
        self.table.send(
            Event.VOID_ROUND,
            supervisor=supervisor,
            employee=SUPERVISOR,
            void_reason=reason,
            round_meant=ctx.round_number if named else ctx.round_number - 1 or 2,
        )

    @rule(supervisor=st.booleans())
    def clear(self, supervisor: bool) -> None:
        self.table.send(Event.SECURED)
        self.table.send(Event.SENSOR_BACK)
        self.table.send(Event.CLEAR_FAULT, supervisor=supervisor)

    @rule(event=st.sampled_from([Event.TAMPER, Event.MOTOR_OVERRUN, Event.SENSOR_LOST]))
    def hardware_fault(self, event: Event) -> None:
        self.table.send(event)

    @rule(fault=st.sampled_from([Fault.INTERNAL, Fault.RNG_FAILURE]))
    def other_fault(self, fault: Fault) -> None:
        self.table.send(Event.FAULT, fault=fault)

    # --- what happens to the controller -------------------------------------------------

    @rule(how=st.sampled_from(["lost", "written"]))
    def next_commit_fails(self, how: str) -> None:
        self.table.log.next_failure = how

    @rule(orderly=st.booleans())
    def power_cut(self, orderly: bool) -> None:
        """The controller stops (SIGTERM, or the power fails) and starts again."""
        old = self.table
        if orderly:
            old.loop.shutdown()
        durable = old.log.last_context
        old.real.close()
        self.table = Table(self.state, self.settings, durable)
        # what a start takes up is what the loop had when its last step became durable
        assert self.table.recovered == durable or (
            durable is not None
            and self.table.recovered is not None
            and decode_context(self.table.recovered) == decode_context(durable)
        )
        self.table.loop.power_on(config=config_loaded_data(Config()))
        if self.table.recovered is not None:
            before = decode_context(self.table.recovered)
            after = self.table.loop.machine.context
            assert (after.dice_set, after.dice_since) == (before.dice_set, before.dice_since)
            assert (after.tiles_set, after.tiles_since) == (before.tiles_set, before.tiles_since)
            assert after.table_ms >= before.table_ms  # the table's time never goes back
            assert after.meters.power_ups == before.meters.power_ups + 1
            assert after.correction == before.correction
            assert after.mode == before.mode
            assert (after.bank_seat, after.co_bank) == (before.bank_seat, before.co_bank)
            assert (after.dice_counts, after.dice_alarm) == (before.dice_counts, before.dice_alarm)
            assert after.recall is None
            if before.result is not None and after.state is before.state:
                assert after.result == before.result  # shown again, never decided again

    # --- always ----------------------------------------------------------------------------

    @invariant()
    def the_log_holds_what_the_loop_holds(self) -> None:
        stored = self.table.real.latest_context() if not self.table.real.is_poisoned else None
        known = self.table.log.last_context
        if stored is not None and known is not None:
            assert stored[1] == known

    @invariant()
    def nothing_is_decided_twice(self) -> None:
        """One result per round, ever (N.J.A.C. 13:69E-1.28G); at most one correction of it,
        never of an RNG round's; one draw per RNG (round, attempt)."""
        if self.table.real.is_poisoned:
            return
        results: set[int] = set()
        corrected: set[int] = set()
        draws: set[tuple[int, int]] = set()
        modes: dict[int, str] = {}
        for record in self.table.real.records():
            data = record.data
            if record.kind == RecordKind.NO_MORE_BETS:
                modes[data["round"]] = data["mode"]
            elif record.kind == RecordKind.RESULT:
                assert data["round"] not in results, f"round {data['round']} decided twice"
                results.add(data["round"])
            elif record.kind == RecordKind.RESULT_CORRECTED:
                assert data["round"] in results
                assert data["round"] not in corrected
                assert modes[data["round"]] != "rng", "an RNG result corrected"
                corrected.add(data["round"])
            elif record.kind == RecordKind.RNG_DRAW:
                key = (data["round"], data["attempt"])
                assert key not in draws, f"an RNG draw for {key} twice"
                draws.add(key)
            assert record.kind != RecordKind.RESULT_VOIDED

    @invariant()
    def service_mode_makes_no_live_round(self) -> None:
        """9 NYCRR 5319.58: no result is recorded in service mode, and the live rounds are
        opened one after the other, with no number skipped or opened twice around it."""
        if self.table.real.is_poisoned:
            return
        in_service = False
        opened: list[int] = []
        for record in self.table.real.records():
            if record.kind == RecordKind.SERVICE_MODE:
                in_service = bool(record.data["entered"])
            elif record.kind == RecordKind.RESULT:
                assert not in_service, f"a result of round {record.data['round']} in service mode"
            elif record.kind == RecordKind.ROUND_OPENED:
                assert not in_service, f"a live round {record.data['round']} in service mode"
                opened.append(record.data["round"])
        assert opened == list(range(1, len(opened) + 1)), f"live rounds opened: {opened}"

    @invariant()
    def a_running_table_is_never_ahead_of_its_log(self) -> None:
        ctx = self.table.loop.machine.context
        stored = self.table.log.last_context
        if stored is None or ctx.result is None:
            return
        durable = decode_context(stored)
        # a result in the loop's context is the result of the log's context
        if durable.result is not None and durable.round_number == ctx.round_number:
            assert durable.result == ctx.result
        assert encode_context(ctx)  # the context always encodes


class RngControllerUnderFaults(ControllerUnderFaults):
    mode = Mode.RNG


class PokerControllerUnderFaults(ControllerUnderFaults):
    """Pai Gow Poker with co-banking offered (645a.12(e)): the style key turns it on and off."""

    game = Game.POKER


def _runs(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )


TestController = ControllerUnderFaults.TestCase
TestController.settings = _runs(EXAMPLES)
TestPokerController = PokerControllerUnderFaults.TestCase
TestPokerController.settings = _runs(max(EXAMPLES // 4, 50))
TestRngController = RngControllerUnderFaults.TestCase
TestRngController.settings = _runs(max(EXAMPLES // 2, 50))


def test_a_service_round_is_never_a_live_result() -> None:
    """The invariants above, with service mode in the rules, hold; and here: what a test round
    shows is recorded as a test record, never as a result."""
    machine = ControllerUnderFaults()
    try:
        table = machine.table
        table.send(Event.LID_CLOSED)
        table.send(Event.SERVICE_MODE, supervisor=True, employee="T0042")
        table.send(Event.NO_MORE_BETS)
        table.send(Event.SHAKE_PRESSED)
        table.send(Event.SHAKE_DONE, cycles=4)
        table.send(Event.TICK, advance=200)
        table.send(Event.READING, reading=_reading((2, 2, 2), True))
        table.send(Event.READING, reading=_reading((2, 2, 2), True))
        shown = [data for screen, data in table.shown if screen is Screen.RESULT]
        assert shown
        assert all(data["service"] for data in shown)
        kinds = [r.kind for r in table.real.records()]
        assert "result" not in kinds
        assert kinds.count("service_test") >= 4
    finally:
        machine.teardown()
