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
files it opens; a candidate's rows read become bytes at the table's bytes per row. Each
candidate's own bytes per row is estimated too (``parquet_bytes_per_row``: the sample written
in its order, its blocks each in its in-block order or Iceberg's sort, with the writers'
codec and dictionaries, over the sample in the table's order and encodings) and applied only
when the sample holds every row: a sparse sample's runs and per-file distinct keys are not a
file's, and its figure stays near the table's where the files compress markedly better. A
rewrite's cost is predicted in
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
    bytes_ratio: float = 1.0  # its bytes per row over the table's, as the sample written in its order says
    bytes_applied: bool = False  # whether mb_per_query holds bytes_ratio (only on a sample of every row)

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


#: Rows of the sample written per row group when its bytes per row are measured: enough for the
#: codec's dictionaries and runs to form, few enough for files of the sample's size.
MIN_GROUP_ROWS = 256


@dataclass(frozen=True)
class WriteProperties:
    """How the table writes Parquet (its ``write.parquet.*`` properties, Iceberg's defaults)."""

    codec: str = "zstd"
    level: int | None = None

    @classmethod
    def of(cls, properties: dict[str, str]) -> WriteProperties:
        codec = str(properties.get("write.parquet.compression-codec", "zstd")).lower()
        codec = {"uncompressed": "none"}.get(codec, codec)
        level = properties.get("write.parquet.compression-level")
        try:
            return cls(codec, int(level) if level not in (None, "") else None)
        except ValueError:
            return cls(codec, None)


def dictionary_at_scale(rows: pa.Table, scale: float) -> list[str]:
    """The columns a writer dictionary-encodes in a file of which ``rows`` are a ``scale`` share
    (a file of the sample): parquet-mr's rule as Pando's writer applies it
    (``spark.blocks.dictionary_columns``: the dictionary plus its indices smaller than the plain
    values), on the file's distinct values estimated from the sample's (Haas and Stokes' first-order
    jackknife: d / (1 − (1 − scale) · f₁ / n), f₁ the values seen once: a key every sample row
    holds once is unique in the file, one seen many times has all its values seen). A sample's
    file sees a few hundred of a file's hundred thousand rows: on its own distinct count every
    key looks unique and would be written plain."""
    n_sample = rows.num_rows
    out: list[str] = []
    if n_sample == 0:
        return out
    scale = min(1.0, max(1e-9, float(scale)))
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        typ = column.type
        non_null = n_sample - column.null_count
        if pa.types.is_boolean(typ) or non_null == 0 or pa.types.is_nested(typ):
            out.append(name)
            continue
        counts = pc.value_counts(column.drop_null()).field("counts").to_numpy()
        once = int((counts == 1).sum())
        n = non_null / scale
        distinct = min(n, len(counts) / max(1e-9, 1.0 - (1.0 - scale) * once / non_null))
        if pa.types.is_binary(typ) or pa.types.is_string(typ) or pa.types.is_large_string(typ) \
                or pa.types.is_large_binary(typ):
            width = 4.0 + float(pc.sum(pc.binary_length(column)).as_py() or 0) / non_null
        elif pa.types.is_decimal(typ):
            width = 4.0 if typ.precision <= 9 else 8.0 if typ.precision <= 18 else 16.0
        else:
            width = max(1.0, typ.bit_width / 8.0) if hasattr(typ, "bit_width") else 8.0
        index_bytes = n * max(1, int(np.ceil(np.log2(max(distinct, 2))))) / 8.0
        if distinct * width + index_bytes < n * width:
            out.append(name)
    return out


def file_dictionary_columns(table: Any) -> list[str] | None:
    """The columns the pyiceberg ``table``'s largest data file dictionary-encodes (its Parquet
    footer's encodings): how the table as is was written (None: no file read)."""
    import pyarrow.parquet as pq

    files = table.inspect.files()
    data = files.filter(pc.equal(files.column("content"), 0))
    if len(data) == 0:
        return None
    sizes = data.column("file_size_in_bytes").to_numpy()
    path = data.column("file_path")[int(np.argmax(sizes))].as_py()
    try:
        with table.io.new_input(path).open() as f:
            meta = pq.ParquetFile(f).metadata
    except Exception:  # an unreadable footer: the writers' shared rule then (``dictionary_at_scale``)
        return None
    out = []
    for c in range(meta.num_columns):
        encodings = {e for g in range(meta.num_row_groups) for e in meta.row_group(g).column(c).encodings}
        if encodings & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}:
            out.append(meta.row_group(0).column(c).path_in_schema.split(".")[0])
    return out


