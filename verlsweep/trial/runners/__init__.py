"""Trial runners by `runner.name`: verl (real trainer), script (recipe script), estimate (planner)."""
from __future__ import annotations

import importlib

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.trial.runners.base import Clearance, RunDetails, Runner, RunOutput, RunSpec

# name -> "module:Class"; imported lazily so `estimate` exists only once its module does.
_REGISTRY: dict[str, str] = {
    "verl": "verlsweep.trial.runners.verl:VerlRunner",
    "script": "verlsweep.trial.runners.script:ScriptRunner",
    "estimate": "verlsweep.trial.runners.estimate:EstimateRunner",
}

__all__ = ["Clearance", "RunDetails", "RunOutput", "RunSpec", "Runner", "get_runner", "names"]


def names() -> list[str]:
    return list(_REGISTRY)


def get_runner(name: str) -> Runner:
    """The runner registered as `name`; unknown names are a ConfigError listing the known ones."""
    target = _REGISTRY.get(name)
    if target is None:
        raise ConfigError([Problem("runner.name", name, f"one of {', '.join(_REGISTRY)}")])
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ConfigError([Problem("runner.name", name, f"runner module {module_name} is not installed")]) from None
    return getattr(module, cls_name)()
