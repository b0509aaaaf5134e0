"""Word-major bitsets (the bottom-up merger's layout) weigh exactly as the query-major ones, and
merging under weights that round is deterministic and complete."""

from __future__ import annotations

import numpy as np
import pytest

from pando_iceberg.layout import merge_blocks
from pando_iceberg.layout.cost import WeightedPopcount, pack_query_bits


@pytest.mark.parametrize("kind", ["one", "one-with-zeros", "few", "many"])
def test_leading_equals_the_query_major_sums_bit_for_bit(kind):
    rng = np.random.default_rng(11)
    q = 275
    weights = {
        "one": np.full(q, 0.24),
        "one-with-zeros": np.where(rng.random(q) < 0.2, 0.0, 0.24),
        "few": rng.choice([0.0, 0.1, 0.24, 1.7], q),
        "many": rng.random(q) * 3,  # > 16 distinct weights: the byte-table path
    }[kind]
    bits = pack_query_bits(rng.random((3 * 40, q)) < 0.45).reshape(3, 40, -1)  # (..., W)
    weigh = WeightedPopcount(weights)
    word_major = np.moveaxis(bits, -1, 0).copy()  # (W, ...)
    assert np.array_equal(weigh.leading(word_major), weigh(bits))


def test_merges_with_float_weights_repeat_exactly():
    """Weights that round (0.24 per query): every block ends with ≥ b rows, each merge absorbs
    one block, and two runs give the same blocks."""
    rng = np.random.default_rng(5)
    k, n, q = 3, 300, 90
    returned = rng.random((k, n, q)) < 0.6
    rows = rng.integers(1, 8, n)
    weights = np.full(q, 0.24)
    got, stats = merge_blocks(returned, rows, weights, 40, split_oversized=False)
    again, _ = merge_blocks(returned, rows, weights, 40, split_oversized=False)
    assert np.array_equal(got, again)
    assert np.bincount(got, weights=rows).min() >= 40
    assert stats["merges"] == n - stats["blocks"]
