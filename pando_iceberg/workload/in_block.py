"""Files of about b rows, cut along an in-block order (beyond the paper).

The paper writes each block as one data file. A block keeps at least b rows (§6.2: the
bottom-up merges until it does), so blocks hold b..3b rows and a table gets fewer files than
the user's b implies. Here a block is written as ``files_per_block(rows, b)`` files of about b
rows: its rows are sorted by one column, the *in-block order*, and cut into consecutive runs
(inside a file the rows keep the table's own order, which compresses better: ``spark/blocks.py``).
Iceberg's own min/max pruning then skips files inside a block the trees chose. The trees'
soundness is untouched: a block is still read or skipped as a whole by the trees, and min/max
pruning is sound on its own.

- Count: ``n = max(1, round(r / b), ceil(r / (1.3 b)))`` — files of about b rows, none above
  1.3 b (``MAX_FILE_FACTOR``).
- Order: among the columns the workload compares with literal ranges (``templates.range_columns``),
  the one minimizing the workload's cost (the optimizer's queries, synthetic draws included,
  weighted as in ``layout/cost.py``) measured by ``files_cost`` on the sample: each block's
  sample rows sorted by the column and cut into the block's number of files; a query reads a
  file of a block its trees scan unless the file's zone map (``c BETWEEN min AND max`` over
  every ordered column the workload names, ANDed) is proven false by the filter's own
  ``sides`` (§5's reasoning, the one the planner's interval logic uses) — what Iceberg's
  min/max pruning does with the real files. No order when none lowers the cost of files in
  the table's own order by ``MIN_GAIN`` (0.5 %).
- The same measure, on an independent set of synthetic draws, chooses how many trees to keep
  (``select_layout``): zone maps prune inside compact blocks (one tree's leaves) far better
  than inside blocks merged from many k-tuples, which the §5 cost model alone does not see.
- Do no harm: the same measure per template (``files_read``, ``template_reads``) against what
  each template reads on the table as it is now (the caller plans it: ``spark/rewrite_common.
  reads_now``) makes the choice a constrained one (``select_layout``'s guard, ``allowed_reads``),
  and the order the table already has proposes more cuts (``order_cuts``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.expr.evaluate import arrow_kind
from pando_iceberg.expr.values import render
from pando_iceberg.layout.evaluations import Evaluations
from pando_iceberg.workload.templates import range_columns, template_key, typed_value

__all__ = [
    "DEFAULT_MAX_TEMPLATE_REGRESSION",
    "GUARD_MERGES",
    "GUARD_REFINES",
    "GUARD_WEIGHTS",
    "MAX_FILE_FACTOR",
    "MIN_GAIN",
    "P_MAX_TEMPLATE_REGRESSION",
    "BlockFiles",
    "InBlockOrder",
    "LayoutChoice",
    "TemplateGuard",
    "TemplateRead",
    "allowed_reads",
    "between_multipliers",
    "block_files",
    "choose_in_block_order",
    "file_rows_per_block",
    "files_cost",
    "files_per_block",
    "files_read",
    "guard_multipliers",
    "matching_draws",
    "merged_layout",
    "order_cuts",
    "order_trees",
    "parse_regression_bound",
    "select_layout",
    "template_reads",
    "zone_columns",
]

MAX_FILE_FACTOR = 1.3
MIN_GAIN = 0.005


def files_per_block(rows: Sequence[float] | np.ndarray, b: float) -> np.ndarray:
    """How many files a block of ``rows`` rows is written as (module docstring)."""
    r = np.asarray(rows, dtype=np.float64)
    b = max(1e-9, float(b))
    return np.maximum.reduce([np.ones_like(r), np.round(r / b), np.ceil(r / (MAX_FILE_FACTOR * b))]).astype(np.int64)


def file_rows_per_block(rows: Sequence[float] | np.ndarray, b: float) -> np.ndarray:
    """Rows per file of each block: its (estimated) rows over its file count, rounded up."""
    r = np.asarray(rows, dtype=np.float64)
    return np.maximum(1, np.ceil(r / files_per_block(r, b))).astype(np.int64)


@dataclass
class BlockFiles:
    """How the blocks are written: files per block, rows per file, and the most rows the last
    file of a block may take when the block has more rows than estimated (1.3 b)."""

    files: np.ndarray
    rows_per_file: np.ndarray
    max_file_rows: int


def block_files(rows: Sequence[float] | np.ndarray, b: float) -> BlockFiles:
    """The file plan of blocks of (estimated) ``rows`` rows (module docstring)."""
    return BlockFiles(files_per_block(rows, b), file_rows_per_block(rows, b), int(MAX_FILE_FACTOR * b))


@dataclass
class InBlockOrder:
    """The chosen column (None: no order) and the measured cost of every candidate, as the
    fraction of the sample's rows the optimizer's workload reads (``"(none)"``: blocks whole)."""

    column: str | None
    costs: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"column": self.column, "workload_rows_fraction": {k: round(v, 6) for k, v in self.costs.items()}}


def _runs(order: np.ndarray, blocks: np.ndarray, counts: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Per block, its rows (sorted by the order) cut into ``counts[block]`` consecutive runs."""
    out = []
    by_block = np.argsort(blocks[order], kind="stable")
    sorted_rows = order[by_block]
    bounds = np.searchsorted(blocks[sorted_rows], np.arange(len(counts) + 1))
    for b in range(len(counts)):
        rows = sorted_rows[bounds[b]:bounds[b + 1]]
        if len(rows):
            out += [(b, part) for part in np.array_split(rows, min(int(counts[b]), len(rows))) if len(part)]
    return out


STRING_BOUND_CHARS = 16  # Iceberg's default metrics mode for strings: truncate(16)


