"""What the three Pando rewrites share: the whole table (``rewrite.py``), the rows appended since
the layout (``incremental.py``) and one layout per partition (``partitioned.py``).

- their options, results and error;
- learning from the workload on Spark: the workload parsed against the table's namespace, the
  candidate cuts and join-induced literal cuts with key sets computed by Spark (§7), the
  templates' synthetic draws along samples of the table and of its dimension tables;
- how blocks are written (``write_spec``, Arrow batch size) and what a failed rewrite leaves
  behind (``after_failure``), both used by the one rewrite pipeline (``pipeline.py``);
- when an incremental run must not run (``stale_cut_columns``).

Import order: this module ← ``pipeline.py`` ← ``partitioned.py`` ← ``rewrite.py``,
``incremental.py`` (both entry points hand a partitioned table to ``partitioned.py``).
``rewrite.py`` re-exports the names its users import from it (``PandoRewriteError``,
``RewriteOptions``, ``collect_arrow``, ...).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot

from .. import settings
from ..exceptions import LayoutError, TemplateRegressionError
from ..expr import keys as keyset
from ..expr import semantics
from ..expr.semantics import Semantics
from ..planner.keysets import TooManyKeys
from ..workload.in_block import (
    DEFAULT_MAX_TEMPLATE_REGRESSION,
    P_MAX_TEMPLATE_REGRESSION,
    BlockFiles,
    parse_regression_bound,
)
from . import iceberg_jvm as jv
from .blocks import WriteSpec
from .session import quote_name, session_conf

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
K_SELECTIONS = ("validate", "fixed")

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_C = TypeVar("_C", bound="DataclassInstance")


class PandoRewriteError(LayoutError, ValueError):
    """The rewrite cannot run with these inputs; the message says what to change."""


P_OPTIONS = "pando.options"  # sidecar property: JSON of the options the layout(s) were learned with
P_TEMPLATE_GUARD = "pando.template-guard"  # sidecar property: JSON of workload.in_block.TemplateGuard


class TemplateGuardError(TemplateRegressionError, PandoRewriteError):
    """The layout would make a workload template read more than the guard allows
    (``workload.in_block.TemplateGuard.refusal`` says which); nothing was written."""


@dataclass(frozen=True)
class OptionFields:
    """The options of learning and writing a layout, with their types and defaults: the ONE
    definition of the fields of ``RewriteOptions`` (frozen; the procedures' ``options =>
    map(...)``, read by ``from_map``) and of ``pando_iceberg.LayoutOptions`` (frozen; the options
    of ``PandoTable.optimize.*``). Adding an option is one field here: its map key is its name
    with '-' for '_', and both check its value by its type (``int``, ``float``, ``str`` or
    ``int | None``); ``RewriteOptions.validate`` checks ranges."""

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
    # The per-template guard (workload/in_block.select_layout): no workload template may read more
    # than this many times what it reads now; '' = the table property
    # pando.layout.max-template-regression, else 1.1; '0' or 'off' = no guard.
    max_template_regression: str = ""
    # The sample holds about this many rows per block of the layout (⌈rows / min-block-rows⌉
    # blocks), at most sample-rate's share and at least min-sample-rows (``sample_fraction``):
    # the optimizer's work grows with the blocks and the workload, not the table. 0: sample-rate's.
    sample_rows_per_block: int = 500


def _declares_fields_of(spec: type) -> Callable[[type[_C]], type[_C]]:
    """Class decorator, over ``@dataclass``: the class must declare the fields of the dataclass
    ``spec`` (names, types, defaults, in that order) as a run of its own fields, else TypeError at
    import. A mutable dataclass cannot inherit the fields of a frozen one (nor the reverse), so
    the mutable twin declares them plainly, where type checkers see them, and this keeps the two
    one definition."""
    want = [(f.name, f.type, f.default, f.default_factory) for f in fields(spec)]

    def check(cls: type[_C]) -> type[_C]:
        have = [(f.name, f.type, f.default, f.default_factory) for f in fields(cls)]
        if not any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1)):
            raise TypeError(f"{cls.__name__} must declare the fields of {spec.__name__} as {spec.__name__} does")
        return cls

    return check


@dataclass(frozen=True)
class RewriteOptions(OptionFields):
    """Options of ``rewrite_data_files(strategy => 'pando', options => map(...))``: the fields of
    ``OptionFields``, with the option map's parsing (``from_map``) and range checks (``validate``)."""

    OPTION_NAMES: ClassVar[dict[str, str]] = {f.name.replace("_", "-"): f.name for f in fields(OptionFields)}

    @classmethod
    def from_map(cls, options: dict[str, Any] | None) -> RewriteOptions:
        """Parse Iceberg-style string options, naming any unknown or malformed one."""
        given: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(OptionFields)}
        for key, raw in (options or {}).items():
            attr = cls.OPTION_NAMES.get(key)
            if attr is None:
                raise PandoRewriteError(f"unknown option {key!r}; accepted: {', '.join(sorted(cls.OPTION_NAMES))}")
            if types[attr] == "str":
                given[attr] = str(raw).strip().lower()
                continue
            number = types[attr] == "float"
            try:
                given[attr] = float(raw) if number else int(str(raw))
            except ValueError:
                kind = "a number" if number else "an integer"
                raise PandoRewriteError(f"option {key!r} must be {kind}, got {raw!r}") from None
        out = cls(**given)
        out.validate()
        return out

    def to_map(self) -> dict[str, str]:
        """The options as the procedures' map (``from_map``'s inverse; unset ones left out)."""
        names = {attr: key for key, attr in self.OPTION_NAMES.items()}
        return {names[f.name]: str(getattr(self, f.name)) for f in fields(OptionFields)
                if getattr(self, f.name) not in (None, "")}

    def validate(self) -> None:
        if not 1 <= self.k <= 8:
            raise PandoRewriteError(f"option 'k' must be between 1 and 8, got {self.k}")
        if not 0 < self.sample_rate <= 1:
            raise PandoRewriteError(f"option 'sample-rate' must be in (0, 1], got {self.sample_rate}")
        if self.min_block_rows < 1:
            raise PandoRewriteError(f"option 'min-block-rows' must be >= 1, got {self.min_block_rows}")
        if self.sample_rows_per_block < 0:
            raise PandoRewriteError(f"option 'sample-rows-per-block' must be >= 0 (0: sample-rate alone), "
                                    f"got {self.sample_rows_per_block}")
        if self.target_file_size_bytes is not None and self.target_file_size_bytes < 1024:
            raise PandoRewriteError(f"option 'target-file-size-bytes' must be >= 1024, "
                                    f"got {self.target_file_size_bytes}")
        if not 0 <= self.template_draws <= 1000:
            raise PandoRewriteError(f"option 'template-draws' must be between 0 and 1000, got {self.template_draws}")
        if not self.in_block_order:
            raise PandoRewriteError("option 'in-block-order' must be 'auto', 'none' or a column name, got ''")
        if self.max_template_regression:
            try:
                parse_regression_bound(self.max_template_regression)
            except ValueError:
                raise PandoRewriteError(f"option 'max-template-regression' must be a number > 0, '0' or 'off', "
                                        f"got {self.max_template_regression!r}") from None
        if self.k_selection not in K_SELECTIONS:
            raise PandoRewriteError(f"option 'k-selection' must be one of {', '.join(K_SELECTIONS)}, "
                                    f"got {self.k_selection!r}")


