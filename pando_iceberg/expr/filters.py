"""A query's filter on one table, and the question of §5: may a row that satisfies the
filter lie on a cut's TRUE side? on its NOT-TRUE side?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from pando_iceberg.expr import keys as keyset
from pando_iceberg.expr import semantics
from pando_iceberg.expr.bind import DIALECT, bind, parse_predicate
from pando_iceberg.expr.cuts import Cut, ExprCut, LiteralCut
from pando_iceberg.expr.domain import ColumnRange, Domain, Span
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.evaluate import evaluate_predicate
from pando_iceberg.expr.sides import (
    NT,
    UNKNOWN,
    AtomTable,
    CompiledDnf,
    Sides,
    T,
    TooComplex,
    bulk_sides,
    dnf_satisfiable,
    keyed_dnf,
    schema_fingerprint,
    single_term,
    to_dnf,
)
from pando_iceberg.expr.visitor import Kind, kind_of


def same_table(a: str, b: str) -> bool:
    """Table names match case-insensitively, or by their last part (`tpch.orders` ~ `orders`)."""
    a, b = a.lower(), b.lower()
    return a == b or a.split(".")[-1] == b.split(".")[-1]


@dataclass
class JoinFilter:
    """This table's `column` must be IN the `dim_pk` values of the rows of `dim_table` that
    satisfy `dim_filter` (an inner FK→PK equi-join). `dim_keys`, when known, is that key
    set computed at query time; `key_source` says how (e.g. "pyiceberg", "cache", "spark")."""

    column: str
    dim_table: str
    dim_pk: str
    dim_filter: TableFilter
    dim_keys: Any = None
    key_source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self.column = self.column.lower()
        self.dim_pk = self.dim_pk.lower()
        if self.dim_keys is not None:
            self.dim_keys = keyset.normalize_keys(self.dim_keys)

    def to_sql(self) -> str:
        return f"{self.column} IN (SELECT {self.dim_pk} FROM {self.dim_table} WHERE {self.dim_filter.to_sql()})"


class TableFilter:
    """expr (single-table part, canonical) AND all `joins`.

    Treat a filter as immutable once built: sides() caches its DNF, its satisfiability
    checks and its comparisons with dimension predicates on the object."""

    def __init__(self, expr: str | exp.Expr | None, schema: pa.Schema | None,
                 joins: list[JoinFilter] | tuple = (), table: str | None = None):
        self.schema = schema
        self.table = table
        if expr is None or (isinstance(expr, exp.Expr) and kind_of(expr) is Kind.TRUE):
            self.expr: exp.Expression = exp.true()
        else:
            if schema is None:
                raise PandoExprError("a TableFilter with a predicate needs the table's schema")
            self.expr = bind(expr, schema, table)
        self.joins = list(joins)
        if schema is not None:
            names = {n.lower() for n in schema.names}
            for j in self.joins:
                if j.column not in names:
                    raise PandoExprError(f"{'table ' + repr(table) + ': ' if table else ''}unknown join column "
                                         f"{j.column!r}; columns are: {', '.join(schema.names)}")
        self._atoms: AtomTable | None = None
        self._dnf: Any = False
        self._compiled: tuple[AtomTable, CompiledDnf | None] | None = None
        self._not_true: tuple[AtomTable, CompiledDnf | None] | None = None
        self._extra: tuple[AtomTable, list[tuple[str, str, Domain]]] | None = None
        self._sat_with: dict[frozenset[str], bool] = {}
        self._filter_sides: dict[tuple, Sides] = {}
        self._as_cut: ExprCut | None = None
        self._sql: str | None = None
        self._memo_key: tuple | None = None
        self._dim_schemas: dict[str, pa.Schema] | None = None
        self._fingerprints: dict[str | None, tuple | None] | None = None
        self._columns: frozenset[str] | None = None

    # -------------------------------------------------------------- construction

    def with_joins(self, joins: list[JoinFilter] | tuple) -> TableFilter:
        """This filter's single-table part with other join filters (e.g. the same ones with key
        sets). The part is already bound, and binding is idempotent: it is shared, not bound
        again (~1 ms per table and query); join columns are checked as in the
        constructor."""
        out = TableFilter(None, self.schema, joins, self.table)
        out.expr = self.expr
        return out

    @classmethod
    def true(cls, schema: pa.Schema | None = None, table: str | None = None) -> TableFilter:
        return cls(None, schema, table=table)

    @classmethod
    def from_sql(cls, sql: str | exp.Expr, schema: pa.Schema, table: str | None = None,
                 schemas: dict[str, pa.Schema] | None = None) -> TableFilter:
        """Parse a filter. Top-level conjuncts `col IN (SELECT pk FROM dim WHERE p)` become
        JoinFilters (their dimension schema is looked up in `schemas`)."""
        node = parse_predicate(sql, table)
        plain, joins = [], []
        for conj in split_conjuncts(node):
            if kind_of(conj) is not Kind.IN_SUBQUERY:
                plain.append(conj)
                continue
            joins.append(_join_from_subquery(conj, conj.args["query"], schemas or {}, table))
        expr = exp.and_(*plain) if plain else None
        return cls(expr, schema, joins, table)

    # -------------------------------------------------------------- basics

    def to_sql(self) -> str:
        if self._sql is None:
            parts = [] if self.is_true_expr() else [self.expr.sql(DIALECT)]
            parts += [j.to_sql() for j in self.joins]
            if not parts:
                self._sql = "TRUE"
            else:
                self._sql = " AND ".join(f"({p})" if len(parts) > 1 and " OR " in p.upper() else p for p in parts)
        return self._sql

    def memo_key(self) -> tuple:
        """Identifies what sides() answers depend on: the SQL and the column types."""
        if self._memo_key is None:
            self._memo_key = (self.to_sql(), self.table, self.schema_fingerprints()[None])
        return self._memo_key

    def is_true_expr(self) -> bool:
        return kind_of(self.expr) is Kind.TRUE

    def __repr__(self) -> str:
        return f"TableFilter({self.to_sql()!r})"

    def evaluate(self, table: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Rows satisfying the single-table part (joins are not evaluated here)."""
        if self.is_true_expr():
            return np.ones(table.num_rows, dtype=bool)
        return evaluate_predicate(self.expr, table)

    def conjuncts(self) -> list[exp.Expression]:
        return [] if self.is_true_expr() else split_conjuncts(self.expr)

    def candidate_cuts(self) -> list[ExprCut]:
        """§6.1: the filter decomposed into simple predicates. Conjunctions are split; an
        OR group stays one cut; a negation is cut by its positive form (same two sides)."""
        out: dict[str, ExprCut] = {}
        for conj in self.conjuncts():
            while kind_of(conj) is Kind.NOT and kind_of(conj.this) not in (Kind.AND, Kind.OR):
                conj = conj.this
            if kind_of(conj) in (Kind.TRUE, Kind.FALSE):
                continue
            for term in [conj, *shared_conjuncts(conj)]:
                cut = ExprCut(term, self.schema, self.table)
                out.setdefault(cut.key, cut)
        for cut in self.key_range_cuts():
            out.setdefault(cut.key, cut)
        return list(out.values())

    def key_ranges(self) -> dict[str, tuple[int, int]]:
        """Foreign key (the schema's name) → (min, max) of its join's key set, for the joins of
        an integer key with a non-empty integer key set: the range the join implies."""
        if self.schema is None:
            return {}
        names = {n.lower(): n for n in self.schema.names}
        out: dict[str, tuple[int, int]] = {}
        for j in self.joins:
            runs = None if j.dim_keys is None else keyset.key_runs(j.dim_keys)
            if runs and pa.types.is_integer(self.schema.field(names[j.column]).type):
                lo, hi = out.get(names[j.column], (runs[0][0], runs[-1][1]))
                out[names[j.column]] = (max(lo, runs[0][0]), min(hi, runs[-1][1]))
        return out

    def key_range_cuts(self) -> list[ExprCut]:
        """The cuts of the ranges its joins' key sets imply (``key_ranges``): ``fk >= min`` and
        ``fk <= max``, as §6.1 takes them from a query's own ``fk BETWEEN min AND max``. Plain
        predicates on this table, true whatever happens to the dimension later; a held-out
        dimension value whose keys lie between two training ranges is decided by them
        (``_join_extra``)."""
        out = []
        for name, (lo, hi) in self.key_ranges().items():
            col = exp.column(name, quoted=True)
            for node in (exp.GTE(this=col, expression=exp.Literal.number(lo)),
                         exp.LTE(this=col.copy(), expression=exp.Literal.number(hi))):
                out.append(ExprCut(node, self.schema, self.table))
        return out

    # -------------------------------------------------------------- reasoning

    def _atom_table(self, fallback: pa.Schema | None = None) -> AtomTable | None:
        if self._atoms is None:
            schema = self.schema if self.schema is not None else fallback
            if schema is None:
                return None
            self._atoms = AtomTable.shared(schema)
        return self._atoms

    def _own_dnf(self):
        if self._dnf is False:
            try:
                self._dnf = to_dnf(self.expr, T)
            except TooComplex:
                self._dnf = None
        return self._dnf

    def _own_compiled(self, atoms: AtomTable) -> CompiledDnf | None:
        if self._compiled is None or self._compiled[0] is not atoms:
            kd = keyed_dnf(self._own_dnf())
            self._compiled = (atoms, None if kd is None else atoms.compile(kd))
        return self._compiled[1]

    def _join_extra(self, atoms: AtomTable) -> list[tuple[str, str, Domain]]:
        """What the joins say of this table's foreign keys: a row with a NULL key never joins;
        a join with a key set (read at planning, or from a draw's dimension at layout time)
        bounds its key to the set's runs (``keys.key_runs``; the hull past ``MAX_KEY_RUNS``),
        so range cuts on the foreign key are decided like the query's own predicates."""
        if self._extra is None or self._extra[0] is not atoms:
            self._extra = (atoms, [(term, kind, _key_domain(j.dim_keys, kind))
                                   for j in self.joins for term, kind in [atoms.column_term(j.column)]])
        return self._extra[1]

    def side_parts(self) -> tuple[AtomTable, CompiledDnf | None, list[tuple[str, str, Domain]]] | None:
        """What ``sides`` reasons with about an expression cut on this table's columns: the atom
        table, this filter's compiled DNF (None: too complex) and its joins' key domains; None
        without a schema. For answering many cuts at once (``expr.sides.bulk_sides``)."""
        atoms = self._atom_table()
        if atoms is None:
            return None
        return atoms, self._own_compiled(atoms), self._join_extra(atoms)

    def is_unsatisfiable(self) -> bool:
        """True only if no row can satisfy the single-table part (cheap check)."""
        atoms = self._atom_table()
        if atoms is None or self._own_dnf() is None:
            return False
        return not self._satisfiable_with(())

    def sides(self, cut: Cut) -> Sides:
        """May a row satisfying this filter be on the cut's TRUE side / NOT-TRUE side?
        Sound: False only when proven impossible."""
        try:
            if isinstance(cut, ExprCut):
                return self._sides_expr(cut)
            if isinstance(cut, LiteralCut):
                return self._sides_literal(cut)
        except (PandoExprError, TooComplex):
            return UNKNOWN
        return UNKNOWN

    def all_rows_satisfy(self, ranges: dict[str, ColumnRange]) -> bool:
        """Does every row whose columns (lower-case name → range) lie in ``ranges`` satisfy this
        filter? The other direction of ``sides``: True only when no such row can be on the
        filter's NOT-TRUE side (its NOT-TRUE DNF is unsatisfiable with the ranges' domains, NaN
        and NULL included). A column missing from ``ranges``, or whose kind differs from the
        term's, is unconstrained; a filter with joins is never proven (a row may not join)."""
        if self.joins:
            return False
        if self.is_true_expr():
            return True
        atoms = self._atom_table()
        if atoms is None:
            return False
        not_true = self._not_true_compiled(atoms)
        if not_true is None:
            return False
        extra = []
        for name, r in ranges.items():
            if name in atoms.names:
                term, kind = atoms.column_term(name)
                if kind == r.kind:
                    extra.append((term, kind, r.domain()))
        return not dnf_satisfiable(atoms, not_true, [[]], extra)

    def _not_true_compiled(self, atoms: AtomTable) -> CompiledDnf | None:
        if self._not_true is None or self._not_true[0] is not atoms:
            try:
                kd = keyed_dnf(to_dnf(self.expr, NT))
            except TooComplex:
                kd = None
            self._not_true = (atoms, None if kd is None else atoms.compile(kd))
        return self._not_true[1]

    def constrained_columns(self) -> frozenset[str]:
        """The columns (lower case) the single-table part references and the join columns: a
        row's values elsewhere are free whatever this filter says."""
        if self._columns is None:
            own = set() if self.is_true_expr() else {c.name.lower() for c in self.expr.find_all(exp.Column)}
            self._columns = frozenset(own | {j.column for j in self.joins})
        return self._columns

    def _sides_expr(self, cut: ExprCut) -> Sides:
        atoms = self._atom_table(cut.schema)
        if atoms is None:
            return UNKNOWN
        if cut.columns <= atoms.names and self.constrained_columns().isdisjoint(cut.lower_columns):
            return self._sides_independent(cut, atoms)
        return self._sides_expr_joint(cut, atoms)

    def _sides_independent(self, cut: ExprCut, atoms: AtomTable) -> Sides:
        """``_sides_expr_joint`` for a cut on columns this filter does not constrain: the filter's
        DNF and the cut's share no term, so their conjunction is satisfiable iff each part is
        (the filter's, with its joins' key domains, is asked once per filter; the cut's alone
        once per cut and atom table). Planning asked most cuts of a layout this way (
        30 of 60 questions per TPC-H join query, 3 ms). Sound in every case (False only when
        one part alone is empty); as precise as the joint check unless both sides hold the
        same column-less atom (e.g. ``rand() < 0.5``), where it may answer True."""
        own = self._own_compiled(atoms)
        if own is None:
            return UNKNOWN
        if not self._satisfiable_with(()):
            return Sides(False, False)
        return Sides(cut.satisfiable_alone(T, atoms), cut.satisfiable_alone(NT, atoms))

    def _sides_expr_joint(self, cut: ExprCut, atoms: AtomTable) -> Sides:
        """``sides`` of an expression cut: the filter's DNF AND each side's DNF, conjunction by
        conjunction."""
        if not cut.columns <= atoms.names:
            atoms = AtomTable.shared(cut.schema)  # the filter cannot constrain columns it lacks
            own: Any = [[]]
            extra: list = []
        else:
            own = self._own_compiled(atoms)
            extra = self._join_extra(atoms)
        c_true, c_not_true = cut.compiled_dnf(T, atoms), cut.compiled_dnf(NT, atoms)
        may_true = True if own is None or c_true is None else dnf_satisfiable(atoms, own, c_true, extra)
        may_not = True if own is None or c_not_true is None else dnf_satisfiable(atoms, own, c_not_true, extra)
        return Sides(may_true, may_not)

    def _satisfiable_with(self, extra_nonnull: tuple[str, ...] | list[str]) -> bool:
        key = frozenset(extra_nonnull)
        hit = self._sat_with.get(key)
        if hit is None:
            hit = self._sat_with[key] = self._compute_satisfiable_with(key)
        return hit

    def _compute_satisfiable_with(self, extra_nonnull: frozenset[str]) -> bool:
        atoms = self._atom_table()
        if atoms is None:
            return True
        own = self._own_compiled(atoms)
        if own is None:
            return True
        extra = self._join_extra(atoms) + [(*atoms.column_term(c), Domain.non_null())
                                           for c in sorted(extra_nonnull) if c in atoms.names]
        return dnf_satisfiable(atoms, own, [[]], extra)

    def _find_join(self, column: str, dim_table: str, dim_pk: str) -> JoinFilter | None:
        for j in self.joins:
            if j.column == column.lower() and same_table(j.dim_table, dim_table) and j.dim_pk == dim_pk.lower():
                return j
        return None

    def _sides_literal(self, cut: LiteralCut) -> Sides:
        any_row = self._satisfiable_with(())
        if not any_row:
            return Sides(False, False)
        # The TRUE side needs a non-NULL key.
        keyed_row = self._satisfiable_with((cut.column,))
        join = self._find_join(cut.column, cut.origin.dim_table, cut.origin.dim_pk)
        if join is None:
            return Sides(keyed_row, True)
        if join.dim_keys is not None:
            # Rows were routed by the cut's key set, and a row satisfying this filter has its
            # key in the query's key set: exact.
            return Sides(keyed_row and keyset.keys_intersect(join.dim_keys, cut.keys),
                         not keyset.keys_subset(join.dim_keys, cut.keys))
        # Compare the dimension predicates: a row is on the TRUE side iff the dimension row
        # it joins (unique, pk) satisfies the origin predicate.
        s = join.dim_filter.filter_sides(_origin_filter(cut, join.dim_filter))
        return Sides(keyed_row and s.may_true, s.may_not_true)

    def schema_fingerprints(self) -> dict[str | None, tuple | None]:
        """Fingerprints of this table's schema (key None) and of `dim_schemas()`."""
        if self._fingerprints is None:
            fps: dict[str | None, tuple | None] = {
                name: schema_fingerprint(s) for name, s in self.dim_schemas().items()}
            fps[None] = None if self.schema is None else schema_fingerprint(self.schema)
            self._fingerprints = fps
        return self._fingerprints

    def dim_schemas(self) -> dict[str, pa.Schema]:
        if self._dim_schemas is None:
            out: dict[str, pa.Schema] = {}
            for j in self.joins:
                if j.dim_filter.schema is not None:
                    out[j.dim_table] = j.dim_filter.schema
                out.update(j.dim_filter.dim_schemas())
            self._dim_schemas = out
        return dict(self._dim_schemas)

    def filter_sides(self, other: TableFilter) -> Sides:
        """Like sides(), with a whole filter (expr AND joins) of the same table as the cut.
        Memoized per `other` (literal cuts of one origin are compared with every query's
        dimension filter)."""
        key = other.memo_key()
        hit = self._filter_sides.get(key)
        if hit is None:
            hit = self._filter_sides[key] = self._compute_filter_sides(other)
        return hit

    def _to_cut(self) -> ExprCut:
        if self._as_cut is None:
            self._as_cut = ExprCut(self.expr, self.schema, self.table, bound=True)
        return self._as_cut

    def _compute_filter_sides(self, other: TableFilter) -> Sides:
        if not self._satisfiable_with(()):
            return Sides(False, False)
        if other.is_true_expr():
            expr_sides = Sides(True, False)
        else:
            expr_sides = self._sides_expr(other._to_cut())
        may_true, may_not = expr_sides.may_true, expr_sides.may_not_true
        for jc in other.joins:
            jq = self._find_join(jc.column, jc.dim_table, jc.dim_pk)
            if jq is None:
                may_not = True  # the row may fail to join the cut's dimension rows
                continue
            s = jq.dim_filter.filter_sides(jc.dim_filter)
            may_true = may_true and s.may_true
            may_not = may_not or s.may_not_true
        return Sides(may_true, may_not)


