"""A config measured once is never launched again by accident: `python sweep.py -m` where the
sampler must re-propose (two configs, five trials) reuses the measurement instead of relaunching.
"""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import copy_store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"


def _sweep(tmp_path: Path, uri: str, *extra: str) -> subprocess.CompletedProcess:
    # space=smoke: util choice(0.5,0.6) only; a random sampler re-proposes them (the grid would not)
    argv = [sys.executable, str(ROOT / "sweep.py"), "-m", "hardware=a2_64g", "algorithm=remax", "runner=estimate",
            "space=smoke", "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=0",
            "hydra.sweeper.max_consecutive_failures=10", "validate.verl=false", f"tracking.uri={uri}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra.sweeper.study_name=reuse", "study.long_run.confirm=0",
            *extra]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def _trials(tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="reuse", storage=f"sqlite:///{tmp_path / 'verlsweep-optuna.db'}").get_trials()


def _launched(tmp_path: Path) -> list[str]:
    """Job dirs the estimate runner ran a trial in (it writes the trial's command there)."""
    return sorted(p.parent.name for p in (tmp_path / "sweep").glob("*/command.json"))


def test_a_re_proposed_config_reuses_the_measurement_and_launches_nothing(empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    proc = _sweep(tmp_path, uri, "hydra.sweeper.n_trials=5")

    trials = _trials(tmp_path)
    assert len(trials) == 5
    measured = [t for t in trials if "reused_from" not in t.user_attrs]
    reused = [t for t in trials if "reused_from" in t.user_attrs]
    assert len(measured) == 2 and len(reused) == 3                 # two configs, each measured once
    assert sorted(t.params[UTIL] for t in measured) == [0.5, 0.6]
    by_number = {t.number: t for t in trials}
    for t in reused:
        source = by_number[t.user_attrs["reused_from"]]
        assert source.params == t.params and t.values == source.values
        assert t.user_attrs["outcome"] == source.user_attrs["outcome"] == "completed"
        assert t.user_attrs["duration_s"] == 0.0
        assert t.user_attrs["reused_run_id"] == source.user_attrs["run_id"]
    # only the measured trials' jobs ran; the reused ones never reached the launcher
    assert _launched(tmp_path) == sorted(str(t.number) for t in measured)      # which two: the guide's order
    assert "3 proposal(s) reused a measurement" in proc.stdout
    with open(tmp_path / "sweep" / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["reused_from"] for r in rows if r["reused_from"]) == sorted(
        str(t.user_attrs["reused_from"]) for t in reused)
    # MLflow: one child run per trial; a reused one is recorded as such (ended, whose measurement, the value)
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.`trial.number` != ''")
    by_trial = {int(r.data.tags["trial.number"]): r for r in runs}
    assert len(runs) == len(by_trial) == 5
    for t in reused:
        run = by_trial[t.number]
        assert run.info.status == "FINISHED" and run.data.tags["trial.outcome"] == "completed"
        assert run.data.tags["trial.reused_from"] == str(t.user_attrs["reused_from"])
        assert run.info.run_name.startswith(f"t{t.number:02d} reused t{t.user_attrs['reused_from']:02d}")
        assert run.data.metrics["objective"] == pytest.approx(t.values[0])
    check = subprocess.run([sys.executable, "-m", "verlsweep.report", "--status", str(tmp_path / "sweep")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0 and "agree" in check.stdout, check.stdout[-3000:] + check.stderr[-3000:]


def test_remeasure_true_launches_a_re_proposed_config_again(empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    proc = _sweep(tmp_path, uri, "hydra.sweeper.n_trials=3", "hydra.sweeper.remeasure=true")
    trials = _trials(tmp_path)
    assert not any("reused_from" in t.user_attrs for t in trials)
    assert len({t.params[UTIL] for t in trials}) == 2              # so one config ran twice
    assert _launched(tmp_path) == ["0", "1", "2"]
    assert "proposal(s) reused" not in proc.stdout                  # nothing reused: no line about it
