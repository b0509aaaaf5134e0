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

    ``catalog`` is the pyiceberg catalog of the Spark session's tables; by default the one of the
    pando configuration (``pando.yaml`` / ``PANDO_*``, as the ``pando`` command uses), which must
    carry the same name as Spark's current catalog.

    Lifetime: planning happens in this call; the chosen scan tasks stay staged in the JVM until
    ``df.pando.close()`` or the end of ``with ... as df``. Run every action (also on DataFrames
    derived from ``df``) before that; temporary views are not left behind. ``stage``: 'auto'
    stages only the tables whose trees remove files Iceberg's own pruning keeps (the others are
    Spark's own scans); 'always' stages every table (each read pinned to the planned snapshot)."""
    from .pruned import pruned_sql

    if catalog is None:
        catalog = default_catalog(spark)
    return pruned_sql(spark, catalog, query, use_layout=use_layout, stage=stage)


def default_catalog(spark):
    """The pyiceberg catalog of the pando configuration, checked against Spark's current catalog."""
    from ..catalog import load_catalog
    from ..config import load_config

    cfg = load_config()
    current = spark.catalog.currentCatalog()
    if current != cfg.catalog.name:
        raise ValueError(f"pando_iceberg.spark.sql: Spark's current catalog is {current!r} but the pando "
                         f"configuration's catalog is {cfg.catalog.name!r}; pass catalog=<the pyiceberg catalog "
                         f"of {current!r}> or run USE {cfg.catalog.name} first")
    return load_catalog(cfg)


__all__ = ["default_catalog", "sql"]
