"""The three dice: what the sensor saw, and when a look at them counts as a roll.

Pure: no I/O, no clock. The optical sensor's driver turns frames into :class:`DiceReading`;
this module alone decides whether a reading is a valid roll or a no roll, and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from controller.errors import GameRuleError

FACES = range(1, 7)
DICE_PER_ROLL = 3


class DieColour(StrEnum):
    RED = "red"
    BLUE = "blue"
    OTHER = "other"  # an object the sensor could not match to a red or a blue die


class NoRollReason(StrEnum):
    """Why a look at the dice (or a shake) did not give a result. The dealer reshakes."""

    NOT_FLAT = "not_flat"  # 621a.12(a): all three dice must land flat on the bottom
    DIE_OUT = "die_out"  # 621a.12(b): a die fell out of the shaker / off the tray
    MISSING_DIE = "missing_die"
    EXTRA_DIE = "extra_die"
    WRONG_COLOURS = "wrong_colours"  # 645c.2(c): one red and two blue dice
    LOW_CONFIDENCE = "low_confidence"
    UNREADABLE = "unreadable"
    READS_DISAGREE = "reads_disagree"  # consecutive reads of the same dice did not agree
    DICE_DID_NOT_MOVE = "dice_did_not_move"  # same faces in the same places as the last roll
    TOO_FEW_CYCLES = "too_few_cycles"  # 621a.8(a)(2): shaken at least three times
    LID_OPENED = "lid_opened"  # 621a.11(i): lid removed too early, cover and reshake

    @property
    def plain_words(self) -> str:
        """The notice the table display shows."""
        return _PLAIN_WORDS[self]


_PLAIN_WORDS = {
    NoRollReason.NOT_FLAT: "a die is not flat",
    NoRollReason.DIE_OUT: "a die is out of the shaker",
    NoRollReason.MISSING_DIE: "a die is missing",
    NoRollReason.EXTRA_DIE: "an extra object is in the shaker",
    NoRollReason.WRONG_COLOURS: "the dice are not one red and two blue",
    NoRollReason.LOW_CONFIDENCE: "the dice could not be read with confidence",
    NoRollReason.UNREADABLE: "a die could not be read",
    NoRollReason.READS_DISAGREE: "the dice moved while being read",
    NoRollReason.DICE_DID_NOT_MOVE: "the dice did not move",
    NoRollReason.TOO_FEW_CYCLES: "the shaker did not shake three times",
    NoRollReason.LID_OPENED: "the lid was opened during the shake",
}


@dataclass(frozen=True, slots=True)
class DieReading:
    """One object the sensor saw. ``face`` is None when the top face could not be read.

    ``confidence`` is a whole percentage (0..100) so that records never hold floats;
    ``position`` is the die's centre in millimetres on the tray, when the sensor gives one.
    """

    colour: DieColour
    face: int | None
    is_flat: bool
    is_inside: bool
    confidence: int
    position: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.face is not None and self.face not in FACES:
            raise GameRuleError(f"die face {self.face} is not 1..6")
        if not 0 <= self.confidence <= 100:
            raise GameRuleError(f"confidence {self.confidence} is not 0..100")


@dataclass(frozen=True, slots=True)
class DiceReading:
    """Everything one look of the sensor saw, with the digest of the image it came from."""

    dice: tuple[DieReading, ...]
    image_digest: str


@dataclass(frozen=True, slots=True)
class Roll:
    """A valid roll: one red and two blue faces. Blue faces are kept in the order read."""

    red: int
    blue: tuple[int, int]

    def __post_init__(self) -> None:
        for face in (self.red, *self.blue):
            if face not in FACES:
                raise GameRuleError(f"die face {face} is not 1..6")

    @property
    def faces(self) -> tuple[int, int, int]:
        return (self.red, self.blue[0], self.blue[1])

    @property
    def total(self) -> int:
        return self.red + self.blue[0] + self.blue[1]

    def as_record(self) -> dict[str, object]:
        return {"red": self.red, "blue": list(self.blue)}


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision on one reading: a roll, or the reason it is not one."""

    roll: Roll | None
    no_roll_reason: NoRollReason | None
    positions: tuple[tuple[int, int] | None, ...] = ()  # red first, then blues, as in ``roll``

    @property
    def is_valid(self) -> bool:
        return self.roll is not None


def _wrong_colours(dice: tuple[DieReading, ...], _: int) -> bool:
    colours = Counter(die.colour for die in dice)
    return colours[DieColour.RED] != 1 or colours[DieColour.BLUE] != 2


# A reading's checks, in their order: the first that fails names the no roll's reason.
_NO_ROLL_CHECKS: tuple[tuple[NoRollReason, Callable[[tuple[DieReading, ...], int], bool]], ...] = (
    # 621a.12(b): a die out of the shaker is a no roll, whatever the others show.
    (NoRollReason.DIE_OUT, lambda dice, _: any(not die.is_inside for die in dice)),
    (NoRollReason.EXTRA_DIE, lambda dice, _: len(dice) > DICE_PER_ROLL),
    (NoRollReason.MISSING_DIE, lambda dice, _: len(dice) < DICE_PER_ROLL),
    # 621a.12(a): all three dice must have landed flat on the bottom.
    (NoRollReason.NOT_FLAT, lambda dice, _: any(not die.is_flat for die in dice)),
    (NoRollReason.UNREADABLE, lambda dice, _: any(die.face is None for die in dice)),
    (NoRollReason.WRONG_COLOURS, _wrong_colours),
    (NoRollReason.LOW_CONFIDENCE, lambda dice, least: any(d.confidence < least for d in dice)),
)


