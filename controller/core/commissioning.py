"""Commissioning a table: the technician's walk through the real hardware, and its report.

Pure: no I/O, clock or threads. This module decides which steps a table's walk has (from what
the table has: a player-activated shaker, a dice sensor), what the technician is told at each,
the verdict of each observation, the walk's verdict and the record it leaves in the audit log.
The shell (``controller/app/commission.py``) prompts, waits, drives the outputs and observes.

621a.2(d): the shaker "must be designed and constructed to maintain the integrity of the
game"; N.J.A.C. 13:69E-1.16A: an automated shaker is secured to the table and inspected for
tampering. A walk checks, on the table itself, every input and output the controller relies on
for that: each lamp lit in turn (confirmed by eye), the shake button, the dealer's keys and the
supervisor key switch, the lid switch, the tamper loop, the motor with its motion sensor, and
the dice sensor's handshake and readings of dice the technician sets in the tray (confirmed by
eye against the tray).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.core.dice import DiceReading, NoRollReason, judge_reading, same_dice
from controller.errors import RecordDataError

READINGS_MAX = 100  # readings in one walk (--readings)
STEP_TIMEOUT_MAX_S = 600  # the longest a step waits for the hardware (--step-timeout)
TECHNICIAN_MAX_CHARS = 64
STEPS_MAX = 32 + READINGS_MAX  # more than any table's plan: a record's bound
OBSERVED_MAX_CHARS = 400  # what a step records it saw, at most


class Verdict(StrEnum):
    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    SKIPPED = "skipped"  # the technician chose to skip it
    NOT_RUN = "not_run"  # the walk ended before it, or what it needs could not be opened


class Outcome(StrEnum):
    COMPLETED = "completed"  # every step was taken (passed, failed or skipped)
    INTERRUPTED = "interrupted"  # Ctrl-C (or SIGTERM): outputs safe, the rest not run
    ABANDONED = "abandoned"  # no answer in time, or the technician's input ended


class StepKind(StrEnum):
    LAMP = "lamp"  # lit alone; the technician confirms by eye
    INPUT = "input"  # a key, button, switch or loop: a change, then back
    MOTOR = "motor"  # one shake pattern, its motion pulses counted
    SENSOR = "sensor"  # the dice sensor's handshake and status
    READING = "reading"  # one reading of the dice in the tray, confirmed by eye


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the walk. For an input, ``target`` names it (a panel key, ``lid`` or
    ``tamper``) and ``expect`` is the pair of states it must pass through, in order (a key:
    pressed, then released; the lid: open, then closed)."""

    name: str
    kind: StepKind
    title: str
    instruction: str
    target: str = ""
    expect: tuple[bool, bool] = (True, False)
    number: int = 0  # the reading's number (READING)


# The panel's lamps, in the order they are lit, with what the technician should see.
LAMPS: tuple[tuple[str, str], ...] = (
    ("shake_button_lamp", "the lamp in the player's shake button"),
    ("lamp_red", "the status lamp, RED"),
    ("lamp_green", "the status lamp, GREEN"),
    ("lamp_blue", "the status lamp, BLUE"),
)
# The panel's momentary keys (hw/pinout.md), with their names on the panel.
DEALER_KEYS: tuple[tuple[str, str], ...] = (
    ("key_no_more_bets", "NO MORE BETS"),
    ("key_close_round", "CLOSE ROUND"),
    ("key_void_round", "VOID ROUND"),
    ("key_clear_fault", "CLEAR FAULT"),
    ("key_dice_set", "DICE SET"),
    ("key_bank_seat", "BANK"),
    ("key_style", "STYLE"),
    ("key_shift_change", "SHIFT CHANGE"),
    ("key_shuffle", "SHUFFLE"),
)
SHAKE_BUTTON = "shake_button"
SUPERVISOR_KEY = "supervisor_key"
LID = "lid"  # state: closed
TAMPER = "tamper"  # state: secured


