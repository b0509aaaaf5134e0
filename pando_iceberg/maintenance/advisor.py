"""The layout advisor (the PTO seed): which layout to write, and when it pays.

For one table and its workload the advisor predicts, on one sample, the bytes each candidate
layout reads per held-out query (the workload templates' validation draws, never only the
literals the workload used) and what writing it costs, and ranks them:

- **as is**: the table's current files, planned exactly (``planner.scan.plan_scan``,
  ``reads_as_is``) two ways: through Pando's planner (Iceberg's min/max and partition pruning,
  join key sets on the files' bounds, a current Pando layout if any: the baseline savings are
  counted against) and by Iceberg alone (what a plain Spark read of the table opens; never
  advised);
- **Iceberg's sort** on each of the two columns the draws filter most, and **Iceberg's z-order**
  of the (at most three) most filtered columns its Spark z-order accepts: the sample's rows in that
  order (Iceberg's own z-value: ``zorder_words``), cut into files of b rows, each file's min/max
  statistics as Iceberg records them, each draw reading the files its filter cannot skip
  (``workload.in_block.files_read``, the estimate the per-template guard uses);
- **Pando with 1..k trees**: the layouts §6 learns on the same sample, measured the same way
  (the k-selection's validation, ``workload.in_block.select_layout``).

The prediction weighs the held-out draws so that each template's lie within the range of its
own training literals (``prediction_weights``: a tail threshold's draws stay in the tail); the
k-selection keeps its draws as a rewrite weighs them. The table as is reads the bytes of the
files it opens. Pando's rows read become bytes at the bytes per row of a few whole blocks of the
kept candidate written as a rewrite writes them (``written_blocks``: the blocks drawn by the rows
the draws read in them, routed from the whole table, through the rewrite's own writer to a
temporary directory): a layout clusters values, so its files compress otherwise than the
table's, and a sample written in its order cannot say by how much (its runs are a hundred times
shorter, its keys more distinct per file than a file's). Iceberg's sort and z-order keep the
table's bytes per row. A rewrite's cost is predicted in
seconds from per-row rates measured on this kind of machine (``SECONDS_PER_MILLION_ROWS``; Pando
adds the sampling and optimizer seconds the advice itself measured) and in bytes (the table read
once and written once); a candidate *repays* its rewrite after as many queries as its bytes
saved per query (against the table as is) take to reach the rewrite's bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import UsageError

#: Seconds per million rows of each rewrite on 2 cores (``local[2]``), from the bench's
#: TPC-H SF 1 lineitem rewrites (BENCHMARKS.md, "Rewrite cost"): Iceberg's sort and z-order
#: whole, and Pando's phase after the optimizer (read, route, shuffle, sort, write, commit).
SECONDS_PER_MILLION_ROWS = {"sort": 4.1, "zorder": 6.4, "pando": 5.3}

#: The advisor learns Pando on a smaller sample than a rewrite: about this many sample rows per
#: block of min-block-rows (the rewrite's ``sample-rows-per-block`` when smaller), at least
#: ``min-sample-rows``.
ADVICE_SAMPLE_ROWS_PER_BLOCK = 250

#: Whole blocks of Pando's kept candidate the advice writes to measure its files' bytes per row
#: (``written_blocks``; 0: none, the table's bytes per row).
WRITTEN_BLOCKS = 3

#: A layout is advised over the table as is only when it reads at least this share less.
MIN_SAVING = 0.05

ADVICE_COLUMNS = [("rank", "int"), ("candidate", "string"), ("rows_fraction_per_query", "double"),
                  ("mb_per_query", "double"), ("rewrite_seconds", "double"), ("rewrite_mb", "double"),
                  ("repays_after_queries", "double"), ("advised", "boolean"), ("why", "string")]

# Spark types Iceberg's z-order (``SparkZOrderUDF``) orders; dates and decimals it does not.
_ZORDER_KINDS = ("int", "float", "timestamp", "string")


class SortOrderError(UsageError, ValueError):
    """A sort order the advisor cannot model: the message names it and what is accepted."""


@dataclass(frozen=True)
class Candidate:
    """One candidate layout, predicted (module docstring)."""

    name: str  # 'as is', 'sort(c)', 'zorder(a, b)', 'pando k=2'
    # 'none' (as is, Pando's planner), 'as is' (Iceberg alone), 'sort' (Iceberg's), 'pando';
    # 'info': learned for comparison. 'as is' and 'info' are never advised.
    strategy: str
    spec: str  # Iceberg's sort_order for 'sort' ('c ASC NULLS LAST', 'zorder(a,b)'); k for 'pando'; '' for 'none'
    rows_fraction: float  # weighted mean share of the table's rows read per held-out draw
    mb_per_query: float
    rewrite_seconds: float
    rewrite_mb: float
    repays_after_queries: float | None  # None: it saves nothing against the table as is
    why: str = ""

    def row(self, rank: int, advised: bool) -> tuple:
        return (rank, self.name, round(self.rows_fraction, 6), round(self.mb_per_query, 3),
                round(self.rewrite_seconds, 1), round(self.rewrite_mb, 1),
                None if self.repays_after_queries is None else round(self.repays_after_queries, 1), advised, self.why)


def ordered_words(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column as the 8 bytes Iceberg's z-order takes of each value (``ZOrderByteUtils``),
    read as big-endian unsigned integers: integers and timestamps with the sign bit flipped,
    doubles with the sign bit flipped (all bits when negative), strings' first 8 UTF-8 bytes
    padded with zeros; NULL is all zeros."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = arr.type
    sign = np.uint64(1 << 63)
    if pa.types.is_timestamp(t):
        arr = pc.cast(arr, pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
        t = arr.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        v = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
        out = v ^ sign
    elif pa.types.is_floating(t):
        bits = pc.fill_null(arr.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        v = bits.view(np.uint64)
        out = np.where(v & sign, ~v, v ^ sign)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        raw = pa.concat_arrays([pc.fill_null(arr.cast(pa.large_string()), "")])  # offset 0, own buffers
        offsets = np.frombuffer(raw.buffers()[1], dtype=np.int64)[: len(raw) + 1]
        data = np.frombuffer(raw.buffers()[2], dtype=np.uint8) if raw.buffers()[2] is not None \
            else np.zeros(1, np.uint8)
        starts, lengths = offsets[:-1], np.diff(offsets)
        out = np.zeros(len(raw), dtype=np.uint64)
        for k in range(8):
            has = lengths > k
            byte = np.zeros(len(raw), dtype=np.uint64)
            byte[has] = data[starts[has] + k]
            out |= byte << np.uint64(8 * (7 - k))
    else:
        raise TypeError(f"Iceberg's z-order does not order type {t}")
    if arr.null_count and not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        out = np.where(arr.is_null().to_numpy(zero_copy_only=False), np.uint64(0), out)
    return out.astype(np.uint64)


def zorder_words(columns: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """Iceberg's z-value of each row (``ZOrderByteUtils.interleaveBits`` of the columns'
    ``ordered_words``: bit i of the result is bit ⌊i / m⌋ of column i mod m, most significant
    first), as m 64-bit words per row (rows × m), most significant word first."""
    words = [ordered_words(c) for c in columns]
    m = len(words)
    out = np.zeros((len(words[0]) if words else 0, m), dtype=np.uint64)
    one = np.uint64(1)
    for j in range(64 * m):
        bit = (words[j % m] >> np.uint64(63 - j // m)) & one
        out[:, j // 64] |= bit << np.uint64(63 - j % 64)
    return out


def zorder_positions(sample: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Each sample row's position when the table is written in Iceberg's z-order of ``columns``."""
    idx = np.lexsort(zorder_words([sample.column(c) for c in columns]).T[::-1])
    return _positions(idx)


