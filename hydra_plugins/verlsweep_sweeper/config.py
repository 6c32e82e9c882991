"""Config of the `verlsweep` sweeper (`hydra/sweeper: verlsweep`) and its sampler/pruner groups.

Key names follow hydra-optuna-sweeper where the concept is the same (n_trials, n_jobs, storage,
study_name, sampler, direction, params; its config.py in hydra's plugins/hydra_optuna_sweeper) so its
users feel at home; the rest is ours. Registered at import: Hydra imports this module while it scans
the `hydra_plugins` namespace for plugins, before it composes the config.

Nothing here imports optuna: Hydra imports every plugin module on every run, sweeps or not.
"""
# No `from __future__ import annotations`: Hydra executes plugin modules before they are in
# sys.modules, where dataclasses cannot resolve string annotations.
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from verlsweep.command import resolvers

# --- samplers (hydra/sweeper/sampler) ------------------------------------------------------------
# `seed` is settable as hydra.sweeper.sampler.seed for every sampler.


@dataclass
class TPESamplerConfig:
    """Default. Multivariate TPE; Optuna 5 TPE reads each trial's constraints (trial.set_constraint),
    so trials told infeasible (OOM) form their own group and steer proposals away from them."""

    _target_: str = "optuna.samplers.TPESampler"
    seed: Optional[int] = None
    # verl trials are minutes each: 5 random trials, not Optuna's 10, before TPE takes over
    # (benchmarks/search_efficiency.py)
    n_startup_trials: int = 5
    n_ei_candidates: int = 24
    multivariate: bool = True
    group: bool = False
    constant_liar: bool = True   # parallel trials and sweep processes avoid each other's running ones
    # hydra-optuna-sweeper's keys; null: Optuna's own default (optuna/samplers/_tpe/sampler.py)
    consider_prior: Optional[bool] = None
    prior_weight: Optional[float] = None
    consider_magic_clip: Optional[bool] = None
    consider_endpoints: Optional[bool] = None
    warn_independent_sampling: Optional[bool] = None


@dataclass
class GPSamplerConfig:
    """Gaussian-process BO; models each constraint with its own GP (optuna/samplers/_gp/sampler.py)."""

    _target_: str = "optuna.samplers.GPSampler"
    seed: Optional[int] = None
    n_startup_trials: int = 5
    deterministic_objective: bool = False


@dataclass
class RandomSamplerConfig:
    _target_: str = "optuna.samplers.RandomSampler"
    seed: Optional[int] = None


@dataclass
class GridSamplerConfig:
    """Every combination once; the grid is built from the search space (discrete params only)."""

    _target_: str = "optuna.samplers.GridSampler"
    seed: Optional[int] = None


@dataclass
class NSGAIISamplerConfig:
    """Genetic multi-objective sampler; constraint-aware through the trials' constraints."""

    _target_: str = "optuna.samplers.NSGAIISampler"
    seed: Optional[int] = None
    # null: 10 for verlsweep's own task (Optuna's 50 would make a 30-trial verl sweep pure random),
    # 50 for another app, as Optuna and hydra-optuna-sweeper have it (verlsweep.study.peer_compat)
    population_size: Optional[int] = None
    mutation_prob: Optional[float] = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5


@dataclass
class CmaEsSamplerConfig:
    """CMA-ES (needs the `cmaes` package: the `cmaes` extra); keys as hydra-optuna-sweeper's group."""

    _target_: str = "optuna.samplers.CmaEsSampler"
    seed: Optional[int] = None
    x0: Optional[Dict[str, Any]] = None
    sigma0: Optional[float] = None
    n_startup_trials: int = 1
    warn_independent_sampling: bool = True
    consider_pruned_trials: bool = False
    restart_strategy: Optional[str] = None
    popsize: Optional[int] = None
    inc_popsize: int = -1
    use_separable_cma: bool = False
    with_margin: bool = False
    lr_adapt: bool = False


