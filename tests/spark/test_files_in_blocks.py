"""Blocks written as files of about b rows cut along the in-block order (workload/in_block.py),
learned from the templates' synthetic draws (workload/templates.py): sound and exact pruning on
held-out draws, files ≤ 1.3 b rows, each block's files consecutive runs of the order, Iceberg's
min/max pruning files inside the blocks the trees chose."""

import json
import random

import pyarrow.parquet as pq
import pytest

from pando_iceberg.bench.harness import same_rows
from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.planner.scan import layout_of
from pando_iceberg.spark.pruned import run_sql
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.workload.tpch_queries import tpch_workload

pytestmark = pytest.mark.spark

B = 3000
TEMPLATES = (6, 12, 14)


@pytest.fixture(scope="module")
def laid_out(spark, tpch, lakehouse_cfg, catalog):
    spark.sql("DROP TABLE IF EXISTS tpch.li_files")
    spark.sql("CREATE TABLE tpch.li_files USING iceberg TBLPROPERTIES ('format-version'='2') AS "
              "SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 0")
    spark.sql("INSERT INTO tpch.li_files SELECT * FROM tpch.lineitem WHERE l_orderkey % 2 = 1")
    train = [sql.replace(" lineitem", " li_files") for t, sql in tpch_workload(3, seed=11) if t in TEMPLATES]
    result = rewrite_table(spark, "tpch.li_files", train,
                           RewriteOptions(k=2, sample_rate=0.5, min_block_rows=B, seed=3, template_draws=8),
                           io_properties=lakehouse_cfg.pyiceberg_properties())
    table = catalog.load_table("tpch.li_files")
    _, layout, block_of = layout_of(table)
    return {"result": result, "table": table, "layout": layout, "block_of": block_of}


def test_files_of_about_b_rows_cut_along_the_in_block_order(laid_out, catalog):
    r, table, block_of = laid_out["result"], laid_out["table"], laid_out["block_of"]
    pointer_sidecar = _sidecar(table)
    order = json.loads(pointer_sidecar.properties["pando.in-block-order"])
    column = order["column"]
    assert column in ("l_shipdate", "l_receiptdate", "l_discount", "l_quantity")  # the workload's range columns
    assert order["workload_rows_fraction"][column] < order["workload_rows_fraction"]["(none)"]
    templates = json.loads(pointer_sidecar.properties["pando.templates"])
    assert sum(t["synthetic_draws"] for t in templates) > 0
    files = list(table.scan().plan_files())
    assert r.added_data_files_count == len(files) > r.block_count  # blocks hold several files
    by_block: dict[int, list] = {}
    for task in files:
        f = task.file
        assert f.record_count <= 1.3 * B  # no file above 1.3 b rows
        values = pq.read_table(f.file_path.removeprefix("file:"), columns=[column]).column(0).to_pylist()
        by_block.setdefault(block_of[f.file_path], []).append((min(values), max(values)))
    assert any(len(v) > 1 for v in by_block.values())
    for runs in by_block.values():  # a block's files are consecutive runs of its order
        runs.sort()
        assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:]))


def test_held_out_draws_are_exact_and_min_max_prunes_inside_blocks(spark, laid_out, catalog):
    table = laid_out["table"]
    test = [_qualified(sql) for t, sql in tpch_workload(3, seed=99) if t in TEMPLATES]
    for sql in test:
        got = run_sql(spark, catalog, sql)
        plain = [tuple(r) for r in spark.sql(sql).collect()]
        assert same_rows(got.rows, plain, rel_tol=1e-9), sql  # floats: summation order differs between plans
    rng = random.Random(5)
    pruned_inside = 0
    # ranges of the in-block order's column, whose min/max the files inside a block tell apart
    column = json.loads(_sidecar(table).properties["pando.in-block-order"])["column"]
    values = sorted(set(table.scan(selected_fields=(column,)).to_arrow().column(0).drop_null().to_pylist()))
    for _ in range(12):
        lo = rng.randrange(len(values))
        hi = min(len(values) - 1, lo + max(1, len(values) // rng.choice([50, 20, 8])))
        flt = f"{column} >= {_literal(values[lo])} AND {column} < {_literal(values[hi])}"
        plan = plan_scan(table, flt)
        full = plan_scan(table, flt, use_layout=False)
        a = read_arrow(table, plan).filter(plan.filter.evaluate(read_arrow(table, plan)))
        b = read_arrow(table, full).filter(full.filter.evaluate(read_arrow(table, full)))
        assert sorted(a.to_pylist(), key=repr) == sorted(b.to_pylist(), key=repr)
        blocks_files = sum(1 for t in table.scan().plan_files() if laid_out["block_of"][t.file.file_path] in
                           {laid_out["block_of"][x.file.file_path] for x in plan.tasks})
        pruned_inside += blocks_files - len(plan.tasks)
    assert pruned_inside > 0  # Iceberg's min/max skipped files inside chosen blocks


def _literal(value) -> str:
    """A SQL literal of a date, decimal or number read back from the table."""
    import datetime

    return f"date '{value.isoformat()}'" if isinstance(value, datetime.date) else str(value)


def _sidecar(table):
    from pando_iceberg.storage.pointer import layout_pointer
    from pando_iceberg.storage.sidecar import LayoutSidecar
    from pando_iceberg.storage.paths import sidecar_path

    p = layout_pointer(table.properties)
    return LayoutSidecar.read(table.io, sidecar_path(table.location(), p.sidecar), expected_layout_id=p.layout_id,
                              expected_table_uuid=table.metadata.table_uuid)


def _qualified(sql):
    """The held-out query on tpch.li_files and the other tpch tables."""
    from sqlglot import exp, parse_one

    tree = parse_one(sql, read="spark")
    for t in tree.find_all(exp.Table):
        if t.name == "lineitem":
            t.set("this", exp.to_identifier("li_files"))
        t.set("db", exp.to_identifier("tpch"))
    return tree.sql(dialect="spark")


def test_describe_layout_shows_templates_and_in_block_order(spark, catalog, lakehouse_cfg, laid_out):
    from pando_iceberg.procedures import ProcedureContext, call

    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    rows = call(ctx, "CALL pando.system.describe_layout(table => 'tpch.li_files')").rows
    sections = {}
    for r in rows:
        sections.setdefault(r[0], []).append(r[4])
    assert any("synthetic" in d and "l_shipdate (range)" in d for d in sections["template"])
    (order,) = sections["in-block order"]
    assert "cut along l_" in order
    (kept,) = sections["trees kept"]  # k = 2 under k-selection 'validate': 1 or 2 trees, both measured
    chosen = json.loads(_sidecar(laid_out["table"]).properties["pando.k-selection"])
    assert set(chosen["validation_rows_fraction"]) == {"1", "2"} and chosen["kept_k"] == laid_out["layout"].k
    assert kept.startswith(f"k={laid_out['layout'].k} of the layouts learned (k=1 ")
    blocks = [r for r in rows if r[0] == "block"]
    assert sum(int(r[4].split(" file")[0]) for r in blocks) == laid_out["result"].added_data_files_count
