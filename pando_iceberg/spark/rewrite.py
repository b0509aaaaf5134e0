"""``rewrite_data_files`` with strategy ``pando`` on Spark (paper §6, applied to Iceberg).

    base snapshot ─Spark read (Iceberg, deletes applied)─▶ sample (seeded) ─▶ learn layout
                  (workload → cuts, join-induced literal cuts from Spark; §6.1 + §6.2)
    base snapshot ─Spark read─▶ mapInArrow(route) ─▶ shuffle by block, sort by the in-block
                  order ─▶ mapInArrow(write): each block as files of about b rows
                  (workload/in_block.py; split also above the target size)
    driver: finalize the layout from the (block, k-tuple) pairs actually written (§7),
            write the Puffin sidecar, ONE Iceberg commit: `replace` snapshot + pointers.

Table data never goes through the driver: the driver sees the sample, the literal cuts' key
sets and one small row per written file. A failure before the commit deletes what was written
and leaves the table exactly as it was.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot

from ..expr import keys as keyset
from ..progress import progress_step, spark_job_progress
from ..workload.in_block import BlockFiles, InBlockOrder, block_files, choose_in_block_order, select_layout
from . import iceberg_jvm as jv
from .session import quote_name, refresh_table
from .blocks import (BLOCK_COL, KTUPLE_COL, ROW_COL, WRITTEN_FILE_DDL, LayoutPayload, WriteSpec, ktuple_radices,
                     route_batches, unpack_ktuples, write_blocks)

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
P_IN_BLOCK = "pando.in-block-order"  # sidecar property: JSON of workload.in_block.InBlockOrder
P_K_SELECTION = "pando.k-selection"  # sidecar property: JSON of workload.in_block.LayoutChoice
K_SELECTIONS = ("validate", "fixed")


class PandoRewriteError(ValueError):
    """The rewrite cannot run with these inputs; the message says what to change."""


@dataclass
class RewriteOptions:
    """Options of ``rewrite_data_files(strategy => 'pando', options => map(...))``."""

    k: int = 3
    sample_rate: float = 0.01
    seed: int = 42
    min_block_rows: int = 100_000
    min_sample_rows: int = 10_000
    target_file_size_bytes: int | None = None
    max_ktuples: int = 10_000
    # Beyond the paper (workload/templates.py, workload/in_block.py): synthetic draws per template
    # (0 = the training literals only) and the in-block order ('auto', 'none' or a column).
    template_draws: int = 16
    in_block_order: str = "auto"
    # 'validate': learn 1..k trees and keep the layout whose files independent validation
    # draws read least (workload/in_block.select_layout); 'fixed': exactly k trees (the paper).
    k_selection: str = "validate"

    OPTION_NAMES = {"k": "k", "sample-rate": "sample_rate", "seed": "seed", "min-block-rows": "min_block_rows",
                    "min-sample-rows": "min_sample_rows", "target-file-size-bytes": "target_file_size_bytes",
                    "max-ktuples": "max_ktuples", "template-draws": "template_draws",
                    "in-block-order": "in_block_order", "k-selection": "k_selection"}

    @classmethod
    def from_map(cls, options: dict[str, Any] | None) -> "RewriteOptions":
        """Parse Iceberg-style string options, naming any unknown or malformed one."""
        out = cls()
        for key, raw in (options or {}).items():
            attr = cls.OPTION_NAMES.get(key)
            if attr is None:
                raise PandoRewriteError(f"unknown option {key!r}; accepted: {', '.join(sorted(cls.OPTION_NAMES))}")
            if attr in ("in_block_order", "k_selection"):
                setattr(out, attr, str(raw).strip().lower())
                continue
            try:
                value = float(raw) if attr == "sample_rate" else int(str(raw))
            except ValueError:
                kind = "a number" if attr == "sample_rate" else "an integer"
                raise PandoRewriteError(f"option {key!r} must be {kind}, got {raw!r}") from None
            setattr(out, attr, value)
        out.validate()
        return out

    def validate(self) -> None:
        if not 1 <= self.k <= 8:
            raise PandoRewriteError(f"option 'k' must be between 1 and 8, got {self.k}")
        if not 0 < self.sample_rate <= 1:
            raise PandoRewriteError(f"option 'sample-rate' must be in (0, 1], got {self.sample_rate}")
        if self.min_block_rows < 1:
            raise PandoRewriteError(f"option 'min-block-rows' must be >= 1, got {self.min_block_rows}")
        if self.target_file_size_bytes is not None and self.target_file_size_bytes < 1024:
            raise PandoRewriteError(f"option 'target-file-size-bytes' must be >= 1024, got {self.target_file_size_bytes}")
        if not 0 <= self.template_draws <= 1000:
            raise PandoRewriteError(f"option 'template-draws' must be between 0 and 1000, got {self.template_draws}")
        if not self.in_block_order:
            raise PandoRewriteError("option 'in-block-order' must be 'auto', 'none' or a column name, got ''")
        if self.k_selection not in K_SELECTIONS:
            raise PandoRewriteError(f"option 'k-selection' must be one of {', '.join(K_SELECTIONS)}, "
                                    f"got {self.k_selection!r}")


@dataclass
class LearnedLayout:
    layout: Any  # pando_iceberg.layout.Layout
    literal_keys: dict[str, bytes]
    table_rows: int
    sample_rows: int
    queries_used: int
    cuts: int
    unsupported: list[Any] = field(default_factory=list)
    seconds_sampling: float = 0.0
    seconds_optimizing: float = 0.0
    queries: list[Any] = field(default_factory=list)  # (TableFilter, weight) for this table
    workload_sql: list[tuple[str, float]] = field(default_factory=list)  # (statement, weight)
    templates: list[dict] = field(default_factory=list)  # templates.Template.to_json() of each template
    in_block: Any = None  # workload.in_block.InBlockOrder (None: files in routing order)
    k_selection: dict | None = None  # workload.in_block.LayoutChoice.to_json (None: k fixed)

    @property
    def in_block_column(self) -> str | None:
        return getattr(self.in_block, "column", None)

    def properties(self) -> dict[str, str]:
        """What the sidecar records about how the layout was learned (describe_layout shows it)."""
        props = {"pando.k": str(self.layout.k), "pando.workload-queries": str(self.queries_used),
                 "pando.workload": json.dumps(list(self.workload_sql)),
                 "pando.expected-rows-fraction": f"{self.expected_fraction():.6f}",
                 "pando.templates": json.dumps(self.templates)}
        if self.in_block is not None:
            props[P_IN_BLOCK] = json.dumps(self.in_block.to_json())
        if self.k_selection is not None:
            props[P_K_SELECTION] = json.dumps(self.k_selection)
        return props

    def expected_fraction(self, layout=None) -> float:
        """Weighted share of the table's rows the workload reads with this layout (§5, the one
        cost model), as the layout itself predicts it."""
        layout = layout or self.layout
        total = float(layout.block_rows.sum()) or 1.0
        weights = sum(w for _, w in self.queries) or 1.0
        return float(layout.cost(self.queries)) / (total * weights)


@dataclass
class RewriteResult:
    rewritten_data_files_count: int
    added_data_files_count: int
    rewritten_bytes_count: int
    failed_data_files_count: int
    layout_id: str
    block_count: int
    snapshot_id: int | None
    base_snapshot_id: int | None
    seconds: dict[str, float] = field(default_factory=dict)

    COLUMNS = ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
               "failed_data_files_count", "layout_id", "block_count", "snapshot_id")

    def row(self) -> tuple:
        return tuple(getattr(self, c) for c in self.COLUMNS)


# ---- learning -------------------------------------------------------------------------------

def arrow_schema_of(df) -> pa.Schema:
    """The Arrow schema of the batches Spark hands to mapInArrow for this DataFrame."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema)


