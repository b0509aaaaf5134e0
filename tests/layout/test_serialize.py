"""Layout.to_bytes / from_bytes: identical routing and planning after a round trip; corrupt,
truncated and future-version bytes raise LayoutFormatError naming the problem."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest

from _layout_fixtures import Box, Equals, LessThan, cut_from_json
from pando_iceberg.layout import SUPPORTED_VERSIONS, Layout, LayoutFormatError, build_layout


def _built() -> tuple[Layout, pa.Table, list]:
    rng = np.random.default_rng(7)
    n = 3000
    table = pa.table({"a": pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.05),
                      "b": rng.integers(0, 50, n)})
    sample = table.take(rng.choice(n, 600, replace=False))
    qs = [Box.of(**{c: (lo, lo + 6)}) for lo in range(0, 50, 7) for c in "ab"] + [Box((("a", 1, 0, True),))]
    cuts = [LessThan(c, v) for c in "ab" for v in range(5, 50, 5)] + [Equals("a", 3)]
    layout = build_layout(sample, cuts, qs, k=3, min_block_rows=40, min_leaf_rows=10)
    layout.finalize(layout.observed_ktuples(table))
    return layout, table, qs


@pytest.fixture(scope="module")
def built():
    return _built()


def test_round_trip_routes_and_plans_identically(built):
    layout, table, qs = built
    data = layout.to_bytes()
    back = Layout.from_bytes(data, cut_from_json=cut_from_json)
    assert back.finalized and back.k == layout.k
    assert np.array_equal(back.route(table), layout.route(table))
    assert np.array_equal(back.block_rows, layout.block_rows)
    assert np.array_equal(back.ktuples, layout.ktuples)
    for f in qs + [Box.of(a=(3, 3)), Box.of(a=(10, 30), b=(0, 4))]:
        for truncated in (True, False):
            assert np.array_equal(back.blocks_for(f, truncated=truncated)[0], layout.blocks_for(f, truncated=truncated)[0])
    assert back.to_bytes() == data  # deterministic


def test_literal_keys_reach_the_decoder(built):
    layout, _, _ = built
    seen = []

    def decode(d, literal_keys):
        seen.append(literal_keys)
        return cut_from_json(d)

    Layout.from_bytes(layout.to_bytes(), cut_from_json=decode, literal_keys={"k": b"x"})
    assert seen and all(s == {"k": b"x"} for s in seen)


def _reheader(data: bytes, version: int) -> bytes:
    head = data[:4] + struct.pack("<H", version) + data[6:12]
    payload = data[16:]
    return head + struct.pack("<I", zlib.crc32(head + payload) & 0xFFFFFFFF) + payload


def test_future_version_is_refused_by_name(built):
    data = _reheader(built[0].to_bytes(), max(SUPPORTED_VERSIONS) + 1)
    future = max(SUPPORTED_VERSIONS) + 1
    supported = ", ".join(map(str, SUPPORTED_VERSIONS))
    with pytest.raises(LayoutFormatError, match=rf"version {future} .*newer.*supported versions: {supported}"):
        Layout.from_bytes(data, cut_from_json=cut_from_json)


def test_workload_round_trip_routes_unseen_ktuples_alike(built):
    """Version 2 keeps the workload: rows with k-tuples the layout never saw route the same."""
    full, table, qs = built
    weighted = [(q, float(1 + i % 3)) for i, q in enumerate(qs)]
    layout = build_layout(table.slice(0, 150), full.cuts, weighted, k=3, min_block_rows=20, min_leaf_rows=5)
    back = Layout.from_bytes(layout.to_bytes(), cut_from_json=cut_from_json)
    assert np.array_equal(back.workload_sides.may_true, layout.workload_sides.may_true)
    assert np.array_equal(back.workload_sides.may_not_true, layout.workload_sides.may_not_true)
    assert np.array_equal(back.workload_weights, layout.workload_weights)
    kts = {tuple(r) for r in layout.route_ktuples(table).tolist()} - {tuple(r) for r in layout.ktuples.tolist()}
    assert kts, "the table should hold k-tuples its 150-row sample has not"
    assert np.array_equal(back.route(table), layout.route(table))


def test_version_1_is_read_and_routes_by_the_nearest_rule(built):
    """A version-1 blob has no workload: it loads, plans alike, and routes unseen k-tuples by
    the nearest-k-tuple rule."""
    layout, table, qs = built
    old = Layout(layout.trees, layout.ktuples, layout.ktuple_block, layout.block_rows,
                 ktuple_observed=layout.ktuple_observed, finalized=True, cuts=layout.cuts)
    data = _reheader(old.to_bytes(), 1)
    back = Layout.from_bytes(data, cut_from_json=cut_from_json)
    assert back.workload_sides is None
    rng = np.random.default_rng(12)
    fresh = pa.table({"a": rng.integers(-5, 60, 2000), "b": rng.integers(-5, 60, 2000)})
    assert np.array_equal(back.route(fresh), old.route(fresh))
    for f in qs:
        assert np.array_equal(back.blocks_for(f)[0], layout.blocks_for(f)[0])


@pytest.mark.parametrize("cut_at", [0, 3, 15, 16, 100, -1])
def test_truncated_bytes(built, cut_at):
    data = built[0].to_bytes()
    with pytest.raises(LayoutFormatError, match="truncated"):
        Layout.from_bytes(data[:cut_at] if cut_at >= 0 else data[:-1], cut_from_json=cut_from_json)


def test_every_single_bit_flip_is_caught(built):
    data = bytearray(built[0].to_bytes())
    rng = np.random.default_rng(0)
    positions = list(range(16)) + list(rng.choice(np.arange(16, len(data)), 200, replace=False))
    for pos in positions:
        for bit in ((0, 7) if pos >= 16 else range(8)):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            with pytest.raises(LayoutFormatError):
                Layout.from_bytes(bytes(bad), cut_from_json=cut_from_json)


def test_bad_magic_and_inconsistent_content(built):
    layout, _, _ = built
    data = layout.to_bytes()
    with pytest.raises(LayoutFormatError, match="magic"):
        Layout.from_bytes(b"XXXX" + data[4:], cut_from_json=cut_from_json)
    # A well-formed envelope around a map that points outside the blocks: content error.
    import json

    import zstandard

    body = zstandard.ZstdDecompressor().decompress(data[16:])
    (jlen,) = struct.unpack_from("<I", body)
    doc = json.loads(body[4 : 4 + jlen])
    doc["trees"][0]["parent"][-1] = 10**6
    js = json.dumps(doc).encode()
    payload = zstandard.ZstdCompressor().compress(struct.pack("<I", len(js)) + js + body[4 + jlen :])
    head = data[:8] + struct.pack("<I", len(payload))
    forged = head + struct.pack("<I", zlib.crc32(head + payload) & 0xFFFFFFFF) + payload
    with pytest.raises(LayoutFormatError, match="tree 0 is malformed"):
        Layout.from_bytes(forged, cut_from_json=cut_from_json)
    with pytest.raises(LayoutFormatError, match="cut #0"):
        Layout.from_bytes(data, cut_from_json=lambda d, lk: (_ for _ in ()).throw(KeyError("nope")))
