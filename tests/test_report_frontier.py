"""verlsweep.report.frontier: why each failure did not fit (its phase, from the trial, its text or the
planner's binding constraint), the util grid the space allows, both sides of the feasible band per
TP/offload combination and the regions the rules prove. tests/test_report.py renders whole reports."""
from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution

from verlsweep.proofs.rules import OFFLOADS, TP, UTIL
from verlsweep.report.data import Row, Sweep
from verlsweep.report.frontier import Region, combos, phase_of, reason, region_text, util_grid

START_OOM = ("ValueError: Free memory on device (40.10/60.96 GiB) on startup is less than desired GPU memory "
             "utilization (0.9, 54.86 GiB).")
PLANNER = ("rollout: need 61.5 GiB of 60.7 (margin 2.0; headroom -2.8) [vLLM reservation 36.6] - "
           "OOM when vLLM wakes next to the trainer")


def row(number: int, outcome: str, util: float = 0.5, tp: int = 2, *, excerpt: str | None = None,
        phase: str | None = None, ruled_out_by: int | None = None) -> Row:
    params = {UTIL: util, TP: tp, **{n: True for n in OFFLOADS}}
    return Row(number, outcome, [100.0] if outcome == "completed" else None, None, None, params, "", {}, None,
               excerpt=excerpt, phase=phase, ruled_out_by=ruled_out_by)


UTIL_DIST = FloatDistribution(0.3, 0.95, step=0.05)


def sweep(rows: list[Row], util_dist: FloatDistribution = UTIL_DIST) -> Sweep:
    dists = {UTIL: util_dist, TP: CategoricalDistribution([1, 2, 4, 8]),
             **{n: CategoricalDistribution([True, False]) for n in OFFLOADS}}
    return Sweep(optuna.create_study(), rows, ["objective"], None, list(dists), distributions=dists)


@pytest.mark.parametrize("r, phase", [
    (row(1, "oom", phase="training", excerpt=START_OOM), "training"),                   # the trial's own word wins
    (row(1, "oom", excerpt=START_OOM), "vllm_start"),                                    # vLLM's check, by its text
    (row(1, "oom", excerpt="ValueError: No available memory for the cache blocks."), "kv_cache"),
    (row(1, "infeasible", excerpt=PLANNER), "rollout_wake"),                             # the planner's constraint
    (row(1, "oom", excerpt="torch.OutOfMemoryError: NPU out of memory."), None),
])
def test_phase_of_a_failure(r, phase):
    assert phase_of(r) == phase


def test_reason_in_words():
    assert reason(row(1, "oom", excerpt=START_OOM)) == "OOM at vLLM start"
    assert reason(row(1, "infeasible", excerpt=PLANNER)) == \
        "infeasible by the planner (rollout: OOM when vLLM wakes next to the trainer)"
    assert reason(row(1, "infeasible", excerpt=PLANNER), brief=True) == "infeasible by the planner (rollout)"
    assert reason(row(1, "oom", ruled_out_by=4)) == "ruled out by trial 4"
    assert reason(row(1, "oom", excerpt="RuntimeError: something odd\nmore")) == "OOM (RuntimeError: something odd)"


def test_the_util_grid_is_every_value_of_the_space_without_float_drift():
    grid = util_grid(sweep([]))
    assert grid[0] == 0.3 and grid[-1] == 0.95 and len(grid) == 14 and 0.6 in grid
    assert util_grid(sweep([], CategoricalDistribution([0.9, 0.5, 0.7]))) == [0.5, 0.7, 0.9]


def test_a_continuous_util_grid_is_the_utils_tried():
    s = sweep([row(1, "completed", 0.42), row(2, "oom", 0.81)], FloatDistribution(0.3, 0.95))
    assert util_grid(s) == [0.42, 0.81]


def test_a_combos_band_is_bounded_by_its_highest_fit_and_the_lowest_failure_above_it():
    s = sweep([row(1, "completed", 0.5), row(2, "completed", 0.6), row(3, "oom", 0.9, excerpt=START_OOM),
               row(4, "oom", 0.8, excerpt=START_OOM), row(5, "completed", 0.5, tp=4)])
    by_tp = {c.tp: c for c in combos(s)}
    assert list(by_tp) == [2, 4]
    band = by_tp[2]
    assert (band.highest_fit.util, band.highest_fit.trial) == (0.6, 2)
    assert (band.failed_above.util, band.failed_above.trial, band.failed_above.reason) == \
        (0.8, 4, "OOM at vLLM start")
    assert band.failed_below is None and band.trials == 4
    assert band.label == "tp=2 off=p,o,r"


def test_with_nothing_fitting_a_small_kv_cache_bounds_the_band_from_below():
    s = sweep([row(1, "oom", 0.3, excerpt="ValueError: No available memory for the cache blocks."),
               row(2, "oom", 0.9, excerpt=START_OOM)])
    (combo,) = combos(s)
    assert combo.highest_fit is None
    assert (combo.failed_below.util, combo.failed_above.util) == (0.3, 0.9)


@pytest.mark.parametrize("region, text", [
    (Region("fail", 0.8, 0.95, [(4, "OOM at vLLM start")]),
     "fails at util >= 0.8: proven by trial 4, OOM at vLLM start"),
    (Region("fit", 0.3, 0.6, [(2, "completed")]), "fits at util <= 0.6: proven by trial 2, completed"),
    (Region("fit", 0.5, 0.6, [(1, "completed"), (2, "completed")]),
     "fits at util 0.5-0.6: proven by trials 1, 2, completed"),
    (Region("fit", 0.5, 0.5, [(1, "completed")]), "fits at util 0.5: proven by trial 1, completed"),
])
def test_region_text(region, text):
    grid = [round(0.3 + 0.05 * i, 2) for i in range(14)]
    assert region_text(region, grid, lambda u: f"{u:g}") == text