def literal_sides(filters: Sequence[TableFilter], cuts: Sequence[LiteralCut]) -> tuple[np.ndarray, np.ndarray]:
    """Q × C (may_true, may_not_true): ``TableFilter.sides`` of every filter with every literal cut
    (§7's join-induced cuts), the same reasoning as ``_sides_literal`` asked in bulk: a filter's
    satisfiability with and without a non-NULL key once per filter and column, its join once per
    cut origin, and the comparisons of its joins' dimension filters with the cuts' origin
    predicates (``filter_sides``) that are domains of one term (``sides.single_term``) answered
    together, per dimension atom table, by ``sides.bulk_sides`` (what ``_sides_expr`` decides one
    pair at a time); every other comparison as ``filter_sides`` makes it. What ``sides`` would
    answer UNKNOWN for (an error while reasoning) is both sides."""
    may = (np.ones((len(filters), len(cuts)), dtype=bool), np.ones((len(filters), len(cuts)), dtype=bool))
    origins: dict[tuple[str, str, str], list[int]] = {}
    for j, cut in enumerate(cuts):
        origins.setdefault((cut.column, cut.origin.dim_table, cut.origin.dim_pk), []).append(j)
    pending: list[tuple[int, int, bool, TableFilter, TableFilter]] = []  # (query, cut, keyed row, D, origin)
    for i, f in enumerate(filters):
        try:
            if not f._satisfiable_with(()):
                may[0][i], may[1][i] = False, False
                continue
        except (PandoExprError, TooComplex):
            continue
        for (column, dim_table, dim_pk), js in origins.items():
            try:
                keyed_row = f._satisfiable_with((column,))  # the TRUE side needs a non-NULL key
            except (PandoExprError, TooComplex):
                continue
            join = f._find_join(column, dim_table, dim_pk)
            if join is None:
                may[0][i, js] = keyed_row
                continue
            for j in js:
                if join.dim_keys is not None:  # routed by the cut's key set, the query's keys known: exact
                    may[0][i, j] = keyed_row and keyset.keys_intersect(join.dim_keys, cuts[j].keys)
                    may[1][i, j] = not keyset.keys_subset(join.dim_keys, cuts[j].keys)
                    continue
                try:
                    pending.append((i, j, keyed_row, join.dim_filter, _origin_filter(cuts[j], join.dim_filter)))
                except PandoExprError:
                    continue
    for (i, j, keyed_row, _, _), got in zip(pending, _filters_sides([(d, o) for *_, d, o in pending])):
        if got is not None:
            may[0][i, j], may[1][i, j] = keyed_row and got.may_true, got.may_not_true
    return may


