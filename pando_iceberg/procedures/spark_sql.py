"""``CALL pando.system.*`` in ``spark.sql``: :func:`enable` gives a PySpark session a ``spark.sql``
that runs Pando's procedures (as ``pando sql`` does) and hands every other statement to Spark."""

from __future__ import annotations

from typing import Any

from ..catalog import load_catalog
from ..config import PandoConfig
from ..spark import session_config
from .builtin import ProcedureContext, call
from .parse import is_pando_call


def enable(spark, *, config: Any = None):
    """Make ``spark.sql`` run Pando's procedures: after ``enable(spark)``,
    ``spark.sql("CALL pando.system.<procedure>(...)")`` runs the procedure ``pando sql`` runs and
    returns its result as a DataFrame with the same columns (``df.pando_notes``: its notes); every
    other statement, Iceberg's own ``CALL <catalog>.system.*`` included, is Spark's own.

    The procedures work on the session's current catalog at the time of each CALL
    (``pando_iceberg.spark.session_config``), or on ``config`` (a ``PandoConfig``) if given. Enabling an enabled
    session changes nothing but ``config``; :func:`disable` restores Spark's ``sql``. Queries are
    pruned through ``pando_iceberg.spark.sql`` (plain ``spark.sql`` queries read Iceberg's own plan)."""
    if config is not None and not isinstance(config, PandoConfig):
        raise TypeError(f"enable: config must be a PandoConfig (pando_iceberg.config.load_config()), "
                        f"got {type(config).__name__}")
    # the current catalog must be one Pando can open: say so now, not at the first CALL
    fixed = session_config(spark) if config is None else (config, load_catalog(config))
    own = type(spark).sql.__get__(spark)

    def sql(sqlQuery: str, args: Any = None, **kwargs: Any):
        if isinstance(sqlQuery, str) and is_pando_call(sqlQuery):
            if args is not None or kwargs:
                raise ValueError("CALL pando.system.<procedure>(...) takes its arguments in the statement; "
                                 "spark.sql's args and keyword arguments are not accepted with it")
            return procedure_frame(spark, sqlQuery, None if config is None else fixed)
        return own(sqlQuery, args, **kwargs)

    sql.__doc__ = own.__doc__
    sql._pando_enabled = True  # type: ignore[attr-defined]
    spark.sql = sql
    return spark


def disable(spark):
    """Undo :func:`enable`: ``spark.sql`` is Spark's own again."""
    if is_enabled(spark):
        del spark.sql
    return spark


def is_enabled(spark) -> bool:
    return getattr(vars(spark).get("sql"), "_pando_enabled", False)


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
