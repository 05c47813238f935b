"""One schema per kind of record (controller/core/records.py): its fields, their types and
bounds, which may be absent, what each means and the rule that decides it, and the format's
version. A record is written through it (:func:`check`: by the core's handlers as they make it,
``table_rules._record``, and by the log for every record it appends, ``log_state.append``,
whoever made it) and read through it (:func:`read`, a frozen dataclass per kind made at
its first read, checked; :func:`read_lenient` for what shows records, the display and the
floor: a field absent or of another type is None, never an error), and ``docs/records.md``
is generated from it (:func:`markdown`). Pure: no I/O.

The schema describes the ``data`` object of a record; how a record is encoded, chained and
signed is the log's (controller/audit/log.py, controller/core/canonical.py), described in
:data:`ENCODING`. A schema never changes what is stored: the records of every log ever written
read through it (fields older logs carry, or lack, are optional and say so).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn, TypeVar

from controller.core.records import RecordKind
from controller.errors import RecordDataError

SCHEMA_VERSION = 1  # of this document as a whole; each kind has its own VERSION
MAX_UID = 2**32 - 1  # a Linux uid_t
MAX_WHOLE = 2**53 - 1  # canonical.py: integers within +-(2**53 - 1)


class RecordShapeError(RecordDataError):
    """A record's data is not of the shape its kind's schema gives."""


def f(
    meaning: str,
    *,
    optional: bool = False,
    null: bool = False,
    low: int | None = None,
    high: int | None = None,
    choices: tuple[str, ...] = (),
    shape: str = "",
) -> Any:
    """A field: what it means (with its rule), whether it may be absent (``optional``) or null
    (``null``), an integer's bounds, a text's ``choices``, an object's ``shape`` (``dice``)."""
    metadata = {
        "meaning": meaning,
        "optional": optional,
        "null": null,
        "low": low,
        "high": high,
        "choices": choices,
        "shape": shape,
    }
    if optional:
        return field(default=None, metadata=metadata)
    return field(metadata=metadata)


_S = TypeVar("_S")


@typing.dataclass_transform(frozen_default=True, kw_only_default=True)
def schema(cls: type[_S]) -> type[_S]:
    """Declares a record kind's schema: a class whose annotated fields (each an :func:`f`)
    are its record's, seen by the type checker as a frozen keyword-only dataclass.

    The dataclass itself is made the first time a record of the kind is read
    (:func:`_made`), not at import: making 45 dataclasses took 75-110 ms of every start of
    the appliance and of every command (issue 30's start-up figure), and a process reads few
    kinds. A declared class is not called: a record is read through :func:`read`,
    :func:`read_lenient` or :func:`read_any`, whose values are instances of their kind's
    declared class (``isinstance`` holds)."""
    return cls


@schema
class Record:
    """The fields any record may carry besides its kind's."""

    def __init__(self, **_: object) -> None:
        raise TypeError(f"a {type(self).__name__} is read through record_schema.read, not made")

    KIND: ClassVar[RecordKind]
    VERSION: ClassVar[int] = 1
    MEANING: ClassVar[str] = ""
    OPEN: ClassVar[bool] = False  # may carry fields its schema does not name

    service: bool | None = f(
        "true: made in service mode (9 NYCRR 5319.58), its round a test round's", optional=True
    )
    uid: int | None = f(
        "the operating system's account that sent the terminal command",
        optional=True,
        low=0,
        high=MAX_UID,
    )


# --- the game ----------------------------------------------------------------------------------

_ROUND = "the round's number"
_ATTEMPT = "the attempt within the round (a no-roll is shaken again: 621a.12(b))"
_EMPLOYEE = "the employee id (1..16 letters and digits), null: a panel key with no one signed on"
_STATE = "the round's state machine state then (controller/core/state.py State)"
_WALL = "the wall-clock time in ms since the epoch, null: unknown"
_BANK = "'dealer' or 'seat N' (621a.11)"
_GAMES = ("tiles", "poker")
_MODES = ("shaker", "manual", "rng")


@schema
class RoundOpened(Record):
    KIND = RecordKind.ROUND_OPENED
    MEANING = "bets open for a new round"
    round: int = f(_ROUND, low=1)


@schema
class NoMoreBets(Record):
    KIND = RecordKind.NO_MORE_BETS
    MEANING = "'no more bets': the round's bets closed, its bank and mode fixed"
    round: int = f(_ROUND, low=1)
    bank: str = f(_BANK)
    mode: str | None = f(
        "the mode the round is played in (current 621a.6(a)); absent in logs before the modes",
        optional=True,
        choices=_MODES,
    )
    employee: str | None = f(_EMPLOYEE, optional=True, null=True)
    co_bank: bool | None = f("the dealer co-banks with the player bank", optional=True)


@schema
class Shuffle(Record):
    KIND = RecordKind.SHUFFLE
    MEANING = "Pai Gow Poker's new game (645a.12(b))"
    round: int = f(_ROUND, low=1)
    reason: str = f("why: new_game")
    employee: str | None = f(_EMPLOYEE, null=True)


