"""HTTP tracking: a real `mlflow server` on 127.0.0.1, started and stopped by the test."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides
from verlsweep.command.compose import compose_config
from verlsweep.tracking import sweep_run

pytestmark = pytest.mark.slow


def test_trial_tracked_over_http_nests_under_its_sweep_with_verls_metrics(mlflow_server, tiny_model_dir, gsm8k_dir,
                                                                         tmp_path):
    base = tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", mlflow_server)
    parent = sweep_run.start_sweep_run(compose_config(base), "http-study", {"verl.trainer.total_training_steps": [2]})
    mark = new_mark()
    proc = run_sweep(tmp_path, [*base, standin_entrypoint(), "validate.verl=false", "trial.steps=3",
                                f"tracking.parent_run_id={parent}"], mark)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("http-study")
    (child,) = client.search_runs([exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert child.info.status == "FINISHED"
    assert child.data.tags["trial.outcome"] == "completed"
    assert [m.step for m in client.get_metric_history(child.info.run_id, "perf/throughput")] == [1, 2, 3]
    assert {"command.sh", "command.json", "log_tail.txt"} <= {a.path for a in client.list_artifacts(child.info.run_id)}
    text = Path(client.download_artifacts(child.info.run_id, "command.json", str(tmp_path / "dl"))).read_text()
    assert "verl_standin.py" in text
    assert survivors(mark) == []
