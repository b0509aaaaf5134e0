"""Pando in a PySpark session: :func:`enable` gives the session a ``spark.sql`` that runs
``CALL pando.system.*`` (as ``pando sql`` does) and hands every other statement to Spark, and an
optimizer rule by which every query reads only the files Pando keeps; within :func:`pruning`,
``spark.sql`` queries go through ``pando_iceberg.spark.sql``."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..catalog import load_catalog
from ..config import PandoConfig
from ..spark import prune_rule, session_config
from .builtin import ProcedureContext, call
from .parse import is_pando_call

log = logging.getLogger("pando_iceberg")

# a query statement (what pando_iceberg.spark.sql plans), after leading comments and parentheses
_QUERY_RE = re.compile(r"^(?:\s*--[^\n]*\n)*[\s(]*(?:SELECT|WITH)\b", re.IGNORECASE)


def enable(spark, *, config: Any = None):
    """Make ``spark.sql`` run Pando's procedures: after ``enable(spark)``,
    ``spark.sql("CALL pando.system.<procedure>(...)")`` runs the procedure ``pando sql`` runs and
    returns its result as a DataFrame with the same columns (``df.pando_notes``: its notes); every
    other statement, Iceberg's own ``CALL <catalog>.system.*`` included, is Spark's own.

    The procedures work on the session's current catalog at the time of each CALL
    (``pando_iceberg.spark.session_config``), or on ``config`` (a ``PandoConfig``) if given. Enabling an enabled
    session changes nothing but ``config``; :func:`disable` restores Spark's ``sql``.

    It also puts Pando's optimizer rule into the session (``pando_iceberg.spark.prune_rule``):
    every query it optimizes, ``spark.sql`` and the DataFrame API alike, reads for each Iceberg
    scan of a laid-out table the files Pando's planner keeps (the shapes pruned: docs/QUERYING.md).
    Within :func:`pruning`, ``spark.sql`` queries take ``pando_iceberg.spark.sql``'s text path."""
    if config is not None and not isinstance(config, PandoConfig):
        raise TypeError(f"enable: config must be a PandoConfig (pando_iceberg.config.load_config()), "
                        f"got {type(config).__name__}")
    # the current catalog must be one Pando can open: say so now, not at the first CALL
    fixed = session_config(spark) if config is None else (config, load_catalog(config))
    own = type(spark).sql.__get__(spark)

    def sql(sqlQuery: str, args: Any = None, **kwargs: Any):
        state = vars(spark)
        if not isinstance(sqlQuery, str) or state.get("_pando_busy"):  # Pando's own statements are Spark's
            return own(sqlQuery, args, **kwargs)
        if is_pando_call(sqlQuery):
            if args is not None or kwargs:
                raise ValueError("CALL pando.system.<procedure>(...) takes its arguments in the statement; "
                                 "spark.sql's args and keyword arguments are not accepted with it")
            with _busy(spark):
                return procedure_frame(spark, sqlQuery, None if config is None else fixed)
        scopes = state.get("_pando_pruning")
        if scopes and args is None and not kwargs and _QUERY_RE.match(sqlQuery):
            return _pruned(spark, sqlQuery, scopes[-1], own)
        return own(sqlQuery, args, **kwargs)

    sql.__doc__ = own.__doc__
    sql._pando_enabled = True  # type: ignore[attr-defined]
    already = is_enabled(spark)
    spark.sql = sql
    if not already:
        try:
            prune_rule.install(spark)
        except Exception as e:  # the session still runs every query, unpruned
            log.warning("pando: queries read Spark's own plans: the optimizer rule was not installed (%s: %s)",
                        type(e).__name__, e)
    return spark


def disable(spark):
    """Undo :func:`enable`: ``spark.sql`` is Spark's own again."""
    if is_enabled(spark):
        del spark.sql
        prune_rule.uninstall(spark)
    return spark


def is_enabled(spark) -> bool:
    return getattr(vars(spark).get("sql"), "_pando_enabled", False)


@contextmanager
def pruning(spark, *, catalog: Any = None) -> Iterator[list]:
    """Within the block, every ``spark.sql`` query (SELECT / WITH) reads only the files Pando's
    planner keeps, as through ``pando_iceberg.spark.sql(spark, q, catalog=catalog)`` (the session's
    current catalog by default), and returns that DataFrame (``df.pando``: explains, notes). The
    scans it stages are released when the block ends: run every action on those DataFrames (and
    on DataFrames derived from them) inside it. A query Pando cannot plan reads Spark's own plan,
    with a warning naming why. Yields the list of the block's ``df.pando`` records. The session
    is enabled (:func:`enable`) for the block if it was not."""
    was_enabled = is_enabled(spark)
    if not was_enabled:
        enable(spark)
    scope: list = []
    scopes = vars(spark).setdefault("_pando_pruning", [])
    scopes.append((catalog, scope))
    try:
        yield scope
    finally:
        scopes.remove((catalog, scope))
        for scans in reversed(scope):
            scans.close()
        if not was_enabled:
            disable(spark)


def _pruned(spark, query: str, scope: tuple[Any, list], own: Any):
    """``query`` through Pando's planner, its staged scans kept until ``scope`` ends; Spark's own
    plan where Pando cannot plan it (Spark then says what is wrong with a query that is wrong)."""
    from ..spark import sql as pruned_sql

    catalog, scans = scope
    try:
        with _busy(spark):
            df = pruned_sql(spark, query, catalog=catalog)
    except Exception as e:
        log.warning("pando: the query reads Spark's own plan: %s: %s", type(e).__name__, e)
        return own(query)
    scans.append(df.pando)
    return df


@contextmanager
def _busy(spark) -> Iterator[None]:
    """While Pando runs a procedure or plans a query, the statements it gives ``spark.sql`` are Spark's."""
    state = vars(spark)
    before = state.get("_pando_busy", False)
    state["_pando_busy"] = True
    try:
        yield
    finally:
        state["_pando_busy"] = before


# Spark type name of a procedure's result column → the Python value Spark's createDataFrame accepts
_PYTHON_VALUES = {"tinyint": int, "smallint": int, "int": int, "bigint": int, "float": float, "double": float,
                  "boolean": bool, "string": str}


def procedure_frame(spark, statement: str, configured: tuple[PandoConfig, Any] | None = None):
    """One ``CALL pando.system.<procedure>(...)`` run as ``pando sql`` runs it, its result as a
    DataFrame (columns and types of the procedure's result; ``.pando_notes``: its notes), on
    ``configured`` (configuration, pyiceberg catalog) or the session's current catalog."""
    cfg, catalog = session_config(spark) if configured is None else configured
    result = call(ProcedureContext(cfg, catalog, lambda: spark), statement)
    convert = [_PYTHON_VALUES.get(t) for _, t in result.columns]
    rows = [tuple(v if v is None or f is None else f(v) for v, f in zip(row, convert)) for row in result.rows]
    schema = ", ".join(f"`{name}` {kind}" for name, kind in result.columns)
    df = spark.createDataFrame(rows, schema=schema)
    df.pando_notes = list(result.notes)
    return df
