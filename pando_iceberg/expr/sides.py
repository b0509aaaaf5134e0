"""Filter × cut → which sides of the cut may hold rows that satisfy the filter (§5).

At a tree node with cut C, a query with filter F skips the TRUE child if no row can satisfy
F ∧ C, and the NOT-TRUE child if no row can satisfy F ∧ (NOT C OR C IS NULL). This module
decides those two satisfiability questions, soundly: "unsatisfiable" is answered only when
proven, anything unknown counts as satisfiable.

How: both formulas are put in disjunctive normal form over *literals* (atom, polarity),
where the polarity says what the atom evaluates to in three-valued logic: T (TRUE),
F (FALSE), NT (FALSE or NULL), NF (TRUE or NULL). NOT swaps T↔F and NT↔NF; De Morgan holds
for each polarity, so no information is lost by the rewriting. A conjunction of literals is
then proven empty by one of:
- constraint atoms ("term ∈ domain": comparisons with literals, BETWEEN, IN lists, LIKE,
  IS NULL, boolean columns): the domains of each term are intersected (domain.py);
- column-vs-column comparisons: the possible order relations {<, =, >, NULL} between the
  two operands are intersected;
- any other atom (opaque, compared structurally by its canonical SQL): the possible truth
  values {T, F, N} are intersected;
- NULL-intolerant atoms that must be TRUE or FALSE force their columns to be non-NULL.

Speed (the layout optimizer asks every (query, cut) pair, the planner every cut per query):
rendering SQL is the expensive step, so it happens once per atom. An `AtomTable` is shared
by all filters and cuts of one schema (`AtomTable.shared`); DNFs are built once per filter
and per cut, keyed by canonical SQL (`keyed_dnf`) and classified once per atom table
(`AtomTable.compile`); the satisfiability loop then only touches classified atoms.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from sqlglot import exp

from pando_iceberg.expr import semantics
from pando_iceberg.expr.domain import Domain, Span, is_discrete, key_of
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.evaluate import Context, eval_node
from pando_iceberg.expr.values import fold
from pando_iceberg.expr.visitor import (
    ALLOWED,
    COMPARISON_OPS,
    NT,
    F,
    Kind,
    PolarityVisitor,
    PredicateVisitor,
    T,
    kind_of,
)

DIALECT = "spark"

# Above this many conjunctions a DNF is not expanded and the answer is "unknown".
MAX_CONJUNCTIONS = 64


class Sides(NamedTuple):
    may_true: bool
    may_not_true: bool


UNKNOWN = Sides(True, True)


class TooComplex(Exception):
    pass


Literal = tuple[exp.Expression, str]
Dnf = list[list[Literal]]


class _DnfBuilder(PolarityVisitor[Dnf]):
    """The DNF of a node having a polarity: every atom (a node that is not boolean
    structure) becomes one literal (atom, polarity)."""

    def __init__(self, cap: int):
        self.cap = cap

    def visit_all(self, left: Dnf, right: Dnf) -> Dnf:
        if len(left) * len(right) > self.cap:
            raise TooComplex()
        out = [a + b for a in left for b in right]
        if len(out) > self.cap:
            raise TooComplex()
        return out

    def visit_any(self, left: Dnf, right: Dnf) -> Dnf:
        out = left + right
        if len(out) > self.cap:
            raise TooComplex()
        return out

    def visit_constant(self, holds: bool) -> Dnf:
        return [[]] if holds else []

    def visit_other(self, node: exp.Expression, arg: str) -> Dnf:
        return [[(node, arg)]]


_DNF_BUILDERS = {MAX_CONJUNCTIONS: _DnfBuilder(MAX_CONJUNCTIONS)}


def to_dnf(node: exp.Expression, polarity: str = T, cap: int = MAX_CONJUNCTIONS) -> Dnf:
    """Conjunctions (lists of literals) whose disjunction is equivalent to `node` having
    `polarity`. [] = never, [[]] = always. Raises TooComplex above `cap` conjunctions."""
    builder = _DNF_BUILDERS.get(cap) or _DnfBuilder(cap)
    return builder.visit(node, polarity)


KeyedDnf = list[list[tuple[str, exp.Expression, str]]]


def keyed_dnf(dnf: Dnf | None, keys: dict[int, str] | None = None) -> KeyedDnf | None:
    """The DNF with each literal's canonical SQL rendered once: distributing AND over OR
    repeats the same node objects in many conjunctions. `keys` (node id → SQL) may be
    shared by DNFs of one expression whose nodes stay alive (both polarities of a cut)."""
    if dnf is None:
        return None
    if keys is None:
        keys = {}
    out = []
    for conj in dnf:
        row = []
        for node, polarity in conj:
            key = keys.get(id(node))
            if key is None:
                key = keys[id(node)] = node.sql(DIALECT)
            row.append((key, node, polarity))
        out.append(row)
    return out


# ---------------------------------------------------------------- atoms


@dataclass(frozen=True)
class Constraint:
    """term ∈ true_dom when the atom is TRUE, term ∈ false_dom when FALSE. An inexact
    constraint's domains are supersets (general LIKE patterns)."""

    term: str
    kind: str
    true_dom: Domain
    false_dom: Domain
    exact: bool
    term_columns: frozenset[str]
    term_is_column: bool
    term_null_intolerant: bool

    def domain(self, polarity: str) -> Domain:
        if polarity == T:
            return self.true_dom
        if polarity == F:
            return self.false_dom
        if not self.exact:
            return Domain.everything()
        return self.not_true_dom if polarity == NT else self.not_false_dom

    @functools.cached_property
    def not_true_dom(self) -> Domain:
        return self.true_dom.complement()

    @functools.cached_property
    def not_false_dom(self) -> Domain:
        return self.false_dom.complement()


