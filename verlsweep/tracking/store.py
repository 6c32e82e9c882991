"""The MLflow store a sweep writes to and a study's experiment in it: the store's address (tracking_uri),
a client proven usable once per process (client_for, TrackingUnavailable when it is not), the experiment
(experiment_name, ensure_experiment, artifact_location) with the tags that make MLflow's UI show it as
model training with the sweep's columns (ui_path). verlsweep.tracking.mlflow_runs holds the runs.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from omegaconf import DictConfig

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.config import TaskConfig
from verlsweep.tracking import shared_view

# The functions below read tracking.* (and trial.study_name) of a trial's TaskConfig or of the composed config
# of a sweep (its parent run): both name them at the same paths.
Config = TaskConfig | DictConfig

DEFAULT_EXPERIMENT = "verlsweep"

# MLflow 3 records what an experiment is for in this tag; its UI's experiment-kind selector writes
# "custom_model_development" ("Machine learning") or "genai_development" (mlflow/server/js ExperimentKind).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
# The MLflow 3.17 UI shows an experiment as GenAI or model training by its workflow switch (URL param
# `workflowType`, default genai); `viewStateShareKey` loads a view stored in the experiment tag
# `mlflow.sharedViewState.<key>` (its "share view" button): here the columns a sweep is compared by.
SHARED_VIEW_KEY = "verlsweep"
SHARED_VIEW_TAG = f"mlflow.sharedViewState.{SHARED_VIEW_KEY}"
# The view a sweep prints the address of opens on its trials, best first: the child runs only (a shared
# view cannot expand a parent: the UI drops `runsExpanded` from shared views, mlflow/server/js), sorted
# by objective, the outcome and the objective in the first columns; a sweep replaces it with its own,
# knobs and charts included (verlsweep.tracking.shared_view).
TRIALS_FILTER = shared_view.TRIALS_FILTER
SHARED_VIEW = shared_view.BASE_VIEW


class TrackingUnavailable(ConfigError):
    """The MLflow store cannot be used; raised before any trial starts."""

    def __init__(self, uri: str, reason: str):
        super().__init__([Problem("tracking.uri", uri,
                                  f"a reachable, writable MLflow tracking store ({reason}); set "
                                  "tracking.uri=... or MLFLOW_TRACKING_URI, or tracking.enabled=false")])
        self.args = (f"the MLflow tracking store cannot be used, nothing started:\n  - {self.problems[0]}",)


def tracking_uri(cfg: Config) -> str:
    """`tracking.uri`, with a relative sqlite/file path made absolute: trials run in their own dir."""
    uri = str(cfg.tracking.uri)
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///"):]
        if path and not path.startswith("/"):
            return f"sqlite:///{Path(path).resolve()}"
    elif parsed.scheme in ("", "file") and not uri.startswith(("/", "file:///")):
        return Path(parsed.path or uri).resolve().as_uri()
    return uri


def experiment_name(cfg: Config, study_name: str | None = None) -> str:
    """`tracking.experiment`, else the study's name, else 'verlsweep' (verl's trainer.project_name)."""
    return str(cfg.tracking.get("experiment") or study_name or cfg.trial.get("study_name") or DEFAULT_EXPERIMENT)


_CHECKED: dict[str, Any] = {}
# A fresh database store announces its schema set-up at INFO (mlflow/store/db/utils.py
# _initialize_tables: "Creating initial MLflow database tables...", "Updating database tables", then
# alembic's migration lines): book-keeping of MLflow's, not the user's. Its warnings still show.
_STORE_SETUP_LOGGERS = ("mlflow.store.db.utils", "alembic")


def _quiet_store_setup() -> None:
    for name in _STORE_SETUP_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def client_for(uri: str):
    """A MlflowClient for a store proven usable (checked once per process)."""
    if uri in _CHECKED:
        return _CHECKED[uri]
    from mlflow.tracking import MlflowClient

    if urlparse(uri).scheme in ("http", "https"):
        _probe_http(uri)
    _quiet_store_setup()
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    except Exception as exc:  # the store's own error says why (path, permissions, auth)
        raise TrackingUnavailable(uri, f"{type(exc).__name__}: {exc}") from exc
    _CHECKED[uri] = client
    return client


def check_reachable(uri: str) -> None:
    """TrackingUnavailable when the store at `uri` cannot be used, found without creating it: a server
    that does not answer, a sqlite file or file store whose directory is not there. A sweep asks before its
    study exists, so a dead server leaves no study with waiting trials behind."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        _probe_http(uri)
        return
    path = uri[len("sqlite:///"):] if parsed.scheme == "sqlite" else parsed.path
    where = Path(path).parent if parsed.scheme == "sqlite" else Path(path)
    while parsed.scheme == "file" and not where.exists() and where != where.parent:
        where = where.parent            # a file store's dir is made by MLflow, given a parent that exists
    if path and not where.is_dir():
        raise TrackingUnavailable(uri, f"{where} is not a directory (mkdir -p {where})")


