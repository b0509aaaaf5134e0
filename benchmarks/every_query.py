"""Plain ``spark.sql(q)`` and the DataFrame API in an enabled session (the optimizer rule,
``spark/prune_rule.py``) against the same query in a plain session on the same layout: files
read, rows, warm time, on the bench's datasets and held-out draws.

    PYTHONPATH=. .venv/bin/python benchmarks/every_query.py --home H --dataset tpch|star|taxi [--sf 1] \\
        [--per-template 4] [--measure-per-template 1] [--measure-templates 1,3] [--runs 3] [--templates 1,3,5] \\
        [--master 'local[2]'] \\
        [--out benchmarks/results/every_query_tpch_sf1.json]

The dataset is loaded and split into training and held-out draws exactly as ``pando bench`` does
(``bench.harness.prepare_dataset`` / ``split_for``, seed 0); its tables are laid out as the bench's
``pando-k3-unguarded`` layout (``bench.harness.apply_layouts``: k=3 learned on the training half,
the per-template guard off so every bench table is laid out), kept between runs in ``--home``.
Per held-out query (the first ``--measure-per-template`` of each template):

- the files each laid-out table reads through ``pando_iceberg.spark.sql`` (its explain records: one
  staged set per table) and through the rule (its notes: per scan) must be the same, or fewer for
  a table the query reads more than once (``against_text``), and the rows the same as a plain
  session's;
- the same for the query written with the DataFrame API (``dataframe_form``: its tables by
  ``spark.table``, joins by ``join``, its conditions by ``where``, ``groupBy``/``agg``, ``orderBy``,
  ``limit``), where the query is a select-from-where-group-by block without subqueries;
- interleaved, the median of ``--runs`` ``collect()`` in each session, warm: each session ran the
  query for the checks above (planning included: the rule plans inside Spark's optimizer). The
  record in ``--out`` is rewritten after each query (an interrupted run keeps what it measured).

Prints the medians of the per-query medians and the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

LAYOUTS = ("pando-k3-unguarded", "pando-k3")
_READ = re.compile(r"^(?P<table>\S+): read (?P<n>\d+) of (?P<m>\d+) files")


def conjuncts(node) -> list:
    from sqlglot import exp

    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    return [node]


def dataframe_form(session, sql: str):
    """``sql`` written with the DataFrame API, or None when it is not one select-from-where-group-by
    block of inner joins (subqueries, CTEs, outer joins, HAVING, DISTINCT, windows: no form)."""
    from pyspark.sql import functions as F
    from sqlglot import exp, parse_one

    tree = parse_one(sql, read="spark")
    if (not isinstance(tree, exp.Select) or tree.args.get("with") or tree.args.get("having")
            or tree.args.get("distinct") or any(s is not tree for s in tree.find_all(exp.Select))
            or tree.find(exp.Window)):
        return None
    joins = tree.args.get("joins") or []
    tables = [(tree.args.get("from") or tree.args["from_"]).this] + [j.this for j in joins]
    if any(not isinstance(t, exp.Table) for t in tables) or any(j.side or j.kind not in ("", None, "INNER", "CROSS")
                                                                   for j in joins):
        return None
    conds = [j.args["on"] for j in joins if j.args.get("on") is not None]
    if tree.args.get("where") is not None:
        conds.append(tree.args["where"].this)
    pending = [c for cond in conds for c in conjuncts(cond)]

    def s(node) -> str:
        return node.sql(dialect="spark")

    df, aliases = None, []
    for t in tables:
        name = ".".join(p for p in (t.catalog, t.db, t.name) if p)
        alias = t.alias_or_name
        frame = session.table(name).alias(alias)
        if df is None:
            df = frame
        else:
            # the equality conditions between the tables joined so far and this one
            on = [c for c in pending if isinstance(c, exp.EQ) and isinstance(c.left, exp.Column)
                  and isinstance(c.right, exp.Column) and _joins(c, aliases, alias, session)]
            for c in on:
                pending.remove(c)
            cond = None
            for c in on:
                cond = F.expr(s(c)) if cond is None else cond & F.expr(s(c))
            df = df.join(frame, on=cond, how="inner") if cond is not None else df.join(frame)  # an inner join
        aliases.append(alias)
    for c in pending:
        df = df.where(F.expr(s(c)))
    items = tree.expressions
    is_agg = [bool(i.find(exp.AggFunc)) for i in items]
    groups = [s(g) for g in (tree.args["group"].expressions if tree.args.get("group") else [])]
    if groups:
        order = []
        aggs = [i for i, a in zip(items, is_agg) if a]
        for i, a in zip(items, is_agg):
            if a:
                order.append(len(groups) + aggs.index(i))
            elif s(i.unalias()) in groups and (not isinstance(i, exp.Alias) or i.alias == i.unalias().name):
                order.append(groups.index(s(i.unalias())))
            else:
                return None
        out = df.groupBy(*[F.expr(g) for g in groups]).agg(*[F.expr(s(i)) for i in aggs])
        cols = out.columns
        out = out.select(*[out[cols[k]] for k in order])
    elif any(is_agg):
        if not all(is_agg):
            return None
        out = df.agg(*[F.expr(s(i)) for i in items])
    else:
        out = df.select(*[F.expr(s(i)) for i in items])
    if tree.args.get("order"):
        keys = []
        for o in tree.args["order"].expressions:
            col = F.expr(s(o.this))
            nulls_first = bool(o.args.get("nulls_first"))
            keys.append((col.desc_nulls_first() if nulls_first else col.desc_nulls_last()) if o.args.get("desc")
                        else (col.asc_nulls_first() if nulls_first else col.asc_nulls_last()))
        out = out.orderBy(*keys)
    if tree.args.get("limit") is not None:
        out = out.limit(int(s(tree.args["limit"].expression)))
    return out


def _joins(cond, aliases: list[str], alias: str, session) -> bool:
    """Does the equality ``cond`` of two columns join a table of ``aliases`` to ``alias``? A
    column without a table qualifier is placed by the tables' columns."""
    sides = [_owner(c, aliases + [alias], session) for c in (cond.left, cond.right)]
    return alias in sides and any(x in aliases for x in sides)


