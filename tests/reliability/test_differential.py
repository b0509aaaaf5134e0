"""Randomized differential suite (issue 7 §1): pruned result == full-scan result, end to end.

Per random case (seed): a random fact table (NULL, NaN, ±0.0, ±inf, empty and unicode strings,
dates, timestamps with and without zone, decimals, skew, duplicates) with a random dimension
table (primary key ``dk``), a random workload (filters, IN lists, LIKE, BETWEEN, OR groups,
IS NULL, column-vs-column, expressions, joins to the dimension), random layout parameters
(k 1..4, small b, sample fraction) and, sometimes, rows appended or deleted after the layout.

Layer (a), once per case: the REAL layout engine (parse_workload → candidate and join-induced
cuts → build_layout on a sample → route the full table → finalize) and REAL Iceberg files:
one Parquet file per block in one pyiceberg commit, the Puffin sidecar and the pointer
properties — the same storage the Spark rewrite produces. Layer (b), many queries per case:
``plan_scan`` + ``read_arrow`` (Iceberg's pruning via to_pyiceberg, then every Pando tree)
against a full scan of every live file with the same row semantics; the row ids must be the
same multiset. The Spark subset (``test_spark_differential``) lays out random tables with
the Spark rewrite itself and compares ``pruned_table`` / ``run_sql`` with plain Spark SQL,
joins included.

Profiles (``PANDO_DIFF_PROFILE``): ``fast`` (default, CI: 16 cases × 30 queries + Spark 1 × 12)
and ``long`` (120 cases × 90 queries = 10,800 pyiceberg query cases + Spark 4 × 25):

    PANDO_DIFF_PROFILE=long .venv/bin/python -m pytest -q tests/reliability/test_differential.py

A failure names the seed; replay one case with ``PANDO_DIFF_SEED=<seed>`` (runs only that case,
with the profile's query count). ``PANDO_DIFF_BASE`` shifts every seed (default 0).
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from diffgen import extra_rows, queries, random_case, workload_sql

PROFILES = {  # (cases, queries per case, spark cases, queries per spark case)
    "fast": (16, 30, 1, 12),
    "long": (120, 90, 4, 25),
}
PROFILE = os.environ.get("PANDO_DIFF_PROFILE", "fast")
if PROFILE not in PROFILES:
    raise ValueError(f"PANDO_DIFF_PROFILE={PROFILE!r}: accepted values are {', '.join(PROFILES)}")
CASES, QUERIES, SPARK_CASES, SPARK_QUERIES = PROFILES[PROFILE]
BASE = int(os.environ.get("PANDO_DIFF_BASE", "0"))
ONLY = os.environ.get("PANDO_DIFF_SEED")
SEEDS = [int(ONLY)] if ONLY else [BASE + 1000 + i for i in range(CASES)]
SPARK_SEEDS = [int(ONLY)] if ONLY else [BASE + 5000 + i for i in range(SPARK_CASES)]
NS = "diffsuite"

STATS: Counter = Counter()  # summed over the run; printed by the last test


def _replay(seed: int) -> str:
    return (f"replay: PANDO_DIFF_PROFILE={PROFILE} PANDO_DIFF_SEED={seed} .venv/bin/python -m pytest -q "
            f"tests/reliability/test_differential.py")


# ---------------------------------------------------------------- layer (a): layout + files

def fresh_tables(catalog, case, ns, fact_name, dim_name):
    """Empty fact table and the loaded dimension (primary key dk) of ``case``, made anew."""
    catalog.create_namespace_if_not_exists(ns)
    for name in (fact_name, dim_name):
        if catalog.table_exists(name):
            catalog.purge_table(name)
    dim = catalog.create_table(dim_name, schema=case.dim.schema)
    with dim.update_schema() as u:
        u.set_identifier_fields("dk")
    dim.append(case.dim)
    return dim, catalog.create_table(fact_name, schema=case.fact.schema)


def lay_out(catalog, case):
    """Create the case's dimension and fact tables and lay the fact table out with the real
    layout engine; returns (fact table, fact name, dim name, layout or None)."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from pando_iceberg.layout import build_layout
    from pando_iceberg.storage import LayoutPointer, LayoutSidecar
    from pando_iceberg.storage.sidecar import DataFileRef, new_layout_id
    from pando_iceberg.workload import parse_workload
    from pando_iceberg.workload.model import ArrowKeyProvider

    fact_name, dim_name = f"{NS}.f{case.seed}", f"{NS}.d{case.seed}"
    dim, fact = fresh_tables(catalog, case, NS, fact_name, dim_name)

    schemas = {fact_name: fact.schema().as_arrow(), dim_name: dim.schema().as_arrow()}
    wl = parse_workload(workload_sql(case, fact_name, dim_name), schemas, primary_keys={dim_name: ["dk"]})
    wq = [(q.filters[fact_name], q.weight) for q in wl.queries if fact_name in q.filters]
    cuts = list(wl.candidate_cuts(fact_name))
    cuts += list(wl.join_induced_cuts(fact_name, ArrowKeyProvider({fact_name: case.fact, dim_name: case.dim})))
    rng = np.random.default_rng(case.seed + 1)
    layout = None
    if cuts and wq:
        take = np.sort(rng.choice(case.n, max(1, int(case.n * case.sample_fraction)), replace=False))
        sample = case.fact.take(pa.array(take))
        layout = build_layout(sample, cuts, wq, case.k, max(1.0, case.min_block_rows * case.sample_fraction))
        blocks, observed = layout.route_observed(case.fact)
        layout.finalize(observed)
    else:
        blocks = np.zeros(case.n, dtype=np.int32)

    block_files: dict[int, list] = {}
    counter = itertools.count()
    with fact.transaction() as tx:
        with tx.update_snapshot().fast_append() as fa:
            for b in np.unique(blocks):
                part = case.fact.filter(pa.array(blocks == b))
                for df in _dataframe_to_data_files(tx.table_metadata, part, fact.io, write_uuid=fa.commit_uuid,
                                                   counter=counter):
                    fa.append_data_file(df)
                    block_files.setdefault(int(b), []).append(
                        DataFileRef(df.file_path, int(df.record_count), int(df.file_size_in_bytes)))
    fact = catalog.load_table(fact_name)
    if layout is not None:
        snap = fact.current_snapshot().snapshot_id
        layout_id = new_layout_id()
        sidecar = LayoutSidecar.from_layout(layout, layout_id=layout_id, table_uuid=fact.metadata.table_uuid,
                                            block_files=block_files, base_snapshot_id=snap)
        sidecar.write(fact.io, fact.location())
        with fact.transaction() as tx:
            tx.set_properties(LayoutPointer(layout_id, sidecar.file_name, snap, snap).to_properties())
    if "append" in case.mutations:
        fact.append(extra_rows(case, rng, case.n, int(rng.integers(1, 50))))
    if "delete" in case.mutations:  # copy-on-write: laid-out files replaced by files outside the layout
        from pyiceberg.expressions import LessThan

        fact.delete(LessThan("rid", int(case.n * 0.1)))
    return catalog.load_table(fact_name), fact_name, dim_name, layout


