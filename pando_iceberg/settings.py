"""The read-side tunables of planning: one registry, one resolver.

Each :class:`Setting` is read, first found winning, from

1. the Spark session's conf, ``spark.sql.pando.<name>`` (``spark.conf.set(...)``, ``SET`` in SQL,
   ``--conf`` or spark-defaults), when Spark plans the query; or the scan's options,
   ``pando.<name>``, when ``pando_iceberg.scan(table, ..., options={...})`` plans it;
2. the environment variable (``PANDO_...``);
3. the built-in default.

A setting of scope ``process`` bounds a cache the whole process shares: only the environment
sets it, read once when the cache is made.

Spark's conf costs a py4j round trip per key (0.2-1 ms), so it is not read per use: the planning
entry points read their session's settings once, at the start of a planning (:func:`of_session`:
a bad value fails the query there, naming the key, rather than a table falling back to an
unpruned read), and code below them asks :func:`value`. docs/CONFIGURATION.md lists every
setting (tests/test_settings.py checks it against :data:`SETTINGS`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from .config import ConfigError

SPARK_PREFIX = "spark.sql.pando."
OPTION_PREFIX = "pando."
SCOPES = ("session", "process")


@dataclass(frozen=True)
class Setting:
    """A non-negative integer tunable: ``name`` (its Spark conf key and scan option follow from it),
    environment variable, default, what it means and its scope (``session`` or ``process``)."""

    name: str
    env: str
    default: int
    meaning: str
    scope: str = "session"

    @property
    def spark_key(self) -> str | None:
        return SPARK_PREFIX + self.name if self.scope == "session" else None

    @property
    def option(self) -> str | None:
        return OPTION_PREFIX + self.name if self.scope == "session" else None

    def parse(self, raw: Any, source: str) -> int:
        """``raw`` as this setting's value; ConfigError naming ``source`` (the key or variable) otherwise."""
        text = str(raw).strip()
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise ConfigError(f"{source}={text!r} is not accepted: an integer >= 0 is ({self.meaning})")
        return value


MiB = 1024 * 1024

SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("staging.maxBytes", "PANDO_STAGE_MAX_BYTES", 16 * MiB,
            "the most bytes of chosen files a table with a predicate of its own is read through its staged "
            "tasks with when its trees prune no further than Iceberg (0: never)"),
    Setting("taskCache.maxFiles", "PANDO_JVM_TASK_CACHE_FILES", 100_000,
            "the most file scan tasks the JVM keeps for the snapshots planned last; a snapshot with more files "
            "is planned in the JVM per query"),
    Setting("joinKeys.maxDimensionRows", "PANDO_JOIN_KEYS_MAX_DIMENSION_ROWS", 1_000_000,
            "the largest dimension, in rows, whose key sets are read through pyiceberg (above: one Spark job)"),
    Setting("joinPruning.maxDimensionRows", "PANDO_JOIN_PRUNING_MAX_DIMENSION_ROWS", 100_000,
            "the largest table of a join's chain, in rows, whose key set is read for join pruning alone "
            "(0: only joins a literal cut needs)"),
    Setting("rowFilter.minRows", "PANDO_ROW_FILTER_MIN_ROWS", 1_000_000,
            "the fewest rows a table must have for its rows to be filtered by join key sets (Spark)"),
    Setting("rowFilter.maxKeys", "PANDO_ROW_FILTER_MAX_KEYS", 1_000_000,
            "the most keys a join's key set may have to filter the table's rows (0: no row filters)"),
    Setting("dimensionCache.maxBytes", "PANDO_DIMENSION_CACHE_BYTES", 256 * MiB,
            "the bytes of dimension columns kept in memory for key sets (0: none kept)", scope="process"),
    Setting("manifestCache.maxBytes", "PANDO_MANIFEST_CACHE_BYTES", 256 * MiB,
            "the bytes of decoded manifest entries kept in memory (0: none kept)", scope="process"),
)}


def from_environment(name: str, env: Mapping[str, str] | None = None) -> int:
    """The setting from its environment variable (unset or blank: the default)."""
    s = SETTINGS[name]
    raw = (os.environ if env is None else env).get(s.env, "").strip()
    return s.parse(raw, s.env) if raw else s.default


class Tunables:
    """The settings of one planning. ``get(key, None)``: the Spark session's conf (or a mapping of
    scan options, ``prefix`` ``'pando.'``); a key absent there falls back to the environment, then
    the default. Each setting is looked up once."""

    def __init__(self, conf: Any = None, prefix: str = SPARK_PREFIX, owner: Any = None):
        self.conf = conf
        self.prefix = prefix
        self.owner = owner  # the Spark session read (a nested planning of the same session reuses this)
        self._values: dict[str, int] = {}

    def __getitem__(self, name: str) -> int:
        hit = self._values.get(name)
        if hit is None:
            s = SETTINGS[name]
            raw = None
            if self.conf is not None and s.scope == "session":
                raw = self.conf.get(self.prefix + name, None)
            hit = s.parse(raw, self.prefix + name) if raw is not None and str(raw).strip() else from_environment(name)
            self._values[name] = hit
        return hit

    def read_all(self) -> Tunables:
        """Every session setting read now (a bad value raises here)."""
        for name in _SESSION:
            self[name]
        return self


def of_spark(spark: Any) -> Tunables:
    """The settings of a PySpark session (``spark.conf``), read on first use."""
    return Tunables(spark.conf, SPARK_PREFIX, owner=spark)


def of_options(options: Mapping[str, Any]) -> Tunables:
    """The settings of a pyiceberg scan's ``options``: ``pando.<name>`` keys; another ``pando.`` key
    is an error naming the accepted ones."""
    for key in options:
        if str(key).startswith(OPTION_PREFIX) and str(key)[len(OPTION_PREFIX):] not in _SESSION:
            raise ConfigError(f"scan option {key!r} is not a Pando setting; accepted: "
                              + ", ".join(OPTION_PREFIX + n for n in _SESSION))
    return Tunables(options, OPTION_PREFIX)


_SESSION = [n for n, s in SETTINGS.items() if s.scope == "session"]
_CURRENT: ContextVar[Tunables | None] = ContextVar("pando_tunables", default=None)


def value(name: str) -> int:
    """The setting for the planning under way (:func:`using`), else from the environment."""
    current = _CURRENT.get()
    return current[name] if current is not None else from_environment(name)


def current() -> Tunables | None:
    return _CURRENT.get()


@contextlib.contextmanager
def using(tunables: Tunables) -> Iterator[Tunables]:
    """Plan with ``tunables`` inside the block."""
    token = _CURRENT.set(tunables)
    try:
        yield tunables
    finally:
        _CURRENT.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def of_session(fn: F) -> F:
    """Run ``fn(spark, ...)`` with the settings of its Spark session (those already taken for the
    same session by an enclosing planning are kept)."""

    @functools.wraps(fn)
    def wrapper(spark: Any, *args: Any, **kwargs: Any) -> Any:
        held = _CURRENT.get()
        if held is not None and held.owner is spark:
            return fn(spark, *args, **kwargs)
        with using(of_spark(spark).read_all()):
            return fn(spark, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


__all__ = ["SETTINGS", "Setting", "Tunables", "current", "from_environment", "of_options", "of_session", "of_spark",
           "using", "value"]
