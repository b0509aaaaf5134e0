"""One Pando rewrite and its pruned queries as one Spark application (local[N] or spark://...).

Run by tests/cluster/test_standalone.py and benchmarks/cluster_tpch.py, once per master, on the
same lakehouse: the first run may load TPC-H, the second rolls the table back to the first
run's base snapshot, so both rewrites start from the very same data files. It writes a JSON
record of what it did: the commit, every data file's rows and content hash with its block,
the layout, query results, and whether collecting the table to the driver is refused.

    python cluster_job.py --home DIR --master spark://127.0.0.1:7077 --out run.json \
        [--load-sf 0.05] [--rollback-to SNAPSHOT] [--driver-memory 512m] [--max-result-size 4m]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

TABLE = "clu.lineitem"
TEMPLATES = (6, 12, 14)  # lineitem alone, ⋈ orders, ⋈ part
TABLES = ("lineitem", "orders", "part")
FILTERS = [
    "l_shipdate >= date '1995-01-01' AND l_shipdate < date '1995-03-01'",
    "l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "l_orderkey IN (SELECT o_orderkey FROM clu.orders WHERE o_orderdate >= date '1995-01-01' "
    "AND o_orderdate < date '1995-04-01')",
]
HASH = "count(*) AS n, sum(CAST(xxhash64(*) AS DECIMAL(38, 0))) AS h"


def _collect_table(spark) -> str:
    try:
        spark.table(TABLE).collect()
        return "succeeded"
    except Exception as e:  # noqa: BLE001 - the text is the result
        msg = str(e)
        return "refused: maxResultSize" if "maxResultSize" in msg else f"failed: {msg[:300]}"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--load-sf", type=float, help="generate and load TPC-H lineitem, orders, part at this scale factor into namespace clu")
    ap.add_argument("--rollback-to", type=int, help="first roll the table back to this snapshot")
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--executor-memory", default="512m")
    ap.add_argument("--max-result-size", help="spark.driver.maxResultSize (a cap on what may reach the driver)")
    ap.add_argument("--min-block-rows", type=int, default=50_000)
    ap.add_argument("--sample-rate", type=float, default=0.02)
    ap.add_argument("--no-queries", action="store_true")
    args = ap.parse_args(argv)

    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.planner.scan import layout_of
    from pando_iceberg.spark.pruned import pruned_table, run_sql
    from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
    from pando_iceberg.spark.session import start_spark, stop_spark
    from pando_iceberg.tpch import load_tpch
    from pando_iceberg.workload.tpch_queries import tpch_workload

    conf = {"spark.executor.memory": args.executor_memory, "spark.executor.cores": "1", "spark.cores.max": "2"}
    if args.max_result_size:
        conf["spark.driver.maxResultSize"] = args.max_result_size
    cfg = load_config(home=args.home, env={}, overrides={"spark": {"master": args.master, "driver_memory": args.driver_memory,
                                                                   "shuffle_partitions": 4, "conf": conf}})
    out: dict = {"master": args.master}
    t0 = time.time()
    spark = start_spark(cfg, app_name=f"pando-cluster-job {args.master}")
    out["seconds_start"] = time.time() - t0
    try:
        catalog = load_catalog(cfg)
        if args.load_sf:
            t0 = time.time()
            load_tpch(spark, args.load_sf, namespace="clu", tables=TABLES)
            out["seconds_load"] = time.time() - t0
        if args.rollback_to:
            spark.sql(f"CALL {cfg.catalog.name}.system.rollback_to_snapshot('{TABLE}', {args.rollback_to})")
        spark.sql(f"REFRESH TABLE {TABLE}")
        out["base_files"] = spark.sql(f"SELECT count(*) FROM {TABLE}.files").collect()[0][0]
        out["table_bytes"] = spark.sql(f"SELECT sum(file_size_in_bytes) FROM {TABLE}.files").collect()[0][0]

        workload = [sql for t, sql in tpch_workload(2, seed=7) if t in TEMPLATES]
        t0 = time.time()
        r = rewrite_table(spark, TABLE, workload,
                          RewriteOptions(k=2, sample_rate=args.sample_rate, min_block_rows=args.min_block_rows, seed=11),
                          io_properties=cfg.pyiceberg_properties())
        out["seconds_rewrite"] = time.time() - t0
        out["rewrite"] = {"seconds": r.seconds, "block_count": r.block_count, "rewritten": r.rewritten_data_files_count,
                          "added": r.added_data_files_count, "base_snapshot_id": r.base_snapshot_id,
                          "snapshot_id": r.snapshot_id, "layout_id": r.layout_id}

        out["executors"] = spark._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
        table = catalog.load_table(TABLE)
        snap = table.current_snapshot()
        summary = snap.summary.additional_properties
        out["commit"] = {"operation": snap.summary.operation.value, "parent": snap.parent_snapshot_id,
                         **{k: summary.get(k) for k in ("added-data-files", "deleted-data-files", "added-records",
                                                        "deleted-records", "total-records", "total-data-files")}}
        _, layout, block_of_path = layout_of(table, cache=None)
        out["layout"] = {"k": layout.k, "blocks": layout.num_blocks,
                         "sha256": hashlib.sha256(layout.to_bytes()).hexdigest()}
        files = spark.sql(f"SELECT _file AS f, {HASH} FROM {TABLE} GROUP BY _file").collect()
        out["files"] = sorted([block_of_path[row.f], int(row.n), str(row.h)] for row in files)

        if not args.no_queries:
            out["queries"] = {}
            for flt in FILTERS:
                with pruned_table(spark, catalog, TABLE, flt) as (df, plan):
                    df.createOrReplaceTempView("__pruned")
                    got = spark.sql(f"SELECT {HASH} FROM __pruned").collect()[0]
                plain = spark.sql(f"SELECT {HASH} FROM {TABLE} WHERE {flt}").collect()[0]
                out["queries"][flt] = {"pruned": [int(got.n), str(got.h)], "plain": [int(plain.n), str(plain.h)],
                                       "files": plan.explain.pando_files, "iceberg_files": plan.explain.iceberg_files,
                                       "total_files": plan.explain.total_files}
            from pando_iceberg.workload.tpch_queries import TPCH_QUERIES

            for template in (6, 12):
                sql = TPCH_QUERIES[template].replace(" lineitem", f" {TABLE}").replace(" orders", " clu.orders")
                pruned = run_sql(spark, catalog, sql)
                plain = spark.sql(sql).collect()
                out["queries"][f"Q{template}"] = {"pruned": sorted(map(str, map(tuple, pruned.rows))),
                                                  "plain": sorted(map(str, map(tuple, plain))),
                                                  "files": pruned.files_read}

        if args.max_result_size:  # the cap is real: collecting the table itself must be refused
            out["collect_table"] = _collect_table(spark)
    finally:
        stop_spark(spark)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=str)
    return out


if __name__ == "__main__":
    main()
