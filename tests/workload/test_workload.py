"""Workload parsing: per-table filters, aliases/CTEs, weights, unsupported predicates, outer
joins, join-induced cuts, and all 22 TPC-H queries."""

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.expr import ExprCut, LiteralCut, TableFilter
from pando_iceberg.workload import PandoWorkloadError, arrow_key_provider, parse_workload
from pando_iceberg.workload.tpch_queries import (
    TPCH_PRIMARY_KEYS,
    TPCH_QUERIES,
    TPCH_SCHEMAS,
    tpch_workload,
)

SCHEMAS = {
    "db.fact": pa.schema([("f_ok", pa.int64()), ("f_x", pa.int64()), ("f_d", pa.date32())]),
    "orders": pa.schema([("o_orderkey", pa.int64()), ("o_custkey", pa.int64()), ("o_date", pa.date32())]),
    "customer": pa.schema([("c_custkey", pa.int64()), ("c_nationkey", pa.int64()), ("c_seg", pa.string())]),
    "nation": pa.schema([("n_nationkey", pa.int64()), ("n_name", pa.string())]),
}
PKS = {"orders": ["o_orderkey"], "customer": ["c_custkey"], "nation": ["n_nationkey"]}


def keys(table, sql):
    return {c.key for c in parse_workload(sql, SCHEMAS, primary_keys=PKS).candidate_cuts(table)}


def cut(table, sql):
    return ExprCut(sql, SCHEMAS[table]).key


def test_aliases_qualified_names_and_cte_filters_merge():
    w = parse_workload("with x as (select * from DB.FACT where f_x > 3) select count(*) from x as y "
                       "where y.f_d > date '1994-01-01'", SCHEMAS)
    f = w.queries[0].filters["db.fact"]
    assert {c.key for c in f.candidate_cuts()} == {cut("db.fact", "f_x > 3"), cut("db.fact", "f_d > date '1994-01-01'")}
    assert w.candidate_cuts("fact") == w.candidate_cuts("db.fact")


def test_derived_table_filters_and_or_groups_stay_one_cut():
    got = keys("db.fact", "select * from (select f_x, f_d from fact where f_x < 3 or f_d is null) t where t.f_x > 0")
    assert got == {cut("db.fact", "f_x < 3 or f_d is null"), cut("db.fact", "f_x > 0")}


def test_conjuncts_every_branch_of_an_or_shares_are_cuts_too():
    got = keys("db.fact", "select * from fact where (f_x < 3 and f_d is null and f_ok = 7) "
                          "or (f_ok = 7 and f_x > 9 and f_d is null) or (f_d is null and (f_ok = 7))")
    assert got == {cut("db.fact", "(f_x < 3 and f_d is null and f_ok = 7) or (f_ok = 7 and f_x > 9 and f_d is null)"
                                  " or (f_d is null and (f_ok = 7))"),
                   cut("db.fact", "f_d is null"), cut("db.fact", "f_ok = 7")}
    # a conjunct one branch lacks is not implied by the OR
    assert keys("db.fact", "select * from fact where (f_x < 3 and f_ok = 7) or f_x > 9") == {
        cut("db.fact", "(f_x < 3 and f_ok = 7) or f_x > 9")}


def test_repeated_queries_weigh_more():
    w = parse_workload("select * from fact where f_x < 1; SELECT *\nFROM fact WHERE f_x < 1 -- again\n;"
                       "select * from fact where f_x < 2", SCHEMAS)
    assert sorted(q.weight for q in w.queries) == [1.0, 2.0]


def test_unsupported_predicates_are_reported_not_guessed():
    w = parse_workload("select * from fact f join orders o on f.f_ok = o.o_orderkey "
                       "where rand() < 0.5 and myudf(f.f_x) > 1 and f.f_x < o.o_custkey and f.f_x = 1", SCHEMAS)
    reasons = {u.predicate_sql: u.reason for u in w.unsupported}
    assert any("RAND" in p for p in reasons), reasons
    assert any("MYUDF" in p.upper() and "UDF" in r for p, r in reasons.items()), reasons
    assert any("not an equi-join" in r for r in reasons.values()), reasons
    assert all(u.query_sql for u in w.unsupported)
    assert w.queries[0].filters["db.fact"].conjuncts()[0].sql("spark") == "f_x = 1"


def test_malformed_sql_names_the_statement():
    with pytest.raises(PandoWorkloadError, match="statement 2"):
        parse_workload("select * from fact; select * from fact where (f_x < ", SCHEMAS)
    with pytest.raises(PandoWorkloadError, match="unknown table"):
        parse_workload("select * from nope", SCHEMAS)


def test_outer_join_safety():
    w = parse_workload("select * from fact left join orders on f_ok = o_orderkey and o_date < date '1990-01-01' "
                       "and f_x = 7 where o_custkey is null", SCHEMAS, primary_keys=PKS)
    q = w.queries[0]
    # The preserved side keeps all its rows: no filter from the ON clause, no JoinFilter.
    assert q.filters["db.fact"].is_true_expr() and q.filters["db.fact"].joins == []
    # The nullable side's ON-only predicate decides which of its rows can appear at all.
    assert q.filters["orders"].to_sql() == ExprCut("o_date < date '1990-01-01'", SCHEMAS["orders"]).key
    assert any("nullable side" in u.reason for u in w.unsupported)
    full = parse_workload("select * from fact full join orders on f_ok = o_orderkey and f_x = 1 and o_custkey = 2",
                          SCHEMAS, primary_keys=PKS).queries[0]
    assert full.filters["db.fact"].is_true_expr() and full.filters["orders"].is_true_expr()



