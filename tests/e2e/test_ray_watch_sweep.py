"""The runner's watch of a trial's own Ray through `python sweep.py`: the stand-in's `unschedulable`
mode starts a real Ray that waits on a placement group (the watch's logic: tests/test_ray_watch.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import copy_store, new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides

STORAGE = "verl.transfer_queue.backend.SimpleStorage.num_data_storage_units"
# ---- the stand-in's own real Ray, through python sweep.py

def _standin(model: Path, data: Path, out: Path, uri: str, *extra: str) -> list[str]:
    # num_cpus pins the stand-in's Ray to 2 CPUs on any machine
    return [*tiny_overrides(model, data, out, uri), standin_entrypoint(), "+env.VERL_STANDIN_MODE=unschedulable",
            "verl.ray_kwargs.ray_init.num_cpus=2", *extra]


@pytest.mark.slow
def test_a_trial_waiting_on_a_placement_group_ends_unschedulable_after_schedule_timeout(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    """Controller (1 CPU) + 2 storage units on 2 CPUs: it could fit, but never will."""
    uri = copy_store(empty_mlflow_db, tmp_path)
    mark = new_mark()
    proc = run_sweep(tmp_path, _standin(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri, f"{STORAGE}=2",
                                        "runner.schedule_timeout=10", "runner.startup_timeout=300"),
                     mark, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "trial unschedulable" in proc.stdout
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED" and run.data.tags["trial.outcome"] == "unschedulable"
    excerpt = Path(client.download_artifacts(run.info.run_id, "excerpt.txt", str(tmp_path / "dl"))).read_text()
    assert "runner.schedule_timeout=10s" in excerpt and "2 bundles, {CPU: 2}" in excerpt
    assert "CPU 2 total" in excerpt
    (log,) = (tmp_path / "out").rglob("trial.log")
    assert "TransferQueueController has been created." in log.read_text()    # the real Ray placed it
    assert survivors(mark) == []


@pytest.mark.slow
def test_a_sweep_tells_unschedulable_trials_to_the_sampler_and_goes_on(tiny_model_dir, gsm8k_dir,
                                                                      empty_mlflow_db, tmp_path):
    import optuna

    uri = copy_store(empty_mlflow_db, tmp_path)
    mark = new_mark()
    args = [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri), standin_entrypoint(),
            "verl.ray_kwargs.ray_init.num_cpus=2", "~space", "+env.VERL_STANDIN_MODE=choice(ok,unschedulable)",
            "hydra/sweeper/sampler=grid", "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    proc = run_sweep(tmp_path, args, mark, multirun=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    storage = f"sqlite:///{tmp_path / 'verlsweep-optuna.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).get_trials()
    by_outcome = {t.user_attrs["outcome"]: t for t in trials}
    assert set(by_outcome) == {"completed", "unschedulable"}
    told = by_outcome["unschedulable"]
    # the list form (reconcile.results.set_violation)
    assert told.state == optuna.trial.TrialState.COMPLETE and told.constraints == {"0": 1.0}
    assert "never place" in told.user_attrs["excerpt"]
    assert survivors(mark) == []
