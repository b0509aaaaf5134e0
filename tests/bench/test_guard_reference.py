"""The bench's do-no-harm flags use the per-template guard's reference: the tables as loaded read
through Pando's planner (``arrival-pando``) when the run measured it, plain Spark (``arrival``)
otherwise (bench/report.reference_layout). Pure, no Spark."""

from __future__ import annotations

import pytest

from pando_iceberg.bench.harness import BenchOptions, pando_k, through_pando
from pando_iceberg.bench.report import reference_layout, worse_than_arrival, worst_template


def _query(template: int, per_layout: dict[str, int]) -> dict:
    """One test query filtering the fact: layout → bytes read."""
    return {"template": template, "tables": {"sales": {"filtered": True, "lb": 1}},
            "layouts": {x: {"median_s": 1.0, "tables": {"sales": {"files": 1, "bytes": b, "lb_files": 1}}}
                        for x, b in per_layout.items()}}


def _rep(queries: list[dict]) -> dict:
    return {"options": {"dataset": "star", "layouts": list(queries[0]["layouts"])}, "queries": queries}


def test_templates_are_flagged_against_the_guards_reference():
    # a date template: 67 as loaded through plain Spark, 6 through Pando's planner (join pruning of
    # the date-ordered files); the unguarded layout reads 30 of it, the guarded one 6
    date = {"arrival": 67, "arrival-pando": 6, "pando-k3": 6, "pando-k3-unguarded": 30}
    brand = {"arrival": 100, "arrival-pando": 100, "pando-k3": 40, "pando-k3-unguarded": 20}
    rep = _rep([_query(10, date), _query(1, brand)])
    assert reference_layout(rep) == "arrival-pando"
    worse = worse_than_arrival(rep)
    assert worse["pando-k3"] == []
    assert [w["template"] for w in worse["pando-k3-unguarded"]] == [10]
    assert worse["pando-k3-unguarded"][0]["ratio"] == pytest.approx(5.0)
    assert "arrival-pando" not in worse
    worst = worst_template(rep)
    assert worst["pando-k3-unguarded"] == {"arrival": pytest.approx(30 / 67), "arrival-pando": pytest.approx(5.0)}
    assert worst["pando-k3"]["arrival-pando"] == pytest.approx(1.0)
    # without the planner's reading of the tables as loaded, plain Spark's is the reference
    plain = _rep([_query(10, {k: v for k, v in date.items() if k != "arrival-pando"})])
    assert reference_layout(plain) == "arrival" and worse_than_arrival(plain)["pando-k3-unguarded"] == []


def test_layout_names():
    assert through_pando("arrival-pando") and through_pando("pando-k3-unguarded") and not through_pando("arrival")
    assert pando_k("pando-k3-unguarded") == 3 and pando_k("pando-k1") == 1
    BenchOptions(dataset="star", layouts=("arrival", "arrival-pando", "pando-k3", "pando-k3-unguarded")).validate()


def test_a_copy_compressed_smaller_is_compared_by_the_share_it_reads():
    """The copies a layout rewrites compress the same rows to other sizes: the ratio is taken on
    each table's bytes scaled to its size as loaded, so a copy at 0.8× the bytes that reads a larger
    share of the table is still flagged."""
    rep = _rep([_query(2, {"arrival": 100, "arrival-pando": 10, "pando-k3": 10})])
    rep["layouts"] = {"arrival": {"tables": {"sales": {"bytes": 1000}}},
                      "arrival-pando": {"tables": {"sales": {"bytes": 1000}}},
                      "pando-k3": {"tables": {"sales": {"bytes": 800}}}}
    (w,) = worse_than_arrival(rep)["pando-k3"]
    assert w["ratio"] == pytest.approx(1.25)
    assert worst_template(rep)["pando-k3"]["arrival-pando"] == pytest.approx(1.25)
