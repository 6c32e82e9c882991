"""An Optuna sampler that searches the rollout-memory space by what finished trials prove.

Per TP/offload combination (a "combo") it knows the band of utils not proven to fail (rules.infer).
Each ask: if a combo measured within `margin` of the best has untried utils above its highest fit,
bisect them (throughput nondecreasing in util is a prior: rules.PRIORS). Where the combo's own
measurements refute that prior (a higher util measured more than `tolerance` below its best one) and
no combo not yet measured has a better `prior`, it searches around its best util instead, as for a
throughput with one peak in util: the untried utils between the best and its measured neighbours, the
wider side's middle first. Otherwise it opens the untried
combo ranked first by `prior` (e.g. the planner's predicted tok/s) where it has one, else by what its
measured neighbours (one knob apart) reached, fewest offloads first, at the util nearest the best
measured one. It never proposes a config proven to fail or already tried; params it does not know,
and spaces without the five knobs, go to `inner` (TPE by default). Follows the shape of Optuna's own
samplers (optuna/samplers/_base.py BaseSampler: relative space + independent fallback).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common.distributions import discrete_values
from verlsweep.proofs.evidence import evidence
from verlsweep.proofs.rules import KNOBS, OFFLOADS, TP, UTIL, Observed, infer


def _key(p: Mapping[str, Any]) -> tuple:
    return (round(float(p[UTIL]), 6), int(p[TP]), *(bool(p[n]) for n in OFFLOADS))


class BoundarySampler(optuna.samplers.BaseSampler):
    def __init__(self, inner: optuna.samplers.BaseSampler | None = None, *, seed: int | None = None,
                 prior: Callable[[Mapping[str, Any]], float | None] | None = None, margin: float = 0.1,
                 tolerance: float = 0.01) -> None:
        self._inner = inner or optuna.samplers.TPESampler(seed=seed)
        self.prior = prior        # settable after construction: the sweeper's guide plans before the first ask
        self._margin = margin
        self._tolerance = tolerance

    def reseed_rng(self) -> None:
        self._inner.reseed_rng()

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        space = optuna.search_space.intersection_search_space(study.get_trials(deepcopy=False))
        if all(k in space and discrete_values(space[k]) for k in KNOBS):
            return {k: space[k] for k in KNOBS}
        # not the rollout-memory space: the inner sampler's own relative search (multivariate TPE)
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        if set(search_space) != set(KNOBS) or not all(discrete_values(search_space[k]) for k in KNOBS):
            return self._inner.sample_relative(study, trial, search_space)
        trials = study.get_trials(deepcopy=False)
        values = [discrete_values(search_space[k]) or [] for k in KNOBS]     # none empty: checked above
        configs = [dict(zip(KNOBS, combo)) for combo in itertools.product(*values)]
        obs = evidence(trials)
        tried = {_key(t.params) for t in trials if all(k in t.params for k in KNOBS) and t.number != trial.number}
        verdicts = infer(obs, configs)
        open_ = [c for c, v in zip(configs, verdicts) if v.verdict != "fail" and _key(c) not in tried]
        if not open_:
            return {}
        return self._choose(open_, obs, trials, study.direction == optuna.study.StudyDirection.MAXIMIZE)

    def _choose(self, open_: Sequence[dict], obs: Sequence[Observed], trials: Sequence[FrozenTrial],
                maximize: bool) -> dict:
        value: dict[tuple, float] = {}
        sign = 1.0 if maximize else -1.0
        fits = {o.number for o in obs if o.outcome == "completed"}
        for t in trials:
            if t.number in fits and t.values and not t.user_attrs.get("verlsweep.placeholder"):
                k = _key(t.params)
                value[k] = max(value.get(k, -float("inf")), sign * t.values[0])
        measured: dict[tuple, dict[float, float]] = {}            # combo -> util -> value of its fits
        for k, v in value.items():
            measured.setdefault(k[1:], {})[k[0]] = v
        combo_best = {combo: max(points.values()) for combo, points in measured.items()}
        by_combo: dict[tuple, list[dict]] = {}
        for c in open_:
            by_combo.setdefault(_key(c)[1:], []).append(c)
        best = max(combo_best.values(), default=None)
        untried = [combo for combo in by_combo if combo not in combo_best]
        # the best prior among the combos not measured yet: refining a combo is worth a trial only where
        # none of them is predicted better (without a prior nothing says so: the band is bisected upwards)
        rival = max((p for combo in untried if (p := self._combo_prior(by_combo[combo])) is not None), default=None)
        # 1. bisect the band above the highest fit of the combos near the best (around their best util
        #    where their measurements refute the prior)
        for combo, b in sorted(combo_best.items(), key=lambda kv: -kv[1]):
            if best is not None and b < best - self._margin * abs(best):
                break
            own = self._combo_prior(by_combo.get(combo, []))
            refine = own is not None and (rival is None or own >= rival)
            util = self._next_util(measured[combo], sorted(float(c[UTIL]) for c in by_combo.get(combo, ())), refine)
            if util is not None:
                return next(c for c in by_combo[combo] if float(c[UTIL]) == util)
        # 2. open an untried combo
        best_util = max(value, key=lambda k: value[k])[0] if value else None
        fresh = untried or list(by_combo)

        def score(combo: tuple) -> tuple:
            prior = self._combo_prior(by_combo[combo])
            near = [b for other, b in combo_best.items() if sum(x != y for x, y in zip(combo, other)) == 1]
            neighbours = sum(near) / len(near) if near else float("inf")
            return (prior if prior is not None else -float("inf"), neighbours, -sum(combo[1:]), combo[0])

        combo = max(fresh, key=score)
        if any(_key(o.params)[1:] == combo for o in obs):
            best_util = None     # only failures so far: the middle of what is left of its band
        target = best_util if best_util is not None else sorted(float(c[UTIL]) for c in by_combo[combo])[
            len(by_combo[combo]) // 2]
        return min(by_combo[combo], key=lambda c: (abs(float(c[UTIL]) - target), -float(c[UTIL])))

    def _combo_prior(self, configs: Sequence[Mapping[str, Any]]) -> float | None:
        """The best prior of a combo's open configs (None: no prior)."""
        if self.prior is None:
            return None
        priors = [p for c in configs if (p := self.prior(c)) is not None]
        return max(priors) if priors else None

    def _next_util(self, points: Mapping[float, float], open_utils: Sequence[float], refine: bool) -> float | None:
        """The util to try next in one combo: its measured fits (util -> value) and untried open utils;
        `refine`: search around its best util where its measurements refute the prior."""
        top = max(points, key=lambda u: points[u])
        hi = max(points)
        if not refine or points[hi] >= points[top] - self._tolerance * abs(points[top]):
            above = [u for u in open_utils if u > hi]            # the prior holds: bisect upwards
            return above[(len(above) - 1) // 2] if above else None
        lower = max((u for u in points if u < top), default=-float("inf"))
        upper = min(u for u in points if u > top)
        below = [u for u in open_utils if lower < u < top]
        above = [u for u in open_utils if top < u < upper]
        side = below if len(below) >= len(above) else above
        return side[(len(side) - 1) // 2] if side else None

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._inner.after_trial(study, trial, state, values)
