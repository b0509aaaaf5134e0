"""The pyiceberg side of the configured catalog (same name, same tables as Spark's)."""

from __future__ import annotations

import logging

from .config import PandoConfig, prepare_embedded_catalog
from .planner.caches import TABLE_METADATA


def load_catalog(cfg: PandoConfig):
    """pyiceberg catalog for ``cfg``; for the embedded default it creates the lakehouse dirs."""
    from pyiceberg.catalog import load_catalog as _load

    if cfg.embedded:
        prepare_embedded_catalog(cfg)
    # Java's JdbcCatalog writes the V0 iceberg_tables schema; pyiceberg notes it in a log line and works.
    logging.getLogger("pyiceberg.catalog.sql").setLevel(logging.ERROR)
    return _load(cfg.catalog.name, **cfg.pyiceberg_properties())


def catalog_named(name: str, cfg: PandoConfig | None = None):
    """The pyiceberg catalog ``name``: Pando's configured one (``cfg``, else ``load_config()``:
    pando.yaml / ``PANDO_*``) when ``name`` is its name, else pyiceberg's own catalog of that name
    (``.pyiceberg.yaml``, ``PYICEBERG_CATALOG__<NAME>__*``), as ``pyiceberg.catalog.load_catalog``
    finds it."""
    from pyiceberg.catalog import load_catalog as _load

    from .config import ConfigError, load_config

    cfg = load_config() if cfg is None else cfg
    if name == cfg.catalog.name:
        return load_catalog(cfg)
    try:
        return _load(name)
    except ValueError as e:  # pyiceberg: no such catalog configured (no URI, no type)
        raise ConfigError(f"catalog {name!r} is neither Pando's configured catalog ({cfg.catalog.name!r}) nor a "
                          f"pyiceberg catalog of .pyiceberg.yaml or PYICEBERG_CATALOG__{name.upper()}__* ({e}); "
                          "accepted: one of those names, or a pyiceberg Catalog") from None


_LOCATION_QUERY = None  # SELECT the metadata locations of some tables, with bind parameters (load_tables)


def load_table(catalog, identifier):
    """``catalog.load_table(identifier)``, the current table, reusing the parsed metadata of a
    metadata file read before. For a SQL catalog (the embedded default, JDBC) the current
    metadata location is one indexed SELECT (0.03 ms); other catalogs load as they do."""
    loaded = load_tables(catalog, [identifier])
    if loaded:
        return next(iter(loaded.values()))
    table = catalog.load_table(identifier)
    TABLE_METADATA.put(table.metadata_location, table.metadata)
    return table


def load_tables(catalog, identifiers) -> dict:
    """The tables among ``identifiers`` (names or tuples) whose current metadata file was parsed
    before, keyed as given: for a SQL catalog one SELECT for all their metadata locations (a
    query's tables are planned at once: one round trip instead of one per table). The
    others — unknown, not parsed yet, or another kind of catalog — are left out, for
    :func:`load_table` to load as the catalog does (and raise its own error)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
    from pyiceberg.io import load_file_io
    from pyiceberg.table import Table
    from sqlalchemy import bindparam, select

    if not isinstance(catalog, SqlCatalog) or not identifiers:
        return {}
    names = {}
    for i in identifiers:
        try:
            names[i] = (Catalog.namespace_to_string(Catalog.namespace_from(i)), Catalog.table_name_from(i))
        except ValueError:  # no namespace (a temporary view's name): left to load_table
            continue
    if not names:
        return {}
    global _LOCATION_QUERY
    if _LOCATION_QUERY is None:  # built once: SQLAlchemy then reuses its compiled form
        _LOCATION_QUERY = select(IcebergTables.table_namespace, IcebergTables.table_name,
                                 IcebergTables.metadata_location).where(
            IcebergTables.catalog_name == bindparam("catalog"),
            IcebergTables.table_namespace.in_(bindparam("ns", expanding=True)),
            IcebergTables.table_name.in_(bindparam("name", expanding=True)))
    with catalog.engine.connect() as connection:
        rows = connection.execute(_LOCATION_QUERY, {"catalog": catalog.name,
                                                    "ns": sorted({ns for ns, _ in names.values()}),
                                                    "name": sorted({n for _, n in names.values()})}).all()
    locations = {(ns, name): location for ns, name, location in rows}
    out = {}
    for identifier, (ns, name) in names.items():
        location = locations.get((ns, name))
        metadata = TABLE_METADATA.get(location) if location else None
        if location and metadata is not None:
            out[identifier] = Table(identifier=Catalog.identifier_to_tuple(ns) + (name,), metadata=metadata,
                                    metadata_location=location,
                                    io=load_file_io({**catalog.properties, **metadata.properties}, location),
                                    catalog=catalog)
    return out
