"""One §5 traversal (cost.py's ``traverse`` over a ``Forest``, issue 18 item 4): the planner's
``Layout.blocks_for`` and its explain record, the cost model (``Layout.scanned``/``cost``,
``workload_cost``) and ``reach_matrix`` all agree with a plain per-filter walk of the trees,
written here as the oracle (the recursive definition of §5)."""

from __future__ import annotations

import numpy as np
import pytest

from test_soundness import _cuts, _filter, _table
from pando_iceberg.layout import Layout, ObservedKTuples, assign_blocks, build_trees
from pando_iceberg.layout.cost import reach_matrix, side_matrix, workload_cost


def _walk(tree, leaf_blocks, num_blocks, flt):
    """The oracle: a depth-first walk from the root, skipping the sides the filter excludes."""
    leaves, decisions, stack = [], [], [0]
    while stack:
        n = stack.pop()
        cut = tree.node_cut[n]
        if cut is None:
            leaves.append(n)
            continue
        may_true, may_not = flt.sides(cut)
        if may_true:
            stack.append(tree.true_child[n])
        else:
            decisions.append((n, cut.key, "TRUE"))
        if may_not:
            stack.append(tree.not_true_child[n])
        else:
            decisions.append((n, cut.key, "NOT-TRUE"))
    mask = np.zeros(num_blocks, dtype=bool)
    for leaf in leaves:
        mask[np.asarray(leaf_blocks.get(leaf, ()), dtype=np.int64)] = True
    return sorted(leaves), sorted(decisions, key=lambda d: d[0]), mask


def _layout(seed: int, k: int, finalize: bool) -> tuple[Layout, list]:
    rng = np.random.default_rng(seed)
    table = _table(rng, 300)
    sample = table.take(np.sort(rng.choice(300, 120, replace=False)))
    cuts = _cuts(rng, 14)
    workload = [_filter(rng) for _ in range(12)]
    layout = Layout.from_assignment(assign_blocks(build_trees(sample, cuts, workload, k, 3), sample, workload, 8))
    if finalize:
        layout.finalize(ObservedKTuples.combine(layout.observed_ktuples(table.slice(i, 100)) for i in (0, 100, 200)))
    return layout, [_filter(rng) for _ in range(40)]


@pytest.mark.parametrize("seed", range(6))
def test_planner_and_cost_model_share_one_traversal(seed):
    layout, filters = _layout(seed, 1 + seed % 4, finalize=seed % 2 == 0)
    for truncated in (True, False):
        trees = layout.truncated if truncated else layout.trees
        lbs = layout.leaf_blocks if truncated else layout.full_leaf_blocks
        scanned = layout.scanned(filters, truncated=truncated)
        per_query = layout.cost(filters, truncated=truncated, per_query=True)
        assert np.array_equal(per_query, workload_cost(trees, lbs, layout.block_rows, side_matrix(filters, layout.cuts),
                                                       layout.cut_index, np.ones(len(filters)), per_query=True))
        unsatisfiable = side_matrix(filters, layout.cuts).unsatisfiable
        for q, f in enumerate(filters):
            blocks, why = layout.blocks_for(f, truncated=truncated)
            if unsatisfiable[q] and why.unsatisfiable_by is None:
                # the planner asks only the cuts it meets (Forest.reached_sides) and met none that
                # empties f: it scans what it reaches, a superset of the cost model's nothing
                assert per_query[q] == 0 and not scanned[q].any()
            else:
                assert np.array_equal(np.flatnonzero(scanned[q]), blocks)
                assert per_query[q] == layout.block_rows[blocks].sum()
            if why.unsatisfiable_by is not None:
                assert len(blocks) == 0 and why.trees == []
                continue
            keep = np.ones(layout.num_blocks, dtype=bool)
            for t, (tree, lb) in enumerate(zip(trees, lbs)):
                leaves, decisions, mask = _walk(tree, lb, layout.num_blocks, f)
                scan = why.trees[t]
                assert scan.tree == t and scan.leaves == leaves
                assert [(d.node, d.cut_key, d.skipped) for d in scan.decisions] == decisions
                assert np.array_equal(scan.blocks, np.flatnonzero(mask)) and scan.blocks.dtype == np.int32
                keep &= mask
            assert np.array_equal(blocks, np.flatnonzero(keep)) and blocks.dtype == np.int32


class _Counting:
    """A filter that counts the cuts it is asked about."""

    def __init__(self, f):
        self.f, self.asked = f, []

    def sides(self, cut):
        self.asked.append(cut.key)
        return self.f.sides(cut)


def _met(tree, flt) -> set[str]:
    """The keys of the cuts at the inner nodes a depth-first walk of ``flt`` visits."""
    met, stack = set(), [0]
    while stack:
        n = stack.pop()
        cut = tree.node_cut[n]
        if cut is not None:
            met.add(cut.key)
            may_true, may_not = flt.sides(cut)
            stack += [c for c, ok in ((tree.true_child[n], may_true), (tree.not_true_child[n], may_not)) if ok]
    return met


@pytest.mark.parametrize("seed", range(4))
def test_planning_asks_only_the_cuts_it_meets(seed):
    """``Forest.reached_sides``: each cut at most once, exactly the cuts of the nodes the walk
    visits, with the sides ``side_matrix`` gives them."""
    layout, filters = _layout(20 + seed, 3, finalize=True)
    forest = layout.forest()
    fewer = 0
    for f in filters:
        counting = _Counting(f)
        lazy = forest.reached_sides(counting, layout.cuts)
        full = side_matrix([f], layout.cuts)
        assert len(counting.asked) == len(set(counting.asked))
        assert set(counting.asked) == set().union(*(_met(tree, f) for tree in layout.truncated))
        for key in counting.asked:
            j = layout.cut_index[key]
            assert lazy.may_true[0, j] == full.may_true[0, j] and lazy.may_not_true[0, j] == full.may_not_true[0, j]
        fewer += len(counting.asked) < len(layout.cuts)
    assert fewer > 0  # some filter met only part of the cuts


def test_reach_matrix_is_the_walk():
    layout, filters = _layout(11, 3, finalize=True)
    sides = side_matrix(filters, layout.cuts)
    for tree in layout.truncated + layout.trees:
        reach = reach_matrix(tree, sides, layout.cut_index)
        assert reach.shape == (len(filters), tree.num_nodes)
        for q, f in enumerate(filters):
            leaves = [n for n in tree.leaves() if reach[q, n]]
            expect = [] if sides.unsatisfiable[q] else _walk(tree, {}, 0, f)[0]
            assert leaves == expect


def test_empty_workload_and_blockless_layout():
    layout, filters = _layout(3, 2, finalize=True)
    assert layout.scanned([]).shape == (0, layout.num_blocks) and layout.cost([]) == 0.0
    empty = Layout(layout.trees, np.zeros((0, 2)), np.zeros(0), np.zeros(0))
    blocks, why = empty.blocks_for(filters[0])
    assert len(blocks) == 0 and why.total_blocks == 0