def collect_arrow(df) -> pa.Table:
    """A small DataFrame (a sample, a key set) collected to the driver as Arrow."""
    batches = df._collect_as_arrow()
    schema = arrow_schema_of(df)
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def namespace_schemas(spark, table_name: str) -> dict[str, pa.Schema]:
    """Arrow schemas of every table in the target table's namespace (the workload may join them)."""
    parts = table_name.split(".")
    ns = ".".join(parts[:-1]) if len(parts) > 1 else None
    names = [r.tableName for r in spark.sql(f"SHOW TABLES IN {quote_name(ns)}" if ns else "SHOW TABLES").collect()
             if not getattr(r, "isTemporary", False)]
    schemas = {}
    for n in names:
        fq = f"{ns}.{n}" if ns else n
        schemas[fq] = arrow_schema_of(spark.table(fq))
    return schemas


def identifier_fields(spark, table_name: str) -> list[str]:
    table = jv.load_table(spark, table_name)
    schema = table.schema()
    return [str(schema.findColumnName(i)) for i in schema.identifierFieldIds()]


class SparkKeyProvider:
    """Key sets of join-induced cuts computed by Spark: ``SELECT DISTINCT pk FROM dim WHERE p``
    with the dimension's own join filters applied as semi-joins (multi-hop chains, §7)."""

    def __init__(self, spark, schemas: dict[str, pa.Schema]):
        self.spark = spark
        self.schemas = schemas
        self._unique: dict[tuple[str, str], bool] = {}
        self._cache: dict[tuple[str, str, str], np.ndarray] = {}

    def _frame(self, dim_table: str, dim_filter):
        df = self.spark.table(dim_table)
        if dim_filter is not None and not dim_filter.is_true_expr():
            df = df.where(dim_filter.expr.sql(dialect="spark"))
        for j in getattr(dim_filter, "joins", []) or []:
            inner = self._frame(j.dim_table, j.dim_filter).select(j.dim_pk).distinct()
            df = df.join(inner, df[j.column] == inner[j.dim_pk], "left_semi")
        return df

    def is_unique(self, table: str, column: str) -> bool:
        key = (table, column)
        if key not in self._unique:
            col = sqlglot.exp.column(column, quoted=True).sql(dialect="spark")  # quoted by sqlglot, never pasted
            row = self.spark.table(table).selectExpr(f"count({col}) AS n", f"count(DISTINCT {col}) AS d").collect()[0]
            self._unique[key] = row.n == row.d
        return self._unique[key]

    def __call__(self, dim_table: str, pk_column: str, dim_filter) -> np.ndarray:
        hit = self._cache.get((dim_table, pk_column, dim_filter.to_sql()))
        if hit is not None:
            return hit
        keys = collect_arrow(self._frame(dim_table, dim_filter).select(pk_column).distinct())
        col = keys.column(0).drop_null()
        return np.sort(col.to_numpy(zero_copy_only=False))

    def prefetch(self, requests: Sequence[tuple[str, str, Any]]) -> None:
        """Key sets of many dimension predicates with ONE Spark job per dimension table, chains
        included (§7, lineitem → orders → customer → nation): each table is read once as
        ``SELECT <pk and join columns>, (p1) AS _p0, (p2) AS _p1, ... FROM dim``; then, on those
        columns, a predicate's key set is its rows' pks where its own mask holds (NULL → not in
        the set, as in WHERE) and every join column is in the inner filter's key set."""
        columns: dict[str, dict[str, None]] = {}  # dim → columns to read (ordered, unique)
        predicates: dict[str, dict[str, Any]] = {}  # dim → {predicate SQL: filter}

        def visit(dim: str, pk: str, flt) -> None:
            columns.setdefault(dim, {})[pk] = None
            if flt is None:
                return
            if not flt.is_true_expr():
                predicates.setdefault(dim, {})[flt.expr.sql(dialect="spark")] = flt
            for j in flt.joins:
                columns[dim][j.column] = None
                visit(j.dim_table, j.dim_pk, j.dim_filter)

        for dim, pk, flt in requests:
            visit(dim, pk, flt)
        frames: dict[str, tuple[pa.Table, dict[str, int]]] = {}
        for dim, cols in columns.items():
            preds = list(predicates.get(dim, {}))
            select = [sqlglot.exp.column(c, quoted=True).sql(dialect="spark") for c in cols]
            select += [f"({p}) AS `_p{i}`" for i, p in enumerate(preds)]
            frames[dim] = (collect_arrow(self.spark.table(dim).selectExpr(*select)),
                           {p: len(cols) + i for i, p in enumerate(preds)})

        def keys(dim: str, pk: str, flt) -> np.ndarray:
            memo = (dim, pk, flt.to_sql() if flt is not None else "TRUE")
            if memo not in self._cache:
                table, pred_col = frames[dim]
                mask = np.ones(table.num_rows, dtype=bool)
                if flt is not None and not flt.is_true_expr():
                    own = table.column(pred_col[flt.expr.sql(dialect="spark")])
                    mask &= pc.fill_null(own, False).to_numpy(zero_copy_only=False)
                for j in flt.joins if flt is not None else ():
                    inner = keyset.normalize_keys(keys(j.dim_table, j.dim_pk, j.dim_filter))
                    mask &= keyset.member_mask(table.column(j.column), inner)
                pks = table.column(pk).filter(pa.array(mask)).drop_null()
                self._cache[memo] = _sorted_unique(pks.to_numpy(zero_copy_only=False))
            return self._cache[memo]

        for dim, pk, flt in requests:
            keys(dim, pk, flt)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting: numpy 2's hash-based unique took 0.16 s per key set of
    TPC-H SF 1's orders (15 of the 20 s the dimension key sets took)."""
    values = np.sort(values)
    return values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values


