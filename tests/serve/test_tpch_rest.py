"""A TPC-H lineitem laid out by Pando with Spark (the planner tests' ``laid_out`` fixture, SF 0.01),
read through ``pando serve`` by a pyiceberg REST client on held-out draws of the workload's
templates: for every draw the files ``pando_iceberg.scan`` keeps and the rows of plain pyiceberg."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest

import pando_iceberg
from pando_iceberg.expr.iceberg import to_pyiceberg
from pando_iceberg.workload.extraction import parse_workload
from pando_iceberg.workload.tpch_queries import tpch_workload

pytestmark = pytest.mark.spark


def _planner_tests():
    path = Path(__file__).resolve().parents[1] / "spark" / "test_rewrite_and_planner.py"
    spec = importlib.util.spec_from_file_location("serve_fixture_rewrite_and_planner", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PLANNER = _planner_tests()
tf_sql: dict[str, str] = {}  # a draw's SQL → its lineitem filter as SQL (with its semi-joins)
laid_out = PLANNER.laid_out  # tpch.li_pando: lineitem in 4 files, rewritten with a Pando layout (k=2)


def _held_out_filters(catalog, table):
    """The lineitem filter of each held-out draw (a seed the layout's workload did not use), as the
    pyiceberg expression a REST client sends."""
    schemas = {f"tpch.{name}": catalog.load_table(("tpch", name)).schema().as_arrow()
               for _, name in catalog.list_tables("tpch")}
    queries = [sql.replace(" lineitem", " li_pando") for t, sql in tpch_workload(2, seed=1234)
               if t in PLANNER.TEMPLATES]
    out = []
    tf_sql.clear()
    for q in parse_workload(queries, schemas).queries:
        tf = q.filters.get("tpch.li_pando")
        if tf is not None and not tf.is_true_expr():
            expr = to_pyiceberg(tf, table.schema())
            # as the client sends it (a date literal written 'yyyy-mm-dd'), for the in-process plan too
            wire = PlanTableScanRequest(filter=expr).model_dump_json(by_alias=True, exclude_none=True)
            out.append((q.sql, PlanTableScanRequest.model_validate_json(wire).filter))
            tf_sql[q.sql] = tf.to_sql()
    return out


def test_rest_client_reads_pandos_files_on_held_out_draws(laid_out, catalog, make_client):
    from pando_iceberg.serve import ServerThread

    table = catalog.load_table("tpch.li_pando")
    draws = _held_out_filters(catalog, table)
    assert len(draws) >= 6
    with ServerThread(catalog) as server:
        rest_table = make_client(server.uri).load_table("tpch.li_pando")
        rest_files = iceberg_files = with_joins = 0
        for sql, expr in draws:
            got = sorted(t.file.file_path for t in rest_table.scan(row_filter=expr).plan_files())
            assert got == sorted(t.file.file_path for t in pando_iceberg.scan(table, row_filter=expr).plan_files()), sql
            keys = ("l_orderkey", "l_linenumber")
            order = [(k, "ascending") for k in keys]
            mine = rest_table.scan(row_filter=expr, selected_fields=keys).to_arrow().sort_by(order)
            want = table.scan(row_filter=expr, selected_fields=keys).to_arrow().sort_by(order)
            assert mine.equals(want), sql
            assert all(t.residual is not None for t in rest_table.scan(row_filter=expr).plan_files())
            rest_files += len(got)
            with_joins += pando_iceberg.scan(table, row_filter=tf_sql[sql]).explain().pando_files
            iceberg_files += len(list(table.scan(row_filter=expr).plan_files()))
    # A REST request carries no join: the SQL filter with the query's semi-joins (join pruning) is
    # what an in-process Spark or SQL caller gets, for comparison.
    print(f"\nheld-out draws: {len(draws)}, files through pando serve {rest_files}, Iceberg's plan {iceberg_files}, "
          f"in-process with the queries' joins {with_joins}")
    assert rest_files <= iceberg_files