@dataclass(frozen=True)
class Pair:
    """A comparison of two terms: base op in {<, <=, =}, possibly negated."""

    left: str
    right: str
    op: str
    negated: bool
    columns: frozenset[str]
    kinds: tuple[str, str]
    null_intolerant: tuple[bool, bool]
    side_columns: tuple[frozenset[str], frozenset[str]]


@dataclass(frozen=True)
class Opaque:
    key: str
    columns: frozenset[str]
    null_intolerant: bool


_REL_TRUTH = {
    "<": {"LT": "T", "EQ": "F", "GT": "F", "NULL": "N"},
    "<=": {"LT": "T", "EQ": "T", "GT": "F", "NULL": "N"},
    "=": {"LT": "F", "EQ": "T", "GT": "F", "NULL": "N"},
}
_FLIP_TRUTH = {"T": "F", "F": "T", "N": "N"}

# Kinds of expressions that are NULL whenever any input is NULL (so a non-NULL result proves
# all their columns non-NULL), and the non-expression parts of such nodes (type names, units).
# CASE, IF, COALESCE, IS, AND, OR are not in this list; nor is an IN list holding NULL.
_NULL_INTOLERANT_KINDS = frozenset({
    Kind.COLUMN, Kind.LITERAL, Kind.ARITHMETIC, Kind.NEG, Kind.ABS, Kind.COMPARISON, Kind.LIKE, Kind.EXTRACT,
    Kind.DATE_PART, Kind.SUBSTRING, Kind.LENGTH, Kind.CAST, Kind.BETWEEN, Kind.IN, Kind.IN_SUBQUERY, Kind.NOT,
    Kind.PAREN, Kind.INTERVAL, Kind.TO_DATE})
_NULL_INTOLERANT_PARTS = (exp.Var, exp.DataType, exp.DataTypeParam, exp.Identifier)


def null_intolerant(node: exp.Expression) -> bool:
    for n in node.walk():
        kind = kind_of(n)
        if kind not in _NULL_INTOLERANT_KINDS and not isinstance(n, _NULL_INTOLERANT_PARTS):
            return False
        if kind is Kind.IN and any(isinstance(e, exp.Null) for e in n.expressions):
            return False
    return True


def _columns(node: exp.Expression) -> frozenset[str]:
    return frozenset(c.name for c in node.find_all(exp.Column))


_PAIR_BASE = {"<": ("<", False), "<=": ("<=", False), "=": ("=", False),
              ">=": ("<", True), ">": ("<=", True), "<>": ("=", True)}


