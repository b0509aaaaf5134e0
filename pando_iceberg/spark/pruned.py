"""Pruned reads in Spark: a DataFrame over exactly the files the Pando planner chose (Iceberg's
scan-task-set path: deletes and schema evolution stay Iceberg's business), and SQL execution
in which every base table of the query is replaced by its pruned scan.

For a query with FK→PK joins, each table's filter carries the join filters the workload parser
derives (``fk IN (SELECT pk FROM dim WHERE p)``; FK→PK from declared identifier fields, else from
the dimension column's uniqueness on the data). The trees decide a literal cut by
comparing the query's dimension predicate with the cut's own while the dimension holds the rows
the cut's keys were read from (§5, no data read); otherwise, and for join pruning of every file
on small dimensions, key sets are read before planning (:func:`with_join_keys`) — through
pyiceberg and the process-wide cache for dimensions up to ``joinKeys.maxDimensionRows``
rows (``pando_iceberg.settings``), by Spark above — and compared key set against key set, exact whatever happened to the
dimension since the layout was made (§7).

One path for every query: :func:`pruned_sql` (``pando_iceberg.spark.sql``) plans each base table,
stages its chosen tasks and returns a lazy :class:`PrunedDataFrame`; :func:`run_sql` (and with it
``pando sql`` and the runbooks) collects one of those. Spark analyses the query as written on
a JVM thread while Python plans (:data:`ANALYSE_AHEAD`); the analysed plan's relations of the
staged tables then read their task sets, and row filters join them as semi-joins
(``iceberg_jvm.swapped_plan``). Where that cannot be done, Spark analyses the query rewritten
over temporary views of the sets (:func:`replace_tables`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from sqlglot import exp, parse_one

from .. import settings
from ..catalog import load_table, load_tables
from ..expr import semantics
from ..planner.caches import SPARK_SCHEMAS
from . import iceberg_jvm as jv
from .join_order import RepeatedJoins
from .rewrite import SparkKeyProvider, arrow_schema_of, collect_arrow
from .session import drop_shuffles

log = logging.getLogger("pando_iceberg.spark")


@dataclass
class PrunedQuery:
    sql: str
    rows: list[Any]
    columns: list[str]
    explains: dict[str, Any] = field(default_factory=dict)  # table → ExplainRecord
    scan_metrics: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # PrunedScans.notes(): per table, files read and how planned

    @property
    def files_read(self) -> int:
        return sum(e.pando_files for e in self.explains.values())

    @property
    def files_iceberg(self) -> int:
        return sum(e.iceberg_files for e in self.explains.values())


@contextlib.contextmanager
def pruned_table(spark, catalog, name: str, filter: Any = None, *, use_layout: bool = True,
                 schemas: dict[str, pa.Schema] | None = None) -> Iterator[tuple[Any, Any]]:
    """``with pruned_table(spark, catalog, 'db.t', "x < 5") as (df, plan):`` — ``df`` reads only
    the planned files of the planned snapshot and applies the filter to rows."""
    from ..planner import plan_scan

    table = catalog.load_table(name)
    with settings.using(settings.of_spark(spark).read_all()):
        with semantics.using(semantics.from_spark(spark)):
            plan = plan_scan(table, filter, use_layout=use_layout, schemas=schemas)
        with staged_plan(spark, table, name, plan) as df:
            if plan.filter.joins:  # IN (SELECT ...) parts need SQL, not a DataFrame expression
                view = f"__pando_pruned_{abs(hash(name))}"
                jv.temp_view(spark, df, view)
                try:
                    yield spark.sql(f"SELECT * FROM {view} WHERE {plan.filter.to_sql()}"), plan
                finally:
                    spark.catalog.dropTempView(view)
                return
            if not plan.filter.is_true_expr():
                df = df.where(plan.filter.expr.sql(dialect="spark"))
            yield df, plan


def staged_plan(spark, table, name: str, plan, view: str | None = None, view_later: bool = False):
    """``staged_scan`` of a ScanPlan's files (a context manager): the chosen files' tasks from the
    JVM's task cache when the snapshot fits it (setting ``taskCache.maxFiles``; with ``view``,
    the Java table held for ``name`` checked, the tasks looked up and staged in one JVM call:
    ``iceberg_jvm.staged_cached_view``), else the JVM
    plans with the filter pyiceberg planned with (Iceberg's own pruning, once) and keeps the
    chosen files; a filter the JVM cannot take is left out (every chosen file is still found).
    ``view``, ``view_later``: see ``iceberg_jvm.staged_scan`` (the scan as a temporary view, made
    now or, with ``view_later``, when the caller asks: the task set's id yielded)."""
    from ..expr.iceberg import to_pyiceberg
    from .jvm_filter import java_expression

    location = getattr(table, "metadata_location", None)
    key = f"{table.metadata.table_uuid}@{plan.snapshot_id}" if in_task_cache(plan) else None  # the JVM's task cache
    if key is not None and view is not None and location is not None:
        held = jv.held_table(spark, name)  # checked, looked up and staged in one JVM call
        staged = None if held is None else jv.staged_cached_view(spark, held, location, name, plan.snapshot_id,
                                                                 plan.paths, key, None if view_later else view)
        if staged is not None:
            return staged
    # the Java table handed out last is reused while it was read from the metadata file planned with
    jtable = jv.load_table(spark, name, metadata_location=location)
    if key is not None:
        return jv.staged_scan(spark, jtable, name, plan.snapshot_id, plan.paths, cache_key=key, view=view,
                              view_later=view_later)
    row_filter = None
    if plan.filter is not None and plan.snapshot_id is not None:
        try:
            row_filter = java_expression(spark._jvm, to_pyiceberg(plan.filter, table.schema()), table.schema(),
                                         jtable.schema())
        except Exception as e:  # UnsupportedFilter, or the JVM refused it: the JVM plans without it
            log.debug("pando: %s: staging without a pushed filter (%s: %s)", name, type(e).__name__, e)
            row_filter = None
    return jv.staged_scan(spark, jtable, name, plan.snapshot_id, plan.paths, row_filter=row_filter, view=view,
                          view_later=view_later)


def with_join_keys(spark, table, tf, schemas: dict[str, pa.Schema], *, row_limit: int | None = None,
                   join_pruning_rows: int | None = None):
    """The filter with key sets on the join filters that need one, read before planning (§5:
    a key set only where predicates cannot decide):

    - joins meeting a literal cut of the table's layout that predicates cannot decide
      (``planner.scan.keys_for_layout``), whatever the dimension's size;
    - joins whose chain has at most ``join_pruning_rows`` rows (default
      setting ``joinPruning.maxDimensionRows``), for join pruning of every file.

    Through pyiceberg and the process-wide cache when the chain has at most ``row_limit`` rows
    (default setting ``joinKeys.maxDimensionRows``), else one Spark job. The other joins keep
    none: the trees compare predicates, and join pruning is not tried (explain says so)."""
    from ..planner.keysets import chain_within, with_key_sets
    from ..planner.scan import keys_for_layout

    if not tf.joins:
        return tf
    catalog = getattr(table, "catalog", None)
    if catalog is None:
        return tf
    limit = settings.value("joinPruning.maxDimensionRows") if join_pruning_rows is None else join_pruning_rows
    provider = SparkKeyProvider(spark, schemas)
    try:
        wanted = {id(j) for j in keys_for_layout(table, tf)}
        wanted |= {id(j) for j in tf.joins if id(j) not in wanted and chain_within(catalog, j, limit)}
        keyed, _ = with_key_sets(catalog, tf, lambda j: id(j) in wanted, row_limit=row_limit,
                                 fallback=lambda j: provider(j.dim_table, j.dim_pk, j.dim_filter))
    except Exception:
        return tf  # the planner reads or skips them itself, and says why
    return keyed


@dataclass
class QueryPlan:
    """Per-table pruned plans of one SQL query, and the query rewritten onto them."""

    sql: str
    tree: exp.Expression
    plans: dict[str, Any]  # table → ScanPlan
    tables: dict[str, Any] = field(default_factory=dict)  # table → the pyiceberg Table planned
    # seconds: parse (SQL, schemas, workload parser), join_keys (Spark key sets), tables (plan_scan),
    # row_keys (the key sets of row filters not read before)
    timings: dict[str, float] = field(default_factory=dict)
    row_filters: dict[str, list[Any]] = field(default_factory=dict)  # table → planner.row_filters.RowFilter
    row_filter_notes: dict[str, list[str]] = field(default_factory=dict)  # table → joins left unfiltered, why
    unplanned: str | None = None  # why Spark reads the whole query as written (no table planned)
    skipped: dict[str, str] = field(default_factory=dict)  # table → why Spark's own plan reads it unpruned
    catalog_name: str | None = None  # the catalog a three-part name must start with to be planned
    ansi: bool = False  # the session's spark.sql.ansi.enabled when it was planned

    @property
    def explains(self) -> dict[str, Any]:
        return {name: p.explain for name, p in self.plans.items()}


class PlanCatalog:
    """One query's view of the catalog: each table is loaded once per planning (the query, its
    dimensions, the layouts' cut chains, the uniqueness checks all see the same metadata; parsed
    metadata reused across queries, ``catalog.load_table``), the rest is the catalog's. The
    tables it loads point back to it (``table.catalog``)."""

    def __init__(self, catalog: Any) -> None:  # a pyiceberg Catalog
        self.catalog = catalog
        self._tables: dict[str, Any] = {}

    def load_table(self, name):
        key = ".".join(name) if isinstance(name, tuple) else str(name)
        if key not in self._tables:
            self._keep(key, load_table(self.catalog, name))
        return self._tables[key]

    def preload(self, names: list[str]) -> None:
        """Load the tables among ``names`` whose metadata was parsed before in one catalog round
        trip (``catalog.load_tables``); the rest load one by one when asked."""
        for key, table in load_tables(self.catalog, [n for n in names if n not in self._tables]).items():
            self._keep(key, table)

    def _keep(self, key: str, table) -> None:
        table.catalog = self
        self._tables[key] = table

    def __getattr__(self, attr):
        return getattr(self.catalog, attr)


def spark_schema(spark, name: str, table=None) -> pa.Schema:
    """Spark's Arrow view of ``name``'s schema (the types the workload parser types literals
    with), cached per (uuid, Iceberg schema id) when pyiceberg loaded ``table``: an Iceberg
    table's Spark schema is a function of its Iceberg schema."""
    if table is None:
        return arrow_schema_of(spark.table(name))
    key = (str(table.metadata.table_uuid), table.metadata.current_schema_id)
    hit = SPARK_SCHEMAS.get(key)
    if hit is None:
        hit = arrow_schema_of(spark.table(name))
        if [f.lower() for f in hit.names] == [f.name.lower() for f in table.schema().fields]:
            SPARK_SCHEMAS.put(key, hit)  # not when Spark's cached table still shows an older schema
    return hit


def temporary_views(spark, names: list[str]) -> set[str]:
    """The names among ``names`` (unqualified) that are temporary views of the session."""
    if not names:
        return set()
    catalog = spark._jsparkSession.sessionState().catalog()
    return {n for n in names if catalog.getTempView(n).isDefined()}


def _phase_timings(parse: float) -> dict[str, float]:
    """QueryPlan.timings with the parse's seconds, the other phases still to add up."""
    return {"parse": parse, "join_keys": 0.0, "tables": 0.0, "row_keys": 0.0}


def parse_sql(sql: str) -> exp.Expression:
    """``sql`` parsed by sqlglot in Spark's dialect."""
    tree = parse_one(sql, read="spark")
    assert isinstance(tree, exp.Expression)  # sqlglot types parse_one as its node base, exp.Expr
    return tree


@semantics.of_session  # values folded and evaluated as this session's settings say
@settings.of_session  # and the session's spark.sql.pando.* settings, read once per planning
def plan_query(spark, catalog, sql: str, *, use_layout: bool = True, tree: exp.Expression | None = None) -> QueryPlan:
    """Plan every Iceberg base table of ``sql`` (parsed: ``tree``, when the caller parsed it) with
    its own filter (join filters included)."""
    from ..planner import plan_scan
    from ..workload import PandoWorkloadError, parse_query
    from ..workload.limits import limit_shape

    t0 = time.perf_counter()
    catalog = PlanCatalog(catalog)
    tree = parse_sql(sql) if tree is None else tree
    if not isinstance(tree, exp.Query):  # a command is refused, never run as written
        raise PandoWorkloadError(f"not a query: {tree.sql(dialect='spark')[:200]}")
    if tree.find(exp.Version, exp.TableSample) is not None:
        # A table read as of another snapshot, or sampled: its rows are not the current
        # snapshot's, or not all of them before the query's filters (a pruned scan would change
        # which rows a TABLESAMPLE keeps). Spark reads the query as written.
        return QueryPlan(sql, tree, {}, timings=_phase_timings(time.perf_counter() - t0),
                         unplanned="the query reads a table AS OF a version or time, or samples one (TABLESAMPLE): "
                                   "Spark reads it as written, unpruned")
    catalog_name = getattr(catalog.catalog, "name", None)
    # A name is planned by its last two parts when it has two, or three starting with this
    # catalog's name; others (``db.t.snapshot_id_<id>``, ``db.t.branch_b``, ``db.t.files``, another
    # catalog's table) are read by Spark's own plan, under the name as written.
    written: dict[str, str] = {}
    for t in _base_tables(tree):
        written.setdefault(_qualified(t) if _ours(t, catalog_name) else _written(t), _written(t))
    names = sorted(written)
    # Asked only when a name is not qualified: Spark reads such a name as a temporary view when
    # one has it (even if a table of the current namespace has it too), else in that namespace.
    unqualified = [n for n in names if "." not in n]
    current = spark.catalog.currentDatabase() if unqualified else None
    temporary = temporary_views(spark, unqualified)
    # Only the query's own tables: their pyiceberg tables (reused to plan them) and Spark's view of
    # their schemas (the types the parser types literals with); a name pyiceberg does not know
    # (a view, a snapshot or branch name) is left to Spark, and a name Spark does not know either
    # fails with Spark's own error ("... cannot be found").
    tables: dict[str, Any] = {}
    schemas: dict[str, pa.Schema] = {}
    skipped: dict[str, str] = {}
    qualified = {n: n if "." in n or not current or n in temporary else f"{current}.{n}" for n in names}  # '': none
    ours = [fq for n, fq in qualified.items() if n not in temporary and fq.count(".") == 1]
    catalog.preload(ours)
    for n, fq in qualified.items():
        if n in temporary:
            skipped[fq] = "a temporary view: read by Spark's own plan"
        elif fq not in ours:
            skipped[fq] = "not a table of the catalog Pando plans (a snapshot, branch or metadata table, or " \
                          "another catalog's): read by Spark's own plan"
        else:
            try:
                tables[fq] = catalog.load_table(fq)
            except Exception as e:  # a view, or a table pyiceberg cannot load: Spark reads it unpruned
                log.info("pando: %s is not planned by Pando (%s: %s)", fq, type(e).__name__, e)
                skipped[fq] = f"not loaded by Pando ({type(e).__name__}: {e}): read by Spark's own plan"
        try:
            schemas[fq] = spark_schema(spark, fq if fq in tables else written[n], tables.get(fq))
        except Exception as e:  # Spark cannot read it either, or not under this name: Spark's own answer
            return QueryPlan(sql, tree, {}, timings=_phase_timings(time.perf_counter() - t0), catalog_name=catalog_name,
                             unplanned=f"the columns of {written[n]} are not known to Pando ({type(e).__name__}): "
                                       "Spark reads the query as written, unpruned")
    pks = {n: [t.schema().find_column_name(i) for i in t.schema().identifier_field_ids] for n, t in tables.items()}
    from ..planner.keysets import dimension_rows
    from ..planner.row_filters import row_filters
    from ..planner.uniqueness import uniqueness_oracle

    oracle = uniqueness_oracle(catalog, fallback=SparkKeyProvider(spark, schemas).is_unique)

    def unique(name: str, column: str) -> bool:
        """Only a table Pando planned is a dimension of a join filter (its key set read from the
        same snapshot); a check that fails is "not unique"."""
        if name not in tables:
            return False
        try:
            return oracle(name, column)
        except Exception as e:
            log.info("pando: uniqueness of %s.%s not known (%s: %s)", name, column, type(e).__name__, e)
            return False

    # A LIMIT (ORDER BY ... LIMIT) over the scan of one table (workload/limits.py) prunes it when
    # the table's filter is the query's whole WHERE: no predicate of it left out as unsupported.
    shape = limit_shape(tree)
    limit, order = shape if shape is not None else (None, None)
    unsupported: list[Any] = []
    try:
        query = parse_query(tree, schemas, primary_keys=pks, unique=unique, sql=sql,
                            unsupported=unsupported if limit is not None else None)
    except Exception as e:  # a query Pando cannot read: Spark's own answer, unpruned
        log.warning("pando: the query is read by Spark as written (%s: %s)", type(e).__name__, e)
        return QueryPlan(sql, tree, {}, timings=_phase_timings(time.perf_counter() - t0), catalog_name=catalog_name,
                         unplanned=f"Pando cannot read the query ({type(e).__name__}: {e}): Spark reads it as "
                                   "written, unpruned")
    timings = _phase_timings(time.perf_counter() - t0)
    if unsupported or len(query.filters) != 1:
        limit = None
    plans = {}
    filters: dict[str, list[Any]] = {}
    filter_notes: dict[str, list[str]] = {}
    reader = SparkKeyProvider(spark, schemas).at_most
    repeated = RepeatedJoins(spark, tree, schemas, lambda n: dimension_rows(catalog.load_table(n)))
    for name in sorted(query.filters):
        if name not in tables:
            continue  # a view or a table pyiceberg cannot load: Spark reads it as it is
        table = tables[name]
        t1 = t2 = t3 = time.perf_counter()
        try:
            tf = with_join_keys(spark, table, query.filters[name], schemas) if use_layout else query.filters[name]
            t2 = time.perf_counter()
            plan = plan_scan(table, tf, use_layout=use_layout, schemas=schemas,
                             limit=limit if use_layout else None, order=order)
            t3 = time.perf_counter()
            found, notes = (row_filters(catalog, tf, dimension_rows(table), reader=reader,
                                        repeats=functools.partial(repeated.why, name))
                            if use_layout and tf.joins else ([], []))
        except Exception as e:  # never a failure Spark's own scan of the table does not have
            log.warning("pando: %s is read by Spark's own plan (%s: %s)", name, type(e).__name__, e)
            skipped[name] = f"not planned ({type(e).__name__}: {e}): read by Spark's own plan"
            continue
        plans[name] = plan
        if found:
            filters[name] = found
        if notes:
            filter_notes[name] = notes
        timings["join_keys"] += t2 - t1
        timings["tables"] += t3 - t2
        timings["row_keys"] += time.perf_counter() - t3
    return QueryPlan(sql, tree, plans, {n: tables[n] for n in plans}, timings, filters, filter_notes,
                     skipped=skipped, catalog_name=catalog_name, ansi=semantics.current().ansi)


class PrunedScans:
    """What a pruned query holds: its per-table plans (``explains``: table → ExplainRecord, the
    pruning notes) and the Iceberg scan-task sets its DataFrame reads.

    Lifetime: the staged task sets live in the JVM until :meth:`close` (or the end of a ``with``
    block on the :class:`PrunedDataFrame`); every action on the DataFrame, and on DataFrames
    derived from it, must run before that. The temporary views used to analyse the SQL are
    dropped before :func:`pruned_sql` returns. Not closing leaks the task lists (JVM memory)
    until the Spark session stops."""

    def __init__(self, plan: QueryPlan, stack: contextlib.ExitStack, seconds: float,
                 timings: dict[str, float] | None = None):
        self.plan = plan
        self.sql = plan.sql
        self.planning_seconds = seconds  # parse + per-table plans + staging + analysis, wall clock
        self.timings = timings or {}
        self._stack = stack
        self.closed = False

    @property
    def explains(self) -> dict[str, Any]:
        return self.plan.explains

    def notes(self) -> list[str]:
        """One line per table: files read of the table's files, and how it was planned."""
        out = [] if self.plan.unplanned is None else [self.plan.unplanned]
        out += [f"{name}: {why}" for name, why in sorted(self.plan.skipped.items())]
        for name, e in sorted(self.explains.items()):
            how = "Pando + Iceberg" if e.used_layout else f"Iceberg only ({e.fallback_reason})"
            out.append(f"{name}: read {e.pando_files} of {e.total_files} files, "
                       f"skipped {e.total_files - e.pando_files} ({how})")
            out += [f"{name}: {f.note()}" for f in self.plan.row_filters.get(name, [])]
            out += [f"{name}: {n}" for n in self.plan.row_filter_notes.get(name, [])]
        return out

    def close(self) -> None:
        """Remove the staged task sets (idempotent). The DataFrame cannot run afterwards."""
        if not self.closed:
            self.closed = True
            self._stack.close()


class PrunedDataFrame(DataFrame):
    """A lazy pyspark DataFrame of a query whose base tables read only their pruned files, with
    ``.pando`` (:class:`PrunedScans`: explains, notes, close). A context manager: ``with
    pando_iceberg.spark.sql(spark, q) as df: ...`` releases the staged scans on exit.
    Transformations return plain DataFrames, valid while this one is open."""

    pando: PrunedScans

    def __enter__(self) -> PrunedDataFrame:
        return self

    def __exit__(self, *exc) -> None:
        self.pando.close()


def prunes_beyond_iceberg(plan) -> bool:
    """Did the trees or join pruning remove files that Iceberg's own planning of the table's
    filter keeps? When not, the table is left to Spark's own Iceberg scan, which plans the same
    files itself (its pushed filter is the one pyiceberg planned with): staging its tasks in the
    JVM would cost a second planning for no byte saved."""
    ex = plan.explain
    return ex.pando_files < ex.iceberg_files or ex.pando_bytes < ex.iceberg_bytes


def in_task_cache(plan) -> bool:
    """Are the plan's chosen tasks found in the JVM's task cache (``iceberg_jvm.cached_tasks``: a
    lookup, the snapshot planned in the JVM once) rather than by planning the table in the JVM?"""
    return (plan.snapshot_id is not None and bool(plan.paths)
            and plan.explain.total_files <= settings.value("taskCache.maxFiles"))


# A table whose chosen files hold at most this many bytes is read through its staged tasks when
# they are a lookup in the JVM's task cache, even with a predicate of its own the trees decide no
# better than Iceberg: what Spark's own scan could still skip inside those files with the pushed
# filter (row groups by statistics, dictionaries or bloom filters; a staged task carries no
# residual) is then at most this much reading, against Spark planning the table again from its
# manifests in the optimizer. Files of one row group each are staged whatever their size
# (:func:`one_row_group_each`). TPC-H SF 1, 40 held-out join queries (benchmarks/staging_bound.py,
#): median planning 45.6 ms with only the rule above, 39.6 with this bound (part,
# customer, supplier, partsupp, nation, region and small order selections), 40.3 with 64 MiB,
# 42.7 staging every table; Iceberg's own 34.9. The setting staging.maxBytes (pando_iceberg.settings).


def one_row_group_each(plan) -> bool:
    """Does every chosen file hold one row group (its split offsets; none recorded: not known)?
    Spark's own scan then skips nothing inside a file by row-group statistics that the
    file's metrics, which pyiceberg planned with, did not already decide; only a dictionary (or a
    bloom filter, off by default) could still drop a file it opens. Pando's rewrite writes such
    files (files of about b rows, far below Iceberg's 128 MiB row group)."""
    return all(t.file.split_offsets is not None and len(t.file.split_offsets) == 1 for t in plan.tasks)


def stages(plan, table, stage: str = "auto", *, outer_joins: bool = False) -> bool:
    """Does :func:`pruned_sql` read this table through its staged tasks, not Spark's own scan?

    ``'always'``: yes. ``'auto'``: when the trees or join pruning removed files Iceberg's own
    pruning keeps (:func:`prunes_beyond_iceberg`); otherwise when the table is unpartitioned, its
    tasks are a lookup in the JVM's task cache (:func:`in_task_cache`) and either the query has no
    predicate of its own on it (only joins: Spark's own scan would have nothing to push down to
    Iceberg but still plan every manifest of the table in its optimizer; TPC-H SF 1
    join queries, about 4 ms of Spark's planning per such table against 1-2 ms of staging) or its
    chosen files hold at most the setting ``staging.maxBytes`` or one row group each
    (:func:`one_row_group_each`). A partitioned table keeps Spark's scan, whose runtime filtering
    (dynamic partition pruning) a staged scan lacks. With ``outer_joins`` (the query has one),
    only the first rule: the table's pruning filter leaves out the predicates an outer join
    holds back, which Spark's optimizer often pushes to the scan once it finds the join inner
    (a WHERE that rejects its NULL rows), so Spark's own scan may skip files the filter keeps."""
    if stage == "always" or prunes_beyond_iceberg(plan):
        return True
    if outer_joins or not (in_task_cache(plan) and table is not None and table.spec().is_unpartitioned()):
        return False
    return ((plan.filter is not None and plan.filter.is_true_expr())
            or plan.explain.pando_bytes <= settings.value("staging.maxBytes")
            or one_row_group_each(plan))


STAGE_MODES = ("auto", "always")

# Spark analyses the query as written on a JVM thread of its own while Python plans its tables;
# the analysed plan's relations of the staged tables then read their task sets
# (``iceberg_jvm.swapped_plan``), instead of Spark analysing a rewritten query over temporary
# views of the sets after the planning. False: always the rewritten query.
ANALYSE_AHEAD = True


def analysis_ahead(spark, sql: str, tree: exp.Expression):
    """A Java Future of Spark's analysis of ``sql`` as written (``iceberg_jvm.analysed_ahead``);
    None when it is not started: the statement is not a query (Spark runs a command as it
    analyses it: it must run once, over the pruned tables), :data:`ANALYSE_AHEAD` is off, or the
    helper does not compile."""
    if not ANALYSE_AHEAD or not isinstance(tree, exp.Query):
        return None
    return jv.analysed_ahead(spark, sql)


@settings.of_session  # the session's spark.sql.pando.* settings, read once for planning and staging
def pruned_sql(spark, catalog, sql: str, *, use_layout: bool = True, stage: str = "auto") -> PrunedDataFrame:
    """``sql`` as a lazy DataFrame in which every Iceberg base table is replaced by its pruned
    scan (see :class:`PrunedDataFrame` for the lifetime of what it stages). Nothing is collected;
    planning (pyiceberg + trees, then the JVM's tasks for the chosen files) happens here.
    ``stage='auto'``: a table whose trees remove no file beyond Iceberg's own pruning is read by
    Spark's own scan unless the query has no predicate of its own on it (:func:`stages`; its
    explain record still says what was planned); ``'always'``: every table reads its staged tasks
    (pinned to the planned snapshot).
    ``df.pando.timings``: seconds spent planning the tables (``plan``, split into ``plan_parse``:
    SQL, schemas, workload parser; ``plan_join_keys``: Spark key sets; ``plan_tables``: pyiceberg
    + trees), staging their tasks in the JVM (``stage``) and analysing the query (``analyse``:
    with :data:`ANALYSE_AHEAD`, what is left of Spark's analysis after the planning, and the
    relations swapped onto the task sets)."""
    if stage not in STAGE_MODES:
        raise ValueError(f"stage must be one of {', '.join(STAGE_MODES)}, got {stage!r}")
    t0 = time.perf_counter()
    tree = parse_sql(sql)
    ahead = analysis_ahead(spark, sql, tree)
    qp = plan_query(spark, catalog, sql, use_layout=use_layout, tree=tree)
    timings = {"plan": time.perf_counter() - t0, **{f"plan_{k}": v for k, v in qp.timings.items()}}
    stack = contextlib.ExitStack()
    try:
        tag = uuid.uuid4().hex[:12]
        views: list[str] = []  # the views live only while Spark analyses the query
        try:
            t1 = time.perf_counter()
            # With the query analysed ahead, the staged sets (and row filters) are swapped into its plan.
            swap = ahead is not None
            later: dict[str, tuple[str, str]] = {}  # table → (task set id, view): its view not made yet
            staged: list[tuple[str, str, str]] = []  # (table uuid, metadata file, task set id)
            reads: dict[str, tuple[int, str]] = {}  # table → (its number, what the rewritten SQL reads)
            residuals: dict[str, str] = {}  # table uuid → its pruning filter (Iceberg JSON), under ANSI
            snapshots: dict[str, int | None] = {}  # table uuid → the snapshot planned, under ANSI
            outer = any(j.side and j.kind not in ("SEMI", "ANTI") for j in qp.tree.find_all(exp.Join))
            for i, (name, plan) in enumerate(sorted(qp.plans.items())):
                source = name  # Spark's own Iceberg scan: it plans the same files without staging them
                table = qp.tables.get(name) or catalog.load_table(name)
                if stages(plan, table, stage, outer_joins=outer):
                    source = f"__pando_scan_{tag}_{i}"
                    if qp.ansi:
                        residuals[str(table.metadata.table_uuid)] = residual_filter(table, plan)
                        snapshots[str(table.metadata.table_uuid)] = plan.snapshot_id
                    got = stack.enter_context(staged_plan(spark, table, name, plan, view=source, view_later=swap))
                    if swap and isinstance(got, str):
                        later[name] = (got, source)
                        staged.append((str(table.metadata.table_uuid), table.metadata_location, got))
                    else:  # its view was made (nothing to read, or no staging in one call): SQL over views
                        swap = False
                        views.append(source)
                reads[name] = (i, source)
            t2 = time.perf_counter()
            jdf = _swapped(spark, ahead, qp, staged) if swap else None
            if jdf is None:
                for name, (set_id, view) in later.items():
                    jv.view_of_task_set(spark, name, set_id, view)
                    views.append(view)
                sources = _rewritten_sources(spark, qp, reads, tag, views)
                # nothing replaced: Spark reads the query as written (its own scans plan the same files)
                # Spark's one-argument SparkSession.sql: pyspark's spark.sql builds an empty argument
                # array first (three more py4j round trips and two JVM objects to release, ~0.8 ms)
                jdf = spark._jsparkSession.sql(replace_tables(sql, qp.tree, sources, qp.catalog_name)
                                               if sources else sql)
            if residuals:
                jdf, copies = jv.with_residuals(spark, jdf, residuals, snapshots)
                for jtable, set_id in copies:
                    stack.callback(jv.unstage, spark, jtable, set_id)
            timings.update(stage=t2 - t1, analyse=time.perf_counter() - t2)
        finally:
            jv.drop_temp_views(spark, views)
    except BaseException:
        stack.close()
        raise
    out = PrunedDataFrame(jdf, spark)
    out.pando = PrunedScans(qp, stack, time.perf_counter() - t0, timings)
    return out


def residual_filter(table, plan) -> str:
    """The plan's pruning filter as Iceberg expression JSON for ``iceberg_jvm.with_residuals``;
    '' when there is none or the JSON cannot express it.

    Under ANSI mode an expression of the query can raise on a row that Spark's own Iceberg scan
    never reads: that scan skips row groups by their statistics and dictionaries with its pushed
    filter, a staged task has no filter to skip them with. The pruning filter holds for every row
    that can reach the result (the files were chosen with it), so skipping a row group with it is
    as exact as skipping a file."""
    from ..expr.iceberg import to_pyiceberg
    from .jvm_filter import expression_json

    if plan.filter is None or plan.filter.is_true_expr():
        return ""
    try:
        return expression_json(to_pyiceberg(plan.filter, table.schema()), table.schema())
    except Exception as e:  # UnsupportedFilter, or a term pyiceberg cannot express: Spark's filter only
        log.debug("pando: %s: its pruning filter is no residual (%s: %s)", table, type(e).__name__, e)
        return ""


def _swapped(spark, ahead: Any, qp: QueryPlan, staged: list[tuple[str, str, str]]):
    """The query Spark analysed ahead (the Java Future ``ahead``) with its staged tables reading
    their sets and its row filters as semi-joins (``iceberg_jvm.swapped_plan``); None when a key
    set is not of integers, the analysis failed or the swap was refused: the caller then analyses
    the query rewritten over views."""
    filtered = []
    for name, filters in sorted(qp.row_filters.items()):
        for f in filters:
            values = key_values(f.keys)
            if len(values) and values.dtype.kind not in "iu":
                return None
            filtered.append((str(qp.tables[name].metadata.table_uuid), f.join.column, values.astype(np.int64)))
    analysed = jv.analysed(ahead)
    return None if analysed is None else jv.swapped_plan(spark, analysed, staged, filtered)


def _rewritten_sources(spark, qp: QueryPlan, reads: dict[str, tuple[int, str]], tag: str,
                       views: list[str]) -> dict[str, str]:
    """Table → what the rewritten query reads instead (SQL): its staged view, semi-joined with the
    key views of its row filters (made here, their names added to ``views``)."""
    sources = {}
    for name, (i, source) in reads.items():
        filters = qp.row_filters.get(name, [])
        if filters:
            keyed = []
            for j, f in enumerate(filters):
                made = key_view_of(spark, f.keys, f"__pando_keys_{tag}_{i}_{j}")
                if made is not None:
                    views.append(made)
                keyed.append((f.join.column, made))
            sources[name] = semi_join_sql(source, keyed)
        elif source != name:
            sources[name] = source
    return sources


KEY_COLUMN = "__pando_key"


def key_values(keys: Any) -> np.ndarray:
    """A row filter's key set as the numpy array Spark is given (``expr.keys.keys_array``; a
    BitMap64's uint64 as int64: Spark has no unsigned type, and the keys come from signed columns)."""
    from ..expr.keys import keys_array

    values = keys_array(keys)
    return values.astype(np.int64) if values.dtype == np.uint64 else values


def key_frame(spark, keys: Any) -> DataFrame | None:
    """A row filter's key set as a one-column DataFrame (:data:`KEY_COLUMN`), None when empty:
    integer keys as a local relation built in the JVM, others as one Arrow batch from the driver.
    (A literal IN list of 100,000 keys took 4 s to parse and slowed TPC-H Q9 down; the broadcast
    semi-join sped it up.)"""
    values = key_values(keys)
    if len(values) == 0:
        return None
    frame = jv.long_column(spark, values, KEY_COLUMN) if values.dtype.kind == "i" else None
    if frame is None:  # other key types (or no compiled helper)
        frame = spark.createDataFrame(pa.table({KEY_COLUMN: values}).to_pandas())
    return frame


def key_view_of(spark, keys: Any, name: str) -> str | None:
    """A row filter's key set as a temporary view ``name`` of one column :data:`KEY_COLUMN`;
    None (no view) when the set is empty. Integer keys become a local relation registered in
    the JVM in one call (``iceberg_jvm.long_view``), others go through :func:`key_frame`.

    A literal ``IN (...)`` instead of the view and its semi-join is not used at any size: on
    TPC-H SF 1 lineitem joined with part, for 1 to 300 keys, analysis and executed plan took
    longer with the literal list (Spark's own scan then pushes it to Iceberg's planning) than
    with this view, built in 1-3 ms (interleaved runs)."""
    values = key_values(keys)
    if len(values) == 0:
        return None
    if values.dtype.kind == "i" and jv.long_view(spark, values, KEY_COLUMN, name):
        return name
    frame = key_frame(spark, keys)
    assert frame is not None  # not empty
    jv.temp_view(spark, frame, name)
    return name


def semi_join_sql(source: str, filters: list[tuple[str, str | None]]) -> str:
    """``(SELECT t.* FROM source t ...)``: the rows whose column is among each key view's keys (a
    broadcast left semi-join per ``(column, key view)``); a view of None is an empty key set,
    which keeps no row (the inner join keeps none)."""
    views = [v for _, v in filters if v is not None]
    hint = f"/*+ BROADCAST({', '.join(views)}) */ " if views else ""
    sql = f"SELECT {hint}__pando_t.* FROM {exp.to_table(source).sql(dialect='spark')} AS __pando_t"
    for column, v in filters:
        if v is not None:
            col = exp.to_identifier(column, quoted=True).sql(dialect="spark")
            sql += f" LEFT SEMI JOIN {v} ON __pando_t.{col} = {v}.{KEY_COLUMN}"
    if len(views) < len(filters):
        sql += " WHERE false"
    return f"({sql})"


def run_sql(spark, catalog, sql: str, *, use_layout: bool = True, limit: int | None = None) -> PrunedQuery:
    """Run a Spark SQL query with every Iceberg base table replaced by its pruned scan and
    collect it: :func:`pruned_sql`, collected, then released."""
    t0 = time.perf_counter()
    with pruned_sql(spark, catalog, sql, use_layout=use_layout) as df:
        result = df.limit(limit) if limit is not None else df
        rows = result.collect()
        metrics = jv.scan_metrics(result)
        columns = list(result.columns)
        drop_shuffles(spark, result)  # collected: its shuffle files go now, not at a later GC
        explains, notes = df.pando.explains, df.pando.notes()
    return PrunedQuery(sql, rows, columns, explains, metrics, time.perf_counter() - t0, notes)


def _base_tables(tree: exp.Expression) -> list[exp.Table]:
    """The query's references to tables (a CTE's name used as a table is not one)."""
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return [t for t in tree.find_all(exp.Table) if t.name and not (t.name in ctes and not t.db)]


def _written(t: exp.Table) -> str:
    """The table's name as written (every part)."""
    return ".".join(p.name for p in t.parts)


def _ours(t: exp.Table, catalog_name: str | None) -> bool:
    """Does the reference name a table of the catalog Pando plans: two parts or fewer, or three
    starting with its name (not ``db.t.snapshot_id_<id>``, ``db.t.branch_b``, ``db.t.files``)?"""
    parts = t.parts
    return len(parts) <= 2 or (len(parts) == 3 and catalog_name is not None
                               and parts[0].name.lower() == catalog_name.lower())


def _qualified(t: exp.Table) -> str:
    parts = [p for p in (t.catalog, t.db, t.name) if p]
    return ".".join(parts[-2:]) if len(parts) >= 2 else parts[-1]


def replace_tables(sql: str, tree: exp.Expression, sources: dict[str, str], catalog_name: str | None = None) -> str:
    """``sql`` with each reference to a table of ``sources`` replaced by what it reads instead (SQL
    text of a view name or a subquery), under the reference's alias (or the table's name): the
    query's own text with only the table names changed, at the positions ``tree`` (parsed from
    ``sql``) gives them. Spark reads the user's SQL, not sqlglot's rendering of it, and what
    follows a name (a TABLESAMPLE, the alias) stays as written. A reference whose position does
    not hold its name, or of three parts not starting with ``catalog_name`` (a snapshot, branch
    or metadata table: ``db.t.branch_b``), is left as it is (Spark's own scan: its rows, unpruned)."""
    by_tail: dict[str, list[str]] = {}
    for name in sources:
        by_tail.setdefault(name.split(".")[-1], []).append(name)

    def resolve(q: str) -> str | None:
        if q in sources:
            return q
        hits = by_tail.get(q.split(".")[-1], [])
        return hits[0] if len(hits) == 1 else None

    edits: list[tuple[int, int, str]] = []
    for t in _base_tables(tree):
        found = resolve(_qualified(t)) if catalog_name is None or _ours(t, catalog_name) else None
        if found is None:
            continue
        parts = t.parts
        start, end = parts[0].meta.get("start"), parts[-1].meta.get("end")
        if start is None or end is None or [p.lower() for p in re.split(r"\s*\.\s*", sql[start:end + 1])] != [
                p.sql(dialect="spark").lower() for p in parts]:
            log.warning("pando: %s at %s..%s of the query is read unpruned: its position in the text is not "
                        "its name", found, start, end)
            continue
        alias = "" if t.args.get("alias") else " AS " + exp.to_identifier(t.name).sql(dialect="spark")
        edits.append((start, end + 1, sources[found] + alias))
    for start, stop, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[stop:]
    return sql


__all__ = [
    "ANALYSE_AHEAD",
    "KEY_COLUMN",
    "PlanCatalog",
    "PrunedDataFrame",
    "PrunedQuery",
    "PrunedScans",
    "QueryPlan",
    "analysis_ahead",
    "collect_arrow",
    "in_task_cache",
    "key_frame",
    "key_values",
    "key_view_of",
    "parse_sql",
    "plan_query",
    "pruned_sql",
    "pruned_table",
    "prunes_beyond_iceberg",
    "replace_tables",
    "run_sql",
    "semi_join_sql",
    "spark_schema",
    "staged_plan",
    "stages",
    "with_join_keys",
]
