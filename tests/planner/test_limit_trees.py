"""Fully matching blocks proven by a Pando layout's trees (planner/limit.py, ``TreeRegions``):
a block whose leaves' paths imply the filter fully matches even when its min/max bounds are
wide. Random layouts learned on random data and random workloads, written as real Parquet files
by pyiceberg into a SqlCatalog (one data file per block, a sidecar, the pointer, then a file
appended outside the layout); random filters. Every file declared fully matching is read back
and every one of its rows must satisfy the filter (Spark's semantics: NULL is not TRUE)."""

from __future__ import annotations

import datetime as dt
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from _block_files import write_blocks
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan

import pando_iceberg
from pando_iceberg.expr import TableFilter
from pando_iceberg.layout import build_layout
from pando_iceberg.planner.limit import TreeRegions, fully_matching, fully_matching_by
from pando_iceberg.planner.scan import layout_of

ARROW = pa.schema([("id", pa.int64()), ("i", pa.int64()), ("j", pa.int64()), ("x", pa.float64()),
                   ("s", pa.string()), ("d", pa.date32())])
STRINGS = np.array(["a", "ab", "b", "m", "y", "z", "zz"], dtype=object)
DAY0 = dt.date(2024, 1, 1)


@pytest.fixture
def catalog(tmp_path):
    cat = SqlCatalog("limit_trees", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    cat.create_namespace("db")
    return cat


def _rows(rng, start: int, n: int) -> pa.Table:
    x = rng.uniform(-10, 10, n).round(1)
    x[rng.random(n) < 0.04] = np.nan
    s = STRINGS[rng.integers(0, len(STRINGS), n)]
    return pa.table({"id": np.arange(start, start + n),
                     "i": pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.05),
                     "j": pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.03),
                     "x": pa.array(x, mask=rng.random(n) < 0.03),
                     "s": pa.array(list(s), pa.string(), mask=rng.random(n) < 0.05),
                     "d": pa.array([DAY0 + dt.timedelta(days=int(v)) for v in rng.integers(0, 120, n)], pa.date32())},
                    schema=ARROW)


def _atom(rng) -> str:
    c = int(rng.integers(0, 50))
    two = sorted(rng.choice(STRINGS, 2, replace=False).tolist())
    day = DAY0 + dt.timedelta(days=int(rng.integers(0, 120)))
    return str(rng.choice([
        f"i < {c}", f"i >= {c}", f"i BETWEEN {c} AND {c + 12}", f"i IN ({c}, {c + 3}, {c + 7})", "i IS NULL",
        "i < j", "i >= j", f"j <= {c}", f"x > {c / 5 - 5:.1f}", f"x <= {c / 5 - 5:.1f}", "x = double('NaN')",
        f"s IN ('{two[0]}', '{two[1]}')", f"s NOT IN ('{two[0]}', '{two[1]}')", "s LIKE 'a%'", "s LIKE 'z%'",
        "s IS NULL", f"d >= DATE '{day}'", f"d < DATE '{day}'", f"abs(i - j) <= {c % 10}", f"i + j > {c + 20}"]))


def _predicate(rng) -> str:
    parts = [_atom(rng) for _ in range(int(rng.choice([1, 1, 2, 2, 3])))]
    joiner = str(rng.choice([" AND ", " AND ", " OR "]))
    p = joiner.join(f"({x})" for x in parts)
    return f"NOT ({p})" if rng.random() < 0.1 else p


def _laid_out(catalog, name: str, rng, workload: list[str], k: int, extra_rows: int = 60):
    """A table whose data files are the blocks of a layout learned on its data for ``workload``,
    then ``extra_rows`` rows appended outside the layout."""
    data = _rows(rng, 0, int(rng.integers(800, 2000)))
    filters = [TableFilter.from_sql(s, ARROW) for s in workload]
    cuts = list({c.key: c for f in filters for c in f.candidate_cuts()}.values())
    layout = build_layout(data, cuts, filters, k=k, min_block_rows=int(rng.integers(40, 150)))
    layout.finalize(layout.observed_ktuples(data))
    blocks = layout.route(data)
    t = catalog.create_table(f"db.{name}", ARROW)
    write_blocks(t, layout, data, blocks)
    if extra_rows:
        t.append(_rows(rng, len(data), extra_rows))  # outside the layout: bounds only
    return catalog.load_table(f"db.{name}")


