"""The per-template guard's validation draws: draws that match nothing are not counted
(workload/in_block.py)."""


import numpy as np
import pyarrow as pa

from pando_iceberg.expr import TableFilter
from pando_iceberg.workload.in_block import allowed_reads, matching_draws, template_reads
from pando_iceberg.workload.templates import template_key


def _f(sql):
    return TableFilter(sql, pa.schema([("d", pa.int64()), ("q", pa.int64())]), table="t")


def test_the_guard_averages_a_template_over_the_draws_that_match_sample_rows():
    """Half of a template's draws match no row (windows where the table has none): counted, they
    pull what it reads now and with the layout toward what reading nothing costs, and make it a
    'small' template with a file's slack; the guard averages over the draws some sample row
    satisfies, and a template none of whose draws matches keeps them all."""
    sample = pa.table({"d": pa.array(np.arange(1000, 2000), pa.int64()),
                       "q": pa.array(np.arange(1000) % 7, pa.int64())})
    qs = [(_f(f"d BETWEEN {a} AND {a + 30}"), 1.0) for a in (1000, 1500, 5000, 9000)] + [(_f("q = 1"), 1.0)] * 2
    qs += [(_f("q = 99 AND d > 0"), 1.0)] * 2
    live = matching_draws(qs, sample)
    assert live.tolist() == [True, True, False, False, True, True, False, False]
    now = np.array([0.015, 0.015, 0.0, 0.0, 0.5, 0.5, 0.01, 0.03])
    laid = np.array([0.025, 0.025, 0.0, 0.0, 0.4, 0.4, 0.0, 0.0])
    key, other, none = template_key(qs[0][0]), template_key(qs[4][0]), template_key(qs[6][0])
    diluted = template_reads(now, qs)
    assert abs(diluted[key] - 0.0075) < 1e-12
    now_t, laid_t = template_reads(now, qs, live), template_reads(laid, qs, live)
    assert abs(now_t[key] - 0.015) < 1e-12 and abs(laid_t[key] - 0.025) < 1e-12
    assert abs(now_t[other] - 0.5) < 1e-12 and abs(laid_t[other] - 0.4) < 1e-12
    assert abs(now_t[none] - 0.02) < 1e-12  # no draw matches a sample row: all counted
    # 1.67× on the draws that match: broken; diluted, a small template's slack let it hold
    assert laid_t[key] > allowed_reads(now_t, 1.1, 0.01)[key]
    assert template_reads(laid, qs)[key] <= allowed_reads(diluted, 1.1, 0.01)[key]


def test_a_join_whose_keys_are_known_decides_whether_a_draw_matches():
    from pando_iceberg.expr import JoinFilter
    sample = pa.table({"d": pa.array(np.arange(100), pa.int64()), "q": pa.array(np.arange(100) + 500, pa.int64())})
    dim = TableFilter(None, pa.schema([("k", pa.int64())]), table="dim")
    f = _f("d < 50")
    hit = f.with_joins([JoinFilter("q", "dim", "k", dim, dim_keys=[520, 9999])])
    miss = f.with_joins([JoinFilter("q", "dim", "k", dim, dim_keys=[580, 9999])])
    unknown = f.with_joins([JoinFilter("q", "dim", "k", dim)])
    assert matching_draws([(hit, 1.0), (miss, 1.0), (unknown, 1.0)], sample).tolist() == [True, False, True]
