"""The guard's estimate of a layout's reads against the reads planned on the files it wrote: for one
table a ``pando bench`` run laid out (``LAID``, e.g. ``star_sf1_pando_k3_unguarded.sales``) and the
same table as loaded (``LOADED``), the run's held-out queries on that table are planned on both
tables' files (``reads_now``: the fraction of the table's rows in the files Pando's planner opens), and
the layout's reads are estimated on a fresh sample of the loaded table, as the guard does
(``workload.in_block.files_read``): with the sample's own file bounds, and widened as the guard widens
them. Prints one row per template and the mean.

    PYTHONPATH=. .venv/bin/python benchmarks/guard_estimate_check.py --home H --bench OUT/bench_D_sf1.json \\
        --loaded star_sf1.sales --laid star_sf1_pando_k3_unguarded.sales [--sample-rate 0.01]

``--bench`` is the run's JSON record (or a JSON with ``queries``, ``train_queries`` and ``b``).
``--draws validation``: instead of the run's held-out queries, the guard's own validation draws,
made again as the rewrite made them (the laid table's recorded workload and options, a sample of
the loaded table): the guard's "now" and "with the layout" beside what the planner opens.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True, help="the run's --home")
    p.add_argument("--bench", required=True, help="the run's bench_<dataset>_sf<SF>.json")
    p.add_argument("--loaded", required=True, help="the table as loaded, namespace.table")
    p.add_argument("--laid", required=True, help="the same table laid out by Pando, namespace.table")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--sample-rate", type=float, default=0.01)
    p.add_argument("--draws", choices=("held-out", "validation"), default="held-out",
                   help="the run's held-out queries, or the guard's validation draws made again")
    a = p.parse_args()

    from pando_iceberg.config import load_config
    from pando_iceberg.expr import semantics
    from pando_iceberg.planner.scan import with_dim_keys
    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark.incremental import current_layout
    from pando_iceberg.spark.rewrite_common import (
        SparkKeyProvider,
        row_count,
        seeded_sample,
        table_workload,
    )
    from pando_iceberg.spark.session import spark_session

    d = json.load(open(a.bench))
    test = [q for q in d["queries"] if q["index"] > d.get("train_queries", 0)] or d["queries"]
    cfg = load_config(home=a.home, overrides={"spark": {"master": a.master}})
    with spark_session(cfg) as spark:
        if a.draws == "validation":
            queries, sample, order, cur = _validation(spark, a)
            total = row_count(spark, a.loaded, None)
            scale = sample.num_rows / total
            b_sample = max(1.0, float(json.loads(cur.sidecar.properties["pando.options"])["min-block-rows"]) * scale)
            _report(spark, a, cur, sample, order, queries, scale, b_sample)
            return
        wl, _, queries, schemas = table_workload(spark, a.laid, [q["sql"] + ";" for q in test])
        provider = SparkKeyProvider(spark, schemas, semantics.DEFAULT)
        joins = [j for f, _ in queries for j in f.joins
                 if j.dim_keys is None and wl.key_basis(j.dim_table, j.dim_pk, provider) is not None]
        provider.prefetch([(j.dim_table, j.dim_pk, j.dim_filter) for j in joins])
        queries = [(with_dim_keys(f, lambda j: provider(j.dim_table, j.dim_pk, j.dim_filter), joins)
                    if f.joins else f, w) for f, w in queries]
        cur = current_layout(spark, a.laid, None)
        in_block = json.loads(cur.sidecar.properties.get("pando.in-block-order") or "null")
        order = in_block.get("column") if isinstance(in_block, dict) else None
        total = row_count(spark, a.loaded, None)
        sample = seeded_sample(jv.read_snapshot(spark, a.loaded, None), a.sample_rate, 0)
        scale = sample.num_rows / total
        b_sample = max(1.0, d["b"] * scale)
        _report(spark, a, cur, sample, order, queries, scale, b_sample)


def _validation(spark, a):
    """The guard's validation draws made again: the laid table's recorded workload and options on a
    sample of the loaded table (``rewrite_common.learning_workload``, as ``learn_layout`` calls it)."""
    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark.incremental import current_layout
    from pando_iceberg.spark.rewrite_common import (
        RewriteOptions,
        learning_workload,
        row_count,
        sample_fraction,
        sample_rate,
        seeded_sample,
        table_workload,
    )

    cur = current_layout(spark, a.laid, None)
    props = cur.sidecar.properties
    options = RewriteOptions.from_map(json.loads(props["pando.options"]))
    in_block = json.loads(props.get("pando.in-block-order") or "null")
    order = in_block.get("column") if isinstance(in_block, dict) else None
    sqls = [s + ";" for s, _ in json.loads(props["pando.workload"])]
    wl, target, queries, schemas = table_workload(spark, a.laid, sqls)
    total = row_count(spark, a.loaded, None)
    sample = seeded_sample(jv.read_snapshot(spark, a.loaded, None), sample_fraction(options, total), options.seed)
    expected, _ = learning_workload(spark, wl, target, schemas, queries, sample, options,
                                    sample_rate(options, total), validate=True, fraction=sample.num_rows / total)
    return list(expected.validation), sample, order, cur


def _report(spark, a, cur, sample, order, queries, scale, b_sample) -> None:
    """The table of planned reads (as loaded, laid out) and estimates, per template (the guard's
    weighted mean over the draws a sample row matches, ``in_block.matching_draws``) and overall."""
    import numpy as np

    from pando_iceberg.spark import iceberg_jvm as jv
    from pando_iceberg.spark.rewrite_common import reads_now, static_table
    from pando_iceberg.workload.in_block import files_read, matching_draws, template_reads

    now, _ = reads_now(static_table(jv.load_table(spark, a.loaded), None), None, queries)
    laid, _ = reads_now(static_table(jv.load_table(spark, a.laid), None), None, queries)
    raw = files_read(cur.layout, sample, queries, b_sample, order, fraction=1.0)
    widened = files_read(cur.layout, sample, queries, b_sample, order, fraction=scale)
    live = matching_draws(queries, sample)
    cols = [template_reads(v, queries, live) for v in (now, laid, raw, widened)]
    print(f"{a.laid}: {cur.layout.num_blocks} blocks, in-block order {order}, {sample.num_rows:,} sample rows, "
          f"{len(queries)} {a.draws} queries ({int(live.sum())} match a sample row)")
    print("| template | as loaded (planned) | laid out (planned) | estimate, sample bounds | estimate, widened |")
    print("|---|---|---|---|---|")
    for k in cols[0]:
        print(f"| {k[:80]} | " + " | ".join(f"{c[k]:.3f}" for c in cols) + " |")
    w = np.array([float(x) for _, x in queries])
    means = [float(v @ w / w.sum()) for v in (now, laid, raw, widened)]
    print("| mean (all draws, weighted) | " + " | ".join(f"{v:.3f}" for v in means) + " |")


if __name__ == "__main__":
    main()
