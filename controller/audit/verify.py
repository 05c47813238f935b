"""Verification of an audit log, as an auditor runs it (``paigow-controller verify-log``).

It checks, record by record: the canonical encoding, the sequence numbers (nothing deleted or
reordered), the hash chain, the RFC 6962 Merkle root against every signed checkpoint and each
checkpoint's Ed25519 signature, that the key is the one the log was created for (its first
record, ``log_created``), and it recomputes every result (starting position and side wager
outcomes and payouts) from the recorded dice with controller/core/result.py and the paytables of the
last ``config_loaded`` record, and each correction's result from the dice seen (N.J.A.C.
13:69E-1.28P(d)). It checks the round's shape (controller/audit/checks.py ``RoundShape``): a
round's bets close once and the rounds' numbers only grow, no round is decided twice (no
second result, no ``result_voided`` and a result decided again: N.J.A.C. 13:69E-1.28G), at
most one correction of a round's result, never of an RNG round's, no side wager settled on an
RNG's dice, no round closed without its result, no result without bets closed, and no RNG
number drawn from a session committed after the bets of its round were closed (621a.8(a)(1));
and who did it: a void's reason and the employee a person's reason names, every employee id
well-formed. Given a checkpoint kept elsewhere (``--checkpoint``),
it proves with an RFC 6962 consistency proof, computed from the leaves and verified as RFC 9162
says, that the log extends it: a log rolled back or forked behind it fails. Then it replays
every revealed RNG session (controller/core/rng_replay.py), and, given the auditor's reveals
(``--rng-reveals``, what ``rng-reveal`` opened from the escrow of the sessions a restart ended
unrevealed), those sessions too; every commitment's escrow must be well formed, and a session
without a reveal is reported as escrowed, not revealed (not an error). The first failure raises
:class:`LogIntegrityError` naming the record. Everything is done in one pass over the log,
each leaf decoded once; a long log is split across the available cores (parallel.py), and
whatever a split run finds wrong is named by this record-by-record verifier.

A record is vouched for by the next record's ``prev`` and by the checkpoints; to name the record
that was altered rather than its neighbour, the verifier looks two records ahead (and, at the
end of the log, at the latest checkpoint, which the log re-signs at every append).
"""

from __future__ import annotations

import json
import sqlite3
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from controller.audit.archive import (
    Archive,
    archive_paths,
    archived_checkpoints,
    archived_records,
    read_chain,
)
from controller.audit.checks import (
    RNG_KINDS,
    ROUND_KINDS,
    ContentCheck,
    Entry,
    RoundShape,
    decode_entry,
    open_signed,
)
from controller.audit.index_check import ByKindCheck
from controller.audit.parallel import MIN_RECORDS, available_cores, verify_in_parallel
from controller.audit.reader import (
    open_log_file,
    read_checkpoints,
    read_latest_checkpoint,
    read_records,
)
from controller.audit.recall import export_line
from controller.audit.store import DB_NAME, LATEST_CHECKPOINT, storage_error
from controller.audit.totals_check import KINDS as TOTALS_KINDS
from controller.audit.totals_check import TotalsCheck
from controller.core import canonical
from controller.core.log_state import CHECKPOINT_AFTER, GENESIS_PREV
from controller.core.merkle import CompactRange, ConsistencyCollector, leaf_hash, verify_consistency
from controller.core.note import Checkpoint, Verifier, open_checkpoint
from controller.core.records import RecordKind, StoredRecord
from controller.core.rng_replay import SeedReveal, SessionReplayer
from controller.errors import (
    ArchiveError,
    AuditLogError,
    LogIntegrityError,
    NoteError,
    RecordDataError,
)


