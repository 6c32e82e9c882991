"""The trainer part of the veto's error band comes from the allocator peaks measured on the stack
(verlsweep/plan/fit/trainer_band.py through verlsweep/plan/fit/stack_calibration.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.common.names import PEAK_MEMORY_METRIC
from verlsweep.common.stack import STACK_ENV, read_stack, stack_tags
from verlsweep.plan import from_cfg, predict, predict_cfg
from verlsweep.plan.fit import calibration_file
from verlsweep.plan.fit.measured_fit import Sample, predict_sample
from verlsweep.plan.fit.stack_calibration import STACK_TERMS, calibrate_samples, for_config
from verlsweep.plan.predictor import band, traced_terms
from verlsweep.plan.predictor.calibration import load

ACTOR = "verl.actor_rollout_ref.actor"
ROLLOUT = "verl.actor_rollout_ref.rollout"
# remax on a 64 GB A2 without offload: at util 0.8 the rollout needs 62.8 GiB of 60.7, 60.1 at the
# favourable end of the packaged analytic band (tests/test_plan_band.py)
EDGE = ["hardware=a2_64g", "algorithm=remax", "plan.trainer=analytic", f"{ACTOR}.fsdp_config.param_offload=false",
        f"{ACTOR}.fsdp_config.optimizer_offload=false", f"{ROLLOUT}.gpu_memory_utilization=0.8"]
STACK = read_stack({STACK_ENV: "cann=8.1.RC1,verl=0.5.0"})


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Traced trainer terms without tracing: a fixed micro batch for every traced pass."""
    monkeypatch.setattr(traced_terms, "pass_terms", lambda inp, role, tokens, *, update:
                        traced_terms.TracedTerms(work=3.0, step=0.5) if inp.trainer == "traced" else None)


def _peaks(ratios: list[float], trainer: str = "analytic") -> tuple[list[Sample], list[str]]:
    """One allocator peak per trial, measured at `ratio` x what the planner predicts (`trainer` terms)."""
    samples, runs = [], []
    for i, ratio in enumerate(ratios):
        inputs = from_cfg(compose_config(["hardware=a2_64g", f"plan.trainer={trainer}",
                                          f"{ROLLOUT}.gpu_memory_utilization={0.4 + 0.05 * i}"]))
        predicted = predict_sample(Sample("", inputs, "memory", 1.0), load().constants)
        samples.append(Sample(f"t{i} peak", inputs, "memory", predicted * ratio))
        runs.append(f"r{i}")
    return samples, runs


def test_allocator_peaks_that_agree_with_the_prediction_narrow_the_analytic_trainer_band() -> None:
    samples, runs = _peaks([1.02, 0.93, 0.99])       # over-predicted by 7% at worst
    got = calibrate_samples(load(), samples, runs, dict.fromkeys(runs, "study"), STACK)
    c = got.calibration.constants
    assert got.calibrated and c.trainer_band_error_analytic == pytest.approx(0.07)
    assert c.trainer_band_error_traced == band.TRAINER_ERROR["traced"], "no peak was predicted with traced terms"
    assert band.trainer_error("analytic", c) == pytest.approx(0.07)
    line = got.line()
    assert line.startswith("planner calibrated on 3 trials of 1 study on stack "), line
    assert ("trainer band ±7.0% for analytic terms (worst over-prediction 7.0% of 3 trials' allocator peaks; "
            "packaged ±20.0%), traced stays ±6.8%") in line, line
    assert "the stack's terms stay packaged: too few trials (0 of the 3 needed)" in line, line


def test_peaks_the_planner_under_predicts_leave_the_floor_and_a_worse_stack_never_widens_the_packaged_band() -> None:
    under = calibrate_samples(load(), *_peaks([1.05, 1.10, 1.01]), {}, STACK)
    assert under.calibration.constants.trainer_band_error_analytic == pytest.approx(0.05)    # BAND_FLOOR
    over = calibrate_samples(load(), *_peaks([0.5, 0.9, 1.0]), {}, STACK)
    assert over.trainer.worst["analytic"] == pytest.approx(0.5)
    assert over.calibration.constants.trainer_band_error_analytic == band.TRAINER_ERROR["analytic"] == 0.2


def test_too_few_trials_with_an_allocator_peak_keep_the_trainer_band_packaged_and_say_why() -> None:
    got = calibrate_samples(load(), *_peaks([1.0, 0.98]), {}, STACK)
    assert not got.calibrated and got.calibration.constants == load().constants
    assert got.line().endswith("the trainer band stays packaged (traced ±6.8%, analytic ±20.0%): too few trials "
                               "with an allocator peak (analytic 2 of the 3 needed)"), got.line()
    none = calibrate_samples(load(), [], [], {}, STACK)
    assert "the trainer band stays packaged (traced ±6.8%, analytic ±20.0%): no allocator peak " \
           "(actor/perf/max_memory_allocated_gb) among its trials" in none.line(), none.line()


def test_the_trainer_peak_reads_none_of_the_terms_a_stack_calibration_refits() -> None:
    # why the trainer band needs no hold-out: a refit of the other kinds cannot move its prediction
    (sample,), _ = _peaks([1.0])
    c = load().constants
    moved = replace(c, **{n: getattr(c, n) * 1.7 for kind in STACK_TERMS for n in STACK_TERMS[kind]})
    assert predict_sample(sample, moved) == predict_sample(sample, c)


