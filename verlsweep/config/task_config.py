"""The composed config of one trial, read once into typed nodes: `read(cfg) -> TaskConfig`.

verlsweep.prepare calls it first, so a value of the wrong type (`hardware.hbm_total_gb=96GB`,
`trial.steps=five`), a key a node does not have or one it needs left out is a ConfigError naming the
full key and what it takes, before anything is composed, planned or launched. Below prepare every
stage reads the typed nodes; only verlsweep.command, which turns `verl:` into verl's argv, reads the
composed config itself.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.config.hardware import Hardware
from verlsweep.config.model import ModelConfig
from verlsweep.config.node import ConfigNode, convert
from verlsweep.config.runner import RUNNERS, RunnerConfig
from verlsweep.config.settings import (
    AlgorithmConfig,
    MonitorConfig,
    Objective,
    PathsConfig,
    PlanConfig,
    TrackingConfig,
    TrialConfig,
    ValidateConfig,
)

# The nodes read, by key.
NODES: dict[str, type[ConfigNode]] = {
    "hardware": Hardware, "model": ModelConfig, "algorithm": AlgorithmConfig, "paths": PathsConfig,
    "trial": TrialConfig, "validate": ValidateConfig, "plan": PlanConfig, "objective": Objective,
    "tracking": TrackingConfig, "monitor": MonitorConfig,
}
# Resolved first, so a broken group is named itself rather than a key that refers to it (trial.name
# interpolates hardware.name, verl's data files data.dir).
GROUPS_FIRST = ("hardware", "model", "algorithm", "data", "paths")


@dataclass(frozen=True)
class TaskConfig(ConfigNode):
    """One trial's config, typed. `verl` is flat: verl's dotted keys -> resolved values (`flatten`)."""

    hardware: Hardware
    model: ModelConfig
    algorithm: AlgorithmConfig
    paths: PathsConfig
    trial: TrialConfig
    validate: ValidateConfig
    plan: PlanConfig
    objective: Objective
    tracking: TrackingConfig
    monitor: MonitorConfig
    runner: RunnerConfig
    env: dict[str, Any]                   # the trial's environment as composed (verlsweep.command makes strings)
    verl: dict[str, Any]
    dry_run: bool


def plain(value: Any) -> Any:
    """A config value as plain Python, interpolations resolved (plain values as they are)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Resolved leaves of a nested mapping as dotted paths; lists stay whole (they are verl values)."""
    container: Any = OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node
    out: dict[str, Any] = {}
    for key, value in container.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if value:
                out.update(flatten(value, f"{path}."))
            # an empty mapping sets nothing verl does not already have
        else:
            out[path] = value
    return out


def _resolved(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], Problem | None]:
    """Every node of the composed config resolved into plain values (GROUPS_FIRST), or the
    first interpolation that does not resolve (env vars, ${...} references, hardware=auto's explanation)."""
    out: dict[str, Any] = {}
    for key in [*(k for k in GROUPS_FIRST if k in cfg), *(k for k in cfg if k not in GROUPS_FIRST)]:
        try:
            out[key] = plain(cfg[key])
        except InterpolationResolutionError as exc:
            message = re.sub(r"^\w+ raised while resolving interpolation: ", "", str(exc).splitlines()[0])
            return out, Problem(str(exc.full_key or key), None, message, rule="interpolation")
    return out, None


def check_resolves(cfg: Mapping[str, Any]) -> list[Problem]:
    """Every interpolation of the composed config resolves; else the first that does not, as a Problem."""
    return [problem] if (problem := _resolved(cfg)[1]) is not None else []


def read(cfg: Mapping[str, Any]) -> TaskConfig:
    """The composed config (or an already read TaskConfig, returned as it is) as a TaskConfig. Raises
    ConfigError with every problem of every node."""
    if isinstance(cfg, TaskConfig):
        return cfg
    plain, unresolved = _resolved(cfg)
    if unresolved is not None:
        raise ConfigError([unresolved])
    nodes: dict[str, Any] = {}
    problems: list[Problem] = []
    runner = plain.get("runner")
    name = runner.get("name") if isinstance(runner, Mapping) else None
    if name not in RUNNERS:
        problems.append(Problem("runner.name", name, f"one of {', '.join(RUNNERS)}"))
    for key, cls in [*NODES.items(), *([("runner", RUNNERS[name])] if name in RUNNERS else [])]:
        try:
            nodes[key] = convert(cls, plain.get(key), key)
        except ConfigError as exc:
            problems += exc.problems
    dry_run = plain.get("dry_run")
    if not isinstance(dry_run, bool):
        problems.append(Problem("dry_run", dry_run, "true or false"))
    if problems:
        raise ConfigError(problems)
    return TaskConfig(**nodes, env=dict(plain.get("env") or {}), verl=flatten(plain.get("verl") or {}),
                      dry_run=bool(dry_run))
