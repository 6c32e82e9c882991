"""verlsweep.command.verl_schema's disk cache of verl's composed defaults: what it reads back composes
exactly as Hydra's full compose of verl's files, and it is composed again when those files change."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verlsweep.command import verl_schema
from verlsweep.command.hydra_compose import compose_dir

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra")

ROLLOUT = "actor_rollout_ref.rollout"
CASES = [[], [f"{ROLLOUT}.gpu_memory_utilization=0.5", "+actor_rollout_ref.rollout.engine_kwargs.vllm.x=1",
              "~trainer.logger"],
         [f"{ROLLOUT}.gpu_memory_utilizaton=0.5"], [f"+{ROLLOUT}.gpu_memory_utilization=0.5"],
         ["trainer.logger={a:1}"]]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, and no defaults held in this process before or after the test."""
    monkeypatch.setenv("VERLSWEEP_CACHE", str(tmp_path / "cache"))
    verl_schema._composed_defaults.cache_clear()
    yield tmp_path / "cache"
    verl_schema._composed_defaults.cache_clear()


def outcome(compose, overrides: list[str]) -> tuple:
    try:
        cfg = compose(list(overrides))
    except Exception as exc:  # noqa: BLE001 -- the same error, type and text, is the point
        return type(exc).__name__, str(exc)
    return repr(OmegaConf.to_container(cfg, resolve=False)), OmegaConf.is_struct(cfg)


def read_back() -> None:
    """Forget this process's copy: the next use reads the cache directory."""
    verl_schema._composed_defaults.cache_clear()


def test_the_first_use_writes_the_defaults_and_later_processes_compose_from_them_as_hydra_does(cache):
    cold = OmegaConf.to_container(verl_schema._composed_defaults(), resolve=False)
    (written,) = (cache / "verl").glob("ppo_trainer-*.json")
    assert written == verl_schema.defaults_cache_path()
    read_back()
    assert repr(OmegaConf.to_container(verl_schema._composed_defaults(), resolve=False)) == repr(cold)
    for overrides in CASES:
        full = outcome(lambda ov: compose_dir(verl_schema.config_dir(), "ppo_trainer", ov), overrides)
        read_back()
        assert outcome(verl_schema.compose_verl, overrides) == full, overrides


def test_a_half_written_cache_file_is_composed_again_and_replaced(cache):
    path = verl_schema.defaults_cache_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"actor_rollout_ref": {')
    cfg = verl_schema._composed_defaults()
    assert cfg.actor_rollout_ref.rollout.gpu_memory_utilization == 0.5 and OmegaConf.is_struct(cfg)
    read_back()
    assert repr(OmegaConf.to_container(verl_schema._composed_defaults())) == repr(OmegaConf.to_container(cfg))
    assert path.read_text().startswith('{"') and len(path.read_text()) > 10_000


def test_another_verl_config_is_another_cache_entry(cache, tmp_path, monkeypatch):
    before = verl_schema.defaults_cache_path()
    copied = tmp_path / "verl_config"
    shutil.copytree(verl_schema.config_dir(), copied)
    monkeypatch.setattr(verl_schema, "config_dir", lambda: copied)
    assert verl_schema.defaults_cache_path() == before                  # the same files, the same entry
    rollout = copied / "rollout" / "rollout.yaml"
    rollout.write_text(rollout.read_text().replace("gpu_memory_utilization: 0.5", "gpu_memory_utilization: 0.4"))
    assert verl_schema.defaults_cache_path() != before
    assert verl_schema._composed_defaults().actor_rollout_ref.rollout.gpu_memory_utilization == 0.4
