"""Re-fit the planner's constants to the trials of an MLflow experiment.

What a trial's run holds (verlsweep/tracking/mlflow_runs.py): tags `sweep.hardware` / `sweep.model` /
`sweep.algorithm`, `trial.outcome`, `trial.backend`; params = the trial's overridden verl keys (dotted,
in Hydra override syntax) on top of its parent sweep run's fixed verl keys; metrics = verl's per-step
`perf/throughput`, `actor/perf/max_memory_allocated_gb`, `prompt_length/mean`, `response_length/mean`,
and the device monitor's `peak_device_hbm_gb`. Each completed trial from a real backend is re-composed
from those (same conf/, same overrides) and becomes a throughput sample, a trainer-memory sample (verl's
allocator peak) and a device-memory sample (the monitor's peak) with its own measured lengths.
"""
from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verlsweep.command.compose import compose_config
from verlsweep.common.names import PEAK_MEMORY_METRIC
from verlsweep.plan.fit import calibration_file
from verlsweep.plan.fit.measured_fit import FitResult, Sample, fit
from verlsweep.plan.fit.points import samples as point_samples
from verlsweep.plan.predictor import calibration as calibration_mod
from verlsweep.plan.predictor.calibration import Calibration
from verlsweep.plan.predictor.inputs import from_cfg
from verlsweep.plan.predictor.trial_spec import NotPlannable

log = logging.getLogger(__name__)

THROUGHPUT = "perf/throughput"
PEAK = PEAK_MEMORY_METRIC        # the same meaning as every runner's peak_memory_gb
DEVICE_PEAK = "peak_device_hbm_gb"
PROMPT_LEN = "prompt_length/mean"
RESPONSE_LEN = "response_length/mean"


@dataclass
class Harvest:
    samples: list[Sample] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)      # run id -> why
    runs: list[str] = field(default_factory=list)               # run ids used
    redacted: set[str] = field(default_factory=set)             # params stored as REDACTED: composed defaults used
    sample_runs: list[str] = field(default_factory=list)        # the run id of each sample


def _history_mean(client: Any, run_id: str, key: str, warmup_steps: int) -> float | None:
    values = [m.value for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]
    later = [v for v in values[warmup_steps:] if v == v]     # drop NaN
    usable = later or [v for v in values if v == v]
    return statistics.fmean(usable) if usable else None


def _history_max(client: Any, run_id: str, key: str) -> float | None:
    values = [m.value for m in client.get_metric_history(run_id, key) if m.value == m.value]
    return max(values) if values else None


def _overrides(run: Any, parent_params: dict[str, str], redacted: set[str]) -> list[str]:
    """Overrides that re-compose the trial: its groups from tags, verl keys from params."""
    from verlsweep.common.names import REDACTED

    tags = run.data.tags
    out = [f"hardware={tags['sweep.hardware']}", f"model={tags['sweep.model']}",
           f"algorithm={tags['sweep.algorithm']}"]
    params = {**parent_params, **run.data.params}       # the trial's own values win
    for key, value in params.items():
        if value == REDACTED:                           # the tracker hid it: the composed value stands
            redacted.add(key)
            continue
        if key.startswith("env."):
            out.append(f"++{key}={value}")
        elif "/" not in key and "." in key:             # verl logs its own config with slash keys; a
            # dotless param is a label's short name (`util`, `tp`: verlsweep.tracking.run_columns)
            out.append(f"verl.{key}={value}")
    # the device count verl ran with (trainer.* follow hardware.* in conf/device)
    if "trainer.n_gpus_per_node" in params:
        out.append(f"hardware.devices_per_node={params['trainer.n_gpus_per_node']}")
    if "trainer.nnodes" in params:
        out.append(f"hardware.nnodes={params['trainer.nnodes']}")
    return out


def harvest(tracking_uri: str, experiment: str, *, warmup_steps: int = 1,
            include_estimates: bool = False) -> Harvest:
    """Samples from every completed trial of `experiment` that ran on real hardware."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise ValueError(f"no MLflow experiment {experiment!r} at {tracking_uri}")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`trial.outcome` = 'completed'",
                              max_results=10_000)
    return harvest_runs(client, runs, warmup_steps=warmup_steps, include_estimates=include_estimates)


def harvest_runs(client: Any, runs: list[Any], *, warmup_steps: int = 1, include_estimates: bool = False) -> Harvest:
    """Samples from these completed trial runs (of any experiment); `sample_runs` says whose each is."""
    out = Harvest()
    parents: dict[str, dict[str, str]] = {}
    for run in runs:
        rid = run.info.run_id
        tags = run.data.tags
        if tags.get("trial.backend") == "estimate" and not include_estimates:
            out.skipped[rid] = "backend estimate (a prediction, not a measurement)"
            continue
        if not all(k in tags for k in ("sweep.hardware", "sweep.model", "sweep.algorithm")):
            out.skipped[rid] = "no sweep.hardware/model/algorithm tags"
            continue
        parent = tags.get("mlflow.parentRunId")
        if parent and parent not in parents:
            parents[parent] = dict(client.get_run(parent).data.params)
        tok_s = _history_mean(client, rid, THROUGHPUT, warmup_steps)
        peak = _history_max(client, rid, PEAK)
        device_peak = run.data.metrics.get(DEVICE_PEAK)
        if tok_s is None and peak is None and device_peak is None:
            out.skipped[rid] = f"no {THROUGHPUT} or {PEAK} metric"
            continue
        overrides = _overrides(run, parents.get(parent, {}), out.redacted)
        for key, name in ((PROMPT_LEN, "prompt_tokens"), (RESPONSE_LEN, "response_tokens")):
            mean = _history_mean(client, rid, key, warmup_steps)
            if mean:
                overrides.append(f"plan.{name}={mean:.1f}")
        try:
            # the fit sets the analytic formula's constants: traced terms would hide them
            inputs = from_cfg(compose_config([*overrides, "plan.trainer=analytic"]))
        except NotPlannable as exc:
            out.skipped[rid] = f"not plannable: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001 - a config that no longer composes (renamed group, removed key)
            out.skipped[rid] = f"does not compose: {type(exc).__name__}: {exc}"
            continue
        label = f"{tags.get('mlflow.runName', rid)}"
        for kind, value, what in (("throughput", tok_s, "tok/s"), ("memory", peak, "peak"),
                                  ("device_memory", device_peak, "device peak")):
            if value is not None:
                out.samples.append(Sample(f"{label} {what}", inputs, kind, value))
                out.sample_runs.append(rid)
        out.runs.append(rid)
    return out


def refit(tracking_uri: str, experiment: str, *, calibration: str | Path | None = None,
          with_known_points: bool = True, warmup_steps: int = 1) -> tuple[Calibration, Harvest, FitResult]:
    """Fit the calibration's constants to the experiment's trials (plus its own known points)."""
    cal = calibration_mod.load(calibration)
    got = harvest(tracking_uri, experiment, warmup_steps=warmup_steps)
    samples = (point_samples(cal) if with_known_points else []) + got.samples
    if not got.samples:
        log.warning("no usable trial in %s: the fit uses the known points only", experiment)
    return cal, got, fit(cal, samples)


def write(cal: Calibration, result: FitResult, got: Harvest, experiment: str, tracking_uri: str, out: Path) -> Path:
    note = (f"refit from MLflow experiment {experiment!r} at {tracking_uri}: {len(got.runs)} trials; "
            + ", ".join(f"{k} {a:.4g} -> {b:.4g}" for k, (a, b) in result.changed.items()))
    return calibration_file.write(cal, result.constants, out, note=note)
