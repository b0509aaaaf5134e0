"""pyiceberg's inclusive metrics evaluator, compiled once per query into closures.

``DataScan.plan_files`` asks ``_InclusiveMetricsEvaluator.eval`` about every live data file: a
visitor object per file, a ``functools.singledispatch`` per expression node and a
``from_bytes`` per bound and predicate. On TPC-H SF 1's held-out join queries that was the
largest single part of pyiceberg's planning once manifests were cached (Q19's OR of
three branches judged ~70 files through ~12 nodes each). :func:`compiled` turns the evaluator's
bound expression into nested closures with the same answers — the same checks in the same
order as pyiceberg 0.12's ``_InclusiveMetricsEvaluationVisitor`` — and decodes each bound once
(:data:`DECODED`: bounds are immutable bytes of immutable manifests). An expression with a node
it does not know keeps pyiceberg's own ``eval``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundEqualTo,
    BoundGreaterThan,
    BoundGreaterThanOrEqual,
    BoundIn,
    BoundIsNaN,
    BoundIsNull,
    BoundLessThan,
    BoundLessThanOrEqual,
    BoundNotEqualTo,
    BoundNotIn,
    BoundNotNaN,
    BoundNotNull,
    BoundReference,
    Or,
)
from pyiceberg.expressions.visitors import IN_PREDICATE_LIMIT
from pyiceberg.types import PrimitiveType

# The five statistics maps of a data file, as the visitor reads them (a missing map is empty).
Stats = tuple[Mapping[int, int], Mapping[int, int], Mapping[int, int], Mapping[int, bytes], Mapping[int, bytes]]
Check = Callable[[Stats], bool]

_EMPTY: Mapping[Any, Any] = {}
_MISSING = object()

DECODED_MAX = 1 << 16
DECODED: dict[tuple[str, bytes], Any] = {}  # (type, bound bytes) → from_bytes(type, bytes)


class Unsupported(Exception):
    """A node :func:`compiled` does not know: pyiceberg's visitor evaluates the expression."""


def _decoder(field_type: PrimitiveType) -> Callable[[bytes], Any]:
    name = str(field_type)

    def decode(raw: bytes) -> Any:
        key = (name, raw)
        hit = DECODED.get(key, _MISSING)
        if hit is _MISSING:
            if len(DECODED) >= DECODED_MAX:
                DECODED.clear()
            hit = DECODED[key] = from_bytes(field_type, raw)
        return hit

    return decode


def _is_nan(value: Any) -> bool:
    try:
        return math.isnan(value)
    except TypeError:  # None or not a number
        return False


def _nulls_only(s: Stats, fid: int) -> bool:
    value_count, null_count = s[0].get(fid), s[1].get(fid)
    return bool(value_count) and bool(null_count) and value_count == null_count


def _nans_only(s: Stats, fid: int) -> bool:
    nan_count, value_count = s[2].get(fid), s[0].get(fid)
    return bool(nan_count) and bool(value_count) and nan_count == value_count


