"""SQL workload → per-table filters, candidate cuts and join-induced cuts (§6.1, §7).

Pipeline per statement (sqlglot's optimizer does the name resolution):
1. parse; rename tables to their schema keys; `qualify` (every column gets its source);
   `merge_subqueries` (CTEs and derived tables that are plain filters are inlined, so
   `WITH x AS (SELECT .. FROM t WHERE p) SELECT .. FROM x WHERE q` reads t with p AND q).
2. for every scope (root, subqueries, derived tables): split WHERE and inner-join ON into
   conjuncts; a conjunct over one base-table occurrence is that occurrence's filter (an OR
   group over one table stays one predicate); `a.x = b.y` between two inner-joined
   occurrences is a join edge; anything else is reported in `Workload.unsupported`.
3. FK→PK edges (the dimension side's column is its primary key) become JoinFilters of the
   fact side, nested along chains (lineitem → orders → customer → nation). A primary key is a
   declared Iceberg identifier field; a table without one (plain CTAS, most lakehouses) asks
   the ``unique`` oracle (``(table, column) -> bool``, checked on the data by the caller). With
   no oracle, an equi-join to an undeclared table is kept in both directions: for an inner
   join each direction is a sound semi-join, and ``Workload.join_induced_cuts`` makes a
   literal cut only where ``key_provider.is_unique`` finds the dimension column unique.
4. a correlated ``[NOT] EXISTS (SELECT .. FROM t WHERE t.x = o.y AND ..)`` conjunct of a WHERE
   (TPC-H Q4, Q22), or a comparison with such a scalar subquery (Q17), is an edge from the
   subquery's occurrence t to the outer occurrence o, one direction only: the outer rows the
   query keeps all pass o's filter, and for each of those the subquery sees every t row
   with ``x = y``, so t's other rows can be skipped whatever the subquery computes
   (``t.x IN (SELECT y FROM o WHERE ..)``); and to every occurrence o is equi-joined with on y
   (Q21: ``l2.l_orderkey = l1.l_orderkey = o_orderkey``).
5. a table read several times in one query (self-joins, subqueries) gets the OR of its
   occurrences' filters, AND the join filters all of them have: the query reads the rows
   any occurrence needs.
Outer joins (:func:`join_scopes`): a conjunct constrains only the occurrences that every row
it is evaluated on holds a real row of (WHERE and inner ON above an outer join: its preserved
side; an outer join's ON: the null-supplying input's own non-nullable tables); no JoinFilter is
made for or through an occurrence under an outer join. Parenthesised joins are read as the
trees they are (:func:`_flatten_join_groups`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from pando_iceberg.expr import Cut, CutOrigin, JoinFilter, LiteralCut, PandoExprError, TableFilter
from pando_iceberg.expr import keys as keyset
from pando_iceberg.expr.filters import split_conjuncts  # one definition of "split an AND"
from pando_iceberg.planner.caches import SHAPES

from ..exceptions import WorkloadError


class PandoWorkloadError(WorkloadError, ValueError):
    """A workload statement cannot be parsed."""


@dataclass(frozen=True)
class UnsupportedPredicate:
    query_sql: str
    predicate_sql: str
    reason: str


@dataclass(frozen=True)
class JoinEdge:
    """An inner equi-join `table.column = dim_table.dim_column` seen in a query."""

    table: str
    column: str
    dim_table: str
    dim_column: str


@dataclass
class WorkloadQuery:
    sql: str
    weight: float
    filters: dict[str, TableFilter]
    tables: list[str]
    join_edges: list[JoinEdge] = field(default_factory=list)
    # One filter per read of a table (self-joins, subqueries); `filters` is their OR.
    occurrence_filters: dict[str, list[TableFilter]] = field(default_factory=dict)

    def table_filters(self, table: str) -> list[TableFilter]:
        return self.occurrence_filters.get(table) or ([self.filters[table]] if table in self.filters else [])


KeyProvider = Callable[[str, str, TableFilter], Any]
UniquenessOracle = Callable[[str, str], bool]  # (table, column) -> the column is unique and not NULL


class Workload:
    def __init__(self, queries: list[WorkloadQuery], unsupported: list[UnsupportedPredicate],
                 schemas: dict[str, pa.Schema], primary_keys: dict[str, list[str]]):
        self.queries = queries
        self.unsupported = unsupported
        self.schemas = schemas
        self.primary_keys = primary_keys

    def _table_key(self, table: str) -> str:
        return _resolve_table(table, self.schemas)

    def candidate_cuts(self, table: str) -> list[Cut]:
        """§6.1: each query's predicate on `table` decomposed into simple predicates (no AND;
        an OR group over the table stays one cut), deduplicated by key."""
        key = self._table_key(table)
        out: dict[str, Cut] = {}
        for q in self.queries:
            for f in q.table_filters(key):
                for cut in f.candidate_cuts():
                    out.setdefault(cut.key, cut)
        return list(out.values())

    def join_induced_cuts(self, table: str, key_provider: KeyProvider,
                          filters: Iterable[TableFilter] | None = None) -> list[LiteralCut]:
        """§6.1/§7: the dimension predicates of the queries' FK→PK joins into `table`, one
        literal cut per atom of each dimension filter (nested atoms reach along chains).
        ``filters``: the table's filters to take them from instead of the queries' (e.g. the
        synthetic draws of ``templates.expected_workload``)."""
        key = self._table_key(table)
        if filters is None:
            filters = [f for q in self.queries for f in q.table_filters(key)]
        seen: dict[str, tuple[str, str, str, TableFilter]] = {}
        for f in filters:
            for j in f.joins:
                for atom in dimension_atoms(j.dim_filter):
                    ident = f"{j.column}|{j.dim_table}|{j.dim_pk}|{atom.to_sql()}"
                    seen.setdefault(ident, (j.column, j.dim_table, j.dim_pk, atom))
        cuts: dict[str, LiteralCut] = {}
        for column, dim, pk, atom in seen.values():
            basis = self.key_basis(dim, pk, key_provider)
            if basis is None:
                continue
            keys = key_provider(dim, pk, atom)
            cut = LiteralCut(column, keys, CutOrigin(dim, pk, atom.to_sql(), None, basis))
            cuts.setdefault(cut.key, cut)
        return list(cuts.values())

    def key_basis(self, dim: str, column: str, key_provider: Any) -> str | None:
        """Why `dim.column` is a primary key: ``"declared"`` (Iceberg identifier field; declared
        keys win), ``"unique"`` (no declaration; the provider's ``is_unique`` checked the data),
        or None (not a key: no join-induced cut through it)."""
        declared = self.primary_keys.get(dim)
        if declared:
            return "declared" if [c.lower() for c in declared] == [column.lower()] else None
        check = getattr(key_provider, "is_unique", None)
        return "unique" if check is not None and check(dim, column) else None

    def join_graph(self) -> list[JoinEdge]:
        edges: dict[JoinEdge, None] = {}
        for q in self.queries:
            for e in q.join_edges:
                edges.setdefault(e)
        return list(edges)

    def tables(self) -> list[str]:
        return sorted({t for q in self.queries for t in q.tables})


def dimension_atoms(f: TableFilter) -> list[TableFilter]:
    """The atoms of a dimension filter, each as a filter of its own: its simple predicates,
    and (multi-hop) each atom of every nested join as `col IN (SELECT pk FROM dim2 WHERE atom)`."""
    out = [TableFilter(cut.expr, f.schema, table=f.table) for cut in f.candidate_cuts()]
    for j in f.joins:
        for inner in dimension_atoms(j.dim_filter):
            out.append(TableFilter(None, f.schema, [JoinFilter(j.column, j.dim_table, j.dim_pk, inner)], f.table))
    return out


# ---------------------------------------------------------------- key providers


class ArrowKeyProvider:
    """Key sets computed on in-memory Arrow tables (tests, demos, samples). The Spark
    pipeline supplies its own provider that runs SQL."""

    def __init__(self, tables: dict[str, pa.Table]):
        self.tables = tables

    def _table(self, name: str) -> pa.Table:
        key = _resolve_table(name, {k: None for k in self.tables})
        return self.tables[key]

    def rows(self, dim_table: str, dim_filter: TableFilter) -> np.ndarray:
        t = self._table(dim_table)
        mask = dim_filter.evaluate(t)
        for j in dim_filter.joins:  # multi-hop: recurse into the next dimension
            inner = self(j.dim_table, j.dim_pk, j.dim_filter)
            names = {n.lower(): n for n in t.schema.names}
            mask &= keyset.member_mask(t.column(names[j.column]), keyset.normalize_keys(inner))
        return mask

    def __call__(self, dim_table: str, pk_column: str, dim_filter: TableFilter) -> np.ndarray:
        t = self._table(dim_table)
        names = {n.lower(): n for n in t.schema.names}
        col = t.column(names[pk_column.lower()])
        return col.filter(pa.array(self.rows(dim_table, dim_filter))).drop_null().to_numpy(zero_copy_only=False)

    def is_unique(self, table: str, column: str) -> bool:
        t = self._table(table)
        names = {n.lower(): n for n in t.schema.names}
        col = t.column(names[column.lower()])
        return col.null_count == 0 and len(col.unique()) == len(col)


def arrow_key_provider(tables: dict[str, pa.Table]) -> ArrowKeyProvider:
    return ArrowKeyProvider(tables)


# ---------------------------------------------------------------- parsing


def _resolve_table(name: str, schemas: dict[str, Any]) -> str:
    """The schema key for a table name: exact (case-insensitive), else by last name part
    when unambiguous."""
    low = name.lower()
    for key in schemas:
        if key.lower() == low:
            return key
    last = low.split(".")[-1]
    matches = [k for k in schemas if k.lower().split(".")[-1] == last]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise KeyError(name)
    raise PandoWorkloadError(f"table name {name!r} is ambiguous among {matches}")


def split_statements(text: str) -> list[str]:
    """Split on `;` outside quotes and comments."""
    out, buf, i, n = [], [], 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
            buf.append(ch)
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            buf.append(" ")
            continue
        elif ch == ";":
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    out.append("".join(buf))
    return [s.strip() for s in out if s.strip()]


QUERY_LOG_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv")
WORKLOAD_SOURCE_RULES = (
    "how a workload string is read: an existing directory → its .sql files; an existing file → its SQL "
    f"statements ({', '.join(QUERY_LOG_SUFFIXES)}: a query log); one line ending in .sql or a query-log suffix, or "
    "one line without spaces that contains '/', is a path (an error if it does not exist); anything else is SQL text")


def classify_workload_source(source: str) -> str:
    """What a workload string is: ``"directory"``, ``"sql-file"``, ``"query-log"`` or ``"sql-text"``.

    A string that looks like a path but names nothing raises :class:`PandoWorkloadError` (it
    used to be parsed as SQL and fail with a parser message about a ``Div`` node); so does a
    directory without .sql files."""
    text = str(source)
    one_line = "\n" not in text and len(text) < 4096
    if one_line and os.path.isdir(text):
        if not any(f.endswith(".sql") for f in os.listdir(text)):
            raise PandoWorkloadError(f"workload directory {text!r} has no .sql files ({WORKLOAD_SOURCE_RULES})")
        return "directory"
    if one_line and os.path.isfile(text):
        return "query-log" if text.lower().endswith(QUERY_LOG_SUFFIXES) else "sql-file"
    stripped = text.strip()
    if one_line and stripped and (stripped.lower().endswith((".sql",) + QUERY_LOG_SUFFIXES)
                                  or ("/" in stripped and not any(c.isspace() for c in stripped))):
        raise PandoWorkloadError(f"workload {text!r}: no such file or directory ({WORKLOAD_SOURCE_RULES})")
    return "sql-text"


def _read_sources(sources: str | os.PathLike | Iterable[str | os.PathLike | tuple[str, float]]
                  ) -> list[tuple[str, float]]:
    """(text, weight) per source; a ``(sql, weight)`` pair weighs each of its statements by weight."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    texts = []
    for src in sources:
        weight = 1.0
        if isinstance(src, (tuple, list)):
            src, weight = src
            weight = float(weight)
            if not weight > 0:
                raise PandoWorkloadError(f"query weight must be > 0, got {weight!r} for {str(src)[:80]!r}")
        kind = classify_workload_source(os.fspath(src))
        if isinstance(src, os.PathLike) and kind == "sql-text":
            raise PandoWorkloadError(f"workload {os.fspath(src)!r}: no such file or directory "
                                     f"({WORKLOAD_SOURCE_RULES})")
        if kind == "query-log":
            raise PandoWorkloadError(f"workload {os.fspath(src)!r} is a query log: read it with "
                                     "pando_iceberg.workload.log.read_query_log and pass its (text, weight) pairs")
        paths = ([os.fspath(src)] if kind == "sql-file" else
                 sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".sql"))
                 if kind == "directory" else [])
        for path in paths:
            with open(path, encoding="utf-8") as fh:
                texts.append((fh.read(), weight))
        if kind == "sql-text":
            texts.append((str(src), weight))
    return texts


