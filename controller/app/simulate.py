"""``paigow-controller simulate``: the appliance on simulated hardware, with a simulated crew.

The same :class:`~controller.app.appliance.Appliance` as on the table, with gpiozero's
``MockFactory(pin_class=SimPin)`` (mock PWM pins with a bounded history) instead of the Pi's
pins, simulated shaker mechanics behind them (motion pulses while the motor turns, the lid,
the tamper loop), and the simulated dice sensor speaking the DS1 protocol at the far end of a
real pseudo-terminal. A simulated dealer and player press the panel's keys and the shake
button on the mock pins as rounds ask for them, and a supervisor clears faults. Faults are
injected by chance per shake (``--faults``).

The table is opened before the first round, plain rounds or not: the supervisor records the
dice set in the shaker (proposed 621a.5(c)) and, at tiles, a set of tiles the dealer inspected
and the floorperson verified (621a.6(a)); each is put in again when its life is up (24 hours,
12 for the tiles, 621a.3(e)). Unless the rounds are plain (``--plain-rounds``), the crew also
does what a shift asks (issue 14): the dealer signs on at the terminal; in every tenth round the
sensor misreads the red die and the supervisor, looking at the dice, corrects the result to
them (N.J.A.C. 13:69E-1.28P(d): never a re-roll), and in RNG mode, where a result is never
corrected, voids the round instead; in every tenth round from the fifth the supervisor voids
the whole round with the next reason in turn (621a.12(c),(e): every wager returned); the
dealer shuffles for a new game at round 20 (621a.11(b)); the shaker is inspected at the start
of each day (N.J.A.C. 13:69E-1.16A); with ``[table] modes`` every fifteenth round is played in
another mode, and before round 25 a technician plays a test round in service mode (9 NYCRR
5319.58). Every action at the terminal names its employee.

The simulated supervisor key switch (``--supervisor-key``, :class:`KeySwitch`): ``auto`` (the
default) is the crew's own use of it, turned on for each of its supervisor's actions and off
again, so a person's ``paigow-controller supervise`` between them finds it off and is refused;
``on`` leaves it on for the whole run, so a person may try every supervisor action at the
simulated table's terminal (the crew's actions go on as before); ``off`` leaves it off for the
whole run: every supervisor action is refused, the crew's too (a table that needs its
supervisor, to record the first dice set or to clear a fault only the key clears, stops the
run saying so). It is the switch's position only: the config has no say in it.
``--table-minutes-per-round M`` gives the table a simulated wall clock that
moves M minutes with each round closed, so that a day of play passes in a few seconds. A table
that may play RNG mode without ``[rng] escrow_public_key`` seals its sessions' seeds to a
throwaway auditor key made beside the log (:func:`with_auditor_key`).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TextIO

from gpiozero.pins.mock import MockFactory

from controller.app.appliance import Appliance, Options
from controller.app.service import SOCKET_NAME, Request, send_request
from controller.core.config import Config
from controller.core.dealing import DeliveryStyle
from controller.core.dice import DieColour, Roll
from controller.core.dice_monitor import loaded_face_probabilities
from controller.core.digits import quoted
from controller.core.position import Game
from controller.core.state import Fault, Mode, Screen, VoidReason
from controller.display.console import ConsoleDisplay
from controller.errors import ServiceTerminalError, UsageError
from controller.ports import wall_ms
from controller.rng.escrow import throwaway_escrow_key
from drivers.panel import SUPERVISOR_KEY, GpioPanel
from drivers.shaker import GpioShaker
from drivers.sim.hardware import ShakerFaults, SimPanel, SimPin, SimShaker
from drivers.sim.sensor import SimFault, SimulatedSensor

log = logging.getLogger("paigow.simulate")

SENSOR_FAULTS: Mapping[str, SimFault] = {
    "tilted": SimFault.TILTED_DIE,
    "die_out": SimFault.DIE_OUT,
    "missing": SimFault.MISSING_DIE,
    "extra": SimFault.EXTRA_OBJECT,
    "colours": SimFault.WRONG_COLOURS,
    "low_confidence": SimFault.LOW_CONFIDENCE,
    "unreadable": SimFault.UNREADABLE_DIE,
    "garbled": SimFault.GARBLED_BYTES,
    "bad_checksum": SimFault.BAD_CHECKSUM,
    "truncated": SimFault.TRUNCATED_FRAME,
    "no_reply": SimFault.NO_REPLY,
    "late": SimFault.LATE_REPLY,
    "duplicate": SimFault.DUPLICATED_FRAME,
    "disconnect": SimFault.DISCONNECT,
    "camera": SimFault.CAMERA_FAULT,
}
SHAKER_FAULTS = ("few_cycles", "lid", "tamper", "motor_stuck")
FAULT_NAMES = (*SENSOR_FAULTS, *SHAKER_FAULTS)
_DECIMAL = re.compile(r"[0-9]{1,3}(\.[0-9]{1,9})?|\.[0-9]{1,9}")  # ASCII, no exponent
SUPERVISOR_TRIES = 3  # a supervisor's action the controller refused, tried again at most so often
CORRECT_EVERY = 10  # every tenth round's result is misread and corrected (not with plain rounds)
VOID_EVERY = 10  # every tenth round from VOID_FROM is voided whole (not with plain rounds)
VOID_FROM = 5
SHUFFLE_AT = 20  # the dealer shuffles for a new game before this round (not with plain rounds)
MODE_EVERY = 15  # every fifteenth round is played in another mode the table allows
SERVICE_AT = 25  # a test round in service mode before round 25 (not with plain rounds)
DAY_MS = 86_400_000
# the crew's employee ids, as the terminal records them
SUPERVISOR = "S1021"
DEALER = "D2207"
FLOORPERSON = "F0310"
TECHNICIAN = "T0042"
ANCHOR_NOTE = "simulation: the log's anchor was found missing"


class KeySwitch(StrEnum):
    """The simulated supervisor key switch's position for a run (``--supervisor-key``)."""

    AUTO = "auto"  # the crew turns it on for its supervisor's actions, off after each
    ON = "on"  # on for the whole run: a person's supervise is taken at any time
    OFF = "off"  # off for the whole run: every supervisor action is refused


TYPED_VOIDS = tuple(r for r in VoidReason if r.is_typed)
DEFAULT_FAULTS = "tilted=0.06,die_out=0.03,garbled=0.05,bad_checksum=0.03,few_cycles=0.03,lid=0.02"
# The crew waits for the table to take what it did (a key, the lid) for at most this long (a
# table that never does is logged, and the crew goes on); and when its last action brought no
# screen, it looks at the table again after STILL_S (fast) or ten pauses: a net only, each
# decision is made on the screens the table shows.
TAKE_WAIT_S = 30.0
STILL_S = 2.0


