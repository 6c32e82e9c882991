"""Config of the `verlsweep` sweeper (`hydra/sweeper: verlsweep`) and its sampler/pruner groups.

`hydra.sweeper` holds what any Hydra app's sweep reads: hydra-optuna-sweeper's keys under its names (its
config.py in hydra's plugins/hydra_optuna_sweeper: sampler, direction, storage, study_name, n_trials,
n_jobs, max_failure_rate, params, custom_search_space, the deprecated search_space) and what the sweep
loop needs for any app (schedule, timeout, max_consecutive_failures, enqueue, remeasure,
heartbeat_interval, grace_period). What only verlsweep's own task reads is the task's `study` node
(conf/study/default.yaml). Registered at import: Hydra imports this module while it scans the
`hydra_plugins` namespace for plugins, before it composes the config.

Nothing here imports optuna: Hydra imports every plugin module on every run, sweeps or not.
"""
# No `from __future__ import annotations`: Hydra executes plugin modules before they are in
# sys.modules, where dataclasses cannot resolve string annotations.
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from verlsweep.command import resolvers

# --- samplers (hydra/sweeper/sampler) ------------------------------------------------------------
# `seed` is settable as hydra.sweeper.sampler.seed for every sampler.


@dataclass
class TPESamplerConfig:
    """Default. Multivariate TPE; Optuna 5 TPE reads each trial's constraints (trial.set_constraint),
    so trials told infeasible (OOM) form their own group and steer proposals away from them."""

    _target_: str = "optuna.samplers.TPESampler"
    seed: int | None = None
    # verl trials are minutes each: 5 random trials, not Optuna's 10, before TPE takes over
    # (benchmarks/search_efficiency.py)
    n_startup_trials: int = 5
    n_ei_candidates: int = 24
    multivariate: bool = True
    group: bool = False
    constant_liar: bool = True   # parallel trials and sweep processes avoid each other's running ones
    # hydra-optuna-sweeper's keys; null: Optuna's own default (optuna/samplers/_tpe/sampler.py)
    consider_prior: bool | None = None
    prior_weight: float | None = None
    consider_magic_clip: bool | None = None
    consider_endpoints: bool | None = None
    warn_independent_sampling: bool | None = None


@dataclass
class GPSamplerConfig:
    """Gaussian-process BO; models each constraint with its own GP (optuna/samplers/_gp/sampler.py)."""

    _target_: str = "optuna.samplers.GPSampler"
    seed: int | None = None
    n_startup_trials: int = 5
    deterministic_objective: bool = False


@dataclass
class RandomSamplerConfig:
    _target_: str = "optuna.samplers.RandomSampler"
    seed: int | None = None


@dataclass
class GridSamplerConfig:
    """Every combination once; the grid is built from the search space (discrete params only)."""

    _target_: str = "optuna.samplers.GridSampler"
    seed: int | None = None


@dataclass
class NSGAIISamplerConfig:
    """Genetic multi-objective sampler; constraint-aware through the trials' constraints."""

    _target_: str = "optuna.samplers.NSGAIISampler"
    seed: int | None = None
    # null: the app's hooks choose: 50 for any app, as Optuna and hydra-optuna-sweeper have it; 10 for
    # verlsweep's own task, where Optuna's 50 would make a 30-trial verl sweep pure random (verlsweep.study.hooks)
    population_size: int | None = None
    mutation_prob: float | None = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5


@dataclass
class CmaEsSamplerConfig:
    """CMA-ES (needs the `cmaes` package: the `cmaes` extra); keys as hydra-optuna-sweeper's group."""

    _target_: str = "optuna.samplers.CmaEsSampler"
    seed: int | None = None
    x0: dict[str, Any] | None = None
    sigma0: float | None = None
    n_startup_trials: int = 1
    warn_independent_sampling: bool = True
    consider_pruned_trials: bool = False
    restart_strategy: str | None = None
    popsize: int | None = None
    inc_popsize: int = -1
    use_separable_cma: bool = False
    with_margin: bool = False
    lr_adapt: bool = False


@dataclass
class MOTPESamplerConfig:
    """hydra-optuna-sweeper's `motpe`: Optuna removed MOTPESampler in 4.0, its multi-objective TPE is
    TPESampler's own, so the group is TPESampler with the old sampler's defaults."""

    _target_: str = "optuna.samplers.TPESampler"
    seed: int | None = None
    n_startup_trials: int = 10
    n_ei_candidates: int = 24
    multivariate: bool = False
    # the old sampler's prior keys, as TPESamplerConfig's (null: Optuna's default)
    consider_prior: bool | None = None
    prior_weight: float | None = None
    consider_magic_clip: bool | None = None
    consider_endpoints: bool | None = None


@dataclass
class BoundarySamplerConfig:
    """What finished trials prove (verlsweep.proofs): bisects the util band of the best TP/offload
    combinations and opens new ones, never proposing a config proven to fail; params outside the
    rollout-memory knobs, and other spaces, go to the inner TPE (benchmarks/search_efficiency.py)."""

    _target_: str = "verlsweep.proofs.sampler.BoundarySampler"
    seed: int | None = None
    # combinations measured within this fraction of the best get their band above the highest fit bisected
    margin: float = 0.1
    # a higher util measured more than this fraction below a combination's best refutes "tok/s does not
    # fall with util" there: its best util's neighbourhood is searched instead (run-to-run noise is below it)
    tolerance: float = 0.01
    inner: TPESamplerConfig = field(default_factory=TPESamplerConfig)


@dataclass
class QMCSamplerConfig:
    """Quasi-Monte-Carlo (low-discrepancy) coverage of the space, no model."""

    _target_: str = "optuna.samplers.QMCSampler"
    seed: int | None = None
    qmc_type: str = "sobol"
    scramble: bool = True         # without scrambling the seed would change nothing