def _filters_sides(pairs: Sequence[tuple[TableFilter, TableFilter]]) -> list[Sides | None]:
    """``d.filter_sides(o)`` of every pair (None: it raised), the pairs whose ``o`` is domains of
    one of ``d``'s terms (no joins) answered per atom table by ``bulk_sides``, and
    memoized as ``filter_sides`` memoizes its own."""
    out: list[Sides | None] = [None] * len(pairs)
    groups: dict[int, tuple[AtomTable, dict[int, int], list, dict[int, int], list, list[int]]] = {}
    rest = []
    for k, (d, o) in enumerate(pairs):
        hit = d._filter_sides.get(o.memo_key())
        if hit is not None:
            out[k] = hit
            continue
        one = _one_constraint(d, o)
        if one is None:
            rest.append(k)
            continue
        atoms, own, extra, constraint = one
        g = groups.setdefault(id(atoms), (atoms, {}, [], {}, [], []))
        if id(d) not in g[1]:
            g[1][id(d)] = len(g[2])
            g[2].append((own, extra))
        if id(o) not in g[3]:
            g[3][id(o)] = len(g[4])
            g[4].append(constraint)
        g[5].append(k)
    for atoms, rows, parts, cols, constraints, members in groups.values():
        may_true, may_not, answered = bulk_sides(atoms, parts, constraints)
        for k in members:
            d, o = pairs[k]
            r, c = rows[id(d)], cols[id(o)]
            if not answered[r, c]:
                rest.append(k)
                continue
            out[k] = d._filter_sides[o.memo_key()] = Sides(bool(may_true[r, c]), bool(may_not[r, c]))
    for k in rest:
        d, o = pairs[k]
        try:
            out[k] = d.filter_sides(o)
        except (PandoExprError, TooComplex):
            out[k] = None
    return out


