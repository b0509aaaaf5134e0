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
    one JVM call (:func:`_staging`), three through py4j when the helper cannot be compiled."""
    method = _staging("metadataLocation", ("java.lang.Object",))
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
    except Exception as e:  # py4j wraps ValidationException / CommitFailedException
        text = str(e)
        if any(s in text for s in ("ValidationException", "CommitFailedException", "Missing required files",
                                   "found new")):
            raise CommitConflict(conflict_message(text)) from None
        raise
    return snapshot_id


def conflict_message(text: str) -> str:
    """A short, clear CommitConflict message from a py4j-wrapped Iceberg exception's text (which
    names every conflicting file and dumps whole DataFile structs)."""
    lines = [ln.strip().lstrip(":").strip() for ln in text.splitlines()]
    line = next((ln for ln in lines if "Exception:" in ln and ln.startswith("org.")), None) \
        or next((ln for ln in lines if "Exception" in ln), lines[0] if lines else "")
    kind, _, detail = line.partition(": ")
    kind = kind.rsplit(".", 1)[-1]
    if detail.startswith("Missing required files to delete:"):
        paths = [p for p in detail.split(":", 1)[1].strip().split(",") if p]
        reason = (f"{len(paths)} data file(s) it replaces were already removed or rewritten by another commit "
                  f"({kind}: Missing required files to delete, e.g. {paths[0] if paths else '?'})")
    elif "found new" in detail:
        m = re.search(r"file_path=([^,}]+)", detail)
        reason = (f"another commit added row-level deletes to data file(s) it replaces "
                  f"({kind}: {detail.split(':', 1)[0]}{', e.g. ' + m.group(1) if m else ''})")
    else:
        reason = f"{kind}: {detail[:400] or line[:400]}"
    return (f"the table changed concurrently and the rewrite was not committed: {reason}; "
            "the table is as the other commit left it: run the rewrite again on the new snapshot")


# Keeping the chosen tasks of a planFiles() inside the JVM: through py4j, each task costs four
# round trips (hasNext, next, file, location), ~40 ms for 60 files, more than the planning itself.
# Compiled once per JVM with Janino (Spark's own code generator, always on Spark's classpath).
_CHOSEN_SOURCE = """
public static java.util.List chosen(Object planned, String joinedPaths) throws java.io.IOException {
    java.util.Set paths = joinedPaths == null ? null
        : new java.util.HashSet(java.util.Arrays.asList(joinedPaths.split("\\u0000", -1)));
    java.util.List out = new java.util.ArrayList();
    org.apache.iceberg.io.CloseableIterable files = (org.apache.iceberg.io.CloseableIterable) planned;
    try {
        java.util.Iterator it = files.iterator();
        while (it.hasNext()) {
            org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) it.next();
            if (paths == null || paths.contains(task.file().location())) out.add(task);
        }
    } finally {
        files.close();
    }
    return out;
}
"""
# The FileScanTasks of recent snapshots by data file, kept in the JVM: a held-out query's chosen
# files are then a lookup, not a planning of the table in the JVM besides pyiceberg's (
# 14 ms per table for TPC-H SF 1 lineitem with the pushed filter, 25 ms without). A snapshot's
# tasks never change (no residual: rows are filtered by the query). Least recently used
# snapshots go first once more than ``maxTasks`` tasks are kept; a larger snapshot is not kept.
_CACHED_SOURCE = """
static final java.util.LinkedHashMap SNAPSHOTS = new java.util.LinkedHashMap(16, 0.75f, true);
static long kept = 0;

public static synchronized java.util.List cachedChosen(Object tableObject, Object snapshotId, String key,
        String joinedPaths, Object maxTasks) throws java.io.IOException {
    long limit = ((Number) maxTasks).longValue();
    java.util.Map byPath = (java.util.Map) SNAPSHOTS.get(key);
    if (byPath == null) {
        org.apache.iceberg.Table table = (org.apache.iceberg.Table) tableObject;
        byPath = new java.util.HashMap();
        long snapshot = ((Number) snapshotId).longValue();
        org.apache.iceberg.io.CloseableIterable files = table.newScan().useSnapshot(snapshot).planFiles();
        try {
            java.util.Iterator it = files.iterator();
            while (it.hasNext()) {
                org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) it.next();
                byPath.put(task.file().location(), task);
            }
        } finally {
            files.close();
        }
        if (byPath.size() <= limit) {
            SNAPSHOTS.put(key, byPath);
            kept += byPath.size();
            java.util.Iterator eldest = SNAPSHOTS.entrySet().iterator();
            while (kept > limit && eldest.hasNext()) {
                java.util.Map.Entry entry = (java.util.Map.Entry) eldest.next();
                kept -= ((java.util.Map) entry.getValue()).size();
                eldest.remove();
            }
        }
    }
    String[] paths = joinedPaths.split("\\u0000", -1);
    java.util.List out = new java.util.ArrayList(paths.length);
    for (int i = 0; i < paths.length; i++) {
        Object task = byPath.get(paths[i]);
        if (task == null) {
            return null;
        }
        out.add(task);
    }
    return out;
}

public static synchronized long[] cachedCounts() {
    return new long[] {SNAPSHOTS.size(), kept};
}

public static String metadataLocation(Object table) {
    if (!(table instanceof org.apache.iceberg.HasTableOperations)) {
        return null;
    }
    org.apache.iceberg.TableMetadata current = ((org.apache.iceberg.HasTableOperations) table).operations().current();
    return current == null ? null : current.metadataFileLocation();
}

