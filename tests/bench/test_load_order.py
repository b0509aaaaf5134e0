"""``pando bench --load-order date``: TPC-H's lineitem and orders and TPC-DS's sales loaded in
arrival (date) order, in files of b rows whose date bounds barely overlap, as a loader appending
day by day writes them; the default (the generator's order) is unchanged."""

import itertools
import math

import pytest
from pyiceberg.conversions import from_bytes

from pando_iceberg.bench import tpcds
from pando_iceberg.bench.harness import BenchError, BenchOptions, bench_stem
from pando_iceberg.tpch import TpchError, expected_row_count, load_tpch


def _bounds(catalog, name: str, column: str) -> list[tuple]:
    """(lower, upper) of ``column`` in each data file of ``name``, sorted."""
    table = catalog.load_table(name)
    field = table.schema().find_field(column)
    out = []
    for task in table.scan().plan_files():
        f = task.file
        out.append((from_bytes(field.field_type, f.lower_bounds[field.field_id]),
                    from_bytes(field.field_type, f.upper_bounds[field.field_id])))
    return sorted(out)


def _in_date_order(bounds: list[tuple]) -> bool:
    """Each file starts where the one before it ends, or after: at most the boundary date shared."""
    return all(lo >= prev_hi for (_, prev_hi), (lo, _) in itertools.pairwise(bounds))


def test_options_and_names():
    BenchOptions(dataset="tpch", sf=0.1, load_order="date").validate()
    with pytest.raises(BenchError, match="'date' with --dataset tpch or tpcds"):
        BenchOptions(dataset="taxi", sf=0.1, load_order="date").validate()
    with pytest.raises(BenchError, match="one of generated, date"):
        BenchOptions(dataset="tpch", sf=0.1, load_order="shuffled").validate()
    assert bench_stem(BenchOptions(dataset="tpch", sf=0.1, load_order="date")) == "bench_tpch_date_order_sf0.1"
    assert bench_stem(BenchOptions(dataset="tpch", sf=0.1)) == "bench_tpch_sf0.1"


@pytest.mark.spark
def test_tpch_in_date_order(spark, catalog, tpch):
    with pytest.raises(TpchError, match="accepted: generated, date"):
        load_tpch(spark, 0.01, namespace="tpch_by_date", tables=("orders",), load_order="arrival")
    loaded = {t.table: t for t in load_tpch(spark, 0.01, namespace="tpch_by_date", tables=("orders", "lineitem"),
                                            replace=True, load_order="date", file_rows=10_000)}
    for table, column in (("lineitem", "l_shipdate"), ("orders", "o_orderdate")):
        rows = expected_row_count(table, 0.01)
        assert loaded[table].rows == rows
        bounds = _bounds(catalog, f"tpch_by_date.{table}", column)
        assert len(bounds) == loaded[table].files == math.ceil(rows / 10_000), bounds
        assert _in_date_order(bounds), bounds
    # the generator's order (the session's tables): every lineitem file spans (nearly) every date
    generated = _bounds(catalog, "tpch.lineitem", "l_shipdate")
    assert not _in_date_order(generated) or len(generated) == 1


@pytest.mark.spark
@pytest.mark.slow
def test_tpcds_sales_in_date_order(spark, catalog):
    with pytest.raises(tpcds.TpcdsError, match="accepted: generated, date"):
        tpcds.load_tpcds(spark, catalog, 0.01, namespace="tpcds_by_date", load_order="arrival")
    loaded = tpcds.load_tpcds(spark, catalog, 0.01, namespace="tpcds_by_date", file_rows=5_000, load_order="date")
    rows = loaded.rows["store_sales"]
    assert loaded.files["store_sales"] == math.ceil(rows / 5_000) > 1
    bounds = _bounds(catalog, "tpcds_by_date.store_sales", "ss_sold_date_sk")
    assert len(bounds) == loaded.files["store_sales"] and _in_date_order(bounds), bounds
    # reused in the same order only (the order is recorded with the tables)
    assert tpcds.load_tpcds(spark, catalog, 0.01, namespace="tpcds_by_date", file_rows=5_000,
                            load_order="date").reused
    assert catalog.load_table("tpcds_by_date.store_sales").properties[tpcds.LOAD_ORDER_PROPERTY] == "date"
