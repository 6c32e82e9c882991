"""How many trials until a sweep finds a config within 3% of the best feasible throughput?

Synthetic landscapes over the default search space (sweeps/rollout_memory.yaml on a2_64g x qwen3_8b:
gpu_memory_utilization 0.30..0.95 x TP {1,2,4,8} x three offload flags = 448 configs), each with an
OOM cliff, shaped unlike each other. Compared, averaged over seeds:

  verlsweep    our sweeper's defaults: the recipe's values enqueued first, multivariate TPE
               (hydra/sweeper/sampler/tpe, 5 startup trials), OOM told as a constraint violation
               (_results.tell); "startup 10" is the same with Optuna's default 10 random startup trials
  grid         Hydra's BasicSweeper order (cartesian product): no seed; knowing the best costs all 448
  random       RandomSampler
  tpe-no-constr  the same TPE, OOM told as FAIL (what a sweeper without constraints can do)

    python benchmarks/search_efficiency.py [--seeds 10 --budget 120]

Trials that never get within 3% inside the budget count as the budget (shown as `>=`). Columns: OOM =
share of the 448 configs that do not fit, near = configs within 3% of the best.
"""
from __future__ import annotations

import argparse
import itertools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.verlsweep_sweeper import _results, _space, _study
from hydra_plugins.verlsweep_sweeper.config import TPESamplerConfig
from verlsweep.common.result import TrialResult

optuna.logging.set_verbosity(optuna.logging.ERROR)

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
P_OFF = "verl.actor_rollout_ref.actor.fsdp_config.param_offload"
O_OFF = "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload"
R_OFF = "verl.actor_rollout_ref.ref.fsdp_config.param_offload"
SPACE_LINES = [f"{UTIL}=range(0.30,1.0,0.05)", f"{TP}=choice(1,2,4,8)", f"{P_OFF}=choice(true,false)",
               f"{O_OFF}=choice(true,false)", f"{R_OFF}=choice(true,false)"]
RECIPE = {UTIL: 0.6, TP: 2, P_OFF: True, O_OFF: True, R_OFF: True}     # docs/ascend.md, Seed recipe
HBM = 60.96
WEIGHTS = 16.4                                                           # Qwen3-8B bf16


# --- landscapes: params -> tokens/s, or None for an OOM -----------------------------------------------

def cliff_at_the_edge(p: dict) -> float | None:
    """More KV cache is always faster; the optimum sits right at the OOM edge, which moves with the
    offloads (the trainer's resident state)."""
    util, tp = p[UTIL], p[TP]
    trainer = 3 + (0 if p[P_OFF] else 9) + (0 if p[O_OFF] else 14) + (0 if p[R_OFF] else 5)
    kv = util * HBM - WEIGHTS / tp
    if util * HBM + trainer > HBM or kv <= 1:
        return None
    return (1200 * (1 - math.exp(-kv / 12)) * {1: 0.8, 2: 1.0, 4: 0.9, 8: 0.7}[tp]
            * (0.8 if p[P_OFF] else 1) * (0.9 if p[O_OFF] else 1) * (0.96 if p[R_OFF] else 1))


def interior_peak(p: dict) -> float | None:
    """Throughput peaks at a middle utilization that grows with TP (beyond it the trainer's
    micro-batches shrink); TP 4 is best; TP 1 OOMs early; offloading the optimizer is nearly free."""
    util, tp = p[UTIL], p[TP]
    trainer = 4 + (0 if p[P_OFF] else 8) + (0 if p[O_OFF] else 12) + (0 if p[R_OFF] else 4)
    if util * HBM + trainer + WEIGHTS / tp * 0.5 > HBM:
        return None
    peak_util = 0.5 + 0.05 * math.log2(tp)
    shape = max(0.2, 1 - ((util - peak_util) / 0.35) ** 2)
    return (900 * shape * {1: 0.6, 2: 0.85, 4: 1.0, 8: 0.8}[tp]
            * (0.75 if p[P_OFF] else 1) * (0.99 if p[O_OFF] else 1) * (0.9 if p[R_OFF] else 1))


def tp_plateaus(p: dict) -> float | None:
    """Step-shaped: TP and the offload flags set plateaus, util only tilts them; the OOM edge is a
    diagonal (higher TP shards the weights, so a higher util still fits)."""
    util, tp = p[UTIL], p[TP]
    if util > 0.45 + 0.1 * math.log2(tp) - (0.15 if not p[O_OFF] else 0) - (0.1 if not p[P_OFF] else 0):
        return None
    plateau = {1: 300, 2: 520, 4: 610, 8: 560}[tp] * (0.7 if p[P_OFF] else 1) * (0.85 if p[R_OFF] else 1)
    return plateau * (1 + 0.15 * util) * (0.97 if p[O_OFF] else 1)


def narrow_ridge(p: dict) -> float | None:
    """Adversarial: a plateau of mediocre configs and one narrow good ridge hugging the OOM edge (TP 8
    with the actor's params on the device, util just below what fits)."""
    util, tp = p[UTIL], p[TP]
    trainer = 2 + (0 if p[P_OFF] else 10) + (0 if p[O_OFF] else 16) + (0 if p[R_OFF] else 6)
    limit = HBM - trainer - WEIGHTS / tp
    if util * HBM > limit:
        return None
    headroom = (limit - util * HBM) / HBM                  # fraction of HBM left unused
    base = 400 + 100 * util
    ridge = 700 * math.exp(-(headroom / 0.04) ** 2) if tp == 8 and not p[P_OFF] else 0
    return base + ridge - (60 if p[R_OFF] else 0)


