"""What a join's key set says of the foreign key (issue 14 item 4): ``fk IN (SELECT pk FROM dim
WHERE p)`` with the key set known bounds ``fk`` to the set's runs, so range cuts on ``fk`` are
decided as the query's own predicates are; the draws propose those ranges as cuts."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from pando_iceberg.expr import ExprCut, JoinFilter, TableFilter
from pando_iceberg.expr.keys import MAX_KEY_RUNS, key_runs

FACT = pa.schema([("fk", pa.int32()), ("sk", pa.string()), ("x", pa.int64())])
DIM = pa.schema([("pk", pa.int32()), ("a", pa.string())])
SDIM = pa.schema([("pk", pa.string()), ("a", pa.string())])


def keyed(keys, column="fk", dim_schema=DIM, expr=None) -> TableFilter:
    d = TableFilter("a = 'z'", dim_schema, table="dim")
    return TableFilter(expr, FACT, [JoinFilter(column, "dim", "pk", d, dim_keys=keys)], table="fact")


def test_runs_and_hull():
    assert key_runs(np.array([3, 4, 5, 9, 11, 12])) == [(3, 5), (9, 9), (11, 12)]
    assert key_runs(np.array([], dtype=np.int64)) == []
    scattered = np.arange(0, 4 * (MAX_KEY_RUNS + 1), 4)
    assert key_runs(scattered) == [(0, int(scattered[-1]))]
    assert key_runs(np.array(["a", "b"], dtype=object)) is None


def test_range_cuts_on_the_foreign_key_are_decided_by_the_key_set():
    f = keyed([10, 11, 12, 40])
    assert f.sides(ExprCut("fk < 10", FACT, "fact")) == (False, True)
    assert f.sides(ExprCut("fk > 12 AND fk < 40", FACT, "fact")) == (False, True)  # the gap between runs
    assert f.sides(ExprCut("fk <= 12", FACT, "fact")) == (True, True)
    assert f.sides(ExprCut("fk >= 10 AND fk <= 40", FACT, "fact")) == (True, False)
    assert f.sides(ExprCut("x > 5", FACT, "fact")) == (True, True)
    unknown = keyed(None)
    assert unknown.sides(ExprCut("fk < 10", FACT, "fact")) == (True, True)  # no key set: undecided
    assert keyed([]).sides(ExprCut("x > 5", FACT, "fact")) == (False, False)  # no key joins: no row
    strings = keyed(["k1", "k2"], column="sk", dim_schema=SDIM)
    assert strings.sides(ExprCut("sk < 'k0'", FACT, "fact")) == (True, True)  # strings: not bounded


def test_keyed_joins_propose_their_ranges_as_cuts():
    f = keyed([7, 8, 30], expr="x > 3")
    assert {c.key for c in f.candidate_cuts()} == {c.key for c in (
        ExprCut("x > 3", FACT, "fact"), ExprCut("fk >= 7", FACT, "fact"), ExprCut("fk <= 30", FACT, "fact"))}
    assert f.key_ranges() == {"fk": (7, 30)}
    assert keyed(None).candidate_cuts() == [] and keyed(["k"], "sk", SDIM).key_ranges() == {}


def test_sides_with_key_sets_are_sound_randomized():
    """Every row whose key is in the set and satisfies the filter lies on a side sides() allows."""
    rng = random.Random(14)
    values = np.arange(-5, 200)
    for _ in range(300):
        keys = np.unique(np.array(rng.sample(range(0, 190), rng.randint(0, 40))))
        if rng.random() < 0.5 and len(keys):  # runs, as keys assigned in load order give
            lo = rng.randrange(0, 150)
            keys = np.arange(lo, lo + rng.randint(1, 40))
        lo, hi = sorted(rng.sample(range(-3, 200), 2))
        cut = ExprCut(rng.choice([f"fk < {lo}", f"fk >= {lo} AND fk <= {hi}", f"fk = {lo} OR fk > {hi}"]), FACT, "fact")
        rows = pa.table({"fk": pa.array(values, pa.int32()), "sk": pa.array(["s"] * len(values)),
                         "x": pa.array(values, pa.int64())})
        member = np.isin(values, keys)
        on_true = cut.evaluate(rows)
        s = keyed(keys).sides(cut)
        assert s.may_true or not (member & on_true).any(), (keys, cut)
        assert s.may_not_true or not (member & ~on_true).any(), (keys, cut)
