"""Layout-engine simulator: wall time and peak memory of the two optimization phases.

    .venv/bin/python benchmarks/layout_sim.py [--rows 60000] [--cuts 300] [--queries 88] [--k 3]
                                              [--bu-rows 200000] [--leaves 100]

1. top-down (§6.1) on a lineitem-like table (TPC-H SF1 1% sample ≈ 60,000 rows), ~300
   threshold cuts, 88 range queries, k = 3, then bottom-up + I/O cost per k (1..k);
2. bottom-up (§6.2) alone on a synthetic table whose two trees give ~10,000 distinct
   k-tuples (two independent columns, 100 leaves per tree).

Peak memory is tracemalloc's peak for the phase (numpy allocations are traced) plus the
process's max RSS at the end. Cuts and filters are small self-contained threshold/interval
classes (the real model is pando_iceberg.expr; its cost is in its own sides()).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pando_iceberg.layout import Layout, PartitionTree, assign_blocks, build_trees, lower_bound


@dataclass(frozen=True)
class Lt:
    col: str
    v: float

    @property
    def key(self) -> str:
        return f"{self.col} < {self.v}"

    def evaluate(self, table) -> np.ndarray:
        return table.column(self.col).to_numpy() < self.v

    def to_json(self) -> dict:
        return {"col": self.col, "v": self.v}


@dataclass(frozen=True)
class Ranges:
    cons: tuple  # ((col, lo, hi_exclusive), ...)

    def sides(self, cut: Lt) -> tuple[bool, bool]:
        for c, lo, hi in self.cons:
            if c == cut.col:
                return lo < cut.v, hi > cut.v
        return True, True

    def matches(self, table) -> np.ndarray:
        m = np.ones(table.num_rows, dtype=bool)
        for c, lo, hi in self.cons:
            x = table.column(c).to_numpy()
            m &= (x >= lo) & (x < hi)
        return m


def lineitem_like(n: int, rng: np.random.Generator) -> pa.Table:
    ship = rng.integers(0, 2526, n)  # days since 1992-01-01
    return pa.table({
        "l_shipdate": ship,
        "l_commitdate": ship + rng.integers(-60, 60, n),
        "l_receiptdate": ship + rng.integers(1, 31, n),
        "l_quantity": rng.integers(1, 51, n),
        "l_discount": rng.integers(0, 11, n),
        "l_extendedprice": rng.uniform(900, 105000, n).round(),
        "l_orderkey_bucket": rng.integers(0, 1000, n),
    })


def workload(rng: np.random.Generator, num: int) -> tuple[list[Ranges], list[Lt]]:
    """TPC-H-flavoured ranges: a date window, often with quantity/discount/price ranges."""
    spans = {"l_shipdate": (0, 2526, (30, 365)), "l_commitdate": (0, 2526, (30, 365)),
             "l_receiptdate": (0, 2556, (30, 365)), "l_quantity": (1, 51, (1, 25)),
             "l_discount": (0, 11, (1, 3)), "l_extendedprice": (900, 105000, (5000, 40000)),
             "l_orderkey_bucket": (0, 1000, (10, 100))}
    cols = list(spans)
    qs: list[Ranges] = []
    cuts: dict[str, Lt] = {}
    for _ in range(num):
        chosen = [cols[i] for i in rng.choice(len(cols), int(rng.integers(1, 4)), replace=False)]
        cons = []
        for c in chosen:
            lo_all, hi_all, (wmin, wmax) = spans[c]
            w = int(rng.integers(wmin, wmax + 1))
            lo = int(rng.integers(lo_all, max(lo_all + 1, hi_all - w)))
            cons.append((c, lo, lo + w))
            for v in (lo, lo + w):
                cuts.setdefault(f"{c}<{v}", Lt(c, v))
        qs.append(Ranges(tuple(cons)))
    return qs, list(cuts.values())


def phase(label: str, fn):
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    print(f"{label:<44} {wall:8.2f} s   peak {peak / 2**20:8.1f} MiB")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--cuts", type=int, default=300)
    ap.add_argument("--queries", type=int, default=88)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--block-rows", type=int, default=1_000, help="b on the sample")
    ap.add_argument("--bu-rows", type=int, default=200_000)
    ap.add_argument("--leaves", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tracemalloc.start()

    # --- 1. top-down at TPC-H SF1 1% scale ----------------------------------------------
    table = lineitem_like(args.rows, rng)
    qs, cuts = workload(rng, args.queries)
    while len(cuts) < args.cuts:  # pad with more workload-like thresholds
        c = ["l_shipdate", "l_quantity", "l_extendedprice"][len(cuts) % 3]
        v = float(np.quantile(table.column(c).to_numpy(), rng.uniform()))
        cuts.append(Lt(c, round(v)))
    cuts = list({c.key: c for c in cuts}.values())[: args.cuts]
    print(f"top-down input: {args.rows} rows, {len(cuts)} cuts, {len(qs)} queries")
    matching = np.array([q.matches(table).sum() for q in qs])
    lb = lower_bound(matching, args.block_rows, np.ones(len(qs)))
    for k in range(1, args.k + 1):
        min_leaf = args.block_rows if k == 1 else max(1, args.block_rows // 4)
        stats: dict = {}
        trees = phase(f"top-down k={k} (min_leaf={min_leaf})",
                      lambda: build_trees(table, cuts, qs, k, min_leaf, max_ktuples=10_000, stats=stats))
        a = phase(f"  bottom-up k={k} ({stats['ktuples']} k-tuples)",
                  lambda: assign_blocks(trees, table, qs, args.block_rows))
        layout = Layout.from_assignment(a)
        blocks = np.array([len(layout.blocks_for(q)[0]) for q in qs])
        frac = layout.cost(qs) / len(qs) / args.rows
        print(f"  k={k}: {stats['splits']} splits, {layout.num_blocks} blocks, scanned fraction {frac:.4f}, "
              f"blocks read {blocks.sum()} (lower bound {lb:.0f}), stop: {stats['stopped_by']}")

    # --- 2. bottom-up with ~10,000 distinct k-tuples ------------------------------------
    n = args.bu_rows
    t2 = pa.table({"u": rng.uniform(0, 1, n), "v": rng.uniform(0, 1, n)})
    trees = []
    for col in ("u", "v"):
        tree = PartitionTree()
        frontier = [(0, 0.0, 1.0, args.leaves)]
        while frontier:  # a balanced tree with `leaves` equal-width leaves
            node, lo, hi, count = frontier.pop()
            if count == 1:
                continue
            left = count // 2
            mid = lo + (hi - lo) * left / count
            tn, fn = tree.split(node, Lt(col, round(mid, 6)))
            frontier += [(tn, lo, mid, left), (fn, mid, hi, count - left)]
        trees.append(tree)
    qs2 = []
    for _ in range(args.queries):
        c = ["u", "v"][rng.integers(2)]
        lo = float(rng.uniform(0, 0.9))
        qs2.append(Ranges(((c, lo, lo + float(rng.uniform(0.01, 0.1))),)))
    b = n // 100
    a = phase(f"bottom-up alone: {n} rows, b={b}", lambda: assign_blocks(trees, t2, qs2, b))
    print(f"  {a.stats['ktuples']} k-tuples -> {a.stats['blocks']} blocks, {a.merges} merges, "
          f"{a.stats['full_recomputes']} full partner searches, min block {a.block_rows.min()} rows")
    layout = phase("  Layout + truncation", lambda: Layout.from_assignment(a))
    phase("  route all rows", lambda: layout.route(t2))
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
