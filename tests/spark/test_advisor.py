"""The layout advisor: Iceberg's own z-values, the ranking of candidates on a real table, and
applying the advised one (real Spark, real Iceberg rewrites)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pando_iceberg.maintenance.advisor import (
    ADVICE_COLUMNS,
    MIN_SAVING,
    WRITTEN_BLOCKS,
    order_positions_of,
    zorder_words,
)

pytestmark = pytest.mark.spark

WORKLOAD = [
    "SELECT count(*) FROM adv.li WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1994-03-01'",
    "SELECT count(*) FROM adv.li WHERE l_shipdate >= date '1996-06-01' AND l_shipdate < date '1996-07-01'",
    "SELECT count(*) FROM adv.li WHERE l_quantity < 5 AND l_discount >= 0.08",
    "SELECT count(*) FROM adv.li WHERE l_quantity > 47",
    "SELECT count(*) FROM adv.li WHERE l_shipdate < date '1992-06-01'",
]


@pytest.fixture(scope="module")
def li(spark, tpch):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS adv")
    spark.sql("DROP TABLE IF EXISTS adv.li")
    # arrival in order-key order, files of about 6,000 rows; quantity and discount as doubles (z-order takes them)
    spark.sql("CREATE TABLE adv.li USING iceberg TBLPROPERTIES ('write.target-file-size-bytes' = '262144') "
              "AS SELECT l_orderkey, l_linenumber, l_partkey, l_shipdate, CAST(l_quantity AS DOUBLE) AS l_quantity, "
              "CAST(l_discount AS DOUBLE) AS l_discount, l_extendedprice, l_shipmode, l_comment "
              "FROM tpch.lineitem ORDER BY l_orderkey")
    return "adv.li"


def test_z_values_are_the_order_icebergs_zorder_writes(spark, catalog, tpch):
    """Within each file Iceberg's z-order rewrite wrote, the rows are in our z-value order."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS adv")
    spark.sql("DROP TABLE IF EXISTS adv.z")
    spark.sql("CREATE TABLE adv.z USING iceberg AS SELECT l_orderkey, l_quantity, l_extendedprice, l_shipmode, "
              "CAST(l_discount AS DOUBLE) AS disc, CASE WHEN l_linenumber = 3 THEN NULL ELSE l_partkey END AS pk "
              "FROM tpch.lineitem")
    for order in ("pk, disc", "l_shipmode, l_orderkey, disc"):
        spark.sql(f"CALL {spark.catalog.currentCatalog()}.system.rewrite_data_files(table => 'adv.z', "
                  f"strategy => 'sort', sort_order => 'zorder({order})', options => map('rewrite-all', 'true'))")
        cols = [c.strip() for c in order.split(",")]
        rows = spark.sql(f"SELECT _file, _pos, {', '.join(cols)} FROM adv.z").toPandas()
        assert len(rows) == spark.table("adv.z").count()
        checked = 0
        for _, part in rows.groupby("_file"):
            part = part.sort_values("_pos")
            t = pa.Table.from_pandas(part[cols], preserve_index=False)
            if "pk" in cols:  # pandas made the nullable integer a float column: back to integers with NULLs
                t = t.set_column(cols.index("pk"), "pk", pa.array(part["pk"].astype("Int64"), pa.int64()))
            words = [tuple(w) for w in zorder_words([t.column(c) for c in cols]).tolist()]
            assert words == sorted(words), order
            checked += len(words)
        assert checked == len(rows)
    t = pa.table({"a": [3, 1, None, 2], "b": [1.0, 0.0, 2.0, 0.5]})
    assert order_positions_of(t, "a ASC NULLS LAST").tolist() == [2, 0, 3, 1]
    assert order_positions_of(t, "a").tolist() == [3, 1, 0, 2]  # Iceberg's default: NULLs first
    assert order_positions_of(t, "A desc").tolist() == [0, 2, 3, 1]  # descending: NULLs last
    assert order_positions_of(t, "zorder(a, b)").tolist() == order_positions_of(t, "zorder(A,b)").tolist()
    with pytest.raises(ValueError, match=r"names 'c', which is not a column of the table; columns: a, b"):
        order_positions_of(t, "c")
    with pytest.raises(ValueError, match=r"not one the advisor models; accepted: 'zorder\(a, b, ...\)'"):
        order_positions_of(t, "a NULLS")