# Options a table may store its own default for, as the table property ``pando.layout.<option>``
# (``ALTER TABLE t SET TBLPROPERTIES ('pando.layout.k' = '2')``): the procedures and verbs take
# an option given, else the table's property, else the built-in default (``OptionFields``).
LAYOUT_PROPERTY_PREFIX = "pando.layout."
TABLE_DEFAULT_OPTIONS = ("k", "sample-rate", "sample-rows-per-block", "min-block-rows", "in-block-order",
                         "template-draws", "k-selection", "max-template-regression")


def layout_property(option: str, raw: Any) -> str:
    """The table property ``pando.layout.<option>``'s value ``raw``, checked as the option; a
    PandoRewriteError naming the property when the option would not accept it."""
    text = str(raw).strip()
    try:
        RewriteOptions.from_map({option: text})
    except PandoRewriteError as e:
        raise PandoRewriteError(f"table property {LAYOUT_PROPERTY_PREFIX}{option} = {text!r} is not accepted: "
                                f"{e}") from None
    return text


def with_table_defaults(given: Mapping[str, Any], properties: Mapping[str, str]) -> RewriteOptions:
    """The options of a rewrite of a table with ``properties`` (its table properties) from the
    options ``given`` (option map keys, e.g. ``{'k': '2'}``): each option of
    :data:`TABLE_DEFAULT_OPTIONS` not given takes the property ``pando.layout.<option>`` when the
    table has it (:func:`layout_property`), the others their built-in default."""
    merged = {key: value for key, value in given.items() if value is not None}
    for option in TABLE_DEFAULT_OPTIONS:
        raw = properties.get(LAYOUT_PROPERTY_PREFIX + option)
        if option not in merged and raw is not None:
            merged[option] = layout_property(option, raw)
    return RewriteOptions.from_map(merged)


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
    # workload.in_block.TemplateGuard of the layout written (None: not measured); keyword-only, so the
    # subclasses' positional fields stay where they are
    guard: Any = field(default=None, kw_only=True)
    # peak resident memory (MiB) per phase, by process (spark.phases.peak_rss_mib); {}: not measured
    peak_rss_mib: dict[str, dict[str, float]] = field(default_factory=dict, kw_only=True)

    COLUMNS = ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
               "failed_data_files_count", "layout_id", "block_count", "snapshot_id")

    def row(self) -> tuple:
        return tuple(getattr(self, c) for c in self.COLUMNS)


@dataclass(frozen=True)
class IncrementalFields:
    """What an incremental run did with the rows it read: the ONE definition of these fields of
    ``IncrementalResult`` (mutable, filled in by the run; repeated there, checked at import) and of
    ``pando_iceberg.IncrementalMetrics`` (frozen, what ``PandoTable.optimize.incremental`` returns)."""

    rows_read: int = 0
    rows_laid_out: int = 0
    rows_carried_over: int = 0
    blocks_extended: int = 0
    min_block_rows: int = 0
    committed: bool = True


@_declares_fields_of(IncrementalFields)
@dataclass
class IncrementalResult(RewriteResult):
    """``RewriteResult`` plus what the incremental run did with the rows it read (the fields of
    ``IncrementalFields``, mutable, declared as there: ``_declares_fields_of``) and its notes."""

    rows_read: int = 0
    rows_laid_out: int = 0
    rows_carried_over: int = 0
    blocks_extended: int = 0
    min_block_rows: int = 0
    committed: bool = True

    notes: list[str] = field(default_factory=list)


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