def parquet_bytes_per_row(sample: pa.Table, order: np.ndarray | None, group_rows: float,
                          write: WriteProperties = WriteProperties(), scale: float = 1.0,
                          dictionary: Sequence[str] | None = None) -> float:
    """Bytes per row of ``sample`` written as Parquet in the row order ``order`` (indices; None:
    as it stands), row groups of ``group_rows`` rows (a file of the layout, on the sample's
    scale), with the table's codec (zstd at Pando's writer's level 3 unless set) and decimals
    as integers: the column chunks' compressed bytes over the rows (the footer, the same for
    every order, left out). ``dictionary``: the columns dictionary-encoded (None: those a file
    of the table would encode, ``dictionary_at_scale`` of the first row group at ``scale``, the
    sample's share of the table)."""
    import io

    import pyarrow.parquet as pq

    if sample.num_rows == 0:
        return 0.0
    table = sample if order is None else sample.take(pa.array(np.asarray(order, dtype=np.int64)))
    group = max(MIN_GROUP_ROWS, int(group_rows))
    if dictionary is None:
        dictionary = dictionary_at_scale(table.slice(0, group), scale)
    level = write.level if write.level is not None or write.codec != "zstd" else 3
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=write.codec, compression_level=level, row_group_size=group,
                   use_dictionary=list(dictionary), store_decimal_as_integer=True)
    meta = pq.ParquetFile(pa.BufferReader(buf.getvalue())).metadata
    size = sum(meta.row_group(g).column(c).total_compressed_size
               for g in range(meta.num_row_groups) for c in range(meta.num_columns))
    return size / table.num_rows


def block_order(blocks: np.ndarray, sample: pa.Table, column: str | None) -> np.ndarray:
    """The sample's rows as a Pando layout writes them: block by block, each block's rows in
    the order of its in-block ``column`` (None: as they stand)."""
    blocks = np.asarray(blocks, dtype=np.int64)
    if column is None:
        return np.argsort(blocks, kind="stable")
    rank = _positions(pc.array_sort_indices(sample.column(column).combine_chunks(),
                                            null_placement="at_end").to_numpy())
    return np.lexsort((rank, blocks))


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
              now_mb: float, seconds: float | None = None, why: str = "", bytes_ratio: float = 1.0,
              mb: float | None = None, apply_bytes: bool = True) -> Candidate:
    """A candidate with its bytes, its rewrite's predicted cost, and when it repays it.
    ``bytes_ratio``: its bytes per row over the table's as is (``parquet_bytes_per_row`` of the
    sample in its order over the sample in the table's), applied to its MB when ``apply_bytes``
    (else the table's bytes per row); ``mb``: its MB per query when measured as bytes (the table
    as is), else ``fraction`` of the rows."""
    ratio = bytes_ratio if apply_bytes else 1.0
    mb = fraction * table_mb * ratio if mb is None else mb
    if strategy in ("none", "as is"):
        return Candidate(name, strategy, spec, fraction, mb, 0.0, 0.0, None, why)
    kind = "zorder" if spec.startswith("zorder(") else "sort" if strategy == "sort" else "pando"
    rate = SECONDS_PER_MILLION_ROWS[kind]
    rewrite_seconds = (seconds or 0.0) + rate * table_rows / 1e6
    rewrite_mb = table_mb * (1 + ratio)  # read once, written once
    saved = now_mb - mb
    return Candidate(name, strategy, spec, fraction, mb, rewrite_seconds, rewrite_mb,
                     rewrite_mb / saved if saved > 1e-12 else None, why, bytes_ratio, apply_bytes)


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
    layouts: list[Any] = field(default_factory=list)  # each candidate's layout
    orders: list[str | None] = field(default_factory=list)  # each candidate's in-block order column
    evaluations: Any = None  # the sample's ``layout.Evaluations`` (cut masks shared by the layouts)
    b_sample: float = 1.0  # min-block-rows on the sample's scale
    table_order: np.ndarray | None = None  # the sample's rows in the order the table's files hold them

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
    where = ("_file", "_pos")  # where each sample row lies now: the table's own order, for its bytes per row
    df = jv.read_snapshot(spark, name, snapshot_id, metadata=where)
    wl, target, queries, schemas = table_workload(spark, name, sources)
    jtable = jv.load_table(spark, name)
    bound = template_bound(options, jtable)
    fraction = sample_fraction(cheap, table_rows)
    progress(f"advisor: sampling {name} ({fraction:.2%} of {table_rows:,} rows)")
    sample = seeded_sample(df, fraction, options.seed, skip=where)
    if sample.num_rows == 0:
        sample = collect_arrow(df.limit(options.min_sample_rows))
    table_order = np.lexsort((sample.column("_pos").to_numpy(zero_copy_only=False),
                              pc.rank(sample.column("_file"), sort_keys="ascending", tiebreaker="dense").to_numpy()))
    sample = sample.drop_columns(list(where))
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
                           list(layouts), columns, evaluations, b_sample, table_order)


