"""The ONE rewrite pipeline the three Pando rewrites share (paper §6–§7, applied to Iceberg):
the whole table (``rewrite.py``), one layout per partition (``partitioned.py``) and the rows
outside a layout (``incremental.py``, both flavours). Each of them decides what to write and
routes its rows; ``run_rewrite`` does the rest, the same way for all of them:

    routed rows (the caller's: each row with its block and packed k-tuple)
      ─▶ shuffle: one block per task, rows sorted by block (then by the in-block order)
      ─▶ mapInArrow(write_blocks): the data files, under data/pando-<layout id>/ only
    driver: rows written == rows read, else nothing is committed
      ─▶ §7: the leaf → block maps finalized from the (block, k-tuple) pairs written, and the
         Puffin sidecar written (the caller's ``layout_sidecar``)
      ─▶ Iceberg DataFiles for the new files (metrics from their footers and the NaN counts of
         their float columns, partition copied)
      ─▶ ONE commit: a ``replace`` snapshot validated from the base snapshot + the pointer
    any failure ─▶ ``after_failure``: what was written is deleted, the table is exactly as it was

What a caller hands over is a ``Rewrite``; the small helpers below (``routed_rows``,
``write_tasks``, ``finalize_layout``, ``block_file_refs``) are the pieces its ``Rewrite`` is
built from, and ``counted_blocks`` is the step both incremental runs take before theirs: the
routed rows counted per block and the blocks that get enough of them chosen.

The test hooks (``test_pause``) live here too: the reliability tests park a rewrite while it
writes (WRITING) and before it commits (BEFORE_COMMIT), and the learning steps (SAMPLING,
OPTIMIZING, ``rewrite.py``) use the same mechanism.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..layout.ktuple import ktuple_radices, unpack_ktuples
from ..progress import progress_step, spark_job_progress
from ..storage.pointer import P_SNAPSHOT, LayoutPointer
from ..storage.sidecar import SIDECAR_FORMAT_VERSION, DataFileRef, new_layout_id
from ..workload.in_block import BlockFiles
from . import iceberg_jvm as jv
from .blocks import BLOCK_COL, KTUPLE_COL, WRITTEN_FILE_DDL, WriteSpec, write_blocks
from .phases import last_job_id, peak_rss_mib, stage_seconds
from .rewrite_common import IncrementalResult, PandoRewriteError, after_failure, arrow_batch_rows, write_spec
from .session import drop_shuffles, refresh_table, release_shuffle_files

# A written file, as ``write_blocks`` reports it (one pyspark Row of ``WRITTEN_FILE_DDL``):
# .block, .path, .record_count, .file_size_in_bytes, .ktuples (packed codes, comma-separated),
# .split_offsets (its row groups' starting offsets), .nan_value_counts (field id → NaNs, float columns).
Written = Any


@dataclass
class Rewrite:
    """What differs between the rewrites: what they write, how many rows that must be, how the
    written files become the layout's sidecar, and what the commit replaces."""

    routed: Any  # DataFrame: the rows to write + BLOCK_COL, KTUPLE_COL (``routed_rows``)
    tasks: int  # write tasks: the shuffle's partitions (``write_tasks``)
    batch_rows: int  # Arrow rows per batch of the write pass (``rewrite_common.batch_rows``)
    writing: str  # progress message of the write
    expected_rows: int  # the rows read: exactly this many must be written
    expected_rows_were: str  # "... {rows} ...": where they were read, for the error message
    # §7: (layout id, written files) → the sidecar (not yet written) with the finalized layout(s)
    layout_sidecar: Callable[[str, list[Written]], Any]
    replaced: list[Any]  # Java DataFiles the commit replaces
    pointer_base_snapshot_id: int  # the snapshot the layout was made for (the pointer records it)
    pointer_format_version: int = SIDECAR_FORMAT_VERSION
    summary: dict[str, str] = field(default_factory=dict)  # more snapshot summary entries
    partition_of: Callable[[Written], Any] | None = None  # a written file → its partition tuple
    target_file_size_bytes: int | None = None  # None: the table's
    order_column: str | None = None  # in-block order (routed rows then carry ROW_COL)
    block_files: BlockFiles | None = None  # files per block (None: split at the target size)