def parse_faults(spec: str) -> dict[str, float]:
    """``name=probability,...`` (``default`` for a usual mix, ``none`` for none)."""
    if spec in ("", "none"):
        return {}
    if spec == "default":
        spec = DEFAULT_FAULTS
    faults: dict[str, float] = {}
    for item in spec.split(","):
        name, sep, value = item.strip().partition("=")
        if name not in FAULT_NAMES:
            known = ", ".join(FAULT_NAMES)
            raise UsageError(f"--faults: unknown fault {quoted(name)} (known: {known})")
        if sep and not _DECIMAL.fullmatch(value):  # float() also takes '٠.٥', 'nan' and '1e-3'
            raise UsageError(f"--faults: {quoted(item)} needs a probability like {name}=0.05")
        probability = float(value) if sep else 0.1
        if not 0.0 <= probability <= 1.0:
            raise UsageError(f"--faults: probability of {name} must be 0..1")
        faults[name] = probability
    return faults


def parse_dice_bias(specs: Sequence[str]) -> dict[DieColour, tuple[float, ...]]:
    """``colour:face:probability`` (``red:6:0.25``; colour red or blue, the two blue dice loaded
    alike), once per colour: the simulated dice are loaded so (issue 15), the extra chance of
    the face taken from its opposite first (``loaded_face_probabilities``)."""
    bias: dict[DieColour, tuple[float, ...]] = {}
    for spec in specs:
        colour, face, probability = [*spec.split(":"), "", ""][:3]
        if spec.count(":") != 2 or colour not in ("red", "blue"):
            raise UsageError(
                f"--dice-bias: {quoted(spec)} is not colour:face:probability, e.g. red:6:0.25"
            )
        if not (len(face) == 1 and "1" <= face <= "6"):
            raise UsageError(f"--dice-bias: face {quoted(face)} is not 1..6")
        if not _DECIMAL.fullmatch(probability) or not 0 <= float(probability) <= 1:
            raise UsageError(f"--dice-bias: probability {quoted(probability)} is not 0..1")
        die = DieColour(colour)
        if die in bias:
            raise UsageError(f"--dice-bias: the {colour} dice are loaded once")
        bias[die] = loaded_face_probabilities(int(face), float(probability))
    return bias


FAST_MOTOR_MAX_MS = 1000  # --fast: the motor's limit, 55 times its 18 ms shake
FAST_SENSOR_TIMEOUT_MS = 300  # --fast: the sensor's reply (the product's default is 500 ms)


def simulation_config(config: Config, *, fast: bool) -> Config:
    """Timings for the simulation: brisk, or (``fast``) as quick as the rules allow."""
    if fast:
        # Simulated time: the simulated hardware's timings compressed (a shake still has its
        # three cycles, the motor its watchdog, the keys their debounce); every real I/O path
        # (the pty, the pins, SQLite, fsync) stays real. The limits that catch failed hardware
        # (the motor's run time, the sensor's reply) keep a margin of many times what the
        # simulated hardware takes, so that a slow or loaded CPU, which stretches the pattern
        # thread and the simulated sensor alike, is never taken for a failure.
        shaker = dataclasses.replace(
            config.shaker, shake_ms=18, cycle_ms=6, motor_max_ms=FAST_MOTOR_MAX_MS, debounce_ms=1
        )
        round_ = dataclasses.replace(
            config.round,
            settle_ms=1,
            read_timeout_ms=3000,
            shake_delay_min_ms=min(config.round.shake_delay_min_ms, 1),
            shake_delay_max_ms=min(config.round.shake_delay_max_ms, 5),
        )
        sensor = dataclasses.replace(config.sensor, timeout_ms=FAST_SENSOR_TIMEOUT_MS)
        return dataclasses.replace(config, shaker=shaker, round=round_, sensor=sensor)
    shaker = dataclasses.replace(config.shaker, shake_ms=2000, cycle_ms=400)
    round_ = dataclasses.replace(config.round, settle_ms=800)
    return dataclasses.replace(config, shaker=shaker, round=round_)


class SimulatedWallClock:
    """The table's wall clock in a simulation: real time, or (``minutes_per_round``) a clock
    that starts now and moves that many minutes each time a round is closed."""

    def __init__(self, minutes_per_round: float | None) -> None:
        self._step = None if minutes_per_round is None else round(minutes_per_round * 60_000)
        self._lock = threading.Lock()
        self._now = wall_ms()

    def __call__(self) -> int:
        if self._step is None:
            return wall_ms()
        with self._lock:
            return self._now

    def round_closed(self) -> None:
        if self._step is not None:
            with self._lock:
                self._now += self._step


class CrewSensor(Protocol):
    """What the crew does to the dice sensor: rolls the dice in its tray, injects a fault, has
    it misread the next roll; and what a person sees of the dice (None: they cannot be seen
    from here, a real sensor's tray)."""

    def roll(self) -> object: ...

    def inject(self, fault: SimFault, count: int = 1) -> None: ...

    def misread_next_roll(self) -> None: ...

    def dice_as_they_lie(self) -> Roll | None: ...


class BenchSensor:
    """A DS1 sensor the controller reaches at ``url`` (issue 17: a technician tries a real one
    on the bench, with the pins simulated). Its dice are the ones in its tray: the crew cannot
    roll them (the technician shakes and sets them down) nor make it fail."""

    def __init__(self, url: str) -> None:
        self.url = url

    def roll(self) -> None:
        return None

    def inject(self, fault: SimFault, count: int = 1) -> None:
        raise UsageError(f"a fault cannot be injected into the sensor at {self.url}")

    def misread_next_roll(self) -> None:
        return None

    def dice_as_they_lie(self) -> Roll | None:
        return None

    def close(self) -> None:
        return None


class TableView(Protocol):
    """What the crew sees of the table besides its screens, as a dealer sees the table take a
    key: the states its drivers have taken (debounced) of the keys and the shaker's lid and
    tamper loop, and a key's contacts held still for the table while they chatter."""

    def is_taken(self, key: str) -> bool: ...

    def is_lid_closed(self) -> bool | None: ...

    def is_secured(self) -> bool | None: ...

    def chatter(self, key: str) -> AbstractContextManager[object]: ...


