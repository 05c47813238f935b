"""The appliance: the real drivers, the core, the RNG, the log and the display, put together.

``Appliance.start`` opens the audit log, rebuilds the table from it after a crash or power cut
(``controller.recovery``), records the power-on and the configuration, runs the self-tests (the
DRBG's known-answer test, the dice sensor's handshake, the pins' first reading) and tells systemd
it is ready. ``run`` is the control loop, in the calling thread, until SIGTERM (or ``stop``);
``close`` drives every output safe, records an unfinished round as interrupted, reveals an open
RNG session (from memory: its seed is in no file, only sealed to the auditor in its commitment),
writes the shutdown record and closes everything.

The same class runs on a Raspberry Pi (gpiozero's default pin factory, the sensor on its serial
port) and in ``simulate`` (a MockFactory with simulated shaker mechanics, the simulated sensor
on a pseudo-terminal): only the pin factory and the sensor's URL differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import gc
import logging
import os
import secrets
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from controller.app.adapters import NoShaker, SensorKeeper
from controller.app.instance_lock import InstanceLock
from controller.app.loop import ControlLoop, Duty, EventQueue, Ports
from controller.app.service import ServiceTerminal, socket_path
from controller.app.status import fault_details, lean, log_facts
from controller.app.watch import (
    CLOCK_EVERY_MS,
    TABLE_TIME_EVERY_MS,
    ClockWatch,
    SoftwareWatch,
    last_software_identity,
    table_time,
)
from controller.audit.archive import Policy, Retention, RetentionWorker
from controller.audit.log import (
    AuditLog,
    configured_origin,
    connect_read_only,
    require_origin,
)
from controller.core.config import Config, RoundConfig, require_escrow_key
from controller.core.record_data import config_loaded_data
from controller.core.records import RecordKind, StoredRecord
from controller.core.rng_escrow import parse_escrow_key
from controller.core.snapshot import decode_context
from controller.core.software import SoftwareCheck
from controller.core.state import Mode, RoundContext, RoundMachine, Screen
from controller.core.status import Facts, report, systemd_status
from controller.display.clock import SystemClockStatus
from controller.display.fanout import DisplayFanout
from controller.display.log_reader import SqliteLogReader
from controller.display.server import DisplayServer
from controller.errors import (
    ControllerError,
    FleetError,
    LogDamagedError,
    LogIdentityError,
    LogIntegrityError,
    SnapshotError,
)
from controller.ports import (
    ClockStatus,
    LoggedCheckpoint,
    ProgramVerification,
    TableDisplay,
    wall_ms,
)
from controller.rng.session import RngPort, RngSessionManager
from controller.software.check import SoftwareVerifier
from controller.software.release import installed_release
from controller.system.sdnotify import notify, watchdog_interval_s
from drivers.dice_sensor import SerialDiceSensor
from drivers.table_io import TableIO, build_table_io

if TYPE_CHECKING:
    from controller.audit.anchor import AnchorFinding
    from controller.fleet.publisher import Publisher

log = logging.getLogger("paigow.appliance")

Observer = Callable[[Screen, Mapping[str, object]], None]

# A stop (SIGTERM, SIGINT) ends within STOP_BUDGET_S: systemd's TimeoutStopSec= in
# systemd/paigow-controller.service, after which it sends SIGKILL (a test holds the two equal).
# ``close`` shares STOP_WAITS_S of it among the waits for other threads (the fleet's last
# sends, the display's clients, the retention's archive, ...); the rest is for the last
# records and the interpreter's exit. STOP_DUMP_AFTER_S after the signal, a stop still under
# way prints every thread's stack to stderr (the journal), before systemd's SIGKILL.
STOP_BUDGET_S = 20.0
STOP_WAITS_S = 12.0
STOP_DUMP_AFTER_S = STOP_BUDGET_S - 3.0


@dataclass(frozen=True)
class Options:
    """What differs between the table and the simulation."""

    pin_factory: Any = None  # None: gpiozero's default (lgpio on a Pi)
    sensor_url: str | None = None  # None: the config's [sensor] url
    state_dir: Path | None = None  # None: the config's [storage] state_dir
    web_display: bool = True
    web_display_required: bool = True  # the simulation goes on without it if its port is taken
    displays: Sequence[TableDisplay] = ()
    observers: Sequence[Observer] = ()
    wall_clock: Callable[[], int] = wall_ms  # UTC milliseconds (the simulation's may run fast)
    service_terminal: bool = True  # the supervisor's commands on a Unix socket
    control_socket: Path | None = None  # None: $RUNTIME_DIRECTORY's control.sock, else state_dir's
    # Program verification: None checks the installed software as [software] says; no manifest
    # installed is a fault only with ``software_required`` (``run`` takes [software] required;
    # simulate and the tests record it as unverified)
    software: ProgramVerification | None = None
    software_required: bool = False
    clock_status: ClockStatus | None = None  # None: the OS's (adjtimex, systemd-timesyncd)


class Appliance:
    def __init__(self, config: Config, options: Options = Options()) -> None:
        self.config = config
        self.options = options
        self.state_dir = options.state_dir or Path(config.storage.state_dir)
        self.events = EventQueue()
        self.log: AuditLog | None = None
        self.table_io: TableIO | None = None
        self.sensor: SensorKeeper | None = None
        self.rng: RngSessionManager | None = None
        self.display: DisplayFanout | None = None
        self.loop: ControlLoop | None = None
        self.terminal: ServiceTerminal | None = None
        self.fleet: Publisher | None = None
        self._server: DisplayServer | None = None
        self._closables: list[Callable[[], None]] = []
        self._watchdog_s = watchdog_interval_s()
        self._last_ping = 0.0
        self._closed = False
        self._lock: InstanceLock | None = None
        self._signal: int | None = None
        # the status (``status_report``, systemd's STATUS=): what the periodic checks found
        self._software_check: _LastCheck | None = None
        self._clock_watch: ClockWatch | None = None
        self._is_ready = False  # READY=1 sent: from then on STATUS= follows every change
        self._status_sent: str | None = None
        self._signals: _Signals | None = None
        self._stop_deadline: float | None = None  # time.monotonic(): the waits of close end

    # --- start ------------------------------------------------------------------------------

    def start(self) -> None:
        """Everything up to READY=1. SIGTERM and SIGINT are caught from the first line on (on
        the main thread): one that comes while the table starts lets the step under way end,
        skips the rest (no self-test, no terminal, no fleet, no READY=1), and ``run`` returns
        at once; ``close`` then records the shutdown as after any stop."""
        self._catch_signals()
        settings = self.config.round_settings()
        self._lock = InstanceLock.acquire(self.state_dir)
        self._closables.append(self._lock.release)
        audit, context = self._open_log_and_context()
        self.log = audit
        self._closables.append(audit.close)
        # the log extends its anchor, kept in two places (a place missing or behind is
        # rewritten from the other, and that recorded); no anchor at all with closed rounds
        # is anchor_missing (audit/anchor.py)
        found = None if audit.locked else audit.check_anchor()
        ports = self._ports(audit)
        if self.is_stopping():  # nothing recorded yet: the log is closed as it was found
            return
        machine = RoundMachine(settings, context)
        self._software_check = _LastCheck(self._software())
        software = SoftwareWatch(self._software_check, before=last_software_identity(audit))
        clock = ClockWatch(self.options.clock_status or SystemClockStatus())
        self._clock_watch = clock
        self.loop = self._control_loop(machine, ports, software, clock)
        reads = self.loop.recall_reads
        if reads is not None:  # closed before the log
            self._closables.append(lambda: reads.close(timeout=self._stop_left_s()))
        self._power_on(self.loop, found, software, clock)
        if self.is_stopping():
            return
        self._self_tests()
        if self.is_stopping():
            return
        self._retain(audit)
        self._serve_terminal()
        self._publish(audit)
        if self.is_stopping():
            return
        self._declare_ready(machine)

    def _ports(self, audit: AuditLog) -> Ports:
        """The displays (and their server), the table's inputs and outputs, the RNG and the
        dice sensor, each closed at the end."""
        self.display = self._displays(audit)
        self._closables.append(self.display.close)
        self.display.observers.append(self._on_screen)
        server = self._server
        if server is not None:  # first (closed in reverse), within the stop's budget
            self._closables.append(lambda: server.close(timeout=self._stop_left_s()))
        self.table_io = build_table_io(
            self.config, self.events, pin_factory=self.options.pin_factory
        )
        self._closables.append(self.table_io.close)
        rng_port = self._rng()
        self.sensor = self._sensor()
        return Ports(
            log=audit,
            display=self.display,
            panel=self.table_io.panel,
            shaker=self.table_io.shaker or NoShaker(),
            latch=self.table_io.latch,
            sensor=self.sensor,
            rng=rng_port,
        )

    def _control_loop(
        self, machine: RoundMachine, ports: Ports, software: SoftwareWatch, clock: ClockWatch
    ) -> ControlLoop:
        """The control loop, with its periodic checks: the software, the clock, the table's
        time."""
        duties = [
            Duty("software", self.config.software.check_every_s * 1000, software.check),
            Duty("clock", CLOCK_EVERY_MS, clock.check),
            Duty("table time", TABLE_TIME_EVERY_MS, table_time),
        ]
        return ControlLoop(
            machine,
            ports,
            events=self.events,
            alive_every_s=None if self._watchdog_s is None else self._watchdog_s / 2,
            on_alive=self._alive,
            collect_garbage_when_idle=True,
            shake_delay=lambda: draw_shake_delay(self.config.round),
            wall_clock=self.options.wall_clock,
            duties=duties,
            recall_apart=True,  # the table never waits on a supervisor's recall (issue 31)
        )

    def _power_on(
        self,
        loop: ControlLoop,
        found: AnchorFinding | None,
        software: SoftwareWatch,
        clock: ClockWatch,
    ) -> None:
        """power_on, the configuration in force, then what the core decided for the context
        the log held: all through the loop, so that a log that cannot be written is a fault.
        The software is checked against its signed manifest first (program verification)."""
        if found is not None and found.fault is not None:
            log.error("audit log: %s", found.detail)
        elif found is not None and found.rewritten:
            log.warning("audit log: %s", found.rewritten)
        checked, before = software.first()
        loop.power_on(
            config=config_loaded_data(self.config),
            fault=None if found is None else found.fault,
            detail="" if found is None else found.detail,
            anchor="" if found is None else found.rewritten,
            software=checked,
            software_before=before,
            clock=clock.now(),
        )

    def _declare_ready(self, machine: RoundMachine) -> None:
        """READY=1 to systemd. Its status names every condition by its code (never "ready"
        while one stops play); a log read only is in it with why (no fault record can say
        it)."""
        self._status_sent = self.status_line()
        notify(f"READY=1\nSTATUS={self._status_sent}")
        self._is_ready = True
        config = self.config
        log.info(
            "ready: table %s, %s mode, round %d",
            config.table.name,
            config.table.mode,
            machine.context.round_number,
        )

    # --- the status ---------------------------------------------------------------------------

    def _facts(self) -> Facts:
        """What the control thread's own state says (nothing read from the disk)."""
        assert self.loop is not None
        machine = self.loop.machine
        ctx, settings = machine.context, machine.settings
        mode = ctx.mode if ctx.mode in settings.allowed_modes else settings.mode
        check = None if self._software_check is None else self._software_check.last
        details: dict[str, str] = {}
        if self.loop.restart_reason is not None:
            details["internal"] = self.loop.restart_reason
        return Facts(
            table=self.config.table.name,
            is_running=True,
            context=ctx,
            wall=self.options.wall_clock(),
            mode=mode,
            game=settings.game,
            log_locked=None if self.log is None else self.log.locked,
            clock=None if self._clock_watch is None else self._clock_watch.last,
            software=None
            if check is None
            else {
                "result": str(check.result),
                "version": check.version,
                "manifest": check.manifest,
            },
            details=details,
        )

    def status_line(self) -> str:
        """systemd's ``STATUS=`` text for the table as it is now."""
        return systemd_status(self._facts())

    def status_report(self) -> dict[str, object]:
        """The whole status (``controller.core.status.report``), for the service terminal's
        ``status``: the control thread's state, and the log's checkpoint, witness and checks
        read with a connection of its own (called from a connection's thread)."""
        facts = self._facts()
        found: dict[str, object] = {"problems": []}
        if self.log is not None:
            try:
                db = connect_read_only(self.log.path)
            except (ControllerError, OSError, sqlite3.Error) as exc:
                found["problems"] = [f"the log cannot be read: {exc}"]
            else:
                try:
                    found = log_facts(db)
                    if facts.context is not None:
                        active = {str(f) for f in facts.context.active_faults}
                        details = {**fault_details(db, active), **facts.details}
                        facts = dataclasses.replace(facts, details=details)
                except (ControllerError, sqlite3.Error, ValueError) as exc:
                    found["problems"] = [f"fault details: {exc}"]
                finally:
                    db.close()
        software = facts.software
        logged = found.get("software")
        if isinstance(logged, dict):  # the log's record has the key and when it was checked
            software = {**logged, **(software or {})}
        # the release this process runs from (None outside an installed release)
        software = {**(software or {}), "release": installed_release()}
        problems = found.get("problems")
        facts = dataclasses.replace(
            facts,
            software=software,
            log_size=_int_or_none(found.get("log_size")),
            checkpoint=_mapping_or_none(found.get("checkpoint")),
            witness=_mapping_or_none(found.get("witness")),
            problems=tuple(str(p) for p in problems) if isinstance(problems, list) else (),
        )
        return lean(report(facts))

    def _on_screen(self, screen: Screen, data: Mapping[str, object]) -> None:
        """Every screen the loop shows follows a change of state or faults: systemd's status
        is told when its text changed (on the control thread: a datagram, nothing read)."""
        if not self._is_ready or not os.environ.get("NOTIFY_SOCKET"):
            return  # not under systemd: nobody to tell, nothing computed
        try:
            line = self.status_line()
        except Exception:  # the status is never worth the table
            log.exception("the status line failed")
            return
        if line != self._status_sent:
            self._status_sent = line
            notify(f"STATUS={line}", wait_s=0)  # never waited for: the next one says it all

    def _software(self) -> ProgramVerification:
        if self.options.software is not None:
            return self.options.software
        return SoftwareVerifier.installed(
            manifest=self.config.software.manifest,
            public_key=self.config.software.public_key,
            required=self.options.software_required,
        )

    def _retain(self, audit: AuditLog) -> None:
        """Retention ([storage] retain_rounds, retain_days): the oldest rounds to the archive,
        prepared on a thread of its own, dropped from the log between rounds."""
        storage = self.config.storage
        policy = Policy(storage.retain_rounds, storage.retain_days)
        if not policy.is_on or audit.locked is not None or audit.signer is None:
            return
        assert self.loop is not None
        worker = RetentionWorker(Retention(self.state_dir, audit.signer, policy), audit)
        worker.start()
        self._closables.append(lambda: worker.close(timeout=self._stop_left_s()))
        self.loop.between_rounds = worker.between_rounds

    def _publish(self, audit: AuditLog) -> None:
        """[fleet]: the records, the checkpoint and the status to the casino's broker, on a
        thread of the publisher's own (controller/fleet/publisher.py). A fleet that cannot be
        set up (a credentials or certificate file) is off, with the reason logged: the table
        plays on, as it does without a broker."""
        config = self.config
        if not config.fleet.mqtt_url:
            return
        from controller.fleet.protocol import StatusSigner  # noqa: PLC0415 - with the fleet
        from controller.fleet.publisher import Publisher  # noqa: PLC0415 - paho

        try:
            publisher = Publisher(
                config.fleet,
                table=config.table.name,
                state_dir=self.state_dir,
                # the log's key for the statuses only: it signs no checkpoint or other text
                signer=None if audit.signer is None else StatusSigner(audit.signer),
                events=self.events,
                on_anchor=None if self._server is None else self._server.anchored,
                wall_clock=self.options.wall_clock,
                mode=str(config.table.mode),
            )
        except FleetError as exc:
            log.error("fleet: off: %s", exc)
            return
        assert self.display is not None
        self.display.observers.append(publisher.observe)
        listeners = [audit.on_commit, publisher.committed]
        audit.on_commit = _each_listener([f for f in listeners if f is not None])
        publisher.start()
        self.fleet = publisher
        self._closables.append(lambda: publisher.close(timeout=self._stop_left_s()))

    def _open_log_and_context(self) -> tuple[AuditLog, RoundContext]:
        """The table's log and the context it holds. A key that is missing or not the log's
        own is never replaced: the log is opened for reading only and the table shows the
        ``log_identity`` fault until it is restored. A log whose tail (the records the tree is
        rebuilt from, or the head, or the stored context) is damaged is opened for reading
        only too: the table shows ``log_damaged`` naming the record, serves the display and
        the readers, and never plays; no start fails on it (no restart loop). A log of another
        origin than ``[fleet] origin`` is a configuration error (ConfigError: exit 78), never
        a log opened under another name."""
        require_origin(self.state_dir, self.config)
        origin = configured_origin(self.config)
        try:
            audit = AuditLog.open(
                self.state_dir,
                origin=origin,
                anchor_copy_dir=self.config.storage.anchor_copy_dir or None,
            )
        except LogIdentityError as exc:
            log.error("%s", exc)
            audit = AuditLog.open_locked(self.state_dir, str(exc), origin=origin)
        except (LogDamagedError, LogIntegrityError) as exc:
            return self._open_damaged(str(exc), origin), RoundContext()
        try:
            return audit, self._stored_context(audit)
        except LogIntegrityError as exc:
            audit.close()
            return self._open_damaged(f"audit log: {exc}", origin), RoundContext()

    def _open_damaged(self, reason: str, origin: str) -> AuditLog:
        """The damaged log for reading only: every commit raises :class:`LogDamagedError`
        with ``reason``, so the first step latches ``log_damaged``. The fault cannot be
        recorded (a record appended to a tree that cannot be rebuilt would be wrong): it is
        in memory, on the display, in the journal and in systemd's status."""
        why = f"{reason}; nothing is recorded until the log is restored and the table restarted"
        log.error("%s", why)
        return AuditLog.open_locked(
            self.state_dir, why, origin=origin, locked_error=LogDamagedError
        )

    @staticmethod
    def _stored_context(audit: AuditLog) -> RoundContext:
        """The context the log holds (with its last step), or a fresh one for a new log (or
        a log read only whose context cannot be read)."""
        try:
            stored = audit.latest_context()
        except LogIntegrityError:
            if audit.locked is None:
                raise
            return RoundContext()
        if stored is None:
            return RoundContext()
        seq, blob = stored
        try:
            return decode_context(blob)
        except SnapshotError as exc:
            if audit.locked is not None:
                return RoundContext()
            raise LogIntegrityError(seq, f"the round's stored context: {exc}") from exc

    def _rng_records(self) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
        """The RNG records of the last few sessions: enough to end the one open before a
        restart, to know what is revealed and to repeat a recorded draw, read in constant time
        whatever the log's length."""
        assert self.log is not None
        kinds = {
            RecordKind.RNG_COMMIT,
            RecordKind.RNG_DRAW,
            RecordKind.RNG_REVEAL,
            RecordKind.RNG_INTERRUPTED,
        }
        for record in self.log.recent_records(kinds, since_kind=RecordKind.RNG_COMMIT, count=3):
            yield record.seq, record.kind, record.data

    def _displays(self, audit: AuditLog) -> DisplayFanout:
        displays = list(self.options.displays)
        if self.options.web_display:
            try:
                server = DisplayServer(
                    self.config.display,
                    SqliteLogReader.of(audit),
                    table=self.config.table.name,
                    limits=self.config.limits,
                    paytables=self.config.paytables,
                )
            except OSError as exc:
                if self.options.web_display_required:
                    raise
                log.warning("table display not served: %s", exc)
            else:
                displays.insert(0, server)  # the page first: it has a latency goal
                self._server = server
                audit.on_commit = server.committed  # the feed's records, straight from the log
                host, port = self.config.display.host, self.config.display.http_port
                log.info("table display on http://%s:%d/", host, port)
        return DisplayFanout(displays, observers=self.options.observers)

    def _rng(self) -> RngPort | None:
        if Mode.RNG not in self.config.round_settings().allowed_modes:
            return None
        assert self.log is not None
        require_escrow_key(self.config)  # each session's seed is sealed to the auditor
        self.rng = RngSessionManager(
            state_dir=self.state_dir,
            log=self.log,
            table=self.config.table.name,
            game=self.config.table.game,
            mode=self.config.rng.mode,
            max_rounds=self.config.rng.session_max_rounds,
            records=self._rng_records(),
            escrow=parse_escrow_key(self.config.rng.escrow_public_key),
            lookup=self.log.contains,
        )
        # The table display shows each commitment from its rng_commit record in the log.
        return RngPort(self.rng)

    def _sensor(self) -> SensorKeeper | None:
        if self.config.round_settings().allowed_modes == {Mode.RNG}:
            return None  # a table that never plays with dice has no dice sensor
        url = self.options.sensor_url or self.config.sensor.url
        sensor = SerialDiceSensor.from_config(
            dataclasses.replace(self.config.sensor, url=url), self.events
        )
        keeper = SensorKeeper(sensor, self.events)
        self._closables.append(keeper.close)
        return keeper

    def _self_tests(self) -> None:
        """621a.2(e) / AGCO 5.1: a failed selection mechanism disables play until fixed. The
        DRBG's known-answer test runs before every session is opened."""
        assert self.table_io is not None
        if self.sensor is not None:
            self.sensor.open_or_keep_trying()
        if self.table_io.shaker is not None:
            self.table_io.shaker.report_inputs()

    def _serve_terminal(self) -> None:
        """The service terminal (``controller/app/service.py``): the supervisor's commands,
        with the physical key read as each arrives."""
        if not self.options.service_terminal:
            return
        assert self.loop is not None
        assert self.table_io is not None
        path = self.options.control_socket or socket_path(self.state_dir)
        self.terminal = ServiceTerminal(
            path, loop=self.loop, key=self.table_io.panel, status=self.status_report
        )
        self.terminal.start()

    # --- run --------------------------------------------------------------------------------

    def run(self) -> None:
        """The control loop in this thread until ``stop``; SIGTERM and SIGINT stop it (caught
        since ``start``). Returns at once when one came while the table started."""
        if self.loop is None or self.is_stopping():
            self._say_stopping()
            return
        with _tuned_for_latency():
            self.loop.run()
        self._say_stopping()

    def _say_stopping(self) -> None:
        if self._signal is not None:
            log.warning("signal %d: stopping", self._signal)
            notify("STOPPING=1")

    def is_stopping(self) -> bool:
        """A signal asked the table to stop."""
        return self._signal is not None

    def _catch_signals(self) -> None:
        """SIGTERM and SIGINT to ``_on_signal``, from now until ``close`` (main thread only:
        Python runs handlers there; an appliance on another thread is stopped by ``stop``)."""
        if self._signals is None and threading.current_thread() is threading.main_thread():
            self._signals = _Signals(self._on_signal, self.events.wake)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Runs on the control thread between any two bytecodes, maybe inside a lock of a
        driver, of the queue or of a stream: it only trips the latch (safe there, see
        drivers/safety.py), raises the loop's stop flag and arms faulthandler's timer. It logs
        nothing and touches no queue: Python also writes the signal's number to a pipe, whose
        reader thread wakes the loop (``_SignalWake``)."""
        first = self._signal is None
        self._signal = signum
        if first:
            self._stop_deadline = time.monotonic() + STOP_WAITS_S
            if self._signals is not None:
                self._signals.dump_stacks_later(STOP_DUMP_AFTER_S)
        if self.table_io is not None:
            # The one fault latch: every output safe now, before the loop winds down.
            self.table_io.latch.trip(f"shutdown: signal {signum}")
        if self.loop is not None:
            self.loop.request_stop()

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.stop()

    def _alive(self) -> None:
        if self._watchdog_s is None:
            return
        now = time.monotonic()
        if now - self._last_ping >= self._watchdog_s / 2:
            self._last_ping = now
            notify("WATCHDOG=1")

    # --- close ------------------------------------------------------------------------------

    def close(self) -> None:
        """Everything safe, the unfinished round recorded as interrupted, the log closed.
        The waits for other threads share STOP_WAITS_S from the signal (or from here): a
        stop ends within STOP_BUDGET_S, whatever a broker, a client or a disk does."""
        if self._closed:
            return
        self._closed = True
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + STOP_WAITS_S
        try:
            if self.terminal is not None:  # no command after this: the loop takes none
                self.terminal.close()
            if self.table_io is not None:
                self.table_io.drive_safe()
            if self.log is not None and self.loop is not None:
                self.loop.shutdown()
            for close in reversed(self._closables):
                try:
                    close()
                except Exception:
                    log.exception("closing failed")
        finally:
            if self._signals is not None:
                self._signals.close()
                self._signals = None

    def _stop_left_s(self) -> float:
        """What is left of STOP_WAITS_S for the next wait of ``close`` (0 once it is spent)."""
        if self._stop_deadline is None:
            return STOP_WAITS_S
        return max(0.0, self._stop_deadline - time.monotonic())

    def __enter__(self) -> Appliance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _LastCheck:
    """The program verification, remembering its last result for the status."""

    def __init__(self, verifier: ProgramVerification) -> None:
        self.verifier = verifier
        self.last: SoftwareCheck | None = None

    def check(self) -> SoftwareCheck:
        self.last = self.verifier.check()
        return self.last


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _mapping_or_none(value: object) -> Mapping[str, object] | None:
    return value if isinstance(value, dict) else None


def _each_listener(
    listeners: Sequence[Callable[[list[StoredRecord], LoggedCheckpoint], None]],
) -> Callable[[list[StoredRecord], LoggedCheckpoint], None]:
    """The log's one ``on_commit`` telling several listeners, each whatever the others do."""
    if len(listeners) == 1:
        return listeners[0]

    def tell(records: list[StoredRecord], checkpoint: LoggedCheckpoint) -> None:
        for listener in listeners:
            try:
                listener(records, checkpoint)
            except Exception:
                log.exception("a commit's listener failed")

    return tell


