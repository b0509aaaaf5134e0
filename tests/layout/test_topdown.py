"""Top-down construction (§6.1): the incremental benefit bookkeeping equals the cost model, and
the greedy equals the literal "try every (tree, leaf, cut), re-evaluate the cost" algorithm."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from _layout_fixtures import Box, Equals, LessThan
from hypothesis import given, settings
from hypothesis import strategies as st

from pando_iceberg.layout import PartitionTree, build_trees, io_cost, side_matrix
from pando_iceberg.layout.cost import reach_matrix
from pando_iceberg.layout.topdown import TopDown, evaluate_cuts


def _case(seed: int, n: int, ncuts: int, nq: int):
    rng = np.random.default_rng(seed)
    table = pa.table({c: pa.array(rng.integers(0, 12, n), mask=rng.random(n) < 0.1) for c in "ab"})
    cuts, seen = [], set()
    for _ in range(ncuts):
        c = "ab"[rng.integers(2)]
        cut = LessThan(c, int(rng.integers(1, 12))) if rng.random() < 0.7 else Equals(c, int(rng.integers(0, 12)))
        if cut.key not in seen:
            seen.add(cut.key)
            cuts.append(cut)
    qs = []
    for _ in range(nq):
        cons = []
        for c in "ab":
            if rng.random() < 0.6:
                lo = int(rng.integers(0, 12))
                cons.append((c, lo, lo + int(rng.integers(0, 5)), bool(rng.random() < 0.1)))
        qs.append((Box(tuple(cons)), float(rng.integers(1, 4))))
    return table, cuts, qs


def _row_block_cost(trees, cuts, filters, weights, table) -> float:
    """The cost model with every row its own block (the §6.1 assumption)."""
    sides = side_matrix(filters, cuts)
    col = {c.key: i for i, c in enumerate(cuts)}
    masks = {c.key: c.evaluate(table) for c in cuts}
    scanned = np.ones((len(filters), table.num_rows), dtype=bool)
    for tree in trees:
        reach = reach_matrix(tree, sides, col)
        scanned &= reach[:, tree.route(masks, table.num_rows)]
    return io_cost(scanned, np.ones(table.num_rows), weights)


def _reference(table, cuts, qs, k, min_leaf):
    """Literal §6.1: evaluate the full cost for every candidate split, every round."""
    filters = [f for f, _ in qs]
    weights = np.array([w for _, w in qs])
    masks = {c.key: c.evaluate(table) for c in cuts}
    trees = [PartitionTree() for _ in range(k)]
    cost = _row_block_cost(trees, cuts, filters, weights, table)
    while True:
        best = None
        for t, tree in enumerate(trees):
            leaf_of = tree.route(masks, table.num_rows)
            for leaf in tree.leaves():
                rows = leaf_of == leaf
                for ci, cut in enumerate(cuts):
                    nt, size, m = int((rows & masks[cut.key]).sum()), int(rows.sum()), max(1, min_leaf)
                    share = float(np.mean(masks[cut.key]))
                    # a constant cut where, at its share of the table, a side would hold m rows
                    constant = size >= 2 * m and ((nt == 0 and size * share >= m)
                                                  or (nt == size and size * (1 - share) >= m))
                    if (nt < m or size - nt < m) and not constant:
                        continue
                    trial = [x.copy() for x in trees]
                    trial[t].split(leaf, cut)
                    benefit = cost - _row_block_cost(trial, cuts, filters, weights, table)
                    key = (-benefit, t, leaf, ci)
                    if benefit > 1e-9 and (best is None or key < best):
                        best = key
        if best is None:
            return trees
        _, t, leaf, ci = best
        trees[t].split(leaf, cuts[ci])
        cost = _row_block_cost(trees, cuts, filters, weights, table)


def _shape(tree):
    return [(n, tree.node_cut[n].key) for n in tree.inner_nodes()]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3), min_leaf=st.integers(1, 8))
def test_greedy_equals_literal_algorithm(seed, k, min_leaf):
    table, cuts, qs = _case(seed, 40, 8, 6)
    got = build_trees(table, cuts, qs, k, min_leaf, max_ktuples=None)
    want = _reference(table, cuts, qs, k, min_leaf)
    assert [_shape(t) for t in got] == [_shape(t) for t in want]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 4), min_leaf=st.integers(1, 20))
def test_incremental_caches_equal_recomputation(seed, k, min_leaf):
    table, cuts, qs = _case(seed, 200, 20, 15)
    filters = [f for f, _ in qs]
    weights = np.array([w for _, w in qs])
    td = TopDown(evaluate_cuts(cuts, table), side_matrix(filters, cuts), weights, k, min_leaf)
    td.run()
    # Scan matrix and every cached count matrix against a fresh computation.
    masks_f = evaluate_cuts(cuts, table).astype(np.float32)
    for t in range(k):
        for node, leaf in td.leaves[t].items():
            assert np.array_equal(np.sort(np.flatnonzero(td.leaf_of[t] == node)), np.sort(leaf.rows))
            if leaf.A is None:
                continue
            scan = td.scan[:, leaf.rows].astype(np.float32)
            assert np.array_equal(leaf.A, scan @ masks_f[:, leaf.rows].T)
            assert np.array_equal(leaf.S, scan.sum(axis=1))
            assert np.array_equal(leaf.N, masks_f[:, leaf.rows].sum(axis=1))
    stats: dict = {}
    trees = build_trees(table, cuts, qs, k, min_leaf, stats=stats)
    model = _row_block_cost(trees, cuts, filters, weights, table)
    assert stats["final_cost"] == pytest.approx(model)
    assert stats["initial_cost"] - sum(h[3] for h in stats["history"]) == pytest.approx(model)
    # Each split kept both children at >= min_leaf rows, or left one empty (a constant cut).
    masks = {c.key: c.evaluate(table) for c in cuts}
    for tree in trees:
        counts = np.bincount(tree.route(masks, table.num_rows), minlength=tree.num_nodes)
        assert all(counts[leaf] >= min_leaf or counts[leaf] == 0 for leaf in tree.leaves()) \
            or len(tree.leaves()) == 1


def test_max_ktuples_stops_splitting():
    table, cuts, qs = _case(11, 400, 20, 20)
    free: dict = {}
    build_trees(table, cuts, qs, 3, 1, max_ktuples=None, stats=free)
    assert free["ktuples"] > 6
    capped: dict = {}
    trees = build_trees(table, cuts, qs, 3, 1, max_ktuples=6, stats=capped)
    assert capped["ktuples"] <= 6 and "max_ktuples" in capped["stopped_by"]
    masks = {c.key: c.evaluate(table) for c in cuts}
    kt = np.stack([t.route(masks, table.num_rows) for t in trees], axis=1)
    assert len(np.unique(kt, axis=0)) == capped["ktuples"]


def test_correlated_cuts_go_to_different_trees():
    """§6.1: with X ≈ Y, a cut on Y under X's cut has little benefit, so k = 2 puts them in
    different trees."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 100, 2000)
    table = pa.table({"x": x, "y": x + rng.normal(0, 1, 2000)})
    qs = [Box.of(**{c: (lo, lo + 5)}) for lo in range(0, 95, 10) for c in "xy"]
    cuts = [LessThan(c, v) for c in "xy" for v in (25, 50, 75)]
    trees = build_trees(table, cuts, qs, 2, 50)
    cols = [{c.col for c in t.cuts()} for t in trees]
    assert sorted(map(sorted, cols)) == [["x"], ["y"]]


