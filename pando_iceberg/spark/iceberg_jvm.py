"""The few Iceberg Java APIs pyiceberg lacks, reached through the Spark JVM (STACK.md): Iceberg's
Java tables behind Spark's table names and their snapshots read under the current schema, here;
one module per concern beside it, whose names are importable from here too: the rewrite's commit
(:mod:`.jvm_commit`), the staging of chosen files for Spark's reads (:mod:`.jvm_staging`), the
inspection of executed plans (:mod:`.jvm_plans`), and the Java helpers compiled in the JVM
(:mod:`.jvm_classes`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .jvm_classes import helper, java_iter, jclass
from .jvm_commit import (
    CONFLICT_EXCEPTIONS,
    UNKNOWN_STATE_EXCEPTION,
    CommitConflict,
    NewFile,
    build_data_files,
    commit_replace,
    conflict_exception,
    conflict_message,
    live_data_files,
)
from .jvm_plans import (
    SCAN_METRICS,
    executed_nodes,
    executed_scans,
    executed_shuffle_ids,
    planned_partitions,
    scan_metrics,
)
from .jvm_staging import (
    analysed,
    analysed_ahead,
    cached_task_counts,
    cached_tasks,
    chosen_tasks,
    drop_temp_views,
    long_column,
    long_view,
    staged_cached_view,
    staged_scan,
    staged_split_size,
    swapped_plan,
    task_set_view,
    temp_view,
    unstage,
    view_of_task_set,
    with_residuals,
)

__all__ = [
    "CONFLICT_EXCEPTIONS", "SCAN_METRICS", "UNKNOWN_STATE_EXCEPTION", "CommitConflict", "NewFile", "analysed",
    "analysed_ahead", "build_data_files", "cached_task_counts", "cached_tasks", "chosen_tasks", "commit_replace",
    "conflict_exception", "conflict_message", "drop_temp_views", "executed_nodes", "executed_scans",
    "executed_shuffle_ids", "held_table", "jclass", "live_data_files", "load_table", "long_column", "long_view",
    "planned_partitions", "read_snapshot", "scan_metrics", "staged_cached_view", "staged_scan", "staged_split_size",
    "swapped_plan", "table_metadata_location", "task_set_view", "temp_view", "unstage", "view_of_task_set",
    "with_residuals",
]

# The rewrite's modules iterate Java collections with this module's name for it.
_iter = java_iter


# The Java tables handed out last, by (gateway, Spark session, name): (gateway, session, Table).
# Reused while the table's current metadata file is the one the caller planned with
# (``load_table(metadata_location=...)``), and only by the session whose catalog loaded it.
_JTABLES: dict[tuple[int, int, str], tuple[Any, Any, Any]] = {}


def table_metadata_location(table) -> str | None:
    """The metadata file a Java Table's in-memory state was read from (None when it has none):
    one JVM call (``TaskCache.java``), three through py4j when the helper cannot be compiled."""
    method = helper("TaskCache", "metadataLocation", ("java.lang.Object",))
    try:
        if method is not None:
            found = method(table)
            return None if found is None else str(found)
        return str(table.operations().current().metadataFileLocation())
    except Exception:  # not a BaseTable (a metadata table, a wrapper): unknown
        return None


def load_table(spark, name: str, *, metadata_location: str | None = None):
    """The Java ``org.apache.iceberg.Table`` behind a Spark table name (refreshed).

    With ``metadata_location`` (the metadata file the caller's pyiceberg table was loaded
    from), the table handed out last for ``name`` is reused without a reload and refresh (a
    catalog lookup and a metadata read, ~2–3 ms per staged table) when its state was
    read from exactly that file: same file, same snapshots, schema and properties. Spark's own
    catalog cache holds that instance, or a newer one it loaded since, so Spark's read of the
    table by name is as current as before."""
    if metadata_location is not None:
        held = held_table(spark, name)
        if held is not None and table_metadata_location(held) == metadata_location:
            return held
    gateway, session = spark.sparkContext._gateway, spark._jsparkSession
    util = jclass(gateway, "org.apache.iceberg.spark.Spark3Util")
    table = util.loadIcebergTable(session, name)
    table.refresh()
    _JTABLES[(id(gateway), id(session), name)] = (gateway, session, table)
    return table


def held_table(spark, name: str):
    """The Java table :func:`load_table` handed out last for ``name`` in this session, unchecked
    (no JVM call: it may have been read from an older metadata file), or None."""
    gateway, session = spark.sparkContext._gateway, spark._jsparkSession
    hit = _JTABLES.get((id(gateway), id(session), name))
    return hit[2] if hit is not None and hit[0] is gateway and hit[1] is session else None


def read_snapshot(spark, name: str, snapshot_id: int | None, metadata: Iterable[str] = ()):
    """The rows of ``snapshot_id`` (None: the current snapshot) under the table's CURRENT schema,
    with the ``metadata`` columns (e.g. ``_file``) after them. Iceberg reads an older snapshot with
    that snapshot's schema (time travel), but a rewrite writes its files under the current one: a
    top-level column renamed since is matched by field id, one added since is null, one dropped
    since is left out, one widened since is cast (soak regression: relayout right after a rename)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    reader = spark.read.format("iceberg")
    extra = [F.col(m) for m in metadata]
    if snapshot_id is None:
        df = reader.load(name)
        return df.select("*", *extra) if extra else df
    df = reader.option("snapshot-id", str(snapshot_id)).load(name)
    table = load_table(spark, name)
    snapshot = table.snapshot(snapshot_id)
    schema_id = snapshot.schemaId() if snapshot is not None else None
    current = table.schema()
    if schema_id is None or int(schema_id) == int(current.schemaId()):
        return df.select("*", *extra) if extra else df
    old = table.schemas().get(schema_id)
    # the current schema from Iceberg: Spark's cached table may be stale
    converted = spark._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(current)
    now = {f.name: f.dataType for f in StructType.fromJson(json.loads(converted.json())).fields}
    cols = []
    for field in java_iter(current.columns()):
        new_name = str(field.name())
        before = old.findField(int(field.fieldId()))
        if before is None:
            cols.append(F.lit(None).cast(now[new_name]).alias(new_name))
            continue
        old_name = str(before.name())
        col = F.col("`" + old_name.replace("`", "``") + "`")  # a name with a dot is not a nested field
        cols.append((col if df.schema[old_name].dataType == now[new_name] else col.cast(now[new_name])).alias(new_name))
    return df.select(*cols, *extra)
