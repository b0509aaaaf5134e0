"""The ``pando.system.*`` procedures. Each returns a :class:`Result` (named, typed columns)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlglot import exp

from ..config import PandoConfig
from ..spark.session import refresh_table
from .parse import ProcedureCall, ProcedureError, parse_call
from .registry import REGISTRY, Param, Result, lookup, procedure


@dataclass
class ProcedureContext:
    """What procedures run against: the configuration, pyiceberg's catalog and a Spark session
    started only when a procedure needs one."""

    cfg: PandoConfig
    catalog: Any
    spark_factory: Callable[[], Any]
    progress: Callable[[str], None] = lambda m: None
    _spark: Any = field(default=None, repr=False)

    @property
    def spark(self):
        if self._spark is None:
            self._spark = self.spark_factory()
        return self._spark

    def table(self, name: str):
        """The pyiceberg table, or an error naming the tables that do exist."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        parts = name.split(".")
        if len(parts) == 3 and parts[0] == self.cfg.catalog.name:
            name = ".".join(parts[1:])
        try:
            return self.catalog.load_table(name)
        except (NoSuchTableError, NoSuchNamespaceError, ValueError):
            known = []
            for ns in self.catalog.list_namespaces():
                known += [".".join(t) for t in self.catalog.list_tables(ns)]
            raise ProcedureError(f"table {name!r} does not exist; tables in catalog {self.cfg.catalog.name!r}: "
                                 f"{', '.join(sorted(known)) or 'none'}") from None

    def spark_name(self, table) -> str:
        return ".".join(table.name()[-2:]) if isinstance(table.name(), tuple) else str(table.name())


def call(ctx: ProcedureContext, statement: str) -> Result:
    """Run one ``CALL pando.system.<name>(...)`` statement."""
    parsed = parse_call(statement)
    proc = lookup(parsed)
    args = proc.bind(parsed)
    return proc.run(ctx, **args)


WORKLOAD_PARAMS = (
    Param("workload", "string", doc="SQL text, a .sql file, a directory of .sql files, or a .jsonl/.csv query log"),
    Param("workload_log", "string", doc="a query log: a .jsonl/.csv file or an Iceberg table (text, timestamp, weight)"),
    Param("since", "string", doc="query logs: only queries at or after this (ISO-8601 instant or '1 day', '24 hours')"),
    Param("until", "string", doc="query logs: only queries before this (same forms as since)"),
)


def _workload_sources(ctx: ProcedureContext, workload: str | list[str] | None, workload_log: str | None = None,
                      since: str | None = None, until: str | None = None) -> list | None:
    """Sources for ``parse_workload``: SQL texts and files, and (text, weight) pairs of query logs."""
    from ..workload.log import read_query_log
    from ..workload.parser import classify_workload_source

    items = [] if workload is None else (workload if isinstance(workload, list) else [workload])
    logs = [workload_log] if workload_log is not None else []
    out: list = []
    for item in items:
        kind = classify_workload_source(item)  # a path that names nothing is an error, not SQL text
        if kind == "directory":
            out += sorted(os.path.join(item, f) for f in os.listdir(item) if f.endswith(".sql"))
        elif kind == "query-log":
            logs.append(item)
        else:
            out.append(item)
    if (since is not None or until is not None) and not logs:
        raise ProcedureError("arguments 'since'/'until' select queries of a query log: give 'workload_log' (a .jsonl/"
                             ".csv file or an Iceberg table) or a .jsonl/.csv file as 'workload'")
    for log in logs:
        got = read_query_log(log, since=since, until=until, load_table=ctx.table)
        if not got:
            window = " ".join(x for x in (f"since {since}" if since else "", f"until {until}" if until else "") if x)
            raise ProcedureError(f"query log {log!r} has no queries{' ' + window if window else ''}")
        out += got
    return out or None


