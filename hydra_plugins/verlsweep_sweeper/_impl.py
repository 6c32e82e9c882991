"""The Hydra side of the sweep: the settings read once, Sweeper.setup/sweep, the search space from Hydra's
overrides, the app's hooks chosen, and each batch of jobs handed to the configured Hydra launcher. The sweep
itself (ask -> run -> tell -> outputs) is verlsweep.study.loop; this module gives it what only Hydra has.

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
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hydra_plugins.verlsweep_sweeper.config import VerlSweepSweeperConf
from verlsweep.command import recipe_config
from verlsweep.command.overrides import flatten
from verlsweep.command.suggest import did_you_mean
from verlsweep.common import moved_keys
from verlsweep.common.errors import ConfigError, Problem, full_traceback_wanted
from verlsweep.common.files import writable_dir
from verlsweep.config.node import convert
from verlsweep.study import create, inflight, peer_compat, storage_url
from verlsweep.study import space as _space
from verlsweep.study.hooks import AppHooks, TaskHooks, is_own_task
from verlsweep.study.loop import Loop, Search
from verlsweep.study.space import SearchSpaceError
from verlsweep.study.stopped import SweepInterrupted, SweepStopped
from verlsweep.study.verl_hooks import Hydra, VerlHooks
from verlsweep.study_link import absolute_storage_url

KEY = "hydra.sweeper"


class FixedConfigError(ConfigError):
    """The part of the config no param varies is invalid: every trial would fail the same way."""

    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        self.args = (f"every trial of this sweep would fail ({len(self.problems)} problem(s) in the part of the "
                     f"config no param varies), no study or trial started:\n{lines}",)


def _refuse(exc: Exception) -> NoReturn:
    """An input error ends the sweep with its message alone, exit 2; a sweep that ran and stopped, exit 1
    (as a single run of sweep.py does). HYDRA_FULL_ERROR=1 adds the traceback, the exit status stays."""
    sys.stdout.flush()
    if full_traceback_wanted():
        traceback.print_exc()
    sys.stderr.write(f"verlsweep: {exc}\n")
    sys.stderr.flush()
    raise SystemExit(1 if isinstance(exc, SweepStopped) else 2) from None


def _interrupted(abandoned: list[int]) -> NoReturn:
    """Ctrl-C: one line, exit 130 (128 + SIGINT, as a shell reports it); the summary above says the rest."""
    sys.stdout.flush()
    if full_traceback_wanted():
        traceback.print_exc()
    stopped = ", ".join(f"t{n:02d}" for n in abandoned)
    again = (f"; {stopped} stopped in flight, re-run once when the same command runs again" if abandoned
             else "")
    sys.stderr.write(f"verlsweep: interrupted (Ctrl-C){again} (n_trials is the total)\n")
    sys.stderr.flush()
    raise SystemExit(130) from None


def settings_from(kwargs: Mapping[str, Any]) -> VerlSweepSweeperConf:
    """hydra.sweeper as Hydra hands it to the sweeper, read once into its frozen config dataclass. A key that
    moved (verlsweep.common.moved_keys) or is unknown, or a value of the wrong type, exits 2 naming it:
    nothing has been created yet."""
    try:
        # interpolations resolve in the composed config (${verlsweep.tp_choices:} reads hardware and model)
        given = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
                 for k, v in kwargs.items()}
    except Exception as exc:  # noqa: BLE001 - OmegaConf's message names the key that does not resolve
        _refuse(SearchSpaceError([Problem(KEY, None, f"values that resolve ({exc})")]))
    known = [f.name for f in fields(VerlSweepSweeperConf)]
    problems: list[Problem] = []
    for name, value in given.items():
        if name in known:
            continue
        if moved_keys.new_spelling(f"{KEY}.{name}") is None:
            problems.append(Problem(f"{KEY}.{name}", value, f"a key of {KEY}{did_you_mean(name, known)}"))
        else:         # each key a config file sets under a moved node, named as the user wrote it
            nested = isinstance(value, dict) and value
            leaves = flatten({name: value}, f"{KEY}.") if nested else {f"{KEY}.{name}": value}
            problems += moved_keys.problems(leaves.items())
    if problems:
        _refuse(SearchSpaceError(problems))
    try:
        return convert(VerlSweepSweeperConf, given, KEY)
    except ConfigError as exc:
        _refuse(exc)


class VerlSweepImpl(Sweeper):
    def __init__(self, settings: VerlSweepSweeperConf) -> None:
        self.settings = settings
        self.hydra_context: HydraContext | None = None
        self._group_dirs: dict[str, list[str]] = {}      # config group dirs under each group dir ("": top)
        self.config: DictConfig | None = None
        self.launcher: Any = None

    # --- Sweeper API -------------------------------------------------------------------------------

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
        self.sweep_dir = Path(str(config.hydra.sweep.dir))

    def sweep(self, arguments: list[str]) -> None:
        try:
            self._sweep(arguments)
        except (SearchSpaceError, ConfigError, SweepStopped) as exc:
            _refuse(exc)
        except SweepInterrupted as exc:
            _interrupted(exc.abandoned)

    def _sweep(self, arguments: list[str]) -> None:
        assert self.config is not None and self.hydra_context is not None and self.launcher is not None
        started = time.monotonic()
        # the app is chosen here, once: the loop never asks which it runs
        hooks: TaskHooks = AppHooks(self.config, self.sweep_dir)
        if is_own_task(self.config):
            hooks = VerlHooks(self.config, self.sweep_dir, Hydra(
                validate=self._validate, compose_trial=self._compose_trial, compose_launch=self._compose_launch,
                check_fixed=self._check_fixed))
        search = self._search(arguments, hooks)
        Loop(self.settings, hooks, self.config, self.sweep_dir, self._run_batch).run(search, started)

    def _run_batch(self, batch: list[list[str]], initial_job_idx: int) -> Sequence[Any]:
        """One JobReturn per job, from the configured Hydra launcher."""
        return self.launcher.launch(batch, initial_job_idx=initial_job_idx)

    def _validate(self, overrides: list[str]) -> None:
        self.validate_batch_is_legal([overrides])

    # --- composing Hydra overrides ----------------------------------------------------------------------

    def _search(self, arguments: list[str], hooks: TaskHooks) -> Search:
        """Everything that can be wrong with the sweep, found before a study or trial exists."""
        assert self.config is not None and self.hydra_context is not None
        s = self.settings
        problems: list[Problem] = []
        if s.n_trials < 1:
            problems.append(Problem(f"{KEY}.n_trials", s.n_trials, "a positive integer"))
        if s.n_jobs < 1:
            problems.append(Problem(f"{KEY}.n_jobs", s.n_jobs, "a positive integer"))
        problems += peer_compat.check_rate(s.max_failure_rate)
        schedule, refused = inflight.choose(s.schedule, s.n_jobs, type(self.launcher))
        problems += refused
        if note := inflight.one_at_a_time(s.n_jobs, type(self.launcher)):
            sys.stderr.write(f"verlsweep: {note}\n")
        directions, objectives = create.directions_and_objectives(s.direction, hooks.objectives)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        cwd = Path(str(OmegaConf.select(self.config, "hydra.runtime.cwd", default=".")))
        storage = absolute_storage_url(str(s.storage), cwd) if s.storage else None
        params = {**hooks.params(storage, cwd), **(s.params or {})}
        lines = [f"{k}={v}" for k, v in params.items()]
        space = _space.parse(lines + list(arguments), parser)
        peer_compat.add_legacy(space, peer_compat.legacy_search_space(s.search_space, s.params))
        if not space.distributions:
            problems.append(Problem(_space.PARAMS_KEY, space.fixed or None,
                                    "at least one swept param (choice/range/interval), e.g. space=rollout_memory"))
        problems += _space.check(space, self.config, self._group_options)
        problems += hooks.check(space, s.n_jobs, schedule)
        if not hooks.dry_run:      # a dry run keeps its study in memory; its sweep dir is checked as well
            problems += storage_url.problems(storage) if storage else []
        problems += self._sweep_dir_problems()
        if problems:
            raise SearchSpaceError(problems)
        given = {a.split("=", 1)[0] for a in arguments}
        params_fixed = [f"{k}={v}" for k, v in space.fixed.items() if k in params and k not in given]
        return Search(space, directions, objectives, params_fixed, schedule)

    def _sweep_dir_problems(self) -> list[Problem]:
        """The sweep dir can be made and written; named by paths.output_root when it lies there (the
        dir's own name has the time in it)."""
        assert self.config is not None
        root = OmegaConf.select(self.config, "paths.output_root", default=None)
        if root is not None and self.sweep_dir.is_relative_to(str(root)):
            return writable_dir("paths.output_root", str(root), self.sweep_dir,
                                            "a directory for the sweep dirs (hydra.sweep.dir)")
        return writable_dir("hydra.sweep.dir", str(self.sweep_dir), self.sweep_dir, "the sweep dir")

    def _group_options(self, key: str) -> list[str]:
        """The options of config group `key` ([] when it is not one). Each question to Hydra's config
        loader copies its whole repository (a tenth of a second here), and most swept or fixed keys are
        plain config keys: a key is looked up only where every parent of its path is a group."""
        assert self.hydra_context is not None
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
        assert self.hydra_context is not None
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

        assert self.config is not None and self.hydra_context is not None
        # a job's overrides are the command line's and the params' plain values together (space.fixed):
        # composing with the params' alone would drop the command line (e.g. runner=estimate)
        cfg = (self.hydra_context.config_loader.load_sweep_config(self.config, space.overrides({}))
               if params_fixed else copy.deepcopy(self.config))
        with read_write(cfg), open_dict(cfg):
            task_overrides = list(OmegaConf.select(cfg, "hydra.overrides.task", default=[]) or [])
            del cfg["hydra"]          # the task's view, as Hydra's run_job hands it to the task
        try:
            recipe_config.apply(cfg, task_overrides)   # a recipe script's own config, the command line's knobs
        except ConfigError as exc:                     # no script, or one that never launches verl: every trial
            raise FixedConfigError(exc.problems) from None
        # a swept knob a recipe script can take neither from a variable it reads nor from "$@"
        routes = recipe_config.route_problems(cfg, list(space.distributions))
        if routes:
            raise SearchSpaceError(routes)
        problems = task.check_fixed(cfg, [n.lstrip("+~") for n in space.distributions], dry_run)
        if problems:
            raise FixedConfigError(problems)

    def _compose_trial(self, overrides: list[str]) -> DictConfig:
        """The config a job with these overrides gets, as Hydra's run_job hands it to the task."""
        assert self.config is not None and self.hydra_context is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
        recipe_config.apply(cfg, list(overrides))   # a recipe script's own config with this job's knobs
        return cfg

    def _compose_launch(self, overrides: list[str]) -> str:
        """best_launch.sh's command: a job with these overrides, prepared as a trial is."""
        from verlsweep.prepare import prepare

        # dry: paths missing here say nothing about the node; the script's variables name them there
        return prepare(self._compose_trial(overrides), dry=True, overrides=[]).launch_script()