def _positions(idx: np.ndarray) -> np.ndarray:
    pos = np.empty(len(idx), dtype=np.int64)
    pos[idx] = np.arange(len(idx))
    return pos


def order_positions_of(sample: pa.Table, spec: str) -> np.ndarray:
    """Each sample row's position when the table is written in an Iceberg ``sort_order``:
    ``zorder(a, b, ...)`` or one column with an optional direction and NULL placement (``c``,
    ``c DESC NULLS LAST``; Iceberg's defaults: NULLs first ascending, last descending)."""
    names = {n.lower(): n for n in sample.schema.names}

    def column(text: str) -> str:
        c = names.get(text.strip().strip("`").lower())
        if c is None:
            raise SortOrderError(f"sort order {spec!r} names {text.strip()!r}, which is not a column of the table; "
                             f"columns: {', '.join(sample.schema.names)}")
        return c

    text = spec.strip()
    if text.lower().startswith("zorder(") and text.endswith(")"):
        cols = [column(c) for c in text[len("zorder("):-1].split(",")]
        if len(cols) < 2:
            raise SortOrderError(f"sort order {spec!r}: a z-order needs two columns or more")
        return zorder_positions(sample, cols)
    words = text.split()
    tail = " ".join(w.upper() for w in words[1:])
    forms = {"": (False, True), "ASC": (False, True), "DESC": (True, False), "ASC NULLS FIRST": (False, True),
             "ASC NULLS LAST": (False, False), "DESC NULLS FIRST": (True, True), "DESC NULLS LAST": (True, False)}
    if not words or tail not in forms:
        raise SortOrderError(f"sort order {spec!r} is not one the advisor models; accepted: 'zorder(a, b, ...)' or "
                         "one column with ASC/DESC and NULLS FIRST/LAST")
    descending, nulls_first = forms[tail]
    values = sample.column(column(words[0])).combine_chunks()
    idx = pc.array_sort_indices(values, order="descending" if descending else "ascending",
                                null_placement="at_start" if nulls_first else "at_end").to_numpy()
    return _positions(idx)


def sort_spec(column: str) -> str:
    """Iceberg's sort order of the sort candidate on ``column``."""
    return f"{column} ASC NULLS LAST"


def most_filtered_columns(validation: Sequence[tuple[Any, float]], sample: pa.Table, kinds: Sequence[str] | None = None,
                          top: int = 3) -> list[str]:
    """The ``top`` sample columns the draws' own predicates name most (by weight; join filters
    not counted), of ``kinds`` (``expr.evaluate.arrow_kind``) when given."""
    from sqlglot import exp

    from ..expr.evaluate import arrow_kind

    names = {n.lower(): n for n in sample.schema.names}
    weight: dict[str, float] = {}
    for f, w in validation:
        if f.is_true_expr():
            continue
        for c in {c.name.lower() for c in f.expr.find_all(exp.Column)} & set(names):
            weight[c] = weight.get(c, 0.0) + float(w)
    out = []
    for c, _ in sorted(weight.items(), key=lambda cw: (-cw[1], cw[0])):
        kind = arrow_kind(sample.schema.field(names[c]).type)
        if kind is not None and (kinds is None or kind[0] in kinds):
            out.append(names[c])
    return out[:top]


def ordered_reads(sample: pa.Table, validation: Sequence[tuple[Any, float]], b_sample: float,
                  positions: np.ndarray) -> np.ndarray:
    """Per draw, the share of the sample's rows in the files it opens when the table is written in
    the order ``positions`` in files of ``b_sample`` sample rows (``workload.in_block.files_read``
    of one block written along that order)."""
    from ..layout import build_layout
    from ..workload.in_block import files_read, zone_columns

    single = build_layout(sample, [], validation, 1, max(1.0, float(sample.num_rows)))  # one block, no cut
    ordered = sample.append_column("__pando_order", pa.array(positions, pa.int64()))
    return files_read(single, ordered, validation, b_sample, "__pando_order", zones=zone_columns(validation, sample))