def _stored_workload(ctx: ProcedureContext, table, notes: list[str] | None = None) -> list | None:
    """The workload the current layout recorded, brought to the current schema: a column of the
    table renamed since follows its field id to its new name; statements that still do not
    resolve (a column dropped) are left out, each noted (soak findings, issue 19 — re-laying out
    failed with "Unknown column")."""
    sidecar = _current_sidecar(table, required=False)
    if sidecar is None or "pando.workload" not in sidecar.properties:
        return None
    stored = [tuple(x) if isinstance(x, list) else x for x in json.loads(sidecar.properties["pando.workload"])]
    renames = _renamed_columns(table)
    kept, dropped, renamed = [], [], 0
    schemas: dict[str, Any] = {}  # table name → current Arrow schema, loaded once
    for item in stored:
        text, weight = item if isinstance(item, tuple) else (item, None)
        new = _follow_renames(ctx, text, renames, schemas) if renames else text
        renamed += new != text
        reason = _unresolvable(ctx, new, schemas)
        if reason:
            dropped.append(reason)
        else:
            kept.append(new if weight is None else (new, weight))
    if renamed and notes is not None:
        notes.append(f"{renamed} recorded workload statement(s) follow renamed column(s) "
                     + ", ".join(f"{a} → {b}" for a, b in sorted(renames.items())))
    if dropped and notes is not None:
        notes.append(f"{len(dropped)} of the {len(stored)} recorded workload statement(s) no longer resolve against "
                     f"the current schemas and were left out (e.g. {dropped[0]})")
    if stored and not kept:
        raise ProcedureError(f"the workload recorded with the layout of {'.'.join(table.name())} no longer resolves "
                             f"against the current schemas (e.g. {dropped[0]}); give 'workload' (SQL text, a .sql file, "
                             "a directory or a query log) or 'workload_log'")
    return kept


def _renamed_columns(table) -> dict[str, str]:
    """Old name → current name of the table's top-level columns renamed in its schema history
    (same field id, another name; an old name that is a current column's name is not renamed)."""
    current = {f.field_id: f.name for f in table.schema().fields}
    names = set(current.values())
    out: dict[str, str] = {}
    for schema in table.metadata.schemas:
        for f in schema.fields:
            now = current.get(f.field_id)
            if now is not None and now != f.name and f.name not in names:
                out[f.name.lower()] = now
    return out


