"""Templates of a workload, and the draws they may take tomorrow (beyond the paper's §6.1).

The paper's candidate cuts are the training queries' own predicates, and its cost model
(§5) is evaluated on the training queries only. A layout is judged on tomorrow's queries: the
same templates with other literals. A literal cut at `l_shipdate < DATE '1995-03-15'` says
little about `DATE '1996-09-02'`. This module is the one place where we go beyond the paper:

1. **Templates.** Queries on a table are grouped by the shape of their filter: the filter's
   canonical SQL (``bind.py``) with every literal replaced by ``?`` (join filters included).
   Each literal of a template sits at a *site*: a comparison, BETWEEN, IN or ``LIKE 'x%'``
   whose other operand is a column. Sites on the same column form one *parameter group*.
2. **Parameters.** A group whose literals differ between the template's training draws is a
   parameter. One whose literals agree in all n training draws may be a constant of the
   template (TPC-H Q19's ``l_shipinstruct = 'DELIVER IN PERSON'``) or a parameter that happened
   to repeat (two Q6 draws of the same year: one chance in five). The template's agreeing
   groups are one pattern, seen n times; by Laplace's rule of succession (n − 1 repeats, no
   change seen) the next draw breaks it with probability 1/(n + 1). So a synthetic draw, with
   that probability, draws one of those groups (chosen uniformly) anew and keeps the others'
   training values (``_Group.constant``): a template of many designed constants (Q19 has four)
   keeps its pattern in n/(n + 1) of its draws. A group whose one value is repeated over
   several sites keeps the repetition: each distinct literal is replaced by one new value.
   Literals inside join filters are treated so too: three draws of ``c_region_key = 2 AND
   c_segment = ?`` may be a region that happened to repeat, and a draw naming another region
   is what lets the optimizer weigh the attribute-range cuts (``attribute_ranges.py``) that
   decide every region against the literal cuts of region 2 alone.
   - Range groups (``<``, ``<=``, ``>``, ``>=``, BETWEEN on numbers, decimals, dates,
     timestamps) move together: the draw's anchor (its smallest literal) is moved to a new
     anchor and every literal of the group is shifted with it, so the range keeps its width.
     New anchors lie on the lattice the training anchors lie on (whole years / months for
     dates that are all Jan 1st / the 1st; otherwise the gcd of the anchors' differences;
     floats: continuous). Half of them (``DATA_SHARE``) are drawn as the data lies: the
     lattice point at or below a random sample row's value. Tomorrow's literals may lie anywhere
     in the data, but a column's range can be mostly empty tail (taxi durations reach 1,440
     minutes, 98 % of trips take under an hour): drawn uniformly over [min, max], half of a
     duration template's draws fell where no row lies and taught the optimizer nothing
    . The other half are uniform over the training
     anchors' range widened by one expected gap on each side (a few training draws may
     cluster by chance: three 30-day windows of a 5-year range fell within 11 months in a
     test).
   - Point groups (``=``, ``<>``, IN) draw new values from the column's distinct values in
     the sample (restricted to the widened range for ordered columns); an IN list keeps its
     length.
   - A group with one training value has no lattice or spread to learn from: ranges move
     as the data lies (a sample row's value) on the grain of their type (whole years or
     months for dates on the 1st, else one day, one unit, one unit of the decimal's scale).
   - ``LIKE 'prefix%'`` draws the same number of leading characters of a sample value.
   - ``LIKE '%x%'`` and predicates over expressions keep their literals.
   - Sites inside join filters (``fk IN (SELECT pk FROM dim WHERE p)``, multi-hop) are
     parameters too, drawn from a sample of the dimension table: a held-out region, brand or
     month gets its literal cuts (§7) among the candidates. "As the data lies" is then as the
     table's rows lie: the dimension's sample rows its sample's foreign keys reference (one per
     referencing row; ``_Generator._rows``), when the dimension's sample holds its key — a date
     dimension spans two centuries, the sales five years, and a window drawn at a random row
     of it reads nothing on any layout. Range groups whose anchors move in
     lockstep in every training draw (TPC-H Q3: ``l_shipdate > ?1 AND o_orderdate < ?1``)
     are shifted together.
3. **Expected cost.** Each template gets ``draws`` synthetic draws built from randomly chosen
   training draws (seeded). The optimizer's workload is the training draws plus the synthetic
   ones, each template keeping its total training weight spread evenly over its draws, so the
   one cost model (``layout/cost.py``) minimizes a Monte-Carlo estimate of the expected cost
   over the template's parameter distribution. The candidate cuts are the simple predicates
   of all of them (§6.1's rule, applied to the wider workload).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from pando_iceberg.expr import JoinFilter, TableFilter
from pando_iceberg.expr.bind import DIALECT
from pando_iceberg.expr.evaluate import arrow_kind
from pando_iceberg.expr.values import TypedValue, add_months, days_to_date, fold, render

__all__ = [
    "Template",
    "TemplateWorkload",
    "expected_workload",
    "group_templates",
    "literal_columns",
    "range_columns",
    "template_key",
    "to_line",
    "typed_value",
]

_RANGE_OPS = (exp.LT, exp.LTE, exp.GT, exp.GTE)
_POINT_OPS = (exp.EQ, exp.NEQ)
_ORDERED = {"int", "decimal", "float", "date", "timestamp", "timestamp_ntz"}
_PREFIX = re.compile(r"^[^%_\\]+%$")
DATA_SHARE = 0.5  # share of synthetic anchors drawn as the data lies (``_Generator._domain``)


@dataclass(frozen=True)
class _Site:
    column: str
    role: str  # "range" | "point" | "prefix"


def _column_of(term: exp.Expression) -> str | None:
    """The column a literal is compared with (a plain column, or one cast by bind's coercion)."""
    if isinstance(term, exp.Cast) and isinstance(term.this, exp.Column):
        term = term.this
    return term.name.lower() if isinstance(term, exp.Column) else None


def range_columns(queries: Iterable[tuple[TableFilter, float]]) -> list[tuple[str, float]]:
    """Columns the queries compare with literal ranges (<, <=, >, >=, BETWEEN), and foreign keys
    their joins' key sets bound to a range (``TableFilter.key_range_cuts``), with the total
    weight of the queries doing so, heaviest first."""
    weight: dict[str, float] = {}
    for f, w in queries:
        cols = {s.column for _, s in _sites(f.expr) if s.role == "range"} if not f.is_true_expr() else set()
        cols |= {c.lower() for c in f.key_ranges()}
        for col in cols:
            weight[col] = weight.get(col, 0.0) + float(w)
    return sorted(weight.items(), key=lambda cw: (-cw[1], cw[0]))


def _sites(expr: exp.Expression) -> list[tuple[exp.Expression, _Site]]:
    """The literal nodes of a canonical filter that are parameters of its shape, in a fixed
    (depth-first) order, each with the column it is compared with and how."""
    out: list[tuple[exp.Expression, _Site]] = []
    for node in expr.walk(bfs=False):
        if isinstance(node, _RANGE_OPS + _POINT_OPS):
            col = _column_of(node.this)
            if col is not None and fold(node.expression) is not None:
                out.append((node.expression, _Site(col, "range" if isinstance(node, _RANGE_OPS) else "point")))
        elif isinstance(node, exp.Between):
            col = _column_of(node.this)
            if col is not None:
                for part in ("low", "high"):
                    if fold(node.args[part]) is not None:
                        out.append((node.args[part], _Site(col, "range")))
        elif isinstance(node, exp.In) and node.args.get("query") is None:
            col = _column_of(node.this)
            if col is not None:
                out += [(e, _Site(col, "point")) for e in node.expressions if fold(e) is not None]
        elif isinstance(node, exp.Like):
            col = _column_of(node.this)
            pattern = fold(node.expression)
            if col is not None and pattern is not None and _PREFIX.match(str(pattern.value)):
                out.append((node.expression, _Site(col, "prefix")))
    return out


def literal_columns(f: TableFilter, role: str | None = None) -> list[str]:
    """The columns (lower case) the filter's own part compares with literals (its sites), first seen
    first; ``role``: only the sites of that role ("point": ``=``, ``<>``, IN; "range"; "prefix")."""
    if f.is_true_expr():
        return []
    return list(dict.fromkeys(s.column for _, s in _sites(f.expr) if role is None or s.role == role))


def _placeholders(node: exp.Expr) -> str:
    return node.transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n).sql(DIALECT)


