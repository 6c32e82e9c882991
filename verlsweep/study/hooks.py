"""What a sweep does for the app it sweeps: the loop (verlsweep.study.loop) calls these hooks and never
asks which app it runs.

The app is chosen once, by the sweeper: verlsweep's own trial task gets VerlHooks
(verlsweep.study.verl_hooks: the fixed-config check, the planner guide, the proofs, the `trial.*` links,
the MLflow sweep run, best_launch.sh, report.html, from the task's `study` node); any other Hydra app gets
AppHooks below: what hydra-optuna-sweeper does (hydra's plugins/hydra_optuna_sweeper, _impl.py) and
nothing more; its jobs get the trial's params and nothing else in their config.

The rule for "ours": the composed config has every node our trial task reads (OWN_NODES: conf/sweep.yaml's
`verl`, `trial`, `objective`, `hardware`, `model` and the `runner` group). Checked on the composed config,
not the script's name, so tests/support/sweeper_app.py and a user's own entry point over conf/sweep.yaml
count as ours, and an app that only happens to have a `trial` or `tracking` key does not.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import FrozenTrial

from verlsweep.common.errors import Problem
from verlsweep.common.result import TrialResult
from verlsweep.study import job_dirs, peer_compat
from verlsweep.study import outputs as _outputs
from verlsweep.study.create import signature
from verlsweep.study.session import SweepSession
from verlsweep.study.space import SearchSpace, SearchSpaceError

OWN_NODES = ("verl", "trial", "objective", "hardware", "model", "runner")
BOUNDARY = "verlsweep.proofs.sampler.BoundarySampler"
NSGAII = "optuna.samplers.NSGAIISampler"
CMAES = "optuna.samplers.CmaEsSampler"


def is_own_task(config: DictConfig) -> bool:
    """Whether `config` (the sweeper's, with or without its `hydra` node) is verlsweep's trial config."""
    return all(isinstance(OmegaConf.select(config, key, default=None), DictConfig) for key in OWN_NODES)


class TaskHooks(Protocol):
    """The app's side of a sweep, in the order the sweep calls it."""

    dry_run: bool         # the jobs compose commands only: an in-memory study, nothing tracked or reported
    none_ok: bool         # a job that returns None has no result (a dry run), rather than failing
    report: bool          # report.html and plots/ after batches
    launch: Callable[[list[str]], str] | None     # best_launch.sh from a trial's overrides; None: none
    trial_overrides: list[str]     # every job's, beyond its recorded overrides (a device subset's)
    slot_overrides: list[list[str]]    # per in-flight slot, what the trial holding it gets

    def params(self, storage: str | None, cwd: Path) -> dict[str, str]:
        """Params every trial gets before the space's own (a chained sweep's source)."""
    def check(self, space: SearchSpace, n_jobs: int, schedule: str) -> list[Problem]:
        """What is wrong with sweeping `space` this way, found before a study exists."""
    def study_name(self, space: SearchSpace) -> str:
        """The study's name when hydra.sweeper.study_name is null."""
    def objectives(self, directions: list[str]) -> list[str]:
        """The TrialResult values the directions apply to."""
    def sampler(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The sampler config this app gets from hydra.sweeper.sampler."""
    def before_study(self, space: SearchSpace, params_fixed: list[str]) -> None:
        """Raises when every trial would fail alike (nothing is created yet)."""
    def enqueue(self, study: optuna.Study, space: SearchSpace, sampler: Mapping[str, Any],
                entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The configs to run first, in order; `entries` is hydra.sweeper.enqueue, checked."""
    def start(self, study: optuna.Study, name: str, url: str | None, space: SearchSpace,
              session: SweepSession) -> str | None:
        """The study is open: returns its MLflow sweep run's id (None: not tracked)."""
    def job_overrides(self, trial: optuna.Trial, space: SearchSpace, knobs: str) -> list[str]:
        """The job's overrides: the trial's params and what else its config gets, its job dir last."""
    def decide(self, study: optuna.Study, trial: optuna.Trial,
               overrides: list[str]) -> tuple[TrialResult, str] | None:
        """A result (and its note) for a trial not to launch, or None to launch it."""
    def confirmations(self, study: optuna.Study) -> list[FrozenTrial]:
        """Finished trials to confirm now at the long run's worst case, in order ([]: none left)."""
    def confirm_overrides(self, confirmed: FrozenTrial, trial: optuna.Trial, overrides: list[str]) -> list[str]:
        """The overrides of `trial`, the confirmation of `confirmed`, beyond its job's `overrides`."""
    def summary(self, study: optuna.Study, best: list[Any], objectives: list[str], space: SearchSpace,
                console: Any) -> None:
        """The final table and the results file."""
    def finish(self, status: str, others_alive: bool, console: Any) -> None:
        """The sweep ended with `status`; `others_alive`: another sweep process goes on with the study."""


def sampler_config(cfg: Mapping[str, Any], population: int) -> dict[str, Any]:
    """`cfg` as a plain dict, NSGA-II's unset population_size set; a clear error for CMA-ES without its package."""
    out = copy.deepcopy(dict(cfg))
    target = str(out.get("_target_", ""))
    if target == CMAES and importlib.util.find_spec("cmaes") is None:
        raise SearchSpaceError([Problem("hydra/sweeper/sampler", "cmaes", "an installed `cmaes` package "
                                        "(pip install 'verlsweep[cmaes]'), or another sampler")])
    if target == NSGAII and out.get("population_size") is None:
        out["population_size"] = population
    return out


class AppHooks:
    """Any Hydra app: the search, its study and the sweep's own files (trials.csv, best.yaml,
    optimization_results.yaml), as hydra-optuna-sweeper does."""

    dry_run: bool = False
    none_ok: bool = False         # the peer fails a trial whose task returned None
    report: bool = False
    launch: Callable[[list[str]], str] | None = None
    POPULATION = 50               # NSGA-II's, as Optuna and hydra-optuna-sweeper have it

    def __init__(self, config: DictConfig, sweep_dir: Path) -> None:
        self.config = config
        self.sweep_dir = sweep_dir
        self.trial_overrides: list[str] = []
        self.slot_overrides: list[list[str]] = []

    def params(self, storage: str | None, cwd: Path) -> dict[str, str]:
        return {}

    def check(self, space: SearchSpace, n_jobs: int, schedule: str) -> list[Problem]:
        return []

    def study_name(self, space: SearchSpace) -> str:
        """`<job name>.<hash of the search space>` (`sphere.3f2a91c0`): another space is another study."""
        job = str(OmegaConf.select(self.config, "hydra.job.name", default=None) or "app")
        digest = hashlib.sha1(json.dumps(signature(space), sort_keys=True).encode()).hexdigest()[:8]
        return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', job)}.{digest}"

    def objectives(self, directions: list[str]) -> list[str]:
        """A task returning a tuple or list gives one value per direction: objective, value_1, ..."""
        return ["objective", *(f"value_{i}" for i in range(1, len(directions)))]

    def sampler(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """verlsweep's default `boundary` searches by verl's rollout knobs: for another app it is its inner TPE."""
        if str(cfg.get("_target_", "")) == BOUNDARY:
            inner = copy.deepcopy(dict(cfg["inner"]))
            if inner.get("seed") is None:
                inner["seed"] = cfg.get("seed")
            cfg = inner
        return sampler_config(cfg, self.POPULATION)

    def before_study(self, space: SearchSpace, params_fixed: list[str]) -> None:
        return None

    def enqueue(self, study: optuna.Study, space: SearchSpace, sampler: Mapping[str, Any],
                entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return entries

    def start(self, study: optuna.Study, name: str, url: str | None, space: SearchSpace,
              session: SweepSession) -> str | None:
        return None

    def job_overrides(self, trial: optuna.Trial, space: SearchSpace, knobs: str) -> list[str]:
        """Only the trial's params (and its Hydra job dir) reach another app."""
        return space.overrides(trial.params) + [job_dirs.override(job_dirs.subdir(self.sweep_dir, trial.number, ""))]

    def decide(self, study: optuna.Study, trial: optuna.Trial,
               overrides: list[str]) -> tuple[TrialResult, str] | None:
        return None       # another app's job composes once, in the launcher (as with the peer)

    def confirmations(self, study: optuna.Study) -> list[FrozenTrial]:
        return []         # another app has no long run

    def confirm_overrides(self, confirmed: FrozenTrial, trial: optuna.Trial, overrides: list[str]) -> list[str]:
        return []

    def summary(self, study: optuna.Study, best: list[Any], objectives: list[str], space: SearchSpace,
                console: Any) -> None:
        _outputs.summary(study, objectives, list(space.distributions), best, self.sweep_dir, space.value, console,
                         verl=False)
        peer_compat.write_results(study, best, self.sweep_dir, space.value)

    def finish(self, status: str, others_alive: bool, console: Any) -> None:
        return None
