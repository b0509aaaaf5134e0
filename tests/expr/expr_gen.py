"""Random tables and predicates for the property tests, with a row-by-row reference
evaluator implementing Spark SQL semantics independently of pando_iceberg.expr."""

from __future__ import annotations

import datetime as dt
import io
import math
import re
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
)

SCHEMA = pa.schema([
    ("i", pa.int64()),
    ("f", pa.float64()),
    ("s", pa.string()),
    ("d", pa.date32()),
    ("m", pa.decimal128(9, 2)),
    ("b", pa.bool_()),
    ("j", pa.int32()),
])
# SCHEMA as an Iceberg schema (field ids 1..7 in column order)
ICEBERG = Schema(
    NestedField(1, "i", LongType(), required=False),
    NestedField(2, "f", DoubleType(), required=False),
    NestedField(3, "s", StringType(), required=False),
    NestedField(4, "d", DateType(), required=False),
    NestedField(5, "m", DecimalType(9, 2), required=False),
    NestedField(6, "b", BooleanType(), required=False),
    NestedField(7, "j", IntegerType(), required=False),
)


def data_file(chunk: pa.Table, iceberg_schema: Schema = ICEBERG) -> DataFile:
    """A data file of ``chunk``'s rows with the statistics pyiceberg takes from its Parquet footer
    (columns matched to ``iceberg_schema``'s field ids)."""
    buf = io.BytesIO()
    pq.write_table(chunk, buf)
    buf.seek(0)
    stats = data_file_statistics_from_parquet_metadata(pq.read_metadata(buf),
                                                       compute_statistics_plan(iceberg_schema, {}),
                                                       parquet_path_to_id_mapping(iceberg_schema))
    return DataFile.from_args(content=DataFileContent.DATA, file_path="mem.parquet", file_format=FileFormat.PARQUET,
                              partition=Record(), file_size_in_bytes=len(buf.getvalue()), sort_order_id=None,
                              spec_id=0, equality_ids=None, key_metadata=None, **stats.to_serialized_dict())


KIND = {"i": "num", "j": "num", "f": "num", "m": "num", "s": "str", "d": "date", "b": "bool"}

INTS = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from([-(2**40), 2**40]))
FLOATS = st.one_of(st.none(), st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, 2.5, -1.0, 3.0,
                                               1e300]), st.integers(-5, 5).map(float))
STRS = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "abc", "abd", "b", "é", "éa", "😀", "a%", "a_b", "A",
                                            "ab\nc", "zz"]))
DATES = st.one_of(st.none(), st.dates(dt.date(1993, 12, 25), dt.date(1995, 1, 5)))
DECS = st.one_of(st.none(), st.integers(-600, 600).map(lambda n: Decimal(n).scaleb(-2)))
BOOLS = st.one_of(st.none(), st.booleans())
SMALL = st.one_of(st.none(), st.integers(-3, 3))


@st.composite
def tables(draw, min_rows=0, max_rows=12):
    n = draw(st.integers(min_rows, max_rows))
    cols = {
        "i": draw(st.lists(INTS, min_size=n, max_size=n)),
        "f": draw(st.lists(FLOATS, min_size=n, max_size=n)),
        "s": draw(st.lists(STRS, min_size=n, max_size=n)),
        "d": draw(st.lists(DATES, min_size=n, max_size=n)),
        "m": draw(st.lists(DECS, min_size=n, max_size=n)),
        "b": draw(st.lists(BOOLS, min_size=n, max_size=n)),
        "j": draw(st.lists(SMALL, min_size=n, max_size=n)),
    }
    return pa.table(cols, schema=SCHEMA)


# ------------------------------------------------------------- literals: (sql, python value)

def _num_lits():
    return st.one_of(
        st.integers(-6, 6).map(lambda v: (str(v) if v >= 0 else f"({v})", Decimal(v))),
        st.sampled_from(["2.5", "0.05", "0.055", "-1.25", "3.00", "1.999"]).map(lambda t: (t, Decimal(t))),
        st.sampled_from(["2.5e0", "1e300", "-1e0", "3e0"]).map(lambda t: (t, float(t))),
        st.sampled_from([("CAST('NaN' AS DOUBLE)", math.nan), ("CAST('Infinity' AS DOUBLE)", math.inf),
                         ("CAST('-Infinity' AS DOUBLE)", -math.inf)]),
    )


def _str_lits():
    return st.sampled_from(["", "a", "ab", "abc", "abd", "b", "é", "😀", "zz", "A"]).map(
        lambda v: ("'" + v.replace("'", "''") + "'", v))


def _date_lits():
    return st.dates(dt.date(1993, 12, 20), dt.date(1995, 1, 10)).map(lambda d: (f"date '{d.isoformat()}'", d))


def lits_for(col):
    return {"num": _num_lits, "str": _str_lits, "date": _date_lits}[KIND[col]]()