def _one_constraint(d: TableFilter, o: TableFilter) -> tuple[AtomTable, CompiledDnf, list, Any] | None:
    """What ``bulk_sides`` needs to answer ``d.filter_sides(o)``, when ``o`` has no joins and is
    domains of one of ``d``'s terms (``d._sides_expr(o._to_cut())`` then decides it): ``d``'s atom
    table, compiled DNF and join domains, and ``o``'s constraint; None otherwise."""
    if o.joins or o.is_true_expr():
        return None
    try:
        parts = d.side_parts()
        if parts is None or parts[1] is None:
            return None
        atoms = parts[0]
        cut = o._to_cut()
        if not cut.columns <= atoms.names:
            return None
        one = single_term(atoms, cut.compiled_dnf(T, atoms), cut.compiled_dnf(NT, atoms))
    except (PandoExprError, TooComplex):
        return None
    return None if one is None else (atoms, parts[1], parts[2], one)


def _key_domain(keys: Any, kind: str) -> Domain:
    """The values a join's key set allows its (integer) foreign key: its runs; non-NULL only
    when the set is unknown or the key is not an integer."""
    runs = None if keys is None or kind != "int" else keyset.key_runs(keys)
    if runs is None:
        return Domain.non_null()
    return Domain(tuple(Span(Fraction(lo), True, Fraction(hi), True) for lo, hi in runs), False)


