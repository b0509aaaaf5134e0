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


def _value_sql(value) -> exp.Expression:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, float) and not math.isfinite(value):  # "inf" would read as a column name
        text = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
        return exp.cast(exp.Literal.string(text), "DOUBLE")
    if isinstance(value, (int, float, decimal.Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, (str, uuid.UUID)):
        return exp.Literal.string(str(value))
    raise UnsupportedFilter(f"literal {value!r} of type {type(value).__name__} is not supported in a Pando filter")


_EPOCH = datetime.datetime(1970, 1, 1)


def _typed_literal(lit, field_type=None) -> exp.Expression:
    """A pyiceberg literal as Spark SQL. pyiceberg keeps dates as days and timestamps as
    microseconds since the epoch (``DateLiteral``, ``TimestampLiteral``), and converts a literal
    to a date or timestamp column's type when it binds (a string parsed, a timestamp against a
    ``timestamptz`` column taken as an instant in UTC); so does this, when the column's type is
    known (``field_type``). A date is a DATE, a timestamp a TIMESTAMP_NTZ (wall-clock time), one
    against a ``timestamptz`` column a TIMESTAMP with its offset written out (the same instant in
    every session time zone). Other literals are their values."""
    from pyiceberg.expressions import literals as L
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    instant = isinstance(field_type, TimestamptzType)
    if isinstance(field_type, (DateType, TimestampType, TimestamptzType)):
        try:
            lit = lit.to(field_type)
        except (TypeError, ValueError):
            pass  # what the column cannot take is said by the filter model, with the column's name
    if isinstance(lit, L.DateLiteral):
        return exp.cast(exp.Literal.string((_EPOCH + datetime.timedelta(days=lit.value)).date().isoformat()), "DATE")
    if isinstance(lit, L.TimestampLiteral):
        text = (_EPOCH + datetime.timedelta(microseconds=lit.value)).isoformat(sep=" ")
        return exp.cast(exp.Literal.string(text + "+00:00" if instant else text),
                        "TIMESTAMP" if instant else "TIMESTAMP_NTZ")
    if isinstance(lit, L.TimeLiteral):
        raise UnsupportedFilter(f"a time literal ({lit!r}) is not supported in a Pando filter: Spark has no time type")
    if isinstance(lit, (L.BinaryLiteral, L.FixedLiteral)):
        raise UnsupportedFilter(f"a binary literal ({lit!r}) is not supported in a Pando filter")
    return _value_sql(lit.value)


def _node(e, schema=None) -> exp.Expr:
    from pyiceberg import expressions as E

    if isinstance(e, E.AlwaysTrue):
        return exp.true()
    if isinstance(e, E.AlwaysFalse):
        return exp.false()
    if isinstance(e, E.And):
        return exp.and_(_node(e.left, schema), _node(e.right, schema))
    if isinstance(e, E.Or):
        return exp.or_(_node(e.left, schema), _node(e.right, schema))
    if isinstance(e, E.Not):
        return exp.not_(_node(e.child, schema))
    term = getattr(e, "term", None)
    if term is None:
        raise UnsupportedFilter(f"pyiceberg expression {e!r} is not supported")
    name = term.name if hasattr(term, "name") else str(term)
    col = exp.column(name, quoted=True)
    field_type = _field_type(schema, name)

    def lit_sql(lit) -> exp.Expression:
        return _typed_literal(lit, field_type)

    simple = {E.EqualTo: exp.EQ, E.NotEqualTo: exp.NEQ, E.LessThan: exp.LT, E.LessThanOrEqual: exp.LTE,
              E.GreaterThan: exp.GT, E.GreaterThanOrEqual: exp.GTE}
    for cls, node in simple.items():
        if isinstance(e, cls):
            return node(this=col, expression=lit_sql(e.literal))
    if isinstance(e, E.In):
        return exp.In(this=col, expressions=[lit_sql(lit) for lit in e.literals])
    if isinstance(e, E.NotIn):
        return exp.not_(exp.In(this=col, expressions=[lit_sql(lit) for lit in e.literals]))
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


def _field_type(schema, name: str):
    """The Iceberg type of column ``name`` of ``schema`` (exact name first, then any case); None
    without a schema or such a column."""
    if schema is None:
        return None
    fields = {f.name: f for f in schema.fields}
    found = fields.get(name) or next((f for n, f in fields.items() if n.lower() == name.lower()), None)
    return None if found is None else found.field_type


def pyiceberg_to_sql(expr, schema=None) -> str:
    """``expr`` (an unbound pyiceberg expression) as Spark SQL; with the table's pyiceberg
    ``schema``, each literal is first converted to its column's type (``_typed_literal``)."""
    return _node(expr, schema).sql(dialect="spark")
