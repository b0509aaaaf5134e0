"""Failures the soak (issue 19, ``pando soak``) found, each fixed and pinned here with the
smallest history that showed it."""

from __future__ import annotations

import pytest

from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.procedures import call
from pando_iceberg.runner import run_script
from pando_iceberg.soak import RUNBOOKS

pytestmark = pytest.mark.spark

GEN = ("SELECT CAST(id AS BIGINT) AS id, CAST(id % 100 AS INT) AS k, CAST(id * 1.5 AS DOUBLE) AS x, "
       "CAST(id % 4 AS INT) AS part FROM range({lo}, {hi})")
FILTERS = ["k < 20", "k >= 50 AND k < 70", "x2 < 300", "x2 >= 3000 AND x2 < 5000", None]


def _table(spark, catalog, ctx, name: str, partitioned: bool) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS soakreg")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg {'PARTITIONED BY (part)' if partitioned else ''} "
              f"TBLPROPERTIES ('format-version'='2') AS " + GEN.format(lo=0, hi=6000))
    workload = "; ".join(f"SELECT count(*) FROM {name} WHERE {w}"
                         for w in ("k < 20", "x < 900", "x >= 3000 AND x < 4500", "x >= 7500"))
    call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', workload => '{workload}', "
              "options => map('k', '2', 'min-block-rows', '300', 'sample-rate', '1.0'))")
    from pando_iceberg.planner.scan import layout_of

    assert "x" in {c for cut in layout_of(catalog.load_table(name), cache=None)[1].cuts for c in cut.columns}
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN x TO x2")  # a column a cut uses
    spark.sql(f"INSERT INTO {name} " + GEN.format(lo=6000, hi=9000).replace("AS x,", "AS x2,"))


def _check(spark, catalog, name: str) -> None:
    table = catalog.load_table(name)
    for flt in FILTERS:
        got = read_arrow(table, plan_scan(table, flt)).sort_by("id")
        want = read_arrow(table, plan_scan(table, flt, use_layout=False)).sort_by("id")
        assert got.equals(want), flt
    assert spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n == 9000


@pytest.mark.parametrize("runbook,partitioned", [("nightly_incremental.sql", False), ("nightly_partitions.sql", True)])
def test_soak_regression_nightly_runbook_after_renaming_a_cut_column(spark, catalog, ctx, runbook, partitioned):
    """A layout with a cut on x, then x renamed and rows appended: the incremental step routed
    the new rows with the stored cut on 'x' and failed in a Spark task ("column 'x' is not in
    the evaluated table"); then the re-layout with the recorded workload failed with "Unknown
    column: x". Now the incremental step lays out nothing and says why, and the re-layout
    leaves the statement on x out (noted) and learns from the rest."""
    name = f"soakreg.{'p' if partitioned else 't'}_rename"
    _table(spark, catalog, ctx, name, partitioned)
    results = run_script(ctx, (RUNBOOKS / runbook).read_text(),
                         {"catalog": ctx.cfg.catalog.name, "table": name, "min_block_rows": "300",
                          "max_rows_outside": "0.1", "retain_last": "5"}, where=runbook)
    incremental = results[1][1]
    assert any("the layout's cuts on x no longer apply (column renamed, dropped or replaced since the layout)" in n
               for n in incremental.notes), incremental.notes
    counts = dict(zip(incremental.names, incremental.rows[0]))  # nothing committed: no file rewritten (it said 1+)
    assert counts["rewritten_data_files_count"] == 0 and counts["added_data_files_count"] == 0, counts
    health = results[2][1]
    actions = [str(r) for r in health.rows if "re-laid out" in str(r)]
    assert actions, health.rows  # the table was laid out again, from the statement that still resolves
    _check(spark, catalog, name)


