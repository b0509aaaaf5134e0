"""The planner's caches (planner/caches.py): one bound mechanism, one way to clear them all."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pando_iceberg.expr import sides
from pando_iceberg.planner import caches, manifests, metrics
from pando_iceberg.planner.caches import BoundedCache


def test_bounded_cache_evicts_least_recently_used():
    c = BoundedCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # a is now the most recent
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3 and len(c) == 2


def test_bounded_cache_keeps_its_byte_bound():
    """Evicts least recently used values until the bytes fit; a value above the bound is not
    kept; replacing a key counts its bytes once."""
    c = BoundedCache(100, max_bytes=10, size=len)
    c.put("a", "xxxx")
    c.put("b", "yyyy")
    assert c.get("a") == "xxxx"
    c.put("c", "zzzz")  # 12 bytes: b, the least recently used, goes
    assert c.get("b") is None and c.bytes == 8 and len(c) == 2
    c.put("a", "xxxxxx")
    assert c.bytes == 10 and c.get("a") == "xxxxxx" and c.get("c") == "zzzz"
    c.put("big", "w" * 11)
    assert c.get("big") is None and c.bytes == 10
    c.clear()
    assert c.bytes == 0 and len(c) == 0
    with pytest.raises(ValueError, match="size="):
        BoundedCache(2, max_bytes=1)


def test_clear_empties_every_cache_of_the_planner(tmp_path):
    """``caches.clear()`` forgets every process-wide cache the planner reads: the bounded ones,
    the decoded manifests, the decoded bounds and the shared atom tables."""
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("d")
    table = cat.create_table("d.t", schema=pa.schema([("a", pa.int64())]))
    table.append(pa.table({"a": pa.array([1, 2], pa.int64())}))
    manifests.plan_files(table)  # through the process-wide manifest cache
    assert len(manifests.DEFAULT_MANIFEST_CACHE) >= 1 and manifests.DEFAULT_MANIFEST_CACHE.bytes > 0
    for i, cache in enumerate(caches.BOUNDED):
        cache.put(("test", i), pa.table({"a": [i]}))  # a value DIMENSION_COLUMNS can size
        assert len(cache) >= 1
    metrics.DECODED[("long", b"test")] = 1
    atoms = sides.AtomTable.shared(pa.schema([("a", pa.int64())]))
    caches.clear()
    assert all(len(c) == 0 and c.bytes == 0 for c in caches.BOUNDED)
    assert not metrics.DECODED and len(manifests.DEFAULT_MANIFEST_CACHE) == 0
    assert manifests.DEFAULT_MANIFEST_CACHE.bytes == 0
    assert sides.AtomTable.shared(pa.schema([("a", pa.int64())])) is not atoms


def test_the_caches_are_the_ones_the_planner_uses():
    """The modules that read a cache use the instance of planner.caches (no second cache of the same thing)."""
    from pando_iceberg import catalog
    from pando_iceberg.planner import keysets, row_filters, uniqueness
    from pando_iceberg.workload import qualify

    assert catalog.TABLE_METADATA is caches.TABLE_METADATA and qualify.SHAPES is caches.SHAPES
    assert keysets.KEY_SETS is caches.KEY_SETS and keysets.DIMENSION_COLUMNS is caches.DIMENSION_COLUMNS
    assert uniqueness.UNIQUENESS is caches.UNIQUENESS and row_filters.TOO_MANY_KEYS is caches.TOO_MANY_KEYS
    with pytest.raises(ValueError, match="size="):
        BoundedCache(1, max_bytes=1)


def test_no_cache_is_made_outside_the_home():
    """Every process-wide BoundedCache of the package is made in planner/caches.py (one home: one
    place to see what the process keeps); planner/manifests.py wraps one per ManifestEntryCache."""
    import ast
    from pathlib import Path

    import pando_iceberg

    root = Path(pando_iceberg.__file__).parent
    made = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                  == "BoundedCache")
    assert made.count("planner/caches.py") == len(caches.BOUNDED) and made.count("planner/manifests.py") == 1, made
    assert set(made) == {"planner/caches.py", "planner/manifests.py"}, made
