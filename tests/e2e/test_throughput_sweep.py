"""The throughput space (sweeps/throughput.yaml) through `python sweep.py -m`: on its own with runner=estimate,
and chained (`study.from_study`) from a finished memory study with the verl stand-in, whose
timing_s/* phases the report draws beside the planner's split."""
from __future__ import annotations

import csv
import json

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import CategoricalDistribution, FloatDistribution

from tests.support.trial_helpers import copy_store, new_mark, run_sweep, standin_entrypoint, tiny_overrides
from verlsweep.common.names import FROM_STUDY_ATTR
from verlsweep.study.chain import TAG_PREFIX

pytestmark = pytest.mark.slow

ROLLOUT = "verl.actor_rollout_ref.rollout"
UTIL = f"{ROLLOUT}.gpu_memory_utilization"
OFFLOAD = "verl.actor_rollout_ref.actor.fsdp_config.param_offload"
MEMORY_STUDY = "rollout_memory.a2_64g.qwen3_0_6b.grpo.finished"


def test_the_throughput_space_runs_end_to_end_with_the_planner_from_the_recipes_values(empty_mlflow_db, tmp_path):
    """The guide over this space is tests/test_plan_knob_costs.py's (ranking 2048 candidates takes ~10-40 s)."""
    uri = copy_store(empty_mlflow_db, tmp_path)
    proc = run_sweep(tmp_path, ["hardware=a2_64g", "algorithm=grpo", "model=qwen3_8b", "space=throughput",
                                "runner=estimate", "hydra.sweeper.n_trials=2", "validate.verl=false",
                                "study.guide.top_k=0",
                                f"tracking.uri={uri}", f"paths.output_root={tmp_path / 'out'}"],
                     new_mark(), multirun=True, report=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = list(csv.DictReader(next(tmp_path.glob("out/sweeps/*/trials.csv")).open()))
    assert len(rows) == 2 and any(r["outcome"] == "completed" for r in rows), rows
    # trial 0 is the composed config's own values (verl's defaults where no group sets them)
    assert (rows[0]["verl.actor_rollout_ref.actor.ppo_max_token_len_per_gpu"],
            rows[0]["verl.actor_rollout_ref.rollout.max_num_seqs"]) == ("16384", "256")


def _finished_memory_study(url: str) -> None:
    """A memory study's result as a finished sweep leaves it: one measured best trial."""
    study = optuna.create_study(study_name=MEMORY_STUDY, storage=url, direction="maximize")
    for util, value in ((0.5, 300.0), (0.55, 350.0)):
        study.add_trial(optuna.trial.create_trial(
            params={UTIL: util, OFFLOAD: False}, value=value,
            distributions={UTIL: FloatDistribution(0.3, 0.95, step=0.05),
                           OFFLOAD: CategoricalDistribution([True, False])}))


def test_a_chained_throughput_sweep_starts_from_the_memory_best_and_reports_the_time_split(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    url = f"sqlite:///{tmp_path / 'verlsweep-optuna.db'}"
    _finished_memory_study(url)
    proc = run_sweep(tmp_path, [
        *tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri), standin_entrypoint(),
        "algorithm=grpo", "space=throughput", f"study.from_study={MEMORY_STUDY}",
        "hydra.sweeper.n_trials=2", "study.guide.top_k=0", "trial.steps=2", "validate.verl=false",
        "hydra.sweeper.study_name=throughput-chained"], new_mark(), multirun=True, report=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    study = optuna.load_study(study_name="throughput-chained", storage=url)
    link = study.user_attrs[FROM_STUDY_ATTR]
    assert (link["study_name"], link["trial_number"]) == (MEMORY_STUDY, 1)
    # the memory knobs of the best trial are fixed in every trial of the second stage
    sweep_dir = next((tmp_path / "out" / "sweeps").glob("*"))
    for trial in study.trials:
        argv = json.loads(next((sweep_dir / str(trial.number)).rglob("command.json")).read_text())["argv"]
        assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.55" in argv
        assert "actor_rollout_ref.actor.fsdp_config.param_offload=false" in [a.lower() for a in argv]
    # verl's phases (stand-in: timing_s/*) are recorded with each trial beside the planner's split
    measured = study.trials[0].user_attrs["metrics"]
    assert measured["timing_s/gen"] > 0 and measured["timing_s/update_actor"] > 0
    assert study.trials[0].user_attrs["predicted"]["plan/time_s/gen"] > 0
    report = (sweep_dir / "report.html").read_text()
    assert f"started from study {MEMORY_STUDY}, trial 1" in report
    assert (sweep_dir / "plots" / "time_split.png").is_file()
    client = MlflowClient(uri)
    parents = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
               if TAG_PREFIX in r.data.tags]
    assert [r.data.tags[TAG_PREFIX] for r in parents] == [MEMORY_STUDY]
