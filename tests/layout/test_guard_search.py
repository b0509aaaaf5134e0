"""The guard's bounded search (``workload/in_block.py``: ``order_trees``, ``merged_layout``,
``guard_multipliers``; ``spark/rewrite.learn_layout`` drives them): the table's current order as
one more tree before the unconstrained layout's (nothing learned again), and §6.2's blocks of
their k-tuples merged with the constraint priced into the draws' weights. Pure Python: the date-ordered table of
``test_guard.py`` (files of B rows by day), whose week template the unconstrained layouts read
several times more of."""

import numpy as np
import pyarrow as pa

from pando_iceberg.expr import TableFilter
from pando_iceberg.layout import Evaluations, build_layout
from pando_iceberg.workload.in_block import (
    GUARD_WEIGHTS,
    TemplateGuard,
    TemplateRead,
    between_multipliers,
    files_read,
    guard_multipliers,
    merged_layout,
    order_cuts,
    order_trees,
    select_layout,
    template_reads,
)
from pando_iceberg.workload.templates import expected_workload, template_key

SCHEMA = pa.schema([("d", pa.int64()), ("carrier", pa.string()), ("delay", pa.float64())])
N, B = 12_000, 600
WEEK = "d BETWEEN ? AND ?"


def _f(sql):
    return TableFilter(sql, SCHEMA, table="t")


def _setting():
    rng = np.random.default_rng(0)
    table = pa.table({"d": np.sort(rng.integers(0, 360, N)), "carrier": [f"c{i}" for i in rng.integers(0, 10, N)],
                      "delay": rng.exponential(20.0, N)}, schema=SCHEMA)
    train = ([(_f(f"carrier = 'c{c}'"), 3.0) for c in (1, 4, 7)]
             + [(_f(f"delay > {v}"), 3.0) for v in (40, 60, 80)]
             + [(_f(f"d BETWEEN {a} AND {a + 6}"), 1.0) for a in (30, 150, 270)])
    wl = expected_workload(train, table, draws=16, seed=1, validation_draws=16)
    now = files_read(build_layout(table, [], wl.queries, 1, B), table, wl.validation, B, None)
    files = np.array_split(np.arange(N), N // B)
    d = table.column("d").to_numpy()
    return table, wl, now, order_cuts({"d": ([d[i].min() for i in files], [d[i].max() for i in files])}, SCHEMA)


def test_multipliers_grow_with_each_templates_excess_and_stop_at_the_heaviest_weight():
    guard = TemplateGuard(1.1, [TemplateRead("a", 0.1, 0.22, 0.11), TemplateRead("b", 0.5, 0.3, 0.55),
                                TemplateRead("c", 0.1, 10.0, 0.11)])
    m = guard_multipliers(guard)
    assert m == {"a": 4.0, "c": float(GUARD_WEIGHTS[-1])}  # (0.22 / 0.11)²; b holds: not weighed
    assert guard_multipliers(guard, {"a": 4.0, "b": 2.0})["a"] == 16.0  # multiplied, not reset
    assert guard_multipliers(guard, {"b": 2.0})["b"] == 2.0


def test_the_order_tree_keeps_the_date_template_where_the_unconstrained_layouts_do_not():
    table, wl, now, cuts = _setting()
    ev = Evaluations(table)
    free = [(build_layout(table, wl.candidate_cuts(), wl.queries, k, B, evaluations=ev), None) for k in (1, 2, 3)]
    week = [(f, w) for f, w in wl.queries if template_key(f) == WEEK]
    unconstrained = select_layout(free, table, wl.validation, B).index
    trees = order_trees(table, cuts, week, free[unconstrained][0].trees, B, evaluations=ev)
    assert len(trees) == free[unconstrained][0].k + 1
    order_keys = {c.key for c in cuts}
    assert {c.key for c in trees[0].node_cut if c is not None} <= order_keys  # tree 1: the files' bounds only
    assert len(trees[0].leaves()) > 1

    def merged(m):
        return merged_layout(trees, table, [(f, w * m if template_key(f) == WEEK else w) for f, w in wl.queries],
                             B, evaluations=ev), None

    candidates = free + [merged(m) for m in (1.0, 4.0, 16.0, 64.0)]
    choice = select_layout(candidates, table, wl.validation, B, now=now, bound=1.1, file_fraction=B / N)
    assert not any(choice.holds[:3])  # the unconstrained objective sacrifices the week
    assert choice.holds[-1] and choice.index >= 3 and choice.guard is not None and choice.guard.holds
    ratios = [next(t.ratio for t in g.templates if t.template == WEEK) for g in choice.guards[3:]]
    assert ratios[-1] <= 1.1 < ratios[0]  # priced in, the week reads less
    week_now = template_reads(now, wl.validation)[WEEK]
    kept = template_reads(files_read(candidates[choice.index][0], table, wl.validation, B, None), wl.validation)
    assert kept[WEEK] <= 1.1 * week_now + B / N


def test_multipliers_between_a_breaking_and_a_holding_merge_are_their_geometric_mean():
    mid = between_multipliers({"a": 4.0, "b": 16.0}, {"a": 16.0, "c": 4.0})
    assert mid == {"a": 8.0, "b": 4.0, "c": 2.0}  # a template absent from one set weighs 1 there
    assert between_multipliers({}, {}) == {}
