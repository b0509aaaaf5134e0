"""The optimizer of one rewrite without Spark: a synthetic sample, a templated workload with
synthetic and validation draws (``workload/templates.expected_workload``), the candidate cuts of
its filters, then what ``spark/rewrite.learn_layout`` does under k-selection 'validate': for
k = 1..K ``build_layout`` and the in-block order (``choose_in_block_order``), then
``select_layout`` on the validation draws. Prints seconds per phase and a fingerprint of the
result (trees, block rows, k-tuple map, costs, the kept k), so that two versions of the code can
be compared on the same seed.

    .venv/bin/python benchmarks/optimizer_timing.py --rows 60000 --out /tmp/opt.json [--profile]

``--replay DIR/optimizer-inputs.pkl``: instead, ``spark/rewrite.learn_layout`` itself on what a real
rewrite learned from (recorded by ``profile_rewrite.py --optimizer-only``: the sample, the draws, the
candidate cuts with their key sets, the guard's reads of the table now), without Spark: the
optimizer's phases ('trees', 'k-selection') and the learned layout's fingerprint, for two versions
of the code on the same sample in the same run.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import inspect
import io
import json
import pickle
import pstats
import time

import numpy as np
import pyarrow as pa

from pando_iceberg.expr import TableFilter
from pando_iceberg.layout import build_layout
from pando_iceberg.workload import in_block
from pando_iceberg.workload.templates import expected_workload

SCHEMA = pa.schema([
    ("l_orderkey", pa.int64()), ("l_partkey", pa.int64()), ("l_suppkey", pa.int64()),
    ("l_quantity", pa.float64()), ("l_extendedprice", pa.float64()), ("l_discount", pa.float64()),
    ("l_shipdate", pa.date32()), ("l_receiptdate", pa.date32()), ("l_shipmode", pa.string()),
    ("l_returnflag", pa.string()),
])
MODES = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"]


def sample_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ship = rng.integers(8000, 10500, n)
    return pa.table({
        "l_orderkey": rng.integers(1, 6_000_000, n), "l_partkey": rng.integers(1, 200_000, n),
        "l_suppkey": rng.integers(1, 10_000, n), "l_quantity": rng.integers(1, 51, n).astype(np.float64),
        "l_extendedprice": np.round(rng.random(n) * 100_000, 2), "l_discount": rng.integers(0, 11, n) / 100.0,
        "l_shipdate": pa.array(ship, pa.int32()).cast(pa.date32()),
        "l_receiptdate": pa.array(ship + rng.integers(1, 31, n), pa.int32()).cast(pa.date32()),
        "l_shipmode": pa.array(rng.choice(MODES, n)), "l_returnflag": pa.array(rng.choice(["A", "N", "R"], n)),
    }, schema=SCHEMA)


def day(d: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=int(d))).isoformat()


def training(rng: np.random.Generator, per_template: int) -> list[tuple[TableFilter, float]]:
    """Eleven templates of TPC-H-like filters on lineitem, ``per_template`` draws each."""
    def t1():
        a = int(rng.integers(8000, 10300))
        return f"l_shipdate >= DATE '{day(a)}' AND l_shipdate < DATE '{day(a + 90)}'"

    def t2():
        a = int(rng.integers(8000, 10100))
        d = float(rng.integers(2, 9)) / 100
        return (f"l_shipdate >= DATE '{day(a)}' AND l_shipdate < DATE '{day(a + 365)}' "
                f"AND l_discount BETWEEN {d - 0.01:.2f} AND {d + 0.01:.2f} "
                f"AND l_quantity < {int(rng.integers(24, 26))}")

    def t3():
        m = rng.choice(MODES, 2, replace=False)
        a = int(rng.integers(8000, 10100))
        return (f"l_shipmode IN ('{m[0]}', '{m[1]}') AND l_receiptdate >= DATE '{day(a)}' "
                f"AND l_receiptdate < DATE '{day(a + 365)}'")

    def t4():
        return f"l_quantity BETWEEN {int(rng.integers(1, 10))} AND {int(rng.integers(20, 40))}"

    def t5():
        a = int(rng.integers(1, 5_000_000))
        return f"l_orderkey BETWEEN {a} AND {a + 200_000}"

    def t6():
        return f"l_returnflag = 'R' AND l_receiptdate < DATE '{day(int(rng.integers(8500, 10400)))}'"

    def t7():
        a = float(rng.integers(1000, 90_000))
        return f"l_extendedprice > {a} AND l_discount < {float(rng.integers(2, 10)) / 100:.2f}"

    def t8():
        a = int(rng.integers(1, 9000))
        return f"l_suppkey BETWEEN {a} AND {a + 500}"

    def t9():
        a = int(rng.integers(1, 190_000))
        return f"l_partkey BETWEEN {a} AND {a + 4000} AND l_quantity >= {int(rng.integers(1, 30))}"

    def t10():
        m = str(rng.choice(MODES))
        a = int(rng.integers(8000, 10300))
        return f"l_shipmode = '{m}' AND l_shipdate BETWEEN DATE '{day(a)}' AND DATE '{day(a + 30)}'"

    def t11():
        return (f"l_discount = {float(rng.integers(0, 11)) / 100:.2f} "
                f"AND l_extendedprice BETWEEN {float(rng.integers(1000, 50_000))} "
                f"AND {float(rng.integers(50_000, 99_000))}")

    out = []
    for t in (t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11):
        out += [(TableFilter(t(), SCHEMA, table="lineitem"), 1.0) for _ in range(per_template)]
    return out


def fingerprint(layout) -> dict:
    trees = [[(t.node_cut[n].key if t.node_cut[n] is not None else None, int(t.true_child[n]), int(t.not_true_child[n]))
              for n in range(t.num_nodes)] for t in layout.trees]
    blob = json.dumps([trees, layout.ktuples.tolist(), layout.ktuple_block.tolist(), layout.block_rows.tolist()])
    return {"k": layout.k, "nodes": [t.num_nodes for t in layout.trees], "blocks": layout.num_blocks,
            "sha": hashlib.sha256(blob.encode()).hexdigest()[:16]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=60_000)
    p.add_argument("--per-template", type=int, default=6, help="training queries per template")
    p.add_argument("--draws", type=int, default=19, help="synthetic (and validation) draws per template")
    p.add_argument("--max-cuts", type=int, default=420)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--b", type=float, default=1000.0, help="block rows on the sample")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--out", default=None, help="write timings and fingerprints as JSON here")
    p.add_argument("--replay", default=None, help="optimizer-inputs.pkl of profile_rewrite.py --optimizer-only")
    args = p.parse_args()
    if args.replay:
        replay(args.replay, args.profile, args.out)
        return

    sample = sample_table(args.rows, args.seed)
    queries = training(np.random.default_rng(args.seed), args.per_template)
    expected = expected_workload(queries, sample, args.draws, args.seed, validation_draws=args.draws)
    cuts: dict = {}
    for f, _ in expected.queries:
        for c in f.candidate_cuts():
            cuts.setdefault(c.key, c)
    keys = sorted(cuts)
    if len(keys) > args.max_cuts:  # an even spread of the cuts, deterministic
        keys = [keys[int(i)] for i in np.linspace(0, len(keys) - 1, args.max_cuts).round()]
    cut_list = [cuts[key] for key in keys]
    print(f"{sample.num_rows} rows, {len(cut_list)} cuts, {len(queries)} queries + "
          f"{len(expected.queries) - len(queries)} synthetic draws, {len(expected.validation)} validation draws")

    # The optimizer's shared evaluations, where this version of the code has them.
    shared_kw: dict = {}
    from pando_iceberg import layout as layout_pkg
    if hasattr(layout_pkg, "Evaluations"):
        shared_kw = {"evaluations": layout_pkg.Evaluations(sample)}

    def kw(fn) -> dict:
        return {k: v for k, v in shared_kw.items() if k in inspect.signature(fn).parameters}

    prof = cProfile.Profile() if args.profile else None
    timings: dict[str, tuple[float, float]] = {}  # phase → (wall s, CPU s of the process)
    result: dict = {"layouts": []}
    learned = []

    def clock() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def lap(name: str, since: tuple[float, float]) -> tuple[float, float]:
        now = clock()
        timings[name] = (now[0] - since[0], now[1] - since[1])
        return now

    start = clock()
    if prof:
        prof.enable()
    for k in range(1, args.k + 1):
        t0 = clock()
        lay = build_layout(sample, cut_list, expected.queries, k, args.b, **kw(build_layout))
        t1 = lap(f"build_layout k={k}", t0)
        order = in_block.choose_in_block_order(lay, sample, expected.queries, args.b,
                                               **kw(in_block.choose_in_block_order))
        lap(f"in-block order k={k}", t1)
        learned.append((lay, order.column))
        result["layouts"].append({**fingerprint(lay), "order": order.column,
                                  "order_costs": {c: round(v, 12) for c, v in order.costs.items()}})
    t0 = clock()
    choice = in_block.select_layout(learned, sample, expected.validation, args.b, **kw(in_block.select_layout))
    lap("select_layout", t0)
    if prof:
        prof.disable()
    lap("total", start)
    result["kept"] = choice.index + 1
    result["validation_costs"] = [round(c, 12) for c in choice.costs]
    result["timings_s"] = {k: {"wall": round(w, 2), "cpu": round(c, 2)} for k, (w, c) in timings.items()}
    print(f"{'phase':24s} {'wall s':>8s} {'CPU s':>8s}")
    for name, (w, c) in timings.items():
        print(f"{name:24s} {w:8.2f} {c:8.2f}")
    print(json.dumps({k: v for k, v in result.items() if k != "timings_s"}, indent=1))
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(40)
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        print(s.getvalue())
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)


def replay(path: str, profile: bool, out: str | None) -> None:
    """``learn_layout`` on recorded inputs (module docstring): what it asks Spark is answered from
    the recording, in the order it was asked."""
    import contextlib
    from types import SimpleNamespace

    from pando_iceberg.spark import rewrite

    with open(path, "rb") as fh:
        rec = pickle.load(fh)
    for name, answers in rec["answers"].items():
        setattr(rewrite, name, lambda *a, _left=list(answers), **kw: pickle.loads(_left.pop(0)))
    rewrite.jv = SimpleNamespace(read_snapshot=lambda *a, **kw: None, load_table=lambda *a, **kw: None)
    rewrite.peak_rss_mib = lambda spark: {}
    rewrite.static_table = lambda *a, **kw: None
    rewrite.spark_job_progress = lambda *a, **kw: contextlib.nullcontext()
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    cpu = time.process_time()
    learned = rewrite.learn_layout(None, rec["table"], rec["workload"], rewrite.RewriteOptions.from_map(rec["options"]))
    cpu = time.process_time() - cpu
    if prof:
        prof.disable()
    lay = learned.layout
    keys = hashlib.sha256(b"".join(k.encode() + v for k, v in sorted(learned.literal_keys.items()))).hexdigest()[:16]
    result = {**fingerprint(lay), "literal_keys": keys, "in_block": learned.in_block_column,
              "k_selection": learned.k_selection, "sample_rows": learned.sample_rows, "cuts": learned.cuts,
              "block_rows": lay.block_rows.tolist(),
              "optimizing_s": round(learned.seconds_optimizing - learned.seconds_parts.get("draws+cuts", 0.0), 2),
              "parts_s": {k: round(v, 2) for k, v in learned.seconds_parts.items() if k != "draws+cuts"},
              "cpu_s": round(cpu, 2)}
    print(json.dumps(result))
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
        print(s.getvalue())
    if out:
        with open(out, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
