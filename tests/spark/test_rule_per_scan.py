"""A table read more than once by one query, through the optimizer rule: each scan reads the files
its own conditions keep (not the union over the table's scans), an anti join's right side is
pruned only by what makes its rows matter and never prunes its left side, and the rows are a plain
session's.

lineitem is laid out on its ship dates and, through the join to orders, on the order's status
(TPC-H Q21's ``o_orderstatus = 'F'``), so a scan pruned by another scan's filter, or an anti
join's left side pruned as if the join were inner, skips files holding rows of the answer.
"""

from __future__ import annotations

import re

import pytest

import pando_iceberg
import pando_iceberg.spark
from pando_iceberg.spark import prune_rule

pytestmark = pytest.mark.spark

NS = "perscan"

Q21 = ("SELECT s_name, count(*) AS numwait FROM {ns}.supplier, {ns}.lineitem l1, {ns}.orders, {ns}.nation "
       "WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F' "
       "AND l1.l_receiptdate > l1.l_commitdate "
       "AND EXISTS (SELECT * FROM {ns}.lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey "
       "AND l2.l_suppkey <> l1.l_suppkey) "
       "AND NOT EXISTS (SELECT * FROM {ns}.lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey "
       "AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate) "
       "AND s_nationkey = n_nationkey AND n_name = '{nation}' GROUP BY s_name")
# the same table twice with different filters (through the join to orders), joined
SELF_JOIN = ("SELECT count(*) AS n, sum(a.l_quantity) AS qa, sum(b.l_quantity) AS qb "
             "FROM {ns}.lineitem a, {ns}.orders oa, {ns}.lineitem b, {ns}.orders ob "
             "WHERE a.l_orderkey = oa.o_orderkey AND oa.o_orderstatus = 'F' AND a.l_linenumber = 7 "
             "AND b.l_orderkey = ob.o_orderkey AND ob.o_orderstatus = 'O' AND b.l_linenumber = 7 "
             "AND a.l_suppkey = b.l_suppkey")
ALONE = ("SELECT * FROM {ns}.lineitem, {ns}.orders WHERE l_orderkey = o_orderkey AND o_orderstatus = '{status}' "
         "AND l_linenumber = 7")
# NOT EXISTS over the same table: the last line of each finished order. l3 matters only for the
# finished orders' lines (the context); l1 is never pruned by l3's conditions.
LAST_LINE = ("SELECT count(*) AS n, sum(l1.l_quantity) AS q FROM {ns}.lineitem l1, {ns}.orders o "
             "WHERE l1.l_orderkey = o.o_orderkey AND o.o_orderstatus = 'F' "
             "AND NOT EXISTS (SELECT * FROM {ns}.lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey "
             "AND l3.l_linenumber > l1.l_linenumber)")
# NOT EXISTS whose right side, read as an inner join, would prune the left side to the finished
# orders' files: the lines kept are exactly those of the other orders.
NOT_FINISHED = ("SELECT count(*) AS n, sum(l_quantity) AS q FROM {ns}.lineitem l1 WHERE NOT EXISTS "
                "(SELECT * FROM {ns}.orders o WHERE o.o_orderkey = l1.l_orderkey AND o.o_orderstatus = 'F')")
# NOT IN (a null-aware anti join: a NULL on the right side decides for every left row)
NOT_IN = ("SELECT count(*) AS n FROM {ns}.orders WHERE o_orderstatus = 'F' AND o_orderkey NOT IN "
          "(SELECT l_orderkey FROM {ns}.lineitem WHERE l_shipdate >= DATE '1997-06-01')")

WORKLOAD = [
    Q21.format(ns=NS, nation="GERMANY"),
    Q21.format(ns=NS, nation="FRANCE"),
    f"SELECT count(*) FROM {NS}.lineitem WHERE l_shipdate < DATE '1993-01-01'",
    f"SELECT count(*) FROM {NS}.lineitem WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'",
    f"SELECT count(*) FROM {NS}.lineitem, {NS}.orders WHERE l_orderkey = o_orderkey AND o_orderstatus = 'F'",
    f"SELECT count(*) FROM {NS}.lineitem, {NS}.orders WHERE l_orderkey = o_orderkey AND o_orderstatus = 'O'",
]

_READ = re.compile(r"^(?P<table>\S+): read (?P<n>\d+) of (?P<m>\d+) files")


@pytest.fixture(scope="module")
def laid_out(spark, catalog, tpch):
    from pando_iceberg import LayoutOptions, PandoTable

    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for t in ("lineitem", "orders", "supplier", "nation"):
        spark.sql(f"DROP TABLE IF EXISTS {NS}.{t}")
        spark.sql(f"CREATE TABLE {NS}.{t} USING iceberg AS SELECT * FROM tpch.{t}")
    PandoTable(catalog, f"{NS}.lineitem", spark=spark).optimize.rewrite(
        WORKLOAD, options=LayoutOptions(k=2, min_block_rows=2000, sample_rate=1.0))
    pando_iceberg.enable(spark)
    yield NS
    pando_iceberg.disable(spark)


def rows(df) -> list:
    return sorted(tuple(r) for r in df.collect())


def reads(notes: list[str], table: str) -> list[int]:
    """The files each replaced scan of ``table`` read, sorted, from the rule's notes."""
    return sorted(int(m["n"]) for m in map(_READ.match, notes) if m and m["table"] == table)


def kept(spark, catalog, sql: str) -> tuple[int, int]:
    """The files ``pando_iceberg.spark.sql`` keeps for lineitem in ``sql`` (one set for all its
    scans), of all."""
    with pando_iceberg.spark.sql(spark, sql, catalog=catalog) as df:
        e = df.pando.explains[f"{NS}.lineitem"]
        return e.pando_files, e.total_files