@dataclass
class _FileStats:
    """A data file's statistics as Iceberg records them (the fields pyiceberg's metrics
    evaluator reads of a ``DataFile``), for a file not yet written."""

    record_count: int
    value_counts: dict[int, int]
    null_value_counts: dict[int, int]
    nan_value_counts: dict[int, int]
    lower_bounds: dict[int, bytes]
    upper_bounds: dict[int, bytes]
    values: dict[str, tuple[Any, Any]]  # column → (min, max) as pyiceberg decodes bounds; None: no bound


def _iceberg_columns(sample: pa.Table, zones: Sequence[tuple[str, str]]) -> tuple[Any, dict[str, Any]]:
    """An Iceberg schema of the zone columns (the types the table's are: timestamps as instants or
    not, strings, decimals, ...), and each column's field."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema

    fields = []
    for i, (name, _) in enumerate(zones, 1):
        t = sample.schema.field(name).type
        if pa.types.is_timestamp(t):
            t = pa.timestamp("us", tz="UTC" if t.tz is not None else None)
        elif pa.types.is_large_string(t) or pa.types.is_string_view(t):
            t = pa.string()
        fields.append(pa.field(name, t, metadata={b"PARQUET:field_id": str(i).encode()}))
    schema = pyarrow_to_schema(pa.schema(fields))
    return schema, {f.name: f for f in schema.fields}


def _iceberg_values(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A column as the values pyiceberg decodes its bounds to: days for dates, microseconds for
    timestamps and times, the values themselves otherwise."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = arr.type
    if pa.types.is_date(t):
        return arr.cast(pa.date32()).cast(pa.int32())
    if pa.types.is_timestamp(t):
        return pc.cast(arr, pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
    if pa.types.is_time(t):
        return pc.cast(arr, pa.time64("us"), safe=False).cast(pa.int64())
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.string())
    return arr


def _file_stats(sample: pa.Table, runs: list[np.ndarray], fields: dict[str, Any],
                widening: FileWidening | None = None, file_block: np.ndarray | None = None) -> list[_FileStats]:
    """The statistics Iceberg records of each file written from the sample rows ``runs`` (per
    zone column: lower and upper bounds without NaN, strings truncated as Iceberg's default
    metrics mode does, NULL and NaN counts), computed in one grouped aggregation. ``widening``:
    each file's bounds widened for the real file's rows the sample does not hold
    (``widened_bounds``), within the sample's range of the file's block (``file_block``: each
    file's block; None: one block); None: the sample's rows are the file's."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.utils.truncate import truncate_upper_bound_text_string

    file_of = np.empty(sample.num_rows, dtype=np.int64)
    for i, run in enumerate(runs):
        file_of[run] = i
    cols: dict[str, pa.Array] = {"__file": pa.array(file_of)}
    aggs: list[tuple] = []
    for n, name in enumerate(fields):
        values = _iceberg_values(sample.column(name))
        cols[f"c{n}"] = values
        aggs += [(f"c{n}", "min"), (f"c{n}", "max"), (f"c{n}", "count", pc.CountOptions(mode="only_null"))]
        if pa.types.is_floating(values.type):
            cols[f"n{n}"] = pc.is_nan(values).cast(pa.int64())
            aggs.append((f"n{n}", "sum"))
    grouped = pa.table(cols).group_by("__file").aggregate(aggs).sort_by("__file").to_pydict()
    if widening is not None and widening.fraction < 1.0:
        sizes = np.array([len(r) for r in runs], dtype=np.float64)
        for n, name in enumerate(fields):
            nonnull = sizes - np.asarray(grouped[f"c{n}_count"], dtype=np.float64)
            lows2, highs2 = _second_extremes(file_of, cols[f"c{n}"], len(runs))
            floor, ceiling = _block_extremes(grouped[f"c{n}_min"], grouped[f"c{n}_max"], file_block)
            grouped[f"c{n}_min"], grouped[f"c{n}_max"] = widened_bounds(
                widening.sorted_values(name, cols[f"c{n}"]), grouped[f"c{n}_min"], grouped[f"c{n}_max"],
                nonnull, widening.fraction, lows2, highs2, floor, ceiling)
    out = []
    for i, rows in enumerate(len(r) for r in runs):
        st = _FileStats(rows, {}, {}, {}, {}, {}, {})
        for n, (name, fld) in enumerate(fields.items()):
            fid, ftype = fld.field_id, fld.field_type
            lo, hi = grouped[f"c{n}_min"][i], grouped[f"c{n}_max"][i]
            st.value_counts[fid] = rows
            st.null_value_counts[fid] = int(grouped[f"c{n}_count"][i])
            if f"n{n}_sum" in grouped:
                st.nan_value_counts[fid] = int(grouped[f"n{n}_sum"][i] or 0)
            if lo is None or hi is None or (isinstance(lo, float) and (np.isnan(lo) or np.isnan(hi))):
                st.values[name] = (None, None)  # only NULLs or NaNs: no bounds
                continue
            if isinstance(lo, str):
                lo, hi = lo[:STRING_BOUND_CHARS], truncate_upper_bound_text_string(hi, STRING_BOUND_CHARS)
            st.values[name] = (lo, hi)
            st.lower_bounds[fid] = to_bytes(ftype, lo)
            if hi is not None:
                st.upper_bounds[fid] = to_bytes(ftype, hi)
        out.append(st)
    return out


# The guard's estimate of a file's bounds from the sample (``widened_bounds``): a file's sample rows
# miss its real rows beyond either end, on average by about the spacing of its sample's two lowest
# (highest) values (TAIL_GAPS of them, shrunk by the share of rows the sample misses) — the
# classic estimate of a range's end from a sample's two extreme order statistics, which is zero
# where the file's sample repeats its extreme value (a key every row of a file's end shares).
# Unbiased rather than worst case: the guard compares each template's mean reads over many draws
# and files, so what it needs is each file's expected reach, not a bound that covers every file.
# Where the real cut between two files of a block falls (files cut along the in-block order) is
# not widened for: a cut placed off by a few rows moves them from one neighbour to the other, as
# often each way, and leaves the files a range reads unchanged on average — widening both
# neighbours for it made a 1 % sample count 2–4× the files the real cuts make a range read
# (tests/layout/test_guard_widening.py).
TAIL_GAPS = 1.0


def _block_extremes(lows: Sequence[Any], highs: Sequence[Any], file_block: np.ndarray | None) -> tuple[list, list]:
    """Each file's block's lowest and highest sample value (over the block's files; None: none)."""
    blocks = np.zeros(len(lows), dtype=np.int64) if file_block is None else np.asarray(file_block)
    lo: dict[int, Any] = {}
    hi: dict[int, Any] = {}
    for b, a, z in zip(blocks.tolist(), lows, highs, strict=True):  # one step per file, not per row
        if a is None or z is None or (isinstance(a, float) and (np.isnan(a) or np.isnan(z))):
            continue
        lo[b] = a if b not in lo else min(lo[b], a)
        hi[b] = z if b not in hi else max(hi[b], z)
    return [lo.get(b) for b in blocks.tolist()], [hi.get(b) for b in blocks.tolist()]


def _second_extremes(file_of: np.ndarray, values: pa.Array, files: int) -> tuple[list, list]:
    """Each file's second lowest and second highest non-null, non-NaN sample value (None: fewer
    than two), from one sort of the sample by (file, value)."""
    valid = pc.is_valid(values)
    if pa.types.is_floating(values.type):
        valid = pc.and_(valid, pc.invert(pc.is_nan(values)))
    ordered = pa.table({"f": pa.array(file_of), "v": values}).filter(valid).sort_by([("f", "ascending"),
                                                                                    ("v", "ascending")])
    of = ordered.column("f").to_numpy()
    ids = np.arange(files)
    starts, ends = np.searchsorted(of, ids, "left"), np.searchsorted(of, ids, "right")
    two = np.flatnonzero(ends - starts >= 2)
    lows2: list = [None] * files
    highs2: list = [None] * files
    if len(two):
        v = ordered.column("v")
        for i, lo, hi in zip(two, v.take(pa.array(starts[two] + 1)).to_pylist(),
                             v.take(pa.array(ends[two] - 2)).to_pylist(), strict=True):
            lows2[i], highs2[i] = lo, hi
    return lows2, highs2


def widened_bounds(ordered_values: np.ndarray, lows: Sequence[Any], highs: Sequence[Any], rows: np.ndarray,
                   fraction: float, lows2: Sequence[Any] | None = None, highs2: Sequence[Any] | None = None,
                   floor: Sequence[Any] | None = None, ceiling: Sequence[Any] | None = None) -> tuple[list, list]:
    """Each file's [lower, upper] bounds of one column as the real file will record them, from
    the bounds of its sample rows (``lows``, ``highs``; None: no bound): the expected reach of the
    real file, never narrower than its sample's (see ``TAIL_GAPS``). ``ordered_values``: the
    column's non-null (non-NaN) sample values sorted; ``rows``: each file's non-null sample rows;
    ``fraction``: the sample's share of the table (1: the sample is the table, nothing widened);
    ``lows2``, ``highs2``: each file's second lowest and highest sample value (None: not known);
    ``floor``, ``ceiling``: how far each file's bounds may move (its block's sample extremes; None:
    no limit). A file's real rows are its block's: below the block's sample minimum they are either
    excluded by the trees' cuts (a region's customers are a key range the next region's do not
    enter) or a tail one spacing of the whole block's sample long — which no file's own spacing
    should stand for.

    A file's real rows reach beyond its sample's lowest value by about the spacing of its two
    lowest sample values: the bound moves down by ⌈TAIL_GAPS · (1 − fraction) · p⌉ places of the
    sorted sample values, p the whole sample's values in [lowest, second lowest) — 0 when the two
    are equal; the upper bound likewise. Without a second value, p is the file's mean spacing
    K / m (its sample rows m span K of the whole sample's values). Past the sample's extremes a
    numeric column goes on by its mean gap per place (the table reaches beyond its sample), any
    other stops there. The margin shrinks as the sample holds more rows per file."""
    lows, highs = list(lows), list(highs)
    n = len(ordered_values)
    keep = max(0.0, 1.0 - float(fraction))
    if n == 0 or keep == 0.0:
        return lows, highs
    have = [i for i, (lo, hi) in enumerate(zip(lows, highs, strict=True)) if lo is not None and hi is not None
            and not (isinstance(lo, float) and (np.isnan(lo) or np.isnan(hi)))]
    if not have:
        return lows, highs
    idx = np.asarray(have)
    lo_rank = np.searchsorted(ordered_values, np.asarray([lows[i] for i in have], dtype=ordered_values.dtype), "left")
    hi_rank = np.searchsorted(ordered_values, np.asarray([highs[i] for i in have], dtype=ordered_values.dtype),
                              "right") - 1
    spread = np.maximum(1, hi_rank - lo_rank + 1) / np.maximum(1.0, np.asarray(rows, dtype=np.float64)[idx])
    places_lo, places_hi = spread.copy(), spread.copy()
    if lows2 is not None and highs2 is not None:
        known = np.array([lows2[i] is not None and highs2[i] is not None for i in have], dtype=bool)
        if known.any():
            at = np.flatnonzero(known)
            lo2 = np.asarray([lows2[have[j]] for j in at], dtype=ordered_values.dtype)
            hi2 = np.asarray([highs2[have[j]] for j in at], dtype=ordered_values.dtype)
            places_lo[at] = np.searchsorted(ordered_values, lo2, "left") - lo_rank[at]
            places_hi[at] = hi_rank[at] - (np.searchsorted(ordered_values, hi2, "right") - 1)
    step_lo = np.ceil(TAIL_GAPS * keep * np.maximum(places_lo, 0)).astype(np.int64)
    step_hi = np.ceil(TAIL_GAPS * keep * np.maximum(places_hi, 0)).astype(np.int64)
    new_lo: np.ndarray = ordered_values[np.clip(lo_rank - step_lo, 0, n - 1)]
    new_hi: np.ndarray = ordered_values[np.clip(hi_rank + step_hi, 0, n - 1)]
    if ordered_values.dtype.kind in "iuf" and n > 1:
        # past the sample's extremes (the table's reach beyond them): the mean gap per place
        gap = (float(ordered_values[-1]) - float(ordered_values[0])) / (n - 1)
        below = np.maximum(0, step_lo - lo_rank) * gap
        above = np.maximum(0, hi_rank + step_hi - (n - 1)) * gap
        if ordered_values.dtype.kind == "f":
            new_lo, new_hi = new_lo - below, new_hi + above
        else:
            info = np.iinfo(ordered_values.dtype)
            new_lo = np.maximum(new_lo.astype(np.float64) - np.ceil(below), info.min).astype(ordered_values.dtype)
            new_hi = np.minimum(new_hi.astype(np.float64) + np.ceil(above), info.max).astype(ordered_values.dtype)
    for j, i in enumerate(have):
        lo, hi = new_lo[j], new_hi[j]
        lo, hi = lo.item() if hasattr(lo, "item") else lo, hi.item() if hasattr(hi, "item") else hi
        if floor is not None and floor[i] is not None:
            lo = max(lo, floor[i])
        if ceiling is not None and ceiling[i] is not None:
            hi = min(hi, ceiling[i])
        lows[i] = min(lows[i], lo)
        highs[i] = max(highs[i], hi)
    return lows, highs


@dataclass
class FileWidening:
    """What ``widened_bounds`` needs of a sample: its share of the table, and the zone columns'
    sorted sample values, made once per sample."""

    fraction: float
    sorted_cache: dict[str, np.ndarray] = field(default_factory=dict)

    def sorted_values(self, name: str, values: pa.Array) -> np.ndarray:
        got = self.sorted_cache.get(name)
        if got is None:
            valid = pc.drop_null(values)
            if pa.types.is_floating(valid.type):
                valid = valid.filter(pc.invert(pc.is_nan(valid)))
            got = self.sorted_cache[name] = np.sort(valid.to_numpy(zero_copy_only=False))
        return got


def _file_checks(queries: Sequence[tuple[TableFilter, float]], schema: Any, fields: dict[str, Any]) -> list:
    """Per query, what prunes a file: Iceberg's min/max (pyiceberg's inclusive metrics evaluator on
    the expression the planner hands it, ``expr.iceberg.to_pyiceberg``) and the planner's join
    pruning (a join's key set against the file's foreign-key bounds) — what ``planner.scan.
    plan_scan`` asks of a written file's statistics. A check takes the files' statistics and
    returns which of them may hold a matching row."""
    from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator

    from pando_iceberg.expr.iceberg import to_pyiceberg
    from pando_iceberg.planner.joins import bounds_may_contain, iceberg_key_values
    from pando_iceberg.planner.metrics import compiled

    def check(f: TableFilter):
        metrics = compiled(_InclusiveMetricsEvaluator(schema, to_pyiceberg(f, schema)))
        joins = []
        for j in getattr(f, "joins", None) or ():
            fld = fields.get(next((n for n in fields if n.lower() == j.column.lower()), ""))
            if fld is None or j.dim_keys is None:
                continue
            try:
                joins.append((fld.name, iceberg_key_values(j.dim_keys, fld.field_type)))
            except TypeError:  # bounds of this type are not compared (the planner skips the join too)
                continue

        def may_hold(stats: list[_FileStats]) -> np.ndarray:
            keep = np.fromiter((metrics(s) for s in stats), dtype=bool, count=len(stats))
            for name, keys in joins:
                keep &= bounds_may_contain(keys, [s.values[name][0] for s in stats],
                                           [s.values[name][1] for s in stats])
            return keep

        return may_hold

    return [check(f) for f, _ in queries]


def zone_columns(queries: Sequence[tuple[TableFilter, float]], sample: pa.Table) -> list[tuple[str, str]]:
    """(column, kind) of the sample's columns whose file statistics can prune a query: the
    columns the queries' filters name and the foreign keys of their joins (heaviest range
    columns first)."""
    names = {n.lower(): n for n in sample.schema.names}
    named: dict[str, None] = {c: None for c, _ in range_columns(queries)}
    for f, _ in queries:
        if not f.is_true_expr():
            named.update({c.name.lower(): None for c in f.expr.find_all(exp.Column)})
        named.update({j.column.lower(): None for j in getattr(f, "joins", None) or ()})
    out = []
    for c in named:
        kind = arrow_kind(sample.schema.field(names[c]).type) if c in names else None
        if kind is not None:
            out.append((names[c], kind[0]))
    return out


def files_read(layout: Any, sample: pa.Table, queries: Sequence[tuple[TableFilter, float]], b_sample: float,
               order: str | None, *, zones: Sequence[tuple[str, str]] | None = None,
               evaluations: Evaluations | None = None, fraction: float = 1.0) -> np.ndarray:
    """Per query, the fraction of the sample's rows it reads when every block is written as
    ``files_per_block`` files cut along ``order`` (None: the sample's own order) and a block the
    trees scan is read file by file, skipping the files the planner skips by their statistics:
    Iceberg's min/max pruning and the join pruning of ``planner.scan.plan_scan``, asked of each
    file's statistics as Iceberg would record them (``_file_stats``, over the ``zones``
    columns). As the sample's rows stand for the table's, this estimates the fraction of the
    table's rows in the data files the query opens — what ``spark/rewrite_common.reads_now``
    measures of the files the table has now. ``evaluations``: the cut masks and side answers on
    ``sample`` shared by the layouts learned on it (``layout.Evaluations``); same result.
    ``fraction``: the sample's share of the table; below 1 each file's bounds are widened for
    the real file's rows the sample misses (``widened_bounds``), so that the estimate does not
    undercount what the files written will read."""
    queries = [(f, float(w)) for f, w in queries]
    if not queries or sample.num_rows == 0:
        return np.zeros(len(queries), dtype=np.float64)
    return _Reads(sample, queries, zones, evaluations, fraction)(layout, b_sample, order)


class _Reads:
    """``files_read`` of several (layout, order) pairs on one sample for one list of queries:
    what does not change between them made once — the zone columns' Iceberg schema and each
    query's file checks, each layout's blocks of the sample and scan matrix."""

    def __init__(self, sample: pa.Table, queries: list[tuple[TableFilter, float]],
                 zones: Sequence[tuple[str, str]] | None, evaluations: Evaluations | None, fraction: float = 1.0):
        self.sample, self.queries, self.evaluations = sample, queries, evaluations
        self.widening = FileWidening(min(1.0, max(0.0, float(fraction))))  # its sorted values shared
        zones = zone_columns(queries, sample) if zones is None else list(zones)
        self.fields: dict[str, Any] = {}
        self.checks: list = []
        if zones and queries:
            schema, self.fields = _iceberg_columns(sample, zones)
            self.checks = _file_checks(queries, schema, self.fields)
        self._placed: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}

    def _placement(self, layout: Any) -> tuple[np.ndarray, np.ndarray]:
        """The block of every sample row and the Q × B scan matrix of ``layout``."""
        got = self._placed.get(id(layout))
        if got is None:
            ev, sample = self.evaluations, self.sample
            if ev is None:
                blocks = np.asarray(layout.route(sample), dtype=np.int64)
                scanned = layout.scanned(self.queries)
            else:
                blocks = np.asarray(layout.route(sample, ev.mask_map(layout.cuts)), dtype=np.int64)
                scanned = layout.scanned(self.queries, sides=ev.sides([f for f, _ in self.queries], layout.cuts))
            got = self._placed[id(layout)] = (layout, blocks, scanned)  # the layout keeps its id taken
        return got[1], got[2]

    def __call__(self, layout: Any, b_sample: float, order: str | None) -> np.ndarray:
        sample = self.sample
        if not self.queries or sample.num_rows == 0:
            return np.zeros(len(self.queries), dtype=np.float64)
        blocks, scanned = self._placement(layout)
        counts = files_per_block(np.bincount(blocks, minlength=int(layout.num_blocks)), b_sample)
        if order is None:
            rows_order = np.arange(sample.num_rows)
        else:
            column = sample.column(order).combine_chunks()
            rows_order = pc.array_sort_indices(column, null_placement="at_end").to_numpy()
        runs = _runs(rows_order, blocks, counts)
        of_block = np.array([b for b, _ in runs], dtype=np.int64)
        sizes = np.array([len(r) for _, r in runs], dtype=np.float64)
        read = scanned[:, of_block]  # Q × files: the trees open the file's block
        if self.fields:
            stats = _file_stats(sample, [r for _, r in runs], self.fields, self.widening, of_block)
            for q, may_hold in enumerate(self.checks):
                opened = np.flatnonzero(read[q])
                if len(opened):
                    read[q, opened] = may_hold([stats[i] for i in opened])
        out = read.astype(np.float64) @ sizes
        return out / float(sample.num_rows)


