"""sides() caches (atom tables shared per schema, keyed and compiled DNFs on filters and
cuts, memoized satisfiability and dimension-predicate comparisons) never change an answer:
warm answers, asked in any order over shared objects, equal the uncached path (fresh
objects, every memo bypassed, one question each)."""

import contextlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pando_iceberg.expr.filters as filters_mod
from expr_gen import SCHEMA, examples, predicates
from pando_iceberg.expr import CutOrigin, ExprCut, LiteralCut, PandoExprError, TableFilter
from pando_iceberg.expr.domain import Domain, Span
from pando_iceberg.expr.sides import AtomTable, clear_caches, keyed_dnf
from pando_iceberg.workload import arrow_key_provider
from test_literal_cuts import FACT, chain_filter, star


def _compile(atoms, dnf):
    return None if dnf is None else atoms.compile(keyed_dnf(dnf))


def _bind_origin(cut, dim_filter):
    return TableFilter.from_sql(cut.origin.predicate, dim_filter.schema, cut.origin.dim_table,
                                schemas=dim_filter.dim_schemas())


@contextlib.contextmanager
def uncached():
    """The path without memoization: every cache layer of sides() recomputes."""
    clear_caches()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(AtomTable, "shared", staticmethod(AtomTable))
        mp.setattr(TableFilter, "_satisfiable_with", lambda self, cols: self._compute_satisfiable_with(frozenset(cols)))
        mp.setattr(TableFilter, "filter_sides", lambda self, other: self._compute_filter_sides(other))
        mp.setattr(TableFilter, "_own_compiled", lambda self, atoms: _compile(atoms, self._own_dnf()))
        mp.setattr(TableFilter, "_to_cut", lambda self: ExprCut(self.expr.sql("spark"), self.schema, self.table))
        mp.setattr(ExprCut, "compiled_dnf", lambda self, polarity, atoms: _compile(atoms, self.dnf(polarity)))
        mp.setattr(filters_mod, "_origin_filter", _bind_origin)
        yield
    clear_caches()


# Same column names, other types: a shared atom table must not be reused across them.
OTHER = pa.schema([("i", pa.decimal128(9, 1)), ("f", pa.float32()), ("s", pa.string()), ("d", pa.date32()),
                   ("m", pa.decimal128(9, 3)), ("b", pa.bool_()), ("j", pa.int64())])


def _uncached_expr(f_sql, f_schema, c_sql, c_schema):
    with uncached():
        try:
            filt = TableFilter.from_sql(f_sql, f_schema)
            cut = ExprCut(c_sql, c_schema)
        except PandoExprError:
            return None
        return tuple(filt.sides(cut))


@settings(max_examples=examples(40))
@given(st.lists(st.tuples(predicates(), st.booleans()), min_size=1, max_size=4),
       st.lists(st.tuples(predicates(), st.booleans()), min_size=1, max_size=4), st.randoms())
def test_warm_expr_sides_equal_uncached(filter_specs, cut_specs, rnd):
    def build(cls_make, specs):
        out = []
        for (sql, _), other in specs:
            schema = OTHER if other else SCHEMA
            try:
                out.append((sql, schema, cls_make(sql, schema)))
            except PandoExprError:
                pass
        return out

    filters = build(TableFilter.from_sql, filter_specs)
    cuts = build(ExprCut, cut_specs)
    pairs = [(f, c) for f in filters for c in cuts] * 2
    rnd.shuffle(pairs)
    warm = {}
    for (f_sql, f_schema, filt), (c_sql, c_schema, cut) in pairs:
        got = tuple(filt.sides(cut))
        assert warm.setdefault((id(filt), id(cut)), got) == got
    for (f_sql, f_schema, filt), (c_sql, c_schema, cut) in pairs[: len(pairs) // 2]:
        want = _uncached_expr(f_sql, f_schema, c_sql, c_schema)
        assert warm[(id(filt), id(cut))] == want, (f_sql, str(f_schema.field("i").type), c_sql)
        assert filt.is_unsatisfiable() == TableFilter.from_sql(f_sql, f_schema).is_unsatisfiable()


# Fact filters without a join: literal cuts then depend on whether the key may be non-NULL.
PLAIN = st.sampled_from(["f_orderkey IS NULL", "f_orderkey IS NULL AND f_x < 5", "f_x < 3", "f_orderkey > 1000"]).map(
    lambda sql: TableFilter.from_sql(sql, FACT, "fact"))


@settings(max_examples=examples(30))
@given(star(), st.lists(st.one_of(chain_filter(), PLAIN), min_size=1, max_size=4),
       st.lists(chain_filter(), min_size=1, max_size=3), st.randoms())
def test_warm_literal_sides_equal_uncached(tables, queries, cut_sources, rnd):
    provider = arrow_key_provider(tables)
    specs = []
    for src in cut_sources:
        j = src.joins[0]
        specs.append((provider("orders", "o_orderkey", j.dim_filter), j.dim_filter.to_sql()))
    cuts = [LiteralCut("f_orderkey", keys, CutOrigin("orders", "o_orderkey", origin)) for keys, origin in specs]
    pairs = [(qi, ci) for qi in range(len(queries)) for ci in range(len(cuts))] * 2
    rnd.shuffle(pairs)
    warm = {}
    for qi, ci in pairs:
        got = tuple(queries[qi].sides(cuts[ci]))
        assert warm.setdefault((qi, ci), got) == got
    for qi, ci in set(pairs):
        with uncached():
            # Fresh objects: rebuild the query (and its dimension filters) from its SQL.
            query = TableFilter.from_sql(queries[qi].to_sql(), FACT, "fact", schemas=_schemas(tables))
            keys, origin = specs[ci]
            cut = LiteralCut("f_orderkey", keys, CutOrigin("orders", "o_orderkey", origin))
            assert tuple(query.sides(cut)) == warm[(qi, ci)], (queries[qi].to_sql(), origin)


def _schemas(tables):
    return {name: t.schema for name, t in tables.items()}


def test_same_sql_other_column_types_not_confused():
    # Discreteness depends on the type: `i > 3` excludes `i < 4` for integers only.
    cases = [(SCHEMA, (True, False)), (OTHER, (True, True)), (SCHEMA, (True, False))]
    for schema, want in cases:
        assert _uncached_expr("i > 3", schema, "i >= 4", schema) == want
    for schema, want in cases:  # warm, alternating schemas
        assert tuple(TableFilter.from_sql("i > 3", schema).sides(ExprCut("i >= 4", schema))) == want
    # A cut over columns the filter lacks is reasoned about with the cut's own schema.
    only_z = pa.schema([("z", pa.int64())])
    for schema, want in [(SCHEMA, (False, True)), (OTHER, (True, True))]:
        assert tuple(TableFilter.from_sql("z = 1", only_z).sides(ExprCut("i > 3 and i < 4", schema))) == want


_SPANS = st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 3)), st.booleans(),
                            st.one_of(st.none(), st.integers(-3, 3)), st.booleans()), max_size=3)


