"""Sweeps whose trials are Slurm jobs (`hydra/launcher=slurm`) on a real single-node Slurm with
accounting (tests/support/slurm_cluster.py): every trial is a job sacct lists, the records in MLflow and Optuna
are those of the local launcher, and a job killed with `scancel` is a trial outcome, not the sweep's end.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import (
    REPO,
    TEST_MARK,
    copy_store,
    new_mark,
    run_sweep,
    standin_entrypoint,
    survivors,
    tiny_overrides,
)

pytestmark = pytest.mark.slow

# one CPU and 1 GB per trial job: two trials fit the 2-core test node at once
SLURM = ["hydra/launcher=slurm", "slurm.gres=null", "slurm.cpus_per_task=1", "slurm.mem_gb=1",
         "hydra.launcher.signal_delay_s=5"]
ESTIMATE = ["runner=estimate", "hardware=a2_64g", "algorithm=remax", "hydra.sweeper.n_trials=4",
            "hydra.sweeper.n_jobs=2", "hydra.sweeper.sampler.seed=3", "runner.noise=0.0",
            "validate.verl=false"]
SLURM_ONLY_TAGS = {"slurm.job_id", "slurm.state"}


def _trials(work: Path) -> list[optuna.trial.FrozenTrial]:
    storage = f"sqlite:///{work / 'verlsweep-optuna.db'}"
    [summary] = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage).trials


def _optuna_records(work: Path) -> list[tuple]:
    return [(t.number, t.state.name, t.params, t.values, t.user_attrs.get("outcome")) for t in _trials(work)]


def _optuna_times(work: Path) -> list[tuple]:
    """Each trial's (asked, told) datetimes: when the sweep started and ended it."""
    return [(t.datetime_start, t.datetime_complete) for t in _trials(work)]


def _child_runs(uri: str) -> list:
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return sorted((r for r in runs if "trial.number" in r.data.tags), key=lambda r: int(r.data.tags["trial.number"]))


def test_estimate_sweep_runs_every_trial_as_a_slurm_job_with_the_local_launchers_records(
        slurm_cluster, empty_mlflow_db, tmp_path):
    records = {}
    for launcher, extra in (("slurm", SLURM), ("local", [])):
        work = tmp_path / launcher
        work.mkdir()
        uri = copy_store(empty_mlflow_db, work)
        proc = run_sweep(work, [*ESTIMATE, *extra, f"tracking.uri={uri}", f"paths.output_root={work / 'out'}"],
                         new_mark(), multirun=True, env=slurm_cluster.env, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records[launcher] = (_optuna_records(work), _child_runs(uri))

    jobs = {j["JobID"]: j for j in slurm_cluster.sacct() if j["JobName"] == "verlsweep-trial"}
    trials, runs = records["slurm"]
    local_trials, local_runs = records["local"]
    assert trials == local_trials and len(trials) == 4
    assert [t[1] for t in trials] == ["COMPLETE"] * 4
    assert len(runs) == len(local_runs) == 4
    for run, local in zip(runs, local_runs):
        job = run.data.tags["slurm.job_id"]
        assert jobs[job]["State"] == "COMPLETED" and run.data.tags["slurm.state"] == "COMPLETED"
        # whatever the sampler proposes, the two launchers end each run alike (a planner-infeasible trial's FAILED)
        want = "FINISHED" if run.data.tags["trial.outcome"] == "completed" else "FAILED"
        assert run.info.status == local.info.status == want
        assert run.data.params == local.data.params
        assert run.data.metrics.get("objective") == local.data.metrics.get("objective")
        assert set(run.data.tags) - SLURM_ONLY_TAGS == set(local.data.tags)


def _job_of_trial(uri: str, number: int) -> str | None:
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`trial.number` = '{number}'")
    return runs[0].data.tags.get("slurm.job_id") if runs else None


def _wait_for(what: str, check, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc.poll() is not None:
            raise AssertionError(f"sweep ended before {what}: {proc.stderr.read()[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_scancel_of_a_running_standin_trial_is_preempted_its_slot_refilled_while_the_other_runs_and_the_sweep_goes_on(
        slurm_cluster, tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    sweep_dir = tmp_path / "sweep"
    mark = new_mark()
    args = [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri), standin_entrypoint(), *SLURM,
            "trial.steps=4", "+env.VERL_STANDIN_STEP_SECONDS=3", "hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=2",
            "hydra.sweeper.study_name=slurm-standin", f"hydra.sweep.dir={sweep_dir}", "validate.verl=false"]
    env = {**slurm_cluster.client_env(), TEST_MARK: mark}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "-m", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = sweep_dir / "0" / "trial.log"
        _wait_for("trial 0 reaching a training step", lambda: log.exists() and "step:1" in log.read_text(),
                  600, proc)
        # trial 0's job, from its run's tag: `<array>_<task>` when a batch of jobs was one array, the
        # job's own id when trials are launched one by one (hydra.sweeper.schedule=async, the default here)
        job = _job_of_trial(uri, 0)
        assert job, slurm_cluster.run("squeue")
        assert job in slurm_cluster.run("squeue", "-h", "-o", "%i").split(), slurm_cluster.run("squeue")
        slurm_cluster.run("scancel", job)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]

    states = {j["JobID"]: j["State"] for j in slurm_cluster.sacct()}
    assert states[job].startswith("CANCELLED")
    trials = _optuna_records(tmp_path)
    assert [(t[1], t[4]) for t in trials] == [("FAIL", "preempted")] + [("COMPLETE", "completed")] * 3
    # the re-run has the preempted trial's params; it queues behind the recipe's and the planner's configs
    assert [t[0] for t in trials[1:] if t[2] == trials[0][2]] == [3]
    # asynchronous on Slurm: the cancelled job's slot took the next trial while trial 1 still ran (a batch
    # would have waited for it); the re-run took the next slot that freed
    times = _optuna_times(tmp_path)
    assert times[0][1] <= times[2][0] < times[1][1], times
    assert times[3][0] >= min(times[1][1], times[2][1]), times
    runs = _child_runs(uri)
    killed = next(r for r in runs if r.data.tags["slurm.job_id"] == job)
    assert killed.data.tags["trial.outcome"] == "preempted"
    assert killed.data.tags["slurm.state"].startswith("CANCELLED")
    assert killed.info.status == "KILLED"
    done = [r for r in runs if r.data.tags["trial.outcome"] == "completed"]
    assert len(done) == 3 and all(states[r.data.tags["slurm.job_id"]] == "COMPLETED" for r in done)
    client = MlflowClient(uri)
    for run in done:     # verl's own per-step metrics, logged from inside the job through MLFLOW_RUN_ID
        assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "perf/throughput")) == [1, 2, 3, 4]
    assert survivors(mark) == []