def _schema_key(qualify_schema: dict[str, Any]) -> tuple:
    """A hashable form of a ``{table: {column: SQL type}}`` mapping (the columns in their order:
    ``*`` expands in it)."""
    return tuple(sorted((t, tuple(cols.items())) for t, cols in qualify_schema.items()))


@functools.lru_cache(maxsize=64)
def _mapping_schema(key: tuple, dialect: str) -> MappingSchema:
    """sqlglot's schema for ``qualify``, built once per set of table schemas: building it
    normalizes every table's every column name (~2 ms per query for TPC-H's eight tables, issue
    16); qualify only reads it (its caches hold normalized names and tables)."""
    return MappingSchema({t: dict(cols) for t, cols in key}, dialect=dialect)


@functools.lru_cache(maxsize=256)
def _sql_columns(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
    """(lower-case name, SQL type) of each column, in order, once per schema."""
    return tuple((f.name.lower(), _arrow_to_sql_type(f.type)) for f in schema)


def _arrow_to_sql_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    return "STRING"


# Literals that qualify reads as positions or names, not values: they stay in a template's shape.
_NOT_VALUES = (exp.Group, exp.Ordered, exp.Distinct, exp.Limit, exp.Offset, exp.Fetch, exp.DataTypeParam)
_HOLE = "pando_value_"


def _value_literals(stmt: exp.Expr) -> list[exp.Literal]:
    """The literals of ``stmt`` that stand only for values (not ``GROUP BY 1``, a LIMIT, a type's
    size or a pivot's column names); none when the statement has placeholders of its own."""
    if stmt.find(exp.Placeholder, exp.Pivot) is not None:
        return []
    return [n for n in stmt.find_all(exp.Literal) if not isinstance(n.parent, _NOT_VALUES)]


def _qualified(stmt: exp.Expr, schemas: dict[str, pa.Schema], qualify_schema: dict[str, Any], dialect: str,
               number: int, shape_only: bool = False) -> exp.Expression:
    """``stmt`` copied, each base table renamed to its flat name (:func:`_flat_name`) under its
    alias, every column qualified by the source it comes from (sqlglot's ``qualify``).

    Qualified once per template: qualification does not look at a literal's value, so the
    statement with its value literals as placeholders (its shape) is qualified and kept (the
    256 most recent shapes per process), and a query of a known shape is a copy of it
    with its own literals put back (tomorrow's queries are today's templates with other
    literals; qualification was ~2 ms of a TPC-H join query's planning, twice with a row filter)."""
    literals = _value_literals(stmt)
    holes = [exp.Placeholder(this=f"{_HOLE}{i}") for i in range(len(literals))]
    for lit, hole in zip(literals, holes):
        lit.replace(hole)
    try:
        schema_key = _schema_key(qualify_schema)
        key = (hash(stmt), len(literals), schema_key, dialect)  # sqlglot's structural hash: identifiers exact
        shape = SHAPES.get(key)
        if shape is None:
            shape = _without_positions(_qualify_shape(stmt.copy(), schemas, schema_key, dialect, number))
            SHAPES.put(key, shape)
    finally:
        for lit, hole in zip(literals, holes):
            hole.replace(lit)
    if shape_only:
        return shape
    tree = shape.copy()
    if literals:
        for hole in list(tree.find_all(exp.Placeholder)):
            lit = literals[int(hole.name[len(_HOLE):])]
            hole.replace(exp.Literal(this=lit.this, is_string=lit.is_string))  # a copy without its position
    return tree


_POSITION = ("line", "col", "start", "end")


def _without_positions(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the parser's source positions dropped from its nodes' meta, in place: a
    copy of a cached shape then deep-copies no per-node dict (they were ~70 % of the
    time of copying a qualified TPC-H query). Positions point into one query's text and mean
    nothing in another query of the shape; other meta (sqlglot's own marks) is kept."""
    for node in tree.walk():
        meta = node._meta  # sqlglot's slot; ``node.meta`` would create an empty dict
        if meta:
            for k in _POSITION:
                meta.pop(k, None)
            if not meta:
                node._meta = None
    return tree


def _qualify_shape(tree: exp.Expr, schemas: dict[str, pa.Schema], schema_key: tuple, dialect: str,
                   number: int) -> exp.Expression:
    """:func:`_qualified`'s work on a tree of its own (renamed and qualified in place)."""
    _flatten_join_groups(tree)  # before the renaming: a table's replacement carries no joins
    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for t in list(tree.find_all(exp.Table)):
        name = ".".join(p.name for p in t.parts)
        if name.lower() in cte_names and not t.args.get("db"):
            continue
        try:
            key = _resolve_table(name, schemas)
        except KeyError:
            raise PandoWorkloadError(f"statement {number}: unknown table {name!r}; known tables: "
                                     f"{', '.join(schemas)}") from None
        alias = t.alias or t.name
        t.replace(exp.Table(this=exp.to_identifier(_flat_name(key)),
                            alias=exp.TableAlias(this=exp.to_identifier(alias))))
    try:
        return _expression(qualify(tree, schema=_mapping_schema(schema_key, dialect),
                                   dialect=dialect, validate_qualify_columns=True, identify=False))
    except sqlglot.errors.SqlglotError as e:
        raise PandoWorkloadError(f"statement {number} cannot be resolved: {e}") from None


# Join meta: how many of the joins that follow this one belong to its right input (a
# parenthesised join, ``d LEFT JOIN (s JOIN f ON ..) ON ..``), set by _flatten_join_groups.
JOIN_GROUP = "pando_join_group"


def _flatten_join_groups(tree: exp.Expr) -> None:
    """Every parenthesised join of ``tree`` (``(s JOIN f ON ..)``, sqlglot: a Subquery or Table
    carrying ``joins``) moved, in place, into its SELECT's join list, so that qualification sees
    every table of the scope; the join that held the group gets :data:`JOIN_GROUP`, the number of
    joins after it that make up its right input, from which :func:`join_scopes` rebuilds the tree.
    A column resolves to the same table as in the nested form (or is ambiguous, an error): the
    flat scope has the same tables and more. An aliased group (``(..) AS y``) is left as it is."""
    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        frm = select.args.get("from_")
        first: list[exp.Join] = []
        if frm is not None and isinstance(frm.this, (exp.Table, exp.Subquery)):
            leaf, first = _expand_group(frm.this)
            if leaf is not frm.this:
                frm.set("this", leaf)
        flat = first + _flatten_joins(joins)
        if len(flat) != len(joins) or first:
            select.set("joins", flat)


def _flatten_joins(joins: list[exp.Join]) -> list[exp.Join]:
    out: list[exp.Join] = []
    for join in joins:
        leaf, group = _expand_group(join.this)
        if group or leaf is not join.this:
            join.set("this", leaf)
        if group:
            join.meta[JOIN_GROUP] = len(group)
        out += [join] + group
    return out


def _expand_group(node: exp.Expression) -> tuple[exp.Expression, list[exp.Join]]:
    """A relation's first table and the joins of its group after it (flattened, recursively);
    ``(node, [])`` for a table or a derived table."""
    own = node.args.get("joins") or []
    if own:
        node.set("joins", None)
    leaf, first = node, list[exp.Join]()
    if isinstance(node, exp.Subquery) and not node.alias and isinstance(node.this, (exp.Table, exp.Subquery)):
        leaf, first = _expand_group(node.this)
    return leaf, first + _flatten_joins(own)


def join_scopes(select: exp.Select) -> tuple[list[tuple[exp.Expression, frozenset[str]]], frozenset[str],
                                              frozenset[str], list[tuple[exp.Expression, str]]]:
    """Which table occurrences (aliases) each conjunct of a SELECT may constrain, by SQL's
    null-supplying rules over its join tree.

    The FROM clause is a join tree: sqlglot's join list read left-deep, a parenthesised join as
    the right input it is (:data:`JOIN_GROUP`). An outer join makes nullable every alias of its
    null-supplying input(s) (LEFT: the right one, RIGHT: the left one, FULL: both). A conjunct
    over alias T is a sound filter of T (T's rows failing it can be skipped) only if every row it
    is evaluated on holds a real row of T:

    - a WHERE conjunct is evaluated on the whole tree, an INNER or CROSS join's ON conjunct on
      that join's result: it may constrain the aliases of that node that no outer join below
      it makes nullable;
    - a LEFT JOIN's ON conjunct that references only its right input filters that input
      (``l LEFT JOIN r ON p(r) AND q`` reads ``r`` as ``(SELECT * FROM r WHERE p)``): it may
      constrain the aliases of the right input that are not nullable within it; RIGHT JOIN
      the same with the left input; a conjunct that references the preserved side, or any
      conjunct of a FULL JOIN's ON, constrains nothing.

    A comma join is read as a CROSS JOIN in the left-deep order (sqlglot does not tell them
    apart; Spark groups ``a, b RIGHT JOIN c`` as ``a, (b RIGHT JOIN c)``): that can only make
    more aliases nullable, never fewer. SEMI and ANTI joins keep the left input (their right one
    is constrained by nothing) and are reported as not modeled. USING and NATURAL joins arrive
    as ON (sqlglot's qualify names a USING column by its leftmost table, which is Spark's column
    wherever that table is not nullable, the only place it is used).

    Returns the conjuncts with the aliases each may constrain, the aliases nullable at the top
    (WHERE), the aliases under some outer join (no JoinFilter is made for or into them), and
    what is not modeled (node, why)."""
    out: list[tuple[exp.Expression, frozenset[str]]] = []
    unmodeled: list[tuple[exp.Expression, str]] = []
    under_outer: set[str] = set()
    joins = select.args.get("joins") or []
    Node = tuple[frozenset[str], frozenset[str]]  # (aliases, those nullable)

    def leaf(node: exp.Expression) -> Node:
        return frozenset({node.alias_or_name}), frozenset()

    def on_conjuncts(join: exp.Join) -> list[exp.Expression]:
        on = join.args.get("on")
        return split_conjuncts(on) if on is not None else []

    def within(c: exp.Expression, aliases: frozenset[str]) -> bool:
        return not has_subquery(c) and {col.table for col in c.find_all(exp.Column)} <= aliases

    def combine(left: Node, join: exp.Join, right: Node) -> Node:
        (la, ln), (ra, rn) = left, right
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if kind in ("SEMI", "ANTI"):
            unmodeled.append((join, f"{kind} join is not modeled"))
            return left  # the left input's rows, none of the right's columns
        if kind not in ("", "INNER", "CROSS", "OUTER") or (kind == "OUTER" and not side):
            unmodeled.append((join, f"{kind} join is not modeled"))
            side = "FULL"  # read as one that constrains nothing
        if side in ("LEFT", "RIGHT", "FULL"):
            under_outer.update(la | ra)
            if side != "FULL":  # the ON filters the null-supplying input before it is joined
                kept, kept_nullable = (ra, rn) if side == "LEFT" else (la, ln)
                out.extend((c, kept - kept_nullable) for c in on_conjuncts(join) if within(c, kept))
            nullable = ln | ra if side == "LEFT" else la | rn if side == "RIGHT" else la | ra
            return la | ra, nullable
        nullable = ln | rn
        out.extend((c, (la | ra) - nullable) for c in on_conjuncts(join))
        return la | ra, nullable

    def fold(left: Node, i: int, stop: int) -> Node:
        while i < stop:
            join = joins[i]
            group = join.meta.get(JOIN_GROUP, 0) if join._meta else 0
            right = fold(leaf(join.this), i + 1, min(stop, i + 1 + group))
            left, i = combine(left, join, right), i + 1 + group
        return left

    frm = select.args.get("from_")
    aliases, nullable = fold(leaf(frm.this), 0, len(joins)) if frm is not None else (frozenset(), frozenset())
    where = select.args.get("where")
    if where is not None:
        out.extend((c, aliases - nullable) for c in split_conjuncts(where.this))
    return out, nullable, frozenset(under_outer), unmodeled


def qualify_query(stmt: exp.Expression, schemas: dict[str, pa.Schema], dialect: str = "spark",
                  shape_only: bool = False) -> tuple[exp.Expression, dict[str, str]]:
    """``stmt`` as the parser reads it before merging derived tables: copied, every column
    qualified by its source's alias, each base table renamed to a flat name; with the map from
    those names back to the keys of ``schemas``. Subqueries and derived tables keep their own
    scopes, as in Spark's plan. ``shape_only``: for a caller that reads the tree's structure and
    never its values or mutates it: the cached qualified shape itself, its value literals
    placeholders (no copy)."""
    parser = _QueryParser(schemas, dialect, None)
    return _qualified(stmt, schemas, parser.qualify_schema, dialect, 1, shape_only), parser.flat_to_key


_FLAT = re.compile(r"[^a-z0-9_]")


def _flat_name(key: str) -> str:
    return "pando_t_" + _FLAT.sub("_", key.lower())


def parse_workload(sources: str | os.PathLike | Iterable[str | os.PathLike | tuple[str, float]],
                   schemas: dict[str, pa.Schema], dialect: str = "spark",
                   primary_keys: dict[str, list[str]] | None = None,
                   unique: UniquenessOracle | None = None) -> Workload:
    """Sources: SQL text or .sql files (each statement weighs 1), or ``(sql, weight)`` pairs
    (e.g. from a query log, ``pando_iceberg.workload.log``). Equal statements are merged and
    their weights added: the weight multiplies the query's term in the cost model.
    ``primary_keys``: declared identifier fields per table (they win); ``unique``: the oracle
    asked for the tables that declare none (module docstring, step 3)."""
    parser = _QueryParser(schemas, dialect, primary_keys, unique)
    merged: dict[str, WorkloadQuery] = {}
    unsupported: list[UnsupportedPredicate] = []
    number = 0
    for text, weight in _read_sources(sources):
        for stmt_text in split_statements(text):
            number += 1
            try:
                stmt = sqlglot.parse_one(stmt_text, read=dialect)
            except sqlglot.errors.SqlglotError as e:
                text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # no terminal colour codes from the parser
                raise PandoWorkloadError(f"statement {number} cannot be parsed: {text}\n{stmt_text[:500]}") from None
            if not isinstance(stmt, (exp.Select, exp.Union, exp.Intersect, exp.Except)) and not (
                    isinstance(stmt, exp.Query)):
                unsupported.append(UnsupportedPredicate(stmt_text, "", f"statement {number} is not a query"))
                continue
            normalized = stmt.sql(dialect=dialect)
            if normalized in merged:  # repeated queries weigh more
                merged[normalized].weight += weight
                continue
            query, problems = parser.parse(stmt, normalized, number)
            query.weight = weight
            unsupported.extend(problems)
            merged[normalized] = query
    return Workload(list(merged.values()), unsupported, schemas, parser.pks)


def parse_query(stmt: exp.Expression, schemas: dict[str, pa.Schema], dialect: str = "spark",
                primary_keys: dict[str, list[str]] | None = None,
                unique: UniquenessOracle | None = None, sql: str | None = None) -> WorkloadQuery:
    """One query already parsed by sqlglot (the planner's own tree, so that planning parses a
    query once), read as :func:`parse_workload` reads a statement; unsupported predicates are
    left out of its filters as there. ``sql``: its text (default: the tree printed again)."""
    if not isinstance(stmt, exp.Query):
        raise PandoWorkloadError(f"not a query: {stmt.sql(dialect=dialect)[:200]}")
    text = sql if sql is not None else stmt.sql(dialect=dialect)
    query, _ = _QueryParser(schemas, dialect, primary_keys, unique).parse(stmt, text, 1, problems_wanted=False)
    return query


@dataclass
class _Occurrence:
    """One base-table occurrence (alias) in one scope."""

    table: str  # schema key
    alias: str
    scope: Scope
    predicates: list[exp.Expression] = field(default_factory=list)
    nullable: bool = False  # made nullable by an outer join of its scope (at the WHERE)
    outer: bool = False  # under an outer join of its scope (no JoinFilters for or into it)


class _QueryParser:
    def __init__(self, schemas: dict[str, pa.Schema], dialect: str, pks: dict[str, list[str]] | None,
                 unique: UniquenessOracle | None = None):
        self.schemas = schemas
        self.dialect = dialect
        self.pks = {_resolve_table(k, schemas): v for k, v in (pks or {}).items() if v}
        self.unique = unique
        self._unique_memo: dict[tuple[str, str], bool] = {}
        self.flat_to_key = {_flat_name(k): k for k in schemas}
        self.qualify_schema: dict[str, object] = {_flat_name(k): dict(_sql_columns(s)) for k, s in schemas.items()}

    def parse(self, stmt: exp.Expr, sql: str, number: int,
              problems_wanted: bool = True) -> tuple[WorkloadQuery, list[UnsupportedPredicate]]:
        """The statement's WorkloadQuery and its unsupported predicates (none printed when not
        ``problems_wanted``: planning a query leaves them out without a word)."""
        problems: list[UnsupportedPredicate] = []

        def report(pred: exp.Expression | str, reason: str) -> None:
            if problems_wanted:
                text = pred if isinstance(pred, str) else pred.sql(self.dialect)
                problems.append(UnsupportedPredicate(sql, text, reason))

        tree = _qualified(stmt, self.schemas, self.qualify_schema, self.dialect, number)
        try:
            tree = merge_subqueries(tree)
        except sqlglot.errors.SqlglotError as e:
            raise PandoWorkloadError(f"statement {number} cannot be resolved: {e}") from None

        occurrences: list[_Occurrence] = []
        edges: list[tuple[_Occurrence, str, _Occurrence, str]] = []
        semi_joins: list[tuple[_Occurrence, str, exp.Expression]] = []
        for scope in traverse_scope(tree):
            self._scope(scope, occurrences, edges, semi_joins, report)

        # Filters per occurrence, then JoinFilters along FK→PK edges (nested, no cycles).
        base = {id(o): o for o in occurrences}

        own: dict[int, TableFilter] = {}  # occurrence → its single-table part, bound once

        def own_filter(o: _Occurrence) -> TableFilter:
            if id(o) in own:
                return own[id(o)]
            schema = self.schemas[o.table]
            preds = [_strip_qualifiers(p) for p in o.predicates]
            tf = None
            if preds:  # bound once when every predicate is supported (the usual case) ...
                try:
                    tf = TableFilter(_expression(exp.and_(*preds, copy=False)), schema, table=o.table)
                except PandoExprError:
                    pass
            if tf is None:
                kept = []  # ... else one by one: the unsupported ones are reported and left out
                for p in o.predicates:
                    try:
                        TableFilter(p, schema, table=o.table)
                        kept.append(_strip_qualifiers(p))
                    except PandoExprError as e:
                        report(p, str(e))
                tf = TableFilter(_expression(exp.and_(*kept, copy=False)) if kept else None, schema, table=o.table)
            own[id(o)] = tf
            return tf

        def occ_filter(o: _Occurrence, visiting: frozenset[int]) -> TableFilter:
            """The occurrence's own part AND its join filters, unrolled along FK→PK edges (a
            dimension reached by several paths shares its own part, bound once)."""
            joins = []
            if not o.outer:
                for a, col, b, dim_col in edges:
                    if a is o and id(b) not in visiting and self._is_pk(b.table, dim_col) and not b.outer:
                        joins.append(JoinFilter(col, b.table, dim_col, occ_filter(b, visiting | {id(o)})))
            part = own_filter(o)
            return part.with_joins(joins) if joins else part

        filters: dict[str, TableFilter] = {}
        per_table: dict[str, list[TableFilter]] = {}
        for o in base.values():
            per_table.setdefault(o.table, []).append(occ_filter(o, frozenset()))
        for table, fs in per_table.items():
            filters[table] = fs[0] if len(fs) == 1 else _union_filters(fs, self.schemas[table], table)
        for _, _, sub in semi_joins:
            report(sub, "IN (subquery) on a non-primary-key column is not modeled as a join filter")
        join_edges = [JoinEdge(a.table, col, b.table, dim_col) for a, col, b, dim_col in edges]
        return WorkloadQuery(sql, 1.0, filters, sorted(per_table), join_edges, per_table), problems

    def _is_pk(self, table: str, column: str) -> bool:
        """FK→PK (module docstring, step 3): declared identifier fields win; else the oracle;
        with no oracle, every inner equi-join column of an undeclared table (sound semi-join)."""
        declared = self.pks.get(table)
        if declared:
            return [c.lower() for c in declared] == [column.lower()]
        if self.unique is None:
            return True
        key = (table, column.lower())
        if key not in self._unique_memo:
            self._unique_memo[key] = bool(self.unique(table, column.lower()))
        return self._unique_memo[key]

    def _scope(self, scope: Scope, occurrences: list[_Occurrence], edges: list, semi_joins: list,
               report: Callable[[Any, str], None]) -> None:
        select = scope.expression
        if not isinstance(select, exp.Select):
            return
        occ: dict[str, _Occurrence] = {}
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table) and source.name in self.flat_to_key:
                o = _Occurrence(self.flat_to_key[source.name], alias, scope)
                occ[alias] = o
                occurrences.append(o)

        conjuncts, nullable, under_outer, unmodeled = join_scopes(select)
        for alias, o in occ.items():
            o.nullable, o.outer = alias in nullable, alias in under_outer
        for node, why in unmodeled:
            report(node, why)
        if select.args.get("having") is not None:
            report(select.args["having"].this, "HAVING filters groups, not table rows")

        # subquery conjuncts last: a correlation reaches along this scope's equi-joins (step 4)
        for c, allowed in sorted(conjuncts, key=lambda co: has_subquery(co[0])):
            if has_subquery(c):
                self._subquery_conjunct(c, occ, scope, edges, semi_joins, report, occurrences, allowed)
                continue
            refs = _aliases(c, occ, scope)
            if refs is None:
                if not self._correlation(c, occ, scope):  # the outer query's subquery conjunct has it (step 4)
                    report(c, "references a derived table or outer query column that is not a base table")
                continue
            if len(refs) == 0:
                if not (isinstance(c, exp.Boolean) and c.this):
                    report(c, "references no base-table column (constant or non-deterministic predicate)")
                continue
            if len(refs) == 1:
                alias = next(iter(refs))
                if alias not in allowed:
                    report(c, "predicate on the nullable side of an outer join (where it is evaluated) "
                              "is not used as a filter")
                    continue
                occ[alias].predicates.append(c)
                continue
            if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column) \
                    and len(refs) == 2:
                if refs <= allowed:
                    a, b = occ[c.this.table], occ[c.expression.table]
                    edges.append((a, c.this.name.lower(), b, c.expression.name.lower()))
                    edges.append((b, c.expression.name.lower(), a, c.this.name.lower()))
                continue
            if isinstance(c, exp.Or) and self._project_or(c, occ, scope, edges, allowed):
                continue
            report(c, "multi-table predicate that is not an equi-join")

    def _project_or(self, c: exp.Expression, occ: dict[str, _Occurrence], scope: Scope, edges: list,
                    allowed: frozenset[str]) -> bool:
        """A multi-table OR (TPC-H Q7, Q19) implies, for each table, the OR over its
        disjuncts of their conjuncts on that table alone; and an equi-join present in every
        disjunct holds outright. Both are sound consequences, for the tables the OR may
        constrain (``allowed``, :func:`join_scopes`). False if nothing was found."""
        disjuncts = [split_conjuncts(d) for d in _disjuncts(c)]
        found = False
        common = [p for p in disjuncts[0] if all(any(p == q for q in d) for d in disjuncts[1:])]
        for p in common:
            if isinstance(p, exp.EQ) and isinstance(p.this, exp.Column) and isinstance(p.expression, exp.Column) \
                    and p.this.table in allowed and p.expression.table in allowed \
                    and p.this.table in occ and p.expression.table in occ and p.this.table != p.expression.table:
                a, b = occ[p.this.table], occ[p.expression.table]
                edges.append((a, p.this.name.lower(), b, p.expression.name.lower()))
                edges.append((b, p.expression.name.lower(), a, p.this.name.lower()))
                found = True
        for alias, o in occ.items():
            if alias not in allowed:
                continue
            parts = []
            for d in disjuncts:
                mine = [p for p in d if not has_subquery(p) and _aliases(p, occ, scope) == {alias}]
                if not mine:
                    break
                parts.append(exp.and_(*mine))
            else:
                # and_ copied the query's nodes: the parentheses and the OR take them as they are
                o.predicates.append(_expression(exp.or_(*[exp.paren(p, copy=False) for p in parts], copy=False)))
                found = True
        return found

    @staticmethod
    def _correlation(c: exp.Expression, occ: dict[str, _Occurrence], scope: Scope) -> tuple | None:
        """``(inner occurrence, its column, outer alias, outer column)`` when ``c`` is
        ``inner.x = outer.y`` with ``inner`` a base table of this scope and ``outer`` a table
        of an enclosing scope (a correlated subquery's join to its outer query)."""
        if not (isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column)):
            return None
        for inner, outer in ((c.this, c.expression), (c.expression, c.this)):
            if inner.table in occ and outer.table not in scope.sources and not occ[inner.table].nullable:
                return occ[inner.table], inner.name.lower(), outer.table, outer.name.lower()
        return None

    def _correlated_edges(self, c: exp.Expression, occ: dict[str, _Occurrence], scope: Scope, edges: list,
                          occurrences: list[_Occurrence], allowed: frozenset[str]) -> bool:
        """Step 4 of the module docstring: the edges of a correlated ``[NOT] EXISTS`` or of a
        comparison with a correlated scalar subquery (TPC-H Q17); True for an EXISTS whose
        edges were found (nothing of it is left unmodeled)."""
        node = c.this if isinstance(c, exp.Not) else c
        if isinstance(node, exp.Exists):
            select = node.this
        elif isinstance(c, _COMPARISONS):
            select = next((x for x in (c.this, c.expression) if isinstance(x, exp.Subquery)), None)
        else:
            return False
        select, inner_scope = _subquery_scope(select, scope)
        where = select.args.get("where") if isinstance(select, exp.Select) else None
        if inner_scope is None or where is None:
            return False
        inner_occ = {o.alias: o for o in occurrences if o.scope is inner_scope}
        found = False
        for p in split_conjuncts(where.this):
            hit = self._correlation(p, inner_occ, inner_scope)
            if hit is not None and hit[2] in occ and hit[2] in allowed:
                t, x, o, y = hit[0], hit[1], occ[hit[2]], hit[3]
                # t.x = o.y, and o.y = b.z by this scope's inner equi-joins: t.x = b.z too
                # (TPC-H Q21: l2.l_orderkey = l1.l_orderkey = o_orderkey)
                edges += [(t, x, o, y)] + [(t, x, b, z) for a, col, b, z in list(edges)
                                           if a is o and col == y and b.scope is scope and b is not t]
                found = True
        return found and isinstance(node, exp.Exists)

    def _subquery_conjunct(self, c: exp.Expression, occ: dict[str, _Occurrence], scope: Scope, edges: list,
                           semi_joins: list, report: Callable[[Any, str], None],
                           occurrences: list[_Occurrence], allowed: frozenset[str]) -> None:
        if self._correlated_edges(c, occ, scope, edges, occurrences, allowed):
            return
        # `col IN (SELECT pk FROM dim WHERE p)`: a semi-join, modeled like an FK→PK join.
        if isinstance(c, exp.In) and c.args.get("query") is not None and isinstance(c.this, exp.Column) \
                and c.this.table in occ and c.this.table in allowed:
            sub = c.args["query"]
            select, inner_scope = _subquery_scope(sub, scope)
            if inner_scope is not None and isinstance(select, exp.Select) and len(select.expressions) == 1:
                proj = select.expressions[0].unalias() if isinstance(select.expressions[0], exp.Alias) \
                    else select.expressions[0]
                sources = [s for s in inner_scope.sources.values() if isinstance(s, exp.Table)]
                if isinstance(proj, exp.Column) and len(inner_scope.sources) == 1 and len(sources) == 1 \
                        and sources[0].name in self.flat_to_key and not select.args.get("group") \
                        and not inner_scope.external_columns:
                    dim = self.flat_to_key[sources[0].name]
                    inner = next((o for o in occurrences if o.scope.expression is select), None)
                    if self._is_pk(dim, proj.name) and inner is not None:
                        # traverse_scope visits inner scopes first, so the subquery's occurrence
                        # (with its own predicates) exists already. One direction only: the
                        # subquery filters the outer rows, not the other way round.
                        edges.append((occ[c.this.table], c.this.name.lower(), inner, proj.name.lower()))
                        return
                    semi_joins.append((occ[c.this.table], c.this.name.lower(), c))
                    return
        report(c, "predicate with a subquery (EXISTS, scalar or correlated) is not a single-table filter")


