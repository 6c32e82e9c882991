"""hydra-optuna-sweeper's configuration language and outputs, for apps moving over from it.

Followed: hydra's plugins/hydra_optuna_sweeper (hydra_plugins/hydra_optuna_sweeper/_impl.py and
config.py; its released 1.3 line for the deprecated `search_space`), read for behaviour only:

    search_space         {name: {type, low, high, step, log, choices}}: used, with a deprecation line,
                         when `params` is not set; ignored, with a warning, when it is
    custom_search_space  a dotted path to fn(cfg, trial) that suggests more params after the space's
    max_failure_rate     after each batch: failed / batch size > rate stops the sweep
    optimization_results.yaml and the `Best parameters` / `Best value` log lines

Every app's sweep reads these; what differs for an app other than ours is verlsweep.study.hooks.AppHooks.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
import yaml
from omegaconf import DictConfig
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

from verlsweep.common.errors import Problem
from verlsweep.common.files import write_atomic
from verlsweep.config import plain
from verlsweep.reconcile.results import Told
from verlsweep.study.space import SearchSpace, SearchSpaceError

log = logging.getLogger(__name__)

RESULTS_YAML = "optimization_results.yaml"
RESULTS_NAME = "optuna"          # the peer's fixed `name`; scripts that read the file check it


def _legacy_distribution(name: str, spec: Mapping[str, Any]) -> BaseDistribution:
    kind = str(spec.get("type", ""))
    key = f"hydra.sweeper.search_space.{name}"
    known = {"type", "low", "high", "step", "log", "choices"}
    if set(spec) - known:
        raise SearchSpaceError([Problem(key, sorted(set(spec) - known), f"keys among {sorted(known)}")])
    if kind == "categorical" and spec.get("choices"):
        return CategoricalDistribution(list(spec["choices"]))
    if kind in ("int", "float") and spec.get("low") is not None and spec.get("high") is not None:
        log_scale, step = bool(spec.get("log", False)), spec.get("step")
        if kind == "int":
            return IntDistribution(int(spec["low"]), int(spec["high"]), log=log_scale,
                                   step=1 if log_scale or step is None else int(step))
        return FloatDistribution(float(spec["low"]), float(spec["high"]), log=log_scale,
                                 step=None if log_scale or step is None else float(step))
    raise SearchSpaceError([Problem(key, dict(spec), "{type: categorical, choices: [...]} or "
                                    "{type: int|float, low, high[, step][, log]}; better: hydra.sweeper.params")])


def legacy_search_space(search_space: Any, params: Any) -> dict[str, BaseDistribution]:
    """The deprecated `hydra.sweeper.search_space` as distributions ({} when not used)."""
    if search_space is None:
        return {}
    if params is not None:
        log.warning("hydra.sweeper.search_space and hydra.sweeper.params are both set: the sweep uses params "
                    "and ignores search_space")
        return {}
    log.warning("DeprecationWarning: hydra.sweeper.search_space is deprecated (as in hydra-optuna-sweeper); "
                "write each param as hydra.sweeper.params.<name>: choice(...) | range(...) | interval(...)")
    spec: Mapping[str, Any] = plain(search_space)
    return {str(name): _legacy_distribution(str(name), dict(value)) for name, value in spec.items()}


def add_legacy(space: SearchSpace, legacy: dict[str, BaseDistribution]) -> None:
    """search_space's params join the space unless params or the command line set them."""
    for name, dist in legacy.items():
        if name not in space.distributions and name not in space.fixed:
            space.distributions[name] = dist


def extender(path: str | None) -> Callable[[DictConfig, optuna.Trial], None] | None:
    """`custom_search_space`: the function it names, called as fn(sweeper config, trial) after each ask."""
    if not path:
        return None
    from hydra.utils import get_method

    try:
        return get_method(path)
    except Exception as exc:  # noqa: BLE001 - Hydra's own error names what failed to import
        raise SearchSpaceError([Problem("hydra.sweeper.custom_search_space", path,
                                        f"a dotted path to a function(cfg, trial) importable from the "
                                        f"app's directory ({exc})")]) from None


def check_rate(rate: float | None) -> list[Problem]:
    if rate is not None and not 0.0 <= float(rate) <= 1.0:
        return [Problem("hydra.sweeper.max_failure_rate", rate, "a fraction from 0.0 to 1.0 (or null)")]
    return []


def failure_rate_exceeded(told: list[Told], rate: float,
                          failed_: Callable[[Told], bool] = lambda t: t.failed) -> bool:
    """The peer's rule, per batch: more of the batch's trials failed (`failed_`) than `rate` allows."""
    failed = [t for t in told if failed_(t)]
    return bool(told) and len(failed) / len(told) > float(rate)


def write_results(study: optuna.Study, best: list[FrozenTrial], sweep_dir: Path,
                  shown: Callable[[str, Any], Any], say: bool = True) -> None:
    """optimization_results.yaml in the peer's schema, and the peer's log lines when `say` (our own task's
    summary has said the best already); nothing without a best trial (where the peer fails with 'No trials
    are completed yet')."""
    def value(v: float) -> str:
        return repr(v)

    if not best:
        if say:
            log.info("no completed trial: no %s", RESULTS_YAML)
        return

    def params(t: FrozenTrial) -> dict[str, Any]:
        return {k: shown(k, v) for k, v in t.params.items()}

    if len(study.directions) == 1:
        doc: dict[str, Any] = {"name": RESULTS_NAME, "best_params": params(best[0]), "best_value": best[0].values[0]}
        if say:
            log.info("Best parameters: %s", doc["best_params"])
            log.info("Best value: %s", value(doc["best_value"]))
    else:
        doc = {"name": RESULTS_NAME, "solutions": [{"params": params(t), "values": list(t.values)} for t in best]}
        if say:
            log.info("Number of Pareto solutions: %d", len(best))
            for t in doc["solutions"]:
                log.info("    Values: [%s], Params: %s", ", ".join(value(v) for v in t["values"]), t["params"])
    write_atomic(sweep_dir / RESULTS_YAML, yaml.safe_dump(doc, sort_keys=False))
