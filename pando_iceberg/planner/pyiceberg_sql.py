"""pyiceberg boolean expressions → Spark SQL text, so a pyiceberg user's filter reaches the
Pando trees through the one cut/filter model (``pando_iceberg.expr``)."""

from __future__ import annotations

import datetime
import decimal
import math
import uuid

from sqlglot import exp

from ..exceptions import PlanningError


class UnsupportedFilter(PlanningError, ValueError):
    pass


def _literal(value) -> exp.Expression:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, float) and not math.isfinite(value):  # "inf" would read as a column name
        text = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
        return exp.cast(exp.Literal.string(text), "DOUBLE")
    if isinstance(value, (int, float, decimal.Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, datetime.datetime):
        text = value.isoformat(sep=" ")
        return exp.cast(exp.Literal.string(text), "TIMESTAMP")
    if isinstance(value, datetime.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, (str, uuid.UUID)):
        return exp.Literal.string(str(value))
    raise UnsupportedFilter(f"literal {value!r} of type {type(value).__name__} is not supported in a Pando filter")


def _node(e) -> exp.Expr:
    from pyiceberg import expressions as E

    if isinstance(e, E.AlwaysTrue):
        return exp.true()
    if isinstance(e, E.AlwaysFalse):
        return exp.false()
    if isinstance(e, E.And):
        return exp.and_(_node(e.left), _node(e.right))
    if isinstance(e, E.Or):
        return exp.or_(_node(e.left), _node(e.right))
    if isinstance(e, E.Not):
        return exp.not_(_node(e.child))
    term = getattr(e, "term", None)
    if term is None:
        raise UnsupportedFilter(f"pyiceberg expression {e!r} is not supported")
    col = exp.column(term.name if hasattr(term, "name") else str(term), quoted=True)
    simple = {E.EqualTo: exp.EQ, E.NotEqualTo: exp.NEQ, E.LessThan: exp.LT, E.LessThanOrEqual: exp.LTE,
              E.GreaterThan: exp.GT, E.GreaterThanOrEqual: exp.GTE}
    for cls, node in simple.items():
        if isinstance(e, cls):
            return node(this=col, expression=_literal(e.literal.value))
    if isinstance(e, E.In):
        return exp.In(this=col, expressions=[_literal(lit.value) for lit in e.literals])
    if isinstance(e, E.NotIn):
        return exp.not_(exp.In(this=col, expressions=[_literal(lit.value) for lit in e.literals]))
    if isinstance(e, E.IsNull):
        return exp.Is(this=col, expression=exp.null())
    if isinstance(e, E.NotNull):
        return exp.not_(exp.Is(this=col, expression=exp.null()))
    if isinstance(e, E.IsNaN):
        return exp.EQ(this=col, expression=exp.cast(exp.Literal.string("NaN"), "DOUBLE"))
    if isinstance(e, E.NotNaN):
        return exp.NEQ(this=col, expression=exp.cast(exp.Literal.string("NaN"), "DOUBLE"))
    if isinstance(e, E.StartsWith):
        return exp.Like(this=col, expression=exp.Literal.string(_escape_like(str(e.literal.value)) + "%"))
    if isinstance(e, E.NotStartsWith):
        return exp.not_(exp.Like(this=col, expression=exp.Literal.string(_escape_like(str(e.literal.value)) + "%")))
    raise UnsupportedFilter(f"pyiceberg expression {type(e).__name__} is not supported; accepted: And, Or, Not, "
                            "comparisons, In, NotIn, IsNull, NotNull, IsNaN, NotNaN, StartsWith, NotStartsWith")


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def pyiceberg_to_sql(expr) -> str:
    return _node(expr).sql(dialect="spark")