_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def _subquery_scope(node: exp.Expression | None, scope: Scope) -> tuple[exp.Expression | None, Scope | None]:
    """A subquery's SELECT (``node`` unwrapped from its Subquery) and its scope under ``scope``."""
    select = node.this if isinstance(node, exp.Subquery) else node
    return select, next((s for s in scope.subquery_scopes if s.expression is select), None)


def _disjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return _disjuncts(node.this)
    if isinstance(node, exp.Or):
        return _disjuncts(node.this) + _disjuncts(node.expression)
    return [node]


def has_subquery(node: exp.Expression) -> bool:
    """Does ``node`` hold a subquery (scalar, IN, EXISTS)?"""
    return any(isinstance(n, (exp.Subquery, exp.Select, exp.Exists)) for n in node.walk())


def _expression(node: exp.Expr) -> exp.Expression:
    """``node`` as an ``exp.Expression``, the type ``pando_iceberg.expr`` takes: sqlglot types
    ``and_``/``or_`` by the trait they return (``Condition``), but every node it builds is an
    ``Expression``."""
    assert isinstance(node, exp.Expression), type(node)
    return node


def _aliases(node: exp.Expression, occ: dict[str, _Occurrence], scope: Scope) -> set[str] | None:
    """The base-table aliases a predicate references; None if it references anything else
    (a derived table's column, an outer query's column)."""
    out = set()
    for col in node.find_all(exp.Column):
        if col.table not in occ:
            return None
        out.add(col.table)
    return out


def _strip_qualifiers(node: exp.Expression) -> exp.Expression:
    def strip(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column):
            return exp.Column(this=exp.to_identifier(n.name.lower()))
        return n

    return node.copy().transform(strip, copy=False)


def _union_filters(fs: list[TableFilter], schema: pa.Schema, table: str) -> TableFilter:
    """The filter of a table read through several occurrences: OR of their single-table
    parts, AND the JoinFilters every occurrence has (``(a AND j) OR (b AND j)`` is
    ``(a OR b) AND j``: TPC-H Q17's lineitem, joined to part and correlated to it). Other
    JoinFilters cannot be OR-ed, so they are dropped (weaker, still sound)."""
    common = [j for j in fs[0].joins if all(any(j.to_sql() == k.to_sql() for k in f.joins) for f in fs[1:])]
    expr = None if any(f.is_true_expr() for f in fs) else _expression(exp.or_(*[exp.paren(f.expr) for f in fs],
                                                                              copy=False))  # paren copies once
    return TableFilter(expr, schema, common, table=table)
