"""MLflow: one experiment per study, one parent run per study, a nested child run per trial.
This module holds the store, the experiment and the child run (TrialRun); verlsweep.tracking.sweep_run
the parent run; verlsweep.tracking.study_runs a study's runs as a whole.

Contract with the sweeper (hydra_plugins/verlsweep_sweeper)
-----------------------------------------------------------
1. Before the first trial, in the sweep's process:
       parent_id = sweep_run.start_sweep_run(cfg, study_name, search_space, sampler=...)
   `cfg` is the sweep's composed config; it fails with TrackingUnavailable (a ConfigError naming
   `tracking.uri`) when the store is unreachable or unwritable, so no trial starts. The parent run
   is created in experiment `experiment_name(cfg, study_name)` with tags `sweep.name`,
   `sweep.hardware`, `sweep.algorithm`, `sweep.model`, `sweep.sampler`, `sweep.study`, `sweep.role=parent`;
   params: the fixed recipe values (dotted verl keys, swept keys left out); artifact `search_space.json`.
2. Every trial gets the overrides `tracking.parent_run_id=<parent_id>` (and `trial.number`,
   `trial.study_name`, `trial.label`: the knobs that vary, for the run name `t07 util=0.90 tp=2`,
   renamed `t07 oom util=0.90 tp=2` at the end). The child run is then created in the parent's
   experiment with tag `mlflow.parentRunId`, so a trial can never land in another experiment than its sweep.
3. After every batch: `sweep_run.update_sweep_run(cfg, parent_id, step, metrics, files)`: the sweep's
   numbers (best_objective, trials_done, trials_<outcome>) as a step series, its output files.
4. At the end: `sweep_run.finish_sweep_run(cfg, parent_id, status)` (FINISHED / FAILED / KILLED).
A single run (no -m) has no parent: the child goes to `experiment_name(cfg)` on its own.

Never set MLFLOW_RUN_ID in the sweep's own process: MLflow's fluent API would adopt it and nested
runs would link to the wrong parent (mlflow#15713). It is only put in the trial's environment, where
verl's Tracking (verl/utils/tracking.py, mlflow branch) calls `mlflow.start_run(run_id=...)` and logs
its per-step metrics and its config (slash keys) into the child run. verl ends that run itself when it
gets the chance: `TaskRunnerV1.run` (verl/trainer/main_ppo.py) calls `tracking.finish(...)` in a
`finally`, and `Tracking.finish` (verl/utils/tracking.py) makes `_MlflowLoggingAdapter.finish` call
`mlflow.end_run()`, which marks it FINISHED even when training failed. So the final status is ours:
the child is terminated here from the outcome (FINISHED / FAILED / KILLED), after the whole trial
process tree is gone, overriding whatever verl left.

Run metrics: `objective` (objective.aggregate of objective.metric), `peak_memory_gb` (measured: the
highest verl `actor/perf/max_memory_allocated_gb` of the trial's steps, torch-allocated GiB per
device, not reserved), `predicted_peak_gb` (the planner's value of that metric, for a trial that
never ran), `trial.duration_s`, `trial.steps`; METRIC_NOTES says the same in each run's description.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlparse

from omegaconf import DictConfig, OmegaConf

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.common.labels import trial_label
from verlsweep.common.names import MLFLOW_RUN_ID_ENV, MLFLOW_URI_ENV, PEAK_MEMORY_METRIC, REDACTED, SECRET_NAME
from verlsweep.common.result import TrialResult

log = logging.getLogger("verlsweep.tracking.mlflow_runs")

PARENT_RUN_KEY = "tracking.parent_run_id"
DEFAULT_EXPERIMENT = "verlsweep"
# verl/utils/tracking.py _MlflowLoggingAdapter._sanitize_key: the names verl's metrics get in MLflow
_INVALID_METRIC_CHARS = re.compile(r"[^/\w.\- :]")

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
# by objective, the outcome and the objective in the first columns.
TRIALS_FILTER = "tags.`trial.number` != ''"
SHARED_VIEW = {"selectedColumns": ["tags.`trial.outcome`", "metrics.`objective`", "metrics.`peak_memory_gb`",
                                   "attributes.`Duration`"],
               "columnWidths": {"attributes.`Run Name`": 300},
               "searchFilter": TRIALS_FILTER, "orderByKey": "metrics.`objective`", "orderByAsc": False}

# `orphaned`: its sweep died and a later one stopped what was left (verlsweep.reconcile);
# `interrupted`: its sweep was stopped (Ctrl-C) mid-trial
STATUS_BY_OUTCOME = {"completed": "FINISHED", "pruned": "KILLED", "timeout": "KILLED", "hang": "KILLED",
                     "preempted": "KILLED", "orphaned": "KILLED", "interrupted": "KILLED"}
ROLE_TAG = "sweep.role"           # "parent" on a sweep's parent run
PARTIAL_OBJECTIVE = "partial_objective"


def objective_key(outcome: str) -> str:
    """The metric a trial's objective is logged as: `objective` only when the trial completed. A pruned
    trial's value covers the steps before its prune; under the same name MLflow's runs table would sort
    it among the completed trials' (the terminal, trials.csv and the report show none for it)."""
    return "objective" if outcome == "completed" else PARTIAL_OBJECTIVE


