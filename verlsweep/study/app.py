"""Which app the sweep sweeps: verlsweep's own trial task, or any other Hydra app.

The sweeper serves both. What only makes sense for a verl trial (the fixed-config check, the planner's
guide and veto, the proof rules of verlsweep.proofs, `trial.*` overrides, best_launch.sh, the MLflow
parent run, report.html) applies to our own task alone; another app gets the search, its study and
the sweep's own files (trials.csv, best.yaml, optimization_results.yaml), and nothing in its config.

The rule: the app is ours when its composed config has every node our trial task reads (OWN_NODES:
conf/sweep.yaml's `verl`, `trial`, `objective`, `hardware`, `model` and the `runner` group). Checked on
the composed config, not the script's name, so tests/support/sweeper_app.py and a user's own entry
point over conf/sweep.yaml count as ours, and an app that only happens to have a `trial` or
`tracking` key does not.
"""
from __future__ import annotations

import hashlib
import json
import re

from omegaconf import DictConfig, OmegaConf

from verlsweep.study.create import signature
from verlsweep.study.space import SearchSpace

OWN_NODES = ("verl", "trial", "objective", "hardware", "model", "runner")


def is_own_task(config: DictConfig) -> bool:
    """Whether `config` (the sweeper's, with or without its `hydra` node) is verlsweep's trial config."""
    return all(isinstance(OmegaConf.select(config, key, default=None), DictConfig) for key in OWN_NODES)


def study_name(config: DictConfig, space: SearchSpace) -> str:
    """Another app's default study name: `<job name>.<hash of the search space>` (`sphere.3f2a91c0`),
    so another space is another study, as create.default_study_name does for ours."""
    job = str(OmegaConf.select(config, "hydra.job.name", default=None) or "app")
    digest = hashlib.sha1(json.dumps(signature(space), sort_keys=True).encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', job)}.{digest}"