def files_cost(layout: Any, sample: pa.Table, queries: Sequence[tuple[TableFilter, float]], b_sample: float,
               order: str | None, *, zones: Sequence[tuple[str, str]] | None = None,
               evaluations: Evaluations | None = None) -> float:
    """Fraction of the sample's rows ``queries`` read (weighted as in ``layout/cost.py``): the
    weighted mean of ``files_read``."""
    queries = [(f, float(w)) for f, w in queries if float(w) > 0]
    if not queries or sample.num_rows == 0:
        return 0.0
    weights = np.array([w for _, w in queries])
    read = files_read(layout, sample, queries, b_sample, order, zones=zones, evaluations=evaluations)
    return float(read @ weights / weights.sum())


def choose_in_block_order(layout: Any, sample: pa.Table, queries: Sequence[tuple[TableFilter, float]], b_sample: float,
                          max_candidates: int = 4, *, evaluations: Evaluations | None = None) -> InBlockOrder:
    """The in-block order of ``layout`` for ``queries`` (module docstring), on ``sample``
    (``evaluations``: as ``files_read`` takes them)."""
    queries = [(f, float(w)) for f, w in queries if float(w) > 0]
    if not queries or sample.num_rows == 0:
        return InBlockOrder(None)
    names = {n.lower(): n for n in sample.schema.names}
    zones = zone_columns(queries, sample)
    candidates = [names[c] for c, _ in range_columns(queries)
                  if c in names and any(z == names[c] for z, _ in zones)][:max_candidates]
    reads = _Reads(sample, queries, zones, evaluations)
    weights = np.array([w for _, w in queries])

    def cost(order: str | None) -> float:  # files_cost, with what the orders share made once
        return float(reads(layout, b_sample, order) @ weights / weights.sum())

    costs = {"(none)": cost(None)}
    for c in candidates:
        costs[c] = cost(c)
    best = min(candidates, key=lambda c: costs[c], default=None)
    if best is None or costs[best] > (1.0 - MIN_GAIN) * costs["(none)"]:
        return InBlockOrder(None, costs)
    return InBlockOrder(best, costs)


