"""Faults that come back are one fault: the hold, the back-off and the restart. Pure: no I/O,
no clock (the shell passes the time, in its monotonic milliseconds).

A fault cleared and raised again within ``window_ms`` of its clear came back: the cause was not
removed (a disk that fails every write, a shaker whose every shake fails). Clearing it again at
once would only make the table flicker between the fault and play, each cycle a pair of
records, while the display showed the fault as cleared each time. So a fault that came back is
*held*: no key clears it for a hold that doubles with each return (``first_hold_ms``, then
twice that, up to ``max_hold_ms``), and the fault screen counts its returns. At
``restart_after`` returns in a row the controller cannot help itself: the control loop stops
feeding systemd's watchdog (and records why), and systemd restarts the service, which starts
afresh from its log (a restart also forgets these counts: what comes back after it is counted
again, and systemd's own start limit stops a service that never stays up).

A fault that stayed cleared for ``window_ms`` is forgotten, and so is every fault cleared before
a round was decided (the table played: the clear was real): its next return starts from zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.evolve import replace
from controller.core.state import Fault

WINDOW_MS = 60_000  # raised again within a minute of its clear: the fault came back
FIRST_HOLD_MS = 5_000  # the first return is held 5 s; each return doubles it
MAX_HOLD_MS = 300_000  # up to 5 minutes
RESTART_AFTER = 5  # five returns in a row: the service restarts


@dataclass(frozen=True, slots=True)
class RecurrencePolicy:
    window_ms: int = WINDOW_MS
    first_hold_ms: int = FIRST_HOLD_MS
    max_hold_ms: int = MAX_HOLD_MS
    restart_after: int = RESTART_AFTER

    def __post_init__(self) -> None:
        if min(self.window_ms, self.first_hold_ms, self.restart_after) < 1:
            raise ValueError("the recurrence policy's window, hold and count are positive")
        if self.max_hold_ms < self.first_hold_ms:
            raise ValueError("the longest hold is shorter than the first")

    def hold_ms(self, returns: int) -> int:
        """How long a fault back for the ``returns``-th time is held (0 before any return)."""
        if returns < 1:
            return 0
        return min(self.max_hold_ms, self.first_hold_ms << min(returns - 1, 32))


@dataclass(frozen=True, slots=True)
class FaultHistory:
    """One fault's latest raise and clear, how many times in a row it came back, and until
    when no key clears it."""

    raised_at: int
    cleared_at: int | None = None
    returns: int = 0
    held_until: int | None = None


@dataclass(frozen=True, slots=True)
class Recurrences:
    """What the control loop knows of each fault's comings and goings. Immutable: ``observe``
    returns the next value."""

    policy: RecurrencePolicy = RecurrencePolicy()
    faults: Mapping[Fault, FaultHistory] = field(default_factory=dict)

    def observe(self, before: frozenset[Fault], after: frozenset[Fault], at: int) -> Recurrences:
        """The active faults went from ``before`` to ``after`` at ``at``."""
        if before == after and not self.faults:
            return self
        faults = dict(self.faults)
        for fault in after - before:
            faults[fault] = self._raised(faults.get(fault), at)
        for fault in before - after:
            history = faults.get(fault)
            faults[fault] = replace(history or FaultHistory(raised_at=at), cleared_at=at)
        window = self.policy.window_ms
        # forgotten: cleared (and not raised again) for longer than the window
        kept = {
            f: h
            for f, h in faults.items()
            if f in after or h.cleared_at is None or at - h.cleared_at <= window
        }
        return replace(self, faults=kept)

    def round_decided(self, active: frozenset[Fault]) -> Recurrences:
        """A round was decided: the table played since the clears, so a fault cleared before
        it and raised again later did not come straight back. Only the active faults are kept."""
        if all(f in active for f in self.faults):
            return self
        return replace(self, faults={f: h for f, h in self.faults.items() if f in active})

    def _raised(self, history: FaultHistory | None, at: int) -> FaultHistory:
        if (
            history is None
            or history.cleared_at is None
            or at - history.cleared_at > self.policy.window_ms
        ):
            return FaultHistory(raised_at=at)
        returns = history.returns + 1
        return FaultHistory(
            raised_at=at, returns=returns, held_until=at + self.policy.hold_ms(returns)
        )

    def held(self, active: frozenset[Fault], at: int) -> dict[Fault, int]:
        """The active faults no key clears yet, with the milliseconds left of their hold."""
        held: dict[Fault, int] = {}
        for fault in sorted(active):
            history = self.faults.get(fault)
            if history is not None and history.held_until is not None and at < history.held_until:
                held[fault] = history.held_until - at
        return held

    def returns(self, active: frozenset[Fault]) -> dict[Fault, int]:
        """How many times in a row each active fault came back (those that did)."""
        return {
            f: h.returns
            for f in sorted(active)
            if (h := self.faults.get(f)) is not None and h.returns > 0
        }

    def refusal(self, active: frozenset[Fault], at: int) -> str | None:
        """Why a key may not clear the faults yet, or None."""
        held = self.held(active, at)
        if not held:
            return None
        parts = [
            f"{fault} came back within {self.policy.window_ms // 1000} s of its clear"
            f" ({self.faults[fault].returns} in a row): held {_seconds(left)} s more"
            for fault, left in held.items()
        ]
        return "; ".join(parts)

    def restart_reason(self) -> str | None:
        """Why the controller should be restarted (``restart_after`` returns in a row), or None."""
        due = sorted(f for f, h in self.faults.items() if h.returns >= self.policy.restart_after)
        if not due:
            return None
        return (
            f"{', '.join(due)} came back {self.policy.restart_after} times in a row, each within"
            f" {self.policy.window_ms // 1000} s of its clear: the watchdog is no longer fed,"
            " so that systemd restarts the controller"
        )

    def shown(self, active: frozenset[Fault], at: int) -> dict[str, object]:
        """What the fault screen adds: each fault's returns, and the seconds left of a hold."""
        shown: dict[str, object] = {}
        returns = self.returns(active)
        if returns:
            shown["returns"] = {str(f): n for f, n in returns.items()}
        held = self.held(active, at)
        if held:
            shown["held_s"] = {str(f): _seconds(left) for f, left in held.items()}
        return shown


def _seconds(ms: int) -> int:
    """Whole seconds, rounded up (a hold of 1 ms left is 1 s, never 0)."""
    return -(-ms // 1000)
