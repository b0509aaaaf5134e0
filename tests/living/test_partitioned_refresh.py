"""refresh_literal_cuts on a table with per-partition layouts (issue 9): the join-induced cut of
every partition layout is refreshed from ONE computation per cut origin, each partition keeps
the old membership of the keys ITS laid-out rows have; one new version-2 sidecar (same block →
files maps), no table snapshot; pruning stays exact (pyiceberg planner and Spark)."""

from __future__ import annotations

import pytest

from pando_iceberg.expr import LiteralCut
from pando_iceberg.maintenance.literal_cuts import _keys, refresh_literal_cuts
from pando_iceberg.procedures import call
from pando_iceberg.spark.pruned import run_sql
from pando_iceberg.spark.rewrite import rewrite_table

from test_partitioned import D, OPTS, T, URGENT, WORKLOAD, _sidecar, check, random_filters, table  # noqa: F401

pytestmark = pytest.mark.spark

JOIN = WORKLOAD[-1]
PRED = "o_orderpriority = '1-URGENT'"


@pytest.fixture(scope="module")
def laid_out(spark, table):
    rewrite_table(spark, T, WORKLOAD, OPTS, io_properties=table)
    return table


def _literal(sc) -> dict[str, LiteralCut]:
    """Partition → its layout's literal cut of the workload's own predicate (the workload has one
    join: at most one per layout; attribute-range cuts of the same column are left aside)."""
    out = {}
    for name, e in sc.partitions.items():
        cuts = [c for c in e.layout.cuts if isinstance(c, LiteralCut) and c.origin.predicate == PRED]
        assert len(cuts) <= 1
        if cuts:
            out[name] = cuts[0]
    return out


def _set(cut) -> set:
    return set(_keys(cut.keys).tolist())


def _check_join(spark, catalog):
    got = run_sql(spark, catalog, JOIN)
    assert [tuple(r) for r in got.rows] == [tuple(r) for r in spark.sql(JOIN).collect()]


def _same_files(before, after):
    assert set(after.partitions) == set(before.partitions)
    for name, e in before.partitions.items():
        assert after.partitions[name].sidecar.block_files == e.sidecar.block_files, name
        assert after.partitions[name].sidecar.base_snapshot_id == e.sidecar.base_snapshot_id, name


def test_new_urgent_orders_are_added_in_every_partition_layout(spark, catalog, ctx, laid_out):
    before = _sidecar(catalog)
    cuts = _literal(before)
    assert len(cuts) >= 2 and len({c.origin for c in cuts.values()}) == 1  # one origin, many layouts
    spark.sql(f"INSERT INTO {D} SELECT o_orderkey + 100000000, o_custkey, o_orderstatus, o_totalprice, o_orderdate, "
              f"'1-URGENT', o_clerk, o_shippriority, o_comment FROM {D} ORDER BY o_orderkey LIMIT 40")
    spark.sql(f"INSERT INTO {D} SELECT o_orderkey + 200000000, o_custkey, o_orderstatus, o_totalprice, o_orderdate, "
              f"'5-LOW', o_clerk, o_shippriority, o_comment FROM {D} ORDER BY o_orderkey LIMIT 10")
    # Lineitems of the new orders arrive too (outside every layout: always read).
    spark.sql(f"INSERT INTO {T} SELECT l_orderkey + 100000000, l_partkey, l_suppkey, l_linenumber, l_quantity, "
              f"l_extendedprice, l_discount, l_tax, l_returnflag, l_linestatus, l_shipdate, l_commitdate, "
              f"l_receiptdate, l_shipinstruct, l_shipmode, l_comment FROM {T} WHERE l_orderkey IN "
              f"(SELECT o_orderkey - 100000000 FROM {D} WHERE o_orderkey > 100000000 AND o_orderkey < 200000000)")
    snapshot = catalog.load_table(T).current_snapshot().snapshot_id
    # layout_health lists the cut of every partition layout as stale, and the CALL that refreshes it
    health = call(ctx, f"CALL pando.system.layout_health(table => '{T}')").rows
    stale = [r for r in health if r[1] == "stale_cut"]
    assert {r[0] for r in stale if f"WHERE {PRED})" in r[-1]} == set(cuts), stale
    assert all("50 key(s) added, 0 removed" in r[-1] and "lacks 40 key(s)" in r[-1]
               for r in stale if f"WHERE {PRED})" in r[-1]), stale
    refresh = [r for r in health if r[:2] == ("*", "refresh")]
    assert len(refresh) == 1 and refresh[0][-1] == f"CALL pando.system.refresh_literal_cuts(table => '{T}')"
    assert health[-1][0] == "*" and health[-1][1] in ("ok", "recommendation")  # the last row stays the advice
    res = call(ctx, f"CALL pando.system.refresh_literal_cuts(table => '{T}')")
    rows = [dict(zip(res.names, r)) for r in res.rows]
    rows = [r for r in rows if r["cut"].endswith(f"WHERE {PRED})")]
    assert {r["partition"] for r in rows} == set(cuts)  # one row per partition layout with the cut
    assert all(r["mode"] == "incremental" and r["keys_added"] == 40 and r["keys_removed"] == 0
               and r["keys_kept_stale"] == 0 for r in rows), rows
    now = catalog.load_table(D).current_snapshot().snapshot_id
    assert {r["to_snapshot"] for r in rows} == {now}
    table = catalog.load_table(T)
    assert table.current_snapshot().snapshot_id == snapshot  # no new table snapshot
    after = _sidecar(catalog)
    assert after.layout_id != before.layout_id and after.properties["pando.previous-layout-id"] == before.layout_id
    _same_files(before, after)
    new = {r[0] for r in spark.sql(f"SELECT o_orderkey FROM {D} WHERE o_orderkey BETWEEN 100000000 AND 199999999")
           .collect()}
    assert len(new) == 40
    for name, cut in _literal(after).items():
        old = cuts[name]
        assert cut.origin.snapshot_id == now and len(cut.keys) == len(old.keys) + 40, name
        assert new <= _set(cut) and _set(old) <= _set(cut), name
    assert not any(r[1] == "stale_cut" for r in call(ctx, f"CALL pando.system.layout_health(table => '{T}')").rows)
    # Nothing changed since: a no-op (same layout).
    again = refresh_literal_cuts(spark, T, laid_out)
    assert not again.changed and {c.mode for c in again.cuts} == {"unchanged"}
    check(spark, catalog, random_filters(11, n=3))
    _check_join(spark, catalog)