public static void unstage(Object table, String setId) {
    org.apache.iceberg.spark.ScanTaskSetManager.get().removeTasks((org.apache.iceberg.Table) table, setId);
}
"""
# A long column from the driver as a local relation (broadcast without a job): py4j passes the
# keys as one byte[]; ``spark.createDataFrame`` of an Arrow batch costs 16 ms for 100 keys and
# 176 ms for 100,000 (TPC-H SF 1 row filters).
_LONGS_SOURCE = """
public static org.apache.spark.sql.Dataset longs(org.apache.spark.sql.SparkSession spark, byte[] data, String name) {
    java.nio.LongBuffer values = java.nio.ByteBuffer.wrap(data).asLongBuffer();
    java.util.List rows = new java.util.ArrayList(values.remaining());
    while (values.hasRemaining()) {
        rows.add(org.apache.spark.sql.RowFactory.create(new Object[] {Long.valueOf(values.get())}));
    }
    org.apache.spark.sql.types.StructType schema = new org.apache.spark.sql.types.StructType()
        .add(name, org.apache.spark.sql.types.DataTypes.LongType, false);
    return spark.createDataFrame(rows, schema);
}
"""
# A temporary view of a DataFrame, made the way Spark's CreateViewCommand makes one for
# ``createOrReplaceTempView`` (ViewHelper.createTemporaryViewRelation: the analyzed plan kept),
# without running the command as a query: 2.4 ms instead of 14.5 for a staged Iceberg scan
# (a query with row filters and staged tables made four). Spark 3.5's API; with
# another Spark the source does not compile and ``temp_view`` takes Spark's public path.
_REGISTER_VIEW = """
static void registerView(org.apache.spark.sql.SparkSession spark,
                         org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, String name) {
    final org.apache.spark.sql.catalyst.catalog.SessionCatalog catalog = spark.sessionState().catalog();
    scala.Function1 rawTempView = new scala.runtime.AbstractFunction1() {
        public Object apply(Object view) { return catalog.getRawTempView((String) view); }
    };
    org.apache.spark.sql.catalyst.catalog.TemporaryViewRelation relation =
        org.apache.spark.sql.execution.command.ViewHelper.createTemporaryViewRelation(
            org.apache.spark.sql.catalyst.TableIdentifier.apply(name), spark, true, rawTempView,
            scala.Option.empty(), plan, plan, (scala.collection.Seq) scala.collection.immutable.Nil$.MODULE$);
    catalog.createTempView(name, relation, true);
}
"""
_VIEW_SOURCE = _REGISTER_VIEW + """
public static void tempView(Object session, Object dataset, String name) {
    org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan =
        ((org.apache.spark.sql.Dataset) dataset).queryExecution().analyzed();
    registerView(spark, plan, name);
}
"""
# A long column from the driver registered as a temporary view of a local relation, in one
# call: no Dataset is made, so Spark's analyzer does not run over it (a LocalRelation is resolved
# as built; 3 ms of ``longs`` + ``tempView`` for 10 keys). Its rows are a Scala Vector
# and the node is marked analyzed, as in a Dataset's analyzed plan: over the Java list's wrapper,
# unmarked, analysing a query reading 10,000 keys took 66 ms instead of 16. The views of one query
# are dropped in one call, from the session catalog (``spark.catalog.dropTempView`` also looks
# for cached data of each view: these private views are never cached).
_LONG_RELATION = """
// The next n longs of values as a local relation of one non-null bigint column.
static org.apache.spark.sql.catalyst.plans.logical.LocalRelation longRelation(java.nio.LongBuffer values, int n,
                                                                               String column) {
    java.util.List rows = new java.util.ArrayList(n);
    for (int i = 0; i < n; i++) {
        rows.add(new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(
            new Object[] {Long.valueOf(values.get())}));
    }
    org.apache.spark.sql.types.StructType schema = new org.apache.spark.sql.types.StructType()
        .add(column, org.apache.spark.sql.types.DataTypes.LongType, false);
    return new org.apache.spark.sql.catalyst.plans.logical.LocalRelation(
        (scala.collection.Seq) org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttributes(schema),
        (scala.collection.Seq) scala.collection.JavaConverters.asScalaBuffer(rows).toVector(), false);
}
"""
_KEY_VIEW_SOURCE = _REGISTER_VIEW + _LONG_RELATION + """
public static void longsView(Object session, byte[] data, String column, String name) {
    org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
    java.nio.LongBuffer values = java.nio.ByteBuffer.wrap(data).asLongBuffer();
    org.apache.spark.sql.catalyst.plans.logical.LocalRelation plan = longRelation(values, values.remaining(), column);
    plan.setAnalyzed();  // resolved as built, like the analyzed plan of a Dataset
    registerView(spark, plan, name);
}

public static void dropViews(Object session, String joinedNames) {
    org.apache.spark.sql.catalyst.catalog.SessionCatalog catalog =
        ((org.apache.spark.sql.SparkSession) session).sessionState().catalog();
    String[] names = joinedNames.split("\\u0000", -1);
    for (int i = 0; i < names.length; i++) {
        catalog.dropTempView(names[i]);
    }
}
"""
# A staged task set's scan registered as a temporary view in one call, the way
# ``spark.read.format("iceberg").option("scan-task-set-id", id).load(name)`` builds it
# (DataSourceV2Utils.loadV2Source: Iceberg's source names the catalog and identifier, the
# catalog loads the table, a DataSourceV2Relation over it with the same options) without
# what only a Dataset needs: looking the source up among every DataSourceRegister on the
# classpath (ServiceLoader), the analysis of the relation and a row encoder. A JFR profile of
# the TPC-H SF 1 join queries put 87 of 880 samples of the py4j thread in that ``load``, half of
# them in Dataset.ofRows and a fifth in the ServiceLoader.
# Its split size is the one Iceberg's own scan of the same files would take: a staged scan
# (SparkStagedScan) groups its tasks by the table's fixed split size (128 MB), where a planned
# scan (SparkPartitioningAwareScan) shrinks it to spread a small scan over the session's
# parallelism (TableScanUtil.adjustSplitSize, `read.split.adaptive-size.enabled`). Without it,
# the 10-40 MB a pruned TPC-H SF 1 join query reads of lineitem was one task on one core.
_TASK_SET_VIEW_SOURCE = _REGISTER_VIEW + """
static org.apache.iceberg.spark.source.IcebergSource source;
static final java.util.Map RESOLVED = java.util.Collections.synchronizedMap(new java.util.HashMap());

