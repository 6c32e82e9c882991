"""The sweep's parent run: created before the first trial, updated after every batch, ended at the end
(the contract in verlsweep.tracking.mlflow_runs; verlsweep.tracking.study_runs finds and continues it
when the study resumes)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from omegaconf import DictConfig

from verlsweep.tracking.mlflow_runs import ROLE_TAG, filter_literal, group_tags, log_params, param_value, plain
from verlsweep.tracking.store import artifact_location, client_for, ensure_experiment, experiment_name, tracking_uri

SWEEP_INDEX_TAG = "sweep.index"


def start_sweep_run(cfg: DictConfig, study_name: str, search_space: Mapping[str, Any], *,
                    sampler: str | None = None, sweep_name: str | None = None,
                    fixed: Mapping[str, Any] | None = None) -> str:
    """Create the sweep's parent run and return its id (see the contract at the top).

    `fixed`: the recipe values to log as params; default: every `verl.*` leaf of `cfg` that the search
    space does not vary, under its dotted verl key.
    """
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
        fixed = {k: v for k, v in flatten(cfg.verl).items() if k not in swept}
    log_params(client, run_id, {k: param_value(v) for k, v in fixed.items()})
    client.log_text(run_id, json.dumps(plain(search_space), indent=2, default=str) + "\n", "search_space.json")
    return run_id


def _next_sweep_index(client, exp_id: str, study_name: str) -> int:
    """1 + the sweep runs of this study so far: parent runs read `rollout_memory #1`, `#2`, ..."""
    runs = client.search_runs([exp_id], filter_string=f"tags.`sweep.study` = {filter_literal(study_name)}",
                              max_results=1000)
    indices = [int(r.data.tags.get(SWEEP_INDEX_TAG, "0") or 0) for r in runs
               if "mlflow.parentRunId" not in r.data.tags and "trial.number" not in r.data.tags]
    return max([0, *indices, len(indices)]) + 1


def update_sweep_run(cfg: DictConfig, run_id: str, step: int, metrics: Mapping[str, float],
                     files: Mapping[str, Iterable[Path]] | None = None) -> None:
    """After a batch: the sweep's numbers as step `step` of a series, and its output files (replaced),
    `files` by artifact folder ("" for the run's root)."""
    from mlflow.entities import Metric

    client = client_for(tracking_uri(cfg))
    now = int(time.time() * 1000)
    batch = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
    if batch:
        client.log_batch(run_id, metrics=batch)
    for folder, paths in (files or {}).items():
        for path in paths:
            if path.is_file():
                client.log_artifact(run_id, str(path), artifact_path=folder or None)


def finish_sweep_run(cfg: DictConfig, run_id: str, status: str = "FINISHED") -> None:
    client_for(tracking_uri(cfg)).set_terminated(run_id, status)
