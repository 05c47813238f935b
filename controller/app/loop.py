"""The control loop: the one thread that asks the core what to do and does it.

Adapters (gpiozero callbacks, the sensor's reader thread, the shaker's motor watchdog, signal
handlers) only put events on the queue, which is bounded: an event that does not fit is never
dropped silently, it is counted and latched as an internal fault. This loop takes the events one
at a time, lets the round state machine decide, and carries out the actions.

**A step is a transaction.** For each event the core returns the next context and the actions.
The loop first drives the outputs safe if the step says so (that never waits for anything),
then records the step's records in one transaction together with the next context, and only
once they are durable adopts that context and carries out the rest (show, shake, read, draw) in
order. If the commit fails, the machine stays where the log says it is, plus the storage fault:
nothing unrecorded can be shown, resumed or closed. The log is then reopened and what it really
holds is taken as the truth (a commit reported failed may have reached the disk after all).
The batching and the storage failure are the ``Committer``'s (controller/app/committer.py).

**Faults that come back are one fault** (``controller.core.recurrence``): a fault raised again
soon after its clear is held (a clear key is refused for a while) and counted on the fault
screen; at the limit of returns the loop stops feeding systemd's watchdog, and says why.

**No re-entrant dispatch.** What the loop learns while carrying out a step (a drawn number, an
action that failed) becomes an event of its own, taken right after the step and before anything
from the queue, never dispatched from inside the step.

**The table never waits on a recall.** In the daemon (``recall_apart``) the RECALL screen's read
of the log is made on a thread of its own (controller/app/recall_reads.py); the loop is woken
when it is done and shows the screen then, if the table still recalls that round.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.app.committer import Committer, Lost, Stored
from controller.app.recall_reads import RecallReads
from controller.core.dice import Roll
from controller.core.records import RecordKind
from controller.core.recurrence import RecurrencePolicy, Recurrences
from controller.core.software import SoftwareCheck, SoftwareIdentity
from controller.core.state import (
    RECALL_DEPTH,
    Action,
    ActionKind,
    ClockSync,
    Decided,
    Event,
    Fault,
    FaultRaised,
    Occurrence,
    PowerOn,
    RngDrawn,
    RngInterrupted,
    RoundContext,
    RoundMachine,
    Screen,
    ShakePressed,
    Shutdown,
    State,
    Tick,
    decide_ahead,
    step,
)
from controller.errors import (
    AuditLogError,
    ControllerError,
    GameRuleError,
    IllegalTransition,
    OutputsLatched,
    RngError,
    RngSessionLost,
)
from controller.ports import (
    AuditLog,
    DiceSensor,
    FaultLatch,
    Panel,
    PreparesScreens,
    RngDraws,
    Shaker,
    TableDisplay,
    monotonic_ms,
    wall_ms,
)

log = logging.getLogger("paigow.daemon")

QUEUE_SIZE = 1024
# With ``collect_garbage_when_idle``: this long without an event, the table waits on a person
# (a sensor's reply, a motor's stop, come within milliseconds of their request), and the
# cyclic garbage is collected then, once there are at least IDLE_COLLECTION_MIN new objects;
# the oldest generation every IDLE_FULL_EVERY collections.
IDLE_COLLECTION_S = 0.01
IDLE_COLLECTION_MIN = 100
IDLE_FULL_EVERY = 16
OPERATOR_EVENTS = frozenset(
    {
        Event.NO_MORE_BETS,
        Event.CORRECT_RESULT,
        Event.TILES_INSPECTED,
        Event.SHUFFLED,
        Event.SHAKE_PRESSED,
        Event.DICE_SET,
        Event.CLOSE_ROUND,
        Event.VOID_ROUND,
        Event.CLEAR_FAULT,
        Event.BANK_SEAT_KEY,
        Event.STYLE_KEY,
        Event.SHIFT_CHANGE,
        Event.DICE_REPLACED,
        Event.SHAKER_INSPECTED,
        Event.MODE_SWITCH,
        Event.SERVICE_MODE,
        Event.LAMP_TEST,
        Event.DICE_KEPT,
        Event.RECALL,
    }
)
_SAFETY_ACTIONS = frozenset({ActionKind.STOP_MOTOR, ActionKind.SAFE_STATE})
# Events that need no wall-clock time (the core reads it for the dice's 24 hours): the
# sensor's frames and the ticks, on the path to the display and every deadline.
_NO_WALL = frozenset({Event.TICK, Event.READING})


class EventQueue:
    """The control thread's bounded queue. ``put`` never blocks an adapter's thread; an event
    that does not fit is counted (with its name) for the loop to latch as a fault."""

    def __init__(self, maxsize: int = QUEUE_SIZE) -> None:
        self._queue: queue.Queue[Occurrence | None] = queue.Queue(maxsize)
        self._lock = threading.Lock()
        self._lost: list[str] = []

    def put(self, item: Occurrence) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self._lost.append(str(item.event))

    def get(self, timeout: float | None) -> Occurrence | None:
        """The next event, None for a wake-up; raises ``queue.Empty`` after ``timeout``."""
        return self._queue.get(timeout=timeout)

    def wake(self) -> None:
        # A full queue: the loop is busy with it and will look at its flags soon.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)

    def take_lost(self) -> list[str]:
        with self._lock:
            lost, self._lost = self._lost, []
        return lost

    def empty(self) -> bool:
        return self._queue.empty()


# A periodic check is made only while no shake, reading or draw is in progress (it may take
# some milliseconds, and the path from the sensor's frame to the result has one); when it is
# due meanwhile it is tried again this much later.
_BUSY = frozenset({State.WAITING, State.SHAKING, State.SETTLING, State.READING, State.DRAWING})
DUTY_RETRY_MS = 5_000


@dataclass
class Duty:
    """A check the control thread makes every ``every_ms`` of the loop's clock, first
    ``every_ms`` after the loop was made: ``check(at)`` returns the event it learned of
    (dispatched at once, like any other), or None. A deadline like the core's: the loop sleeps
    until the nearest one, no thread ticks."""

    name: str
    every_ms: int
    check: Callable[[int], Occurrence | None]
    due: int | None = None  # the loop's clock; set when the loop takes the duty


@dataclass
class Ports:
    log: AuditLog
    display: TableDisplay
    panel: Panel
    shaker: Shaker
    latch: FaultLatch
    sensor: DiceSensor | None = None
    rng: RngDraws | None = None


class ControlLoop:
    def __init__(
        self,
        machine: RoundMachine,
        ports: Ports,
        *,
        events: EventQueue | None = None,
        clock: Callable[[], int] = monotonic_ms,
        alive_every_s: float | None = None,
        on_alive: Callable[[], None] | None = None,
        collect_garbage_when_idle: bool = False,
        shake_delay: Callable[[], int] | None = None,
        wall_clock: Callable[[], int] = wall_ms,
        duties: Sequence[Duty] = (),
        recurrence: RecurrencePolicy | None = None,
        recall_apart: bool = False,
    ) -> None:
        """``alive_every_s``: the longest the loop sleeps without an event before it calls
        ``on_alive`` (systemd's watchdog); None sleeps until an event or the core's deadline.
        ``collect_garbage_when_idle``: run the cyclic garbage collector once the loop has been
        idle for ``IDLE_COLLECTION_S`` (the composition root makes automatic collections
        rare), so that a collection does not land between a sensor's frame and its result.
        ``recurrence``: how a fault that comes back is held, and when the loop stops feeding
        the watchdog (``controller.core.recurrence``). ``recall_apart``: the RECALL screen's
        read of the log is made on a thread of its own (controller/app/recall_reads.py), and
        the screen shown once read; otherwise on this thread, before the step goes on."""
        self.machine = machine
        self.ports = ports
        self.shake_delay = shake_delay  # draws the delay before a shake's motor starts
        self.events = events or EventQueue()
        self.clock = clock
        self.wall_clock = wall_clock  # UTC milliseconds, for the dice's 24 hours on the table
        self.alive_every_s = alive_every_s
        self.on_alive = on_alive
        self.is_healthy = True
        # faults that come back: held, counted, and at the limit the watchdog goes unfed
        self.recurrences = Recurrences(recurrence or RecurrencePolicy())
        self.restart_reason: str | None = None
        self._stopping = False
        self._follow_ups: deque[Occurrence] = deque()
        self._ahead: Decided | None = None  # a reading's decision made ahead (``step``)
        self._power_on: Occurrence | None = None  # until its records are durable
        # write-ahead: the step's records durable before it is adopted (the audit log in use
        # is read at each commit)
        self.committer = Committer(lambda: self.ports.log, machine.context)
        self.collect_garbage_when_idle = collect_garbage_when_idle
        self._idle_collections = 0
        self._submitted: dict[int, Outcome] = {}  # by id(occurrence), until taken (``submit``)
        self._submitted_lock = threading.Lock()  # a leaf: nothing is called while it is held
        self._outcome: Outcome | None = None  # the submitted event being dispatched
        self.duties = list(duties)
        for duty in self.duties:
            duty.due = self.clock() + duty.every_ms
        # Bounded work for between rounds (the log's retention, controller/audit/archive.py):
        # called when bets are open and no event waits, so never before a result is shown.
        self.between_rounds: Callable[[], None] | None = None
        self.recall_reads = RecallReads(self.events.wake) if recall_apart else None

    # --- called from any thread -------------------------------------------------------------

    def stop(self) -> None:
        self._stopping = True
        self.events.wake()

    def request_stop(self) -> None:
        """``stop`` for a signal handler: a flag only (no lock is taken). Whoever handles the
        signal also wakes the loop from a normal thread (``events.wake``)."""
        self._stopping = True

    # --- the control thread -----------------------------------------------------------------

    def run(self) -> None:
        """Take events until ``stop``. Idle means idle: the loop sleeps until an event comes, or
        until the core's deadline (a ``TICK`` then), or until ``alive_every_s`` has passed."""
        while not self._stopping:
            try:
                item = self._next_event(self._sleep_s())
            except queue.Empty:
                item = None
            if item is not None:
                self.dispatch(item)
            self._show_recalled()
            deadline = self.machine.context.deadline
            if deadline is not None and self.clock() >= deadline:
                self.dispatch(Tick(at=self.clock()))
            lost = self.events.take_lost()
            if lost:
                detail = f"the event queue was full: {len(lost)} events lost ({', '.join(lost)})"
                log.error("%s", detail)
                self.dispatch(FaultRaised(at=self.clock(), fault=Fault.INTERNAL, detail=detail))
            self.run_duties()
            if (
                self.machine.state is State.IDLE
                and not self.is_storage_failed
                and self.events.empty()
            ):
                self.committer.settle_between_rounds()  # the WAL's copy, when it is due
                if self.between_rounds is not None:
                    self.between_rounds()
            if self.is_healthy and self.on_alive is not None:
                self.on_alive()

    def _next_event(self, timeout: float | None) -> Occurrence | None:
        """The next event within ``timeout`` (``queue.Empty`` after it); if none comes within
        ``IDLE_COLLECTION_S``, the garbage is collected and ``queue.Empty`` raised at once."""
        if (
            self.collect_garbage_when_idle
            and (timeout is None or timeout > IDLE_COLLECTION_S)
            and gc.get_count()[0] >= IDLE_COLLECTION_MIN
        ):
            try:
                return self.events.get(timeout=IDLE_COLLECTION_S)
            except queue.Empty:
                self._idle_collections += 1
                gc.collect(2 if self._idle_collections % IDLE_FULL_EVERY == 0 else 1)
                raise  # the caller looks at the deadline and sleeps again
        return self.events.get(timeout=timeout)

    def _sleep_s(self) -> float | None:
        waits = [] if self.alive_every_s is None else [self.alive_every_s]
        deadlines = [d.due for d in self.duties if d.due is not None]
        if self.machine.context.deadline is not None:
            deadlines.append(self.machine.context.deadline)
        if deadlines:
            waits.append(max(0.0, (min(deadlines) - self.clock()) / 1000))
        return min(waits) if waits else None

    def run_duties(self) -> None:
        """The periodic checks that are due, each once, while the table rests (``_BUSY``:
        put off by ``DUTY_RETRY_MS``). A check that raises is logged and tried at its next
        time: it never stops the loop."""
        for duty in self.duties:
            now = self.clock()
            if duty.due is None or now < duty.due:
                continue
            if self.machine.context.state in _BUSY:
                duty.due = now + DUTY_RETRY_MS
                continue
            duty.due = now + duty.every_ms
            try:
                occ = duty.check(now)
            except Exception:
                log.exception("the periodic check %s failed", duty.name)
                continue
            if occ is not None:
                self.dispatch(occ)

    def power_on(
        self,
        *,
        config: Mapping[str, object],
        fault: Fault | None = None,
        detail: str = "",
        software: SoftwareCheck | None = None,
        software_before: SoftwareIdentity | None = None,
        clock: ClockSync | None = None,
        anchor: str = "",
    ) -> None:
        """The first step: the core takes up the context the log held (``machine.context``).
        Until its records are durable it is taken again before every other event (a log that
        failed at power on must still record power_on and the configuration in force).
        ``software``: the program verification at start, ``software_before`` the identity the
        previous power_on recorded; ``clock``: whether the OS's clock is synchronised;
        ``anchor``: a place of the log's anchor rewritten from the other (recorded)."""
        self._power_on = PowerOn(
            at=self.clock(),
            config=config,
            fault=fault,
            detail=detail,
            software=software,
            software_before=software_before,
            clock=clock,
            anchor=anchor,
        )
        self.dispatch(self._power_on)

    def shutdown(self) -> None:
        """The last step of an orderly stop (the loop is no longer running)."""
        self.dispatch(Shutdown(at=self.clock()))

    def dispatch(self, occ: Occurrence) -> None:
        """One event, then what the loop learned while carrying it out, each its own step.
        Never raises."""
        outcome = self._take_submitted(occ)
        if outcome is not None:
            self._dispatch_watched(occ, outcome)
            return
        pending = self._power_on
        if pending is not None and occ is not pending and occ.event is not Event.TICK:
            self._follow_ups.append(replace(pending, at=occ.at, wall=self.wall_clock()))
        if isinstance(occ, ShakePressed) and occ.delay_ms is None and self.shake_delay:
            occ = replace(occ, delay_ms=self.shake_delay())
        if occ.wall is None and occ.event not in _NO_WALL:
            occ = replace(occ, wall=self.wall_clock())
        self._follow_ups.append(occ)
        while self._follow_ups:
            self._step(self._follow_ups.popleft())

    def _step(self, occ: Occurrence) -> None:
        before = self.machine.context
        if occ.event is Event.CLEAR_FAULT and before.state is State.FAULT:
            # a fault that came back is held: no key clears it yet; nor one the restart awaits
            held = self.restart_reason or self.recurrences.refusal(
                before.active_faults, self.clock()
            )
            if held is not None:
                self._refused(occ, held)
                return
        try:
            after, actions = step(self.machine.settings, before, occ, ahead=self._ahead)
        except (IllegalTransition, GameRuleError) as exc:  # e.g. a bank seat refused, 621a.11(b)
            self._refused(occ, str(exc))
            return
        except Exception:  # a bug: latch everything safe, stop telling systemd we are alive
            log.exception("internal error handling %s", occ.event)
            self.is_healthy = False
            self._safe("internal error")
            return
        if self._carry_out(before, after, actions) and occ.event is Event.POWER_ON:
            self._power_on = None

    @property
    def last_seq(self) -> int | None:
        """The sequence number of the last record made durable."""
        return self.committer.last_seq

    @property
    def is_storage_failed(self) -> bool:
        """A commit failed, and none has succeeded since."""
        return self.committer.is_storage_failed

    def _carry_out(
        self,
        before: RoundContext,
        after: RoundContext,
        actions: Sequence[Action],
        *,
        must_adopt: bool = False,
    ) -> bool:
        """Safety first, then the records with the next context in one transaction
        (``Committer``), then (only once they are durable) the context adopted and the rest of
        the actions in order. ``must_adopt``: the step that latches the storage fault, adopted
        even if its records cannot be recorded. Returns whether the step's records are
        durable."""
        for action in actions:
            if action.kind in _SAFETY_ACTIONS:
                self._do_safely(action)
        if must_adopt:
            stored = self.committer.commit_fault(after, actions)
        else:
            committed = self.committer.commit_step(before, after, actions)
            if isinstance(committed, Lost):
                self._storage_failed(committed)
                return False
            stored = committed
        self._stored(stored)
        self._observe_faults(self.machine.context, after)
        self.machine.context = after
        self._decide_ahead(before, after)
        if before.state is State.FAULT and after.state is not State.FAULT:
            self.ports.latch.reset()  # cleared: the outputs may leave their safe values again
        for action in actions:
            if action.kind in _SAFETY_ACTIONS or action.kind is ActionKind.RECORD:
                continue
            if not self._do_guarded(action):
                break
        return stored.durable

    def _decide_ahead(self, before: RoundContext, after: RoundContext) -> None:
        """While the sensor reads again, the decision of a reading that agrees (the core's
        ``decide_ahead``), made before the read is asked for: the step from the frame that
        decides to the result on the display then only checks the reading and takes it, and
        its records, prepared now (``Committer.prepare``), are only stamped, chained and
        signed by their commit. A decision that is not taken (the reading disagrees, anything
        else happened) costs nothing but the work done while the table waited."""
        if after.state is not State.READING:
            self._ahead = None
            return
        if after.read_progress is before.read_progress and self._ahead is not None:
            return
        try:
            self._ahead = decide_ahead(self.machine.settings, after)
        except Exception:  # a bug: the reading's own step meets it again, and latches it
            log.exception("internal error deciding ahead")
            self._ahead = None
        if self._ahead is not None:  # its records checked and encoded for their commit
            self.committer.prepare(self._ahead.step[1])
            self._prepare_screens(self._ahead.step[1])

    def _prepare_screens(self, actions: Sequence[Action]) -> None:
        """The screens of a step decided ahead, made ready by the display that can
        (``PreparesScreens``): shown, if the step is taken, once its records are durable, as
        any screen. Only a help: what fails here is logged, and the screen is made when shown."""
        display = self.ports.display
        if not isinstance(display, PreparesScreens):
            return
        for action in actions:
            if action.kind is ActionKind.SHOW and action.screen is not None:
                try:
                    display.prepare(action.screen, action.data)
                except Exception:
                    log.exception("internal error preparing %s", action.screen)

    def _stored(self, stored: Stored) -> None:
        """What a commit made durable: noted for whoever waits for the event, and the anchor
        that could not be kept after it, a storage fault of its own."""
        self._note_records(stored.records)
        if stored.anchor_error is not None:
            log.error("%s", stored.anchor_error)
            self._follow(Fault.STORAGE, stored.anchor_error)

    def _do_guarded(self, action: Action, *, failed: Exception | None = None) -> bool:
        """One action of an adopted step; False if it failed (the step's later actions are
        not carried out, and what failed comes as an event of its own). ``failed``: what the
        action raised where it was carried out apart (the RECALL screen's read)."""
        try:
            if failed is not None:
                raise failed
            self._do(action)
        except AuditLogError as exc:  # a record the RNG makes itself
            log.error("%s failed: %s", action.kind, exc)
            self._follow(Fault(exc.fault), str(exc))
        except RngSessionLost as exc:
            # the round's bets closed under a session that ended with a restart: the core
            # voids the round (never a number from a session committed after its bets)
            log.warning("%s", exc)
            self._follow_ups.append(RngInterrupted(at=self.clock(), detail=str(exc)))
        except OutputsLatched as exc:
            # The latch tripped after this step was decided: the fault that tripped it comes
            # by its own event (a motor overrun, say), not as an internal fault of this one.
            log.warning("%s refused: %s", action.kind, exc)
        except ControllerError as exc:
            log.error("%s failed: %s", action.kind, exc)
            self._follow(_fault_of(action, exc), str(exc))
        except Exception:
            log.exception("%s failed", action.kind)
            self.is_healthy = False
            self._safe("internal error")
        else:
            return True
        return False

    def _observe_faults(self, prior: RoundContext, adopted: RoundContext) -> None:
        """The faults raised and cleared by the step adopted, and whether it decided a round;
        at the limit of returns, the watchdog is no longer fed (systemd restarts the service)
        and why is recorded."""
        before, after = prior.active_faults, adopted.active_faults
        if not self.recurrences.faults and before == after:
            return
        if adopted.state is State.RESULT and prior.state is not State.RESULT:
            self.recurrences = self.recurrences.round_decided(after)
        self.recurrences = self.recurrences.observe(before, after, self.clock())
        for fault, returns in self.recurrences.returns(after - before).items():
            log.warning("the fault %s came back (%d in a row): held", fault, returns)
        reason = self.recurrences.restart_reason()
        if reason is not None and self.restart_reason is None:
            self.restart_reason = reason
            self.is_healthy = False
            log.error("%s", reason)
            self._follow(Fault.INTERNAL, reason)

    def _follow(self, fault: Fault, detail: str) -> None:
        self._follow_ups.append(FaultRaised(at=self.clock(), fault=fault, detail=detail))

    def _refused(self, occ: Occurrence, why: str) -> None:
        self._note_refusal(why)
        if occ.event in OPERATOR_EVENTS:
            log.info("refused: %s", why)
            self._show(Screen.REFUSED, {"reason": why, "event": str(occ.event)})
        elif occ.event is not Event.TICK:
            log.warning("ignored: %s", why)

    def _do(self, action: Action) -> None:
        ports = self.ports
        kind = action.kind
        if kind is ActionKind.SHOW:
            assert action.screen is not None
            self._show(action.screen, action.data)
        elif kind is ActionKind.START_SHAKE:
            ports.shaker.start_shake()
        elif kind is ActionKind.REQUEST_READ:
            if ports.sensor is None:
                raise ControllerError("no dice sensor configured")
            ports.sensor.request_read(
                round_number=_int(action.data["round"]), attempt=_int(action.data["attempt"])
            )
        elif kind is ActionKind.DRAW_NUMBER:
            self._draw(_int(action.data["round"]), _int(action.data["attempt"]))
        elif kind is ActionKind.PREPARE_RNG:
            if ports.rng is None:
                raise RngError("no RNG configured")
            ports.rng.prepare()
        elif kind is ActionKind.CLOSE_RNG:
            if ports.rng is not None:
                ports.rng.close(str(action.data.get("reason", "shutdown")))
        elif kind is ActionKind.LAMP_TEST:
            ports.panel.lamp_test()
        elif kind is ActionKind.REANCHOR:
            size = ports.log.reanchor()
            log.warning("the log's anchor is now its checkpoint of %d records", size)
        else:  # pragma: no cover - a kind added to the core without a handler here
            raise ControllerError(f"no handler for action {kind}")

    def _do_safely(self, action: Action) -> None:
        """A safety action never stops the step: each is tried, a failure logged."""
        try:
            if action.kind is ActionKind.STOP_MOTOR:
                self.ports.shaker.stop()
            else:
                self.ports.latch.trip(str(action.data.get("fault", "fault")))
        except Exception:
            log.exception("%s failed; driving every output safe", action.kind)
            self._safe(f"{action.kind} failed")

    def _show(self, screen: Screen, data: object) -> None:
        assert isinstance(data, dict)
        if screen is Screen.REFUSED:
            self._note_refusal(str(data.get("reason", "")))
        if screen is Screen.RECALL and "rounds" not in data:
            # AGCO 13.1.1: the round comes from the log itself, as recall reads it; only the
            # one recalled is sent (a screen the display's history keeps), with the count.
            # Read apart, it is shown once read (``_show_recalled``).
            read = functools.partial(self.ports.log.recall, RECALL_DEPTH)
            if self.recall_reads is not None:
                self.recall_reads.ask(data, read)
                return
            data = _recalled(data, read())
        if screen is Screen.FAULT:  # how often each fault came back, and how long it is held
            faults = self.machine.context.active_faults
            data = {**data, **self.recurrences.shown(faults, self.clock())}
            if self.restart_reason is not None:
                data["restart"] = self.restart_reason
        self.ports.display.show(screen, data, seq=self.last_seq)
        bank = data.get("bank")
        self.ports.panel.show_status(
            screen,
            player_bank=bank is not None and bank != "dealer",
            dice_alarm=self.machine.context.dice_alarm is not None,
        )

    def _show_recalled(self) -> None:
        """The rounds read apart for the RECALL screen (``recall_reads``), shown as a step's
        action would be, if the table still recalls that round: the supervisor may have
        stepped on or left meanwhile, or a fault ended the recall. A read that failed fails
        the action (the fault it latches)."""
        answer = None if self.recall_reads is None else self.recall_reads.take()
        if answer is None:
            return
        data, rounds = answer
        if self.machine.context.recall != data.get("back"):
            return
        if isinstance(rounds, Exception):
            self._do_guarded(Action(ActionKind.SHOW, screen=Screen.RECALL), failed=rounds)
        else:
            shown = _recalled(data, rounds)
            self._do_guarded(Action(ActionKind.SHOW, screen=Screen.RECALL, data=shown))
        while self._follow_ups:
            self._step(self._follow_ups.popleft())

    def _draw(self, round_number: int, attempt: int) -> None:
        if self.ports.rng is None:
            raise RngError("no RNG configured")
        value = self.ports.rng.draw(round_number=round_number, attempt=attempt)
        at = self.clock()
        if isinstance(value, Roll):
            self._follow_ups.append(RngDrawn(at=at, roll=value))
        else:
            self._follow_ups.append(RngDrawn(at=at, rng_number=value))

    def _storage_failed(self, lost: Lost) -> None:
        """Write-ahead: the step is not adopted, nor are the steps whose records waited for it.
        The machine takes the storage fault from where the log says it is (``Lost.base``); or
        the internal fault of a commit the log refused (a bug: systemd restarts the service)."""
        if lost.fault is Fault.INTERNAL:
            self.is_healthy = False
        try:
            after, actions = step(
                self.machine.settings,
                lost.base,
                FaultRaised(at=self.clock(), fault=lost.fault, detail=lost.detail),
            )
        except Exception:
            log.exception("internal error latching the storage fault")
            self.is_healthy = False
            self._safe("storage fault")
            return
        self._carry_out(lost.base, after, actions, must_adopt=True)

    def _safe(self, reason: str) -> None:
        for drive in (self.ports.shaker.drive_safe, lambda: self.ports.latch.trip(reason)):
            try:
                drive()
            except Exception:
                log.exception("could not drive the outputs safe")
        try:
            self._show(Screen.FAULT, {"faults": ["internal"]})
        except Exception:
            log.exception("could not show the fault")

    # --- events whose outcome someone waits for (the service terminal) ---------------------

    def submit(self, occ: Occurrence) -> Outcome:
        """Put ``occ`` on the queue (from any thread) and return its outcome, which the
        control thread fills once it has dispatched it. An event the full queue loses is
        never dispatched: the waiter's time runs out, and it ``withdraw``s the outcome."""
        outcome = Outcome(occ)
        with self._submitted_lock:
            self._submitted[id(occ)] = outcome
        self.events.put(occ)
        return outcome

    def withdraw(self, outcome: Outcome) -> None:
        """Nobody waits any more: the event, if it is still queued, is dispatched unwatched."""
        key = id(outcome.occurrence)
        with self._submitted_lock:
            if self._submitted.get(key) is outcome:
                del self._submitted[key]

    def _take_submitted(self, occ: Occurrence) -> Outcome | None:
        # Unlocked first: every other event passes here. A submitted event was added before
        # it was queued, and the queue orders the two for the control thread.
        if not self._submitted:
            return None
        with self._submitted_lock:
            outcome = self._submitted.get(id(occ))
            if outcome is None or outcome.occurrence is not occ:
                return None
            del self._submitted[id(occ)]
        return outcome

    def _dispatch_watched(self, occ: Occurrence, outcome: Outcome) -> None:
        """``dispatch``, noting the records made durable (follow-ups included) and the first
        refusal, then handing the outcome over."""
        self._outcome = outcome
        try:
            self.dispatch(occ)
        finally:
            self._outcome = None
            outcome.finish(is_storage_failed=self.is_storage_failed)

    def _note_records(self, records: Sequence[tuple[RecordKind, int]]) -> None:
        """The step's own records made durable, for whoever waits for the event."""
        if self._outcome is not None and records:
            self._outcome.records.extend((str(kind), seq) for kind, seq in records)

    def _note_refusal(self, why: str) -> None:
        if self._outcome is not None and self._outcome.refused is None:
            self._outcome.refused = why


class Outcome:
    """What the table did with an event from ``ControlLoop.submit``: the records it led to,
    durable (kind and sequence number), or why it was refused (the REFUSED screen's reason, or
    the rule or transition the event broke). Filled by the control thread; read it once
    ``wait_for_step`` has returned True."""

    def __init__(self, occurrence: Occurrence) -> None:
        self.occurrence = occurrence
        self.records: list[tuple[str, int]] = []
        self.refused: str | None = None
        self.is_storage_failed = False  # the audit log failed: nothing of the step is recorded
        self._stepped = threading.Event()

    def wait_for_step(self, timeout: float) -> bool:
        return self._stepped.wait(timeout)

    def finish(self, *, is_storage_failed: bool) -> None:
        self.is_storage_failed = is_storage_failed
        self._stepped.set()


def _fault_of(action: Action, exc: ControllerError) -> Fault:
    if action.kind is ActionKind.REQUEST_READ:
        return Fault.SENSOR_LOST
    if isinstance(exc, RngError) or action.kind in (ActionKind.DRAW_NUMBER, ActionKind.PREPARE_RNG):
        return Fault.RNG_FAILURE
    return Fault.INTERNAL


def _recalled(data: Mapping[str, object], rounds: list[dict[str, Any]]) -> dict[str, object]:
    """The RECALL screen's data: the round recalled (``back`` 1: the newest) alone, and how
    many the log holds of the last RECALL_DEPTH."""
    back = _int(data["back"])
    chosen = [rounds[-back]] if 1 <= back <= len(rounds) else []
    return {**data, "count": len(rounds), "rounds": chosen}


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise GameRuleError(f"expected a whole number, got {value!r}")
    return value
