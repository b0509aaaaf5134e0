"""``pando_iceberg.scan``: a pyiceberg ``DataScan`` whose ``plan_files()`` applies the Pando trees.

    scan = pando_iceberg.scan(table, row_filter="l_shipdate >= date '1995-01-01' AND l_quantity < 24",
                              selected_fields=("l_orderkey", "l_quantity"))
    scan.to_arrow(); scan.to_pandas(); scan.to_polars(); scan.to_duckdb("t"); scan.count()
    scan.explain()          # files/bytes/rows after Iceberg's pruning, each tree, join pruning, LIMIT pruning

pyiceberg's readers (``to_arrow``, ``to_arrow_batch_reader``, ``count``; ``to_pandas``,
``to_duckdb``, ``to_polars`` and ``to_ray`` through ``to_arrow``) all read ``self.plan_files()``,
so overriding it is enough to make them read only the files the trees keep
(``planner.scan.plan_scan``: Iceberg's partition and min/max pruning, then every tree, then join
pruning). The plan only removes files that cannot hold a matching row (ARCHITECTURE invariant
1), so every reader returns exactly the rows of the unpruned scan. With ``limit=k`` it may also
keep only the fewest files every row of which matches, when they hold k rows
(``planner.limit``): the readers then return k matching rows, as an unpruned ``limit=k`` scan
returns some k of them.

Two kinds of ``row_filter``, each read with one semantics:

- **SQL text** (Spark SQL, the language of the workload): rows are those Spark would return.
  Iceberg's pruning plans with an implied Iceberg expression (``expr.iceberg.to_pyiceberg``,
  float bounds included); pyiceberg's reader gets one without float comparisons (Arrow's
  row-group statistics would drop NaN rows), which skips row groups and drops most rows, and
  the exact filter is applied to every batch after it. ``IN (SELECT pk FROM dim WHERE ...)``
  semi-joins are read through pyiceberg.
- **a pyiceberg expression**: rows are those pyiceberg's own scan returns (its Arrow
  semantics, e.g. ``NotIn`` keeps NULLs). Iceberg's pruning plans with the expression as it
  is (the files of ``table.scan(row_filter=expr).plan_files()``, never more); the trees are
  asked with a SQL filter that holds on every row pyiceberg keeps (:func:`pruning_sql`),
  never with a narrower one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg import expressions as E
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.table import DataScan, FileScanTask, Table
from pyiceberg.typedef import EMPTY_DICT, Properties
from pyiceberg.types import DoubleType, FloatType
from sqlglot import exp

from . import settings
from .expr import TableFilter
from .expr.iceberg import to_pyiceberg
from .planner.keysets import dimension_keys
from .planner.pyiceberg_sql import pyiceberg_to_sql
from .planner.scan import ExplainRecord, ScanPlan, plan_scan, table_filter, with_dim_keys

__all__ = ["PandoDataScan", "pruning_sql", "scan"]

RowFilter = str | BooleanExpression
ALWAYS_TRUE = AlwaysTrue()


def scan(table: Table, row_filter: RowFilter = "TRUE", selected_fields: tuple[str, ...] = ("*",),
         case_sensitive: bool = True, snapshot_id: int | None = None, options: Properties = EMPTY_DICT,
         limit: int | None = None, use_layout: bool = True) -> PandoDataScan:
    """A scan of ``table`` like ``table.scan(...)``, planned with the table's Pando layout.

    ``row_filter``: Spark SQL text (``"a < 5 AND s LIKE 'x%'"``) or a pyiceberg expression, read
    with Spark's semantics under the default settings: session time zone UTC (a timestamp without
    an offset is UTC), ANSI mode off (INT arithmetic wraps).
    ``options``: pyiceberg's scan options, and the planning settings for this scan as
    ``pando.<name>`` (``{"pando.joinPruning.maxDimensionRows": "0"}``; docs/CONFIGURATION.md),
    which win over the environment.
    ``use_layout=False`` plans without the trees (the same rows; for comparisons)."""
    if not isinstance(table, Table):
        raise TypeError(f"pando_iceberg.scan: 'table' must be a pyiceberg Table (catalog.load_table('db.t')), "
                        f"got {type(table).__name__}")
    if not isinstance(row_filter, (str, BooleanExpression)):
        raise TypeError(f"pando_iceberg.scan: 'row_filter' must be SQL text or a pyiceberg BooleanExpression, "
                        f"got {type(row_filter).__name__}")
    if isinstance(selected_fields, str) or not all(isinstance(f, str) for f in selected_fields):
        raise TypeError(f"pando_iceberg.scan: 'selected_fields' must be a tuple of column names, "
                        f"got {selected_fields!r}")
    if snapshot_id is not None and table.metadata.snapshot_by_id(snapshot_id) is None:
        known = ", ".join(str(s.snapshot_id) for s in table.metadata.snapshots) or "none"
        raise ValueError(f"pando_iceberg.scan: table {'.'.join(table.name())} has no snapshot {snapshot_id}; "
                         f"its snapshots: {known}")
    settings.of_options(options).read_all()  # an unknown pando.* option or a bad value fails here
    return PandoDataScan(table.metadata, table.io, row_filter=_reader_filter(table, row_filter),
                         selected_fields=tuple(selected_fields), case_sensitive=case_sensitive,
                         snapshot_id=snapshot_id, options=options, limit=limit, catalog=table.catalog,
                         table_identifier=table.name(), pando_filter=row_filter, table=table, use_layout=use_layout)


def _reader_filter(table: Table, pando_filter: RowFilter) -> BooleanExpression:
    """What pyiceberg's reader applies: the expression itself, or one implied by the SQL text
    (without float comparisons: see ``expr.iceberg``)."""
    if isinstance(pando_filter, BooleanExpression):
        return pando_filter
    return to_pyiceberg(table_filter(table, pando_filter), table.schema(), float_bounds=False)


class PandoDataScan(DataScan):
    """A ``DataScan`` that plans with the Pando trees; build it with :func:`scan`.

    ``pando_filter`` is the filter as given (SQL text or a pyiceberg expression); ``row_filter``
    is what pyiceberg's reader applies (the same expression, or one implied by the SQL)."""

    def __init__(self, table_metadata: Any, io: Any, row_filter: RowFilter = ALWAYS_TRUE,
                 selected_fields: tuple[str, ...] = ("*",), case_sensitive: bool = True,
                 snapshot_id: int | None = None, options: Properties = EMPTY_DICT, limit: int | None = None,
                 catalog: Any = None, table_identifier: Any = None, *, pando_filter: RowFilter = "TRUE",
                 table: Table, use_layout: bool = True):
        super().__init__(table_metadata, io, row_filter=row_filter, selected_fields=selected_fields,
                         case_sensitive=case_sensitive, snapshot_id=snapshot_id, options=options, limit=limit,
                         catalog=catalog, table_identifier=table_identifier)
        self.pando_filter = pando_filter
        self.table = table
        self.use_layout = use_layout
        self._plan: ScanPlan | None = None

    # ---- planning ---------------------------------------------------------------------------

    def plan(self) -> ScanPlan:
        """The Pando plan (planned once per scan object; ``update``/``filter`` make a new one)."""
        if self._plan is None:
            with settings.using(settings.of_options(self.options)):
                self._plan = self._planned()
        return self._plan

    def _planned(self) -> ScanPlan:
        given = self.pando_filter
        if isinstance(given, str):
            return plan_scan(self.table, given, snapshot_id=self.snapshot_id, use_layout=self.use_layout,
                             limit=self.limit)
        return plan_scan(self.table, pruning_sql(given, self.table), snapshot_id=self.snapshot_id,
                         use_layout=self.use_layout, iceberg_filter=given, case_sensitive=self.case_sensitive,
                         limit=self.limit)

    def plan_files(self) -> Iterable[FileScanTask]:
        return list(self.plan().tasks)

    def explain(self) -> ExplainRecord:
        """Files, bytes and rows after each planning stage, per tree, and any fallback reason."""
        return self.plan().explain

    def filter(self, expr: RowFilter) -> PandoDataScan:
        """This scan AND ``expr``. Two pyiceberg expressions stay one; with SQL text on either
        side the conjunction is SQL (a pyiceberg expression taken as its SQL translation)."""
        if isinstance(self.pando_filter, BooleanExpression) and isinstance(expr, BooleanExpression):
            combined: RowFilter = E.And(self.pando_filter, expr)
        else:
            schema = self.table.schema()
            combined = f"({_as_sql(self.pando_filter, schema)}) AND ({_as_sql(expr, schema)})"
        return self.update(pando_filter=combined, row_filter=_reader_filter(self.table, combined))

    # ---- reading (SQL text: the exact filter after pyiceberg's implied one) ------------------

    def _exact_filter(self) -> TableFilter | None:
        """The SQL filter applied to each batch; None when pyiceberg's reader is already exact."""
        if not isinstance(self.pando_filter, str):
            return None
        tf = self.plan().filter
        if tf.is_true_expr() and not tf.joins:
            return None
        catalog = self.table.catalog
        if tf.joins and catalog is None:
            raise ValueError(f"table {'.'.join(self.table.name())} has no catalog to read the dimension tables of "
                             f"{tf.to_sql()!r} from")
        keyed: TableFilter = with_dim_keys(tf, lambda j: dimension_keys(catalog, j, row_limit=2**62).keys)
        return keyed

    def _batches(self, tf: TableFilter | None, names: list[str], dictionary_columns: tuple[str, ...],
                 limit: int | None) -> Iterator[pa.RecordBatch]:
        """The plan's rows satisfying ``row_filter`` and ``tf`` (None: no residual), columns
        ``names``, at most ``limit`` rows."""
        schema = self.update(selected_fields=("*",)).projection()  # the scanned snapshot's schema
        wanted = {c.lower() for c in _filter_columns(tf)} | {n.lower() for n in names}
        read = schema.select(*[f.name for f in schema.fields if f.name.lower() in wanted] or [schema.fields[0].name],
                             case_sensitive=True)
        left = limit
        for batch in ArrowScan(self.table_metadata, self.io, read, self.row_filter, self.case_sensitive, None,
                               dictionary_columns=dictionary_columns).to_record_batches(self.plan_files()):
            if tf is not None:
                mask = tf.evaluate(batch) if not tf.is_true_expr() else np.ones(batch.num_rows, dtype=bool)
                for j in tf.joins:
                    mask &= _in_keys(batch.column(j.column), j.dim_keys)
                batch = batch.filter(pa.array(mask, pa.bool_()))
            out = batch.select(names)
            if left is not None:
                out = out.slice(0, left)
                left -= out.num_rows
            if out.num_rows:
                yield out
            if left == 0:
                return

    def to_arrow_batch_reader(self, dictionary_columns: tuple[str, ...] = ()) -> pa.RecordBatchReader:
        tf = self._exact_filter()
        if tf is None:
            return super().to_arrow_batch_reader(dictionary_columns)
        target = schema_to_pyarrow(self.projection())
        batches = self._batches(tf, list(target.names), dictionary_columns, self.limit)
        first = next(batches, None)
        if first is None:
            return pa.RecordBatchReader.from_batches(target, iter([]))
        if dictionary_columns:  # keep the dictionary types Arrow produced (as pyiceberg does)
            target = first.schema
        return pa.RecordBatchReader.from_batches(target, _chain(first, batches, target))

    def to_arrow(self, dictionary_columns: tuple[str, ...] = ()) -> pa.Table:
        tf = self._exact_filter()
        if tf is None:
            return super().to_arrow(dictionary_columns)
        # as pyiceberg's ArrowScan.to_table: batches may differ in large_ types, so no cast
        projected = self.projection()
        tables = [pa.Table.from_batches([b]) for b in self._batches(tf, [f.name for f in projected.fields],
                                                                      dictionary_columns, self.limit)]
        if not tables:
            return schema_to_pyarrow(projected, include_field_ids=False).empty_table()
        return pa.concat_tables(tables, promote_options="permissive")

    def count(self) -> int:
        """Rows of the scan (``limit`` ignored, as pyiceberg does). pyiceberg's own ``count``
        trusts each task's residual, which here is the residual of the planning filter, so
        files are counted from metadata only when nothing filters their rows."""
        if self.limit is not None:  # its plan may hold only the files the LIMIT needs
            return self.update(limit=None).count()
        tf = self._exact_filter()
        if tf is None and self.row_filter == AlwaysTrue():
            tasks = list(self.plan_files())
            if not any(t.delete_files for t in tasks):
                return sum(int(t.file.record_count) for t in tasks)
        return sum(b.num_rows for b in self._batches(tf, [], (), None))  # the filter's columns only


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    yield first if first.schema == schema else first.cast(schema)
    for b in rest:
        yield b if b.schema == schema else b.cast(schema)


