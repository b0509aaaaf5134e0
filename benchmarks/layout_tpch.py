"""Pando on TPC-H lineitem: blocks read per held-out query (pure Python, no Spark).

    .venv/bin/python benchmarks/layout_tpch.py [--sf 1] [--k 1,2,3,4] [--per-template 8] [--seed 0]
                                               [--b 100000] [--sample-rate 0.01] [--out /tmp/pando-bench]

The paper's §8.2 protocol on lineitem:
- data: TPC-H generated with tpchgen-cli (cached under ``--cache``), loaded as Arrow;
- workload: the 22 templates × ``--per-template`` parameter draws, split 50/50 per template
  (seeded) into a train half (the optimizer's workload) and a test half (what we measure);
- candidate cuts: the train half's lineitem predicates plus join-induced literal cuts (FK→PK,
  multi-hop, key sets computed on the dimension tables with ``arrow_key_provider``);
- optimizer: both phases on a seeded ``--sample-rate`` sample of lineitem, b scaled to it;
- the FULL lineitem is routed (``Layout.observed_ktuples`` + ``finalize``) and each test query's
  lineitem filter is planned with ``Layout.blocks_for`` (the one cost model, cost.py / §5).

Baselines per test query:
- ``sort``: lineitem sorted by l_shipdate, cut into blocks of b rows; a block is read unless its
  zone map (per-column min/max of the columns the single-table filter names) proves that no
  row can match. The proof is the expr model's own interval reasoning: the filter's ``sides``
  on the cut "every named column within the block's [min, max]" (may_true = False ⇒ skip).
  Join filters are not used by zone maps (that would be diPs, a separate technique).
- ``sort≥``: blocks of the sorted table that hold at least one row matching the single-table
  filter: a lower bound on what ANY zone-map reasoning could skip on that sort.
- ``lb``: ⌈matching rows / b⌉ (qd-tree's selectivity bound); matching rows are exact: the
  single-table part by ``TableFilter.evaluate``, join filters by their dimension key sets.

Soundness: for every test query and every k, every block holding a row that matches the
query's lineitem filter (joins included) must be returned; the run fails loudly otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from sqlglot.expressions import Column as _Column

from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.expr import keys as keyset
from pando_iceberg.layout import (
    Layout,
    ObservedKTuples,
    SideMatrix,
    assign_blocks,
    build_trees,
    cut_table,
    evaluate_cuts,
    route_ktuples,
    side_matrix,
    top_down_threshold,
    workload_cost,
)
from pando_iceberg.layout.cost import reach_matrix
from pando_iceberg.workload import arrow_key_provider, parse_workload
from pando_iceberg.workload.in_block import InBlockOrder, choose_in_block_order, files_cost, files_per_block
from pando_iceberg.workload.templates import expected_workload
from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, TPCH_SCHEMAS, tpch_workload

TABLES = ["lineitem", "orders", "customer", "part", "supplier", "nation", "region"]
# Columns no query filters on and no join uses: not loaded (memory at SF 1).
SKIP_COLUMNS = {"l_comment", "o_comment", "c_comment", "c_address", "c_phone", "p_comment", "s_comment",
                "s_address", "s_phone", "n_comment", "r_comment"}
BATCH_ROWS = 1_000_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- data


def tpch_dir(cache: Path, sf: float) -> Path:
    out = cache / f"sf{sf:g}"
    if not all((out / f"{t}.parquet").exists() for t in TABLES):
        out.mkdir(parents=True, exist_ok=True)
        exe = Path(sys.executable).with_name("tpchgen-cli")
        log(f"generating TPC-H SF {sf:g} into {out}")
        subprocess.run([str(exe), "parquet", "-s", f"{sf:g}", f"--output-dir={out}"], check=True)
    return out


def _plain_types(t: pa.Table) -> pa.Table:
    """string_view → string (the expr model and pyarrow kernels want plain strings)."""
    fields = [pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in t.schema]
    return t.cast(pa.schema(fields))


def load_tables(d: Path) -> dict[str, pa.Table]:
    out = {}
    for name in TABLES:
        cols = [f.name for f in pq.read_schema(d / f"{name}.parquet") if f.name not in SKIP_COLUMNS]
        out[name] = _plain_types(pq.read_table(d / f"{name}.parquet", columns=cols))
    return out


# ---------------------------------------------------------------- workload


def split_workload(per_template: int, seed: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """§8.2: half of each template's draws optimize the layout, the other half measure it."""
    by_template: dict[int, list[str]] = defaultdict(list)
    for template, sql in tpch_workload(per_template, seed):
        by_template[template].append(sql)
    rng = random.Random(seed + 1)
    train, test = [], []
    for template in sorted(by_template):
        sqls = by_template[template][:]
        rng.shuffle(sqls)
        half = len(sqls) // 2
        train += [(template, s) for s in sqls[:half]]
        test += [(template, s) for s in sqls[half:]]
    return train, test


