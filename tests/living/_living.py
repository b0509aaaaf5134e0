"""Helpers of the living-table tests: a small fact table laid out with a literal (join-induced)
cut, and a checker that compares every pruned read with an unpruned one (pyiceberg and Spark)."""

from __future__ import annotations

from pando_iceberg.planner import plan_scan, read_arrow
from pando_iceberg.spark.pruned import pruned_table

KEY = [("l_orderkey", "ascending"), ("l_linenumber", "ascending")]

# Filters on the fact table (living.li) whose pruned reads are compared with unpruned ones.
FILTERS = [
    "l_shipdate < date '1993-06-01'",
    "l_shipdate >= date '1997-06-01'",
    "l_quantity < 10 AND l_shipdate >= date '1995-01-01' AND l_shipdate < date '1995-07-01'",
    "l_orderkey IN (SELECT o_orderkey FROM living.ord WHERE o_orderpriority = '1-URGENT')",
    "l_orderkey IN (SELECT o_orderkey FROM living.ord WHERE o_orderdate < date '1993-01-01') AND l_quantity > 40",
    None,
]

WORKLOAD = [
    "SELECT count(*) FROM living.li WHERE l_shipdate < date '1993-06-01'",
    "SELECT count(*) FROM living.li WHERE l_shipdate >= date '1995-01-01' AND l_shipdate < date '1995-07-01' AND l_quantity < 10",
    "SELECT count(*) FROM living.li WHERE l_shipdate >= date '1996-06-01'",
    "SELECT count(*) FROM living.li JOIN living.ord ON l_orderkey = o_orderkey WHERE o_orderpriority = '1-URGENT'",
    "SELECT count(*) FROM living.li JOIN living.ord ON l_orderkey = o_orderkey WHERE o_orderpriority = '1-URGENT' AND l_quantity > 30",
]


def check_pruning(spark, catalog, name: str, filters=FILTERS, spark_too: bool = True) -> dict:
    """Every filter: pruned pyiceberg read == unpruned read; with ``spark_too`` the Spark pruned
    DataFrame == plain Spark SQL. Returns filter → files the pruned plan reads."""
    table = catalog.load_table(name)
    files = {}
    for flt in filters:
        pruned = plan_scan(table, flt)
        full = plan_scan(table, flt, use_layout=False)
        assert pruned.paths <= full.paths
        got = read_arrow(table, pruned).sort_by(KEY)
        want = read_arrow(table, full).sort_by(KEY)
        assert got.equals(want), (flt, got.num_rows, want.num_rows, pruned.explain.as_dict())
        files[flt] = pruned.explain.pando_files
    if spark_too:
        for flt in [f for f in filters if f][-2:] + [filters[0]]:
            with pruned_table(spark, catalog, name, flt) as (df, _):
                got = sorted(tuple(r) for r in df.select("l_orderkey", "l_linenumber").collect())
            want = sorted(tuple(r) for r in spark.sql(f"SELECT l_orderkey, l_linenumber FROM {name} WHERE {flt}").collect())
            assert got == want, flt
    return files


def snapshots(spark, name: str):
    return [(r.snapshot_id, r.operation) for r in
            spark.sql(f"SELECT snapshot_id, operation FROM {name}.snapshots ORDER BY committed_at").collect()]


def checksum(spark, name: str):
    r = spark.sql(f"SELECT count(*) AS n, sum(xxhash64(*)) AS h FROM {name}").collect()[0]
    return r.n, r.h
