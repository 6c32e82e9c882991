"""The config tree's shape (docs/config-tree.md): the root config is a defaults list, each node of it a
group with a `default` option, as lightning-hydra-template keeps configs/train.yaml."""
from __future__ import annotations

import pytest
import yaml

from verlsweep import CONF_DIR
from verlsweep.command.argv import help_groups
from verlsweep.command.compose import compose_config

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