@dataclass
class Committed:
    """What ``run_rewrite`` committed."""

    layout_id: str
    snapshot_id: int
    written: list[Written]
    sidecar: Any  # LayoutSidecar or PartitionedLayoutSidecar


def run_rewrite(spark: Any, table_name: str, table: Any, base_id: int, rewrite: Rewrite,
                io_properties: dict[str, str] | None, seconds: dict[str, float],
                progress: Callable[[str], None] = lambda m: None,
                memory: dict[str, dict[str, float]] | None = None) -> Committed:
    """Write ``rewrite.routed`` as one data file or more per block and commit them with their
    layout in ONE ``replace`` snapshot from ``base_id`` (module docstring). A failure deletes what
    was written and re-raises; the table is then exactly as it was. Times go to ``seconds``
    (writing, metadata, commit; 'writing.<kind>': the write's Spark stages by kind,
    ``phases.stage_seconds``), and with ``memory`` each phase's peak resident memory there
    (``phases.peak_rss_mib``)."""
    from pyiceberg.io import load_file_io

    layout_id = new_layout_id()
    location = str(table.location()).rstrip("/")
    data_dir = f"{location}/data/pando-{layout_id}"
    spec = write_spec(spark, table, data_dir, io_properties, rewrite.target_file_size_bytes,
                      order_column=rewrite.order_column, files=rewrite.block_files)
    written: list[Written] = []
    sidecar: Any = None
    sidecar_path = None
    committing = False
    try:
        t0 = time.time()
        before = last_job_id(spark)
        if memory is not None:
            peak_rss_mib(spark)  # what the steps between learning and writing held is not the write's
        with spark_job_progress(spark, progress, rewrite.writing):
            written = shuffle_and_write(spark, rewrite.routed, rewrite.tasks, spec, rewrite.batch_rows)
        seconds["writing"] = time.time() - t0
        seconds.update({f"writing.{kind}": s for kind, s in stage_seconds(spark, before).items()})
        if memory is not None:
            memory["writing"] = peak_rss_mib(spark)

        t0 = time.time()
        check_written_rows(written, rewrite.expected_rows, rewrite.expected_rows_were)
        # §7: the leaf → block maps are finalized from the (block, k-tuple) pairs actually written.
        sidecar = rewrite.layout_sidecar(layout_id, written)
        sidecar_path, _ = sidecar.write(load_file_io(dict(io_properties or {}), location), location)
        seconds["metadata"] = time.time() - t0
        if memory is not None:
            memory["metadata"] = peak_rss_mib(spark)

        test_pause("BEFORE_COMMIT")
        t0 = time.time()
        with progress_step(progress, "commit: data file metadata, one replace snapshot", 2) as step:
            partition_of = rewrite.partition_of or (lambda w: None)
            new_files = jv.build_data_files(spark, table, [jv.NewFile(w.path, w.file_size_in_bytes, partition_of(w),
                                                                      w.split_offsets, dict(w.nan_value_counts or {}))
                                                           for w in written])
            step.advance()
            pointer = LayoutPointer(layout_id, sidecar.file_name, snapshot_id=0,
                                    base_snapshot_id=rewrite.pointer_base_snapshot_id,
                                    format_version=rewrite.pointer_format_version)
            props = {**pointer.to_properties(), P_SNAPSHOT: "{snapshot-id}"}
            committing = True
            snapshot_id = jv.commit_replace(spark, table, base_id, rewrite.replaced, new_files, props,
                                            summary={"pando.layout-id": layout_id, **rewrite.summary})
            step.advance()
        seconds["commit"] = time.time() - t0
        if memory is not None:
            memory["commit"] = peak_rss_mib(spark)
    except BaseException as failure:
        snapshot_id = after_failure(spark, failure, table_name, layout_id, committing, written, sidecar_path,
                                    io_properties, location, data_dir, progress)
    refresh_table(spark, table_name)
    # The write's shuffle went in shuffle_and_write; what else ran (the sample, the learning's jobs)
    # goes when the GC finds it unreferenced: now (after the refresh, a later command: measured,
    # tests/spark/test_shuffle_cleanup.py).
    release_shuffle_files(spark)
    return Committed(layout_id, snapshot_id, written, sidecar)


