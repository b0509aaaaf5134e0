"""The predicate language of `expr/`, declared once, and the one visitor that walks it.

Every stage walks the same sqlglot nodes: `bind.py` (raw predicate → canonical form),
`evaluate.py` (canonical form → Arrow vectors), `values.py` (literal-only terms → typed
values), `sides.py` (canonical form → DNF over atoms; atoms → constraints) and `iceberg.py`
(canonical form → a pyiceberg expression). `NODE_KINDS` is the node set they accept,
`kind_of` the one dispatch, and each stage is a `PredicateVisitor` with one `visit_<kind>`
method per kind it models (shaped like pyiceberg's `expressions/visitors.py`).

Two differences from pyiceberg's visitors, both forced by SQL:
- a kind depends on a node's arguments as well as its class (`TRUE`/`FALSE` are one sqlglot
  class, `x IN (SELECT ...)` is an `In` like an IN list, `IS NULL` is an `Is`), so the
  dispatch is a function of the node, not `functools.singledispatch` on its type;
- the visitor receives the node and one argument passed down (the batch being evaluated,
  the polarity of a three-valued literal) and decides itself which children to visit:
  NOT pushed down to the atoms changes the argument of its child. `PolarityVisitor` does
  that push-down once, for the analyses that need it (DNF, the pyiceberg translation).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from sqlglot import exp

__all__ = [
    "ALLOWED",
    "ARITHMETIC_OPS",
    "COMPARISON_OPS",
    "DATE_PARTS",
    "NEGATE",
    "NF",
    "NODE_KINDS",
    "NONDETERMINISTIC",
    "NT",
    "F",
    "Kind",
    "PolarityVisitor",
    "PredicateVisitor",
    "T",
    "kind_of",
]


class Kind(enum.Enum):
    """What a node is in the predicate language; `PredicateVisitor.visit_<value>` handles it."""

    # boolean structure
    AND = "and"
    OR = "or"
    NOT = "not"
    PAREN = "paren"
    TRUE = "true"
    FALSE = "false"
    NULL = "null"
    # predicates (the atoms of the structure)
    COMPARISON = "comparison"  # = <> < <= > >=, see COMPARISON_OPS
    BETWEEN = "between"
    IN = "in"  # IN (literal list)
    IN_SUBQUERY = "in_subquery"  # IN (SELECT ...): a join, not a single-table predicate
    LIKE = "like"
    LIKE_ESCAPE = "like_escape"  # s LIKE p ESCAPE e
    IS_NULL = "is_null"
    IS = "is"  # any other IS (not modeled)
    # terms
    COLUMN = "column"
    LITERAL = "literal"
    INTERVAL = "interval"
    ARITHMETIC = "arithmetic"  # + - * /, see ARITHMETIC_OPS
    NEG = "neg"
    ABS = "abs"
    EXTRACT = "extract"
    DATE_PART = "date_part"  # year(d), month(d), ..., see DATE_PARTS
    DATE_ADD = "date_add"  # date_add / date_sub (folded on literals only)
    TO_DATE = "to_date"  # sqlglot's TsOrDsToDate wrapper around the argument of year(d), ...
    SUBSTRING = "substring"
    LENGTH = "length"
    CAST = "cast"  # CAST, TRY_CAST (and sqlglot's DATE '...' / TIMESTAMP '...' literals)
    CASE = "case"
    IF = "if"
    # known and refused by bind.py, each with its own reason
    SUBQUERY = "subquery"  # (SELECT ...), EXISTS (...)
    UDF = "udf"  # a function sqlglot does not know
    NONDETERMINISTIC = "nondeterministic"  # rand(), current_date, ...
    NULL_SAFE_EQ = "null_safe_eq"  # <=>
    # anything else: each stage says what it does with it (error, opaque atom, AlwaysTrue)
    OTHER = "other"


COMPARISON_OPS: dict[type[exp.Expression], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
ARITHMETIC_OPS: dict[type[exp.Expression], str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}
DATE_PARTS: dict[type[exp.Expression], str] = {
    exp.Year: "YEAR", exp.Month: "MONTH", exp.Day: "DAY", exp.DayOfMonth: "DAY", exp.Quarter: "QUARTER"}

# Expressions whose value changes between evaluations: a cut made of them would route rows
# differently from how the query later filters them.
NONDETERMINISTIC: tuple[type[exp.Expression], ...] = (
    exp.Rand, exp.Randn, exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime, exp.Uuid,
    *(getattr(exp, n) for n in ("CurrentDatetime", "Unixtime") if hasattr(exp, n)))

# The accepted node set. A subclass of a listed class has its kind (as with isinstance);
# `kind_of` refines the classes marked below by their arguments.
NODE_KINDS: dict[type[exp.Expression], Kind] = {
    exp.And: Kind.AND,
    exp.Or: Kind.OR,
    exp.Not: Kind.NOT,
    exp.Paren: Kind.PAREN,
    exp.Boolean: Kind.TRUE,  # refined: TRUE / FALSE
    exp.Null: Kind.NULL,
    **dict.fromkeys(COMPARISON_OPS, Kind.COMPARISON),
    exp.Between: Kind.BETWEEN,
    exp.In: Kind.IN,  # refined: IN / IN_SUBQUERY
    exp.Like: Kind.LIKE,
    exp.Escape: Kind.LIKE_ESCAPE,  # refined: LIKE_ESCAPE / OTHER
    exp.Is: Kind.IS_NULL,  # refined: IS_NULL / IS
    exp.Column: Kind.COLUMN,
    exp.Literal: Kind.LITERAL,
    exp.Interval: Kind.INTERVAL,
    **dict.fromkeys(ARITHMETIC_OPS, Kind.ARITHMETIC),
    exp.Neg: Kind.NEG,
    exp.Abs: Kind.ABS,
    exp.Extract: Kind.EXTRACT,
    **dict.fromkeys(DATE_PARTS, Kind.DATE_PART),
    exp.TsOrDsAdd: Kind.DATE_ADD,
    exp.DateAdd: Kind.DATE_ADD,
    exp.DateSub: Kind.DATE_ADD,
    exp.TsOrDsToDate: Kind.TO_DATE,
    exp.Substring: Kind.SUBSTRING,
    exp.Length: Kind.LENGTH,
    exp.Cast: Kind.CAST,
    exp.Case: Kind.CASE,
    exp.If: Kind.IF,
    exp.Subquery: Kind.SUBQUERY,
    exp.Select: Kind.SUBQUERY,
    exp.Exists: Kind.SUBQUERY,
    exp.Anonymous: Kind.UDF,
    **dict.fromkeys(NONDETERMINISTIC, Kind.NONDETERMINISTIC),
    exp.NullSafeEQ: Kind.NULL_SAFE_EQ,
}

# Kind by exact class, filled on first sight of a class from its MRO (a subclass of a
# listed class gets that class's kind, as isinstance would).
_BY_CLASS: dict[type, Kind] = dict(NODE_KINDS)


def _class_kind(cls: type) -> Kind:
    kind = _BY_CLASS.get(cls)
    if kind is None:
        kind = next((NODE_KINDS[c] for c in cls.__mro__ if c in NODE_KINDS), Kind.OTHER)
        _BY_CLASS[cls] = kind
    return kind


def kind_of(node: exp.Expr) -> Kind:
    """The kind of `node` in the predicate language (Kind.OTHER if it is not in it)."""
    kind = _BY_CLASS.get(type(node)) or _class_kind(type(node))
    if kind is Kind.TRUE:
        return Kind.TRUE if node.this else Kind.FALSE
    if kind is Kind.IN:
        return Kind.IN if node.args.get("query") is None else Kind.IN_SUBQUERY
    if kind is Kind.IS_NULL:
        return Kind.IS_NULL if isinstance(node.expression, exp.Null) else Kind.IS
    if kind is Kind.LIKE_ESCAPE:
        return Kind.LIKE_ESCAPE if isinstance(node.this, exp.Like) else Kind.OTHER
    return kind


A = TypeVar("A")
R = TypeVar("R")


class PredicateVisitor(Generic[A, R]):
    """One `visit_<kind>(node, arg)` per kind of the language. Unless a visitor overrides
    it, a kind is handled by `visit_other`, and a parenthesis is transparent. The methods
    visit the children they need with `self.visit(child, arg)`."""

    _methods: ClassVar[dict[Kind, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {kind: getattr(cls, f"visit_{kind.value}") for kind in Kind}

    def visit(self, node: exp.Expression, arg: A) -> R:
        result: R = self._methods[kind_of(node)](self, node, arg)
        return result

    def visit_other(self, node: exp.Expression, arg: A) -> R:
        raise NotImplementedError(f"{type(self).__name__} cannot visit {type(node).__name__}")

    def visit_paren(self, node: exp.Expression, arg: A) -> R:
        return self.visit(node.this, arg)

    # Everything else falls back to visit_other.
    def visit_and(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_or(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_not(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_true(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_false(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_null(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_comparison(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_between(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_in(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_in_subquery(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_like(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_like_escape(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_is_null(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_is(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_column(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_literal(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_interval(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_arithmetic(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_neg(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_abs(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_extract(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_date_part(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_date_add(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_to_date(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_substring(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_length(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_cast(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_case(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_if(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_subquery(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_udf(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_nondeterministic(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)

    def visit_null_safe_eq(self, node: exp.Expression, arg: A) -> R:
        return self.visit_other(node, arg)


# Polarities of a three-valued literal: what the node evaluates to. T (TRUE), F (FALSE),
# NT (FALSE or NULL), NF (TRUE or NULL). NOT swaps T↔F and NT↔NF.
T, F, NT, NF = "T", "F", "NT", "NF"
NEGATE = {T: F, F: T, NT: NF, NF: NT}
# Truth values a node may take under each polarity ("N" = NULL).
ALLOWED = {T: frozenset("T"), F: frozenset("F"), NT: frozenset("FN"), NF: frozenset("TN")}


class PolarityVisitor(PredicateVisitor[str, R]):
    """A visitor of "the node has this polarity", with NOT pushed down to the atoms.

    The boolean structure is walked here; a subclass says what an atom with a polarity
    is (`visit_comparison`, ..., `visit_other`) and how results combine: `visit_all` when
    the node has the polarity iff both parts have it (AND under T / NF, OR under F / NT),
    `visit_any` when iff either part has it, `visit_constant` for TRUE / FALSE / NULL.
    De Morgan holds for each polarity, so nothing is lost by pushing NOT down."""

    def visit_all(self, left: R, right: R) -> R:
        raise NotImplementedError

    def visit_any(self, left: R, right: R) -> R:
        raise NotImplementedError

    def visit_constant(self, holds: bool) -> R:
        """A constant that has the polarity (`holds`) or not."""
        raise NotImplementedError

    def visit_not(self, node: exp.Expression, arg: str) -> R:
        return self.visit(node.this, NEGATE[arg])

    def visit_and(self, node: exp.Expression, arg: str) -> R:
        left, right = self.visit(node.this, arg), self.visit(node.expression, arg)
        return self.visit_all(left, right) if arg in (T, NF) else self.visit_any(left, right)

    def visit_or(self, node: exp.Expression, arg: str) -> R:
        left, right = self.visit(node.this, arg), self.visit(node.expression, arg)
        return self.visit_any(left, right) if arg in (T, NF) else self.visit_all(left, right)

    def visit_true(self, node: exp.Expression, arg: str) -> R:
        return self.visit_constant("T" in ALLOWED[arg])

    def visit_false(self, node: exp.Expression, arg: str) -> R:
        return self.visit_constant("F" in ALLOWED[arg])

    def visit_null(self, node: exp.Expression, arg: str) -> R:
        return self.visit_constant("N" in ALLOWED[arg])
