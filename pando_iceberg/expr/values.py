"""Typed SQL literals: constant folding with Spark SQL semantics, and their canonical SQL.

A cut or filter is canonical only if every literal in it is folded to one typed value
(`date '1994-01-01' + interval '1' year` becomes `date '1995-01-01'`), so that equal
predicates get equal keys and the reasoning in `sides.py` compares values, not text.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.visitor import ARITHMETIC_OPS, PredicateVisitor

# The Spark session time zone that literals without an offset are read in. The Spark
# pipeline of this project runs with spark.sql.session.timeZone=UTC.
SESSION_TIME_ZONE = dt.UTC

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

# Kinds of values (and of vectors in evaluate.py). "timestamp" is an instant (Spark
# TIMESTAMP, Arrow timestamp with a zone) held as UTC microseconds; "timestamp_ntz" is a
# wall-clock time (Spark TIMESTAMP_NTZ, Arrow timestamp without zone) in microseconds.
NUMERIC_KINDS = ("int", "decimal", "float")
KINDS = (*NUMERIC_KINDS, "string", "bool", "date", "timestamp", "timestamp_ntz", "null")


@dataclass(frozen=True)
class Interval:
    """A Spark CalendarInterval: months, days and microseconds are kept apart."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days, -self.micros)


@dataclass(frozen=True)
class TypedValue:
    """A folded literal. `value` is: int (int), Decimal (decimal), float (float), str,
    bool, int days since epoch (date), int microseconds (timestamp, timestamp_ntz),
    Interval (interval), None (null)."""

    kind: str
    value: Any


NULL = TypedValue("null", None)


def date_to_days(d: dt.date) -> int:
    return (d - EPOCH_DATE).days


def days_to_date(days: int) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=int(days))


def add_months(days: int, months: int) -> int:
    """Spark's add_months: the day of month is clamped to the end of the target month."""
    d = days_to_date(days)
    total = d.year * 12 + (d.month - 1) + months
    year, month = divmod(total, 12)
    month += 1
    day = min(d.day, calendar.monthrange(year, month)[1])
    return date_to_days(dt.date(year, month, day))


_DATE_RE = re.compile(r"^\s*([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(?:[ T].*)?\s*$")


def parse_date(text: str) -> int | None:
    """Spark's string → date cast (yyyy, yyyy-mm, yyyy-mm-dd, optionally followed by a
    time part that is ignored). None when Spark would give NULL."""
    m = _DATE_RE.match(text)
    if not m:
        return None
    try:
        d = dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
    except ValueError:
        return None
    return date_to_days(d)


_TS_RE = re.compile(
    r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d{2})?)?\s*$",
    re.IGNORECASE,
)


def parse_timestamp(text: str, *, ntz: bool) -> int | None:
    """Spark's string → timestamp cast. Returns microseconds: UTC instant for TIMESTAMP
    (no offset ⇒ session time zone), wall clock for TIMESTAMP_NTZ (an offset is dropped
    after converting to the session zone)."""
    m = _TS_RE.match(text)
    if not m:
        return None
    year, month, day, hh, mi, ss, frac, zone = m.groups()
    try:
        base = dt.datetime(int(year), int(month), int(day), int(hh or 0), int(mi or 0), int(ss or 0))
    except ValueError:
        return None
    micros = int((frac or "0").ljust(6, "0")[:6])
    tz: dt.tzinfo = SESSION_TIME_ZONE
    if zone:
        z = zone.upper()
        if z not in ("Z", "UTC"):
            sign = -1 if z[0] == "-" else 1
            digits = z[1:].replace(":", "")
            hours, minutes = (int(digits), 0) if len(digits) <= 2 else (int(digits[:-2]), int(digits[-2:]))
            tz = dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))
        else:
            tz = dt.UTC
    aware = base.replace(tzinfo=tz)
    if ntz and not zone:
        instant = base.replace(tzinfo=dt.UTC)  # wall clock as-is
    elif ntz:
        instant = aware.astimezone(SESSION_TIME_ZONE).replace(tzinfo=dt.UTC)
    else:
        instant = aware
    delta = instant - EPOCH_TS
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds + micros


def micros_to_text(micros: int, *, ntz: bool) -> str:
    t = EPOCH_TS + dt.timedelta(microseconds=int(micros))
    text = t.strftime("%Y-%m-%d %H:%M:%S.%f")
    return text if ntz else text + "+00:00"


def parse_float(text: str) -> float | None:
    t = text.strip().lower()
    specials = {"nan": math.nan, "infinity": math.inf, "inf": math.inf, "+infinity": math.inf,
                "+inf": math.inf, "-infinity": -math.inf, "-inf": -math.inf}
    if t in specials:
        return specials[t]
    try:
        return float(t.rstrip("d"))
    except ValueError:
        return None


