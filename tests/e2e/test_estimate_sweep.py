"""runner=estimate through `python sweep.py -m`: a whole sweep offline, tracked like a real one
(the runner itself: tests/test_runner_estimate.py)."""
from __future__ import annotations

import csv

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import copy_store, new_mark, run_sweep


@pytest.mark.slow
def test_a_whole_estimated_sweep_runs_offline_and_is_tracked_like_a_real_one(empty_mlflow_db, tmp_path):
    """The README's first command, with no model, data or accelerator (runner=estimate)."""
    uri = copy_store(empty_mlflow_db, tmp_path)
    proc = run_sweep(tmp_path, ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "space=smoke",
                                "hydra.sweeper.n_trials=2",
                                "validate.verl=false", f"tracking.uri={uri}", "paths.model_root=/nonexistent"],
                     new_mark(), multirun=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = list(csv.DictReader(next(tmp_path.glob("outputs/sweeps/*/trials.csv")).open()))
    assert len(rows) == 2 and all(r["outcome"] == "completed" for r in rows), rows
    client = MlflowClient(uri)
    runs = [r for exp in client.search_experiments() for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("trial.backend")]
    assert len(runs) == 2
    for r in runs:
        assert r.data.tags["trial.backend"] == "estimate" and r.info.status == "FINISHED"
        steps = client.get_metric_history(r.info.run_id, "perf/throughput")
        assert len(steps) == 2 and r.data.metrics["objective"] > 0
