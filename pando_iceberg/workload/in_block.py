"""Files of about b rows, cut along an in-block order (beyond the paper; issue 15 item 2).

The paper writes each block as one data file. A block keeps at least b rows (§6.2: the
bottom-up merges until it does), so blocks hold b..3b rows and a table gets fewer files than
the user's b implies. Here a block is written as ``files_per_block(rows, b)`` files of about b
rows: its rows are sorted by one column, the *in-block order*, and cut into consecutive runs
(inside a file the rows keep the table's own order, which compresses better: ``spark/blocks.py``).
Iceberg's own min/max pruning then skips files inside a block the trees chose. The trees' soundness is untouched: a block is still
read or skipped as a whole by the trees, and min/max pruning is sound on its own.

- Count: ``n = max(1, round(r / b), ceil(r / (1.3 b)))`` — files of about b rows, none above
  1.3 b (``MAX_FILE_FACTOR``).
- Order: among the columns the workload compares with literal ranges (``templates.range_columns``),
  the one minimizing the workload's cost (the optimizer's queries, synthetic draws included,
  weighted as in ``layout/cost.py``) when each scanned block's files are further pruned by
  their [min, max] on the column. Measured on the sample: each block's sample rows sorted by
  the column and cut into the same number of runs, each run's range turned into the cut
  ``col BETWEEN min AND max`` and asked with the filter's own ``sides`` (§5's reasoning, the
  one the planner's interval logic uses). No order when none lowers the cost by
  ``MIN_GAIN`` (0.5 %: the sort costs little at write time and helps Parquet statistics too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from pando_iceberg.expr import ExprCut, TableFilter
from pando_iceberg.expr.evaluate import arrow_kind
from pando_iceberg.expr.values import render
from pando_iceberg.workload.templates import range_columns, to_line, typed_value

__all__ = ["MAX_FILE_FACTOR", "MIN_GAIN", "BlockFiles", "InBlockOrder", "block_files", "files_per_block",
           "file_rows_per_block",
           "choose_in_block_order"]

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


def _range_cut(column: pa.ChunkedArray, name: str, kind: str, schema: pa.Schema, cache: dict) -> ExprCut | None:
    """``name BETWEEN min AND max`` (``OR name IS NULL`` when the run holds NULLs) of a run."""
    mm = pc.min_max(column).as_py()
    nulls = column.null_count > 0
    key = (mm["min"], mm["max"], nulls)
    if key in cache:
        return cache[key]
    col = exp.Column(this=exp.to_identifier(name))
    if mm["min"] is None:
        node: exp.Expression = exp.Is(this=col, expression=exp.Null())
    else:
        lo, hi = (render(typed_value(to_line(v, kind), kind)) for v in (mm["min"], mm["max"]))
        node = exp.Between(this=col, low=lo, high=hi)
        if nulls:
            node = exp.Or(this=node, expression=exp.Is(this=col.copy(), expression=exp.Null()))
    try:
        cut = ExprCut(node, schema)
    except Exception:  # a value the binder cannot type (e.g. NaN bounds): no pruning on this run
        cut = None
    cache[key] = cut
    return cut


def choose_in_block_order(layout: Any, sample: pa.Table, queries: Sequence[tuple[TableFilter, float]], b_sample: float,
                          max_candidates: int = 4) -> InBlockOrder:
    """The in-block order of ``layout`` for ``queries`` (module docstring), on ``sample``."""
    queries = [(f, float(w)) for f, w in queries if float(w) > 0]
    if not queries or sample.num_rows == 0:
        return InBlockOrder(None)
    names = {n.lower(): n for n in sample.schema.names}
    kinds = {c: arrow_kind(sample.schema.field(names[c]).type) for c in names}
    candidates = [c for c, _ in range_columns(queries)
                  if c in names and kinds[c] is not None and kinds[c][0] not in ("string", "bool")][:max_candidates]
    blocks = np.asarray(layout.route(sample), dtype=np.int64)
    nb = int(layout.num_blocks)
    rows = np.bincount(blocks, minlength=nb)
    counts = files_per_block(rows, b_sample)
    weights = np.array([w for _, w in queries])
    scanned = layout.scanned(queries)  # Q × B
    total = float(sample.num_rows) * float(weights.sum())
    costs = {"(none)": float(weights @ (scanned.astype(np.float64) @ rows)) / total}
    for c in candidates:
        column = sample.column(names[c])
        order = pc.array_sort_indices(column.combine_chunks(), null_placement="at_end").to_numpy()
        cache: dict = {}
        cost = 0.0
        for b, run in _runs(order, blocks, counts):
            readers = np.flatnonzero(scanned[:, b])
            if not len(readers):
                continue
            cut = _range_cut(column.take(pa.array(run)), c, kinds[c][0], sample.schema, cache)
            if cut is None:
                cost += float(weights[readers].sum()) * len(run)
                continue
            may = np.array([bool(queries[q][0].sides(cut).may_true) for q in readers])
            cost += float(weights[readers[may]].sum()) * len(run)
        costs[c] = cost / total
    best = min(candidates, key=lambda c: costs[c], default=None)
    if best is None or costs[best] > (1.0 - MIN_GAIN) * costs["(none)"]:
        return InBlockOrder(None, costs)
    return InBlockOrder(best, costs)