# The guard's bound unless the option or the table property says otherwise (docs/LAYOUT.md).
DEFAULT_MAX_TEMPLATE_REGRESSION: float | None = 1.1
SMALL_TEMPLATE = 0.01
SLACK_FILES = 1
P_MAX_TEMPLATE_REGRESSION = "pando.layout.max-template-regression"  # table property: the guard's bound
# The weights of the breaking templates' draws in the candidates learned when no layout holds the
# guard (``spark/rewrite.learn_layout``, ``spark/partitioned.py``): the first is the candidate
# with the table's order cuts alone.
GUARD_WEIGHTS = (1, 4, 16, 64)
# When the unconstrained candidates break the guard (``spark/rewrite.learn_layout``): at most this
# many §6.2 bottom-ups over the order trees (``order_trees``), one per set of multipliers, then at
# most two layouts learned again (reweighed; the most constrained) before a refusal.
GUARD_MERGES = 4
# Once a merge holds the guard after one that broke it, at most this many more merges between the
# two sets of multipliers (``between_multipliers``): a multiplier larger than the constraint needs
# gives up total reads for nothing, so the search closes in on the smallest that holds.
GUARD_REFINES = 2


def between_multipliers(breaking: Mapping[str, float], holding: Mapping[str, float]) -> dict[str, float]:
    """The multipliers halfway (geometric mean, per template) between a set whose merged layout
    broke the guard and one whose merged layout held it: the next step of a bisection for the
    smallest price of the constraint that still holds it (a template absent from a set weighs 1)."""
    return {t: float(np.sqrt(breaking.get(t, 1.0) * holding.get(t, 1.0))) for t in {*breaking, *holding}}


