"""The round state machine. Everything that affects it lives in this file.

Pure: no I/O and no clock reads. Time comes in as event data (``Occurrence.at``, in
milliseconds of a monotonic clock chosen by the shell). Each transition returns the actions the
shell must carry out, in order: a ``RECORD`` always comes before the ``SHOW`` of the same fact,
so that a result is in the log before any display shows it.

``TRANSITIONS[(state, event)]`` names the states an event may lead to; a pair that is not in
the table raises :class:`IllegalTransition` and leaves the state as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TypeVar

from controller.core import record_schema
from controller.core.dealing import DeliveryStyle, dealing_plan
from controller.core.dice import (
    DiceReading,
    DieReading,
    NoRollReason,
    ReadPolicy,
    ReadProgress,
    Roll,
    Verdict,
    next_read,
)
from controller.core.dice_monitor import DiceAlarm, DiceWindows, alarm, evaluate, p_values
from controller.core.faults import BY_NAME, Clearing, clearing_of
from controller.core.meters import Meters, counted
from controller.core.position import BETTING_POSITIONS, BankHistory, Game, table_cycle
from controller.core.records import RecordKind
from controller.core.result import RoundResult, bank_label, result_of_number, result_of_roll
from controller.core.software import SoftwareCheck, SoftwareIdentity
from controller.core.wagers import Paytable, sum_paytable_a, sum_paytable_b
from controller.errors import BankRuleError, ConfigError, GameRuleError, IllegalTransition

_T = TypeVar("_T")
_STANDARD = DeliveryStyle.STANDARD

MIN_SHAKE_CYCLES = 3  # 621a.8(a)(2), 621a.11(i): shaken at least three times
MOTOR_GRACE_MS = 1000  # the core's backstop fires this long after the driver's own limit
HOUR_MS = 3_600_000
DICE_LIFE_MS = 24 * HOUR_MS  # proposed 621a.5(c): dice stay on a table at most 24 hours
DICE_WARNING_MS = 23 * HOUR_MS  # the display warns an hour before
TILE_LIFE_MS = 12 * HOUR_MS  # 621a.3(e): tiles are changed at least every 12 hours
TILE_WARNING_MS = 11 * HOUR_MS  # the display warns an hour before
MAX_DICE_SET_ID = 16  # characters of a dice set's id (ASCII letters, digits, "-")
MAX_EMPLOYEE_ID = 16  # characters of an employee id (ASCII letters and digits)
MAX_NOTE_CHARS = 120  # a person's note on a record (printable ASCII)
RECALL_DEPTH = 11  # AGCO 13.1.1: the round in play and at least the 10 before it


class Mode(StrEnum):
    """Current 621a.6(a): how the number is selected."""

    SHAKER = "shaker"  # (3) a player-activated shaker started by a button at the player's position
    RNG = "rng"  # (1) a computerized RNG that selects and displays a number
    MANUAL = "manual"  # (2) a manual shaker, shaken at least three times, set on the reading area


class VoidReason(StrEnum):
    """Why a whole round is void: every hand void and every wager returned (621a.12(c),(e)),
    and the round ends without a result. A round is never played again: the next one opens.

    The first five are a person's (the supervisor's, at the service terminal, with the
    supervisor key and an employee id); the rest the table's own."""

    WRONG_COUNT = "wrong_count"  # 621a.12(c): the dice totalled wrong and the tiles dealt
    TILE_EXPOSED = "tile_exposed"  # 621a.12(e): a tile of the dealer, Dead Hand or no wager
    DEALER_ERROR = "dealer_error"  # N.J.A.C. 13:69E-1.28P: to rectify a dealer error
    PATRON_COMPLAINT = "patron_complaint"  # N.J.A.C. 13:69E-1.28P: to address a complaint
    EQUIPMENT = "equipment"  # the table's equipment failed the round
    DEALER_KEY = "dealer_key"  # the dealer's void key, before any dice were at rest
    RNG_INTERRUPTED = "rng_interrupted"  # the session committed before its bets closed ended
    MODE_SWITCH = "mode_switch"  # current 621a.6(a): bets closed under the mode left
    SERVICE_MODE = "service_mode"  # 9 NYCRR 5319.58: bets closed when service mode began

    @property
    def is_typed(self) -> bool:
        """A reason a person gives at the service terminal (the rest are the table's)."""
        return self in _TYPED_VOID_REASONS

    @property
    def reshuffles(self) -> bool:
        """621a.12(c),(e): "the tiles shall be reshuffled", which starts a new game
        (621a.11(b): no player banks its first round)."""
        return self in (VoidReason.WRONG_COUNT, VoidReason.TILE_EXPOSED)


_TYPED_VOID_REASONS = frozenset(
    {
        VoidReason.WRONG_COUNT,
        VoidReason.TILE_EXPOSED,
        VoidReason.DEALER_ERROR,
        VoidReason.PATRON_COMPLAINT,
        VoidReason.EQUIPMENT,
    }
)


class CorrectionReason(StrEnum):
    """N.J.A.C. 13:69E-1.28P(d): why the supervisor corrected a result to the dice as they lie
    (never re-rolled, never redrawn: N.J.A.C. 13:69E-1.28G, no secondary selection)."""

    MISREAD = "misread"  # the sensor read a face the dice do not show
    PATRON_COMPLAINT = "patron_complaint"  # a patron disputed the total; the dice confirm it
    SURVEILLANCE_REVIEW = "surveillance_review"  # surveillance's recording shows the dice


class ShuffleReason(StrEnum):
    """Why the dealer shuffled the tiles into a new game (621a.11(b): "the start of the game",
    when no player may bank)."""

    NEW_GAME = "new_game"  # 621a.6(c),(g): the tiles mixed for the first player to arrive
    REMIX = "remix"  # 621a.6(e): a tile turned over while stacking, the set remixed


class RngMode(StrEnum):
    POSITION = "position"  # one number, uniform over the table's positions
    DICE = "dice"  # three virtual dice: total, position and side wagers as with real dice


class State(StrEnum):
    IDLE = "idle"  # bets open
    ARMED = "armed"  # "no more bets": waiting for the shake (or the dealer's dice-set key)
    WAITING = "waiting"  # the shake button was pressed: the motor starts after a random delay
    SHAKING = "shaking"
    SETTLING = "settling"
    READING = "reading"
    DRAWING = "drawing"  # RNG mode: the shell draws and records the number
    RESULT = "result"  # the result is recorded and shown; the dealer closes the round
    NO_ROLL = "no_roll"  # the shake or the reading did not count: reshake
    FAULT = "fault"  # outputs safe; a dealer or a supervisor clears it
    LOCKED = "locked"  # reshake limit reached: only a supervisor clears it


class Event(StrEnum):
    NO_MORE_BETS = "no_more_bets"  # dealer key; carries the bank seat
    SHUFFLED = "shuffled"  # dealer (key or terminal): a new game's shuffle (621a.11(b))
    SHAKE_PRESSED = "shake_pressed"  # the player's shake button
    SHAKE_DONE = "shake_done"  # the shaker finished its pattern; carries the cycle count
    DICE_SET = "dice_set"  # manual mode: the shaker is uncovered on the reading area; RNG mode
    # at tiles: the delivery style is settled, the RNG draws (621a.11(i))
    TICK = "tick"  # time passes
    READING = "reading"  # the sensor's reading of the dice
    SENSOR_TIMEOUT = "sensor_timeout"
    SENSOR_LOST = "sensor_lost"
    SENSOR_BACK = "sensor_back"
    RNG_DRAWN = "rng_drawn"  # the shell drew (and recorded) the RNG's number or dice
    LID_OPENED = "lid_opened"
    LID_CLOSED = "lid_closed"
    MOTOR_OVERRUN = "motor_overrun"  # the driver cut the motor at its maximum run time
    TAMPER = "tamper"  # shaker removed or tilted
    SECURED = "secured"  # the tamper loop is closed again (the fault stays until cleared)
    FAULT = "fault"  # any other fault (RNG self-test, storage, internal); carries its kind
    CLOSE_ROUND = "close_round"  # dealer key
    VOID_ROUND = "void_round"  # dealer key before the dice rest; else the supervisor, a reason
    CLEAR_FAULT = "clear_fault"  # dealer key, or the supervisor key switch
    POWER_ON = "power_on"  # the controller started with the context its log holds
    SHUTDOWN = "shutdown"  # an orderly stop (SIGTERM, the end of a simulation)
    BANK_SEAT_KEY = "bank_seat_key"  # dealer key: the next bank (dealer, seat 1..6), bets open
    STYLE_KEY = "style_key"  # dealer key: the next delivery style, after "no more bets"
    SHIFT_CHANGE = "shift_change"  # dealer key: a new shift (and a new RNG session)
    DICE_REPLACED = "dice_replaced"  # supervisor: a new dice set in the shaker (its id)
    SHAKER_INSPECTED = "shaker_inspected"  # supervisor: the end-of-day shaker inspection
    CORRECT_RESULT = "correct_result"  # supervisor: the result corrected to the dice as they lie
    TILES_INSPECTED = "tiles_inspected"  # 621a.6(a): a set of tiles inspected, verified
    MODE_SWITCH = "mode_switch"  # supervisor: shaker, RNG or manual from the next round on
    SERVICE_MODE = "service_mode"  # supervisor: into service mode (test rounds), or out of it
    LAMP_TEST = "lamp_test"  # service mode: light every lamp
    DICE_KEPT = "dice_kept"  # supervisor: the dice inspected after a dice alarm, and kept
    RECALL = "recall"  # supervisor: the display recalls a past round (AGCO 13.1.1), or leaves
    SOFTWARE_CHECKED = "software_checked"  # the periodic program verification's result
    CLOCK_CHANGED = "clock_changed"  # the OS's clock became synchronised, or stopped being
    COSIGNED = "cosigned"  # the fleet's witness cosigned a checkpoint covering a round's close
    # the witness's cosignature of a checkpoint this log's own key signed, that this log no
    # longer holds (larger than the log, or another root at that size): the log went back
    ROLLBACK_EVIDENCE = "rollback_evidence"
    # the RNG cannot draw for a round whose bets closed: its session ended with a restart
    RNG_INTERRUPTED = "rng_interrupted"
    TABLE_TIME = "table_time"  # the loop's periodic note: the table's time goes in the log


class Fault(StrEnum):
    TAMPER = "tamper"
    MOTOR_OVERRUN = "motor_overrun"
    SENSOR_TIMEOUT = "sensor_timeout"
    SENSOR_LOST = "sensor_lost"
    SENSOR_HARDWARE = "sensor_hardware"  # the sensor reports its camera, lighting or lens failed
    RNG_FAILURE = "rng_failure"
    STORAGE = "storage"
    INTERNAL = "internal"
    LOG_ROLLBACK = "log_rollback"  # the log does not extend the checkpoint kept outside it
    # the log has closed rounds and its anchor is in neither place it is kept: deleted, so the
    # rollback check has nothing to check against; a supervisor clears it at the terminal,
    # naming who and why (the log as it is becomes the new anchor)
    ANCHOR_MISSING = "anchor_missing"
    LOG_IDENTITY = "log_identity"  # the signing key is missing or not the log's own
    # a record of the log's tail (or its head) is damaged: nothing can be appended to it
    LOG_DAMAGED = "log_damaged"
    DICE_ALARM = "dice_alarm"  # the dice monitor's alarm, where the table locks on it
    # program verification (N.J.A.C. 13:69E-1.28H, 9 NYCRR 5319.14, AGCO 22 as the issue cites
    # them): the installed software does not match its signed manifest, or that manifest is
    # missing, unsigned or signed by another key; the supervisor clears it
    SOFTWARE_IDENTITY = "software_identity"

    # How each fault is cleared is one table, controller/core/faults.py (with its stable code,
    # its meaning and who clears it, for the status, the supervisor view and docs/faults.md);
    # the rules below read it.

    @property
    def clearing(self) -> Clearing:
        return clearing_of(self.value)

    @property
    def code(self) -> str:
        """The fault's stable code (F01...), as the status and the supervisor view show it."""
        return BY_NAME[self.value].code

    @property
    def needs_supervisor(self) -> bool:
        """A dealer may clear a sensor fault; everything else takes the supervisor key."""
        return self.clearing is not Clearing.DEALER_KEY

    @property
    def needs_restart(self) -> bool:
        """No key clears it: a technician restores the log's signing key (or the damaged log,
        from a backup) and restarts, so that no record is ever signed by another key, nor
        appended to a tree that cannot be rebuilt."""
        return self.clearing is Clearing.RESTART

    @property
    def needs_reason(self) -> bool:
        """Cleared only at the service terminal with the supervisor key, an employee id and a
        note saying why: the panel's key alone never clears it."""
        return self.clearing is Clearing.SUPERVISOR_NOTE

    @property
    def needs_dice_action(self) -> bool:
        """No key alone clears it: the supervisor replaces the dice, or inspects and keeps them
        (issue 15), and that is recorded."""
        return self.clearing is Clearing.DICE_ACTION


# The faults of the dice (their sensor, the shaker's motor): an RNG table does without them.
DICE_FAULTS = frozenset(
    {Fault.SENSOR_TIMEOUT, Fault.SENSOR_LOST, Fault.SENSOR_HARDWARE, Fault.MOTOR_OVERRUN}
)


class ClockSync(StrEnum):
    """Whether the operating system says the wall clock is kept by a time source (adjtimex)."""

    SYNCHRONISED = "synchronised"
    UNSYNCHRONISED = "unsynchronised"
    UNKNOWN = "unknown"  # neither the kernel nor the time service would say

    @classmethod
    def of(cls, synchronised: bool | None) -> ClockSync:
        if synchronised is None:
            return cls.UNKNOWN
        return cls.SYNCHRONISED if synchronised else cls.UNSYNCHRONISED


class ActionKind(StrEnum):
    START_SHAKE = "start_shake"
    STOP_MOTOR = "stop_motor"
    REQUEST_READ = "request_read"
    DRAW_NUMBER = "draw_number"
    SAFE_STATE = "safe_state"  # latch the fault: every output to its safe value
    RECORD = "record"
    SHOW = "show"
    PREPARE_RNG = "prepare_rng"  # an RNG session committed (and shown) before bets close
    CLOSE_RNG = "close_rng"  # reveal the RNG session's seed (an orderly stop)
    REANCHOR = "reanchor"  # keep the log's current checkpoint as its new anchor
    LAMP_TEST = "lamp_test"  # service mode: every lamp lit until the next screen