class DriversView:
    """:class:`TableView` over the appliance's own panel and shaker drivers.

    A real key's contacts chatter for microseconds, far inside the debounce time; the
    simulation's chatter takes a thread's sleeps, which a loaded machine stretches past it, and
    the driver then takes a chattering press as two (a second ``tiles_shuffled``). So the
    chatter is made in one instant of the table's time: the key's debounced input is held (its
    lock, which its edges take again on this thread) until the contact has settled, and the
    driver sees every edge and takes only the settled state, one debounce time after it."""

    def __init__(self, panel: GpioPanel, shaker: GpioShaker | None) -> None:
        self._panel = panel
        self._shaker = shaker
        self._inputs = {debounced.name: debounced for debounced in panel._inputs}

    def is_taken(self, key: str) -> bool:
        return self._panel.is_pressed(key)

    def is_lid_closed(self) -> bool | None:
        return None if self._shaker is None else self._shaker.is_lid_closed

    def is_secured(self) -> bool | None:
        return None if self._shaker is None else self._shaker.is_secured

    def chatter(self, key: str) -> AbstractContextManager[object]:
        return self._inputs[key]._lock


class CrewsSimulatedSensor(SimulatedSensor):
    """The simulated sensor, whose dice the crew can look at (a supervisor correcting a
    misread result, N.J.A.C. 13:69E-1.28P(d))."""

    def dice_as_they_lie(self) -> Roll | None:
        red, first, second = self.dice
        return Roll(red.face, (first.face, second.face))


