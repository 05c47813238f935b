"""What the audit log's records say, for the daemon that writes them and for the verifier and
recovery that read them back. Pure: no I/O.

``config_loaded`` carries the configuration's SHA-256 and its paytables, so that a verifier can
recompute every recorded payout without the file (the paytables in force are the last ones
recorded before a result).

A ``fault`` of the storage names what the failed commits took with them (:class:`Unrecorded`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.config import ODDS_STAKE_MAX, ODDS_WIN_MAX, Config
from controller.core.dice import Roll
from controller.core.digits import NumberError, parse_bounded_int, quoted
from controller.core.note import (
    ALG_COSIGNATURE_V1,
    SIGNATURE_DASH,
    Checkpoint,
    Cosigned,
    NoteError,
    Verifier,
    open_checkpoint,
    open_cosignature,
)
from controller.core.position import BETTING_POSITIONS, Game, seat
from controller.core.records import RecordDataError as RecordDataError  # noqa: PLC0414
from controller.core.result import RoundResult, result_of_number, result_of_roll
from controller.core.wagers import Odds, Paytable, Wager, outcomes
from controller.errors import ConfigError, GameRuleError


def paytables_record(paytables: Sequence[Paytable]) -> list[dict[str, object]]:
    return [
        {
            "name": table.name,
            "wager": str(table.wager),
            "condition": table.condition,
            "pays": {key: str(odds) for key, odds in sorted(table.pays.items())},
        }
        for table in paytables
    ]


def paytables_from_record(raw: object) -> tuple[Paytable, ...]:
    if not isinstance(raw, list):
        raise RecordDataError("paytables must be a list")
    tables = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"name", "wager", "condition", "pays"}:
            raise RecordDataError("a paytable has name, wager, condition and pays")
        pays: dict[str, Odds] = {}
        raw_pays = item["pays"]
        if not isinstance(raw_pays, dict):
            raise RecordDataError("paytable pays must be an object")
        for key, text in raw_pays.items():
            pays[key] = _odds(text)
        try:
            wager = Wager(item["wager"])
        except ValueError as exc:
            raise RecordDataError(f"unknown wager {item['wager']!r}") from exc
        condition = item["condition"]
        if condition is not None and not isinstance(condition, str):
            raise RecordDataError("paytable condition must be a string or null")
        tables.append(Paytable(str(item["name"]), wager, condition, pays))
    return tuple(tables)


def _odds(text: object) -> Odds:
    """Recorded odds ``"N to M"``, in the bounds a config may give them."""
    parts = str(text).split()
    if len(parts) != 3 or parts[1] != "to":
        raise RecordDataError(f"paytable odds {quoted(str(text))} are not 'N to M'")
    try:
        win = parse_bounded_int(parts[0], low=1, high=ODDS_WIN_MAX, what="win")
        stake = parse_bounded_int(parts[2], low=1, high=ODDS_STAKE_MAX, what="stake")
    except NumberError as exc:
        raise RecordDataError(f"paytable odds {quoted(str(text))}: {exc}") from None
    return Odds(win, stake)


def config_loaded_data(config: Config) -> dict[str, object]:
    """The data of the ``config_loaded`` record the daemon writes at start."""
    return {
        "sha256": config.source_sha256,
        "table": config.table.name,
        "game": str(config.table.game),
        "mode": str(config.table.mode),
        "modes": [str(m) for m in config.table.modes],  # current 621a.6(a): may switch to
        "rng_mode": str(config.rng.mode),
        "paytables": paytables_record(config.paytables),
    }


def bank_seat_of(label: object) -> int | None:
    """``"dealer"`` -> None, ``"seat 3"`` -> 3 (the labels the state machine records)."""
    if label == "dealer":
        return None
    if isinstance(label, str) and label.startswith("seat "):
        try:
            number = parse_bounded_int(label[5:], low=1, high=BETTING_POSITIONS, what="seat")
        except NumberError:
            pass
        else:
            return seat(number).index
    raise RecordDataError(f"bank {quoted(str(label))} is neither 'dealer' nor 'seat N'")


def roll_of(raw: object) -> Roll:
    if not isinstance(raw, dict) or set(raw) != {"red", "blue"}:
        raise RecordDataError("dice must be {red, blue}")
    red, blue = raw["red"], raw["blue"]
    if not isinstance(blue, list) or len(blue) != 2:
        raise RecordDataError("dice blue must be two faces")
    if not all(isinstance(face, int) and not isinstance(face, bool) for face in (red, *blue)):
        raise RecordDataError("dice faces must be whole numbers")
    return Roll(red, (blue[0], blue[1]))


_RESULT_ROUND_KEYS = ("round", "attempt")
# a result decided: discarded with its commit, never shown (write-ahead)
_DECIDED_KINDS = frozenset({"result", "result_corrected"})
MAX_UNRECORDED_NAMED = 32  # records named in a storage fault's detail; the rest are counted


def _whole(value: object) -> int | None:
    return value if type(value) is int else None


def _round_and_attempt(round_: int | None, attempt: int | None) -> str:
    said = [f"{word} {n}" for word, n in (("round", round_), ("attempt", attempt)) if n is not None]
    return " ".join(said) or "a round not named"


@dataclass(frozen=True, slots=True)
class Unrecorded:
    """What failed commits took with them, gathered until a storage fault that names it is
    recorded: each record's kind and round, the results decided and discarded (their round
    and attempt), and a count of the records past ``MAX_UNRECORDED_NAMED``. A disk that stays
    full fails the storage fault's own record too, and the next commit's: the fault that
    finally reaches the log names every loss since the last one recorded, not only the last
    step's (a result lost first, then a fault_cleared)."""

    records: tuple[tuple[str, int | None], ...] = ()
    decided: tuple[tuple[int | None, int | None], ...] = ()
    more: int = 0

    def add(self, batch: Sequence[tuple[object, Mapping[str, object]]]) -> Unrecorded:
        records, decided, more = list(self.records), list(self.decided), self.more
        for kind, data in batch:
            name = str(kind)
            round_ = _whole(data.get("round"))
            if len(records) < MAX_UNRECORDED_NAMED:
                records.append((name, round_))
            else:
                more += 1
            if name in _DECIDED_KINDS and len(decided) < MAX_UNRECORDED_NAMED:
                decided.append((round_, _whole(data.get("attempt"))))
        return Unrecorded(tuple(records), tuple(decided), more)

    def describe(self, *, discarded: bool = True) -> str:
        """``reading, reading, result in round 4; a result was decided and discarded (round 4
        attempt 2)``: the kinds in the order they were lost, those of one round together.
        ``discarded=False``: the commit may have reached the disk after all (the log holds
        more than was acknowledged), so a result is only said to have been decided."""
        groups: list[tuple[int | None, list[str]]] = []
        for name, round_ in self.records:
            if groups and groups[-1][0] == round_:
                groups[-1][1].append(name)
            else:
                groups.append((round_, [name]))
        parts = [
            ", ".join(names) + ("" if round_ is None else f" in round {round_}")
            for round_, names in groups
        ]
        if self.more:
            parts.append(f"{self.more} more records")
        if not self.decided:
            return "; ".join([*parts, "no result among them"])
        where = ", ".join(_round_and_attempt(r, a) for r, a in self.decided)
        said = "a result was" if len(self.decided) == 1 else f"{len(self.decided)} results were"
        fate = "decided and discarded" if discarded else "decided"
        return "; ".join([*parts, f"{said} {fate} ({where})"])


