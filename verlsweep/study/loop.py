"""The sweep loop: ask a batch -> run it -> tell -> write outputs, until n_trials are used.

The same loop for every app: what differs for verlsweep's own task is in its hooks
(verlsweep.study.hooks.TaskHooks, chosen once by the sweeper). What it needs of Hydra's launcher comes in
as a callable (`run_batch`: the sweeper plugin hands a batch of job overrides to the configured launcher),
so this package never imports hydra_plugins nor Hydra's launcher API.

Follows hydra-optuna-sweeper's ask/tell batches, with what that plugin lacks (its
hydra_plugins/hydra_optuna_sweeper/_impl.py; Hydra issues #1407, #1463): n_trials as the study's
total, trials of dead sweeps re-run once, failures that never abort the sweep, constraints, pruning
through the task, no config measured twice (hydra.sweeper.remeasure).
"""
from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf

from verlsweep.common import optuna_private
from verlsweep.common.labels import not_launched
from verlsweep.common.names import (
    EDGE_PROBE_METRIC,
    N_TRIALS_ATTR,
    OBJECTIVES_ATTR,
    OVER_BUDGET_ATTR,
    OVERRIDES_ATTR,
    PREDICTED_ATTR,
)
from verlsweep.common.result import TrialResult
from verlsweep.reconcile import budget, results
from verlsweep.reconcile.budget import quiet_optuna
from verlsweep.study import confirm, create, inflight, job_dirs, peer_compat, reuse
from verlsweep.study import enqueue as _enqueue
from verlsweep.study import outputs as _outputs
from verlsweep.study import progress as _progress
from verlsweep.study import session as _session
from verlsweep.study import space as _space
from verlsweep.study import view as _view
from verlsweep.study.failures import FailureWatch
from verlsweep.study.hooks import TaskHooks
from verlsweep.study.settings import Settings
from verlsweep.study.stopped import SweepInterrupted, SweepStopped
from verlsweep.study_link import absolute_storage_url

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Search:
    """What the sweeper found on the command line and in the config, checked before a study exists."""
    space: _space.SearchSpace
    directions: list[str]
    objectives: list[str]          # the TrialResult value each direction applies to
    params_fixed: list[str]        # the params' plain values the command line does not set
    schedule: str                  # async or batch (verlsweep.study.inflight.choose)


