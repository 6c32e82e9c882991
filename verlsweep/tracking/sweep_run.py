"""The sweep's MLflow run: the one parent run of a study's trial runs.

Created before the first trial, updated after every batch, ended with the sweep (the contract in
verlsweep.tracking.mlflow_runs). A study has one: a resumed or second sweep process continues it (status
back to RUNNING, `sweep.resumes` counted, verlsweep.tracking.study_runs) unless
`tracking.new_parent_run=true`, which starts a new one and tags the old `sweep.superseded_by`. It ends
when the last live sweep session on the study ends. Untracked (`tracking.enabled=false`, or a dry run):
the study calls none of this.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verlsweep.tracking import mlflow_runs, store, study_runs
from verlsweep.tracking.mlflow_runs import ROLE_TAG, filter_literal, group_tags, log_params, param_value, plain
from verlsweep.tracking.store import artifact_location, client_for, ensure_experiment, experiment_name, tracking_uri

log = logging.getLogger(__name__)

SWEEP_INDEX_TAG = "sweep.index"
PARENT_RUN_KEY = mlflow_runs.PARENT_RUN_KEY
KILLED_FOUND_BY_TAG = "sweep.killed_session_found_by"


@dataclass
class Tracking:
    """Where the study's runs are: an MlflowClient, the experiment, the study's sweep run."""

    client: Any
    experiment_id: str | None
    parent: str | None = None


def enabled(config: DictConfig) -> bool:
    return bool(OmegaConf.select(config, "tracking.enabled", default=False))


def check_store(config: DictConfig) -> None:
    """The tracking store usable, asked before the study exists (store.check_reachable)."""
    if enabled(config):
        store.check_reachable(store.tracking_uri(config))


def where(config: DictConfig, study_name: str) -> dict[str, str]:
    """{uri, experiment} of the study's runs, kept with the study for `verlsweep.report`."""
    return {"uri": store.tracking_uri(config), "experiment": store.experiment_name(config, study_name)}


def start_sweep_run(cfg: DictConfig, study_name: str, search_space: Mapping[str, Any], *,
                    sampler: str | None = None, sweep_name: str | None = None,
                    fixed: Mapping[str, Any] | None = None) -> str:
    """Create a new sweep run and return its id.

    `fixed`: the recipe values to log as params; default: every `verl.*` leaf of `cfg` that the search
    space does not vary, under its dotted verl key.
    """
    from verlsweep.command import recipe_config
    from verlsweep.command.overrides import flatten

    client = client_for(tracking_uri(cfg))
    name = experiment_name(cfg, study_name)
    exp_id = ensure_experiment(client, name, artifact_location(cfg, name))
    tags = {
        "sweep.name": sweep_name or study_name,
        "sweep.study": study_name,
        "sweep.sampler": sampler or "",
        "sweep.runner": str(cfg.runner.name),
        ROLE_TAG: "parent",
        **group_tags(cfg),
    }
    index = _next_sweep_index(client, exp_id, study_name)
    tags[SWEEP_INDEX_TAG] = str(index)
    run = client.create_run(exp_id, run_name=f"{sweep_name or study_name} #{index}", tags=tags)
    run_id = run.info.run_id
    if fixed is None:
        swept = {k.removeprefix("verl.") for k in search_space}
        own = recipe_config.own_config(cfg)     # a recipe script's sweep: the script's own values
        fixed = {k: v for k, v in flatten(own.verl).items() if k not in swept}
    log_params(client, run_id, {k: param_value(v) for k, v in fixed.items()})
    client.log_text(run_id, json.dumps(plain(search_space), indent=2, default=str) + "\n", "search_space.json")
    return run_id


def _next_sweep_index(client: Any, exp_id: str, study_name: str) -> int:
    """1 + the sweep runs of this study so far: sweep runs read `rollout_memory #1`, `#2`, ..."""
    runs = client.search_runs([exp_id], filter_string=f"tags.`sweep.study` = {filter_literal(study_name)}",
                              max_results=1000)
    indices = [int(r.data.tags.get(SWEEP_INDEX_TAG, "0") or 0) for r in runs
               if "mlflow.parentRunId" not in r.data.tags and "trial.number" not in r.data.tags]
    return max([0, *indices, len(indices)]) + 1


