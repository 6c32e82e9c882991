"""The planner against every known point of verlsweep/plan/calibration.yaml .

Recipes that ran (docs/ascend.md, Calibration recipes; on their own hardware) must be predicted
feasible; configurations that fail must be predicted infeasible with the constraint they fail on.
"""
from __future__ import annotations

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.plan import from_cfg, predict
from verlsweep.plan.fit.points import point_config, point_inputs
from verlsweep.plan.predictor import calibration

CAL = calibration.load()
FEASIBLE = [p for p in CAL.points if p.feasible]
FAILING = [p for p in CAL.points if not p.feasible]


def test_the_calibration_file_covers_the_recipes_the_issue_names():
    ids = {p.id for p in CAL.points}
    for must in ("remax_qwen3_8b_a2_report", "gspo_qwen3_8b_a2_nightly", "ppo_qwen3_8b_a2_nightly",
                 "qwen3_0_6b_grpo_quick_start", "qwen3_32b_grpo_a2_4x8", "rloo_qwen3_8b_a3_one_die"):
        assert must in ids
    assert len(FAILING) >= 3


@pytest.mark.parametrize("point", FEASIBLE, ids=lambda p: p.id)
def test_a_recipe_that_ran_is_predicted_feasible(point):
    verdict = predict(point_inputs(point), CAL)
    assert verdict.fits, f"{point.id}: {verdict.reason}"          # predicted to fit, not only an edge probe
    assert verdict.tok_s > 0 and verdict.step_s > 0


@pytest.mark.parametrize("point", FAILING, ids=lambda p: p.id)
def test_a_failing_configuration_is_infeasible_on_its_constraint(point):
    verdict = predict(point_inputs(point), CAL)
    assert not verdict.feasible, f"{point.id} predicted {verdict.status}: {verdict.reason}"
    assert verdict.binding == point.binding, verdict.reason


def test_the_32b_recipe_needs_its_four_nodes():
    """The same T/F recipe on one A2 node: Adam's state, sharded 8 ways instead of 32, cannot fit."""
    point = CAL.point("qwen3_32b_grpo_a2_4x8")
    one_node = from_cfg(compose_config([*point.compose_overrides(), "hardware.nnodes=1"]))
    assert predict(point_inputs(point), CAL).fits
    assert not predict(one_node, CAL).feasible


def test_the_remax_seed_recipe_point_is_the_composed_default():
    """`hardware=a2_64g algorithm=remax` alone composes the recipe point the report measured (except
    the report's batch and response length), so the sweep starts from the recipe."""
    cfg = point_config(CAL.point("remax_qwen3_8b_a2_script"))
    rollout = cfg.verl.actor_rollout_ref.rollout
    assert (rollout.tensor_model_parallel_size, rollout.gpu_memory_utilization, rollout.n) == (2, 0.6, 4)


@pytest.mark.slow
def test_the_packaged_constants_are_the_fit_of_the_packaged_points():
    """calibration.yaml's `fit: true` values are what fitting its own points gives (nobody hand-tuned
    them after the fit), and the fit stays within 15 % of every reported number."""
    from verlsweep.plan.fit.measured_fit import fit
    from verlsweep.plan.fit.points import samples

    result = fit(CAL, samples(CAL))
    for name, (old, new) in result.changed.items():
        assert new == pytest.approx(old, rel=0.02), name
    assert result.worst() < 0.15