class Screen(StrEnum):
    """What the table display and the status lamp show."""

    READY = "ready"
    BETS_CLOSED = "bets_closed"
    SHAKING = "shaking"
    SETTLING = "settling"
    READING = "reading"
    DRAWING = "drawing"
    RESULT = "result"
    NO_ROLL = "no_roll"
    FAULT = "fault"
    LOCKED = "locked"
    REFUSED = "refused"  # a notice: the key or button was refused, nothing changed
    RECALL = "recall"  # AGCO 13.1.1: a past round, for the supervisor; the table waits


class Refusal(StrEnum):
    """Why a key or button was refused, as a stable code: the refused screen carries it beside
    the operator's words, so that a display chooses its own message by it (the players' page
    says it plainly, in its languages) and never has to show or parse the words."""

    SUPERVISOR_KEY = "supervisor_key"  # the action needs the supervisor key
    LID_OPEN = "lid_open"
    DICE_MISSING = "dice_missing"  # proposed 621a.5(c)
    DICE_EXPIRED = "dice_expired"
    TILES_MISSING = "tiles_missing"  # 621a.6(a)
    TILES_EXPIRED = "tiles_expired"  # 621a.3(e)
    NO_PLAYER_BANK = "no_player_bank"
    CO_BANK_NEEDS_PLAYER_BANK = "co_bank_needs_player_bank"
    STYLE_TOO_LATE = "style_too_late"
    NO_STYLE_OFFERED = "no_style_offered"
    FAULT_NEEDS_RESTART = "fault_needs_restart"
    FAULT_NEEDS_DICE_ACTION = "fault_needs_dice_action"
    FAULT_NEEDS_TERMINAL = "fault_needs_terminal"
    FAULT_NOT_CLEARED = "fault_not_cleared"
    NOTHING_TO_CLEAR = "nothing_to_clear"
    NOT_RECALLING = "not_recalling"
    IN_RECALL = "in_recall"
    NOT_THE_RESULT_SHOWN = "not_the_result_shown"
    TEST_ROUND = "test_round"
    RNG_RESULT_STANDS = "rng_result_stands"
    CORRECTED_ALREADY = "corrected_already"
    NOTHING_TO_CORRECT = "nothing_to_correct"
    IN_SERVICE_MODE = "in_service_mode"
    NOT_IN_SERVICE_MODE = "not_in_service_mode"
    MODE_ALREADY = "mode_already"
    SENSOR_NOT_CONNECTED = "sensor_not_connected"
    RNG_ONLY_IN_FAULT = "rng_only_in_fault"
    ROUND_NOT_CLOSED = "round_not_closed"
    NOT_BETWEEN_SHAKES = "not_between_shakes"
    VOID_AT_TERMINAL = "void_at_terminal"
    NOT_THE_ROUND_IN_PLAY = "not_the_round_in_play"
    NO_ROUND_IN_PLAY = "no_round_in_play"


@dataclass(frozen=True, slots=True)
class Action:
    """One thing for the shell to do. A ``RECORD`` that ``may_wait`` may share the transaction
    of a later step (fewer, smaller writes): what its step shows or does does not depend on it
    being durable yet. Any other record, and every step that records, shakes for the RNG or
    anchors, makes every waiting record durable first."""

    kind: ActionKind
    record: RecordKind | None = None
    screen: Screen | None = None
    data: Mapping[str, object] = field(default_factory=dict)
    may_wait: bool = False


@dataclass(frozen=True, slots=True)
class Occurrence:
    """An event with its data. Only the fields its event needs are read."""

    event: Event
    at: int
    reading: DiceReading | None = None
    cycles: int | None = None
    bank_seat: int | None = None
    rng_number: int | None = None
    roll: Roll | None = None
    fault: Fault | None = None
    supervisor: bool = False
    detail: str = ""
    config: Mapping[str, object] | None = None  # POWER_ON: the config_loaded record's data
    delay_ms: int | None = None  # SHAKE_PRESSED: the random delay the shell drew (CSPRNG)
    wall: int | None = None  # UTC milliseconds when it happened (the shell's wall clock)
    dice_set: str | None = None  # DICE_REPLACED: the new set's id (None: the next number)
    # who: the employee id typed at the service terminal (a person's action there always has
    # one), and the operating system's account that sent it (SO_PEERCRED)
    employee: str | None = None
    uid: int | None = None
    void_reason: VoidReason | None = None  # VOID_ROUND from the terminal
    round_meant: int | None = None  # VOID_ROUND from the terminal: the round meant, as shown
    # CORRECT_RESULT: the (round, attempt) of the result meant, as shown, the dice as they lie
    result_meant: tuple[int, int] | None = None
    dice_seen: Roll | None = None
    correction: CorrectionReason | None = None
    shuffle: ShuffleReason | None = None  # SHUFFLED (None: a new game, the dealer's key)
    tile_set: str | None = None  # TILES_INSPECTED: the set's id
    dealer: str | None = None  # TILES_INSPECTED: the dealer who inspected (employee verified)
    mode: Mode | None = None  # MODE_SWITCH: the mode to switch to
    back: int | None = None  # RECALL: the round to recall (1: the newest), None: leave recall
    software: SoftwareCheck | None = None  # POWER_ON, SOFTWARE_CHECKED: the check's result
    software_before: SoftwareIdentity | None = None  # the last check's (None: none known)
    clock: ClockSync | None = None  # POWER_ON, CLOCK_CHANGED: the OS's clock status
    # COSIGNED: the cosigned record's data but its round (record_data.cosigned_data)
    cosignature: Mapping[str, object] | None = None
    anchor: str = ""  # POWER_ON: a copy of the log's anchor the shell found missing or behind


@dataclass(frozen=True, slots=True)
class Correction:
    """A result corrected to the dice as they lie (N.J.A.C. 13:69E-1.28P(d)): what the sensor
    read, why, and who. The round's result is the one the dice seen give."""

    dice_read: Roll
    reason: CorrectionReason
    employee: str

    def as_record(self) -> dict[str, object]:
        return {
            "dice_read": self.dice_read.as_record(),
            "reason": str(self.reason),
            "employee": self.employee,
        }


@dataclass(frozen=True, slots=True)
class RoundSettings:
    game: Game = Game.TILES
    mode: Mode = Mode.SHAKER
    rng_mode: RngMode = RngMode.POSITION
    modes: tuple[Mode, ...] = ()  # current 621a.6(a): the others the supervisor may switch to
    # The casino's Rules Submission (621a.9, 621a.11(a),(e); 645a.12(a),(e)): the delivery
    # styles the bank may choose besides 621a.8(d), whether players may bank, and co-banking
    styles: tuple[DeliveryStyle, ...] = tuple(s for s in DeliveryStyle if s is not _STANDARD)
    player_bank: bool = True
    co_banking: bool = False
    lock_on_dice_alarm: bool = False  # issue 15: a dice alarm locks the table after the round
    min_shake_cycles: int = MIN_SHAKE_CYCLES
    settle_ms: int = 1500
    read_timeout_ms: int = 5000
    motor_max_ms: int = 8000
    max_reshakes: int = 5
    read_policy: ReadPolicy = ReadPolicy()
    paytables: tuple[Paytable, ...] = field(
        default_factory=lambda: (sum_paytable_a(), sum_paytable_b())
    )

    def __post_init__(self) -> None:
        if self.min_shake_cycles < MIN_SHAKE_CYCLES:
            raise ConfigError(
                "round.min_shake_cycles", f"must be at least {MIN_SHAKE_CYCLES} (621a.8(a)(2))"
            )
        if self.max_reshakes < 1:
            raise ConfigError("round.max_reshakes", "must be at least 1")
        if self.co_banking and not self.player_bank:
            raise ConfigError(
                "rules.co_banking", "co-banking is for a player bank: rules.player_bank is false"
            )

    @property
    def allowed_modes(self) -> frozenset[Mode]:
        return frozenset((self.mode, *self.modes))


@dataclass(frozen=True, slots=True)
class RoundContext:
    """The whole state of the table as the core sees it. Immutable: each step makes a new one."""

    state: State = State.IDLE
    round_number: int = 1
    attempt: int = 1
    no_rolls: int = 0
    bank_seat: int | None = None
    bank_history: BankHistory = BankHistory()
    is_lid_closed: bool = False
    is_sensor_present: bool = True
    is_secured: bool = True
    deadline: int | None = None
    read_progress: ReadProgress = ReadProgress()
    previous_roll: Verdict | None = None
    active_faults: frozenset[Fault] = frozenset()
    resume_state: State | None = None
    result: RoundResult | None = None
    is_round_open: bool = False  # a round_opened record exists for round_number
    is_running: bool = False  # between power_on and shutdown (a crash leaves it true)
    delivery_style: DeliveryStyle = DeliveryStyle.STANDARD  # 621a.11(i); tiles only
    shake_delay_ms: int = 0  # the delay before the motor of the shake in progress started
    dice_set: str | None = None  # the dice in the shaker (None: none recorded: no shake)
    dice_since: int | None = None  # UTC milliseconds when they were put in (proposed 621a.5(c))
    dice_since_table: int | None = None  # the table's time then (``table_ms``)
    tiles_set: str | None = None  # 621a.6(a): the tiles inspected (None: none: no round)
    tiles_since: int | None = None  # UTC milliseconds of their inspection (621a.3(e))
    tiles_since_table: int | None = None  # the table's time then
    # The table's time: milliseconds that only move forward, kept in the log across restarts
    # (the monotonic clock's steps while running; while off, what the wall clock says passed).
    # A clock set back never lengthens the life of dice or tiles.
    table_ms: int = 0
    last_at: int | None = None  # the monotonic ``at`` of the last event (not kept: per run)
    last_wall: int | None = None  # the last event's UTC milliseconds
    dealer: str | None = None  # the employee id of the dealer on shift (None: not signed on)
    correction: Correction | None = None  # the result shown was corrected (N.J.A.C. 13:69E-1.28P)
    meters: Meters = Meters()
    mode: Mode | None = None  # the mode the supervisor switched to (None: the configured one)
    # In service mode: the live round that bets open again for when it is left (None: live)
    service_round: int | None = None
    co_bank: bool = False  # 645a.12(e): the player bank co-banks this round with the dealer
    dice_counts: DiceWindows = DiceWindows()  # issue 15: the dice monitor's face counts
    dice_alarm: DiceAlarm | None = None  # the monitor's alarm, until the supervisor acts
    recall: int | None = None  # AGCO 13.1.1: the round the display recalls (not kept: a view)
    # the last program verification passed (not kept: each start checks again); a
    # software_identity fault is cleared only while it is true
    is_software_verified: bool = True


S, E = State, Event
_ALL = tuple(State)
_ROUND_IN_PLAY = (S.ARMED, S.NO_ROLL, S.WAITING, S.SHAKING, S.SETTLING, S.READING)
_SHAKE_IN_PROGRESS = (S.WAITING, S.SHAKING, S.SETTLING, S.READING)
_RESUMABLE = (S.IDLE, S.ARMED, S.NO_ROLL, S.DRAWING, S.RESULT, S.LOCKED)
# the dealer's void key, before any dice are at rest (after: the supervisor, with a reason)
_DEALER_VOIDS = (S.ARMED, S.NO_ROLL, S.WAITING, S.SHAKING, S.DRAWING)


def _each(
    states: Sequence[State], event: Event, *targets: State
) -> dict[tuple[State, Event], frozenset[State]]:
    """Rows for one event in several states: to ``targets``, or (none given) staying put."""
    return {(s, event): frozenset(targets or (s,)) for s in states}


def _each_same_or(
    states: Sequence[State], event: Event, *others: State
) -> dict[tuple[State, Event], frozenset[State]]:
    """Rows for one event in several states: staying put, or to one of ``others``."""
    return {(s, event): frozenset((s, *others)) for s in states}