@schema
class TilesShuffled(Record):
    KIND = RecordKind.TILES_SHUFFLED
    MEANING = "a new game's shuffle of the tiles (621a.11(b))"
    round: int = f(_ROUND, low=1)
    reason: str = f("why: new_game or remix")
    employee: str | None = f(_EMPLOYEE, null=True)


@schema
class TilesInspected(Record):
    KIND = RecordKind.TILES_INSPECTED
    MEANING = "a set of tiles inspected and verified (621a.6(a), 621a.3(e))"
    round: int = f(_ROUND, low=1)
    tile_set: str = f("the set's id")
    previous: str | None = f("the set in use before, null: none known", null=True)
    previous_age_ms: int | None = f("how long the set before was in use, in table ms", null=True)
    table_ms: int = f("the table's time (ms of play, never going back)")
    wall_ms: int | None = f(_WALL, null=True)
    dealer: str | None = f(_EMPLOYEE, null=True)
    employee: str | None = f(_EMPLOYEE, null=True)


@schema
class Shake(Record):
    KIND = RecordKind.SHAKE
    MEANING = "the dice shaken"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    cycles: int | None = f("the motion sensor's cycle count", optional=True)
    delay_ms: int | None = f("the random delay before the motor started", optional=True)


@schema
class Reading(Record):
    KIND = RecordKind.READING
    MEANING = "the dice sensor's reading of the dice"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    dice: list[Any] = f("the dice as read, one entry per die")
    image_digest: str = f("the SHA-256 of the raw image")
    verdict: str = f("valid, or why not (not_flat, ...)")


@schema
class NoRoll(Record):
    KIND = RecordKind.NO_ROLL
    MEANING = "no roll: the dice are shaken again (621a.12(b))"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    reason: str = f("why (not_flat, too_few_cycles, lid_opened, dice_did_not_move, ...)")


@schema
class Result(Record):
    KIND = RecordKind.RESULT
    MEANING = (
        "the round decided, once (N.J.A.C. 13:69E-1.28G): the dice (or the RNG's number), the"
        " starting position, the side wagers settled (controller/core/result.py decides)"
    )
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    game: str = f("the game", choices=_GAMES)
    bank: str = f(_BANK)
    count: int = f("the count that gives the starting position (621a.10)")
    starting_position: str = f("the hand dealt first: 'dealer', 'seat N' or 'dead hand'")
    dice: dict[str, Any] | None = f(
        "{red, blue: [b1, b2]}: the dice; absent: the RNG's number", optional=True, shape="dice"
    )
    total: int | None = f("the dice's total", optional=True)
    wagers: dict[str, Any] | None = f(
        "the side wagers' outcomes {sum, match, beat_it}; absent: they are not settled"
        " (an RNG's dice, current 621a.5(e)(2)-(4))",
        optional=True,
    )
    payouts: dict[str, Any] | None = f(
        "per paytable: whether it wins, its outcome and what it pays", optional=True
    )


@schema
class Void(Record):
    KIND = RecordKind.VOID
    VERSION = 2
    MEANING = (
        "the whole round void, every wager returned (621a.12(c),(e)); version 1 (logs before"
        " the reasons) holds round, attempt, state, supervisor and detail"
    )
    round: int = f(_ROUND, low=1)
    attempt: int | None = f(_ATTEMPT + "; may be absent in version 1", optional=True, low=1)
    state: str = f(_STATE)
    reason: str | None = f(
        "why (controller/core/state.py VoidReason); absent in version 1", optional=True
    )
    wagers: str | None = f("'returned'; absent in version 1", optional=True)
    reshuffle: bool | None = f(
        "whether the tiles are reshuffled; absent in version 1", optional=True
    )
    note: str | None = f("the words given with it; absent in version 1", optional=True)
    employee: str | None = f(_EMPLOYEE + "; absent in version 1", optional=True, null=True)
    supervisor: bool | None = f("version 1: voided by a supervisor", optional=True)
    detail: str | None = f("version 1: the words given with it", optional=True)


@schema
class Close(Record):
    KIND = RecordKind.CLOSE
    MEANING = "the round closed after its result (a checkpoint is signed after it)"
    round: int = f(_ROUND, low=1)
    employee: str | None = f(_EMPLOYEE, optional=True, null=True)


@schema
class ReshakeLimit(Record):
    KIND = RecordKind.RESHAKE_LIMIT
    MEANING = "too many no-rolls in a row: the table waits for a supervisor"
    round: int = f(_ROUND, low=1)
    no_rolls: int = f("the no-rolls in a row", low=0)


@schema
class FaultRecord(Record):
    KIND = RecordKind.FAULT
    MEANING = "a fault latched (controller/core/state.py Fault)"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    fault: str = f("the fault's name")
    detail: str = f("what was seen, in words")
    state: str = f(_STATE)


@schema
class FaultCleared(Record):
    KIND = RecordKind.FAULT_CLEARED
    MEANING = "faults cleared, by whom"
    round: int = f(_ROUND, low=1)
    faults: list[Any] = f("the faults' names")
    supervisor: bool = f("cleared by a supervisor")
    employee: str | None = f(_EMPLOYEE, optional=True, null=True)
    note: str | None = f("why (anchor_missing needs one: issue 28)", optional=True)


