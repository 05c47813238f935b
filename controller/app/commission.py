"""``paigow-controller commission``: a technician's guided walk through the real hardware of a
table, recorded in the table's audit log. A composition root, like ``selftest``: it opens the
real drivers (the config's pins and the same pin factory as ``run``, the dice sensor at the
config's URL) and takes the state directory's lock, so it never runs beside the controller.

What each step is and how its observation is judged is ``controller/core/commissioning.py``;
here the technician is prompted and answered, the outputs driven, the inputs watched. Every
answer is read with a bound (``answer_timeout_s``), every wait for the hardware too
(``step_timeout_s``, on an injected clock; the motor's own ``motor_max_ms``). Every output goes
to its safe value at the end, on an error and on Ctrl-C (the signal handler drives them safe
first, then the walk unwinds), and the report of what was done is recorded either way.

Threads: the drivers' callbacks and the sensor's reader only put observations on one bounded
queue (:class:`Observations`); a reader thread puts the technician's lines on another
(:class:`Console`); the walk, on the calling thread, takes from both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, TextIO

from controller.app.instance_lock import InstanceLock
from controller.audit.log import (
    DB_NAME,
    AuditLog,
    configured_origin,
    load_signer,
    require_origin,
)
from controller.core import commissioning as walk
from controller.core.commissioning import (
    Handshake,
    MotorObservation,
    Outcome,
    Step,
    StepKind,
    StepResult,
)
from controller.core.config import Config
from controller.core.dice import DiceReading
from controller.core.records import RecordKind
from controller.core.snapshot import decode_context
from controller.core.state import (
    Event,
    FaultRaised,
    LidOpened,
    Mode,
    MotorOverran,
    Occurrence,
    ShakeDone,
    Tampered,
)
from controller.errors import (
    AuditLogError,
    ConfigError,
    ControllerError,
    InstanceLocked,
    LogIdentityError,
    NoAnswer,
    SnapshotError,
    UsageError,
)
from drivers.dice_sensor import SerialDiceSensor
from drivers.shaker import GpioShaker
from drivers.table_io import TableIO, build_table_io

log = logging.getLogger("paigow.commission")

LINE_MAX_CHARS = 256  # an answer longer than this is not one
ANSWERS_QUEUED = 64  # lines typed ahead, at most
OBSERVATIONS_QUEUED = 4096  # pin and sensor events waiting, at most (debounced: a few a second)
POLL_S = 0.1  # the longest one wait on the queue lasts before the (injected) clock is read again
MOTOR_MARGIN_S = 0.5  # after the motor's limit: time for the driver's watchdog to report


class Hands(Protocol):
    """The technician's hands on simulated hardware (``commission --simulate``:
    :class:`controller.app.simulate.SimulatedBench`): an input the walk waits for is worked,
    the dice rolled before a reading, and what would be seen on the bench said."""

    def work(self, target: str, first: bool, *, timeout_s: float) -> threading.Thread: ...

    def saw(self, target: str, state: bool) -> None: ...

    def lamp_seen(self, lamp: str) -> str: ...

    def roll(self) -> str: ...


def require_log(state_dir: Path, *, option: str | None) -> None:
    """Commissioning records into the table's log and never makes one, nor its signing key,
    nor the state directory: each missing is one line. ``option``: the command-line option
    that named the directory (a bad argument, exit 2), or None when the config's
    ``[storage] state_dir`` did (a bad config, exit 78 naming the key)."""
    how = (
        f"make it first: paigow-controller init --state-dir {state_dir}, or the controller's"
        " first start"
    )
    if not state_dir.is_dir():
        said = f"{state_dir} is no directory: commission never makes the log; {how}"
        if option is not None:
            raise UsageError(f"{option} {said}")
        raise ConfigError("storage.state_dir", said)
    if not (state_dir / DB_NAME).is_file():
        raise ControllerError(
            f"commission: no audit log in {state_dir}: commission never makes one; {how}"
        )
    if load_signer(state_dir) is None:
        raise LogIdentityError(
            f"commission: the log's signing key is missing in {state_dir} (nor a systemd"
            " credential): commission never makes one; restore the key the log was made with"
        )


@dataclass(frozen=True, slots=True)
class Settings:
    technician: str
    state_dir: Path
    step_timeout_s: int = 30
    readings: int = 10
    answer_timeout_s: int = 600
    sensor_url: str | None = None  # None: the config's [sensor] url


class Console:
    """The technician's terminal: prompts and what was seen go to ``out``; answers come from
    ``answers`` a line at a time, read by a thread of their own so that a question waits at
    most ``timeout_s`` (a walk left alone does not hold the table's lock for ever)."""

    _EOF = "\x00end"
    _TOO_LONG = "\x00long"

    def __init__(self, answers: TextIO, out: TextIO, *, timeout_s: float) -> None:
        self.out = out
        self.timeout_s = timeout_s
        # A terminal echoes what is typed; answers from a file or a pipe are shown, so that
        # what was printed reads as the session it was.
        self._echo = not _is_terminal(answers)
        self._lines: queue.Queue[str] = queue.Queue(ANSWERS_QUEUED)
        self._reader = threading.Thread(
            target=self._read, args=(answers,), name="commission-input", daemon=True
        )
        self._reader.start()

    def _read(self, answers: TextIO) -> None:
        try:
            while True:
                line = answers.readline(LINE_MAX_CHARS + 1)
                if not line:
                    break
                if len(line) > LINE_MAX_CHARS and not line.endswith("\n"):
                    while (rest := answers.readline(LINE_MAX_CHARS)) and not rest.endswith("\n"):
                        pass
                    line = self._TOO_LONG
                self._lines.put(line.rstrip("\r\n"))
        except (OSError, ValueError) as exc:  # a closed or unreadable input ends it
            log.debug("commission: input ended: %s", exc)
        self._lines.put(self._EOF)

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def ask(self, question: str, answers: dict[str, str]) -> str:
        """The answer, as the value ``answers`` maps it to (keys: what may be typed, lower
        case). Asked again after anything else; :class:`NoAnswer` after ``timeout_s`` in all,
        or when the input ends."""
        deadline = time.monotonic() + self.timeout_s
        self.out.write(f"{question} ")
        self.out.flush()
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(0.0, remaining))
            except queue.Empty:
                self.say("")
                raise NoAnswer(f"no answer within {round(self.timeout_s)} s") from None
            if line == self._EOF:
                self._lines.put(self._EOF)  # every later question sees it too
                self.say("")
                raise NoAnswer("the technician's input ended")
            if self._echo:
                self.say(line if line != self._TOO_LONG else "(too long)")
            chosen = answers.get(line.strip().lower())
            if chosen is not None:
                return chosen
            typed = ", ".join(repr(key) if key else "Enter" for key in answers)
            self.out.write(f"please answer {typed}: ")
            self.out.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


