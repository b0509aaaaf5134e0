"""Spark reads of chosen data files through the JVM: their Iceberg scan tasks found (planned in
the JVM, or from its task cache), staged as scan-task sets (Iceberg's ``scan-task-set-id`` read
option) and read as DataFrames or temporary views; key columns from the driver as local relations;
the query Spark analysed swapped onto the staged sets. Each step is one call of a Java helper
(:mod:`.jvm_classes`) where it compiles, else a portable path through py4j.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

from .. import settings
from .jvm_classes import helper, java_iter, jclass

log = logging.getLogger(__name__)


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
        return [t for t in java_iter(planned) if keep_paths is None or str(t.file().location()) in keep_paths]
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


def with_residuals(spark, dataset, filters: dict[str, str],
                   snapshots: dict[str, int | None]) -> tuple[Any, list[tuple[Any, str]]]:
    """Stage the sets ``dataset`` reads again with residuals (``withResiduals``): per table uuid of
    a staged table, its pruning filter as Iceberg expression JSON (``jvm_filter.expression_json``;
    '' for none) and Spark's own filter of its relation, cut down to the columns Spark's post-scan
    filters read; a set several relations read is copied for each with a residual of its own. A
    file Iceberg's planning of ``snapshots[uuid]`` (the snapshot the set was planned from) with the
    residual drops is dropped from the set.
    (The Dataset to run — ``dataset``, or one whose relations read those copies — and the
    ``(Java table, set id)`` of the copies, which the caller unstages with its sets.) When the helper
    cannot be compiled or failed: ``(dataset, [])``, the sets read as staged."""
    if not filters:
        return dataset, []
    method = helper("Residuals", "withResiduals",
                    ("java.lang.Object",) * 2 + ("java.lang.String",) * 4)
    if method is None:
        return dataset, []
    case_sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).strip().lower()
    try:
        out = method(spark._jsparkSession, dataset, "\u0000".join(filters), "\u0000".join(filters.values()),
                     "\u0000".join("" if snapshots.get(u) is None else str(snapshots[u]) for u in filters),
                     case_sensitive)
    except Exception as e:  # another Spark's plan classes, or a filter the JVM does not parse
        log.info("pando: staged sets not given residuals (%s: %s)", type(e).__name__, str(e)[:300])
        return dataset, []
    return out[0], [(copy[0], str(copy[1])) for copy in out[1]]


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
