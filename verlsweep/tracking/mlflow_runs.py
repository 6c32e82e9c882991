"""MLflow: one experiment per study, one parent run per study, a nested child run per trial.
This module holds the child run (TrialRun) and what every run shares (params, status, metric names);
verlsweep.tracking.store the store and the experiment (its names stay importable from here);
verlsweep.tracking.sweep_run the parent run; verlsweep.tracking.study_runs a study's runs as a whole.

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

import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verlsweep.common.labels import trial_label
from verlsweep.common.names import MLFLOW_RUN_ID_ENV, MLFLOW_URI_ENV, PEAK_MEMORY_METRIC, REDACTED, SECRET_NAME
from verlsweep.common.result import TrialResult
from verlsweep.common.stack import read_stack, stack_tags
from verlsweep.config import TaskConfig, plain, read
from verlsweep.tracking import run_columns
from verlsweep.tracking.store import artifact_location, client_for, ensure_experiment, experiment_name, tracking_uri

log = logging.getLogger("verlsweep.tracking.mlflow_runs")

PARENT_RUN_KEY = "tracking.parent_run_id"
# verl/utils/tracking.py _MlflowLoggingAdapter._sanitize_key: the names verl's metrics get in MLflow
_INVALID_METRIC_CHARS = re.compile(r"[^/\w.\- :]")

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


def status_for(outcome: str) -> str:
    """FINISHED for a completed trial, KILLED for one we stopped, FAILED for the rest."""
    return STATUS_BY_OUTCOME.get(outcome, "FAILED")


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Values of variables named like credentials never leave the machine (params, artifacts)."""
    return {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in env.items()}


def filter_literal(value: Any) -> str:
    """A string literal for MLflow's search filter. Its grammar has no escapes (a backslash is kept
    as it is), so the value goes in the quotes it does not contain: single, else double."""
    text = str(value)
    return f'"{text}"' if "'" in text else f"'{text}'"


def sanitize_metric_key(key: str) -> str:
    return _INVALID_METRIC_CHARS.sub("_", re.sub(r"/+", "/", key.replace("@", "_at_")))


def log_params(client, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    # only environment variables carry credentials; verl keys such as ppo_max_token_len_per_gpu stay
    items = [Param(k, REDACTED if k.startswith("env.") and SECRET_NAME.search(k) else str(v))
             for k, v in params.items()]
    for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])


def group_tags(cfg: Any) -> dict[str, str]:
    """The recipe's options by name: `cfg` is a trial's TaskConfig or the composed config of a sweep (its
    parent run), which name them at the same paths."""
    from omegaconf import DictConfig

    from verlsweep.command import recipe_capture, recipe_config

    if isinstance(cfg, DictConfig):
        cfg = recipe_config.own_config(cfg)      # a recipe script's sweep: its own model and algorithm
    tags = {
        "sweep.hardware": str(cfg.hardware.name),
        "sweep.algorithm": str(cfg.algorithm.name),
        "sweep.model": str(cfg.model.name),
    }
    script = getattr(cfg.runner, "script", None) if cfg.runner.name == "script" else None
    if script:                                   # the recipe script the runs ran, and which version of it
        path = recipe_capture.script_path(str(script))
        tags.update({"recipe.script": str(path), "recipe.sha256": recipe_capture.sha256(path)})
    return tags


