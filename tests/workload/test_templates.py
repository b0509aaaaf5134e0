"""Templates and their synthetic draws (workload/templates.py), and the in-block order rule
(workload/in_block.py): pure Python on small Arrow tables."""

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pando_iceberg.expr import TableFilter
from pando_iceberg.expr.values import fold
from pando_iceberg.layout import build_layout
from pando_iceberg.workload import parse_workload
from pando_iceberg.workload.in_block import MAX_FILE_FACTOR, choose_in_block_order, file_rows_per_block, files_per_block
from pando_iceberg.workload.templates import expected_workload, group_templates, range_columns, template_key

SCHEMA = pa.schema([("d", pa.date32()), ("q", pa.int64()), ("p", pa.decimal128(12, 2)), ("m", pa.string()),
                    ("x", pa.float64()), ("k", pa.int64())])


def _table(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    days = rng.integers(0, 7 * 365, n)
    return pa.table({
        "d": pa.array([dt.date(1992, 1, 1) + dt.timedelta(days=int(x)) for x in days], pa.date32()),
        "q": pa.array(rng.integers(1, 51, n), pa.int64()),
        "p": pa.array([Decimal(int(v)) / 100 for v in rng.integers(0, 11, n)], pa.decimal128(12, 2)),
        "m": pa.array(rng.choice(["AIR", "MAIL", "RAIL", "SHIP", "TRUCK"], n)),
        "x": pa.array(rng.random(n) * 100.0),
        "k": pa.array(rng.integers(0, 1000, n), pa.int64()),
    })


def _f(sql):
    return TableFilter(sql, SCHEMA, table="t")


def test_template_key_replaces_literals_and_groups_draws():
    a = _f("d >= date '1994-01-01' AND d < date '1995-01-01' AND q < 24")
    b = _f("d >= date '1996-01-01' AND d < date '1997-01-01' AND q < 25")
    c = _f("m IN ('AIR', 'MAIL')")
    assert template_key(a) == template_key(b) != template_key(c)
    assert "?" in template_key(a) and "1994" not in template_key(a)
    groups = group_templates([(a, 1.0), (b, 2.0), (c, 1.0)])
    assert [len(t.draws) for t in groups] == [2, 1] and groups[0].weight == 3.0


def test_constant_literals_mostly_stay_parameters_move_and_weight_is_kept():
    sample = _table()
    train = [(_f(f"d >= date '{y}-01-01' AND d < date '{y + 1}-01-01' AND m = 'AIR'"), 1.0) for y in (1993, 1995, 1996)]
    tw = expected_workload(train, sample, draws=400, seed=3)
    (t,) = tw.templates
    assert t.parameters == {"d": "range", "m": "point, one value in training"}
    assert t.synthetic == 400 and len(tw.queries) == 403
    assert sum(w for _, w in tw.queries) == pytest.approx(3.0)
    other = 0
    for f, _ in tw.queries:
        sql = f.to_sql()
        other += "m = 'AIR'" not in sql
        lo, hi = sorted(v.value for v in (fold(n.expression) for n in f.expr.find_all(_cmp_types())))
        lo_d, hi_d = (dt.date(1970, 1, 1) + dt.timedelta(days=x) for x in (lo, hi))
        assert (lo_d.month, lo_d.day, hi_d.month, hi_d.day) == (1, 1, 1, 1)  # year lattice of the training anchors
        assert hi_d.year - lo_d.year == 1  # the range keeps its width
        assert 1992 <= lo_d.year <= 1998  # widened by one gap, clipped to the sample's range
    # Three agreeing draws: drawn anew in 1 of 4 (rule of succession), a new value is one of the
    # sample's five (AIR among them): 1/4 · 4/5 = 20 % of the draws name another mode.
    assert 0.12 < other / 400 < 0.28, other
    drawn = {f.to_sql() for f, _ in tw.queries[3:]}
    assert any("1994-01-01" in s or "1997-01-01" in s or "1992-01-01" in s for s in drawn)


def test_a_parameter_that_repeated_in_training_is_still_drawn_anew():
    """Two TPC-H Q6 draws of the same year (one chance in five): tomorrow's years differ."""
    sample = _table()
    train = [(_f(f"d >= date '1997-01-01' AND d < date '1998-01-01' AND q < {q}"), 1.0) for q in (24, 25)]
    tw = expected_workload(train, sample, draws=60, seed=0)
    years = set()
    for f, _ in tw.queries:
        lo, hi = sorted(v.value for v in (fold(n.expression) for n in f.expr.find_all(_cmp_types()))
                        if v.kind == "date")
        lo_d, hi_d = (dt.date(1970, 1, 1) + dt.timedelta(days=x) for x in (lo, hi))
        assert (lo_d.month, lo_d.day, hi_d.year - lo_d.year) == (1, 1, 1)  # whole years, width kept
        years.add(lo_d.year)
    assert 1997 in years and len(years) >= 4  # the sample spans 1992-1998


def test_a_repeated_constant_stays_repeated_when_drawn_anew():
    """TPC-H Q19: the same IN list in every branch; a new draw replaces it by one new list."""
    from sqlglot import exp
    sample = _table()
    train = [(_f(f"(q >= {a} AND m IN ('AIR', 'MAIL')) OR (q >= {a + 10} AND m IN ('AIR', 'MAIL'))"), 1.0)
             for a in (1, 4)]
    tw = expected_workload(train, sample, draws=60, seed=4)
    lists = set()
    for f, _ in tw.queries:
        first, second = ([fold(e).value for e in node.expressions] for node in f.expr.find_all(exp.In))
        assert first == second and len(set(first)) == 2
        lists.add(tuple(first))
    assert ("AIR", "MAIL") in lists and len(lists) > 1


def test_a_skewed_column_is_drawn_where_its_rows_are():
    """Taxi durations: 98 % under an hour, a tail to 1,400 minutes. Half the draws are drawn as the
    data lies (a sample row's value), the other half over the training ranges widened: almost
    every draw matches rows (uniform over [min, max], half of them fell in the empty tail)."""
    from sqlglot import exp
    rng = np.random.default_rng(0)
    dur = np.concatenate([rng.exponential(12.0, 3920).clip(0, 60), rng.uniform(60, 1400, 80)])
    schema = pa.schema([("dur", pa.float64())])
    sample = pa.table({"dur": dur}, schema=schema)
    train = [(TableFilter(f"dur BETWEEN {a} AND {a + 5}", schema, table="t"), 1.0) for a in (4.0, 22.5, 41.0, 53.0)]
    tw = expected_workload(train, sample, draws=400, seed=6)
    lows = [fold(next(f.expr.find_all(exp.Between)).args["low"]).value for f, _ in tw.queries[4:]]
    assert len(lows) == 400
    share = np.mean([(dur >= lo) & (dur <= lo + 5) for lo in lows], axis=1)  # rows each draw matches
    assert np.mean(np.asarray(lows) <= 60) > 0.9, np.mean(np.asarray(lows) <= 60)
    assert np.mean(share > 0) > 0.9
    assert max(lows) > 60  # the tail is still drawn, as often as rows lie there


def _cmp_types():
    from sqlglot import exp
    return (exp.GTE, exp.LT)


def test_points_come_from_the_sample_and_in_lists_keep_their_length():
    sample = _table()
    train = [(_f("m IN ('AIR', 'MAIL') AND q = 3"), 1.0), (_f("m IN ('RAIL', 'SHIP') AND q = 7"), 1.0)]
    tw = expected_workload(train, sample, draws=20, seed=1)
    (t,) = tw.templates
    assert t.parameters == {"m": "point", "q": "point"}
    values = set(sample.column("m").to_pylist())
    for f, _ in tw.queries:
        from sqlglot import exp
        (in_node,) = list(f.expr.find_all(exp.In))
        got = [fold(e).value for e in in_node.expressions]
        assert len(got) == 2 and set(got) <= values
        (eq,) = list(f.expr.find_all(exp.EQ))
        assert 1 <= fold(eq.expression).value <= 50


def test_decimal_and_float_ranges_and_prefixes():
    sample = _table()
    train = [(_f(f"p BETWEEN {d - Decimal('0.01')} AND {d + Decimal('0.01')} AND x < {x}"), 1.0)
             for d, x in ((Decimal("0.02"), 10.5), (Decimal("0.05"), 40.25), (Decimal("0.07"), 70.0))]
    tw = expected_workload(train, sample, draws=30, seed=5)
    assert tw.templates[0].parameters == {"p": "range", "x": "range"}
    from sqlglot import exp
    for f, _ in tw.queries:
        (between,) = list(f.expr.find_all(exp.Between))
        lo, hi = fold(between.args["low"]).value, fold(between.args["high"]).value
        assert Decimal(str(hi)) - Decimal(str(lo)) == Decimal("0.02")  # width kept, on the 0.01 lattice
    prefix = [(_f("m LIKE 'AI%'"), 1.0), (_f("m LIKE 'SH%'"), 1.0)]
    drawn = {f.to_sql() for f, _ in expected_workload(prefix, sample, draws=40, seed=2).queries}
    assert drawn <= {f"m LIKE '{v[:2]}%'" for v in ("AIR", "MAIL", "RAIL", "SHIP", "TRUCK")} and len(drawn) > 2


def test_lockstep_parameters_across_a_join_move_together():
    """TPC-H Q3: l_shipdate > D AND o_orderdate < D with the same D in every draw."""
    from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, TPCH_SCHEMAS
    sqls = [f"SELECT * FROM lineitem, orders WHERE l_orderkey = o_orderkey AND o_orderdate < date '{d}' "
            f"AND l_shipdate > date '{d}'" for d in ("1995-03-05", "1995-03-20", "1995-03-11")]
    wl = parse_workload(sqls, TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    train = [(q.filters["lineitem"], 1.0) for q in wl.queries]
    sample = pa.table({"l_shipdate": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=i) for i in range(200)])})
    orders = pa.table({"o_orderdate": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=i) for i in range(200)])})
    tw = expected_workload(train, sample, draws=25, seed=0, dimensions={"orders": orders})
    assert tw.templates[0].parameters == {"l_shipdate": "range", "o_orderdate": "range"}
    for f, _ in tw.queries:
        own = [fold(n).value for n in f.expr.walk() if fold(n) is not None and fold(n).kind == "date"]
        dim = f.joins[0].dim_filter
        other = [fold(n).value for n in dim.expr.walk() if fold(n) is not None and fold(n).kind == "date"]
        assert own and own == other  # the same date on both sides, as in every training draw
    assert len({f.to_sql() for f, _ in tw.queries}) > 5  # anchors on their 3-day lattice, widened


