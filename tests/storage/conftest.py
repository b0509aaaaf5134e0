"""Fixtures for the storage tests: a tiny but real Layout (ExprCuts + a LiteralCut) when the
layout engine and the cut model are importable, and a sidecar built from it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pytest

TABLE_UUID = "6a2e2c1e-7d3b-4f0a-9c55-0123456789ab"
HAVE_ENGINE = (importlib.util.find_spec("pando_iceberg.layout") is not None
               and importlib.util.find_spec("pando_iceberg.expr") is not None)


def _tiny_layout():
    from pando_iceberg.expr import CutOrigin, ExprCut, LiteralCut, TableFilter
    from pando_iceberg.layout import build_layout

    rng = np.random.default_rng(7)
    n = 2000
    schema = pa.schema([("qty", pa.int64()), ("custkey", pa.int64())])
    table = pa.table({"qty": pa.array(rng.integers(1, 51, n), mask=rng.random(n) < 0.05),
                      "custkey": rng.integers(0, 300, n)}, schema=schema)
    literal = LiteralCut("custkey", np.arange(0, 300, 3),
                         CutOrigin("customer", "c_custkey", "c_mktsegment = 'BUILDING'", snapshot_id=42))
    cuts = [ExprCut(f"qty < {v}", schema) for v in (10, 25, 40)] + [literal]
    dim = {"customer": pa.schema([("c_custkey", pa.int64()), ("c_mktsegment", pa.string())])}
    wl = ["qty < 10", "qty >= 40", "qty IS NULL",
          "custkey IN (SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING')"]
    filters = [TableFilter.from_sql(s, schema, schemas=dim) for s in wl]
    layout = build_layout(table, cuts, filters, k=2, min_block_rows=100)
    layout.finalize(layout.observed_ktuples(table))
    assert any(hasattr(c, "keys_to_bytes") for c in layout.cuts), "fixture must exercise a literal cut"
    return layout, table, filters


@pytest.fixture(scope="session")
def tiny_layout():
    if not HAVE_ENGINE:
        pytest.skip("pando_iceberg.layout / pando_iceberg.expr not in this checkout")
    return _tiny_layout()


@pytest.fixture()
def sidecar(tiny_layout):
    from pando_iceberg.storage import DataFileRef, LayoutSidecar

    layout = tiny_layout[0]
    files = {b: [DataFileRef(f"file:/wh/db/t/data/block-{b:05d}.parquet", 100 + b, 4096 + b)]
             for b in range(layout.num_blocks)}
    return LayoutSidecar.from_layout(layout, layout_id="0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e", table_uuid=TABLE_UUID,
                                     block_files=files, base_snapshot_id=8_765_432_109_876_543_210 // 10,
                                     base_sequence_number=3, properties={"pando.k": "2"})