def numeric_literals(f: Any) -> list[float]:
    """The filter's numeric literals (its own predicates' and its join filters'), in the order
    the expression holds them: one per parameter site, aligned across a template's draws."""
    from sqlglot import exp

    out = []
    nodes = [f.expr] + [getattr(j, "dim_filter", None) for j in getattr(f, "joins", None) or ()]
    for node in nodes:
        node = getattr(node, "expr", node)
        if not isinstance(node, exp.Expression):
            continue
        for lit in node.find_all(exp.Literal):
            if lit.is_number:
                v = float(lit.this)
                out.append(-v if isinstance(lit.parent, exp.Neg) else v)
    return out


def prediction_weights(validation: Sequence[tuple[Any, float]], queries: Sequence[tuple[Any, float]],
                       sample: pa.Table, margin: float = 2.0) -> np.ndarray:
    """The weights the prediction gives the held-out draws: per template, its training draws
    and the synthetic draws within the range its training literals span, evenly. Numeric
    parameters whose training values repeat (a few thresholds the workload picks from, e.g.
    ``tip >= 10 | 20``): each literal between the training's least and greatest (a tail
    threshold's draws stay in the tail: an anchor drawn at a sample row's value can fall in the
    column's body, ``workload/templates.py``); numeric parameters with one training value: the
    draws whose share of the sample's rows (the filter's own predicates) lies within ``margin``
    times the shares its training draws select, either way. Templates whose every training draw
    has its own values (literals spread like the data: the generator's draws as they are) and
    templates without numeric parameters keep their draws.
    A template none of whose synthetic draws lies in range keeps the nearest one, so a
    prediction is never on the workload's own literals only."""
    from ..workload.templates import template_key

    weights = np.array([float(w) for _, w in validation], dtype=np.float64)
    if not len(validation) or sample.num_rows == 0:
        return weights
    floor = 0.5 / sample.num_rows
    own: dict[str, float] = {}  # the training queries by SQL, their weights (a workload merges equal ones)
    for f, w in queries:
        own[f.to_sql()] = own.get(f.to_sql(), 0.0) + float(w)

    def share(f: Any) -> float:
        try:
            return max(floor, float(np.count_nonzero(f.evaluate(sample))) / sample.num_rows)
        except Exception:  # a predicate the sample cannot answer: kept (not modelled, not dropped)
            return float("nan")

    by_template: dict[str, list[int]] = {}
    for i, (f, _) in enumerate(validation):
        by_template.setdefault(template_key(f), []).append(i)
    out = weights.copy()
    for ix in by_template.values():
        trained = [i for i in ix if validation[i][0].to_sql() in own]
        drawn = [i for i in ix if i not in trained]
        if not trained or not drawn:
            continue
        literals = {i: numeric_literals(validation[i][0]) for i in ix}
        width = len(literals[trained[0]])
        if width == 0 or any(len(v) != width for v in literals.values()):
            continue
        values = np.array([literals[i] for i in trained])
        varied = [j for j in range(width) if len(set(values[:, j])) > 1]
        times = sum(max(1.0, round(own[validation[i][0].to_sql()])) for i in trained)
        if varied and len({tuple(v) for v in values[:, varied]}) == times:
            continue  # every training query its own value: literals spread like the data, drawn as it lies
        if varied:
            lo, hi = values[:, varied].min(axis=0), values[:, varied].max(axis=0)
            span = np.maximum(hi - lo, 1e-12)
            at = np.array([literals[i] for i in drawn])[:, varied]
            far = np.max(np.maximum(0.0, np.maximum(lo - at, at - hi)) / span, axis=1)
        else:
            shares = np.array([share(validation[i][0]) for i in ix])
            known = np.log(shares[[ix.index(i) for i in trained]])
            if not np.all(np.isfinite(shares)):
                continue
            x = np.log(shares[[ix.index(i) for i in drawn]])
            far = np.maximum(0.0, np.maximum(known.min() - np.log(margin) - x, x - known.max() - np.log(margin)))
        dist = {i: float(d) for i, d in zip(drawn, far, strict=True)}
        kept = [i for i in drawn if dist[i] == 0.0] or [min(drawn, key=lambda i: (dist[i], i))]
        total = float(weights[ix].sum())
        out[ix] = 0.0
        out[trained + kept] = total / (len(trained) + len(kept))
    return out


def weighted_by(values: np.ndarray, weights: np.ndarray) -> float:
    return float(np.asarray(values) @ weights / weights.sum()) if len(weights) and weights.sum() > 0 else 0.0


def rank_candidates(now: Candidate, others: Sequence[Candidate]) -> list[tuple[Candidate, bool]]:
    """The candidates by bytes per query (then rewrite seconds), the advised one marked: the
    first that reads at least ``MIN_SAVING`` less than the table as is, else the table as is."""
    ranked = sorted([now, *others], key=lambda c: (round(c.mb_per_query, 6), c.rewrite_seconds))
    best = next((c for c in ranked if c is not now and c.strategy not in ("info", "as is")
                 and c.mb_per_query <= (1 - MIN_SAVING) * now.mb_per_query), now)
    return [(c, c is best) for c in ranked]


