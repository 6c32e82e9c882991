"""task.run over a prepared trial, in this process (Hydra's job config set by hand; no subprocess):
the straight-line paths: refused before launch, config error, completed (runner=estimate)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict, read_write

from verlsweep import task
from verlsweep.command.compose import compose_config
from verlsweep.common.errors import ConfigError
from verlsweep.common.result import TrialResult
from verlsweep.plan.predictor import verdict as verdict_mod
from verlsweep.trial.runners.estimate import EstimateRunner

ESTIMATE = ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "validate.verl=false", "tracking.enabled=false",
            "trial.steps=3", "runner.noise=0"]
ROLLOUT = "verl.actor_rollout_ref.rollout"
INFEASIBLE = ["verl.actor_rollout_ref.actor.fsdp_config.param_offload=false",
              "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
              f"{ROLLOUT}.gpu_memory_utilization=0.95"]


@pytest.fixture
def job(tmp_path: Path) -> Iterator:
    """job(overrides, multirun=False) -> the task's config, with Hydra's job config set as sweep.py's
    @hydra.main would (output dir, mode, overrides); cleared afterwards."""
    def make(overrides: list[str], multirun: bool = False) -> DictConfig:
        full = compose_config(overrides, return_hydra_config=True)
        with read_write(full), open_dict(full):
            full.hydra.runtime.output_dir = str(tmp_path)
            full.hydra.mode = RunMode.MULTIRUN if multirun else RunMode.RUN
        HydraConfig.instance().set_config(full)
        cfg = full.copy()
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
        return cfg

    yield make
    HydraConfig.instance().cfg = None


@pytest.fixture
def plans(monkeypatch) -> list[object]:
    calls: list[object] = []
    real = verdict_mod.predict
    monkeypatch.setattr(verdict_mod, "predict", lambda inp, cal: calls.append(inp) or real(inp, cal))
    return calls


@pytest.fixture
def launches(monkeypatch) -> list[object]:
    """Every runner.run call (the real estimate still runs)."""
    calls: list[object] = []
    real = EstimateRunner.run

    def counting(self, spec, reporter, env):
        calls.append(spec)
        return real(self, spec, reporter, env)

    monkeypatch.setattr(EstimateRunner, "run", counting)
    return calls


def result_file(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "result.json").read_text())


def test_a_completed_estimate_is_planned_once_run_once_and_recorded(job, plans, launches, tmp_path, capsys):
    result = task.run(job([*ESTIMATE, f"{ROLLOUT}.gpu_memory_utilization=0.6"]))
    assert isinstance(result, TrialResult) and result.outcome == "completed" and result.steps == 3
    assert len(plans) == 1 and len(launches) == 1
    assert launches[0].knobs == ("actor_rollout_ref.rollout.gpu_memory_utilization",)   # the job's own override
    assert result.predicted and result.predicted["plan/feasible"] == 1.0
    assert result_file(tmp_path)["outcome"] == "completed"
    for name in ("command.json", "command.sh", "metrics.jsonl", "plan.json"):
        assert (tmp_path / name).is_file(), name
    assert capsys.readouterr().out.startswith("verlsweep: trial completed, objective ")


def test_a_trial_the_planner_refuses_launches_nothing_and_exits_2(job, plans, launches, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        task.run(job([*ESTIMATE, *INFEASIBLE]))
    assert exit_.value.code == 2
    assert launches == [] and len(plans) == 1
    assert result_file(tmp_path)["outcome"] == "infeasible"
    assert (tmp_path / "command.json").is_file() and not (tmp_path / "metrics.jsonl").exists()
    captured = capsys.readouterr()
    assert captured.out.startswith("verlsweep: trial infeasible")
    assert "the planner refused the trial before launch (plan.enforce=false launches it anyway)" in captured.err


def test_in_a_sweep_a_refused_trial_is_an_outcome_for_the_sweeper(job, launches, tmp_path):
    result = task.run(job([*ESTIMATE, *INFEASIBLE], multirun=True))
    assert result.outcome == "infeasible" and result.predicted_peak_gb > 0 and launches == []


def test_a_config_error_in_a_single_run_raises_naming_the_key_and_leaves_nothing(job, plans, launches, tmp_path):
    with pytest.raises(ConfigError, match=f"{ROLLOUT}.gpu_memory_utilization"):
        task.run(job([*ESTIMATE, f"{ROLLOUT}.gpu_memory_utilization=1.5"]))
    assert plans == [] and launches == []
    assert not (tmp_path / "command.json").exists() and not (tmp_path / "result.json").exists()


def test_a_config_error_in_a_sweep_is_the_trials_outcome(job, launches):
    result = task.run(job([*ESTIMATE, f"{ROLLOUT}.gpu_memory_utilization=1.5"], multirun=True))
    assert result.outcome == "config_error" and f"{ROLLOUT}.gpu_memory_utilization" in result.excerpt
    assert result.refused_keys == [f"{ROLLOUT}.gpu_memory_utilization"]     # the sweep's stop rule reads them
    assert launches == []


def test_an_input_the_runner_refuses_is_a_config_error_before_anything_is_tracked(job, tmp_path):
    with pytest.raises(ConfigError, match="objective.metric"):
        task.run(job([*ESTIMATE, "objective.metric=critic/score/mean"]))
    result = task.run(job([*ESTIMATE, "objective.metric=critic/score/mean"], multirun=True))
    assert result.outcome == "config_error" and result.refused_keys == ["objective.metric"]


def test_a_dry_run_prints_the_command_with_the_verdict_and_launches_nothing(job, plans, launches, tmp_path, capsys):
    assert task.run(job([*ESTIMATE, "dry_run=true"])) is None
    out = capsys.readouterr().out
    assert out.startswith(f"# verlsweep dry run: {tmp_path / 'command.json'}\n# planner: (hardware=a2_64g, predicted) ")
    assert "python -m verl.trainer.main_ppo" in out
    assert len(plans) == 1 and launches == [] and not (tmp_path / "result.json").exists()
