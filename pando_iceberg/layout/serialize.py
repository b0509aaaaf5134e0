"""The serialized form of a Layout (the blob the storage layer puts in Puffin).

    offset  size  field
    0       4     magic  b"PNDL"
    4       2     format version (little-endian u16)          — see SUPPORTED_VERSIONS
    6       2     flags (must be 0 in version 1)
    8       4     payload length in bytes (u32)
    12      4     crc32 of bytes 0..11 followed by the payload
    16      n     payload = zstd( u32 json length | JSON | raw little-endian arrays )

The JSON holds the cut table (``cut.to_json()``), the non-truncated trees (node arrays; cut
index per node, -1 for a leaf), the truncated trees (which nodes were collapsed), whether the
layout was finalized, and a directory of the raw arrays: the k-tuple → block map, which
k-tuples were observed in the full data, block row counts, and per truncated tree its
leaf → blocks sets in CSR form. Literal cut key sets are stored by the storage layer and come
back through the injected ``cut_from_json(d, literal_keys)``.

Version 2 adds the workload the layout was learned from, as the arrays ``workload_may_true`` and
``workload_may_not_true`` (queries × cuts, u1) and ``workload_weights`` (f8), present when the
layout has one (JSON ``"workload": true``): routing uses it for k-tuples the sample never saw
(layout.py). Version 1 layouts are still read; they route unseen k-tuples by the
nearest-k-tuple rule.

Version 3 changes no field: it marks layouts whose cuts were evaluated with Spark's typed semantics
(integer arithmetic at the operands' widths, FLOAT as 32 bits, narrowing casts). A cut of an older
layout over a computed term (arithmetic, a cast or a function of a column) may have placed rows by
another meaning than its SQL has now: the loaded layout's ``format_version`` says so, and the
planner claims nothing about such cuts (``planner.scan``).

On load the leaf → block sets and truncated trees are re-derived from the map and must equal
the stored ones: a disagreement is reported as corruption, never silently trusted.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import zstandard

from ..exceptions import LayoutError
from .tree import PartitionTree

__all__ = ["FORMAT_VERSION", "MAGIC", "SUPPORTED_VERSIONS", "LayoutFormatError", "layout_from_bytes", "layout_to_bytes"]

MAGIC = b"PNDL"
FORMAT_VERSION = 3
SUPPORTED_VERSIONS = (1, 2, 3)
_HEADER = struct.Struct("<4sHHII")
_MAX_PAYLOAD = 1 << 31


class LayoutFormatError(LayoutError, ValueError):
    """The bytes are not a layout this code can read (and why)."""


def _supported() -> str:
    return ", ".join(str(v) for v in SUPPORTED_VERSIONS)


def layout_to_bytes(layout: Any) -> bytes:
    arrays: dict[str, np.ndarray] = {
        "ktuples": layout.ktuples.astype("<i4"),
        "ktuple_block": layout.ktuple_block.astype("<i4"),
        "ktuple_observed": layout.ktuple_observed.astype("u1"),
        "block_rows": layout.block_rows.astype("<i8"),
    }
    if layout.workload_sides is not None:
        arrays["workload_may_true"] = layout.workload_sides.may_true.astype("u1")
        arrays["workload_may_not_true"] = layout.workload_sides.may_not_true.astype("u1")
        arrays["workload_weights"] = layout.workload_weights.astype("<f8")
    truncated = []
    for t, (tree, tt, lb) in enumerate(zip(layout.trees, layout.truncated, layout.leaf_blocks)):
        collapsed = [n for n in tt.leaves() if not tree.is_leaf(n)]
        truncated.append({"collapsed": collapsed})
        leaves = sorted(lb)
        sets = [np.asarray(lb[leaf], dtype="<i4") for leaf in leaves]
        arrays[f"t{t}_leaves"] = np.asarray(leaves, dtype="<i4")
        arrays[f"t{t}_offsets"] = np.cumsum([0] + [len(s) for s in sets]).astype("<i8")
        arrays[f"t{t}_blocks"] = np.concatenate(sets).astype("<i4") if sets else np.zeros(0, "<i4")
    directory, blobs, offset = {}, [], 0
    for name, arr in arrays.items():
        raw = np.ascontiguousarray(arr).tobytes()
        directory[name] = {"offset": offset, "nbytes": len(raw), "dtype": arr.dtype.str, "shape": list(arr.shape)}
        blobs.append(raw)
        offset += len(raw)
    doc = {
        "format": "pando-layout",
        "k": layout.k,
        "finalized": bool(layout.finalized),
        "cuts": [c.to_json() for c in layout.cuts],
        "trees": [tree.to_arrays(layout.cut_index) for tree in layout.trees],
        "truncated": truncated,
        "arrays": directory,
        "workload": layout.workload_sides is not None,
    }
    js = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
    body = struct.pack("<I", len(js)) + js + b"".join(blobs)
    payload = zstandard.ZstdCompressor(level=9).compress(body)
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(payload), 0)[:12]
    crc = zlib.crc32(head + payload) & 0xFFFFFFFF
    return head + struct.pack("<I", crc) + payload


def _default_decoder() -> Callable[[dict, Any], Any]:
    try:
        from pando_iceberg.expr import cut_from_json  # lazy: expr is a sibling layer
    except ImportError as e:  # pragma: no cover - depends on the checkout
        raise LayoutFormatError(
            "cannot decode cuts: pando_iceberg.expr.cut_from_json is not importable; "
            "pass cut_from_json= to Layout.from_bytes"
        ) from e
    return cut_from_json


def layout_from_bytes(
    data: bytes, layout_cls: Any, *, cut_from_json: Callable[[dict, Any], Any] | None = None, literal_keys: Any = None
) -> Any:
    """The layout stored in ``data``, built as ``layout_cls`` (``Layout``: passed in because layout.py
    imports this module, not the other way round); LayoutFormatError says what is wrong."""
    data = bytes(data)
    if len(data) < _HEADER.size:
        raise LayoutFormatError(f"layout is truncated: {len(data)} bytes, the header alone is {_HEADER.size}")
    magic, version, flags, length, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise LayoutFormatError(f"not a pando layout: magic {magic!r}, expected {MAGIC!r}")
    if version not in SUPPORTED_VERSIONS:
        newer = " (written by a newer pando)" if version > max(SUPPORTED_VERSIONS) else ""
        raise LayoutFormatError(f"layout format version {version}{newer} is not supported; "
                                f"supported versions: {_supported()}")
    if flags != 0:
        raise LayoutFormatError(f"layout format version {version}: unknown flags 0x{flags:04x} (must be 0)")
    payload = data[_HEADER.size :]
    if len(payload) != length:
        raise LayoutFormatError(
            f"layout is truncated or has trailing bytes: header says {length} payload bytes, found {len(payload)}"
        )
    if zlib.crc32(data[:12] + payload) & 0xFFFFFFFF != crc:
        raise LayoutFormatError("layout checksum mismatch (crc32): the bytes are corrupt")
    try:
        body = zstandard.ZstdDecompressor().decompress(payload, max_output_size=_MAX_PAYLOAD)
        (jlen,) = struct.unpack_from("<I", body)
        doc = json.loads(body[4 : 4 + jlen].decode("utf-8"))
        blob = body[4 + jlen :]
    except Exception as e:  # zstd / struct / json errors all mean the same thing here
        raise LayoutFormatError(f"layout payload cannot be decoded: {e}") from e
    try:
        return _build(doc, blob, cut_from_json or _default_decoder(), literal_keys, layout_cls, version)
    except LayoutFormatError:
        raise
    except Exception as e:
        raise LayoutFormatError(f"layout content is invalid: {type(e).__name__}: {e}") from e


def _array(doc: dict, blob: bytes, name: str) -> np.ndarray:
    try:
        d = doc["arrays"][name]
    except KeyError:
        raise LayoutFormatError(f"layout is missing the array {name!r}") from None
    start, nbytes = int(d["offset"]), int(d["nbytes"])
    if start < 0 or nbytes < 0 or start + nbytes > len(blob):
        raise LayoutFormatError(f"array {name!r} lies outside the payload")
    arr = np.frombuffer(blob[start : start + nbytes], dtype=np.dtype(d["dtype"]))
    return arr.reshape(d["shape"]).copy()


def _build(doc: dict, blob: bytes, decode: Callable, literal_keys: Any, Layout: Any, version: int) -> Any:
    if doc.get("format") != "pando-layout":
        raise LayoutFormatError(f"payload format is {doc.get('format')!r}, expected 'pando-layout'")
    cuts = []
    for i, d in enumerate(doc["cuts"]):
        try:
            cuts.append(decode(d, literal_keys))
        except Exception as e:
            raise LayoutFormatError(f"cut #{i} ({d!r:.80}) cannot be decoded: {e}") from e
    trees = []
    for t, arrays in enumerate(doc["trees"]):
        try:
            trees.append(PartitionTree.from_arrays(arrays, cuts))
        except (ValueError, KeyError, TypeError) as e:
            raise LayoutFormatError(f"tree {t} is malformed: {e}") from e
    if len(trees) != int(doc["k"]):
        raise LayoutFormatError(f"layout says k={doc['k']} but holds {len(trees)} trees")
    workload: dict[str, Any] = {}
    if version >= 2 and doc.get("workload"):
        from .cost import SideMatrix

        mt = _array(doc, blob, "workload_may_true").astype(bool)
        mn = _array(doc, blob, "workload_may_not_true").astype(bool)
        workload = {"workload_sides": SideMatrix(mt, mn), "workload_weights": _array(doc, blob, "workload_weights")}
    try:
        layout = Layout(
            trees,
            _array(doc, blob, "ktuples"),
            _array(doc, blob, "ktuple_block"),
            _array(doc, blob, "block_rows"),
            ktuple_observed=_array(doc, blob, "ktuple_observed").astype(bool),
            finalized=bool(doc["finalized"]),
            cuts=cuts,
            **workload,
        )
    except ValueError as e:
        raise LayoutFormatError(f"k-tuple map or workload is inconsistent with the trees: {e}") from e
    layout.format_version = version
    # The stored planning view must equal the one the map implies.
    for t, (tt, lb) in enumerate(zip(layout.truncated, layout.leaf_blocks)):
        want_collapsed = [n for n in tt.leaves() if not trees[t].is_leaf(n)]
        if sorted(doc["truncated"][t]["collapsed"]) != sorted(want_collapsed):
            raise LayoutFormatError(f"truncated tree {t} disagrees with the one derived from the k-tuple map")
        leaves = _array(doc, blob, f"t{t}_leaves")
        offsets = _array(doc, blob, f"t{t}_offsets")
        blocks = _array(doc, blob, f"t{t}_blocks")
        if sorted(lb) != [int(x) for x in leaves] or len(offsets) != len(leaves) + 1:
            raise LayoutFormatError(f"tree {t}: stored leaves disagree with the k-tuple map")
        for i, leaf in enumerate(leaves):
            if not np.array_equal(blocks[offsets[i] : offsets[i + 1]], lb[int(leaf)]):
                raise LayoutFormatError(f"tree {t}, leaf {int(leaf)}: stored block set disagrees with the k-tuple map")
    return layout
