"""The layout engine with the real cut/filter model (pando_iceberg.expr: ExprCut, TableFilter).

Gated at collection time on the module existing in the checkout (it is written concurrently);
when it exists, any failure here is a real failure, nothing is skipped on error."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.layout import Layout, ObservedKTuples, build_layout

HAVE_EXPR = importlib.util.find_spec("pando_iceberg.expr") is not None
pytestmark = pytest.mark.skipif(not HAVE_EXPR, reason="pando_iceberg.expr is not in this checkout")


def test_layout_with_expr_cuts_and_sql_filters():
    from pando_iceberg.expr import ExprCut, TableFilter

    rng = np.random.default_rng(5)
    n = 4000
    schema = pa.schema([("qty", pa.int64()), ("price", pa.float64()), ("flag", pa.string())])
    table = pa.table(
        {
            "qty": pa.array(rng.integers(1, 51, n), mask=rng.random(n) < 0.05),
            "price": pa.array(rng.uniform(0, 1000, n), mask=rng.random(n) < 0.05),
            "flag": pa.array(rng.choice(["A", "N", "R"], n), mask=rng.random(n) < 0.05),
        },
        schema=schema,
    )
    sample = table.take(rng.choice(n, 800, replace=False))
    sqls = [f"qty < {v}" for v in (10, 20, 30, 40)] + [f"price < {v}" for v in (250, 500, 750)] + ["flag = 'A'", "flag = 'R'"]
    cuts = [ExprCut(s, schema) for s in sqls]
    wl = [
        "qty < 10", "qty >= 40", "qty BETWEEN 20 AND 25", "price < 100", "price > 900 AND flag = 'R'",
        "flag = 'A' AND qty < 20", "flag IS NULL", "qty IS NULL OR price < 50", "flag = 'N'",
    ]
    filters = [TableFilter.from_sql(s, schema) for s in wl]
    layout = build_layout(sample, cuts, filters, k=2, min_block_rows=60, min_leaf_rows=30)
    parts = [table.slice(0, 1500), table.slice(1500)]
    layout.finalize(ObservedKTuples.combine(layout.observed_ktuples(p) for p in parts))
    blocks = layout.route(table)
    skipped_any = False
    for f in filters:
        got, why = layout.blocks_for(f)
        need = np.unique(blocks[f.evaluate(table)])
        assert set(need) <= set(got), f"{f}: {why}"
        skipped_any |= len(got) < layout.num_blocks
    assert skipped_any
    back = Layout.from_bytes(layout.to_bytes())  # default decoder: pando_iceberg.expr.cut_from_json
    assert np.array_equal(back.route(table), blocks)
    for f in filters:
        assert np.array_equal(back.blocks_for(f)[0], layout.blocks_for(f)[0])
