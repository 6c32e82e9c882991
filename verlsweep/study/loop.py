"""The sweep loop: ask a batch -> run it -> tell -> write outputs, until n_trials are used.

What it needs of Hydra comes in as callables (`Hydra`): running a batch of jobs (the sweeper plugin
hands it to the configured Hydra launcher), checking and composing a job's config. So this package
never imports hydra_plugins nor Hydra's launcher API; hydra_plugins/verlsweep_sweeper/_impl.py is the
glue that builds those callables.

Follows hydra-optuna-sweeper's ask/tell batches, with what that plugin lacks (its
hydra_plugins/hydra_optuna_sweeper/_impl.py; Hydra issues #1407, #1463): n_trials as the study's
total, trials of dead sweeps re-run once, failures that never abort the sweep, constraints, pruning
through the task.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import optuna
from omegaconf import DictConfig, OmegaConf

from verlsweep.command.overrides import format_value
from verlsweep.common import optuna_private
from verlsweep.common.labels import not_launched, path_safe, trial_label
from verlsweep.common.names import (EDGE_PROBE_METRIC, N_TRIALS_ATTR, OBJECTIVES_ATTR, OVER_BUDGET_ATTR, OVERRIDES_ATTR,
                                    PREDICTED_ATTR, PROVEN_FIT_ATTR, RULED_OUT_ATTR, RULED_OUT_RULE_ATTR,
                                    TRACKING_ATTR)
from verlsweep.common.result import TrialResult
from verlsweep.proofs.evidence import proof
from verlsweep.proofs.rules import Decided
from verlsweep.proofs.sampler import BoundarySampler
from verlsweep.record import budget, results
from verlsweep.record.budget import quiet_optuna
from verlsweep.study import (create, enqueue as _enqueue, guide as _guide, job_dirs, outputs as _outputs,
                             progress as _progress, reuse, session as _session, space as _space, view as _view)
from verlsweep.study import app, chain, inflight, peer_compat
from verlsweep.study.failures import FailureWatch
from verlsweep.study_link import absolute_storage_url
from verlsweep.tracking import sweep_run

log = logging.getLogger(__name__)


class SweepStopped(RuntimeError):
    """max_consecutive_failures reached; the outputs so far are written."""


@dataclass
class Settings:
    """hydra.sweeper's settings (hydra_plugins/verlsweep_sweeper/config.py VerlSweepSweeperConf says
    what each means), as the sweep reads them."""
    sampler: DictConfig
    pruner: DictConfig
    objectives: list[str]
    storage: Optional[str]
    study_name: Optional[str]
    n_trials: int
    n_jobs: int
    timeout: Optional[float]
    max_consecutive_failures: int
    enqueue: list[dict[str, Any]]
    enqueue_recipe: Optional[bool]        # None: our own task's recipe only (verlsweep.study.app)
    heartbeat_interval: int
    grace_period: Optional[int]
    remeasure: bool
    guide_top_k: int
    infer: bool
    max_failure_rate: Optional[float] = None      # hydra-optuna-sweeper's keys (verlsweep.study.peer_compat)
    custom_search_space: Optional[str] = None
    report: bool = True              # report.html and plots/ (our own task only)
    schedule: str = "batch"          # or "async" (verlsweep.study.inflight.choose picked it)
    # devices_per_trial (verlsweep.study.subsets): every trial's overrides, and each device group's
    trial_overrides: list[str] = field(default_factory=list)
    slot_overrides: list[list[str]] = field(default_factory=list)
    chained_from: Optional[dict[str, Any]] = None    # hydra.sweeper.from_study's Link (verlsweep.study.chain)


@dataclass
class Hydra:
    """What the loop asks of Hydra; the sweeper plugin (hydra_plugins/verlsweep_sweeper/_impl.py) gives it.

    run_batch(job overrides, initial_job_idx) -> one JobReturn-like result per job (Hydra's launcher)
    validate(overrides) raises when a job with these overrides cannot compose (the trial's config_error)
    compose_trial(overrides) -> the config a job with these overrides gets (the planner guide's)
    compose_launch(overrides) -> best_launch.sh's command
    check_fixed(space, params_fixed, dry_run) raises when every trial would fail the same way
    """
    run_batch: Callable[[list[list[str]], int], Sequence[Any]]
    validate: Callable[[list[str]], None]
    compose_trial: Callable[[list[str]], DictConfig]
    compose_launch: Callable[[list[str]], str]
    check_fixed: Callable[[_space.SearchSpace, list[str], bool], None]


def compose_shape(overrides: Sequence[str], choices: Mapping[str, Any]) -> tuple[str, ...]:
    """What decides whether a job's overrides compose: the keys, and the values of config groups
    (`choices`: hydra.runtime.choices), of added or deleted keys (+/~) and of Hydra's own typed nodes
    (but its job dir). Another value of an existing plain key composes as the first did: space.check
    found every swept key in the config, and a YAML node takes any value. So a trial composes before
    its launch (a compose error is its config_error, not the batch's crash) only when no earlier
    trial of the sweep composed with its shape: a Hydra compose costs seconds, as much as a
    runner=estimate trial."""
    out = []
    for item in overrides:
        key = item.split("=", 1)[0]
        plain = key.split("@", 1)[0]
        by_value = (plain.startswith(("+", "~")) or plain in choices
                    or (plain.startswith("hydra.") and plain != job_dirs.SUBDIR_KEY))
        out.append(item if by_value else key)
    return tuple(out)


class Loop:
    def __init__(self, settings: Settings, config: DictConfig, sweep_dir: Path, hydra: Hydra) -> None:
        self.s = settings
        self.config = config
        self.sweep_dir = sweep_dir
        self.hydra = hydra
        self.job_idx = 0
        self._space = _space.SearchSpace()
        # another app gets none of our task's verl machinery, nor anything in its jobs' config
        self.own = app.is_own_task(config)
        self._extend = peer_compat.extender(settings.custom_search_space)
        quiet = _progress.quiet_logs(config)
        self._quiet = quiet if self.own else []
        self._progress: _progress.Progress | None = None
        self._view: _view.SweepView | None = None
        self._dry_run = False
        self._home: Path | None = None     # the study's home dir (job_dirs.home)
        self._composed: set[tuple[str, ...]] = set()    # override shapes a trial composed with (compose_shape)

    def run(self, space: _space.SearchSpace, directions: list[str], params_fixed: list[str], started: float) -> None:
        """The sweep of `space` (checked by the sweeper: verlsweep.study.space.check), from opening its
        study to the final outputs."""
        s = self.s
        self._space = space
        dry_run = self._dry_run = self.own and bool(OmegaConf.select(self.config, "dry_run", default=False))
        cwd = Path(str(OmegaConf.select(self.config, "hydra.runtime.cwd", default=".")))
        # a dry run composes commands only: an in-memory study, so nothing counts towards n_trials
        url = None if dry_run or not s.storage else absolute_storage_url(str(s.storage), cwd)
        name = s.study_name or (create.default_study_name if self.own else app.study_name)(self.config, space)
        s.sampler = peer_compat.sampler(s.sampler, self.own)
        sampler = create.build_sampler(s.sampler, space)
        n_trials = s.n_trials
        if isinstance(sampler, optuna.samplers.GridSampler):
            n_trials = min(n_trials, space.size() or n_trials)
        done = create.load_complete(url, name, n_trials, space)
        if done is not None and not _session.died_unreconciled(done, self._grace_s()):
            # nothing to run: no launch, no parent run, no outputs
            sys.stdout.write(_outputs.complete_message(done, n_trials, s.objectives, space.value) + "\n")
            sys.stdout.flush()
            return
        if self.own:
            self.hydra.check_fixed(space, params_fixed, dry_run)
        study, raw_storage = self._open(space, directions, url, name, sampler, n_trials, dry_run)
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        if url:
            study.set_user_attr(_outputs.SWEEP_DIR_ATTR, str(self.sweep_dir.resolve()))
            self._home = job_dirs.home(study, self.sweep_dir)
            if self._home != self.sweep_dir.resolve():
                log.info("verlsweep: study %s's trial dirs: %s (this sweep's new ones are linked there)",
                         name, self._home)
        if not dry_run:      # what the report and `--status` read back
            study.set_user_attr(N_TRIALS_ATTR, n_trials)
            study.set_user_attr(OBJECTIVES_ATTR, list(s.objectives))
        OmegaConf.save(self.config, self.sweep_dir / "multirun.yaml")
        # Hydra's job number (dirs are named by trial number, job_dirs); kept growing across resumes
        self.job_idx = 1 + max((int(d.name) for d in self.sweep_dir.iterdir() if d.name.isdigit()), default=-1)
        self._progress = _progress.Progress(n_trials, {k: getattr(d, "step", None) for k, d in
                                                       space.distributions.items()}, s.objectives[0])
        me = _session.SweepSession(study, raw_storage, self._grace_s(),
                                   float(OmegaConf.select(self.config, "runner.grace_period", default=30)),
                                   self._tell_recovered(study))
        me.open()
        with create.Heartbeat(raw_storage, s.heartbeat_interval, also=me.beat) as heartbeat:
            me.settle_stale()             # a dead sweep's leftovers are stopped before any new trial
            tracking = None if dry_run or not self.own else sweep_run.open_sweep_run(
                self.config, name, space.describe(), sampler=type(study.sampler).__name__,
                sweep_name=OmegaConf.select(self.config, "hydra.runtime.choices.space", default=None),
                session=me.label, others_alive=bool(me.others()))
            me.tracking = tracking
            parent = tracking.parent if tracking else None
            if tracking is not None and raw_storage is not None:
                study.set_user_attr(TRACKING_ATTR, sweep_run.where(self.config, name))
            if not dry_run:
                chain.record(study, s.chained_from, parent, self.config)
            me.repair_runs()
            self._view = _view.SweepView(self.config, self.sweep_dir, s.objectives, self._progress, parent,
                                         report=self.own and s.report)
            links = self._link_overrides(name, url, parent) if self.own else {}
            outputs = _outputs.Outputs(self.sweep_dir, s.objectives, list(space.distributions),
                                       self.hydra.compose_launch if self.own else None, url, space.value)
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
                    _outputs.summary(study, s.objectives, list(space.distributions), best, self.sweep_dir,
                                     space.value, self._progress.console, verl=self.own)
                    peer_compat.write_results(study, best, self.sweep_dir, space.value, exact=not self.own)
                    if files:
                        self._progress.console.print(f"report: {self.sweep_dir / 'report.html'}", highlight=False)
                except Exception as exc:  # noqa: BLE001 - never hide the exception that ended the loop
                    log.error("verlsweep: could not write the sweep outputs: %s", exc)
                sweep_run.close_sweep_run(tracking, status, others_alive=me.close(status))
                if parent:
                    self._progress.console.print(sweep_run.ui_hint(self.config, parent), highlight=False,
                                                 soft_wrap=True)

    def _grace_s(self) -> float:
        return float(self.s.grace_period or 3 * self.s.heartbeat_interval)

    def _tell_recovered(self, study: optuna.Study) -> Any:
        """How a trial of a dead sweep whose own files prove its outcome is told: as this sweep tells one."""
        def tell(frozen: optuna.trial.FrozenTrial, result: TrialResult) -> optuna.trial.TrialState:
            return self._tell(study, optuna_private.trial_of(study, frozen), None, result).state
        return tell

    def _open(self, space: _space.SearchSpace, directions: list[str], url: str | None, name: str,
              sampler: optuna.samplers.BaseSampler, n_trials: int, dry_run: bool) -> tuple[optuna.Study, Any]:
        """The study (created, resumed or joined) and its raw storage, with the enqueued configs."""
        s = self.s
        study, raw_storage = create.open_study(url, name, directions, sampler, create.pruner_spec(s.pruner),
                                               s.heartbeat_interval, s.grace_period, space)
        if url:
            study.set_user_attr(OBJECTIVES_ATTR, s.objectives)
        existing = len(study.get_trials(deepcopy=False))
        if existing:  # resumed or shared: do not replay the draws the seed made before
            others = budget.running_elsewhere(study, set())
            study.sampler = create.build_sampler(s.sampler, space,
                                                 seed_offset=existing + (os.getpid() if others else 0))
        entries = _enqueue.entries(self.config, space, s.enqueue,
                                   self.own if s.enqueue_recipe is None else s.enqueue_recipe)
        if self.own and not isinstance(sampler, optuna.samplers.GridSampler):   # a grid runs every config anyway
            guided, predictions = _guide.guide(self.config, space, s.guide_top_k, seed=int(s.sampler.get("seed") or 0),
                                               compose=lambda o: self.hydra.compose_trial([*o, *s.trial_overrides]))
            entries += guided
            if predictions and isinstance(study.sampler, BoundarySampler):
                study.sampler.prior = _guide.prior(predictions, space)   # ranks the combinations it opens
        queued = create.enqueue(study, entries, n_trials)
        log.info("verlsweep: study %s (%s), %s, %s, n_trials=%d (total, %d trial(s) in the study), n_jobs=%d, "
                 "%d config(s) enqueued", name, url or "in memory" + (" - dry run, nothing recorded" if dry_run else ""),
                 type(study.sampler).__name__, type(study.pruner).__name__, n_trials, existing, s.n_jobs, queued)
        for pname, dist in space.distributions.items():
            log.info("  %s: %s", pname, _space.describe(dist))
        return study, raw_storage

    def _link_overrides(self, name: str, url: str | None, parent: str | None) -> dict[str, Any]:
        """Overrides that tie a job to its trial (study_link.reporter_for) and sweep (MLflow parent)."""
        links: dict[str, Any] = {"trial.study_name": name}
        if url:
            links["trial.storage"] = url
        if parent:
            links[sweep_run.PARENT_RUN_KEY] = parent
        return links

    def _job_overrides(self, space: _space.SearchSpace, trial: optuna.Trial, links: dict[str, Any]) -> list[str]:
        out = space.overrides(trial.params)
        if not self.own:        # only the trial's params (and its Hydra job dir) reach another app
            return out + [job_dirs.override(job_dirs.subdir(self.sweep_dir, trial.number, ""))]
        # the MLflow run's name (`t07 util=0.90 tp=2 off=p,o`, + its outcome when known) and verl's
        # trainer.experiment_name say the same
        knobs = self._progress.label({k: space.value(k, v) for k, v in trial.params.items()}) if self._progress else ""
        label = {"trial.label": knobs, "trial.name": path_safe(trial_label(trial.number, None, knobs))} if knobs else {}
        for key, value in {"trial.number": trial.number, **label, **links}.items():
            plus = "" if OmegaConf.select(self.config, key, default="__missing__") != "__missing__" else "+"
            out.append(f"{plus}{key}={format_value(value)}")
        sub = job_dirs.subdir(self.sweep_dir, trial.number, str(links.get("trial.study_name", "")))
        return out + [job_dirs.override(sub)] + self._quiet

    # --- the loop -------------------------------------------------------------------------------------

    def _timed_out(self, started: float) -> bool:
        return self.s.timeout is not None and time.monotonic() - started >= float(self.s.timeout)

    def _loop(self, study: optuna.Study, space: _space.SearchSpace, n_trials: int, links: dict[str, Any],
              outputs: _outputs.Outputs, started: float, heartbeat: create.Heartbeat,
              me: _session.SweepSession) -> None:
        watch = FailureWatch(self.s.max_consecutive_failures, self.s.max_failure_rate, self.s.n_jobs,
                             swept=space.distributions)
        if self.s.schedule == "async":
            return self._loop_async(study, space, n_trials, links, outputs, started, heartbeat, me, watch)
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
                told = self._run_batch(study, space, trials, links)
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
        if not self._dry_run:          # a dry run's in-memory study has nothing to report
            self._view.after_batch(study, n_trials)

    # --- asynchronous trials (verlsweep.study.inflight): told and replaced one by one ---------------------

    def _loop_async(self, study: optuna.Study, space: _space.SearchSpace, n_trials: int, links: dict[str, Any],
                    outputs: _outputs.Outputs, started: float, heartbeat: create.Heartbeat,
                    me: _session.SweepSession, watch: FailureWatch) -> None:
        def left() -> Optional[int]:
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
            prepare=lambda trial: self._prepare(study, space, trial, links),
            tell=lambda trial, ret, result: self._tell(study, trial, ret, result),
            count=watch.told,
            show=lambda: self._after(study, n_trials, outputs, me),
            others_running=others_running, watch=lambda ts: heartbeat.add(ids(ts)),
            unwatch=lambda ts: heartbeat.remove(ids(ts)), abandon=lambda ts: budget.abandon(study, ts))
        self.job_idx = inflight.run(sweep, inflight.InFlight(self.hydra.run_batch, self.s.n_jobs,
                                                                 self.s.slot_overrides), self.job_idx)
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

    def _run_batch(self, study: optuna.Study, space: _space.SearchSpace, trials: list[optuna.Trial],
                   links: dict[str, Any]) -> list[results.Told]:
        told: list[results.Told] = []
        launch, launched = [], []
        try:
            for trial in trials:
                done, overrides = self._prepare(study, space, trial, links)
                if done is not None:
                    told.append(done)
                    continue
                launch.append(overrides)
                launched.append(trial)
            if launch:
                try:
                    returns = list(self.hydra.run_batch(launch, self.job_idx))
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
            budget.abandon(study, [t for t in trials if t.number not in {x.number for x in told}])
            raise
        return told

    def _prepare(self, study: optuna.Study, space: _space.SearchSpace, trial: optuna.Trial,
                 links: dict[str, Any]) -> tuple[Optional[results.Told], Optional[list[str]]]:
        """The trial's job overrides, or its result when nothing is launched (reused, ruled out, config_error)."""
        overrides = self._job_overrides(space, trial, links)
        trial.set_user_attr(OVERRIDES_ATTR, overrides)
        overrides = overrides + self.s.trial_overrides      # not best_launch.sh's: that one is the whole node's
        source = None if self.s.remeasure else reuse.measured_match(study, trial.params, space.value,
                                                                     trial.number)
        if source is not None:
            return self._tell_reused(study, trial, source), None
        proven = proof(study.get_trials(deepcopy=False), trial.params) if self.s.infer and self.own else None
        if proven is not None and proven.verdict == "fail":
            return self._tell_ruled_out(study, trial, proven), None
        if proven is not None:        # launched all the same: it measures the throughput
            trial.set_user_attr(PROVEN_FIT_ATTR, proven.trial)
        try:
            if self.own:      # another app's job composes once, in the launcher (as with the peer)
                shape = compose_shape(overrides, _space.group_choices(self.config))
                if shape not in self._composed:
                    self.hydra.validate(overrides)
                    self._composed.add(shape)
        except Exception as exc:  # noqa: BLE001 - a trial that cannot compose is this trial's outcome
            result = TrialResult("config_error", excerpt=f"{type(exc).__name__}: {exc}")
            return self._tell(study, trial, None, result), None
        if self._home is not None:
            job_dirs.link(self._home, self.sweep_dir, job_dirs.subdir_of(overrides) or str(trial.number))
        return None, overrides

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: Any,
              result: TrialResult | None = None, note: str = "") -> results.Told:
        with quiet_optuna():
            told = results.tell(study, trial, ret, self.s.objectives, result=result, none_ok=self.own)
        self._shown(trial, told, note)
        return told

    def _shown(self, trial: optuna.Trial, told: results.Told, note: str = "") -> None:
        """The trial's line on the terminal, the same for launched, reused and ruled-out trials."""
        params = {k: self._space.value(k, v) for k, v in trial.params.items()}
        if self._progress is not None:
            edge = bool((trial.user_attrs.get(PREDICTED_ATTR) or {}).get(EDGE_PROBE_METRIC))
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

    def _tell_ruled_out(self, study: optuna.Study, trial: optuna.Trial, proof: Decided) -> results.Told:
        """A proposal a finished trial proves to fail: infeasible, nothing launched, like a planner veto."""
        trial.set_user_attr(RULED_OUT_ATTR, proof.trial)
        trial.set_user_attr(RULED_OUT_RULE_ATTR, proof.rule)
        result = TrialResult("infeasible", excerpt=f"ruled out by trial {proof.trial}: {proof.rule} "
                                                   "(verlsweep.proofs.rules); nothing launched")
        return self._tell(study, trial, None, result, not_launched(None, proof.trial))

    def _stop_message(self, watch: FailureWatch) -> str:
        return watch.message(self.sweep_dir / _outputs.TRIALS_CSV, bool(self.s.storage))