class Loop:
    def __init__(self, settings: Settings, hooks: TaskHooks, config: DictConfig, sweep_dir: Path,
                 run_batch: Callable[[list[list[str]], int], Sequence[Any]]) -> None:
        self.s = settings
        self.hooks = hooks
        self.config = config
        self.sweep_dir = sweep_dir
        self.run_batch = run_batch       # job overrides, initial_job_idx -> one JobReturn-like result per job
        self.job_idx = 0
        self.abandoned: list[int] = []      # trials Ctrl-C stopped in flight
        self._space = _space.SearchSpace()
        self._objectives: list[str] = []
        self._extend = peer_compat.extender(settings.custom_search_space)
        _progress.quiet_logs(config)
        self._progress: _progress.Progress | None = None
        self._view: _view.SweepView | None = None
        self._home: Path | None = None     # the study's home dir (job_dirs.home)

    def run(self, search: Search, started: float) -> None:
        """The sweep of `search` (checked by the sweeper), from opening its study to the final outputs."""
        s, hooks, space = self.s, self.hooks, search.space
        self._space, self._objectives = space, search.objectives
        cwd = Path(str(OmegaConf.select(self.config, "hydra.runtime.cwd", default=".")))
        # a dry run composes commands only: an in-memory study, so nothing counts towards n_trials
        url = None if hooks.dry_run or not s.storage else absolute_storage_url(str(s.storage), cwd)
        name = s.study_name or hooks.study_name(space)
        sampler_cfg = hooks.sampler(s.sampler)
        sampler = create.build_sampler(sampler_cfg, space)
        n_trials = s.n_trials
        if isinstance(sampler, optuna.samplers.GridSampler):
            n_trials = min(n_trials, space.size() or n_trials)
        done = create.load_complete(url, name, n_trials, space)
        if (done is not None and not _session.died_unreconciled(done, self._grace_s())
                and not hooks.confirmations(done)):
            # nothing to run: no launch, no parent run, no outputs
            sys.stdout.write(_outputs.complete_message(done, n_trials, search.objectives, space.value) + "\n")
            sys.stdout.flush()
            return
        hooks.before_study(space, search.params_fixed)
        study, raw_storage = self._open(search, url, name, sampler_cfg, sampler, n_trials)
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        if url:
            study.set_user_attr(_outputs.SWEEP_DIR_ATTR, str(self.sweep_dir.resolve()))
            self._home = job_dirs.home(study, self.sweep_dir)
            if self._home != self.sweep_dir.resolve():
                log.info("verlsweep: study %s's trial dirs: %s (this sweep's new ones are linked there)",
                         name, self._home)
        if not hooks.dry_run:      # what the report and `--status` read back
            study.set_user_attr(N_TRIALS_ATTR, n_trials)
            study.set_user_attr(OBJECTIVES_ATTR, list(search.objectives))
        OmegaConf.save(self.config, self.sweep_dir / "multirun.yaml")
        # Hydra's job number (dirs are named by trial number, job_dirs); kept growing across resumes
        self.job_idx = 1 + max((int(d.name) for d in self.sweep_dir.iterdir() if d.name.isdigit()), default=-1)
        self._progress = progress = _progress.Progress(n_trials, {k: getattr(d, "step", None) for k, d in
                                                                  space.distributions.items()}, search.objectives[0])
        me = _session.SweepSession(study, raw_storage, self._grace_s(),
                                   float(OmegaConf.select(self.config, "runner.grace_period", default=30)),
                                   self._tell_recovered(study))
        me.open()
        with create.Heartbeat(raw_storage, s.heartbeat_interval, also=me.beat) as heartbeat:
            me.settle_stale()             # a dead sweep's leftovers are stopped before any new trial
            parent = hooks.start(study, name, url, space, me)
            me.repair_runs()
            self._view = view = _view.SweepView(self.config, self.sweep_dir, search.objectives, progress, parent,
                                                report=hooks.report)
            outputs = _outputs.Outputs(self.sweep_dir, search.objectives, list(space.distributions), hooks.launch,
                                       url, space.value)
            outputs.write(study)          # the sweep dir names its study from the start
            status = "FAILED"
            try:
                self._loop(study, search, n_trials, outputs, started, heartbeat, me)
                self._confirm(study, space, n_trials, outputs, heartbeat, me)
                status = "FINISHED"
            except KeyboardInterrupt:
                status = "KILLED"
                raise SweepInterrupted(self.abandoned) from None
            finally:
                # also when stopped: what was measured is on disk, in MLflow and on the terminal
                me.repair_runs()
                try:
                    best = outputs.write(study)
                    files = view.after_batch(study, n_trials, final=True) if not hooks.dry_run else []
                    hooks.summary(study, best, search.objectives, space, progress.console)
                    if files:
                        progress.console.print(f"report: {self.sweep_dir / 'report.html'}", highlight=False)
                except Exception as exc:  # noqa: BLE001 - never hide the exception that ended the loop
                    log.error("verlsweep: could not write the sweep outputs: %s", exc)
                hooks.finish(status, me.close(status), progress.console)

    def _grace_s(self) -> float:
        return float(self.s.grace_period or 3 * self.s.heartbeat_interval)

    def _tell_recovered(self, study: optuna.Study) -> Any:
        """How a trial of a dead sweep whose own files prove its outcome is told: as this sweep tells one."""
        def tell(frozen: optuna.trial.FrozenTrial, result: TrialResult) -> optuna.trial.TrialState:
            return self._tell(study, optuna_private.trial_of(study, frozen), None, result).state
        return tell

    def _open(self, search: Search, url: str | None, name: str, sampler_cfg: dict[str, Any],
              sampler: optuna.samplers.BaseSampler, n_trials: int) -> tuple[optuna.Study, Any]:
        """The study (created, resumed or joined) and its raw storage, with the enqueued configs."""
        s, space = self.s, search.space
        study, raw_storage = create.open_study(url, name, search.directions, sampler, create.pruner_spec(s.pruner),
                                               s.heartbeat_interval, s.grace_period, space)
        if url:
            study.set_user_attr(OBJECTIVES_ATTR, search.objectives)
        existing = len(study.get_trials(deepcopy=False))
        if existing:  # resumed or shared: do not replay the draws the seed made before
            others = budget.running_elsewhere(study, set())
            study.sampler = create.build_sampler(sampler_cfg, space,
                                                 seed_offset=existing + (os.getpid() if others else 0))
        entries = self.hooks.enqueue(study, space, sampler_cfg, _enqueue.checked(s.enqueue, space))
        queued = create.enqueue(study, entries, n_trials)
        log.info("verlsweep: study %s (%s), %s, %s, n_trials=%d (total, %d trial(s) in the study), n_jobs=%d, "
                 "%d config(s) enqueued", name,
                 url or "in memory" + (" - dry run, nothing recorded" if self.hooks.dry_run else ""),
                 type(study.sampler).__name__, type(study.pruner).__name__, n_trials, existing, s.n_jobs, queued)
        for pname, dist in space.distributions.items():
            log.info("  %s: %s", pname, _space.describe(dist))
        return study, raw_storage

    # --- the loop -------------------------------------------------------------------------------------

    def _timed_out(self, started: float) -> bool:
        return self.s.timeout is not None and time.monotonic() - started >= float(self.s.timeout)

    def _loop(self, study: optuna.Study, search: Search, n_trials: int, outputs: _outputs.Outputs, started: float,
              heartbeat: create.Heartbeat, me: _session.SweepSession) -> None:
        space = search.space
        watch = FailureWatch(self.s.max_consecutive_failures, self.s.max_failure_rate, self.s.n_jobs,
                             swept=space.distributions)
        if search.schedule == "async":
            return self._loop_async(study, space, n_trials, outputs, started, heartbeat, me, watch)
        waited = False
        while True:
            me.settle_stale()
            left = budget.remaining(study, n_trials)
            if self._timed_out(started):
                log.warning("verlsweep: timeout of %ss reached, no new trials (%d of %d left)",
                            self.s.timeout, left, n_trials)
                return
            if left == 0:
                others = budget.running_elsewhere(study, set())
                if not others:
                    return
                if not waited:
                    log.info("verlsweep: all %d trials handed out; waiting for trial(s) %s of another sweep "
                             "process (a dead one's go stale after the heartbeat grace period and are re-run)",
                             n_trials, others)
                    waited = True
                time.sleep(min(self.s.heartbeat_interval, 5))
                continue
            waited = False
            trials = self._ask(study, space, min(self.s.n_jobs, left), n_trials, me)
            if not trials:
                continue
            heartbeat.add(optuna_private.trial_id(t) for t in trials)
            try:
                told = self._run_batch(study, space, trials)
            finally:
                heartbeat.remove(optuna_private.trial_id(t) for t in trials)
            stop = watch.told(told, batch=True)
            self._after(study, n_trials, outputs, me)
            if stop:
                raise SweepStopped(self._stop_message(watch))

    def _after(self, study: optuna.Study, n_trials: int, outputs: _outputs.Outputs, me: _session.SweepSession) -> None:
        """Outputs, progress and the parent run after trials ended."""
        me.repair_runs()
        outputs.write(study)
        if not self.hooks.dry_run and self._view is not None:   # a dry run's in-memory study: nothing to report
            self._view.after_batch(study, n_trials)

    # --- asynchronous trials (verlsweep.study.inflight): told and replaced one by one ---------------------

    def _loop_async(self, study: optuna.Study, space: _space.SearchSpace, n_trials: int, outputs: _outputs.Outputs,
                    started: float, heartbeat: create.Heartbeat, me: _session.SweepSession,
                    watch: FailureWatch) -> None:
        def left() -> int | None:
            me.settle_stale()
            if self._timed_out(started):
                log.warning("verlsweep: timeout of %ss reached, no new trials (those in flight end first)",
                            self.s.timeout)
                return None
            return budget.remaining(study, n_trials)

        def others_running() -> bool:
            if not budget.running_elsewhere(study, set()):
                return False
            time.sleep(min(self.s.heartbeat_interval, 5))
            return True

        ids = lambda trials: [optuna_private.trial_id(t) for t in trials]  # noqa: E731
        sweep = inflight.Sweep(
            left=left, ask=lambda count: self._ask(study, space, count, n_trials, me),
            prepare=lambda trial: self._job(study, space, trial),
            tell=lambda trial, ret, result: self._tell(study, trial, ret, result),
            count=watch.told,
            show=lambda: self._after(study, n_trials, outputs, me),
            others_running=others_running, watch=lambda ts: heartbeat.add(ids(ts)),
            unwatch=lambda ts: heartbeat.remove(ids(ts)),
            abandon=lambda ts: self.abandoned.extend(budget.abandon(study, ts)))
        self.job_idx = inflight.run(sweep, inflight.InFlight(self.run_batch, self.s.n_jobs, self.hooks.slot_overrides),
                                    self.job_idx)
        if watch.stopped_by:
            raise SweepStopped(self._stop_message(watch))

    def _ask(self, study: optuna.Study, space: _space.SearchSpace, count: int, n_trials: int,
             me: _session.SweepSession) -> list[optuna.Trial]:
        storage = optuna_private.storage(study)
        trials = []
        for _ in range(count):
            with quiet_optuna():
                trial = study.ask(fixed_distributions=space.distributions)
            if self._extend is not None:      # hydra.sweeper.custom_search_space suggests more params
                self._extend(self.config, trial)
            trial_id = optuna_private.trial_id(trial)
            me.tag_trial(trial_id)
            enqueued = {"fixed_params", "failed_trial"} & set(storage.get_trial_system_attrs(trial_id))
            if not enqueued and budget.over_budget(study, trial.number, n_trials):
                # another sweep process took the last slot at the same moment: give it back
                storage.set_trial_system_attr(trial_id, OVER_BUDGET_ATTR, True)
                results.tell_state(study, trial, state=optuna.trial.TrialState.FAIL)
                continue
            trials.append(trial)
        return trials

    def _run_batch(self, study: optuna.Study, space: _space.SearchSpace, trials: list[optuna.Trial]
                   ) -> list[results.Told]:
        told: list[results.Told] = []
        launch: list[list[str]] = []
        launched: list[optuna.Trial] = []
        try:
            for trial in trials:
                done, overrides = self._job(study, space, trial)
                if done is not None:
                    told.append(done)
                    continue
                assert overrides is not None        # a trial not told yet is launched with its overrides
                launch.append(overrides)
                launched.append(trial)
            if launch:
                returns: list[Any] = []
                launched_results: list[TrialResult | None] = [None] * len(launched)
                try:
                    returns = list(self.run_batch(launch, self.job_idx))
                except Exception as exc:  # noqa: BLE001 - e.g. a job submission failed: the batch's outcome
                    log.error("verlsweep: the launcher failed on this batch: %s", exc)
                    crash = TrialResult("crash", excerpt=f"launcher: {type(exc).__name__}: {exc}")
                    launched_results = [crash] * len(launched)
                self.job_idx += len(launch)
                for i, trial in enumerate(launched):
                    ret = returns[i] if i < len(returns) else None
                    told.append(self._tell(study, trial, ret, launched_results[i]))
        except BaseException:
            # interrupted mid-batch: fail the unfinished trials now and re-enqueue them once
            self.abandoned += budget.abandon(study, [t for t in trials if t.number not in {x.number for x in told}])
            raise
        return told

    def _job(self, study: optuna.Study, space: _space.SearchSpace,
             trial: optuna.Trial) -> tuple[results.Told | None, list[str] | None]:
        """The trial's job overrides, or its result when nothing is launched (reused, or decided by the hooks:
        ruled out, config_error)."""
        knobs = self._progress.label({k: space.value(k, v) for k, v in trial.params.items()}) if self._progress else ""
        overrides = self.hooks.job_overrides(trial, space, knobs)
        trial.set_user_attr(OVERRIDES_ATTR, overrides)
        overrides = overrides + self.hooks.trial_overrides     # not best_launch.sh's: that one is the whole node's
        source = None if self.s.remeasure else reuse.measured_match(study, trial.params, space.value,
                                                                     trial.number)
        if source is not None:
            return self._tell_reused(study, trial, source), None
        decided = self.hooks.decide(study, trial, overrides)
        if decided is not None:
            result, note = decided
            return self._tell(study, trial, None, result, note), None
        if self._home is not None:
            job_dirs.link(self._home, self.sweep_dir, job_dirs.subdir_of(overrides) or str(trial.number))
        return None, overrides

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: Any,
              result: TrialResult | None = None, note: str = "") -> results.Told:
        with quiet_optuna():
            told = results.tell(study, trial, ret, self._objectives, result=result, none_ok=self.hooks.none_ok)
        self._shown(trial, told, note)
        return told

    def _shown(self, trial: optuna.Trial, told: results.Told, note: str = "") -> None:
        """The trial's line on the terminal, the same for launched, reused and ruled-out trials."""
        params = {k: self._space.value(k, v) for k, v in trial.params.items()}
        if self._progress is not None:
            edge = bool((trial.user_attrs.get(PREDICTED_ATTR) or {}).get(EDGE_PROBE_METRIC))
            note = note or confirm.trial_note(trial.user_attrs)      # the long run: confirms / a risk
            self._progress.trial(trial.number, told.outcome, told.values, params,
                                 trial.user_attrs.get("duration_s"), told.excerpt, note, edge_probe=edge)
        log.debug("verlsweep: trial %d %s %s %s %s", trial.number, told.outcome, told.values, params, note)

    def _tell_reused(self, study: optuna.Study, trial: optuna.Trial, source: optuna.trial.FrozenTrial) -> results.Told:
        """A proposal this study has measured already: its result again, nothing launched
        (hydra.sweeper.remeasure=true measures again)."""
        with quiet_optuna():
            told = reuse.tell_reused(study, trial, source)
        self._shown(trial, told, not_launched(source.number, None))
        return told

    def _confirm(self, study: optuna.Study, space: _space.SearchSpace, n_trials: int, outputs: _outputs.Outputs,
                 heartbeat: create.Heartbeat, me: _session.SweepSession) -> None:
        """The long-run confirmations (verlsweep.study.confirm), one at a time, until the hooks have none."""
        while todo := self.hooks.confirmations(study):
            for confirmed in todo:
                trial, job = confirm.job(study, confirmed, self.hooks, space, self._progress)
                me.tag_trial(optuna_private.trial_id(trial))
                heartbeat.add([optuna_private.trial_id(trial)])
                ret, result = None, None
                try:
                    ret = next(iter(self.run_batch([job], self.job_idx)), None)
                except KeyboardInterrupt:
                    trial.set_user_attr("outcome", "interrupted")    # shows nothing: confirmed again later
                    results.tell_state(study, trial, state=optuna.trial.TrialState.FAIL)
                    raise
                except Exception as exc:  # noqa: BLE001 - the launcher failed: this confirmation's outcome
                    result = TrialResult("crash", excerpt=f"launcher: {exc}")
                finally:
                    heartbeat.remove([optuna_private.trial_id(trial)])
                self.job_idx += 1
                self._tell(study, trial, ret, result)
                self._after(study, n_trials, outputs, me)

    def _stop_message(self, watch: FailureWatch) -> str:
        return watch.message(self.sweep_dir / _outputs.TRIALS_CSV, bool(self.s.storage))