def _follow_renames(ctx: ProcedureContext, statement: str, renames: dict[str, str], known: dict[str, Any]) -> str:
    """``statement`` with every column reference named by an old name no table of it has now
    replaced by the current name (``renames``)."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(statement, read="spark")
        tables = {".".join(p for p in (t.catalog, t.db, t.name) if p) for t in tree.find_all(exp.Table)}
        for n in tables - known.keys():
            known[n] = ctx.table(n).schema().as_arrow()
    except Exception:  # noqa: BLE001 - CTE names, unknown tables: leave the statement as it is
        return statement
    taken = {c.lower() for n in tables for c in known[n].names}
    changed = False
    for col in tree.find_all(exp.Column):
        new = renames.get(col.name.lower())
        if new is not None and col.name.lower() not in taken:
            col.set("this", exp.to_identifier(new))
            changed = True
    return tree.sql(dialect="spark") if changed else statement


def _unresolvable(ctx: ProcedureContext, statement: str, known: dict[str, Any]) -> str | None:
    """Why ``statement`` does not resolve against its tables' current schemas, or None (also
    when that cannot be judged here: a table that cannot be loaded is left to the rewrite)."""
    import sqlglot

    from ..workload import PandoWorkloadError, parse_workload

    try:
        tables = {".".join(p for p in (t.catalog, t.db, t.name) if p)
                  for t in sqlglot.parse_one(statement, read="spark").find_all(exp.Table)}
        for n in tables - known.keys():
            known[n] = ctx.table(n).schema().as_arrow()
        schemas = {n: known[n] for n in tables}
    except Exception:  # noqa: BLE001 - CTE names, unknown tables: not ours to judge here
        return None
    try:
        parse_workload([statement], schemas)
    except PandoWorkloadError as e:
        return str(e).splitlines()[0]
    return None


def _current_sidecar(table, required: bool = True):
    from ..storage.paths import sidecar_path
    from ..storage.pointer import layout_pointer
    from ..storage.sidecar import LayoutSidecar

    pointer = layout_pointer(table.properties)
    if pointer is None:
        if required:
            from .pending import P_PENDING_ID

            pending = table.properties.get(P_PENDING_ID)
            hint = (f" (optimize_layout stored pending layout {pending}: apply it with CALL pando.system."
                    "rewrite_data_files(table => ..., strategy => 'pando'))" if pending else
                    "; create one with CALL pando.system.rewrite_data_files(table => ..., strategy => 'pando', "
                    "workload => ...)")
            raise ProcedureError(f"table {'.'.join(table.name())} has no Pando layout{hint}")
        return None
    from ..storage.partitions import read_layout_sidecar

    return read_layout_sidecar(table.io, pointer, table.location(), table.metadata.table_uuid)  # version 1 or 2


REWRITE_COLUMNS = [("rewritten_data_files_count", "int"), ("added_data_files_count", "int"),
                   ("rewritten_bytes_count", "bigint"), ("failed_data_files_count", "int"),
                   ("layout_id", "string"), ("block_count", "int"), ("snapshot_id", "bigint")]


@procedure("rewrite_data_files",
           Param("table", "string", required=True, doc="table to rewrite"),
           Param("strategy", "string", default="binpack", doc="pando | binpack | sort"),
           Param("sort_order", "string", doc="for sort: e.g. 'zorder(a,b)' or 'a ASC NULLS LAST'"),
           Param("options", "map<string,string>", default={}, doc="Iceberg options, or Pando's: k, sample-rate, ..."),
           Param("where", "string", doc="binpack/sort: files that may match; pando: the partitions to lay out (partition source columns only)"),
           *WORKLOAD_PARAMS,
           Param("relearn", "boolean", default=False,
                 doc="pando: learn a new layout even when optimize_layout stored a pending one"))
def rewrite_data_files(ctx: ProcedureContext, table: str, strategy: str = "binpack", sort_order: str | None = None,
                       options: dict[str, str] | None = None, where: str | None = None, workload: str | None = None,
                       workload_log: str | None = None, since: str | None = None, until: str | None = None,
                       relearn: bool = False) -> Result:
    """Rewrite a table's data files: 'pando' applies a learned layout; 'binpack'/'sort' are Iceberg's."""
    strategy = strategy.lower()
    options = options or {}
    tbl = ctx.table(table)
    name = ctx.spark_name(tbl)
    if strategy == "pando":
        return _rewrite_pando(ctx, tbl, name, sort_order, options, where, workload, workload_log, since, until, relearn)
    if strategy not in ("binpack", "sort"):
        raise ProcedureError(f"rewrite_data_files: strategy {strategy!r} is not supported; accepted: pando, binpack, sort")
    given = [n for n, v in (("workload", workload), ("workload_log", workload_log), ("since", since),
                            ("until", until)) if v is not None] + (["relearn"] if relearn else [])
    if given:
        raise ProcedureError(f"rewrite_data_files: argument(s) {', '.join(given)} apply to strategy 'pando' only")
    args = [f"table => {exp.Literal.string(name).sql()}", f"strategy => {exp.Literal.string(strategy).sql()}"]
    if sort_order is not None:
        args.append(f"sort_order => {exp.Literal.string(sort_order).sql()}")
    if where is not None:
        args.append(f"where => {exp.Literal.string(where).sql()}")
    if options:
        kv = ", ".join(f"{exp.Literal.string(k).sql()}, {exp.Literal.string(v).sql()}" for k, v in options.items())
        args.append(f"options => map({kv})")
    df = ctx.spark.sql(f"CALL {ctx.cfg.catalog.name}.system.rewrite_data_files({', '.join(args)})")
    rows = [tuple(r) for r in df.collect()]
    refresh_table(ctx.spark, name)
    return Result([(f.name, f.dataType.simpleString()) for f in df.schema.fields], rows)


def _rewrite_pando(ctx, tbl, name, sort_order, options, where, workload, workload_log, since, until, relearn) -> Result:
    from ..spark.rewrite import RewriteOptions, rewrite_table
    from . import pending as pend

    partitioned = not tbl.spec().is_unpartitioned()
    if where is not None and not partitioned:
        raise ProcedureError(f"rewrite_data_files: argument 'where' with strategy 'pando' selects partitions, but "
                             f"{name} is not partitioned (its layout covers the whole table): omit 'where'")
    if sort_order is not None:
        raise ProcedureError("rewrite_data_files: argument 'sort_order' applies to strategy 'sort' only")
    from ..workload.parser import classify_workload_source

    for item in [] if workload is None else (workload if isinstance(workload, list) else [workload]):
        classify_workload_source(item)  # a workload path that names nothing fails before Spark starts
    from ..spark.incremental import incremental_options, incremental_rewrite, parse_mode

    mode, options = parse_mode(options)
    if mode == "incremental":  # lay out only the rows outside the layout, with its stored trees
        if where is not None:
            raise ProcedureError("rewrite_data_files: argument 'where' does not apply to mode 'incremental' (it lays "
                                 "out the rows outside the layouts of every partition that has one)")
        r = incremental_rewrite(ctx.spark, name, **incremental_options(options),
                                io_properties=ctx.cfg.pyiceberg_properties(), progress=ctx.progress)
        return Result(REWRITE_COLUMNS, [r.row()], notes=r.notes + [f"{k}: {v:.1f}s" for k, v in r.seconds.items()])
    opts = RewriteOptions.from_map(options)
    request = {"workload": workload, "workload_log": workload_log, "since": since, "until": until}
    notes: list[str] = []
    sidecar = None
    if not relearn and not partitioned:  # a partitioned table's layouts are learned per partition
        try:
            sidecar = pend.load_pending(tbl)
        except Exception as e:  # unreadable pending layout: learn instead
            notes.append(f"the pending layout cannot be read ({e}); learned a new one")
        if sidecar is not None:
            why = pend.matches(sidecar, opts, request)
            if why:
                notes.append(f"pending layout {sidecar.layout_id} not applied: {why}; learned a new one "
                             "(run optimize_layout again, or pass relearn => true to say so)")
                sidecar = None
    learned, sources = None, None
    refresh_table(ctx.spark, name)  # Spark's cached metadata may predate pyiceberg's last commit
    if sidecar is not None:
        learned = pend.learned_from_pending(ctx.spark, name, sidecar)
        current = tbl.current_snapshot().snapshot_id if tbl.current_snapshot() else None
        notes.append(f"applied pending layout {sidecar.layout_id} learned by optimize_layout on snapshot "
                     f"{sidecar.base_snapshot_id}" + ("" if current == sidecar.base_snapshot_id else
                                                      f" (the table is at snapshot {current} now; rows added since "
                                                      "are routed by the same trees)") + "; relearn => true learns anew")
    else:
        sources = _workload_sources(ctx, workload, workload_log, since, until) or _stored_workload(ctx, tbl, notes)
        if not sources:
            raise ProcedureError("rewrite_data_files: strategy 'pando' needs a workload (argument 'workload': SQL "
                                 "text, a .sql file, a directory or a query log; or 'workload_log') — the table has "
                                 "no recorded one and no pending layout from optimize_layout")
    r = rewrite_table(ctx.spark, name, sources or [], opts, io_properties=ctx.cfg.pyiceberg_properties(),
                      progress=ctx.progress, learned=learned, where=where)
    notes += getattr(r, "notes", [])
    dropped = pend.clear_pending(ctx.table(name))
    if dropped:
        refresh_table(ctx.spark, name)
    if dropped and sidecar is None:
        notes.append(f"pending layout {dropped} from optimize_layout superseded and removed")
    return Result(REWRITE_COLUMNS, [r.row()], notes=notes + [f"{k}: {v:.1f}s" for k, v in r.seconds.items()])


@procedure("optimize_layout",
           Param("table", "string", required=True),
           *WORKLOAD_PARAMS,
           Param("options", "map<string,string>", default={}, doc="k, sample-rate, seed, min-block-rows, ..."))
def optimize_layout(ctx: ProcedureContext, table: str, workload: str | None = None, workload_log: str | None = None,
                    since: str | None = None, until: str | None = None, options: dict[str, str] | None = None) -> Result:
    """Learn a layout and store it as pending, without rewriting data; report per workload query
    the files read now and the files the new layout would read. rewrite_data_files(strategy =>
    'pando') applies it later without learning again."""
    from ..planner import plan_scan
    from ..spark.rewrite import RewriteOptions, learn_layout
    from .pending import store_pending

    tbl = ctx.table(table)
    name = ctx.spark_name(tbl)
    snapshot = tbl.current_snapshot()
    if snapshot is None:
        raise ProcedureError(f"optimize_layout: table {name} has no snapshot (no data): nothing to lay out")
    if not tbl.spec().is_unpartitioned():
        raise ProcedureError(f"optimize_layout: table {name} is partitioned; its layouts are learned per partition "
                             "when they are applied: use rewrite_data_files(table => ..., strategy => 'pando', "
                             "where => ...) (pending layouts are whole-table only)")
    sources = _workload_sources(ctx, workload, workload_log, since, until)
    if not sources:
        raise ProcedureError("optimize_layout: give 'workload' (SQL text, a .sql file, a directory or a query log) "
                             "or 'workload_log' (a .jsonl/.csv file or an Iceberg table)")
    opts = RewriteOptions.from_map(options or {})
    refresh_table(ctx.spark, name)  # Spark's cached metadata may predate pyiceberg's last commit
    learned = learn_layout(ctx.spark, name, sources, opts, snapshot_id=snapshot.snapshot_id, progress=ctx.progress)
    request = {"workload": workload, "workload_log": workload_log, "since": since, "until": until}
    sidecar = store_pending(tbl, learned, opts, request, snapshot.snapshot_id)
    refresh_table(ctx.spark, name)
    layout = learned.layout
    total_rows = max(1, learned.table_rows)
    sample_total = float(layout.block_rows.sum()) or 1.0
    per_query = layout.cost(learned.queries, per_query=True)
    from ..workload.in_block import files_per_block

    block_files = files_per_block(layout.block_rows * (total_rows / sample_total), opts.min_block_rows)
    rows = []
    files_now = files_new = 0.0
    for i, ((flt, weight), cost) in enumerate(zip(learned.queries, per_query)):
        now = plan_scan(tbl, flt).explain
        blocks, _ = layout.blocks_for(flt)
        chosen = int(block_files[blocks].sum())
        files_now += weight * now.pando_files
        files_new += weight * chosen
        rows.append((i + 1, float(weight), now.pando_files, now.total_files, chosen, int(block_files.sum()),
                     round(now.pando_rows / total_rows, 4), round(float(cost) / sample_total, 4), flt.to_sql()[:200]))
    weights = sum(w for _, w in learned.queries) or 1.0
    return Result([("query", "int"), ("weight", "double"), ("files_read_now", "int"), ("files_total_now", "int"),
                   ("files_read_with_layout", "int"), ("files_total_with_layout", "int"),
                   ("rows_fraction_now", "double"), ("rows_fraction_with_layout", "double"), ("filter", "string")],
                  rows,
                  notes=[f"learned k={layout.k}, {layout.num_blocks} blocks ({int(block_files.sum())} files of about "
                         f"{opts.min_block_rows} rows; files_read_with_layout counts every file of the chosen blocks, "
                         f"min/max may skip more inside them) from {learned.sample_rows} "
                         f"sample rows, {learned.cuts} candidate cuts, {learned.queries_used} queries; weighted mean "
                         f"files read per query: {files_now / weights:.1f} now, {files_new / weights:.1f} with the layout",
                         f"stored as pending layout {sidecar.layout_id} (not used by scans until applied); apply it "
                         "with rewrite_data_files(table => ..., strategy => 'pando')"])


@procedure("explain_scan",
           Param("table", "string", doc="table to scan (with filter)"),
           Param("filter", "string", doc="a SQL predicate on the table"),
           Param("query", "string", doc="a whole SQL query: every base table is planned"))
def explain_scan(ctx: ProcedureContext, table: str | None, filter: str | None, query: str | None) -> Result:
    """Files/bytes/rows a scan reads with and without Pando, per tree, with any fallback reason."""
    from ..planner import plan_scan

    if query is None and table is None:
        raise ProcedureError("explain_scan: give 'table' (and optionally 'filter') or 'query'")
    if query is not None:
        from ..spark.pruned import plan_query

        explains = plan_query(ctx.spark, ctx.catalog, query).explains
    else:
        explains = {table: plan_scan(ctx.table(table), filter).explain}
    return explain_result(explains)


def explain_result(explains: dict[str, Any]) -> Result:
    rows = []
    for name, e in explains.items():
        rows.append((name, "all live files", e.total_files, e.total_bytes, e.total_rows, ""))
        rows.append((name, "iceberg (partitions, min/max)", e.iceberg_files, e.iceberg_bytes, e.iceberg_rows, ""))
        for t in e.trees:
            rows.append((name, f"pando tree {t.tree}", None, None, None,
                         f"{t.leaves_reached} leaves reached → {t.blocks} blocks"))
        for j in getattr(e, "joins", []):  # join pruning: dimension key set vs each file's FK bounds
            rows.append((name, "join pruning", None, None, None,
                         f"{j['join']}: {j['keys']} keys ({j['source']}), {j['files_pruned']} of "
                         f"{j['files_before']} files removed"))
        detail = (f"{e.blocks_chosen}/{e.blocks_total} blocks; {e.files_outside_layout} files outside the layout"
                  if e.used_layout else f"fallback: {e.fallback_reason}")
        if e.notes:
            detail += "; " + "; ".join(e.notes)
        rows.append((name, "pando (∩ trees)", e.pando_files, e.pando_bytes, e.pando_rows, detail))
    return Result([("table", "string"), ("stage", "string"), ("files", "int"), ("bytes", "bigint"),
                   ("rows", "bigint"), ("detail", "string")], rows)


@procedure("describe_layout", Param("table", "string", required=True))
def describe_layout(ctx: ProcedureContext, table: str) -> Result:
    """The layout's trees with their cuts, leaves → blocks, block sizes and files, base snapshot."""
    tbl = ctx.table(table)
    sidecar = _current_sidecar(tbl)
    if not hasattr(sidecar, "load_layout"):  # one layout per partition
        return _describe_partitioned(sidecar)
    layout = sidecar.load_layout()
    rows: list[tuple] = [("layout", None, None, None, f"id {sidecar.layout_id}; k={layout.k}; {layout.num_blocks} blocks; "
                                                      f"base snapshot {sidecar.base_snapshot_id}", None)]
    for t, tree in enumerate(layout.truncated):
        for node in tree._reachable():
            cut = tree.node_cut[node]
            if cut is not None:
                rows.append(("tree", t, node, tree.depth[node], f"cut: {cut.key}", None))
            else:
                blocks = layout.leaf_blocks[t].get(node, [])
                rows.append(("tree", t, node, tree.depth[node], f"leaf → blocks {list(map(int, blocks))}", None))
    for b in range(layout.num_blocks):
        files = sidecar.block_files.get(b, [])
        rows.append(("block", None, b, None, f"{len(files)} file(s), {sum(f.file_size_in_bytes for f in files):,} bytes",
                     int(sum(f.record_count for f in files))))
    rows += _learning_rows(sidecar.properties)
    from .pending import P_PENDING_BASE, P_PENDING_ID

    if P_PENDING_ID in tbl.properties:
        rows.append(("pending", None, None, None, f"layout {tbl.properties[P_PENDING_ID]} learned by optimize_layout on "
                     f"snapshot {tbl.properties.get(P_PENDING_BASE)}, not applied yet", None))
    return Result([("section", "string"), ("tree", "int"), ("node", "int"), ("depth", "int"),
                   ("description", "string"), ("rows", "bigint")], rows)


