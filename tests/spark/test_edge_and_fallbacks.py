"""NULL / NaN / ±0.0 / empty and unicode strings / dates / timestamps with zones / decimals
through a real Pando rewrite, and every way a layout can go missing, stale or corrupt.

Pruned results are always compared with plain Spark on the same table.
"""

import pytest

from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.spark.pruned import pruned_table
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

EDGE_ROWS = """
SELECT id,
  CASE WHEN id % 97 = 0 THEN NULL WHEN id % 89 = 0 THEN double('NaN') WHEN id % 83 = 0 THEN -0.0
       WHEN id % 79 = 0 THEN double('Infinity') ELSE (id % 1000) / 10.0 - 20 END AS x,
  CASE WHEN id % 71 = 0 THEN NULL WHEN id % 67 = 0 THEN '' WHEN id % 61 = 0 THEN concat('é', id % 7)
       ELSE concat(char(65 + id % 26), lpad(cast(id % 500 AS STRING), 3, '0')) END AS s,
  date_add(date '2020-01-01', CAST(id % 730 AS INT)) AS d,
  CASE WHEN id % 53 = 0 THEN NULL ELSE timestamp_seconds(1577836800 + (id % 5000) * 3600) END AS ts,
  CAST((id % 2000) / 7.0 AS DECIMAL(10, 2)) AS amt
FROM range({lo}, {hi})
"""

WORKLOAD = [
    "SELECT * FROM edge.t WHERE x < 0",
    "SELECT * FROM edge.t WHERE x >= 50 AND x < 60",
    "SELECT * FROM edge.t WHERE s LIKE 'B%'",
    "SELECT * FROM edge.t WHERE s >= 'M' AND s < 'P'",
    "SELECT * FROM edge.t WHERE d >= date '2021-01-01' AND d < date '2021-03-01'",
    "SELECT * FROM edge.t WHERE ts < timestamp '2020-03-01 00:00:00'",
    "SELECT * FROM edge.t WHERE amt < 20",
    "SELECT * FROM edge.t WHERE x IS NULL",
]

QUERIES = [
    "x < 0", "x > 70", "x = double('NaN')", "x IS NULL", "x IS NOT NULL AND x < -10", "NOT (x < 3)",
    "x = 0.0", "x > 79.5", "s = ''", "s IS NULL", "s LIKE 'é%'", "s LIKE 'B%'", "s >= 'M' AND s < 'P'",
    "d BETWEEN date '2021-01-10' AND date '2021-02-01'", "ts >= timestamp '2020-06-01 00:00:00+02:00'",
    "amt < 10.5", "amt = 100", "x < 0 OR s IS NULL", "NOT (s LIKE 'B%')", None,
]


def _make(spark, name, parts=4, rows=20_000):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS edge")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    step = rows // parts
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              + EDGE_ROWS.format(lo=0, hi=step))
    for p in range(1, parts):
        spark.sql(f"INSERT INTO {name} " + EDGE_ROWS.format(lo=p * step, hi=(p + 1) * step))


def _rewrite(spark, cfg, name):
    return rewrite_table(spark, name, [w.replace("edge.t", name) for w in WORKLOAD],
                         RewriteOptions(k=2, sample_rate=0.5, min_block_rows=1500, seed=3,
                                        max_template_regression="off"),  # edge values, not the guard
                         io_properties=cfg.pyiceberg_properties())


@pytest.fixture(scope="module")
def edge(spark, lakehouse_cfg):
    _make(spark, "edge.t")
    return _rewrite(spark, lakehouse_cfg, "edge.t")


def _spark_rows(spark, name, flt):
    where = f" WHERE {flt}" if flt else ""
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}{where}").collect())


def _arrow_rows(table):
    cols = [c.to_pylist() for c in table.columns]
    return sorted(zip(*cols)) if cols else []


def _same(a, b):
    """Row lists equal, treating NaN == NaN."""
    norm = lambda rows: [tuple("NaN" if isinstance(v, float) and v != v else v for v in r) for r in rows]
    return norm(a) == norm(b)


