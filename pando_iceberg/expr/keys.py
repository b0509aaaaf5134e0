"""Key sets of literal cuts (§7): the primary-key values of the dimension rows that satisfy
a dimension predicate. Integer keys are compressed bitmaps (roaring, portable
serialization); other keys are sorted numpy arrays."""

from __future__ import annotations

import array
import hashlib
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap, BitMap64

from pando_iceberg.expr.errors import PandoExprError

KeySet = BitMap | BitMap64 | np.ndarray

_MAGIC = b"PLK1"
_ROARING32, _ROARING64, _INT64, _STRINGS = b"R", b"Q", b"I", b"S"


def normalize_keys(keys: Any) -> KeySet:
    """Integer keys → BitMap (or BitMap64 above 32 bits; a sorted int64 array if some are
    negative); other keys → a sorted array of unique values. NULL keys are dropped: a NULL
    never joins."""
    if isinstance(keys, (BitMap, BitMap64)):
        return keys
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = keys.drop_null().to_numpy(zero_copy_only=False)
    arr = np.asarray(list(keys) if isinstance(keys, (set, frozenset)) else keys)
    if arr.dtype == object:
        arr = np.asarray([k for k in arr if k is not None])
        if arr.dtype == object and all(isinstance(k, (int, np.integer)) for k in arr):
            arr = arr.astype(np.int64)
    if arr.size == 0:
        return BitMap()
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        arr = arr.astype(np.int64) if arr.dtype != np.uint64 else arr
        lo, hi = int(arr.min()), int(arr.max())
        if lo >= 0 and hi < 2**32:
            return _bitmap32(arr.astype(np.uint32))
        if lo >= 0:
            return BitMap64(arr.astype(np.uint64))
        return np.unique(arr.astype(np.int64))
    if arr.dtype.kind in "US" or arr.dtype == object:
        return np.asarray(sorted(set(str(k) for k in arr.tolist())), dtype=object)
    raise PandoExprError(f"literal cut keys of dtype {arr.dtype} are not supported (integers or strings)")


def _bitmap32(values: np.ndarray) -> BitMap:
    """A BitMap of uint32 ``values``, built from their buffer in order: pyroaring iterates a
    numpy array value by value (3 ms for 30,000 keys) but adds an ``array('I')`` in one call,
    fastest when sorted (dimension keys usually are already)."""
    if len(values) > 1 and not bool((values[1:] >= values[:-1]).all()):
        values = np.sort(values)
    buffer = array.array("I")
    buffer.frombytes(np.ascontiguousarray(values, dtype=np.uint32).tobytes())
    return BitMap(buffer)


def keys_array(keys: KeySet) -> np.ndarray:
    if isinstance(keys, BitMap):
        return np.asarray(keys.to_array(), dtype=np.int64)
    if isinstance(keys, BitMap64):
        return np.asarray(keys.to_array(), dtype=np.uint64)
    return keys


def keys_len(keys: KeySet) -> int:
    return len(keys)


def is_integer_keys(keys: KeySet) -> bool:
    return isinstance(keys, (BitMap, BitMap64)) or np.issubdtype(keys.dtype, np.integer)


def keys_intersect(a: KeySet, b: KeySet) -> bool:
    # Two bitmaps of one type (one branch per type: a BitMap does not take a BitMap64).
    if isinstance(a, BitMap) and type(b) is type(a):
        return a.intersect(b)
    if isinstance(a, BitMap64) and type(b) is type(a):
        return a.intersect(b)
    if is_integer_keys(a) != is_integer_keys(b):
        return False
    if is_integer_keys(a):
        return bool(np.isin(*_comparable_arrays(a, b)).any())
    return bool(set(keys_array(a).tolist()) & set(keys_array(b).tolist()))


def _comparable_arrays(a: KeySet, b: KeySet) -> tuple[np.ndarray, np.ndarray]:
    """Two integer key sets as arrays ``np.isin`` compares exactly (object arrays when their
    dtypes differ, e.g. int64 against uint64)."""
    x, y = keys_array(a), keys_array(b)
    if x.dtype != y.dtype:
        x, y = x.astype(object), y.astype(object)
    return x, y


def keys_subset(a: KeySet, b: KeySet) -> bool:
    """Is every key of a in b?"""
    if isinstance(a, BitMap) and type(b) is type(a):
        return a.issubset(b)
    if isinstance(a, BitMap64) and type(b) is type(a):
        return a.issubset(b)
    if len(a) == 0:
        return True
    if is_integer_keys(a) != is_integer_keys(b):
        return False
    if is_integer_keys(a):
        return bool(np.isin(*_comparable_arrays(a, b)).all())
    return set(keys_array(a).tolist()) <= set(keys_array(b).tolist())


def keys_to_bytes(keys: KeySet) -> bytes:
    if isinstance(keys, BitMap):
        return _MAGIC + _ROARING32 + keys.serialize()
    if isinstance(keys, BitMap64):
        return _MAGIC + _ROARING64 + keys.serialize()
    if np.issubdtype(keys.dtype, np.integer):
        return _MAGIC + _INT64 + keys.astype("<i8").tobytes()
    return _MAGIC + _STRINGS + json.dumps(keys.tolist(), ensure_ascii=False).encode()


