"""The planner's process-wide caches, in one place: each bounded the same way (a
:class:`BoundedCache`, at most so many entries and, where its values are large, so many bytes by
a process setting of ``pando_iceberg.settings``), and all of them cleared by :func:`clear`.

Every cache is keyed by something immutable (a metadata file's location, a snapshot id, a
schema id, a query's shape), so an entry is never stale: bounding them only limits memory, and
clearing them only costs the next plan its reads.

=====================  =======================================================  ==================================
cache                  key → value                                              bound
=====================  =======================================================  ==================================
TABLE_METADATA         metadata file location → parsed table metadata           256 entries
SHAPES                 a query's shape (literals as placeholders) → qualified   256 entries
KEY_SETS               a join's chain snapshots, pk, filter SQL → key set       256 entries
DIMENSION_COLUMNS      (table uuid, snapshot) → the dimension's columns read    64 entries, dimensionCache.maxBytes
UNIQUENESS             (table uuid, snapshot, column) → unique and not NULL     1024 entries
TOO_MANY_KEYS          a join's key-set key → the key limit a read stopped at   1024 entries
SPARK_SCHEMAS          (table uuid, Iceberg schema id) → Spark's Arrow schema   256 entries
MANIFEST_LISTS         a snapshot's manifest list path → its manifests          256 entries
=====================  =======================================================  ==================================

Decoded manifest entries are kept by ``planner.manifests.DEFAULT_MANIFEST_CACHE``, a
:class:`BoundedCache` too (bounded in bytes by ``manifestCache.maxBytes``) wrapped with the
manifest as its key and hit and decode counts; :func:`clear` clears it too. It also clears two
memos that keep a bound of their own: the shared atom tables of ``expr.sides`` (the expression
layer, below the planner) and the decoded bound values of ``planner.metrics`` (a dict on the
hot path of every file's statistics, emptied when full).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..settings import value as setting

_MADE: weakref.WeakSet[BoundedCache] = weakref.WeakSet()  # every BoundedCache alive, for clear()


class BoundedCache:
    """A thread-safe LRU of at most ``max_entries`` values and, when ``max_bytes`` is given, at
    most that many bytes by ``size(value)``; a value larger than ``max_bytes`` on its own is not
    kept. Every BoundedCache is one that :func:`clear` clears."""

    def __init__(self, max_entries: int = 256, *, max_bytes: int | None = None,
                 size: Callable[[Any], int] | None = None):
        if max_bytes is not None and size is None:
            raise ValueError("BoundedCache(max_bytes=...) needs size=, the bytes of a value")
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size = size
        self.bytes = 0
        self.evictions = 0  # values dropped to keep the bounds
        _MADE.add(self)

    def get(self, key):
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key][0]

    def put(self, key, value) -> None:
        nbytes = int(self._size(value)) if self._size is not None else 0
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if self.max_bytes is not None and nbytes > self.max_bytes:
                return
            self._entries[key] = (value, nbytes)
            self.bytes += nbytes
            while len(self._entries) > self.max_entries or (self.max_bytes is not None and self.bytes > self.max_bytes):
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped
                self.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


# Parsed table metadata by metadata file location: a metadata file never changes once written,
# so a table whose catalog still points at it needs no new read and parse (~1–2.5 ms
# per table per query, four tables per TPC-H join query).
TABLE_METADATA = BoundedCache(256)
# Qualified query shapes (``workload.qualify``): a query of a known template is a copy of its
# shape with its own literals put back, not a second qualification.
SHAPES = BoundedCache(256)
# Key sets of join filters (``planner.keysets``), per chain of dimension snapshots: a new
# snapshot is a new key.
KEY_SETS = BoundedCache(256)
# The columns of dimensions that key sets were read from, in Arrow: a held-out query's new
# literals then cost one vectorized filter, not a read. Bounded in bytes by the process setting
# dimensionCache.maxBytes (0 keeps none).
DIMENSION_COLUMNS = BoundedCache(64, max_bytes=setting("dimensionCache.maxBytes"), size=lambda t: t.nbytes)
# Whether a dimension column is unique and not NULL (``planner.uniqueness``).
UNIQUENESS = BoundedCache(1024)
# Key sets a row filter's bounded read stopped past a limit → that limit (``planner.row_filters``):
# a query with the same literals on the same snapshots does not read them again.
TOO_MANY_KEYS = BoundedCache(1024)
# Spark's Arrow view of a table (``spark.pruned.spark_schema``): a function of its Iceberg schema.
SPARK_SCHEMAS = BoundedCache(256)
# A snapshot's manifests (``planner.manifests.snapshot_manifests``): pyiceberg reads the manifest
# list's Avro file again on every plan, and a manifest list never changes once written.
MANIFEST_LISTS = BoundedCache(256)

BOUNDED = (TABLE_METADATA, SHAPES, KEY_SETS, DIMENSION_COLUMNS, UNIQUENESS, TOO_MANY_KEYS, SPARK_SCHEMAS,
           MANIFEST_LISTS)


def clear() -> None:
    """Forget everything the planner cached in this process (memory back; the next plans read
    again what they need)."""
    from ..expr.sides import clear_caches as clear_atom_tables
    from .metrics import DECODED

    for cache in list(_MADE):  # BOUNDED, and the decoded manifests' (planner.manifests)
        cache.clear()
    DECODED.clear()
    clear_atom_tables()


__all__ = [
    "BOUNDED",
    "DIMENSION_COLUMNS",
    "KEY_SETS",
    "MANIFEST_LISTS",
    "SHAPES",
    "SPARK_SCHEMAS",
    "TABLE_METADATA",
    "TOO_MANY_KEYS",
    "UNIQUENESS",
    "BoundedCache",
    "clear",
]