def guard_multipliers(guard: TemplateGuard, previous: Mapping[str, float] | None = None) -> dict[str, float]:
    """The factor each template's draws weigh by in the next candidate: the constrained objective
    relaxed (Lagrange), template t's constraint ``reads_t ≤ allowed_t`` priced into the §5 cost as
    extra weight on its draws. Set once per candidate from each breaking template's measured excess,
    not searched: ``previous[t] × (reads_t / allowed_t)²`` (a multiplicative step, larger the
    further it is over), at most ``GUARD_WEIGHTS[-1]``; templates that hold keep theirs."""
    out = dict(previous or {})
    for t in guard.breaking():
        excess = t.with_layout / t.allowed if t.allowed > 0 else float(GUARD_WEIGHTS[-1])
        out[t.template] = float(min(GUARD_WEIGHTS[-1], out.get(t.template, 1.0) * max(excess, 1.0) ** 2))
    return out


def parse_regression_bound(value: Any) -> float | None:
    """The guard's bound from an option or table property value: a number > 0, or None when the
    guard is off (``0`` or ``off``); ValueError otherwise."""
    text = str(value).strip().lower()
    if text in ("off", "0", "0.0"):
        return None
    bound = float(text)
    if not bound > 0 or not np.isfinite(bound):
        raise ValueError(f"expected a number > 0, 0 or 'off', got {value!r}")
    return bound