class _RecordingKeyProvider:
    """Records which key sets ``join_induced_cuts`` asks for (answering with none), so they can
    be computed in a few batched Spark jobs before the real pass."""

    def __init__(self, inner: SparkKeyProvider):
        self.inner = inner
        self.requests: list[tuple[str, str, Any]] = []

    def __call__(self, dim_table: str, pk_column: str, dim_filter) -> np.ndarray:
        self.requests.append((dim_table, pk_column, dim_filter))
        return np.zeros(0, dtype=np.int64)

    def is_unique(self, table: str, column: str) -> bool:
        return self.inner.is_unique(table, column)



def learn_layout(spark, table_name: str, workload: Sequence[str] | str, options: RewriteOptions,
                 snapshot_id: int | None = None, progress: Callable[[str], None] = lambda m: None) -> LearnedLayout:
    """Sample the table, learn k trees and the block assignment from the workload (§6), and the
    in-block order of its files (``workload/in_block.py``)."""
    from ..layout import build_layout

    t0 = time.time()
    df = jv.read_snapshot(spark, table_name, snapshot_id)
    wl, target, queries, schemas = table_workload(spark, table_name, workload)

    total_rows = _row_count(spark, table_name, snapshot_id)
    if total_rows == 0:
        raise PandoRewriteError(f"table {table_name} is empty: nothing to lay out")
    fraction = min(1.0, max(options.sample_rate, options.min_sample_rows / total_rows))
    with spark_job_progress(spark, progress, f"sampling {table_name} ({fraction:.2%} of {total_rows:,} rows)"):
        test_pause("SAMPLING")
        sample = collect_arrow(df.sample(withReplacement=False, fraction=fraction, seed=options.seed))
    t1 = time.time()
    if sample.num_rows == 0:
        sample = collect_arrow(df.limit(options.min_sample_rows))
    ks = candidate_ks(options)
    expected, cuts = learning_workload(spark, wl, target, schemas, queries, sample, options, validate=len(ks) > 1)
    scale = sample.num_rows / total_rows
    b_sample = max(1.0, options.min_block_rows * scale)
    learned = []
    test_pause("OPTIMIZING")
    for k in ks:
        progress(f"optimizing k={k} trees on {sample.num_rows:,} sample rows, {len(cuts)} candidate cuts, "
                 f"{len(queries)} queries + {len(expected.queries) - len(queries)} synthetic draws of their templates")
        layout = build_layout(sample, cuts, expected.queries, k, b_sample, max_ktuples=options.max_ktuples,
                              progress=progress)
        learned.append((layout, in_block_order(layout, sample, expected.queries, b_sample, options)))
    k_selection = None
    if len(learned) > 1:
        choice = select_layout([(lay, getattr(o, "column", None)) for lay, o in learned], sample,
                               expected.validation, b_sample)
        k_selection = choice.to_json(ks)
        progress(f"kept k={ks[choice.index]} trees: validation draws read "
                 + ", ".join(f"{c:.3f} (k={k})" for k, c in zip(ks, choice.costs)) + " of the sample's rows")
        layout, in_block = learned[choice.index]
    else:
        layout, in_block = learned[0]
    literal_keys = {c.key: c.keys_to_bytes() for c in layout.cuts if hasattr(c, "keys_to_bytes")}
    return LearnedLayout(layout, literal_keys, total_rows, sample.num_rows, len(queries), len(cuts),
                         list(wl.unsupported), t1 - t0, time.time() - t1, queries,
                         [(q.sql, q.weight) for q in wl.queries if target in q.filters],
                         expected.describe(), in_block, k_selection)


