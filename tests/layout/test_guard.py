"""The per-template guard (workload/in_block.py ``select_layout``, ``order_cuts``): no workload
template may read more than the bound × what it reads on the table as it is now. Pure Python: a
table stored in date order (its files: runs of B rows in that order), real filters and trees.

The workload: two heavy templates (a carrier, a delay threshold) and a light week template.
Unconstrained, the optimizer cuts on carrier and delay and the week, which reads ~9 % of the
table in date order, reads most of it."""

import json

import numpy as np
import pyarrow as pa
import pytest

from pando_iceberg.expr import TableFilter
from pando_iceberg.layout import build_layout
from pando_iceberg.spark.rewrite import GUARD_WEIGHTS
from pando_iceberg.spark.rewrite_common import PandoRewriteError, RewriteOptions
from pando_iceberg.workload.in_block import (
    MIN_GAIN,
    SLACK_FILES,
    TemplateGuard,
    allowed_reads,
    choose_in_block_order,
    files_read,
    order_cuts,
    parse_regression_bound,
    select_layout,
    template_reads,
)
from pando_iceberg.workload.templates import expected_workload, template_key

SCHEMA = pa.schema([("d", pa.int64()), ("carrier", pa.string()), ("delay", pa.float64())])
N, B = 12_000, 600
WEEK = "d BETWEEN ? AND ?"


def _f(sql):
    return TableFilter(sql, SCHEMA, table="t")