def _origin_filter(cut: LiteralCut, dim_filter: TableFilter) -> TableFilter:
    """The literal cut's origin predicate as a filter over the dimension table of
    `dim_filter`, bound once per dimension schema."""
    # Binding reads only the schemas of the tables the predicate names (nested `IN (SELECT
    # ...)`); keying by the others would rebind it for every query's set of joins.
    text = cut.origin.predicate.lower()
    fingerprints = dim_filter.schema_fingerprints()
    dim_schemas = {name: s for name, s in dim_filter.dim_schemas().items() if name.lower().split(".")[-1] in text}
    key = (fingerprints[None], tuple(sorted((name, fingerprints[name]) for name in dim_schemas)))
    hit = cut._origin_filters.get(key)
    if hit is None:
        try:  # the predicate the layout's key set was made with: the default settings
            with semantics.using(semantics.DEFAULT):
                hit = TableFilter.from_sql(cut.origin.predicate, dim_filter.schema, cut.origin.dim_table,
                                           schemas=dim_schemas)
        except PandoExprError as e:  # e.g. a nested dimension this query does not join: remember it
            hit = str(e)
        cut._origin_filters[key] = hit
    if isinstance(hit, str):
        # A new error each time: raising the remembered one again would chain every query's
        # frames onto its traceback and keep them (and the DataFrames and JVM plans they hold)
        # alive as long as the layout (~0.4 MB of JVM heap per pruned query).
        raise PandoExprError(hit)
    return hit


