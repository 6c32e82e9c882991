"""verlsweep.tracking.study_runs: what the store holds for one study (its parent run, its trial runs by
number) and the corrections a resume or a reconcile makes to them."""
from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from verlsweep.common.names import REDACTED
from verlsweep.tracking import study_runs as sr
from verlsweep.tracking.mlflow_runs import ROLE_TAG


@pytest.fixture
def client(store):
    return MlflowClient(store)


@pytest.fixture
def exp(client):
    return client.create_experiment("study-runs")


def _parent(client, exp, study="s"):
    run = client.create_run(exp, tags={ROLE_TAG: "parent", sr.STUDY_TAG: study})
    time.sleep(0.01)                       # distinct start times: the oldest is the parent
    return run.info.run_id


def test_the_oldest_parent_is_the_studys_and_a_younger_one_deletes_itself(client, exp):
    first, second = _parent(client, exp), _parent(client, exp)
    _parent(client, exp, study="other study")
    assert [r.info.run_id for r in sr.parents(client, exp, "s")] == [first, second]
    assert sr.elect_parent(client, exp, "s", second) == first
    assert client.get_run(second).info.lifecycle_stage == "deleted"
    assert sr.elect_parent(client, exp, "s", first) == first


def test_a_study_name_with_a_quote_is_searched_safely(client, exp):
    mine = _parent(client, exp, study="it's")
    assert [r.info.run_id for r in sr.parents(client, exp, "it's")] == [mine]


def test_children_are_grouped_by_trial_number_ignoring_runs_without_one(client, exp):
    for number in ("0", "1", "1", "", "x"):
        client.create_run(exp, tags={sr.STUDY_TAG: "s", sr.NUMBER_TAG: number})
    assert {k: len(v) for k, v in sr.children(client, exp, "s").items()} == {0: 1, 1: 2}


def test_continuing_a_parent_counts_the_resume_and_runs_it_again(client, exp):
    parent = _parent(client, exp)
    client.set_terminated(parent, "KILLED")
    sr.continue_parent(client, parent, {"sweep.note": "resumed"})
    sr.continue_parent(client, parent, {})
    run = client.get_run(parent)
    assert run.info.status == "RUNNING"
    assert run.data.tags[sr.RESUMES_TAG] == "2" and run.data.tags["sweep.note"] == "resumed"


def test_measurements_a_run_lacks_are_added_under_the_name_its_outcome_gives_the_objective(client, exp):
    run = client.create_run(exp).info.run_id
    client.log_metric(run, "peak_memory_gb", 30.0)
    sr.log_measurements(client, run, {"objective": 400.0, "peak_memory_gb": 99.0, "steps": 3, "ok": True,
                                      "text": "no"}, outcome="pruned")
    metrics = client.get_run(run).data.metrics
    assert metrics == {"partial_objective": 400.0, "peak_memory_gb": 30.0, "steps": 3.0}


def test_end_run_ends_a_running_run_and_corrects_an_ended_one(client, exp):
    run = client.create_run(exp).info.run_id
    sr.end_run(client, run, "FAILED", {sr.REASON_TAG: "died"})
    ended = client.get_run(run).info
    assert ended.status == "FAILED" and client.get_run(run).data.tags[sr.REASON_TAG] == "died"
    sr.end_run(client, run, "KILLED")
    assert client.get_run(run).info.status == "KILLED"
    assert client.get_run(run).info.end_time == ended.end_time


def test_a_trial_without_a_run_is_recorded_ended_with_its_params_and_no_secret(client, exp):
    parent = _parent(client, exp)
    run_id = sr.record_trial(client, exp, "s", 7, parent, "infeasible", "planner: rollout",
                             params={"verl.util": 0.9, "env.HF_TOKEN": "hf_secret"})
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and run.info.run_name == "trial-7"
    assert run.data.tags[sr.NUMBER_TAG] == "7" and run.data.tags["mlflow.parentRunId"] == parent
    assert run.data.tags[sr.OUTCOME_TAG] == "infeasible" and run.data.tags[sr.REASON_TAG] == "planner: rollout"
    assert run.data.params == {"verl.util": "0.9", "env.HF_TOKEN": REDACTED}
    assert sr.children(client, exp, "s")[7][0].info.run_id == run_id


def test_filter_literals_use_the_quote_the_value_lacks_mlflow_has_no_escapes(client, exp):
    from verlsweep.tracking.mlflow_runs import filter_literal

    assert filter_literal("plain") == "'plain'" and filter_literal("it's") == '"it\'s"'
    for name in ("it's", 'say "hi"', "back\\slash"):
        client.create_run(exp, tags={sr.STUDY_TAG: name, sr.NUMBER_TAG: "0"})
        assert len(sr.children(client, exp, name)[0]) == 1