def _filter_columns(tf: TableFilter | None) -> set[str]:
    if tf is None:
        return set()
    cols = {c.name for e in tf.conjuncts() for c in e.find_all(exp.Column)}
    return cols | {j.column for j in tf.joins}


def _in_keys(column: pa.ChunkedArray | pa.Array, keys: Any) -> np.ndarray:
    """Vectorized ``column IN keys`` (NULL → False); keys a roaring bitmap or an array."""
    values = np.asarray(keys.to_array() if hasattr(keys, "to_array") else keys)
    value_set = pa.array(values).cast(column.type)
    return np.asarray(pc.fill_null(pc.is_in(column, value_set=value_set), False), dtype=bool)


def _as_sql(flt: RowFilter, schema: Any) -> str:
    return flt if isinstance(flt, str) else pyiceberg_to_sql(flt, schema)


# ---- a pyiceberg expression → a SQL filter true on every row pyiceberg's reader keeps ---------
#
# pyiceberg evaluates its expressions on Arrow (io/pyarrow.py, _ConvertToArrowExpression):
# comparisons are Kleene three-valued (NULL → NULL) and false for NaN except `!=`; `isin` is
# two-valued (NULL → False), so `NotIn` and `Not(In)` keep NULL rows; `~` is Kleene. Spark SQL
# (the trees' semantics) orders NaN above every number and is three-valued everywhere. So each
# node is translated twice: T covers the rows where pyiceberg says TRUE, F the rows where it
# says FALSE; Not swaps them, And/Or combine them. Anything unrecognised is TRUE on both sides.

