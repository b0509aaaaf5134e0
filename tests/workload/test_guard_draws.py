"""The per-template guard's validation draws: dimension parameters drawn as the fact's rows lie
(workload/templates.py), and draws that match nothing not counted (workload/in_block.py)."""

import datetime as dt

import numpy as np
import pyarrow as pa
from sqlglot import exp

from pando_iceberg.expr import TableFilter
from pando_iceberg.expr.values import fold
from pando_iceberg.workload import parse_workload
from pando_iceberg.workload.in_block import allowed_reads, matching_draws, template_reads
from pando_iceberg.workload.templates import expected_workload, template_key

DAY0 = dt.date(1990, 1, 1)


def _q3_like(windows):
    from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, TPCH_SCHEMAS
    sqls = [f"SELECT * FROM lineitem, orders WHERE l_orderkey = o_orderkey "
            f"AND o_orderdate BETWEEN date '{a}' AND date '{b}'" for a, b in windows]
    wl = parse_workload(sqls, TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    return [(q.filters["lineitem"], 1.0) for q in wl.queries]


def test_a_dimension_range_is_drawn_where_the_facts_rows_are():
    """A date dimension spans 200 years, the facts five: a window drawn at a random row of the
    dimension's sample falls where no fact row lies (a draw that reads nothing, on any layout),
    and the guard then validates a template only near its training windows. Drawn at the rows the
    fact's sample references, every data-drawn window lies within the fact's years."""
    train = _q3_like([("2000-05-04", "2000-06-03"), ("2000-04-30", "2000-05-30")])
    rng = np.random.default_rng(0)
    keys = np.arange(73_000)
    orders = pa.table({"o_orderkey": pa.array(keys, pa.int64()),
                       "o_orderdate": pa.array([DAY0 + dt.timedelta(days=int(k)) for k in keys - 36_500], pa.date32())})
    sold = rng.integers(36_500 + 2_900, 36_500 + 2_900 + 5 * 365, 5_000)  # 1998..2002 of the dimension's keys
    sample = pa.table({"l_orderkey": pa.array(sold, pa.int64())})
    first, last = DAY0 + dt.timedelta(days=2_900), DAY0 + dt.timedelta(days=2_900 + 5 * 365)
    tw = expected_workload(train, sample, draws=200, seed=0, dimensions={"orders": orders}, validation_draws=200)
    for draws in (tw.queries[len(train):], tw.validation[len(train):]):
        outside = 0
        starts = set()
        for f, _ in draws:
            (between,) = list(f.joins[0].dim_filter.expr.find_all(exp.Between))
            lo = DAY0 + dt.timedelta(days=int(fold(between.args["low"]).value) - (DAY0 - dt.date(1970, 1, 1)).days)
            hi = lo + dt.timedelta(days=30)
            outside += hi < first or lo > last
            starts.add(lo.year)
        assert outside == 0, f"{outside} of {len(draws)} windows where the fact has no row"
        assert starts >= {1998, 1999, 2000, 2001, 2002}  # the data-drawn half spreads over the fact's years


def test_without_the_key_in_the_dimension_sample_draws_fall_back_to_it():
    train = _q3_like([("2000-05-04", "2000-06-03"), ("2000-04-30", "2000-05-30")])
    orders = pa.table({"o_orderdate": pa.array([DAY0 + dt.timedelta(days=int(k)) for k in range(0, 20_000, 7)],
                                               pa.date32())})
    sample = pa.table({"l_orderkey": pa.array(np.arange(100), pa.int64())})
    tw = expected_workload(train, sample, draws=50, seed=0, dimensions={"orders": orders})
    assert len(tw.queries) == 52 and len({f.to_sql() for f, _ in tw.queries}) > 5


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
