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

    # conf/hardware/auto.yaml resolves to an explanation of how to make a profile (planner, issue 5)
    from verlsweep.plan.detect import register_resolver

    register_resolver()
