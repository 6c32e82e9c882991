"""verlsweep.tracking.sweep_run: a sweep's parent run (the contract at the top of
verlsweep/tracking/mlflow_runs.py): tags, the recipe's fixed values as params, the search space as an
artifact, a step series of the sweep's numbers, its files, its end. tests/test_tracking.py runs whole
sweeps against it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from verlsweep.command.compose import compose_config
from verlsweep.tracking import sweep_run
from verlsweep.tracking.mlflow_runs import ROLE_TAG

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"


@pytest.fixture
def cfg(store):
    return compose_config(["hardware=a2_64g", "algorithm=grpo", "model=qwen3_8b", f"tracking.uri={store}"])


def test_the_parent_run_carries_the_sweeps_tags_its_fixed_values_and_its_space(cfg, store, tmp_path):
    run_id = sweep_run.start_sweep_run(cfg, "it's a study", {UTIL: "range(0.3,0.9,0.1)"}, sampler="boundary")
    client = MlflowClient(store)
    run = client.get_run(run_id)
    tags = run.data.tags
    assert (tags[ROLE_TAG], tags["sweep.study"], tags["sweep.sampler"]) == ("parent", "it's a study", "boundary")
    assert (tags["sweep.hardware"], tags["sweep.algorithm"], tags["sweep.model"]) == ("a2_64g", "grpo", "qwen3_8b")
    assert run.info.run_name == "it's a study #1"
    params = run.data.params
    assert UTIL.removeprefix("verl.") not in params                 # swept: not a fixed value
    assert params["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "2"
    space = json.loads(Path(client.download_artifacts(run_id, "search_space.json", str(tmp_path))).read_text())
    assert space == {UTIL: "range(0.3,0.9,0.1)"}
    # a second sweep of the same study (its name has a quote: the search must still find the first)
    again = sweep_run.start_sweep_run(cfg, "it's a study", {}, fixed={})
    assert client.get_run(again).data.tags[sweep_run.SWEEP_INDEX_TAG] == "2"


def test_updates_are_a_step_series_with_files_and_the_end_sets_the_status(cfg, store, tmp_path):
    run_id = sweep_run.start_sweep_run(cfg, "series", {}, fixed={})
    (tmp_path / "trials.csv").write_text("number,outcome\n0,completed\n")
    sweep_run.update_sweep_run(cfg, run_id, 1, {"best_objective": 400.0, "trials_done": 1, "none": None},
                               {"": [tmp_path / "trials.csv", tmp_path / "missing.csv"]})
    sweep_run.update_sweep_run(cfg, run_id, 2, {"best_objective": 450.0, "trials_done": 2})
    client = MlflowClient(store)
    history = [(m.step, m.value) for m in client.get_metric_history(run_id, "best_objective")]
    assert sorted(history) == [(1, 400.0), (2, 450.0)]
    assert "none" not in client.get_run(run_id).data.metrics
    assert [a.path for a in client.list_artifacts(run_id)] == ["search_space.json", "trials.csv"]
    sweep_run.finish_sweep_run(cfg, run_id, "KILLED")
    assert client.get_run(run_id).info.status == "KILLED"