@dataclass
class TemplateRead:
    """One workload template's reads (fractions of the table's rows in the data files its draws
    open, weighted mean over its validation draws): ``now`` on the table's current files,
    ``with_layout`` with the kept layout (``files_read``), and the most the guard allows."""

    template: str
    now: float
    with_layout: float
    allowed: float
    now_bytes: float | None = None

    @property
    def ratio(self) -> float:
        return self.with_layout / self.now if self.now > 0 else (1.0 if self.with_layout <= 0 else float("inf"))

    @property
    def holds(self) -> bool:
        return self.with_layout <= self.allowed + 1e-12

    def to_json(self) -> dict:
        return {"template": self.template, "now": round(self.now, 6), "with_layout": round(self.with_layout, 6),
                "allowed": round(self.allowed, 6),
                "now_bytes": None if self.now_bytes is None else round(self.now_bytes, 6)}

    @classmethod
    def from_json(cls, d: dict) -> TemplateRead:
        return cls(d["template"], float(d["now"]), float(d["with_layout"]), float(d["allowed"]), d.get("now_bytes"))

    def line(self, of: str = "the table") -> str:
        """What it reads (of ``of``: the table, or the partition whose layout it is) and the verdict."""
        verdict = "holds" if self.holds else "BREAKS the guard"
        ratio = "∞" if self.ratio == float("inf") else f"{self.ratio:.2f}×"
        return (f"{self.template}: reads {self.now:.2%} of {of} now, {self.with_layout:.2%} with the layout "
                f"({ratio}; at most {self.allowed:.2%} allowed): {verdict}")


@dataclass
class TemplateGuard:
    """The per-template guard of the kept layout (module docstring of ``select_layout``): the
    bound (None: off), each template's reads, and whether the layout was kept although it breaks
    the guard (no candidate held it)."""

    bound: float | None
    templates: list[TemplateRead]

    @property
    def holds(self) -> bool:
        return self.bound is None or all(t.holds for t in self.templates)

    def breaking(self) -> list[TemplateRead]:
        return [] if self.bound is None else [t for t in self.templates if not t.holds]

    def to_json(self) -> dict:
        return {"max_template_regression": self.bound, "holds": self.holds,
                "templates": [t.to_json() for t in self.templates]}

    @classmethod
    def from_json(cls, d: dict) -> TemplateGuard:
        return cls(d.get("max_template_regression"), [TemplateRead.from_json(t) for t in d.get("templates", [])])

    def refusal(self, table: str) -> str:
        """Why a rewrite of ``table`` with this layout stops (the templates that break the guard)."""
        lines = "; ".join(t.line() for t in self.breaking())
        return (f"no candidate layout for {table} keeps every workload template within {self.bound:g}× of what it "
                f"reads now (option 'max-template-regression', table property {P_MAX_TEMPLATE_REGRESSION}): {lines}. "
                "Nothing was written. Pass force => true to apply the layout anyway, raise the bound, or give "
                "the workload more weight on those templates")