MAX_PARAMS_PER_BATCH = 100        # MLflow's log_batch limit
# The run description (MLflow's `mlflow.note.content` tag) of every trial run: what its metrics mean.
METRIC_NOTES = (
    "objective: objective.aggregate of objective.metric over the steps after objective.warmup_steps; "
    "completed trials only.\n"
    f"{PARTIAL_OBJECTIVE}: the same over the steps a pruned trial ran before its prune.\n"
    f"peak_memory_gb: measured, the highest {PEAK_MEMORY_METRIC} of the trial's steps (GiB per device "
    "that torch allocated in the actor's training engine; allocated, not reserved).\n"
    f"predicted_peak_gb: the planner's prediction of {PEAK_MEMORY_METRIC}, for a trial that never ran."
)


class TrackingUnavailable(ConfigError):
    """The MLflow store cannot be used; raised before any trial starts."""

    def __init__(self, uri: str, reason: str):
        super().__init__([Problem("tracking.uri", uri,
                                  f"a reachable, writable MLflow tracking store ({reason}); set "
                                  "tracking.uri=... or MLFLOW_TRACKING_URI, or tracking.enabled=false")])


def status_for(outcome: str) -> str:
    """FINISHED for a completed trial, KILLED for one we stopped, FAILED for the rest."""
    return STATUS_BY_OUTCOME.get(outcome, "FAILED")


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Values of variables named like credentials never leave the machine (params, artifacts)."""
    return {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in env.items()}


def sanitize_metric_key(key: str) -> str:
    return _INVALID_METRIC_CHARS.sub("_", re.sub(r"/+", "/", key.replace("@", "_at_")))


def tracking_uri(cfg: DictConfig) -> str:
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


def experiment_name(cfg: DictConfig, study_name: str | None = None) -> str:
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


def _probe_http(uri: str, timeout_s: float = 5.0) -> None:
    """Refuse fast: MLflow's own client retries a dead server for minutes."""
    import requests

    try:
        requests.get(uri.rstrip("/") + "/health", timeout=timeout_s)
    except requests.RequestException as exc:
        raise TrackingUnavailable(uri, f"no answer from the server: {exc}") from exc


def artifact_location(cfg: DictConfig, name: str) -> str | None:
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


def ui_path(experiment_id: str) -> str:
    """The experiment's runs table in the MLflow UI (append to the server's URL)."""
    return f"/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={SHARED_VIEW_KEY}"


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


