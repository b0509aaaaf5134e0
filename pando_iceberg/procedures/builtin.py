"""The ``pando.system.*`` procedures. Each returns a :class:`Result` (named, typed columns)."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..config import PandoConfig
from ..spark.session import refresh_table
from .parse import ProcedureError, parse_call
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

    def pando_table(self, table, spark: bool = True):
        """The verbs (``pando_iceberg.PandoTable``) on a table ``table()`` loaded; ``spark=False``
        uses the session only if one was started already."""
        from ..table import PandoTable

        return PandoTable(self.catalog, self.spark_name(table), spark=self.spark if spark else self._spark,
                          io_properties=self.cfg.pyiceberg_properties(), progress=self.progress)


@contextmanager
def _verb_errors(procedure_name: str) -> Iterator[None]:
    """A verb's bad-input error (``table.PandoApiError``) as this procedure's ProcedureError."""
    from ..table import PandoApiError

    try:
        yield
    except PandoApiError as e:
        raise ProcedureError(f"{procedure_name}: {e.detail}") from None


@contextmanager
def _guard_errors(procedure_name: str) -> Iterator[None]:
    """A rewrite the per-template guard refused (``TemplateGuardError``) as this procedure's
    ProcedureError: an answer about the inputs (the workload, the bound), not a failure."""
    from ..spark.rewrite import TemplateGuardError

    try:
        yield
    except TemplateGuardError as e:
        raise ProcedureError(f"{procedure_name}: {e}") from None


def call(ctx: ProcedureContext, statement: str) -> Result:
    """Run one ``CALL pando.system.<name>(...)`` statement."""
    parsed = parse_call(statement)
    proc = lookup(parsed)
    args = proc.bind(parsed)
    return proc.run(ctx, **args)


WORKLOAD_PARAMS = (
    Param("workload", "string", doc="SQL text, a .sql file, a directory of .sql files, or a .jsonl/.csv query log"),
    Param("workload_log", "string",
          doc="a query log: a .jsonl/.csv file or an Iceberg table (text, timestamp, weight)"),
    Param("since", "string", doc="query logs: only queries at or after this (ISO-8601 instant or '1 day', '24 hours')"),
    Param("until", "string", doc="query logs: only queries before this (same forms as since)"),
)


def _workload_sources(ctx: ProcedureContext, workload: str | list[str] | None, workload_log: str | None = None,
                      since: str | None = None, until: str | None = None) -> list | None:
    """Sources for ``parse_workload``: SQL texts and files, and (text, weight) pairs of query logs."""
    from ..workload.log import read_query_log
    from ..workload.sources import classify_workload_source

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


def current_sidecar(table, required: bool = True):
    """The sidecar of the pyiceberg ``table``'s current layout (whole-table or per partition); with
    ``required``, a ProcedureError naming what to do (and the pending layout, if any) when it has
    none, else None."""
    from ..storage.pointer import layout_pointer

    pointer = layout_pointer(table.properties)
    if pointer is None:
        if required:
            from ..maintenance.pending import P_PENDING_ID

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
           Param("where", "string", doc="binpack/sort: files that may match; "
                                        "pando: the partitions to lay out (partition source columns only)"),
           *WORKLOAD_PARAMS,
           Param("relearn", "boolean", default=False,
                 doc="pando: learn a new layout even when optimize_layout stored a pending one"),
           Param("force", "boolean", default=False,
                 doc="pando: apply a layout that makes a workload template read more than "
                     "max-template-regression × what it reads now"))
def rewrite_data_files(ctx: ProcedureContext, table: str, strategy: str = "binpack", sort_order: str | None = None,
                       options: dict[str, str] | None = None, where: str | None = None, workload: str | None = None,
                       workload_log: str | None = None, since: str | None = None, until: str | None = None,
                       relearn: bool = False, force: bool = False) -> Result:
    """Rewrite a table's data files: 'pando' applies a learned layout; 'binpack'/'sort' are Iceberg's."""
    strategy = strategy.lower()
    options = options or {}
    tbl = ctx.table(table)
    name = ctx.spark_name(tbl)
    if strategy == "pando":
        return _rewrite_pando(ctx, tbl, name, sort_order, options, where, workload, workload_log, since, until, relearn,
                              force)
    if strategy not in ("binpack", "sort"):
        raise ProcedureError(f"rewrite_data_files: strategy {strategy!r} is not supported; "
                             "accepted: pando, binpack, sort")
    given = [n for n, v in (("workload", workload), ("workload_log", workload_log), ("since", since),
                            ("until", until)) if v is not None] + (["relearn"] if relearn else []) \
        + (["force"] if force else [])
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


def _rewrite_pando(ctx, tbl, name, sort_order, options, where, workload, workload_log, since, until, relearn,
                   force=False) -> Result:
    from ..maintenance.pending import P_PENDING_ID
    from ..spark.incremental import incremental_options, parse_mode
    from ..table import LayoutOptions

    if where is not None and tbl.spec().is_unpartitioned():
        raise ProcedureError(f"rewrite_data_files: argument 'where' with strategy 'pando' selects partitions, but "
                             f"{name} is not partitioned (its layout covers the whole table): omit 'where'")
    if sort_order is not None:
        raise ProcedureError("rewrite_data_files: argument 'sort_order' applies to strategy 'sort' only")
    from ..workload.sources import classify_workload_source

    for item in [] if workload is None else (workload if isinstance(workload, list) else [workload]):
        classify_workload_source(item)  # a workload path that names nothing fails before Spark starts
    mode, options = parse_mode(options)
    if mode == "incremental" and where is not None:
        raise ProcedureError("rewrite_data_files: argument 'where' does not apply to mode 'incremental' (it lays "
                             "out the rows outside the layouts of every partition that has one)")
    reused: dict[str, str] = {}
    with _verb_errors("rewrite_data_files"), _guard_errors("rewrite_data_files"):
        if mode == "incremental":  # lay out only the rows outside the layout, with its stored trees
            r = ctx.pando_table(tbl).optimize.incremental(**incremental_options(options))
        else:
            request = {"workload": workload, "workload_log": workload_log, "since": since, "until": until}
            sources = _workload_sources(ctx, workload, workload_log, since, until)
            # from the recorded workload, the current layout's options; not when a pending layout
            # (optimize_layout's) is to be applied: it is applied only if learned with the options given
            reused = recorded_options(tbl, options) if sources is None and (relearn or P_PENDING_ID not in
                                                                             tbl.properties) else {}
            r = ctx.pando_table(tbl).optimize.rewrite(sources, options=LayoutOptions.from_map({**reused, **options}),
                                                      where=where, relearn=relearn, request=request, force=force)
    notes = [f"options of the current layout reused: {', '.join(f'{k}={v}' for k, v in reused.items())}"] \
        if reused else []
    return Result(REWRITE_COLUMNS, [r.row()],
                  notes=notes + list(r.notes) + [f"{k}: {v:.1f}s" for k, v in r.seconds.items()])


def recorded_options(tbl, given: dict[str, str]) -> dict[str, str]:
    """The options the table's current (whole-table) layout was learned with, for a re-layout
    from its recorded workload: a nightly re-layout learns as the layout it replaces was learned
    (its k, rows per block, sample rate, ...), not with the built-in defaults. Options given now
    win, and so does a layout default stored as a table property (``pando.layout.<option>``)."""
    from ..spark.rewrite import P_OPTIONS

    sidecar = current_sidecar(tbl, required=False)
    try:
        stored = json.loads(sidecar.properties.get(P_OPTIONS, "{}")) if sidecar is not None else {}
    except (AttributeError, ValueError):  # a per-partition sidecar, or an unreadable record: defaults
        return {}
    return {k: str(v) for k, v in stored.items() if k not in given and f"pando.layout.{k}" not in tbl.properties}


@procedure("optimize_layout",
           Param("table", "string", required=True),
           *WORKLOAD_PARAMS,
           Param("options", "map<string,string>", default={}, doc="k, sample-rate, seed, min-block-rows, ..."))
def optimize_layout(ctx: ProcedureContext, table: str, workload: str | None = None, workload_log: str | None = None,
                    since: str | None = None, until: str | None = None,
                    options: dict[str, str] | None = None) -> Result:
    """Learn a layout and store it as pending, without rewriting data; report per workload query
    the files read now and the files the new layout would read. rewrite_data_files(strategy =>
    'pando') applies it later without learning again."""
    from ..table import LayoutOptions

    tbl = ctx.table(table)
    sources = _workload_sources(ctx, workload, workload_log, since, until)
    if not sources:
        raise ProcedureError("optimize_layout: give 'workload' (SQL text, a .sql file, a directory or a query log) "
                             "or 'workload_log' (a .jsonl/.csv file or an Iceberg table)")
    request = {"workload": workload, "workload_log": workload_log, "since": since, "until": until}
    with _verb_errors("optimize_layout"):
        optimize = ctx.pando_table(tbl).optimize
        opts = optimize.resolved_options(options=LayoutOptions.from_map(options or {}))  # the table's pando.layout.*
        p = optimize.layout(sources, options=opts, request=request)
    rows = [(q.query, q.weight, q.files_read_now, q.files_total_now, q.files_read_with_layout,
             q.files_total_with_layout, q.rows_fraction_now, q.rows_fraction_with_layout, q.filter[:200])
            for q in p.queries]
    return Result([("query", "int"), ("weight", "double"), ("files_read_now", "int"), ("files_total_now", "int"),
                   ("files_read_with_layout", "int"), ("files_total_with_layout", "int"),
                   ("rows_fraction_now", "double"), ("rows_fraction_with_layout", "double"), ("filter", "string")],
                  rows,
                  notes=[f"learned k={p.k}, {p.blocks} blocks ({p.files} files of about "
                         f"{opts.min_block_rows} rows; files_read_with_layout counts every file of the chosen blocks, "
                         f"min/max may skip more inside them) from {p.sample_rows} "
                         f"sample rows, {p.candidate_cuts} candidate cuts, {p.queries_used} queries; weighted mean "
                         f"files read per query: {p.mean_files_read_now:.1f} now, {p.mean_files_read_with_layout:.1f} "
                         "with the layout",
                         *[f"template {t.line()}" for t in p.templates],
                         f"stored as pending layout {p.pending_layout_id} (not used by scans until applied); apply it "
                         "with rewrite_data_files(table => ..., strategy => 'pando')"
                         + ("" if p.guard_holds else ", which refuses it unless force => true (the templates above)")])


@procedure("advise", Param("table", "string", required=True),
           *WORKLOAD_PARAMS,
           Param("options", "map<string,string>", default={},
                 doc="as rewrite_data_files' (k: Pando's 1..k, default 4)"),
           Param("sort_orders", "string", doc="more Iceberg sort orders to rank, ';'-separated: 'c; zorder(a, b)'"),
           Param("apply", "boolean", default=False, doc="write the advised layout"),
           Param("max_repay_days", "double",
                 doc="apply only when the layout repays its rewrite within this many days of the logged workload"))
def advise(ctx: ProcedureContext, table: str, workload: str | None = None, workload_log: str | None = None,
           since: str | None = None, until: str | None = None, options: dict[str, str] | None = None,
           sort_orders: str | None = None, apply: bool = False, max_repay_days: float | None = None) -> Result:
    """Rank candidate layouts (as is, Iceberg's sort and z-order, Pando with 1..k trees) by
    predicted bytes per held-out query, with each one's rewrite cost and when it repays it."""
    from ..maintenance.advisor import ADVICE_COLUMNS
    from ..table import LayoutOptions

    tbl = ctx.table(table)
    sources = _workload_sources(ctx, workload, workload_log, since, until)
    if not sources:
        raise ProcedureError("advise: give 'workload' (SQL text, a .sql file, a directory or a query log) "
                             "or 'workload_log' (a .jsonl/.csv file or an Iceberg table)")
    with _verb_errors("advise"), _guard_errors("advise"):
        orders = [o.strip() for o in (sort_orders or "").split(";") if o.strip()]
        days = None
        if max_repay_days is not None:
            if since is None:
                raise ProcedureError("advise: 'max_repay_days' counts days of a logged workload: give 'workload_log' "
                                     "(or a .jsonl/.csv log as 'workload') with 'since' (and 'until'), whose window "
                                     "says how many queries a day the table gets")
            from ..workload.log import parse_instant

            start = parse_instant(since)
            end = parse_instant(until, what="until") if until is not None else dt.datetime.now(dt.UTC)
            days = max((end - start).total_seconds() / 86400, 1e-9)
        a = ctx.pando_table(tbl).optimize.advise(sources, options=LayoutOptions.from_map(options or {}),
                                                 sort_orders=orders, apply=apply, max_repay_days=max_repay_days,
                                                 workload_days=days)
    best = a.advised
    notes = [f"{a.table}: {a.table_rows:,} rows, {a.table_mb:.1f} MB; {a.validation_draws} held-out draws of the "
             f"workload's templates planned on {a.sample_rows:,} sample rows; advice took {a.seconds:.1f}s",
             f"advised: {best.name}" + ("" if best.strategy == "none" else
                                        f" ({best.mb_per_query:.2f} MB per query against "
                                        f"{next(c for c, _ in a.ranked if c.strategy == 'none').mb_per_query:.2f} "
                                        "as is)"),
             f"applied: {a.applied}" if a.applied else f"not applied: {a.not_applied}" if a.not_applied else
             ("not applied (apply => true writes it)" if best.strategy != "none" else "nothing to apply")]
    if days is not None and a.workload_queries:
        notes.append(f"the logged workload: {a.workload_queries:g} queries on the table in {days:.2f} days")
    return Result(ADVICE_COLUMNS, a.rows(), notes=notes)


@procedure("advise_tables", Param("tables", "string", required=True, doc="the tables to rank, ','-separated"),
           *WORKLOAD_PARAMS,
           Param("options", "map<string,string>", default={},
                 doc="as rewrite_data_files' (k: Pando's 1..k, default 4)"))
def advise_tables(ctx: ProcedureContext, tables: str, workload: str | None = None, workload_log: str | None = None,
                  since: str | None = None, until: str | None = None,
                  options: dict[str, str] | None = None) -> Result:
    """Which table first: the tables ranked by the MB their workload queries save per second of
    the advised rewrite (``advise`` on each)."""
    from ..maintenance.advisor import TABLE_RANK_COLUMNS, table_rank_rows
    from ..table import LayoutOptions

    names = list(dict.fromkeys(t.strip() for t in tables.split(",") if t.strip()))
    if not names:
        raise ProcedureError("advise_tables: 'tables' names no table; give them ','-separated: 'db.a, db.b'")
    loaded = [ctx.table(t) for t in names]  # an unknown table is said before anything is learned
    sources = _workload_sources(ctx, workload, workload_log, since, until)
    if not sources:
        raise ProcedureError("advise_tables: give 'workload' (SQL text, a .sql file, a directory or a query log) "
                             "or 'workload_log' (a .jsonl/.csv file or an Iceberg table)")
    advices = []
    with _verb_errors("advise_tables"), _guard_errors("advise_tables"):
        for tbl in loaded:
            advices.append(ctx.pando_table(tbl).optimize.advise(sources, options=LayoutOptions.from_map(options or {})))
    notes = [f"{a.table}: advised {a.advised.name}; advice took {a.seconds:.1f}s" for a in advices]
    return Result(TABLE_RANK_COLUMNS, table_rank_rows(advices), notes=notes)


@procedure("explain_scan",
           Param("table", "string", doc="table to scan (with filter)"),
           Param("filter", "string", doc="a SQL predicate on the table"),
           Param("query", "string", doc="a whole SQL query: every base table is planned"))
def explain_scan(ctx: ProcedureContext, table: str | None, filter: str | None, query: str | None) -> Result:
    """Files/bytes/rows a scan reads with and without Pando, per tree, with any fallback reason."""
    from ..datascan import scan

    if query is None and table is None:
        raise ProcedureError("explain_scan: give 'table' (and optionally 'filter') or 'query'")
    if query is not None:
        from ..spark.pruned import plan_query

        qp = plan_query(ctx.spark, ctx.catalog, query)
        return explain_result(qp.explains, {n: [f.note() for f in qp.row_filters.get(n, [])]
                                            + qp.row_filter_notes.get(n, []) for n in qp.explains})
    assert table is not None  # checked above
    explain = scan(ctx.table(table), row_filter=filter if filter is not None else "TRUE").explain()
    return explain_result({table: explain})


def explain_result(explains: dict[str, Any], row_filters: dict[str, list[str]] | None = None) -> Result:
    """One row per table and stage; ``row_filters``: per table, the row filters Spark applies
    (and the joins left without one, with why)."""
    rows = []
    for name, e in explains.items():
        rows.append((name, "all live files", e.total_files, e.total_bytes, e.total_rows, ""))
        rows += [(name, "row filter", None, None, None, note) for note in (row_filters or {}).get(name, [])]
        rows.append((name, "iceberg (partitions, min/max)", e.iceberg_files, e.iceberg_bytes, e.iceberg_rows, ""))
        for t in e.trees:
            rows.append((name, f"pando tree {t.tree}", None, None, None,
                         f"{t.leaves_reached} leaves reached → {t.blocks} blocks"))
        for j in getattr(e, "joins", []):  # join pruning: dimension key set vs each file's FK bounds
            rows.append((name, "join pruning", None, None, None,
                         f"{j['join']}: {j['keys']} keys ({j['source']}), {j['files_pruned']} of "
                         f"{j['files_before']} files removed"))
        limit = getattr(e, "limit", None)
        if limit is not None:  # LIMIT / top-k pruning (planner/limit.py)
            rows.append((name, "limit" if e.order_by is None else "top-k", e.fully_matching_files, None, None,
                         limit_detail(e)))
        detail = (f"{e.blocks_chosen}/{e.blocks_total} blocks; {e.files_outside_layout} files outside the layout"
                  if e.used_layout else f"fallback: {e.fallback_reason}")
        if e.notes:
            detail += "; " + "; ".join(e.notes)
        rows.append((name, "pando (∩ trees)", e.pando_files, e.pando_bytes, e.pando_rows, detail))
    return Result([("table", "string"), ("stage", "string"), ("files", "int"), ("bytes", "bigint"),
                   ("rows", "bigint"), ("detail", "string")], rows)


def limit_detail(e: Any) -> str:
    """The explain_scan detail of a scan under a LIMIT: what it needs, the fully matching files
    (``files``: those proven; how many only the trees prove), the top-k boundary, files removed."""
    head = f"LIMIT {e.limit}" + ("" if e.order_by is None else f" ORDER BY {e.order_by}")
    proven = f"{e.fully_matching_files} fully matching files ({e.fully_matching_by_trees} proven by the trees alone)"
    if e.order_by is not None:
        proven += (f"; top-k boundary {e.topk_boundary}" if e.topk_boundary is not None else
                   f"; no top-k boundary (the fully matching files do not prove {e.limit} rows reach a value)")
    return f"{head}: {proven}; {e.limit_files_pruned} files removed"


@procedure("describe_layout", Param("table", "string", required=True))
def describe_layout(ctx: ProcedureContext, table: str) -> Result:
    """The layout's trees with their cuts, leaves → blocks, block sizes and files, base snapshot."""
    tbl = ctx.table(table)
    with _verb_errors("describe_layout"):
        view = ctx.pando_table(tbl, spark=False).layout
    if view is None:
        current_sidecar(tbl)  # raises, naming the pending layout if there is one
        raise ProcedureError(f"table {table} has no Pando layout")
    if view.k is None:  # one layout per partition
        return _describe_partitioned(view)
    rows: list[tuple] = [("layout", None, None, None, f"id {view.layout_id}; k={view.k}; {len(view.blocks)} blocks; "
                                                      f"base snapshot {view.base_snapshot_id}", None)]
    for tree in view.trees:
        for node in tree.nodes:
            text = f"cut: {node.cut}" if node.cut is not None else f"leaf → blocks {list(node.blocks)}"
            rows.append(("tree", tree.tree, node.node, node.depth, text, None))
    for b in view.blocks:
        rows.append(("block", None, b.block, None, f"{len(b.files)} file(s), {b.bytes:,} bytes", int(b.rows)))
    rows += _learning_rows(dict(view.properties))
    if view.pending_layout_id is not None:
        rows.append(("pending", None, None, None, f"layout {view.pending_layout_id} learned by optimize_layout on "
                     f"snapshot {view.pending_base_snapshot_id}, not applied yet", None))
    return Result([("section", "string"), ("tree", "int"), ("node", "int"), ("depth", "int"),
                   ("description", "string"), ("rows", "bigint")], rows)


def _learning_rows(props: dict[str, str]) -> list[tuple]:
    """describe_layout rows for what the layout learned beyond the paper: how many trees were
    kept, the workload's templates with their parameters and synthetic draws, and the in-block
    order of the files."""
    from ..spark.rewrite import P_IN_BLOCK, P_K_SELECTION

    rows: list[tuple] = []
    chosen = json.loads(props.get(P_K_SELECTION, "null"))
    if chosen is not None:
        costs = ", ".join(f"k={k} {v:.3f}" for k, v in chosen.get("validation_rows_fraction", {}).items())
        rows.append(("trees kept", None, None, None, f"k={chosen['kept_k']} of the layouts learned ({costs}: rows "
                     "of the sample that independent draws of the templates read, files' zone maps included)", None))
    for t in json.loads(props.get("pando.templates", "[]")):
        params = ", ".join(f"{c} ({role})" for c, role in t.get("parameters", {}).items()) or "none (no literals)"
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


def _describe_partitioned(view) -> Result:
    rows: list[tuple] = [("layout", None, None, None, f"id {view.layout_id}; one layout per partition "
                          f"({len(view.partitions)}); base snapshot {view.base_snapshot_id}", None)]
    for p in view.partitions:
        rows.append(("partition", None, None, None,
                     f"{p.partition}: layout {p.layout_id}; k={p.k}; {p.blocks} blocks; {p.files} file(s)", p.rows))
    return Result([("section", "string"), ("tree", "int"), ("node", "int"), ("depth", "int"),
                   ("description", "string"), ("rows", "bigint")], rows)


def _partitioned_health(ctx, table: str, health, relayout: bool, options: dict[str, str]) -> Result:
    """layout_health of a table with one layout per partition: one row per partition."""
    from ..maintenance.partition_health import COLUMNS, relayout_call

    out = [h.row() for h in health.partitions]
    if health.stale_cuts:  # before the recommendation, which stays the last row "*"
        from ..maintenance.cut_staleness import refresh_call

        out += [(c.partition, "stale_cut", None, None, None, None, None, None, c.describe()) for c in health.stale_cuts]
        out.append(("*", "refresh", None, None, None, None, None, None, refresh_call(ctx.spark_name(ctx.table(table)))))
    degraded = [h for h in health.partitions if h.reasons]
    if degraded:
        call_sql = relayout_call(ctx.spark_name(ctx.table(table)), health.partitions_where)
        out.append(("*", "recommendation", None, None, None, None, None, None,
                    f"lay out {len(degraded)} degraded or new partition(s): {call_sql}"))
    else:
        out.append(("*", "ok", None, None, None, None, None, None, "every partition layout is healthy"))
    if relayout and degraded:
        from ..spark.rewrite import PandoRewriteError

        try:
            r = rewrite_data_files(ctx, table, "pando", options=options, where=health.partitions_where, relearn=True)
        except PandoRewriteError as e:
            # Soak finding: every live file written under an older partition spec made the
            # nightly runbook fail here; the health report says what to run instead.
            if "has no live data file under its current partition spec" not in str(e):
                raise
            out.append(("*", "action", 0, None, None, None, None, None, f"not re-laid out: {e}"))
            return Result(COLUMNS, out)
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
    with _verb_errors("layout_health"):
        h = ctx.pando_table(ctx.table(table), spark=False).health(max_rows_outside, max_efficiency_loss)
    if h.status == "broken":
        return Result([("metric", "string"), ("value", "string")],
                      [("status", "broken"), ("reason", h.reasons[0]),
                       ("recommendation", "re-layout (rewrite_data_files strategy 'pando')")])
    if h.status == "no layout":
        return Result([("metric", "string"), ("value", "string")],
                      [("status", "no layout"),
                       ("recommendation", "create one with rewrite_data_files(strategy => 'pando')")])
    if h.partitions:  # one layout per partition
        return _partitioned_health(ctx, table, h, relayout, options)
    at_layout = h.workload_rows_fraction_at_layout
    rows = [("status", h.status), ("layout_id", h.layout_id), ("layout_snapshot_id", h.layout_snapshot_id),
            ("current_snapshot_id", str(h.current_snapshot_id) if h.current_snapshot_id is not None else None),
            ("layout_files_live", str(h.layout_files_live)), ("files_outside_layout", str(h.files_outside_layout)),
            ("rows_outside_layout", str(h.rows_outside_layout)), ("rows_outside_share", f"{h.rows_outside_share:.4f}"),
            ("workload_rows_fraction_at_layout", f"{at_layout:.4f}" if at_layout is not None else "nan"),
            ("workload_rows_fraction_now",
             f"{h.workload_rows_fraction_now:.4f}" if h.workload_rows_fraction_now is not None else "n/a"),
            ("recommendation", h.recommendation)]
    if h.stale_cuts:  # pruning stays exact; a refresh makes the sets selective again (maintenance/cut_staleness.py)
        from ..maintenance.cut_staleness import refresh_call

        rows += [("stale_cut", c.describe()) for c in h.stale_cuts]
        rows.append(("refresh", refresh_call(ctx.spark_name(ctx.table(table)))))
    if relayout and h.reasons:
        r = rewrite_data_files(ctx, table, "pando", options=options, relearn=True)
        rows.append(("action", f"re-laid out: layout {r.rows[0][4]}, {r.rows[0][1]} files written, "
                               f"snapshot {r.rows[0][6]}"))
    elif relayout:
        rows.append(("action", "none (healthy)"))
    return Result([("metric", "string"), ("value", "string")], rows)


@procedure("clustering_information", Param("table", "string", required=True),
           Param("columns", "string", doc="comma-separated columns (default: every column with bounds)"),
           Param("snapshot_id", "int", doc="the snapshot whose files are measured (default: the current one)"))
def clustering_information(ctx: ProcedureContext, table: str, columns: str | None, snapshot_id: int | None) -> Result:
    """How clustered the table's data files are on each column: overlaps and depths of their
    min/max ranges (``maintenance/clustering.py``), from the manifests alone."""
    from ..maintenance.clustering import CLUSTERING_COLUMNS, ClusteringError
    from ..maintenance.clustering import clustering_information as measure

    tbl = ctx.table(table)
    names = None if columns is None else [c for c in columns.split(",") if c.strip()]
    if names is not None and not names:
        raise ProcedureError(f"clustering_information: 'columns' names no column ({columns!r}); give "
                             "comma-separated column names, or leave it out for every column with bounds")
    try:
        measured = measure(tbl, names, snapshot_id)
    except ClusteringError as e:
        raise ProcedureError(f"clustering_information: {e}") from None
    return Result(CLUSTERING_COLUMNS, [c.row() for c in measured])


@procedure("remove_layout", Param("table", "string", required=True),
           Param("delete_sidecar", "boolean", default=True))
def remove_layout(ctx: ProcedureContext, table: str, delete_sidecar: bool) -> Result:
    """Forget the table's layout: remove the pointer properties (and the sidecar file)."""
    with _verb_errors("remove_layout"):
        r = ctx.pando_table(ctx.table(table), spark=False).remove_layout(delete_sidecar=delete_sidecar)
    notes = [f"pending layout {r.pending_removed} (from optimize_layout) removed too"] if r.pending_removed else []
    if r.layout_id is None:
        notes.append("the table had no layout")
    return Result([("layout_id", "string"), ("sidecar_deleted", "boolean")], [(r.layout_id, r.sidecar_deleted)],
                  notes=notes)


@procedure("refresh_literal_cuts", Param("table", "string", required=True))
def refresh_literal_cuts(ctx: ProcedureContext, table: str) -> Result:
    """Update the key sets of the layout's literal (join-induced) cuts after dimension changes,
    soundly: keys whose membership would move laid-out fact rows keep it (paper §7)."""
    from ..maintenance.literal_cuts import REFRESH_COLUMNS

    with _verb_errors("refresh_literal_cuts"):
        r = ctx.pando_table(ctx.table(table)).optimize.refresh_literal_cuts()
    note = (f"layout {r.previous_layout_id} -> {r.layout_id}" if r.changed else f"layout {r.layout_id} unchanged")
    return Result(REFRESH_COLUMNS, [c.row() for c in r.cuts], notes=[note, f"{r.seconds:.1f}s"])


__all__ = ["REGISTRY", "ProcedureContext", "call", "explain_result"]
