"""TPC-DS in ``pando bench`` (issue 17 item 3): DuckDB's dsdgen loaded into Iceberg by Spark,
the extension's 99 queries transpiled to Spark SQL, and the bench at SF 0.01."""

from __future__ import annotations

import datetime as dt
import itertools
import re

import pytest

from pando_iceberg.bench import tpcds

NS = "tpcds"


def test_bad_scale_factor_and_query_numbers_name_what_is_accepted():
    for bad in (0, -1, 0.001, float("nan"), "x"):
        with pytest.raises(tpcds.TpcdsError, match=r"scale factor must be .*>= 0.01"):
            tpcds.check_sf(bad)
    assert tpcds.check_sf("0.1") == 0.1
    with pytest.raises(tpcds.TpcdsError, match=r"query number\(s\) 0, 100 not known; accepted: 1\.\.99"):
        tpcds.check_numbers([3, 0, 100])
    with pytest.raises(tpcds.TpcdsError, match=r"accepted: 1\.\.99"):
        tpcds.spark_queries(numbers=[123])


def test_extension_is_found_in_its_package_and_gives_99_queries():
    path = tpcds.extension_path()
    assert path.is_file() and "duckdb_extension_tpcds" in str(path)
    raw = tpcds.duckdb_queries()
    assert sorted(raw) == list(range(1, 100))
    spark_sql = tpcds.spark_queries("ds")
    assert sorted(spark_sql) == list(range(1, 100))
    # every base table is qualified, CTE names are not
    assert "ds.store_sales" in spark_sql[3] and "ds.date_dim" in spark_sql[3]
    assert "ds.ssr" not in spark_sql[5] and "ds.store_returns" in spark_sql[5]


@pytest.fixture(scope="module")
def tpcds_loaded(spark, catalog):
    """TPC-DS SF 0.01 loaded once into namespace ``tpcds`` (read-only for the tests)."""
    return tpcds.load_tpcds(spark, catalog, 0.01, namespace=NS)


@pytest.mark.spark
def test_loader_loads_every_table_with_dsdgen_row_counts_and_is_idempotent(spark, catalog, tpcds_loaded):
    con = tpcds.connect()
    con.execute("CALL dsdgen(sf=0.01)")
    expected = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tpcds.TPCDS_TABLES}
    con.close()
    assert tpcds_loaded.rows == expected and expected["store_sales"] == 28_810
    for t in tpcds.TPCDS_TABLES:
        assert spark.table(f"{NS}.{t}").count() == expected[t], t
    # the facts arrive in files of ~file_rows rows (b at SF 0.01 = 1,000), in generation order
    assert tpcds_loaded.files["store_sales"] == 29 and tpcds_loaded.files["date_dim"] == 1
    spans = spark.sql(f"SELECT min(ss_ticket_number) lo, max(ss_ticket_number) hi FROM {NS}.store_sales "
                      "GROUP BY _file ORDER BY lo").collect()
    assert all(a.hi <= b.lo for a, b in itertools.pairwise(spans))  # tickets do not overlap across files
    # surrogate keys declared (NOT NULL and unique in the data)
    from pando_iceberg.spark.rewrite import identifier_fields

    assert identifier_fields(spark, f"{NS}.date_dim") == ["d_date_sk"]
    assert sorted(identifier_fields(spark, f"{NS}.store_sales")) == ["ss_item_sk", "ss_ticket_number"]
    again = tpcds.load_tpcds(spark, catalog, 0.01, namespace=NS)
    assert again.reused and again.rows == expected and again.files == tpcds_loaded.files


@pytest.mark.spark
def test_transpiled_queries_run_in_spark_and_through_the_planner(spark, catalog, tpcds_loaded):
    """All 99: Spark analyses each and the product plans it (and its facts' filters); a few run."""
    chk = tpcds.check_queries(spark, catalog, NS, execute=False)
    assert not chk.failed, chk.failed
    assert sorted(chk.ok) == list(range(1, 100))
    ran = tpcds.check_queries(spark, catalog, NS, numbers=[3, 42, 96], execute=True, plan=False)
    assert sorted(ran.ok) == [3, 42, 96] and not ran.failed
    assert spark.sql(ran.ok[3]).collect() == spark.sql(chk.ok[3]).collect()


_DOMAINS = {"d_year": [1998, 1999, 2000, 2001, 2002], "d_moy": list(range(1, 13)), "d_qoy": [1, 2, 3, 4],
            "d_date": [dt.date(1998, 1, 2) + dt.timedelta(days=i) for i in range(1800)],
            "i_manufact_id": list(range(1, 1000)), "i_manager_id": list(range(1, 100)),
            "i_category": ["Books", "Home", "Sports", "Music", "Men", "Women"], "i_current_price": [0.09, 99.5],
            "cd_gender": ["M", "F"], "cd_marital_status": list("SMDWU"), "cd_education_status": ["College", "Primary"],
            "ca_state": ["CA", "TX", "NY", "GA"], "s_gmt_offset": [-5.0, -6.0], "s_store_name": ["ese", "ought"],
            "hd_dep_count": list(range(10)), "t_hour": list(range(24))}