def _learning_rows(props: dict[str, str]) -> list[tuple]:
    """describe_layout rows for what the layout learned beyond the paper: the workload's
    templates with their parameters and synthetic draws, and the in-block order of the files."""
    from ..spark.rewrite import P_IN_BLOCK

    rows: list[tuple] = []
    for t in json.loads(props.get("pando.templates", "[]")):
        params = ", ".join(f"{c} ({role})" for c, role in t.get("parameters", {}).items()) or "none (constant literals)"
        rows.append(("template", None, None, None, f"{t['template']} — {t['training_draws']} training draw(s), "
                     f"{t['synthetic_draws']} synthetic; parameters: {params}", None))
    order = json.loads(props.get(P_IN_BLOCK, "null"))
    if order is not None:
        costs = ", ".join(f"{c} {v:.3f}" for c, v in order.get("workload_rows_fraction", {}).items())
        rows.append(("in-block order", None, None, None,
                     f"files of each block cut along {order['column']} (rows inside a file in the table's order)"
                     + (f"; workload rows read on the sample: {costs}" if costs else ""), None))
    else:
        rows.append(("in-block order", None, None, None, "none: files hold their block's rows in routing order", None))
    return rows


def _describe_partitioned(sidecar) -> Result:
    rows: list[tuple] = [("layout", None, None, None, f"id {sidecar.layout_id}; one layout per partition "
                          f"({len(sidecar.partitions)}); base snapshot {sidecar.base_snapshot_id}", None)]
    for name, entry in sorted(sidecar.partitions.items()):
        layout, files = entry.layout, entry.sidecar.block_files
        rows.append(("partition", None, None, None,
                     f"{name}: layout {entry.layout_id}; k={layout.k}; {layout.num_blocks} blocks; "
                     f"{sum(len(v) for v in files.values())} file(s)",
                     int(sum(f.record_count for v in files.values() for f in v))))
    return Result([("section", "string"), ("tree", "int"), ("node", "int"), ("depth", "int"),
                   ("description", "string"), ("rows", "bigint")], rows)