# The shaker's steps, in their order: the tamper loop opening latches every output safe, so it
# comes after the steps that need them.
_SHAKER_STEPS: tuple[Step, ...] = (
    Step(
        "shaker.lid",
        StepKind.INPUT,
        "the shaker's lid switch",
        "Lift the shaker's lid (or dome) off, then put it back closed.",
        LID,
        expect=(False, True),
    ),
    Step(
        "shaker.motor",
        StepKind.MOTOR,
        "the shaker's motor and motion sensor",
        "Put the three dice in the shaker, close the lid and keep hands clear: the motor"
        " runs one shake pattern.",
    ),
    Step(
        "shaker.tamper",
        StepKind.INPUT,
        "the shaker's tamper loop",
        "Lift the shaker off its mount (or tilt it), then set it back and secure it."
        " The controller cuts every output when the loop opens, as it must.",
        TAMPER,
        expect=(False, True),
    ),
)
_SENSOR_HANDSHAKE = Step(
    "sensor.handshake",
    StepKind.SENSOR,
    "the dice sensor's handshake and status",
    "Nothing to do: the controller asks the dice sensor who it is and whether it is healthy.",
)


def plan(*, has_shaker: bool, has_sensor: bool, readings: int) -> tuple[Step, ...]:
    """The walk for a table: the lamps, the player's button (a shaker table only), the
    dealer's keys and the supervisor key, then the shaker (lid, motor, tamper loop, in that
    order: the tamper loop opening latches every output safe, so it comes after the steps
    that need them), then the dice sensor and ``readings`` readings."""
    if not 0 <= readings <= READINGS_MAX:
        raise ValueError(f"readings must be 0..{READINGS_MAX}")
    steps = _panel_steps(has_shaker=has_shaker)
    if has_shaker:
        steps += _SHAKER_STEPS
    if has_sensor:
        steps += (_SENSOR_HANDSHAKE, *_reading_steps(readings))
    return steps


def _panel_steps(*, has_shaker: bool) -> tuple[Step, ...]:
    """The lamps, the player's button (a shaker table only), the dealer's keys and the
    supervisor key."""
    lamps = [
        Step(
            f"lamp.{lamp}",
            StepKind.LAMP,
            f"lamp: {title}",
            f"Look at the panel: {title} should be lit, and every other lamp dark.",
            target=lamp,
        )
        for lamp, title in LAMPS
        if has_shaker or lamp != "shake_button_lamp"
    ]
    keys = [(SHAKE_BUTTON, "the player's SHAKE button")] if has_shaker else []
    keys += [(key, f"the dealer's {title} key") for key, title in DEALER_KEYS]
    inputs = [
        Step(f"key.{key}", StepKind.INPUT, title, f"Press {title} once and release it.", key)
        for key, title in keys
    ]
    supervisor = Step(
        f"key.{SUPERVISOR_KEY}",
        StepKind.INPUT,
        "the supervisor key switch",
        "Turn the supervisor key switch ON, then back OFF.",
        SUPERVISOR_KEY,
    )
    return (*lamps, *inputs, supervisor)


def _reading_steps(readings: int) -> tuple[Step, ...]:
    return tuple(
        Step(
            f"sensor.reading.{n}",
            StepKind.READING,
            f"dice sensor reading {n} of {readings}",
            "Shake the dice (or set them by hand) so they lie in the reading tray, then"
            " press Enter to read them.",
            number=n,
        )
        for n in range(1, readings + 1)
    )


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step's verdict and what was seen, in words (``detail``: figures a program reads)."""

    step: Step
    verdict: Verdict
    observed: str
    detail: Mapping[str, object] | None = None

    def as_record(self) -> dict[str, object]:
        entry: dict[str, object] = {
            "step": self.step.name,
            "verdict": str(self.verdict),
            "observed": self.observed[:OBSERVED_MAX_CHARS],
        }
        if self.detail is not None:
            entry["detail"] = dict(self.detail)
        return entry


def skipped(step: Step) -> StepResult:
    return StepResult(step, Verdict.SKIPPED, "skipped by the technician")


def not_run(step: Step, why: str) -> StepResult:
    return StepResult(step, Verdict.NOT_RUN, why)


# --- the verdicts ----------------------------------------------------------------------------


def judge_lamp(step: Step, *, confirmed: bool, latched: str | None) -> StepResult:
    """The technician's eye decides; outputs held safe by the latch cannot be lit at all."""
    if latched is not None:
        return StepResult(step, Verdict.FAIL, f"outputs latched safe ({latched}): not lit")
    if confirmed:
        return StepResult(step, Verdict.PASS, "lit alone, confirmed by the technician")
    return StepResult(step, Verdict.FAIL, "the technician did not see it lit alone")


