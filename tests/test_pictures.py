"""Layout pictures (Fig. 2c / Fig. 5 style) from a small real layout, no Spark."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.layout import PartitionTree
from pando_iceberg.pictures import _blocks_text, _shape, block_colors, draw_layout, shorten

HAVE_EXPR = importlib.util.find_spec("pando_iceberg.expr") is not None


def _fig2_layout(k: int, n: int = 3000, min_block_rows: float = 180, extra_cuts: int = 0):
    """The paper's running example (§2): correlated x and y, range queries on either."""
    from pando_iceberg.expr import ExprCut, TableFilter
    from pando_iceberg.layout import build_layout

    rng = np.random.default_rng(3)
    x = rng.uniform(0, 100, n)
    y = np.clip(x + rng.normal(0, 6, n), 0, 100)
    outlier = rng.random(n) < 0.06
    y[outlier] = rng.uniform(0, 100, int(outlier.sum()))
    schema = pa.schema([("x", pa.float64()), ("y", pa.float64()), ("flag", pa.string())])
    table = pa.table({"x": x, "y": y, "flag": rng.choice(["A", "N", "R"], n)}, schema=schema)
    step = 12.5 if not extra_cuts else 100 / (extra_cuts + 1)
    values = np.arange(step, 100, step)
    cuts = [ExprCut(f"{c} < {v:g}", schema) for c in "xy" for v in values]
    cuts.append(ExprCut("flag = 'A' AND x + y < 120 AND y IS NOT NULL", schema))  # a long cut text
    wl = [f"{c} BETWEEN {lo} AND {lo + 5}" for c in "xy" for lo in range(0, 95, 5)]
    wl.append("flag = 'A' AND x + y < 120 AND y IS NOT NULL")
    filters = [TableFilter.from_sql(s, schema) for s in wl]
    return build_layout(table, cuts, filters, k=k, min_block_rows=min_block_rows)


def _read_png(path):
    from matplotlib.image import imread

    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    img = imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    return img


def _colours(img) -> set[int]:
    """Distinct RGB colours, packed as 0xRRGGBB."""
    rgb = (img[..., :3] * 255).round().astype(np.uint32).reshape(-1, 3)
    return set(np.unique((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]).tolist())


def _packed(rgba) -> int:
    r, g, b = (int(round(v * 255)) for v in rgba[:3])
    return (r << 16) | (g << 8) | b


@pytest.mark.skipif(not HAVE_EXPR, reason="pando_iceberg.expr is not in this checkout")
@pytest.mark.parametrize("k", [1, 2, 3])
def test_draw_layout_writes_a_readable_png(tmp_path, k):
    layout = _fig2_layout(k)
    files = {b: [object()] * (1 + b % 2) for b in range(layout.num_blocks)}
    path = draw_layout(layout, files, str(tmp_path / "pics" / f"k{k}.png"), title=f"fig2 k={k}")
    img = _read_png(path)
    h, w = img.shape[:2]
    assert w >= 1000 and h >= 600, img.shape
    # Not blank: block colours, text, lines → many colours; and a good share of non-white.
    present = _colours(img)
    assert len(present) > 50
    assert (img[..., :3].min(axis=2) < 0.9).mean() > 0.02
    # every block's colour appears (bars, grid cells, leaf strips)
    for c in block_colors(layout.num_blocks)[: min(layout.num_blocks, 10)]:
        assert _packed(c) in present


@pytest.mark.skipif(not HAVE_EXPR, reason="pando_iceberg.expr is not in this checkout")
def test_big_trees_and_many_blocks(tmp_path):
    layout = _fig2_layout(2, n=4000, min_block_rows=15, extra_cuts=40)
    assert layout.num_blocks > 60
    shapes = [_shape(t) for t in layout.truncated]
    assert any(s.hidden for s in shapes), "fixture should be deep enough to cap the depth shown"
    path = draw_layout(layout, None, str(tmp_path / "big.png"))
    img = _read_png(path)
    assert len(_colours(img)) > 60


def test_depth_cap_collapses_subtrees_and_counts_them():
    class Cut:
        def __init__(self, key):
            self.key = key

    tree = PartitionTree()
    frontier = [0]
    for level in range(7):  # a full tree of depth 7: 128 leaves
        nxt = []
        for n in frontier:
            nxt += tree.split(n, Cut(f"c{level}_{n}"))
        frontier = nxt
    shape = _shape(tree, max_depth=6, max_frontier=24)
    assert shape.width <= 24 and shape.depth_shown == 4
    assert len(shape.stubs) == 16 and all(v == 15 for v in shape.stubs.values())
    assert shape.hidden == 16 * 14
    # TRUE child drawn left of the NOT-TRUE child
    assert shape.x[tree.true_child[0]] < shape.x[tree.not_true_child[0]]


def test_labels():
    assert shorten("a" * 60, 40) == "a" * 39 + "…"
    assert shorten("x  <\n 5") == "x < 5"
    assert _blocks_text([3, 7]) == "→ B3, B7"
    assert _blocks_text([]) == "→ (no block)"
    two = _blocks_text(range(30), width=16)
    assert two.count("\n") == 1 and two.endswith(f"+{30 - two.count('B')}")


@pytest.mark.skipif(not HAVE_EXPR, reason="pando_iceberg.expr is not in this checkout")
def test_from_a_sidecar_like_describe_layout_png(tmp_path):
    """What ``pando describe-layout --png`` does: the layout decoded from a sidecar (with a
    literal cut, whose key is long) and the sidecar's block files."""
    from pando_iceberg.expr import CutOrigin, ExprCut, LiteralCut, TableFilter
    from pando_iceberg.layout import build_layout
    from pando_iceberg.storage import DataFileRef, LayoutSidecar

    rng = np.random.default_rng(7)
    n = 2000
    schema = pa.schema([("qty", pa.int64()), ("custkey", pa.int64())])
    table = pa.table({"qty": rng.integers(1, 51, n), "custkey": rng.integers(0, 300, n)}, schema=schema)
    literal = LiteralCut("custkey", np.arange(0, 300, 3),
                         CutOrigin("customer", "c_custkey", "c_mktsegment = 'BUILDING'", snapshot_id=42))
    cuts = [ExprCut(f"qty < {v}", schema) for v in (10, 25, 40)] + [literal]
    dim = {"customer": pa.schema([("c_custkey", pa.int64()), ("c_mktsegment", pa.string())])}
    wl = ["qty < 10", "qty >= 40", "custkey IN (SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING')"]
    layout = build_layout(table, cuts, [TableFilter.from_sql(s, schema, schemas=dim) for s in wl], k=2,
                          min_block_rows=100)
    layout.finalize(layout.observed_ktuples(table))
    files = {b: [DataFileRef(f"file:/wh/t/data/block-{b:05d}.parquet", 100, 4096)] for b in range(layout.num_blocks)}
    sidecar = LayoutSidecar.from_layout(layout, layout_id="0b9c6f1e-2a44-4c8e-9d0b-5f7e3a1c2d4e",
                                        table_uuid="6a2e2c1e-7d3b-4f0a-9c55-0123456789ab", block_files=files,
                                        base_snapshot_id=1)
    path = draw_layout(sidecar.load_layout(), sidecar.block_files, str(tmp_path / "lay.png"), title="db.t")
    assert len(_colours(_read_png(path))) > 50


def test_cli_describe_layout_has_png_option():
    from pando_iceberg.cli import build_parser

    args = build_parser().parse_args(["describe-layout", "db.t", "--png", "out.png"])
    assert args.png == "out.png"
    assert build_parser().parse_args(["describe-layout", "db.t"]).png is None