def candidate_ks(options: RewriteOptions) -> list[int]:
    """The numbers of trees learned: 1..k under 'validate' (one kept, ``select_layout``), else k."""
    return list(range(1, options.k + 1)) if options.k_selection == "validate" else [options.k]


def table_workload(spark, table_name: str, workload: Sequence[str] | str) -> tuple[Any, str, list, dict]:
    """The workload parsed against the table's namespace: (workload, the table's key in it,
    [(filter on the table, weight)], the namespace's schemas)."""
    from ..workload import parse_workload

    schemas = namespace_schemas(spark, table_name)
    target = _schema_key(table_name, schemas)
    pks = {name: identifier_fields(spark, name) for name in schemas}
    wl = parse_workload(workload, schemas, primary_keys={k: v for k, v in pks.items() if v})
    queries = [(q.filters[target], q.weight) for q in wl.queries if target in q.filters]
    if not queries:
        raise PandoRewriteError(f"the workload has no query that reads {table_name}; a layout needs queries on the table "
                                f"(tables the workload reads: {', '.join(wl.tables()) or 'none'})")
    return wl, target, queries, schemas


def table_cuts(spark, wl, target: str, schemas: dict[str, pa.Schema], filters: Sequence[Any]) -> list:
    """Candidate cuts of ``filters`` (§6.1: their simple predicates) and their join-induced
    literal cuts, with key sets from Spark and their dimension's snapshot (§7)."""
    cuts: dict[str, Any] = {}
    for f in filters:
        for cut in f.candidate_cuts():
            cuts.setdefault(cut.key, cut)
    cuts_list = list(cuts.values())
    provider = SparkKeyProvider(spark, schemas)
    recorder = _RecordingKeyProvider(provider)
    wl.join_induced_cuts(target, recorder, filters=filters)  # which key sets are needed ...
    # Each dimension's snapshot BEFORE its keys are read: refresh_literal_cuts reads only the rows
    # changed since (rows appended in between are re-read, which is harmless). The keys are exact
    # at those snapshots when no table of the chain moved while they were read (CutOrigin.exact_at).
    chain = sorted({t for r in recorder.requests for t in _chain_tables(r[0], r[2])})
    dim_snapshots = {dim: dimension_snapshot(spark, dim) for dim in chain}
    provider.prefetch(recorder.requests)  # ... computed with one Spark job per dimension
    still = {dim: dimension_snapshot(spark, dim) for dim in chain} == dim_snapshots
    cuts_list += [with_origin_snapshot(c, dim_snapshots.get(c.origin.dim_table), dim_snapshots if still else None)
                  for c in wl.join_induced_cuts(target, provider, filters=filters)]
    if not cuts_list:
        raise PandoRewriteError(f"the workload's queries on {target} have no predicate usable as a cut "
                                f"({len(wl.unsupported)} predicate(s) were not modelable)")
    return cuts_list


