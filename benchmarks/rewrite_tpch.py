"""The rewrite and the planner on real Iceberg tables with Spark (TPC-H, default SF1):

1. rewrite wall time: Pando (sampling + optimization + routing + writing + commit) for lineitem
   and orders, next to Iceberg's own ``rewrite_data_files`` with ``zorder`` on copies of the same
   tables;
2. for every held-out workload query: the result with Pando pruning equals the unpruned result,
   and the files read with Pando are reported next to the files Iceberg's own pruning reads on
   the z-ordered copy and on the Pando table;
3. planner time: ``plan_scan`` next to pyiceberg's ``plan_files`` alone on a table of ~1,000 files.

    .venv/bin/python benchmarks/rewrite_tpch.py --sf 1 --out /tmp/pando-rewrite-bench

Writes ``rewrite_tpch.json`` and ``rewrite_tpch.md`` into --out.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _tpch_bench import parser, start  # noqa: E402
from pando_iceberg.bench.harness import same_rows  # noqa: E402
from pando_iceberg.bench.workloads import qualify, split_workload  # noqa: E402
from pando_iceberg.expr.iceberg import to_pyiceberg  # noqa: E402
from pando_iceberg.planner import plan_scan, table_filter  # noqa: E402
from pando_iceberg.spark.pruned import plan_query, run_sql  # noqa: E402
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table  # noqa: E402
from pando_iceberg.tpch import TPCH_TABLES, copy_table, load_tpch  # noqa: E402
from pando_iceberg.workload.tpch_queries import tpch_workload  # noqa: E402

# Z-order takes no DECIMAL columns: the most filtered non-decimal columns of the workload.
ZORDER = {"lineitem": "zorder(l_shipdate, l_receiptdate, l_shipmode)", "orders": "zorder(o_orderdate, o_custkey)"}


def main() -> int:
    ap = parser(__doc__, sf=1.0, home="/tmp/pando-rewrite-bench-home", out="/tmp/pando-rewrite-bench", per_template=8,
                sample_rate=0.01, driver_memory="8g")
    ap.add_argument("--planner-blocks", type=int, default=1000, help="blocks of the ~1,000-file planner table")
    ap.add_argument("--only-planner", action="store_true", help="skip the rewrite comparison and the queries")
    ap.add_argument("--no-queries", action="store_true", help="rewrites only: skip the held-out queries")
    ap.add_argument("--no-planner", action="store_true", help="skip the ~1,000-file planner measurement")
    args = ap.parse_args()
    out, b, cfg, spark, catalog = start(args, "pando-rewrite-bench")
    report: dict = {"sf": args.sf, "k": args.k, "b": b, "sample_rate": args.sample_rate, "rewrites": {}, "queries": []}

    t0 = time.time()
    load_tpch(spark, args.sf)
    report["load_seconds"] = time.time() - t0
    if not args.only_planner:
        compare(spark, catalog, cfg, args, b, report)
    if not args.no_planner:
        planner(spark, catalog, cfg, args, report)
    (out / "rewrite_tpch.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "rewrite_tpch.md").write_text(markdown(report))
    print(markdown(report))
    return 0 if report.get("mismatches", 0) == 0 else 1


def compare(spark, catalog, cfg, args, b: int, report: dict) -> None:
    """Pando vs z-order rewrites of lineitem and orders, then the held-out queries."""
    for ns in ("pando", "zorder"):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        for table in TPCH_TABLES:
            copy_table(spark, f"tpch.{table}", f"{ns}.{table}")

    train, test = split_workload(tpch_workload(args.per_template, seed=args.seed), args.seed)
    for table in ("lineitem", "orders"):
        t0 = time.time()
        r = rewrite_table(spark, f"pando.{table}", [qualify(s, "pando") for _, s in train],
                          RewriteOptions(k=args.k, sample_rate=args.sample_rate, min_block_rows=b, seed=args.seed),
                          io_properties=cfg.pyiceberg_properties(), progress=lambda m: print("  ", m, flush=True))
        pando_s = time.time() - t0
        # Same block size for both: z-order files sized like Pando's (total bytes / Pando files).
        pando_bytes = spark.sql(f"SELECT sum(file_size_in_bytes) FROM pando.{table}.files").collect()[0][0]
        target = max(1 << 20, int(pando_bytes / max(1, r.added_data_files_count)))
        t0 = time.time()
        spark.sql(f"CALL {cfg.catalog.name}.system.rewrite_data_files(table => 'zorder.{table}', strategy => 'sort', "
                  f"sort_order => '{ZORDER[table]}', options => map('rewrite-all', 'true', "
                  f"'target-file-size-bytes', '{target}'))").collect()
        zorder_s = time.time() - t0
        zfiles = spark.sql(f"SELECT count(*) FROM zorder.{table}.files").collect()[0][0]
        report["rewrites"][table] = {"pando_seconds": pando_s, "pando_phases": r.seconds, "pando_files": r.added_data_files_count,
                                     "pando_blocks": r.block_count, "zorder_seconds": zorder_s, "zorder_files": zfiles,
                                     "ratio": pando_s / zorder_s}
        print(table, report["rewrites"][table], flush=True)

    mismatches = 0
    for i, (template, sql) in enumerate([] if args.no_queries else test, 1):
        z = plan_query(spark, catalog, qualify(sql, "zorder"), use_layout=False).explains
        pq = run_sql(spark, catalog, qualify(sql, "pando"))
        plain = spark.sql(qualify(sql, "tpch")).collect()
        same = same_rows(plain, pq.rows)
        mismatches += not same
        row = {"template": template, "same_result": same}
        for table in ("lineitem", "orders"):
            zk, pk = f"zorder.{table}", f"pando.{table}"
            if pk in pq.explains:
                e = pq.explains[pk]
                row[table] = {"total_files": e.total_files, "iceberg_files_on_pando_table": e.iceberg_files,
                              "pando_files": e.pando_files, "zorder_files_iceberg": z[zk].iceberg_files,
                              "zorder_total_files": z[zk].total_files}
        report["queries"].append(row)
        print(i, template, row, flush=True)
    report["mismatches"] = mismatches


def planner(spark, catalog, cfg, args, report: dict) -> None:
    """Planner time on a table of ~1,000 files: a Pando layout with that many blocks, learned
    from a fine-grained single-table workload (monthly ship dates, quantities, discounts, modes)."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS plan")
    copy_table(spark, "tpch.lineitem", "plan.lineitem")
    rows = spark.table("plan.lineitem").count()
    workload = [f"SELECT * FROM plan.lineitem WHERE l_shipdate >= date '{y}-{m:02d}-01' AND "
                f"l_shipdate < date '{y + (m == 12)}-{m % 12 + 1:02d}-01'" for y in range(1992, 1999) for m in range(1, 13)]
    workload += [f"SELECT * FROM plan.lineitem WHERE l_quantity < {q}" for q in range(2, 51, 2)]
    workload += [f"SELECT * FROM plan.lineitem WHERE l_discount = 0.0{d}" for d in range(0, 10)]
    workload += [f"SELECT * FROM plan.lineitem WHERE l_shipmode = '{m}'" for m in ("AIR", "MAIL", "SHIP", "RAIL", "TRUCK", "FOB")]
    r = rewrite_table(spark, "plan.lineitem", workload,
                      RewriteOptions(k=args.k, sample_rate=args.sample_rate,
                                     min_block_rows=max(100, rows // args.planner_blocks), seed=args.seed),
                      io_properties=cfg.pyiceberg_properties(), progress=lambda m: print("  ", m, flush=True))
    table = catalog.load_table("plan.lineitem")
    filters = ["l_shipdate >= date '1995-01-01' AND l_shipdate < date '1995-02-01'",
               "l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24", "l_shipmode IN ('AIR', 'MAIL')"]
    timings = {"plan_files": [], "plan_scan": []}
    iceberg_filters = {f: to_pyiceberg(table_filter(table, f), table.schema()) for f in filters}
    plan_scan(table, filters[0])  # the sidecar is read once per layout (cached), not per query
    for _ in range(5):
        for f in filters:
            t0 = time.perf_counter()
            list(table.scan(row_filter=iceberg_filters[f]).plan_files())
            timings["plan_files"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plan_scan(table, f)
            timings["plan_scan"].append(time.perf_counter() - t0)
    report["planner"] = {"files": r.added_data_files_count, "blocks": r.block_count,
                         "plan_files_median_s": statistics.median(timings["plan_files"]),
                         "plan_scan_median_s": statistics.median(timings["plan_scan"])}
    report["planner"]["ratio"] = report["planner"]["plan_scan_median_s"] / report["planner"]["plan_files_median_s"]
    print(report["planner"], flush=True)


def markdown(rep: dict) -> str:
    lines = [f"# Pando rewrite on TPC-H SF{rep['sf']} (k={rep['k']}, b={rep['b']:,}, sample {rep['sample_rate']})", ""]
    if not rep["rewrites"]:
        lines = lines[:1]
    else:
        lines += [
             "| table | Pando rewrite s | phases | files | zorder rewrite s | zorder files | Pando / zorder |",
             "|---|---|---|---|---|---|---|"]
    for t, r in rep["rewrites"].items():
        phases = ", ".join(f"{k} {v:.0f}" for k, v in r["pando_phases"].items())
        lines.append(f"| {t} | {r['pando_seconds']:.0f} | {phases} | {r['pando_files']} | {r['zorder_seconds']:.0f} | "
                     f"{r['zorder_files']} | {r['ratio']:.2f} |")
    lines += ["", f"Held-out queries: {len(rep['queries'])}, result mismatches: {rep.get('mismatches', 0)}", "",
              "| query | lineitem: Pando files / Iceberg on Pando table / Iceberg on zorder (of total) | orders: same |",
              "|---|---|---|"]
    for q in rep["queries"]:
        cells = []
        for t in ("lineitem", "orders"):
            c = q.get(t)
            cells.append("-" if c is None else f"{c['pando_files']} / {c['iceberg_files_on_pando_table']} / "
                                               f"{c['zorder_files_iceberg']} (of {c['total_files']} / {c['zorder_total_files']})")
        lines.append(f"| Q{q['template']} | {cells[0]} | {cells[1]} |")
    for t in ("lineitem", "orders"):
        qs = [q[t] for q in rep["queries"] if t in q]
        if qs:
            lines.append(f"\n{t}: mean files read — Pando {statistics.mean(c['pando_files'] for c in qs):.1f}, "
                         f"Iceberg on the z-ordered copy {statistics.mean(c['zorder_files_iceberg'] for c in qs):.1f} "
                         f"({len(qs)} queries)")
    p = rep.get("planner")
    if p:
        lines.append(f"\nPlanner on {p['files']} files: plan_scan {p['plan_scan_median_s'] * 1000:.1f} ms vs pyiceberg "
                     f"plan_files {p['plan_files_median_s'] * 1000:.1f} ms (ratio {p['ratio']:.2f})")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
