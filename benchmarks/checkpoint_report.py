"""The report of a ``pando bench`` comparison run so far, from its checkpoint
(``<out>/checkpoint``, see ``pando_iceberg/bench/checkpoint.py``): the layouts it finished and
the held-out queries it measured, each on every layout back to back, so the queries measured so
far compare the layouts as the whole run would, on fewer templates. For a run that is still
going or was stopped (``pando bench ... --resume`` finishes it). Writes
``<stem>_partial.json`` / ``.md`` beside the checkpoint, labelled PARTIAL with how many of the
held-out queries it covers, and prints the markdown.

    PYTHONPATH=. .venv/bin/python benchmarks/checkpoint_report.py --home /tmp/sf10/home --out /tmp/sf10/out

The table as loaded (arrival), which a run does not checkpoint, is described from its Iceberg
metadata through pyiceberg (files, rows, bytes); the run's timings are the ones it recorded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True, help="the run's --home")
    p.add_argument("--out", required=True, help="the run's --out (holds checkpoint/)")
    a = p.parse_args()

    from pando_iceberg.bench import report as rep
    from pando_iceberg.bench.checkpoint import Checkpoint
    from pando_iceberg.bench.datasets import dataset_namespace
    from pando_iceberg.bench.harness import LAID_OUT, BenchOptions, bench_report, bench_stem, split_for
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config

    saved = json.loads(Path(a.out, "checkpoint", "options.json").read_text())
    cp = Checkpoint(BenchOptions(**{**saved, "out": a.out}), resume=True)  # checks the options as --resume does
    layouts = cp.measured_layouts()
    if not layouts:
        raise SystemExit(f"no measured query in {a.out}/checkpoint yet")
    opts = BenchOptions(**{**saved, "layouts": layouts, "out": a.out})
    measured = cp.queries(layouts)
    queries = [measured[k] for k in sorted(measured)]
    train, test = split_for(opts) if opts.dataset != "tpcds" else ([], [])

    catalog = load_catalog(load_config(home=a.home))
    source_ns = opts.namespace or dataset_namespace(opts.dataset, opts.sf)
    entries: dict[str, dict] = {"arrival": {"namespace": source_ns, "tables": {}}}
    for t in LAID_OUT[opts.dataset]:
        files = catalog.load_table(f"{source_ns}.{t}").inspect.files()
        rows = files.column("record_count").to_pylist()
        entries["arrival"]["tables"][t] = {"files": len(rows), "rows": sum(rows), "max_file_rows": max(rows),
                                           "bytes": sum(files.column("file_size_in_bytes").to_pylist()),
                                           "rewrite_seconds": 0.0}
    for x in layouts:
        if x != "arrival":
            done = cp.layout(x)
            if done is None:
                raise SystemExit(f"layout {x} has measured queries but no checkpoint entry")
            entries[x] = done
    report = bench_report(opts, source_ns, entries, queries, train_queries=len(train),
                          test_queries=len(test) or len(queries), load_seconds=0.0, wall_seconds=0.0)
    report["partial"] = (f"{len(queries)} of {len(test) or '?'} held-out queries measured "
                         f"(templates {', '.join(str(t) for t in sorted({q['template'] for q in queries}))})")
    stem = bench_stem(opts) + "_partial"
    Path(a.out, f"{stem}.json").write_text(json.dumps(report, indent=2, default=str))
    title, _, rest = rep.markdown(report, stem).partition("\n")
    rest = rest.replace("wall time 0.0 min (data load 0 s)", "wall time: not in a checkpoint")
    md = f"{title} (PARTIAL)\n\n**Partial: {report['partial']}**, from the run's checkpoint.\n{rest}"
    Path(a.out, f"{stem}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
