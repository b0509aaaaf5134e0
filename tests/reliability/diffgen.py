"""Random tables, workloads and queries for the differential suite (tests/reliability).

Everything is drawn from one ``numpy.random.Generator`` seeded by the case seed, so a seed
reproduces a table, its dimension, its workload, its layout parameters and its queries exactly.

A fact table has a unique ``rid`` (the row id the comparisons use), ``fk`` (a foreign key into
the dimension, with NULLs and dangling values) and 3..8 random columns named ``c<i>_<kind>``;
the dimension has a primary key ``dk`` and ``cat`` / ``dv`` / ``dd``. Predicates cover
comparisons (literal on either side), BETWEEN, IN lists (with NULL, negated), LIKE, IS NULL,
column-vs-column, arithmetic and functions, AND/OR/NOT groups, and semi-joins to the dimension.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pyarrow as pa

KINDS = ["int", "long", "float", "str", "date", "ts", "tstz", "dec", "bool"]
EPOCH = dt.datetime(2020, 1, 1)
VOCAB = ["", "a", "A", "ab", "abc", "abd", "b", "ba", "bb", "é", "éa", "😀", "a%", "a_b", "zz", "Z", "日本",
         "naïve", " lead", "trail ", "ab c", "x"]
OPS = ["=", "<>", "<", "<=", ">", ">="]
FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>"}


@dataclass
class Column:
    name: str
    kind: str
    type: pa.DataType
    values: pa.Array


@dataclass
class RandomCase:
    seed: int
    n: int
    columns: list[Column]
    fact: pa.Table
    dim: pa.Table
    k: int
    min_block_rows: int
    sample_fraction: float
    workload_predicates: list[str] = field(default_factory=list)
    mutations: list[str] = field(default_factory=list)  # "append", "delete"

    def describe(self) -> str:
        cols = ", ".join(f"{c.name}:{c.type}" for c in self.columns)
        return (f"seed={self.seed} rows={self.n} k={self.k} min_block_rows={self.min_block_rows} "
                f"sample_fraction={self.sample_fraction:.2f} mutations={self.mutations} columns=[{cols}]")


# ---------------------------------------------------------------- data

def _nulls(rng, n, p):
    return rng.random(n) < p if p > 0 else np.zeros(n, bool)


def _column(rng: np.random.Generator, kind: str, n: int, name: str) -> Column:
    p_null = float(rng.choice([0.0, 0.02, 0.2, 1.0], p=[0.35, 0.35, 0.25, 0.05]))
    mask = _nulls(rng, n, p_null)
    skew = rng.random() < 0.4
    if kind in ("int", "long"):
        if skew:
            v = rng.zipf(1.6, n) % 1000
        else:
            v = rng.integers(0, int(rng.choice([3, 100, 10**6])), n) - int(rng.choice([0, 50]))
        t = pa.int32() if kind == "int" else pa.int64()
        arr = pa.array(v.astype(np.int64), t, mask=mask)
    elif kind == "float":
        v = rng.integers(-50, 50, n) / float(rng.choice([1, 4, 10]))
        special = rng.random(n) < 0.08
        v[special] = rng.choice([np.nan, 0.0, -0.0, np.inf, -np.inf], special.sum())
        arr = pa.array(v, pa.float64(), mask=mask)
        t = pa.float64()
    elif kind == "str":
        vocab = VOCAB + ["".join(rng.choice(list("abcdxyz"), rng.integers(1, 5))) for _ in range(20)]
        idx = (rng.zipf(1.5, n) - 1) % len(vocab) if skew else rng.integers(0, len(vocab), n)
        arr = pa.array([vocab[i] for i in idx], pa.string(), mask=mask)
        t = pa.string()
    elif kind == "date":
        days = rng.integers(0, 1100, n)
        arr = pa.array((days + 18262).astype(np.int32), pa.int32(), mask=mask).cast(pa.date32())  # from 2020-01-01
        t = pa.date32()
    elif kind in ("ts", "tstz"):
        grain = int(rng.choice([1, 3600, 86400]))  # seconds, hours or whole days (duplicates)
        secs = rng.integers(0, 3 * 365 * 86400, n) // grain * grain
        micros = (1577836800 + secs) * 1_000_000 + (rng.integers(0, 1_000_000, n) if rng.random() < 0.3 else 0)
        t = pa.timestamp("us", tz="UTC") if kind == "tstz" else pa.timestamp("us")
        arr = pa.array(micros.astype(np.int64), pa.int64(), mask=mask).cast(t)
    elif kind == "dec":
        p, s = [(9, 2), (18, 0), (18, 4), (38, 2), (5, 1)][int(rng.integers(0, 5))]
        hi = min(10 ** (p - 1), 10**6)
        v = rng.integers(-hi, hi, n)
        t = pa.decimal128(p, s)
        arr = pa.array([None if m else Decimal(int(x)).scaleb(-s) for x, m in zip(v, mask)], t)
    elif kind == "bool":
        arr = pa.array(rng.random(n) < 0.3, pa.bool_(), mask=mask)
        t = pa.bool_()
    else:  # pragma: no cover
        raise ValueError(kind)
    return Column(name, kind, t, arr)


def random_case(seed: int, *, min_rows: int = 200, max_rows: int = 4000) -> RandomCase:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(min_rows, max_rows + 1))
    kinds = list(rng.choice(KINDS, int(rng.integers(3, 9))))
    cols = [_column(rng, kind, n, f"c{i}_{kind}") for i, kind in enumerate(kinds)]
    d = int(rng.integers(5, 60))
    fk = rng.integers(0, d + 5, n)  # a few dangling keys
    if rng.random() < 0.3:
        fk = (rng.zipf(1.4, n) - 1) % (d + 5)
    rid = np.arange(n, dtype=np.int64)
    if rng.random() < 0.3:  # duplicate rows (same values, their own rid)
        src = rng.integers(0, n, n // 5)
        for c in cols:
            vals = c.values.to_pylist()
            for i, j in zip(range(n - len(src), n), src):
                vals[i] = vals[j]
            c.values = pa.array(vals, c.type)
    fact = pa.table([pa.array(rid), pa.array(fk, pa.int64(), mask=_nulls(rng, n, 0.05))] + [c.values for c in cols],
                    names=["rid", "fk"] + [c.name for c in cols])
    dim_schema = pa.schema([pa.field("dk", pa.int64(), nullable=False), ("cat", pa.string()), ("dv", pa.int32()),
                            ("dd", pa.date32())])
    dim = pa.table([pa.array(np.arange(d, dtype=np.int64)),
                    pa.array([f"cat{i}" for i in rng.integers(0, 6, d)], pa.string(), mask=_nulls(rng, d, 0.1)),
                    pa.array(rng.integers(0, 100, d).astype(np.int32), pa.int32()),
                    pa.array((rng.integers(0, 1100, d) + 18262).astype(np.int32), pa.int32()).cast(pa.date32())],
                   schema=dim_schema)
    k = int(rng.integers(1, 5))
    min_block_rows = int(rng.integers(max(5, n // 80), max(10, n // 10)))  # ~10..80 blocks
    frac = float(rng.choice([0.2, 0.5, 1.0]))
    case = RandomCase(seed, n, cols, fact, dim, k, min_block_rows, frac)
    gen = PredicateGen(case, rng)
    case.workload_predicates = [gen.workload_predicate() for _ in range(int(rng.integers(4, 25)))]
    case.mutations = [m for m, p in (("append", 0.3), ("delete", 0.2)) if rng.random() < p]
    return case


# ---------------------------------------------------------------- literals

def sql_literal(kind: str, v) -> str:
    if v is None:
        return "NULL"
    if kind in ("int", "long"):
        return str(int(v))
    if kind == "float":
        f = float(v)
        if f != f:
            return "CAST('NaN' AS DOUBLE)"
        if f in (float("inf"), float("-inf")):
            return f"CAST('{'-' if f < 0 else ''}Infinity' AS DOUBLE)"
        if f == 0 and str(f).startswith("-"):
            return "-0.0"
        return repr(f)
    if kind == "str":
        return "'" + str(v).replace("'", "''") + "'"
    if kind == "date":
        return f"date '{v.isoformat()}'"
    if kind == "ts":
        return f"timestamp_ntz '{v.isoformat(sep=' ')}'"
    if kind == "tstz":
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None) if v.tzinfo else v
        return f"timestamp '{v.isoformat(sep=' ')}'"
    if kind == "dec":
        return str(v)
    if kind == "bool":
        return "true" if v else "false"
    raise ValueError(kind)


class PredicateGen:
    """Random predicates over a case's fact table (and its dimension)."""

    def __init__(self, case: RandomCase, rng: np.random.Generator):
        self.case = case
        self.rng = rng
        self.values = {c.name: [v for v in c.values.to_pylist() if v is not None] for c in case.columns}
        self.dim_values = {n: [v for v in case.dim.column(n).to_pylist() if v is not None] for n in ("cat", "dv", "dd")}

    def _pick(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    def _random_value(self, kind: str):
        r = self.rng
        if kind in ("int", "long"):
            return int(r.choice([0, 1, -1, 2, 50, 999, 10**6, int(r.integers(-60, 1000))]))
        if kind == "float":
            return float(r.choice([float("nan"), 0.0, -0.0, float("inf"), float("-inf"), 2.5, -3.25, 40.0]))
        if kind == "str":
            return str(r.choice(VOCAB + ["m", "abcz", "~"]))
        if kind == "date":
            return dt.date(2020, 1, 1) + dt.timedelta(days=int(r.integers(-30, 1130)))
        if kind in ("ts", "tstz"):
            t = EPOCH + dt.timedelta(seconds=int(r.integers(-86400, 3 * 365 * 86400)))
            return t.replace(tzinfo=dt.timezone.utc) if kind == "tstz" else t
        if kind == "dec":
            return Decimal(str(r.choice(["0", "1.5", "-2.25", "1000", "0.001", "12.345"])))
        if kind == "bool":
            return bool(r.random() < 0.5)
        raise ValueError(kind)

    def literal(self, col: Column) -> str:
        vals = self.values[col.name]
        v = self._pick(vals) if vals and self.rng.random() < 0.7 else self._random_value(col.kind)
        return sql_literal(col.kind, v)

    def atom(self) -> str:
        r = self.rng
        col = self._pick(self.case.columns)
        kind = col.kind
        name = col.name
        shape = str(r.choice(["cmp", "cmp", "cmp", "between", "in", "isnull", "like", "colcol", "expr", "cmp"]))
        if kind == "bool":
            return str(r.choice([name, f"NOT {name}", f"{name} = true", f"{name} IS NULL", f"{name} <> false"]))
        if shape == "isnull":
            return f"{name} IS {'NOT ' if r.random() < 0.5 else ''}NULL"
        if shape == "like" and kind == "str":
            base = self.values[name] and self._pick(self.values[name]) or "a"
            cut = int(r.integers(0, len(base) + 1))
            pat = str(r.choice([base[:cut] + "%", "%" + base[cut:], "_" + base[1:], base, "%", "a%b%", "_%"]))
            pat = pat.replace("'", "''")
            return f"{name} {'NOT ' if r.random() < 0.2 else ''}LIKE '{pat}'"
        if shape == "colcol":
            partners = [c for c in self.case.columns if c is not col and _comparable(kind, c.kind)]
            if partners:
                other = self._pick(partners)
                return f"{name} {r.choice(OPS)} {other.name}"
        if shape == "expr":
            e = self._expression(col)
            if e:
                return e
        if shape == "between":
            lo, hi = self.literal(col), self.literal(col)
            return f"{name} {'NOT ' if r.random() < 0.2 else ''}BETWEEN {lo} AND {hi}"
        if shape == "in":
            m = int(r.choice([1, 2, 3, 5, 8, 40]))
            lits = [self.literal(col) for _ in range(m)] + (["NULL"] if r.random() < 0.15 else [])
            return f"{name} {'NOT ' if r.random() < 0.2 else ''}IN ({', '.join(lits)})"
        op = str(r.choice(OPS))
        lit = self.literal(col)
        return f"{lit} {FLIP[op]} {name}" if r.random() < 0.2 else f"{name} {op} {lit}"

    def _expression(self, col: Column) -> str | None:
        r = self.rng
        n, k = col.name, col.kind
        op = str(r.choice(OPS))
        if k in ("int", "long"):
            return str(r.choice([f"{n} + 3 {op} {int(r.integers(-5, 100))}", f"{n} * 2 {op} {int(r.integers(-5, 200))}",
                                 f"abs({n}) {op} {int(r.integers(0, 50))}", f"-{n} {op} {int(r.integers(-50, 5))}",
                                 f"{n} - {n} = 0"]))
        if k == "float":
            return str(r.choice([f"{n} + 1 {op} {float(r.integers(-50, 50))}", f"abs({n}) {op} 10",
                                 f"{n} / 2 {op} 3.5"]))
        if k == "dec":
            return str(r.choice([f"{n} * 2 {op} 10", f"{n} + 0.5 {op} 1", f"abs({n}) {op} 100"]))
        if k == "str":
            return str(r.choice([f"length({n}) {op} {int(r.integers(0, 4))}",
                                 f"substring({n}, 1, 1) {op} '{self._pick(['a', 'b', 'é', ''])}'"]))
        if k == "date":
            return str(r.choice([f"year({n}) {op} {int(r.integers(2019, 2024))}",
                                 f"month({n}) IN ({int(r.integers(1, 13))}, {int(r.integers(1, 13))})"]))
        if k in ("ts", "tstz"):
            return f"year({n}) {op} {int(r.integers(2019, 2024))}"
        return None

    def dim_atom(self) -> str:
        r = self.rng
        c = str(r.choice(["cat", "dv", "dd"]))
        vals = self.dim_values[c]
        kind = {"cat": "str", "dv": "int", "dd": "date"}[c]
        v = self._pick(vals) if vals else self._random_value(kind)
        if c == "cat" and r.random() < 0.3:
            return f"cat IS {'NOT ' if r.random() < 0.5 else ''}NULL"
        if r.random() < 0.3:
            return f"{c} IN ({sql_literal(kind, v)}, {sql_literal(kind, self._pick(vals) if vals else v)})"
        return f"{c} {r.choice(OPS)} {sql_literal(kind, v)}"

    def join_atom(self, fact_name: str, dim_name: str) -> str:
        where = self.dim_atom()
        if self.rng.random() < 0.3:
            where = f"{where} AND {self.dim_atom()}"
        return f"fk IN (SELECT dk FROM {dim_name} WHERE {where})"

    def predicate(self, depth: int = 2, dim_name: str | None = None) -> str:
        """A random filter; with ``dim_name``, sometimes ANDed with a semi-join to the dimension
        (a top-level conjunct: the shape a single-table filter can carry)."""
        r = self.rng
        if dim_name is not None and r.random() < 0.2:
            join = self.join_atom("", dim_name)
            return join if r.random() < 0.4 else f"{join} AND ({self.predicate(depth)})"
        if depth == 0 or r.random() < 0.45:
            return self.atom()
        parts = [self.predicate(depth - 1) for _ in range(int(r.integers(2, 4)))]
        glue = " AND " if r.random() < 0.55 else " OR "
        text = glue.join(f"({p})" for p in parts)
        return f"NOT ({text})" if r.random() < 0.1 else text

    def workload_predicate(self) -> str:
        """A predicate as the workload states it (mostly simple: the cuts come from its atoms)."""
        r = self.rng
        if r.random() < 0.2:
            return "JOIN:" + self.dim_atom()
        return self.atom() if r.random() < 0.6 else f"({self.atom()}) AND ({self.atom()})" if r.random() < 0.6 \
            else f"({self.atom()}) OR ({self.atom()})"


def _comparable(a: str, b: str) -> bool:
    num = {"int", "long", "float", "dec"}
    return (a in num and b in num) or a == b or {a, b} <= {"ts", "tstz"} and a == b or {a, b} == {"date", "date"}


def workload_sql(case: RandomCase, fact_name: str, dim_name: str) -> list[str]:
    out = []
    for p in case.workload_predicates:
        if p.startswith("JOIN:"):
            out.append(f"SELECT f.rid FROM {fact_name} f JOIN {dim_name} d ON f.fk = d.dk WHERE {p[5:]}")
        else:
            out.append(f"SELECT * FROM {fact_name} WHERE {p}")
    return out


def queries(case: RandomCase, rng: np.random.Generator, count: int, dim_name: str) -> list[str]:
    """``count`` query filters over the fact table: fresh random ones and the workload's own."""
    gen = PredicateGen(case, rng)
    out = []
    for _ in range(count):
        x = rng.random()
        if x < 0.25 and case.workload_predicates:
            p = case.workload_predicates[int(rng.integers(0, len(case.workload_predicates)))]
            out.append(f"fk IN (SELECT dk FROM {dim_name} WHERE {p[5:]})" if p.startswith("JOIN:") else p)
        else:
            out.append(gen.predicate(2, dim_name))
    return out


def extra_rows(case: RandomCase, rng: np.random.Generator, start_rid: int, n: int) -> pa.Table:
    """Rows appended after the layout (a file outside it): drawn from the same columns."""
    idx = rng.integers(0, case.n, n)
    t = case.fact.take(pa.array(idx))
    return t.set_column(0, "rid", pa.array(np.arange(start_rid, start_rid + n, dtype=np.int64)))