@dataclass
class VerifyReport:
    records: int = 0
    checkpoints: int = 0
    results: int = 0
    origin: str | None = None
    rng: str = ""
    extends: int | None = None  # the size of the checkpoint the log was proven to extend
    sessions_without_draws: list[str] = field(default_factory=list)
    sessions_never_revealed: list[str] = field(default_factory=list)
    sessions_escrowed: list[str] = field(default_factory=list)  # escrowed, not revealed
    sessions_interrupted: list[str] = field(default_factory=list)
    sessions_revealed_by_auditor: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": True,
            "records": self.records,
            "checkpoints": self.checkpoints,
            "results_recomputed": self.results,
            "origin": self.origin,
            "rng": self.rng,
            "extends_checkpoint": self.extends,
            "rng_sessions_revealed_without_draws": self.sessions_without_draws,
            "rng_sessions_never_revealed": self.sessions_never_revealed,
            "rng_sessions_escrowed_not_revealed": self.sessions_escrowed,
            "rng_sessions_interrupted": self.sessions_interrupted,
            "rng_sessions_revealed_by_auditor": self.sessions_revealed_by_auditor,
            "notes": self.notes,
        }


class LogVerifier:
    """Streaming verification: ``feed`` each stored record in order, then ``finish``."""

    def __init__(
        self,
        verifier: Verifier,
        checkpoints: Mapping[int, str],
        *,
        anchor: Checkpoint | None = None,
        size: int | None = None,
        latest: str | None = None,
        rng_reveals: Sequence[SeedReveal] = (),
    ) -> None:
        """``anchor``: a checkpoint kept elsewhere (its signature already verified) that the
        log must extend; ``size``: how many records will be fed (needed with ``anchor``);
        ``rng_reveals``: the auditor's reveals of sessions the log did not reveal."""
        self.verifier = verifier
        self.checkpoints = dict(checkpoints)
        legacy = self.checkpoints.pop(LATEST_CHECKPOINT, None)  # a log of the first format
        self.latest = latest if latest is not None else legacy
        self.report = VerifyReport()
        self._window: deque[Entry] = deque()
        self._expected = 1
        self._prev = GENESIS_PREV
        self._tree = CompactRange()
        self._content = ContentCheck(verifier)
        self._shapes = canonical.Shapes()
        self._anchor = anchor
        self._consistency: ConsistencyCollector | None = None
        if anchor is not None:
            if size is None:
                raise ValueError("a log checked against a checkpoint needs its size")
            if size >= anchor.size:
                self._consistency = ConsistencyCollector(anchor.size, size)
        self._round = RoundShape()
        self._sessions: dict[str, _SessionShape] = {}
        self._rng_reveals = tuple(rng_reveals)
        # the draws of a session ended by a restart are kept only when the auditor revealed it
        later = frozenset(reveal.session for reveal in self._rng_reveals)
        self._rng = SessionReplayer(keep_draws=False, replay_later=later)
        # the running totals' check (audit/totals_check.py), fed each record checked
        self.totals: TotalsCheck | None = None

    def feed(self, row: StoredRecord) -> None:
        if row.seq != self._expected:
            raise LogIntegrityError(
                self._expected,
                f"is missing (the next stored record is {row.seq}): deleted",
            )
        self._expected += 1
        self._window.append(decode_entry(row, self._shapes))
        if len(self._window) == 3:
            self._process(*self._window)
            self._window.popleft()

    def finish(self) -> VerifyReport:
        while self._window:
            entries = list(self._window)
            self._process(entries[0], *entries[1:3])
            self._window.popleft()
        size = self._expected - 1
        for checkpoint_size in sorted(self.checkpoints):
            if checkpoint_size > size:
                raise LogIntegrityError(
                    size + 1,
                    f"is missing: a checkpoint signs {checkpoint_size} records, the log holds"
                    f" {size}",
                )
        self._check_extends(size)
        # every revealed session replayed, in the same pass, then those the auditor revealed
        sessions = self._rng.finish(self._rng_reveals)
        by_auditor = {replay.session for replay in self._rng.revealed_by_auditor}
        self._report_sessions(len(sessions), by_auditor)
        if self.latest is not None:
            latest = self._open(size, self.latest, "latest checkpoint")
            if latest.size != size:
                first = min(latest.size, size) + 1
                raise LogIntegrityError(
                    first,
                    f"the latest signed checkpoint covers {latest.size} records but the log"
                    f" holds {size}: records were "
                    + ("deleted" if latest.size > size else "added without the key"),
                )
            if latest.root_hash != self._tree.root():
                raise LogIntegrityError(
                    size, "the Merkle root does not match the latest checkpoint"
                )
        elif size:
            raise LogIntegrityError(
                size + 1,
                "is missing: the last record carries no signed checkpoint of the log (each"
                " commit moves it to its last record), so records after it were deleted",
            )
        self.report.records = size
        return self.report

    def _report_sessions(self, replayed: int, by_auditor: set[str]) -> None:
        self._list_sessions(by_auditor)
        report = self.report
        report.rng = f"{replayed} revealed RNG session(s) replayed"
        if by_auditor:
            report.rng += f", {len(by_auditor)} revealed by the auditor replayed"
        if report.sessions_escrowed:
            report.rng += (
                f"; {len(report.sessions_escrowed)} escrowed, not revealed (rng-reveal opens"
                " them with the auditor's key)"
            )

    def _list_sessions(self, by_auditor: set[str]) -> None:
        """The RNG sessions by what became of them (the newest, still open, is not named as
        never revealed)."""
        report, shapes = self.report, self._sessions
        report.sessions_without_draws = [
            s for s, shape in shapes.items() if shape.revealed and not shape.draws
        ]
        report.sessions_interrupted = [s for s, shape in shapes.items() if shape.interrupted]
        report.sessions_revealed_by_auditor = [s for s in shapes if s in by_auditor]
        self._list_unrevealed(by_auditor)

    def _list_unrevealed(self, by_auditor: set[str]) -> None:
        """The sessions not revealed: escrowed (the auditor may reveal them), or never."""
        report, shapes = self.report, self._sessions
        open_now = max(shapes, key=lambda s: shapes[s].seq, default=None)
        report.sessions_never_revealed = [
            s
            for s, shape in shapes.items()
            if not shape.revealed and not shape.escrowed and s != open_now
        ]
        report.sessions_escrowed = [
            s
            for s, shape in shapes.items()
            if not shape.revealed and shape.escrowed and s not in by_auditor
        ]

    def _check_extends(self, size: int) -> None:
        anchor = self._anchor
        if anchor is None:
            return
        if size < anchor.size:
            raise LogIntegrityError(
                size + 1,
                f"is missing: the checkpoint kept elsewhere signs {anchor.size} records and the"
                f" log holds {size}: rolled back",
            )
        proof = [] if self._consistency is None else self._consistency.proof()
        if not verify_consistency(anchor.size, size, anchor.root_hash, self._tree.root(), proof):
            raise LogIntegrityError(
                anchor.size,
                f"the log does not extend the checkpoint of size {anchor.size}: its first"
                f" {anchor.size} records are not the ones that checkpoint signs (forked or"
                " replaced)",
            )
        self.report.extends = anchor.size

    # --- one record, with the two after it ---------------------------------------------

    def _process(self, cur: Entry, nxt: Entry | None = None, after: Entry | None = None) -> None:
        if cur.prev != self._prev:  # only the first record gets here: later ones are vouched
            raise LogIntegrityError(cur.seq, "prev does not match the hash of the record before it")
        if nxt is not None and nxt.prev != cur.hash:
            if self._next_is_altered(cur, nxt, after):
                raise LogIntegrityError(
                    nxt.seq, f"prev does not match the hash of record {cur.seq}: altered"
                )
            raise LogIntegrityError(
                cur.seq, f"altered: its hash is not the prev that record {nxt.seq} carries"
            )
        self._prev = cur.hash
        note = self.checkpoints.get(cur.seq)
        checkpoint = None if note is None else self._open(cur.seq, note, "checkpoint")
        self.grow(cur.seq, leaf_hash(cur.leaf), checkpoint)
        self._check_meaning(cur)
        if self.totals is not None and cur.kind in TOTALS_KINDS:
            self.totals.see(cur.seq, cur.kind, cur.data)

    def grow(self, seq: int, hashed_leaf: bytes, checkpoint: Checkpoint | None) -> None:
        """The Merkle tree gets record ``seq``; the checkpoint signed at it (its signature
        already verified) must sign the tree as it is now."""
        self._tree.append_hash(hashed_leaf)
        if self._consistency is not None:
            self._consistency.add(hashed_leaf)
        if checkpoint is not None:
            if checkpoint.size != seq or checkpoint.root_hash != self._tree.root():
                raise LogIntegrityError(
                    seq,
                    f"the Merkle root of records 1..{seq} does not match the signed checkpoint",
                )
            self._note_origin(seq, checkpoint.origin, "checkpoint")
            self.report.checkpoints += 1

    @property
    def tree(self) -> CompactRange:
        """The Merkle tree of the records checked so far (read it, grow it by ``grow*``)."""
        return self._tree

    def grow_by_subtrees(self, subtrees: Sequence[tuple[int, bytes]]) -> None:
        """The Merkle tree gets the next leaves, checked elsewhere (in parallel), as the roots
        of aligned perfect subtrees (level, root), none across a boundary of the consistency
        proof's ranges."""
        for level, node in subtrees:
            self._tree.append_subtree(level, node)
            if self._consistency is not None:
                self._consistency.add_subtree(level, node)

    def proof_boundaries(self) -> list[int]:
        """Where a subtree given to ``grow_by_subtrees`` must not cross (leaf indices)."""
        return [] if self._consistency is None else self._consistency.boundaries()

    def checkpoints_signed(self, seq: int, origin: str, count: int) -> None:
        """``count`` checkpoints from record ``seq`` on, of ``origin``, were opened and their
        roots compared elsewhere (in parallel)."""
        self._note_origin(seq, origin, "checkpoint")
        self.report.checkpoints += count

    def _next_is_altered(self, cur: Entry, nxt: Entry, after: Entry | None) -> bool:
        """Whether ``nxt`` (its prev) rather than ``cur`` was altered."""
        if after is not None:
            return after.prev != nxt.hash  # an intact nxt is vouched for by the one after it
        if self.latest is None:
            return False
        # nxt is the last record: put back the prev it should carry and ask the latest
        # checkpoint whether that was the log it signed.
        entry = canonical.decode(nxt.leaf)
        entry["prev"] = cur.hash
        tree = CompactRange(self._tree.size, list(self._tree.hashes))
        tree.append(cur.leaf)
        tree.append(canonical.encode(entry))
        try:
            latest = open_checkpoint(self.latest, self.verifier)
        except NoteError:
            return False
        return latest.size == nxt.seq and latest.root_hash == tree.root()

    def _open(self, seq: int, note: str, what: str) -> Checkpoint:
        checkpoint = open_signed(self.verifier, seq, note, what)
        self._note_origin(seq, checkpoint.origin, what)
        return checkpoint

    def _note_origin(self, seq: int, origin: str, what: str) -> None:
        if self.report.origin is None:
            self.report.origin = origin
        elif origin != self.report.origin:
            raise LogIntegrityError(seq, f"{what} names another log: {origin!r}")

    def shape(self, seq: int, kind: str, data: Mapping[str, Any]) -> None:
        """The order-dependent checks of one record: the round's shape, the RNG's replay."""
        try:
            self._check_shape(Entry(seq, kind, "", data, leaf=b"", hash=""))
            if kind in RNG_KINDS:
                self._rng.feed(seq, kind, data)
        except RecordDataError as exc:
            raise LogIntegrityError(seq, str(exc)) from exc

    @property
    def rounds(self) -> RoundShape:
        """The rounds' shape as the records checked so far leave it."""
        return self._round

    def adopt_rounds(self, rounds: RoundShape) -> None:
        """The round's state, as a run checked elsewhere (from a ``no_more_bets`` or a
        ``void``, after which it depends on nothing before but what ``RoundShape.then``
        checks at the seam) found it."""
        self._round = rounds

    def resume_at(self, size: int, last_hash: str, results: int) -> None:
        """After records 1..``size`` were checked elsewhere (in parallel)."""
        self._expected = size + 1
        self._prev = last_hash
        self.report.results += results

    def _check_meaning(self, cur: Entry) -> None:
        try:
            self._check_shape(cur)
            self.report.results += self._content.check(cur)
            if cur.kind in RNG_KINDS:
                self._rng.feed(cur.seq, cur.kind, cur.data)
        except RecordDataError as exc:
            raise LogIntegrityError(cur.seq, str(exc)) from exc

    def _check_shape(self, cur: Entry) -> None:
        """What every round must look like, whatever happened in it."""
        if cur.seq == 1 and cur.kind != RecordKind.LOG_CREATED:
            self.report.notes.append("the log does not record the key it was created for")
        kind = cur.kind
        if kind not in _SHAPE_KINDS:
            return  # its data is not read here: a record recognised by its shape is not parsed
        data = cur.data
        round_number = data.get("round")
        shape = self._round
        if kind in ROUND_KINDS:
            shape.feed(cur.seq, kind, data)
        elif kind == RecordKind.RNG_COMMIT:
            session = str(data.get("session"))
            self._sessions[session] = _SessionShape(cur.seq, escrowed="escrow" in data)
        elif kind == RecordKind.RNG_REVEAL:
            revealed = self._sessions.get(str(data.get("session")))
            if revealed is not None:
                revealed.revealed = True
        elif kind == RecordKind.RNG_INTERRUPTED:
            ended = self._sessions.get(str(data.get("session")))
            if ended is not None:
                ended.interrupted = True
        elif kind == RecordKind.RNG_DRAW:
            drawn = self._sessions.get(str(data.get("session")))
            if drawn is None:
                return  # the RNG replay names it
            drawn.draws += 1
            if shape.bets_closed is None or shape.bets_closed[0] != round_number:
                raise RecordDataError(
                    f"an RNG number for round {round_number} before its bets closed"
                )
            if drawn.seq > shape.bets_closed[1]:
                raise RecordDataError(
                    f"RNG session {data.get('session')} was committed in record {drawn.seq}, after"
                    f" the bets of round {round_number} closed (record {shape.bets_closed[1]}):"
                    " a commitment must come before"
                )


