"""RNG sessions with commit–reveal: what the daemon calls to open, draw and close.

A session is a dealer shift, or at most ``rng.session_max_rounds`` rounds. At open it takes 256
bits of entropy and a 128-bit nonce from the operating system (``getrandom``: it blocks until
the kernel's pool is seeded, the "uncontrolled event" of 25 CFR 547.14 and AGCO 5.1),
instantiates HMAC_DRBG with a personalization naming the table and the session, and records the
commitment SHA-256(entropy ‖ nonce ‖ personalization) together with the seed sealed to the
auditor's X25519 key (``escrow``: ``controller.core.rng_escrow`` states the construction), and
returns the commitment for the display. Each draw passes the round's identity as additional
input and is recorded before it is returned, so before anything can show it. At close or at the
round limit the seed material is revealed in the log; anyone can then replay every draw
(``controller.core.rng_replay``).

The seed material lives in this process's memory only, never in a file: nobody who can read
the state directory (the service's account included) can foresee a draw. The daemon also makes
itself undumpable (no core file, no ptrace by the same user: ``controller.app.hardening``). The
sealed copy in the commitment's record opens only with the auditor's private key, which never
comes near the table.

When a session opens (:meth:`RngSessionManager.prepare`): when bets open, never inside a draw,
so that the commitment is in the log, and on the table display, before the bets of any round it
draws for are closed (621a.8(a)(1)). A draw never opens a session.

After a restart (a power cut, a crash) the session that was open is never taken up again: its
seed went with the process. At the first ``prepare``, ``open`` or ``close`` the manager records
that it ended unrevealed (``rng_interrupted``, with the number of its draws) and the next
session is committed anew. A number recorded for a round and attempt is still returned again
(``is_repeat``), never re-drawn: that needs no seed. A round whose number was not recorded
cannot be drawn from the lost session: :class:`RngSessionLost`, which the table turns into a
void of the round, never a draw from a session committed after its bets closed. The auditor
opens the ended session's escrow (``paigow-controller rng-reveal``) and ``verify-log
--rng-reveals`` replays it.

Older versions kept the seed in a file ``rng-seed-<session>.json`` (mode 0600) in the state
directory until its reveal. A file one left behind is revealed (reason ``"restart"``) and
removed at the first ``prepare``, ``open`` or ``close``, once checked against the commitment
the log recorded; one that does not match is an RNG fault for the supervisor, set aside
(``.rejected``), never revealed.

The daemon's part (through :class:`RngPort`, the control loop's ``RngDraws`` port)::

    rng.prepare()                        # on PREPARE_RNG, when bets open: a committed session
                                         # with rounds left (KAT, open, roll over)
    draw = rng.draw(round_number, attempt)   # on DRAW_NUMBER: recorded before it returns
    rng.close("shutdown")                # on CLOSE_RNG at an orderly stop: the reveal
    # RngSessionLost -> the round is voided (its session ended with a restart);
    # other RngError (RngSelfTestFailure included) -> Fault.RNG_FAILURE: the RNG mode is refused.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.core import canonical
from controller.core.dice import Roll
from controller.core.drbg import MIN_ENTROPY_BYTES, MIN_NONCE_BYTES, HmacDrbg, known_answer_test
from controller.core.position import Game
from controller.core.records import RecordKind
from controller.core.rng_escrow import EscrowKey
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
from controller.errors import RngError, RngSelfTestFailure, RngSessionLost
from controller.files import fsync_dir, read_capped
from controller.ports import AuditLog
from controller.rng.escrow import seal_session_seed

# The seed files of older versions (read, revealed and removed; never written any more)
SEED_FILE_PREFIX = "rng-seed-"
SEED_FILE_SUFFIX = ".json"
MAX_SEED_FILE_BYTES = 4096

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
    seq: int | None  # None: a draw whose append was reported failed, found in the log after
    is_repeat: bool = False


@dataclass(frozen=True, slots=True)
class _SeedMaterial:
    session: str
    table: str
    entropy: bytes
    nonce: bytes
    personalization: bytes
    commitment: str

    def __repr__(self) -> str:  # never the material itself
        return f"<seed material of RNG session {self.session}>"


@dataclass(frozen=True, slots=True)
class _UnsureDraw:
    """A draw whose record's append raised: it may or may not be in the log. ``drbg`` is the
    generator as it was before the draw, ``data`` the record the draw made."""

    round: int
    attempt: int
    data: Mapping[str, object]
    drbg: HmacDrbg


@dataclass(slots=True)
class _OpenSession:
    material: _SeedMaterial  # in memory only
    drbg: HmacDrbg
    commitment: Commitment
    rounds: set[int] = field(default_factory=set)
    is_broken: bool = False  # the DRBG failed inside a draw: no more draws
    unsure: _UnsureDraw | None = None  # a draw whose append raised, settled at the next draw

    @property
    def session(self) -> str:
        return self.material.session


@dataclass(slots=True)
class _Pending:
    """A session the log holds as committed, neither revealed nor ended, from before this
    process: its commitment record and how many draws the log holds for it."""

    seq: int
    data: Mapping[str, object]
    draws: int = 0


@dataclass(frozen=True, slots=True)
class _Unsettled:
    """Seed material whose record (``step``: its commitment or its reveal) may or may not be
    in the log: the append raised. Settled at the next open or close."""

    material: _SeedMaterial
    step: RecordKind
    reason: str


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
        escrow: EscrowKey,
        entropy_source: EntropySource = os_entropy,
        drbg_class: type[HmacDrbg] = HmacDrbg,
        lookup: Callable[[str, bytes], bool] | None = None,
    ) -> None:
        """``records``: the RNG records the log holds (at least those of the last sessions);
        ``escrow``: the auditor's key each session's seed is sealed to; ``lookup(kind,
        fragment)``: whether a record of that kind holds those bytes, to look up a session
        older than ``records`` (a seed file left over from long ago)."""
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
        self._escrow = escrow
        self._entropy_source = entropy_source
        self._drbg_class = drbg_class
        self._lookup = lookup
        self._session: _OpenSession | None = None
        self._committed: set[str] = set()
        self._revealed: set[str] = set()
        self._ended: set[str] = set()  # ended unrevealed by a restart (rng_interrupted)
        self._pending: dict[str, _Pending] = {}  # from before this process, not yet ended
        self._is_settled = False  # the sessions of before are ended (or revealed)
        self._unsettled: dict[str, _Unsettled] = {}
        self._newest: tuple[int, str] | None = None  # the newest commitment the log held
        self._recorded: dict[tuple[int, int], RngDraw] = {}  # the latest round's draws
        self._last_drawn: tuple[int, int] | None = None
        self._last_entropy: bytes | None = None
        for seq, kind, data in records:
            self._learn(seq, kind, data)
        # The session open before this process, if any: a round it was to draw is lost.
        self._lost = self._open_before()

    # --- what the log already holds ----------------------------------------------------------

    def _learn(self, seq: int, kind: str, data: Mapping[str, object]) -> None:
        session = data.get("session")
        if not isinstance(session, str):
            return
        if kind == RecordKind.RNG_COMMIT:
            self._committed.add(session)
            self._pending[session] = _Pending(seq, data)
            if self._newest is None or seq > self._newest[0]:
                self._newest = (seq, session)
        elif kind == RecordKind.RNG_REVEAL:
            self._revealed.add(session)
            self._pending.pop(session, None)
        elif kind == RecordKind.RNG_INTERRUPTED:
            self._ended.add(session)
            self._pending.pop(session, None)
        elif kind == RecordKind.RNG_DRAW:
            round_number, attempt = data.get("round"), data.get("attempt")
            if not isinstance(round_number, int) or not isinstance(attempt, int):
                return
            number, roll = _outcome_of_record(data)
            self._remember(RngDraw(session, round_number, attempt, number, roll, seq))
            pending = self._pending.get(session)
            if pending is not None:
                pending.draws += 1

    def _open_before(self) -> str | None:
        """The newest session the log holds, if it was not revealed: it was open when this
        process started (ended with the restart, recorded or not yet)."""
        if self._newest is None or self._newest[1] in self._revealed:
            return None
        return self._newest[1]

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
        """Before bets close: a committed session with rounds left. The first after a restart
        records the end of the session open before it and commits a new one; a session at its
        round limit is revealed and the next one committed. Raises :class:`RngError` (the RNG
        mode is refused until cleared)."""
        self._settle()
        if self._session is None:
            self.open()
        elif self.rounds_left() <= 0:
            self.close("max_rounds")
            self.open()
        assert self._session is not None
        return self._session.commitment

    def open(self) -> Commitment:
        """Self-test, end the sessions left from before, then open a new one: its commitment
        recorded with its sealed seed. Raises :class:`RngSelfTestFailure` (the RNG mode is
        refused) or :class:`RngError`."""
        if self._session is not None:
            raise RngError(f"RNG session {self._session.session} is already open")
        known_answer_test(self._drbg_class)  # SP 800-90A §11.3, before any use
        self._settle()
        material = self._fresh_material()
        sealed = seal_session_seed(
            self._escrow,
            table=self._table,
            session=material.session,
            commitment=material.commitment,
            entropy=material.entropy,
            nonce=material.nonce,
            random_bytes=self._entropy_source,
        )
        drbg = self._drbg_class(material.entropy, material.nonce, material.personalization)
        self._unsettled[material.session] = _Unsettled(material, RecordKind.RNG_COMMIT, "close")
        seq = self._append(
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
                "escrow": sealed.as_record(),
            },
        )
        del self._unsettled[material.session]
        self._committed.add(material.session)
        self._lost = None  # a round drawn from now on is drawn from this process's sessions
        shown = Commitment(material.session, material.commitment, seq)
        self._session = _OpenSession(material, drbg, shown)
        return shown

    def draw(self, round_number: int, attempt: int) -> RngDraw:
        """The number (or dice) of this round and attempt, recorded before it is returned.

        A number already recorded for them is returned again and never re-drawn (no second
        selection); a round before the last one drawn is refused. With no session of this
        process open after a restart, an unrecorded draw raises :class:`RngSessionLost`."""
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
        session = self._session_to_draw_from(round_number, attempt)
        if session.unsure is not None:
            landed = self._settle_draw(session)
            if landed is not None and (landed.round, landed.attempt) == key:
                return landed
        if round_number not in session.rounds and len(session.rounds) >= self._max_rounds:
            raise RngError(
                f"RNG session {session.session} has drawn for its {self._max_rounds} rounds;"
                " the next session is committed when bets open"
            )
        return self._new_draw(session, round_number, attempt)

    def _session_to_draw_from(self, round_number: int, attempt: int) -> _OpenSession:
        """The open session, which has not failed a draw; else why there is none to draw from
        (:class:`RngSessionLost`: the round's own session ended with a restart or a stop)."""
        session = self._session
        if session is None:
            if self._lost is not None:
                raise RngSessionLost(
                    f"round {round_number} attempt {attempt}: RNG session {self._lost}, committed"
                    " before its bets closed, ended with the restart (its seed was in memory"
                    " only): the round is voided, never drawn from a later session"
                )
            if self._committed:
                # the session the bets closed under was revealed at an orderly stop (its seed
                # left with the process all the same): the same for the round
                raise RngSessionLost(
                    f"round {round_number} attempt {attempt}: the RNG session committed before"
                    " its bets closed was revealed at the stop: the round is voided, never"
                    " drawn from a later session"
                )
            raise RngError(
                "no RNG session is open: a session is committed when bets open, never in a draw"
            )
        if session.is_broken:
            raise RngError(f"RNG session {session.session} cannot draw after a failed draw")
        return session

    def _new_draw(self, session: _OpenSession, round_number: int, attempt: int) -> RngDraw:
        """A number drawn from ``session``'s generator for this round and attempt, recorded
        before it is returned (an append that raises leaves the draw unsure: _settle_draw)."""
        identity = round_identity(self._table, session.session, round_number, attempt)
        before = copy.copy(session.drbg)  # a failed append puts the generator back
        session.is_broken = True  # until the draw is made: the DRBG may have failed inside it
        outcome = draw_outcome(session.drbg, self._mode, self._positions, identity)
        session.is_broken = False
        data: dict[str, object] = {
            "session": session.session,
            "round": round_number,
            "attempt": attempt,
            "mode": str(self._mode),
            **draw_fields(self._mode, outcome),
        }
        session.unsure = _UnsureDraw(round_number, attempt, data, before)
        seq = self._append(RecordKind.RNG_DRAW, data)
        session.unsure = None
        session.rounds.add(round_number)
        number, roll = _split(outcome)
        draw = RngDraw(session.session, round_number, attempt, number, roll, seq)
        self._remember(draw)
        return draw

    def _settle_draw(self, session: _OpenSession) -> RngDraw | None:
        """A draw whose append raised, settled once the log is reopened (a commit reported
        failed may be on the disk after all, as PostgreSQL learned of fsync): the log holds its
        record, so the draw stands as recorded (returned, never drawn again); or it does not,
        and the generator goes back to where it was before that draw, as if it never ran. The
        same round and attempt then draw again from the same state, which gives the same
        number (HMAC_DRBG is deterministic): taken again, never redrawn. Without a look-up the
        log cannot be asked: the session draws no more (it stays provable)."""
        unsure = session.unsure
        assert unsure is not None
        if self._lookup is None:
            session.is_broken = True
            session.unsure = None
            raise RngError(f"RNG session {session.session} cannot draw after a failed draw")
        fragment = canonical.encode(dict(unsure.data))
        if not self._lookup(RecordKind.RNG_DRAW, fragment):  # AuditLogError: still unsure
            session.drbg = unsure.drbg
            session.unsure = None
            return None
        session.unsure = None
        session.rounds.add(unsure.round)
        number, roll = _outcome_of_record(unsure.data)
        draw = RngDraw(session.session, unsure.round, unsure.attempt, number, roll, None)
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
        """Reveal the open session's seed material in the log, from memory, and forget it;
        then end the sessions left from before a restart."""
        session = self._session
        if session is not None:
            self._session = None
            self._reveal(session.material, reason)
        self._settle()

    # --- the seed material -----------------------------------------------------------------

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

    def _append(self, kind: RecordKind, data: Mapping[str, object]) -> int:
        """A record appended to the log (which checks it against its kind's schema)."""
        return self._log.append(kind, data)

    def _reveal(self, material: _SeedMaterial, reason: str) -> None:
        self._unsettled[material.session] = _Unsettled(material, RecordKind.RNG_REVEAL, reason)
        self._append(
            RecordKind.RNG_REVEAL,
            {
                "session": material.session,
                "entropy": material.entropy.hex(),
                "nonce": material.nonce.hex(),
                "personalization": material.personalization.hex(),
                "reason": reason,
            },
        )
        del self._unsettled[material.session]
        self._revealed.add(material.session)
        self._pending.pop(material.session, None)

    # --- what a restart or a failed append left ---------------------------------------------

    def _settle(self) -> None:
        """Reveal what a failed append left unsure, then (once per process) end the sessions
        left from before: a seed file of an older version revealed, any other session recorded
        as ended with the restart."""
        self._settle_unsure()
        if self._is_settled:
            return
        self._reveal_seed_files()
        for session, pending in sorted(self._pending.items(), key=lambda item: item[1].seq):
            self._append(
                RecordKind.RNG_INTERRUPTED,
                {"session": session, "reason": "restart", "draws": pending.draws},
            )
            del self._pending[session]
            self._ended.add(session)
        self._is_settled = True

    def _settle_unsure(self) -> None:
        """A commitment whose append raised: revealed if the log holds it after all (no number
        was drawn from it), else forgotten. A reveal whose append raised: made again unless the
        log holds it. Without a look-up, a commitment is forgotten and a reveal made again."""
        for session, unsure in list(self._unsettled.items()):
            fragment = _session_fragment(session)
            if unsure.step is RecordKind.RNG_COMMIT:
                if self._lookup is None or not self._lookup(RecordKind.RNG_COMMIT, fragment):
                    del self._unsettled[session]
                    continue
                self._committed.add(session)
            elif self._lookup is not None and self._lookup(RecordKind.RNG_REVEAL, fragment):
                del self._unsettled[session]
                self._revealed.add(session)
                continue
            self._reveal(unsure.material, unsure.reason)

    # --- seed files of older versions ---------------------------------------------------------

    def _seed_path(self, session: str) -> Path:
        return self._state_dir / f"{SEED_FILE_PREFIX}{session}{SEED_FILE_SUFFIX}"

    def _reveal_seed_files(self) -> None:
        """Reveal every session whose seed file an older version left; drop files of sessions
        the log never committed (no number was drawn from them) or already revealed; set aside
        the file of a session the log says ended unrevealed (never revealed after its end)."""
        for path in sorted(self._state_dir.glob(f"{SEED_FILE_PREFIX}*{SEED_FILE_SUFFIX}")):
            session = path.name[len(SEED_FILE_PREFIX) : -len(SEED_FILE_SUFFIX)]
            if session not in self._committed and session not in self._revealed:
                self._learn_old(session)
            if session in self._ended and session not in self._revealed:
                self._set_aside(path)
                continue
            if session in self._revealed or session not in self._committed:
                self._forget(session)
                continue
            try:
                material = self._read_seed_file(path)
            except RngError:
                self._set_aside(path)
                raise
            self._reveal(material, "restart")
            self._forget(session)

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
            if self._lookup(RecordKind.RNG_INTERRUPTED, fragment):
                self._ended.add(session)

    def _read_seed_file(self, path: Path) -> _SeedMaterial:
        try:
            raw = json.loads(read_capped(path, MAX_SEED_FILE_BYTES))
            material = _SeedMaterial(
                session=str(raw["session"]),
                table=str(raw["table"]),
                entropy=bytes.fromhex(raw["entropy"]),
                nonce=bytes.fromhex(raw["nonce"]),
                personalization=bytes.fromhex(raw["personalization"]),
                commitment=str(raw["commitment"]),
            )
        except RecursionError:  # [[[[... nests too deep: no seed file does
            raise RngError(f"RNG seed file {path.name} is unreadable: nested too deep") from None
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

    def _set_aside(self, path: Path) -> None:
        """A seed file that is not the session's: kept for inspection, never revealed."""
        try:
            path.rename(path.with_name(path.name + ".rejected"))
            fsync_dir(self._state_dir)
        except OSError as exc:
            raise RngError(f"cannot set aside the seed file {path.name}: {exc}") from exc

    def _forget(self, session: str) -> None:
        self._seed_path(session).unlink(missing_ok=True)
        fsync_dir(self._state_dir)


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
