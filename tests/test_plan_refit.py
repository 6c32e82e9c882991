"""Re-fitting the planner to an MLflow experiment (verlsweep/plan/fit/refit.py, `python -m verlsweep.plan refit`).

The store is a real sqlite MLflow store filled through verlsweep.tracking.mlflow_runs's own functions (parent
sweep run, child trial runs with their knobs) plus per-step metrics as verl's MLflow logger writes them.
The measurements are made by the planner itself with known "true" constants, so the fit must find them.
"""
from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import copy_store
from verlsweep.command import knobs
from verlsweep.command.compose import compose_config
from verlsweep.common.result import TrialResult
from verlsweep.plan import from_cfg, predict_cfg
from verlsweep.plan.cli import main
from verlsweep.plan.fit import refit
from verlsweep.plan.fit.measured_fit import Sample, predict_sample
from verlsweep.plan.predictor import calibration
from verlsweep.tracking import mlflow_runs as tracking
from verlsweep.tracking import sweep_run
from verlsweep.tracking.system_metrics import DevicePeak

CAL = calibration.load()
TRUTH = replace(CAL.constants, decode_bw_efficiency=0.35, train_mfu=0.30, logits_bytes=7.0)
EXPERIMENT = "refit_study"
R = "verl.actor_rollout_ref.rollout"
A = "verl.actor_rollout_ref.actor"
# trials of a sweep: (swept knobs, mean prompt / response tokens verl would log)
TRIALS = [
    ([f"{R}.gpu_memory_utilization=0.5", f"{R}.tensor_model_parallel_size=2"], 110, 700),
    ([f"{R}.gpu_memory_utilization=0.7", f"{R}.tensor_model_parallel_size=1"], 95, 1200),
    ([f"{R}.gpu_memory_utilization=0.6", f"{R}.tensor_model_parallel_size=4"], 120, 1500),
    ([f"{R}.gpu_memory_utilization=0.8", f"{R}.tensor_model_parallel_size=2", f"{A}.ppo_mini_batch_size=64"], 100, 400),
    ([f"{R}.gpu_memory_utilization=0.4", f"{R}.tensor_model_parallel_size=8"], 105, 1900),
    ([f"{R}.gpu_memory_utilization=0.6", f"{R}.tensor_model_parallel_size=2", "verl.data.train_batch_size=64"],
     100, 900),
]
BASE = ["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax", f"tracking.experiment={EXPERIMENT}"]


def _log_steps(client: MlflowClient, run_id: str, per_step: dict[str, float], steps: int = 3) -> None:
    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, v, now, s) for s in range(1, steps + 1) for k, v in per_step.items()])


@pytest.fixture(scope="module")
def experiment(empty_mlflow_db, tmp_path_factory):
    """One sweep's parent run and its trials, as verlsweep.tracking.mlflow_runs and verl would leave them."""
    uri = copy_store(empty_mlflow_db, tmp_path_factory.mktemp("refit"))
    base = compose_config([*BASE, f"tracking.uri={uri}"])
    search = {f"{R}.gpu_memory_utilization": "interval(0.3,0.9)", f"{R}.tensor_model_parallel_size": "choice(1,2,4,8)"}
    parent = sweep_run.start_sweep_run(base, EXPERIMENT, search, sampler="tpe")
    client = MlflowClient(uri)
    for number, (swept, prompt, response) in enumerate(TRIALS):
        overrides = [*BASE, f"tracking.uri={uri}", f"tracking.parent_run_id={parent}", f"trial.number={number}", *swept]
        cfg = compose_config(overrides)
        run = tracking.TrialRun.start(cfg, knobs.knobs(cfg, swept))
        truth_inputs = from_cfg(compose_config([*overrides, f"plan.prompt_tokens={prompt}",
                                                f"plan.response_tokens={response}"]))
        _log_steps(client, run.run_id, {
            "perf/throughput": predict_sample(Sample("", truth_inputs, "throughput", 1.0), TRUTH),
            "actor/perf/max_memory_allocated_gb": predict_sample(Sample("", truth_inputs, "memory", 1.0), TRUTH),
            "prompt_length/mean": prompt, "response_length/mean": response,
        })
        device_peak = DevicePeak(predict_sample(Sample("", truth_inputs, "device_memory", 1.0), TRUTH), "npu 0",
                                 time.time())
        run.finish(TrialResult("completed", backend="verl"), reason="exit 0", device_peak=device_peak)
    # runs a refit must leave alone: a prediction, and a trial that never completed
    cfg = compose_config([*BASE, f"tracking.uri={uri}", f"tracking.parent_run_id={parent}", "trial.number=90"])
    est = tracking.TrialRun.start(cfg, {})
    _log_steps(client, est.run_id, {"perf/throughput": 1e6, "actor/perf/max_memory_allocated_gb": 1.0})
    est.finish(TrialResult("completed", backend="estimate"), reason="estimated")
    oom = tracking.TrialRun.start(cfg, {})
    oom.finish(TrialResult("oom", backend="verl"), reason="NPU out of memory")
    sweep_run.finish_sweep_run(base, parent)
    return uri


