"""Pruned queries give Spark's answer under Spark's whole value semantics: integer widths and
overflow, narrowing casts, FLOAT literals, string casts, TIMESTAMP_NTZ against zone offsets, the
session time zone and ANSI mode.

Each query runs through ``pando_iceberg.spark.sql`` and through plain ``spark.sql`` in the same
session; the rows must be equal. The tables are small (a star of 6,000 sales in 6 files, each
file a range of dates, times, products and stores, so Iceberg's min/max bounds, the key sets of
the dimensions and their foreign-key bounds all prune; and a table of trips laid out by the
project's rewrite with cuts on ``trip_distance``). Every query here returned a wrong result
before values followed Spark's semantics. A last test asks Spark itself to fold a list of
expressions and compares Pando's folds with its answers, under several session settings.
"""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest
import sqlglot

import pando_iceberg.spark
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.values import fold
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

NS = "exactsem"
ROWS, FILES = 6000, 6
T0_NTZ = dt.datetime(2026, 1, 16)
T0_LTZ = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


def _write(catalog, spark, name: str, table: pa.Table, files: int) -> None:
    try:
        catalog.drop_table(name)
    except Exception:
        pass
    t = catalog.create_table(name, schema=table.schema)
    for batch in table.to_batches(max_chunksize=math.ceil(table.num_rows / files)):
        t.append(pa.Table.from_batches([batch]))
    spark.sql(f"REFRESH TABLE {name}")


@pytest.fixture(scope="module")
def star(spark, catalog, lakehouse_cfg):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    i = list(range(ROWS))
    sales = pa.table({
        "sale_id": pa.array(i, pa.int64()),
        "product_key": pa.array([k // 150 for k in i], pa.int32()),
        "store_key": pa.array([k // 150 for k in i], pa.int32()),
        "date_key": pa.array([k // 100 for k in i], pa.int32()),
        "quantity": pa.array([(k * 7) % 100 + 1 for k in i], pa.int32()),
        "discount": pa.array([((k * 13) % 50) / 100 for k in i], pa.float32()),
        "pickup_ts": pa.array([T0_NTZ + dt.timedelta(seconds=36 * k) for k in i], pa.timestamp("us")),
        "event_ts": pa.array([T0_LTZ + dt.timedelta(minutes=10 * k) for k in i], pa.timestamp("us", tz="UTC")),
    })
    _write(catalog, spark, f"{NS}.sales", sales, FILES)
    keys = list(range(40))
    products = pa.table({
        "product_key": pa.array(keys, pa.int32()),
        "launch_year": pa.array([k - 20 for k in keys], pa.int32()),
        "weight": pa.array([16777216.0 if k % 10 == 0 else float(k) for k in keys], pa.float32()),
    })
    _write(catalog, spark, f"{NS}.products", products, 1)
    stores = pa.table({"store_key": pa.array(keys, pa.int32()),
                       "sqft": pa.array([30000 + 100 * k for k in keys], pa.int32())})
    _write(catalog, spark, f"{NS}.stores", stores, 1)
    trips = pa.table({
        "trip_id": pa.array(i, pa.int64()),
        "trip_distance": pa.array([round(1.8 + ((k * 17) % 21) / 1000, 3) for k in i], pa.float64()),
        "fare": pa.array([float(k % 97) for k in i], pa.float64()),
    })
    _write(catalog, spark, f"{NS}.trips", trips, FILES)
    workload = [f"SELECT count(*) FROM {NS}.trips WHERE trip_distance > 1.81",
                f"SELECT count(*) FROM {NS}.trips WHERE trip_distance > 1.81 AND trip_distance < 1.815",
                f"SELECT count(*) FROM {NS}.trips WHERE trip_distance < 1.805"]
    rewrite_table(spark, f"{NS}.trips", workload, RewriteOptions(k=1, sample_rate=1.0, min_block_rows=500, seed=1),
                  io_properties=lakehouse_cfg.pyiceberg_properties())
    return NS


def _rows(rows) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=repr)


def assert_as_spark(spark, catalog, sql: str) -> list[tuple]:
    want = _rows(spark.sql(sql).collect())
    with pando_iceberg.spark.sql(spark, sql, catalog=catalog) as df:
        got = _rows(df.collect())
    assert got == want, sql
    return want


@pytest.fixture
def session(spark):
    """Session settings a test changes, put back afterwards."""
    keys = ("spark.sql.session.timeZone", "spark.sql.ansi.enabled")
    before = {k: spark.conf.get(k) for k in keys}
    yield spark
    for k, v in before.items():
        spark.conf.set(k, v)


def test_integer_overflow_wraps_as_spark(spark, catalog, star):
    """INT arithmetic wraps at 32 bits (a dimension's key set and a folded literal)."""
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales f JOIN {NS}.products p "
                                           "ON f.product_key = p.product_key WHERE p.launch_year + 2147483647 < 0")
    assert rows[0][0] == 19 * 150  # launch years 1..19 wrap below zero
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales WHERE quantity > 65536*65536+8")
    assert rows[0][0] > 0


def test_narrowing_casts_wrap_as_spark(spark, catalog, star):
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales f JOIN {NS}.stores s "
                                           "ON f.store_key = s.store_key WHERE CAST(s.sqft AS SMALLINT) < 0")
    assert rows[0][0] == 12 * 150  # 32800 and above wrap below zero
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales WHERE "
                                           "(quantity >= CAST(261 AS TINYINT) OR date_key = 5)")
    assert rows[0][0] > 1000


def test_float_literals_and_columns_as_spark(spark, catalog, star):
    """1.81F is the float32 nearest 1.81 (below it): rows equal to the double 1.81 are above it.
    A FLOAT column compared with an integer literal compares as FLOAT."""
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.trips WHERE trip_distance > 1.81F "
                                           "AND trip_distance < 1.815")
    assert rows[0][0] > 0
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales f JOIN {NS}.products p "
                                           "ON f.product_key = p.product_key WHERE p.weight = 16777217")
    assert rows[0][0] == 4 * 150