def test_updated_and_deleted_orders_keep_laid_out_keys_stale(spark, catalog, laid_out):
    before = _sidecar(catalog)
    cuts = _literal(before)
    # 20 not-urgent orders become urgent, 20 urgent ones are deleted: all have laid-out lineitems.
    up = [r[0] for r in spark.sql(f"SELECT o_orderkey FROM {D} WHERE o_orderpriority = '4-NOT SPECIFIED' AND "
                                  f"o_orderkey IN (SELECT l_orderkey FROM {T}) ORDER BY 1 LIMIT 20").collect()]
    gone = [r[0] for r in spark.sql(f"SELECT o_orderkey FROM {D} WHERE {PRED} AND o_orderkey < 100000000 AND "
                                    f"o_orderkey IN (SELECT l_orderkey FROM {T}) ORDER BY 1 LIMIT 20").collect()]
    spark.sql(f"UPDATE {D} SET o_orderpriority = '1-URGENT' WHERE o_orderkey IN ({', '.join(map(str, up))})")
    spark.sql(f"DELETE FROM {D} WHERE o_orderkey IN ({', '.join(map(str, gone))})")
    # Expected per partition: the changed keys its laid-out rows have stay stale, the others flip.
    changed = up + gone
    pairs = spark.sql(f"SELECT DISTINCT concat('l_shipdate_month=', date_format(l_shipdate, 'yyyy-MM')), l_orderkey "
                      f"FROM {T} WHERE l_orderkey IN ({', '.join(map(str, changed))})").collect()
    have: dict[str, set[int]] = {}
    for name, key in pairs:
        have.setdefault(name, set()).add(key)
    r = refresh_literal_cuts(spark, T, laid_out)
    r.cuts = [c for c in r.cuts if c.cut.endswith(f"WHERE {PRED})")]
    assert r.changed and {c.partition for c in r.cuts} == set(cuts)
    after = _sidecar(catalog)
    _same_files(before, after)
    refreshed = _literal(after)
    for info in r.cuts:
        name = info.partition
        old, new = _set(cuts[name]), _set(refreshed[name])
        stale = have.get(name, set())
        assert info.mode == "full" and info.keys_kept_stale == len(stale), (name, info)
        assert all((k in new) == (k in old) for k in stale), name  # laid-out rows pin their keys' side
        free = set(changed) - stale
        assert {k for k in up if k in free} <= new and not ({k for k in gone if k in free} & new), name
        assert info.keys_added == len({k for k in up if k in free} - old), name
    assert sum(c.keys_kept_stale for c in r.cuts) > 0 and sum(c.keys_added for c in r.cuts) > 0
    assert len({c.key for c in refreshed.values()}) > 1  # one origin, now a key set per partition
    check(spark, catalog, random_filters(12, n=3))
    _check_join(spark, catalog)