def full_scan(table, tf) -> np.ndarray:
    """Row ids of the rows matching ``tf`` among ALL live files (read_arrow's row semantics)."""
    from pando_iceberg.planner import read_arrow
    from pando_iceberg.planner.scan import ScanPlan

    tasks = list(table.scan().plan_files())
    return np.sort(read_arrow(table, ScanPlan(tasks, None, tf, None), columns=("rid",)).column(0).to_numpy())


# ---------------------------------------------------------------- layer (b): many queries

@pytest.mark.parametrize("seed", SEEDS)
def test_pyiceberg_differential(catalog, seed):
    from pando_iceberg.planner import plan_scan, read_arrow

    t0 = time.perf_counter()
    case = random_case(seed)
    table, fact_name, dim_name, layout = lay_out(catalog, case)
    qs = queries(case, np.random.default_rng(seed + 2), QUERIES, dim_name)
    failures = []
    for q in qs:
        try:
            plan = plan_scan(table, q)
            got = np.sort(read_arrow(table, plan, columns=("rid",)).column(0).to_numpy())
            want = full_scan(table, plan.filter)
        except Exception as e:  # a generated query must plan and read; an error is a finding too
            failures.append(f"{q}\n    raised {type(e).__name__}: {e}")
            continue
        ex = plan.explain
        STATS["queries"] += 1
        STATS["rows_matched"] += len(want)
        if layout is not None and ex.fallback_reason is None:
            STATS["used_layout"] += 1
            STATS["pando_pruned_more"] += ex.pando_files < ex.iceberg_files
            STATS["files_iceberg"] += ex.iceberg_files
            STATS["files_pando"] += ex.pando_files
        if not np.array_equal(got, want):
            missing = np.setdiff1d(want, got)[:10].tolist()
            failures.append(f"{q}\n    pruned {len(got)} rows, full scan {len(want)}; missing rids {missing}; "
                            f"files read {ex.pando_files}/{ex.total_files}, fallback {ex.fallback_reason!r}")
    STATS["cases"] += 1
    STATS["wrong"] += len(failures)
    STATS["seconds"] += time.perf_counter() - t0
    if layout is not None and not case.mutations:
        assert plan_scan(table, None).explain.fallback_reason is None, case.describe()
    assert not failures, (f"{len(failures)} of {len(qs)} queries differ; {case.describe()}\n{_replay(seed)}\n"
                          + "\n".join(failures[:8]))


