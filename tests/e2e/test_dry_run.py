"""`python sweep.py ... dry_run=true`: the composed verl command as a runnable snippet and command.json,
one per trial in a multirun (unit tests of the composition: tests/test_compose.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


# --- dry run through the real CLI ----------------------------------------------------------------

def run_sweep(args: list[str], cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "sweep.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_dry_run_prints_a_runnable_snippet_and_writes_command_json(tmp_path):
    proc = run_sweep(["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b", "dry_run=true",
                      f"paths.output_root={tmp_path}/out"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "export HCCL_CONNECT_TIMEOUT=3600" in proc.stdout
    assert "python -m verl.trainer.main_ppo \\\n    data." in proc.stdout
    assert "missing" not in proc.stdout and "WARNING" in proc.stderr + proc.stdout  # paths absent: a warning
    [command_json] = list((tmp_path / "out").rglob("command.json"))
    cmd = json.loads(command_json.read_text())
    assert cmd["argv"][:3] == ["python", "-m", "verl.trainer.main_ppo"]
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.6" in cmd["argv"]
    assert cmd["env"]["TASK_QUEUE_ENABLE"] == "1"
    # the snippet is valid bash that reproduces argv exactly
    snippet = proc.stdout[proc.stdout.index("export"):]
    echo = subprocess.run(["bash", "-c", snippet.replace("python -m", "printf '%s\\n' python -m", 1)],
                          capture_output=True, text=True)
    assert echo.stdout.splitlines() == cmd["argv"]


@pytest.mark.slow
def test_multirun_dry_run_writes_one_command_per_trial(tmp_path):
    proc = run_sweep(["-m", "space=smoke", "dry_run=true", f"paths.output_root={tmp_path}/out"], cwd=tmp_path,
                     timeout=300)
    assert proc.returncode == 0, proc.stderr
    commands = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").rglob("command.json"))]
    utils = sorted(a for c in commands for a in c["argv"] if "rollout.gpu_memory_utilization=" in a)
    assert utils == ["actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
                     "actor_rollout_ref.rollout.gpu_memory_utilization=0.6"]
    assert proc.stdout.count("python -m verl.trainer.main_ppo") == 2
