"""The guard's estimate of a file's bounds from the sample (``workload.in_block.widened_bounds``):
a file's sample rows miss the real file's rows at its ends. What the guard compares is a template's
mean reads over many draws and files, so the estimate must count about the files the real bounds
make a range read — not fewer (a template the guard says holds would read more on the files written),
and not a worst case (a 1 % sample would refuse layouts that hold)."""

import numpy as np
import pyarrow as pa

from pando_iceberg.workload.in_block import FileWidening, widened_bounds

HOURS = 365 * 24


def _files(values: np.ndarray, files: int) -> list[np.ndarray]:
    """A block's rows (sorted by the column) cut into ``files`` consecutive runs, as written."""
    return np.array_split(np.sort(values), files)


def _reads(fraction: float, files: int, seeds: int = 12, rows: int = 40_000) -> tuple[float, float]:
    """Files that random ranges (a day, a week, a month of hours) meet, estimated over real: with
    the widened bounds, and with the sample's own."""
    real_n = est_n = raw_n = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        table = rng.integers(0, HOURS, size=rows)  # hours of a year: the real block, in-block ordered
        sample = table[rng.random(rows) < fraction]
        real, est = _files(table, files), _files(sample, files)
        lows, highs = [int(r.min()) for r in est], [int(r.max()) for r in est]
        counts = np.array([len(r) for r in est], dtype=float)
        lows2, highs2 = [int(r[1]) for r in est], [int(r[-2]) for r in est]  # sorted: second extremes
        wlo, whi = widened_bounds(np.sort(sample), lows, highs, counts, fraction, lows2, highs2)
        assert all(a <= lo and b >= hi for a, b, lo, hi in zip(wlo, whi, lows, highs))  # never narrower
        for width in (24, 24 * 7, 24 * 30):
            a = rng.integers(0, HOURS - width, 300)[:, None]
            b = a + width

            def meets(lo, hi, a=a, b=b):
                return int(((np.asarray(lo)[None] <= b) & (np.asarray(hi)[None] >= a)).sum())

            real_n += meets([r.min() for r in real], [r.max() for r in real])
            est_n += meets(wlo, whi)
            raw_n += meets(lows, highs)
    return est_n / real_n, raw_n / real_n


def test_sample_bounds_alone_undercount_the_files_a_range_reads():
    _, raw = _reads(0.01, 40)
    assert raw < 0.97, raw  # the undercount the widening is for


def test_widened_bounds_count_the_real_files_without_a_worst_case():
    for fraction, files in ((0.01, 8), (0.01, 40), (0.05, 40), (0.25, 40)):
        est, raw = _reads(fraction, files)
        assert 1.0 <= est <= 1.06, (fraction, files, est, raw)  # unbiased, on the safe side
        assert est >= raw


def test_a_files_repeated_extreme_value_is_not_widened():
    """Keys shared by many rows at a file's ends (a file cut between two keys): its sample's lowest
    and second lowest values are equal, and the real file starts there too."""
    keys = np.repeat(np.arange(100), 300)  # 100 keys of 300 rows, 10 files of 10 whole keys
    rng = np.random.default_rng(0)
    sample = np.sort(keys[rng.random(len(keys)) < 0.05])
    est = [sample[(sample >= 10 * i) & (sample < 10 * i + 10)] for i in range(10)]  # about 15 rows a key
    lows, highs = [int(r.min()) for r in est], [int(r.max()) for r in est]
    lows2, highs2 = [int(r[1]) for r in est], [int(r[-2]) for r in est]
    rows = np.array([len(r) for r in est], dtype=float)
    assert widened_bounds(np.sort(sample), lows, highs, rows, 0.05, lows2, highs2) == (lows, highs)
    wlo, _ = widened_bounds(np.sort(sample), lows, highs, rows, 0.05)  # without them: the mean spacing
    assert wlo != lows


def test_the_whole_table_as_sample_widens_nothing():
    table = np.random.default_rng(3).integers(0, HOURS, size=4_000)
    est = _files(table, 8)
    lows, highs = [int(r.min()) for r in est], [int(r.max()) for r in est]
    rows = np.array([len(r) for r in est], dtype=float)
    assert widened_bounds(np.sort(table), lows, highs, rows, 1.0) == (lows, highs)


def test_files_without_bounds_and_strings():
    values = pa.array(["a", "b", None, "c", "d", "e", "f"])
    ordered = FileWidening(0.5).sorted_values("s", values)
    assert list(ordered) == ["a", "b", "c", "d", "e", "f"]
    lows, highs = widened_bounds(ordered, ["c", None], ["d", None], np.array([2.0, 0.0]), 0.5)
    assert lows[1] is None and highs[1] is None
    assert lows[0] < "c" and highs[0] > "d"
    nan = FileWidening(0.5).sorted_values("x", pa.array([1.0, float("nan"), 3.0, None]))
    assert list(nan) == [1.0, 3.0]


def test_bounds_stay_within_the_blocks_sample_range():
    """A file's real rows are its block's: its bounds move no further than the block's sample
    extremes (a tree's cut may be right there: a region's customers, a key range)."""
    rng = np.random.default_rng(1)
    sample = np.sort(rng.integers(0, HOURS, size=400))
    est = _files(sample[100:300], 4)  # one block: the middle of the column, in 4 files
    lows, highs = [int(r.min()) for r in est], [int(r.max()) for r in est]
    lows2, highs2 = [int(r[1]) for r in est], [int(r[-2]) for r in est]
    rows = np.array([len(r) for r in est], dtype=float)
    free = widened_bounds(sample, lows, highs, rows, 0.01, lows2, highs2)
    assert free[0][0] < lows[0] and free[1][-1] > highs[-1]
    floor, ceiling = [lows[0]] * 4, [highs[-1]] * 4
    wlo, whi = widened_bounds(sample, lows, highs, rows, 0.01, lows2, highs2, floor, ceiling)
    assert wlo[0] == lows[0] and whi[-1] == highs[-1]  # the block's ends stay
    assert wlo[1:] == free[0][1:] and whi[:-1] == free[1][:-1]  # inside it, as without