@schema
class SupervisorAction(Record):
    KIND = RecordKind.SUPERVISOR_ACTION
    MEANING = "a supervisor's action (shaker inspected, recall, dice kept, ...)"
    OPEN = True
    round: int = f(_ROUND, low=1)
    action: str = f("what: shaker_inspected, recall_entered, recall_left, dice_kept, ...")
    employee: str | None = f(_EMPLOYEE, null=True)
    detail: str | None = f("the words given with it", optional=True)
    wall_ms: int | None = f(_WALL, optional=True, null=True)
    attempt: int | None = f(_ATTEMPT, optional=True)
    alarm: dict[str, Any] | None = f("dice_kept: the dice alarm dismissed", optional=True)
    counts: dict[str, Any] | None = f("dice_kept: the counts then", optional=True)


@schema
class Sensor(Record):
    KIND = RecordKind.SENSOR
    MEANING = "the dice sensor went away or came back"
    present: bool | None = f("it came back (true) or went (false)", optional=True)
    fault: str | None = f("the fault it raised", optional=True)
    detail: str = f("what was seen, in words")


@schema
class BankSelected(Record):
    KIND = RecordKind.BANK_SELECTED
    MEANING = "the dealer's bank key: who banks the next round (621a.11(c))"
    round: int = f(_ROUND, low=1)
    bank: str = f(_BANK)
    refused: str | None = f("the bank rule's words when refused, else null", null=True)
    employee: str | None = f(_EMPLOYEE, optional=True, null=True)
    co_bank: bool | None = f("the dealer co-banks", optional=True)


@schema
class DeliveryStyle(Record):
    KIND = RecordKind.DELIVERY_STYLE
    MEANING = "the delivery style the bank chose (621a.11(i))"
    round: int = f(_ROUND, low=1)
    style: str = f("the style's name")
    section: str = f("the rule's section that describes it (621a.9(n))")
    employee: str | None = f(_EMPLOYEE, null=True)


@schema
class ShiftChange(Record):
    KIND = RecordKind.SHIFT_CHANGE
    MEANING = "a new dealer signed on (null: signed off)"
    round: int = f(_ROUND, low=1)
    dealer: str | None = f(_EMPLOYEE, null=True)


@schema
class ResultVoided(Record):
    KIND = RecordKind.RESULT_VOIDED
    MEANING = (
        "logs before corrections only: a result voided and its round decided again, which"
        " verify-log refuses (N.J.A.C. 13:69E-1.28G)"
    )
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    reason: str = f("why")
    detail: str | None = f("what the supervisor said of it", optional=True)


@schema
class ResultCorrected(Record):
    KIND = RecordKind.RESULT_CORRECTED
    MEANING = (
        "a result corrected to the dice as they lie, never re-rolled (N.J.A.C. 13:69E-1.28P(d))"
    )
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    dice_read: dict[str, Any] = f("the dice the sensor read", shape="dice")
    dice_seen: dict[str, Any] = f("the dice as they lie", shape="dice")
    reason: str = f("why (controller/core/state.py CorrectionReason)")
    employee: str | None = f(_EMPLOYEE, null=True)
    note: str = f("the words given with it")
    result: dict[str, Any] = f(
        "the result the dice seen give: a result's fields but round and attempt"
    )


@schema
class Lid(Record):
    KIND = RecordKind.LID
    MEANING = "the shaker's lid opened or closed"
    round: int = f(_ROUND, low=1)
    opened: bool = f("opened (true) or closed")
    state: str = f(_STATE)


@schema
class TamperLoop(Record):
    KIND = RecordKind.TAMPER_LOOP
    MEANING = "the tamper loop opened or closed (N.J.A.C. 13:69E-1.16A)"
    round: int = f(_ROUND, low=1)
    closed: bool = f("closed (true) or opened")
    state: str = f(_STATE)


@schema
class TableTime(Record):
    KIND = RecordKind.TABLE_TIME
    MEANING = "the table's time (dice and tile life), now and then"
    round: int = f(_ROUND, low=1)
    table_ms: int = f("the table's time (ms of play)")
    wall_ms: int | None = f(_WALL, null=True)


@schema
class DiceReplaced(Record):
    KIND = RecordKind.DICE_REPLACED
    MEANING = "a new set of dice in use (proposed 621a.5(c))"
    round: int = f(_ROUND, low=1)
    dice_set: str = f("the new set's id")
    previous: str | None = f("the set before, null: none known", null=True)
    previous_age_ms: int | None = f("how long the set before was in use, in table ms", null=True)
    table_ms: int = f("the table's time (ms of play)")
    wall_ms: int | None = f(_WALL, null=True)
    employee: str | None = f(_EMPLOYEE, null=True)
    alarm_cleared: str | None = f("the dice alarm's test it clears (issue 15)", optional=True)