def _claims(table, sql: str):
    """(tasks, fully matching by bounds and trees, by bounds alone) of the plan without LIMIT."""
    plan = pando_iceberg.scan(table, sql).plan()
    _, layout, block_of_path = layout_of(table, None)
    regions = TreeRegions.of(layout)
    assert regions is not None
    blocks = [(regions, block_of_path[t.file.file_path]) if t.file.file_path in block_of_path else None
              for t in plan.tasks]
    schema = table.schema()
    claimed, by_trees = fully_matching_by(plan.filter, plan.tasks, schema, blocks)
    by_bounds = fully_matching(plan.filter, plan.tasks, schema)
    assert (fully_matching(plan.filter, plan.tasks, schema, blocks) == claimed).all()
    assert (by_trees == (claimed & ~by_bounds)).all()  # the trees only add, and say which they added
    return plan, claimed, by_bounds


def test_every_block_the_trees_declare_fully_matching_holds_only_matching_rows(catalog):
    rng = np.random.default_rng(4747)
    by_trees = by_bounds = checked = 0
    for case in range(10):
        workload = [_predicate(rng) for _ in range(int(rng.integers(4, 9)))]
        table = _laid_out(catalog, f"t{case}", rng, workload, k=int(rng.integers(1, 4)))
        # the workload's own predicates (what the trees cut on), their conjunctions, and new ones
        filters = workload + [f"({a}) AND ({b})" for a, b in pairwise(workload)] + \
            [_predicate(rng) for _ in range(8)]
        for sql in filters:
            plan, claimed, bounds = _claims(table, sql)
            assert not (bounds & ~claimed).any()  # the trees only add
            rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(
                [t for t, m in zip(plan.tasks, claimed) if m])
            assert plan.filter.evaluate(rows).all(), (case, sql, workload)
            outside = [t for t, m in zip(plan.tasks, claimed & ~bounds) if m and t.file.file_path not in
                       layout_of(table, None)[2]]
            assert not outside  # a file appended after the layout is proven by its bounds or not at all
            by_trees += int((claimed & ~bounds).sum())
            by_bounds += int(bounds.sum())
            checked += len(plan.tasks)
    assert by_trees >= 30, (by_trees, by_bounds, checked)  # not vacuous: the trees proved files bounds could not


def test_limit_scans_with_tree_proofs_return_min_k_matching_rows(catalog):
    rng = np.random.default_rng(91)
    pruned = 0
    for case in range(6):
        workload = [_predicate(rng) for _ in range(6)]
        table = _laid_out(catalog, f"l{case}", rng, workload, k=int(rng.integers(1, 4)))
        for sql in workload[:4] + [_predicate(rng) for _ in range(2)]:
            full = pando_iceberg.scan(table, sql)
            want = full.to_arrow()
            k = int(rng.integers(0, want.num_rows + 20))
            scan = pando_iceberg.scan(table, sql, limit=k)
            got = scan.to_arrow()
            assert got.num_rows == min(k, want.num_rows), (case, sql, k)
            assert set(got.column("id").to_pylist()) <= set(want.column("id").to_pylist()), (case, sql, k)
            ex = scan.explain()
            assert ex.fully_matching_by_trees <= ex.fully_matching_files
            pruned += ex.limit_files_pruned > 0 and ex.fully_matching_by_trees > 0
    assert pruned >= 3  # the trees' proofs let LIMIT remove files


