"""`python sweep.py ... dry_run=true`: the composed verl command as a runnable snippet and command.json,
one per trial in a multirun (unit tests of the composition: tests/test_compose.py)."""
from __future__ import annotations

import json
import os
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


# --- a config dir of the user's, outside the checkout --------------------------------------------

SITE_HARDWARE = """# @package _global_
# 4x NVIDIA L40S 48 GB
defaults:
  - /device: cuda

hardware:
  name: lab_l40s
  description: 4x NVIDIA L40S 48 GB
  devices_per_node: 4
  nnodes: 1
  hbm_total_gb: 48.0
  hbm_usable_gb: 44.4
  idle_reserved_gb: 0.5
  bf16_tflops: 362
  hbm_bandwidth_gbs: 864
  host_link_gbs: 32
  host_memory_gb: 512
"""
# Llama-3.2-1B-Instruct's config.json fields (huggingface.co/meta-llama/Llama-3.2-1B-Instruct)
SITE_MODEL = """# @package _global_
model:
  name: llama3_2_1b
  hf_id: meta-llama/Llama-3.2-1B-Instruct
  path: ${paths.model_root}/Llama-3.2-1B-Instruct
  config:
    model_type: llama
    num_hidden_layers: 16
    hidden_size: 2048
    num_attention_heads: 32
    num_key_value_heads: 8
    head_dim: 64
    intermediate_size: 8192
    vocab_size: 128256
    tie_word_embeddings: true
    max_position_embeddings: 131072

verl:
  actor_rollout_ref:
    rollout:
      tensor_model_parallel_size: 1
      gpu_memory_utilization: 0.5
"""


def site_dir(root: Path) -> Path:
    site = root / "site" / "conf"
    (site / "hardware").mkdir(parents=True)
    (site / "model").mkdir()
    (site / "hardware" / "lab_l40s.yaml").write_text(SITE_HARDWARE)
    (site / "model" / "llama3_2_1b.yaml").write_text(SITE_MODEL)
    return site


@pytest.mark.slow
@pytest.mark.parametrize("how", ["VERLSWEEP_CONFIG_PATH", "hydra.searchpath", "--config-dir"])
def test_a_hardware_profile_and_a_model_from_a_dir_outside_the_checkout_dry_run(tmp_path, monkeypatch, how):
    from verlsweep.command.compose import compose_config
    from verlsweep.common.names import CONFIG_PATH_ENV
    from verlsweep.plan.predictor.inputs import from_cfg
    from verlsweep.plan.predictor.verdict import predict_cfg

    site = site_dir(tmp_path)
    assert REPO not in site.parents
    picks = ["hardware=lab_l40s", "model=llama3_2_1b"]
    monkeypatch.setenv(CONFIG_PATH_ENV, str(site))
    cfg = compose_config(picks)
    expected = predict_cfg(cfg).summary()         # what the planner makes of the site's numbers
    assert from_cfg(cfg).model.params == 1.236e9 and from_cfg(cfg).hardware.world == 4
    assert expected != predict_cfg(compose_config(["hardware=lab_l40s", "model=qwen3_0_6b"])).summary()
    monkeypatch.delenv(CONFIG_PATH_ENV)

    where = {"VERLSWEEP_CONFIG_PATH": [], "hydra.searchpath": [f"hydra.searchpath=[file://{site}]"],
             "--config-dir": ["--config-dir", str(site)]}[how]
    env = {**os.environ, CONFIG_PATH_ENV: str(site)} if how == CONFIG_PATH_ENV else dict(os.environ)
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), *where, *picks, "dry_run=true",
                           "validate.verl=false", f"paths.output_root={tmp_path}/out"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"# planner: (hardware=lab_l40s, predicted) {expected}" in proc.stdout
    [command_json] = list((tmp_path / "out").rglob("command.json"))
    argv = json.loads(command_json.read_text())["argv"]
    assert {"trainer.device=cuda", "trainer.n_gpus_per_node=4",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1"} <= set(argv)
