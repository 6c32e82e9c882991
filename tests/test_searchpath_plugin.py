"""hydra_plugins/verlsweep_searchpath: the search spaces in sweeps/ are config group `space`, and the dirs
of $VERLSWEEP_CONFIG_PATH add options, for verlsweep's config tree only."""
from __future__ import annotations

from hydra.core.object_type import ObjectType

from hydra_plugins.verlsweep_searchpath.space_source import SpaceConfigSource
from verlsweep import CONF_DIR, SWEEPS_DIR
from verlsweep.command import config_store
from verlsweep.command.argv import group_options
from verlsweep.command.compose import compose_config
from verlsweep.command.hydra_compose import group_options as hydra_group_options
from verlsweep.common.names import CONFIG_PATH_ENV

SPACES = sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def test_the_search_spaces_are_group_space_read_from_sweeps_not_from_conf():
    assert not (CONF_DIR / "space").exists()
    assert group_options(CONF_DIR)["space"] == SPACES and "smoke" in SPACES
    cfg = compose_config(["space=smoke"], return_hydra_config=True)
    assert cfg.hydra.sweeper.n_trials == 2 and cfg.trial.steps == 2        # sweeps/smoke.yaml


def test_the_space_source_holds_the_one_group_and_nothing_else():
    source = SpaceConfigSource("test", f"verlsweep-space://{SWEEPS_DIR}")
    assert source.list("", ObjectType.GROUP) == ["space"] and source.list("", ObjectType.CONFIG) == []
    assert source.list("space", ObjectType.CONFIG) == SPACES
    assert source.is_config("space/smoke") and not source.is_config("smoke") and not source.is_group("hardware")
    assert source.load_config("space/smoke").config.hydra.sweeper.n_trials == 2


def test_another_apps_config_dir_gets_neither_the_spaces_nor_the_users_dirs(tmp_path, monkeypatch):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "config.yaml").write_text("x: 1\n")
    (tmp_path / "site" / "hardware").mkdir(parents=True)
    (tmp_path / "site" / "hardware" / "lab.yaml").write_text("# @package _global_\nhardware: {name: lab}\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path / "site"))
    assert hydra_group_options(tmp_path / "app", "config") == {}
    assert hydra_group_options(CONF_DIR, "sweep")["hardware"][-1] == "lab"     # the same variable, for ours


def test_the_dirs_of_the_config_path_variable_add_options_after_conf(tmp_path, monkeypatch):
    for site, name in (("site_a", "lab_a"), ("site_b", "lab_b")):
        (tmp_path / site / "hardware").mkdir(parents=True)
        (tmp_path / site / "hardware" / f"{name}.yaml").write_text(
            f"# @package _global_\ndefaults:\n  - /hardware/a2_64g\n  - _self_\nhardware:\n  name: {name}\n")
    # a file named like a shipped one is found second: conf/'s wins
    (tmp_path / "site_a" / "hardware" / "a2_32g.yaml").write_text("# @package _global_\nhardware: {name: mine}\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, f"{tmp_path / 'site_a'}:{tmp_path / 'site_b'}")
    config_store.register()
    assert {"lab_a", "lab_b", "a2_64g"} <= set(group_options(CONF_DIR)["hardware"])
    assert compose_config(["hardware=lab_b"]).hardware.name == "lab_b"
    assert compose_config(["hardware=a2_32g"]).hardware.name == "a2_32g"


def test_a_local_default_in_a_users_dir_sets_the_sites_values_after_every_group(tmp_path, monkeypatch):
    config_store.register()
    assert compose_config(["space=smoke"]).trial.steps == 2         # sweeps/smoke.yaml
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "default.yaml").write_text(
        "# @package _global_\ntrial:\n  steps: 7\nslurm:\n  partition: lab\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path))
    cfg = compose_config(["space=smoke"])
    assert (cfg.trial.steps, cfg.slurm.partition) == (7, "lab")
    assert compose_config(["space=smoke", "trial.steps=3"]).trial.steps == 3       # the command line still wins