def _terms(node: exp.Expression, op: Kind) -> list[exp.Expression]:
    """The terms of nested ``op`` (AND or OR) nodes, parentheses flattened; ``[node]`` otherwise."""
    kind = kind_of(node)
    if kind is Kind.PAREN:
        return _terms(node.this, op)
    if kind is op:
        return _terms(node.this, op) + _terms(node.expression, op)
    return [node]


def split_conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The terms of a conjunction (nested ANDs and parentheses flattened); ``[node]`` otherwise."""
    return _terms(node, Kind.AND)


def shared_conjuncts(node: exp.Expression) -> list[exp.Expression]:
    """The conjuncts every branch of the OR ``node`` has (none if ``node`` is no OR): each is
    implied by ``node``, so it is a cut the query is on one side of. TPC-H Q19's three branches
    share ``l_shipmode IN ('AIR', 'AIR REG')`` and ``l_shipinstruct = 'DELIVER IN PERSON'``;
    §6.1 keeps the OR group as one cut, which no other template's literal matches (
    Q19 read 17 files where z-order on those columns read 8). Compared by SQL text."""
    branches = _terms(node, Kind.OR)
    if len(branches) < 2:
        return []
    sets = [{c.sql(): c for c in split_conjuncts(b)} for b in branches]
    return [c for sql, c in sets[0].items() if all(sql in other for other in sets[1:])]


def _join_from_subquery(conj: exp.Expression, sub: exp.Expression, schemas: dict[str, pa.Schema],
                        table: str | None) -> JoinFilter:
    where = f"table {table!r}: " if table else ""
    expected = "expected <column> IN (SELECT <primary key column> FROM <dimension table> [WHERE <predicate>])"
    select = sub.this if isinstance(sub, exp.Subquery) else sub
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or not isinstance(conj.this, exp.Column):
        raise PandoExprError(f"{where}unsupported IN subquery {conj.sql(DIALECT)}: {expected}")
    from_ = select.args.get("from") or select.args.get("from_")
    tables = list(from_.find_all(exp.Table)) if from_ is not None else []
    if len(tables) != 1 or select.args.get("joins") or not isinstance(select.expressions[0], exp.Column):
        raise PandoExprError(f"{where}unsupported IN subquery {conj.sql(DIALECT)}: {expected} "
                             "(one dimension table, one plain column selected)")
    tbl = tables[0]
    dim = ".".join(p.name for p in tbl.parts)
    schema = next((s for name, s in schemas.items() if same_table(name, dim)), None)
    if schema is None:
        known = ", ".join(sorted(schemas)) or "none"
        raise PandoExprError(f"{where}no schema for dimension table {dim!r} in {conj.sql(DIALECT)}; "
                             f"schemas were given for: {known}")
    pk = select.expressions[0].name.lower()
    if pk not in {n.lower() for n in schema.names}:
        raise PandoExprError(f"{where}dimension table {dim!r} has no column {pk!r} (selected in "
                             f"{conj.sql(DIALECT)}); columns are: {', '.join(schema.names)}")
    where_clause = select.args.get("where")
    dim_filter = (TableFilter.from_sql(where_clause.this, schema, dim, schemas) if where_clause is not None
                  else TableFilter.true(schema, dim))
    return JoinFilter(conj.this.name, dim, select.expressions[0].name, dim_filter)


__all__ = ["JoinFilter", "TableFilter", "literal_sides", "same_table"]
_ = (field, sqlglot)
