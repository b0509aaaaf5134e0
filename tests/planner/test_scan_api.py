"""``pando_iceberg.scan`` (datascan.py): a pyiceberg ``DataScan`` planned with the trees, read
through pyiceberg (Arrow, batches, pandas, count), DuckDB and polars, with the same rows as the
unpruned scan. The table and its layout are real and built without Spark: pyiceberg writes one
data file per block of a layout learned on the data, a sidecar and the pointer properties."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from _block_files import write_blocks
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import (
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    Not,
    NotIn,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)

import pando_iceberg
from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.layout import build_layout
from pando_iceberg.planner import plan_scan, read_arrow

ARROW = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("price", pa.float64()), ("region", pa.string()),
                   ("day", pa.date32())])
WORKLOAD = ["qty < 10", "qty >= 40", "region IS NULL", "region IN ('eu', 'us')", "price > 50"]
N, EXTRA = 6000, 200


def _rows(rng, start: int, n: int) -> pa.Table:
    price = rng.uniform(0, 100, n)
    price[rng.random(n) < 0.03] = np.nan
    region = np.array(["eu", "us", "apac", "latam"], dtype=object)[rng.integers(0, 4, n)]
    region[rng.random(n) < 0.08] = None
    return pa.table({"id": np.arange(start, start + n),
                     "qty": pa.array(rng.integers(1, 51, n), mask=rng.random(n) < 0.05),
                     "price": pa.array(price, mask=rng.random(n) < 0.03),
                     "region": pa.array(list(region), pa.string()),
                     "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 366, n)],
                                     pa.date32())}, schema=ARROW)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A layout (k=2) whose blocks are the table's data files, plus one file appended after it."""
    tmp = tmp_path_factory.mktemp("scan_api")
    rng = np.random.default_rng(18)
    data = _rows(rng, 0, N)
    cuts = [ExprCut(s, ARROW) for s in [*WORKLOAD, "qty < 25"]]
    layout = build_layout(data, cuts, [TableFilter.from_sql(s, ARROW) for s in WORKLOAD], k=2, min_block_rows=300)
    layout.finalize(layout.observed_ktuples(data))
    blocks = layout.route(data)

    cat = SqlCatalog("scanapi", uri=f"sqlite:///{tmp}/c.db", warehouse=f"file://{tmp}/wh")
    cat.create_namespace("db")
    t = cat.create_table("db.t", ARROW)
    write_blocks(t, layout, data, blocks)
    t.append(_rows(rng, N, EXTRA))  # a file outside the layout: always read
    return cat.load_table("db.t")


def _sorted(arrow: pa.Table) -> pa.Table:
    return arrow.sort_by("id") if arrow.num_rows else arrow


def _rows_of(arrow: pa.Table) -> list[tuple]:
    """Rows in id order, NaN spelled out (NaN != NaN would make equal tables differ)."""
    def norm(v):
        return "NaN" if isinstance(v, float) and v != v else v
    return [tuple(norm(v) for v in row.values()) for row in _sorted(arrow).to_pylist()]


SQL_FILTERS = ["qty < 10", "qty >= 40 AND region = 'eu'", "region IS NULL", "region NOT IN ('eu', 'us')",
               "price > 50", "NOT price > 50", "price < 20 OR qty IS NULL", "region LIKE 'la%'",
               "day >= date '2024-06-01' AND qty BETWEEN 5 AND 12", "qty < 0"]


@pytest.mark.parametrize("flt", SQL_FILTERS)
def test_sql_filter_same_rows_as_unpruned(table, flt):
    s = pando_iceberg.scan(table, row_filter=flt)
    want = _sorted(read_arrow(table, plan_scan(table, flt, use_layout=False)))
    got = s.to_arrow()
    assert [(f.name, f.type) for f in got.schema] == [(f.name, f.type) for f in want.schema]  # as pyiceberg's to_arrow
    assert _rows_of(got) == _rows_of(want), flt
    assert _rows_of(s.to_arrow_batch_reader().read_all()) == _rows_of(want)
    assert s.count() == want.num_rows
    assert s.to_pandas().sort_values("id").reset_index(drop=True).equals(want.to_pandas())
    assert s.explain().used_layout, s.explain().fallback_reason


PYICEBERG_FILTERS = [EqualTo("region", "eu"), NotIn("region", ["eu", "us"]), Not(In("region", ["eu", "us"])),
                     LessThan("price", 20.0), Not(GreaterThan("price", 50.0)), IsNull("region"), IsNaN("price"),
                     And(GreaterThanOrEqual("qty", 40), StartsWith("region", "e")), NotStartsWith("region", "e"),
                     Or(IsNull("qty"), NotNull("region"))]


@pytest.mark.parametrize("flt", PYICEBERG_FILTERS, ids=str)
def test_pyiceberg_expression_same_rows_as_pyiceberg(table, flt):
    """pyiceberg's own semantics (NotIn and Not(In) keep NULLs, Not(price > 50) keeps NaN): the
    trees must keep every block holding such rows."""
    s = pando_iceberg.scan(table, row_filter=flt)
    want = _sorted(table.scan(row_filter=flt).to_arrow())
    assert _rows_of(s.to_arrow()) == _rows_of(want), str(flt)
    assert s.count() == want.num_rows
    assert s.explain().used_layout


def test_pyiceberg_semantics_reach_null_and_nan_blocks(table):
    """The rows a SQL reading of the expression would drop are returned, so the trees kept their files."""
    kept_nulls = pando_iceberg.scan(table, row_filter=NotIn("region", ["eu", "us"])).to_arrow()
    assert kept_nulls.column("region").null_count > 0
    kept_nan = pando_iceberg.scan(table, row_filter=Not(GreaterThan("price", 50.0))).to_arrow()
    assert np.isnan(kept_nan.column("price").to_numpy(zero_copy_only=False)).any()