# Issue 13 (sensor frame to result on the page and the feed within 1 ms): the cyclic garbage
# collector runs when the control loop is idle (ControlLoop(collect_garbage_when_idle=True)),
# not in the middle of a round; an automatic collection is only a backstop, after this many
# allocations (Python's 700 made one every other round, of 0.3 ms, or 2 ms for its middle
# generation, inside the frame -> result window of one round in five).
BACKSTOP_COLLECTION_AFTER = 50_000


def draw_shake_delay(config: RoundConfig) -> int:
    """The delay before a shake's motor starts, uniform over the configured range, from the
    OS CSPRNG (issue 14: a player's press cannot time the dice)."""
    span = config.shake_delay_max_ms - config.shake_delay_min_ms
    return config.shake_delay_min_ms + secrets.randbelow(span + 1)


@contextlib.contextmanager
def _tuned_for_latency() -> Iterator[None]:
    """The interpreter set for the control loop while it runs, and set back after: objects
    that live from start-up on are frozen out of the cyclic collector (``gc.freeze``), so that
    a full collection does not walk them all again (26 to 32 ms in the latency benchmark's
    child), and automatic collections are rare (the loop collects when idle)."""
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(BACKSTOP_COLLECTION_AFTER, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class _Signals:
    """SIGTERM and SIGINT handled by ``handler`` until ``close``, which puts back the handlers
    found; ``wake`` is called from a normal thread after each (``_SignalWake``)."""

    def __init__(
        self, handler: Callable[[int, FrameType | None], None], wake: Callable[[], None]
    ) -> None:
        self._relay = _SignalWake(wake)
        self._previous = {
            signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self._stderr: int | None = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # no real stderr (a test's capture)
            self._stderr = None

    def dump_stacks_later(self, after_s: float) -> None:
        """Every thread's stack to stderr ``after_s`` from now unless ``close`` comes first:
        a stop that hangs says where in the journal before systemd's SIGKILL. From a signal
        handler: faulthandler is given the descriptor, so it flushes no stream (one the
        interrupted code may be writing); its timer is a C thread, which the GIL and the
        locks the hang holds cannot stop."""
        if self._stderr is None:
            return
        with contextlib.suppress(Exception):  # never an exception out of a signal handler
            faulthandler.dump_traceback_later(after_s, exit=False, file=self._stderr)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            faulthandler.cancel_dump_traceback_later()
        with contextlib.suppress(ValueError):  # not the main thread: left as they are
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)
            self._relay.close()


class _SignalWake:
    """Wakes the control loop when a signal arrives, from a normal thread. The handler itself
    may not touch the queue (it runs between any two bytecodes of the control thread, maybe
    inside the queue's lock); ``signal.set_wakeup_fd`` has the interpreter write the signal's
    number to a pipe at C level, and this thread turns each read into ``wake``. ``close``
    writes 0xff: the thread ends on a read that holds it, whatever came before it in the same
    read (a signal's byte the thread had not read yet)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._read, self._write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._write, False)
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._wake = wake
        self._thread = threading.Thread(target=self._relay, name="signal-wake", daemon=True)
        self._thread.start()

    def _relay(self) -> None:
        while True:
            try:
                data = os.read(self._read, 64)
            except OSError:
                return
            if not data:  # closed
                return
            if any(byte != _CLOSING for byte in data):
                self._wake()
            if _CLOSING in data:
                return

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous)
        with contextlib.suppress(OSError):
            os.write(self._write, bytes([_CLOSING]))
        self._thread.join(timeout=2)
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


_CLOSING = 0xFF  # no signal's number