def test_advise_ranks_candidates_and_applies_the_advised_one(spark, catalog, li):
    from pando_iceberg import PandoTable
    from pando_iceberg.maintenance.clustering import clustering_information
    from pando_iceberg.table import LayoutOptions

    pt = PandoTable(catalog, li, spark=spark)
    options = LayoutOptions.from_map({"min-block-rows": "6000", "max-template-regression": "off"})
    a = pt.optimize.advise(WORKLOAD, options=options)
    names = [c.name for c, _ in a.ranked]
    assert "as is" in names and {"pando k=1", "pando k=2", "pando k=3", "pando k=4"} <= set(names)
    assert "sort(l_shipdate ASC NULLS LAST)" in names and any(n.startswith("zorder(") for n in names)
    mbs = [c.mb_per_query for c, _ in a.ranked]
    assert mbs == sorted(mbs) and all(0 < c.rows_fraction <= 1 for c, _ in a.ranked)
    now = next(c for c, _ in a.ranked if c.strategy == "none")
    assert now.rewrite_seconds == 0 and now.repays_after_queries is None
    # the table as is also as a plain Spark read opens it: no join here, so Iceberg's pruning is the planner's
    alone = next(c for c, _ in a.ranked if c.name == "as is (Iceberg alone)")
    assert alone.strategy == "as is" and alone.mb_per_query == pytest.approx(now.mb_per_query)
    assert not dict((c.name, adv) for c, adv in a.ranked)["as is (Iceberg alone)"]
    best = a.advised
    assert sum(adv for _, adv in a.ranked) == 1
    # order-key order serves none of these filters: a layout reads markedly less and is advised
    assert best.strategy in ("pando", "sort") and best.mb_per_query <= (1 - MIN_SAVING) * now.mb_per_query
    assert best.repays_after_queries == pytest.approx(best.rewrite_mb / (now.mb_per_query - best.mb_per_query))
    assert len(a.rows()[0]) == len(ADVICE_COLUMNS)
    # Pando's bytes: its rows at the bytes per row of whole blocks of the kept candidate, written
    w = a.written
    assert w is not None and len(w.blocks) == WRITTEN_BLOCKS and min(w.rows) > 0 and min(w.bytes) > 0
    assert w.table_bytes_per_row == pytest.approx(a.table_mb * 1e6 / a.table_rows)
    for c, _ in a.ranked:
        if c.name.startswith("pando k="):
            assert c.mb_per_query == pytest.approx(c.rows_fraction * a.table_mb * w.ratio, rel=1e-9)
    before = catalog.load_table(li).current_snapshot().snapshot_id
    assert catalog.load_table(li).current_snapshot().snapshot_id == before  # advising wrote nothing

    applied = pt.optimize.advise(WORKLOAD, options=options, apply=True)
    assert applied.applied and applied.applied.startswith(applied.advised.name)
    table = catalog.load_table(li)
    assert table.current_snapshot().snapshot_id != before
    assert spark.table(li).count() == spark.table("tpch.lineitem").count()
    if applied.advised.strategy == "pando":
        assert table.properties.get("pando.layout-id")
        # the blocks written by the advice compress as the rewrite's files do (within 15 %)
        files = table.inspect.files()
        written_per_row = sum(files.column("file_size_in_bytes").to_pylist()) / sum(
            files.column("record_count").to_pylist())
        assert applied.written is not None
        assert applied.written.bytes_per_row == pytest.approx(written_per_row, rel=0.15)
    else:  # Iceberg's sort: its files barely overlap on the column now
        column = applied.advised.spec.split()[0]
        assert clustering_information(table, [column])[0].average_depth < 1.5