def test_trees_prune_beyond_iceberg(table):
    # 'latam' lies between the min ('eu') and max ('us') of the eu/us blocks: only the trees skip them
    e = pando_iceberg.scan(table, row_filter="region = 'latam'").explain()
    assert e.used_layout and e.files_outside_layout == 1
    assert e.pando_files < e.iceberg_files, e.as_dict()
    assert e.blocks_chosen < e.blocks_total


def test_selected_fields_limit_and_snapshot(table):
    s = pando_iceberg.scan(table, row_filter="qty < 10", selected_fields=("id", "qty"))
    got = s.to_arrow()
    assert got.column_names == ["id", "qty"]
    assert pc_all_lt(got.column("qty"), 10)
    assert s.to_arrow_batch_reader().schema.names == ["id", "qty"]
    assert pando_iceberg.scan(table, row_filter="qty < 10", limit=7).to_arrow().num_rows == 7
    first = table.history()[0].snapshot_id  # the first block only
    old = pando_iceberg.scan(table, row_filter="TRUE", snapshot_id=first)
    assert old.count() == table.scan(snapshot_id=first).count() < N
    assert old.filter("qty < 10").to_arrow().num_rows == table.scan(snapshot_id=first, row_filter="qty < 10").count()


def pc_all_lt(column, bound) -> bool:
    values = column.to_numpy(zero_copy_only=False)
    return bool((values < bound).all())


def test_duckdb_and_polars_read_the_pruned_scan(table):
    flt = "price > 50 AND region IN ('eu', 'apac')"
    s = pando_iceberg.scan(table, row_filter=flt)
    want = _sorted(read_arrow(table, plan_scan(table, flt, use_layout=False)))
    con = s.to_duckdb("t")
    got = con.execute("SELECT * FROM t ORDER BY id").to_arrow_table()
    assert got.num_rows == want.num_rows > 0
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    assert con.execute("SELECT count(*) FROM t WHERE NOT (price > 50)").fetchone() == (0,)
    frame = s.to_polars().sort("id")
    assert frame.height == want.num_rows and frame["id"].to_list() == want.column("id").to_pylist()


def test_filter_combines_and_update_keeps_the_layout(table):
    s = pando_iceberg.scan(table, row_filter=GreaterThanOrEqual("qty", 40)).filter(EqualTo("region", "eu"))
    want = table.scan(row_filter=And(GreaterThanOrEqual("qty", 40), EqualTo("region", "eu"))).to_arrow()
    assert _rows_of(s.to_arrow()) == _rows_of(want)
    mixed = pando_iceberg.scan(table, row_filter="qty >= 40").filter(EqualTo("region", "eu"))
    assert isinstance(mixed.pando_filter, str) and mixed.count() == want.num_rows
    assert isinstance(s.select("id"), pando_iceberg.PandoDataScan)


def test_bad_input_names_what_is_accepted(table):
    with pytest.raises(TypeError, match="pyiceberg Table"):
        pando_iceberg.scan("db.t")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SQL text or a pyiceberg BooleanExpression"):
        pando_iceberg.scan(table, row_filter=42)
    with pytest.raises(ValueError, match="no snapshot 123"):
        pando_iceberg.scan(table, snapshot_id=123)
    with pytest.raises(Exception, match="nope"):
        pando_iceberg.scan(table, row_filter="nope < 3").to_arrow()


def test_verbs_that_need_no_spark(table):
    """PandoTable's layout view and health read pyiceberg only; the optimize verbs ask for Spark."""
    pt = pando_iceberg.PandoTable(table.catalog, "db.t")
    view = pt.layout
    assert view is not None and view.k == 2 and view.partitions == ()
    assert sum(b.rows for b in view.blocks) == N
    live = {t.file.file_path for t in table.scan().plan_files()}
    assert {f.path for b in view.blocks for f in b.files} <= live
    leaves = [n for t in view.trees for n in t.nodes if n.cut is None]
    assert {b for n in leaves for b in n.blocks} == {b.block for b in view.blocks}
    health = pt.health()
    assert health.status == "ok" and health.files_outside_layout == 1 and health.rows_outside_layout == EXTRA
    assert pt.health(max_rows_outside=0.01).status == "degraded"
    with pytest.raises(pando_iceberg.PandoApiError, match=r"optimize\.incremental: needs a Spark session"):
        pt.optimize.incremental()
    with pytest.raises(pando_iceberg.PandoApiError, match=r"health: 'max_rows_outside' must be a non-negative"):
        pt.health(max_rows_outside=-1)
    assert pt.scan("qty < 10").count() == pando_iceberg.scan(table, row_filter="qty < 10").count()


def test_remove_layout_then_scans_fall_back_with_the_same_rows(table):
    """Last in this module: it removes the layout the other tests read."""
    pt = pando_iceberg.PandoTable(table.catalog, "db.t")
    layout_id = pt.layout.layout_id
    before = _rows_of(pando_iceberg.scan(table, row_filter="region = 'latam'").to_arrow())
    removed = pt.remove_layout()
    assert removed.layout_id == layout_id and removed.sidecar_deleted and removed.pending_removed is None
    assert pt.layout is None and pt.health().status == "no layout"
    after = pando_iceberg.scan(pt.table, row_filter="region = 'latam'")
    assert after.explain().fallback_reason == "the table has no Pando layout"
    assert _rows_of(after.to_arrow()) == before