def _partitioned_health(ctx, table: str, tbl, sidecar, max_rows_outside: float, max_efficiency_loss: float,
                        relayout: bool, options: dict[str, str]) -> Result:
    """layout_health of a table with one layout per partition: one row per partition."""
    from ..maintenance.partition_health import COLUMNS, partition_health, relayout_call

    name = ctx.spark_name(tbl)
    workload = json.loads(sidecar.properties.get("pando.workload", "[]"))
    workload = [tuple(x) if isinstance(x, list) else x for x in workload]  # (statement, weight)
    rows, where = partition_health(tbl, sidecar, name, max_rows_outside, max_efficiency_loss, workload)
    degraded = [h for h in rows if h.reasons]
    out = [h.row() for h in rows]
    if degraded:
        call_sql = relayout_call(name, where)
        out.append(("*", "recommendation", None, None, None, None, None, None,
                    f"lay out {len(degraded)} degraded or new partition(s): {call_sql}"))
    else:
        out.append(("*", "ok", None, None, None, None, None, None, "every partition layout is healthy"))
    if relayout and degraded:
        r = rewrite_data_files(ctx, table, "pando", options=options, where=where, relearn=True)
        out.append(("*", "action", r.rows[0][1], None, None, None, None, None,
                    f"re-laid out: layout {r.rows[0][4]}, snapshot {r.rows[0][6]}"))
    return Result(COLUMNS, out)


