"""Structured pieces of the config tree that YAML cannot express."""
from __future__ import annotations

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

VERL_BASE = "verl_base"


def register() -> None:
    """Register `verl_base`: an open (non-struct) `verl:` node at the root of conf/sweep.yaml.

    Hydra makes the composed config struct, so `verl.<any verl key>=v` would need `+` for every key a
    group does not already set. Keeping only this subtree open lets the command line and sweeps set
    any verl key plainly; a misspelt one then fails verl's own compose in validation, by name.
    """
    node = OmegaConf.create({"verl": {}})
    OmegaConf.set_struct(node.verl, False)
    ConfigStore.instance().store(name=VERL_BASE, node=node)

    # conf/hardware/auto.yaml: every field resolves to the explanation of how to make a profile
    if not OmegaConf.has_resolver(AUTO_RESOLVER):
        OmegaConf.register_new_resolver(AUTO_RESOLVER, _hardware_auto)
    # conf/sweep.yaml: verl's trainer.project_name is the MLflow experiment of the trial
    if not OmegaConf.has_resolver(COALESCE_RESOLVER):
        OmegaConf.register_new_resolver(COALESCE_RESOLVER, coalesce)


AUTO_RESOLVER = "verlsweep.hardware_auto"
COALESCE_RESOLVER = "verlsweep.coalesce"


def coalesce(*values: object) -> object:
    """The first value that is set (oc.select returns a key's null instead of its default)."""
    return next((v for v in values if v is not None and v != ""), None)


class HardwareAutoError(ValueError):
    """Raised while resolving `hardware=auto`: there is no profile to use yet."""


def _hardware_auto(*_: object) -> object:
    raise HardwareAutoError(
        "hardware=auto has no profile to use yet: on the accelerator node run "
        "`python -m verlsweep.plan detect --name <name>` (or `--from-npu-smi FILE` with recorded "
        "`npu-smi info` output), which writes conf/hardware/<name>.yaml, then pass hardware=<name>")
