"""A study's MLflow runs as a whole: its one parent run, and its child runs by Optuna trial number.

verlsweep.tracking.mlflow_runs creates and ends the runs of one live sweep and one trial; this module
answers what the store holds for a study (for resume, reconciliation and `verlsweep.report --status`):

    parent   the run tagged `sweep.role=parent` and `sweep.study=<study>`; a resumed sweep continues it
             (status back to RUNNING, `sweep.resumes` counted) instead of adding a second one.
    children runs tagged `trial.number` and `sweep.study=<study>`, one per Optuna trial.

Two sweep processes starting on one study at once may both create a parent run. MLflow has no
compare-and-set, so the rule is one both can apply alone: the oldest active parent of the study is
its parent (every run older than mine is visible once mine exists); a process whose own new run is
not the oldest deletes it and joins the oldest.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from verlsweep.tracking import run_columns
from verlsweep.tracking.mlflow_runs import ROLE_TAG, filter_literal, log_params, objective_key, status_for

STUDY_TAG = "sweep.study"
NUMBER_TAG = "trial.number"
OUTCOME_TAG = "trial.outcome"
REASON_TAG = "trial.reason"
RESUMES_TAG = "sweep.resumes"
SUPERSEDED_TAG = "sweep.superseded_by"
REUSED_FROM_TAG = "trial.reused_from"
RULED_OUT_TAG = "trial.ruled_out_by"
TERMINAL = ("FINISHED", "FAILED", "KILLED")


def search_all(client: Any, experiment_id: str, filter_string: str) -> list[Any]:
    """Every active run matching the filter, all pages."""
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=filter_string, max_results=1000, page_token=token)
        runs += list(page)
        token = page.token
        if not token:
            return runs


def experiment_id(client: Any, name: str) -> str | None:
    found = client.get_experiment_by_name(name)
    return None if found is None or found.lifecycle_stage == "deleted" else found.experiment_id


def parents(client: Any, exp_id: str, study: str) -> list[Any]:
    """The study's active parent runs not superseded, oldest first (the first is the study's parent)."""
    runs = search_all(client, exp_id, f"tags.`{ROLE_TAG}` = 'parent' and tags.`{STUDY_TAG}` = {filter_literal(study)}")
    runs = [r for r in runs if SUPERSEDED_TAG not in r.data.tags]
    return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))


def children(client: Any, exp_id: str, study: str) -> dict[int, list[Any]]:
    """The study's trial runs by trial number."""
    out: dict[int, list[Any]] = {}
    for run in search_all(client, exp_id, f"tags.`{STUDY_TAG}` = {filter_literal(study)}"):
        number = run.data.tags.get(NUMBER_TAG)
        if number not in (None, "") and str(number).lstrip("-").isdigit():
            out.setdefault(int(number), []).append(run)
    return out


def elect_parent(client: Any, exp_id: str, study: str, mine: str) -> str:
    """`mine` was just created; returns the study's parent, deleting `mine` if an older one exists."""
    found = parents(client, exp_id, study)
    winner = found[0].info.run_id if found else mine
    if winner != mine:
        client.delete_run(mine)
    return winner


def continue_parent(client: Any, run_id: str, tags: Mapping[str, str]) -> None:
    """A resumed sweep's parent: back to RUNNING, one more resume counted, `tags` added."""
    run = client.get_run(run_id)
    resumes = int(run.data.tags.get(RESUMES_TAG, "0") or 0) + 1
    set_tags(client, run_id, {RESUMES_TAG: str(resumes), **tags})
    if run.info.status != "RUNNING":
        client.update_run(run_id, status="RUNNING")


def set_tags(client: Any, run_id: str, tags: Mapping[str, str]) -> None:
    from mlflow.entities import RunTag

    if tags:
        client.log_batch(run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()])


def log_measurements(client: Any, run_id: str, values: Mapping[str, Any], outcome: str) -> None:
    """Metrics a run lacks, from the trial (a run its task could not finish); the objective under the
    name its outcome gives it (objective_key)."""
    from mlflow.entities import Metric

    have = client.get_run(run_id).data.metrics
    values = {objective_key(outcome) if k == "objective" else k: v for k, v in values.items()}
    values.update(run_columns.derived(values)[0])       # the readable objective of a completed one
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, 0) for k, v in values.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in have]
    if metrics:
        client.log_batch(run_id, metrics=metrics)


def end_run(client: Any, run_id: str, status: str, tags: Mapping[str, str] | None = None) -> None:
    """End (or correct the end state of) a run; a run already ended keeps its end time. An outcome told
    in `tags` recolours the run."""
    tags = dict(tags or {})
    if OUTCOME_TAG in tags:
        tags.update(run_columns.colour(tags[OUTCOME_TAG]))
    set_tags(client, run_id, tags)
    run = client.get_run(run_id)
    if run.info.status == "RUNNING":
        client.set_terminated(run_id, status)
    elif run.info.status != status:
        client.update_run(run_id, status=status)


def record_trial(client: Any, exp_id: str, study: str, number: int, parent: str | None, outcome: str,
                 reason: str, status: str | None = None, params: Mapping[str, Any] | None = None, *,
                 run_name: str | None = None, tags: Mapping[str, str] | None = None, label: str | None = None) -> str:
    """A child run for a trial whose own run is missing (it never launched, or died before creating
    one): the trial is recorded, not missing. `label`: its knobs as its job was given them (`util=0.90
    tp=2`), logged as params by those names too, as a launched trial's run has them."""
    tags = {**(tags or {}), NUMBER_TAG: str(number), STUDY_TAG: study, OUTCOME_TAG: outcome,
            REASON_TAG: reason[:5000]}
    tags.update(run_columns.colour(outcome, reused=REUSED_FROM_TAG in tags, ruled_out=RULED_OUT_TAG in tags))
    if parent:
        tags["mlflow.parentRunId"] = parent
    run = client.create_run(exp_id, run_name=run_name or f"trial-{number}", tags=tags)
    log_params(client, run.info.run_id, {**run_columns.label_params(label),
                                         **{k: str(v)[:6000] for k, v in (params or {}).items()}})
    client.set_terminated(run.info.run_id, status or status_for(outcome), end_time=int(time.time() * 1000))
    return run.info.run_id

