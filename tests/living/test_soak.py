"""The soak (issue 19) in CI: 3 simulated days of the `ci` profile with a fixed seed — data
changes, schema and spec evolution, the runbooks, Iceberg's maintenance, a killed rewrite on
day 2, concurrent queries — checked against the model after every day. On day 3 a row is deleted
behind the model's back: the checks must find exactly that, and nothing else."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pando_iceberg.soak import diff_rows, run_soak

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def soak(spark, catalog, lakehouse_cfg):
    return run_soak(spark, catalog, lakehouse_cfg, seed=19, days=3, profile="ci", namespace="soak_ci",
                    inject={3: "delete-behind-model"})


def test_three_days_pass_every_check(soak):
    assert soak.days == 3
    clean = [f for f in soak.failures if not f.startswith("day 3: ")]
    assert clean == [] and soak.known_failures == []
    assert soak.queries_checked >= 3 * 2 * 4 * 2  # days × facts × queries × (pyiceberg, Spark)
    assert soak.wrong_results == 0 and soak.leftover_files == 0 and soak.missing_files == 0
    assert soak.health_mismatches == 0
    assert sum(v for k, v in soak.ops.items() if k.startswith("killed_rewrite_")) >= 1  # day 2 always kills one
    assert sum(soak.ops.values()) >= 3 * 5


def test_a_row_deleted_behind_the_models_back_is_found(soak):
    day3 = [f for f in soak.failures if f.startswith("day 3: ")]
    assert soak.rows_lost == 1 and not soak.ok
    assert len(day3) == 2, day3  # pyiceberg content and Spark's count both see it; nothing else failed
    assert day3[0].startswith("day 3: content of sales: 1 row(s) lost, 0 extra, 0 changed"), day3
    assert day3[1].startswith("day 3: Spark reads sales as (rows, ids, sum of ids)"), day3


def test_diff_rows_counts_lost_extra_changed_and_duplicates():
    model = pa.table({"sale_id": pa.array([1, 2, 3, 4], pa.int64()), "q": pa.array([1, None, 3, 4], pa.int32())})
    same = pa.table({"q": pa.array([4, 3, None, 1], pa.int64()), "sale_id": pa.array([4, 3, 2, 1], pa.int64())})
    assert diff_rows(model, same) == (0, 0, 0, "")  # order, column order and widened types do not matter
    other = pa.table({"sale_id": pa.array([1, 2, 5, 5], pa.int64()), "q": pa.array([1, 7, 0, 0], pa.int32())})
    lost, extra, changed, why = diff_rows(model, other)
    assert (lost, extra, changed) == (2, 1, 1) and "1 duplicate sale_id(s)" in why