@pytest.mark.parametrize("predicate", [
    "(discount < CAST('0.2f' AS DOUBLE) OR date_key = 42)",
    "(quantity > CAST(CAST('NaN' AS DOUBLE) AS INT) OR date_key = 42)",
    "(event_ts >= CAST('2026-12' AS TIMESTAMP) OR date_key = 2)",
])
def test_folds_agree_with_spark(spark, catalog, star, predicate):
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales WHERE {predicate}")
    assert rows[0][0] > 100


def test_zone_offsets_dropped_against_timestamp_ntz(spark, catalog, star):
    rows = assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales WHERE pickup_ts >= "
                                           "'2026-01-17 12:00:00+10:00' AND pickup_ts < '2026-01-17 14:00:00+10:00'")
    assert rows[0][0] == 200  # two hours of the wall clock (a file holds ten), a row every 36 s


def test_to_date_of_a_timestamp_is_its_day(spark, catalog, star):
    rows = assert_as_spark(spark, catalog,
                           f"SELECT count(*) FROM {NS}.sales WHERE to_date(pickup_ts) = DATE '2026-01-17'")
    assert rows[0][0] == 2400  # a row every 36 s


def test_session_time_zone_changes_nothing_in_results(session, catalog, star):
    spark = session
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    queries = [
        "pickup_ts >= TIMESTAMP '2026-01-17 00:00:00+00:00' AND pickup_ts < TIMESTAMP '2026-01-17 06:00:00+00:00'",
        "event_ts >= '2026-12-01 00:00:00' AND event_ts < '2026-12-01 06:00:00'",
        "event_ts >= DATE '2026-12-01' AND event_ts < DATE '2026-12-02'",
        "CAST(event_ts AS DATE) = DATE '2026-12-01'",
        "pickup_ts >= '2026-01-17 02:00:00' AND pickup_ts < '2026-01-17 04:00:00'",
        "(event_ts >= CAST('2026-12' AS TIMESTAMP) OR date_key = 2)",
        "pickup_ts < CAST(TIMESTAMP '2026-01-16 12:00:00+00:00' AS TIMESTAMP_NTZ)",
        "to_date(event_ts) = DATE '2026-12-01'",
    ]
    counts = [assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales WHERE {q}")[0][0] for q in queries]
    assert counts[0] == 6 * 100 and counts[2] == 144  # 16:00-22:00 wall clock; a day of 10-minute events


def test_ansi_mode(session, catalog, star):
    """With ANSI on Spark raises on overflow and bad casts, and types string literals otherwise:
    what Pando cannot model prunes nothing, and a query Spark fails fails the same way."""
    spark = session
    spark.conf.set("spark.sql.ansi.enabled", "true")
    for q in ["(quantity >= CAST(' 5 ' AS INT) OR date_key = 42)", "quantity = '5'",
              "(discount < 0.2F AND date_key = 42)", "quantity > 2147483647 - 2147483600",
              "(event_ts >= CAST('2026-12' AS TIMESTAMP) OR date_key = 2)"]:
        assert assert_as_spark(spark, catalog, f"SELECT count(*) FROM {NS}.sales WHERE {q}")[0][0] > 0
    for q in [f"SELECT count(*) FROM {NS}.sales f JOIN {NS}.products p ON f.product_key = p.product_key "
              "WHERE p.launch_year + 2147483647 < 0",
              f"SELECT count(*) FROM {NS}.sales WHERE quantity > CAST(261 AS TINYINT)"]:
        with pytest.raises(Exception) as plain:
            spark.sql(q).collect()
        with pytest.raises(Exception) as pruned:
            with pando_iceberg.spark.sql(spark, q, catalog=catalog) as df:
                df.collect()
        assert "ArithmeticException" in str(plain.value) or "OVERFLOW" in str(plain.value)
        assert "OVERFLOW" in str(pruned.value), pruned.value


FOLDS = [
    "65536*65536+8", "2147483647 + 1", "CAST(127 AS TINYINT) + CAST(1 AS TINYINT)", "CAST(127 AS TINYINT) + 1",
    "-2147483648", "-(-2147483648)", "CAST(32767 AS SMALLINT) * CAST(2 AS SMALLINT)", "CAST(5 AS BIGINT) + 2147483647",
    "CAST(261 AS TINYINT)", "CAST(70000 AS SMALLINT)", "CAST(3000000000 AS INT)", "CAST(1e20 AS INT)",
    "CAST(-1e20 AS BIGINT)", "CAST(CAST('NaN' AS DOUBLE) AS INT)", "CAST(CAST('Infinity' AS DOUBLE) AS TINYINT)",
    "CAST(300.7 AS TINYINT)", "CAST(-300.7 AS TINYINT)", "CAST(3e9 AS SMALLINT)",
    "CAST(99999999999999999999.0 AS BIGINT)", "CAST(1.81F AS DOUBLE)", "1.1F + 1.1F", "1.1F * 3", "1.5F + 1L",
    "CAST(16777217 AS FLOAT)", "CAST(0.1 AS FLOAT)", "CAST(0.30000000000000004 AS DOUBLE)",
    "CAST('0.2f' AS DOUBLE)", "CAST('0.2D' AS DOUBLE)", "CAST(' 0.2 ' AS DOUBLE)", "CAST('1e3' AS DOUBLE)",
    "CAST('inf' AS DOUBLE)", "CAST('-Infinity' AS DOUBLE)", "CAST('1.' AS DOUBLE)", "CAST('.5' AS DOUBLE)",
    "CAST('1.81' AS FLOAT)", "CAST('1.5' AS INT)", "CAST(' 12 ' AS INT)", "CAST('3000000000' AS INT)",
    "CAST('300' AS TINYINT)", "CAST('+5' AS INT)", "CAST('-1.9' AS INT)", "CAST('.5' AS INT)", "CAST('5.' AS INT)",
    "CAST('2026-12' AS TIMESTAMP)", "CAST('2026' AS TIMESTAMP)", "CAST('2026-1-5 3:4:5' AS TIMESTAMP)",
    "CAST('2026-01-17 02' AS TIMESTAMP)", "CAST('2026-01-17 2:3:4.1234567' AS TIMESTAMP)",
    "CAST('2026-01-17 02:00:00+05:00' AS TIMESTAMP_NTZ)", "CAST('2026-01-17 02:00:00+05:00' AS TIMESTAMP)",
    "CAST('2026-01-17T02:00:00+0500' AS TIMESTAMP)", "CAST('2026-01-17T02:00:00 +05:00' AS TIMESTAMP)",
    "CAST('2026-01-17T02:00:00GMT+05:00' AS TIMESTAMP)", "CAST('2026-01-17T02:00:00UTC' AS TIMESTAMP)",
    "CAST('2026-01-17 02:00:00 America/New_York' AS TIMESTAMP)", "CAST('2026-01-17 24:00:00' AS TIMESTAMP)",
    "CAST('2026-01-17 02:00:00.' AS TIMESTAMP)", "CAST('2026-03-08 02:30:00' AS TIMESTAMP)",
    "CAST('2026-11-01 01:30:00' AS TIMESTAMP)", "CAST(DATE '2026-01-17' AS TIMESTAMP)",
    "CAST(TIMESTAMP '2026-01-17 03:00:00+00:00' AS DATE)", "CAST(TIMESTAMP_NTZ '2026-01-17 00:00:00' AS TIMESTAMP)",
    "CAST(TIMESTAMP '2026-01-17 03:00:00+00:00' AS TIMESTAMP_NTZ)", "CAST(' 2026-01-17 ' AS DATE)",
    "CAST('2026-1-7' AS DATE)", "CAST('2026-01-17 garbage' AS DATE)", "CAST('2026-01-17T10' AS DATE)",
    "CAST('2026-02-30' AS DATE)", "CAST('2026-01' AS DATE)", "CAST('abc' AS DATE)",
    "DATE '2026-01-31' + INTERVAL 1 MONTH", "CAST(TIMESTAMP '2026-01-17 03:00:00+00:00' AS STRING)",
    "CAST(DATE '2026-01-17' AS STRING)", "CAST(1.5 AS DECIMAL(3, 0))", "CAST('2.345' AS DECIMAL(4, 2))",
    "10 / 4", "1 / 0", "CAST(TIMESTAMP_NTZ '2026-01-17 05:06:07.5' AS STRING)",
]


def _spark_value(v, kind: str):
    """Spark's collected value as Pando holds it (days, microseconds)."""
    if v is None:
        return None
    if kind == "date":
        return (v - dt.date(1970, 1, 1)).days
    return v


@pytest.mark.parametrize("settings", [("UTC", "false"), ("America/Los_Angeles", "false"), ("UTC", "true"),
                                      ("Asia/Kolkata", "true")])
def test_pando_folds_as_spark(session, settings):
    """Each expression that Pando folds, it folds to Spark's value (timestamps compared as
    microseconds since the epoch, asked of Spark with unix_micros): all of them in one SELECT,
    which must not fail (an expression Spark rejects, as ANSI mode does, Pando must not fold)."""
    from pando_iceberg.expr import semantics

    spark = session
    zone, ansi = settings
    spark.conf.set("spark.sql.session.timeZone", zone)
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    ours = {}
    with semantics.using(semantics.from_spark(spark)):
        for text in FOLDS:
            try:
                ours[text] = fold(sqlglot.parse_one(text, read="spark"))
            except PandoExprError:
                pass
    probes = {text: f"unix_micros({text})" if v.kind == "timestamp" else
              f"unix_micros(CAST({text} AS TIMESTAMP))" if v.kind == "timestamp_ntz" else text
              for text, v in ours.items() if v is not None and (v.kind != "timestamp_ntz" or zone == "UTC")}
    try:
        row = spark.sql("SELECT " + ", ".join(probes.values())).collect()[0]
    except Exception:
        for text, probe in probes.items():  # which one Spark rejects
            try:
                spark.sql(f"SELECT {probe}").collect()
            except Exception as e:
                raise AssertionError(f"Pando folds {text} to {ours[text]}, Spark raises {e}") from None
        raise
    for text, theirs in zip(probes, row):
        v = ours[text]
        if v.kind == "float" and isinstance(theirs, float) and math.isnan(theirs):
            assert math.isnan(v.value), (text, settings)
        else:
            assert _spark_value(theirs, v.kind) == v.value, (text, settings, theirs, v)
    assert len(probes) > len(FOLDS) // 2
