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