# the kinds whose data ``_check_shape`` reads
_SHAPE_KINDS = ROUND_KINDS | RNG_KINDS


@dataclass(slots=True)
class _SessionShape:
    seq: int  # of its commitment
    escrowed: bool = False  # its seed sealed to the auditor in the commitment
    draws: int = 0
    revealed: bool = False
    interrupted: bool = False  # ended unrevealed with a restart


def open_anchor(note: str, verifier: Verifier) -> Checkpoint:
    """A checkpoint kept elsewhere, as a signed note: it must verify with the log's key."""
    try:
        return open_checkpoint(note, verifier)
    except NoteError as exc:
        raise LogIntegrityError(None, f"the checkpoint given does not verify: {exc}") from exc


def verify_state_dir(
    state_dir: Path | str,
    verifier: Verifier,
    *,
    checkpoint: str | None = None,
    workers: int | None = None,
    rng_reveals: Sequence[SeedReveal] = (),
) -> VerifyReport:
    """Verify the log in ``state_dir`` with ``verifier`` (and, given a signed checkpoint kept
    elsewhere, that the log extends it; given the auditor's RNG reveals, that they replay);
    raises :class:`LogIntegrityError`. A long log is checked by ``workers`` processes
    (default: one per available core), a short one, or one in which they find anything
    wrong, record by record in this one."""
    if archive_paths(state_dir):
        try:
            return _verify_with_archive(
                Path(state_dir), verifier, checkpoint=checkpoint, rng_reveals=rng_reveals
            )
        except sqlite3.DatabaseError as exc:  # a page no read before reached: damage
            raise storage_error(exc, "cannot read the log") from exc
    return verify_database(
        Path(state_dir) / DB_NAME,
        verifier,
        checkpoint=checkpoint,
        workers=workers,
        rng_reveals=rng_reveals,
    )