def test_the_suite_is_not_vacuous():
    """The cases above must have exercised the layout: most queries planned with it, and Pando
    skipped files beyond Iceberg's own pruning in a fair share of them."""
    if not STATS["queries"] or ONLY:
        pytest.skip("needs the whole profile's test_pyiceberg_differential cases in the same run")
    print(f"\ndifferential ({PROFILE}): {dict(STATS)}")
    assert STATS["wrong"] == 0
    assert STATS["used_layout"] >= 0.5 * STATS["queries"], dict(STATS)
    assert STATS["pando_pruned_more"] >= 0.1 * STATS["used_layout"], dict(STATS)


# ---------------------------------------------------------------- the Spark subset

def _norm(rows) -> list:
    """Sortable rows, NaN == NaN (Spark's own equality), -0.0 as 0.0 kept apart by sign."""
    def v(x):
        if isinstance(x, float) and math.isnan(x):
            return ("nan",)
        return (type(x).__name__, repr(x)) if x is not None else ("null",)
    return sorted(tuple(v(x) for x in r) for r in rows)


def _spark_queries(case, rng, count, fact_name, dim_name):
    """(kind, text): 'filter' = a single-table filter for pruned_table, 'sql' = a query with a
    join to the dimension (inner join, semi-join, OR across the join) for run_sql."""
    from diffgen import PredicateGen

    gen = PredicateGen(case, rng)
    out = []
    for i in range(count):
        shape = i % 4
        if shape == 0:
            out.append(("filter", gen.predicate(2, dim_name)))
        elif shape == 1:
            out.append(("sql", f"SELECT f.rid, d.cat FROM {fact_name} f JOIN {dim_name} d ON f.fk = d.dk "
                               f"WHERE ({gen.predicate(1)}) AND {gen.dim_atom()}"))
        elif shape == 2:
            out.append(("sql", f"SELECT * FROM {fact_name} WHERE ({gen.predicate(1)}) OR "
                               f"fk IN (SELECT dk FROM {dim_name} WHERE {gen.dim_atom()})"))
        else:
            out.append(("sql", f"SELECT count(*), count(DISTINCT fk) FROM {fact_name} WHERE {gen.predicate(2)}"))
    return out


@pytest.mark.spark
@pytest.mark.parametrize("seed", SPARK_SEEDS)
def test_spark_differential(spark, catalog, lakehouse_cfg, seed):
    """One real Spark rewrite per random table, then many queries: pruned Spark == plain Spark."""
    from pando_iceberg.spark.pruned import pruned_table, run_sql
    from pando_iceberg.spark.rewrite import PandoRewriteError, RewriteOptions, rewrite_table

    t0 = time.perf_counter()
    case = random_case(seed, max_rows=3000)
    ns = f"{NS}_spark{seed}"  # a namespace of its own: Spark planning reads every schema in it
    fact_name, dim_name = f"{ns}.sf{seed}", f"{ns}.sd{seed}"
    dim, fact = fresh_tables(catalog, case, ns, fact_name, dim_name)
    for lo in range(0, case.n, case.n // 3 + 1):  # a few files, as loaded
        fact.append(case.fact.slice(lo, case.n // 3 + 1))
    opts = RewriteOptions(k=case.k, sample_rate=case.sample_fraction, min_sample_rows=1,
                          min_block_rows=case.min_block_rows, seed=seed)
    try:
        result = rewrite_table(spark, fact_name, workload_sql(case, fact_name, dim_name), opts,
                               io_properties=lakehouse_cfg.pyiceberg_properties())
        laid_out = result.block_count
    except PandoRewriteError as e:  # e.g. no modelable predicate: then the queries run without a layout
        laid_out = f"no layout: {e}"
    t_rewrite = time.perf_counter() - t0
    failures = []
    for kind, text in _spark_queries(case, np.random.default_rng(seed + 3), SPARK_QUERIES, fact_name, dim_name):
        sql = f"SELECT * FROM {fact_name} WHERE {text}" if kind == "filter" else text
        try:
            want = _norm(spark.sql(sql).collect())
            if kind == "filter":
                with pruned_table(spark, catalog, fact_name, text) as (df, plan):
                    got = _norm(df.collect())
                used = plan.explain.used_layout
            else:
                res = run_sql(spark, catalog, sql)
                got = _norm(res.rows)
                used = all(e.used_layout for e in res.explains.values() if e.table.endswith(f"sf{seed}"))
        except Exception as e:
            failures.append(f"{sql}\n    raised {type(e).__name__}: {str(e)[:300]}")
            continue
        STATS["spark_queries"] += 1
        STATS["spark_used_layout"] += bool(used)
        if got != want:
            failures.append(f"{sql}\n    pruned {len(got)} rows, Spark {len(want)}")
    STATS["spark_wrong"] += len(failures)
    print(f"\nspark case {seed}: layout {laid_out}, rewrite {t_rewrite:.1f} s, queries "
          f"{time.perf_counter() - t0 - t_rewrite:.1f} s")
    assert not failures, (f"{len(failures)} Spark queries differ; layout: {laid_out}; {case.describe()}\n"
                          f"{_replay(seed)}\n" + "\n".join(failures[:8]))