# ------------------------------------------------------------- predicates: (sql, ref)
# ref(row) -> True / False / None (NULL)

def _num_key(v):
    # Spark's total order on doubles: NaN above everything; -0.0 == 0.0.
    f = float(v)
    return (1, 0.0) if math.isnan(f) else (0, f)


def ref_cmp(op, a, b):
    if a is None or b is None:
        return None
    if isinstance(a, (bool,)) or isinstance(b, (bool,)):
        x, y = a, b
    elif isinstance(a, float) or isinstance(b, float):
        x, y = _num_key(a), _num_key(b)
    elif isinstance(a, (int, Decimal)) and isinstance(b, (int, Decimal)):
        x, y = Decimal(a), Decimal(b)
    else:
        x, y = a, b
    return {"=": x == y, "<>": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def ref_and(a, b):
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def ref_or(a, b):
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def ref_not(a):
    return None if a is None else not a


def like_regex(pattern):
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


OPS = ["=", "<>", "<", "<=", ">", ">="]


@st.composite
def atoms(draw):
    col = draw(st.sampled_from(list(KIND)))
    kind = KIND[col]
    shape = draw(st.sampled_from(["cmp", "cmp", "between", "in", "isnull", "like", "colcol", "bool", "arith"]))
    if shape == "isnull":
        neg = draw(st.booleans())
        return (f"{col} IS {'NOT ' if neg else ''}NULL", lambda r: (r[col] is not None) if neg else (r[col] is None))
    if shape == "bool" or kind == "bool":
        return ("b", lambda r: r["b"])
    if shape == "like" and kind == "str":
        pat = draw(st.sampled_from(["a%", "ab%", "%b", "a_", "", "%", "é%", "a\\%", "_", "%a%b", "abc", "a%%"]))
        rx = like_regex(pat)
        return (f"s LIKE '{pat.replace(chr(92), chr(92) * 2)}'" if False else f"s LIKE '{pat}'",
                lambda r: None if r["s"] is None else bool(rx.fullmatch(r["s"])))
    if shape == "colcol":
        a, b = draw(st.sampled_from([("i", "j"), ("i", "f"), ("m", "i"), ("f", "m"), ("j", "f")]))
        op = draw(st.sampled_from(OPS))
        return (f"{a} {op} {b}", lambda r: ref_cmp(op, r[a], r[b]))
    if shape == "arith" and kind == "num" and col != "f":
        op = draw(st.sampled_from(OPS))
        k = draw(st.integers(-3, 3))
        lit_sql, lit = draw(st.sampled_from([("2", Decimal(2)), ("0.5", Decimal("0.5"))]))

        def ref_arith(r):
            v = r[col]
            return None if v is None else ref_cmp(op, Decimal(v) + k, lit)
        return (f"{col} + ({k}) {op} {lit_sql}", ref_arith)
    if shape == "in":
        values = draw(st.lists(lits_for(col), min_size=1, max_size=3))
        with_null = draw(st.booleans()) and draw(st.booleans())

        def ref_in(r):
            v = r[col]
            if v is None:
                return None
            if any(ref_cmp("=", v, x) for _, x in values):
                return True
            return None if with_null else False
        sqls = [s for s, _ in values] + (["NULL"] if with_null else [])
        return (f"{col} IN ({', '.join(sqls)})", ref_in)
    if shape == "between":
        (lo_sql, lo), (hi_sql, hi) = draw(lits_for(col)), draw(lits_for(col))
        return (f"{col} BETWEEN {lo_sql} AND {hi_sql}",
                lambda r: ref_and(ref_cmp(">=", r[col], lo), ref_cmp("<=", r[col], hi)))
    op = draw(st.sampled_from(OPS))
    lit_sql, lit = draw(lits_for(col))
    if draw(st.booleans()):  # literal on the left
        flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>"}[op]
        return (f"{lit_sql} {flipped} {col}", lambda r: ref_cmp(op, r[col], lit))
    return (f"{col} {op} {lit_sql}", lambda r: ref_cmp(op, r[col], lit))


def predicates(max_depth=2):
    return st.recursive(
        atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: (f"({p[0][0]}) AND ({p[1][0]})",
                                                   lambda r, p=p: ref_and(p[0][1](r), p[1][1](r)))),
            st.tuples(inner, inner).map(lambda p: (f"({p[0][0]}) OR ({p[1][0]})",
                                                   lambda r, p=p: ref_or(p[0][1](r), p[1][1](r)))),
            inner.map(lambda p: (f"NOT ({p[0]})", lambda r, p=p: ref_not(p[1](r)))),
        ),
        max_leaves=4,
    )


def rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def examples(n: int) -> int:
    """n examples by default; PANDO_HYPOTHESIS=thorough multiplies them by 10."""
    import os

    return n * (10 if os.environ.get("PANDO_HYPOTHESIS") == "thorough" else 1)