YES_NO_SKIP = {"y": "y", "yes": "y", "n": "n", "no": "n", "s": "s", "skip": "s"}
START_OR_SKIP = {"": "go", "s": "s", "skip": "s"}


@dataclass(frozen=True, slots=True)
class _Key:
    name: str
    state: bool


class Observations:
    """What the drivers report, on one bounded queue: their events (an ``EventSink``) and
    every key's debounced change. Safe from any thread; never blocks the caller."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Occurrence | _Key] = queue.Queue(OBSERVATIONS_QUEUED)
        self.lost = 0

    def put(self, item: Occurrence) -> None:
        self._offer(item)

    def key(self, name: str, state: bool) -> None:
        self._offer(_Key(name, state))

    def _offer(self, item: Occurrence | _Key) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.lost += 1

    def get(self, timeout: float) -> Occurrence | _Key | None:
        try:
            return self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def drain(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()


_INPUT_EVENTS = {
    Event.LID_OPENED: (walk.LID, False),
    Event.LID_CLOSED: (walk.LID, True),
    Event.TAMPER: (walk.TAMPER, False),
    Event.SECURED: (walk.TAMPER, True),
}


def commission(
    config: Config,
    settings: Settings,
    console: Console,
    *,
    pin_factory: Any = None,
    clock: Callable[[], float] = time.monotonic,
    hands: Hands | None = None,
    state_dir_option: str | None = None,
) -> dict[str, Any]:
    """The walk, then its report recorded as a ``commissioning`` record. Returns the report
    (with ``record``, the record's number, or ``record_error``). Raises
    :class:`InstanceLocked` when the controller runs on the state directory, and the log's
    errors when it cannot be opened (before anything is driven); a missing state directory,
    log or key before anything is written (:func:`require_log`: never created here).
    ``hands``: simulated hardware worked by the walk itself (the record says ``simulated``)."""
    require_log(settings.state_dir, option=state_dir_option)
    lock = InstanceLock.acquire(settings.state_dir)
    try:
        require_origin(settings.state_dir, config)
        require_log(settings.state_dir, option=state_dir_option)  # not gone meanwhile
        audit = AuditLog.open(settings.state_dir, origin=configured_origin(config))
        try:
            return _walk_and_record(
                config,
                settings=settings,
                console=console,
                audit=audit,
                pin_factory=pin_factory,
                clock=clock,
                hands=hands,
            )
        finally:
            audit.close()
    finally:
        lock.release()


def _walk_and_record(
    config: Config,
    *,
    settings: Settings,
    console: Console,
    audit: AuditLog,
    pin_factory: Any,
    clock: Callable[[], float],
    hands: Hands | None = None,
) -> dict[str, Any]:
    observations = Observations()
    table_io = build_table_io(
        config, observations, pin_factory=pin_factory, on_key_change=observations.key
    )
    try:
        walker = _Walker(
            config,
            settings=settings,
            console=console,
            table_io=table_io,
            observations=observations,
            clock=clock,
            hands=hands,
        )
        with _signals_drive_safe(table_io):
            walker.walk()
        table_io.drive_safe()
        outputs = table_io.latch.outputs
    finally:
        table_io.close()
    document = walk.report(
        table=config.table.name,
        technician=settings.technician,
        outcome=walker.outcome,
        results=walker.results,
        sensor=walker.handshake,
        config_sha256=config.source_sha256,
        step_timeout_s=settings.step_timeout_s,
        readings=settings.readings,
        outputs_safe=outputs,
        ended=walker.ended,
    )
    if hands is not None:  # a walk of simulated hardware never passes for the table's own
        document["simulated"] = True
    data = dict(document)
    round_number = _round_in_log(audit)
    if round_number is not None:  # recall shows the record in the round it happened in
        data["round"] = round_number
    try:
        document["record"] = audit.append(RecordKind.COMMISSIONING, data)
    except AuditLogError as exc:
        log.error("commission: the report was not recorded: %s", exc)
        document["record"] = None
        document["record_error"] = str(exc)
    return document


def _round_in_log(audit: AuditLog) -> int | None:
    stored = audit.latest_context()
    if stored is None:
        return None
    try:
        return decode_context(stored[1]).round_number
    except SnapshotError:
        return None  # the controller names it at its next start


@contextlib.contextmanager
def _signals_drive_safe(table_io: TableIO) -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM drive every output safe in the handler itself, then end the
    walk (KeyboardInterrupt): the outputs are safe before anything else runs. Only the main
    thread receives signals; elsewhere the walk's own ``finally`` does it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        table_io.latch.drive_all_safe()  # safe from a signal handler (drivers/safety.py)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Walker:
    def __init__(
        self,
        config: Config,
        *,
        settings: Settings,
        console: Console,
        table_io: TableIO,
        observations: Observations,
        clock: Callable[[], float],
        hands: Hands | None = None,
    ) -> None:
        self.config = config
        self.hands = hands
        self.settings = settings
        self.console = console
        self.table_io = table_io
        self.observations = observations
        self.clock = clock
        has_sensor = config.round_settings().allowed_modes != {Mode.RNG}
        self.steps = walk.plan(
            has_shaker=table_io.shaker is not None,
            has_sensor=has_sensor,
            readings=settings.readings,
        )
        self.results: list[StepResult] = []
        self.outcome = Outcome.COMPLETED
        self.ended = ""
        self.handshake: Handshake | None = None
        self.sensor: SerialDiceSensor | None = None
        self.sensor_error: str | None = None
        self.previous: DiceReading | None = None

    # --- the walk ----------------------------------------------------------------------------

    def walk(self) -> None:
        say = self.console.say
        say(
            f"Commissioning table {self.config.table.name} (config sha256"
            f" {self.config.source_sha256[:16]}), technician {self.settings.technician}:"
            f" {len(self.steps)} steps. Each waits up to {self.settings.step_timeout_s} s for"
            " the hardware. Every output is driven safe at the end and on Ctrl-C."
        )
        try:
            for index, step in enumerate(self.steps, start=1):
                say(f"\n[{index}/{len(self.steps)}] {step.title}")
                say(f"  {step.instruction}")
                result = self._take(step)
                self.results.append(result)
                say(f"  -> {str(result.verdict).upper()}: {result.observed}")
        except KeyboardInterrupt:
            self._safe()
            self.outcome, self.ended = Outcome.INTERRUPTED, "interrupted (Ctrl-C)"
            self._end(f"interrupted at step {len(self.results) + 1}")
        except NoAnswer as exc:
            self._safe()
            self.outcome, self.ended = Outcome.ABANDONED, str(exc)
            self._end(f"abandoned at step {len(self.results) + 1}: {exc}")
        finally:
            self._safe()
            self._close_sensor()

    def _end(self, why: str) -> None:
        self.results += [walk.not_run(step, why) for step in self.steps[len(self.results) :]]
        with contextlib.suppress(Exception):  # a broken terminal must not stop the report
            self.console.say(f"\nthe walk ended: {why}; every output is safe")

    def _take(self, step: Step) -> StepResult:
        """One step; an error in it fails that step alone (named), with the outputs safe."""
        try:
            if step.kind is StepKind.LAMP:
                return self._lamp(step)
            if step.kind is StepKind.INPUT:
                return self._input(step)
            if step.kind is StepKind.MOTOR:
                return self._motor(step)
            if step.kind is StepKind.SENSOR:
                return self._sensor(step)
            return self._reading(step)
        except (KeyboardInterrupt, NoAnswer):
            raise
        except Exception as exc:  # the step fails by name; the walk goes on
            log.debug("commission: step %s failed", step.name, exc_info=True)
            self._safe()
            return StepResult(step, walk.Verdict.FAIL, f"error: {type(exc).__name__}: {exc}")

    def _safe(self) -> None:
        self.table_io.drive_safe()

    # --- the steps ---------------------------------------------------------------------------

    def _lamp(self, step: Step) -> StepResult:
        panel = self.table_io.panel
        panel.light_only(step.target)
        try:
            if self.hands is not None:
                self.console.say(f"  ({self.hands.lamp_seen(step.target)})")
            answer = self.console.ask("  Is it? [y/n, s to skip]", YES_NO_SKIP)
        finally:
            panel.light_only(None)
        if answer == "s":
            return walk.skipped(step)
        return walk.judge_lamp(step, confirmed=answer == "y", latched=self.table_io.latch.reason)

    def _ready(self) -> bool:
        """Enter to start the step; False: the technician skips it."""
        return self.console.ask("  Press Enter to start, s to skip:", START_OR_SKIP) == "go"

    def _state(self, target: str) -> bool:
        shaker = self.table_io.shaker
        if target == walk.LID and shaker is not None:
            return shaker.is_lid_closed
        if target == walk.TAMPER and shaker is not None:
            return shaker.is_secured
        return self.table_io.panel.is_pressed(target)

    def _input(self, step: Step) -> StepResult:
        if not self._ready():
            return walk.skipped(step)
        self.observations.drain()
        initial = self._state(step.target)
        timeout = self.settings.step_timeout_s
        self.console.say(
            f"  now reads {walk.state_word(step.target, initial)}; waiting up to {timeout} s"
        )
        changes: list[bool] = []
        deadline = self.clock() + timeout
        if self.hands is not None:
            self.hands.work(step.target, step.expect[0], timeout_s=timeout)
        while not walk.has_seen(changes, step.expect):
            remaining = deadline - self.clock()
            if remaining <= 0:
                break
            item = self.observations.get(min(remaining, POLL_S))
            change = _change_of(item)
            if change is None or change[0] != step.target:
                continue
            changes.append(change[1])
            self.console.say(f"  seen: {walk.state_word(step.target, change[1])}")
            if self.hands is not None:
                self.hands.saw(step.target, change[1])
        return walk.judge_input(step, initial=initial, changes=changes, timeout_s=timeout)

    def _motor(self, step: Step) -> StepResult:
        shaker = self.table_io.shaker
        assert shaker is not None, "the plan has a motor step only for a shaker table"
        shaker_config = self.config.shaker
        if not self._ready():
            return walk.skipped(step)
        self.observations.drain()
        refused = self._motor_refusal(shaker)
        if refused is not None:
            return self._judge_motor(step, MotorObservation(refused=refused))
        limit_s = shaker_config.motor_max_ms / 1000
        self.console.say(
            f"  the motor runs {shaker_config.cycles} cycles ({shaker_config.shake_ms} ms); the"
            f" driver cuts it at {shaker_config.motor_max_ms} ms whatever happens"
        )
        started = self.clock()
        shaker.start_shake()
        try:
            cycles, faults = self._watch_shake(shaker, started + limit_s + MOTOR_MARGIN_S)
        finally:
            shaker.stop()
        seen = MotorObservation(
            cycles=cycles, faults=tuple(faults), motor_off=shaker.motor_value == 0
        )
        return self._judge_motor(step, seen)

    def _motor_refusal(self, shaker: GpioShaker) -> str | None:
        """Why the motor may not start: the outputs latched, the shaker not secured, the lid
        open; None when it may."""
        if self.table_io.latch.reason is not None:
            return f"the outputs are latched safe ({self.table_io.latch.reason})"
        if not shaker.is_secured:
            return "the tamper loop is open (the shaker is not secured)"
        if not shaker.is_lid_closed:
            return "the lid is open"
        return None

    def _watch_shake(self, shaker: GpioShaker, deadline: float) -> tuple[int | None, list[str]]:
        """The motion pulses the pattern counted (None until it ends) and the faults the
        driver reported, until ``deadline`` or until a fault came once the pattern ended (or
        the motor stopped)."""
        cycles: int | None = None
        faults: list[str] = []
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                break
            item = self.observations.get(min(remaining, POLL_S))
            if not isinstance(item, Occurrence):
                continue
            if isinstance(item, ShakeDone):
                cycles = item.cycles
                self.console.say(
                    f"  the pattern ended: {cycles} motion pulses; watching the crank stays"
                    " still until the motor's limit"
                )
            else:
                fault = _fault_seen(item)
                if fault is not None:
                    faults.append(fault)
                    self.console.say(f"  seen: {fault}")
            if faults and (cycles is not None or not shaker.is_shaking):
                break
        return cycles, faults

    def _judge_motor(self, step: Step, seen: MotorObservation) -> StepResult:
        return walk.judge_motor(
            step,
            seen,
            pattern_cycles=self.config.shaker.cycles,
            min_cycles=self.config.round.min_shake_cycles,
        )

    def _sensor(self, step: Step) -> StepResult:
        url = self.settings.sensor_url or self.config.sensor.url
        self.console.say(f"  the dice sensor at {url}")
        sensor = SerialDiceSensor.from_config(
            dataclasses.replace(self.config.sensor, url=url), self.observations
        )
        try:
            identity = sensor.open()
        except (ControllerError, OSError) as exc:
            sensor.close()
            self.sensor_error = f"the dice sensor did not answer the handshake: {exc}"
            return walk.judge_sensor(step, None, error=str(exc))
        self.sensor = sensor
        self.handshake = Handshake(
            identity.model, identity.firmware, identity.serial_number, identity.protocol_version
        )
        try:
            faults = [str(fault) for fault in sensor.status()]
        except (ControllerError, OSError) as exc:
            return walk.judge_sensor(step, self.handshake, error=str(exc))
        return walk.judge_sensor(step, self.handshake, error=None, faults=faults)

    def _reading(self, step: Step) -> StepResult:
        sensor = self.sensor
        if sensor is None:
            return walk.not_run(step, self.sensor_error or "the dice sensor is not open")
        if self.hands is not None:
            self.console.say(f"  ({self.hands.roll()})")
        answer = self.console.ask("  Press Enter to read, s to skip:", START_OR_SKIP)
        if answer == "s":
            return walk.skipped(step)
        rounds = self.config.round
        try:
            reading = sensor.read_once()
        except (ControllerError, OSError) as exc:
            return walk.judge_reading_step(
                step,
                None,
                error=str(exc),
                confirmed=None,
                previous=self.previous,
                min_confidence=rounds.min_confidence,
                tolerance_mm=rounds.position_tolerance_mm,
            )
        detail = walk.reading_detail(reading, min_confidence=rounds.min_confidence)
        self.console.say(f"  the sensor reads: {walk.reading_text(detail)}")
        self.console.say(f"  image {reading.image_digest[:16]}...")
        confirmed = self.console.ask(
            "  Do the dice in the tray show exactly this (colours, faces, flat or not)?"
            " [y/n, s to skip]",
            YES_NO_SKIP,
        )
        result = walk.judge_reading_step(
            step,
            reading,
            error=None,
            confirmed=None if confirmed == "s" else confirmed == "y",
            previous=self.previous,
            min_confidence=rounds.min_confidence,
            tolerance_mm=rounds.position_tolerance_mm,
        )
        self.previous = reading
        return result

    def _close_sensor(self) -> None:
        sensor, self.sensor = self.sensor, None
        if sensor is not None:
            try:
                sensor.close()
            except Exception:  # the rest of the clean-up goes on
                log.exception("commission: closing the dice sensor failed")


def _change_of(item: Occurrence | _Key | None) -> tuple[str, bool] | None:
    """An observation as (input, new state), or None for anything else."""
    if isinstance(item, _Key):
        return item.name, item.state
    if isinstance(item, Occurrence):
        return _INPUT_EVENTS.get(item.event)
    return None


def describe_lock_error(exc: InstanceLocked) -> str:
    return (
        f"commission: {exc}: commissioning needs the table to itself; stop the controller"
        " first (systemctl stop paigow-controller)"
    )


def _fault_seen(item: Occurrence) -> str | None:
    """A driver's report during the motor check, as the commissioning report words it."""
    if isinstance(item, MotorOverran | LidOpened | Tampered):
        return f"{item.event}: {item.detail}".rstrip(": ")
    if isinstance(item, FaultRaised):
        return f"fault: {item.detail}"
    return None