def test_an_agreeing_literal_inside_a_join_filter_is_drawn_anew_by_laplace_rule():
    """A dimension literal the training draws agree on may be a parameter that happened to
    repeat, as a table's own: with probability 1/(n + 1) a draw names another value of the
    dimension (its attribute-range cuts decide any value, named in training or not)."""
    from pando_iceberg.workload.tpch_queries import TPCH_PRIMARY_KEYS, TPCH_SCHEMAS
    sqls = [f"SELECT * FROM lineitem, orders WHERE l_orderkey = o_orderkey AND o_orderpriority = '1-URGENT' "
            f"AND l_shipdate > date '{d}'" for d in ("1995-03-05", "1995-07-20")]
    wl = parse_workload(sqls, TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    train = [(q.filters["lineitem"], 1.0) for q in wl.queries]
    sample = pa.table({"l_shipdate": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=i) for i in range(400)])})
    orders = pa.table({"o_orderpriority": pa.array(["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"])})
    tw = expected_workload(train, sample, draws=60, seed=0, dimensions={"orders": orders})
    assert tw.templates[0].parameters == {"l_shipdate": "range", "o_orderpriority": "point, one value in training"}
    synthetic = [f.joins[0].dim_filter.to_sql() for f, _ in tw.queries[len(train):]]
    kept = sum("'1-URGENT'" in s for s in synthetic) / len(synthetic)
    assert 0.5 < kept < 0.95, kept  # 1/3 of the draws draw it anew (some name '1-URGENT' again)
    assert {s for s in synthetic if "'1-URGENT'" not in s}
    assert len({f.to_sql() for f, _ in tw.queries}) > 2  # the table's own date still moves


