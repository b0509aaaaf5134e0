"""The benchmark's datasets.

- ``tpch``: TPC-H loaded by :func:`pando_iceberg.tpch.load_tpch` into namespace ``tpch_sf<SF>``
  (its own namespace per scale factor, so runs at different scales never mix); lineitem and
  orders are the tables laid out.
- ``taxi``: one table ``trips`` in the spirit of the paper's NYC-taxi example (§2): distance,
  duration, fare and tip are correlated (fare ≈ base + distance and time charges, duration ≈
  distance / a speed that depends on the hour, tip ≈ a share of the fare for card payments),
  zones are skewed and drop-off zones lie near pick-up zones in proportion to the distance,
  with ~1% outliers (flat fares over zero distance, stalled meters, huge tips). Rows arrive in
  drop-off order, as a feed would deliver them. Generated with numpy from a seed (identical for
  the same seed and size) and appended to Iceberg with pyiceberg in Arrow batches.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from ..spark.session import refresh_table

#: Rows of the taxi table per unit of scale: like TPC-H lineitem (6M rows at SF 1).
TAXI_ROWS_PER_SF = 6_000_000
TAXI_ZONES = 265
TAXI_START = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
TAXI_DAYS = 365

TAXI_SCHEMA = pa.schema([
    pa.field("trip_id", pa.int64(), nullable=False),
    pa.field("pickup_time", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("dropoff_time", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("pickup_zone", pa.int32(), nullable=False),
    pa.field("dropoff_zone", pa.int32(), nullable=False),
    pa.field("passenger_count", pa.int32(), nullable=False),
    pa.field("trip_distance", pa.float64(), nullable=False),
    pa.field("duration_min", pa.float64(), nullable=False),
    pa.field("fare", pa.float64(), nullable=False),
    pa.field("tip", pa.float64(), nullable=False),
])


def dataset_namespace(dataset: str, sf: float) -> str:
    """``tpch_sf0_1``, ``taxi_sf1``: one namespace per dataset and scale."""
    text = str(int(sf)) if float(sf).is_integer() else repr(float(sf)).replace(".", "_")
    return f"{dataset}_sf{text}"


def taxi_rows(sf: float) -> int:
    return max(1000, round(TAXI_ROWS_PER_SF * sf))


def generate_taxi(rows: int, seed: int = 0) -> pa.Table:
    """The correlated taxi-like table (vectorized; same seed and size → same rows)."""
    if rows < 1:
        raise ValueError(f"taxi rows must be >= 1, got {rows}")
    rng = np.random.default_rng(seed)
    n = rows
    start_us = int(TAXI_START.timestamp() * 1_000_000)
    pickup = start_us + rng.integers(0, TAXI_DAYS * 86_400, n, dtype=np.int64) * 1_000_000
    hour = (pickup // 3_600_000_000) % 24
    rank = np.arange(1, TAXI_ZONES + 1, dtype=np.float64)
    p = rank ** -1.1
    pickup_zone = rng.choice(TAXI_ZONES, size=n, p=p / p.sum()).astype(np.int32) + 1
    distance = np.clip(rng.lognormal(mean=0.6, sigma=0.8, size=n), 0.1, 60.0)
    hop = np.rint(distance * 3 * rng.standard_normal(n)).astype(np.int64)
    dropoff_zone = ((pickup_zone - 1 + hop) % TAXI_ZONES + 1).astype(np.int32)
    night = (hour < 6) | (hour >= 22)
    rush = ((hour >= 7) & (hour < 10)) | ((hour >= 16) & (hour < 19))
    speed = np.clip(14.0 + 10.0 * night - 5.0 * rush + 3.0 * rng.standard_normal(n), 3.0, 50.0)
    duration = 2.0 + distance / speed * 60.0 + np.abs(rng.normal(0, 1.5, n))
    fare = 3.0 + 2.5 * distance + 0.5 * duration + rng.normal(0, 0.5, n)
    card = rng.random(n) < 0.6
    tip = np.where(card, np.clip(fare * rng.normal(0.18, 0.05, n), 0.0, None), 0.0)
    passengers = rng.choice([1, 1, 1, 1, 2, 2, 3, 4, 5, 6], size=n).astype(np.int32)
    # ~1% outliers, a third of each kind: flat fares over ~zero distance, stalled meters, huge tips.
    kind = np.where(rng.random(n) < 0.01, rng.integers(0, 3, n), -1)
    flat = kind == 0
    distance = np.where(flat, rng.uniform(0.0, 0.2, n), distance)
    fare = np.where(flat, rng.uniform(50.0, 150.0, n), fare)
    duration = np.where(kind == 1, rng.uniform(300.0, 1440.0, n), duration)
    tip = np.where(kind == 2, fare * rng.uniform(1.0, 5.0, n), tip)
    dropoff = pickup + (duration * 60_000_000).astype(np.int64)
    order = np.argsort(dropoff, kind="stable")  # arrival: in drop-off order
    cols = {
        "trip_id": np.arange(n, dtype=np.int64),
        "pickup_time": pickup[order], "dropoff_time": dropoff[order],
        "pickup_zone": pickup_zone[order], "dropoff_zone": dropoff_zone[order],
        "passenger_count": passengers[order],
        "trip_distance": np.round(distance[order], 2), "duration_min": np.round(duration[order], 2),
        "fare": np.round(fare[order], 2), "tip": np.round(tip[order], 2),
    }
    return pa.Table.from_arrays([pa.array(cols[f.name], type=f.type) for f in TAXI_SCHEMA], schema=TAXI_SCHEMA)


def load_taxi(spark, catalog, sf: float, seed: int = 0, namespace: str | None = None,
              batch_rows: int = 1_000_000, progress=lambda m: None) -> str:
    """Create ``<namespace>.trips`` (kept when it already holds the expected rows) and return its name."""
    from pyiceberg.exceptions import NoSuchTableError

    namespace = namespace or dataset_namespace("taxi", sf)
    name = f"{namespace}.trips"
    rows = taxi_rows(sf)
    try:
        table = catalog.load_table(name)
        snap = table.current_snapshot()
        if snap is not None and int(snap.summary.get("total-records", -1)) == rows:
            return name
        catalog.drop_table(name)
    except NoSuchTableError:
        pass
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    progress(f"generating {rows:,} taxi rows (seed {seed}) into {name}")
    data = generate_taxi(rows, seed)
    table = catalog.create_table(name, schema=TAXI_SCHEMA, properties={"format-version": "2"})
    with table.transaction() as tx:
        for batch in data.to_batches(max_chunksize=batch_rows):
            tx.append(pa.Table.from_batches([batch], schema=TAXI_SCHEMA))
    spark.sql(f"ALTER TABLE {name} SET IDENTIFIER FIELDS trip_id")
    refresh_table(spark, name)
    return name


# ---- star: a retail star schema with no declared keys ------------------------------
#
# ``sales`` (the fact, in arrival = date order) with four dimensions and a sub-dimension, all
# created like a plain CTAS (no Iceberg identifier fields): ``dates`` (3 years of days, key
# yyyymmdd), ``stores`` (cities in regions; ``region_key`` → ``regions``, a multi-hop chain),
# ``customers`` (a home region, a segment, an age band), ``products`` (brands inside
# categories, price bands). Correlations: a sale's customer lives in the store's region, brands
# sell mostly in their home region, categories are seasonal. Surrogate keys are assigned in load
# order (stores and customers grouped by region, products by category), as a dimension loader
# typically does.

STAR_ROWS_PER_SF = 3_000_000
STAR_START = dt.date(2022, 1, 1)
STAR_DAYS = 1096
STAR_REGIONS = ("NORTH", "SOUTH", "EAST", "WEST", "CENTRAL")
STAR_CONTINENTS = ("EUROPE", "EUROPE", "ASIA", "AMERICA", "AMERICA")
STAR_STORES_PER_REGION = 40
STAR_CITIES_PER_REGION = 8
STAR_SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
STAR_AGE_BANDS = ("18-25", "26-35", "36-50", "51-65", "65+")
STAR_CATEGORIES = ("BOOKS", "ELECTRONICS", "GARDEN", "GROCERY", "HOME", "SPORTS", "TOYS", "CLOTHING")
STAR_BRANDS_PER_CATEGORY = 8
STAR_PRODUCTS_PER_BRAND = 25
STAR_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def star_rows(sf: float) -> int:
    return max(1000, round(STAR_ROWS_PER_SF * sf))


def star_brand(category: int, brand: int) -> str:
    """The brand name of brand ``brand`` (0-based) of category ``category`` (0-based)."""
    return f"Brand#{category + 1}{brand + 1}"


def star_city(region: int, city: int) -> str:
    return f"{STAR_REGIONS[region].title()}-City-{city + 1}"


def generate_star(rows: int, seed: int = 0) -> dict[str, pa.Table]:
    """The star schema's tables by name (vectorized; same seed and size → same rows)."""
    if rows < 1:
        raise ValueError(f"star fact rows must be >= 1, got {rows}")
    rng = np.random.default_rng(seed)
    n_regions = len(STAR_REGIONS)
    regions = pa.table({"region_key": pa.array(np.arange(1, n_regions + 1), pa.int32()),
                        "r_name": list(STAR_REGIONS), "r_continent": list(STAR_CONTINENTS)})
    # dates
    days = np.arange(STAR_DAYS)
    d = np.datetime64(STAR_START.isoformat(), "D") + days
    years = d.astype("datetime64[Y]").astype(np.int64) + 1970
    months = d.astype("datetime64[M]").astype(np.int64) % 12 + 1
    dom = (d - d.astype("datetime64[M]")).astype(np.int64) + 1
    date_key = (years * 10000 + months * 100 + dom).astype(np.int32)
    dates = pa.table({"date_key": pa.array(date_key, pa.int32()), "d_date": pa.array(d, pa.date32()),
                      "d_year": pa.array(years, pa.int32()), "d_month": pa.array(months, pa.int32()),
                      "d_monthname": pa.array(np.asarray(STAR_MONTHS, dtype=object)[months - 1]),
                      "d_quarter": pa.array((months - 1) // 3 + 1, pa.int32()),
                      "d_dayofweek": pa.array((days + STAR_START.weekday()) % 7 + 1, pa.int32())})
    # stores: grouped by region (keys in load order)
    n_stores = n_regions * STAR_STORES_PER_REGION
    s_region = np.repeat(np.arange(n_regions), STAR_STORES_PER_REGION)
    s_city_no = rng.integers(0, STAR_CITIES_PER_REGION, n_stores)
    cities = np.asarray([star_city(r, c) for r in range(n_regions) for c in range(STAR_CITIES_PER_REGION)],
                        dtype=object)
    stores = pa.table({"store_key": pa.array(np.arange(1, n_stores + 1), pa.int32()),
                       "region_key": pa.array(s_region + 1, pa.int32()),
                       "s_city": pa.array(cities[s_region * STAR_CITIES_PER_REGION + s_city_no]),
                       "s_size": pa.array(np.asarray(["S", "M", "L"], dtype=object)[rng.integers(0, 3, n_stores)])})
    # customers: a home region each, grouped by region
    n_customers = max(n_regions * 20, rows // 60)
    c_region = np.sort(rng.integers(0, n_regions, n_customers))
    segment_of_region = rng.dirichlet(np.ones(len(STAR_SEGMENTS)), n_regions)  # segments vary by region
    u = rng.random(n_customers)[:, None]
    c_segment = (u > np.cumsum(segment_of_region[c_region], axis=1)).sum(axis=1).clip(0, len(STAR_SEGMENTS) - 1)
    customers = pa.table({"customer_key": pa.array(np.arange(1, n_customers + 1), pa.int32()),
                          "c_region_key": pa.array(c_region + 1, pa.int32()),
                          "c_segment": pa.array(np.asarray(STAR_SEGMENTS, dtype=object)[c_segment]),
                          "c_age_band": pa.array(np.asarray(STAR_AGE_BANDS, dtype=object)[
                              rng.integers(0, len(STAR_AGE_BANDS), n_customers)])})
    # products: brands inside categories, grouped by category
    n_cat = len(STAR_CATEGORIES)
    per_cat = STAR_BRANDS_PER_CATEGORY * STAR_PRODUCTS_PER_BRAND
    n_products = n_cat * per_cat
    p_cat = np.repeat(np.arange(n_cat), per_cat)
    p_brand = np.tile(np.repeat(np.arange(STAR_BRANDS_PER_CATEGORY), STAR_PRODUCTS_PER_BRAND), n_cat)
    brands = np.asarray([star_brand(c, b) for c in range(n_cat) for b in range(STAR_BRANDS_PER_CATEGORY)], dtype=object)
    price = np.round(rng.lognormal(3.0, 0.6, n_products) * (1 + p_cat * 0.3), 2)
    products = pa.table({"product_key": pa.array(np.arange(1, n_products + 1), pa.int32()),
                         "p_brand": pa.array(brands[p_cat * STAR_BRANDS_PER_CATEGORY + p_brand]),
                         "p_category": pa.array(np.asarray(STAR_CATEGORIES, dtype=object)[p_cat]),
                         "p_price": pa.array(price, pa.float64())})
    # the fact, in date order
    n = rows
    day = np.sort(rng.integers(0, STAR_DAYS, n))
    store = rng.integers(0, n_stores, n)
    region = s_region[store]
    # a customer of the store's region (customers are grouped by region: a range per region)
    starts = np.searchsorted(c_region, np.arange(n_regions))
    ends = np.searchsorted(c_region, np.arange(n_regions), side="right")
    customer = starts[region] + (rng.random(n) * np.maximum(1, ends[region] - starts[region])).astype(np.int64)
    customer = np.minimum(customer, n_customers - 1)
    # categories are seasonal (month), brands sell mostly in their home region
    month = months[day] - 1
    season = 1.0 + 0.8 * np.sin((np.arange(12)[:, None] / 12.0 + np.arange(n_cat)[None, :] / n_cat) * 2 * np.pi)
    cat_p = season / season.sum(axis=1, keepdims=True)
    category = (rng.random(n)[:, None] > np.cumsum(cat_p[month], axis=1)).sum(axis=1).clip(0, n_cat - 1)
    home = rng.random(n) < 0.7
    brand = np.where(home, (region * 3 + rng.integers(0, 3, n)) % STAR_BRANDS_PER_CATEGORY,
                     rng.integers(0, STAR_BRANDS_PER_CATEGORY, n))
    product = category * per_cat + brand * STAR_PRODUCTS_PER_BRAND + rng.integers(0, STAR_PRODUCTS_PER_BRAND, n)
    quantity = rng.integers(1, 6, n).astype(np.int32)
    amount = np.round(quantity * price[product] * rng.uniform(0.8, 1.0, n), 2)
    sales = pa.table({"sale_id": pa.array(np.arange(n, dtype=np.int64)),
                      "date_key": pa.array(date_key[day], pa.int32()),
                      "store_key": pa.array(store + 1, pa.int32()),
                      "customer_key": pa.array(customer + 1, pa.int32()),
                      "product_key": pa.array(product + 1, pa.int32()),
                      "quantity": pa.array(quantity, pa.int32()),
                      "amount": pa.array(amount, pa.float64())})
    out = {"sales": sales, "dates": dates, "stores": stores, "regions": regions, "customers": customers,
           "products": products}
    # Keys are NOT NULL (so a user may declare them as identifier fields); none is declared here.
    return {name: t.cast(pa.schema([f.with_nullable(not f.name.endswith("_key")) for f in t.schema]))
            for name, t in out.items()}


def load_star(spark, catalog, sf: float, seed: int = 0, namespace: str | None = None,
              batch_rows: int = 100_000, progress=lambda m: None) -> str:
    """Create the star schema's tables in ``namespace`` (kept when the fact holds the expected
    rows), with no identifier fields declared; returns the namespace. Each ``batch_rows`` rows
    are one data file (the fact arrives in files of ~b = 100,000 rows, as a feed writes them)."""
    from pyiceberg.exceptions import NoSuchTableError

    namespace = namespace or dataset_namespace("star", sf)
    rows = star_rows(sf)
    try:
        snap = catalog.load_table(f"{namespace}.sales").current_snapshot()
        if snap is not None and int(snap.summary.get("total-records", -1)) == rows:
            return namespace
    except NoSuchTableError:
        pass
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    progress(f"generating the star schema ({rows:,} fact rows, seed {seed}) into {namespace}")
    for name, data in generate_star(rows, seed).items():
        full = f"{namespace}.{name}"
        try:
            catalog.drop_table(full)
        except NoSuchTableError:
            pass
        table = catalog.create_table(full, schema=data.schema, properties={"format-version": "2"})
        with table.transaction() as tx:
            for batch in data.to_batches(max_chunksize=batch_rows):
                tx.append(pa.Table.from_batches([batch], schema=data.schema))
        refresh_table(spark, full)
    return namespace
