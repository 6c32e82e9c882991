"""runner=estimate: the planner's prediction as the trial's measurement (verlsweep/trial/runners/estimate.py)."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.common.errors import ConfigError
from verlsweep.common.result import NullReporter
from verlsweep.plan import predict_cfg
from verlsweep.prepare import prepare

ACTOR = "verl.actor_rollout_ref.actor"
ROLLOUT = "verl.actor_rollout_ref.rollout"
NO_OFFLOAD = [f"{ACTOR}.fsdp_config.param_offload=false", f"{ACTOR}.fsdp_config.optimizer_offload=false"]


class StopAt:
    """A sweeper that prunes at a given step and records what it was told."""

    def __init__(self, step: int | None = None):
        self.step, self.seen = step, []

    def report(self, step: int, value: float) -> bool:
        self.seen.append((step, value))
        return step == self.step


def run(tmp_path: Path, overrides: list[str], reporter=None):
    cfg = compose_config(["hardware=a2_64g", "algorithm=remax", "runner=estimate", "validate.verl=false", *overrides])
    prepared = prepare(cfg, overrides=[])
    env = {"VERLSWEEP_TRIAL_DIR": str(tmp_path), "VERL_FILE_LOGGER_PATH": str(tmp_path / "metrics.jsonl")}
    out = prepared.runner.run(prepared.spec, reporter or NullReporter(), env)
    return cfg, out, out.result


def test_a_feasible_trial_completes_with_verl_style_steps_around_the_prediction(tmp_path):
    reporter = StopAt()
    cfg, out, result = run(tmp_path, ["runner.noise=0.05", "trial.steps=6"], reporter)
    verdict = predict_cfg(cfg)
    assert result.outcome == "completed" and result.backend == "estimate" and result.steps == 6
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5, 6]
    tok_s = [r["data"]["perf/throughput"] for r in lines]
    assert tok_s[0] < min(tok_s[1:])                                  # step 1 pays the warm-up
    assert result.objective == pytest.approx(statistics.fmean(tok_s[1:]))   # objective skips warm-up steps
    assert result.objective == pytest.approx(verdict.tok_s, rel=0.15)
    assert len(set(tok_s)) == 6                                        # noise
    assert [s for s, _ in reporter.seen] == [1, 2, 3, 4, 5, 6] and [v for _, v in reporter.seen] == tok_s
    assert result.peak_memory_gb == pytest.approx(verdict.trainer_peak_gb)
    assert json.loads((tmp_path / "plan.json").read_text())["binding"] == verdict.binding
    assert out.details.step_log is not None and len(out.details.step_log) == 6


def test_noise_is_seeded_by_the_runner_seed_and_the_trial_number(tmp_path):
    def objective(*overrides):
        return run(tmp_path, ["runner.noise=0.05", *overrides])[2].objective

    assert objective("trial.number=3") == objective("trial.number=3")
    assert objective("trial.number=3") != objective("trial.number=4")
    assert objective("trial.number=3", "runner.seed=1") != objective("trial.number=3")
    exact = run(tmp_path, ["runner.noise=0", "runner.first_step_slowdown=1"])
    assert exact[2].objective == pytest.approx(predict_cfg(exact[0]).tok_s)


def test_a_start_refused_by_vllm_is_an_oom_with_vllms_message_when_not_enforced(tmp_path):
    _, _, result = run(tmp_path, [*NO_OFFLOAD, f"{ROLLOUT}.gpu_memory_utilization=0.95", "plan.enforce=false"])
    assert result.outcome == "oom" and result.steps == 0
    assert "less than desired GPU memory utilization" in result.excerpt
    assert "vllm_start" in result.excerpt


def test_a_trainer_that_outgrows_vllms_share_fails_when_vllm_wakes_for_step_2(tmp_path):
    _, _, result = run(tmp_path, [*NO_OFFLOAD, f"{ROLLOUT}.gpu_memory_utilization=0.85", "plan.enforce=false"])
    assert result.outcome == "oom" and result.steps == 1
    assert "NPU out of memory" in result.excerpt


def test_under_plan_enforce_an_infeasible_trial_runs_no_step(tmp_path):
    _, _, result = run(tmp_path, [*NO_OFFLOAD, f"{ROLLOUT}.gpu_memory_utilization=0.95"])
    assert result.outcome == "infeasible" and result.steps == 0
    assert not (tmp_path / "metrics.jsonl").exists()
    assert result.peak_memory_gb is None and result.predicted_peak_gb > 0     # never ran: nothing measured


def test_the_sweeper_can_prune_an_estimated_trial(tmp_path):
    _, _, result = run(tmp_path, ["trial.steps=5"], StopAt(step=2))
    assert result.outcome == "pruned" and result.steps == 2


def test_an_objective_the_planner_cannot_predict_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError) as err:
        run(tmp_path, ["objective.metric=critic/score/mean"])
    assert "objective.metric" in str(err.value) and "perf/throughput" in str(err.value)


def test_an_edge_probe_is_launched_under_plan_enforce_and_measures_the_planners_own_prediction(tmp_path):
    # util 0.8 without offload fits only at the favourable end of the planner's error band
    # (verlsweep/plan/predictor/band.py): launched, and the estimate (the central prediction) OOMs when vLLM wakes
    _, _, result = run(tmp_path, [*NO_OFFLOAD, f"{ROLLOUT}.gpu_memory_utilization=0.8"])
    assert result.outcome == "oom" and result.steps == 1