def recompute_result(data: Mapping[str, Any], paytables: Sequence[Paytable]) -> RoundResult:
    """The result that the recorded dice (or RNG number) give, by the one place that decides
    (controller/core/result.py). Raises :class:`RecordDataError` for data that cannot be a
    result."""
    try:
        game = Game(data["game"])
        bank_seat = bank_seat_of(data["bank"])
        if "dice" in data:
            # an RNG's virtual dice settle no side wager (current 621a.5(e)(2)-(4)); which
            # rounds those are, verify-log checks from the mode their bets closed in
            return result_of_roll(
                game,
                roll_of(data["dice"]),
                bank_seat=bank_seat,
                paytables=paytables,
                settles_wagers="wagers" in data,
            )
        count = data["count"]
        if not isinstance(count, int) or isinstance(count, bool):
            raise RecordDataError("count must be a whole number")
        return result_of_number(game, count, bank_seat=bank_seat)
    except KeyError as exc:
        raise RecordDataError(f"a result needs {exc.args[0]!r}") from exc
    except (GameRuleError, ConfigError, ValueError) as exc:
        if isinstance(exc, RecordDataError):
            raise
        raise RecordDataError(str(exc)) from exc


def result_as_recorded(data: Mapping[str, Any]) -> RoundResult:
    """The result exactly as recorded (its payouts included), to show it again after a
    restart: never re-drawn, never re-read, never re-settled with another paytable."""
    result = recompute_result(data, ())
    if result.roll is None or result.wagers is None:
        return result
    payouts = data.get("payouts", {})
    if not isinstance(payouts, dict):
        raise RecordDataError("payouts must be an object")
    return RoundResult(
        result.game,
        result.count,
        result.bank_seat,
        result.position,
        result.roll,
        outcomes(result.roll),
        payouts,
    )