def judge_reading(reading: DiceReading, *, min_confidence: int) -> Verdict:
    """Decide one reading. Valid only with exactly three dice in the tray, all flat, one red
    and two blue, each read with at least ``min_confidence``. The first failing check, in a fixed
    order, names the reason so that the same reading always gets the same reason."""
    inside = reading.dice
    for reason, fails in _NO_ROLL_CHECKS:
        if fails(inside, min_confidence):
            return _no_roll(reason)
    red = next(die for die in inside if die.colour is DieColour.RED)
    blues = [die for die in inside if die.colour is DieColour.BLUE]
    roll = Roll(red=_face(red), blue=(_face(blues[0]), _face(blues[1])))
    return Verdict(roll, None, (red.position, blues[0].position, blues[1].position))


def _face(die: DieReading) -> int:
    if die.face is None:  # pragma: no cover - judge_reading checks first
        raise GameRuleError("die has no face")
    return die.face


def _no_roll(reason: NoRollReason) -> Verdict:
    return Verdict(None, reason)


def _near(a: tuple[int, int] | None, b: tuple[int, int] | None, tolerance: int) -> bool | None:
    """Whether two positions are within ``tolerance`` mm on both axes; None when unknown."""
    if a is None or b is None:
        return None
    return abs(a[0] - b[0]) <= tolerance and abs(a[1] - b[1]) <= tolerance


def _dice_of(verdict: Verdict) -> list[tuple[DieColour, int, tuple[int, int] | None]]:
    assert verdict.roll is not None
    colours = (DieColour.RED, DieColour.BLUE, DieColour.BLUE)
    positions = verdict.positions or (None, None, None)
    return list(zip(colours, verdict.roll.faces, positions, strict=True))


def same_dice(a: Verdict, b: Verdict, *, tolerance: int, require_positions: bool) -> bool:
    """Whether two valid verdicts show the same faces (red to red, blues as a pair) and, where
    both give positions, each die within ``tolerance`` of its twin. With ``require_positions``
    a comparison without positions is never "the same" (so that unknown places never make a
    no roll)."""
    remaining = _dice_of(b)
    for colour, face, position in _dice_of(a):
        for index, (other_colour, other_face, other_position) in enumerate(remaining):
            if other_colour is not colour or other_face != face:
                continue
            near = _near(position, other_position, tolerance)
            if near is None and require_positions:
                return False
            if near is False:
                continue
            del remaining[index]
            break
        else:
            return False
    return True


@dataclass(frozen=True, slots=True)
class ReadPolicy:
    """How many agreeing reads make a roll (K) and how positions are compared."""

    reads_to_agree: int = 2
    min_confidence: int = 80
    position_tolerance_mm: int = 3


@dataclass(frozen=True, slots=True)
class ReadProgress:
    """What has been read of the dice in the tray since they came to rest."""

    streak: tuple[Verdict, ...] = ()
    reread_used: bool = False


@dataclass(frozen=True, slots=True)
class ReadStep:
    """The outcome of one more reading: read again, a roll, or a no roll."""

    progress: ReadProgress
    verdict: Verdict
    roll: Roll | None = None
    no_roll_reason: NoRollReason | None = None

    @property
    def needs_another_read(self) -> bool:
        return self.roll is None and self.no_roll_reason is None


def next_read(
    progress: ReadProgress,
    reading: DiceReading,
    *,
    policy: ReadPolicy,
    previous_roll: Verdict | None,
) -> ReadStep:
    """Fold one reading into the progress.

    An invalid reading is a no roll at once with its reason. A valid reading that disagrees
    with the streak starts the streak again, once; a second disagreement is a no roll
    (``reads_disagree``). ``reads_to_agree`` consecutive agreeing reads make a roll, unless it
    shows the same faces in the same places as ``previous_roll`` (``dice_did_not_move``).
    """
    verdict = judge_reading(reading, min_confidence=policy.min_confidence)
    if verdict.no_roll_reason is not None:
        return ReadStep(progress, verdict, no_roll_reason=verdict.no_roll_reason)
    tolerance = policy.position_tolerance_mm
    streak = progress.streak
    reread_used = progress.reread_used
    if streak and not same_dice(streak[-1], verdict, tolerance=tolerance, require_positions=False):
        if reread_used:
            return ReadStep(progress, verdict, no_roll_reason=NoRollReason.READS_DISAGREE)
        streak, reread_used = (), True
    streak = (*streak, verdict)
    progress = ReadProgress(streak, reread_used)
    if len(streak) < policy.reads_to_agree:
        return ReadStep(progress, verdict)
    if previous_roll is not None and same_dice(
        previous_roll, verdict, tolerance=tolerance, require_positions=True
    ):
        return ReadStep(progress, verdict, no_roll_reason=NoRollReason.DICE_DID_NOT_MOVE)
    assert verdict.roll is not None
    return ReadStep(progress, verdict, roll=verdict.roll)