def test_duplicate_cut_keys_are_rejected():
    table = pa.table({"x": [1, 2, 3]})
    with pytest.raises(ValueError, match="unique keys"):
        build_trees(table, [LessThan("x", 2), LessThan("x", 2)], [Box.of(x=(0, 1))], 1, 1)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4), min_leaf=st.integers(1, 20), budget=st.integers(2, 40),
       per_ktuple=st.booleans())
def test_leaf_budget_bounds_the_ktuples_and_keeps_the_caches_exact(seed, k, min_leaf, budget, per_ktuple):
    """§6.1 with one leaf budget for the k trees: the k-tuples on the sample never exceed it, every
    leaf's k-tuples-added count equals one counted afresh, and the benefits still add up to the
    cost model's drop."""
    table, cuts, qs = _case(seed, 200, 20, 15)
    filters = [f for f, _ in qs]
    weights = np.array([w for _, w in qs])
    masks = evaluate_cuts(cuts, table)
    td = TopDown(masks, side_matrix(filters, cuts), weights, k, min_leaf, leaf_budget=budget, per_ktuple=per_ktuple)
    trees = td.run()
    kt = td.leaf_of.T
    assert len(np.unique(kt, axis=0)) == td.num_ktuples <= budget
    for t in range(k):
        for leaf in td.leaves[t].values():
            if leaf.new is None:
                continue
            inside = kt[leaf.rows]
            _, group = np.unique(inside, axis=0, return_inverse=True)
            group = group.reshape(-1)
            true = np.zeros((group.max() + 1, len(cuts)), dtype=np.int64)
            np.add.at(true, group, masks[:, leaf.rows].T.astype(np.int64))
            size = np.bincount(group)[:, None]
            assert np.array_equal(leaf.new, ((true > 0) & (true < size)).sum(axis=0))
    trees = [tree.copy() for tree in trees]
    for tree in trees:
        tree.node_cut = [None if ref is None else cuts[ref.index] for ref in tree.node_cut]
    model = _row_block_cost(trees, cuts, filters, weights, table)
    assert td.current_cost() == pytest.approx(model)
    assert td.stats.initial_cost - sum(h[3] for h in td.stats.history) == pytest.approx(model)


