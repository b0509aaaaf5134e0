"""The guard's estimate of a file's bounds from the sample (``workload.in_block.widened_bounds``):
a file's sample rows miss the real file's rows at its ends, and a file cut along the in-block
order ends where the real block's rows put the cut. The estimate must not be narrower than the
real file, or a template the guard says holds reads more on the files written."""

import numpy as np
import pyarrow as pa

from pando_iceberg.workload.in_block import FileWidening, widened_bounds


def _files(values: np.ndarray, files: int) -> list[np.ndarray]:
    """A block's rows (sorted by the column) cut into ``files`` consecutive runs, as written."""
    return np.array_split(np.sort(values), files)


def _case(seed: int, fraction: float, files: int = 8, rows: int = 40_000):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 365 * 24, size=rows)  # hours of a year: the real block, in-block ordered
    sample = table[rng.random(rows) < fraction]
    real = _files(table, files)
    est = _files(sample, files)
    lows, highs = [int(r.min()) for r in est], [int(r.max()) for r in est]
    return real, est, lows, highs, np.sort(sample)


def test_sample_bounds_alone_are_narrower_than_the_real_files():
    misses = 0
    for seed in range(20):
        real, _, lows, highs, _ = _case(seed, 0.25)
        misses += sum(int(r.min()) < lo or int(r.max()) > hi for r, lo, hi in zip(real, lows, highs))
    assert misses > 40  # of 160 files: the undercount the widening is for


def test_widened_bounds_cover_the_real_files():
    covered = total = 0
    for seed in range(20):
        real, est, lows, highs, ordered = _case(seed, 0.25)
        rows = np.array([len(r) for r in est], dtype=float)
        block = np.full(len(est), float(sum(rows)))
        wlo, whi = widened_bounds(ordered, lows, highs, rows, block, 0.25, ordered=True)
        assert all(a <= lo and b >= hi for a, b, lo, hi in zip(wlo, whi, lows, highs))  # never narrower
        covered += sum(int(r.min()) >= lo and int(r.max()) <= hi for r, lo, hi in zip(real, wlo, whi))
        total += len(real)
        # and not the whole column: each file's widened range stays well within the block's
        span = ordered[-1] - ordered[0]
        assert max(b - a for a, b in zip(wlo, whi)) < 0.4 * span
    assert covered >= 0.95 * total, (covered, total)


def test_the_whole_table_as_sample_widens_nothing():
    real, est, lows, highs, ordered = _case(3, 1.0)
    rows = np.array([len(r) for r in est], dtype=float)
    assert widened_bounds(ordered, lows, highs, rows, rows * len(rows), 1.0, ordered=True) == (lows, highs)
    assert [int(r.min()) for r in real] == lows


def test_files_without_bounds_and_strings():
    values = pa.array(["a", "b", None, "c", "d", "e", "f"])
    ordered = FileWidening(0.5).sorted_values("s", values)
    assert list(ordered) == ["a", "b", "c", "d", "e", "f"]
    lows, highs = widened_bounds(ordered, ["c", None], ["d", None], np.array([2.0, 0.0]), np.array([4.0, 4.0]), 0.5)
    assert lows[1] is None and highs[1] is None
    assert lows[0] < "c" and highs[0] > "d"
    nan = FileWidening(0.5).sorted_values("x", pa.array([1.0, float("nan"), 3.0, None]))
    assert list(nan) == [1.0, 3.0]
