"""The k-tuple codec (§6.2) — defined once, here.

A k-tuple is the leaf node id a row reaches in each of the k non-truncated trees. Packed into
one int64 in mixed radix, tree 0 most significant:

    code = (…((kt[0] · r[1] + kt[1]) · r[2] + kt[2]) …) · r[k-1] + kt[k-1],   r[t] = nodes of tree t

so the numeric order of codes is the lexicographic order of the k-tuples. It fits when
Π r[t] < 2**62 (``fits``). The packed codes travel between the rewrite's Spark tasks and the
driver (the routing column ``_pando_kt``, the written-file rows' ``ktuples`` string), so this
order is a wire format; the sidecar stores k-tuples as plain k-column arrays, never codes.

Users: ``distinct_ktuples`` (bottom-up, routing), ``KTupleIndex`` (the layout's k-tuple → block
lookup), ``ktuple_radices``/``pack_ktuples``/``unpack_ktuples`` (the rewrite, via spark/blocks.py).
Every function is vectorized; when the codes would not fit, the ones that can fall back to
lexicographic ``np.unique`` over the rows (the same order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "MAX_CODE",
    "KTupleIndex",
    "Radices",
    "distinct_ktuples",
    "fits",
    "ktuple_radices",
    "pack_ktuples",
    "radices_of",
    "unpack_ktuples",
]

#: Node counts per tree, as a sequence or an int64 array.
Radices = Sequence[int] | np.ndarray

#: Codes are < Π radices, which must stay below this bound (int64 with headroom).
MAX_CODE = 2**62


def radices_of(trees_or_counts: Any) -> np.ndarray:
    """int64 radices: per tree its node count. Accepts trees (``.num_nodes``), a layout
    (``.trees``) or the node counts themselves."""
    items = getattr(trees_or_counts, "trees", trees_or_counts)
    counts = [getattr(x, "num_nodes", x) for x in items]
    return np.array([max(1, int(c)) for c in counts], dtype=np.int64)


def fits(radices: Radices) -> bool:
    """Whether every k-tuple of these radices packs into one int64 code (< ``MAX_CODE``)."""
    total = 1
    for r in radices:
        total *= max(1, int(r))
    return total < MAX_CODE


def ktuple_radices(trees_or_layout: Any) -> np.ndarray:
    """The radices of a layout (or its trees) for ``pack_ktuples``; raises when codes would not fit."""
    radices = radices_of(trees_or_layout)
    if not fits(radices):
        raise ValueError("the trees have too many nodes to pack a k-tuple into 64 bits; "
                         "lower k or raise min block rows")
    return radices


def pack_ktuples(kt: np.ndarray, radices: Radices) -> np.ndarray:
    """n × k leaf ids → n int64 codes (the caller checked ``fits``)."""
    kt = np.asarray(kt)
    code = np.zeros(len(kt), dtype=np.int64)
    for t, r in enumerate(radices):  # k columns, never rows
        code = code * int(r) + kt[:, t].astype(np.int64)
    return code


def unpack_ktuples(codes: np.ndarray, radices: Radices) -> np.ndarray:
    """n int64 codes → n × k int32 leaf ids (inverse of ``pack_ktuples``)."""
    codes = np.asarray(codes, dtype=np.int64).copy()
    out = np.zeros((len(codes), len(radices)), dtype=np.int32)
    for t in range(len(radices) - 1, -1, -1):
        r = int(radices[t])
        out[:, t] = codes % r
        codes //= r
    return out


def distinct_ktuples(kt: np.ndarray, num_nodes: Any) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an n × k matrix of leaf ids (sorted lexicographically) and the inverse
    index per row (``num_nodes``: as ``radices_of`` takes it). Packed codes when they fit (fast
    1-d unique), else a row-wise unique."""
    kt = np.asarray(kt)
    radices = radices_of(num_nodes)
    if fits(radices):
        u, inv = np.unique(pack_ktuples(kt, radices), return_inverse=True)
        return unpack_ktuples(u, radices), inv.astype(np.int64).reshape(-1)
    u, inv = np.unique(kt, axis=0, return_inverse=True)
    return u.astype(np.int32), inv.astype(np.int64).reshape(-1)


class KTupleIndex:
    """Position lookup in a fixed K × k array of distinct k-tuples (a layout's k-tuple map)."""

    def __init__(self, known: np.ndarray, num_nodes: Any):
        self.known = np.asarray(known)
        self.radices = radices_of(num_nodes)
        self.packed = fits(self.radices)
        if self.packed:
            codes = pack_ktuples(self.known, self.radices)
            self.order = np.argsort(codes, kind="stable")
            self.sorted_codes = codes[self.order]

    def lookup(self, kts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row of ``kts``: is it a known k-tuple, and its row in ``known`` (0 if not)."""
        kts = np.asarray(kts)
        if len(kts) == 0 or len(self.known) == 0:
            return np.zeros(len(kts), dtype=bool), np.zeros(len(kts), dtype=np.int64)
        if self.packed:
            q = pack_ktuples(kts, self.radices)
            at = np.minimum(np.searchsorted(self.sorted_codes, q), len(self.sorted_codes) - 1)
            hit = self.sorted_codes[at] == q
            return hit, np.where(hit, self.order[at], 0).astype(np.int64)
        both = np.concatenate([self.known.astype(np.int64), kts.astype(np.int64)])
        _, inv = np.unique(both, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        nk = len(self.known)
        pos_of = np.full(int(inv.max()) + 1, -1, dtype=np.int64)
        pos_of[inv[:nk]] = np.arange(nk, dtype=np.int64)
        pos = pos_of[inv[nk:]]
        return pos >= 0, np.maximum(pos, 0)
