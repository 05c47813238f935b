"""The product's one exception tree.

Every error the controller raises on purpose derives from :class:`ControllerError`, and also from
the builtin it means (``SensorTimeout`` is a ``TimeoutError``), so callers may catch either.
Each public exception is defined here; the module that raises it imports it from here.
Three private ones stay in the one module that raises and catches them as control flow:
``controller.core.rng_replay._Bad`` (a session's records that do not replay),
``controller.core.sensor_protocol._Reject`` (a frame refused with its reason) and
``controller.audit.parallel._Split`` (a run not as it should be: verified again sequentially
to name the record).
One public exception stays out of the tree on purpose: ``controller.software.release.ReleaseError``
(the installer runs that file alone, with the system's Python, before the package exists).
Process exit codes follow sysexits(3): a bad configuration is 78 (EX_CONFIG), a bad command
line is 2 (argparse's usage error).
"""

from __future__ import annotations

EX_USAGE = 2
EX_SOFTWARE = 70
EX_CONFIG = 78


class ControllerError(Exception):
    """Root of every error the controller raises on purpose."""


# --- configuration and command line -------------------------------------------------------


class ConfigError(ControllerError, ValueError):
    """The configuration file is unreadable, has an unknown key or a value out of range."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config: {key}: {message}")
        self.key = key


class UsageError(ControllerError, ValueError):
    """A command-line argument is out of range (exit 2, one line, no traceback)."""


class NumberError(ControllerError, ValueError):
    """Text that is not a whole number in the range asked for. Callers turn it into their
    own error (a usage error, a config error naming the key, a refused request)."""


# --- the game core --------------------------------------------------------------------------


class GameRuleError(ControllerError, ValueError):
    """An input that the rules of the game do not allow (a face of 7, a total of 2, ...)."""


class BankRuleError(GameRuleError):
    """A bank selection refused by 621a.11(b),(c) / 645a.12(b),(c). ``rule`` names the rule
    for a display that words it in its own language ("after_shuffle", "twice_in_a_row")."""

    def __init__(self, message: str, *, rule: str = "", seat: int | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.seat = seat


class IllegalTransition(ControllerError, RuntimeError):
    """An event that the round state machine does not accept in its current state."""

    def __init__(self, state: object, event: object) -> None:
        super().__init__(f"event {event!s} is not allowed in state {state!s}")
        self.state = state
        self.event = event


# --- the core's stored and signed forms -----------------------------------------------------


class EncodingError(ControllerError, ValueError):
    """A value that has no canonical encoding, or bytes that are not canonical."""


class RecordDataError(ControllerError, ValueError):
    """A record's data does not have the shape its kind requires."""


class SnapshotError(ControllerError, ValueError):
    """A stored context that the encoder cannot have written."""


class MetersError(ControllerError, ValueError):
    """Stored meters that the encoder cannot have written."""


class CountsError(ControllerError, ValueError):
    """Counts that the dice monitor cannot have made (a stored context, a record)."""


class NoteError(ControllerError, ValueError):
    """A malformed key, note or checkpoint, or a signature that does not verify."""


# --- hardware -------------------------------------------------------------------------------


class HardwareError(ControllerError, OSError):
    """A hardware adapter failed; the shell latches a fault and drives outputs safe."""


class SensorError(HardwareError):
    """The optical dice sensor failed or said something we cannot trust."""


class SensorTimeout(SensorError, TimeoutError):
    """The sensor did not answer a request in time (after its retries)."""


class SensorDisconnected(SensorError, ConnectionError):
    """The sensor's serial port went away (unplugged, USB reset)."""


class FrameError(SensorError, ValueError):
    """A frame from the sensor was malformed: bad checksum, truncated, over-long, out of range."""


class SensorVersionError(SensorError):
    """The sensor speaks a protocol version or firmware the controller does not accept."""


class SensorHardwareFault(SensorError):
    """The sensor reports that its own camera, lighting or lens failed."""


class ShakerError(HardwareError):
    """The dice shaker's hardware failed."""


class OutputsLatched(ShakerError):
    """A shake refused because the fault latch holds the outputs safe. Not a fault of its own:
    whatever tripped the latch reports its fault with its own event."""


# --- random number generator ----------------------------------------------------------------


class RngError(ControllerError, RuntimeError):
    """The random number generator cannot be trusted; the RNG mode is refused."""


class RngSelfTestFailure(RngError):
    """A known-answer or continuous self-test of the DRBG failed."""


