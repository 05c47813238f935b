"""RNG sessions with commit–reveal: what the daemon calls to open, draw and close.

A session is a dealer shift, or at most ``rng.session_max_rounds`` rounds. At open it takes 256
bits of entropy and a 128-bit nonce from the operating system (``getrandom``: it blocks until
the kernel's pool is seeded, the "uncontrolled event" of 25 CFR 547.14 and AGCO 5.1),
instantiates HMAC_DRBG with a personalization naming the table and the session, records the
commitment SHA-256(entropy ‖ nonce ‖ personalization) and returns it for the display. Each draw
passes the round's identity as additional input and is recorded before it is returned, so
before anything can show it. At close, at the round limit, or at the first open after a
restart, the seed material is revealed in the log; anyone can then replay every draw
(``controller.core.rng_replay``).

Until its reveal the seed material lives in one file in the state directory, mode 0600, written
and fsynced before the commitment is recorded, so a power cut never loses the ability to prove a
committed session. It is never shown, logged or exported before its reveal; the file is removed
once the reveal is recorded.

When a session opens (:meth:`RngSessionManager.prepare`): when bets open, never inside a draw,
so that the commitment is in the log, and on the table display, before the bets of any round it
draws for are closed (621a.8(a)(1)). A draw never opens a session.

After a restart (AGCO 5.1: an interrupted selection is kept, never replaced) the session that
was open is taken up again: its seed file is checked against the commitment the log recorded,
the DRBG is instantiated from it and every draw the log holds for it is replayed, so the DRBG is
exactly where it was. A number recorded for a round and attempt is returned again
(``is_repeat``), never re-drawn; a draw made but not recorded before the power cut comes out
again the same, since the DRBG state and the round's identity are the same. A session that
cannot be taken up (its seed file missing, or not matching its recorded commitment) is an RNG
fault for the supervisor; it is never silently replaced during a round.

The daemon's part (through :class:`RngPort`, the control loop's ``RngDraws`` port)::

    rng.prepare()                        # on PREPARE_RNG, when bets open: a committed session
                                         # with rounds left (KAT, resume or open, roll over)
    draw = rng.draw(round_number, attempt)   # on DRAW_NUMBER: recorded before it returns
    rng.close("shutdown")                # on CLOSE_RNG at an orderly stop: the reveal
    # RngError (RngSelfTestFailure included) -> Fault.RNG_FAILURE: the RNG mode is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.core.dice import Roll
from controller.core.drbg import MIN_ENTROPY_BYTES, MIN_NONCE_BYTES, HmacDrbg, known_answer_test
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.rng_replay import (
    ALGORITHM,
    SESSION_ID_HEX,
    Outcome,
    Record,
    commitment_of,
    draw_fields,
    draw_outcome,
    personalization_for,
    positions_of,
    round_identity,
)
from controller.core.state import RngMode
from controller.errors import RngError, RngSelfTestFailure
from controller.files import fsync_dir
from controller.ports import AuditLog

SEED_FILE_PREFIX = "rng-seed-"
SEED_FILE_SUFFIX = ".json"
SEED_FILE_MODE = 0o600

EntropySource = Callable[[int], bytes]


def os_entropy(n_bytes: int) -> bytes:
    """``n_bytes`` from the kernel's CSPRNG; ``getrandom`` blocks until it is seeded."""
    getrandom = getattr(os, "getrandom", None)
    if getrandom is None:  # pragma: no cover - not Linux
        return os.urandom(n_bytes)
    data = b""
    while len(data) < n_bytes:
        data += getrandom(n_bytes - len(data))
    return data


@dataclass(frozen=True, slots=True)
class Commitment:
    """What the table display shows when a session opens: the session and its commitment."""

    session: str
    commitment: str
    seq: int

    def as_display(self) -> dict[str, object]:
        return {"rng_session": self.session, "rng_commitment": self.commitment}


@dataclass(frozen=True, slots=True)
class RngDraw:
    """One recorded draw: ``number`` (mode position) or ``roll`` (mode dice).

    ``is_repeat`` is true when the number was recorded before (a restart) and is shown again."""

    session: str
    round: int
    attempt: int
    number: int | None
    roll: Roll | None
    seq: int
    is_repeat: bool = False


@dataclass(slots=True)
class _OpenSession:
    session: str
    drbg: HmacDrbg
    commitment: Commitment
    rounds: set[int] = field(default_factory=set)
    is_broken: bool = False  # a draw failed after the DRBG moved on: no more draws