def candidate(name: str, strategy: str, spec: str, fraction: float, table_mb: float, table_rows: int,
              now_mb: float, seconds: float | None = None, why: str = "", mb: float | None = None) -> Candidate:
    """A candidate with its bytes, its rewrite's predicted cost, and when it repays it. ``mb``:
    its MB per query when measured as bytes (the table as is), else ``fraction`` of the table's."""
    mb = fraction * table_mb if mb is None else mb
    if strategy in ("none", "as is"):
        return Candidate(name, strategy, spec, fraction, mb, 0.0, 0.0, None, why)
    kind = "zorder" if spec.startswith("zorder(") else "sort" if strategy == "sort" else "pando"
    rate = SECONDS_PER_MILLION_ROWS[kind]
    rewrite_seconds = (seconds or 0.0) + rate * table_rows / 1e6
    rewrite_mb = 2 * table_mb  # read once, written once
    saved = now_mb - mb
    return Candidate(name, strategy, spec, fraction, mb, rewrite_seconds, rewrite_mb,
                     rewrite_mb / saved if saved > 1e-12 else None, why)


@dataclass(frozen=True)
class Advice:
    """The advisor's ranking of one table's candidates (``advise``)."""

    table: str
    table_rows: int
    table_mb: float
    sample_rows: int
    validation_draws: int
    ranked: tuple[tuple[Candidate, bool], ...]  # (candidate, advised), best first
    seconds: float  # the advice's own wall time
    workload_queries: float = 0.0  # the workload's queries on the table, by weight (a query log: its runs)
    applied: str | None = None  # what ``apply`` ran (None: nothing)
    not_applied: str | None = None  # why ``apply`` wrote nothing
    parts: dict[str, float] = field(default_factory=dict)  # seconds of Pando's learning (``PandoCandidates.seconds``)
    learned_k: int = 0  # the trees Pando's learning learned at most
    sample_scale: float = 1.0  # a rewrite's sample rows over the advisor's
    written: WrittenBlocks | None = None  # the blocks of Pando's kept candidate written (``written_blocks``)

    def pando_rewrite_seconds(self, k: int, validate: bool) -> float:
        """Predicted seconds of a Pando rewrite learning ``k`` trees (1..k under 'validate'): its
        optimizer (``optimizer_seconds``) and the rest at ``SECONDS_PER_MILLION_ROWS['pando']``."""
        return (optimizer_seconds(self.parts, self.learned_k, self.sample_scale, k, validate)
                + SECONDS_PER_MILLION_ROWS["pando"] * self.table_rows / 1e6)

    @property
    def advised(self) -> Candidate:
        return next(c for c, a in self.ranked if a)

    def rows(self) -> list[tuple]:
        return [c.row(i + 1, a) for i, (c, a) in enumerate(self.ranked)]


@dataclass(frozen=True)
class PandoCandidates:
    """Pando's candidates as the advisor learns them (``learn_candidates``): one tree and k trees
    learned on a small sample, the layouts of the k trees' first 2..k-1 merged bottom-up (§6.2),
    each measured on held-out draws of the workload's templates (``select_layout``)."""

    sample: pa.Table
    validation: list[tuple[Any, float]]  # the held-out draws (TableFilter, weight)
    queries: list[tuple[Any, float]]  # the workload's own filters on the table
    table_rows: int
    labels: list[int]  # trees of each candidate: 1..k
    fractions: list[float]  # each candidate's weighted share of the sample's rows read per draw
    kept: int  # the index the k-selection keeps (under the guard, among those that hold it)
    holds: list[bool] | None  # the guard per candidate (None: guard off)
    now: np.ndarray  # per draw, the share of the table's rows in the current files it opens
    seconds: dict[str, float]  # 'sampling', 'draws+cuts', 'trees' (the k trees), 'derived' (1, 2..k-1), 'k-selection'
    rewrite_sample_rows: float  # the rows a rewrite's sample would hold (its sample-rows-per-block)
    as_is: AsIsReads | None = None  # per draw, the table as is through Pando's planner and Iceberg alone
    reads: list[np.ndarray] = field(default_factory=list)  # per candidate, per draw, share of the sample read
    layouts: list[Any] = field(default_factory=list)  # per candidate, its layout (``layout.Layout``)
    order_columns: list[str | None] = field(default_factory=list)  # per candidate, its in-block order column

    def rewrite_optimizer_seconds(self, k: int, validate: bool) -> float:
        """The optimizer seconds a rewrite learning ``k`` trees would take (``optimizer_seconds``)."""
        return optimizer_seconds(self.seconds, self.labels[-1], self.rewrite_sample_rows / max(1, self.sample.num_rows),
                                 k, validate)


@dataclass(frozen=True)
class AsIsReads:
    """Per draw, the shares of the table's rows and bytes in the data files it opens today:
    through Pando's planner (``planner.scan.plan_scan``: Iceberg's partition and min/max pruning,
    the join pruning of key sets on the files' bounds, the table's current Pando layout) and by
    Iceberg alone (its partition and min/max pruning of the filter's own predicates: what a
    plain Spark read of the table opens)."""

    rows: np.ndarray
    bytes: np.ndarray
    iceberg_rows: np.ndarray
    iceberg_bytes: np.ndarray


def reads_as_is(static: Any, snapshot_id: int | None, queries: Sequence[tuple[Any, float]]) -> AsIsReads:
    """``AsIsReads`` of ``queries`` on ``snapshot_id`` of ``static`` (``static_table``), one plan each."""
    from ..planner.scan import plan_scan

    out = np.ones((4, len(queries)))
    for i, (f, _) in enumerate(queries):
        ex = plan_scan(static, f, snapshot_id=snapshot_id).explain
        if ex.total_rows:
            out[0, i], out[2, i] = ex.pando_rows / ex.total_rows, ex.iceberg_rows / ex.total_rows
        if ex.total_bytes:
            out[1, i], out[3, i] = ex.pando_bytes / ex.total_bytes, ex.iceberg_bytes / ex.total_bytes
    return AsIsReads(out[0], out[1], out[2], out[3])