@settings(max_examples=examples(200))
@given(_SPANS, st.booleans(), st.booleans(), st.booleans())
def test_domain_intersect_fast_paths(spans, null, other_null, flip):
    # Intersecting with a whole-range domain (the fast path) keeps exactly the same values.
    d = Domain(tuple(Span(lo, lc, hi, hc) for lo, lc, hi, hc in spans), null)
    full = Domain.everything() if other_null else Domain.non_null()
    fast = full.intersect(d) if flip else d.intersect(full)
    slow = Domain.empty().union(d).intersect(Domain((Span(None, False, 4, True), Span(4, False, None, False)),
                                                    other_null))  # same range, no fast path
    for x in [v / 2 for v in range(-10, 11)]:
        inside = lambda dom: any((s.lo is None or s.lo < x or (s.lo == x and s.lo_closed)) and  # noqa: E731
                                 (s.hi is None or x < s.hi or (x == s.hi and s.hi_closed)) for s in dom.spans)
        assert inside(fast) == inside(slow), (d, x)
    assert fast.null == (null and other_null)
    assert fast.is_empty(True) == slow.is_empty(True) and fast.is_empty(False) == slow.is_empty(False)


@settings(max_examples=examples(60))
@given(predicates(), predicates(), st.booleans())
def test_cut_on_other_columns_answers_as_the_joint_check(f_sql, c_sql, other):
    """``sides`` of a cut on columns the filter does not constrain (``TableFilter._sides_independent``:
    the filter's satisfiability and the cut's alone) equals the conjunction checked conjunction
    by conjunction (``_sides_expr_joint``, the path every cut took before), and ``sides`` takes it."""
    schema = OTHER if other else SCHEMA
    try:
        filt = TableFilter.from_sql(f_sql[0], schema)
        cut = ExprCut(c_sql[0], schema)
    except PandoExprError:
        return
    if not filt.constrained_columns().isdisjoint(cut.lower_columns):
        return
    atoms = AtomTable.shared(schema)
    joint = tuple(filt._sides_expr_joint(cut, atoms))
    assert tuple(filt._sides_independent(cut, atoms)) == joint, (f_sql[0], c_sql[0])
    with uncached():
        fresh = TableFilter.from_sql(f_sql[0], schema)
        assert tuple(fresh.sides(ExprCut(c_sql[0], schema))) == joint


def test_cut_on_other_columns_with_a_join_key_set():
    """A join's key set bounds its column: a cut on that column is asked jointly, a cut on
    another column independently, and both answer as the joint check."""
    from pando_iceberg.expr import JoinFilter

    dim = pa.schema([("k", pa.int64()), ("x", pa.int64())])
    join = JoinFilter("i", "dim", "k", TableFilter.from_sql("x < 3", dim, "dim"), dim_keys=[1, 2, 3])
    for f_sql in ("f > 2", "i IS NULL", "j = 1 AND f > 2"):
        filt = TableFilter.from_sql(f_sql, SCHEMA).with_joins([join])
        atoms = AtomTable.shared(SCHEMA)
        for c_sql, independent in (("i > 10", False), ("i < 2", False), ("s = 'a'", True), ("d IS NULL", True)):
            cut = ExprCut(c_sql, SCHEMA)
            assert filt.constrained_columns().isdisjoint(cut.lower_columns) == independent
            want = tuple(filt._sides_expr_joint(cut, atoms))
            assert tuple(filt.sides(cut)) == want, (f_sql, c_sql)
    unsat = TableFilter.from_sql("f > 2 AND f < 1", SCHEMA)
    assert tuple(unsat.sides(ExprCut("s = 'a'", SCHEMA))) == (False, False)
