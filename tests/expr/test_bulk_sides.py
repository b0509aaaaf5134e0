"""Many cuts at once (``expr.sides.bulk_sides``, through ``layout.Evaluations.sides``): every
(filter, cut) answer equals the filter's own ``sides`` — random predicates over every kind
(ints, floats with NaN and infinities, strings, dates, decimals, booleans), ORs, NOTs, IN lists
with NULL, LIKE, IS NULL, column-vs-column comparisons, and joins whose key sets bound a
foreign key."""

from __future__ import annotations

import pyarrow as pa
from expr_gen import SCHEMA, atoms, predicates
from hypothesis import given
from hypothesis import strategies as st

from pando_iceberg.expr import ExprCut, JoinFilter, TableFilter
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.sides import T, bulk_sides, single_constraint
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