public static String adaptiveSplitSize(Object session, Object icebergTable, String setId) {
    org.apache.iceberg.Table table = (org.apache.iceberg.Table) icebergTable;
    org.apache.iceberg.spark.SparkReadConf conf = new org.apache.iceberg.spark.SparkReadConf(
        (org.apache.spark.sql.SparkSession) session, table, new java.util.HashMap());
    java.util.List tasks = org.apache.iceberg.spark.ScanTaskSetManager.get().fetchTasks(table, setId);
    if (tasks == null || !conf.adaptiveSplitSizeEnabled()) {
        return null;
    }
    long size = 0;
    for (java.util.Iterator it = tasks.iterator(); it.hasNext();) {
        size += ((org.apache.iceberg.ScanTask) it.next()).sizeBytes();
    }
    return String.valueOf(
        org.apache.iceberg.util.TableScanUtil.adjustSplitSize(size, conf.parallelism(), conf.splitSize()));
}

public static void taskSetView(Object session, String name, String setId, String view) throws Exception {
    org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
    if (source == null) {
        source = new org.apache.iceberg.spark.source.IcebergSource();
    }
    java.util.Map options = new java.util.HashMap();
    scala.collection.Iterator sessionOptions = org.apache.spark.sql.execution.datasources.v2.DataSourceV2Utils
        .extractSessionConfigs(source, spark.sessionState().conf()).iterator();
    while (sessionOptions.hasNext()) {
        scala.Tuple2 kv = (scala.Tuple2) sessionOptions.next();
        options.put(kv._1(), kv._2());
    }
    options.put("path", name);
    options.put("scan-task-set-id", setId);
    org.apache.spark.sql.util.CaseInsensitiveStringMap dsOptions =
        new org.apache.spark.sql.util.CaseInsensitiveStringMap(options);
    // Resolving the name parses it twice (0.9 ms per staged table): the result is kept per
    // session (this one and the active one, which IcebergSource reads), name, current catalog
    // and namespace, the source's session options and whether Iceberg's path-keyed table cache
    // holds the name: all it depends on besides the task set id, which only selects the
    // staged scan ("rewrite") and does so for every set alike.
    org.apache.spark.sql.connector.catalog.CatalogManager manager = spark.sessionState().catalogManager();
    java.util.Map keyed = new java.util.TreeMap(options);
    keyed.remove("scan-task-set-id");
    String key = System.identityHashCode(spark) + "\u0000"
        + System.identityHashCode(org.apache.spark.sql.SparkSession.active()) + "\u0000" + name
        + "\u0000" + manager.currentCatalog().name() + "\u0000" + java.util.Arrays.toString(manager.currentNamespace())
        + "\u0000" + keyed + "\u0000" + org.apache.iceberg.spark.SparkTableCache.get().contains(name);
    Object[] resolved = (Object[]) RESOLVED.get(key);
    if (resolved == null || resolved[2] != spark) {
        if (RESOLVED.size() > 1000) {
            RESOLVED.clear();
        }
        resolved = new Object[] {
            source.extractIdentifier(dsOptions),
            org.apache.spark.sql.connector.catalog.CatalogV2Util.getTableProviderCatalog(source, manager, dsOptions),
            spark};
        RESOLVED.put(key, resolved);
    }
    org.apache.spark.sql.connector.catalog.Identifier ident =
        (org.apache.spark.sql.connector.catalog.Identifier) resolved[0];
    org.apache.spark.sql.connector.catalog.TableCatalog catalog =
        (org.apache.spark.sql.connector.catalog.TableCatalog) resolved[1];
    org.apache.spark.sql.connector.catalog.Table table = catalog.loadTable(ident);
    if (table instanceof org.apache.iceberg.spark.source.SparkTable && !dsOptions.containsKey("split-size")) {
        String split = adaptiveSplitSize(spark, ((org.apache.iceberg.spark.source.SparkTable) table).table(), setId);
        if (split != null) {
            options.put("split-size", split);
            dsOptions = new org.apache.spark.sql.util.CaseInsensitiveStringMap(options);
        }
    }
    org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation plan =
        org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation.create(
            table, scala.Option.apply(catalog), scala.Option.apply(ident), dsOptions);
    plan.setAnalyzed();  // resolved as built, like the analyzed plan of the Dataset load() returns
    registerView(spark, plan, view);
}

// The tasks staged and their view made in one call (two py4j round trips fewer per staged table);
// when the view cannot be made, the tasks are removed again and the error is the caller's. A
// null view stages the tasks only.
public static void stageView(Object session, Object icebergTable, String name, Object tasks, String setId,
                             String view) throws Exception {
    org.apache.iceberg.Table table = (org.apache.iceberg.Table) icebergTable;
    org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
    manager.stageTasks(table, setId, (java.util.List) tasks);
    if (view == null) {
        return;  // staged only: the caller reads the set through swappedPlan, or makes its view later
    }
    try {
        taskSetView(session, name, setId, view);
    } catch (Exception e) {
        manager.removeTasks(table, setId);
        throw e;
    }
}
"""
# The staging of a table whose chosen files are found in the task cache, in one py4j call
# (checking the Java table's metadata file, looking the tasks up and staging them with
# their view took three calls and a Java list to release, ~0.5 ms per staged table). One class
# with the task cache: its static state (the cached snapshots) is then the only one in the JVM
# (see :func:`_staging`).
_STAGING_SOURCE = _TASK_SET_VIEW_SOURCE + _CACHED_SOURCE + _LONG_RELATION + """
public static int stageCachedView(Object session, Object icebergTable, String location, String name,
        Object snapshotId, String key, String joinedPaths, Object maxTasks, String setId, String view)
        throws Exception {
    if (!location.equals(metadataLocation(icebergTable))) {
        return 1;  // read from another metadata file: the caller reloads the table
    }
    java.util.List tasks = cachedChosen(icebergTable, snapshotId, key, joinedPaths, maxTasks);
    if (tasks == null) {
        return 2;  // a chosen file is not a data file of the cached snapshot: the caller plans
    }
    stageView(session, icebergTable, name, tasks, setId, view);
    return 0;
}

