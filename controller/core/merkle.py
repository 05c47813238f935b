"""RFC 6962 Merkle tree hashing (section 2.1), as Certificate Transparency and the Go checksum
database use it. Pure: no I/O.

- leaf hash: SHA-256(0x00 || leaf); interior node: SHA-256(0x01 || left || right);
- the root of the empty tree is SHA-256 of nothing;
- for n > 1 leaves the tree splits at k, the largest power of two below n.

:class:`CompactRange` keeps only the roots of the perfect subtrees of the log (at most 64
hashes), so that the root after each append costs O(log n) and the log never rereads its leaves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of_hashes(hashes: Sequence[bytes]) -> bytes:
    """MTH over already hashed leaves, by the recursive definition (the reference)."""
    n = len(hashes)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return hashes[0]
    k = _split(n)
    return node_hash(root_of_hashes(hashes[:k]), root_of_hashes(hashes[k:]))


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of RFC 6962 section 2.1 over raw leaves."""
    return root_of_hashes([leaf_hash(leaf) for leaf in leaves])


@dataclass
class CompactRange:
    """The roots of the perfect subtrees that make a tree of ``size`` leaves, largest first."""

    size: int = 0
    hashes: list[bytes] = field(default_factory=list)

    def append_hash(self, hashed_leaf: bytes) -> None:
        node = hashed_leaf
        index = self.size
        while index & 1:
            node = node_hash(self.hashes.pop(), node)
            index >>= 1
        self.hashes.append(node)
        self.size += 1

    def append(self, leaf: bytes) -> None:
        self.append_hash(leaf_hash(leaf))

    def root(self) -> bytes:
        if not self.hashes:
            return EMPTY_ROOT
        node = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            node = node_hash(left, node)
        return node

    def to_bytes(self) -> bytes:
        return b"".join(self.hashes)

    @classmethod
    def from_bytes(cls, size: int, data: bytes) -> CompactRange:
        hashes = [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]
        if len(hashes) != bin(size).count("1") or len(data) % HASH_SIZE:
            raise ValueError(f"a compact range of size {size} needs {bin(size).count('1')} hashes")
        return cls(size, hashes)


def inclusion_proof(index: int, hashes: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of RFC 6962 section 2.1.1 over hashed leaves."""
    n = len(hashes)
    if not 0 <= index < n:
        raise ValueError(f"leaf {index} is not in a tree of {n}")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [*inclusion_proof(index, hashes[:k]), root_of_hashes(hashes[k:])]
    return [*inclusion_proof(index - k, hashes[k:]), root_of_hashes(hashes[:k])]


def root_from_inclusion_proof(
    index: int, size: int, hashed_leaf: bytes, proof: Sequence[bytes]
) -> bytes:
    """The root an inclusion proof leads to (RFC 9162 section 2.1.3.2)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    fn, sn = index, size - 1
    node = hashed_leaf
    for sibling in proof:
        if sn == 0:
            raise ValueError("inclusion proof is too long")
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            node = node_hash(node, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("inclusion proof is too short")
    return node


# --- consistency between two sizes of the log (RFC 6962 section 2.1.2, RFC 9162 2.1.4) ------


def consistency_ranges(first: int, second: int) -> list[tuple[int, int]]:
    """The leaf ranges ``[start, end)`` whose subtree hashes, in this order, are the
    consistency proof PROOF(first, D[second]) of RFC 6962 section 2.1.2. The ranges are
    disjoint, so a verifier streaming the leaves once can hash each into its range."""
    if not 0 <= first <= second:
        raise ValueError(f"no consistency proof from {first} to {second} leaves")
    if first in (0, second):
        return []

    def subproof(m: int, lo: int, hi: int, whole: bool) -> list[tuple[int, int]]:
        n = hi - lo
        if m == n:
            return [] if whole else [(lo, hi)]
        k = _split(n)
        if m <= k:
            return [*subproof(m, lo, lo + k, whole), (lo + k, hi)]
        return [*subproof(m - k, lo + k, hi, False), (lo, lo + k)]

    return subproof(first, 0, second, True)


def consistency_proof(first: int, hashes: Sequence[bytes]) -> list[bytes]:
    """PROOF(first, D[n]) over hashed leaves (the reference, for tests and small logs)."""
    return [root_of_hashes(hashes[a:b]) for a, b in consistency_ranges(first, len(hashes))]


class ConsistencyCollector:
    """Builds PROOF(first, D[second]) while the leaves stream past once, in O(log n) memory."""

    def __init__(self, first: int, second: int) -> None:
        self.first = first
        self.second = second
        self._ranges = consistency_ranges(first, second)
        self._order = sorted(range(len(self._ranges)), key=lambda i: self._ranges[i][0])
        self._trees = [CompactRange() for _ in self._ranges]
        self._next = 0  # index into _order of the range the next leaves may fall in
        self._index = 0

    def add(self, hashed_leaf: bytes) -> None:
        index = self._index
        self._index += 1
        while self._next < len(self._order):
            start, end = self._ranges[self._order[self._next]]
            if index < start:
                return
            if index < end:
                self._trees[self._order[self._next]].append_hash(hashed_leaf)
                return
            self._next += 1

    def proof(self) -> list[bytes]:
        if self._index != self.second:
            raise ValueError(f"saw {self._index} leaves, not {self.second}")
        return [tree.root() for tree in self._trees]


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether ``proof`` shows that the tree of ``second`` leaves with ``second_root`` extends
    the tree of ``first`` leaves with ``first_root`` (RFC 9162 section 2.1.4.2)."""
    if not 0 <= first <= second:
        return False
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # an exact power of two
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_root and sr == second_root