def log_params(client, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    # only environment variables carry credentials; verl keys such as ppo_max_token_len_per_gpu stay
    items = [Param(k, REDACTED if k.startswith("env.") and SECRET_NAME.search(k) else str(v))
             for k, v in params.items()]
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])


def group_tags(cfg: DictConfig) -> dict[str, str]:
    return {
        "sweep.hardware": str(cfg.hardware.name),
        "sweep.algorithm": str(cfg.algorithm.name),
        "sweep.model": str(cfg.model.name),
    }


def param_value(value: Any) -> str:
    """Strings as they are, other values in Hydra's override syntax: a param pastes back as an override."""
    from verlsweep.command.overrides import format_value

    value = plain(value)
    try:
        text = value if isinstance(value, str) else format_value(value)
    except TypeError:
        text = str(value)
    return text[:6000]      # MLflow 3's param value limit


def plain(value: Any) -> Any:
    if isinstance(value, DictConfig) or OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


# ---------------------------------------------------------------- child run (one trial)

@dataclass
class TrialRun:
    """The child run of one trial; `env()` is what the trial process gets to join it."""

    client: Any
    uri: str
    run_id: str
    number: int | None = None
    label: str | None = None          # the knobs that vary (`util=0.90 tp=2 off=p,o`), from the sweeper
    experiment: str | None = None     # the MLflow experiment's name, for the single run's last line

    @classmethod
    def start(cls, cfg: DictConfig, knobs: Mapping[str, Any], extra_tags: Mapping[str, str] | None = None) -> "TrialRun":
        """Create the run before launch. `knobs`: the trial's swept/overridden values (dotted keys);
        `extra_tags`: tags it starts with (the Slurm job id, so a killed job's run can be found)."""
        uri = tracking_uri(cfg)
        client = client_for(uri)
        parent = cfg.tracking.get("parent_run_id")
        if parent:
            exp_id = client.get_run(str(parent)).info.experiment_id
            experiment = None
        else:
            experiment = experiment_name(cfg)
            exp_id = ensure_experiment(client, experiment, artifact_location(cfg, experiment))
        tags = {
            "trial.number": "" if cfg.trial.number is None else str(cfg.trial.number),
            "trial.outcome": "running",
            "mlflow.note.content": METRIC_NOTES,
            "sweep.runner": str(cfg.runner.name),
            **group_tags(cfg),
        }
        if cfg.trial.get("study_name"):
            tags["sweep.study"] = str(cfg.trial.study_name)
        if parent:
            tags["mlflow.parentRunId"] = str(parent)
        number, label = cfg.trial.get("number"), cfg.trial.get("label")
        name = trial_label(number, None, label) if label else str(cfg.trial.name)
        run = client.create_run(exp_id, run_name=name, tags={**tags, **(extra_tags or {})})
        out = cls(client, uri, run.info.run_id, number, str(label) if label else None, experiment)
        log_params(client, out.run_id, {k: param_value(v) for k, v in knobs.items()})
        return out

    def env(self) -> dict[str, str]:
        return {MLFLOW_URI_ENV: self.uri, MLFLOW_RUN_ID_ENV: self.run_id}

    def finish(self, result: TrialResult, *, reason: str, artifacts: Iterable[Path] = (),
               step_log: Any = None, objective_metric: str | None = None, device_peak: Any = None) -> None:
        """Record the outcome and end the run (FINISHED/FAILED/KILLED). Never raises: a tracking
        failure here must not lose the trial's result to the sweeper; it is logged instead."""
        from mlflow.entities import Metric, RunTag

        try:
            now = int(time.time() * 1000)
            metrics = [Metric(k, float(v), now, 0) for k, v in
                       ((objective_key(result.outcome), result.objective), ("peak_memory_gb", result.peak_memory_gb),
                        ("predicted_peak_gb", result.predicted_peak_gb),
                        ("trial.duration_s", result.duration_s), ("trial.steps", result.steps))
                       if v is not None]
            metrics += [Metric(f"objective.{k}", float(v), now, 0) for k, v in result.metrics.items()]
            metrics += [Metric(sanitize_metric_key(k), float(v), now, 0) for k, v in result.predicted.items()]
            tags = [RunTag("trial.outcome", result.outcome), RunTag("trial.reason", reason[:5000]),
                    RunTag("trial.backend", result.backend)]
            if device_peak is not None:      # verlsweep.tracking.system_metrics.DevicePeak
                from verlsweep.tracking.system_metrics import phase_of

                metrics.append(Metric("peak_device_hbm_gb", float(device_peak.hbm_gb), now, 0))
                phase = phase_of(device_peak.at, getattr(step_log, "arrived", {}) or {})
                tags += [RunTag("peak_device_hbm.device", device_peak.device), RunTag("peak_device_hbm.phase", phase)]
            self.client.log_batch(self.run_id, metrics=metrics, tags=tags)
            if self.label:     # the name says the outcome once it is known
                self.client.update_run(self.run_id, name=trial_label(self.number, result.outcome, self.label))
            if step_log is not None and objective_metric:
                self._backfill_steps(step_log, objective_metric)
            for path in artifacts:
                if path.is_file():
                    self.client.log_artifact(self.run_id, str(path))
        except Exception as exc:
            log.error("MLflow: could not record trial run %s: %s", self.run_id, exc)
        finally:
            try:
                self.client.set_terminated(self.run_id, status_for(result.outcome))
            except Exception as exc:
                log.error("MLflow: could not end trial run %s: %s", self.run_id, exc)

    def _backfill_steps(self, step_log: Any, objective_metric: str) -> None:
        """verl logs per-step metrics itself; when that failed (it only warns, 'Proceeding without
        MLflow tracking'), log the steps read from its file logger so no measurement is lost."""
        from mlflow.entities import Metric, RunTag

        if not len(step_log):
            return
        have = self.client.get_run(self.run_id).data.metrics
        if sanitize_metric_key(objective_metric) in have:
            return
        now = int(time.time() * 1000)
        batch = [Metric(sanitize_metric_key(k), v, now, step)
                 for step, data in sorted(step_log.steps.items()) for k, v in data.items()]
        for i in range(0, len(batch), 1000):
            self.client.log_batch(self.run_id, metrics=batch[i:i + 1000])
        self.client.log_batch(self.run_id, tags=[RunTag("trial.metrics_source", "verlsweep backfill")])