@pytest.fixture(scope="module")
def setting():
    rng = np.random.default_rng(0)
    table = pa.table({"d": np.sort(rng.integers(0, 360, N)),  # arrival order: by day
                      "carrier": [f"c{i}" for i in rng.integers(0, 10, N)],
                      "delay": rng.exponential(20.0, N)}, schema=SCHEMA)
    train = ([(_f(f"carrier = 'c{c}'"), 3.0) for c in (1, 4, 7)]
             + [(_f(f"delay > {v}"), 3.0) for v in (40, 60, 80)]
             + [(_f(f"d BETWEEN {a} AND {a + 6}"), 1.0) for a in (30, 150, 270)])
    wl = expected_workload(train, table, draws=16, seed=1, validation_draws=16)
    # Now: the table as stored, files of B rows in date order (a layout of one block, no reordering).
    now = files_read(build_layout(table, [], wl.queries, 1, B), table, wl.validation, B, None)
    files = np.array_split(np.arange(N), N // B)
    values = {c: table.column(c).to_numpy() for c in ("d", "delay")}
    bounds = {c: ([v[i].min() for i in files], [v[i].max() for i in files]) for c, v in values.items()}
    free = []
    for k in (1, 2, 3):  # k-selection's candidates
        lay = build_layout(table, wl.candidate_cuts(), wl.queries, k, B)
        free.append((lay, choose_in_block_order(lay, table, wl.queries, B).column))
    return table, wl, now, bounds, free


def _learned(table, wl, cuts, factor, k=3):
    """A candidate as ``learn_layout`` adds it: the table's order cuts, the week weighing ``factor``×."""
    queries = [(f, w * factor if template_key(f) == WEEK else w) for f, w in wl.queries]
    lay = build_layout(table, wl.candidate_cuts() + cuts, queries, k, B)
    return lay, choose_in_block_order(lay, table, queries, B).column


def test_order_cuts_follow_the_column_the_files_are_ordered_by(setting):
    _, _, _, bounds, _ = setting
    cuts = order_cuts(bounds, SCHEMA)
    assert {c for cut in cuts for c in cut.columns} == {"d"}  # delay's files overlap: no cuts on it
    highs = sorted(set(int(v) for v in bounds["d"][1]))
    assert [cut.key for cut in cuts] == [f"d <= {v}" for v in highs[:-1]]
    assert order_cuts({"delay": bounds["delay"]}, SCHEMA) == []


def test_unconstrained_choice_sacrifices_the_date_template(setting):
    table, wl, now, _, free = setting
    choice = select_layout(free, table, wl.validation, B)
    week_now = template_reads(now, wl.validation)[WEEK]
    assert 0.05 < week_now < 0.15  # ~ a week of 360 days, plus a file
    kept, order = free[choice.index]
    week_with = template_reads(files_read(kept, table, wl.validation, B, order), wl.validation)[WEEK]
    assert week_with > 3 * week_now


def test_the_guard_keeps_the_date_template_choosing_the_best_total_that_does(setting):
    table, wl, now, bounds, free = setting
    cuts = order_cuts(bounds, SCHEMA)
    only_dates = (build_layout(table, cuts, wl.queries, 1, B), None)  # keeps the date order, reads much
    candidates = free + [only_dates] + [_learned(table, wl, cuts, f) for f in GUARD_WEIGHTS]
    choice = select_layout(candidates, table, wl.validation, B, now=now, bound=1.1, file_fraction=B / N)
    assert choice.guard is not None and choice.guard.holds and choice.holds[choice.index]
    assert not any(choice.holds[:3])  # none of k-selection's candidates holds it
    week = next(t for t in choice.guard.templates if t.template == WEEK)
    assert week.with_layout <= 1.1 * week.now and week.ratio <= 1.1
    held = [i for i, h in enumerate(choice.holds) if h]
    assert choice.costs[choice.index] <= min(choice.costs[i] for i in held) / (1.0 - MIN_GAIN)
    # the best total under the constraint: far less than the layout that keeps the date order alone
    assert choice.index != len(free) and choice.costs[choice.index] < 0.7 * choice.costs[len(free)]
    assert choice.unconstrained is not None and choice.costs[choice.unconstrained] <= choice.costs[choice.index]
    assert choice.to_json([1, 2, 3, "1 dates", *(f"3 {f}" for f in GUARD_WEIGHTS)])["guard_holds"]["1"] is False


def test_the_guard_refuses_when_no_candidate_holds_it(setting):
    table, wl, now, _, free = setting
    choice = select_layout(free, table, wl.validation, B, now=now, bound=1.1, file_fraction=B / N)
    assert choice.index == select_layout(free, table, wl.validation, B).index  # unconstrained, marked broken
    guard = choice.guard
    assert guard is not None and not guard.holds
    assert [t.template for t in guard.breaking()] == [WEEK]
    week = guard.breaking()[0]
    message = guard.refusal("db.flights")
    assert WEEK in message and f"{week.now:.2%}" in message and f"{week.with_layout:.2%}" in message
    assert "force => true" in message and "carrier" not in message  # only the breaking template
    back = TemplateGuard.from_json(json.loads(json.dumps(guard.to_json())))
    assert back.holds is False and [t.template for t in back.breaking()] == [WEEK]
    # the guard off: nothing to refuse
    assert select_layout(free, table, wl.validation, B, now=now, bound=None).guard is None


def test_templates_reading_under_one_percent_get_a_file_of_slack():
    allowed = allowed_reads({"tiny": 0.004, "week": 0.09, "none": 0.0}, 1.1, 0.02)
    assert allowed["tiny"] == pytest.approx(0.004 + SLACK_FILES * 0.02)
    assert allowed["week"] == pytest.approx(0.099)
    assert allowed["none"] == pytest.approx(SLACK_FILES * 0.02)


def test_the_bound_is_a_number_zero_or_off():
    assert parse_regression_bound("1.25") == 1.25
    assert parse_regression_bound("off") is None and parse_regression_bound("0") is None
    with pytest.raises(ValueError):
        parse_regression_bound("-1")
    assert RewriteOptions.from_map({"max-template-regression": "OFF"}).max_template_regression == "off"
    assert RewriteOptions().max_template_regression == ""  # not given: the table property, else 1.1
    with pytest.raises(PandoRewriteError, match="max-template-regression"):
        RewriteOptions.from_map({"max-template-regression": "lots"})


def test_files_read_counts_the_files_iceberg_statistics_keep():
    """The estimate asks of each file what the planner asks of a written one (pyiceberg's metrics
    evaluator on the filter's Iceberg expression): string bounds prune a range of names, and a
    file holding a NaN is read for ``x > c`` (Spark orders NaN above every number)."""
    schema = pa.schema([("s", pa.string()), ("x", pa.float64())])
    n = 6000
    i = np.arange(n)
    table = pa.table({"s": [f"name{v:05d}" for v in i // 6], "x": np.where(i % 50 == 7, np.nan, i / 100.0)},
                     schema=schema)

    def f(sql):
        return TableFilter(sql, schema, table="t")

    queries = [(f("s BETWEEN 'name00100' AND 'name00170'"), 1.0), (f("x > 55"), 1.0), (f("x < 5"), 1.0)]
    whole = build_layout(table, [], queries, 1, n)  # one block, written as files of 600 rows in table order
    reads = files_read(whole, table, queries, 600, None)
    assert reads[0] == pytest.approx(0.1)  # rows 600..1025: the second file of ten
    assert reads[1] == pytest.approx(1.0)  # every file holds a NaN
    assert reads[2] == pytest.approx(0.1)  # NaN satisfies no x < c: the first file only
