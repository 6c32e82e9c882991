"""The sweep's MLflow side: the study's one parent run, and the runs reconciled with the study.

verlsweep/tracking owns MLflow (mlflow_runs: creating and ending runs; study_runs: a study's runs as
a whole); this is the sweeper's call site. A study has one parent run: a resumed or second sweep
process continues it (status back to RUNNING, `sweep.resumes` counted) unless
`tracking.new_parent_run=true`, which starts a new one and tags the old `sweep.superseded_by`. The
parent ends when the last live sweep session on the study ends. Untracked (`tracking.enabled=false`,
or a dry run): nothing here runs.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from verlsweep.reconcile.check import Tracking
from verlsweep.tracking import mlflow_runs, store, study_runs, sweep_run

log = logging.getLogger(__name__)

PARENT_RUN_KEY = mlflow_runs.PARENT_RUN_KEY
KILLED_FOUND_BY_TAG = "sweep.killed_session_found_by"


def enabled(config: DictConfig) -> bool:
    return bool(OmegaConf.select(config, "tracking.enabled", default=False))


def where(config: DictConfig, study_name: str) -> dict[str, str]:
    """{uri, experiment} of the study's runs, kept with the study for `verlsweep.report`."""
    return {"uri": store.tracking_uri(config), "experiment": store.experiment_name(config, study_name)}


def start_parent_run(config: DictConfig, study_name: str, search_space: Mapping[str, Any], *, sampler: str,
                     sweep_name: str | None, session: str, others_alive: bool) -> Tracking | None:
    """The study's parent run (continued, joined or new) and the store, or None when not tracked.

    An unusable store raises verlsweep.tracking.store.TrackingUnavailable (a ConfigError): before any trial.
    `others_alive`: another sweep process works on the study now (its parent run is RUNNING for it).
    """
    if not enabled(config):
        return None
    client = store.client_for(store.tracking_uri(config))
    name = store.experiment_name(config, study_name)
    exp = store.ensure_experiment(client, name, store.artifact_location(config, name))
    existing = study_runs.parents(client, exp, study_name)
    new = bool(OmegaConf.select(config, "tracking.new_parent_run", default=False))
    if existing and not new:
        run = existing[0]
        dead = run.info.status == "RUNNING" and not others_alive
        if dead:
            log.warning("verlsweep: parent run %s was left RUNNING by a sweep process that died; %s continues it",
                        run.info.run_id, session)
        if run.info.status != "RUNNING" or dead:
            study_runs.continue_parent(client, run.info.run_id, {KILLED_FOUND_BY_TAG: session} if dead else {})
        return Tracking(client, exp, run.info.run_id)
    mine = sweep_run.start_sweep_run(config, study_name, dict(search_space), sampler=sampler, sweep_name=sweep_name)
    if new:
        for old in existing:
            status = "KILLED" if old.info.status == "RUNNING" and not others_alive else old.info.status
            study_runs.end_run(client, old.info.run_id, status, {study_runs.SUPERSEDED_TAG: mine})
        return Tracking(client, exp, mine)
    return Tracking(client, exp, study_runs.elect_parent(client, exp, study_name, mine))


def finish_parent_run(tracking: Tracking | None, status: str, others_alive: bool) -> None:
    """End the parent unless another live sweep process still works on the study (the last one ends it)."""
    if tracking is None or tracking.parent is None or others_alive:
        return
    try:
        study_runs.end_run(tracking.client, tracking.parent, status)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("could not end MLflow parent run %s as %s: %s", tracking.parent, status, exc)


def update_parent_run(config: DictConfig, run_id: str | None, step: int, metrics: Mapping[str, float],
                      files: Mapping[str, list[Path]]) -> None:
    """After a batch: best_objective, trials_done and the outcome counts of the whole study at `step`
    (a resumed sweep continues the series); the sweep's files."""
    if run_id is None:
        return
    try:
        sweep_run.update_sweep_run(config, run_id, step, metrics, files)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("could not update MLflow parent run %s: %s", run_id, exc)


def ui_hint(config: DictConfig, run_id: str) -> str:
    """How to look at the sweep in the MLflow UI (the runs table with the sweep's columns)."""
    uri = store.tracking_uri(config)
    try:
        exp_id = store.client_for(uri).get_run(run_id).info.experiment_id
    except Exception:  # noqa: BLE001 - only a hint
        return f"MLflow: parent run {run_id} in {uri}"
    remote = uri.startswith(("http://", "https://"))
    serve = f"open {uri.rstrip('/')}" if remote else f"mlflow ui --backend-store-uri {uri}"
    base = uri.rstrip("/") if remote else "http://127.0.0.1:5000"
    return (f"MLflow: {serve}  ->  {base}{store.ui_path(exp_id)}\n"
            "  (opens on the study's trials, best objective first; the sweep's own run with its best so far and "
            "report: Exit shared view)")
