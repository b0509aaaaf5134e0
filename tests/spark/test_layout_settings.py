"""A layout means the same whatever session wrote it: the key sets of join-induced cuts are read
with the default settings (UTC, ANSI off) the planner reads their origin predicates with
(``expr/filters.py``, where a query's own key set is not at hand), also when the rewrite runs
in a session with another time zone.

A dimension with one row per three hours from 2026-01-01 00:00 UTC (keys not in time order) and
a fact laid out on cuts ``CAST(d.ts AS DATE) < DATE '2026-01-0D'``: written from a session in
Asia/Tokyo, where a day starts nine hours earlier, the key sets stored must still be the UTC
ones."""

from __future__ import annotations

import pytest

import pando_iceberg.spark
from pando_iceberg.spark.rewrite import RewriteOptions, rewrite_table

pytestmark = pytest.mark.spark

NS = "xsettings"
DAYS = [2, 3]
QUERY = ("SELECT count(*), sum(f.v) FROM {ns}.fact f JOIN {ns}.dim d ON f.fk = d.id "
         "WHERE CAST(d.ts AS DATE) < DATE '2026-01-0{d}'")


@pytest.fixture(scope="module")
def laid_out_in_tokyo(spark, catalog, lakehouse_cfg):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    for t in ("dim", "fact"):
        spark.sql(f"DROP TABLE IF EXISTS {NS}.{t}")
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.sql(f"CREATE TABLE {NS}.dim USING iceberg AS SELECT CAST(id AS INT) AS id, "
              "timestamp_seconds(1767225600 + pmod(id * 7, 24) * 10800) AS ts FROM range(0, 24)")  # 3-hourly
    spark.sql(f"CREATE TABLE {NS}.fact USING iceberg AS SELECT CAST(pmod(hash(id), 24) AS INT) AS fk, "
              "CAST(id AS INT) AS v FROM range(0, 24000)")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        rewrite_table(spark, f"{NS}.fact", [QUERY.format(ns=NS, d=d) for d in DAYS],
                      RewriteOptions(k=1, sample_rate=1.0, min_block_rows=1000, seed=1, template_draws=0,
                                     k_selection="fixed"),
                      io_properties=lakehouse_cfg.pyiceberg_properties())
        assert spark.conf.get("spark.sql.session.timeZone") == "Asia/Tokyo"  # the session's own, restored
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    return NS


def test_the_key_sets_stored_are_the_default_settings_ones(catalog, laid_out_in_tokyo):
    from pando_iceberg.expr import LiteralCut
    from pando_iceberg.planner.scan import layout_of

    _, layout, _ = layout_of(catalog.load_table(f"{NS}.fact"), cache=None)
    literal = {c.origin.predicate: c for c in layout.cuts if isinstance(c, LiteralCut)}
    assert literal, [c.key for c in layout.cuts]
    for predicate, cut in literal.items():
        day = int(predicate.rsplit("2026-01-0", 1)[1][0])  # the day the literal names: dates in UTC
        assert sorted(int(k) for k in cut.keys) == [i for i in range(24) if i * 7 % 24 * 3 < 24 * (day - 1)], predicate


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo"])
def test_a_layout_written_in_another_zone_prunes_exactly(spark, catalog, laid_out_in_tokyo, zone):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        pruned_any = False
        for d in DAYS + [1, 4]:
            q = QUERY.format(ns=NS, d=d)
            want = spark.sql(q).collect()
            with pando_iceberg.spark.sql(spark, q, catalog=catalog) as df:
                got = df.collect()
                pruned_any |= any(e.pando_files < e.total_files for e in df.pando.explains.values())
            assert got == want, (zone, q)

        # In UTC the layout decides these queries; in Tokyo a date of a timestamp column is not
        # modelled (the cuts were evaluated in UTC): nothing pruned, still exact.
        assert pruned_any == (zone == "UTC")
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
