"""Where a Pando rewrite spends its time: a driver-side ``cProfile`` of one ``rewrite_table`` of a
copy of a table, with the rewrite's own phases (sampling, optimizing, writing, metadata, commit),
its progress lines timed, and the driver's peak RSS.

    .venv/bin/python benchmarks/profile_rewrite.py --home H --table tpch_sf1.lineitem \\
        --workload W.sql --k 3 --block-rows 100000 --master 'local[2]' --out /tmp/pando-profile

``--home``: a lakehouse holding the table and the tables its workload joins (for example the one
``pando bench --dataset tpch`` loaded); ``--workload``: the training queries (a .sql file, e.g. the
bench's ``workloads/*.sql``), their table names rewritten from the copy's namespace to ``prof``.
The table is copied file for file into ``prof.<name>`` (the other tables once), so the profile
starts from the table as loaded. Writes ``rewrite.pstats`` and ``profile.txt`` into --out.

``--optimizer-only``: profile ``learn_layout`` alone (sampling and optimizing, nothing written,
no copy: the workload is read against the table's own namespace), and pickle what the optimizer
learned from into ``--out``/``optimizer-inputs.pkl`` (the sample, the template draws, the candidate
cuts with their key sets, the guard's reads of the table now): ``optimizer_timing.py --replay``
runs the optimizer again on it without Spark, so that two versions of the code are timed on the
same sample in the same run. ``learn.txt`` also holds ``learning_workload``'s steps (the template
draws, the dimension samples, the attribute weights, the key sets, the candidate cuts): per step
its calls, seconds, Spark jobs and rows read, and hashes of the draws, key sets and cuts it
returned and of the layout learned (``--fingerprint PKL``: the first ones of a recorded run), so
that two versions of the code are shown to learn the same. ``--learning-only``: stop there.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pickle
import pstats
import re
import resource
import time
from pathlib import Path

from pando_iceberg.config import load_config
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table
from pando_iceberg.spark.session import spark_session
from pando_iceberg.tpch import copy_table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home")
    p.add_argument("--table", help="namespace.table to copy and lay out")
    p.add_argument("--workload", help=".sql file of training queries")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--block-rows", type=int, default=100_000)
    p.add_argument("--top", type=int, default=45, help="functions listed, by cumulative time")
    p.add_argument("--out", default="/tmp/pando-profile")
    p.add_argument("--master", default=None, help="Spark master (default: the configuration's), e.g. local[2]")
    p.add_argument("--options", default="", help="more rewrite options, KEY=VALUE comma-separated (e.g. "
                   "sample-rate=0.01,seed=0, as the bench gives them)")
    p.add_argument("--fingerprint", default=None, metavar="PKL",
                   help="print the hashes of what learning_workload answered in an optimizer-inputs.pkl and exit")
    p.add_argument("--learning-only", action="store_true",
                   help="with --optimizer-only: stop after learning_workload (the draws and candidate cuts, "
                   "'draws+cuts'), no trees; its steps, Spark jobs and fingerprint")
    p.add_argument("--optimizer-only", action="store_true",
                   help="profile learn_layout only and pickle its inputs for optimizer_timing.py --replay")
    args = p.parse_args()
    if args.fingerprint:
        with open(args.fingerprint, "rb") as fh:
            print(json.dumps(workload_fingerprint(pickle.load(fh)["answers"])))
        return
    if not (args.home and args.table and args.workload):
        p.error("--home, --table and --workload are required (but with --fingerprint)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns, name = args.table.split(".")
    text = Path(args.workload).read_text()
    # the workload's tables (FROM / JOIN ns.t), whatever namespace it names them in, are read from prof.*
    named = re.findall(r"\b(?:FROM|JOIN)\s+(\w+)\.(\w+)", text, flags=re.IGNORECASE)
    tables = sorted({t for _, t in named})
    spaces = "|".join(sorted({re.escape(n) for n, _ in named})) or "(?!)"
    workload = re.sub(r"\b(?:" + spaces + r")\.(\w+)\b", (ns if args.optimizer_only else "prof") + r".\1", text)
    options = RewriteOptions.from_map({"k": str(args.k), "min-block-rows": str(args.block_rows),
                                       **dict(kv.split("=", 1) for kv in args.options.split(",") if kv)})
    cfg = load_config(home=args.home, overrides={"spark": {"master": args.master}} if args.master else None)
    if args.optimizer_only:
        optimizer_only(cfg, args.table, workload, options, out, args.top, args.learning_only)
        return
    with spark_session(cfg) as spark:
        spark.sql("CREATE NAMESPACE IF NOT EXISTS prof")
        for t in dict.fromkeys([name, *tables]):
            if (t == name or not spark.catalog.tableExists(f"prof.{t}")) and spark.catalog.tableExists(f"{ns}.{t}"):
                copy_table(spark, f"{ns}.{t}", f"prof.{t}")
        lines: list[str] = []
        t0 = time.time()

        def progress(message: str) -> None:
            lines.append(f"{time.time() - t0:8.1f} s  {message}")
            print(lines[-1], flush=True)

        prof = cProfile.Profile()
        prof.enable()
        result = rewrite_table(spark, f"prof.{name}", workload, options,
                               io_properties=cfg.pyiceberg_properties(), progress=progress)
        prof.disable()
    prof.dump_stats(str(out / "rewrite.pstats"))
    listing = io.StringIO()
    pstats.Stats(prof, stream=listing).sort_stats("cumulative").print_stats(args.top)
    summary = {"total_s": round(time.time() - t0, 1), "phases_s": {k: round(v, 1) for k, v in result.seconds.items()},
               "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}
    (out / "profile.txt").write_text(json.dumps(summary) + "\n\n" + "\n".join(lines) + "\n\n" + listing.getvalue())
    print(json.dumps(summary))


# The steps of ``learning_workload`` (module, function) timed by ``optimizer_only``, with the Spark
# jobs each ran and the rows they read; a step inside another is counted in both.
STEPS = (("pando_iceberg.spark.rewrite", "learning_workload"),
         ("pando_iceberg.spark.rewrite_common", "dimension_samples"),
         ("pando_iceberg.workload.templates", "expected_workload"),
         ("pando_iceberg.workload.top_k_learning", "top_k_learning_queries"),
         ("pando_iceberg.workload.attribute_ranges", "attribute_range_filters"),
         ("pando_iceberg.spark.rewrite_common", "keyed_draws"),
         ("pando_iceberg.spark.rewrite_common", "table_cuts"),
         ("pando_iceberg.spark.rewrite_common", "seeded_sample"),
         ("pando_iceberg.spark.rewrite_common", "row_count"),
         ("pando_iceberg.spark.rewrite_common", "SparkKeyProvider.prefetch"),
         ("pando_iceberg.workload.model", "Workload.join_induced_cuts"))


class SparkJobs:
    """The Spark jobs the session ran so far (its status store): how many, and the rows and bytes
    their stages read from their sources."""

    def __init__(self, spark):
        self.sc = spark.sparkContext._jsc.sc()
        self.seen: set[int] = set()
        self.rows, self.bytes = 0, 0

    def now(self) -> tuple[int, int, int]:
        try:
            self.sc.listenerBus().waitUntilEmpty(10_000)
        except Exception:
            pass
        ids = list(self.sc.statusTracker().getJobIdsForGroup(None))
        store = self.sc.statusStore()
        for job in ids:
            if job in self.seen:
                continue
            self.seen.add(job)
            stages = store.job(job).stageIds()
            for i in range(stages.size()):
                try:
                    data = store.lastStageAttempt(stages.apply(i))
                except Exception:
                    continue
                self.rows += int(data.inputRecords())
                self.bytes += int(data.inputBytes())
        return len(ids), self.rows, self.bytes


def traced_steps(spark, steps=STEPS) -> list[dict]:
    """Wrap ``steps`` so that each call records its seconds, Spark jobs and input rows; returns the
    list the calls are appended to (module attributes replaced for the rest of the process)."""
    import importlib

    calls: list[dict] = []
    jobs = SparkJobs(spark) if spark is not None else None
    depth = [0]

    def wrap(name: str, real):
        def call(*a, **kw):
            before = jobs.now() if jobs else (0, 0, 0)
            t = time.time()
            depth[0] += 1
            try:
                return real(*a, **kw)
            finally:
                depth[0] -= 1
                after = jobs.now() if jobs else (0, 0, 0)
                calls.append({"step": name, "depth": depth[0], "s": time.time() - t, "jobs": after[0] - before[0],
                              "rows": after[1] - before[1], "bytes": after[2] - before[2]})
        return call

    for module, qual in steps:
        owner = importlib.import_module(module)
        *path, attr = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, attr, wrap(qual, getattr(owner, attr)))
    return calls


def step_table(calls: list[dict]) -> str:
    """The calls of ``traced_steps`` per step: calls, seconds, jobs, rows and MB read."""
    per: dict[str, list] = {}
    for c in calls:
        row = per.setdefault(c["step"], [0, 0.0, 0, 0, 0])
        row[0] += 1
        row[1] += c["s"]
        row[2] += c["jobs"]
        row[3] += c["rows"]
        row[4] += c["bytes"]
    lines = ["| step | calls | s | Spark jobs | rows read | MB read |", "|---|---|---|---|---|---|"]
    lines += [f"| {k} | {n} | {s:.1f} | {j} | {r:,} | {b / 1e6:.1f} |" for k, (n, s, j, r, b) in per.items()]
    return "\n".join(lines)


# What learn_layout asks Spark (and the table's metadata) for, by name in spark/rewrite.py: recorded
# here, answered from the recording by optimizer_timing.py --replay.
RECORDED = ("table_workload", "template_bound", "row_count", "seeded_sample", "learning_workload",
            "reads_now", "file_bounds")


class LearningDone(Exception):
    """``--learning-only``: ``learning_workload`` has returned; learn no trees."""


def optimizer_only(cfg, table: str, workload: str, options, out: Path, top: int, learning_only: bool = False) -> None:
    """``learn_layout`` under cProfile, its Spark answers recorded (``RECORDED``) and pickled;
    ``learning_only``: up to ``learning_workload`` (the draws and cuts), no trees."""
    from types import SimpleNamespace

    from pando_iceberg.spark import rewrite

    answers: dict[str, list[bytes]] = {name: [] for name in RECORDED}

    def recording(name: str):
        real = getattr(rewrite, name)

        def call(*a, **kw):
            got = real(*a, **kw)
            kept = got
            if name == "table_workload":  # the parsed workload: only what learn_layout reads of it
                wl, target, queries, schemas = got
                kept = (SimpleNamespace(unsupported=list(wl.unsupported), queries=[
                    SimpleNamespace(sql=q.sql, weight=q.weight, filters=dict.fromkeys(q.filters))
                    for q in wl.queries]), target, queries, schemas)
            answers[name].append(pickle.dumps(kept))  # as it was answered (before the optimizer's caches)
            if learning_only and name == "learning_workload":
                raise LearningDone
            return got
        return call

    for name in RECORDED:
        setattr(rewrite, name, recording(name))
    t0 = time.time()

    def progress(message: str) -> None:
        print(f"{time.time() - t0:8.1f} s  {message}", flush=True)

    with spark_session(cfg) as spark:
        calls = traced_steps(spark)
        jobs = SparkJobs(spark)
        job0 = jobs.now()
        prof = cProfile.Profile()
        prof.enable()
        try:
            learned = rewrite.learn_layout(spark, table, workload, options, progress=progress,
                                           io_properties=cfg.pyiceberg_properties())
        except LearningDone:
            learned = None
        prof.disable()
        job1 = jobs.now()
    prof.dump_stats(str(out / "learn.pstats"))
    with open(out / "optimizer-inputs.pkl", "wb") as fh:
        pickle.dump({"table": table, "workload": workload, "options": options.to_map(), "answers": answers}, fh)
    listing = io.StringIO()
    pstats.Stats(prof, stream=listing).sort_stats("cumulative").print_stats(top)
    summary: dict = {"spark_jobs": job1[0] - job0[0], "rows_read": job1[1] - job0[1],
                     "learning_workload_s": round(sum(c["s"] for c in calls if c["step"] == "learning_workload"), 1)}
    if learned is None:
        summary["fingerprint"] = workload_fingerprint(answers)
    else:
        summary.update({"sampling_s": round(learned.seconds_sampling, 1),
                        "optimizing_s": round(learned.seconds_optimizing, 1),
                        "parts_s": {k: round(v, 1) for k, v in learned.seconds_parts.items()}, "k": learned.layout.k,
                        "blocks": learned.layout.num_blocks, "fingerprint": learned_fingerprint(learned, answers)})
    steps = step_table(calls)
    (out / "learn.txt").write_text(json.dumps(summary) + "\n\n" + steps + "\n\n" + listing.getvalue())
    print(json.dumps(summary))
    print(steps)


def learned_fingerprint(learned, answers: dict[str, list[bytes]]) -> dict[str, str]:
    """Hashes of what was learned from (``workload_fingerprint``) and of what was learned: the
    layout (trees, k-tuple → block map, block rows, in-block order) and its literal key sets, to
    compare two versions of the code on the same table and seed."""
    lay = learned.layout
    trees = [[(t.node_cut[n].key if t.node_cut[n] is not None else None, int(t.true_child[n]),
               int(t.not_true_child[n])) for n in range(t.num_nodes)] for t in lay.trees]
    return {**workload_fingerprint(answers),
            "layout": digest([json.dumps([trees, lay.ktuples.tolist(), lay.ktuple_block.tolist(),
                                          lay.block_rows.tolist(), learned.in_block_column])]),
            "literal_keys": digest(k.encode() + v for k, v in sorted(learned.literal_keys.items()))}


def workload_fingerprint(answers: dict[str, list[bytes]]) -> dict[str, str]:
    """Hashes of what ``learning_workload`` answered (recorded by ``optimizer_only``): the draws
    and validation draws (each filter's SQL, weight and its joins' key sets) and the candidate
    cuts (key and literal keys)."""
    from pando_iceberg.expr.keys import keys_array

    def draw(f, w) -> list:
        keys = [b"-" if getattr(j, "dim_keys", None) is None else key_bytes(keys_array(j.dim_keys)) for j in f.joins]
        return [f.to_sql(), repr(w), *keys]

    expected, cuts = pickle.loads(answers["learning_workload"][-1])
    return {"draws": digest(p for f, w in expected.queries for p in draw(f, w)),
            "validation": digest(p for f, w in expected.validation for p in draw(f, w)),
            "cuts": digest(p for c in cuts for p in (c.key, c.keys_to_bytes() if hasattr(c, "keys_to_bytes") else b""))}


def key_bytes(keys) -> bytes:
    return keys.tobytes() if keys.dtype != object else "\0".join(map(str, keys.tolist())).encode()


def digest(parts) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


if __name__ == "__main__":
    main()