def _cmp_domains(op: str, key: Any) -> tuple[Domain, Domain]:
    point = Span(key, True, key, True)
    below_open, below_closed = Span(None, False, key, False), Span(None, False, key, True)
    above_open, above_closed = Span(key, False, None, False), Span(key, True, None, False)
    table = {
        "=": ((point,), (below_open, above_open)),
        "<>": ((below_open, above_open), (point,)),
        "<": ((below_open,), (above_closed,)),
        "<=": ((below_closed,), (above_open,)),
        ">": ((above_open,), (below_closed,)),
        ">=": ((above_closed,), (below_open,)),
    }
    t, f = table[op]
    return Domain(t, False), Domain(f, False)


def _string_successor(prefix: str) -> str | None:
    """The smallest string greater than every string starting with `prefix`."""
    chars = list(prefix)
    while chars:
        if ord(chars[-1]) < 0x10FFFF:
            chars[-1] = chr(ord(chars[-1]) + 1)
            return "".join(chars)
        chars.pop()
    return None


def like_prefix(pattern: str) -> tuple[str, str]:
    """(literal prefix, shape) of a LIKE pattern with escape '\\'. shape: 'exact' (no
    wildcard), 'prefix' (prefix followed only by '%'s), 'general'."""
    prefix, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            prefix.append(pattern[i + 1])
            i += 2
            continue
        if ch in "%_":
            rest = pattern[i:]
            return "".join(prefix), ("prefix" if set(rest) == {"%"} else "general")
        prefix.append(ch)
        i += 1
    return "".join(prefix), "exact"


def schema_fingerprint(schema: pa.Schema) -> tuple[Any, ...]:
    """What atom classification depends on: the column names and types."""
    return tuple((f.name, f.type) for f in schema)


_MAX_SHARED_TABLES = 64
_SHARED_TABLES: dict[tuple[Any, ...], AtomTable] = {}
_SHARED_LOCK = threading.Lock()


def clear_caches() -> None:
    """Forget the shared atom tables (tests compare cold and warm answers with it)."""
    _SHARED_TABLES.clear()


class AtomTable:
    """Classifies the atoms of one table's predicates (cached by canonical SQL).

    Classification depends only on the column types, so one table is shared by every
    filter and cut over the same schema (`AtomTable.shared`): an atom is classified once
    per workload, not once per (filter, cut) pair."""

    # Above this many cached atoms a shared table starts afresh (a long-running planner
    # sees an unbounded stream of queries).
    MAX_ATOMS = 50_000

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.names = frozenset(n.lower() for n in schema.names)
        self.ctx = Context(schema.empty_table())
        self._cache: dict[str, Constraint | Pair | Opaque] = {}
        self._kinds: dict[str, str] = {}
        self._column_terms: dict[str, tuple[str, str]] = {}

    @staticmethod
    def shared(schema: pa.Schema) -> AtomTable:
        key = schema_fingerprint(schema)
        table = _SHARED_TABLES.get(key)
        if table is None or len(table._cache) > AtomTable.MAX_ATOMS:
            with _SHARED_LOCK:  # planners may run in threads; hits need no lock
                table = _SHARED_TABLES.get(key)
                if table is None or len(table._cache) > AtomTable.MAX_ATOMS:
                    if len(_SHARED_TABLES) >= _MAX_SHARED_TABLES:
                        _SHARED_TABLES.pop(next(iter(_SHARED_TABLES)))
                    table = _SHARED_TABLES[key] = AtomTable(schema)
        return table

    def kind(self, node: exp.Expression) -> str:
        """The term's kind; a decimal column's is "decimal:<scale>", a discrete universe
        (its values are multiples of 10^-scale)."""
        key = node.sql(DIALECT)
        if key not in self._kinds:
            with semantics.using(semantics.DEFAULT):  # a canonical term's type is the same in every session
                v = eval_node(node, self.ctx)
            self._kinds[key] = f"decimal:{v.scale}" if v.kind == "decimal" and isinstance(node, exp.Column) else v.kind
        return self._kinds[key]

    def column_term(self, column: str) -> tuple[str, str]:
        """(term key, kind) of a plain column of this table."""
        hit = self._column_terms.get(column)
        if hit is None:
            node = exp.column(column)
            hit = self._column_terms[column] = (node.sql(DIALECT), self.kind(node))
        return hit

    def classify(self, node: exp.Expression, key: str | None = None) -> Constraint | Pair | Opaque:
        """The atom of `node`; `key` is its canonical SQL when the caller already has it
        (rendering SQL is the expensive part, see `keyed_dnf`)."""
        if key is None:
            key = node.sql(DIALECT)
        atom = self._cache.get(key)
        if atom is None:
            try:  # canonical atoms mean the same in every session: classified once, for all
                with semantics.using(semantics.DEFAULT):
                    atom = self._classify(node)
            except (PandoExprError, ValueError, TypeError, ArithmeticError):
                atom = Opaque(key, _columns(node), null_intolerant(node))
            self._cache[key] = atom
        return atom

    def compile(self, dnf: KeyedDnf) -> CompiledDnf:
        """A keyed DNF with each literal's atom classified."""
        return [[(self.classify(node, key), pol) for key, node, pol in conj] for conj in dnf]

    def constraint(self, term: exp.Expression, t: Domain, f: Domain, exact: bool = True) -> Constraint:
        return Constraint(term.sql(DIALECT), self.kind(term), t, f, exact, _columns(term),
                          isinstance(term, exp.Column), null_intolerant(term))

    def _classify(self, node: exp.Expression) -> Constraint | Pair | Opaque:
        return _CLASSIFIER.visit(node, self)


