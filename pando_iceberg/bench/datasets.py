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
TAXI_START = dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
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
    return max(1000, int(round(TAXI_ROWS_PER_SF * sf)))


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