// Spark's analysis of a query as written, started on a JVM thread of its own (a Future of the
// Dataset): from a Python thread it would start and finish only when that thread gets the GIL
// back from the planning (up to the 5 ms switch interval each way).
static java.util.concurrent.ExecutorService analysis;

public static synchronized Object analysedAhead(Object session, String sql) {
    if (analysis == null) {
        analysis = java.util.concurrent.Executors.newCachedThreadPool(new java.util.concurrent.ThreadFactory() {
            public Thread newThread(Runnable r) {
                Thread thread = new Thread(r, "pando-analysis");
                thread.setDaemon(true);
                return thread;
            }
        });
    }
    final org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
    final String text = sql;
    return analysis.submit(new java.util.concurrent.Callable() {
        public Object call() {
            return spark.sql(text);
        }
    });
}

// The analysed plan of the user's own query with each of its relations of a staged table reading
// the staged task set (Spark analyses the query while Python plans its tables, instead
// of analysing a rewritten query over temporary views afterwards). The relation keeps its output
// attributes, so the plan stays resolved: only its options gain the task set id (and the split
// size Iceberg's own scan would take), with which SparkTable.newScanBuilder builds the staged
// scan. A table's row filters become broadcast left semi-joins of its relations with local
// relations of their keys (the integer column's rows among the keys; the relation's output kept).
// Relations inside a view are the view's, not the query's: left alone. Null when a relation of a
// staged table cannot read its set (another metadata file, a snapshot or branch of its own,
// options of its own naming a set), a row filter's column is not an integer, or a table has no
// relation outside views.
public static Object swappedPlan(Object session, Object dataset, String joinedUuids, String joinedLocations,
                                 String joinedSetIds, String joinedFilterUuids, String joinedFilterColumns,
                                 String joinedFilterCounts, byte[] filterKeys) {
    org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan analysed =
        ((org.apache.spark.sql.Dataset) dataset).queryExecution().analyzed();
    java.util.Map sets = new java.util.HashMap();  // uuid -> {location, set id, split size, row filters}
    if (joinedUuids.length() > 0) {
        String[] uuids = joinedUuids.split("\u0000", -1);
        String[] locations = joinedLocations.split("\u0000", -1);
        String[] setIds = joinedSetIds.split("\u0000", -1);
        for (int i = 0; i < uuids.length; i++) {
            sets.put(uuids[i], new Object[] {locations[i], setIds[i], null, null});
        }
    }
    if (joinedFilterUuids.length() > 0) {
        String[] uuids = joinedFilterUuids.split("\u0000", -1);
        String[] columns = joinedFilterColumns.split("\u0000", -1);
        String[] counts = joinedFilterCounts.split("\u0000", -1);
        java.nio.LongBuffer values = java.nio.ByteBuffer.wrap(filterKeys).asLongBuffer();
        for (int i = 0; i < uuids.length; i++) {
            Object[] set = (Object[]) sets.get(uuids[i]);
            if (set == null) {
                set = new Object[] {null, null, null, null};
                sets.put(uuids[i], set);
            }
            if (set[3] == null) {
                set[3] = new java.util.ArrayList();
            }
            ((java.util.List) set[3]).add(new Object[] {columns[i],
                longRelation(values, Integer.parseInt(counts[i]), "__pando_key")});
        }
    }
    java.util.Set found = new java.util.HashSet();
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan swapped;
    try {
        swapped = swapped(spark, analysed, sets, found);
    } catch (IllegalStateException e) {
        return null;  // a relation that cannot read its set (relation below)
    }
    if (found.size() != sets.size()) {
        return null;  // a table with no relation outside views
    }
    if (swapped == analysed) {
        return dataset;
    }
    swapped.setAnalyzed();  // resolved as analysed: Spark's analyzer does not run over it again
    return org.apache.spark.sql.Dataset$.MODULE$.ofRows(spark, swapped);
}

static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan swapped(
        final org.apache.spark.sql.SparkSession spark, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
        final java.util.Map sets, final java.util.Set found) {
    if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.View) {
        return plan;
    }
    if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) {
        return relation(spark, (org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) plan, sets, found);
    }
    java.util.List children = new java.util.ArrayList();
    boolean changed = false;
    for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan child =
            (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next();
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan now = swapped(spark, child, sets, found);
        changed |= now != child;
        children.add(now);
    }
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out = !changed ? plan
        : (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plan.withNewChildren(
            scala.collection.JavaConverters.asScalaBuffer(children).toSeq());
    if (out.subqueries().isEmpty()) {
        return out;
    }
    return (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) out.transformExpressions(
        new scala.runtime.AbstractPartialFunction() {
            public boolean isDefinedAt(Object e) {
                return e instanceof org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
            }
            public Object applyOrElse(Object e, scala.Function1 otherwise) {
                if (!isDefinedAt(e)) {
                    return otherwise.apply(e);
                }
                org.apache.spark.sql.catalyst.expressions.SubqueryExpression subquery =
                    (org.apache.spark.sql.catalyst.expressions.SubqueryExpression) e;
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan inner =
                    (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) subquery.plan();
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan now = swapped(spark, inner, sets, found);
                return now == inner ? subquery : subquery.withNewPlan(now);
            }
        });
}

