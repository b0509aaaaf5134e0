"""Decoded manifest entries cached by manifest path: pyiceberg's planning without re-decoding.

pyiceberg 0.12 caches manifest-list entries (``ManifestFile``) but decodes every manifest's Avro
entries again on each ``DataScan.plan_files()`` (pyiceberg issues #1229, #1479): CPU-bound and
the bulk of a plan's time. A manifest never changes once written (a new snapshot lists new
manifest paths), so its decoded live entries can be kept and reused by every later plan of the
process — Java Iceberg's ``io.manifest.cache-enabled`` does the same.

    tasks = plan_files(table, row_filter, snapshot_id=sid)   # == table.scan(...).plan_files()

Everything after decoding is pyiceberg's own code: :class:`CachedManifestPlanner` is a
``ManifestGroupPlanner`` whose change is where live entries come from; the manifest evaluator
(partition summaries), the partition evaluator, the sequence-number check of delete manifests,
delete-file matching (``DeleteFileIndex``) and residuals are the inherited ones, so the tasks
are the ones ``DataScan.plan_files()`` returns. Two shortcuts give the evaluators' own answers:
a spec without partition fields builds neither partition evaluator (see
``plan_manifest_entries``), and the metrics evaluator's bound expression is compiled into
closures (``planner.metrics.compiled``).

The cache is bounded in bytes (the process setting ``manifestCache.maxBytes``, ``pando_iceberg.settings``,
for the process-wide :data:`DEFAULT_MANIFEST_CACHE`) and evicts the least recently used manifest, as
every cache of the planner does (``planner.caches``).
Sizes are estimates of the Python objects' memory (see :func:`estimate_entries_bytes`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pyiceberg.expressions import AlwaysFalse, AlwaysTrue
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.table import ManifestGroupPlanner
from pyiceberg.utils.concurrent import ExecutorFactory

from ..settings import value as setting
from .caches import MANIFEST_LISTS, BoundedCache
from .metrics import compiled

INITIAL_SEQUENCE_NUMBER = 0  # the spec's default for v1 manifests (pyiceberg uses the same)

ManifestKey = tuple[str, int, int, int, int]


def manifest_key(manifest: ManifestFile) -> ManifestKey:
    """A manifest's identity: its path, plus the manifest-list fields its entries inherit
    (sequence number, adding snapshot, spec id) and its length, so that a rewritten file at the
    same path (which Iceberg never does) could not be served stale entries."""
    return (manifest.manifest_path, int(manifest.manifest_length or 0), int(manifest.sequence_number or 0),
            int(manifest.added_snapshot_id or 0), int(manifest.partition_spec_id or 0))


@dataclass
class CacheStats:
    hits: int = 0
    decodes: int = 0  # manifests read and decoded (misses)
    evictions: int = 0
    bytes: int = 0
    manifests: int = 0


class ManifestEntryCache:
    """LRU cache of a manifest's decoded live entries (``fetch_manifest_entry(io,
    discard_deleted=True)``), bounded by the estimated bytes the entries occupy: a
    :class:`~pando_iceberg.planner.caches.BoundedCache` keyed by :func:`manifest_key`, with hit and
    decode counts. Thread-safe (pyiceberg opens manifests from a thread pool). A manifest whose
    entries alone exceed the bound is returned but not kept."""

    def __init__(self, max_bytes: int | None = None):
        if max_bytes is None:
            max_bytes = setting("manifestCache.maxBytes")
        if int(max_bytes) < 0:
            raise ValueError(f"ManifestEntryCache max_bytes must be >= 0 (0 disables caching), got {max_bytes}")
        self.max_bytes = int(max_bytes)
        # any number of manifests: only their bytes are bounded
        self._entries = BoundedCache(sys.maxsize, max_bytes=self.max_bytes, size=estimate_entries_bytes)
        self._lock = threading.Lock()
        self._hits = self._decodes = 0

    @property
    def stats(self) -> CacheStats:
        return CacheStats(self._hits, self._decodes, self._entries.evictions, self._entries.bytes, len(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._entries.bytes

    def __contains__(self, manifest: ManifestFile) -> bool:
        return manifest_key(manifest) in self._entries

    def get(self, manifest: ManifestFile) -> list[ManifestEntry] | None:
        hit = self._entries.get(manifest_key(manifest))
        if hit is not None:
            with self._lock:
                self._hits += 1
        return hit

    def entries(self, io, manifest: ManifestFile) -> list[ManifestEntry]:
        """The manifest's live entries, decoded once and then served from the cache. The list and
        its entries are shared: callers must not modify them (pyiceberg's planning does not)."""
        hit = self.get(manifest)
        if hit is not None:
            return hit
        decoded = manifest.fetch_manifest_entry(io, discard_deleted=True)
        with self._lock:
            self._decodes += 1
        self._entries.put(manifest_key(manifest), decoded)
        return decoded

    def clear(self) -> None:
        self._entries.clear()


# --- size estimates ------------------------------------------------------------------------

_SAMPLE = 8  # entries per manifest measured exactly


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and everything it owns (``sys.getsizeof`` summed over the object graph:
    pyiceberg Records, dicts, lists, tuples, sets, str/bytes/ints). Objects shared process-wide
    (enums, None, booleans, small ints, interned strings) are not counted."""
    if seen is None:
        seen = set()
    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if o is None or isinstance(o, (bool, Enum)):
            continue  # singletons and enum members are shared, not owned
        if isinstance(o, int) and -5 <= o <= 256:
            continue
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        data = getattr(o, "_data", None)
        if isinstance(data, list):  # pyiceberg Record (slots: _data; DataFile also has __dict__)
            stack.append(data)
            d = getattr(o, "__dict__", None)
            if d:
                stack.append(d)
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
    return total


def _variable_bytes(entry: ManifestEntry) -> int:
    """The parts of an entry whose size differs from file to file: its path and bound values."""
    f = entry.data_file
    n = len(f.file_path)
    for bounds in (f.lower_bounds, f.upper_bounds):
        if bounds:
            n += sum(len(v) for v in bounds.values())
    return n


def estimate_entries_bytes(entries: list[ManifestEntry]) -> int:
    """Estimated memory of decoded entries: a few entries are measured exactly (:func:`deep_size`),
    their fixed part (everything but path and bound values) averaged, and each entry counted as
    that fixed part plus its own path and bound bytes. Exact for the measured entries; entries of
    one manifest share their column set, so the fixed part differs little among them."""
    if not entries:
        return sys.getsizeof(entries)
    step = max(1, len(entries) // _SAMPLE)
    sample = entries[::step][:_SAMPLE]
    fixed = sum(deep_size(e) - _variable_bytes(e) for e in sample) / len(sample)
    return int(sys.getsizeof(entries) + fixed * len(entries) + sum(_variable_bytes(e) for e in entries))


DEFAULT_MANIFEST_CACHE = ManifestEntryCache()


# --- planning ------------------------------------------------------------------------------

class CachedManifestPlanner(ManifestGroupPlanner):
    """pyiceberg's ``ManifestGroupPlanner`` reading live entries through a
    :class:`ManifestEntryCache`. ``plan_files`` (delete-file matching, residuals) is inherited;
    only ``plan_manifest_entries`` changes: manifests already cached are filtered in the calling
    thread, the others are decoded in pyiceberg's executor as pyiceberg does; an unpartitioned
    spec's manifest and partition evaluators are answered without being built (the answers
    pyiceberg's give: no partition field to judge)."""

    def __init__(self, *args: Any, cache: ManifestEntryCache, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.cache = cache

    def plan_manifest_entries(self, manifests: Iterable[ManifestFile]) -> Iterator[list[ManifestEntry]]:
        # pyiceberg's step 1: the manifest evaluator over partition summaries, per spec id.
        by_spec: dict[int, Callable[[ManifestFile], bool]] = {}
        partition_by_spec: dict[int, Callable[[Any], bool]] = {}
        metrics_ok = self._build_metrics_evaluator()
        pyiceberg_metrics = getattr(metrics_ok, "__self__", None)
        # A spec without partition fields: pyiceberg's manifest evaluator says "may match" for
        # every manifest (no partition summaries), and its partition evaluator is the filter
        # projected on no field — always true unless the bound filter is the constant false, which
        # projects to false (binding folds constants; predicates project to true). Both are
        # answered without projecting and binding the filter again (0.55 ms a query).
        # The metrics evaluator's bound filter (pyiceberg 0.12's ``_InclusiveMetricsEvaluator.expr``);
        # without it every spec takes pyiceberg's evaluators.
        bound = getattr(pyiceberg_metrics, "expr", None)
        no_row = isinstance(bound, AlwaysFalse)
        if pyiceberg_metrics is not None:
            metrics_ok = compiled(pyiceberg_metrics)  # the same answers, without a visitor per file

        def unpartitioned(spec_id: int) -> bool:
            spec = self.table_metadata.specs().get(spec_id)
            return bound is not None and spec is not None and not spec.fields

        def manifest_ok(m: ManifestFile) -> bool:
            if m.partition_spec_id not in by_spec:
                by_spec[m.partition_spec_id] = (_always if unpartitioned(m.partition_spec_id)
                                                else self._build_manifest_evaluator(m.partition_spec_id))
            return by_spec[m.partition_spec_id](m)

        def partition_ok(spec_id: int) -> Callable[[Any], bool]:
            if spec_id not in partition_by_spec:
                partition_by_spec[spec_id] = ((_never if no_row else _always) if unpartitioned(spec_id)
                                              else self._build_partition_evaluator(spec_id))
            return partition_by_spec[spec_id]

        kept = [m for m in manifests if manifest_ok(m)]
        min_seq = _min_data_sequence_number(kept)
        # pyiceberg's _check_sequence_number: delete manifests older than every data manifest
        # hold no delete that applies.
        kept = [m for m in kept if m.content == ManifestContent.DATA
                or (m.sequence_number or INITIAL_SEQUENCE_NUMBER) >= min_seq]

        def open_manifest(m: ManifestFile) -> list[ManifestEntry]:
            pf = partition_ok(m.partition_spec_id)
            return [e for e in self.cache.entries(self.io, m) if pf(e.data_file) and metrics_ok(e.data_file)]

        for m in kept:  # build evaluators before threads share them
            partition_ok(m.partition_spec_id)
        cold = [m for m in kept if m not in self.cache]
        decoded = dict(zip(map(manifest_key, cold), ExecutorFactory.get_or_create().map(open_manifest, cold)))
        return iter([decoded[manifest_key(m)] if manifest_key(m) in decoded else open_manifest(m) for m in kept])


def _always(_: Any) -> bool:
    return True


def _never(_: Any) -> bool:
    return False


def _min_data_sequence_number(manifests: list[ManifestFile]) -> int:
    seqs = [m.min_sequence_number or INITIAL_SEQUENCE_NUMBER for m in manifests if m.content == ManifestContent.DATA]
    return min(seqs) if seqs else INITIAL_SEQUENCE_NUMBER


def snapshot_manifests(io, snapshot) -> tuple[ManifestFile, ...]:
    """``snapshot.manifests(io)`` read once per manifest list: pyiceberg re-reads the list's Avro
    file on every call (its cache keeps the ``ManifestFile`` objects, not the list), and a
    snapshot's manifest list never changes once written. The last lists read are kept
    (``planner.caches.MANIFEST_LISTS``; a few hundred bytes per manifest)."""
    path = snapshot.manifest_list
    hit = MANIFEST_LISTS.get(path)
    if hit is not None:
        return hit
    manifests = tuple(snapshot.manifests(io))
    MANIFEST_LISTS.put(path, manifests)
    return manifests


def plan_files(table, row_filter: Any = None, *, snapshot_id: int | None = None,
               cache: ManifestEntryCache | None = DEFAULT_MANIFEST_CACHE, case_sensitive: bool = True) -> list:
    """The ``FileScanTask``s ``table.scan(row_filter=..., snapshot_id=...).plan_files()`` returns,
    with decoded manifest entries taken from ``cache`` (None: pyiceberg's own planning). Tables
    of a catalog that plans on the server (REST scan planning) are planned by pyiceberg."""
    scan = table.scan(row_filter=row_filter if row_filter is not None else AlwaysTrue(), snapshot_id=snapshot_id,
                      case_sensitive=case_sensitive)
    catalog = getattr(table, "catalog", None)
    server_side = getattr(catalog, "supports_server_side_planning", None)
    if cache is None or (callable(server_side) and server_side()):
        return list(scan.plan_files())
    snapshot = scan.snapshot()
    if snapshot is None:
        return []
    planner = CachedManifestPlanner(table_metadata=scan.table_metadata, io=scan.io, row_filter=scan.row_filter,
                                    case_sensitive=scan.case_sensitive, options=scan.options, cache=cache)
    return list(planner.plan_files(list(snapshot_manifests(scan.io, snapshot))))


__all__ = ["DEFAULT_MANIFEST_CACHE", "CacheStats", "CachedManifestPlanner", "ManifestEntryCache",
           "deep_size", "estimate_entries_bytes", "manifest_key", "plan_files", "snapshot_manifests"]