def lineitem_queries(pairs: list[tuple[int, str]]) -> list[tuple[int, TableFilter, float]]:
    """(template, lineitem filter, weight) of the statements that read lineitem."""
    out = []
    for template, sql in pairs:
        wl = parse_workload([sql], TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
        for q in wl.queries:
            if "lineitem" in q.filters:
                out.append((template, q.filters["lineitem"], q.weight))
    return out


def matching_mask(f: TableFilter, table: pa.Table, provider) -> np.ndarray:
    """Rows satisfying the filter exactly: the single-table part and every join's key set."""
    mask = np.asarray(f.evaluate(table), dtype=bool)
    for j in f.joins:
        keys = keyset.normalize_keys(provider(j.dim_table, j.dim_pk, j.dim_filter))
        mask &= keyset.member_mask(table.column(j.column), keys)
    return mask


# ---------------------------------------------------------------- baselines


def _literal_sql(v, typ: pa.DataType) -> str:
    if pa.types.is_date(typ):
        return f"DATE '{v.isoformat()}'"
    if pa.types.is_timestamp(typ):
        return f"TIMESTAMP '{v.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(v)


def block_files(table: pa.Table, row_block: np.ndarray, num_blocks: int, b: int, column: str | None) -> np.ndarray:
    """File id of every row: each block's rows sorted by ``column`` (table order if None) and
    cut into ``files_per_block`` runs — what the Spark writer does (spark/blocks.py)."""
    counts = files_per_block(np.bincount(row_block, minlength=num_blocks), b)
    key = (pc.array_sort_indices(table.column(column).combine_chunks(), null_placement="at_end").to_numpy()
           if column else np.arange(table.num_rows))
    rank = np.empty(table.num_rows, dtype=np.int64)
    rank[key] = np.arange(table.num_rows)
    order = np.lexsort((rank, row_block))
    bounds = np.searchsorted(row_block[order], np.arange(num_blocks + 1))
    first = np.concatenate([[0], np.cumsum(counts)])
    file_of = np.empty(table.num_rows, dtype=np.int64)
    for blk in range(num_blocks):
        rows = order[bounds[blk]:bounds[blk + 1]]
        if len(rows):
            file_of[rows] = first[blk] + (np.arange(len(rows)) * int(counts[blk])) // len(rows)
    _, file_of = np.unique(file_of, return_inverse=True)  # dense ids (empty blocks have no file)
    return file_of


def zone_maps(table: pa.Table, file_of: np.ndarray, files: int, columns: list[str]) -> list[dict[str, tuple]]:
    """Per file (rows grouped by ``file_of``): column → (min, max, has_null)."""
    order = np.argsort(file_of, kind="stable")
    bounds = np.searchsorted(file_of[order], np.arange(files + 1))
    out = []
    for i in range(files):
        part = table.take(pa.array(order[bounds[i]:bounds[i + 1]]))
        zm = {}
        for c in columns:
            col = part.column(c)
            mm = pc.min_max(col).as_py()
            zm[c] = (mm["min"], mm["max"], col.null_count > 0)
        out.append(zm)
    return out


def zone_map_may_match(f: TableFilter, zm: dict[str, tuple], schema: pa.Schema, cache: dict) -> bool:
    """May a row of the block satisfy f's single-table part? (expr interval reasoning)."""
    if f.is_true_expr():
        return True
    names = {n.lower() for n in schema.names}
    cols = sorted(c for c in {c.name.lower() for c in f.expr.find_all(_Column)} if c in names)
    parts = []
    for c in cols:
        lo, hi, has_null = zm[c]
        if lo is None:
            parts.append(f"{c} IS NULL")
            continue
        rng = f"{c} BETWEEN {_literal_sql(lo, schema.field(c).type)} AND {_literal_sql(hi, schema.field(c).type)}"
        parts.append(f"({rng} OR {c} IS NULL)" if has_null else rng)
    if not parts:
        return True
    sql = " AND ".join(parts)
    cut = cache.get(sql)
    if cut is None:
        cut = cache[sql] = ExprCut(sql, schema, "lineitem")
    return bool(f.sides(cut).may_true)


# ---------------------------------------------------------------- main


def measure_k(k, sample, cuts, masks, sides, train, b_sample, min_leaf, max_ktuples, trace_memory=True):
    """Both optimizer phases for one k: (layout, stats). Wall time comes from an untraced run
    (tracemalloc slows numpy-heavy code several-fold); peak memory from a second, traced run."""

    def optimize():
        st: dict = {}
        t0 = time.perf_counter()
        trees = build_trees(sample, cuts, train, k, min_leaf, max_ktuples, masks=masks, sides=sides, stats=st)
        t1 = time.perf_counter()
        assign = assign_blocks(trees, sample, train, b_sample)
        layout = Layout.from_assignment(assign)
        return trees, st, assign, layout, t0, t1, time.perf_counter()

    trees, st, assign, layout, t0, t1, t2 = optimize()
    peak = float("nan")
    if trace_memory:
        tracemalloc.start()
        optimize()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    stats = {
        "k": k,
        "min_leaf_rows": min_leaf,
        "topdown_s": t1 - t0,
        "bottomup_s": t2 - t1,
        "optimizer_s": t2 - t0,
        "optimizer_peak_mib": peak / 2**20,
        "splits": st["splits"],
        "leaves": [len(t.leaves()) for t in trees],
        "ktuples": st["ktuples"],
        "topdown_stop": st["stopped_by"],
        "topdown_cost": st["final_cost"],
        "initial_cost": st["initial_cost"],
        "bottomup_cost": assign.cost,
        "blocks": layout.num_blocks,
        "truncated_leaves": [len(t.leaves()) for t in layout.truncated],
    }
    return layout, stats


def diagnose(trees, sample, train, test_filters, b_sample, cuts, train_sides, test_sides) -> dict:
    """Where the layout loses, on the sample (mean fraction of the sample's rows read per query,
    train and held-out): the top-down trees with every sample row its own block (§6.1's
    model), every k-tuple its own block, the bottom-up's blocks, and the bottom-up trained on
    the held-out queries themselves (an oracle: no bottom-up on these trees can do better for
    them by the cost model)."""
    layout_cuts, col = cut_table(trees)
    pos = {c.key: i for i, c in enumerate(cuts)}
    idx = [pos[c.key] for c in layout_cuts]
    tr = SideMatrix(train_sides.may_true[:, idx], train_sides.may_not_true[:, idx])
    te = SideMatrix(test_sides.may_true[:, idx], test_sides.may_not_true[:, idx])
    n = sample.num_rows
    kt = route_ktuples(trees, sample)

    def rows_per_row(sides):
        scan = np.ones((sides.num_queries, n), dtype=bool)
        for t, tree in enumerate(trees):
            scan &= reach_matrix(tree, sides, col)[:, kt[:, t]]
        return float(scan.sum(axis=1).mean() / n)

    def rows_read(layout, sides):
        per_q = workload_cost(layout.truncated, layout.leaf_blocks, layout.block_rows, sides, layout.cut_index,
                              np.ones(sides.num_queries), per_query=True)
        return float(per_q.mean() / n)

    assign = assign_blocks(trees, sample, train, b_sample, sides=tr)
    per_ktuple = Layout(trees, assign.ktuples, np.arange(len(assign.ktuples)), assign.ktuple_rows)
    merged = Layout.from_assignment(assign)
    oracle = Layout.from_assignment(assign_blocks(trees, sample, test_filters, b_sample, sides=te))
    return {
        "topdown": [rows_per_row(tr), rows_per_row(te)],
        "ktuples": [rows_read(per_ktuple, tr), rows_read(per_ktuple, te)],
        "bottomup": [rows_read(merged, tr), rows_read(merged, te)],
        "oracle": [rows_read(oracle, tr), rows_read(oracle, te)],
        "oracle_blocks": oracle.num_blocks,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--k", default="1,2,3,4", help="comma-separated numbers of trees")
    ap.add_argument("--per-template", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--b", type=int, default=100_000, help="minimum block size in rows of the full table")
    ap.add_argument("--file-rows", type=int, default=None,
                    help="rows per data file (default b): blocks of >= b rows written as files of about this size")
    ap.add_argument("--sample-rate", type=float, default=0.01)
    ap.add_argument("--min-leaf", type=int, default=None,
                    help="top-down threshold in sample rows (default: build_layout's rule)")
    ap.add_argument("--max-ktuples", type=int, default=10_000)
    ap.add_argument("--no-in-block", dest="in_block", action="store_false",
                    help="files inside a block in routing order (no in-block order)")
    ap.add_argument("--cross-fit", action="store_true",
                    help="candidate cuts from one set of synthetic draws, the cost model on another")
    ap.add_argument("--draws", type=int, default=16,
                    help="synthetic draws per template (workload/templates.py); 0 = the training literals only")
    ap.add_argument("--selective", type=float, default=0.5,
                    help="a test query is 'selective' when its lower bound is below this fraction of all blocks")
    ap.add_argument("--no-trace-memory", action="store_true", help="skip the traced optimizer run (peak memory)")
    ap.add_argument("--diagnose", action="store_true",
                    help="also report, on the sample, rows read by the top-down trees alone, by k-tuples as "
                         "blocks, and by a bottom-up trained on the held-out queries (see diagnose())")
    ap.add_argument("--cache", default=os.environ.get("PANDO_TPCH_CACHE", "/tmp/pando-tpch"))
    ap.add_argument("--out", default="/tmp/pando-bench")
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.k.split(",") if x]
    t_start = time.perf_counter()

    # --- data ---------------------------------------------------------------------------
    tables = load_tables(tpch_dir(Path(args.cache), args.sf))
    lineitem = tables["lineitem"]
    n = lineitem.num_rows
    log(f"lineitem {n:,} rows; b = {args.b:,} → {math.ceil(n / args.b)} blocks of a b-row layout")
    provider = arrow_key_provider({k: v for k, v in tables.items() if k != "lineitem"})

    # --- workload -----------------------------------------------------------------------
    train_sql, test_sql = split_workload(args.per_template, args.seed)
    t0 = time.perf_counter()
    train_wl = parse_workload([s for _, s in train_sql], TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    train = [(q.filters["lineitem"], q.weight) for q in train_wl.queries if "lineitem" in q.filters]
    test = lineitem_queries(test_sql)
    t_parse = time.perf_counter() - t0
    log(f"workload: {len(train_sql)} train / {len(test_sql)} test statements; {len(train)} train and "
        f"{len(test)} test queries read lineitem ({t_parse:.1f} s)")

    # --- sample, cut masks, side matrix (shared by every k) -----------------------------
    rng = np.random.default_rng(args.seed)
    idx = np.sort(rng.choice(n, size=max(1, int(round(n * args.sample_rate))), replace=False))
    sample = lineitem.take(pa.array(idx))
    b_sample = args.b * len(idx) / n
    file_rows_full = args.file_rows or args.b
    f_sample = file_rows_full * len(idx) / n
    train_pairs = list(train)
    expected = expected_workload(train, sample, args.draws, args.seed,
                                 dimensions={k: v for k, v in tables.items() if k != "lineitem"},
                                 validation_draws=args.draws)
    train = expected.queries  # training + synthetic draws: what the optimizer learns from
    cand = expected.candidate_cuts()
    joins = train_wl.join_induced_cuts("lineitem", provider, filters=[f for f, _ in train])
    if args.cross_fit:  # candidates from these draws, the cost model on independent ones
        other = expected_workload([(f, w) for f, w in train_pairs], sample, args.draws, args.seed + 7919,
                                  dimensions={k: v for k, v in tables.items() if k != "lineitem"})
        train = other.queries
    cuts = cand + joins
    log(f"templates: {len(expected.templates)}, {args.draws} synthetic draws per template with parameters → "
        f"{len(train)} optimizer queries; {len(cand)} candidate + {len(joins)} join-induced cuts")
    t0 = time.perf_counter()
    masks = evaluate_cuts(cuts, sample)
    t_masks = time.perf_counter() - t0
    t0 = time.perf_counter()
    sides = side_matrix([f for f, _ in train], cuts)
    t_sides = time.perf_counter() - t0
    log(f"sample {len(idx):,} rows (b on sample = {b_sample:g}); cut masks {t_masks:.1f} s; "
        f"side matrix {len(train)}×{len(cuts)} {t_sides:.1f} s")

    # --- exact matching rows of the test queries ----------------------------------------
    t0 = time.perf_counter()
    match_masks = [matching_mask(f, lineitem, provider) for _, f, _ in test]
    matching = np.array([int(m.sum()) for m in match_masks])
    lb = np.ceil(matching / args.b).astype(int)
    log(f"exact matching rows of {len(test)} test queries: {time.perf_counter() - t0:.1f} s")

    # --- baseline: sorted by l_shipdate, zone maps, at a given file count ------------------
    filter_cols = sorted({c.name.lower() for _, f, _ in test if not f.is_true_expr()
                          for c in f.expr.find_all(_Column)} & set(lineitem.schema.names))
    order = pc.sort_indices(lineitem, sort_keys=[("l_shipdate", "ascending")]).to_numpy()
    zcache: dict = {}
    sort_cache: dict[int, dict] = {}

    def sort_baseline(files: int) -> dict:
        """l_shipdate sort cut into ``files`` files of equal rows; zone-map reads per test query."""
        if files in sort_cache:
            return sort_cache[files]
        t0 = time.perf_counter()
        file_of = np.empty(n, dtype=np.int64)
        file_of[order] = np.arange(n) * files // n
        zms = zone_maps(lineitem, file_of, files, filter_cols)
        rows_per = np.bincount(file_of, minlength=files)
        read, floor, rows = [], [], []
        for (_, f, _), mm in zip(test, match_masks):
            zread = np.array([zone_map_may_match(f, zm, lineitem.schema, zcache) for zm in zms])
            single = np.asarray(f.evaluate(lineitem), dtype=bool)
            with_match = np.unique(file_of[single])
            if not zread[with_match].all():  # zone maps must be sound too
                raise AssertionError(f"zone-map reasoning skipped a file with a matching row: {f.to_sql()[:300]}")
            read.append(int(zread.sum()))
            rows.append(float(rows_per[zread].sum()) / n)
            floor.append(len(with_match))
        log(f"sort baseline ({files} files, zone maps on {', '.join(filter_cols)}): {time.perf_counter() - t0:.1f} s")
        sort_cache[files] = {"files": files, "read": read, "rows": rows, "floor": floor}
        return sort_cache[files]

    base = sort_baseline(math.ceil(n / args.b))
    sort_read, sort_floor, sort_rows = base["read"], base["floor"], base["rows"]
    n_sort_blocks = base["files"]

    # --- Pando per k --------------------------------------------------------------------
    results: dict[int, dict] = {}
    violations_total = 0
    test_sides = None
    for k in ks:
        min_leaf = args.min_leaf
        if min_leaf is None:
            min_leaf = top_down_threshold(b_sample, k)  # build_layout's rule
        layout, stats = measure_k(k, sample, cuts, masks, sides, train, b_sample, min_leaf, args.max_ktuples,
                                  not args.no_trace_memory)
        t0 = time.perf_counter()
        in_block = (choose_in_block_order(layout, sample, train, f_sample) if args.in_block else InBlockOrder(None))
        stats["in_block"] = in_block.to_json()
        t1 = time.perf_counter()
        stats["validation_rows"] = files_cost(layout, sample, expected.validation, f_sample, in_block.column)
        log(f"k={k}: validation draws read {stats['validation_rows']:.3f} of the sample's rows (files_cost, "
            f"{time.perf_counter() - t1:.1f} s): what select_layout compares across k")
        log(f"k={k}: in-block order {in_block.column} ({time.perf_counter() - t0:.1f} s; workload rows read on the "
            f"sample: {', '.join(f'{c} {v:.3f}' for c, v in in_block.costs.items())})")
        if args.diagnose:
            if test_sides is None:
                test_sides = side_matrix([f for _, f, _ in test], cuts)
            stats["diagnosis"] = diagnose(layout.trees, sample, train, [f for _, f, _ in test], b_sample, cuts,
                                          sides, test_sides)
            log(f"k={k}: diagnosis {stats['diagnosis']}")
        log(f"k={k}: optimizer {stats['optimizer_s']:.1f} s (top-down {stats['topdown_s']:.1f}, bottom-up "
            f"{stats['bottomup_s']:.1f}), peak {stats['optimizer_peak_mib']:.0f} MiB; {stats['splits']} splits, "
            f"{stats['ktuples']} k-tuples → {stats['blocks']} blocks; stop: {stats['topdown_stop']}")
        # Route the full table, batch by batch, then finalize the leaf → block sets.
        t0 = time.perf_counter()
        row_block = np.empty(n, dtype=np.int32)
        parts = []
        for s in range(0, n, BATCH_ROWS):
            batch = lineitem.slice(s, BATCH_ROWS)
            blocks, obs = layout.route_observed(batch)
            parts.append(obs)
            row_block[s:s + batch.num_rows] = blocks
        layout.finalize(ObservedKTuples.combine(parts))
        stats["route_s"] = time.perf_counter() - t0
        stats["full_block_rows"] = [int(x) for x in (layout.block_rows.min(), layout.block_rows.max())]
        # Plan the test queries and check soundness.
        read, rows_read, violations = [], [], 0
        for (template, f, _), mm in zip(test, match_masks):
            blocks, _ = layout.blocks_for(f)
            read.append(len(blocks))
            rows_read.append(float(layout.block_rows[blocks].sum()) / n)
            need = np.unique(row_block[mm])
            missing = np.setdiff1d(need, blocks)
            if len(missing):
                violations += 1
                log(f"  SOUNDNESS VIOLATION k={k} Q{template}: blocks {missing[:10].tolist()} hold matching rows "
                    f"but were not returned; filter {f.to_sql()[:300]}")
        violations_total += violations
        stats["violations"] = violations
        # Files of about b rows per block, cut along the in-block order (workload/in_block.py).
        t0 = time.perf_counter()
        file_of = block_files(lineitem, row_block, layout.num_blocks, file_rows_full, in_block.column)
        files = int(file_of.max()) + 1
        file_rows = np.bincount(file_of, minlength=files)
        file_block = np.zeros(files, dtype=np.int64)
        file_block[file_of] = row_block
        zms = zone_maps(lineitem, file_of, files, filter_cols)
        files_read, file_rows_read = [], []
        for (_, f, _), mm in zip(test, match_masks):
            blocks, _ = layout.blocks_for(f)
            chosen = np.zeros(layout.num_blocks, dtype=bool)
            chosen[blocks] = True
            zread = np.array([bool(chosen[file_block[i]]) and zone_map_may_match(f, zms[i], lineitem.schema, zcache)
                              for i in range(files)])
            need = np.unique(file_of[mm])
            if not zread[need].all():
                violations_total += 1
                log(f"  SOUNDNESS VIOLATION (files) k={k}: {f.to_sql()[:300]}")
            files_read.append(int(zread.sum()))
            file_rows_read.append(float(file_rows[zread].sum()) / n)
        stats["files"] = files
        stats["file_rows"] = [int(file_rows.min()), int(np.median(file_rows)), int(file_rows.max())]
        stats["files_read"] = files_read
        stats["file_rows_read"] = file_rows_read
        srt = sort_baseline(files)
        stats["sort_files_read"], stats["sort_file_rows_read"] = srt["read"], srt["rows"]
        log(f"k={k}: {files} files (rows min/median/max {stats['file_rows']}), {time.perf_counter() - t0:.1f} s; "
            f"mean files read {np.mean(files_read):.2f} (sort at {files} files {np.mean(srt['read']):.2f}), rows read "
            f"{np.mean(file_rows_read):.3f} (sort {np.mean(srt['rows']):.3f})")
        stats["read"] = read
        stats["rows_read"] = rows_read
        results[k] = stats
        log(f"k={k}: routed + finalized in {stats['route_s']:.1f} s; {layout.num_blocks} blocks "
            f"({stats['full_block_rows'][0]:,}..{stats['full_block_rows'][1]:,} rows); "
            f"mean blocks read {np.mean(read):.2f}; soundness violations: {violations}")

    # --- report -------------------------------------------------------------------------
    n_blocks_b = math.ceil(n / args.b)
    selective = lb < args.selective * n_blocks_b
    rows = []
    for i, (template, f, w) in enumerate(test):
        rows.append({
            "template": template, "weight": w, "filter": f.to_sql(), "matching_rows": int(matching[i]),
            "selective": bool(selective[i]), "lb": int(lb[i]), "sort": int(sort_read[i]),
            "sort_floor": int(sort_floor[i]), "sort_rows": sort_rows[i],
            **{f"k{k}": int(results[k]["read"][i]) for k in ks},
            **{f"k{k}_rows": results[k]["rows_read"][i] for k in ks},
            **{f"k{k}_files": results[k]["files_read"][i] for k in ks},
            **{f"k{k}_file_rows": results[k]["file_rows_read"][i] for k in ks},
            **{f"k{k}_sort_files": results[k]["sort_files_read"][i] for k in ks},
            **{f"k{k}_sort_file_rows": results[k]["sort_file_rows_read"][i] for k in ks},
        })
    summary = {}
    for label, sel in (("all", np.ones(len(test), dtype=bool)), ("selective", selective)):
        if not sel.any():
            continue
        s = {"queries": int(sel.sum()), "lb": float(lb[sel].mean()), "sort": float(np.mean(np.array(sort_read)[sel])),
             "sort_floor": float(np.mean(np.array(sort_floor)[sel])),
             "lb_rows": float(np.mean(matching[sel] / n)), "sort_rows": float(np.mean(np.array(sort_rows)[sel]))}
        for k in ks:
            s[f"k{k}"] = float(np.mean(np.array(results[k]["read"])[sel]))
            s[f"k{k}_rows"] = float(np.mean(np.array(results[k]["rows_read"])[sel]))
            for key in ("files_read", "file_rows_read", "sort_files_read", "sort_file_rows_read"):
                s[f"k{k}_{key}"] = float(np.mean(np.array(results[k][key])[sel]))
        summary[label] = s
    report = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "args": vars(args),
        "lineitem_rows": n,
        "sample_rows": len(idx),
        "b_sample": b_sample,
        "cuts": {"candidate": len(cand), "join_induced": len(joins)},
        "train_queries": len(train),
        "test_queries": len(test),
        "timings_s": {"parse": t_parse, "cut_masks": t_masks, "side_matrix": t_sides,
                      "total": time.perf_counter() - t_start},
        "sort_blocks": n_sort_blocks,
        "per_k": {k: {kk: v for kk, v in results[k].items() if kk not in ("read", "rows_read", "files_read", "file_rows_read",
                                                                          "sort_files_read", "sort_file_rows_read")} for k in ks},
        "summary": summary,
        "queries": rows,
        "violations": violations_total,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"layout_tpch_sf{args.sf:g}_b{args.b}" + (f"_f{args.file_rows}" if args.file_rows else "") + ("_xfit" if args.cross_fit else "")
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))
    md = markdown(report, ks)
    (out / f"{stem}.md").write_text(md)
    print(md)
    log(f"wrote {out / stem}.json and .md; total {report['timings_s']['total']:.0f} s")
    if violations_total:
        print(f"FAILED: {violations_total} soundness violations", file=sys.stderr)
        return 1
    print("soundness: 0 violations")
    return 0


def markdown(r: dict, ks: list[int]) -> str:
    lines = [f"# Pando on TPC-H SF {r['args']['sf']:g} lineitem ({r['date']})", "",
             f"{r['lineitem_rows']:,} rows, b = {r['args']['b']:,} rows, sample {r['sample_rows']:,} rows "
             f"({r['args']['sample_rate']:g}), {r['train_queries']} train / {r['test_queries']} test queries on "
             f"lineitem, {r['cuts']['candidate']} candidate + {r['cuts']['join_induced']} join-induced cuts, "
             f"seed {r['args']['seed']}, {r['machine']['cpus']} CPUs.", "",
             "## Optimizer", "",
             "| k | top-down threshold (sample rows) | splits | leaves per tree | k-tuples | blocks | top-down s | "
             "bottom-up s | optimizer s | peak MiB | routing s | stop |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in ks:
        s = r["per_k"][k]
        lines.append(f"| {k} | {s['min_leaf_rows']} | {s['splits']} | {s['leaves']} | {s['ktuples']} | {s['blocks']} "
                     f"| {s['topdown_s']:.1f} | {s['bottomup_s']:.1f} | {s['optimizer_s']:.1f} | "
                     f"{s['optimizer_peak_mib']:.0f} | {s['route_s']:.1f} | {s['topdown_stop']} |")
    t = r["timings_s"]
    lines += ["", f"Shared by every k: side matrix {t['side_matrix']:.1f} s, cut masks on the sample "
              f"{t['cut_masks']:.1f} s, parse {t['parse']:.1f} s. Total run {t['total']:.0f} s, "
              f"max RSS {r['max_rss_mib']:.0f} MiB.", "",
              "## Mean blocks read per test query", "",
              "| queries | n | lower bound | sort l_shipdate (zone maps) | sort ≥ (blocks with a match) | "
              + " | ".join(f"k={k}" for k in ks) + " |",
              "|---|---|---|---|---|" + "---|" * len(ks)]
    for label, s in r["summary"].items():
        lines.append(f"| {label} | {s['queries']} | {s['lb']:.2f} | {s['sort']:.2f} | {s['sort_floor']:.2f} | "
                     + " | ".join(f"{s[f'k{k}']:.2f}" for k in ks) + " |")
    lines += ["", "## Mean fraction of lineitem rows read per test query", "",
              "(Pando's blocks hold b..2b rows, the sorted layout's exactly b: rows read compares layouts whose "
              "block counts differ; the bound is the matching rows themselves.)", "",
              "| queries | n | matching rows | sort l_shipdate (zone maps) | " + " | ".join(f"k={k}" for k in ks) + " |",
              "|---|---|---|---|" + "---|" * len(ks)]
    for label, s in r["summary"].items():
        lines.append(f"| {label} | {s['queries']} | {s['lb_rows']:.3f} | {s['sort_rows']:.3f} | "
                     + " | ".join(f"{s[f'k{k}_rows']:.3f}" for k in ks) + " |")
    lines += ["", "## At equal file counts: files of about b rows (Pando: per block, cut along the in-block order; "
              "sort: the same number of files)", "",
              "| queries | k | files | in-block order | Pando files read | sort files read | Pando rows read | "
              "sort rows read | matching rows |", "|---|---|---|---|---|---|---|---|---|"]
    for label, s in r["summary"].items():
        for k in ks:
            pk = r["per_k"][k]
            lines.append(f"| {label} | {k} | {pk['files']} | {pk['in_block']['column']} | {s[f'k{k}_files_read']:.2f} | "
                         f"{s[f'k{k}_sort_files_read']:.2f} | {s[f'k{k}_file_rows_read']:.3f} | "
                         f"{s[f'k{k}_sort_file_rows_read']:.3f} | {s['lb_rows']:.3f} |")
    if all("diagnosis" in r["per_k"][k] for k in ks):
        lines += ["", "## Diagnosis: mean fraction of the sample's rows read (train / held-out queries)", "",
                  "| k | top-down, every row its own block | k-tuples as blocks | bottom-up blocks | "
                  "bottom-up trained on the held-out queries (oracle) |", "|---|---|---|---|---|"]
        for k in ks:
            d = r["per_k"][k]["diagnosis"]
            lines.append(f"| {k} | " + " | ".join(f"{d[x][0]:.3f} / {d[x][1]:.3f}"
                                                 for x in ("topdown", "ktuples", "bottomup", "oracle"))
                         + f" ({d['oracle_blocks']} blocks) |")
    lines += ["", "## Per test query", "",
              "| template | matching rows | selective | lb | sort | sort ≥ | " + " | ".join(f"k={k}" for k in ks) + " |",
              "|---|---|---|---|---|---|" + "---|" * len(ks)]
    for q in sorted(r["queries"], key=lambda q: q["template"]):
        lines.append(f"| Q{q['template']} | {q['matching_rows']:,} | {'yes' if q['selective'] else ''} | {q['lb']} | "
                     f"{q['sort']} | {q['sort_floor']} | " + " | ".join(str(q[f'k{k}']) for k in ks) + " |")
    lines += ["", f"Soundness violations: {r['violations']}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
