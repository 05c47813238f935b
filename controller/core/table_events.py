"""The table's events as types: one frozen dataclass per kind of event, each with only its
own fields, and ``Occurrence``, the union of them. Every event has ``at`` (milliseconds of the
shell's monotonic clock) and ``wall`` (its UTC milliseconds, when the shell gave them); a key or
a command of a person (``KeyEvent``) says whether the supervisor key was on, and who. The
``Event`` enum names each kind (``occ.event``): the transition table's key. Pure: no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from controller.core.dice import DiceReading, Roll
from controller.core.software import SoftwareCheck, SoftwareIdentity
from controller.core.table_types import (
    ClockSync,
    CorrectionReason,
    Event,
    Fault,
    Mode,
    ShuffleReason,
    VoidReason,
)
from controller.errors import GameRuleError


@dataclass(frozen=True, slots=True, kw_only=True)
class _Event:
    event: ClassVar[Event]  # the kind: each class names its own
    at: int  # milliseconds of the shell's monotonic clock
    wall: int | None = None  # UTC milliseconds when it happened (the shell's wall clock)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyEvent(_Event):
    """A key of the dealer's panel, or a person's command at the service terminal: whether the
    supervisor key was on, who (the employee id typed at the terminal, and the operating
    system's account that sent it, SO_PEERCRED), and a note."""

    supervisor: bool = False
    employee: str | None = None
    uid: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class NoMoreBets(KeyEvent):
    """The dealer's key: bets close (``bank_seat``: the bank a table-management system
    names; None: the one selected)."""

    event: ClassVar[Event] = Event.NO_MORE_BETS
    bank_seat: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Shuffled(KeyEvent):
    """621a.11(b): the dealer shuffled for a new game (None: a new game, the dealer's key)."""

    event: ClassVar[Event] = Event.SHUFFLED
    shuffle: ShuffleReason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShakePressed(KeyEvent):
    """The player's shake button (``delay_ms``: the random delay the shell drew, CSPRNG)."""

    event: ClassVar[Event] = Event.SHAKE_PRESSED
    delay_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShakeDone(_Event):
    """The shaker finished its pattern: its complete cycles."""

    event: ClassVar[Event] = Event.SHAKE_DONE
    cycles: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DiceSet(KeyEvent):
    """Manual mode: the shaker set uncovered on the reader; RNG mode at tiles: the style
    settled."""

    event: ClassVar[Event] = Event.DICE_SET


@dataclass(frozen=True, slots=True, kw_only=True)
class Tick(_Event):
    """Time passes."""

    event: ClassVar[Event] = Event.TICK


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadingTaken(_Event):
    """The sensor's reading of the dice."""

    event: ClassVar[Event] = Event.READING
    reading: DiceReading
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SensorTimedOut(_Event):
    """The sensor did not answer in time."""

    event: ClassVar[Event] = Event.SENSOR_TIMEOUT
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SensorLost(_Event):
    """The sensor stopped answering."""

    event: ClassVar[Event] = Event.SENSOR_LOST
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SensorBack(_Event):
    """The sensor answers again."""

    event: ClassVar[Event] = Event.SENSOR_BACK
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RngDrawn(_Event):
    """The shell drew (and recorded) the RNG's number, or its three virtual dice."""

    event: ClassVar[Event] = Event.RNG_DRAWN
    rng_number: int | None = None
    roll: Roll | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LidOpened(_Event):
    """The lid's switch opened."""

    event: ClassVar[Event] = Event.LID_OPENED
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LidClosed(_Event):
    """The lid's switch closed."""

    event: ClassVar[Event] = Event.LID_CLOSED
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MotorOverran(_Event):
    """The driver cut the motor at its maximum run time."""

    event: ClassVar[Event] = Event.MOTOR_OVERRUN
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tampered(_Event):
    """The shaker was removed or tilted (its tamper loop opened)."""

    event: ClassVar[Event] = Event.TAMPER
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Secured(_Event):
    """The tamper loop is closed again (the fault stays until cleared)."""

    event: ClassVar[Event] = Event.SECURED
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultRaised(_Event):
    """Any other fault (the RNG's self-test, storage, internal)."""

    event: ClassVar[Event] = Event.FAULT
    fault: Fault
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseRound(KeyEvent):
    """The dealer's key: the round closes."""

    event: ClassVar[Event] = Event.CLOSE_ROUND


@dataclass(frozen=True, slots=True, kw_only=True)
class VoidRound(KeyEvent):
    """The dealer's void key (no reason), or the supervisor at the terminal with a reason
    and the round meant, as shown."""

    event: ClassVar[Event] = Event.VOID_ROUND
    void_reason: VoidReason | None = None
    round_meant: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClearFault(KeyEvent):
    """CLEAR FAULT: the dealer's key, the supervisor key, or the terminal (a note: why)."""

    event: ClassVar[Event] = Event.CLEAR_FAULT


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerOn(_Event):
    """The controller started with the context its log holds: the configuration loaded, a
    fault the shell found opening the log, the program verification, the OS's clock, a copy
    of the anchor the shell found missing or behind."""

    event: ClassVar[Event] = Event.POWER_ON
    config: Mapping[str, object] | None = None
    fault: Fault | None = None
    detail: str = ""
    software: SoftwareCheck | None = None
    software_before: SoftwareIdentity | None = None
    clock: ClockSync | None = None
    anchor: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Shutdown(_Event):
    """An orderly stop (SIGTERM, the end of a simulation)."""

    event: ClassVar[Event] = Event.SHUTDOWN


@dataclass(frozen=True, slots=True, kw_only=True)
class BankSeatKey(KeyEvent):
    """The dealer's bank key: the next bank (dealer, seat 1..6), bets open."""

    event: ClassVar[Event] = Event.BANK_SEAT_KEY


@dataclass(frozen=True, slots=True, kw_only=True)
class StyleKey(KeyEvent):
    """The dealer's style key: the next delivery style (or co-banking, bets open)."""

    event: ClassVar[Event] = Event.STYLE_KEY


@dataclass(frozen=True, slots=True, kw_only=True)
class ShiftChange(KeyEvent):
    """A new shift (and a new RNG session); ``employee``: the dealer signed on."""

    event: ClassVar[Event] = Event.SHIFT_CHANGE


@dataclass(frozen=True, slots=True, kw_only=True)
class DiceReplaced(KeyEvent):
    """The supervisor put a new dice set in the shaker (None: the next number)."""

    event: ClassVar[Event] = Event.DICE_REPLACED
    dice_set: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShakerInspected(KeyEvent):
    """The supervisor's end-of-day shaker inspection."""

    event: ClassVar[Event] = Event.SHAKER_INSPECTED


@dataclass(frozen=True, slots=True, kw_only=True)
class CorrectResult(KeyEvent):
    """The supervisor corrects the result meant (round, attempt, as shown) to the dice as
    they lie."""

    event: ClassVar[Event] = Event.CORRECT_RESULT
    result_meant: tuple[int, int]
    dice_seen: Roll
    correction: CorrectionReason


@dataclass(frozen=True, slots=True, kw_only=True)
class TilesInspected(KeyEvent):
    """621a.6(a): a set of tiles inspected by the dealer, verified by the floorperson
    (``employee``)."""

    event: ClassVar[Event] = Event.TILES_INSPECTED
    tile_set: str
    dealer: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeSwitch(KeyEvent):
    """The supervisor switches the mode."""

    event: ClassVar[Event] = Event.MODE_SWITCH
    mode: Mode


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceMode(KeyEvent):
    """The supervisor enters service mode, or leaves it."""

    event: ClassVar[Event] = Event.SERVICE_MODE


@dataclass(frozen=True, slots=True, kw_only=True)
class LampTest(KeyEvent):
    """Service mode: every lamp lit."""

    event: ClassVar[Event] = Event.LAMP_TEST


@dataclass(frozen=True, slots=True, kw_only=True)
class DiceKept(KeyEvent):
    """The supervisor inspected the dice after a dice alarm and keeps them."""

    event: ClassVar[Event] = Event.DICE_KEPT


@dataclass(frozen=True, slots=True, kw_only=True)
class Recall(KeyEvent):
    """The display recalls the round ``back`` (1: the newest), or (None) leaves recall."""

    event: ClassVar[Event] = Event.RECALL
    back: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftwareChecked(_Event):
    """The periodic program verification's result, and the last check's identity (None: none
    known)."""

    event: ClassVar[Event] = Event.SOFTWARE_CHECKED
    software: SoftwareCheck
    software_before: SoftwareIdentity | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockChanged(_Event):
    """The OS's clock became synchronised, or stopped being."""

    event: ClassVar[Event] = Event.CLOCK_CHANGED
    clock: ClockSync


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessCosigned(_Event):
    """The fleet's witness cosigned a checkpoint covering a round's close (the cosigned
    record's data but its round)."""

    event: ClassVar[Event] = Event.COSIGNED
    cosignature: Mapping[str, object]


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackEvidence(_Event):
    """The witness's cosignature of a checkpoint this log's own key signed that this log no
    longer holds."""

    event: ClassVar[Event] = Event.ROLLBACK_EVIDENCE
    cosignature: Mapping[str, object]


@dataclass(frozen=True, slots=True, kw_only=True)
class RngInterrupted(_Event):
    """The RNG cannot draw for a round whose bets closed: its session ended with a restart."""

    event: ClassVar[Event] = Event.RNG_INTERRUPTED
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableTime(_Event):
    """The loop's periodic note: the table's time goes in the log."""

    event: ClassVar[Event] = Event.TABLE_TIME


Occurrence = (
    NoMoreBets
    | Shuffled
    | ShakePressed
    | ShakeDone
    | DiceSet
    | Tick
    | ReadingTaken
    | SensorTimedOut
    | SensorLost
    | SensorBack
    | RngDrawn
    | LidOpened
    | LidClosed
    | MotorOverran
    | Tampered
    | Secured
    | FaultRaised
    | CloseRound
    | VoidRound
    | ClearFault
    | PowerOn
    | Shutdown
    | BankSeatKey
    | StyleKey
    | ShiftChange
    | DiceReplaced
    | ShakerInspected
    | CorrectResult
    | TilesInspected
    | ModeSwitch
    | ServiceMode
    | LampTest
    | DiceKept
    | Recall
    | SoftwareChecked
    | ClockChanged
    | WitnessCosigned
    | RollbackEvidence
    | RngInterrupted
    | TableTime
)

EVENT_TYPES: Mapping[Event, type[Occurrence]] = {
    Event.NO_MORE_BETS: NoMoreBets,
    Event.SHUFFLED: Shuffled,
    Event.SHAKE_PRESSED: ShakePressed,
    Event.SHAKE_DONE: ShakeDone,
    Event.DICE_SET: DiceSet,
    Event.TICK: Tick,
    Event.READING: ReadingTaken,
    Event.SENSOR_TIMEOUT: SensorTimedOut,
    Event.SENSOR_LOST: SensorLost,
    Event.SENSOR_BACK: SensorBack,
    Event.RNG_DRAWN: RngDrawn,
    Event.LID_OPENED: LidOpened,
    Event.LID_CLOSED: LidClosed,
    Event.MOTOR_OVERRUN: MotorOverran,
    Event.TAMPER: Tampered,
    Event.SECURED: Secured,
    Event.FAULT: FaultRaised,
    Event.CLOSE_ROUND: CloseRound,
    Event.VOID_ROUND: VoidRound,
    Event.CLEAR_FAULT: ClearFault,
    Event.POWER_ON: PowerOn,
    Event.SHUTDOWN: Shutdown,
    Event.BANK_SEAT_KEY: BankSeatKey,
    Event.STYLE_KEY: StyleKey,
    Event.SHIFT_CHANGE: ShiftChange,
    Event.DICE_REPLACED: DiceReplaced,
    Event.SHAKER_INSPECTED: ShakerInspected,
    Event.CORRECT_RESULT: CorrectResult,
    Event.TILES_INSPECTED: TilesInspected,
    Event.MODE_SWITCH: ModeSwitch,
    Event.SERVICE_MODE: ServiceMode,
    Event.LAMP_TEST: LampTest,
    Event.DICE_KEPT: DiceKept,
    Event.RECALL: Recall,
    Event.SOFTWARE_CHECKED: SoftwareChecked,
    Event.CLOCK_CHANGED: ClockChanged,
    Event.COSIGNED: WitnessCosigned,
    Event.ROLLBACK_EVIDENCE: RollbackEvidence,
    Event.RNG_INTERRUPTED: RngInterrupted,
    Event.TABLE_TIME: TableTime,
}


def occurrence(event: Event, **fields: object) -> Occurrence:
    """The event of kind ``event`` with ``fields``, for a sender that holds the kind as data (a
    panel's key, a driver's input, a script). A field its kind does not have is dropped when it
    is empty (None, False, ""), else a TypeError: nothing a sender means is ever lost; one
    without the data its kind needs is refused (GameRuleError)."""
    kind = EVENT_TYPES[event]
    names = {f.name for f in dataclasses.fields(kind)}
    foreign = sorted(k for k, v in fields.items() if k not in names and not _is_empty(v))
    if foreign:
        raise TypeError(f"a {event} event has no {', '.join(foreign)}")
    required = {
        f.name
        for f in dataclasses.fields(kind)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    if not required <= fields.keys():
        raise GameRuleError(f"event {event} lacks its data")
    make: Callable[..., Occurrence] = kind
    return make(**{k: v for k, v in fields.items() if k in names})


def _is_empty(value: object) -> bool:
    return value is None or value is False or value == ""
