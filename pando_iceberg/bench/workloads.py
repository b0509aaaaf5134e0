"""Benchmark workloads: train/test halves (the paper's protocol, §8.2) and the columns the
train half filters most (for Iceberg's z-order baseline).

- TPC-H: :func:`pando_iceberg.workload.tpch_queries.tpch_workload` (22 templates, parameters by
  the TPC-H substitution rules), split 50/50 per template with a fixed seed by
  :func:`split_workload` (the split every TPC-H benchmark script uses); templates 23-26 (named
  with ``--templates``) are LIMIT and top-k queries on lineitem and orders.
- taxi: templates with ranges on each correlated column of ``trips`` (and their combinations),
  parameters drawn from a seeded generator, split the same way; templates 10-13 (named with
  ``--templates``) are top-k queries (``ORDER BY ... LIMIT``, a total order) for top-k pruning.
- star: star-join templates over the dimensions' attributes only (no predicate on the fact),
  parameters drawn from a seeded generator, split the same way: the held-out half
  names brands, months, regions the training half may never have named.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

from .datasets import (
    STAR_AGE_BANDS,
    STAR_BRANDS_PER_CATEGORY,
    STAR_CATEGORIES,
    STAR_CITIES_PER_REGION,
    STAR_DAYS,
    STAR_REGIONS,
    STAR_SEGMENTS,
    STAR_START,
    TAXI_DAYS,
    TAXI_START,
    TAXI_ZONES,
    star_brand,
    star_brands_per_category,
    star_city,
)

Split = tuple[list[tuple[int, str]], list[tuple[int, str]]]


def split_workload(queries: list[tuple[int, str]], seed: int) -> Split:
    """Half of each template's queries for training, the other half held out (§8.2)."""
    rng = random.Random(seed)
    train, test = [], []
    by_template: dict[int, list[str]] = {}
    for t, sql in queries:
        by_template.setdefault(t, []).append(sql)
    for t, sqls in sorted(by_template.items()):
        rng.shuffle(sqls)
        half = max(1, len(sqls) // 2)
        train += [(t, s) for s in sqls[:half]]
        test += [(t, s) for s in sqls[half:]]
    return train, test


def qualify(sql: str, namespace: str) -> str:
    """``sql`` with every unqualified table name (not a CTE) put in ``namespace``."""
    from sqlglot import exp, parse_one

    tree = parse_one(sql, read="spark")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        if t.name and not t.db and t.name not in ctes:
            t.set("db", exp.to_identifier(namespace))
    return tree.sql(dialect="spark")


TPCH_LIMIT = (23, 24, 25, 26)  # only when named (``--templates``)
_TPCH_PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")


def tpch_limit_query(template: int, rng: random.Random) -> str:
    """LIMIT and top-k templates on TPC-H's facts (the Snowflake seed §4, §5): a dashboard's
    default LIMIT over a month of shipments (no order: any rows that match), a quarter's first
    orders (no order), the largest line items of a week and the latest orders of one priority
    (ordered totally, the keys breaking ties, so that every layout returns the same rows)."""
    day = dt.date(1992, 1, 2) + dt.timedelta(days=rng.randrange(0, 2300))
    if template == 23:
        return ("SELECT l_orderkey, l_linenumber, l_shipdate, l_quantity, l_extendedprice FROM lineitem "
                f"WHERE l_shipdate >= date '{day}' AND l_shipdate < date '{day + dt.timedelta(days=30)}' "
                f"AND l_discount >= {rng.choice(['0.02', '0.04', '0.06'])} LIMIT 1000")
    if template == 24:
        return ("SELECT o_orderkey, o_custkey, o_totalprice, o_orderdate FROM orders "
                f"WHERE o_orderdate >= date '{day}' AND o_orderdate < date '{day + dt.timedelta(days=91)}' LIMIT 100")
    if template == 25:
        return ("SELECT l_orderkey, l_linenumber, l_shipdate, l_extendedprice FROM lineitem "
                f"WHERE l_shipdate >= date '{day}' AND l_shipdate < date '{day + dt.timedelta(days=7)}' "
                f"ORDER BY l_extendedprice DESC, l_orderkey, l_linenumber LIMIT {rng.choice([10, 20, 50])}")
    if template == 26:
        return ("SELECT o_orderkey, o_orderdate, o_totalprice, o_orderpriority FROM orders "
                f"WHERE o_orderpriority = '{rng.choice(_TPCH_PRIORITIES)}' "
                "ORDER BY o_orderdate DESC, o_orderkey LIMIT 50")
    raise ValueError(f"TPC-H templates are 1..22 and the LIMIT templates {TPCH_LIMIT[0]}..{TPCH_LIMIT[-1]}, "
                     f"got {template}")


def tpch_split(per_template: int, seed: int, templates: list[int] | None = None) -> Split:
    from ..workload.tpch_queries import tpch_workload

    spec = [t for t in templates or range(1, 23) if t not in TPCH_LIMIT]
    queries = tpch_workload(per_template, seed=seed, templates=spec) if spec else []
    for t in templates or ():
        if t in TPCH_LIMIT:
            rng = random.Random(f"tpch-{seed}-{t}")
            queries += [(t, tpch_limit_query(t, rng)) for _ in range(per_template)]
    return split_workload(queries, seed)


_TAXI_SELECT = "SELECT count(*) AS trips, sum(fare) AS fares, sum(tip) AS tips FROM trips WHERE "


def _day(rng: random.Random, span_days: int) -> tuple[str, str]:
    d0 = TAXI_START + dt.timedelta(days=rng.randrange(0, TAXI_DAYS - span_days))
    d1 = d0 + dt.timedelta(days=span_days)
    return d0.strftime("%Y-%m-%d %H:%M:%S"), d1.strftime("%Y-%m-%d %H:%M:%S")


def _range(rng: random.Random, lo: float, hi: float, width: float) -> tuple[float, float]:
    a = round(rng.uniform(lo, hi - width), 1)
    return a, round(a + width, 1)


def taxi_query(template: int, rng: random.Random) -> str:
    """One query of taxi template 1..9: ranges on each correlated column, alone and combined."""
    if template == 1:  # distance
        a, b = _range(rng, 0.5, 20.0, rng.choice([0.5, 1.0, 2.0]))
        where = f"trip_distance BETWEEN {a} AND {b}"
    elif template == 2:  # fare
        a, b = _range(rng, 5.0, 60.0, rng.choice([2.0, 5.0]))
        where = f"fare BETWEEN {a} AND {b}"
    elif template == 3:  # duration
        a, b = _range(rng, 3.0, 60.0, rng.choice([2.0, 5.0]))
        where = f"duration_min BETWEEN {a} AND {b}"
    elif template == 4:  # generous tips
        where = f"tip >= {rng.choice([10, 15, 20, 30])}"
    elif template == 5:  # a pick-up window in one zone
        t0, t1 = _day(rng, rng.choice([7, 14, 30]))
        where = (f"pickup_time >= timestamp '{t0}' AND pickup_time < timestamp '{t1}' "
                 f"AND pickup_zone = {rng.randint(1, 20)}")
    elif template == 6:  # distance and fare together (correlated)
        a, b = _range(rng, 1.0, 15.0, 2.0)
        where = f"trip_distance BETWEEN {a} AND {b} AND fare >= {round(3 + 2.5 * b + rng.uniform(5, 15), 1)}"
    elif template == 7:  # drop-off window and zones
        t0, t1 = _day(rng, rng.choice([3, 7]))
        z = rng.randint(1, TAXI_ZONES - 10)
        where = (f"dropoff_time >= timestamp '{t0}' AND dropoff_time < timestamp '{t1}' "
                 f"AND dropoff_zone BETWEEN {z} AND {z + 9}")
    elif template == 8:  # outliers: flat fares, stalled meters
        where = rng.choice([f"trip_distance < 0.2 AND fare > {rng.choice([40, 60, 80])}",
                            f"duration_min > {rng.choice([240, 300, 600])}"])
    elif template == 9:  # long trips with big tips and several passengers
        where = f"trip_distance > {rng.choice([10, 15, 20])} AND tip > {rng.choice([5, 8])} AND passenger_count >= 2"
    elif template in TAXI_TOP_K:
        return taxi_top_k_query(template, rng)
    else:
        raise ValueError(f"taxi template must be 1..{TAXI_TOP_K[-1]}, got {template}")
    return _TAXI_SELECT + where


def taxi_top_k_query(template: int, rng: random.Random) -> str:
    """Top-k templates (the Snowflake seed §5), ordered totally (``trip_id`` breaks ties) so that
    every layout returns the same rows: the latest trips, the largest fares, the first trips
    since a moment (a filter whole files satisfy), a day's first trips (a filter no file
    satisfies whole: nothing to prove a boundary with)."""
    cols = "SELECT trip_id, pickup_time, pickup_zone, trip_distance, fare FROM trips "
    if template == 10:
        return f"{cols}ORDER BY pickup_time DESC, trip_id LIMIT {rng.choice([20, 50, 100, 500])}"
    if template == 11:
        return f"{cols}ORDER BY fare DESC, trip_id LIMIT {rng.choice([5, 10, 20, 50])}"
    if template == 12:
        t0, _ = _day(rng, 1)
        return f"{cols}WHERE pickup_time >= timestamp '{t0}' ORDER BY pickup_time, trip_id LIMIT 100"
    t0, t1 = _day(rng, 1)
    return f"{cols}WHERE pickup_time >= timestamp '{t0}' AND pickup_time < timestamp '{t1}' " \
           "ORDER BY pickup_time, trip_id LIMIT 100"


TAXI_TEMPLATES = tuple(range(1, 10))
TAXI_TOP_K = (10, 11, 12, 13)  # only when named (``--templates``)


def taxi_split(per_template: int, seed: int, templates: list[int] | None = None) -> Split:
    queries = []
    for t in templates or TAXI_TEMPLATES:
        rng = random.Random(f"taxi-{seed}-{t}")
        queries += [(t, taxi_query(t, rng)) for _ in range(per_template)]
    return split_workload(queries, seed)


_STAR_SELECT = "SELECT count(*) AS sales, sum(f.quantity) AS units, sum(f.amount) AS revenue FROM sales f "
_STAR_JOIN = {
    "d": "JOIN dates d ON f.date_key = d.date_key ",
    "s": "JOIN stores s ON f.store_key = s.store_key ",
    "r": "JOIN regions r ON s.region_key = r.region_key ",
    "c": "JOIN customers c ON f.customer_key = c.customer_key ",
    "p": "JOIN products p ON f.product_key = p.product_key ",
}


def star_query(template: int, rng: random.Random, namespace: str | None = None,
               brands: int = STAR_BRANDS_PER_CATEGORY) -> str:
    """One query of star template 1..10: dimension attributes only, joined to the fact (tables
    qualified with ``namespace`` when given; ``brands`` per category, as generated)."""
    def q(s: str) -> str:
        return "'" + s + "'"

    region = rng.randrange(len(STAR_REGIONS))
    category = rng.randrange(len(STAR_CATEGORIES))
    brand = star_brand(category, rng.randrange(brands))
    year = STAR_START.year + rng.randrange(STAR_DAYS // 366 + 1)
    year = min(year, STAR_START.year + 2)
    if template == 1:  # a brand
        joins, where = "p", f"p.p_brand = {q(brand)}"
    elif template == 2:  # a month of a year
        joins, where = "d", f"d.d_year = {year} AND d.d_month = {rng.randint(1, 12)}"
    elif template == 3:  # a region (multi-hop: sales → stores → regions)
        joins, where = "sr", f"r.r_name = {q(STAR_REGIONS[region])}"
    elif template == 4:  # a customer segment in a region
        joins, where = "c", f"c.c_region_key = {region + 1} AND c.c_segment = {q(rng.choice(STAR_SEGMENTS))}"
    elif template == 5:  # a category in a quarter
        joins, where = "pd", (f"p.p_category = {q(STAR_CATEGORIES[category])} AND d.d_year = {year} "
                              f"AND d.d_quarter = {rng.randint(1, 4)}")
    elif template == 6:  # a city
        joins, where = "s", f"s.s_city = {q(star_city(region, rng.randrange(STAR_CITIES_PER_REGION)))}"
    elif template == 7:  # a week
        d0 = STAR_START + dt.timedelta(days=rng.randrange(STAR_DAYS - 7))
        joins, where = "d", f"d.d_date BETWEEN date '{d0}' AND date '{d0 + dt.timedelta(days=6)}'"
    elif template == 8:  # a brand in a region
        joins, where = "psr", f"p.p_brand = {q(brand)} AND r.r_name = {q(STAR_REGIONS[region])}"
    elif template == 9:  # a segment and an age band in a year
        joins, where = "cd", (f"c.c_segment = {q(rng.choice(STAR_SEGMENTS))} AND "
                              f"c.c_age_band = {q(rng.choice(STAR_AGE_BANDS))} AND d.d_year = {year}")
    elif template == 10:  # expensive products of a category
        joins, where = "p", (f"p.p_category = {q(STAR_CATEGORIES[category])} AND "
                             f"p.p_price > {rng.choice([100, 150, 200])}")
    else:
        raise ValueError(f"star template must be 1..{len(STAR_TEMPLATES)}, got {template}")
    sql = _STAR_SELECT + "".join(_STAR_JOIN[j] for j in joins) + "WHERE " + where
    if namespace:
        for t in ("sales", "dates", "stores", "regions", "customers", "products"):
            sql = sql.replace(f" {t} ", f" {namespace}.{t} ")
    return sql


STAR_TEMPLATES = tuple(range(1, 11))


def star_split(per_template: int, seed: int, templates: list[int] | None = None, namespace: str | None = None,
               keys: str = "attribute") -> Split:
    """``keys``: the dataset variant (``datasets.STAR_KEYS``) the brands are drawn for."""
    brands = star_brands_per_category(keys)
    queries = []
    for t in templates or STAR_TEMPLATES:
        rng = random.Random(f"star-{seed}-{t}")
        queries += [(t, star_query(t, rng, namespace, brands)) for _ in range(per_template)]
    return split_workload(queries, seed)


# Iceberg's Spark z-order (SparkZOrderUDF) refuses DECIMAL, and turns DATE into the bytes of
# CAST(date AS BIGINT), which Spark evaluates to NULL: every row gets the same z-value for a
# DATE column, so z-ordering on dates clusters nothing (checked on TPC-H SF 0.1: each of the 121
# files of zorder(l_shipdate, l_commitdate, l_receiptdate) spans 1992-01 to 1998-11).
ZORDER_UNUSABLE = ("decimal", "date")


def filtered_columns(spark, namespace: str, queries: list[tuple[int, str]], table: str,
                     top: int = 3, exclude_types: tuple[str, ...] = ZORDER_UNUSABLE) -> list[str]:
    """The ``top`` columns of ``namespace.table`` named in the most queries' single-table
    predicates (join filters not counted), skipping columns whose Spark type starts with one of
    ``exclude_types`` (by default the types Iceberg's Spark z-order cannot use)."""
    from sqlglot import exp

    from ..spark.rewrite import identifier_fields, namespace_schemas
    from ..workload import parse_workload

    schemas = namespace_schemas(spark, f"{namespace}.x")
    pks = {n: identifier_fields(spark, n) for n in schemas}
    wl = parse_workload([qualify(s, namespace) for _, s in queries], schemas,
                        primary_keys={k: v for k, v in pks.items() if v})
    types = {f.name: f.dataType.simpleString() for f in spark.table(f"{namespace}.{table}").schema.fields}
    counts: Counter = Counter()
    key = next((k for k in schemas if k.split(".")[-1] == table), None)
    for q in wl.queries:
        tf = q.filters.get(key) if key is not None else None
        if tf is None or tf.is_true_expr():
            continue
        cols = {c.name for c in tf.expr.find_all(exp.Column)} & set(types)
        counts.update(c for c in cols if not types[c].startswith(exclude_types))
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
