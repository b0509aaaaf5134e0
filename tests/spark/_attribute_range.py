"""What the attribute-range differential tests share: every query exact through Pando, the
layout's literal cuts, and the cuts whose stored key sets differ from what their predicate
selects in the dimension now."""

from __future__ import annotations

import pando_iceberg.spark as pando_spark
from pando_iceberg.planner.scan import layout_of


def assert_exact(spark, catalog, fact: str, queries: list[str]) -> int:
    """Every query's rows through Pando equal Spark's; returns the files the pruned scans of
    ``fact`` skipped."""
    skipped = 0
    for q in queries:
        want = sorted(map(tuple, spark.sql(q).collect()), key=repr)
        with pando_spark.sql(spark, q, catalog=catalog) as df:
            got = sorted(map(tuple, df.collect()), key=repr)
            ex = df.pando.explains.get(fact)
            skipped += (ex.total_files - ex.pando_files) if ex is not None else 0
        assert got == want, q
    return skipped


def literal_cuts(catalog, fact: str) -> list:
    _, layout, _ = layout_of(catalog.load_table(fact), cache=None)
    return [c for c in layout.cuts if hasattr(c, "origin")]


def keys_now(spark, dim: str, key: str, cut) -> set[int]:
    """The dimension keys the cut's predicate selects now."""
    return {r[0] for r in spark.sql(f"SELECT {key} FROM {dim} WHERE {cut.origin.predicate}").collect()}


def expected_stale(spark, catalog, fact: str, dim: str, key: str) -> set[str]:
    """The literal cuts whose stored keys differ from those their predicate selects now."""
    return {c.origin.predicate for c in literal_cuts(catalog, fact)
            if keys_now(spark, dim, key, c) != set(c.keys.to_array())}