# --- pruners (hydra/sweeper/pruner) --------------------------------------------------------------
# A trial reports one value per training step, numbered from 1 as verl numbers them
# (verlsweep.study_link). Step 1 is warm-up (graph capture, cache allocation): Optuna prunes from
# step n_warmup_steps on, so 2 leaves step 1 out.


@dataclass
class MedianPrunerConfig:
    _target_: str = "optuna.pruners.MedianPruner"
    n_startup_trials: int = 5
    n_warmup_steps: int = 2
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class PercentilePrunerConfig:
    _target_: str = "optuna.pruners.PercentilePruner"
    percentile: float = 25.0
    n_startup_trials: int = 5
    n_warmup_steps: int = 2
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class HyperbandPrunerConfig:
    _target_: str = "optuna.pruners.HyperbandPruner"
    min_resource: int = 2
    max_resource: Any = "auto"    # "auto": the most steps any finished trial reported
    reduction_factor: int = 3


@dataclass
class NopPrunerConfig:
    _target_: str = "optuna.pruners.NopPruner"


# --- the sweeper ---------------------------------------------------------------------------------
# What any Hydra app's sweep reads, as hydra-optuna-sweeper's OptunaSweeperConf has it, and what the loop
# itself needs. What only verlsweep's own task reads is in the task's `study` node (conf/study/default.yaml).


@dataclass(frozen=True)
class VerlSweepSweeperConf:
    _target_: str = "hydra_plugins.verlsweep_sweeper.verlsweep_sweeper.VerlSweepSweeper"
    # the sweeper builds sampler and pruner itself (the grid sampler needs the search space)
    _recursive_: bool = False
    defaults: list[Any] = field(default_factory=lambda: [{"sampler": "boundary"}, {"pruner": "median"}])

    sampler: Any = MISSING
    pruner: Any = MISSING
    # one value or a list (multi-objective); hydra-optuna-sweeper's default. conf/hydra/sweeper/verl_trials.yaml
    # sets maximize (tokens/s); verlsweep's task names the values with study.objectives
    direction: Any = "minimize"
    # Optuna RDB URL; a relative sqlite path is taken from the directory the sweep starts in.
    # null = in memory (a fresh study each run; no resume, no pruning across processes), as in
    # hydra-optuna-sweeper; conf/hydra/sweeper/verl_trials.yaml sets sqlite:///verlsweep-optuna.db
    storage: str | None = None
    # null: <space>.<hardware>.<model>.<algorithm>.<hash> for verlsweep's task, <job name>.<hash> for another app
    study_name: str | None = None
    n_trials: int = 20            # the study's total: re-running the same command resumes it
    n_jobs: int = 1               # trials in flight at once (a batch of them with schedule=batch)
    # async: a trial's end starts the next at once (verlsweep/study/inflight.py); batch: the next n_jobs
    # start when the whole batch has ended; auto: async when n_jobs > 1 and the launcher runs jobs in
    # their own processes (joblib, submitit_local, submitit_slurm, slurm), else batch
    schedule: str = "auto"
    timeout: float | None = None   # seconds; no new trial starts after it
    max_consecutive_failures: int = 5
    # hydra-optuna-sweeper's (verlsweep/study/peer_compat.py). A batch with a larger share of failed trials
    # stops the sweep (then max_consecutive_failures is not used); null: not used
    max_failure_rate: float | None = None
    # dotted path to fn(cfg, trial) that suggests more params after the space's (trial.suggest_*)
    custom_search_space: str | None = None
    params: dict[str, Any] | None = None
    # deprecated there and here: {name: {type, low, high, step, log, choices}}; write `params` instead
    search_space: dict[str, Any] | None = None
    # known-good configs run first: a list of {param: value}
    enqueue: list[dict[str, Any]] = field(default_factory=list)
    # false: a proposal equal to a trial this study has measured is told that result again and
    # launches nothing (user attr `reused_from`); true: measure it again
    remeasure: bool = False
    # seconds between heartbeats of in-flight trials; a trial without one for `grace_period`
    # (default 3x) belongs to a dead sweep: it is failed and its params re-enqueued once
    heartbeat_interval: int = 30
    grace_period: int | None = None


def register() -> None:
    cs = ConfigStore.instance()
    # untyped in the config tree: a key that moved out of hydra.sweeper (verlsweep/common/moved_keys.py) and
    # is set in a config file reaches the sweeper, which names its new spelling; the sweeper reads the node
    # into this dataclass once (_impl.settings_from), where a wrong type or an unknown key is refused
    cs.store(group="hydra/sweeper", name="verlsweep", provider="verlsweep",
             node=OmegaConf.create(OmegaConf.to_container(OmegaConf.structured(VerlSweepSweeperConf))))
    for name, node in (("tpe", TPESamplerConfig), ("gp", GPSamplerConfig), ("random", RandomSamplerConfig),
                       ("grid", GridSamplerConfig), ("nsgaii", NSGAIISamplerConfig), ("qmc", QMCSamplerConfig),
                       ("boundary", BoundarySamplerConfig), ("cmaes", CmaEsSamplerConfig),
                       ("motpe", MOTPESamplerConfig)):
        cs.store(group="hydra/sweeper/sampler", name=name, node=node, provider="verlsweep")
    for name, pruner in (("median", MedianPrunerConfig), ("percentile", PercentilePrunerConfig),
                       ("hyperband", HyperbandPrunerConfig), ("none", NopPrunerConfig)):
        cs.store(group="hydra/sweeper/pruner", name=name, node=pruner, provider="verlsweep")
    resolvers.register()


register()
