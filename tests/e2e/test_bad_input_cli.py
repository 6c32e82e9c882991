"""Bad input through `python sweep.py`: exit status non-zero, the message, nothing launched
(in-process checks: tests/test_bad_input.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("args,needle", [
    (["hardware=a9_99g"], "a2_64g"),
    (["verl.actor_rollout_ref.rollout.gpu_memory_utilization=1.5"], "(0, 1]"),
    (["verl.actor_rollout_ref.rollout.gpu_memory_utilizaton=0.5"], "did you mean"),
])
def test_cli_exits_nonzero_with_message_and_launches_nothing(tmp_path, args, needle):
    marker = tmp_path / "launched"
    # an entrypoint that would leave a marker if anything were started
    entry = f"runner.entrypoint=[{sys.executable},-c,'open(\"{marker}\",\"w\")']"
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), *args, entry, f"paths.output_root={tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode != 0
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


# a setting that moved out of hydra.sweeper (verlsweep/common/moved_keys.py): the old spelling stops the sweep
# before anything exists, naming the new one, whether the command line or a config file the user composes says it
OLD_SPACE = """# @package _global_
hydra:
  sweeper:
    n_trials: 2
    long_run:
      steps: 100
    params:
      verl.actor_rollout_ref.rollout.gpu_memory_utilization: choice(0.5,0.6)
"""


@pytest.mark.slow
@pytest.mark.parametrize("route, args, old, new", [
    ("command line", ["hydra.sweeper.guide.top_k=0"], "hydra.sweeper.guide.top_k", "study.guide.top_k"),
    ("command line", ["hydra.sweeper.infer=false"], "hydra.sweeper.infer", "study.proofs"),
    ("config file", ["space=old_keys"], "hydra.sweeper.long_run.steps", "study.long_run.steps"),
])
def test_a_moved_keys_old_spelling_exits_2_naming_the_new_one_before_anything_is_created(tmp_path, route, args,
                                                                                        old, new):
    own = tmp_path / "my_conf"
    (own / "space").mkdir(parents=True)
    (own / "space" / "old_keys.yaml").write_text(OLD_SPACE)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), "-m", f"hydra.searchpath=[file://{own}]",
                           "runner=estimate", f"paths.output_root={work / 'out'}", *args],
                          cwd=work, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert old in proc.stderr and f"write {new}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(work.iterdir()) == []             # no study storage, no MLflow store, no sweep dir


@pytest.mark.slow
def test_a_value_of_the_wrong_type_exits_2_naming_its_key_and_type(tmp_path):
    """verlsweep.config.read, first in the trial task: the problem names the full key and what it takes."""
    marker = tmp_path / "launched"
    entry = f"runner.entrypoint=[{sys.executable},-c,'open(\"{marker}\",\"w\")']"
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), "hardware.hbm_total_gb=96GB", "trial.steps=five",
                           entry, f"paths.output_root={tmp_path}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 2
    assert "hardware.hbm_total_gb='96GB': a number or null" in proc.stderr
    assert "trial.steps='five': an integer" in proc.stderr
    assert "Traceback" not in proc.stderr and not marker.exists()


# --- every mistake a message (docs/errors.md): through the command a user types, exit 2, nothing left ------

def _leftovers(root: Path, setup: set[str]) -> list[str]:
    return sorted(name for p in root.rglob("*") if (name := p.relative_to(root).as_posix()) not in setup)


@pytest.mark.slow
@pytest.mark.parametrize("args, says", [
    # storage and paths: formerly sqlalchemy's traceback, or a study whose trials never ran
    (["-m", "runner=estimate", "hydra.sweeper.storage=sqlite:///no_such_dir/studies.db"],
     "the sqlite file's directory to exist: no_such_dir does not (mkdir -p no_such_dir)"),
    (["-m", "runner=estimate", "paths.output_root=a_file"],
     "paths.output_root='a_file': a directory for the sweep dirs"),
    # what no param varies: formerly a study and an MLflow experiment, then config_error trials (exit 0)
    (["-m", "runner=script", "validate.verl=false"], "every trial of this sweep would fail"),
    # a single run: formerly an MLflow run (and the device monitor) before the refusal, and a run dir
    (["runner=script", "validate.verl=false"], "runner.script=None: path of an existing recipe script"),
    # following Hydra's advice for a misspelt group: formerly a run with the default hardware
    (["+hardwre=a2_64g"], "did you mean hardware=a2_64g?"),
    (["-mhardware=a3_64g"], "-m and the overrides are separate arguments: -m hardware=a3_64g"),
], ids=["storage_dir", "sweep_dir", "script_sweep", "script_single", "plus_group_typo", "joined_m"])
def test_a_mistake_exits_2_with_its_message_and_leaves_nothing_behind(tmp_path, args, says):
    (tmp_path / "a_file").write_text("not a directory\n")
    for name in ("models/Qwen3-8B/config.json", "data/gsm8k/train.parquet", "data/gsm8k/test.parquet"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    setup = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")}
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "VERLSWEEP_OUTPUT_ROOT",
                                                            "VERLSWEEP_RECIPE_SCRIPT")}
    env.update(VERLSWEEP_MODEL_ROOT=str(tmp_path / "models"), VERLSWEEP_DATA_ROOT=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert says in proc.stderr.replace(f"{tmp_path}/", "")
    assert "Traceback" not in proc.stderr
    assert _leftovers(tmp_path, setup) == []      # no study, MLflow store, mlruns/, sweep or run dir
