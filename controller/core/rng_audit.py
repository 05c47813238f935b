"""The auditor's reveal of the RNG sessions the log left unrevealed (``rng-reveal``), and the
document it writes, which ``verify-log --rng-reveals`` replays. Pure: the records and the
auditor's private key come in, the reveals go out.

A session ends unrevealed when the controller restarts while it is open (a power cut, a crash:
its seed was in memory only). The auditor opens its escrow (``controller.core.rng_escrow``),
checks the seed against the commitment and replays every recorded draw of the session with it,
exactly as a reveal in the log is replayed (``controller.core.rng_replay``). A session that may
still be drawing is never opened: only one the log shows ended, by its ``rng_interrupted``, a
later session's commitment, or a later ``power_on`` or ``shutdown`` (after which the seed was
no longer in any controller's memory).

The document (JSON)::

    {"format": "paigow-controller rng-reveal v1",
     "recipient": "<the auditor key's fingerprint, 64 hex>",
     "reveals": [{"session", "table", "commit_seq", "commitment", "interrupted_seq" (or null),
                  "draws" (how many were replayed), "entropy", "nonce", "personalization"}],
     "not_revealed": [{"session", "reason"}]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from controller.core.drbg import MIN_ENTROPY_BYTES as ENTROPY
from controller.core.drbg import MIN_NONCE_BYTES as NONCE
from controller.core.records import RecordKind
from controller.core.rng_escrow import escrow_key_of, open_sealed_seed
from controller.core.rng_replay import (
    SESSION_ID_HEX,
    Record,
    SeedReveal,
    SessionReplayer,
    UnrevealedSession,
    personalization_for,
)
from controller.errors import EscrowError, LogIntegrityError, RngError

REVEALS_FORMAT = "paigow-controller rng-reveal v1"
MAX_REVEALS = 100_000  # sessions in one document (a table-year is a few thousand)
MAX_PERSONALIZATION_HEX = 512
_STOP_KINDS = frozenset({RecordKind.POWER_ON, RecordKind.SHUTDOWN})
_DOCUMENT_KEYS = frozenset({"format", "recipient", "reveals", "not_revealed"})
_REVEAL_KEYS = frozenset(
    {
        "session",
        "table",
        "commit_seq",
        "commitment",
        "interrupted_seq",
        "draws",
        "entropy",
        "nonce",
        "personalization",
    }
)


@dataclass(frozen=True, slots=True)
class OpenedSession:
    session: UnrevealedSession
    reveal: SeedReveal

    def as_record(self) -> dict[str, object]:
        return {
            "session": self.session.session,
            "table": self.session.table,
            "commit_seq": self.session.commit_seq,
            "commitment": self.session.commitment,
            "interrupted_seq": self.session.interrupted_seq,
            "draws": self.session.draws,
            "entropy": self.reveal.entropy.hex(),
            "nonce": self.reveal.nonce.hex(),
            "personalization": self.reveal.personalization.hex(),
        }


@dataclass(slots=True)
class EscrowOpening:
    """What ``rng-reveal`` found: the sessions opened and replayed, and those left."""

    recipient: str
    opened: list[OpenedSession] = field(default_factory=list)
    not_revealed: list[tuple[str, str]] = field(default_factory=list)  # (session, why)

    def as_document(self) -> dict[str, object]:
        return {
            "format": REVEALS_FORMAT,
            "recipient": self.recipient,
            "reveals": [o.as_record() for o in self.opened],
            "not_revealed": [{"session": s, "reason": why} for s, why in self.not_revealed],
        }


def open_escrowed_sessions(
    records: Iterable[Record], private: X25519PrivateKey, *, only: str | None = None
) -> EscrowOpening:
    """Open the escrow of every ended session the log never revealed (only ``only``, if
    given), and replay every RNG session of the log, those opened included. Raises
    :class:`LogIntegrityError` naming the first bad record (a seal that does not open, a seed
    that does not match its commitment, a draw that does not replay), and :class:`RngError`
    when ``only`` cannot be revealed (saying why)."""
    replayer, ended_by = _replayer_of(records)
    recipient = escrow_key_of(private).fingerprint
    opening = EscrowOpening(recipient)
    _check_revealable(replayer, only)
    bad: list[tuple[int, str]] = []  # (the session's commitment record, what is wrong)
    for session in replayer.unrevealed():
        if only is not None and session.session != only:
            continue
        ended = session.interrupted_seq is not None or session.commit_seq < ended_by
        why = _why_not(session, ended, recipient)
        if why is not None:
            if only is not None:
                raise RngError(f"RNG session {only}: {why}")
            opening.not_revealed.append((session.session, why))
            continue
        try:
            opening.opened.append(_opened(private, session))
        except EscrowError as exc:
            bad.append((session.commit_seq, f"RNG session {session.session}'s escrow: {exc}"))
    try:
        replayer.finish([o.reveal for o in opening.opened])
    except LogIntegrityError as exc:
        if not bad or (exc.record is not None and exc.record < min(bad)[0]):
            raise
    if bad:
        raise LogIntegrityError(*min(bad))
    return opening


def _replayer_of(records: Iterable[Record]) -> tuple[SessionReplayer, int]:
    """Every RNG session of the log fed to a replayer, and the record before which a session
    committed has ended (the last ``power_on`` or ``shutdown``, or the newest commitment)."""
    replayer = SessionReplayer(keep_draws=False)
    last_stop = newest_commit = 0
    for seq, kind, data in records:
        if kind in _STOP_KINDS:
            last_stop = seq
        else:
            replayer.feed(seq, kind, data)
            if kind == RecordKind.RNG_COMMIT:
                newest_commit = seq
    return replayer, max(last_stop, newest_commit)


def _check_revealable(replayer: SessionReplayer, only: str | None) -> None:
    """The one session asked for (if any) is committed in the log and not revealed there."""
    if only is not None and not replayer.is_committed(only):
        raise RngError(f"RNG session {only} is not committed in this log")
    revealed_at = None if only is None else replayer.reveal_seq(only)
    if revealed_at is not None:
        raise RngError(f"RNG session {only} is revealed in the log already (record {revealed_at})")


def _opened(private: X25519PrivateKey, session: UnrevealedSession) -> OpenedSession:
    """The session's seed, out of its escrow (:class:`EscrowError` if it does not open)."""
    assert session.escrow is not None
    entropy, nonce = open_sealed_seed(
        private,
        session.escrow,
        table=session.table,
        session=session.session,
        commitment=session.commitment,
    )
    personalization = personalization_for(session.table, session.session)
    return OpenedSession(session, SeedReveal(session.session, entropy, nonce, personalization))


