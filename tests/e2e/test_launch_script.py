"""best_launch.sh is a script a person copies to a node and runs: verl's recipe layout (variables with
defaults, override arrays, extra arguments passed through), no path of the machine that wrote it, the
sweep's MLflow store exported. One estimate sweep through `python sweep.py -m`; the script is then run
with a stand-in `python3` first on PATH that records its argv and environment."""
from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.trial_helpers import copy_store, new_mark, run_sweep

MODEL_KEY = "actor_rollout_ref.model.path"
TRAIN_KEY, VAL_KEY = "data.train_files", "data.val_files"
# keys the long run sets itself (study.long_run, the study-free experiment name)
LONG_RUN = {"trainer.total_training_steps": "60", "trainer.save_freq": "20", "trainer.test_freq": "5",
            "trainer.resume_mode": "auto"}
ENV_ROOTS = ("VERLSWEEP_MODEL_ROOT", "VERLSWEEP_DATA_ROOT", "MLFLOW_TRACKING_URI")

FAKE_PYTHON = """#!{python}
import json, os, sys
with open(os.environ["ARGV_DUMP"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "tracking": os.environ.get("MLFLOW_TRACKING_URI"),
               "hccl": os.environ.get("HCCL_CONNECT_TIMEOUT")}}, fh)
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory, empty_mlflow_db):
    """An estimate sweep of 3 trials whose data root is a temp dir and whose model root is the home's."""
    tmp = tmp_path_factory.mktemp("launch")
    uri = copy_store(empty_mlflow_db, tmp)
    with pytest.MonkeyPatch.context() as mp:
        for name in ENV_ROOTS:
            mp.delenv(name, raising=False)
        proc = run_sweep(tmp, ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "hydra.sweeper.n_trials=3",
                               f"paths.output_root={tmp / 'out'}", f"tracking.uri={uri}"], new_mark(), multirun=True,
                         env={"VERLSWEEP_DATA_ROOT": str(tmp / "laptop-data")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sweep_dir,) = (tmp / "out" / "sweeps").iterdir()
    best = yaml.safe_load((sweep_dir / "best.yaml").read_text())
    with (sweep_dir / "trials.csv").open() as fh:
        row = next(r for r in csv.DictReader(fh) if int(r["number"]) == best["trial_number"])
    command = json.loads((Path(row["job_dir"]) / "command.json").read_text())
    fake = tmp / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text(FAKE_PYTHON.format(python=sys.executable))
    (fake / "python3").chmod((fake / "python3").stat().st_mode | stat.S_IEXEC)
    return {"tmp": tmp, "uri": uri, "script": sweep_dir / "best_launch.sh", "best": best, "command": command,
            "fake": fake}


def run_script(swept: dict, tmp_path: Path, args: list[str], **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ENV_ROOTS}
    full.update(env, PATH=f"{swept['fake']}{os.pathsep}{os.environ['PATH']}", ARGV_DUMP=str(tmp_path / "argv.json"))
    proc = subprocess.run(["bash", str(swept["script"]), *args], env=full, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "argv.json").read_text())


def keyed(overrides: list[str]) -> list[tuple[str, str]]:
    return [(o.partition("=")[0].lstrip("+"), o.partition("=")[2]) for o in overrides]


@pytest.mark.slow
def test_best_launch_passes_bash_syntax_check(swept):
    proc = subprocess.run(["bash", "-n", str(swept["script"])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_best_launch_bakes_in_no_path_of_the_machine_that_wrote_it(swept):
    text = swept["script"].read_text()
    assert f"{Path.home()}/" not in text                                   # the expanded model root
    tmp_lines = [line for line in text.splitlines() if str(swept["tmp"]) in line]
    assert tmp_lines == [f"export MLFLOW_TRACKING_URI=${{MLFLOW_TRACKING_URI:-{swept['uri']}}}"]
    assert "MODEL_PATH=${MODEL_PATH:-${VERLSWEEP_MODEL_ROOT:-${HOME}/models}/Qwen3-8B}" in text
    assert "TRAIN_FILE=${TRAIN_FILE:-${VERLSWEEP_DATA_ROOT:-${HOME}/data}/gsm8k/train.parquet}" in text


@pytest.mark.slow
def test_best_launch_runs_the_best_trials_verl_argv_with_the_nodes_paths_and_passes_extra_arguments(swept, tmp_path):
    node = {"MODEL_PATH": "/node/models/Qwen3-8B", "TRAIN_FILE": "/node/data/train.parquet",
            "TEST_FILE": "/node/data/test.parquet", "NNODES": "2"}
    got = run_script(swept, tmp_path, ["trainer.total_epochs=2"], **node)
    assert got["argv"][:2] == ["-m", "verl.trainer.main_ppo"]
    assert got["argv"][-1] == "trainer.total_epochs=2"
    number = swept["best"]["trial_number"]
    study = swept["command"]["argv"][3:]
    replaced = {MODEL_KEY: node["MODEL_PATH"], TRAIN_KEY: node["TRAIN_FILE"], VAL_KEY: node["TEST_FILE"],
                "trainer.nnodes": "2", **LONG_RUN}
    expected = [(k, replaced.get(k, v)) for k, v in keyed(study)]
    launched = keyed(got["argv"][2:-1])
    assert [k for k, _ in launched] == [k for k, _ in expected]            # the same keys, in verl's order
    values = dict(launched)
    assert values.pop("trainer.experiment_name").endswith(f"-trial{number}")
    values.pop("trainer.project_name")                                     # the long run is no trial of the study
    assert values == {k: v for k, v in expected if k not in ("trainer.experiment_name", "trainer.project_name")}
    assert got["hccl"] == swept["command"]["env"]["HCCL_CONNECT_TIMEOUT"]    # the hardware's environment


@pytest.mark.slow
def test_best_launch_exports_the_sweeps_tracking_uri_unless_the_node_sets_one(swept, tmp_path):
    assert run_script(swept, tmp_path, [])["tracking"] == swept["uri"]
    assert run_script(swept, tmp_path, [], MLFLOW_TRACKING_URI="http://node:5000")["tracking"] == "http://node:5000"


@pytest.mark.slow
def test_best_launch_defaults_follow_the_env_roots_of_the_node(swept, tmp_path):
    got = dict(keyed(run_script(swept, tmp_path, [], HOME="/node/home", VERLSWEEP_MODEL_ROOT="/node/models")["argv"]))
    assert got[MODEL_KEY] == "/node/models/Qwen3-8B"
    assert got[TRAIN_KEY] == "/node/home/data/gsm8k/train.parquet"
    assert got["trainer.nnodes"] == "1" and got["trainer.n_gpus_per_node"] == "8"