TRANSITIONS: Mapping[tuple[State, Event], frozenset[State]] = {
    # bets open
    (S.IDLE, E.NO_MORE_BETS): frozenset({S.IDLE, S.ARMED, S.DRAWING}),  # IDLE: tiles refused
    (S.IDLE, E.SHUFFLED): frozenset({S.IDLE}),
    (S.IDLE, E.TILES_INSPECTED): frozenset({S.IDLE}),
    (S.IDLE, E.BANK_SEAT_KEY): frozenset({S.IDLE}),
    (S.IDLE, E.SHIFT_CHANGE): frozenset({S.IDLE}),
    (S.ARMED, E.STYLE_KEY): frozenset({S.ARMED}),
    (S.IDLE, E.STYLE_KEY): frozenset({S.IDLE}),  # Pai Gow Poker: co-banking (645a.12(e))
    # the dice and the shaker (supervisor): between shakes, in any state that starts none
    **_each((S.IDLE, S.ARMED, S.NO_ROLL, S.RESULT, S.LOCKED), E.DICE_REPLACED),
    **_each((S.IDLE, S.ARMED, S.NO_ROLL, S.RESULT, S.LOCKED), E.DICE_KEPT),
    # a dice alarm that locked the table is cleared by what the supervisor does with the dice
    (S.FAULT, E.DICE_REPLACED): frozenset({S.FAULT, *_RESUMABLE}),
    (S.FAULT, E.DICE_KEPT): frozenset({S.FAULT, *_RESUMABLE}),
    # AGCO 13.1.1: game recall, with bets open or in a fault; the table waits
    **_each((S.IDLE, S.FAULT), E.RECALL),
    **_each((S.IDLE, S.FAULT), E.SHAKER_INSPECTED),
    # current 621a.6(a): the mode changes between rounds, or (to the RNG) out of a dice fault
    (S.IDLE, E.MODE_SWITCH): frozenset({S.IDLE}),
    (S.FAULT, E.MODE_SWITCH): frozenset({S.FAULT, S.IDLE, S.RESULT}),
    # 9 NYCRR 5319.58: service mode, entered with bets open or from a fault, left from anywhere
    **_each_same_or(_ALL, E.SERVICE_MODE, S.IDLE, S.FAULT),
    **_each(_ALL, E.LAMP_TEST),
    # the shake; pressing the button outside a shake does nothing (no mashing)
    **_each_same_or((S.ARMED, S.NO_ROLL), E.SHAKE_PRESSED, S.WAITING, S.SHAKING),
    **_each(
        (
            S.IDLE,
            S.WAITING,
            S.SHAKING,
            S.SETTLING,
            S.READING,
            S.DRAWING,
            S.RESULT,
            S.FAULT,
            S.LOCKED,
        ),
        E.SHAKE_PRESSED,
    ),
    (S.SHAKING, E.SHAKE_DONE): frozenset({S.SETTLING, S.NO_ROLL, S.LOCKED}),
    **_each_same_or((S.ARMED, S.NO_ROLL), E.DICE_SET, S.READING),
    (S.ARMED, E.DICE_SET): frozenset({S.ARMED, S.READING, S.DRAWING}),  # RNG at tiles: draw
    # time
    **_each(_ALL, E.TICK),
    (S.WAITING, E.TICK): frozenset({S.WAITING, S.SHAKING}),
    (S.SHAKING, E.TICK): frozenset({S.SHAKING, S.FAULT}),
    (S.SETTLING, E.TICK): frozenset({S.SETTLING, S.READING}),
    (S.READING, E.TICK): frozenset({S.READING, S.FAULT}),
    # the reading
    (S.READING, E.READING): frozenset({S.READING, S.RESULT, S.NO_ROLL, S.LOCKED}),
    (S.DRAWING, E.RNG_DRAWN): frozenset({S.RESULT}),
    # the session committed before the bets closed ended with a restart: the round is void
    (S.DRAWING, E.RNG_INTERRUPTED): frozenset({S.IDLE, S.FAULT}),
    # the lid: opening it voids a shake in progress (621a.11(i): cover and reshake)
    **_each_same_or(_SHAKE_IN_PROGRESS, E.LID_OPENED, S.NO_ROLL, S.LOCKED),
    **_each((S.IDLE, S.ARMED, S.NO_ROLL, S.DRAWING, S.RESULT, S.FAULT, S.LOCKED), E.LID_OPENED),
    **_each(_ALL, E.LID_CLOSED),
    # the sensor: a fault in the dice modes, a note in RNG mode
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.SENSOR_TIMEOUT, S.FAULT),
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.SENSOR_LOST, S.FAULT),
    **_each((S.FAULT,), E.SENSOR_TIMEOUT),
    **_each((S.FAULT,), E.SENSOR_LOST),
    **_each(_ALL, E.SENSOR_BACK),
    # faults latch from anywhere
    **_each(_ALL, E.MOTOR_OVERRUN, S.FAULT),
    **_each(_ALL, E.TAMPER, S.FAULT),
    **_each(_ALL, E.SECURED),
    **_each(_ALL, E.FAULT, S.FAULT),
    # program verification: recorded from any state; a failed check latches its fault
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.SOFTWARE_CHECKED, S.FAULT),
    **_each((S.FAULT,), E.SOFTWARE_CHECKED),
    **_each(_ALL, E.CLOCK_CHANGED),
    **_each(_ALL, E.COSIGNED),
    **_each_same_or(tuple(s for s in _ALL if s is not S.FAULT), E.ROLLBACK_EVIDENCE, S.FAULT),
    **_each((S.FAULT,), E.ROLLBACK_EVIDENCE),
    **_each(_ALL, E.TABLE_TIME),
    (S.FAULT, E.CLEAR_FAULT): frozenset({S.FAULT, *_RESUMABLE}),
    (S.LOCKED, E.CLEAR_FAULT): frozenset({S.LOCKED, S.ARMED}),
    # the end of the round
    (S.RESULT, E.CLOSE_ROUND): frozenset({S.IDLE, S.FAULT}),  # FAULT: a dice alarm locks
    # N.J.A.C. 13:69E-1.28P(d): the supervisor corrects a result to the dice as they lie
    (S.RESULT, E.CORRECT_RESULT): frozenset({S.RESULT}),
    # 621a.12(c),(e): the whole round void, every wager returned; the dealer's key only before
    # any dice are at rest, else the supervisor at the terminal (a reason, an employee id)
    **_each_same_or((*_ROUND_IN_PLAY, S.DRAWING), E.VOID_ROUND, S.IDLE, S.FAULT),
    **_each_same_or((S.RESULT, S.LOCKED), E.VOID_ROUND, S.IDLE, S.FAULT),
    (S.FAULT, E.VOID_ROUND): frozenset({S.FAULT}),  # the round is void, the fault stays
    # the controller's life: what its log holds is taken up again, a shake in progress is void
    **_each_same_or((S.IDLE, S.ARMED, S.DRAWING, S.RESULT, S.LOCKED, S.FAULT), E.POWER_ON, S.FAULT),
    **_each(_SHAKE_IN_PROGRESS, E.POWER_ON, S.ARMED, S.FAULT),
    (S.NO_ROLL, E.POWER_ON): frozenset({S.NO_ROLL, S.LOCKED, S.FAULT}),
    **_each(tuple(s for s in _ALL if s not in _SHAKE_IN_PROGRESS), E.SHUTDOWN),
    **_each(_SHAKE_IN_PROGRESS, E.SHUTDOWN, S.ARMED),
}


Step = tuple[RoundContext, list[Action]]


def _record(kind: RecordKind, **data: object) -> Action:
    """A record to write, of the shape its kind's schema gives (record_schema.check)."""
    record_schema.check(kind, data)
    return Action(ActionKind.RECORD, record=kind, data=data)


def _record_may_wait(kind: RecordKind, **data: object) -> Action:
    record_schema.check(kind, data)
    return Action(ActionKind.RECORD, record=kind, data=data, may_wait=True)


def _show(screen: Screen, **data: object) -> Action:
    return Action(ActionKind.SHOW, screen=screen, data=data)


def _refuse(ctx: RoundContext, code: Refusal, why: str) -> Step:
    """A key or button refused: nothing changes; the notice carries the stable ``code`` (a
    display words it for its readers) and ``why`` in the operator's words (the log, the
    supervisor's view)."""
    return ctx, [_show(Screen.REFUSED, code=str(code), reason=why)]


def next_round(ctx: RoundContext) -> RoundContext:
    """The context once a round is closed or voided: bets open for the next round number, a
    fresh attempt, and the bank history moved on (621a.11(c): no two banks in a row). A test
    round of service mode is no round of the game: the live bank history stays as it was."""
    is_test = ctx.service_round is not None
    return replace(
        ctx,
        state=S.IDLE,
        round_number=ctx.round_number + 1,
        attempt=1,
        no_rolls=0,
        bank_history=ctx.bank_history if is_test else ctx.bank_history.after_round(ctx.bank_seat),
        bank_seat=None,
        co_bank=False,
        delivery_style=DeliveryStyle.STANDARD,
        deadline=None,
        read_progress=ReadProgress(),
        result=None,
        correction=None,
    )


def advance_table_time(ctx: RoundContext, occ: Occurrence) -> RoundContext:
    """The table's time once ``occ`` happened: the monotonic clock's step since the last event
    of this run (never backwards), and the event's wall clock noted. POWER_ON starts a run:
    what the wall clock says passed while the table was off counts (nothing if it went
    back), and the monotonic clock is taken up from the event."""
    table_ms = ctx.table_ms
    if occ.event is Event.POWER_ON:
        if occ.wall is not None and ctx.last_wall is not None:
            table_ms += max(0, occ.wall - ctx.last_wall)
    elif ctx.last_at is not None:
        table_ms += max(0, occ.at - ctx.last_at)
    last_at = occ.at if ctx.last_at is None or occ.at > ctx.last_at else ctx.last_at
    if occ.event is Event.POWER_ON:
        last_at = occ.at
    last_wall = ctx.last_wall if occ.wall is None else occ.wall
    if (table_ms, last_at, last_wall) == (ctx.table_ms, ctx.last_at, ctx.last_wall):
        return ctx
    return replace(ctx, table_ms=table_ms, last_at=last_at, last_wall=last_wall)


