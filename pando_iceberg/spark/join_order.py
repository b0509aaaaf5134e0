"""Which table Spark joins each base table with first, and Spark's size estimate of a dimension's
scan: what tells whether a row filter (``planner.row_filters.row_filters``) would only repeat a join the
query's own plan makes anyway.

A row filter semi-joins a table's rows with a dimension's keys before Spark's joins. That pays when
the table's rows would otherwise meet other joins, an aggregate or a shuffle first (TPC-H Q7, Q17).
It is pure extra work when Spark's plan already joins the table first with the dimension alone as a
broadcast hash join: the same hash probe on the same keys, in the same place (Q8, Q9 and Q19 at SF
1, measured 5–25 % slower with the row filter).

- **Join order.** Spark's optimizer orders a SELECT's inner joins with ``ReorderJoin`` (no cost-based
  reordering by default): the FROM list's first input, then repeatedly the first remaining input
  that a join condition connects to what is joined so far (a condition over one side alone does not
  count), else the next input. Only the first two inputs are joined with one table alone; every
  later input meets the join of several. A condition that every branch of an OR holds counts (Spark
  factors it out of the OR: Q19's ``p_partkey = l_partkey``).
- **Broadcast.** Spark broadcasts a side of an inner join whose estimated size is at most
  ``spark.sql.autoBroadcastJoinThreshold``. An Iceberg scan's estimate is its rows times the default
  sizes of the columns it reads (``SparkScan.estimateStatistics``, ``SparkSchemaUtil.estimateSize``);
  a filter above it keeps that estimate and a projection lowers it. The estimate here takes the
  dimension's rows in its current snapshot and every column of it the query names: never below
  Spark's, so a join it calls broadcast is broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from ..expr.filters import split_conjuncts
from ..planner.row_filters import constrains
from ..workload import has_subquery, qualify_query


@dataclass(frozen=True)
class FirstJoin:
    """The table an occurrence is joined with first, and the column equalities between the two
    (this table's column, the partner's column), lower-case."""

    partner: str
    columns: frozenset[tuple[str, str]]


def first_joins(tree: exp.Expression, flat_to_key: dict[str, str]) -> dict[str, list[FirstJoin | None]]:
    """For each base table of ``tree`` (qualified, tables named as ``workload.qualify_query`` names
    them; ``flat_to_key`` maps those names back), one entry per occurrence: the base table Spark
    joins it with first, or None when it first meets a join of several inputs, or when that cannot
    be told from the SQL (outer, semi or anti joins, USING, lateral sources, subquery predicates,
    correlated columns in the scope)."""
    out: dict[str, list[FirstJoin | None]] = {}
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        tables = {alias: flat_to_key[src.name] for alias, src in scope.sources.items()
                  if isinstance(src, exp.Table) and src.name in flat_to_key}
        pair = _first_pair(select, set(scope.sources))
        for alias, table in tables.items():
            found = None
            if pair is not None and alias in pair[:2]:
                other = pair[1] if alias == pair[0] else pair[0]
                if other in tables:
                    found = FirstJoin(tables[other], frozenset((a[1], b[1]) if a[0] == alias else (b[1], a[1])
                                                               for a, b in pair[2]))
            out.setdefault(table, []).append(found)
    return out


def _first_pair(select: exp.Select, sources: set[str]) -> tuple[str, str, set] | None:
    """The two inputs ReorderJoin joins first, with the equalities between them ((alias, column)
    pairs); None when the scope is not a plain inner join of known inputs."""
    from_ = select.args.get("from_") or select.args.get("from")  # "from_" since sqlglot 28
    if from_ is None:
        return None
    joins = select.args.get("joins") or []
    inputs = [from_.this] + [j.this for j in joins]
    aliases = [i.alias_or_name for i in inputs]
    if len(inputs) < 2 or any(not isinstance(i, (exp.Table, exp.Subquery)) or a not in sources
                              for i, a in zip(inputs, aliases)):
        return None
    conditions = []
    for j in joins:
        if (j.side or "").upper() or (j.kind or "").upper() not in ("", "INNER", "CROSS") \
                or j.args.get("using") or j.args.get("method"):
            return None
        if j.args.get("on") is not None:
            conditions += split_conjuncts(j.args["on"])
    where = select.args.get("where")
    if where is not None:
        conditions += split_conjuncts(where.this)
    refs = []
    for c in conditions:
        if has_subquery(c):
            return None
        r = {col.table for col in c.find_all(exp.Column)}
        if not r <= set(aliases):  # a correlated column, or one Spark resolves elsewhere
            return None
        refs.append(r)
    joined = {aliases[0]}
    partner = next((a for a in aliases[1:] if any(r and r <= joined | {a} and not r <= joined and not r <= {a}
                                                  for r in refs)), aliases[1])
    pair = {aliases[0], partner}
    equal = {e for c in conditions for e in _equalities(c) if {e[0][0], e[1][0]} == pair}
    return aliases[0], partner, equal


def _equalities(c: exp.Expression) -> set[tuple[tuple[str, str], tuple[str, str]]]:
    """``column = column`` terms ``c`` holds: its own, or those every branch of an OR holds."""
    if isinstance(c, exp.Paren):
        return _equalities(c.this)
    if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column):
        a = (c.this.table, c.this.name.lower())
        b = (c.expression.table, c.expression.name.lower())
        return {(a, b), (b, a)}
    if isinstance(c, exp.Or):
        left, right = _equalities(c.this), _equalities(c.expression)
        return left & right
    if isinstance(c, exp.And):
        return _equalities(c.this) | _equalities(c.expression)
    return set()


def columns_read(tree: exp.Expression, flat_to_key: dict[str, str]) -> dict[str, set[str]]:
    """Per base table, every column name the query reads under any of the table's aliases (a
    superset of what Spark's scan of it reads), lower-case."""
    aliases: dict[str, set[str]] = {}
    for t in tree.find_all(exp.Table):
        if t.name in flat_to_key:
            aliases.setdefault(t.alias_or_name, set()).add(flat_to_key[t.name])
    out: dict[str, set[str]] = {}
    for col in tree.find_all(exp.Column):
        for table in aliases.get(col.table, ()):
            out.setdefault(table, set()).add(col.name.lower())
    return out