static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan relation(org.apache.spark.sql.SparkSession spark,
        org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation, java.util.Map sets,
        java.util.Set found) {
    if (!(relation.table() instanceof org.apache.iceberg.spark.source.SparkTable)) {
        return relation;
    }
    org.apache.iceberg.spark.source.SparkTable sparkTable =
        (org.apache.iceberg.spark.source.SparkTable) relation.table();
    if (!(sparkTable.table() instanceof org.apache.iceberg.BaseTable)) {
        return relation;  // a metadata table (t.files, t.snapshots, ...)
    }
    org.apache.iceberg.TableMetadata current =
        ((org.apache.iceberg.BaseTable) sparkTable.table()).operations().current();
    Object[] set = (Object[]) sets.get(current.uuid());
    if (set == null) {
        return relation;
    }
    if (sparkTable.snapshotId() != null || sparkTable.branch() != null) {
        throw new IllegalStateException("a snapshot or branch of its own");
    }
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out = relation;
    if (set[1] != null) {
        if (!set[0].equals(current.metadataFileLocation()) || relation.options().containsKey("scan-task-set-id")) {
            throw new IllegalStateException("another metadata file, or a set of its own");
        }
        if (set[2] == null) {  // once per set: its tasks' sizes summed
            String split = relation.options().containsKey("split-size") ? null
                : adaptiveSplitSize(spark, sparkTable.table(), (String) set[1]);
            set[2] = split == null ? "" : split;
        }
        java.util.Map options = new java.util.HashMap(relation.options().asCaseSensitiveMap());
        options.put("scan-task-set-id", set[1]);
        if (((String) set[2]).length() > 0) {
            options.put("split-size", set[2]);
        }
        out = relation.copy(relation.table(), relation.output(), relation.catalog(), relation.identifier(),
            new org.apache.spark.sql.util.CaseInsensitiveStringMap(options));
        out.copyTagsFrom(relation);
    }
    if (set[3] != null) {
        org.apache.spark.sql.catalyst.plans.logical.JoinHint broadcast =
            new org.apache.spark.sql.catalyst.plans.logical.JoinHint(scala.Option.empty(), scala.Option.apply(
                new org.apache.spark.sql.catalyst.plans.logical.HintInfo(scala.Option.apply(
                    org.apache.spark.sql.catalyst.plans.logical.BROADCAST$.MODULE$))));
        for (java.util.Iterator it = ((java.util.List) set[3]).iterator(); it.hasNext();) {
            Object[] filter = (Object[]) it.next();
            org.apache.spark.sql.catalyst.expressions.Attribute column = null;
            for (scala.collection.Iterator a = relation.output().iterator(); a.hasNext();) {
                org.apache.spark.sql.catalyst.expressions.Attribute attribute =
                    (org.apache.spark.sql.catalyst.expressions.Attribute) a.next();
                if (attribute.name().equalsIgnoreCase((String) filter[0])) {
                    column = attribute;
                }
            }
            if (column == null || !(column.dataType() instanceof org.apache.spark.sql.types.IntegralType)) {
                throw new IllegalStateException("a row filter's column is not an integer");
            }
            org.apache.spark.sql.catalyst.expressions.Expression value = column;
            if (!(column.dataType() instanceof org.apache.spark.sql.types.LongType)) {
                // widened to bigint, as Spark's analyzer does in the rewritten query's semi-join
                value = new org.apache.spark.sql.catalyst.expressions.Cast(column,
                    org.apache.spark.sql.types.DataTypes.LongType, scala.Option.empty(),
                    org.apache.spark.sql.catalyst.expressions.EvalMode$.MODULE$.LEGACY());
            }
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan keys =
                ((org.apache.spark.sql.catalyst.plans.logical.LocalRelation) filter[1]).newInstance();
            out = new org.apache.spark.sql.catalyst.plans.logical.Join(out, keys,
                org.apache.spark.sql.catalyst.plans.LeftSemi$.MODULE$,
                scala.Option.apply(new org.apache.spark.sql.catalyst.expressions.EqualTo(
                    value, (org.apache.spark.sql.catalyst.expressions.Expression) keys.output().head())),
                broadcast);
        }
    }
    found.add(current.uuid());
    return out;
}

