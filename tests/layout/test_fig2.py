"""The paper's running example (§2, Fig. 2): one tree scans about 1/2 of the table per query,
two trees plus the bottom-up blocks about 2/5. Measured with the one cost model."""

from __future__ import annotations

import numpy as np
import pytest

from _layout_fixtures import candidate_cuts, fig2_table, fig2_workload
from pando_iceberg.layout import Layout, assign_blocks, build_layout, build_trees


def _fraction(layout: Layout, qs) -> float:
    return layout.cost(qs) / len(qs) / layout.block_rows.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_trees_scan_two_fifths_one_tree_one_half(seed):
    table = fig2_table(seed)
    qs = fig2_workload()
    cuts = candidate_cuts(qs)
    one = build_layout(table, cuts, qs, k=1, min_block_rows=100, min_leaf_rows=100)
    two = build_layout(table, cuts, qs, k=2, min_block_rows=100, min_leaf_rows=100)
    f1, f2 = _fraction(one, qs), _fraction(two, qs)
    assert 0.45 <= f1 <= 0.55, f1
    assert 0.38 <= f2 <= 0.42, f2
    assert f2 < f1
    # Fig. 2c: four diagonal blocks and one outlier block; one tree on X, one on Y.
    assert two.num_blocks == 5
    assert [len(t.leaves()) for t in two.truncated] == [4, 4]
    assert sorted({c.col for c in t.cuts()} == {"x"} for t in two.truncated) == [False, True]
    assert sorted({c.col for c in t.cuts()} == {"y"} for t in two.truncated) == [False, True]
    # Every leaf points to its diagonal block and the outlier block.
    for lb in two.leaf_blocks:
        assert all(len(b) == 2 for b in lb.values())


def test_k1_is_the_mto_tree():
    """§6.2: with k = 1 and threshold b, Pando is MTO/qd-tree: one block per leaf, nothing to
    truncate, every leaf ≥ b rows, and the bottom-up phase merges nothing."""
    table = fig2_table(0)
    qs = fig2_workload()
    cuts = candidate_cuts(qs)
    trees = build_trees(table, cuts, qs, 1, 100)
    a = assign_blocks(trees, table, qs, 100)
    layout = Layout.from_assignment(a)
    assert a.merges == 0
    leaves = trees[0].leaves()
    assert layout.num_blocks == len(leaves) == len(layout.truncated[0].leaves())
    assert all(len(layout.leaf_blocks[0][leaf]) == 1 for leaf in leaves)
    assert layout.block_rows.min() >= 100
    # The greedy's first cut is the one that halves the queries' scans (§6.1): X<50 or Y<50.
    assert trees[0].node_cut[0].key in {"x < 50", "y < 50"}
    assert np.array_equal(np.sort(layout.block_rows), np.sort(np.bincount(layout.route(table))))