def template_key(f: TableFilter) -> str:
    """The filter's shape: canonical SQL with every literal as ``?`` (join filters included)."""
    parts = [] if f.is_true_expr() else [_placeholders(f.expr.copy())]
    for j in f.joins:
        parts.append(_placeholders(sqlglot.parse_one(j.to_sql(), read=DIALECT)))
    return " AND ".join(parts) or "TRUE"


@dataclass
class Template:
    """The training draws of one filter shape, and what varies between them."""

    key: str
    draws: list[tuple[TableFilter, float]]
    parameters: dict[str, str] = field(default_factory=dict)  # column → role of its varying group
    synthetic: int = 0

    @property
    def weight(self) -> float:
        return float(sum(w for _, w in self.draws))

    def to_json(self) -> dict:
        return {"template": self.key, "training_draws": len(self.draws), "synthetic_draws": self.synthetic,
                "parameters": dict(self.parameters)}


def group_templates(queries: Iterable[tuple[TableFilter, float]]) -> list[Template]:
    """Queries grouped by ``template_key``, in first-seen order."""
    out: dict[str, Template] = {}
    for f, w in queries:
        key = template_key(f)
        out.setdefault(key, Template(key, [])).draws.append((f, float(w)))
    return list(out.values())


@dataclass
class TemplateWorkload:
    """What the optimizer learns from: training + synthetic draws, and their candidate cuts."""

    queries: list[tuple[TableFilter, float]]
    templates: list[Template]
    # Training queries + draws independent of ``queries``' (another random stream), weighted
    # alike: how layouts learned from ``queries`` are compared (``in_block.select_layout``).
    validation: list[tuple[TableFilter, float]] = field(default_factory=list)

    def candidate_cuts(self) -> list[Any]:
        """§6.1's rule over the wider workload: every simple predicate once, by key."""
        out: dict[str, Any] = {}
        for f, _ in self.queries:
            for cut in f.candidate_cuts():
                out.setdefault(cut.key, cut)
        return list(out.values())

    def describe(self) -> list[dict]:
        return [t.to_json() for t in self.templates]