def optimizer_seconds(parts: dict[str, float], learned_k: int, scale: float, k: int, validate: bool) -> float:
    """The optimizer seconds of a rewrite learning ``k`` trees (1..k under 'validate'), from the
    advice's learning ``parts`` (``PandoCandidates.seconds``, ``learned_k`` trees): its sampling and
    draws+cuts as they are, its trees scaled by ``scale`` (the rewrite's sample rows over the
    advisor's) and by the trees learned (learning j trees costs about j/k of learning k: the
    splits are per tree)."""
    per_tree = parts.get("trees", 0.0) / max(1, learned_k) * scale
    trees = per_tree * (k * (k + 1) / 2 if validate else k)
    return parts.get("sampling", 0.0) + parts.get("draws+cuts", 0.0) + trees


def table_row_count(spark: Any, table: Any, name: str, snapshot: Any) -> int:
    """Live rows of the pyiceberg ``table`` at ``snapshot``: its summary's records when it has no
    delete files (Iceberg keeps them exact), else counted by Spark."""
    from ..spark.rewrite_common import row_count

    summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    deletes = int(summary.get("total-delete-files", "0") or 0)
    if deletes == 0 and summary.get("total-records") is not None:
        return int(summary["total-records"])
    return row_count(spark, name, snapshot.snapshot_id)


def learn_candidates(spark: Any, name: str, sources: Sequence[Any], options: Any, snapshot_id: int, table_rows: int,
                     io_properties: dict[str, str] | None = None,
                     progress: Any = lambda m: None) -> PandoCandidates:
    """Pando's candidates with 1..k trees, cheaply: the sample holds ``ADVICE_SAMPLE_ROWS_PER_BLOCK``
    rows per block (a rewrite's ``sample-rows-per-block`` when smaller); the k trees are learned
    once (§6.1, then §6.2's blocks) and one tree on its own; the layouts of 2..k-1 trees are the k
    trees' first j with §6.2's bottom-up merge again (nothing learned again; a rewrite learns each
    j anew). Each has its in-block order; all are measured on the same held-out draws, the table
    as it is too."""
    import copy
    import dataclasses
    import time

    from ..layout import Evaluations, build_layout
    from ..spark import iceberg_jvm as jv
    from ..spark.rewrite import in_block_order
    from ..spark.rewrite_common import (
        collect_arrow,
        learning_workload,
        sample_fraction,
        sample_rate,
        seeded_sample,
        static_table,
        table_workload,
        template_bound,
    )
    from ..workload.in_block import merged_layout, select_layout

    t0 = time.time()
    seconds: dict[str, float] = {}
    per_block = min(options.sample_rows_per_block or ADVICE_SAMPLE_ROWS_PER_BLOCK, ADVICE_SAMPLE_ROWS_PER_BLOCK)
    cheap = dataclasses.replace(options, sample_rows_per_block=per_block)
    df = jv.read_snapshot(spark, name, snapshot_id)
    wl, target, queries, schemas = table_workload(spark, name, sources)
    jtable = jv.load_table(spark, name)
    bound = template_bound(options, jtable)
    fraction = sample_fraction(cheap, table_rows)
    progress(f"advisor: sampling {name} ({fraction:.2%} of {table_rows:,} rows)")
    sample = seeded_sample(df, fraction, options.seed)
    if sample.num_rows == 0:
        sample = collect_arrow(df.limit(options.min_sample_rows))
    t1 = time.time()
    seconds["sampling"] = t1 - t0
    expected, cuts = learning_workload(spark, wl, target, schemas, queries, sample, cheap,
                                       sample_rate(cheap, table_rows), validate=True)
    t2 = time.time()
    seconds["draws+cuts"] = t2 - t1
    b_sample = max(1.0, options.min_block_rows * sample.num_rows / max(1, table_rows))
    evaluations = Evaluations(sample)
    k = options.k
    progress(f"advisor: learning k={k} trees on {sample.num_rows:,} sample rows, {len(cuts)} candidate cuts")
    full = build_layout(sample, cuts, expected.queries, k, b_sample, max_ktuples=options.max_ktuples,
                        progress=progress, evaluations=evaluations)
    t3 = time.time()
    seconds["trees"] = t3 - t2
    # One tree of k learned together has leaves as coarse as k trees need: k = 1 is learned on its
    # own (a third of k = 3's splits); 2..k-1 are the first trees of the k, blocks merged again.
    one = [build_layout(sample, cuts, expected.queries, 1, b_sample, max_ktuples=options.max_ktuples,
                        evaluations=evaluations)] if k > 1 else []
    layouts = one + [merged_layout(copy.deepcopy(list(full.trees[:j])), sample, expected.queries, b_sample,
                                   evaluations=evaluations) for j in range(2, k)] + [full]
    orders = [in_block_order(lay, sample, expected.queries, b_sample, options, evaluations) for lay in layouts]
    t4 = time.time()
    seconds["derived"] = t4 - t3
    validation = [(f, float(w)) for f, w in expected.validation]
    progress(f"advisor: planning {len(validation)} held-out draws on the table as it is and on {k} layouts")
    as_is = reads_as_is(static_table(jtable, io_properties), snapshot_id, validation)
    guard: dict[str, Any] = {}
    if bound is not None:
        guard = {"now": as_is.rows, "now_bytes": as_is.bytes, "bound": bound,
                 "file_fraction": min(1.0, options.min_block_rows / max(1, table_rows))}
    columns = [getattr(o, "column", None) for o in orders]
    reads: list[np.ndarray] = []  # filled by the k-selection: each layout's reads per draw
    choice = select_layout(list(zip(layouts, columns, strict=True)), sample, validation, b_sample,
                           evaluations=evaluations, measured=reads, **guard)
    seconds["k-selection"] = time.time() - t4
    return PandoCandidates(sample, validation, [(f, float(w)) for f, w in queries], table_rows,
                           list(range(1, k + 1)), [float(c) for c in choice.costs], choice.index,
                           list(choice.holds) if bound is not None else None, np.asarray(as_is.rows, dtype=float),
                           seconds, float(sample_fraction(options, table_rows) * table_rows), as_is, list(reads),
                           list(layouts), list(columns))


