"""A query filter as a pyiceberg expression, for Iceberg's own file pruning.

`to_pyiceberg(filter, schema)` returns an expression IMPLIED by the filter: every row that
satisfies the filter under Spark SQL semantics also satisfies the result, so
`plan_files(row_filter=...)` (min/max metrics, partition projections) never drops a file
that holds a matching row (ARCHITECTURE invariant 1). It is a weakening, not a
translation: whatever cannot be mapped exactly becomes `AlwaysTrue`.

How: the canonical filter (bind.py) is walked with a polarity, TRUE or FALSE (SQL's third
value, NULL, never makes a row pass a WHERE clause). NOT flips the polarity, so negation
is pushed down to the atoms and no Iceberg `Not` is ever produced (Iceberg's row semantics
of NOT over NULL differ from SQL's). A FALSE comparison proves its column non-NULL, so
`NOT (x < 5)` maps to `x >= 5` exactly.

Float and double columns: Spark orders NaN above every number, has NaN = NaN and
-0.0 = 0.0, while Iceberg's metrics evaluator reads `x > c` as false on NaN (a file of NaNs
only is pruned) and Java Iceberg orders -0.0 below 0.0 in bounds. So a comparison NaN
satisfies keeps the files that may hold NaN: `x > c` → `x > c OR isnan(x)` (a file is judged
by its bounds only when its NaN count is known to be 0; pyiceberg's writer records none);
`x = NaN` → `isnan(x)`, `x < NaN` → `notnan(x)`; `x < c`, `x <= c`, `x = c` map as they are,
and in an AND with one of them on the same column the `OR isnan(x)` goes (`x >= 40 AND x < 43`).
A zero literal is written as the zero that makes the bound hold for both zeros under Java's
order too (`x <= 0` → `x <= +0.0`, `x < 0` → `x < -0.0`), an infinite one as a comparison with
the largest finite value (`x >= inf` → `x > MAX`), so the JVM planning with the same
expression keeps the same files. A literal that is not a value of the column (a decimal or
integer literal against a double, or a double against a FLOAT column: Spark rounds it to the
comparison's type, or widens the column) is replaced by its two neighbours on the column's
grid, whichever way Spark rounds it (`f < 1.81` on a FLOAT → `f < 1.8100001f`, `x = 0.1` with
an exact 0.1 between two doubles → `lo <= x <= hi`). `x <> c` and `NOT IN` map to
`x IS NOT NULL` (the metrics evaluator never prunes `!=`). With `float_bounds=False` floats
are left out (AlwaysTrue): for a filter Arrow evaluates on rows, whose row-group statistics
drop NaN rows when a group's min equals its max, and whose `is_in` tells -0.0 from 0.0.

Deliberately not mapped (→ AlwaysTrue):
- terms other than a plain column (arithmetic, casts, functions) and column-vs-column;
- join filters: they constrain other tables;
- the FALSE side of a non-exact LIKE (`NOT s LIKE 'ab%'` → `s IS NOT NULL`).

Literals are typed for the column: a decimal literal with more scale than a decimal (or
integer) column is rounded the sound way for the operator (`x < 24.555` → `x <= 24.55`,
`x = 24.555` → AlwaysFalse); literals outside the column's range give AlwaysTrue; dates
are days, timestamps microseconds (timestamptz: UTC instants).
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    Or,
    Reference,
    StartsWith,
)
from pyiceberg.expressions.literals import (
    BooleanLiteral,
    DateLiteral,
    DecimalLiteral,
    DoubleLiteral,
    Literal,
    LongLiteral,
    StringLiteral,
    TimestampLiteral,
)
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)
from sqlglot import exp

from pando_iceberg.expr.filters import TableFilter
from pando_iceberg.expr.sides import like_prefix
from pando_iceberg.expr.values import TypedValue, fold
from pando_iceberg.expr.visitor import COMPARISON_OPS, PolarityVisitor, T

__all__ = ["factor_common", "to_pyiceberg"]

# The operator that is TRUE exactly where `op` is FALSE (both operands non-NULL).
_NEGATED = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_INT_RANGE: dict[type[IcebergType], tuple[int, int]] = {
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}


def to_pyiceberg(filter: TableFilter, iceberg_schema: Schema, *, float_bounds: bool = True) -> BooleanExpression:
    """A pyiceberg expression implied by the single-table part of `filter` (a sound
    weakening; see the module docstring). Column references use `iceberg_schema`'s field
    names (columns are matched case-insensitively, top-level fields only).
    `float_bounds=False`: comparisons on float and double columns are left out, for a filter
    Arrow applies to rows (pyiceberg's reader)."""
    if filter.is_true_expr():
        return AlwaysTrue()
    fields = {f.name.lower(): f for f in iceberg_schema.fields}
    return factor_common(_Mapper(fields, float_bounds).visit(filter.expr, T))


def _parts(expr: BooleanExpression, kind: type[And] | type[Or]) -> list[BooleanExpression]:
    """The operands of nested ``kind`` (And or Or) nodes, in order."""
    if isinstance(expr, (And, Or)) and isinstance(expr, kind):
        return [*_parts(expr.left, kind), *_parts(expr.right, kind)]
    return [expr]


def _join(parts: list[BooleanExpression], kind: type[And] | type[Or]) -> BooleanExpression:
    return parts[0] if len(parts) == 1 else kind(*parts)


def factor_common(expr: BooleanExpression) -> BooleanExpression:
    """``expr`` with the conjuncts every branch of an OR shares taken out of it, through the whole
    tree: ``(a ∧ c) ∨ (b ∧ c)`` → ``c ∧ (a ∨ b)``, and ``c ∨ (c ∧ a)`` → ``c``. Equivalent in
    Boolean and in Kleene logic, hence for pyiceberg's metrics evaluator, which combines one
    "may match" answer per predicate with AND and OR: the same files, each shared predicate judged
    once per file instead of once per branch (TPC-H Q19: l_shipmode and l_shipinstruct in each of
    three branches, 12 predicates a file → 8)."""
    if isinstance(expr, And):  # rebuilt only when a side changed (pyiceberg's And simplifies again)
        left, right = factor_common(expr.left), factor_common(expr.right)
        return expr if left is expr.left and right is expr.right else And(left, right)
    if not isinstance(expr, Or):
        return expr
    disjuncts = _parts(expr, Or)
    factored = [factor_common(d) for d in disjuncts]
    branches = [_parts(d, And) for d in factored]
    common: list[BooleanExpression] = []
    for c in branches[0]:
        if c not in common and all(c in b for b in branches[1:]):  # ``in``: identity first, then ==
            common.append(c)
    if not common:
        if all(f is d for f, d in zip(factored, disjuncts)):
            return expr
        return _join(factored, Or)
    rest = [[c for c in b if c not in common] for b in branches]
    if any(not r for r in rest):  # a branch is the shared part alone: absorption
        return _join(common, And)
    return And(_join(common, And), factor_common(_join([_join(r, And) for r in rest], Or)))


class _Mapper(PolarityVisitor[BooleanExpression]):
    """An expression satisfied by every row on which the node has the polarity, T (TRUE)
    or F (FALSE)."""

    def __init__(self, fields: dict[str, NestedField], float_bounds: bool = True):
        self.fields = fields
        self.float_bounds = float_bounds

    def visit_all(self, left: BooleanExpression, right: BooleanExpression) -> BooleanExpression:
        return _nan_excluded(And(left, right))

    def visit_any(self, left: BooleanExpression, right: BooleanExpression) -> BooleanExpression:
        return Or(left, right)

    def visit_constant(self, holds: bool) -> BooleanExpression:
        return AlwaysTrue() if holds else AlwaysFalse()

    def visit_other(self, node: exp.Expression, arg: str) -> BooleanExpression:
        return AlwaysTrue()

    def visit_comparison(self, node: exp.Expression, arg: str) -> BooleanExpression:
        op = COMPARISON_OPS[type(node)]
        return self.compare(node.this, op if arg == T else _NEGATED[op], fold(node.expression))

    def visit_between(self, node: exp.Expression, arg: str) -> BooleanExpression:
        truth = arg == T
        low = self.compare(node.this, ">=" if truth else "<", fold(node.args["low"]))
        high = self.compare(node.this, "<=" if truth else ">", fold(node.args["high"]))
        return _nan_excluded(And(low, high)) if truth else Or(low, high)

    def visit_in(self, node: exp.Expression, arg: str) -> BooleanExpression:
        return self.in_list(node.this, [fold(e) for e in node.expressions], arg == T)

    def visit_like(self, node: exp.Expression, arg: str) -> BooleanExpression:
        return self.like(node.this, fold(node.expression), arg == T)

    def visit_is_null(self, node: exp.Expression, arg: str) -> BooleanExpression:
        field = self.field_of(node.this)
        if field is None:
            return AlwaysTrue()
        term = Reference(field.name)
        return IsNull(term=term) if arg == T else NotNull(term=term)

    def visit_column(self, node: exp.Expression, arg: str) -> BooleanExpression:
        field = self.field_of(node)
        if field is None or not isinstance(field.field_type, BooleanType):
            return AlwaysTrue()
        return EqualTo(term=Reference(field.name), value=BooleanLiteral(arg == T))

    def field_of(self, term: exp.Expression) -> NestedField | None:
        if not isinstance(term, exp.Column):
            return None
        return self.fields.get(term.name.lower())

    # ------------------------------------------------------------ comparisons

    def compare(self, term: exp.Expression, op: str, lit: TypedValue | None) -> BooleanExpression:
        """`term op lit` (TRUE), weakened to an Iceberg predicate."""
        field = self.field_of(term)
        if field is None or lit is None:
            return AlwaysTrue()
        if lit.kind == "null":
            return AlwaysFalse()  # a comparison with NULL is never TRUE (nor FALSE)
        t = field.field_type
        if isinstance(t, (FloatType, DoubleType)):
            return _compare_float(field.name, t, op, lit) if self.float_bounds else AlwaysTrue()
        grid = _grid_of(t)
        if grid is not None:
            return _compare_on_grid(field.name, t, grid, op, lit)
        value = _exact_literal(t, lit)
        if value is None:
            return AlwaysTrue()
        if isinstance(t, BooleanType):
            if op in ("=", "<>"):
                return EqualTo(term=Reference(field.name), value=BooleanLiteral(bool(value.value) == (op == "=")))
            return AlwaysTrue()
        return _PREDICATE[op](term=Reference(field.name), value=value)

    def in_list(self, term: exp.Expression, values: list[TypedValue | None], truth: bool) -> BooleanExpression:
        field = self.field_of(term)
        known = [v for v in values if v is not None]
        if field is None or len(known) < len(values):
            return AlwaysTrue()
        has_null = any(v.kind == "null" for v in known)
        if not truth and has_null:
            return AlwaysFalse()  # x NOT IN (..., NULL) is never TRUE
        t = field.field_type
        if isinstance(t, (FloatType, DoubleType)):
            if not self.float_bounds:
                return AlwaysTrue()
            if not truth:  # NaN and every other non-NULL value may be outside the list
                return NotNull(term=Reference(field.name))
            return _float_in(field.name, t, [v for v in known if v.kind != "null"])
        lits: list[Literal[Any]] = []
        for v in known:
            if v.kind == "null":
                continue
            lit = _member_literal(t, v)
            if lit is _UNMAPPABLE:
                return AlwaysTrue()
            if lit is not None:  # None: no value of the column equals it
                lits.append(lit)
        ref = Reference(field.name)
        if truth:
            if not lits:
                return AlwaysFalse()
            return EqualTo(term=ref, value=lits[0]) if len(lits) == 1 else In(term=ref, values=set(lits))
        if not lits:
            return NotNull(term=ref)
        return NotEqualTo(term=ref, value=lits[0]) if len(lits) == 1 else NotIn(term=ref, values=set(lits))

    def like(self, term: exp.Expression, pattern: TypedValue | None, truth: bool) -> BooleanExpression:
        field = self.field_of(term)
        if field is None or pattern is None or pattern.kind != "string" or not isinstance(field.field_type,
                                                                                           StringType):
            return AlwaysTrue()
        prefix, shape = like_prefix(pattern.value)
        ref = Reference(field.name)
        if shape == "exact":
            return (EqualTo if truth else NotEqualTo)(term=ref, value=StringLiteral(prefix))
        if truth and prefix:
            return StartsWith(term=ref, value=StringLiteral(prefix))
        return NotNull(term=ref)  # LIKE is TRUE or FALSE only on non-NULL strings


_PREDICATE = {"=": EqualTo, "<>": NotEqualTo, "<": LessThan, "<=": LessThanOrEqual, ">": GreaterThan,
              ">=": GreaterThanOrEqual}

_UNMAPPABLE: Any = object()


def _grid_of(t: IcebergType) -> int | None:
    """The scale of a discrete numeric column (integers: 0), None for other types."""
    if isinstance(t, (IntegerType, LongType)):
        return 0
    if isinstance(t, DecimalType):
        return t.scale
    return None


def _in_range(t: IcebergType, unscaled: int) -> bool:
    if isinstance(t, DecimalType):
        return abs(unscaled) < 10**t.precision
    lo, hi = _INT_RANGE[type(t)]
    return lo <= unscaled <= hi


def _grid_literal(t: IcebergType, unscaled: int, scale: int) -> Literal[Any]:
    if isinstance(t, DecimalType):
        # Exactly the column's scale: pyiceberg refuses Decimal('24') for decimal(15,2).
        return DecimalLiteral(Decimal(unscaled).scaleb(-scale))
    return LongLiteral(unscaled)


def _unscaled(lit: TypedValue, scale: int) -> Fraction | None:
    """The literal in units of 10^-scale (exact), None if it is not an exact number."""
    if lit.kind == "int":
        return Fraction(lit.value) * 10**scale
    if lit.kind == "decimal" and lit.value.is_finite():
        return Fraction(lit.value) * 10**scale
    return None


def _compare_on_grid(name: str, t: IcebergType, scale: int, op: str, lit: TypedValue) -> BooleanExpression:
    """`name op lit` for an integer or decimal column, whose values are the multiples of
    10^-scale: a literal between two grid points is rounded the way that keeps every
    matching value (`x < 24.555` → `x <= 24.55`, `x > 24.555` → `x >= 24.56`)."""
    u = _unscaled(lit, scale)
    if u is None:
        return AlwaysTrue()
    if u.denominator == 1:
        target, mapped_op = int(u), op
    elif op == "=":
        return AlwaysFalse()  # no column value equals it
    elif op == "<>":
        return NotNull(term=Reference(name))  # every non-NULL value differs from it
    elif op in ("<", "<="):
        target, mapped_op = math.floor(u), "<="
    else:
        target, mapped_op = math.ceil(u), ">="
    if not _in_range(t, target):
        return AlwaysTrue()
    return _PREDICATE[mapped_op](term=Reference(name), value=_grid_literal(t, target, scale))


def _float_value(lit: TypedValue) -> Fraction | float | None:
    """A numeric literal's exact value: a Fraction, or a float for NaN and the infinities;
    None for a literal of another kind."""
    v = lit.value
    if lit.kind == "int":
        return Fraction(v)
    if lit.kind == "decimal":
        if v.is_nan():
            return math.nan
        return Fraction(v) if v.is_finite() else math.copysign(math.inf, v)
    if lit.kind == "float":
        return Fraction(v) if math.isfinite(v) else float(v)
    return None


def _float_bracket(r: Fraction | float, t: IcebergType) -> tuple[float, float]:
    """The values of the column's type (FLOAT: float32, else double; the infinities included)
    next to the number ``r``: (r, r) when it is one, else the largest below and the smallest
    above it. Spark compares with ``r`` rounded to one of them (an integer against a FLOAT
    column, a decimal against a double, ...) or widens a FLOAT column to double, whose values
    between the two are none: either way a row's result is that of a comparison with the
    one or the other."""
    if isinstance(r, float):
        return r, r
    kind = np.float32 if isinstance(t, FloatType) else np.float64
    try:
        d = float(r)
    except OverflowError:
        d = math.inf if r > 0 else -math.inf
    with np.errstate(over="ignore"):  # beyond the largest finite value: infinity
        c = kind(d)  # the float32 nearest the nearest double: one of the two neighbours
    if math.isinf(c):
        side = 1 if c > 0 else -1
    else:
        exact = Fraction(float(c))
        side = (exact > r) - (exact < r)
    if side == 0:
        return float(c), float(c)
    with np.errstate(over="ignore"):
        other = np.nextafter(c, kind(-math.inf if side > 0 else math.inf))
    return (float(other), float(c)) if side > 0 else (float(c), float(other))


def _float_max(t: IcebergType) -> float:
    return float(np.finfo(np.float32).max) if isinstance(t, FloatType) else sys.float_info.max


def _at_most(name: str, t: IcebergType, bound: float, strict: bool) -> BooleanExpression:
    """Non-NaN values ``< bound`` (strict) or ``<= bound``, with finite literals only and a zero
    that includes or excludes both zeros under Java's order too."""
    ref, top = Reference(name), _float_max(t)
    if bound == math.inf:
        return LessThanOrEqual(term=ref, value=DoubleLiteral(top)) if strict else NotNaN(term=ref)
    if bound == -math.inf:
        return AlwaysFalse() if strict else LessThan(term=ref, value=DoubleLiteral(-top))
    if bound == 0:
        return LessThan(term=ref, value=DoubleLiteral(-0.0)) if strict else \
            LessThanOrEqual(term=ref, value=DoubleLiteral(0.0))
    return (LessThan if strict else LessThanOrEqual)(term=ref, value=DoubleLiteral(bound))


def _at_least(name: str, t: IcebergType, bound: float, strict: bool) -> BooleanExpression:
    """Non-NaN values ``> bound`` (strict) or ``>= bound`` (see :func:`_at_most`)."""
    ref, top = Reference(name), _float_max(t)
    if bound == -math.inf:
        return GreaterThanOrEqual(term=ref, value=DoubleLiteral(-top)) if strict else NotNaN(term=ref)
    if bound == math.inf:
        return AlwaysFalse() if strict else GreaterThan(term=ref, value=DoubleLiteral(top))
    if bound == 0:
        return GreaterThan(term=ref, value=DoubleLiteral(0.0)) if strict else \
            GreaterThanOrEqual(term=ref, value=DoubleLiteral(-0.0))
    return (GreaterThan if strict else GreaterThanOrEqual)(term=ref, value=DoubleLiteral(bound))


def _float_equal(name: str, t: IcebergType, r: Fraction | float) -> BooleanExpression:
    """Values Spark finds equal to the number ``r`` (NaN: the NaNs)."""
    if isinstance(r, float) and math.isnan(r):
        return IsNaN(term=Reference(name))
    lo, hi = _float_bracket(r, t)
    if lo == hi and math.isfinite(lo) and lo != 0:
        return EqualTo(term=Reference(name), value=DoubleLiteral(lo))
    return And(_at_least(name, t, lo, False), _at_most(name, t, hi, False))


def _compare_float(name: str, t: IcebergType, op: str, lit: TypedValue) -> BooleanExpression:
    """`name op lit` for a FLOAT or DOUBLE column, under Spark's order (NaN above every number)."""
    r = _float_value(lit)
    if r is None:
        return AlwaysTrue()
    ref = Reference(name)
    if isinstance(r, float) and math.isnan(r):
        return {"=": IsNaN(term=ref), ">=": IsNaN(term=ref), "<": NotNaN(term=ref), "<>": NotNaN(term=ref),
                "<=": NotNull(term=ref), ">": AlwaysFalse()}[op]
    if op == "=":
        return _float_equal(name, t, r)
    if op == "<>":
        return NotNull(term=ref)
    lo, hi = _float_bracket(r, t)
    if op in ("<", "<="):  # below the larger neighbour (strictly, for `<`): NaN is above it
        return _at_most(name, t, hi, op == "<")
    below = _at_least(name, t, lo, op == ">")  # above the smaller neighbour, or NaN
    return NotNull(term=ref) if isinstance(below, NotNaN) else Or(below, IsNaN(term=ref))


# Mapped predicates a NaN never satisfies (NaN is only kept through an explicit IsNaN).
_NAN_FAILS = (LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, EqualTo, In, NotNaN)


def _nan_excluded(expr: BooleanExpression) -> BooleanExpression:
    """``expr`` (an AND) with ``P OR isnan(x)`` conjuncts read as ``P`` where another conjunct
    fails on NaN in ``x`` (``x >= 40 AND x < 43``: a NaN is not below 43): the same rows, and a
    file whose NaN count is unknown is then judged by its bounds."""
    parts = _parts(expr, And)
    fails = {p.term.name for p in parts if isinstance(p, _NAN_FAILS) and isinstance(p.term, Reference)}
    if not fails:
        return expr
    out = [p.left if isinstance(p, Or) and isinstance(p.right, IsNaN) and isinstance(p.right.term, Reference)
           and p.right.term.name in fails else p for p in parts]
    return expr if all(a is b for a, b in zip(out, parts)) else _join(out, And)


def _float_in(name: str, t: IcebergType, values: list[TypedValue]) -> BooleanExpression:
    """`name IN (values)` (no NULL among them) for a FLOAT or DOUBLE column: the values that
    are numbers of the column as one In (never a zero: Arrow's is_in tells -0.0 from 0.0),
    the others as their equalities."""
    exact: set[float] = set()
    parts: list[BooleanExpression] = []
    for v in values:
        r = _float_value(v)
        if r is None:
            return AlwaysTrue()
        lo, hi = (r, r) if isinstance(r, float) else _float_bracket(r, t)
        if lo == hi and math.isfinite(lo) and lo != 0:
            exact.add(lo)
        else:  # NaN, an infinity, a zero, or no value of the column
            parts.append(_float_equal(name, t, r))
    ref = Reference(name)
    if len(exact) == 1:
        parts.insert(0, EqualTo(term=ref, value=DoubleLiteral(exact.pop())))
    elif exact:
        parts.insert(0, In(term=ref, values={DoubleLiteral(x) for x in exact}))
    return _join(parts, Or) if parts else AlwaysFalse()


def _member_literal(t: IcebergType, v: TypedValue) -> Literal[Any] | None:
    """An IN-list value as a literal of the column's type; None if no value of the column
    can equal it; _UNMAPPABLE if unsure."""
    scale = _grid_of(t)
    if scale is not None:
        u = _unscaled(v, scale)
        if u is None:
            return _UNMAPPABLE
        if u.denominator != 1 or not _in_range(t, int(u)):
            return None
        return _grid_literal(t, int(u), scale)
    lit = _exact_literal(t, v)
    if lit is None or isinstance(t, BooleanType):
        return _UNMAPPABLE
    return lit


def _exact_literal(t: IcebergType, lit: TypedValue) -> Literal[Any] | None:
    """The literal of a string, date, timestamp or boolean column; None for anything
    else (floats: :func:`_compare_float`) or a literal of another kind."""
    if isinstance(t, (FloatType, DoubleType)):
        return None
    if isinstance(t, StringType) and lit.kind == "string":
        return StringLiteral(lit.value)
    if isinstance(t, DateType) and lit.kind == "date":
        return DateLiteral(int(lit.value))
    if isinstance(t, TimestamptzType) and lit.kind == "timestamp":
        return TimestampLiteral(int(lit.value))  # microseconds since the epoch, UTC
    if isinstance(t, TimestampType) and lit.kind == "timestamp_ntz":
        return TimestampLiteral(int(lit.value))
    if isinstance(t, BooleanType) and lit.kind == "bool":
        return BooleanLiteral(bool(lit.value))
    return None