def number_literal(text: str) -> TypedValue:
    """Spark's numeric literal typing: 24 → INT/BIGINT, 0.05 → DECIMAL, 1e3 → DOUBLE."""
    if re.search(r"[eE]", text):
        return TypedValue("float", float(text))
    if "." in text:
        return TypedValue("decimal", Decimal(text))
    return TypedValue("int", int(text))


def _dtype_name(to: exp.DataType) -> str:
    return to.this.name if hasattr(to.this, "name") else str(to.this)


_INT_TYPES = {"TINYINT", "SMALLINT", "INT", "BIGINT", "UTINYINT", "USMALLINT", "UINT", "UBIGINT"}
_FLOAT_TYPES = {"FLOAT", "DOUBLE"}
_STRING_TYPES = {"VARCHAR", "CHAR", "TEXT", "STRING", "NVARCHAR", "NCHAR"}


def cast_value(v: TypedValue, to: exp.DataType) -> TypedValue:
    """Spark (non-ANSI) CAST of a folded literal; failures give NULL like Spark does."""
    name = _dtype_name(to)
    if v.kind == "null":
        return NULL
    if name == "DATE":
        if v.kind == "string":
            days = parse_date(v.value)
            return TypedValue("date", days) if days is not None else NULL
        if v.kind == "date":
            return v
        if v.kind == "timestamp":
            return TypedValue("date", (v.value // 1_000_000 + _session_offset_s()) // 86_400)
        if v.kind == "timestamp_ntz":
            return TypedValue("date", v.value // 86_400_000_000)
    elif name in ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIMESTAMPNTZ", "DATETIME"):
        ntz = name in ("TIMESTAMPNTZ", "DATETIME")
        kind = "timestamp_ntz" if ntz else "timestamp"
        if v.kind == "string":
            micros = parse_timestamp(v.value, ntz=ntz)
            return TypedValue(kind, micros) if micros is not None else NULL
        if v.kind == "date":
            return TypedValue(kind, v.value * 86_400_000_000 - (0 if ntz else _session_offset_s() * 1_000_000))
        if v.kind in ("timestamp", "timestamp_ntz"):
            return TypedValue(kind, v.value)  # session zone is UTC: same micros
    elif name in _FLOAT_TYPES:
        if v.kind == "string":
            f = parse_float(v.value)
            return TypedValue("float", f) if f is not None else NULL
        if v.kind in NUMERIC_KINDS:
            return TypedValue("float", float(v.value))
    elif name in _INT_TYPES:
        if v.kind == "string":
            try:
                return TypedValue("int", int(Decimal(v.value.strip())))  # Spark truncates
            except (InvalidOperation, ValueError):
                return NULL
        if v.kind in ("int", "decimal"):
            return TypedValue("int", int(v.value))
        if v.kind == "float":
            return TypedValue("int", int(v.value)) if math.isfinite(v.value) else NULL
    elif name == "DECIMAL":
        params = [int(p.this.this) if isinstance(p.this, exp.Literal) else int(p.name) for p in to.expressions]
        precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
        try:
            if v.kind == "string":
                d = Decimal(v.value.strip())
            elif v.kind in NUMERIC_KINDS:
                d = Decimal(v.value) if v.kind != "float" else Decimal(repr(v.value))
            else:
                d = None
        except InvalidOperation:
            return NULL
        if d is not None:
            if not d.is_finite():
                return NULL
            q = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
            if len(q.as_tuple().digits) - max(0, -int(q.as_tuple().exponent)) > precision - scale and q != 0:
                return NULL  # overflow ⇒ NULL in non-ANSI Spark
            return TypedValue("decimal", q)
    elif name in _STRING_TYPES:
        return TypedValue("string", value_to_text(v))
    elif name == "BOOLEAN":
        if v.kind == "bool":
            return v
        if v.kind == "string":
            t = v.value.strip().lower()
            if t in ("true", "t", "yes", "y", "1"):
                return TypedValue("bool", True)
            if t in ("false", "f", "no", "n", "0"):
                return TypedValue("bool", False)
            return NULL
        if v.kind in NUMERIC_KINDS:
            return TypedValue("bool", v.value != 0)
    raise PandoExprError(f"cannot fold CAST of {v.kind} literal {v.value!r} to {to.sql('spark')}")


def _session_offset_s() -> int:
    return int(SESSION_TIME_ZONE.utcoffset(None).total_seconds())


def value_to_text(v: TypedValue) -> str:
    if v.kind == "date":
        return days_to_date(v.value).isoformat()
    if v.kind in ("timestamp", "timestamp_ntz"):
        return micros_to_text(v.value, ntz=True)
    if v.kind == "bool":
        return "true" if v.value else "false"
    if v.kind == "float":
        f = v.value
        return "NaN" if math.isnan(f) else ("Infinity" if f == math.inf else "-Infinity" if f == -math.inf else repr(f))
    return str(v.value)


def _interval_of(node: exp.Expression) -> Interval:
    amount_node = node.this
    amount = fold(amount_node) if amount_node is not None else None
    if amount is None or amount.kind not in ("int", "string", "decimal"):
        raise PandoExprError(f"unsupported interval literal {node.sql('spark')}")
    unit_node = node.args.get("unit")
    unit = (unit_node.name if unit_node is not None else "").upper()
    if amount.kind == "string":
        parts = amount.value.strip().split()
        if len(parts) == 2 and not unit:
            amount, unit = TypedValue("string", parts[0]), parts[1].upper()
        try:
            n = Decimal(amount.value.strip())
        except InvalidOperation:
            raise PandoExprError(f"unsupported interval literal {node.sql('spark')}") from None
    else:
        n = Decimal(amount.value)
    unit = unit.rstrip("S") if unit.endswith("S") and unit != "S" else unit
    if unit in ("YEAR", "MONTH") and n != int(n):
        raise PandoExprError(f"unsupported fractional interval {node.sql('spark')}")
    if unit == "YEAR":
        return Interval(months=12 * int(n))
    if unit == "MONTH":
        return Interval(months=int(n))
    if unit == "WEEK":
        return Interval(days=7 * int(n)) if n == int(n) else Interval(micros=int(n * 7 * 86_400_000_000))
    if unit == "DAY" and n == int(n):
        return Interval(days=int(n))
    per_unit = {"DAY": 86_400_000_000, "HOUR": 3_600_000_000, "MINUTE": 60_000_000, "SECOND": 1_000_000,
                "MILLISECOND": 1_000, "MICROSECOND": 1}
    if unit in per_unit:
        return Interval(micros=int(n * per_unit[unit]))
    raise PandoExprError(f"unsupported interval unit in {node.sql('spark')}")


def _add(a: TypedValue, b: TypedValue, sign: int) -> TypedValue:
    if a.kind == "null" or b.kind == "null":
        return NULL
    if b.kind == "interval" and a.kind == "date":
        iv: Interval = b.value if sign > 0 else -b.value
        if iv.micros:
            raise PandoExprError("date ± interval with a time part is not supported")
        return TypedValue("date", add_months(a.value, iv.months) + iv.days)
    if b.kind == "interval" and a.kind in ("timestamp", "timestamp_ntz"):
        iv = b.value if sign > 0 else -b.value
        micros = a.value
        if iv.months:  # month arithmetic on the local (session zone = UTC) date
            days, rem = divmod(micros, 86_400_000_000)
            micros = add_months(days, iv.months) * 86_400_000_000 + rem
        return TypedValue(a.kind, micros + iv.days * 86_400_000_000 + iv.micros)
    if a.kind == "interval" and b.kind in ("date", "timestamp", "timestamp_ntz") and sign > 0:
        return _add(b, a, 1)
    if a.kind == "interval" and b.kind == "interval":
        o = b.value if sign > 0 else -b.value
        return TypedValue("interval", Interval(a.value.months + o.months, a.value.days + o.days,
                                               a.value.micros + o.micros))
    if a.kind == "date" and b.kind == "int":  # Spark: date + int = date_add
        return TypedValue("date", a.value + sign * b.value)
    if a.kind in NUMERIC_KINDS and b.kind in NUMERIC_KINDS:
        return _arith(a, b, "+" if sign > 0 else "-")
    raise PandoExprError(f"cannot fold {a.kind} {'+' if sign > 0 else '-'} {b.kind}")


def _arith(a: TypedValue, b: TypedValue, op: str) -> TypedValue:
    if "float" in (a.kind, b.kind):
        x, y = float(a.value), float(b.value)
        if op == "/":
            return NULL if y == 0 else TypedValue("float", x / y)
        return TypedValue("float", {"+": x + y, "-": x - y, "*": x * y}[op])
    if op == "/":
        if a.kind == "int" and b.kind == "int":  # Spark: int / int is a double division
            return NULL if b.value == 0 else TypedValue("float", a.value / b.value)
        raise PandoExprError("decimal division is not supported (Spark rounds its result type)")
    kind = "decimal" if "decimal" in (a.kind, b.kind) else "int"
    p, q = (Decimal(a.value), Decimal(b.value)) if kind == "decimal" else (a.value, b.value)
    return TypedValue(kind, {"+": p + q, "-": p - q, "*": p * q}[op])


class _Folder(PredicateVisitor[None, TypedValue | None]):
    """A literal-only term as a TypedValue; None for anything that is not a constant."""

    def visit_other(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return None

    def visit_literal(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return TypedValue("string", node.this) if node.is_string else number_literal(node.this)

    def visit_true(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return TypedValue("bool", True)

    def visit_false(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return TypedValue("bool", False)

    def visit_null(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return NULL

    def visit_cast(self, node: exp.Expression, arg: None) -> TypedValue | None:
        inner = self.visit(node.this, arg)
        return None if inner is None else cast_value(inner, node.args["to"])

    def visit_interval(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return TypedValue("interval", _interval_of(node))

    def visit_neg(self, node: exp.Expression, arg: None) -> TypedValue | None:
        inner = self.visit(node.this, arg)
        if inner is None:
            return None
        if inner.kind in NUMERIC_KINDS:
            return TypedValue(inner.kind, -inner.value)
        if inner.kind == "interval":
            return TypedValue("interval", -inner.value)
        return NULL if inner.kind == "null" else None

    def visit_arithmetic(self, node: exp.Expression, arg: None) -> TypedValue | None:
        a, b = self.visit(node.this, arg), self.visit(node.expression, arg)
        if a is None or b is None:
            return None
        op = ARITHMETIC_OPS[type(node)]
        if op in "+-":
            return _add(a, b, 1 if op == "+" else -1)
        if a.kind == "null" or b.kind == "null":
            return NULL
        if a.kind in NUMERIC_KINDS and b.kind in NUMERIC_KINDS:
            return _arith(a, b, op)
        raise PandoExprError(f"cannot fold {node.sql('spark')}")

    def visit_date_add(self, node: exp.Expression, arg: None) -> TypedValue | None:
        a, b = self.visit(node.this, arg), self.visit(node.expression, arg)
        if a is None or b is None:
            return None
        if a.kind == "string":
            a = cast_value(a, exp.DataType.build("DATE"))
        unit_node = node.args.get("unit")
        unit = (unit_node.name if unit_node is not None else "DAY").upper()
        if a.kind != "date" or b.kind != "int" or unit != "DAY":
            raise PandoExprError(f"cannot fold {node.sql('spark')}")
        return TypedValue("date", a.value + (-1 if isinstance(node, exp.DateSub) else 1) * b.value)


_FOLDER = _Folder()


def fold(node: exp.Expression) -> TypedValue | None:
    """Fold a literal-only expression to a TypedValue, or None if it references columns
    (or anything else that is not a constant)."""
    return _FOLDER.visit(node, None)


_TYPES: dict[str, exp.DataType] = {}


def _dtype(name: str) -> exp.DataType:
    """A cached DataType (building one parses SQL)."""
    if name not in _TYPES:
        _TYPES[name] = exp.DataType.build(name) if name != "TIMESTAMP_NTZ" else exp.DataType(
            this=exp.DataType.Type.TIMESTAMPNTZ)
    return _TYPES[name].copy()


def render(v: TypedValue, *, compared_to_float: bool = False) -> exp.Expression:
    """Canonical SQL for a typed literal (Spark dialect)."""
    if v.kind == "null":
        return exp.Null()
    if v.kind == "bool":
        return exp.Boolean(this=bool(v.value))
    if v.kind == "int":
        return exp.Literal.number(str(v.value)) if v.value >= 0 else exp.Neg(this=exp.Literal.number(str(-v.value)))
    if v.kind == "decimal":
        d: Decimal = v.value
        text = format(d.normalize() if d == d.to_integral_value() else d, "f")
        if d == d.to_integral_value():
            text = str(int(d))
            # keep it a decimal literal outside comparisons would need a scale; integers are
            # typed exactly against int/decimal columns, so an integer text is canonical.
        neg = text.startswith("-")
        lit = exp.Literal.number(text.lstrip("-"))
        return exp.Neg(this=lit) if neg else lit
    if v.kind == "float":
        f = v.value
        if compared_to_float and math.isfinite(f):
            # Spark casts a numeric literal compared with a double column to double; the
            # shortest repr round-trips, so the plain number is the same value.
            text = repr(f) if f != int(f) or abs(f) >= 1e16 else str(int(f))
            if "e" in text or "E" in text:
                text = format(Decimal(repr(f)), "f")
            neg = text.startswith("-")
            lit = exp.Literal.number(text.lstrip("-"))
            return exp.Neg(this=lit) if neg else lit
        return exp.Cast(this=exp.Literal.string(value_to_text(v)), to=_dtype("DOUBLE"))
    if v.kind == "string":
        return exp.Literal.string(v.value)
    if v.kind == "date":
        return exp.Cast(this=exp.Literal.string(value_to_text(v)), to=_dtype("DATE"))
    if v.kind == "timestamp":
        return exp.Cast(this=exp.Literal.string(micros_to_text(v.value, ntz=False)),
                        to=_dtype("TIMESTAMP"))
    if v.kind == "timestamp_ntz":
        return exp.Cast(this=exp.Literal.string(micros_to_text(v.value, ntz=True)),
                        to=_dtype("TIMESTAMP_NTZ"))
    raise PandoExprError(f"cannot render a {v.kind} literal")
