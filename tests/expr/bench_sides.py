"""Benchmark of TableFilter.sides over the layout optimizer's workload (not a test):
TPC-H lineitem, filters of `tpch_workload(4, seed=1)` × candidate + join-induced cuts.

    .venv/bin/tpchgen-cli parquet -s 0.01 --output-dir=/tmp/tpch
    .venv/bin/python tests/expr/bench_sides.py /tmp/tpch
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pando_iceberg.workload import arrow_key_provider, parse_workload
from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, TPCH_SCHEMAS, tpch_workload


def _load(directory: Path) -> dict[str, pa.Table]:
    out = {}
    for path in sorted(directory.glob("*.parquet")):
        t = pq.read_table(path)
        fields = [pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in t.schema]
        out[path.stem] = t.cast(pa.schema(fields))
    return out


def build(directory: Path):
    wl = parse_workload([sql for _, sql in tpch_workload(4, seed=1)], TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    cuts = wl.candidate_cuts("lineitem") + wl.join_induced_cuts("lineitem", arrow_key_provider(_load(directory)))
    filters = [f for q in wl.queries for f in q.table_filters("lineitem")]
    return filters, cuts


def run(filters, cuts):
    return [[tuple(f.sides(c)) for c in cuts] for f in filters]


def main() -> None:
    directory = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tpch")
    profile = "--profile" in sys.argv
    filters, cuts = build(directory)
    print(f"{len(filters)} filters x {len(cuts)} cuts")
    prof = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    first = run(filters, cuts)
    if prof:
        prof.disable()
    t1, c1 = time.perf_counter(), time.process_time()
    second = run(filters, cuts)
    t2, c2 = time.perf_counter(), time.process_time()
    assert first == second
    n_true = sum(s[0] for row in first for s in row)
    n_not = sum(s[1] for row in first for s in row)
    print(f"cold: {t1 - t0:.2f} s (cpu {c1 - c0:.2f} s)   warm: {t2 - t1:.3f} s (cpu {c2 - c1:.3f} s)   "
          f"may_true={n_true} may_not_true={n_not}")
    digest = hash(tuple(tuple(r) for r in first))
    print(f"result digest: {digest}")
    for arg in sys.argv:
        if arg.startswith("--compare="):  # a pickle of run() from another version
            import pickle

            with open(arg.split("=", 1)[1], "rb") as fh:
                assert pickle.load(fh) == first, "results differ from the reference"
            print("identical to the reference")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