def template_reads(per_query: np.ndarray, queries: Sequence[tuple[TableFilter, float]],
                   among: np.ndarray | None = None) -> dict[str, float]:
    """Per template (``templates.template_key``), the weighted mean of ``per_query`` over its queries;
    ``among`` (a mask of the queries): over those of them only, for a template that has any."""
    keys = [template_key(f) for f, _ in queries]
    live = set() if among is None else {k for k, a in zip(keys, np.asarray(among, dtype=bool), strict=True) if a}
    num: dict[str, float] = {}
    den: dict[str, float] = {}
    for n, ((_, w), v, key) in enumerate(zip(queries, per_query, keys, strict=True)):
        num.setdefault(key, 0.0)
        den.setdefault(key, 0.0)
        if key in live and not among[n]:  # type: ignore[index]
            continue
        num[key] += float(w) * float(v)
        den[key] += float(w)
    return {k: num[k] / den[k] if den[k] > 0 else 0.0 for k in num}


def matching_draws(queries: Sequence[tuple[TableFilter, float]], sample: pa.Table) -> np.ndarray:
    """The draws the guard averages a template's reads over: those some row of the sample
    satisfies (the filter's own part, and its joins whose key sets are known: the foreign key
    among them). A draw no row matches (a window where the table has no row, a year of the date
    dimension before the first sale) is no query the template's users run when its training draws
    do match; counted, it pulls what the template reads now and with the layout toward what
    reading nothing costs on each (0 with a layout whose blocks have bounds, a file of NULL keys
    on the table as loaded): the ratio the guard bounds is not the template's, and a template
    made to look small gets ``allowed_reads``' slack. A template none of whose draws matches a
    sample row (a point lookup the sample is too small for) keeps them all (``template_reads``)."""
    from pando_iceberg.exceptions import PandoError
    from pando_iceberg.expr.keys import member_mask

    names = {n.lower(): n for n in sample.schema.names}
    out = np.zeros(len(queries), dtype=bool)
    for q, (f, _) in enumerate(queries):
        try:
            hit = np.asarray(f.evaluate(sample), dtype=bool)
            for j in getattr(f, "joins", None) or ():
                col = names.get(j.column.lower())
                if j.dim_keys is not None and col is not None and hit.any():
                    hit &= member_mask(sample.column(col), j.dim_keys)
        except (PandoError, ValueError, TypeError, pa.ArrowException):  # the sample cannot decide it: it counts
            hit = np.ones(1, dtype=bool)
        out[q] = bool(hit.any())
    return out


def allowed_reads(now: dict[str, float], bound: float, file_fraction: float) -> dict[str, float]:
    """The most each template may read with a new layout: ``bound`` × what it reads now; a
    template reading less than ``SMALL_TEMPLATE`` of the table now may also read ``SLACK_FILES``
    more file(s) of the layout (``file_fraction``: one file's share of the table's rows). Such a
    template reads one or two files now, and the estimate on the sample (``files_read``) counts
    whole files: a block boundary inside its range adds a file, which no bound on the ratio of two
    small numbers should refuse a layout for."""
    return {t: max(bound * v, v + SLACK_FILES * file_fraction) if v < SMALL_TEMPLATE else bound * v
            for t, v in now.items()}


@dataclass
class LayoutChoice:
    """Which of several learned layouts is kept, the validation cost of each (``files_cost`` on
    the validation draws, as a fraction of the sample's rows), and, under the guard, each
    candidate's per-template reads and whether it holds the guard."""

    index: int
    costs: list[float]
    guard: TemplateGuard | None = None
    holds: list[bool] = field(default_factory=list)
    unconstrained: int | None = None  # the index kept without the guard, when it differs
    guards: list[TemplateGuard] = field(default_factory=list)  # each candidate's, under the guard

    def to_json(self, labels: Sequence[Any]) -> dict:
        out: dict[str, Any] = {"kept_k": _k_of(labels[self.index]),
                               "validation_rows_fraction": {str(k): round(c, 6) for k, c in zip(labels, self.costs)}}
        if len(labels) > 0 and str(labels[self.index]) != str(out["kept_k"]):
            out["kept"] = str(labels[self.index])
        if self.holds:
            out["guard_holds"] = {str(k): h for k, h in zip(labels, self.holds)}
        return out


def _k_of(label: Any) -> int:
    return int(str(label).split()[0])


def select_layout(layouts: Sequence[tuple[Any, str | None]], sample: pa.Table,
                  validation: Sequence[tuple[TableFilter, float]], b_sample: float, *,
                  now: np.ndarray | None = None, bound: float | None = None, file_fraction: float = 0.0,
                  now_bytes: np.ndarray | None = None, measured: list[np.ndarray] | None = None,
                  evaluations: Evaluations | None = None, fraction: float = 1.0) -> LayoutChoice:
    """Among ``(layout, in-block order)`` pairs in order of preference (fewer trees first), the
    one whose files the validation draws read least of (``files_cost``); a later one replaces
    the kept one only when it reads ``MIN_GAIN`` less (more trees cost planning time and sidecar
    bytes for nothing otherwise). Measured rather than trusted to the §5 cost model: blocks
    merged from many k-tuples (k > 1) have wide zone maps, and the model's cost is on the draws
    the layout was learned from (taxi: k = 3 read 0.36 of the rows per held-out query against
    k = 1's 0.26 while the model preferred k = 3).

    The guard (``bound``, with ``now``: per validation draw, the fraction of the table's rows in
    the current data files it opens): a constraint of the choice, not a report after it. Only
    candidates whose every template reads at most ``allowed_reads`` (bound × now, plus the
    slack of small templates) are eligible; among them the same rule picks. When none is, the
    unconstrained choice is returned with its guard broken (the caller refuses or forces).
    ``measured``: the ``files_read`` of the first layouts, from an earlier call on the same
    validation draws; extended in place with those of the others. ``evaluations``, ``fraction``
    (the sample's share of the table: below 1 the files' bounds are widened conservatively): as
    ``files_read`` takes them."""
    if not layouts:
        raise ValueError("select_layout needs at least one layout")
    validation = [(f, float(w)) for f, w in validation]
    zones = zone_columns(validation, sample)
    weights = np.array([w for _, w in validation]) if validation else np.zeros(0)
    reads = measured if measured is not None else []
    measure = _Reads(sample, validation, zones, evaluations, fraction)
    reads += [measure(layout, b_sample, order) for layout, order in layouts[len(reads):]]
    costs = [float(r @ weights / weights.sum()) if weights.sum() > 0 else 0.0 for r in reads]

    def pick(eligible: list[int]) -> int:
        best = eligible[0]
        for i in eligible[1:]:
            if costs[i] < (1.0 - MIN_GAIN) * costs[best]:
                best = i
        return best

    free = pick(list(range(len(layouts))))
    if bound is None or now is None:
        return LayoutChoice(free, costs)
    live = matching_draws(validation, sample)
    now_t = template_reads(np.asarray(now), validation, live)
    bytes_t = template_reads(np.asarray(now_bytes), validation, live) if now_bytes is not None else {}
    allowed = allowed_reads(now_t, bound, file_fraction)
    guards = []
    for r in reads:
        with_t = template_reads(r, validation, live)
        guards.append(TemplateGuard(bound, [TemplateRead(t, now_t[t], with_t[t], allowed[t], bytes_t.get(t))
                                            for t in now_t]))
    holds = [g.holds for g in guards]
    eligible = [i for i, h in enumerate(holds) if h]
    best = pick(eligible) if eligible else free
    return LayoutChoice(best, costs, guards[best], holds, free if free != best else None, guards)


