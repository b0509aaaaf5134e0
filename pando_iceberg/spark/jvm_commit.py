"""Rewrites' commits through Iceberg's Java API (which pyiceberg lacks for them): RewriteFiles
(snapshot operation ``replace``) in a transaction with the table properties, data file metrics
from Parquet footers, and commit conflicts recognised by the Java exception's class.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..exceptions import CommitConflictError
from .jvm_classes import java_iter


class CommitConflict(CommitConflictError, RuntimeError):
    """The rewrite could not commit because files it replaces changed concurrently."""


def live_data_files(table, snapshot_id: int) -> dict[str, Any]:
    """Path → Java DataFile of every live data file in ``snapshot_id``."""
    files = {}
    for task in java_iter(table.newScan().useSnapshot(snapshot_id).planFiles()):
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
