"""A maintenance notebook written only with ``spark.sql``: after ``pando_iceberg.enable(spark)``,
``CALL pando.system.*`` runs Pando's procedures beside Iceberg's own ``CALL <catalog>.system.*``,
and within ``pando_iceberg.pruning(spark)`` its queries read the files Pando keeps."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

import pando_iceberg
import pando_iceberg.spark
from pando_iceberg.procedures import ProcedureContext, ProcedureError, call
from pando_iceberg.procedures.spark_sql import is_enabled
from pando_iceberg.spark import iceberg_jvm as jv
from pando_iceberg.spark.pruned import PrunedDataFrame

pytestmark = pytest.mark.spark

WORKLOAD = """
SELECT count(*) FROM nb.li WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01';
SELECT count(*) FROM nb.li WHERE l_shipdate >= date '1996-03-01' AND l_shipdate < date '1996-06-01';
SELECT count(*) FROM nb.li WHERE l_quantity > 45;
SELECT count(*) FROM nb.li WHERE l_shipdate < date '1993-01-01';
"""
OPTIONS = "options => map('k', '2', 'min-block-rows', '4000')"


@pytest.fixture(scope="module")
def notebook(spark, tpch, tmp_path_factory):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS nb")
    spark.sql("DROP TABLE IF EXISTS nb.li")
    spark.sql("CREATE TABLE nb.li USING iceberg AS SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 0")
    spark.sql("INSERT INTO nb.li SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 1")
    wl = tmp_path_factory.mktemp("nb") / "workload.sql"
    wl.write_text(WORKLOAD)
    pando_iceberg.enable(spark)
    yield str(wl)
    pando_iceberg.disable(spark)


def test_a_maintenance_notebook_in_spark_sql(spark, catalog, lakehouse_cfg, notebook):
    rows_before = spark.table("nb.li").count()
    plan = spark.sql(f"CALL pando.system.optimize_layout(table => 'nb.li', workload => '{notebook}', {OPTIONS})")
    assert plan.columns[:3] == ["query", "weight", "files_read_now"] and plan.count() == 4
    assert "stored as pending layout" in plan.pando_notes[-1], plan.pando_notes
    pending = catalog.load_table("nb.li").properties["pando.pending-layout-id"]

    rewrite = spark.sql(f"CALL pando.system.rewrite_data_files(table => 'nb.li', strategy => 'pando', {OPTIONS})")
    assert rewrite.pando_notes[0].startswith(f"applied pending layout {pending} "), rewrite.pando_notes
    rw = rewrite.first()
    assert rw["layout_id"] == catalog.load_table("nb.li").properties["pando.layout-id"]
    assert rw["rewritten_data_files_count"] == 2 and rw["block_count"] > 1
    last = spark.sql("SELECT operation FROM nb.li.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert last == "replace" and spark.table("nb.li").count() == rows_before

    health = {r["metric"]: r["value"] for r in spark.sql("CALL pando.system.layout_health(table => 'nb.li')").collect()}
    assert health["status"] == "ok" and health["files_outside_layout"] == "0"
    # the same columns, types and rows as the procedure run directly (what `pando sql` prints)
    describe = "CALL pando.system.describe_layout(table => 'nb.li')"
    direct = call(ProcedureContext(lakehouse_cfg, catalog, lambda: spark), describe)
    described = spark.sql(describe)
    assert described.columns == direct.names
    assert [f.dataType.simpleString() for f in described.schema.fields] == [t for _, t in direct.columns]
    assert [tuple(r) for r in described.collect()] == [tuple(r) for r in direct.rows]

    # Iceberg's own procedures in the same session are Spark's
    name = lakehouse_cfg.catalog.name
    expired = spark.sql(f"CALL {name}.system.expire_snapshots(table => 'nb.li', older_than => TIMESTAMP '2999-01-01', "
                        "retain_last => 1)").first()
    assert expired["deleted_data_files_count"] == 2  # the two files the rewrite replaced
    assert spark.sql("SELECT count(*) FROM nb.li.snapshots").first()[0] == 1
    assert spark.table("nb.li").count() == rows_before
    q = "SELECT count(*) FROM nb.li WHERE l_shipdate < date '1993-01-01'"
    with pando_iceberg.spark.sql(spark, q) as df:
        assert df.collect() == spark.sql(q).collect()
        assert all(e.used_layout and e.pando_files < e.total_files for e in df.pando.explains.values())


def test_a_bad_call_names_what_was_wrong(spark, notebook):
    with pytest.raises(ProcedureError, match="layout_health: argument 'table' must be STRING, got int 42"):
        spark.sql("CALL pando.system.layout_health(table => 42)")
    with pytest.raises(ProcedureError, match=r"unknown procedure pando\.system\.nope; valid procedures"):
        spark.sql("CALL pando.system.nope()")
    with pytest.raises(ValueError, match=r"spark\.sql's args and keyword arguments are not accepted"):
        spark.sql("CALL pando.system.layout_health(table => :t)", args={"t": "nb.li"})


def test_enable_is_per_session_and_disable_restores_spark(spark, notebook):
    assert is_enabled(spark)
    other = spark.newSession()
    assert not is_enabled(other)
    with pytest.raises(Exception) as plain:  # Spark knows no catalog 'pando'
        other.sql("CALL pando.system.layout_health(table => 'nb.li')").collect()
    assert not isinstance(plain.value, ProcedureError)
    assert pando_iceberg.enable(spark) is spark and is_enabled(spark)  # twice: no change
    assert spark.sql("SELECT 1 AS x").first()["x"] == 1
    assert spark.sql("SELECT :v AS x", args={"v": 7}).first()["x"] == 7  # Spark's own arguments pass through
    with pytest.raises(TypeError, match="config must be a PandoConfig"):
        pando_iceberg.enable(spark, config="lake")


@pytest.fixture(scope="module")
def laid_out(spark, catalog, notebook):
    """nb.t: four files each spanning the whole range of a, laid out so that a < 50 skips files."""
    from pando_iceberg import LayoutOptions, PandoTable

    spark.sql("DROP TABLE IF EXISTS nb.t")
    spark.sql("CREATE TABLE nb.t (a INT, b BIGINT) USING iceberg")
    for part in range(4):
        spark.sql(f"INSERT INTO nb.t SELECT CAST((id * 7 + {part}) % 1000 AS INT), id "
                  f"FROM range({part * 2000}, {(part + 1) * 2000})")
    workload = ["SELECT count(*) FROM nb.t WHERE a < 100", "SELECT count(*) FROM nb.t WHERE a >= 900",
                "SELECT count(*) FROM nb.t WHERE a BETWEEN 400 AND 450"]
    PandoTable(catalog, "nb.t", spark=spark).optimize.rewrite(
        workload, options=LayoutOptions(k=1, min_block_rows=1000, sample_rate=1.0))
    return "nb.t"


QUERY = "SELECT count(*), sum(b) FROM nb.t WHERE a < 50"


def test_queries_in_a_pruning_block_read_the_files_pando_keeps(spark, catalog, laid_out):
    manager = spark._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    jtable = jv.load_table(spark, laid_out)
    staged_before = manager.fetchSetIds(jtable).size()
    outside = spark.sql(QUERY)  # enabled, outside a block: Spark's own plan
    assert not isinstance(outside, PrunedDataFrame)
    plain = outside.collect()
    assert plain[0][0] > 0
    with pando_iceberg.pruning(spark) as scans:
        df = spark.sql(f"-- a comment first\n({QUERY})")
        assert isinstance(df, PrunedDataFrame) and scans == [df.pando]
        (record,) = df.pando.explains.values()
        assert record.used_layout and record.pando_files < record.total_files, record
        assert manager.fetchSetIds(jtable).size() == staged_before + 1
        assert df.collect() == plain
        assert df.selectExpr("`sum(b)` * 2 AS twice").first()["twice"] == 2 * plain[0][1]  # derived frames read it too
        with pytest.raises(AnalysisException):  # a wrong query: Spark's own error, not Pando's
            spark.sql("SELECT nope FROM nb.t")
        assert spark.sql("SELECT count(*) FROM nb.t WHERE a < :v", args={"v": 50}).first()[0] == plain[0][0]
        assert len(scans) == 1  # the statements with arguments are Spark's
    assert manager.fetchSetIds(jtable).size() == staged_before  # released with the block
    assert df.pando.closed and not isinstance(spark.sql(QUERY), PrunedDataFrame)


def test_a_pruning_block_enables_a_session_for_its_length(spark, catalog, laid_out):
    other = spark.newSession()
    with pando_iceberg.pruning(other, catalog=catalog):
        assert is_enabled(other)
        df = other.sql(QUERY)
        assert isinstance(df, PrunedDataFrame) and df.collect() == spark.sql(QUERY).collect()
    assert not is_enabled(other)
