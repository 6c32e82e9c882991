"""The planner calibrated from the trials measured on one software stack (verlsweep/plan/fit/stack_calibration.py)."""
from __future__ import annotations

from dataclasses import replace
from importlib.metadata import version
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.standin.truth import STACK_A, STACK_B, TRUTHS, _true_calibration
from verlsweep.command.compose import compose_config
from verlsweep.common.stack import PACKAGES, STACK_ENV, digest, from_tags, read_stack, stack_tags
from verlsweep.plan.cli.main import main
from verlsweep.plan.fit.measured_fit import Sample, predict_sample
from verlsweep.plan.fit.stack_calibration import calibrate_samples, stack_runs
from verlsweep.plan.predictor import band
from verlsweep.plan.predictor.calibration import load
from verlsweep.plan.predictor.inputs import from_cfg

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
STACK = read_stack({STACK_ENV: STACK_A})


def _inputs(hardware: str, util: float):
    return replace(from_cfg(compose_config([f"hardware={hardware}", f"{UTIL}={util}"])), trainer="analytic")


def _measured(truth_stack: str, points: list[tuple[str, float]]) -> list[Sample]:
    true = _true_calibration(load(), TRUTHS[truth_stack]).constants
    out = []
    for hardware, util in points:
        inputs = _inputs(hardware, util)
        for kind in ("device_memory", "throughput"):
            probe = Sample("", inputs, kind, 1.0)
            out.append(Sample(f"{hardware} {util} {kind}", inputs, kind, predict_sample(probe, true)))
    return out


def test_the_stack_is_read_from_the_environment_and_named_by_a_digest_of_its_parts() -> None:
    assert STACK["cann"] == "8.1.RC1" and STACK["verl"] == "0.5.0"
    assert digest(STACK) == digest(dict(reversed(list(STACK.items()))))
    assert digest(STACK) != digest(read_stack({STACK_ENV: STACK_B}))
    assert from_tags(stack_tags(STACK)) == STACK
    found = read_stack({})         # nothing stated: the versions installed here, read, not assumed
    assert all(found[k] == version(k) for k in PACKAGES if k in found) and "torch" in found


def test_too_few_trials_keep_the_packaged_constants_and_say_why() -> None:
    samples = _measured(STACK_A, [("a2_64g", 0.5), ("a2_64g", 0.6)])
    got = calibrate_samples(load(), samples, ["r1", "r1", "r2", "r2"], {}, STACK)
    assert not got.calibrated and got.calibration.constants == load().constants
    assert "too few trials (2 of the 3 needed)" in got.line(), got.line()


def test_device_peaks_of_two_studies_refit_the_runtime_reserve_and_narrow_the_rollout_band() -> None:
    samples = _measured(STACK_A, [("a2_64g", 0.4), ("a2_64g", 0.6), ("a3_64g", 0.5), ("a3_64g", 0.7)])
    runs = [r for r in ("r1", "r2", "r3", "r4") for _ in range(2)]
    got = calibrate_samples(load(), samples, runs, {"r1": "s1", "r2": "s1", "r3": "s2", "r4": "s2"}, STACK)
    assert got.calibrated, got.line()
    assert got.line().startswith(f"planner calibrated on 4 trials of 2 studies on stack {digest(STACK)}")
    assert "held-out peak error" in got.line() and got.held_out["device_memory"] < got.packaged["device_memory"]
    c = got.calibration.constants
    assert c.runtime_context_gb == pytest.approx(TRUTHS[STACK_A].runtime_context_gb, rel=0.05)
    assert c.rollout_band_error < load().constants.rollout_band_error


def test_trials_the_packaged_constants_already_predict_give_no_held_out_gain() -> None:
    c = load().constants
    samples = [replace(s, measured=predict_sample(s, c))
               for s in _measured(STACK_A, [("a2_64g", 0.4), ("a2_64g", 0.6), ("a3_64g", 0.5)])]
    got = calibrate_samples(load(), samples, [r for r in ("r1", "r2", "r3") for _ in range(2)], {}, STACK)
    assert not got.calibrated and "no held-out gain" in got.line(), got.line()


