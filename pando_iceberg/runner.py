"""One statement executor for ``pando sql`` and ``pando run`` (runbooks).

- ``CALL pando.system.<name>(...)``: a pando procedure;
- ``CALL <catalog>.system.<name>(...)``: Iceberg's own procedure, through Spark;
- a query (SELECT / WITH): run with every base table replaced by its Pando-pruned scan, the
  result notes how many files each table read and skipped;
- anything else (DDL, INSERT, MERGE, ...): plain Spark SQL.
"""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from sqlglot import exp

from .exceptions import UsageError
from .procedures import ProcedureContext, Result, call, is_call, is_pando_call
from .workload.sources import split_statements

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class RunbookError(UsageError, ValueError):
    pass


def substitute(text: str, variables: dict[str, str], where: str = "runbook") -> str:
    """Replace ``${name}`` with its value; an undefined variable is an error naming it."""
    missing = sorted({m.group(1) for m in _VAR_RE.finditer(text)} - set(variables))
    if missing:
        raise RunbookError(f"{where}: variable(s) {', '.join(missing)} not defined; pass --var NAME=VALUE")
    return _VAR_RE.sub(lambda m: variables[m.group(1)], text)


def _is_query(statement: str) -> bool:
    try:
        tree = sqlglot.parse_one(statement, read="spark")
    except sqlglot.errors.ParseError:
        return False
    return isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except)) or (
        isinstance(tree, exp.Subquery))


def execute(ctx: ProcedureContext, statement: str, *, use_layout: bool = True, limit: int | None = None) -> Result:
    if is_pando_call(statement):
        return call(ctx, statement)
    if is_call(statement):
        return _spark_result(ctx, statement)
    if _is_query(statement):
        from .spark.pruned import run_sql

        pq = run_sql(ctx.spark, ctx.catalog, statement, use_layout=use_layout, limit=limit)
        notes = []
        for name, e in sorted(pq.explains.items()):
            skipped = e.total_files - e.pando_files
            how = "Pando + Iceberg" if e.used_layout else f"Iceberg only ({e.fallback_reason})"
            notes.append(f"{name}: read {e.pando_files} of {e.total_files} files, skipped {skipped} ({how})")
        notes.append(f"seconds: {pq.seconds:.2f}")
        return Result([(c, "") for c in pq.columns], [tuple(r) for r in pq.rows], notes)
    return _spark_result(ctx, statement, limit)


def _spark_result(ctx: ProcedureContext, statement: str, limit: int | None = None) -> Result:
    df = ctx.spark.sql(statement)
    rows = df.limit(limit).collect() if limit is not None else df.collect()
    return Result([(f.name, f.dataType.simpleString()) for f in df.schema.fields], [tuple(r) for r in rows])


def run_script(ctx: ProcedureContext, text: str, variables: dict[str, str],
               where: str = "runbook") -> list[tuple[str, Any]]:
    """Run every statement of a runbook in order; stops at the first error (raised)."""
    results = []
    for i, stmt in enumerate(split_statements(substitute(text, variables, where)), start=1):
        try:
            results.append((stmt, execute(ctx, stmt)))
        except Exception as e:
            raise RunbookError(f"{where}: statement {i} failed: {type(e).__name__}: {e}\n"
                               f"  statement: {stmt[:300]}") from e
    return results
