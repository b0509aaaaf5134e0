"""Planning time per query: Pando's (``pando_iceberg.spark.sql``) vs Iceberg's own in Spark.

    .venv/bin/python benchmarks/planning_speed.py                 # TPC-H SF 0.1, k=3, ≈ 10 min first run
    .venv/bin/python benchmarks/planning_speed.py --sf 1 --runs 5

The dataset and its Pando layout are made once (``--home``, reused by later runs) with the
benchmark harness's own steps (``pando_iceberg.bench.harness``: load TPC-H, split the workload
50/50 per template, copy the tables, ``CALL pando.system.rewrite_data_files`` learned on the
train half). Then, per held-out query, on the laid-out namespace, warm (one untimed run first,
then the median of ``--runs``, the timings below interleaved round by round, their order turned
by one each round, so that a slowly varying load hits every kind alike):

- **iceberg**: Spark's own planning of the query: ``spark.sql(q)`` → executed plan, with every
  Iceberg scan's input partitions forced (that is where Iceberg plans its file tasks);
- **pando**: ``pando_iceberg.spark.sql(spark, q)`` → the same executed plan and partitions
  (also measured with row filters off, ``no_row_filters``: what the row filters, which buy
  execution time, cost in planning),
  split into ``plan_parse`` (SQL, the tables' schemas, the workload parser), ``plan_join_keys``
  (Spark jobs computing dimension key sets for literal cuts), ``plan_tables`` (pyiceberg
  planning with the manifest cache + the trees), ``stage`` (the JVM's tasks for the chosen
  files, temp views), ``analyse`` (Spark analysis of the rewritten query) and ``physical``
  (executed plan);
- the two ingredients alone, per table: pyiceberg's ``plan_files`` without and with the decoded
  manifest cache, and the JVM's search for the chosen tasks unfiltered (the old way: the whole
  snapshot) and with the pushed filter (the way kept).

Single-table and join queries are reported apart (medians over queries). Prints a Markdown
table and writes ``planning_speed_sf<SF>_stage_<auto|always>.json`` into ``--out``. Timings are wall clock on a
shared machine: the load average is printed beside them.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _tpch_bench  # noqa: E402

WALK = "jvm"  # --walk: how the executed plan's scans are planned ("py4j": a node at a time, for comparison)


def _force_partitions(df) -> int:
    """Build the executed plan and every BatchScan's input partitions (Iceberg plans its tasks
    there); returns the number of partitions (``iceberg_jvm.planned_partitions``: one JVM call, or
    with ``--walk py4j`` five round trips a plan node, ~8 ms a TPC-H join query on both sides)."""
    from pando_iceberg.spark import iceberg_jvm as jv

    return jv.planned_partitions(df, in_jvm=WALK == "jvm")


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def measure(spark, catalog, sql: str, runs: int, stage: str = "auto") -> dict:
    from pando_iceberg.expr.iceberg import to_pyiceberg
    from pando_iceberg.planner.caches import KEY_SETS
    from pando_iceberg.planner.manifests import ManifestEntryCache, plan_files
    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark import sql as pando_sql
    from pando_iceberg.spark.jvm_filter import java_expression

    def iceberg_once():
        t0 = time.perf_counter()
        _force_partitions(spark.sql(sql))
        return time.perf_counter() - t0

    def pando_once(cold_keys: bool = True):
        if cold_keys:  # a held-out query's literals are new: its dimension key sets are not cached
            KEY_SETS.clear()
        t0 = time.perf_counter()
        with pando_sql(spark, sql, catalog=catalog, stage=stage) as df:
            t1 = time.perf_counter()
            _force_partitions(df)
            total = time.perf_counter() - t0
            parts = dict(df.pando.timings, physical=time.perf_counter() - t1)
            plans = df.pando.plan.plans
        return total, parts, plans

    def without_row_filters() -> float:  # what the row filters cost to plan
        spark.conf.set("spark.sql.pando.rowFilter.maxKeys", "0")
        try:
            return pando_once()[0]
        finally:
            spark.conf.unset("spark.sql.pando.rowFilter.maxKeys")

    iceberg_once()
    _, _, plans = pando_once()  # warm-up (JIT, caches: the process's steady state)
    without_row_filters()
    # The four timings interleaved, round by round: a slow drift of the machine hits them alike.
    # Their order turns by one each round, so that none always follows the same one (in a fixed
    # order Pando's planning always ran right after Iceberg's of the same query).
    ice, pando, warm, no_rf = [], [], [], []
    timings = [lambda: ice.append(iceberg_once()), lambda: pando.append(pando_once()),
               lambda: warm.append(pando_once(cold_keys=False)[0]), lambda: no_rf.append(without_row_filters())]
    for r in range(runs):
        for timed in timings[r % 4:] + timings[:r % 4]:
            timed()
    out = {"tables": sorted(plans), "iceberg_s": _median(ice), "pando_s": _median([p[0] for p in pando]),
           "pando_warm_keys_s": _median(warm), "pando_no_row_filters_s": _median(no_rf)}
    for k in pando[0][1]:
        out[f"pando_{k}_s"] = _median([p[1][k] for p in pando])
    # the ingredients, per table, summed over the query's tables
    cold_py, warm_py, jvm_full, jvm_filtered, chosen, iceberg_kept = [], [], [], [], 0, 0
    for name, plan in plans.items():
        table = catalog.load_table(name)
        row_filter = to_pyiceberg(plan.filter, table.schema())
        jtable = jv.load_table(spark, name)
        jexpr = java_expression(spark._jvm, row_filter, table.schema(), jtable.schema())
        c, w, f, g = [], [], [], []
        cache = ManifestEntryCache()
        plan_files(table, row_filter, snapshot_id=plan.snapshot_id, cache=cache)
        for _ in range(runs):
            t0 = time.perf_counter()
            plan_files(table, row_filter, snapshot_id=plan.snapshot_id, cache=None)
            c.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plan_files(table, row_filter, snapshot_id=plan.snapshot_id, cache=cache)
            w.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            jv.chosen_tasks(jtable, plan.snapshot_id, plan.paths, None)
            f.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _, used = jv.chosen_tasks(jtable, plan.snapshot_id, plan.paths, jexpr)
            g.append(time.perf_counter() - t0)
        cold_py.append(_median(c))
        warm_py.append(_median(w))
        jvm_full.append(_median(f))
        jvm_filtered.append(_median(g))
        chosen += plan.explain.pando_files
        iceberg_kept += plan.explain.iceberg_files
    from pando_iceberg.spark.pruned import stages

    # the others: Spark's own scan
    out["tables_staged"] = sum(stages(p, catalog.load_table(n), stage) for n, p in plans.items())
    out.update(pyiceberg_uncached_s=sum(cold_py), pyiceberg_cached_s=sum(warm_py), jvm_unfiltered_s=sum(jvm_full),
               jvm_filtered_s=sum(jvm_filtered), files_chosen=chosen, files_iceberg=iceberg_kept,
               files_total=sum(p.explain.total_files for p in plans.values()))
    return out


COLUMNS = ("iceberg_s", "pando_s", "pando_warm_keys_s", "pando_no_row_filters_s", "pando_plan_parse_s", "pando_plan_join_keys_s", "pando_plan_tables_s",
           "pando_stage_s", "pando_analyse_s", "pando_physical_s", "pyiceberg_uncached_s", "pyiceberg_cached_s", "jvm_unfiltered_s", "jvm_filtered_s")


def summarize(rows: list[dict]) -> str:
    lines = ["| queries | n | tables staged / planned | " + " | ".join(c[:-2].replace("pando_", "") + " ms" for c in COLUMNS)
             + " | pando / iceberg | without row filters / iceberg |", "|---" * (len(COLUMNS) + 5) + "|"]
    for label, pick in (("single-table", lambda r: len(r["tables"]) == 1), ("join", lambda r: len(r["tables"]) > 1)):
        sel = [r for r in rows if pick(r)]
        if not sel:
            continue
        med = {c: _median([r[c] for r in sel]) for c in COLUMNS}
        staged = f"{sum(r.get('tables_staged', 0) for r in sel)} / {sum(len(r['tables']) for r in sel)}"
        lines.append(f"| {label} | {len(sel)} | {staged} | " + " | ".join(f"{med[c] * 1000:.0f}" for c in COLUMNS)
                     + f" | {med['pando_s'] / med['iceberg_s']:.2f}× | {med['pando_no_row_filters_s'] / med['iceberg_s']:.2f}× |")
    return "\n".join(lines)


def main() -> int:
    ap = _tpch_bench.parser(__doc__, sf=0.1, home="/tmp/pando-planning-speed", out="/tmp/pando-planning-speed/out",
                            per_template=4, sample_rate=0.05, driver_memory="4g")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per query (after one warm-up)")
    ap.add_argument("--stage", default="auto", choices=("auto", "always"),
                    help="pando_iceberg.spark.sql(stage=...): 'always' stages every table (the way before 'auto')")
    ap.add_argument("--templates", default=None, help="comma-separated TPC-H template numbers (default: all)")
    ap.add_argument("--relayout", action="store_true", help="lay the tables out again even when they have a layout")
    ap.add_argument("--walk", default="jvm", choices=("jvm", "py4j"),
                    help="build the executed plan's scan partitions in one JVM call (default) or a node at a time "
                         "through py4j (for comparison: ~8 ms more per join query, both sides)")
    args = ap.parse_args()
    global WALK
    WALK = args.walk

    from pando_iceberg.bench.harness import BenchOptions, apply_layouts, prepare_dataset, split_for
    from pando_iceberg.bench.workloads import qualify
    from pando_iceberg.procedures import ProcedureContext

    out, b, cfg, spark, catalog = _tpch_bench.start(args, "pando-planning-speed")
    layout = f"pando-k{args.k}"
    templates = [int(x) for x in args.templates.split(",")] if args.templates else None
    opts = BenchOptions(sf=args.sf, layouts=("arrival", layout), per_template=args.per_template, seed=args.seed,
                        out=str(out), block_rows=b, sample_rate=args.sample_rate, templates=templates)
    opts.validate()
    source_ns = prepare_dataset(spark, catalog, opts, print)
    train, test = split_for(opts)
    ns = f"{source_ns}_{layout.replace('-', '_')}"
    laid_out = catalog.table_exists(f"{ns}.lineitem") and \
        catalog.load_table(f"{ns}.lineitem").properties.get("pando.layout-id")
    if args.relayout or not laid_out:
        ctx = ProcedureContext(cfg, catalog, lambda: spark, progress=print)
        apply_layouts(ctx, spark, catalog, opts, source_ns, train, print)
    rows = []
    for i, (template, sql) in enumerate(test, 1):
        q = qualify(sql, ns)
        r = measure(spark, catalog, q, args.runs, args.stage)
        r.update(template=template, load=os.getloadavg())
        rows.append(r)
        print(f"query {i}/{len(test)} Q{template}: iceberg {r['iceberg_s'] * 1000:.0f} ms, pando {r['pando_s'] * 1000:.0f} ms "
              f"({len(r['tables'])} table(s)), load {r['load'][0]:.2f}", flush=True)
    table = summarize(rows)
    load = os.getloadavg()
    report = {"sf": args.sf, "k": args.k, "b": b, "runs": args.runs, "walk": WALK, "namespace": ns, "queries": rows,
              "load_avg_end": load, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    Path(out, f"planning_speed_sf{args.sf:g}_stage_{args.stage}.json").write_text(json.dumps(report, indent=2, default=str))
    print(table)
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"over the queries: {min(r['load'][0] for r in rows):.2f}–{max(r['load'][0] for r in rows):.2f} (1 min)")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
