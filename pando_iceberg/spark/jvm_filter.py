"""A pyiceberg row filter as Iceberg Java's expression JSON (``ExpressionParser.fromJson``), so
that the JVM plans a pruned read with the same filter pyiceberg planned with.

The expression is bound to the schema first, so every literal has its column's type and is
written in Iceberg's single-value JSON form (dates ``yyyy-mm-dd``, timestamps ISO-8601 with
microseconds, decimals as strings of the column's scale, binary as hex). Anything this module
does not know raises :class:`UnsupportedFilter`; callers then plan without a filter.
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.visitors import BoundBooleanExpressionVisitor, bind, visit
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

EPOCH = datetime.datetime(1970, 1, 1)


class UnsupportedFilter(ValueError):
    """The filter has a term or a literal type this converter does not write."""


def single_value_json(iceberg_type, value: Any) -> Any:
    """``value`` (a bound pyiceberg literal's value) in Iceberg's single-value JSON form."""
    if isinstance(iceberg_type, (BooleanType, IntegerType, LongType, StringType)):
        return value
    if isinstance(iceberg_type, (FloatType, DoubleType)):
        return float(value)
    if isinstance(iceberg_type, DateType):
        return (datetime.date(1970, 1, 1) + datetime.timedelta(days=int(value))).isoformat()
    if isinstance(iceberg_type, (TimestampType, TimestamptzType)):
        text = (EPOCH + datetime.timedelta(microseconds=int(value))).isoformat(timespec="microseconds")
        return text + "+00:00" if isinstance(iceberg_type, TimestamptzType) else text
    if isinstance(iceberg_type, DecimalType):
        return str(Decimal(value).quantize(Decimal(1).scaleb(-iceberg_type.scale)))
    if isinstance(iceberg_type, UUIDType):
        return str(value)
    if isinstance(iceberg_type, (BinaryType, FixedType)):
        return bytes(value).hex().upper()
    raise UnsupportedFilter(f"no JSON form for literals of type {iceberg_type}")


class _ToJson(BoundBooleanExpressionVisitor[Any]):
    def __init__(self, schema):
        self.schema = schema

    def _term(self, term) -> tuple[str, Any]:
        field = term.ref().field
        name = self.schema.find_column_name(field.field_id)
        if name is None:
            raise UnsupportedFilter(f"field id {field.field_id} has no column name")
        return name, field.field_type

    def _pred(self, kind: str, term, literal=None, literals=None) -> dict:
        name, ftype = self._term(term)
        out: dict[str, Any] = {"type": kind, "term": name}
        if literal is not None:
            out["value"] = single_value_json(ftype, getattr(literal, "value", literal))
        if literals is not None:
            out["values"] = [single_value_json(ftype, getattr(v, "value", v)) for v in literals]
        return out

    def visit_true(self):
        return True

    def visit_false(self):
        return False

    def visit_not(self, child_result):
        return {"type": "not", "child": child_result}

    def visit_and(self, left_result, right_result):
        return {"type": "and", "left": left_result, "right": right_result}

    def visit_or(self, left_result, right_result):
        return {"type": "or", "left": left_result, "right": right_result}

    def visit_in(self, term, literals):
        return self._pred("in", term, literals=literals)

    def visit_not_in(self, term, literals):
        return self._pred("not-in", term, literals=literals)

    def visit_is_nan(self, term):
        return self._pred("is-nan", term)

    def visit_not_nan(self, term):
        return self._pred("not-nan", term)

    def visit_is_null(self, term):
        return self._pred("is-null", term)

    def visit_not_null(self, term):
        return self._pred("not-null", term)

    def visit_equal(self, term, literal):
        return self._pred("eq", term, literal)

    def visit_not_equal(self, term, literal):
        return self._pred("not-eq", term, literal)

    def visit_greater_than_or_equal(self, term, literal):
        return self._pred("gt-eq", term, literal)

    def visit_greater_than(self, term, literal):
        return self._pred("gt", term, literal)

    def visit_less_than(self, term, literal):
        return self._pred("lt", term, literal)

    def visit_less_than_or_equal(self, term, literal):
        return self._pred("lt-eq", term, literal)

    def visit_starts_with(self, term, literal):
        return self._pred("starts-with", term, literal)

    def visit_not_starts_with(self, term, literal):
        return self._pred("not-starts-with", term, literal)


def expression_json(expr: BooleanExpression, schema) -> str:
    """``expr`` (a pyiceberg expression, bound or not) as Iceberg Java expression JSON."""
    try:
        bound = bind(schema, expr, case_sensitive=True)
    except Exception as e:
        raise UnsupportedFilter(f"cannot bind the filter to the schema: {e}") from None
    return json.dumps(visit(bound, _ToJson(schema)))


def java_expression(jvm, expr: BooleanExpression, schema, jschema):
    """The Java ``org.apache.iceberg.expressions.Expression`` for ``expr``, literals parsed with
    the Java schema ``jschema`` (the one the JVM scan binds with)."""
    return jvm.org.apache.iceberg.expressions.ExpressionParser.fromJson(expression_json(expr, schema), jschema)


__all__ = ["UnsupportedFilter", "expression_json", "java_expression", "single_value_json"]