def _predicate(p: Any) -> Check:
    if not isinstance(p.term, BoundReference):
        raise Unsupported(type(p.term).__name__)
    field = p.term.ref().field
    fid, field_type = field.field_id, field.field_type
    if isinstance(p, BoundIsNull):
        return lambda s: s[1].get(fid) != 0
    if isinstance(p, BoundNotNull):
        return lambda s: not _nulls_only(s, fid)
    if isinstance(p, BoundIsNaN):
        return lambda s: s[2].get(fid) != 0 and not _nulls_only(s, fid)
    if isinstance(p, BoundNotNaN):
        return lambda s: not _nans_only(s, fid)
    if isinstance(p, (BoundNotEqualTo, BoundNotIn)):
        return lambda s: True
    if not isinstance(field_type, PrimitiveType):
        raise Unsupported(str(field_type))
    decode = _decoder(field_type)
    if isinstance(p, BoundIn):
        return _in(fid, decode, set(p.value_set))
    value = p.literal.value

    def lower_ok(s: Stats, cannot: Callable[[Any], bool]) -> bool:
        raw = s[3].get(fid)
        if raw is None:
            return True
        bound = decode(raw)
        return _is_nan(bound) or not cannot(bound)

    def upper_ok(s: Stats, cannot: Callable[[Any], bool]) -> bool:
        raw = s[4].get(fid)
        if raw is None:
            return True
        bound = decode(raw)
        return not cannot(bound) or _is_nan(bound)

    def live(s: Stats) -> bool:
        return not (_nulls_only(s, fid) or _nans_only(s, fid))

    if isinstance(p, BoundLessThan):
        return lambda s: live(s) and lower_ok(s, lambda b: b >= value)
    if isinstance(p, BoundLessThanOrEqual):
        return lambda s: live(s) and lower_ok(s, lambda b: b > value)
    if isinstance(p, BoundGreaterThan):
        return lambda s: live(s) and upper_ok(s, lambda b: b <= value)
    if isinstance(p, BoundGreaterThanOrEqual):
        return lambda s: live(s) and upper_ok(s, lambda b: b < value)
    if isinstance(p, BoundEqualTo):
        return lambda s: live(s) and _equal_ok(s[3].get(fid), s[4].get(fid), decode, value)
    raise Unsupported(type(p).__name__)


def _equal_ok(low: bytes | None, high: bytes | None, decode: Callable[[bytes], Any], value: Any) -> bool:
    if low is not None:
        lower = decode(low)
        if _is_nan(lower):  # unreliable bounds: the upper one is not looked at
            return True
        if lower > value:
            return False
    if high is not None:
        upper = decode(high)
        if _is_nan(upper):
            return True
        if upper < value:
            return False
    return True


def _in(fid: int, decode: Callable[[bytes], Any], literals: set[Any]) -> Check:
    def check(s: Stats) -> bool:
        if _nulls_only(s, fid) or _nans_only(s, fid):
            return False
        if len(literals) > IN_PREDICATE_LIMIT:
            return True
        kept = literals
        raw = s[3].get(fid)
        if raw is not None:
            lower = decode(raw)
            if _is_nan(lower):
                return True
            kept = {v for v in kept if lower <= v}
            if not kept:
                return False
        raw = s[4].get(fid)
        if raw is not None:
            upper = decode(raw)
            if _is_nan(upper):
                return True
            kept = {v for v in kept if upper >= v}
            if not kept:
                return False
        return True

    return check


def _compile(e: Any) -> Check:
    if isinstance(e, AlwaysTrue):
        return lambda s: True
    if isinstance(e, AlwaysFalse):
        return lambda s: False
    if isinstance(e, And):
        left, right = _compile(e.left), _compile(e.right)
        return lambda s: left(s) and right(s)
    if isinstance(e, Or):
        left, right = _compile(e.left), _compile(e.right)
        return lambda s: left(s) or right(s)
    if hasattr(e, "term"):
        return _predicate(e)
    raise Unsupported(type(e).__name__)  # NOT (rewritten away before binding), or unknown


def compiled(evaluator: Any) -> Callable[[Any], bool]:
    """``evaluator.eval`` (a pyiceberg ``_InclusiveMetricsEvaluator``: its bound expression and
    ``include_empty_files``) compiled; ``evaluator.eval`` itself when its expression has a node
    this module does not know (e.g. STARTS WITH)."""
    expr, include_empty = getattr(evaluator, "expr", None), getattr(evaluator, "include_empty_files", None)
    if expr is None or include_empty is None:  # another pyiceberg's evaluator
        return evaluator.eval
    try:
        check = _compile(expr)
    except Unsupported:
        return evaluator.eval

    def eval(file: Any) -> bool:
        if not include_empty and file.record_count == 0:
            return False
        if file.record_count < 0:  # older writers' unknown counts
            return True
        return check((file.value_counts or _EMPTY, file.null_value_counts or _EMPTY, file.nan_value_counts or _EMPTY,
                      file.lower_bounds or _EMPTY, file.upper_bounds or _EMPTY))

    return eval


__all__ = ["DECODED", "Unsupported", "compiled"]
