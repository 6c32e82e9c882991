"""Planner-guided start: before the first launch, rank the search space by the planner's prediction
and enqueue the configs it expects to be best, so the first device hours go where the planner
expects the throughput to be; the sampler then learns from what was measured.

The planner is informative but wrong by up to ~20% in tokens/s on a config unlike the ones its
constants were fitted to (leave-one-out and held-out errors, benchmarks/planner_accuracy.py). So the
guide does not trust one ranking: it plans every candidate again under `draws` calibrations whose
throughput constants are each scaled by U(1-error, 1+error), and ranks configs by how often they are
the best predicted feasible one (an estimate of the probability that a config is the best, given the
planner's error; Thompson sampling over the calibration). It enqueues up to `top_k` configs that win
at least one draw (the unperturbed planner is one of them), most frequent first, at most one per
combination of the categorical params (TP, offload flags, ...): where the planner is sure, one config
runs; where two regions are close enough for its error to swap them, both do. Without draws
(`draws: 0`) the ranking is the planner's own, best predicted first.

Chosen by benchmarks/search_efficiency.py (planner-generated landscapes with hidden calibration
errors): the planner's own top-1 alone needs 0.3-0.6x random's device hours where its ranking is
right, and misses a narrow optimum it ranks below its first choice (reached less often than random
search). More nominal top-k entries bought nothing there; entries that win a draw cost nothing where
the planner is sure (no second entry) and cover the config a plausible calibration puts first.

Trials the planner predicts infeasible are never launched (the task's preflight tells them as
outcome `infeasible`, a constraint violation), so a guide entry is always a predicted-feasible one;
feasibility is judged by the unperturbed planner only, as the preflight does.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import logging
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from verlsweep.common import disk_cache
from verlsweep.common.distributions import discrete_values
from verlsweep.common.names import FITS
from verlsweep.config.study import study_config
from verlsweep.study.space import SearchSpace, config_key, group_choices

log = logging.getLogger(__name__)

MAX_CANDIDATES = 2048        # whole discrete spaces up to this size; beyond, a seeded sample
_MAX_COMPOSED = 64           # candidates when each needs a Hydra compose (a swept config group)
_STATUS_RANK = {"ok": 0, "tight": 1, "edge": 2}


@dataclass(frozen=True)
class Prediction:
    params: dict[str, Any]
    status: str                 # the planner's: ok | tight | edge | infeasible (verlsweep.plan.STATUSES)
    tok_s: float
    # share of the planner's error draws in which this is the best predicted feasible config
    p_best: float = 0.0

    @property
    def feasible(self) -> bool:
        """Predicted to fit: what the guide ranks (edge probes only where none is: ranked)."""
        return self.status in FITS

    @property
    def vetoed(self) -> bool:
        """The preflight would not launch it (verlsweep.plan.Verdict.feasible: outside the error band)."""
        return self.status == "infeasible"


def candidates(space: SearchSpace, seed: int = 0, limit: int = MAX_CANDIDATES) -> list[dict[str, Any]]:
    """The configs the planner ranks: every one of a discrete space, else `limit` sampled ones
    (a continuous param is sampled uniformly in its bounds)."""
    names = list(space.distributions)
    values = [discrete_values(space.distributions[n], space.decimals.get(n)) for n in names]
    size = space.size()
    if size is not None and size <= limit:
        return [dict(zip(names, combo)) for combo in itertools.product(*(v or [] for v in values))]
    rng = random.Random(seed)
    out = []
    for _ in range(limit):
        params = {}
        for name, vals in zip(names, values):
            dist = space.distributions[name]
            if vals is not None:
                params[name] = rng.choice(vals)
            else:   # continuous: Int/FloatDistribution without a step
                assert isinstance(dist, (IntDistribution, FloatDistribution))
                x = rng.uniform(dist.low, dist.high)
                params[name] = int(round(x)) if isinstance(dist.low, int) and isinstance(dist.high, int) else x
        out.append(params)
    return out


def ranked(predictions: Sequence[Prediction]) -> list[int]:
    """The candidates the guide ranks: those predicted to fit; where none is, the edge probes (the only
    configs the preflight launches then, each fitting inside the planner's error band), so a planner
    that over-predicts every config still starts the sweep at its edge instead of leaving it unguided."""
    fits = [i for i, p in enumerate(predictions) if p.feasible]
    return fits or [i for i, p in enumerate(predictions) if p.status == "edge"]


def _order(p: Prediction, tok_s: float) -> tuple[int, float]:
    return _STATUS_RANK[p.status], -tok_s


def rank(predictions: Sequence[Prediction], space: SearchSpace, top_k: int) -> list[dict[str, Any]]:
    """The `top_k` best feasible configs, at most one per combination of the categorical params. With
    error draws (some p_best > 0): only configs that won a draw, most wins first; else the planner's
    own order (ok before tight, then tokens/s). Where none is predicted to fit, the edge probes."""
    if top_k <= 0:
        return []
    categorical = [n for n, d in space.distributions.items() if isinstance(d, CategoricalDistribution)]
    feasible = [predictions[i] for i in ranked(predictions)]
    drawn = any(p.p_best > 0 for p in feasible)
    if drawn:
        feasible = [p for p in feasible if p.p_best > 0]
    ordered = sorted(feasible, key=lambda p: (-p.p_best, *_order(p, p.tok_s)))
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


def error_draws(cal: Any, draws: int, error: float, seed: int) -> list[Any]:
    """`draws` calibrations around `cal`: each throughput constant scaled by its own U(1-error, 1+error)."""
    from verlsweep.plan.predictor.calibration import THROUGHPUT_CONSTANTS

    rng = random.Random(seed)
    out = []
    for _ in range(draws):
        scaled = {n: getattr(cal.constants, n) * rng.uniform(1 - error, 1 + error) for n in THROUGHPUT_CONSTANTS}
        out.append(replace(cal, constants=replace(cal.constants, **scaled)))
    return out


def needs_compose(config: DictConfig, space: SearchSpace) -> bool:
    """Whether a param picks a config group option the task's config does not hold already (then
    only a compose knows the trial's config): a swept one, or a fixed one the sweep's params set to
    another option (a command-line group override is composed into the config the sweeper gets)."""
    choices = group_choices(config)
    if any(config_key(n) in choices for n in space.distributions):
        return True
    return any(str(choices[k]) != str(v) for k, v in ((config_key(n), v) for n, v in space.fixed.items())
               if k in choices)


@dataclass(frozen=True)
class Planned:
    """What the planner needs to predict each candidate, built once (config updates and composes are
    the slow part; a plan is a fraction of a millisecond)."""

    calibration: Any
    params: list[dict[str, Any]]
    inputs: list[Any]


def _interpolations(node: Any, prefix: str = "") -> dict[str, str]:
    """Every interpolated value under `node` (unresolved), by its key path."""
    out: dict[str, str] = {}
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        path = f"{prefix}{key}"
        if isinstance(value, (dict, list)):
            out.update(_interpolations(value, f"{path}."))
        elif isinstance(value, str) and "${" in value:
            out[path] = value
    return out


def _dependents(base: DictConfig, keys: Sequence[str]) -> list[str]:
    """The interpolated values that may change with `keys`: those naming one of them, or naming such a
    value, transitively. A key is matched by its last name, so a relative interpolation (${..x}) counts
    too; a false match only costs one more resolve. Assumes a resolver's value depends on its arguments
    alone (true of oc.* and verlsweep's own)."""
    texts = _interpolations(OmegaConf.to_container(base, resolve=False))
    names = {k.rsplit(".", 1)[-1] for k in keys}
    found: list[str] = []
    while True:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
        new = [p for p, text in texts.items() if p not in found and pattern.search(text)]
        if not new:
            return found
        found += new
        names |= {p.rsplit(".", 1)[-1] for p in new}


def _put(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[last] = value


def plan_inputs(config: DictConfig, space: SearchSpace, params_list: Sequence[dict[str, Any]],
                compose: Callable[[list[str]], DictConfig] | None = None, calibration: Any = None) -> Planned | None:
    """The planner's inputs of each candidate (None when the planner cannot model one). Params that
    are config keys are set on a copy of the task's config; a swept config group needs `compose` (the
    sweeper's config loader). `calibration`: what plans (default: the config's plan.calibration)."""
    from verlsweep.plan import NotPlannable, load_calibration
    from verlsweep.plan.predictor.inputs import READ, from_cfg, from_tree, plain, tree_of

    base = OmegaConf.create(cast(dict[str, Any], OmegaConf.to_container(config, resolve=False)))
    with read_write(base), open_dict(base):
        base.pop("hydra", None)
    composed = needs_compose(config, space)
    if not composed:
        # the sweep's fixed overrides are part of every trial's config (its group options already are)
        choices = group_choices(config)
        for key, value in ((config_key(n), v) for n, v in space.fixed.items()):
            if key not in choices:
                OmegaConf.update(base, key, yaml.safe_load(str(value)), force_add=True)
        # Every candidate sets every swept key: one plain tree is updated in place, with only the
        # swept keys and the interpolations that follow them resolved again.
        swept = [config_key(n) for n in space.distributions]
        dependents = [p for p in _dependents(base, swept) if p.split(".", 1)[0] in READ]
        tree = tree_of(base)
    inputs = []
    for params in params_list:
        shown = {n: space.value(n, v) for n, v in params.items()}
        try:
            if composed:
                if compose is None:
                    return None
                inputs.append(from_cfg(compose(space.overrides(params))))
                continue
            for key, value in ((config_key(n), v) for n, v in shown.items()):
                _put(tree, key, value)
                if dependents:
                    OmegaConf.update(base, key, value, force_add=True)
            for path in dependents:
                _put(tree, path, plain(OmegaConf.select(base, path)))
            inputs.append(from_tree(tree))
        except NotPlannable as exc:
            log.info("planner guide: no prediction for %s (%s); the sampler starts unguided", shown, exc)
            return None
    return Planned(calibration or load_calibration(base), list(params_list), inputs)


def predict(planned: Planned, draws: int = 0, error: float = 0.0, seed: int = 0) -> list[Prediction]:
    """The planner's verdict for each candidate, and with `draws` > 0 how often it is the best feasible
    one under calibrations drawn around the planner's (error_draws)."""
    from verlsweep.plan import predict
    from verlsweep.plan.predictor.verdict import tok_s_under

    verdicts = [predict(inp, planned.calibration) for inp in planned.inputs]  # from_cfg has raised NotPlannable if any
    out = [Prediction(params, v.status, v.tok_s) for params, v in zip(planned.params, verdicts)]
    feasible = ranked(out)
    if draws <= 0 or not feasible:
        return out
    wins: Counter[int] = Counter()
    # the planner as it is counts as one draw: where its error cannot change the winner, every draw agrees
    wins[min(feasible, key=lambda i: _order(out[i], out[i].tok_s))] += 1
    for drawn in error_draws(planned.calibration, draws - 1, error, seed):
        tok_s = {i: tok_s_under(planned.inputs[i], verdicts[i], drawn) for i in feasible}
        wins[min(feasible, key=lambda i: _order(out[i], tok_s[i]))] += 1
    return [replace(p, p_best=wins[i] / draws) if wins[i] else p for i, p in enumerate(out)]


def predict_all(config: DictConfig, space: SearchSpace, params_list: Sequence[dict[str, Any]],
                compose: Callable[[list[str]], DictConfig] | None = None, draws: int = 0, error: float = 0.0,
                seed: int = 0, calibration: Any = None) -> list[Prediction]:
    """plan_inputs, then predict ([] when the planner has no opinion). With error draws, the predictions
    are kept in verlsweep's cache directory: a resumed or repeated sweep gets them back without the
    draws (about two seconds of CPU at the default space's 448 candidates)."""
    planned = plan_inputs(config, space, params_list, compose, calibration)
    if planned is None:
        return []
    if draws <= 0:
        return predict(planned, draws, error, seed)
    path = prediction_cache_path(planned, draws, error, seed)
    kept = disk_cache.read_json(path)
    if kept is not None:
        try:
            return [Prediction(params, status, tok_s, p_best)
                    for params, (status, tok_s, p_best) in zip(planned.params, kept, strict=True)]
        except (ValueError, TypeError):
            pass          # of another shape: predict again
    out = predict(planned, draws, error, seed)
    try:
        disk_cache.store(path, json.dumps([[p.status, p.tok_s, p.p_best] for p in out]))
    except OSError:
        pass              # a read-only cache directory: predict again next time
    return out


def prediction_cache_path(planned: Planned, draws: int, error: float, seed: int) -> Path:
    """Named by a hash of everything a prediction depends on: the candidates' planner inputs and
    calibration (dataclasses whose repr lists every field), the draws, and the planner's own code."""
    digest = hashlib.sha256(repr((planned.calibration, planned.params, planned.inputs, draws, error,
                                  seed)).encode())
    digest.update(_planner_code_digest().encode())
    return disk_cache.root() / "guide" / f"predictions-{digest.hexdigest()[:24]}.json"


@lru_cache(maxsize=1)
def _planner_code_digest() -> str:
    """The planner's sources and constants, this module, and the torch and transformers whose model code
    traced trainer memory comes from (verlsweep.plan.trace.cache): another version predicts anew."""
    digest = hashlib.sha256(" ".join(f"{d} {disk_cache.installed(d)}" for d in ("torch", "transformers")).encode())
    package = Path(__file__).resolve().parents[1]
    disk_cache.add_files(digest, package, [*sorted((package / "plan").glob("*.py")),
                                           *sorted((package / "plan").glob("*.yaml")), Path(__file__).resolve()])
    return digest.hexdigest()


def entries(config: DictConfig, space: SearchSpace, top_k: int, seed: int = 0,
            compose: Callable[[list[str]], DictConfig] | None = None, draws: int | None = None,
            error: float | None = None) -> list[dict[str, Any]]:
    """The configs the guide enqueues, best first ([] when the planner has no opinion). `draws` and
    `error` default to the config's `study.guide` (conf/study/default.yaml)."""
    return guide(config, space, top_k, seed, compose, draws, error)[0]


def guide(config: DictConfig, space: SearchSpace, top_k: int, seed: int = 0,
          compose: Callable[[list[str]], DictConfig] | None = None, draws: int | None = None,
          error: float | None = None, calibration: Any = None) -> tuple[list[dict[str, Any]], list[Prediction]]:
    """`entries`, and the planner's prediction of every candidate it ranked (a sampler's prior);
    `calibration`: what plans (verlsweep.study.calibrate; default: the config's plan.calibration)."""
    if top_k <= 0:
        return [], []
    if draws is None or error is None:
        settings = study_config(config).guide
        draws = settings.draws if draws is None else draws
        error = settings.error if error is None else error
    params_list = candidates(space, seed)
    if needs_compose(config, space):
        params_list = params_list[:_MAX_COMPOSED]     # each candidate is a full Hydra compose here
    predictions = predict_all(config, space, params_list, compose, draws=draws, error=error, seed=seed,
                              calibration=calibration)
    picked = rank(predictions, space, top_k)
    feasible = sum(p.feasible for p in predictions)
    if predictions:
        log.info("planner guide: %d of %d candidate configs predicted to fit; enqueued %d (best under %d "
                 "draws of the planner's error)", feasible, len(predictions), len(picked), draws)
    return picked, predictions


def _norm(params: Mapping[str, Any]) -> tuple:
    """One config, however its floats were computed (0.7 and 0.7000000000000001 are one util)."""
    return tuple(sorted((k, round(v, 9) if isinstance(v, float) else v) for k, v in params.items()))


def prior(predictions: Sequence[Prediction], space: SearchSpace) -> Callable[[Mapping[str, Any]], float | None]:
    """The planner's predicted tokens/s of a config it predicts to fit (None: infeasible or not ranked),
    for a sampler that ranks untried configs by it (verlsweep.proofs.sampler.BoundarySampler)."""
    table = {_norm(predictions[i].params): predictions[i].tok_s for i in ranked(predictions)}

    def predicted(params: Mapping[str, Any]) -> float | None:
        return table.get(_norm({k: space.value(k, v) for k, v in params.items()}))
    return predicted
