"""Replay of the RNG's commit–reveal sessions from the audit log, and the records' format.

Pure: no I/O. ``verify-log`` passes every record of the log, in order, as ``(seq, kind, data)``
to :func:`verify_rng_records`; ``rng-replay`` does the same from an exported file. Each revealed
session is checked twice over: SHA-256 of the revealed seed material must equal the commitment
recorded (and shown on the table) before the session's first draw, and a fresh HMAC_DRBG
instantiated from that material, asked for each recorded draw with that draw's round identity as
additional input, must give every recorded number. A session not yet revealed (the one open
now) is checked for shape only; its numbers become provable at its reveal.

Record data (JSON-safe: str, int, bool, lists, dicts; bytes as lowercase hex; no floats):

``rng_commit`` — a session opens (before any of its draws)
    ``session``     str, 16 lowercase hex digits, unique in the log
    ``table``       str, the table's configured name (``table.name``)
    ``game``        ``"tiles"`` | ``"poker"``
    ``mode``        ``"position"`` | ``"dice"``
    ``positions``   int, the table's positions (8 tiles, 7 poker): a position draw is 1..positions
    ``max_rounds``  int, the most rounds this session may draw for
    ``algorithm``   ``"HMAC_DRBG-SHA-256"`` (NIST SP 800-90A Rev. 1 §10.1.2)
    ``commitment``  str, 64 hex: SHA-256(entropy ‖ nonce ‖ personalization)
    ``escrow``      the seed material sealed to the auditor's X25519 key: ``{"algorithm",
                    "recipient", "ephemeral", "ciphertext"}`` (``controller.core.rng_escrow``
                    states the construction). Absent from the records of older versions,
                    which kept the seed in a file instead

``rng_draw`` — one number, recorded before it is shown
    ``session``     str, the open session
    ``round``       int ≥ 1, ``attempt`` int ≥ 1: the round's identity
    ``mode``        as in the commitment
    ``number``      int, 1..positions (mode ``position``), or
    ``dice``        ``{"red": r, "blue": [b1, b2]}`` (mode ``dice``)

``rng_reveal`` — the session's seed material, after its last draw (at close, at the round limit,
at an orderly stop; ``"restart"``: a seed file an older version left, revealed at the next start)
    ``session``         str
    ``entropy``         str, 64 hex (256 bits from the operating system)
    ``nonce``           str, 32 hex (128 bits)
    ``personalization`` str, hex of :func:`personalization_for` (table, session)
    ``reason``          ``"close"`` | ``"max_rounds"`` | ``"restart"`` | ``"shutdown"``
                        | ``"shift_change"`` | ``"mode_switch"``

``rng_interrupted`` — the session ended unrevealed: the controller restarted (a power cut, a
crash) and its seed, kept in memory only, was gone; it draws no more, and the next session is
committed anew. Its seed is in its commitment's escrow, for the auditor (``rng-reveal``)
    ``session``         str
    ``reason``          ``"restart"``
    ``draws``           int ≥ 0, the draws the log holds for the session

Derivation (what a verifier in another language must do): instantiate HMAC_DRBG-SHA-256 with
(entropy, nonce, personalization); for each draw of the session in log order, let
``identity = round_identity(table, session, round, attempt)`` (ASCII) and scale by simple
discard (:func:`controller.core.drbg.uniform_below`): take ``ceil(bits(n-1)/8)`` bytes from
``Generate(that many bytes, additional_input=identity)``, big-endian, keep the low
``bits(n-1)`` bits, retry with the same identity while the value is ≥ n. Mode ``position``:
n = positions, the number is value + 1. Mode ``dice``: n = 216, red = value // 36 + 1,
first blue = value // 6 % 6 + 1, second blue = value % 6 + 1.

A session revealed by the auditor instead (``rng-reveal`` opens the escrow; ``verify-log
--rng-reveals``) is replayed in the same way: its seed must match the commitment and give every
recorded draw.

Round numbers only grow over the log's life (the audit log's recovery continues the count), so
draws come in increasing (round, attempt) order: a draw for a round and attempt already drawn,
or for an earlier one, is a second selection and fails verification. Memory stays bounded by
the draws of the sessions not yet revealed (open, or ended by a restart with a reveal from the
auditor to come), whatever the length of the log.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from controller.core.dice import Roll
from controller.core.drbg import (
    MIN_ENTROPY_BYTES,
    MIN_NONCE_BYTES,
    HmacDrbg,
    bound_source,
    number_in_range,
    virtual_roll,
)
from controller.core.evolve import replace
from controller.core.position import Game, table_cycle
from controller.core.records import RecordKind
from controller.core.rng_escrow import SealedSeed
from controller.core.state import RngMode
from controller.errors import ControllerError, EscrowError, LogIntegrityError

ALGORITHM = "HMAC_DRBG-SHA-256"
SESSION_ID_HEX = 16
REVEAL_REASONS = frozenset(
    {"close", "max_rounds", "restart", "shutdown", "shift_change", "mode_switch"}
)
INTERRUPT_REASONS = frozenset({"restart"})

Record = tuple[int, str, Mapping[str, object]]
Outcome = int | Roll
_Choice = TypeVar("_Choice", Game, RngMode)


def personalization_for(table: str, session: str) -> bytes:
    """The personalization string (SP 800-90A §8.7.1) naming the table and the session."""
    return f"paigow-controller rng v1 table={table} session={session}".encode("ascii")


def round_identity(table: str, session: str, round_number: int, attempt: int) -> bytes:
    """The additional input of a draw: binds the number to its table, session, round, attempt."""
    return (
        f"paigow-controller rng v1 table={table} session={session}"
        f" round={round_number} attempt={attempt}"
    ).encode("ascii")


def commitment_of(entropy: bytes, nonce: bytes, personalization: bytes) -> str:
    """SHA-256(entropy ‖ nonce ‖ personalization), lowercase hex. Entropy and nonce have fixed
    lengths (32 and 16 bytes), so the concatenation is unambiguous."""
    return hashlib.sha256(entropy + nonce + personalization).hexdigest()


def positions_of(game: Game) -> int:
    return len(table_cycle(game))


def draw_outcome(drbg: HmacDrbg, mode: RngMode, positions: int, identity: bytes) -> Outcome:
    """One draw, exactly as the session makes it and the verifier replays it."""
    source = bound_source(drbg, identity)
    if mode is RngMode.DICE:
        return virtual_roll(source)
    return number_in_range(positions, source)


def draw_fields(mode: RngMode, outcome: Outcome) -> dict[str, object]:
    """The ``number`` or ``dice`` field of an ``rng_draw`` record."""
    if isinstance(outcome, Roll):
        assert mode is RngMode.DICE
        return {"dice": outcome.as_record()}
    assert mode is RngMode.POSITION
    return {"number": outcome}


# --- the replay -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DrawReplay:
    seq: int
    round: int
    attempt: int
    outcome: Outcome

    def as_record(self) -> dict[str, object]:
        value: object = self.outcome.as_record() if isinstance(self.outcome, Roll) else self.outcome
        return {"seq": self.seq, "round": self.round, "attempt": self.attempt, "outcome": value}


@dataclass(frozen=True, slots=True)
class SessionReplay:
    """A revealed session whose commitment and every draw verified. ``reveal_seq`` is None
    for a session the auditor revealed from its escrow (no reveal in the log)."""

    session: str
    table: str
    mode: RngMode
    commit_seq: int
    reveal_seq: int | None
    draws: tuple[DrawReplay, ...]

    def as_record(self) -> dict[str, object]:
        return {
            "session": self.session,
            "table": self.table,
            "mode": str(self.mode),
            "commit_seq": self.commit_seq,
            "reveal_seq": self.reveal_seq,
            "draws": [d.as_record() for d in self.draws],
        }


@dataclass(frozen=True, slots=True)
class SeedReveal:
    """A session's seed material from outside the log: what the auditor opened from its
    escrow (``rng-reveal``), to be replayed like a reveal the log holds."""

    session: str
    entropy: bytes
    nonce: bytes
    personalization: bytes

    def __repr__(self) -> str:  # never the material itself
        return f"<seed reveal of RNG session {self.session}>"


@dataclass(frozen=True, slots=True)
class UnrevealedSession:
    """A session the log committed and never revealed: its escrow (None in the records of an
    older version) and where it ended, if the log says (its ``rng_interrupted``)."""

    session: str
    table: str
    commit_seq: int
    commitment: str
    escrow: SealedSeed | None
    draws: int
    interrupted_seq: int | None


@dataclass(slots=True)
class _Session:
    seq: int
    table: str
    mode: RngMode
    positions: int
    max_rounds: int
    commitment: str
    escrow: SealedSeed | None
    draws: list[DrawReplay] = field(default_factory=list)
    rounds: set[int] = field(default_factory=set)
    drawn: int = 0  # the draws recorded (``draws`` is emptied once they need no replay)
    reveal_seq: int | None = None
    interrupted_seq: int | None = None


class _Bad(ControllerError):
    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq
        self.message = message


def verify_rng_records(records: Iterable[Record]) -> int:
    """Replay every revealed RNG session of the whole log; the number of sessions verified.

    Raises :class:`LogIntegrityError` naming the first (lowest ``seq``) bad record."""
    return len(replay_sessions(records, keep_draws=False))


@dataclass(slots=True)
class _LastDraw:
    key: tuple[int, int] = (0, 0)
    seq: int = 0


def replay_sessions(records: Iterable[Record], *, keep_draws: bool = True) -> list[SessionReplay]:
    """Every revealed session, replayed, in the order of their reveals (with their draws when
    ``keep_draws``). Raises :class:`LogIntegrityError` naming the first bad record and why."""
    replayer = SessionReplayer(keep_draws=keep_draws)
    for seq, kind, data in records:
        replayer.feed(seq, kind, data)
    return replayer.finish()


class SessionReplayer:
    """The replay fed record by record (verify-log reads the log once and feeds it the RNG's
    records as they pass); ``finish`` raises naming the first bad record, if any.

    ``replay_later``: the sessions ended by a restart whose draws are kept for a reveal given
    to ``finish`` (None: every one's); the others' are dropped at their end, so that memory
    stays bounded by the sessions still to replay."""

    def __init__(
        self, *, keep_draws: bool = True, replay_later: Container[str] | None = None
    ) -> None:
        self._keep_draws = keep_draws
        self._replay_later = replay_later
        self._sessions: dict[str, _Session] = {}
        self._drawn = _LastDraw()
        self._failures: list[_Bad] = []
        self.verified: list[SessionReplay] = []
        self.revealed_by_auditor: list[SessionReplay] = []

    def feed(self, seq: int, kind: str, data: Mapping[str, object]) -> None:
        try:
            if kind == RecordKind.RNG_COMMIT:
                _commit(seq, data, self._sessions)
            elif kind == RecordKind.RNG_DRAW:
                _draw(seq, data, self._sessions, self._drawn)
            elif kind == RecordKind.RNG_REVEAL:
                replay = _reveal(seq, data, self._sessions, self._failures)
                if replay is not None:
                    self.verified.append(self._kept(replay))
            elif kind == RecordKind.RNG_INTERRUPTED:
                ended = _interrupted(seq, data, self._sessions)
                if self._replay_later is not None and ended.session not in self._replay_later:
                    ended.state.draws, ended.state.rounds = [], set()
        except _Bad as bad:
            self._failures.append(bad)

    def _kept(self, replay: SessionReplay) -> SessionReplay:
        return replay if self._keep_draws else replace(replay, draws=())

    def unrevealed(self) -> list[UnrevealedSession]:
        """The sessions committed and not revealed so far, in the order of their commitments."""
        return [
            UnrevealedSession(
                session_id,
                s.table,
                s.seq,
                s.commitment,
                s.escrow,
                s.drawn,
                s.interrupted_seq,
            )
            for session_id, s in self._sessions.items()
            if s.reveal_seq is None
        ]

    def reveal_seq(self, session: str) -> int | None:
        """The record that revealed this session in the log, if any."""
        found = self._sessions.get(session)
        return None if found is None else found.reveal_seq

    def is_committed(self, session: str) -> bool:
        return session in self._sessions

    def finish(self, reveals: Iterable[SeedReveal] = ()) -> list[SessionReplay]:
        """The sessions revealed in the log, replayed; ``reveals`` (the auditor's, from the
        escrow) are replayed likewise, into :attr:`revealed_by_auditor`. Raises
        :class:`LogIntegrityError` naming the first bad record."""
        strangers = []
        for reveal in reveals:
            session = self._sessions.get(reveal.session)
            if session is None:
                strangers.append(reveal.session)
                continue
            if session.reveal_seq is None and len(session.draws) != session.drawn:
                raise ValueError(f"the draws of RNG session {reveal.session} were not kept")
            replay = _replay_seed(
                reveal.session,
                session,
                reveal.entropy,
                reveal.nonce,
                reveal.personalization,
                blame=session.seq,
                source="the auditor's reveal",
                failures=self._failures,
            )
            if replay is not None and session.reveal_seq is None:
                self.revealed_by_auditor.append(self._kept(replay))
        if self._failures:
            first = min(self._failures, key=lambda bad: bad.seq)
            raise LogIntegrityError(first.seq, first.message)
        if strangers:
            raise LogIntegrityError(
                None, f"the auditor's reveals name RNG session {strangers[0]}, never committed here"
            )
        return self.verified


def _commit(seq: int, data: Mapping[str, object], sessions: dict[str, _Session]) -> None:
    session = _session_id(seq, data)
    if session in sessions:
        raise _Bad(
            seq, f"RNG session {session} committed twice (first in record {sessions[session].seq})"
        )
    table = _str(seq, data, "table")
    game = _choice(seq, data, "game", Game)
    mode = _choice(seq, data, "mode", RngMode)
    positions = _int(seq, data, "positions")
    if positions != positions_of(game):
        raise _Bad(seq, f"RNG commitment: {positions} positions is not the {game} table's")
    max_rounds = _int(seq, data, "max_rounds")
    if _str(seq, data, "algorithm") != ALGORITHM:
        raise _Bad(seq, f"RNG commitment: algorithm is not {ALGORITHM}")
    commitment = _hex(seq, data, "commitment", 32)
    escrow = None
    if "escrow" in data:
        try:
            escrow = SealedSeed.from_record(data["escrow"])
        except EscrowError as exc:
            raise _Bad(seq, f"RNG commitment: {exc}") from None
    sessions[session] = _Session(seq, table, mode, positions, max_rounds, commitment, escrow)


def _draw(
    seq: int,
    data: Mapping[str, object],
    sessions: dict[str, _Session],
    drawn: _LastDraw,
) -> None:
    session_id = _session_id(seq, data)
    session = sessions.get(session_id)
    if session is None:
        raise _Bad(seq, f"RNG draw outside any committed session ({session_id})")
    if session.reveal_seq is not None:
        raise _Bad(
            seq, f"RNG draw in session {session_id} after its reveal (record {session.reveal_seq})"
        )
    if session.interrupted_seq is not None:
        raise _Bad(
            seq,
            f"RNG draw in session {session_id} after it ended with a restart (record"
            f" {session.interrupted_seq})",
        )
    round_number = _int(seq, data, "round")
    attempt = _int(seq, data, "attempt")
    if _choice(seq, data, "mode", RngMode) is not session.mode:
        raise _Bad(seq, f"RNG draw mode differs from session {session_id}'s commitment")
    key = (round_number, attempt)
    if key <= drawn.key:
        last_round, last_attempt = drawn.key
        raise _Bad(
            seq,
            f"second RNG selection: round {round_number} attempt {attempt} after round"
            f" {last_round} attempt {last_attempt} was drawn (record {drawn.seq})",
        )
    drawn.key, drawn.seq = key, seq
    session.rounds.add(round_number)
    if len(session.rounds) > session.max_rounds:
        raise _Bad(seq, f"RNG session {session_id} drew for more than {session.max_rounds} rounds")
    outcome = _outcome(seq, data, session)
    session.draws.append(DrawReplay(seq, round_number, attempt, outcome))
    session.drawn += 1


def _outcome(seq: int, data: Mapping[str, object], session: _Session) -> Outcome:
    """What a draw record says was drawn: dice in a dice session, else a number that is a
    position of the session's table."""
    if session.mode is RngMode.DICE:
        return _dice(seq, data.get("dice"))
    number = _int(seq, data, "number")
    if not 1 <= number <= session.positions:
        raise _Bad(seq, f"RNG draw: number {number} is not 1..{session.positions}")
    return number


def _dice(seq: int, dice: object) -> Roll:
    try:
        if not isinstance(dice, Mapping):
            raise TypeError
        red, blue = dice["red"], dice["blue"]
        if not (isinstance(blue, list) and len(blue) == 2):
            raise TypeError
        faces = (red, blue[0], blue[1])
        if not all(isinstance(f, int) and not isinstance(f, bool) for f in faces):
            raise TypeError
        return Roll(faces[0], (faces[1], faces[2]))
    except (TypeError, KeyError, ControllerError):
        raise _Bad(seq, "RNG draw: dice is not {red, blue: [b1, b2]} with faces 1..6") from None


@dataclass(frozen=True, slots=True)
class _Ended:
    session: str
    state: _Session


def _interrupted(seq: int, data: Mapping[str, object], sessions: dict[str, _Session]) -> _Ended:
    session_id = _session_id(seq, data)
    session = sessions.get(session_id)
    if session is None:
        raise _Bad(seq, f"RNG interruption of a session never committed ({session_id})")
    if session.reveal_seq is not None:
        raise _Bad(
            seq,
            f"RNG session {session_id} interrupted after its reveal (record {session.reveal_seq})",
        )
    if session.interrupted_seq is not None:
        raise _Bad(
            seq,
            f"RNG session {session_id} interrupted twice (first in record"
            f" {session.interrupted_seq})",
        )
    session.interrupted_seq = seq
    if _str(seq, data, "reason") not in INTERRUPT_REASONS:
        reasons = ", ".join(sorted(INTERRUPT_REASONS))
        raise _Bad(seq, f"RNG interruption: reason is not one of {reasons}")
    draws = data.get("draws")
    if not isinstance(draws, int) or isinstance(draws, bool) or draws < 0:
        raise _Bad(seq, "RNG record: draws is missing or not a whole number ≥ 0")
    if draws != session.drawn:
        raise _Bad(
            seq,
            f"RNG interruption: session {session_id} ended with {draws} draw(s), the log holds"
            f" {session.drawn}",
        )
    return _Ended(session_id, session)


def _reveal(
    seq: int,
    data: Mapping[str, object],
    sessions: dict[str, _Session],
    failures: list[_Bad],
) -> SessionReplay | None:
    session_id = _session_id(seq, data)
    session = sessions.get(session_id)
    if session is None:
        raise _Bad(seq, f"RNG reveal of a session never committed ({session_id})")
    if session.reveal_seq is not None:
        raise _Bad(
            seq, f"RNG session {session_id} revealed twice (first in record {session.reveal_seq})"
        )
    if session.interrupted_seq is not None:
        raise _Bad(
            seq,
            f"RNG reveal of session {session_id}, which ended unrevealed with a restart (record"
            f" {session.interrupted_seq})",
        )
    session.reveal_seq = seq
    if _str(seq, data, "reason") not in REVEAL_REASONS:
        raise _Bad(seq, f"RNG reveal: reason is not one of {', '.join(sorted(REVEAL_REASONS))}")
    entropy = bytes.fromhex(_hex(seq, data, "entropy", MIN_ENTROPY_BYTES))
    nonce = bytes.fromhex(_hex(seq, data, "nonce", MIN_NONCE_BYTES))
    personalization = bytes.fromhex(_hex(seq, data, "personalization", None))
    replay = _replay_seed(
        session_id,
        session,
        entropy,
        nonce,
        personalization,
        blame=seq,
        source="RNG reveal",
        failures=failures,
    )
    session.draws, session.rounds = [], set()  # replayed: memory stays bounded
    return replay


def _replay_seed(
    session_id: str,
    session: _Session,
    entropy: bytes,
    nonce: bytes,
    personalization: bytes,
    *,
    blame: int,
    source: str,
    failures: list[_Bad],
) -> SessionReplay | None:
    """The seed checked against the commitment (a mismatch blames record ``blame``), then
    every recorded draw replayed from it (a mismatch blames the draw)."""
    refused = _seed_refused(session_id, session, entropy, nonce, personalization)
    if refused is not None:
        failures.append(_Bad(blame, f"{source}: {refused}"))
        return None
    not_replayed = _not_replayed(session_id, session, HmacDrbg(entropy, nonce, personalization))
    failures.extend(not_replayed)
    if not_replayed:
        return None
    return SessionReplay(
        session_id,
        session.table,
        session.mode,
        session.seq,
        session.reveal_seq,
        tuple(session.draws),
    )


def _seed_refused(
    session_id: str, session: _Session, entropy: bytes, nonce: bytes, personalization: bytes
) -> str | None:
    """Why the seed is not the one the session committed to (None: it is)."""
    if personalization != personalization_for(session.table, session_id):
        return f"personalization does not name table {session.table} and session {session_id}"
    if (
        len(entropy) != MIN_ENTROPY_BYTES
        or len(nonce) != MIN_NONCE_BYTES
        or not (
            hmac.compare_digest(commitment_of(entropy, nonce, personalization), session.commitment)
        )
    ):
        return (
            f"the seed material of session {session_id} does not match its"
            f" commitment in record {session.seq}"
        )
    return None


def _not_replayed(session_id: str, session: _Session, drbg: HmacDrbg) -> list[_Bad]:
    """Each recorded draw of the session that the seed's generator does not give again."""
    failures = []
    for draw in session.draws:
        identity = round_identity(session.table, session_id, draw.round, draw.attempt)
        replayed = draw_outcome(drbg, session.mode, session.positions, identity)
        if replayed != draw.outcome:
            failures.append(
                _Bad(
                    draw.seq,
                    f"RNG draw does not replay: recorded {_show(draw.outcome)}, the revealed seed"
                    f" of session {session_id} gives {_show(replayed)}",
                )
            )
    return failures


def _show(outcome: Outcome) -> str:
    if isinstance(outcome, Roll):
        return "dice " + "-".join(str(f) for f in outcome.faces)
    return f"number {outcome}"


# --- field checks ---------------------------------------------------------------------------


def _session_id(seq: int, data: Mapping[str, object]) -> str:
    value = _str(seq, data, "session")
    if len(value) != SESSION_ID_HEX or not _is_lower_hex(value):
        raise _Bad(
            seq, f"RNG record: session {value!r} is not {SESSION_ID_HEX} lowercase hex digits"
        )
    return value


def _str(seq: int, data: Mapping[str, object], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _Bad(seq, f"RNG record: {key} is missing or not a string")
    return value


def _int(seq: int, data: Mapping[str, object], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _Bad(seq, f"RNG record: {key} is missing or not a whole number ≥ 1")
    return value


def _choice(seq: int, data: Mapping[str, object], key: str, kind: type[_Choice]) -> _Choice:
    value = _str(seq, data, key)
    try:
        return kind(value)
    except ValueError:
        raise _Bad(seq, f"RNG record: {key} {value!r} is not one of {', '.join(kind)}") from None


def _hex(seq: int, data: Mapping[str, object], key: str, n_bytes: int | None) -> str:
    value = _str(seq, data, key)
    if (
        not _is_lower_hex(value)
        or len(value) % 2
        or (n_bytes is not None and len(value) != 2 * n_bytes)
    ):
        size = "" if n_bytes is None else f" of {n_bytes} bytes"
        raise _Bad(seq, f"RNG record: {key} is not lowercase hex{size}")
    return value


def _is_lower_hex(value: str) -> bool:
    return all(c in "0123456789abcdef" for c in value)
