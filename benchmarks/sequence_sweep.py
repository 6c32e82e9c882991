"""One task of benchmarks/calibrated_sequence.py swept as verlsweep's sweeper sweeps it, from its own parts:
the planner guide's picks enqueued first (verlsweep.study.guide.rank, study.guide.top_k), then the
boundary sampler (verlsweep.proofs.sampler, hydra/sweeper/sampler=boundary, the default) with the
planner's tokens/s as its prior; a proposal the planner vetoes (plan.enforce) or a finished trial
proves to fail (study.proofs) is told infeasible without a launch, a measured one is reused
(verlsweep.study.reuse), every outcome is told as the sweeper tells it (verlsweep.reconcile.results).
The guide ranks with its own settings (study.guide: top_k picks that win the most of `draws` planner
calibrations with the throughput constants scaled by U(1-error, 1+error)). Left out: the recipe's own
values (study.enqueue_recipe) and the pruner (every completed trial runs its steps).

The benchmark's grid sweeps the actor's offloads as three combinations (none, the optimizer, both), the
sampler proposes each offload on its own: a proposal off the grid (params offloaded, optimizer not) is
told as a refused config (config_error) and costs nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution

from verlsweep.command.compose import compose_config
from verlsweep.common.names import RULED_OUT_ATTR
from verlsweep.common.result import TrialResult
from verlsweep.config.study import study_config
from verlsweep.proofs.evidence import evidence, proof_of_failure
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL, infer
from verlsweep.proofs.sampler import BoundarySampler
from verlsweep.reconcile import results as _results
from verlsweep.study import guide as _guide
from verlsweep.study import reuse as _reuse
from verlsweep.study.space import SearchSpace

optuna.logging.set_verbosity(optuna.logging.ERROR)

LAUNCHABLE = {"ok": 0, "tight": 1, "edge": 2}      # the planner's statuses a trial launches at, in its rank order
MAX_ASKS = 2000                                     # proposals per sweep: far more than the grid holds


def knobs(inp: Any) -> dict[str, object]:
    """A config as the sweep's params name it (sweeps/rollout_memory.yaml), the keys the proofs read. The
    grid does not sweep the ref's offload: it stays on (conf/device/npu.yaml; verl 0.9.1 keeps a
    forward-only model on the host whatever it says)."""
    return {UTIL: round(inp.rollout.util, 2), TP: inp.rollout.tp, OFFLOADS[0]: inp.actor.param_offload,
            OFFLOADS[1]: inp.actor.optimizer_offload, OFFLOADS[2]: True}


def space(configs: Sequence[Any]) -> SearchSpace:
    utils = sorted({round(inp.rollout.util, 2) for inp in configs})
    return SearchSpace({UTIL: FloatDistribution(utils[0], utils[-1], step=round(utils[1] - utils[0], 2)),
                        TP: CategoricalDistribution(sorted({inp.rollout.tp for inp in configs})),
                        OFFLOADS[0]: CategoricalDistribution([True, False]),
                        OFFLOADS[1]: CategoricalDistribution([True, False]),
                        OFFLOADS[2]: CategoricalDistribution([True])}, decimals={UTIL: 2})


def _key(params: dict[str, Any]) -> tuple:
    return tuple(params[k] for k in (UTIL, TP, *OFFLOADS))


@lru_cache(maxsize=1)
def _guide_settings() -> Any:
    return study_config(compose_config([])).guide          # conf/study/default.yaml


def predictions(configs: Sequence[Any], cal: Any) -> list[_guide.Prediction]:
    """What the guide predicts of each config with `cal`: status, tokens/s and how often it wins a draw."""
    settings = _guide_settings()
    planned = _guide.Planned(cal, [knobs(inp) for inp in configs], list(configs))
    return _guide.predict(planned, settings.draws, settings.error)


def guide_picks(configs: Sequence[Any], predicted: Sequence[_guide.Prediction]) -> list[int]:
    """The guide's enqueued picks (at most one per TP/offload combination) as indices of `configs`."""
    index = {_key(knobs(inp)): i for i, inp in enumerate(configs)}
    return [index[_key(p)] for p in _guide.rank(predicted, space(configs), _guide_settings().top_k)]


def sweep(configs: Sequence[Any], predicted: Sequence[_guide.Prediction], run: Callable[[int], TrialResult],
          done: Callable[[int], bool], seed: int = 0) -> tuple[list[int], list[int]]:
    """The configs launched, in order, until `done` says a launched one reached the target or nothing is
    left (every config of the grid tried, vetoed or proven to fail), and the proposals a proof ruled out.
    `run`: a launched config's result."""
    sp = space(configs)
    sampler = BoundarySampler(seed=seed)
    sampler.prior = _guide.prior(predicted, sp)         # as verlsweep/study/verl_hooks.py sets it
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for i in guide_picks(configs, predicted):
        study.enqueue_trial(knobs(configs[i]))
    index = {_key(knobs(inp)): i for i, inp in enumerate(configs)}
    grid = [knobs(inp) for inp in configs]
    vetoed = {i for i, p in enumerate(predicted) if p.status not in LAUNCHABLE}
    launched: list[int] = []
    ruled_out: list[int] = []
    asked: set[int] = set()

    def tell(trial: optuna.Trial, result: TrialResult) -> None:
        _results.tell(study, trial, None, ["objective"], result=result)

    for _ in range(MAX_ASKS):
        proven = infer(evidence(study.get_trials(deepcopy=False)), grid)
        if all(i in asked or i in vetoed or d.verdict == "fail" for i, d in enumerate(proven)):
            break
        trial = study.ask(fixed_distributions=sp.distributions)
        i = index.get(_key({k: sp.value(k, v) for k, v in trial.params.items()}))
        if i is None:
            tell(trial, TrialResult("config_error", excerpt="not on the benchmark's grid"))
            continue
        source = _reuse.measured_match(study, trial.params, sp.value, trial.number)
        if source is not None:
            _reuse.tell_reused(study, trial, source)
            continue
        asked.add(i)
        if i in vetoed:
            tell(trial, TrialResult("infeasible", excerpt="planner veto"))
            continue
        proof = proof_of_failure(study.get_trials(deepcopy=False), trial.params)
        if proof is not None:
            trial.set_user_attr(RULED_OUT_ATTR, proof.trial)
            ruled_out.append(i)
            tell(trial, TrialResult("infeasible", excerpt=str(proof)))
            continue
        launched.append(i)
        tell(trial, run(i))
        if done(i):
            break
    return launched, ruled_out
