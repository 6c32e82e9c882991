"""The knobs one trial sets: the `verl.*` / `env.*` overrides of its Hydra job (command line or sweeper)."""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf


def job_overrides() -> list[str]:
    """This job's overrides (`hydra.overrides.task`): the command line's plus the sweeper's per trial."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return list(HydraConfig.get().overrides.task)


def override_keys(overrides: list[str]) -> list[str]:
    """Config keys the overrides set, in order, without `+`/`++`/`~` (Hydra's own override parser)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    keys = [o.key_or_group for o in parsed if not o.is_delete()]
    return list(dict.fromkeys(keys))


def knobs(cfg: DictConfig, overrides: list[str], prefixes: tuple[str, ...] = ("verl.", "env.")) -> dict[str, Any]:
    """{key: composed value} for the overridden keys under `prefixes`; `verl.` is dropped so the keys are
    verl's own dotted paths. The value is read from the composed config (interpolations resolved)."""
    out: dict[str, Any] = {}
    for key in override_keys(overrides):
        if not key.startswith(prefixes):
            continue
        value = OmegaConf.select(cfg, key, throw_on_missing=False)
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        out[key.removeprefix("verl.")] = value
    return out
