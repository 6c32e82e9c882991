"""The Hydra side of the sweep: Sweeper.setup/sweep, the search space from Hydra's overrides, and each
batch of jobs handed to the configured Hydra launcher. The sweep itself (ask -> run -> tell -> outputs)
is verlsweep.study.loop; this module gives it what only Hydra has (verlsweep.study.loop.Hydra).

Follows the Sweeper API as Hydra's BasicSweeper uses it (hydra/_internal/core_plugins/
basic_sweeper.py: the launcher from Plugins.instance().instantiate_launcher, validate_batch_is_legal
before launching, multirun.yaml in the sweep dir) and hydra-optuna-sweeper's layout (config.py,
_impl.py, the thin registered class).
"""
from __future__ import annotations

import copy
import sys
import time
import traceback
from pathlib import Path
from typing import Any, List, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from verlsweep.common.errors import ConfigError, Problem, full_traceback_wanted
from verlsweep.study import app, chain, create, inflight, peer_compat, space as _space, subsets
from verlsweep.study_link import absolute_storage_url
from verlsweep.study.loop import Hydra, Loop, Settings, SweepStopped
from verlsweep.study.space import SearchSpaceError


class FixedConfigError(ConfigError):
    """The part of the config no param varies is invalid: every trial would fail the same way."""

    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        self.args = (f"every trial of this sweep would fail ({len(self.problems)} problem(s) in the part of the "
                     f"config no param varies), no study or trial started:\n{lines}",)