def test_pairs_in_lists_and_likes_the_bounds_cannot_decide(catalog):
    """``i < j`` and ``s IN ('a', 'y')`` hold on whole blocks whose bounds are wide (i and j
    both span 0..49; s spans 'a'..'y', 'ab', 'b' and 'm' between): the tree cuts on them, so
    those blocks fully match, and a LIMIT reads one of them."""
    rng = np.random.default_rng(5)
    workload = ["i < j", "s IN ('a', 'y')", "s LIKE 'z%'"]
    table = _laid_out(catalog, "hand", rng, workload, k=1, extra_rows=0)
    for sql in ["i < j", "s IN ('a', 'y')", "i < j AND s IN ('a', 'y')"]:
        plan, claimed, bounds = _claims(table, sql)
        assert claimed.any() and not bounds.any(), sql
        proven = {t.file.file_path for t, m in zip(plan.tasks, claimed) if m}
        scan = pando_iceberg.scan(table, sql, limit=5)
        planned = scan.plan_files()
        assert len(planned) == 1 and planned[0].file.file_path in proven, sql  # one fully matching block
        assert scan.to_arrow().num_rows == 5 and scan.explain().limit_files_pruned == len(plan.tasks) - 1
        assert scan.explain().fully_matching_by_trees >= 1 and scan.explain().as_dict()["fully_matching_files"] >= 1
        off = pando_iceberg.scan(table, sql, limit=5, use_layout=False)  # no trees: bounds prove nothing
        assert off.explain().limit_files_pruned == 0 and off.to_arrow().num_rows == 5
        assert len(off.plan_files()) > 1
    # a filter the paths do not imply: a block of the TRUE side of i < j may hold i = 3
    _, claimed, _ = _claims(table, "i < j AND i <> 3")
    assert not claimed.any()


def _ordered_tokens(values: list, descending: bool, nulls_first: bool) -> list:
    """``values`` in Spark's order (NULLs where said, NaN above every number, -0.0 = 0.0)."""
    nan = [v for v in values if isinstance(v, float) and v != v]
    rest = sorted((v + 0.0 if isinstance(v, float) else v for v in values if v is not None and v == v),
                  reverse=descending)
    ordered = ["NaN"] * len(nan) + rest if descending else rest + ["NaN"] * len(nan)
    nulls = ["NULL"] * sum(v is None for v in values)
    return nulls + ordered if nulls_first else ordered + nulls


def test_top_k_with_tree_proofs_keeps_the_k_first_values(catalog):
    """``ORDER BY c LIMIT k`` on laid-out tables: blocks the trees prove fully matching give the
    boundary like files whose bounds do; the k first values over the kept files are the full
    scan's."""
    from pando_iceberg.planner import plan_scan
    from pando_iceberg.planner.limit import Ordering

    rng = np.random.default_rng(4748)
    pruned = by_trees = 0
    for case in range(6):
        workload = [_predicate(rng) for _ in range(6)]
        table = _laid_out(catalog, f"o{case}", rng, workload, k=int(rng.integers(1, 4)))
        for sql in workload[:4] + [_predicate(rng), "TRUE"]:
            want_rows = pando_iceberg.scan(table, sql).to_arrow()
            order = Ordering(str(rng.choice(["i", "j", "x", "d", "id"])), bool(rng.integers(0, 2)),
                             bool(rng.integers(0, 2)))
            k = int(rng.choice([1, 3, 10, int(rng.integers(0, want_rows.num_rows + 5))]))
            plan = plan_scan(table, sql, limit=k, order=order)
            kept = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(plan.tasks)
            kept = kept.filter(plan.filter.evaluate(kept)) if kept.num_rows else kept
            want = _ordered_tokens(want_rows.column(order.column).to_pylist(), order.descending, order.nulls_first)
            got = _ordered_tokens(kept.column(order.column).to_pylist(), order.descending, order.nulls_first)
            assert got[:k] == want[:k], (case, sql, order, k, plan.explain.topk_boundary)
            pruned += plan.explain.limit_files_pruned > 0
            by_trees += plan.explain.limit_files_pruned > 0 and plan.explain.fully_matching_by_trees > 0
    assert pruned >= 8 and by_trees >= 1, (pruned, by_trees)
