"""The methods of benchmarks/search_efficiency.py and one sweep of each: ask -> (reuse | veto | measure
with the cost model) -> tell until the device-hour budget is spent; `grid` walks Hydra's BasicSweeper
order. Our sweeper's methods are built from its own parts (_study.build_sampler, _guide, _reuse,
_results.tell, the proof veto), the baselines are plain Optuna samplers.
"""
from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna
from omegaconf import OmegaConf
from search_landscapes import STEPS, WORLD, Landscape, Truth, all_configs

from hydra_plugins.verlsweep_sweeper.config import (
    BoundarySamplerConfig,
    MedianPrunerConfig,
    TPESamplerConfig,
    VerlSweepSweeperConf,
)
from verlsweep.command.compose import compose_config
from verlsweep.common.names import RULED_OUT_ATTR
from verlsweep.common.result import TrialResult
from verlsweep.config.study import study_config
from verlsweep.proofs.evidence import proof_of_failure
from verlsweep.reconcile import results as _results
from verlsweep.reconcile.budget import quiet_optuna
from verlsweep.study import create as _study
from verlsweep.study import guide as _guide
from verlsweep.study import reuse as _reuse
from verlsweep.study import space as _space
from verlsweep.study.failures import FailureWatch
from verlsweep.study_link import pruner_from_spec

optuna.logging.set_verbosity(optuna.logging.ERROR)

METHODS = ("verlsweep", "tpe+guide", "grid", "random", "tpe oom=0", "tpe oom=FAIL", "gp")
TARGET = 0.97                  # of the best feasible tok/s: a sweep is done once it measured one that good
# --long-run (search_efficiency.py sets it): the race also needs a near-best config that survives the long
# run measured (TARGET of the best surviving tok/s), as a sweep of n_trials measures past its first
# near-best config; the same oracle ends every method's race (none of them knows which configs survive)
SURVIVES: Callable[[Landscape, tuple], bool] | None = None
# launch -> first step: Ray start, FSDP model load, vLLM engine start and graph capture. No recipe log
# we cite states it; 4 minutes is an assumption for an 8B model on one node (--startup-s changes it).
STARTUP_S = 240.0
MAX_ASKS = 200                 # proposals per run (reused and vetoed ones cost no device time)
# our sweeper stops after this many failed trials in a row (verlsweep/study/failures.py); a config the
# trial rules refuse (outcome config_error, told FAIL: verlsweep/task.py) is one only where a rule names
# a key the sweep does not sweep (FailureWatch.failed)
MAX_CONSECUTIVE_FAILURES = VerlSweepSweeperConf().max_consecutive_failures
# the guide's settings as a sweep of verlsweep's task has them (conf/study/default.yaml)
GUIDE = study_config(compose_config([])).guide
# the guide's predictions per (landscape name, seed), computed once for both guided methods
# (search_efficiency.py fills it before the race's workers fork; absent: computed in the run)
GUIDED: dict[tuple[str, int], list] = {}


@dataclass
class Run:
    hours_to_target: float | None     # None: not within the budget
    launched: int
    reused: int
    vetoed: int
    ooms: int = 0                     # launched trials that OOMed
    refused: int = 0                  # proposals the trial rules refused before launch (no device time)
    stopped: bool = False             # our sweeper stopped on max_consecutive_failures (rule refusals)
    # completed trials as (config key, measured tok/s, device-hours spent by then): the long-run table's
    # declared best and its confirmations (search_efficiency.py --long-run, benchmarks/long_run.py)
    measured: list[tuple[tuple, float, float]] = field(default_factory=list)


def best_surviving(land: Landscape, survives: Callable[[Landscape, tuple], bool]) -> float:
    return max((t.tok_s for key, t in land.truth.items() if t.tok_s is not None and survives(land, key)),
               default=0.0)


def reached(land: Landscape, measured: list[tuple[tuple, float, float]], target: float) -> bool:
    """Whether the configs measured so far end the race: one within target, and under SURVIVES one within
    TARGET of the best surviving config that survives."""
    if not any(tok_s >= target for _, tok_s, _ in measured):
        return False
    if SURVIVES is None:
        return True
    bar = TARGET * best_surviving(land, SURVIVES)
    return any(tok_s >= bar and SURVIVES(land, key) for key, tok_s, _ in measured)