def _record(client: MlflowClient, experiment: str, stack: str, hardware: str, util: float) -> str:
    cfg = compose_config([f"hardware={hardware}", f"{UTIL}={util}"])
    from tests.support.standin.truth import measure

    tok_s, peak, _ = measure(cfg, stack)
    # verl's allocator peak, 8% under the planner's analytic trainer peak (the prediction harvest_runs makes)
    trainer_peak = 0.92 * predict_sample(Sample("", _inputs(hardware, util), "memory", 1.0), load().constants)
    exp = client.get_experiment_by_name(experiment) or client.get_experiment(client.create_experiment(experiment))
    tags = {"sweep.hardware": hardware, "sweep.model": "qwen3_8b", "sweep.algorithm": "grpo",
            "trial.outcome": "completed", "trial.backend": "verl", "sweep.study": experiment,
            **stack_tags(read_stack({STACK_ENV: stack}))}
    run = client.create_run(exp.experiment_id, tags=tags)
    client.log_param(run.info.run_id, UTIL.removeprefix("verl."), util)
    client.log_metric(run.info.run_id, "peak_device_hbm_gb", peak)
    for step in (1, 2):
        client.log_metric(run.info.run_id, "perf/throughput", tok_s, step=step)
        client.log_metric(run.info.run_id, "actor/perf/max_memory_allocated_gb", trainer_peak, step=step)
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def test_the_table_and_the_export_calibrate_on_this_stacks_trials_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    ours = {_record(client, "a2 sweep", STACK_A, "a2_64g", u) for u in (0.4, 0.5, 0.6)}
    _record(client, "old stack", STACK_B, "a2_64g", 0.5)
    assert {r.info.run_id for r in stack_runs(client, digest(STACK))} == ours
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv(STACK_ENV, STACK_A)
    out = tmp_path / "site.yaml"
    assert main(["calibrate", "hardware=a3_64g", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"planner calibrated on 3 trials of 1 study on stack {digest(STACK)}" in printed, printed
    assert "trainer band ±8.0% for analytic terms" in printed, printed
    assert load(out).constants.runtime_context_gb > 2.0
    assert load(out).constants.trainer_band_error_analytic == pytest.approx(0.08)
    assert main(["hardware=a3_64g", "plan.calibrate=true", "--util", "0.5", "--tp", "2"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("planner calibrated on 3 trials"), "the table's header says so"
    words = " ".join(table.split())          # the console folds long lines
    assert words.index("trainer band ±8.0% for analytic terms") < words.index("qwen3_8b grpo on a3_64g"), \
        "the header names the band"
    rollout = load(out).constants.rollout_band_error
    assert rollout < band.ROLLOUT_ERROR and f"(trainer terms ±8.0%, other modelled terms ±{rollout:.1%})" in words, \
        "and so does the legend, both parts as calibrated"
    assert main(["hardware=a3_64g", "plan.calibrate=false", "--util", "0.5", "--tp", "2"]) == 0
    assert "calibrated" not in capsys.readouterr().out.splitlines()[0]


def test_a_sweep_that_reads_another_stack_than_its_trials_is_told_where_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    # the trials ran on stack A (compute nodes); the process that plans reads stack B (a login node)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    for u in (0.4, 0.5, 0.6):
        _record(client, "a2 sweep", STACK_A, "a2_64g", u)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv(STACK_ENV, STACK_B)
    assert main(["hardware=a3_64g", "plan.calibrate=true", "--util", "0.5", "--tp", "2"]) == 0
    words = " ".join(capsys.readouterr().out.split())
    assert "planner not calibrated on stack" in words and "too few trials (0 of the 3 needed)" in words, words
    assert (f"The store has completed trials of other stacks: 3 on stack {digest(STACK)} (cann 8.1.RC1" in words
            and "state their stack with VERLSWEEP_STACK=part=version,..." in words), words


def test_the_guides_prediction_cache_is_keyed_by_the_calibration() -> None:
    from verlsweep.study.guide import Planned, prediction_cache_path

    cal = load()
    calibrated = replace(cal, constants=replace(cal.constants, runtime_context_gb=4.0))
    assert (prediction_cache_path(Planned(cal, [], []), 8, 0.2, 0)
            != prediction_cache_path(Planned(calibrated, [], []), 8, 0.2, 0))