_COLUMNS: dict[str, set[str]] = {}


def _owner(column, aliases: list[str], session) -> str | None:
    if column.table:
        return column.table if column.table in aliases else None
    for a in aliases:
        if column.name.lower() in _COLUMNS.get(a, set()):
            return a
    return None


def remember_columns(session, sql: str) -> None:
    """Each table alias of ``sql`` → its column names (for unqualified join columns)."""
    from sqlglot import exp, parse_one

    for t in parse_one(sql, read="spark").find_all(exp.Table):
        name = ".".join(p for p in (t.catalog, t.db, t.name) if p)
        _COLUMNS[t.alias_or_name] = {c.lower() for c in session.table(name).columns}


def rule_reads(notes: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Each table's files read (of all) per scan the rule replaced, from its notes."""
    out: dict[str, list[tuple[int, int]]] = {}
    for note in notes:
        m = _READ.match(note)
        if m:
            out.setdefault(m["table"], []).append((int(m["n"]), int(m["m"])))
    return out


def against_text(rule: dict[str, list[tuple[int, int]]], text: dict[str, tuple[int, int]]) -> str:
    """The rule's reads against ``pando_iceberg.spark.sql``'s (one staged set per table, shared by
    its scans): ``same`` (every scan of a table reads the text path's files), ``fewer`` (no scan
    more, one fewer: a table read by several scans is planned per scan), else ``more``."""
    fewer = False
    for table, (n, _) in text.items():
        reads = rule.get(table)
        if not reads or any(r > n for r, _ in reads):
            return "more"
        fewer |= any(r < n for r, _ in reads)
    fewer |= bool(set(rule) - set(text))
    return "fewer" if fewer else "same"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True)
    p.add_argument("--dataset", default="tpch", choices=("tpch", "star", "taxi"))
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--per-template", type=int, default=4, help="draws per template, half held out (default 4)")
    p.add_argument("--measure-per-template", type=int, default=1,
                   help="held-out queries measured per template (default 1)")
    p.add_argument("--measure-templates", default="",
                   help="comma-separated: measure only these templates' held-out queries (the layout is learned "
                        "from every template's training draws all the same; default all)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--templates", default="", help="comma-separated (default: the bench's default templates)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--layout", default=LAYOUTS[0], choices=LAYOUTS,
                   help="the bench layout measured (default pando-k3-unguarded: every bench table laid out)")
    p.add_argument("--prepare-only", action="store_true", help="load and lay out, measure nothing")
    p.add_argument("--out", default="")
    a = p.parse_args()

    import pando_iceberg
    import pando_iceberg.spark
    from pando_iceberg.bench.harness import (
        LAID_OUT,
        BenchOptions,
        apply_layouts,
        prepare_dataset,
        split_for,
    )
    from pando_iceberg.bench.workloads import qualify
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.procedures import ProcedureContext
    from pando_iceberg.spark.session import start_spark, stop_spark
    from pando_iceberg.storage.pointer import P_LAYOUT_ID

    cfg = load_config(home=Path(a.home), env={}, overrides={"spark": {"master": a.master, "driver_memory": "4g"}})
    spark = start_spark(cfg, app_name="every-query-bench")
    catalog = load_catalog(cfg)
    opts = BenchOptions(dataset=a.dataset, sf=a.sf, layouts=("arrival", a.layout), per_template=a.per_template,
                        out=tempfile.mkdtemp(prefix="every-query-"), runs=a.runs,
                        templates=[int(t) for t in a.templates.split(",") if t.strip()] or None)
    opts.validate()
    try:
        t0 = time.time()
        source_ns = prepare_dataset(spark, catalog, opts, print)
        train, test = split_for(opts)
        ns = f"{source_ns}_{a.layout.replace('-', '_')}"
        tables = LAID_OUT[a.dataset]

        def laid_out() -> bool:
            try:
                return all(P_LAYOUT_ID in catalog.load_table(f"{ns}.{t}").properties for t in tables)
            except Exception:
                return False

        if not laid_out():
            ctx = ProcedureContext(cfg, catalog, lambda: spark, progress=print)
            apply_layouts(ctx, spark, catalog, opts, source_ns, train, print)
        prepare_s = time.time() - t0
        print(f"prepared {ns} in {prepare_s:.0f}s", flush=True)
        if a.prepare_only:
            return
        measured, seen = [], {}
        only = {int(t) for t in a.measure_templates.split(",") if t.strip()}
        for template, q in test:
            if (not only or template in only) and seen.get(template, 0) < a.measure_per_template:
                seen[template] = seen.get(template, 0) + 1
                measured.append((template, qualify(q, ns)))
        plain = spark.newSession()  # no rule
        pando_iceberg.enable(spark)
        load_before = os.getloadavg()[0]
        rows_out = []
        for template, sql in measured:
            try:
                rows_out.append(measure(spark, plain, catalog, template, sql, a.runs))
            except KeyboardInterrupt:  # stop measuring: what was measured is written
                print("interrupted: writing what was measured", flush=True)
                break
            except Exception as e:  # recorded, and the run goes on
                rows_out.append({"template": template, "sql": sql, "error": f"{type(e).__name__}: {str(e)[:500]}"})
                print(f"T{template}: ERROR {rows_out[-1]['error']}", flush=True)
            write(a, seen, prepare_s, ns, load_before, rows_out, final=False)
        write(a, seen, prepare_s, ns, load_before, rows_out, final=True)
    finally:
        stop_spark(spark)