def learning_workload(spark, wl, target: str, schemas: dict[str, pa.Schema], queries: list, sample: pa.Table,
                      options: RewriteOptions, validate: bool = False) -> tuple[Any, list]:
    """What the optimizer learns from (``workload/templates.py``): the training queries plus
    ``template-draws`` synthetic draws per template, drawn along the sample's values (and
    along samples of the dimension tables the joins filter), and their candidate cuts;
    ``validate``: as many independent draws again, kept apart (``expected.validation``)."""
    from ..workload.templates import expected_workload

    dims = dimension_samples(spark, [f for f, _ in queries], options) if options.template_draws else {}
    expected = expected_workload(queries, sample, options.template_draws, options.seed, dimensions=dims,
                                 validation_draws=options.template_draws if validate else 0)
    expected = keyed_draws(spark, wl, expected, schemas)
    return expected, table_cuts(spark, wl, target, schemas, [f for f, _ in expected.queries])


def keyed_draws(spark, wl, expected, schemas: dict[str, pa.Schema], row_limit: int | None = None):
    """``expected`` with the key set of every join whose chain the planner reads keys of at
    query time too: every join of the chain FK→PK (``wl.key_basis``: the query-time parse
    attaches no other join) and every table of at most ``row_limit`` rows (default
    ``planner.joins.JOIN_PRUNING_MAX_ROWS``; ``chain_within``), read with one Spark job per
    dimension (``SparkKeyProvider.prefetch``). The cost model then decides range cuts on the
    foreign keys for each draw as the planner will for a query (``TableFilter._join_extra``),
    and the draws propose the ranges their key sets imply as cuts (``key_range_cuts``)."""
    import dataclasses

    from ..planner.joins import JOIN_PRUNING_MAX_ROWS
    from ..planner.scan import with_dim_keys

    limit = JOIN_PRUNING_MAX_ROWS if row_limit is None else row_limit
    rows: dict[str, int] = {}
    provider = SparkKeyProvider(spark, schemas)

    def within(j) -> bool:
        if wl.key_basis(j.dim_table, j.dim_pk, provider) is None:
            return False
        if j.dim_table not in rows:
            rows[j.dim_table] = _row_count(spark, j.dim_table, None)
        return rows[j.dim_table] <= limit and all(within(sub) for sub in getattr(j.dim_filter, "joins", None) or ())

    draws = list(expected.queries) + list(expected.validation)
    wanted = {id(j): j for f, _ in draws for j in f.joins if j.dim_keys is None and within(j)}
    if not wanted:
        return expected
    provider.prefetch([(j.dim_table, j.dim_pk, j.dim_filter) for j in wanted.values()])

    def keyed(items):
        return [(with_dim_keys(f, lambda j: provider(j.dim_table, j.dim_pk, j.dim_filter), list(wanted.values()))
                 if any(id(j) in wanted for j in f.joins) else f, w) for f, w in items]

    return dataclasses.replace(expected, queries=keyed(expected.queries), validation=keyed(expected.validation))


DIMENSION_SAMPLE_ROWS = 100_000


def dimension_samples(spark, filters: Sequence[Any], options: RewriteOptions) -> dict[str, pa.Table]:
    """A sample (at most ``DIMENSION_SAMPLE_ROWS`` rows, seeded) of every dimension table the
    filters' joins name (multi-hop), with the columns their dimension filters use."""
    wanted: dict[str, set[str]] = {}

    def visit(flt) -> None:
        for j in flt.joins:
            cols = wanted.setdefault(j.dim_table, set())
            if not j.dim_filter.is_true_expr():
                cols |= {c.name.lower() for c in j.dim_filter.expr.find_all(sqlglot.exp.Column)}
            visit(j.dim_filter)

    for f in filters:
        visit(f)
    out = {}
    for dim, cols in wanted.items():
        if not cols:
            continue
        df = spark.table(dim).select(*[sqlglot.exp.column(c, quoted=True).sql(dialect="spark") for c in sorted(cols)])
        rows = int(df.count())
        if rows > DIMENSION_SAMPLE_ROWS:
            df = df.sample(withReplacement=False, fraction=DIMENSION_SAMPLE_ROWS / rows, seed=options.seed)
        out[dim] = collect_arrow(df)
    return out


def in_block_order(layout, sample: pa.Table, queries: list, b_sample: float, options: RewriteOptions):
    """The in-block order option resolved: 'auto' → measured (``workload/in_block.py``),
    'none' → None, else the named column (checked against the table)."""
    choice = options.in_block_order
    if choice == "none":
        return None
    if choice == "auto":
        order = choose_in_block_order(layout, sample, queries, b_sample)
        return order if order.column is not None else None
    names = {n.lower() for n in sample.schema.names}
    if choice not in names:
        raise PandoRewriteError(f"option 'in-block-order' names column {choice!r}, which the table does not have; "
                                f"accepted: 'auto', 'none' or one of {', '.join(sample.schema.names)}")
    return InBlockOrder(choice)


