"""The sweep loop: ask a batch -> launch it on the configured Hydra launcher -> tell -> write outputs.

Follows the Sweeper API as Hydra's BasicSweeper uses it (hydra/_internal/core_plugins/
basic_sweeper.py: the launcher from Plugins.instance().instantiate_launcher, validate_batch_is_legal
before launching, multirun.yaml in the sweep dir) and hydra-optuna-sweeper's ask/tell batches, with
what that plugin lacks (its hydra_plugins/hydra_optuna_sweeper/_impl.py; Hydra issues #1407, #1463):
n_trials as the study's total, trials of dead sweeps re-run once, failures that never abort the
sweep, constraints, pruning through the task.
"""
from __future__ import annotations

import copy
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, List, Optional, Sequence

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hydra_plugins.verlsweep_sweeper import (_enqueue, _guide, _job_dirs, _outputs, _progress, _reconcile, _results, _reuse,
                                             _space, _study, _tracking, _view)
from hydra_plugins.verlsweep_sweeper._space import SearchSpaceError
from verlsweep.common.errors import ConfigError, Problem, full_traceback_wanted
from verlsweep.command.overrides import format_value
from verlsweep.common.labels import not_launched, path_safe, trial_label
from verlsweep.common.names import (N_TRIALS_ATTR, OBJECTIVES_ATTR, PROVEN_FIT_ATTR, RULED_OUT_ATTR, RULED_OUT_RULE_ATTR,
                                    TRACKING_ATTR)
from verlsweep.common.result import TrialResult
from verlsweep.infer.evidence import proof
from verlsweep.infer.rules import Decided
from verlsweep.infer.sampler import BoundarySampler
from verlsweep.study_link import absolute_storage_url

log = logging.getLogger(__name__)