@schema
class ModeChanged(Record):
    KIND = RecordKind.MODE_CHANGED
    MEANING = "shaker, RNG or manual from now on (current 621a.6(a))"
    round: int = f(_ROUND, low=1)
    mode: str = f("the mode now", choices=_MODES)
    previous: str = f("the mode before", choices=_MODES)
    cleared: list[Any] = f("the faults a switch to the RNG cleared")
    employee: str | None = f(_EMPLOYEE, null=True)


@schema
class ServiceMode(Record):
    KIND = RecordKind.SERVICE_MODE
    MEANING = "service mode entered or left (9 NYCRR 5319.58)"
    round: int = f(_ROUND, low=1)
    entered: bool = f("entered (true) or left")
    employee: str | None = f(_EMPLOYEE, optional=True, null=True)
    state: str | None = f(
        "left: the state the test rounds were in when it was left (controller/core/state.py State)",
        optional=True,
    )
    test_rounds: int | None = f("left: the test rounds played", optional=True, low=0)


@schema
class ServiceTest(Record):
    KIND = RecordKind.SERVICE_TEST
    MEANING = "a record of a test round in service mode: the game record's fields, and its kind"
    OPEN = True
    record: str = f("the kind of the game record it stands for")
    round: int = f("the test round's number", low=1)


@schema
class DiceAlarm(Record):
    KIND = RecordKind.DICE_ALARM
    MEANING = "the dice monitor found the dice look loaded (issue 15)"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    test: str = f("the test that fired: red, blue or total")
    face: int | None = f("the face the evidence points at, null: the total's test", null=True)
    log_e: str = f("the test's log e-value, as decimal text")
    threshold: str = f("the threshold it crossed, as decimal text")
    rolls: int = f("the rolls counted", low=0)
    dice_set: str | None = f("the set of dice", null=True)
    locks: bool = f("the table locks until a supervisor acts")
    counts: dict[str, Any] = f("the counts {red, blue, total}")


# --- the appliance -----------------------------------------------------------------------------


@schema
class LogCreated(Record):
    KIND = RecordKind.LOG_CREATED
    MEANING = "the first record: the log's origin and verifier key"
    origin: str = f("the log's origin, the key's name")
    key: str = f("the verifier key (C2SP signed-note form)")


@schema
class RngDraw(Record):
    KIND = RecordKind.RNG_DRAW
    MEANING = "the RNG's number for a round (current 621a.5(e))"
    session: str = f("the RNG session's id")
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    mode: str = f("what is drawn: position or dice (controller/core/rng_replay.py)")
    number: int | None = f("position: the number drawn", optional=True)
    dice: dict[str, Any] | None = f(
        "dice: the three virtual dice, red first", optional=True, shape="dice"
    )


@schema
class RngCommit(Record):
    KIND = RecordKind.RNG_COMMIT
    MEANING = "an RNG session committed before its first draw, its seed escrowed"
    session: str = f("the session's id")
    table: str = f("the table's name")
    game: str = f("the game", choices=_GAMES)
    mode: str = f("what is drawn: position or dice")
    positions: int = f("how many positions a draw chooses from", low=1)
    max_rounds: int = f("the most rounds the session draws for", low=1)
    algorithm: str = f("the DRBG: HMAC_DRBG-SHA-256")
    commitment: str = f("the hex SHA-256 commitment to the seed")
    escrow: dict[str, Any] | None = f(
        "the seed, encrypted to the auditor's key; absent: a log from before the escrow"
        " (its seed is revealed only by the table)",
        optional=True,
    )


@schema
class RngReveal(Record):
    KIND = RecordKind.RNG_REVEAL
    MEANING = "an RNG session ended: its seed revealed, to check every draw against"
    session: str = f("the session's id")
    reason: str = f("why it ended (shutdown, mode_switch, shift_change, ...)")
    entropy: str = f("the seed's entropy input, hex")
    nonce: str = f("the seed's nonce, hex")
    personalization: str = f("the personalization string, hex")


@schema
class RngInterrupted(Record):
    KIND = RecordKind.RNG_INTERRUPTED
    MEANING = "a session ended unrevealed by a restart: its seed is in the commitment's escrow"
    session: str = f("the session's id")
    draws: int = f("the draws it made", low=0)
    reason: str = f("why: restart")


@schema
class ConfigLoaded(Record):
    KIND = RecordKind.CONFIG_LOADED
    MEANING = (
        "the configuration at start: its SHA-256 and the paytables that settle results until the"
        " next (controller/core/record_data.py)"
    )
    sha256: str = f("the configuration file's SHA-256 (empty: none)")
    table: str = f("the table's name")
    game: str = f("the game", choices=_GAMES)
    mode: str = f("the mode", choices=_MODES)
    modes: list[Any] = f("the modes it may switch to (current 621a.6(a))")
    rng_mode: str = f("what the RNG draws: position or dice")
    paytables: list[Any] = f("the paytables {name, wager, condition, pays}")


@schema
class PowerOn(Record):
    KIND = RecordKind.POWER_ON
    MEANING = "the controller started"
    previous: str = f("how the last run ended: first start, shutdown, interrupted")
    anchor: str | None = f("a copy of the log's anchor found missing or behind", optional=True)
    clock: str | None = f("the OS's clock: synchronised, unsynchronised, unknown", optional=True)
    software: dict[str, Any] | None = f("the software {version, manifest}", optional=True)


