"""Join-induced literal cuts: evaluation, serialization, and sides() soundness against actual
join results (two-table FK→PK and a three-hop chain fact→orders→customer→nation)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from pando_iceberg.expr import CutOrigin, ExprCut, JoinFilter, LiteralCut, PandoExprError, TableFilter, cut_from_json
from pando_iceberg.workload import arrow_key_provider

FACT = pa.schema([("f_id", pa.int64()), ("f_orderkey", pa.int64()), ("f_x", pa.int64())])
ORDERS = pa.schema([("o_orderkey", pa.int64()), ("o_custkey", pa.int64()), ("o_prio", pa.int64())])
CUSTOMER = pa.schema([("c_custkey", pa.int64()), ("c_nationkey", pa.int64()), ("c_seg", pa.string())])
NATION = pa.schema([("n_nationkey", pa.int64()), ("n_name", pa.string())])
SCHEMAS = {"fact": FACT, "orders": ORDERS, "customer": CUSTOMER, "nation": NATION}
NAMES = ["FRANCE", "GERMANY", "PERU", "CHINA"]
SEGS = ["A", "B", "C"]


@st.composite
def star(draw):
    n_nation, n_cust, n_ord = 4, draw(st.integers(1, 6)), draw(st.integers(1, 8))
    nation = pa.table({"n_nationkey": list(range(n_nation)), "n_name": NAMES}, schema=NATION)
    customer = pa.table({"c_custkey": list(range(100, 100 + n_cust)),
                         "c_nationkey": draw(st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=n_cust,
                                                      max_size=n_cust)),
                         "c_seg": draw(st.lists(st.sampled_from(SEGS), min_size=n_cust, max_size=n_cust))},
                        schema=CUSTOMER)
    orders = pa.table({"o_orderkey": list(range(1000, 1000 + n_ord)),
                       "o_custkey": draw(st.lists(st.one_of(st.none(), st.integers(100, 100 + n_cust)),
                                                  min_size=n_ord, max_size=n_ord)),
                       "o_prio": draw(st.lists(st.integers(0, 4), min_size=n_ord, max_size=n_ord))}, schema=ORDERS)
    n_fact = draw(st.integers(1, 15))
    fact = pa.table({"f_id": list(range(n_fact)),
                     "f_orderkey": draw(st.lists(st.one_of(st.none(), st.integers(999, 1000 + n_ord)),
                                                 min_size=n_fact, max_size=n_fact)),
                     "f_x": draw(st.lists(st.integers(0, 9), min_size=n_fact, max_size=n_fact))}, schema=FACT)
    return {"fact": fact, "orders": orders, "customer": customer, "nation": nation}


def nation_filter(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2))
    return TableFilter.from_sql(f"n_name IN ({', '.join(repr(n) for n in names)})", NATION, "nation")


@st.composite
def chain_filter(draw):
    """A random fact filter that joins orders (→ customer → nation), as SQL would."""
    nat = nation_filter(draw)
    seg = draw(st.sampled_from(SEGS))
    cust = TableFilter.from_sql(f"c_seg <> '{seg}'" if draw(st.booleans()) else "true", CUSTOMER, "customer")
    if draw(st.booleans()):
        cust = TableFilter(cust.expr, CUSTOMER, [JoinFilter("c_nationkey", "nation", "n_nationkey", nat)], "customer")
    prio = draw(st.integers(0, 4))
    ords = TableFilter(f"o_prio {draw(st.sampled_from(['<', '>=', '=']))} {prio}", ORDERS,
                       [JoinFilter("o_custkey", "customer", "c_custkey", cust)] if draw(st.booleans()) else [],
                       "orders")
    return TableFilter(f"f_x < {draw(st.integers(0, 10))}", FACT,
                       [JoinFilter("f_orderkey", "orders", "o_orderkey", ords)], "fact")


def satisfying_rows(provider, tables, f: TableFilter) -> np.ndarray:
    """Rows of fact that satisfy the whole filter (joins included), by actual evaluation."""
    return provider.rows("fact", f)


@settings(max_examples=100)
@given(star(), chain_filter(), chain_filter(), st.booleans())
def test_literal_cut_sides_sound_against_join_results(tables, query, cut_source, with_keys):
    provider = arrow_key_provider(tables)
    # The cut: the dimension part of another random filter, materialized as a key set.
    j = cut_source.joins[0]
    keys = provider("orders", "o_orderkey", j.dim_filter)
    cut = LiteralCut("f_orderkey", keys, CutOrigin("orders", "o_orderkey", j.dim_filter.to_sql()))
    if with_keys:  # the query's own key set, as the planner would compute it at query time
        qj = query.joins[0]
        query = TableFilter(query.expr, FACT, [JoinFilter(qj.column, qj.dim_table, qj.dim_pk, qj.dim_filter,
                                                          provider("orders", "o_orderkey", qj.dim_filter))], "fact")
    sat = satisfying_rows(provider, tables, query)
    on_true = cut.evaluate(tables["fact"])
    s = query.sides(cut)
    if (sat & on_true).any():
        assert s.may_true
    if (sat & ~on_true).any():
        assert s.may_not_true


def test_two_table_fk_pk_precision_by_keys_and_by_predicates():
    orders = pa.table({"o_orderkey": [1, 2, 3, 4], "o_custkey": [10, 10, 11, 12], "o_prio": [0, 1, 2, 3]},
                      schema=ORDERS)
    provider = arrow_key_provider({"orders": orders})
    cut_filter = TableFilter.from_sql("o_prio < 2", ORDERS, "orders")
    cut = LiteralCut("f_orderkey", provider("orders", "o_orderkey", cut_filter),
                     CutOrigin("orders", "o_orderkey", cut_filter.to_sql()))
    assert sorted(np.asarray(cut.keys.to_array()).tolist()) == [1, 2]
    fact = pa.table({"f_id": [0, 1, 2, 3], "f_orderkey": [1, 3, None, 2], "f_x": [0, 0, 0, 0]}, schema=FACT)
    assert cut.evaluate(fact).tolist() == [True, False, False, True]

    def query(pred, keys=False):
        dim = TableFilter.from_sql(pred, ORDERS, "orders")
        dk = provider("orders", "o_orderkey", dim) if keys else None
        return TableFilter(None, FACT, [JoinFilter("f_orderkey", "orders", "o_orderkey", dim, dk)], "fact")

    for keys in (False, True):
        assert tuple(query("o_prio = 0", keys).sides(cut)) == (True, False)
        assert tuple(query("o_prio >= 2", keys).sides(cut)) == (False, True)
        assert tuple(query("o_prio >= 1", keys).sides(cut)) == (True, True)
    # No join to the cut's dimension: unknown.
    assert tuple(TableFilter.from_sql("f_x < 3", FACT).sides(cut)) == (True, True)
    # A NULL foreign key never joins, so `f_orderkey IS NULL` rows are only on the NOT-TRUE side.
    assert tuple(TableFilter.from_sql("f_orderkey is null", FACT).sides(cut)) == (False, True)


def test_three_hop_chain_predicate_reasoning():
    nat = lambda p: TableFilter.from_sql(p, NATION, "nation")
    cust = lambda p: TableFilter(None, CUSTOMER, [JoinFilter("c_nationkey", "nation", "n_nationkey", nat(p))],
                                 "customer")
    ords = lambda p: TableFilter(None, ORDERS, [JoinFilter("o_custkey", "customer", "c_custkey", cust(p))], "orders")
    fact = lambda p: TableFilter(None, FACT, [JoinFilter("f_orderkey", "orders", "o_orderkey", ords(p))], "fact")
    origin_sql = ords("n_name = 'FRANCE'").to_sql()
    assert "IN (SELECT n_nationkey FROM nation WHERE n_name = 'FRANCE')" in origin_sql
    cut = LiteralCut("f_orderkey", [1, 2, 3], CutOrigin("orders", "o_orderkey", origin_sql))
    assert tuple(fact("n_name = 'FRANCE'").sides(cut)) == (True, False)
    assert tuple(fact("n_name = 'PERU'").sides(cut)) == (False, True)
    assert tuple(fact("n_name in ('PERU', 'FRANCE')").sides(cut)) == (True, True)


def test_key_sets_serialize_portably():
    small = LiteralCut("c", np.array([5, 1, 3, 3]), CutOrigin("d", "pk", "x > 1", 42))
    assert isinstance(small.keys, BitMap)
    big = LiteralCut("c", [1, 2**40], CutOrigin("d", "pk", "x > 1"))
    assert isinstance(big.keys, BitMap64)
    neg = LiteralCut("c", [-5, 7], CutOrigin("d", "pk", "x > 1"))
    strs = LiteralCut("c", ["b", "a", "b"], CutOrigin("d", "pk", "x > 1"))
    for cut in (small, big, neg, strs):
        data = cut.keys_to_bytes()
        back = cut_from_json(cut.to_json(), {cut.key: data})
        assert back.key == cut.key
        assert "keys" not in cut.to_json()  # never inlined
    # roaring's portable format: the bytes after our 5-byte header deserialize with pyroaring
    assert BitMap.deserialize(small.keys_to_bytes()[5:]) == BitMap([1, 3, 5])
    t = pa.table({"c": pa.array([1, 2, None, 5], pa.int64())})
    assert small.evaluate(t).tolist() == [True, False, False, True]
    assert strs.evaluate(pa.table({"c": ["a", "c", None]})).tolist() == [True, False, False]
    assert neg.evaluate(pa.table({"c": [-5, 5]})).tolist() == [True, False]
    with pytest.raises(PandoExprError):
        cut_from_json(small.to_json(), {})


def test_key_sets_decode_from_any_bytes_like():
    """cut_from_json takes a key set as bytes, bytearray or memoryview (a string key set from a
    memoryview used to fail: keys_from_bytes decoded the slice)."""
    for keys in ([5, 1, 3], [1, 2**40], [-5, 7], ["b", "a"]):
        cut = LiteralCut("c", keys, CutOrigin("d", "pk", "x > 1"))
        data = cut.keys_to_bytes()
        for raw in (data, bytearray(data), memoryview(data)):
            back = cut_from_json(cut.to_json(), {cut.key: raw})
            assert isinstance(back, LiteralCut) and back.key == cut.key
            assert np.array_equal(np.asarray(back.keys), np.asarray(cut.keys))


def test_cut_origin_exact_at_round_trip_and_chain_tables():
    """``exact_at`` (table → snapshot the keys are exact at) survives JSON; layouts written before
    it existed read as None (key sets compared); ``tables()`` names the nested chain."""
    nested = "o_custkey IN (SELECT c_custkey FROM db.customer WHERE c_mktsegment = 'BUILDING')"
    origin = CutOrigin("db.orders", "o_orderkey", nested, 7, "unique", {"db.orders": 7, "db.customer": 3})
    assert origin.exact_at == (("db.customer", 3), ("db.orders", 7))
    assert origin.tables() == ["db.orders", "db.customer"]
    cut = LiteralCut("l_orderkey", [1, 2], origin)
    back = cut_from_json(cut.to_json(), {cut.key: cut.keys_to_bytes()})
    assert back.origin == origin and back.key == cut.key
    old = cut.to_json()
    del old["origin"]["exact_at"]
    assert cut_from_json(old, {cut.key: cut.keys_to_bytes()}).origin.exact_at is None
    assert CutOrigin("d", "pk", "x > 1").tables() == ["d"]


def test_expr_cut_json_roundtrip_and_errors():
    s = pa.schema([("x", pa.int64()), ("d", pa.date32()), ("m", pa.decimal128(15, 2))])
    for q in ["x < 5", "d >= date '1994-01-01' + interval '1' year", "m between 0.05 and 0.07 or x is null",
              "not (x in (3, 1, 2))"]:
        cut = ExprCut(q, s)
        back = cut_from_json(cut.to_json())
        assert back.key == cut.key and back == cut
    with pytest.raises(PandoExprError, match=r"table 'lineitem'.*unknown column 'y'"):
        ExprCut("y < 5", s, table="lineitem")
    with pytest.raises(PandoExprError, match=r"literal 'abc'.*column 'd'.*date"):
        ExprCut("d < 'abc'", s, table="lineitem")
    assert issubclass(PandoExprError, ValueError)


def test_a_cut_whose_origin_cannot_be_bound_keeps_no_caller_alive():
    """A cut's origin predicate naming a dimension the query does not join cannot be bound (UNKNOWN
    sides, remembered per cut). Raising the remembered error again on every query chained each
    query's frames onto it, and with them whatever those frames held (a pruned query's DataFrames
    and their JVM plans: ~0.4 MB of JVM heap a query, issue 16). Now nothing outlives the call."""
    import gc
    import weakref

    cut = LiteralCut("f_orderkey", [1, 2], CutOrigin(
        "orders", "o_orderkey", "o_custkey IN (SELECT c_custkey FROM customer WHERE c_custkey < 3)"))
    query = TableFilter(None, FACT, [JoinFilter("f_orderkey", "orders", "o_orderkey",
                                                TableFilter.from_sql("o_prio = 0", ORDERS, "orders"))], "fact")

    class Held:  # stands for what a planning caller holds in its frame
        pass

    def plan_once() -> weakref.ref:
        held = Held()
        assert tuple(query.sides(cut)) == (True, True)  # undecided: both sides
        return weakref.ref(held)

    refs = [plan_once() for _ in range(3)]
    gc.collect()
    assert all(r() is None for r in refs)