def shuffle_and_write(spark: Any, routed: Any, tasks: int, spec: WriteSpec, rows_per_batch: int) -> list[Written]:
    """The routed rows shuffled so that a block is in one task, sorted by block (then by the
    in-block order), and written by ``write_blocks``: one result row per data file."""
    order = [BLOCK_COL] + ([spec.order_column] if spec.order_column else [])
    writer = write_blocks(spec)
    pause_path = os.environ.get(PAUSE_ENV_PREFIX + "WRITING")
    if pause_path:
        writer = pause_after_first_file(writer, pause_path, float(os.environ.get("PANDO_TEST_PAUSE_TIMEOUT", "300")))
    written = routed.repartition(tasks, BLOCK_COL).sortWithinPartitions(*order).mapInArrow(writer, WRITTEN_FILE_DDL)
    try:
        with arrow_batch_rows(spark, rows_per_batch):
            return list(written.collect())
    finally:
        drop_shuffles(spark, written)  # the whole table, shuffled: its files go now, not at a later GC


def check_written_rows(written: list[Written], expected: int, expected_were: str) -> None:
    """Every row read was written once (rows written == ``expected``), else PandoRewriteError."""
    rows = int(sum(w.record_count for w in written))
    if rows != expected:
        raise PandoRewriteError(f"wrote {rows} rows but {expected_were.format(rows=expected)}: not committing")


# ---- the pieces a Rewrite is built from ---------------------------------------------------------