_STATE_WORDS = {
    LID: ("closed", "open"),
    TAMPER: ("secured", "open (tampered)"),
    SUPERVISOR_KEY: ("on", "off"),
}


def state_word(target: str, state: bool) -> str:
    """An input's state as the panel's labels say it."""
    active, inactive = _STATE_WORDS.get(target, ("pressed", "released"))
    return active if state else inactive


def has_seen(changes: Sequence[bool], expect: tuple[bool, bool]) -> bool:
    """Whether the input went to ``expect[0]`` and, after that, to ``expect[1]``."""
    first, then = expect
    try:
        at = list(changes).index(first)
    except ValueError:
        return False
    return then in changes[at + 1 :]


def judge_input(
    step: Step, *, initial: bool, changes: Sequence[bool], timeout_s: int
) -> StepResult:
    """PASS once the input was seen going to its first state and back (a key pressed and
    released; the lid opened and closed), counted from the changes seen during the step: a
    key stuck pressed before the step must still be seen released, pressed and released."""
    words = [state_word(step.target, state) for state in changes]
    seen = ", then ".join(words) if words else "no change"
    observed = f"{state_word(step.target, initial)} at the start; seen: {seen}"
    detail = {"initial": initial, "changes": list(changes)}
    if has_seen(changes, step.expect):
        return StepResult(step, Verdict.PASS, observed, detail)
    want = " then ".join(state_word(step.target, state) for state in step.expect)
    return StepResult(
        step, Verdict.FAIL, f"{observed}; not seen {want} within {timeout_s} s", detail
    )


@dataclass(frozen=True, slots=True)
class MotorObservation:
    """What one shake pattern did. ``refused``: why it did not start (the lid open, the loop
    open, the outputs latched). ``cycles``: the motion pulses the driver counted, from its
    ``SHAKE_DONE``; None if the pattern never reported its end. ``faults``: what the driver
    reported meanwhile (a motor overrun, the lid opened, tamper). ``motor_off``: the motor
    pin read at its safe value (off) once the check was over."""

    refused: str | None = None
    cycles: int | None = None
    faults: tuple[str, ...] = ()
    motor_off: bool = True


def judge_motor(
    step: Step, seen: MotorObservation, *, pattern_cycles: int, min_cycles: int
) -> StepResult:
    """621a.8(a)(2): the shaker is shaken at least three times (``[round] min_shake_cycles``);
    the motion sensor must count that many pulses for the pattern's cycles, the driver must
    report no overrun (its own watchdog, at ``motor_max_ms``) and the motor must end off."""
    detail: dict[str, object] = {
        "cycles": seen.cycles,
        "pattern_cycles": pattern_cycles,
        "min_cycles": min_cycles,
        "faults": list(seen.faults),
        "motor_off": seen.motor_off,
    }
    if seen.refused is not None:
        return StepResult(step, Verdict.FAIL, f"the shake did not start: {seen.refused}", detail)
    counted = (
        "no end of the pattern reported"
        if seen.cycles is None
        else (f"{seen.cycles} motion pulses counted for {pattern_cycles} cycles")
    )
    problems = list(seen.faults)
    if not seen.motor_off:
        problems.append("the motor pin is not at its safe value (off) after the shake")
    if seen.cycles is None:
        problems.append("the pattern did not end")
    elif seen.cycles < min_cycles:
        problems.append(
            f"fewer than {min_cycles} pulses (621a.8(a)(2)): check the motion sensor, its"
            " magnet and its wiring"
        )
    if problems:
        return StepResult(step, Verdict.FAIL, f"{counted}; {'; '.join(problems)}", detail)
    return StepResult(step, Verdict.PASS, f"{counted}; motor off after the pattern", detail)


@dataclass(frozen=True, slots=True)
class Handshake:
    """The sensor's identity from the handshake, as recorded."""

    model: str
    firmware: str
    serial_number: str
    protocol_version: int

    def as_record(self) -> dict[str, object]:
        return {
            "model": self.model,
            "firmware": self.firmware,
            "serial_number": self.serial_number,
            "protocol_version": self.protocol_version,
        }

    def __str__(self) -> str:
        return (
            f"{self.model} serial {self.serial_number} firmware {self.firmware}"
            f" (protocol DS{self.protocol_version})"
        )