@procedure("layout_health", Param("table", "string", required=True),
           Param("max_rows_outside", "double", default=0.2, doc="re-layout when this share of rows is outside"),
           Param("max_efficiency_loss", "double", default=0.5, doc="re-layout when rows read grow by this share"),
           Param("relayout", "boolean", default=False, doc="re-lay out now (recorded workload) when degraded"),
           Param("options", "map<string,string>", default={}, doc="options of the re-layout"))
def layout_health(ctx: ProcedureContext, table: str, max_rows_outside: float, max_efficiency_loss: float,
                  relayout: bool, options: dict[str, str]) -> Result:
    """Rows and files outside the layout, skipping on the recorded workload now vs at layout time."""
    from ..planner import plan_scan

    tbl = ctx.table(table)
    try:
        sidecar = _current_sidecar(tbl, required=False)
    except Exception as e:  # a corrupt sidecar is a health finding, not a crash
        return Result([("metric", "string"), ("value", "string")],
                      [("status", "broken"), ("reason", str(e)), ("recommendation", "re-layout (rewrite_data_files strategy 'pando')")])
    if sidecar is None:
        return Result([("metric", "string"), ("value", "string")],
                      [("status", "no layout"), ("recommendation", "create one with rewrite_data_files(strategy => 'pando')")])
    if not hasattr(sidecar, "load_layout"):  # one layout per partition
        return _partitioned_health(ctx, table, tbl, sidecar, max_rows_outside, max_efficiency_loss, relayout, options)
    layout_paths = {ref.path for refs in sidecar.block_files.values() for ref in refs}
    tasks = list(tbl.scan().plan_files())
    inside = [t for t in tasks if t.file.file_path in layout_paths]
    outside = [t for t in tasks if t.file.file_path not in layout_paths]
    rows_in = sum(t.file.record_count for t in inside)
    rows_out = sum(t.file.record_count for t in outside)
    share_out = rows_out / max(1, rows_in + rows_out)
    workload = json.loads(sidecar.properties.get("pando.workload", "[]"))
    at_layout = float(sidecar.properties.get("pando.expected-rows-fraction", "nan"))
    now = _workload_fraction_now(ctx, tbl, workload, plan_scan)
    loss = (now - at_layout) / at_layout if at_layout == at_layout and at_layout > 0 and now is not None else None
    reasons = []
    if share_out > max_rows_outside:
        reasons.append(f"{share_out:.0%} of rows are outside the layout (> {max_rows_outside:.0%})")
    if loss is not None and loss > max_efficiency_loss:
        reasons.append(f"the recorded workload reads {loss:.0%} more rows than at layout time (> {max_efficiency_loss:.0%})")
    if not inside:
        reasons.append("no live file belongs to the layout (rewritten by another tool)")
    from ..planner.scan import changed_cut_columns
    from ..storage.pointer import layout_pointer

    changed = changed_cut_columns(tbl, layout_pointer(tbl.properties), sidecar.load_layout())
    if changed:
        reasons.append(f"the layout's cuts on {', '.join(sorted(changed))} no longer apply (column renamed, dropped "
                       "or replaced since the layout)")
    rec = ("re-layout: " + "; ".join(reasons)) if reasons else "ok"
    rows = [("status", "degraded" if reasons else "ok"), ("layout_id", sidecar.layout_id),
            ("layout_snapshot_id", tbl.properties.get("pando.snapshot-id")),
            ("current_snapshot_id", str(tbl.current_snapshot().snapshot_id) if tbl.current_snapshot() else None),
            ("layout_files_live", str(len(inside))), ("files_outside_layout", str(len(outside))),
            ("rows_outside_layout", str(rows_out)), ("rows_outside_share", f"{share_out:.4f}"),
            ("workload_rows_fraction_at_layout", f"{at_layout:.4f}"),
            ("workload_rows_fraction_now", f"{now:.4f}" if now is not None else "n/a"),
            ("recommendation", rec)]
    if relayout and reasons:
        r = rewrite_data_files(ctx, table, "pando", options=options, relearn=True)
        rows.append(("action", f"re-laid out: layout {r.rows[0][4]}, {r.rows[0][1]} files written, snapshot {r.rows[0][6]}"))
    elif relayout:
        rows.append(("action", "none (healthy)"))
    return Result([("metric", "string"), ("value", "string")], rows)


