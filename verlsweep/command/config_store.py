"""Structured pieces of the config tree that YAML cannot express."""
from __future__ import annotations

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from verlsweep.command import resolvers

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

    resolvers.register()    # every ${verlsweep.*:} of the tree (verlsweep/command/resolvers.py)