Atom = Constraint | Pair | Opaque


class _AtomClassifier(PredicateVisitor[AtomTable, Atom]):
    """An atom of a DNF (a node that is not boolean structure) as a constraint on a term,
    a comparison of two terms, or an opaque atom compared by its canonical SQL. The
    argument is the atom table (it knows the terms' kinds)."""

    def visit_other(self, node: exp.Expression, arg: AtomTable) -> Atom:
        return Opaque(node.sql(DIALECT), _columns(node), null_intolerant(node))

    def visit_paren(self, node: exp.Expression, arg: AtomTable) -> Atom:
        return self.visit_other(node, arg)  # DNFs hold no parentheses; one is opaque here

    def visit_comparison(self, node: exp.Expression, arg: AtomTable) -> Atom:
        op = COMPARISON_OPS[type(node)]
        lit = fold(node.expression)
        if lit is None:
            if fold(node.this) is not None:
                return self.visit_other(node, arg)
            base, negated = _PAIR_BASE[op]
            return Pair(node.this.sql(DIALECT), node.expression.sql(DIALECT), base, negated, _columns(node),
                        (arg.kind(node.this), arg.kind(node.expression)),
                        (null_intolerant(node.this), null_intolerant(node.expression)),
                        (_columns(node.this), _columns(node.expression)))
        kind = arg.kind(node.this)
        if lit.kind == "null":
            return arg.constraint(node.this, Domain.empty(), Domain.empty())
        return arg.constraint(node.this, *_cmp_domains(op, key_of(lit, kind)))

    def visit_between(self, node: exp.Expression, arg: AtomTable) -> Atom:
        lo, hi = fold(node.args["low"]), fold(node.args["high"])
        if lo is None or hi is None:
            return self.visit_other(node, arg)
        kind = arg.kind(node.this)
        t, f = Domain.non_null(), Domain.empty()
        for op, lit in ((">=", lo), ("<=", hi)):
            if lit.kind == "null":
                t = Domain.empty()
            else:
                ti, fi = _cmp_domains(op, key_of(lit, kind))
                t, f = t.intersect(ti), f.union(fi)
        return arg.constraint(node.this, t, f)

    def visit_in(self, node: exp.Expression, arg: AtomTable) -> Atom:
        values = [v for v in (fold(e) for e in node.expressions) if v is not None]
        if len(values) != len(node.expressions):
            return self.visit_other(node, arg)
        kind = arg.kind(node.this)
        t = Domain.points([key_of(v, kind) for v in values if v.kind != "null"])
        has_null = any(v.kind == "null" for v in values)
        f = Domain.empty() if has_null else Domain(t.complement().spans, False)
        return arg.constraint(node.this, t, f)

    def visit_like(self, node: exp.Expression, arg: AtomTable) -> Atom:
        pattern = fold(node.expression)
        if pattern is None or pattern.kind != "string":
            return self.visit_other(node, arg)
        prefix, shape = like_prefix(pattern.value)
        if shape == "exact":
            t = Domain.points([prefix])
        else:
            succ = _string_successor(prefix)
            t = Domain((Span(prefix, True, succ, False) if succ is not None else Span(prefix, True, None, False),),
                       False)
        if shape == "general":
            return arg.constraint(node.this, t, Domain.non_null(), exact=False)
        return arg.constraint(node.this, t, Domain(t.complement().spans, False))

    def visit_is_null(self, node: exp.Expression, arg: AtomTable) -> Atom:
        return arg.constraint(node.this, Domain.only_null(), Domain.non_null())

    def visit_column(self, node: exp.Expression, arg: AtomTable) -> Atom:
        if arg.kind(node) == "bool":
            return arg.constraint(node, Domain.points([1]), Domain.points([0]))
        return self.visit_other(node, arg)