def blocks_to_write(layout: Any, validation: Sequence[tuple[Any, float]], weights: np.ndarray, count: int) -> list[int]:
    """``count`` blocks of ``layout`` drawn with probability proportional to the rows the weighted
    draws read in them (the blocks each draw scans, ``Layout.scanned``, × the block's sample
    rows), systematically (the blocks at the midpoints of ``count`` equal steps of the cumulative
    share): a block read twice as much is drawn twice as often, so the plain mean of the drawn
    blocks' bytes per row estimates the bytes per row of what the queries read. A block may
    repeat."""
    rows = np.asarray(layout.block_rows, dtype=np.float64)
    if count <= 0 or not len(rows):
        return []
    read = rows.copy()
    if len(validation) and float(np.sum(weights)) > 0:
        scanned = np.asarray(layout.scanned(list(validation)), dtype=np.float64)
        read = (np.asarray(weights, dtype=np.float64) @ scanned) * rows
        if not read.sum() > 0:
            read = rows.copy()
    cumulative = np.cumsum(read) / read.sum()
    at = (np.arange(count) + 0.5) / count
    return [int(b) for b in np.minimum(np.searchsorted(cumulative, at, side="left"), len(rows) - 1)]


@dataclass(frozen=True)
class WrittenBlocks:
    """Whole blocks of a Pando candidate written as a rewrite writes them (``written_blocks``):
    their files' bytes per row against the table's as it is."""

    blocks: tuple[int, ...]  # the blocks drawn (``blocks_to_write``; a block may repeat)
    rows: tuple[int, ...]  # per block drawn, the table's rows routed to it
    bytes: tuple[int, ...]  # per block drawn, the bytes of its files
    table_bytes_per_row: float  # the table's data files as they are
    seconds: float  # routing the table and writing the blocks

    @property
    def bytes_per_row(self) -> float:
        """The mean of the drawn blocks' bytes per row (the draw weighs them already)."""
        per = [b / r for b, r in zip(self.bytes, self.rows, strict=True) if r > 0]
        return float(np.mean(per)) if per else self.table_bytes_per_row

    @property
    def ratio(self) -> float:
        """The candidate's bytes per row over the table's."""
        return self.bytes_per_row / self.table_bytes_per_row if self.table_bytes_per_row > 0 else 1.0


def block_rows_of(table: Any, snapshot_id: int, layout: Any, blocks: Sequence[int]) -> pa.Table:
    """The rows of the pyiceberg ``table`` at ``snapshot_id`` that ``layout`` routes to ``blocks``
    (``Layout.route``, batch by batch as pyiceberg reads the data files, deletes applied), with
    the routing columns a rewrite's writer takes (``blocks.BLOCK_COL``, ``KTUPLE_COL``: zeros, no
    sidecar is written) and ``ROW_COL``, the row's position in the table as read."""
    from ..spark.blocks import BLOCK_COL, KTUPLE_COL, ROW_COL

    wanted = np.asarray(sorted({int(b) for b in blocks}), dtype=np.int32)
    parts = []
    offset = 0
    for batch in table.scan(snapshot_id=snapshot_id).to_arrow_batch_reader():
        data = pa.Table.from_batches([batch])
        if data.num_rows == 0:
            continue
        routed = layout.route(data)
        idx = np.flatnonzero(np.isin(routed, wanted))
        if len(idx):
            part = data.take(pa.array(idx))
            parts.append(part.append_column(BLOCK_COL, pa.array(routed[idx], pa.int32()))
                         .append_column(KTUPLE_COL, pa.array(np.zeros(len(idx), np.int64)))
                         .append_column(ROW_COL, pa.array(offset + idx, pa.int64())))
        offset += data.num_rows
    if not parts:
        raise ValueError("no row of the table routes to the blocks to write: nothing to measure")
    return pa.concat_tables(parts, promote_options="permissive")


def written_blocks(spark: Any, table: Any, name: str, snapshot_id: int, layout: Any, order_column: str | None,
                   blocks: Sequence[int], table_rows: int, table_bytes: float, options: Any) -> WrittenBlocks:
    """The ``blocks`` of ``layout`` written as a rewrite writes them, to a temporary directory
    deleted after: the pyiceberg ``table`` at ``snapshot_id`` read once and routed
    (``block_rows_of``), and each block written by the rewrite's own writer
    (``blocks.write_blocks`` under the table's ``write_spec``: its codec and level, files of about
    min-block-rows rows cut along ``order_column``, the table's row order inside a file). A
    layout clusters values, so its files compress otherwise than the table's: this measures by
    how much, on whole blocks (a sample written in the candidate's order cannot: its runs are a
    hundred times shorter)."""
    import tempfile
    import time

    from ..spark import iceberg_jvm as jv
    from ..spark.blocks import BLOCK_COL, ROW_COL, write_blocks
    from ..spark.rewrite import plan_block_files
    from ..spark.rewrite_common import write_spec

    started = time.time()
    rows = block_rows_of(table, snapshot_id, layout, blocks)
    keys = [(BLOCK_COL, "ascending")] + ([(order_column, "ascending")] if order_column else []) \
        + [(ROW_COL, "ascending")]
    rows = rows.sort_by(keys)
    per_block: dict[int, list[int]] = {int(b): [0, 0] for b in blocks}
    with tempfile.TemporaryDirectory(prefix="pando-advice-") as tmp:
        spec = write_spec(spark, jv.load_table(spark, name), f"file://{tmp}", {}, options.target_file_size_bytes,
                          order_column=order_column,
                          files=plan_block_files(layout, table_rows, options.min_block_rows))
        for out in write_blocks(spec)(iter(rows.to_batches())):
            for b, n, size in zip(out.column(0).to_pylist(), out.column(2).to_pylist(), out.column(3).to_pylist(),
                                  strict=True):
                per_block[int(b)][0] += int(n)
                per_block[int(b)][1] += int(size)
    return WrittenBlocks(tuple(int(b) for b in blocks), tuple(per_block[int(b)][0] for b in blocks),
                         tuple(per_block[int(b)][1] for b in blocks), table_bytes / max(1, table_rows),
                         time.time() - started)


