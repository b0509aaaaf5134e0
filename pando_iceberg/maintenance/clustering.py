"""How clustered a table's data files are on a column: the overlap and depth of their min/max
ranges (the measures of Snowflake's ``CLUSTERING_INFORMATION``, from the Snowflake pruning seed).

A file's range on a column is [lower bound, upper bound] as its manifest records it. Two files
overlap when their ranges share a value; a file's *overlaps* are the other files it overlaps, and
its *depth* the most files (itself included) whose ranges share one value of its range. A filter
on one value of the column opens at least that many files of the value's stack, so a table
whose files have depth 1 everywhere prunes a point filter to one file, and a table whose every
file has depth n (the table's file count) prunes nothing. The measures read only the table's
manifests (no data file), and are what min/max pruning can do, whichever layout wrote the files.

Files without both bounds on the column (only NULLs, only NaN, no metrics kept) are counted apart:
they are opened by every filter on the column and are left out of the overlaps and depths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import UsageError

#: the columns of ``clustering_information``'s rows
CLUSTERING_COLUMNS = [("column", "string"), ("files", "bigint"), ("files_without_bounds", "bigint"),
                      ("constant_files", "bigint"), ("average_overlaps", "double"), ("average_depth", "double"),
                      ("max_depth", "bigint"), ("depth_histogram", "string")]


class ClusteringError(UsageError, ValueError):
    """A column the table does not have, or whose type has no ordered bounds."""


@dataclass(frozen=True)
class ColumnClustering:
    """The clustering of a table's data files on one column (module docstring)."""

    column: str
    files: int
    files_without_bounds: int
    constant_files: int  # lower bound = upper bound
    average_overlaps: float
    average_depth: float
    max_depth: int
    depth_histogram: dict[str, int]  # depth bucket ('1', '2', '3-4', '5-8', ...) → files

    def row(self) -> tuple:
        histogram = ", ".join(f"{k}: {v}" for k, v in self.depth_histogram.items())
        return (self.column, self.files, self.files_without_bounds, self.constant_files,
                round(self.average_overlaps, 4), round(self.average_depth, 4), self.max_depth, histogram)


def interval_clustering(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per interval [lower[i], upper[i]] (integer ranks, lower ≤ upper): the other intervals it
    overlaps, and its depth (the most intervals, itself included, that contain one point of it).
    O(n log n): the depth at a point x is #(lower ≤ x) − #(upper < x); it rises only at lower
    ends, so an interval's depth is the maximum of that count over the lower ends inside it (its
    own among them), taken with a sparse table of range maxima."""
    n = len(lower)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    los, his = np.sort(lower), np.sort(upper)
    overlaps = np.searchsorted(los, upper, "right") - np.searchsorted(his, lower, "left") - 1
    points = np.unique(los)
    depth_at = np.searchsorted(los, points, "right") - np.searchsorted(his, points, "left")
    first = np.searchsorted(points, lower, "left")
    last = np.searchsorted(points, upper, "right") - 1  # ≥ first: the interval's own lower end
    table = [depth_at]  # table[j][p]: the maximum of depth_at[p : p + 2**j]
    while (1 << len(table)) <= len(depth_at):
        prev, step = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-step], prev[step:]))
    level = np.frexp(last - first + 1)[1].astype(np.int64) - 1  # ⌊log2 length⌋, exactly
    depth = np.empty(n, dtype=np.int64)
    for lv in np.unique(level).tolist():
        at = level == lv
        depth[at] = np.maximum(table[lv][first[at]], table[lv][last[at] - (1 << lv) + 1])
    return overlaps.astype(np.int64), depth


def depth_bucket(depth: int) -> str:
    """'1', '2', then powers of two: '3-4', '5-8', '9-16', ..."""
    if depth <= 2:
        return str(depth)
    top = 1 << int(depth - 1).bit_length()
    return f"{top // 2 + 1}-{top}"


def column_clustering(name: str, lower: pa.Array, upper: pa.Array) -> ColumnClustering:
    """The clustering of files whose bounds on column ``name`` are ``lower`` and ``upper`` (one
    entry per data file; null: no bound)."""
    has = pc.and_(pc.is_valid(lower), pc.is_valid(upper))
    if pa.types.is_floating(lower.type):  # a NaN bound is no bound (Iceberg writes none)
        has = pc.and_(has, pc.and_(pc.invert(pc.is_nan(lower)), pc.invert(pc.is_nan(upper))))
    has = pc.fill_null(has, False)
    lo, hi = lower.filter(has), upper.filter(has)
    n = len(lo)
    if n:
        ranks = pc.rank(pa.concat_arrays([lo, hi.cast(lo.type)]), sort_keys="ascending", tiebreaker="dense")
        ranks_np = ranks.to_numpy().astype(np.int64)
        lo_r, hi_r = ranks_np[:n], ranks_np[n:]
        hi_r = np.maximum(hi_r, lo_r)  # a truncated upper bound below its lower one still covers it
        overlaps, depth = interval_clustering(lo_r, hi_r)
        constant = int(np.count_nonzero(lo_r == hi_r))
    else:
        overlaps = depth = np.zeros(0, dtype=np.int64)
        constant = 0
    histogram: dict[str, int] = {}
    if n:
        values, counts = np.unique(depth, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist()):
            key = depth_bucket(int(v))
            histogram[key] = histogram.get(key, 0) + int(c)
    return ColumnClustering(name, len(lower), len(lower) - n, constant,
                            float(overlaps.mean()) if n else 0.0, float(depth.mean()) if n else 0.0,
                            int(depth.max()) if n else 0, histogram)


def clustering_information(table: Any, columns: Sequence[str] | None = None,
                           snapshot_id: int | None = None) -> list[ColumnClustering]:
    """The clustering of ``table``'s (a pyiceberg table) data files at its current snapshot (or
    ``snapshot_id``) on each of ``columns`` (default: every top-level column whose type has
    ordered bounds), from its manifests."""
    from ..planner.limit import column_kind  # the types whose bounds the planner uses

    schema = table.schema()
    ordered = [f.name for f in schema.fields if f.field_type.is_primitive and column_kind(f.field_type) is not None]
    if columns is None:
        names = ordered
    else:
        by_lower = {f.name.lower(): f for f in schema.fields}
        names = []
        for c in columns:
            f = by_lower.get(c.strip().lower())
            if f is None:
                raise ClusteringError(f"column {c!r} is not a column of {'.'.join(table.name())}; "
                                      f"columns with bounds: {', '.join(ordered) or 'none'}")
            if f.name not in ordered:
                raise ClusteringError(f"column {f.name!r} has type {f.field_type}, whose files have no ordered "
                                      f"bounds; columns with bounds: {', '.join(ordered) or 'none'}")
            names.append(f.name)
    if snapshot_id is not None and table.metadata.snapshot_by_id(snapshot_id) is None:
        raise ClusteringError(f"snapshot {snapshot_id} is not a snapshot of {'.'.join(table.name())}")
    if table.current_snapshot() is None and snapshot_id is None:
        files = None
    else:
        files = table.inspect.files(snapshot_id)
        files = files.filter(pc.equal(files.column("content"), 0))  # data files; delete files apart
    out = []
    for name in names:
        if files is None or files.num_rows == 0:
            out.append(ColumnClustering(name, 0, 0, 0, 0.0, 0.0, 0, {}))
            continue
        metrics = files.column("readable_metrics").combine_chunks().field(name)
        out.append(column_clustering(name, metrics.field("lower_bound"), metrics.field("upper_bound")))
    return out
