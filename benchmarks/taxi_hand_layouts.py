"""Hand-made layouts of the taxi table against its held-out queries: how far below Pando's file
count can a layout a person would design get? (What the taxi table's lower bound is worth
as a target: a learned layout should read no more than a careful hand-made one.) Pure
Python, no Spark; the same table, held-out queries and zone-map reading as
``benchmarks/layout_taxi.py``, so its Pando rows compare directly.

    .venv/bin/python benchmarks/taxi_hand_layouts.py [--sf 1] [--files 64]

Each layout cuts the rows into about ``--files`` files of equal rows: nested quantile ranges
(the table sorted by the first column and cut into n₁ ranges, each range sorted by the second
column and cut into n₂, ...), optionally with the generator's three outlier kinds (flat fares
over ~zero distance, stalled meters, huge tips) in files of their own, as a person who knows the
data would lay it out. Reported: files read per held-out query (mean, and per template) and
the lower bound ⌈matching rows / rows per file⌉.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from layout_tpch import zone_map_may_match, zone_maps  # noqa: E402

from pando_iceberg.bench.datasets import TAXI_SCHEMA, generate_taxi, taxi_rows  # noqa: E402
from pando_iceberg.bench.workloads import taxi_split  # noqa: E402
from pando_iceberg.workload import parse_workload  # noqa: E402


def nested_ranges(keys: list[np.ndarray], parts: list[int]) -> np.ndarray:
    """File id per row: rows cut into ``parts[0]`` equal ranges of ``keys[0]``, each of those
    into ``parts[1]`` ranges of ``keys[1]``, and so on."""
    n = len(keys[0])
    groups = [np.arange(n)]
    for key, p in zip(keys, parts):
        groups = [chunk for g in groups for chunk in np.array_split(g[np.argsort(key[g], kind="stable")], p)]
    file_of = np.empty(n, dtype=np.int64)
    for i, g in enumerate(groups):
        file_of[g] = i
    return file_of


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--files", type=int, default=64, help="files per layout (Pando k=3's count in the bench)")
    ap.add_argument("--per-template", type=int, default=8)
    args = ap.parse_args(argv)
    n = taxi_rows(args.sf)
    table = generate_taxi(n, 0)
    _, test_sql = taxi_split(args.per_template, 0)
    schemas = {"trips": TAXI_SCHEMA}
    test = [(t, parse_workload([s], schemas).queries[0].filters["trips"]) for t, s in test_sql]
    masks = [np.asarray(f.evaluate(table), dtype=bool) for _, f in test]
    columns = [c for c in TAXI_SCHEMA.names if c != "trip_id"]
    col = {c: table.column(c).to_numpy() for c in columns}
    time = col["pickup_time"].astype(np.int64)
    dist, fare, dur, tip, zone = col["trip_distance"], col["fare"], col["duration_min"], col["tip"], col["pickup_zone"]
    outlier = np.where((dist < 0.2) & (fare > 40), 0, np.where(dur > 200, 1, np.where(tip > fare * 0.9, 2, -1)))
    normal = np.flatnonzero(outlier < 0)
    zcache: dict = {}

    def read(file_of: np.ndarray) -> tuple[int, float, float, dict[int, float]]:
        files = int(file_of.max()) + 1
        zms = zone_maps(table, file_of, files, columns)
        per: dict[int, list[int]] = {}
        lbs = []
        for (t, f), m in zip(test, masks):
            hit = np.array([zone_map_may_match(f, zm, table.schema, zcache) for zm in zms])
            if not hit[np.unique(file_of[m])].all():
                raise AssertionError(f"a file holding a matching row was skipped: {f.to_sql()[:200]}")
            per.setdefault(t, []).append(int(hit.sum()))
            lbs.append(np.ceil(m.sum() / (n / files)))
        every = [v for vs in per.values() for v in vs]
        return files, float(np.mean(every)), float(np.mean(lbs)), {t: float(np.mean(v)) for t, v in sorted(per.items())}

    def apart(keys: list[np.ndarray], parts: list[int]) -> np.ndarray:
        file_of = np.empty(n, dtype=np.int64)
        inner = nested_ranges([k[normal] for k in keys], parts)
        file_of[normal] = inner
        for kind in (0, 1, 2):
            file_of[outlier == kind] = inner.max() + 1 + kind
        return file_of

    f = args.files
    layouts = [
        ("pickup_time sort", lambda: nested_ranges([time], [f])),
        ("trip_distance sort", lambda: nested_ranges([dist], [f])),
        ("time 8 × distance 8", lambda: nested_ranges([time, dist], [8, f // 8])),
        ("outliers apart + distance", lambda: apart([dist], [f - 3])),
        ("outliers apart + time 4 × distance 15", lambda: apart([time, dist], [4, (f - 3) // 4])),
        ("outliers apart + time 6 × distance 10", lambda: apart([time, dist], [6, (f - 3) // 6])),
        ("outliers apart + time 3 × distance 10 × tip 2", lambda: apart([time, dist, tip], [3, 10, 2])),
        ("outliers apart + time 2 × distance 10 × zone 3", lambda: apart([time, dist, zone], [2, 10, 3])),
    ]
    templates = sorted({t for t, _ in test})
    print(f"taxi SF {args.sf:g}: {n:,} trips, {len(test)} held-out queries; files read per query (mean), "
          "lower bound ⌈matching rows / rows per file⌉, per template T1..T9\n")
    print("| layout | files | files read | lower bound | files / LB | " + " | ".join(f"T{t}" for t in templates) + " |")
    print("|---|---|---|---|---|" + "---|" * len(templates))
    for name, make in layouts:
        files, mean, lb, per = read(make())
        print(f"| {name} | {files} | {mean:.1f} | {lb:.2f} | {mean / lb:.2f} | "
              + " | ".join(f"{per[t]:.1f}" for t in templates) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
