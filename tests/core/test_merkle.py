"""Merkle trees from subtrees (controller/core/merkle.py): a run of leaves hashed apart from the
rest of the log hands back aligned perfect subtrees, and the tree, its roots and its
consistency proofs grown from them are the ones RFC 6962 defines over the leaves."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.merkle import (
    CompactRange,
    ConsistencyCollector,
    Subtrees,
    consistency_proof,
    fold,
    leaf_hash,
    root_of_hashes,
    verify_consistency,
)

LEAVES = [leaf_hash(i.to_bytes(2, "big")) for i in range(300)]


def _prefix(size: int) -> CompactRange:
    tree = CompactRange()
    for hashed in LEAVES[:size]:
        tree.append_hash(hashed)
    return tree


@given(st.data())
def test_subtrees_of_any_run_grow_the_tree_of_its_leaves(data: st.DataObject) -> None:
    begin = data.draw(st.integers(0, 250))
    end = data.draw(st.integers(begin + 1, 300))
    start = data.draw(st.integers(begin, end))
    stop = data.draw(st.integers(start, end))
    run = Subtrees(begin, LEAVES[begin:end])
    tree = _prefix(start)
    for level, node in run.nodes(start, stop):
        assert start % (1 << level) == 0  # aligned: one of the log's own subtrees
        tree.append_subtree(level, node)
        start += 1 << level
    assert tree.size == stop
    assert tree.root() == root_of_hashes(LEAVES[:stop])


@given(st.integers(0, 8), st.integers(1, 300), st.data())
def test_a_checkpoint_in_an_aligned_run_is_the_fold_of_the_tree_before_it(
    level: int, begin_blocks: int, data: st.DataObject
) -> None:
    begin = (begin_blocks << level) % 256
    end = min(300, begin + (1 << level))
    size = data.draw(st.integers(begin + 1, end))
    local = Subtrees(begin, LEAVES[begin:end]).local_root(size)
    assert fold([*_prefix(begin).hashes, local]) == root_of_hashes(LEAVES[:size])


def test_a_run_not_aligned_to_its_length_has_no_local_root() -> None:
    run = Subtrees(6, LEAVES[6:20])  # 6 = 2 * 3: aligned to runs of 2 only
    assert fold([*_prefix(6).hashes, run.local_root(8)]) == root_of_hashes(LEAVES[:8])
    with pytest.raises(ValueError, match="last subtrees"):
        run.local_root(9)


def test_a_subtree_is_appended_only_where_it_is_one_of_the_logs() -> None:
    tree = _prefix(6)
    with pytest.raises(ValueError, match="cannot start"):
        tree.append_subtree(2, LEAVES[0])
    with pytest.raises(ValueError, match="no subtree"):
        Subtrees(6, LEAVES[6:20]).node(2, 6)


@given(st.data())
def test_a_consistency_proof_from_subtrees_cut_at_its_boundaries(data: st.DataObject) -> None:
    second = data.draw(st.integers(1, 300))
    first = data.draw(st.integers(0, second))
    collector = ConsistencyCollector(first, second)
    cuts = {0, second, *collector.boundaries()}
    cuts |= set(data.draw(st.lists(st.integers(0, second), max_size=4)))
    edges = sorted(cuts)
    tree = Subtrees(0, LEAVES[:second])
    for start, stop in itertools.pairwise(edges):
        for level, node in tree.nodes(start, stop):
            collector.add_subtree(level, node)
    proof = collector.proof()
    assert proof == consistency_proof(first, LEAVES[:second])
    first_root, second_root = root_of_hashes(LEAVES[:first]), root_of_hashes(LEAVES[:second])
    assert verify_consistency(first, second, first_root, second_root, proof)


def test_a_subtree_across_a_range_of_the_proof_is_refused() -> None:
    collector = ConsistencyCollector(6, 8)  # ranges [4, 6), [6, 8), [0, 4)
    assert collector.boundaries() == [0, 4, 6, 8]
    with pytest.raises(ValueError, match="straddle"):
        collector.add_subtree(3, root_of_hashes(LEAVES[:8]))
