"""The control loop: the one thread that asks the core what to do and does it.

Adapters (gpiozero callbacks, the sensor's reader thread, the shaker's motor timer, signal
handlers) only put events on the queue. This loop takes them one at a time, lets the round
state machine decide, and carries out the actions in order. Write-ahead: a ``RECORD`` that
fails stops the rest of its batch, so nothing is shown that is not in the log; the storage
fault then latches and no new round can start.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from controller.clock import monotonic_ms
from controller.dice import Roll
from controller.errors import (
    AuditLogError,
    ControllerError,
    GameRuleError,
    IllegalTransition,
    RngError,
)
from controller.ports import AuditLog, DiceSensor, Panel, Shaker, TableDisplay
from controller.records import RecordKind
from controller.state import (
    Action,
    ActionKind,
    Event,
    Fault,
    Occurrence,
    RoundMachine,
    Screen,
    State,
)

log = logging.getLogger("paigow.daemon")

OPERATOR_EVENTS = frozenset(
    {
        Event.NO_MORE_BETS,
        Event.SHUFFLED,
        Event.SHAKE_PRESSED,
        Event.DICE_SET,
        Event.CLOSE_ROUND,
        Event.VOID_ROUND,
        Event.CLEAR_FAULT,
    }
)
_SAFETY_ACTIONS = frozenset({ActionKind.STOP_MOTOR, ActionKind.SAFE_STATE})


class RngDraws(Protocol):
    """The RNG of 621a.8(a)(1). ``draw`` records the number before it returns it, and returns
    the number already recorded for (round, attempt) instead of drawing a second one."""

    def draw(self, *, round_number: int, attempt: int) -> int | Roll: ...


class FaultLatch(Protocol):
    """Drives every output to its safe value, once per fault; ``reset`` re-arms it."""

    def trip(self, reason: str) -> bool: ...

    def reset(self) -> None: ...


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
        events: queue.Queue[Occurrence | None] | None = None,
        clock: Callable[[], int] = monotonic_ms,
        tick_ms: int = 50,
        on_alive: Callable[[], None] | None = None,
    ) -> None:
        self.machine = machine
        self.ports = ports
        self.events: queue.Queue[Occurrence | None] = events or queue.Queue()
        self.clock = clock
        self.tick_ms = tick_ms
        self.on_alive = on_alive
        self.last_seq: int | None = None
        self.is_storage_failed = False
        self.is_healthy = True
        self._stopping = False

    # --- called from any thread -------------------------------------------------------------

    def stop(self) -> None:
        self._stopping = True
        self.events.put(None)

    # --- the control thread -----------------------------------------------------------------

    def run(self) -> None:
        """Take events until ``stop``. Every ``tick_ms`` without an event is a ``TICK``."""
        while not self._stopping:
            try:
                item = self.events.get(timeout=self.tick_ms / 1000)
            except queue.Empty:
                item = Occurrence(Event.TICK, at=self.clock())
            if item is None:
                break
            self.dispatch(item)
            if self.is_healthy and self.on_alive is not None:
                self.on_alive()

    def dispatch(self, occ: Occurrence) -> None:
        """One event: ask the core, carry out the actions. Never raises."""
        was_fault = self.machine.state is State.FAULT
        try:
            actions = self.machine.handle(occ)
        except (IllegalTransition, GameRuleError) as exc:  # e.g. a bank seat refused, 621a.11(b)
            self._refused(occ, str(exc))
            return
        except Exception:  # a bug: latch everything safe, stop telling systemd we are alive
            log.exception("internal error handling %s", occ.event)
            self.is_healthy = False
            self._safe("internal error")
            return
        if was_fault and self.machine.state is not State.FAULT:
            self.ports.latch.reset()  # cleared: the outputs may leave their safe values again
        self.execute(actions)

    def _refused(self, occ: Occurrence, why: str) -> None:
        if occ.event in OPERATOR_EVENTS:
            log.info("refused: %s", why)
            self._show(Screen.REFUSED, {"reason": why, "event": str(occ.event)})
        elif occ.event is not Event.TICK:
            log.warning("ignored: %s", why)

    def execute(self, actions: Sequence[Action]) -> None:
        for index, action in enumerate(actions):
            try:
                self._do(action)
            except AuditLogError as exc:
                self._storage_failed(exc, actions[index + 1 :])
                return
            except ControllerError as exc:
                log.error("%s failed: %s", action.kind, exc)
                self._fault_from(action, exc)
                return
            except Exception:
                log.exception("%s failed", action.kind)
                self.is_healthy = False
                self._safe("internal error")
                return

    def _do(self, action: Action) -> None:
        ports = self.ports
        kind = action.kind
        if kind is ActionKind.RECORD:
            assert action.record is not None
            self._record(action.record, action.data)
        elif kind is ActionKind.SHOW:
            assert action.screen is not None
            self._show(action.screen, action.data)
        elif kind is ActionKind.START_SHAKE:
            ports.shaker.start_shake()
        elif kind is ActionKind.STOP_MOTOR:
            ports.shaker.stop()
        elif kind is ActionKind.SAFE_STATE:
            ports.latch.trip(str(action.data.get("fault", "fault")))
        elif kind is ActionKind.REQUEST_READ:
            if ports.sensor is None:
                raise ControllerError("no dice sensor configured")
            ports.sensor.request_read(
                round_number=_int(action.data["round"]), attempt=_int(action.data["attempt"])
            )
        elif kind is ActionKind.DRAW_NUMBER:
            self._draw(_int(action.data["round"]), _int(action.data["attempt"]))

    def _record(self, kind: RecordKind, data: object) -> None:
        assert isinstance(data, dict)
        try:
            self.last_seq = self.ports.log.append(kind, data)
        except AuditLogError:
            log.error("not recorded: %s %s", kind, data)
            raise
        self.is_storage_failed = False

    def _show(self, screen: Screen, data: object) -> None:
        assert isinstance(data, dict)
        self.ports.display.show(screen, data, seq=self.last_seq)
        self.ports.panel.show_status(screen)

    def _draw(self, round_number: int, attempt: int) -> None:
        if self.ports.rng is None:
            raise RngError("no RNG configured")
        value = self.ports.rng.draw(round_number=round_number, attempt=attempt)
        at = self.clock()
        if isinstance(value, Roll):
            self.dispatch(Occurrence(Event.RNG_DRAWN, at=at, roll=value))
        else:
            self.dispatch(Occurrence(Event.RNG_DRAWN, at=at, rng_number=value))

    def _fault_from(self, action: Action, exc: ControllerError) -> None:
        fault = Fault.RNG_FAILURE if isinstance(exc, RngError) else Fault.INTERNAL
        if action.kind is ActionKind.REQUEST_READ:
            fault = Fault.SENSOR_LOST
        self.dispatch(Occurrence(Event.FAULT, at=self.clock(), fault=fault, detail=str(exc)))

    def _storage_failed(self, exc: AuditLogError, rest: Sequence[Action]) -> None:
        """Write-ahead: what was not recorded is not shown. Safety actions still run."""
        log.error("audit log failed: %s", exc)
        self.is_storage_failed = True
        for action in rest:
            if action.kind in _SAFETY_ACTIONS:
                self._do(action)
        context = self.machine.context
        if context.state is not State.FAULT or Fault.STORAGE not in context.active_faults:
            self.dispatch(
                Occurrence(Event.FAULT, at=self.clock(), fault=Fault.STORAGE, detail=str(exc))
            )
        else:
            self._show(Screen.FAULT, {"faults": ["storage"]})

    def _safe(self, reason: str) -> None:
        for step in (self.ports.shaker.drive_safe, lambda: self.ports.latch.trip(reason)):
            try:
                step()
            except Exception:
                log.exception("could not drive the outputs safe")
        try:
            self._show(Screen.FAULT, {"faults": ["internal"]})
        except Exception:
            log.exception("could not show the fault")


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise GameRuleError(f"expected a whole number, got {value!r}")
    return value