@schema
class Shutdown(Record):
    KIND = RecordKind.SHUTDOWN
    MEANING = "the controller stopped in order"
    round: int = f(_ROUND, low=1)


@schema
class Recovery(Record):
    KIND = RecordKind.RECOVERY
    MEANING = "a start: the round's context as recovered from the log"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    state: str = f(_STATE)
    faults: list[Any] = f("the faults still latched")
    interrupted: bool = f("a round was interrupted")
    voided_attempt: int | None = f("the attempt voided by the restart, null: none", null=True)
    dice_counts: dict[str, Any] | None = f(
        "the dice monitor's counts {set, shift, test}; absent: a log from before the monitor",
        optional=True,
    )


@schema
class Interrupted(Record):
    KIND = RecordKind.INTERRUPTED
    MEANING = "a round in play interrupted by a shutdown or a power loss"
    round: int = f(_ROUND, low=1)
    attempt: int = f(_ATTEMPT, low=1)
    state: str = f(_STATE)
    reason: str = f("shutdown or power_on")


@schema
class SoftwareCheck(Record):
    KIND = RecordKind.SOFTWARE_CHECK
    MEANING = "program verification: the result, the files that differ"
    round: int = f(_ROUND, low=1)
    reason: str = f("power_on or periodic")
    result: str = f("ok, mismatch, no_manifest, ...")
    version: str = f("the software's version")
    manifest: str | None = f("the manifest's SHA-256, null: none", null=True)
    key: str | None = f("the manifest's signing key id, null: none", null=True)
    files: int = f("the files checked", low=0)
    differ: list[Any] = f("the files that differ (the first few)")
    differ_count: int = f("how many differ", low=0)
    required: bool = f("a signed manifest is required")
    detail: str = f("what was seen, in words")


@schema
class SoftwareChanged(Record):
    KIND = RecordKind.SOFTWARE_CHANGED
    MEANING = "the version or the manifest differs from the last start's"
    round: int = f(_ROUND, low=1)
    previous: dict[str, Any] = f("the last start's {version, manifest}")
    now: dict[str, Any] = f("this start's {version, manifest}")


@schema
class ClockStatus(Record):
    KIND = RecordKind.CLOCK_STATUS
    MEANING = "the OS's clock became synchronised, or stopped being"
    round: int = f(_ROUND, low=1)
    clock: str = f("synchronised, unsynchronised or unknown")


@schema
class Commissioning(Record):
    KIND = RecordKind.COMMISSIONING
    MEANING = (
        "a technician's walk through the table's hardware (controller/core/commissioning.py"
        " checks it)"
    )
    table: str = f("the table's name")
    technician: str = f("who")
    config_sha256: str = f("the configuration's SHA-256")
    outcome: str = f("completed, interrupted or abandoned")
    ended: str | None = f("how it ended early, in words", optional=True)
    passed: bool = f("every step passed")
    counts: dict[str, Any] = f("the steps {pass, fail, skipped, not_run}")
    steps: list[Any] = f("every step's verdict")
    readings: int = f("the sensor readings taken", low=0)
    outputs_safe: list[Any] = f("the outputs left safe")
    sensor: dict[str, Any] | None = f("the sensor's identity, null: none", null=True)
    step_timeout_s: int = f("a step's time limit, s", low=0)
    simulated: bool | None = f("walked on simulated hardware", optional=True)


@schema
class CosignedRecord(Record):
    KIND = RecordKind.COSIGNED
    MEANING = (
        "the fleet's witness cosigned a checkpoint covering a round's close"
        " (record_data.check_cosigned checks it)"
    )
    round: int = f(_ROUND, low=1)
    witness: str = f("the witness's name")
    witness_key: str = f("its verifier key")
    size: int = f("the checkpoint's size", low=1)
    root: str = f("the checkpoint's root hash, base64")
    timestamp: int = f("when, seconds since the epoch", low=0)
    signature: str = f("the signature line's bytes, base64")
    close: int = f("the sequence number of the close it covers", low=1)


@schema
class RollbackEvidence(Record):
    KIND = RecordKind.ROLLBACK_EVIDENCE
    MEANING = (
        "the witness's cosignature of a checkpoint this log signed and no longer holds"
        " (record_data.check_rollback_evidence checks it)"
    )
    round: int = f(_ROUND, low=1)
    witness: str = f("the witness's name")
    witness_key: str | None = f("its verifier key", optional=True)
    note: str = f("the cosigned note as it came")
    size: int = f("the checkpoint's size", low=0)
    root: str | None = f("the checkpoint's root hash, base64", optional=True)
    timestamp: int | None = f("when, seconds since the epoch", optional=True, low=0)
    log_size: int = f("the log's size then", low=0)


R = TypeVar("R", bound=Record)