def dimension_snapshot(spark, dim_table: str) -> int | None:
    """The dimension table's current snapshot id (None when it has none)."""
    snap = jv.load_table(spark, dim_table).currentSnapshot()
    return int(snap.snapshotId()) if snap is not None else None


def _chain_tables(dim_table: str, dim_filter) -> list[str]:
    """The dimension and the sub-dimensions its filter's nested join filters read (§7 chains)."""
    out = [dim_table]
    for j in getattr(dim_filter, "joins", None) or ():
        out += _chain_tables(j.dim_table, j.dim_filter)
    return out


def with_origin_snapshot(cut, snapshot_id: int | None, exact_at: dict[str, int | None] | None = None):
    """The literal cut with its origin's dimension snapshot recorded (the parser leaves it None),
    and, when ``exact_at`` (table → snapshot its keys were read at) covers the origin's whole
    chain, ``CutOrigin.exact_at``."""
    import dataclasses

    from ..expr import LiteralCut

    o = cut.origin
    if snapshot_id is None or o.snapshot_id is not None:
        return cut
    tables = o.tables()
    exact = None
    if exact_at is not None and all(exact_at.get(t) is not None for t in tables):
        exact = tuple((t, int(exact_at[t])) for t in tables)  # type: ignore[arg-type]
    return LiteralCut(cut.column, cut.keys, dataclasses.replace(o, snapshot_id=snapshot_id, exact_at=exact))


def _schema_key(table_name: str, schemas: dict[str, pa.Schema]) -> str:
    if table_name in schemas:
        return table_name
    tail = table_name.split(".")[-1]
    hits = [k for k in schemas if k.split(".")[-1] == tail]
    if len(hits) != 1:
        raise PandoRewriteError(f"table {table_name!r} not found among {sorted(schemas)}")
    return hits[0]


def _row_count(spark, table_name: str, snapshot_id: int | None) -> int:
    return int(jv.read_snapshot(spark, table_name, snapshot_id).count())


# ---- applying -------------------------------------------------------------------------------

def rewrite_table(spark, table_name: str, workload: Sequence[str] | str, options: RewriteOptions | None = None,
                  io_properties: dict[str, str] | None = None,
                  progress: Callable[[str], None] = lambda m: None,
                  learned: LearnedLayout | None = None, where: str | None = None) -> RewriteResult:
    """Learn a layout for the table's current snapshot (or use ``learned``) and apply it in one
    ``replace`` commit. A partitioned table gets one layout per partition (``partitioned.py``;
    ``where`` selects the partitions)."""
    from ..storage.pointer import P_SNAPSHOT, LayoutPointer
    from ..storage.sidecar import new_layout_id
    from ..storage.sidecar import DataFileRef, LayoutSidecar

    options = options or RewriteOptions()
    options.validate()
    seconds: dict[str, float] = {}
    table = jv.load_table(spark, table_name)
    if table.spec().isPartitioned() or where is not None:
        from .partitioned import rewrite_partitions

        if learned is not None:
            raise PandoRewriteError(f"table {table_name} is partitioned: its layouts are learned per partition, a "
                                    "pending whole-table layout cannot be applied (pass relearn => true)")
        return rewrite_partitions(spark, table_name, workload, options, where, io_properties, progress)
    current = table.currentSnapshot()
    if current is None:
        raise PandoRewriteError(f"table {table_name} has no snapshot (no data): nothing to lay out")
    base_id = int(current.snapshotId())

    base_rows = None
    if learned is None:
        learned = learn_layout(spark, table_name, workload, options, base_id, progress)
        base_rows = learned.table_rows  # counted on base_id while learning: no second count
    seconds["sampling"] = learned.seconds_sampling
    seconds["optimizing"] = learned.seconds_optimizing
    layout = learned.layout
    layout_id = new_layout_id()

    location = str(table.location()).rstrip("/")
    data_dir = f"{location}/data/pando-{layout_id}"
    if base_rows is None:
        base_rows = _row_count(spark, table_name, base_id)
    spec = write_spec(spark, table, data_dir, io_properties, options.target_file_size_bytes,
                      order_column=learned.in_block_column,
                      files=plan_block_files(layout, base_rows, options.min_block_rows))
    payload = LayoutPayload(layout.to_bytes(), learned.literal_keys)
    written: list[Any] = []
    sidecar_path = None
    committing = False
    try:
        t0 = time.time()
        with spark_job_progress(spark, progress, f"routing + writing {layout.num_blocks} blocks (Spark tasks)"):
            written = _route_and_write(spark, table_name, base_id, layout, payload, spec)
        seconds["writing"] = time.time() - t0

        t0 = time.time()
        # §7: the leaf → block maps come from the (block, k-tuple) pairs actually written.
        radices = ktuple_radices(layout)
        pairs = []
        for w in written:
            codes = np.array([int(c) for c in w.ktuples.split(",") if c], dtype=np.int64)
            pairs += [(int(w.block), tuple(kt)) for kt in unpack_ktuples(codes, radices).tolist()]
        layout.finalize(pairs)
        block_rows = np.zeros(layout.num_blocks, dtype=np.int64)
        for w in written:
            block_rows[w.block] += w.record_count
        layout.block_rows = block_rows

        old_files = jv.live_data_files(table, base_id)
        rewritten_bytes = sum(int(f.fileSizeInBytes()) for f in old_files.values())
        new_rows = int(sum(w.record_count for w in written))
        if new_rows != base_rows:
            raise PandoRewriteError(f"wrote {new_rows} rows but the base snapshot has {base_rows} live rows: not committing")

        block_files: dict[int, list] = {}
        for w in written:
            block_files.setdefault(int(w.block), []).append(DataFileRef(w.path, int(w.record_count), int(w.file_size_in_bytes)))
        sidecar = LayoutSidecar.from_layout(
            layout, layout_id=layout_id, table_uuid=str(table.uuid()), block_files=block_files,
            base_snapshot_id=base_id, base_sequence_number=int(current.sequenceNumber()),
            properties=learned.properties())
        from pyiceberg.io import load_file_io

        io = load_file_io(dict(io_properties or {}), location)
        sidecar_path, sidecar_size = sidecar.write(io, location)
        seconds["metadata"] = time.time() - t0

        test_pause("BEFORE_COMMIT")
        t0 = time.time()
        with progress_step(progress, "commit: data file metadata, one replace snapshot", 2) as step:
            new_files = jv.build_data_files(spark, table, [jv.NewFile(w.path, w.file_size_in_bytes) for w in written])
            step.advance()
            pointer = LayoutPointer(layout_id, sidecar.file_name, snapshot_id=0, base_snapshot_id=base_id)
            props = {**pointer.to_properties(), P_SNAPSHOT: "{snapshot-id}"}
            committing = True
            snapshot_id = jv.commit_replace(spark, table, base_id, list(old_files.values()), new_files, props,
                                            summary={"pando.layout-id": layout_id})
            step.advance()
        seconds["commit"] = time.time() - t0
    except BaseException as failure:
        snapshot_id = after_failure(spark, failure, table_name, layout_id, committing, written, sidecar_path,
                                    io_properties, location, data_dir, progress)
    refresh_table(spark, table_name)
    return RewriteResult(len(old_files), len(written), rewritten_bytes, 0, layout_id, layout.num_blocks,
                         snapshot_id, base_id, seconds)


