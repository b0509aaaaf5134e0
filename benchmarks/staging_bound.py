"""Planning time per held-out TPC-H join query under several staging bounds (and with the query
analysed ahead or after the planning), in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/staging_bound.py --sf 1 --home H [--runs 5]
    PYTHONPATH=. .venv/bin/python benchmarks/staging_bound.py --sf 1 --home H --bounds 16 --analysis ahead,after

``pruned_sql(stage='auto')`` reads a table the trees prune no further than Iceberg through its
staged tasks (a lookup in the JVM's task cache) when its chosen files hold at most
the setting ``spark.sql.pando.staging.maxBytes``; above it Spark's own Iceberg scan plans the table again (and may skip
row groups inside the files with the pushed filter). This times, per query and round, Iceberg's
own planning and Pando's under each bound (``--bounds`` in MiB; ``0``: only the rules before the
bound, ``always``: ``stage='always'``) and each ``--analysis`` (``ahead``: Spark analyses the
query while Python plans, ``pruned.ANALYSE_AHEAD``; ``after``: the rewritten query over views,
analysed after the planning), in an order that turns each round, the same way
``planning_speed.py`` does (executed plan with every scan's input partitions forced). Uses the
laid-out namespace ``planning_speed.py`` made in ``--home`` (run it first). Prints the medians
over the join queries (``--queries``: or the single-table ones, or both, apart) and writes
``staging_bound_sf<SF>.json`` into ``--out``. A bound ``N+rowgroups`` also stages tables whose
chosen files hold one row group each (``pruned.one_row_group_each``, the rule kept); a plain
``N`` turns that rule off.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _tpch_bench


def main() -> int:
    ap = _tpch_bench.parser(__doc__, sf=1, home=".pando-planning", out="benchmarks/results", per_template=4,
                            sample_rate=0.05, driver_memory="4g")
    ap.add_argument("--runs", type=int, default=5, help="timed rounds per query (after one warm-up)")
    ap.add_argument("--bounds", default="0,16,64,always", help="comma-separated MiB bounds (N+rowgroups: and "
                    "files of one row group each), or 'always'")
    ap.add_argument("--analysis", default="ahead", help="comma-separated: ahead, after")
    ap.add_argument("--queries", choices=("join", "single", "all"), default="join",
                    help="the join queries, the single-table ones (Q1, Q6), or both (medians apart)")
    args = ap.parse_args()
    from pando_iceberg.bench.harness import BenchOptions, prepare_dataset, split_for
    from pando_iceberg.bench.workloads import qualify
    from pando_iceberg.planner.caches import KEY_SETS
    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark import pruned
    from pando_iceberg.spark import sql as pando_sql

    out, b, _, spark, catalog = _tpch_bench.start(args, "pando-staging-bound")
    layout = f"pando-k{args.k}"
    opts = BenchOptions(sf=args.sf, layouts=("arrival", layout), per_template=args.per_template, seed=args.seed,
                        out=str(out), block_rows=b, sample_rate=args.sample_rate)
    ns = f"{prepare_dataset(spark, catalog, opts, print)}_{layout.replace('-', '_')}"  # planning_speed.py's names
    if not catalog.table_exists(f"{ns}.lineitem") or \
            not catalog.load_table(f"{ns}.lineitem").properties.get("pando.layout-id"):
        raise SystemExit(f"{ns} has no Pando layout in {args.home}: run benchmarks/planning_speed.py with the same "
                         "--home, --sf and --k first")
    _, test = split_for(opts)
    single = (1, 6)  # the single-table templates
    queries = [(t, qualify(s, ns)) for t, s in test
               if args.queries == "all" or (t in single) == (args.queries == "single")]

    def iceberg(sql: str) -> float:
        t0 = time.perf_counter()
        jv.planned_partitions(spark.sql(sql), in_jvm=True)
        return time.perf_counter() - t0

    def pando(sql: str, mode: str) -> float:
        bound, analysis = mode.split("/")
        bound, _, rule = bound.partition("+")
        pruned.one_row_group_each = row_groups if rule == "rowgroups" else (lambda plan: False)
        limit = 0 if bound == "always" else int(float(bound) * 1024 * 1024)
        spark.conf.set("spark.sql.pando.staging.maxBytes", str(limit))
        pruned.ANALYSE_AHEAD = analysis == "ahead"
        KEY_SETS.clear()  # a held-out query's key sets are new
        t0 = time.perf_counter()
        with pando_sql(spark, sql, catalog=catalog, stage="always" if bound == "always" else "auto") as df:
            jv.planned_partitions(df, in_jvm=True)
            return time.perf_counter() - t0

    modes = ["iceberg"] + [f"{b}/{a}" for b in args.bounds.split(",") for a in args.analysis.split(",")]
    row_groups = pruned.one_row_group_each
    kept = pruned.ANALYSE_AHEAD
    timed: dict[str, list[list[float]]] = {m: [[] for _ in queries] for m in modes}
    try:
        for i, (_, sql) in enumerate(queries):
            for m in modes:  # warm-up
                iceberg(sql) if m == "iceberg" else pando(sql, m)
            for r in range(args.runs):
                turn = (r + i) % len(modes)
                for m in modes[turn:] + modes[:turn]:
                    timed[m][i].append(iceberg(sql) if m == "iceberg" else pando(sql, m))
    finally:
        pruned.ANALYSE_AHEAD = kept
        spark.conf.unset("spark.sql.pando.staging.maxBytes")
        pruned.one_row_group_each = row_groups
    per_query = {m: [statistics.median(v) for v in timed[m]] for m in modes}
    groups = {g: [i for i, (t, _) in enumerate(queries) if (t in single) == (g == "single")]
              for g in ("join", "single")}
    medians = {g: {m: statistics.median([v[i] for i in idx]) for m, v in per_query.items()}
               for g, idx in groups.items() if idx}
    load = os.getloadavg()
    for g, med in medians.items():
        for m in modes:
            total = sum(per_query[m][i] for i in groups[g])
            print(f"{g:>6} {m:>12}: median {med[m] * 1000:6.1f} ms, sum {total * 1000:7.1f} ms"
                  + ("" if m == "iceberg" else f", / Iceberg {med[m] / med['iceberg']:.3f}"))
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    report = {"sf": args.sf, "runs": args.runs, "modes": modes, "templates": [t for t, _ in queries],
              "per_query_s": per_query, "median_s": medians, "load_avg_end": load,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    path = out / f"staging_bound_sf{args.sf:g}.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