def cost_dh(truth: Truth, steps: int) -> float:
    """Device-hours of one launched trial (search_efficiency.py's cost table): an OOM at vLLM start costs
    the start-up, one inside the first step a step more; a trial that ran `steps` steps costs steps + 1
    (step 1 counts twice: graph capture, warm-up)."""
    if truth.tok_s is None:
        seconds = STARTUP_S + (0 if truth.oom_at_start else truth.step_s)
    else:
        seconds = STARTUP_S + (steps + 1) * truth.step_s
    return seconds * WORLD / 3600


def _drive(study: optuna.Study, land: Landscape, sp: _space.SearchSpace, target: float, budget: float, *,
           told: str, guided: bool = False, reuse: bool = False, prune: bool = False, infer: bool = False) -> Run:
    """Ask -> (reuse | veto | measure with the cost model) -> tell, until the budget is spent."""
    spent, launched, reused, vetoed, ooms, refused, in_a_row = 0.0, 0, 0, 0, 0, 0, 0
    measured: list[tuple[tuple, float, float]] = []

    def run(hours: float | None, stopped: bool = False) -> Run:
        return Run(hours, launched, reused, vetoed, ooms, refused, stopped, measured)
    watch = FailureWatch(MAX_CONSECUTIVE_FAILURES, None, 1, swept=sp.distributions)   # its failed(): the rule

    for _ in range(MAX_ASKS):
        if spent >= budget:
            break
        trial = study.ask(fixed_distributions=sp.distributions)
        params = {k: sp.value(k, v) for k, v in trial.params.items()}
        if reuse:
            source = _reuse.measured_match(study, trial.params, sp.value, trial.number)
            if source is not None:
                _reuse.tell_reused(study, trial, source)
                reused += 1
                in_a_row = 0
                continue
        if land.key(params) in land.refused:
            # the trial rules refuse it before anything launches (no device time). Our sweeper tells what
            # it really does (config_error: FAIL, a failure in a row); a baseline as its OOMs (a careful
            # user's objective catches the ConfigError), never stopping
            refused += 1
            if guided:
                keys = list(land.refused[land.key(params)])
                told_ = _results.tell(study, trial, None, ["objective"],
                                      result=TrialResult("config_error", refused_keys=keys))
                in_a_row = in_a_row + 1 if watch.failed(told_) else 0
                if in_a_row >= MAX_CONSECUTIVE_FAILURES:
                    return run(None, stopped=True)
            elif told == "constraint":
                _results.tell(study, trial, None, ["objective"], result=TrialResult("infeasible"))
            elif told == "zero":
                study.tell(trial, 0.0)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        in_a_row = 0
        # the preflight's veto: outside the planner's error band (an edge probe inside it is launched)
        if guided and land.planner is not None and land.planner[land.key(params)].vetoed:
            _results.tell(study, trial, None, ["objective"], result=TrialResult("infeasible"))
            vetoed += 1
            continue
        if infer and proof_of_failure(study.get_trials(deepcopy=False), trial.params) is not None:
            # the sweeper's proof veto (study.proofs): told infeasible, nothing launched
            trial.set_user_attr(RULED_OUT_ATTR, 0)
            _results.tell(study, trial, None, ["objective"], result=TrialResult("infeasible"))
            vetoed += 1
            continue
        truth = land.truth[land.key(params)]
        launched += 1
        if truth.tok_s is None:
            ooms += 1
            spent += cost_dh(truth, 0)
            if told == "constraint":
                _results.tell(study, trial, None, ["objective"], result=TrialResult("oom", failure_phase=truth.phase))
            elif told == "zero":
                study.tell(trial, 0.0)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        result = _steps(trial, truth, prune)
        spent += cost_dh(truth, result.steps)
        if told == "constraint":
            _results.tell(study, trial, None, ["objective"], result=result)
        elif result.outcome == "pruned":
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, result.objective)
        if result.outcome == "completed":
            measured.append((land.key(params), truth.tok_s, spent))
        if result.outcome == "completed" and reached(land, measured, target):
            return run(spent if spent <= budget else None)
    return run(None)


def _steps(trial: optuna.Trial, truth: Truth, prune: bool) -> TrialResult:
    """verl's steps as the runner reports them: step 1 at half speed (warm-up), then the throughput."""
    values = []
    for step in range(1, STEPS + 1):
        values.append(truth.tok_s * (0.5 if step == 1 else 1.0))
        trial.report(values[-1], step)
        if prune and trial.should_prune():
            return TrialResult("pruned", objective=statistics.mean(values), steps=step)
    return TrialResult("completed", objective=statistics.mean(values[1:]), steps=STEPS)


