"""The sweep's MLflow parent run (verlsweep/tracking/mlflow_runs.py owns MLflow; this is the call site).

Contract (verlsweep/tracking/mlflow_runs.py docstring): `start_sweep_run(cfg, study_name, search_space, ...)`
before the first trial, `tracking.parent_run_id=<id>` passed to every trial, `finish_sweep_run` at
the end. Without the tracking module, or with `tracking.enabled=false`, a sweep runs untracked.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

PARENT_RUN_KEY = "tracking.parent_run_id"


def _module() -> Any:
    if not importlib.util.find_spec("verlsweep.tracking.mlflow_runs"):
        return None
    return importlib.import_module("verlsweep.tracking.mlflow_runs")


def start_parent_run(config: DictConfig, study_name: str, search_space: Mapping[str, Any], *,
                     sampler: str, sweep_name: str | None) -> str | None:
    """The parent run's id, or None when the sweep is not tracked.

    An unusable store raises verlsweep.tracking.mlflow_runs.TrackingUnavailable (a ConfigError): before any trial.
    """
    if not OmegaConf.select(config, "tracking.enabled", default=False):
        return None
    tracking = _module()
    if tracking is None or not hasattr(tracking, "start_sweep_run"):
        log.warning("tracking.enabled but verlsweep.tracking.mlflow_runs has no start_sweep_run: sweep not tracked")
        return None
    return tracking.start_sweep_run(config, study_name, dict(search_space), sampler=sampler, sweep_name=sweep_name)


def finish_parent_run(config: DictConfig, run_id: str | None, status: str) -> None:
    if run_id is None:
        return
    tracking = _module()
    try:
        tracking.finish_sweep_run(config, run_id, status)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("could not end MLflow parent run %s as %s: %s", run_id, status, exc)


def update_parent_run(config: DictConfig, run_id: str | None, step: int, metrics: Mapping[str, float],
                      files: Mapping[str, list[Path]]) -> None:
    """After a batch: best_objective, trials_done and the outcome counts at `step`; the sweep's files."""
    if run_id is None:
        return
    try:
        _module().update_sweep_run(config, run_id, step, metrics, files)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are on disk either way
        log.warning("could not update MLflow parent run %s: %s", run_id, exc)


def ui_hint(config: DictConfig, run_id: str) -> str:
    """How to look at the sweep in the MLflow UI (the runs table with the sweep's columns)."""
    tracking = _module()
    uri = tracking.tracking_uri(config)
    try:
        exp_id = tracking.client_for(uri).get_run(run_id).info.experiment_id
    except Exception:  # noqa: BLE001 - only a hint
        return f"MLflow: parent run {run_id} in {uri}"
    serve = (f"mlflow ui --backend-store-uri {uri}" if not uri.startswith(("http://", "https://"))
             else f"open {uri.rstrip('/')}")
    base = "http://127.0.0.1:5000" if not uri.startswith(("http://", "https://")) else uri.rstrip("/")
    return f"MLflow: {serve}  ->  {base}{tracking.ui_path(exp_id)}"