def record_slurm_job(uri: str, job_id: str, state: str, outcome: str | None) -> str | None:
    """Tag the run of the trial that ran as Slurm job `job_id` (found by its `slurm.job_id` tag) with the
    job's final `slurm.state`; when the scheduler killed the job (`outcome` given), also end the run with
    that outcome: the job may have died before it could end the run itself. Returns the run id, None if
    no run carries the tag. Never raises: the outcome still reaches the sweeper."""
    from mlflow.entities import RunTag

    from verlsweep.common.slurm import JOB_ID_TAG, STATE_TAG

    try:
        client = client_for(uri)
        exps = [e.experiment_id for e in client.search_experiments()]
        runs = client.search_runs(exps, filter_string=f"tags.`{JOB_ID_TAG}` = '{job_id}'", max_results=1) if exps else []
        if not runs:
            return None
        run_id = runs[0].info.run_id
        tags = [RunTag(STATE_TAG, state)]
        if outcome is not None:
            tags += [RunTag("trial.outcome", outcome), RunTag("trial.reason", f"Slurm job {job_id} ended {state}")]
        client.log_batch(run_id, tags=tags)
        if outcome is not None:
            client.set_terminated(run_id, status_for(outcome))
        return run_id
    except Exception as exc:
        log.error("MLflow: could not record Slurm job %s on its run: %s", job_id, exc)
        return None
