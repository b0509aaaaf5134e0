"""Validation draws, files pruned by their zone maps, and the choice among layouts of 1..k
trees (workload/templates.py ``validation_draws``, workload/in_block.py ``files_cost`` and
``select_layout``). Pure Python: sample-sized tables, real filters and trees."""

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.expr import TableFilter
from pando_iceberg.layout import build_layout
from pando_iceberg.workload.in_block import files_cost, select_layout, zone_columns
from pando_iceberg.workload.templates import expected_workload, template_key

SCHEMA = pa.schema([("x", pa.float64()), ("y", pa.float64()), ("z", pa.int64())])


def _table(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random(n) * 100.0
    return pa.table({"x": x, "y": x * 2.0 + rng.normal(0, 1.0, n),  # y follows x closely
                     "z": rng.integers(0, 1000, n)}, schema=SCHEMA)


def _f(sql):
    return TableFilter(sql, SCHEMA, table="t")


def _layout(sample, column, queries, k=1):
    """A layout whose trees may cut ``column`` only (its candidate cuts are on it alone)."""
    cut_qs = [(_f(f"{column} < {v}"), 1.0) for v in np.quantile(sample.column(column).to_numpy(), np.linspace(0.05, 0.95, 19))]
    cuts = {c.key: c for f, _ in cut_qs for c in f.candidate_cuts()}
    # the optimizer learns from queries on `column` (so that it cuts), whatever is measured after
    return build_layout(sample, list(cuts.values()), cut_qs, k=k, min_block_rows=400)


def test_validation_draws_are_independent_and_leave_the_learned_draws_unchanged():
    sample = _table()
    train = [(_f(f"x BETWEEN {a} AND {a + 5}"), 1.0) for a in (10, 40, 70)]
    plain = expected_workload(train, sample, draws=8, seed=3)
    both = expected_workload(train, sample, draws=8, seed=3, validation_draws=8)
    assert [f.to_sql() for f, _ in plain.queries] == [f.to_sql() for f, _ in both.queries]
    assert plain.validation == train  # none asked: the training queries themselves
    learned = {f.to_sql() for f, _ in both.queries} - {f.to_sql() for f, _ in train}
    validation = {f.to_sql() for f, _ in both.validation} - {f.to_sql() for f, _ in train}
    assert len(validation) >= 6 and learned != validation  # another random stream
    assert {template_key(f) for f, _ in both.validation} == {template_key(f) for f, _ in train}
    # the template keeps its total weight in both workloads
    assert sum(w for _, w in both.validation) == pytest.approx(sum(w for _, w in train))
    assert sum(w for _, w in both.queries) == pytest.approx(sum(w for _, w in train))


def test_zone_maps_prune_files_inside_blocks_on_a_correlated_column():
    """Blocks cut on z (which the queries never name), files cut along x: a range on y is
    pruned by the files' zone maps on y alone (y follows x), never below the matching rows."""
    sample = _table()
    layout = _layout(sample, "z", [])
    qs = [(_f(f"y BETWEEN {a} AND {a + 10}"), 1.0) for a in range(0, 200, 25)]
    assert [c for c, _ in zone_columns(qs, sample)] == ["y"]
    whole = files_cost(layout, sample, qs, 100, None)  # files of 100 rows in the sample's (random) order
    along_x = files_cost(layout, sample, qs, 100, "x")
    matching = np.mean([np.asarray(f.evaluate(sample)).mean() for f, _ in qs])
    assert matching <= along_x < 0.5 * whole
    assert whole == pytest.approx(1.0, abs=0.05)  # random order: every file spans every y


def test_select_layout_keeps_the_layout_the_validation_draws_read_least():
    sample = _table()
    val = [(_f(f"x BETWEEN {a} AND {a + 4}"), 1.0) for a in range(3, 97, 9)]
    on_x, on_z = _layout(sample, "x", val), _layout(sample, "z", val)
    choice = select_layout([(on_z, None), (on_x, None)], sample, val, 400)
    assert choice.index == 1 and choice.costs[1] < 0.5 * choice.costs[0]
    assert choice.to_json([1, 3])["kept_k"] == 3
    # fewer trees first: an equal later layout does not replace it
    same = select_layout([(on_x, None), (on_x, None)], sample, val, 400)
    assert same.index == 0 and same.costs[0] == same.costs[1]
    with pytest.raises(ValueError, match="at least one layout"):
        select_layout([], sample, val, 400)
