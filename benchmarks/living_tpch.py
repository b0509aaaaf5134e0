"""A layout kept alive, like the paper's Fig. 12: a laid-out TPC-H lineitem receives a new batch
(the orders of the last months and their lineitems, ~10% more rows, later dates); files read by
held-out workload queries are measured

    (a) right after the append, without maintenance (the new files are always read),
    (b) after refresh_literal_cuts + the incremental layout of the batch (stored trees),
    (c) after a full re-layout (learned again on the whole table),

with the wall time of each maintenance step. Every query's pruned result is compared with the
plain Spark result at each stage (--no-check skips that).

    .venv/bin/python benchmarks/living_tpch.py --sf 0.1 --out /tmp/pando-living-bench

Writes ``living_tpch.json`` and ``living_tpch.md`` into --out.
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
from pando_iceberg.maintenance.literal_cuts import refresh_literal_cuts  # noqa: E402
from pando_iceberg.spark.incremental import incremental_rewrite  # noqa: E402
from pando_iceberg.spark.pruned import plan_query, run_sql  # noqa: E402
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table  # noqa: E402
from pando_iceberg.tpch import TPCH_TABLES, copy_table, load_tpch  # noqa: E402
from pando_iceberg.workload.tpch_queries import tpch_workload  # noqa: E402

NS = "living"
FACT = f"{NS}.lineitem"


def main() -> int:
    ap = parser(__doc__, sf=0.1, home="/tmp/pando-living-bench-home", out="/tmp/pando-living-bench", per_template=4,
                sample_rate=0.05, driver_memory="6g")
    ap.add_argument("--incremental-b", type=int, default=None,
                    help="min rows of a block's new file in the incremental layout (default: the layout's smallest block)")
    ap.add_argument("--batch-from", default="1997-11-01", help="orders from this o_orderdate on (and their lineitems) form the batch")
    ap.add_argument("--no-check", action="store_true", help="do not compare pruned results with plain Spark")
    args = ap.parse_args()
    out, b, cfg, spark, catalog = start(args, "pando-living-bench")
    io = cfg.pyiceberg_properties()
    rep: dict = {"sf": args.sf, "k": args.k, "b": b, "batch_from": args.batch_from, "stages": {}, "maintenance": {}}

    t0 = time.time()
    load_tpch(spark, args.sf)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for table in TPCH_TABLES:
        copy_table(spark, f"tpch.{table}", f"{NS}.{table}")
    batch_orders = f"SELECT * FROM tpch.orders WHERE o_orderdate >= date '{args.batch_from}'"
    batch_lines = f"SELECT l.* FROM tpch.lineitem l LEFT SEMI JOIN ({batch_orders}) o ON l.l_orderkey = o.o_orderkey"
    spark.sql(f"DELETE FROM {NS}.lineitem WHERE l_orderkey IN (SELECT o_orderkey FROM ({batch_orders}))")
    spark.sql(f"DELETE FROM {NS}.orders WHERE o_orderdate >= date '{args.batch_from}'")
    rep["load_seconds"] = time.time() - t0

    train, test = split_workload(tpch_workload(args.per_template, seed=args.seed), args.seed)
    train_sql = [qualify(s, NS) for _, s in train]
    test = [(t, qualify(s, NS)) for t, s in test if "lineitem" in s]
    opts = RewriteOptions(k=args.k, sample_rate=args.sample_rate, min_block_rows=b, seed=args.seed)

    t0 = time.time()
    r = rewrite_table(spark, FACT, train_sql, opts, io_properties=io, progress=lambda m: print("  ", m, flush=True))
    rep["maintenance"]["initial_layout"] = {"seconds": time.time() - t0, "blocks": r.block_count, "files": r.added_data_files_count}
    rep["base_rows"] = spark.table(FACT).count()
    rep["stages"]["0 laid out, before the batch"] = measure(spark, catalog, test, args)

    t0 = time.time()
    spark.sql(f"INSERT INTO {NS}.orders {batch_orders}")
    spark.sql(f"INSERT INTO {FACT} {batch_lines}")
    rep["maintenance"]["append"] = {"seconds": time.time() - t0}
    rep["batch_rows"] = spark.table(FACT).count() - rep["base_rows"]
    rep["stages"]["a after the append, no maintenance"] = measure(spark, catalog, test, args)

    t0 = time.time()
    rf = refresh_literal_cuts(spark, FACT, io)
    rep["maintenance"]["refresh_literal_cuts"] = {"seconds": time.time() - t0, "cuts": [c.__dict__ for c in rf.cuts]}
    t0 = time.time()
    inc = incremental_rewrite(spark, FACT, min_block_rows=args.incremental_b, io_properties=io)
    rep["maintenance"]["incremental_layout"] = {
        "seconds": time.time() - t0, "rows_read": inc.rows_read, "rows_laid_out": inc.rows_laid_out,
        "rows_carried_over": inc.rows_carried_over, "blocks_extended": inc.blocks_extended,
        "files_added": inc.added_data_files_count, "min_block_rows": inc.min_block_rows, "phases": inc.seconds}
    rep["stages"]["b after refresh + incremental layout"] = measure(spark, catalog, test, args)

    t0 = time.time()
    r = rewrite_table(spark, FACT, train_sql, opts, io_properties=io)
    rep["maintenance"]["full_relayout"] = {"seconds": time.time() - t0, "blocks": r.block_count,
                                           "files": r.added_data_files_count, "phases": r.seconds}
    rep["stages"]["c after a full re-layout"] = measure(spark, catalog, test, args)
    rep["mismatches"] = sum(s["mismatches"] for s in rep["stages"].values())

    (out / "living_tpch.json").write_text(json.dumps(rep, indent=2, default=str))
    (out / "living_tpch.md").write_text(markdown(rep))
    print(markdown(rep))
    return 0 if rep["mismatches"] == 0 else 1


def measure(spark, catalog, test, args) -> dict:
    """Files/rows of lineitem the held-out queries read with Pando and with Iceberg's pruning alone."""
    rows = []
    mismatches = 0
    for template, sql in test:
        if args.no_check:
            e = plan_query(spark, catalog, sql).explains[FACT]
        else:
            pq = run_sql(spark, catalog, sql)
            e = pq.explains[FACT]
            same = same_rows(pq.rows, spark.sql(sql).collect())
            mismatches += not same
        rows.append({"template": template, "total_files": e.total_files, "iceberg_files": e.iceberg_files,
                     "pando_files": e.pando_files, "outside": e.files_outside_layout, "pando_rows": e.pando_rows,
                     "total_rows": e.total_rows, "fallback": e.fallback_reason})
    stage = {"queries": len(rows), "mismatches": mismatches, "per_query": rows}
    for key in ("total_files", "iceberg_files", "pando_files", "outside"):
        stage[f"mean_{key}"] = statistics.mean(r[key] for r in rows) if rows else 0.0
    stage["rows_fraction"] = (sum(r["pando_rows"] for r in rows) / max(1, sum(r["total_rows"] for r in rows)))
    print(json.dumps({k: v for k, v in stage.items() if k != "per_query"}), flush=True)
    return stage