# ------------------------------------------------------------------ values on a line


def _date_grain(days: Sequence[int]) -> str:
    ds = [days_to_date(d) for d in days]
    if all(d.day == 1 and d.month == 1 for d in ds):
        return "year"
    if all(d.day == 1 for d in ds):
        return "month"
    return "day"


def _month_index(days: int) -> int:
    d = days_to_date(days)
    return d.year * 12 + d.month - 1


class _Column:
    """What a sample says about one column: its range and its distinct values."""

    def __init__(self, sample: pa.Table | None, name: str):
        names = {n.lower(): n for n in sample.schema.names} if sample is not None else {}
        self.array = sample.column(names[name]).combine_chunks() if sample is not None and name in names else None
        self._distinct: list[Any] | None = None
        self._values: pa.Array | None = None

    def distinct(self) -> list[Any]:
        if self._distinct is None:
            self._distinct = ([] if self.array is None
                              else [v for v in pc.unique(self.array).to_pylist() if v is not None])
        return self._distinct

    def _finite(self) -> pa.Array | None:
        """The values to draw among: not null, and finite for a float column (±inf and NaN are
        no bounds to draw in)."""
        if self._values is None and self.array is not None:
            arr = self.array
            if pa.types.is_floating(arr.type):
                arr = arr.filter(pc.is_finite(arr))
            self._values = arr.drop_null()
        return self._values

    def range(self, kind: str) -> tuple[Any, Any]:
        """The finite values' range."""
        arr = self._finite()
        if arr is None or len(arr) == 0:
            return None, None
        mm = pc.min_max(arr).as_py()
        return to_line(mm["min"], kind), to_line(mm["max"], kind)

    def draw(self, rng: random.Random, kind: str) -> Any:
        """One sample row's value on the literal's line: a value drawn like the data (None
        when the sample has none)."""
        arr = self._finite()
        if arr is None or len(arr) == 0:
            return None
        return to_line(arr[rng.randrange(len(arr))].as_py(), kind)


def to_line(v: Any, kind: str) -> Any:
    """A sample value (Python, from Arrow) on the literal's number line (TypedValue.value)."""
    import datetime as dt

    if kind == "date" and isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    if kind.startswith("timestamp") and isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return int((v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) / dt.timedelta(microseconds=1))
    if kind == "decimal" and not isinstance(v, Decimal):
        return Decimal(str(v))
    return v