_CLASSIFIER = _AtomClassifier()


# ---------------------------------------------------------------- satisfiability


@dataclass
class _State:
    atoms: AtomTable
    domains: dict[str, tuple[str, Domain]] = field(default_factory=dict)
    truths: dict[str, frozenset[str]] = field(default_factory=dict)
    relations: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    pair_info: dict[tuple[str, str], Pair] = field(default_factory=dict)
    non_null: set[str] = field(default_factory=set)  # column names proven non-NULL

    def restrict(self, term: str, kind: str, dom: Domain) -> None:
        old = self.domains.get(term)
        self.domains[term] = (kind, dom if old is None else old[1].intersect(dom))

    def add(self, atom: Constraint | Pair | Opaque, polarity: str) -> None:
        if isinstance(atom, Constraint):
            dom = atom.domain(polarity)
            self.restrict(atom.term, atom.kind, dom)
            if not dom.null and atom.term_null_intolerant:
                self.non_null |= atom.term_columns
        elif isinstance(atom, Pair):
            rels = frozenset(r for r, truth in _REL_TRUTH[atom.op].items()
                             if (_FLIP_TRUTH[truth] if atom.negated else truth) in ALLOWED[polarity])
            key = (atom.left, atom.right)
            self.relations[key] = self.relations.get(key, frozenset(_REL_TRUTH["<"])) & rels
            self.pair_info[key] = atom
        else:
            allowed = ALLOWED[polarity]
            self.truths[atom.key] = self.truths.get(atom.key, frozenset("TFN")) & allowed
            if "N" not in allowed and atom.null_intolerant:
                self.non_null |= atom.columns

    def satisfiable(self) -> bool:
        if any(not t for t in self.truths.values()):
            return False
        for key, rels in self.relations.items():
            if not rels:
                return False
            pair = self.pair_info[key]
            if "NULL" not in rels:  # both operands are non-NULL
                for term, kind in zip(key, pair.kinds, strict=True):
                    self.restrict(term, kind, Domain.non_null())
                for cols, tolerant in zip(pair.side_columns, pair.null_intolerant, strict=True):
                    if tolerant:
                        self.non_null |= cols
        names = self.atoms.names
        for col in self.non_null:
            if col in names:
                self.restrict(*self.atoms.column_term(col), Domain.non_null())
        for kind, dom in self.domains.values():
            if dom.is_empty(is_discrete(kind)):
                return False
        # A pair that must be NULL while both operands are non-NULL is empty.
        for key, rels in self.relations.items():
            if rels == {"NULL"} and all(not self.domains.get(t, ("", Domain.everything()))[1].null for t in key):
                return False
        return True


CompiledDnf = list[list[tuple["Constraint | Pair | Opaque", str]]]