def markdown(rep: dict) -> str:
    m = rep["maintenance"]
    lines = [f"TPC-H SF {rep['sf']}, k={rep['k']}, b={rep['b']:,}: base lineitem {rep['base_rows']:,} rows, batch "
             f"{rep['batch_rows']:,} rows (orders from {rep['batch_from']} and their lineitems), "
             f"{next(iter(rep['stages'].values()))['queries']} held-out queries reading lineitem.", "",
             "| stage | lineitem files (total) | read by Iceberg min/max | read with Pando | of them outside the layout "
             "| rows read / rows | mismatches |", "|---|---|---|---|---|---|---|"]
    for name, s in rep["stages"].items():
        lines.append(f"| {name} | {s['mean_total_files']:.1f} | {s['mean_iceberg_files']:.1f} | {s['mean_pando_files']:.1f} "
                     f"| {s['mean_outside']:.1f} | {s['rows_fraction']:.3f} | {s['mismatches']} |")
    inc = m["incremental_layout"]
    lines += ["", "| maintenance step | wall time (s) | what |", "|---|---|---|",
              f"| initial full layout | {m['initial_layout']['seconds']:.1f} | {m['initial_layout']['blocks']} blocks |",
              f"| append the batch (2 INSERTs) | {m['append']['seconds']:.1f} | |",
              f"| refresh_literal_cuts | {m['refresh_literal_cuts']['seconds']:.1f} | "
              + "; ".join(f"{c['mode']}: +{c['keys_added']} −{c['keys_removed']} keys, {c['keys_kept_stale']} kept stale"
                          for c in m["refresh_literal_cuts"]["cuts"]) + " |",
              f"| incremental layout | {inc['seconds']:.1f} | {inc['rows_laid_out']:,} rows into {inc['files_added']} files of "
              f"{inc['blocks_extended']} blocks, {inc['rows_carried_over']:,} carried over (min {inc['min_block_rows']:,}) |",
              f"| full re-layout | {m['full_relayout']['seconds']:.1f} | {m['full_relayout']['blocks']} blocks |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
