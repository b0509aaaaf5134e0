"""TPC-DS in ``pando bench`` (issue 17 item 3): DuckDB's dsdgen loaded into Iceberg by Spark,
the extension's 99 queries transpiled to Spark SQL, and the bench at SF 0.01."""

from __future__ import annotations

import itertools

import pytest

from pando_iceberg.bench import tpcds

NS = "tpcds"


def test_bad_scale_factor_and_query_numbers_name_what_is_accepted():
    for bad in (0, -1, 0.001, float("nan"), "x"):
        with pytest.raises(tpcds.TpcdsError, match=r"scale factor must be .*>= 0.01"):
            tpcds.check_sf(bad)
    assert tpcds.check_sf("0.1") == 0.1
    with pytest.raises(tpcds.TpcdsError, match=r"query number\(s\) 0, 100 not known; accepted: 1\.\.99"):
        tpcds.check_numbers([3, 0, 100])
    with pytest.raises(tpcds.TpcdsError, match=r"accepted: 1\.\.99"):
        tpcds.spark_queries(numbers=[123])


def test_extension_is_found_in_its_package_and_gives_99_queries():
    path = tpcds.extension_path()
    assert path.is_file() and "duckdb_extension_tpcds" in str(path)
    raw = tpcds.duckdb_queries()
    assert sorted(raw) == list(range(1, 100))
    spark_sql = tpcds.spark_queries("ds")
    assert sorted(spark_sql) == list(range(1, 100))
    # every base table is qualified, CTE names are not
    assert "ds.store_sales" in spark_sql[3] and "ds.date_dim" in spark_sql[3]
    assert "ds.ssr" not in spark_sql[5] and "ds.store_returns" in spark_sql[5]


@pytest.fixture(scope="module")
def tpcds_loaded(spark, catalog):
    """TPC-DS SF 0.01 loaded once into namespace ``tpcds`` (read-only for the tests)."""
    return tpcds.load_tpcds(spark, catalog, 0.01, namespace=NS)


@pytest.mark.spark
def test_loader_loads_every_table_with_dsdgen_row_counts_and_is_idempotent(spark, catalog, tpcds_loaded):
    con = tpcds.connect()
    con.execute("CALL dsdgen(sf=0.01)")
    expected = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tpcds.TPCDS_TABLES}
    con.close()
    assert tpcds_loaded.rows == expected and expected["store_sales"] == 28_810
    for t in tpcds.TPCDS_TABLES:
        assert spark.table(f"{NS}.{t}").count() == expected[t], t
    # the facts arrive in files of ~file_rows rows (b at SF 0.01 = 1,000), in generation order
    assert tpcds_loaded.files["store_sales"] == 29 and tpcds_loaded.files["date_dim"] == 1
    spans = spark.sql(f"SELECT min(ss_ticket_number) lo, max(ss_ticket_number) hi FROM {NS}.store_sales "
                      "GROUP BY _file ORDER BY lo").collect()
    assert all(a.hi <= b.lo for a, b in itertools.pairwise(spans))  # tickets do not overlap across files
    # surrogate keys declared (NOT NULL and unique in the data)
    from pando_iceberg.spark.rewrite import identifier_fields

    assert identifier_fields(spark, f"{NS}.date_dim") == ["d_date_sk"]
    assert sorted(identifier_fields(spark, f"{NS}.store_sales")) == ["ss_item_sk", "ss_ticket_number"]
    again = tpcds.load_tpcds(spark, catalog, 0.01, namespace=NS)
    assert again.reused and again.rows == expected and again.files == tpcds_loaded.files