// Spark's own Iceberg scan hands Iceberg its pushed filter, which becomes each task's residual:
// Iceberg's Parquet and ORC readers skip the row groups whose statistics or dictionaries show no
// row can pass it, before Spark's Filter sees a row. A staged task carries no residual, so under
// ANSI mode an expression of the query (a CAST, an overflow) could raise on a row of such a row
// group that Spark's own plan never reads. Each staged set of ``dataset`` is staged again with
// the residual of its table's pruning filter (Iceberg expression JSON by table uuid, '' for none)
// and of Spark's own filter of the set's relation, cut down to the conjuncts over columns that
// every post-scan Filter directly above a relation of the set reads (so the scan's read schema
// holds them: the reader binds the residual against it). The
// columns are learned from an optimization of its own (the Dataset's plan is not optimized
// here: its scans would fetch their tasks before they are staged again). The number of sets
// staged again.
public static int withResiduals(Object session, Object dataset, String joinedUuids, String joinedFilters,
                                String sensitive) {
    org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
    boolean caseSensitive = "true".equals(sensitive);
    java.util.Map filters = new java.util.HashMap();
    String[] uuids = joinedUuids.split("\u0000", -1);
    String[] texts = joinedFilters.split("\u0000", -1);
    for (int i = 0; i < uuids.length; i++) {
        filters.put(uuids[i], texts[i]);
    }
    org.apache.spark.sql.catalyst.plans.logical.LogicalPlan optimized =
        (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) spark.sessionState().optimizer().execute(
            ((org.apache.spark.sql.Dataset) dataset).queryExecution().analyzed());
    java.util.Map scans = new java.util.LinkedHashMap();  // set id -> {Iceberg table, columns every Filter reads}
    filteredScans(optimized, null, scans, caseSensitive);
    org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
    int restaged = 0;
    for (java.util.Iterator it = scans.entrySet().iterator(); it.hasNext();) {
        java.util.Map.Entry entry = (java.util.Map.Entry) it.next();
        Object[] scan = (Object[]) entry.getValue();
        org.apache.iceberg.Table table = (org.apache.iceberg.Table) scan[0];
        java.util.Set columns = (java.util.Set) scan[1];
        if (!(table instanceof org.apache.iceberg.BaseTable) || columns.isEmpty()) {
            continue;
        }
        String text = (String) filters.get(((org.apache.iceberg.BaseTable) table).operations().current().uuid());
        if (text == null) {
            continue;
        }
        org.apache.iceberg.Schema schema = table.schema();
        org.apache.iceberg.expressions.Expression residual = org.apache.iceberg.expressions.Expressions.alwaysTrue();
        java.util.List conjuncts = new java.util.ArrayList();
        if (text.length() > 0) {
            conjuncts(org.apache.iceberg.expressions.ExpressionParser.fromJson(text, schema), conjuncts);
        }
        for (java.util.Iterator c = conjuncts.iterator(); c.hasNext();) {
            org.apache.iceberg.expressions.Expression conjunct = (org.apache.iceberg.expressions.Expression) c.next();
            if (readsOnly(conjunct, schema, columns, caseSensitive, true)) {
                residual = org.apache.iceberg.expressions.Expressions.and(residual, conjunct);
            }
        }
        // Spark's own filter of the set's one relation, as Spark would push it to Iceberg's scan
        // (the table's pruning filter can be weaker: a predicate it does not model); only where
        // Iceberg's pruning agrees with Spark's semantics: not on float columns (NaN, -0.0).
        if (scan[2] != null) {
            java.util.List pushed = new java.util.ArrayList();
            sparkConjuncts((org.apache.spark.sql.catalyst.expressions.Expression) scan[2], pushed);
            for (java.util.Iterator c = pushed.iterator(); c.hasNext();) {
                org.apache.spark.sql.catalyst.expressions.Expression conjunct =
                    (org.apache.spark.sql.catalyst.expressions.Expression) c.next();
                if (!conjunct.deterministic() || org.apache.spark.sql.catalyst.expressions
                        .SubqueryExpression$.MODULE$.hasSubquery(conjunct)) {
                    continue;
                }
                scala.Option predicate = org.apache.spark.sql.execution.datasources.v2.DataSourceV2Strategy$.MODULE$
                    .translateFilterV2(conjunct);
                if (predicate.isEmpty()) {
                    continue;
                }
                org.apache.iceberg.expressions.Expression converted;
                try {
                    converted = org.apache.iceberg.spark.SparkV2Filters.convert(
                        (org.apache.spark.sql.connector.expressions.filter.Predicate) predicate.get());
                } catch (RuntimeException e) {
                    continue;
                }
                if (converted != null && readsOnly(converted, schema, columns, caseSensitive, false)) {
                    residual = org.apache.iceberg.expressions.Expressions.and(residual, converted);
                }
            }
        }
        if (residual.op() == org.apache.iceberg.expressions.Expression.Operation.TRUE) {
            continue;
        }
        String setId = (String) entry.getKey();
        java.util.List tasks = manager.fetchTasks(table, setId);
        if (tasks == null || tasks.isEmpty()) {
            continue;
        }
        java.util.List out = new java.util.ArrayList(tasks.size());
        java.util.Map schemaJson = new java.util.IdentityHashMap();
        java.util.Map specJson = new java.util.IdentityHashMap();
        java.util.Map residuals = new java.util.IdentityHashMap();
        for (java.util.Iterator t = tasks.iterator(); t.hasNext();) {
            Object next = t.next();
            if (!(next instanceof org.apache.iceberg.FileScanTask)) {
                out = null;
                break;
            }
            org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) next;
            org.apache.iceberg.PartitionSpec spec = task.spec();
            org.apache.iceberg.Schema taskSchema = task.schema();
            if (!schemaJson.containsKey(taskSchema)) {
                schemaJson.put(taskSchema, org.apache.iceberg.SchemaParser.toJson(taskSchema));
            }
            if (!specJson.containsKey(spec)) {
                specJson.put(spec, org.apache.iceberg.PartitionSpecParser.toJson(spec));
                residuals.put(spec, org.apache.iceberg.expressions.ResidualEvaluator.of(spec, residual, caseSensitive));
            }
            out.add(new org.apache.iceberg.BaseFileScanTask((org.apache.iceberg.DataFile) task.file(),
                (org.apache.iceberg.DeleteFile[]) task.deletes().toArray(new org.apache.iceberg.DeleteFile[0]),
                (String) schemaJson.get(taskSchema), (String) specJson.get(spec),
                (org.apache.iceberg.expressions.ResidualEvaluator) residuals.get(spec)));
        }
        if (out != null) {
            manager.stageTasks(table, setId, out);
            restaged++;
        }
    }
    return restaged;
}

// Every relation reading a staged set: the columns read by the Filter directly above it (none
// when there is none), intersected over the set's relations.
static void filteredScans(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
                          org.apache.spark.sql.catalyst.expressions.Expression condition, java.util.Map scans,
                          boolean caseSensitive) {
    if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) {
        org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation =
            ((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan).relation();
        String setId = relation.options().get("scan-task-set-id");
        if (setId == null || !(relation.table() instanceof org.apache.iceberg.spark.source.SparkTable)) {
            return;
        }
        java.util.Set columns = new java.util.HashSet();
        if (condition != null) {
            for (scala.collection.Iterator a = condition.references().iterator(); a.hasNext();) {
                String name = ((org.apache.spark.sql.catalyst.expressions.Attribute) a.next()).name();
                columns.add(caseSensitive ? name : name.toLowerCase(java.util.Locale.ROOT));
            }
        }
        Object[] seen = (Object[]) scans.get(setId);
        if (seen == null) {
            scans.put(setId, new Object[] {
                ((org.apache.iceberg.spark.source.SparkTable) relation.table()).table(), columns, condition});
        } else {
            ((java.util.Set) seen[1]).retainAll(columns);
            seen[2] = null;  // read by two relations: neither one's filter holds for the other's rows
        }
        return;
    }
    org.apache.spark.sql.catalyst.expressions.Expression above =
        plan instanceof org.apache.spark.sql.catalyst.plans.logical.Filter
            ? ((org.apache.spark.sql.catalyst.plans.logical.Filter) plan).condition() : null;
    for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
        filteredScans((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), above, scans, caseSensitive);
    }
    for (scala.collection.Iterator it = plan.subqueries().iterator(); it.hasNext();) {
        filteredScans((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), null, scans, caseSensitive);
    }
}

static void sparkConjuncts(org.apache.spark.sql.catalyst.expressions.Expression e, java.util.List out) {
    if (e instanceof org.apache.spark.sql.catalyst.expressions.And) {
        sparkConjuncts(((org.apache.spark.sql.catalyst.expressions.And) e).left(), out);
        sparkConjuncts(((org.apache.spark.sql.catalyst.expressions.And) e).right(), out);
    } else {
        out.add(e);
    }
}