class VerlSweepImpl(Sweeper):
    def __init__(self, sampler: DictConfig, pruner: DictConfig, direction: Any, objectives: Sequence[str],
                 storage: Optional[str], study_name: Optional[str], n_trials: int, n_jobs: int,
                 timeout: Optional[float], max_consecutive_failures: int, params: Optional[DictConfig],
                 enqueue: Sequence[Any], enqueue_recipe: bool, heartbeat_interval: int,
                 grace_period: Optional[int], long_run: DictConfig, remeasure: bool = False,
                 guide: Optional[DictConfig] = None, infer: bool = True, max_failure_rate: Optional[float] = None,
                 custom_search_space: Optional[str] = None, search_space: Optional[DictConfig] = None,
                 schedule: str = "auto", devices_per_trial: Optional[int] = None,
                 from_study: Optional[str] = None, report: bool = True) -> None:
        self.schedule = str(schedule)       # verlsweep.study.inflight.choose resolves it against the launcher
        self.devices_per_trial = devices_per_trial
        self.direction = direction
        self.params = params
        self.search_space = search_space
        self.long_run = long_run
        self.from_study = from_study
        self.settings = Settings(
            sampler=sampler, pruner=pruner, objectives=list(objectives or []), storage=storage, study_name=study_name,
            n_trials=int(n_trials), n_jobs=int(n_jobs), timeout=timeout,
            max_consecutive_failures=int(max_consecutive_failures),
            enqueue=[OmegaConf.to_container(e, resolve=True) if OmegaConf.is_config(e) else dict(e)
                     for e in (enqueue or [])],
            enqueue_recipe=None if enqueue_recipe is None else bool(enqueue_recipe),
            heartbeat_interval=int(heartbeat_interval),
            grace_period=grace_period, remeasure=bool(remeasure),
            guide_top_k=int((guide or {}).get("top_k", 0) or 0), infer=bool(infer),
            max_failure_rate=max_failure_rate, custom_search_space=custom_search_space, report=bool(report))
        self.hydra_context: Optional[HydraContext] = None
        self._group_dirs: dict[str, list[str]] = {}      # config group dirs under each group dir ("": top)
        self.config: Optional[DictConfig] = None
        self.launcher = None

    # --- Sweeper API -------------------------------------------------------------------------------

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
        self.sweep_dir = Path(str(config.hydra.sweep.dir))

    def sweep(self, arguments: List[str]) -> None:
        """Errors of the user's input end the sweep with their message alone, exit 2; a sweep that ran
        and stopped, exit 1 (as a single run of sweep.py does). HYDRA_FULL_ERROR=1 keeps the traceback."""
        try:
            self._sweep(arguments)
        except (SearchSpaceError, ConfigError, SweepStopped) as exc:
            sys.stdout.flush()
            if full_traceback_wanted():     # adds the traceback; the exit status stays the same
                traceback.print_exc()
            sys.stderr.write(f"verlsweep: {exc}\n")
            sys.stderr.flush()
            raise SystemExit(1 if isinstance(exc, SweepStopped) else 2) from None

    def _sweep(self, arguments: List[str]) -> None:
        assert self.config is not None and self.hydra_context is not None and self.launcher is not None
        started = time.monotonic()
        loop = Loop(self.settings, self.config, self.sweep_dir,
                    Hydra(run_batch=self._run_batch, validate=self._validate, compose_trial=self._compose_trial,
                          compose_launch=self._compose_launch, check_fixed=self._check_fixed))
        space, directions, params_fixed = self._prepare(arguments)
        loop.run(space, directions, params_fixed, started)

    def _run_batch(self, batch: list[list[str]], initial_job_idx: int) -> Sequence[Any]:
        """One JobReturn per job, from the configured Hydra launcher."""
        return self.launcher.launch(batch, initial_job_idx=initial_job_idx)

    def _validate(self, overrides: list[str]) -> None:
        self.validate_batch_is_legal([overrides])

    # --- composing Hydra overrides ----------------------------------------------------------------------

    def _prepare(self, arguments: List[str]) -> tuple[_space.SearchSpace, list[str], list[str]]:
        """Everything that can be wrong with the sweep, found before a study or trial exists. Returns
        the space, the directions and the params' plain values the command line does not set."""
        s = self.settings
        problems: list[Problem] = []
        if s.n_trials < 1:
            problems.append(Problem("hydra.sweeper.n_trials", s.n_trials, "a positive integer"))
        if s.n_jobs < 1:
            problems.append(Problem("hydra.sweeper.n_jobs", s.n_jobs, "a positive integer"))
        own = app.is_own_task(self.config)
        problems += peer_compat.check_rate(s.max_failure_rate)
        s.objectives = peer_compat.objectives(self.direction, s.objectives, own)
        s.schedule, refused = inflight.choose(self.schedule, s.n_jobs, type(self.launcher))
        problems += refused
        directions, _ = create.directions_and_objectives(self.direction, s.objectives)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        params = OmegaConf.to_container(self.params, resolve=True) if self.params else {}
        if self.from_study:      # the source's best params first: this sweep's params and command line win
            cwd = Path(str(OmegaConf.select(self.config, "hydra.runtime.cwd", default=".")))
            link = chain.resolve(str(self.from_study), absolute_storage_url(str(s.storage), cwd) if s.storage
                                 else None, cwd)
            params = {**link.overrides(), **params}
            s.chained_from = link.to_attr()
        lines = [f"{k}={v}" for k, v in params.items()]
        space = _space.parse(lines + list(arguments), parser)
        peer_compat.add_legacy(space, peer_compat.legacy_search_space(self.search_space, self.params))
        if not space.distributions:
            problems.append(Problem(_space.PARAMS_KEY, space.fixed or None,
                                    "at least one swept param (choice/range/interval), e.g. space=rollout_memory"))
        problems += _space.check(space, self.config, self._group_options)
        groups, refused = subsets.device_groups(self.config, self.devices_per_trial, s.n_jobs, space.distributions, s.schedule)
        problems += refused
        if groups is not None:
            s.trial_overrides, s.slot_overrides = groups.shared(), [groups.slot(i) for i in range(s.n_jobs)]
        if problems:
            raise SearchSpaceError(problems)
        given = {a.split("=", 1)[0] for a in arguments}
        params_fixed = [f"{k}={v}" for k, v in space.fixed.items() if k in params and k not in given]
        return space, directions, params_fixed

    def _group_options(self, key: str) -> list[str]:
        """The options of config group `key` ([] when it is not one). Each question to Hydra's config
        loader copies its whole repository (a tenth of a second here), and most swept or fixed keys are
        plain config keys: a key is looked up only where every parent of its path is a group."""
        path = key.replace(".", "/")
        parent = ""
        for part in path.split("/"):
            if part not in self._groups_under(parent):
                return []
            parent = f"{parent}/{part}" if parent else part
        try:
            return list(self.hydra_context.config_loader.get_group_options(path))
        except Exception:  # noqa: BLE001 - not a group
            return []

    def _groups_under(self, parent: str) -> list[str]:
        if parent not in self._group_dirs:
            try:
                self._group_dirs[parent] = list(self.hydra_context.config_loader.list_groups(parent))
            except Exception:  # noqa: BLE001 - not a group
                self._group_dirs[parent] = []
        return self._group_dirs[parent]

    def _check_fixed(self, space: _space.SearchSpace, params_fixed: list[str], dry_run: bool) -> None:
        """The config every trial shares (the command line and the params' plain values), checked once
        as a trial would be: a missing model or data dir stops the sweep here, not in each trial."""
        from verlsweep import task

        # a job's overrides are the command line's and the params' plain values together (space.fixed):
        # composing with the params' alone would drop the command line (e.g. runner=estimate)
        cfg = (self.hydra_context.config_loader.load_sweep_config(self.config, space.overrides({}))
               if params_fixed else copy.deepcopy(self.config))
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]          # the task's view, as Hydra's run_job hands it to the task
        problems = task.check_fixed(cfg, [n.lstrip("+~") for n in space.distributions], dry_run)
        if problems:
            raise FixedConfigError(problems)

    def _compose_trial(self, overrides: list[str]) -> DictConfig:
        """The config a job with these overrides gets, as Hydra's run_job hands it to the task."""
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def _compose_launch(self, overrides: list[str]) -> str:
        """best_launch.sh: the trial's overrides and the long-run steps, prepared as a trial is."""
        from verlsweep.prepare import prepare

        long = [*map(str, self.long_run.overrides), f"trial.steps={int(self.long_run.steps)}"]
        cfg = self._compose_trial([*overrides, *long])
        # dry: paths missing here say nothing about the node; the script's variables name them there
        return prepare(cfg, dry=True, overrides=[]).launch_script()