def result_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a ``result`` record that ``RoundResult.as_record`` produces."""
    return {k: v for k, v in data.items() if k not in _RESULT_ROUND_KEYS}


# --- the witness's cosignature (controller/fleet) ----------------------------------------------

COSIGNED_KEYS = frozenset(
    {"round", "witness", "witness_key", "size", "root", "timestamp", "signature", "close"}
)


def cosigned_data(
    cosigner: Verifier, cosigned: Cosigned, signature: bytes, *, close: int
) -> dict[str, object]:
    """The data of a ``cosigned`` record but its round (the core adds it): the witness and its
    key, the checkpoint it vouched for (size, root), its timestamp, the signature line's bytes
    (key ID || timestamp || Ed25519 signature) and the round close it covers."""
    return {
        "witness": cosigner.name,
        "witness_key": str(cosigner),
        "size": cosigned.checkpoint.size,
        "root": base64.b64encode(cosigned.checkpoint.root_hash).decode(),
        "timestamp": cosigned.timestamp,
        "signature": base64.b64encode(signature).decode(),
        "close": close,
    }


ROLLBACK_EVIDENCE_KEYS = frozenset(
    {"round", "witness", "witness_key", "note", "size", "root", "timestamp", "log_size"}
)


def check_rollback_evidence(data: Mapping[str, Any], *, log_key: Verifier) -> None:
    """What a ``rollback_evidence`` record says holds by itself: its note is a checkpoint this
    log's own key signed, cosigned by the witness whose key it names, of the size, root and
    time it says, and of more records than the log held then or another history (the root is
    checked against the log by verify-log's shape: here, that the record is what it claims to
    be, so that nobody but the two keys could have made it). Raises :class:`RecordDataError`."""
    keys = set(data) - {"service"}
    if keys != ROLLBACK_EVIDENCE_KEYS:
        raise RecordDataError(
            f"a rollback_evidence record has {sorted(ROLLBACK_EVIDENCE_KEYS)}, not {sorted(keys)}"
        )
    note, key, size, log_size = data["note"], data["witness_key"], data["size"], data["log_size"]
    if not isinstance(note, str) or not isinstance(key, str):
        raise RecordDataError("a rollback_evidence record's note and witness key are text")
    if not all(type(v) is int and v >= 0 for v in (size, log_size, data["timestamp"])):
        raise RecordDataError("its size, log size and timestamp are whole numbers")
    try:
        cosigner = Verifier.parse(key, ALG_COSIGNATURE_V1)
        cosigned = open_cosignature(note, cosigner)
        signed = open_checkpoint(note, log_key)
    except NoteError as exc:
        raise RecordDataError(f"a rollback_evidence record does not verify: {exc}") from None
    checkpoint = cosigned.checkpoint
    root = base64.b64encode(checkpoint.root_hash).decode()
    if (
        signed != checkpoint
        or checkpoint.origin != log_key.name
        or cosigner.name != data["witness"]
        or (checkpoint.size, root, cosigned.timestamp) != (size, data["root"], data["timestamp"])
    ):
        raise RecordDataError(
            "a rollback_evidence record's witness, size, root or time is not its note's"
        )


def check_cosigned(data: Mapping[str, Any], *, seq: int, origin: str) -> None:
    """What a ``cosigned`` record says holds by itself: the witness's cosignature verifies with
    the key it names over the checkpoint of this log (``origin``) it names, made before the
    record, covering a round close within it. Raises :class:`RecordDataError`."""
    keys = set(data) - {"service"}
    if keys != COSIGNED_KEYS:
        raise RecordDataError(f"a cosigned record has {sorted(COSIGNED_KEYS)}, not {sorted(keys)}")
    size, close, timestamp = data["size"], data["close"], data["timestamp"]
    if not all(type(v) is int for v in (size, close, timestamp)):
        raise RecordDataError("a cosigned record's size, close and timestamp are whole numbers")
    if not 0 < close <= size < seq:
        raise RecordDataError(
            f"a cosigned record at {seq} names size {size} and close {close}: not 0 < close <="
            " size < its own sequence number"
        )
    witness, key, root, signature = (
        data["witness"],
        data["witness_key"],
        data["root"],
        data["signature"],
    )
    if not all(isinstance(v, str) for v in (witness, key, root, signature)):
        raise RecordDataError("a cosigned record's witness, key, root and signature are text")
    try:
        cosigner = Verifier.parse(key, ALG_COSIGNATURE_V1)
        root_hash = base64.b64decode(root, validate=True)
        checkpoint = Checkpoint(origin, size, root_hash)
        line = f"{SIGNATURE_DASH} {witness} {signature}\n"
        opened = open_cosignature(f"{checkpoint.text()}\n{line}", cosigner)
    except (NoteError, ValueError) as exc:
        raise RecordDataError(f"a cosigned record does not verify: {exc}") from None
    if cosigner.name != witness or len(root_hash) != 32 or opened.timestamp != timestamp:
        raise RecordDataError("a cosigned record's witness, root or time is not its signature's")