def advise(spark: Any, table: Any, name: str, sources: Sequence[Any], options: Any,
           io_properties: dict[str, str] | None = None, progress: Any = lambda m: None,
           sort_orders: Sequence[str] = (), written_count: int = WRITTEN_BLOCKS) -> tuple[Advice, PandoCandidates]:
    """Rank the candidates of the pyiceberg ``table`` (Spark name ``name``) for the workload
    ``sources`` under the rewrite ``options`` (``RewriteOptions``; Pando's candidates are 1..k
    trees, ``learn_candidates``), Iceberg's ``sort_orders`` (``order_positions_of``) among them.
    Pando's bytes per row are measured on ``written_count`` whole blocks of its kept candidate
    (``blocks_to_write``, ``written_blocks``; 0, or a table pyiceberg cannot read: the table's).
    Returns the advice and Pando's candidates as learned."""
    import time

    started = time.time()
    snapshot = table.current_snapshot()
    if snapshot is None:
        raise ValueError(f"table {name} has no snapshot (no data): nothing to advise on")
    probe = table.schema().as_arrow().empty_table()
    for spec in sort_orders:  # a sort order the advisor cannot model is said before anything is learned
        order_positions_of(probe, spec)
    rows = table_row_count(spark, table, name, snapshot)
    if rows == 0:
        raise ValueError(f"table {name} is empty: nothing to advise on")
    learned = learn_candidates(spark, name, sources, options, snapshot.snapshot_id, rows, io_properties, progress)
    sample, validation = learned.sample, learned.validation
    files = table.inspect.files()
    data = files.filter(pc.equal(files.column("content"), 0))
    table_mb = float(pc.sum(data.column("file_size_in_bytes")).as_py() or 0) / 1e6
    b_sample = max(1.0, options.min_block_rows * sample.num_rows / max(1, rows))
    weights = prediction_weights(validation, learned.queries, sample)
    as_is = learned.as_is
    if as_is is None:
        raise ValueError(f"table {name}: the advice planned no query on the table as is")
    now = candidate("as is", "none", "", weighted_by(as_is.rows, weights), table_mb, rows, 0.0,
                    mb=weighted_by(as_is.bytes, weights) * table_mb,
                    why=f"its {len(data)} files planned exactly through Pando's planner (min/max, partitions, "
                        "join key sets on the files' bounds, its current layout)")
    now_mb = now.mb_per_query
    alone = candidate("as is (Iceberg alone)", "as is", "", weighted_by(as_is.iceberg_rows, weights), table_mb, rows,
                      now_mb, mb=weighted_by(as_is.iceberg_bytes, weights) * table_mb,
                      why=f"its {len(data)} files as a plain Spark read opens them (Iceberg's partition and min/max "
                          "pruning of the filter's own predicates); never advised: Pando's planner reads the first")
    others = [alone]
    orders = [sort_spec(c) for c in most_filtered_columns(validation, sample, top=2)]
    zcols = most_filtered_columns(validation, sample, kinds=_ZORDER_KINDS, top=3)
    if len(zcols) >= 2:
        orders.append(f"zorder({', '.join(zcols)})")
    for spec in dict.fromkeys([*orders, *(sort_orders or ())]):
        progress(f"advisor: Iceberg's sort order {spec}")
        positions = order_positions_of(sample, spec)
        fraction = weighted_by(ordered_reads(sample, validation, b_sample, positions), weights)
        label = spec if spec.startswith("zorder(") else f"sort({spec})"
        others.append(candidate(label, "sort", spec, fraction, table_mb, rows, now_mb,
                                why="Iceberg's rewrite_data_files with this sort order, files of min-block-rows rows, "
                                    "estimated on the sample" + (" (asked for)" if spec not in orders else "")))
    kept = learned.labels[learned.kept]
    written = None
    unwritten = ""
    if written_count > 0 and learned.layouts:
        chosen = blocks_to_write(learned.layouts[learned.kept], validation, weights, written_count)
        progress(f"advisor: writing blocks {sorted(set(chosen))} of pando k={kept} to measure its bytes per row")
        try:
            written = written_blocks(spark, table, name, snapshot.snapshot_id, learned.layouts[learned.kept],
                                     learned.order_columns[learned.kept], chosen, rows, table_mb * 1e6, options)
            learned.seconds["written blocks"] = written.seconds
        except (NotImplementedError, ValueError) as e:  # e.g. equality deletes, which pyiceberg cannot read
            unwritten = f" (no block written: {e})"
            progress(f"advisor: Pando's bytes per row taken as the table's{unwritten}")
    ratio = written.ratio if written is not None else 1.0
    per_row = (f"; bytes at {written.bytes_per_row:.1f} B/row ({ratio:.2f}× the table's), measured on "
               f"{len(set(written.blocks))} whole blocks of k={kept} written as a rewrite writes them"
               if written is not None else f"; bytes at the table's bytes per row{unwritten}")
    for i, k in enumerate(learned.labels):
        fraction = weighted_by(learned.reads[i], weights)
        is_kept = i == learned.kept
        optimizer = learned.rewrite_optimizer_seconds(k, validate=False)
        how = "learned on the advisor's sample" if k in (1, learned.labels[-1]) else \
            f"the first {k} of the k={learned.labels[-1]} trees, blocks merged again"
        why = (f"the §6 layout the k-selection keeps ({how}); a rewrite learns it again, predicted "
               f"{optimizer:.1f}s of optimizer" if is_kept else
               f"{how}; the k-selection keeps k={kept} (more trees must read markedly less)")
        refused = learned.holds is not None and not learned.holds[i]
        if refused:  # never advised: the rewrite refuses it
            why += "; not advised: a template would read more than max-template-regression × what it reads now"
        others.append(candidate(f"pando k={k}", "pando" if is_kept and not refused else "info", str(k),
                                float(fraction), table_mb, rows, now_mb, optimizer, why + per_row,
                                mb=float(fraction) * table_mb * ratio))
    ranked = rank_candidates(now, others)
    advice = Advice(name, rows, table_mb, sample.num_rows, len(validation), tuple(ranked), time.time() - started,
                    float(sum(w for _, w in learned.queries)),
                    parts=dict(learned.seconds),
                    learned_k=learned.labels[-1], sample_scale=learned.rewrite_sample_rows / max(1, sample.num_rows),
                    written=written)
    return advice, learned