def _route_and_write(spark, table_name: str, base_id: int, layout, payload: LayoutPayload, spec: WriteSpec) -> list:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    df = jv.read_snapshot(spark, table_name, base_id)
    if spec.order_column:  # files keep the table's row order inside (blocks.write_blocks)
        df = df.withColumn(ROW_COL, F.monotonically_increasing_id())
    routed_schema = StructType(df.schema.fields + [StructField(BLOCK_COL, IntegerType(), False),
                                                   StructField(KTUPLE_COL, LongType(), False)])
    routed = df.mapInArrow(route_batches(payload), routed_schema)
    parallel = max(1, int(spark.sparkContext.defaultParallelism))
    tasks = max(1, min(layout.num_blocks, 4 * parallel))
    order = [BLOCK_COL] + ([spec.order_column] if spec.order_column else [])
    shuffled = routed.repartition(tasks, BLOCK_COL).sortWithinPartitions(*order)
    writer = write_blocks(spec)
    pause_path = os.environ.get(PAUSE_ENV_PREFIX + "WRITING")
    if pause_path:
        writer = _pause_after_first_file(writer, pause_path, float(os.environ.get("PANDO_TEST_PAUSE_TIMEOUT", "300")))
    with _arrow_batch_rows(spark, _batch_rows(df)):
        return shuffled.mapInArrow(writer, WRITTEN_FILE_DDL).collect()


ARROW_BATCH_BYTES = 32 << 20  # decoded bytes per Arrow batch handed to the Python workers