def judge_sensor(
    step: Step,
    identity: Handshake | None,
    *,
    error: str | None,
    faults: Sequence[str] = (),
) -> StepResult:
    """The handshake passed (an approved firmware) and the sensor reports no hardware fault."""
    if identity is None:
        return StepResult(step, Verdict.FAIL, f"no handshake: {error or 'no answer'}")
    detail = {**identity.as_record(), "faults": sorted(faults)}
    if error is not None:
        return StepResult(step, Verdict.FAIL, f"{identity}; status: {error}", detail)
    if faults:
        return StepResult(
            step, Verdict.FAIL, f"{identity}; reports {'+'.join(sorted(faults))}", detail
        )
    return StepResult(step, Verdict.PASS, f"{identity}; healthy", detail)


def reading_detail(reading: DiceReading, *, min_confidence: int) -> dict[str, Any]:
    """A reading as shown and recorded: every object the sensor saw, and the verdict the game
    would give it (621a.12(a): not flat; 621a.12(b): out of the tray)."""
    verdict = judge_reading(reading, min_confidence=min_confidence)
    return {
        "dice": [
            {
                "colour": str(die.colour),
                "face": die.face,
                "flat": die.is_flat,
                "inside": die.is_inside,
                "confidence": die.confidence,
            }
            for die in reading.dice
        ],
        "verdict": "valid" if verdict.is_valid else str(verdict.no_roll_reason),
        "total": None if verdict.roll is None else verdict.roll.total,
        "image": reading.image_digest,
    }


def reading_text(detail: Mapping[str, Any]) -> str:
    """``red 5 flat 97 %, blue 2 flat 99 %, blue 6 flat 95 %: valid, total 13``."""
    dice = []
    for die in detail["dice"]:
        face = "?" if die["face"] is None else die["face"]
        posture = "flat" if die["flat"] else "NOT FLAT"
        where = "" if die["inside"] else " OUTSIDE the tray"
        dice.append(f"{die['colour']} {face} {posture}{where} {die['confidence']} %")
    verdict = detail["verdict"]
    if verdict == "valid":
        said = f"a valid roll, total {detail['total']}"
    else:
        said = f"a no roll: {NoRollReason(verdict).plain_words}"
    return f"{', '.join(dice) or 'nothing seen'}: {said}"


def judge_reading_step(
    step: Step,
    reading: DiceReading | None,
    *,
    error: str | None,
    confirmed: bool | None,
    previous: DiceReading | None,
    min_confidence: int,
    tolerance_mm: int,
) -> StepResult:
    """The sensor answered with a reading, of a new image, and the technician confirms that it
    says what lies in the tray (each die's colour, face and posture). A no roll seen rightly
    (a die set tilted on purpose) passes: the sensor told the truth."""
    if reading is None:
        return StepResult(step, Verdict.FAIL, f"no reading: {error or 'no answer'}")
    detail = reading_detail(reading, min_confidence=min_confidence)
    observed = reading_text(detail)
    if previous is not None and previous.image_digest == reading.image_digest:
        return StepResult(
            step,
            Verdict.FAIL,
            f"{observed}; the same image as the reading before: the camera took no new image",
            detail,
        )
    if previous is not None:
        before = judge_reading(previous, min_confidence=min_confidence)
        now = judge_reading(reading, min_confidence=min_confidence)
        if (
            now.is_valid
            and before.is_valid
            and same_dice(before, now, tolerance=tolerance_mm, require_positions=True)
        ):
            observed += " (the same dice in the same places as the reading before)"
    if confirmed is None:
        return StepResult(step, Verdict.SKIPPED, f"{observed}; not confirmed (skipped)", detail)
    if not confirmed:
        return StepResult(
            step, Verdict.FAIL, f"{observed}; the technician says the tray shows otherwise", detail
        )
    return StepResult(step, Verdict.PASS, f"{observed}; confirmed by the technician", detail)


# --- the report and its record ---------------------------------------------------------------


def counts(results: Sequence[StepResult]) -> dict[str, int]:
    return {str(v): sum(r.verdict is v for r in results) for v in Verdict}


def is_passed(outcome: Outcome, results: Sequence[StepResult]) -> bool:
    """The table passed: the walk completed, and every step passed or was skipped by the
    technician."""
    return outcome is Outcome.COMPLETED and all(
        r.verdict in (Verdict.PASS, Verdict.SKIPPED) for r in results
    )


