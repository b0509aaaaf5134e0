"""The rewrite's routing step (``spark.blocks.route_batches``, the function Spark runs in
``mapInArrow``): its cut answers, computed with one evaluation context per batch and key lookups
kept across batches, route every row as the layout routes it cut by cut; a worker decodes a
payload once and a different payload anew. Plain Arrow, no Spark: the function is what an
executor runs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pando_iceberg.expr import CutOrigin, ExprCut, LiteralCut, TableFilter, cut_masks
from pando_iceberg.layout import build_layout
from pando_iceberg.spark.blocks import BLOCK_COL, KTUPLE_COL, LayoutPayload, ktuple_radices, pack_ktuples, route_batches

SCHEMA = pa.schema([("k", pa.int32()), ("u", pa.uint64()), ("x", pa.float64()), ("s", pa.string())])


def rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    nulls = rng.random(n) < 0.05
    x = rng.normal(0, 10, n)
    x[rng.random(n) < 0.02] = np.nan
    return pa.table({"k": pa.array(rng.integers(-50, 5000, n).astype(np.int32), mask=nulls),
                     "u": pa.array(rng.integers(0, 2**40, n).astype(np.uint64)),
                     "x": pa.array(x, mask=rng.random(n) < 0.05),
                     "s": pa.array(rng.choice(["a", "b", "c", "d"], n), mask=rng.random(n) < 0.05)}, schema=SCHEMA)


def cuts(seed: int) -> list:
    rng = np.random.default_rng(seed)
    origin = CutOrigin("dim", "d_key", "d_attr = 1")
    out: list = [ExprCut(sql, SCHEMA) for sql in ("k < 1000", "x >= 2.5", "s IN ('a', 'c')", "k * 3 > 4000 OR x < 0")]
    out += [LiteralCut("k", rng.integers(0, 5000, int(rng.integers(10, 3000))), origin),
            LiteralCut("k", np.arange(-50, 3000, 3), CutOrigin("dim", "d_key", "d_attr = 2")),
            LiteralCut("u", rng.integers(0, 2**40, 500).astype(np.uint64), CutOrigin("dim", "d_key", "d_attr = 3"))]
    return out


def test_routing_batch_by_batch_is_the_layouts_own_routing():
    sample = rows(4000, 1)
    all_cuts = cuts(2)
    queries = [(TableFilter.from_sql(q, SCHEMA, "t"), 1.0)
               for q in ("k < 1000", "x >= 2.5 AND s = 'a'", "s IN ('a', 'c')", "k * 3 > 4000")]
    layout = build_layout(sample, all_cuts, queries, 2, 400)
    assert len(layout.cuts) >= 2
    literal = {c.key: c.keys_to_bytes() for c in layout.cuts if isinstance(c, LiteralCut)}
    payload = LayoutPayload(layout.to_bytes(), literal)
    data = rows(30_000, 3)
    routed = pa.Table.from_batches(list(route_batches(payload)(iter(data.to_batches(max_chunksize=4096)))))
    # the reference: each cut evaluated on its own over the whole table (Cut.evaluate, no context)
    reference = {c.key: c.evaluate(data) for c in layout.cuts}
    assert set(reference) == set(cut_masks(layout.cuts, data))
    for key, mask in cut_masks(layout.cuts, data).items():
        assert np.array_equal(mask, reference[key]), key
    kt = layout.route_ktuples(data, reference)
    assert np.array_equal(routed.column(KTUPLE_COL).to_numpy(), pack_ktuples(kt, ktuple_radices(layout)))
    assert np.array_equal(routed.column(BLOCK_COL).to_numpy(), layout.route(data, reference))
    assert routed.select(["k", "u", "s"]).equals(data.select(["k", "u", "s"]))  # the rows, as they came
    assert routed.column("x").null_count == data.column("x").null_count
    np.testing.assert_array_equal(routed.column("x").to_numpy(), data.column("x").to_numpy())  # NaN = NaN here


def test_a_worker_decodes_a_payload_once_and_a_different_payload_anew():
    sample = rows(2000, 4)
    queries = [(TableFilter.from_sql("k < 1000", SCHEMA, "t"), 1.0)]
    layout = build_layout(sample, cuts(5), queries, 1, 400)
    literal = {c.key: c.keys_to_bytes() for c in layout.cuts if isinstance(c, LiteralCut)}
    first = LayoutPayload(layout.to_bytes(), literal)
    assert first.load() is LayoutPayload(layout.to_bytes(), dict(literal)).load()
    other = build_layout(sample, cuts(6), [(TableFilter.from_sql("x >= 2.5", SCHEMA, "t"), 1.0)], 1, 400)
    loaded = LayoutPayload(other.to_bytes(), {c.key: c.keys_to_bytes() for c in other.cuts
                                               if isinstance(c, LiteralCut)}).load()
    assert [c.key for c in loaded.cuts] == [c.key for c in other.cuts]
    assert [c.key for c in other.cuts] != [c.key for c in layout.cuts]
