"""The bench report's targets (bench/report.targets): pure, no Spark."""

from __future__ import annotations

import pytest

from pando_iceberg.bench.report import targets


def _query(template: int, per_layout: dict[str, tuple[int, int, float]]) -> dict:
    """One test query filtering lineitem: layout → (files, bytes, seconds)."""
    return {"template": template, "tables": {"lineitem": {"filtered": True, "lb": 1}},
            "layouts": {x: {"median_s": s, "tables": {"lineitem": {"files": f, "bytes": b, "lb_files": 1}}}
                        for x, (f, b, s) in per_layout.items()}}


def _rep(dataset: str, queries: list[dict]) -> dict:
    return {"options": {"dataset": dataset, "layouts": list(queries[0]["layouts"])}, "queries": queries}


def _summary(**layouts: tuple[float, float, float]) -> dict:
    """layout → (mean files, mean bytes, files / lower bound)."""
    return {"layouts": {x: {"mean_files": f, "mean_bytes": b, "lb_ratio": r} for x, (f, b, r) in
                        {k.replace("_", "-"): v for k, v in layouts.items()}.items()}}


def test_tpch_targets_against_the_best_baseline_and_the_slowest_template():
    rep = _rep("tpch", [_query(6, {"sort": (10, 100, 1.0), "zorder": (20, 300, 1.0), "pando-k3": (5, 40, 0.5)}),
                        _query(19, {"sort": (10, 100, 1.0), "zorder": (4, 50, 0.6), "pando-k3": (8, 90, 1.0)})])
    got = targets(rep, _summary(sort=(10, 100e6, 4.0), zorder=(12, 175e6, 5.0), pando_k3=(6.5, 65e6, 2.0)))
    by_bytes, by_files, slowest = got
    assert "best of sort, zorder (sort" in by_bytes["target"] and "filtering lineitem or orders" in by_bytes["target"]
    assert by_bytes["value"] == pytest.approx(100 / 65) and not by_bytes["met"]
    assert by_files["value"] == pytest.approx(10 / 6.5) and not by_files["met"]
    # Q19 is 0.6 s on z-order and 1.0 s on Pando's layout: 0.6 < 0.9, missed; Q6 would pass
    assert "Q19" in slowest["target"] and slowest["value"] == pytest.approx(0.6) and not slowest["met"]
    rep["queries"][1]["layouts"]["pando-k3"]["median_s"] = 0.65
    met = targets(rep, _summary(sort=(10, 100e6, 4.0), zorder=(12, 175e6, 5.0), pando_k3=(4.0, 40e6, 1.0)))
    assert met[0]["met"] and met[1]["met"] and met[2]["met"] and met[0]["by"] == pytest.approx(1.25)


@pytest.mark.parametrize("dataset, bound", [("taxi", 2.5), ("star", 3.0)])
def test_lower_bound_targets_per_dataset(dataset, bound):
    rep = _rep(dataset, [_query(1, {"zorder": (10, 100, 1.0), "pando-k3": (3, 30, 0.5)})])
    (t,) = targets(rep, _summary(zorder=(10, 100e6, 10.0), pando_k3=(3, 30e6, bound)))
    assert f"≤ {bound:g}×" in t["target"] and "lower bound" in t["target"] and t["met"]
    (t,) = targets(rep, _summary(zorder=(10, 100e6, 10.0), pando_k3=(3, 30e6, bound + 0.1)))
    assert not t["met"]


def test_no_target_without_pando_k3():
    rep = _rep("tpch", [_query(1, {"sort": (10, 100, 1.0)})])
    assert targets(rep, _summary(sort=(10, 100e6, 4.0))) == []


def test_each_targets_best_layout_per_template_combined():
    """The targets' last column: each template read by its own best measured layout (the tables as
    loaded left out). Here the sort wins Q6 and z-order Q19, so the combination reads 50 + 50 bytes
    for two queries, where Pando k=3 reads 130 and the best single baseline (the sort) 200."""
    q6 = _query(6, {"arrival": (1, 1, 1.0), "sort": (10, 50, 1.0), "zorder": (20, 300, 1.0), "pando-k3": (12, 60, 0.5)})
    q19 = _query(19, {"arrival": (1, 1, 1.0), "sort": (10, 150, 1.0), "zorder": (4, 50, 0.6), "pando-k3": (8, 70, 1.0)})
    rep = _rep("tpch", [q6, q19])
    by_bytes, by_files, slowest = targets(rep, _summary(sort=(10, 100, 4.0), zorder=(12, 175, 5.0),
                                                        pando_k3=(10, 65, 2.0)))
    assert by_bytes["best_per_template"] == pytest.approx(100 / 50)  # sort's mean / mean of (50, 50)
    assert by_files["best_per_template"] == pytest.approx(10 / 7)  # sort's mean / mean of (10, 4)
    assert slowest["best_per_template"] is None
    # lower-bound targets: the layout with the lowest files / its own bound on each template
    q6["layouts"]["zorder"]["tables"]["lineitem"]["lb_files"] = 10  # z-order: 20 files, bound 10 → 2.0
    star = _rep("star", [q6, q19])
    (t,) = targets(star, _summary(zorder=(12, 175, 5.0), pando_k3=(10, 65, 4.0)))
    assert t["best_per_template"] == pytest.approx((20 + 4) / (10 + 1))