def test_advise_procedure_and_its_errors(spark, catalog, li, lakehouse_cfg, tmp_path):
    from pando_iceberg.procedures import ProcedureContext, ProcedureError, call

    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    wl = tmp_path / "wl.sql"
    wl.write_text(";\n".join(WORKLOAD) + ";\n")
    r = call(ctx, f"CALL pando.system.advise(table => '{li}', workload => '{wl}', sort_orders => 'l_partkey DESC', "
                  "options => map('k', '2', 'min-block-rows', '6000', 'max-template-regression', 'off'))")
    assert r.names == [c for c, _ in ADVICE_COLUMNS]
    assert [row[0] for row in r.rows] == list(range(1, len(r.rows) + 1))
    names = {row[1] for row in r.rows}
    assert names >= {"as is", "pando k=1", "pando k=2", "sort(l_partkey DESC)"} and "pando k=3" not in names
    assert sum(row[7] for row in r.rows) == 1 and any(n.startswith("advised: ") for n in r.notes)
    with pytest.raises(ProcedureError, match=r"advise: give 'workload'"):
        call(ctx, f"CALL pando.system.advise(table => '{li}')")
    with pytest.raises(ValueError, match=r"unknown option 'kk'; accepted: in-block-order, k, "):
        call(ctx, f"CALL pando.system.advise(table => '{li}', workload => '{wl}', options => map('kk', '2'))")
    with pytest.raises(ProcedureError, match=r"advise: sort order 'nope DESC' names 'nope', which is not a column"):
        call(ctx, f"CALL pando.system.advise(table => '{li}', workload => '{wl}', "
                  "sort_orders => 'l_shipdate; nope DESC')")
    with pytest.raises(ProcedureError, match=r"table 'adv.nope' does not exist"):
        call(ctx, f"CALL pando.system.advise(table => 'adv.nope', workload => '{wl}')")


def test_advise_and_apply_runbook_writes_only_what_repays_in_time(spark, catalog, lakehouse_cfg, tmp_path, li):
    """The runbook lays the table out only when the advised layout repays its rewrite within
    max_repay_days of the logged workload's queries a day."""
    import datetime as dt
    import json
    from pathlib import Path

    from pando_iceberg.procedures import ProcedureContext, ProcedureError, call
    from pando_iceberg.runner import run_script

    spark.sql("CREATE NAMESPACE IF NOT EXISTS adv")
    spark.sql("DROP TABLE IF EXISTS adv.runbook")
    spark.sql("CREATE TABLE adv.runbook USING iceberg AS SELECT * FROM adv.li ORDER BY l_orderkey")
    now = dt.datetime.now(dt.UTC)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"text": sql.replace("adv.li", "adv.runbook"), "weight": 20,
                                       "timestamp": (now - dt.timedelta(hours=i + 1)).isoformat()}) + "\n"
                           for i, sql in enumerate(WORKLOAD)))  # 100 queries in the last day
    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    text = (Path(__file__).resolve().parents[2] / "procedures" / "advise_and_apply.sql").read_text()
    before = catalog.load_table("adv.runbook").current_snapshot().snapshot_id
    variables = {"table": "adv.runbook", "query_log": str(log), "since": "1 day", "min_block_rows": "6000"}
    (_, soon), = run_script(ctx, text, {**variables, "max_repay_days": "0.0001"})
    assert any(n.startswith("not applied: ") and "more than max_repay_days 0.0001" in n for n in soon.notes), soon.notes
    assert any("100 queries on the table in 1.00 days" in n for n in soon.notes), soon.notes
    assert catalog.load_table("adv.runbook").current_snapshot().snapshot_id == before
    (_, later), = run_script(ctx, text, {**variables, "max_repay_days": "365"})
    assert any(n.startswith("applied: ") for n in later.notes), later.notes
    assert catalog.load_table("adv.runbook").current_snapshot().snapshot_id != before
    assert spark.table("adv.runbook").count() == spark.table("adv.li").count()
    with pytest.raises(ProcedureError, match=r"'max_repay_days' counts days of a logged workload"):
        call(ctx, "CALL pando.system.advise(table => 'adv.runbook', workload => 'SELECT * FROM adv.runbook "
                  "WHERE l_quantity < 3', apply => true, max_repay_days => 1.0)")


