"""End to end: real `python sweep.py [-m] ...` subprocesses, the verl stand-in as runner.entrypoint,
one trial per outcome, checked in MLflow (MlflowClient) and in the process table (psutil).

Most sweeps use Hydra's basic sweeper (`hydra/sweeper=basic`) to list the stand-in's modes, so these
tests need no Optuna; the parent run is created with `sweep_run.start_sweep_run` exactly as the sweeper
does and handed to the trials as `tracking.parent_run_id`.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import (
    BASIC,
    child_runs,
    copy_store,
    mode_sweep,
    new_mark,
    run_sweep,
    standin_entrypoint,
    survivors,
    tiny_overrides,
)
from verlsweep.command.compose import compose_config
from verlsweep.tracking import sweep_run

pytestmark = pytest.mark.slow

MODES = ["ok", "oom", "vllm_cache_oom", "hccl_timeout", "crash", "no_devices"]


@pytest.fixture(scope="module")
def outcome_sweep(tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path_factory):
    """One multirun, one trial per stand-in mode, nested under a parent run."""
    work = tmp_path_factory.mktemp("outcome_sweep")
    base = tiny_overrides(tiny_model_dir, gsm8k_dir, work / "out", copy_store(empty_mlflow_db, work))
    return mode_sweep(work, base, "e2e-outcomes", MODES,
                      [standin_entrypoint(), "tracking.experiment=ignored-for-children"])


def test_sweep_ran_every_trial_and_left_no_trial_process(outcome_sweep):
    proc = outcome_sweep["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(outcome_sweep["runs"]) == sorted(MODES)
    assert survivors(outcome_sweep["mark"]) == []


def test_children_are_nested_in_the_parents_experiment_with_group_tags(outcome_sweep):
    client = MlflowClient(outcome_sweep["uri"])
    parent = client.get_run(outcome_sweep["parent"])
    for run in outcome_sweep["runs"].values():
        assert run.info.experiment_id == parent.info.experiment_id
        assert run.data.tags["mlflow.parentRunId"] == outcome_sweep["parent"]
        assert (run.data.tags["sweep.hardware"], run.data.tags["sweep.algorithm"], run.data.tags["sweep.model"]) == \
            ("a2_64g", "grpo", "qwen3_0_6b")


def test_completed_trial_is_finished_with_verls_own_step_metrics_and_the_objective(outcome_sweep):
    run = outcome_sweep["runs"]["ok"]
    client = MlflowClient(outcome_sweep["uri"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["trial.outcome"] == "completed"
    # our params: the trial's knobs under dotted verl keys; verl's own (slash keys) logged by it through MLFLOW_RUN_ID
    assert run.data.params["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.55"
    assert run.data.params["actor_rollout_ref/rollout/gpu_memory_utilization"] == "0.55"
    history = client.get_metric_history(run.info.run_id, "perf/throughput")
    assert [m.step for m in sorted(history, key=lambda m: m.step)] == [1, 2, 3, 4, 5]
    assert "trial.metrics_source" not in run.data.tags        # verl's logger wrote them, no backfill
    after_warmup = [m.value for m in history if m.step > 1]
    assert run.data.metrics["objective"] == pytest.approx(statistics.fmean(after_warmup))
    assert run.data.metrics["peak_memory_gb"] > 0
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"command.sh", "command.json", "log_tail.txt"} <= artifacts
    assert "excerpt.txt" not in artifacts


@pytest.mark.parametrize("mode,outcome,needle", [
    ("oom", "oom", "NPU out of memory"),
    ("vllm_cache_oom", "oom", "No available memory for the cache blocks"),
    ("hccl_timeout", "hccl_timeout", "Watchdog caught collective operation timeout"),
    ("crash", "crash", "SIGSEGV"),
    ("no_devices", "no_devices", "Total available GPUs 0 is less than total desired GPUs 8"),
])
def test_failed_trial_is_failed_with_its_outcome_and_the_matched_excerpt(outcome_sweep, tmp_path, mode, outcome,
                                                                         needle):
    run = outcome_sweep["runs"][mode]
    assert run.info.status == "FAILED"
    assert run.data.tags["trial.outcome"] == outcome
    client = MlflowClient(outcome_sweep["uri"])
    excerpt = Path(client.download_artifacts(run.info.run_id, "excerpt.txt", str(tmp_path))).read_text()
    assert needle in excerpt


def test_trial_killed_mid_training_still_has_the_steps_it_logged(outcome_sweep):
    run = outcome_sweep["runs"]["oom"]            # the stand-in OOMs at step 2 after logging step 1
    history = MlflowClient(outcome_sweep["uri"]).get_metric_history(run.info.run_id, "perf/throughput")
    assert [m.step for m in history] == [1]


def test_artifacts_and_params_never_hold_credentials(tiny_model_dir, gsm8k_dir, store, tmp_path):
    mark = new_mark()
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store),
                                standin_entrypoint(), "validate.verl=false", "+env.HF_TOKEN=hf_secret_value",
                                "trial.steps=2"], mark)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert "mlflow.parentRunId" not in run.data.tags            # a single run has no parent
    assert run.data.params["env.HF_TOKEN"] == "***"
    for name in ("command.sh", "command.json", "log_tail.txt"):
        text = Path(client.download_artifacts(run.info.run_id, name, str(tmp_path / "dl"))).read_text()
        assert "hf_secret_value" not in text, name
    command = json.loads((tmp_path / "dl" / "command.json").read_text())
    assert command["env"]["HF_TOKEN"] == "***"
    assert survivors(mark) == []


def test_config_error_in_a_sweep_is_a_tracked_outcome_and_the_sweep_goes_on(tiny_model_dir, gsm8k_dir, store,
                                                                            tmp_path):
    base = tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store)
    parent = sweep_run.start_sweep_run(compose_config(base), "e2e-config", {})
    proc = run_sweep(tmp_path, [*base, standin_entrypoint(), *BASIC, "validate.verl=false",
                                "trial.steps=2", f"tracking.parent_run_id={parent}",
                                "verl.actor_rollout_ref.rollout.gpu_memory_utilization=1.5,0.5"],
                     new_mark(), multirun=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = child_runs(store, parent)
    bad, good = runs["1.5"], runs["0.5"]
    assert (bad.info.status, bad.data.tags["trial.outcome"]) == ("FAILED", "config_error")
    excerpt = Path(MlflowClient(store).download_artifacts(bad.info.run_id, "excerpt.txt", str(tmp_path))).read_text()
    assert "gpu_memory_utilization" in excerpt and "(0, 1]" in excerpt
    assert (good.info.status, good.data.tags["trial.outcome"]) == ("FINISHED", "completed")
    assert not list((tmp_path / "out").glob("sweeps/*/0/trial.log"))       # nothing launched for the bad one


@pytest.mark.parametrize("mode,limits,outcome,reason", [
    # the stand-in's `hang` never logs a step, and its children outlive a killed leader
    ("hang", ["runner.startup_timeout=4"], "hang", "runner.startup_timeout=4s"),
    # 1.5 s per step for 10 steps outlives the whole-trial limit
    ("ok", ["runner.timeout=8", "+env.VERL_STANDIN_STEP_SECONDS=1.5", "trial.steps=10"], "timeout",
     "runner.timeout=8s"),
])
def test_trial_over_a_limit_is_killed_with_its_whole_process_tree(tiny_model_dir, gsm8k_dir, store, tmp_path,
                                                                  mode, limits, outcome, reason):
    base = tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store)
    parent = sweep_run.start_sweep_run(compose_config(base), "e2e-limits", {})
    mark = new_mark()
    proc = run_sweep(tmp_path, [*base, standin_entrypoint(), "validate.verl=false", f"tracking.parent_run_id={parent}",
                                "runner.grace_period=2", f"+env.VERL_STANDIN_MODE={mode}", *limits], mark)
    assert proc.returncode == 1, proc.stderr[-3000:]          # a single run that did not complete
    (run,) = child_runs(store, parent).values()
    assert (run.info.status, run.data.tags["trial.outcome"]) == ("KILLED", outcome)
    assert reason in run.data.tags["trial.reason"]
    assert survivors(mark) == []


def test_unreachable_tracking_store_fails_before_any_trial(tiny_model_dir, gsm8k_dir, tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{sock.getsockname()[1]}"
        proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri),
                                    standin_entrypoint(), "validate.verl=false"], new_mark())
    assert proc.returncode == 2
    assert "tracking.uri" in proc.stderr and uri in proc.stderr
    assert not list((tmp_path / "out").rglob("trial.log"))


def test_the_verlsweep_sweeper_creates_the_parent_run_and_nests_every_trial(tiny_model_dir, gsm8k_dir, store,
                                                                           tmp_path):
    """The contract with hydra_plugins/verlsweep_sweeper: start_sweep_run before the first trial,
    tracking.parent_run_id per trial, finish_sweep_run at the end (sweeps/smoke.yaml: 2 trials)."""
    mark = new_mark()
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store),
                                standin_entrypoint(), "space=smoke", "validate.verl=false"], mark, multirun=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(runs) == 3 and len(children) == 2
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["sweep.hardware"] == "a2_64g" and parent.data.tags["sweep.sampler"]
    assert "search_space.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert sorted(r.data.tags["trial.number"] for r in children) == ["0", "1"]
    assert {r.data.params["actor_rollout_ref.rollout.gpu_memory_utilization"] for r in children} == {"0.5", "0.6"}
    assert all(r.info.status == "FINISHED" and r.data.tags["trial.outcome"] == "completed" for r in children)
    assert survivors(mark) == []