def test_no_draws_is_the_paper():
    sample = _table()
    train = [(_f("q < 5"), 2.0), (_f("q < 9"), 1.0)]
    tw = expected_workload(train, sample, draws=0)
    assert [(f.to_sql(), w) for f, w in tw.queries] == [("q < 5", 2.0), ("q < 9", 1.0)]


def test_range_columns_by_weight():
    qs = [(_f("q < 5 AND d > date '1995-01-01'"), 1.0), (_f("q BETWEEN 1 AND 3"), 2.0), (_f("m = 'AIR'"), 5.0)]
    assert range_columns(qs) == [("q", 3.0), ("d", 1.0)]


# ---------------------------------------------------------------- files of about b rows


@given(st.lists(st.integers(min_value=1, max_value=10_000_000), min_size=1, max_size=30),
       st.integers(min_value=1, max_value=2_000_000))
@settings(max_examples=200, deadline=None)
def test_files_of_about_b_rows_never_above_the_cap(rows, b):
    n = files_per_block(rows, b)
    per = file_rows_per_block(rows, b)
    for r, k, p in zip(rows, n, per):
        assert k >= 1 and p * k >= r  # every row has a place
        assert p <= max(r, MAX_FILE_FACTOR * b) + 1  # a file holds at most 1.3 b rows (or the whole small block)
        if r >= b:
            assert p >= 0.6 * b  # and not much less than b


