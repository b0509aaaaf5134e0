"""Value domains: a set of intervals over a term's ordered universe, plus a NULL flag.

The reasoning in `sides.py` turns each atom into "term ∈ domain". Intersecting the domains
of one term and finding the result empty proves that no row can satisfy a conjunction.
Only emptiness is ever claimed, so a domain may always be larger than the exact set (an
inexact atom simply gives a superset).

Universe keys per kind (see `key_of`): int/decimal → Fraction; float → (rank, Fraction)
with NaN as the top element (Spark's order); string → str (code point order); date →
days, timestamps → microseconds, bool → 0/1. Int, date, timestamp and bool universes are
discrete, so `(3, 4)` is empty there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pando_iceberg.expr.values import TypedValue

DISCRETE_KINDS = frozenset({"int", "date", "timestamp", "timestamp_ntz", "bool"})


def is_discrete(kind: str) -> bool:
    return kind in DISCRETE_KINDS or kind.startswith("decimal:")


def key_of(v: TypedValue, kind: str) -> Any:
    """The universe key of a literal already typed against a term of `kind`."""
    if kind == "float":
        f = float(v.value)
        if math.isnan(f):
            return (3, 0)
        if math.isinf(f):
            return (2, 0) if f > 0 else (0, 0)
        return (1, Fraction(f))
    if kind in ("int", "decimal"):
        return Fraction(v.value)
    if kind.startswith("decimal:"):  # a decimal column: count in units of its scale
        return Fraction(v.value) * 10 ** int(kind[8:])
    if kind == "bool":
        return int(bool(v.value))
    return v.value


@dataclass(frozen=True)
class Span:
    """One interval; lo/hi None = unbounded on that side (the top includes NaN)."""

    lo: Any = None
    lo_closed: bool = False
    hi: Any = None
    hi_closed: bool = False

    def is_empty(self, discrete: bool) -> bool:
        if self.lo is None or self.hi is None:
            return False
        if discrete and isinstance(self.lo, (int, Fraction)) and isinstance(self.hi, (int, Fraction)):
            lo = math.ceil(self.lo) if self.lo_closed else math.floor(self.lo) + 1
            hi = math.floor(self.hi) if self.hi_closed else math.ceil(self.hi) - 1
            return lo > hi
        if self.lo > self.hi:
            return True
        return self.lo == self.hi and not (self.lo_closed and self.hi_closed)


def _lo_key(s: Span):
    # Sort starts: unbounded first; at equal values a closed start comes first.
    return (0,) if s.lo is None else (1, s.lo, 0 if s.lo_closed else 1)


def _max_lo(a: Span, b: Span) -> tuple[Any, bool]:
    if a.lo is None:
        return b.lo, b.lo_closed
    if b.lo is None:
        return a.lo, a.lo_closed
    if a.lo != b.lo:
        return (a.lo, a.lo_closed) if a.lo > b.lo else (b.lo, b.lo_closed)
    return a.lo, a.lo_closed and b.lo_closed


def _min_hi(a: Span, b: Span) -> tuple[Any, bool]:
    if a.hi is None:
        return b.hi, b.hi_closed
    if b.hi is None:
        return a.hi, a.hi_closed
    if a.hi != b.hi:
        return (a.hi, a.hi_closed) if a.hi < b.hi else (b.hi, b.hi_closed)
    return a.hi, a.hi_closed and b.hi_closed


@dataclass(frozen=True)
class Domain:
    spans: tuple[Span, ...]
    null: bool  # may the term be NULL?

    @staticmethod
    def everything() -> Domain:
        return _EVERYTHING

    @staticmethod
    def non_null() -> Domain:
        return _NON_NULL

    @staticmethod
    def only_null() -> Domain:
        return Domain((), True)

    @staticmethod
    def empty() -> Domain:
        return Domain((), False)

    @staticmethod
    def points(keys: list[Any]) -> Domain:
        return Domain(tuple(Span(k, True, k, True) for k in sorted(set(keys))), False)

    def is_empty(self, discrete: bool) -> bool:
        return not self.null and all(s.is_empty(discrete) for s in self.spans)

    def intersect(self, other: Domain) -> Domain:
        # Fast paths: most restrictions in sides() are "non-NULL" or cover everything.
        if other.spans is _ALL or other.spans == _ALL:
            return self if self.null <= other.null else Domain(self.spans, False)
        if self.spans is _ALL or self.spans == _ALL:
            return other if other.null <= self.null else Domain(other.spans, False)
        # One sweep over both sorted, merged span lists (linear, not |a|·|b|: IN lists of
        # thousands of values meet each other in sides()).
        a_spans, b_spans = _merge(self.spans), _merge(other.spans)
        spans = []
        i = j = 0
        while i < len(a_spans) and j < len(b_spans):
            a, b = a_spans[i], b_spans[j]
            lo, lo_c = _max_lo(a, b)
            hi, hi_c = _min_hi(a, b)
            s = Span(lo, lo_c, hi, hi_c)
            if not s.is_empty(False):
                spans.append(s)
            if b.hi is None or (a.hi is not None and (a.hi < b.hi or (a.hi == b.hi and not a.hi_closed))):
                i += 1  # a ends first: no later span of b can meet it
            else:
                j += 1
        return Domain(tuple(spans), self.null and other.null)

    def union(self, other: Domain) -> Domain:
        return Domain(_merge(self.spans + other.spans), self.null or other.null)

    def complement(self) -> Domain:
        """Everything not in this domain (NULL flips too)."""
        out: list[Span] = []
        lo, lo_c = None, False  # start of the current gap; None = unbounded below
        for s in _merge(self.spans):
            if s.lo is not None:
                gap = Span(lo, lo_c, s.lo, not s.lo_closed)
                if not gap.is_empty(False):
                    out.append(gap)
            if s.hi is None:
                return Domain(tuple(out), not self.null)
            lo, lo_c = s.hi, not s.hi_closed
        out.append(Span(lo, lo_c, None, False))
        return Domain(tuple(out), not self.null)


@dataclass(frozen=True)
class ColumnRange:
    """What a data file's metadata proves about a column of ``kind``: its non-NULL, non-NaN
    values lie in [``lower``, ``upper``] (None: unbounded on that side; a NaN bound is no
    bound), it holds NULL only if ``null`` and NaN only if ``nan``, and nothing but NULL if
    ``only_null``. Bounds are values as typed literals hold them (ints, days, microseconds,
    Decimal, float, str, bool)."""

    kind: str
    lower: Any
    upper: Any
    null: bool
    nan: bool
    only_null: bool = False

    def domain(self) -> Domain:
        if self.only_null:
            return Domain.only_null()
        return bounds_domain(self.kind, self.lower, self.upper, self.null, self.nan)


def bounds_domain(kind: str, lower: Any, upper: Any, null: bool, nan: bool) -> Domain:
    """The domain of a :class:`ColumnRange` (NaN is the float universe's top element)."""
    base = "decimal" if kind.startswith("decimal:") else kind

    def key(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        return key_of(TypedValue(base, v), kind)

    lo, hi = key(lower), key(upper)
    if lo is not None and hi is not None and lo > hi:  # not bounds of any value: no claim from them
        lo = hi = None
    spans = [Span(lo, lo is not None, hi, hi is not None)]
    if kind == "float" and nan and hi is not None:
        spans.append(Span((3, 0), True, (3, 0), True))
    return Domain(tuple(spans), null)


_ALL = (Span(),)
_EVERYTHING = Domain(_ALL, True)
_NON_NULL = Domain(_ALL, False)


def _merge(spans: tuple[Span, ...]) -> tuple[Span, ...]:
    """Sort and merge overlapping spans (touching spans stay apart: harmless)."""
    out: list[Span] = []
    for s in sorted((s for s in spans if not s.is_empty(False)), key=_lo_key):
        if out:
            last = out[-1]
            overlaps = last.hi is None or s.lo is None or s.lo < last.hi or (
                s.lo == last.hi and (s.lo_closed or last.hi_closed))
            if overlaps:
                if last.hi is None or s.hi is None:
                    hi, hi_c = None, False
                elif s.hi > last.hi or (s.hi == last.hi and s.hi_closed):
                    hi, hi_c = s.hi, s.hi_closed
                else:
                    hi, hi_c = last.hi, last.hi_closed
                out[-1] = Span(last.lo, last.lo_closed, hi, hi_c)
                continue
        out.append(s)
    return tuple(out)