def test_soak_regression_relayout_follows_renamed_columns_of_the_recorded_workload(spark, catalog, ctx):
    """After renames of the columns the recorded workload names, every recorded statement failed
    to resolve ("Unknown column") and the nightly re-layout failed. Now the statements follow
    the renamed columns by field id; a statement on a dropped column is left out, noted; when
    none is left the call fails naming one."""
    from pando_iceberg.planner.scan import layout_of
    from pando_iceberg.procedures import ProcedureError

    name = "soakreg.t_follow"
    _table(spark, catalog, ctx, name, partitioned=False)  # x renamed to x2, rows appended
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN k TO kk")
    spark.sql(f"INSERT INTO {name} " + GEN.format(lo=9000, hi=9300))  # by position: id, kk, x2, part
    r = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', relearn => true, "
                  "options => map('k', '2', 'min-block-rows', '300', 'sample-rate', '1.0'))")
    assert "4 recorded workload statement(s) follow renamed column(s) k → kk, x → x2" in r.notes, r.notes
    cut_columns = {c for cut in layout_of(catalog.load_table(name), cache=None)[1].cuts for c in cut.columns}
    assert cut_columns <= {"kk", "x2"} and "x2" in cut_columns, cut_columns
    table = catalog.load_table(name)
    for flt in ["kk < 20", "x2 >= 3000 AND x2 < 5000", "x2 >= 7500"]:
        pruned = plan_scan(table, flt)
        assert pruned.explain.pando_files < pruned.explain.total_files  # the new layout prunes
        assert read_arrow(table, pruned).sort_by("id").equals(
            read_arrow(table, plan_scan(table, flt, use_layout=False)).sort_by("id")), flt

    spark.sql(f"ALTER TABLE {name} DROP COLUMN kk")
    spark.sql(f"INSERT INTO {name} SELECT id, x, part FROM ({GEN.format(lo=9300, hi=9400)})")
    r = call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', relearn => true, "
                  "options => map('k', '2', 'min-block-rows', '300', 'sample-rate', '1.0'))")
    assert any(n.startswith("1 of the 4 recorded workload statement(s) no longer resolve against the current schemas "
                            "and were left out (e.g. statement 1 cannot be resolved: ") for n in r.notes), r.notes
    spark.sql(f"ALTER TABLE {name} DROP COLUMN x2")
    spark.sql(f"INSERT INTO {name} SELECT id, part FROM ({GEN.format(lo=9400, hi=9500)})")
    with pytest.raises(ProcedureError, match=r"the workload recorded with the layout of soakreg\.t_follow no longer "
                                             r"resolves against the current schemas \(e\.g\. statement 1 cannot be "
                                             r"resolved: .*give 'workload'"):
        call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', relearn => true)")


def test_soak_regression_relayout_of_a_partitioned_table_whose_files_are_all_of_an_older_spec(spark, ctx):
    """After a partition-spec change and no write since, a Pando re-layout failed with "no
    partition ... matches where None". Now it says what is wrong and what to run first."""
    from pando_iceberg.spark.rewrite import PandoRewriteError

    name = "soakreg.p_spec"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS soakreg")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2') AS "
              + GEN.format(lo=0, hi=2000))
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD bucket(2, id)")
    statement = (f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', workload => "
                 f"'SELECT count(*) FROM {name} WHERE k < 20', options => map('k', '1', 'min-block-rows', '100'))")
    with pytest.raises(PandoRewriteError, match=r"table soakreg\.p_spec has no live data file under its current "
                                                r"partition spec \(all \d+ were written under older specs, which Pando "
                                                r"does not lay out\): rewrite them into the current spec first, e\.g\. "
                                                r"CALL <catalog>\.system\.rewrite_data_files\(table => 'soakreg\.p_spec', "
                                                r"options => map\('rewrite-all', 'true'\)\)"):
        call(ctx, statement)
    spark.sql(f"CALL {ctx.cfg.catalog.name}.system.rewrite_data_files(table => '{name}', "
              "options => map('rewrite-all', 'true'))")  # as the message says; then the re-layout works
    assert call(ctx, statement).rows[0][1] > 0
    # The nightly runbook's health step met the same state and failed the runbook: now it reports it.
    spark.sql(f"ALTER TABLE {name} REPLACE PARTITION FIELD bucket(2, id) WITH bucket(3, id)")
    spark.sql(f"INSERT INTO {name} " + GEN.format(lo=2000, hi=2100))  # under the new spec: no layout
    spark.sql(f"ALTER TABLE {name} DROP PARTITION FIELD bucket(3, id)")  # now every file is of an older spec
    health = call(ctx, f"CALL pando.system.layout_health(table => '{name}', relayout => true)")
    action = [r for r in health.rows if r[0] == "*" and r[1] == "action"]
    assert action and action[0][-1].startswith(f"not re-laid out: table {name} has no live data file under its "
                                               "current partition spec"), health.rows


