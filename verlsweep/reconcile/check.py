"""Where Optuna, MLflow and the sweep dir disagree about a study, and the fix for each.

The rules (one truth per trial):

    Optuna trial                         its one MLflow child run (tag trial.number + sweep.study)
    COMPLETE                             FINISHED
    COMPLETE, constraint violated (oom)  FAILED
    PRUNED                               KILLED
    FAIL                                 FAILED or KILLED (status_for(outcome))
    RUNNING of a dead sweep              -> settled first (verlsweep.reconcile.trials)

Every run carries `trial.outcome`. The study has one parent run (verlsweep.tracking.study_runs); it
is RUNNING only while a sweep session on the study is alive. trials.csv lists the study's trials with
their state and outcome. Trials a live sweep is running, WAITING ones and ones handed back over
budget have no say yet.
"""
from __future__ import annotations

import csv
import logging
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common import optuna_private
from verlsweep.common.labels import not_launched, trial_label
from verlsweep.common.names import (
    OVER_BUDGET_ATTR,
    OVERRIDES_ATTR,
    REUSED_FROM_ATTR,
    RULED_OUT_ATTR,
    RULED_OUT_RULE_ATTR,
)
from verlsweep.reconcile import sessions
from verlsweep.reconcile import trials as stale_trials
from verlsweep.tracking import study_runs
from verlsweep.tracking.mlflow_runs import status_for
from verlsweep.tracking.sweep_run import Tracking

log = logging.getLogger("verlsweep.reconcile")

TRIALS_CSV = "trials.csv"
_MEASURED = ("objective", "peak_memory_gb")      # user attrs the sweeper records, metrics the task logs


@dataclass
class Finding:
    what: str
    fix: Callable[[], Any] | None = None       # None: needs a person (e.g. two runs for one trial)


def outcome(t: FrozenTrial) -> str:
    return str(t.user_attrs.get("outcome") or ("interrupted" if t.state == TrialState.FAIL else t.state.name.lower()))


def expected_status(t: FrozenTrial) -> tuple[str, ...]:
    """The MLflow statuses that agree with a finished trial, the one to set first."""
    if t.state == TrialState.COMPLETE:
        return ("FAILED",) if any(v > 0 for v in t.constraints.values()) else ("FINISHED",)
    if t.state == TrialState.PRUNED:
        return ("KILLED",)
    preferred = status_for(outcome(t))
    if preferred == "FINISHED":
        return ("FAILED", "KILLED")
    return (preferred, "FAILED" if preferred == "KILLED" else "KILLED")


def counted(study: optuna.Study) -> list[FrozenTrial]:
    """Finished trials that must have a run: not WAITING/RUNNING, not handed back over budget."""
    return [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()
            and not t.system_attrs.get(OVER_BUDGET_ATTR)]


def run_findings(study: optuna.Study, tracking: Tracking,
                 skip_sessions: AbstractSet[str] = frozenset()) -> list[Finding]:
    """Disagreements between the study's finished trials and their MLflow runs; trials asked by the
    sessions in `skip_sessions` (other live sweep processes) are theirs to record and left alone."""
    client, exp = tracking.client, tracking.experiment_id
    if exp is None:
        return [Finding(f"trial {t.number} has no MLflow run (no experiment for the study)") for t in counted(study)]
    name = study.study_name
    runs = study_runs.children(client, exp, name)
    out: list[Finding] = []
    for t in counted(study):
        if t.system_attrs.get(sessions.TRIAL_ATTR) in skip_sessions:
            continue
        mine = runs.get(t.number, [])
        want = expected_status(t)
        said = outcome(t)
        if not mine:
            out.append(Finding(f"trial {t.number} ({t.state.name} {said}) has no MLflow run",
                               _fix_missing(client, exp, name, t, tracking.parent, want[0], said)))
        elif len(mine) > 1:
            ids = ", ".join(f"{r.info.run_id} {r.info.status}" for r in mine)
            out.append(Finding(f"trial {t.number} has {len(mine)} MLflow runs ({ids})"))
        else:
            run = mine[0]
            tag = run.data.tags.get(study_runs.OUTCOME_TAG)
            if run.info.status not in want or tag in (None, "", "running"):
                out.append(Finding(f"trial {t.number} is {t.state.name} ({said}) but its MLflow run {run.info.run_id} "
                                   f"is {run.info.status} (trial.outcome={tag})",
                                   _fix_end(client, run, want, said, t)))
    for number in sorted(set(runs) - {t.number for t in study.get_trials(deepcopy=False)}):
        out.append(Finding(f"MLflow run(s) {[r.info.run_id for r in runs[number]]} name trial {number}, "
                           "which the study does not have"))
    return out


def job_label(t: FrozenTrial) -> str | None:
    """The knobs part of the run name the trial's job was given (`trial.label=...`), if any."""
    for item in t.user_attrs.get(OVERRIDES_ATTR) or []:
        key, _, value = str(item).lstrip("+").partition("=")
        if key == "trial.label":
            return value.strip("'\"") or None
    return None


