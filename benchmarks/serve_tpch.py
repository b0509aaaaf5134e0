"""``pando serve`` on a ``pando bench`` run's laid-out TPC-H tables: a pyiceberg REST client
(server-side planning, no ``pando_iceberg`` import on its side) plans and reads every held-out
draw of the run's test split that filters the table; for each, the files must be those
``pando_iceberg.scan`` keeps in-process and the rows those plain pyiceberg reads on the same
table. Prints files per draw (through the server, in-process, Iceberg's own plan) and the
median planning latency through the server against in-process (warm).

    PYTHONPATH=. .venv/bin/python benchmarks/serve_tpch.py --home H --out OUT [--layout pando-k3] [--table lineitem]

``OUT`` is the run's ``--out`` (its options and test split); ``H`` its ``--home``. A REST plan
request carries the table's own filter only, so draws whose pruning needs a join (a semi-join on
another table) are planned on their single-table part, as any REST client sends them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--layout", default="pando-k3", help="the run's layout whose namespace is read (default pando-k3)")
    p.add_argument("--table", default="lineitem")
    p.add_argument("--json", help="also write the per-draw rows here")
    a = p.parse_args()

    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest

    import pando_iceberg
    from pando_iceberg.bench.harness import BenchOptions, split_for
    from pando_iceberg.bench.workloads import qualify
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.expr.iceberg import to_pyiceberg
    from pando_iceberg.serve import ServerThread
    from pando_iceberg.workload.extraction import parse_workload

    saved = json.loads(Path(a.out, "checkpoint", "options.json").read_text())
    layout = json.loads(Path(a.out, "checkpoint", f"layout_{a.layout}.json").read_text())
    opts = BenchOptions(**{**saved, "out": a.out})
    _, test = split_for(opts)
    ns = layout["namespace"]
    catalog = load_catalog(load_config(home=a.home))
    table = catalog.load_table(f"{ns}.{a.table}")
    schemas = {f"{ns}.{t}": catalog.load_table((ns, t)).schema().as_arrow() for _, t in catalog.list_tables(ns)}
    draws = []
    for q in parse_workload([qualify(sql, ns) for _, sql in test], schemas).queries:
        tf = q.filters.get(f"{ns}.{a.table}")
        if tf is None or tf.is_true_expr():
            continue
        try:
            expr = to_pyiceberg(tf, table.schema())
        except Exception as e:  # not expressible as one table's pyiceberg filter: a REST client cannot send it
            print(f"skipped (no pyiceberg filter: {type(e).__name__}): {q.sql[:80]}", file=sys.stderr)
            continue
        wire = PlanTableScanRequest(filter=expr).model_dump_json(by_alias=True, exclude_none=True)
        draws.append((q.sql, PlanTableScanRequest.model_validate_json(wire).filter))
    rows, wrong = [], 0
    keys = ("l_orderkey", "l_linenumber") if a.table == "lineitem" else (table.schema().fields[0].name,)
    order = [(k, "ascending") for k in keys]
    with ServerThread(catalog) as server:
        client = RestCatalog("pando", uri=server.uri, **{"scan-planning-mode": "server"})
        rest_table = client.load_table(f"{ns}.{a.table}")
        for sql, expr in draws:
            served = sorted(t.file.file_path for t in rest_table.scan(row_filter=expr).plan_files())
            local = sorted(t.file.file_path for t in pando_iceberg.scan(table, row_filter=expr).plan_files())
            iceberg = len(list(table.scan(row_filter=expr).plan_files()))
            mine = rest_table.scan(row_filter=expr, selected_fields=keys).to_arrow().sort_by(order)
            want = table.scan(row_filter=expr, selected_fields=keys).to_arrow().sort_by(order)
            ok = served == local and mine.equals(want)
            wrong += not ok
            t_rest, t_local = [], []
            for _ in range(5):  # warm: the manifests and the layout are cached after the first plans
                t0 = time.perf_counter()
                list(rest_table.scan(row_filter=expr).plan_files())
                t_rest.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                list(pando_iceberg.scan(table, row_filter=expr).plan_files())
                t_local.append(time.perf_counter() - t0)
            rows.append({"sql": sql[:120], "files_served": len(served), "files_in_process": len(local),
                         "files_iceberg": iceberg, "rows": want.num_rows, "same": ok,
                         "plan_ms_served": 1000 * statistics.median(t_rest[1:]),
                         "plan_ms_in_process": 1000 * statistics.median(t_local[1:])})
    n = len(rows)
    print(f"{ns}.{a.table}: {n} held-out draws, {wrong} differing; files per draw through pando serve "
          f"{sum(r['files_served'] for r in rows) / max(1, n):.1f}, in process "
          f"{sum(r['files_in_process'] for r in rows) / max(1, n):.1f}, Iceberg's own plan "
          f"{sum(r['files_iceberg'] for r in rows) / max(1, n):.1f} (of {len(list(table.scan().plan_files()))})")
    if rows:
        served = statistics.median(r["plan_ms_served"] for r in rows)
        local = statistics.median(r["plan_ms_in_process"] for r in rows)
        print(f"median planning per draw (warm): {served:.1f} ms through the server, {local:.1f} ms in process "
              f"(+{served - local:.1f} ms)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