def order_cuts(bounds: Mapping[str, tuple[Sequence[Any], Sequence[Any]]], schema: pa.Schema,
               max_overlap: float = 0.25, max_columns: int = 3, max_cuts: int = 256) -> list[ExprCut]:
    """Candidate cuts from the order the table already has: for each column (at most
    ``max_columns``, least overlap first) whose current files' bounds barely overlap (``bounds``:
    column → (each file's lower bounds, upper bounds), values on the column's line), ``column <=
    upper bound`` at the files' upper bounds (at most ``max_cuts`` a column, evenly spaced).
    Overlap: the mean share of the other files whose [lower, upper] meets a file's; a column over
    ``max_overlap`` (one the table is not ordered by) gives no cuts. What a table loaded in
    arrival order keeps with them: ranges of its date (its month, its day of the year, ...)."""
    names = {n.lower(): n for n in schema.names}
    overlaps: list[tuple[float, str]] = []
    for col, (lows, highs) in bounds.items():
        kind = arrow_kind(schema.field(names[col.lower()]).type) if col.lower() in names else None
        if kind is None or kind[0] in ("string", "bool") or len(lows) < 2:
            continue
        lo = np.sort(np.asarray([float(v) for v in lows]))
        hi = np.sort(np.asarray([float(v) for v in highs]))
        # files meeting file i: those starting at or before its upper bound, minus those ending
        # before its lower bound (they start before it too), minus itself
        meets = (np.searchsorted(lo, np.asarray([float(v) for v in highs]), side="right")
                 - np.searchsorted(hi, np.asarray([float(v) for v in lows]), side="left") - 1)
        overlap = float(np.mean(meets / (len(lo) - 1)))
        if overlap <= max_overlap:
            overlaps.append((overlap, col))
    out: list[ExprCut] = []
    for _, col in sorted(overlaps)[:max_columns]:
        name = names[col.lower()]
        line = (arrow_kind(schema.field(name).type) or ("", 0))[0]
        highs = sorted(set(bounds[col][1]))[:-1]  # the last file's upper bound splits nothing
        if len(highs) > max_cuts:
            highs = [highs[int(i)] for i in np.linspace(0, len(highs) - 1, max_cuts).round()]
        for v in highs:
            node = exp.LTE(this=exp.Column(this=exp.to_identifier(name)), expression=render(typed_value(v, line)))
            try:
                out.append(ExprCut(node, schema))
            except Exception:  # a bound the binder cannot type: no cut there
                continue
    return out


def order_trees(sample: pa.Table, order: Sequence[ExprCut], guarded: Sequence[tuple[TableFilter, float]],
                others: Sequence[Any], b_sample: float, *, evaluations: Evaluations,
                max_ktuples: int | None = 10_000) -> list:
    """The trees of a layout learned already (``others``: the unconstrained candidate's k, copied)
    behind one more, the order the table already has (the guard's cheap construction, beyond the
    paper): §6.1's greedy over ``order`` (the table's current order cuts, ``order_cuts``) for the
    ``guarded`` draws alone (the templates the unconstrained layouts make read more than the guard
    allows), leaves of at least ``b_sample`` rows. Every k-tuple then lies within one leaf of the
    first tree, a range of the current files at most as fine as they are; ``merged_layout`` makes
    blocks of them, as often as the guard asks, and nothing is learned again."""
    from pando_iceberg.layout import build_trees, top_down_threshold
    from pando_iceberg.layout.cost import normalize_queries

    order = list(order)
    first = build_trees(sample, order, list(guarded), 1, top_down_threshold(b_sample, 1), max_ktuples,
                        masks=evaluations.masks(order), sides=evaluations.sides(normalize_queries(guarded)[0], order))
    return first + copy.deepcopy(list(others))


def merged_layout(trees: Sequence[Any], sample: pa.Table, queries: Sequence[tuple[TableFilter, float]],
                  b_sample: float, *, evaluations: Evaluations) -> Any:
    """§6.2's bottom-up over ``trees`` for ``queries`` (their weights may price the guard in,
    ``guard_multipliers``): blocks of at least ``b_sample`` sample rows, the layout (not finalized)."""
    from pando_iceberg.layout import Layout, assign_blocks, cut_table
    from pando_iceberg.layout.cost import normalize_queries

    used, _ = cut_table(list(trees))
    queries = list(queries)
    return Layout.from_assignment(assign_blocks(list(trees), sample, queries, b_sample,
                                                sides=evaluations.sides(normalize_queries(queries)[0], used),
                                                masks=evaluations.mask_map(used)))
