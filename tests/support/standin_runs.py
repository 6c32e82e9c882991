"""Running the verl stand-in (tests/support/standin/verl_standin.py) as the product launches verl: a subprocess
with verl's argv in a temp cwd, ``hydra.run.dir`` in the temp dir, the caller's verl/MLflow variables removed."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from verlsweep.trial.metrics import strip_ansi

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "support" / "standin" / "verl_standin.py"
PREFIX_V1 = re.compile(r"^\(TaskRunnerV1 pid=(\d+)\) step:(\d+) - ", re.M)
PREFIX_V0 = re.compile(r"^\(TaskRunner pid=(\d+)\) step:(\d+) - ", re.M)
REQUIRED_METRICS = (
    "perf/throughput",
    "perf/total_num_tokens",
    "perf/time_per_step",
    "timing_s/step",
    "timing_s/gen",
    "timing_s/update_actor",
    "actor/perf/max_memory_allocated_gb",
    "actor/perf/max_memory_reserved_gb",
    "actor/pg_loss",
    "critic/score/mean",
    "response_length/mean",
    "training/global_step",
)
FAST = ["+standin.step_seconds=0.01"]


def clean_env(**extra: str) -> dict[str, str]:
    # The caller's own verl/mlflow/stand-in variables must not leak into a test's run.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERL_STANDIN_", "MLFLOW_", "VERL_FILE_LOGGER_", "HYDRA_FULL_ERROR"))
    }
    env.update(extra)
    return env


def run_standin(
    tmp_path: Path, *overrides: str, env: dict[str, str] | None = None, timeout: float = 120, raw: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the stand-in to completion with verl-style argv, in ``tmp_path``; its output is read without Ray's
    colour codes (as verlsweep reads it) unless ``raw``."""
    args = [sys.executable, str(STANDIN), *overrides, f"hydra.run.dir={tmp_path / 'hydra_run'}"]
    res = subprocess.run(
        args, cwd=tmp_path, env=env or clean_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    return res if raw else plain(res)


def plain(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    res.stdout, res.stderr = strip_ansi(res.stdout or ""), strip_ansi(res.stderr or "")
    return res


def steps_of(stdout: str, pattern: re.Pattern[str] = PREFIX_V1) -> list[int]:
    return [int(m.group(2)) for m in pattern.finditer(stdout)]


def console_metrics(stdout: str, step: int) -> dict[str, str]:
    line = next(s for s in stdout.splitlines() if re.search(rf"\) step:{step} - ", s))
    fields = line.split(") ", 1)[1].split(" - ")[1:]
    return dict(f.split(":", 1) for f in fields)


def group_members(pgid: int) -> list[int]:
    alive = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return alive


def wait_for(path: Path, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = strip_ansi(path.read_text(errors="replace")) if path.exists() else ""
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not seen in {path} within {timeout}s:\n{text[-2000:]}")


class Background:
    """The stand-in in its own session/process group with stdout/stderr in files (children inherit them)."""

    def __init__(self, tmp_path: Path, *overrides: str, env: dict[str, str] | None = None) -> None:
        self.out = tmp_path / "stdout.txt"
        self.err = tmp_path / "stderr.txt"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(STANDIN), *overrides, f"hydra.run.dir={tmp_path / 'hydra_run'}"],
                cwd=tmp_path,
                env=env or clean_env(),
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