class RngSessionLost(RngError):
    """The session committed before the round's bets closed ended with a restart (its seed
    was in memory only): the round cannot be drawn from it and is voided by the table, never
    drawn from a session committed after its bets closed (621a.8(a)(1))."""


class EscrowError(RngError, ValueError):
    """An auditor's escrow key, or a session's sealed seed, that is malformed, sealed to
    another key, altered, or does not match its commitment."""


# --- the display's clients ----------------------------------------------------------------


class ClientNotReading(ControllerError, TimeoutError):
    """A display or feed client has not taken what it was sent within the bound: dropped."""


class FeedRequestError(ControllerError, ValueError):
    """A feed request line that is neither ``{"from": N}`` nor ``FROM N``."""


# --- the service terminal and commissioning -------------------------------------------------


class ServiceTerminalError(ControllerError, OSError):
    """The service terminal cannot be served, or its controller cannot be reached or answered
    outside the grammar."""


class TerminalUnavailable(ServiceTerminalError, ConnectionError):
    """No controller answers at the socket (not running, or a socket left by a crash)."""


class RequestError(ControllerError, ValueError):
    """A service terminal request outside the grammar: it never becomes an event."""


class NoAnswer(ControllerError, TimeoutError):
    """The technician did not answer in time, or their input ended: the walk is abandoned."""


# --- audit log ------------------------------------------------------------------------------


class AuditLogError(ControllerError, OSError):
    """The audit log cannot be written or read; no new round may start."""

    fault = "storage"  # the fault the control loop latches (controller.core.state.Fault)


class StorageFull(AuditLogError):
    """The disk (or the database's page limit) is full."""


class LogIdentityError(AuditLogError):
    """The log's signing key is missing, unreadable or not the one the log was created with,
    or the log belongs to another table: nothing may be recorded (never a new key)."""

    fault = "log_identity"


class LogDamagedError(AuditLogError):
    """Records the controller must read to append are damaged: the log's last records (those
    after the last Merkle frontier kept, at most FRONTIER_EVERY), from which it rebuilds the
    tree at start, or the head row that signs them. Nothing may be appended (the tree and the
    chain would be built on what was not written): the log is read only until a technician
    restores it from a backup (or repairs it) and restarts the controller. ``record``: the
    damaged record, None when it is the head or a kept frontier."""

    fault = "log_damaged"

    def __init__(self, message: str, record: int | None = None) -> None:
        super().__init__(message)
        self.record = record


class InstanceLocked(ControllerError, RuntimeError):
    """Another controller holds the state directory."""


class LogIntegrityError(AuditLogError):
    """A record, the hash chain, a Merkle root or a signature does not verify."""

    def __init__(self, record: int | None, message: str) -> None:
        where = f"record {record}" if record is not None else "log"
        super().__init__(f"{where}: {message}")
        self.record = record


class ArchiveError(AuditLogError):
    """An archive file is not what its signed note says, or the chain is broken."""


class RestoreRefused(AuditLogError):
    """The restore would write over a log, or roll the log back, or the backup does not
    verify: nothing was written."""


class SoftwareIdentityError(ControllerError, ValueError):
    """A software manifest that cannot be read, is malformed, is not signed by the release key,
    or a package tree that cannot be hashed within its bounds (program verification)."""


# --- files ----------------------------------------------------------------------------------


class TooLarge(ControllerError, ValueError):
    """A file (or a device or pipe) that holds more than the caller will read."""


class LockHeld(ControllerError):
    """Another process holds the lock: ``holder`` is the PID it wrote ("unknown" if none)."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"held by PID {holder}")
        self.holder = holder


# --- the fleet ------------------------------------------------------------------------------


class FleetError(ControllerError, ValueError):
    """An MQTT connection cannot be set up as configured (a credentials or certificate file):
    on a table the fleet stays off and the table plays; the witness exits 78."""


class ProtocolError(ControllerError, ValueError):
    """A topic or payload that is not what the fleet protocol says: refused, never acted on."""


class CursorError(ControllerError, ValueError):
    """The fleet outbox's cursor file is not one this publisher wrote."""


class PkiError(ControllerError, ValueError):
    """A name, a validity, a CA's files or its index that cannot be used (the CLI's exit 2)."""


# --- the witness ----------------------------------------------------------------------------


class WitnessStoreError(ControllerError, OSError):
    """The witness's store cannot be read or written: the witness stops (its next start reads
    what is really there; the broker keeps the messages it did not acknowledge)."""
