"""The table's meters: what happened at the table, counted from its records alone.

Counted two ways that must agree: the round state machine counts the records of each step as it
makes them (the counts live in the context the log keeps with every commit, and the supervisor's
view shows them), and ``paigow-controller meters`` counts the log's records again with the same
function, from the first record or from a given time on. Pure: no I/O.

What is counted (live play only, except where the item says otherwise; a test round of service
mode is recorded as ``service_test`` and counts as nothing but what it physically did):

``games``          rounds closed with their result (``close``)
``no_rolls``       no rolls by reason (``no_roll``; 621a.12(a),(b), 621a.8(a)(2), 621a.11(i))
``corrections``    results corrected to the dice as they lie (``result_corrected``)
``round_voids``    whole rounds voided, every wager returned (``void``; 621a.12(c),(e))
``lid_openings``   the shaker's lid opened, in a round or not, in service mode too (``lid``)
``tamper``         the shaker's tamper loop opened, in service mode too (``tamper_loop``)
``power_ups``      starts of the controller (``power_on``)
``service_mode``   entries into service mode (``service_mode`` entered)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.dice import NoRollReason
from controller.core.evolve import replace
from controller.errors import MetersError

METER_NAMES = (
    "games",
    "no_rolls",
    "corrections",
    "round_voids",
    "lid_openings",
    "tamper",
    "power_ups",
    "service_mode",
)
_MAX_COUNT = 2**53


@dataclass(frozen=True, slots=True)
class Meters:
    games: int = 0
    no_rolls: Mapping[str, int] = field(default_factory=dict)  # reason -> count
    corrections: int = 0
    round_voids: int = 0
    lid_openings: int = 0
    tamper: int = 0
    power_ups: int = 0
    service_mode: int = 0

    @property
    def is_empty(self) -> bool:
        return self == Meters()

    def as_record(self) -> dict[str, object]:
        """The meters as ``paigow-controller meters`` prints them (every reason of a no roll
        the table knows, zero or not, in a fixed order)."""
        return {
            "games": self.games,
            "no_rolls": {str(r): self.no_rolls.get(str(r), 0) for r in NoRollReason},
            "corrections": self.corrections,
            "round_voids": self.round_voids,
            "lid_openings": self.lid_openings,
            "tamper": self.tamper,
            "power_ups": self.power_ups,
            "service_mode": self.service_mode,
        }

    def as_stored(self) -> dict[str, object]:
        """The short form the context snapshot keeps: only what is not zero."""
        stored: dict[str, object] = {
            name: getattr(self, name)
            for name in METER_NAMES
            if name != "no_rolls" and getattr(self, name)
        }
        reasons = {reason: n for reason, n in sorted(self.no_rolls.items()) if n}
        if reasons:
            stored["no_rolls"] = reasons
        return stored

    @classmethod
    def from_stored(cls, raw: object) -> Meters:
        """What ``as_stored`` wrote; :class:`MetersError` for anything else."""
        if not isinstance(raw, dict) or not raw or not set(raw) <= set(METER_NAMES):
            raise MetersError("meters are an object of the known meters, not empty")
        counts: dict[str, object] = {}
        for name, value in raw.items():
            if name == "no_rolls":
                known = {str(r) for r in NoRollReason}
                if not isinstance(value, dict) or not value or not set(value) <= known:
                    raise MetersError("no_rolls counts no rolls by their reasons")
                counts[name] = {reason: _count(n) for reason, n in value.items()}
            else:
                counts[name] = _count(value)
        meters = cls(**counts)  # type: ignore[arg-type]
        if meters.as_stored() != raw:
            raise MetersError("meters are stored without zeros, in their short form")
        return meters


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= _MAX_COUNT:
        raise MetersError(f"a stored meter is a whole number above 0, not {value!r}")
    return value


def counted(meters: Meters, kind: str, data: Mapping[str, object]) -> Meters:
    """``meters`` with one record of ``kind`` (its data ``data``) counted."""
    if kind == "close":
        return replace(meters, games=meters.games + 1)
    if kind == "no_roll":
        reason = data.get("reason")
        if not isinstance(reason, str):
            return meters
        return replace(
            meters, no_rolls={**meters.no_rolls, reason: meters.no_rolls.get(reason, 0) + 1}
        )
    if kind == "result_corrected":
        return replace(meters, corrections=meters.corrections + 1)
    if kind == "void":
        return replace(meters, round_voids=meters.round_voids + 1)
    if kind == "lid" and data.get("opened") is True:
        return replace(meters, lid_openings=meters.lid_openings + 1)
    if kind == "tamper_loop" and data.get("closed") is False:
        return replace(meters, tamper=meters.tamper + 1)
    if kind == "power_on":
        return replace(meters, power_ups=meters.power_ups + 1)
    if kind == "service_mode" and data.get("entered") is True:
        return replace(meters, service_mode=meters.service_mode + 1)
    return meters