def test_right_join_on_a_derived_tables_column():
    # The ON predicate references a derived table (no base-table alias): it filters nothing. It
    # used to raise TypeError (len(None)) in the RIGHT-join branch.
    w = parse_workload("select * from (select o_orderkey as k from orders where o_custkey > 10) d "
                       "right join fact on d.k = f_ok", SCHEMAS, primary_keys=PKS)
    q = w.queries[0]
    assert q.filters["db.fact"].is_true_expr() and q.filters["db.fact"].joins == []
    assert q.filters["orders"].to_sql() == ExprCut("o_custkey > 10", SCHEMAS["orders"]).key

def test_correlated_exists_is_a_semi_join_of_the_subquery_table_only():
    """TPC-H Q4's shape: the subquery's table reads only the rows of the outer rows its filter
    keeps (workload/extraction.py, step 4), for EXISTS and NOT EXISTS; the outer table is not
    filtered by the subquery, and the correlation is no 'unsupported' predicate."""
    for neg in ("", "not "):
        sql = (f"select o_custkey from orders o where o_date >= date '1995-01-01' and {neg}exists "
               "(select * from fact f where f.f_ok = o.o_orderkey and f_x < 3)")
        w = parse_workload(sql, SCHEMAS, primary_keys=PKS)
        q = w.queries[0]
        fact = q.filters["db.fact"]
        (j,) = fact.joins
        assert (j.column, j.dim_table, j.dim_pk) == ("f_ok", "orders", "o_orderkey")
        assert j.dim_filter.to_sql() == ExprCut("o_date >= date '1995-01-01'", SCHEMAS["orders"]).key
        assert fact.to_sql().startswith("f_x < 3 AND ")
        assert q.filters["orders"].joins == []  # one direction only
        assert not w.unsupported, [u.reason for u in w.unsupported]
    # not a top-level conjunct (under OR), or correlated by a non-equality: nothing is modeled
    for sql in ("select * from orders o where o_custkey = 1 or "
                "exists (select * from fact f where f.f_ok = o.o_orderkey)",
                "select * from orders o where exists (select * from fact f where f.f_ok > o.o_orderkey)"):
        q = parse_workload(sql, SCHEMAS, primary_keys=PKS).queries[0]
        assert q.filters["db.fact"].joins == []


def test_correlated_scalar_subquery_and_a_join_every_occurrence_shares():
    """TPC-H Q17's shape: the fact read by the outer query (joined to orders) and by a scalar
    subquery correlated to orders; the union of the two occurrences keeps the shared join."""
    sql = ("select count(*) from fact f, orders o where f.f_ok = o.o_orderkey and o_date < date '1995-01-01' "
           "and f.f_x > (select avg(f2.f_x) from fact f2 where f2.f_ok = o.o_orderkey)")
    pks = {**PKS, "db.fact": ["f_d"]}  # declared: f_ok is no key of fact, no join back to it
    w = parse_workload(sql, SCHEMAS, primary_keys=pks)
    fact = w.queries[0].filters["db.fact"]
    (j,) = fact.joins
    assert (j.column, j.dim_table) == ("f_ok", "orders") and fact.is_true_expr()
    assert j.dim_filter.to_sql() == ExprCut("o_date < date '1995-01-01'", SCHEMAS["orders"]).key
    # TPC-H Q21's shape: correlated to the fact's own outer occurrence, which is joined to
    # orders: the subquery's rows are those of the orders the outer query keeps
    q21 = ("select * from fact f1, orders o where f1.f_ok = o.o_orderkey and o_date < date '1995-01-01' "
           "and exists (select * from fact f2 where f2.f_ok = f1.f_ok and f2.f_x <> f1.f_x)")
    (j21,) = parse_workload(q21, SCHEMAS, primary_keys=pks).queries[0].filters["db.fact"].joins
    assert j21.to_sql() == j.to_sql()
    # occurrences with different joins: none is kept (the OR of two joins is no join)
    other = ("select * from fact f, orders o where f.f_ok = o.o_orderkey and o_date < date '1995-01-01' "
             "union all select * from fact f, orders o where f.f_ok = o.o_orderkey and o_date > date '1996-01-01'")
    assert parse_workload(other, SCHEMAS, primary_keys=pks).queries[0].filters["db.fact"].joins == []


