"""The kinds of record the audit log keeps, one per event at the table.

The round state machine emits the records of the game; the daemon adds those of the
appliance (power on, config loaded, RNG commitments, ...). One enum, so that the log, its
verifier and the recall screens agree on names.
"""

from __future__ import annotations

from enum import StrEnum


class RecordKind(StrEnum):
    # the game (emitted by the round state machine)
    ROUND_OPENED = "round_opened"
    NO_MORE_BETS = "no_more_bets"  # carries the bank seat
    SHUFFLE = "shuffle"
    SHAKE = "shake"  # carries the motion sensor's cycle count
    READING = "reading"  # carries the raw image digest and the verdict
    NO_ROLL = "no_roll"  # carries the reason
    RESULT = "result"
    VOID = "void"
    CLOSE = "close"
    RESHAKE_LIMIT = "reshake_limit"
    FAULT = "fault"
    FAULT_CLEARED = "fault_cleared"
    SUPERVISOR_ACTION = "supervisor_action"
    SENSOR = "sensor"  # the sensor went away or came back
    # the appliance (emitted by the daemon)
    LOG_CREATED = "log_created"  # the first record: the log's origin and verifier key
    RNG_DRAW = "rng_draw"
    RNG_COMMIT = "rng_commit"
    RNG_REVEAL = "rng_reveal"
    CONFIG_LOADED = "config_loaded"
    DICE_REPLACED = "dice_replaced"
    POWER_ON = "power_on"
    SHUTDOWN = "shutdown"
    RECOVERY = "recovery"
    INTERRUPTED = "interrupted"
