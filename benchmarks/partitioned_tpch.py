"""Per-partition Pando layouts vs one whole-table layout (paper §7 two-level
scheme): TPC-H lineitem partitioned by years(l_shipdate) vs unpartitioned, each measured

    (1) as loaded (Iceberg's partition + min/max pruning only),
    (2) after Pando: a layout PER PARTITION on the partitioned table, one layout on the other,

with the same workload, k, b and sample rate; then a new partition's batch is appended to the
partitioned table and laid out alone with `where` (the other partitions untouched). Files and
rows of lineitem read by the held-out TPC-H queries (the planner's counts; with --check every
pruned result is compared with plain Spark through run_sql).

    .venv/bin/python benchmarks/partitioned_tpch.py --sf 0.1 --out /tmp/pando-part-bench

Writes ``partitioned_tpch.json`` and ``partitioned_tpch.md`` into --out.
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
from pando_iceberg.spark.pruned import plan_query, run_sql  # noqa: E402
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table  # noqa: E402
from pando_iceberg.tpch import TPCH_TABLES, copy_table, load_tpch  # noqa: E402
from pando_iceberg.workload.tpch_queries import tpch_workload  # noqa: E402

PART, FLAT = "parts", "flat"
LATE = "l_shipdate >= date '1998-01-01'"  # the last partition (1998) arrives as a later batch


def main() -> int:
    ap = parser(__doc__, sf=0.1, home="/tmp/pando-part-bench-home", out="/tmp/pando-part-bench", per_template=4,
                sample_rate=0.05, driver_memory="4g")
    ap.add_argument("--check", action="store_true", help="compare every pruned result with plain Spark (run_sql)")
    args = ap.parse_args()
    out, b, cfg, spark, catalog = start(args, "pando-partitioned-bench")
    io = cfg.pyiceberg_properties()
    rep: dict = {"sf": args.sf, "k": args.k, "b": b, "stages": {}, "maintenance": {}}

    load_tpch(spark, args.sf)
    for ns in (PART, FLAT):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        for table in TPCH_TABLES:
            if table != "lineitem" or ns == FLAT:
                copy_table(spark, f"tpch.{table}", f"{ns}.{table}")
    spark.sql(f"DROP TABLE IF EXISTS {PART}.lineitem")
    spark.sql(f"CREATE TABLE {PART}.lineitem USING iceberg PARTITIONED BY (years(l_shipdate)) "
              f"TBLPROPERTIES ('format-version'='2') AS SELECT * FROM tpch.lineitem WHERE NOT ({LATE})")
    spark.sql(f"DELETE FROM {FLAT}.lineitem WHERE {LATE}")

    train, test = split_workload(tpch_workload(args.per_template, seed=args.seed), args.seed)
    opts = RewriteOptions(k=args.k, sample_rate=args.sample_rate, min_block_rows=b, seed=args.seed)
    tests = {ns: [(t, qualify(s, ns)) for t, s in test if "lineitem" in s] for ns in (PART, FLAT)}
    for ns, label in ((FLAT, "unpartitioned"), (PART, "partitioned by year")):
        rep["stages"][f"{label}, as loaded"] = measure(spark, catalog, tests[ns], f"{ns}.lineitem", args)
        t0 = time.time()
        r = rewrite_table(spark, f"{ns}.lineitem", [qualify(s, ns) for _, s in train], opts, io_properties=io,
                          progress=lambda m: print("  ", m, flush=True))
        rep["maintenance"][f"{label}: Pando layout"] = {"seconds": time.time() - t0, "blocks": r.block_count,
                                                        "files": r.added_data_files_count}
        what = "a layout per partition" if ns == PART else "one whole-table layout"
        rep["stages"][f"{label}, Pando ({what})"] = measure(spark, catalog, tests[ns], f"{ns}.lineitem", args)

    spark.sql(f"INSERT INTO {PART}.lineitem SELECT * FROM tpch.lineitem WHERE {LATE}")
    rep["stages"]["partitioned, after appending 1998 (no layout there yet)"] = measure(
        spark, catalog, tests[PART], f"{PART}.lineitem", args)
    t0 = time.time()
    r = rewrite_table(spark, f"{PART}.lineitem", [qualify(s, PART) for _, s in train], opts, io_properties=io,
                      where=LATE)
    rep["maintenance"]["partitioned: lay out 1998 alone (where)"] = {
        "seconds": time.time() - t0, "blocks": r.block_count, "files": r.added_data_files_count,
        "partitions": r.partitions_laid_out, "kept": r.partitions_kept}
    rep["stages"]["partitioned, after laying out 1998 with where"] = measure(
        spark, catalog, tests[PART], f"{PART}.lineitem", args)
    rep["mismatches"] = sum(s["mismatches"] for s in rep["stages"].values())
    (out / "partitioned_tpch.json").write_text(json.dumps(rep, indent=2, default=str))
    (out / "partitioned_tpch.md").write_text(markdown(rep))
    print(markdown(rep))
    return 0 if rep["mismatches"] == 0 else 1


def measure(spark, catalog, test, fact: str, args) -> dict:
    """Files/rows of lineitem the held-out queries read (Pando's plan; Iceberg's pruning alone)."""
    rows, mismatches = [], 0
    for template, sql in test:
        if args.check:
            pq = run_sql(spark, catalog, sql)
            mismatches += not same_rows(pq.rows, spark.sql(sql).collect())
            e = pq.explains[fact]
        else:
            e = plan_query(spark, catalog, sql).explains[fact]
        rows.append({"template": template, "total_files": e.total_files, "iceberg_files": e.iceberg_files,
                     "pando_files": e.pando_files, "outside": e.files_outside_layout, "pando_rows": e.pando_rows,
                     "total_rows": e.total_rows, "plan_seconds": e.seconds})
    stage = {"queries": len(rows), "mismatches": mismatches, "per_query": rows}
    for key in ("total_files", "iceberg_files", "pando_files", "outside", "plan_seconds"):
        stage[f"mean_{key}"] = statistics.mean(r[key] for r in rows) if rows else 0.0
    stage["rows_fraction"] = sum(r["pando_rows"] for r in rows) / max(1, sum(r["total_rows"] for r in rows))
    print(json.dumps({k: v for k, v in stage.items() if k != "per_query"}), flush=True)
    return stage


def markdown(rep: dict) -> str:
    first = next(iter(rep["stages"].values()))
    lines = [f"TPC-H SF {rep['sf']}, k={rep['k']}, b={rep['b']:,}; {first['queries']} held-out queries reading "
             "lineitem (means per query).", "",
             "| table, stage | lineitem files | read by Iceberg | read with Pando | outside a layout | rows read / rows "
             "| plan ms | mismatches |", "|---|---|---|---|---|---|---|---|"]
    for name, s in rep["stages"].items():
        lines.append(f"| {name} | {s['mean_total_files']:.1f} | {s['mean_iceberg_files']:.1f} | "
                     f"{s['mean_pando_files']:.1f} | {s['mean_outside']:.1f} | {s['rows_fraction']:.3f} | "
                     f"{1000 * s['mean_plan_seconds']:.0f} | {s['mismatches']} |")
    lines += ["", "| maintenance step | wall time (s) | blocks | files |", "|---|---|---|---|"]
    for name, m in rep["maintenance"].items():
        lines.append(f"| {name} | {m['seconds']:.1f} | {m['blocks']} | {m['files']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
