"""Every condition that stops play (or that a supervisor or technician must know of), with a
stable code, its meaning in plain words, who may clear it and how. One table: the ``Fault``
enum's rules of clearing (``needs_supervisor``, ``needs_restart``, ...) derive from it,
``paigow-controller status``, systemd's ``STATUS=`` and the supervisor view name its codes, and
``docs/faults.md`` is generated from it (``paigow-controller status --fault-table --markdown``).

A code is never renumbered nor reused: a new condition takes the next free number, a condition
that no longer exists keeps its row marked retired. ``tests/core/test_faults.py`` pins the table.

Pure: no I/O. This module imports nothing of the state machine (``state.py`` imports it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

_KEY_ON = "with the supervisor key on"
_CLEAR_KEY = "press CLEAR FAULT on the dealer's panel"
_SUPERVISOR_CLEAR = (
    f"turn the supervisor key on and {_CLEAR_KEY}, or, {_KEY_ON}:"
    " `paigow-controller supervise clear-fault --employee ID`"
)
_RESTART = "`sudo systemctl restart paigow-controller`"


class Clearer(StrEnum):
    """Who may clear a condition."""

    DEALER = "dealer key"  # the dealer's CLEAR FAULT key, no supervisor key needed
    SUPERVISOR = "supervisor key"  # the physical supervisor key switch must be on
    TECHNICIAN = "technician + restart"  # a repair, then the controller restarted
    NOBODY = "nobody: it clears itself"  # a notice that ends when its cause does


class Clearing(StrEnum):
    """How a condition ends: what the core's rules of clearing are built on."""

    DEALER_KEY = "dealer_key"  # CLEAR FAULT, any key (a dealer may)
    SUPERVISOR_KEY = "supervisor_key"  # CLEAR FAULT with the supervisor key
    SUPERVISOR_NOTE = "supervisor_note"  # at the service terminal, key on, with a note why
    DICE_ACTION = "dice_action"  # the dice replaced, or inspected and kept (supervisor)
    TERMINAL_RECORD = "terminal_record"  # a supervisor's record at the terminal ends it
    RESTART = "restart"  # no key: a technician repairs, then restarts the controller
    ITSELF = "itself"  # it ends when its cause does (a notice; play goes on)


@dataclass(frozen=True, slots=True)
class FaultCode:
    """One row of the table. ``name`` is the fault's name in the records and on the screens
    (the ``Fault`` enum's value for a fault of the core)."""

    code: str  # F01...: stable, never renumbered
    name: str
    meaning: str  # in plain words, for the supervisor and the technician
    clearer: Clearer
    clearing: Clearing
    how: str  # the exact key, command or repair
    stops_play: bool = True
    is_core_fault: bool = True  # a value of ``controller.core.state.Fault``

    @property
    def who(self) -> str:
        return str(self.clearer)


