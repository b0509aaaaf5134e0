"""The sort / z-order baselines' file-count calibration (bench/harness.calibrated_target): pure,
no Spark. Iceberg's writer does not make files in proportion to 1 / target-file-size-bytes (at
b = 25,000 on TPC-H SF 1 a target scaled by the first miss went from 1,124 files to 126 for a
wanted 263), so the next target is fitted on the attempts so far."""

from __future__ import annotations

import math

import pytest

from pando_iceberg.bench.harness import CALIBRATION_ATTEMPTS, CALIBRATION_TOLERANCE, calibrated_target


def _writer(total: float, power: float):
    """A writer whose file count falls as target ** -power (power != 1: not proportional)."""
    return lambda target: max(1, math.ceil((total / target) ** power))


@pytest.mark.parametrize("power", [0.6, 1.0, 1.5, 2.2])
@pytest.mark.parametrize("want", [30, 263, 656])
def test_lands_within_tolerance_in_the_allowed_attempts(power, want):
    files_of = _writer(150e6, power)
    target = int(150e6 / want)  # the harness's first guess: input bytes / wanted files
    tried = []
    for _ in range(CALIBRATION_ATTEMPTS):
        tried.append((target, files_of(target)))
        if abs(tried[-1][1] - want) <= CALIBRATION_TOLERANCE * want:
            break
        target = calibrated_target(tried, want)
    assert abs(tried[-1][1] - want) <= CALIBRATION_TOLERANCE * want, tried


def test_the_tpch_miss_is_fitted_not_scaled():
    # The measured attempts: scaling by the miss alone (the old rule) gave 126 files for 263.
    t1 = 570_000
    t2 = calibrated_target([(t1, 1124)], 263)
    assert t2 == round(t1 * 1124 / 263)  # one attempt: scale by the miss
    t3 = calibrated_target([(t1, 1124), (t2, 126)], 263)
    assert t1 < t3 < t2  # between the two attempts that bracket the wanted count
    slope = math.log(1124 / 126) / math.log(t1 / t2)
    assert t3 == pytest.approx(math.exp(math.log(t1) + (math.log(263) - math.log(1124)) / slope), rel=1e-6)


def test_degenerate_attempts_fall_back_to_scaling_and_never_go_below_1024():
    assert calibrated_target([(5000, 10), (5000, 10)], 20) == 2500  # same point twice: scale
    assert calibrated_target([(2000, 10), (4000, 12)], 20) == 2400  # wrong direction: scale the closest
    assert calibrated_target([(2000, 10)], 100) == 1024  # clamped
    with pytest.raises(ValueError):
        calibrated_target([], 10)
