"""The sweep's settings, read once: hydra.sweeper (what any app's sweep reads) and the task's `study` node
(what verlsweep's own task adds); a moved key's old spelling names its new one (in-process, fast; through
`python sweep.py`: tests/e2e/test_bad_input_cli.py)."""
from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from hydra_plugins.verlsweep_sweeper._impl import settings_from
from hydra_plugins.verlsweep_sweeper.config import VerlSweepSweeperConf
from verlsweep.command import argv
from verlsweep.command.compose import compose_config
from verlsweep.common import moved_keys
from verlsweep.common.errors import ConfigError
from verlsweep.config.study import study_config

# what the count leaves out: Hydra's own (_target_, defaults) and the groups and the space
NOT_COUNTED = {"_target_", "defaults", "sampler", "pruner", "params"}
MOST_LEAVES = 18          # hydra-optuna-sweeper's OptunaSweeperConf has 10


def leaves(node: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out += leaves(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def test_hydra_sweeper_has_at_most_18_leaf_keys_as_our_sweeps_compose_it():
    sweeper = OmegaConf.to_container(compose_config([], return_hydra_config=True).hydra.sweeper, resolve=False)
    counted = [k for k in leaves({k: v for k, v in sweeper.items() if k not in NOT_COUNTED})]
    assert len(counted) <= MOST_LEAVES, counted
    assert not {"guide", "long_run", "infer", "report", "objectives"} & {k.split(".")[0] for k in counted}


def test_the_leaf_count_sees_nested_keys():
    assert leaves({"a": 1, "b": {"c": 2, "d": {"e": None}}, "f": []}) == ["a", "b.c", "b.d.e", "f"]


def test_the_sweepers_settings_are_one_frozen_object_of_its_config_dataclass():
    settings = settings_from({"n_trials": 7, "sampler": {"_target_": "optuna.samplers.RandomSampler"},
                              "pruner": {"_target_": "optuna.pruners.NopPruner"}})
    assert isinstance(settings, VerlSweepSweeperConf) and settings.n_trials == 7 and settings.n_jobs == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.n_trials = 8          # type: ignore[misc]


@pytest.mark.parametrize("kwargs, says", [
    ({"guide": {"top_k": 0}}, "hydra.sweeper.guide.top_k=0: moved: write study.guide.top_k"),
    ({"long_run": {"steps": 100}}, "hydra.sweeper.long_run.steps=100: moved: write study.long_run.steps"),
    ({"infer": False}, "hydra.sweeper.infer=False: moved: write study.proofs"),
    ({"n_trails": 3}, "hydra.sweeper.n_trails=3: a key of hydra.sweeper; did you mean n_trials?"),
    ({"n_trials": "many"}, "hydra.sweeper.n_trials='many'"),
])
def test_a_moved_unknown_or_mistyped_sweeper_key_exits_2_naming_it(kwargs, says, capsys):
    with pytest.raises(SystemExit) as stop:
        settings_from(kwargs)
    assert stop.value.code == 2
    assert says in capsys.readouterr().err


def test_every_moved_key_is_read_by_the_study_node_under_its_new_name():
    node = OmegaConf.to_container(compose_config([]).study)
    for old, new in moved_keys.MOVED.items():
        assert OmegaConf.select(OmegaConf.create({"study": node}), new, default="gone") != "gone", (old, new)
    assert moved_keys.new_spelling("hydra.sweeper.guide.draws") == "study.guide.draws"
    assert moved_keys.new_spelling("hydra.sweeper.n_trials") is None
    assert moved_keys.new_spelling("hydra.sweeper.reports") is None


def test_the_command_line_names_the_new_spelling_of_a_moved_key():
    said = argv.moved(["-m", "hydra.sweeper.guide.top_k=0", "+hydra.sweeper.infer=false", "hydra.sweeper.n_trials=3"])
    assert len(said) == 2
    assert "study.guide.top_k" in said[0] and "study.proofs" in said[1]


def test_the_study_node_is_read_typed_and_a_mistake_in_it_names_its_key():
    study = study_config(compose_config(["study.guide.top_k=0", "study.objectives=[objective,peak_memory_gb]"]))
    assert study.guide.top_k == 0 and study.objectives == ["objective", "peak_memory_gb"] and study.proofs
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.report = False           # type: ignore[misc]
    with pytest.raises(ConfigError, match=r"study\.guide\.top_k='lots'"):
        study_config(compose_config(["study.guide.top_k=lots"]))
    with pytest.raises(ConfigError, match=r"study\.guide\.topk"):
        study_config(compose_config(["+study.guide.topk=1"]))