def keys_from_bytes(data: bytes) -> KeySet:
    if data[:4] != _MAGIC:
        raise PandoExprError("not a serialized literal-cut key set (bad magic)")
    tag, body = data[4:5], data[5:]
    if tag == _ROARING32:
        return BitMap.deserialize(body)
    if tag == _ROARING64:
        return BitMap64.deserialize(body)
    if tag == _INT64:
        return np.frombuffer(body, dtype="<i8").astype(np.int64)
    if tag == _STRINGS:
        return np.asarray(json.loads(body.decode()), dtype=object)
    raise PandoExprError(f"unknown key set encoding {tag!r}")


def keys_digest(keys: KeySet) -> str:
    return hashlib.sha256(keys_to_bytes(keys)).hexdigest()[:16]


def member_mask(values: pa.Array | pa.ChunkedArray, keys: KeySet, array: np.ndarray | None = None,
                lookup: IntKeyLookup | None = None) -> np.ndarray:
    """Vectorized `value IN keys`; NULL values give False. ``array``: ``keys_array(keys)``
    when the caller keeps it (a BitMap's conversion costs more than the lookup per batch);
    ``lookup``: an ``IntKeyLookup`` of the integer keys the caller keeps across batches."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    if len(keys) == 0:
        return np.zeros(len(values), dtype=bool)
    if pa.types.is_integer(values.type):
        if not is_integer_keys(keys):
            return np.zeros(len(values), dtype=bool)
        vals = pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
        if not pa.types.is_uint64(values.type):
            vals = vals.astype(np.int64)
        if lookup is None:
            lookup = IntKeyLookup(keys_array(keys) if array is None else array, len(vals))
        return lookup(vals, valid)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type):
        if is_integer_keys(keys):
            return np.zeros(len(values), dtype=bool)
        hit = pc.is_in(values.cast(pa.large_string()), value_set=pa.array(keys_array(keys).tolist(), pa.large_string()))
        return hit.fill_null(False).to_numpy(zero_copy_only=False) & valid
    raise PandoExprError(f"literal cuts on a {values.type} column are not supported (integers or strings)")


class IntKeyLookup:
    """``value IN keys`` for the sorted integer keys ``ks`` (int64, or uint64 for a BitMap64):
    a packed bit per value of [min, max] when that costs no more than the keys themselves (8
    bytes a key; 64 values a key) or 128 KiB, else a binary search. Build it once per key set
    and ask it batch after batch: routing TPC-H SF 1 lineitem through 40 key sets of order keys
    spent two thirds of its time in the binary search, a bit test is a gather.

    ``rows``: the rows it will be asked about, when it is asked once (0: many batches); a
    one-off question about few rows against a sparse bit table searches instead."""

    BITS_PER_KEY = 64
    MIN_BITS = 1 << 20

    def __init__(self, ks: np.ndarray, rows: int = 0):
        self.ks = ks
        self.bits: np.ndarray | None = None
        if len(ks) == 0:
            return
        self.lo, self.hi = ks[0], ks[-1]
        span = int(self.hi) - int(self.lo) + 1
        dense = span <= max(self.BITS_PER_KEY * len(ks), self.MIN_BITS)
        if dense and (rows == 0 or span <= 64 * rows + (1 << 16)):
            table = np.zeros(span, dtype=bool)
            table[(ks - self.lo).astype(np.int64)] = True
            self.bits = np.packbits(table, bitorder="little")

    def __call__(self, vals: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """``vals`` (int64, or uint64 for a uint64 column; NULLs anything, ``valid`` False) IN the keys."""
        ks = self.ks
        if len(ks) == 0:
            return np.zeros(len(vals), dtype=bool)
        if ks.dtype != vals.dtype:  # int64 against uint64 keys or the other way: compare where both hold
            if vals.dtype == np.uint64:  # int64 keys (some negative): a uint64 value above int64 is no key
                valid = valid & (vals <= np.uint64(np.iinfo(np.int64).max))
                vals = vals.astype(np.int64)
            else:  # uint64 keys: a negative value is no key
                valid = valid & (vals >= 0)
                vals = np.where(vals < 0, 0, vals).astype(np.uint64)
        inside = valid & (vals >= self.lo) & (vals <= self.hi)
        if self.bits is not None:
            off = np.where(inside, vals - self.lo, 0).astype(np.int64)
            hit = (self.bits[off >> 3] >> (off & 7).astype(np.uint8)) & 1
            return hit.astype(bool) & inside
        idx = np.searchsorted(ks, vals)
        idx[idx >= len(ks)] = 0
        return (ks[idx] == vals) & inside


MAX_KEY_RUNS = 64  # more runs of consecutive keys than this: their hull (key_runs)


def key_runs(keys: KeySet) -> list[tuple[int, int]] | None:
    """An integer key set as closed runs ``[(lo, hi), ...]`` of consecutive values, ascending;
    its hull ``[(min, max)]`` when it has more than ``MAX_KEY_RUNS`` runs; ``[]`` when empty;
    None for string keys. What a join filter's key set says of the foreign key's values (the
    implied predicate ``fk BETWEEN lo AND hi OR ...``): surrogate keys assigned in load order
    make a dimension group a few runs (a brand's products, a month's days)."""
    if len(keys) == 0:
        return []
    if not is_integer_keys(keys):
        return None
    arr = keys_array(keys)
    breaks = np.flatnonzero(np.diff(arr) != 1)
    if len(breaks) + 1 > MAX_KEY_RUNS:
        return [(int(arr[0]), int(arr[-1]))]
    starts = arr[np.concatenate(([0], breaks + 1))]
    ends = arr[np.concatenate((breaks, [len(arr) - 1]))]
    return [(int(a), int(b)) for a, b in zip(starts.tolist(), ends.tolist())]
