"""Shared evaluations (layout/evaluations.py): the layouts learned and measured with one
``Evaluations`` per sample are exactly those learned without it, and each (filter, cut) is asked
of the filter's own ``sides`` once, however many layouts use it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from _layout_fixtures import Box, Equals, LessThan

from pando_iceberg.expr import TableFilter
from pando_iceberg.layout import Evaluations, build_layout, evaluate_cuts, side_matrix
from pando_iceberg.workload.in_block import choose_in_block_order, files_read, select_layout
from pando_iceberg.workload.templates import expected_workload

SCHEMA = pa.schema([("x", pa.float64()), ("y", pa.int64()), ("s", pa.string())])


class Counting:
    """A filter that counts the questions asked of it (the real filter answers them)."""

    def __init__(self, inner):
        self.inner = inner
        self.asked = 0

    def sides(self, cut):
        self.asked += 1
        return self.inner.sides(cut)


class CountingFilter(TableFilter):
    """A TableFilter that counts the questions asked of it."""

    asked = 0

    def sides(self, cut):
        self.asked += 1
        return super().sides(cut)


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    x = rng.random(n) * 100.0
    x[rng.random(n) < 0.05] = np.nan
    return pa.table({"x": pa.array(x, mask=rng.random(n) < 0.05), "y": rng.integers(0, 500, n),
                     "s": pa.array(rng.choice(["a", "b", "c", "d"], n))}, schema=SCHEMA)


def _workload(seed: int, n: int, draws: int = 4):
    sample = _table(n, seed)
    rng = np.random.default_rng(seed)
    train = []
    for _ in range(8):
        a, b = sorted(rng.integers(0, 500, 2).tolist())
        x = float(rng.integers(0, 90))
        sql = [f"y BETWEEN {a} AND {b}", f"x >= {x} AND x < {x + 10} AND s IN ('a', 'c')",
               f"s = '{rng.choice(['a', 'b', 'c', 'd'])}' AND y < {b}", f"x IS NULL OR y > {a}"][int(rng.integers(4))]
        train.append((TableFilter(sql, SCHEMA, table="t"), float(rng.integers(1, 3))))
    train += train[:3]  # the same filters again: asked once
    train.append((TableFilter(train[0][0].to_sql(), SCHEMA, table="t"), 1.0))  # the same SQL, another object
    expected = expected_workload(train, sample, draws, seed, validation_draws=draws)
    cuts: dict = {}
    for f, _ in expected.queries:
        for c in f.candidate_cuts():
            cuts.setdefault(c.key, c)
    return sample, list(cuts.values()), expected


def test_sides_equal_side_matrix_and_each_distinct_question_is_asked_once():
    sample, cuts, expected = _workload(3, 800)
    filters = [f for f, _ in expected.queries]
    ev = Evaluations(sample)
    want = side_matrix(filters, cuts)
    got = ev.sides(filters, cuts)
    assert np.array_equal(got.may_true, want.may_true) and np.array_equal(got.may_not_true, want.may_not_true)
    # A subset of the cuts in another order, and new filters: the same answers as asked afresh.
    sub = cuts[::-3]
    both = filters[:5] + [f for f, _ in expected.validation]
    again = ev.sides(both, sub)
    want = side_matrix(both, sub)
    assert np.array_equal(again.may_true, want.may_true) and np.array_equal(again.may_not_true, want.may_not_true)
    # Questions: one per distinct (filter, cut), whatever is asked again.
    wrapped = [Counting(f) for f in filters[:6]]
    ev2 = Evaluations(sample)
    ev2.sides(wrapped + wrapped[:2], cuts)
    ev2.sides(wrapped, cuts[:4])
    assert [w.asked for w in wrapped] == [len(cuts)] * 6
    # Filters with the same SQL share their answers; a filter that is not a TableFilter is its own.
    twins = [CountingFilter(filters[0].to_sql(), SCHEMA, table="t") for _ in range(2)]
    got = Evaluations(sample).sides(twins, cuts)
    assert twins[0].asked + twins[1].asked == len(cuts)
    assert np.array_equal(got.may_true[0], got.may_true[1])


def test_masks_equal_evaluate_cuts_and_are_evaluated_once():
    sample, cuts, _ = _workload(5, 500)
    ev = Evaluations(sample)
    assert np.array_equal(ev.masks(cuts), evaluate_cuts(cuts, sample))
    first = ev.mask_map(cuts[:3])
    assert all(first[c.key] is ev.mask_map([c])[c.key] for c in cuts[:3])  # kept, not evaluated again
    assert ev.masks([]).shape == (0, sample.num_rows)


def _same_layout(a, b) -> None:
    assert a.k == b.k
    for ta, tb in zip(a.trees, b.trees):
        assert ta.num_nodes == tb.num_nodes
        assert [getattr(c, "key", None) for c in ta.node_cut] == [getattr(c, "key", None) for c in tb.node_cut]
        assert list(ta.true_child) == list(tb.true_child) and list(ta.not_true_child) == list(tb.not_true_child)
    assert np.array_equal(a.ktuples, b.ktuples)
    assert np.array_equal(a.ktuple_block, b.ktuple_block)
    assert np.array_equal(a.block_rows, b.block_rows)
    assert np.array_equal(a.workload_sides.may_true, b.workload_sides.may_true)
    assert np.array_equal(a.workload_sides.may_not_true, b.workload_sides.may_not_true)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layouts_and_their_measures_are_the_same_with_shared_evaluations(seed):
    sample, cuts, expected = _workload(seed, 3000)
    ev = Evaluations(sample)
    learned, shared = [], []
    for k in (1, 2, 3):
        plain = build_layout(sample, cuts, expected.queries, k, 150.0)
        with_ev = build_layout(sample, cuts, expected.queries, k, 150.0, evaluations=ev)
        _same_layout(plain, with_ev)
        assert plain.cost(expected.queries) == with_ev.cost(expected.queries)
        order = choose_in_block_order(plain, sample, expected.queries, 150.0)
        order_ev = choose_in_block_order(with_ev, sample, expected.queries, 150.0, evaluations=ev)
        assert order == order_ev
        for column in (None, order.column):
            assert np.array_equal(files_read(plain, sample, expected.validation, 150.0, column),
                                  files_read(with_ev, sample, expected.validation, 150.0, column, evaluations=ev))
        learned.append((plain, order.column))
        shared.append((with_ev, order_ev.column))
    assert select_layout(learned, sample, expected.validation, 150.0) == \
        select_layout(shared, sample, expected.validation, 150.0, evaluations=ev)


@pytest.mark.parametrize("seed", range(6))
def test_duck_typed_filters_give_the_same_layout(seed):
    rng = np.random.default_rng(seed)
    n = 600
    table = pa.table({c: pa.array(rng.integers(0, 30, n), mask=rng.random(n) < 0.1) for c in "ab"})
    cols, values = rng.choice(["a", "b"], 30), rng.integers(1, 30, 30)
    made = [LessThan(str(c), int(v)) for c, v in zip(cols, values)] + [Equals("a", int(v)) for v in values[:5]]
    cuts = list({c.key: c for c in made}.values())
    qs = []
    for _ in range(20):
        lo = int(rng.integers(0, 30))
        spec = (lo, lo + int(rng.integers(0, 8)), bool(rng.random() < 0.2))
        qs.append((Box.of(**{str(rng.choice(["a", "b"])): spec}), float(rng.integers(1, 4))))
    ev = Evaluations(table)
    for k in (1, 2, 3):
        _same_layout(build_layout(table, cuts, qs, k, 40.0), build_layout(table, cuts, qs, k, 40.0, evaluations=ev))


def test_evaluations_of_another_sample_are_refused():
    sample, cuts, expected = _workload(1, 300)
    with pytest.raises(ValueError, match="another sample"):
        build_layout(sample, cuts, expected.queries, 1, 50.0, evaluations=Evaluations(_table(300, 9)))
