"""MLflow tracking: parent run per sweep, child run per trial, statuses, redaction, store checks."""
from __future__ import annotations

import json
import os
import socket
import time

import pytest
from mlflow.tracking import MlflowClient

from verlsweep.command.compose import compose_config
from verlsweep.common.result import OUTCOMES, TrialResult
from verlsweep.tracking import mlflow_runs as tracking
from verlsweep.tracking import store as tracking_store
from verlsweep.tracking import sweep_run
from verlsweep.tracking.mlflow_runs import TrialRun
from verlsweep.tracking.store import TrackingUnavailable
from verlsweep.trial.metrics import StepLog


def cfg_for(uri: str, *overrides: str):
    return compose_config(["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b", f"tracking.uri={uri}",
                           *overrides])


def test_relative_sqlite_uri_is_made_absolute_for_trials_running_in_their_own_dir(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    cfg = cfg_for("sqlite:///mlflow.db")
    assert tracking_store.tracking_uri(cfg) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def test_uri_defaults_to_mlflow_tracking_uri_env_and_command_line_wins(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert compose_config([]).tracking.uri == "http://mlflow.example:5000"
    assert compose_config(["tracking.uri=sqlite:////x/m.db"]).tracking.uri == "sqlite:////x/m.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert compose_config([]).tracking.uri == "sqlite:///mlflow.db"


def test_credentials_in_env_names_are_redacted():
    env = {"HF_TOKEN": "hf_x", "DB_PASSWORD": "p", "AWS_SECRET_ACCESS_KEY": "s", "api_key": "k",
           "HCCL_EXEC_TIMEOUT": "3600"}
    assert tracking.redact_env(env) == {"HF_TOKEN": "***", "DB_PASSWORD": "***", "AWS_SECRET_ACCESS_KEY": "***",
                                        "api_key": "***", "HCCL_EXEC_TIMEOUT": "3600"}


def test_sweep_parent_run_has_group_tags_fixed_params_and_search_space(store):
    cfg = cfg_for(store)
    space = {"verl.actor_rollout_ref.rollout.gpu_memory_utilization": "interval(0.4, 0.9)",
             "verl.actor_rollout_ref.rollout.tensor_model_parallel_size": "choice(1, 2, 4)"}
    parent = sweep_run.start_sweep_run(cfg, "remax-a2", space, sampler="TPESampler")
    client = MlflowClient(store)
    run = client.get_run(parent)
    assert client.get_experiment(run.info.experiment_id).name == "remax-a2"
    assert {k: run.data.tags[k] for k in ("sweep.name", "sweep.hardware", "sweep.algorithm", "sweep.model",
                                          "sweep.sampler")} == {
        "sweep.name": "remax-a2", "sweep.hardware": "a2_64g", "sweep.algorithm": "remax", "sweep.model": "qwen3_8b",
        "sweep.sampler": "TPESampler"}
    assert run.data.params["algorithm.adv_estimator"] == "remax"
    assert run.data.params["actor_rollout_ref.actor.fsdp_config.param_offload"] == "True"
    assert "actor_rollout_ref.rollout.gpu_memory_utilization" not in run.data.params   # swept, not fixed
    assert [a.path for a in client.list_artifacts(parent)] == ["search_space.json"]
    sweep_run.finish_sweep_run(cfg, parent)
    assert client.get_run(parent).info.status == "FINISHED"


def test_trial_run_is_nested_under_the_parent_in_its_experiment_and_never_sets_env(store, monkeypatch):
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    sweep_cfg = cfg_for(store)
    parent = sweep_run.start_sweep_run(sweep_cfg, "study-a", {})
    cfg = cfg_for(store, f"tracking.parent_run_id={parent}", "trial.number=7", "trial.study_name=study-a")
    run = TrialRun.start(cfg, {"actor_rollout_ref.rollout.gpu_memory_utilization": 0.7, "env.HF_TOKEN": "hf_x"})
    assert "MLFLOW_RUN_ID" not in os.environ
    assert run.env() == {"MLFLOW_TRACKING_URI": store, "MLFLOW_RUN_ID": run.run_id}
    client = MlflowClient(store)
    child = client.get_run(run.run_id)
    assert child.info.experiment_id == client.get_run(parent).info.experiment_id
    assert child.info.status == "RUNNING"
    assert child.data.tags["mlflow.parentRunId"] == parent
    assert child.data.tags["trial.number"] == "7"
    assert child.data.tags["sweep.model"] == "qwen3_8b"
    assert child.data.params == {"actor_rollout_ref.rollout.gpu_memory_utilization": "0.7", "env.HF_TOKEN": "***"}


def test_single_run_has_no_parent_and_goes_to_the_default_experiment(store):
    run = TrialRun.start(cfg_for(store), {})
    child = MlflowClient(store).get_run(run.run_id)
    assert "mlflow.parentRunId" not in child.data.tags
    assert MlflowClient(store).get_experiment(child.info.experiment_id).name == "verlsweep"


def expected_status(outcome: str) -> str:
    """The issue's rule: a completed trial FINISHED, one we or the scheduler stopped (sweeper prune, trial
    limits, a preempted Slurm job) KILLED, every other outcome FAILED."""
    if outcome == "completed":
        return "FINISHED"
    return "KILLED" if outcome in ("pruned", "timeout", "hang", "preempted") else "FAILED"


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_a_finished_trial_run_stores_its_outcome_measurements_artifacts_and_terminal_status(store, tmp_path,
                                                                                             outcome):
    run = TrialRun.start(cfg_for(store), {})
    excerpt = tmp_path / "excerpt.txt"
    excerpt.write_text("NPU out of memory\n")
    result = TrialResult(outcome, objective=812.5, peak_memory_gb=41.25, steps=3, excerpt="NPU out of memory")
    run.finish(result, reason="npu out of memory", artifacts=[excerpt, tmp_path / "missing.txt"])
    client = MlflowClient(store)
    done = client.get_run(run.run_id)
    assert done.info.status == expected_status(outcome)
    assert (done.data.tags["trial.outcome"], done.data.tags["trial.reason"]) == (outcome, "npu out of memory")
    # `objective` only for a completed trial; any other outcome's value is a partial one
    key = "objective" if outcome == "completed" else "partial_objective"
    assert done.data.metrics[key] == 812.5 and done.data.metrics["peak_memory_gb"] == 41.25
    assert ("objective" in done.data.metrics) == (outcome == "completed")
    assert done.data.metrics["trial.steps"] == 3
    assert [a.path for a in client.list_artifacts(run.run_id)] == ["excerpt.txt"]


def test_an_infeasible_trial_has_a_predicted_peak_and_no_measured_one_and_the_run_says_what_each_means(store):
    run = TrialRun.start(cfg_for(store), {})
    run.finish(TrialResult("infeasible", predicted_peak_gb=70.5, excerpt="vllm_start"), reason="infeasible")
    done = MlflowClient(store).get_run(run.run_id)
    assert done.data.metrics["predicted_peak_gb"] == 70.5 and "peak_memory_gb" not in done.data.metrics
    note = done.data.tags["mlflow.note.content"]
    assert "actor/perf/max_memory_allocated_gb" in note and "allocated, not reserved" in note


def test_steps_verl_could_not_log_are_backfilled_from_its_file_logger(store):
    run = TrialRun.start(cfg_for(store), {})
    steps = StepLog()
    for step in (1, 2, 3):
        steps.add(step, {"perf/throughput": 100.0 * step, "val-core/openai/gsm8k/acc/mean@1": 0.5}, "file")
    run.finish(TrialResult("completed", objective=250.0, steps=3), reason="exit 0", step_log=steps,
               objective_metric="perf/throughput")
    client = MlflowClient(store)
    history = client.get_metric_history(run.run_id, "perf/throughput")
    assert [(m.step, m.value) for m in history] == [(1, 100.0), (2, 200.0), (3, 300.0)]
    assert "val-core/openai/gsm8k/acc/mean_at_1" in client.get_run(run.run_id).data.metrics


def test_steps_verl_did_log_are_not_duplicated(store):
    run = TrialRun.start(cfg_for(store), {})
    MlflowClient(store).log_metric(run.run_id, "perf/throughput", 100.0, step=1)
    steps = StepLog()
    steps.add(1, {"perf/throughput": 100.0}, "file")
    run.finish(TrialResult("completed", steps=1), reason="exit 0", step_log=steps, objective_metric="perf/throughput")
    assert len(MlflowClient(store).get_metric_history(run.run_id, "perf/throughput")) == 1


def test_unwritable_sqlite_store_fails_naming_tracking_uri(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TrackingUnavailable, match="tracking.uri"):
        TrialRun.start(cfg_for(f"sqlite:///{blocker}/sub/mlflow.db"), {})


def test_unreachable_server_fails_fast_naming_tracking_uri():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]          # bound, never listening: connection refused
        started = time.monotonic()
        with pytest.raises(TrackingUnavailable, match=r"tracking\.uri='http://127\.0\.0\.1"):
            sweep_run.start_sweep_run(cfg_for(f"http://127.0.0.1:{port}"), "s", {})
    assert time.monotonic() - started < 10


def test_artifacts_of_a_sqlite_store_live_beside_it_not_in_the_working_dir(store, tmp_path, monkeypatch):
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    run = TrialRun.start(cfg_for(store), {})
    artifact_uri = MlflowClient(store).get_run(run.run_id).info.artifact_uri
    assert artifact_uri.startswith((tmp_path / "mlruns" / "verlsweep").as_uri())
    assert not (workdir / "mlruns").exists()


def test_a_sweeps_experiment_is_model_training_with_its_trials_view_as_a_shared_view(store):
    cfg = cfg_for(store)
    parent = sweep_run.start_sweep_run(cfg, "kind-study", {})
    client = MlflowClient(store)
    exp = client.get_experiment(client.get_run(parent).info.experiment_id)
    assert exp.tags[tracking_store.EXPERIMENT_KIND_TAG] == "custom_model_development"
    view = json.loads(exp.tags[tracking_store.SHARED_VIEW_TAG])
    assert view["selectedColumns"][:2] == ["tags.`trial.outcome`", "metrics.`objective`"]
    assert view["searchFilter"] == "tags.`trial.number` != ''" and view["orderByKey"] == "metrics.`objective`"
    # the filter is one MLflow's search accepts, and it finds the trials, not the sweep's parent run
    trial = TrialRun.start(cfg_for(store, "trial.number=0", "trial.study_name=kind-study",
                                   f"tracking.parent_run_id={parent}"), {})
    found = {r.info.run_id for r in client.search_runs([exp.experiment_id], filter_string=view["searchFilter"])}
    assert found == {trial.run_id}
    assert "workflowType=machine_learning" in tracking_store.ui_path(exp.experiment_id)


def test_parent_runs_of_one_study_carry_a_running_index(store):
    cfg = cfg_for(store)
    first = sweep_run.start_sweep_run(cfg, "idx-study", {}, sweep_name="rollout_memory")
    second = sweep_run.start_sweep_run(cfg, "idx-study", {}, sweep_name="rollout_memory")
    client = MlflowClient(store)
    assert [client.get_run(r).info.run_name for r in (first, second)] == ["rollout_memory #1", "rollout_memory #2"]


def test_parent_run_gets_the_sweeps_numbers_as_a_step_series_and_its_files(store, tmp_path):
    cfg = cfg_for(store)
    parent = sweep_run.start_sweep_run(cfg, "upd-study", {})
    (tmp_path / "trials.csv").write_text("number\n0\n")
    (tmp_path / "history.png").write_bytes(b"\x89PNG")
    sweep_run.update_sweep_run(cfg, parent, 2, {"best_objective": 10.0, "trials_done": 2})
    sweep_run.update_sweep_run(cfg, parent, 4, {"best_objective": 12.5, "trials_done": 4},
                              {"": [tmp_path / "trials.csv"], "plots": [tmp_path / "history.png"]})
    client = MlflowClient(store)
    assert [(m.step, m.value) for m in client.get_metric_history(parent, "best_objective")] == [(2, 10.0), (4, 12.5)]
    assert {a.path for a in client.list_artifacts(parent)} >= {"trials.csv", "plots"}
    assert [a.path for a in client.list_artifacts(parent, "plots")] == ["plots/history.png"]


def test_a_trials_run_is_named_by_its_knobs_and_renamed_with_its_outcome(store):
    parent = sweep_run.start_sweep_run(cfg_for(store), "name-study", {})
    cfg = cfg_for(store, f"tracking.parent_run_id={parent}", "trial.number=7", "trial.label='util=0.90 tp=2 off=p,o'")
    run = TrialRun.start(cfg, {})
    client = MlflowClient(store)
    assert client.get_run(run.run_id).info.run_name == "t07 util=0.90 tp=2 off=p,o"
    run.finish(TrialResult("oom", predicted={"plan/trainer_peak_gb": 30.0}), reason="oom")
    done = client.get_run(run.run_id)
    assert done.info.run_name == "t07 oom util=0.90 tp=2 off=p,o"
    assert done.data.metrics["plan/trainer_peak_gb"] == 30.0


def test_verls_project_name_is_the_trials_mlflow_experiment():
    assert compose_config(["trial.study_name=st"]).verl.trainer.project_name == "st"
    assert compose_config(["trial.study_name=st", "tracking.experiment=ex"]).verl.trainer.project_name == "ex"
    assert compose_config([]).verl.trainer.project_name == "verlsweep"


def test_an_edge_probes_run_is_named_and_tagged_so_before_and_after_its_outcome(store):
    from verlsweep.common.names import EDGE_PROBE_TAG
    from verlsweep.task import _start_tracking

    parent = sweep_run.start_sweep_run(cfg_for(store), "edge-study", {})
    cfg = cfg_for(store, f"tracking.parent_run_id={parent}", "trial.number=3", "trial.label='util=0.80 tp=2'")
    run = _start_tracking(cfg, {}, edge_probe=True)
    client = MlflowClient(store)
    started = client.get_run(run.run_id)
    assert started.info.run_name == "t03 util=0.80 tp=2 edge probe" and started.data.tags[EDGE_PROBE_TAG] == "true"
    run.finish(TrialResult("oom", predicted={"plan/edge_probe": 1.0}), reason="oom")
    done = client.get_run(run.run_id)
    assert done.info.run_name == "t03 oom util=0.80 tp=2 edge probe" and done.data.metrics["plan/edge_probe"] == 1.0
    plain = _start_tracking(cfg_for(store, f"tracking.parent_run_id={parent}", "trial.number=4", "trial.label=x"), {})
    assert EDGE_PROBE_TAG not in client.get_run(plain.run_id).data.tags
