"""Planner-guided start: before the first launch, rank the search space by the planner's prediction
and enqueue the best predicted feasible configs, so the first device hours go where the planner
expects the throughput to be; the sampler then learns from what was measured.

How the prediction is combined with the sampler was chosen by benchmarks/search_efficiency.py
(planner-generated landscapes with hidden calibration errors): enqueue the top predictions, *one per
combination of the space's categorical params* (TP, offload flags, ...) at its best predicted value
of the numeric ones (a top-k without that rule spends its trials on one combination at neighbouring
utils, where the planner's errors are shared). Without the guide the sampler needed 1.5-2.6x the
device hours on those landscapes; more than one guided trial (top_k 3, 5) bought nothing there and
lost where the planner's ranking is wrong, hence top_k 1 (GuideConfig).

Trials the planner predicts infeasible are never launched (the task's preflight tells them as
outcome `infeasible`, a constraint violation), so a guide entry is always a predicted-feasible one.
"""
from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from optuna.distributions import CategoricalDistribution

from hydra_plugins.verlsweep_sweeper._space import SearchSpace, discrete_values

log = logging.getLogger(__name__)

MAX_CANDIDATES = 2048        # whole discrete spaces up to this size; beyond, a seeded sample
_MAX_COMPOSED = 64           # candidates when each needs a Hydra compose (a swept config group)
_STATUS_RANK = {"ok": 0, "tight": 1}


@dataclass(frozen=True)
class Prediction:
    params: dict[str, Any]
    status: str                 # the planner's: ok | tight | infeasible
    tok_s: float

    @property
    def feasible(self) -> bool:
        return self.status in _STATUS_RANK


def candidates(space: SearchSpace, seed: int = 0, limit: int = MAX_CANDIDATES) -> list[dict[str, Any]]:
    """The configs the planner ranks: every one of a discrete space, else `limit` sampled ones
    (a continuous param is sampled uniformly in its bounds)."""
    names = list(space.distributions)
    values = [discrete_values(space.distributions[n], space.decimals.get(n)) for n in names]
    size = space.size()
    if size is not None and size <= limit:
        return [dict(zip(names, combo)) for combo in itertools.product(*values)]
    rng = random.Random(seed)
    out = []
    for _ in range(limit):
        params = {}
        for name, vals in zip(names, values):
            dist = space.distributions[name]
            if vals is not None:
                params[name] = rng.choice(vals)
            else:   # continuous: Int/FloatDistribution without a step
                x = rng.uniform(dist.low, dist.high)
                params[name] = int(round(x)) if isinstance(dist.low, int) and isinstance(dist.high, int) else x
        out.append(params)
    return out


def rank(predictions: Sequence[Prediction], space: SearchSpace, top_k: int) -> list[dict[str, Any]]:
    """The `top_k` best predicted feasible configs (ok before tight, then tokens/s), at most one per
    combination of the categorical params."""
    if top_k <= 0:
        return []
    categorical = [n for n, d in space.distributions.items() if isinstance(d, CategoricalDistribution)]
    ordered = sorted((p for p in predictions if p.feasible), key=lambda p: (_STATUS_RANK[p.status], -p.tok_s))
    picked: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    for p in ordered:
        combo = tuple(repr(p.params[n]) for n in categorical)
        if combo in seen:
            continue
        seen.add(combo)
        picked.append(dict(p.params))
        if len(picked) >= top_k:
            break
    return picked


def needs_compose(config: DictConfig, space: SearchSpace) -> bool:
    """Whether a swept or fixed param picks a config group option (then only a compose knows the
    trial's config)."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
    return any(n.lstrip("+~") in choices for n in (*space.distributions, *space.fixed))


def predict_all(config: DictConfig, space: SearchSpace, params_list: Sequence[dict[str, Any]],
                compose: Callable[[list[str]], DictConfig] | None = None) -> list[Prediction]:
    """The planner's verdict for each candidate. Params that are config keys are set on a copy of
    the task's config; a swept config group needs `compose` (the sweeper's config loader)."""
    from verlsweep.plan import NotPlannable, load_calibration, plan
    from verlsweep.plan.inputs import from_cfg

    base = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
    with read_write(base), open_dict(base):
        base.pop("hydra", None)
    composed = needs_compose(config, space)
    if not composed:
        # the sweep's fixed overrides are part of every trial's config
        for name, value in space.fixed.items():
            OmegaConf.update(base, name.lstrip("+~"), yaml.safe_load(str(value)), force_add=True)
    cal = load_calibration(base)
    out = []
    for params in params_list:
        shown = {n: space.value(n, v) for n, v in params.items()}
        try:
            if composed:
                if compose is None:
                    return []
                cfg = compose(space.overrides(params))
            else:
                # every candidate sets every swept key, so one config is updated in place
                cfg = base
                for name, value in shown.items():
                    OmegaConf.update(cfg, name.lstrip("+~"), value, force_add=True)
            verdict = plan(from_cfg(cfg), cal)
        except NotPlannable as exc:
            log.info("planner guide: no prediction for %s (%s); the sampler starts unguided", shown, exc)
            return []
        out.append(Prediction(params, verdict.status, verdict.tok_s))
    return out


def entries(config: DictConfig, space: SearchSpace, top_k: int, seed: int = 0,
            compose: Callable[[list[str]], DictConfig] | None = None) -> list[dict[str, Any]]:
    """The configs the guide enqueues, best first ([] when the planner has no opinion)."""
    if top_k <= 0:
        return []
    params_list = candidates(space, seed)
    if needs_compose(config, space):
        params_list = params_list[:_MAX_COMPOSED]     # each candidate is a full Hydra compose here
    predictions = predict_all(config, space, params_list, compose)
    picked = rank(predictions, space, top_k)
    feasible = sum(p.feasible for p in predictions)
    if predictions:
        log.info("planner guide: %d of %d candidate configs predicted to fit; enqueued the best %d",
                 feasible, len(predictions), len(picked))
    return picked