@dataclass
class Crew:
    """The simulated dealer, player and supervisor: they react to what the display shows."""

    panel: SimPanel
    shaker: SimShaker
    sensor: CrewSensor
    rounds: int
    faults: Mapping[str, float]
    seed: int
    pause_s: float
    press_s: float
    on_done: threading.Event
    is_manual: bool = False
    has_styles: bool = True  # Pai Gow tiles: the bank may choose a delivery style (621a.9)
    styles: tuple[DeliveryStyle, ...] = tuple(DeliveryStyle)  # those the Rules Submission allows
    makes_choices: bool = True  # now and then a seat banks, a style is chosen (not: plain rounds)
    motor_max_ms: int = FAST_MOTOR_MAX_MS  # the shaker's motor limit ([shaker] motor_max_ms)
    modes: tuple[Mode, ...] = ()  # the modes the supervisor may switch to ([table] modes)
    configured: Mode = Mode.SHAKER  # the table's configured mode ([table] mode)
    # the service terminal's socket, where the supervisor acts (issue 14; None: no actions),
    # and the table's wall clock
    control_socket: Path | None = None
    clock: SimulatedWallClock | None = None
    key_switch: KeySwitch = KeySwitch.AUTO  # the supervisor key switch (--supervisor-key)
    # what the table's drivers have taken (set once the appliance has started): the crew's
    # presses and turns wait for it; None: for press_s each, as a person who cannot see it
    table: TableView | None = None

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)  # noqa: S311 - a simulated crew, not the RNG
        # The faults' own draws, one series per shake: which shakes are faulty depends on the
        # seed only, not on how often the crew paused or acted again on a loaded machine.
        self.fault_random = random.Random(self.seed + 1)  # noqa: S311
        # The pauses' own draws: how often the crew paused (a screen looked at again) never
        # moves the draws of what it decides (the bank, the style).
        self.pause_random = random.Random(self.seed + 2)  # noqa: S311
        # each screen shown; None: told to stop (wakes the thread at once)
        self.screens: queue.Queue[tuple[Screen, dict[str, object]] | None] = queue.Queue()
        self.rounds_done: set[object] = set()
        self.restart: str | None = None  # why the controller stopped feeding the watchdog
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="simulated-crew", daemon=True)
        self._last: Screen | None = None
        self._last_data: dict[str, object] = {}
        self._wanted: dict[object, tuple[str | None, str]] = {}  # round: (bank, style) chosen
        self._voids = 0
        self._handled: set[tuple[str, int]] = set()  # (what, round) a supervisor saw to
        self._signed_on = False
        self._tile_sets = 0
        self._failures: Counter[tuple[str, int]] = Counter()
        self._inspected_day: int | None = None
        self.mode: Mode | None = None  # as the last READY showed it
        self._serviced = False
        self._test_rounds = 0
        self._fault_clears = 0  # key off: the crew's clears of one fault in a row
        self._again = False  # the last action brought no screen: act on the table's as it is
        self._prepared: Mapping[str, object] | None = None  # the screen whose shake was drawn

    def _turn_key(self, on: bool) -> None:
        """The crew turns the supervisor key switch only when it is theirs to turn (auto);
        held on or off for the run (``--supervisor-key``), it stays where it was set."""
        if self.key_switch is KeySwitch.AUTO:
            self._turn_supervisor_key(on)

    def _supervisor_stopped(self, what: str) -> None:
        """The key is held off and the table needs its supervisor: the run ends, saying so."""
        self.restart = (
            f"the table needs its supervisor ({what}) but the simulated supervisor key is"
            " held off (--supervisor-key off)"
        )
        self.on_done.set()

    def observe(self, screen: Screen, data: Mapping[str, object]) -> None:
        self.screens.put((screen, dict(data)))

    def start(self) -> None:
        self.thread.start()

    def tell_to_stop(self) -> None:
        """The crew stops at its next look at the table (without waiting for it)."""
        self.stopping.set()
        self.screens.put(None)

    def stop(self) -> None:
        """Stop the crew; may be called whether or not it was started (a failed start-up)."""
        self.tell_to_stop()
        if self.thread.ident is not None:
            self.thread.join(timeout=5)

    def _run(self) -> None:
        """Each decision on the table's newest screen. A terminal action's step has shown its
        screens before the terminal answers: none queued then means the table still shows the
        last one, and the crew acts on it again at once (``_again``). A key's press is taken
        by the table before the crew goes on (``_press``), and every key the table takes
        brings a screen (or a refusal): the crew waits for it however slow the table is; only
        after STILL_S without any does it look at the last screen again (a net)."""
        agains = 0  # acted on the same screen again at once (a terminal refusing again)
        while not self.stopping.is_set():
            if (
                self._again
                and agains < SUPERVISOR_TRIES
                and self._last is not None
                and self.screens.empty()
            ):
                agains += 1
                screen, data = self._last, self._last_data
            else:
                try:
                    shown = self.screens.get(timeout=max(STILL_S, 10 * self.pause_s))
                    if shown is None:  # told to stop
                        continue
                    screen, data = shown
                    agains = 0
                except queue.Empty:
                    if self._last is None:
                        continue
                    # Nothing came: act on the last screen again, as it was shown; a refused
                    # "no more bets" with a refused bank selected steps on.
                    screen, data = self._last, self._last_data
            self._again = False
            if screen is Screen.REFUSED:
                self._refused(data)
                continue
            self._last, self._last_data = screen, data
            if screen not in (Screen.FAULT, Screen.LOCKED):
                self._fault_clears = 0
            try:
                self._act(screen, data)
            except Exception:  # the crew must never stop the simulation silently
                log.exception("the simulated crew failed on %s", screen)

    def _refused(self, data: Mapping[str, object]) -> None:
        """A key refused because the dice or the tiles are due (their time ran out between the
        screen and the press): the supervisor puts new ones in; the crew then acts on the
        screen shown next, or on the last one again."""
        why = str(data.get("reason", ""))
        if "tiles" in why and ("621a.3(e)" in why or "621a.6(a)" in why):
            self._new_tiles()
        elif "dice" in why and ("24 hours" in why or "no dice set" in why):
            self._at_terminal("dice_replaced", SUPERVISOR)

    def _press(self, key: str) -> None:
        """A key pressed and released, each taken by the table (its driver's debounced state)
        before the crew goes on: one press is one event, and none is lost, however slow the
        crew's thread or the table's."""
        self._contact(key, closed=True)
        self._contact(key, closed=False)

    def _contact(self, key: str, *, closed: bool) -> None:
        move = self.panel.press if closed else self.panel.release
        table = self.table
        if table is None:
            move(key)
            self.stopping.wait(self.press_s)
            return
        with table.chatter(key):  # the chatter in one instant of the table's time
            move(key)
        self._until(lambda: table.is_taken(key) is closed, f"{key} {'on' if closed else 'off'}")

    def _turn_supervisor_key(self, on: bool) -> None:
        """The key switch (a clean detent: no chatter), turned until the table has taken it:
        an action at the terminal needs it on, and a key pressed after it needs it off."""
        self.panel.turn_supervisor_key(on)
        table = self.table
        if table is None:
            self.stopping.wait(self.press_s)
        else:
            self._until(lambda: table.is_taken(SUPERVISOR_KEY) is on, f"supervisor key {on}")

    def _settled(self, what: str, taken: Callable[[], bool | None]) -> None:
        """The lid put on, the shaker secured: until the table has taken it."""
        if self.table is None:
            self.stopping.wait(self.press_s)
        else:
            self._until(lambda: taken() is not False, what)

    def _until(self, taken: Callable[[], bool], what: str) -> bool:
        """Wait until the table has taken what the crew did: its state, not a time. A table
        that has not after TAKE_WAIT_S (closed, or stuck) is logged and the crew goes on."""
        deadline = time.monotonic() + TAKE_WAIT_S
        while True:
            try:
                if taken():
                    return True
            except KeyError:  # the panel has closed (the table is stopping): it takes nothing
                log.info("the simulated crew: the table closed before it took %s", what)
                return False
            if self.stopping.wait(0.0005):
                return False
            if time.monotonic() > deadline:
                log.warning("the simulated crew: the table did not take %s", what)
                return False

    def _step_key(self, key: str) -> None:
        """A key pressed again and again (bank, style): released long enough to count."""
        self._press(key)
        self.stopping.wait(self.press_s)

    def _pause(self) -> None:
        self.stopping.wait(self.pause_s * (0.5 + self.pause_random.random()))

    def _act(self, screen: Screen, data: Mapping[str, object]) -> None:
        if data.get("service"):
            self._act_in_service(screen, data)
        elif screen is Screen.READY:
            self._at_ready(data)
        elif screen in (Screen.BETS_CLOSED, Screen.NO_ROLL):
            self._to_shake(screen, data)
        elif screen is Screen.RESULT:
            self._at_result(data)
        elif screen is Screen.FAULT and data.get("restart"):
            # a fault came back again and again: systemd would restart the controller here;
            # the simulation ends, saying why
            self.restart = str(data["restart"])
            self.on_done.set()
        elif screen in (Screen.FAULT, Screen.LOCKED):
            self._at_fault(data)

    def _at_ready(self, data: Mapping[str, object]) -> None:
        """Bets open: the crew's tasks between rounds first, then the bank chosen and no more
        bets; or, the rounds asked for done, the simulation ends."""
        if len(self.rounds_done) >= self.rounds:
            self.on_done.set()
            return
        self._pause()
        if isinstance(data.get("mode"), str):
            self.mode = Mode(str(data["mode"]))
            self.is_manual = self.mode is Mode.MANUAL
        if (
            self._open_table(data)
            or self._sign_on()
            or self._inspect_shaker()
            or self._switch_mode(data)
            or self._enter_service(data)
            or self._shuffle(data)
        ):
            return
        if self._choose_bank(data):
            self._press("key_no_more_bets")

    def _to_shake(self, screen: Screen, data: Mapping[str, object]) -> None:
        """Bets closed, or a no roll: the style stepped, the dice replaced when due; then the
        RNG's draw, the dealer's dice set on the reader, or the shaker's shake."""
        if screen is Screen.BETS_CLOSED and not self._choose_style(data):
            return  # a key stepped: the screen shown next says more
        if self._replace_dice(data):
            return  # the dice replaced: the screen shown next says more
        if screen is Screen.BETS_CLOSED and data.get("mode") == Mode.RNG:
            # 621a.11(i): the style of delivery settled, the dealer has the RNG draw
            self._pause()
            self._press("key_dice_set")
        elif self.is_manual:
            # 621a.8(a)(2): the dealer shakes at least three times, sets it on the reader.
            self._pause()
            if self._prepare(data):
                self._inject_faults()
                self._misread(data)
                self.sensor.roll()
            self._press("key_dice_set")
        else:
            self._pause()
            if not self.shaker.lid_pin.is_contact_closed:
                self.shaker.close_lid()  # 621a.11(i): covered again before the reshake
                self._settled("the lid closed", self._lid_closed)
            if self._prepare(data):
                self._inject_faults()
                self._misread(data)
            self._press("shake_button")

    def _at_result(self, data: Mapping[str, object]) -> None:
        """The result shown: corrected or voided when that is the round's lot, else closed."""
        self._pause()
        if self._correct(data) or self._void(data):
            return
        if "result" in data:  # a nudge, or a result shown again, is not a new round
            self.rounds_done.add(data.get("round"))
        self._press("key_close_round")
        if self.clock is not None:
            self.clock.round_closed()

    def _at_fault(self, data: Mapping[str, object]) -> None:
        self._pause()
        faults = data.get("faults")
        if isinstance(faults, list) and str(Fault.DICE_ALARM) in faults:
            # the table locked on a dice alarm: the supervisor takes the dice out
            self._at_terminal("dice_replaced", SUPERVISOR)
        if isinstance(faults, list) and str(Fault.ANCHOR_MISSING) in faults:
            # the log's anchor is gone: a technician clears it at the terminal, saying why
            # (the panel's key never does)
            self._at_terminal("clear_fault", TECHNICIAN, note=ANCHOR_NOTE)
        self._clear(data)

    def _enter_service(self, data: Mapping[str, object]) -> bool:
        """9 NYCRR 5319.58: once, at round SERVICE_AT, a technician takes the table into
        service mode for a test round (a dice table only: the RNG draws no test numbers)."""
        if not (self.makes_choices and data.get("round") == SERVICE_AT and self.mode):
            return False
        if self._serviced or self.mode is Mode.RNG:
            return False
        self._serviced = True
        self._at_terminal("service_mode", TECHNICIAN)
        return True

    def _act_in_service(self, screen: Screen, data: Mapping[str, object]) -> None:
        """The technician: one test round (bets closed, a shake or the dice set on the reader,
        the test result closed), then out of service mode, back to the live round."""
        self._pause()
        if screen is Screen.READY:
            if self._test_rounds >= 1:
                self._at_terminal("service_mode", TECHNICIAN)
            else:
                self._press("key_no_more_bets")
        elif screen in (Screen.BETS_CLOSED, Screen.NO_ROLL):
            if self.is_manual:
                self.sensor.roll()
                self._press("key_dice_set")
            else:
                self.shaker.close_lid()
                self._settled("the lid closed", self._lid_closed)
                self._press("shake_button")
        elif screen is Screen.RESULT:
            self._test_rounds += 1
            self._press("key_close_round")
        elif screen in (Screen.FAULT, Screen.LOCKED):
            self._clear(data)

    def _at_terminal(self, action: str, employee: str, **fields: object) -> bool:
        """The action typed at the service terminal by ``employee`` (what ``paigow-controller
        supervise`` sends, on the controller's socket), with the supervisor key turned for it;
        whether the controller took it. A refusal or an error is logged; the crew acts on the
        next screen (or on this one again), and tries once more where it still applies."""
        if self.control_socket is None:
            return False
        request = Request(action, employee=employee, **fields)  # type: ignore[arg-type]
        self._turn_key(True)  # taken by the table before the action is typed
        self._again = True  # what the step showed is queued by its answer, or nothing was
        try:
            reply = send_request(self.control_socket, request)
        except (ServiceTerminalError, OSError) as exc:
            log.warning("the simulated crew: %s: %s", request.summary(), exc)
            return False
        else:
            if reply.get("ok") is not True:
                why = reply.get("refused") or f"{reply.get('error')}: {reply.get('detail')}"
                log.warning("the simulated crew: %s: %s", request.summary(), why)
                if self.key_switch is KeySwitch.OFF and "supervisor key" in str(why):
                    self._supervisor_stopped(action)
                return False
            log.info("the simulated crew: %s", request.summary())
            return True
        finally:
            self._turn_key(False)

    def _once(self, what: str, number: int, action: str, employee: str, **fields: object) -> bool:
        """A supervisor's task of round ``number`` done once: True while it is being tried (the
        screen shown next says more), False once it was done or given up."""
        if (what, number) in self._handled:
            return False
        done = self._at_terminal(action, employee, **fields)
        if done or self._gave_up((what, number)):
            self._handled.add((what, number))
        return True

    def _prepare(self, data: Mapping[str, object]) -> bool:
        """Whether this screen asks for a new shake: each screen the table shows waiting for
        one (bets closed, a no roll, the same again after a fault was cleared) is a shake, and
        its faults and misread are drawn once, however often the crew looks at that screen."""
        if data is self._prepared:
            return False
        self._prepared = data
        return True

    def _lid_closed(self) -> bool | None:
        return None if self.table is None else self.table.is_lid_closed()

    def _secured(self) -> bool | None:
        return None if self.table is None else self.table.is_secured()

    def _misread(self, data: Mapping[str, object]) -> None:
        """Every CORRECT_EVERY-th round the sensor misreads the red die of the roll that
        decides it (each shake's, until one is not a no roll)."""
        number = data.get("round")
        if self.makes_choices and isinstance(number, int) and number % CORRECT_EVERY == 0:
            self.sensor.misread_next_roll()

    def _correct(self, data: Mapping[str, object]) -> bool:
        """N.J.A.C. 13:69E-1.28P(d): the supervisor looks at the dice and, where the result
        shown is not what they show, corrects it to them (never a re-roll). An RNG result is
        never corrected: in RNG mode the supervisor voids the round instead."""
        number, result = data.get("round"), data.get("result")
        if not (self.makes_choices and isinstance(number, int) and isinstance(result, dict)):
            return False
        if number % CORRECT_EVERY != 0 or "corrected" in data:
            return False
        if data.get("mode") == Mode.RNG:
            return self._void_round(number, VoidReason.DEALER_ERROR, "simulated: RNG mode")
        seen = self.sensor.dice_as_they_lie()
        shown = result.get("dice")
        if seen is None or not isinstance(shown, dict):
            return False
        read = (shown.get("red"), sorted(shown.get("blue") or []))
        if read == (seen.red, sorted(seen.blue)):
            return False
        attempt = data.get("attempt")
        if not isinstance(attempt, int):
            return False
        return self._once(
            "correct",
            number,
            "correct_result",
            SUPERVISOR,
            result=(number, attempt),
            dice=seen,
            reason="misread",
            note="simulated: the red die seen on the camera's recording",
        )

    def _void(self, data: Mapping[str, object]) -> bool:
        """621a.12(c),(e): every tenth round from the fifth, the supervisor voids the whole
        round with the next reason in turn (a wrong count dealt, a tile exposed, ...); every
        wager is returned and the next round opens."""
        number = data.get("round")
        if not (
            self.makes_choices
            and isinstance(number, int)
            and number % VOID_EVERY == VOID_FROM
            and "result" in data
        ):
            return False
        return self._void_round(number, TYPED_VOIDS[self._voids % len(TYPED_VOIDS)], "simulated")

    def _void_round(self, number: int, reason: VoidReason, note: str) -> bool:
        if ("void", number) in self._handled:
            return False
        trying = self._once(
            "void", number, "void_round", SUPERVISOR, round=number, reason=str(reason), note=note
        )
        if ("void", number) in self._handled:
            self._voids += 1
            self.rounds_done.add(number)  # a round played, though void
            if self.clock is not None:
                self.clock.round_closed()
        return trying

    def _gave_up(self, task: tuple[str, int]) -> bool:
        """A supervisor's action refused (a key that had not settled on a loaded machine, say)
        is tried again on the same screen, up to SUPERVISOR_TRIES times in all."""
        self._failures[task] += 1
        return self._failures[task] >= SUPERVISOR_TRIES

    def _replace_dice(self, data: Mapping[str, object]) -> bool:
        """Proposed 621a.5(c): the supervisor records the dice set in the shaker when none is
        recorded (no shake is taken before), and puts in a new one once its 24 hours on the
        table are up."""
        dice = data.get("dice")
        if not isinstance(dice, dict) or self.control_socket is None:
            return False
        warning = dice.get("warning")
        if dice.get("set") is not None and not (
            isinstance(warning, str) and "24 hours:" in warning
        ):
            return False
        self._at_terminal("dice_replaced", SUPERVISOR)
        return True

    def _open_table(self, data: Mapping[str, object]) -> bool:
        """The table opened for play (bets open): a dice set recorded in the shaker, and at
        tiles a set of tiles the dealer inspected and the floorperson verified (621a.6(a)),
        each put in again when its life is up (621a.3(e): the tiles every 12 hours)."""
        if self._replace_dice(data):
            return True
        tiles = data.get("tiles")
        if not isinstance(tiles, dict) or self.control_socket is None:
            return False
        warning = tiles.get("warning")
        if tiles.get("set") is not None and not isinstance(warning, str):
            return False  # (a warning: due within the hour, or due: a new set now)
        self._new_tiles()
        return True

    def _new_tiles(self) -> None:
        self._tile_sets += 1
        self._at_terminal(
            "tiles_inspected", FLOORPERSON, tile_set=f"T-{self._tile_sets}", dealer=DEALER
        )

    def _sign_on(self) -> bool:
        """The dealer signs on at the terminal once: the records of the dealer's keys name
        the dealer from then on."""
        if self._signed_on or not self.makes_choices or self.control_socket is None:
            return False
        self._signed_on = self._at_terminal("shift_change", DEALER) or self._gave_up(("on", 0))
        return True

    def _shuffle(self, data: Mapping[str, object]) -> bool:
        """621a.11(b): once, before round SHUFFLE_AT, the dealer shuffles the tiles for a new
        game (the dealer's key): no player banks its first round."""
        if not (self.makes_choices and self.has_styles and data.get("round") == SHUFFLE_AT):
            return False
        if ("shuffle", SHUFFLE_AT) in self._handled:
            return False
        self._handled.add(("shuffle", SHUFFLE_AT))
        self._press("key_shuffle")
        return True

    def _switch_mode(self, data: Mapping[str, object]) -> bool:
        """Current 621a.6(a): every fifteenth round the supervisor switches the table to the
        next mode it allows, and five rounds later back to the configured one."""
        number = data.get("round")
        if not (self.makes_choices and self.modes and isinstance(number, int) and self.mode):
            return False
        others = [m for m in self.modes if m is not self.configured]
        if not others:
            return False
        if number % MODE_EVERY == 0 and self.mode is self.configured:
            target = others[(number // MODE_EVERY - 1) % len(others)]
        elif number % MODE_EVERY == 5 and self.mode is not self.configured:
            target = self.configured
        else:
            return False
        self._at_terminal("mode_switch", SUPERVISOR, mode=target)
        return True

    def _inspect_shaker(self) -> bool:
        """N.J.A.C. 13:69E-1.16A: the shaker is inspected once a (simulated) day."""
        if not self.makes_choices or self.clock is None or self.control_socket is None:
            return False
        day = self.clock() // DAY_MS
        if self._inspected_day == day:
            return False
        done = self._at_terminal(
            "shaker_inspected", SUPERVISOR, note="cup, lid and tilt switch intact"
        )
        if done or self._gave_up(("inspection", day)):
            self._inspected_day = day
        return True

    def _wants(self, data: Mapping[str, object]) -> tuple[str | None, str]:
        """The bank and the style this round is played with, chosen once per round: mostly the
        dealer banks, now and then a seat; a style the casino allows now and then
        (621a.11(i))."""
        number = data.get("round")
        if number not in self._wanted:
            bank = None if self.random.random() < 0.7 else f"seat {self.random.randint(1, 6)}"
            styles = [DeliveryStyle.STANDARD.value, *(s.value for s in self.styles)]
            style = styles[0] if self.random.random() < 0.6 else self.random.choice(styles)
            self._wanted[number] = (bank or "dealer", style)
        return self._wanted[number]

    def _choose_bank(self, data: Mapping[str, object]) -> bool:
        """Step the bank key to the bank wanted; True once it is selected. A seat the bank
        rules refuse is stepped past, and the next bank they allow is taken."""
        if "round" not in data or not self.makes_choices:
            return True
        bank, style = self._wants(data)
        shown = data.get("bank", "dealer")
        if "bank_refused" in data:
            self._wanted[data.get("round")] = (None, style)
            self._step_key("key_bank_seat")
            return False
        if bank is not None and shown != bank:
            self._step_key("key_bank_seat")
            return False
        return True

    def _choose_style(self, data: Mapping[str, object]) -> bool:
        """Step the style key to the style wanted (before the first shake); True once it is."""
        if not (self.has_styles and self.makes_choices):
            return True
        if data.get("attempt") != 1 or "delivery_style" not in data:
            return True
        _, style = self._wants(data)
        if data["delivery_style"] != style:
            self._pause()
            self._step_key("key_style")
            return False
        return True

    def _inject_faults(self) -> None:
        self.shaker.faults = ShakerFaults()
        for name, probability in self.faults.items():
            if self.fault_random.random() >= probability:
                continue
            if name in SENSOR_FAULTS:
                self.sensor.inject(SENSOR_FAULTS[name])
            elif name == "few_cycles":
                self.shaker.faults = ShakerFaults(max_pulses=2)
            elif name == "lid":
                self.shaker.faults = ShakerFaults(open_lid_after_pulses=1)
            elif name == "motor_stuck":
                # turning on past the motor's limit, where the driver's watchdog finds it
                run_on_ms = self.motor_max_ms + 100
                self.shaker.faults = ShakerFaults(motor_keeps_running=True, run_on_ms=run_on_ms)
            elif name == "tamper":
                self.shaker.remove()

    def _clear(self, data: Mapping[str, object]) -> None:
        """The lid goes back on and the shaker is secured; a dealer clears a sensor fault, the
        supervisor key clears the rest."""
        self.shaker.faults = ShakerFaults()
        self.shaker.close_lid()
        self.shaker.secure()
        self._settled("the lid closed", self._lid_closed)  # taken before the fault is cleared
        self._settled("the shaker secured", self._secured)
        self._press("key_clear_fault")
        self.stopping.wait(self.pause_s)
        if self.key_switch is KeySwitch.OFF:
            # the dealer's clear is all there is: a fault that needs the key stays
            self._fault_clears += 1
            if self._fault_clears > SUPERVISOR_TRIES:
                faults = data.get("faults")
                named = ", ".join(map(str, faults)) if isinstance(faults, list) else "a fault"
                self._supervisor_stopped(f"to clear {named}")
            return
        self._turn_key(True)  # taken before the key is pressed
        self._press("key_clear_fault")
        self._turn_key(False)


def with_auditor_key(config: Config, state_dir: Path) -> Config:
    """RNG mode seals each session's seed to the auditor's key: the config's, or when it
    names none, a throwaway key made beside the simulation's log (its private key on the box:
    never for a real table), so that ``rng-reveal --escrow-key`` works on a simulated log."""
    table = config.table
    if config.rng.escrow_public_key or not (table.mode is Mode.RNG or Mode.RNG in table.modes):
        return config
    path, key = throwaway_escrow_key(state_dir)
    log.warning("throwaway auditor key %s: for a simulation only", path)
    rng = dataclasses.replace(config.rng, escrow_public_key=key.text)
    return dataclasses.replace(config, rng=rng)


def run_simulation(
    config: Config,
    *,
    rounds: int,
    seed: int,
    fast: bool,
    faults: Mapping[str, float],
    state_dir: Path,
    out: TextIO,
    web_display: bool = False,
    plain_rounds: bool = False,
    table_minutes_per_round: float | None = None,
    dice_bias: Mapping[DieColour, Sequence[float]] | None = None,
    sensor_url: str | None = None,
    supervisor_key: KeySwitch = KeySwitch.AUTO,
) -> int:
    """``supervisor_key``: the simulated key switch's position (:class:`KeySwitch`).
    ``dice_bias``: the simulated dice loaded (``parse_dice_bias``). ``plain_rounds``: the
    dealer banks every round with the standard delivery (no bank or
    style key is pressed) and the supervisor does nothing, the round the writes and latency
    benchmarks count. ``table_minutes_per_round``: see :class:`SimulatedWallClock`.
    ``sensor_url``: a DS1 sensor there instead of the simulated one, with the config's sensor
    timings (a real line is slower than the simulated pty); no sensor fault is injected."""
    if sensor_url is not None:
        _refuse_for_a_real_sensor(sensor_url, faults=faults, dice_bias=dice_bias)
    config = with_auditor_key(config, state_dir)
    timed = simulation_config(config, fast=fast)
    config = timed if sensor_url is None else dataclasses.replace(timed, sensor=config.sensor)
    factory = MockFactory(pin_class=SimPin)
    sensor = _dice_sensor(sensor_url, seed=seed, dice_bias=dice_bias)

    def dice_land() -> None:
        sensor.roll()  # the dice come to rest in new places with new faces

    shaker = SimShaker(
        factory, config.pins, config.shaker, on_shake_end=dice_land, pulse_ms=1 if fast else 5
    )
    panel = SimPanel(factory, config.pins, bounce_gap_ms=0.2 if fast else 1.0)
    done = threading.Event()
    clock = SimulatedWallClock(table_minutes_per_round)
    # The service terminal in the state directory, whatever $RUNTIME_DIRECTORY says: the crew's
    # supervisor knows where it is, and a controller running beside stays untouched.
    control_socket = state_dir / SOCKET_NAME
    crew = Crew(
        panel=panel,
        shaker=shaker,
        sensor=sensor,
        rounds=rounds,
        faults=faults,
        seed=seed,
        pause_s=0.0 if fast else 0.6,
        # A key is held (and then left released) past its debounce: by 2 ms in simulated
        # time, a margin for a debounce timer that fires late on a busy machine; else 3 times.
        press_s=(config.shaker.debounce_ms + 2 if fast else config.shaker.debounce_ms * 3) / 1000,
        on_done=done,
        is_manual=config.table.mode is Mode.MANUAL,
        modes=config.table.modes,
        configured=config.table.mode,
        has_styles=config.table.game is Game.TILES,
        styles=config.rules.delivery_styles,
        makes_choices=not plain_rounds,
        motor_max_ms=timed.shaker.motor_max_ms,
        control_socket=control_socket,
        clock=clock,
        key_switch=supervisor_key,
    )
    if supervisor_key is KeySwitch.ON:
        panel.turn_supervisor_key(True)  # before the controller reads the panel
    console = ConsoleDisplay(out, progress_every=50 if fast else 0, total_rounds=rounds)
    options = Options(
        pin_factory=factory,
        sensor_url=sensor.url,
        state_dir=state_dir,
        web_display=web_display,
        web_display_required=False,
        displays=(console,),
        observers=(crew.observe,),
        wall_clock=clock,
        control_socket=control_socket,
    )
    _say_what_runs(
        out,
        config,
        rounds=rounds,
        state_dir=state_dir,
        sensor_url=sensor_url,
        supervisor_key=supervisor_key,
        web_display=web_display,
    )
    appliance = Appliance(config, options)
    closers = (appliance.close, crew.stop, shaker.close, sensor.close, factory.close)
    _run_until_done(appliance, crew, done, closers)
    if crew.restart is not None:
        out.write(f"stopped: {crew.restart}\n")
    out.write(
        f"done: {console.rounds} rounds, {console.no_rolls} no rolls, {console.faults} faults."
        f" Verify: paigow-controller verify-log --state-dir {state_dir}\n"
    )
    out.flush()
    return 0 if crew.restart is None else 1


def _refuse_for_a_real_sensor(
    sensor_url: str,
    *,
    faults: Mapping[str, float],
    dice_bias: Mapping[DieColour, Sequence[float]] | None,
) -> None:
    """A real sensor's dice are real: no sensor fault is injected, no die loaded."""
    refused = sorted(name for name in faults if name in SENSOR_FAULTS)
    if refused:
        raise UsageError(
            f"--faults: {', '.join(refused)} cannot be injected into the sensor at"
            f" {sensor_url} (only the simulated shaker's: {', '.join(SHAKER_FAULTS)})"
        )
    if dice_bias:
        raise UsageError(f"--dice-bias: the dice in the sensor at {sensor_url} are real")


def _dice_sensor(
    sensor_url: str | None,
    *,
    seed: int,
    dice_bias: Mapping[DieColour, Sequence[float]] | None,
) -> CrewsSimulatedSensor | BenchSensor:
    """The simulated sensor (started), or the DS1 sensor at ``sensor_url``."""
    if sensor_url is not None:
        return BenchSensor(sensor_url)
    sensor = CrewsSimulatedSensor(seed=seed, dice_bias=dice_bias)
    sensor.start()
    return sensor


def _say_what_runs(
    out: TextIO,
    config: Config,
    *,
    rounds: int,
    state_dir: Path,
    sensor_url: str | None,
    supervisor_key: KeySwitch,
    web_display: bool,
) -> None:
    out.write(
        f"simulating {rounds} rounds of {config.table.game} ({config.table.mode} mode),"
        f" state in {state_dir}\n"
    )
    if sensor_url is not None:
        out.write(f"dice sensor: {sensor_url} (its dice are read as they lie in its tray)\n")
    if supervisor_key is not KeySwitch.AUTO:
        out.write(
            f"supervisor key: held {supervisor_key} for the run; the service terminal:"
            f" paigow-controller supervise ... --state-dir {state_dir}\n"
        )
    if web_display:
        display = config.display
        out.write(f"table display: http://{display.host}:{display.http_port}/\n")
    if config.fleet.broker is not None:  # the records go on to the broker after the last round
        out.write(f"fleet: publishing to {config.fleet.broker}\n")
    out.flush()


def _run_until_done(
    appliance: Appliance,
    crew: Crew,
    done: threading.Event,
    closers: Sequence[Callable[[], None]],
) -> None:
    """The appliance and its crew, until the crew is done (or the appliance stops); then
    everything closed."""
    finished = threading.Event()  # set when the run is over, however it ended

    def stop_when_done() -> None:
        done.wait()
        if not finished.is_set():
            appliance.stop()

    stopper = threading.Thread(target=stop_when_done, name="simulation-end", daemon=True)
    try:
        appliance.start()
        if appliance.table_io is not None:
            crew.table = DriversView(appliance.table_io.panel, appliance.table_io.shaker)
        crew.start()
        stopper.start()
        appliance.run()
    finally:
        finished.set()
        done.set()  # the stopper thread, if it runs, ends now
        # Each is closed whatever the others do, so that a failed start-up ends in its own
        # error, not in one from the clean-up. The crew is told first and waited for after
        # the appliance: a supervisor waiting for the terminal's answer (which the stopped
        # loop never gives) is let go when the terminal closes, not after its timeout.
        crew.tell_to_stop()
        for close in closers:
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - one line; the first error stands
                log.warning("simulation clean-up: %s failed: %s", close.__qualname__, exc)
        if stopper.ident is not None:
            stopper.join(timeout=5)


# --- commissioning on the bench ----------------------------------------------------------------

COMMISSION_SEED = 1
LID, TAMPER, SUPERVISOR_KEY_INPUT = "lid", "tamper", "supervisor_key"  # commissioning's targets


class SimulatedBench:
    """The simulated hardware of ``simulate`` for ``commission --simulate``: gpiozero's mock
    pins (``MockFactory(pin_class=SimPin)``) behind the simulated shaker and panel, and the
    simulated dice sensor at the far end of a real pseudo-terminal; with the technician's
    hands on it: each input the walk waits for is worked (pressed and released, the lid lifted
    and closed, the shaker lifted and secured, the key switch turned on and off), the dice
    rolled before each reading, and what a person would see on the bench (a lamp lit, the
    dice in the tray) said, since nobody can look at a mock pin. The technician still answers
    every question at the terminal. A context manager; ``close`` may be called twice."""

    def __init__(self, config: Config, *, seed: int = COMMISSION_SEED) -> None:
        self.factory = MockFactory(pin_class=SimPin)
        self.shaker: SimShaker | None = None
        self.sensor: CrewsSimulatedSensor | None = None
        try:
            self.shaker = SimShaker(self.factory, config.pins, config.shaker)
            self.panel = SimPanel(self.factory, config.pins)
            self.sensor = CrewsSimulatedSensor(seed=seed)
            self.sensor.start()
        except BaseException:
            self.close()
            raise
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, bool], threading.Event] = {}
        self._closed = threading.Event()

    @property
    def sensor_url(self) -> str:
        assert self.sensor is not None
        return self.sensor.url

    def lamp_seen(self, lamp: str) -> str:
        """What a person would see of ``lamp`` (its mock pin's level)."""
        try:
            lit = bool(self.panel.lamp_pin(lamp).state)
        except KeyError:
            return f"simulated: {lamp} is no lamp of the simulated panel"
        return f"simulated: {lamp} is {'lit' if lit else 'dark'}"

    def roll(self) -> str:
        """The dice shaken and set down in the tray: what lies there, as a person sees it."""
        assert self.sensor is not None
        self.sensor.roll()
        seen = self.sensor.dice_as_they_lie()
        assert seen is not None
        first, second = seen.blue
        return f"simulated tray: red {seen.red}, blue {first} and {second}"

    def saw(self, target: str, state: bool) -> None:
        """The walk saw ``target`` go to ``state`` (the hands let go after it)."""
        self._event(target, state).set()

    def _event(self, target: str, state: bool) -> threading.Event:
        with self._lock:
            return self._seen.setdefault((target, state), threading.Event())

    def work(self, target: str, first: bool, *, timeout_s: float) -> threading.Thread:
        """On a thread: ``target`` worked to ``first``, held until the walk saw it (at most
        ``timeout_s``), then back."""
        seen = self._event(target, first)
        seen.clear()
        do, undo = self._hands(target, first)

        def run() -> None:
            do()
            if not seen.wait(timeout_s):
                log.warning("commission --simulate: the walk never saw %s", target)
            if not self._closed.is_set():
                undo()

        thread = threading.Thread(target=run, name=f"bench-{target}", daemon=True)
        thread.start()
        return thread

    def _hands(self, target: str, first: bool) -> tuple[Callable[[], None], Callable[[], None]]:
        shaker = self.shaker
        assert shaker is not None
        if target == LID:
            return shaker.open_lid, shaker.close_lid
        if target == TAMPER:
            return shaker.remove, shaker.secure
        if target == SUPERVISOR_KEY_INPUT:
            return (
                lambda: self.panel.turn_supervisor_key(first),
                lambda: self.panel.turn_supervisor_key(not first),
            )
        return lambda: self.panel.press(target), lambda: self.panel.release(target)

    def close(self) -> None:
        self._closed.set()
        for part in (self.shaker, self.sensor):
            if part is not None:
                try:
                    part.close()
                except Exception as exc:  # noqa: BLE001 - one line; the rest still closed
                    log.warning("commission --simulate: closing %s failed: %s", part, exc)
        self.factory.close()

    def __enter__(self) -> SimulatedBench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
