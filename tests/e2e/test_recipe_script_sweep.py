"""End to end: `python sweep.py -m recipe=<script>` sweeps a recipe script in the ReMax recipe's form (batch
128, mini-batch 32, response length 1024 as its defaults) with the verl stand-in as the node's verl: every
trial runs the script with its own values and the swept knobs, command.sh reproduces the verl argv each
trial's verl got, and best_launch.sh calls the script."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.recipes import RECIPES, standin_bin
from tests.support.trial_helpers import copy_store, new_mark, run_sweep, survivors
from verlsweep.command.recipe_capture import capture, sha256

pytestmark = pytest.mark.slow          # subprocess sweeps

REMAX = RECIPES / "remax_ascend.sh"
UTIL = "actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"
OFFLOAD = "actor_rollout_ref.actor.fsdp_config.param_offload"


def test_a_remax_form_script_sweeps_util_tp_offload_with_its_own_batch_and_lengths(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    node_bin = standin_bin(tmp_path / "node-bin")
    env = {"MODEL_PATH": str(tiny_model_dir), "TRAIN_FILE": str(gsm8k_dir / "train.parquet"),
           "TEST_FILE": str(gsm8k_dir / "test.parquet"), "PATH": f"{node_bin}{os.pathsep}{os.environ['PATH']}"}
    mark = new_mark()
    proc = run_sweep(tmp_path, [f"recipe={REMAX}", "hardware=a2_64g", "space=smoke", "hydra.sweeper.n_trials=2",
                                f"verl.{UTIL}=choice(0.5,0.6)", f"verl.{TP}=choice(1,2)",
                                f"verl.{OFFLOAD}=choice(true,false)", f"paths.output_root={tmp_path / 'out'}",
                                f"tracking.uri={uri}", "plan.enforce=false", "+env.VERL_STANDIN_STEP_SECONDS=0.01"],
                     mark, multirun=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sweep_dir,) = (tmp_path / "out" / "sweeps").iterdir()
    with (sweep_dir / "trials.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["outcome"] for r in rows] == ["completed"] * 2, rows
    for row in rows:
        job = Path(row["job_dir"])
        command = json.loads((job / "command.json").read_text())
        assert command["script"]["path"] == str(REMAX) and command["script"]["sha256"] == sha256(REMAX)
        verl = dict(a.split("=", 1) for a in command["argv"][3:])
        # the script's own batch, mini-batch and response length in every trial, the swept knobs beside them
        assert (verl["data.train_batch_size"], verl["actor_rollout_ref.actor.ppo_mini_batch_size"],
                verl["data.max_response_length"]) == ("128", "32", "1024")
        for key in (UTIL, TP, OFFLOAD):                  # each trial's own knobs reached verl
            assert verl[key].lower() == row[f"verl.{key}"].lower(), key
        # command.sh, run as it is, launches verl with the argv this trial's verl got
        with_env = {k: v for k, v in env.items() if k != "PATH"}
        assert list(capture(job / "command.sh", env=with_env).overrides) == command["argv"][3:]
        assert "python3 -m verl.trainer.main_ppo" in (job / "trial.log").read_text()   # the script's set -x
    best = (sweep_dir / "best_launch.sh").read_text()
    # the user's script with the best knobs: util and TP through the variables it reads, offload through "$@"
    assert f"bash {REMAX} {OFFLOAD}=" in best and best.rstrip().endswith('"$@"')
    assert "export ROLLOUT_GPU_MEM_UTIL=${ROLLOUT_GPU_MEM_UTIL:-" in best and "export ROLLOUT_TP=${ROLLOUT_TP:-" in best
    assert f"sha256 {sha256(REMAX)}" in best and "checkpoints and resume are the recipe script's own" in best
    assert "study smoke.a2_64g.remax_ascend-" in best        # the study is named by the script and its config
    summary = subprocess.run([sys.executable, "-m", "verlsweep.report", str(sweep_dir)], capture_output=True,
                             text=True, cwd=tmp_path, check=True).stdout
    assert f"recipe script {REMAX} (sha256 {sha256(REMAX)})" in summary     # the report names what it swept
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.tags["recipe.sha256"] == sha256(REMAX) and parent.data.tags["sweep.algorithm"] == "remax"
    assert parent.data.params["data.train_batch_size"] == "128"       # the script's own values, not a group's
    assert all(r.data.tags["recipe.script"] == str(REMAX) for r in runs)
    assert survivors(mark) == []


def test_a_sweep_of_a_knob_the_script_cannot_take_is_refused_before_the_study(empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    script = RECIPES / "tp_from_env_no_args.sh"       # TP from its environment, no "$@"
    proc = run_sweep(tmp_path, [f"recipe={script}", "hardware=a2_64g", "space=smoke",
                                f"paths.output_root={tmp_path / 'out'}", f"tracking.uri={uri}"],
                     new_mark(), multirun=True)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"verl.{UTIL}" in proc.stderr and script.name in proc.stderr and '"$@"' in proc.stderr
    assert "nothing started" in proc.stderr
    assert not list((tmp_path / "out").rglob("trial.log"))
