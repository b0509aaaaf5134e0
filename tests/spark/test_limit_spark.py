"""LIMIT and top-k pruning through ``pando_iceberg.spark.sql`` (planner/limit.py,
workload/limits.py). ``SELECT <columns> FROM t WHERE p LIMIT k`` reads only the fewest files
every row of which satisfies ``p`` when they hold ``k`` rows: a LIMIT without ORDER BY returns
any ``k`` matching rows, so a result is right when it has ``min(k, matching)`` rows, each a row
of the full result (as a multiset). ``... ORDER BY c LIMIT k`` reads only the files that can
hold one of the first ``k`` rows: its ORDER BY values equal the plain query's, in order. Every
other shape plans as without the LIMIT.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

import pando_iceberg.spark as pspark

pytestmark = pytest.mark.spark

NS = "limitspark"
T = f"{NS}.events"
FILES = 8
ROWS = 100


def _rows(f: int) -> list[tuple]:
    """File ``f``: k in [100 f, 100 f + 99]; v NULL in file 2, NaN in file 5, else k / 1000;
    s one of three strings."""
    out = []
    for i in range(ROWS):
        k = f * ROWS + i
        v = None if f == 2 and i % 3 == 0 else (math.nan if f == 5 and i % 4 == 0 else k / 1000)
        out.append((k, v, ("a", "b", "c")[(k // 37) % 3]))
    return out


@pytest.fixture(scope="module")
def events(spark):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} (k INT, v DOUBLE, s STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for f in range(FILES):
        spark.createDataFrame(_rows(f), "k INT, v DOUBLE, s STRING").coalesce(1).writeTo(T).append()
    assert spark.sql(f"SELECT count(*) FROM {T}.files").collect()[0][0] == FILES
    yield T
    spark.sql(f"DROP TABLE IF EXISTS {T}")


def _key(row) -> tuple:
    return tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in row)


def _check(spark, catalog, q: str, full_q: str, wanted: int) -> tuple[int, int]:
    """Run ``q`` through Pando: ``min(wanted, matching)`` rows, each of ``full_q``'s rows (the
    query without its LIMIT) as a multiset. Returns (files read, files the LIMIT pruned)."""
    full = Counter(_key(r) for r in spark.sql(full_q).collect())
    with pspark.sql(spark, q, catalog=catalog) as df:
        got = Counter(_key(r) for r in df.collect())
        ex = df.pando.explains[T]
    assert sum(got.values()) == min(wanted, sum(full.values())), q
    assert not got - full, f"rows not in the full result: {q}"
    return ex.pando_files, ex.limit_files_pruned


def test_a_limit_reads_the_fewest_fully_matching_files(spark, catalog, events):
    files, pruned = _check(spark, catalog, f"SELECT * FROM {T} WHERE k >= 300 LIMIT 50",
                           f"SELECT * FROM {T} WHERE k >= 300", 50)
    assert (files, pruned) == (1, 4)  # one of the five files of k >= 300 holds 50 rows
    files, pruned = _check(spark, catalog, f"SELECT k, s AS label, 7 FROM {T} WHERE k >= 250 AND s <> 'z' LIMIT 120",
                           f"SELECT k, s AS label, 7 FROM {T} WHERE k >= 250 AND s <> 'z'", 120)
    assert (files, pruned) == (2, 4)  # files 3..7 fully match (file 2 only partly): two of them
    files, pruned = _check(spark, catalog, f"SELECT k FROM {T} LIMIT 30 OFFSET 80", f"SELECT k FROM {T}", 30)
    assert (files, pruned) == (2, 6)  # LIMIT 30 OFFSET 80 needs 110 rows: two files
    files, pruned = _check(spark, catalog, f"SELECT k FROM {T} WHERE k < 700 LIMIT 0",
                           f"SELECT k FROM {T} WHERE k < 700", 0)
    assert files == 0


def test_nulls_and_nan_decide_which_files_fully_match(spark, catalog, events):
    # v > 0.15: NaN is above every number in Spark (file 5's NaN rows match), a NULL never
    # matches (file 2 holds NULLs and is not fully matching though its bounds are)
    full = f"SELECT k, v FROM {T} WHERE v > 0.15"
    files, pruned = _check(spark, catalog, f"{full} LIMIT 600", full, 600)
    assert files == 7 and pruned == 0  # files 1..7 (file 1 partly): the fully matching 500 rows are too few
    files, pruned = _check(spark, catalog, f"{full} LIMIT 500", full, 500)
    assert (files, pruned) == (5, 2)  # files 3..7 fully match (NaN included), files 1 and 2 not
    files, _ = _check(spark, catalog, f"SELECT k, v FROM {T} WHERE v <= 0.6 LIMIT 100",
                      f"SELECT k, v FROM {T} WHERE v <= 0.6", 100)
    assert files == 1  # files 0, 1, 3, 4: not 2 (NULLs) nor 5 (NaN is not <= 0.6)


@pytest.mark.parametrize("q", [
    f"SELECT * FROM {T} WHERE k >= 300 ORDER BY k + 1 LIMIT 50",       # an order by an expression
    f"SELECT s, count(*) FROM {T} WHERE k >= 300 GROUP BY s LIMIT 2",  # groups of every row
    f"SELECT DISTINCT s FROM {T} WHERE k >= 300 LIMIT 2",
    f"SELECT k + 1 FROM {T} WHERE k >= 300 LIMIT 50",                  # an expression may raise (ANSI)
    f"SELECT * FROM {T} WHERE k >= 300 AND rand() < 2 LIMIT 50",       # a predicate Pando does not model
    f"SELECT * FROM {T} WHERE k >= 300 AND k IN (SELECT k FROM {T} WHERE s = 'a') LIMIT 5",
])
def test_other_shapes_plan_as_without_the_limit(spark, catalog, events, q):
    with pspark.sql(spark, q, catalog=catalog) as df:
        df.collect()
        ex = df.pando.explains[T]
    assert ex.limit_files_pruned == 0
    assert ex.pando_files >= 5  # every file of k >= 300


def test_randomized_limits_return_matching_rows(spark, catalog, events):
    rng = random.Random(7)
    pruned_total = 0
    for _ in range(25):
        lo = rng.randrange(0, FILES * ROWS)
        pred = rng.choice([f"k >= {lo}", f"k < {lo}", f"v > {lo / 1000}", f"v <= {lo / 1000} OR s = 'a'",
                           f"k BETWEEN {lo} AND {lo + rng.randrange(50, 400)}", "v IS NOT NULL", "isnan(v)"])
        k = rng.choice([0, 1, 5, 60, 150, 399, 1000])
        cols = rng.choice(["*", "k", "k, v", "s, k AS kk"])
        _, pruned = _check(spark, catalog, f"SELECT {cols} FROM {T} WHERE {pred} LIMIT {k}",
                           f"SELECT {cols} FROM {T} WHERE {pred}", k)
        pruned_total += pruned
    assert pruned_total > 0


def _ordered_check(spark, catalog, q: str, column: int) -> tuple[int, int, str | None]:
    """Run ``q`` (ORDER BY ... LIMIT) through Pando and plainly: the same ORDER BY values in the
    same order (rows themselves may differ among ties). Returns (files read, files pruned,
    boundary)."""
    plain = [_key(r) for r in spark.sql(q).collect()]
    with pspark.sql(spark, q, catalog=catalog) as df:
        got = [_key(r) for r in df.collect()]
        ex = df.pando.explains[T]
    assert [r[column] for r in got] == [r[column] for r in plain], q
    return ex.pando_files, ex.limit_files_pruned, ex.topk_boundary


def test_top_k_reads_the_files_that_can_hold_the_first_rows(spark, catalog, events):
    assert _ordered_check(spark, catalog, f"SELECT * FROM {T} ORDER BY k DESC LIMIT 10", 0) == (1, 7, "700")
    files, _, boundary = _ordered_check(spark, catalog, f"SELECT k, s FROM {T} WHERE k < 450 "
                                        "ORDER BY k DESC LIMIT 20", 0)
    assert (files, boundary) == (2, "300")  # files 0..3 fully match; 3 and 4 can reach 300
    # NaN sorts first in descending order: file 5's NaN rows are the first; file 7 proves 0.7
    files, _, boundary = _ordered_check(spark, catalog, f"SELECT v, k FROM {T} ORDER BY v DESC LIMIT 5", 0)
    assert (files, boundary) == (2, "0.7")
    # ascending puts NULLs first by default: file 2's NULLs, and file 0 proves 0.099
    files, _, boundary = _ordered_check(spark, catalog, f"SELECT v FROM {T} ORDER BY v LIMIT 5", 0)
    assert (files, boundary) == (2, "0.099")
    files, _, _ = _ordered_check(spark, catalog, f"SELECT v AS w, k FROM {T} ORDER BY w NULLS LAST LIMIT 5", 0)
    assert files == 1
    files, _, _ = _ordered_check(spark, catalog, f"SELECT k FROM {T} ORDER BY k LIMIT 10 OFFSET 95", 0)
    assert files == 2  # 105 rows: files 0 and 1


def test_randomized_top_k_equals_the_full_query(spark, catalog, events):
    rng = random.Random(13)
    pruned_total = 0
    for _ in range(30):
        lo = rng.randrange(0, FILES * ROWS)
        pred = rng.choice(["", f"WHERE k >= {lo}", f"WHERE k < {lo}", f"WHERE v > {lo / 1000}",
                           f"WHERE v <= {lo / 1000} OR s = 'a'", "WHERE v IS NOT NULL", "WHERE isnan(v)"])
        column = rng.choice(["k", "v", "s"])
        direction = rng.choice(["", " ASC", " DESC"]) + rng.choice(["", " NULLS FIRST", " NULLS LAST"])
        k = rng.choice([0, 1, 5, 60, 150, 399, 1000])
        _, pruned, _ = _ordered_check(
            spark, catalog, f"SELECT {column}, k FROM {T} {pred} ORDER BY {column}{direction}, k LIMIT {k}", 0)
        pruned_total += pruned
    assert pruned_total > 0


def test_explain_scan_names_the_limit_and_top_k_stages(spark, catalog, lakehouse_cfg, events):
    from pando_iceberg.procedures import ProcedureContext, call

    ctx = ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
    stages = {}
    for q in (f"SELECT k FROM {T} WHERE k >= 300 LIMIT 50", f"SELECT k FROM {T} ORDER BY k DESC LIMIT 10",
              f"SELECT k FROM {T} WHERE k >= 300"):
        r = call(ctx, f'CALL pando.system.explain_scan(query => "{q}")')
        stages[q] = {row[1]: row for row in r.rows}
    limit, top_k, plain = stages.values()
    assert limit["limit"][5] == "LIMIT 50: 5 fully matching files (0 proven by the trees alone); 4 files removed"
    assert limit["limit"][2] == 5 and limit["pando (∩ trees)"][2] == 1
    assert top_k["top-k"][5] == ("LIMIT 10 ORDER BY k DESC NULLS LAST: 8 fully matching files (0 proven by the "
                                 "trees alone); top-k boundary 700; 7 files removed")
    assert top_k["pando (∩ trees)"][2] == 1
    assert "limit" not in plain and "top-k" not in plain and plain["pando (∩ trees)"][2] == 5
