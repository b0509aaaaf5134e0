"""Pruned reads in Spark: a DataFrame over exactly the files the Pando planner chose (Iceberg's
scan-task-set path: deletes and schema evolution stay Iceberg's business), and SQL execution
in which every base table of the query is replaced by its pruned scan.

For a query with FK→PK joins, each table's filter carries the join filters the workload parser
derives (``fk IN (SELECT pk FROM dim WHERE p)``; FK→PK from declared identifier fields, else from
the dimension column's uniqueness on the data, issue 14); their key sets are computed before
planning — through pyiceberg and the process-wide cache for dimensions up to
``planner.joins.MAX_DIMENSION_ROWS`` rows, by Spark above — so the literal cuts are compared key
set against key set — exact and sound whatever happened to the dimension since the layout was
made (§7) — and every file's FK bounds are tested against them (join pruning, planner/joins.py).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa
from sqlglot import exp, parse_one

from . import iceberg_jvm as jv
from .rewrite import SparkKeyProvider, collect_arrow, identifier_fields, namespace_schemas


@dataclass
class PrunedQuery:
    sql: str
    rows: list[Any]
    columns: list[str]
    explains: dict[str, Any] = field(default_factory=dict)  # table → ExplainRecord
    scan_metrics: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

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
    plan = plan_scan(table, filter, use_layout=use_layout, schemas=schemas)
    jtable = jv.load_table(spark, name)
    with jv.staged_scan(spark, jtable, name, plan.snapshot_id, plan.paths) as df:
        if plan.filter.joins:  # IN (SELECT ...) parts need SQL, not a DataFrame expression
            view = f"__pando_pruned_{abs(hash(name))}"
            df.createOrReplaceTempView(view)
            try:
                yield spark.sql(f"SELECT * FROM {view} WHERE {plan.filter.to_sql()}"), plan
            finally:
                spark.catalog.dropTempView(view)
            return
        if not plan.filter.is_true_expr():
            df = df.where(plan.filter.expr.sql(dialect="spark"))
        yield df, plan


def with_join_keys(spark, table, tf, schemas: dict[str, pa.Schema], *, row_limit: int | None = None):
    """The filter with key sets on every join filter (they serve the layout's literal cuts and
    join pruning of every file): through pyiceberg and the process-wide cache when the
    dimension chain has at most ``row_limit`` rows (default ``planner.joins.MAX_DIMENSION_ROWS``),
    else one Spark job. A join whose keys cannot be read keeps none (the planner then says why)."""
    from ..planner.joins import with_key_sets

    if not tf.joins:
        return tf
    catalog = getattr(table, "catalog", None)
    if catalog is None:
        return tf
    provider = SparkKeyProvider(spark, schemas)
    try:
        keyed, _ = with_key_sets(catalog, tf, row_limit=row_limit,
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

    @property
    def explains(self) -> dict[str, Any]:
        return {name: p.explain for name, p in self.plans.items()}


def plan_query(spark, catalog, sql: str, *, use_layout: bool = True) -> QueryPlan:
    """Plan every Iceberg base table of ``sql`` with its own filter (join filters included)."""
    from ..planner import plan_scan
    from ..workload import parse_workload

    tree = parse_one(sql, read="spark")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    names = sorted({_qualified(t) for t in tree.find_all(exp.Table) if t.name and not (t.name in ctes and not t.db)})
    current = spark.catalog.currentDatabase()
    schemas: dict[str, pa.Schema] = {}
    for ns in sorted({n.rsplit(".", 1)[0] if "." in n else current for n in names} - {""}):
        schemas.update(namespace_schemas(spark, f"{ns}.x"))
    from ..planner.joins import uniqueness_oracle

    pks = {n: identifier_fields(spark, n) for n in schemas}
    unique = uniqueness_oracle(catalog, fallback=SparkKeyProvider(spark, schemas).is_unique)
    wl = parse_workload([sql], schemas, primary_keys={k: v for k, v in pks.items() if v}, unique=unique)
    query = wl.queries[0]
    plans = {}
    for name in sorted(query.filters):
        table = catalog.load_table(name)
        tf = with_join_keys(spark, table, query.filters[name], schemas) if use_layout else query.filters[name]
        plans[name] = plan_scan(table, tf, use_layout=use_layout, schemas=schemas)
    return QueryPlan(sql, tree, plans)


def run_sql(spark, catalog, sql: str, *, use_layout: bool = True, limit: int | None = None) -> PrunedQuery:
    """Run a Spark SQL query with every Iceberg base table replaced by its pruned scan."""
    t0 = time.perf_counter()
    qp = plan_query(spark, catalog, sql, use_layout=use_layout)
    with contextlib.ExitStack() as stack:
        views: dict[str, str] = {}
        for i, (name, plan) in enumerate(sorted(qp.plans.items())):
            jtable = jv.load_table(spark, name)
            df = stack.enter_context(jv.staged_scan(spark, jtable, name, plan.snapshot_id, plan.paths))
            view = f"__pando_scan_{i}"
            df.createOrReplaceTempView(view)
            stack.callback(spark.catalog.dropTempView, view)
            views[name] = view
        result = spark.sql(_replace_tables(qp.tree, views).sql(dialect="spark"))
        if limit is not None:
            result = result.limit(limit)
        rows = result.collect()
        metrics = jv.scan_metrics(result)
        columns = list(result.columns)
    return PrunedQuery(sql, rows, columns, qp.explains, metrics, time.perf_counter() - t0)


def _qualified(t: exp.Table) -> str:
    parts = [p for p in (t.catalog, t.db, t.name) if p]
    return ".".join(parts[-2:]) if len(parts) >= 2 else parts[-1]


def _replace_tables(tree: exp.Expression, views: dict[str, str]) -> exp.Expression:
    tree = tree.copy()
    by_tail = {}
    for name in views:
        by_tail.setdefault(name.split(".")[-1], []).append(name)
    def resolve(q: str) -> str | None:
        if q in views:
            return q
        hits = by_tail.get(q.split(".")[-1], [])
        return hits[0] if len(hits) == 1 else None

    for t in list(tree.find_all(exp.Table)):
        name = resolve(_qualified(t))
        if name is None:
            continue
        alias = t.args.get("alias") or exp.TableAlias(this=exp.to_identifier(t.name))
        t.replace(exp.Table(this=exp.to_identifier(views[name]), alias=alias))
    return tree


__all__ = ["PrunedQuery", "QueryPlan", "collect_arrow", "plan_query", "pruned_table", "run_sql", "with_join_keys"]