@dataclass(slots=True)
class _Pending:
    """A session the log holds as committed and not yet revealed, with its recorded draws."""

    seq: int
    data: Mapping[str, object]
    draws: list[RngDraw] = field(default_factory=list)

    def rounds(self) -> set[int]:
        return {draw.round for draw in self.draws}


@dataclass(frozen=True, slots=True)
class _SeedMaterial:
    session: str
    table: str
    entropy: bytes
    nonce: bytes
    personalization: bytes
    commitment: str

    def as_file(self) -> bytes:
        return json.dumps(
            {
                "format": 1,
                "session": self.session,
                "table": self.table,
                "entropy": self.entropy.hex(),
                "nonce": self.nonce.hex(),
                "personalization": self.personalization.hex(),
                "commitment": self.commitment,
            },
            sort_keys=True,
        ).encode("ascii")

    def __repr__(self) -> str:  # never the material itself
        return f"<seed material of RNG session {self.session}>"


class RngSessionManager:
    """Opens, draws from and reveals the RNG's sessions. Not thread-safe: the daemon's one
    control thread owns it."""

    def __init__(
        self,
        *,
        state_dir: Path,
        log: AuditLog,
        table: str,
        game: Game,
        mode: RngMode,
        max_rounds: int,
        records: Iterable[Record],
        entropy_source: EntropySource = os_entropy,
        drbg_class: type[HmacDrbg] = HmacDrbg,
        lookup: Callable[[str, bytes], bool] | None = None,
    ) -> None:
        """``records``: the RNG records the log holds (at least those of the last sessions);
        ``lookup(kind, fragment)``: whether a record of that kind holds those bytes, to look up
        a session older than ``records`` (a seed file left over from long ago)."""
        if not table or not all(c.isascii() and (c.isalnum() or c in "-_") for c in table):
            raise RngError(f"table name {table!r} is not letters, digits, '-' or '_'")
        if max_rounds < 1:
            raise RngError(f"session_max_rounds {max_rounds} is below 1")
        self._state_dir = state_dir
        self._log = log
        self._table = table
        self._game = game
        self._mode = mode
        self._positions = positions_of(game)
        self._max_rounds = max_rounds
        self._entropy_source = entropy_source
        self._drbg_class = drbg_class
        self._lookup = lookup
        self._session: _OpenSession | None = None
        self._committed: set[str] = set()
        self._revealed: set[str] = set()
        self._pending: dict[str, _Pending] = {}  # committed, not yet revealed, as the log says
        self._abandoned: set[str] = set()  # could not be taken up: never drawn from again
        self._unconfirmed: set[str] = set()  # commit append raised: the log may or may not hold it
        self._recorded: dict[tuple[int, int], RngDraw] = {}  # the latest round's draws
        self._last_drawn: tuple[int, int] | None = None
        self._last_entropy: bytes | None = None
        for seq, kind, data in records:
            self._learn(seq, kind, data)

    # --- what the log already holds ----------------------------------------------------------

    def _learn(self, seq: int, kind: str, data: Mapping[str, object]) -> None:
        session = data.get("session")
        if not isinstance(session, str):
            return
        if kind == RecordKind.RNG_COMMIT:
            self._committed.add(session)
            self._pending[session] = _Pending(seq, data)
        elif kind == RecordKind.RNG_REVEAL:
            self._revealed.add(session)
            self._pending.pop(session, None)
        elif kind == RecordKind.RNG_DRAW:
            round_number, attempt = data.get("round"), data.get("attempt")
            if not isinstance(round_number, int) or not isinstance(attempt, int):
                return
            number, roll = _outcome_of_record(data)
            draw = RngDraw(session, round_number, attempt, number, roll, seq)
            self._remember(draw)
            pending = self._pending.get(session)
            if pending is not None:
                pending.draws.append(draw)

    def _remember(self, draw: RngDraw) -> None:
        key = (draw.round, draw.attempt)
        if self._last_drawn is None or draw.round > self._last_drawn[0]:
            self._recorded = {}  # only the latest round can be the one interrupted
        self._recorded[key] = draw
        if self._last_drawn is None or key > self._last_drawn:
            self._last_drawn = key

    def recorded_draw(self, round_number: int, attempt: int) -> RngDraw | None:
        """The draw already recorded for this round and attempt (of the latest round drawn)."""
        draw = self._recorded.get((round_number, attempt))
        return None if draw is None else replace(draw, is_repeat=True)

    # --- the session's life ----------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._session is not None

    @property
    def commitment(self) -> Commitment | None:
        return None if self._session is None else self._session.commitment

    def prepare(self) -> Commitment:
        """Before bets close: a committed session with rounds left. The one open before a
        restart is taken up again; a session at its round limit is revealed and the next one
        committed. Raises :class:`RngError` (the RNG mode is refused until cleared)."""
        if self._session is None:
            resumable = self._resumable(needs_rounds=True)
            if resumable is not None:
                self._resume(resumable)
            else:
                self.open()
        elif self.rounds_left() <= 0:
            self.close("max_rounds")
            self.open()
        assert self._session is not None
        return self._session.commitment

    def _resumable(self, *, needs_rounds: bool) -> str | None:
        """The session the log says was open (the newest committed and not revealed), if it
        is this table's and mode's and (``needs_rounds``) may still draw for a new round."""
        candidates = [s for s in self._pending if s not in self._abandoned]
        if not candidates:
            return None
        session = max(candidates, key=lambda s: self._pending[s].seq)
        pending = self._pending[session]
        if pending.data.get("table") != self._table or pending.data.get("mode") != self._mode:
            return None
        if pending.data.get("game") != self._game:
            return None
        if needs_rounds and len(pending.rounds()) >= self._max_rounds:
            return None
        return session

    def _resume(self, session: str) -> None:
        """Take up a session the log holds as open: its seed checked against the recorded
        commitment, the DRBG replayed through every recorded draw."""
        pending = self._pending[session]
        path = self._seed_path(session)
        try:
            if not path.exists():
                raise RngError(
                    f"the seed file of RNG session {session} (committed in record"
                    f" {pending.seq}) is missing: its numbers can be neither drawn nor proven"
                )
            material = self._read_material(path)
            known_answer_test(self._drbg_class)
            drbg = self._drbg_class(material.entropy, material.nonce, material.personalization)
            for draw in pending.draws:
                identity = round_identity(self._table, session, draw.round, draw.attempt)
                replayed = draw_outcome(drbg, self._mode, self._positions, identity)
                if _split(replayed) != (draw.number, draw.roll):
                    raise RngError(
                        f"the seed of RNG session {session} does not give the number recorded"
                        f" in record {draw.seq}"
                    )
        except RngError:
            self._abandon(session)
            raise
        shown = Commitment(session, material.commitment, pending.seq)
        self._session = _OpenSession(session, drbg, shown, rounds=pending.rounds())

    def _abandon(self, session: str) -> None:
        """Never draw from this session again; its seed file is kept aside for inspection."""
        self._abandoned.add(session)
        path = self._seed_path(session)
        if path.exists():
            try:
                path.rename(path.with_name(path.name + ".rejected"))
                fsync_dir(self._state_dir)
            except OSError as exc:
                raise RngError(f"cannot set aside the seed file {path.name}: {exc}") from exc

    def open(self) -> Commitment:
        """Self-test, reveal any interrupted session, then open a new one and record its
        commitment. Raises :class:`RngSelfTestFailure` (the RNG mode is refused) or
        :class:`RngError`."""
        if self._session is not None:
            raise RngError(f"RNG session {self._session.session} is already open")
        known_answer_test(self._drbg_class)  # SP 800-90A §11.3, before any use
        self._reveal_pending("restart")
        material = self._fresh_material()
        drbg = self._drbg_class(material.entropy, material.nonce, material.personalization)
        self._keep(material)
        self._unconfirmed.add(material.session)
        seq = self._log.append(
            RecordKind.RNG_COMMIT,
            {
                "session": material.session,
                "table": self._table,
                "game": str(self._game),
                "mode": str(self._mode),
                "positions": self._positions,
                "max_rounds": self._max_rounds,
                "algorithm": ALGORITHM,
                "commitment": material.commitment,
            },
        )
        self._unconfirmed.discard(material.session)
        self._committed.add(material.session)
        self._pending[material.session] = _Pending(seq, {"commitment": material.commitment})
        shown = Commitment(material.session, material.commitment, seq)
        self._session = _OpenSession(material.session, drbg, shown)
        return shown

    def draw(self, round_number: int, attempt: int) -> RngDraw:
        """The number (or dice) of this round and attempt, recorded before it is returned.

        A number already recorded for them is returned again and never re-drawn (no second
        selection); a round before the last one drawn is refused."""
        if round_number < 1 or attempt < 1:
            raise RngError(f"round {round_number} attempt {attempt}: both count from 1")
        recorded = self.recorded_draw(round_number, attempt)
        if recorded is not None:
            if recorded.number is None and recorded.roll is None:
                raise RngError(f"the recorded draw of round {round_number} is unreadable")
            return recorded
        key = (round_number, attempt)
        if self._last_drawn is not None and key < self._last_drawn:
            last_round, last_attempt = self._last_drawn
            raise RngError(
                f"round {round_number} attempt {attempt} comes before the last draw"
                f" (round {last_round} attempt {last_attempt}): no draw for an earlier round"
            )
        session = self._session
        if session is None:
            # After a restart with a draw pending: the session committed before bets closed.
            resumable = self._resumable(needs_rounds=False)
            if resumable is None:
                raise RngError(
                    "no RNG session is open: a session is committed when bets open, never in a draw"
                )
            self._resume(resumable)
            session = self._session
            assert session is not None
        if session.is_broken:
            raise RngError(f"RNG session {session.session} cannot draw after a failed draw")
        if round_number not in session.rounds and len(session.rounds) >= self._max_rounds:
            raise RngError(
                f"RNG session {session.session} has drawn for its {self._max_rounds} rounds;"
                " the next session is committed when bets open"
            )
        identity = round_identity(self._table, session.session, round_number, attempt)
        session.is_broken = True  # until the draw is recorded: the DRBG has moved on
        outcome = draw_outcome(session.drbg, self._mode, self._positions, identity)
        data: dict[str, object] = {
            "session": session.session,
            "round": round_number,
            "attempt": attempt,
            "mode": str(self._mode),
            **draw_fields(self._mode, outcome),
        }
        seq = self._log.append(RecordKind.RNG_DRAW, data)
        session.is_broken = False
        session.rounds.add(round_number)
        number, roll = _split(outcome)
        draw = RngDraw(session.session, round_number, attempt, number, roll, seq)
        self._remember(draw)
        return draw

    def rounds_left(self) -> int:
        """Rounds the open session may still draw for (0 when none is open)."""
        if self._session is None:
            return 0
        return self._max_rounds - len(self._session.rounds)

    def rollover_if_due(self) -> Commitment | None:
        """Between rounds: reveal the session at its round limit and open the next, so that the
        new commitment is shown before its first draw. None when nothing changed."""
        if self._session is None or self.rounds_left() > 0:
            return None
        self.close("max_rounds")
        return self.open()

    def close(self, reason: str = "close") -> None:
        """Reveal the open session's seed material in the log and forget it, and with it any
        session still unrevealed from before a restart (its numbers are all recorded)."""
        session = self._session
        if session is not None:
            self._session = None
            material = self._read_material(self._seed_path(session.session))
            self._reveal(material, reason)
        self._reveal_pending(reason)

    # --- the seed file -------------------------------------------------------------------

    def _fresh_material(self) -> _SeedMaterial:
        entropy = self._entropy_source(MIN_ENTROPY_BYTES)
        nonce = self._entropy_source(MIN_NONCE_BYTES)
        session = self._entropy_source(SESSION_ID_HEX // 2).hex()
        if len(entropy) != MIN_ENTROPY_BYTES or len(nonce) != MIN_NONCE_BYTES:
            raise RngError("the operating system gave fewer random bytes than asked")
        # A health check on the source (SP 800-90B §4.4 in spirit): a stuck source repeats.
        if entropy == self._last_entropy or len(set(entropy)) == 1:
            raise RngSelfTestFailure("the operating system's entropy source repeats itself")
        self._last_entropy = entropy
        if session in self._committed:
            raise RngSelfTestFailure(f"session id {session} drawn twice")
        personalization = personalization_for(self._table, session)
        commitment = commitment_of(entropy, nonce, personalization)
        return _SeedMaterial(session, self._table, entropy, nonce, personalization, commitment)

    def _seed_path(self, session: str) -> Path:
        return self._state_dir / f"{SEED_FILE_PREFIX}{session}{SEED_FILE_SUFFIX}"

    def _keep(self, material: _SeedMaterial) -> None:
        """Write the seed file: created 0600 (never wider, whatever the umask), fsynced, and
        the directory fsynced, before the commitment is recorded."""
        path = self._seed_path(material.session)
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(path, flags, SEED_FILE_MODE)
        except OSError as exc:
            raise RngError(f"cannot create the RNG seed file in {self._state_dir}: {exc}") from exc
        try:
            view = memoryview(material.as_file())
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise RngError(f"cannot write the RNG seed file: {exc}") from exc
        os.close(fd)
        fsync_dir(self._state_dir)

    def _read_material(self, path: Path) -> _SeedMaterial:
        try:
            raw = json.loads(path.read_bytes())
            material = _SeedMaterial(
                session=str(raw["session"]),
                table=str(raw["table"]),
                entropy=bytes.fromhex(raw["entropy"]),
                nonce=bytes.fromhex(raw["nonce"]),
                personalization=bytes.fromhex(raw["personalization"]),
                commitment=str(raw["commitment"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RngError(f"RNG seed file {path.name} is unreadable: {exc!s}") from exc
        if commitment_of(material.entropy, material.nonce, material.personalization) != (
            material.commitment
        ):
            raise RngError(f"RNG seed file {path.name} does not match its commitment")
        pending = self._pending.get(material.session)
        if material.session != path.name[len(SEED_FILE_PREFIX) : -len(SEED_FILE_SUFFIX)] or (
            pending is not None and pending.data.get("commitment") != material.commitment
        ):
            raise RngError(
                f"RNG seed file {path.name} is not the seed of the session the log committed"
            )
        return material

    def _reveal(self, material: _SeedMaterial, reason: str) -> None:
        self._log.append(
            RecordKind.RNG_REVEAL,
            {
                "session": material.session,
                "entropy": material.entropy.hex(),
                "nonce": material.nonce.hex(),
                "personalization": material.personalization.hex(),
                "reason": reason,
            },
        )
        self._revealed.add(material.session)
        self._pending.pop(material.session, None)
        self._forget(material.session)

    def _forget(self, session: str) -> None:
        self._seed_path(session).unlink(missing_ok=True)
        fsync_dir(self._state_dir)

    def _learn_old(self, session: str) -> None:
        """A seed file of a session older than the records given at start: ask the log."""
        if self._lookup is None:
            return
        fragment = _session_fragment(session)
        if self._lookup(RecordKind.RNG_REVEAL, fragment):
            self._committed.add(session)
            self._revealed.add(session)
        elif self._lookup(RecordKind.RNG_COMMIT, fragment):
            self._committed.add(session)

    def _reveal_pending(self, reason: str) -> None:
        """Reveal every session whose seed file survived a restart; drop files of sessions the
        log never committed (no number was drawn from them) or already revealed."""
        for path in sorted(self._state_dir.glob(f"{SEED_FILE_PREFIX}*{SEED_FILE_SUFFIX}")):
            session = path.name[len(SEED_FILE_PREFIX) : -len(SEED_FILE_SUFFIX)]
            if session in self._unconfirmed:
                continue  # the log may hold its commitment: keep it for the next start
            if session not in self._committed and session not in self._revealed:
                self._learn_old(session)
            if session in self._revealed or session not in self._committed:
                self._forget(session)
                continue
            try:
                material = self._read_material(path)
            except RngError:
                self._abandon(session)
                raise
            self._reveal(material, reason)


def _session_fragment(session: str) -> bytes:
    """How a record's canonical text names a session (keys sorted, no spaces)."""
    return b'"session":"' + session.encode("ascii") + b'"'


def _split(outcome: Outcome) -> tuple[int | None, Roll | None]:
    if isinstance(outcome, Roll):
        return None, outcome
    return outcome, None


def _outcome_of_record(data: Mapping[str, object]) -> tuple[int | None, Roll | None]:
    number = data.get("number")
    if isinstance(number, int) and not isinstance(number, bool):
        return number, None
    dice = data.get("dice")
    if isinstance(dice, Mapping):
        red, blue = dice.get("red"), dice.get("blue")
        if isinstance(red, int) and isinstance(blue, list) and len(blue) == 2:
            try:
                return None, Roll(red, (int(blue[0]), int(blue[1])))
            except (ValueError, TypeError):
                pass
    return None, None


class RngPort:
    """The control loop's ``RngDraws`` port over a manager: ``prepare`` when bets open (the
    commitment recorded, and shown by the display from its record, before bets close),
    ``draw`` on DRAW_NUMBER (never opens a session), ``close`` at an orderly stop."""

    def __init__(self, manager: RngSessionManager) -> None:
        self.manager = manager

    def prepare(self) -> None:
        self.manager.prepare()

    def draw(self, *, round_number: int, attempt: int) -> int | Roll:
        draw = self.manager.draw(round_number, attempt)
        if draw.roll is not None:
            return draw.roll
        if draw.number is None:  # pragma: no cover - draw() refuses an unreadable record
            raise RngError(f"round {round_number}: the draw has no number")
        return draw.number

    def close(self, reason: str) -> None:
        self.manager.close(reason)