def _on_line(v: TypedValue | None, kind: str) -> bool:
    """Is the literal ``v`` a value on the number line (or the domain) of a column of ``kind``, so
    that new values can be drawn for it from the column's sample? Not NULL, not NaN or infinite,
    and of the column's own type (a timestamp literal compared with a date column's cast is not)."""
    if v is None or v.value is None:
        return False
    if kind in ("int", "date", "timestamp", "timestamp_ntz"):
        return v.kind == kind and isinstance(v.value, int) and not isinstance(v.value, bool)
    if kind == "decimal":
        return v.kind in ("decimal", "int") and isinstance(v.value, (Decimal, int)) and Decimal(v.value).is_finite()
    if kind == "float":
        return v.kind in ("float", "int", "decimal") and math.isfinite(float(v.value))
    return v.kind == kind


def typed_value(value: Any, old_kind: str) -> TypedValue:
    """A value on a literal's line as a typed literal: temporal kinds keep the literal's kind,
    others take the value's own (the binder coerces it to the column again)."""
    if old_kind in ("date", "timestamp", "timestamp_ntz"):
        return TypedValue(old_kind, int(value))
    kinds = {bool: "bool", int: "int", float: "float", Decimal: "decimal", str: "string"}
    return TypedValue(kinds.get(type(value), old_kind), value)


def _tree(f: TableFilter, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], TableFilter]]:
    """The filter and, depth first, the dimension filters of its joins (multi-hop), by path."""
    out = [(path, f)]
    for i, j in enumerate(f.joins):
        out += _tree(j.dim_filter, path + (i,))
    return out


def _all_sites(f: TableFilter) -> list[tuple[tuple[int, ...], exp.Expression, _Site]]:
    return [(path, node, site) for path, g in _tree(f) if not g.is_true_expr() for node, site in _sites(g.expr)]


def _rebuild(f: TableFilter, path: tuple[int, ...], values: dict[tuple[int, ...], list[TypedValue]]) -> TableFilter:
    """``f`` with the literals of its sites (and of its joins' dimension filters) replaced."""
    joins = [JoinFilter(j.column, j.dim_table, j.dim_pk, _rebuild(j.dim_filter, path + (i,), values))
             for i, j in enumerate(f.joins)]
    if f.is_true_expr():
        return TableFilter(None, f.schema, joins, f.table)
    expr = f.expr.copy()
    for (node, _), v in zip(_sites(expr), values.get(path, [])):
        node.replace(render(v, compared_to_float=True))
    return TableFilter(expr, f.schema, joins, f.table)


@dataclass
class _Group:
    """Sites of one parameter: same filter (path), column and role; range groups whose anchors
    move in lockstep across the draws (``l_shipdate > ?1 AND o_orderdate < ?1``) are merged."""

    members: list[tuple[tuple[int, ...], str, list[int]]]  # (path, column, site indices)
    role: str
    kind: str
    constant: bool = False  # the same literals in every training draw (module docstring, item 2)