def _verify_with_archive(
    state_dir: Path,
    verifier: Verifier,
    *,
    checkpoint: str | None,
    rng_reveals: Sequence[SeedReveal] = (),
) -> VerifyReport:
    """The archive (controller/audit/archive.py) and the live log as one log, record by
    record: the archive chain's notes, then each archive's records and checkpoints, then the
    live log's records after the archive's last (those it still holds up to it, after a drop
    cut short, must be the archive's own, byte for byte)."""
    anchor = None if checkpoint is None else open_anchor(checkpoint, verifier)
    try:
        chain = read_chain(state_dir, verifier)
    except ArchiveError as exc:
        raise LogIntegrityError(None, str(exc)) from None
    archived = chain[-1].last
    db = open_log_file(state_dir / DB_NAME)
    try:
        db.execute("BEGIN")
        first, stored = db.execute(
            "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM records"
        ).fetchone()
        size = max(int(stored), archived)
        latest = read_latest_checkpoint(db)
        if anchor is not None and anchor.origin != log_origin(db):
            raise LogIntegrityError(
                None, f"the checkpoint given is of {anchor.origin!r}, not of this log"
            )
        log = LogVerifier(
            verifier, {}, anchor=anchor, size=size, latest=latest, rng_reveals=rng_reveals
        )
        log.totals = TotalsCheck(
            db, first=int(first), exempt=frozenset(archive.last for archive in chain)
        )
        copies = _feed_archives(log, chain, int(first))
        log.checkpoints.update(
            {n: note for n, note in read_checkpoints(db).items() if n >= archived}
        )
        index = ByKindCheck(db, int(first), size)
        for row in read_records(db, stop=size):
            index.see(row.seq, row.kind)
            if row.seq <= archived:
                if copies.get(row.seq) != row.leaf:
                    raise LogIntegrityError(
                        row.seq, f"is not the archive's copy of it ({chain[-1].path})"
                    )
                continue
            log.feed(row)
        report = log.finish()
        index.finish()
        log.totals.finish(size)
        report.notes.append(
            f"records 1..{archived} verified from {len(chain)} archive file(s) in"
            f" {state_dir / 'archive'}"
        )
        db.execute("COMMIT")
        return report
    finally:
        db.close()