_UNIT = 1 << 53  # a hash's low 53 bits, exactly a double: uniform in [0, 1) once divided
_DRAW = "__pando_draw"


def seeded_sample(df, fraction: Any, seed: int, skip: Sequence[str] = ()) -> pa.Table:
    """A Bernoulli sample of ``df`` that depends only on its rows' values and ``seed``, in one
    order: a row is kept when the hash (xxhash64) of its values and the seed, as a number in
    [0, 1), is below ``fraction`` (a number, or a Spark column: a fraction per row), and the sample
    is sorted by that hash. Columns in ``skip`` (e.g. Iceberg's ``_file``) are carried along but not
    hashed; a column holding a map is hashed as its JSON (Spark hashes no maps). Equal rows are kept
    or dropped together.

    Spark's ``sample`` and ``sampleBy`` seed each task with its partition index, and Iceberg's
    planning hands the same files to tasks in another order from one read to the next: four
    samples of one taxi snapshot at the same seed were three different row sets, so the same data
    and options learned other layouts. Hashing the values, not the files'
    names and positions, also gives the same sample after a compaction or in a copy of the table."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, DataType, MapType, StructType

    def has_map(t: DataType) -> bool:
        if isinstance(t, MapType):
            return True
        if isinstance(t, ArrayType):
            return has_map(t.elementType)
        return isinstance(t, StructType) and any(has_map(f.dataType) for f in t.fields)

    values = []
    for f in df.schema.fields:
        if f.name not in skip:
            col = F.col(sqlglot.exp.column(f.name, quoted=True).sql(dialect="spark"))  # as the module quotes
            values.append(F.to_json(col) if has_map(f.dataType) else col)
    u = F.xxhash64(*values, F.lit(int(seed))).bitwiseAND(F.lit(_UNIT - 1)) / F.lit(float(_UNIT))
    picked = df.withColumn(_DRAW, u).where(F.col(_DRAW) < (fraction if isinstance(fraction, Column)
                                                            else F.lit(float(fraction))))
    return collect_arrow(picked).sort_by(_DRAW).drop_columns([_DRAW])


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
    with the dimension's own join filters applied as semi-joins (multi-hop chains, §7).
    ``settings``: the semantics the predicates are evaluated under (a layout's key sets: the
    default settings its cuts are read with, whatever the session's; None: the session's own,
    for a query's key sets)."""

    def __init__(self, spark, schemas: dict[str, pa.Schema], settings: Semantics | None = None,
                 track_snapshots: bool = False):
        self.spark = spark
        self.schemas = schemas
        self.conf = settings.spark_conf() if settings is not None else {}
        self._unique: dict[tuple[str, str], bool] = {}
        self._cache: dict[tuple[str, str, str], np.ndarray] = {}
        #: with ``track_snapshots``: each table ``prefetch`` read, its snapshot before the first read
        #: (the key sets kept are exact at it while the table has not moved since)
        self.read_snapshots: dict[str, int | None] | None = {} if track_snapshots else None

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

    def keys_read(self, table: str, column: str, keys: pa.Array | pa.ChunkedArray) -> None:
        """``table``'s whole ``column`` read by another step (``attribute_weights.spark_weights``):
        whether it is unique, as ``is_unique`` would count it (non-NULL values against distinct
        ones), without another Spark job; integer and string columns only."""
        if not (pa.types.is_integer(keys.type) or pa.types.is_string(keys.type)) or (table, column) in self._unique:
            return
        distinct = int(pc.count_distinct(keys, mode="only_valid").as_py())
        for name in dict.fromkeys([column, column.lower()]):
            self._unique.setdefault((table, name), len(keys) - keys.null_count == distinct)

    def __call__(self, dim_table: str, pk_column: str, dim_filter) -> np.ndarray:
        hit = self._cache.get((dim_table, pk_column, dim_filter.to_sql()))
        if hit is not None:
            return hit
        with session_conf(self.spark, self.conf):
            keys = collect_arrow(self._frame(dim_table, dim_filter).select(pk_column).distinct())
        col = keys.column(0).drop_null()
        return np.sort(col.to_numpy(zero_copy_only=False))

    def at_most(self, max_keys: int):
        """A key reader (JoinFilter → keys) that stops after ``max_keys + 1`` rows and raises
        ``planner.keysets.TooManyKeys`` when there are more: a row filter's keys, never a truncated set (the
        key must be the dimension's unique key, as every join filter's is)."""
        def read(join) -> np.ndarray:
            pk = sqlglot.exp.column(join.dim_pk, quoted=True).sql(dialect="spark")
            frame = self._frame(join.dim_table, join.dim_filter).where(f"{pk} IS NOT NULL").select(join.dim_pk)
            col = collect_arrow(frame.limit(max_keys + 1)).column(0)
            if len(col) > max_keys:
                raise TooManyKeys(f"more than {max_keys:,} keys")
            return np.sort(col.to_numpy(zero_copy_only=False))
        return read

    def prefetch(self, requests: Sequence[tuple[str, str, Any]]) -> None:
        """Key sets of many dimension predicates with ONE Spark job per dimension table, chains
        included (§7, lineitem → orders → customer → nation): each table is read once as
        ``SELECT <pk and join columns>, <the predicates' masks> FROM dim``, the masks packed
        ``_MASK_BITS`` to a TINYINT (bit i: ``CASE WHEN (p_i) THEN 1 << i ELSE 0 END``, so NULL →
        not in the set, as in WHERE): Spark's Arrow writer then converts a few integer columns
        instead of one boolean column per predicate, which took most of the read (TPC-H SF 1
        orders: 1.5 M rows × about 100 predicates). On those columns, a predicate's key set is
        its rows' pks where its own bit is set and every join column is in the inner filter's key
        set. Key sets
        this provider already holds are not read again (a table none of whose requested key
        sets is missing is not read at all)."""
        columns: dict[str, dict[str, None]] = {}  # dim → columns to read (ordered, unique)
        predicates: dict[str, dict[str, Any]] = {}  # dim → {predicate SQL: filter}

        def memo_of(dim: str, pk: str, flt) -> tuple[str, str, str]:
            return (dim, pk, flt.to_sql() if flt is not None else "TRUE")

        def visit(dim: str, pk: str, flt) -> None:
            if memo_of(dim, pk, flt) in self._cache:
                return
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
        frames: dict[str, tuple[pa.Table, dict[str, tuple[int, int]]]] = {}  # dim → read, predicate → (column, bit)
        for dim, cols in columns.items():
            preds = list(predicates.get(dim, {}))
            select = [sqlglot.exp.column(c, quoted=True).sql(dialect="spark") for c in cols]
            select += ["CAST(" + " | ".join(f"(CASE WHEN ({p}) THEN {1 << i} ELSE 0 END)"
                                            for i, p in enumerate(preds[w:w + _MASK_BITS]))
                       + f" AS TINYINT) AS `_p{w // _MASK_BITS}`" for w in range(0, len(preds), _MASK_BITS)]
            if self.read_snapshots is not None and dim not in self.read_snapshots:
                self.read_snapshots[dim] = dimension_snapshot(self.spark, dim)
            with session_conf(self.spark, {**self.conf, **_MASK_READ_CONF}):
                read = collect_arrow(self.spark.table(dim).selectExpr(*select))
            frames[dim] = (read, {p: (len(cols) + i // _MASK_BITS, i % _MASK_BITS) for i, p in enumerate(preds)})
        ordered: dict[tuple[str, str], tuple[np.ndarray | None, np.ndarray, bool] | None] = {}
        # (table, join column, the inner filter's memo) → its rows whose join column is in the
        # inner filter's key set, as packed bits
        joined: dict[tuple[str, str, tuple[str, str, str]], np.ndarray] = {}
        words: dict[tuple[str, int], np.ndarray] = {}  # (table, packed column) → its masks, a byte per row
        ints: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}  # (table, join column) → values, valid

        def member(dim: str, column: str, inner: np.ndarray) -> np.ndarray:
            """``column IN inner`` on ``dim``'s rows (NULL → False): an integer column converted
            to numpy once per table, asked through a bit table of the inner keys (sorted, unique:
            a key set ``keys`` returned); other columns through ``expr.keys.member_mask``."""
            col = frames[dim][0].column(column)
            if inner.dtype == np.int64 and pa.types.is_integer(col.type) and not pa.types.is_uint64(col.type):
                if (dim, column) not in ints:
                    ints[(dim, column)] = (np.asarray(pc.fill_null(col, 0).to_numpy(), dtype=np.int64),
                                           np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=bool))
                vals, valid = ints[(dim, column)]
                return keyset.IntKeyLookup(inner, len(vals))(vals, valid)
            return keyset.member_mask(col, keyset.normalize_keys(inner))

        def keys(dim: str, pk: str, flt) -> np.ndarray:
            memo = memo_of(dim, pk, flt)
            if memo not in self._cache:
                table, pred_bit = frames[dim]
                mask = np.ones(table.num_rows, dtype=bool)
                if flt is not None and not flt.is_true_expr():
                    at_col, bit = pred_bit[flt.expr.sql(dialect="spark")]
                    if (dim, at_col) not in words:  # each packed column to numpy once
                        words[(dim, at_col)] = np.asarray(table.column(at_col).to_numpy(), dtype=np.int8)
                    mask &= (words[(dim, at_col)] & np.int8(1 << bit)).astype(bool)
                for j in flt.joins if flt is not None else ():
                    at = (dim, j.column, memo_of(j.dim_table, j.dim_pk, j.dim_filter))
                    if at not in joined:  # once per inner key set: the draws repeat a few of them
                        joined[at] = np.packbits(member(dim, j.column, keys(j.dim_table, j.dim_pk, j.dim_filter)))
                    mask &= np.unpackbits(joined[at], count=table.num_rows).view(bool)
                if (dim, pk) not in ordered:
                    ordered[(dim, pk)] = _key_order(table.column(pk))
                by_key = ordered[(dim, pk)]
                if by_key is not None:  # the keys sorted once per table; a mask picks them in order
                    order, values, unique = by_key
                    picked = values[mask if order is None else mask[order]]
                    self._cache[memo] = picked if unique else _sorted_unique(picked)
                else:
                    pks = table.column(pk).filter(pa.array(mask)).drop_null()
                    self._cache[memo] = _sorted_unique(pks.to_numpy(zero_copy_only=False))
            return self._cache[memo]

        for dim, pk, flt in requests:
            keys(dim, pk, flt)


# Predicate masks per packed TINYINT column of the key-set prefetch (bits 0..6: never the sign bit):
# a predicate's mask is then read from one byte per row on the driver (a BIGINT of 63 masks made
# each mask a read of 8 bytes per row, slower than the Arrow booleans it replaced).
_MASK_BITS = 7
# The packed read without whole-stage codegen: with few output columns Spark fuses every mask into
# one generated method, which can grow too large for the JVM to compile (TPC-H SF 1 part, 115 string
# equalities packed 63 to a column: 11 s against 2.7 s without it). Row-at-a-time projection
# compiles each output column's expression on its own.
_MASK_READ_CONF = {"spark.sql.codegen.wholeStage": "false"}


def _key_order(column) -> tuple[np.ndarray | None, np.ndarray, bool] | None:
    """An integer key column without NULLs: the order that sorts it (None: it is sorted already,
    as a table loaded in key order is, and a mask needs no reordering), its values in that order,
    and whether they are unique (a key set is then the sorted values a mask picks, in order);
    None for any other column (each key set sorted on its own)."""
    if column.null_count or not pa.types.is_integer(column.type):
        return None
    values = np.asarray(column.to_numpy())
    order = None if (values[1:] >= values[:-1]).all() else np.argsort(values, kind="stable")
    values = values if order is None else values[order]
    return order, values, bool(len(values) < 2 or (values[1:] != values[:-1]).all())


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


def sample_rate(options: RewriteOptions, rows: int) -> float:
    """The share of a table (or partition) of ``rows`` rows that its layout is learned from,
    before the floor of ``min-sample-rows``: ``sample-rate``, or less when that gives more than
    ``sample-rows-per-block`` rows per block of the layout (⌈rows / min-block-rows⌉ blocks). The
    optimizer's statistics are per block (the rows of each block, which queries read it), so
    its sample need not grow with the table once every block is well estimated."""
    rate = options.sample_rate
    if options.sample_rows_per_block:
        blocks = math.ceil(max(1, rows) / options.min_block_rows)
        rate = min(rate, blocks * options.sample_rows_per_block / max(1, rows))
    return rate


def sample_fraction(options: RewriteOptions, rows: int) -> float:
    """The share of ``rows`` rows sampled: ``sample_rate``, at least ``min-sample-rows`` of them
    (all of a smaller table)."""
    return min(1.0, max(sample_rate(options, rows), options.min_sample_rows / max(1, rows)))


def candidate_ks(options: RewriteOptions) -> list[int]:
    """The numbers of trees learned: 1..k under 'validate' (one kept, ``select_layout``), else k."""
    return list(range(1, options.k + 1)) if options.k_selection == "validate" else [options.k]


def table_workload(spark, table_name: str, workload: Sequence[str] | str) -> tuple[Any, str, list, dict]:
    """The workload parsed against the table's namespace: (workload, the table's key in it,
    [(filter on the table, weight)], the namespace's schemas)."""
    from ..workload import parse_workload

    schemas = namespace_schemas(spark, table_name)
    target = schema_key(table_name, schemas)
    pks = {name: identifier_fields(spark, name) for name in schemas}
    wl = parse_workload(workload, schemas, primary_keys={k: v for k, v in pks.items() if v})
    queries = [(q.filters[target], q.weight) for q in wl.queries if target in q.filters]
    if not queries:
        raise PandoRewriteError(f"the workload has no query that reads {table_name}; "
                                "a layout needs queries on the table "
                                f"(tables the workload reads: {', '.join(wl.tables()) or 'none'})")
    return wl, target, queries, schemas


def table_cuts(spark, wl, target: str, schemas: dict[str, pa.Schema], filters: Sequence[Any],
               provider: SparkKeyProvider | None = None) -> list:
    """Candidate cuts of ``filters`` (§6.1: their simple predicates) and their join-induced
    literal cuts, with key sets from Spark and their dimension's snapshot (§7). ``provider``: one
    with ``track_snapshots`` whose key sets (``keyed_draws``') are reused."""
    cuts: dict[str, Any] = {}
    for f in filters:
        for cut in f.candidate_cuts():
            cuts.setdefault(cut.key, cut)
    cuts_list = list(cuts.values())
    if provider is None or provider.read_snapshots is None:
        provider = SparkKeyProvider(spark, schemas, semantics.DEFAULT, track_snapshots=True)
    recorder = _RecordingKeyProvider(provider)
    wl.join_induced_cuts(target, recorder, filters=filters)  # which key sets are needed ...
    # Each dimension's snapshot BEFORE its keys are read (by this prefetch or an earlier one of
    # the provider): refresh_literal_cuts reads only the rows changed since (rows appended in
    # between are re-read, which is harmless). The keys are exact at those snapshots when no
    # table of the chain moved while they were read (CutOrigin.exact_at).
    chain = sorted({t for r in recorder.requests for t in _chain_tables(r[0], r[2])})
    assert provider.read_snapshots is not None
    dim_snapshots = {dim: provider.read_snapshots[dim] if dim in provider.read_snapshots
                     else dimension_snapshot(spark, dim) for dim in chain}
    provider.prefetch(recorder.requests)  # ... computed with one Spark job per dimension
    still = {dim: dimension_snapshot(spark, dim) for dim in chain} == dim_snapshots
    cuts_list += [with_origin_snapshot(c, dim_snapshots.get(c.origin.dim_table), dim_snapshots if still else None)
                  for c in wl.join_induced_cuts(target, provider, filters=filters)]
    if not cuts_list:
        raise PandoRewriteError(f"the workload's queries on {target} have no predicate usable as a cut "
                                f"({len(wl.unsupported)} predicate(s) were not modelable)")
    return cuts_list


def learning_workload(spark, wl, target: str, schemas: dict[str, pa.Schema], queries: list, sample: pa.Table,
                      options: RewriteOptions, rate: float, validate: bool = False,
                      fraction: float | None = None) -> tuple[Any, list]:
    """What the optimizer learns from (``workload/templates.py``): the training queries plus
    ``template-draws`` synthetic draws per template (a top-k query's read as the range of its
    estimated best rows, ``workload/top_k_learning.py``), drawn along the sample's values (and
    along samples of the dimension tables the joins filter), and their candidate cuts with
    the attribute-range cuts of their dimension filters (``workload/attribute_ranges.py``);
    ``validate``: as many independent draws again, kept apart (``expected.validation``). ``rate``:
    the share of the table the sample was drawn at (``sample_rate``), for the table's blocks;
    ``fraction``: the share it holds (``sample_fraction``; default ``rate``), for top-k boundaries."""
    import dataclasses

    from ..workload.attribute_ranges import attribute_range_filters, group_count
    from ..workload.templates import expected_workload
    from ..workload.top_k_learning import top_k_learning_queries
    from .attribute_weights import spark_weights

    dims = dimension_samples(spark, [f for f, _ in queries], options) if options.template_draws else {}
    expected = expected_workload(queries, sample, options.template_draws, options.seed, dimensions=dims,
                                 validation_draws=options.template_draws if validate else 0)
    share = rate if fraction is None else fraction

    def ranged(draws: list) -> list:  # top-k draws as the range of their best rows
        return top_k_learning_queries(wl, target, draws, sample, share, max(1.0, options.min_block_rows * share))

    expected = dataclasses.replace(expected, queries=ranged(expected.queries), validation=ranged(expected.validation))
    provider = SparkKeyProvider(spark, schemas, semantics.DEFAULT, track_snapshots=True)  # key sets read once
    blocks = sample.num_rows / max(rate, 1e-9) / max(1, options.min_block_rows)
    weights = spark_weights(spark, collect_arrow, rows=lambda dim: row_count(spark, dim, None),
                            keys_read=provider.keys_read)  # a dimension read whole: its key's uniqueness
    groups = attribute_range_filters([f for f, _ in expected.queries], sample, weights,
                                     group_count(blocks))  # they read no key set
    del weights  # the dimensions it read whole to the driver: not held through the key sets' read
    recorder = _RecordingKeyProvider(provider)  # the cuts' key sets, read with the draws' (one read per dimension)
    wl.join_induced_cuts(target, recorder, filters=[f for f, _ in expected.queries] + groups)
    expected = keyed_draws(spark, wl, expected, schemas, provider=provider, also=recorder.requests)
    filters = [f for f, _ in expected.queries]
    return expected, table_cuts(spark, wl, target, schemas, filters + groups, provider=provider)


def keyed_draws(spark, wl, expected, schemas: dict[str, pa.Schema], row_limit: int | None = None,
                provider: SparkKeyProvider | None = None, also: Sequence[tuple[str, str, Any]] = ()):
    """``expected`` with the key set of every join whose chain the planner reads keys of at
    query time too: every join of the chain FK→PK (``wl.key_basis``: the query-time parse
    attaches no other join) and every table of at most ``row_limit`` rows (default
    the session's setting ``joinPruning.maxDimensionRows``; ``chain_within``), read with one Spark job per
    dimension (``SparkKeyProvider.prefetch``). The cost model then decides range cuts on the
    foreign keys for each draw as the planner will for a query (``TableFilter._join_extra``),
    and the draws propose the ranges their key sets imply as cuts (``key_range_cuts``). ``also``:
    more key sets (dimension, pk, filter) read in the same jobs (the candidate cuts' of
    ``table_cuts``, which then reads no dimension again)."""
    import dataclasses

    from ..planner.scan import with_dim_keys

    limit = settings.of_spark(spark)["joinPruning.maxDimensionRows"] if row_limit is None else row_limit
    rows: dict[str, int] = {}
    provider = provider or SparkKeyProvider(spark, schemas, semantics.DEFAULT)

    def within(j) -> bool:
        if wl.key_basis(j.dim_table, j.dim_pk, provider) is None:
            return False
        if j.dim_table not in rows:
            rows[j.dim_table] = row_count(spark, j.dim_table, None)
        return rows[j.dim_table] <= limit and all(within(sub) for sub in getattr(j.dim_filter, "joins", None) or ())

    draws = list(expected.queries) + list(expected.validation)
    wanted = {id(j): j for f, _ in draws for j in f.joins if j.dim_keys is None and within(j)}
    if not wanted:
        if also:
            provider.prefetch(also)
        return expected
    provider.prefetch([(j.dim_table, j.dim_pk, j.dim_filter) for j in wanted.values()] + list(also))

    def keyed(items):
        return [(with_dim_keys(f, lambda j: provider(j.dim_table, j.dim_pk, j.dim_filter), list(wanted.values()))
                 if any(id(j) in wanted for j in f.joins) else f, w) for f, w in items]

    return dataclasses.replace(expected, queries=keyed(expected.queries), validation=keyed(expected.validation))


def template_bound(options: RewriteOptions, table) -> float | None:
    """The guard's bound (None: off): the option when given, else the Java ``table``'s property
    ``pando.layout.max-template-regression``, else ``DEFAULT_MAX_TEMPLATE_REGRESSION``."""
    if options.max_template_regression:
        return parse_regression_bound(options.max_template_regression)
    raw = table.properties().getOrDefault(P_MAX_TEMPLATE_REGRESSION, None)
    if raw is None:
        return DEFAULT_MAX_TEMPLATE_REGRESSION
    return parse_regression_bound(layout_property("max-template-regression", raw))


def static_table(table, io_properties: dict[str, str] | None):
    """The Java ``table``'s current metadata opened by pyiceberg (read-only), for planning. It has
    no catalog: pyiceberg gives a static table one that raises on every call, and the planner
    reads dimension tables through the table's catalog — with that one, a layout with literal cuts
    could not be used at all (every file read); with none, it is planned with the key sets the
    filters carry (``keyed_draws``), deciding without data only what needs none."""
    from pyiceberg.table import StaticTable

    metadata = str(table.operations().current().metadataFileLocation())
    static = StaticTable.from_metadata(metadata, properties=dict(io_properties or {}))
    static.catalog = None  # type: ignore[assignment]
    return static


def reads_now(static, snapshot_id: int | None, queries: Sequence[tuple[Any, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the fractions of the table's rows and bytes in the data files it opens today:
    the planner's own plan (``planner.scan.plan_scan``: Iceberg's partition and min/max pruning,
    then the table's current Pando layout, if any) on ``snapshot_id`` of ``static``
    (``static_table``). With ``workload.in_block.files_read`` (the same fraction of rows, for a
    candidate layout, estimated on the sample) it is what the per-template guard compares."""
    from ..planner.scan import plan_scan

    rows = np.zeros(len(queries))
    size = np.zeros(len(queries))
    for i, (f, _) in enumerate(queries):
        ex = plan_scan(static, f, snapshot_id=snapshot_id).explain
        rows[i] = ex.pando_rows / ex.total_rows if ex.total_rows else 1.0
        size[i] = ex.pando_bytes / ex.total_bytes if ex.total_bytes else 1.0
    return rows, size


def file_bounds(static, snapshot_id: int | None, columns: Sequence[str],
                paths: Collection[str] | None = None) -> dict[str, tuple[list, list]]:
    """Column → (lower bounds, upper bounds) of the current data files (those of ``paths``, when
    given: a partition's) that record both, values on the column's line (days for dates,
    microseconds for timestamps): the order the table already has (``workload.in_block.order_cuts``)."""
    from pyiceberg.conversions import from_bytes

    from ..planner.manifests import plan_files

    schema = static.schema()
    fields = {}
    for c in columns:
        try:
            fields[c] = schema.find_field(c, case_sensitive=False)
        except ValueError:
            continue
    out: dict[str, tuple[list, list]] = {c: ([], []) for c in fields}
    for task in plan_files(static, None, snapshot_id=snapshot_id):
        if paths is not None and task.file.file_path not in paths:
            continue
        lower, upper = task.file.lower_bounds or {}, task.file.upper_bounds or {}
        for c, fld in fields.items():
            if fld.field_id in lower and fld.field_id in upper:
                out[c][0].append(from_bytes(fld.field_type, lower[fld.field_id]))
                out[c][1].append(from_bytes(fld.field_type, upper[fld.field_id]))
    return out


DIMENSION_SAMPLE_ROWS = 100_000


def dimension_samples(spark, filters: Sequence[Any], options: RewriteOptions) -> dict[str, pa.Table]:
    """A sample (at most ``DIMENSION_SAMPLE_ROWS`` rows, seeded) of every dimension table the
    filters' joins name (multi-hop), with the columns their dimension filters use and, with them,
    its key and its own joins' foreign keys (``workload/templates.py`` draws a dimension's
    parameters at the rows the table's sample references)."""
    wanted: dict[str, set[str]] = {}

    def visit(flt) -> None:
        for j in flt.joins:
            cols = wanted.setdefault(j.dim_table, set())
            if not j.dim_filter.is_true_expr():
                cols |= {c.name.lower() for c in j.dim_filter.expr.find_all(sqlglot.exp.Column)}
            cols |= {sub.column.lower() for sub in j.dim_filter.joins}
            if cols:
                cols.add(j.dim_pk.lower())
            visit(j.dim_filter)

    for f in filters:
        visit(f)
    out = {}
    for dim, cols in wanted.items():
        if not cols:
            continue
        df = spark.table(dim).select(*[sqlglot.exp.column(c, quoted=True).sql(dialect="spark") for c in sorted(cols)])
        rows = row_count(spark, dim, None)
        out[dim] = seeded_sample(df, min(1.0, DIMENSION_SAMPLE_ROWS / max(1, rows)), options.seed)
    return out


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


def schema_key(table_name: str, schemas: dict[str, pa.Schema]) -> str:
    """The key of ``table_name`` in ``schemas`` (``namespace_schemas``): the name itself, else the
    one key with the same last part; PandoRewriteError when there is none or several."""
    if table_name in schemas:
        return table_name
    tail = table_name.split(".")[-1]
    hits = [k for k in schemas if k.split(".")[-1] == tail]
    if len(hits) != 1:
        raise PandoRewriteError(f"table {table_name!r} not found among {sorted(schemas)}")
    return hits[0]


def row_count(spark, table_name: str, snapshot_id: int | None) -> int:
    """Live rows of the table at ``snapshot_id`` (None: the current snapshot): the snapshot
    summary's ``total-records`` when it records no delete files (Iceberg keeps it exact then: no
    Spark job), else counted by Spark."""
    summary = snapshot_summary(spark, table_name, snapshot_id)
    records, deletes = summary.get("total-records"), summary.get("total-delete-files")
    if records is not None and deletes is not None and int(deletes) == 0:
        return int(records)
    return int(jv.read_snapshot(spark, table_name, snapshot_id).count())


def snapshot_summary(spark, table_name: str, snapshot_id: int | None) -> dict[str, str]:
    """The summary of the Iceberg table's snapshot ``snapshot_id`` (None: the current one); {}
    when there is none (an empty table, a name that is no Iceberg table)."""
    try:
        table = jv.load_table(spark, table_name)
    except Exception:
        return {}
    snap = table.currentSnapshot() if snapshot_id is None else table.snapshot(int(snapshot_id))
    if snap is None or snap.summary() is None:
        return {}
    return {str(k): str(v) for k, v in dict(snap.summary()).items()}


# ---- writing --------------------------------------------------------------------------------

ARROW_BATCH_BYTES = 32 << 20  # decoded bytes per Arrow batch handed to the Python workers


def batch_rows(df) -> int:
    """Rows per Arrow batch for the route and write passes: Spark's default (10,000) makes the
    per-batch overhead of both Python passes show on narrow tables (SF 1 lineitem: ~20 % of the
    routing pass); ~32 MiB per batch by Spark's own row-size estimate, 10,000..100,000 rows."""
    row_bytes = max(1, int(df._jdf.schema().defaultSize()))
    return int(min(100_000, max(10_000, ARROW_BATCH_BYTES // row_bytes)))


@contextmanager
def arrow_batch_rows(spark, rows: int):
    """While the ``with`` body runs, Spark hands ``rows`` rows per Arrow batch to mapInArrow (``batch_rows``);
    the session's setting is restored afterwards."""
    with session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": str(rows)}):
        yield


def _int_or_none(value) -> int | None:
    try:
        return None if value is None else int(str(value))
    except ValueError:
        return None  # Iceberg's writer would refuse it too; pyarrow's default level then


def write_spec(spark, table, data_dir: str, io_properties: dict[str, str] | None,
               target_file_size_bytes: int | None, *, order_column: str | None = None,
               files: BlockFiles | None = None) -> WriteSpec:
    """How a rewrite writes its blocks into ``data_dir`` (Java table): the table's schema, its
    target file size (unless given) and Parquet codec; with ``files``, each block's files of
    about b rows, cut along ``order_column`` (the rows arrive sorted by it). A row group closes
    at the table's ``write.parquet.row-group-size-bytes`` of Arrow data when it is set."""
    props = table.properties()
    row_group = _int_or_none(props.getOrDefault("write.parquet.row-group-size-bytes", None))
    return WriteSpec(
        data_dir=data_dir,
        iceberg_schema_json=str(spark._jvm.org.apache.iceberg.SchemaParser.toJson(table.schema())),
        io_properties=dict(io_properties or {}),
        target_file_size_bytes=target_file_size_bytes or int(
            props.getOrDefault("write.target-file-size-bytes", str(DEFAULT_TARGET_FILE_SIZE))),
        **({} if row_group is None else {"row_group_bytes": row_group}),
        compression=str(props.getOrDefault("write.parquet.compression-codec", "zstd")).lower(),
        compression_level=_int_or_none(props.getOrDefault("write.parquet.compression-level", None)),
        order_column=order_column,
        file_rows=None if files is None else files.rows_per_file.tolist(),
        block_files=None if files is None else files.files.tolist(),
        max_file_rows=None if files is None else files.max_file_rows)


# ---- after a failure ------------------------------------------------------------------------

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


# ---- incremental runs (incremental.py, partitioned.incremental_partitions) ------------------

def stale_cut_columns(table, pointer, layout, io_properties: dict[str, str] | None) -> set[str]:
    """Columns of ``layout``'s cuts that no longer denote the field they denoted when the layout
    was written (renamed, dropped, dropped and re-added), read from the Java ``table``'s current
    metadata (the planner's rule, ``planner.scan.changed_cut_columns``). Routing rows with such
    a cut would evaluate it on the wrong column or fail: the layout must be learned again."""
    from pyiceberg.table import StaticTable

    from ..planner.scan import changed_cut_columns

    metadata = str(table.operations().current().metadataFileLocation())
    static = StaticTable.from_metadata(metadata, properties=dict(io_properties or {}))
    return changed_cut_columns(static, pointer, layout)


STALE_NOTE = ("the layout's cuts on {columns} no longer apply (column renamed, dropped or replaced since the layout): "
              "{what} not laid out incrementally; lay the table out again (layout_health(relayout => true) does)")