def test_in_block_order_is_the_column_the_workload_ranges_over():
    sample = _table(6000, seed=2)
    qs = [(_f(f"x >= {lo} AND x < {lo + 5}"), 1.0) for lo in range(0, 95, 7)]
    qs += [(_f(f"m = '{m}'"), 1.0) for m in ("AIR", "SHIP", "RAIL")]
    cuts = {c.key: c for f, _ in qs for c in f.candidate_cuts() if "m" in c.columns}  # trees cut m only
    layout = build_layout(sample, list(cuts.values()), qs, k=1, min_block_rows=1000)
    order = choose_in_block_order(layout, sample, qs, b_sample=250)
    assert order.column == "x"
    assert order.costs["x"] < 0.8 * order.costs["(none)"]
    # a workload without ranges gets no order
    eq = [(_f(f"m = '{m}'"), 1.0) for m in ("AIR", "SHIP")]
    assert choose_in_block_order(layout, sample, eq, b_sample=250).column is None


# ---------------------------------------------------------------- soundness and held-out draws


def _held_out_table(rng, n):
    days = rng.integers(0, 2000, n)
    q = (days // 40 + rng.integers(0, 8, n)).astype(np.int64)  # correlated with the date
    nulls = rng.random(n) < 0.05
    return pa.table({
        "d": pa.array([dt.date(1992, 1, 1) + dt.timedelta(days=int(x)) for x in days], pa.date32(), mask=nulls),
        "q": pa.array(q, mask=rng.random(n) < 0.05),
        "m": pa.array(rng.choice(["AIR", "MAIL", "RAIL", "SHIP", "TRUCK"], n)),
        "p": pa.array([Decimal(int(v)) / 100 for v in rng.integers(0, 11, n)], pa.decimal128(12, 2)),
        "x": pa.array(rng.random(n) * 100.0), "k": pa.array(rng.integers(0, 1000, n), pa.int64()),
    })


def _draw(template, rng):
    lo = dt.date(1992, 1, 1) + dt.timedelta(days=int(rng.integers(0, 1900)))
    if template == 0:
        return _f(f"d >= date '{lo}' AND d < date '{lo + dt.timedelta(days=int(rng.choice([30, 90])))}'")
    if template == 1:
        a = int(rng.integers(0, 45))
        return _f(f"q BETWEEN {a} AND {a + 3}")
    ms = rng.choice(["AIR", "MAIL", "RAIL", "SHIP", "TRUCK"], 2, replace=False)
    return _f(f"m IN ('{ms[0]}', '{ms[1]}') AND q > {int(rng.integers(0, 50))}")


def _learn(table, sample, train, draws, k, b_sample):
    from pando_iceberg.layout import ObservedKTuples

    tw = expected_workload(train, sample, draws=draws, seed=1)
    layout = build_layout(sample, tw.candidate_cuts(), tw.queries, k=k, min_block_rows=b_sample)
    blocks, obs = layout.route_observed(table)
    layout.finalize(ObservedKTuples.combine([obs]))
    return layout, blocks


@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 3), draws=st.sampled_from([0, 4, 16]))
@settings(max_examples=25, deadline=None)
def test_held_out_draws_with_template_cuts_are_sound(seed, k, draws):
    """Every block holding a row that a held-out draw matches is returned (NULLs included)."""
    rng = np.random.default_rng(seed)
    table = _held_out_table(rng, 3000)
    sample = table.take(np.sort(rng.choice(3000, 600, replace=False)))
    train = [(_draw(t, rng), 1.0) for t in (0, 1, 2) for _ in range(3)]
    layout, blocks = _learn(table, sample, train, draws, k, 60)
    for t in (0, 1, 2):
        for _ in range(4):
            f = _draw(t, rng)
            need = np.unique(blocks[np.asarray(f.evaluate(table), dtype=bool)])
            got, _ = layout.blocks_for(f)
            assert not len(np.setdiff1d(need, got)), f.to_sql()


def test_template_draws_read_less_on_held_out_draws():
    """The point of the synthetic draws: with 3 training draws per template, held-out draws of
    the same templates read fewer rows (fixed seeds, the one cost model)."""
    rng = np.random.default_rng(7)
    table = _held_out_table(rng, 20000)
    sample = table.take(np.sort(rng.choice(20000, 4000, replace=False)))
    train = [(_draw(t, rng), 1.0) for t in (0, 1, 2) for _ in range(3)]
    test = [(_draw(t, rng), 1.0) for t in (0, 1, 2) for _ in range(30)]
    read = {}
    for draws in (0, 24):
        layout, _ = _learn(table, sample, train, draws, 2, 200)
        read[draws] = float(layout.cost(test)) / (float(layout.block_rows.sum()) * len(test))
    assert read[24] < 0.85 * read[0], read