class SweepStopped(RuntimeError):
    """max_consecutive_failures reached; the outputs so far are written."""


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
                 guide: Optional[DictConfig] = None, infer: bool = True) -> None:
        self.sampler_cfg = sampler
        self.pruner_cfg = pruner
        self.direction = direction
        self.objectives = list(objectives)
        self.storage = storage
        self.study_name = study_name
        self.n_trials = int(n_trials)
        self.n_jobs = int(n_jobs)
        self.timeout = timeout
        self.max_consecutive_failures = int(max_consecutive_failures)
        self.params = params
        self.enqueue = [OmegaConf.to_container(e, resolve=True) if OmegaConf.is_config(e) else dict(e)
                        for e in (enqueue or [])]
        self.enqueue_recipe = bool(enqueue_recipe)
        self.heartbeat_interval = int(heartbeat_interval)
        self.grace_period = grace_period
        self.long_run = long_run
        self.remeasure = bool(remeasure)
        self.infer = bool(infer)
        self.guide_top_k = int((guide or {}).get("top_k", 0) or 0)
        self.hydra_context: Optional[HydraContext] = None
        self.config: Optional[DictConfig] = None
        self.launcher = None
        self.job_idx = 0
        self._space = _space.SearchSpace()
        self._quiet: list[str] = []
        self._progress: _progress.Progress | None = None
        self._view: _view.SweepView | None = None
        self._dry_run = False
        self._home: Path | None = None     # the study's home dir (_job_dirs.home)

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
        self._quiet = _progress.quiet_logs(self.config)
        space, directions, params_fixed = self._prepare(arguments)
        self._space = space
        dry_run = self._dry_run = bool(OmegaConf.select(self.config, "dry_run", default=False))
        cwd = Path(str(OmegaConf.select(self.config, "hydra.runtime.cwd", default=".")))
        # a dry run composes commands only: an in-memory study, so nothing counts towards n_trials
        url = None if dry_run or not self.storage else absolute_storage_url(str(self.storage), cwd)
        name = self.study_name or _study.default_study_name(self.config, space)
        sampler = _study.build_sampler(self.sampler_cfg, space)
        n_trials = self.n_trials
        if isinstance(sampler, optuna.samplers.GridSampler):
            n_trials = min(n_trials, space.size() or n_trials)
        done = _study.load_complete(url, name, n_trials, space)
        if done is not None and not _reconcile.died_unreconciled(done, self._grace_s()):
            # nothing to run: no launch, no parent run, no outputs
            sys.stdout.write(_outputs.complete_message(done, n_trials, self.objectives, space.value) + "\n")
            sys.stdout.flush()
            return
        self._check_fixed(space, params_fixed, dry_run)
        study, raw_storage = self._open(space, directions, url, name, sampler, n_trials, dry_run)
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        if url:
            study.set_user_attr(_outputs.SWEEP_DIR_ATTR, str(self.sweep_dir.resolve()))
            self._home = _job_dirs.home(study, self.sweep_dir)
            if self._home != self.sweep_dir.resolve():
                log.info("verlsweep: study %s's trial dirs: %s (this sweep's new ones are linked there)",
                         name, self._home)
        if not dry_run:      # what the report and `--status` read back
            study.set_user_attr(N_TRIALS_ATTR, n_trials)
            study.set_user_attr(OBJECTIVES_ATTR, list(self.objectives))
        OmegaConf.save(self.config, self.sweep_dir / "multirun.yaml")
        # Hydra's job number (dirs are named by trial number, _job_dirs); kept growing across resumes
        self.job_idx = 1 + max((int(d.name) for d in self.sweep_dir.iterdir() if d.name.isdigit()), default=-1)
        self._progress = _progress.Progress(n_trials, {k: getattr(d, "step", None) for k, d in
                                                       space.distributions.items()}, self.objectives[0])
        me = _reconcile.SweepSession(study, raw_storage, self._grace_s(),
                                     float(OmegaConf.select(self.config, "runner.grace_period", default=30)),
                                     self._tell_recovered(study))
        me.open()
        with _study.Heartbeat(raw_storage, self.heartbeat_interval, also=me.beat) as heartbeat:
            me.settle_stale()             # a dead sweep's leftovers are stopped before any new trial
            tracking = None if dry_run else _tracking.start_parent_run(
                self.config, name, space.describe(), sampler=type(study.sampler).__name__,
                sweep_name=OmegaConf.select(self.config, "hydra.runtime.choices.space", default=None),
                session=me.label, others_alive=bool(me.others()))
            me.tracking = tracking
            parent = tracking.parent if tracking else None
            if tracking is not None and raw_storage is not None:
                study.set_user_attr(TRACKING_ATTR, _tracking.where(self.config, name))
            me.repair_runs()
            self._view = _view.SweepView(self.config, self.sweep_dir, self.objectives, self._progress, parent)
            links = self._link_overrides(name, url, parent)
            outputs = _outputs.Outputs(self.sweep_dir, self.objectives, list(space.distributions),
                                       self._compose_launch, url, space.value)
            outputs.write(study)          # the sweep dir names its study from the start
            status = "FAILED"
            try:
                self._loop(study, space, n_trials, links, outputs, started, heartbeat, me)
                status = "FINISHED"
            except KeyboardInterrupt:
                status = "KILLED"
                raise
            finally:
                # also when stopped: what was measured is on disk, in MLflow and on the terminal
                me.repair_runs()
                try:
                    best = outputs.write(study)
                    files = self._view.after_batch(study, n_trials, final=True) if not dry_run else []
                    _outputs.summary(study, self.objectives, list(space.distributions), best, self.sweep_dir,
                                     space.value, self._progress.console)
                    if files:
                        self._progress.console.print(f"report: {self.sweep_dir / 'report.html'}", highlight=False)
                except Exception as exc:  # noqa: BLE001 - never hide the exception that ended the loop
                    log.error("verlsweep: could not write the sweep outputs: %s", exc)
                _tracking.finish_parent_run(tracking, status, others_alive=me.close(status))
                if parent:
                    self._progress.console.print(_tracking.ui_hint(self.config, parent), highlight=False,
                                                 soft_wrap=True)

    def _grace_s(self) -> float:
        return float(self.grace_period or 3 * self.heartbeat_interval)

    def _tell_recovered(self, study: optuna.Study) -> Any:
        """How a trial of a dead sweep whose own files prove its outcome is told: as this sweep tells one."""
        def tell(frozen: optuna.trial.FrozenTrial, result: TrialResult) -> optuna.trial.TrialState:
            return self._tell(study, optuna.Trial(study, frozen._trial_id), None, result).state
        return tell

    # --- preparation ----------------------------------------------------------------------------------

    def _open(self, space: _space.SearchSpace, directions: list[str], url: str | None, name: str,
              sampler: optuna.samplers.BaseSampler, n_trials: int, dry_run: bool) -> tuple[optuna.Study, Any]:
        """The study (created, resumed or joined) and its raw storage, with the enqueued configs."""
        study, raw_storage = _study.open_study(url, name, directions, sampler, _study.pruner_spec(self.pruner_cfg),
                                               self.heartbeat_interval, self.grace_period, space)
        if url:
            study.set_user_attr(OBJECTIVES_ATTR, self.objectives)
        existing = len(study.get_trials(deepcopy=False))
        if existing:  # resumed or shared: do not replay the draws the seed made before
            others = _study.running_elsewhere(study, set())
            study.sampler = _study.build_sampler(self.sampler_cfg, space,
                                                 seed_offset=existing + (os.getpid() if others else 0))
        entries = _enqueue.entries(self.config, space, self.enqueue, self.enqueue_recipe)
        if not isinstance(sampler, optuna.samplers.GridSampler):   # a grid runs every config anyway
            guided, predictions = _guide.guide(self.config, space, self.guide_top_k,
                                               seed=int(self.sampler_cfg.get("seed") or 0), compose=self._compose_trial)
            entries += guided
            if predictions and isinstance(study.sampler, BoundarySampler):
                study.sampler.prior = _guide.prior(predictions, space)   # ranks the combinations it opens
        queued = _study.enqueue(study, entries, n_trials)
        log.info("verlsweep: study %s (%s), %s, %s, n_trials=%d (total, %d trial(s) in the study), n_jobs=%d, "
                 "%d config(s) enqueued", name, url or "in memory" + (" - dry run, nothing recorded" if dry_run else ""),
                 type(study.sampler).__name__, type(study.pruner).__name__, n_trials, existing, self.n_jobs, queued)
        for pname, dist in space.distributions.items():
            log.info("  %s: %s", pname, _space.describe(dist))
        return study, raw_storage

    def _check_fixed(self, space: _space.SearchSpace, params_fixed: list[str], dry_run: bool) -> None:
        """The config every trial shares (the command line and the params' plain values), checked once
        as a trial would be: a missing model or data dir stops the sweep here, not in each trial."""
        from verlsweep import task

        cfg = (self.hydra_context.config_loader.load_sweep_config(self.config, params_fixed) if params_fixed
               else copy.deepcopy(self.config))
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]          # the task's view, as Hydra's run_job hands it to the task
        problems = task.check_fixed(cfg, [n.lstrip("+~") for n in space.distributions], dry_run)
        if problems:
            raise FixedConfigError(problems)

    def _prepare(self, arguments: List[str]) -> tuple[_space.SearchSpace, list[str], list[str]]:
        """Everything that can be wrong with the sweep, found before a study or trial exists. Returns
        the space, the directions and the params' plain values the command line does not set."""
        problems: list[Problem] = []
        if self.n_trials < 1:
            problems.append(Problem("hydra.sweeper.n_trials", self.n_trials, "a positive integer"))
        if self.n_jobs < 1:
            problems.append(Problem("hydra.sweeper.n_jobs", self.n_jobs, "a positive integer"))
        directions, _ = _study.directions_and_objectives(self.direction, self.objectives)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        params = OmegaConf.to_container(self.params, resolve=True) if self.params else {}
        lines = [f"{k}={v}" for k, v in params.items()]
        space = _space.parse(lines + list(arguments), parser)
        if not space.distributions:
            problems.append(Problem(_space.PARAMS_KEY, space.fixed or None,
                                    "at least one swept param (choice/range/interval), e.g. space=rollout_memory"))
        problems += _space.check(space, self.config, self._group_options)
        if problems:
            raise SearchSpaceError(problems)
        given = {a.split("=", 1)[0] for a in arguments}
        params_fixed = [f"{k}={v}" for k, v in space.fixed.items() if k in params and k not in given]
        return space, directions, params_fixed

    def _group_options(self, key: str) -> list[str]:
        try:
            return list(self.hydra_context.config_loader.get_group_options(key.replace(".", "/")))
        except Exception:  # noqa: BLE001 - not a group
            return []

    def _link_overrides(self, name: str, url: str | None, parent: str | None) -> dict[str, Any]:
        """Overrides that tie a job to its trial (study_link.reporter_for) and sweep (MLflow parent)."""
        links: dict[str, Any] = {"trial.study_name": name}
        if url:
            links["trial.storage"] = url
        if parent:
            links[_tracking.PARENT_RUN_KEY] = parent
        return links

    def _job_overrides(self, space: _space.SearchSpace, trial: optuna.Trial, links: dict[str, Any]) -> list[str]:
        out = space.overrides(trial.params)
        # the MLflow run's name (`t07 util=0.90 tp=2 off=p,o`, + its outcome when known) and verl's
        # trainer.experiment_name say the same
        knobs = self._progress.label({k: space.value(k, v) for k, v in trial.params.items()}) if self._progress else ""
        label = {"trial.label": knobs, "trial.name": path_safe(trial_label(trial.number, None, knobs))} if knobs else {}
        for key, value in {"trial.number": trial.number, **label, **links}.items():
            plus = "" if OmegaConf.select(self.config, key, default="__missing__") != "__missing__" else "+"
            out.append(f"{plus}{key}={format_value(value)}")
        sub = _job_dirs.subdir(self.sweep_dir, trial.number, str(links.get("trial.study_name", "")))
        return out + [_job_dirs.override(sub)] + self._quiet

    def _compose_trial(self, overrides: list[str]) -> DictConfig:
        """The config a job with these overrides gets, as Hydra's run_job hands it to the task."""
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def _compose_launch(self, overrides: list[str]) -> str:
        """best_launch.sh: the trial's overrides, the long-run steps, composed and validated as a trial."""
        from verlsweep.command.compose import build_command
        from verlsweep.tracking.mlflow_runs import tracking_uri

        long = [*map(str, self.long_run.overrides), f"trial.steps={int(self.long_run.steps)}"]
        cfg = self._compose_trial([*overrides, *long])
        trial = build_command(cfg, require_paths=False)
        # paths missing here say nothing about the node: the script's variables name them there
        return trial.to_launch_script(cfg, tracking_uri(cfg))

    # --- the loop -------------------------------------------------------------------------------------

    def _timed_out(self, started: float) -> bool:
        return self.timeout is not None and time.monotonic() - started >= float(self.timeout)

    def _loop(self, study: optuna.Study, space: _space.SearchSpace, n_trials: int, links: dict[str, Any],
              outputs: _outputs.Outputs, started: float, heartbeat: _study.Heartbeat,
              me: _reconcile.SweepSession) -> None:
        failures: list[_results.Told] = []
        waited = False
        while True:
            me.settle_stale()
            left = _study.remaining(study, n_trials)
            if self._timed_out(started):
                log.warning("verlsweep: timeout of %ss reached, no new trials (%d of %d left)",
                            self.timeout, left, n_trials)
                return
            if left == 0:
                others = _study.running_elsewhere(study, set())
                if not others:
                    return
                if not waited:
                    log.info("verlsweep: all %d trials handed out; waiting for trial(s) %s of another sweep "
                             "process (a dead one's go stale after the heartbeat grace period and are re-run)",
                             n_trials, others)
                    waited = True
                time.sleep(min(self.heartbeat_interval, 5))
                continue
            waited = False
            trials = self._ask(study, space, min(self.n_jobs, left), n_trials, me)
            if not trials:
                continue
            heartbeat.add(t._trial_id for t in trials)
            try:
                told = self._run_batch(study, space, trials, links)
            finally:
                heartbeat.remove(t._trial_id for t in trials)
            for t in told:
                if t.failed:
                    failures.append(t)
                elif t.outcome != _results.NO_RESULT:
                    failures.clear()
            me.repair_runs()
            outputs.write(study)
            if not self._dry_run:          # a dry run's in-memory study has nothing to report
                self._view.after_batch(study, n_trials)
            if len(failures) >= self.max_consecutive_failures:
                raise SweepStopped(self._stop_message(failures))

    def _ask(self, study: optuna.Study, space: _space.SearchSpace, count: int, n_trials: int,
             me: _reconcile.SweepSession) -> list[optuna.Trial]:
        trials = []
        for _ in range(count):
            with _study.quiet_optuna():
                trial = study.ask(fixed_distributions=space.distributions)
            me.tag_trial(trial._trial_id)
            enqueued = {"fixed_params", "failed_trial"} & set(study._storage.get_trial_system_attrs(trial._trial_id))
            if not enqueued and _study.over_budget(study, trial.number, n_trials):
                # another sweep process took the last slot at the same moment: give it back
                study._storage.set_trial_system_attr(trial._trial_id, _study.OVER_BUDGET_ATTR, True)
                _results.tell_state(study, trial, state=optuna.trial.TrialState.FAIL)
                continue
            trials.append(trial)
        return trials

    def _run_batch(self, study: optuna.Study, space: _space.SearchSpace, trials: list[optuna.Trial],
                   links: dict[str, Any]) -> list[_results.Told]:
        told: list[_results.Told] = []
        launch, launched = [], []
        try:
            for trial in trials:
                overrides = self._job_overrides(space, trial, links)
                trial.set_user_attr(_outputs.OVERRIDES_ATTR, overrides)
                source = None if self.remeasure else _reuse.measured_match(study, trial.params, space.value,
                                                                            trial.number)
                if source is not None:
                    told.append(self._tell_reused(study, trial, source))
                    continue
                proven = proof(study.get_trials(deepcopy=False), trial.params) if self.infer else None
                if proven is not None and proven.verdict == "fail":
                    told.append(self._tell_ruled_out(study, trial, proven))
                    continue
                if proven is not None:        # launched all the same: it measures the throughput
                    trial.set_user_attr(PROVEN_FIT_ATTR, proven.trial)
                try:
                    self.validate_batch_is_legal([overrides])
                except Exception as exc:  # noqa: BLE001 - a trial that cannot compose is this trial's outcome
                    result = TrialResult("config_error", excerpt=f"{type(exc).__name__}: {exc}")
                    told.append(self._tell(study, trial, None, result))
                    continue
                launch.append(overrides)
                launched.append(trial)
                if self._home is not None:
                    _job_dirs.link(self._home, self.sweep_dir, _job_dirs.subdir_of(overrides) or str(trial.number))
            if launch:
                try:
                    returns = list(self.launcher.launch(launch, initial_job_idx=self.job_idx))
                except Exception as exc:  # noqa: BLE001 - e.g. a job submission failed: the batch's outcome
                    log.error("verlsweep: the launcher failed on this batch: %s", exc)
                    crash = TrialResult("crash", excerpt=f"launcher: {type(exc).__name__}: {exc}")
                    returns, launched_results = [], [crash] * len(launched)
                else:
                    launched_results = [None] * len(launched)
                self.job_idx += len(launch)
                for i, trial in enumerate(launched):
                    ret = returns[i] if i < len(returns) else None
                    told.append(self._tell(study, trial, ret, launched_results[i]))
        except BaseException:
            # interrupted mid-batch: fail the unfinished trials now and re-enqueue them once
            _study.abandon(study, [t for t in trials if t.number not in {x.number for x in told}])
            raise
        return told

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: Any,
              result: TrialResult | None = None, note: str = "") -> _results.Told:
        with _study.quiet_optuna():
            told = _results.tell(study, trial, ret, self.objectives, result=result)
        self._shown(trial, told, note)
        return told

    def _shown(self, trial: optuna.Trial, told: _results.Told, note: str = "") -> None:
        """The trial's line on the terminal, the same for launched, reused and ruled-out trials."""
        params = {k: self._space.value(k, v) for k, v in trial.params.items()}
        if self._progress is not None:
            self._progress.trial(trial.number, told.outcome, told.values, params,
                                 trial.user_attrs.get("duration_s"), told.excerpt, note)
        log.debug("verlsweep: trial %d %s %s %s %s", trial.number, told.outcome, told.values, params, note)

    def _tell_reused(self, study: optuna.Study, trial: optuna.Trial, source: optuna.trial.FrozenTrial) -> _results.Told:
        """A proposal this study has measured already: its result again, nothing launched
        (hydra.sweeper.remeasure=true measures again)."""
        with _study.quiet_optuna():
            told = _reuse.tell_reused(study, trial, source)
        self._shown(trial, told, not_launched(source.number, None))
        return told

    def _tell_ruled_out(self, study: optuna.Study, trial: optuna.Trial, proof: Decided) -> _results.Told:
        """A proposal a finished trial proves to fail: infeasible, nothing launched, like a planner veto."""
        trial.set_user_attr(RULED_OUT_ATTR, proof.trial)
        trial.set_user_attr(RULED_OUT_RULE_ATTR, proof.rule)
        result = TrialResult("infeasible", excerpt=f"ruled out by trial {proof.trial}: {proof.rule} "
                                                   "(verlsweep.infer.rules); nothing launched")
        return self._tell(study, trial, None, result, not_launched(None, proof.trial))

    def _stop_message(self, failures: list[_results.Told]) -> str:
        last = failures[-1]
        outcomes = ", ".join(f"{t.number}:{t.outcome}" for t in failures)
        excerpt = (last.excerpt or "").strip().splitlines()
        return (f"verlsweep stopped the sweep: {len(failures)} consecutive trials failed ({outcomes}); "
                f"hydra.sweeper.max_consecutive_failures={self.max_consecutive_failures}.\n"
                "A run of failures like this usually means a broken environment (devices, drivers, paths, "
                "a missing package), not a bad config.\n"
                f"Last failure, trial {last.number} ({last.outcome}): {excerpt[-1][:500] if excerpt else 'no excerpt'}\n"
                f"Results so far: {self.sweep_dir / _outputs.TRIALS_CSV}. Re-running the same command resumes the study.")