def conjunction_satisfiable(atoms: AtomTable, literals: list[tuple[Constraint | Pair | Opaque, str]],
                            extra: Sequence[tuple[str, str, Domain]] = ()) -> bool:
    """Is the conjunction of classified literals (atom, polarity) satisfiable?"""
    state = _State(atoms)
    for atom, polarity in literals:
        state.add(atom, polarity)
    for term, kind, dom in extra:
        state.restrict(term, kind, dom)
    return state.satisfiable()


def dnf_satisfiable(atoms: AtomTable, left: CompiledDnf, right: CompiledDnf,
                    extra: Sequence[tuple[str, str, Domain]] = ()) -> bool:
    """Is (OR left) AND (OR right) satisfiable (soundly: True unless proven empty)?"""
    if len(left) * len(right) > MAX_CONJUNCTIONS * MAX_CONJUNCTIONS:
        return True
    return any(conjunction_satisfiable(atoms, a + b, extra) for a in left for b in right)


# ---------------------------------------------------------------- many cuts at once


TermDomains = dict[str, tuple[str, Domain]]  # term → (kind, domain)


def conjunction_domains(atoms: AtomTable, literals: list[tuple[Constraint | Pair | Opaque, str]],
                        extra: Sequence[tuple[str, str, Domain]] = ()) -> tuple[bool, TermDomains] | None:
    """``conjunction_satisfiable`` and, when it holds, each term's domain in the conjunction (its
    NULL-intolerant parts' non-NULL restrictions applied). None when a comparison of two terms
    must be NULL: a cut making both terms non-NULL would then decide more than its own term's
    domain says (``bulk_sides`` leaves such a filter to the one-by-one answer)."""
    state = _State(atoms)
    for atom, polarity in literals:
        state.add(atom, polarity)
    for term, kind, dom in extra:
        state.restrict(term, kind, dom)
    if any(rels == {"NULL"} for rels in state.relations.values()):
        return None
    return state.satisfiable(), state.domains


def single_constraint(atoms: AtomTable, true_dnf: CompiledDnf | None,
                      not_true_dnf: CompiledDnf | None) -> Constraint | None:
    """The constraint a cut is, when its TRUE side is one constraint atom and its NOT-TRUE side
    the same atom NOT-TRUE, and what it forces non-NULL is its own term (then a filter's
    conjunction AND the cut is satisfiable iff the conjunction is and its domain of the term meets
    the cut's: ``bulk_sides``); None for any other cut."""
    if not true_dnf or not not_true_dnf or len(true_dnf) != 1 or len(not_true_dnf) != 1:
        return None
    if len(true_dnf[0]) != 1 or len(not_true_dnf[0]) != 1:
        return None
    (atom, pol), (other, other_pol) = true_dnf[0][0], not_true_dnf[0][0]
    if not isinstance(atom, Constraint) or atom is not other or pol != T or other_pol != NT:
        return None
    if atom.term_null_intolerant:  # non-NULL forced on a column whose term is not this one: not single
        for col in atom.term_columns:
            if col in atoms.names and atoms.column_term(col)[0] != atom.term:
                return None
    return atom


@dataclass(frozen=True)
class TermCut:
    """A cut each of whose sides is a domain of one term (``single_term``): the union over the
    side's conjunctions of the intersection of their literals' domains."""

    term: str
    kind: str
    true_dom: Domain
    not_true_dom: Domain

    def domain(self, polarity: str) -> Domain:
        return self.true_dom if polarity == T else self.not_true_dom