LANDSCAPES: dict[str, Callable[[dict], float | None]] = {
    "cliff at the edge": cliff_at_the_edge,
    "interior peak": interior_peak,
    "TP plateaus": tp_plateaus,
    "narrow ridge (adv.)": narrow_ridge,
}


# --- methods --------------------------------------------------------------------------------------------

def space() -> _space.SearchSpace:
    return _space.parse(SPACE_LINES, OverridesParser.create())


def all_configs(sp: _space.SearchSpace) -> list[dict]:
    """Hydra's BasicSweeper order: the cartesian product, first param outermost."""
    names = list(sp.distributions)
    values = [_space.discrete_values(sp.distributions[n], sp.decimals.get(n)) for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def _ret(result: TrialResult) -> JobReturn:
    ret = JobReturn(status=JobStatus.COMPLETED)
    ret.return_value = result
    return ret


def _result(f: Callable[[dict], float | None], params: dict) -> TrialResult:
    value = f(params)
    return TrialResult("oom", excerpt="synthetic OOM") if value is None else TrialResult("completed", objective=value)


@dataclass
class Run:
    trials_to_target: int
    reached: bool
    ooms: int


def optuna_run(f, target: float, budget: int, seed: int, sp: _space.SearchSpace, constraints: bool,
               **tpe: int) -> Run:
    sampler = _study.build_sampler(OmegaConf.structured(TPESamplerConfig(seed=seed, **tpe)), sp)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    if constraints:
        study.enqueue_trial(RECIPE)
    return _drive(study, f, target, budget, sp, constraints)


def random_run(f, target: float, budget: int, seed: int, sp: _space.SearchSpace) -> Run:
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed))
    return _drive(study, f, target, budget, sp, constraints=False)


def _drive(study: optuna.Study, f, target: float, budget: int, sp: _space.SearchSpace, constraints: bool) -> Run:
    ooms = 0
    for i in range(1, budget + 1):
        trial = study.ask(fixed_distributions=sp.distributions)
        params = {k: sp.value(k, v) for k, v in trial.params.items()}
        result = _result(f, params)
        ooms += result.outcome == "oom"
        if constraints:
            _results.tell(study, trial, _ret(result), ["objective"])
        elif result.outcome == "oom":
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, result.objective)
        if result.objective is not None and result.objective >= target:
            return Run(i, True, ooms)
    return Run(budget, False, ooms)


def grid_run(f, target: float, configs: list[dict]) -> Run:
    ooms = 0
    for i, params in enumerate(configs, 1):
        value = f(params)
        ooms += value is None
        if value is not None and value >= target:
            return Run(i, True, ooms)
    return Run(len(configs), False, ooms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=120)
    parser.add_argument("--within", type=float, default=0.03, help="relative distance to the best (0.03 = 3%)")
    args = parser.parse_args()

    sp = space()
    configs = all_configs(sp)
    print(f"search space: {len(configs)} configs; budget {args.budget} trials; {args.seeds} seeds; "
          f"target: within {args.within:.0%} of the best feasible throughput")
    header = f"{'landscape':20} {'OOM':>4} {'near':>4} | {'method':14} {'mean':>7} {'median':>7} {'reached':>8} {'OOM trials':>10}"
    print(header)
    print("-" * len(header))
    for name, f in LANDSCAPES.items():
        values = [f(c) for c in configs]
        best = max(v for v in values if v is not None)
        target = (1 - args.within) * best
        oom_share = sum(v is None for v in values) / len(values)
        near = sum(v is not None and v >= target for v in values)
        tic = time.perf_counter()
        results: dict[str, list[Run]] = {
            "verlsweep": [optuna_run(f, target, args.budget, s, sp, constraints=True) for s in range(args.seeds)],
            "  startup 10": [optuna_run(f, target, args.budget, s, sp, constraints=True, n_startup_trials=10)
                             for s in range(args.seeds)],
            "tpe-no-constr": [optuna_run(f, target, args.budget, s, sp, constraints=False) for s in range(args.seeds)],
            "random": [random_run(f, target, args.budget, s, sp) for s in range(args.seeds)],
            "grid": [grid_run(f, target, configs)],
        }
        for i, (method, runs) in enumerate(results.items()):
            n = [r.trials_to_target for r in runs]
            reached = sum(r.reached for r in runs)
            prefix = "" if reached == len(runs) else ">="
            label = name if i == 0 else ""
            share = f"{oom_share:.0%}" if i == 0 else ""
            nearby = str(near) if i == 0 else ""
            print(f"{label:20.20} {share:>4} {nearby:>4} | {method:14} {prefix + format(statistics.mean(n), '.1f'):>7} "
                  f"{prefix + format(statistics.median(n), '.0f'):>7} {reached:>4}/{len(runs):<3} "
                  f"{statistics.mean(r.ooms for r in runs):>10.1f}")
        print(f"{'':20} {'':>4} {'':>4} | (full grid: {len(configs)} trials to know the best; {time.perf_counter() - tic:.0f} s)")


if __name__ == "__main__":
    main()
