"""Many cuts at once (``expr.sides.bulk_sides``, through ``layout.Evaluations.sides``): every
(filter, cut) answer equals the filter's own ``sides`` — random predicates over every kind
(ints, floats with NaN and infinities, strings, dates, decimals, booleans), ORs, NOTs, IN lists
with NULL, LIKE, IS NULL, column-vs-column comparisons, and joins whose key sets bound a
foreign key; and with join-induced literal cuts (``expr.filters.literal_sides``)."""

from __future__ import annotations

import pyarrow as pa
from expr_gen import SCHEMA, atoms, predicates
from hypothesis import given
from hypothesis import strategies as st

from pando_iceberg.expr import CutOrigin, ExprCut, JoinFilter, LiteralCut, TableFilter
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.sides import T, bulk_sides, single_constraint, single_term
from pando_iceberg.layout import Evaluations

DIM = pa.schema([("k", pa.int64()), ("x", pa.int64())])


def _filter(sql: str, keys: list[int] | None) -> TableFilter | None:
    try:
        f = TableFilter(sql, SCHEMA, table="t")
    except PandoExprError:
        return None
    if keys is None:
        return f
    join = JoinFilter("i", "dim", "k", TableFilter.from_sql("x < 3", DIM, "dim"), dim_keys=keys)
    return f.with_joins([join])


def _cut(sql: str) -> ExprCut | None:
    try:
        return ExprCut(sql, SCHEMA, "t")
    except PandoExprError:
        return None


KEYS = st.one_of(st.none(), st.lists(st.integers(-6, 6), min_size=0, max_size=4),
                 st.sampled_from([[2**40], list(range(-3, 4))]))


@given(st.lists(st.tuples(predicates(), KEYS), min_size=1, max_size=6),
       st.lists(st.one_of(atoms(), predicates()), min_size=1, max_size=10))
def test_bulk_answers_equal_the_filters_own(drawn_filters, drawn_cuts):
    filters = [f for (p, _), keys in drawn_filters if (f := _filter(p, keys)) is not None]
    cuts = list({c.key: c for p, _ in drawn_cuts if (c := _cut(p)) is not None}.values())
    got = Evaluations(pa.table({n: pa.nulls(0, t) for n, t in zip(SCHEMA.names, SCHEMA.types)})).sides(filters, cuts)
    for i, f in enumerate(filters):
        for j, c in enumerate(cuts):
            want = f.sides(c)
            assert (got.may_true[i, j], got.may_not_true[i, j]) == tuple(want), (f.to_sql(), c.key)


def test_single_constraint_cuts_are_answered_in_bulk():
    """The cuts the optimizer proposes from comparisons, ranges and IN lists are one constraint,
    answered in bulk (the filters are not asked one by one); a bulk answer that differs from the
    filter's own fails the test above."""
    f = TableFilter("i BETWEEN 1 AND 4 OR s = 'a'", SCHEMA, table="t")
    atoms_, own, extra = f.side_parts()
    kept = []
    for sql in ("i < 3", "i >= 5", "s IN ('a', 'b')", "d > DATE '1994-01-01'", "f <= 0.5", "m = 1.25", "b"):
        c = ExprCut(sql, SCHEMA, "t")
        one = single_constraint(atoms_, c.compiled_dnf(T, atoms_), c.compiled_dnf("NT", atoms_))
        assert one is not None, sql
        kept.append((c, one))
    not_single = ExprCut("i < 3 OR j > 2", SCHEMA, "t")
    assert single_constraint(atoms_, not_single.compiled_dnf(T, atoms_), not_single.compiled_dnf("NT", atoms_)) is None
    may_true, may_not, answered = bulk_sides(atoms_, [(own, extra)], [one for _, one in kept])
    assert answered.all()
    assert may_true[0].tolist() == [f.sides(c).may_true for c, _ in kept]
    assert may_not[0].tolist() == [f.sides(c).may_not_true for c, _ in kept]
    assert may_true[0].all()  # i >= 5, d, f, m and b: through s = 'a'
    assert may_not[0].tolist() == [True] * 7


# ---- join-induced literal cuts (§7): expr.filters.literal_sides through Evaluations.sides

DIMS = ("dim", "other")