def test_a_cut_constant_on_a_leaf_records_a_correlation():
    """Two columns that move together (a sale's store region and its customer's region): under
    the cut on x, the cut on y is constant, and splitting by it leaves an empty child that the
    queries on y skip: one tree's x cuts serve y's queries. A full table breaking the correlation
    in rows the sample never saw is still planned soundly (the empty leaf points to the block its
    rows went to)."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, 4000)
    table = pa.table({"x": x, "y": x.copy()})
    qs = [Box.of(x=(v, v)) for v in range(4)] + [Box.of(y=(v, v)) for v in range(4)]
    cuts = [LessThan(c, v) for c in "xy" for v in (1, 2, 3)]
    stats: dict = {}
    trees = build_trees(table, cuts, qs, 1, 200, stats=stats)
    masks = {c.key: c.evaluate(table) for c in cuts}
    counts = np.bincount(trees[0].route(masks, table.num_rows), minlength=trees[0].num_nodes)
    assert any(counts[leaf] == 0 for leaf in trees[0].leaves())  # a constant cut's empty child
    # every query, on x or on y, reads only its own value's rows on the sample
    filters, weights = qs, np.ones(len(qs))
    assert _row_block_cost(trees, cuts, filters, weights, table) == pytest.approx(float(table.num_rows) * 2)

    from pando_iceberg.layout import Layout, ObservedKTuples, assign_blocks
    layout = Layout.from_assignment(assign_blocks(trees, table, [(q, 1.0) for q in qs], 1000))
    y_blocks = [len(layout.blocks_for(Box.of(y=(v, v)))[0]) for v in range(4)]
    assert max(y_blocks) < layout.num_blocks
    full = pa.concat_tables([table, pa.table({"x": np.array([0, 3]), "y": np.array([3, 0])})])
    blocks = layout.route(full)
    layout.finalize(ObservedKTuples.combine([layout.observed_ktuples(full)]))
    for f in qs:
        need = np.unique(blocks[f.matches(full)])
        assert set(need) <= set(layout.blocks_for(f)[0].tolist())