SCHEMAS: dict[RecordKind, type[Record]] = {
    cls.KIND: cls
    for cls in (
        RoundOpened,
        NoMoreBets,
        Shuffle,
        TilesShuffled,
        TilesInspected,
        Shake,
        Reading,
        NoRoll,
        Result,
        Void,
        Close,
        ReshakeLimit,
        FaultRecord,
        FaultCleared,
        SupervisorAction,
        Sensor,
        BankSelected,
        DeliveryStyle,
        ShiftChange,
        ResultVoided,
        ResultCorrected,
        Lid,
        TamperLoop,
        TableTime,
        DiceReplaced,
        ModeChanged,
        ServiceMode,
        ServiceTest,
        DiceAlarm,
        LogCreated,
        RngDraw,
        RngCommit,
        RngReveal,
        RngInterrupted,
        ConfigLoaded,
        PowerOn,
        Shutdown,
        Recovery,
        Interrupted,
        SoftwareCheck,
        SoftwareChanged,
        ClockStatus,
        Commissioning,
        CosignedRecord,
        RollbackEvidence,
    )
}


# --- checking and reading ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a schema, as checked and documented."""

    name: str
    type: str  # integer, text, boolean, object, list, any
    meaning: str
    optional: bool
    null: bool
    low: int | None
    high: int | None
    choices: tuple[str, ...]
    shape: str

    def check(self, kind: str, value: object) -> None:
        if value is None:
            if not self.null:
                raise RecordShapeError(f"a {kind} record's {self.name} is not null")
            return
        if not _IS[self.type](value):
            raise RecordShapeError(f"a {kind} record's {self.name} is not {self.type}")
        if self.type == "integer":
            assert isinstance(value, int)
            if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high
            ):
                raise RecordShapeError(
                    f"a {kind} record's {self.name} {value} is outside {self.low}..{self.high}"
                )
        elif self.choices and value not in self.choices:
            raise RecordShapeError(
                f"a {kind} record's {self.name} is one of {', '.join(self.choices)}, not {value!r}"
            )
        if self.shape == "dice" and not _is_dice(value):
            raise RecordShapeError(f"a {kind} record's {self.name} is not {{red, blue: [b1, b2]}}")


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_dice(value: object) -> bool:
    if not isinstance(value, Mapping) or set(value) != {"red", "blue"}:
        return False
    blue = value["blue"]
    return (
        _is_whole(value["red"])
        and isinstance(blue, Sequence)
        and not isinstance(blue, str)
        and len(blue) == 2
        and all(_is_whole(b) for b in blue)
    )


_IS: dict[str, Callable[[object], bool]] = {
    "integer": _is_whole,
    "text": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, Mapping),
    "list": lambda v: isinstance(v, list | tuple),
    "any": lambda v: True,
}
_TYPES: dict[str, str] = {"int": "integer", "str": "text", "bool": "boolean", "dict": "object"}
_TYPES["list"] = "list"


def _type_name(annotation: str) -> str:
    """A field's type in the document's words, from its annotation as written (``int | None``,
    ``dict[str, Any]``): the type with None taken out, by its origin; anything else ``any``."""
    named = [part.strip() for part in annotation.split("|") if part.strip() != "None"]
    if len(named) != 1:
        return "any"
    return _TYPES.get(named[0].split("[", 1)[0], "any")


def _declared(cls: type[Record]) -> list[tuple[str, str, dataclasses.Field[Any]]]:
    """``cls``'s fields in the dataclass's order (``Record``'s first): name, annotation (the
    text written, this module using postponed annotations) and the field :func:`f` made."""
    fields: dict[str, tuple[str, str, dataclasses.Field[Any]]] = {}
    for base in reversed(cls.__mro__):
        own = vars(base)
        for name, annotation in own.get("__annotations__", {}).items():
            if not str(annotation).startswith("ClassVar"):
                fields[name] = (name, str(annotation), own[name])
    return list(fields.values())


def _specs(cls: type[Record]) -> tuple[FieldSpec, ...]:
    return tuple(
        FieldSpec(
            name=name,
            type=_type_name(annotation),
            **{k: item.metadata[k] for k in ("meaning", "optional", "null", "low", "high")},
            choices=item.metadata["choices"],
            shape=item.metadata["shape"],
        )
        for name, annotation, item in _declared(cls)
    )


_MADE: dict[type[Record], type[Record]] = {}


def _made(cls: type[R]) -> type[R]:
    """The dataclass of ``cls``'s kind, made once: a frozen, keyword-only subclass of the
    declared class with its fields. (Two threads making the same kind at once keep the first
    stored: ``setdefault`` is one step, and a kind's records are all of one class.)"""
    made = _MADE.get(cls)
    if made is None:
        namespace: dict[str, Any] = {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
            "__annotations__": {},
        }
        for name, annotation, item in _declared(cls):
            namespace["__annotations__"][name] = annotation
            namespace[name] = dataclasses.field(default=item.default, metadata=item.metadata)
        maker = dataclass(frozen=True, kw_only=True)
        made = _MADE.setdefault(cls, maker(type(cls.__name__, (cls,), namespace)))
    return typing.cast(type[R], made)


