"""The kinds of record the audit log keeps, one per event at the table, and a record as stored.

The round state machine emits the records of the game; the daemon adds those of the
appliance (power on, config loaded, RNG commitments, ...). One enum, so that the log, its
verifier and the recall screens agree on names. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.core import canonical


class RecordDataError(ValueError):
    """A record's data does not have the shape its kind requires."""


class RecordKind(StrEnum):
    # the game (emitted by the round state machine)
    ROUND_OPENED = "round_opened"
    NO_MORE_BETS = "no_more_bets"  # carries the bank seat
    SHUFFLE = "shuffle"  # Pai Gow Poker's new game (645a.12(b)); at tiles before tiles_shuffled
    TILES_SHUFFLED = "tiles_shuffled"  # 621a.11(b): a new game's shuffle (its reason, who)
    TILES_INSPECTED = "tiles_inspected"  # 621a.6(a), 621a.3(e): a set inspected and verified
    SHAKE = "shake"  # carries the motion sensor's cycle count
    READING = "reading"  # carries the raw image digest and the verdict
    NO_ROLL = "no_roll"  # carries the reason
    RESULT = "result"
    VOID = "void"  # the whole round void, every wager returned (621a.12(c),(e)): why, who
    CLOSE = "close"
    RESHAKE_LIMIT = "reshake_limit"
    FAULT = "fault"
    FAULT_CLEARED = "fault_cleared"
    SUPERVISOR_ACTION = "supervisor_action"
    SENSOR = "sensor"  # the sensor went away or came back
    BANK_SELECTED = "bank_selected"  # the dealer's bank key: who banks the next round
    DELIVERY_STYLE = "delivery_style"  # 621a.11(i): the style the bank chose
    SHIFT_CHANGE = "shift_change"
    # Logs written before corrections: a result voided and its round decided again, which
    # verify-log now refuses (no secondary selection, N.J.A.C. 13:69E-1.28G)
    RESULT_VOIDED = "result_voided"
    # N.J.A.C. 13:69E-1.28P(d): a result corrected to the dice as they lie (never re-rolled)
    RESULT_CORRECTED = "result_corrected"
    LID = "lid"  # the shaker's lid opened or closed, in a round or not
    TAMPER_LOOP = "tamper_loop"  # N.J.A.C. 13:69E-1.16A: the tamper loop opened or closed
    TABLE_TIME = "table_time"  # the table's time (dice and tile life), now and then
    DICE_REPLACED = "dice_replaced"  # proposed 621a.5(c): the new set's id
    MODE_CHANGED = "mode_changed"  # current 621a.6(a): shaker, RNG or manual from now on
    SERVICE_MODE = "service_mode"  # 9 NYCRR 5319.58: entered or left
    SERVICE_TEST = "service_test"  # a record of a test round in service mode (names its kind)
    DICE_ALARM = "dice_alarm"  # the dice monitor found the dice look loaded (issue 15)
    # the appliance (emitted by the daemon)
    LOG_CREATED = "log_created"  # the first record: the log's origin and verifier key
    RNG_DRAW = "rng_draw"
    RNG_COMMIT = "rng_commit"
    RNG_REVEAL = "rng_reveal"
    # a session ended unrevealed by a restart (its seed, in memory only, was gone): the next
    # is committed anew; the seed is in the commitment's escrow, for the auditor
    RNG_INTERRUPTED = "rng_interrupted"
    CONFIG_LOADED = "config_loaded"
    POWER_ON = "power_on"
    SHUTDOWN = "shutdown"
    RECOVERY = "recovery"
    INTERRUPTED = "interrupted"
    SOFTWARE_CHECK = "software_check"  # program verification: the result, the files that differ
    SOFTWARE_CHANGED = (
        "software_changed"  # the version or the manifest differs from the last start's
    )
    CLOCK_STATUS = "clock_status"  # the OS's clock became synchronised, or stopped being
    # a technician's walk through the table's hardware (``paigow-controller commission``,
    # never beside the controller): who, every step's verdict, the sensor's identity
    COMMISSIONING = "commissioning"
    # the fleet's witness cosigned a checkpoint of this log that covers a round's close
    # (controller/fleet): the witness, its key, the size and root it vouched for, when, and
    # its signature; at most one per round close
    COSIGNED = "cosigned"
    # the witness's cosignature of a checkpoint this log's key signed and this log no longer
    # holds (controller/fleet): the note as it came, the log's size then; log_rollback latches
    ROLLBACK_EVIDENCE = "rollback_evidence"


def record_hash(leaf: bytes) -> str:
    """The hex SHA-256 of a leaf: what the next record carries as ``prev``."""
    return hashlib.sha256(leaf).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as the log stores it: the leaf bytes are the record (its canonical
    encoding, the bytes that are hashed); ``kind`` is an index copy of it."""

    seq: int
    kind: str
    leaf: bytes

    @property
    def hash(self) -> str:
        """The hex SHA-256 of the leaf, which the next record carries as ``prev``."""
        return record_hash(self.leaf)

    def entry(self) -> dict[str, Any]:
        value = canonical.decode(self.leaf)
        if not isinstance(value, dict):
            raise canonical.EncodingError("a record is a JSON object")
        return value

    @property
    def data(self) -> dict[str, Any]:
        """The event's data (decoded from the leaf; verify-log checks the leaf itself)."""
        data = self.entry()["data"]
        if not isinstance(data, dict):
            raise canonical.EncodingError("a record's data is a JSON object")
        return data
