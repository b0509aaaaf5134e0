"""The Spark session settings that folding, binding and evaluation follow.

Spark's answer to a predicate depends on the session: ``spark.sql.ansi.enabled`` (overflow and
bad casts raise instead of wrapping or giving NULL, and string literals are typed otherwise),
``spark.sql.session.timeZone`` (literals without an offset, dates as timestamps, the local date
of an instant) and ``spark.sql.timestampType`` (what ``TIMESTAMP`` means). The reasoning reads
the current :class:`Semantics` (:func:`current`); the Spark entry points set it from the session
for the duration of planning (:func:`of_session`, :func:`from_spark`), pyiceberg-only planning and
the layout keep the defaults (UTC, ANSI off).

What a setting changes and the reasoning does not model is refused: folding or binding raises
``PandoExprError`` and the predicate prunes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import zoneinfo
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from pando_iceberg.expr.errors import PandoExprError

# Settings whose non-default values change literal typing, casts or coercions in ways the
# reasoning does not model (key → Spark's default, lower case).
UNMODELLED_DEFAULTS: dict[str, str] = {
    "spark.sql.legacy.exponentLiteralAsDecimal.enabled": "false",
    "spark.sql.legacy.allowNegativeScaleOfDecimal": "false",
    "spark.sql.legacy.interval.enabled": "false",
    "spark.sql.legacy.typeCoercion.datetimeToString.enabled": "false",
    "spark.sql.ansi.doubleQuotedIdentifiers": "false",
    "spark.sql.timestampType": "timestamp_ltz",
}

_UTC_NAMES = {"UTC", "Z", "GMT", "ETC/UTC", "ETC/GMT", "UCT", "ZULU", "UNIVERSAL", "+00:00", "-00:00", "UTC+00:00",
              "GMT+00:00", "GMT0", "ETC/GMT0", "ETC/UCT", "ETC/UNIVERSAL", "ETC/ZULU"}


@dataclass(frozen=True)
class Semantics:
    """The settings of one Spark session that values depend on. ``unmodelled``: the settings at
    values the reasoning does not model (then nothing is folded or bound)."""

    ansi: bool = False
    time_zone: str = "UTC"
    unmodelled: tuple[str, ...] = ()

    @property
    def utc(self) -> bool:
        """Is the session zone UTC (a zero offset at every instant)? Zone-dependent operations on
        columns are modelled only then: the layout's cuts were evaluated with UTC semantics."""
        return self.time_zone.upper() in _UTC_NAMES

    def tzinfo(self) -> dt.tzinfo:
        return zone_of(self.time_zone)

    def spark_conf(self) -> dict[str, str]:
        """The Spark session settings that give these semantics (every unmodelled one at its
        default): what Spark must run under to compute what this model computes."""
        if self.unmodelled:
            raise PandoExprError("settings with unmodelled values have no Spark configuration: "
                                 + ", ".join(self.unmodelled))
        return {"spark.sql.ansi.enabled": str(self.ansi).lower(), "spark.sql.session.timeZone": self.time_zone,
                **UNMODELLED_DEFAULTS}

    def check(self) -> None:
        if self.unmodelled:
            raise PandoExprError("the session sets " + ", ".join(self.unmodelled) +
                                 ", whose semantics are not modelled: no predicate is used for pruning")


DEFAULT = Semantics()

_CURRENT: ContextVar[Semantics] = ContextVar("pando_semantics", default=DEFAULT)


def current() -> Semantics:
    return _CURRENT.get()


@contextlib.contextmanager
def using(semantics: Semantics) -> Iterator[Semantics]:
    """Fold, bind and evaluate under ``semantics`` inside the block."""
    token = _CURRENT.set(semantics)
    try:
        yield semantics
    finally:
        _CURRENT.reset(token)


@functools.lru_cache(maxsize=64)
def zone_of(name: str) -> dt.tzinfo:
    """A zone as Spark reads it in a timestamp or a setting: UTC, Z, an offset (+hh, +hh:mm,
    +hhmm, optionally after UTC or GMT) or a region id (America/Los_Angeles, with its DST)."""
    if name.upper() in _UTC_NAMES:
        return dt.UTC
    text = name[3:] if name.upper().startswith(("UTC", "GMT")) and len(name) > 3 and name[3] in "+-" else name
    if text[:1] in "+-":
        sign = -1 if text[0] == "-" else 1
        digits = text[1:]
        hours, _, minutes = digits.partition(":") if ":" in digits else (digits[:2], "", digits[2:])
        try:
            return dt.timezone(sign * dt.timedelta(hours=int(hours), minutes=int(minutes or 0)))
        except ValueError:
            raise PandoExprError(f"unsupported session time zone {name!r}") from None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise PandoExprError(f"unsupported session time zone {name!r}") from None


def from_spark(spark: Any) -> Semantics:
    """The settings of a PySpark session (duck-typed: ``spark.conf.get(key, default)``)."""
    conf = spark.conf
    ansi = str(conf.get("spark.sql.ansi.enabled", "false")).strip().lower() == "true"
    zone = str(conf.get("spark.sql.session.timeZone", "UTC")).strip()
    unmodelled = []
    for key, default in UNMODELLED_DEFAULTS.items():
        value = str(conf.get(key, default)).strip().lower()
        if value != default:
            unmodelled.append(f"{key}={value}")
    try:
        zone_of(zone)
    except PandoExprError:
        unmodelled.append(f"spark.sql.session.timeZone={zone}")
    return Semantics(ansi=ansi, time_zone=zone, unmodelled=tuple(unmodelled))


F = TypeVar("F", bound=Callable[..., Any])


def of_session(fn: F) -> F:
    """Run ``fn(spark, ...)`` under the settings of its Spark session."""

    @functools.wraps(fn)
    def wrapper(spark: Any, *args: Any, **kwargs: Any) -> Any:
        with using(from_spark(spark)):
            return fn(spark, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