def _feed_archives(log: LogVerifier, chain: Sequence[Archive], first: int) -> dict[int, bytes]:
    """Each archive's checkpoints and records fed to ``log``, in order; the last archive's
    records the live log still holds (from its ``first`` on), to compare with its own."""
    copies: dict[int, bytes] = {}
    for archive in chain:
        log.checkpoints.update(archived_checkpoints(archive))
        last = archive is chain[-1]
        for row in archived_records(archive):
            log.feed(row)
            if last and row.seq >= first:  # still in the live log too
                copies[row.seq] = row.leaf
        if log.checkpoints.get(archive.last) is None:
            raise LogIntegrityError(archive.last, "the archive ends without its checkpoint")
    return copies


def verify_database(
    path: Path,
    verifier: Verifier,
    *,
    checkpoint: str | None = None,
    workers: int | None = None,
    rng_reveals: Sequence[SeedReveal] = (),
) -> VerifyReport:
    """:func:`verify_state_dir` for the log in the file ``path``: a state directory's
    ``audit.db`` or a backup of it (``paigow-controller backup``). A page SQLite finds damaged
    (opening reads only the schema and the records' first and last leaves) is named as damage
    of the log (:class:`LogDamagedError`), never left to escape as SQLite's own error."""
    try:
        return _verify_database(
            path, verifier, checkpoint=checkpoint, workers=workers, rng_reveals=rng_reveals
        )
    except sqlite3.DatabaseError as exc:
        raise storage_error(exc, f"cannot read {path}") from exc