def test_an_edge_probe_of_the_packaged_band_is_vetoed_under_the_calibrated_band() -> None:
    inp = from_cfg(compose_config(EDGE))
    assert predict(inp, load()).status == "edge"
    got = calibrate_samples(load(), *_peaks([1.0, 0.97, 1.01]), {}, STACK)
    calibrated = predict(inp, got.calibration)
    assert calibrated.status == "infeasible" and calibrated.trainer_error == pytest.approx(0.05)
    assert calibrated.phases_low["rollout"] > calibrated.capacity_gb


def test_the_exported_calibration_file_round_trips_the_trainer_band_and_plans_with_it(tmp_path: Path) -> None:
    got = calibrate_samples(load(), *_peaks([1.0, 0.94, 1.01]), {}, STACK)
    path = calibration_file.write(load(), got.calibration.constants, tmp_path / "site.yaml", note=got.line())
    assert load(path).constants.trainer_band_error_analytic == pytest.approx(0.06)
    assert predict_cfg(compose_config([*EDGE, f"plan.calibration={path}"])).status == "infeasible"


def test_peaks_predicted_with_traced_terms_set_the_traced_band_and_a_failed_trace_counts_as_analytic(
        traced: None, monkeypatch: pytest.MonkeyPatch) -> None:
    samples, runs = _peaks([1.0, 0.94, 1.03], trainer="traced")
    got = calibrate_samples(load(), samples, runs, dict.fromkeys(runs, "s"), STACK)
    c = got.calibration.constants
    assert c.trainer_band_error_traced == pytest.approx(0.06) and c.trainer_band_error_analytic == 0.2
    assert "trainer band ±6.0% for traced terms" in got.line() and "analytic stays ±20.0%" in got.line()
    # the same peaks when the trace fails: the analytic formula predicted them, so they measure its band
    monkeypatch.setitem(traced_terms._FAILED, samples[0].inputs.model.hf_config, "too slow")
    failed = calibrate_samples(load(), samples, runs, {}, STACK).calibration.constants
    assert failed.trainer_band_error_traced == band.TRAINER_ERROR["traced"]
    assert failed.trainer_band_error_analytic < band.TRAINER_ERROR["analytic"]


def _record_peak(client: Any, ratio: float, util: float) -> None:
    """A completed trial run of STACK whose allocator peak is `ratio` x the analytic prediction."""
    inputs = from_cfg(compose_config(["hardware=a2_64g", "plan.trainer=analytic",
                                      f"{ROLLOUT}.gpu_memory_utilization={util}"]))
    peak = ratio * predict_sample(Sample("", inputs, "memory", 1.0), load().constants)
    exp = client.get_experiment_by_name("s") or client.get_experiment(client.create_experiment("s"))
    tags = {"sweep.hardware": "a2_64g", "sweep.model": "qwen3_8b", "sweep.algorithm": "grpo", "sweep.study": "s",
            "trial.outcome": "completed", "trial.backend": "verl", **stack_tags(STACK)}
    run = client.create_run(exp.experiment_id, tags=tags)
    client.log_param(run.info.run_id, ROLLOUT.removeprefix("verl.") + ".gpu_memory_utilization", util)
    for step in (1, 2):
        client.log_metric(run.info.run_id, PEAK_MEMORY_METRIC, peak, step=step)


def test_a_planner_that_traces_gets_its_traced_band_from_the_stores_allocator_peaks(
        traced: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for ratio, util in ((1.0, 0.4), (0.9, 0.5), (1.0, 0.6)):
        _record_peak(MlflowClient(uri), ratio, util)
    monkeypatch.setenv(STACK_ENV, ",".join(f"{k}={v}" for k, v in STACK.items()))

    def calibrated(trainer: str) -> Any:
        got = for_config(compose_config([f"plan.trainer={trainer}", "plan.calibrate=true", "tracking.enabled=true",
                                         f"tracking.uri={uri}"]))
        assert got is not None and got.calibrated, got and got.line()
        return got.calibration.constants

    analytic = calibrated("analytic")
    assert analytic.trainer_band_error_analytic == pytest.approx(0.10)
    assert analytic.trainer_band_error_traced == band.TRAINER_ERROR["traced"], "no peak predicted with traced terms"
    assert calibrated("traced").trainer_band_error_traced < band.TRAINER_ERROR["traced"]


def test_a_calibration_file_from_before_the_band_constants_plans_with_the_packaged_band(tmp_path):
    import yaml

    from verlsweep.plan.predictor import calibration as _calibration

    raw = yaml.safe_load(_calibration.DEFAULT_PATH.read_text())
    for name in _calibration.BAND_CONSTANTS:
        del raw["constants"][name]
    old = tmp_path / "site_cal.yaml"
    old.write_text(yaml.safe_dump(raw))
    loaded, packaged = _calibration.load(old).constants, _calibration.load().constants
    assert [getattr(loaded, n) for n in _calibration.BAND_CONSTANTS] == [
        getattr(packaged, n) for n in _calibration.BAND_CONSTANTS]
    raw["constants"].pop("train_mfu")                  # a model constant is still required
    old.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="missing constants \\['train_mfu'\\]"):
        _calibration.load(old)
