"""The table's vocabulary: its modes, states, events, faults, actions, screens and refusals,
the settings of its rounds and the context the core keeps (``controller.core.state`` re-exports
every name). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from controller.core.dealing import DeliveryStyle
from controller.core.dice import ReadPolicy, ReadProgress, Roll, Verdict
from controller.core.dice_monitor import DiceAlarm, DiceWindows
from controller.core.faults import BY_NAME, Clearing, clearing_of
from controller.core.meters import Meters
from controller.core.position import BankHistory, Game
from controller.core.records import RecordKind
from controller.core.result import RoundResult
from controller.core.wagers import Paytable, sum_paytable_a, sum_paytable_b
from controller.errors import ConfigError

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


Step = tuple[RoundContext, list[Action]]


def table_mode(settings: RoundSettings, ctx: RoundContext) -> Mode:
    """The mode the table plays in: the one the supervisor switched to, if this table still
    allows it, else the configured one."""
    if ctx.mode is not None and ctx.mode in settings.allowed_modes:
        return ctx.mode
    return settings.mode


def round_fields(ctx: RoundContext) -> dict[str, object]:
    """The round and attempt, as records and screens carry them."""
    return {"round": ctx.round_number, "attempt": ctx.attempt}
