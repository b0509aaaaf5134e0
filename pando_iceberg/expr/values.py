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

import numpy as np
from sqlglot import exp

from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.semantics import current, zone_of
from pando_iceberg.expr.visitor import ARITHMETIC_OPS, PredicateVisitor

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

# Kinds of values (and of vectors in evaluate.py). "timestamp" is an instant (Spark
# TIMESTAMP, Arrow timestamp with a zone) held as UTC microseconds; "timestamp_ntz" is a
# wall-clock time (Spark TIMESTAMP_NTZ, Arrow timestamp without zone) in microseconds.
# Integers and floats also have a width in bits (Spark's TINYINT 8, SMALLINT 16, INT 32,
# BIGINT 64; FLOAT 32, DOUBLE 64): Spark computes at the width of the wider operand and
# wraps (ANSI off) or raises (ANSI on) on overflow.
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
    Interval (interval), None (null). `bits`: the width of an int (8, 16, 32, 64) or a float
    (32, 64); 0 when built means Spark's literal typing (INT if the value fits, else BIGINT;
    DOUBLE)."""

    kind: str
    value: Any
    bits: int = 0

    def __post_init__(self) -> None:
        if self.bits == 0 and self.kind in ("int", "float"):
            bits = 64 if self.kind == "float" or not _fits(self.value, 32) else 32
            object.__setattr__(self, "bits", bits)
        elif self.bits and self.kind not in ("int", "float"):
            object.__setattr__(self, "bits", 0)


NULL = TypedValue("null", None)

INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
FLOAT_BITS = {"FLOAT": 32, "DOUBLE": 64}
INT_NAMES = {bits: name for name, bits in INT_BITS.items()}


def _fits(value: int, bits: int) -> bool:
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def wrap_int(value: int, bits: int) -> int:
    """``value`` in two's complement at ``bits`` (Java's narrowing of integers)."""
    m = 1 << bits
    value %= m
    return value - m if value >= m >> 1 else value


def overflowed(value: int, bits: int) -> TypedValue:
    """An integer result at ``bits``: wrapped (ANSI off), or not folded (ANSI on: Spark raises)."""
    if _fits(value, bits):
        return TypedValue("int", value, bits)
    if current().ansi:
        raise PandoExprError(f"integer overflow at {bits} bits: Spark with ANSI mode on raises")
    return TypedValue("int", wrap_int(value, bits), bits)


def float32(x: float) -> float:
    """The float32 nearest ``x`` (a double), as a double (Java's ``(float) d``)."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def _float32_of_decimal(d: Decimal) -> float:
    """The float32 nearest the exact decimal ``d`` (ties to even), as Java's Float.parseFloat."""
    guess = np.float32(float(d))  # within one float32 step of the answer
    best = None
    for c in (np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        dist = abs(Decimal(float(c)) - d)
        even = int(np.float32(c).view(np.int32)) % 2 == 0
        if best is None or dist < best[0] or (dist == best[0] and even):
            best = (dist, c)
    if best is None:
        return float(guess)
    return float(best[1])


def _no_ansi_null(what: str) -> TypedValue:
    """A failed cast: NULL with ANSI off, an error in Spark with ANSI on (not folded)."""
    if current().ansi:
        raise PandoExprError(f"{what}: Spark with ANSI mode on raises")
    return NULL


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


# Spark's string → date: yyyy, yyyy-[m]m, yyyy-[m]m-[d]d, the last optionally followed by a
# space or 'T' and anything. Other shapes Spark may accept ('+yyyy', 5-digit years) are not
# folded.
_DATE_RE = re.compile(r"^[ \t\n\r]*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?[ \t\n\r]*$", re.DOTALL)


# Words Spark reads as dates or times in a cast of a literal ('yesterday', 'now', ...).
_SPECIAL_WORDS = ("epoch", "now", "today", "yesterday", "tomorrow")
_WORD_RE = re.compile(r"^[ \t\n\r]*([A-Za-z]+)")


def _not_datetime(text: str, what: str) -> None:
    """None when Spark surely gives NULL for ``text`` that is not a shape modelled: it starts
    with a word that is not one of Spark's special values; otherwise it raises."""
    m = _WORD_RE.match(text)
    if m is None or m.group(1).lower().startswith(_SPECIAL_WORDS):
        raise PandoExprError(f"cannot fold the string {text!r} as a {what}")


def parse_date(text: str) -> int | None:
    """Spark's string → date cast: days, or None where Spark gives NULL (a shape it reads with
    an invalid month or day, or text starting with a word that is not a special value). A shape
    not modelled raises PandoExprError."""
    m = _DATE_RE.match(text)
    if not m:
        _not_datetime(text, "date")
        return None
    try:
        d = dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
    except ValueError:
        return None
    return date_to_days(d)


_TS_RE = re.compile(
    r"^[ \t\n\r]*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})"
    r"(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?)?)?)?"
    r"[ ]?(Z|UTC|GMT|(?:UTC|GMT)?[+-]\d{2}(?::?\d{2})?|[A-Za-z]+/[A-Za-z_]+(?:/[A-Za-z_]+)?)?[ \t\n\r]*$"
)


def _local_to_micros(base: dt.datetime, tz: dt.tzinfo) -> int:
    """The instant of wall clock ``base`` in zone ``tz`` (java.time's rules: a time in a gap
    moves forward by the gap, an ambiguous time takes the earlier offset — Python's fold=0)."""
    aware = base.replace(tzinfo=tz, fold=0)
    delta = aware - EPOCH_TS
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _wall_micros(base: dt.datetime) -> int:
    delta = base.replace(tzinfo=dt.UTC) - EPOCH_TS
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_timestamp(text: str, *, ntz: bool) -> int | None:
    """Spark's string → timestamp cast. Returns microseconds: the UTC instant for TIMESTAMP (no
    offset ⇒ the session time zone), the wall clock for TIMESTAMP_NTZ (an offset is dropped, as
    Spark does). None where Spark gives NULL (an invalid date or time in a shape it reads); a
    shape not modelled raises PandoExprError."""
    m = _TS_RE.match(text)
    if not m:
        _not_datetime(text, "timestamp")
        return None
    year, month, day, hh, mi, ss, frac, zone = m.groups()
    try:
        base = dt.datetime(int(year), int(month or 1), int(day or 1), int(hh or 0), int(mi or 0), int(ss or 0),
                           int((frac or "").ljust(6, "0")[:6]))
    except ValueError:
        return None
    if ntz:
        return _wall_micros(base)
    if not zone:
        return _local_to_micros(base, current().tzinfo())
    return _local_to_micros(base, zone_of(zone))


def micros_to_text(micros: int, *, ntz: bool) -> str:
    t = EPOCH_TS + dt.timedelta(microseconds=int(micros))
    text = t.strftime("%Y-%m-%d %H:%M:%S.%f")
    return text if ntz else text + "+00:00"


def _spark_timestamp_text(micros: int) -> str:
    """Spark's string of a wall-clock time: the fraction without trailing zeros."""
    t = EPOCH_TS + dt.timedelta(microseconds=int(micros))
    text = t.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{t.microsecond:06d}".rstrip("0") if t.microsecond else "")


def local_micros(instant: int) -> int:
    """The wall clock in the session zone of a UTC instant (microseconds)."""
    t = (EPOCH_TS + dt.timedelta(microseconds=int(instant))).astimezone(current().tzinfo())
    return _wall_micros(t.replace(tzinfo=None))


# Java's decimal floating-point literal (Double.parseDouble / Float.parseFloat), with the
# type suffix it accepts; hexadecimal forms are not folded.
_FLOAT_RE = re.compile(r"^[ \t\n\r]*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?[ \t\n\r]*$")
_FLOAT_SPECIALS = {"nan": math.nan, "+nan": math.nan, "-nan": math.nan, "infinity": math.inf,
                   "+infinity": math.inf, "-infinity": -math.inf, "inf": math.inf, "+inf": math.inf,
                   "-inf": -math.inf}


def parse_float(text: str, bits: int = 64) -> float | None:
    """Spark's string → DOUBLE (``bits`` 64) or FLOAT (32) cast. A shape not modelled raises."""
    t = text.strip(" \t\n\r")
    special = _FLOAT_SPECIALS.get(t.lower())
    if special is not None and (t.lower() in ("nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")
                                or t in ("NaN", "+NaN", "-NaN")):
        return special
    m = _FLOAT_RE.match(text)
    if not m:
        raise PandoExprError(f"cannot fold the string {text!r} as a number")
    if bits == 32:
        return _float32_of_decimal(Decimal(m.group(1)))
    return float(m.group(1))


_INT_TEXT_RE = re.compile(r"^[ \t\n\r]*([+-]?)(\d*)(?:\.(\d*))?[ \t\n\r]*$")


def parse_int(text: str, bits: int) -> int | None:
    """Spark's string → integer cast: optional sign, digits, a fractional part that is cut off
    (ANSI off); NULL out of range. A shape not modelled raises."""
    m = _INT_TEXT_RE.match(text)
    if not m or not (m.group(2) or m.group(3)):
        raise PandoExprError(f"cannot fold the string {text!r} as an integer")
    if m.group(3) is not None and current().ansi:
        raise PandoExprError(f"cannot fold the string {text!r} as an integer with ANSI mode on")
    value = int(m.group(2) or "0") * (-1 if m.group(1) == "-" else 1)
    return value if _fits(value, bits) else None


def number_literal(text: str) -> TypedValue:
    """Spark's numeric literal typing: 24 → INT, 2147483648 → BIGINT, beyond → DECIMAL,
    0.05 → DECIMAL, 1e3 → DOUBLE."""
    if re.search(r"[eE]", text):
        return TypedValue("float", float(text), 64)
    if "." in text:
        return TypedValue("decimal", Decimal(text))
    value = int(text)
    if not _fits(value, 64):
        return TypedValue("decimal", Decimal(value))
    return TypedValue("int", value)


def _dtype_name(to: exp.DataType) -> str:
    return to.this.name if hasattr(to.this, "name") else str(to.this)


_STRING_TYPES = {"VARCHAR", "CHAR", "TEXT", "STRING", "NVARCHAR", "NCHAR"}
_LTZ_TYPES = ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ")


def _decimal_to_int(d: Decimal, bits: int) -> TypedValue:
    """Spark's decimal → integer: cut toward zero, then Java's narrowing (ANSI: raises)."""
    value = int(d)  # toward zero
    if current().ansi and not _fits(value, bits):
        raise PandoExprError(f"{d} does not fit {INT_NAMES[bits]}: Spark with ANSI mode on raises")
    return TypedValue("int", wrap_int(wrap_int(value, 64), bits), bits)


def _double_to_int(f: float, bits: int) -> TypedValue:
    """Java's double → int/long (NaN → 0, saturating), then narrowing to byte/short."""
    if current().ansi:
        if not math.isfinite(f) or not _fits(int(f), bits):
            raise PandoExprError(f"{f} does not fit {INT_NAMES[bits]}: Spark with ANSI mode on raises")
        return TypedValue("int", int(f), bits)
    width = 64 if bits == 64 else 32
    if math.isnan(f):
        value = 0
    elif f >= 2.0 ** (width - 1):
        value = (1 << (width - 1)) - 1
    elif f <= -(2.0 ** (width - 1)):
        value = -(1 << (width - 1))
    else:
        value = int(f)
    return TypedValue("int", wrap_int(value, bits), bits)


def _decimal_to_float(d: Decimal, bits: int) -> float:
    """Spark's decimal → DOUBLE/FLOAT: the exact value correctly rounded (checked against Spark
    on random decimals of 15 to 19 digits)."""
    if not d.is_finite():
        raise PandoExprError(f"cannot fold the decimal {d}")
    return _float32_of_decimal(d) if bits == 32 else float(d)


def cast_value(v: TypedValue, to: exp.DataType, *, safe: bool = False) -> TypedValue:
    """Spark's CAST of a folded literal under the session's settings: failures give NULL with
    ANSI off; with ANSI on Spark raises, and the cast is not folded. ``safe``: TRY_CAST (not
    folded where it differs from CAST)."""
    name = _dtype_name(to)
    if v.kind == "null":
        return NULL
    if safe:  # NULL where CAST would wrap or raise: not modelled
        raise PandoExprError("TRY_CAST of a literal is not folded")
    if name == "DATE":
        if v.kind == "string":
            days = parse_date(v.value)
            return TypedValue("date", days) if days is not None else _no_ansi_null(f"invalid date {v.value!r}")
        if v.kind == "date":
            return v
        if v.kind == "timestamp":
            return TypedValue("date", local_micros(v.value) // 86_400_000_000)
        if v.kind == "timestamp_ntz":
            return TypedValue("date", v.value // 86_400_000_000)
    elif name in (*_LTZ_TYPES, "TIMESTAMPNTZ", "DATETIME"):
        ntz = name in ("TIMESTAMPNTZ", "DATETIME")
        kind = "timestamp_ntz" if ntz else "timestamp"
        if v.kind == "string":
            micros = parse_timestamp(v.value, ntz=ntz)
            return TypedValue(kind, micros) if micros is not None else _no_ansi_null(f"invalid timestamp {v.value!r}")
        if v.kind == "date":
            base = dt.datetime.combine(days_to_date(v.value), dt.time())
            return TypedValue(kind, _wall_micros(base) if ntz else _local_to_micros(base, current().tzinfo()))
        if v.kind == kind:
            return v
        if v.kind == "timestamp":  # → NTZ: the wall clock in the session zone
            return TypedValue(kind, local_micros(v.value))
        if v.kind == "timestamp_ntz":  # → LTZ: the wall clock read in the session zone
            wall = EPOCH_TS + dt.timedelta(microseconds=int(v.value))
            return TypedValue(kind, _local_to_micros(wall.replace(tzinfo=None), current().tzinfo()))
    elif name in FLOAT_BITS:
        bits = FLOAT_BITS[name]
        if v.kind == "string":
            f = parse_float(v.value, bits)
            return TypedValue("float", f, bits) if f is not None else _no_ansi_null(f"invalid number {v.value!r}")
        if v.kind == "float":
            return TypedValue("float", float32(v.value) if bits == 32 else v.value, bits)
        if v.kind == "int":
            return TypedValue("float", float32(float(v.value)) if bits == 32 else float(v.value), bits)
        if v.kind == "decimal":
            return TypedValue("float", _decimal_to_float(v.value, bits), bits)
    elif name in INT_BITS:
        bits = INT_BITS[name]
        if v.kind == "string":
            parsed = parse_int(v.value, bits)
            return TypedValue("int", parsed, bits) if parsed is not None else _no_ansi_null(
                f"invalid {name} {v.value!r}")
        if v.kind == "int":
            return overflowed(v.value, bits)
        if v.kind == "decimal":
            return _decimal_to_int(v.value, bits)
        if v.kind == "float":
            return _double_to_int(v.value, bits)
    elif name == "DECIMAL":
        params = [int(p.this.this) if isinstance(p.this, exp.Literal) else int(p.name) for p in to.expressions]
        precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
        if v.kind == "string":
            if not re.match(r"^[ \t\n\r]*[+-]?(?:\d+\.?\d*|\.\d+)[ \t\n\r]*$", v.value):
                raise PandoExprError(f"cannot fold the string {v.value!r} as a decimal")
            d = Decimal(v.value.strip(" \t\n\r"))
        elif v.kind in ("int", "decimal"):
            d = Decimal(v.value)
        else:  # a double's decimal digits are Java's Double.toString, not modelled
            d = None
        if d is not None:
            q = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
            if len(q.as_tuple().digits) - max(0, -int(q.as_tuple().exponent)) > precision - scale and q != 0:
                return _no_ansi_null(f"{d} does not fit DECIMAL({precision}, {scale})")
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
            return _no_ansi_null(f"invalid boolean {v.value!r}")
        if v.kind in NUMERIC_KINDS:
            return TypedValue("bool", v.value != 0)
    raise PandoExprError(f"cannot fold CAST of {v.kind} literal {v.value!r} to {to.sql('spark')}")


def value_to_text(v: TypedValue) -> str:
    """Spark's CAST(literal AS STRING); kinds whose text Spark writes otherwise than Python
    (floats, decimals) are not folded."""
    if v.kind == "date":
        return days_to_date(v.value).isoformat()
    if v.kind == "timestamp_ntz":
        return _spark_timestamp_text(v.value)
    if v.kind == "timestamp":
        return _spark_timestamp_text(local_micros(v.value))
    if v.kind == "bool":
        return "true" if v.value else "false"
    if v.kind in ("int", "string"):
        return str(v.value)
    raise PandoExprError(f"cannot fold a {v.kind} literal as a string")


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
        if a.kind == "timestamp" and (iv.months or iv.days) and not current().utc:
            # months and days are added to the local date in the session zone
            raise PandoExprError("timestamp ± interval of days or months in a session zone other than UTC")
        micros = a.value
        if iv.months:
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


def float_bits(a: tuple[str, int], b: tuple[str, int]) -> int:
    """The width of Spark's float result of two numeric operands (kind, bits): FLOAT for two
    FLOATs, and for a FLOAT and an integer with ANSI off (ANSI widens that to DOUBLE); else
    DOUBLE."""
    kinds = {a[0], b[0]}
    floats = [bits for kind, bits in (a, b) if kind == "float"]
    if kinds == {"float"} or (kinds == {"float", "int"} and not current().ansi):
        return 32 if all(bits == 32 for bits in floats) else 64
    return 64


def _arith(a: TypedValue, b: TypedValue, op: str) -> TypedValue:
    if op == "/":
        if "decimal" in (a.kind, b.kind) and "float" not in (a.kind, b.kind):
            raise PandoExprError("decimal division is not supported (Spark rounds its result type)")
        x, y = float(a.value), float(b.value)  # Spark divides as doubles
        if y == 0:
            if current().ansi:
                raise PandoExprError("division by zero: Spark with ANSI mode on raises")
            return NULL
        return TypedValue("float", x / y, 64)
    if "float" in (a.kind, b.kind):
        bits = float_bits((a.kind, a.bits), (b.kind, b.bits))
        if bits == 32:
            x32, y32 = np.float32(a.value), np.float32(b.value)
            with np.errstate(over="ignore", invalid="ignore"):
                r = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](x32, y32)
            return TypedValue("float", float(r), 32)
        x, y = float(a.value), float(b.value)
        try:
            return TypedValue("float", {"+": x + y, "-": x - y, "*": x * y}[op], 64)
        except OverflowError:
            raise PandoExprError("cannot fold a float overflow") from None
    if "decimal" in (a.kind, b.kind):
        decimal_result_precision(op, *((INT_PRECISION[v.bits], 0) if v.kind == "int" else
                                       (decimal_precision(v), -int(v.value.as_tuple().exponent)) for v in (a, b)))
        p, q = Decimal(a.value), Decimal(b.value)
        return TypedValue("decimal", {"+": p + q, "-": p - q, "*": p * q}[op])
    exact = {"+": a.value + b.value, "-": a.value - b.value, "*": a.value * b.value}[op]
    return overflowed(exact, max(a.bits, b.bits))


INT_PRECISION = {8: 3, 16: 5, 32: 10, 64: 20}  # Spark's decimal type of an integer operand


def decimal_precision(v: TypedValue) -> int:
    """The precision of a decimal literal's type (Spark: digits, at least the scale)."""
    _sign, digits, exponent = v.value.as_tuple()
    return max(len(digits), -int(exponent), 1)


def decimal_result_precision(op: str, a: tuple[int, int], b: tuple[int, int]) -> int:
    """The precision of Spark's decimal + - * result of operands (precision, scale). Above 38
    Spark rounds the result to a smaller scale or gives NULL: not modelled."""
    (p1, s1), (p2, s2) = a, b
    p = p1 + p2 + 1 if op == "*" else max(s1, s2) + max(p1 - s1, p2 - s2) + 1
    if p > 38:
        raise PandoExprError(f"a decimal {op} of precisions {p1} and {p2} is above 38 digits: Spark rounds it")
    return p


def negate(v: TypedValue) -> TypedValue:
    if v.kind == "int":
        return overflowed(-v.value, v.bits)
    if v.kind in ("decimal", "float"):
        return TypedValue(v.kind, -v.value, v.bits)
    if v.kind == "interval":
        return TypedValue("interval", -v.value)
    if v.kind == "null":
        return NULL
    raise PandoExprError(f"cannot negate a {v.kind} literal")


class _Folder(PredicateVisitor[None, TypedValue | None]):
    """A literal-only term as a TypedValue; None for anything that is not a constant."""

    def visit(self, node: exp.Expression, arg: None) -> TypedValue | None:
        current().check()
        return super().visit(node, arg)

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
        if inner is None:
            return None
        return cast_value(inner, node.args["to"], safe=bool(node.args.get("safe")))

    def visit_interval(self, node: exp.Expression, arg: None) -> TypedValue | None:
        return TypedValue("interval", _interval_of(node))

    def visit_neg(self, node: exp.Expression, arg: None) -> TypedValue | None:
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            # Spark's grammar reads a minus sign before a number as part of the literal:
            # -2147483648 is an INT
            return number_literal("-" + node.this.this)
        inner = self.visit(node.this, arg)
        if inner is None:
            return None
        if inner.kind in (*NUMERIC_KINDS, "interval", "null"):
            return negate(inner)
        return None

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


def _number(text: str) -> exp.Expression:
    neg = text.startswith("-")
    lit = exp.Literal.number(text.lstrip("-"))
    return exp.Neg(this=lit) if neg else lit


def render(v: TypedValue, *, compared_to_float: bool = False) -> exp.Expression:
    """Canonical SQL for a typed literal (Spark dialect): read back by Spark or by :func:`fold`
    under any session settings, it is the same typed value."""
    if v.kind == "null":
        return exp.Null()
    if v.kind == "bool":
        return exp.Boolean(this=bool(v.value))
    if v.kind == "int":
        lit = _number(str(v.value))
        if number_literal(str(v.value)).bits == v.bits:
            return lit
        return exp.Cast(this=lit, to=_dtype(INT_NAMES[v.bits]))
    if v.kind == "decimal":
        d: Decimal = v.value
        text = format(d.normalize() if d == d.to_integral_value() else d, "f")
        if d == d.to_integral_value():
            text = str(int(d))
            # keep it a decimal literal outside comparisons would need a scale; integers are
            # typed exactly against int/decimal columns, so an integer text is canonical.
        return _number(text)
    if v.kind == "float":
        f = v.value
        if compared_to_float and math.isfinite(f):
            # Spark casts a numeric literal compared with a float column to double; the
            # shortest repr round-trips, so the plain number is the same value (a FLOAT value
            # is a double exactly).
            text = repr(f) if f != int(f) or abs(f) >= 1e16 else str(int(f))
            if "e" in text or "E" in text:
                text = format(Decimal(repr(f)), "f")
            return _number(text)
        if v.bits == 32:
            text = "NaN" if math.isnan(f) else ("Infinity" if f == math.inf else "-Infinity" if f == -math.inf
                                                else repr(float(f)))
            return exp.Cast(this=exp.Literal.string(text), to=_dtype("FLOAT"))
        text = "NaN" if math.isnan(f) else ("Infinity" if f == math.inf else "-Infinity" if f == -math.inf else repr(f))
        return exp.Cast(this=exp.Literal.string(text), to=_dtype("DOUBLE"))
    if v.kind == "string":
        return exp.Literal.string(v.value)
    if v.kind == "date":
        return exp.Cast(this=exp.Literal.string(days_to_date(v.value).isoformat()), to=_dtype("DATE"))
    if v.kind == "timestamp":
        return exp.Cast(this=exp.Literal.string(micros_to_text(v.value, ntz=False)),
                        to=_dtype("TIMESTAMP"))
    if v.kind == "timestamp_ntz":
        return exp.Cast(this=exp.Literal.string(micros_to_text(v.value, ntz=True)),
                        to=_dtype("TIMESTAMP_NTZ"))
    raise PandoExprError(f"cannot render a {v.kind} literal")
