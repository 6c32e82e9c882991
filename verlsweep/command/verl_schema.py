"""verl's own config machinery, used read-only: its ppo_trainer defaults and its compose step.

verl's trainer is a Hydra app (verl/trainer/main_ppo.py: `@hydra.main(config_path="config",
config_name="ppo_trainer")`). Composing that config here with the trial's overrides applies the
same struct checks verl applies at start-up, without importing torch.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import hydra
import omegaconf
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from verlsweep.command.hydra_compose import compose_dir
from verlsweep.common import disk_cache

# Keys that verl itself documents as "add with +": open mappings that its yaml leaves empty or
# partial (docs/verl.md, Config keys that need `+`: engine_kwargs, ray_init, reward_kwargs).
DYNAMIC_PREFIXES: tuple[str, ...] = (
    "actor_rollout_ref.rollout.engine_kwargs.",
    "ray_kwargs.ray_init.",
    "reward.reward_kwargs.",
)


class VerlNotInstalled(RuntimeError):
    """The `verl` extra is missing, so verl's own checks cannot run."""


def config_dir() -> Path:
    """verl's trainer config dir, found without importing verl (which imports torch)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise VerlNotInstalled("verl is not installed: pip install -e '.[verl]'")
    return Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"


def compose_verl(overrides: list[str]) -> DictConfig:
    """verl's `ppo_trainer` config with `overrides` applied, exactly as verl's Hydra would.

    Raises hydra.errors.ConfigCompositionException (unknown key, bad `+`, grammar error).
    """
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
    if not all(_plain_value(o) for o in parsed):
        return compose_dir(config_dir(), "ppo_trainer", overrides)
    # Hydra's compose reads and merges verl's YAML files, then applies the value overrides to the result
    # in struct mode (hydra/_internal/config_loader_impl.py _load_configuration_impl); the same step on a
    # copy of that merge, made once per process, gives the same config and the same errors without re-reading
    # the files (a few times faster per trial).
    cfg = copy.deepcopy(_composed_defaults())
    ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    return cfg


def _plain_value(override: Override) -> bool:
    """An override Hydra applies to the composed config (`a.b=v`, `+a.b=v`, `~a.b`), not one that picks a
    config group, a package or Hydra's own settings, or a sweep (those take the full compose)."""
    key = override.key_or_group
    return ("." in key and "/" not in key and override.package is None and not override.is_sweep_override()
            and not override.is_hydra_override())


@lru_cache(maxsize=1)
def _composed_defaults() -> DictConfig:
    """verl's ppo_trainer composed without overrides, in struct mode as compose leaves it (copied before use).

    Composing reads verl's 47 config files (over a second); every sweep process and every trial run in a
    process of its own needs it once, and it changes only with verl's files or the Hydra/OmegaConf that
    compose them. So the result is kept in the cache directory as JSON (values and interpolations as
    written, `???` for missing) under a hash of those, and read back in a fraction of the time.
    """
    path = defaults_cache_path()
    cached = disk_cache.read_json(path)      # None: not cached yet, or half-written by another process
    cfg = None
    if isinstance(cached, dict):
        try:
            cfg = OmegaConf.create(cached)
        except omegaconf.errors.OmegaConfBaseException:
            pass
    if not isinstance(cfg, DictConfig):
        cfg = compose_dir(config_dir(), "ppo_trainer", [])
        try:
            disk_cache.store(path, json.dumps(OmegaConf.to_container(cfg, resolve=False)))
        except OSError:
            pass            # a read-only home: compose again next time
        return cfg
    OmegaConf.set_struct(cfg, True)
    return cfg


def defaults_cache_path() -> Path:
    """Where verl's composed defaults are kept: named by a hash of verl's config files (paths and contents)
    and the Hydra and OmegaConf versions."""
    digest = hashlib.sha256(f"hydra {hydra.__version__} omegaconf {omegaconf.__version__}".encode())
    base = config_dir()
    files = sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml"))
    disk_cache.add_files(digest, base, files)
    return disk_cache.root() / "verl" / f"ppo_trainer-{digest.hexdigest()[:24]}.json"


@lru_cache(maxsize=1)
def defaults() -> DictConfig:
    """verl's ppo_trainer config with no overrides (read-only)."""
    cfg = copy.deepcopy(_composed_defaults())
    OmegaConf.set_readonly(cfg, True)
    return cfg


@lru_cache(maxsize=1)
def leaf_keys() -> tuple[str, ...]:
    """Every dotted key of verl's default config (what a misspelt key is matched against)."""
    from verlsweep.command.overrides import flatten

    return tuple(flatten(OmegaConf.to_container(defaults(), resolve=False)))


def has_key(path: str) -> bool:
    """Whether `path` (dotted) exists in verl's composed default config."""
    node: Any = defaults()
    for part in path.split("."):
        # `in` is False for MISSING (???) values such as rollout.name, which verl still defines
        if not isinstance(node, DictConfig) or part not in node.keys():
            return False
        node = node._get_node(part)  # no interpolation resolution: values like ${...} are fine
    return True


def dataclass_field_added(path: str) -> bool:
    """Whether `path` names a field of the dataclass behind its parent node but absent from verl's yaml.

    verl converts nodes with `_target_` into dataclasses (verl/utils/config.py omega_conf_to_dataclass),
    so such fields (e.g. rollout.enable_sleep_mode) are real settings that need `+` on the command line.
    """
    parent, _, leaf = path.rpartition(".")
    if not parent or not has_key(parent):
        return False
    node = OmegaConf.select(defaults(), parent)
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if not target:
        return False
    module_name, _, cls_name = target.rpartition(".")
    import dataclasses
    import importlib

    cls = getattr(importlib.import_module(module_name), cls_name, None)
    return dataclasses.is_dataclass(cls) and leaf in {f.name for f in dataclasses.fields(cls)}


def needs_plus(path: str) -> bool:
    """`+` only for keys verl adds dynamically, so a typo in any other key still fails in verl."""
    if path.startswith(DYNAMIC_PREFIXES):
        return not has_key(path)
    return not has_key(path) and dataclass_field_added(path)
