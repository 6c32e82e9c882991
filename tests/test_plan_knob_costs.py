"""The planner over the throughput knobs (verlsweep.plan.predictor.knob_costs, the memory model's token budget, graph
pools and vLLM share) and the step's time split in verl's phase names (verlsweep.common.time_split)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.common.time_split import measured_split, predicted_split
from verlsweep.plan import load_calibration, predict
from verlsweep.plan.predictor.inputs import from_cfg

CAL = load_calibration(None)
ACTOR = "verl.actor_rollout_ref.actor"
ROLLOUT = "verl.actor_rollout_ref.rollout"


@pytest.fixture(scope="module")
def base():
    return from_cfg(compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo", "space=throughput"]))


def _actor(inp, **changes):
    return replace(inp, actor=replace(inp.actor, **changes))


def _rollout(inp, **changes):
    return replace(inp, rollout=replace(inp.rollout, **changes))


def test_a_bigger_actor_token_budget_updates_faster_and_needs_more_memory(base):
    small, big = predict(_actor(base, max_token_len=8192), CAL), predict(_actor(base, max_token_len=32768), CAL)
    assert big.time_s["update_actor"] < small.time_s["update_actor"]
    assert big.phases["actor_update"] > small.phases["actor_update"]


def test_graph_mode_costs_a_pool_per_captured_size_and_saves_decode_time(base):
    eager = predict(_rollout(base, enforce_eager=True), CAL)
    few = predict(_rollout(base, capture_sizes=(1, 2, 4, 8)), CAL)
    many = predict(_rollout(base, capture_sizes=tuple(range(8, 513, 8))), CAL)
    assert eager.checks["rollout"].parts["graph pools"] == 0
    assert 0 < few.checks["rollout"].parts["graph pools"] < many.checks["rollout"].parts["graph pools"]
    assert many.time_s["gen"] < eager.time_s["gen"]


def test_ulysses_sp_adds_all_to_all_time_and_keeping_vllm_awake_keeps_its_share(base):
    assert predict(_actor(base, sp=4), CAL).time_s["update_actor"] > predict(base, CAL).time_s["update_actor"]
    awake = predict(_rollout(base, free_cache_engine=False), CAL)
    assert awake.checks["actor_update"].parts["vLLM asleep"] > 0


def test_the_predicted_split_adds_up_to_the_step_in_verls_phase_names(base):
    verdict = predict(base, CAL)
    split = predicted_split(verdict.time_s)
    assert set(split) <= {"gen", "old_log_prob", "ref", "values", "update_critic", "update_actor",
                          "update_weights", "other"}
    assert sum(split.values()) == pytest.approx(verdict.step_s)
    assert verdict.metrics()["plan/time_s/gen"] == pytest.approx(split["gen"])


def test_the_measured_split_keeps_verls_phases_and_calls_the_rest_other():
    split = measured_split({"timing_s/gen": 30.0, "timing_s/update_actor": 50.0, "timing_s/step": 100.0,
                            "perf/throughput": 400.0})
    assert split == {"gen": 30.0, "update_actor": 50.0, "other": 20.0}


def test_the_planner_guide_ranks_configs_of_this_space(base):
    """The guide's ranking (verlsweep.study.guide) tells configs of this space apart: a config whose vLLM
    share stays awake through training is vetoed, and a fuller actor budget ranks above a smaller one."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from verlsweep.study import guide
    from verlsweep.study.space import parse

    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo", "space=throughput"])
    budget, awake = f"{ACTOR}.ppo_max_token_len_per_gpu", f"{ROLLOUT}.free_cache_engine"
    space = parse([f"{budget}=choice(8192,24576)", f"{awake}=choice(true,false)"], OverridesParser.create())
    predictions = guide.predict_all(cfg, space, guide.candidates(space))
    by = {(p.params[budget], p.params[awake]): p for p in predictions}
    assert not by[(24576, False)].feasible and by[(24576, True)].feasible
    assert by[(24576, True)].tok_s > by[(8192, True)].tok_s