FIELDS: dict[RecordKind, tuple[FieldSpec, ...]] = {
    kind: _specs(cls) for kind, cls in SCHEMAS.items()
}
_NAMES: dict[RecordKind, frozenset[str]] = {
    kind: frozenset(spec.name for spec in specs) for kind, specs in FIELDS.items()
}


def _accepts(spec: FieldSpec) -> Callable[[object], bool]:
    """Whether a value passes ``spec.check``, as one closure: the check made on every record
    written, so it is compiled once per field (``spec.check`` then words the refusal)."""
    is_type, null, choices = _IS[spec.type], spec.null, frozenset(spec.choices)
    if spec.type == "integer":
        low = spec.low if spec.low is not None else -math.inf
        high = spec.high if spec.high is not None else math.inf
        return lambda v: null if v is None else is_type(v) and low <= v <= high  # type: ignore[operator]
    if spec.shape == "dice":
        return lambda v: null if v is None else _is_dice(v)
    if choices:
        return lambda v: null if v is None else is_type(v) and v in choices
    return lambda v: null if v is None else is_type(v)


@dataclass(frozen=True, slots=True)
class _Plan:
    """A kind's check, compiled: the fields it needs, those it may have, each field's test."""

    required: frozenset[str]
    names: frozenset[str] | None  # None: the kind is open to other fields
    tests: tuple[tuple[str, Callable[[object], bool]], ...]


_PLANS: dict[RecordKind, _Plan] = {
    kind: _Plan(
        required=frozenset(spec.name for spec in specs if not spec.optional),
        names=None if SCHEMAS[kind].OPEN else _NAMES[kind],
        tests=tuple(
            (spec.name, _accepts(spec)) for spec in specs if spec.type != "any" or not spec.null
        ),
    )
    for kind, specs in FIELDS.items()
}


def check(kind: RecordKind | str, data: Mapping[str, object]) -> None:
    """That ``data`` is of the shape ``kind``'s schema gives: every field it needs, each of its
    type and bounds, and none other (but where the kind is open). Raises
    :class:`RecordShapeError`."""
    if type(kind) is RecordKind:
        known = kind
    else:
        try:
            known = RecordKind(kind)
        except ValueError:
            raise RecordShapeError(f"{kind!r} is no kind of record") from None
    plan = _PLANS[known]
    keys = data.keys()
    if not plan.required <= keys or (plan.names is not None and not keys <= plan.names):
        _refuse(known, data)
    for name, accepts in plan.tests:
        if name in data and not accepts(data[name]):
            _refuse(known, data)


def _refuse(known: RecordKind, data: Mapping[str, object]) -> NoReturn:
    """Raises the refusal of ``data`` as ``known``, naming its first fault in the schema's
    order."""
    for spec in FIELDS[known]:
        if spec.name in data:
            spec.check(known, data[spec.name])
        elif not spec.optional:
            raise RecordShapeError(f"a {known} record lacks its {spec.name}")
    extra = sorted(set(data) - _NAMES[known])
    raise RecordShapeError(f"a {known} record has no field {', '.join(extra)}")


def read(cls: type[R], data: Mapping[str, Any]) -> R:
    """The record of ``cls``'s kind that ``data`` holds, checked against its schema. Raises
    :class:`RecordShapeError`."""
    check(cls.KIND, data)
    return _made(cls)(**{name: data[name] for name in _NAMES[cls.KIND] if name in data})


def read_lenient(cls: type[R], data: Mapping[str, Any]) -> R:
    """What a reader that shows records (the display, the floor) takes of ``data`` as
    ``cls``'s kind: each field present and of its schema's type (its bounds, choices and
    shape unchecked), every other field None, and never an error. A field read so may be None
    whatever its annotation says: such a reader treats every field as optional. (The display
    reads every record it is told of on the control thread, within the commit: the fields'
    type tests are looked up once per kind.)"""
    values: dict[str, Any] = {}
    for name, is_type in _LENIENT[cls.KIND]:
        value = data.get(name)
        values[name] = value if value is not None and is_type(value) else None
    return _made(cls)(**values)


_LENIENT: dict[RecordKind, tuple[tuple[str, Callable[[object], bool]], ...]] = {
    kind: tuple((spec.name, _IS[spec.type]) for spec in specs) for kind, specs in FIELDS.items()
}
_BY_NAME: dict[str, type[Record]] = {str(kind): cls for kind, cls in SCHEMAS.items()}
_LENIENT_BY_NAME: dict[str, dict[str, Callable[[object], bool]]] = {
    str(kind): dict(tests) for kind, tests in _LENIENT.items()
}


def read_lenient_fields(kind: str, data: Mapping[str, Any], names: tuple[str, ...]) -> list[Any]:
    """``read_lenient``'s values of the fields ``names`` only, without making the record: for
    a reader on the path from a commit to the screen (the feed's lines). A name the kind lacks,
    or a kind that is none, reads None."""
    tests = _LENIENT_BY_NAME.get(kind) if isinstance(kind, str) else None
    if tests is None:
        return [None] * len(names)
    values = []
    for name in names:
        is_type = tests.get(name)
        value = data.get(name) if is_type is not None else None
        values.append(
            value if value is not None and is_type is not None and is_type(value) else None
        )
    return values