def run(spark, sql: str) -> tuple[list, list[str], list[str]]:
    """``sql``'s rows in the enabled session (answers planned anew), the rule's notes and the
    requests it sent."""
    requests: list[str] = []
    answer = prune_rule.answer

    def recorded(session, request: str) -> str:
        requests.append(request)
        return answer(session, request)

    prune_rule.forget_answers(spark)
    prune_rule.clear_notes(spark)
    prune_rule.answer = recorded
    try:
        got = rows(spark.sql(sql))
    finally:
        prune_rule.answer = answer
    return got, prune_rule.notes(spark), requests


def test_two_scans_of_a_table_read_each_its_own_files(spark, catalog, laid_out):
    sql = SELF_JOIN.format(ns=NS)
    got, notes, _ = run(spark, sql)
    assert got == rows(spark.newSession().sql(sql))
    assert got[0][0] > 0  # the join has rows: a wrong skip would change them
    finished = kept(spark, catalog, ALONE.format(ns=NS, status="F"))[0]
    open_ = kept(spark, catalog, ALONE.format(ns=NS, status="O"))[0]
    union, total = kept(spark, catalog, sql)
    # each scan reads what its own filter keeps, fewer than the union the text path shares
    assert reads(notes, f"{NS}.lineitem") == sorted([finished, open_]), notes
    assert max(finished, open_) < union <= total, (finished, open_, union)


def test_an_anti_join_s_right_side_is_pruned_by_its_context_only(spark, catalog, laid_out):
    sql = LAST_LINE.format(ns=NS)
    got, notes, requests = run(spark, sql)
    assert got == rows(spark.newSession().sql(sql))
    assert got[0][0] > 0
    finished, total = kept(spark, catalog, ALONE.replace(" AND l_linenumber = 7", "").format(ns=NS, status="F"))
    # l1 by its own join to the finished orders, l3 by the l1 rows that matter: the same files
    assert reads(notes, f"{NS}.lineitem") == [finished, finished] and finished < total, notes
    # the right side's block names the left side's scans as context (C), never answered; the
    # block the left side is answered in does not hold the right side's scan
    blocks = [b for r in requests for b in r.split("B\t")[1:]]
    right = [b for b in blocks if "l_linenumber >" in b]
    assert right and all("\nC\t" in b for b in right), blocks
    assert all("l_linenumber >" not in b for b in blocks if "\nC\t" not in b), blocks


def test_an_anti_join_never_prunes_its_left_side_by_its_right_side(spark, catalog, laid_out):
    sql = NOT_FINISHED.format(ns=NS)
    got, notes, _ = run(spark, sql)
    assert got == rows(spark.newSession().sql(sql))
    assert got[0][0] > 0
    assert reads(notes, f"{NS}.lineitem") == [], notes  # read whole: no filter of its own


def test_not_in_keeps_a_plain_session_s_rows(spark, catalog, laid_out):
    sql = NOT_IN.format(ns=NS)
    got, _, _ = run(spark, sql)
    assert got == rows(spark.newSession().sql(sql))
    assert got[0][0] > 0


@pytest.mark.parametrize("nation", ["GERMANY", "SAUDI ARABIA"])
def test_tpch_q21_reads_per_scan_no_more_than_the_text_path(spark, catalog, laid_out, nation):
    sql = Q21.format(ns=NS, nation=nation)
    got, notes, _ = run(spark, sql)
    assert got == rows(spark.newSession().sql(sql))
    text, total = kept(spark, catalog, sql)
    found = reads(notes, f"{NS}.lineitem")
    # l1, the EXISTS' l2 and the NOT EXISTS' l3: each planned on its own, none reads more than the
    # one set the text path shares among them
    assert len(found) == 3 and max(found) <= text < total, (found, text, notes)


def test_the_block_as_one_scan_sees_it():
    """A scan of a table read twice is planned without the other scan and the conditions on it;
    the column equalities the other scan carried stay between the scans left."""
    sql = ("SELECT 1 FROM `c`.`d`.`li` AS __p0, `c`.`d`.`li` AS __p1, `c`.`d`.`o` AS __p2 "
           "WHERE (__p1.k = __p0.k) AND (NOT (__p1.s = __p0.s)) AND (__p0.r > __p0.c) "
           "AND (__p2.ok = __p0.k) AND (__p2.st = 'F') AND (__p1.q < 24.00BD)")
    assert prune_rule.scan_sql(sql, {"__p0"}) == (
        "SELECT 1 FROM `c`.`d`.`li` AS __p1, `c`.`d`.`o` AS __p2 WHERE (__p2.st = 'F') "
        "AND (__p1.q < CAST(24.00 AS DECIMAL(4, 2))) AND (__p1.k = __p2.ok)")
    leaves = prune_rule.parse_request(
        f"B\t{sql}\nL\t__p0\tc\td.li\t1\nL\t__p1\tc\td.li\t1\nL\t__p2\tc\td.o\t2\n")[0][1]
    planned = prune_rule.per_scan(sql, leaves)
    assert [([leaf.alias for leaf in answered], alone) for _, answered, alone in planned] == [
        (["__p2"], 0), (["__p0"], 2), (["__p1"], 2)]
    assert planned[0][0] == sql
    # a context scan is in the SQL, never answered, and counts as a scan of its table
    ctx = prune_rule.parse_request(f"B\t{sql}\nC\t__p0\tc\td.li\t1\nL\t__p1\tc\td.li\t1\nC\t__p2\tc\td.o\t2\n")[0][1]
    assert [leaf.context for leaf in ctx] == [True, False, True]
    assert [([leaf.alias for leaf in a], alone) for _, a, alone in prune_rule.per_scan(sql, ctx)] == [(["__p1"], 2)]