class _Generator:
    """Synthetic draws of one template (module docstring, items 2 and 3)."""

    def __init__(self, template: Template, samples: dict[str, pa.Table], columns: dict, rng: random.Random):
        self.t, self.samples, self.columns, self.rng = template, samples, columns, rng
        first = _all_sites(template.draws[0][0])
        self.sites = [(path, s) for path, _, s in first]
        self.tables = {path: g for path, g in _tree(template.draws[0][0])}
        self.values: list[list[TypedValue]] = []  # values[d][i]: the literal of site i in draw d
        for f, _ in template.draws:
            sites = _all_sites(f)
            if [(p, s) for p, _, s in sites] != self.sites:  # same key, other site structure: leave it
                self.values = []
                break
            self.values.append([fold(node) for _, node, _ in sites])  # type: ignore[misc]
        by_key: dict[tuple, list[int]] = {}
        for i, (path, s) in enumerate(self.sites):
            by_key.setdefault((path, s.column, s.role), []).append(i)
        self.groups: list[_Group] = []
        for (path, col, role), ix in by_key.items():
            kind = self._kind(path, col)
            constant = not self._varies(ix)
            if not self.values or kind is None or (role == "range" and kind not in _ORDERED):
                continue
            if not all(_on_line(row[i], kind) for row in self.values for i in ix):
                continue  # NULL, NaN or a literal of another type (a cast term): its training values stay
            self.groups.append(_Group([(path, col, ix)], role, kind, constant=constant))
        self._merge_lockstep()
        # The groups that never varied: one of them is drawn anew with probability 1/(n + 1).
        self.p_new = 1.0 / (len(self.values) + 1)
        self.constants = [g for g in self.groups if g.constant]
        for g in self.groups:
            for _, col, _ in g.members:
                template.parameters.setdefault(col, f"{g.role}, one value in training" if g.constant else g.role)

    # -- what the training draws say

    def _kind(self, path: tuple[int, ...], column: str) -> str | None:
        f = self.tables[path]
        names = {x.name.lower(): x for x in f.schema} if f.schema is not None else {}
        k = arrow_kind(names[column].type) if column in names else None
        return k[0] if k else None

    def _varies(self, ix: list[int]) -> bool:
        return any([row[i] for i in ix] != [self.values[0][i] for i in ix] for row in self.values[1:])

    def _anchors(self, ix: list[int]) -> list[Any]:
        return [min(row[i].value for i in ix) for row in self.values]

    def _merge_lockstep(self) -> None:
        ranges = [g for g in self.groups if g.role == "range"]
        merged: list[_Group] = []
        for g in ranges:
            a = self._anchors(g.members[0][2])
            for m in merged:
                b = self._anchors(m.members[0][2])
                # Groups with one value each move together only when it is the same value.
                if m.kind == g.kind and m.constant == g.constant and len({x - y for x, y in zip(a, b)}) == 1 \
                        and (not g.constant or a[0] == b[0]):
                    m.members += g.members
                    break
            else:
                merged.append(g)
        self.groups = merged + [g for g in self.groups if g.role != "range"]

    def _sample_of(self, table: str | None) -> pa.Table | None:
        key = (table or "").split(".")[-1].lower()
        return next((t for name, t in self.samples.items() if name.split(".")[-1].lower() == key), None)

    def _rows(self, path: tuple[int, ...]) -> pa.Table | None:
        """The rows the filter at ``path`` is drawn from: the table's sample at the root; for a
        join's dimension filter, the dimension's sample rows the parent's rows reference (one per
        parent row with a match: its key's row), so that a dimension value is drawn as the fact's
        rows lie (module docstring, item 2) — a date of ``date_dim`` that no sale has makes a
        draw that reads nothing and teaches nothing. The dimension's own sample when its sample
        lacks the key column or no parent row finds its key there."""
        if not path:
            return self._sample_of(self.tables[path].table)
        key = ("rows", tuple(self._chain(path)))
        if key not in self.columns:
            join = self.tables[path[:-1]].joins[path[-1]]
            dim = self._sample_of(join.dim_table)
            parent = self._rows(path[:-1])
            self.columns[key] = dim
            if dim is not None and parent is not None:
                fk = {n.lower(): n for n in parent.schema.names}.get(join.column.lower())
                pk = {n.lower(): n for n in dim.schema.names}.get(join.dim_pk.lower())
                if fk is not None and pk is not None:
                    at = pc.index_in(parent.column(fk), value_set=dim.column(pk).combine_chunks())
                    at = pc.drop_null(at)
                    if len(at):
                        self.columns[key] = dim.take(at)
        return self.columns[key]

    def _chain(self, path: tuple[int, ...]) -> list[str]:
        out = [(self.tables[()].table or "").split(".")[-1].lower()]
        for n in range(1, len(path) + 1):
            j = self.tables[path[:n - 1]].joins[path[n - 1]]
            out.append(f"{j.column.lower()}->{j.dim_table.split('.')[-1].lower()}.{j.dim_pk.lower()}")
        return out

    def _column(self, path: tuple[int, ...], column: str) -> _Column:
        key = (tuple(self._chain(path)), column)
        if key not in self.columns:
            self.columns[key] = _Column(self._rows(path), column)
        return self.columns[key]

    # -- one synthetic draw

    def draw(self) -> TableFilter | None:
        if not self.groups:
            return None
        d = self.rng.randrange(len(self.values))
        new = list(self.values[d])
        anew = self.rng.choice(self.constants) if self.constants and self.rng.random() < self.p_new else None
        for g in self.groups:
            if g.constant and g is not anew:
                continue  # keeps the training value
            if g.role == "range":
                self._shift(g, d, new)
            elif g.role == "point":
                path, col, ix = g.members[0]
                self._points(path, col, g.kind, ix, new, g.constant)
            else:
                path, col, ix = g.members[0]
                self._prefix(path, col, ix, new)
        values: dict[tuple[int, ...], list[TypedValue]] = {}
        for (path, _), v in zip(self.sites, new):
            values.setdefault(path, []).append(v)
        try:
            return _rebuild(self.t.draws[d][0], (), values)
        except Exception:  # a drawn value the binder refuses (e.g. out of the type's range)
            return None

    # -- ranges: shift the whole group along the lattice of the training anchors

    def _shift(self, g: _Group, d: int, new: list) -> None:
        path, col, ix = g.members[0]
        kind = g.kind
        anchors = self._anchors(ix)
        own = anchors[d]
        column = self._column(path, col)
        lo_s, hi_s = column.range(kind)
        every = [i for _, _, mix in g.members for i in mix]

        def datum(on_line: Any) -> Any:  # draws a sample row's value, on the line the anchors are on
            def draw() -> Any:
                v = column.draw(self.rng, kind)
                return None if v is None else on_line(v)
            return draw

        if kind == "date" and _date_grain([int(a) for a in anchors]) in ("year", "month"):
            step = 12 if _date_grain([int(a) for a in anchors]) == "year" else 1
            bounds = tuple(None if x is None else _month_index(int(x)) for x in (lo_s, hi_s))
            months = self._lattice([_month_index(int(a)) for a in anchors], step, bounds,
                                   datum(lambda v: _month_index(int(v)))) - _month_index(int(own))
            for i in every:
                new[i] = TypedValue("date", add_months(int(self.values[d][i].value), months))
            return
        if kind == "float":
            lo, hi = self._domain([float(a) for a in anchors], (lo_s, hi_s), datum(float))
            delta: Any = self.rng.uniform(lo, hi) - float(own)
        elif kind == "decimal":
            scale = max(-Decimal(a).as_tuple().exponent for a in anchors)  # type: ignore[operator]
            q = Decimal(1).scaleb(-scale)
            bounds = tuple(None if x is None else int(Decimal(x) / q) for x in (lo_s, hi_s))
            delta = (self._lattice([int(Decimal(a) / q) for a in anchors], 0, bounds,
                                   datum(lambda v: int(Decimal(v) / q))) - int(Decimal(own) / q)) * q
        else:  # int, date (day grain), timestamps: integers on their line
            bounds = tuple(None if x is None else int(x) for x in (lo_s, hi_s))
            delta = self._lattice([int(a) for a in anchors], 0, bounds, datum(int)) - int(own)
        for i in every:
            v = self.values[d][i]
            new[i] = TypedValue(v.kind, v.value + (Decimal(delta) if v.kind == "decimal" else type(v.value)(delta)))

    def _lattice(self, anchors: list[int], step: int, bounds: tuple[Any, ...], datum: Any) -> int:
        """A point of the lattice ``min(anchors) + g·Z`` (g: ``step``, or the gcd of the
        anchors' differences, one unit when they are all equal): uniform over the widened
        range, or the one at or below a sample row's value (``_domain``)."""
        base = min(anchors)
        g = step
        if not g:
            for a in anchors:
                g = math.gcd(g, a - base)
        g = g or 1
        lo, hi = self._domain([float(a) for a in anchors], bounds, datum)
        if lo == hi:  # a sample row's value: the range of the lattice that holds it starts here
            return base + g * math.floor((lo - base) / g)
        k_lo, k_hi = math.ceil((lo - base) / g), math.floor((hi - base) / g)
        return base if k_hi < k_lo else base + g * self.rng.randint(k_lo, k_hi)

    def _domain(self, anchors: list[float], bounds: tuple[Any, ...], datum: Any) -> tuple[float, float]:
        """Where a new anchor is drawn: with probability ``DATA_SHARE`` at a sample row's value
        (``datum()``: tomorrow's literals may lie anywhere in the data, drawn as the data lies),
        else uniform over the training anchors' range widened by one expected gap (they may
        also cluster). One distinct anchor has no gap: a sample row's value."""
        if bounds[0] is not None and bounds[1] is not None and (
                len(set(anchors)) == 1 or self.rng.random() < DATA_SHARE):
            v = datum()
            if v is not None:
                return float(v), float(v)
        return _widened(anchors, bounds)

    # -- points and prefixes: values from the sample

    def _points(self, path: tuple[int, ...], col: str, kind: str, ix: list[int], new: list,
                constant: bool = False) -> None:
        """New values for the sites ``ix``; a ``constant`` group maps each of its distinct
        literals to one new value (a repeated literal stays repeated)."""
        values = self._column(path, col).distinct()
        if kind in _ORDERED and values and not constant and self.rng.random() >= DATA_SHARE:
            lo, hi = _widened([float(row[i].value) for row in self.values for i in ix], (None, None))
            values = [v for v in values if lo <= float(to_line(v, kind)) <= hi] or values
        keys = [new[i] if constant else n for n, i in enumerate(ix)]  # sites with one key get one value
        distinct = list(dict.fromkeys(keys))
        if len(values) < len(distinct):
            return
        picked = dict(zip(distinct, self.rng.sample(values, len(distinct))))
        for i, key in zip(ix, keys):
            new[i] = typed_value(to_line(picked[key], kind), new[i].kind)

    def _prefix(self, path: tuple[int, ...], col: str, ix: list[int], new: list) -> None:
        values = [v for v in self._column(path, col).distinct() if isinstance(v, str)]
        for i in ix:
            width = len(str(new[i].value)) - 1
            pool = [v[:width] for v in values if len(v) >= width and not re.search(r"[%_\\]", v[:width])]
            if pool:
                new[i] = TypedValue("string", self.rng.choice(pool) + "%")


