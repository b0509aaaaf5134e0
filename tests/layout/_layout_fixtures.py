"""Small concrete cuts and filters for testing the layout engine (the algorithm's own fixture).

Cuts: ``x < v`` and ``x == v`` on integer/float columns of an Arrow table; NULL → NOT-TRUE.
Filters: conjunctions of closed intervals per column, optionally admitting NULL
(``IS NULL`` is the empty interval with ``null_ok``); ``sides`` reasons on intervals and is sound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class LessThan:
    col: str
    v: float

    @property
    def key(self) -> str:
        return f"{self.col} < {self.v!r}"

    def evaluate(self, table: pa.Table) -> np.ndarray:
        return pc.fill_null(pc.less(table.column(self.col), self.v), False).to_numpy(zero_copy_only=False)

    def to_json(self) -> dict:
        return {"op": "lt", "col": self.col, "v": self.v}


@dataclass(frozen=True)
class Equals:
    col: str
    v: float

    @property
    def key(self) -> str:
        return f"{self.col} = {self.v!r}"

    def evaluate(self, table: pa.Table) -> np.ndarray:
        return pc.fill_null(pc.equal(table.column(self.col), self.v), False).to_numpy(zero_copy_only=False)

    def to_json(self) -> dict:
        return {"op": "eq", "col": self.col, "v": self.v}


def cut_from_json(d: dict, literal_keys=None):
    return {"lt": LessThan, "eq": Equals}[d["op"]](d["col"], d["v"])


@dataclass(frozen=True)
class Box:
    """AND over columns of (lo <= x <= hi) [OR x IS NULL when null_ok]."""

    cons: tuple = field(default_factory=tuple)  # ((col, lo, hi, null_ok), ...)

    @staticmethod
    def of(**cols) -> "Box":
        return Box(tuple((c, *spec) if len(spec) == 3 else (c, spec[0], spec[1], False) for c, spec in cols.items()))

    def _spec(self, col):
        for c, lo, hi, null_ok in self.cons:
            if c == col:
                return lo, hi, null_ok
        return None

    def sides(self, cut) -> tuple[bool, bool]:
        spec = self._spec(cut.col)
        if spec is None:
            return True, True
        lo, hi, null_ok = spec
        lo = -math.inf if lo is None else lo
        hi = math.inf if hi is None else hi
        nonempty = lo <= hi
        if isinstance(cut, LessThan):
            return nonempty and lo < cut.v, null_ok or (nonempty and hi >= cut.v)
        if isinstance(cut, Equals):
            return nonempty and lo <= cut.v <= hi, null_ok or (nonempty and not (lo == hi == cut.v))
        return True, True

    def matches(self, table: pa.Table) -> np.ndarray:
        out = np.ones(table.num_rows, dtype=bool)
        for c, lo, hi, null_ok in self.cons:
            col = table.column(c)
            m = pa.array(np.ones(table.num_rows, dtype=bool))
            if lo is not None:
                m = pc.and_(m, pc.greater_equal(col, lo))
            if hi is not None:
                m = pc.and_(m, pc.less_equal(col, hi))
            m = pc.fill_null(m, False).to_numpy(zero_copy_only=False)
            if null_ok:
                m = m | pc.is_null(col).to_numpy(zero_copy_only=False)
            out &= m
        return out


def fig2_table(seed: int = 0) -> pa.Table:
    """Fig. 2a: 500 tuples, Y ≈ X + noise (400 tuples, 100 per quarter of the diagonal) and 100
    outliers whose X and Y lie in different quarters (8-9 per off-diagonal cell)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for q in range(4):
        x = rng.uniform(25 * q, 25 * q + 25, 100)
        xs.append(x)
        ys.append(np.clip(x + rng.normal(0, 3, 100), 25 * q, 25 * q + 24.99))
    cells = [(a, b) for a in range(4) for b in range(4) if a != b]
    for i, (a, b) in enumerate(cells):
        c = 9 if i < 4 else 8
        xs.append(25 * a + rng.uniform(0, 25, c))
        ys.append(25 * b + rng.uniform(0, 25, c))
    return pa.table({"x": np.concatenate(xs), "y": np.concatenate(ys)})


def fig2_workload() -> list[Box]:
    """Half the queries a narrow range on X, half on Y, uniformly over the data space."""
    return [Box.of(**{c: (5 * j, 5 * j + 4.9)}) for j in range(20) for c in ("x", "y")]


def candidate_cuts(filters: list[Box]) -> list:
    """Cuts from the predicates: ``col < lo`` and ``col < hi`` of every interval."""
    seen, out = set(), []
    for f in filters:
        for c, lo, hi, _ in f.cons:
            for v in (lo, hi):
                if v is None:
                    continue
                cut = LessThan(c, v)
                if cut.key not in seen:
                    seen.add(cut.key)
                    out.append(cut)
    return out