@dataclass
class MOTPESamplerConfig:
    """hydra-optuna-sweeper's `motpe`: Optuna removed MOTPESampler in 4.0, its multi-objective TPE is
    TPESampler's own, so the group is TPESampler with the old sampler's defaults."""

    _target_: str = "optuna.samplers.TPESampler"
    seed: Optional[int] = None
    n_startup_trials: int = 10
    n_ei_candidates: int = 24
    multivariate: bool = False
    # the old sampler's prior keys, as TPESamplerConfig's (null: Optuna's default)
    consider_prior: Optional[bool] = None
    prior_weight: Optional[float] = None
    consider_magic_clip: Optional[bool] = None
    consider_endpoints: Optional[bool] = None


@dataclass
class BoundarySamplerConfig:
    """What finished trials prove (verlsweep.proofs): bisects the util band of the best TP/offload
    combinations and opens new ones, never proposing a config proven to fail; params outside the
    rollout-memory knobs, and other spaces, go to the inner TPE (benchmarks/search_efficiency.py)."""

    _target_: str = "verlsweep.proofs.sampler.BoundarySampler"
    seed: Optional[int] = None
    # combinations measured within this fraction of the best get their band above the highest fit bisected
    margin: float = 0.1
    inner: TPESamplerConfig = field(default_factory=TPESamplerConfig)


@dataclass
class QMCSamplerConfig:
    """Quasi-Monte-Carlo (low-discrepancy) coverage of the space, no model."""

    _target_: str = "optuna.samplers.QMCSampler"
    seed: Optional[int] = None
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


@dataclass
class LongRunConfig:
    """How best_launch.sh turns the best trial into the real training run."""

    # steps of the seed recipe's reported run (run_qwen3_8b_remax_fsdp_npu.sh: 60 steps;
    # docs/ascend.md, Seed recipe)
    steps: int = 60
    # a trial switches checkpoints, validation and resume off; the long run wants them back (verl's
    # example scripts use save_freq=20, test_freq=5, e.g. examples/grpo_trainer/run_qwen3_8b_fsdp.sh;
    # resume_mode=auto is verl's own default: it resumes from the latest checkpoint of the same
    # experiment_name, and the script names its own)
    overrides: List[str] = field(
        default_factory=lambda: ["verl.trainer.save_freq=20", "verl.trainer.test_freq=5",
                                 "verl.trainer.resume_mode=auto"]
    )


@dataclass
class GuideConfig:
    """Planner-guided start (verlsweep/study/guide.py): before the first launch the planner ranks the search space
    and up to `top_k` configs (one per TP/offload combination) run right after the recipe's: those
    that are the best predicted feasible config under at least one of `draws` calibrations with
    every throughput constant scaled by U(1-error, 1+error), most often best first. 0 switches the
    guide off; `draws: 0` ranks by the unperturbed planner alone (its top_k best)."""

    top_k: int = 3
    # planner evaluations per candidate config (the unperturbed planner is one of them); each is a
    # fraction of a millisecond, so a 448-config space costs about a second
    draws: int = 32          # = verlsweep.study.guide.DRAWS (not imported: that module imports optuna)
    # the planner's throughput error on a config unlike the fitted ones: leave-one-out and held-out
    # errors of benchmarks/planner_accuracy.py reach -19% / +9%
    error: float = 0.2       # = verlsweep.study.guide.ERROR