def spark_default_size(t: pa.DataType) -> int:
    """Bytes Spark's size estimate counts for a value of the Arrow type of a Spark column
    (``DataType.defaultSize``)."""
    if pa.types.is_boolean(t) or pa.types.is_int8(t):
        return 1
    if pa.types.is_int16(t):
        return 2
    if pa.types.is_int32(t) or pa.types.is_float32(t) or pa.types.is_date32(t):
        return 4
    if pa.types.is_int64(t) or pa.types.is_float64(t) or pa.types.is_timestamp(t) or pa.types.is_date64(t):
        return 8
    if pa.types.is_decimal(t):
        return 8 if t.precision <= 18 else 16
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return 20
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return spark_default_size(t.value_type)
    if pa.types.is_map(t):
        return spark_default_size(t.key_type) + spark_default_size(t.item_type)
    if pa.types.is_struct(t):
        return sum(spark_default_size(t.field(i).type) for i in range(t.num_fields))
    return 100  # binary (Spark's 100) and anything else: counted large, never small


def scan_size_estimate(rows: int, schema: pa.Schema, columns: set[str]) -> int:
    """An upper bound of Spark's size estimate of a scan of ``rows`` rows reading ``columns``."""
    return rows * sum(spark_default_size(f.type) for f in schema if f.name.lower() in columns)


class RepeatedJoins:
    """One query's answer to "does this row filter repeat a broadcast join Spark makes first?",
    read lazily: the query's qualified shape (``workload.qualify_query``, cached per template) is
    read only when a row filter is in question, and Spark's broadcast threshold is asked once."""

    def __init__(self, spark: Any, tree: exp.Expression, schemas: dict[str, pa.Schema],
                 rows: Any) -> None:  # rows: table name -> rows of its current snapshot
        self.spark = spark
        self.tree = tree
        self.schemas = schemas
        self.rows = rows
        self._first: dict[str, list[FirstJoin | None]] | None = None
        self._columns: dict[str, set[str]] = {}
        self._threshold: int | None = None

    def _read(self) -> None:
        try:
            qualified, flat_to_key = qualify_query(self.tree, self.schemas, shape_only=True)  # only read
        except Exception:  # the parser read it before; a query it cannot qualify keeps its row filters
            self._first = {}
            return
        self._first = first_joins(qualified, flat_to_key)
        self._columns = columns_read(qualified, flat_to_key)

    def threshold(self) -> int:
        if self._threshold is None:
            self._threshold = int(self.spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
        return self._threshold

    def why(self, table: str, join: Any) -> str | None:
        """Why the row filter of ``join`` (a JoinFilter of ``table``) repeats Spark's own first,
        broadcast join with the dimension; None when it may not. The dimension's filter must be
        its own (no join of its own that constrains: a chain is applied later in Spark's plan)."""
        if any(constrains(j) for j in join.dim_filter.joins) or join.dim_table not in self.schemas:
            return None
        if self._first is None:
            self._read()
        assert self._first is not None
        first = self._first.get(table)
        if not first or any(f is None or f.partner != join.dim_table or (join.column, join.dim_pk) not in f.columns
                            for f in first):
            return None
        rows = int(self.rows(join.dim_table))
        size = scan_size_estimate(rows, self.schemas[join.dim_table], self._columns.get(join.dim_table, set()))
        limit = self.threshold()
        if limit < 0 or size > limit:
            return None
        return (f"Spark joins it first with {join.dim_table} alone, broadcast ({rows:,} rows, at most "
                f"{size:,} bytes estimated, threshold {limit:,}): a semi-join would repeat that join")


__all__ = ["FirstJoin", "RepeatedJoins", "columns_read", "first_joins", "scan_size_estimate", "spark_default_size"]