def _verify_database(
    path: Path,
    verifier: Verifier,
    *,
    checkpoint: str | None,
    workers: int | None,
    rng_reveals: Sequence[SeedReveal],
) -> VerifyReport:
    anchor = None if checkpoint is None else open_anchor(checkpoint, verifier)
    jobs = available_cores() if workers is None else workers
    db = open_log_file(path)
    try:
        db.execute("BEGIN")  # one snapshot for every pass, even while the daemon appends
        first, stored = db.execute(
            "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM records"
        ).fetchone()
        size = int(stored)
        index = ByKindCheck(db, int(first), size)
        latest = read_latest_checkpoint(db)
        if anchor is not None and anchor.origin != log_origin(db):
            read_checkpoints(db)  # a malformed checkpoint row is named first, as it always was
            raise LogIntegrityError(
                None, f"the checkpoint given is of {anchor.origin!r}, not of this log"
            )
        if jobs > 1 and size >= MIN_RECORDS:
            # Each worker reads the checkpoints of its own records: the 400,000 notes of a
            # table-year are neither read nor handed out here.
            log = LogVerifier(
                verifier, {}, anchor=anchor, size=size, latest=latest, rng_reveals=rng_reveals
            )
            totals = TotalsCheck(db, first=int(first))
            report = verify_in_parallel(
                db,
                _database_file(db, path),
                log,
                size,
                workers=jobs,
                index=index.see,
                totals=totals.see if totals.active else None,
            )
            if report is not None:
                index.finish()
                totals.finish(size)
                db.execute("COMMIT")
                return report
        checkpoints = read_checkpoints(db)  # a malformed row is named here, before any record
        log = LogVerifier(
            verifier, checkpoints, anchor=anchor, size=size, latest=latest, rng_reveals=rng_reveals
        )
        index = ByKindCheck(db, int(first), size)  # afresh: a parallel pass may have fed it
        log.totals = TotalsCheck(db, first=int(first))  # likewise
        for row in read_records(db, stop=size):
            log.feed(row)
            index.see(row.seq, row.kind)
        report = log.finish()
        index.finish()
        log.totals.finish(size)
        db.execute("COMMIT")
        return report
    finally:
        db.close()


