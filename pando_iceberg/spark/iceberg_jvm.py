"""The few Iceberg Java APIs pyiceberg lacks, reached through the Spark JVM (STACK.md):
RewriteFiles (snapshot operation ``replace``) in a transaction with the table properties, data
file metrics from Parquet footers, and scan-task sets for reading chosen files with Spark.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .. import settings
from ..exceptions import CommitConflictError
from .jvm_classes import helper

log = logging.getLogger(__name__)


class CommitConflict(CommitConflictError, RuntimeError):
    """The rewrite could not commit because files it replaces changed concurrently."""


# Java classes by (gateway, name): ``jvm.org.apache...Cls`` resolves every package step with a
# reflection round trip (0.7 ms for Spark3Util, 0.4 ms for java.lang.Object; a no-op call is 0.04
# ms), several times per staged table and key set.
_JCLASSES: dict[tuple[int, str], tuple[Any, Any]] = {}


def jclass(gateway, name: str):
    """The py4j handle of the Java class ``name`` (dotted), looked up once per JVM."""
    hit = _JCLASSES.get((id(gateway), name))
    if hit is None or hit[0] is not gateway:
        handle = gateway.jvm
        for part in name.split("."):
            handle = getattr(handle, part)
        _JCLASSES[(id(gateway), name)] = hit = (gateway, handle)
    return hit[1]


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
    for field in _iter(current.columns()):
        new_name = str(field.name())
        before = old.findField(int(field.fieldId()))
        if before is None:
            cols.append(F.lit(None).cast(now[new_name]).alias(new_name))
            continue
        old_name = str(before.name())
        col = F.col("`" + old_name.replace("`", "``") + "`")  # a name with a dot is not a nested field
        cols.append((col if df.schema[old_name].dataType == now[new_name] else col.cast(now[new_name])).alias(new_name))
    return df.select(*cols, *extra)


def _iter(java_iterable) -> Iterator:
    it = java_iterable.iterator()
    try:
        while it.hasNext():
            yield it.next()
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass


def live_data_files(table, snapshot_id: int) -> dict[str, Any]:
    """Path → Java DataFile of every live data file in ``snapshot_id``."""
    files = {}
    for task in _iter(table.newScan().useSnapshot(snapshot_id).planFiles()):
        f = task.file()
        files[str(f.location())] = f
    return files


@dataclass
class NewFile:
    path: str
    file_size_in_bytes: int
    partition: Any = None  # a StructLike of a file already in the partition (None: unpartitioned)
    split_offsets: list[int] | None = None  # its row groups' starting offsets (None: not known)
    nan_value_counts: dict[int, int] | None = None  # field id → NaN values, counted as written


def build_data_files(spark, table, new_files: Iterable[NewFile]) -> list:
    """Java DataFiles for Parquet files we wrote, with metrics read from their footers the way
    Iceberg's own add_files does (``ParquetUtil.fileMetrics`` with the table's MetricsConfig),
    each in its ``partition`` when it has one (the tuple is copied, never parsed) and with its
    row groups' split offsets when known, as Iceberg's own writers record them, and the NaN
    counts of float columns (a footer has none; Iceberg's writers count them as they write) for
    the columns whose counts the MetricsConfig keeps."""
    jvm = spark._jvm
    metrics_config = jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    spec = table.spec()
    parquet = jvm.org.apache.iceberg.FileFormat.PARQUET
    out = []
    for nf in new_files:
        metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(nf.path),
                                                                         metrics_config)
        if nf.nan_value_counts:
            metrics = _with_nan_counts(jvm, metrics, nf.nan_value_counts)
        builder = jvm.org.apache.iceberg.DataFiles.builder(spec).withPath(nf.path).withFormat(parquet) \
            .withFileSizeInBytes(int(nf.file_size_in_bytes)).withMetrics(metrics)
        if nf.partition is not None:
            builder = builder.withPartition(nf.partition)
        if nf.split_offsets:  # boxed in the JVM: py4j would hand a Python int over as an Integer
            offsets = spark.sparkContext._gateway.new_array(jvm.long, len(nf.split_offsets))
            for i, offset in enumerate(nf.split_offsets):
                offsets[i] = int(offset)
            builder = builder.withSplitOffsets(jvm.org.apache.iceberg.util.ArrayUtil.toLongList(offsets))
        out.append(builder.build())
    return out


def _with_nan_counts(jvm, metrics, nan_counts: dict[int, int]):
    """``metrics`` with NaN counts for the fields that have a value count (metrics mode not none)."""
    counted = metrics.valueCounts()
    kept = {str(int(f)): int(n) for f, n in nan_counts.items() if counted is not None and counted.containsKey(int(f))}
    if not kept:
        return metrics
    # A Map<Integer, Long> made by Jackson: py4j hands a small Python int over as an Integer, which
    # the manifest writer cannot cast to the Long a count is.
    mapper = jvm.org.apache.iceberg.util.JsonUtil.mapper()
    of = jvm.java.lang.Class.forName
    long_map = mapper.getTypeFactory().constructMapType(of("java.util.HashMap"), of("java.lang.Integer"),
                                                        of("java.lang.Long"))
    nans = mapper.readValue(json.dumps(kept), long_map)
    return jvm.org.apache.iceberg.Metrics(metrics.recordCount(), metrics.columnSizes(), counted,
                                          metrics.nullValueCounts(), nans, metrics.lowerBounds(),
                                          metrics.upperBounds())


def commit_replace(spark, table, base_snapshot_id: int, old_files: list, new_files: list,
                   properties: dict[str, str], summary: dict[str, str] | None = None) -> int:
    """ONE commit: a ``replace`` snapshot (RewriteFiles validated from the base snapshot, new
    files keeping the base's data sequence number so later equality deletes still apply) and
    the table properties, in one transaction. Returns the new snapshot id.

    ``properties`` may use the placeholder value ``{snapshot-id}``, replaced by the id of the
    snapshot this commit creates.
    """
    base = table.snapshot(base_snapshot_id)
    if base is None:
        raise CommitConflict(f"base snapshot {base_snapshot_id} no longer exists (expired concurrently)")
    tx = table.newTransaction()
    rewrite = tx.newRewrite().validateFromSnapshot(base_snapshot_id).dataSequenceNumber(base.sequenceNumber())
    for f in old_files:
        rewrite.deleteFile(f)
    for f in new_files:
        rewrite.addFile(f)
    for k, v in (summary or {}).items():
        rewrite.set(k, v)
    try:
        rewrite.commit()
        snapshot_id = int(tx.table().currentSnapshot().snapshotId())
        update = tx.updateProperties()
        for k, v in properties.items():
            update.set(k, v.replace("{snapshot-id}", str(snapshot_id)))
        update.commit()
        tx.commitTransaction()
    except Exception as e:  # py4j's Py4JJavaError around the Java exception
        conflict = conflict_exception(getattr(e, "java_exception", None))
        if conflict is None:
            raise
        raise CommitConflict(conflict_message(str(conflict.getClass().getSimpleName()),
                                              str(conflict.getMessage() or ""))) from None
    return snapshot_id


# Iceberg's exceptions for a commit that lost to a concurrent one: a validation of the snapshot
# the rewrite read from failed (ValidationException: "Missing required files to delete" when a
# file it replaces was removed or rewritten, "found new ... delete for replaced data file" when
# row-level deletes were added to one, or the base snapshot no longer an ancestor), or the
# catalog refused the new metadata after the retries (CommitFailedException). Subclasses count.
CONFLICT_EXCEPTIONS = frozenset({"org.apache.iceberg.exceptions.ValidationException",
                                 "org.apache.iceberg.exceptions.CommitFailedException"})
# The commit may have succeeded: never a conflict to retry, whatever it was caused by.
UNKNOWN_STATE_EXCEPTION = "org.apache.iceberg.exceptions.CommitStateUnknownException"


def conflict_exception(throwable):
    """The Java exception (``throwable`` or one of its causes, outermost first) that is an Iceberg
    commit conflict, by class (:data:`CONFLICT_EXCEPTIONS` or a subclass); None when there is
    none, or when the commit's state is unknown first (CommitStateUnknownException)."""
    depth = 0
    while throwable is not None and depth < 32:  # bounded: a (malformed) cause chain may loop
        names = set()
        clazz = throwable.getClass()
        while clazz is not None:
            names.add(str(clazz.getName()))
            clazz = clazz.getSuperclass()
        if UNKNOWN_STATE_EXCEPTION in names:
            return None
        if names & CONFLICT_EXCEPTIONS:
            return throwable
        throwable, depth = throwable.getCause(), depth + 1
    return None


def conflict_message(kind: str, detail: str) -> str:
    """A short, clear CommitConflict message from an Iceberg conflict exception's class (simple
    name) and message (which names every conflicting file and dumps whole DataFile structs)."""
    detail = detail.strip()
    if detail.startswith("Missing required files to delete:"):
        paths = [p for p in detail.split(":", 1)[1].strip().split(",") if p]
        reason = (f"{len(paths)} data file(s) it replaces were already removed or rewritten by another commit "
                  f"({kind}: Missing required files to delete, e.g. {paths[0] if paths else '?'})")
    elif "found new" in detail:
        m = re.search(r"file_path=([^,}]+)", detail)
        reason = (f"another commit added row-level deletes to data file(s) it replaces "
                  f"({kind}: {detail.split(':', 1)[0]}{', e.g. ' + m.group(1) if m else ''})")
    else:
        reason = f"{kind}: {detail.splitlines()[0][:400] if detail else 'no message'}"
    return (f"the table changed concurrently and the rewrite was not committed: {reason}; "
            "the table is as the other commit left it: run the rewrite again on the new snapshot")


def long_column(spark, values, name: str):
    """A DataFrame of one non-null ``bigint`` column ``name`` holding ``values`` (int64 numpy),
    built in the JVM as a local relation; None when the helper cannot be compiled."""
    method = helper("Longs", "longs", ("org.apache.spark.sql.SparkSession", "[B", "java.lang.String"))
    if method is None:
        return None
    from pyspark.sql import DataFrame

    data = bytearray(values.astype(">i8").tobytes())
    return DataFrame(method(spark._jsparkSession, data, name), spark)


def long_view(spark, values, column: str, name: str) -> bool:
    """A temporary view ``name`` of one non-null ``bigint`` column ``column`` holding ``values``
    (int64 numpy), made in the JVM from a local relation (``KeyViews.java``); False when the
    helper cannot be compiled (the caller then takes :func:`long_column` + :func:`temp_view`)."""
    method = helper("KeyViews", "longsView",
                    ("java.lang.Object", "[B", "java.lang.String", "java.lang.String"))
    if method is None:
        return False
    method(spark._jsparkSession, bytearray(values.astype(">i8").tobytes()), column, name)
    return True


def drop_temp_views(spark, names: list[str]) -> None:
    """Drop the temporary views ``names`` (made by :func:`temp_view` / :func:`long_view`, never
    cached) in one call; through ``spark.catalog.dropTempView`` when the helper cannot be compiled."""
    if not names:
        return
    method = helper("KeyViews", "dropViews", ("java.lang.Object", "java.lang.String"))
    if method is None:
        for name in names:
            spark.catalog.dropTempView(name)
    else:
        method(spark._jsparkSession, "\u0000".join(names))


def temp_view(spark, df, name: str) -> None:
    """``df.createOrReplaceTempView(name)``, made directly in the session catalog (``Views.java``)."""
    method = helper("Views", "tempView", ("java.lang.Object", "java.lang.Object", "java.lang.String"))
    if method is None:
        df.createOrReplaceTempView(name)
    else:
        method(spark._jsparkSession, df._jdf, name)


def _keep_tasks(planned, keep_paths: set[str] | None, in_jvm: bool = True):
    """The tasks of ``planned`` (a Java CloseableIterable of FileScanTasks) whose file is in
    ``keep_paths`` (None: all), as a Java List (kept in the JVM) or a Python list of tasks."""
    method = helper("ChosenTasks", "chosen", ("java.lang.Object", "java.lang.String")) if in_jvm else None
    if method is None:
        return [t for t in _iter(planned) if keep_paths is None or str(t.file().location()) in keep_paths]
    paths = None if keep_paths is None else "\u0000".join(keep_paths)  # no path holds a NUL
    return method(planned, paths)


def cached_tasks(table, snapshot_id: int, keep_paths: set[str], key: str):
    """The Java FileScanTasks (a Java List) of ``keep_paths`` in ``snapshot_id`` from the JVM's task
    cache (``TaskCache.java``: the snapshot is planned once, unfiltered, on first use; ``key``
    names the table's snapshot); None when the helper cannot be compiled or a path is not a data
    file of the snapshot."""
    arg_types = ("java.lang.Object", "java.lang.Object", "java.lang.String", "java.lang.String", "java.lang.Object")
    method = helper("TaskCache", "cachedChosen", arg_types)
    if method is None or not keep_paths:
        return None
    return method(table, snapshot_id, key, "\u0000".join(keep_paths), settings.value("taskCache.maxFiles"))


def cached_task_counts() -> tuple[int, int]:
    """(snapshots, tasks) the JVM's task cache holds now ((0, 0) before its first use)."""
    method = helper("TaskCache", "cachedCounts", ())
    counts = method() if method is not None else [0, 0]
    return int(counts[0]), int(counts[1])


def chosen_tasks(table, snapshot_id: int | None, keep_paths: set[str] | None, row_filter=None,
                 *, in_jvm: bool = True) -> tuple[Any, bool]:
    """The Java FileScanTasks of ``snapshot_id`` whose data file is in ``keep_paths`` (None: every
    file; a Java List, or a Python list when ``in_jvm`` is False or the helper does not compile), and
    whether ``row_filter`` was used. With ``row_filter`` (a Java Iceberg Expression,
    the filter pyiceberg planned with) the JVM reads only the manifests and files Iceberg's
    pruning keeps, so the planning is the one Iceberg itself would do for the query, not a
    second plan of the whole snapshot. Every kept path must be found; if one is not (the JVM's
    pruning differed from pyiceberg's), the snapshot is planned again without the filter, so a
    chosen file is never lost. planFiles gives one task per file."""
    def plan(with_filter: bool):
        scan = table.newScan()
        if snapshot_id is not None:
            scan = scan.useSnapshot(snapshot_id)
        if with_filter:
            # The filter prunes manifests and files only: its residuals would make the reader bind
            # them against the read projection, which need not hold the filter's columns
            # (``count(*)``: "Cannot find field ... in struct<>"); rows are filtered by the query.
            scan = scan.filter(row_filter).ignoreResiduals()
        return _keep_tasks(scan.planFiles(), keep_paths, in_jvm)

    if keep_paths is not None and not keep_paths:
        return [], False  # nothing chosen: no JVM planning at all
    if row_filter is not None and keep_paths is not None:
        try:
            tasks = plan(True)
        except Exception:  # py4j-wrapped binding error (e.g. a column the snapshot's schema lacks)
            tasks = None
        if tasks is not None and len(tasks) == len(keep_paths):
            return tasks, True
    return plan(False), False


def task_set_view(spark, table, name: str, tasks, set_id: str, view: str | None) -> bool:
    """Stage ``tasks`` (a non-empty Java List of ``table``'s FileScanTasks) as the task set
    ``set_id`` and register the temporary view ``view`` of the scan of ``name``'s task set, in
    one JVM call (``TaskSetViews.java``); False, with nothing staged, when the helper cannot
    be compiled or refused (the caller then stages the tasks, loads the DataFrame and makes the
    view of it). A ``view`` of None stages the tasks only (:func:`swapped_plan` reads them, or
    :func:`view_of_task_set` makes their view later)."""
    method = helper("TaskSetViews", "stageView", ("java.lang.Object",) * 2 + ("java.lang.String",)
                    + ("java.lang.Object",) + ("java.lang.String",) * 2)
    if method is None:
        return False
    try:
        method(spark._jsparkSession, table, name, tasks, set_id, view)
    except Exception as e:  # e.g. another Iceberg version's source: the DataFrame path
        log.info("pando: task set view of %s not made in the JVM (%s: %s)", name, type(e).__name__, e)
        return False
    return True


def staged_cached_view(spark, table, metadata_location: str, name: str, snapshot_id: int, keep_paths: set[str],
                       cache_key: str, view: str | None):
    """:func:`staged_scan` with ``cache_key`` and ``view`` in one JVM call (``stageCachedView``), for
    ``table`` (a Java table, e.g. :func:`held_table`, unchecked) read from ``metadata_location``:
    a context manager that unstages the tasks on exit (it yields the task set's id: the caller
    reads ``view``, or with a ``view`` of None the set, see :func:`task_set_view`),
    or None with nothing staged when the helper cannot be compiled or refused, the Java table was
    read from another metadata file, or a path is not in the task cache (the caller then takes
    :func:`load_table` and :func:`staged_scan`)."""
    arg_types = ("java.lang.Object",) * 2 + ("java.lang.String",) * 2 + ("java.lang.Object",) \
        + ("java.lang.String",) * 2 + ("java.lang.Object",) + ("java.lang.String",) * 2
    method = helper("Staging", "stageCachedView", arg_types)
    if method is None or not keep_paths:
        return None
    set_id = f"pando-{uuid.uuid4().hex}"
    try:
        status = method(spark._jsparkSession, table, metadata_location, name, snapshot_id, cache_key,
                        "\u0000".join(keep_paths), settings.value("taskCache.maxFiles"), set_id, view)
    except Exception as e:  # e.g. the view refused: nothing is staged, the caller's path decides
        log.info("pando: %s not staged in one JVM call (%s: %s)", name, type(e).__name__, e)
        return None
    return _unstaged_on_exit(spark, table, set_id) if status == 0 else None


@contextmanager
def _unstaged_on_exit(spark, table, set_id: str):
    try:
        yield set_id
    finally:
        unstage(spark, table, set_id)


def view_of_task_set(spark, name: str, set_id: str, view: str) -> None:
    """Register the temporary view ``view`` of the scan of ``name``'s staged task set ``set_id``
    (staged with :func:`task_set_view`'s view of None), in one JVM call."""
    method = helper("TaskSetViews", "taskSetView", ("java.lang.Object",) + ("java.lang.String",) * 3)
    assert method is not None  # the set was staged by the same compiled class
    method(spark._jsparkSession, name, set_id, view)


def analysed_ahead(spark, sql: str):
    """A Java Future of Spark's analysis of ``sql`` as written (``SparkSession.sql``), running on a
    JVM thread while the caller goes on (``analysedAhead``); None when the helper cannot be
    compiled. :func:`analysed` waits for it."""
    method = helper("Staging", "analysedAhead", ("java.lang.Object", "java.lang.String"))
    return None if method is None else method(spark._jsparkSession, sql)


def analysed(future):
    """The Java Dataset of :func:`analysed_ahead`'s future, or None when the analysis failed (the
    error is Spark's to give again)."""
    try:
        return future.get()
    except Exception as e:  # Py4JJavaError around an ExecutionException
        log.debug("pando: the query's analysis ahead failed (%s: %s)", type(e).__name__, str(e)[:500])
        return None


def swapped_plan(spark, dataset, staged: Sequence[tuple[str, str, str]],
                 filtered: Sequence[tuple[str, str, Any]] = ()):
    """The Java Dataset ``dataset`` (a query Spark analysed as written) with every relation of a
    staged table outside views reading its staged task set, and semi-joined with the key sets of
    its table's row filters, without analysing the query again (``swappedPlan``). ``staged``:
    (table uuid, metadata file planned from, task set id) per staged table; ``filtered``: (table
    uuid, integer column, int64 numpy keys) per row filter. None when the helper cannot be
    compiled, or a relation of a staged table cannot read its set (another metadata file, a
    snapshot or branch of its own), a row filter's column is not an integer, or a table has no
    relation outside views: the caller then analyses the query over views of the sets."""
    if not staged and not filtered:
        return dataset
    method = helper("Staging", "swappedPlan", ("java.lang.Object",) * 2 + ("java.lang.String",) * 6 + ("[B",))
    if method is None:
        return None
    import numpy as np

    uuids, locations, set_ids = (["\u0000".join(c) for c in zip(*staged)] if staged else ["", "", ""])
    keys = bytearray(np.concatenate([k for _, _, k in filtered]).astype(">i8").tobytes()) if filtered else bytearray()
    try:
        return method(spark._jsparkSession, dataset, uuids, locations, set_ids,
                      "\u0000".join(u for u, _, _ in filtered), "\u0000".join(c for _, c, _ in filtered),
                      "\u0000".join(str(len(k)) for _, _, k in filtered), keys)
    except Exception as e:  # another Spark's plan classes: the caller's views
        log.info("pando: the analysed query not swapped onto its staged sets (%s: %s)", type(e).__name__, e)
        return None


def with_residuals(spark, dataset, filters: dict[str, str]) -> int:
    """Stage the sets ``dataset`` reads again with residuals (``withResiduals``): per table uuid of
    a staged table, its pruning filter as Iceberg expression JSON (``jvm_filter.expression_json``;
    '' for none) and Spark's own filter of its relation, cut down to the columns Spark's post-scan
    filters read. The number of sets staged again; 0 when the helper cannot be compiled or
    failed (the sets are read as staged)."""
    if not filters:
        return 0
    method = helper("Residuals", "withResiduals",
                    ("java.lang.Object",) * 2 + ("java.lang.String",) * 3)
    if method is None:
        return 0
    case_sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).strip().lower()
    try:
        return int(method(spark._jsparkSession, dataset, "\u0000".join(filters), "\u0000".join(filters.values()),
                          case_sensitive))
    except Exception as e:  # another Spark's plan classes, or a filter the JVM does not parse
        log.info("pando: staged sets not given residuals (%s: %s)", type(e).__name__, str(e)[:300])
        return 0


def unstage(spark, table, set_id: str) -> None:
    """Remove the staged task set ``set_id`` of ``table`` (one JVM call when the helper compiles)."""
    method = helper("TaskCache", "unstage", ("java.lang.Object", "java.lang.String"))
    if method is not None:
        method(table, set_id)
    else:
        manager = jclass(spark.sparkContext._gateway, "org.apache.iceberg.spark.ScanTaskSetManager").get()
        manager.removeTasks(table, set_id)


def staged_split_size(spark, table, set_id: str) -> str | None:
    """The split size Iceberg's own scan would plan the staged task set ``set_id`` of ``table``
    with (``TaskSetViews.adaptiveSplitSize``); None when that rule is off or the
    helper cannot be compiled (the staged scan then keeps the table's fixed split size)."""
    method = helper("TaskSetViews", "adaptiveSplitSize",
                    ("java.lang.Object", "java.lang.Object", "java.lang.String"))
    if method is None:
        return None
    try:
        return method(spark._jsparkSession, table, set_id)
    except Exception as e:  # e.g. another Iceberg version's SparkReadConf
        log.info("pando: no adaptive split size for a staged scan (%s: %s)", type(e).__name__, e)
        return None


@contextmanager
def staged_scan(spark, table, name: str, snapshot_id: int | None, keep_paths: set[str] | None, *, row_filter=None,
                cache_key: str | None = None, view: str | None = None, view_later: bool = False):
    """A DataFrame reading exactly the chosen data files of ``snapshot_id`` through Iceberg's
    scan-task-set path (delete files and schema evolution handled by Iceberg). ``keep_paths``
    None means every file; ``row_filter`` (a Java Expression) lets the JVM find the chosen files
    with Iceberg's own filtered planning (see :func:`chosen_tasks`); ``cache_key`` (naming the
    table's snapshot) takes them from the JVM's task cache instead (:func:`cached_tasks`). The
    staged tasks are removed on exit. With ``view``, the scan is (also) the temporary view of
    that name, made in the JVM when it can be (:func:`task_set_view`), and what is yielded is
    the task set's id then (the caller reads the view; no DataFrame was made). With
    ``view_later`` too, the tasks are staged without the view when they can be (the set's id
    yielded: :func:`swapped_plan` reads it, or :func:`view_of_task_set` makes the view)."""
    jvm = spark._jvm
    found = None
    if cache_key is not None and snapshot_id is not None and keep_paths:
        found = cached_tasks(table, snapshot_id, keep_paths, cache_key)
    nothing = False  # found in the cache: one task per chosen path
    if found is None:
        found, _ = chosen_tasks(table, snapshot_id, keep_paths, row_filter)
        nothing = len(found) == 0
    if isinstance(found, list):  # kept in Python: into a Java list, one task at a time
        tasks = jvm.java.util.ArrayList()
        for task in found:
            tasks.add(task)
    else:
        tasks = found
    if nothing:  # nothing to read (Iceberg refuses to stage an empty task set)
        # The table's current schema, as a staged scan has: not the snapshot's (``snapshot-id``
        # is time travel, under the snapshot's schema: a column renamed since keeps its old name).
        empty = spark.createDataFrame([], spark.read.format("iceberg").load(name).schema)
        if view is not None:
            temp_view(spark, empty, view)
        yield empty
        return
    set_id = f"pando-{uuid.uuid4().hex}"
    if view is not None and task_set_view(spark, table, name, tasks, set_id, None if view_later else view):
        with _unstaged_on_exit(spark, table, set_id) as staged:
            yield staged
        return
    jclass(spark.sparkContext._gateway, "org.apache.iceberg.spark.ScanTaskSetManager").get() \
        .stageTasks(table, set_id, tasks)
    try:
        reader = spark.read.format("iceberg").option("scan-task-set-id", set_id)
        split = staged_split_size(spark, table, set_id)
        if split is not None:
            reader = reader.option("split-size", split)
        df = reader.load(name)
        if view is not None:
            temp_view(spark, df, view)
        yield df
    finally:
        unstage(spark, table, set_id)


SCAN_METRICS = ("resultDataFiles", "skippedDataFiles", "totalDataFileSize", "numOutputRows")


def executed_nodes(df) -> Iterator[tuple[Any, bool]]:
    """The nodes of the plan an action on ``df`` executed, each with whether it is in the final
    plan. Call after an action ran on ``df``.

    Adaptive query execution hides finished stages behind query-stage nodes, and when a stage's
    result makes the rest of the plan empty (TPC-H Q18 at small scale: no order passes the HAVING)
    it replaces the whole final plan by an empty ``LocalTableScan``. So the walk covers the final
    plan and the initial plan (``final`` False: nodes there may never have run)."""
    def visit(node, final: bool) -> Iterator[tuple[Any, bool]]:
        yield node, final
        children = node.children()
        for i in range(children.size()):
            yield from visit(children.apply(i), final)
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            yield from visit(node.executedPlan(), final)
            yield from visit(node.initialPlan(), False)
        elif kind.endswith("QueryStageExec"):
            yield from visit(node.plan(), final)

    yield from visit(df._jdf.queryExecution().executedPlan(), True)


def planned_partitions(df, *, in_jvm: bool = True) -> int:
    """Build ``df``'s executed plan and every Iceberg scan's input partitions in it (the initial
    plan under adaptive execution: where Iceberg plans its file tasks), without running it; the
    number of input partitions. One JVM call (``PlannedPartitions.java``); through py4j, a node at a
    time, when ``in_jvm`` is False or the helper cannot be compiled."""
    root = df._jdf.queryExecution().executedPlan()
    method = helper("PlannedPartitions", "plannedPartitions", ("java.lang.Object",)) if in_jvm else None
    if method is not None:
        return int(method(root))
    total, stack, seen = 0, [root], set()
    while stack:
        node = stack.pop()
        if int(node.id()) in seen:
            continue
        seen.add(int(node.id()))
        if node.nodeName().startswith("BatchScan"):
            total += int(node.inputPartitions().size())
        if node.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            stack.append(node.initialPlan())
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return total


def executed_scans(df) -> list[tuple[str, dict[str, int]]]:
    """The scans an action on ``df`` executed: ``(table name, metrics)`` per ``BatchScan`` node
    (Iceberg's resultDataFiles / skippedDataFiles / totalDataFileSize where the scan reports them,
    numOutputRows), each node once (by plan id; :func:`executed_nodes`): a node only in the
    initial plan counts if it ran (it produced rows or read files)."""
    found: dict[int, tuple[str, dict[str, int], bool]] = {}
    for node, final in executed_nodes(df):
        if node.nodeName().startswith("BatchScan"):
            metrics = node.metrics()
            m = {k: int(metrics.apply(k).value()) for k in SCAN_METRICS if metrics.contains(k)}
            name = str(node.nodeName())[len("BatchScan"):].strip()
            key = int(node.id())
            found[key] = (name, m, final or (key in found and found[key][2]))
    return [(name, m) for name, m, final in found.values()
            if final or m.get("numOutputRows", 0) or m.get("resultDataFiles", 0)]


def executed_shuffle_ids(df) -> set[int]:
    """The shuffles an action on ``df`` wrote: the exchanges whose shuffle dependency exists, which
    Spark creates when the exchange first runs and then sets the exchange's ``numPartitions``
    metric (an exchange that never ran is not asked for its dependency: asking would create and
    register a new shuffle)."""
    ids = set()
    for node, _ in executed_nodes(df):
        if node.getClass().getSimpleName() == "ShuffleExchangeExec":
            metrics = node.metrics()
            if metrics.contains("numPartitions") and int(metrics.apply("numPartitions").value()) > 0:
                ids.add(int(node.shuffleDependency().shuffleId()))
    return ids


def scan_metrics(df) -> dict[str, int]:
    """:func:`executed_scans`' metrics summed over every executed scan."""
    totals: dict[str, int] = {}
    for _, m in executed_scans(df):
        for k, v in m.items():
            totals[k] = totals.get(k, 0) + v
    return totals
