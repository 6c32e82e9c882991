"""verlsweep.study.chain: where a chained sweep starts (a study's best or a best.yaml), and its errors."""
from __future__ import annotations

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution

from verlsweep.common.names import FROM_STUDY_ATTR
from verlsweep.report.html import chained_text
from verlsweep.study.chain import KEY, resolve
from verlsweep.study.space import SearchSpaceError

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"


@pytest.fixture
def storage(tmp_path):
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    study = optuna.create_study(study_name="memory", storage=url, direction="maximize")
    for util, value in ((0.6, 300.0), (0.7000000000000001, 350.0)):
        study.add_trial(optuna.trial.create_trial(params={UTIL: util}, value=value,
                                                  distributions={UTIL: FloatDistribution(0.3, 0.95, step=0.05)}))
    optuna.create_study(study_name="empty", storage=url)
    return url


def test_a_study_name_gives_its_best_trials_params_as_the_command_line_writes_them(storage, tmp_path):
    link = resolve("memory", storage, tmp_path)
    assert (link.study_name, link.trial_number) == ("memory", 1)
    assert link.overrides() == {UTIL: "0.7"}


def test_a_best_yaml_path_gives_the_same_start(tmp_path):
    (tmp_path / "best.yaml").write_text(yaml.safe_dump(
        {"study_name": "memory", "trial_number": 4, "values": {"objective": 1.0}, "params": {UTIL: 0.55}}))
    link = resolve("best.yaml", None, tmp_path)
    assert (link.study_name, link.trial_number, link.params) == ("memory", 4, {UTIL: 0.55})


def test_an_unknown_study_or_one_without_a_best_is_refused_naming_the_key(storage, tmp_path):
    with pytest.raises(SearchSpaceError) as unknown:
        resolve("memroy", storage, tmp_path)
    assert unknown.value.problems[0].key == KEY and "memory" in unknown.value.problems[0].allowed
    with pytest.raises(SearchSpaceError) as empty:
        resolve("empty", storage, tmp_path)
    assert "completed feasible trial" in empty.value.problems[0].allowed


def test_a_chained_study_describes_its_start_for_the_report(storage, tmp_path):
    study = optuna.create_study()
    assert chained_text(study) is None
    study.set_user_attr(FROM_STUDY_ATTR, resolve("memory", storage, tmp_path).to_attr())
    assert chained_text(study).startswith("started from study memory, trial 1")


def test_the_chain_line_tells_the_actors_and_the_refs_offload_apart():
    study = optuna.create_study()
    actor = "verl.actor_rollout_ref.actor.fsdp_config.param_offload"
    ref = "verl.actor_rollout_ref.ref.fsdp_config.param_offload"
    study.set_user_attr(FROM_STUDY_ATTR, {"study_name": "memory", "trial_number": 1, "source": "best.yaml",
                                          "params": {UTIL: 0.55, actor: True, ref: False}})
    text = chained_text(study)
    assert text.endswith("gpu_memory_utilization=0.55, actor.fsdp_config.param_offload=True, "
                         "ref.fsdp_config.param_offload=False")


def test_a_chained_sweeps_parent_run_and_its_sources_link_to_each_other(store):
    from mlflow.tracking import MlflowClient

    from verlsweep.command.compose import compose_config
    from verlsweep.study.chain import CONTINUED_BY_TAG, TAG_PREFIX, Link, record
    from verlsweep.tracking import sweep_run

    cfg = compose_config(["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b", f"tracking.uri={store}"])
    source = sweep_run.start_sweep_run(cfg, "memory-study", {})
    mine = sweep_run.start_sweep_run(cfg, "throughput-study", {})
    study = optuna.create_study()
    record(study, Link("memory-study", "memory-study", 1, {"verl.x": 1}).to_attr(), mine, cfg)
    client = MlflowClient(store)
    assert client.get_run(mine).data.tags[f"{TAG_PREFIX}.run_id"] == source
    assert client.get_run(mine).data.tags[TAG_PREFIX] == "memory-study"
    assert client.get_run(source).data.tags[CONTINUED_BY_TAG] == mine