def routed_rows(df: Any, router: Callable[[Iterator[Any]], Iterator[Any]], drop: Sequence[str] = ()) -> Any:
    """``df`` through the mapInArrow function ``router`` (``blocks.route_batches``,
    ``partitioned.route_partitions``): its columns but ``drop``, then BLOCK_COL (int) and KTUPLE_COL
    (long, the packed k-tuple)."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    fields = [f for f in df.schema.fields if f.name not in drop]
    schema = StructType([*fields, StructField(BLOCK_COL, IntegerType(), False),
                         StructField(KTUPLE_COL, LongType(), False)])
    return df.mapInArrow(router, schema)


@contextmanager
def counted_blocks(routed: Any, minimum: Callable[[int], int], result: IncrementalResult, seconds: dict[str, float],
                   started: float, routing: str,
                   progress: Callable[[str], None]) -> Iterator[tuple[Any, dict[int, int], list[int]]]:
    """The first step of an incremental run (``incremental.py``, ``partitioned.py``): ``routed``
    (the rows outside the layout(s), ``routed_rows``) persisted while the ``with`` body runs, its
    rows counted per block, the blocks that get at least ``minimum(block)`` rows chosen, and
    ``result``'s row counts filled in (laid out: the chosen blocks' rows; carried over: the
    rest); ``seconds['routing']`` since ``started``. Yields (the persisted rows, rows per block,
    the chosen blocks in order)."""
    routed = routed.persist()
    try:
        progress(routing)
        counts = {int(r[0]): int(r[1]) for r in routed.groupBy(BLOCK_COL).count().collect()}
        seconds["routing"] = time.time() - started
        result.rows_read = sum(counts.values())
        big = sorted(b for b, n in counts.items() if n >= minimum(b))
        result.rows_laid_out = sum(counts[b] for b in big)
        result.rows_carried_over = result.rows_read - result.rows_laid_out
        result.blocks_extended = len(big)
        yield routed, counts, big
    finally:
        routed.unpersist()


def write_tasks(spark: Any, blocks: int) -> int:
    """Tasks of the write pass: one per block, at most 4 per core of the cluster."""
    return max(1, min(blocks, 4 * max(1, int(spark.sparkContext.defaultParallelism))))


def written_pairs(written: Iterable[Written], radices: Any, offset: int = 0) -> list[tuple[int, tuple[int, ...]]]:
    """The (block, k-tuple) pairs of the written files (block ids minus ``offset``)."""
    pairs: list[tuple[int, tuple[int, ...]]] = []
    for w in written:
        codes = np.array([int(c) for c in w.ktuples.split(",") if c], dtype=np.int64)
        pairs += [(int(w.block) - offset, tuple(kt)) for kt in unpack_ktuples(codes, radices).tolist()]
    return pairs


def finalize_layout(layout: Any, written: list[Written], *, offset: int = 0, extend: bool = False) -> Any:
    """§7: ``layout``'s leaf → block maps finalized from the (block, k-tuple) pairs of the
    written files (their blocks are ``offset`` + the layout's), and its block row counts those
    written. ``extend``: the files are added to a layout already finalized (an incremental run):
    its pairs and row counts are kept and the new ones added, so leaf → block sets cover every new
    row. Returns ``layout`` (changed in place)."""
    pairs: list[tuple[int, tuple[int, ...]]] = []
    if extend:
        obs = layout.ktuple_observed
        pairs = [(int(b), tuple(kt)) for b, kt in zip(layout.ktuple_block[obs].tolist(), layout.ktuples[obs].tolist(),
                                                      strict=True)]
    pairs += written_pairs(written, ktuple_radices(layout), offset)
    rows = np.zeros(layout.num_blocks, dtype=np.int64)
    for w in written:
        rows[int(w.block) - offset] += int(w.record_count)
    if extend:
        rows = layout.block_rows + rows
    layout.finalize(pairs)
    layout.block_rows = rows
    return layout


def block_file_refs(written: Iterable[Written], offset: int = 0,
                    previous: dict[int, list[DataFileRef]] | None = None) -> dict[int, list[DataFileRef]]:
    """The block → files map of a sidecar: ``previous`` (copied) plus the written files, each
    under its block minus ``offset``."""
    out = {b: list(refs) for b, refs in (previous or {}).items()}
    for w in written:
        out.setdefault(int(w.block) - offset, []).append(DataFileRef(w.path, int(w.record_count),
                                                                     int(w.file_size_in_bytes)))
    return out


def block_partition(offsets: Sequence[int], block: int) -> int:
    """The index of the partition whose global block ids ``offsets[i]`` .. ``offsets[i + 1] - 1``
    hold ``block`` (``partitioned.route_partitions`` numbers blocks so)."""
    return bisect.bisect_right(offsets, block) - 1


# ---- test hooks ---------------------------------------------------------------------------------
# For reliability tests only (tests/spark/test_reliability.py): park a rewrite at a stage so a
# test can race another writer against it or kill the process there. With the environment
# variable PANDO_TEST_PAUSE_<STAGE>=<path> set, the rewrite creates ``<path>.ready`` on reaching
# the stage and waits until ``<path>.go`` exists (at most PANDO_TEST_PAUSE_TIMEOUT seconds,
# default 300, then it fails and cleans up). Stages: SAMPLING (before the sample is collected),
# OPTIMIZING (before the trees are built), WRITING (in an executor task, after its first data
# file is complete; read on the driver, so set it before the rewrite starts), BEFORE_COMMIT
# (files and sidecar written, nothing committed). Unset (always, in production): no effect.

PAUSE_ENV_PREFIX = "PANDO_TEST_PAUSE_"


def test_pause(stage: str, path: str | None = None, timeout: float | None = None) -> None:
    path = path or os.environ.get(PAUSE_ENV_PREFIX + stage)
    if not path:
        return
    if timeout is None:
        timeout = float(os.environ.get("PANDO_TEST_PAUSE_TIMEOUT", "300"))
    with open(path + ".ready", "w") as f:
        f.write(f"{stage} {os.getpid()}\n")
    deadline = time.time() + timeout
    while not os.path.exists(path + ".go"):
        if time.time() > deadline:
            raise RuntimeError(f"test hook {PAUSE_ENV_PREFIX}{stage}: {path}.go did not appear within {timeout:g} s")
        time.sleep(0.05)


test_pause.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def pause_after_first_file(writer: Callable[[Iterator[Any]], Iterator[Any]], path: str,
                           timeout: float) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``writer`` (a mapInArrow function) that parks at the WRITING hook once its first file is out."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        paused = False
        for out in writer(batches):
            yield out
            if not paused:
                paused = True
                test_pause("WRITING", path, timeout)

    return run