def _fix_missing(client: Any, exp: str, name: str, t: FrozenTrial, parent: str | None, status: str,
                 said: str) -> Callable[[], Any]:
    def fix() -> None:
        source = t.user_attrs.get(REUSED_FROM_ATTR)
        proof = t.user_attrs.get(RULED_OUT_ATTR)
        tags, shown = {}, said
        if source is not None:
            shown = not_launched(source, None)
            # launched nothing: the run says whose measurement it repeats and carries its numbers
            reason = f"reuses trial {source}'s measurement; nothing launched (hydra.sweeper.remeasure=false)"
            tags = {study_runs.REUSED_FROM_TAG: str(source)}
        elif proof is not None:
            shown = not_launched(None, proof)
            reason = (f"ruled out by trial {proof}: {t.user_attrs.get(RULED_OUT_RULE_ATTR)} (verlsweep.proofs.rules); "
                      "nothing launched (study.proofs=false launches it)")
            tags = {study_runs.RULED_OUT_TAG: str(proof)}
        else:
            reason = str(t.user_attrs.get("excerpt") or "recorded by verlsweep: the trial never created a run")
        params = {k: v for k, v in t.params.items()}
        label = job_label(t)
        run_id = study_runs.record_trial(client, exp, name, t.number, parent, said, reason, status, params,
                                         run_name=trial_label(t.number, shown, label), tags=tags, label=label)
        study_runs.log_measurements(client, run_id, {k: t.user_attrs.get(k) for k in _MEASURED}, said)
        # a reused or ruled-out trial never launches: its run is recorded here by design, not repaired
        (log.debug if source is not None or proof is not None else log.info)(
            "verlsweep: trial %d recorded as MLflow run %s (%s, %s)", t.number, run_id, said, status)
    return fix


def _fix_end(client: Any, run: Any, want: tuple[str, ...], said: str, t: FrozenTrial) -> Callable[[], Any]:
    def fix() -> None:
        if run.info.status == "RUNNING":
            # its sweep died before the task ended the run: the measurement the study holds goes with it
            study_runs.log_measurements(client, run.info.run_id, {k: t.user_attrs.get(k) for k in _MEASURED},
                                        outcome(t))
        tag = run.data.tags.get(study_runs.OUTCOME_TAG)
        tags = {} if tag not in (None, "", "running") else {study_runs.OUTCOME_TAG: said}
        if tags and said == stale_trials.ORPHANED:
            tags[study_runs.REASON_TAG] = "its sweep process died; a later sweep stopped what was left"
        status = run.info.status if run.info.status in want else want[0]
        study_runs.end_run(client, run.info.run_id, status, tags)
        log.info("verlsweep: MLflow run %s of trial %s ended %s (trial.outcome=%s)", run.info.run_id,
                 run.data.tags.get(study_runs.NUMBER_TAG), status, tags.get(study_runs.OUTCOME_TAG, tag))
    return fix


def parent_findings(study: optuna.Study, tracking: Tracking, grace_s: float, found_by: str) -> list[Finding]:
    """More than one parent, or a parent left RUNNING by sweeps that are all dead."""
    if tracking.experiment_id is None:
        return []
    found = study_runs.parents(tracking.client, tracking.experiment_id, study.study_name)
    out = []
    if len(found) > 1:
        out.append(Finding(f"study {study.study_name} has {len(found)} parent runs: "
                           f"{', '.join(r.info.run_id for r in found)}"))
    alive = sessions.live(optuna_private.storage(study), optuna_private.study_id(study), grace_s)
    for run in found:
        if run.info.status == "RUNNING" and not alive:
            def fix(run_id: str = run.info.run_id) -> None:
                study_runs.end_run(tracking.client, run_id, "KILLED", {"sweep.ended_by": found_by})
            out.append(Finding(f"parent run {run.info.run_id} is RUNNING but no sweep process of the study is alive",
                               fix))
    return out


def csv_findings(study: optuna.Study, sweep_dir: Path, rewrite: Callable[[], Any] | None) -> list[Finding]:
    """trials.csv against the study: the same trials, states and outcomes."""
    path = sweep_dir / TRIALS_CSV
    want = {(str(t.number), t.state.name, outcome(t)) for t in study.get_trials(deepcopy=False)
            if not t.system_attrs.get(OVER_BUDGET_ATTR)}
    try:
        with open(path) as f:
            have = {(r["number"], r["state"], r["outcome"]) for r in csv.DictReader(f)}
    except (OSError, KeyError):
        return [Finding(f"{path} is missing or unreadable", rewrite)]
    if have == want:
        return []
    diff = sorted(want ^ have)[:5]
    return [Finding(f"{path} disagrees with the study ({len(want ^ have)} row(s) differ, e.g. {diff})", rewrite)]


def stale_findings(study: optuna.Study, grace_s: float, stop_grace_s: float, tell: stale_trials.Tell | None,
                   retry: stale_trials.Retry | None) -> list[Finding]:
    out = []
    for t in stale_trials.stale(study, grace_s):
        def fix(t: FrozenTrial = t) -> stale_trials.Settled | None:
            return stale_trials.settle(study, t, stop_grace_s=stop_grace_s, tell=tell, retry=retry)
        out.append(Finding(f"trial {t.number} is RUNNING but the sweep process that ran it is dead", fix))
    return out