def _joined(sql: str | None, joins: list[tuple[str, str | None, list[int] | None]]) -> TableFilter | None:
    """A filter on t (TRUE when ``sql`` is None) joining, per (dimension, its filter's SQL, key
    set), t.j to the dimension's key i (the dimension's schema is t's)."""
    try:
        f = TableFilter(sql, SCHEMA, table="t") if sql is not None else TableFilter.true(SCHEMA, "t")
        return f.with_joins([JoinFilter("j", dim, "i", TableFilter(p, SCHEMA, table=dim) if p is not None
                                        else TableFilter.true(SCHEMA, dim), dim_keys=keys) for dim, p, keys in joins])
    except PandoExprError:
        return None


def _literal(dim: str, origin: str, keys: list[int]) -> LiteralCut:
    return LiteralCut("j", keys, CutOrigin(dim_table=dim, dim_pk="i", predicate=origin))


PREDICATE = st.one_of(predicates().map(lambda p: p[0]), atoms().map(lambda p: p[0]))
SQL = st.one_of(st.none(), PREDICATE)
JOINS = st.lists(st.tuples(st.sampled_from(DIMS), SQL, st.one_of(st.none(), st.lists(st.integers(-6, 6), max_size=4))),
                 max_size=2, unique_by=lambda j: j[0])


@given(st.lists(st.tuples(SQL, JOINS), min_size=1, max_size=5),
       st.lists(st.tuples(st.sampled_from(DIMS), PREDICATE, st.lists(st.integers(-6, 6), max_size=4)),
                min_size=1, max_size=6))
def test_bulk_literal_answers_equal_the_filters_own(drawn_filters, drawn_cuts):
    """Every (filter, literal cut) answer of ``Evaluations.sides`` (``literal_sides``: the
    dimension filters' comparisons with the origin predicates in bulk) equals the filter's own
    ``sides`` — asked of other objects made from the same SQL, so that neither memo answers for
    the other."""
    def build():
        filters = [f for sql, joins in drawn_filters if (f := _joined(sql, joins)) is not None]
        return filters, [_literal(dim, origin, keys) for dim, origin, keys in drawn_cuts]

    filters, cuts = build()
    if not filters:
        return
    want = [[tuple(f.sides(c)) for c in cuts] for f in filters]
    filters, cuts = build()
    got = Evaluations(pa.table({n: pa.nulls(0, t) for n, t in zip(SCHEMA.names, SCHEMA.types)})).sides(filters, cuts)
    for i, f in enumerate(filters):
        for j, c in enumerate(cuts):
            assert (got.may_true[i, j], got.may_not_true[i, j]) == want[i][j], (f.to_sql(), c.key)


def test_range_cuts_are_one_term():
    """A range on one term (both ends, its NOT-TRUE side two conjunctions) is answered in bulk
    (``single_term``), the same as the filter's own answer; two terms are not."""
    f = TableFilter("i BETWEEN 1 AND 4 OR s = 'a'", SCHEMA, table="t")
    atoms_, own, extra = f.side_parts()
    cuts = [ExprCut(sql, SCHEMA, "t") for sql in ("i >= 5 AND i < 9", "i > 2 AND i <= 3", "d >= DATE '1994-01-01' "
                                                  "AND d < DATE '1995-01-01'", "i BETWEEN 7 AND 9")]
    ones = [single_term(atoms_, c.compiled_dnf(T, atoms_), c.compiled_dnf("NT", atoms_)) for c in cuts]
    assert all(one is not None for one in ones)
    two = ExprCut("i >= 5 AND j < 9", SCHEMA, "t")
    assert single_term(atoms_, two.compiled_dnf(T, atoms_), two.compiled_dnf("NT", atoms_)) is None
    may_true, may_not, answered = bulk_sides(atoms_, [(own, extra)], ones)
    assert answered.all()
    assert [(bool(a), bool(b)) for a, b in zip(may_true[0], may_not[0])] == [tuple(f.sides(c)) for c in cuts]
    g = TableFilter("i BETWEEN 1 AND 4", SCHEMA, table="t")
    atoms_, own, extra = g.side_parts()
    may_true, _, _ = bulk_sides(atoms_, [(own, extra)], ones)
    assert may_true[0].tolist() == [False, True, True, False]  # i in [5, 9) and [7, 9] miss [1, 4]