def _workload_fraction_now(ctx, tbl, workload: list[str], plan_scan) -> float | None:
    """Weighted share of live rows the recorded workload reads now, by the real planner."""
    if not workload:
        return None
    from ..workload import parse_workload

    name = ctx.spark_name(tbl)
    schemas = {name: tbl.schema().as_arrow()}
    try:
        wl = parse_workload(workload, schemas)
    except Exception:
        return None  # the recorded workload names other tables we do not load here: no estimate
    total = read = 0.0
    for q in wl.queries:
        if name not in q.filters:
            continue
        e = plan_scan(tbl, q.filters[name]).explain
        total += q.weight * max(1, e.total_rows)
        read += q.weight * e.pando_rows
    return read / total if total else None


@procedure("remove_layout", Param("table", "string", required=True),
           Param("delete_sidecar", "boolean", default=True))
def remove_layout(ctx: ProcedureContext, table: str, delete_sidecar: bool) -> Result:
    """Forget the table's layout: remove the pointer properties (and the sidecar file)."""
    from ..storage.paths import delete_sidecar as _delete
    from ..storage.pointer import LAYOUT_PROPERTIES, layout_pointer

    from .pending import clear_pending

    tbl = ctx.table(table)
    pointer = layout_pointer(tbl.properties)
    pending = clear_pending(tbl)
    notes = [f"pending layout {pending} (from optimize_layout) removed too"] if pending else []
    if pointer is None:
        return Result([("layout_id", "string"), ("sidecar_deleted", "boolean")], [(None, False)],
                      notes=notes + ["the table had no layout"])
    tbl = ctx.table(table)
    with tbl.transaction() as tx:
        tx.remove_properties(*[p for p in LAYOUT_PROPERTIES if p in tbl.properties])
    deleted = False
    if delete_sidecar:
        try:
            _delete(tbl.io, tbl.location(), pointer.sidecar)
            deleted = True
        except Exception:
            deleted = False
    if ctx._spark is not None:
        refresh_table(ctx.spark, ctx.spark_name(tbl))
    return Result([("layout_id", "string"), ("sidecar_deleted", "boolean")], [(pointer.layout_id, deleted)], notes=notes)


@procedure("refresh_literal_cuts", Param("table", "string", required=True))
def refresh_literal_cuts(ctx: ProcedureContext, table: str) -> Result:
    """Update the key sets of the layout's literal (join-induced) cuts after dimension changes,
    soundly: keys whose membership would move laid-out fact rows keep it (paper §7)."""
    from ..maintenance.literal_cuts import REFRESH_COLUMNS, refresh_literal_cuts as refresh

    tbl = ctx.table(table)
    r = refresh(ctx.spark, ctx.spark_name(tbl), io_properties=ctx.cfg.pyiceberg_properties(), progress=ctx.progress)
    note = (f"layout {r.previous_layout_id} -> {r.layout_id}" if r.changed else f"layout {r.layout_id} unchanged")
    return Result(REFRESH_COLUMNS, [c.row() for c in r.cuts], notes=[note, f"{r.seconds:.1f}s"])


__all__ = ["ProcedureContext", "REGISTRY", "call", "explain_result"]
