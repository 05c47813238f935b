"""The appliance: the real drivers, the core, the RNG, the log and the display, put together.

``Appliance.start`` opens the audit log, rebuilds the table from it after a crash or power cut
(``controller.recovery``), records the power-on and the configuration, runs the self-tests (the
DRBG's known-answer test, the dice sensor's handshake, the pins' first reading) and tells systemd
it is ready. ``run`` is the control loop, in the calling thread, until SIGTERM (or ``stop``);
``close`` drives every output safe, records an unfinished round as interrupted, reveals an open
RNG session, writes the shutdown record and closes everything.

The same class runs on a Raspberry Pi (gpiozero's default pin factory, the sensor on its serial
port) and in ``simulate`` (a MockFactory with simulated shaker mechanics, the simulated sensor
on a pseudo-terminal): only the pin factory and the sensor's URL differ.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from controller.appliance_ports import NoShaker, SensorKeeper
from controller.audit_log import AuditLog
from controller.audit_records import config_loaded_data
from controller.clock import monotonic_ms
from controller.config import Config
from controller.console_display import DisplayFanout
from controller.daemon import ControlLoop, Ports
from controller.display_log import SqliteLogReader
from controller.display_server import DisplayServer
from controller.errors import AuditLogError, ControllerError, RngError
from controller.ports import TableDisplay
from controller.records import RecordKind
from controller.recovery import recover
from controller.rng import known_answer_test
from controller.rng_session import RngPort, RngSessionManager
from controller.sdnotify import notify, watchdog_interval_s
from controller.state import (
    Action,
    ActionKind,
    Event,
    Fault,
    Mode,
    Occurrence,
    RoundMachine,
    Screen,
    State,
)
from drivers.dice_sensor import SerialDiceSensor
from drivers.table_io import TableIO, build_table_io

log = logging.getLogger("paigow.appliance")

Observer = Callable[[Screen, Mapping[str, object]], None]
_ROUND_OVER = (State.IDLE,)


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
    tick_ms: int = 50


class Appliance:
    def __init__(self, config: Config, options: Options = Options()) -> None:
        self.config = config
        self.options = options
        self.state_dir = options.state_dir or Path(config.storage.state_dir)
        self.events: queue.Queue[Occurrence | None] = queue.Queue()
        self.log: AuditLog | None = None
        self.table_io: TableIO | None = None
        self.sensor: SensorKeeper | None = None
        self.rng: RngSessionManager | None = None
        self.display: DisplayFanout | None = None
        self.loop: ControlLoop | None = None
        self._closables: list[Callable[[], None]] = []
        self._watchdog_s = watchdog_interval_s()
        self._last_ping = 0.0
        self._closed = False

    # --- start ------------------------------------------------------------------------------

    def start(self) -> None:
        config = self.config
        settings = config.round_settings()
        self.log = audit = AuditLog.open(self.state_dir)
        self._closables.append(audit.close)
        recovery = recover(self._records(), settings)
        self.display = self._displays(audit)
        self._closables.append(self.display.close)
        self.table_io = build_table_io(config, self.events, pin_factory=self.options.pin_factory)
        self._closables.append(self.table_io.close)
        rng_port = self._rng()
        self.sensor = self._sensor()
        ports = Ports(
            log=audit,
            display=self.display,
            panel=self.table_io.panel,
            shaker=self.table_io.shaker or NoShaker(),
            latch=self.table_io.latch,
            sensor=self.sensor,
            rng=rng_port,
        )
        machine = RoundMachine(settings, recovery.context)
        self.loop = ControlLoop(
            machine,
            ports,
            events=self.events,
            tick_ms=self.options.tick_ms,
            on_alive=self._alive,
        )
        # power_on first, then the configuration in force, then what recovery did.
        # Through the loop, so that a log that cannot be written latches the storage fault.
        config_loaded = Action(
            ActionKind.RECORD, record=RecordKind.CONFIG_LOADED, data=config_loaded_data(config)
        )
        self.loop.execute([recovery.actions[0], config_loaded, *recovery.actions[1:]])
        for note in recovery.notes:
            log.log(
                logging.WARNING if recovery.was_interrupted else logging.INFO, "recovery: %s", note
            )
        self._self_tests()
        notify("READY=1\nSTATUS=table " + config.table.name + " ready")
        log.info(
            "ready: table %s, %s mode, round %d",
            config.table.name,
            config.table.mode,
            machine.context.round_number,
        )

    def _records(self) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
        assert self.log is not None
        for record in self.log.records():
            yield record.seq, record.kind, record.data

    def _displays(self, audit: AuditLog) -> DisplayFanout:
        displays = list(self.options.displays)
        if self.options.web_display:
            try:
                server = DisplayServer(
                    self.config.display, SqliteLogReader.of(audit), table=self.config.table.name
                )
            except OSError as exc:
                if self.options.web_display_required:
                    raise
                log.warning("table display not served: %s", exc)
            else:
                displays.append(server)
                host, port = self.config.display.host, self.config.display.http_port
                log.info("table display on http://%s:%d/", host, port)
        return DisplayFanout(displays, observers=self.options.observers)

    def _rng(self) -> RngPort | None:
        if self.config.table.mode is not Mode.RNG:
            return None
        assert self.log is not None
        self.rng = RngSessionManager(
            state_dir=self.state_dir,
            log=self.log,
            table=self.config.table.name,
            game=self.config.table.game,
            mode=self.config.rng.mode,
            max_rounds=self.config.rng.session_max_rounds,
            records=self._records(),
        )
        # The table display shows each commitment from its rng_commit record in the log.
        return RngPort(self.rng)

    def _sensor(self) -> SensorKeeper | None:
        if self.config.table.mode is Mode.RNG:
            return None
        url = self.options.sensor_url or self.config.sensor.url
        sensor = SerialDiceSensor.from_config(
            dataclasses.replace(self.config.sensor, url=url), self.events
        )
        keeper = SensorKeeper(sensor, self.events)
        self._closables.append(keeper.close)
        return keeper

    def _self_tests(self) -> None:
        """621a.2(e) / AGCO 5.1: a failed selection mechanism disables play until fixed."""
        assert self.table_io is not None
        if self.rng is not None:
            assert self.loop is not None
            try:
                if self.loop.machine.state is State.DRAWING:
                    known_answer_test()  # the recovered draw is shown again from the log
                else:
                    # The known-answer test, then the session's commitment recorded and shown
                    # before bets close.
                    self.rng.open()
            except (RngError, AuditLogError) as exc:
                log.error("RNG session could not open: %s", exc)
                fault = Fault.STORAGE if isinstance(exc, AuditLogError) else Fault.RNG_FAILURE
                self.events.put(
                    Occurrence(Event.FAULT, at=monotonic_ms(), fault=fault, detail=str(exc))
                )
        if self.sensor is not None:
            self.sensor.open_or_keep_trying()
        if self.table_io.shaker is not None:
            self.table_io.shaker.report_inputs()

    # --- run --------------------------------------------------------------------------------

    def run(self) -> None:
        """The control loop in this thread until ``stop``; SIGTERM and SIGINT stop it."""
        assert self.loop is not None
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        self.loop.run()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.warning("signal %d: stopping", signum)
        notify("STOPPING=1")
        if self.table_io is not None:
            self.table_io.drive_safe()  # the motor stops now, before the loop winds down
        self.stop()

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
        """Everything safe, the unfinished round recorded as interrupted, the log closed."""
        if self._closed:
            return
        self._closed = True
        if self.table_io is not None:
            self.table_io.drive_safe()
        if self.log is not None and self.loop is not None:
            self._record_shutdown()
        for close in reversed(self._closables):
            try:
                close()
            except Exception:
                log.exception("closing failed")

    def _record_shutdown(self) -> None:
        assert self.log is not None
        assert self.loop is not None
        ctx = self.loop.machine.context
        try:
            if ctx.state not in _ROUND_OVER:
                self.log.append(
                    RecordKind.INTERRUPTED,
                    {
                        "round": ctx.round_number,
                        "attempt": ctx.attempt,
                        "state": str(ctx.state),
                        "reason": "shutdown",
                    },
                )
            if self.rng is not None:
                self.rng.close("shutdown")  # reveals the open and any interrupted session
            self.log.append(RecordKind.SHUTDOWN, {"round": ctx.round_number})
        except ControllerError as exc:
            log.error("could not record the shutdown: %s", exc)

    def __enter__(self) -> Appliance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