def _new_study(land: Landscape, sampler: optuna.samplers.BaseSampler,
               pruner: optuna.pruners.BasePruner | None = None) -> optuna.Study:
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    study.enqueue_trial(dict(land.recipe))
    return study


def guide_predictions(land: Landscape, seed: int, draws: int) -> list[_guide.Prediction]:
    """What our sweeper's guide predicts with sampler seed `seed` ([] where the planner has no opinion):
    over the whole space, or over the seeded sample of it that the guide ranks in a larger space
    (verlsweep.study.guide.candidates, MAX_CANDIDATES)."""
    if land.planner is None:
        return []
    if (land.name, seed) in GUIDED:
        return GUIDED[(land.name, seed)]
    planned = land.guide
    sp = land.space()
    if (sp.size() or 0) > _guide.MAX_CANDIDATES:
        index = {land.key(p): i for i, p in enumerate(planned.params)}
        picked = [index[land.key({k: sp.value(k, v) for k, v in p.items()})] for p in _guide.candidates(sp, seed)]
        planned = replace(planned, params=[planned.params[i] for i in picked],
                          inputs=[planned.inputs[i] for i in picked])
    return _guide.predict(planned, draws, GUIDE.error, seed)


def run_method(method: str, land: Landscape, seed: int, budget: float, top_k: int, draws: int) -> Run:
    sp = land.space()
    target = TARGET * land.best
    if method in ("verlsweep", "tpe+guide"):
        predictions = guide_predictions(land, seed, draws)
        if method == "verlsweep":
            # hydra/sweeper/sampler/boundary as _study.build_sampler makes it, the guide's prior as
            # verlsweep/study/verl_hooks.py sets it
            sampler = _study.build_sampler(OmegaConf.structured(BoundarySamplerConfig(seed=seed)), sp)
            if predictions:
                sampler.prior = _guide.prior(predictions, sp)
        else:
            sampler = _study.build_sampler(OmegaConf.structured(TPESamplerConfig(seed=seed)), sp)
        spec = OmegaConf.to_container(OmegaConf.structured(MedianPrunerConfig))
        study = _new_study(land, sampler, pruner_from_spec(spec))
        for params in _guide.rank(predictions, sp, top_k):       # what _guide.entries enqueues
            study.enqueue_trial(params, skip_if_exists=True)
        return _drive(study, land, sp, target, budget, told="constraint", guided=True, reuse=True, prune=True,
                      infer=True)
    if method == "grid":
        return _grid(land, sp, target, budget)
    if method == "random":
        return _drive(_new_study(land, optuna.samplers.RandomSampler(seed=seed)), land, sp, target, budget, told="zero")
    if method == "tpe oom=0":
        return _drive(_new_study(land, optuna.samplers.TPESampler(seed=seed)), land, sp, target, budget, told="zero")
    if method == "tpe oom=FAIL":
        return _drive(_new_study(land, optuna.samplers.TPESampler(seed=seed)), land, sp, target, budget, told="fail")
    if method == "gp":
        with quiet_optuna():
            sampler = optuna.samplers.GPSampler(seed=seed)
        return _drive(_new_study(land, sampler), land, sp, target, budget, told="constraint")
    raise ValueError(method)


def _grid(land: Landscape, sp: _space.SearchSpace, target: float, budget: float) -> Run:
    spent, launched, ooms, refused = 0.0, 0, 0, 0
    measured: list[tuple[tuple, float, float]] = []
    recipe = land.key(land.recipe)
    order = [dict(land.recipe)] + [p for p in all_configs(sp) if land.key(p) != recipe]
    for params in order:
        if spent >= budget:
            break
        if land.key(params) in land.refused:      # refused before launch: costs nothing
            refused += 1
            continue
        truth = land.truth[land.key(params)]
        launched += 1
        spent += cost_dh(truth, STEPS)
        if truth.tok_s is None:
            ooms += 1
            continue
        measured.append((land.key(params), truth.tok_s, spent))
        if reached(land, measured, target):
            return Run(spent if spent <= budget else None, launched, 0, 0, ooms, refused, measured=measured)
    return Run(None, launched, 0, 0, ooms, refused, measured=measured)
