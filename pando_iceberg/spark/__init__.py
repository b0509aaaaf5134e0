"""The Spark side of pando-iceberg: session factory, sampling, routing, rewrite, pruned reads.

``sql(spark, query)`` is the query entry point::

    import pando_iceberg.spark

    with pando_iceberg.spark.sql(spark, "SELECT ... FROM db.lineitem WHERE ...") as df:
        df.explain()                 # lazy: nothing ran yet
        df.groupBy("x").count().show()
        df.pando.explains            # table -> ExplainRecord (files/bytes/rows per stage, fallback reason)
        df.pando.notes()             # one line per table: read n of m files, planned how
"""

from __future__ import annotations

from typing import Any


def sql(spark, query: str, *, catalog: Any = None, use_layout: bool = True, stage: str = "auto"):
    """``query`` (Spark SQL) as a lazy :class:`~pando_iceberg.spark.pruned.PrunedDataFrame`: every
    Iceberg base table reads only the files Iceberg's pruning and the table's Pando trees keep
    (a table without a usable layout reads what Iceberg's pruning keeps: never a wrong result).

    ``catalog`` is the pyiceberg catalog of the Spark session's tables, or its name
    (``pando_iceberg.catalog.catalog_named``: Pando's configured catalog, or one of
    ``.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*``); by default the session's own current catalog,
    opened from its settings (:func:`default_catalog`).

    Lifetime: planning happens in this call; the chosen scan tasks stay staged in the JVM until
    ``df.pando.close()`` or the end of ``with ... as df``. Run every action (also on DataFrames
    derived from ``df``) before that; temporary views are not left behind. ``stage``: 'auto'
    stages only the tables whose trees remove files Iceberg's own pruning keeps (the others are
    Spark's own scans); 'always' stages every table (each read pinned to the planned snapshot)."""
    from .pruned import pruned_sql

    if catalog is None:
        catalog = default_catalog(spark)
    elif isinstance(catalog, str):
        from ..catalog import catalog_named

        catalog = catalog_named(catalog)
    return pruned_sql(spark, catalog, query, use_layout=use_layout, stage=stage)


# (configuration, pyiceberg catalog) opened from Spark sessions' settings, by those settings: one
# per catalog, not per query
_SESSION_CATALOGS: dict[tuple, tuple[Any, Any]] = {}


def default_catalog(spark):
    """The pyiceberg catalog of the Spark session's current catalog (:func:`session_config`)."""
    return session_config(spark)[1]


def session_config(spark) -> tuple[Any, Any]:
    """The configuration (``PandoConfig``) and pyiceberg catalog of the Spark session's current
    catalog, opened from the session's own settings (``spark.sql.catalog.<current>.*``: type, uri,
    warehouse, JDBC user, S3 settings), never from the working directory. Where those settings cannot
    be opened by pyiceberg (another catalog type), the pando configuration (``pando.yaml`` /
    ``PANDO_*``) is used if it describes the same catalog (same name, uri and warehouse); otherwise a
    ValueError names both."""
    from ..catalog import load_catalog
    from ..config import SPARK_CATALOG_KEYS, ConfigError, load_config, same_catalog, spark_catalog_config

    current = spark.catalog.currentCatalog()
    prefix = f"spark.sql.catalog.{current}"
    settings = {key: spark.conf.get(f"{prefix}.{key}" if key else prefix, None) for key in SPARK_CATALOG_KEYS}
    memo = (current, *sorted((k, v or "") for k, v in settings.items()))
    if memo in _SESSION_CATALOGS:
        return _SESSION_CATALOGS[memo]
    cfg = load_config()
    try:
        session_cfg = spark_catalog_config(current, settings, cfg.home)
    except ConfigError as e:
        if not same_catalog(cfg, current, settings):
            raise ValueError(f"pando_iceberg.spark: Spark's current catalog {current!r} cannot be opened from the "
                             f"session's settings ({e}), and the pando configuration ({cfg.source}) describes another "
                             f"catalog ({cfg.catalog.name!r} at {cfg.describe()['catalog']['uri']}); pass "
                             f"catalog=<the pyiceberg catalog of {current!r}>") from None
        session_cfg = cfg
    _SESSION_CATALOGS[memo] = got = (session_cfg, load_catalog(session_cfg))
    return got


__all__ = ["default_catalog", "session_config", "sql"]