def _probe_http(uri: str, timeout_s: float = 5.0) -> None:
    """Refuse fast: MLflow's own client retries a dead server for minutes."""
    import requests

    try:
        requests.get(uri.rstrip("/") + "/health", timeout=timeout_s)
    except requests.RequestException as exc:
        # requests' message nests urllib3's (pool, retries, the connection object); the OS's reason is the news
        errno = re.search(r"\[Errno -?\d+\] [^\"')]+", str(exc))
        raise TrackingUnavailable(uri, f"no answer from the server: {errno.group(0) if errno else exc}") from exc


def artifact_location(cfg: Config, name: str) -> str | None:
    """Where a new experiment keeps its artifacts: `tracking.artifact_location`/<name>, else, for a sqlite
    store, `mlruns/` next to the database file (MLflow's own default is `./mlruns` of whichever process
    creates the experiment, which scatters one study's artifacts over working dirs); else the server's."""
    root = cfg.tracking.get("artifact_location")
    if root:
        return f"{str(root).rstrip('/')}/{name}"
    uri = tracking_uri(cfg)
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///"):]).parent / "mlruns").as_uri() + f"/{name}"
    return None


def ui_path(experiment_id: str, mode: str = "TABLE") -> str:
    """The experiment's runs table (mode CHART: its chart view) in the MLflow UI, with the shared view
    (append to the server's URL). The mode is the URL's `compareRunsMode`, which the shared view keeps."""
    chart = "" if mode == "TABLE" else f"&compareRunsMode={mode}"
    return (f"/#/experiments/{experiment_id}/runs?workflowType=machine_learning{chart}"
            f"&viewStateShareKey={SHARED_VIEW_KEY}")


def write_view(client: Any, experiment_id: str, view: dict[str, Any]) -> None:
    """Store `view` as the experiment's shared view (what ui_path opens on)."""
    client.set_experiment_tag(experiment_id, SHARED_VIEW_TAG, json.dumps(view))


def _model_training_tags(client, experiment) -> None:
    """A sweep's experiment is model training (its runs, not GenAI traces) with the sweep's columns."""
    have = dict(getattr(experiment, "tags", None) or {})
    if have.get(EXPERIMENT_KIND_TAG) != MODEL_TRAINING_KIND:
        client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND)
    if have.get(SHARED_VIEW_TAG) != json.dumps(SHARED_VIEW):      # an older verlsweep's view is replaced
        client.set_experiment_tag(experiment.experiment_id, SHARED_VIEW_TAG, json.dumps(SHARED_VIEW))


def ensure_experiment(client, name: str, location: str | None = None) -> str:
    try:
        found = client.get_experiment_by_name(name)
        if found is not None:
            if found.lifecycle_stage == "deleted":
                client.restore_experiment(found.experiment_id)
            _model_training_tags(client, found)
            return found.experiment_id
        exp_id = client.create_experiment(name, artifact_location=location,
                                          tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND})
        _model_training_tags(client, client.get_experiment(exp_id))
        return exp_id
    except TrackingUnavailable:
        raise
    except Exception as exc:
        # two trials creating the same experiment concurrently: the loser reads the winner's
        found = client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        raise TrackingUnavailable(client.tracking_uri, f"cannot create experiment {name!r}: {exc}") from exc