def _database_file(db: Any, path: Path) -> Path:
    """The file ``db`` reads: the log's, or the private copy made of a log on read-only
    media."""
    scratch = getattr(db, "scratch", None)
    if scratch is not None:
        return Path(scratch.name) / Path(path).name
    return Path(path)


def log_origin(db: Any) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE name = 'origin'").fetchone()
    return None if row is None else bytes(row[0]).decode("utf-8", "replace")


# --- an export (``paigow-controller export``) --------------------------------------------------

MAX_EXPORT_LINE_BYTES = 1 << 20  # one exported record (a record is a few kB), checkpoint included
_EXPORT_KEYS = frozenset({"seq", "kind", "time", "data", "prev", "hash", "leaf_hash", "leaf"})


def verify_export(
    path: Path,
    verifier: Verifier,
    *,
    checkpoint: str | None = None,
    rng_reveals: Sequence[SeedReveal] = (),
) -> VerifyReport:
    """Verify an export (JSON lines, controller/audit/recall.py ``export_lines``) as
    :func:`verify_database` verifies the log: each line's ``leaf`` is the record, fed to the
    same :class:`LogVerifier` with the checkpoints the lines carry (the last line's is the
    latest). Every other field of a line must be exactly what the export writes for its leaf,
    so that what a reader takes from a line (``data``, ``time``) is what was signed. Read
    twice, a line at a time (the first pass finds the size and the latest checkpoint)."""
    anchor = None if checkpoint is None else open_anchor(checkpoint, verifier)
    size, last = 0, None
    for _number, line in _export_lines(path):
        size, last = size + 1, line
    if last is None:
        raise LogIntegrityError(None, f"{path} holds no exported record")
    latest = last.get("checkpoint")
    if latest is not None and not isinstance(latest, str):
        raise LogIntegrityError(last.get("seq"), "its checkpoint is not a signed note")
    log = LogVerifier(
        verifier, {}, anchor=anchor, size=size, latest=latest, rng_reveals=rng_reveals
    )
    count = 0
    for number, line in _export_lines(path):
        count += 1
        row, note = _export_row(number, line)
        if note is not None and (count < size or row.kind in CHECKPOINT_AFTER):
            log.checkpoints[row.seq] = note  # the last line's is the latest checkpoint
        log.feed(row)  # the leaf decoded and checked: canonical, its seq and kind
        _check_line_fields(number, line, row, note)
    if count != size:
        raise LogIntegrityError(None, f"{path} changed while it was verified")
    return log.finish()