@pytest.mark.parametrize("flt", QUERIES)
def test_edge_values_pruned_equals_spark(spark, catalog, edge, flt):
    want = _spark_rows(spark, "edge.t", flt)
    with pruned_table(spark, catalog, "edge.t", flt) as (df, plan):
        got_spark = sorted(tuple(r) for r in df.collect())
    assert plan.explain.fallback_reason is None
    assert _same(got_spark, want)
    table = catalog.load_table("edge.t")
    got_py = _arrow_rows(read_arrow(table, plan_scan(table, flt)))
    # pyiceberg yields timestamps with tzinfo=UTC; Spark's are naive UTC (session time zone UTC)
    got_py = [tuple(v.replace(tzinfo=None) if hasattr(v, "tzinfo") and v is not None and getattr(v, "tzinfo", None) else v
                    for v in r) for r in got_py]
    assert _same(sorted(got_py, key=repr), sorted(want, key=repr))


def test_edge_layout_prunes_something(catalog, edge):
    table = catalog.load_table("edge.t")
    chosen = [plan_scan(table, q).explain for q in ("x < 0", "s LIKE 'B%'", "x IS NULL")]
    # Iceberg's bounds prune these columns too (floats included): the plan keeps at most what
    # they keep, and the layout's files let some query skip files
    assert all(e.used_layout and e.pando_files <= e.iceberg_files for e in chosen)
    assert any(e.pando_files < e.total_files for e in chosen)


# ---- fallbacks: the layout goes missing, stale or corrupt -----------------------------------

@pytest.fixture()
def fresh(spark, lakehouse_cfg, catalog):
    _make(spark, "edge.f", parts=2, rows=6000)
    _rewrite(spark, lakehouse_cfg, "edge.f")
    return catalog.load_table("edge.f")


def _check(spark, catalog, flt="x < 0"):
    table = catalog.load_table("edge.f")
    plan = plan_scan(table, flt)
    got = _arrow_rows(read_arrow(table, plan))
    want = _spark_rows(spark, "edge.f", flt)
    assert len(got) == len(want)
    with pruned_table(spark, catalog, "edge.f", flt) as (df, _):
        assert _same(sorted(tuple(r) for r in df.collect()), want)
    return plan.explain


def test_rows_appended_after_the_layout_are_always_read(spark, catalog, fresh):
    spark.sql("INSERT INTO edge.f VALUES (999999, -5.0, 'Z', date '2020-01-01', NULL, 1.00)")
    ex = _check(spark, catalog)
    assert ex.fallback_reason is None and ex.files_outside_layout == 1
    assert ex.pando_files >= 1


def test_missing_sidecar_falls_back_and_says_so(spark, catalog, fresh):
    import os
    from pando_iceberg.storage.paths import sidecar_path

    path = sidecar_path(fresh.location(), fresh.properties["pando.sidecar"])
    os.remove(path.replace("file:", "", 1) if path.startswith("file:") else path)
    ex = _check(spark, catalog)
    assert ex.fallback_reason and "layout unusable" in ex.fallback_reason and ex.pando_files == ex.iceberg_files


def test_corrupt_sidecar_falls_back_and_says_so(spark, catalog, fresh):
    from pando_iceberg.storage.paths import sidecar_path

    path = sidecar_path(fresh.location(), fresh.properties["pando.sidecar"]).replace("file:", "", 1)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    ex = _check(spark, catalog)
    assert ex.fallback_reason and "SidecarError" in ex.fallback_reason


def test_path_traversal_in_properties_is_refused(spark, catalog, fresh):
    spark.sql("ALTER TABLE edge.f SET TBLPROPERTIES ('pando.sidecar' = '../../etc/passwd.puffin')")
    ex = _check(spark, catalog)
    assert ex.fallback_reason and "SidecarError" in ex.fallback_reason


def test_icebergs_own_rewrite_makes_the_layout_stale_not_wrong(spark, catalog, fresh, lakehouse_cfg):
    spark.sql(f"CALL {lakehouse_cfg.catalog.name}.system.rewrite_data_files(table => 'edge.f', "
              "options => map('rewrite-all', 'true', 'min-input-files', '1'))")
    ex = _check(spark, catalog)
    assert ex.fallback_reason and "stale" in ex.fallback_reason
