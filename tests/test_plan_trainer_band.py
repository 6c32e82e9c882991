"""The trainer part of the veto's error band comes from the allocator peaks measured on the stack
(verlsweep/plan/fit/trainer_band.py through verlsweep/plan/fit/stack_calibration.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.common.stack import STACK_ENV, read_stack
from verlsweep.plan import from_cfg, predict, predict_cfg
from verlsweep.plan.fit import calibration_file
from verlsweep.plan.fit.measured_fit import Sample, predict_sample
from verlsweep.plan.fit.stack_calibration import STACK_TERMS, calibrate_samples
from verlsweep.plan.predictor import band
from verlsweep.plan.predictor.calibration import load

ACTOR = "verl.actor_rollout_ref.actor"
ROLLOUT = "verl.actor_rollout_ref.rollout"
# remax on a 64 GB A2 without offload: at util 0.8 the rollout needs 62.8 GiB of 60.7, 60.1 at the
# favourable end of the packaged analytic band (tests/test_plan_band.py)
EDGE = ["hardware=a2_64g", "algorithm=remax", "plan.trainer=analytic", f"{ACTOR}.fsdp_config.param_offload=false",
        f"{ACTOR}.fsdp_config.optimizer_offload=false", f"{ROLLOUT}.gpu_memory_utilization=0.8"]
STACK = read_stack({STACK_ENV: "cann=8.1.RC1,verl=0.5.0"})


def _peaks(ratios: list[float]) -> tuple[list[Sample], list[str]]:
    """One allocator peak per trial, measured at `ratio` x what the planner predicts (analytic terms)."""
    samples, runs = [], []
    for i, ratio in enumerate(ratios):
        inputs = from_cfg(compose_config(["hardware=a2_64g", "plan.trainer=analytic",
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
