"""The typed config (verlsweep/config/): one conversion in prepare, problems that name the key and the type,
and a value written once (the YAML states it, the dataclass says its type; docs/config-tree.md)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from verlsweep import CONF_DIR
from verlsweep.command.compose import compose_config
from verlsweep.common.errors import ConfigError
from verlsweep.config import (
    RUNNERS,
    AlgorithmConfig,
    Hardware,
    ModelConfig,
    MonitorConfig,
    Objective,
    PathsConfig,
    PlanConfig,
    TaskConfig,
    TrackingConfig,
    TrialConfig,
    ValidateConfig,
    from_plain,
    read,
    task_config,
)
from verlsweep.config.node import required
from verlsweep.plan.predictor import inputs, verdict
from verlsweep.prepare import prepare
from verlsweep.trial import runners

ESTIMATE = ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "validate.verl=false", "tracking.enabled=false"]
SETTINGS = {"paths": PathsConfig, "trial": TrialConfig, "validate": ValidateConfig, "plan": PlanConfig,
            "objective": Objective, "tracking": TrackingConfig, "monitor": MonitorConfig}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml") if p.stem != "auto")


def test_a_value_of_the_wrong_type_is_named_with_its_key_and_type_before_anything_is_planned(monkeypatch):
    planned, composed = [], []
    monkeypatch.setattr(verdict, "predict", lambda *a: planned.append(a))
    monkeypatch.setattr("verlsweep.prepare.build_command", lambda *a, **k: composed.append(a))
    with pytest.raises(ConfigError) as err:
        prepare(compose_config([*ESTIMATE, "hardware.hbm_total_gb=96GB", "trial.steps=five"]), overrides=[])
    problems = {p.key: p for p in err.value.problems}
    assert set(problems) == {"hardware.hbm_total_gb", "trial.steps"}
    assert (problems["hardware.hbm_total_gb"].value, problems["hardware.hbm_total_gb"].allowed) == \
        ("96GB", "a number or null")
    assert (problems["trial.steps"].value, problems["trial.steps"].allowed) == ("five", "an integer")
    assert "hardware.hbm_total_gb='96GB': a number or null" in str(err.value)
    assert planned == [] and composed == []


def test_a_key_a_node_does_not_have_and_a_key_it_needs_are_named():
    with pytest.raises(ConfigError) as err:
        read(compose_config(["+hardware.hbm_totl_gb=64", "~monitor.interval", "runner.schedule_timeout=soon"]))
    problems = {p.key: p.allowed for p in err.value.problems}
    assert problems["hardware.hbm_totl_gb"].startswith("a key of hardware: ") and "hbm_total_gb" in \
        problems["hardware.hbm_totl_gb"]
    assert problems["monitor.interval"] == "required: a number"
    assert problems["runner.schedule_timeout"] == "a number or null"


def test_an_unknown_runner_and_an_unresolvable_group_are_named():
    with pytest.raises(ConfigError, match="runner.name='slurm': one of verl, script, estimate"):
        read(compose_config(["runner.name=slurm"]))
    with pytest.raises(ConfigError, match="python -m verlsweep.plan detect") as err:
        read(compose_config(["hardware=auto"]))
    assert err.value.problems[0].key.startswith("hardware.")


def test_prepare_converts_the_config_once_and_hands_the_typed_nodes_on(monkeypatch):
    converted = []
    real = task_config.convert
    monkeypatch.setattr(task_config, "convert", lambda cls, node, key: converted.append(key) or real(cls, node, key))
    prepared = prepare(compose_config(ESTIMATE), overrides=[])
    assert sorted(converted) == sorted([*task_config.NODES, "runner"])        # each node once, whoever reads it
    task = prepared.config
    assert isinstance(task, TaskConfig) and prepared.spec.options is task.runner
    assert prepared.spec.hardware is task.hardware and prepared.spec.objective is task.objective
    assert task.verl["actor_rollout_ref.rollout.tensor_model_parallel_size"] == 2     # flat, resolved


def test_nodes_are_frozen_and_read_as_mappings():
    task = read(compose_config(ESTIMATE))
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.trial.steps = 3                                     # type: ignore[misc]
    assert task["plan"]["enforce"] is True and task.runner["noise"] == 0.0 and dict(task.monitor)["interval"] == 5.0
    assert task.objective.extra == () and isinstance(task.runner.entrypoint, tuple)


@pytest.mark.parametrize("node, cls", SETTINGS.items())
def test_a_settings_node_states_every_key_in_its_yaml_and_the_dataclass_gives_none_a_default(node, cls):
    stated = yaml.safe_load((CONF_DIR / node / "default.yaml").read_text())
    assert set(stated) == {f.name for f in dataclasses.fields(cls)}
    assert required(cls) == [f.name for f in dataclasses.fields(cls)]


def _group_files() -> list[tuple[type, Path, dict]]:
    """(the class, an option file, the node it states) for every option of the groups verlsweep types."""
    out = []
    for path in sorted((CONF_DIR / "hardware").glob("*.yaml")) + sorted((CONF_DIR / "device").glob("*.yaml")):
        out.append((Hardware, path, yaml.safe_load(path.read_text())["hardware"]))
    out += [(ModelConfig, p, yaml.safe_load(p.read_text())["model"])
            for p in sorted((CONF_DIR / "model").glob("*.yaml"))]
    out += [(AlgorithmConfig, p, yaml.safe_load(p.read_text())["algorithm"])
            for p in sorted((CONF_DIR / "algorithm").glob("*.yaml"))]
    for path in sorted((CONF_DIR / "runner").glob("*.yaml")):
        stated = yaml.safe_load(path.read_text())
        out.append((RUNNERS[stated["name"]], path, {k: v for k, v in stated.items() if k != "defaults"}))
    return out


@pytest.mark.parametrize("cls, path, stated", _group_files(), ids=lambda x: x.name if isinstance(x, Path) else "")
def test_no_dataclass_default_repeats_a_value_an_option_states(cls, path, stated):
    """A field an option may leave out defaults to None, "not stated": never a value of its own, and never
    one an option writes down."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    assert not [f.name for f in dataclasses.fields(cls) if f.default_factory is not dataclasses.MISSING]
    assert all(d is None for d in defaults.values()), defaults
    assert not [k for k in defaults if k in stated and stated[k] is None], f"{path} states a default of {cls.__name__}"
    assert set(stated) <= {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("group, option", [*(("hardware", o) for o in options("hardware")),
                                           *(("model", o) for o in options("model")),
                                           *(("runner", o) for o in options("runner")),
                                           *(("algorithm", o) for o in options("algorithm"))])
def test_every_shipped_option_reads_and_the_guides_plain_path_gives_the_same_nodes(group, option):
    cfg = compose_config([f"{group}={option}"])
    task = read(cfg)
    tree = inputs.tree_of(cfg)
    assert from_plain(Hardware, tree["hardware"]) == task.hardware
    assert from_plain(ModelConfig, tree["model"]) == task.model
    assert from_plain(PlanConfig, tree["plan"]) == task.plan
    assert from_plain(type(task.runner), task_config.plain(cfg.runner)) == task.runner


def test_every_runner_option_has_a_typed_config_and_a_runner():
    assert set(RUNNERS) == set(runners.names()) == set(options("runner"))