@dataclass
class VerlSweepSweeperConf:
    _target_: str = "hydra_plugins.verlsweep_sweeper.verlsweep_sweeper.VerlSweepSweeper"
    # the sweeper builds sampler and pruner itself (the grid sampler needs the search space)
    _recursive_: bool = False
    defaults: List[Any] = field(default_factory=lambda: [{"sampler": "boundary"}, {"pruner": "median"}])

    sampler: Any = MISSING
    pruner: Any = MISSING
    # one value or a list (multi-objective); paired in order with `objectives`. hydra-optuna-sweeper's
    # default; conf/sweep.yaml sets maximize (tokens/s)
    direction: Any = "minimize"
    # TrialResult values the study optimises: objective, peak_memory_gb or a key of TrialResult.metrics.
    # null: `objective`; another app returning a tuple or list gets one value per direction
    objectives: Optional[List[str]] = None
    # Optuna RDB URL; a relative sqlite path is taken from the directory the sweep starts in.
    # null = in memory (a fresh study each run; no resume, no pruning across processes), as in
    # hydra-optuna-sweeper; conf/sweep.yaml sets sqlite:///verlsweep-optuna.db
    storage: Optional[str] = None
    # null: <sweep>.<hardware>.<model>.<algorithm>[.<hash of other fixed overrides>]
    study_name: Optional[str] = None
    n_trials: int = 20            # the study's total: re-running the same command resumes it
    n_jobs: int = 1               # trials in flight at once (a batch of them with schedule=batch)
    # async: a trial's end starts the next at once (verlsweep/study/inflight.py); batch: the next n_jobs
    # start when the whole batch has ended; auto: async when n_jobs > 1 and the launcher runs jobs in
    # their own processes (joblib, submitit_local, submitit_slurm, slurm), else batch
    schedule: str = "auto"
    # K: each trial runs on K devices of one node, n_jobs trials side by side on disjoint device groups
    # (verlsweep/study/subsets.py); null: every trial gets the whole node
    devices_per_trial: Optional[int] = None
    timeout: Optional[float] = None   # seconds; no new batch starts after it
    max_consecutive_failures: int = 5
    params: Optional[Dict[str, Any]] = None
    # known-good configs run first: a list of {param: value}
    enqueue: List[Dict[str, Any]] = field(default_factory=list)
    # also run the composed config's own values of the swept params (the recipe's) first;
    # null: true for verlsweep's own task, false for another app (verlsweep.study.app)
    enqueue_recipe: Optional[bool] = None
    # seconds between heartbeats of in-flight trials; a trial without one for `grace_period`
    # (default 3x) belongs to a dead sweep: it is failed and its params re-enqueued once
    heartbeat_interval: int = 30
    grace_period: Optional[int] = None
    long_run: LongRunConfig = field(default_factory=LongRunConfig)
    guide: GuideConfig = field(default_factory=GuideConfig)
    # false: a proposal equal to a trial this study has measured is told that result again and
    # launches nothing (user attr `reused_from`); true: measure it again
    remeasure: bool = False
    # true: a proposal that a finished trial proves to fail (verlsweep.proofs.rules: an OOM at vLLM start
    # at a lower util, a training OOM with more offloads, ...) launches nothing and is told infeasible,
    # user attr `ruled_out_by`; false: launch it anyway
    infer: bool = True
    # hydra-optuna-sweeper's keys (verlsweep.study.peer_compat). max_failure_rate: a batch with a larger
    # share of failed trials stops the sweep (then max_consecutive_failures is not used); null: not used
    max_failure_rate: Optional[float] = None
    # dotted path to fn(cfg, trial) that suggests more params after the space's (trial.suggest_*)
    custom_search_space: Optional[str] = None
    # deprecated: {name: {type, low, high, step, log, choices}}; write `params` instead
    search_space: Optional[Dict[str, Any]] = None
    # start from another sweep's best config: a study name in `storage` or a best.yaml path; its best
    # trial's params are fixed in every trial unless this sweep sweeps or sets them (verlsweep.study.chain)
    from_study: Optional[str] = None
    # false: no report.html nor plots/ (each draw costs seconds of plotting; trials.csv, best.yaml, the
    # terminal and MLflow still say everything), e.g. for a CI sweep that reads only its outputs
    report: bool = True


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(group="hydra/sweeper", name="verlsweep", node=VerlSweepSweeperConf, provider="verlsweep")
    for name, node in (("tpe", TPESamplerConfig), ("gp", GPSamplerConfig), ("random", RandomSamplerConfig),
                       ("grid", GridSamplerConfig), ("nsgaii", NSGAIISamplerConfig), ("qmc", QMCSamplerConfig),
                       ("boundary", BoundarySamplerConfig), ("cmaes", CmaEsSamplerConfig),
                       ("motpe", MOTPESamplerConfig)):
        cs.store(group="hydra/sweeper/sampler", name=name, node=node, provider="verlsweep")
    for name, node in (("median", MedianPrunerConfig), ("percentile", PercentilePrunerConfig),
                       ("hyperband", HyperbandPrunerConfig), ("none", NopPrunerConfig)):
        cs.store(group="hydra/sweeper/pruner", name=name, node=node, provider="verlsweep")
    resolvers.register()


register()
