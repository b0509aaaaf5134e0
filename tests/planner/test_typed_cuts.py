"""Layouts written before cuts were evaluated with Spark's typed semantics: their cuts over a
computed term are ignored by the planner (both sides), their plain comparisons still decide."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa

from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.layout import FORMAT_VERSION, Layout, build_layout
from pando_iceberg.planner.scan import TYPED_CUTS_VERSION, _IgnoringCuts, untyped_cut_keys

SCHEMA = pa.schema([("a", pa.int32()), ("b", pa.int64())])


def _reheader(data: bytes, version: int) -> bytes:
    head = data[:4] + struct.pack("<H", version) + data[6:12]
    payload = data[16:]
    return head + struct.pack("<I", zlib.crc32(head + payload) & 0xFFFFFFFF) + payload


def _layout() -> tuple[Layout, pa.Table]:
    rng = np.random.default_rng(3)
    n = 4000
    table = pa.table({"a": pa.array(rng.integers(0, 1000, n), pa.int32()), "b": pa.array(rng.integers(0, 1000, n))},
                     schema=SCHEMA)
    cuts = [ExprCut(f"a + 2147483000 < {v}", SCHEMA) for v in (-2147483000, 0)] + \
           [ExprCut(f"b < {v}", SCHEMA) for v in (250, 500, 750)]
    queries = [TableFilter(sql, SCHEMA) for sql in ("a + 2147483000 < 0", "b < 250", "b >= 750", "b < 500")]
    layout = build_layout(table, cuts, queries, k=1, min_block_rows=200, min_leaf_rows=100)
    layout.finalize(layout.observed_ktuples(table))
    return layout, table


def test_a_current_layout_ignores_nothing():
    layout, _ = _layout()
    assert FORMAT_VERSION >= TYPED_CUTS_VERSION
    back = Layout.from_bytes(layout.to_bytes())
    assert back.format_version == FORMAT_VERSION and untyped_cut_keys(back) == set()


def test_an_older_layout_ignores_its_cuts_over_computed_terms():
    layout, _ = _layout()
    old = Layout.from_bytes(_reheader(layout.to_bytes(), TYPED_CUTS_VERSION - 1))
    assert old.format_version == TYPED_CUTS_VERSION - 1
    arithmetic = {c.key for c in old.cuts if "+" in c.key}
    assert arithmetic and untyped_cut_keys(old) == arithmetic
    # the plain comparisons still decide: `b < 250` reads fewer blocks than the whole layout
    plain = TableFilter("b < 250", SCHEMA)
    kept, _ = old.blocks_for(_IgnoringCuts(plain, set(), untyped_cut_keys(old)))
    assert 0 < len(kept) < old.num_blocks
    # a query over the computed term reads every block its plain cuts cannot exclude
    computed = TableFilter("a + 2147483000 < 0", SCHEMA)
    ignoring, _ = old.blocks_for(_IgnoringCuts(computed, set(), untyped_cut_keys(old)))
    assert len(ignoring) == old.num_blocks