def advise(spark: Any, table: Any, name: str, sources: Sequence[Any], options: Any,
           io_properties: dict[str, str] | None = None, progress: Any = lambda m: None,
           sort_orders: Sequence[str] = ()) -> tuple[Advice, PandoCandidates]:
    """Rank the candidates of the pyiceberg ``table`` (Spark name ``name``) for the workload
    ``sources`` under the rewrite ``options`` (``RewriteOptions``; Pando's candidates are 1..k
    trees, ``learn_candidates``), Iceberg's ``sort_orders`` (``order_positions_of``) among them.
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
    write = WriteProperties.of(dict(table.properties or {}))
    bytes_seconds = 0.0
    # bytes per row: the sample written in each candidate's order (files of b sample rows, the
    # dictionaries a file of b rows would have) against the sample in the table's own order and
    # encodings. Applied only when the sample holds every row: a sample of 1 % sees runs a
    # hundred times shorter and keys more distinct per file than the files hold (star: 1.02× as
    # the sample says, 0.74× as Pando's files measure), so the candidate keeps the table's.
    scale = sample.num_rows / max(1, rows)
    exact = scale >= 1.0
    started_bytes = time.time()
    base_bpr = parquet_bytes_per_row(sample, learned.table_order, sample.num_rows / max(1, len(data)), write, scale,
                                     file_dictionary_columns(table))
    bytes_seconds += time.time() - started_bytes

    def ratio(order: np.ndarray) -> float:
        nonlocal bytes_seconds
        t = time.time()
        out = parquet_bytes_per_row(sample, order, b_sample, write, scale) / base_bpr if base_bpr > 0 else 1.0
        bytes_seconds += time.time() - t
        return out

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
        r = ratio(np.argsort(positions, kind="stable"))
        others.append(candidate(label, "sort", spec, fraction, table_mb, rows, now_mb, bytes_ratio=r,
                                apply_bytes=exact,
                                why="Iceberg's rewrite_data_files with this sort order, files of min-block-rows rows, "
                                    f"estimated on the sample (written in its order: {r:.2f}× the table's bytes per "
                                    "row" + ("" if exact else ", not applied: a sample") + ")"
                                    + (" (asked for)" if spec not in orders else "")))
    kept = learned.labels[learned.kept]
    ev = learned.evaluations
    for i, k in enumerate(learned.labels):
        lay = learned.layouts[i]
        blocks = lay.route(sample, ev.mask_map(lay.cuts)) if ev is not None else lay.route(sample)
        r = ratio(block_order(blocks, sample, learned.orders[i]))
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
        why += (f"; the sample written block by block: {r:.2f}× the table's bytes per row"
                + ("" if exact else " (not applied: a sample)"))
        others.append(candidate(f"pando k={k}", "pando" if is_kept and not refused else "info", str(k),
                                float(fraction), table_mb, rows, now_mb, optimizer, why, bytes_ratio=r,
                                apply_bytes=exact))
    ranked = rank_candidates(now, others)
    advice = Advice(name, rows, table_mb, sample.num_rows, len(validation), tuple(ranked), time.time() - started,
                    float(sum(w for _, w in learned.queries)),
                    parts={**learned.seconds, "bytes per row": bytes_seconds},
                    learned_k=learned.labels[-1], sample_scale=learned.rewrite_sample_rows / max(1, sample.num_rows))
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