def write(a, seen: dict, prepare_s: float, ns: str, load_before: float, rows_out: list, final: bool) -> None:
    """The summary of the queries measured so far, into ``--out`` (after each query: a run
    stopped early keeps what it measured); printed at the end."""
    ok = [r for r in rows_out if "error" not in r]
    if not ok:
        return
    load_after = os.getloadavg()[0]
    with_df = [r for r in ok if r["dataframe"]]
    summary = {
        "dataset": a.dataset, "sf": a.sf, "layout": a.layout, "namespace": ns, "queries": len(ok),
        "errors": len(rows_out) - len(ok),
        "runs": a.runs, "templates": sorted(seen), "prepare_seconds": prepare_s,
        "median_enabled_s": statistics.median(r["enabled_s"] for r in ok),
        "median_plain_s": statistics.median(r["plain_s"] for r in ok),
        "sum_enabled_s": sum(r["enabled_s"] for r in ok),
        "sum_plain_s": sum(r["plain_s"] for r in ok),
        "same_rows": sum(r["same_rows"] for r in ok),
        "same_files": sum(r["same_files"] for r in ok),
        "fewer_files": sum(r.get("fewer_files", False) for r in ok),
        "pruned_beyond_iceberg": sum(bool(r["kept"]) for r in ok),
        "dataframe_queries": len(with_df),
        "dataframe_templates": sorted({r["template"] for r in with_df}),
        "dataframe_same_rows": sum(r["dataframe_same_rows"] for r in with_df),
        "dataframe_same_files": sum(r["dataframe_same_files"] for r in with_df),
        "rule_first_asked": sum(r["rule_first"].get("asked", 0) for r in ok),
        "rule_first_ask_ms": sum(r["rule_first"].get("ask_ms", 0) for r in ok),
        "rule_warm_asked": sum(r["rule_warm"].get("asked", 0) for r in ok),
        "rule_warm_reused": sum(r["rule_warm"].get("reused", 0) for r in ok),
        "rule_warm_ms": sum(r["rule_warm"].get("rule_ms", 0) for r in ok),
        "load_before": load_before, "load_after": load_after,
    }
    summary["complete"] = final and len(rows_out) == sum(seen.values())
    if final:
        print(json.dumps(summary, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps({"summary": summary, "queries": rows_out}, indent=1, default=str))


def measure(spark, plain, catalog, template: int, sql: str, runs: int) -> dict:
    """One held-out query: files and rows through the rule (SQL and DataFrame API) against
    ``pando_iceberg.spark.sql`` and a plain session, then interleaved warm timings."""
    import pando_iceberg.spark
    from pando_iceberg.bench.harness import same_rows
    from pando_iceberg.spark import prune_rule

    with pando_iceberg.spark.sql(spark, sql, catalog=catalog) as df:
        kept = {t: (e.pando_files, e.total_files) for t, e in df.pando.explains.items()
                if e.pando_files < e.iceberg_files}
    prune_rule.clear_notes(spark)
    prune_rule.stats(spark, clear=True)
    got = spark.sql(sql).collect()
    first = prune_rule.stats(spark, clear=True)
    said = prune_rule.notes(spark)
    want = plain.sql(sql).collect()
    files = against_text(rule_reads(said), kept)
    row = {"template": template, "sql": sql, "kept": kept, "rule_notes": said, "rule_first": first,
           "rule_reads": rule_reads(said), "same_rows": same_rows(got, want), "files": files,
           "same_files": files == "same", "fewer_files": files == "fewer"}
    remember_columns(spark, sql)
    try:
        frame = dataframe_form(spark, sql)
    except Exception as e:  # the form does not analyse (an alias Spark SQL resolves, the DataFrame API not)
        frame, row["dataframe_error"] = None, f"{type(e).__name__}: {str(e)[:300]}"
    if frame is not None:
        prune_rule.clear_notes(spark)
        prune_rule.forget_answers(spark)  # the form's blocks planned anew, not the SQL run's answer reused
        df_rows = frame.collect()
        df_said = prune_rule.notes(spark)
        row.update(dataframe=True, dataframe_same_rows=same_rows(df_rows, want),
                   dataframe_same_files=against_text(rule_reads(df_said), kept) == "same", dataframe_notes=df_said)
    else:
        row["dataframe"] = False
    times: dict[str, list[float]] = {"enabled": [], "plain": []}
    prune_rule.stats(spark, clear=True)
    for _ in range(runs):  # warm: each session ran the query above
        for name, session in (("enabled", spark), ("plain", plain)):
            t1 = time.perf_counter()
            session.sql(sql).collect()
            times[name].append(time.perf_counter() - t1)
    row.update(enabled_s=statistics.median(times["enabled"]), plain_s=statistics.median(times["plain"]),
               enabled_runs=times["enabled"], plain_runs=times["plain"], rule_warm=prune_rule.stats(spark, clear=True))
    df_ok = "-" if not row["dataframe"] else \
        "=" if row["dataframe_same_rows"] and row["dataframe_same_files"] else "DIFFER"
    first, warm = row["rule_first"], row["rule_warm"]
    print(f"T{template}: enabled {row['enabled_s']:.3f}s plain {row['plain_s']:.3f}s "
          f"rows {'=' if row['same_rows'] else 'DIFFER'} files {files} {row['rule_reads']} "
          f"df {df_ok} {kept} rule: first asked {first.get('asked', 0):.0f} in {first.get('ask_ms', 0):.0f} ms, "
          f"warm asked {warm.get('asked', 0):.0f} reused {warm.get('reused', 0):.0f} "
          f"in {warm.get('rule_ms', 0):.0f} ms "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    return row


if __name__ == "__main__":
    main()
