"""The stand-in joins MLflow exactly like verl/utils/tracking.py (tests/support/standin/tracking.py): the run
of MLFLOW_RUN_ID or project/experiment names, and the status verl leaves a failed run in."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.standin_runs import FAST, REQUIRED_METRICS, clean_env, run_standin


def _mlflow_env(tmp_path: Path, run_id: str | None) -> tuple[dict[str, str], str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    extra = {"MLFLOW_TRACKING_URI": uri}
    if run_id:
        extra["MLFLOW_RUN_ID"] = run_id
    return clean_env(**extra), uri


def _new_run(uri: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return client.create_run(client.create_experiment("sweep"), run_name="trial-0").info.run_id


@pytest.mark.slow
def test_mlflow_run_id_joins_existing_run(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    _, uri = _mlflow_env(tmp_path, None)
    run_id = _new_run(uri)
    env, _ = _mlflow_env(tmp_path, run_id)
    res = run_standin(tmp_path, "trainer.total_training_steps=4", "trainer.logger=[console,mlflow,file]", *FAST,
                      env=dict(env, VERL_FILE_LOGGER_PATH=str(tmp_path / "m.jsonl")))
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"  # verl 0.9.1: TaskRunnerV1's finally -> Tracking.finish -> end_run()
    history = client.get_metric_history(run_id, "perf/throughput")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
    for key in REQUIRED_METRICS:
        assert key in run.data.metrics
    assert "val-core/openai/gsm8k/acc/mean_at_1" in run.data.metrics  # verl's key sanitising
    params = run.data.params
    assert params["actor_rollout_ref/rollout/gpu_memory_utilization"] == "0.5"
    assert params["trainer/logger/list_len"] == "3" and params["trainer/logger/1"] == "mlflow"
    assert params["trainer/total_training_steps"] == "4"
    assert not [k for k in params if "standin" in k]
    assert len(client.search_runs([run.info.experiment_id])) == 1  # joined, did not create another run


@pytest.mark.slow
def test_mlflow_without_run_id_uses_project_and_experiment_names(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    env, uri = _mlflow_env(tmp_path, None)
    res = run_standin(tmp_path, "trainer.total_training_steps=1", "trainer.logger=[mlflow]", *FAST,
                      "trainer.project_name=proj", "trainer.experiment_name=exp1", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("proj")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "exp1"
    assert "step:" not in res.stdout  # no console backend requested


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "status", "has_metrics"),
    [("oom", "FINISHED", True), ("crash", "RUNNING", True), ("no_devices", "RUNNING", False)],
)
def test_a_failed_run_leaves_the_mlflow_run_it_joined_in_the_status_verl_leaves_it(
    tmp_path: Path, mode: str, status: str, has_metrics: bool
) -> None:
    from mlflow.tracking import MlflowClient

    _, uri = _mlflow_env(tmp_path, None)
    run_id = _new_run(uri)
    env, _ = _mlflow_env(tmp_path, run_id)
    res = run_standin(tmp_path, f"+standin.mode={mode}", "trainer.total_training_steps=3",
                      "trainer.logger=[console,mlflow]", *FAST, env=env)
    assert res.returncode != 0
    run = MlflowClient(uri).get_run(run_id)
    assert run.info.status == status
    assert bool(run.data.metrics) is has_metrics
