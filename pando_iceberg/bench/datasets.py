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
#
# The ``load-order`` variant (``generate_star(keys="load-order")``, ``pando bench --dataset star
# --star-keys load-order``): 200 brands (25 per category, 8 products each), and the surrogate keys
# of stores, customers and products a random permutation of the load order, so that a key says
# nothing about any attribute (a brand's products, a region's customers are spread over the whole
# key range) — what a loader assigning keys as rows arrive gives. Dates keep their yyyymmdd keys.

STAR_KEYS = ("attribute", "load-order")
STAR_LOAD_ORDER_BRANDS_PER_CATEGORY = 25
STAR_LOAD_ORDER_PRODUCTS_PER_BRAND = 8
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


def star_brands_per_category(keys: str = "attribute") -> int:
    """Brands per category of the star variant ``keys`` (``STAR_KEYS``)."""
    return STAR_LOAD_ORDER_BRANDS_PER_CATEGORY if keys == "load-order" else STAR_BRANDS_PER_CATEGORY


def generate_star(rows: int, seed: int = 0, keys: str = "attribute") -> dict[str, pa.Table]:
    """The star schema's tables by name (vectorized; same seed and size → same rows). ``keys``:
    "attribute" (keys grouped by region / category, the default) or "load-order" (keys
    independent of every attribute, 200 brands; see above)."""
    if rows < 1:
        raise ValueError(f"star fact rows must be >= 1, got {rows}")
    if keys not in STAR_KEYS:
        raise ValueError(f"star keys must be one of {', '.join(STAR_KEYS)}, got {keys!r}")
    n_brands = star_brands_per_category(keys)
    per_brand = STAR_LOAD_ORDER_PRODUCTS_PER_BRAND if keys == "load-order" else STAR_PRODUCTS_PER_BRAND
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
    per_cat = n_brands * per_brand
    n_products = n_cat * per_cat
    p_cat = np.repeat(np.arange(n_cat), per_cat)
    p_brand = np.tile(np.repeat(np.arange(n_brands), per_brand), n_cat)
    brands = np.asarray([star_brand(c, b) for c in range(n_cat) for b in range(n_brands)], dtype=object)
    price = np.round(rng.lognormal(3.0, 0.6, n_products) * (1 + p_cat * 0.3), 2)
    products = pa.table({"product_key": pa.array(np.arange(1, n_products + 1), pa.int32()),
                         "p_brand": pa.array(brands[p_cat * n_brands + p_brand]),
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
    span = max(3, n_brands // n_regions)  # the home brands of a region
    brand = np.where(home, (region * span + rng.integers(0, span, n)) % n_brands, rng.integers(0, n_brands, n))
    product = category * per_cat + brand * per_brand + rng.integers(0, per_brand, n)
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
    if keys == "load-order":
        for dim, key in (("stores", "store_key"), ("customers", "customer_key"), ("products", "product_key")):
            out[dim], out["sales"] = _load_order_keys(out[dim], key, out["sales"], rng)
    # Keys are NOT NULL (so a user may declare them as identifier fields); none is declared here.
    return {name: t.cast(pa.schema([f.with_nullable(not f.name.endswith("_key")) for f in t.schema]))
            for name, t in out.items()}


def _load_order_keys(dim: pa.Table, key: str, fact: pa.Table, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """``dim`` re-keyed by a random permutation (its rows in the new keys' order, as loaded), and
    ``fact`` with the foreign key ``key`` mapped to the new keys."""
    old = dim.column(key).to_numpy()  # 1..n
    new_of_old = rng.permutation(len(old)).astype(np.int32) + 1
    rekeyed = dim.set_column(dim.schema.get_field_index(key), key, pa.array(new_of_old[old - 1], pa.int32()))
    rekeyed = rekeyed.take(np.argsort(new_of_old[old - 1]))
    fk = fact.column(key).to_numpy()
    fact = fact.set_column(fact.schema.get_field_index(key), key, pa.array(new_of_old[fk - 1], pa.int32()))
    return rekeyed, fact


def star_namespace(sf: float, keys: str = "attribute") -> str:
    """``star_sf1``; ``star_load_order_sf1`` for the load-order variant (its own tables)."""
    return dataset_namespace("star_load_order" if keys == "load-order" else "star", sf)


def load_star(spark, catalog, sf: float, seed: int = 0, namespace: str | None = None,
              batch_rows: int = 100_000, progress=lambda m: None, keys: str = "attribute") -> str:
    """Create the star schema's tables in ``namespace`` (kept when the fact holds the expected
    rows), with no identifier fields declared; returns the namespace. Each ``batch_rows`` rows
    are one data file (the fact arrives in files of ~b = 100,000 rows, as a feed writes them)."""
    from pyiceberg.exceptions import NoSuchTableError

    namespace = namespace or star_namespace(sf, keys)
    rows = star_rows(sf)
    try:
        snap = catalog.load_table(f"{namespace}.sales").current_snapshot()
        if snap is not None and int(snap.summary.get("total-records", -1)) == rows:
            return namespace
    except NoSuchTableError:
        pass
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    progress(f"generating the star schema ({rows:,} fact rows, seed {seed}) into {namespace}")
    write_tables(spark, catalog, namespace, generate_star(rows, seed, keys), batch_rows)
    return namespace


def write_tables(spark, catalog, namespace: str, tables: dict[str, pa.Table], file_rows: int) -> None:
    """Each table (re)created in ``namespace`` and appended in one commit, one data file per
    ``file_rows`` rows in the order given (as a feed writes them); Spark's cache refreshed."""
    from pyiceberg.exceptions import NoSuchTableError

    for name, data in tables.items():
        full = f"{namespace}.{name}"
        try:
            catalog.drop_table(full)
        except NoSuchTableError:
            pass
        table = catalog.create_table(full, schema=data.schema, properties={"format-version": "2"})
        with table.transaction() as tx:
            for lo in range(0, data.num_rows, file_rows):  # slices, not batches: a CSV read's are smaller
                tx.append(data.slice(lo, file_rows))
        refresh_table(spark, full)
