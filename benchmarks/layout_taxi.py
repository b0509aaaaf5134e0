"""Pando on the taxi table: files read per held-out query, per number of trees, and which one
``k-selection 'validate'`` keeps (pure Python, no Spark).

    .venv/bin/python benchmarks/layout_taxi.py [--sf 1] [--k 1,2,3] [--seeds 1,2,3] [--b 100000]

Per sample seed, as ``rewrite_data_files(strategy => 'pando')`` learns (spark/rewrite.py
``learn_layout``): a 1 % sample of the generated taxi table (``bench/datasets.py``), the train
half of the bench's taxi workload (``bench/workloads.py``, 8 queries per template, seed 0) with
16 synthetic draws per template and as many validation draws, one layout per k, its in-block
order (``workload/in_block.py``). Then the whole table is routed, every block cut into files of
about b rows along that order (what ``spark/blocks.py`` writes), and each held-out query reads
the files whose zone maps (min/max of every column) may match — the trees' choice is implied:
a file of a block the trees skip holds no matching row, and every file holding a matching row
is asserted read. Reported per k: files and rows read per held-out query, the lower bound
(⌈matching rows / rows per file⌉), the validation draws' rows read on the sample (what
``select_layout`` compares), and the kept k; the sort on pickup_time at the same file count.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from layout_tpch import block_files, zone_map_may_match, zone_maps  # noqa: E402

from pando_iceberg.bench.datasets import TAXI_SCHEMA, generate_taxi, taxi_rows  # noqa: E402
from pando_iceberg.bench.workloads import taxi_split  # noqa: E402
from pando_iceberg.layout import ObservedKTuples, build_layout  # noqa: E402
from pando_iceberg.workload import parse_workload  # noqa: E402
from pando_iceberg.workload.in_block import choose_in_block_order, select_layout  # noqa: E402
from pando_iceberg.workload.templates import expected_workload  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--k", default="1,2,3", help="numbers of trees learned (validate keeps one of them)")
    ap.add_argument("--seeds", default="1,2,3", help="sample (and synthetic draw) seeds, one run each")
    ap.add_argument("--b", type=int, default=100_000)
    ap.add_argument("--draws", type=int, default=16)
    ap.add_argument("--per-template", type=int, default=8)
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.k.split(",") if x]
    n = taxi_rows(args.sf)
    table = generate_taxi(n, 0)
    train_sql, test_sql = taxi_split(args.per_template, 0)
    schemas = {"trips": TAXI_SCHEMA}
    wl = parse_workload([s for _, s in train_sql], schemas)
    train = [(q.filters["trips"], q.weight) for q in wl.queries if "trips" in q.filters]
    test = [(t, parse_workload([s], schemas).queries[0].filters["trips"]) for t, s in test_sql]
    masks = [np.asarray(f.evaluate(table), dtype=bool) for _, f in test]
    matching = np.array([int(m.sum()) for m in masks])
    columns = [c for c in TAXI_SCHEMA.names if c != "trip_id"]
    zcache: dict = {}
    by_time = pc.sort_indices(table, sort_keys=[("pickup_time", "ascending")]).to_numpy()

    def read(file_of: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        files = int(file_of.max()) + 1
        rows = np.bincount(file_of, minlength=files)
        zms = zone_maps(table, file_of, files, columns)
        files_read, rows_read = [], []
        for (_, f), m in zip(test, masks):
            hit = np.array([zone_map_may_match(f, zm, table.schema, zcache) for zm in zms])
            if not hit[np.unique(file_of[m])].all():
                raise AssertionError(f"a file holding a matching row was skipped: {f.to_sql()[:200]}")
            files_read.append(int(hit.sum()))
            rows_read.append(float(rows[hit].sum()) / n)
        return files, np.array(files_read), np.array(rows_read)

    print("| seed | k | files | files read | rows read | lower bound | sort files read | validation rows (sample) | kept |")
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in [int(x) for x in args.seeds.split(",") if x]:
        rng = np.random.default_rng(seed)
        sample = table.take(pa.array(np.sort(rng.choice(n, size=n // 100, replace=False))))
        b_sample = args.b * sample.num_rows / n
        expected = expected_workload(train, sample, args.draws, seed, validation_draws=args.draws)
        cuts = expected.candidate_cuts()
        learned, rows = [], []
        for k in ks:  # learned and compared before routing the table, as learn_layout does
            layout = build_layout(sample, cuts, expected.queries, k, b_sample)
            learned.append((layout, choose_in_block_order(layout, sample, expected.queries, b_sample).column))
        choice = select_layout(learned, sample, expected.validation, b_sample)
        for k, (layout, order) in zip(ks, learned):
            t0 = time.perf_counter()
            row_block = np.empty(n, dtype=np.int32)
            parts = []
            for s in range(0, n, 1_000_000):
                batch = table.slice(s, 1_000_000)
                blocks, observed = layout.route_observed(batch)
                parts.append(observed)
                row_block[s:s + batch.num_rows] = blocks
            layout.finalize(ObservedKTuples.combine(parts))
            files, files_read, rows_read = read(block_files(table, row_block, layout.num_blocks, args.b, order))
            sort_of = np.empty(n, dtype=np.int64)
            sort_of[by_time] = np.arange(n) * files // n
            _, sort_read, _ = read(sort_of)
            lb = np.ceil(matching / (n / files))
            rows.append([seed, k, files, files_read.mean(), rows_read.mean(), lb.mean(), sort_read.mean()])
            log(f"seed {seed} k={k}: {layout.num_blocks} blocks, {files} files, in-block order {order}; "
                f"files read {files_read.mean():.1f} (sort {sort_read.mean():.1f}, bound {lb.mean():.2f}), "
                f"{time.perf_counter() - t0:.0f} s")
        for i, r in enumerate(rows):
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.3f} | {r[5]:.2f} | {r[6]:.1f} | "
                  f"{choice.costs[i]:.3f} | {'yes' if i == choice.index else ''} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