FAULT_CODES: tuple[FaultCode, ...] = (
    FaultCode(
        "F01",
        "tamper",
        "The shaker was removed or tilted (its tamper loop opened); every output is off.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        f"Put the shaker back and secure it (the loop closed), then {_SUPERVISOR_CLEAR}.",
    ),
    FaultCode(
        "F02",
        "motor_overrun",
        "The shaker's motor ran past its maximum time and was cut by its driver.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        f"Check that the shaker turns freely, then {_SUPERVISOR_CLEAR}.",
    ),
    FaultCode(
        "F03",
        "sensor_timeout",
        "The dice sensor did not answer a reading in time.",
        Clearer.DEALER,
        Clearing.DEALER_KEY,
        f"Check the dice lie in the reading area, then {_CLEAR_KEY} (any key position).",
    ),
    FaultCode(
        "F04",
        "sensor_lost",
        "The dice sensor stopped answering (its cable, its power or the sensor itself).",
        Clearer.DEALER,
        Clearing.DEALER_KEY,
        "Reconnect the sensor (a technician if it stays silent); once it answers again,"
        f" {_CLEAR_KEY}. Out of a fault of the dice the supervisor may switch to the RNG:"
        " `paigow-controller supervise mode-switch --to rng --employee ID`.",
    ),
    FaultCode(
        "F05",
        "sensor_hardware",
        "The dice sensor reports its camera, lighting or lens failed.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        f"A technician repairs or replaces the sensor, then {_SUPERVISOR_CLEAR}.",
    ),
    FaultCode(
        "F06",
        "rng_failure",
        "The random number generator failed its self-test or could not draw.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        f"{_SUPERVISOR_CLEAR[0].upper()}{_SUPERVISOR_CLEAR[1:]}; if it comes back, call a"
        " technician (the journal says why: `journalctl -u paigow-controller`).",
    ),
    FaultCode(
        "F07",
        "storage",
        "The audit log could not be written (disk full or failing): nothing new is recorded.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        "A technician frees or repairs the storage (`df -h /var/lib/paigow-controller`),"
        f" then {_SUPERVISOR_CLEAR}.",
    ),
    FaultCode(
        "F08",
        "internal",
        "The controller met an error of its own (or a fault came back too often).",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        f"{_SUPERVISOR_CLEAR[0].upper()}{_SUPERVISOR_CLEAR[1:]}. If the screen says the"
        " controller will restart, systemd restarts it; tell a technician either way.",
    ),
    FaultCode(
        "F09",
        "log_rollback",
        "The audit log does not extend the checkpoint kept outside it: it was replaced by an"
        " older copy or cut back.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        "A technician finds out why (restores the right log from a backup if it was replaced);"
        f" to accept the log as it is, {_SUPERVISOR_CLEAR} (recorded; the log becomes the new"
        " anchor).",
    ),
    FaultCode(
        "F10",
        "anchor_missing",
        "The log has closed rounds but its anchor (the checkpoint kept outside it) is gone from"
        " both places: the rollback check has nothing to check against.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_NOTE,
        f"At the service terminal, {_KEY_ON}, saying why: `paigow-controller supervise"
        ' clear-fault --note "why" --employee ID` (the panel\'s key alone never clears it).',
    ),
    FaultCode(
        "F11",
        "log_identity",
        "The audit log's signing key is missing, unreadable or not the log's own: nothing is"
        " recorded.",
        Clearer.TECHNICIAN,
        Clearing.RESTART,
        "No key clears it. A technician restores the log's own key"
        " (`/var/lib/paigow-controller/audit-log.key`, mode 0600, or its systemd credential),"
        f" then {_RESTART}.",
    ),
    FaultCode(
        "F12",
        "log_damaged",
        "A record at the end of the audit log is damaged: nothing can be appended to it.",
        Clearer.TECHNICIAN,
        Clearing.RESTART,
        "No key clears it. A technician restores the log from a backup (the technician's guide,"
        f" backup and restore), then {_RESTART}.",
    ),
    FaultCode(
        "F13",
        "dice_alarm",
        "The dice monitor found the dice's faces too uneven to be fair dice: the table locked.",
        Clearer.SUPERVISOR,
        Clearing.DICE_ACTION,
        f"{_KEY_ON[0].upper()}{_KEY_ON[1:]}: replace the dice, `paigow-controller supervise"
        " dice-replaced --employee ID`, or inspect and keep them, `paigow-controller supervise"
        ' dice-kept --note "what was checked" --employee ID`.',
    ),
    FaultCode(
        "F14",
        "software_identity",
        "The installed software does not match its signed manifest, or the manifest is"
        " missing, unsigned or signed by another key.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        "A technician reinstalls the release (`paigow-controller verify-software` says what"
        f" differs) and runs {_RESTART}; once it verifies, {_SUPERVISOR_CLEAR}.",
    ),
    FaultCode(
        "F15",
        "reshake_limit",
        "The dice were reshaken as often as the table allows in one round: the table is locked.",
        Clearer.SUPERVISOR,
        Clearing.SUPERVISOR_KEY,
        f"Check the shaker and the dice, then {_SUPERVISOR_CLEAR}.",
        is_core_fault=False,
    ),
    FaultCode(
        "F16",
        "dice_missing",
        "No dice set is recorded in the shaker: no shake until one is (proposed 621a.5(c)).",
        Clearer.SUPERVISOR,
        Clearing.TERMINAL_RECORD,
        f"{_KEY_ON[0].upper()}{_KEY_ON[1:]}: `paigow-controller supervise dice-replaced --id"
        " SET --employee ID` (without --id: the next number).",
        is_core_fault=False,
    ),
    FaultCode(
        "F17",
        "dice_expired",
        "The dice have been on the table 24 hours: no shake until they are replaced"
        " (proposed 621a.5(c)).",
        Clearer.SUPERVISOR,
        Clearing.TERMINAL_RECORD,
        f"Put new dice in the shaker; {_KEY_ON}: `paigow-controller supervise dice-replaced"
        " --id SET --employee ID`.",
        is_core_fault=False,
    ),
    FaultCode(
        "F18",
        "tiles_missing",
        "No set of tiles is inspected at this table: no round is dealt until one is (621a.6(a)).",
        Clearer.SUPERVISOR,
        Clearing.TERMINAL_RECORD,
        f"The dealer inspects a set, the floorperson verifies it, {_KEY_ON}:"
        " `paigow-controller supervise tiles-inspected --set SET --dealer ID --employee ID`.",
        is_core_fault=False,
    ),
    FaultCode(
        "F19",
        "tiles_expired",
        "The tiles have been in play 12 hours: no round is dealt until they are changed"
        " (621a.3(e)).",
        Clearer.SUPERVISOR,
        Clearing.TERMINAL_RECORD,
        f"Change the tiles; {_KEY_ON}: `paigow-controller supervise tiles-inspected --set SET"
        " --dealer ID --employee ID`.",
        is_core_fault=False,
    ),
    FaultCode(
        "F20",
        "clock_unsynchronised",
        "The operating system does not keep the clock synchronised to a time source: the"
        " times in the records may be wrong. Play goes on.",
        Clearer.NOBODY,
        Clearing.ITSELF,
        "A technician checks the time service (`timedatectl status`; the casino's NTP server in"
        " `/etc/systemd/timesyncd.conf`); it ends when the clock is synchronised again.",
        stops_play=False,
        is_core_fault=False,
    ),
    FaultCode(
        "F21",
        "software_unverified",
        "No signed manifest is installed, so the software cannot be verified (this table does"
        " not require one). Play goes on.",
        Clearer.NOBODY,
        Clearing.ITSELF,
        "A technician installs the release with its signed manifest (the technician's guide,"
        f" install), then {_RESTART}.",
        stops_play=False,
        is_core_fault=False,
    ),
    FaultCode(
        "F22",
        "controller_stopped",
        "The controller is not running: nothing is played, recorded or shown.",
        Clearer.TECHNICIAN,
        Clearing.RESTART,
        "A technician reads why (`journalctl -u paigow-controller -n 50`), repairs, then runs"
        " `sudo systemctl start paigow-controller`.",
        is_core_fault=False,
    ),
)

BY_NAME: Mapping[str, FaultCode] = {row.name: row for row in FAULT_CODES}


def code_of(name: str) -> FaultCode:
    """The row of a fault or condition by its name; an unknown name (a record of a newer
    release) is a row of its own, never an error, so that a status is always shown."""
    row = BY_NAME.get(name)
    if row is not None:
        return row
    return FaultCode(
        "F??",
        name,
        "A condition this release does not know (recorded by another release).",
        Clearer.TECHNICIAN,
        Clearing.RESTART,
        "A technician looks it up in the guide of the release that recorded it.",
    )


def clearing_of(name: str) -> Clearing:
    """How the fault of the core ``name`` is cleared (``state.Fault``'s rules derive from it)."""
    return BY_NAME[name].clearing


def markdown() -> str:
    """``docs/faults.md``: the table for the supervisor and the technician."""
    lines = [
        "# Faults and conditions that stop play",
        "",
        "<!-- Generated from controller/core/faults.py by"
        " `paigow-controller status --fault-table --markdown`."
        " Do not edit: tests/core/test_faults.py keeps this file equal to the table. -->",
        "",
        "Each condition has a code that never changes. `paigow-controller status` lists the"
        " active ones with their code, the supervisor view and systemd's status name them too.",
        "",
        "Who may clear it:",
        "",
        f"- **{Clearer.DEALER}**: the dealer's CLEAR FAULT key, without the supervisor key;",
        f"- **{Clearer.SUPERVISOR}**: the physical supervisor key switch must be on (at the panel"
        " or for `paigow-controller supervise`, which also names the employee);",
        f"- **{Clearer.TECHNICIAN}**: no key clears it; a technician repairs, then restarts the"
        " controller;",
        f"- **{Clearer.NOBODY}**: a notice; play goes on, and it ends when its cause does.",
        "",
        "| Code | Name | Stops play | Meaning | Who clears it | How |",
        "|------|------|------------|---------|---------------|-----|",
    ]
    for row in FAULT_CODES:
        cells = (
            row.code,
            f"`{row.name}`",
            "yes" if row.stops_play else "no",
            row.meaning,
            row.who,
            row.how,
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def faults_json() -> str:
    """The table for the supervisor view (``/faults.json``): each row by its name."""
    return json.dumps(
        {
            row.name: {
                "code": row.code,
                "meaning": row.meaning,
                "who": row.who,
                "how": row.how,
                "stops_play": row.stops_play,
            }
            for row in FAULT_CODES
        },
        ensure_ascii=False,
        sort_keys=True,
    )
