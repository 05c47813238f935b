"""A table's candidates and the chains through them (fleet-v2.md, "Records are facts only
under a signed checkpoint"). Pure: no I/O, no clock.

A candidate is a record the table sent (an export line, checked) that no signed checkpoint
covers yet. Records are not signed one by one: anyone who can publish on the broker can make a
well-formed record at any seq, with the right ``prev``. So candidates are kept side by side,
and only a verified checkpoint's root says which chain of them is the log.

Bounds (a flood of forged candidates costs bounded memory, store and time):

- at most ``MAX_PER_SEQ`` (4) candidates at one seq; one more replaces the one that arrived
  first there (a seq filled with forgeries before the table's record came does not keep the
  table's record out: it comes again when the table re-sends);
- at most ``MAX_PER_TABLE`` (4096) candidates and ``MAX_BYTES_PER_TABLE`` (32 MiB of leaves
  and notes) per table; past that the one that arrived first goes (a record larger than the
  whole bound is refused);
- every candidate goes when a signed checkpoint accepts a chain through its seq (counted as
  unconfirmed records dropped), or when the operator resets the table.

A chain is followed by ``prev`` links, from its last record back: a record's hash names its
seq and its whole content, so each candidate has at most one candidate before it and the
chain that ends at a candidate is unique. A checkpoint of size ``M`` is decided by walking back
from each of the at most 4 candidates at ``M`` to the accepted records: at most 4 walks, each at
most as long as the candidates held (:func:`walk`, its steps counted), never a search over
combinations. The walk stops at the first missing link and says which record it missed
(``Walk.missing``): only that record, or another candidate at ``M``, can complete the chain,
so nothing else triggers the search again.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass

from controller.witness.ports import CandidateRow

MAX_PER_SEQ = 4
MAX_PER_TABLE = 4096
MAX_BYTES_PER_TABLE = 32 * 1024 * 1024

Candidate = CandidateRow


@dataclass(frozen=True, slots=True)
class Walk:
    """Where the walk back from a candidate ended.

    - ``anchor`` the accepted size it reached (the chain's first record follows accepted
      record ``anchor``; 0: it starts the log), or None;
    - ``memo`` the candidate it reached whose tree is known already (the chain follows it), or
      None;
    - else ``missing``: the (seq, hash) of the record it needed and no one holds.

    ``chain`` is in seq order, from the record after the anchor (or the memo) to the one the
    walk started from."""

    chain: tuple[Candidate, ...]
    anchor: int | None = None
    memo: str | None = None
    missing: tuple[int, str] | None = None


class Candidates:
    """One table's candidates, in the order they arrived, within the bounds above."""

    def __init__(
        self,
        *,
        per_seq: int = MAX_PER_SEQ,
        per_table: int = MAX_PER_TABLE,
        max_bytes: int = MAX_BYTES_PER_TABLE,
    ) -> None:
        self.per_seq = per_seq
        self.per_table = per_table
        self.max_bytes = max_bytes
        self._by_hash: dict[str, Candidate] = {}  # in the order they arrived
        self._by_seq: dict[int, list[Candidate]] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._by_hash)

    def __iter__(self) -> Iterator[Candidate]:
        return iter(list(self._by_hash.values()))

    def get(self, hash: str) -> Candidate | None:
        return self._by_hash.get(hash)

    def at(self, seq: int) -> list[Candidate]:
        """The candidates at ``seq``, in the order they arrived."""
        return list(self._by_seq.get(seq, ()))

    def add(self, candidate: Candidate) -> list[Candidate]:
        """Keep ``candidate`` (not held yet); the candidates that went to make room, oldest
        first (``candidate`` itself among them when it is larger than the whole bound)."""
        if candidate.size > self.max_bytes:
            return [candidate]
        gone: list[Candidate] = []
        here = self._by_seq.get(candidate.seq, [])
        while len(here) >= self.per_seq:
            gone.append(here[0])
            self.remove(here[0].hash)
            here = self._by_seq.get(candidate.seq, [])
        while self._by_hash and (
            len(self._by_hash) >= self.per_table or self.bytes + candidate.size > self.max_bytes
        ):
            oldest = next(iter(self._by_hash.values()))
            gone.append(oldest)
            self.remove(oldest.hash)
        self._by_hash[candidate.hash] = candidate
        self._by_seq.setdefault(candidate.seq, []).append(candidate)
        self.bytes += candidate.size
        return gone

    def remove(self, hash: str) -> Candidate | None:
        candidate = self._by_hash.pop(hash, None)
        if candidate is None:
            return None
        here = self._by_seq[candidate.seq]
        here.remove(candidate)
        if not here:
            del self._by_seq[candidate.seq]
        self.bytes -= candidate.size
        return candidate

    def between(self, low: int, high: int) -> list[Candidate]:
        """The candidates at seqs ``low``..``high``."""
        if high - low < len(self._by_seq):
            return [c for seq in range(low, high + 1) for c in self._by_seq.get(seq, ())]
        return [c for c in self._by_hash.values() if low <= c.seq <= high]


def walk(
    candidates: Candidates,
    end: Candidate,
    accepted: int,
    accepted_hash: Callable[[int], str | None],
    memo: Container[str] = (),
) -> Walk:
    """Follow ``prev`` links back from ``end`` (see the module docstring). ``accepted`` is the
    number of accepted records and ``accepted_hash(s)`` the hash of accepted record ``s``
    (``s`` from 0, the genesis ``prev``, to ``accepted``); it is asked once at most."""
    chain: list[Candidate] = []
    current = end
    while True:
        if current.hash in memo:
            return Walk(tuple(reversed(chain)), memo=current.hash)
        chain.append(current)
        before = current.seq - 1
        prior = candidates.get(current.prev)
        if prior is not None and prior.seq == before:
            current = prior
            continue
        if before <= accepted and accepted_hash(before) == current.prev:
            return Walk(tuple(reversed(chain)), anchor=before)
        return Walk(tuple(reversed(chain)), missing=(before, current.prev))


def provisional(
    candidates: Candidates, start: int, start_hash: str, *, limit: int = MAX_PER_TABLE
) -> tuple[list[Candidate], bool]:
    """The chain of candidates that goes on from accepted record ``start`` (hash
    ``start_hash``): at each seq the earliest candidate that follows the one before; and
    whether another candidate that follows it came at one of those seqs (contested)."""
    chain: list[Candidate] = []
    contested = False
    seq, hash_ = start + 1, start_hash
    while len(chain) < limit:
        following = [c for c in candidates.at(seq) if c.prev == hash_]
        if not following:
            break
        contested = contested or len(following) > 1
        chain.append(following[0])
        seq, hash_ = seq + 1, following[0].hash
    return chain, contested