@pytest.mark.slow
def test_harvest_rebuilds_each_real_completed_trial_with_its_measured_lengths(experiment):
    got = refit.harvest(experiment, EXPERIMENT)
    assert len(got.runs) == len(TRIALS)
    assert any("estimate" in why for why in got.skipped.values())          # predictions never feed the fit
    tps = sorted(s.inputs.rollout.tp for s in got.samples if s.kind == "throughput")
    assert tps == sorted(int(t[0][1].rsplit("=", 1)[1]) for t in TRIALS)
    lengths = sorted(s.inputs.response_tokens for s in got.samples if s.kind == "memory")
    assert lengths == sorted(float(t[2]) for t in TRIALS)
    # the device monitor's peak is a sample of its own, next to verl's allocator peak
    assert sum(s.kind == "device_memory" for s in got.samples) == len(TRIALS)


def _logits_bytes_fittable(tmp_path: Path) -> Path:
    """The packaged calibration with logits_bytes left to the fit, as a user may opt in (the packaged
    one takes it from traces, verlsweep/plan/fit/trace_fit.py)."""
    text = calibration.DEFAULT_PATH.read_text()
    head, tail = text.split("  logits_bytes:\n", 1)
    tail = re.sub(r"^    fit: false[^\n]*", "    fit: true", tail, count=1, flags=re.M)
    path = tmp_path / "cal.yaml"
    path.write_text(head + "  logits_bytes:\n" + tail)
    assert "logits_bytes" in calibration.load(path).fitted
    return path


@pytest.mark.slow
def test_refit_recovers_the_constants_the_measurements_came_from(experiment, tmp_path):
    _, got, result = refit.refit(experiment, EXPERIMENT, calibration=_logits_bytes_fittable(tmp_path),
                                 with_known_points=False)
    for name in ("decode_bw_efficiency", "train_mfu", "logits_bytes"):
        assert getattr(result.constants, name) == pytest.approx(getattr(TRUTH, name), rel=0.03), name
    assert result.worst() < 0.01 < result.worst("before")


@pytest.mark.slow
def test_the_refit_subcommand_writes_a_calibration_the_planner_then_uses(experiment, tmp_path, capsys):
    out = tmp_path / "refit.yaml"
    assert main(["refit", "--tracking-uri", experiment, "--experiment", EXPERIMENT, "--out", str(out)]) == 0
    assert f"{len(TRIALS)} trials used" in capsys.readouterr().out
    fitted = calibration.load(out)
    assert fitted.constants.decode_bw_efficiency != CAL.constants.decode_bw_efficiency
    assert [p.id for p in fitted.points] == [p.id for p in CAL.points]      # the known points stay
    default = predict_cfg(compose_config(["algorithm=remax"]))
    refitted = predict_cfg(compose_config(["algorithm=remax", f"plan.calibration={out}"]))
    assert refitted.tok_s != pytest.approx(default.tok_s, rel=1e-3)


def test_refit_names_a_missing_experiment(empty_mlflow_db, tmp_path, capsys):
    uri = copy_store(empty_mlflow_db, tmp_path)
    assert main(["refit", "--tracking-uri", uri, "--experiment", "nope", "--out", str(tmp_path / "x.yaml")]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_each_launched_trial_keeps_the_stack_read_in_its_process_and_an_estimate_none(experiment):
    from verlsweep.common.stack import STACK_TAG, digest, read_stack

    client = MlflowClient(experiment)
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id],
                              filter_string="tags.`trial.outcome` = 'completed'")
    assert {r.data.tags.get(STACK_TAG) for r in runs} == {digest(read_stack())}
    cfg = compose_config([*BASE, f"tracking.uri={experiment}", "runner=estimate", "trial.number=91"])
    estimate = tracking.TrialRun.start(cfg, {})
    assert STACK_TAG not in client.get_run(estimate.run_id).data.tags     # its measurement is the prediction
