"""End to end through `python sweep.py` with our Optuna sweeper, the planner and the verl stand-in.

Pruning: two sweep runs share one study. The first runs two healthy trials; the resumed second one
adds a trial whose throughput collapses, which the median pruner stops after its second step: the
stand-in process is killed, the outcome is `pruned`, its MLflow run ends KILLED with fewer steps.
"""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import copy_store, new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides

pytestmark = pytest.mark.slow

STEPS = 4


def test_a_trial_below_the_median_is_pruned_and_its_verl_process_stopped(tiny_model_dir, gsm8k_dir,
                                                                         empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    common = [
        *tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri), standin_entrypoint(),
        f"trial.steps={STEPS}", "+env.VERL_STANDIN_STEP_SECONDS=0.3",
        "hydra.sweeper.study_name=prune-e2e", "study.enqueue_recipe=false",
        "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=1",
        "hydra/sweeper/pruner=median", "hydra.sweeper.pruner.n_startup_trials=2",
        "hydra.sweeper.pruner.n_warmup_steps=1",
    ]
    mark = new_mark()
    first = run_sweep(tmp_path, [*common, "hydra.sweeper.n_trials=2", "+env.VERL_STANDIN_THROUGHPUT=1000"],
                      mark, multirun=True)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_sweep(tmp_path, [*common, "hydra.sweeper.n_trials=3", "+env.VERL_STANDIN_THROUGHPUT=10"],
                       mark, multirun=True)
    assert second.returncode == 0, second.stderr[-3000:]

    client = MlflowClient(uri)
    runs = {int(r.data.tags["trial.number"]): r
            for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
            if "trial.number" in r.data.tags}
    assert sorted(runs) == [0, 1, 2]
    assert [runs[n].data.tags["trial.outcome"] for n in (0, 1)] == ["completed", "completed"]
    pruned = runs[2]
    assert pruned.data.tags["trial.outcome"] == "pruned"
    assert pruned.info.status == "KILLED"
    steps = [m.step for m in client.get_metric_history(pruned.info.run_id, "perf/throughput")]
    assert steps and max(steps) < STEPS, steps
    # sorting MLflow's runs by objective never mixes a pruned trial's partial value with completed ones
    assert all("objective" in runs[n].data.metrics for n in (0, 1))
    assert "objective" not in pruned.data.metrics and "partial_objective" in pruned.data.metrics
    assert survivors(mark) == []


def test_a_trial_the_planner_predicts_infeasible_is_tracked_and_never_launched(tiny_model_dir, gsm8k_dir,
                                                                               empty_mlflow_db, tmp_path):
    """vLLM would refuse to start: 0.99 x 64 GB is more than an A2 device has free (docs/ascend.md,
    vLLM-Ascend memory rules)."""
    uri = copy_store(empty_mlflow_db, tmp_path)
    mark = new_mark()
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri),
                                standin_entrypoint(), "plan.enforce=true",
                                "verl.actor_rollout_ref.rollout.gpu_memory_utilization=0.99"], mark)
    assert proc.returncode == 2, proc.stderr[-3000:]                   # refused before launch
    assert "trial infeasible" in proc.stdout and "vllm_start" in proc.stdout
    client = MlflowClient(uri)
    [run] = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])]
    assert run.data.tags["trial.outcome"] == "infeasible"
    assert run.info.status == "FAILED"
    assert not client.get_metric_history(run.info.run_id, "perf/throughput")  # verl never ran
    assert "peak_memory_gb" not in run.data.metrics                            # nothing was measured
    assert run.data.metrics["predicted_peak_gb"] > 0
    assert not list((tmp_path / "out").rglob("trial.log"))
    assert survivors(mark) == []