def repay_days(candidate: Candidate, queries_per_day: float) -> float | None:
    """Days of a workload of ``queries_per_day`` after which ``candidate`` repays its rewrite
    (None: it never does)."""
    if candidate.repays_after_queries is None or queries_per_day <= 0:
        return None
    return candidate.repays_after_queries / queries_per_day


def apply_advice(spark: Any, name: str, advice: Advice, learned: PandoCandidates | None, sources: Sequence[Any],
                 options: Any, io_properties: dict[str, str] | None = None,
                 progress: Any = lambda m: None) -> str | None:
    """Write the advised candidate of ``advice`` (from ``advise``): Pando with the advised number
    of trees, learned again on the rewrite's own sample (``k-selection`` fixed at that k), or
    Iceberg's sort / z-order (``rewrite_data_files``, files of about min-block-rows rows); nothing
    for the table as is. Says what it ran."""
    import dataclasses

    from ..spark.rewrite import rewrite_table
    from ..spark.session import refresh_table

    best = advice.advised
    if best.strategy == "none":
        return None
    if best.strategy == "pando":
        opts = dataclasses.replace(options, k=int(best.spec), k_selection="fixed")
        r = rewrite_table(spark, name, list(sources), opts, io_properties=io_properties, progress=progress)
        return f"{best.name}: layout {r.layout_id}, snapshot {r.snapshot_id}"
    files = max(1, -(-advice.table_rows // max(1, options.min_block_rows)))
    target = max(1024, int(advice.table_mb * 1e6 / files))
    catalog = spark.catalog.currentCatalog()
    statement = (f"CALL {catalog}.system.rewrite_data_files(table => '{name}', strategy => 'sort', "
                 f"sort_order => '{best.spec}', options => map('rewrite-all', 'true', "
                 f"'target-file-size-bytes', '{target}'))")
    progress(f"advisor: {statement}")
    spark.sql(statement).collect()
    refresh_table(spark, name)
    return f"{best.name}: {statement}"


TABLE_RANK_COLUMNS = [("rank", "int"), ("table", "string"), ("advised", "string"), ("queries", "double"),
                      ("mb_per_query_now", "double"), ("mb_per_query_advised", "double"), ("mb_saved", "double"),
                      ("rewrite_seconds", "double"), ("mb_saved_per_rewrite_second", "double"),
                      ("repays_after_queries", "double"), ("why", "string")]


def saved_mb(advice: Advice) -> float:
    """The MB the workload's queries on the table would read less with the advised layout than
    with the table as is (its queries by weight × the MB saved per query; 0 when as is is advised)."""
    best = advice.advised
    if best.strategy == "none":
        return 0.0
    now = next(c for c, _ in advice.ranked if c.strategy == "none")
    return max(0.0, now.mb_per_query - best.mb_per_query) * advice.workload_queries


def saved_per_rewrite_second(advice: Advice) -> float:
    """``saved_mb`` over the advised rewrite's predicted seconds: which table repays a rewrite most."""
    seconds = advice.advised.rewrite_seconds
    return saved_mb(advice) / seconds if seconds > 0 else 0.0


def rank_tables(advices: Sequence[Advice]) -> list[Advice]:
    """Which table first: the tables' advice by MB the workload saves per second of the advised
    rewrite (``saved_per_rewrite_second``), most first; tables best left as they are last."""
    return sorted(advices, key=lambda a: (-saved_per_rewrite_second(a), a.table))


def table_rank_rows(advices: Sequence[Advice]) -> list[tuple]:
    """The rows of ``TABLE_RANK_COLUMNS``, one per table, in ``rank_tables`` order."""
    out = []
    for i, a in enumerate(rank_tables(advices)):
        best = a.advised
        now = next(c for c, _ in a.ranked if c.strategy == "none")
        saved = saved_mb(a)
        if best.strategy == "none":
            why = "no candidate reads at least 5 % less than the table as is: leave it"
        else:
            why = (f"{best.name} saves {now.mb_per_query - best.mb_per_query:.2f} MB per query × "
                   f"{a.workload_queries:g} queries of the workload on the table; " + best.why)
        out.append((i + 1, a.table, best.name, round(a.workload_queries, 3), round(now.mb_per_query, 3),
                    round(best.mb_per_query, 3), round(saved, 3), round(best.rewrite_seconds, 1),
                    round(saved_per_rewrite_second(a), 3),
                    None if best.repays_after_queries is None else round(best.repays_after_queries, 1), why))
    return out
