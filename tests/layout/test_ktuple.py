"""The one k-tuple codec (layout/ktuple.py, issue 18 item 4): packing order, round trips, the
fallback when codes would not fit, and that the rewrite's names are the codec's."""

from __future__ import annotations

import numpy as np
import pytest

from pando_iceberg.layout.ktuple import (KTupleIndex, distinct_ktuples, fits, ktuple_radices, pack_ktuples,
                                         radices_of, unpack_ktuples)
from pando_iceberg.layout.tree import PartitionTree


def _kts(rng: np.random.Generator, radices, n: int) -> np.ndarray:
    return np.stack([rng.integers(0, r, n) for r in radices], axis=1).astype(np.int32)


def test_packing_is_mixed_radix_tree_0_most_significant():
    # A wire format (the rewrite's _pando_kt column and written-file rows): pinned by value.
    radices = np.array([5, 7, 3], dtype=np.int64)
    kt = np.array([[0, 0, 0], [1, 2, 1], [4, 6, 2]], dtype=np.int32)
    assert pack_ktuples(kt, radices).tolist() == [0, (1 * 7 + 2) * 3 + 1, (4 * 7 + 6) * 3 + 2]
    assert unpack_ktuples(pack_ktuples(kt, radices), radices).tolist() == kt.tolist()


def test_round_trip_and_lexicographic_order():
    rng = np.random.default_rng(3)
    radices = np.array([9, 1, 31, 4], dtype=np.int64)
    kt = _kts(rng, radices, 500)
    codes = pack_ktuples(kt, radices)
    assert np.array_equal(unpack_ktuples(codes, radices), kt)
    order = np.lexsort(kt.T[::-1])
    assert np.all(np.diff(codes[order]) >= 0)


def test_radices_from_trees_layout_or_counts():
    tree = PartitionTree()
    assert radices_of([tree, tree]).tolist() == [1, 1]
    holder = type("L", (), {"trees": [tree]})()
    assert ktuple_radices(holder).tolist() == [1]
    assert radices_of([3, 0]).tolist() == [3, 1]


def test_too_many_nodes_raise_for_packing_but_distinct_and_index_fall_back():
    big = [2**21] * 3  # Π = 2**63 ≥ 2**62
    assert not fits(big) and fits([2**20] * 3)
    with pytest.raises(ValueError, match="64 bits"):
        ktuple_radices(big)
    rng = np.random.default_rng(5)
    kt = _kts(rng, [4, 3, 5], 300).astype(np.int32)  # leaf ids small, radices huge
    u_small, inv_small = distinct_ktuples(kt, [4, 3, 5])
    u_big, inv_big = distinct_ktuples(kt, big)
    assert np.array_equal(u_small, u_big) and np.array_equal(inv_small, inv_big)
    assert np.array_equal(u_small[inv_small], kt)
    known = u_small[::2]
    for radices in ([4, 3, 5], big):
        hit, pos = KTupleIndex(known, radices).lookup(kt)
        expect = {tuple(r): i for i, r in enumerate(known.tolist())}
        want = np.array([expect.get(tuple(r), -1) for r in kt.tolist()])
        assert np.array_equal(hit, want >= 0)
        assert np.array_equal(pos[hit], want[want >= 0])


def test_empty_inputs():
    u, inv = distinct_ktuples(np.zeros((0, 2), np.int32), [3, 3])
    assert u.shape == (0, 2) and len(inv) == 0
    hit, pos = KTupleIndex(np.zeros((0, 2), np.int32), [3, 3]).lookup(np.zeros((4, 2), np.int32))
    assert not hit.any() and len(pos) == 4


def test_spark_blocks_uses_the_one_codec():
    blocks = pytest.importorskip("pando_iceberg.spark.blocks")
    assert blocks.pack_ktuples is pack_ktuples
    assert blocks.unpack_ktuples is unpack_ktuples
    assert blocks.ktuple_radices is ktuple_radices