class _Rules:
    """The handlers. Each returns the next context and the actions; ``step`` checks the result
    against ``TRANSITIONS``."""

    def __init__(self, settings: RoundSettings, wall: int | None = None) -> None:
        self.settings = settings
        self.wall = wall  # the event's UTC milliseconds, when the shell gave them

    # --- helpers ------------------------------------------------------------------------

    def _mode(self, ctx: RoundContext) -> Mode:
        """The mode the table plays in: the one the supervisor switched to, if this table
        still allows it, else the configured one."""
        if ctx.mode is not None and ctx.mode in self.settings.allowed_modes:
            return ctx.mode
        return self.settings.mode

    def _fault_screen(self, ctx: RoundContext, faults: frozenset[Fault]) -> Action:
        """The fault screen; when every active fault is the dice's (the sensor, the motor) and
        this table may play with its RNG, it offers the switch (current 621a.6(a)(1))."""
        shown: dict[str, object] = {"faults": sorted(str(f) for f in faults)}
        if (
            Mode.RNG in self.settings.allowed_modes
            and self._mode(ctx) is not Mode.RNG
            and faults
            and faults <= DICE_FAULTS
        ):
            shown["fallback"] = str(Mode.RNG)
        return _show(Screen.FAULT, **shown)

    def _round(self, ctx: RoundContext) -> dict[str, object]:
        return {"round": ctx.round_number, "attempt": ctx.attempt}

    def _who(self, ctx: RoundContext, occ: Occurrence) -> dict[str, object]:
        """Who did it: the employee id typed at the service terminal, else (a key of the
        dealer's panel) the dealer signed on for the shift, None when none is; and the
        operating system's account of a terminal command."""
        if occ.employee is not None:
            check_employee_id(occ.employee)
        who: dict[str, object] = {
            "employee": occ.employee if occ.employee is not None else ctx.dealer
        }
        return {**who, **self._uid(occ)}

    def _uid(self, occ: Occurrence) -> dict[str, object]:
        return {} if occ.uid is None else {"uid": occ.uid}

    def _no_roll(self, ctx: RoundContext, reason: NoRollReason) -> Step:
        """The shake or the reading does not count: reshake, or lock at the limit."""
        actions = [_record(RecordKind.NO_ROLL, **self._round(ctx), reason=str(reason))]
        no_rolls = ctx.no_rolls + 1
        ctx = replace(
            ctx,
            no_rolls=no_rolls,
            attempt=ctx.attempt + 1,
            deadline=None,
            read_progress=ReadProgress(),
        )
        if no_rolls >= self.settings.max_reshakes:
            actions.append(
                _record(RecordKind.RESHAKE_LIMIT, round=ctx.round_number, no_rolls=no_rolls)
            )
            actions.append(_show(Screen.LOCKED, reason=str(reason), no_rolls=no_rolls))
            return replace(ctx, state=S.LOCKED), actions
        actions.append(
            _show(
                Screen.NO_ROLL,
                **self._round(ctx),  # the next attempt, as bets closed again shows it
                reason=str(reason),
                words=reason.plain_words,
                **self._dice(ctx),
            )
        )
        return replace(ctx, state=S.NO_ROLL), actions

    def _latch(self, ctx: RoundContext, fault: Fault, detail: str) -> Step:
        """One fault latch: motor off, every output safe, the fault recorded and shown."""
        if ctx.state is S.FAULT:
            resume = ctx.resume_state
        elif ctx.state in _SHAKE_IN_PROGRESS:
            resume = S.ARMED  # the shake is void; the player shakes again once cleared
        else:
            resume = ctx.state
        attempt = ctx.attempt + 1 if ctx.state in _SHAKE_IN_PROGRESS else ctx.attempt
        faults = ctx.active_faults | {fault}
        actions = [
            Action(ActionKind.STOP_MOTOR),
            Action(ActionKind.SAFE_STATE, data={"fault": str(fault)}),
            _record(
                RecordKind.FAULT,
                **self._round(ctx),
                fault=str(fault),
                detail=detail,
                state=str(ctx.state),
            ),
        ]
        ctx = replace(
            ctx,
            state=S.FAULT,
            recall=None,
            active_faults=faults,
            resume_state=resume,
            attempt=attempt,
            deadline=None,
            read_progress=ReadProgress(),
        )
        return ctx, [*actions, self._fault_screen(ctx, faults)]

    def _resume(self, ctx: RoundContext) -> Step:
        state = ctx.resume_state or S.IDLE
        ctx = replace(ctx, state=state, resume_state=None)
        return ctx, self._enter_screen(ctx)

    def _enter_screen(self, ctx: RoundContext) -> list[Action]:
        """What to show (and do) on coming back to a resting state."""
        if ctx.state is S.IDLE:
            ready = _show(
                Screen.READY,
                round=ctx.round_number,
                mode=str(self._mode(ctx)),
                **self._bank(ctx),
                **self._dice(ctx),
                **self._tiles(ctx),
                **self._stats(ctx),
                meters=ctx.meters.as_record(),  # the supervisor's view (never the players')
            )
            if self._mode(ctx) is Mode.RNG:
                # 621a.8(a)(1): the session's commitment is recorded and shown before bets
                # close, never inside a draw.
                return [Action(ActionKind.PREPARE_RNG, data={"round": ctx.round_number}), ready]
            return [ready]
        if ctx.state is S.ARMED:
            closed = {
                **self._round(ctx),
                "mode": str(self._mode(ctx)),
                **self._style(ctx),
                **self._dice(ctx),
            }
            return [_show(Screen.BETS_CLOSED, **closed)]
        if ctx.state is S.NO_ROLL:
            return [_show(Screen.NO_ROLL, **self._round(ctx), **self._dice(ctx))]
        if ctx.state is S.LOCKED:
            return [_show(Screen.LOCKED, **self._round(ctx))]
        if ctx.state is S.DRAWING:
            # DRAWING is shown, then the shell draws: it uses the recorded draw of this round and
            # attempt if there is one and never draws a second number for it (no secondary
            # selection); the number comes back as RNG_DRAWN.
            return [
                _show(Screen.DRAWING, **self._round(ctx), **self._style(ctx)),
                Action(ActionKind.DRAW_NUMBER, data=self._round(ctx)),
            ]
        assert ctx.state is S.RESULT
        assert ctx.result is not None
        shown: dict[str, object] = {"result": ctx.result.as_record(), "mode": str(self._mode(ctx))}
        if ctx.correction is not None:
            shown["corrected"] = ctx.correction.as_record()  # N.J.A.C. 13:69E-1.28P(d)
        if self.settings.game is Game.TILES:
            # 621a.8(d), 621a.9: which stacks go where, for the dealer and surveillance
            plan = dealing_plan(self.settings.game, ctx.delivery_style, ctx.result.position)
            shown["dealing_plan"] = plan.as_record()
        if ctx.dice_alarm is not None and ctx.dice_alarm.round == ctx.round_number:
            shown.update(self._stats(ctx))  # the alarm this result raised, for the supervisor
        return [_show(Screen.RESULT, **self._round(ctx), **shown)]

    def _bank(self, ctx: RoundContext) -> dict[str, object]:
        """The bank selected for the next round, and why the rules refuse it if they do."""
        shown: dict[str, object] = {"bank": bank_label(ctx.bank_seat)}
        if ctx.co_bank:
            shown["co_bank"] = True
        try:
            ctx.bank_history.check(ctx.bank_seat)
        except GameRuleError as exc:
            shown["bank_refused"] = str(exc)
            if isinstance(exc, BankRuleError) and exc.rule:  # for the page's own words
                shown["bank_refused_rule"] = {"rule": exc.rule, "seat": exc.seat}
        return shown

    def _dice(self, ctx: RoundContext) -> dict[str, object]:
        """The dice set in the shaker and, from 23 hours on the table, the warning that it must
        be replaced (proposed 621a.5(c)), or that none is recorded; nothing in RNG mode, which
        uses no dice."""
        if self._mode(ctx) is Mode.RNG:
            return {}
        return {"dice": _life_shown(DICE_LIFE, ctx.dice_set, ctx, self.wall)}

    def _tiles(self, ctx: RoundContext) -> dict[str, object]:
        """The set of tiles in play and, from 11 hours, the warning that it must be changed
        (621a.3(e)), or that none is inspected (621a.6(a)); Pai Gow Poker has no tiles."""
        if self.settings.game is not Game.TILES:
            return {}
        return {"tiles": _life_shown(TILES_LIFE, ctx.tiles_set, ctx, self.wall)}

    def _stats(self, ctx: RoundContext) -> dict[str, object]:
        """Issue 15: the dice's counts over the shift (the players' statistics panel) and the
        set, and the monitor's state (the supervisor's view; never shown to players). Nothing in
        RNG mode. Only bets open carries it (a result does when it raised the alarm): the
        figures cost time that the path to a result does not have."""
        if self._mode(ctx) is Mode.RNG:
            return {}
        counts = ctx.dice_counts
        p = p_values(counts.set)
        monitor = {
            "rolls": counts.test.rolls,
            "tests": [f.as_record() for f in evaluate(counts.test)],
            "p_values": {str(t): None if v is None else f"{v:.4f}" for t, v in p.items()},
        }
        alarm_shown = None if ctx.dice_alarm is None else ctx.dice_alarm.as_record()
        return {
            "stats": {
                "shift": counts.shift.as_record(),
                "set": counts.set.as_record(),
                "monitor": monitor,
                "alarm": alarm_shown,
                "locks": self.settings.lock_on_dice_alarm,
            }
        }

    def _count_roll(self, ctx: RoundContext, roll: Roll) -> Step:
        """Issue 15: a result read from the dice is counted, and the monitor's test run on the
        counts since the dice were put in (or kept). A new alarm is recorded with the result;
        play goes on, or the table locks after the round (``lock_on_dice_alarm``). A test round
        of service mode is not counted: it is not a roll of the game."""
        if ctx.service_round is not None:
            return ctx, []
        counts = ctx.dice_counts.after(roll)
        ctx = replace(ctx, dice_counts=counts)
        figure = None if ctx.dice_alarm is not None else alarm(counts.test)
        if figure is None:
            return ctx, []
        raised = DiceAlarm.raised(figure, round_number=ctx.round_number, rolls=counts.test.rolls)
        record = _record(
            RecordKind.DICE_ALARM,
            **self._round(ctx),
            **figure.as_record(),
            rolls=counts.test.rolls,
            counts=counts.test.as_record(),
            dice_set=ctx.dice_set,
            locks=self.settings.lock_on_dice_alarm,
        )
        return replace(ctx, dice_alarm=raised), [record]

    def _locks_on_alarm(self, ctx: RoundContext) -> bool:
        return (
            self.settings.lock_on_dice_alarm
            and ctx.dice_alarm is not None
            and Fault.DICE_ALARM not in ctx.active_faults
            and ctx.service_round is None
            and self._mode(ctx) is not Mode.RNG
        )

    def _dice_acted(self, ctx: RoundContext, record: Action) -> Step:
        """The supervisor replaced the dice, or kept them after an inspection: the alarm (and
        the fault it locked the table with) is cleared; a table locked by it alone resumes."""
        faults = ctx.active_faults - {Fault.DICE_ALARM}
        ctx = replace(ctx, dice_alarm=None, active_faults=faults)
        if ctx.state is not S.FAULT:
            return ctx, [record, *self._shown_again(ctx)]
        if faults:
            return ctx, [record, self._fault_screen(ctx, faults)]
        ctx, actions = self._resume(ctx)
        return ctx, [record, *actions]

    def _dice_refused(self, ctx: RoundContext) -> Step | None:
        """Proposed 621a.5(c), failing closed: no shake (nor a manual read) without a dice set
        recorded, nor with dice 24 hours on the table. Service mode tests with any dice."""
        if ctx.service_round is not None:
            return None
        why = DICE_LIFE.refusal(ctx, self.wall)
        return None if why is None else _refuse(ctx, *why)

    def _shown_again(self, ctx: RoundContext) -> list[Action]:
        """The screen of a resting state shown again after a change it displays (bets open,
        bets closed, a no roll); nothing else of entering it is done again."""
        if ctx.state not in (S.IDLE, S.ARMED, S.NO_ROLL):
            return []
        return [a for a in self._enter_screen(ctx) if a.kind is ActionKind.SHOW]

    def _style(self, ctx: RoundContext) -> dict[str, object]:
        if self.settings.game is not Game.TILES:
            return {}
        return {"delivery_style": ctx.delivery_style.value}

    def _open_next_round(
        self, ctx: RoundContext, actions: list[Action], *, reshuffled: bool = False
    ) -> Step:
        """Bets open for the next round. ``reshuffled``: the round ended in a reshuffle
        (621a.12(c),(e)), so the next is a new game's first (621a.11(b))."""
        ctx = replace(next_round(ctx), is_round_open=True)
        if reshuffled and ctx.service_round is None:
            ctx = replace(ctx, bank_history=BankHistory.after_shuffle())
        actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
        if self._locks_on_alarm(ctx):
            # issue 15: bets do not open on dice the monitor found loaded
            assert ctx.dice_alarm is not None
            why = f"dice alarm ({ctx.dice_alarm.test}): replace the dice, or inspect and keep them"
            ctx, latched = self._latch(ctx, Fault.DICE_ALARM, why)
            return ctx, [*actions, *latched]
        return ctx, [*actions, *self._enter_screen(ctx)]

    def _result(self, ctx: RoundContext, result: RoundResult) -> Step:
        ctx = replace(ctx, state=S.RESULT, result=result, deadline=None, correction=None)
        record = _record(RecordKind.RESULT, **self._round(ctx), **result.as_record())
        return ctx, [record, *self._enter_screen(ctx)]

    def _settles_wagers(self, ctx: RoundContext) -> bool:
        """Current 621a.5(e)(2)-(4): Sum, Match and Beat It are "based on the value of the dice
        in the manual or player-activated Pai Gow shaker": never on the RNG's."""
        return self._mode(ctx) is not Mode.RNG

    # --- handlers -----------------------------------------------------------------------

    def no_more_bets(self, ctx: RoundContext, occ: Occurrence) -> Step:
        # The bank is the one selected on the panel while bets were open (the event may name
        # one itself, as a table-management system would).
        if ctx.service_round is not None and self._mode(ctx) is Mode.RNG:
            raise GameRuleError("service mode tests the dice: the RNG draws no test numbers")
        if ctx.service_round is None and self.settings.game is Game.TILES:
            # 621a.6(a), 621a.3(e): a round is dealt only from an inspected set, at most 12 hours
            why = TILES_LIFE.refusal(ctx, self.wall)
            if why is not None:
                return _refuse(ctx, *why)
        bank_seat = occ.bank_seat if occ.bank_seat is not None else ctx.bank_seat
        if bank_seat is not None and not self.settings.player_bank:
            raise GameRuleError(_NO_PLAYER_BANK)
        ctx.bank_history.check(bank_seat)  # 621a.11(b),(c): raises, state unchanged
        # co-banking goes with the player bank it was asked for (621a.11(e), 645a.12(e))
        is_co_bank = ctx.co_bank and bank_seat is not None and bank_seat == ctx.bank_seat
        ctx = replace(ctx, bank_seat=bank_seat, co_bank=is_co_bank, attempt=1, no_rolls=0)
        co_bank = {"co_bank": True} if is_co_bank else {}
        # The record may wait for the end of the shake: BETS_CLOSED shows no decision, and a
        # power cut before it is durable leaves the table with bets open, no shake recorded.
        record = _record_may_wait(
            RecordKind.NO_MORE_BETS,
            round=ctx.round_number,
            bank=bank_label(bank_seat),
            mode=str(self._mode(ctx)),
            **co_bank,
            **self._who(ctx, occ),
        )
        if self._mode(ctx) is Mode.RNG and self.settings.game is not Game.TILES:
            # 621a.8(a)(1): the RNG automatically selects a number once bets are closed (Pai
            # Gow Poker has no delivery style to choose first).
            ctx = replace(ctx, state=S.DRAWING)
        else:
            # 621a.11(i): at tiles the bank may choose a style of delivery first, with the
            # dice as with the RNG; the dealer's dice-set key then has the RNG draw.
            ctx = replace(ctx, state=S.ARMED)
        return ctx, [record, *self._enter_screen(ctx)]

    def bank_seat_key(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The dealer's bank key steps through the banks: the dealer, then seat 1..6. A seat
        the bank rules refuse (621a.11(b),(c); 645a.12) is shown with the reason, and "no more
        bets" is refused while it is selected. A table whose Rules Submission offers no player
        bank (621a.11(a), 645a.12(a)) has the dealer bank every round."""
        if not self.settings.player_bank:
            return _refuse(ctx, Refusal.NO_PLAYER_BANK, _NO_PLAYER_BANK)
        banks: list[int | None] = [None, *range(1, BETTING_POSITIONS + 1)]
        ctx = replace(ctx, bank_seat=_after(banks, ctx.bank_seat), co_bank=False)
        return self._bank_selected(ctx, occ)

    def _bank_selected(self, ctx: RoundContext, occ: Occurrence, **extra: object) -> Step:
        """The bank (and ``extra``: co-banking) as selected now: recorded, and shown."""
        shown = self._bank(ctx)
        record = _record(
            RecordKind.BANK_SELECTED,
            round=ctx.round_number,
            bank=shown["bank"],
            refused=shown.get("bank_refused"),
            **extra,
            **self._who(ctx, occ),
        )
        return ctx, [record, *self._enter_screen(ctx)]

    def style_key(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """621a.11(i): once "no more bets" is announced the bank may choose a style of delivery
        (621a.9) that the casino's Rules Submission allows, identified to surveillance before
        the shake (or the draw); none chosen is 621a.8(d). While bets are open the same key
        asks for co-banking (621a.11(e), 645a.12(e)); Pai Gow Poker has no styles."""
        if ctx.state is S.IDLE or self.settings.game is not Game.TILES:
            return self._co_bank(ctx, occ)
        if ctx.attempt != 1 or ctx.no_rolls:
            return _refuse(
                ctx,
                Refusal.STYLE_TOO_LATE,
                "the style of delivery is chosen before the first shake",
            )
        offered = [DeliveryStyle.STANDARD, *self.settings.styles]
        current = ctx.delivery_style if ctx.delivery_style in offered else _STANDARD
        chosen = _after(offered, current)
        if chosen is ctx.delivery_style:
            return _refuse(
                ctx,
                Refusal.NO_STYLE_OFFERED,
                "the casino's Rules Submission allows no style of delivery",
            )
        ctx = replace(ctx, delivery_style=chosen)
        record = _record(
            RecordKind.DELIVERY_STYLE,
            round=ctx.round_number,
            style=chosen.value,
            section=chosen.section,
            **self._who(ctx, occ),
        )
        return ctx, [record, *self._enter_screen(ctx)]

    def _co_bank(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """621a.11(e), 645a.12(e): where the casino offers it, a player bank may ask to co-bank
        the round with the dealer (half the winning wagers each); chosen while bets are open,
        recorded and shown, and carried by "no more bets"."""
        if ctx.state is not S.IDLE:
            raise GameRuleError(
                "Pai Gow Poker has no delivery styles (621a.9 is for tiles); co-banking is"
                " chosen while bets are open (645a.12(e))"
            )
        if not self.settings.co_banking:
            if self.settings.game is Game.TILES:
                raise GameRuleError(
                    "the style of delivery is chosen after no more bets (621a.11(i)); this"
                    " table does not offer co-banking (621a.11(e))"
                )
            raise GameRuleError("this table does not offer co-banking (645a.12(e))")
        if ctx.bank_seat is None:
            return _refuse(
                ctx,
                Refusal.CO_BANK_NEEDS_PLAYER_BANK,
                "co-banking is for a player bank (621a.11(e), 645a.12(e))",
            )
        ctx = replace(ctx, co_bank=not ctx.co_bank)
        return self._bank_selected(ctx, occ, co_bank=ctx.co_bank)

    def shift_change(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """A new dealer shift: from the panel's key (the new dealer not named yet), or signed on
        at the service terminal with the dealer's employee id, which the records of the dealer's
        keys carry from then on. In RNG mode the session is revealed and a new one committed,
        shown before the new shift's first bets close (621a.8(a)(1))."""
        _live_only(ctx, "a shift change")
        if occ.employee is not None:
            check_employee_id(occ.employee)
        ctx = replace(ctx, dice_counts=ctx.dice_counts.new_shift(), dealer=occ.employee)
        record = _record(
            RecordKind.SHIFT_CHANGE, round=ctx.round_number, dealer=occ.employee, **self._uid(occ)
        )
        actions = [record]
        if self._mode(ctx) is Mode.RNG:
            actions.append(Action(ActionKind.CLOSE_RNG, data={"reason": "shift_change"}))
        return ctx, [*actions, *self._enter_screen(ctx)]

    def shuffled(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """621a.11(b), 645a.12(b): the dealer shuffled the tiles (or the cards) for a new game,
        by the key or at the terminal: no player banks its first round."""
        _live_only(ctx, "a shuffle of the tiles")
        reason = occ.shuffle or ShuffleReason.NEW_GAME
        ctx = replace(ctx, bank_history=BankHistory.after_shuffle())
        if ctx.bank_seat is not None:  # a seat selected before: refused now, and shown so
            ctx = replace(ctx, co_bank=False)
        kind = RecordKind.TILES_SHUFFLED if self.settings.game is Game.TILES else RecordKind.SHUFFLE
        record = _record(kind, round=ctx.round_number, reason=str(reason), **self._who(ctx, occ))
        return ctx, [record, *self._shown_again(ctx)]

    def tiles_inspected(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """621a.6(a): a set of tiles received at the table is sorted and inspected by the dealer
        and the inspection verified by the floorperson (the supervisor key, the floorperson's
        employee id); its 12 hours (621a.3(e)) start, and it is a new game (621a.11(b))."""
        if self.settings.game is not Game.TILES:
            raise GameRuleError("Pai Gow Poker has no tiles")
        _live_only(ctx, "a tile inspection")
        if not occ.supervisor:
            return _refuse(
                ctx,
                Refusal.SUPERVISOR_KEY,
                "the floorperson verifies the inspection with the supervisor key",
            )
        employee = _need_employee(occ)
        tile_set = _need(occ.tile_set, occ)
        check_dice_set_id(tile_set, what="a tile set id")
        dealer = _need(occ.dealer, occ)
        check_employee_id(dealer)
        record = _record(
            RecordKind.TILES_INSPECTED,
            round=ctx.round_number,
            tile_set=tile_set,
            dealer=dealer,
            employee=employee,
            previous=ctx.tiles_set,
            previous_age_ms=TILES_LIFE.age(ctx, self.wall),
            wall_ms=self.wall,
            table_ms=ctx.table_ms,
            **self._uid(occ),
        )
        ctx = replace(
            ctx,
            tiles_set=tile_set,
            tiles_since=self.wall,
            tiles_since_table=ctx.table_ms,
            bank_history=BankHistory.after_shuffle(),
        )
        return ctx, [record, *self._shown_again(ctx)]

    def shake_pressed(self, ctx: RoundContext, occ: Occurrence) -> Step:
        if ctx.state not in (S.ARMED, S.NO_ROLL) or self._mode(ctx) is not Mode.SHAKER:
            return ctx, []  # mashing, or a button that does nothing in this mode
        if not ctx.is_lid_closed:
            return _refuse(ctx, Refusal.LID_OPEN, "close the lid to shake")
        refused = self._dice_refused(ctx)
        if refused is not None:
            return refused
        # Issue 14: the motor starts after a random delay the shell drew from the OS CSPRNG,
        # so that the moment a player presses cannot time the dice; it goes in the shake's
        # record. The screen answers the press at once.
        delay = occ.delay_ms or 0
        if delay < 0:
            raise GameRuleError(f"a shake delay of {delay} ms")
        shown = _show(Screen.SHAKING, **self._round(ctx))
        if delay:
            ctx = replace(ctx, state=S.WAITING, deadline=occ.at + delay, shake_delay_ms=delay)
            return ctx, [shown]
        ctx, start = self._start_motor(replace(ctx, shake_delay_ms=0), occ)
        return ctx, [*start, shown]

    def _start_motor(self, ctx: RoundContext, occ: Occurrence) -> Step:
        deadline = occ.at + self.settings.motor_max_ms + MOTOR_GRACE_MS
        ctx = replace(ctx, state=S.SHAKING, deadline=deadline)
        return ctx, [Action(ActionKind.START_SHAKE, data=self._round(ctx))]

    def shake_done(self, ctx: RoundContext, occ: Occurrence) -> Step:
        cycles = _need(occ.cycles, occ)
        actions = [
            Action(ActionKind.STOP_MOTOR),
            _record(
                RecordKind.SHAKE, **self._round(ctx), cycles=cycles, delay_ms=ctx.shake_delay_ms
            ),
        ]
        # 621a.8(a)(2): a shake counts only with at least three complete shake cycles.
        if cycles < self.settings.min_shake_cycles:
            ctx, more = self._no_roll(ctx, NoRollReason.TOO_FEW_CYCLES)
            return ctx, actions + more
        ctx = replace(ctx, state=S.SETTLING, deadline=occ.at + self.settings.settle_ms)
        return ctx, [*actions, _show(Screen.SETTLING, **self._round(ctx))]

    def dice_set(self, ctx: RoundContext, occ: Occurrence) -> Step:
        if self._mode(ctx) is Mode.RNG and ctx.state is S.ARMED:
            # 621a.11(i): the style of delivery settled, the RNG selects the number (621a.8(a)(1))
            ctx = replace(ctx, state=S.DRAWING)
            return ctx, self._enter_screen(ctx)
        if self._mode(ctx) is not Mode.MANUAL and ctx.service_round is None:
            raise IllegalTransition(ctx.state, occ.event)  # service mode reads them as they lie
        refused = self._dice_refused(ctx)
        if refused is not None:
            return refused
        # 621a.6(a)(2): the dealer shook the manual shaker and set it uncovered on the reader.
        return self._start_reading(ctx, occ, [_record(RecordKind.SHAKE, **self._round(ctx))])

    def _start_reading(self, ctx: RoundContext, occ: Occurrence, actions: list[Action]) -> Step:
        ctx = replace(
            ctx,
            state=S.READING,
            deadline=occ.at + self.settings.read_timeout_ms,
            read_progress=ReadProgress(),
        )
        return ctx, [
            *actions,
            Action(ActionKind.REQUEST_READ, data=self._round(ctx)),
            _show(Screen.READING, **self._round(ctx)),
        ]

    def tick(self, ctx: RoundContext, occ: Occurrence) -> Step:
        if ctx.deadline is None or occ.at < ctx.deadline:
            return ctx, []
        if ctx.state is S.WAITING:
            return self._start_motor(ctx, occ)
        if ctx.state is S.SHAKING:
            return self._latch(ctx, Fault.MOTOR_OVERRUN, "shake did not end in time")
        if ctx.state is S.SETTLING:
            return self._start_reading(ctx, occ, [])
        if ctx.state is S.READING:
            return self._latch(ctx, Fault.SENSOR_TIMEOUT, "no reading in time")
        return replace(ctx, deadline=None), []

    def reading(self, ctx: RoundContext, occ: Occurrence) -> Step:
        reading = _need(occ.reading, occ)
        step = next_read(
            ctx.read_progress,
            reading,
            policy=self.settings.read_policy,
            previous_roll=ctx.previous_roll,
        )
        verdict = step.verdict
        fields = {
            "image_digest": reading.image_digest,
            "dice": [_die_record(d) for d in reading.dice],
            "verdict": str(verdict.no_roll_reason) if verdict.no_roll_reason else "valid",
        }
        record = _record(RecordKind.READING, **self._round(ctx), **fields)
        if step.needs_another_read:
            # The reading waits for the one that decides: the result (or no roll) and every
            # reading behind it become durable in one transaction, before anything is shown.
            record = _record_may_wait(RecordKind.READING, **self._round(ctx), **fields)
            ctx = replace(
                ctx, read_progress=step.progress, deadline=occ.at + self.settings.read_timeout_ms
            )
            return ctx, [record, Action(ActionKind.REQUEST_READ, data=self._round(ctx))]
        if step.no_roll_reason is not None:
            ctx, actions = self._no_roll(ctx, step.no_roll_reason)
            return ctx, [record, *actions]
        assert step.roll is not None
        result = result_of_roll(
            self.settings.game,
            step.roll,
            bank_seat=ctx.bank_seat,
            paytables=self.settings.paytables,
            settles_wagers=self._settles_wagers(ctx),
        )
        ctx, raised = self._count_roll(replace(ctx, previous_roll=verdict), step.roll)
        ctx, actions = self._result(ctx, result)
        return ctx, [record, actions[0], *raised, *actions[1:]]

    def rng_drawn(self, ctx: RoundContext, occ: Occurrence) -> Step:
        game = self.settings.game
        if self.settings.rng_mode is RngMode.DICE:
            # three virtual dice: their total counts; they settle no side wager (current
            # 621a.5(e)(2)-(4) are the physical dice's)
            roll = _need(occ.roll, occ)
            result = result_of_roll(
                game, roll, bank_seat=ctx.bank_seat, paytables=(), settles_wagers=False
            )
        else:
            number = _need(occ.rng_number, occ)
            positions = len(table_cycle(game))
            if not 1 <= number <= positions:
                raise GameRuleError(f"RNG number {number} is not 1..{positions}")
            result = result_of_number(game, number, bank_seat=ctx.bank_seat)
        return self._result(ctx, result)

    def lid_opened(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """Every opening of the lid is recorded, in a round or not (the meters count them).
        In the player-activated shaker it voids a shake in progress (621a.11(i): cover and
        reshake); in manual mode the dealer uncovers the shaker on purpose."""
        if not ctx.is_lid_closed:
            return ctx, []  # no change (the switch reported again)
        ctx = replace(ctx, is_lid_closed=False)
        record = _record(RecordKind.LID, round=ctx.round_number, opened=True, state=str(ctx.state))
        if ctx.state in _SHAKE_IN_PROGRESS and self._mode(ctx) is Mode.SHAKER:
            ctx, actions = self._no_roll(ctx, NoRollReason.LID_OPENED)
            return ctx, [Action(ActionKind.STOP_MOTOR), record, *actions]
        return ctx, [record]

    def lid_closed(self, ctx: RoundContext, occ: Occurrence) -> Step:
        if ctx.is_lid_closed:
            return ctx, []
        record = _record(RecordKind.LID, round=ctx.round_number, opened=False, state=str(ctx.state))
        return replace(ctx, is_lid_closed=True), [record]

    def _sensor_fault(self, ctx: RoundContext, occ: Occurrence, fault: Fault) -> Step:
        note = _record(RecordKind.SENSOR, fault=str(fault), detail=occ.detail)
        if self._mode(ctx) is Mode.RNG or fault in ctx.active_faults:
            return ctx, [note]  # the RNG table does not need the sensor; a repeat adds nothing
        ctx, actions = self._latch(ctx, fault, occ.detail)
        return ctx, [note, *actions]

    def sensor_timeout(self, ctx: RoundContext, occ: Occurrence) -> Step:
        return self._sensor_fault(ctx, occ, Fault.SENSOR_TIMEOUT)

    def sensor_lost(self, ctx: RoundContext, occ: Occurrence) -> Step:
        ctx = replace(ctx, is_sensor_present=False)
        return self._sensor_fault(ctx, occ, Fault.SENSOR_LOST)

    def sensor_back(self, ctx: RoundContext, occ: Occurrence) -> Step:
        ctx = replace(ctx, is_sensor_present=True)
        return ctx, [_record(RecordKind.SENSOR, present=True, detail=occ.detail)]

    def motor_overrun(self, ctx: RoundContext, occ: Occurrence) -> Step:
        return self._latch(ctx, Fault.MOTOR_OVERRUN, occ.detail)

    def tamper(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """N.J.A.C. 13:69E-1.16A: the shaker is secured to the table; removed or tilted latches.
        The loop's opening is recorded (and counted), whatever the state."""
        opened = [] if not ctx.is_secured else [self._tamper_loop(ctx, closed=False)]
        ctx, actions = self._latch(replace(ctx, is_secured=False), Fault.TAMPER, occ.detail)
        return ctx, [*opened, *actions]

    def secured(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The tamper loop closed again: recorded; the fault stays until cleared."""
        if ctx.is_secured:
            return ctx, []
        return replace(ctx, is_secured=True), [self._tamper_loop(ctx, closed=True)]

    def _tamper_loop(self, ctx: RoundContext, *, closed: bool) -> Action:
        return _record(
            RecordKind.TAMPER_LOOP, round=ctx.round_number, closed=closed, state=str(ctx.state)
        )

    def fault(self, ctx: RoundContext, occ: Occurrence) -> Step:
        return self._latch(ctx, _need(occ.fault, occ), occ.detail)

    def software_checked(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """Program verification, periodically (N.J.A.C. 13:69E-1.28H, 9 NYCRR 5319.14, AGCO 22
        as the issue cites them): every check is recorded; a failed one latches the
        ``software_identity`` fault, which the supervisor clears once a check has passed."""
        check = _need(occ.software, occ)
        ctx = replace(ctx, is_software_verified=not check.is_fault)
        records = self._software_records(ctx, occ, reason="periodic")
        if not check.is_fault or Fault.SOFTWARE_IDENTITY in ctx.active_faults:
            return ctx, records
        ctx, latched = self._latch(ctx, Fault.SOFTWARE_IDENTITY, check.summary())
        return ctx, [*records, *latched]

    def _software_records(self, ctx: RoundContext, occ: Occurrence, *, reason: str) -> list[Action]:
        """The check's record, and ``software_changed`` when the version that runs or the
        manifest's digest differs from the last check's (``occ.software_before``): the log
        keeps the software's changes, as the issue asks."""
        check = _need(occ.software, occ)
        record = _record(
            RecordKind.SOFTWARE_CHECK, round=ctx.round_number, reason=reason, **check.as_record()
        )
        before, now = occ.software_before, check.identity
        if before is None or before == now:
            return [record]
        changed = _record(
            RecordKind.SOFTWARE_CHANGED,
            round=ctx.round_number,
            previous=before.as_record(),
            now=now.as_record(),
        )
        return [record, changed]

    def clock_changed(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The OS's clock became synchronised to its time source, or stopped being: recorded
        once per change (the shell asks now and then, and sends only a change)."""
        clock = _need(occ.clock, occ)
        return ctx, [_record(RecordKind.CLOCK_STATUS, round=ctx.round_number, clock=str(clock))]

    def cosigned(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The witness vouched for the log up to a round's close (the shell sends one per round
        close, controller/fleet): recorded in any state, nothing else changes. It may wait for
        the next step's transaction: nothing shown depends on it."""
        data = _need(occ.cosignature, occ)
        return ctx, [_record_may_wait(RecordKind.COSIGNED, **{**data, "round": ctx.round_number})]

    def rollback_evidence(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The witness cosigned a checkpoint of this log, signed by this log's own key, that
        this log no longer holds: a size larger than the log, or another root at that size.
        The log went back (an older copy of it, a card swapped): the cosignature is recorded as
        the evidence (``rollback_evidence``: the cosigned note as it came, and what the log
        holds) and ``log_rollback`` latches, as when the anchor outside the log disagrees; the
        supervisor clears it, accepting the log as it is (its checkpoint the new anchor)."""
        data = _need(occ.cosignature, occ)
        record = _record(RecordKind.ROLLBACK_EVIDENCE, **{**data, "round": ctx.round_number})
        if Fault.LOG_ROLLBACK in ctx.active_faults:
            return ctx, [record]
        size, held = data.get("size"), data.get("log_size")
        why = f"the witness cosigned this log at {size} records; it holds {held}"
        ctx, latched = self._latch(ctx, Fault.LOG_ROLLBACK, why)
        return ctx, [record, *latched]

    def clear_fault(self, ctx: RoundContext, occ: Occurrence) -> Step:
        if ctx.state is S.LOCKED:
            if not occ.supervisor:
                return _refuse(
                    ctx,
                    Refusal.SUPERVISOR_KEY,
                    "the reshake limit is cleared with the supervisor key",
                )
            ctx = replace(ctx, state=S.ARMED, no_rolls=0)
            record = _record(
                RecordKind.SUPERVISOR_ACTION,
                **self._round(ctx),
                action="clear_reshake_limit",
                **self._who(ctx, occ),
            )
            return ctx, [record, *self._enter_screen(ctx)]
        clearable = {
            f
            for f in ctx.active_faults
            if (occ.supervisor or not f.needs_supervisor)
            and not f.needs_restart
            and not f.needs_dice_action
            and (f is not Fault.SENSOR_LOST or ctx.is_sensor_present)
            and (f is not Fault.TAMPER or ctx.is_secured)
            and (f is not Fault.SOFTWARE_IDENTITY or ctx.is_software_verified)
            and (not f.needs_reason or (occ.employee is not None and bool(occ.detail.strip())))
        }
        if not clearable:
            if Fault.LOG_DAMAGED in ctx.active_faults:
                return _refuse(
                    ctx,
                    Refusal.FAULT_NEEDS_RESTART,
                    "restore the damaged audit log from a backup, then restart",
                )
            if any(f.needs_restart for f in ctx.active_faults):
                return _refuse(
                    ctx,
                    Refusal.FAULT_NEEDS_RESTART,
                    "restore the log's own signing key, then restart",
                )
            if Fault.SOFTWARE_IDENTITY in ctx.active_faults and not ctx.is_software_verified:
                return _refuse(
                    ctx,
                    Refusal.FAULT_NEEDS_RESTART,
                    "the software does not match its signed manifest: reinstall the release"
                    " and restart (paigow-controller verify-software says what differs)",
                )
            if any(f.needs_dice_action for f in ctx.active_faults):
                return _refuse(
                    ctx,
                    Refusal.FAULT_NEEDS_DICE_ACTION,
                    "a dice alarm is cleared by replacing the dice or keeping them after"
                    " inspection (supervisor)",
                )
            if occ.supervisor and any(f.needs_reason for f in ctx.active_faults):
                return _refuse(
                    ctx,
                    Refusal.FAULT_NEEDS_TERMINAL,
                    "a missing anchor is cleared at the service terminal with the supervisor"
                    " key, the employee id and a note saying why",
                )
            return _refuse(
                ctx,
                Refusal.FAULT_NOT_CLEARED,
                "this fault needs the supervisor key or its cause removed",
            )
        remaining = ctx.active_faults - clearable
        why = {"note": occ.detail} if any(f.needs_reason for f in clearable) else {}
        record = _record(
            RecordKind.FAULT_CLEARED,
            round=ctx.round_number,
            faults=sorted(str(f) for f in clearable),
            supervisor=occ.supervisor,
            **self._who(ctx, occ),
            **why,
        )
        ctx = replace(ctx, active_faults=frozenset(remaining))
        # The supervisor accepts the log as it is: its checkpoint becomes the new anchor.
        accepted = {Fault.LOG_ROLLBACK, Fault.ANCHOR_MISSING}
        reanchor = [Action(ActionKind.REANCHOR)] if accepted & clearable else []
        if remaining:
            return ctx, [record, *reanchor, self._fault_screen(ctx, frozenset(remaining))]
        ctx, actions = self._resume(ctx)
        return ctx, [record, *reanchor, *actions]

    def dice_replaced(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """Proposed 621a.5(c): a new dice set, its id typed at the service terminal or the
        next number; the 24 hours start again, in the table's time. Between shakes, with the
        supervisor key and the supervisor's employee id."""
        if not occ.supervisor:
            return _refuse(
                ctx, Refusal.SUPERVISOR_KEY, "replacing the dice needs the supervisor key"
            )
        employee = _need_employee(occ)
        wall = _need(occ.wall, occ)
        dice_set = occ.dice_set if occ.dice_set is not None else _next_dice_set(ctx.dice_set)
        check_dice_set_id(dice_set)
        alarm_cleared = (
            {} if ctx.dice_alarm is None else {"alarm_cleared": str(ctx.dice_alarm.test)}
        )
        record = _record(
            RecordKind.DICE_REPLACED,
            round=ctx.round_number,
            dice_set=dice_set,
            previous=ctx.dice_set,
            previous_age_ms=DICE_LIFE.age(ctx, wall),
            wall_ms=wall,
            table_ms=ctx.table_ms,
            employee=employee,
            **self._uid(occ),
            **alarm_cleared,
        )
        counts = ctx.dice_counts.replaced()
        ctx = replace(
            ctx,
            dice_set=dice_set,
            dice_since=wall,
            dice_since_table=ctx.table_ms,
            dice_counts=counts,
        )
        return self._dice_acted(ctx, record)

    def dice_kept(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """Issue 15: after a dice alarm the supervisor inspected the dice and keeps them (the
        note says what was checked); the monitor's test starts again on them."""
        if not occ.supervisor:
            return _refuse(
                ctx,
                Refusal.SUPERVISOR_KEY,
                "keeping the dice after an alarm needs the supervisor key",
            )
        employee = _need_employee(occ)
        if ctx.dice_alarm is None:
            return _refuse(ctx, Refusal.NOTHING_TO_CLEAR, "there is no dice alarm to clear")
        record = _record(
            RecordKind.SUPERVISOR_ACTION,
            round=ctx.round_number,
            action="dice_kept",
            detail=occ.detail,
            alarm=ctx.dice_alarm.as_record(),
            counts=ctx.dice_counts.test.as_record(),
            wall_ms=_need(occ.wall, occ),
            employee=employee,
            **self._uid(occ),
        )
        ctx = replace(ctx, dice_counts=ctx.dice_counts.kept())
        return self._dice_acted(ctx, record)

    def recall(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """AGCO 13.1.1: with the supervisor key the display recalls one of the last rounds
        (``back`` 1 is the newest, the round in play), clearly marked; it steps through them,
        and leaving shows where the table was. Nothing changes in the round meanwhile (see
        ``step``); a fault ends it. Entering and leaving are recorded, with who."""
        if not occ.supervisor:
            return _refuse(ctx, Refusal.SUPERVISOR_KEY, "game recall needs the supervisor key")
        employee = _need_employee(occ)
        who = {"employee": employee, **self._uid(occ)}
        if occ.back is None:
            if ctx.recall is None:
                return _refuse(ctx, Refusal.NOT_RECALLING, "the display is not recalling a round")
            ctx = replace(ctx, recall=None)
            left = _record(
                RecordKind.SUPERVISOR_ACTION, round=ctx.round_number, action="recall_left", **who
            )
            if ctx.state is S.FAULT:
                return ctx, [left, self._fault_screen(ctx, ctx.active_faults)]
            return ctx, [left, *self._shown_again(ctx)]
        deepest = min(RECALL_DEPTH, ctx.round_number)
        if not 1 <= occ.back <= deepest:
            raise GameRuleError(f"recall goes back 1 to {deepest} rounds, not {occ.back}")
        actions = []
        if ctx.recall is None:
            actions.append(
                _record(
                    RecordKind.SUPERVISOR_ACTION,
                    round=ctx.round_number,
                    action="recall_entered",
                    **who,
                )
            )
        ctx = replace(ctx, recall=occ.back)
        return ctx, [*actions, _show(Screen.RECALL, round=ctx.round_number, back=occ.back)]

    def shaker_inspected(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """N.J.A.C. 13:69E-1.16A: the shaker's end-of-day inspection, by the supervisor."""
        if not occ.supervisor:
            return _refuse(
                ctx, Refusal.SUPERVISOR_KEY, "the shaker inspection needs the supervisor key"
            )
        record = _record(
            RecordKind.SUPERVISOR_ACTION,
            round=ctx.round_number,
            action="shaker_inspected",
            detail=occ.detail,
            wall_ms=_need(occ.wall, occ),
            employee=_need_employee(occ),
            **self._uid(occ),
        )
        return ctx, [record]

    def correct_result(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """N.J.A.C. 13:69E-1.28P(d): the supervisor corrects a result to the dice as they lie
        (a misread, a patron's complaint, surveillance's review), with the supervisor key, a
        reason and an employee id. Never a re-roll and never a redraw (N.J.A.C. 13:69E-1.28G:
        no secondary selection): the round keeps its one ``result``; ``result_corrected``
        follows it with the dice read and the dice seen, and the wagers settle on the dice
        seen. The dealer deals from the corrected count; once tiles went to the wrong
        positions the remedy is the round's void (621a.12(c)). An RNG result is never
        corrected: the RNG's number is the selection (N.J.A.C. 13:69E-1.28G)."""
        if not occ.supervisor:
            return _refuse(
                ctx, Refusal.SUPERVISOR_KEY, "correcting a result needs the supervisor key"
            )
        employee = _need_employee(occ)
        reason = _need(occ.correction, occ)
        seen = _need(occ.dice_seen, occ)
        meant = _need(occ.result_meant, occ)
        result = ctx.result
        assert result is not None
        if meant != (ctx.round_number, ctx.attempt):
            # a command repeated, or two supervisors at once, never corrects another result
            return _refuse(
                ctx,
                Refusal.NOT_THE_RESULT_SHOWN,
                f"round {meant[0]} attempt {meant[1]} is not the result shown (round"
                f" {ctx.round_number} attempt {ctx.attempt}): nothing corrected",
            )
        if ctx.service_round is not None:
            return _refuse(
                ctx, Refusal.TEST_ROUND, "a test round of service mode has no wagers to correct"
            )
        if self._mode(ctx) is Mode.RNG or result.roll is None or result.wagers is None:
            return _refuse(
                ctx,
                Refusal.RNG_RESULT_STANDS,
                "an RNG result is never corrected or redrawn (N.J.A.C. 13:69E-1.28G); void"
                " the round if it cannot stand",
            )
        if ctx.correction is not None:
            return _refuse(
                ctx,
                Refusal.CORRECTED_ALREADY,
                "this result was corrected already: void the round if the correction is wrong",
            )
        read = ctx.correction.dice_read if ctx.correction is not None else result.roll
        if _same_dice(seen, read):
            return _refuse(
                ctx,
                Refusal.NOTHING_TO_CORRECT,
                "the dice seen are the dice read: nothing to correct",
            )
        corrected = result_of_roll(
            self.settings.game,
            seen,
            bank_seat=ctx.bank_seat,
            paytables=self.settings.paytables,
        )
        correction = Correction(read, reason, employee)
        record = _record(
            RecordKind.RESULT_CORRECTED,
            **self._round(ctx),
            dice_read=read.as_record(),
            dice_seen=seen.as_record(),
            reason=str(reason),
            employee=employee,
            note=occ.detail,
            result=corrected.as_record(),
            **self._uid(occ),
        )
        ctx = replace(ctx, result=corrected, correction=correction)
        return ctx, [record, *self._enter_screen(ctx)]

    def mode_switch(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """Current 621a.6(a): the supervisor switches between the modes this table allows,
        between rounds; and out of a fault of the dice (the sensor, the motor) to the RNG, which
        needs neither. Leaving RNG mode reveals its session; entering it commits one, shown
        before the next bets close (621a.8(a)(1)). A round whose bets closed under the old mode
        is void (its RNG commitment, or its dice, belong to the old one)."""
        if not occ.supervisor:
            return _refuse(
                ctx, Refusal.SUPERVISOR_KEY, "switching the mode needs the supervisor key"
            )
        employee = _need_employee(occ)
        if ctx.service_round is not None:
            return _refuse(ctx, Refusal.IN_SERVICE_MODE, "leave service mode to switch the mode")
        to = _need(occ.mode, occ)
        if to not in self.settings.allowed_modes:
            raise GameRuleError(f"{to} mode is not allowed at this table ([table] modes)")
        current = self._mode(ctx)
        if to is current:
            return _refuse(ctx, Refusal.MODE_ALREADY, f"the table is already in {to} mode")
        if to is not Mode.RNG and not ctx.is_sensor_present:
            return _refuse(ctx, Refusal.SENSOR_NOT_CONNECTED, "the dice sensor is not connected")
        if ctx.state is S.FAULT and to is not Mode.RNG:
            return _refuse(
                ctx, Refusal.RNG_ONLY_IN_FAULT, "out of a fault the table switches to the RNG only"
            )
        cleared = ctx.active_faults & DICE_FAULTS if ctx.state is S.FAULT else frozenset()
        actions: list[Action] = []
        resume = ctx.resume_state
        in_play = ctx.state is S.FAULT and resume not in (None, S.IDLE, S.RESULT)
        if in_play:
            actions.append(
                self._void_record(
                    ctx, VoidReason.MODE_SWITCH, occ, state=resume, note=f"mode switch to {to}"
                )
            )
        actions.append(
            _record(
                RecordKind.MODE_CHANGED,
                round=ctx.round_number + 1 if in_play else ctx.round_number,
                previous=str(current),
                mode=str(to),
                cleared=sorted(str(f) for f in cleared),
                employee=employee,
                **self._uid(occ),
            )
        )
        if current is Mode.RNG:
            actions.append(Action(ActionKind.CLOSE_RNG, data={"reason": "mode_switch"}))
        ctx = replace(ctx, mode=to, active_faults=ctx.active_faults - cleared)
        if in_play:
            ctx = replace(next_round(ctx), is_round_open=True, state=S.FAULT, resume_state=S.IDLE)
            actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
        if ctx.state is S.IDLE:
            return ctx, [*actions, *self._enter_screen(ctx)]
        if ctx.active_faults:  # what the RNG cannot do without stays (a tamper, the log)
            return ctx, [*actions, self._fault_screen(ctx, ctx.active_faults)]
        ctx, resumed = self._resume(ctx)
        return ctx, [*actions, *resumed]

    def _void_record(
        self,
        ctx: RoundContext,
        reason: VoidReason,
        occ: Occurrence,
        *,
        state: State | None = None,
        note: str = "",
    ) -> Action:
        """The record of the whole round void (621a.12(c),(e)): where the round stood, why,
        who, that every wager is returned, and whether the tiles are reshuffled (a new game)."""
        return _record(
            RecordKind.VOID,
            **self._round(ctx),
            state=str(ctx.state if state is None else state),
            reason=str(reason),
            wagers="returned",
            reshuffle=reason.reshuffles,
            note=note or occ.detail,
            **self._who(ctx, occ),
        )

    def service_mode(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """9 NYCRR 5319.58: service mode, with the supervisor key. Entered with bets open (a
        round in play without a result is void first); every screen says SERVICE; the rounds
        played in it are test rounds, recorded as ``service_test`` (never a live result, never
        a live record on the feed), so the technician can fire the shaker, read the dice and
        light every lamp. Leaving it, from any state, returns to bets open of the live round (or
        to the fault, if one is active)."""
        if not occ.supervisor:
            return _refuse(ctx, Refusal.SUPERVISOR_KEY, "service mode needs the supervisor key")
        employee = _need_employee(occ)
        if ctx.service_round is not None:
            return self._leave_service(ctx, occ)
        if ctx.state is S.RESULT:
            return _refuse(ctx, Refusal.ROUND_NOT_CLOSED, "close the round before service mode")
        if ctx.state in (S.FAULT, *_SHAKE_IN_PROGRESS, S.DRAWING):
            return _refuse(
                ctx,
                Refusal.NOT_BETWEEN_SHAKES,
                "service mode is entered with bets open, or between shakes",
            )
        actions: list[Action] = []
        if ctx.state is not S.IDLE:  # bets closed, no result: the round is void
            actions.append(self._void_record(ctx, VoidReason.SERVICE_MODE, occ))
            ctx = replace(next_round(ctx), is_round_open=True)
            actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
        actions.append(
            _record(
                RecordKind.SERVICE_MODE,
                round=ctx.round_number,
                entered=True,
                employee=employee,
                **self._uid(occ),
            )
        )
        ctx = replace(ctx, service_round=ctx.round_number)
        shown = [_in_service(a) for a in self._enter_screen(ctx) if a.kind is ActionKind.SHOW]
        return ctx, [*actions, *shown, Action(ActionKind.LAMP_TEST)]

    def _leave_service(self, ctx: RoundContext, occ: Occurrence) -> Step:
        assert ctx.service_round is not None
        tests = ctx.round_number - ctx.service_round
        actions = [
            Action(ActionKind.STOP_MOTOR),
            _record(
                RecordKind.SERVICE_MODE,
                round=ctx.service_round,
                entered=False,
                test_rounds=tests,
                state=str(ctx.state),
            ),
        ]
        ctx = replace(
            ctx,
            state=S.FAULT if ctx.active_faults else S.IDLE,
            resume_state=S.IDLE if ctx.active_faults else None,
            round_number=ctx.service_round,
            service_round=None,
            attempt=1,
            no_rolls=0,
            bank_seat=None,
            co_bank=False,
            delivery_style=DeliveryStyle.STANDARD,
            deadline=None,
            read_progress=ReadProgress(),
            result=None,
        )
        if ctx.active_faults:
            return ctx, [*actions, self._fault_screen(ctx, ctx.active_faults)]
        return ctx, [*actions, *self._enter_screen(ctx)]

    def lamp_test(self, ctx: RoundContext, occ: Occurrence) -> Step:
        if not occ.supervisor:
            return _refuse(ctx, Refusal.SUPERVISOR_KEY, "the lamp test needs the supervisor key")
        if ctx.service_round is None:
            return _refuse(
                ctx, Refusal.NOT_IN_SERVICE_MODE, "the lamp test is part of service mode"
            )
        return ctx, [Action(ActionKind.LAMP_TEST)]

    def close_round(self, ctx: RoundContext, occ: Occurrence) -> Step:
        record = _record(RecordKind.CLOSE, round=ctx.round_number, **self._who(ctx, occ))
        return self._open_next_round(ctx, [record])

    def void_round(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """621a.12(c),(e): all hands void, every wager returned, and the round ends without a
        result (it is never played again: the next round opens). The dealer's void key does
        it only before any dice are at rest (bets closed, a shake, a no roll, the RNG's
        draw); from then on, and over a result, a fault or a locked table, the supervisor
        does it at the service terminal with the supervisor key, a reason and an employee id,
        naming the round. A void for a wrong count or an exposed tile reshuffles the tiles:
        the next round is a new game's first (621a.11(b))."""
        if occ.void_reason is None:
            if ctx.state not in _DEALER_VOIDS:
                return _refuse(
                    ctx,
                    Refusal.VOID_AT_TERMINAL,
                    "the dice are at rest: the supervisor voids the round at the service"
                    " terminal, with a reason",
                )
            reason = VoidReason.DEALER_KEY
        else:
            if not occ.supervisor:
                return _refuse(
                    ctx, Refusal.SUPERVISOR_KEY, "voiding a round needs the supervisor key"
                )
            _need_employee(occ)
            reason = occ.void_reason
            if not reason.is_typed:
                raise GameRuleError(f"{reason} is the table's own reason for a void")
            meant = _need(occ.round_meant, occ)
            if meant != ctx.round_number:
                return _refuse(
                    ctx,
                    Refusal.NOT_THE_ROUND_IN_PLAY,
                    f"round {meant} is not the round in play (round {ctx.round_number}):"
                    " nothing voided",
                )
        if ctx.state is S.FAULT and ctx.resume_state in (None, S.IDLE):
            return _refuse(ctx, Refusal.NO_ROUND_IN_PLAY, "no round is in play: its bets are open")
        voided = {"round": ctx.round_number, "reason": str(reason)}
        actions = [Action(ActionKind.STOP_MOTOR), self._void_record(ctx, reason, occ)]
        if ctx.state is S.FAULT:
            # The round is void; the fault stays until cleared (AGCO 11.1). What the next round
            # shows (and prepares) waits for the clear.
            ctx, opened = self._open_next_round(ctx, actions, reshuffled=reason.reshuffles)
            opened = [a for a in opened if a.kind in (ActionKind.STOP_MOTOR, ActionKind.RECORD)]
            return replace(ctx, state=S.FAULT, resume_state=S.IDLE), opened
        ctx, opened = self._open_next_round(ctx, actions, reshuffled=reason.reshuffles)
        return ctx, _noting_the_void(opened, voided)

    def rng_interrupted(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The RNG cannot draw for this round: the session committed before its bets closed
        ended with a restart (its seed is gone with the process; its escrow is the auditor's).
        A number from a session committed after the bets closed would be a selection the
        players could not have seen committed (621a.8(a)(1)), so the round is void, every wager
        returned, and the next round's session is committed when its bets open."""
        voided = {"round": ctx.round_number, "reason": str(VoidReason.RNG_INTERRUPTED)}
        actions = [self._void_record(ctx, VoidReason.RNG_INTERRUPTED, occ, note=occ.detail)]
        ctx, opened = self._open_next_round(ctx, actions)
        return ctx, _noting_the_void(opened, voided)

    def table_time(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The table's time, kept in the log now and then so that dice and tile life survive
        a power cut however long the table stood idle (the loop sends this periodically)."""
        record = _record(
            RecordKind.TABLE_TIME, round=ctx.round_number, table_ms=ctx.table_ms, wall_ms=self.wall
        )
        return ctx, [record]

    def power_on(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """The first step after power on, from the context the log holds (AGCO 5.1: an
        interrupted game is kept until recovered; AGCO 11.1: an error persists across a power
        cycle until it is cleared).

        A committed result is shown again, never re-drawn or re-read; a shake (or a reading)
        without a committed result is void and the player shakes again (the next attempt); a
        pending RNG draw is taken up again: the shell uses the number recorded for it, and
        without one the round is void (``RNG_INTERRUPTED``: its session ended with the power);
        a fault stays active with every output safe. ``occ.fault`` is a fault the shell found
        while opening the log (a log rolled back behind its anchor): it latches last.

        ``occ.software`` is the program verification at start: recorded (``software_check``,
        and ``software_changed`` when the software differs from the last check's), and a
        failure latches ``software_identity``. ``occ.clock`` says whether the OS's clock is
        synchronised: ``power_on`` carries it, so that a reader knows whether to trust the
        records' times."""
        if ctx.is_running:
            previous = "interrupted"
        else:
            previous = "shutdown" if ctx.is_round_open else "first start"
        started: dict[str, object] = {"previous": previous}
        if occ.software is not None:  # what runs, compared at the next start
            started["software"] = occ.software.identity.as_record()
        if occ.clock is not None:  # whether the times of the records come from a kept clock
            started["clock"] = str(occ.clock)
        if occ.anchor:  # a copy of the anchor rewritten from the other (audit/anchor.py)
            started["anchor"] = occ.anchor
        actions = [_record(RecordKind.POWER_ON, **started)]
        if occ.config is not None:
            actions.append(_record(RecordKind.CONFIG_LOADED, **occ.config))
        software_fault = None
        if occ.software is not None:
            # program verification at start (and a change since the last check recorded)
            ctx = replace(ctx, is_software_verified=not occ.software.is_fault)
            actions.extend(self._software_records(ctx, occ, reason="power_on"))
            if occ.software.is_fault and Fault.SOFTWARE_IDENTITY not in ctx.active_faults:
                software_fault = occ.software.summary()
        ctx = replace(
            ctx,
            is_running=True,
            is_lid_closed=False,
            deadline=None,
            read_progress=ReadProgress(),
            recall=None,
        )
        if ctx.dice_since is not None and ctx.dice_since_table is None and occ.wall is not None:
            # a set recorded before the table kept its time: from now on in the table's time
            since = ctx.table_ms - max(0, occ.wall - ctx.dice_since)
            ctx = replace(ctx, dice_since_table=since)
        if not ctx.is_round_open:
            actions.append(_record(RecordKind.ROUND_OPENED, round=ctx.round_number))
            ctx = replace(ctx, is_round_open=True)
        voided = None
        if ctx.state in _SHAKE_IN_PROGRESS:
            voided = ctx.attempt
            actions.append(
                _record(
                    RecordKind.INTERRUPTED,
                    **self._round(ctx),
                    state=str(ctx.state),
                    reason="power_on",
                )
            )
            ctx = replace(ctx, state=S.ARMED, attempt=ctx.attempt + 1)
        if ctx.state is S.NO_ROLL and ctx.no_rolls >= self.settings.max_reshakes:
            # The reshake limit was lowered in the configuration since the last no roll.
            actions.append(
                _record(RecordKind.RESHAKE_LIMIT, round=ctx.round_number, no_rolls=ctx.no_rolls)
            )
            ctx = replace(ctx, state=S.LOCKED)
        actions.append(
            _record(
                RecordKind.RECOVERY,
                **self._round(ctx),
                state=str(ctx.state),
                interrupted=previous == "interrupted",
                faults=sorted(str(f) for f in ctx.active_faults),
                voided_attempt=voided,
                # issue 15: where the dice monitor stands, so that a reader of the log alone can
                # check its own counts at every start (and knows where counting began on a log
                # older than the monitor)
                dice_counts=ctx.dice_counts.as_record(),
            )
        )
        found = [] if software_fault is None else [(Fault.SOFTWARE_IDENTITY, software_fault)]
        if occ.fault is not None:
            found.append((occ.fault, occ.detail))
        if found:
            for fault, detail in found:
                ctx, latched = self._latch(ctx, fault, detail)
                actions.extend(a for a in latched if a.kind is not ActionKind.SHOW)
            return ctx, [*actions, self._fault_screen(ctx, ctx.active_faults)]
        if ctx.state is S.FAULT:
            faults = sorted(str(f) for f in ctx.active_faults)
            return ctx, [
                *actions,
                Action(ActionKind.STOP_MOTOR),
                Action(ActionKind.SAFE_STATE, data={"fault": ",".join(faults)}),
                self._fault_screen(ctx, ctx.active_faults),
            ]
        return ctx, [*actions, *self._enter_screen(ctx)]

    def shutdown(self, ctx: RoundContext, occ: Occurrence) -> Step:
        """An orderly stop: the motor off, a round in play recorded as interrupted (a shake in
        progress is void), the RNG session revealed (its seed lives in memory only: a round
        whose bets closed under it without a number recorded is void after the restart)."""
        actions = [Action(ActionKind.STOP_MOTOR)]
        if ctx.state is not S.IDLE:
            actions.append(
                _record(
                    RecordKind.INTERRUPTED,
                    **self._round(ctx),
                    state=str(ctx.state),
                    reason="shutdown",
                )
            )
        if ctx.state in _SHAKE_IN_PROGRESS:
            ctx = replace(ctx, state=S.ARMED, attempt=ctx.attempt + 1, deadline=None)
        if self._mode(ctx) is Mode.RNG:
            actions.append(Action(ActionKind.CLOSE_RNG))
        actions.append(_record(RecordKind.SHUTDOWN, round=ctx.round_number))
        return replace(ctx, is_running=False), actions


_NO_PLAYER_BANK = (
    "the casino's Rules Submission offers no player bank at this table (621a.11(a), 645a.12(a))"
)


def _noting_the_void(actions: list[Action], voided: Mapping[str, object]) -> list[Action]:
    """The bets-open screen after a round's void says which round was void and why, so that
    a display that reads screens alone (the console) can say so too."""
    return [
        replace(a, data={**a.data, "voided": dict(voided)})
        if a.kind is ActionKind.SHOW and a.screen is Screen.READY
        else a
        for a in actions
    ]


def _same_dice(one: Roll, other: Roll) -> bool:
    """The same three dice: the red die alike and the two blue alike in either order."""
    return one.red == other.red and sorted(one.blue) == sorted(other.blue)


def _after(choices: Sequence[_T], current: _T) -> _T:
    """What a key that steps through ``choices`` selects next, round and round."""
    return choices[(choices.index(current) + 1) % len(choices)]


def _live_only(ctx: RoundContext, what: str) -> None:
    """A live event of the table (it changes the live game: the bank rules, the RNG session)
    is not taken in service mode, whose records are test records."""
    if ctx.service_round is not None:
        raise GameRuleError(f"{what} is a live event: leave service mode first")


def age_of(table_ms: int, since_table: int | None, since_wall: int | None, wall: int | None) -> int:
    """How long something has been on the table: the table's time since it was put in, and
    never less than the wall clock says (either may be unknown: a set recorded by an older
    version has no table time, an event without a wall clock has no wall time; with both
    unknown it counts as expired: dice and tiles life fails closed)."""
    ages = []
    if since_table is not None:
        ages.append(max(0, table_ms - since_table))
    if since_wall is not None and wall is not None:
        ages.append(max(0, wall - since_wall))
    return max(ages) if ages else _EXPIRED


_EXPIRED = 2**62  # an age past any life


@dataclass(frozen=True, slots=True)
class _Life:
    """A limit on how long a thing stays on the table: the dice in the shaker (proposed
    621a.5(c): 24 hours) or a set of tiles (621a.3(e): changed at least every 12 hours)."""

    life_ms: int
    warning_ms: int
    missing: str  # the refusal when none is recorded
    expired: str  # the refusal once its life is over
    warning: str  # the warning before, with {minutes}
    missing_code: Refusal
    expired_code: Refusal

    def age(self, ctx: RoundContext, wall: int | None) -> int | None:
        """None when nothing is recorded."""
        since_table, since_wall, present = self._of(ctx)
        if present is None:
            return None
        return age_of(ctx.table_ms, since_table, since_wall, wall)

    def _of(self, ctx: RoundContext) -> tuple[int | None, int | None, str | None]:
        if self is DICE_LIFE:
            return ctx.dice_since_table, ctx.dice_since, ctx.dice_set
        return ctx.tiles_since_table, ctx.tiles_since, ctx.tiles_set

    def minutes_left(self, ctx: RoundContext, wall: int | None) -> int | None:
        """From the warning on, the minutes left (0: its life is over); None before."""
        age = self.age(ctx, wall)
        if age is None or age < self.warning_ms:
            return None
        return max(0, -(-(self.life_ms - age) // 60_000))

    def notice(self, ctx: RoundContext, wall: int | None) -> str | None:
        """What the screens say: none recorded, over, or the warning; None while fine."""
        if self.age(ctx, wall) is None:
            return self.missing
        minutes = self.minutes_left(ctx, wall)
        if minutes is None:
            return None
        return self.expired if minutes == 0 else self.warning.format(minutes=minutes)

    def refusal(self, ctx: RoundContext, wall: int | None) -> tuple[Refusal, str] | None:
        """Why play may not go on with it (None: it may): none recorded, or its life over."""
        age = self.age(ctx, wall)
        if age is None:
            return self.missing_code, self.missing
        return (self.expired_code, self.expired) if age >= self.life_ms else None


DICE_LIFE = _Life(
    DICE_LIFE_MS,
    DICE_WARNING_MS,
    missing="no dice set is recorded in the shaker: the supervisor records the dice put in",
    expired="the dice have been on the table 24 hours: the supervisor replaces them (621a.5(c))",
    warning="replace the dice within {minutes} min: 24 hours on the table (621a.5(c))",
    missing_code=Refusal.DICE_MISSING,
    expired_code=Refusal.DICE_EXPIRED,
)
TILES_LIFE = _Life(
    TILE_LIFE_MS,
    TILE_WARNING_MS,
    missing=(
        "no set of tiles is inspected at this table: the dealer inspects one and the"
        " floorperson verifies it (621a.6(a))"
    ),
    expired="the tiles have been in play 12 hours: change them (621a.3(e))",
    warning="change the tiles within {minutes} min: 12 hours in play (621a.3(e))",
    missing_code=Refusal.TILES_MISSING,
    expired_code=Refusal.TILES_EXPIRED,
)


def _life_shown(
    life: _Life, present: str | None, ctx: RoundContext, wall: int | None
) -> dict[str, object]:
    shown: dict[str, object] = {"set": present, "warning": life.notice(ctx, wall)}
    minutes = life.minutes_left(ctx, wall)
    if minutes is not None:  # the warning's figure, for the page's own words
        shown["minutes_left"] = minutes
    return shown


def _next_dice_set(current: str | None) -> str:
    """The next number after a numbered set; "1" after none or a named one."""
    if current is not None and current.isascii() and current.isdigit():
        return str(int(current) + 1)
    return "1"


def check_dice_set_id(dice_set: str, *, what: str = "a dice set id") -> None:
    """A dice set's (or a tile set's) id: 1..16 ASCII letters, digits or "-" (it is shown and
    recorded)."""
    if not (
        0 < len(dice_set) <= MAX_DICE_SET_ID
        and dice_set.isascii()
        and all(c.isalnum() or c == "-" for c in dice_set)
    ):
        raise GameRuleError(
            f"{what} is 1 to {MAX_DICE_SET_ID} letters, digits or '-', not {dice_set[:20]!r}"
        )


def check_employee_id(employee: str) -> None:
    """An employee id: 1..16 ASCII letters and digits (it is recorded and shown)."""
    if not (0 < len(employee) <= MAX_EMPLOYEE_ID and employee.isascii() and employee.isalnum()):
        raise GameRuleError(
            f"an employee id is 1 to {MAX_EMPLOYEE_ID} ASCII letters and digits, not"
            f" {employee[:20]!r}"
        )


def _need_employee(occ: Occurrence) -> str:
    """Every action of a person at the service terminal names who did it."""
    if occ.employee is None:
        raise GameRuleError(f"{occ.event} names the employee who does it")
    check_employee_id(occ.employee)
    return occ.employee


def _need(value: _T | None, occ: Occurrence) -> _T:
    if value is None:
        raise GameRuleError(f"event {occ.event} lacks its data")
    return value


def _die_record(die: DieReading) -> dict[str, object]:
    return {
        "colour": str(die.colour),
        "face": die.face,
        "flat": die.is_flat,
        "inside": die.is_inside,
        "confidence": die.confidence,
        "position": None if die.position is None else list(die.position),
    }


_HANDLERS: Mapping[Event, Callable[[_Rules, RoundContext, Occurrence], Step]] = {
    E.NO_MORE_BETS: _Rules.no_more_bets,
    E.SHUFFLED: _Rules.shuffled,
    E.SHAKE_PRESSED: _Rules.shake_pressed,
    E.SHAKE_DONE: _Rules.shake_done,
    E.DICE_SET: _Rules.dice_set,
    E.TICK: _Rules.tick,
    E.READING: _Rules.reading,
    E.SENSOR_TIMEOUT: _Rules.sensor_timeout,
    E.SENSOR_LOST: _Rules.sensor_lost,
    E.SENSOR_BACK: _Rules.sensor_back,
    E.RNG_DRAWN: _Rules.rng_drawn,
    E.LID_OPENED: _Rules.lid_opened,
    E.LID_CLOSED: _Rules.lid_closed,
    E.MOTOR_OVERRUN: _Rules.motor_overrun,
    E.TAMPER: _Rules.tamper,
    E.SECURED: _Rules.secured,
    E.FAULT: _Rules.fault,
    E.CLOSE_ROUND: _Rules.close_round,
    E.VOID_ROUND: _Rules.void_round,
    E.CLEAR_FAULT: _Rules.clear_fault,
    E.POWER_ON: _Rules.power_on,
    E.SHUTDOWN: _Rules.shutdown,
    E.BANK_SEAT_KEY: _Rules.bank_seat_key,
    E.STYLE_KEY: _Rules.style_key,
    E.SHIFT_CHANGE: _Rules.shift_change,
    E.DICE_REPLACED: _Rules.dice_replaced,
    E.SHAKER_INSPECTED: _Rules.shaker_inspected,
    E.CORRECT_RESULT: _Rules.correct_result,
    E.TILES_INSPECTED: _Rules.tiles_inspected,
    E.RNG_INTERRUPTED: _Rules.rng_interrupted,
    E.TABLE_TIME: _Rules.table_time,
    E.MODE_SWITCH: _Rules.mode_switch,
    E.SERVICE_MODE: _Rules.service_mode,
    E.LAMP_TEST: _Rules.lamp_test,
    E.DICE_KEPT: _Rules.dice_kept,
    E.RECALL: _Rules.recall,
    E.SOFTWARE_CHECKED: _Rules.software_checked,
    E.CLOCK_CHANGED: _Rules.clock_changed,
    E.COSIGNED: _Rules.cosigned,
    E.ROLLBACK_EVIDENCE: _Rules.rollback_evidence,
}


def step(settings: RoundSettings, ctx: RoundContext, occ: Occurrence) -> Step:
    """The pure transition function: the next context and the actions for the shell."""
    allowed = TRANSITIONS.get((ctx.state, occ.event))
    if allowed is None:
        raise IllegalTransition(ctx.state, occ.event)
    if ctx.recall is not None and occ.event in _WAIT_IN_RECALL:
        return _refuse(
            ctx, Refusal.IN_RECALL, "leave recall first: nothing changes in the round meanwhile"
        )
    advanced = advance_table_time(ctx, occ)
    new_ctx, actions = _HANDLERS[occ.event](_Rules(settings, occ.wall), advanced, occ)
    if new_ctx is advanced and not any(a.kind is ActionKind.RECORD for a in actions):
        # nothing changed but the time (a refusal, a tick): the context stays as it was, its
        # time counted from the same instant by the next event that changes it
        new_ctx = ctx
    if new_ctx.state not in allowed:  # pragma: no cover - a bug in this file
        raise AssertionError(f"{ctx.state} --{occ.event}--> {new_ctx.state} is not in the table")
    if ctx.service_round is not None and new_ctx.service_round is not None:
        actions = [a for a in (_in_service(a) for a in actions) if a.kind not in _NOT_IN_SERVICE]
    meters = new_ctx.meters
    for action in actions:
        if action.kind is ActionKind.RECORD and action.record is not None:
            meters = counted(meters, action.record, action.data)
    if meters is not new_ctx.meters:
        new_ctx = replace(new_ctx, meters=meters)
        # a screen built in this step shows the meters with this step's own records counted
        shown = meters.as_record()
        actions = [
            replace(a, data={**a.data, "meters": shown})
            if a.kind is ActionKind.SHOW and "meters" in a.data
            else a
            for a in actions
        ]
    return new_ctx, actions


# AGCO 13.1.1: what the dealer, the supervisor and the players do waits while the display
# recalls a past round (faults still latch, and end the recall).
_WAIT_IN_RECALL = frozenset(
    {
        E.NO_MORE_BETS,
        E.SHUFFLED,
        E.SHAKE_PRESSED,
        E.DICE_SET,
        E.CLOSE_ROUND,
        E.VOID_ROUND,
        E.CLEAR_FAULT,
        E.BANK_SEAT_KEY,
        E.STYLE_KEY,
        E.SHIFT_CHANGE,
        E.DICE_REPLACED,
        E.SHAKER_INSPECTED,
        E.CORRECT_RESULT,
        E.TILES_INSPECTED,
        E.MODE_SWITCH,
        E.SERVICE_MODE,
        E.LAMP_TEST,
        E.DICE_KEPT,
    }
)

# 9 NYCRR 5319.58: in service mode the records of the game are test records, and the RNG is
# not touched (no session prepared, revealed or drawn from).
_TEST_RECORDS = frozenset(
    {
        RecordKind.ROUND_OPENED,
        RecordKind.NO_MORE_BETS,
        RecordKind.SHUFFLE,
        RecordKind.TILES_SHUFFLED,
        RecordKind.SHAKE,
        RecordKind.READING,
        RecordKind.NO_ROLL,
        RecordKind.RESULT,
        RecordKind.VOID,
        RecordKind.RESULT_VOIDED,
        RecordKind.CLOSE,
        RecordKind.RESHAKE_LIMIT,
        RecordKind.BANK_SELECTED,
        RecordKind.DELIVERY_STYLE,
        RecordKind.SHIFT_CHANGE,
        RecordKind.INTERRUPTED,
    }
)
_NOT_IN_SERVICE = frozenset({ActionKind.PREPARE_RNG, ActionKind.CLOSE_RNG, ActionKind.DRAW_NUMBER})


def _in_service(action: Action) -> Action:
    """An action of a step taken in service mode: a game record becomes a ``service_test``
    record naming it; another record with a round (a fault, a recovery) and a screen say
    SERVICE."""
    if action.kind is ActionKind.SHOW:
        return replace(action, data={**action.data, "service": True})
    if action.kind is ActionKind.RECORD and action.record in _TEST_RECORDS:
        assert action.record is not None
        return replace(
            action,
            record=RecordKind.SERVICE_TEST,
            data={"record": str(action.record), **action.data},
        )
    if action.kind is ActionKind.RECORD and "round" in action.data:
        # a live record (a fault, a recovery, a shutdown) made in service mode: its round is a
        # test round's number, and says so
        return replace(action, data={**action.data, "service": True})
    return action


class RoundMachine:
    """The state machine with its context; the daemon's control thread owns one."""

    def __init__(self, settings: RoundSettings, context: RoundContext | None = None) -> None:
        self.settings = settings
        self.context = context or RoundContext()

    @property
    def state(self) -> State:
        return self.context.state

    def handle(self, occ: Occurrence) -> list[Action]:
        """Apply one event. On any error the context is left exactly as it was."""
        self.context, actions = step(self.settings, self.context, occ)
        return actions