def single_term(atoms: AtomTable, true_dnf: CompiledDnf | None,
                not_true_dnf: CompiledDnf | None) -> Constraint | TermCut | None:
    """``single_constraint``, or else the cut as one term's domains when every literal of both
    sides is a constraint on that term (of one kind) forcing no other term non-NULL (a range
    ``t >= a AND t < b``, its NOT-TRUE side ``t < a OR t >= b OR t IS NULL``): a filter's
    conjunction AND a side's conjunction is then satisfiable iff the filter's conjunction is and
    its domain of the term meets the intersection of the side's literals' domains (what
    ``_State`` decides), so the side's answer over all its conjunctions is whether the filter's
    domain meets their union (``bulk_sides``). None for any other cut."""
    one = single_constraint(atoms, true_dnf, not_true_dnf)
    if one is not None or not true_dnf or not not_true_dnf:
        return one
    literals = [lit for dnf in (true_dnf, not_true_dnf) for conj in dnf for lit in conj]
    if any(not conj for dnf in (true_dnf, not_true_dnf) for conj in dnf):
        return None
    first = literals[0][0]
    if not isinstance(first, Constraint):
        return None
    for atom, _ in literals:
        if not isinstance(atom, Constraint) or atom.term != first.term or atom.kind != first.kind:
            return None
        if atom.term_null_intolerant and any(col in atoms.names and atoms.column_term(col)[0] != atom.term
                                             for col in atom.term_columns):
            return None
    sides = []
    for dnf in (true_dnf, not_true_dnf):
        union = Domain.empty()
        for conj in dnf:
            doms = [atom.domain(polarity) for atom, polarity in conj if isinstance(atom, Constraint)]
            dom = doms[0]
            for other in doms[1:]:
                dom = dom.intersect(other)
            union = union.union(dom)
        sides.append(union)
    return TermCut(first.term, first.kind, sides[0], sides[1])


class _Ranks:
    """Span ends of one term's domains as integers, so that intersections are numpy max/min: the
    values (after a discrete kind's ends are made closed integers) ranked; a closed end is 2·rank,
    an open lower end 2·rank + 1 and an open upper end 2·rank − 1, no lower end −1, no upper end
    above all. A span is non-empty iff its lower code ≤ its upper code (``Span.is_empty``)."""

    def __init__(self, kind: str, domains: Sequence[Domain]):
        self.discrete = is_discrete(kind)
        values = set()
        for d in domains:
            for s in d.spans:
                lo, _, hi, _ = self.ends(s)
                if lo is not None:
                    values.add(lo)
                if hi is not None:
                    values.add(hi)
        self.rank = {v: i for i, v in enumerate(sorted(values))}
        self.top = 2 * len(self.rank) + 1

    def ends(self, s: Span) -> tuple[Any, bool, Any, bool]:
        if not self.discrete:
            return s.lo, s.lo_closed, s.hi, s.hi_closed
        return (None if s.lo is None else _discrete_lo(s.lo, s.lo_closed), True,
                None if s.hi is None else _discrete_hi(s.hi, s.hi_closed), True)

    def codes(self, d: Domain) -> tuple[list[int], list[int]]:
        los, his = [], []
        for s in d.spans:
            lo, lo_c, hi, hi_c = self.ends(s)
            los.append(-1 if lo is None else 2 * self.rank[lo] + (0 if lo_c else 1))
            his.append(self.top if hi is None else 2 * self.rank[hi] - (0 if hi_c else 1))
        return los, his


class _NotIntegral(Exception):
    pass


def _discrete_lo(v: Any, closed: bool) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, Fraction)):
        raise _NotIntegral()
    return math.ceil(v) if closed else math.floor(v) + 1


def _discrete_hi(v: Any, closed: bool) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, Fraction)):
        raise _NotIntegral()
    return math.floor(v) if closed else math.ceil(v) - 1


@dataclass
class _CutGroup:
    """The single-constraint cuts on one term: their columns and each side's spans as codes."""

    kind: str
    cols: np.ndarray  # the cuts' columns in the answer
    ranks: _Ranks
    span_lo: tuple[np.ndarray, np.ndarray]  # per side (TRUE, NOT-TRUE): every span's lower code
    span_hi: tuple[np.ndarray, np.ndarray]
    span_cut: tuple[np.ndarray, np.ndarray]  # the span's cut, 0..len(cols)-1
    null: tuple[np.ndarray, np.ndarray]  # may the side hold NULL
    alone: tuple[np.ndarray, np.ndarray]  # the side alone non-empty

    def meets(self, side: int, dom: Domain) -> np.ndarray:
        """Per cut: does ``dom`` meet the side's domain?"""
        los, his = self.ranks.codes(dom)
        n = len(self.cols)
        out = self.null[side] & dom.null
        if los and len(self.span_lo[side]):
            lo = np.maximum(self.span_lo[side][:, None], np.asarray(los)[None, :])
            hi = np.minimum(self.span_hi[side][:, None], np.asarray(his)[None, :])
            hit = (lo <= hi).any(axis=1)
            out = out | (np.bincount(self.span_cut[side][hit], minlength=n) > 0)
        return out


