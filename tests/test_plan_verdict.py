"""verlsweep.plan.predictor.verdict: the planner's prediction for one trial (Verdict), what it says before launch
(Preflight, preflight) and whether that stops the launch (blocks_launch). The model's numbers behind it
are pinned by tests/test_plan_model.py and tests/test_plan_throughput.py."""
from __future__ import annotations

from dataclasses import replace

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.plan import NotPlannable, from_cfg
from verlsweep.plan.fit import calibration_file
from verlsweep.plan.predictor import calibration
from verlsweep.plan.predictor.memory import MEANING, ORDER
from verlsweep.plan.predictor.ray_demand import CpuCheck, Demand, Supply, Term
from verlsweep.plan.predictor.verdict import (
    STATUSES,
    Preflight,
    Verdict,
    blocks_launch,
    load_calibration,
    predict,
    predict_cfg,
)

CAL = calibration.load()
ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"
BASE = ["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo"]
# every offload off and util 0.95: vLLM's reservation plus the trainer's params exceed the device at start
NO_FIT = [f"{ROLLOUT}.gpu_memory_utilization=0.95", f"{ACTOR}.fsdp_config.param_offload=false",
          f"{ACTOR}.fsdp_config.optimizer_offload=false"]


def cfg_of(*overrides: str):
    return compose_config([*BASE, *overrides])


@pytest.fixture(scope="module")
def fits() -> Verdict:
    return predict_cfg(cfg_of())


@pytest.fixture(scope="module")
def no_fit() -> Verdict:
    return predict_cfg(cfg_of(*NO_FIT))


def test_a_config_that_does_not_fit_is_infeasible_on_the_constraint_a_run_meets_first(no_fit):
    assert no_fit.status == "infeasible" and not no_fit.feasible
    # vllm_start comes before rollout in ORDER, though rollout is short by more
    assert no_fit.binding == "vllm_start"
    assert no_fit.headroom["vllm_start"] < 0 and no_fit.headroom["rollout"] < no_fit.headroom["vllm_start"]
    assert ORDER.index("vllm_start") < ORDER.index("rollout")


def test_its_reason_states_the_need_the_limit_the_parts_and_the_meaning(no_fit):
    check = no_fit.checks["vllm_start"]
    assert no_fit.reason == check.message()
    assert no_fit.reason.startswith(f"vllm_start: need {check.need:.1f} GiB of {check.limit:.1f}")
    assert "vLLM reservation" in no_fit.reason and MEANING["vllm_start"] in no_fit.reason
    assert no_fit.summary().startswith("infeasible: binding vllm_start; ")
    assert no_fit.summary().endswith(no_fit.reason)


def test_a_config_that_fits_is_ok_and_names_its_tightest_constraint(fits):
    assert fits.status == "ok" and fits.feasible
    assert fits.binding == min(fits.headroom, key=fits.headroom.get)
    assert all(h >= 0 for h in fits.headroom.values())
    assert "to spare beyond the margin" in fits.reason


def test_the_verdict_carries_the_trial_size_and_one_time_per_component(fits):
    assert fits.status in STATUSES
    assert fits.world == 8
    assert fits.capacity_gb == pytest.approx(60.7)
    assert fits.step_s == pytest.approx(sum(fits.time_s.values()))
    assert fits.tok_s > 0 and fits.kv_tokens > 0 and fits.concurrency > 0
    assert fits.predicted_peak_gb == fits.trainer_peak_gb
    # the expected peak uses mean lengths, the checks every sequence at its max: never above the worst phase
    assert fits.trainer_peak_gb <= max(fits.phases.values())


def test_metrics_are_flat_plan_numbers_with_feasible_as_a_float(fits, no_fit):
    m = fits.metrics()
    assert m["plan/feasible"] == 1.0 and no_fit.metrics()["plan/feasible"] == 0.0
    assert m["plan/tok_s"] == fits.tok_s and m["plan/step_s"] == fits.step_s
    assert {k for k in m if k.startswith("plan/peak_gb/")} == {f"plan/peak_gb/{p}" for p in fits.phases}
    assert all(isinstance(v, float) for v in m.values())


def test_to_dict_leaves_out_the_check_objects_and_adds_feasible(no_fit):
    d = no_fit.to_dict()
    assert "checks" not in d and d["feasible"] is False
    assert d["binding"] == "vllm_start" and d["headroom"] == no_fit.headroom


def test_the_margin_makes_a_near_miss_tight_not_infeasible():
    inp = from_cfg(cfg_of())
    v = predict(inp, CAL)
    binding = v.checks[v.binding]
    # a margin larger than the headroom, but smaller than the headroom plus itself
    tight = predict(replace(inp, margin_gb=binding.headroom + binding.margin + 0.5), CAL)
    assert tight.status == "tight" and tight.feasible


def test_predict_cfg_refuses_what_the_model_does_not_cover():
    with pytest.raises(NotPlannable, match="vLLM only"):
        predict_cfg(cfg_of(f"{ROLLOUT}.name=sglang"))


def test_load_calibration_reads_plan_calibration_and_defaults_to_the_packaged_file(tmp_path):
    assert load_calibration(None).constants == CAL.constants
    assert load_calibration(cfg_of()).path == calibration.DEFAULT_PATH
    slower = replace(CAL.constants, step_overhead_s=CAL.constants.step_overhead_s + 100)
    path = calibration_file.write(CAL, slower, tmp_path / "cal.yaml")
    cfg = cfg_of(f"plan.calibration={path}")
    assert load_calibration(cfg).constants.step_overhead_s == pytest.approx(slower.step_overhead_s)
    assert predict_cfg(cfg).step_s == pytest.approx(predict_cfg(cfg_of()).step_s + 100, rel=1e-6)


def _cpus(ok: bool) -> CpuCheck:
    demand = Demand(terms=(Term("worker groups", 8, None),), per_node=8.0)
    return CpuCheck(demand, Supply(per_node=16.0 if ok else 4.0, nnodes=1, source="test", key="hardware.cpus"))


def test_preflight_is_infeasible_when_either_check_fails_and_says_which(fits, no_fit):
    assert Preflight(fits, _cpus(True)).feasible
    both = Preflight(no_fit, _cpus(False))
    assert not both.feasible
    assert both.reason.splitlines() == [no_fit.reason, _cpus(False).message()]      # memory first
    assert Preflight(fits, _cpus(False)).reason == _cpus(False).message()
    assert Preflight(None, None).feasible and Preflight(None, None).predicted_peak_gb is None


def test_preflight_lines_say_when_there_is_no_memory_prediction():
    assert Preflight(None, None).lines() == ["memory: no prediction (outside what the planner models)"]
    assert Preflight(None, _cpus(False)).lines()[1].startswith("infeasible: ")


def test_blocks_launch_only_an_infeasible_verdict_and_only_under_plan_enforce(fits, no_fit):
    enforced, lenient = cfg_of(), cfg_of("plan.enforce=false")
    assert blocks_launch(enforced, no_fit) and not blocks_launch(lenient, no_fit)
    assert not blocks_launch(enforced, fits) and not blocks_launch(enforced, None)
    assert blocks_launch(enforced, Preflight(fits, _cpus(False)))
