"""Sweeps that learn from the sweeps before them on the same software stack.

A first stand-in sweep on one hardware profile (a2_64g) records its trials in an MLflow store; a second
sweep on another profile (a3_64g) of the same stack plans with the planner's stack terms refitted to those
trials (verlsweep/plan/fit/stack_calibration.py). The stand-in's hidden truth (tests/support/standin/truth.py)
is the planner's model under the stack's true constants: its runtime holds ~3 GiB per process more than
the packaged constants say, so a cold planner's best predicted configs run out of memory.
Trials recorded under another stack, with another truth, are in the same store and must not be used.

In-process sweeps (tests/support/inprocess_sweep.py): the real sweeper, guide, preflight and MLflow runs.
"""
from __future__ import annotations

import csv
import logging
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support import inprocess_sweep
from tests.support.standin.truth import STACK_A, STACK_B, TRUTHS
from verlsweep.common.stack import STACK_ENV, STACK_TAG, digest, read_stack
from verlsweep.plan import load_calibration

pytestmark = pytest.mark.slow

FAST = ["validate.verl=false", "trial.steps=2", "runner=estimate", "study.report=false", "study.long_run.confirm=0",
        "+app.truth=true", "tracking.enabled=true", "study.proofs=false"]
SEEDS = (0, 1, 2)
TRIALS = 4


def sweep(root: Path, name: str, store: Path, *args: str) -> list[dict[str, str]]:
    sweep_dir = root / name / "sweep"
    sweep_dir.parent.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as env:      # tracking.uri's default reads it (a `:` in an override is escaped)
        env.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
        inprocess_sweep.sweep(sweep_dir, [*FAST, f"hydra.sweeper.study_name={name}", *args])
    with open(sweep_dir / "trials.csv") as f:
        return list(csv.DictReader(f))


def launched_ooms(rows: list[dict[str, str]]) -> int:
    return sum(r["outcome"] == "oom" for r in rows)


def calibration_line(caplog: pytest.LogCaptureFixture) -> str:
    lines = [r.getMessage() for r in caplog.records if r.name == "verlsweep.study.calibrate"]
    return lines[-1] if lines else "(no calibration line logged)"


def test_a_second_sweep_on_the_same_stack_plans_with_the_first_ones_trials_and_launches_fewer_ooms(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="verlsweep.study.calibrate")
    store = tmp_path / "mlflow.db"
    # trials of another stack, whose truth pulls the other way: recorded first, never used
    monkeypatch.setenv(STACK_ENV, STACK_B)
    decoy = sweep(tmp_path, "decoy", store, "hardware=a3_64g", "plan.calibrate=false",
                  "hydra.sweeper.sampler.seed=5", f"hydra.sweeper.n_trials={TRIALS}")
    monkeypatch.setenv(STACK_ENV, STACK_A)
    first = sweep(tmp_path, "first", store, "hardware=a3_64g", "plan.calibrate=true", "hydra.sweeper.sampler.seed=7",
                  "hydra.sweeper.n_trials=10")
    measured = sum(r["outcome"] == "completed" for r in first)
    outcomes = {"first": [r["outcome"] for r in first], "decoy": [r["outcome"] for r in decoy]}
    assert measured >= 3 and "completed" in outcomes["decoy"], str(outcomes)
    runs = MlflowClient(f"sqlite:///{store}").search_runs(
        [e.experiment_id for e in MlflowClient(f"sqlite:///{store}").search_experiments()],
        filter_string=f"tags.`{STACK_TAG}` = '{digest(read_stack())}'")
    assert {r.data.tags[f"{STACK_TAG}.cann"] for r in runs} == {"8.1.RC1"}     # each trial keeps its stack

    warm_ooms = cold_ooms = 0
    report = []
    for seed in SEEDS:
        # each warm sweep learns from the first sweep's trials only: a copy of the store as it was
        own = tmp_path / f"mlflow-{seed}.db"
        shutil.copy(store, own)
        caplog.clear()
        warm = sweep(tmp_path, f"warm{seed}", own, "hardware=a2_64g", "plan.calibrate=true",
                     f"hydra.sweeper.sampler.seed={seed}", f"hydra.sweeper.n_trials={TRIALS}")
        line = calibration_line(caplog)
        # the first sweep's trials only: the other stack's are in the store but not counted
        stack = digest(read_stack())
        assert line.startswith(f"planner calibrated on {measured} trials of 1 study on stack {stack}"), line
        # both parts of the veto's band from the stack's measurements: the trainer's from verl's allocator peaks
        assert "trainer band ±5.0% for analytic terms" in line, line
        written = load_calibration({"plan": {"calibration": str(tmp_path / f"warm{seed}/sweep/calibration.yaml")}})
        # refitted towards the stack's truth, not the other stack's
        assert written.constants.runtime_context_gb > 2.0, (line, written.constants)
        cold = sweep(tmp_path, f"cold{seed}", own, "hardware=a2_64g", f"hydra.sweeper.sampler.seed={seed}",
                     f"hydra.sweeper.n_trials={TRIALS}", "plan.calibrate=false")
        warm_ooms += launched_ooms(warm)
        cold_ooms += launched_ooms(cold)
        report.append(f"seed {seed}: warm {[r['outcome'] for r in warm]} cold {[r['outcome'] for r in cold]}; {line}")
    assert TRUTHS[STACK_A].runtime_context_gb > load_calibration(None).constants.runtime_context_gb
    report.insert(0, f"first: {outcomes['first']}")
    print("\n".join(report))
    assert warm_ooms < cold_ooms, "\n".join(report)