def _batch_rows(df) -> int:
    """Rows per Arrow batch for the route and write passes: Spark's default (10,000) makes the
    per-batch overhead of both Python passes show on narrow tables (SF 1 lineitem: ~20 % of the
    routing pass); ~32 MiB per batch by Spark's own row-size estimate, 10,000..100,000 rows."""
    row_bytes = max(1, int(df._jdf.schema().defaultSize()))
    return int(min(100_000, max(10_000, ARROW_BATCH_BYTES // row_bytes)))


@contextmanager
def _arrow_batch_rows(spark, rows: int):
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key, None)
    spark.conf.set(key, str(rows))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _int_or_none(value) -> int | None:
    try:
        return None if value is None else int(str(value))
    except ValueError:
        return None  # Iceberg's writer would refuse it too; pyarrow's default level then


def plan_block_files(layout, table_rows: int, min_block_rows: int) -> BlockFiles:
    """How each block is written (``workload/in_block.py``: files of about b rows), from the
    block's share of the sample scaled to the table's rows."""
    sample_rows = float(layout.block_rows.sum()) or 1.0
    return block_files(layout.block_rows * (table_rows / sample_rows), min_block_rows)


def write_spec(spark, table, data_dir: str, io_properties: dict[str, str] | None,
               target_file_size_bytes: int | None, *, order_column: str | None = None,
               files: BlockFiles | None = None) -> WriteSpec:
    """How a rewrite writes its blocks into ``data_dir`` (Java table): the table's schema, its
    target file size (unless given) and Parquet codec; with ``files``, each block's files of
    about b rows, cut along ``order_column`` (the rows arrive sorted by it)."""
    props = table.properties()
    return WriteSpec(
        data_dir=data_dir,
        iceberg_schema_json=str(spark._jvm.org.apache.iceberg.SchemaParser.toJson(table.schema())),
        io_properties=dict(io_properties or {}),
        target_file_size_bytes=target_file_size_bytes or int(
            props.getOrDefault("write.target-file-size-bytes", str(DEFAULT_TARGET_FILE_SIZE))),
        compression=str(props.getOrDefault("write.parquet.compression-codec", "zstd")).lower(),
        compression_level=_int_or_none(props.getOrDefault("write.parquet.compression-level", None)),
        order_column=order_column,
        file_rows=None if files is None else files.rows_per_file.tolist(),
        block_files=None if files is None else files.files.tolist(),
        max_file_rows=None if files is None else files.max_file_rows)


def after_failure(spark, failure: BaseException, table_name: str, layout_id: str, committing: bool, written: list,
                  sidecar_path: str | None, io_properties, location: str, data_dir: str,
                  progress: Callable[[str], None] = lambda m: None) -> int:
    """What a failed rewrite (full, incremental or per partition) leaves behind; called from its
    ``except`` block. Returns the snapshot id when the commit reached the catalog although the
    call failed (e.g. a lost connection after the metadata swap): the files are the table's now
    and must stay. Otherwise re-raises ``failure``: at once when the catalog may still commit
    (deleting the files could corrupt the table), else after deleting what was written."""
    committed = _committed_snapshot(spark, table_name, layout_id) if committing else None
    if committed is not None:
        progress(f"commit outcome unclear ({type(failure).__name__}) but snapshot {committed} holds the layout")
        return committed
    if not (committing and _commit_state_unknown(failure)):
        # Every file of a rewrite lives under data/pando-<layout id>/ (a directory nothing else
        # writes to), so remove the directory: it also catches files of tasks that finished before
        # a failing one, which `written` never saw. Tasks of a failed job are killed
        # asynchronously: let them stop first (a straggler's file is left to `pando cleanup`).
        if not written:
            _wait_for_running_tasks(spark)
        _delete_quietly(io_properties, [w.path for w in written] + ([sidecar_path] if sidecar_path else []),
                        location, directory=data_dir)
    raise failure


def _committed_snapshot(spark, table_name: str, layout_id: str) -> int | None:
    """The id of a snapshot of the table that carries this rewrite's layout id, if any (the
    commit's outcome, read back from the catalog); None if it cannot be read."""
    try:
        table = jv.load_table(spark, table_name)
        for snap in jv._iter(table.snapshots()):
            if str(snap.summary().get("pando.layout-id")) == layout_id:
                return int(snap.snapshotId())
    except Exception:
        return None
    return None


def _wait_for_running_tasks(spark, timeout: float = 10.0) -> None:
    """Wait (bounded) until no executor runs a task, e.g. the killed tasks of a failed job."""
    try:
        tracker = spark.sparkContext._jsc.sc().statusTracker()
        deadline = time.time() + timeout
        while time.time() < deadline:
            infos = tracker.getExecutorInfos()
            if sum(int(i.numRunningTasks()) for i in infos) == 0:
                return
            time.sleep(0.2)
    except Exception:
        pass


def _commit_state_unknown(error: BaseException) -> bool:
    return "CommitStateUnknownException" in f"{type(error).__name__}: {error}"


def _delete_quietly(io_properties, paths: list[str], location: str, directory: str | None = None) -> None:
    """Best effort: remove files of a rewrite that did not commit, and its own data directory
    with whatever else is in it (``pando cleanup`` lists anything left, e.g. after a crash)."""
    try:
        from pyiceberg.io import load_file_io

        io = load_file_io(dict(io_properties or {}), location)
    except Exception:
        return
    for p in paths:
        try:
            io.delete(p)
        except Exception:
            pass
    if directory and hasattr(io, "parse_location") and hasattr(io, "fs_by_scheme"):
        try:
            scheme, netloc, path = io.parse_location(directory)
            fs = io.fs_by_scheme(scheme, netloc)
            from pyarrow.fs import FileType

            if fs.get_file_info(path).type == FileType.Directory:
                fs.delete_dir(path)
        except Exception:
            pass


# ---- test hook --------------------------------------------------------------------------------
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


test_pause.__test__ = False  # not a pytest test


def _pause_after_first_file(writer, path: str, timeout: float):
    def run(batches):
        paused = False
        for out in writer(batches):
            yield out
            if not paused:
                paused = True
                test_pause("WRITING", path, timeout)

    return run