_ORDER = {E.LessThan: E.GreaterThanOrEqual, E.LessThanOrEqual: E.GreaterThan,
          E.GreaterThan: E.LessThanOrEqual, E.GreaterThanOrEqual: E.LessThan}


def pruning_sql(expr: BooleanExpression, table: Table) -> str:
    """Spark SQL that holds on every row pyiceberg's reader keeps for ``expr`` (a superset)."""
    floats = {f.name.lower() for f in table.schema().fields if isinstance(f.field_type, (FloatType, DoubleType))}
    return _sides(expr, floats, table.schema())[0]


def _sides(e: BooleanExpression, floats: set[str], schema: Any) -> tuple[str, str]:
    if isinstance(e, E.AlwaysTrue):
        return "TRUE", "FALSE"
    if isinstance(e, E.AlwaysFalse):
        return "FALSE", "TRUE"
    if isinstance(e, E.Not):
        t, f = _sides(e.child, floats, schema)
        return f, t
    if isinstance(e, (E.And, E.Or)):
        (lt, lf), (rt, rf) = _sides(e.left, floats, schema), _sides(e.right, floats, schema)
        if isinstance(e, E.And):
            return f"({lt}) AND ({rt})", f"({lf}) OR ({rf})"
        return f"({lt}) OR ({rt})", f"({lf}) AND ({rf})"
    try:
        return _atom_sides(e, floats, schema)
    except Exception:  # a literal or node the SQL translation does not take: no claim
        return "TRUE", "TRUE"


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _atom_sides(e: BooleanExpression, floats: set[str], schema: Any) -> tuple[str, str]:
    P: Any = E  # pyiceberg's predicates take positional arguments (pydantic); their stubs say keywords only
    term = getattr(e, "term", None)
    if term is None:
        return "TRUE", "TRUE"
    name = term.name if hasattr(term, "name") else term.ref().field.name
    def sql(expr: BooleanExpression) -> str:
        return pyiceberg_to_sql(expr, schema)

    lits = [lit.value for lit in getattr(e, "literals", ())] + ([e.literal.value] if hasattr(e, "literal") else [])
    if any(_is_nan(v) for v in lits):
        return "TRUE", "TRUE"
    null, nan = sql(P.IsNull(name)), sql(P.IsNaN(name))
    if isinstance(e, E.EqualTo):
        return sql(e), sql(P.NotEqualTo(name, e.literal))
    if isinstance(e, E.NotEqualTo):
        return sql(e), sql(P.EqualTo(name, e.literal))
    for cls, negated in _ORDER.items():
        if isinstance(e, cls):
            false = sql(negated(name, e.literal))
            return sql(e), f"({false}) OR ({nan})" if name.lower() in floats else false
    if isinstance(e, E.In):
        return sql(e), f"({null}) OR ({sql(P.NotIn(name, e.literals))})"
    if isinstance(e, E.NotIn):
        return f"({null}) OR ({sql(e)})", sql(P.In(name, e.literals))
    if isinstance(e, (E.IsNull, E.NotNull)):
        other = P.NotNull(name) if isinstance(e, E.IsNull) else P.IsNull(name)
        return sql(e), sql(other)
    if isinstance(e, E.IsNaN):
        return nan, sql(P.NotNaN(name))
    if isinstance(e, E.NotNaN):
        return sql(e), nan
    if isinstance(e, E.StartsWith):
        return sql(e), sql(P.NotStartsWith(name, e.literal))
    if isinstance(e, E.NotStartsWith):
        return sql(e), sql(P.StartsWith(name, e.literal))
    return "TRUE", "TRUE"