def schema_of(kind: str) -> type[Record] | None:
    """The schema of the kind named ``kind``; None for a name that is no kind of record (or
    anything that is not a name, as a record from outside may hold)."""
    return _BY_NAME.get(kind) if isinstance(kind, str) else None


def read_any(kind: RecordKind | str, data: Mapping[str, Any]) -> Record:
    """The record of ``kind`` that ``data`` holds, as its kind's dataclass."""
    try:
        cls = SCHEMAS[RecordKind(kind)]
    except ValueError:
        raise RecordShapeError(f"{kind!r} is no kind of record") from None
    return read(cls, data)


# --- the document ------------------------------------------------------------------------------

GENERATOR = "python -m controller.core.record_schema --markdown > docs/records.md"

ENCODING = """\
A log is a sequence of records, numbered from 1. Each record (a *leaf*) is the canonical
encoding (controller/core/canonical.py) of one JSON object with exactly five members:

| member | what it holds |
|---|---|
| `seq` | the record's number: 1, 2, 3, ... with no gap |
| `kind` | the record's kind: one of the kinds below |
| `time` | when it was written: UTC wall-clock time, `2026-01-31T12:00:00.000Z` |
| `prev` | the hex SHA-256 of the previous record's leaf bytes (64 zeros for the first) |
| `data` | an object: the kind's fields below |

The canonical encoding, which a verifier in any language can reproduce: JSON (RFC 8259) as
UTF-8 without a byte order mark; object keys sorted by code point, each once; no whitespace
(`,` between members, `:` between key and value); no floats, NaN or infinities: numbers are
integers within +-(2**53 - 1) (I-JSON, RFC 7493), so a time is text and a ratio is decimal
text; strings written as themselves, escaping only `"`, `\\` and the control characters
below U+0020 (as Python's `json` writes them). A record has exactly one encoding: bytes
that re-encode to other bytes are not a record.

Chaining and signing: the leaves form an RFC 6962 Merkle tree (leaf hash SHA-256(0x00 ||
leaf), node hash SHA-256(0x01 || left || right)); after each `close` or `void` record, and on
demand, a C2SP checkpoint of the tree (origin, size, base64 root hash) is signed with the log's
Ed25519 key as a C2SP signed note. The first record, `log_created`, names the origin and the
verifier key. `paigow-controller verify-log` (controller/audit/verify.py) checks every leaf's
encoding, `seq` and `prev`, every checkpoint's signature and root, what records say (a result
recomputed from its dice and the paytables of the last `config_loaded`, who did it, a void's
reason) and the rounds' shape.

A field's version: each kind has its own format version (below); a change of a kind's fields
makes a new version, and the records of older versions are still read as they were written."""


def _field_row(spec: FieldSpec) -> str:
    kind = spec.type
    if spec.shape == "dice":
        kind = "dice `{red, blue: [b1, b2]}`"
    if spec.low is not None or spec.high is not None:
        kind += f" {'' if spec.low is None else spec.low}..{'' if spec.high is None else spec.high}"
    if spec.choices:
        kind += ": " + ", ".join(f"`{c}`" for c in spec.choices)
    if spec.null:
        kind += " or null"
    presence = "may be absent" if spec.optional else "always"
    return f"| `{spec.name}` | {kind} | {presence} | {spec.meaning} |"


def _kind_section(kind: RecordKind) -> list[str]:
    cls = SCHEMAS[kind]
    own = [spec for spec in FIELDS[kind] if spec.name not in _COMMON]
    lines = [f"### `{kind}` (version {cls.VERSION})", "", cls.MEANING + ".", ""]
    if cls.OPEN:
        lines += ["It may carry other fields besides these.", ""]
    if not own:
        return [*lines, "No fields of its own.", ""]
    header = ["| field | type | present | meaning |", "|---|---|---|---|"]
    return [*lines, *header, *(_field_row(spec) for spec in own), ""]


_COMMON = frozenset(name for name, _, _ in _declared(Record))


def markdown() -> str:
    """docs/records.md: every kind's fields and meaning, its version, and how records are
    encoded and chained, for an independent verifier."""
    common = [spec for spec in FIELDS[RecordKind.ROUND_OPENED] if spec.name in _COMMON]
    lines = [
        f"<!-- Generated from controller/core/record_schema.py by `{GENERATOR}`;",
        "     do not edit: tests/audit/test_records_doc.py keeps it equal. -->",
        "",
        "# The audit log's records",
        "",
        f"Schema version {SCHEMA_VERSION}, {len(SCHEMAS)} kinds of record.",
        "",
        "## How records are encoded and chained",
        "",
        ENCODING,
        "",
        "## Fields any record may carry",
        "",
        "| field | type | present | meaning |",
        "|---|---|---|---|",
        *(_field_row(spec) for spec in common),
        "",
        "## The kinds",
        "",
    ]
    for kind in RecordKind:
        lines += _kind_section(kind)
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.exit(f"usage: {GENERATOR}")
    sys.stdout.write(markdown())