def test_fk_pk_join_filters_nest_along_chains_and_induce_literal_cuts():
    sql = ("select * from fact f join orders o on f.f_ok = o.o_orderkey join customer c on o_custkey = c_custkey "
           "join nation n on c_nationkey = n_nationkey where n_name = 'FRANCE' and o_date >= date '1995-01-01'")
    w = parse_workload(sql, SCHEMAS, primary_keys=PKS)
    fact_filter = w.queries[0].filters["db.fact"]
    (j,) = fact_filter.joins
    assert (j.column, j.dim_table, j.dim_pk) == ("f_ok", "orders", "o_orderkey")
    assert j.dim_filter.joins[0].dim_filter.joins[0].dim_filter.to_sql() == "n_name = 'FRANCE'"
    tables = {
        "nation": pa.table({"n_nationkey": [0, 1], "n_name": ["FRANCE", "PERU"]}, schema=SCHEMAS["nation"]),
        "customer": pa.table({"c_custkey": [10, 11, 12], "c_nationkey": [0, 1, 0], "c_seg": ["a", "b", "c"]},
                             schema=SCHEMAS["customer"]),
        "orders": pa.table({"o_orderkey": [100, 101, 102], "o_custkey": [10, 11, 12],
                            "o_date": pa.array([9000, 9500, 9600], pa.int32()).cast(pa.date32())},
                           schema=SCHEMAS["orders"]),
    }
    cuts = w.join_induced_cuts("db.fact", arrow_key_provider(tables))
    by_pred = {c.origin.predicate: sorted(np.asarray(c.keys.to_array()).tolist()) for c in cuts}
    # one literal cut per dimension atom; the nation atom reaches fact through three hops
    nation_atom = [p for p in by_pred if "n_name = 'FRANCE'" in p]
    assert len(by_pred) == 2 and len(nation_atom) == 1
    assert by_pred[nation_atom[0]] == [100, 102]
    assert all(isinstance(c, LiteralCut) and c.column == "f_ok" for c in cuts)
    # Only PK side → FK side: orders does not get cuts from fact.
    assert all(c.origin.dim_table != "db.fact" for c in w.join_induced_cuts("orders", arrow_key_provider(tables)))


def test_uniqueness_checked_on_data_when_keys_are_not_declared():
    sql = "select * from fact f join orders o on f.f_ok = o.o_orderkey where o_date < date '1995-01-01'"
    w = parse_workload(sql, SCHEMAS, primary_keys=PKS)
    unique = {"orders": pa.table({"o_orderkey": [1, 2], "o_custkey": [1, 1], "o_date": pa.array([1, 2], pa.int32())
                                  .cast(pa.date32())}, schema=SCHEMAS["orders"])}
    provider = arrow_key_provider(unique)
    assert provider.is_unique("orders", "o_orderkey") and not provider.is_unique("orders", "o_custkey")


def test_all_22_tpch_queries_parse_with_expected_cuts():
    w = parse_workload(";\n".join(TPCH_QUERIES.values()), TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    assert len(w.queries) == 22
    li = {c.key for c in w.candidate_cuts("lineitem")}
    L = lambda s: ExprCut(s, TPCH_SCHEMAS["lineitem"]).key
    for expected in ["l_shipdate >= date '1994-01-01'", "l_shipdate < date '1995-01-01'",
                     "l_discount between 0.05 and 0.07", "l_quantity < 24", "l_shipmode in ('MAIL', 'SHIP')",
                     "l_commitdate < l_receiptdate", "l_shipdate <= date '1998-09-02'", "l_returnflag = 'R'",
                     # Q19: shared by its OR's three branches
                     "l_shipmode in ('AIR', 'AIR REG')", "l_shipinstruct = 'DELIVER IN PERSON'"]:
        assert L(expected) in li, expected
    provider_tables = {name: schema.empty_table() for name, schema in TPCH_SCHEMAS.items()}
    induced = w.join_induced_cuts("lineitem", arrow_key_provider(provider_tables))
    dims = {c.origin.dim_table for c in induced}
    assert {"orders", "part", "supplier"} <= dims
    preds = " ".join(c.origin.predicate for c in induced)
    for fragment in ["customer", "nation", "region", "o_orderdate", "p_type", "c_mktsegment"]:
        assert fragment in preds, fragment
    # customer's segment cut: Q22's substring filter is a customer candidate
    cust = {c.key for c in w.candidate_cuts("customer")}
    assert ExprCut("substring(c_phone, 1, 2) in ('13','31','23','29','30','18','17')",
                   TPCH_SCHEMAS["customer"]).key in cust


def test_tpch_generator_follows_the_templates():
    qs = tpch_workload(2, seed=7)
    assert len(qs) == 44 and {t for t, _ in qs} == set(range(1, 23))
    assert tpch_workload(2, seed=7) == qs and tpch_workload(2, seed=8) != qs
    w = parse_workload([sql for _, sql in qs], TPCH_SCHEMAS, primary_keys=TPCH_PRIMARY_KEYS)
    assert sum(q.weight for q in w.queries) == 44


def test_sources_may_be_files(tmp_path):
    p = tmp_path / "w.sql"
    p.write_text("/* header; with a semicolon */ select * from fact where f_x < 1;\n"
                 "select * from fact where f_d = '1995-01-01' -- trailing; comment\n")
    w = parse_workload(str(p), SCHEMAS)
    assert len(w.queries) == 2
    assert isinstance(w.queries[1].filters["db.fact"], TableFilter)
