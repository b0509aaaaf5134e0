"""Data and query grammar of the grammar-based differential fuzzer (tests/reliability/test_fuzz.py).

The data (one per run, from ``data_seed``): a star schema — the fact ``sales`` and the dimensions
``date_dim``, ``store`` and ``product`` (surrogate keys in load order; NULL and dangling foreign
keys) — and a float/timestamp-heavy single table ``taxi``. Columns cover every width Iceberg
stores (INT, BIGINT, FLOAT, DOUBLE, DECIMAL; TINYINT and SMALLINT exist only as casts and in the
temporary views, Iceberg widens them to INT), DATE, TIMESTAMP (LTZ), TIMESTAMP_NTZ and STRING,
with NULLs, NaN, ±Inf, ±0.0, values at the integer limits (arithmetic overflows), skew, and
strings that parse as numbers, dates and timestamps in odd forms.

The queries: aggregates (count, sum, min, max, an order-insensitive ``sum(hash(...))``, small
GROUP BY results) over random FROM clauses — chains of 1..4 relations with INNER, LEFT, RIGHT,
FULL, CROSS and comma joins, parenthesised sub-joins, base tables, temporary views, CTEs and
derived tables — and predicates in ON or WHERE: AND/OR/NOT groups, comparisons with typed
literals (Y, S, L, F, D, BD, DATE, TIMESTAMP, TIMESTAMP_NTZ, TIMESTAMP_LTZ), casts to every
numeric width, overflowing arithmetic, string→number/date/timestamp parsing, zone offsets,
NTZ vs LTZ, IN lists, BETWEEN, LIKE, IS [NOT] NULL and IN (SELECT ...) semi-joins.

Everything is drawn from ``random.Random(seed)``: a seed reproduces its query and its session
settings exactly (the data come from ``data_seed``, fixed per run).
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NS = "fuzz"
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
TS0 = dt.datetime(2025, 6, 1)  # data timestamps span 2025-06-01 .. 2027-06-01
TS_SPAN_S = 2 * 365 * 86400
ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata", "+05:30", "-08:00", "Europe/Berlin"]
ODD_STRINGS = ["12", " 12 ", "0.2f", "0.2d", "NaN", "Infinity", "-Infinity", "inf", "1e3", "2026-12", "2026",
               "2026-01-17", " 2026-01-17 ", "2026-01-17 02:00:00+05:00", "2026-01-17T02:00:00Z", "2026-1-7",
               "-0", "0x1F", "", "abc", "a%b", "é", "9999999999", "2147483648", "-2147483649", "1.5", "+7",
               "2026-01-17 02:00:00 UTC", "12:30", "1,5", "true"]
BRANDS = ["acme", "Acme", "bolt", "bolt_x", "cobalt", "delta", "é-brand", "zeta", ""]
REGIONS = ["north", "south", "east", "west", "North", "n%", "é"]
VENDORS = ["CMT", "VTS", "DDS", "cmt", " VTS", ""]


# ---------------------------------------------------------------- data

def _mask(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
    return rng.random(n) < p


def _floats(rng: np.random.Generator, n: int, base: np.ndarray, p_special: float) -> np.ndarray:
    v = base.astype(np.float64)
    special = rng.random(n) < p_special
    v[special] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.81, 0.2, 1.815], special.sum())
    return v


def _ts_micros(rng: np.random.Generator, n: int, grain: int) -> np.ndarray:
    secs = rng.integers(0, TS_SPAN_S, n) // grain * grain
    return (int(TS0.replace(tzinfo=dt.UTC).timestamp()) + secs) * 1_000_000


def _decimal(values: np.ndarray, scale: int, mask: np.ndarray, t: pa.DataType) -> pa.Array:
    return pa.array([None if m else Decimal(int(x)).scaleb(-scale) for x, m in zip(values, mask)], t)


def star_tables(seed: int, fact_rows: int) -> dict[str, pa.Table]:
    """The star schema: sales (fact), date_dim, store, product."""
    rng = np.random.default_rng(seed)
    n_date, n_store, n_prod = 730, 60, 300
    date_key = np.arange(1, n_date + 1, dtype=np.int32)
    d_date = (np.datetime64("2025-06-01") + np.arange(n_date)).astype("datetime64[D]")
    date_dim = pa.table({
        "date_key": pa.array(date_key, pa.int32()),
        "d_date": pa.array(d_date, pa.date32()),
        "d_year": pa.array(d_date.astype("datetime64[Y]").astype(int) + 1970, pa.int32()),
        "d_month": pa.array(d_date.astype("datetime64[M]").astype(int) % 12 + 1, pa.int32()),
        "d_ts": pa.array(d_date.astype("datetime64[us]") + np.timedelta64(3, "h"), pa.timestamp("us")),
        "d_label": pa.array([str(x) if i % 7 else None for i, x in enumerate(d_date)], pa.string()),
    })
    store = pa.table({
        "store_key": pa.array(np.arange(1, n_store + 1), pa.int32()),
        "s_sqft": pa.array(np.where(rng.random(n_store) < 0.2, rng.integers(32000, 70000, n_store),
                                    rng.integers(200, 30000, n_store)), pa.int32(), mask=_mask(rng, n_store, 0.05)),
        "s_region": pa.array(rng.choice(REGIONS, n_store), pa.string(), mask=_mask(rng, n_store, 0.05)),
        "s_rate": pa.array(_floats(rng, n_store, rng.integers(0, 100, n_store) / 10, 0.1), pa.float64()),
        "s_open": pa.array(_ts_micros(rng, n_store, 3600), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
    })
    product = pa.table({
        "product_key": pa.array(np.arange(1, n_prod + 1), pa.int32()),
        "p_launch_year": pa.array(rng.integers(1990, 2027, n_prod), pa.int32(), mask=_mask(rng, n_prod, 0.05)),
        "p_brand": pa.array(rng.choice(BRANDS, n_prod), pa.string(), mask=_mask(rng, n_prod, 0.05)),
        "p_weight": pa.array(_floats(rng, n_prod, rng.integers(0, 400, n_prod) / 100, 0.08), pa.float32()),
        "p_price": _decimal(rng.integers(0, 100000, n_prod), 2, _mask(rng, n_prod, 0.03), pa.decimal128(9, 2)),
    })
    n = fact_rows

    def fk(count: int, p_null: float, skew: bool) -> pa.Array:
        k = (rng.zipf(1.3, n) - 1) % count + 1 if skew else rng.integers(1, count + 1, n)
        dangling = rng.random(n) < 0.01
        k = np.where(dangling, count + rng.integers(1, 50, n), k)
        return pa.array(k.astype(np.int32), pa.int32(), mask=_mask(rng, n, p_null))

    qty = (rng.zipf(1.5, n) % 100).astype(np.int64)
    edge = rng.random(n) < 0.01
    qty[edge] = rng.choice([INT32[1], INT32[1] - 1, INT32[0], INT32[0] + 1, 65536, 46341], edge.sum())
    amount = rng.integers(-1000, 10**7, n)
    edge = rng.random(n) < 0.01
    amount[edge] = rng.choice([INT64[1], INT64[1] - 7, INT64[0], 2**32, 2**31, 3037000500], edge.sum())
    small = rng.integers(-40000, 70000, n)
    small = np.where(rng.random(n) < 0.3, rng.integers(-130, 130, n), small)
    price = _floats(rng, n, rng.integers(0, 4000, n) / 100, 0.04).astype(np.float32)
    discount = _floats(rng, n, rng.integers(0, 50, n) / 100, 0.04)
    note_pool = ODD_STRINGS + [f"n{i}" for i in range(30)]
    sold = _ts_micros(rng, n, int(rng.choice([1, 60])))
    sales = pa.table({
        "sale_id": pa.array(np.arange(1, n + 1), pa.int64()),
        "date_key": fk(n_date, 0.02, False),
        "store_key": fk(n_store, 0.03, True),
        "product_key": fk(n_prod, 0.02, True),
        "qty": pa.array(qty.astype(np.int32), pa.int32(), mask=_mask(rng, n, 0.02)),
        "amount": pa.array(amount, pa.int64(), mask=_mask(rng, n, 0.02)),
        "small": pa.array(small.astype(np.int32), pa.int32(), mask=_mask(rng, n, 0.02)),
        "price": pa.array(price, pa.float32(), mask=_mask(rng, n, 0.02)),
        "discount": pa.array(discount, pa.float64(), mask=_mask(rng, n, 0.02)),
        "cost": _decimal(rng.integers(-10**6, 10**8, n), 2, _mask(rng, n, 0.02), pa.decimal128(12, 2)),
        "sold_date": pa.array((sold // 86_400_000_000).astype(np.int32), pa.int32()).cast(pa.date32()),
        "sold_ts": pa.array(sold, pa.int64(), mask=_mask(rng, n, 0.02)).cast(pa.timestamp("us", tz="UTC")),
        "sold_ntz": pa.array(sold + rng.integers(-5, 5, n) * 3_600_000_000, pa.int64(),
                             mask=_mask(rng, n, 0.02)).cast(pa.timestamp("us")),
        "note": pa.array(rng.choice(note_pool, n), pa.string(), mask=_mask(rng, n, 0.05)),
    })
    return {"sales": sales, "date_dim": date_dim, "store": store, "product": product}


def taxi_table(seed: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(seed + 7)
    n = rows
    pickup = _ts_micros(rng, n, 1)
    dist = _floats(rng, n, rng.gamma(1.5, 1.5, n).round(2), 0.03).astype(np.float32)
    fare = _floats(rng, n, (rng.gamma(2, 8, n)).round(2), 0.03)
    return pa.table({
        "trip_id": pa.array(np.arange(1, n + 1), pa.int64()),
        "pickup_ts": pa.array(pickup, pa.int64(), mask=_mask(rng, n, 0.02)).cast(pa.timestamp("us")),
        "dropoff_ts": pa.array(pickup + rng.integers(60, 7200, n) * 1_000_000, pa.int64(),
                               mask=_mask(rng, n, 0.02)).cast(pa.timestamp("us", tz="UTC")),
        "trip_distance": pa.array(dist, pa.float32(), mask=_mask(rng, n, 0.02)),
        "fare": pa.array(fare, pa.float64(), mask=_mask(rng, n, 0.02)),
        "tip": pa.array(_floats(rng, n, rng.integers(0, 2000, n) / 100, 0.05), pa.float64()),
        "passengers": pa.array(rng.choice([0, 1, 1, 1, 2, 3, 5, 6, 200, 300], n).astype(np.int32), pa.int32(),
                               mask=_mask(rng, n, 0.03)),
        "zone": pa.array(rng.integers(1, 265, n).astype(np.int32), pa.int32()),
        "vendor": pa.array(rng.choice(VENDORS, n), pa.string(), mask=_mask(rng, n, 0.03)),
        "total": _decimal(rng.integers(0, 30000, n), 2, _mask(rng, n, 0.02), pa.decimal128(10, 2)),
        "note": pa.array(rng.choice(ODD_STRINGS, n), pa.string(), mask=_mask(rng, n, 0.1)),
    })


# Column kinds of each table: i (32-bit integer), l (64-bit), f (FLOAT), d (DOUBLE), dec, s (string),
# date, ts (TIMESTAMP, LTZ), ntz (TIMESTAMP_NTZ). The views add the narrow widths (i8, i16).
COLUMNS: dict[str, dict[str, str]] = {
    "sales": {"sale_id": "l", "date_key": "i", "store_key": "i", "product_key": "i", "qty": "i", "amount": "l",
              "small": "i", "price": "f", "discount": "d", "cost": "dec", "sold_date": "date", "sold_ts": "ts",
              "sold_ntz": "ntz", "note": "s"},
    "date_dim": {"date_key": "i", "d_date": "date", "d_year": "i", "d_month": "i", "d_ts": "ntz", "d_label": "s"},
    "store": {"store_key": "i", "s_sqft": "i", "s_region": "s", "s_rate": "d", "s_open": "ts"},
    "product": {"product_key": "i", "p_launch_year": "i", "p_brand": "s", "p_weight": "f", "p_price": "dec"},
    "taxi": {"trip_id": "l", "pickup_ts": "ntz", "dropoff_ts": "ts", "trip_distance": "f", "fare": "d", "tip": "d",
             "passengers": "i", "zone": "i", "vendor": "s", "total": "dec", "note": "s"},
}
# Temporary views over the tables (one per table): narrow integer widths and a derived column.
VIEWS: dict[str, tuple[str, dict[str, str]]] = {
    "sales": ("SELECT *, CAST(qty AS TINYINT) AS qty8, CAST(small AS SMALLINT) AS small16 FROM {t}",
              {"qty8": "i8", "small16": "i16"}),
    "store": ("SELECT *, CAST(s_sqft AS SMALLINT) AS s_sqft16 FROM {t}", {"s_sqft16": "i16"}),
    "taxi": ("SELECT *, CAST(passengers AS TINYINT) AS pass8, trip_distance * 2 AS dist2 FROM {t}",
             {"pass8": "i8", "dist2": "d"}),
    "product": ("SELECT * FROM {t} WHERE p_brand IS NULL OR p_brand <> 'zeta'", {}),
    "date_dim": ("SELECT * FROM {t}", {}),
}
# Join edges between the star's tables (and taxi to date_dim by its pickup date).
EDGES = {
    frozenset(["sales", "date_dim"]): [("date_key", "date_key")],
    frozenset(["sales", "store"]): [("store_key", "store_key")],
    frozenset(["sales", "product"]): [("product_key", "product_key")],
}
STAR = ["sales", "date_dim", "store", "product"]


def view_name(table: str) -> str:
    return f"fuzzv_{table}"


def view_sql(table: str, qualified: str) -> str:
    return VIEWS[table][0].format(t=qualified)


@dataclass
class Settings:
    time_zone: str
    ansi: bool

    def conf(self) -> dict[str, str]:
        return {"spark.sql.session.timeZone": self.time_zone, "spark.sql.ansi.enabled": str(self.ansi).lower()}


def settings_for(batch: int) -> Settings:
    r = random.Random(f"settings-{batch}")
    return Settings(r.choice(ZONES), r.random() < 0.3)


# ---------------------------------------------------------------- literals

class Values:
    """Sample values per (table, column), formatted as literals; drawn from the data so
    predicates are selective and the trees decide them. Once a table is laid out,
    ``add_edges`` adds the values on either side of each of its cuts, and a share
    ``EDGE_SHARE`` of the draws takes one of those: predicates that land on the layout's own
    boundaries, where an off-by-one in a cut's reasoning would show."""

    EDGE_SHARE = 0.4

    def __init__(self, tables: dict[str, pa.Table]):
        self.samples: dict[tuple[str, str], list] = {}
        self.edges: dict[tuple[str, str], list] = {}
        for name, t in tables.items():
            for col in t.column_names:
                vals = [v for v in t.column(col).slice(0, 4000).to_pylist() if v is not None]
                step = max(1, len(vals) // 200)
                self.samples[(name, col)] = vals[::step][:200] or [0]

    def add_edges(self, table: str, edges: dict[str, list]) -> None:
        for col, vals in edges.items():
            self.edges.setdefault((table, col), []).extend(vals)

    def pick(self, r: random.Random, table: str, col: str):
        edges = self.edges.get((table, col))
        if edges and r.random() < self.EDGE_SHARE:
            return r.choice(edges)
        return r.choice(self.samples[(table, col)])


def cut_edges(table: pa.Table, cuts) -> dict[str, list]:
    """Per column of ``table``, the values next to each single-column cut's boundary: the
    largest and smallest value the cut holds for and the largest and smallest it fails for
    (NULL and NaN aside), and a few values from each side (for IN-list and literal cuts)."""
    names = {n.lower(): n for n in table.column_names}
    out: dict[str, list] = {}
    rng = random.Random(len(cuts))
    for cut in cuts:
        if len(cut.columns) != 1:
            continue
        col = names.get(next(iter(cut.columns)).lower())
        if col is None:
            continue
        arr = table.column(col)
        valid = pc.is_valid(arr)
        if pa.types.is_floating(arr.type):
            valid = pc.and_(valid, pc.invert(pc.is_nan(arr)))
        valid = np.asarray(pc.fill_null(valid, False).to_numpy(zero_copy_only=False), dtype=bool)
        held = np.asarray(cut.evaluate(table), dtype=bool)
        for side in (held & valid, ~held & valid):
            vals = arr.filter(pa.array(side))
            if len(vals) == 0:
                continue
            mm = pc.min_max(vals)
            some = vals.take(pa.array([rng.randrange(len(vals)) for _ in range(3)])).to_pylist()
            out.setdefault(col, []).extend([mm["min"].as_py(), mm["max"].as_py(), *some])
    return out


def int_lit(r: random.Random, v: int) -> str:
    roll = r.random()
    if roll < 0.45:
        return str(v)
    if roll < 0.55:
        return f"{v}L"
    if roll < 0.62 and -32768 <= v <= 32767:
        return f"{v}S"
    if roll < 0.67 and -128 <= v <= 127:
        return f"{v}Y"
    if roll < 0.74:
        return f"{v}.5BD" if r.random() < 0.5 else f"{v}BD"
    if roll < 0.8:
        return f"{v}.0D" if r.random() < 0.5 else f"{v}D"
    if roll < 0.86:
        return f"{v}.5F" if abs(v) < 10**7 else f"{v}F"
    if roll < 0.9:
        return f"'{v}'" if r.random() < 0.6 else f"' {v} '"
    if roll < 0.95:
        return f"CAST({v} AS {r.choice(['TINYINT', 'SMALLINT', 'INT', 'BIGINT', 'DOUBLE', 'FLOAT', 'DECIMAL(5,1)'])})"
    return r.choice(["2147483647", "-2147483648", "2147483648", "65536*65536+8", "32767S", "-129", "128"])


def float_lit(r: random.Random, v: float) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        return r.choice(["CAST('NaN' AS DOUBLE)", "'NaN'", "'Infinity'", "CAST('-Infinity' AS DOUBLE)",
                         "double('inf')", "CAST('NaN' AS FLOAT)"])
    s = repr(v) if r.random() < 0.3 else repr(round(v, 3))  # exact: a cut's own boundary value
    roll = r.random()
    if roll < 0.3:
        return s
    if roll < 0.5:
        return f"{s}F"
    if roll < 0.65:
        return f"{s}D"
    if roll < 0.75:
        return f"{s}BD"
    if roll < 0.85:
        return f"'{s}'" if r.random() < 0.5 else f"'{s}f'"
    if roll < 0.92:
        return f"CAST('{s}' AS {r.choice(['FLOAT', 'DOUBLE', 'DECIMAL(6,2)'])})"
    return r.choice(["-0.0", "0.0F", "1.81F", "0.2F", "1.815", "'Infinity'", "'NaN'", "CAST('0.2f' AS DOUBLE)",
                     "1e308*10", "CAST(1.81F AS DOUBLE)"])


def date_text(v) -> str:
    return v.isoformat() if isinstance(v, dt.date) else str(v)


def date_lit(r: random.Random, v: dt.date) -> str:
    s = v.isoformat()
    roll = r.random()
    if roll < 0.35:
        return f"DATE '{s}'"
    if roll < 0.55:
        return f"'{s}'"
    if roll < 0.65:
        return f"'{s[:7]}'" if r.random() < 0.5 else f"DATE '{s[:7]}'"
    if roll < 0.75:
        return f"TIMESTAMP '{s} {r.randrange(24):02d}:00:00'"
    if roll < 0.82:
        return f"TIMESTAMP_NTZ '{s} 12:00:00'"
    if roll < 0.9:
        return f"' {s} '" if r.random() < 0.5 else f"'{s[:4]}'"
    return r.choice(["DATE '2026-12'", "'2026-12'", "CAST('2026-1-7' AS DATE)", "DATE '2026'", "'2026-02-30'",
                     "date_add(DATE '2026-01-17', 3)", "CAST('2026-01-17T05:00:00+09:00' AS DATE)"])


def ts_lit(r: random.Random, v: dt.datetime) -> str:
    v = v.replace(tzinfo=None)
    s = v.strftime("%Y-%m-%d %H:%M:%S.%f" if v.microsecond and r.random() < 0.5 else "%Y-%m-%d %H:%M:%S")
    offset = r.choice(["+05:00", "-08:00", "+00:00", "Z", "+05:30", " UTC", " America/New_York", "-0330"])
    roll = r.random()
    if roll < 0.2:
        return f"TIMESTAMP '{s}'"
    if roll < 0.35:
        return f"TIMESTAMP '{s}{offset}'"
    if roll < 0.47:
        return f"'{s}'"
    if roll < 0.57:
        return f"'{s}{offset}'" if r.random() < 0.6 else f"'{s.replace(' ', 'T')}{offset}'"
    if roll < 0.67:
        return f"TIMESTAMP_NTZ '{s}'"
    if roll < 0.75:
        return f"TIMESTAMP_LTZ '{s}'" if r.random() < 0.5 else f"TIMESTAMP_LTZ '{s}{offset}'"
    if roll < 0.82:
        return f"DATE '{s[:10]}'"
    if roll < 0.88:
        return f"CAST('{s}{offset}' AS TIMESTAMP_NTZ)" if r.random() < 0.5 else f"CAST('{s[:7]}' AS TIMESTAMP)"
    if roll < 0.94:
        return f"to_timestamp('{s}')" if r.random() < 0.5 else f"timestamp_micros({int(v.timestamp() * 1e6)})"
    return f"'{s[:10]}'"


# ---------------------------------------------------------------- predicates

OPS = ["=", "<>", "<", "<=", ">", ">=", "<=>"]
NUM_CASTS = ["TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10,2)", "DECIMAL(4,1)", "STRING"]
INTISH = ("i", "l", "i8", "i16")


class Rel:
    """A relation in a FROM clause: its alias, the table it reads and the columns it exposes."""

    def __init__(self, alias: str, table: str, source: str, columns: dict[str, str], base: str):
        self.alias, self.table, self.source, self.columns, self.base = alias, table, source, columns, base


class QueryGen:
    """``plain``: bare columns against literals written the plain way (a layout's training
    workload); otherwise the whole grammar."""

    def __init__(self, values: Values, r: random.Random, plain: bool = False):
        self.values, self.r, self.plain = values, r, plain

    def lit_for(self, rel: Rel, col: str, kind: str) -> str:
        r = self.r
        src_col = {"qty8": "qty", "small16": "small", "s_sqft16": "s_sqft", "pass8": "passengers",
                   "dist2": "trip_distance"}.get(col, col)
        v = self.values.pick(r, rel.table, src_col)
        if self.plain:
            if kind in ("date", "ts", "ntz"):
                word = {"date": "DATE", "ts": "TIMESTAMP", "ntz": "TIMESTAMP_NTZ"}[kind]
                return f"{word} '{v.isoformat() if kind == 'date' else v.strftime('%Y-%m-%d %H:%M:%S')}'"
            if kind in ("f", "d"):
                return repr(round(float(v), 3)) if math.isfinite(float(v)) else "0.5"
            if kind == "s":
                return "'" + str(v).replace("'", "''") + "'"
            return str(v)
        if kind in INTISH:
            return int_lit(r, int(v))
        if kind in ("f", "d"):
            return float_lit(r, float(v) * (2 if col == "dist2" else 1))
        if kind == "dec":
            return r.choice([f"{v}BD", str(v), f"CAST('{v}' AS DECIMAL(12,2))", f"{float(v)}D", f"{v}F",
                             f"{int(v)}"])
        if kind == "date":
            return date_lit(r, v)
        if kind in ("ts", "ntz"):
            return ts_lit(r, v)
        s = str(v).replace("'", "''")
        return r.choice([f"'{s}'", f"'{s}'", f"'{s[:1]}'", f"'{r.choice(ODD_STRINGS)}'"])

    def expr_of(self, rel: Rel, col: str, kind: str) -> tuple[str, str]:
        """(SQL, kind) of a column, sometimes under a cast, arithmetic or a function."""
        r, c = self.r, f"{rel.alias}.{col}"
        roll = r.random()
        if roll < 0.55 or self.plain:
            return c, kind
        if kind in INTISH:
            if roll < 0.7:
                t = r.choice(NUM_CASTS)
                return f"CAST({c} AS {t})", {"TINYINT": "i8", "SMALLINT": "i16", "INT": "i", "BIGINT": "l",
                                             "FLOAT": "f", "DOUBLE": "d", "STRING": "s"}.get(t, "dec")
            if roll < 0.85:
                return r.choice([f"{c} + 2147483647", f"{c} * 65536", f"{c} * 3037000500", f"{c} - 1",
                                 f"{c} + 1L", f"{c} * 2", f"-{c}", f"abs({c})", f"{c} % 7", f"{c} div 3",
                                 f"{c} + 9223372036854775807", f"{c} * 1.5F", f"{c} / 2"]), "l"
            return f"{c} + {r.randint(-5, 5)}", kind
        if kind in ("f", "d"):
            if roll < 0.75:
                t = r.choice(NUM_CASTS)
                return f"CAST({c} AS {t})", {"TINYINT": "i8", "SMALLINT": "i16", "INT": "i", "BIGINT": "l",
                                             "FLOAT": "f", "DOUBLE": "d", "STRING": "s"}.get(t, "dec")
            return r.choice([f"{c} * 2", f"{c} + 0.1F", f"{c} * 1e308", f"-{c}", f"round({c}, 1)"]), "d"
        if kind == "dec":
            t = r.choice(NUM_CASTS)
            return f"CAST({c} AS {t})", {"TINYINT": "i8", "SMALLINT": "i16", "INT": "i", "BIGINT": "l",
                                         "FLOAT": "f", "DOUBLE": "d", "STRING": "s"}.get(t, "dec")
        if kind == "s":
            t = r.choice(["INT", "BIGINT", "DOUBLE", "FLOAT", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TINYINT",
                          "DECIMAL(10,2)"])
            return f"CAST({c} AS {t})", {"INT": "i", "BIGINT": "l", "DOUBLE": "d", "FLOAT": "f", "DATE": "date",
                                         "TIMESTAMP": "ts", "TIMESTAMP_NTZ": "ntz", "TINYINT": "i8"}.get(t, "dec")
        if kind == "date":
            return r.choice([(f"CAST({c} AS TIMESTAMP)", "ts"), (f"CAST({c} AS TIMESTAMP_NTZ)", "ntz"),
                             (f"date_add({c}, 1)", "date"), (f"CAST({c} AS STRING)", "s")])
        return r.choice([(f"CAST({c} AS DATE)", "date"), (f"CAST({c} AS TIMESTAMP_NTZ)", "ntz"),
                         (f"CAST({c} AS TIMESTAMP)", "ts"), (f"CAST({c} AS STRING)", "s"),
                         (f"{c} + INTERVAL 1 HOUR", kind)])

    def lit_kind(self, rel: Rel, col: str, kind: str, want: str) -> str:
        """A literal for an expression of kind ``want`` built from ``rel.col``'s values."""
        r = self.r
        if want == kind or (want in INTISH and kind in INTISH) or (want in ("f", "d") and kind in ("f", "d")):
            return self.lit_for(rel, col, kind)
        if want in INTISH:
            return int_lit(r, r.choice([0, 1, 12, 100, -1, 127, 128, 32767, 32768, 2000, 2026, 2147483647]))
        if want in ("f", "d", "dec"):
            return float_lit(r, r.choice([0.0, 0.2, 1.81, 12.0, 100.5, -1.0]))
        if want == "date":
            return date_lit(r, dt.date(2026, 1, 17) + dt.timedelta(days=r.randint(-200, 200)))
        if want in ("ts", "ntz"):
            return ts_lit(r, dt.datetime(2026, 1, 17, 2) + dt.timedelta(hours=r.randint(-3000, 3000)))
        return f"'{r.choice(ODD_STRINGS)}'"

    def atom(self, rels: list[Rel]) -> str:
        r = self.r
        rel = r.choice(rels)
        col, kind = r.choice(list(rel.columns.items()))
        c = f"{rel.alias}.{col}"
        roll = r.random()
        if roll < 0.06:
            return f"{c} IS {'NOT ' if r.random() < 0.4 else ''}NULL"
        if roll < 0.14 and len(rels) > 1:  # column vs column, mixed widths and NTZ vs LTZ welcome
            other = r.choice([x for x in rels if x is not rel])
            family = {"i": "n", "l": "n", "i8": "n", "i16": "n", "f": "n", "d": "n", "dec": "n", "date": "t",
                      "ts": "t", "ntz": "t", "s": "s"}
            cands = [(k, v) for k, v in other.columns.items() if family[v] == family[kind]]
            if cands:
                oc, _ = r.choice(cands)
                return f"{c} {r.choice(OPS)} {other.alias}.{oc}"
        e, k = self.expr_of(rel, col, kind)
        if roll < 0.24:
            lo, hi = self.lit_kind(rel, col, kind, k), self.lit_kind(rel, col, kind, k)
            if r.random() < 0.7:  # mostly in order (a range that selects rows), by the literals' digits
                lo, hi = sorted([lo, hi], key=lambda x: [float(t) for t in re.findall(r"\d+(?:\.\d+)?", x)] or [0])
            return f"{e} {'NOT ' if r.random() < 0.15 else ''}BETWEEN {lo} AND {hi}"
        if roll < 0.36:
            items = [self.lit_kind(rel, col, kind, k) for _ in range(r.randint(1, 5))]
            if r.random() < 0.15:
                items.append("NULL")
            return f"{e} {'NOT ' if r.random() < 0.2 else ''}IN ({', '.join(items)})"
        if roll < 0.42 and k == "s":
            pat = r.choice(["a%", "%a", "_", "%", "n1%", "2026%", "%:%", "a\\%b", "é%", "N%", "%e%t"])
            return f"{e} {'NOT ' if r.random() < 0.2 else ''}{r.choice(['LIKE', 'LIKE', 'ILIKE'])} '{pat}'"
        if roll < 0.45 and k in ("f", "d"):
            return f"{'NOT ' if r.random() < 0.3 else ''}isnan({e})"
        lit = self.lit_kind(rel, col, kind, k)
        op = r.choice(OPS)
        return f"{lit} {op} {e}" if r.random() < 0.2 else f"{e} {op} {lit}"

    def predicate(self, rels: list[Rel], depth: int = 2) -> str:
        r = self.r
        if depth <= 0 or r.random() < 0.5:
            a = self.atom(rels)
            return f"NOT ({a})" if r.random() < 0.07 else a
        parts = [self.predicate(rels, depth - 1) for _ in range(r.choice([2, 2, 3]))]
        glue = " OR " if r.random() < 0.5 else " AND "
        out = "(" + glue.join(parts) + ")"
        return f"NOT {out}" if r.random() < 0.08 else out


def edge_condition(r: random.Random, a: Rel, b: Rel) -> str:
    """An equi-join condition between two relations (the star's keys; otherwise any integer pair)."""
    pairs = EDGES.get(frozenset([a.base, b.base]))
    if pairs and a.base != b.base:
        ca, cb = pairs[0] if a.base == "sales" or b.base != "sales" else pairs[0][::-1]
        if a.base != "sales" and b.base == "sales":
            ca, cb = pairs[0][1], pairs[0][0]
        return f"{a.alias}.{ca} = {b.alias}.{cb}"
    if {a.base, b.base} == {"taxi", "date_dim"}:
        t, d = (a, b) if a.base == "taxi" else (b, a)
        return f"CAST({t.alias}.pickup_ts AS DATE) = {d.alias}.d_date"
    ia = [c for c, k in a.columns.items() if k in ("i", "l")]
    ib = [c for c, k in b.columns.items() if k in ("i", "l")]
    if a.base in FACTS and b.base in FACTS:  # two facts: a coarse column would join each row to thousands
        ia = [c for c in ia if c in FINE_JOIN_COLUMNS]
        ib = [c for c in ib if c in FINE_JOIN_COLUMNS]
    return f"{a.alias}.{r.choice(ia)} = {b.alias}.{r.choice(ib)}"


FACTS = ("sales", "taxi")
# The facts' integer columns a fact-to-fact equi-join may use: at most ~120 matching rows per row
# (a self-join on taxi.passengers or sales.qty makes 10^8 rows and exhausts the driver's heap).
FINE_JOIN_COLUMNS = {"sale_id", "date_key", "amount", "small", "trip_id", "zone"}


JOIN_TYPES = ["JOIN", "INNER JOIN", "LEFT JOIN", "LEFT OUTER JOIN", "RIGHT JOIN", "FULL OUTER JOIN", "FULL JOIN",
              "CROSS JOIN", ","]
JOIN_WEIGHTS = [4, 1, 4, 1, 3, 2, 1, 1, 1]


def make_query(values: Values, seed: int) -> str:
    """One random query of the grammar (a pure function of ``seed`` and the data's values)."""
    r = random.Random(seed)
    g = QueryGen(values, r)
    # which tables, in which order: the star (sales first or second) or taxi (alone, with a date, or twice)
    if r.random() < 0.72:
        n = r.choice([1, 2, 2, 3, 3, 3, 4])
        dims = r.sample(STAR[1:], min(n - 1, 3)) if n > 1 else []
        order = ["sales"] + dims
        if n > 1 and r.random() < 0.45:
            order[0], order[1] = order[1], order[0]
        if n == 1 and r.random() < 0.2:
            order = [r.choice(STAR[1:])]
    else:
        order = r.choice([["taxi"], ["taxi"], ["taxi", "date_dim"], ["date_dim", "taxi"], ["taxi", "taxi"]])
    ctes: list[str] = []
    rels: list[Rel] = []
    for i, base in enumerate(order):
        alias = f"{base[0]}{i}"
        cols = dict(COLUMNS[base])
        form = r.random()
        qualified = f"{NS}.{base}"
        if form < 0.6:
            source = qualified
        elif form < 0.75:
            source = view_name(base)
            cols.update(VIEWS[base][1])
        elif form < 0.88:
            name = f"cte{i}"
            inner = Rel("x", base, qualified, COLUMNS[base], base)
            where = f" WHERE {g.predicate([inner], 1)}" if r.random() < 0.6 else ""
            ctes.append(f"{name} AS (SELECT * FROM {qualified} x{where})")
            source = name
        else:
            inner = Rel("x", base, qualified, COLUMNS[base], base)
            where = f" WHERE {g.predicate([inner], 1)}" if r.random() < 0.7 else ""
            source = f"(SELECT * FROM {qualified} x{where})"
        rels.append(Rel(alias, base, source, cols, base))

    def ref(rel: Rel) -> str:
        return f"{rel.source} {rel.alias}"

    where_parts: list[str] = []
    from_sql = ref(rels[0])
    joined = [rels[0]]
    i = 1
    while i < len(rels):
        # a parenthesised sub-join: (next JOIN next+1 ON ...) joined to what came before
        if i + 1 < len(rels) and r.random() < 0.2:
            a, b = rels[i], rels[i + 1]
            inner_type = r.choices(JOIN_TYPES[:7], JOIN_WEIGHTS[:7])[0]
            anchor = next((x for x in (b, a) if EDGES.get(frozenset([x.base, joined[0].base]))), a)
            inner_on = edge_condition(r, a, b)
            outer_on = edge_condition(r, joined[-1] if r.random() < 0.5 else joined[0], anchor)
            if r.random() < 0.4:
                inner_on += f" AND {g.predicate([a, b], 1)}"
            jt = r.choices(JOIN_TYPES[:7], JOIN_WEIGHTS[:7])[0]
            from_sql += f" {jt} ({ref(a)} {inner_type} {ref(b)} ON {inner_on}) ON {outer_on}"
            joined += [a, b]
            i += 2
            continue
        nxt = rels[i]
        partner = next((x for x in reversed(joined) if EDGES.get(frozenset([x.base, nxt.base]))), r.choice(joined))
        cond = edge_condition(r, partner, nxt)
        jt = r.choices(JOIN_TYPES, JOIN_WEIGHTS)[0]
        if jt in ("CROSS JOIN", ","):
            from_sql += f" {jt} {ref(nxt)}" if jt != "," else f", {ref(nxt)}"
            where_parts.append(cond)
        else:
            if r.random() < 0.45:
                cond += f" AND {g.predicate(joined + [nxt], 1)}"
            from_sql += f" {jt} {ref(nxt)} ON {cond}"
        joined.append(nxt)
        i += 1
    if r.random() < 0.85:
        where_parts.append(g.predicate(rels, 2))
    if r.random() < 0.7:  # one table's own conjunct (casts, overflow, odd literals): pushed down to its trees
        where_parts.append(g.atom([r.choice(rels)]))
    if r.random() < 0.4:  # a plainly written conjunct too: the trees decide it, so the query prunes
        where_parts.append(QueryGen(values, r, plain=True).atom([r.choice(rels)]))
    if r.random() < 0.12:  # a semi-join through a subquery
        star = [x for x in rels if x.base in ("sales", "taxi")] or rels
        host = r.choice(star)
        if host.base == "sales":
            dim = r.choice(STAR[1:])
            key = EDGES[frozenset(["sales", dim])][0][0]
            inner = Rel("y", dim, f"{NS}.{dim}", COLUMNS[dim], dim)
            where_parts.append(f"{host.alias}.{key} {'NOT ' if r.random() < 0.2 else ''}IN "
                               f"(SELECT y.{key} FROM {NS}.{dim} y WHERE {g.predicate([inner], 1)})")
        elif host.base == "taxi":
            inner = Rel("y", "date_dim", f"{NS}.date_dim", COLUMNS["date_dim"], "date_dim")
            where_parts.append(f"CAST({host.alias}.pickup_ts AS DATE) IN "
                               f"(SELECT y.d_date FROM {NS}.date_dim y WHERE {g.predicate([inner], 1)})")
    where_sql = f" WHERE {' AND '.join(where_parts)}" if where_parts else ""
    select, group = select_list(r, rels)
    with_sql = f"WITH {', '.join(ctes)} " if ctes else ""
    return f"{with_sql}SELECT {select} FROM {from_sql}{where_sql}{group}"


def select_list(r: random.Random, rels: list[Rel]) -> tuple[str, str]:
    """Aggregates (count, count(col), sum of an integer or decimal, min/max, a hash checksum);
    sometimes grouped by a low-cardinality column (a small result, compared as a multiset)."""
    rel = r.choice(rels)
    cols = list(rel.columns.items())
    out = ["count(*)"]
    c1, _ = r.choice(cols)
    out.append(f"count({rel.alias}.{c1})")
    exact = [c for c, k in cols if k in ("i", "dec", "i8", "i16")]
    if exact and r.random() < 0.7:
        out.append(f"sum({rel.alias}.{r.choice(exact)})")
    other = r.choice(rels)
    c2, _ = r.choice(list(other.columns.items()))
    out.append(f"{r.choice(['min', 'max'])}({other.alias}.{c2})")
    hashed = ", ".join(f"{x.alias}.{r.choice(list(x.columns))}" for x in rels)
    out.append(f"sum(hash({hashed}))")
    if r.random() < 0.1:
        fl = [c for c, k in cols if k in ("f", "d")]
        if fl:
            out.append(f"sum({rel.alias}.{r.choice(fl)})")
    group = ""
    if r.random() < 0.15:
        low = {"s_region", "p_brand", "d_year", "d_month", "vendor", "passengers", "note"}
        gl = [(x, c) for x in rels for c in x.columns if c in low]
        if gl:
            x, c = r.choice(gl)
            out.insert(0, f"{x.alias}.{c}")
            group = f" GROUP BY {x.alias}.{c}"
    return ", ".join(out), group


def training_workload(values: Values, table: str, count: int, seed: int, plain: bool = True) -> list[str]:
    """A training workload for ``table`` drawn from the same predicate grammar (single-table
    filters and joins to the dimensions), so the trees cut on the columns the queries use;
    ``plain``: bare columns and plainly written literals only (see ``QueryGen``)."""
    r = random.Random(seed)
    g = QueryGen(values, r, plain)
    out = []
    for _ in range(count):
        rel = Rel("a", table, f"{NS}.{table}", COLUMNS[table], table)
        rels = [rel]
        from_sql = f"{NS}.{table} a"
        if table == "sales" and r.random() < 0.4:
            dim = r.choice(STAR[1:])
            d = Rel("d", dim, f"{NS}.{dim}", COLUMNS[dim], dim)
            from_sql += f" JOIN {NS}.{dim} d ON {edge_condition(r, rel, d)}"
            rels.append(d)
        out.append(f"SELECT count(*) FROM {from_sql} WHERE {g.predicate(rels, 1)}")
    return out


def make_limit_query(values: Values, seed: int) -> tuple[str, str, int, int, int]:
    """One random LIMIT or top-k query on one table (a pure function of ``seed``): its SQL, the
    same query without LIMIT and OFFSET, how many ORDER BY columns lead its select list (0: no
    ORDER BY), the LIMIT and the OFFSET. Select items are columns (sometimes aliased), so that
    LIMIT and top-k pruning apply; a share of the queries has a shape they must leave alone."""
    r = random.Random(seed)
    g = QueryGen(values, r)
    base = r.choice(["sales", "sales", "taxi", "taxi", "date_dim", "store", "product"])
    rel = Rel("t", base, f"{NS}.{base}", COLUMNS[base], base)
    names = list(COLUMNS[base])
    ordered = r.sample(names, r.choice([1, 1, 2])) if r.random() < 0.6 else []
    rest = [c for c in r.sample(names, r.randint(1, min(4, len(names)))) if c not in ordered]
    items = [f"t.{c}" if r.random() < 0.8 else f"t.{c} AS {c}_a" for c in ordered + rest]
    where = f" WHERE {g.predicate([rel], r.choice([0, 1, 1, 2]))}" if r.random() < 0.85 else ""
    order = ""
    if ordered:
        keys = [f"{c}_a" if " AS " in item else f"t.{c}" for c, item in zip(ordered, items)]
        order = " ORDER BY " + ", ".join(
            f"{k}{r.choice(['', ' ASC', ' DESC'])}{r.choice(['', '', ' NULLS FIRST', ' NULLS LAST'])}" for k in keys)
    limit = r.choice([0, 1, 3, 10, 50, 200, 1000, 5000])
    offset = r.choice([0, 0, 0, 0, 0, 1, 7, 40])
    tail = f" LIMIT {limit}" + (f" OFFSET {offset}" if offset else "")
    q = f"SELECT {', '.join(items)} FROM {NS}.{base} t{where}{order}"
    return q + tail, q, len(ordered), limit, offset