def _widened(anchors: list[float], bounds: tuple[Any, ...]) -> tuple[float, float]:
    """The anchors' range widened by one expected gap on each side, clipped to ``bounds``
    (the column's range in the sample) but never narrower than the anchors themselves."""
    lo, hi = min(anchors), max(anchors)
    distinct = len(set(anchors))
    gap = (hi - lo) / (distinct - 1) if distinct > 1 else 0.0
    lo, hi = lo - gap, hi + gap
    if bounds[0] is not None:
        lo = max(lo, min(float(bounds[0]), min(anchors)))
    if bounds[1] is not None:
        hi = min(hi, max(float(bounds[1]), max(anchors)))
    return lo, hi


def expected_workload(queries: Iterable[tuple[TableFilter, float]], sample: pa.Table, draws: int = 16,
                      seed: int = 0, dimensions: dict[str, pa.Table] | None = None,
                      validation_draws: int = 0) -> TemplateWorkload:
    """The training queries plus ``draws`` synthetic draws per template with parameters
    (module docstring); ``draws = 0`` gives the training queries unchanged (the paper).
    ``sample``: the table's sample; ``dimensions``: samples of the dimension tables its join
    filters name (by table name), for parameters inside join filters. ``validation_draws``:
    as many more draws per template from an independent random stream, kept apart in
    ``validation`` (the training queries plus them; the training queries alone when 0)."""
    queries = [(f, float(w)) for f, w in queries]
    templates = group_templates(queries)
    if not queries or (draws <= 0 and validation_draws <= 0):
        return TemplateWorkload(queries, templates, list(queries))
    samples = {**(dimensions or {}), (queries[0][0].table or ""): sample}
    columns: dict = {}

    def drawn(rng: random.Random, n: int, count: bool) -> list[tuple[TableFilter, float]]:
        out: list[tuple[TableFilter, float]] = []
        for t in templates:
            gen = _Generator(t, samples, columns, rng)
            extra = [f for f in (gen.draw() for _ in range(n if gen.groups else 0)) if f is not None]
            if count:
                t.synthetic = len(extra)
            share = t.weight / (len(t.draws) + len(extra)) if extra else None
            out += [(f, w if share is None else share) for f, w in t.draws]
            out += [(f, share) for f in extra]  # type: ignore[misc]
        return out

    learned = drawn(random.Random(seed), draws, True) if draws > 0 else list(queries)
    validation = drawn(random.Random(f"{seed}-validation"), validation_draws, False) if validation_draws > 0 \
        else list(queries)
    return TemplateWorkload(learned, templates, validation)