def _why_not(session: UnrevealedSession, ended: bool, recipient: str) -> str | None:
    if session.escrow is None:
        return "committed without an escrow (by an older version, which kept a seed file)"
    if not ended:
        return (
            "may still be open (no rng_interrupted, later session, power_on or shutdown after"
            " it): a session is revealed only once it has ended"
        )
    if session.escrow.recipient != recipient:
        return f"sealed to another auditor key (fingerprint {session.escrow.recipient})"
    return None


# --- the document, read back --------------------------------------------------------------


def reveals_from_document(document: object) -> list[SeedReveal]:
    """The seeds of a document ``rng-reveal`` wrote, read strictly (its fields and no
    others); :class:`EscrowError` saying what is wrong. Only the seeds are taken: the table,
    the commitment and the draws are checked against the log's own records in the replay."""
    if not isinstance(document, Mapping) or set(document) != _DOCUMENT_KEYS:
        raise EscrowError(f"not an rng-reveal document ({', '.join(sorted(_DOCUMENT_KEYS))})")
    if document["format"] != REVEALS_FORMAT:
        raise EscrowError(f"format is not {REVEALS_FORMAT!r}")
    reveals = document["reveals"]
    if not isinstance(reveals, list) or len(reveals) > MAX_REVEALS:
        raise EscrowError(f"reveals is not a list of at most {MAX_REVEALS}")
    found: list[SeedReveal] = []
    seen: set[str] = set()
    for number, item in enumerate(reveals, start=1):
        where = f"reveal {number}"
        if not isinstance(item, Mapping) or set(item) != _REVEAL_KEYS:
            raise EscrowError(f"{where} is not an object of {', '.join(sorted(_REVEAL_KEYS))}")
        session = _hex_text(item["session"], f"{where}: session", SESSION_ID_HEX)
        if session in seen:
            raise EscrowError(f"{where}: session {session} is revealed twice")
        seen.add(session)
        entropy = bytes.fromhex(_hex_text(item["entropy"], f"{where}: entropy", 2 * ENTROPY))
        nonce = bytes.fromhex(_hex_text(item["nonce"], f"{where}: nonce", 2 * NONCE))
        personalization = item["personalization"]
        if (
            not isinstance(personalization, str)
            or not 0 < len(personalization) <= MAX_PERSONALIZATION_HEX
            or len(personalization) % 2
        ):
            raise EscrowError(f"{where}: personalization is not hex")
        raw = bytes.fromhex(_hex_text(personalization, f"{where}: personalization", None))
        found.append(SeedReveal(session, entropy, nonce, raw))
    return found


def _hex_text(value: object, what: str, n_chars: int | None) -> str:
    if (
        not isinstance(value, str)
        or (n_chars is not None and len(value) != n_chars)
        or not all(c in "0123456789abcdef" for c in value)
    ):
        size = "" if n_chars is None else f" {n_chars} digits of"
        raise EscrowError(f"{what} is not{size} lowercase hex")
    return value