def test_substituter_draws_different_literals_and_queries_that_parse():
    import random

    from sqlglot import exp, parse_one

    from pando_iceberg.workload import parse_workload

    base = tpcds.spark_queries(numbers=tpcds.HELD_OUT_TEMPLATES)
    assert len(tpcds.HELD_OUT_TEMPLATES) >= 10
    for n in tpcds.HELD_OUT_TEMPLATES:
        rng = random.Random(n)
        draws = [tpcds.substitute(base[n], _DOMAINS, rng) for _ in range(6)]
        assert all(d >= 1 for _, d in draws), n
        assert len({s for s, _ in draws}) > 1, n  # different literals from the same template
        for sql, _ in draws:
            tree = parse_one(sql, read="spark")
            assert tree.find(exp.Select) is not None
            # the same query apart from literals
            def shape(s):
                return [type(x).__name__ for x in parse_one(s, read="spark").walk() if not isinstance(x, exp.Literal)]
            assert shape(sql) == shape(base[n]), n
    q3 = tpcds.substitute(base[3], _DOMAINS, random.Random(5))[0]
    assert "i_manufact_id = 128" in base[3] and q3 != base[3]
    q12 = tpcds.substitute(base[12], _DOMAINS, random.Random(5))[0]  # the 30-day window keeps its width
    d0, d1 = (dt.date.fromisoformat(x) for x in re.findall(r"'(\d{4}-\d\d-\d\d)'", q12))
    assert (d1 - d0).days == 30 and "1999-02-22" not in q12
    # seeded splits, half per template, and the project's parser takes every query
    train, test = tpcds.held_out_split(_DOMAINS, 4, seed=0)
    assert (train, test) == tpcds.held_out_split(_DOMAINS, 4, seed=0)
    assert len(train) == len(test) == 2 * len(tpcds.HELD_OUT_TEMPLATES)
    assert set(s for _, s in test) - set(s for _, s in train)
    with pytest.raises(tpcds.TpcdsError, match="have no parameter substitution; accepted: 3, 7"):
        tpcds.held_out_split(_DOMAINS, 4, seed=0, templates=[1])
    con = tpcds.connect()
    con.execute("CALL dsdgen(sf=0.01)")
    schemas = {f"ds.{t}": con.execute(f"SELECT * FROM {t} LIMIT 0").arrow().schema for t in tpcds.TPCDS_TABLES}
    con.close()
    from pando_iceberg.bench.workloads import qualify

    queries = {qualify(s, "ds") for _, s in train + test}
    wl = parse_workload(sorted(queries), schemas)
    assert len(wl.queries) == len(queries)
    assert all(q.filters for q in wl.queries)


@pytest.mark.spark
@pytest.mark.slow
def test_bench_tpcds_held_out_and_in_sample_give_no_mismatch(spark, catalog, lakehouse_cfg, tpcds_loaded, tmp_path):
    from pando_iceberg.bench.harness import BenchError, BenchOptions, run_bench

    with pytest.raises(BenchError, match="have no held-out parameter draws"):
        BenchOptions(dataset="tpcds", sf=0.01, templates=[1]).validate()
    with pytest.raises(BenchError, match=r">= 0\.01"):
        BenchOptions(dataset="tpcds", sf=0.001).validate()
    domains = tpcds.load_domains(spark, NS)
    assert domains["d_year"] == [1998, 1999, 2000, 2001, 2002] and len(domains["i_category"]) >= 5
    opts = BenchOptions(dataset="tpcds", sf=0.01, layouts=("arrival", "pando-k1"), per_template=2, runs=0,
                        templates=[3, 96], namespace=NS, out=str(tmp_path / "held"))
    rep = run_bench(spark, catalog, lakehouse_cfg, opts)
    assert rep["mismatches"] == 0 and rep["workload"].startswith("held-out")
    assert {q["template"] for q in rep["queries"]} == {3, 96} and len(rep["queries"]) == 2
    for q in rep["queries"]:
        assert q["layouts"]["pando-k1"]["same_result"] and "store_sales" in q["tables"]
    assert catalog.load_table("tpcds_pando_k1.store_sales").properties.get("pando.layout-id")
    opts = BenchOptions(dataset="tpcds", sf=0.01, layouts=("arrival", "pando-k1"), runs=0, in_sample=True,
                        templates=[7, 42], namespace=NS, out=str(tmp_path / "in"))
    rep = run_bench(spark, catalog, lakehouse_cfg, opts)
    assert rep["mismatches"] == 0 and rep["workload"].startswith("in-sample")
    assert rep["train_queries"] == rep["test_queries"] == 2 and rep["tpcds_queries"]["ok"] == [7, 42]
    md = (tmp_path / "in" / "bench_tpcds_sf0.01_in_sample.md").read_text()
    assert "(IN-SAMPLE)" in md.splitlines()[0] and "**In-sample run: train = test.**" in md
