"""verlsweep.command.paths: the files a trial reads (model dirs, parquet files), each missing one named
by the key the user sets and the variable that sets its root."""
from __future__ import annotations

from omegaconf import OmegaConf

from verlsweep.command.paths import check_paths


def cfg(tmp_path, *, model=None, critic=None, critic_enable=False, train=None, val=None):
    model_dir = tmp_path / "model"
    return OmegaConf.create({
        "model": {"path": str(model_dir)},
        "verl": {"actor_rollout_ref": {"model": {"path": model if model is not None else "${model.path}"}},
                 "critic": {"enable": critic_enable, "model": {"path": critic}},
                 "data": {"train_files": train, "val_files": val}},
    })


def test_nothing_missing_nothing_said(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "train.parquet").write_bytes(b"")
    data = str(tmp_path / "train.parquet")
    assert check_paths(cfg(tmp_path, train=data, val=[data])) == []


def test_a_missing_model_is_named_model_path_while_verl_takes_the_groups(tmp_path):
    (problem,) = check_paths(cfg(tmp_path))
    assert problem.key == "model.path" and problem.value == str(tmp_path / "model")
    assert "VERLSWEEP_MODEL_ROOT" in problem.allowed and problem.groups == ("model", "paths")


def test_an_overridden_model_path_is_named_by_its_verl_key(tmp_path):
    (problem,) = check_paths(cfg(tmp_path, model=str(tmp_path / "elsewhere")))
    assert problem.key == "verl.actor_rollout_ref.model.path"


def test_the_critics_model_counts_only_when_the_critic_runs(tmp_path):
    (tmp_path / "model").mkdir()
    assert check_paths(cfg(tmp_path, critic=str(tmp_path / "nope"))) == []
    (problem,) = check_paths(cfg(tmp_path, critic=str(tmp_path / "nope"), critic_enable=True))
    assert problem.key == "verl.critic.model.path"


def test_every_missing_data_file_of_a_list_is_named(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "ok.parquet").write_bytes(b"")
    problems = check_paths(cfg(tmp_path, train=str(tmp_path / "a.parquet"),
                               val=[str(tmp_path / "ok.parquet"), str(tmp_path / "b.parquet")]))
    assert [(p.key, p.value) for p in problems] == [("verl.data.train_files", str(tmp_path / "a.parquet")),
                                                    ("verl.data.val_files", str(tmp_path / "b.parquet"))]
    assert all("VERLSWEEP_DATA_ROOT" in p.allowed and p.groups == ("data", "paths") for p in problems)