static void conjuncts(org.apache.iceberg.expressions.Expression e, java.util.List out) {
    if (e instanceof org.apache.iceberg.expressions.And) {
        conjuncts(((org.apache.iceberg.expressions.And) e).left(), out);
        conjuncts(((org.apache.iceberg.expressions.And) e).right(), out);
    } else {
        out.add(e);
    }
}

// Does ``e`` bind to ``schema`` and read only top-level columns among ``columns`` (and, without
// ``floats``, no float or double column)?
static boolean readsOnly(org.apache.iceberg.expressions.Expression e, org.apache.iceberg.Schema schema,
                         java.util.Set columns, boolean caseSensitive, boolean floats) {
    java.util.Set ids;
    try {
        ids = org.apache.iceberg.expressions.Binder.boundReferences(schema.asStruct(),
            java.util.Collections.singletonList(e), caseSensitive);
    } catch (RuntimeException ex) {
        return false;
    }
    for (java.util.Iterator it = ids.iterator(); it.hasNext();) {
        org.apache.iceberg.types.Types.NestedField field = schema.asStruct().field(((Integer) it.next()).intValue());
        if (field == null) {
            return false;  // a nested field: its struct may be pruned to other fields
        }
        org.apache.iceberg.types.Type.TypeID type = field.type().typeId();
        if (!floats && (type == org.apache.iceberg.types.Type.TypeID.FLOAT
                || type == org.apache.iceberg.types.Type.TypeID.DOUBLE)) {
            return false;
        }
        String name = caseSensitive ? field.name() : field.name().toLowerCase(java.util.Locale.ROOT);
        if (!columns.contains(name)) {
            return false;
        }
    }
    return !ids.isEmpty();
}
"""
# (id(gateway), source, name) → (gateway, method or None)
_COMPILED: dict[tuple[int, str, str], tuple[object, object]] = {}
_CLASSES: dict[tuple[int, str], tuple[Any, Any]] = {}  # (id(gateway), source) → (gateway, instance or None)


def _compiled(gateway, name: str, source: str, arg_types: tuple[str, ...]):
    """The static method ``name`` of ``source`` (its argument classes by JVM name, ``[B`` for
    ``byte[]``), compiled once per JVM with Janino, as a py4j member of an instance of the
    compiled class: one round trip per call (through ``Method.invoke`` it was two plus one per
    argument, 0.39 instead of 0.10 ms for one argument). The methods of one source
    share one class and its static state (None when it cannot be compiled: callers then take a
    slower path through py4j)."""
    hit = _COMPILED.get((id(gateway), source, name))
    if hit is not None and hit[0] is gateway:
        return hit[1]
    jvm = gateway.jvm
    method = None
    try:
        known = _CLASSES.get((id(gateway), source))
        if known is None or known[0] is not gateway:
            evaluator = jvm.org.codehaus.janino.ClassBodyEvaluator()
            evaluator.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
            _CLASSES[(id(gateway), source)] = known = (gateway, None)
            evaluator.cook(source)
            clazz = evaluator.getClazz()
            no_args = gateway.new_array(jvm.java.lang.Class, 0)
            instance = clazz.getDeclaredConstructor(no_args).newInstance(gateway.new_array(jvm.java.lang.Object, 0))
            _CLASSES[(id(gateway), source)] = known = (gateway, instance)
        if known[1] is not None:
            types = gateway.new_array(jvm.java.lang.Class, len(arg_types))
            for i, t in enumerate(arg_types):
                types[i] = jvm.java.lang.Class.forName(t)
            known[1].getClass().getMethod(name, types)  # compiled with this signature, or NoSuchMethodException
            method = getattr(known[1], name)
    except Exception as e:  # no Janino on this JVM's classpath, or it refused the source
        log.info("pando: %s is not compiled in the JVM (%s: %s)", name, type(e).__name__, e)
    _COMPILED[(id(gateway), source, name)] = (gateway, method)
    return method


def _helper(name: str, source: str, arg_types: tuple[str, ...]):
    """The compiled static method ``name`` of ``source`` (see :func:`_compiled`), or None."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return _compiled(gateway, name, source, arg_types) if gateway is not None else None


def _staging(name: str, arg_types: tuple[str, ...]):
    """A method of :data:`_STAGING_SOURCE` (the task cache with the task-set views), or of the
    task cache alone (:data:`_CACHED_SOURCE`) when the views do not compile on this JVM: one of
    the two classes holds the task cache, never both."""
    method = _helper(name, _STAGING_SOURCE, arg_types)
    return method if method is not None else _helper(name, _CACHED_SOURCE, arg_types)


def long_column(spark, values, name: str):
    """A DataFrame of one non-null ``bigint`` column ``name`` holding ``values`` (int64 numpy),
    built in the JVM as a local relation; None when the helper cannot be compiled."""
    method = _helper("longs", _LONGS_SOURCE, ("org.apache.spark.sql.SparkSession", "[B", "java.lang.String"))
    if method is None:
        return None
    from pyspark.sql import DataFrame

    data = bytearray(values.astype(">i8").tobytes())
    return DataFrame(method(spark._jsparkSession, data, name), spark)


def long_view(spark, values, column: str, name: str) -> bool:
    """A temporary view ``name`` of one non-null ``bigint`` column ``column`` holding ``values``
    (int64 numpy), made in the JVM from a local relation (``_KEY_VIEW_SOURCE``); False when the
    helper cannot be compiled (the caller then takes :func:`long_column` + :func:`temp_view`)."""
    method = _helper("longsView", _KEY_VIEW_SOURCE,
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
    method = _helper("dropViews", _KEY_VIEW_SOURCE, ("java.lang.Object", "java.lang.String"))
    if method is None:
        for name in names:
            spark.catalog.dropTempView(name)
    else:
        method(spark._jsparkSession, "\u0000".join(names))


def temp_view(spark, df, name: str) -> None:
    """``df.createOrReplaceTempView(name)``, made directly in the session catalog (``_VIEW_SOURCE``)."""
    method = _helper("tempView", _VIEW_SOURCE, ("java.lang.Object", "java.lang.Object", "java.lang.String"))
    if method is None:
        df.createOrReplaceTempView(name)
    else:
        method(spark._jsparkSession, df._jdf, name)


def _keep_tasks(planned, keep_paths: set[str] | None, in_jvm: bool = True):
    """The tasks of ``planned`` (a Java CloseableIterable of FileScanTasks) whose file is in
    ``keep_paths`` (None: all), as a Java List (kept in the JVM) or a Python list of tasks."""
    method = _helper("chosen", _CHOSEN_SOURCE, ("java.lang.Object", "java.lang.String")) if in_jvm else None
    if method is None:
        return [t for t in _iter(planned) if keep_paths is None or str(t.file().location()) in keep_paths]
    paths = None if keep_paths is None else "\u0000".join(keep_paths)  # no path holds a NUL
    return method(planned, paths)


def cached_tasks(table, snapshot_id: int, keep_paths: set[str], key: str):
    """The Java FileScanTasks (a Java List) of ``keep_paths`` in ``snapshot_id`` from the JVM's task
    cache (``_CACHED_SOURCE``: the snapshot is planned once, unfiltered, on first use; ``key``
    names the table's snapshot); None when the helper cannot be compiled or a path is not a data
    file of the snapshot."""
    arg_types = ("java.lang.Object", "java.lang.Object", "java.lang.String", "java.lang.String", "java.lang.Object")
    method = _staging("cachedChosen", arg_types)
    if method is None or not keep_paths:
        return None
    return method(table, snapshot_id, key, "\u0000".join(keep_paths), settings.value("taskCache.maxFiles"))


def cached_task_counts() -> tuple[int, int]:
    """(snapshots, tasks) the JVM's task cache holds now ((0, 0) before its first use)."""
    method = _staging("cachedCounts", ())
    counts = method() if method is not None else [0, 0]
    return int(counts[0]), int(counts[1])


def chosen_tasks(table, snapshot_id: int | None, keep_paths: set[str] | None, row_filter=None,
                 *, in_jvm: bool = True) -> tuple[Any, bool]:
    """The Java FileScanTasks of ``snapshot_id`` whose data file is in ``keep_paths`` (None: every
    file; a Java List, or a Python list when ``in_jvm`` is False or Janino is missing), and
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
    one JVM call (``_STAGING_SOURCE``); False, with nothing staged, when the helper cannot
    be compiled or refused (the caller then stages the tasks, loads the DataFrame and makes the
    view of it). A ``view`` of None stages the tasks only (:func:`swapped_plan` reads them, or
    :func:`view_of_task_set` makes their view later)."""
    method = _helper("stageView", _STAGING_SOURCE, ("java.lang.Object",) * 2 + ("java.lang.String",)
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
    method = _helper("stageCachedView", _STAGING_SOURCE, arg_types)
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
    method = _helper("taskSetView", _STAGING_SOURCE, ("java.lang.Object",) + ("java.lang.String",) * 3)
    assert method is not None  # the set was staged by the same compiled class
    method(spark._jsparkSession, name, set_id, view)


def analysed_ahead(spark, sql: str):
    """A Java Future of Spark's analysis of ``sql`` as written (``SparkSession.sql``), running on a
    JVM thread while the caller goes on (``analysedAhead``); None when the helper cannot be
    compiled. :func:`analysed` waits for it."""
    method = _helper("analysedAhead", _STAGING_SOURCE, ("java.lang.Object", "java.lang.String"))
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
    method = _helper("swappedPlan", _STAGING_SOURCE, ("java.lang.Object",) * 2 + ("java.lang.String",) * 6 + ("[B",))
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
    method = _helper("withResiduals", _STAGING_SOURCE,
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
    method = _staging("unstage", ("java.lang.Object", "java.lang.String"))
    if method is not None:
        method(table, set_id)
    else:
        manager = jclass(spark.sparkContext._gateway, "org.apache.iceberg.spark.ScanTaskSetManager").get()
        manager.removeTasks(table, set_id)


def staged_split_size(spark, table, set_id: str) -> str | None:
    """The split size Iceberg's own scan would plan the staged task set ``set_id`` of ``table``
    with (``_STAGING_SOURCE``'s ``adaptiveSplitSize``); None when that rule is off or the
    helper cannot be compiled (the staged scan then keeps the table's fixed split size)."""
    method = _helper("adaptiveSplitSize", _STAGING_SOURCE,
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


# The executed plan's Iceberg scans planned, in one call: Spark builds a scan's input partitions
# (Iceberg's file tasks) lazily; walking the plan through py4j to ask for them costs five round
# trips a node (~8 ms for a TPC-H join query's plan), more than the planning it forces.
_PLANNED_SOURCE = """
public static int plannedPartitions(Object root) {
    int total = 0;
    java.util.ArrayDeque stack = new java.util.ArrayDeque();
    java.util.Set seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap());
    stack.push(root);
    while (!stack.isEmpty()) {
        org.apache.spark.sql.execution.SparkPlan node = (org.apache.spark.sql.execution.SparkPlan) stack.pop();
        if (!seen.add(node)) {
            continue;
        }
        if (node instanceof org.apache.spark.sql.execution.datasources.v2.BatchScanExec) {
            total += ((org.apache.spark.sql.execution.datasources.v2.BatchScanExec) node).inputPartitions().size();
        }
        if (node instanceof org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) {
            stack.push(((org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) node).initialPlan());
        }
        scala.collection.Iterator children = node.children().iterator();
        while (children.hasNext()) {
            stack.push(children.next());
        }
    }
    return total;
}
"""


def planned_partitions(df, *, in_jvm: bool = True) -> int:
    """Build ``df``'s executed plan and every Iceberg scan's input partitions in it (the initial
    plan under adaptive execution: where Iceberg plans its file tasks), without running it; the
    number of input partitions. One JVM call (``_PLANNED_SOURCE``); through py4j, a node at a
    time, when ``in_jvm`` is False or the helper cannot be compiled."""
    root = df._jdf.queryExecution().executedPlan()
    method = _helper("plannedPartitions", _PLANNED_SOURCE, ("java.lang.Object",)) if in_jvm else None
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
