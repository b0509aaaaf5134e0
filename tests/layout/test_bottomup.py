"""Bottom-up block assignment (§6.2): the heap-based greedy equals the textbook greedy, every
block has ≥ b rows, blocks partition the rows, truncation changes no query's block set, and the
merge's own cost bookkeeping agrees with the one cost model."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _layout_fixtures import Box, LessThan, candidate_cuts, fig2_table, fig2_workload
from pando_iceberg.layout import Layout, assign_blocks, build_trees, merge_blocks
from pando_iceberg.layout.bottomup import ktuple_returns, route_ktuples
from pando_iceberg.layout.cost import WeightedPopcount, block_costs, normalize_queries, pack_query_bits, side_matrix
from pando_iceberg.layout.ktuple import distinct_ktuples, radices_of
from pando_iceberg.layout.tree import cut_table


def _reference_greedy(returned: np.ndarray, rows: np.ndarray, weights: np.ndarray, b: float) -> np.ndarray:
    """Literal §6.2 steps 3-5: recompute every pair (with a block below b) every round."""
    k, n, _ = returned.shape
    members = [[i] for i in range(n)]
    ret = [returned[:, i, :].copy() for i in range(n)]
    size = [int(r) for r in rows]
    alive = list(range(n))

    def cost(r, s):
        return s * float(weights @ np.logical_and.reduce(r, axis=0))

    while len(alive) > 1 and any(size[i] < b for i in alive):
        best = None
        for i in alive:
            if size[i] >= b:
                continue
            for j in alive:
                if j == i:
                    continue
                d = cost(ret[i] | ret[j], size[i] + size[j]) - cost(ret[i], size[i]) - cost(ret[j], size[j])
                key = (d, size[i] + size[j], i, j)
                if best is None or key < best:
                    best = key
        _, _, i, j = best
        s, o = min(i, j), max(i, j)
        ret[s] = ret[s] | ret[o]
        size[s] += size[o]
        members[s] += members[o]
        alive.remove(o)
    out = np.empty(n, dtype=np.int32)
    for bid, slot in enumerate(sorted(alive)):
        out[members[slot]] = bid
    return out


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3), n=st.integers(1, 40), q=st.integers(1, 70),
       b=st.integers(1, 40), m=st.sampled_from([1, 2, 8]))
def test_heap_greedy_matches_reference(seed, k, n, q, b, m):
    rng = np.random.default_rng(seed)
    returned = rng.random((k, n, q)) < rng.uniform(0.1, 0.9)
    rows = rng.integers(1, 15, n)
    weights = rng.integers(0, 4, q).astype(float)  # integer weights: ties are exact
    got, stats = merge_blocks(returned, rows, weights, b, candidates=m, split_oversized=False)
    want = _reference_greedy(returned, rows, weights, b)
    assert np.array_equal(got, want)
    block_rows = np.bincount(got, weights=rows)
    if rows.sum() >= b:
        assert block_rows.min() >= b
    else:
        assert len(block_rows) == 1
    # The merger's cost equals the one cost model on the merged bitsets.
    bits = np.stack([pack_query_bits(np.stack([returned[t][got == blk].any(axis=0) for blk in range(len(block_rows))]))
                     for t in range(k)])
    assert stats["cost"] == pytest.approx(block_costs(bits, block_rows, WeightedPopcount(weights)).sum())


def test_weighted_popcount_paths_agree():
    rng = np.random.default_rng(3)
    mask = rng.random((50, 150)) < 0.4
    bits = pack_query_bits(mask)
    few = rng.integers(0, 3, 150).astype(float)
    many = rng.random(150) * 10  # > 16 distinct weights: byte lookup table path
    for w in (few, many):
        assert np.allclose(WeightedPopcount(w)(bits), mask.astype(float) @ w)


def _trees(seed: int, k: int, b: int, n: int) -> tuple[pa.Table, list, list]:
    """A random two-column table, 30 range queries on it, and k trees learned from them."""
    rng = np.random.default_rng(seed)
    table = pa.table({"x": rng.integers(0, 100, n), "y": rng.integers(0, 100, n)})
    qs = []
    for _ in range(30):
        lo = int(rng.integers(0, 90))
        qs.append(Box.of(**{["x", "y"][rng.integers(2)]: (lo, lo + int(rng.integers(0, 30)))}))
    return table, qs, build_trees(table, candidate_cuts(qs), qs, k, max(1, b // 3))


def _layout(seed: int, k: int, b: int, n: int = 300) -> tuple[Layout, pa.Table, list]:
    table, qs, trees = _trees(seed, k, b, n)
    return Layout.from_assignment(assign_blocks(trees, table, qs, b)), table, qs


@pytest.mark.parametrize("seed,k,b", [(0, 1, 20), (1, 2, 25), (2, 3, 10), (3, 4, 40), (4, 2, 500)])
def test_blocks_partition_rows_and_respect_b(seed, k, b):
    layout, table, qs = _layout(seed, k, b)
    blocks = layout.route(table)
    counts = np.bincount(blocks, minlength=layout.num_blocks)
    assert counts.sum() == table.num_rows  # every row in exactly one block
    assert np.array_equal(counts, layout.block_rows)
    if table.num_rows >= b:
        assert counts.min() >= b
    else:
        assert layout.num_blocks == 1


@pytest.mark.parametrize("seed,k,b", [(5, 1, 15), (6, 2, 20), (7, 3, 12), (8, 4, 30)])
def test_truncation_changes_no_query_block_set(seed, k, b):
    layout, table, qs = _layout(seed, k, b)
    rng = np.random.default_rng(seed)
    probes = list(qs) + [Box.of(x=(int(a), int(a) + 9), y=(int(c), int(c) + 30))
                         for a, c in rng.integers(0, 100, (40, 2))]
    full_leaves = sum(len(t.leaves()) for t in layout.trees)
    trunc_leaves = sum(len(t.leaves()) for t in layout.truncated)
    assert trunc_leaves <= full_leaves
    for f in probes:
        a, _ = layout.blocks_for(f, truncated=True)
        b_, _ = layout.blocks_for(f, truncated=False)
        assert np.array_equal(a, b_), f
    # After truncation, no inner node has two leaf children with the same block set.
    for tree, lb in zip(layout.truncated, layout.leaf_blocks):
        for node in tree.inner_nodes():
            t, f = tree.true_child[node], tree.not_true_child[node]
            if tree.is_leaf(t) and tree.is_leaf(f):
                assert not np.array_equal(lb[t], lb[f])


def test_truncation_collapses_identical_children():
    """A cut whose children end up in the same block is removed (§6.2, Fig. 5 → Fig. 2c)."""
    table = pa.table({"x": np.arange(40)})
    qs = [Box.of(x=(0, 9)), Box.of(x=(10, 19)), Box.of(x=(20, 29)), Box.of(x=(30, 39))]
    cuts = [LessThan("x", 10), LessThan("x", 20), LessThan("x", 30)]
    trees = build_trees(table, cuts, qs, 1, 1)
    assert len(trees[0].leaves()) == 4
    layout = Layout.from_assignment(assign_blocks(trees, table, qs, 20))
    assert layout.num_blocks == 2
    assert len(layout.truncated[0].leaves()) == 2
    assert [len(layout.leaf_blocks[0][leaf]) for leaf in layout.truncated[0].leaves()] == [1, 1]


def test_bottom_up_cost_is_the_layout_cost():
    table = fig2_table()
    qs = fig2_workload()
    cuts = candidate_cuts(qs)
    trees = build_trees(table, cuts, qs, 2, 40)
    a = assign_blocks(trees, table, qs, 100)
    layout = Layout.from_assignment(a)
    assert a.cost == pytest.approx(layout.cost(qs, truncated=False))
    assert a.cost == pytest.approx(layout.cost(qs, truncated=True))


def _merge_inputs(seed: int, k: int, b: int, n: int = 400):
    """The inputs of ``merge_blocks`` for ``_trees``' table, queries and trees."""
    table, qs, trees = _trees(seed, k, b, n)
    filters, weights = normalize_queries(qs)
    cuts, cut_column = cut_table(trees)
    uniq, inv = distinct_ktuples(route_ktuples(trees, table), radices_of(trees))
    rows = np.bincount(inv, minlength=len(uniq))
    returned = ktuple_returns(trees, uniq, side_matrix(filters, cuts), cut_column)
    return returned, rows, weights, trees, uniq


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 3), b=st.integers(5, 80))
def test_oversized_blocks_split_into_parts_of_b_rows_at_lower_cost(seed, k, b):
    returned, rows, weights, trees, uniq = _merge_inputs(seed, k, b)
    plain, ps = merge_blocks(returned, rows, weights, b, trees=trees, ktuples=uniq, split_oversized=False)
    got, gs = merge_blocks(returned, rows, weights, b, trees=trees, ktuples=uniq)
    for blk in range(gs["blocks"]):  # a refinement of the greedy's blocks
        assert len(set(plain[got == blk].tolist())) == 1
    assert gs["blocks"] == ps["blocks"] + gs["split_blocks"]
    assert np.bincount(got, weights=rows).min() >= b
    assert gs["cost"] <= ps["cost"] + 1e-9
    if gs["split_blocks"]:
        assert gs["cost"] < ps["cost"]
    block_rows = np.bincount(got, weights=rows)
    bits = np.stack([pack_query_bits(np.stack([returned[t][got == blk].any(axis=0) for blk in range(len(block_rows))]))
                     for t in range(len(trees))])
    assert gs["cost"] == pytest.approx(block_costs(bits, block_rows, WeightedPopcount(weights)).sum())


def test_greedy_leaves_oversized_blocks_that_the_split_pass_divides():
    """The greedy lets small blocks join large ones; on these inputs it leaves blocks of ≥ 2b
    rows, and the split pass divides some (the property test above checks how)."""
    splits = 0
    for seed in range(6):
        returned, rows, weights, trees, uniq = _merge_inputs(seed, 2, 20)
        plain, _ = merge_blocks(returned, rows, weights, 20, trees=trees, ktuples=uniq, split_oversized=False)
        assert np.bincount(plain, weights=rows).max() >= 40
        splits += merge_blocks(returned, rows, weights, 20, trees=trees, ktuples=uniq)[1]["split_blocks"]
    assert splits > 0
