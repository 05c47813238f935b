"""The table's status in one report: its state, every active condition with its stable code
(``controller.core.faults``), the software, the clock, the dice and the tiles, the last
checkpoint and the witness. The same report is what ``paigow-controller status`` prints, what
the service terminal's ``status`` action answers, what the supervisor view shows, and, in one
line, systemd's ``STATUS=``.

Pure: the shell gathers the facts (:class:`Facts`), this module decides what they mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.core.faults import BY_NAME, FaultCode, code_of
from controller.core.position import Game
from controller.core.state import (
    DICE_LIFE,
    TILES_LIFE,
    ClockSync,
    Fault,
    Mode,
    RoundContext,
    State,
)

# What each state means to a supervisor, in a few words
STATE_SAID: Mapping[State, str] = {
    State.IDLE: "bets open",
    State.ARMED: "no more bets",
    State.WAITING: "shake pressed",
    State.SHAKING: "shaking",
    State.SETTLING: "dice settling",
    State.READING: "reading the dice",
    State.DRAWING: "the RNG draws",
    State.RESULT: "result shown",
    State.NO_ROLL: "no roll: reshake",
    State.FAULT: "fault: play stopped",
    State.LOCKED: "locked: reshake limit",
}
ROOT_PREFIX_CHARS = 16  # of the checkpoint's root hash (base64), as shown


@dataclass(frozen=True, slots=True)
class Facts:
    """What the shell found. ``context`` None: no log (or none readable)."""

    table: str
    is_running: bool
    context: RoundContext | None
    wall: int | None  # UTC milliseconds now
    mode: Mode | None = None  # the mode the table plays in (None: not known)
    game: Game | None = None  # None: not known
    log_locked: str | None = None  # the log is read only: why
    behind_anchor: str | None = None  # the log holds fewer records than its anchor: said how
    log_size: int | None = None
    clock: ClockSync | None = None
    software: Mapping[str, object] | None = None  # result, version, manifest
    checkpoint: Mapping[str, object] | None = None  # size, root, time
    witness: Mapping[str, object] | None = None  # the last cosignature's size, time, witness
    details: Mapping[str, str] = field(default_factory=dict)  # a fault's detail, by name
    problems: Sequence[str] = ()  # what could not be read, said as it is


@dataclass(frozen=True, slots=True)
class Condition:
    row: FaultCode
    detail: str = ""

    def as_dict(self) -> dict[str, object]:
        shown: dict[str, object] = {
            "code": self.row.code,
            "name": self.row.name,
            "meaning": self.row.meaning,
            "who": self.row.who,
            "how": self.row.how,
            "stops_play": self.row.stops_play,
        }
        if self.detail:
            shown["detail"] = self.detail
        return shown


def conditions(facts: Facts) -> list[Condition]:
    """Every active condition, in the order of their codes."""
    found: dict[str, str] = {}
    if not facts.is_running:
        found["controller_stopped"] = ""
    ctx = facts.context
    if ctx is not None:
        _found_in_context(ctx, facts, found)
    if facts.log_locked is not None:
        _found_log_locked(ctx, facts.log_locked, found)
    if facts.behind_anchor is not None:  # what the controller latches at its start
        found[str(Fault.LOG_ROLLBACK)] = facts.behind_anchor
    if facts.clock is ClockSync.UNSYNCHRONISED:
        found["clock_unsynchronised"] = ""
    software = facts.software or {}
    if software.get("result") == "no_manifest" and str(Fault.SOFTWARE_IDENTITY) not in found:
        found["software_unverified"] = ""
    rows = [
        Condition(code_of(name), detail or facts.details.get(name, ""))
        for name, detail in found.items()
    ]
    return sorted(rows, key=lambda c: (c.row.code, c.row.name))


def _found_in_context(ctx: RoundContext, facts: Facts, found: dict[str, str]) -> None:
    """The faults the context holds, the reshake limit, and (outside service mode) the dice
    or tiles missing or past their life."""
    for fault in ctx.active_faults:
        found[str(fault)] = facts.details.get(str(fault), "")
    if ctx.state is State.LOCKED:
        found["reshake_limit"] = f"{ctx.no_rolls} no rolls in round {ctx.round_number}"
    if ctx.service_round is not None:
        return
    if facts.mode is not Mode.RNG and DICE_LIFE.refusal(ctx, facts.wall) is not None:
        found["dice_missing" if ctx.dice_set is None else "dice_expired"] = ""
    if facts.game is Game.TILES and TILES_LIFE.refusal(ctx, facts.wall) is not None:
        found["tiles_missing" if ctx.tiles_set is None else "tiles_expired"] = ""


def _found_log_locked(ctx: RoundContext | None, why: str, found: dict[str, str]) -> None:
    """The log read only: its fault, said why (the context's own fault, when it latched one
    with no detail, is given the reason)."""
    latched = {Fault.LOG_DAMAGED, Fault.LOG_IDENTITY}
    if not (ctx is not None and latched & ctx.active_faults):
        found[str(Fault.LOG_DAMAGED) if "damaged" in why else str(Fault.LOG_IDENTITY)] = why
        return
    for fault in (Fault.LOG_DAMAGED, Fault.LOG_IDENTITY):
        if str(fault) in found and not found[str(fault)]:
            found[str(fault)] = why


def _age_s(ms: int | None) -> int | None:
    return None if ms is None else ms // 1000


def report(facts: Facts) -> dict[str, object]:
    """The status as JSON-ready data (what ``status --json`` prints)."""
    active = conditions(facts)
    ctx = facts.context
    stopped = any(c.row.stops_play for c in active)
    shown: dict[str, object] = {
        "table": facts.table,
        "running": facts.is_running,
        # a notice (a clock not synchronised, software unverified) is shown, but play goes on
        "healthy": facts.is_running and not stopped,
        "play_stopped": stopped,
        "faults": [c.as_dict() for c in active],
        "clock": None if facts.clock is None else str(facts.clock),
        "software": dict(facts.software) if facts.software else None,
        "checkpoint": dict(facts.checkpoint) if facts.checkpoint else None,
        "witness": dict(facts.witness) if facts.witness else None,
        "log_size": facts.log_size,
    }
    if facts.problems:
        shown["problems"] = list(facts.problems)
    if ctx is None:
        shown.update(state=None, round=None, dice=None, tiles=None)
        return shown
    shown.update(
        state=str(ctx.state),
        state_said=STATE_SAID[ctx.state],
        round=ctx.round_number,
        mode=None if facts.mode is None else str(facts.mode),
        in_service=ctx.service_round is not None,
        dealer=ctx.dealer,
        dice={
            "set": ctx.dice_set,
            "age_s": _age_s(DICE_LIFE.age(ctx, facts.wall)),
            "life_s": DICE_LIFE.life_ms // 1000,
            "since": ctx.dice_since,
        },
        tiles={
            "set": ctx.tiles_set,
            "age_s": _age_s(TILES_LIFE.age(ctx, facts.wall)),
            "life_s": TILES_LIFE.life_ms // 1000,
            "since": ctx.tiles_since,
        },
    )
    return shown


def exit_code(shown: Mapping[str, object]) -> int:
    """``status``'s exit code: 0 the controller runs and nothing stops play (notices may be
    listed), 1 a fault or another condition stops play, or the controller does not run."""
    return 0 if shown.get("healthy") is True and shown.get("running") is True else 1


def systemd_status(facts: Facts) -> str:
    """The one line of ``STATUS=``: never "ready" while a condition stops play; the codes."""
    active = conditions(facts)
    ctx = facts.context
    where = "" if ctx is None else f", round {ctx.round_number}"
    stopping = [c for c in active if c.row.stops_play]
    notices = [c for c in active if not c.row.stops_play]
    if stopping:
        named = ", ".join(f"{c.row.code} {c.row.name}" for c in stopping)
        text = f"table {facts.table}: FAULT {named}: play stopped{where}"
        details = [c.detail for c in stopping if c.detail]
        if details:
            text += ": " + "; ".join(details)
    else:
        said = "" if ctx is None else f": {STATE_SAID[ctx.state]}"
        text = f"table {facts.table}: ready{said}{where}"
    if notices:
        text += " (" + ", ".join(f"{c.row.code} {c.row.name}" for c in notices) + ")"
    return " ".join(text.split())  # one line, whatever a detail held


def known(name: str) -> bool:
    return name in BY_NAME
