"""The pyiceberg side of the configured catalog (same name, same tables as Spark's)."""

from __future__ import annotations

import logging

from .config import PandoConfig, prepare_embedded_catalog


def load_catalog(cfg: PandoConfig):
    """pyiceberg catalog for ``cfg``; for the embedded default it creates the lakehouse dirs."""
    from pyiceberg.catalog import load_catalog as _load

    if cfg.embedded:
        prepare_embedded_catalog(cfg)
    # Java's JdbcCatalog writes the V0 iceberg_tables schema; pyiceberg notes it in a log line and works.
    logging.getLogger("pyiceberg.catalog.sql").setLevel(logging.ERROR)
    return _load(cfg.catalog.name, **cfg.pyiceberg_properties())
