"""Files of about b rows, cut along an in-block order (beyond the paper; issue 15 item 2).

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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.expr.evaluate import arrow_kind
from pando_iceberg.expr.values import render
from pando_iceberg.workload.templates import range_columns, to_line, typed_value

__all__ = [
    "MAX_FILE_FACTOR",
    "MIN_GAIN",
    "BlockFiles",
    "InBlockOrder",
    "LayoutChoice",
    "block_files",
    "choose_in_block_order",
    "file_rows_per_block",
    "files_cost",
    "files_per_block",
    "select_layout",
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


def _zone_cut(part: pa.Table, columns: Sequence[tuple[str, str]], schema: pa.Schema, cache: dict) -> ExprCut | None:
    """A file's zone map as a cut: ``c BETWEEN min AND max`` (``OR c IS NULL`` when the file
    holds NULLs) for every zone column ``(name, kind)``, ANDed — what Iceberg's min/max
    pruning proves of a file, asked with a filter's own ``sides``."""
    key = []
    for name, _ in columns:
        column = part.column(name)
        mm = pc.min_max(column).as_py()
        key.append((mm["min"], mm["max"], column.null_count > 0))
    key_t = tuple(key)
    if key_t in cache:
        return cache[key_t]
    nodes: list[exp.Expression] = []
    for (name, kind), (lo, hi, nulls) in zip(columns, key):
        col = exp.Column(this=exp.to_identifier(name))
        if lo is None:
            nodes.append(exp.Is(this=col, expression=exp.Null()))
            continue
        low, high = (render(typed_value(to_line(v, kind), kind)) for v in (lo, hi))
        node: exp.Expression = exp.Between(this=col, low=low, high=high)
        if nulls:
            node = exp.Paren(this=exp.Or(this=node, expression=exp.Is(this=col.copy(), expression=exp.Null())))
        nodes.append(node)
    try:
        both = exp.and_(*nodes) if nodes else None
        assert both is None or isinstance(both, exp.Expression)  # typed as sqlglot's Condition trait; an exp.And
        cut = ExprCut(both, schema) if both is not None else None
    except Exception:  # a value the binder cannot type (e.g. NaN bounds): no pruning by this file's map
        cut = None
    cache[key_t] = cut
    return cut


def zone_columns(queries: Sequence[tuple[TableFilter, float]], sample: pa.Table) -> list[tuple[str, str]]:
    """(column, kind) of the sample's ordered, non-string columns the queries' filters name:
    the columns whose file min/max can prune a query (heaviest range columns first)."""
    names = {n.lower(): n for n in sample.schema.names}
    named: dict[str, None] = {c: None for c, _ in range_columns(queries)}
    for f, _ in queries:
        if not f.is_true_expr():
            named.update({c.name.lower(): None for c in f.expr.find_all(exp.Column)})
    out = []
    for c in named:
        kind = arrow_kind(sample.schema.field(names[c]).type) if c in names else None
        if kind is not None and kind[0] not in ("string", "bool"):
            out.append((names[c], kind[0]))
    return out


def files_cost(layout: Any, sample: pa.Table, queries: Sequence[tuple[TableFilter, float]], b_sample: float,
               order: str | None, *, zones: Sequence[tuple[str, str]] | None = None) -> float:
    """Fraction of the sample's rows ``queries`` read (weighted as in ``layout/cost.py``) when
    every block is written as ``files_per_block`` files cut along ``order`` (None: the
    sample's own order) and a block the trees scan is read file by file, skipping the files
    whose zone map (min/max of every zone column) proves the filter false — the trees' §5
    reasoning, then Iceberg's own min/max pruning, both on the sample."""
    queries = [(f, float(w)) for f, w in queries if float(w) > 0]
    if not queries or sample.num_rows == 0:
        return 0.0
    zones = zone_columns(queries, sample) if zones is None else list(zones)
    blocks = np.asarray(layout.route(sample), dtype=np.int64)
    counts = files_per_block(np.bincount(blocks, minlength=int(layout.num_blocks)), b_sample)
    weights = np.array([w for _, w in queries])
    scanned = layout.scanned(queries)  # Q × B
    if order is None:
        rows_order = np.arange(sample.num_rows)
    else:
        rows_order = pc.array_sort_indices(sample.column(order).combine_chunks(), null_placement="at_end").to_numpy()
    cache: dict = {}
    cost = 0.0
    for b, run in _runs(rows_order, blocks, counts):
        readers = np.flatnonzero(scanned[:, b])
        if not len(readers):
            continue
        cut = _zone_cut(sample.take(pa.array(run)), zones, sample.schema, cache) if zones else None
        if cut is None:
            cost += float(weights[readers].sum()) * len(run)
            continue
        may = np.array([bool(queries[q][0].sides(cut).may_true) for q in readers])
        cost += float(weights[readers[may]].sum()) * len(run)
    return cost / (float(sample.num_rows) * float(weights.sum()))


def choose_in_block_order(layout: Any, sample: pa.Table, queries: Sequence[tuple[TableFilter, float]], b_sample: float,
                          max_candidates: int = 4) -> InBlockOrder:
    """The in-block order of ``layout`` for ``queries`` (module docstring), on ``sample``."""
    queries = [(f, float(w)) for f, w in queries if float(w) > 0]
    if not queries or sample.num_rows == 0:
        return InBlockOrder(None)
    names = {n.lower(): n for n in sample.schema.names}
    zones = zone_columns(queries, sample)
    candidates = [names[c] for c, _ in range_columns(queries)
                  if c in names and any(z == names[c] for z, _ in zones)][:max_candidates]
    costs = {"(none)": files_cost(layout, sample, queries, b_sample, None, zones=zones)}
    for c in candidates:
        costs[c] = files_cost(layout, sample, queries, b_sample, c, zones=zones)
    best = min(candidates, key=lambda c: costs[c], default=None)
    if best is None or costs[best] > (1.0 - MIN_GAIN) * costs["(none)"]:
        return InBlockOrder(None, costs)
    return InBlockOrder(best, costs)


@dataclass
class LayoutChoice:
    """Which of several learned layouts (by their number of trees) is kept, and the validation
    cost of each (``files_cost`` on the validation draws, as a fraction of the sample's rows)."""

    index: int
    costs: list[float]

    def to_json(self, ks: Sequence[int]) -> dict:
        return {"kept_k": int(ks[self.index]),
                "validation_rows_fraction": {str(k): round(c, 6) for k, c in zip(ks, self.costs)}}


def select_layout(layouts: Sequence[tuple[Any, str | None]], sample: pa.Table,
                  validation: Sequence[tuple[TableFilter, float]], b_sample: float) -> LayoutChoice:
    """Among ``(layout, in-block order)`` pairs in order of preference (fewer trees first), the
    one whose files the validation draws read least of (``files_cost``); a later one replaces
    the kept one only when it reads ``MIN_GAIN`` less (more trees cost planning time and sidecar
    bytes for nothing otherwise). Measured rather than trusted to the §5 cost model: blocks
    merged from many k-tuples (k > 1) have wide zone maps, and the model's cost is on the draws
    the layout was learned from (issue 15: taxi, k = 3 read 0.36 of the rows per held-out query
    against k = 1's 0.26 while the model preferred k = 3)."""
    if not layouts:
        raise ValueError("select_layout needs at least one layout")
    zones = zone_columns(validation, sample)
    costs = [files_cost(layout, sample, validation, b_sample, order, zones=zones) for layout, order in layouts]
    best = 0
    for i in range(1, len(costs)):
        if costs[i] < (1.0 - MIN_GAIN) * costs[best]:
            best = i
    return LayoutChoice(best, costs)
