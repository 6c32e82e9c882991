"""The config tree's shape (docs/config-tree.md): the root config is a defaults list, each node of it a
group with a `default` option, as lightning-hydra-template keeps configs/train.yaml."""
from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf

from verlsweep import CONF_DIR
from verlsweep.command.argv import help_groups
from verlsweep.command.compose import compose_config
from verlsweep.plan.predictor.inputs import from_cfg, params_b
from verlsweep.plan.predictor.trial_spec import NotPlannable

ROOT = yaml.safe_load((CONF_DIR / "sweep.yaml").read_text())


def test_the_root_config_is_a_defaults_list_and_dry_run():
    assert set(ROOT) == {"defaults", "dry_run"}


def test_every_settings_node_of_the_root_is_a_group_with_a_default_option():
    nodes = ("paths", "trial", "validate", "plan", "env", "objective", "tracking", "monitor", "slurm", "verl", "hydra")
    picked = {k: v for entry in ROOT["defaults"] if isinstance(entry, dict) for k, v in entry.items()}
    for node in nodes:
        assert picked.get(node) == "default", node
        assert (CONF_DIR / node / "default.yaml").is_file(), node


def test_help_lists_the_groups_a_user_picks_and_not_the_settings_nodes():
    shown = [line.split()[0] for line in help_groups().splitlines()]
    assert shown == ["algorithm", "data", "hardware", "model", "runner", "space"]


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF_DIR / "hardware").glob("*.yaml") if p.stem != "auto"))
def test_a_hardware_profile_says_its_device_once_by_the_device_option_it_picks(name):
    profile = yaml.safe_load((CONF_DIR / "hardware" / f"{name}.yaml").read_text())
    [device] = [entry["/device"] for entry in profile["defaults"] if isinstance(entry, dict) and "/device" in entry]
    assert "device" not in profile["hardware"]
    cfg = compose_config([f"hardware={name}"])
    assert cfg.hardware.device == device and cfg.verl.trainer.device == device


MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
# the parameter counts the model files stated by hand before they were derived (billions)
STATED_PARAMS_B = {"qwen3_0_6b": 0.596, "qwen3_1_7b": 1.721, "qwen3_4b": 4.022, "qwen3_8b": 8.191, "qwen3_14b": 14.768,
                   "qwen3_32b": 32.762, "qwen3_30b_a3b": 30.532, "qwen2_5_7b_instruct": 7.616}


@pytest.mark.parametrize("name", MODELS)
def test_a_model_file_holds_its_config_json_fields_under_their_own_names(name):
    node = yaml.safe_load((CONF_DIR / "model" / f"{name}.yaml").read_text())["model"]
    assert set(node) == {"name", "hf_id", "path", "config"}          # no params_b, no shapes of its own
    assert {"model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings"} <= set(node["config"])


@pytest.mark.parametrize("name", MODELS)
def test_the_parameter_count_is_derived_from_config_json_as_the_files_stated_it(name):
    config = OmegaConf.to_container(compose_config([f"model={name}"]).model.config)
    assert params_b(config) == STATED_PARAMS_B[name]


def test_a_model_without_a_config_json_field_the_planner_needs_is_named():
    with pytest.raises(NotPlannable, match=r"lacks model.config.vocab_size \(its config.json's fields\)"):
        from_cfg(compose_config(["~model.config.vocab_size"]))