def open_sweep_run(config: DictConfig, study_name: str, search_space: Mapping[str, Any], *, sampler: str,
                   sweep_name: str | None, session: str, others_alive: bool,
                   view: Mapping[str, Any] | None = None) -> Tracking | None:
    """The study's sweep run (continued, joined or new) and the store, or None when not tracked; `view`:
    the experiment's shared view for this sweep (verlsweep.tracking.shared_view.for_sweep).

    An unusable store raises verlsweep.tracking.store.TrackingUnavailable (a ConfigError): before any trial.
    `others_alive`: another sweep process works on the study now (its sweep run is RUNNING for it).
    """
    if not enabled(config):
        return None
    client = store.client_for(store.tracking_uri(config))
    name = store.experiment_name(config, study_name)
    exp = store.ensure_experiment(client, name, store.artifact_location(config, name))
    tracking = _open(config, client, exp, study_name, search_space, sampler=sampler, sweep_name=sweep_name,
                     session=session, others_alive=others_alive)
    if view is not None:          # after the experiment's base view: the sweep's knobs and charts
        store.write_view(client, exp, dict(view))
    return tracking


def _open(config: DictConfig, client: Any, exp: str, study_name: str, search_space: Mapping[str, Any], *,
          sampler: str, sweep_name: str | None, session: str, others_alive: bool) -> Tracking:
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
    mine = start_sweep_run(config, study_name, dict(search_space), sampler=sampler, sweep_name=sweep_name)
    if new:
        for old in existing:
            status = "KILLED" if old.info.status == "RUNNING" and not others_alive else old.info.status
            study_runs.end_run(client, old.info.run_id, status, {study_runs.SUPERSEDED_TAG: mine})
        return Tracking(client, exp, mine)
    return Tracking(client, exp, study_runs.elect_parent(client, exp, study_name, mine))


def update_sweep_run(cfg: DictConfig, run_id: str | None, step: int, metrics: Mapping[str, float],
                     files: Mapping[str, Iterable[Path]] | None = None, tags: Mapping[str, str] | None = None) -> None:
    """After a batch: the sweep's numbers as step `step` of a series (a resumed sweep continues it), its
    output files (replaced), `files` by artifact folder ("" for the run's root), and `tags` (best_tags).
    A store that fails here is logged: the sweep's results are on disk either way."""
    if run_id is None:
        return
    from mlflow.entities import Metric

    try:
        client = client_for(tracking_uri(cfg))
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
        if batch:
            client.log_batch(run_id, metrics=batch)
        study_runs.set_tags(client, run_id, tags or {})
        for folder, paths in (files or {}).items():
            for path in paths:
                if path.is_file():
                    client.log_artifact(run_id, str(path), artifact_path=folder or None)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("could not update MLflow parent run %s: %s", run_id, exc)


BEST_PREFIX = "best"


def best_tags(number: int, label: str | None, objective: float, objective_name: str) -> dict[str, str]:
    """The parent run's tags and description for the sweep's best trial so far: what to run, in one click
    from the experiment page (`best.trial`, `best.objective`, `best.<knob>`, the launch script's name)."""
    from verlsweep.tracking.run_columns import label_params, rounded

    knobs = label_params(label)
    shown = f"t{number:02d} {label or ''}".strip()
    tags = {f"{BEST_PREFIX}.trial": str(number), f"{BEST_PREFIX}.objective": f"{rounded(objective):g}",
            f"{BEST_PREFIX}.knobs": label or "", **{f"{BEST_PREFIX}.{k}": v for k, v in knobs.items()}}
    tags["mlflow.note.content"] = (
        f"**Best so far: {shown}**, {objective_name} = {rounded(objective):g}\n\n"
        "Run it for the long run: artifact `best_launch.sh` (its full config: `best.yaml`); every trial: "
        "`trials.csv` and `report.html`"
        + ("; objective against util per TP: `plots/util_by_tp.png`." if "util" in knobs else "."))
    return tags


def finish_sweep_run(cfg: DictConfig, run_id: str, status: str = "FINISHED") -> None:
    client_for(tracking_uri(cfg)).set_terminated(run_id, status)


def close_sweep_run(tracking: Tracking | None, status: str, others_alive: bool) -> None:
    """End the sweep run unless another live sweep process still works on the study (the last one ends it)."""
    if tracking is None or tracking.parent is None or others_alive:
        return
    try:
        study_runs.end_run(tracking.client, tracking.parent, status)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("could not end MLflow parent run %s as %s: %s", tracking.parent, status, exc)


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
            "  (opens on the study's trials, best objective first, their knobs beside it; the sweep's own run "
            "with its best so far and report: Exit shared view)\n"
            f"  charts (objective and memory by knob): {base}{store.ui_path(exp_id, 'CHART')}")