def _export_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each line; a line over MAX_EXPORT_LINE_BYTES is refused
    before it is read to its end, anything but a JSON object is named by its line."""
    try:
        file = Path(path).open("rb")  # noqa: SIM115 - closed below; errors inside are not I/O
    except OSError as exc:
        raise AuditLogError(f"audit log: cannot read {path}: {exc.strerror or exc}") from None
    with file:
        number = 0
        while raw := _read_line(file, path):
            number += 1
            if len(raw) > MAX_EXPORT_LINE_BYTES:
                raise LogIntegrityError(
                    None, f"line {number} is over {MAX_EXPORT_LINE_BYTES} bytes"
                )
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except (ValueError, RecursionError):
                raise LogIntegrityError(None, f"line {number} is not JSON") from None
            if not isinstance(line, dict):
                raise LogIntegrityError(None, f"line {number} is not a JSON object")
            yield number, line


def _read_line(file: BinaryIO, path: Path) -> bytes:
    try:
        return file.readline(MAX_EXPORT_LINE_BYTES + 1)
    except OSError as exc:
        raise AuditLogError(f"audit log: cannot read {path}: {exc.strerror or exc}") from None


def check_export_line(number: int, line: dict[str, Any]) -> tuple[Entry, str | None]:
    """One line of an export (or a record the fleet sends, controller/fleet/protocol.py), by
    itself, as :func:`verify_export` checks it: an exported record's fields and no others, its
    leaf a canonical record stored at its seq with its kind, and every other field exactly what
    the export writes for that leaf. The decoded record and the checkpoint the line carries
    (its signature not checked here); :class:`LogIntegrityError` otherwise."""
    row, note = _export_row(number, line)
    entry = decode_entry(row)
    _check_line_fields(number, line, row, note)
    return entry, note


def _check_line_fields(
    number: int, line: dict[str, Any], row: StoredRecord, note: str | None
) -> None:
    if json.dumps(line, sort_keys=True) != json.dumps(export_line(row, note), sort_keys=True):
        fields = sorted(k for k in _EXPORT_KEYS if line.get(k) != export_line(row, None)[k])
        raise LogIntegrityError(
            row.seq,
            f"line {number} says {', '.join(fields) or 'something'} other than its"
            " leaf (the signed record): altered",
        )


def _export_row(number: int, line: dict[str, Any]) -> tuple[StoredRecord, str | None]:
    seq, kind, leaf, note = line.get("seq"), line.get("kind"), line.get("leaf"), None
    if type(seq) is not int or not isinstance(kind, str) or not isinstance(leaf, str):
        raise LogIntegrityError(
            None, f"line {number} is not an exported record (seq, kind and leaf)"
        )
    unknown = sorted(set(line) - _EXPORT_KEYS - {"checkpoint"})
    if unknown:
        raise LogIntegrityError(seq, f"line {number} has fields {unknown} an export never has")
    if "checkpoint" in line:
        note = line["checkpoint"]
        if not isinstance(note, str):
            raise LogIntegrityError(seq, f"line {number}: its checkpoint is not a signed note")
    try:
        raw = leaf.encode("utf-8")
    except UnicodeEncodeError:
        raise LogIntegrityError(seq, f"line {number}: its leaf is not UTF-8 text") from None
    return StoredRecord(seq, kind, raw), note