def bulk_sides(atoms: AtomTable, filters: Sequence[tuple[CompiledDnf, Sequence[tuple[str, str, Domain]]]],
               cuts: Sequence[Constraint | TermCut]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two satisfiability questions of every filter with every single-term cut
    (``single_term``), vectorized over the cuts: a filter's conjunction AND the cut's side
    is satisfiable iff the conjunction is (``conjunction_domains``, asked once per conjunction)
    and its domain of the cut's term meets the side's domain (all conjunctions of the filter
    OR-ed), the answers ``dnf_satisfiable`` gives pair by pair. ``filters``: (compiled DNF, the
    joins' key domains), each ``TableFilter``'s own. Returns (may_true, may_not_true, answered),
    each Q × C bool; what is not answered (a filter with a comparison that must be NULL, a cut
    on a term where some end is no integer in a discrete universe) is left to
    ``TableFilter.sides``."""
    q, c = len(filters), len(cuts)
    may = (np.zeros((q, c), dtype=bool), np.zeros((q, c), dtype=bool))
    answered = np.zeros((q, c), dtype=bool)
    if q == 0:
        return may[0], may[1], answered
    states: list[list[dict[str, tuple[str, Domain]]] | None] = []
    by_term: dict[tuple[str, str], list[int]] = {}
    for j, atom in enumerate(cuts):
        by_term.setdefault((atom.term, atom.kind), []).append(j)
    for own, extra in filters:
        found = [conjunction_domains(atoms, literals, extra) for literals in own]
        states.append(None if any(got is None for got in found) else [got[1] for got in found if got and got[0]])
    groups = []
    for (term, kind), members in by_term.items():
        doms = [cuts[j].domain(p) for j in members for p in (T, NT)]
        doms += [st[term][1] for conj in states if conj for st in conj if term in st]
        try:
            ranks = _Ranks(kind, doms)
        except _NotIntegral:
            continue  # these cuts are left to the one-by-one answers
        groups.append((term, _cut_group(kind, np.asarray(members, dtype=np.int64), ranks, cuts)))
    for i, conj in enumerate(states):
        if conj is None:
            continue
        for term, g in groups:
            answered[i, g.cols] = True
            if not conj:
                continue  # no row satisfies the filter: neither side
            for side in (0, 1):
                if not any(term in st for st in conj):
                    hit = g.alone[side]
                else:
                    hit = np.zeros(len(g.cols), dtype=bool)
                    for st in conj:
                        hit |= g.meets(side, st[term][1]) if term in st else g.alone[side]
                may[side][i, g.cols] = hit
    return may[0], may[1], answered


def _cut_group(kind: str, cols: np.ndarray, ranks: _Ranks, cuts: Sequence[Constraint | TermCut]) -> _CutGroup:
    fields: dict[str, list] = {"lo": [], "hi": [], "cut": [], "null": [], "alone": []}
    for pol in (T, NT):
        los: list[int] = []
        his: list[int] = []
        which: list[int] = []
        nulls, alone = [], []
        for k, j in enumerate(cols):
            dom = cuts[int(j)].domain(pol)
            lo, hi = ranks.codes(dom)
            los += lo
            his += hi
            which += [k] * len(lo)
            nulls.append(dom.null)
            alone.append(dom.null or any(a <= b for a, b in zip(lo, hi)))
        fields["lo"].append(np.asarray(los, dtype=np.int64))
        fields["hi"].append(np.asarray(his, dtype=np.int64))
        fields["cut"].append(np.asarray(which, dtype=np.int64))
        fields["null"].append(np.asarray(nulls, dtype=bool))
        fields["alone"].append(np.asarray(alone, dtype=bool))
    return _CutGroup(kind, cols, ranks, (fields["lo"][0], fields["lo"][1]), (fields["hi"][0], fields["hi"][1]),
                     (fields["cut"][0], fields["cut"][1]), (fields["null"][0], fields["null"][1]),
                     (fields["alone"][0], fields["alone"][1]))