def test_advise_tables_ranks_the_tables_by_saving_per_rewrite_second(spark, catalog, li, lakehouse_cfg, tmp_path):
    """Which table first: the same rows in order-key order and in ship-date order, under a
    workload that filters dates mostly; the procedure's ranking is its MB saved per rewrite second."""
    from pando_iceberg.maintenance.advisor import TABLE_RANK_COLUMNS
    from pando_iceberg.procedures import ProcedureContext, ProcedureError, call

    for name, order in (("adv.bykey", "l_orderkey"), ("adv.bydate", "l_shipdate")):  # adv.li may be laid out
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ('write.target-file-size-bytes' = '262144') "
                  f"AS SELECT * FROM adv.li ORDER BY {order}")
    workload = [sql.replace("adv.li", t) for t in ("adv.bykey", "adv.bydate") for sql in WORKLOAD]
    text = tmp_path / "two.sql"
    text.write_text(";\n".join(workload) + ";\n")
    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    r = call(ctx, f"CALL pando.system.advise_tables(tables => 'adv.bydate, adv.bykey', workload => '{text}', "
                  "options => map('k', '2', 'min-block-rows', '6000', 'max-template-regression', 'off'))")
    assert r.names == [c for c, _ in TABLE_RANK_COLUMNS]
    assert [row[0] for row in r.rows] == [1, 2] and {row[1] for row in r.rows} == {"adv.bykey", "adv.bydate"}
    per_second = [row[8] for row in r.rows]
    assert per_second == sorted(per_second, reverse=True)
    for row in r.rows:
        assert row[3] == len(WORKLOAD)  # the workload's queries on each table
        assert row[6] == pytest.approx(max(0.0, row[4] - row[5]) * row[3], rel=1e-3, abs=0.2)
        if row[7] > 0.05:  # the per-second figure lies within what the rounded MB and seconds allow
            assert (row[6] - 5e-4) / (row[7] + 0.05) - 1e-3 <= row[8] <= (row[6] + 5e-4) / (row[7] - 0.05) + 1e-3
    # the date-ordered table reads less now on the date windows: order-key order saves more
    now = {row[1]: row[4] for row in r.rows}
    assert now["adv.bydate"] < now["adv.bykey"]
    assert r.rows[0][1] == "adv.bykey"
    with pytest.raises(ProcedureError, match=r"advise_tables: 'tables' names no table"):
        call(ctx, f"CALL pando.system.advise_tables(tables => ' , ', workload => '{text}')")
    with pytest.raises(ProcedureError, match=r"table 'adv.nope' does not exist"):
        call(ctx, f"CALL pando.system.advise_tables(tables => 'adv.li, adv.nope', workload => '{text}')")


def test_the_table_as_is_is_predicted_for_plain_spark_and_for_pandos_planner(spark, catalog):
    """A fact in date order, a workload of months through the date dimension: Pando's planner
    prunes the fact's files by their date-key bounds, Iceberg alone (a plain Spark read) opens
    them all. The advice says both, each as the plans open them."""
    from pando_iceberg import PandoTable
    from pando_iceberg.bench.datasets import load_star
    from pando_iceberg.planner import plan_scan
    from pando_iceberg.table import LayoutOptions

    ns = "advstar"
    load_star(spark, catalog, 0.01, seed=7, namespace=ns, batch_rows=3000)  # 10 files in date order
    workload = [f"SELECT sum(f.amount) FROM {ns}.sales f JOIN {ns}.dates d ON f.date_key = d.date_key "
                f"WHERE d.d_year = 2023 AND d.d_month = {m}" for m in (2, 5, 9)]
    options = LayoutOptions.from_map({"min-block-rows": "3000", "k": "1", "max-template-regression": "off"})
    a = PandoTable(catalog, f"{ns}.sales", spark=spark).optimize.advise(workload, options=options)
    by_name = {c.name: c for c, _ in a.ranked}
    now, alone = by_name["as is"], by_name["as is (Iceberg alone)"]
    assert alone.mb_per_query == pytest.approx(a.table_mb, rel=0.02)  # no predicate of its own: every file
    assert now.mb_per_query < 0.5 * alone.mb_per_query  # key sets on the files' date-key bounds
    month = f"date_key IN (SELECT date_key FROM {ns}.dates WHERE d_year = 2023 AND d_month = 2)"
    ex = plan_scan(catalog.load_table(f"{ns}.sales"), month).explain
    assert ex.iceberg_files == ex.total_files == 10 and ex.pando_files <= 3