def test_soak_regression_relayout_right_after_renaming_a_column(spark, catalog, ctx):
    name = "soakreg.t_fresh_rename"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS soakreg")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2') AS " + GEN.format(lo=0, hi=3000))
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN x TO x2")  # no snapshot after this
    call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', workload => "
              f"'SELECT count(*) FROM {name} WHERE x2 < 900', options => map('k', '1', 'min-block-rows', '300', "
              "'sample-rate', '1.0'))")
    table = catalog.load_table(name)
    got = read_arrow(table, plan_scan(table, "x2 < 900")).sort_by("id")
    assert got.num_rows == 600  # was: PandoExprError "column 'x2' is not in the evaluated table (columns: id, k, x, part)"


def test_soak_regression_relayout_after_adding_dropping_and_widening_columns(spark, catalog, ctx):
    """The same with every other schema change since the last snapshot: the rewrite reads the
    snapshot by field id under the current schema (``iceberg_jvm.read_snapshot``), so the table's
    content is unchanged: the added column null, the dropped one gone, the widened one cast."""
    name = "soakreg.t_fresh_evolve"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS soakreg")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2') AS " + GEN.format(lo=0, hi=3000))
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN x TO x2")
    spark.sql(f"ALTER TABLE {name} ADD COLUMN note STRING")
    spark.sql(f"ALTER TABLE {name} DROP COLUMN part")
    spark.sql(f"ALTER TABLE {name} ALTER COLUMN k TYPE BIGINT")  # no snapshot after these
    before = spark.table(name).orderBy("id").collect()
    call(ctx, f"CALL pando.system.rewrite_data_files(table => '{name}', strategy => 'pando', workload => "
              f"'SELECT count(*) FROM {name} WHERE x2 < 900 AND k < 50', options => map('k', '1', "
              "'min-block-rows', '300', 'sample-rate', '1.0'))")
    spark.sql(f"REFRESH TABLE {name}")
    assert spark.sql(f"SELECT operation FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0] == "replace"
    after = spark.table(name).orderBy("id").collect()
    assert after == before and spark.table(name).columns == ["id", "k", "x2", "note"]
    table = catalog.load_table(name)
    got = read_arrow(table, plan_scan(table, "x2 < 900 AND k < 50")).sort_by("id")
    assert got.column("id").to_pylist() == [r.id for r in before if r.x2 < 900 and r.k < 50]


def test_soak_regression_pruned_query_reading_no_file_right_after_renaming_a_column(spark, catalog):
    """Seed 90, day 54: a column renamed, no snapshot since, then a query whose join pruning kept
    no file of the fact: the empty DataFrame standing for its scan took the schema of the
    planned snapshot (``snapshot-id``, Iceberg's time travel: the old name), and Spark failed to
    resolve the query's new name ("`f`.`quantity` cannot be resolved. Did you mean ...
    `f`.`qty`"). Now it has the table's current schema, as a staged scan of files has."""
    from pando_iceberg.spark.pruned import run_sql

    name, dim = "soakreg.t_empty_rename", "soakreg.d_empty_rename"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS soakreg")
    for t in (name, dim):
        spark.sql(f"DROP TABLE IF EXISTS {t}")
    spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('format-version'='2') AS " + GEN.format(lo=0, hi=3000))
    spark.sql(f"INSERT INTO {name} " + GEN.format(lo=3000, hi=6000))  # two files
    spark.sql(f"CREATE TABLE {dim} USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              "SELECT CAST(id AS INT) AS k, CAST(IF(id < 50, 'low', 'high') AS STRING) AS band FROM range(0, 100)")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN x TO x2")  # no snapshot after this
    for band, staged in (("none", 0), ("low", None)):  # no file of the fact read; some read
        sql = (f"SELECT count(*) AS n, sum(f.x2) AS s FROM {name} f JOIN {dim} d ON f.k = d.k "
               f"WHERE d.band = '{band}'")
        got = run_sql(spark, catalog, sql)
        assert got.columns == ["n", "s"]
        assert [tuple(r) for r in got.rows] == [tuple(r) for r in spark.sql(sql).collect()], band
        if staged is not None:
            assert got.explains[name].pando_files == staged < got.explains[name].iceberg_files, got.notes
