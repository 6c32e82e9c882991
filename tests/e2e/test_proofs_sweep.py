"""What one OOM proves, end to end: `python sweep.py -m` over the rollout-memory space with stand-in trials.

The stand-in's `auto` mode decides each trial from its memory model (tests/support/standin/verl_standin.py
MemoryModel): with a 20 GiB training peak and no offload, vLLM's start-up check refuses util 0.80 on a
60.96 GiB device (free 47.66 GiB < 48.77) and accepts 0.75; with a 60 GiB peak, training itself does
not fit at any util. The proposals are enqueued in a fixed order, so the test reads which of them the
sweeper launched and which it ruled out from what an earlier trial proved (verlsweep.proofs.rules).
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import copy_store, new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL

pytestmark = pytest.mark.slow

P_OFF, O_OFF, R_OFF = OFFLOADS


def _entry(util: float, param_offload: bool = False) -> str:
    values = {UTIL: util, TP: 2, P_OFF: param_offload, O_OFF: False, R_OFF: False}
    return "{" + ",".join(f"{k}:{str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()) + "}"


def _sweep(tmp_path: Path, store: Path, fixtures: tuple[Path, Path], peak_gb: int, order: list[str]) -> dict:
    uri = copy_store(store, tmp_path)
    mark = new_mark()
    proc = run_sweep(tmp_path, [
        *tiny_overrides(*fixtures, tmp_path / "out", uri), standin_entrypoint(), "validate.verl=false",
        "trial.steps=2", "+env.VERL_STANDIN_MODE=auto", f"+env.VERL_STANDIN_PEAK_MEMORY_GB={peak_gb}",
        "+env.VERL_STANDIN_STEP_SECONDS=0.05", "hydra/sweeper/pruner=none", "study.enqueue_recipe=false",
        "study.guide.top_k=0", f"hydra.sweeper.n_trials={len(order)}",
        f"hydra.sweeper.enqueue=[{','.join(order)}]", f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ], mark, multirun=True, report=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "sweep" / "trials.csv").open()))
    client = MlflowClient(uri)
    runs = {int(r.data.tags["trial.number"]): r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()]) if "trial.number" in r.data.tags}
    assert survivors(mark) == []
    report = (tmp_path / "sweep" / "report.html").read_text()
    return {"proc": proc, "rows": rows, "runs": runs, "logs": sorted(tmp_path.rglob("trial.log")), "report": report}


def test_an_oom_at_vllm_start_rules_out_every_higher_util_of_its_combination_without_a_launch(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    got = _sweep(tmp_path, empty_mlflow_db, (tiny_model_dir, gsm8k_dir), 20,
                 [_entry(0.8), _entry(0.85), _entry(0.9), _entry(0.95), _entry(0.75)])
    rows, runs = got["rows"], got["runs"]
    assert [(r["outcome"], r["failure_phase"], r["ruled_out_by"]) for r in rows] == [
        ("oom", "vllm_start", ""), ("infeasible", "", "0"), ("infeasible", "", "0"), ("infeasible", "", "0"),
        ("completed", "", "")]
    assert len(got["logs"]) == 2                              # only trials 0 and 4 ran verl
    for n in (1, 2, 3):
        assert re.search(rf"^t{n:02d} .* ruled out by trial 0$", got["proc"].stdout, re.MULTILINE), got["proc"].stdout
        assert runs[n].data.tags["trial.ruled_out_by"] == "0"
        assert runs[n].info.run_name.startswith(f"t{n:02d} ruled out by trial 0 ")
        assert "vllm start" in runs[n].data.tags["trial.reason"]
        assert "objective" not in runs[n].data.metrics
    assert runs[4].data.tags["trial.outcome"] == "completed"
    # the report's proven regions, with their evidence
    assert "fails at util &gt;= 0.80: proven by trial 0" in got["report"], got["report"][-3000:]
    assert "ruled out by trial 0" in got["report"]


def test_a_training_oom_rules_out_every_util_of_its_combination_but_not_one_with_more_offload(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    got = _sweep(tmp_path, empty_mlflow_db, (tiny_model_dir, gsm8k_dir), 60,
                 [_entry(0.4), _entry(0.3), _entry(0.5), _entry(0.4, param_offload=True)])
    assert [(r["outcome"], r["failure_phase"], r["ruled_out_by"]) for r in got["rows"]] == [
        ("oom", "training", ""), ("infeasible", "", "0"), ("infeasible", "", "0"), ("completed", "", "")]
    assert len(got["logs"]) == 2
    assert "training" in got["runs"][1].data.tags["trial.reason"]
    assert "fails at every util: proven by trial 0" in got["report"], got["report"][-3000:]
