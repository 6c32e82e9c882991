"""Bad input through `python sweep.py`: exit status non-zero, the message, nothing launched
(in-process checks: tests/test_bad_input.py)."""
from __future__ import annotations

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
