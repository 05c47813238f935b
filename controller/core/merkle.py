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

    def append_subtree(self, level: int, subtree_root: bytes) -> None:
        """The next ``2**level`` leaves at once, by the root of their perfect subtree; the size
        must be a multiple of ``2**level`` (the subtree is then one of the log's own)."""
        if self.size & ((1 << level) - 1):
            raise ValueError(f"a subtree of {1 << level} leaves cannot start at leaf {self.size}")
        node = subtree_root
        index = self.size >> level
        while index & 1:
            node = node_hash(self.hashes.pop(), node)
            index >>= 1
        self.hashes.append(node)
        self.size += 1 << level

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


def fold(nodes: Sequence[bytes]) -> bytes:
    """The hash of perfect subtrees side by side, folded from the right: the root of a tree
    whose compact range they are (RFC 6962's MTH, with ``CompactRange.root``)."""
    if not nodes:
        return EMPTY_ROOT
    node = nodes[-1]
    for left in reversed(nodes[:-1]):
        node = node_hash(left, node)
    return node


class Subtrees:
    """Every perfect subtree of the log that lies inside leaves ``begin``..``begin + n - 1``,
    built level by level from their ``n`` leaf hashes (n - 1 node hashes at most), so that a
    run of leaves checked apart from the rest of the log hands back a few subtree roots, not
    its leaves. ``nodes(start, stop)`` splits leaves ``start``..``stop - 1`` into the fewest
    of them (each aligned: its first leaf is a multiple of its size)."""

    def __init__(self, begin: int, hashed_leaves: list[bytes]) -> None:
        self.begin = begin
        self.end = begin + len(hashed_leaves)
        self._levels = [hashed_leaves]
        self._offsets = [begin]  # the index, in its level, of each level's first node
        level, offset = hashed_leaves, begin
        sha256 = hashlib.sha256
        while len(level) > 1 + (offset & 1):
            if offset & 1:  # its first node is a right child: its sibling lies before begin
                level = level[1:]
                offset += 1
            level = [
                sha256(b"\x01" + left + right).digest()
                for left, right in zip(level[::2], level[1::2], strict=False)
            ]
            offset >>= 1
            self._levels.append(level)
            self._offsets.append(offset)

    def node(self, level: int, first: int) -> bytes:
        """The root of the subtree of ``2**level`` leaves from leaf ``first``."""
        if first & ((1 << level) - 1) or first < self.begin or first + (1 << level) > self.end:
            raise ValueError(f"no subtree of {1 << level} leaves from leaf {first} here")
        return self._levels[level][(first >> level) - self._offsets[level]]

    def nodes(self, start: int, stop: int) -> list[tuple[int, bytes]]:
        """Leaves ``start``..``stop - 1`` as (level, root) of aligned perfect subtrees, in order."""
        if not self.begin <= start <= stop <= self.end:
            raise ValueError(f"leaves {start}..{stop - 1} are not all here")
        found = []
        while start < stop:
            level = (stop - start).bit_length() - 1
            if start:
                level = min(level, (start & -start).bit_length() - 1)
            found.append((level, self.node(level, start)))
            start += 1 << level
        return found

    def local_root(self, stop: int) -> bytes:
        """``fold`` of the subtrees of leaves ``begin``..``stop - 1`` taken largest first (the
        split of ``stop - begin`` into powers of two). When ``begin`` is a multiple of a power
        of two at least ``stop - begin``, the root of the whole tree of ``stop`` leaves is
        ``fold`` of the compact range of the first ``begin`` leaves followed by this."""
        levels, begin, sha256 = self._levels, self.begin, hashlib.sha256
        size = stop - begin
        if not 0 < size <= self.end - begin or (begin and (begin & -begin) < size):
            raise ValueError(f"leaves {begin}..{stop - 1} are not a tree's last subtrees")
        level = (size & -size).bit_length() - 1
        node = levels[level][((begin + size - (1 << level)) >> level) - self._offsets[level]]
        size >>= level + 1
        level += 1
        while size:
            if size & 1:
                first = begin + ((size - 1) << level)
                left = levels[level][(first >> level) - self._offsets[level]]
                node = sha256(b"\x01" + left + node).digest()
            size >>= 1
            level += 1
        return node


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

    def add_subtree(self, level: int, subtree_root: bytes) -> None:
        """The next ``2**level`` leaves at once, by the root of their (aligned) subtree, which
        must not straddle a boundary of the proof's ranges (see ``boundaries``)."""
        start = self._index
        stop = start + (1 << level)
        self._index = stop
        while self._next < len(self._order):
            first, end = self._ranges[self._order[self._next]]
            if stop <= first:
                return
            if first <= start and stop <= end:
                self._trees[self._order[self._next]].append_subtree(level, subtree_root)
                if stop == end:
                    self._next += 1
                return
            if start < end:
                raise ValueError(f"leaves {start}..{stop - 1} straddle a range of the proof")
            self._next += 1

    def boundaries(self) -> list[int]:
        """Where the proof's ranges start and end: a subtree added whole lies between two."""
        return sorted({edge for edges in self._ranges for edge in edges})

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
    return _rfc9162_consistency(first, second, first_root, second_root, proof)


def _rfc9162_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 section 2.1.4.2's steps, for 0 < ``first`` < ``second``."""
    if not proof:  # 1
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # 2: an exact power of two
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1  # 3
    while fn & 1:  # 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]  # 5
    for c in path[1:]:  # 6
        if sn == 0:  # 6a
            return False
        if fn & 1 or fn == sn:  # 6b
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1  # 6c
        sn >>= 1
    return sn == 0 and fr == first_root and sr == second_root  # 7
