"""This sweep process on its study: its session record, trials of dead sweeps settled before any new
trial starts, and every run that disagrees with its trial fixed after each batch
(verlsweep/reconcile holds the rules; this is the sweep's call site)."""
from __future__ import annotations

import logging
from typing import Any

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback

from verlsweep.common import optuna_private
from verlsweep.reconcile import check, sessions, trials
from verlsweep.reconcile.budget import STALE_RETRIES, quiet_optuna
from verlsweep.tracking.sweep_run import Tracking

log = logging.getLogger(__name__)


def died_unreconciled(study: optuna.Study, grace_s: float) -> bool:
    """A sweep process on the study died without ending (its parent run may be RUNNING, its outputs
    half written): even a complete study then gets one sweep that reconciles it."""
    return any(not s.ended and not sessions.alive(s, grace_s)
               for s in sessions.all_of(optuna_private.storage(study), optuna_private.study_id(study)).values())


class SweepSession:
    def __init__(self, study: optuna.Study, storage: Any, grace_s: float, stop_grace_s: float,
                 tell: trials.Tell) -> None:
        self.study = study
        self.storage = storage            # the RDB storage; None for an in-memory (dry-run) study
        self.grace_s = grace_s            # heartbeat grace: a sweep on another host silent this long is dead
        self.stop_grace_s = stop_grace_s  # runner.grace_period: SIGTERM -> SIGKILL for a dead sweep's processes
        self.tell = tell
        self.session = sessions.new() if storage is not None else None
        self.tracking: Tracking | None = None
        with quiet_optuna():
            self.retry = RetryHeartbeatStaleTrialCallback(max_retry=STALE_RETRIES)
        self._warned: set[str] = set()
        self._study_id = optuna_private.study_id(study)

    @property
    def label(self) -> str:
        return self.session.label() if self.session else "an in-memory sweep"

    def open(self) -> None:
        if self.session is not None:
            sessions.save(self.storage, self._study_id, self.session)

    def beat(self) -> None:
        if self.session is not None:
            sessions.beat(self.storage, self._study_id, self.session)

    def others(self) -> list[sessions.Session]:
        """Other sweep processes on the study that are alive now."""
        if self.session is None:
            return []
        return sessions.live(self.storage, self._study_id, self.grace_s, besides=self.session.id)

    def tag_trial(self, trial_id: int) -> None:
        if self.session is not None:
            optuna_private.storage(self.study).set_trial_system_attr(trial_id, sessions.TRIAL_ATTR, self.session.id)

    def settle_stale(self) -> list[trials.Settled]:
        """Trials of dead sweeps: processes stopped, outcome recorded. Logged before any new trial."""
        if self.session is None:
            return []
        done = []
        for t in trials.stale(self.study, self.grace_s):
            with quiet_optuna():
                settled = trials.settle(self.study, t, stop_grace_s=self.stop_grace_s, tell=self.tell,
                                         retry=self.retry)
            if settled is not None:
                done.append(settled)
                stopped = f", {len(settled.stopped)} leftover process(es) stopped" if settled.stopped else ""
                log.warning("verlsweep: trial %d of a sweep process that died: %s %s%s (%s)", settled.number,
                            settled.state.name, settled.outcome, stopped, settled.proof)
        return done

    def repair_runs(self) -> None:
        """End or record every MLflow run that disagrees with its trial, except other live sweeps' trials."""
        if self.tracking is None:
            return
        try:
            skip = {s.id for s in self.others()}
            for finding in check.run_findings(self.study, self.tracking, skip_sessions=skip):
                if finding.fix is not None:
                    finding.fix()
                elif finding.what not in self._warned:
                    self._warned.add(finding.what)
                    log.warning("verlsweep: %s", finding.what)
        except Exception as exc:  # noqa: BLE001 - the next batch (or `verlsweep.report --repair`) retries
            log.warning("verlsweep: could not reconcile the MLflow runs of study %s: %s", self.study.study_name, exc)

    def bury_dead(self) -> None:
        """Mark sessions found dead as ended (KILLED) once their trials and runs are reconciled, so a
        re-run of a complete study knows there is nothing left to reconcile."""
        if self.session is None:
            return
        for other in sessions.all_of(self.storage, self._study_id).values():
            if other.id != self.session.id and not other.ended and not sessions.alive(other, self.grace_s):
                other.ended = "KILLED"
                try:
                    sessions.save(self.storage, self._study_id, other)
                except Exception as exc:  # noqa: BLE001 - only costs one more reconciling re-run
                    log.debug("could not record %s as ended: %s", other.label(), exc)

    def close(self, status: str) -> bool:
        """Record the session's end; True while another sweep process still works on the study."""
        if self.session is None:
            return False
        self.bury_dead()
        self.session.ended = status
        try:
            sessions.save(self.storage, self._study_id, self.session)
        except Exception as exc:  # noqa: BLE001 - then it counts as dead once its pid is gone
            log.debug("could not record the end of %s: %s", self.label, exc)
        return bool(self.others())
