"""A Pando rewrite on a real Iceberg table, then pruned scans through pyiceberg and Spark.

Every query's pruned result is compared to the unpruned result on the same snapshot.
"""

import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.spark.pruned import pruned_table, run_sql
from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions, rewrite_table
from pando_iceberg.workload.tpch_queries import TPCH_QUERIES, tpch_workload

pytestmark = pytest.mark.spark

TEMPLATES = (3, 5, 6, 10, 12, 14)
CHECKSUM = "SELECT count(*) AS n, sum(xxhash64(*)) AS h FROM {t}"


def _snapshots(spark, t):
    return [(r.snapshot_id, r.operation) for r in spark.sql(f"SELECT snapshot_id, operation FROM {t}.snapshots ORDER BY committed_at").collect()]


@pytest.fixture(scope="module")
def laid_out(spark, tpch, lakehouse_cfg):
    """tpch.lineitem copied into 4 files, then rewritten with a Pando layout (k=2)."""
    spark.sql("DROP TABLE IF EXISTS tpch.li_pando")
    spark.sql("CREATE TABLE tpch.li_pando USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              "SELECT * FROM tpch.lineitem WHERE l_orderkey % 4 = 0")
    for r in (1, 2, 3):
        spark.sql(f"INSERT INTO tpch.li_pando SELECT * FROM tpch.lineitem WHERE l_orderkey % 4 = {r}")
    before = spark.sql(CHECKSUM.format(t="tpch.li_pando")).collect()[0]
    snaps_before = _snapshots(spark, "tpch.li_pando")
    workload = [sql.replace(" lineitem", " li_pando") for t, sql in tpch_workload(2, seed=7) if t in TEMPLATES]
    result = rewrite_table(spark, "tpch.li_pando", workload,
                           RewriteOptions(k=2, sample_rate=0.5, min_block_rows=4000, seed=1),
                           io_properties=lakehouse_cfg.pyiceberg_properties())
    return {"result": result, "before": before, "snaps_before": snaps_before}


def test_rewrite_is_one_replace_commit_with_identical_content(spark, laid_out, catalog):
    r = laid_out["result"]
    snaps = _snapshots(spark, "tpch.li_pando")
    assert snaps[:-1] == laid_out["snaps_before"]  # exactly one new snapshot
    assert snaps[-1] == (r.snapshot_id, "replace")
    after = spark.sql(CHECKSUM.format(t="tpch.li_pando")).collect()[0]
    assert (after.n, after.h) == (laid_out["before"].n, laid_out["before"].h)
    assert r.rewritten_data_files_count == 4 and r.failed_data_files_count == 0
    files = spark.sql("SELECT count(*) FROM tpch.li_pando.files").collect()[0][0]
    assert files == r.added_data_files_count >= r.block_count > 1
    props = catalog.load_table("tpch.li_pando").properties
    assert props["pando.layout-id"] == r.layout_id
    assert props["pando.snapshot-id"] == str(r.snapshot_id)
    assert props["pando.base-snapshot-id"] == str(r.base_snapshot_id)
    # pyiceberg reads every row too
    assert catalog.load_table("tpch.li_pando").scan().to_arrow().num_rows == after.n


def test_layout_is_found_again_by_a_new_process(laid_out, lakehouse_cfg):
    code = textwrap.dedent(f"""
        from pando_iceberg.config import load_config
        from pando_iceberg.catalog import load_catalog
        from pando_iceberg.planner import plan_scan
        cat = load_catalog(load_config(home={str(lakehouse_cfg.home)!r}, env={{}}))
        p = plan_scan(cat.load_table("tpch.li_pando"), "l_shipdate < date '1993-01-01'")
        print(p.explain.layout_id, p.explain.fallback_reason, p.explain.pando_files, p.explain.iceberg_files)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    layout_id, reason, chosen, iceberg = out.stdout.split()
    assert layout_id == laid_out["result"].layout_id and reason == "None"
    assert int(chosen) <= int(iceberg)


SINGLE_TABLE_FILTERS = [
    "l_shipdate >= date '1995-01-01' AND l_shipdate < date '1995-03-01'",
    "l_shipdate < date '1992-06-01'",
    "l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "l_shipmode IN ('AIR', 'MAIL') AND l_receiptdate >= date '1994-01-01' AND l_receiptdate < date '1995-01-01'",
    "l_commitdate < l_receiptdate",
    "l_returnflag = 'R' OR l_shipdate > date '1998-09-01'",
    "NOT (l_shipdate >= date '1993-01-01')",
    "l_comment LIKE 'fur%'",
    None,
]


@pytest.mark.parametrize("flt", SINGLE_TABLE_FILTERS)
def test_pyiceberg_pruned_scan_equals_unpruned(laid_out, catalog, flt):
    table = catalog.load_table("tpch.li_pando")
    pruned = plan_scan(table, flt)
    full = plan_scan(table, flt, use_layout=False)
    assert pruned.explain.fallback_reason is None
    assert pruned.paths <= full.paths
    a = read_arrow(table, pruned).sort_by([("l_orderkey", "ascending"), ("l_linenumber", "ascending")])
    b = read_arrow(table, full).sort_by([("l_orderkey", "ascending"), ("l_linenumber", "ascending")])
    assert a.equals(b)


def test_selective_filters_read_fewer_files(laid_out, catalog):
    table = catalog.load_table("tpch.li_pando")
    plan = plan_scan(table, SINGLE_TABLE_FILTERS[0])
    assert plan.explain.pando_files < plan.explain.total_files
    assert plan.explain.blocks_chosen < plan.explain.blocks_total


JOIN_FILTERS = [
    "l_orderkey IN (SELECT o_orderkey FROM tpch.orders WHERE o_orderdate >= date '1995-01-01' AND o_orderdate < date '1995-04-01')",
    "l_orderkey IN (SELECT o_orderkey FROM tpch.orders WHERE o_orderdate < date '1992-06-01') AND l_quantity < 10",
    "l_partkey IN (SELECT p_partkey FROM tpch.part WHERE p_brand = 'Brand#23')",
]


@pytest.mark.parametrize("flt", JOIN_FILTERS)
def test_join_filters_pruned_equal_unpruned(spark, laid_out, catalog, flt):
    """A dimension predicate prunes the fact table where Iceberg's min/max cannot; key sets are
    read from the dimension at planning time, so the answer is exact."""
    table = catalog.load_table("tpch.li_pando")
    plan = plan_scan(table, flt)
    assert plan.explain.fallback_reason is None
    key = ["l_orderkey", "l_linenumber"]
    got = read_arrow(table, plan).select(key).sort_by([(k, "ascending") for k in key])
    want = [tuple(r) for r in spark.sql(f"SELECT l_orderkey, l_linenumber FROM tpch.li_pando WHERE {flt} "
                                        "ORDER BY 1, 2").collect()]
    assert list(zip(*[c.to_pylist() for c in got.columns])) == want
    with pruned_table(spark, catalog, "tpch.li_pando", flt) as (df, _):
        assert sorted(tuple(r) for r in df.select(*key).collect()) == want
    assert plan.explain.pando_files <= plan.explain.iceberg_files


def test_join_induced_pruning_beats_min_max(laid_out, catalog):
    table = catalog.load_table("tpch.li_pando")
    ex = plan_scan(table, JOIN_FILTERS[0]).explain
    assert ex.pando_files < ex.iceberg_files, ex.as_dict()


@pytest.mark.parametrize("flt", SINGLE_TABLE_FILTERS[:4])
def test_spark_pruned_dataframe_equals_plain_spark(spark, catalog, laid_out, flt):
    with pruned_table(spark, catalog, "tpch.li_pando", flt) as (df, plan):
        got = sorted(map(tuple, df.collect()))
    where = f" WHERE {flt}" if flt else ""
    want = sorted(map(tuple, spark.sql(f"SELECT * FROM tpch.li_pando{where}").collect()))
    assert got == want


@pytest.mark.parametrize("template", TEMPLATES)
def test_sql_with_joins_equals_unpruned(spark, catalog, laid_out, template):
    sql = TPCH_QUERIES[template].replace(" lineitem", " tpch.li_pando")
    for name in ("orders", "customer", "nation", "region", "supplier", "part"):
        sql = sql.replace(f" {name}", f" tpch.{name}").replace(f" tpch.tpch.", " tpch.")
    pruned = run_sql(spark, catalog, sql)
    plain = [tuple(r) for r in spark.sql(sql).collect()]
    assert sorted(map(tuple, pruned.rows)) == sorted(plain)
    ex = pruned.explains["tpch.li_pando"]
    assert ex.fallback_reason is None and ex.pando_files <= ex.iceberg_files


def test_bad_options_name_what_is_accepted():
    with pytest.raises(PandoRewriteError, match="unknown option .kk.; accepted: in-block-order, k, k-selection, max-ktuples"):
        RewriteOptions.from_map({"kk": "2"})
    with pytest.raises(PandoRewriteError, match="option 'k-selection' must be one of validate, fixed, got 'best'"):
        RewriteOptions.from_map({"k-selection": "best"})
    assert RewriteOptions.from_map({"k-selection": " Fixed "}).k_selection == "fixed"
    with pytest.raises(PandoRewriteError, match="option 'sample-rate' must be in"):
        RewriteOptions.from_map({"sample-rate": "2"})
    with pytest.raises(PandoRewriteError, match="option 'k' must be an integer, got 'two'"):
        RewriteOptions.from_map({"k": "two"})