def report(
    *,
    table: str,
    technician: str,
    outcome: Outcome,
    results: Sequence[StepResult],
    sensor: Handshake | None,
    config_sha256: str,
    step_timeout_s: int,
    readings: int,
    outputs_safe: Sequence[str],
    ended: str = "",
) -> dict[str, Any]:
    """The walk's report: what ``commission`` prints and records (``commissioning``)."""
    document: dict[str, Any] = {
        "table": table,
        "technician": technician,
        "outcome": str(outcome),
        "passed": is_passed(outcome, results),
        "counts": counts(results),
        "steps": [r.as_record() for r in results],
        "sensor": None if sensor is None else sensor.as_record(),
        "config_sha256": config_sha256,
        "step_timeout_s": step_timeout_s,
        "readings": readings,
        "outputs_safe": sorted(outputs_safe),
    }
    if ended:
        document["ended"] = ended[:OBSERVED_MAX_CHARS]
    return document


def technician_error(name: str) -> str | None:
    """Why ``name`` cannot name a technician in the log, or None: 1 to 64 printable ASCII
    characters, not starting or ending with a space."""
    if not 0 < len(name) <= TECHNICIAN_MAX_CHARS:
        return f"is not 1 to {TECHNICIAN_MAX_CHARS} characters"
    if not all(" " <= c <= "~" for c in name):
        return "is not printable ASCII"
    if name != name.strip():
        return "starts or ends with a space"
    return None


_RECORD_KEYS = frozenset(
    {
        "table",
        "technician",
        "outcome",
        "passed",
        "counts",
        "steps",
        "sensor",
        "config_sha256",
        "step_timeout_s",
        "readings",
        "outputs_safe",
    }
)
_OPTIONAL_KEYS = frozenset({"round", "ended", "simulated"})  # simulated: on the bench


def check_record(data: Mapping[str, Any]) -> None:
    """What a ``commissioning`` record must say, as verify-log checks it: its fields, a
    technician named as the command line accepts, steps with known verdicts, and counts and a
    verdict that agree with those steps (a walk recorded as passed has no failed step)."""
    keys = set(data)
    if not keys >= _RECORD_KEYS or not keys <= _RECORD_KEYS | _OPTIONAL_KEYS:
        raise RecordDataError(f"commissioning has fields {sorted(keys)}")
    if "simulated" in data and data["simulated"] is not True:
        raise RecordDataError("commissioning's simulated is true when given")
    technician = data["technician"]
    if not isinstance(technician, str) or technician_error(technician) is not None:
        raise RecordDataError("commissioning names no technician")
    try:
        outcome = Outcome(data["outcome"])
    except ValueError:
        raise RecordDataError(f"commissioning outcome {data['outcome']!r} is unknown") from None
    verdicts = _recorded_verdicts(data["steps"])
    expected = {str(v): verdicts.count(v) for v in Verdict}
    if data["counts"] != expected:
        raise RecordDataError(f"commissioning counts {data['counts']!r} are not its steps'")
    passed = outcome is Outcome.COMPLETED and all(
        v in (Verdict.PASS, Verdict.SKIPPED) for v in verdicts
    )
    if data["passed"] is not passed:
        raise RecordDataError(
            f"commissioning is recorded as passed={data['passed']!r} but its steps say {passed}"
        )


def _recorded_verdicts(steps: object) -> list[Verdict]:
    """The verdict of each step a ``commissioning`` record lists, each step checked."""
    if not isinstance(steps, list) or len(steps) > STEPS_MAX:
        raise RecordDataError(f"commissioning steps are not a list of at most {STEPS_MAX}")
    verdicts = []
    for entry in steps:
        if not isinstance(entry, dict) or not {"step", "verdict", "observed"} <= set(entry):
            raise RecordDataError("a commissioning step has step, verdict and observed")
        if not isinstance(entry["step"], str) or not isinstance(entry["observed"], str):
            raise RecordDataError("a commissioning step's name and observation are text")
        try:
            verdicts.append(Verdict(entry["verdict"]))
        except ValueError:
            raise RecordDataError(f"commissioning verdict {entry['verdict']!r}") from None
    return verdicts
