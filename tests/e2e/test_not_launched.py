"""A trial that launched nothing reads the same everywhere a user looks: its terminal line, the summary
table, the report's tables and its MLflow run all say `reused t00` (one presentation), through
`python sweep.py -m ... runner=estimate` (seconds per trial, no device)."""
from __future__ import annotations

import re

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import new_mark, run_sweep
from tests.test_report import cells

pytestmark = pytest.mark.slow

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"


def test_a_reused_trial_has_one_line_and_one_name_on_the_terminal_summary_report_and_mlflow(store, tmp_path):
    # space=smoke: util choice(0.5,0.6); trial 0 is the enqueued 0.6 and the seeded random sampler proposes
    # 0.6 again for trial 1 (tests/e2e/test_job_dirs.py uses the same draw): reused, nothing launched
    proc = run_sweep(tmp_path, [
        "hardware=a2_64g", "algorithm=remax", "runner=estimate", "space=smoke", "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=0", "study.guide.top_k=0", f"paths.output_root={tmp_path / 'out'}",
        f"tracking.uri={store}", f"hydra.sweeper.enqueue=[{{{UTIL}:0.6}}]", "hydra.sweeper.n_trials=3",
        f"hydra.sweep.dir={tmp_path / 'sweep'}"], new_mark(), multirun=True, report=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert re.search(r"^t01  completed .* reused t00$", proc.stdout, re.MULTILINE), proc.stdout
    assert "reuses trial" not in out and "recorded as MLflow run" not in out       # no [HYDRA] lines about it
    assert re.search(r"│\s+1 │ completed \(reused t00\)", proc.stdout), proc.stdout              # the summary
    page = (tmp_path / "sweep" / "report.html").read_text()
    assert {r[0]: r[1] for r in cells(page, "<h2>Trials")}["1"] == "completed (reused t00)"
    predictions = {r[0]: r[1] for r in cells(page, "<h2>Planner's predictions")}
    assert predictions["1"] == "completed (reused t00)"          # the planner's numbers travel with the reuse
    client = MlflowClient(store)
    names = {r.data.tags["trial.number"]: r.info.run_name for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()]) if "trial.number" in r.data.tags}
    assert names["1"].startswith("t01 reused t00 ")
