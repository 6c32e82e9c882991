"""verlsweep.tracking.store: the MLflow store's address as trials in their own dirs must see it, a client
proven usable before any trial starts, and a study's experiment with the tags that make MLflow's UI show
its trials. tests/test_tracking.py drives the runs on top of it."""
from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from verlsweep.tracking import store as st


def cfg(uri: str = "sqlite:///mlflow.db", **tracking):
    return OmegaConf.create({"tracking": {"uri": uri, **tracking}, "trial": {"study_name": None}})


def test_relative_store_paths_are_made_absolute_and_the_rest_kept(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    here = tmp_path.resolve()
    assert st.tracking_uri(cfg("sqlite:///runs/m.db")) == f"sqlite:///{here}/runs/m.db"
    assert st.tracking_uri(cfg("sqlite:////abs/m.db")) == "sqlite:////abs/m.db"
    assert st.tracking_uri(cfg("mlruns")) == (here / "mlruns").as_uri()
    assert st.tracking_uri(cfg("http://mlflow:5000")) == "http://mlflow:5000"


def test_the_experiment_is_tracking_experiment_else_the_study_else_verlsweep():
    assert st.experiment_name(cfg(experiment="mine"), "study") == "mine"
    assert st.experiment_name(cfg(), "study") == "study"
    with_trial_study = cfg()
    with_trial_study.trial.study_name = "from-trial"
    assert st.experiment_name(with_trial_study) == "from-trial"
    assert st.experiment_name(cfg()) == st.DEFAULT_EXPERIMENT == "verlsweep"


def test_artifacts_go_under_the_given_root_else_beside_a_sqlite_file_else_to_the_server(tmp_path):
    assert st.artifact_location(cfg(artifact_location="s3://bucket/runs/"), "exp") == "s3://bucket/runs/exp"
    db = tmp_path / "m.db"
    assert st.artifact_location(cfg(f"sqlite:///{db}"), "exp") == (tmp_path / "mlruns").as_uri() + "/exp"
    assert st.artifact_location(cfg("http://mlflow:5000"), "exp") is None


def test_the_ui_address_opens_the_model_training_view_with_the_sweeps_columns():
    path = st.ui_path("7")
    assert path.startswith("/#/experiments/7/runs?")
    assert "workflowType=machine_learning" in path and f"viewStateShareKey={st.SHARED_VIEW_KEY}" in path
    assert st.SHARED_VIEW_TAG.endswith(st.SHARED_VIEW_KEY)


def test_an_unreachable_server_is_refused_fast_naming_tracking_uri():
    with pytest.raises(st.TrackingUnavailable) as err:
        st.client_for("http://127.0.0.1:9")              # discard port: nothing answers
    assert err.value.problems[0].key == "tracking.uri"
    assert "no answer from the server" in err.value.problems[0].allowed



def test_a_usable_store_gets_one_client_per_process(store):
    assert st.client_for(store) is st.client_for(store)


def test_a_new_experiment_is_model_training_with_the_shared_view(store):
    client = st.client_for(store)
    exp = client.get_experiment(st.ensure_experiment(client, "fresh"))
    assert exp.tags[st.EXPERIMENT_KIND_TAG] == st.MODEL_TRAINING_KIND
    assert json.loads(exp.tags[st.SHARED_VIEW_TAG]) == st.SHARED_VIEW


def test_an_existing_experiment_is_reused_restored_and_its_old_view_replaced(store):
    client = MlflowClient(store)
    exp_id = client.create_experiment("old")
    client.set_experiment_tag(exp_id, st.SHARED_VIEW_TAG, json.dumps({"selectedColumns": []}))
    client.delete_experiment(exp_id)
    assert st.ensure_experiment(st.client_for(store), "old") == exp_id
    exp = client.get_experiment(exp_id)
    assert exp.lifecycle_stage == "active"
    assert json.loads(exp.tags[st.SHARED_VIEW_TAG]) == st.SHARED_VIEW
    assert exp.tags[st.EXPERIMENT_KIND_TAG] == st.MODEL_TRAINING_KIND