def param_value(value: Any) -> str:
    """Strings as they are, other values in Hydra's override syntax: a param pastes back as an override."""
    from verlsweep.command.overrides import format_value

    value = plain(value)
    try:
        text = value if isinstance(value, str) else format_value(value)
    except TypeError:
        text = str(value)
    return text[:6000]      # MLflow 3's param value limit


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
    name_word: str | None = None      # said after the name, kept when the outcome renames it (`edge probe`)

    @classmethod
    def start(cls, config: TaskConfig | Mapping[str, Any], knobs: Mapping[str, Any],
              extra_tags: Mapping[str, str] | None = None, name_word: str | None = None) -> TrialRun:
        """Create the run before launch. `config`: the trial's TaskConfig (a composed config is read into
        one); `knobs`: the trial's swept/overridden values (dotted keys); `extra_tags`: tags it starts with
        (the Slurm job id, so a killed job's run can be found); `name_word`: said after the run's name
        (`edge probe`)."""
        task = read(config)
        trial = task.trial
        uri = tracking_uri(task)
        client = client_for(uri)
        parent = task.tracking.parent_run_id
        if parent:
            exp_id = client.get_run(parent).info.experiment_id
            experiment = None
        else:
            experiment = experiment_name(task)
            exp_id = ensure_experiment(client, experiment, artifact_location(task, experiment))
        tags = {
            "trial.number": "" if trial.number is None else str(trial.number),
            "trial.outcome": "running",
            **run_columns.colour("running"),
            "mlflow.note.content": METRIC_NOTES,
            "sweep.runner": task.runner.name,
            **group_tags(task),
        }
        if trial.study_name:
            tags["sweep.study"] = trial.study_name
        if task.runner.name != "estimate":      # an estimate's measurement is the prediction: not a record
            tags.update(stack_tags(read_stack()))    # read here, in the trial's process on its node
        if parent:
            tags["mlflow.parentRunId"] = parent
        run = client.create_run(exp_id, run_name=" ".join(filter(None, (trial.run_name, name_word))),
                                tags={**tags, **(extra_tags or {})})
        out = cls(client, uri, run.info.run_id, trial.number, trial.label, experiment, name_word)
        # the knobs under the names of its label too (`util`, `tp`, `off`): the columns the sweep's view shows
        params = {k: param_value(v) for k, v in knobs.items()}
        log_params(client, out.run_id, {**run_columns.label_params(trial.label), **params})
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
            shown, shown_tags = run_columns.derived({"objective": result.objective if result.outcome == "completed"
                                                     else None, **result.predicted})
            metrics += [Metric(k, v, now, 0) for k, v in shown.items()]
            tags = [RunTag("trial.outcome", result.outcome), RunTag("trial.reason", reason[:5000]),
                    RunTag("trial.backend", result.backend)]
            tags += [RunTag(k, v) for k, v in {**shown_tags, **run_columns.colour(result.outcome)}.items()]
            if device_peak is not None:      # verlsweep.tracking.system_metrics.DevicePeak
                from verlsweep.tracking.system_metrics import phase_of

                metrics.append(Metric("peak_device_hbm_gb", float(device_peak.hbm_gb), now, 0))
                phase = phase_of(device_peak.at, getattr(step_log, "arrived", {}) or {})
                tags += [RunTag("peak_device_hbm.device", device_peak.device), RunTag("peak_device_hbm.phase", phase)]
            self.client.log_batch(self.run_id, metrics=metrics, tags=tags)
            if self.label:     # the name says the outcome once it is known
                name = trial_label(self.number, result.outcome, self.label)
                self.client.update_run(self.run_id, name=" ".join(filter(None, (name, self.name_word))))
            if step_log is not None and objective_metric:
                self._backfill_steps(step_log, objective_metric)
            for path in artifacts:
                if path.is_file():
                    self.client.log_artifact(self.run_id, str(path))
        except Exception as exc:  # noqa: BLE001 - the trial's own files keep the record; the sweep goes on
            log.error("MLflow: could not record trial run %s: %s", self.run_id, exc)
        finally:
            try:
                self.client.set_terminated(self.run_id, status_for(result.outcome))
            except Exception as exc:  # noqa: BLE001 - reconcile ends a run left running
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
        found = f"tags.`{JOB_ID_TAG}` = {filter_literal(job_id)}"
        runs = client.search_runs(exps, filter_string=found, max_results=1) if exps else []
        if not runs:
            return None
        run_id = runs[0].info.run_id
        tags = [RunTag(STATE_TAG, state)]
        if outcome is not None:
            tags += [RunTag("trial.outcome", outcome), RunTag("trial.reason", f"Slurm job {job_id} ended {state}")]
            tags += [RunTag(k, v) for k, v in run_columns.colour(outcome).items()]
        client.log_batch(run_id, tags=tags)
        if outcome is not None:
            client.set_terminated(run_id, status_for(outcome))
        return run_id
    except Exception as exc:  # noqa: BLE001 - sacct keeps the job's record; the sweep goes on
        log.error("MLflow: could not record Slurm job %s on its run: %s", job_id, exc)
        return None
