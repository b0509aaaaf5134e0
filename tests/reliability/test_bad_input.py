"""Bad and extreme input (issue 7 §5), each with a clear message or a correct answer.

Already covered elsewhere (not repeated here): malformed / wrong-type / unknown-column /
unknown-function filters (tests/expr/test_errors.py), workload statements that do not parse
(tests/workload), truncated, bit-flipped and future-version sidecars and pointers
(tests/storage/test_sidecar.py, test_paths_pointer.py), a workload with no usable predicate
in a Spark rewrite (tests/reliability/test_spark_regressions.py).

The extreme tables go through the same real path as the differential suite: the layout
engine on Arrow data, real Iceberg files, plan_scan + read_arrow vs a full scan.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from diffgen import RandomCase
from test_differential import full_scan, lay_out

SCHEMAS = {"ns.t": pa.schema([("a", pa.int64()), ("s", pa.string())]),
           "ns.d": pa.schema([pa.field("dk", pa.int64(), nullable=False), ("cat", pa.string())])}


def _workload_error(sql: str) -> str:
    from pando_iceberg.workload import PandoWorkloadError, parse_workload

    with pytest.raises(PandoWorkloadError) as info:
        parse_workload([sql], SCHEMAS)
    return str(info.value)


@pytest.mark.parametrize("sql,pattern", [
    ("SELEC * FROM ns.t", r"(?s)^statement 1 cannot be parsed: .*Line 1, Col: 12.*\nSELEC \* FROM ns\.t$"),
    ("SELECT * FROM ns.nope WHERE a < 1", r"^statement 1: unknown table 'ns\.nope'; known tables: ns\.t, ns\.d"),
    ("SELECT * FROM ns.t WHERE nope < 3", r"^statement 1 cannot be resolved: Column 'nope' could not be resolved"),
])
def test_workload_errors_name_the_statement_and_what_is_wrong(sql, pattern):
    msg = _workload_error(sql)
    assert re.search(pattern, msg), msg
    assert "\x1b[" not in msg  # no terminal colour codes (sqlglot's parse errors carry them)


@pytest.mark.parametrize("sql,reason", [
    ("SELECT * FROM ns.t WHERE myudf(a) > 1", r"unknown function \(UDF\?\) MYUDF\(t\.a\): its semantics are not modeled"),
    ("SELECT * FROM ns.t WHERE a = 'abc'", r"literal 'abc' cannot be compared with column 'a' of type int64"),
    ("SELECT * FROM ns.t WHERE rand() < 0.5", r"non-deterministic"),
])
def test_unmodelable_workload_predicates_are_reported_with_the_reason(sql, reason):
    from pando_iceberg.workload import parse_workload

    wl = parse_workload([sql, "SELECT * FROM ns.t WHERE a < 5"], SCHEMAS)
    assert [c.key for c in wl.candidate_cuts("ns.t")] == ["a < 5"]  # the usable one stays usable
    assert len(wl.unsupported) == 1 and re.search(reason, wl.unsupported[0].reason), wl.unsupported


def test_a_workload_without_predicates_yields_no_cut():
    from pando_iceberg.workload import parse_workload

    wl = parse_workload(["SELECT * FROM ns.t", "SELECT count(*) FROM ns.t GROUP BY s"], SCHEMAS)
    assert wl.candidate_cuts("ns.t") == [] and not wl.unsupported


# ---- extreme tables, laid out for real ------------------------------------------------------

def _case(seed: int, fact: pa.Table, workload: list[str], *, k: int = 2, b: int = 1) -> RandomCase:
    dim = pa.table({"dk": pa.array([0, 1, 2], pa.int64()), "cat": ["x", "y", None], "dv": pa.array([1, 2, 3], pa.int32()),
                    "dd": pa.array([18262, 18263, 18264], pa.int32()).cast(pa.date32())},
                   schema=pa.schema([pa.field("dk", pa.int64(), nullable=False), ("cat", pa.string()),
                                     ("dv", pa.int32()), ("dd", pa.date32())]))
    return RandomCase(seed, fact.num_rows, [], fact, dim, k, b, 1.0, workload, [])


def _check(catalog, case, queries) -> list:
    from pando_iceberg.planner import plan_scan, read_arrow

    table, _, dim_name, layout = lay_out(catalog, case)
    if callable(queries):  # queries that depend on the layout learned
        queries = queries(layout)
    explains = []
    for q in queries:
        q = q.replace("$dim", dim_name)
        plan = plan_scan(table, q)
        got = np.sort(read_arrow(table, plan, columns=("rid",)).column(0).to_numpy())
        assert np.array_equal(got, full_scan(table, plan.filter)), q
        explains.append(plan.explain)
    return layout, explains


def test_one_row_table(catalog):
    fact = pa.table({"rid": pa.array([0], pa.int64()), "fk": pa.array([1], pa.int64()), "x": pa.array([2.5])})
    layout, ex = _check(catalog, _case(9101, fact, ["x < 1", "x >= 2"]),
                        ["x < 1", "x >= 2", "x IS NULL", "fk IN (SELECT dk FROM $dim WHERE cat = 'y')", "x = 2.5"])
    assert layout is not None and layout.num_blocks == 1
    assert all(e.fallback_reason is None for e in ex)


def test_all_null_column_and_all_nan_column(catalog):
    n = 500
    fact = pa.table({"rid": pa.array(np.arange(n)), "fk": pa.array(np.arange(n) % 4),
                     "z": pa.array([None] * n, pa.float64()), "w": pa.array(np.full(n, np.nan)),
                     "v": pa.array(np.arange(n) % 50)})
    _, ex = _check(catalog, _case(9102, fact, ["z < 0", "z IS NULL", "w > 1", "w = CAST('NaN' AS DOUBLE)", "v < 10"],
                                  b=50),
                   ["z IS NULL", "z IS NOT NULL", "z < 0", "NOT (z < 0)", "w = CAST('NaN' AS DOUBLE)", "w > 1",
                    "w < 1", "v < 10 AND z IS NULL", "v < 10 OR w > 0"])
    assert ex[1].pando_files == 0 or ex[1].pando_rows >= 0  # z IS NOT NULL matches nothing: any plan is fine
    assert all(e.fallback_reason is None for e in ex)


def test_five_thousand_element_in_lists(catalog):
    """5,000-value IN lists in the workload (as cuts) and in queries: correct, and planned in
    seconds (they took an hour before Domain.intersect became linear)."""
    n = 4000
    rng = np.random.default_rng(3)
    fact = pa.table({"rid": pa.array(np.arange(n)), "fk": pa.array(np.arange(n) % 3),
                     "v": pa.array(rng.integers(0, 10**6, n)), "s": pa.array([f"k{i % 7000}" for i in range(n)])})
    big = ", ".join(str(v) for v in range(0, 1_000_000, 200))  # 5,000 values
    big_s = ", ".join(f"'k{i}'" for i in range(0, 10_000, 2))  # 5,000 strings
    _, ex = _check(catalog, _case(9103, fact, [f"v IN ({big})", "v < 250000", f"s IN ({big_s})"], b=400),
                   [f"v IN ({big})", f"s NOT IN ({big_s}, NULL)"])
    assert all(e.fallback_reason is None for e in ex)


def test_two_hundred_column_table(catalog):
    n = 2000
    rng = np.random.default_rng(4)
    cols = {"rid": pa.array(np.arange(n)), "fk": pa.array(np.arange(n) % 3)}
    for i in range(198):
        cols[f"col{i:03d}"] = pa.array(rng.integers(0, 100, n)) if i % 3 else pa.array(
            [f"v{x}" for x in rng.integers(0, 30, n)])
    fact = pa.table(cols)
    assert fact.num_columns == 200
    workload = [f"col{i:03d} < 20" for i in range(1, 198, 3)] + ["col000 = 'v3'"]

    def queries(layout) -> list[str]:
        cut = sorted(c for cut in layout.cuts for c in cut.columns if c != "col000")
        return ["col001 < 20", "col196 >= 50 AND col000 = 'v3'", "col197 IS NULL OR col004 < 5",
                f"{cut[0]} < 20" if cut else "col000 = 'v3'"]

    layout, ex = _check(catalog, _case(9104, fact, workload, k=3, b=100), queries)
    assert layout is not None and layout.num_blocks > 1
    # 67 templates of equal weight and 20 blocks: the trees cut on some of the columns, not on
    # every one; a query on a column they cut skips blocks
    assert all(e.fallback_reason is None for e in ex)
    on_cut = ex[-1]  # the query on a column the layout cuts (the last of ``queries`` below)
    assert on_cut.blocks_chosen < on_cut.blocks_total, on_cut


# ---- empty tables -----------------------------------------------------------------------------

def test_plan_scan_of_an_empty_table_reads_nothing_and_says_why(catalog):
    from pando_iceberg.planner import plan_scan, read_arrow

    catalog.create_namespace_if_not_exists("badinput")
    if catalog.table_exists("badinput.empty"):
        catalog.purge_table("badinput.empty")
    table = catalog.create_table("badinput.empty", schema=pa.schema([("a", pa.int64())]))
    plan = plan_scan(table, "a < 5")
    assert plan.tasks == [] and plan.explain.fallback_reason == "the table has no snapshot"
    assert read_arrow(table, plan).num_rows == 0


@pytest.mark.spark
def test_rewriting_an_empty_table_is_refused_with_the_reason(spark, catalog):
    from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions, rewrite_table

    spark.sql("CREATE NAMESPACE IF NOT EXISTS badinput")
    spark.sql("DROP TABLE IF EXISTS badinput.e0")
    spark.sql("CREATE TABLE badinput.e0 (a BIGINT) USING iceberg")
    with pytest.raises(PandoRewriteError, match=r"table badinput\.e0 has no snapshot \(no data\): nothing to lay out"):
        rewrite_table(spark, "badinput.e0", ["SELECT * FROM badinput.e0 WHERE a < 5"], RewriteOptions(k=1))
    spark.sql("INSERT INTO badinput.e0 VALUES (1), (2)")
    spark.sql("DELETE FROM badinput.e0 WHERE a > 0")  # a snapshot, but no live row
    with pytest.raises(PandoRewriteError, match=r"table badinput\.e0 is empty: nothing to lay out"):
        rewrite_table(spark, "badinput.e0", ["SELECT * FROM badinput.e0 WHERE a < 5"], RewriteOptions(k=1))
    assert spark.sql("SELECT count(*) FROM badinput.e0").collect()[0][0] == 0


def test_large_in_lists_meet_each_other_in_linear_time():
    """``Domain.intersect`` compared every span with every span: a 5,000-value NOT IN filter
    against a 5,000-value IN cut took about an hour (1,000 values: 130 s). One sweep now."""
    import time

    from pando_iceberg.expr import ExprCut, TableFilter

    schema = pa.schema([("v", pa.int64())])
    values = ", ".join(str(v) for v in range(0, 500_000, 100))
    f = TableFilter.from_sql(f"v NOT IN ({values})", schema, "t")
    cut = ExprCut(f"v IN ({values}, 7)", schema)
    t0 = time.process_time()
    assert tuple(f.sides(cut)) == (True, True)  # v = 7 satisfies both
    assert tuple(TableFilter.from_sql(f"v IN ({values})", schema, "t").sides(cut)) == (True, False)
    assert time.process_time() - t0 < 60


def test_linear_domain_intersection_equals_the_pairwise_one():
    """The sweep gives the same set as intersecting every span with every span (random
    domains with overlapping, touching, open/closed and unbounded spans, probed on a grid)."""
    import random
    from fractions import Fraction

    from pando_iceberg.expr.domain import Domain, Span, _max_lo, _min_hi

    def pairwise(a, b):
        out = [Span(*_max_lo(x, y), *_min_hi(x, y)) for x in a.spans for y in b.spans]
        return [s for s in out if not s.is_empty(False)]

    def member(spans, v):
        return any((s.lo is None or v > s.lo or (v == s.lo and s.lo_closed))
                   and (s.hi is None or v < s.hi or (v == s.hi and s.hi_closed)) for s in spans)

    def domain(rng):
        spans = []
        for _ in range(rng.randint(0, 6)):
            lo = None if rng.random() < 0.15 else Fraction(rng.randint(0, 20), 2)
            hi = None if rng.random() < 0.15 else Fraction(rng.randint(0, 20), 2)
            if lo is not None and hi is not None and lo > hi:
                lo, hi = hi, lo
            spans.append(Span(lo, rng.random() < 0.5, hi, rng.random() < 0.5))
        return Domain(tuple(spans), rng.random() < 0.5)

    rng = random.Random(1)
    grid = [Fraction(i, 4) for i in range(-4, 48)]
    for _ in range(3000):
        a, b = domain(rng), domain(rng)
        got, want = a.intersect(b), pairwise(a, b)
        assert [member(got.spans, p) for p in grid] == [member(want, p) for p in grid], (a, b)
        assert got.null == (a.null and b.null)
