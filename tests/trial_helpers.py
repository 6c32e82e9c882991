"""Shared by the runner/tracking tests: an MLflow store per test, `python sweep.py` in a subprocess,
and a check that no process of a test's trials is left."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "standin" / "verl_standin.py"
TEST_MARK = "VERLSWEEP_TEST_MARK"     # inherited by every process a test's sweep starts


def copy_store(template: Path, dst_dir: Path) -> str:
    path = dst_dir / "mlflow.db"
    shutil.copy(template, path)
    return f"sqlite:///{path}"


def tiny_overrides(model_dir: Path, data_dir: Path, out_dir: Path, uri: str) -> list[str]:
    """A trial of the tiny fixture model on a2_64g that our rules and verl's accept."""
    return [
        "hardware=a2_64g", "model=qwen3_0_6b", f"model.path={model_dir}", f"data.dir={data_dir}",
        "verl.data.train_batch_size=8", "verl.actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "verl.data.max_prompt_length=64", "verl.data.max_response_length=64",
        f"paths.output_root={out_dir}", f"tracking.uri={uri}", "plan.enforce=false",
    ]


def standin_entrypoint() -> str:
    return f"runner.entrypoint=[python,{STANDIN}]"


def run_sweep(cwd: Path, args: list[str], mark: str, *, multirun: bool = False, timeout: float = 600,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.pop("MLFLOW_TRACKING_URI", None)
    full_env.pop("MLFLOW_RUN_ID", None)
    full_env[TEST_MARK] = mark
    full_env.update(env or {})
    argv = [sys.executable, str(REPO / "sweep.py"), *(["-m"] if multirun else []), *args]
    return subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def new_mark() -> str:
    return uuid.uuid4().hex


def survivors(mark: str) -> list[str]:
    """Processes still carrying the test's mark (the sweep itself has exited by then)."""
    found = []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if proc.environ().get(TEST_MARK) == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])[:200]}")
        except (psutil.Error, OSError):
            continue
    return found
