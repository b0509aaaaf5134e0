"""Predicate extraction: SQL workload → per-table filters and FK→PK join filters (§6.1, §7), the
input of the workload model (``workload.model``: candidate cuts and join-induced cuts).

Pipeline per statement (sqlglot's optimizer does the name resolution):
1. parse; rename tables to their schema keys; `qualify` (every column gets its source,
   ``workload.qualify``);
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
Outer joins (``workload.join_scopes``): a conjunct constrains only the occurrences that every row
it is evaluated on holds a real row of (WHERE and inner ON above an outer join: its preserved
side; an outer join's ON: the null-supplying input's own non-nullable tables); no JoinFilter is
made for or through an occurrence under an outer join. Parenthesised joins are read as the
trees they are (``workload.qualify``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.scope import Scope, traverse_scope

from pando_iceberg.expr import JoinFilter, PandoExprError, TableFilter
from pando_iceberg.expr.filters import split_conjuncts  # one definition of "split an AND"

from .join_scopes import has_subquery, join_scopes
from .limits import limit_shape
from .model import (
    JoinEdge,
    PandoWorkloadError,
    UniquenessOracle,
    UnsupportedPredicate,
    Workload,
    WorkloadQuery,
    resolve_table,
)
from .qualify import as_expression, qualified, qualify_names
from .sources import read_sources, split_statements


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
    for text, weight in read_sources(sources):
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
            query.top_k = _top_k(stmt, query, problems)
            unsupported.extend(problems)
            merged[normalized] = query
    return Workload(list(merged.values()), unsupported, schemas, parser.pks)


def parse_query(stmt: exp.Expression, schemas: dict[str, pa.Schema], dialect: str = "spark",
                primary_keys: dict[str, list[str]] | None = None,
                unique: UniquenessOracle | None = None, sql: str | None = None,
                unsupported: list[UnsupportedPredicate] | None = None) -> WorkloadQuery:
    """One query already parsed by sqlglot (the planner's own tree, so that planning parses a
    query once), read as :func:`parse_workload` reads a statement; unsupported predicates are
    left out of its filters as there (and appended to ``unsupported`` when given: a caller that
    needs the filters to be the query's whole WHERE checks it is empty). ``sql``: its text
    (default: the tree printed again)."""
    if not isinstance(stmt, exp.Query):
        raise PandoWorkloadError(f"not a query: {stmt.sql(dialect=dialect)[:200]}")
    text = sql if sql is not None else stmt.sql(dialect=dialect)
    query, problems = _QueryParser(schemas, dialect, primary_keys, unique).parse(
        stmt, text, 1, problems_wanted=unsupported is not None)
    if unsupported is not None:
        unsupported.extend(problems)
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
        self.pks = {resolve_table(k, schemas): v for k, v in (pks or {}).items() if v}
        self.unique = unique
        self._unique_memo: dict[tuple[str, str], bool] = {}
        self.flat_to_key, self.qualify_schema = qualify_names(schemas)

    def parse(self, stmt: exp.Expr, sql: str, number: int,
              problems_wanted: bool = True) -> tuple[WorkloadQuery, list[UnsupportedPredicate]]:
        """The statement's WorkloadQuery and its unsupported predicates (none printed when not
        ``problems_wanted``: planning a query leaves them out without a word)."""
        problems: list[UnsupportedPredicate] = []

        def report(pred: exp.Expression | str, reason: str) -> None:
            if problems_wanted:
                text = pred if isinstance(pred, str) else pred.sql(self.dialect)
                problems.append(UnsupportedPredicate(sql, text, reason))

        tree = qualified(stmt, self.schemas, self.qualify_schema, self.dialect, number)
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
                    tf = TableFilter(as_expression(exp.and_(*preds, copy=False)), schema, table=o.table)
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
                tf = TableFilter(as_expression(exp.and_(*kept, copy=False)) if kept else None, schema, table=o.table)
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
                o.predicates.append(as_expression(exp.or_(*[exp.paren(p, copy=False) for p in parts], copy=False)))
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


def _top_k(stmt: exp.Expr, query: WorkloadQuery, problems: list[UnsupportedPredicate]) -> tuple | None:
    """A top-k query's (rows needed, order) when its one table's filter is its whole WHERE (as the
    planner prunes it, ``spark/pruned.py``), else None: a LIMIT without ORDER BY is any rows."""
    shape = limit_shape(stmt) if isinstance(stmt, exp.Select) else None
    if shape is None or shape[1] is None or problems or len(query.filters) != 1:
        return None
    return shape


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
    expr = None if any(f.is_true_expr() for f in fs) else as_expression(exp.or_(*[exp.paren(f.expr) for f in fs],
                                                                              copy=False))  # paren copies once
    return TableFilter(expr, schema, common, table=table)


__all__ = ["parse_query", "parse_workload"]
